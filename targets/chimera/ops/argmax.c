/* argmax.c — GreedyArgMax over the last axis → ccl::argmax (ccl/nn.hpp),
 * int32 ids out. ALU ops rows·V.
 */
#include "ops.h"

static int am_dims(const Node *n, int64_t *R, int64_t *V, Diag *d)
{
	Value *x = nin(n, 0);
	if (ck_need_shape(n, x, d))
		return WL_ERR;
	*V = dim_of(x, rank_of(x) - 1);
	if (*V < 1)
		return KFAIL(n, "tensor '%s': empty last axis", x->name);
	*R = numel_of(x) / *V;
	return WL_OK;
}

int ck_argmax_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	int64_t R, V;
	if (am_dims(n, &R, &V, d))
		return WL_ERR;
	ki->alu_ops = (uint64_t)R * V;
	return WL_OK;
}

int ck_argmax_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	int64_t R, V;
	char x[24];
	if (am_dims(n, &R, &V, d) || ck_fo(n, nin(n, 0), d, x))
		return WL_ERR;
	fprintf(f, "%s<%lldLL, %lldLL, %s>(c, %s, %s);\n", op->cpp, (long long)R, (long long)V, x, a->in[0], a->out[0]);
	return WL_OK;
}
