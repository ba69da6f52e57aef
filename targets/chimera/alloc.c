/* alloc.c — memory plan of the Chimera module: weights.bin layout, OCM
 * buffers by liveness, the DDR arena, the DMA transfers, and the argument
 * expressions of every kernel call.
 *
 * Homes. A module input or output lives in the DDR arena (ccl::IO.mem =
 * MEM_DDR; the runner reads inputs there and writes outputs from there).
 * Every other activation lives in OCM from its producing kernel to its last
 * reader, unless it does not fit: then it is spilled, i.e. lives in the DDR
 * arena (a note on stderr, "spills" in schedule.json). Constants are blobs
 * of weights.bin (the op's kernel in ops/ packs them), each 64-byte aligned, in kernel
 * order then blob order.
 *
 * OCM placement is the shared planner (compiler/ir/plan.h): first fit, 64-byte
 * aligned, capacity --ocm, requests in kernel order, each block with its
 * liveness interval in kernel indices (plan_liveness: producing kernel ..
 * last reader). For kernel i, in this order:
 *   1. its weight blobs are staged DDR→OCM just before the call, blocks
 *      alive [i, i] (a blob that does not fit is read in place from
 *      weights.bin; so is the table of an op whose row `gathers` (Gather),
 *      of which only the gathered rows are read);
 *   2. each input homed in DDR (module input, spilled value) is filled
 *      DDR→OCM into a block alive [i, i] (or read in place); a module input
 *      read by later kernels too is filled once into a block alive
 *      [i, last reader], when that fits;
 *   3. each output: a module output is written to an OCM staging block alive
 *      [i, i] and copied OCM→DDR after the call (or written in place in DDR);
 *      any other output gets its OCM block alive [i, last reader], or is
 *      spilled (the planner refused it) and written in place in DDR (its
 *      readers fill it back, step 2);
 *   4. its scratch (the kernel info's scratch_bytes), alive [i, i]; DDR if
 *      it does not fit.
 * The DDR arena is a bump allocator (module IO first, in graph input/output
 * order, then spills and scratch). ocm_peak is the highest OCM address in
 * use.
 */
#include <stdlib.h>
#include <string.h>
#include "chimera.h"
#include "compiler/ir/plan.h"

#define ALIGN 64u

/* The bytes a gathering kernel reads of a table blob of len bytes: one row
 * of len / V bytes per id (Gather: the float/fixed table; QGather: the int8
 * rows and the {M, Q} row scales), ids the last input, V the table's rows. */
static uint64_t gathered_bytes(const Node *n, size_t len)
{
	const Value *t = n->inputs[0], *ids = n->inputs[n->ninputs - 1];
	int64_t V = t && t->init && t->init->ndim >= 1 ? t->init->dims[0] : 0;
	if (V <= 0 || !ids)
		return (uint64_t)len;
	return (uint64_t)(len / (size_t)V) * (uint64_t)type_numel(&ids->type);
}

static uint64_t align_up(uint64_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

static uint64_t ddr_alloc(ChModule *cm, uint64_t bytes)
{
	uint64_t off = cm->ddr_bytes;
	cm->ddr_bytes = align_up(off + (bytes ? bytes : 1));
	return off;
}

/* Records a buffer of the kernel (schedule.json "buffers") and returns its
 * argument expression: "c.ocm + OFF", "c.ddr + OFF" or "c.w + OFF". */
static const char *use_buf(ChModule *cm, ChKernel *k, const char *value, const char *role, int mem, uint64_t off,
                           uint64_t bytes)
{
	WL_ASSERT(k->nbuf < CH_MAX_BUFS);
	k->buf[k->nbuf++] = (ChBuf){value, role, mem, off, bytes};
	const char *base = mem == CH_MEM_OCM ? "c.ocm" : mem == CH_MEM_DDR ? "c.ddr" : "c.w";
	return arena_printf(cm->a, "%s + %llu", base, (unsigned long long)off);
}

static void add_dma(ChKernel *k, int dir, int src_mem, uint64_t src_off, int dst_mem, uint64_t dst_off,
                    uint64_t bytes, const char *what)
{
	WL_ASSERT(k->ndma < CH_MAX_DMA);
	k->dma[k->ndma++] = (ChDma){dir, src_mem, dst_mem, src_off, dst_off, bytes, what};
}

static void human(uint64_t b, char *buf, size_t n)
{
	if (b >= (1u << 20) && b % (1u << 20) == 0)
		snprintf(buf, n, "%llu MB", (unsigned long long)(b >> 20));
	else if (b >= (1u << 20))
		snprintf(buf, n, "%.1f MB", b / 1048576.0);
	else if (b >= 1024 && b % 1024 == 0)
		snprintf(buf, n, "%llu KB", (unsigned long long)(b >> 10));
	else if (b >= 1024)
		snprintf(buf, n, "%.1f KB", b / 1024.0);
	else
		snprintf(buf, n, "%llu B", (unsigned long long)b);
}

int ch_alloc(ChModule *cm, Diag *d)
{
	(void)d;
	Graph *g = cm->m->graph;
	PlanLive *live = plan_liveness(g, cm->nvals);
	Planner o;
	plan_init(&o, ALIGN, cm->cfg->ocm_bytes);
	o.empty_is_unit = true;
	o.in_order = true;
	cm->spills = calloc((size_t)cm->nvals + 1, sizeof *cm->spills);

	/* module IO homes in DDR, in graph input then output order */
	for (int i = 0; i < g->ninputs; i++) {
		Value *v = g->inputs[i];
		if (v->init)
			continue;
		ChVal *cv = &cm->vals[v->id];
		cv->mem = CH_MEM_DDR;
		cv->off = ddr_alloc(cm, cv->bytes);
	}
	for (int i = 0; i < g->noutputs; i++) {
		ChVal *cv = &cm->vals[g->outputs[i]->id];
		if (cv->io_in)
			continue;
		cv->mem = CH_MEM_DDR;
		cv->off = ddr_alloc(cm, cv->bytes);
	}

	for (int i = 0; i < cm->nk; i++) {
		ChKernel *k = &cm->k[i];
		Node *n = k->n;
		const char *nn = ch_node_label(n);

		/* 1. weights */
		for (int b = 0; b < k->ki.nblobs; b++) {
			const CclBlob *bl = &k->ki.blobs[b];
			uint64_t woff = cm->weights_bytes, off;
			k->blob_woff[b] = woff;
			cm->weights_bytes = align_up(woff + bl->len);
			const char *role = bl->role ? bl->role : "blob";
			bool dup = false;
			for (int b2 = 0; b2 < k->ki.nblobs; b2++)
				if (b2 != b && k->ki.blobs[b2].role && !strcmp(k->ki.blobs[b2].role, role))
					dup = true;
			const char *name = dup ? arena_printf(cm->a, "%s#%s.%d", nn, role, b)
			                       : arena_printf(cm->a, "%s#%s", nn, role);
			/* a table (Gather) is never staged: only the gathered rows are read */
			bool gather = k->op->gathers;
			if (bl->len > 0 && !gather && plan_place(&o, bl->len, i, i, &off)) {
				add_dma(k, 0, CH_MEM_W, woff, CH_MEM_OCM, off, bl->len, "weights");
				k->blob_expr[b] = use_buf(cm, k, name, "weight", CH_MEM_OCM, off, bl->len);
			} else {
				k->blob_expr[b] = use_buf(cm, k, name, "weight", CH_MEM_W, woff, bl->len);
				k->direct_ext_read += gather ? gathered_bytes(n, bl->len) : bl->len;
			}
		}
		/* 2. inputs */
		for (int j = 0; j < n->ninputs; j++) {
			Value *v = n->inputs[j];
			k->in_expr[j] = NULL;
			if (!v || v->init)
				continue;
			ChVal *cv = &cm->vals[v->id];
			int prev = -1;
			for (int p = 0; p < j; p++)
				if (n->inputs[p] == v)
					prev = p;
			if (prev >= 0) {
				k->in_expr[j] = k->in_expr[prev];
				continue;
			}
			uint64_t off;
			int last = live[v->id].last;
			if (cv->mem == CH_MEM_OCM) {
				k->in_expr[j] = use_buf(cm, k, v->name, "in", CH_MEM_OCM, cv->off, cv->bytes);
			} else if (cv->copy) {
				k->in_expr[j] = use_buf(cm, k, v->name, "in", CH_MEM_OCM, cv->copy_off, cv->bytes);
			} else if (cv->io_in && last > i && plan_place(&o, cv->bytes, i, last, &off)) {
				/* a module input read by several kernels: one fill, kept to its last reader */
				cv->copy = true;
				cv->copy_off = off;
				add_dma(k, 0, CH_MEM_DDR, cv->off, CH_MEM_OCM, off, cv->bytes, "activations");
				k->in_expr[j] = use_buf(cm, k, v->name, "in", CH_MEM_OCM, off, cv->bytes);
			} else if (plan_place(&o, cv->bytes, i, i, &off)) {
				add_dma(k, 0, CH_MEM_DDR, cv->off, CH_MEM_OCM, off, cv->bytes,
				        cv->spilled ? "fill" : "activations");
				k->in_expr[j] = use_buf(cm, k, v->name, "in", CH_MEM_OCM, off, cv->bytes);
			} else {
				k->in_expr[j] = use_buf(cm, k, v->name, "in", CH_MEM_DDR, cv->off, cv->bytes);
				k->direct_ext_read += cv->bytes;
			}
		}
		/* 3. outputs */
		for (int j = 0; j < n->noutputs; j++) {
			Value *v = n->outputs[j];
			k->out_expr[j] = NULL;
			if (!v)
				continue;
			ChVal *cv = &cm->vals[v->id];
			uint64_t off;
			if (cv->io_out) {
				if (plan_place(&o, cv->bytes, i, i, &off)) {
					add_dma(k, 1, CH_MEM_OCM, off, CH_MEM_DDR, cv->off, cv->bytes, "activations");
					k->out_expr[j] = use_buf(cm, k, v->name, "out", CH_MEM_OCM, off, cv->bytes);
				} else {
					k->out_expr[j] = use_buf(cm, k, v->name, "out", CH_MEM_DDR, cv->off, cv->bytes);
					k->direct_ext_write += cv->bytes;
				}
			} else if (plan_place(&o, cv->bytes, i, live[v->id].last, &off)) {
				cv->mem = CH_MEM_OCM;
				cv->off = off;
				k->out_expr[j] = use_buf(cm, k, v->name, "out", CH_MEM_OCM, off, cv->bytes);
			} else {
				cv->mem = CH_MEM_DDR;
				cv->spilled = true;
				cv->off = ddr_alloc(cm, cv->bytes);
				cm->spills[cm->nspills++] = cv;
				char o1[32], o2[32];
				human(cm->cfg->ocm_bytes, o1, sizeof o1);
				human(cv->bytes, o2, sizeof o2);
				fprintf(stderr, "wlower: note: OCM %s: value '%s' (%s) spilled to DDR\n", o1, v->name, o2);
				k->out_expr[j] = use_buf(cm, k, v->name, "out", CH_MEM_DDR, cv->off, cv->bytes);
				k->direct_ext_write += cv->bytes;
			}
		}
		/* 4. scratch */
		k->scratch_expr = NULL;
		if (k->ki.scratch_bytes > 0) {
			uint64_t off;
			const char *name = arena_printf(cm->a, "%s#scratch", nn);
			if (plan_place(&o, k->ki.scratch_bytes, i, i, &off)) {
				k->scratch_expr = use_buf(cm, k, name, "scratch", CH_MEM_OCM, off, k->ki.scratch_bytes);
			} else {
				off = ddr_alloc(cm, k->ki.scratch_bytes);
				k->scratch_expr = use_buf(cm, k, name, "scratch", CH_MEM_DDR, off, k->ki.scratch_bytes);
				k->direct_ext_read += k->ki.scratch_bytes;
				k->direct_ext_write += k->ki.scratch_bytes;
			}
		}
	}
	cm->ocm_peak = o.peak;
	plan_fini(&o);
	free(live);
	return WL_OK;
}
