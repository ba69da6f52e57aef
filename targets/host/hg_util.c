/* hg_util.c — builder helpers shared by the host kernel generators
 * (declarations and usage in hostgen.h, section "hg_util.c"). */
#include <stdlib.h>
#include <string.h>
#include "hostgen.h"

LLVMValueRef hg_i64(HostGen *g, int64_t v) { return LLVMConstInt(g->t_i64, (unsigned long long)v, 1); }
LLVMValueRef hg_i32(HostGen *g, int32_t v) { return LLVMConstInt(g->t_i32, (unsigned long long)(int64_t)v, 1); }
LLVMValueRef hg_f32(HostGen *g, float v) { return LLVMConstReal(g->t_f32, v); }

LLVMValueRef hg_vconst(HostGen *g, float v)
{
	LLVMValueRef e[64];
	for (int i = 0; i < g->vw; i++)
		e[i] = hg_f32(g, v);
	return LLVMConstVector(e, (unsigned)g->vw);
}

LLVMValueRef hg_vsplat(HostGen *g, LLVMValueRef s)
{
	LLVMTypeRef et = LLVMTypeOf(s);
	LLVMTypeRef vt = LLVMVectorType(et, (unsigned)g->vw);
	LLVMValueRef v = LLVMBuildInsertElement(g->b, LLVMGetPoison(vt), s, hg_i32(g, 0), "");
	LLVMValueRef zero = LLVMConstNull(LLVMVectorType(g->t_i32, (unsigned)g->vw));
	return LLVMBuildShuffleVector(g->b, v, LLVMGetPoison(vt), zero, "splat");
}

LLVMValueRef hg_api(HostGen *g, LLVMValueRef fn) { (void)g; return LLVMGetParam(fn, 0); }

LLVMValueRef hg_arg(HostGen *g, LLVMValueRef fn, int i)
{
	LLVMValueRef args = LLVMGetParam(fn, 1);
	LLVMValueRef p = hg_gep(g, g->t_ptr, args, hg_i64(g, i));
	LLVMValueRef v = LLVMBuildLoad2(g->b, g->t_ptr, p, "arg");
	LLVMSetAlignment(v, 8);
	return v;
}

LLVMValueRef hg_gep(HostGen *g, LLVMTypeRef ty, LLVMValueRef p, LLVMValueRef i)
{
	return LLVMBuildInBoundsGEP2(g->b, ty, p, &i, 1, "");
}

LLVMValueRef hg_gepf(HostGen *g, LLVMValueRef p, LLVMValueRef i) { return hg_gep(g, g->t_f32, p, i); }

LLVMValueRef hg_load(HostGen *g, LLVMTypeRef ty, LLVMValueRef p, LLVMValueRef i)
{
	LLVMValueRef v = LLVMBuildLoad2(g->b, ty, hg_gep(g, ty, p, i), "");
	return v;
}

void hg_store(HostGen *g, LLVMValueRef v, LLVMValueRef p, LLVMValueRef i)
{
	LLVMBuildStore(g->b, v, hg_gep(g, LLVMTypeOf(v), p, i));
}

LLVMValueRef hg_alloca(HostGen *g, LLVMTypeRef ty, int64_t count, unsigned align, const char *name)
{
	LLVMBasicBlockRef cur = LLVMGetInsertBlock(g->b);
	LLVMValueRef fn = LLVMGetBasicBlockParent(cur);
	LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(fn);
	LLVMBuilderRef tb = LLVMCreateBuilderInContext(g->ctx);
	LLVMValueRef first = LLVMGetFirstInstruction(entry);
	if (first)
		LLVMPositionBuilderBefore(tb, first);
	else
		LLVMPositionBuilderAtEnd(tb, entry);
	LLVMValueRef a = count == 1 ? LLVMBuildAlloca(tb, ty, name)
	                            : LLVMBuildArrayAlloca(tb, ty, hg_i64(g, count), name);
	if (align)
		LLVMSetAlignment(a, align);
	LLVMDisposeBuilder(tb);
	return a;
}

/* ---------------------------------------------------------------- vectors */

LLVMValueRef hg_vload(HostGen *g, LLVMValueRef p, LLVMValueRef i)
{
	LLVMValueRef v = LLVMBuildLoad2(g->b, g->t_vf, hg_gepf(g, p, i), "vl");
	LLVMSetAlignment(v, 4);
	return v;
}

void hg_vstore(HostGen *g, LLVMValueRef v, LLVMValueRef p, LLVMValueRef i)
{
	LLVMValueRef s = LLVMBuildStore(g->b, v, hg_gepf(g, p, i));
	LLVMSetAlignment(s, 4);
}

static LLVMValueRef lane_mask(HostGen *g, LLVMValueRef n)
{
	LLVMValueRef e[64];
	for (int i = 0; i < g->vw; i++)
		e[i] = hg_i64(g, i);
	LLVMValueRef iota = LLVMConstVector(e, (unsigned)g->vw);
	return LLVMBuildICmp(g->b, LLVMIntSLT, iota, hg_vsplat(g, n), "mask");
}

static LLVMValueRef intr(HostGen *g, const char *name, LLVMTypeRef *tys, int ntys, LLVMValueRef *args, int nargs)
{
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	if (!id)
		wl_die(__FILE__, __LINE__, "unknown intrinsic %s", name);
	LLVMValueRef f = LLVMGetIntrinsicDeclaration(g->mod, id, tys, (size_t)ntys);
	LLVMTypeRef ft = LLVMIntrinsicGetType(g->ctx, id, tys, (size_t)ntys);
	return LLVMBuildCall2(g->b, ft, f, args, (unsigned)nargs, "");
}

LLVMValueRef hg_intrinsic(HostGen *g, const char *name, LLVMTypeRef ty, LLVMValueRef *args, int nargs)
{
	return intr(g, name, &ty, 1, args, nargs);
}

/* a non-overloaded target intrinsic (llvm.x86.*) by name */
LLVMValueRef hg_x86(HostGen *g, const char *name, LLVMValueRef *args, int nargs)
{
	return intr(g, name, NULL, 0, args, nargs);
}

LLVMTypeRef hg_t_bf16(HostGen *g, unsigned lanes)
{
	LLVMTypeRef t = LLVMBFloatTypeInContext(g->ctx);
	return lanes ? LLVMVectorType(t, lanes) : t;
}

LLVMValueRef hg_to_bf16(HostGen *g, LLVMValueRef v)
{
	return hg_x86(g, "llvm.x86.avx512bf16.cvtneps2bf16.512", &v, 1);
}

LLVMValueRef hg_dpbf16(HostGen *g, LLVMValueRef acc, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef args[3] = {acc, a, b};
	return hg_x86(g, "llvm.x86.avx512bf16.dpbf16ps.512", args, 3);
}

LLVMValueRef hg_bf16_load(HostGen *g, LLVMValueRef p, LLVMValueRef i)
{
	LLVMValueRef v = LLVMBuildLoad2(g->b, hg_t_bf16(g, 32), hg_gep(g, g->t_i32, p, i), "bfl");
	LLVMSetAlignment(v, 4);
	return v;
}

LLVMValueRef hg_bf16_bcast(HostGen *g, LLVMValueRef p, LLVMValueRef i)
{
	return LLVMBuildBitCast(g->b, hg_vsplat(g, hg_load(g, g->t_i32, p, i)), hg_t_bf16(g, 32), "bfb");
}

LLVMValueRef hg_bf16_to_f32(HostGen *g, LLVMValueRef p, LLVMValueRef i, int64_t n)
{
	LLVMTypeRef t16 = LLVMInt16TypeInContext(g->ctx), vi16 = LLVMVectorType(t16, (unsigned)g->vw);
	LLVMValueRef ptr = hg_gep(g, t16, p, i), x;
	if (n >= g->vw) {
		x = LLVMBuildLoad2(g->b, vi16, ptr, "bfrow");
		LLVMSetAlignment(x, 2);
	} else {
		LLVMTypeRef tys[2] = {vi16, g->t_ptr};
		LLVMValueRef a[4] = {ptr, hg_i32(g, 2), lane_mask(g, hg_i64(g, n)), LLVMConstNull(vi16)};
		x = intr(g, "llvm.masked.load", tys, 2, a, 4);
	}
	x = LLVMBuildZExt(g->b, x, LLVMVectorType(g->t_i32, (unsigned)g->vw), "");
	x = LLVMBuildShl(g->b, x, hg_vsplat(g, hg_i32(g, 16)), "");
	return LLVMBuildBitCast(g->b, x, g->t_vf, "bf2f");
}

LLVMValueRef hg_vload_n(HostGen *g, LLVMValueRef p, LLVMValueRef i, LLVMValueRef n)
{
	LLVMTypeRef tys[2] = {g->t_vf, g->t_ptr};
	LLVMValueRef a[4] = {hg_gepf(g, p, i), hg_i32(g, 4), lane_mask(g, n), hg_vconst(g, 0.0f)};
	return intr(g, "llvm.masked.load", tys, 2, a, 4);
}

void hg_vstore_n(HostGen *g, LLVMValueRef v, LLVMValueRef p, LLVMValueRef i, LLVMValueRef n)
{
	LLVMTypeRef tys[2] = {g->t_vf, g->t_ptr};
	LLVMValueRef a[4] = {v, hg_gepf(g, p, i), hg_i32(g, 4), lane_mask(g, n)};
	intr(g, "llvm.masked.store", tys, 2, a, 4);
}

LLVMValueRef hg_vbroadcast(HostGen *g, LLVMValueRef p, LLVMValueRef i)
{
	return hg_vsplat(g, hg_load(g, g->t_f32, p, i));
}

LLVMValueRef hg_vreduce_add(HostGen *g, LLVMValueRef v)
{
	LLVMTypeRef ty = LLVMTypeOf(v);
	LLVMValueRef a[2] = {hg_f32(g, -0.0f), v};
	LLVMValueRef r = intr(g, "llvm.vector.reduce.fadd", &ty, 1, a, 2);
	LLVMSetFastMathFlags(r, LLVMFastMathAllowReassoc);
	return r;
}

/* max(a, b) as one vmaxps: select(a > b, a, b) (b when either is NaN), not
 * llvm.maxnum, whose NaN rule costs a compare and a blend per use on x86 */
static LLVMValueRef fast_max(HostGen *g, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOGT, a, b, ""), a, b, "");
}

static LLVMValueRef fast_min(HostGen *g, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOLT, a, b, ""), a, b, "");
}

/* A shuffle tree of log2(lanes) vmaxps (llvm.vector.reduce.fmax without nnan
 * is a serial chain of NaN-checked scalar maxes: ~50 instructions at 16 lanes). */
LLVMValueRef hg_vreduce_max(HostGen *g, LLVMValueRef v)
{
	unsigned n = LLVMGetVectorSize(LLVMTypeOf(v));
	for (unsigned w = n / 2; w >= 1; w /= 2) {
		LLVMValueRef idx[64];
		for (unsigned l = 0; l < n; l++)
			idx[l] = hg_i32(g, (int32_t)((l + w) % n));
		v = fast_max(g, v, LLVMBuildShuffleVector(g->b, v, v, LLVMConstVector(idx, n), ""));
	}
	return LLVMBuildExtractElement(g->b, v, hg_i32(g, 0), "");
}

/* Two vectors of `rows` rows each (a segment of S = lanes/rows lanes per
 * row) → one of 2·rows rows, a's then b's, each the sum (max) of its
 * segment's two halves: two two-source shuffles and one vaddps / vmaxps. */
LLVMValueRef hg_rows_merge(HostGen *g, LLVMValueRef a, LLVMValueRef b, int rows, bool max)
{
	unsigned vw = LLVMGetVectorSize(LLVMTypeOf(a)), S = vw / (unsigned)rows;
	WL_ASSERT(S >= 2 && vw <= 64);
	LLVMValueRef lo[64], hi[64];
	for (unsigned l = 0; l < vw; l++) {
		/* result lane l: row l / (S/2) of the pair, offset l % (S/2) */
		unsigned row = l / (S / 2), off = l % (S / 2);
		unsigned src = row < (unsigned)rows ? row * S : vw + (row - (unsigned)rows) * S;
		lo[l] = hg_i32(g, (int32_t)(src + off));
		hi[l] = hg_i32(g, (int32_t)(src + S / 2 + off));
	}
	LLVMValueRef x = LLVMBuildShuffleVector(g->b, a, b, LLVMConstVector(lo, vw), "");
	LLVMValueRef y = LLVMBuildShuffleVector(g->b, a, b, LLVMConstVector(hi, vw), "");
	return max ? fast_max(g, x, y) : LLVMBuildFAdd(g->b, x, y, "");
}

/* Lane r (r < n) of the result: the max of the lanes of v[r] (n <= lanes;
 * the other lanes are unspecified). A transposing shuffle tree of
 * hg_rows_merge until one vector holds every row, then a butterfly within
 * the segments and one shuffle to gather lane r·S into lane r. 8 rows of 16
 * lanes: 24 vector operations, where 8 hg_vreduce_max take 64 and 8 inserts. */
LLVMValueRef hg_vreduce_max_rows(HostGen *g, LLVMValueRef *v, int n)
{
	unsigned vw = LLVMGetVectorSize(LLVMTypeOf(v[0]));
	int R = 1;
	while (R < n)
		R *= 2;
	WL_ASSERT(R <= (int)vw && R <= 64);
	LLVMValueRef cur[64];
	for (int r = 0; r < R; r++)
		cur[r] = v[r < n ? r : 0];
	int rows = 1;      /* rows per vector of cur */
	for (int cnt = R; cnt > 1; cnt /= 2, rows *= 2)
		for (int k = 0; k < cnt / 2; k++)
			cur[k] = hg_rows_merge(g, cur[2 * k], cur[2 * k + 1], rows, true);
	unsigned S = vw / (unsigned)R;
	LLVMValueRef x = cur[0], idx[64];
	for (unsigned w = S / 2; w >= 1; w /= 2) {
		for (unsigned l = 0; l < vw; l++)
			idx[l] = hg_i32(g, (int32_t)(l ^ w));
		x = fast_max(g, x, LLVMBuildShuffleVector(g->b, x, x, LLVMConstVector(idx, vw), ""));
	}
	if (S == 1)
		return x;
	for (unsigned l = 0; l < vw; l++)
		idx[l] = hg_i32(g, (int32_t)((l < (unsigned)R ? l : 0) * S));
	return LLVMBuildShuffleVector(g->b, x, x, LLVMConstVector(idx, vw), "rowmax");
}

/* ---------------------------------------------------------------- math */

LLVMValueRef hg_fma(HostGen *g, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
	/* no FMA3 (x86-64-v2, Sandy Bridge, ...): llvm.fma would be a libm fmaf
	 * call per lane (the encoder 100x slower); a multiply and an add instead */
	if (!g->fma)
		return LLVMBuildFAdd(g->b, LLVMBuildFMul(g->b, a, b, ""), c, "");
	LLVMValueRef x[3] = {a, b, c};
	return hg_intrinsic(g, "llvm.fma", LLVMTypeOf(a), x, 3);
}

LLVMValueRef hg_fmax(HostGen *g, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef x[2] = {a, b};
	return hg_intrinsic(g, "llvm.maxnum", LLVMTypeOf(a), x, 2);
}

LLVMValueRef hg_fmin(HostGen *g, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef x[2] = {a, b};
	return hg_intrinsic(g, "llvm.minnum", LLVMTypeOf(a), x, 2);
}

LLVMValueRef hg_sqrt(HostGen *g, LLVMValueRef x) { return hg_intrinsic(g, "llvm.sqrt", LLVMTypeOf(x), &x, 1); }

/* a constant of x's type (scalar or vector) */
static LLVMValueRef kof(HostGen *g, LLVMValueRef x, float v)
{
	LLVMTypeRef t = LLVMTypeOf(x);
	if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) {
		LLVMValueRef e[64];
		unsigned n = LLVMGetVectorSize(t);
		for (unsigned i = 0; i < n; i++)
			e[i] = hg_f32(g, v);
		return LLVMConstVector(e, n);
	}
	return hg_f32(g, v);
}

static LLVMTypeRef int_of(HostGen *g, LLVMValueRef x)
{
	LLVMTypeRef t = LLVMTypeOf(x);
	if (LLVMGetTypeKind(t) == LLVMVectorTypeKind)
		return LLVMVectorType(g->t_i32, LLVMGetVectorSize(t));
	return g->t_i32;
}

static LLVMValueRef iof(HostGen *g, LLVMValueRef x, int32_t v)
{
	LLVMTypeRef t = int_of(g, x);
	if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) {
		LLVMValueRef e[64];
		unsigned n = LLVMGetVectorSize(t);
		for (unsigned i = 0; i < n; i++)
			e[i] = hg_i32(g, v);
		return LLVMConstVector(e, n);
	}
	return hg_i32(g, v);
}

/* vscalefps applies: an AVX-512 <16 x float> */
static bool has_scalef(HostGen *g, LLVMTypeRef ty)
{
	return g->avx512 && LLVMGetTypeKind(ty) == LLVMVectorTypeKind && LLVMGetVectorSize(ty) == 16;
}

/* y · 2^n (n a float holding an integer): vscalefps (scalef: any n, a
 * <16 x float>), else the exponent bits (n + 127) << 23 (n in [−127, 127]:
 * the callers clamp). hg_exp and hg_exp2 end with it. */
static LLVMValueRef times_pow2(HostGen *g, LLVMValueRef y, LLVMValueRef n, bool scalef)
{
	LLVMTypeRef ty = LLVMTypeOf(y);
	if (scalef) {
		LLVMValueRef a[5] = {y, n, LLVMGetUndef(ty), LLVMConstInt(LLVMInt16TypeInContext(g->ctx), 0xffff, 0),
		                     hg_i32(g, 4) /* current rounding */};
		return intr(g, "llvm.x86.avx512.mask.scalef.ps.512", NULL, 0, a, 5);
	}
	LLVMValueRef ni = LLVMBuildFPToSI(g->b, n, int_of(g, y), "");
	LLVMValueRef e = LLVMBuildShl(g->b, LLVMBuildAdd(g->b, ni, iof(g, y, 127), ""), iof(g, y, 23), "");
	return LLVMBuildFMul(g->b, y, LLVMBuildBitCast(g->b, e, ty, ""), "");
}

/* exp(x) = 2^n · p(r), n = rint(x·log2 e), r = x − n·ln2 (ln2 split in two
 * for an exact reduction), p(r) = 1 + r + r²·q(r) with Cephes expf's degree-5 q
 * (|r| <= ln2/2). 2^n: vscalefps on AVX-512 vectors (x > 88.72 gives +inf,
 * NaN gives NaN), else the exponent bits (n + 127) << 23 on x clamped to
 * [−87, 88.376] by single vminps / vmaxps (no NaN rule). x < −87 (and −inf)
 * gives 0.
 * Error bound, tested against libm (exp in double) by exp_libm in
 * tests/oracle/test_host_kernels.py through the host Exp kernel, AVX-512 and
 * AVX2, 280k points over [−87, 88.376]: <= 2 ulp of the float result
 * (measured 1.22 ulp, relative 1.19e-7); exactly 0 below −87 and for −inf;
 * >= exp(88.376) above (+inf past 88.72 with vscalefps);
 * exp(0) = 1 exactly. */
LLVMValueRef hg_exp(HostGen *g, LLVMValueRef x)
{
	LLVMBuilderRef b = g->b;
	LLVMTypeRef ty = LLVMTypeOf(x);
	/* vscalefps takes any n (2^n overflows to inf, a NaN stays NaN), and the
	 * final select returns 0 below −87 whatever y is: no clamps; the exponent
	 * bits need n in [−126, 127] */
	bool scalef = has_scalef(g, ty);
	LLVMValueRef xc = scalef ? x : fast_min(g, fast_max(g, x, kof(g, x, -87.0f)), kof(g, x, 88.3762626647949f));
	LLVMValueRef t = LLVMBuildFMul(b, xc, kof(g, x, 1.44269504088896341f), "");
	LLVMValueRef n = hg_intrinsic(g, "llvm.rint", LLVMTypeOf(x), &t, 1);
	LLVMValueRef r = hg_fma(g, n, kof(g, x, -0.693359375f), xc);
	r = hg_fma(g, n, kof(g, x, 2.12194440e-4f), r);
	LLVMValueRef p = kof(g, x, 1.9875691500E-4f);
	p = hg_fma(g, p, r, kof(g, x, 1.3981999507E-3f));
	p = hg_fma(g, p, r, kof(g, x, 8.3334519073E-3f));
	p = hg_fma(g, p, r, kof(g, x, 4.1665795894E-2f));
	p = hg_fma(g, p, r, kof(g, x, 1.6666665459E-1f));
	p = hg_fma(g, p, r, kof(g, x, 5.0000001201E-1f));
	LLVMValueRef r2 = LLVMBuildFMul(b, r, r, "");
	LLVMValueRef y = hg_fma(g, p, r2, LLVMBuildFAdd(b, r, kof(g, x, 1.0f), ""));
	y = times_pow2(g, y, n, scalef);
	LLVMValueRef under = LLVMBuildFCmp(b, LLVMRealOLT, x, kof(g, x, -87.0f), "");
	return LLVMBuildSelect(b, under, kof(g, x, 0.0f), y, "exp");
}

/* 2^t = 2^n · q(r), n = rint(t), r = t − n (exact, |r| <= 1/2), q(r) = 1 +
 * r·(c1 + r·(c2 + ... + r·c6)): a degree-6 polynomial fitted to 2^r on
 * [−1/2, 1/2] for the least maximum relative error (Lawson's iteration,
 * float coefficients), 0.93 ulp there in float with fma. 2^n: vscalefps on
 * AVX-512 vectors after t is clamped below at −150 (2^−150 rounds to 0; −inf
 * and NaN give 0), else the exponent bits (n + 127) << 23 after t is clamped
 * to [−127, 127] (2^−127 gives 0). For the softmax's exponent in base 2 (the
 * attention folds log2 e into the query scale): 10 vector operations, where
 * hg_exp's reduction of x·log2 e and its underflow select take 15.
 * Error bound, tested against libm by exp2_libm in
 * tests/oracle/test_host_kernels.py (through the host Pow kernel with base
 * 2), AVX-512 and AVX2: <= 2 ulp over [−126, 127]; exactly 0 below −150
 * (−127 on AVX2) and for −inf; 2^0 = 1 exactly. */
LLVMValueRef hg_exp2(HostGen *g, LLVMValueRef t)
{
	LLVMBuilderRef b = g->b;
	LLVMTypeRef ty = LLVMTypeOf(t);
	bool scalef = has_scalef(g, ty);
	static const float c[] = {0.6931471824645996f, 0.24022647738456726f, 0.055503323674201965f,
	                          0.00961843691766262f, 0.0013398875016719103f, 0.00015353361959569156f};
	LLVMValueRef tc = scalef ? fast_max(g, t, kof(g, t, -150.0f))
	                         : fast_min(g, fast_max(g, t, kof(g, t, -127.0f)), kof(g, t, 127.0f));
	LLVMValueRef n = hg_intrinsic(g, "llvm.rint", ty, &tc, 1);
	LLVMValueRef r = LLVMBuildFSub(b, tc, n, "");
	LLVMValueRef p = kof(g, t, c[5]);
	for (int k = 4; k >= 0; k--)
		p = hg_fma(g, p, r, kof(g, t, c[k]));
	return times_pow2(g, hg_fma(g, p, r, kof(g, t, 1.0f)), n, scalef);
}

/* Rational approximation of erf on [-4, 4] (as Eigen's fast erf). */
LLVMValueRef hg_erf(HostGen *g, LLVMValueRef x)
{
	LLVMBuilderRef b = g->b;
	LLVMValueRef xc = hg_fmin(g, hg_fmax(g, x, kof(g, x, -4.0f)), kof(g, x, 4.0f));
	LLVMValueRef x2 = LLVMBuildFMul(b, xc, xc, "");
	static const float al[] = {-2.72614225801306e-10f, 2.77068142495902e-08f, -2.10102402082508e-06f,
	                           -5.69250639462346e-05f, -7.34990630326855e-04f, -2.95459980854025e-03f,
	                           -1.60960333262415e-02f};
	static const float be[] = {-1.45660718464996e-05f, -2.13374055278905e-04f, -1.68282697438203e-03f,
	                           -7.37332916720468e-03f, -1.42647390514189e-02f};
	LLVMValueRef p = kof(g, x, al[0]);
	for (int i = 1; i < 7; i++)
		p = hg_fma(g, x2, p, kof(g, x, al[i]));
	p = LLVMBuildFMul(b, xc, p, "");
	LLVMValueRef q = kof(g, x, be[0]);
	for (int i = 1; i < 5; i++)
		q = hg_fma(g, x2, q, kof(g, x, be[i]));
	return LLVMBuildFDiv(b, p, q, "erf");
}

LLVMValueRef hg_gelu(HostGen *g, LLVMValueRef x)
{
	LLVMBuilderRef b = g->b;
	LLVMValueRef e = hg_erf(g, LLVMBuildFMul(b, x, kof(g, x, 0.70710678118654752f), ""));
	LLVMValueRef h = LLVMBuildFMul(b, x, kof(g, x, 0.5f), "");
	return hg_fma(g, h, e, h);
}

LLVMValueRef hg_silu(HostGen *g, LLVMValueRef x)
{
	LLVMBuilderRef b = g->b;
	LLVMValueRef e = hg_exp(g, LLVMBuildFNeg(b, x, ""));
	return LLVMBuildFDiv(b, x, LLVMBuildFAdd(b, e, kof(g, x, 1.0f), ""), "silu");
}

/* ---------------------------------------------------------------- control flow */

static LLVMValueRef cur_fn(HostGen *g) { return LLVMGetBasicBlockParent(LLVMGetInsertBlock(g->b)); }

LLVMValueRef hg_loop_begin(HostGen *g, HgLoop *l, LLVMValueRef start, LLVMValueRef end, int64_t step, const char *name)
{
	WL_ASSERT(step > 0);
	memset(l, 0, sizeof *l);
	LLVMValueRef fn = cur_fn(g);
	l->pre = LLVMGetInsertBlock(g->b);
	l->head = LLVMAppendBasicBlockInContext(g->ctx, fn, "head");
	l->body = LLVMAppendBasicBlockInContext(g->ctx, fn, "body");
	l->exit = LLVMAppendBasicBlockInContext(g->ctx, fn, "exit");
	l->step = hg_i64(g, step);
	LLVMBuildBr(g->b, l->head);
	LLVMPositionBuilderAtEnd(g->b, l->head);
	l->iv = LLVMBuildPhi(g->b, g->t_i64, name);
	LLVMAddIncoming(l->iv, &start, &l->pre, 1);
	LLVMValueRef c = LLVMBuildICmp(g->b, LLVMIntSLT, l->iv, end, "");
	LLVMBuildCondBr(g->b, c, l->body, l->exit);
	LLVMPositionBuilderAtEnd(g->b, l->body);
	return l->iv;
}

LLVMValueRef hg_loop_carry(HostGen *g, HgLoop *l, LLVMValueRef init)
{
	WL_ASSERT(l->ncarry < HG_MAX_CARRY);
	LLVMBuilderRef tb = LLVMCreateBuilderInContext(g->ctx);
	/* after the iv phi, before the compare */
	LLVMPositionBuilderBefore(tb, LLVMGetNextInstruction(l->iv));
	LLVMValueRef phi = LLVMBuildPhi(tb, LLVMTypeOf(init), "carry");
	LLVMDisposeBuilder(tb);
	LLVMAddIncoming(phi, &init, &l->pre, 1);
	l->carry[l->ncarry] = phi;
	l->next[l->ncarry] = NULL;
	l->ncarry++;
	return phi;
}

void hg_loop_next(HostGen *g, HgLoop *l, LLVMValueRef carry, LLVMValueRef next)
{
	(void)g;
	for (int i = 0; i < l->ncarry; i++)
		if (l->carry[i] == carry) {
			l->next[i] = next;
			return;
		}
	WL_UNREACHABLE();
}

void hg_loop_end(HostGen *g, HgLoop *l)
{
	LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
	LLVMValueRef nx = LLVMBuildAdd(g->b, l->iv, l->step, "");
	LLVMSetNUW(nx, 1);
	LLVMSetNSW(nx, 1);
	LLVMBuildBr(g->b, l->head);
	LLVMAddIncoming(l->iv, &nx, &latch, 1);
	for (int i = 0; i < l->ncarry; i++) {
		LLVMValueRef v = l->next[i] ? l->next[i] : l->carry[i];
		LLVMAddIncoming(l->carry[i], &v, &latch, 1);
	}
	LLVMPositionBuilderAtEnd(g->b, l->exit);
}

void hg_if_begin(HostGen *g, HgIf *f, LLVMValueRef cond)
{
	LLVMValueRef fn = cur_fn(g);
	f->then_bb = LLVMAppendBasicBlockInContext(g->ctx, fn, "then");
	f->else_bb = LLVMAppendBasicBlockInContext(g->ctx, fn, "else");
	f->end_bb = LLVMAppendBasicBlockInContext(g->ctx, fn, "endif");
	f->has_else = false;
	LLVMBuildCondBr(g->b, cond, f->then_bb, f->else_bb);
	LLVMPositionBuilderAtEnd(g->b, f->then_bb);
}

void hg_if_else(HostGen *g, HgIf *f)
{
	LLVMBuildBr(g->b, f->end_bb);
	f->has_else = true;
	LLVMPositionBuilderAtEnd(g->b, f->else_bb);
}

void hg_if_end(HostGen *g, HgIf *f)
{
	LLVMBuildBr(g->b, f->end_bb);
	if (!f->has_else) {
		LLVMPositionBuilderAtEnd(g->b, f->else_bb);
		LLVMBuildBr(g->b, f->end_bb);
	}
	LLVMPositionBuilderAtEnd(g->b, f->end_bb);
}

/* ---------------------------------------------------------------- parallel_for */

void hg_par_begin(HostGen *g, HgPar *p, LLVMValueRef api, LLVMValueRef n, LLVMValueRef *caps, int ncap, const char *name)
{
	WL_ASSERT(ncap <= HG_MAX_CAP);
	memset(p, 0, sizeof *p);
	p->api = api;
	p->n = n;
	p->ncap = ncap;
	p->caller_bb = LLVMGetInsertBlock(g->b);
	/* ctx: a struct of the captured values in the caller's frame */
	LLVMTypeRef tys[HG_MAX_CAP];
	for (int i = 0; i < ncap; i++)
		tys[i] = LLVMTypeOf(caps[i]);
	LLVMTypeRef st = LLVMStructTypeInContext(g->ctx, tys, (unsigned)ncap, 0);
	p->ctx = hg_alloca(g, st, 1, 0, "parctx");
	for (int i = 0; i < ncap; i++)
		LLVMBuildStore(g->b, caps[i], LLVMBuildStructGEP2(g->b, st, p->ctx, (unsigned)i, ""));
	char fname[256];
	LLVMValueRef caller = cur_fn(g);
	size_t len;
	const char *cn = LLVMGetValueName2(caller, &len);
	/* the first free number in this module (not a process-wide counter: the
	 * autotune's trial modules must not change the module's symbol names) */
	for (int k = 0;; k++) {
		snprintf(fname, sizeof fname, "%.*s.%s.%d", (int)len, cn, name, k);
		if (!LLVMGetNamedFunction(g->mod, fname))
			break;
	}
	p->fn = LLVMAddFunction(g->mod, fname, g->t_body);
	LLVMSetLinkage(p->fn, LLVMInternalLinkage);
	LLVMBasicBlockRef e = LLVMAppendBasicBlockInContext(g->ctx, p->fn, "entry");
	LLVMPositionBuilderAtEnd(g->b, e);
	LLVMValueRef c = LLVMGetParam(p->fn, 0);
	p->i0 = LLVMGetParam(p->fn, 1);
	p->i1 = LLVMGetParam(p->fn, 2);
	for (int i = 0; i < ncap; i++)
		p->cap[i] = LLVMBuildLoad2(g->b, tys[i], LLVMBuildStructGEP2(g->b, st, c, (unsigned)i, ""), "cap");
}

void hg_par_end(HostGen *g, HgPar *p)
{
	LLVMBuildRetVoid(g->b);
	LLVMPositionBuilderAtEnd(g->b, p->caller_bb);
	/* api->parallel_for(api->pool, n, fn, ctx) */
	LLVMValueRef pool = LLVMBuildLoad2(g->b, g->t_ptr, LLVMBuildStructGEP2(g->b, g->t_api, p->api, 0, ""), "pool");
	LLVMValueRef pf = LLVMBuildLoad2(g->b, g->t_ptr, LLVMBuildStructGEP2(g->b, g->t_api, p->api, 2, ""), "pfor");
	LLVMTypeRef pt[4] = {g->t_ptr, g->t_i64, g->t_ptr, g->t_ptr};
	LLVMTypeRef ft = LLVMFunctionType(g->t_void, pt, 4, 0);
	LLVMValueRef a[4] = {pool, p->n, p->fn, p->ctx};
	LLVMBuildCall2(g->b, ft, pf, a, 4, "");
}

/* ---------------------------------------------------------------- shapes */

int hg_dims(HostGen *g, const Node *n, const Value *v, int64_t dims[8], Diag *d)
{
	const char *model = g->opt && g->opt->model_path ? g->opt->model_path : "model";
	if (!v->type.has_shape || v->type.rank > 8)
		return diag_fail(d, "%s: node '%s': tensor '%s': --target host needs a static shape", model, n->name,
		                 v->name);
	for (int i = 0; i < v->type.rank; i++) {
		if (v->type.dims[i].kind != DIM_VALUE)
			return diag_fail(d, "%s: node '%s': tensor '%s': dim %d is not static (--target host needs static shapes)",
			                 model, n->name, v->name, i);
		dims[i] = v->type.dims[i].value;
	}
	return v->type.rank;
}

int64_t hg_numel(const Value *v) { return type_numel(&v->type); }

/* ---------------------------------------------------------------- constant data, index checks */

LLVMValueRef hg_const_str(HostGen *g, const char *s)
{
	s = s ? s : "";
	LLVMValueRef init = LLVMConstStringInContext(g->ctx, s, (unsigned)strlen(s), 0);
	LLVMValueRef gv = LLVMAddGlobal(g->mod, LLVMTypeOf(init), "str");
	LLVMSetInitializer(gv, init);
	LLVMSetGlobalConstant(gv, 1);
	LLVMSetLinkage(gv, LLVMPrivateLinkage);
	LLVMSetUnnamedAddress(gv, LLVMGlobalUnnamedAddr);
	return gv;
}

LLVMValueRef hg_const_i64s(HostGen *g, const int64_t *v, int n)
{
	if (n <= 0)
		return LLVMConstNull(g->t_ptr);
	LLVMValueRef *e = calloc((size_t)n, sizeof *e);
	for (int i = 0; i < n; i++)
		e[i] = hg_i64(g, v[i]);
	LLVMValueRef init = LLVMConstArray2(g->t_i64, e, (uint64_t)n);
	free(e);
	LLVMValueRef gv = LLVMAddGlobal(g->mod, LLVMTypeOf(init), "dims");
	LLVMSetInitializer(gv, init);
	LLVMSetGlobalConstant(gv, 1);
	LLVMSetLinkage(gv, LLVMPrivateLinkage);
	return gv;
}

LLVMValueRef hg_index_site(HostGen *g, const Node *n, LLVMValueRef fn, const Value *ind, int64_t size, int flags)
{
	HgKfn *k = g->cur;
	int input = -1;
	for (int i = 0; i < n->ninputs && input < 0; i++)
		if (n->inputs[i] == ind)
			input = i;
	WL_ASSERT(k && input >= 0 && k->nsites < HG_MAX_SITES);
	k->site[k->nsites] = (HgSiteSpec){input, flags, size};
	return hg_arg(g, fn, k->arg0 + k->nsites++);
}

LLVMValueRef hg_site_data(HostGen *g, const Node *n, const HgSiteSpec *s)
{
	const Value *ind = n->inputs[s->input];
	int64_t dims[8];
	int rank = ind->type.has_shape && ind->type.rank <= 8 ? ind->type.rank : 0;
	for (int i = 0; i < rank; i++)
		dims[i] = ind->type.dims[i].kind == DIM_VALUE ? ind->type.dims[i].value : 1;
	LLVMValueRef f[7] = {hg_const_str(g, ind->name), hg_const_str(g, n->name), hg_const_str(g, n->op_type),
	                     hg_const_i64s(g, dims, rank), hg_i64(g, s->size), hg_i32(g, rank),
	                     hg_i32(g, s->flags | (ind->is_input ? INDEX_GRAPH_INPUT : 0))};
	LLVMValueRef init = LLVMConstStructInContext(g->ctx, f, 7, 0);
	LLVMValueRef gv = LLVMAddGlobal(g->mod, LLVMTypeOf(init), "site");
	LLVMSetInitializer(gv, init);
	LLVMSetGlobalConstant(gv, 1);
	LLVMSetLinkage(gv, LLVMPrivateLinkage);
	return gv;
}

LLVMValueRef hg_index_check(HostGen *g, LLVMValueRef fn, LLVMValueRef site, LLVMValueRef pos, LLVMValueRef k,
                            int64_t size, int flags)
{
	/* k + size wraps for k near INT64_MIN/MAX: unsigned, it is then >= 2·size */
	bool wrap = !(flags & INDEX_NO_WRAP);
	LLVMValueRef u = wrap ? LLVMBuildAdd(g->b, k, hg_i64(g, size), "") : k;
	LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntULT, u, hg_i64(g, wrap ? 2 * size : size), "inb");
	LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(g->ctx, fn, "oob"),
	                  cont = LLVMAppendBasicBlockInContext(g->ctx, fn, "inb");
	LLVMBuildCondBr(g->b, ok, cont, bad);
	LLVMPositionBuilderAtEnd(g->b, bad);
	LLVMValueRef api = LLVMGetParam(fn, 0);
	LLVMValueRef rt = LLVMBuildLoad2(g->b, g->t_ptr, LLVMBuildStructGEP2(g->b, g->t_api, api, 3, ""), "rt");
	LLVMValueRef cb = LLVMBuildLoad2(g->b, g->t_ptr, LLVMBuildStructGEP2(g->b, g->t_api, api, 4, ""), "ierr");
	LLVMTypeRef pt[4] = {g->t_ptr, g->t_ptr, g->t_i64, g->t_i64};
	LLVMValueRef ca[4] = {rt, site, pos, k};
	LLVMBuildCall2(g->b, LLVMFunctionType(g->t_void, pt, 4, 0), cb, ca, 4, "");
	LLVMBuildRet(g->b, hg_i32(g, WL_MODULE_EINDEX));
	LLVMPositionBuilderAtEnd(g->b, cont);
	if (!wrap)
		return k;
	LLVMValueRef neg = LLVMBuildICmp(g->b, LLVMIntSLT, k, hg_i64(g, 0), "");
	return LLVMBuildSelect(g->b, neg, LLVMBuildAdd(g->b, k, hg_i64(g, size), ""), k, "");
}

const char *hg_model_name(const HostGen *g) { return g->opt && g->opt->model_path ? g->opt->model_path : "model"; }

Value *hg_new_init(Graph *gr, const char *hint, int dtype, int64_t count, void **data)
{
	Value *v = graph_new_value(gr, hint);
	int64_t dims[1] = {count};
	Tensor *t = tensor_new(gr->mod->arena, v->name, dtype, 1, dims);
	*data = tensor_alloc_data(gr->mod->arena, t);
	graph_set_init(gr, v, t);
	type_set_tensor(gr->mod->arena, &v->type, dtype, 1, dims);
	return v;
}
