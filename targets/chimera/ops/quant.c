/* quant.c — the int8 edges of QDQ graphs (ccl/nn.hpp, API.md):
 *   QuantizeLinear   fixed point (or FP16/F32) → int8: ccl::quantize
 *   DequantizeLinear int8 → the output's format:   ccl::dequantize
 * Per-tensor constant scale and int8 zero point (absent: 0) only; the blob
 * "requant" is int64 [3] = {mult, shift, zp} with mult·2^−shift the real
 * factor (2^−QX / scale, scale · 2^QY; ck_qmm_multiplier). A QDQ-wrapped
 * MatMul is one QMatMul (matmul.c); these are the edges around it.
 * ALU ops: one per element.
 */
#include <math.h>
#include "ops.h"

/* scale and zero point of a per-tensor Q/DQ node; q: the int8 side */
static int qparams(const Node *n, const Value *q, double *s, int64_t *z, Diag *d)
{
	if (n->ninputs < 2 || !nin(n, 1) || ck_need_const(n, 1, d))
		return WL_ERR;
	if (q->type.elem != DT_INT8)
		return KFAIL(n, "tensor '%s': only int8 is supported (uint8 is not)", q->name);
	const Tensor *st = nin(n, 1)->init;
	if (tnumel(st) != 1 || st->dtype != DT_FLOAT)
		return KFAIL(n, "tensor '%s': only a per-tensor float scale is supported", nin(n, 1)->name);
	*s = tensor_get_f64(st, 0);
	if (!(*s > 0) || !isfinite(*s))
		return KFAIL(n, "tensor '%s' is %g: a scale must be positive and finite", nin(n, 1)->name, *s);
	*z = 0;
	if (nin(n, 2)) {
		if (ck_need_const(n, 2, d))
			return WL_ERR;
		if (tnumel(nin(n, 2)->init) != 1)
			return KFAIL(n, "tensor '%s': only a per-tensor zero point is supported", nin(n, 2)->name);
		*z = tensor_get_i64(nin(n, 2)->init, 0);
	}
	return WL_OK;
}

static int pack(const Node *n, CclKernelInfo *ki, bool quant, Diag *d)
{
	Value *x = nin(n, 0), *y = nout(n, 0);
	if (!x || !y || ck_need_shape(n, x, d))
		return WL_ERR;
	if (x->init)
		return KFAIL(n, "constant input (QDQ weights belong to a QMatMul)");
	double s = 1;
	int64_t z = 0;
	if (qparams(n, quant ? y : x, &s, &z, d))
		return WL_ERR;
	int f;
	if (ck_fmt(n, quant ? x : y, d, &f))
		return WL_ERR;
	int q = ck_work_q(quant ? x : y);
	CclBlob *b = ck_add_blob(ki, "requant", 24);
	int64_t *r = (int64_t *)b->data;
	ck_qmm_multiplier(quant ? ldexp(1.0, -q) / s : ldexp(s, q), &r[0], &r[1]);
	r[2] = z;
	ki->alu_ops = (uint64_t)numel_of(x);
	return WL_OK;
}

int ck_quantize_info(const Node *n, CclKernelInfo *ki, Diag *d) { return pack(n, ki, true, d); }
int ck_dequantize_info(const Node *n, CclKernelInfo *ki, Diag *d) { return pack(n, ki, false, d); }

/* ccl::quantize<elements, FX, QX>(c, x, rq, y) */
int ck_quantize_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	char x[48];
	if (ck_fq(n, nin(n, 0), d, x))
		return WL_ERR;
	fprintf(f, "%s<%lldLL, %s>(c, %s, %s, %s);\n", op->cpp, (long long)numel_of(nin(n, 0)), x, a->in[0], a->blob[0],
	        a->out[0]);
	return WL_OK;
}

/* ccl::dequantize<elements, FY, QY>(c, xq, rq, y) */
int ck_dequantize_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	char y[24];
	if (ck_fo(n, nout(n, 0), d, y))
		return WL_ERR;
	fprintf(f, "%s<%lldLL, %s, %d>(c, %s, %s, %s);\n", op->cpp, (long long)numel_of(nin(n, 0)), y,
	        ck_work_q(nout(n, 0)), a->in[0], a->blob[0], a->out[0]);
	return WL_OK;
}
