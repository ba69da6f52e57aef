/* kgen_elementwise.c — host kernels: Add/Sub/Mul with broadcasting, Gelu
 * (erf or tanh form), SiLU, Exp (hg_exp), Pow with the constant base 2
 * (hg_exp2), Cast/Identity (same dtype: copy), Gather along
 * axis 0 (embedding rows; with --host-precision bf16 a tied table's rows are
 * read from the LM head's bf16 copy and widened), GreedyArgMax, Reshape (a copy: the bytes do not
 * move), Transpose (any dtype; the output in rows of the plan's last dim,
 * targets/target.h target_transpose_plan: a memcpy per row when that dim
 * is contiguous in the input, else an element loop; rows across the pool).
 *
 * Binary ops: the output is cut into rows of C elements where, for each
 * input, C divides its broadcast period, so inside a row every input is
 * either contiguous or one constant: full shape (p + i), scalar, a suffix of
 * the output shape ([D] against [T, D]: p + i mod P) or a prefix ([T, 1]
 * against [T, D]: p + i / B). Rows are split across the pool; inside a row
 * the loop runs on vw-wide vectors with a masked tail.
 */
#include <string.h>
#include "hostgen.h"


static int64_t gcd64(int64_t a, int64_t b)
{
	while (b) {
		int64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* vectorized loop over [0, C): body(i, nvalid) called twice (full vectors, then masked tail) */
typedef void (*VecBody)(HostGen *g, void *ctx, LLVMValueRef i, LLVMValueRef nvalid);

static void vec_loop(HostGen *g, int64_t C, VecBody body, void *ctx)
{
	int64_t full = C / g->vw * g->vw;
	if (full > 0) {
		HgLoop l;
		LLVMValueRef i = hg_loop_begin(g, &l, hg_i64(g, 0), hg_i64(g, full), g->vw, "c");
		body(g, ctx, i, NULL);
		hg_loop_end(g, &l);
	}
	if (C > full)
		body(g, ctx, hg_i64(g, full), hg_i64(g, C - full));
}

static LLVMValueRef vld(HostGen *g, LLVMValueRef p, LLVMValueRef i, LLVMValueRef n)
{
	return n ? hg_vload_n(g, p, i, n) : hg_vload(g, p, i);
}

static void vst(HostGen *g, LLVMValueRef v, LLVMValueRef p, LLVMValueRef i, LLVMValueRef n)
{
	if (n)
		hg_vstore_n(g, v, p, i, n);
	else
		hg_vstore(g, v, p, i);
}

/* rows per parallel task so that a task has >= ~16K elements */
static int64_t rows_per_task(int64_t R, int64_t C)
{
	int64_t per = 16384 / (C > 0 ? C : 1);
	if (per < 1)
		per = 1;
	if (per > R)
		per = R > 0 ? R : 1;
	return per;
}

/* ---------------------------------------------------------------- binary */

enum { BC_FULL, BC_SCALAR, BC_SUFFIX, BC_PREFIX };

typedef struct BinCtx {
	const Node *n;
	int kind[2];
	int64_t per[2];          /* SUFFIX: period P; PREFIX: block B */
	LLVMValueRef base[2], out, row0; /* row0: element index of the row start */
	LLVMValueRef cval[2];    /* constant of the row (scalar / prefix) */
} BinCtx;

static LLVMValueRef bin_op(HostGen *g, const Node *n, LLVMValueRef a, LLVMValueRef b)
{
	switch (n->op) {
	case OP_Add: return LLVMBuildFAdd(g->b, a, b, "");
	case OP_Sub: return LLVMBuildFSub(g->b, a, b, "");
	default: return LLVMBuildFMul(g->b, a, b, "");
	}
}

static void bin_body(HostGen *g, void *vc, LLVMValueRef i, LLVMValueRef nv)
{
	BinCtx *c = vc;
	LLVMValueRef x[2];
	for (int k = 0; k < 2; k++) {
		switch (c->kind[k]) {
		case BC_FULL: x[k] = vld(g, c->base[k], LLVMBuildAdd(g->b, c->row0, i, ""), nv); break;
		case BC_SUFFIX: {
			LLVMValueRef r = LLVMBuildSRem(g->b, c->row0, hg_i64(g, c->per[k]), "");
			x[k] = vld(g, c->base[k], LLVMBuildAdd(g->b, r, i, ""), nv);
			break;
		}
		default: x[k] = c->cval[k]; break;
		}
	}
	vst(g, bin_op(g, c->n, x[0], x[1]), c->out, LLVMBuildAdd(g->b, c->row0, i, ""), nv);
}

int hg_emit_binary(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d)
{
	if (n->ninputs != 2 || n->noutputs != 1 || !n->inputs[0] || !n->inputs[1] || !n->outputs[0])
		return diag_fail(d, "%s: node '%s': %s needs 2 inputs and 1 output", hg_model_name(g), n->name, n->op_type);
	const Value *y = n->outputs[0];
	int64_t od[8], idims[2][8];
	int orank = hg_dims(g, n, y, od, d);
	if (orank < 0)
		return WL_ERR;
	int irank[2];
	for (int k = 0; k < 2; k++) {
		if ((irank[k] = hg_dims(g, n, n->inputs[k], idims[k], d)) < 0)
			return WL_ERR;
		if (n->inputs[k]->type.elem != DT_FLOAT)
			return diag_fail(d, "%s: node '%s': tensor '%s': %s on host supports float32 only", hg_model_name(g), n->name,
			                 n->inputs[k]->name, n->op_type);
	}
	if (y->type.elem != DT_FLOAT)
		return diag_fail(d, "%s: node '%s': tensor '%s': %s on host supports float32 only", hg_model_name(g), n->name,
		                 y->name, n->op_type);
	int64_t T = hg_numel(y);
	BinCtx c = {.n = n};
	int64_t C = T;
	for (int k = 0; k < 2; k++) {
		const Value *v = n->inputs[k];
		int64_t N = hg_numel(v);
		/* strip leading 1s */
		int r = irank[k], s = 0;
		while (s < r && idims[k][s] == 1)
			s++;
		if (N == T) {
			c.kind[k] = BC_FULL;
		} else if (N == 1) {
			c.kind[k] = BC_SCALAR;
		} else {
			/* suffix: input dims (after leading 1s) == last dims of out */
			bool suffix = r - s <= orank, prefix = true;
			for (int j = s; j < r && suffix; j++)
				if (idims[k][j] != od[orank - (r - j)])
					suffix = false;
			/* prefix: input (right-aligned) equals out on leading dims, then only 1s */
			int off = orank - r;
			int last_non1 = -1;
			for (int j = 0; j < r; j++)
				if (idims[k][j] != 1)
					last_non1 = j;
			for (int j = 0; j <= last_non1 && prefix; j++)
				if (idims[k][j] != od[off + j])
					prefix = false;
			if (off > 0 && prefix) {
				/* a prefix needs the input to cover the outermost dims */
				for (int j = 0; j < off; j++)
					if (od[j] != 1)
						prefix = false;
			}
			if (suffix) {
				c.kind[k] = BC_SUFFIX;
				c.per[k] = N;
			} else if (prefix) {
				c.kind[k] = BC_PREFIX;
				c.per[k] = T / N;
			} else {
				return diag_fail(d, "%s: node '%s': tensor '%s': this broadcast of %s is not supported on host",
				                 hg_model_name(g), n->name, v->name, n->op_type);
			}
			C = gcd64(C, c.per[k]);
		}
	}
	if (T == 0)
		return WL_OK;
	int64_t R = T / C;
	LLVMValueRef caps[3] = {hg_arg(g, fn, 0), hg_arg(g, fn, 1), hg_arg(g, fn, 2)};
	int64_t per = rows_per_task(R, C);
	HgPar p;
	hg_par_begin(g, &p, hg_api(g, fn), hg_i64(g, (R + per - 1) / per), caps, 3, "bin");
	c.base[0] = p.cap[0];
	c.base[1] = p.cap[1];
	c.out = p.cap[2];
	LLVMValueRef r0 = LLVMBuildMul(g->b, p.i0, hg_i64(g, per), "");
	LLVMValueRef r1 = LLVMBuildMul(g->b, p.i1, hg_i64(g, per), "");
	r1 = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, r1, hg_i64(g, R), ""), r1, hg_i64(g, R), "");
	HgLoop l;
	LLVMValueRef row = hg_loop_begin(g, &l, r0, r1, 1, "row");
	c.row0 = LLVMBuildMul(g->b, row, hg_i64(g, C), "");
	for (int k = 0; k < 2; k++) {
		if (c.kind[k] == BC_SCALAR)
			c.cval[k] = hg_vbroadcast(g, c.base[k], hg_i64(g, 0));
		else if (c.kind[k] == BC_PREFIX)
			c.cval[k] = hg_vbroadcast(g, c.base[k], LLVMBuildSDiv(g->b, c.row0, hg_i64(g, c.per[k]), ""));
	}
	vec_loop(g, C, bin_body, &c);
	hg_loop_end(g, &l);
	hg_par_end(g, &p);
	return WL_OK;
}

/* ---------------------------------------------------------------- unary */

enum { U_COPY, U_GELU, U_GELU_TANH, U_SILU, U_EXP, U_EXP2 };

typedef struct UnCtx { int kind; LLVMValueRef x, y, off; } UnCtx;

static LLVMValueRef gelu_tanh(HostGen *g, LLVMValueRef x)
{
	LLVMBuilderRef b = g->b;
	LLVMValueRef x3 = LLVMBuildFMul(b, LLVMBuildFMul(b, x, x, ""), x, "");
	LLVMValueRef u = LLVMBuildFMul(b, hg_fma(g, x3, hg_vconst(g, 0.044715f), x), hg_vconst(g, 0.7978845608028654f), "");
	/* tanh(u) = 1 - 2 / (exp(2u) + 1) */
	LLVMValueRef e = hg_exp(g, LLVMBuildFMul(b, u, hg_vconst(g, 2.0f), ""));
	LLVMValueRef t = LLVMBuildFSub(b, hg_vconst(g, 1.0f),
	                               LLVMBuildFDiv(b, hg_vconst(g, 2.0f), LLVMBuildFAdd(b, e, hg_vconst(g, 1.0f), ""), ""), "");
	LLVMValueRef h = LLVMBuildFMul(b, x, hg_vconst(g, 0.5f), "");
	return hg_fma(g, h, t, h);
}

static void un_body(HostGen *g, void *vc, LLVMValueRef i, LLVMValueRef nv)
{
	UnCtx *c = vc;
	LLVMValueRef idx = LLVMBuildAdd(g->b, c->off, i, "");
	LLVMValueRef x = vld(g, c->x, idx, nv), y;
	switch (c->kind) {
	case U_GELU: y = hg_gelu(g, x); break;
	case U_GELU_TANH: y = gelu_tanh(g, x); break;
	case U_SILU: y = hg_silu(g, x); break;
	case U_EXP: y = hg_exp(g, x); break;
	case U_EXP2: y = hg_exp2(g, x); break;
	default: y = x; break;
	}
	vst(g, y, c->y, idx, nv);
}

/* Pow(2, x) = 2^x: the base must be the scalar constant 2. Checked for every
 * Pow node before the plan (host.c): the value of an initializer is not in
 * the kernel key (hg_share.c), so nodes with another base would share the
 * first node's 2^x kernel if the emitter checked it. */
int hg_check_pow(HostGen *g, const Node *n, Diag *d)
{
	const Value *base = n->ninputs >= 1 ? n->inputs[0] : NULL;
	const Tensor *t = base ? base->init : NULL;
	if (n->ninputs != 2 || !n->inputs[1] || !t || t->dtype != DT_FLOAT || t->nbytes != 4 || !t->data ||
	    *(const float *)t->data != 2.0f)
		return diag_fail(d, "%s: node '%s': tensor '%s': Pow on host supports only the constant scalar base 2",
		                 hg_model_name(g), n->name, base ? base->name : "");
	return WL_OK;
}

int hg_emit_unary(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d)
{
	if (n->ninputs < 1 || n->noutputs != 1 || !n->inputs[0] || !n->outputs[0])
		return diag_fail(d, "%s: node '%s': %s needs 1 input and 1 output", hg_model_name(g), n->name, n->op_type);
	int xi = n->op == OP_Pow ? 1 : 0;   /* the argument slot of x (Pow: the exponent, present: hg_check_pow) */
	const Value *x = n->inputs[xi], *y = n->outputs[0];
	int64_t dims[8];
	if (hg_dims(g, n, x, dims, d) < 0 || hg_dims(g, n, y, dims, d) < 0)
		return WL_ERR;
	int kind = U_COPY;
	if (n->op == OP_Gelu || n->op == OP_WlGelu) {
		const char *ap = attr_string(n, "approximate", "none");
		kind = !strcmp(ap, "tanh") ? U_GELU_TANH : U_GELU;
	} else if (n->op == OP_WlSiLU) {
		kind = U_SILU;
	} else if (n->op == OP_Exp) {
		kind = U_EXP;   /* hg_exp (its error bound is tested through this op) */
	} else if (n->op == OP_Pow) {
		kind = U_EXP2;  /* hg_exp2, the attention's softmax exponent (its bound is tested through this op) */
	}
	int64_t T = hg_numel(y);
	if (hg_numel(x) != T)
		return diag_fail(d, "%s: node '%s': tensor '%s': element count differs from the output", hg_model_name(g), n->name,
		                 x->name);
	if (kind == U_COPY) {
		if (x->type.elem != y->type.elem)
			return diag_fail(d, "%s: node '%s': tensor '%s': %s between different dtypes is not supported on host",
			                 hg_model_name(g), n->name, x->name, n->op_type);
		LLVMBuildMemCpy(g->b, hg_arg(g, fn, n->ninputs), 4, hg_arg(g, fn, 0), 4,
		                hg_i64(g, (int64_t)dtype_nbytes(x->type.elem, T)));
		return WL_OK;
	}
	if (x->type.elem != DT_FLOAT || y->type.elem != DT_FLOAT)
		return diag_fail(d, "%s: node '%s': tensor '%s': %s on host supports float32 only", hg_model_name(g), n->name,
		                 x->name, n->op_type);
	if (T == 0)
		return WL_OK;
	int64_t CH = 4096;
	int64_t nt = (T + CH - 1) / CH;
	LLVMValueRef caps[2] = {hg_arg(g, fn, xi), hg_arg(g, fn, n->ninputs)};
	HgPar p;
	hg_par_begin(g, &p, hg_api(g, fn), hg_i64(g, nt), caps, 2, "un");
	UnCtx c = {.kind = kind, .x = p.cap[0], .y = p.cap[1]};
	HgLoop l;
	LLVMValueRef t = hg_loop_begin(g, &l, p.i0, p.i1, 1, "t");
	c.off = LLVMBuildMul(g->b, t, hg_i64(g, CH), "");
	if (T % CH == 0) {
		vec_loop(g, CH, un_body, &c);
	} else {
		/* last task is shorter */
		HgIf f;
		hg_if_begin(g, &f, LLVMBuildICmp(g->b, LLVMIntEQ, t, hg_i64(g, nt - 1), ""));
		vec_loop(g, T - (nt - 1) * CH, un_body, &c);
		hg_if_else(g, &f);
		vec_loop(g, CH, un_body, &c);
		hg_if_end(g, &f);
	}
	hg_loop_end(g, &l);
	hg_par_end(g, &p);
	return WL_OK;
}

/* ---------------------------------------------------------------- Transpose */

int hg_emit_transpose(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d)
{
	if (n->ninputs != 1 || n->noutputs != 1 || !n->inputs[0] || !n->outputs[0])
		return diag_fail(d, "%s: node '%s': Transpose needs 1 input and 1 output", hg_model_name(g), n->name);
	const Value *x = n->inputs[0], *y = n->outputs[0];
	int64_t dims[8];
	if (hg_dims(g, n, x, dims, d) < 0 || hg_dims(g, n, y, dims, d) < 0)
		return WL_ERR;
	if (x->type.elem != y->type.elem || dtype_nbytes(x->type.elem, 1) == 0 || dtype_nbytes(x->type.elem, 1) > 8)
		return diag_fail(d, "%s: node '%s': tensor '%s': Transpose on host needs one fixed-size dtype in and out",
		                 hg_model_name(g), n->name, x->name);
	TransposePlan tp;
	if (target_transpose_plan(hg_model_name(g), n, &tp, d) != WL_OK)
		return WL_ERR;
	int64_t es = (int64_t)dtype_nbytes(x->type.elem, 1);
	int64_t R = tp.o[0] * tp.o[1] * tp.o[2], C = tp.o[3];
	if (R * C == 0)
		return WL_OK;
	int64_t per = rows_per_task(R, C);
	LLVMValueRef caps[2] = {hg_arg(g, fn, 0), hg_arg(g, fn, 1)};
	HgPar p;
	hg_par_begin(g, &p, hg_api(g, fn), hg_i64(g, (R + per - 1) / per), caps, 2, "tr");
	LLVMTypeRef i8 = LLVMInt8TypeInContext(g->ctx), et = LLVMIntTypeInContext(g->ctx, (unsigned)(es * 8));
	LLVMValueRef r0 = LLVMBuildMul(g->b, p.i0, hg_i64(g, per), "");
	LLVMValueRef r1 = LLVMBuildMul(g->b, p.i1, hg_i64(g, per), "");
	r1 = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, r1, hg_i64(g, R), ""), r1, hg_i64(g, R), "");
	HgLoop l;
	LLVMValueRef r = hg_loop_begin(g, &l, r0, r1, 1, "r");
	/* r = (i0·o1 + i1)·o2 + i2 → the input element of the row's start */
	LLVMValueRef i2 = LLVMBuildURem(g->b, r, hg_i64(g, tp.o[2]), "");
	LLVMValueRef q = LLVMBuildUDiv(g->b, r, hg_i64(g, tp.o[2]), "");
	LLVMValueRef i1 = LLVMBuildURem(g->b, q, hg_i64(g, tp.o[1]), "");
	LLVMValueRef i0 = LLVMBuildUDiv(g->b, q, hg_i64(g, tp.o[1]), "");
	LLVMValueRef src = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, i0, hg_i64(g, tp.s[0]), ""),
	                                LLVMBuildAdd(g->b, LLVMBuildMul(g->b, i1, hg_i64(g, tp.s[1]), ""),
	                                             LLVMBuildMul(g->b, i2, hg_i64(g, tp.s[2]), ""), ""), "");
	LLVMValueRef dst = LLVMBuildMul(g->b, r, hg_i64(g, C), "");
	if (tp.s[3] == 1) {
		LLVMBuildMemCpy(g->b, hg_gep(g, i8, p.cap[1], LLVMBuildMul(g->b, dst, hg_i64(g, es), "")), 1,
		                hg_gep(g, i8, p.cap[0], LLVMBuildMul(g->b, src, hg_i64(g, es), "")), 1, hg_i64(g, C * es));
	} else {
		HgLoop lc;
		LLVMValueRef c = hg_loop_begin(g, &lc, hg_i64(g, 0), hg_i64(g, C), 1, "c");
		LLVMValueRef v = hg_load(g, et, p.cap[0], LLVMBuildAdd(g->b, src, LLVMBuildMul(g->b, c, hg_i64(g, tp.s[3]), ""), ""));
		hg_store(g, v, p.cap[1], LLVMBuildAdd(g->b, dst, c, ""));
		hg_loop_end(g, &lc);
	}
	hg_loop_end(g, &l);
	hg_par_end(g, &p);
	return WL_OK;
}

/* ---------------------------------------------------------------- Gather (axis 0) */

int hg_emit_gather(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d)
{
	if (n->ninputs != 2 || n->noutputs != 1 || !n->inputs[0] || !n->inputs[1] || !n->outputs[0])
		return diag_fail(d, "%s: node '%s': Gather needs 2 inputs and 1 output", hg_model_name(g), n->name);
	const Value *data = n->inputs[0], *ind = n->inputs[1];
	int64_t dd[8], id[8];
	int dr = hg_dims(g, n, data, dd, d), ir = hg_dims(g, n, ind, id, d);
	if (dr < 0 || ir < 0)
		return WL_ERR;
	int64_t axis = attr_int(n, "axis", 0);
	if (axis < 0)
		axis += dr;
	if (axis != 0 || dr < 1)
		return diag_fail(d, "%s: node '%s': Gather on host supports axis 0 only", hg_model_name(g), n->name);
	if (ind->type.elem != DT_INT64 && ind->type.elem != DT_INT32)
		return diag_fail(d, "%s: node '%s': tensor '%s': indices must be int64 or int32", hg_model_name(g), n->name,
		                 ind->name);
	int64_t V = dd[0], nidx = hg_numel(ind);
	int64_t row = (int64_t)dtype_nbytes(data->type.elem, hg_numel(data) / (V ? V : 1));
	/* --host-precision bf16, a tied table (kgen_matmul.c pack_dot_bf16): data
	 * is the LM head's bf16 copy, V rows of bfs uint16 of which the output
	 * row's first D are widened to float */
	int64_t bfv = attr_int(n, "host_bf16_rows", 0), bfs = 0, D = 0;
	if (bfv > 0) {
		bfs = hg_numel(data) / bfv;
		int64_t od[8];
		int orank = hg_dims(g, n, n->outputs[0], od, d);
		if (orank < 1)
			return WL_ERR;
		D = od[orank - 1];
		if (data->type.elem != DT_UINT16 || bfs < D || hg_numel(data) != bfv * bfs || hg_numel(n->outputs[0]) != nidx * D)
			return diag_fail(d, "%s: node '%s': tensor '%s': not the bf16 rows of a tied table", hg_model_name(g),
			                 n->name, data->name);
		V = bfv;
	}
	if (nidx == 0)
		return WL_OK;
	LLVMTypeRef it = ind->type.elem == DT_INT64 ? g->t_i64 : g->t_i32;
	LLVMValueRef src = hg_arg(g, fn, 0), ip = hg_arg(g, fn, 1), dst = hg_arg(g, fn, 2);
	LLVMValueRef site = hg_index_site(g, n, fn, ind, V, 0);
	HgLoop l;
	LLVMValueRef i = hg_loop_begin(g, &l, hg_i64(g, 0), hg_i64(g, nidx), 1, "i");
	LLVMValueRef k = hg_load(g, it, ip, i);
	if (it != g->t_i64)
		k = LLVMBuildSExt(g->b, k, g->t_i64, "");
	/* [-V, V) or an error naming the tensor (one compare + branch per id);
	 * negative ids count from the end */
	k = hg_index_check(g, fn, site, i, k, V, 0);
	if (bfv > 0) {
		LLVMValueRef s = hg_gep(g, hg_t_bf16(g, 0), src, LLVMBuildMul(g->b, k, hg_i64(g, bfs), ""));
		LLVMValueRef t = hg_gepf(g, dst, LLVMBuildMul(g->b, i, hg_i64(g, D), ""));
		for (int64_t e = 0; e < D; e += g->vw) {
			LLVMValueRef x = hg_bf16_to_f32(g, s, hg_i64(g, e), D - e < g->vw ? D - e : g->vw);
			if (D - e >= g->vw)
				hg_vstore(g, x, t, hg_i64(g, e));
			else
				hg_vstore_n(g, x, t, hg_i64(g, e), hg_i64(g, D - e));
		}
	} else {
		LLVMValueRef s = hg_gep(g, g->t_i8, src, LLVMBuildMul(g->b, k, hg_i64(g, row), ""));
		LLVMValueRef t = hg_gep(g, g->t_i8, dst, LLVMBuildMul(g->b, i, hg_i64(g, row), ""));
		LLVMBuildMemCpy(g->b, t, 1, s, 1, hg_i64(g, row));
	}
	hg_loop_end(g, &l);
	return WL_OK;
}

/* ---------------------------------------------------------------- GreedyArgMax */

int hg_emit_argmax(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d)
{
	if (n->ninputs != 1 || n->noutputs != 1 || !n->inputs[0] || !n->outputs[0])
		return diag_fail(d, "%s: node '%s': GreedyArgMax needs 1 input and 1 output", hg_model_name(g), n->name);
	const Value *x = n->inputs[0];
	int64_t dims[8];
	int r = hg_dims(g, n, x, dims, d);
	if (r < 0)
		return WL_ERR;
	if (r < 1 || dims[r - 1] < 1 || x->type.elem != DT_FLOAT || n->outputs[0]->type.elem != DT_INT32)
		return diag_fail(d, "%s: node '%s': tensor '%s': GreedyArgMax on host needs float32 [..., V>=1] → int32",
		                 hg_model_name(g), n->name, x->name);
	int64_t V = dims[r - 1], rows = hg_numel(x) / V;
	LLVMValueRef xp = hg_arg(g, fn, 0), yp = hg_arg(g, fn, 1);
	HgLoop lr;
	LLVMValueRef row = hg_loop_begin(g, &lr, hg_i64(g, 0), hg_i64(g, rows), 1, "r");
	LLVMValueRef base = LLVMBuildMul(g->b, row, hg_i64(g, V), "");
	LLVMValueRef rp = hg_gepf(g, xp, base);
	LLVMValueRef first = hg_load(g, g->t_f32, rp, hg_i64(g, 0));
	HgLoop l;
	LLVMValueRef v = hg_loop_begin(g, &l, hg_i64(g, 1), hg_i64(g, V), 1, "v");
	LLVMValueRef best = hg_loop_carry(g, &l, hg_i64(g, 0));
	LLVMValueRef bv = hg_loop_carry(g, &l, first);
	LLVMValueRef e = hg_load(g, g->t_f32, rp, v);
	/* e > bv, or bv is NaN and e is not (as the reference) */
	LLVMValueRef gt = LLVMBuildFCmp(g->b, LLVMRealOGT, e, bv, "");
	LLVMValueRef bnan = LLVMBuildFCmp(g->b, LLVMRealUNO, bv, bv, "");
	LLVMValueRef eok = LLVMBuildFCmp(g->b, LLVMRealORD, e, e, "");
	LLVMValueRef take = LLVMBuildOr(g->b, gt, LLVMBuildAnd(g->b, bnan, eok, ""), "");
	hg_loop_next(g, &l, best, LLVMBuildSelect(g->b, take, v, best, ""));
	hg_loop_next(g, &l, bv, LLVMBuildSelect(g->b, take, e, bv, ""));
	hg_loop_end(g, &l);
	hg_store(g, LLVMBuildTrunc(g->b, best, g->t_i32, ""), yp, row);
	hg_loop_end(g, &lr);
	return WL_OK;
}
