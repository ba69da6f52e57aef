/* quant.c — the int8 / uint8 edges of QDQ graphs (ccl/nn.hpp, API.md):
 *   QuantizeLinear   fixed point (or FP16/F32) → int8: ccl::quantize
 *   DequantizeLinear int8 / uint8 → the output's format: nn::dequantize
 * A QDQ-wrapped MatMul is one QMatMul (matmul.c); these are the edges around
 * it, and the dequantized int8 KV cache of the vendor's single-token Qwen2
 * graph. ALU ops: one per element.
 *
 * QuantizeLinear: per-tensor constant scale and int8 zero point (absent: 0)
 * only; the blob "requant" is int64 [3] = {mult, shift, zp} with
 * mult·2^−shift = 2^−QX / scale (ck_qmm_multiplier).
 *
 * DequantizeLinear: y = (q - zp) · scale, stored in y's format FY (fixed
 * point, fp16 or f32). The scale becomes an integer multiplier
 * M = round(scale · 2^Q) with Q = max(30 - floor(log2 scale), FY) (M < 2^31
 * unless Q = FY), so that (q - zp) · M is y at Q exactly up to M's rounding,
 * then stored with the usual rounding (half up) and saturation of stq
 * (ccl/fixed.hpp).
 * Not supported (errors naming node and tensor): a per-axis or non-constant
 * scale or zero point, blocked quantization, int32 / uint8 QuantizeLinear
 * output, int32 DequantizeLinear input, a constant input (QDQ weights belong
 * to a QMatMul; others are folded before), a scale that is not positive and
 * finite or so small that M is 0.
 */
#include <math.h>
#include "ops.h"

/* ------------------------------------------------------- QuantizeLinear */

/* scale and zero point of a per-tensor QuantizeLinear; q: its int8 output */
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

int ck_quantize_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	Value *x = nin(n, 0), *y = nout(n, 0);
	if (!x || !y || ck_need_shape(n, x, d))
		return WL_ERR;
	if (x->init)
		return KFAIL(n, "constant input (QDQ weights belong to a QMatMul)");
	double s = 1;
	int64_t z = 0;
	if (qparams(n, y, &s, &z, d))
		return WL_ERR;
	int f;
	if (ck_fmt(n, x, d, &f))
		return WL_ERR;
	CclBlob *b = ck_add_blob(ki, "requant", 24);
	int64_t *r = (int64_t *)b->data;
	ck_qmm_multiplier(ldexp(1.0, -ck_work_q(x)) / s, &r[0], &r[1]);
	r[2] = z;
	ki->alu_ops = (uint64_t)numel_of(x);
	return WL_OK;
}

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

/* ----------------------------------------------------- DequantizeLinear */

typedef struct Dq {
	int sgn;                  /* 1: int8, 0: uint8 */
	int64_t zp, M;
	int Q, FY;
} Dq;

static int dq_read(const Node *n, Dq *q, Diag *d)
{
	Value *x = nin(n, 0), *s = nin(n, 1), *z = nin(n, 2), *y = nout(n, 0);
	if (!x || !s || !y || ck_need_shape(n, x, d))
		return WL_ERR;
	if (x->init)
		return KFAIL(n, "constant input (QDQ weights belong to a QMatMul; others are folded)");
	if (x->type.elem != DT_INT8 && x->type.elem != DT_UINT8)
		return KFAIL(n, "tensor '%s': only int8 and uint8 inputs are supported", x->name);
	if (attr_int(n, "block_size", 0) != 0)
		return KFAIL(n, "blocked quantization is not supported");
	if (!s->init || s->init->dtype != DT_FLOAT || tensor_numel(s->init) != 1)
		return KFAIL(n, "tensor '%s': the scale must be one constant float32 (per tensor)", s->name);
	if (z && (!z->init || z->init->dtype != x->type.elem || tensor_numel(z->init) != 1))
		return KFAIL(n, "tensor '%s': the zero point must be one constant of the input's type", z->name);
	double sc = tensor_get_f64(s->init, 0);
	if (!(sc > 0) || !isfinite(sc))
		return KFAIL(n, "tensor '%s': scale %g is not positive and finite", s->name, sc);
	q->sgn = x->type.elem == DT_INT8;
	q->zp = z ? tensor_get_i64(z->init, 0) : 0;
	if (ck_fmt(n, y, d, &q->FY))
		return WL_ERR;
	int fy = q->FY >= 0 ? q->FY : 0;
	q->Q = 30 - (int)floor(log2(sc));
	if (q->Q < fy)
		q->Q = fy;
	if (q->Q > 62)
		return KFAIL(n, "tensor '%s': scale %g is too small for a fixed-point multiplier", s->name, sc);
	q->M = llround(ldexp(sc, q->Q));
	if (q->M < 1)
		return KFAIL(n, "tensor '%s': scale %g is too small for a fixed-point multiplier", s->name, sc);
	return WL_OK;
}

int ck_dequant_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	Dq q;
	if (dq_read(n, &q, d))
		return WL_ERR;
	ki->alu_ops = (uint64_t)numel_of(nin(n, 0));
	return WL_OK;
}

/* OP<elements, int8?, zp, M, Q, FY>(c, x, y) */
int ck_dequant_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	Dq q;
	char y[24];
	if (dq_read(n, &q, d) || ck_fo(n, nout(n, 0), d, y))
		return WL_ERR;
	fprintf(f, "%s<%lldLL, %d, %lldLL, %lldLL, %d, %s>(c, %s, %s);\n", op->cpp, (long long)numel_of(nin(n, 0)), q.sgn,
	        (long long)q.zp, (long long)q.M, q.Q, y, a->in[0], a->out[0]);
	return WL_OK;
}
