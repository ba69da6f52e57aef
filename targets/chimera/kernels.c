/* kernels.c — per-op knowledge of the CCL kernels (chimera.h): which
 * constant inputs are packed into blobs and how, the MAC/ALU counts, and the
 * C++ call text. The C++ side is targets/chimera/ccl/ (API.md there is the
 * contract for every signature and blob layout used below); the formulas
 * for macs/alu_ops here must equal what the kernels count at run time.
 *
 * One table of ops (kops[]): for each op an `info` function (checks the
 * node, packs blobs, counts) and an `emit` function (writes the call).
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "chimera.h"

/* ---------------------------------------------------------------- helpers */

typedef struct KOp KOp;
struct KOp {
	const char *domain, *op_type, *cpp;
	int (*info)(const Node *n, CclKernelInfo *ki, Diag *d);
	int (*emit)(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
	            const char *scratch, FILE *f, Diag *d);
};

static const char *nname(const Node *n)
{
	return n->name && n->name[0] ? n->name : "?";
}

#define KFAIL(n, ...) kfail_(n, d, __VA_ARGS__)
static int kfail_(const Node *n, Diag *d, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int kfail_(const Node *n, Diag *d, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return diag_fail(d, "%s: node '%s': op %s: %s", n->graph && n->graph->mod && n->graph->mod->path ?
	                 n->graph->mod->path : "module", nname(n), n->op_type, msg);
}

static Value *nin(const Node *n, int i)
{
	return i < n->ninputs ? n->inputs[i] : NULL;
}

static Value *nout(const Node *n, int i)
{
	return i < n->noutputs ? n->outputs[i] : NULL;
}

static int rank_of(const Value *v)
{
	return v && v->type.has_shape ? v->type.rank : -1;
}

static int64_t dim_of(const Value *v, int i)
{
	if (!v || !v->type.has_shape || i < 0 || i >= v->type.rank || v->type.dims[i].kind != DIM_VALUE)
		return -1;
	return v->type.dims[i].value;
}

static int64_t numel_of(const Value *v)
{
	return v ? type_numel(&v->type) : -1;
}

static int64_t tnumel(const Tensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= t->dims[i];
	return n;
}

/* Storage format of an activation (API.md "Formats"). */
static int fmt_of(const Node *n, const Value *v, Diag *d, int *out)
{
	if (v->type.elem == DT_INT64) {
		*out = -4;
		return WL_OK;
	}
	if (v->type.elem == DT_INT32) {
		*out = -3;
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

/* Fractional bits of a constant with max |v| = maxabs (0..31). */
static int const_fbits(double maxabs)
{
	int F = 31 - int_bits(maxabs);
	while (F > 0 && llround(maxabs * ldexp(1.0, F)) > 2147483647LL)
		F--;
	return F < 0 ? 0 : F;
}

/* Work format (API.md): fixed → F; else from range; else 15 (FP16) / 16 (F32). */
static int work_q(const Value *v)
{
	if (v->frac_bits >= 0 && v->frac_bits <= 31)
		return v->frac_bits;
	if (v->has_range) {
		double m = fmax(fabs(v->rmin), fabs(v->rmax));
		return const_fbits(m);
	}
	return v->frac_bits == FRAC_FP16 ? 15 : 16;
}

static const char *fmt_name(int f, char *buf)
{
	if (f == -1)
		return "ccl::F32";
	if (f == -2)
		return "ccl::FP16";
	snprintf(buf, 16, "%d", f);
	return buf;
}

/* "FX, QX" text of an activation input. */
static int fq(const Node *n, const Value *v, Diag *d, char *buf)
{
	int f;
	if (fmt_of(n, v, d, &f))
		return WL_ERR;
	char b[16];
	snprintf(buf, 48, "%s, %d", fmt_name(f, b), work_q(v));
	return WL_OK;
}

static int fo(const Node *n, const Value *v, Diag *d, char *buf)
{
	int f;
	if (fmt_of(n, v, d, &f))
		return WL_ERR;
	char b[16];
	snprintf(buf, 24, "%s", fmt_name(f, b));
	return WL_OK;
}

static void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz);
	if (!p)
		wl_die(__FILE__, __LINE__, "out of memory");
	return p;
}

static CclBlob *add_blob(CclKernelInfo *ki, const char *role, size_t len)
{
	WL_ASSERT(ki->nblobs < 8);
	CclBlob *b = &ki->blobs[ki->nblobs++];
	b->role = role;
	b->len = len;
	b->data = xcalloc(len, 1);
	return b;
}

static int need_const(const Node *n, int i, Diag *d)
{
	Value *v = nin(n, i);
	if (!v || !v->init)
		return KFAIL(n, "input %d ('%s') must be a constant", i, v ? v->name : "");
	if (v->init->dtype == DT_STRING)
		return KFAIL(n, "tensor '%s': string constant", v->name);
	return WL_OK;
}

static int need_shape(const Node *n, const Value *v, Diag *d)
{
	if (!v || !type_shape_known(&v->type))
		return KFAIL(n, "tensor '%s': static shape required", v ? v->name : "");
	return WL_OK;
}

static int32_t q32(double v, int F)
{
	double x = floor(v * ldexp(1.0, F) + 0.5);
	if (x > 2147483647.0)
		x = 2147483647.0;
	if (x < -2147483648.0)
		x = -2147483648.0;
	return (int32_t)x;
}

static double tmaxabs(const Tensor *t)
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
	float fv = (float)x;
	uint32_t u;
	memcpy(&u, &fv, 4);
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

/* Packs a constant float tensor into `role` in storage format fmt
 * (0..31 int32, -2 binary16, -1 float). */
static void pack_plain(CclKernelInfo *ki, const char *role, const Tensor *t, int fmt)
{
	int64_t ne = tnumel(t);
	size_t es = fmt == -2 ? 2 : 4;
	CclBlob *b = add_blob(ki, role, (size_t)ne * es);
	for (int64_t i = 0; i < ne; i++) {
		double v = tensor_get_f64(t, i);
		if (fmt >= 0) {
			int32_t q = q32(v, fmt);
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

/* Significant bits of packed weights (|w| < 2^wbits) so that K products of
 * an int32 activation and a weight sum below 2^62 in int64. */
static int weight_bits(int64_t K)
{
	int b = 0;
	while (b < 40 && ((int64_t)1 << b) <= K)
		b++;
	int w = 62 - 31 - b;
	return w > 24 ? 24 : w;
}

/* Per-row float weights: rows [N][K] of mantissas |w| < 2^19 with the row's
 * exponent E (w ≈ m · 2^-E); get(ctx, n, k) reads the float weight. Returns
 * E per row in `E`. */
typedef double (*WGet)(const void *ctx, int64_t n, int64_t k);

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

static void pack_rows(int32_t *dst, int64_t N, int64_t K, WGet get, const void *ctx, int *E, int qa, const double *bias,
                      int64_t *cols)
{
	int wb = weight_bits(K);
	for (int64_t n = 0; n < N; n++) {
		double m = 0;
		for (int64_t k = 0; k < K; k++)
			m = fmax(m, fabs(get(ctx, n, k)));
		int e = row_exponent(m, wb);
		double bm = bias ? fabs(bias[n]) : 0;
		if (e > 60 - qa)
			e = 60 - qa;
		while (bm > 0 && e > -30 && bm * ldexp(1.0, qa + e) >= ldexp(1.0, 61))
			e--;
		E[n] = e;
		for (int64_t k = 0; k < K; k++)
			dst[n * K + k] = (int32_t)llround(get(ctx, n, k) * ldexp(1.0, e));
		cols[2 * n] = bias ? (int64_t)llround(bias[n] * ldexp(1.0, qa + e)) : 0;
		cols[2 * n + 1] = qa + e;
	}
}

/* ---------------------------------------------------------------- MatMulNBits */

typedef struct WCtx { const Tensor *t; int64_t K, N; int trans; } WCtx;

static double w32_get(const void *p, int64_t n, int64_t k)
{
	const WCtx *w = p;
	return tensor_get_f64(w->t, w->trans ? n * w->K + k : k * w->N + n);
}

static int mm_dims(const Node *n, int64_t *M, int64_t *K, int64_t *N, Diag *d)
{
	Value *a = nin(n, 0);
	if (need_shape(n, a, d))
		return WL_ERR;
	*K = attr_int(n, "K", -1);
	*N = attr_int(n, "N", -1);
	int64_t ne = numel_of(a);
	if (*K <= 0 || *N <= 0 || rank_of(a) < 1 || dim_of(a, rank_of(a) - 1) != *K)
		return KFAIL(n, "tensor '%s': last dim must equal K = %lld", a->name, (long long)*K);
	*M = ne / *K;
	return WL_OK;
}

static int mm_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	int64_t M, K, N;
	if (mm_dims(n, &M, &K, &N, d))
		return WL_ERR;
	int bits = (int)attr_int(n, "bits", 4);
	Value *a = nin(n, 0);
	int fa;
	if (fmt_of(n, a, d, &fa))
		return WL_ERR;
	int qa = work_q(a);
	const int64_t *sp;
	int ns = attr_ints(n, "splits", &sp);
	int nouts = ns > 0 ? ns : 1;
	if (n->noutputs != nouts)
		return KFAIL(n, "%d outputs for %d splits", n->noutputs, nouts);
	if (nouts > 64)
		return KFAIL(n, "more than 64 splits");
	for (int j = 0; j < nouts; j++) {
		int f;
		if (!nout(n, j))
			return KFAIL(n, "output %d is absent", j);
		if (fmt_of(n, nout(n, j), d, &f))
			return WL_ERR;
	}
	Value *bv = nin(n, 4);
	double *bias = NULL;
	if (bv) {
		if (need_const(n, 4, d))
			return WL_ERR;
		if (tnumel(bv->init) != N)
			return KFAIL(n, "tensor '%s': bias must have N = %lld elements", bv->name, (long long)N);
		bias = xcalloc((size_t)N, sizeof *bias);
		for (int64_t i = 0; i < N; i++)
			bias[i] = tensor_get_f64(bv->init, i);
	}
	if (need_const(n, 1, d))
		goto fail;
	ki->cpp_name = "linalg::matMulNBits";
	ki->macs = (uint64_t)M * K * N;
	ki->alu_ops = (uint64_t)M * N;
	int *E = xcalloc((size_t)N, sizeof *E);
	if (bits == 32) {
		int trans = (int)attr_int(n, "trans_b", 0);
		const Tensor *t = nin(n, 1)->init;
		if (tnumel(t) != K * N) {
			free(E);
			KFAIL(n, "tensor '%s': expected %lld weights", nin(n, 1)->name, (long long)(K * N));
			goto fail;
		}
		if (weight_bits(K) < 16) {
			free(E);
			KFAIL(n, "K = %lld too large for the int64 accumulator", (long long)K);
			goto fail;
		}
		CclBlob *w = add_blob(ki, "weight", (size_t)(N * K) * 4);
		CclBlob *c = add_blob(ki, "bias", (size_t)N * 16);
		WCtx wc = {t, K, N, trans};
		pack_rows((int32_t *)w->data, N, K, w32_get, &wc, E, qa, bias, (int64_t *)c->data);
	} else if (bits == 2 || bits == 4 || bits == 8) {
		int64_t bs = attr_int(n, "block_size", 32);
		if (bs < 16 || (bs & (bs - 1)))
			{ free(E); KFAIL(n, "block_size %lld must be a power of 2 >= 16", (long long)bs); goto fail; }
		int64_t kb = (K + bs - 1) / bs, rowb = kb * bs * bits / 8;
		const Tensor *wt = nin(n, 1)->init;
		if (wt->nbytes != (size_t)(N * rowb) || wt->dtype != DT_UINT8)
			{ free(E); KFAIL(n, "tensor '%s': expected uint8 [%lld, %lld, %lld]", nin(n, 1)->name,
			  (long long)N, (long long)kb, (long long)(bs * bits / 8)); goto fail; }
		if (need_const(n, 2, d)) { free(E); goto fail; }
		const Tensor *st = nin(n, 2)->init;
		if (tnumel(st) != N * kb)
			{ free(E); KFAIL(n, "tensor '%s': expected %lld scales", nin(n, 2)->name, (long long)(N * kb)); goto fail; }
		const Tensor *zt = NULL;
		if (nin(n, 3)) {
			if (need_const(n, 3, d)) { free(E); goto fail; }
			zt = nin(n, 3)->init;
			if (zt->dtype != DT_UINT8 || tnumel(zt) != N * ((kb * bits + 7) / 8))
				{ free(E); KFAIL(n, "tensor '%s': zero points must be packed uint8 [N, %lld]", nin(n, 3)->name,
				  (long long)((kb * bits + 7) / 8)); goto fail; }
		}
		if (weight_bits(K) < 16)
			{ free(E); KFAIL(n, "K = %lld too large for the int64 accumulator", (long long)K); goto fail; }
		CclBlob *w = add_blob(ki, "weight", (size_t)(N * rowb));
		memcpy(w->data, wt->data, (size_t)(N * rowb));
		CclBlob *sc = add_blob(ki, "scales", (size_t)(N * kb) * 4);
		CclBlob *zp = add_blob(ki, "zero_points", (size_t)(N * kb));
		CclBlob *c = add_blob(ki, "bias", (size_t)N * 16);
		int32_t *scd = (int32_t *)sc->data;
		int64_t *cd = (int64_t *)c->data;
		int64_t zb = (kb * bits + 7) / 8, bpb = bs * bits / 8;
		for (int64_t r = 0; r < N; r++) {
			/* exponent: max over blocks of max|q − zp| · |scale| · 2^E < 2^19 */
			double m = 0;
			for (int64_t b = 0; b < kb; b++) {
				int z = 1 << (bits - 1);
				if (zt) {
					int64_t bit = b * bits;
					z = (((const uint8_t *)zt->data)[r * zb + bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
				}
				int mq = 0;
				const uint8_t *blk = (const uint8_t *)wt->data + r * rowb + b * bpb;
				for (int64_t k = 0; k < bs && b * bs + k < K; k++) {
					int q = (blk[(k * bits) / 8] >> ((k * bits) % 8)) & ((1 << bits) - 1);
					mq = abs(q - z) > mq ? abs(q - z) : mq;
				}
				m = fmax(m, mq * fabs(tensor_get_f64(st, r * kb + b)));
			}
			int e = row_exponent(m, weight_bits(K));
			double bm = bias ? fabs(bias[r]) : 0;
			if (e > 60 - qa)
				e = 60 - qa;
			while (bm > 0 && e > -30 && bm * ldexp(1.0, qa + e) >= ldexp(1.0, 61))
				e--;
			for (int64_t b = 0; b < kb; b++) {
				scd[r * kb + b] = (int32_t)llround(tensor_get_f64(st, r * kb + b) * ldexp(1.0, e));
				int z = 1 << (bits - 1);
				if (zt) {
					int64_t zb = (kb * bits + 7) / 8;
					const uint8_t *zr = (const uint8_t *)zt->data + r * zb;
					int64_t bit = b * bits;
					z = (zr[bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
				}
				zp->data[r * kb + b] = (uint8_t)z;
			}
			cd[2 * r] = bias ? (int64_t)llround(bias[r] * ldexp(1.0, qa + e)) : 0;
			cd[2 * r + 1] = qa + e;
		}
	} else {
		free(E);
		KFAIL(n, "bits %d not supported (2, 4, 8, 32)", bits);
		goto fail;
	}
	free(E);
	free(bias);
	return WL_OK;
fail:
	free(bias);
	ccl_kernel_info_free(ki);
	return WL_ERR;
}

static int mm_emit(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                   const char *scratch, FILE *f, Diag *d)
{
	int64_t M, K, N;
	if (mm_dims(n, &M, &K, &N, d))
		return WL_ERR;
	int bits = (int)attr_int(n, "bits", 4);
	char a[48];
	if (fq(n, nin(n, 0), d, a))
		return WL_ERR;
	fprintf(f, "linalg::matMulNBits<%lld, %lld, %lld, %d, %lld, %s", (long long)M, (long long)K, (long long)N, bits,
	        (long long)(bits == 32 ? 0 : attr_int(n, "block_size", 32)), a);
	const int64_t *sp;
	int ns = attr_ints(n, "splits", &sp);
	for (int j = 0; j < n->noutputs; j++) {
		char o[24];
		if (fo(n, nout(n, j), d, o))
			return WL_ERR;
		fprintf(f, ", %lld, %s", (long long)(ns > 0 ? sp[j] : N), o);
	}
	if (bits == 32)
		fprintf(f, ">(c, %s, %s, nullptr, nullptr, %s", in[0], blob[0], blob[1]);
	else
		fprintf(f, ">(c, %s, %s, %s, %s, %s", in[0], blob[0], blob[1], blob[2], blob[3]);
	for (int j = 0; j < n->noutputs; j++)
		fprintf(f, ", %s", out[j]);
	fprintf(f, ");\n");
	return WL_OK;
}

/* ---------------------------------------------------------------- norms */

static int rows_d(const Node *n, int64_t *rows, int64_t *D, Diag *d)
{
	Value *x = nin(n, 0);
	if (need_shape(n, x, d))
		return WL_ERR;
	int r = rank_of(x);
	int64_t ax = attr_int(n, "axis", -1);
	if (r < 1 || (ax != -1 && ax != r - 1))
		return KFAIL(n, "tensor '%s': only the last axis is supported", x->name);
	*D = dim_of(x, r - 1);
	*rows = *D > 0 ? numel_of(x) / *D : 0;
	return WL_OK;
}

static int norm_info(const Node *n, CclKernelInfo *ki, Diag *d, bool ln)
{
	int64_t R, D;
	if (rows_d(n, &R, &D, d) || need_const(n, 1, d))
		return WL_ERR;
	const Tensor *g = nin(n, 1)->init, *b = NULL;
	if (ln && nin(n, 2)) {
		if (need_const(n, 2, d))
			return WL_ERR;
		b = nin(n, 2)->init;
	}
	if (tnumel(g) != D || (b && tnumel(b) != D))
		return KFAIL(n, "tensor '%s': scale must have %lld elements", nin(n, 1)->name, (long long)D);
	int fg = const_fbits(tmaxabs(g)), fb = b ? const_fbits(tmaxabs(b)) : 31;
	CclBlob *bl = add_blob(ki, "gamma", (size_t)(ln ? 2 : 1) * D * 4);
	int32_t *p = (int32_t *)bl->data;
	for (int64_t i = 0; i < D; i++) {
		p[i] = q32(tensor_get_f64(g, i), fg);
		if (ln)
			p[D + i] = b ? q32(tensor_get_f64(b, i), fb) : 0;
	}
	ki->cpp_name = ln ? "nn::layerNorm" : "nn::rmsNorm";
	ki->alu_ops = (uint64_t)R * D * (ln ? 4 : 3);
	return WL_OK;
}

static int ln_info(const Node *n, CclKernelInfo *ki, Diag *d) { return norm_info(n, ki, d, true); }
static int rms_info(const Node *n, CclKernelInfo *ki, Diag *d) { return norm_info(n, ki, d, false); }

static int norm_emit(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                     const char *scratch, FILE *f, Diag *d, bool ln)
{
	int64_t R, D;
	if (rows_d(n, &R, &D, d))
		return WL_ERR;
	char x[48], y[24];
	if (fq(n, nin(n, 0), d, x) || fo(n, nout(n, 0), d, y))
		return WL_ERR;
	const Tensor *g = nin(n, 1)->init, *b = ln && nin(n, 2) ? nin(n, 2)->init : NULL;
	int fg = const_fbits(tmaxabs(g)), fb = b ? const_fbits(tmaxabs(b)) : 31;
	double eps = attr_float(n, "epsilon", ln ? 1e-5f : 1e-6f);
	long long e40 = llround(eps * ldexp(1.0, 40));
	if (ln)
		fprintf(f, "nn::layerNorm<%lld, %lld, %s, %s, %d, %d, %lldLL>(c, %s, %s, %s);\n", (long long)R, (long long)D,
		        x, y, fg, fb, e40, in[0], blob[0], out[0]);
	else
		fprintf(f, "nn::rmsNorm<%lld, %lld, %s, %s, %d, %lldLL>(c, %s, %s, %s);\n", (long long)R, (long long)D, x, y,
		        fg, e40, in[0], blob[0], out[0]);
	return WL_OK;
}

static int ln_emit(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                   const char *scratch, FILE *f, Diag *d) { return norm_emit(n, in, out, blob, scratch, f, d, true); }
static int rms_emit(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                    const char *scratch, FILE *f, Diag *d) { return norm_emit(n, in, out, blob, scratch, f, d, false); }

/* ---------------------------------------------------------------- unary */

static int unary_check(const Node *n, Diag *d, int64_t *ne)
{
	if (need_shape(n, nin(n, 0), d))
		return WL_ERR;
	if (nin(n, 0)->init)
		return KFAIL(n, "constant input (should have been folded)");
	*ne = numel_of(nin(n, 0));
	return WL_OK;
}

static int gelu_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	int64_t ne;
	if (unary_check(n, d, &ne))
		return WL_ERR;
	const char *ap = attr_string(n, "approximate", "none");
	if (strcmp(ap, "none") && strcmp(ap, "tanh"))
		return KFAIL(n, "approximate '%s' not supported", ap);
	ki->cpp_name = "nn::gelu";
	ki->alu_ops = (uint64_t)ne * 4;
	return WL_OK;
}

static int gelu_emit(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                     const char *scratch, FILE *f, Diag *d)
{
	int64_t ne;
	char x[48], y[24];
	if (unary_check(n, d, &ne) || fq(n, nin(n, 0), d, x) || fo(n, nout(n, 0), d, y))
		return WL_ERR;
	int tanh_ = strcmp(attr_string(n, "approximate", "none"), "tanh") == 0;
	fprintf(f, "nn::gelu<%lldLL, %s, %s, %d>(c, %s, %s);\n", (long long)ne, x, y, tanh_, in[0], out[0]);
	return WL_OK;
}

static int silu_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	int64_t ne;
	if (unary_check(n, d, &ne))
		return WL_ERR;
	ki->cpp_name = "nn::silu";
	ki->alu_ops = (uint64_t)ne * 4;
	return WL_OK;
}

static int silu_emit(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                     const char *scratch, FILE *f, Diag *d)
{
	int64_t ne;
	char x[48], y[24];
	if (unary_check(n, d, &ne) || fq(n, nin(n, 0), d, x) || fo(n, nout(n, 0), d, y))
		return WL_ERR;
	fprintf(f, "nn::silu<%lldLL, %s, %s>(c, %s, %s);\n", (long long)ne, x, y, in[0], out[0]);
	return WL_OK;
}

static int copy_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	int64_t ne;
	if (unary_check(n, d, &ne))
		return WL_ERR;
	Value *x = nin(n, 0), *y = nout(n, 0);
	bool fx = x->type.elem == DT_FLOAT || x->type.elem == DT_FLOAT16;
	bool fy = y->type.elem == DT_FLOAT || y->type.elem == DT_FLOAT16;
	if (!fx || !fy)
		return KFAIL(n, "only float-to-float casts are supported");
	ki->cpp_name = "ccl::copy";
	ki->alu_ops = (uint64_t)ne;
	return WL_OK;
}

static int copy_emit(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                     const char *scratch, FILE *f, Diag *d)
{
	int64_t ne;
	char x[24], y[24];
	if (unary_check(n, d, &ne) || fo(n, nin(n, 0), d, x) || fo(n, nout(n, 0), d, y))
		return WL_ERR;
	fprintf(f, "ccl::copy<%lldLL, %s, %s>(c, %s, %s);\n", (long long)ne, x, y, in[0], out[0]);
	return WL_OK;
}

/* ---------------------------------------------------------------- binary (broadcast) */

typedef struct Bcast { int64_t O[4], SA[4], SB[4]; } Bcast;

static int bcast(const Node *n, Bcast *bc, Diag *d)
{
	Value *a = nin(n, 0), *b = nin(n, 1), *y = nout(n, 0);
	if (need_shape(n, a, d) || need_shape(n, b, d) || need_shape(n, y, d))
		return WL_ERR;
	int R = rank_of(y);
	if (R > 8)
		return KFAIL(n, "rank %d > 8", R);
	int64_t O[8], SA[8], SB[8];
	for (int k = 0; k < 2; k++) {
		Value *v = k ? b : a;
		int rv = rank_of(v);
		if (rv > R)
			return KFAIL(n, "tensor '%s': rank larger than the output's", v->name);
		int64_t st = 1;
		for (int i = R - 1; i >= 0; i--) {
			int j = i - (R - rv);
			int64_t dv = j >= 0 ? dim_of(v, j) : 1, dy = dim_of(y, i);
			O[i] = dy;
			int64_t s = dv == 1 ? 0 : st;
			if (dv != 1 && dv != dy)
				return KFAIL(n, "tensor '%s': shape does not broadcast to the output", v->name);
			(k ? SB : SA)[i] = s;
			st *= dv;
		}
	}
	/* merge adjacent dims (contiguous in both operands), drop size-1 dims */
	int m = 0;
	int64_t MO[8], MA[8], MB[8];
	for (int i = 0; i < R; i++) {
		if (O[i] == 1)
			continue;
		if (m > 0 && MA[m - 1] == SA[i] * O[i] && MB[m - 1] == SB[i] * O[i]) {
			MO[m - 1] *= O[i];
			MA[m - 1] = SA[i];
			MB[m - 1] = SB[i];
			continue;
		}
		MO[m] = O[i];
		MA[m] = SA[i];
		MB[m] = SB[i];
		m++;
	}
	if (m > 4)
		return KFAIL(n, "broadcast needs %d dims (at most 4 supported)", m);
	int pad = 4 - m;
	for (int i = 0; i < 4; i++) {
		bc->O[i] = i < pad ? 1 : MO[i - pad];
		bc->SA[i] = i < pad ? 0 : MA[i - pad];
		bc->SB[i] = i < pad ? 0 : MB[i - pad];
	}
	return WL_OK;
}

static int bin_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	Bcast bc;
	if (bcast(n, &bc, d))
		return WL_ERR;
	Value *a = nin(n, 0), *b = nin(n, 1);
	if (a->init && b->init)
		return KFAIL(n, "both operands constant (should have been folded)");
	for (int k = 0; k < 2; k++) {
		Value *v = k ? b : a;
		if (v->type.elem != DT_FLOAT && v->type.elem != DT_FLOAT16)
			return KFAIL(n, "tensor '%s': only float operands are supported", v->name);
		if (v->init)
			pack_plain(ki, "table", v->init, const_fbits(tmaxabs(v->init)));
	}
	ki->cpp_name = n->op_type[0] == 'A' ? "nn::add" : "nn::mul";
	ki->alu_ops = (uint64_t)(bc.O[0] * bc.O[1] * bc.O[2] * bc.O[3]);
	return WL_OK;
}

static int bin_emit(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                    const char *scratch, FILE *f, Diag *d)
{
	Bcast bc;
	if (bcast(n, &bc, d))
		return WL_ERR;
	char t[2][48], y[24];
	const char *arg[2];
	for (int k = 0; k < 2; k++) {
		Value *v = nin(n, k);
		if (v->init) {
			int fc = const_fbits(tmaxabs(v->init));
			snprintf(t[k], sizeof t[k], "%d, %d", fc, fc);
			arg[k] = blob[0];
		} else {
			if (fq(n, v, d, t[k]))
				return WL_ERR;
			arg[k] = in[k];
		}
	}
	if (fo(n, nout(n, 0), d, y))
		return WL_ERR;
	fprintf(f, "nn::%s<%s, %s, %s, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, "
	        "%lldLL, %lldLL>(c, %s, %s, %s);\n", n->op_type[0] == 'A' ? "add" : "mul", t[0], t[1], y,
	        (long long)bc.O[0], (long long)bc.O[1], (long long)bc.O[2], (long long)bc.O[3],
	        (long long)bc.SA[0], (long long)bc.SA[1], (long long)bc.SA[2], (long long)bc.SA[3],
	        (long long)bc.SB[0], (long long)bc.SB[1], (long long)bc.SB[2], (long long)bc.SB[3], arg[0], arg[1], out[0]);
	return WL_OK;
}

/* ---------------------------------------------------------------- Gather (embedding) */

static int emb_dims(const Node *n, int64_t *NI, int64_t *V, int64_t *D, Diag *d)
{
	if (need_const(n, 0, d) || need_shape(n, nin(n, 1), d))
		return WL_ERR;
	if (attr_int(n, "axis", 0) != 0)
		return KFAIL(n, "only axis 0 is supported");
	const Tensor *t = nin(n, 0)->init;
	Value *ids = nin(n, 1);
	if (ids->type.elem != DT_INT64 && ids->type.elem != DT_INT32)
		return KFAIL(n, "tensor '%s': ids must be int64 or int32", ids->name);
	if (t->ndim < 1 || (t->dtype != DT_FLOAT && t->dtype != DT_FLOAT16))
		return KFAIL(n, "tensor '%s': a float table is required", nin(n, 0)->name);
	*V = t->dims[0];
	*D = *V ? tnumel(t) / *V : 0;
	*NI = numel_of(ids);
	return WL_OK;
}

static int emb_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	int64_t NI, V, D;
	int fy;
	if (emb_dims(n, &NI, &V, &D, d) || fmt_of(n, nout(n, 0), d, &fy))
		return WL_ERR;
	pack_plain(ki, "table", nin(n, 0)->init, fy);
	ki->cpp_name = "nn::embedding";
	ki->alu_ops = (uint64_t)NI * D;
	return WL_OK;
}

static int emb_emit(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                    const char *scratch, FILE *f, Diag *d)
{
	int64_t NI, V, D;
	char y[24];
	if (emb_dims(n, &NI, &V, &D, d) || fo(n, nout(n, 0), d, y))
		return WL_ERR;
	fprintf(f, "nn::embedding<%lldLL, %lldLL, %lldLL, %s, %d>(c, %s, %s, %s);\n", (long long)NI, (long long)V,
	        (long long)D, y, nin(n, 1)->type.elem == DT_INT64, in[1], blob[0], out[0]);
	return WL_OK;
}

/* ---------------------------------------------------------------- GreedyArgMax */

static int am_dims(const Node *n, int64_t *R, int64_t *V, Diag *d)
{
	Value *x = nin(n, 0);
	if (need_shape(n, x, d))
		return WL_ERR;
	*V = dim_of(x, rank_of(x) - 1);
	if (*V < 1)
		return KFAIL(n, "tensor '%s': empty last axis", x->name);
	*R = numel_of(x) / *V;
	return WL_OK;
}

static int am_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	int64_t R, V;
	if (am_dims(n, &R, &V, d))
		return WL_ERR;
	ki->cpp_name = "ccl::argmax";
	ki->alu_ops = (uint64_t)R * V;
	return WL_OK;
}

static int am_emit(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                   const char *scratch, FILE *f, Diag *d)
{
	int64_t R, V;
	char x[24];
	if (am_dims(n, &R, &V, d) || fo(n, nin(n, 0), d, x))
		return WL_ERR;
	fprintf(f, "ccl::argmax<%lldLL, %lldLL, %s>(c, %s, %s);\n", (long long)R, (long long)V, x, in[0], out[0]);
	return WL_OK;
}

/* ---------------------------------------------------------------- WhisperAttention */

typedef struct WA { int64_t B, T, S, P, D, H, hd; int causal, bhsd; double scale; } WA;

static int wa_dims(const Node *n, WA *w, Diag *d)
{
	for (int i = 0; i < 3; i++)
		if (need_shape(n, nin(n, i), d))
			return WL_ERR;
	for (int i = 0; i < n->ninputs; i++)
		if (nin(n, i) && nin(n, i)->init)
			return KFAIL(n, "input %d ('%s') is a constant: not supported", i, nin(n, i)->name);
	w->B = dim_of(nin(n, 0), 0);
	w->D = attr_int(n, "embed", -1);
	w->H = attr_int(n, "heads", -1);
	w->T = attr_int(n, "q_len", -1);
	int64_t L = attr_int(n, "kv_len", -1);
	w->causal = (int)attr_int(n, "causal", 0);
	w->scale = attr_float(n, "scale", 1.0f);
	const char *lay = attr_string(n, "kv_layout", "bsd");
	w->bhsd = strcmp(lay, "bhsd") == 0;
	if (w->D <= 0 || w->H <= 0 || w->D % w->H || w->T <= 0 || L <= 0)
		return KFAIL(n, "bad embed/heads/q_len/kv_len attributes");
	if (!(w->scale > 0))
		return KFAIL(n, "scale must be positive");
	w->hd = w->D / w->H;
	w->P = nin(n, 3) ? dim_of(nin(n, 3), 2) : 0;
	if ((nin(n, 3) == NULL) != (nin(n, 4) == NULL))
		return KFAIL(n, "past_k and past_v must both be present or absent");
	w->S = L - w->P;
	if (numel_of(nin(n, 0)) != w->B * w->T * w->D || numel_of(nin(n, 1)) != w->B * w->S * w->D)
		return KFAIL(n, "tensor '%s': shape does not match the attributes", nin(n, 1)->name);
	return WL_OK;
}

static int wa_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	WA w;
	if (wa_dims(n, &w, d))
		return WL_ERR;
	int64_t L = w.P + w.S;
	ki->cpp_name = "nn::whisperAttention";
	ki->macs = (uint64_t)(w.B * w.H * w.T * L * w.hd * 2);
	ki->alu_ops = (uint64_t)(w.B * w.H * w.T * L * 3 + w.B * w.T * w.D);
	ki->scratch_bytes = (uint64_t)(4 * (w.B * w.T * w.D + 2 * w.B * L * w.D));
	return WL_OK;
}

static int opt_fq(const Node *n, const Value *v, Diag *d, char *buf)
{
	if (!v) {
		strcpy(buf, "0, 0");
		return WL_OK;
	}
	return fq(n, v, d, buf);
}

static int opt_fo(const Node *n, const Value *v, Diag *d, char *buf)
{
	if (!v) {
		strcpy(buf, "0");
		return WL_OK;
	}
	return fo(n, v, d, buf);
}

static const char *arg_or_null(const char *s)
{
	return s && strcmp(s, "NULL") ? s : "nullptr";
}

static int wa_emit(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                   const char *scratch, FILE *f, Diag *d)
{
	WA w;
	if (wa_dims(n, &w, d))
		return WL_ERR;
	char q[48], k[48], v[48], pk[48], pv[48], o[24], ok[24], ov[24];
	if (fq(n, nin(n, 0), d, q) || fq(n, nin(n, 1), d, k) || fq(n, nin(n, 2), d, v) || opt_fq(n, nin(n, 3), d, pk) ||
	    opt_fq(n, nin(n, 4), d, pv) || fo(n, nout(n, 0), d, o) || opt_fo(n, nout(n, 1), d, ok) ||
	    opt_fo(n, nout(n, 2), d, ov))
		return WL_ERR;
	fprintf(f, "nn::whisperAttention<%lld, %lld, %lld, %lld, %lld, %lld, %d, %d, %s, %s, %s, %s, %s, %s, %s, %s, %lldLL>"
	        "(c, %s, %s, %s, %s, %s, %s, %s, %s, %s);\n",
	        (long long)w.B, (long long)w.T, (long long)w.S, (long long)w.P, (long long)w.D, (long long)w.H, w.causal,
	        w.bhsd, q, k, v, pk, pv, o, ok, ov, llround(w.scale * ldexp(1.0, 30)), in[0], in[1], in[2],
	        arg_or_null(nin(n, 3) ? in[3] : NULL), arg_or_null(nin(n, 4) ? in[4] : NULL), out[0],
	        arg_or_null(nout(n, 1) ? out[1] : NULL), arg_or_null(nout(n, 2) ? out[2] : NULL), arg_or_null(scratch));
	return WL_OK;
}

/* ---------------------------------------------------------------- GroupQueryAttention */

typedef struct GQ { int64_t B, T, P, H, Hkv, hd; int causal, rope, pos, mask; double scale; } GQ;

static int gq_dims(const Node *n, GQ *g, Diag *d)
{
	for (int i = 0; i < 3; i++) {
		if (need_shape(n, nin(n, i), d))
			return WL_ERR;
		if (nin(n, i)->init)
			return KFAIL(n, "input %d ('%s') is a constant: not supported", i, nin(n, i)->name);
	}
	g->H = attr_int(n, "heads", -1);
	g->Hkv = attr_int(n, "kv_heads", -1);
	g->hd = attr_int(n, "head_dim", -1);
	g->causal = (int)attr_int(n, "causal", 0);
	g->rope = (int)attr_int(n, "rope", 0);
	g->scale = attr_float(n, "scale", 1.0f);
	if (g->H <= 0 || g->Hkv <= 0 || g->H % g->Hkv || g->hd <= 0 || (g->rope && g->hd % 2))
		return KFAIL(n, "bad heads/kv_heads/head_dim attributes");
	if (!(g->scale > 0))
		return KFAIL(n, "scale must be positive");
	g->B = dim_of(nin(n, 0), 0);
	g->T = dim_of(nin(n, 0), 1);
	if (numel_of(nin(n, 0)) != g->B * g->T * g->H * g->hd || numel_of(nin(n, 1)) != g->B * g->T * g->Hkv * g->hd)
		return KFAIL(n, "tensor '%s': shape does not match the attributes", nin(n, 0)->name);
	if ((nin(n, 5) == NULL) != (nin(n, 6) == NULL))
		return KFAIL(n, "past_k and past_v must both be present or absent");
	g->P = nin(n, 5) ? dim_of(nin(n, 5), 2) : 0;
	Value *m = nin(n, 7), *p = nin(n, 8);
	g->mask = 0;
	if (m) {
		if (m->type.elem != DT_INT64 && m->type.elem != DT_INT32)
			return KFAIL(n, "tensor '%s': attention_mask must be int64 or int32", m->name);
		if (numel_of(m) != g->B * (g->P + g->T))
			return KFAIL(n, "tensor '%s': expected [%lld, %lld]", m->name, (long long)g->B, (long long)(g->P + g->T));
		g->mask = m->type.elem == DT_INT64 ? 1 : 2;
	}
	g->pos = 0;
	if (g->rope) {
		for (int i = 3; i < 5; i++)
			if (!nin(n, i) || need_shape(n, nin(n, i), d))
				return nin(n, i) ? WL_ERR : KFAIL(n, "rope needs cos and sin");
		if (p) {
			if (p->type.elem != DT_INT64 && p->type.elem != DT_INT32)
				return KFAIL(n, "tensor '%s': position_ids must be int64 or int32", p->name);
			g->pos = p->type.elem == DT_INT64 ? 1 : 2;
			if (numel_of(p) == g->T && g->B > 1)
				g->pos += 10;
			else if (numel_of(p) != g->B * g->T)
				return KFAIL(n, "tensor '%s': expected [%lld, %lld]", p->name, (long long)g->B, (long long)g->T);
		} else if (numel_of(nin(n, 3)) != g->T * g->hd) {
			return KFAIL(n, "tensor '%s': expected %lld rows of %lld", nin(n, 3)->name, (long long)g->T,
			             (long long)g->hd);
		}
		if ((nin(n, 3)->init == NULL) != (nin(n, 4)->init == NULL))
			return KFAIL(n, "cos and sin must both be constants or both activations");
		if (numel_of(nin(n, 3)) % g->hd || numel_of(nin(n, 4)) != numel_of(nin(n, 3)))
			return KFAIL(n, "tensor '%s': rows of head_dim %lld expected", nin(n, 3)->name, (long long)g->hd);
	}
	return WL_OK;
}

static int gq_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	GQ g;
	if (gq_dims(n, &g, d))
		return WL_ERR;
	int64_t L = g.P + g.T;
	if (g.rope && nin(n, 3)->init) {
		pack_plain(ki, "table", nin(n, 3)->init, 30);
		pack_plain(ki, "table", nin(n, 4)->init, 30);
	}
	ki->cpp_name = "nn::gqa";
	ki->macs = (uint64_t)(g.B * g.H * g.T * L * g.hd * 2);
	ki->alu_ops = (uint64_t)(g.B * g.H * g.T * L * 3 + g.B * g.T * g.H * g.hd * (1 + 2 * g.rope));
	ki->scratch_bytes = (uint64_t)(4 * (g.B * g.T * g.H * g.hd + 2 * g.B * L * g.Hkv * g.hd));
	return WL_OK;
}

static int gq_emit(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                   const char *scratch, FILE *f, Diag *d)
{
	GQ g;
	if (gq_dims(n, &g, d))
		return WL_ERR;
	char q[48], k[48], v[48], cs[48], pk[48], pv[48], o[24], ok[24], ov[24];
	const char *cosa = "nullptr", *sina = "nullptr";
	if (!g.rope) {
		strcpy(cs, "0, 0");
	} else if (nin(n, 3)->init) {
		strcpy(cs, "30, 30");
		cosa = blob[0];
		sina = blob[1];
	} else {
		if (fq(n, nin(n, 3), d, cs))
			return WL_ERR;
		cosa = in[3];
		sina = in[4];
	}
	if (fq(n, nin(n, 0), d, q) || fq(n, nin(n, 1), d, k) || fq(n, nin(n, 2), d, v) || opt_fq(n, nin(n, 5), d, pk) ||
	    opt_fq(n, nin(n, 6), d, pv) || fo(n, nout(n, 0), d, o) || opt_fo(n, nout(n, 1), d, ok) ||
	    opt_fo(n, nout(n, 2), d, ov))
		return WL_ERR;
	fprintf(f, "nn::gqa<%lld, %lld, %lld, %lld, %lld, %lld, %d, %d, %d, %d, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
	        "%lldLL>(c, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);\n",
	        (long long)g.B, (long long)g.T, (long long)g.P, (long long)g.H, (long long)g.Hkv, (long long)g.hd,
	        g.causal, g.rope, g.pos, g.mask, q, k, v, cs, pk, pv, o, ok, ov, llround(g.scale * ldexp(1.0, 30)),
	        in[0], in[1], in[2], cosa, sina, arg_or_null(nin(n, 5) ? in[5] : NULL),
	        arg_or_null(nin(n, 6) ? in[6] : NULL), arg_or_null(g.mask ? in[7] : NULL),
	        arg_or_null(g.pos ? in[8] : NULL), out[0], arg_or_null(nout(n, 1) ? out[1] : NULL),
	        arg_or_null(nout(n, 2) ? out[2] : NULL), arg_or_null(scratch));
	return WL_OK;
}

/* ---------------------------------------------------------------- ConvStem */

typedef struct CS { int64_t B, C, F, F2, D; int fh, fp; } CS;

static double gelu_d(double x)
{
	return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
}

static int cs_dims(const Node *n, CS *s, Diag *d)
{
	Value *x = nin(n, 0);
	if (need_shape(n, x, d) || rank_of(x) != 3)
		return KFAIL(n, "tensor '%s': [B, C, F] with a static shape required", x->name);
	for (int i = 1; i < 6; i++)
		if (need_const(n, i, d))
			return WL_ERR;
	const int64_t *st, *pd;
	int ns = attr_ints(n, "strides", &st), np = attr_ints(n, "pads", &pd);
	if ((ns >= 0 && (ns != 2 || st[0] != 1 || st[1] != 2)) || (np >= 0 && (np != 2 || pd[0] != 1 || pd[1] != 1)))
		return KFAIL(n, "only strides [1, 2] and pads [1, 1] are supported");
	s->B = dim_of(x, 0);
	s->C = dim_of(x, 1);
	s->F = dim_of(x, 2);
	s->F2 = (s->F - 1) / 2 + 1;
	const Tensor *w1 = nin(n, 1)->init;
	s->D = w1->ndim == 3 ? w1->dims[0] : -1;
	if (w1->ndim != 3 || w1->dims[1] != s->C || w1->dims[2] != 3 || tnumel(nin(n, 3)->init) != s->D * s->D * 3 ||
	    tnumel(nin(n, 2)->init) != s->D || tnumel(nin(n, 4)->init) != s->D ||
	    tnumel(nin(n, 5)->init) != s->F2 * s->D)
		return KFAIL(n, "tensor '%s': weight/bias/positional shapes do not match", nin(n, 1)->name);
	/* h1 = GELU(conv1) bound from the weights and x's format */
	int qx = work_q(x);
	double xmax = ldexp(1.0, 31 - qx), hb = 0.2;
	for (int64_t o = 0; o < s->D; o++) {
		double acc = fabs(tensor_get_f64(nin(n, 2)->init, o));
		for (int64_t i = 0; i < s->C * 3; i++)
			acc += fabs(tensor_get_f64(w1, o * s->C * 3 + i)) * xmax;
		hb = fmax(hb, acc);
	}
	s->fh = const_fbits(hb);
	s->fp = const_fbits(tmaxabs(nin(n, 5)->init));
	return WL_OK;
}

typedef struct CWCtx { const Tensor *t; int64_t Cin; } CWCtx;

/* packed k = tap·Cin + c  ←  w[o][c][tap] */
static double cw_get(const void *p, int64_t o, int64_t k)
{
	const CWCtx *w = p;
	int64_t tap = k / w->Cin, ch = k % w->Cin;
	return tensor_get_f64(w->t, (o * w->Cin + ch) * 3 + tap);
}

static int cs_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	CS s;
	if (cs_dims(n, &s, d))
		return WL_ERR;
	int qx = work_q(nin(n, 0));
	int *E = xcalloc((size_t)s.D, sizeof *E);
	double *b = xcalloc((size_t)s.D, sizeof *b);
	for (int k = 0; k < 2; k++) {
		int64_t Cin = k ? s.D : s.C;
		const Tensor *wt = nin(n, k ? 3 : 1)->init, *bt = nin(n, k ? 4 : 2)->init;
		for (int64_t o = 0; o < s.D; o++)
			b[o] = tensor_get_f64(bt, o);
		CclBlob *w = add_blob(ki, "weight", (size_t)(s.D * Cin * 3) * 4);
		CclBlob *c = add_blob(ki, "bias", (size_t)s.D * 16);
		CWCtx cw = {wt, Cin};
		pack_rows((int32_t *)w->data, s.D, Cin * 3, cw_get, &cw, E, k ? s.fh : qx, b, (int64_t *)c->data);
	}
	free(E);
	free(b);
	pack_plain(ki, "table", nin(n, 5)->init, s.fp);
	ki->cpp_name = "whisper::convStem";
	ki->macs = (uint64_t)(s.B * (s.F * s.C * 3 * s.D + s.F2 * s.D * 3 * s.D));
	ki->alu_ops = (uint64_t)(s.B * (s.F * s.D + s.F2 * s.D) * 4 + s.B * s.F2 * s.D);
	ki->scratch_bytes = (uint64_t)(4 * ((s.F + 2) * s.C + (s.F + 2) * s.D));
	(void)gelu_d;
	return WL_OK;
}

static int cs_emit(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                   const char *scratch, FILE *f, Diag *d)
{
	CS s;
	char x[48], y[24];
	if (cs_dims(n, &s, d) || fq(n, nin(n, 0), d, x) || fo(n, nout(n, 0), d, y))
		return WL_ERR;
	fprintf(f, "whisper::convStem<%lld, %lld, %lld, %lld, %s, %d, %d, %s>(c, %s, %s, %s, %s, %s, %s, %s, %s);\n",
	        (long long)s.B, (long long)s.C, (long long)s.F, (long long)s.D, x, s.fh, s.fp, y, in[0], blob[0], blob[1],
	        blob[2], blob[3], blob[4], out[0], arg_or_null(scratch));
	return WL_OK;
}

/* ---------------------------------------------------------------- LogMel */

typedef struct LM { int64_t N, M, frames; int ff; } LM;

static int lm_dims(const Node *n, LM *l, Diag *d)
{
	Value *w = nin(n, 0);
	if (need_shape(n, w, d) || need_const(n, 1, d))
		return WL_ERR;
	if (attr_int(n, "n_fft", 400) != 400 || attr_int(n, "hop", 160) != 160)
		return KFAIL(n, "only n_fft 400 and hop 160 are supported");
	if (rank_of(w) != 2 || dim_of(w, 0) != 1 || dim_of(w, 1) <= 200)
		return KFAIL(n, "tensor '%s': expected [1, samples > 200]", w->name);
	l->N = dim_of(w, 1);
	l->M = attr_int(n, "n_mels", 80);
	l->frames = l->N / 160;
	const Tensor *t = nin(n, 1)->init;
	if (tnumel(t) != l->M * 201)
		return KFAIL(n, "tensor '%s': expected [%lld, 201]", nin(n, 1)->name, (long long)l->M);
	double mx = 0;
	for (int64_t m = 0; m < l->M; m++) {
		double s = 0;
		for (int k = 0; k < 201; k++)
			s += fabs(tensor_get_f64(t, m * 201 + k));
		mx = fmax(mx, s);
	}
	l->ff = const_fbits(mx);
	return WL_OK;
}

static int lm_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	LM l;
	if (lm_dims(n, &l, d))
		return WL_ERR;
	CclBlob *t = add_blob(ki, "table", (size_t)2 * 201 * 400 * 4);
	int32_t *p = (int32_t *)t->data;
	for (int k = 0; k < 201; k++)
		for (int i = 0; i < 400; i++) {
			double win = 0.5 - 0.5 * cos(2.0 * M_PI * i / 400);
			int64_t ph = ((int64_t)k * i) % 400;
			p[k * 400 + i] = (int32_t)llround(win * cos(2.0 * M_PI * (double)ph / 400) * ldexp(1.0, 28));
			p[201 * 400 + k * 400 + i] = (int32_t)llround(win * sin(2.0 * M_PI * (double)ph / 400) * ldexp(1.0, 28));
		}
	pack_plain(ki, "gamma", nin(n, 1)->init, l.ff);
	ki->cpp_name = "whisper::logMel";
	ki->macs = (uint64_t)(l.frames * 400 * 201 * 2 + l.frames * 201 * l.M);
	ki->alu_ops = (uint64_t)(l.frames * 201 * 2 + l.frames * l.M * 4);
	ki->scratch_bytes = (uint64_t)(4 * l.M * l.frames);
	return WL_OK;
}

static int lm_emit(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                   const char *scratch, FILE *f, Diag *d)
{
	LM l;
	char x[48], y[24];
	if (lm_dims(n, &l, d) || fq(n, nin(n, 0), d, x) || fo(n, nout(n, 0), d, y))
		return WL_ERR;
	fprintf(f, "whisper::logMel<%lldLL, %lld, %s, %d, %s>(c, %s, %s, %s, %s, %s);\n", (long long)l.N, (long long)l.M,
	        x, l.ff, y, in[0], blob[0], blob[1], out[0], arg_or_null(scratch));
	return WL_OK;
}

/* ---------------------------------------------------------------- the table */

static const KOp kops[] = {
	{"ai.wlower", "MatMulNBits", "linalg::matMulNBits", mm_info, mm_emit},
	{"", "LayerNormalization", "nn::layerNorm", ln_info, ln_emit},
	{"ai.wlower", "RMSNorm", "nn::rmsNorm", rms_info, rms_emit},
	{"ai.wlower", "WhisperAttention", "nn::whisperAttention", wa_info, wa_emit},
	{"ai.wlower", "GroupQueryAttention", "nn::gqa", gq_info, gq_emit},
	{"ai.wlower", "ConvStem", "whisper::convStem", cs_info, cs_emit},
	{"ai.wlower", "LogMel", "whisper::logMel", lm_info, lm_emit},
	{"ai.wlower", "Gelu", "nn::gelu", gelu_info, gelu_emit},
	{"", "Gelu", "nn::gelu", gelu_info, gelu_emit},
	{"ai.wlower", "SiLU", "nn::silu", silu_info, silu_emit},
	{"", "Add", "nn::add", bin_info, bin_emit},
	{"", "Mul", "nn::mul", bin_info, bin_emit},
	{"", "Gather", "nn::embedding", emb_info, emb_emit},
	{"ai.wlower", "GreedyArgMax", "ccl::argmax", am_info, am_emit},
	{"", "Cast", "ccl::copy", copy_info, copy_emit},
	{"", "Identity", "ccl::copy", copy_info, copy_emit},
};

static const KOp *kop_find(const Node *n)
{
	const char *dom = n->domain ? n->domain : "";
	if (!strcmp(dom, "ai.onnx"))
		dom = "";
	for (size_t i = 0; i < sizeof kops / sizeof kops[0]; i++)
		if (!strcmp(kops[i].domain, dom) && !strcmp(kops[i].op_type, n->op_type))
			return &kops[i];
	return NULL;
}

int ccl_kernel_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	memset(ki, 0, sizeof *ki);
	const KOp *k = kop_find(n);
	if (!k)
		return KFAIL(n, "no CCL kernel for op %s%s%s", n->domain && n->domain[0] ? n->domain : "",
		             n->domain && n->domain[0] ? "." : "", n->op_type);
	ki->cpp_name = k->cpp;
	if (k->info(n, ki, d)) {
		ccl_kernel_info_free(ki);
		return WL_ERR;
	}
	return WL_OK;
}

void ccl_kernel_info_free(CclKernelInfo *ki)
{
	for (int i = 0; i < ki->nblobs; i++)
		free(ki->blobs[i].data);
	ki->nblobs = 0;
}

int ccl_emit_call(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                  const char *scratch, FILE *f, Diag *d)
{
	const KOp *k = kop_find(n);
	if (!k)
		return KFAIL(n, "no CCL kernel for op %s", n->op_type);
	return k->emit(n, in, out, blob, scratch, f, d);
}
