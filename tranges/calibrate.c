/* calibrate.c — record the value range of every tensor the float reference
 * executor computes (the engine of `wlower calibrate`, compiler/driver/
 * cmd_calibrate.c, and of pipeline calibration).
 *
 *   wlower calibrate MODEL --samples NAME=FILE.npy ... -o X.tranges
 *                    [--percentile P] [--threads N]
 *
 * calib_observe is the executor's observer (every node output) and is also
 * called for each bound input, so the result has a range for every graph
 * input and every node output (initializers are not listed: their ranges
 * are in the model).
 *
 * Ranges are over the finite values, NaN skipped and counted (CalibReport). A tensor that held -inf
 * (+inf) gets min -FLT_MAX (max +FLT_MAX), since JSON has no infinity, and
 * is named in a note on stderr. Integer and bool tensors are recorded too.
 *
 * --percentile P (0 < P <= 100) clips outliers. The rule, per tensor:
 *   c = the P-th percentile of |x| over every element of every sample
 *       (pooled), computed from a histogram of the float32 |x| with 128 bins
 *       per octave (the bin index is the top 15 bits of the float's bits); c
 *       is the upper edge of the bin that reaches P%, so at least P% of the
 *       values lie in [-c, c], and c is never above max |x|;
 *   range = [max(min, -c), min(max, c)].
 * P = 100 gives the plain min/max.
 *
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tranges/calibrate.h"

enum { HIST_BINS = 1 << 15 };   /* top 15 bits of a non-negative float32 */

typedef struct Stat {
	const Value *v;
	bool seen;                  /* at least one finite value */
	bool observed;              /* reported at all */
	double min, max;
	bool neg_inf, pos_inf;
	int64_t nan;
	uint64_t *hist;             /* --percentile only */
} Stat;

struct Calib {
	Stat *st; int nst;
	bool want_hist;
};

static Stat *stat_for(Calib *c, const Value *v)
{
	int id = v->id;
	WL_ASSERT(id >= 0);
	if (id >= c->nst) {
		int n = c->nst ? c->nst : 256;
		while (n <= id)
			n *= 2;
		c->st = realloc(c->st, (size_t)n * sizeof *c->st);
		if (!c->st)
			wl_die(__FILE__, __LINE__, "out of memory");
		memset(c->st + c->nst, 0, (size_t)(n - c->nst) * sizeof *c->st);
		c->nst = n;
	}
	Stat *s = &c->st[id];
	if (!s->v)
		s->v = v;
	WL_ASSERT(s->v == v);
	return s;
}

static inline void add_value(Stat *s, double x, uint64_t *hist)
{
	if (x != x) {
		s->nan++;
		return;
	}
	if (isinf(x)) {
		if (x < 0)
			s->neg_inf = true;
		else
			s->pos_inf = true;
		return;
	}
	if (!s->seen) {
		s->min = s->max = x;
		s->seen = true;
	} else if (x < s->min) {
		s->min = x;
	} else if (x > s->max) {
		s->max = x;
	}
	if (hist) {
		float a = fabsf((float)x);
		uint32_t b = f32_to_bits(a) >> 16;
		hist[b < HIST_BINS ? b : HIST_BINS - 1]++;
	}
}

/* float32 without a histogram: min/max in registers (NaN fails both
 * comparisons and drops out, counted apart); a tensor with infinities takes
 * the slow path. */
static void add_f32(Stat *s, const float *p, int64_t n, uint64_t *hist)
{
	float mn = INFINITY, mx = -INFINITY;
	if (!hist) {
		int64_t nan = 0;
		for (int64_t i = 0; i < n; i++) {
			float v = p[i];
			mn = v < mn ? v : mn;
			mx = v > mx ? v : mx;
			nan += v != v;
		}
		if (!isinf(mn) && !isinf(mx)) {   /* finite values, no infinities */
			add_value(s, mn, NULL);
			add_value(s, mx, NULL);
			s->nan += nan;
			return;
		}
		if (mn > mx) {                    /* empty or all NaN */
			s->nan += nan;
			return;
		}
	}
	for (int64_t i = 0; i < n; i++)
		add_value(s, p[i], hist);
}

void calib_observe(void *ctx, const Value *v, const RTensor *t)
{
	Calib *c = ctx;
	if (!v || !t)
		return;
	Stat *s = stat_for(c, v);
	s->observed = true;
	int64_t n = rt_numel(t);
	if (c->want_hist && !s->hist && n > 0)
		s->hist = wl_xcalloc(HIST_BINS, sizeof *s->hist);
	uint64_t *h = s->hist;
	const void *d = t->data;
	switch (t->dtype) {
	case DT_FLOAT: add_f32(s, d, n, h); break;
	case DT_DOUBLE: for (int64_t i = 0; i < n; i++) add_value(s, ((const double *)d)[i], h); break;
	case DT_FLOAT16: for (int64_t i = 0; i < n; i++) add_value(s, rt_half_to_float(((const uint16_t *)d)[i]), h); break;
	case DT_INT8: for (int64_t i = 0; i < n; i++) add_value(s, ((const int8_t *)d)[i], h); break;
	case DT_UINT8: case DT_BOOL: for (int64_t i = 0; i < n; i++) add_value(s, ((const uint8_t *)d)[i], h); break;
	case DT_INT16: for (int64_t i = 0; i < n; i++) add_value(s, ((const int16_t *)d)[i], h); break;
	case DT_UINT16: for (int64_t i = 0; i < n; i++) add_value(s, ((const uint16_t *)d)[i], h); break;
	case DT_INT32: for (int64_t i = 0; i < n; i++) add_value(s, ((const int32_t *)d)[i], h); break;
	case DT_UINT32: for (int64_t i = 0; i < n; i++) add_value(s, ((const uint32_t *)d)[i], h); break;
	case DT_INT64: for (int64_t i = 0; i < n; i++) add_value(s, (double)((const int64_t *)d)[i], h); break;
	case DT_UINT64: for (int64_t i = 0; i < n; i++) add_value(s, (double)((const uint64_t *)d)[i], h); break;
	default: break;             /* strings and the like have no range */
	}
}

/* The clip value c of the percentile rule (see the top of the file). */
static double percentile_clip(const Stat *s, double p)
{
	uint64_t total = 0;
	for (int b = 0; b < HIST_BINS; b++)
		total += s->hist[b];
	if (total == 0)
		return INFINITY;
	uint64_t want = (uint64_t)ceil(p / 100.0 * (double)total);
	if (want < 1)
		want = 1;
	uint64_t cum = 0;
	int b = 0;
	for (; b < HIST_BINS; b++) {
		cum += s->hist[b];
		if (cum >= want)
			break;
	}
	if (b >= HIST_BINS - 1)
		return INFINITY;
	float c = bits_to_f32((uint32_t)(b + 1) << 16);
	double maxabs = fmax(fabs(s->min), fabs(s->max));
	return fmin((double)c, maxabs);
}

Calib *calib_new(bool want_hist)
{
	Calib *c = wl_xcalloc(1, sizeof *c);
	c->want_hist = want_hist;
	return c;
}

void calib_free(Calib *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->nst; i++)
		free(c->st[i].hist);
	free(c->st);
	free(c);
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* Ranges in a stable order: graph inputs, then node outputs in node order,
 * then anything else observed (subgraph values), by id. */
TRanges *calib_collect(Calib *c, Module *m, const char *model, int64_t S, double percentile, CalibReport *rep)
{
	TRanges *tr = tranges_new(base_name(model), S);
	bool *done = wl_xcalloc((size_t)c->nst + 1, 1);
	*rep = (CalibReport){0};
	int *n_inf = &rep->n_inf, *n_missing = &rep->n_missing;
	const char **missing = &rep->missing;
	char *inf_names = rep->inf_names;
	size_t inf_len = sizeof rep->inf_names;
	int nv = 0;
	Graph *g = m->graph;
	size_t cap = (size_t)g->ninputs + (size_t)c->nst + 1;
	FOR_NODES(g, n)
		cap += (size_t)n->noutputs;
	const Value **order = wl_xmalloc(cap * sizeof *order);
	for (int i = 0; i < g->ninputs; i++)
		if (!g->inputs[i]->init)
			order[nv++] = g->inputs[i];
	FOR_NODES(g, n)
		for (int i = 0; i < n->noutputs; i++)
			if (n->outputs[i])
				order[nv++] = n->outputs[i];
	int nfixed = nv;
	for (int id = 0; id < c->nst; id++)
		if (c->st[id].v)
			order[nv++] = c->st[id].v;
	for (int k = 0; k < nv; k++) {
		const Value *v = order[k];
		Stat *s = v->id < c->nst ? &c->st[v->id] : NULL;
		if (s && s->v != v)
			s = NULL;
		if (!s || !s->observed) {
			if (k < nfixed) {
				if (!*missing)
					*missing = v->name;
				++*n_missing;
			}
			continue;
		}
		if (done[v->id])
			continue;
		done[v->id] = true;
		if (s->nan > 0) {
			if (!rep->nan_first)
				rep->nan_first = v->name;
			rep->n_nan++;
			rep->nan_values += s->nan;
		}
		if (!s->seen && !s->neg_inf && !s->pos_inf) {
			if (s->nan > 0) {       /* every value NaN: no range at all */
				if (!rep->all_nan)
					rep->all_nan = v->name;
				rep->n_all_nan++;
			}
			continue;           /* empty, or all NaN */
		}
		double mn = s->seen ? s->min : (s->neg_inf ? -FLT_MAX : FLT_MAX);
		double mx = s->seen ? s->max : (s->pos_inf ? FLT_MAX : -FLT_MAX);
		if (percentile > 0 && percentile < 100 && s->hist && s->seen) {
			double clip = percentile_clip(s, percentile);
			mn = fmax(mn, -clip);
			mx = fmin(mx, clip);
		}
		if (s->neg_inf)
			mn = -FLT_MAX;
		if (s->pos_inf)
			mx = FLT_MAX;
		if (mn > mx)
			mn = mx = s->neg_inf ? -FLT_MAX : FLT_MAX;
		if (s->neg_inf || s->pos_inf) {
			size_t l = strlen(inf_names);
			if (*n_inf < 4 && l + strlen(v->name) + 8 < inf_len)
				snprintf(inf_names + l, inf_len - l, "%s'%s'", l ? ", " : "", v->name);
			++*n_inf;
		}
		tranges_set(tr, v->name, mn, mx);
	}
	free(order);
	free(done);
	return tr;
}

