/* util.c — what the CCL kernels of ops/ share (declared in ops.h): error
 * messages, operand checks, activation formats and their template text, and
 * the packers of constant operands (fixed point, binary16, per-row scaled
 * weights; docs/numerics.md "Constants").
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "ops.h"

int ck_fail(const Node *n, Diag *d, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return diag_fail(d, "%s: node '%s': op %s: %s", n->graph && n->graph->mod && n->graph->mod->path ?
	                 n->graph->mod->path : "module", n->name && n->name[0] ? n->name : "?", n->op_type, msg);
}

int ck_need_const(const Node *n, int i, Diag *d)
{
	Value *v = nin(n, i);
	if (!v || !v->init)
		return KFAIL(n, "input %d ('%s') must be a constant", i, v ? v->name : "");
	if (v->init->dtype == DT_STRING)
		return KFAIL(n, "tensor '%s': string constant", v->name);
	return WL_OK;
}

int ck_need_shape(const Node *n, const Value *v, Diag *d)
{
	if (!v || !type_shape_known(&v->type))
		return KFAIL(n, "tensor '%s': static shape required", v ? v->name : "");
	return WL_OK;
}

/* ---------------------------------------------------------------- formats */

int ck_fmt(const Node *n, const Value *v, Diag *d, int *out)
{
	if (v->type.elem == DT_INT64) {
		*out = -4;
		return WL_OK;
	}
	if (v->type.elem == DT_INT32) {
		*out = -3;
		return WL_OK;
	}
	if (v->type.elem == DT_INT8) {
		*out = -5;
		return WL_OK;
	}
	if (v->type.elem != DT_FLOAT && v->type.elem != DT_FLOAT16)
		return KFAIL(n, "tensor '%s': unsupported element type", v->name);
	if (v->frac_bits >= 0 && v->frac_bits <= 31)
		*out = v->frac_bits;
	else if (v->frac_bits == FRAC_FP16)
		*out = -2;
	else if (v->frac_bits == FRAC_F32)
		*out = -1;
	else
		return KFAIL(n, "tensor '%s': no fixed-point format (numerics did not assign one)", v->name);
	return WL_OK;
}

static int int_bits(double x)
{
	if (x < 1)
		return 0;
	return (int)floor(log2(floor(x))) + 1;
}

int ck_const_fbits(double maxabs)
{
	int F = 31 - int_bits(maxabs);
	while (F > 0 && llround(maxabs * ldexp(1.0, F)) > 2147483647LL)
		F--;
	return F < 0 ? 0 : F;
}

int ck_work_q(const Value *v)
{
	if (v->frac_bits >= 0 && v->frac_bits <= 31)
		return v->frac_bits;
	if (v->has_range) {
		double m = fmax(fabs(v->rmin), fabs(v->rmax));
		return ck_const_fbits(m);
	}
	return v->frac_bits == FRAC_FP16 ? 15 : 16;
}

static const char *fmt_name(int f, char *buf)
{
	if (f == -1)
		return "ccl::F32";
	if (f == -2)
		return "ccl::FP16";
	if (f == -5)
		return "ccl::I8";
	snprintf(buf, 16, "%d", f);
	return buf;
}

/* "FX, QX" (q) or "FX" of v; an absent v (optional operand) is "0, 0" / "0" */
static int fmt_text(const Node *n, const Value *v, bool q, Diag *d, char *buf)
{
	int f;
	char b[16];
	if (!v)
		strcpy(buf, q ? "0, 0" : "0");
	else if (ck_fmt(n, v, d, &f))
		return WL_ERR;
	else if (q)
		snprintf(buf, 48, "%s, %d", fmt_name(f, b), ck_work_q(v));
	else
		snprintf(buf, 24, "%s", fmt_name(f, b));
	return WL_OK;
}

int ck_fq(const Node *n, const Value *v, Diag *d, char *buf) { WL_ASSERT(v); return fmt_text(n, v, true, d, buf); }
int ck_fo(const Node *n, const Value *v, Diag *d, char *buf) { WL_ASSERT(v); return fmt_text(n, v, false, d, buf); }
int ck_opt_fq(const Node *n, const Value *v, Diag *d, char *buf) { return fmt_text(n, v, true, d, buf); }
int ck_opt_fo(const Node *n, const Value *v, Diag *d, char *buf) { return fmt_text(n, v, false, d, buf); }

const char *ck_arg(const char *s)
{
	return s && strcmp(s, "NULL") ? s : "nullptr";
}

/* a C++ string literal of s; newlines become spaces, as in a Diag message */
static void cpp_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p == '\n' || *p == '\r')
			fputc(' ', f);
		else if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(f, "\\%03o", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

void ck_index_site(FILE *f, const Node *n, const Value *ind, int64_t size, int flags)
{
	int rank = ind->type.has_shape && ind->type.rank <= 8 ? ind->type.rank : 0;
	fputs("ccl::IndexSite{", f);
	cpp_str(f, ind->name);
	fputs(", ", f);
	cpp_str(f, n->name);
	fputs(", ", f);
	cpp_str(f, n->op_type);
	fprintf(f, ", %d, %lldLL, %d, {", flags | (ind->is_input ? INDEX_GRAPH_INPUT : 0), (long long)size, rank);
	for (int i = 0; i < rank; i++)
		fprintf(f, "%s%lldLL", i ? ", " : "", (long long)ind->type.dims[i].value);
	fputs("}}", f);
}

/* ---------------------------------------------------------------- constants */

void *ck_calloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz);
	if (!p)
		wl_die(__FILE__, __LINE__, "out of memory");
	return p;
}

CclBlob *ck_add_blob(CclKernelInfo *ki, const char *role, size_t len)
{
	WL_ASSERT(ki->nblobs < 8);
	CclBlob *b = &ki->blobs[ki->nblobs++];
	b->role = role;
	b->len = len;
	b->data = ck_calloc(len, 1);
	return b;
}

int32_t ck_q32(double v, int F)
{
	double x = floor(v * ldexp(1.0, F) + 0.5);
	if (x > 2147483647.0)
		x = 2147483647.0;
	if (x < -2147483648.0)
		x = -2147483648.0;
	return (int32_t)x;
}

double ck_maxabs(const Tensor *t)
{
	double m = 0;
	int64_t ne = tnumel(t);
	for (int64_t i = 0; i < ne; i++) {
		double a = fabs(tensor_get_f64(t, i));
		if (a > m)
			m = a;
	}
	return m;
}

/* binary16 bits of a double (RNE), as the runtime does. */
static uint16_t f2h(double x)
{
	uint32_t u = f32_to_bits((float)x);
	uint32_t s = (u >> 16) & 0x8000, e = (u >> 23) & 0xff, m = u & 0x7fffff;
	if (e == 0xff)
		return (uint16_t)(s | 0x7c00 | (m ? 0x200 : 0));
	int ee = (int)e - 127 + 15;
	if (ee >= 31)
		return (uint16_t)(s | 0x7c00);
	if (ee <= 0) {
		if (ee < -10)
			return (uint16_t)s;
		m |= 0x800000;
		int sh = 14 - ee;
		uint32_t r = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
		if (rem > half || (rem == half && (r & 1)))
			r++;
		return (uint16_t)(s | r);
	}
	uint32_t r = ((uint32_t)ee << 10) | (m >> 13), rem = m & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
		r++;
	return (uint16_t)(s | r);
}

void ck_pack_plain(CclKernelInfo *ki, const char *role, const Tensor *t, int fmt)
{
	int64_t ne = tnumel(t);
	size_t es = fmt == -2 ? 2 : 4;
	CclBlob *b = ck_add_blob(ki, role, (size_t)ne * es);
	for (int64_t i = 0; i < ne; i++) {
		double v = tensor_get_f64(t, i);
		if (fmt >= 0) {
			int32_t q = ck_q32(v, fmt);
			memcpy(b->data + i * 4, &q, 4);
		} else if (fmt == -2) {
			uint16_t h = f2h(v);
			memcpy(b->data + i * 2, &h, 2);
		} else {
			float fv = (float)v;
			memcpy(b->data + i * 4, &fv, 4);
		}
	}
}

/* ---------------------------------------------------------------- per-row scaled weights */

int ck_weight_bits(int64_t K)
{
	int b = 0;
	while (b < 40 && ((int64_t)1 << b) <= K)
		b++;
	int w = 62 - 31 - b;
	return w > 24 ? 24 : w;
}

static int row_exponent(double maxabs, int lim_bits)
{
	if (maxabs == 0)
		return 0;
	int e;
	frexp(maxabs, &e);          /* maxabs in [2^(e-1), 2^e) */
	int E = lim_bits - e;       /* maxabs·2^E < 2^lim_bits */
	while (llround(maxabs * ldexp(1.0, E)) >= (1LL << lim_bits))
		E--;
	return E;
}

int ck_row_scale(double maxabs, int64_t K, int qa, const double *bias, int64_t col[2])
{
	int e = row_exponent(maxabs, ck_weight_bits(K));
	double bm = bias ? fabs(*bias) : 0;
	if (e > 60 - qa)
		e = 60 - qa;
	while (bm > 0 && e > -30 && bm * ldexp(1.0, qa + e) >= ldexp(1.0, 61))
		e--;
	col[0] = bias ? (int64_t)llround(*bias * ldexp(1.0, qa + e)) : 0;
	col[1] = qa + e;
	return e;
}

void ck_pack_rows(int32_t *dst, int64_t N, int64_t K, CkWeightGet get, const void *ctx, int qa,
                  const double *bias, int64_t *cols)
{
	for (int64_t n = 0; n < N; n++) {
		double m = 0;
		for (int64_t k = 0; k < K; k++)
			m = fmax(m, fabs(get(ctx, n, k)));
		int e = ck_row_scale(m, K, qa, bias ? &bias[n] : NULL, &cols[2 * n]);
		for (int64_t k = 0; k < K; k++)
			dst[n * K + k] = (int32_t)llround(get(ctx, n, k) * ldexp(1.0, e));
	}
}
