/* quant.c — DequantizeLinear of an int8 / uint8 activation with a constant
 * per-tensor scale and zero point → nn::dequantize (ccl/nn.hpp): the int8
 * KV cache of the vendor's single-token Qwen2 graph. ALU ops: elements.
 *
 * y = (q - zp) · scale, stored in y's format FY (fixed point, fp16 or f32).
 * The scale becomes an integer multiplier M = round(scale · 2^Q) with
 * Q = max(30 - floor(log2 scale), FY) (M < 2^31 unless Q = FY), so that
 * (q - zp) · M is y at Q exactly up to M's rounding, then stored with the
 * usual rounding (half up) and saturation of stq (ccl/fixed.hpp).
 * Not supported (errors naming node and tensor): a per-axis or non-constant
 * scale or zero point, blocked quantization, int32 input, a constant input
 * (folded before), a scale that is not positive and finite or so small that
 * M is 0. QuantizeLinear has no CCL kernel.
 */
#include <math.h>
#include "ops.h"

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
		return KFAIL(n, "constant input (should have been folded)");
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
