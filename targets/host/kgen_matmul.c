/* kgen_matmul.c — host kernel for ai.wlower.MatMulNBits (docs/OPS.md).
 *
 * Y[M, N] = A[M, K] · W[K, N] + bias, W given as 4-bit blocks (bits 4), as
 * float32 [K, N] (bits 32: a constant is copied at compile time into
 * panel-major float panels, pack_float; a graph input is read in place),
 * or float32 [N, K] (bits 32, trans_b = 1, the tied LM head read in place);
 * `splits` cut N into several outputs.
 * `groups` = G > 1 (bits 32, no trans_b, no splits): W is float32 [K, N/G],
 * the diagonal blocks of a block-diagonal [K, N]; a panel of columns col ..
 * col+NR lies in group g = col / (N/G) (N/G must be a multiple of NR, so a
 * panel never straddles two groups), runs K/G rows of k and reads A at
 * g·K/G + k and W at (g·K/G + k)·N/G + col − g·N/G. Grouped weights stay
 * fp32 under --host-precision bf16.
 *
 * Register-blocked GEMM, vw = 16 (AVX-512) or 8 (AVX2) floats per vector:
 * a micro-kernel computes an MR x NR tile of Y (NR = 2 vectors = 32 or 16
 * columns, MR = 12 or 6 rows; accumulators stay in registers over the whole
 * K loop). For every k it broadcasts A[m, k] of the MR rows and multiplies
 * them (llvm.fma) with the NR weights of row k.
 *
 * 4-bit weights stay 4-bit: hg_prepare_matmul_nbits repacks them (at compile
 * time, into weights.bin) N-interleaved per NR-column panel: panel t, k pair
 * p holds NR bytes, byte j = q[2p][n] | q[2p+1][n] << 4 for n = t·NR + j; per
 * (panel, k block) a row of NR scales and a row of NR zero-point bytes (the
 * kernel makes the offsets −zp·scale once per block; float zero points: a
 * row of NR float offsets instead, attribute host_zp_bytes absent).
 * The micro-kernel zero-extends 16 bytes into an integer vector, splits the
 * nibbles (and 15, shift 4), converts, and dequantizes in registers with one
 * fma (q·scale + offset) per vector: no float weight buffer exists. Each
 * split is padded to whole panels (zero weights), so loads are never masked;
 * stores of a split's last, partial panel are.
 *
 * Work split: tasks = M tiles x N groups (N groups only when M is small,
 * e.g. one token), run through api->parallel_for. Bias is added in the
 * epilogue (fused); the outputs of `splits` are written directly.
 *
 * Epilogue fusion (hg_prepare_matmul_nbits, single-output nodes): a
 * following erf GELU and then a residual Add (same shape, computed before
 * this node) are absorbed; the residual becomes input 5. The environment
 * variable WLOWER_HOST_NO_EPILOGUE=1 turns this off (A/B measurements).
 *
 * Activations are read in place (no packed A panel: with the accumulators
 * kept over the whole K loop the MR rows are broadcast from L1/L2 at fixed
 * offsets, which measured the same).
 *
 * trans_b = 1: dot products along K (vectors over k) for 4 columns x up to 4
 * rows at a time, reduced horizontally at the end; parallel over columns.
 *
 * --host-precision bf16 (AVX512-BF16): the 4-bit panel path dequantizes into
 * bf16 pair panels and multiplies them by vdpbf16ps (panel_tile_bf16);
 * constant float weights are rounded at compile time into those panels
 * (pack_float: panel and in-register paths) or, with trans_b, into bf16
 * rows (pack_dot_bf16; a tied table's embedding Gathers then read those rows
 * too, and the float table is dropped when nothing else reads it).
 * docs/host-contracts.md has the layouts.
 */
#include <stdlib.h>
#include <string.h>
#include "hostgen.h"


#define MAXSPLIT 24
/* bf16 panels from float weights: K cache blocks are multiples of this */
#define BF16W_KC 32

typedef struct MM {
	const Node *n;
	int64_t M, K, N, bits, block, kblocks, trans_b;
	int64_t groups;          /* bits 32: W is [K, N/groups], block diagonal (1: plain) */
	bool zpb;                /* 4-bit packed: input 3 holds zero points as bytes (the offsets
	                            −zp·scale are made per block); else float offsets */
	int nsplit;
	int64_t soff[MAXSPLIT], slen[MAXSPLIT], tstart[MAXSPLIT + 1];  /* column offset, width, first panel */
	int64_t T;               /* panels */
	int NR, NV, MR;
	int64_t MC, KC;          /* panel path: rows per M block, k per cache block (0: in-register path) */
	bool bf16;               /* panel path: --host-precision bf16 (vdpbf16ps on bf16 panels) */
	bool bf16w;              /* bits 32 repacked at compile time into bf16 panels (host_bf16w) */
	bool f32p;               /* bits 32 repacked at compile time into float panels (host_f32p) */
	LLVMValueRef Ab;         /* bf16: the M block of A as bf16, rows of KA */
	int64_t KA;              /* bf16: A row stride in bf16 (K rounded up to 16) */
	bool packed, has_tail, has_bias;
	int act;                 /* epilogue: 1 = GELU (erf) */
	bool has_res;            /* epilogue: + residual (input 5, shape of Y) */
	/* inside the body */
	LLVMValueRef A, B, SC, OF, bias, res, Y[MAXSPLIT];
} MM;

static int mm_read(HostGen *g, const Node *n, MM *mm, Diag *d)
{
	memset(mm, 0, sizeof *mm);
	mm->n = n;
	mm->K = attr_int(n, "K", -1);
	mm->N = attr_int(n, "N", -1);
	mm->bits = attr_int(n, "bits", 4);
	mm->block = attr_int(n, "block_size", 0);
	mm->trans_b = attr_int(n, "trans_b", 0);
	mm->groups = attr_int(n, "groups", 1);
	mm->packed = attr_int(n, "host_packed", 0) != 0;
	mm->zpb = mm->packed && attr_int(n, "host_zp_bytes", 0) != 0;
	if (n->ninputs < 2 || !n->inputs[0] || !n->inputs[1])
		return diag_fail(d, "%s: node '%s': MatMulNBits needs A and B", hg_model_name(g), n->name);
	if (mm->K <= 0 || mm->N <= 0)
		return diag_fail(d, "%s: node '%s': MatMulNBits needs positive K and N", hg_model_name(g), n->name);
	if (mm->bits != 4 && mm->bits != 32)
		return diag_fail(d, "%s: node '%s': MatMulNBits bits=%lld is not supported on host (4 or 32)", hg_model_name(g),
		                 n->name, (long long)mm->bits);
	if (mm->bits == 4) {
		if (mm->block < 16 || mm->block > (1 << 20) || (mm->block & (mm->block - 1)))
			return diag_fail(d, "%s: node '%s': MatMulNBits on host needs block_size (%lld) a power of 2 >= 16",
			                 hg_model_name(g), n->name, (long long)mm->block);
		mm->kblocks = (mm->K + mm->block - 1) / mm->block;   /* the last block may be partial */
	}
	const Value *a = n->inputs[0];
	int64_t dims[8];
	int r = hg_dims(g, n, a, dims, d);
	if (r < 0)
		return WL_ERR;
	if (r < 1 || dims[r - 1] != mm->K || a->type.elem != DT_FLOAT)
		return diag_fail(d, "%s: node '%s': tensor '%s': expected float32 [..., K=%lld]", hg_model_name(g), n->name, a->name,
		                 (long long)mm->K);
	mm->M = hg_numel(a) / mm->K;
	const Attr *sp = node_attr(n, "splits");
	if (sp && sp->type == AT_INTS && sp->n > 0) {
		if (sp->n > MAXSPLIT || sp->n != n->noutputs)
			return diag_fail(d, "%s: node '%s': MatMulNBits: %d splits for %d outputs (host: at most %d)", hg_model_name(g),
			                 n->name, sp->n, n->noutputs, MAXSPLIT);
		mm->nsplit = sp->n;
		int64_t off = 0;
		for (int i = 0; i < sp->n; i++) {
			if (sp->ints[i] <= 0)
				return diag_fail(d, "%s: node '%s': MatMulNBits: splits must be positive", hg_model_name(g), n->name);
			mm->soff[i] = off;
			mm->slen[i] = sp->ints[i];
			off += sp->ints[i];
		}
		if (off != mm->N)
			return diag_fail(d, "%s: node '%s': MatMulNBits: splits sum to %lld, N is %lld", hg_model_name(g), n->name,
			                 (long long)off, (long long)mm->N);
	} else {
		if (n->noutputs != 1)
			return diag_fail(d, "%s: node '%s': MatMulNBits: %d outputs without splits", hg_model_name(g), n->name,
			                 n->noutputs);
		mm->nsplit = 1;
		mm->slen[0] = mm->N;
	}
	for (int i = 0; i < n->noutputs; i++)
		if (!n->outputs[i])
			return diag_fail(d, "%s: node '%s': MatMulNBits: absent outputs are not supported on host", hg_model_name(g),
			                 n->name);
	if (mm->trans_b && mm->nsplit > 1)
		return diag_fail(d, "%s: node '%s': MatMulNBits: trans_b=1 with splits is not supported on host", hg_model_name(g),
		                 n->name);
	if (mm->groups < 1)
		return diag_fail(d, "%s: node '%s': MatMulNBits: groups=%lld must be >= 1", hg_model_name(g), n->name,
		                 (long long)mm->groups);
	if (mm->groups > 1) {
		if (mm->bits != 32 || mm->trans_b || sp)
			return diag_fail(d, "%s: node '%s': MatMulNBits: groups=%lld needs bits=32 without trans_b and splits "
			                 "(bits %lld, trans_b %lld%s)", hg_model_name(g), n->name, (long long)mm->groups,
			                 (long long)mm->bits, (long long)mm->trans_b, sp ? ", splits" : "");
		if (mm->K % mm->groups || mm->N % mm->groups)
			return diag_fail(d, "%s: node '%s': MatMulNBits: K=%lld and N=%lld must be multiples of groups=%lld",
			                 hg_model_name(g), n->name, (long long)mm->K, (long long)mm->N, (long long)mm->groups);
	}
	/* blocking: chosen by hg_prepare_matmul_nbits (hg_mm_blocking) and kept
	 * on the node, or the CPU's defaults */
	HgBlocking bl;
	hg_mm_default_blocking(g, mm->M, mm->K, mm->N, mm->block ? mm->block : 1, &bl);
	mm->MR = (int)attr_int(n, "host_mr", bl.mr);
	mm->NV = (int)attr_int(n, "host_nv", bl.nv);
	mm->MC = attr_int(n, "host_mc", 0);
	mm->KC = attr_int(n, "host_kc", 0);
	mm->bf16w = mm->bits == 32 && attr_int(n, "host_bf16w", 0) != 0;
	mm->f32p = mm->bits == 32 && attr_int(n, "host_f32p", 0) != 0;
	int64_t kgran = mm->bf16w ? BF16W_KC : mm->block;   /* KC < K: a multiple of this */
	if (mm->MR < 1 || mm->MR > 16 || mm->NV < 1 || mm->NV > 4 || mm->MC < 0 || mm->KC < 0 ||
	    (mm->MC && (mm->MC % mm->MR || mm->KC <= 0 || (mm->bits != 4 && !mm->bf16w) || (mm->KC < mm->K && mm->KC % kgran))))
		return diag_fail(d, "%s: node '%s': MatMulNBits: bad host blocking (mr %d, nv %d, mc %lld, kc %lld)",
		                 hg_model_name(g), n->name, mm->MR, mm->NV, (long long)mm->MC, (long long)mm->KC);
	mm->NR = mm->NV * g->vw;
	mm->bf16 = g->bf16 && (mm->bits == 4 || mm->bf16w);
	/* a panel of NR columns must lie in one group (tile reads one group's K/G rows) */
	if (mm->groups > 1 && (mm->N / mm->groups) % mm->NR)
		return diag_fail(d, "%s: node '%s': MatMulNBits: groups=%lld: N/groups=%lld is not a multiple of the host panel "
		                 "width %d (a panel would straddle two groups)", hg_model_name(g), n->name,
		                 (long long)mm->groups, (long long)(mm->N / mm->groups), mm->NR);
	for (int i = 0; i < mm->nsplit; i++) {
		mm->tstart[i] = mm->T;
		mm->T += (mm->slen[i] + mm->NR - 1) / mm->NR;
		if (mm->slen[i] % mm->NR)
			mm->has_tail = true;
	}
	mm->tstart[mm->nsplit] = mm->T;
	mm->has_bias = n->ninputs > 4 && n->inputs[4];
	mm->act = (int)attr_int(n, "host_act", 0);
	mm->has_res = n->ninputs > 5 && n->inputs[5];
	return WL_OK;
}

/* ---------------------------------------------------------------- repacking */

/* Element i of float32 data that may be unaligned. */
static float load_f32(const void *base, int64_t i)
{
	float f;
	memcpy(&f, (const char *)base + i * (int64_t)sizeof f, sizeof f);
	return f;
}

/* the only user of v, if v has exactly one and is not a graph output */
static Node *sole_user(const Value *v, int *slot)
{
	if (v->is_output || v->nusers != 1)
		return NULL;
	*slot = v->users[0].slot;
	return v->users[0].node;
}

static bool produced_before(const Value *r, const Node *n)
{
	if (!r->producer)
		return true;
	for (const Node *p = n->graph->first; p && p != n; p = p->next)
		if (p == r->producer)
			return true;
	return false;
}

/* the node's output takes the place of u's output; u is removed */
static void absorb(Node *n, Node *u)
{
	Value *t = n->outputs[0], *y = u->outputs[0];
	node_remove(u);
	n->outputs[0] = y;
	y->producer = n;
	y->producer_slot = 0;
	t->producer = NULL;
}

/* Epilogue fusion (one output, no splits): a following erf GELU, then a
 * following residual Add of a same-shape value computed before this node. */
static void fuse_epilogue(Node *n)
{
	if (n->noutputs != 1 || !n->outputs[0] || node_attr(n, "host_act") || n->ninputs > 5)
		return;
	int slot;
	Node *u = sole_user(n->outputs[0], &slot);
	if (u && (u->op == OP_Gelu || u->op == OP_WlGelu) && u->noutputs == 1 && u->outputs[0] &&
	    !strcmp(attr_string(u, "approximate", "none"), "none")) {
		absorb(n, u);
		node_add_attr(n, "host_act", AT_INT)->i = 1;
	}
	u = sole_user(n->outputs[0], &slot);
	if (!u || u->op != OP_Add || u->ninputs != 2 || u->noutputs != 1 ||
	    !u->outputs[0] || !u->inputs[0] || !u->inputs[1])
		return;
	Value *r = u->inputs[1 - slot], *t = n->outputs[0];
	if (r == t || r->type.elem != DT_FLOAT || !type_shape_known(&r->type) || !type_shape_known(&t->type) ||
	    type_numel(&r->type) != type_numel(&t->type) || r->type.rank != t->type.rank ||
	    !type_equal(&u->outputs[0]->type, &t->type) || !produced_before(r, n))
		return;
	for (int i = 0; i < r->type.rank; i++)
		if (r->type.dims[i].value != t->type.dims[i].value)
			return;
	absorb(n, u);
	while (n->ninputs < 5)
		node_add_input(n, NULL);
	node_add_input(n, r);
}

static void blocking_for(HostGen *g, int mr, int nv, int mcmul, int64_t M, int64_t K, int64_t block, bool full_k,
                         HgBlocking *bl);

/* The chosen blocking on the node, for mm_read; with how it was chosen and the
 * measured time, for manifest.json (host.c) */
static void set_blocking(Node *n, const HgBlocking *bl)
{
	static const char *const hows[] = {"model", "autotune", "cache", "forced", NULL};
	int hw = 0;
	for (int i = 0; hows[i]; i++)
		if (bl->how && !strcmp(bl->how, hows[i]))
			hw = i;
	node_add_attr(n, "host_mr", AT_INT)->i = bl->mr;
	node_add_attr(n, "host_nv", AT_INT)->i = bl->nv;
	node_add_attr(n, "host_mc", AT_INT)->i = bl->mc;
	node_add_attr(n, "host_kc", AT_INT)->i = bl->kc;
	node_add_attr(n, "host_tune", AT_INT)->i = hw;
	node_add_attr(n, "host_tune_ms", AT_FLOAT)->f = (float)bl->ms;
}

/* A constant float W [K, N] and bias (or none) of this node: what the
 * compile-time float panels are made from (a graph input stays in place). */
static bool float_w_constant(const Node *n, const MM *mm)
{
	const Value *B = n->inputs[1], *bias = mm->has_bias ? n->inputs[4] : NULL;
	if (!B->init || B->init->dtype != DT_FLOAT || tensor_numel(B->init) != mm->K * mm->N)
		return false;
	return !bias || (bias->init && bias->init->dtype == DT_FLOAT && tensor_numel(bias->init) == mm->N);
}

/* W [K, N] row by row (contiguous reads: W may be an LM head of 100+ MB) into
 * the node's panels, NR columns each (mm read after the blocking was set):
 * bf16, panel t, k pair p: NR lanes of (W[2p][n], W[2p+1][n]) as uint16
 * (round to nearest even); else float, panel t, row k: NR floats. A split's
 * columns past its width stay zero, as do the bias's (padded per panel).
 * Inputs 1 and 4 become the panels and that bias; host_packed. */
static void float_panels(Node *n, const MM *mm, bool bf)
{
	const Value *B = n->inputs[1], *bias = mm->has_bias ? n->inputs[4] : NULL;
	int64_t NR = mm->NR, T = mm->T, K = mm->K, KP = (K + 1) / 2;
	void *pw, *pbias = NULL;
	Value *vw = bf ? hg_new_init(n->graph, "host_wbf16", DT_UINT16, T * KP * NR * 2, &pw)
	               : hg_new_init(n->graph, "host_wf32", DT_FLOAT, T * K * NR, &pw);
	Value *vbias = bias ? hg_new_init(n->graph, "host_bias", DT_FLOAT, T * NR, &pbias) : NULL;
	uint16_t *ob = pw;
	float *of = pw, *obias = pbias;
	const void *w = B->init->data;
	for (int64_t k = 0; k < K; k++)
		for (int s = 0; s < mm->nsplit; s++)
			for (int64_t c = 0; c < mm->slen[s]; c++) {
				int64_t t = mm->tstart[s] + c / NR, j = c % NR, col = mm->soff[s] + c;
				float x = load_f32(w, k * mm->N + col);
				if (bf)
					ob[((t * KP + k / 2) * NR + j) * 2 + k % 2] = dtype_f32_to_bf16(x);
				else
					of[(t * K + k) * NR + j] = x;
				if (obias && k == 0)
					obias[t * NR + j] = load_f32(bias->init->data, col);
			}
	node_set_input(n, 1, vw);
	while (n->ninputs < 5)
		node_add_input(n, NULL);
	node_set_input(n, 4, vbias);
	node_add_attr(n, "host_packed", AT_INT)->i = 1;
}

/* --host-precision bf16 on float weights (bits 32, W a constant [K, N]): W is
 * rounded once, here, into the bf16 panels the 4-bit path dequantizes into
 * at run time (float_panels; uint16 in weights.bin, half the float bytes)
 * and the bias is padded per panel. The panel path runs panel_tile_bf16
 * straight on them; the in-register path (small M: a step's projections)
 * converts each A pair to bf16 on the fly (tile_bf16w) and streams half the
 * bytes of the float weights. A weight that is not a constant stays float.
 * Blocking: the model's (KC a multiple of BF16W_KC), or
 * WLOWER_HOST_MM_BLOCKING.
 *
 * fp32 float weights (bits 32, W a constant [K, N], no trans_b, no groups):
 * W is copied once, here, into panel-major float panels (panel t, row k: the
 * NR floats W[k][t·NR ..], zero past a split's width; the bias padded per
 * panel), so the in-register path streams each panel's K·NR floats
 * contiguously. Read in place, a panel is K rows of NR floats N floats apart:
 * for a step's LM head (N = 51865, 207 KB between rows) every row is another
 * page and the prefetchers lose the stream (13 GB/s instead of the machine's
 * 24-31). A weight that is not a constant stays in place. */
static int pack_float(HostGen *g, Node *n, bool bf, Diag *d)
{
	MM mm;
	if (mm_read(g, n, &mm, d) != WL_OK)   /* again: the epilogue fusion may have added a residual */
		return WL_ERR;
	if (!float_w_constant(n, &mm))
		return WL_OK;
	HgBlocking bl;
	const char *force = bf ? getenv("WLOWER_HOST_MM_BLOCKING") : NULL;
	if (force && *force) {
		if (hg_mm_blocking(g, n, mm.M, mm.K, mm.N, BF16W_KC, mm.has_res, &bl, d) != WL_OK)
			return WL_ERR;
	} else if (bf) {
		memset(&bl, 0, sizeof bl);
		blocking_for(g, g->avx512 ? 12 : 6, 2, 1, mm.M, mm.K, BF16W_KC, mm.has_res, &bl);
		bl.how = "model";
	} else {
		hg_mm_default_blocking(g, mm.M, mm.K, mm.N, 1, &bl);
		bl.mc = bl.kc = 0;   /* fp32: the in-register path */
	}
	if (bl.mc > 0 && mm.M <= bl.mr)
		bl.mc = bl.kc = 0;
	set_blocking(n, &bl);
	node_add_attr(n, bf ? "host_bf16w" : "host_f32p", AT_INT)->i = 1;
	if (mm_read(g, n, &mm, d) != WL_OK)
		return WL_ERR;
	float_panels(n, &mm, bf);
	return WL_OK;
}

/* --host-precision bf16 with trans_b (W [N, K] read in place: the tied LM
 * head of a step, M of a few rows): a bf16 copy of W in rows of KB = K
 * rounded up to 32 (zero past K), so the dot products stream half the bytes
 * of the float rows; the float W stays for its other users (the embedding
 * Gather of a tied table). emit_dot converts the M rows of A to bf16 once per
 * task (M·KB bf16 on the thread's stack, at most DOT_BF16_MAX elements; more
 * stays float). */
#define DOT_BF16_MAX 65536
static int pack_dot_bf16(HostGen *g, Node *n, Diag *d)
{
	MM mm;
	if (mm_read(g, n, &mm, d) != WL_OK)
		return WL_ERR;
	const Value *B = n->inputs[1];
	int64_t KB = (mm.K + 31) / 32 * 32;
	if (!B->init || B->init->dtype != DT_FLOAT || tensor_numel(B->init) != mm.N * mm.K || mm.M * KB > DOT_BF16_MAX)
		return WL_OK;
	void *pw;
	Value *vw = hg_new_init(n->graph, "host_wbf16", DT_UINT16, mm.N * KB, &pw);
	uint16_t *ow = pw;
	for (int64_t c = 0; c < mm.N; c++)
		for (int64_t k = 0; k < mm.K; k++)
			ow[c * KB + k] = dtype_f32_to_bf16(load_f32(B->init->data, c * mm.K + k));
	node_set_input(n, 1, vw);
	node_add_attr(n, "host_bf16w", AT_INT)->i = 1;
	/* a tied table: the embedding Gathers of W read the bf16 rows too
	 * (hg_emit_gather widens them), so W itself leaves weights.bin when it
	 * has no other user */
	for (int u = B->nusers - 1; u >= 0; u--) {
		Node *gn = B->users[u].node;
		if (gn->op != OP_Gather || B->users[u].slot != 0 || attr_int(gn, "axis", 0) != 0 || gn->noutputs != 1 ||
		    !gn->outputs[0] || gn->outputs[0]->type.elem != DT_FLOAT)
			continue;
		node_set_input(gn, 0, vw);
		node_add_attr(gn, "host_bf16_rows", AT_INT)->i = mm.N;
	}
	return WL_OK;
}

int hg_prepare_matmul_nbits(HostGen *g, Node *n, Diag *d)
{
	MM mm;
	if (mm_read(g, n, &mm, d) != WL_OK)
		return WL_ERR;
	if (mm.nsplit == 1 && !getenv("WLOWER_HOST_NO_EPILOGUE"))
		fuse_epilogue(n);
	/* grouped float weights ([K, N/groups]) stay fp32: no bf16 panels for them */
	if (mm.bits == 32 && g->bf16 && !mm.packed && !attr_int(n, "host_bf16w", 0) && mm.groups == 1)
		return mm.trans_b ? pack_dot_bf16(g, n, d) : pack_float(g, n, true, d);
	if (mm.bits == 32 && !mm.packed && !mm.trans_b && mm.groups == 1)
		return pack_float(g, n, false, d);
	if (mm.bits != 4 || mm.packed)
		return WL_OK;
	/* register and cache blocking for this CPU and shape (packing follows NR) */
	HgBlocking bl;
	if (mm_read(g, n, &mm, d) != WL_OK)   /* again: the epilogue fusion may have added a residual */
		return WL_ERR;
	if (hg_mm_blocking(g, n, mm.M, mm.K, mm.N, mm.block, mm.has_res, &bl, d) != WL_OK)
		return WL_ERR;
	set_blocking(n, &bl);
	if (mm_read(g, n, &mm, d) != WL_OK)
		return WL_ERR;
	const Value *B = n->inputs[1], *S = n->ninputs > 2 ? n->inputs[2] : NULL, *Z = n->ninputs > 3 ? n->inputs[3] : NULL;
	const Value *bias = mm.has_bias ? n->inputs[4] : NULL;
	int64_t blob = mm.block / 2, zp_row = (mm.kblocks * 4 + 7) / 8;
	if (!B->init || B->init->dtype != DT_UINT8 || (int64_t)B->init->nbytes != mm.N * mm.kblocks * blob)
		return diag_fail(d, "%s: node '%s': tensor '%s': expected a constant uint8 [%lld,%lld,%lld]", hg_model_name(g),
		                 n->name, B->name, (long long)mm.N, (long long)mm.kblocks, (long long)blob);
	if (!S || !S->init || S->init->dtype != DT_FLOAT || tensor_numel(S->init) != mm.N * mm.kblocks)
		return diag_fail(d, "%s: node '%s': tensor '%s': expected %lld constant float scales", hg_model_name(g), n->name,
		                 S ? S->name : "", (long long)(mm.N * mm.kblocks));
	if (Z && (!Z->init || !((Z->init->dtype == DT_UINT8 && tensor_numel(Z->init) == mm.N * zp_row) ||
	                        (Z->init->dtype == DT_FLOAT && tensor_numel(Z->init) == mm.N * mm.kblocks))))
		return diag_fail(d, "%s: node '%s': tensor '%s': expected constant zero points (%lld uint8 or %lld float)",
		                 hg_model_name(g), n->name, Z->name, (long long)(mm.N * zp_row), (long long)(mm.N * mm.kblocks));
	if (bias && (!bias->init || bias->init->dtype != DT_FLOAT || tensor_numel(bias->init) != mm.N))
		return diag_fail(d, "%s: node '%s': tensor '%s': expected a constant float bias [%lld]", hg_model_name(g), n->name,
		                 bias->name, (long long)mm.N);
	const uint8_t *q = B->init->data, *zq = Z && Z->init->dtype == DT_UINT8 ? Z->init->data : NULL;
	/* initializer data may sit at any offset of the mapped model file: loads by memcpy */
	const void *zf = Z && Z->init->dtype == DT_FLOAT ? Z->init->data : NULL;
	const void *bs = bias ? bias->init->data : NULL;
	int64_t NR = mm.NR, T = mm.T, K = mm.K;
	Graph *gr = n->graph;
	void *pb, *ps, *po, *pbias = NULL;
	int64_t KP = (K + 1) / 2;   /* k pairs (an odd K ends with a half-used byte) */
	Value *vb = hg_new_init(gr, "host_w4", DT_UINT8, T * KP * NR, &pb);
	Value *vs = hg_new_init(gr, "host_scale", DT_FLOAT, T * mm.kblocks * NR, &ps);
	/* integer zero points (packed uint8, or the default 8) stay bytes, NR per
	 * (panel, block): a quarter of float offsets (for an LLM's weights 1/16
	 * instead of 1/4 of the 4-bit bytes); the kernel makes −zp·scale per block.
	 * Float zero points keep float offsets. */
	bool zpb = !zf;
	Value *vo = zpb ? hg_new_init(gr, "host_zp", DT_UINT8, T * mm.kblocks * NR, &po)
	                : hg_new_init(gr, "host_offset", DT_FLOAT, T * mm.kblocks * NR, &po);
	Value *vbias = bias ? hg_new_init(gr, "host_bias", DT_FLOAT, T * NR, &pbias) : NULL;
	uint8_t *ob = pb, *oz = zpb ? po : NULL;
	float *os = ps, *oo = zpb ? NULL : po, *obias = pbias;
	for (int s = 0; s < mm.nsplit; s++)
		for (int64_t t = mm.tstart[s]; t < mm.tstart[s + 1]; t++)
			for (int64_t j = 0; j < NR; j++) {
				int64_t c = (t - mm.tstart[s]) * NR + j;
				if (c >= mm.slen[s])
					continue; /* padding: zero weights, scales, offsets, bias */
				int64_t col = mm.soff[s] + c;
				if (obias)
					obias[t * NR + j] = load_f32(bs, col);
				for (int64_t kb = 0; kb < mm.kblocks; kb++) {
					float sc = load_f32(S->init->data, col * mm.kblocks + kb), zp = 8.0f;
					if (zq)
						zp = (float)((zq[col * zp_row + kb / 2] >> ((kb & 1) * 4)) & 15);
					else if (zf)
						zp = load_f32(zf, col * mm.kblocks + kb);
					os[(t * mm.kblocks + kb) * NR + j] = sc;
					if (oz)
						oz[(t * mm.kblocks + kb) * NR + j] = (uint8_t)zp;
					else
						oo[(t * mm.kblocks + kb) * NR + j] = -zp * sc;
				}
				for (int64_t p = 0; p < KP; p++) {
					/* k = 2p, 2p+1 live in one byte of the source blob (low nibble first) */
					int64_t kb = (2 * p) / mm.block, r = (2 * p) % mm.block;
					ob[(t * KP + p) * NR + j] = q[(col * mm.kblocks + kb) * blob + r / 2];
				}
			}
	node_set_input(n, 1, vb);
	node_set_input(n, 2, vs);
	while (n->ninputs < 5)
		node_add_input(n, NULL);
	node_set_input(n, 3, vo);
	node_set_input(n, 4, vbias);
	node_add_attr(n, "host_packed", AT_INT)->i = 1;
	if (zpb)
		node_add_attr(n, "host_zp_bytes", AT_INT)->i = 1;
	return WL_OK;
}

uint64_t hg_scratch_matmul_nbits(HostGen *g, const Node *n) { (void)g; (void)n; return 0; }

/* ---------------------------------------------------------------- micro-kernel (trans_b = 0) */

/* which split panel t belongs to: output pointer, ldc, local column */
static void panel_target(HostGen *g, MM *mm, LLVMValueRef t, LLVMValueRef *y, LLVMValueRef *ldc, LLVMValueRef *c0,
                         LLVMValueRef *col)
{
	LLVMBuilderRef b = g->b;
	LLVMValueRef Y = mm->Y[0], L = hg_i64(g, mm->slen[0]), T0 = hg_i64(g, 0), O = hg_i64(g, 0);
	for (int s = 1; s < mm->nsplit; s++) {
		LLVMValueRef ge = LLVMBuildICmp(b, LLVMIntSGE, t, hg_i64(g, mm->tstart[s]), "");
		Y = LLVMBuildSelect(b, ge, mm->Y[s], Y, "");
		L = LLVMBuildSelect(b, ge, hg_i64(g, mm->slen[s]), L, "");
		T0 = LLVMBuildSelect(b, ge, hg_i64(g, mm->tstart[s]), T0, "");
		O = LLVMBuildSelect(b, ge, hg_i64(g, mm->soff[s]), O, "");
	}
	*y = Y;
	*ldc = L;
	*c0 = LLVMBuildMul(b, LLVMBuildSub(b, t, T0, ""), hg_i64(g, mm->NR), "");
	*col = LLVMBuildAdd(b, O, *c0, "");
}

/* lanes valid in vector h of a panel: clamp(ldc − c0 − h·vw, 0, vw) */
static LLVMValueRef lanes(HostGen *g, LLVMValueRef ldc, LLVMValueRef c0, int h)
{
	LLVMBuilderRef b = g->b;
	LLVMValueRef r = LLVMBuildSub(b, LLVMBuildSub(b, ldc, c0, ""), hg_i64(g, (int64_t)h * g->vw), "");
	r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, r, hg_i64(g, 0), ""), hg_i64(g, 0), r, "");
	return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, r, hg_i64(g, g->vw), ""), hg_i64(g, g->vw), r, "");
}

/* The 4-bit weights of panel t at k pair `pair` (i64), dequantized with the
 * block's scale and offset vectors sv/ov: lo = row 2·pair, hi = row 2·pair+1. */
static void deq_pair(HostGen *g, MM *mm, LLVMValueRef wt, LLVMValueRef pair, LLVMValueRef *sv, LLVMValueRef *ov,
                     LLVMValueRef *wlo, LLVMValueRef *whi)
{
	LLVMBuilderRef b = g->b;
	int vw = g->vw;
	LLVMTypeRef vi8 = LLVMVectorType(g->t_i8, (unsigned)vw);
	for (int h = 0; h < mm->NV; h++) {
		LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, pair, hg_i64(g, mm->NR), ""), hg_i64(g, h * vw), "");
		LLVMValueRef q8 = LLVMBuildLoad2(b, vi8, hg_gep(g, g->t_i8, wt, off), "q8");
		LLVMSetAlignment(q8, 1);
		LLVMValueRef q = LLVMBuildZExt(b, q8, g->t_vi32, "");
		LLVMValueRef lo = LLVMBuildAnd(b, q, hg_vsplat(g, hg_i32(g, 15)), "");
		LLVMValueRef hi = LLVMBuildLShr(b, q, hg_vsplat(g, hg_i32(g, 4)), "");
		wlo[h] = hg_fma(g, LLVMBuildSIToFP(b, lo, g->t_vf, ""), sv[h], ov[h]);
		if (whi)
			whi[h] = hg_fma(g, LLVMBuildSIToFP(b, hi, g->t_vf, ""), sv[h], ov[h]);
	}
}

/* packed 4-bit panel t (bytes), its scales and offsets */
static void panel_ptrs(HostGen *g, MM *mm, LLVMValueRef t, LLVMValueRef *wt, LLVMValueRef *st, LLVMValueRef *ot)
{
	LLVMBuilderRef b = g->b;
	*wt = hg_gep(g, g->t_i8, mm->B, LLVMBuildMul(b, t, hg_i64(g, (mm->K + 1) / 2 * mm->NR), ""));
	*st = hg_gepf(g, mm->SC, LLVMBuildMul(b, t, hg_i64(g, mm->kblocks * mm->NR), ""));
	LLVMValueRef oo = LLVMBuildMul(b, t, hg_i64(g, mm->kblocks * mm->NR), "");
	*ot = mm->zpb ? hg_gep(g, g->t_i8, mm->OF, oo) : hg_gepf(g, mm->OF, oo);
}

/* The offsets −zp·scale of vector h of a block (its row at so in the panel's
 * offsets or zero points), sv[h] its scales: loaded (float zero points) or
 * made from the zero-point bytes (fneg(zp·scale): the bits the compile-time
 * −zp·scale had) */
static LLVMValueRef block_offsets(HostGen *g, MM *mm, LLVMValueRef ot, LLVMValueRef so, int h, LLVMValueRef svh)
{
	LLVMBuilderRef b = g->b;
	LLVMValueRef o = LLVMBuildAdd(b, so, hg_i64(g, h * g->vw), "");
	if (!mm->zpb)
		return hg_vload(g, ot, o);
	LLVMValueRef z8 = LLVMBuildLoad2(b, LLVMVectorType(g->t_i8, (unsigned)g->vw), hg_gep(g, g->t_i8, ot, o), "zp8");
	LLVMSetAlignment(z8, 1);
	LLVMValueRef zf = LLVMBuildUIToFP(b, LLVMBuildZExt(b, z8, g->t_vi32, ""), g->t_vf, "zp");
	return LLVMBuildFNeg(b, LLVMBuildFMul(b, zf, svh, ""), "off");
}

/* In-register path: acc += A[rows, block kb (first len k)] · W[that, panel t],
 * dequantizing each k pair in registers (len even, or odd: the last k alone). */
static void reg_block(HostGen *g, MM *mm, LLVMValueRef t, LLVMValueRef kb, int64_t len, LLVMValueRef arow, int mr,
                      LLVMValueRef (*cb)[4])
{
	LLVMBuilderRef b = g->b;
	int NV = mm->NV, vw = g->vw;
	LLVMValueRef wt, st, ot;
	panel_ptrs(g, mm, t, &wt, &st, &ot);
	LLVMValueRef sv[4], ov[4];
	LLVMValueRef so = LLVMBuildMul(b, kb, hg_i64(g, mm->NR), "");
	for (int h = 0; h < NV; h++) {
		sv[h] = hg_vload(g, st, LLVMBuildAdd(b, so, hg_i64(g, h * vw), ""));
		ov[h] = block_offsets(g, mm, ot, so, h, sv[h]);
	}
	LLVMValueRef k0 = LLVMBuildMul(b, kb, hg_i64(g, mm->block), "");
	LLVMValueRef p0 = LLVMBuildMul(b, kb, hg_i64(g, mm->block / 2), "");
	for (int part = 0; part < 2; part++) {
		int64_t np = part ? len % 2 : len / 2;
		if (np == 0)
			continue;
		HgLoop lp;
		LLVMValueRef pp = hg_loop_begin(g, &lp, hg_i64(g, part ? len / 2 : 0), hg_i64(g, part ? len / 2 + 1 : len / 2), 1,
		                                "kp");
		LLVMValueRef cp[16][4];
		for (int i = 0; i < mr; i++)
			for (int h = 0; h < NV; h++)
				cp[i][h] = hg_loop_carry(g, &lp, cb[i][h]);
		LLVMValueRef k = LLVMBuildAdd(b, k0, LLVMBuildMul(b, pp, hg_i64(g, 2), ""), "k");
		LLVMValueRef wlo[4], whi[4];
		deq_pair(g, mm, wt, LLVMBuildAdd(b, p0, pp, ""), sv, ov, wlo, part ? NULL : whi);
		for (int i = 0; i < mr; i++) {
			LLVMValueRef ai = LLVMBuildAdd(b, k, hg_i64(g, (int64_t)i * mm->K), "");
			LLVMValueRef a0 = hg_vbroadcast(g, arow, ai);
			LLVMValueRef a1 = part ? NULL : hg_vbroadcast(g, arow, LLVMBuildAdd(b, ai, hg_i64(g, 1), ""));
			for (int h = 0; h < NV; h++) {
				LLVMValueRef v = hg_fma(g, a0, wlo[h], cp[i][h]);
				hg_loop_next(g, &lp, cp[i][h], a1 ? hg_fma(g, a1, whi[h], v) : v);
			}
		}
		hg_loop_end(g, &lp);
		for (int i = 0; i < mr; i++)
			for (int h = 0; h < NV; h++)
				cb[i][h] = cp[i][h];
	}
}

/* Y[m0 .. m0+mr, panel t] = acc + bias (then GELU, + residual), or, when
 * `partial` (K cut in cache blocks, not the last), acc + Y[...] stored raw;
 * `first` false: acc += the partial sums in Y first. */
static void epilogue_ex(HostGen *g, MM *mm, LLVMValueRef t, LLVMValueRef m0, int mr, LLVMValueRef (*acc)[4], bool first,
                        bool last)
{
	LLVMBuilderRef b = g->b;
	int NV = mm->NV, vw = g->vw;
	LLVMValueRef y, ldc, c0, col;
	panel_target(g, mm, t, &y, &ldc, &c0, &col);
	LLVMValueRef nl[4] = {0};
	if (mm->has_tail)
		for (int h = 0; h < NV; h++)
			nl[h] = lanes(g, ldc, c0, h);
	LLVMValueRef bv[4] = {0};
	if (mm->has_bias && last)
		for (int h = 0; h < NV; h++) {
			if (mm->packed)
				bv[h] = hg_vload(g, mm->bias, LLVMBuildAdd(b, LLVMBuildMul(b, t, hg_i64(g, mm->NR), ""),
				                                           hg_i64(g, h * vw), ""));
			else if (mm->has_tail)
				bv[h] = hg_vload_n(g, mm->bias, LLVMBuildAdd(b, col, hg_i64(g, h * vw), ""), nl[h]);
			else
				bv[h] = hg_vload(g, mm->bias, LLVMBuildAdd(b, col, hg_i64(g, h * vw), ""));
		}
	LLVMValueRef yrow = LLVMBuildMul(b, m0, ldc, "");
	for (int i = 0; i < mr; i++) {
		LLVMValueRef yo = LLVMBuildAdd(b, LLVMBuildAdd(b, yrow, LLVMBuildMul(b, hg_i64(g, i), ldc, ""), ""), c0, "");
		for (int h = 0; h < NV; h++) {
			LLVMValueRef v = acc[i][h];
			LLVMValueRef o = LLVMBuildAdd(b, yo, hg_i64(g, h * vw), "");
			if (!first)
				v = LLVMBuildFAdd(b, v, mm->has_tail ? hg_vload_n(g, y, o, nl[h]) : hg_vload(g, y, o), "");
			if (!last) {
				if (mm->has_tail)
					hg_vstore_n(g, v, y, o, nl[h]);
				else
					hg_vstore(g, v, y, o);
				continue;
			}
			if (bv[h])
				v = LLVMBuildFAdd(b, v, bv[h], "");
			if (mm->act == 1)
				v = hg_gelu(g, v);
			if (mm->has_res)
				v = LLVMBuildFAdd(b, v, mm->has_tail ? hg_vload_n(g, mm->res, o, nl[h]) : hg_vload(g, mm->res, o), "");
			if (mm->has_tail)
				hg_vstore_n(g, v, y, o, nl[h]);
			else
				hg_vstore(g, v, y, o);
		}
	}
}

/* In-register path on bf16 panels (bits 32 repacked, small M): per k pair,
 * NV panel loads against each row's (A[m][2p], A[m][2p+1]) rounded to a bf16
 * pair and broadcast; an odd K ends with the pair (A[m][K-1], 0). */
static void tile_bf16w(HostGen *g, MM *mm, LLVMValueRef arow, int mr, LLVMValueRef t, LLVMValueRef (*acc)[4])
{
	LLVMBuilderRef b = g->b;
	int NV = mm->NV;
	int64_t KP = (mm->K + 1) / 2, full = mm->K / 2;
	LLVMTypeRef v32 = hg_t_bf16(g, 32), v2f = LLVMVectorType(g->t_f32, 2), v2b = hg_t_bf16(g, 2);
	LLVMValueRef wt = hg_gep(g, g->t_i32, mm->B, LLVMBuildMul(b, t, hg_i64(g, KP * mm->NR), ""));
	for (int part = 0; part < 2; part++) {
		int64_t lo = part ? full : 0, hi = part ? KP : full;
		if (hi <= lo)
			continue;
		HgLoop lp;
		LLVMValueRef p = hg_loop_begin(g, &lp, hg_i64(g, lo), hg_i64(g, hi), 1, "kp");
		LLVMValueRef c[16][4];
		for (int i = 0; i < mr; i++)
			for (int h = 0; h < NV; h++)
				c[i][h] = hg_loop_carry(g, &lp, acc[i][h]);
		LLVMValueRef w[4];
		for (int h = 0; h < NV; h++)
			w[h] = hg_bf16_load(g, wt, LLVMBuildAdd(b, LLVMBuildMul(b, p, hg_i64(g, mm->NR), ""), hg_i64(g, h * 16), ""));
		for (int i = 0; i < mr; i++) {
			LLVMValueRef ai = LLVMBuildAdd(b, LLVMBuildMul(b, p, hg_i64(g, 2), ""), hg_i64(g, (int64_t)i * mm->K), "");
			LLVMValueRef pr;
			if (part) {   /* the odd K's last element, paired with 0 */
				pr = LLVMBuildInsertElement(b, LLVMConstNull(v2f), hg_load(g, g->t_f32, arow, ai), hg_i32(g, 0), "");
			} else {
				pr = LLVMBuildLoad2(b, v2f, hg_gepf(g, arow, ai), "a2");
				LLVMSetAlignment(pr, 4);
			}
			LLVMValueRef a32 = LLVMBuildBitCast(b, LLVMBuildFPTrunc(b, pr, v2b, ""), g->t_i32, "");
			LLVMValueRef av = LLVMBuildBitCast(b, hg_vsplat(g, a32), v32, "ab");
			for (int h = 0; h < NV; h++)
				hg_loop_next(g, &lp, c[i][h], hg_dpbf16(g, c[i][h], av, w[h]));
		}
		hg_loop_end(g, &lp);
		for (int i = 0; i < mr; i++)
			for (int h = 0; h < NV; h++)
				acc[i][h] = c[i][h];
	}
}

/* Y[m0 .. m0+mr, panel t] = A · W + bias */
static void tile(HostGen *g, MM *mm, LLVMValueRef m0, int mr, LLVMValueRef t)
{
	LLVMBuilderRef b = g->b;
	int NV = mm->NV, vw = g->vw;
	LLVMValueRef y, ldc, c0, col;
	panel_target(g, mm, t, &y, &ldc, &c0, &col);
	LLVMValueRef nl[4] = {0};
	if (mm->has_tail)
		for (int h = 0; h < NV; h++)
			nl[h] = lanes(g, ldc, c0, h);
	LLVMValueRef arow = hg_gepf(g, mm->A, LLVMBuildMul(b, m0, hg_i64(g, mm->K), ""));
	LLVMValueRef acc[16][4];
	for (int i = 0; i < mr; i++)
		for (int h = 0; h < NV; h++)
			acc[i][h] = hg_vconst(g, 0.0f);
	if (mm->bits == 4) {
		/* full blocks in a loop, then the partial last block (K % block) */
		int64_t fullb = mm->K / mm->block, rem = mm->K % mm->block;
		for (int part = 0; part < 2; part++) {
			if ((part == 0 && fullb == 0) || (part == 1 && rem == 0))
				continue;
			HgLoop lb;
			LLVMValueRef kb = hg_loop_begin(g, &lb, hg_i64(g, part ? fullb : 0), hg_i64(g, part ? fullb + 1 : fullb), 1,
			                                "kb");
			LLVMValueRef ph[16][4], cb[16][4];
			for (int i = 0; i < mr; i++)
				for (int h = 0; h < NV; h++)
					cb[i][h] = ph[i][h] = hg_loop_carry(g, &lb, acc[i][h]);
			reg_block(g, mm, t, kb, part ? rem : mm->block, arow, mr, cb);
			for (int i = 0; i < mr; i++)
				for (int h = 0; h < NV; h++)
					hg_loop_next(g, &lb, ph[i][h], cb[i][h]);
			hg_loop_end(g, &lb);
			for (int i = 0; i < mr; i++)
				for (int h = 0; h < NV; h++)
					acc[i][h] = ph[i][h];
		}
	} else if (mm->bf16w) {
		tile_bf16w(g, mm, arow, mr, t, acc);
	} else {
		/* float W: a packed panel t (f32p: row k at (t·K + k)·NR, zero
		 * padded, loads never masked), or W [K, N] in place: row k, columns
		 * col .. col+NR. Grouped (W [K, Ng], Ng = N/G, Kg = K/G): the panel
		 * lies in group gi = col / Ng; k runs Kg rows, A is read from column
		 * gi·Kg, W from row gi·Kg, column col − gi·Ng (the row stride is Ng) */
		int64_t Kl = mm->K, ldw = mm->f32p ? mm->NR : mm->N;
		LLVMValueRef wb = mm->B, wcol = col;
		if (mm->f32p) {
			wb = hg_gepf(g, mm->B, LLVMBuildMul(b, t, hg_i64(g, mm->K * mm->NR), ""));
			wcol = hg_i64(g, 0);
		} else if (mm->groups > 1) {
			int64_t Kg = mm->K / mm->groups, Ng = mm->N / mm->groups;
			LLVMValueRef gi = LLVMBuildSDiv(b, col, hg_i64(g, Ng), "grp");
			arow = hg_gepf(g, arow, LLVMBuildMul(b, gi, hg_i64(g, Kg), ""));
			/* W row gi·Kg, column col − gi·Ng: offset gi·Kg·Ng + col − gi·Ng */
			wcol = LLVMBuildAdd(b, LLVMBuildSub(b, col, LLVMBuildMul(b, gi, hg_i64(g, Ng), ""), ""),
			                    LLVMBuildMul(b, gi, hg_i64(g, Kg * Ng), ""), "");
			Kl = Kg;
			ldw = Ng;
		}
		HgLoop lk;
		LLVMValueRef k = hg_loop_begin(g, &lk, hg_i64(g, 0), hg_i64(g, Kl), 1, "k");
		LLVMValueRef ck[16][4];
		for (int i = 0; i < mr; i++)
			for (int h = 0; h < NV; h++)
				ck[i][h] = hg_loop_carry(g, &lk, acc[i][h]);
		LLVMValueRef w[4];
		LLVMValueRef wo = LLVMBuildAdd(b, LLVMBuildMul(b, k, hg_i64(g, ldw), ""), wcol, "");
		for (int h = 0; h < NV; h++) {
			LLVMValueRef o = LLVMBuildAdd(b, wo, hg_i64(g, h * vw), "");
			w[h] = mm->has_tail && !mm->f32p ? hg_vload_n(g, wb, o, nl[h]) : hg_vload(g, wb, o);
		}
		for (int i = 0; i < mr; i++) {
			LLVMValueRef a = hg_vbroadcast(g, arow, LLVMBuildAdd(b, k, hg_i64(g, (int64_t)i * mm->K), ""));
			for (int h = 0; h < NV; h++)
				hg_loop_next(g, &lk, ck[i][h], hg_fma(g, a, w[h], ck[i][h]));
		}
		hg_loop_end(g, &lk);
		for (int i = 0; i < mr; i++)
			for (int h = 0; h < NV; h++)
				acc[i][h] = ck[i][h];
	}
	epilogue_ex(g, mm, t, m0, mr, acc, true, true);
}

/* ---------------------------------------------------------------- panel path (4-bit, M > MR)
 *
 * GotoBLAS order with the dequantization hoisted out of the FMA tiles: a task
 * is (M block of MC rows, panel t); for each K cache block of KC rows it
 * dequantizes the panel's KC x NR weights once into a float buffer Wp (thread
 * stack, 64-byte aligned, row k at Wp + k·NR), then runs every MR-row tile of
 * the M block over it: per k, NV aligned vector loads of Wp, MR broadcasts of
 * A, MR·NV FMAs. With several K blocks the partial sums go through Y (the
 * epilogue runs on the last one); hg_mm_blocking keeps KC = K when a residual
 * is fused (Y may share the residual's buffer). */

/* bf16 (--host-precision bf16, AVX512-BF16): a k pair as one 32-bit lane of
 * two bf16 (low: even k); vdpbf16ps adds a[2i]·b[2i] + a[2i+1]·b[2i+1] to
 * lane i in float. The panel holds per k pair NR such lanes (dequantized
 * weights rounded to nearest even), the M block of A is converted once per
 * block into a bf16 copy (zero past K). */

/* <32 x bfloat>: lane i = (lo[i], hi[i]) */
static LLVMValueRef bf16_pairs(HostGen *g, LLVMValueRef lo, LLVMValueRef hi)
{
	LLVMValueRef e[32];
	for (int i = 0; i < 16; i++) {
		e[2 * i] = LLVMConstInt(g->t_i32, (unsigned)i, 0);
		e[2 * i + 1] = LLVMConstInt(g->t_i32, (unsigned)(16 + i), 0);
	}
	return LLVMBuildShuffleVector(g->b, hg_to_bf16(g, lo), hg_to_bf16(g, hi), LLVMConstVector(e, 32), "bfp");
}

/* Ab[r, 0 .. KA) = bf16(A[mlo + r, 0 .. K)), 0 past K, for r < mhi − mlo */
static void pack_a_bf16(HostGen *g, MM *mm, LLVMValueRef mlo, LLVMValueRef mhi)
{
	LLVMBuilderRef b = g->b;
	HgLoop lr;
	LLVMValueRef r = hg_loop_begin(g, &lr, hg_i64(g, 0), LLVMBuildSub(b, mhi, mlo, ""), 1, "ar");
	LLVMValueRef src = hg_gepf(g, mm->A, LLVMBuildMul(b, LLVMBuildAdd(b, mlo, r, ""), hg_i64(g, mm->K), ""));
	LLVMValueRef dst = LLVMBuildMul(b, r, hg_i64(g, mm->KA), "");
	int64_t full = mm->K / 16 * 16;
	for (int part = 0; part < 2; part++) {
		int64_t lo = part ? full : 0, hi = part ? mm->KA : full;
		if (hi <= lo)
			continue;
		HgLoop lk;
		LLVMValueRef k = hg_loop_begin(g, &lk, hg_i64(g, lo), hg_i64(g, hi), 16, "ak");
		LLVMValueRef v = part ? hg_vload_n(g, src, k, hg_i64(g, mm->K - full)) : hg_vload(g, src, k);
		LLVMValueRef st = LLVMBuildStore(b, hg_to_bf16(g, v),
		                                 hg_gep(g, hg_t_bf16(g, 0), mm->Ab, LLVMBuildAdd(b, dst, k, "")));
		LLVMSetAlignment(st, 32);
		hg_loop_end(g, &lk);
	}
	hg_loop_end(g, &lr);
}

/* acc of rows m0 .. m0+mr (A block row m0 − mlo) over k = kc0 .. kc0+kcl from the bf16 panel */
static void panel_tile_bf16(HostGen *g, MM *mm, LLVMValueRef m0, LLVMValueRef mlo, int mr, LLVMValueRef t, int64_t kc0,
                            int64_t kcl, LLVMValueRef Wp)
{
	LLVMBuilderRef b = g->b;
	int NV = mm->NV;
	/* A pairs as i32: row (m0 − mlo + i), pair kc0/2 + p */
	LLVMValueRef abase = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildSub(b, m0, mlo, ""), hg_i64(g, mm->KA / 2), ""),
	                                  hg_i64(g, kc0 / 2), "");
	LLVMValueRef acc[16][4];
	HgLoop lk;
	LLVMValueRef p = hg_loop_begin(g, &lk, hg_i64(g, 0), hg_i64(g, (kcl + 1) / 2), 1, "kp");
	for (int i = 0; i < mr; i++)
		for (int h = 0; h < NV; h++)
			acc[i][h] = hg_loop_carry(g, &lk, hg_vconst(g, 0.0f));
	LLVMValueRef w[4];
	LLVMValueRef wo = LLVMBuildMul(b, p, hg_i64(g, mm->NR), "");
	for (int h = 0; h < NV; h++)
		w[h] = hg_bf16_load(g, Wp, LLVMBuildAdd(b, wo, hg_i64(g, h * 16), ""));
	for (int i = 0; i < mr; i++) {
		LLVMValueRef ai = LLVMBuildAdd(b, abase, LLVMBuildAdd(b, p, hg_i64(g, (int64_t)i * (mm->KA / 2)), ""), "");
		LLVMValueRef av = hg_bf16_bcast(g, mm->Ab, ai);
		for (int h = 0; h < NV; h++)
			hg_loop_next(g, &lk, acc[i][h], hg_dpbf16(g, acc[i][h], av, w[h]));
	}
	hg_loop_end(g, &lk);
	epilogue_ex(g, mm, t, m0, mr, acc, kc0 == 0, kc0 + kcl >= mm->K);
}

/* Wp[0 .. kcl) = dequantized rows kc0 .. kc0+kcl of panel t (kc0: a multiple of the block) */
static void panel_dequant(HostGen *g, MM *mm, LLVMValueRef t, int64_t kc0, int64_t kcl, LLVMValueRef Wp)
{
	LLVMBuilderRef b = g->b;
	int NV = mm->NV, vw = g->vw;
	LLVMValueRef wt, st, ot;
	panel_ptrs(g, mm, t, &wt, &st, &ot);
	int64_t kb0 = kc0 / mm->block, nb = (kcl + mm->block - 1) / mm->block;
	int64_t lastlen = kcl - (nb - 1) * mm->block;   /* rows of the last block in range */
	for (int part = 0; part < 2; part++) {
		int64_t bl0 = part ? kb0 + nb - 1 : kb0, bl1 = part ? kb0 + nb : kb0 + nb - (lastlen < mm->block);
		if (bl1 <= bl0)
			continue;
		int64_t np = part ? (lastlen + 1) / 2 : mm->block / 2;
		HgLoop lb;
		LLVMValueRef kb = hg_loop_begin(g, &lb, hg_i64(g, bl0), hg_i64(g, bl1), 1, "dkb");
		LLVMValueRef sv[4], ov[4];
		LLVMValueRef so = LLVMBuildMul(b, kb, hg_i64(g, mm->NR), "");
		for (int h = 0; h < NV; h++) {
			sv[h] = hg_vload(g, st, LLVMBuildAdd(b, so, hg_i64(g, h * vw), ""));
			ov[h] = block_offsets(g, mm, ot, so, h, sv[h]);
		}
		HgLoop lp;
		LLVMValueRef pp = hg_loop_begin(g, &lp, hg_i64(g, 0), hg_i64(g, np), 1, "dkp");
		LLVMValueRef pair = LLVMBuildAdd(b, LLVMBuildMul(b, kb, hg_i64(g, mm->block / 2), ""), pp, "");
		LLVMValueRef wlo[4], whi[4];
		deq_pair(g, mm, wt, pair, sv, ov, wlo, whi);
		/* local row of k = 2·pair */
		LLVMValueRef r = LLVMBuildSub(b, LLVMBuildMul(b, pair, hg_i64(g, 2), ""), hg_i64(g, kc0), "");
		LLVMValueRef o0 = LLVMBuildMul(b, r, hg_i64(g, mm->NR), "");
		for (int h = 0; h < NV; h++) {
			if (mm->bf16) {
				/* pair row r/2: NR lanes of (bf16 even k, bf16 odd k) */
				LLVMValueRef o = LLVMBuildAdd(b, LLVMBuildMul(b, pp, hg_i64(g, mm->NR), ""), hg_i64(g, h * vw), "");
				o = LLVMBuildAdd(b, o, hg_i64(g, (kb0 * mm->block - kc0) / 2 * mm->NR), "");
				LLVMValueRef st = LLVMBuildStore(b, bf16_pairs(g, wlo[h], whi[h]),
				                                 hg_gep(g, g->t_i32, Wp, LLVMBuildAdd(b, o, LLVMBuildMul(b, LLVMBuildSub(b, kb, hg_i64(g, kb0), ""), hg_i64(g, mm->block / 2 * mm->NR), ""), "")));
				LLVMSetAlignment(st, 64);
				continue;
			}
			LLVMValueRef o = LLVMBuildAdd(b, o0, hg_i64(g, h * vw), "");
			LLVMBuildStore(b, wlo[h], hg_gepf(g, Wp, o));
			LLVMBuildStore(b, whi[h], hg_gepf(g, Wp, LLVMBuildAdd(b, o, hg_i64(g, mm->NR), "")));
		}
		hg_loop_end(g, &lp);
		hg_loop_end(g, &lb);
	}
}

/* acc of rows m0 .. m0+mr over k = kc0 .. kc0+kcl from Wp, then the epilogue */
static void panel_tile(HostGen *g, MM *mm, LLVMValueRef m0, int mr, LLVMValueRef t, int64_t kc0, int64_t kcl,
                       LLVMValueRef Wp)
{
	LLVMBuilderRef b = g->b;
	int NV = mm->NV, vw = g->vw;
	LLVMValueRef arow = hg_gepf(g, mm->A, LLVMBuildAdd(b, LLVMBuildMul(b, m0, hg_i64(g, mm->K), ""), hg_i64(g, kc0), ""));
	LLVMValueRef acc[16][4];
	HgLoop lk;
	LLVMValueRef k = hg_loop_begin(g, &lk, hg_i64(g, 0), hg_i64(g, kcl), 1, "k");
	for (int i = 0; i < mr; i++)
		for (int h = 0; h < NV; h++)
			acc[i][h] = hg_loop_carry(g, &lk, hg_vconst(g, 0.0f));
	LLVMValueRef w[4];
	LLVMValueRef wo = LLVMBuildMul(b, k, hg_i64(g, mm->NR), "");
	for (int h = 0; h < NV; h++) {
		w[h] = LLVMBuildLoad2(b, g->t_vf, hg_gepf(g, Wp, LLVMBuildAdd(b, wo, hg_i64(g, h * vw), "")), "w");
		LLVMSetAlignment(w[h], (unsigned)(vw * 4));
	}
	for (int i = 0; i < mr; i++) {
		LLVMValueRef a = hg_vbroadcast(g, arow, LLVMBuildAdd(b, k, hg_i64(g, (int64_t)i * mm->K), ""));
		for (int h = 0; h < NV; h++)
			hg_loop_next(g, &lk, acc[i][h], hg_fma(g, a, w[h], acc[i][h]));
	}
	hg_loop_end(g, &lk);
	epilogue_ex(g, mm, t, m0, mr, acc, kc0 == 0, kc0 + kcl >= mm->K);
}

static int emit_panels(HostGen *g, MM *mm, LLVMValueRef fn)
{
	LLVMBuilderRef b = g->b;
	const Node *n = mm->n;
	int64_t nmc = (mm->M + mm->MC - 1) / mm->MC;
	int tail_mr = (int)(mm->M % mm->MR);
	LLVMValueRef caps[HG_MAX_CAP];
	int nc = 0;
	caps[nc++] = hg_arg(g, fn, 0);
	caps[nc++] = hg_arg(g, fn, 1);
	caps[nc++] = hg_arg(g, fn, 2);
	caps[nc++] = hg_arg(g, fn, 3);
	caps[nc++] = mm->has_bias ? hg_arg(g, fn, 4) : LLVMConstNull(g->t_ptr);
	caps[nc++] = mm->has_res ? hg_arg(g, fn, 5) : LLVMConstNull(g->t_ptr);
	for (int s = 0; s < mm->nsplit; s++)
		caps[nc++] = hg_arg(g, fn, n->ninputs + s);
	HgPar p;
	hg_par_begin(g, &p, hg_api(g, fn), hg_i64(g, nmc * mm->T), caps, nc, "gemmp");
	mm->A = p.cap[0];
	mm->B = p.cap[1];
	mm->SC = p.cap[2];
	mm->OF = p.cap[3];
	mm->bias = p.cap[4];
	mm->res = p.cap[5];
	for (int s = 0; s < mm->nsplit; s++)
		mm->Y[s] = p.cap[6 + s];
	int64_t KC = mm->KC < mm->K ? mm->KC : mm->K;
	/* + one row: an odd K's last pair writes row kcl (bf16w: the packed panels are read in place) */
	LLVMValueRef Wp = mm->bf16w ? NULL : hg_alloca(g, g->t_f32, (KC + 1) * mm->NR, 64, "wpanel");
	LLVMValueRef curmc = NULL;
	if (mm->bf16) {
		mm->KA = (mm->K + 15) / 16 * 16;
		mm->Ab = hg_alloca(g, hg_t_bf16(g, 0), mm->MC * mm->KA, 64, "abf16");
		curmc = hg_alloca(g, g->t_i64, 1, 8, "curmc");
		LLVMBuildStore(b, hg_i64(g, -1), curmc);
	}
	HgLoop lt;
	LLVMValueRef task = hg_loop_begin(g, &lt, p.i0, p.i1, 1, "task");
	LLVMValueRef mc = LLVMBuildSDiv(b, task, hg_i64(g, mm->T), "mc");
	LLVMValueRef t = LLVMBuildSRem(b, task, hg_i64(g, mm->T), "t");
	LLVMValueRef mlo = LLVMBuildMul(b, mc, hg_i64(g, mm->MC), "mlo");
	LLVMValueRef mhi = LLVMBuildAdd(b, mlo, hg_i64(g, mm->MC), "");
	mhi = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, mhi, hg_i64(g, mm->M), ""), mhi, hg_i64(g, mm->M), "mhi");
	/* full MR tiles of the block: mlo + floor((mhi - mlo) / MR) * MR */
	LLVMValueRef mfull = LLVMBuildAdd(
		b, mlo, LLVMBuildMul(b, LLVMBuildSDiv(b, LLVMBuildSub(b, mhi, mlo, ""), hg_i64(g, mm->MR), ""), hg_i64(g, mm->MR), ""),
		"mfull");
	if (mm->bf16) {
		/* the M block's A as bf16, once per block (tasks of a chunk are consecutive) */
		HgIf fa;
		hg_if_begin(g, &fa, LLVMBuildICmp(b, LLVMIntNE, LLVMBuildLoad2(b, g->t_i64, curmc, ""), mc, ""));
		pack_a_bf16(g, mm, mlo, mhi);
		LLVMBuildStore(b, mc, curmc);
		hg_if_end(g, &fa);
	}
	for (int64_t kc0 = 0; kc0 < mm->K; kc0 += KC) {
		int64_t kcl = mm->K - kc0 < KC ? mm->K - kc0 : KC;
		if (mm->bf16w)   /* panel t, pair kc0/2: NR i32 lanes per pair */
			Wp = hg_gep(g, g->t_i32, mm->B,
			            LLVMBuildAdd(b, LLVMBuildMul(b, t, hg_i64(g, (mm->K + 1) / 2 * mm->NR), ""), hg_i64(g, kc0 / 2 * mm->NR), ""));
		else
			panel_dequant(g, mm, t, kc0, kcl, Wp);
		HgLoop lm;
		LLVMValueRef m0 = hg_loop_begin(g, &lm, mlo, mfull, mm->MR, "m0");
		if (mm->bf16)
			panel_tile_bf16(g, mm, m0, mlo, mm->MR, t, kc0, kcl, Wp);
		else
			panel_tile(g, mm, m0, mm->MR, t, kc0, kcl, Wp);
		hg_loop_end(g, &lm);
		if (tail_mr) {
			/* only the last M block has a partial tile */
			HgIf f;
			hg_if_begin(g, &f, LLVMBuildICmp(b, LLVMIntSLT, mfull, mhi, ""));
			if (mm->bf16)
				panel_tile_bf16(g, mm, mfull, mlo, tail_mr, t, kc0, kcl, Wp);
			else
				panel_tile(g, mm, mfull, tail_mr, t, kc0, kcl, Wp);
			hg_if_end(g, &f);
		}
	}
	hg_loop_end(g, &lt);
	hg_par_end(g, &p);
	return WL_OK;
}

static int emit_gemm(HostGen *g, MM *mm, LLVMValueRef fn)
{
	LLVMBuilderRef b = g->b;
	const Node *n = mm->n;
	int64_t mtiles = (mm->M + mm->MR - 1) / mm->MR;
	int tail_mr = (int)(mm->M % mm->MR);
	int64_t ngroups = (32 + mtiles - 1) / mtiles;
	if (ngroups > mm->T)
		ngroups = mm->T;
	if (ngroups < 1)
		ngroups = 1;
	int64_t tpg = (mm->T + ngroups - 1) / ngroups;
	ngroups = (mm->T + tpg - 1) / tpg;
	LLVMValueRef caps[HG_MAX_CAP];
	int nc = 0;
	caps[nc++] = hg_arg(g, fn, 0);
	caps[nc++] = hg_arg(g, fn, 1);
	caps[nc++] = n->ninputs > 2 && n->inputs[2] ? hg_arg(g, fn, 2) : LLVMConstNull(g->t_ptr);
	caps[nc++] = n->ninputs > 3 && n->inputs[3] ? hg_arg(g, fn, 3) : LLVMConstNull(g->t_ptr);
	caps[nc++] = mm->has_bias ? hg_arg(g, fn, 4) : LLVMConstNull(g->t_ptr);
	caps[nc++] = mm->has_res ? hg_arg(g, fn, 5) : LLVMConstNull(g->t_ptr);
	for (int s = 0; s < mm->nsplit; s++)
		caps[nc++] = hg_arg(g, fn, n->ninputs + s);
	HgPar p;
	hg_par_begin(g, &p, hg_api(g, fn), hg_i64(g, mtiles * ngroups), caps, nc, "gemm");
	mm->A = p.cap[0];
	mm->B = p.cap[1];
	mm->SC = p.cap[2];
	mm->OF = p.cap[3];
	mm->bias = p.cap[4];
	mm->res = p.cap[5];
	for (int s = 0; s < mm->nsplit; s++)
		mm->Y[s] = p.cap[6 + s];
	HgLoop lt;
	LLVMValueRef task = hg_loop_begin(g, &lt, p.i0, p.i1, 1, "task");
	LLVMValueRef mt = LLVMBuildSDiv(b, task, hg_i64(g, ngroups), "mt");
	LLVMValueRef ng = LLVMBuildSRem(b, task, hg_i64(g, ngroups), "ng");
	LLVMValueRef t0 = LLVMBuildMul(b, ng, hg_i64(g, tpg), "");
	LLVMValueRef t1 = LLVMBuildAdd(b, t0, hg_i64(g, tpg), "");
	t1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, t1, hg_i64(g, mm->T), ""), t1, hg_i64(g, mm->T), "");
	LLVMValueRef m0 = LLVMBuildMul(b, mt, hg_i64(g, mm->MR), "m0");
	int main_mr = mm->M < mm->MR ? (int)mm->M : mm->MR;
	HgIf f;
	bool split_tail = tail_mr && mm->M > mm->MR;
	if (split_tail)
		hg_if_begin(g, &f, LLVMBuildICmp(b, LLVMIntEQ, mt, hg_i64(g, mtiles - 1), ""));
	for (int pass = 0; pass < (split_tail ? 2 : 1); pass++) {
		int mr = split_tail && pass == 0 ? tail_mr : main_mr;
		if (pass == 1)
			hg_if_else(g, &f);
		HgLoop ln;
		LLVMValueRef t = hg_loop_begin(g, &ln, t0, t1, 1, "t");
		tile(g, mm, m0, mr, t);
		hg_loop_end(g, &ln);
	}
	if (split_tail)
		hg_if_end(g, &f);
	hg_loop_end(g, &lt);
	hg_par_end(g, &p);
	return WL_OK;
}

/* ---------------------------------------------------------------- trans_b = 1 (dot products) */

/* Vector k.. of a row: float (rem: only the first rem lanes) or, bf16w, 32
 * bf16 (rows of K rounded up to 32, zero past K: never a tail). */
static LLVMValueRef dot_load(HostGen *g, MM *mm, LLVMValueRef row, LLVMValueRef o, LLVMValueRef rem)
{
	if (!mm->bf16w)
		return rem ? hg_vload_n(g, row, o, rem) : hg_vload(g, row, o);
	LLVMValueRef v = LLVMBuildLoad2(g->b, hg_t_bf16(g, 32), hg_gep(g, hg_t_bf16(g, 0), row, o), "bl");
	LLVMSetAlignment(v, 2);
	return v;
}

static void dot_tile(HostGen *g, MM *mm, LLVMValueRef m0, int mr, LLVMValueRef n0, int nc)
{
	LLVMBuilderRef b = g->b;
	/* bf16w: A (converted, mm->Ab) and W in bf16 rows of ld = K rounded up to
	 * 32, 32 k per vdpbf16ps */
	int64_t K = mm->K, ld = mm->bf16w ? (K + 31) / 32 * 32 : K, step = mm->bf16w ? 32 : g->vw, full = ld / step * step;
	LLVMTypeRef et = mm->bf16w ? hg_t_bf16(g, 0) : g->t_f32;
	LLVMValueRef arow = hg_gep(g, et, mm->bf16w ? mm->Ab : mm->A, LLVMBuildMul(b, m0, hg_i64(g, ld), ""));
	LLVMValueRef brow = hg_gep(g, et, mm->B, LLVMBuildMul(b, n0, hg_i64(g, ld), ""));
	LLVMValueRef acc[4][4];
	for (int i = 0; i < mr; i++)
		for (int j = 0; j < nc; j++)
			acc[i][j] = hg_vconst(g, 0.0f);
	for (int pass = 0; pass < 2; pass++) {
		int64_t lo = pass ? full : 0, hi = pass ? ld : full;
		if (hi <= lo)
			continue;
		LLVMValueRef rem = pass ? hg_i64(g, ld - full) : NULL;
		HgLoop l;
		LLVMValueRef k = hg_loop_begin(g, &l, hg_i64(g, lo), hg_i64(g, pass ? lo + 1 : hi), pass ? 1 : step, "k");
		LLVMValueRef c[4][4];
		for (int i = 0; i < mr; i++)
			for (int j = 0; j < nc; j++)
				c[i][j] = hg_loop_carry(g, &l, acc[i][j]);
		LLVMValueRef av[4], bvv[4];
		for (int i = 0; i < mr; i++)
			av[i] = dot_load(g, mm, arow, LLVMBuildAdd(b, k, hg_i64(g, (int64_t)i * ld), ""), rem);
		for (int j = 0; j < nc; j++)
			bvv[j] = dot_load(g, mm, brow, LLVMBuildAdd(b, k, hg_i64(g, (int64_t)j * ld), ""), rem);
		for (int i = 0; i < mr; i++)
			for (int j = 0; j < nc; j++)
				hg_loop_next(g, &l, c[i][j], mm->bf16w ? hg_dpbf16(g, c[i][j], av[i], bvv[j]) : hg_fma(g, av[i], bvv[j], c[i][j]));
		hg_loop_end(g, &l);
		for (int i = 0; i < mr; i++)
			for (int j = 0; j < nc; j++)
				acc[i][j] = c[i][j];
	}
	for (int i = 0; i < mr; i++)
		for (int j = 0; j < nc; j++) {
			LLVMValueRef s = hg_vreduce_add(g, acc[i][j]);
			LLVMValueRef col = LLVMBuildAdd(b, n0, hg_i64(g, j), "");
			if (mm->has_bias)
				s = LLVMBuildFAdd(b, s, hg_load(g, g->t_f32, mm->bias, col), "");
			if (mm->act == 1)
				s = hg_gelu(g, s);
			LLVMValueRef o = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, m0, hg_i64(g, i), ""), hg_i64(g, mm->N), ""),
			                              col, "");
			if (mm->has_res)
				s = LLVMBuildFAdd(b, s, hg_load(g, g->t_f32, mm->res, o), "");
			hg_store(g, s, mm->Y[0], o);
		}
}

static int emit_dot(HostGen *g, MM *mm, LLVMValueRef fn)
{
	LLVMBuilderRef b = g->b;
	enum { DM = 4, DN = 4, CPT = 64 };  /* rows, columns per tile; columns per task */
	int64_t ntasks = (mm->N + CPT - 1) / CPT;
	LLVMValueRef caps[5] = {hg_arg(g, fn, 0), hg_arg(g, fn, 1),
	                        mm->has_bias ? hg_arg(g, fn, 4) : LLVMConstNull(g->t_ptr), hg_arg(g, fn, mm->n->ninputs),
	                        mm->has_res ? hg_arg(g, fn, 5) : LLVMConstNull(g->t_ptr)};
	HgPar p;
	hg_par_begin(g, &p, hg_api(g, fn), hg_i64(g, ntasks), caps, 5, "dot");
	mm->res = p.cap[4];
	mm->A = p.cap[0];
	mm->B = p.cap[1];
	mm->bias = p.cap[2];
	mm->Y[0] = p.cap[3];
	HgLoop lt;
	if (mm->bf16w) {
		/* A as bf16 rows of KB (zero past K), once per chunk of tasks */
		int64_t KB = (mm->K + 31) / 32 * 32;
		mm->Ab = hg_alloca(g, hg_t_bf16(g, 0), mm->M * KB, 64, "adot");
		HgLoop lr;
		LLVMValueRef r = hg_loop_begin(g, &lr, hg_i64(g, 0), hg_i64(g, mm->M), 1, "ar");
		HgLoop lk;
		LLVMValueRef k = hg_loop_begin(g, &lk, hg_i64(g, 0), hg_i64(g, KB), 16, "ak");
		LLVMValueRef left = LLVMBuildSub(b, hg_i64(g, mm->K), k, "");
		left = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, left, hg_i64(g, 0), ""), hg_i64(g, 0), left, "");
		LLVMValueRef src = hg_gepf(g, mm->A, LLVMBuildMul(b, r, hg_i64(g, mm->K), ""));
		LLVMValueRef v = hg_vload_n(g, src, k, left);   /* lanes past K: 0 (none read) */
		LLVMValueRef st = LLVMBuildStore(b, hg_to_bf16(g, v), hg_gep(g, hg_t_bf16(g, 0), mm->Ab,
		                                                             LLVMBuildAdd(b, LLVMBuildMul(b, r, hg_i64(g, KB), ""), k, "")));
		LLVMSetAlignment(st, 32);
		hg_loop_end(g, &lk);
		hg_loop_end(g, &lr);
	}
	LLVMValueRef task = hg_loop_begin(g, &lt, p.i0, p.i1, 1, "task");
	LLVMValueRef c0 = LLVMBuildMul(b, task, hg_i64(g, CPT), "");
	LLVMValueRef c1 = LLVMBuildAdd(b, c0, hg_i64(g, CPT), "");
	c1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, c1, hg_i64(g, mm->N), ""), c1, hg_i64(g, mm->N), "");
	int64_t mfull = mm->M / DM * DM;
	/* columns in groups of DN, then singles */
	for (int pass = 0; pass < 2; pass++) {
		int nc = pass ? 1 : DN;
		LLVMValueRef lo, hi;
		if (pass == 0) {
			lo = c0;
			/* c0 + floor((c1 - c0) / DN) * DN */
			LLVMValueRef w = LLVMBuildSub(b, c1, c0, "");
			hi = LLVMBuildAdd(b, c0, LLVMBuildMul(b, LLVMBuildSDiv(b, w, hg_i64(g, DN), ""), hg_i64(g, DN), ""), "");
		} else {
			LLVMValueRef w = LLVMBuildSub(b, c1, c0, "");
			lo = LLVMBuildAdd(b, c0, LLVMBuildMul(b, LLVMBuildSDiv(b, w, hg_i64(g, DN), ""), hg_i64(g, DN), ""), "");
			hi = c1;
		}
		HgLoop ln;
		LLVMValueRef n0 = hg_loop_begin(g, &ln, lo, hi, nc, "n0");
		if (mfull > 0) {
			HgLoop lm;
			LLVMValueRef m0 = hg_loop_begin(g, &lm, hg_i64(g, 0), hg_i64(g, mfull), DM, "m0");
			dot_tile(g, mm, m0, DM, n0, nc);
			hg_loop_end(g, &lm);
		}
		if (mm->M > mfull)
			dot_tile(g, mm, hg_i64(g, mfull), (int)(mm->M - mfull), n0, nc);
		hg_loop_end(g, &ln);
	}
	hg_loop_end(g, &lt);
	hg_par_end(g, &p);
	return WL_OK;
}

int hg_emit_matmul_nbits(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d)
{
	MM mm;
	if (mm_read(g, n, &mm, d) != WL_OK)
		return WL_ERR;
	if (mm.bits == 4 && !mm.packed)
		return diag_fail(d, "%s: node '%s': MatMulNBits weights were not repacked", hg_model_name(g), n->name);
	const Value *B = n->inputs[1];
	if (mm.f32p && hg_numel(B) != mm.T * mm.K * mm.NR)
		return diag_fail(d, "%s: node '%s': tensor '%s': expected %lld packed floats", hg_model_name(g), n->name, B->name,
		                 (long long)(mm.T * mm.K * mm.NR));
	if (mm.bits == 32 && !mm.bf16w && !mm.f32p) {
		int64_t r0 = mm.trans_b ? mm.N : mm.K, r1 = mm.trans_b ? mm.K : mm.N / mm.groups;
		int64_t bd[8];
		int r = hg_dims(g, n, B, bd, d);
		if (r < 0)
			return WL_ERR;
		if (r != 2 || bd[0] != r0 || bd[1] != r1 || B->type.elem != DT_FLOAT)
			return diag_fail(d, "%s: node '%s': tensor '%s': expected float32[%lld,%lld]", hg_model_name(g), n->name,
			                 B->name, (long long)r0, (long long)r1);
		if (mm.has_bias && (hg_numel(n->inputs[4]) != mm.N || n->inputs[4]->type.elem != DT_FLOAT))
			return diag_fail(d, "%s: node '%s': tensor '%s': bias must be float32[%lld]", hg_model_name(g), n->name,
			                 n->inputs[4]->name, (long long)mm.N);
	}
	if (mm.M == 0)
		return WL_OK;
	if (mm.trans_b)
		return emit_dot(g, &mm, fn);
	return (mm.bits == 4 || mm.bf16w) && mm.MC > 0 && mm.M > mm.MR ? emit_panels(g, &mm, fn) : emit_gemm(g, &mm, fn);
}

/* ---------------------------------------------------------------- blocking (docs/host-contracts.md) */

/* register tiles the autotune may pick (mr x nv; mr·nv accumulators + nv
 * weight vectors + 1 broadcast fit the 32 (AVX-512) or 16 (AVX2) registers) */
static const int tiles512[][2] = {{12, 2}, {8, 3}, {6, 4}, {14, 2}};
static const int tiles256[][2] = {{6, 2}, {4, 3}, {3, 3}};

int hg_mm_tile_candidates(HostGen *g, const int (**t)[2])
{
	*t = g->avx512 ? tiles512 : tiles256;
	return g->avx512 ? 4 : 3;
}

/* The model: kc = K when a panel of K x NR floats takes at most a quarter of
 * L2 (else the largest multiple of the block that does); mc = the rows of A
 * (mc x kc floats) that fill half of L2, a multiple of mr. M < 4·mr: the
 * in-register path (mc 0). */
static void blocking_for(HostGen *g, int mr, int nv, int mcmul, int64_t M, int64_t K, int64_t block, bool full_k,
                         HgBlocking *bl)
{
	const HgCpu *c = g->cpu;
	int64_t l2 = c && c->l2 > 0 ? c->l2 : 512 * 1024;
	int64_t nr = (int64_t)nv * g->vw;
	bl->mr = mr;
	bl->nv = nv;
	bl->mc = 0;
	bl->kc = 0;
	if (M < 4 * mr)
		return;
	int64_t kc = K;
	if (!full_k && K * nr * 4 > l2 / 4) {
		kc = l2 / 4 / (nr * 4) / block * block;
		if (kc < block)
			kc = block;
	}
	int64_t mc = l2 / 2 / (kc * 4) / mr * mr * mcmul;
	if (mc < mr)
		mc = mr;
	int64_t mmax = (M + mr - 1) / mr * mr;
	bl->mc = mc < mmax ? mc : mmax;
	bl->kc = kc;
}

void hg_mm_default_blocking(HostGen *g, int64_t M, int64_t K, int64_t N, int64_t block, HgBlocking *bl)
{
	(void)N;
	memset(bl, 0, sizeof *bl);
	blocking_for(g, g->avx512 ? 12 : 6, 2, 1, M, K, block, false, bl);
	bl->how = "model";
}

int hg_mm_blocking(HostGen *g, Node *n, int64_t M, int64_t K, int64_t N, int64_t block, bool has_res, HgBlocking *bl,
                   Diag *d)
{
	memset(bl, 0, sizeof *bl);
	const char *force = getenv("WLOWER_HOST_MM_BLOCKING");   /* "MR,NV,MC,KC": tests and A/B runs */
	if (force && *force) {
		long long mr, nv, mc, kc;
		if (sscanf(force, "%lld,%lld,%lld,%lld", &mr, &nv, &mc, &kc) != 4 || mr < 1 || mr > 16 || nv < 1 || nv > 4 ||
		    mr * nv + nv + 1 > (g->avx512 ? 32 : 16) || mc < 0 || kc < 0 || (mc && (mc % mr || kc < 1)) ||
		    (mc && kc < K && kc % block))
			return diag_fail(d, "WLOWER_HOST_MM_BLOCKING='%s': expected MR,NV,MC,KC (mr·nv+nv+1 registers at most %d, "
			                 "mc a multiple of mr, kc a multiple of the block %lld or >= K; mc 0: in-register path)",
			                 force, g->avx512 ? 32 : 16, (long long)block);
		bl->mr = (int)mr;
		bl->nv = (int)nv;
		bl->mc = mc;
		bl->kc = kc > K ? K : kc;
		if (has_res && bl->mc && bl->kc < K)
			bl->kc = K;
		bl->how = "forced";
		return WL_OK;
	}
	blocking_for(g, g->avx512 ? 12 : 6, 2, 1, M, K, block, has_res, bl);
	bl->how = "model";
	if (!g->cpu || !g->cpu->autotune || bl->mc == 0)
		return WL_OK;
	/* candidates: the model's choice first, the other register tiles, then
	 * the model's tile with kc for L1 (a K x NR panel in half of L1d) and
	 * with twice the rows per M block */
	HgBlocking cand[8];
	int nc = 0;
	cand[nc++] = *bl;
	const int (*tl)[2];
	int nt = hg_mm_tile_candidates(g, &tl);
	for (int i = 1; i < nt; i++)
		blocking_for(g, tl[i][0], tl[i][1], 1, M, K, block, has_res, &cand[nc++]);
	int64_t nr = 2 * (int64_t)g->vw, l1 = g->cpu->l1d > 0 ? g->cpu->l1d : 32768;
	int64_t kc1 = l1 / 2 / (nr * 4) / block * block;
	if (!has_res && kc1 >= block && kc1 < bl->kc) {
		HgBlocking c = *bl;
		c.kc = kc1;
		int64_t l2 = g->cpu->l2 > 0 ? g->cpu->l2 : 512 * 1024;
		c.mc = l2 / 2 / (kc1 * 4) / c.mr * c.mr;
		int64_t mmax = (M + c.mr - 1) / c.mr * c.mr;
		if (c.mc > mmax)
			c.mc = mmax;
		if (c.mc >= c.mr)
			cand[nc++] = c;
	}
	blocking_for(g, bl->mr, bl->nv, 2, M, K, block, has_res, &cand[nc]);
	if (cand[nc].mc != bl->mc)
		nc++;
	for (int i = 0; i < nc; i++)
		cand[i].how = "model";
	return hg_autotune_mm(g, n, M, K, N, block, has_res, cand, nc, bl, d);
}

/* The autotune's trial (hg_autotune.c): the panel kernel of blocking bl for an
 * M x K x N 4-bit MatMulNBits without bias or epilogue; args as the node's
 * (0 A, 1 packed weights, 2 scales, 3 offsets, n->ninputs: Y). */
void hg_mm_trial_kernel(HostGen *g, const Node *n, int64_t M, int64_t K, int64_t N, int64_t block,
                        const HgBlocking *bl, LLVMValueRef fn)
{
	MM mm;
	memset(&mm, 0, sizeof mm);
	mm.n = n;
	mm.M = M;
	mm.K = K;
	mm.N = N;
	mm.bits = 4;
	mm.block = block;
	mm.kblocks = (K + block - 1) / block;
	mm.nsplit = 1;
	mm.slen[0] = N;
	mm.MR = bl->mr;
	mm.NV = bl->nv;
	mm.NR = bl->nv * g->vw;
	mm.MC = bl->mc;
	mm.KC = bl->kc;
	mm.T = (N + mm.NR - 1) / mm.NR;
	mm.tstart[1] = mm.T;
	mm.has_tail = N % mm.NR != 0;
	mm.packed = true;
	mm.zpb = true;   /* zero-point bytes, as a packed node without float zero points */
	mm.bf16 = g->bf16;
	if (mm.MC > 0 && M > mm.MR)
		emit_panels(g, &mm, fn);
	else
		emit_gemm(g, &mm, fn);
	LLVMBuildRet(g->b, hg_i32(g, WL_MODULE_OK));
}
