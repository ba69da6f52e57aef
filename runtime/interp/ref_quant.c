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
