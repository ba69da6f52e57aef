/* kgen_quant.c — host kernels: ONNX QuantizeLinear and DequantizeLinear (the
 * QDQ form), bit for bit the reference executor's (runtime/interp/ref_quant.c)
 * and ONNX Runtime's:
 *
 *   QuantizeLinear(x, scale [, zp])    y = saturate(roundeven(x / scale) + zp)
 *       x float32; x / scale a float32 division (not x * (1/scale)); rounding
 *       half to even (llvm.roundeven); + zp in float; saturate to int8
 *       [-128, 127] or uint8 [0, 255]; NaN gives zp. y's type: zp's, else
 *       the output_dtype attribute, else uint8 (shape inference set it).
 *   DequantizeLinear(x, scale [, zp])  y = float(int32(x) - int32(zp)) * scale
 *       x int8, uint8 or int32 (an int32 zero point must be 0); y float32.
 *
 * scale (and zp, of the same shape) is per tensor (a scalar or one element)
 * or per axis (1-D, dims[axis] elements; axis default 1). Blocked
 * quantization (block_size) and float16 scales are errors naming node and
 * tensor. x is viewed as [outer, ch, inner]; a task is a chunk of one row of
 * `inner` elements (one scale, one zero point), so the loop body is a plain
 * scalar loop that LLVM's loop vectorizer turns into vector code (no
 * reassociation: every element is computed alone, as the reference does).
 *
 * Scale and zero-point values are read at run time through args (kernels
 * are shared between nodes, hg_share.c); hg_prepare_qdq checks constant ones
 * at compile time (positive and finite scales, int32 zero points 0), as the
 * reference checks them at run time; hg_check_scales is that scale check, also
 * run on the scales of ai.wlower.QMatMul (kgen_qmatmul.c).
 */
#include <math.h>
#include "hostgen.h"


typedef struct QPlan {
	int qdt;                        /* the quantized type: int8, uint8 (int32: Dequantize only) */
	int64_t outer, ch, inner;
} QPlan;

static bool qdt_ok(int dt, bool deq)
{
	return dt == DT_INT8 || dt == DT_UINT8 || (deq && dt == DT_INT32);
}

static const char *dtn(int dt)
{
	const char *s = dtype_name(dt);
	return s ? s : "?";
}

/* Checks node n (types, shapes, attributes); fills p. */
static int qplan(HostGen *g, const Node *n, QPlan *p, Diag *d)
{
	bool deq = n->op == OP_DequantizeLinear;
	if (n->ninputs < 2 || n->ninputs > 3 || n->noutputs != 1 || !n->inputs[0] || !n->inputs[1] || !n->outputs[0])
		return diag_fail(d, "%s: node '%s': %s needs x, scale [, zero point] and one output", hg_model_name(g), n->name,
		                 n->op_type);
	const Value *x = n->inputs[0], *s = n->inputs[1], *y = n->outputs[0];
	const Value *z = n->ninputs > 2 ? n->inputs[2] : NULL;
	if (attr_int(n, "block_size", 0) != 0)
		return diag_fail(d, "%s: node '%s': blocked quantization (block_size %lld) is not supported on host",
		                 hg_model_name(g), n->name, (long long)attr_int(n, "block_size", 0));
	const Value *fv = deq ? y : x;           /* the float side */
	p->qdt = deq ? x->type.elem : y->type.elem;
	if (fv->type.elem != DT_FLOAT)
		return diag_fail(d, "%s: node '%s': tensor '%s': %s on host supports float32 only, not %s", hg_model_name(g),
		                 n->name, fv->name, n->op_type, dtn(fv->type.elem));
	if (s->type.elem != DT_FLOAT)
		return diag_fail(d, "%s: node '%s': tensor '%s': a %s scale on host must be float32, not %s", hg_model_name(g),
		                 n->name, s->name, n->op_type, dtn(s->type.elem));
	if (!qdt_ok(p->qdt, deq))
		return diag_fail(d, "%s: node '%s': tensor '%s': %s on host supports int8 and uint8%s, not %s", hg_model_name(g),
		                 n->name, deq ? x->name : y->name, n->op_type, deq ? " (and int32)" : "", dtn(p->qdt));
	if (z && z->type.elem != p->qdt)
		return diag_fail(d, "%s: node '%s': tensor '%s': the zero point is %s, not %s like the quantized tensor",
		                 hg_model_name(g), n->name, z->name, dtn(z->type.elem), dtn(p->qdt));
	int64_t xd[8], sd[8], yd[8], zd[8];
	int xr = hg_dims(g, n, x, xd, d), sr, yr;
	if (xr < 0 || (sr = hg_dims(g, n, s, sd, d)) < 0 || (yr = hg_dims(g, n, y, yd, d)) < 0)
		return WL_ERR;
	int64_t T = hg_numel(x), ns = hg_numel(s);
	if (hg_numel(y) != T)
		return diag_fail(d, "%s: node '%s': tensor '%s': element count differs from input '%s'", hg_model_name(g), n->name,
		                 y->name, x->name);
	if (z) {
		int zr = hg_dims(g, n, z, zd, d);
		if (zr < 0)
			return WL_ERR;
		if (zr != sr || hg_numel(z) != ns)
			return diag_fail(d, "%s: node '%s': tensor '%s': the zero point's shape differs from scale '%s'",
			                 hg_model_name(g), n->name, z->name, s->name);
	}
	*p = (QPlan){.qdt = p->qdt, .outer = 1, .ch = 1, .inner = T};
	if (sr > 1 || ns < 1)
		return diag_fail(d, "%s: node '%s': tensor '%s': a scale is a scalar or a 1-D tensor (%d dims, %lld elements)",
		                 hg_model_name(g), n->name, s->name, sr, (long long)ns);
	if (sr == 1 && ns != 1) {
		int64_t ax = attr_int(n, "axis", 1);
		if (ax < -xr || ax >= xr)
			return diag_fail(d, "%s: node '%s': axis %lld is out of range for '%s' of rank %d", hg_model_name(g), n->name,
			                 (long long)ax, x->name, xr);
		if (ax < 0)
			ax += xr;
		if (xd[ax] != ns)
			return diag_fail(d, "%s: node '%s': tensor '%s': %lld scales but axis %lld of '%s' has %lld", hg_model_name(g),
			                 n->name, s->name, (long long)ns, (long long)ax, x->name, (long long)xd[ax]);
		p->ch = ns;
		for (int k = 0; k < ax; k++)
			p->outer *= xd[k];
		p->inner = 1;
		for (int k = (int)ax + 1; k < xr; k++)
			p->inner *= xd[k];
	}
	return WL_OK;
}

/* Before the buffer plan (every node, shared kernels or not): the constant
 * float scales of a Q/DQ node (input 1) or a QMatMul (x_scale 1, w_scale 4,
 * y_scale 5) must be positive and finite. */
int hg_check_scales(HostGen *g, const Node *n, Diag *d)
{
	for (int i = 1; i < n->ninputs; i++) {
		const Value *v = n->inputs[i];
		bool scale = n->op == OP_WlQMatMul ? (i == 1 || i == 4 || i == 5) : i == 1;
		if (!scale || !v || !v->init || v->init->dtype != DT_FLOAT)
			continue;
		for (int64_t j = 0; j < tensor_numel(v->init); j++) {
			double s = tensor_get_f64(v->init, j);
			if (!(s > 0) || !isfinite(s))
				return diag_fail(d, "%s: node '%s': tensor '%s'[%lld] is %g: a scale must be positive and finite",
				                 hg_model_name(g), n->name, v->name, (long long)j, s);
		}
	}
	return WL_OK;
}

int hg_prepare_qdq(HostGen *g, Node *n, Diag *d)
{
	QPlan p;
	if (qplan(g, n, &p, d) != WL_OK)
		return WL_ERR;
	if (hg_check_scales(g, n, d) != WL_OK)
		return WL_ERR;
	const Value *z = n->ninputs > 2 ? n->inputs[2] : NULL;
	for (int64_t i = 0; z && z->init && p.qdt == DT_INT32 && i < tensor_numel(z->init); i++)
		if (tensor_get_i64(z->init, i) != 0)
			return diag_fail(d, "%s: node '%s': tensor '%s'[%lld] is %lld: an int32 zero point must be 0", hg_model_name(g),
			                 n->name, z->name, (long long)i, (long long)tensor_get_i64(z->init, i));
	return WL_OK;
}

/* elements per task: one row of inner, cut into chunks of CH */
#define CH 8192

int hg_emit_qdq(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d)
{
	QPlan p;
	if (qplan(g, n, &p, d) != WL_OK)
		return WL_ERR;
	bool deq = n->op == OP_DequantizeLinear, hasz = n->ninputs > 2 && n->inputs[2];
	int64_t R = p.outer * p.ch, C = p.inner;
	if (R * C == 0)
		return WL_OK;
	int64_t nchunk = (C + CH - 1) / CH;
	LLVMBuilderRef b = g->b;
	LLVMTypeRef qt = p.qdt == DT_INT32 ? g->t_i32 : g->t_i8;
	/* caps: x, scale, zp (or x again: unused), y */
	LLVMValueRef caps[4] = {hg_arg(g, fn, 0), hg_arg(g, fn, 1), hasz ? hg_arg(g, fn, 2) : hg_arg(g, fn, 0),
	                        hg_arg(g, fn, n->ninputs)};
	HgPar par;
	hg_par_begin(g, &par, hg_api(g, fn), hg_i64(g, R * nchunk), caps, 4, deq ? "dq" : "q");
	LLVMValueRef xp = par.cap[0], sp = par.cap[1], zp = par.cap[2], yp = par.cap[3];
	HgLoop lt;
	LLVMValueRef t = hg_loop_begin(g, &lt, par.i0, par.i1, 1, "t");
	LLVMValueRef row = LLVMBuildSDiv(b, t, hg_i64(g, nchunk), "");
	LLVMValueRef c0 = LLVMBuildMul(b, LLVMBuildSRem(b, t, hg_i64(g, nchunk), ""), hg_i64(g, CH), "");
	LLVMValueRef c1 = LLVMBuildAdd(b, c0, hg_i64(g, CH), "");
	c1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, c1, hg_i64(g, C), ""), c1, hg_i64(g, C), "");
	LLVMValueRef chi = LLVMBuildSRem(b, row, hg_i64(g, p.ch), "");
	LLVMValueRef sc = hg_load(g, g->t_f32, sp, chi);
	LLVMValueRef zi = hg_i32(g, 0);
	if (hasz) {
		zi = hg_load(g, qt, zp, chi);
		if (qt != g->t_i32)
			zi = p.qdt == DT_UINT8 ? LLVMBuildZExt(b, zi, g->t_i32, "") : LLVMBuildSExt(b, zi, g->t_i32, "");
	}
	LLVMValueRef base = LLVMBuildMul(b, row, hg_i64(g, C), "");
	HgLoop l;
	LLVMValueRef k = hg_loop_begin(g, &l, c0, c1, 1, "k");
	LLVMValueRef i = LLVMBuildAdd(b, base, k, "");
	if (deq) {
		LLVMValueRef q = hg_load(g, qt, xp, i);
		if (qt != g->t_i32)
			q = p.qdt == DT_UINT8 ? LLVMBuildZExt(b, q, g->t_i32, "") : LLVMBuildSExt(b, q, g->t_i32, "");
		LLVMValueRef v = LLVMBuildSIToFP(b, LLVMBuildSub(b, q, zi, ""), g->t_f32, "");
		hg_store(g, LLVMBuildFMul(b, v, sc, ""), yp, i);
	} else {
		float lo = p.qdt == DT_INT8 ? -128.0f : 0.0f, hi = p.qdt == DT_INT8 ? 127.0f : 255.0f;
		LLVMValueRef zf = LLVMBuildSIToFP(b, zi, g->t_f32, "");
		LLVMValueRef v = LLVMBuildFDiv(b, hg_load(g, g->t_f32, xp, i), sc, "");
		LLVMValueRef r = LLVMBuildFAdd(b, hg_intrinsic(g, "llvm.roundeven", g->t_f32, &v, 1), zf, "");
		/* NaN (x NaN, or a run-time scale of 0 on x = 0) → zp: never fptosi of NaN */
		r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, r, r, ""), zf, r, "");
		r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, r, hg_f32(g, lo), ""), hg_f32(g, lo), r, "");
		r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, r, hg_f32(g, hi), ""), hg_f32(g, hi), r, "");
		hg_store(g, LLVMBuildTrunc(b, LLVMBuildFPToSI(b, r, g->t_i32, ""), g->t_i8, ""), yp, i);
	}
	hg_loop_end(g, &l);
	hg_loop_end(g, &lt);
	hg_par_end(g, &par);
	return WL_OK;
}

/* ---------------------------------------------------------------- QGather */

/* ai.wlower.QGather (table [V, D] int8, scale [V] float, ids) → y float
 * [ids..., D]: y[i, j] = (float)table[id, j] · scale[id], one float product
 * as ref_quant.c's ref_qgather_run; ids checked against [-V, V) as Gather's
 * (hg_index_check: the error names the node). */
int hg_emit_qgather(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d)
{
	if (n->ninputs != 3 || n->noutputs != 1 || !n->inputs[0] || !n->inputs[1] || !n->inputs[2] || !n->outputs[0])
		return diag_fail(d, "%s: node '%s': QGather needs 3 inputs and 1 output", hg_model_name(g), n->name);
	const Value *tab = n->inputs[0], *ind = n->inputs[2];
	int64_t dd[8];
	int dr = hg_dims(g, n, tab, dd, d);
	if (dr < 0)
		return WL_ERR;
	if (dr != 2 || tab->type.elem != DT_INT8 || n->inputs[1]->type.elem != DT_FLOAT)
		return diag_fail(d, "%s: node '%s': tensor '%s': QGather needs an int8 [V, D] table and a float scale",
		                 hg_model_name(g), n->name, tab->name);
	if (ind->type.elem != DT_INT64 && ind->type.elem != DT_INT32)
		return diag_fail(d, "%s: node '%s': tensor '%s': indices must be int64 or int32", hg_model_name(g), n->name,
		                 ind->name);
	int64_t V = dd[0], D = dd[1], nidx = hg_numel(ind);
	if (nidx == 0 || D == 0)
		return WL_OK;
	LLVMBuilderRef b = g->b;
	LLVMTypeRef it = ind->type.elem == DT_INT64 ? g->t_i64 : g->t_i32;
	LLVMValueRef tp = hg_arg(g, fn, 0), sp = hg_arg(g, fn, 1), ip = hg_arg(g, fn, 2), yp = hg_arg(g, fn, 3);
	LLVMValueRef site = hg_index_site(g, n, fn, ind, V, 0);
	HgLoop l;
	LLVMValueRef i = hg_loop_begin(g, &l, hg_i64(g, 0), hg_i64(g, nidx), 1, "i");
	LLVMValueRef k = hg_load(g, it, ip, i);
	if (it != g->t_i64)
		k = LLVMBuildSExt(b, k, g->t_i64, "");
	k = hg_index_check(g, fn, site, i, k, V, 0);
	LLVMValueRef sc = hg_load(g, g->t_f32, sp, k);
	LLVMValueRef src = LLVMBuildMul(b, k, hg_i64(g, D), ""), dst = LLVMBuildMul(b, i, hg_i64(g, D), "");
	HgLoop lj;
	LLVMValueRef j = hg_loop_begin(g, &lj, hg_i64(g, 0), hg_i64(g, D), 1, "j");
	LLVMValueRef q = hg_load(g, g->t_i8, tp, LLVMBuildAdd(b, src, j, ""));
	LLVMValueRef v = LLVMBuildFMul(b, LLVMBuildSIToFP(b, q, g->t_f32, ""), sc, "");
	hg_store(g, v, yp, LLVMBuildAdd(b, dst, j, ""));
	hg_loop_end(g, &lj);
	hg_loop_end(g, &l);
	return WL_OK;
}
