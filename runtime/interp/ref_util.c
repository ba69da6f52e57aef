/* ref_util.c — what every kernel family shares: one-line messages, element
 * access for any numeric dtype, broadcasting, attributes. */
#include <stdarg.h>
#include "ref.h"

/* ---------------------------------------------------------------- messages */

int kfail(const KCall *c, Diag *d, const char *fmt, ...)
{
	char msg[800];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return diag_fail(d, "%s: node '%s' (%s): %s", c->path ? c->path : "model",
	                 c->node->name ? c->node->name : "", c->node->op_type, msg);
}

const char *kin_name(const KCall *c, int i)
{
	if (i < 0 || i >= c->node->ninputs || !c->node->inputs[i])
		return "";
	return c->node->inputs[i]->name;
}

const char *kout_name(const KCall *c, int i)
{
	if (i < 0 || i >= c->node->noutputs || !c->node->outputs[i])
		return "";
	return c->node->outputs[i]->name;
}

const char *kdesc(const RTensor *t, char buf[96])
{
	return rt_describe(t, buf, 96);
}

/* ---------------------------------------------------------------- dtypes */

int elem_size(int dt)
{
	switch (dt) {
	case DT_FLOAT: case DT_INT32: case DT_UINT32: return 4;
	case DT_DOUBLE: case DT_INT64: case DT_UINT64: return 8;
	case DT_FLOAT16: case DT_BFLOAT16: case DT_INT16: case DT_UINT16: return 2;
	case DT_INT8: case DT_UINT8: case DT_BOOL: return 1;
	default: return 0;
	}
}

bool dt_is_float(int dt)
{
	return dt == DT_FLOAT || dt == DT_DOUBLE || dt == DT_FLOAT16 || dt == DT_BFLOAT16;
}

bool dt_is_unsigned(int dt)
{
	return dt == DT_UINT8 || dt == DT_UINT16 || dt == DT_UINT32 || dt == DT_UINT64;
}

bool dt_is_int(int dt)
{
	return dt == DT_INT8 || dt == DT_INT16 || dt == DT_INT32 || dt == DT_INT64 || dt_is_unsigned(dt);
}

bool dt_numeric(int dt)
{
	return elem_size(dt) > 0;
}

float bf16_to_float(uint16_t h)
{
	return bits_to_f32((uint32_t)h << 16);
}

uint16_t float_to_bf16(float f)
{
	uint32_t u = f32_to_bits(f);
	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((u >> 16) | 0x40);     /* quiet NaN */
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

#define LD(T) ({ T v_; memcpy(&v_, (const char *)p + (size_t)i * sizeof(T), sizeof(T)); v_; })

double get_f64(const void *p, int dt, int64_t i)
{
	switch (dt) {
	case DT_FLOAT: return LD(float);
	case DT_DOUBLE: return LD(double);
	case DT_FLOAT16: return rt_half_to_float(LD(uint16_t));
	case DT_BFLOAT16: return bf16_to_float(LD(uint16_t));
	case DT_INT8: return LD(int8_t);
	case DT_UINT8: case DT_BOOL: return LD(uint8_t);
	case DT_INT16: return LD(int16_t);
	case DT_UINT16: return LD(uint16_t);
	case DT_INT32: return LD(int32_t);
	case DT_UINT32: return LD(uint32_t);
	case DT_INT64: return (double)LD(int64_t);
	case DT_UINT64: return (double)LD(uint64_t);
	default: return 0;
	}
}

int64_t get_i64(const void *p, int dt, int64_t i)
{
	switch (dt) {
	case DT_INT8: return LD(int8_t);
	case DT_UINT8: case DT_BOOL: return LD(uint8_t);
	case DT_INT16: return LD(int16_t);
	case DT_UINT16: return LD(uint16_t);
	case DT_INT32: return LD(int32_t);
	case DT_UINT32: return LD(uint32_t);
	case DT_INT64: return LD(int64_t);
	case DT_UINT64: return (int64_t)LD(uint64_t);
	default: {
		double v = get_f64(p, dt, i);
		if (v != v)
			return INT64_MIN;
		if (v >= 9.2233720368547758e18)
			return INT64_MAX;
		if (v <= -9.2233720368547758e18)
			return INT64_MIN;
		return (int64_t)v;
	}
	}
}

uint64_t get_u64(const void *p, int dt, int64_t i)
{
	if (dt == DT_UINT64)
		return LD(uint64_t);
	return (uint64_t)get_i64(p, dt, i);
}

/* double -> binary16 with a single rounding (nearest even). Going through
 * float can double-round when the float lands exactly on a tie between two
 * halves; then the side of v decides. */
static uint16_t half_from_double(double v)
{
	float f = (float)v;
	if ((double)f == v || v != v)
		return rt_float_to_half(f);
	uint16_t sign = signbit(v) ? 0x8000 : 0;
	double a = fabs(v);
	float fa = fabsf(f);
	uint16_t h = rt_float_to_half(fa);
	double hv = rt_half_to_float(h);
	if (hv == (double)fa)
		return sign | h;
	uint16_t hn = (double)fa > hv ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
	double nv = hn >= 0x7c00 ? 65536.0 : rt_half_to_float(hn);
	if ((double)fa - hv != nv - (double)fa && hv - (double)fa != (double)fa - nv)
		return sign | h;                         /* not a tie: float rounding was right */
	uint16_t lo = hv < nv ? h : hn, hi = hv < nv ? hn : h;
	return sign | (a > (double)fa ? hi : lo);
}

#define ST(T, x) do { T v_ = (T)(x); memcpy((char *)p + (size_t)i * sizeof(T), &v_, sizeof(T)); } while (0)

void set_f64(void *p, int dt, int64_t i, double v)
{
	switch (dt) {
	case DT_FLOAT: ST(float, v); break;
	case DT_DOUBLE: ST(double, v); break;
	case DT_FLOAT16: ST(uint16_t, half_from_double(v)); break;
	case DT_BFLOAT16: ST(uint16_t, float_to_bf16((float)v)); break;
	case DT_BOOL: ST(uint8_t, v != 0); break;
	default:
		if (dt_is_int(dt)) {
			int64_t x;
			if (v != v)
				x = 0;
			else if (dt == DT_UINT64 && v >= 9.2233720368547758e18)
				x = v >= 1.8446744073709552e19 ? -1 : (int64_t)(uint64_t)v;
			else if (v >= 9.2233720368547758e18)
				x = INT64_MAX;
			else if (v <= -9.2233720368547758e18)
				x = INT64_MIN;
			else
				x = (int64_t)v;
			set_i64(p, dt, i, x);
		}
		break;
	}
}

void set_i64(void *p, int dt, int64_t i, int64_t v)
{
	switch (dt) {
	case DT_INT8: ST(int8_t, v); break;
	case DT_UINT8: ST(uint8_t, v); break;
	case DT_BOOL: ST(uint8_t, v != 0); break;
	case DT_INT16: ST(int16_t, v); break;
	case DT_UINT16: ST(uint16_t, v); break;
	case DT_INT32: ST(int32_t, v); break;
	case DT_UINT32: ST(uint32_t, v); break;
	case DT_INT64: ST(int64_t, v); break;
	case DT_UINT64: ST(uint64_t, v); break;
	default: set_f64(p, dt, i, (double)v); break;
	}
}

double scalar_f64(const RTensor *t)
{
	return (rt_numel(t) > 0 && t->data) ? get_f64(t->data, t->dtype, 0) : 0;
}

int64_t scalar_i64(const RTensor *t)
{
	return (rt_numel(t) > 0 && t->data) ? get_i64(t->data, t->dtype, 0) : 0;
}

int read_ints(const KCall *c, int slot, int64_t *out, int max, int *count, Diag *d)
{
	const RTensor *t = c->in[slot];
	if (t->dtype != DT_INT64 && t->dtype != DT_INT32)
		return kfail(c, d, "tensor '%s': expected int64, got %s", kin_name(c, slot),
		             dtype_name(t->dtype) ? dtype_name(t->dtype) : "?");
	if (t->ndim > 1)
		return kfail(c, d, "tensor '%s': expected a 1-D tensor", kin_name(c, slot));
	int64_t n = rt_numel(t);
	if (n > max)
		return kfail(c, d, "tensor '%s': %lld values (at most %d)", kin_name(c, slot), (long long)n, max);
	if (n > 0 && !t->data)
		return kfail(c, d, "tensor '%s': value not available (internal: undeclared data input)", kin_name(c, slot));
	for (int64_t i = 0; i < n; i++)
		out[i] = get_i64(t->data, t->dtype, i);
	*count = (int)n;
	return WL_OK;
}

int norm_axis(const KCall *c, Diag *d, int64_t axis, int rank, int64_t *out)
{
	if (axis < -rank || axis >= rank)
		return kfail(c, d, "axis %lld out of range for rank %d", (long long)axis, rank);
	*out = axis < 0 ? axis + rank : axis;
	return WL_OK;
}

int attr_axis(const KCall *c, Diag *d, int64_t dflt, int rank, int64_t *out)
{
	int64_t a;
	if (attr_get_int(c, d, "axis", dflt, &a))
		return WL_ERR;
	return norm_axis(c, d, a, rank, out);
}

/* ---------------------------------------------------------------- shapes */

int broadcast_shapes(const KCall *c, Diag *d, int n, RTensor *const *ts, int *ndim, int64_t *dims)
{
	int r = 0;
	for (int i = 0; i < n; i++)
		if (ts[i] && ts[i]->ndim > r)
			r = ts[i]->ndim;
	for (int k = 0; k < r; k++)
		dims[k] = 1;
	for (int i = 0; i < n; i++) {
		if (!ts[i])
			continue;
		int off = r - ts[i]->ndim;
		for (int k = 0; k < ts[i]->ndim; k++) {
			int64_t a = dims[off + k], b = ts[i]->dims[k];
			if (a == b || b == 1)
				continue;
			if (a == 1) {
				dims[off + k] = b;
				continue;
			}
			char b2[96];
			return kfail(c, d, "tensor '%s' %s does not broadcast with the other inputs (dim %d: %lld vs %lld)",
			             kin_name(c, i), kdesc(ts[i], b2), k, (long long)b, (long long)a);
		}
	}
	*ndim = r;
	return WL_OK;
}

void contiguous_strides(int ndim, const int64_t *dims, int64_t *strides)
{
	int64_t s = 1;
	for (int k = ndim - 1; k >= 0; k--) {
		strides[k] = s;
		s *= dims[k];
	}
}

void broadcast_strides(const RTensor *t, int ndim, const int64_t *dims, int64_t *strides)
{
	int off = ndim - t->ndim;
	int64_t s = 1;
	for (int k = ndim - 1; k >= 0; k--) {
		if (k < off) {
			strides[k] = 0;
			continue;
		}
		int64_t dk = t->dims[k - off];
		strides[k] = (dk == 1 && dims[k] != 1) ? 0 : s;
		s *= dk;
	}
}

void set_out(RTensor *o, int dtype, int ndim, const int64_t *dims)
{
	if (!o)
		return;
	o->dtype = dtype;
	o->ndim = ndim;
	for (int i = 0; i < ndim; i++)
		o->dims[i] = dims[i];
}

bool same_shape(const RTensor *a, const RTensor *b)
{
	if (a->ndim != b->ndim)
		return false;
	for (int i = 0; i < a->ndim; i++)
		if (a->dims[i] != b->dims[i])
			return false;
	return true;
}

int need_in(const KCall *c, Diag *d, int i, uint32_t mask)
{
	if (i >= c->nin || !c->in[i])
		return kfail(c, d, "input %d is required", i);
	int dt = c->in[i]->dtype;
	if (dt <= 0 || dt >= 32 || !(mask & DTM(dt)))
		return kfail(c, d, "tensor '%s': element type %s is not supported here", kin_name(c, i),
		             dtype_name(dt) ? dtype_name(dt) : "?");
	return WL_OK;
}

/* ---------------------------------------------------------------- attributes */

int attr_get_int(const KCall *c, Diag *d, const char *name, int64_t dflt, int64_t *out)
{
	const Attr *a = node_attr(c->node, name);
	if (!a) {
		*out = dflt;
		return WL_OK;
	}
	if (a->type != AT_INT)
		return kfail(c, d, "attribute '%s' must be an int", name);
	*out = a->i;
	return WL_OK;
}

int attr_get_float(const KCall *c, Diag *d, const char *name, float dflt, float *out)
{
	const Attr *a = node_attr(c->node, name);
	if (!a) {
		*out = dflt;
		return WL_OK;
	}
	if (a->type == AT_INT) {
		*out = (float)a->i;
		return WL_OK;
	}
	if (a->type != AT_FLOAT)
		return kfail(c, d, "attribute '%s' must be a float", name);
	*out = a->f;
	return WL_OK;
}
