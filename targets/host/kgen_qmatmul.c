/* kgen_qmatmul.c — host kernels for ai.wlower.QMatMul (docs/OPS.md), the
 * int8 GEMM with int32 accumulation; bit-exact with the reference kernel
 * (runtime/interp/ref_quant.c):
 *   acc[m, n] = Σ_k (xq[m, k] − zx) · wq[k, n]               int32, exact
 *   v         = float(acc) · (x_scale · w_scale[n])
 *   y         = v, or saturate(rint(v / y_scale) + zy) as int8
 *
 * Weights are repacked at compile time (hg_prepare_qmatmul, into weights.bin)
 * in NR-column panels (NR = 2 vectors of 32-bit lanes: 32 columns on AVX-512,
 * 16 on AVX2), groups of G consecutive k per column: panel t, group p holds
 * NR·G bytes, byte j·G + r = wq[p·G + r][t·NR + j] (zero past K and N). With
 * the panel come the column sums Σ_k wq[k, n] (int32) and w_scale per column
 * (float; per-tensor scales repeated), both padded to whole panels.
 *
 * Inner product per group of G k, for MR rows x NR columns in registers:
 *   VNNI (AVX512-VNNI, or AVX-VNNI on AVX2 machines), G = 4: vpdpbusd
 *     multiplies unsigned bytes by signed bytes, 4 products summed into each
 *     int32 lane without saturation: the activations are offset to unsigned
 *     (x + 128 = x XOR 0x80), and the epilogue subtracts (zx + 128)·colsum[n];
 *   otherwise G = 2: vpmaddwd on sign-extended 16-bit pairs (x0·w0 + x1·w1,
 *     |x·w| <= 2^14: never saturates), the epilogue subtracts zx·colsum[n]
 *     (WLOWER_HOST_NO_VNNI=1 forces this path; on an AVX512-VNNI CPU LLVM
 *     still fuses vpmaddwd + vpaddd into vpdpwssd, the same exact sums).
 * Both are exact modulo 2^32, so the result equals the reference's int32
 * sum whenever that does not overflow (K <= 65793: checked by the
 * reference and by hg_prepare_qmatmul).
 *
 * Activations are read in place; a K that is not a multiple of G ends with
 * one group read byte by byte (never past the row). Stores of the last,
 * partial panel are masked. Work split as kgen_matmul.c: M tiles x N groups.
 *
 * The int8 edges around it (QuantizeLinear / DequantizeLinear) are
 * kgen_quant.c's; so is the scale check (hg_check_scales, host.c).
 */
#include <stdlib.h>
#include <string.h>
#include "hostgen.h"


enum { QMM_MAX_K = 65793 };

typedef struct QM {
	const Node *n;
	int64_t M, K, N, T, Kg;
	int NR, NV, MR, G;
	bool vnni, qout, packed;
	/* inside the body */
	LLVMValueRef X, W, SC, CS, Y, sx, zfac, sy, zy;
} QM;

static int qm_read(HostGen *g, const Node *n, QM *q, Diag *d)
{
	memset(q, 0, sizeof *q);
	q->n = n;
	if (n->ninputs < 5 || !n->inputs[0] || !n->inputs[1] || !n->inputs[2] || !n->inputs[3] || !n->inputs[4] ||
	    n->noutputs != 1 || !n->outputs[0])
		return diag_fail(d, "%s: node '%s': QMatMul needs xq, x_scale, x_zero_point, wq, w_scale and one output",
		                 hg_model_name(g), n->name);
	q->qout = n->ninputs > 5 && n->inputs[5];
	if (q->qout && (n->ninputs < 7 || !n->inputs[6]))
		return diag_fail(d, "%s: node '%s': QMatMul: y_scale without y_zero_point", hg_model_name(g), n->name);
	q->packed = attr_int(n, "host_packed", 0) != 0;
	q->vnni = attr_int(n, "host_vnni", g->vnni) != 0;
	q->G = q->vnni ? 4 : 2;
	const Value *a = n->inputs[0];
	int64_t dims[8];
	int r = hg_dims(g, n, a, dims, d);
	if (r < 0)
		return WL_ERR;
	if (r < 1 || a->type.elem != DT_INT8)
		return diag_fail(d, "%s: node '%s': tensor '%s': expected int8 [..., K]", hg_model_name(g), n->name, a->name);
	q->K = dims[r - 1];
	const Value *y = n->outputs[0];
	int yr = hg_dims(g, n, y, dims, d);
	if (yr < 0)
		return WL_ERR;
	q->N = dims[yr - 1];
	if (y->type.elem != (q->qout ? DT_INT8 : DT_FLOAT))
		return diag_fail(d, "%s: node '%s': tensor '%s': expected %s output", hg_model_name(g), n->name, y->name,
		                 q->qout ? "int8" : "float32");
	if (q->K <= 0 || q->N <= 0)
		return diag_fail(d, "%s: node '%s': QMatMul needs positive K and N", hg_model_name(g), n->name);
	if (q->K > QMM_MAX_K)
		return diag_fail(d, "%s: node '%s': QMatMul: K = %lld exceeds %d (int32 accumulation)", hg_model_name(g), n->name,
		                 (long long)q->K, QMM_MAX_K);
	q->M = hg_numel(a) / q->K;
	q->NV = 2;
	q->NR = q->NV * g->vw;
	q->MR = g->avx512 ? 8 : 4;
	q->T = (q->N + q->NR - 1) / q->NR;
	q->Kg = (q->K + q->G - 1) / q->G;
	return WL_OK;
}

/* ---------------------------------------------------------------- repacking */

int hg_prepare_qmatmul(HostGen *g, Node *n, Diag *d)
{
	QM q;
	if (qm_read(g, n, &q, d) != WL_OK)
		return WL_ERR;
	if (q.packed)
		return WL_OK;
	const Value *W = n->inputs[3], *S = n->inputs[4];
	if (!W->init || W->init->dtype != DT_INT8 || W->init->ndim != 2 || W->init->dims[0] != q.K ||
	    W->init->dims[1] != q.N)
		return diag_fail(d, "%s: node '%s': tensor '%s': expected a constant int8 [%lld,%lld]", hg_model_name(g), n->name,
		                 W->name, (long long)q.K, (long long)q.N);
	int64_t ns = S->init ? tensor_numel(S->init) : -1;
	if (!S->init || S->init->dtype != DT_FLOAT || (ns != 1 && ns != q.N))
		return diag_fail(d, "%s: node '%s': tensor '%s': expected a constant float scale ([] or [%lld])", hg_model_name(g),
		                 n->name, S->name, (long long)q.N);
	for (int64_t j = 0; j < ns; j++) {
		double s = tensor_get_f64(S->init, j);
		if (!(s > 0) || s > 3.4e38)
			return diag_fail(d, "%s: node '%s': tensor '%s'[%lld] is %g: a scale must be positive and finite",
			                 hg_model_name(g), n->name, S->name, (long long)j, s);
	}
	const int8_t *w = W->init->data;
	int64_t NR = q.NR, G = q.G, K = q.K, N = q.N;
	Graph *gr = n->graph;
	void *pw, *ps, *pc;
	Value *vw = hg_new_init(gr, "host_w8", DT_INT8, q.T * q.Kg * NR * G, &pw);
	Value *vs = hg_new_init(gr, "host_wscale", DT_FLOAT, q.T * NR, &ps);
	Value *vc = hg_new_init(gr, "host_colsum", DT_INT32, q.T * NR, &pc);
	int8_t *ow = pw;
	float *os = ps;
	int32_t *oc = pc;
	for (int64_t t = 0; t < q.T; t++)
		for (int64_t j = 0; j < NR; j++) {
			int64_t col = t * NR + j;
			if (col >= N)
				continue; /* padding: zero weights, sums, scales */
			os[col] = (float)tensor_get_f64(S->init, ns == 1 ? 0 : col);
			int32_t sum = 0;
			for (int64_t k = 0; k < K; k++) {
				int8_t v = w[k * N + col];
				sum += v;
				ow[((t * q.Kg + k / G) * NR + j) * G + k % G] = v;
			}
			oc[col] = sum;
		}
	node_set_input(n, 3, vw);
	node_set_input(n, 4, vs);
	while (n->ninputs < 7)
		node_add_input(n, NULL);
	node_add_input(n, vc);
	node_add_attr(n, "host_packed", AT_INT)->i = 1;
	node_add_attr(n, "host_vnni", AT_INT)->i = g->vnni ? 1 : 0;
	return WL_OK;
}

uint64_t hg_scratch_qmatmul(HostGen *g, const Node *n) { (void)g; (void)n; return 0; }

/* ---------------------------------------------------------------- micro-kernel */

/* The activation group of row pointer xr at k (i64) as one i32: VNNI: 4 bytes
 * XOR 0x80 (unsigned x + 128); else two sign-extended 16-bit halves.
 * `avail` < G: only that many bytes exist (the rest reads as zero). */
static LLVMValueRef x_group(HostGen *g, QM *q, LLVMValueRef xr, LLVMValueRef k, int avail)
{
	LLVMBuilderRef b = g->b;
	LLVMValueRef p = hg_gep(g, g->t_i8, xr, k);
	if (q->vnni) {
		LLVMValueRef v;
		if (avail == 4) {
			v = LLVMBuildLoad2(b, g->t_i32, p, "xg");
			LLVMSetAlignment(v, 1);
		} else {
			v = hg_i32(g, 0);
			for (int r = 0; r < avail; r++) {
				LLVMValueRef by = LLVMBuildZExt(b, hg_load(g, g->t_i8, p, hg_i64(g, r)), g->t_i32, "");
				v = LLVMBuildOr(b, v, LLVMBuildShl(b, by, hg_i32(g, 8 * r), ""), "");
			}
			/* missing bytes: 0x80 after the XOR, times zero weights */
		}
		return LLVMBuildXor(b, v, hg_i32(g, (int32_t)0x80808080u), "");
	}
	LLVMValueRef x0 = LLVMBuildSExt(b, hg_load(g, g->t_i8, p, hg_i64(g, 0)), g->t_i16, "");
	LLVMValueRef lo = LLVMBuildZExt(b, x0, g->t_i32, "");
	if (avail < 2)
		return lo;
	LLVMValueRef x1 = LLVMBuildSExt(b, hg_load(g, g->t_i8, p, hg_i64(g, 1)), g->t_i16, "");
	return LLVMBuildOr(b, lo, LLVMBuildShl(b, LLVMBuildZExt(b, x1, g->t_i32, ""), hg_i32(g, 16), ""), "");
}

/* vpmaddwd of two <16 x i16> without AVX2: pmaddwd on each 8-lane half
 * (SSE2), the two <4 x i32> results joined */
static LLVMValueRef pmadd_sse2(HostGen *g, LLVMValueRef x, LLVMValueRef y)
{
	LLVMBuilderRef b = g->b;
	LLVMValueRef idx[16], p[2];
	for (int h = 0; h < 2; h++) {
		for (int i = 0; i < 8; i++)
			idx[i] = hg_i32(g, h * 8 + i);
		LLVMValueRef m = LLVMConstVector(idx, 8);
		LLVMValueRef a[2] = {LLVMBuildShuffleVector(b, x, x, m, ""), LLVMBuildShuffleVector(b, y, y, m, "")};
		p[h] = hg_x86(g, "llvm.x86.sse2.pmadd.wd", a, 2);
	}
	for (int i = 0; i < 8; i++)
		idx[i] = hg_i32(g, i);
	return LLVMBuildShuffleVector(b, p[0], p[1], LLVMConstVector(idx, 8), "");
}

/* acc += products of the broadcast group xg and weight vector wv (bytes) */
static LLVMValueRef mac(HostGen *g, QM *q, LLVMValueRef acc, LLVMValueRef xg, LLVMValueRef wv)
{
	LLVMBuilderRef b = g->b;
	int vw = g->vw;
	LLVMValueRef xs = hg_vsplat(g, xg);
	if (q->vnni) {
		LLVMValueRef a[3] = {acc, xs, LLVMBuildBitCast(b, wv, g->t_vi32, "")};
		return hg_x86(g, vw == 16 ? "llvm.x86.avx512.vpdpbusd.512" : "llvm.x86.avx512.vpdpbusd.256", a, 3);
	}
	LLVMTypeRef v16 = LLVMVectorType(g->t_i16, (unsigned)(2 * vw));
	LLVMValueRef a[2] = {LLVMBuildBitCast(b, xs, v16, ""), LLVMBuildSExt(b, wv, v16, "")};
	if (vw == 8 && !g->avx2)
		return LLVMBuildAdd(b, acc, pmadd_sse2(g, a[0], a[1]), "");
	if (vw == 4)
		return LLVMBuildAdd(b, acc, hg_x86(g, "llvm.x86.sse2.pmadd.wd", a, 2), "");
	LLVMValueRef p = hg_x86(g, vw == 16 ? "llvm.x86.avx512.pmaddw.d.512" : "llvm.x86.avx2.pmadd.wd", a, 2);
	return LLVMBuildAdd(b, acc, p, "");
}

/* lanes valid in vector h of panel t: clamp(N − t·NR − h·vw, 0, vw) */
static LLVMValueRef lanes(HostGen *g, QM *q, LLVMValueRef t, int h)
{
	LLVMBuilderRef b = g->b;
	LLVMValueRef r = LLVMBuildSub(b, hg_i64(g, q->N - (int64_t)h * g->vw), LLVMBuildMul(b, t, hg_i64(g, q->NR), ""), "");
	r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, r, hg_i64(g, 0), ""), hg_i64(g, 0), r, "");
	return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, r, hg_i64(g, g->vw), ""), hg_i64(g, g->vw), r, "");
}

static void store_out(HostGen *g, QM *q, LLVMValueRef v, LLVMValueRef off, LLVMValueRef nl)
{
	LLVMBuilderRef b = g->b;
	if (!q->qout) {
		if (nl)
			hg_vstore_n(g, v, q->Y, off, nl);
		else
			hg_vstore(g, v, q->Y, off);
		return;
	}
	/* QuantizeLinear: rint(v / y_scale) + zy, saturated */
	LLVMValueRef r = LLVMBuildFDiv(b, v, hg_vsplat(g, q->sy), "");
	r = hg_intrinsic(g, "llvm.rint", g->t_vf, &r, 1);
	r = LLVMBuildFAdd(b, r, hg_vsplat(g, q->zy), "");
	r = hg_fmin(g, hg_fmax(g, r, hg_vconst(g, -128.0f)), hg_vconst(g, 127.0f));
	LLVMTypeRef vi8 = LLVMVectorType(g->t_i8, (unsigned)g->vw);
	LLVMValueRef qi = LLVMBuildFPToSI(b, r, vi8, "q8");
	LLVMValueRef p = hg_gep(g, g->t_i8, q->Y, off);
	if (!nl) {
		LLVMValueRef st = LLVMBuildStore(b, qi, p);
		LLVMSetAlignment(st, 1);
		return;
	}
	LLVMValueRef e[64];
	for (int i = 0; i < g->vw; i++)
		e[i] = hg_i64(g, i);
	LLVMValueRef mask = LLVMBuildICmp(b, LLVMIntSLT, LLVMConstVector(e, (unsigned)g->vw), hg_vsplat(g, nl), "");
	LLVMTypeRef tys[2] = {vi8, g->t_ptr};
	LLVMValueRef a[4] = {qi, p, hg_i32(g, 1), mask};
	unsigned id = LLVMLookupIntrinsicID("llvm.masked.store", 17);
	LLVMBuildCall2(b, LLVMIntrinsicGetType(g->ctx, id, tys, 2), LLVMGetIntrinsicDeclaration(g->mod, id, tys, 2), a, 4, "");
}

/* Y[m0 .. m0+mr, panel t] */
static void tile(HostGen *g, QM *q, LLVMValueRef m0, int mr, LLVMValueRef t)
{
	LLVMBuilderRef b = g->b;
	int NV = q->NV, vw = g->vw, G = q->G;
	LLVMTypeRef vb = LLVMVectorType(g->t_i8, (unsigned)(vw * G));
	LLVMValueRef xrow = hg_gep(g, g->t_i8, q->X, LLVMBuildMul(b, m0, hg_i64(g, q->K), ""));
	LLVMValueRef wt = hg_gep(g, g->t_i8, q->W, LLVMBuildMul(b, t, hg_i64(g, q->Kg * q->NR * G), ""));
	LLVMValueRef acc[16][2];
	for (int i = 0; i < mr; i++)
		for (int h = 0; h < NV; h++)
			acc[i][h] = LLVMConstNull(g->t_vi32);
	int64_t full = q->K / G;
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 0 && full == 0)
			continue;
		if (pass == 1 && q->K % G == 0)
			break;
		HgLoop l;
		LLVMValueRef p = hg_loop_begin(g, &l, hg_i64(g, pass ? full : 0), hg_i64(g, pass ? full + 1 : full), 1, "p");
		LLVMValueRef c[16][2];
		for (int i = 0; i < mr; i++)
			for (int h = 0; h < NV; h++)
				c[i][h] = hg_loop_carry(g, &l, acc[i][h]);
		LLVMValueRef wv[2];
		for (int h = 0; h < NV; h++) {
			LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, p, hg_i64(g, (int64_t)q->NR * G), ""),
			                                hg_i64(g, (int64_t)h * vw * G), "");
			wv[h] = LLVMBuildLoad2(b, vb, hg_gep(g, g->t_i8, wt, off), "w8");
			LLVMSetAlignment(wv[h], 1);
		}
		LLVMValueRef k = LLVMBuildMul(b, p, hg_i64(g, G), "k");
		for (int i = 0; i < mr; i++) {
			LLVMValueRef xg = x_group(g, q, xrow, LLVMBuildAdd(b, k, hg_i64(g, (int64_t)i * q->K), ""),
			                          pass ? (int)(q->K % G) : G);
			for (int h = 0; h < NV; h++)
				hg_loop_next(g, &l, c[i][h], mac(g, q, c[i][h], xg, wv[h]));
		}
		hg_loop_end(g, &l);
		for (int i = 0; i < mr; i++)
			for (int h = 0; h < NV; h++)
				acc[i][h] = c[i][h];
	}
	/* epilogue */
	LLVMValueRef col0 = LLVMBuildMul(b, t, hg_i64(g, q->NR), "");
	LLVMValueRef corr[2], sv[2], nl[2];
	bool tail = q->N % q->NR != 0;
	for (int h = 0; h < NV; h++) {
		LLVMValueRef o = LLVMBuildAdd(b, col0, hg_i64(g, (int64_t)h * vw), "");
		LLVMValueRef cs = LLVMBuildLoad2(b, g->t_vi32, hg_gep(g, g->t_i32, q->CS, o), "cs");
		LLVMSetAlignment(cs, 4);
		corr[h] = LLVMBuildMul(b, cs, hg_vsplat(g, q->zfac), "");
		sv[h] = LLVMBuildFMul(b, hg_vsplat(g, q->sx), hg_vload(g, q->SC, o), "s");
		nl[h] = tail ? lanes(g, q, t, h) : NULL;
	}
	for (int i = 0; i < mr; i++) {
		LLVMValueRef yo = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, m0, hg_i64(g, i), ""), hg_i64(g, q->N), ""),
		                               col0, "");
		for (int h = 0; h < NV; h++) {
			LLVMValueRef a = LLVMBuildSub(b, acc[i][h], corr[h], "");
			LLVMValueRef v = LLVMBuildFMul(b, LLVMBuildSIToFP(b, a, g->t_vf, ""), sv[h], "v");
			store_out(g, q, v, LLVMBuildAdd(b, yo, hg_i64(g, (int64_t)h * vw), ""), nl[h]);
		}
	}
}

int hg_emit_qmatmul(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d)
{
	QM q;
	if (qm_read(g, n, &q, d) != WL_OK)
		return WL_ERR;
	if (!q.packed || n->ninputs < 8 || !n->inputs[7])
		return diag_fail(d, "%s: node '%s': QMatMul weights were not repacked", hg_model_name(g), n->name);
	if (q.vnni && !g->vnni)
		return diag_fail(d, "%s: node '%s': QMatMul packed for VNNI on a target without it", hg_model_name(g), n->name);
	if (q.M == 0)
		return WL_OK;
	LLVMBuilderRef b = g->b;
	int64_t mtiles = (q.M + q.MR - 1) / q.MR;
	int tail_mr = (int)(q.M % q.MR);
	int64_t ngroups = (32 + mtiles - 1) / mtiles;
	if (ngroups > q.T)
		ngroups = q.T;
	if (ngroups < 1)
		ngroups = 1;
	int64_t tpg = (q.T + ngroups - 1) / ngroups;
	ngroups = (q.T + tpg - 1) / tpg;
	/* scalars, read once in the kernel */
	LLVMValueRef sx = hg_load(g, g->t_f32, hg_arg(g, fn, 1), hg_i64(g, 0));
	LLVMValueRef zx = LLVMBuildSExt(b, hg_load(g, g->t_i8, hg_arg(g, fn, 2), hg_i64(g, 0)), g->t_i32, "zx");
	LLVMValueRef zfac = q.vnni ? LLVMBuildAdd(b, zx, hg_i32(g, 128), "") : zx;
	LLVMValueRef sy = hg_f32(g, 1.0f), zy = hg_f32(g, 0.0f);
	if (q.qout) {
		sy = hg_load(g, g->t_f32, hg_arg(g, fn, 5), hg_i64(g, 0));
		zy = LLVMBuildSIToFP(b, hg_load(g, g->t_i8, hg_arg(g, fn, 6), hg_i64(g, 0)), g->t_f32, "zy");
	}
	LLVMValueRef caps[10] = {hg_arg(g, fn, 0), hg_arg(g, fn, 3), hg_arg(g, fn, 4), hg_arg(g, fn, 7),
	                         hg_arg(g, fn, n->ninputs), sx, zfac, sy, zy};
	HgPar p;
	hg_par_begin(g, &p, hg_api(g, fn), hg_i64(g, mtiles * ngroups), caps, 9, "qgemm");
	q.X = p.cap[0];
	q.W = p.cap[1];
	q.SC = p.cap[2];
	q.CS = p.cap[3];
	q.Y = p.cap[4];
	q.sx = p.cap[5];
	q.zfac = p.cap[6];
	q.sy = p.cap[7];
	q.zy = p.cap[8];
	HgLoop lt;
	LLVMValueRef task = hg_loop_begin(g, &lt, p.i0, p.i1, 1, "task");
	LLVMValueRef mt = LLVMBuildSDiv(b, task, hg_i64(g, ngroups), "mt");
	LLVMValueRef ng = LLVMBuildSRem(b, task, hg_i64(g, ngroups), "ng");
	LLVMValueRef t0 = LLVMBuildMul(b, ng, hg_i64(g, tpg), "");
	LLVMValueRef t1 = LLVMBuildAdd(b, t0, hg_i64(g, tpg), "");
	t1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, t1, hg_i64(g, q.T), ""), t1, hg_i64(g, q.T), "");
	LLVMValueRef m0 = LLVMBuildMul(b, mt, hg_i64(g, q.MR), "m0");
	int main_mr = q.M < q.MR ? (int)q.M : q.MR;
	HgIf f;
	bool split_tail = tail_mr && q.M > q.MR;
	if (split_tail)
		hg_if_begin(g, &f, LLVMBuildICmp(b, LLVMIntEQ, mt, hg_i64(g, mtiles - 1), ""));
	for (int pass = 0; pass < (split_tail ? 2 : 1); pass++) {
		int mr = split_tail && pass == 0 ? tail_mr : main_mr;
		if (pass == 1)
			hg_if_else(g, &f);
		HgLoop ln;
		LLVMValueRef t = hg_loop_begin(g, &ln, t0, t1, 1, "t");
		tile(g, &q, m0, mr, t);
		hg_loop_end(g, &ln);
	}
	if (split_tail)
		hg_if_end(g, &f);
	hg_loop_end(g, &lt);
	hg_par_end(g, &p);
	return WL_OK;
}
