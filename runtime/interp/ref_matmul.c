/* ref_matmul.c — the blocked float32 GEMM and the ops built on it:
 * MatMul, Gemm, Conv (1-D/2-D/3-D, pads, strides, dilations, groups,
 * auto_pad), com.microsoft MatMulNBits and ai.wlower MatMulNBits (bits 32 =
 * float weight [K, N] read in place, bias, `splits` outputs, `groups`).
 *
 * GEMM (GotoBLAS order): the N range is cut in NC-wide blocks, the M range
 * in MC-tall blocks; a task is one (batch, M block, N block) and is run by
 * one thread. Inside a task, k runs in KC chunks: the KC x NC slice of B is
 * packed into NR-wide panels in the thread's scratch (packing reads B from
 * wherever it lives: row-major, transposed, 4-bit blocks dequantized on the
 * fly, or straight out of the convolution input — im2col without a column
 * buffer), then an MR x NR register tile of C is updated by the micro-kernel
 * for every (row group, panel). The first chunk stores, later chunks add, the
 * bias is added after the last. Every element of C is thus summed in the
 * same order whatever the thread count.
 *
 * The micro-kernel is plain C over GCC vector types (64-byte vectors) and is
 * compiled per ISA with target_clones (AVX-512, AVX2+FMA, baseline); no
 * intrinsics. For M <= 2 (decoding one token) a GEMV path reads B once.
 *
 * Weights stay where the importer put them (mmapped initializers); nothing
 * is pre-packed or pre-dequantized.
 */
#include "ref.h"

/* GCC notes (once per file) that a 64-byte vector is passed differently with
 * and without AVX-512. That is safe only because every function taking or
 * returning a v16 is always_inline, hence compiled inside each clone. */
#pragma GCC diagnostic ignored "-Wpsabi"

enum { MR = 8, NR = 32, KC = 256, MC = 256, NC = 256 };

typedef float v16 __attribute__((vector_size(64), aligned(4), may_alias));
typedef float v16u __attribute__((vector_size(64), aligned(1), may_alias));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

/* ---------------------------------------------------------------- packing */

/* Dequantizes row n, k in [k0, k0+kc), into dst[j * stride]. */
static void nbits_row(const GemmB *B, int64_t n, int64_t k0, int64_t kc, float *dst, int64_t stride)
{
	int64_t k = k0, end = k0 + kc;
	while (k < end) {
		int64_t blk = k / B->block, r = k % B->block;
		int64_t len = B->block - r < end - k ? B->block - r : end - k;
		const uint8_t *blob = B->q + (n * B->kblocks + blk) * B->blob;
		float s = B->scales[n * B->kblocks + blk], zp;
		if (B->zp_float)
			zp = B->zp_float[n * B->kblocks + blk];
		else if (B->zp_packed) {
			int64_t zb = blk * B->bits;
			zp = (float)((B->zp_packed[n * B->zp_row + (zb >> 3)] >> (zb & 7)) & ((1u << B->bits) - 1));
		} else
			zp = (float)(1u << (B->bits - 1));
		if (B->bits == 4) {
			for (int64_t i = 0; i < len; i++) {
				int64_t t = r + i;
				unsigned q = (blob[t >> 1] >> ((t & 1) * 4)) & 15;
				dst[(k - k0 + i) * stride] = ((float)q - zp) * s;
			}
		} else {
			for (int64_t i = 0; i < len; i++) {
				int64_t bit = (r + i) * B->bits;
				unsigned q = (blob[bit >> 3] >> (bit & 7)) & ((1u << B->bits) - 1);
				dst[(k - k0 + i) * stride] = ((float)q - zp) * s;
			}
		}
		k += len;
	}
}

void interp_nbits_dequant(const uint8_t *q, const void *scales, const uint8_t *zp_packed, const void *zp_float,
                          int bits, int64_t block, int64_t K, int64_t N, float *out, int64_t ldo)
{
	int64_t kblocks = (K + block - 1) / block;
	GemmB B = {.kind = GB_NBITS, .q = q, .scales = scales, .zp_packed = zp_packed, .zp_float = zp_float,
	           .bits = bits, .block = (int)block, .kblocks = kblocks, .blob = block * bits / 8,
	           .zp_row = (kblocks * bits + 7) / 8};
	for (int64_t n = 0; n < N; n++)
		nbits_row(&B, n, 0, K, out + n, ldo);
}

static float im2col_at(const GemmB *B, const ufloat *x, int64_t k, int64_t n)
{
	int64_t kk[3], oo[3], idx = 0, c;
	int64_t t = k;
	for (int s = B->sp - 1; s >= 0; s--) {
		kk[s] = t % B->ker[s];
		t /= B->ker[s];
	}
	c = t;
	t = n;
	for (int s = B->sp - 1; s >= 0; s--) {
		oo[s] = t % B->out[s];
		t /= B->out[s];
	}
	idx = c;
	for (int s = 0; s < B->sp; s++) {
		int64_t i = oo[s] * B->stride[s] + kk[s] * B->dil[s] - B->pad[s];
		if (i < 0 || i >= B->in[s])
			return 0.0f;
		idx = idx * B->in[s] + i;
	}
	return x[idx];
}

/* Packs B[k0:k0+kc, n0:n0+nc] into panels dst[p][k][NR], zero-padded. */
static void pack_b(const GemmB *B, int64_t boff, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst)
{
	int64_t np = (nc + NR - 1) / NR;
	for (int64_t p = 0; p < np; p++) {
		float *pd = dst + p * kc * NR;
		int64_t nb = n0 + p * NR, w = nc - p * NR < NR ? nc - p * NR : NR;
		if (w < NR)
			memset(pd, 0, (size_t)(kc * NR) * sizeof(float));
		switch (B->kind) {
		case GB_ROWS: {
			const ufloat *b = B->b + boff + k0 * B->ldb + nb;
			for (int64_t k = 0; k < kc; k++)
				memcpy(pd + k * NR, b + k * B->ldb, (size_t)w * sizeof(float));
			break;
		}
		case GB_COLS: {
			const ufloat *b = B->b + boff + nb * B->ldb + k0;
			for (int64_t j = 0; j < w; j++) {
				const ufloat *col = b + j * B->ldb;
				for (int64_t k = 0; k < kc; k++)
					pd[k * NR + j] = col[k];
			}
			break;
		}
		case GB_NBITS:
			for (int64_t j = 0; j < w; j++)
				nbits_row(B, nb + j, k0, kc, pd + j, NR);
			break;
		case GB_IM2COL: {
			const ufloat *x = B->x + boff;
			if (B->sp == 1) {
				for (int64_t k = 0; k < kc; k++) {
					int64_t kg = k0 + k, c = kg / B->ker[0], t = kg % B->ker[0];
					const ufloat *xc = x + c * B->in[0];
					int64_t base = t * B->dil[0] - B->pad[0];
					for (int64_t j = 0; j < w; j++) {
						int64_t i = (nb + j) * B->stride[0] + base;
						pd[k * NR + j] = (i >= 0 && i < B->in[0]) ? xc[i] : 0.0f;
					}
				}
			} else {
				for (int64_t k = 0; k < kc; k++)
					for (int64_t j = 0; j < w; j++)
						pd[k * NR + j] = im2col_at(B, x, k0 + k, nb + j);
			}
			break;
		}
		default:
			WL_UNREACHABLE();
		}
	}
}

/* ---------------------------------------------------------------- micro-kernel */

/* always_inline (see -Wpsabi above): at -O0 a plain static inline stays out
 * of line, compiled for the baseline ISA, and the AVX-512 clone of gemm_task
 * would call it with its v16 in zmm registers, where it expects memory. */
static inline __attribute__((always_inline)) v16 vld(const float *p) { return *(const v16 *)p; }
static inline __attribute__((always_inline)) v16 vldu(const ufloat *p) { return *(const v16u *)p; }
static inline __attribute__((always_inline)) void vst(float *p, v16 v) { *(v16 *)p = v; }

/* C[0:mr, 0:nr] (+)= sum_k A[i][k] * P[k][0:NR]; a[i] points at A row i, k0. */
static inline __attribute__((always_inline)) void
ukr(int64_t kc, const ufloat *const a[MR], const float *bp, float *c, int64_t ldc,
    int mr, int nr, bool first, const ufloat *bias)
{
	v16 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
	v16 c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0}, c60 = {0}, c61 = {0}, c70 = {0}, c71 = {0};
	const ufloat *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
	const ufloat *a4 = a[4], *a5 = a[5], *a6 = a[6], *a7 = a[7];
	for (int64_t k = 0; k < kc; k++) {
		v16 b0 = vld(bp), b1 = vld(bp + 16);
		bp += NR;
		float x;
		x = a0[k]; c00 += x * b0; c01 += x * b1;
		x = a1[k]; c10 += x * b0; c11 += x * b1;
		x = a2[k]; c20 += x * b0; c21 += x * b1;
		x = a3[k]; c30 += x * b0; c31 += x * b1;
		x = a4[k]; c40 += x * b0; c41 += x * b1;
		x = a5[k]; c50 += x * b0; c51 += x * b1;
		x = a6[k]; c60 += x * b0; c61 += x * b1;
		x = a7[k]; c70 += x * b0; c71 += x * b1;
	}
	v16 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
	                  {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
	if (mr == MR && nr == NR) {
		for (int i = 0; i < MR; i++) {
			float *ci = c + i * ldc;
			v16 r0 = acc[i][0], r1 = acc[i][1];
			if (!first) {
				r0 = vld(ci) + r0;
				r1 = vld(ci + 16) + r1;
			}
			if (bias) {
				r0 += vldu(bias);
				r1 += vldu(bias + 16);
			}
			vst(ci, r0);
			vst(ci + 16, r1);
		}
		return;
	}
	float tmp[MR][NR];
	memcpy(tmp, acc, sizeof tmp);
	for (int i = 0; i < mr; i++) {
		float *ci = c + i * ldc;
		for (int j = 0; j < nr; j++) {
			float r = tmp[i][j];
			if (!first)
				r = ci[j] + r;
			if (bias)
				r += bias[j];
			ci[j] = r;
		}
	}
}

/* ---------------------------------------------------------------- tasks */

typedef struct GemmJob {
	const GemmArgs *g;
	int64_t tm, tn;             /* task grid over M chunks and N tiles */
	int64_t mch, nc;            /* M chunk height, N tile width */
	void *scratch;
	size_t stride;
} GemmJob;

size_t gemm_scratch(void)
{
	return (size_t)(KC * NC + MC * KC) * sizeof(float) + 128;
}

/* One task: rows [m0, m1) x columns [n0, n0 + nc) of one batch element. The
 * B slice is packed once per k chunk and reused by every row of the task. */
CLONES
static void gemm_task(const GemmJob *j, int64_t t, float *packb, float *packa)
{
	const GemmArgs *g = j->g;
	int64_t b = t / (j->tm * j->tn), r = t % (j->tm * j->tn);
	int64_t mi = r / j->tn, ni = r % j->tn;
	int64_t m0 = mi * j->mch, m1 = m0 + j->mch < g->M ? m0 + j->mch : g->M;
	int64_t n0 = ni * j->nc, nc = g->N - n0 < j->nc ? g->N - n0 : j->nc;
	const ufloat *A = g->a + (g->a_off ? g->a_off[b] : 0);
	float *C = g->c + (g->c_off ? g->c_off[b] : 0);
	int64_t boff = g->b_off ? g->b_off[b] : 0;
	for (int64_t k0 = 0; k0 < g->K; k0 += KC) {
		int64_t kc = g->K - k0 < KC ? g->K - k0 : KC;
		bool first = k0 == 0, last = k0 + kc >= g->K;
		pack_b(g->b, boff, k0, kc, n0, nc, packb);
		for (int64_t mb = m0; mb < m1; mb += MC) {
			int64_t mc = m1 - mb < MC ? m1 - mb : MC;
			const ufloat *ab;
			int64_t lda;
			if (g->trans_a) {
				for (int64_t i = 0; i < mc; i++)
					for (int64_t k = 0; k < kc; k++)
						packa[i * kc + k] = A[(k0 + k) * g->lda + mb + i];
				ab = packa;
				lda = kc;
			} else {
				ab = A + mb * g->lda + k0;
				lda = g->lda;
			}
			for (int64_t p = 0; p * NR < nc; p++) {
				const float *bp = packb + p * kc * NR;
				int nr = nc - p * NR < NR ? (int)(nc - p * NR) : NR;
				const ufloat *bias = (last && g->bias) ? g->bias + n0 + p * NR : NULL;
				float biasbuf[NR];
				if (bias && nr < NR) {
					memset(biasbuf, 0, sizeof biasbuf);
					memcpy(biasbuf, bias, (size_t)nr * sizeof(float));
					bias = biasbuf;
				}
				for (int64_t i = 0; i < mc; i += MR) {
					int mr = mc - i < MR ? (int)(mc - i) : MR;
					const ufloat *arow[MR];
					for (int q = 0; q < MR; q++)
						arow[q] = ab + (i + (q < mr ? q : 0)) * lda;
					ukr(kc, arow, bp, C + (mb + i) * g->ldc + n0 + p * NR, g->ldc, mr, nr, first, bias);
				}
			}
		}
	}
}

/* GEMV-like path for tiny M: each task owns a range of N columns. */
CLONES
static void gemv_task(const GemmArgs *g, int64_t b, int64_t n0, int64_t n1, float *tmp)
{
	const ufloat *A = g->a + (g->a_off ? g->a_off[b] : 0);
	float *C = g->c + (g->c_off ? g->c_off[b] : 0);
	int64_t boff = g->b_off ? g->b_off[b] : 0;
	const GemmB *B = g->b;
	for (int64_t m = 0; m < g->M; m++) {
		float *c = C + m * g->ldc;
		if (B->kind == GB_ROWS) {
			for (int64_t n = n0; n < n1; n++)
				c[n] = 0.0f;
			for (int64_t k = 0; k < g->K; k++) {
				float a = g->trans_a ? A[k * g->lda + m] : A[m * g->lda + k];
				const ufloat *br = B->b + boff + k * B->ldb;
				for (int64_t n = n0; n < n1; n++)
					c[n] += a * br[n];
			}
		} else {
			/* one column of B at a time, k summed in 16 lanes */
			for (int64_t n = n0; n < n1; n++) {
				const ufloat *col;
				if (B->kind == GB_COLS) {
					col = B->b + boff + n * B->ldb;
				} else {
					nbits_row(B, n, 0, g->K, tmp, 1);
					col = tmp;
				}
				float lanes[16] = {0};
				int64_t k = 0;
				if (!g->trans_a) {
					const ufloat *ar = A + m * g->lda;
					for (; k + 16 <= g->K; k += 16)
						for (int l = 0; l < 16; l++)
							lanes[l] += ar[k + l] * col[k + l];
					float s = 0.0f;
					for (; k < g->K; k++)
						s += ar[k] * col[k];
					for (int l = 0; l < 16; l++)
						s += lanes[l];
					c[n] = s;
				} else {
					float s = 0.0f;
					for (; k < g->K; k++)
						s += A[k * g->lda + m] * col[k];
					c[n] = s;
				}
			}
		}
		if (g->bias)
			for (int64_t n = n0; n < n1; n++)
				c[n] += g->bias[n];
	}
}

enum { GEMV_COLS = 64 };

static void gemm_par(void *ctx, int64_t t0, int64_t t1, int tid)
{
	GemmJob *j = ctx;
	char *s = (char *)j->scratch + (size_t)tid * j->stride;
	float *packb = (float *)(((uintptr_t)s + 63) & ~(uintptr_t)63);
	float *packa = packb + KC * NC;
	for (int64_t t = t0; t < t1; t++)
		gemm_task(j, t, packb, packa);
}

static void gemv_par(void *ctx, int64_t t0, int64_t t1, int tid)
{
	GemmJob *j = ctx;
	char *s = (char *)j->scratch + (size_t)tid * j->stride;
	float *tmp = (float *)(((uintptr_t)s + 63) & ~(uintptr_t)63);
	for (int64_t t = t0; t < t1; t++) {
		int64_t b = t / j->tn, c = t % j->tn;
		int64_t n0 = c * GEMV_COLS, n1 = n0 + GEMV_COLS < j->g->N ? n0 + GEMV_COLS : j->g->N;
		gemv_task(j->g, b, n0, n1, tmp);
	}
}

void gemm_run(ThreadPool *pool, void *scratch_base, size_t scratch_stride, const GemmArgs *g)
{
	if (g->M <= 0 || g->N <= 0 || g->batch <= 0)
		return;
	if (g->K == 0) {
		for (int64_t b = 0; b < g->batch; b++) {
			float *C = g->c + (g->c_off ? g->c_off[b] : 0);
			for (int64_t m = 0; m < g->M; m++)
				for (int64_t n = 0; n < g->N; n++)
					C[m * g->ldc + n] = g->bias ? g->bias[n] : 0.0f;
		}
		return;
	}
	GemmJob j = {.g = g, .scratch = scratch_base, .stride = scratch_stride};
	/* GEMV needs K floats of scratch for a dequantized column */
	bool gemv = g->M <= 2 && g->b->kind != GB_IM2COL &&
	            (g->b->kind != GB_NBITS || (size_t)g->K * sizeof(float) + 64 <= gemm_scratch());
	int64_t tasks;
	ParallelFn fn;
	if (gemv) {
		j.tn = (g->N + GEMV_COLS - 1) / GEMV_COLS;
		tasks = g->batch * j.tn;
		fn = gemv_par;
	} else {
		/* Enough tasks for the threads (3 each), N tiles first: every task
		 * packs its B slice once. The grid never changes a result: each
		 * element is summed in the same k order in any task. */
		int64_t want = pool ? 3 * (int64_t)threadpool_threads(pool) : 1;
		j.nc = NC;
		j.tn = (g->N + NC - 1) / NC;
		if (g->batch * j.tn < want) {
			int64_t per = (want + g->batch - 1) / g->batch;
			int64_t w = (g->N + per - 1) / per;
			j.nc = (w + NR - 1) / NR * NR;
			j.tn = (g->N + j.nc - 1) / j.nc;
		}
		j.tm = 1;
		j.mch = g->M;
		if (g->batch * j.tn < want) {
			int64_t tm = (want + g->batch * j.tn - 1) / (g->batch * j.tn);
			j.mch = ((g->M + tm - 1) / tm + MR - 1) / MR * MR;
			j.tm = (g->M + j.mch - 1) / j.mch;
		}
		tasks = g->batch * j.tm * j.tn;
		fn = gemm_par;
	}
	if (!pool) {
		/* inline, on the caller's scratch (tid 0 relative to scratch_base) */
		fn(&j, 0, tasks, 0);
		return;
	}
	parallel_for(pool, tasks, 1, fn, &j);
}

/* ================================================================ ops */

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

static void to_float(const RTensor *t, float *dst)
{
	int64_t n = rt_numel(t);
	for (int64_t i = 0; i < n; i++)
		dst[i] = (float)get_f64(t->data, t->dtype, i);
}

/* ---------------------------------------------------------------- MatMul */

typedef struct MMShape {
	int64_t M, K, N, batch;
	int nb;                      /* batch rank */
	int64_t bdims[RT_MAX_DIMS];
	int64_t astr[RT_MAX_DIMS], bstr[RT_MAX_DIMS];   /* batch strides in matrices */
	bool a1, b1;                 /* 1-D promotions */
} MMShape;

static int mm_shape(const KCall *c, Diag *d, const RTensor *A, const RTensor *B, MMShape *s)
{
	char b1[96], b2[96];
	if (A->ndim < 1 || B->ndim < 1)
		return kfail(c, d, "MatMul of a scalar (%s, %s)", kdesc(A, b1), kdesc(B, b2));
	s->a1 = A->ndim == 1;
	s->b1 = B->ndim == 1;
	s->M = s->a1 ? 1 : A->dims[A->ndim - 2];
	s->K = A->dims[A->ndim - 1];
	int64_t kb = s->b1 ? B->dims[0] : B->dims[B->ndim - 2];
	s->N = s->b1 ? 1 : B->dims[B->ndim - 1];
	if (kb != s->K)
		return kfail(c, d, "tensors '%s' %s and '%s' %s: inner dimensions differ", kin_name(c, 0),
		             kdesc(A, b1), kin_name(c, 1), kdesc(B, b2));
	int na = s->a1 ? 0 : A->ndim - 2, nbb = s->b1 ? 0 : B->ndim - 2;
	s->nb = na > nbb ? na : nbb;
	int64_t sa = s->M * s->K, sb = s->K * s->N;
	for (int i = s->nb - 1; i >= 0; i--) {
		int ia = i - (s->nb - na), ib = i - (s->nb - nbb);
		int64_t da = ia >= 0 ? A->dims[ia] : 1, db = ib >= 0 ? B->dims[ib] : 1;
		if (da != db && da != 1 && db != 1)
			return kfail(c, d, "tensors '%s' %s and '%s' %s: batch dimensions do not broadcast",
			             kin_name(c, 0), kdesc(A, b1), kin_name(c, 1), kdesc(B, b2));
		s->bdims[i] = da > db ? da : db;
		if (da == 0 || db == 0)
			s->bdims[i] = 0;
		s->astr[i] = da == 1 ? 0 : sa;
		s->bstr[i] = db == 1 ? 0 : sb;
		sa *= da;
		sb *= db;
	}
	s->batch = 1;
	for (int i = 0; i < s->nb; i++)
		s->batch *= s->bdims[i];
	return WL_OK;
}

int ref_matmul_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_NUM) || need_in(c, d, 1, DTM_NUM))
		return WL_ERR;
	RTensor *A = c->in[0], *B = c->in[1];
	if (A->dtype != B->dtype)
		return kfail(c, d, "tensors '%s' and '%s' have different element types", kin_name(c, 0), kin_name(c, 1));
	MMShape s;
	if (mm_shape(c, d, A, B, &s))
		return WL_ERR;
	int64_t od[RT_MAX_DIMS];
	int r = 0;
	for (int i = 0; i < s.nb; i++)
		od[r++] = s.bdims[i];
	if (!s.a1)
		od[r++] = s.M;
	if (!s.b1)
		od[r++] = s.N;
	if (r > RT_MAX_DIMS)
		return kfail(c, d, "result has too many dimensions");
	set_out(c->out[0], A->dtype, r, od);
	if (A->dtype == DT_FLOAT || A->dtype == DT_FLOAT16 || A->dtype == DT_BFLOAT16) {
		c->scratch = gemm_scratch();
		c->shared = ALIGN64((size_t)s.batch * 3 * sizeof(int64_t));
		if (A->dtype != DT_FLOAT)   /* 16-bit floats: converted, summed in float32 */
			c->shared += ALIGN64((size_t)rt_numel(A) * 4) + ALIGN64((size_t)rt_numel(B) * 4) +
			             ALIGN64((size_t)(s.batch * s.M * s.N) * 4);
	}
	return WL_OK;
}

static void batch_offsets(const MMShape *s, int64_t *ao, int64_t *bo, int64_t *co)
{
	int64_t idx[RT_MAX_DIMS] = {0};
	for (int64_t b = 0; b < s->batch; b++) {
		int64_t oa = 0, ob = 0;
		for (int i = 0; i < s->nb; i++) {
			oa += idx[i] * s->astr[i];
			ob += idx[i] * s->bstr[i];
		}
		ao[b] = oa;
		bo[b] = ob;
		co[b] = b * s->M * s->N;
		for (int i = s->nb - 1; i >= 0; i--) {
			if (++idx[i] < s->bdims[i])
				break;
			idx[i] = 0;
		}
	}
}

int ref_matmul_run(KCall *c, Diag *d)
{
	RTensor *A = c->in[0], *B = c->in[1], *Y = c->out[0];
	MMShape s;
	if (mm_shape(c, d, A, B, &s))
		return WL_ERR;
	if (s.batch == 0 || s.M == 0 || s.N == 0)
		return WL_OK;
	if (A->dtype != DT_FLOAT && A->dtype != DT_FLOAT16 && A->dtype != DT_BFLOAT16) {
		/* generic: naive, in double (double) or int64 (integers) */
		int64_t idx[RT_MAX_DIMS] = {0};
		bool fl = dt_is_float(A->dtype);
		for (int64_t b = 0; b < s.batch; b++) {
			int64_t oa = 0, ob = 0;
			for (int i = 0; i < s.nb; i++) {
				oa += idx[i] * s.astr[i];
				ob += idx[i] * s.bstr[i];
			}
			for (int64_t m = 0; m < s.M; m++)
				for (int64_t n = 0; n < s.N; n++) {
					double sf = 0;
					int64_t si = 0;
					for (int64_t k = 0; k < s.K; k++) {
						int64_t ia = oa + m * s.K + k, ib = ob + k * s.N + n;
						if (fl)
							sf += get_f64(A->data, A->dtype, ia) * get_f64(B->data, B->dtype, ib);
						else
							si += (int64_t)((uint64_t)get_i64(A->data, A->dtype, ia) *
							                (uint64_t)get_i64(B->data, B->dtype, ib));
					}
					int64_t io = (b * s.M + m) * s.N + n;
					if (fl)
						set_f64(Y->data, Y->dtype, io, sf);
					else
						set_i64(Y->data, Y->dtype, io, si);
				}
			for (int i = s.nb - 1; i >= 0; i--) {
				if (++idx[i] < s.bdims[i])
					break;
				idx[i] = 0;
			}
		}
		return WL_OK;
	}
	const ufloat *ad = A->data, *bd = B->data;
	float *yd = Y->data;
	char *sh = (char *)c->shared_base + ALIGN64((size_t)s.batch * 3 * sizeof(int64_t));
	if (A->dtype != DT_FLOAT) {
		float *af = (float *)sh, *bf = (float *)(sh + ALIGN64((size_t)rt_numel(A) * 4));
		yd = (float *)((char *)bf + ALIGN64((size_t)rt_numel(B) * 4));
		to_float(A, af);
		to_float(B, bf);
		ad = af;
		bd = bf;
	}
	GemmB gb = {.kind = GB_ROWS, .b = bd, .ldb = s.N};
	GemmArgs g = {.M = s.M, .N = s.N, .K = s.K, .batch = s.batch, .a = ad, .lda = s.K,
	              .b = &gb, .c = yd, .ldc = s.N};
	bool b_shared = true, a_dense = true;
	for (int i = 0; i < s.nb; i++) {
		if (s.bstr[i] != 0 && s.bdims[i] != 1)
			b_shared = false;
		if (s.bdims[i] != 1 && s.astr[i] == 0)
			a_dense = false;
	}
	if (b_shared && a_dense) {
		/* [.., M, K] x [K, N]: one GEMM with M * batch rows */
		g.M = s.M * s.batch;
		g.batch = 1;
	} else if (s.batch > 1) {
		int64_t *ao = c->shared_base, *bo = ao + s.batch, *co = bo + s.batch;
		batch_offsets(&s, ao, bo, co);
		g.a_off = ao;
		g.b_off = bo;
		g.c_off = co;
	}
	gemm_run(c->pool, c->scratch_base, c->scratch_stride, &g);
	if (A->dtype != DT_FLOAT) {
		int64_t n = s.batch * s.M * s.N;
		for (int64_t i = 0; i < n; i++)
			set_f64(Y->data, Y->dtype, i, yd[i]);
	}
	return WL_OK;
}

/* ---------------------------------------------------------------- Gemm */

int ref_gemm_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_NUM) || need_in(c, d, 1, DTM_NUM))
		return WL_ERR;
	RTensor *A = c->in[0], *B = c->in[1], *C = c->nin > 2 ? c->in[2] : NULL;
	int64_t ta, tb;
	if (attr_get_int(c, d, "transA", 0, &ta) || attr_get_int(c, d, "transB", 0, &tb))
		return WL_ERR;
	char b1[96], b2[96];
	if (A->ndim != 2 || B->ndim != 2)
		return kfail(c, d, "Gemm needs 2-D inputs, got %s and %s", kdesc(A, b1), kdesc(B, b2));
	if (A->dtype != B->dtype || (C && C->dtype != A->dtype))
		return kfail(c, d, "inputs have different element types");
	int64_t M = ta ? A->dims[1] : A->dims[0], K = ta ? A->dims[0] : A->dims[1];
	int64_t K2 = tb ? B->dims[1] : B->dims[0], N = tb ? B->dims[0] : B->dims[1];
	if (K != K2)
		return kfail(c, d, "tensors '%s' %s and '%s' %s: inner dimensions differ", kin_name(c, 0),
		             kdesc(A, b1), kin_name(c, 1), kdesc(B, b2));
	if (C) {
		if (C->ndim > 2)
			return kfail(c, d, "tensor '%s' %s: C must have rank <= 2", kin_name(c, 2), kdesc(C, b1));
		int64_t want[2] = {M, N};
		for (int i = 0; i < C->ndim; i++) {
			int64_t cd = C->dims[i], w = want[2 - C->ndim + i];
			if (cd != w && cd != 1)
				return kfail(c, d, "tensor '%s' %s does not broadcast to [%lld,%lld]", kin_name(c, 2),
				             kdesc(C, b1), (long long)M, (long long)N);
		}
	}
	int64_t od[2] = {M, N};
	set_out(c->out[0], A->dtype, 2, od);
	if (A->dtype == DT_FLOAT)
		c->scratch = gemm_scratch();
	return WL_OK;
}

int ref_gemm_run_op(KCall *c, Diag *d)
{
	RTensor *A = c->in[0], *B = c->in[1], *C = c->nin > 2 ? c->in[2] : NULL, *Y = c->out[0];
	int64_t ta, tb;
	float alpha, beta;
	if (attr_get_int(c, d, "transA", 0, &ta) || attr_get_int(c, d, "transB", 0, &tb) ||
	    attr_get_float(c, d, "alpha", 1.0f, &alpha) || attr_get_float(c, d, "beta", 1.0f, &beta))
		return WL_ERR;
	int64_t M = Y->dims[0], N = Y->dims[1], K = ta ? A->dims[0] : A->dims[1];
	int64_t cs0 = 0, cs1 = 0;
	if (C && C->ndim == 2) {
		cs0 = C->dims[0] == 1 ? 0 : C->dims[1];
		cs1 = C->dims[1] == 1 ? 0 : 1;
	} else if (C && C->ndim == 1) {
		cs1 = C->dims[0] == 1 ? 0 : 1;
	}
	if (M == 0 || N == 0)
		return WL_OK;
	if (A->dtype == DT_FLOAT) {
		GemmB gb = {.kind = tb ? GB_COLS : GB_ROWS, .b = B->data, .ldb = B->dims[1]};
		GemmArgs g = {.M = M, .N = N, .K = K, .batch = 1, .a = A->data, .lda = A->dims[1],
		              .trans_a = ta != 0, .b = &gb, .c = Y->data, .ldc = N};
		gemm_run(c->pool, c->scratch_base, c->scratch_stride, &g);
		float *y = Y->data;
		const float *cc = C ? C->data : NULL;
		for (int64_t m = 0; m < M; m++)
			for (int64_t n = 0; n < N; n++) {
				float v = y[m * N + n];
				if (alpha != 1.0f)
					v = alpha * v;
				if (cc)
					v = v + beta * cc[m * cs0 + n * cs1];
				y[m * N + n] = v;
			}
		return WL_OK;
	}
	bool fl = dt_is_float(A->dtype);
	for (int64_t m = 0; m < M; m++)
		for (int64_t n = 0; n < N; n++) {
			double sf = 0;
			int64_t si = 0;
			for (int64_t k = 0; k < K; k++) {
				int64_t ia = ta ? k * A->dims[1] + m : m * A->dims[1] + k;
				int64_t ib = tb ? n * B->dims[1] + k : k * B->dims[1] + n;
				if (fl)
					sf += get_f64(A->data, A->dtype, ia) * get_f64(B->data, B->dtype, ib);
				else
					si += get_i64(A->data, A->dtype, ia) * get_i64(B->data, B->dtype, ib);
			}
			if (fl) {
				double v = alpha * sf;
				if (C)
					v += beta * get_f64(C->data, C->dtype, m * cs0 + n * cs1);
				set_f64(Y->data, Y->dtype, m * N + n, v);
			} else {
				int64_t v = (int64_t)alpha * si;
				if (C)
					v += (int64_t)beta * get_i64(C->data, C->dtype, m * cs0 + n * cs1);
				set_i64(Y->data, Y->dtype, m * N + n, v);
			}
		}
	return WL_OK;
}

/* ---------------------------------------------------------------- Conv */

typedef struct ConvGeom {
	int sp;
	int64_t N, C, M, G;
	int64_t in[3], out[3], ker[3], stride[3], dil[3], pad[3];
	int64_t insz, outsz, ksz;
} ConvGeom;

static int conv_geom(const KCall *c, Diag *d, ConvGeom *g)
{
	RTensor *X = c->in[0], *W = c->in[1];
	char b1[96], b2[96];
	if (X->ndim < 3 || X->ndim > 5 || W->ndim != X->ndim)
		return kfail(c, d, "tensors '%s' %s and '%s' %s: Conv needs [N,C,spatial...] with 1 to 3 spatial dims",
		             kin_name(c, 0), kdesc(X, b1), kin_name(c, 1), kdesc(W, b2));
	g->sp = X->ndim - 2;
	g->N = X->dims[0];
	g->C = X->dims[1];
	g->M = W->dims[0];
	int64_t grp;
	if (attr_get_int(c, d, "group", 1, &grp))
		return WL_ERR;
	if (grp < 1 || g->C % grp || g->M % grp || W->dims[1] * grp != g->C)
		return kfail(c, d, "tensors '%s' %s and '%s' %s do not agree with group %lld", kin_name(c, 0),
		             kdesc(X, b1), kin_name(c, 1), kdesc(W, b2), (long long)grp);
	g->G = grp;
	const int64_t *ks = NULL, *st = NULL, *dl = NULL, *pd = NULL;
	int nks = attr_ints(c->node, "kernel_shape", &ks), nst = attr_ints(c->node, "strides", &st);
	int ndl = attr_ints(c->node, "dilations", &dl), npd = attr_ints(c->node, "pads", &pd);
	if ((nks >= 0 && nks != g->sp) || (nst >= 0 && nst != g->sp) || (ndl >= 0 && ndl != g->sp) ||
	    (npd >= 0 && npd != 2 * g->sp))
		return kfail(c, d, "kernel_shape/strides/dilations/pads do not match %d spatial dims", g->sp);
	const char *ap = attr_string(c->node, "auto_pad", "NOTSET");
	g->insz = g->outsz = g->ksz = 1;
	for (int s = 0; s < g->sp; s++) {
		g->in[s] = X->dims[2 + s];
		g->ker[s] = W->dims[2 + s];
		if (nks >= 0 && ks[s] != g->ker[s])
			return kfail(c, d, "kernel_shape does not match tensor '%s' %s", kin_name(c, 1), kdesc(W, b2));
		g->stride[s] = nst >= 0 ? st[s] : 1;
		g->dil[s] = ndl >= 0 ? dl[s] : 1;
		if (g->stride[s] < 1 || g->dil[s] < 1)
			return kfail(c, d, "strides and dilations must be positive");
		int64_t ek = (g->ker[s] - 1) * g->dil[s] + 1, pb = 0, pe = 0;
		if (!strcmp(ap, "NOTSET")) {
			pb = npd >= 0 ? pd[s] : 0;
			pe = npd >= 0 ? pd[s + g->sp] : 0;
			if (pb < 0 || pe < 0)
				return kfail(c, d, "negative pads");
			g->out[s] = g->in[s] + pb + pe >= ek ? (g->in[s] + pb + pe - ek) / g->stride[s] + 1 : 0;
		} else if (!strcmp(ap, "VALID")) {
			g->out[s] = g->in[s] >= ek ? (g->in[s] - ek) / g->stride[s] + 1 : 0;
		} else if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
			g->out[s] = (g->in[s] + g->stride[s] - 1) / g->stride[s];
			int64_t tot = (g->out[s] - 1) * g->stride[s] + ek - g->in[s];
			if (tot < 0)
				tot = 0;
			pb = !strcmp(ap, "SAME_UPPER") ? tot / 2 : tot - tot / 2;
		} else {
			return kfail(c, d, "unknown auto_pad '%s'", ap);
		}
		g->pad[s] = pb;
		g->insz *= g->in[s];
		g->outsz *= g->out[s];
		g->ksz *= g->ker[s];
	}
	return WL_OK;
}

int ref_conv_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_FLOATS) || need_in(c, d, 1, DTM_FLOATS))
		return WL_ERR;
	RTensor *X = c->in[0], *W = c->in[1], *B = c->nin > 2 ? c->in[2] : NULL;
	if (W->dtype != X->dtype || (B && B->dtype != X->dtype))
		return kfail(c, d, "inputs have different element types");
	ConvGeom g;
	if (conv_geom(c, d, &g))
		return WL_ERR;
	if (B && (B->ndim != 1 || B->dims[0] != g.M))
		return kfail(c, d, "tensor '%s': bias must be [%lld]", kin_name(c, 2), (long long)g.M);
	int64_t od[5] = {g.N, g.M};
	for (int s = 0; s < g.sp; s++)
		od[2 + s] = g.out[s];
	set_out(c->out[0], X->dtype, 2 + g.sp, od);
	if (X->dtype == DT_FLOAT) {
		c->scratch = gemm_scratch();
		c->shared = (size_t)(g.N * g.G) * 3 * sizeof(int64_t);
	}
	return WL_OK;
}

static void conv_gemmb(const ConvGeom *g, GemmB *gb)
{
	for (int s = 0; s < g->sp; s++) {
		gb->in[s] = g->in[s];
		gb->out[s] = g->out[s];
		gb->ker[s] = g->ker[s];
		gb->stride[s] = g->stride[s];
		gb->dil[s] = g->dil[s];
		gb->pad[s] = g->pad[s];
	}
}

int ref_conv_run(KCall *c, Diag *d)
{
	RTensor *X = c->in[0], *W = c->in[1], *B = c->nin > 2 ? c->in[2] : NULL, *Y = c->out[0];
	ConvGeom g;
	if (conv_geom(c, d, &g))
		return WL_ERR;
	int64_t Cg = g.C / g.G, Mg = g.M / g.G, Kd = Cg * g.ksz;
	if (g.N == 0 || g.M == 0 || g.outsz == 0)
		return WL_OK;
	if (X->dtype == DT_FLOAT) {
		int64_t nb = g.N * g.G;
		int64_t *ao = c->shared_base, *bo = ao + nb, *co = bo + nb;
		for (int64_t n = 0; n < g.N; n++)
			for (int64_t q = 0; q < g.G; q++) {
				int64_t b = n * g.G + q;
				ao[b] = q * Mg * Kd;
				bo[b] = (n * g.C + q * Cg) * g.insz;
				co[b] = (n * g.M + q * Mg) * g.outsz;
			}
		GemmB gb = {.kind = GB_IM2COL, .x = X->data, .sp = g.sp};
		conv_gemmb(&g, &gb);
		GemmArgs ga = {.M = Mg, .N = g.outsz, .K = Kd, .batch = nb, .a = W->data, .lda = Kd,
		               .a_off = ao, .b = &gb, .b_off = bo, .c = Y->data, .ldc = g.outsz, .c_off = co};
		gemm_run(c->pool, c->scratch_base, c->scratch_stride, &ga);
		if (B) {
			float *y = Y->data;
			const float *bb = B->data;
			for (int64_t n = 0; n < g.N; n++)
				for (int64_t m = 0; m < g.M; m++) {
					float *row = y + (n * g.M + m) * g.outsz;
					for (int64_t i = 0; i < g.outsz; i++)
						row[i] += bb[m];
				}
		}
		return WL_OK;
	}
	/* generic (float16, double): direct, in double */
	for (int64_t n = 0; n < g.N; n++)
		for (int64_t m = 0; m < g.M; m++) {
			int64_t q = m / Mg;
			for (int64_t o = 0; o < g.outsz; o++) {
				double s = B ? get_f64(B->data, B->dtype, m) : 0.0;
				for (int64_t k = 0; k < Kd; k++) {
					int64_t kk[3], oo[3], t = k, idx;
					for (int z = g.sp - 1; z >= 0; z--) {
						kk[z] = t % g.ker[z];
						t /= g.ker[z];
					}
					idx = n * g.C + q * Cg + t;
					int64_t u = o;
					for (int z = g.sp - 1; z >= 0; z--) {
						oo[z] = u % g.out[z];
						u /= g.out[z];
					}
					bool in = true;
					for (int z = 0; z < g.sp; z++) {
						int64_t i = oo[z] * g.stride[z] + kk[z] * g.dil[z] - g.pad[z];
						if (i < 0 || i >= g.in[z]) {
							in = false;
							break;
						}
						idx = idx * g.in[z] + i;
					}
					if (in)
						s += get_f64(X->data, X->dtype, idx) * get_f64(W->data, W->dtype, m * Kd + k);
				}
				set_f64(Y->data, Y->dtype, (n * g.M + m) * g.outsz + o, s);
			}
		}
	return WL_OK;
}

/* ---------------------------------------------------------------- MatMulNBits */

typedef struct NBits {
	int64_t K, N, bits, block, kblocks, blob, zp_row;
} NBits;

int ref_nbits_prepare(KCall *c, Diag *d)
{
	NBits *s = arena_alloc(c->arena, sizeof *s);
	c->state = s;
	const Attr *ak = node_attr(c->node, "K"), *an = node_attr(c->node, "N"), *ab = node_attr(c->node, "block_size");
	if (!ak || !an || !ab || ak->type != AT_INT || an->type != AT_INT || ab->type != AT_INT)
		return kfail(c, d, "attributes K, N and block_size (ints) are required");
	s->K = ak->i;
	s->N = an->i;
	s->block = ab->i;
	if (attr_get_int(c, d, "bits", 4, &s->bits))
		return WL_ERR;
	if (s->bits != 2 && s->bits != 4 && s->bits != 8)
		return kfail(c, d, "bits=%lld is not supported (2, 4 or 8)", (long long)s->bits);
	if (s->block < 16 || s->block > (1 << 20) || (s->block & (s->block - 1)))
		return kfail(c, d, "block_size=%lld must be a power of 2 >= 16", (long long)s->block);
	if (s->K <= 0 || s->N <= 0 || s->K > ((int64_t)1 << 40) || s->N > ((int64_t)1 << 40))
		return kfail(c, d, "K and N must be positive");
	s->kblocks = (s->K + s->block - 1) / s->block;
	s->blob = s->block * s->bits / 8;
	s->zp_row = (s->kblocks * s->bits + 7) / 8;
	if (c->nin > 4 && c->node->inputs[4])
		return kfail(c, d, "input g_idx is not supported");
	return WL_OK;
}

int ref_nbits_infer(KCall *c, Diag *d)
{
	NBits *s = c->state;
	if (need_in(c, d, 0, DTM(DT_FLOAT) | DTM(DT_FLOAT16)) || need_in(c, d, 1, DTM(DT_UINT8)) ||
	    need_in(c, d, 2, DTM(DT_FLOAT) | DTM(DT_FLOAT16)))
		return WL_ERR;
	RTensor *A = c->in[0], *B = c->in[1], *S = c->in[2];
	RTensor *Z = c->nin > 3 ? c->in[3] : NULL, *bias = c->nin > 5 ? c->in[5] : NULL;
	char b1[96];
	if (A->ndim < 1 || A->dims[A->ndim - 1] != s->K)
		return kfail(c, d, "tensor '%s' %s: last dimension must be K=%lld", kin_name(c, 0), kdesc(A, b1),
		             (long long)s->K);
	if (rt_numel(B) != s->N * s->kblocks * s->blob)
		return kfail(c, d, "tensor '%s' %s: expected [%lld,%lld,%lld] uint8", kin_name(c, 1), kdesc(B, b1),
		             (long long)s->N, (long long)s->kblocks, (long long)s->blob);
	if (rt_numel(S) != s->N * s->kblocks)
		return kfail(c, d, "tensor '%s' %s: expected %lld scales", kin_name(c, 2), kdesc(S, b1),
		             (long long)(s->N * s->kblocks));
	if (S->dtype != A->dtype)
		return kfail(c, d, "tensor '%s': scales must have the type of A", kin_name(c, 2));
	if (Z) {
		if (Z->dtype == DT_UINT8) {
			if (rt_numel(Z) != s->N * s->zp_row)
				return kfail(c, d, "tensor '%s' %s: expected %lld packed zero points", kin_name(c, 3),
				             kdesc(Z, b1), (long long)(s->N * s->zp_row));
		} else if (Z->dtype == A->dtype) {
			if (rt_numel(Z) != s->N * s->kblocks)
				return kfail(c, d, "tensor '%s' %s: expected %lld zero points", kin_name(c, 3),
				             kdesc(Z, b1), (long long)(s->N * s->kblocks));
		} else {
			return kfail(c, d, "tensor '%s': zero points must be uint8 or the type of A", kin_name(c, 3));
		}
	}
	if (bias && (rt_numel(bias) != s->N || bias->dtype != A->dtype))
		return kfail(c, d, "tensor '%s' %s: bias must be [%lld] of the type of A", kin_name(c, 5),
		             kdesc(bias, b1), (long long)s->N);
	int64_t od[RT_MAX_DIMS];
	for (int i = 0; i < A->ndim - 1; i++)
		od[i] = A->dims[i];
	od[A->ndim - 1] = s->N;
	set_out(c->out[0], A->dtype, A->ndim, od);
	int64_t M = rt_numel(A) / s->K;
	c->scratch = gemm_scratch();
	if ((size_t)s->K * sizeof(float) + 64 > c->scratch && M <= 2)
		c->scratch = (size_t)s->K * sizeof(float) + 64;
	if (A->dtype == DT_FLOAT16)
		c->shared = ALIGN64((size_t)(M * s->K) * 4) + ALIGN64((size_t)(M * s->N) * 4) +
		            ALIGN64((size_t)(s->N * s->kblocks) * 4) * 2 + ALIGN64((size_t)s->N * 4);
	return WL_OK;
}

int ref_nbits_run(KCall *c, Diag *d)
{
	NBits *s = c->state;
	RTensor *A = c->in[0], *B = c->in[1], *S = c->in[2];
	RTensor *Z = c->nin > 3 ? c->in[3] : NULL, *bias = c->nin > 5 ? c->in[5] : NULL, *Y = c->out[0];
	int64_t M = rt_numel(A) / s->K;
	if (M == 0)
		return WL_OK;
	const ufloat *a = A->data, *sc = S->data, *zf = NULL, *bs = bias ? bias->data : NULL;
	float *y = Y->data;
	if (A->dtype == DT_FLOAT16) {
		char *p = c->shared_base;
		float *af = (float *)p; p += ALIGN64((size_t)(M * s->K) * 4);
		float *yf = (float *)p; p += ALIGN64((size_t)(M * s->N) * 4);
		float *sf = (float *)p; p += ALIGN64((size_t)(s->N * s->kblocks) * 4);
		float *zff = (float *)p; p += ALIGN64((size_t)(s->N * s->kblocks) * 4);
		float *bf = (float *)p;
		to_float(A, af);
		to_float(S, sf);
		if (Z && Z->dtype != DT_UINT8)
			to_float(Z, zff);
		if (bias)
			to_float(bias, bf);
		a = af;
		sc = sf;
		zf = (Z && Z->dtype != DT_UINT8) ? zff : NULL;
		bs = bias ? bf : NULL;
		y = yf;
	} else if (Z && Z->dtype != DT_UINT8) {
		zf = Z->data;
	}
	GemmB gb = {.kind = GB_NBITS, .q = B->data, .scales = sc,
	            .zp_packed = (Z && Z->dtype == DT_UINT8) ? Z->data : NULL, .zp_float = zf,
	            .bits = (int)s->bits, .block = (int)s->block, .kblocks = s->kblocks, .blob = s->blob,
	            .zp_row = s->zp_row};
	GemmArgs g = {.M = M, .N = s->N, .K = s->K, .batch = 1, .a = a, .lda = s->K, .b = &gb,
	              .c = y, .ldc = s->N, .bias = bs};
	gemm_run(c->pool, c->scratch_base, c->scratch_stride, &g);
	if (A->dtype == DT_FLOAT16)
		for (int64_t i = 0; i < M * s->N; i++)
			((uint16_t *)Y->data)[i] = rt_float_to_half(y[i]);
	(void)d;
	return WL_OK;
}

/* ---------------------------------------------------------------- ai.wlower MatMulNBits
 * docs/OPS.md: inputs A [..., K]; B; scales?; zero_points?; bias? [N] (no
 * g_idx slot). bits 2/4/8: B, scales and zero points as com.microsoft stores
 * them; bits 32: B is float32 [K, N], read in place. `splits` cuts the N axis
 * into several outputs (fused Q/K/V): the GEMM writes one [M, N] block into
 * the shared scratch, then each output gets its columns. `groups` = G > 1
 * (bits 32, no trans_b, no splits): B is float32 [K, N/G], the block diagonal
 * of a [K, N] weight; output columns g*N/G.. are A[..., g*K/G..] times rows
 * g*K/G.. of B, one GEMM per group over strided views. */
typedef struct WlNBits {
	NBits q;               /* bits < 32 */
	int64_t nsplit;
	const int64_t *splits;
	int64_t trans_b;       /* bits 32: B is [N, K] */
	int64_t groups;        /* bits 32: B is [K, N/groups], block diagonal */
} WlNBits;

int ref_wl_nbits_prepare(KCall *c, Diag *d)
{
	WlNBits *w = arena_alloc(c->arena, sizeof *w);
	NBits *s = &w->q;
	c->state = w;
	const Attr *ak = node_attr(c->node, "K"), *an = node_attr(c->node, "N");
	if (!ak || !an || ak->type != AT_INT || an->type != AT_INT)
		return kfail(c, d, "attributes K and N (ints) are required");
	s->K = ak->i;
	s->N = an->i;
	if (attr_get_int(c, d, "bits", 4, &s->bits))
		return WL_ERR;
	if (s->K <= 0 || s->N <= 0 || s->K > ((int64_t)1 << 40) || s->N > ((int64_t)1 << 40))
		return kfail(c, d, "K and N must be positive");
	if (attr_get_int(c, d, "trans_b", 0, &w->trans_b))
		return WL_ERR;
	if (w->trans_b != 0 && (w->trans_b != 1 || s->bits != 32))
		return kfail(c, d, "trans_b=%lld: only 0, or 1 with bits=32", (long long)w->trans_b);
	if (attr_get_int(c, d, "groups", 1, &w->groups))
		return WL_ERR;
	if (w->groups < 1)
		return kfail(c, d, "groups=%lld must be >= 1", (long long)w->groups);
	if (w->groups > 1) {
		if (s->bits != 32)
			return kfail(c, d, "groups=%lld needs bits=32 (bits is %lld)", (long long)w->groups,
			             (long long)s->bits);
		if (w->trans_b)
			return kfail(c, d, "groups=%lld does not combine with trans_b=1", (long long)w->groups);
		if (node_attr(c->node, "splits"))
			return kfail(c, d, "groups=%lld does not combine with splits", (long long)w->groups);
		if (s->K % w->groups || s->N % w->groups)
			return kfail(c, d, "K=%lld and N=%lld must be multiples of groups=%lld", (long long)s->K,
			             (long long)s->N, (long long)w->groups);
	}
	if (s->bits != 32) {
		if (s->bits != 2 && s->bits != 4 && s->bits != 8)
			return kfail(c, d, "bits=%lld is not supported (2, 4, 8 or 32)", (long long)s->bits);
		if (attr_get_int(c, d, "block_size", 0, &s->block))
			return WL_ERR;
		if (s->block < 16 || s->block > (1 << 20) || (s->block & (s->block - 1)))
			return kfail(c, d, "block_size=%lld must be a power of 2 >= 16", (long long)s->block);
		s->kblocks = (s->K + s->block - 1) / s->block;
		s->blob = s->block * s->bits / 8;
		s->zp_row = (s->kblocks * s->bits + 7) / 8;
	}
	const Attr *sp = node_attr(c->node, "splits");
	if (sp) {
		if (sp->type != AT_INTS || sp->n < 1)
			return kfail(c, d, "attribute splits must be a non-empty list of ints");
		int64_t sum = 0;
		for (int i = 0; i < sp->n; i++) {
			if (sp->ints[i] <= 0)
				return kfail(c, d, "splits entries must be positive");
			sum += sp->ints[i];
		}
		if (sum != s->N)
			return kfail(c, d, "splits sum to %lld, N is %lld", (long long)sum, (long long)s->N);
		if (c->nout != sp->n)
			return kfail(c, d, "%d outputs for %d splits", c->nout, sp->n);
		w->nsplit = sp->n;
		w->splits = sp->ints;
	} else if (c->nout != 1) {
		return kfail(c, d, "%d outputs without splits", c->nout);
	}
	return WL_OK;
}

int ref_wl_nbits_infer(KCall *c, Diag *d)
{
	WlNBits *w = c->state;
	NBits *s = &w->q;
	if (need_in(c, d, 0, DTM(DT_FLOAT)))
		return WL_ERR;
	RTensor *A = c->in[0], *B = c->in[1];
	RTensor *S = c->nin > 2 ? c->in[2] : NULL, *Z = c->nin > 3 ? c->in[3] : NULL;
	RTensor *bias = c->nin > 4 ? c->in[4] : NULL;
	char b1[96];
	if (A->ndim < 1 || A->dims[A->ndim - 1] != s->K)
		return kfail(c, d, "tensor '%s' %s: last dimension must be K=%lld", kin_name(c, 0), kdesc(A, b1),
		             (long long)s->K);
	if (s->bits == 32) {
		if (need_in(c, d, 1, DTM(DT_FLOAT)))
			return WL_ERR;
		int64_t r0 = w->trans_b ? s->N : s->K, r1 = w->trans_b ? s->K : s->N / w->groups;
		if (B->ndim != 2 || B->dims[0] != r0 || B->dims[1] != r1)
			return kfail(c, d, "tensor '%s' %s: expected float32[%lld,%lld]", kin_name(c, 1), kdesc(B, b1),
			             (long long)r0, (long long)r1);
		if (S || Z)
			return kfail(c, d, "bits=32 takes no scales or zero points");
	} else {
		if (need_in(c, d, 1, DTM(DT_UINT8)) || need_in(c, d, 2, DTM(DT_FLOAT)))
			return WL_ERR;
		if (rt_numel(B) != s->N * s->kblocks * s->blob)
			return kfail(c, d, "tensor '%s' %s: expected [%lld,%lld,%lld] uint8", kin_name(c, 1),
			             kdesc(B, b1), (long long)s->N, (long long)s->kblocks, (long long)s->blob);
		if (rt_numel(S) != s->N * s->kblocks)
			return kfail(c, d, "tensor '%s' %s: expected %lld scales", kin_name(c, 2), kdesc(S, b1),
			             (long long)(s->N * s->kblocks));
		if (Z && !((Z->dtype == DT_UINT8 && rt_numel(Z) == s->N * s->zp_row) ||
		           (Z->dtype == DT_FLOAT && rt_numel(Z) == s->N * s->kblocks)))
			return kfail(c, d, "tensor '%s' %s: expected %lld packed uint8 or %lld float zero points",
			             kin_name(c, 3), kdesc(Z, b1), (long long)(s->N * s->zp_row),
			             (long long)(s->N * s->kblocks));
	}
	if (bias && (rt_numel(bias) != s->N || bias->dtype != DT_FLOAT))
		return kfail(c, d, "tensor '%s' %s: bias must be float32[%lld]", kin_name(c, 4), kdesc(bias, b1),
		             (long long)s->N);
	int64_t od[RT_MAX_DIMS];
	for (int i = 0; i < A->ndim - 1; i++)
		od[i] = A->dims[i];
	int64_t M = rt_numel(A) / s->K;
	if (w->nsplit) {
		for (int i = 0; i < w->nsplit; i++) {
			od[A->ndim - 1] = w->splits[i];
			if (c->out[i])
				set_out(c->out[i], DT_FLOAT, A->ndim, od);
		}
		c->shared = ALIGN64((size_t)(M * s->N) * 4);
	} else {
		od[A->ndim - 1] = s->N;
		set_out(c->out[0], DT_FLOAT, A->ndim, od);
	}
	c->scratch = gemm_scratch();
	if ((size_t)s->K * sizeof(float) + 64 > c->scratch && M <= 2)
		c->scratch = (size_t)s->K * sizeof(float) + 64;
	return WL_OK;
}

int ref_wl_nbits_run(KCall *c, Diag *d)
{
	(void)d;
	WlNBits *w = c->state;
	NBits *s = &w->q;
	RTensor *A = c->in[0], *B = c->in[1];
	RTensor *S = c->nin > 2 ? c->in[2] : NULL, *Z = c->nin > 3 ? c->in[3] : NULL;
	RTensor *bias = c->nin > 4 ? c->in[4] : NULL;
	int64_t M = rt_numel(A) / s->K;
	if (M == 0)
		return WL_OK;
	float *y = w->nsplit ? (float *)c->shared_base : c->out[0]->data;
	GemmB gb;
	if (w->groups > 1) {
		/* group g: y[:, g*Ng..] = A[:, g*Kg..] . B[g*Kg.., :] (+ bias[g*Ng..]) */
		int64_t G = w->groups, Kg = s->K / G, Ng = s->N / G;
		const ufloat *a = A->data, *b = B->data, *bs = bias ? bias->data : NULL;
		for (int64_t g = 0; g < G; g++) {
			GemmB gg = {.kind = GB_ROWS, .b = b + g * Kg * Ng, .ldb = Ng};
			GemmArgs ga = {.M = M, .N = Ng, .K = Kg, .batch = 1, .a = a + g * Kg, .lda = s->K,
			               .b = &gg, .c = y + g * Ng, .ldc = s->N, .bias = bs ? bs + g * Ng : NULL};
			gemm_run(c->pool, c->scratch_base, c->scratch_stride, &ga);
		}
		return WL_OK;
	}
	if (s->bits == 32) {
		gb = w->trans_b ? (GemmB){.kind = GB_COLS, .b = B->data, .ldb = s->K}
		                : (GemmB){.kind = GB_ROWS, .b = B->data, .ldb = s->N};
	} else {
		gb = (GemmB){.kind = GB_NBITS, .q = B->data, .scales = S->data,
		             .zp_packed = (Z && Z->dtype == DT_UINT8) ? Z->data : NULL,
		             .zp_float = (Z && Z->dtype != DT_UINT8) ? Z->data : NULL,
		             .bits = (int)s->bits, .block = (int)s->block, .kblocks = s->kblocks,
		             .blob = s->blob, .zp_row = s->zp_row};
	}
	GemmArgs g = {.M = M, .N = s->N, .K = s->K, .batch = 1, .a = A->data, .lda = s->K, .b = &gb,
	              .c = y, .ldc = s->N, .bias = bias ? bias->data : NULL};
	gemm_run(c->pool, c->scratch_base, c->scratch_stride, &g);
	int64_t off = 0;
	for (int i = 0; i < w->nsplit; i++) {
		int64_t n = w->splits[i];
		if (c->out[i]) {
			float *o = c->out[i]->data;
			for (int64_t m = 0; m < M; m++)
				memcpy(o + m * n, y + m * s->N + off, (size_t)n * 4);
		}
		off += n;
	}
	return WL_OK;
}
