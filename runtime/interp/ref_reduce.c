/* ref_reduce.c — reductions, arg-reductions, softmax family, CumSum.
 *
 * Reduce*: the axes come from the second input (ReduceSum since opset 13,
 * the others since 18) or from the `axes` attribute; empty axes reduce
 * everything unless noop_with_empty_axes=1. Floating point sums (Sum, Mean,
 * SumSquare, L1, L2, LogSum, LogSumExp, Prod) accumulate in double and round
 * once; integers accumulate in int64. An empty reduction gives the identity
 * (0, 1, -inf/+inf for Max/Min, NaN for Mean).
 * Softmax/LogSoftmax/Hardmax: opset < 13 coerces the input to 2-D at `axis`
 * (default 1); from 13 on the op works along one axis (default -1). The
 * exponentials are float, their sum double.
 * Outer rows are split over the thread pool when the input is large.
 */
#include "ref.h"

/* ---------------------------------------------------------------- Reduce */

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_SUMSQ, R_L1, R_L2, R_LOGSUM, R_LOGSUMEXP };

static const int red_ops[OP_COUNT_] = {
	[OP_ReduceSum] = R_SUM, [OP_ReduceMean] = R_MEAN, [OP_ReduceMax] = R_MAX, [OP_ReduceMin] = R_MIN,
	[OP_ReduceProd] = R_PROD, [OP_ReduceSumSquare] = R_SUMSQ, [OP_ReduceL1] = R_L1, [OP_ReduceL2] = R_L2,
	[OP_ReduceLogSum] = R_LOGSUM, [OP_ReduceLogSumExp] = R_LOGSUMEXP,
};

typedef struct RedGeom {
	bool red[RT_MAX_DIMS];
	int nk, nr;                       /* kept / reduced dims (in order) */
	int64_t kd[RT_MAX_DIMS], ks[RT_MAX_DIMS];   /* kept dims, input strides */
	int64_t rd[RT_MAX_DIMS], rs[RT_MAX_DIMS];   /* reduced dims, input strides */
	int64_t nout, nred;
	bool noop;
} RedGeom;

static int red_geom(const KCall *c, Diag *d, RedGeom *g, int64_t *odims, int *ond)
{
	RTensor *x = c->in[0];
	int64_t keep, noop;
	if (attr_get_int(c, d, "keepdims", 1, &keep) || attr_get_int(c, d, "noop_with_empty_axes", 0, &noop))
		return WL_ERR;
	int64_t axes[RT_MAX_DIMS * 2];
	int na = 0;
	if (c->nin > 1 && c->in[1]) {
		if (read_ints(c, 1, axes, RT_MAX_DIMS * 2, &na, d))
			return WL_ERR;
	} else {
		const int64_t *a;
		int n = attr_ints(c->node, "axes", &a);
		if (n > RT_MAX_DIMS * 2)
			return kfail(c, d, "too many axes");
		for (int i = 0; i < n; i++)
			axes[na++] = a[i];
	}
	memset(g, 0, sizeof *g);
	g->noop = na == 0 && noop;
	for (int i = 0; i < na; i++) {
		int64_t ax;
		if (norm_axis(c, d, axes[i], x->ndim, &ax))
			return WL_ERR;
		g->red[ax] = true;
	}
	if (na == 0 && !noop)
		for (int i = 0; i < x->ndim; i++)
			g->red[i] = true;
	int64_t st[RT_MAX_DIMS];
	contiguous_strides(x->ndim, x->dims, st);
	*ond = 0;
	g->nout = g->nred = 1;
	for (int i = 0; i < x->ndim; i++) {
		if (g->red[i]) {
			g->rd[g->nr] = x->dims[i];
			g->rs[g->nr++] = st[i];
			g->nred *= x->dims[i];
			if (keep)
				odims[(*ond)++] = 1;
		} else {
			g->kd[g->nk] = x->dims[i];
			g->ks[g->nk++] = st[i];
			g->nout *= x->dims[i];
			odims[(*ond)++] = x->dims[i];
		}
	}
	return WL_OK;
}

int ref_red_prepare(KCall *c, Diag *d)
{
	int *op = arena_alloc(c->arena, sizeof(int));
	*op = red_ops[c->node->op];
	c->state = op;
	(void)d;
	return WL_OK;
}

int ref_red_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_NUM))
		return WL_ERR;
	RedGeom g;
	int64_t od[RT_MAX_DIMS];
	int ond;
	if (red_geom(c, d, &g, od, &ond))
		return WL_ERR;
	if (g.noop)
		set_out(c->out[0], c->in[0]->dtype, c->in[0]->ndim, c->in[0]->dims);
	else
		set_out(c->out[0], c->in[0]->dtype, ond, od);
	return WL_OK;
}

typedef struct RedJob {
	const KCall *c;
	RedGeom g;
	int op;
} RedJob;

static double red_one(const RedJob *j, int64_t base)
{
	const RTensor *x = j->c->in[0];
	int op = j->op;
	int64_t idx[RT_MAX_DIMS] = {0};
	double acc;
	switch (op) {
	case R_PROD: acc = 1; break;
	case R_MAX: acc = -INFINITY; break;
	case R_MIN: acc = INFINITY; break;
	default: acc = 0; break;
	}
	double mx = -INFINITY;
	if (op == R_LOGSUMEXP) {
		/* max first for stability */
		for (int64_t r = 0; r < j->g.nred; r++) {
			int64_t off = base;
			for (int k = 0; k < j->g.nr; k++)
				off += idx[k] * j->g.rs[k];
			double v = get_f64(x->data, x->dtype, off);
			if (v > mx)
				mx = v;
			for (int k = j->g.nr - 1; k >= 0; k--) {
				if (++idx[k] < j->g.rd[k])
					break;
				idx[k] = 0;
			}
		}
		if (!isfinite(mx))
			mx = 0;
		memset(idx, 0, sizeof idx);
	}
	bool contig = j->g.nr > 0 && j->g.rs[j->g.nr - 1] == 1;
	int64_t inner = contig ? j->g.rd[j->g.nr - 1] : 1;
	for (int64_t r = 0; r < j->g.nred; r += inner) {
		int64_t off = base;
		for (int k = 0; k < j->g.nr; k++)
			off += idx[k] * j->g.rs[k];
		if (x->dtype == DT_FLOAT && (op == R_SUM || op == R_MEAN) && contig) {
			const ufloat *p = (const ufloat *)x->data + off;
			double s = 0;
			for (int64_t i = 0; i < inner; i++)
				s += p[i];
			acc += s;
		} else {
			for (int64_t i = 0; i < inner; i++) {
				double v = get_f64(x->data, x->dtype, off + i);
				switch (op) {
				case R_SUM: case R_MEAN: acc += v; break;
				case R_MAX: acc = (v != v || v > acc) ? v : acc; break;
				case R_MIN: acc = (v != v || v < acc) ? v : acc; break;
				case R_PROD: acc *= v; break;
				case R_SUMSQ: case R_L2: acc += v * v; break;
				case R_L1: acc += fabs(v); break;
				case R_LOGSUM: acc += v; break;
				case R_LOGSUMEXP: acc += exp(v - mx); break;
				}
			}
		}
		int k = contig ? j->g.nr - 2 : j->g.nr - 1;
		for (; k >= 0; k--) {
			if (++idx[k] < j->g.rd[k])
				break;
			idx[k] = 0;
		}
	}
	switch (op) {
	case R_MEAN: return acc / (double)j->g.nred;
	case R_L2: return sqrt(acc);
	case R_LOGSUM: return log(acc);
	case R_LOGSUMEXP: return log(acc) + mx;
	default: return acc;
	}
}

static int64_t red_one_int(const RedJob *j, int64_t base)
{
	const RTensor *x = j->c->in[0];
	int op = j->op;
	bool uns = dt_is_unsigned(x->dtype);
	int64_t idx[RT_MAX_DIMS] = {0};
	int64_t acc = op == R_PROD ? 1 : 0;
	bool first = true;
	for (int64_t r = 0; r < j->g.nred; r++) {
		int64_t off = base;
		for (int k = 0; k < j->g.nr; k++)
			off += idx[k] * j->g.rs[k];
		int64_t v = get_i64(x->data, x->dtype, off);
		switch (op) {
		case R_SUM: case R_MEAN: acc = (int64_t)((uint64_t)acc + (uint64_t)v); break;
		case R_MAX: if (first || (uns ? (uint64_t)v > (uint64_t)acc : v > acc)) acc = v; break;
		case R_MIN: if (first || (uns ? (uint64_t)v < (uint64_t)acc : v < acc)) acc = v; break;
		case R_PROD: acc = (int64_t)((uint64_t)acc * (uint64_t)v); break;
		case R_SUMSQ: acc += v * v; break;
		case R_L1: acc += v < 0 ? -v : v; break;
		default: acc += v; break;
		}
		first = false;
		for (int k = j->g.nr - 1; k >= 0; k--) {
			if (++idx[k] < j->g.rd[k])
				break;
			idx[k] = 0;
		}
	}
	if (first && op == R_MAX)
		acc = uns ? 0 : INT64_MIN;
	if (first && op == R_MIN)
		acc = uns ? -1 : INT64_MAX;
	if (op == R_MEAN && j->g.nred)
		acc /= j->g.nred;
	if (op == R_L2)
		acc = (int64_t)sqrt((double)acc);
	if (op == R_LOGSUM || op == R_LOGSUMEXP)
		acc = (int64_t)log((double)acc);
	return acc;
}

static void red_par(void *ctx, int64_t o0, int64_t o1, int tid)
{
	const RedJob *j = ctx;
	RTensor *y = j->c->out[0];
	int dt = j->c->in[0]->dtype;
	(void)tid;
	for (int64_t o = o0; o < o1; o++) {
		int64_t base = 0, t = o;
		for (int k = j->g.nk - 1; k >= 0; k--) {
			base += (t % j->g.kd[k]) * j->g.ks[k];
			t /= j->g.kd[k];
		}
		if (dt_is_float(dt))
			set_f64(y->data, y->dtype, o, red_one(j, base));
		else
			set_i64(y->data, y->dtype, o, red_one_int(j, base));
	}
}

int ref_red_run(KCall *c, Diag *d)
{
	RedJob j = {.c = c, .op = *(int *)c->state};
	int64_t od[RT_MAX_DIMS];
	int ond;
	if (red_geom(c, d, &j.g, od, &ond))
		return WL_ERR;
	if (j.g.noop) {
		memcpy(c->out[0]->data, c->in[0]->data, c->out[0]->nbytes);
		return WL_OK;
	}
	int64_t grain = j.g.nred > 0 ? 65536 / j.g.nred + 1 : 65536;
	parallel_for(c->pool, j.g.nout, grain, red_par, &j);
	return WL_OK;
}

/* ---------------------------------------------------------------- ArgMax/ArgMin */

static int arg_geom(const KCall *c, Diag *d, int64_t *axis, int64_t *keep, int64_t *last)
{
	int64_t a;
	if (attr_get_int(c, d, "axis", 0, &a) || attr_get_int(c, d, "keepdims", 1, keep) ||
	    attr_get_int(c, d, "select_last_index", 0, last))
		return WL_ERR;
	return norm_axis(c, d, a, c->in[0]->ndim, axis);
}

int ref_arg_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_NUM))
		return WL_ERR;
	int64_t ax, keep, last;
	if (arg_geom(c, d, &ax, &keep, &last))
		return WL_ERR;
	RTensor *x = c->in[0];
	if (x->dims[ax] == 0)
		return kfail(c, d, "tensor '%s': ArgMax/ArgMin over an empty axis", kin_name(c, 0));
	int64_t od[RT_MAX_DIMS];
	int n = 0;
	for (int i = 0; i < x->ndim; i++) {
		if (i == ax) {
			if (keep)
				od[n++] = 1;
		} else {
			od[n++] = x->dims[i];
		}
	}
	set_out(c->out[0], DT_INT64, n, od);
	return WL_OK;
}

int ref_arg_run(KCall *c, Diag *d)
{
	int64_t ax, keep, last;
	if (arg_geom(c, d, &ax, &keep, &last))
		return WL_ERR;
	RTensor *x = c->in[0];
	bool mx = c->node->op == OP_ArgMax;
	int64_t outer = 1, inner = 1, n = x->dims[ax];
	for (int i = 0; i < ax; i++)
		outer *= x->dims[i];
	for (int i = (int)ax + 1; i < x->ndim; i++)
		inner *= x->dims[i];
	int64_t *y = c->out[0]->data;
	bool fl = dt_is_float(x->dtype);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			int64_t best = 0, base = o * n * inner + i;
			double bv = get_f64(x->data, x->dtype, base);
			int64_t bi = get_i64(x->data, x->dtype, base);
			for (int64_t k = 1; k < n; k++) {
				bool better;
				if (fl) {
					double v = get_f64(x->data, x->dtype, base + k * inner);
					better = mx ? (last ? v >= bv : v > bv) : (last ? v <= bv : v < bv);
					if (better)
						bv = v;
				} else {
					int64_t v = get_i64(x->data, x->dtype, base + k * inner);
					better = mx ? (last ? v >= bi : v > bi) : (last ? v <= bi : v < bi);
					if (better)
						bi = v;
				}
				if (better)
					best = k;
			}
			y[o * inner + i] = best;
		}
	(void)d;
	return WL_OK;
}

/* ---------------------------------------------------------------- Softmax */

KCLONES
void softmax_row_f32(float *r, int64_t n, int64_t lo, int64_t hi, float extra)
{
	float ml[16];
	for (int l = 0; l < 16; l++)
		ml[l] = -INFINITY;
	int64_t t = lo;
	for (; t + 16 <= hi; t += 16)
		for (int l = 0; l < 16; l++)
			ml[l] = r[t + l] > ml[l] ? r[t + l] : ml[l];
	float m = -INFINITY;
	for (int l = 0; l < 16; l++)
		m = ml[l] > m ? ml[l] : m;
	for (; t < hi; t++)
		m = r[t] > m ? r[t] : m;
	bool has_extra = extra == extra;
	if (has_extra && extra > m)
		m = extra;
	if (m == -INFINITY)
		m = 0;                  /* all -inf: 0/0, NaN, as the formula gives */
	double sl[16] = {0};
	t = lo;
	for (; t + 16 <= hi; t += 16)
		for (int l = 0; l < 16; l++) {
			float e = vexpf(r[t + l] - m);
			r[t + l] = e;
			sl[l] += e;
		}
	double s = has_extra ? exp((double)extra - m) : 0;
	for (int l = 0; l < 16; l++)
		s += sl[l];
	for (; t < hi; t++) {
		float e = vexpf(r[t] - m);
		r[t] = e;
		s += e;
	}
	float inv = (float)(1.0 / s);
	for (t = 0; t < lo; t++)
		r[t] = 0.0f;
	for (t = lo; t < hi; t++)
		r[t] *= inv;
	for (t = hi; t < n; t++)
		r[t] = 0.0f;
}

enum { SM_SOFT, SM_LOG, SM_HARD };

typedef struct SmJob {
	const KCall *c;
	int kind;
	int64_t n, inner;                /* softmax length, stride between its elements */
} SmJob;

static void sm_par(void *ctx, int64_t r0, int64_t r1, int tid)
{
	const SmJob *j = ctx;
	const RTensor *x = j->c->in[0];
	RTensor *y = j->c->out[0];
	(void)tid;
	for (int64_t r = r0; r < r1; r++) {
		int64_t o = r / j->inner, i = r % j->inner;
		int64_t base = o * j->n * j->inner + i, st = j->inner;
		if (x->dtype == DT_FLOAT && j->kind == SM_SOFT && st == 1) {
			float *yp = (float *)y->data + base;
			memcpy(yp, (const ufloat *)x->data + base, (size_t)j->n * sizeof(float));
			softmax_row_f32(yp, j->n, 0, j->n, NAN);
			continue;
		}
		if (x->dtype == DT_FLOAT) {
			const ufloat *xp = (const ufloat *)x->data + base;
			float *yp = (float *)y->data + base;
			float m = -INFINITY;
			for (int64_t k = 0; k < j->n; k++)
				if (xp[k * st] > m)
					m = xp[k * st];
			if (j->kind == SM_HARD) {
				int64_t at = 0;
				for (int64_t k = 0; k < j->n; k++)
					if (xp[k * st] == m) {
						at = k;
						break;
					}
				for (int64_t k = 0; k < j->n; k++)
					yp[k * st] = k == at ? 1.0f : 0.0f;
				continue;
			}
			if (m == -INFINITY)
				m = 0;
			double s = 0;
			for (int64_t k = 0; k < j->n; k++) {
				float e = vexpf(xp[k * st] - m);
				if (j->kind == SM_SOFT)
					yp[k * st] = e;
				s += e;
			}
			if (j->kind == SM_SOFT) {
				float inv = (float)(1.0 / s);
				for (int64_t k = 0; k < j->n; k++)
					yp[k * st] *= inv;
			} else {
				float ls = (float)log(s);
				for (int64_t k = 0; k < j->n; k++)
					yp[k * st] = xp[k * st] - m - ls;
			}
			continue;
		}
		double m = -INFINITY;
		for (int64_t k = 0; k < j->n; k++) {
			double v = get_f64(x->data, x->dtype, base + k * st);
			if (v > m)
				m = v;
		}
		if (j->kind == SM_HARD) {
			int64_t at = 0;
			for (int64_t k = 0; k < j->n; k++)
				if (get_f64(x->data, x->dtype, base + k * st) == m) {
					at = k;
					break;
				}
			for (int64_t k = 0; k < j->n; k++)
				set_f64(y->data, y->dtype, base + k * st, k == at);
			continue;
		}
		if (m == -INFINITY)
			m = 0;
		double s = 0;
		for (int64_t k = 0; k < j->n; k++)
			s += exp(get_f64(x->data, x->dtype, base + k * st) - m);
		for (int64_t k = 0; k < j->n; k++) {
			double v = get_f64(x->data, x->dtype, base + k * st) - m;
			set_f64(y->data, y->dtype, base + k * st, j->kind == SM_SOFT ? exp(v) / s : v - log(s));
		}
	}
}

static int sm_geom(const KCall *c, Diag *d, int64_t *outer, int64_t *n, int64_t *inner)
{
	RTensor *x = c->in[0];
	bool old = c->opset < 13;
	int64_t a;
	if (attr_get_int(c, d, "axis", old ? 1 : -1, &a))
		return WL_ERR;
	if (x->ndim == 0) {
		*outer = *n = *inner = 1;
		return WL_OK;
	}
	int64_t ax;
	if (norm_axis(c, d, a, x->ndim, &ax))
		return WL_ERR;
	*outer = 1;
	for (int i = 0; i < ax; i++)
		*outer *= x->dims[i];
	if (old) {
		*n = 1;
		for (int i = (int)ax; i < x->ndim; i++)
			*n *= x->dims[i];
		*inner = 1;
	} else {
		*n = x->dims[ax];
		*inner = 1;
		for (int i = (int)ax + 1; i < x->ndim; i++)
			*inner *= x->dims[i];
	}
	return WL_OK;
}

int ref_sm_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_FLOATS))
		return WL_ERR;
	int64_t o, n, i;
	if (sm_geom(c, d, &o, &n, &i))
		return WL_ERR;
	set_out(c->out[0], c->in[0]->dtype, c->in[0]->ndim, c->in[0]->dims);
	return WL_OK;
}

int ref_sm_run(KCall *c, Diag *d)
{
	Op op = c->node->op;
	SmJob j = {.c = c, .kind = op == OP_Softmax ? SM_SOFT : op == OP_LogSoftmax ? SM_LOG : SM_HARD};
	int64_t outer;
	if (sm_geom(c, d, &outer, &j.n, &j.inner))
		return WL_ERR;
	if (j.n == 0)
		return WL_OK;
	parallel_for(c->pool, outer * j.inner, 4096 / (j.n + 1) + 1, sm_par, &j);
	return WL_OK;
}

/* ---------------------------------------------------------------- CumSum */

int ref_cumsum_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_NUM) || need_in(c, d, 1, DTM_IDX))
		return WL_ERR;
	if (rt_numel(c->in[1]) != 1)
		return kfail(c, d, "tensor '%s': axis must be a scalar", kin_name(c, 1));
	int64_t ax;
	if (norm_axis(c, d, scalar_i64(c->in[1]), c->in[0]->ndim, &ax))
		return WL_ERR;
	set_out(c->out[0], c->in[0]->dtype, c->in[0]->ndim, c->in[0]->dims);
	return WL_OK;
}

int ref_cumsum_run(KCall *c, Diag *d)
{
	RTensor *x = c->in[0], *y = c->out[0];
	int64_t ax, excl, rev;
	if (norm_axis(c, d, scalar_i64(c->in[1]), x->ndim, &ax) || attr_get_int(c, d, "exclusive", 0, &excl) ||
	    attr_get_int(c, d, "reverse", 0, &rev))
		return WL_ERR;
	int64_t outer = 1, inner = 1, n = x->dims[ax];
	for (int i = 0; i < ax; i++)
		outer *= x->dims[i];
	for (int i = (int)ax + 1; i < x->ndim; i++)
		inner *= x->dims[i];
	bool fl = dt_is_float(x->dtype);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			float sf = 0;
			double sd = 0;
			int64_t si = 0;
			for (int64_t t = 0; t < n; t++) {
				int64_t k = rev ? n - 1 - t : t;
				int64_t at = (o * n + k) * inner + i;
				if (x->dtype == DT_FLOAT) {
					float v = ((const ufloat *)x->data)[at];
					if (excl) {
						((float *)y->data)[at] = sf;
						sf += v;
					} else {
						sf += v;
						((float *)y->data)[at] = sf;
					}
				} else if (fl) {
					double v = get_f64(x->data, x->dtype, at);
					if (excl) {
						set_f64(y->data, y->dtype, at, sd);
						sd += v;
					} else {
						sd += v;
						set_f64(y->data, y->dtype, at, sd);
					}
				} else {
					int64_t v = get_i64(x->data, x->dtype, at);
					if (excl) {
						set_i64(y->data, y->dtype, at, si);
						si += v;
					} else {
						si += v;
						set_i64(y->data, y->dtype, at, si);
					}
				}
			}
		}
	return WL_OK;
}
