/* ref_norm.c — normalization and activation ops with parameters:
 * LayerNormalization, SimplifiedLayerNormalization (ai.onnx as ONNX Runtime
 * registers it, and com.microsoft), com.microsoft SkipLayerNormalization and
 * SkipSimplifiedLayerNormalization, BatchNormalization (inference), the Gelu
 * family (ai.onnx Gelu-20, com.microsoft Gelu, FastGelu, BiasGelu,
 * QuickGelu) and ai.wlower Gelu / RMSNorm.
 *
 * Statistics (mean, variance, mean square) are accumulated in double over
 * float inputs and rounded once; the normalized value is rounded to float
 * before the float32 scale and bias are applied, as the ONNX function body
 * does (Normalized * Scale + B). Rows are split over the thread pool.
 *
 * ai.wlower semantics (docs/OPS.md):
 *   Gelu(X; approximate="none") = X * 0.5 * (1 + erf(X / sqrt 2)), "tanh":
 *     0.5 * X * (1 + tanh(sqrt(2/pi) * (X + 0.044715 X^3))), as ONNX Gelu-20
 *   RMSNorm(X, scale; epsilon=1e-6, axis=-1) = X / sqrt(mean(X^2) + epsilon) * scale
 *   (SiLU is elementwise: ref_elementwise.c)
 */
#include "ref.h"

/* ---------------------------------------------------------------- rows */

enum { LN_LAYER, LN_RMS };

typedef struct LnJob {
	const KCall *c;
	int kind;
	int64_t rows, n;                /* normalized rows and their length */
	const RTensor *x, *skip, *scale, *bias, *beta;
	int64_t skip_rows;              /* skip broadcast: rows of skip (1 or rows) */
	int64_t scale_n, bias_n, beta_n;
	RTensor *y, *mean, *inv, *sum;
	float eps;
} LnJob;

static inline double ld(const RTensor *t, int64_t i)
{
	return t->dtype == DT_FLOAT ? ((const ufloat *)t->data)[i] : get_f64(t->data, t->dtype, i);
}

static inline void st(RTensor *t, int64_t i, double v)
{
	if (t->dtype == DT_FLOAT)
		((float *)t->data)[i] = (float)v;
	else
		set_f64(t->data, t->dtype, i, v);
}

/* Element i of row `base`: x, or x + skip + bias in the tensor's precision. */
static inline double ln_val(const LnJob *j, int64_t base, int64_t sb, int64_t i)
{
	if (!j->skip)
		return ld(j->x, base + i);
	if (j->x->dtype == DT_FLOAT) {
		float v = ((const ufloat *)j->x->data)[base + i] + (float)ld(j->skip, sb + i);
		if (j->bias)
			v = v + (float)ld(j->bias, i);
		return v;
	}
	double v = ld(j->x, base + i) + ld(j->skip, sb + i) + (j->bias ? ld(j->bias, i) : 0);
	RTensor tmp = {.dtype = j->x->dtype};
	uint64_t cell = 0;
	tmp.data = &cell;
	set_f64(tmp.data, tmp.dtype, 0, v);        /* round to the tensor type */
	return get_f64(tmp.data, tmp.dtype, 0);
}

static void ln_par(void *ctx, int64_t r0, int64_t r1, int tid)
{
	const LnJob *j = ctx;
	(void)tid;
	int64_t n = j->n;
	for (int64_t r = r0; r < r1; r++) {
		int64_t base = r * n;
		bool f32 = j->x->dtype == DT_FLOAT && !j->skip && !j->bias && j->y->dtype == DT_FLOAT &&
		           j->scale->dtype == DT_FLOAT && (!j->beta || j->beta->dtype == DT_FLOAT) &&
		           j->scale_n == n && (!j->beta || j->beta_n == n);
		if (f32) {
			const ufloat *x = (const ufloat *)j->x->data + base, *g = j->scale->data;
			const ufloat *b = j->beta ? j->beta->data : NULL;
			float *y = (float *)j->y->data + base;
			double s = 0, mean = 0, var;
			if (j->kind == LN_LAYER) {
				for (int64_t i = 0; i < n; i++)
					s += x[i];
				mean = s / (double)n;
				double q = 0;
				for (int64_t i = 0; i < n; i++) {
					double dv = x[i] - mean;
					q += dv * dv;
				}
				var = q / (double)n;
			} else {
				double q = 0;
				for (int64_t i = 0; i < n; i++)
					q += (double)x[i] * x[i];
				var = q / (double)n;
			}
			double inv = 1.0 / sqrt(var + (double)j->eps);
			for (int64_t i = 0; i < n; i++) {
				float nv = (float)((x[i] - mean) * inv);
				y[i] = b ? nv * g[i] + b[i] : nv * g[i];
			}
			if (j->mean)
				st(j->mean, r, mean);
			if (j->inv)
				st(j->inv, r, inv);
			continue;
		}
		/* general: skip/bias sums, other dtypes, broadcast scale */
		int64_t sb = j->skip ? (r % j->skip_rows) * n : 0;
		double sum = 0, sq = 0;
		for (int64_t i = 0; i < n; i++) {
			double v = ln_val(j, base, sb, i);
			if (j->sum)
				st(j->sum, base + i, v);
			sum += v;
			sq += v * v;
		}
		double mean = j->kind == LN_LAYER ? sum / (double)n : 0, var;
		if (j->kind == LN_LAYER) {
			double q = 0;
			for (int64_t i = 0; i < n; i++) {
				double dv = ln_val(j, base, sb, i) - mean;
				q += dv * dv;
			}
			var = q / (double)n;
		} else {
			var = sq / (double)n;
		}
		double inv = 1.0 / sqrt(var + (double)j->eps);
		for (int64_t i = 0; i < n; i++) {
			float nv = (float)((ln_val(j, base, sb, i) - mean) * inv);
			double g = ld(j->scale, i % j->scale_n);
			double out = j->beta ? (double)(float)(nv * g) + ld(j->beta, i % j->beta_n) : nv * g;
			st(j->y, base + i, out);
		}
		if (j->mean)
			st(j->mean, r, mean);
		if (j->inv)
			st(j->inv, r, inv);
	}
}

static int check_param(const KCall *c, Diag *d, int slot, int64_t n, int64_t *pn)
{
	RTensor *t = c->in[slot];
	int64_t k = rt_numel(t);
	if (k != n && k != 1 && !(n % (k ? k : 1) == 0 && t->ndim >= 1 && k == t->dims[t->ndim - 1]))
		return kfail(c, d, "tensor '%s' (%lld values) does not broadcast over the normalized %lld", kin_name(c, slot),
		             (long long)k, (long long)n);
	*pn = k;
	return WL_OK;
}

/* ---------------------------------------------------------------- LayerNormalization, SimplifiedLayerNormalization */

static int ln_geom(const KCall *c, Diag *d, int64_t *rows, int64_t *n, int64_t *ax)
{
	RTensor *x = c->in[0];
	int64_t a;
	if (attr_get_int(c, d, "axis", -1, &a))
		return WL_ERR;
	if (x->ndim == 0)
		return kfail(c, d, "tensor '%s' is a scalar", kin_name(c, 0));
	if (norm_axis(c, d, a, x->ndim, ax))
		return WL_ERR;
	*rows = 1;
	*n = 1;
	for (int i = 0; i < x->ndim; i++)
		*(i < *ax ? rows : n) *= x->dims[i];
	return WL_OK;
}

int ref_ln_infer(KCall *c, Diag *d)
{
	bool rms = c->node->op != OP_LayerNormalization;   /* SimplifiedLayerNormalization, RMSNorm */
	if (need_in(c, d, 0, DTM_FLOATS) || need_in(c, d, 1, DTM_FLOATS))
		return WL_ERR;
	if (!rms && c->nin > 2 && c->in[2] && need_in(c, d, 2, DTM_FLOATS))
		return WL_ERR;
	int64_t rows, n, ax, k;
	if (ln_geom(c, d, &rows, &n, &ax) || check_param(c, d, 1, n, &k))
		return WL_ERR;
	if (!rms && c->nin > 2 && c->in[2] && check_param(c, d, 2, n, &k))
		return WL_ERR;
	RTensor *x = c->in[0];
	set_out(c->out[0], x->dtype, x->ndim, x->dims);
	int64_t sd[RT_MAX_DIMS];
	for (int i = 0; i < x->ndim; i++)
		sd[i] = i < ax ? x->dims[i] : 1;
	int64_t stash;
	if (attr_get_int(c, d, "stash_type", 1, &stash))
		return WL_ERR;
	int sdt = stash == 1 ? DT_FLOAT : x->dtype;
	for (int o = 1; o < c->nout; o++)
		set_out(c->out[o], sdt, x->ndim, sd);
	return WL_OK;
}

int ref_ln_run(KCall *c, Diag *d)
{
	bool rms = c->node->op != OP_LayerNormalization;   /* SimplifiedLayerNormalization, RMSNorm */
	LnJob j = {.c = c, .kind = rms ? LN_RMS : LN_LAYER, .x = c->in[0], .scale = c->in[1], .y = c->out[0]};
	int64_t ax;
	float eps;
	if (ln_geom(c, d, &j.rows, &j.n, &ax) ||
	    attr_get_float(c, d, "epsilon", c->node->op == OP_WlRMSNorm ? 1e-6f : 1e-5f, &eps))
		return WL_ERR;
	j.eps = eps;
	j.scale_n = rt_numel(j.scale);
	if (!rms && c->nin > 2 && c->in[2]) {
		j.beta = c->in[2];
		j.beta_n = rt_numel(j.beta);
	}
	if (rms) {
		if (c->nout > 1)
			j.inv = c->out[1];
	} else {
		if (c->nout > 1)
			j.mean = c->out[1];
		if (c->nout > 2)
			j.inv = c->out[2];
	}
	if (j.n == 0)
		return WL_OK;
	parallel_for(c->pool, j.rows, 16384 / (j.n + 1) + 1, ln_par, &j);
	return WL_OK;
}

/* ---------------------------------------------------------------- Skip(Simplified)LayerNormalization */

int ref_skip_infer(KCall *c, Diag *d)
{
	bool rms = c->node->op == OP_MsSkipSimplifiedLayerNormalization;
	for (int i = 0; i < 3; i++)
		if (need_in(c, d, i, DTM_FLOATS))
			return WL_ERR;
	RTensor *x = c->in[0], *s = c->in[1];
	char b1[96], b2[96];
	if (x->ndim < 2)
		return kfail(c, d, "tensor '%s' %s must have rank >= 2", kin_name(c, 0), kdesc(x, b1));
	int64_t n = x->dims[x->ndim - 1], rows = rt_numel(x) / (n ? n : 1), k;
	int64_t sn = rt_numel(s);
	if (s->dims[s->ndim > 0 ? s->ndim - 1 : 0] != n || sn == 0 || rows % (sn / n ? sn / n : 1) || sn % n)
		return kfail(c, d, "tensors '%s' %s and '%s' %s: skip does not broadcast", kin_name(c, 0), kdesc(x, b1),
		             kin_name(c, 1), kdesc(s, b2));
	if (check_param(c, d, 2, n, &k))
		return WL_ERR;
	int bslot = rms ? 3 : 4;
	if (!rms && c->nin > 3 && c->in[3] && (need_in(c, d, 3, DTM_FLOATS) || rt_numel(c->in[3]) != n))
		return kfail(c, d, "tensor '%s': beta must have %lld values", kin_name(c, 3), (long long)n);
	if (c->nin > bslot && c->in[bslot] && (need_in(c, d, bslot, DTM_FLOATS) || rt_numel(c->in[bslot]) != n))
		return kfail(c, d, "tensor '%s': bias must have %lld values", kin_name(c, bslot), (long long)n);
	set_out(c->out[0], x->dtype, x->ndim, x->dims);
	int64_t sd[RT_MAX_DIMS];
	for (int i = 0; i < x->ndim; i++)
		sd[i] = i < x->ndim - 1 ? x->dims[i] : 1;
	if (c->nout > 1)
		set_out(c->out[1], DT_FLOAT, x->ndim, sd);
	if (c->nout > 2)
		set_out(c->out[2], DT_FLOAT, x->ndim, sd);
	if (c->nout > 3)
		set_out(c->out[3], x->dtype, x->ndim, x->dims);
	return WL_OK;
}

int ref_skip_run(KCall *c, Diag *d)
{
	bool rms = c->node->op == OP_MsSkipSimplifiedLayerNormalization;
	RTensor *x = c->in[0];
	LnJob j = {.c = c, .kind = rms ? LN_RMS : LN_LAYER, .x = x, .skip = c->in[1], .scale = c->in[2],
	           .y = c->out[0]};
	float eps;
	if (attr_get_float(c, d, "epsilon", 1e-12f, &eps))
		return WL_ERR;
	j.eps = eps;
	j.n = x->dims[x->ndim - 1];
	j.rows = rt_numel(x) / (j.n ? j.n : 1);
	j.skip_rows = rt_numel(j.skip) / (j.n ? j.n : 1);
	j.scale_n = rt_numel(j.scale);
	int bslot = rms ? 3 : 4;
	if (!rms && c->nin > 3 && c->in[3]) {
		j.beta = c->in[3];
		j.beta_n = rt_numel(j.beta);
	}
	if (c->nin > bslot && c->in[bslot])
		j.bias = c->in[bslot];
	if (c->nout > 1 && !rms)
		j.mean = c->out[1];
	if (c->nout > 2)
		j.inv = c->out[2];
	if (c->nout > 3)
		j.sum = c->out[3];
	if (c->nout > 1 && rms && c->out[1])
		memset(c->out[1]->data, 0, c->out[1]->nbytes);
	if (j.n == 0)
		return WL_OK;
	parallel_for(c->pool, j.rows, 16384 / (j.n + 1) + 1, ln_par, &j);
	return WL_OK;
}

/* ---------------------------------------------------------------- BatchNormalization (inference) */

int ref_bn_infer(KCall *c, Diag *d)
{
	for (int i = 0; i < 5; i++)
		if (need_in(c, d, i, DTM_FLOATS))
			return WL_ERR;
	RTensor *x = c->in[0];
	int64_t tm;
	if (attr_get_int(c, d, "training_mode", 0, &tm))
		return WL_ERR;
	if (tm)
		return kfail(c, d, "training_mode=1 is not supported (the reference runs inference)");
	if (x->ndim < 2)
		return kfail(c, d, "tensor '%s' must have rank >= 2", kin_name(c, 0));
	for (int i = 1; i < 5; i++)
		if (rt_numel(c->in[i]) != x->dims[1])
			return kfail(c, d, "tensor '%s' must have %lld values", kin_name(c, i), (long long)x->dims[1]);
	set_out(c->out[0], x->dtype, x->ndim, x->dims);
	return WL_OK;
}

int ref_bn_run(KCall *c, Diag *d)
{
	RTensor *x = c->in[0], *y = c->out[0];
	float eps;
	if (attr_get_float(c, d, "epsilon", 1e-5f, &eps))
		return WL_ERR;
	int64_t C = x->dims[1], inner = 1, outer = x->dims[0];
	for (int i = 2; i < x->ndim; i++)
		inner *= x->dims[i];
	for (int64_t o = 0; o < outer; o++)
		for (int64_t ch = 0; ch < C; ch++) {
			double sc = ld(c->in[1], ch), b = ld(c->in[2], ch), m = ld(c->in[3], ch), v = ld(c->in[4], ch);
			float inv = (float)(1.0 / sqrt(v + (double)eps));
			for (int64_t i = 0; i < inner; i++) {
				int64_t at = (o * C + ch) * inner + i;
				float nv = (float)((ld(x, at) - m) * inv);
				st(y, at, (double)(float)(nv * sc) + b);
			}
		}
	return WL_OK;
}

/* ---------------------------------------------------------------- Gelu family */

enum { G_ERF, G_TANH, G_QUICK };

typedef struct GeluJob {
	const RTensor *x, *b;
	RTensor *y;
	int kind;
	float alpha;
	int64_t bn;
} GeluJob;

static inline __attribute__((always_inline)) float gelu1(int kind, float v, float alpha)
{
	switch (kind) {
	case G_ERF: return v * 0.5f * (1.0f + verff(v * (float)M_SQRT1_2));
	case G_TANH: return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
	default: return v / (1.0f + vexpf(-alpha * v));
	}
}

KCLONES
static void gelu_f32(int kind, float alpha, float *y, const ufloat *x, const ufloat *b, int64_t bn, int64_t i0, int64_t i1)
{
	if (!b) {
		for (int64_t i = i0; i < i1; i++)
			y[i] = gelu1(kind, x[i], alpha);
		return;
	}
	for (int64_t i = i0; i < i1; i++)
		y[i] = gelu1(kind, x[i] + b[i % bn], alpha);
}

static void gelu_par(void *ctx, int64_t i0, int64_t i1, int tid)
{
	const GeluJob *j = ctx;
	(void)tid;
	if (j->x->dtype == DT_FLOAT && (!j->b || j->b->dtype == DT_FLOAT)) {
		gelu_f32(j->kind, j->alpha, j->y->data, j->x->data, j->b ? j->b->data : NULL, j->bn, i0, i1);
		return;
	}
	for (int64_t i = i0; i < i1; i++) {
		double v = get_f64(j->x->data, j->x->dtype, i);
		if (j->b)
			v += get_f64(j->b->data, j->b->dtype, i % j->bn);
		double r;
		switch (j->kind) {
		case G_ERF: r = v * 0.5 * (1.0 + erf(v * M_SQRT1_2)); break;
		case G_TANH: r = 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); break;
		default: r = v / (1.0 + exp(-j->alpha * v)); break;
		}
		set_f64(j->y->data, j->y->dtype, i, r);
	}
}

int ref_gelu_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_FLOATS))
		return WL_ERR;
	if (c->nin > 1 && c->in[1]) {
		RTensor *b = c->in[1];
		int64_t last = c->in[0]->ndim ? c->in[0]->dims[c->in[0]->ndim - 1] : 1;
		if (need_in(c, d, 1, DTM_FLOATS))
			return WL_ERR;
		if (rt_numel(b) != last && !same_shape(b, c->in[0]))
			return kfail(c, d, "tensor '%s': bias must have %lld values", kin_name(c, 1), (long long)last);
	}
	set_out(c->out[0], c->in[0]->dtype, c->in[0]->ndim, c->in[0]->dims);
	return WL_OK;
}

int ref_gelu_run(KCall *c, Diag *d)
{
	Op op = c->node->op;
	GeluJob j = {.x = c->in[0], .b = c->nin > 1 ? c->in[1] : NULL, .y = c->out[0], .kind = G_ERF};
	if (op == OP_MsFastGelu)
		j.kind = G_TANH;
	else if (op == OP_MsQuickGelu) {
		j.kind = G_QUICK;
		if (attr_get_float(c, d, "alpha", 1.702f, &j.alpha))
			return WL_ERR;
	} else if (op == OP_Gelu || op == OP_WlGelu) {
		const char *ap = attr_string(c->node, "approximate", "none");
		if (!strcmp(ap, "tanh"))
			j.kind = G_TANH;
		else if (strcmp(ap, "none"))
			return kfail(c, d, "approximate='%s' (none or tanh)", ap);
	}
	if (j.b)
		j.bn = rt_numel(j.b);
	parallel_for(c->pool, rt_numel(j.y), 16384, gelu_par, &j);
	return WL_OK;
}
