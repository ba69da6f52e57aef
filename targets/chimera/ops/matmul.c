/* matmul.c — MatMulNBits → linalg::matMulNBits (ccl/linalg.hpp).
 *
 *   bits 2/4/8  weight blocks as ONNX Runtime packs them, copied; per block
 *               an int32 scale (scale·2^E of the row) and a zero point
 *               (default 2^(bits-1)); per row {bias, qa + E} (util.c)
 *   bits 32     float weights [K,N] (or [N,K] with trans_b) as int32 rows
 *               w·2^E, per row {bias, qa + E}
 *   splits      one output per split (fused QKV), each with its own format
 *   groups      (block-diagonal float weight) not supported: a one-line error
 * MACs M·K·N; ALU ops M·N (bias, requantization).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops.h"

typedef struct WCtx { const Tensor *t; int64_t K, N; int trans; } WCtx;

static double w32_get(const void *p, int64_t n, int64_t k)
{
	const WCtx *w = p;
	return tensor_get_f64(w->t, w->trans ? n * w->K + k : k * w->N + n);
}

static int mm_dims(const Node *n, int64_t *M, int64_t *K, int64_t *N, Diag *d)
{
	Value *a = nin(n, 0);
	if (ck_need_shape(n, a, d))
		return WL_ERR;
	*K = attr_int(n, "K", -1);
	*N = attr_int(n, "N", -1);
	/* groups (a block-diagonal float weight [K, N/groups]): host and reference executor only */
	if (attr_int(n, "groups", 1) != 1)
		return KFAIL(n, "MatMulNBits groups=%lld is not supported on the qc targets (host only)",
		             (long long)attr_int(n, "groups", 1));
	int64_t ne = numel_of(a);
	if (*K <= 0 || *N <= 0 || rank_of(a) < 1 || dim_of(a, rank_of(a) - 1) != *K)
		return KFAIL(n, "tensor '%s': last dim must equal K = %lld", a->name, (long long)*K);
	*M = ne / *K;
	return WL_OK;
}

static int check_accumulator(const Node *n, int64_t K, Diag *d)
{
	if (ck_weight_bits(K) < 16)
		return KFAIL(n, "K = %lld too large for the int64 accumulator", (long long)K);
	return WL_OK;
}

/* bits 32: blobs weight [N][K] int32, bias [N] {int64, int64} */
static int pack_float(const Node *n, CclKernelInfo *ki, int64_t K, int64_t N, int qa, const double *bias, Diag *d)
{
	const Tensor *t = nin(n, 1)->init;
	if (tnumel(t) != K * N)
		return KFAIL(n, "tensor '%s': expected %lld weights", nin(n, 1)->name, (long long)(K * N));
	if (check_accumulator(n, K, d))
		return WL_ERR;
	CclBlob *w = ck_add_blob(ki, "weight", (size_t)(N * K) * 4);
	CclBlob *c = ck_add_blob(ki, "bias", (size_t)N * 16);
	WCtx wc = {t, K, N, (int)attr_int(n, "trans_b", 0)};
	ck_pack_rows((int32_t *)w->data, N, K, w32_get, &wc, qa, bias, (int64_t *)c->data);
	return WL_OK;
}

/* Zero point of row r, block b (kb blocks a row) of packed zero points zt
 * (NULL: the default 2^(bits-1)). */
static int zero_point(const Tensor *zt, int64_t r, int64_t b, int64_t kb, int bits)
{
	if (!zt)
		return 1 << (bits - 1);
	int64_t zb = (kb * bits + 7) / 8, bit = b * bits;
	return (((const uint8_t *)zt->data)[r * zb + bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
}

/* bits 2/4/8: blobs weight (as given), scales [N][kb] int32, zero_points
 * [N][kb] uint8, bias [N] {int64, int64} */
static int pack_nbits(const Node *n, CclKernelInfo *ki, int64_t K, int64_t N, int bits, int qa, const double *bias,
                      Diag *d)
{
	int64_t bs = attr_int(n, "block_size", 32);
	if (bs < 16 || (bs & (bs - 1)))
		return KFAIL(n, "block_size %lld must be a power of 2 >= 16", (long long)bs);
	int64_t kb = (K + bs - 1) / bs, rowb = kb * bs * bits / 8;
	const Tensor *wt = nin(n, 1)->init;
	if (wt->nbytes != (size_t)(N * rowb) || wt->dtype != DT_UINT8)
		return KFAIL(n, "tensor '%s': expected uint8 [%lld, %lld, %lld]", nin(n, 1)->name, (long long)N,
		             (long long)kb, (long long)(bs * bits / 8));
	if (ck_need_const(n, 2, d))
		return WL_ERR;
	const Tensor *st = nin(n, 2)->init;
	if (tnumel(st) != N * kb)
		return KFAIL(n, "tensor '%s': expected %lld scales", nin(n, 2)->name, (long long)(N * kb));
	const Tensor *zt = NULL;
	if (nin(n, 3)) {
		if (ck_need_const(n, 3, d))
			return WL_ERR;
		zt = nin(n, 3)->init;
		if (zt->dtype != DT_UINT8 || tnumel(zt) != N * ((kb * bits + 7) / 8))
			return KFAIL(n, "tensor '%s': zero points must be packed uint8 [N, %lld]", nin(n, 3)->name,
			             (long long)((kb * bits + 7) / 8));
	}
	if (check_accumulator(n, K, d))
		return WL_ERR;
	CclBlob *w = ck_add_blob(ki, "weight", (size_t)(N * rowb));
	memcpy(w->data, wt->data, (size_t)(N * rowb));
	CclBlob *sc = ck_add_blob(ki, "scales", (size_t)(N * kb) * 4);
	CclBlob *zp = ck_add_blob(ki, "zero_points", (size_t)(N * kb));
	CclBlob *c = ck_add_blob(ki, "bias", (size_t)N * 16);
	int32_t *scd = (int32_t *)sc->data;
	int64_t *cd = (int64_t *)c->data;
	int64_t bpb = bs * bits / 8;
	for (int64_t r = 0; r < N; r++) {
		/* exponent: max over blocks of max|q − zp| · |scale| · 2^E < 2^19 */
		double m = 0;
		for (int64_t b = 0; b < kb; b++) {
			int z = zero_point(zt, r, b, kb, bits), mq = 0;
			const uint8_t *blk = (const uint8_t *)wt->data + r * rowb + b * bpb;
			for (int64_t k = 0; k < bs && b * bs + k < K; k++) {
				int q = (blk[(k * bits) / 8] >> ((k * bits) % 8)) & ((1 << bits) - 1);
				mq = abs(q - z) > mq ? abs(q - z) : mq;
			}
			m = fmax(m, mq * fabs(tensor_get_f64(st, r * kb + b)));
		}
		int e = ck_row_scale(m, K, qa, bias ? &bias[r] : NULL, &cd[2 * r]);
		for (int64_t b = 0; b < kb; b++) {
			scd[r * kb + b] = (int32_t)llround(tensor_get_f64(st, r * kb + b) * ldexp(1.0, e));
			zp->data[r * kb + b] = (uint8_t)zero_point(zt, r, b, kb, bits);
		}
	}
	return WL_OK;
}

int ck_matmul_nbits_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	int64_t M, K, N;
	if (mm_dims(n, &M, &K, &N, d))
		return WL_ERR;
	int bits = (int)attr_int(n, "bits", 4);
	Value *a = nin(n, 0);
	int fa;
	if (ck_fmt(n, a, d, &fa))
		return WL_ERR;
	int qa = ck_work_q(a);
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
		if (ck_fmt(n, nout(n, j), d, &f))
			return WL_ERR;
	}
	Value *bv = nin(n, 4);
	double *bias = NULL;
	if (bv) {
		if (ck_need_const(n, 4, d))
			return WL_ERR;
		if (tnumel(bv->init) != N)
			return KFAIL(n, "tensor '%s': bias must have N = %lld elements", bv->name, (long long)N);
		bias = ck_calloc((size_t)N, sizeof *bias);
		for (int64_t i = 0; i < N; i++)
			bias[i] = tensor_get_f64(bv->init, i);
	}
	ki->macs = (uint64_t)M * K * N;
	ki->alu_ops = (uint64_t)M * N;
	int rc;
	if (ck_need_const(n, 1, d))
		rc = WL_ERR;
	else if (bits == 32)
		rc = pack_float(n, ki, K, N, qa, bias, d);
	else if (bits == 2 || bits == 4 || bits == 8)
		rc = pack_nbits(n, ki, K, N, bits, qa, bias, d);
	else
		rc = KFAIL(n, "bits %d not supported (2, 4, 8, 32)", bits);
	free(bias);
	return rc;
}

int ck_matmul_nbits_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	int64_t M, K, N;
	if (mm_dims(n, &M, &K, &N, d))
		return WL_ERR;
	int bits = (int)attr_int(n, "bits", 4);
	char x[48];
	if (ck_fq(n, nin(n, 0), d, x))
		return WL_ERR;
	fprintf(f, "%s<%lld, %lld, %lld, %d, %lld, %s", op->cpp, (long long)M, (long long)K, (long long)N, bits,
	        (long long)(bits == 32 ? 0 : attr_int(n, "block_size", 32)), x);
	const int64_t *sp;
	int ns = attr_ints(n, "splits", &sp);
	for (int j = 0; j < n->noutputs; j++) {
		char o[24];
		if (ck_fo(n, nout(n, j), d, o))
			return WL_ERR;
		fprintf(f, ", %lld, %s", (long long)(ns > 0 ? sp[j] : N), o);
	}
	if (bits == 32)
		fprintf(f, ">(c, %s, %s, nullptr, nullptr, %s", a->in[0], a->blob[0], a->blob[1]);
	else
		fprintf(f, ">(c, %s, %s, %s, %s, %s", a->in[0], a->blob[0], a->blob[1], a->blob[2], a->blob[3]);
	for (int j = 0; j < n->noutputs; j++)
		fprintf(f, ", %s", a->out[j]);
	fprintf(f, ");\n");
	return WL_OK;
}

/* ---------------------------------------------------------------- QMatMul → linalg::qMatMul
 * int8 × int8 MACs with int32 accumulation, requantized per column to the
 * output's fixed-point format (float out) or to int8 (y_scale): blobs
 *   weight   int8 [N][K] (the ONNX [K, N] weight transposed)
 *   requant  int64 [N][4] = {−zx·Σ_k w[k][n], mult_n, shift_n, zy}
 * with r_n = x_scale·w_scale[n]·2^QY (float out, QY the output's work format)
 * or x_scale·w_scale[n] / y_scale (int8 out) written mult_n·2^−shift_n,
 * mult_n in [2^30, 2^31) (qmm_multiplier). MACs M·K·N; ALU ops M·N.
 * Scales and zero points must be constants (they are in QDQ graphs). */
void ck_qmm_multiplier(double r, int64_t *mult, int64_t *shift)
{
	if (!(r > 0) || !isfinite(r)) {
		*mult = 0;
		*shift = 0;
		return;
	}
	int e = ilogb(r);
	int64_t s = 30 - e, m = llround(ldexp(r, (int)s));
	if (m >= (int64_t)1 << 31) {
		m >>= 1;
		s--;
	}
	*mult = m;
	*shift = s;
}

static int qmm_dims(const Node *n, int64_t *M, int64_t *K, int64_t *N, Diag *d)
{
	Value *x = nin(n, 0), *w = nin(n, 3);
	if (n->ninputs < 5 || !x || !w || !nin(n, 1) || !nin(n, 2) || !nin(n, 4) || !nout(n, 0))
		return KFAIL(n, "needs xq, x_scale, x_zero_point, wq, w_scale and an output");
	if (ck_need_shape(n, x, d) || ck_need_const(n, 3, d))
		return WL_ERR;
	if (x->type.elem != DT_INT8 || w->init->dtype != DT_INT8 || w->init->ndim != 2)
		return KFAIL(n, "tensor '%s' must be int8 and '%s' a constant int8 [K, N]", x->name, w->name);
	*K = w->init->dims[0];
	*N = w->init->dims[1];
	if (rank_of(x) < 1 || dim_of(x, rank_of(x) - 1) != *K)
		return KFAIL(n, "tensor '%s': last dim must equal K = %lld", x->name, (long long)*K);
	if (*K > 65793)
		return KFAIL(n, "K = %lld exceeds 65793 (int32 accumulation)", (long long)*K);
	*M = numel_of(x) / *K;
	return WL_OK;
}

static int qmm_scalar(const Node *n, int i, bool want_float, double *out, Diag *d)
{
	if (ck_need_const(n, i, d))
		return WL_ERR;
	const Tensor *t = nin(n, i)->init;
	if (tnumel(t) != 1 || t->dtype != (want_float ? DT_FLOAT : DT_INT8))
		return KFAIL(n, "tensor '%s': expected a %s scalar", nin(n, i)->name, want_float ? "float" : "int8");
	*out = tensor_get_f64(t, 0);
	if (want_float && (!(*out > 0) || !isfinite(*out)))
		return KFAIL(n, "tensor '%s' is %g: a scale must be positive and finite", nin(n, i)->name, *out);
	return WL_OK;
}

int ck_qmatmul_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	int64_t M, K, N;
	if (qmm_dims(n, &M, &K, &N, d))
		return WL_ERR;
	bool qout = nin(n, 5) != NULL;
	double sx, zx, sy = 1, zy = 0;
	if (qmm_scalar(n, 1, true, &sx, d) || qmm_scalar(n, 2, false, &zx, d))
		return WL_ERR;
	if (qout && (qmm_scalar(n, 5, true, &sy, d) || !nin(n, 6) || qmm_scalar(n, 6, false, &zy, d)))
		return WL_ERR;
	if (ck_need_const(n, 4, d))
		return WL_ERR;
	const Tensor *sw = nin(n, 4)->init;
	int64_t ns = tnumel(sw);
	if (sw->dtype != DT_FLOAT || (ns != 1 && ns != N))
		return KFAIL(n, "tensor '%s': expected 1 or N = %lld float scales", nin(n, 4)->name, (long long)N);
	int fy;
	if (ck_fmt(n, nout(n, 0), d, &fy))
		return WL_ERR;
	if (qout != (fy == -5))
		return KFAIL(n, "tensor '%s': %s output expected", nout(n, 0)->name, qout ? "an int8" : "a float");
	int qy = qout ? 0 : ck_work_q(nout(n, 0));
	const int8_t *w = nin(n, 3)->init->data;
	CclBlob *wb = ck_add_blob(ki, "weight", (size_t)(N * K));
	CclBlob *rb = ck_add_blob(ki, "requant", (size_t)N * 32);
	int8_t *wt = (int8_t *)wb->data;
	int64_t *rq = (int64_t *)rb->data;
	for (int64_t j = 0; j < N; j++) {
		int64_t sum = 0;
		for (int64_t k = 0; k < K; k++) {
			wt[j * K + k] = w[k * N + j];
			sum += w[k * N + j];
		}
		double s = tensor_get_f64(sw, ns == 1 ? 0 : j);
		if (!(s > 0) || !isfinite(s))
			return KFAIL(n, "tensor '%s'[%lld] is %g: a scale must be positive and finite", nin(n, 4)->name,
			             (long long)j, s);
		double r = qout ? sx * s / sy : ldexp(sx * s, qy);
		rq[4 * j] = -(int64_t)zx * sum;
		ck_qmm_multiplier(r, &rq[4 * j + 1], &rq[4 * j + 2]);
		rq[4 * j + 3] = (int64_t)zy;
	}
	ki->macs = (uint64_t)M * K * N;
	ki->alu_ops = (uint64_t)M * N;
	return WL_OK;
}

int ck_qmatmul_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	int64_t M, K, N;
	if (qmm_dims(n, &M, &K, &N, d))
		return WL_ERR;
	char y[24];
	if (ck_fo(n, nout(n, 0), d, y))
		return WL_ERR;
	int qy = nin(n, 5) ? 0 : ck_work_q(nout(n, 0));
	fprintf(f, "%s<%lld, %lld, %lld, %s, %d>(c, %s, %s, %s, %s);\n", op->cpp, (long long)M, (long long)K, (long long)N,
	        y, qy, a->in[0], a->blob[0], a->blob[1], a->out[0]);
	return WL_OK;
}
