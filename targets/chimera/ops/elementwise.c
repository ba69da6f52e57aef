/* elementwise.c — one output element per input element (ccl/nn.hpp):
 *   Gelu (ai.onnx and ai.wlower; erf or tanh form) → nn::gelu,
 *   SiLU → nn::silu, Cast/Identity/Reshape (float to float) → ccl::copy,
 *   Transpose (float; at most 4 dims after merging) → ccl::transpose,
 *   Add, Mul with broadcasting (at most 4 dims after merging) → nn::add, nn::mul;
 *   a constant operand is packed as a blob "table" in its own format.
 * ALU ops: elements·4 (gelu, silu), output elements (copy, transpose, add, mul).
 */
#include <string.h>
#include "ops.h"

/* ---------------------------------------------------------------- unary */

static bool is_float(const Value *v)
{
	return v->type.elem == DT_FLOAT || v->type.elem == DT_FLOAT16;
}

static bool is_gelu(const Node *n) { return n->op == OP_Gelu || n->op == OP_WlGelu; }
static bool is_copy(const Node *n) { return n->op == OP_Cast || n->op == OP_Identity || n->op == OP_Reshape; }

int ck_unary_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	Value *x = nin(n, 0);
	if (ck_need_shape(n, x, d))
		return WL_ERR;
	if (x->init)
		return KFAIL(n, "constant input (should have been folded)");
	if (is_gelu(n)) {
		const char *ap = attr_string(n, "approximate", "none");
		if (strcmp(ap, "none") && strcmp(ap, "tanh"))
			return KFAIL(n, "approximate '%s' not supported", ap);
	}
	if (is_copy(n) && (!is_float(x) || !is_float(nout(n, 0))))
		return KFAIL(n, "only float-to-float casts are supported");
	ki->alu_ops = (uint64_t)numel_of(x) * (is_copy(n) ? 1 : 4);
	return WL_OK;
}

/* OP<elements, X, Y[, tanh]>(c, x, y): X is "FX, QX", for a copy "FX" */
int ck_unary_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	char x[48], y[24];
	if ((is_copy(n) ? ck_fo : ck_fq)(n, nin(n, 0), d, x) || ck_fo(n, nout(n, 0), d, y))
		return WL_ERR;
	fprintf(f, "%s<%lldLL, %s, %s", op->cpp, (long long)numel_of(nin(n, 0)), x, y);
	if (is_gelu(n))
		fprintf(f, ", %d", strcmp(attr_string(n, "approximate", "none"), "tanh") == 0);
	fprintf(f, ">(c, %s, %s);\n", a->in[0], a->out[0]);
	return WL_OK;
}

/* ---------------------------------------------------------------- Transpose */

static const char *model_of(const Node *n)
{
	return n->graph && n->graph->mod && n->graph->mod->path ? n->graph->mod->path : "module";
}

int ck_transpose_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	Value *x = nin(n, 0), *y = nout(n, 0);
	if (ck_need_shape(n, x, d) || ck_need_shape(n, y, d))
		return WL_ERR;
	if (x->init)
		return KFAIL(n, "constant input (should have been folded)");
	if (!is_float(x) || !is_float(y))
		return KFAIL(n, "tensor '%s': only float tensors are supported", x->name);
	TransposePlan tp;
	if (target_transpose_plan(model_of(n), n, &tp, d))
		return WL_ERR;
	ki->alu_ops = (uint64_t)numel_of(y);
	return WL_OK;
}

/* ccl::transpose<FX, FY, O0..O3, S0..S3>(c, x, y) */
int ck_transpose_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	char x[24], y[24];
	TransposePlan tp;
	if (ck_fo(n, nin(n, 0), d, x) || ck_fo(n, nout(n, 0), d, y) || target_transpose_plan(model_of(n), n, &tp, d))
		return WL_ERR;
	fprintf(f, "%s<%s, %s", op->cpp, x, y);
	for (int i = 0; i < 8; i++)
		fprintf(f, ", %lldLL", (long long)(i < 4 ? tp.o[i] : tp.s[i - 4]));
	fprintf(f, ">(c, %s, %s);\n", a->in[0], a->out[0]);
	return WL_OK;
}

/* ---------------------------------------------------------------- binary (broadcast) */

typedef struct Bcast { int64_t O[4], SA[4], SB[4]; } Bcast;

static int bcast(const Node *n, Bcast *bc, Diag *d)
{
	Value *a = nin(n, 0), *b = nin(n, 1), *y = nout(n, 0);
	if (ck_need_shape(n, a, d) || ck_need_shape(n, b, d) || ck_need_shape(n, y, d))
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

int ck_binary_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	Bcast bc;
	if (bcast(n, &bc, d))
		return WL_ERR;
	Value *a = nin(n, 0), *b = nin(n, 1);
	if (a->init && b->init)
		return KFAIL(n, "both operands constant (should have been folded)");
	for (int k = 0; k < 2; k++) {
		Value *v = k ? b : a;
		if (!is_float(v))
			return KFAIL(n, "tensor '%s': only float operands are supported", v->name);
		if (v->init)
			ck_pack_plain(ki, "table", v->init, ck_const_fbits(ck_maxabs(v->init)));
	}
	ki->alu_ops = (uint64_t)(bc.O[0] * bc.O[1] * bc.O[2] * bc.O[3]);
	return WL_OK;
}

int ck_binary_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	Bcast bc;
	if (bcast(n, &bc, d))
		return WL_ERR;
	char t[2][48], y[24];
	const char *arg[2];
	for (int k = 0; k < 2; k++) {
		Value *v = nin(n, k);
		if (v->init) {
			int fc = ck_const_fbits(ck_maxabs(v->init));
			snprintf(t[k], sizeof t[k], "%d, %d", fc, fc);
			arg[k] = a->blob[0];
		} else {
			if (ck_fq(n, v, d, t[k]))
				return WL_ERR;
			arg[k] = a->in[k];
		}
	}
	if (ck_fo(n, nout(n, 0), d, y))
		return WL_ERR;
	fprintf(f, "%s<%s, %s, %s", op->cpp, t[0], t[1], y);
	for (int i = 0; i < 12; i++)
		fprintf(f, ", %lldLL", (long long)(i < 4 ? bc.O[i] : i < 8 ? bc.SA[i - 4] : bc.SB[i - 8]));
	fprintf(f, ">(c, %s, %s, %s);\n", arg[0], arg[1], a->out[0]);
	return WL_OK;
}
