/* plan.c — liveness intervals and greedy first-fit placement (plan.h). */
#include <stdlib.h>
#include <string.h>
#include "plan.h"

PlanLive *plan_liveness(const Graph *g, int nvals)
{
	PlanLive *lv = malloc(sizeof *lv * (size_t)(nvals > 0 ? nvals : 1));
	if (!lv)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < nvals; i++)
		lv[i] = (PlanLive){-1, -1};
	int idx = 0;
	FOR_NODES(g, n) {
		for (int i = 0; i < n->ninputs; i++) {
			const Value *v = n->inputs[i];
			if (v && v->id >= 0 && v->id < nvals)
				lv[v->id].last = idx;
		}
		for (int i = 0; i < n->noutputs; i++) {
			const Value *v = n->outputs[i];
			if (!v || v->id < 0 || v->id >= nvals)
				continue;
			lv[v->id].def = idx;
			if (lv[v->id].last < idx)
				lv[v->id].last = idx;
		}
		idx++;
	}
	return lv;
}

void plan_init(Planner *p, uint64_t align, uint64_t capacity)
{
	WL_ASSERT(align > 0 && (align & (align - 1)) == 0);
	memset(p, 0, sizeof *p);
	p->align = align;
	p->capacity = capacity;
}

void plan_fini(Planner *p)
{
	free(p->b);
	free(p->tmp);
	p->b = p->tmp = NULL;
	p->n = p->cap = 0;
}

static uint64_t align_up(const Planner *p, uint64_t x)
{
	return (x + p->align - 1) & ~(p->align - 1);
}

uint64_t plan_size(const Planner *p, uint64_t bytes)
{
	return align_up(p, bytes ? bytes : p->empty_is_unit ? 1 : 0);
}

static int cmp_off(const void *a, const void *b)
{
	const PlanBlock *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

bool plan_place(Planner *p, uint64_t bytes, int first, int last, uint64_t *off)
{
	WL_ASSERT(first <= last);
	uint64_t size = plan_size(p, bytes);
	if (p->in_order) {
		WL_ASSERT(p->nplaced + p->nrefused == 0 || first >= p->front);
		p->front = first;
	}
	if (p->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 64;
		p->b = realloc(p->b, sizeof *p->b * (size_t)p->cap);
		p->tmp = realloc(p->tmp, sizeof *p->tmp * (size_t)p->cap);
		if (!p->b || !p->tmp)
			wl_die(__FILE__, __LINE__, "out of memory");
	}
	/* the placed blocks alive at some time of [first, last] */
	int keep = 0, nc = 0;
	for (int i = 0; i < p->n; i++) {
		const PlanBlock b = p->b[i];
		if (p->in_order && b.last < first)
			continue;                        /* ended: no later request meets it */
		p->b[keep++] = b;
		if (b.first <= last && first <= b.last)
			p->tmp[nc++] = b;
	}
	p->n = keep;
	qsort(p->tmp, (size_t)nc, sizeof *p->tmp, cmp_off);
	uint64_t at = 0;
	for (int i = 0; i < nc; i++) {
		if (p->tmp[i].off >= at + size)
			break;
		if (p->tmp[i].off + p->tmp[i].size > at)
			at = align_up(p, p->tmp[i].off + p->tmp[i].size);
	}
	if (at + size > p->capacity || at + size < at) {
		p->nrefused++;
		return false;
	}
	p->b[p->n++] = (PlanBlock){at, size, first, last};
	p->nplaced++;
	if (at + size > p->peak)
		p->peak = at + size;
	*off = at;
	return true;
}

typedef struct SortCtx { const Planner *p; const PlanItem *items; } SortCtx;

static int cmp_largest(const void *a, const void *b, void *ctx)
{
	const SortCtx *c = ctx;
	int x = *(const int *)a, y = *(const int *)b;
	uint64_t sx = plan_size(c->p, c->items[x].bytes), sy = plan_size(c->p, c->items[y].bytes);
	if (sx != sy)
		return sx < sy ? 1 : -1;
	return x - y;
}

void plan_place_all(Planner *p, PlanItem *items, int n, int order)
{
	int *idx = malloc(sizeof *idx * (size_t)(n > 0 ? n : 1));
	if (!idx)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < n; i++)
		idx[i] = i;
	if (order == PLAN_LARGEST_FIRST) {
		SortCtx c = {p, items};
		qsort_r(idx, (size_t)n, sizeof *idx, cmp_largest, &c);
	}
	for (int i = 0; i < n; i++) {
		PlanItem *it = &items[idx[i]];
		it->placed = plan_place(p, it->bytes, it->first, it->last, &it->off);
		if (!it->placed)
			it->off = 0;
	}
	free(idx);
}
