/* kgen_norm.c — host kernels: LayerNormalization and ai.wlower.RMSNorm over
 * the last axis. Rows are split across the pool; each row is read in vw-wide
 * vectors (scalar tail): LayerNorm makes two reduction passes (mean, then
 * the centred sum of squares, as the reference) and one writing pass;
 * RMSNorm one reduction and one writing pass. Statistics in float32. */
#include <string.h>
#include "hostgen.h"


/* sum over j in [0, D) of f(x[j]) where f = identity (center NULL, sq false),
 * x² (sq), or (x − center)² */
static LLVMValueRef row_sum(HostGen *g, LLVMValueRef x, int64_t D, LLVMValueRef center, bool sq)
{
	LLVMBuilderRef b = g->b;
	int64_t full = D / g->vw * g->vw;
	LLVMValueRef total = hg_f32(g, 0.0f);
	if (full > 0) {
		LLVMValueRef vc = center ? hg_vsplat(g, center) : NULL;
		HgLoop l;
		LLVMValueRef j = hg_loop_begin(g, &l, hg_i64(g, 0), hg_i64(g, full), g->vw, "j");
		LLVMValueRef acc = hg_loop_carry(g, &l, hg_vconst(g, 0.0f));
		LLVMValueRef v = hg_vload(g, x, j), nx;
		if (vc)
			v = LLVMBuildFSub(b, v, vc, "");
		nx = (sq || vc) ? hg_fma(g, v, v, acc) : LLVMBuildFAdd(b, acc, v, "");
		hg_loop_next(g, &l, acc, nx);
		hg_loop_end(g, &l);
		total = hg_vreduce_add(g, acc);
	}
	if (D > full) {
		HgLoop l;
		LLVMValueRef j = hg_loop_begin(g, &l, hg_i64(g, full), hg_i64(g, D), 1, "jt");
		LLVMValueRef acc = hg_loop_carry(g, &l, total);
		LLVMValueRef v = hg_load(g, g->t_f32, x, j), nx;
		if (center)
			v = LLVMBuildFSub(b, v, center, "");
		nx = (sq || center) ? hg_fma(g, v, v, acc) : LLVMBuildFAdd(b, acc, v, "");
		hg_loop_next(g, &l, acc, nx);
		hg_loop_end(g, &l);
		total = acc;
	}
	return total;
}

/* y[j] = (x[j] − mean) · inv · gamma[j] (+ beta[j]); mean may be NULL */
static void row_write(HostGen *g, LLVMValueRef x, LLVMValueRef y, int64_t D, LLVMValueRef mean, LLVMValueRef inv,
                      LLVMValueRef gamma, LLVMValueRef beta)
{
	LLVMBuilderRef b = g->b;
	int64_t full = D / g->vw * g->vw;
	if (full > 0) {
		LLVMValueRef vm = mean ? hg_vsplat(g, mean) : NULL, vi = hg_vsplat(g, inv);
		HgLoop l;
		LLVMValueRef j = hg_loop_begin(g, &l, hg_i64(g, 0), hg_i64(g, full), g->vw, "j");
		LLVMValueRef v = hg_vload(g, x, j);
		if (vm)
			v = LLVMBuildFSub(b, v, vm, "");
		v = LLVMBuildFMul(b, LLVMBuildFMul(b, v, vi, ""), hg_vload(g, gamma, j), "");
		if (beta)
			v = LLVMBuildFAdd(b, v, hg_vload(g, beta, j), "");
		hg_vstore(g, v, y, j);
		hg_loop_end(g, &l);
	}
	if (D > full) {
		HgLoop l;
		LLVMValueRef j = hg_loop_begin(g, &l, hg_i64(g, full), hg_i64(g, D), 1, "jt");
		LLVMValueRef v = hg_load(g, g->t_f32, x, j);
		if (mean)
			v = LLVMBuildFSub(b, v, mean, "");
		v = LLVMBuildFMul(b, LLVMBuildFMul(b, v, inv, ""), hg_load(g, g->t_f32, gamma, j), "");
		if (beta)
			v = LLVMBuildFAdd(b, v, hg_load(g, g->t_f32, beta, j), "");
		hg_store(g, v, y, j);
		hg_loop_end(g, &l);
	}
}

static int emit_norm(HostGen *g, const Node *n, LLVMValueRef fn, bool rms, Diag *d)
{
	if (n->ninputs < 2 || !n->inputs[0] || !n->inputs[1] || n->noutputs < 1 || !n->outputs[0])
		return diag_fail(d, "%s: node '%s': %s needs X, scale and an output", hg_model_name(g), n->name, n->op_type);
	for (int i = 1; i < n->noutputs; i++)
		if (n->outputs[i])
			return diag_fail(d, "%s: node '%s': tensor '%s': %s statistics outputs are not supported on host",
			                 hg_model_name(g), n->name, n->outputs[i]->name, n->op_type);
	const Value *x = n->inputs[0], *sc = n->inputs[1], *bi = !rms && n->ninputs > 2 ? n->inputs[2] : NULL;
	int64_t dims[8];
	int r = hg_dims(g, n, x, dims, d);
	if (r < 1)
		return r < 0 ? WL_ERR : diag_fail(d, "%s: node '%s': tensor '%s': rank 0", hg_model_name(g), n->name, x->name);
	int64_t axis = attr_int(n, "axis", -1);
	if (axis < 0)
		axis += r;
	if (axis != r - 1)
		return diag_fail(d, "%s: node '%s': %s on host normalizes the last axis only (axis=%lld)", hg_model_name(g),
		                 n->name, n->op_type, (long long)attr_int(n, "axis", -1));
	int64_t D = dims[r - 1], rows = hg_numel(x) / (D ? D : 1);
	const Value *chk[3] = {x, sc, bi};
	for (int i = 0; i < 3; i++)
		if (chk[i] && chk[i]->type.elem != DT_FLOAT)
			return diag_fail(d, "%s: node '%s': tensor '%s': %s on host supports float32 only", hg_model_name(g), n->name,
			                 chk[i]->name, n->op_type);
	if (hg_numel(sc) != D || (bi && hg_numel(bi) != D))
		return diag_fail(d, "%s: node '%s': tensor '%s': scale and bias must have %lld elements", hg_model_name(g),
		                 n->name, hg_numel(sc) != D ? sc->name : bi->name, (long long)D);
	if (D == 0 || rows == 0)
		return WL_OK;
	float eps = attr_float(n, "epsilon", rms ? 1e-6f : 1e-5f);
	int ybase = n->ninputs;
	LLVMValueRef caps[4] = {hg_arg(g, fn, 0), hg_arg(g, fn, 1), bi ? hg_arg(g, fn, 2) : LLVMConstNull(g->t_ptr),
	                        hg_arg(g, fn, ybase)};
	int64_t per = 8192 / D + 1;
	if (per > rows)
		per = rows;
	int64_t ntask = (rows + per - 1) / per;
	HgPar p;
	hg_par_begin(g, &p, hg_api(g, fn), hg_i64(g, ntask), caps, 4, rms ? "rms" : "ln");
	LLVMBuilderRef b = g->b;
	LLVMValueRef r0 = LLVMBuildMul(b, p.i0, hg_i64(g, per), "");
	LLVMValueRef r1 = LLVMBuildMul(b, p.i1, hg_i64(g, per), "");
	r1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, r1, hg_i64(g, rows), ""), r1, hg_i64(g, rows), "");
	HgLoop l;
	LLVMValueRef row = hg_loop_begin(g, &l, r0, r1, 1, "row");
	LLVMValueRef off = LLVMBuildMul(b, row, hg_i64(g, D), "");
	LLVMValueRef xr = hg_gepf(g, p.cap[0], off), yr = hg_gepf(g, p.cap[3], off);
	LLVMValueRef invD = hg_f32(g, 1.0f / (float)D);
	LLVMValueRef mean = NULL, var;
	if (rms) {
		var = LLVMBuildFMul(b, row_sum(g, xr, D, NULL, true), invD, "");
	} else {
		mean = LLVMBuildFMul(b, row_sum(g, xr, D, NULL, false), invD, "mean");
		var = LLVMBuildFMul(b, row_sum(g, xr, D, mean, true), invD, "var");
	}
	LLVMValueRef inv = LLVMBuildFDiv(b, hg_f32(g, 1.0f), hg_sqrt(g, LLVMBuildFAdd(b, var, hg_f32(g, eps), "")), "inv");
	row_write(g, xr, yr, D, mean, inv, p.cap[1], bi ? p.cap[2] : NULL);
	hg_loop_end(g, &l);
	hg_par_end(g, &p);
	return WL_OK;
}

int hg_emit_layernorm(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d) { return emit_norm(g, n, fn, false, d); }
int hg_emit_rmsnorm(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d) { return emit_norm(g, n, fn, true, d); }
