/* ref_quant.c — ONNX QuantizeLinear and DequantizeLinear (the QDQ form of
 * static int8 quantization), exactly as the ONNX spec and ONNX Runtime's
 * MLAS kernels compute them:
 *
 *   QuantizeLinear(x, scale [, zp])    y = saturate(rint(x / scale) + zp)
 *       x / scale in float32 (a division, not a multiply by 1/scale);
 *       rint rounds half to even; + zp in float; saturate clamps to the
 *       range of y's type (int8 [-128, 127], uint8 [0, 255]); NaN gives zp.
 *       y's type: zp's, else the output_dtype attribute, else uint8.
 *   DequantizeLinear(x, scale [, zp])  y = float(int32(x) - int32(zp)) * scale
 *       x int8, uint8 or int32 (zp of int32 must be 0); y float32.
 *
 * scale (and zp, of the same shape) is a scalar or 1-element tensor (per
 * tensor) or a 1-D tensor of dims[axis] elements (per axis; axis default 1).
 * Blocked quantization (opset 21 block_size) is not supported: an error.
 * Bad parameters are errors naming node and tensor: a scale that is zero,
 * negative or not finite, a zero point whose type differs from the
 * quantized tensor's, an int32 zero point other than 0.
 */
#include "ref.h"

typedef struct QdqPlan {
	int64_t outer, ch, inner;        /* x viewed as [outer, ch, inner] */
} QdqPlan;

static bool qtype(int dt)
{
	return dt == DT_INT8 || dt == DT_UINT8;
}

/* Checks scale/zp and the axis; fills p. qdt: the quantized type (y's for
 * Quantize, x's for Dequantize). values (run only: infer has no data):
 * also the scale and zero point values. */
static int qdq_check(KCall *c, Diag *d, int qdt, bool values, QdqPlan *p)
{
	const RTensor *x = c->in[0], *s = c->in[1];
	const RTensor *z = c->nin > 2 ? c->in[2] : NULL;
	char b1[96];
	int64_t bs;
	if (attr_get_int(c, d, "block_size", 0, &bs))
		return WL_ERR;
	if (bs != 0)
		return kfail(c, d, "blocked quantization (block_size %lld) is not supported", (long long)bs);
	int64_t ns = rt_numel(s);
	*p = (QdqPlan){.outer = 1, .ch = 1, .inner = rt_numel(x)};
	if (s->ndim > 1)
		return kfail(c, d, "scale '%s' is %s: expected a scalar or a 1-D tensor", kin_name(c, 1), kdesc(s, b1));
	if (s->ndim == 1 && ns != 1) {
		int64_t ax;
		if (attr_axis(c, d, 1, x->ndim, &ax))
			return WL_ERR;
		if (x->dims[ax] != ns)
			return kfail(c, d, "scale '%s' has %lld elements but axis %lld of '%s' has %lld", kin_name(c, 1),
			             (long long)ns, (long long)ax, kin_name(c, 0), (long long)x->dims[ax]);
		p->ch = ns;
		p->outer = 1;
		for (int k = 0; k < ax; k++)
			p->outer *= x->dims[k];
		p->inner = 1;
		for (int k = (int)ax + 1; k < x->ndim; k++)
			p->inner *= x->dims[k];
	}
	if (ns == 0)
		return kfail(c, d, "scale '%s' is empty", kin_name(c, 1));
	if (z) {
		if (z->ndim != s->ndim || rt_numel(z) != ns)
			return kfail(c, d, "zero point '%s' is %s but scale '%s' is %s", kin_name(c, 2), kdesc(z, b1),
			             kin_name(c, 1), kdesc(s, (char[96]){0}));
		if (z->dtype != qdt)
			return kfail(c, d, "zero point '%s' is %s, not %s like the quantized tensor", kin_name(c, 2),
			             dtype_name(z->dtype) ? dtype_name(z->dtype) : "?", dtype_name(qdt));
	}
	for (int64_t i = 0; values && i < ns; i++) {
		double v = get_f64(s->data, s->dtype, i);
		if (!(v > 0) || !isfinite(v))
			return kfail(c, d, "scale '%s'[%lld] is %g: a scale must be positive and finite", kin_name(c, 1),
			             (long long)i, v);
		if (z && qdt == DT_INT32 && get_i64(z->data, z->dtype, i) != 0)
			return kfail(c, d, "zero point '%s'[%lld] is %lld: an int32 zero point must be 0", kin_name(c, 2),
			             (long long)i, (long long)get_i64(z->data, z->dtype, i));
	}
	return WL_OK;
}

/* The quantized type of QuantizeLinear's output. */
static int q_out_type(KCall *c, Diag *d, int *dt)
{
	int64_t od;
	if (attr_get_int(c, d, "output_dtype", 0, &od))
		return WL_ERR;
	const RTensor *z = c->nin > 2 ? c->in[2] : NULL;
	*dt = z ? z->dtype : od ? (int)od : DT_UINT8;
	if (z && od && od != z->dtype)
		return kfail(c, d, "output_dtype %lld differs from the zero point's type", (long long)od);
	if (!qtype(*dt))
		return kfail(c, d, "quantizing to %s is not supported (int8 or uint8)",
		             dtype_name(*dt) ? dtype_name(*dt) : "?");
	return WL_OK;
}

int ref_qlin_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM(DT_FLOAT) | DTM(DT_FLOAT16)) || need_in(c, d, 1, DTM(DT_FLOAT) | DTM(DT_FLOAT16)))
		return WL_ERR;
	if (c->in[0]->dtype != c->in[1]->dtype)
		return kfail(c, d, "scale '%s' and input '%s' have different element types", kin_name(c, 1), kin_name(c, 0));
	int dt;
	QdqPlan p;
	if (q_out_type(c, d, &dt) || qdq_check(c, d, dt, false, &p))
		return WL_ERR;
	set_out(c->out[0], dt, c->in[0]->ndim, c->in[0]->dims);
	return WL_OK;
}

int ref_dqlin_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM(DT_INT8) | DTM(DT_UINT8) | DTM(DT_INT32)) ||
	    need_in(c, d, 1, DTM(DT_FLOAT) | DTM(DT_FLOAT16)))
		return WL_ERR;
	QdqPlan p;
	if (qdq_check(c, d, c->in[0]->dtype, false, &p))
		return WL_ERR;
	set_out(c->out[0], c->in[1]->dtype, c->in[0]->ndim, c->in[0]->dims);
	return WL_OK;
}

static float fget(const RTensor *t, int64_t i)
{
	if (t->dtype == DT_FLOAT16)
		return rt_half_to_float(((const uint16_t *)t->data)[i]);
	float v;
	memcpy(&v, (const char *)t->data + 4 * i, 4);
	return v;
}

__attribute__((optimize("fp-contract=off")))
int ref_qlin_run(KCall *c, Diag *d)
{
	const RTensor *x = c->in[0], *s = c->in[1];
	const RTensor *z = c->nin > 2 ? c->in[2] : NULL;
	RTensor *y = c->out[0];
	QdqPlan p;
	if (qdq_check(c, d, y->dtype, true, &p))
		return WL_ERR;
	float lo = y->dtype == DT_INT8 ? -128.0f : 0.0f, hi = y->dtype == DT_INT8 ? 127.0f : 255.0f;
	int64_t i = 0;
	for (int64_t o = 0; o < p.outer; o++)
		for (int64_t ch = 0; ch < p.ch; ch++) {
			float sc = fget(s, ch);
			float zp = z ? (float)get_i64(z->data, z->dtype, ch) : 0.0f;
			for (int64_t k = 0; k < p.inner; k++, i++) {
				float v = fget(x, i);
				float q = v != v ? zp : rintf(v / sc) + zp;
				q = q < lo ? lo : q > hi ? hi : q;
				if (y->dtype == DT_INT8)
					((int8_t *)y->data)[i] = (int8_t)q;
				else
					((uint8_t *)y->data)[i] = (uint8_t)q;
			}
		}
	return WL_OK;
}

__attribute__((optimize("fp-contract=off")))
int ref_dqlin_run(KCall *c, Diag *d)
{
	const RTensor *x = c->in[0], *s = c->in[1];
	const RTensor *z = c->nin > 2 ? c->in[2] : NULL;
	RTensor *y = c->out[0];
	QdqPlan p;
	if (qdq_check(c, d, x->dtype, true, &p))
		return WL_ERR;
	int64_t i = 0;
	for (int64_t o = 0; o < p.outer; o++)
		for (int64_t ch = 0; ch < p.ch; ch++) {
			float sc = fget(s, ch);
			int32_t zp = z ? (int32_t)get_i64(z->data, z->dtype, ch) : 0;
			for (int64_t k = 0; k < p.inner; k++, i++) {
				int32_t q = x->dtype == DT_INT8 ? ((const int8_t *)x->data)[i]
				          : x->dtype == DT_UINT8 ? ((const uint8_t *)x->data)[i]
				          : (int32_t)get_i64(x->data, x->dtype, i);
				float v = (float)(q - zp) * sc;
				if (y->dtype == DT_FLOAT16)
					((uint16_t *)y->data)[i] = rt_float_to_half(v);
				else
					memcpy((char *)y->data + 4 * i, &v, 4);
			}
		}
	return WL_OK;
}

/* ---------------------------------------------------------------- ai.wlower QMatMul
 * y = QMatMul(xq, x_scale, x_zero_point, wq, w_scale [, y_scale, y_zero_point]):
 * the int8 GEMM a QDQ-wrapped MatMul becomes (passes/fuse_qdq_matmul.c;
 * docs/OPS.md):
 *   acc[m, n] = sum_k (int32(xq[m, k]) - zx) * int32(wq[k, n])     int32, exact
 *   v[m, n]   = float(acc) * (x_scale * w_scale[n])               float32, one rounding each
 *   y[m, n]   = v                                                  (float out)
 *             = saturate(rintf(v / y_scale) + zy) to int8           (with y_scale:
 *                                                                  QuantizeLinear's rule)
 * xq [..., K] int8, x_scale/x_zero_point scalars (float, int8), wq [K, N]
 * int8 (symmetric: zero point 0), w_scale [] or [N]; y_scale float and
 * y_zero_point int8 scalars. K <= 65793 keeps |acc| <= K * 255 * 128 below
 * 2^31. The host kernel (targets/host/kgen_qmatmul.c) computes exactly this. */
enum { QMM_MAX_K = 65793 };

int ref_qmm_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM(DT_INT8)) || need_in(c, d, 1, DTM(DT_FLOAT)) || need_in(c, d, 2, DTM(DT_INT8)) ||
	    need_in(c, d, 3, DTM(DT_INT8)) || need_in(c, d, 4, DTM(DT_FLOAT)))
		return WL_ERR;
	bool qout = c->nin > 5 && c->in[5];
	if (qout && (need_in(c, d, 5, DTM(DT_FLOAT)) || c->nin < 7 || !c->in[6] || need_in(c, d, 6, DTM(DT_INT8))))
		return kfail(c, d, "y_scale needs an int8 y_zero_point");
	const RTensor *x = c->in[0], *w = c->in[3];
	char b1[96], b2[96];
	if (x->ndim < 1 || w->ndim != 2 || x->dims[x->ndim - 1] != w->dims[0])
		return kfail(c, d, "'%s' is %s and '%s' is %s: expected [..., K] and [K, N]", kin_name(c, 0), kdesc(x, b1),
		             kin_name(c, 3), kdesc(w, b2));
	if (w->dims[0] > QMM_MAX_K)
		return kfail(c, d, "K = %lld exceeds %d (int32 accumulation)", (long long)w->dims[0], QMM_MAX_K);
	if (rt_numel(c->in[1]) != 1 || rt_numel(c->in[2]) != 1)
		return kfail(c, d, "x scale '%s' and zero point '%s' must be scalars", kin_name(c, 1), kin_name(c, 2));
	if (qout && (rt_numel(c->in[5]) != 1 || rt_numel(c->in[6]) != 1))
		return kfail(c, d, "y scale '%s' and zero point '%s' must be scalars", kin_name(c, 5), kin_name(c, 6));
	int64_t ns = rt_numel(c->in[4]);
	if (ns != 1 && ns != w->dims[1])
		return kfail(c, d, "weight scale '%s' has %lld elements: expected 1 or N = %lld", kin_name(c, 4),
		             (long long)ns, (long long)w->dims[1]);
	int64_t dims[RT_MAX_DIMS];
	memcpy(dims, x->dims, sizeof dims);
	dims[x->ndim - 1] = w->dims[1];
	set_out(c->out[0], qout ? DT_INT8 : DT_FLOAT, x->ndim, dims);
	return WL_OK;
}

typedef struct QmmJob {
	const int8_t *x, *w;
	void *y;
	const RTensor *ws;
	float sx, sy;
	int32_t zx, zy;
	bool qout;
	int64_t K, N;
} QmmJob;

__attribute__((optimize("fp-contract=off")))
static void qmm_rows(void *ctx, int64_t m0, int64_t m1, int tid)
{
	const QmmJob *j = ctx;
	(void)tid;
	bool per_n = rt_numel(j->ws) != 1;
	for (int64_t m = m0; m < m1; m++) {
		const int8_t *xr = j->x + m * j->K;
		for (int64_t n = 0; n < j->N; n++) {
			int32_t acc = 0;
			for (int64_t k = 0; k < j->K; k++)
				acc += ((int32_t)xr[k] - j->zx) * (int32_t)j->w[k * j->N + n];
			float s = j->sx * fget(j->ws, per_n ? n : 0);
			float v = (float)acc * s;
			if (j->qout) {
				float q = rintf(v / j->sy) + (float)j->zy;
				q = q < -128.0f ? -128.0f : q > 127.0f ? 127.0f : q;
				((int8_t *)j->y)[m * j->N + n] = (int8_t)q;
			} else {
				((float *)j->y)[m * j->N + n] = v;
			}
		}
	}
}

static int qmm_scale_ok(KCall *c, Diag *d, int i)
{
	for (int64_t n = 0; n < rt_numel(c->in[i]); n++) {
		float s = fget(c->in[i], n);
		if (!(s > 0) || !isfinite(s))
			return kfail(c, d, "scale '%s'[%lld] is %g: a scale must be positive and finite", kin_name(c, i),
			             (long long)n, s);
	}
	return WL_OK;
}

int ref_qmm_run(KCall *c, Diag *d)
{
	const RTensor *x = c->in[0], *w = c->in[3];
	bool qout = c->nin > 5 && c->in[5];
	if (qmm_scale_ok(c, d, 1) || qmm_scale_ok(c, d, 4) || (qout && qmm_scale_ok(c, d, 5)))
		return WL_ERR;
	QmmJob j = {.x = x->data, .w = w->data, .y = c->out[0]->data, .ws = c->in[4], .sx = fget(c->in[1], 0),
	            .zx = ((const int8_t *)c->in[2]->data)[0], .qout = qout, .K = w->dims[0], .N = w->dims[1]};
	if (qout) {
		j.sy = fget(c->in[5], 0);
		j.zy = ((const int8_t *)c->in[6]->data)[0];
	}
	int64_t M = j.K ? rt_numel(x) / j.K : 0;
	parallel_for(c->pool, M, 1, qmm_rows, &j);
	return WL_OK;
}

/* ai.wlower.QGather (table, scale, ids): an int8 row-wise table (int8 rows +
 * one float scale per row, the fp32dec-lmq8 embedding of the Whisper
 * pipeline), y[i, :] = (float)table[ids[i], :] · scale[ids[i]] (one float
 * product: exactly the unfused Gather → Cast → Mul by Gather(scale)).
 * table [V, D] int8, scale [V] float, ids int64/int32 of any shape →
 * y float [ids..., D]; ids in [-V, V) (negative from the end). */
int ref_qgather_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM(DT_INT8)) || need_in(c, d, 1, DTM(DT_FLOAT)) || need_in(c, d, 2, DTM_IDX))
		return WL_ERR;
	const RTensor *t = c->in[0], *s = c->in[1], *ix = c->in[2];
	char b1[96], b2[96];
	if (t->ndim != 2 || rt_numel(s) != t->dims[0])
		return kfail(c, d, "table '%s' is %s and scale '%s' is %s: expected [V, D] and [V]", kin_name(c, 0),
		             kdesc(t, b1), kin_name(c, 1), kdesc(s, b2));
	if (ix->ndim + 1 > RT_MAX_DIMS)
		return kfail(c, d, "result would have %d dimensions", ix->ndim + 1);
	int64_t od[RT_MAX_DIMS];
	memcpy(od, ix->dims, (size_t)ix->ndim * sizeof *od);
	od[ix->ndim] = t->dims[1];
	set_out(c->out[0], DT_FLOAT, ix->ndim + 1, od);
	return WL_OK;
}

__attribute__((optimize("fp-contract=off")))
int ref_qgather_run(KCall *c, Diag *d)
{
	const RTensor *t = c->in[0], *s = c->in[1], *ix = c->in[2];
	int64_t V = t->dims[0], D = t->dims[1], ni = rt_numel(ix);
	const int8_t *tab = t->data;
	float *y = c->out[0]->data;
	for (int64_t k = 0; k < ni; k++) {
		int64_t v = get_i64(ix->data, ix->dtype, k);
		if (v < -V || v >= V) {
			const Value *iv = c->node->inputs[2];
			return diag_index_range(d, iv->name, iv->is_input ? INDEX_GRAPH_INPUT : 0, c->node->name,
			                        c->node->op_type, ix->ndim, ix->dims, k, v, V);
		}
		if (v < 0)
			v += V;
		float sc = fget(s, v);
		for (int64_t j = 0; j < D; j++)
			y[k * D + j] = (float)tab[v * D + j] * sc;
	}
	return WL_OK;
}
