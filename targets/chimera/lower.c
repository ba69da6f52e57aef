/* lower.c — the Chimera kernel list, core split and tiling.
 *
 * ch_lower: one kernel per node of the fused graph, in graph order (which is
 * topological); checks every op, dtype and shape the back end supports,
 * every float activation's format (Value.frac_bits), finds the op's row of
 * the op table (ops/ops.c), asks its kernel for the blobs, MACs and ALU ops,
 * and computes each activation's liveness (producing kernel .. last reading
 * kernel).
 *
 * ch_tile (after alloc.c placed the buffers): split, tiling, per-core counts,
 * by the strategy of the op's row (ChOp.tile: CH_TILE_*) and its row
 * reductions (ChOp.reductions).
 *
 *   split   matmul-like kernels (MatMulNBits, ConvStem, LogMel) over rows
 *           (tokens/frames) when there are at least as many rows as cores,
 *           else over output channels ("cols"); attention over heads when
 *           the cores divide them, else over (head, query row) pairs
 *           ("rows": 6 heads on 4 cores would leave two cores half idle);
 *           row-wise kernels (norms, elementwise, Gather, Cast) over rows;
 *           GreedyArgMax over rows, or over the vocabulary for one row.
 *           A core gets floor or ceil of units/cores (the first ones ceil).
 *   tiling  a matmul M×K·K×N on a core maps output rows to PE rows and
 *           output columns to PE columns: every PE keeps r×q accumulators
 *           (int64, 8 B) and double-buffered operand slices r×kc (A) and
 *           kc×q (B) in its LRM:  8rq + 2(r·kc·a + kc·q·b) ≤ lrm_bytes.
 *           The tile is m = r·pe_rows, n = q·pe_cols, k = kc; kc is the
 *           largest fitting multiple of 8 (≤ K, and at least min(K, 32): one
 *           int4 block); r ≤ ⌈M/pe_rows⌉, q ≤ ⌈N/pe_cols⌉ minimise the
 *           OCM→LRM traffic (ties: fewer tiles). Row-wise kernels stream whole rows: a tile is
 *           as many rows as the PEs' LRM holds, double buffered (in + out).
 *   counts  per core: macs and alu_ops = the kernel's totals (ops/)
 *           shared in proportion to the core's units;
 *           ocm_read  = OCM→LRM bytes: matmul A re-read once per column
 *                       block, B once per row block (operand re-reads), plus
 *                       bias/scales; row-wise: every input byte once;
 *           ocm_write = LRM→OCM bytes: the outputs (once);
 *           array_bytes = bytes forwarded between neighbouring PEs: each A
 *                       tile element travels along its PE row (pe_cols−1
 *                       hops), each B element along its PE column
 *                       (pe_rows−1 hops); row reductions (norm statistics,
 *                       softmax max/sum, argmax) move 4 B × (pe_cols−1) per
 *                       row and pass;
 *           ext_read/ext_write = the kernel's DDR traffic (DMA of staged
 *                       weights, fills, module IO, spills; buffers read or
 *                       written in place in DDR), shared evenly by its cores.
 */
#include <stdlib.h>
#include <string.h>
#include "chimera.h"

const char *ch_op_name(Arena *a, const Node *n)
{
	if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0)
		return arena_printf(a, "%s.%s", n->domain, n->op_type);
	return n->op_type;
}

const char *ch_node_label(const Node *n)
{
	return n->name && *n->name ? n->name : (n->noutputs > 0 && n->outputs[0] ? n->outputs[0]->name : "?");
}

int ch_fmt(const Value *v)
{
	switch (v->type.elem) {
	case DT_INT64: return -4;
	case DT_INT32: return -3;
	case DT_INT8: return -5;
	case DT_UINT8: return -6;
	default: break;
	}
	if (v->frac_bits >= 0 && v->frac_bits <= 31)
		return v->frac_bits;
	return v->frac_bits == FRAC_FP16 ? -2 : -1;
}

const char *ch_fmt_label(const Value *v, char buf[16])
{
	int f = ch_fmt(v);
	if (f >= 0)
		snprintf(buf, 16, "Q%d", f);
	else
		snprintf(buf, 16, "%s", f == -1 ? "f32" : f == -2 ? "fp16" : f == -3 ? "i32" : f == -5 ? "i8" : f == -6 ? "u8" : "i64");
	return buf;
}

static int elem_bytes(const Value *v)
{
	switch (v->type.elem) {
	case DT_INT64: return 8;
	case DT_INT32: return 4;
	case DT_INT8:
	case DT_UINT8: return 1;
	default: return v->frac_bits == FRAC_FP16 ? 2 : 4;
	}
}

/* Checks one activation value (not an initializer) used or produced by n. */
static int check_value(ChModule *cm, const Node *n, const Value *v, Diag *d)
{
	const char *model = cm->o->model_path, *op = ch_op_name(cm->a, n), *nn = ch_node_label(n);
	if (v->type.kind != TY_TENSOR || !v->type.has_shape)
		return diag_fail(d, "%s: node '%s': op '%s': tensor '%s': no static shape (the chimera targets need static shapes)",
		                 model, nn, op, v->name);
	for (int i = 0; i < v->type.rank; i++)
		if (v->type.dims[i].kind != DIM_VALUE || v->type.dims[i].value < 0)
			return diag_fail(d, "%s: node '%s': op '%s': tensor '%s': dim %d is dynamic ('%s'); the chimera targets need static shapes",
			                 model, nn, op, v->name, i,
			                 v->type.dims[i].param ? v->type.dims[i].param : "?");
	switch (v->type.elem) {
	case DT_FLOAT:
	case DT_FLOAT16:
		if (v->frac_bits == FRAC_UNSET)
			return diag_fail(d, "%s: node '%s': op '%s': tensor '%s': value has no fixed-point format (run with --tranges)",
			                 model, nn, op, v->name);
		if (!(v->frac_bits >= 0 && v->frac_bits <= 31) && v->frac_bits != FRAC_FP16 && v->frac_bits != FRAC_F32)
			return diag_fail(d, "%s: node '%s': op '%s': tensor '%s': invalid format %d", model, nn, op, v->name,
			                 v->frac_bits);
		break;
	case DT_INT64:
	case DT_INT32:
	case DT_INT8:
	case DT_UINT8:
		break;
	default:
		return diag_fail(d, "%s: node '%s': op '%s': tensor '%s': dtype %s is not supported by the chimera targets",
		                 model, nn, op, v->name, dtype_name(v->type.elem) ? dtype_name(v->type.elem) : "?");
	}
	return WL_OK;
}

static ChVal *val_of(ChModule *cm, const Value *v)
{
	WL_ASSERT(v->id >= 0 && v->id < cm->nvals);
	return &cm->vals[v->id];
}

static void val_init(ChModule *cm, Value *v)
{
	ChVal *cv = val_of(cm, v);
	if (cv->v)
		return;
	cv->v = v;
	cv->bytes = (uint64_t)type_numel(&v->type) * (uint64_t)elem_bytes(v);
	cv->def = -1;
}

int ch_lower(ChModule *cm, Diag *d)
{
	Graph *g = cm->m->graph;
	const char *model = cm->o->model_path;
	int maxid = cm->m->next_value_id;
	for (int i = 0; i < g->nvalues; i++)
		if (g->values[i]->id >= maxid)
			maxid = g->values[i]->id + 1;
	cm->nvals = maxid;
	cm->vals = calloc((size_t)maxid + 1, sizeof *cm->vals);
	cm->k = calloc((size_t)g->nnodes + 1, sizeof *cm->k);

	for (int i = 0; i < g->ninputs; i++) {
		Value *v = g->inputs[i];
		if (v->init)
			continue;
		if (v->type.kind != TY_TENSOR || !v->type.has_shape)
			return diag_fail(d, "%s: graph input '%s': no static shape (the chimera targets need static shapes)",
			                 model, v->name);
		val_init(cm, v);
		val_of(cm, v)->io_in = true;
	}
	int ki = 0;
	FOR_NODES(g, n) {
		const ChOp *op = chimera_op(n->op);
		if (!op)
			return diag_fail(d, "%s: node '%s': op '%s': tensor '%s': op not supported by the chimera targets",
			                 model, ch_node_label(n), ch_op_name(cm->a, n),
			                 n->ninputs > 0 && n->inputs[0] ? n->inputs[0]->name : ch_node_label(n));
		if (n->noutputs < 1 || !n->outputs[0])
			return diag_fail(d, "%s: node '%s': op '%s': no first output", model, ch_node_label(n),
			                 ch_op_name(cm->a, n));
		if (n->ninputs > 16 || n->noutputs > 8)
			return diag_fail(d, "%s: node '%s': op '%s': too many inputs or outputs", model, ch_node_label(n),
			                 ch_op_name(cm->a, n));
		for (int j = 0; j < n->ninputs; j++) {
			Value *v = n->inputs[j];
			if (!v || v->init)
				continue;
			if (check_value(cm, n, v, d) != WL_OK)
				return WL_ERR;
			val_init(cm, v);
			ChVal *cv = val_of(cm, v);
			if (cv->def == -1 && !cv->io_in)
				return diag_fail(d, "%s: node '%s': tensor '%s': read before it is produced", model,
				                 ch_node_label(n), v->name);
		}
		for (int j = 0; j < n->noutputs; j++) {
			Value *v = n->outputs[j];
			if (!v)
				continue;
			if (check_value(cm, n, v, d) != WL_OK)
				return WL_ERR;
			val_init(cm, v);
			ChVal *cv = val_of(cm, v);
			cv->def = ki;
		}
		ChKernel *k = &cm->k[ki];
		k->n = n;
		k->op = op;
		if (ccl_kernel_info(n, &k->ki, d) != WL_OK) {
			if (strncmp(d->msg, model, strlen(model)) != 0)   /* ck_fail names the module's path */
				diag_prefix(d, "%s: ", model);
			return WL_ERR;
		}
		WL_ASSERT(k->ki.nblobs >= 0 && k->ki.nblobs <= 8);
		ki++;
		cm->nk = ki;
	}
	for (int i = 0; i < g->noutputs; i++) {
		Value *v = g->outputs[i];
		ChVal *cv = v->id >= 0 && v->id < cm->nvals ? val_of(cm, v) : NULL;
		if (!cv || !cv->v || cv->def < 0)
			return diag_fail(d, "%s: graph output '%s': not computed by a kernel (constant or pass-through outputs are not supported by the chimera targets)",
			                 model, v->name);
		cv->io_out = true;
	}
	return WL_OK;
}

/* ---------------------------------------------------------------- tiling */

static int64_t dimv(const Value *v, int i)
{
	if (!v || !v->type.has_shape || v->type.rank == 0)
		return 1;
	if (i < 0)
		i += v->type.rank;
	if (i < 0 || i >= v->type.rank)
		return 1;
	return v->type.dims[i].value;
}

static int64_t rows_of(const Value *v)
{
	int64_t n = type_numel(&v->type), last = dimv(v, -1);
	return last > 0 ? n / last : 0;
}

static int64_t cdiv(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

/* units of core c when `units` are split over `nc` cores */
static int64_t share(int64_t units, int nc, int c)
{
	int64_t base = units / nc, rem = units % nc;
	return base + (c < rem ? 1 : 0);
}

static uint64_t prop(uint64_t total, int64_t part, int64_t whole)
{
	if (whole <= 0)
		return 0;
	return (uint64_t)((unsigned __int128)total * (uint64_t)part / (uint64_t)whole);
}

/* Shares total over nc cores in proportion to their units; exact sum. */
static void spread(uint64_t total, const ChKernel *k, uint64_t *out)
{
	uint64_t acc = 0;
	int64_t cum = 0;
	for (int c = 0; c < k->ncores; c++) {
		cum += share(k->units, k->ncores, c);
		uint64_t upto = prop(total, cum, k->units);
		out[c] = upto - acc;
		acc = upto;
	}
}

typedef struct MM {
	int64_t m, n, k, count;
	uint64_t lrm, ocm_read, array;
} MM;

/* One M×K·K×N matmul on one core: A elements of abits, B of bbits, int64 acc. */
static MM mm_tile(const ChimeraConfig *cfg, int64_t M, int64_t K, int64_t N, int abits, int bbits)
{
	MM best = {0};
	if (M <= 0 || N <= 0 || K <= 0)
		return best;
	int64_t rmax = cdiv(M, cfg->pe_rows), qmax = cdiv(N, cfg->pe_cols);
	bool have = false;
	if (rmax > 64)
		rmax = 64;
	if (qmax > 64)
		qmax = 64;
	int64_t kmin = K < 32 ? K : 32;   /* at least one int4 block per step */
	for (int64_t r = 1; r <= rmax; r++) {
		for (int64_t q = 1; q <= qmax; q++) {
			int64_t acc = 8 * r * q;
			if (acc >= (int64_t)cfg->lrm_bytes)
				break;
			/* largest kc (multiple of 8, or K) with 2·kc·(r·a + q·b)/8 ≤ room */
			int64_t room = (int64_t)cfg->lrm_bytes - acc;
			int64_t per_k2 = 2 * (r * abits + q * bbits);      /* bits per k step, double buffered */
			int64_t kc = room * 8 / per_k2;
			if (kc >= K)
				kc = K;
			else
				kc = kc / 8 * 8;
			if (kc < kmin)
				break;
			int64_t tm = r * cfg->pe_rows, tn = q * cfg->pe_cols;
			int64_t mb = cdiv(M, tm), nb = cdiv(N, tn), kb = cdiv(K, kc);
			uint64_t a_bytes = (uint64_t)(M * K) * (uint64_t)abits / 8;
			uint64_t b_bytes = (uint64_t)(K * N) * (uint64_t)bbits / 8;
			uint64_t rd = (uint64_t)nb * a_bytes + (uint64_t)mb * b_bytes;
			MM c = {.m = tm, .n = tn, .k = kc, .count = mb * nb * kb, .ocm_read = rd};
			c.lrm = (uint64_t)acc + (uint64_t)((kc * per_k2 + 7) / 8);
			c.array = (uint64_t)nb * a_bytes * (uint64_t)(cfg->pe_cols - 1) +
			          (uint64_t)mb * b_bytes * (uint64_t)(cfg->pe_rows - 1);
			bool better = !have || rd < best.ocm_read ||
			              (rd == best.ocm_read && c.count < best.count);
			if (better) {
				best = c;
				have = true;
			}
		}
	}
	if (!have) {   /* LRM too small for a block: one row, one column, 8 deep */
		int64_t kc = K < 8 ? K : 8;
		best = (MM){.m = cfg->pe_rows, .n = cfg->pe_cols, .k = kc,
		            .count = cdiv(M, cfg->pe_rows) * cdiv(N, cfg->pe_cols) * cdiv(K, kc),
		            .lrm = 8 + (uint64_t)(2 * kc * (abits + bbits) + 7) / 8};
		best.ocm_read = (uint64_t)cdiv(N, cfg->pe_cols) * (uint64_t)(M * K) * (uint64_t)abits / 8 +
		                (uint64_t)cdiv(M, cfg->pe_rows) * (uint64_t)(K * N) * (uint64_t)bbits / 8;
		best.array = best.ocm_read * (uint64_t)(cfg->pe_cols - 1);
	}
	return best;
}

static void mm_add(MM *acc, MM x)
{
	if (x.m > acc->m || acc->count == 0) {
		acc->m = x.m;
		acc->n = x.n;
		acc->k = x.k;
	}
	acc->count += x.count;
	if (x.lrm > acc->lrm)
		acc->lrm = x.lrm;
	acc->ocm_read += x.ocm_read;
	acc->array += x.array;
}

static int vbits(const Value *v) { return v ? elem_bytes(v) * 8 : 32; }

static uint64_t vbytes(const Value *v)
{
	return v ? (uint64_t)type_numel(&v->type) * (uint64_t)elem_bytes(v) : 0;
}

/* packed bytes of the kernel's blobs */
static uint64_t blob_bytes(const ChKernel *k)
{
	uint64_t s = 0;
	for (int b = 0; b < k->ki.nblobs; b++)
		s += k->ki.blobs[b].len;
	return s;
}

static void tile_kernel(ChModule *cm, ChKernel *k)
{
	const ChimeraConfig *cfg = cm->cfg;
	Node *n = k->n;
	ChTile cls = k->op->tile;
	Value *x = n->ninputs > 0 ? n->inputs[0] : NULL, *y = n->outputs[0];
	int cores = cfg->cores < 1 ? 1 : cfg->cores > CH_MAX_CORES ? CH_MAX_CORES : cfg->cores;
	uint64_t ocm_write_total = 0;
	for (int j = 0; j < n->noutputs; j++)
		ocm_write_total += vbytes(n->outputs[j]);

	/* the split */
	int64_t rows = y ? rows_of(y) : 1;
	switch (cls) {
	case CH_TILE_MATMUL: {
		int64_t N = attr_int(n, "N", dimv(y, -1));
		if (rows >= cores) { k->split = "rows"; k->units = rows; }
		else { k->split = "cols"; k->units = N; }
		break;
	}
	case CH_TILE_ATTENTION:
	case CH_TILE_GQA: {
		/* heads when they divide evenly, else (head, query row) pairs */
		int64_t H = attr_int(n, "heads", 1);
		int64_t T = cls == CH_TILE_GQA ? dimv(x, -2) : attr_int(n, "q_len", dimv(x, -2));
		if (H % cores == 0 || T < 2) { k->split = "heads"; k->units = H; }
		else { k->split = "rows"; k->units = H * T; }
		break;
	}
	case CH_TILE_ARGMAX:
		rows = x ? rows_of(x) : 1;
		if (rows >= cores) { k->split = "rows"; k->units = rows; }
		else { k->split = "cols"; k->units = dimv(x, -1); }
		break;
	case CH_TILE_LOGMEL:   /* y [1, n_mels, frames]: frames */
		k->split = "rows";
		k->units = dimv(y, -1);
		break;
	default:
		k->split = "rows";
		k->units = rows;
		break;
	}
	if (k->units < 1)
		k->units = 1;
	k->ncores = k->units < cores ? (int)k->units : cores;
	if (k->ncores <= 1 && k->units <= 1)
		k->split = "none";

	uint64_t macs[CH_MAX_CORES] = {0}, alu[CH_MAX_CORES] = {0};
	spread(k->ki.macs, k, macs);
	spread(k->ki.alu_ops, k, alu);
	uint64_t ext_r = 0, ext_w = 0;
	for (int i = 0; i < k->ndma; i++) {
		if (k->dma[i].dir == 0)
			ext_r += k->dma[i].bytes;
		else
			ext_w += k->dma[i].bytes;
	}
	ext_r += k->direct_ext_read;
	ext_w += k->direct_ext_write;

	MM first = {0};
	for (int c = 0; c < k->ncores; c++) {
		int64_t u = share(k->units, k->ncores, c);
		MM t = {0};
		uint64_t rd = 0, wr = prop(ocm_write_total, u, k->units), arr = 0;
		switch (cls) {
		case CH_TILE_MATMUL: {
			int64_t K = attr_int(n, "K", dimv(x, -1)), N = attr_int(n, "N", dimv(y, -1));
			int64_t bits = n->op == OP_WlQMatMul ? 8 : attr_int(n, "bits", 4);
			int64_t Mc = !strcmp(k->split, "cols") ? rows : u, Nc = !strcmp(k->split, "cols") ? u : N;
			t = mm_tile(cfg, Mc, K, Nc, vbits(x), (int)bits);
			/* scales/zero points/bias beside the weights: once per row block */
			uint64_t side = blob_bytes(k) > (uint64_t)(K * N * bits / 8)
				? blob_bytes(k) - (uint64_t)(K * N * bits / 8) : 0;
			rd = t.ocm_read + prop(side, Nc, N) * (uint64_t)cdiv(Mc, t.m ? t.m : 1);
			arr = t.array;
			break;
		}
		case CH_TILE_ATTENTION:
		case CH_TILE_GQA: {
			int64_t H = attr_int(n, "heads", 1);
			int64_t hd = cls == CH_TILE_GQA ? attr_int(n, "head_dim", dimv(x, -1) / (H ? H : 1))
			                          : attr_int(n, "embed", dimv(x, -1)) / (H ? H : 1);
			int64_t T = cls == CH_TILE_GQA ? dimv(x, -2) : attr_int(n, "q_len", dimv(x, -2));
			int64_t S = cls == CH_TILE_GQA ? T + (n->ninputs > 5 && n->inputs[5] ? dimv(n->inputs[5], -2) : 0)
			                         : attr_int(n, "kv_len", T);
			int ab = vbits(x);
			bool by_heads = !strcmp(k->split, "heads") || !strcmp(k->split, "none");
			int64_t qrows = by_heads ? u * T : u;              /* query rows of this core */
			int64_t hc = by_heads ? u : cdiv(u, T ? T : 1);     /* heads it touches */
			if (hc < 1)
				hc = 1;
			int64_t per = cdiv(qrows, hc);
			MM qk = mm_tile(cfg, per, hd, S, ab, ab), pv = mm_tile(cfg, per, S, hd, 32, ab);
			for (int64_t h = 0; h < hc; h++) {
				mm_add(&t, qk);
				mm_add(&t, pv);
			}
			/* scores written and read back once (softmax pass) */
			rd = t.ocm_read + (uint64_t)(qrows * S * 4);
			wr += (uint64_t)(qrows * S * 4);
			arr = t.array + (uint64_t)qrows * (uint64_t)k->op->reductions * 4u * (uint64_t)(cfg->pe_cols - 1);
			break;
		}
		case CH_TILE_CONV: {
			int64_t C = dimv(x, 1), D = dimv(y, -1), F2 = dimv(y, -2);
			int64_t u1 = prop((uint64_t)(2 * F2), u, F2 ? F2 : 1);   /* conv1 rows feeding this core */
			MM c1 = mm_tile(cfg, u1, C * 3, D, vbits(x), 32), c2 = mm_tile(cfg, u, D * 3, D, 32, 32);
			mm_add(&t, c1);
			mm_add(&t, c2);
			rd = t.ocm_read;
			arr = t.array;
			break;
		}
		case CH_TILE_LOGMEL: {
			int64_t Mm = dimv(y, -2);
			MM d1 = mm_tile(cfg, u, 400, 402, 32, 32), d2 = mm_tile(cfg, u, 201, Mm, 32, 32);
			mm_add(&t, d1);
			mm_add(&t, d2);
			rd = t.ocm_read + (uint64_t)(u * 160 * 4);
			arr = t.array + (uint64_t)u * 4u * (uint64_t)(cfg->pe_cols - 1);
			break;
		}
		case CH_TILE_GATHER:
		case CH_TILE_ROWS:
		case CH_TILE_ARGMAX: {
			uint64_t in_b = 0, per_row = 0;
			for (int j = 0; j < n->ninputs; j++) {
				Value *v = n->inputs[j];
				if (!v)
					continue;
				if (v->init && cls != CH_TILE_GATHER)
					in_b += 0;   /* gamma/beta: counted below, once per tile */
				else if (!v->init)
					in_b += vbytes(v);
			}
			if (cls == CH_TILE_GATHER)
				in_b += ocm_write_total;            /* the gathered rows */
			rd = prop(in_b, u, k->units);
			int64_t rowlen = dimv(cls == CH_TILE_ARGMAX ? x : y, -1);
			per_row = (uint64_t)rowlen * 8u;        /* in + out, 4 B each */
			uint64_t pes = (uint64_t)cfg->pe_rows * (uint64_t)cfg->pe_cols;
			uint64_t rows_fit = per_row ? pes * (cfg->lrm_bytes / 2) / per_row : 1;
			if (rows_fit < 1)
				rows_fit = 1;
			int64_t urows = !strcmp(k->split, "cols") ? 1 : u;
			t.m = (int64_t)rows_fit < urows ? (int64_t)rows_fit : urows;
			t.n = !strcmp(k->split, "cols") ? u : rowlen;
			t.k = 0;
			t.count = cdiv(urows, t.m ? t.m : 1);
			uint64_t per_pe = (uint64_t)t.m * per_row / pes;
			t.lrm = 2 * per_pe < cfg->lrm_bytes ? 2 * per_pe : cfg->lrm_bytes;
			if (t.lrm == 0)
				t.lrm = 16;
			/* constant operands (gamma, beta, ...) once per tile */
			if (cls != CH_TILE_GATHER)
				rd += blob_bytes(k) * (uint64_t)t.count;
			arr = (uint64_t)urows * (uint64_t)k->op->reductions * 4u * (uint64_t)(cfg->pe_cols - 1);
			break;
		}
		}
		if (c == 0)
			first = t;
		if (t.lrm > k->tile_lrm)
			k->tile_lrm = t.lrm;
		k->tile_count += t.count;
		ChCore *cc = &k->core[c];
		cc->core = c;
		cc->macs = macs[c];
		cc->alu_ops = alu[c];
		cc->array_bytes = arr;
		cc->ocm_read = rd;
		cc->ocm_write = wr;
		cc->ext_read = ext_r / (uint64_t)k->ncores + ((uint64_t)c < ext_r % (uint64_t)k->ncores ? 1 : 0);
		cc->ext_write = ext_w / (uint64_t)k->ncores + ((uint64_t)c < ext_w % (uint64_t)k->ncores ? 1 : 0);
	}
	k->tile_m = first.m;
	k->tile_n = first.n;
	k->tile_k = first.k;
	if (k->tile_lrm > cm->lrm_peak)
		cm->lrm_peak = k->tile_lrm;
}

void ch_tile(ChModule *cm)
{
	for (int i = 0; i < cm->nk; i++)
		tile_kernel(cm, &cm->k[i]);
}

void ch_free(ChModule *cm)
{
	for (int i = 0; i < cm->nk; i++)
		ccl_kernel_info_free(&cm->k[i].ki);
	free(cm->k);
	free(cm->vals);
	free(cm->spills);
}
