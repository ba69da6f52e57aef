/* kgen_conv.c — host kernel of ai.wlower.ConvStem (docs/OPS.md; reference
 * runtime/interp/ref_fused.c):
 *   Conv1(k3, s1, p1) → GELU → Conv2(k3, s2, p1) → GELU → transpose → + pos.
 *
 * Both convolutions are direct (im2col-free) GEMMs in time-major layout:
 *   out[t, d] = bias[d] + Σ_k Σ_c in[t·s + k, c] · Wp[k·Cin + c, d]
 * where `in` is time-major with one zero row of padding at both ends and
 * Wp the weights repacked with the output channel fastest (at compile time
 * into weights.bin by hg_prepare_conv_stem when W1 and W2 are constants,
 * attribute host_packed; else at run time into the scratch), so the
 * micro-kernel is Mr time rows × Nv vectors of <vw x float>
 * output channels: per (k, c) Nv vector loads of Wp and Mr broadcasts of
 * the input, Mr·Nv FMAs into register accumulators. Bias and GELU are
 * applied in registers; conv1 writes the padded time-major h1 (which conv2
 * reads), conv2 adds the positional rows and writes y[b, t, :] directly
 * (time-major is the transposed layout the op produces). Parallel over
 * (channel block, time block) tasks through api->parallel_for, channel
 * block outermost so a thread keeps its weight panel in cache.
 *
 * Scratch: xT [(F+2), C], h1 [(F+2), Dp] (Dp = D rounded up to vw), and
 * Wp1 [3C, Dp], Wp2 [3D, Dp] unless they were packed at compile time. xT is
 * written in parallel over time blocks.
 *
 * --host-precision bf16 (Stem.bf): xT (rows of C rounded up to even, the
 * extra column 0) and h1 hold bf16, Wp holds bf16 pairs over the input
 * channels (emit_repack); each step of the micro-kernel broadcasts one channel
 * pair as a 32-bit lane into vdpbf16ps, half the steps; bias, GELU, the
 * positional rows and y stay float.
 */
#include <string.h>
#include "hostgen.h"

#define ALIGN64(x) (((x) + 63) & ~(uint64_t)63)

typedef struct Stem {
	int64_t B, C, F, F2, D, Dp;
	bool bf;                      /* --host-precision bf16: xT, h1 and Wp in bf16 pairs */
	bool packed;                  /* inputs 1 and 3 are Wp1 and Wp2 (hg_prepare_conv_stem) */
	int64_t Cx;                   /* xT row length: C (bf16: rounded up to even) */
	int64_t Mr, Nv;               /* micro-tile: Mr time rows x Nv vectors */
	uint64_t off_xt, off_w1, off_w2, off_h1, scratch;
} Stem;

static const char *model_of(HostGen *g)
{
	return g->opt && g->opt->model_path ? g->opt->model_path : "model";
}

static int stem_parse(HostGen *g, const Node *n, Stem *s, Diag *d)
{
	memset(s, 0, sizeof *s);
	const char *nm = n->name ? n->name : "";
	if (n->ninputs < 6 || n->noutputs < 1)
		return diag_fail(d, "%s: node '%s': tensor '': ConvStem needs 6 inputs", model_of(g), nm);
	s->packed = attr_int(n, "host_packed", 0) != 0;
	for (int i = 0; i < 6; i++)
		if (!n->inputs[i] || (n->inputs[i]->type.elem != DT_FLOAT && !(s->packed && (i == 1 || i == 3))))
			return diag_fail(d, "%s: node '%s': tensor '%s': ConvStem inputs must be float", model_of(g), nm,
			                 n->inputs[i] ? n->inputs[i]->name : "");
	const int64_t *st, *pd;
	int ns = attr_ints(n, "strides", &st), np = attr_ints(n, "pads", &pd);
	if ((ns >= 0 && (ns != 2 || st[0] != 1 || st[1] != 2)) || (np >= 0 && (np != 2 || pd[0] != 1 || pd[1] != 1)))
		return diag_fail(d, "%s: node '%s': tensor '%s': only strides [1, 2] and pads [1, 1] are supported",
		                 model_of(g), nm, n->inputs[0]->name);
	int64_t xd[8], w1[8], w2[8];
	int rx = hg_dims(g, n, n->inputs[0], xd, d);
	if (rx < 0)
		return WL_ERR;
	if (rx != 3 || xd[2] < 1)
		return diag_fail(d, "%s: node '%s': tensor '%s': expected [B, C, F]", model_of(g), nm, n->inputs[0]->name);
	s->B = xd[0];
	s->C = xd[1];
	s->F = xd[2];
	s->F2 = (s->F - 1) / 2 + 1;
	if (s->packed) {
		/* D from the biases; the packed weights' sizes were made to match */
		s->D = hg_numel(n->inputs[2]);
	} else {
		int r1 = hg_dims(g, n, n->inputs[1], w1, d);
		if (r1 < 0)
			return WL_ERR;
		int r2 = hg_dims(g, n, n->inputs[3], w2, d);
		if (r2 < 0)
			return WL_ERR;
		if (r1 != 3 || w1[1] != s->C || w1[2] != 3)
			return diag_fail(d, "%s: node '%s': tensor '%s': expected [D, %lld, 3]", model_of(g), nm,
			                 n->inputs[1]->name, (long long)s->C);
		s->D = w1[0];
		if (r2 != 3 || w2[0] != s->D || w2[1] != s->D || w2[2] != 3)
			return diag_fail(d, "%s: node '%s': tensor '%s': expected [D, D, 3]", model_of(g), nm, n->inputs[3]->name);
	}
	if (hg_numel(n->inputs[2]) != s->D || hg_numel(n->inputs[4]) != s->D)
		return diag_fail(d, "%s: node '%s': tensor '%s': biases must have D elements", model_of(g), nm,
		                 n->inputs[2]->name);
	if (hg_numel(n->inputs[5]) != s->F2 * s->D)
		return diag_fail(d, "%s: node '%s': tensor '%s': expected [%lld, %lld]", model_of(g), nm,
		                 n->inputs[5]->name, (long long)s->F2, (long long)s->D);
	int64_t vw = g->vw;
	s->Dp = (s->D + vw - 1) / vw * vw;
	/* 24 of 32 registers on AVX-512, 12 of 16 on AVX2 (4 x 2 there measured
	 * ~10 % slower than 4 x 3 and 6 x 2) */
	s->Mr = g->avx512 ? 6 : 4;
	s->Nv = g->avx512 ? 4 : 3;
	s->bf = g->bf16 && g->avx512 && vw == 16;
	s->Cx = s->bf ? (s->C + 1) / 2 * 2 : s->C;   /* bf16: the sizes below are upper bounds */
	if (s->packed) {
		/* the panels hg_prepare_conv_stem made: 3·Cp·Dp elements each (Cp = Cin,
		 * bf16: rounded up to even) */
		int64_t c1 = s->bf ? (s->C + 1) / 2 * 2 : s->C, c2 = s->bf ? (s->D + 1) / 2 * 2 : s->D;
		if (hg_numel(n->inputs[1]) != 3 * c1 * s->Dp || hg_numel(n->inputs[3]) != 3 * c2 * s->Dp)
			return diag_fail(d, "%s: node '%s': tensor '%s': packed weights of the wrong size", model_of(g), nm,
			                 n->inputs[1]->name);
	}
	s->off_xt = 0;
	s->off_w1 = ALIGN64((uint64_t)((s->F + 2) * s->C) * 4);
	s->off_w2 = s->off_w1 + (s->packed ? 0 : ALIGN64((uint64_t)(3 * s->C * s->Dp) * 4));
	s->off_h1 = s->off_w2 + (s->packed ? 0 : ALIGN64((uint64_t)(3 * s->D * s->Dp) * 4));
	s->scratch = s->off_h1 + ALIGN64((uint64_t)((s->F + 2) * s->Dp) * 4);
	return WL_OK;
}

/* Wp's element index of w[d, c, k] (the layout emit_repack writes):
 * float: (k·Cin + c)·Dp + d; bf16: ((k·Cp/2 + c/2)·Dp + d)·2 + c%2 with Cp =
 * Cin rounded up to even. */
static int64_t wp_index(int64_t Cin, int64_t Dp, bool bf, int64_t d, int64_t c, int64_t k)
{
	if (!bf)
		return (k * Cin + c) * Dp + d;
	int64_t Cp = (Cin + 1) / 2 * 2;
	return ((k * (Cp / 2) + c / 2) * Dp + d) * 2 + c % 2;
}

/* One constant weight [D, Cin, 3] as Wp (zero past D and, bf16, past Cin) */
static Value *pack_wp(Graph *gr, const Value *w, int64_t Cin, int64_t D, int64_t Dp, bool bf)
{
	int64_t Cp = bf ? (Cin + 1) / 2 * 2 : Cin;
	void *p;
	Value *v = hg_new_init(gr, bf ? "host_stem_wbf16" : "host_stem_w", bf ? DT_UINT16 : DT_FLOAT, 3 * Cp * Dp, &p);
	for (int64_t dd = 0; dd < D; dd++)
		for (int64_t c = 0; c < Cin; c++)
			for (int64_t k = 0; k < 3; k++) {
				/* tensor_get_f64: initializer data may sit at any offset of the
				 * mapped model file */
				float x = (float)tensor_get_f64(w->init, (dd * Cin + c) * 3 + k);
				int64_t i = wp_index(Cin, Dp, bf, dd, c, k);
				if (bf)
					((uint16_t *)p)[i] = dtype_f32_to_bf16(x);
				else
					((float *)p)[i] = x;
			}
	return v;
}

/* Before the plan: constant float W1 and W2 become Wp1 and Wp2 in weights.bin
 * (inputs 1 and 3, attribute host_packed), so a run does not repack them (the
 * 2·3·D·Dp floats of scratch go too); other weights stay for the run-time
 * repack. */
int hg_prepare_conv_stem(HostGen *g, Node *n, Diag *d)
{
	Stem st;
	if (stem_parse(g, n, &st, d) != WL_OK)
		return WL_ERR;
	if (st.packed)
		return WL_OK;
	const Value *w1 = n->inputs[1], *w2 = n->inputs[3];
	if (!w1->init || !w2->init || w1->init->dtype != DT_FLOAT || w2->init->dtype != DT_FLOAT ||
	    tensor_numel(w1->init) != st.D * st.C * 3 || tensor_numel(w2->init) != st.D * st.D * 3)
		return WL_OK;
	Value *p1 = pack_wp(n->graph, w1, st.C, st.D, st.Dp, st.bf);
	Value *p2 = pack_wp(n->graph, w2, st.D, st.D, st.Dp, st.bf);
	node_set_input(n, 1, p1);
	node_set_input(n, 3, p2);
	node_add_attr(n, "host_packed", AT_INT)->i = 1;
	return WL_OK;
}

static LLVMValueRef ci(HostGen *g, int64_t v)
{
	return hg_i64(g, v);
}

static LLVMValueRef mul(HostGen *g, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildMul(g->b, a, b, "");
}

static LLVMValueRef add(HostGen *g, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildAdd(g->b, a, b, "");
}

/* Wp[(k·Cin + c)·Dp + d] = w[d, c, k] (0 for d ≥ D), parallel over k·Cin + c.
 * bf16 (bf): pairs over c, Cp = Cin rounded up to even: element
 * ((k·Cp/2 + c/2)·Dp + d)·2 + c%2 = bf16(w[d, c, k]), 0 for c ≥ Cin. */
static void emit_repack(HostGen *g, LLVMValueRef api, LLVMValueRef w, LLVMValueRef wp, int64_t Cin, int64_t D,
                        int64_t Dp, bool bf)
{
	int64_t Cp = bf ? (Cin + 1) / 2 * 2 : Cin;
	LLVMValueRef caps[2] = {w, wp};
	HgPar p;
	hg_par_begin(g, &p, api, ci(g, 3 * Cp), caps, 2, "stem_repack");
	HgLoop lr;
	LLVMValueRef r = hg_loop_begin(g, &lr, p.i0, p.i1, 1, "r");
	LLVMValueRef k = LLVMBuildSDiv(g->b, r, ci(g, Cp), "k"), c = LLVMBuildSRem(g->b, r, ci(g, Cp), "c");
	LLVMValueRef cin = LLVMBuildICmp(g->b, LLVMIntSLT, c, ci(g, Cin), "");
	LLVMValueRef src = add(g, mul(g, LLVMBuildSelect(g->b, cin, c, ci(g, 0), ""), ci(g, 3)), k);
	HgLoop ld;
	LLVMValueRef dd = hg_loop_begin(g, &ld, ci(g, 0), ci(g, Dp), 1, "d");
	LLVMValueRef in = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, dd, ci(g, D), ""), cin, "");
	LLVMValueRef dc = LLVMBuildSelect(g->b, in, dd, ci(g, 0), "");
	LLVMValueRef v = hg_load(g, g->t_f32, p.cap[0], add(g, mul(g, dc, ci(g, Cin * 3)), src));
	v = LLVMBuildSelect(g->b, in, v, hg_f32(g, 0.0f), "");
	if (bf) {
		LLVMValueRef pr = add(g, mul(g, k, ci(g, Cp / 2)), LLVMBuildSDiv(g->b, c, ci(g, 2), ""));
		LLVMValueRef i = add(g, mul(g, add(g, mul(g, pr, ci(g, Dp)), dd), ci(g, 2)), LLVMBuildSRem(g->b, c, ci(g, 2), ""));
		hg_store(g, LLVMBuildFPTrunc(g->b, v, hg_t_bf16(g, 0), "wbf"), p.cap[1], i);
	} else {
		hg_store(g, v, hg_gepf(g, p.cap[1], mul(g, r, ci(g, Dp))), dd);
	}
	hg_loop_end(g, &ld);
	hg_loop_end(g, &lr);
	hg_par_end(g, &p);
}

/* One convolution: out rows t in [0, Tout), in: time-major, padded (row 0 is
 * time −1), ldin floats per row; stride s; Wp [3·Cin, Dp]. Output row t goes
 * to out[(t + orow)·ldout + d]; pos (or NULL) [Tout, D] is added after GELU.
 * bin: `in` (ldin even) and Wp are bf16, the reduction runs over channel pairs
 * (one 32-bit broadcast of (in[., c], in[., c+1]) per vdpbf16ps; a channel
 * past Cin is 0 in both); bout: the output is stored as bf16. */
static void emit_conv(HostGen *g, const Stem *st, LLVMValueRef api, LLVMValueRef in, int64_t ldin, int64_t Cin,
                      int64_t s, int64_t Tout, LLVMValueRef wp, LLVMValueRef bias, LLVMValueRef out, int64_t ldout,
                      int64_t orow, LLVMValueRef pos, bool bin, bool bout, const char *name)
{
	LLVMTypeRef ein = bin ? hg_t_bf16(g, 0) : g->t_f32;
	const int64_t csteps = bin ? (Cin + 1) / 2 : Cin;   /* reduction steps per tap */
	const int64_t vw = g->vw, Mr = st->Mr, NvMax = st->Nv, D = st->D, Dp = st->Dp;
	const int64_t nvt = Dp / vw;                       /* vectors per row */
	const int64_t ncb = (nvt + NvMax - 1) / NvMax;     /* channel blocks */
	const int64_t ntb = (Tout + Mr - 1) / Mr;          /* time blocks */
	LLVMValueRef caps[5] = {in, wp, bias, out, pos ? pos : LLVMConstNull(g->t_ptr)};
	HgPar p;
	hg_par_begin(g, &p, api, ci(g, ncb * ntb), caps, 5, name);
	LLVMValueRef cin = p.cap[0], cwp = p.cap[1], cb = p.cap[2], cout = p.cap[3], cpos = p.cap[4];
	HgLoop lt;
	LLVMValueRef task = hg_loop_begin(g, &lt, p.i0, p.i1, 1, "task");
	LLVMValueRef cbi = LLVMBuildSDiv(g->b, task, ci(g, ntb), "cb");
	LLVMValueRef t0 = mul(g, LLVMBuildSRem(g->b, task, ci(g, ntb), ""), ci(g, Mr));
	LLVMValueRef v0 = mul(g, cbi, ci(g, NvMax));   /* first vector of the block */
	/* the last channel block may be narrower: branch per static width */
	int64_t last_nv = nvt - (ncb - 1) * NvMax;
	LLVMValueRef is_last = LLVMBuildICmp(g->b, LLVMIntEQ, cbi, ci(g, ncb - 1), "");
	LLVMValueRef rowp[8];
	for (int64_t i = 0; i < Mr; i++) {
		/* clamp rows past Tout (their results are not stored) */
		LLVMValueRef t = add(g, t0, ci(g, i));
		LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntSLT, t, ci(g, Tout), "");
		t = LLVMBuildSelect(g->b, ok, t, ci(g, Tout - 1), "");
		rowp[i] = hg_gep(g, ein, cin, mul(g, mul(g, t, ci(g, s)), ci(g, ldin)));
	}
	const int64_t tailn = D - (Dp - vw);   /* lanes of the last vector of a row */
	/* the last block runs separately when narrower or ending in a partial vector */
	const bool split = ncb > 1 && (last_nv != NvMax || tailn < vw);
	for (int pass = 0; pass < 2; pass++) {
		int64_t nv = pass == 0 && split ? NvMax : last_nv;
		if (pass == 1 && !split)
			break;
		/* only the row's final vector may be partial */
		const bool tail_here = (pass == 1 || !split) && tailn < vw;
		HgIf fi;
		if (split)
			hg_if_begin(g, &fi, pass == 0 ? LLVMBuildNot(g->b, is_last, "") : is_last);
		LLVMValueRef d0 = mul(g, v0, ci(g, vw));
		LLVMValueRef acc[8][4], init = hg_vconst(g, 0.0f);
		LLVMValueRef res[8][4];
		for (int64_t k = 0; k < 3; k++) {
			HgLoop lc;
			LLVMValueRef c = hg_loop_begin(g, &lc, ci(g, 0), ci(g, csteps), 1, "c");
			for (int64_t i = 0; i < Mr; i++)
				for (int64_t v = 0; v < nv; v++)
					acc[i][v] = hg_loop_carry(g, &lc, k == 0 ? init : res[i][v]);
			/* Wp row (k, c) in 32-bit units: a float, or a pair of bf16 */
			LLVMValueRef wrow = add(g, mul(g, add(g, ci(g, k * csteps), c), ci(g, Dp)), d0);
			LLVMValueRef wv[4];
			for (int64_t v = 0; v < nv; v++) {
				LLVMValueRef wi = add(g, wrow, ci(g, v * vw));
				wv[v] = bin ? hg_bf16_load(g, cwp, wi) : hg_vload(g, cwp, wi);
			}
			for (int64_t i = 0; i < Mr; i++) {
				/* bf16: pair c of tap k (ldin even), in 32-bit units */
				LLVMValueRef xb = bin ? hg_bf16_bcast(g, rowp[i], add(g, ci(g, k * ldin / 2), c))
				                      : hg_vbroadcast(g, rowp[i], add(g, ci(g, k * ldin), c));
				for (int64_t v = 0; v < nv; v++)
					hg_loop_next(g, &lc, acc[i][v], bin ? hg_dpbf16(g, acc[i][v], xb, wv[v]) : hg_fma(g, xb, wv[v], acc[i][v]));
			}
			hg_loop_end(g, &lc);
			for (int64_t i = 0; i < Mr; i++)
				for (int64_t v = 0; v < nv; v++)
					res[i][v] = acc[i][v];
		}
		/* bias, GELU, (+ pos), store */
		LLVMValueRef bv[4];
		for (int64_t v = 0; v < nv; v++) {
			bool maybe_tail = tail_here && v == nv - 1;
			LLVMValueRef dv = add(g, d0, ci(g, v * vw));
			bv[v] = maybe_tail ? hg_vload_n(g, cb, dv, ci(g, tailn)) : hg_vload(g, cb, dv);
		}
		for (int64_t i = 0; i < Mr; i++) {
			LLVMValueRef t = add(g, t0, ci(g, i));
			HgIf fs;
			hg_if_begin(g, &fs, LLVMBuildICmp(g->b, LLVMIntSLT, t, ci(g, Tout), ""));
			LLVMValueRef orowp = hg_gep(g, bout ? hg_t_bf16(g, 0) : g->t_f32, cout, mul(g, add(g, t, ci(g, orow)), ci(g, ldout)));
			LLVMValueRef prow = pos ? hg_gepf(g, cpos, mul(g, t, ci(g, D))) : NULL;
			for (int64_t v = 0; v < nv; v++) {
				bool maybe_tail = tail_here && v == nv - 1;
				LLVMValueRef dv = add(g, d0, ci(g, v * vw));
				LLVMValueRef y = hg_gelu(g, LLVMBuildFAdd(g->b, res[i][v], bv[v], ""));
				if (pos)
					y = LLVMBuildFAdd(g->b, y, maybe_tail ? hg_vload_n(g, prow, dv, ci(g, tailn)) : hg_vload(g, prow, dv), "");
				if (bout) {   /* h1: rows of Dp, lanes past D are 0 (zero weights and bias) */
					LLVMValueRef sb = LLVMBuildStore(g->b, hg_to_bf16(g, y), hg_gep(g, hg_t_bf16(g, 0), orowp, dv));
					LLVMSetAlignment(sb, 2);
				} else if (maybe_tail && ldout == D) {
					hg_vstore_n(g, y, orowp, dv, ci(g, tailn));
				} else {
					hg_vstore(g, y, orowp, dv);
				}
			}
			hg_if_end(g, &fs);
		}
		if (split)
			hg_if_end(g, &fi);
	}
	hg_loop_end(g, &lt);
	hg_par_end(g, &p);
}

int hg_emit_conv_stem(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d)
{
	Stem st;
	if (stem_parse(g, n, &st, d))
		return WL_ERR;
	if (st.B == 0)
		return WL_OK;
	LLVMValueRef api = hg_api(g, fn);
	LLVMValueRef x = hg_arg(g, fn, 0), w1 = hg_arg(g, fn, 1), b1 = hg_arg(g, fn, 2), w2 = hg_arg(g, fn, 3),
	             b2 = hg_arg(g, fn, 4), pos = hg_arg(g, fn, 5), y = hg_arg(g, fn, n->ninputs);
	LLVMValueRef scr = hg_arg(g, fn, n->ninputs + n->noutputs);
	LLVMValueRef xt = hg_gep(g, g->t_i8, scr, ci(g, (int64_t)st.off_xt));
	LLVMValueRef wp1 = hg_gep(g, g->t_i8, scr, ci(g, (int64_t)st.off_w1));
	LLVMValueRef wp2 = hg_gep(g, g->t_i8, scr, ci(g, (int64_t)st.off_w2));
	LLVMValueRef h1 = hg_gep(g, g->t_i8, scr, ci(g, (int64_t)st.off_h1));
	LLVMValueRef zero = hg_f32(g, 0.0f);
	if (st.packed) {
		wp1 = w1;
		wp2 = w2;
	} else {
		emit_repack(g, api, w1, wp1, st.C, st.D, st.Dp, st.bf);
		emit_repack(g, api, w2, wp2, st.D, st.D, st.Dp, st.bf);
	}
	/* bf16: xT and h1 hold bf16 (xT rows of Cx = C rounded up to even, the
	 * extra column 0) */
	LLVMValueRef zx = st.bf ? LLVMConstNull(hg_t_bf16(g, 0)) : zero;
	/* zero padding rows of xT and h1 (never written below) */
	for (int64_t r = 0; r < 2; r++) {
		int64_t row = r == 0 ? 0 : st.F + 1;
		HgLoop lz;
		LLVMValueRef c = hg_loop_begin(g, &lz, ci(g, 0), ci(g, st.Cx), 1, "zc");
		hg_store(g, zx, xt, add(g, ci(g, row * st.Cx), c));
		hg_loop_end(g, &lz);
		HgLoop lz2;
		LLVMValueRef c2 = hg_loop_begin(g, &lz2, ci(g, 0), ci(g, st.Dp), 1, "zd");
		hg_store(g, zx, h1, add(g, ci(g, row * st.Dp), c2));
		hg_loop_end(g, &lz2);
	}
	if (st.Cx > st.C) {   /* the padding column of every row */
		HgLoop lz;
		LLVMValueRef t = hg_loop_begin(g, &lz, ci(g, 0), ci(g, st.F + 2), 1, "zt");
		hg_store(g, zx, xt, add(g, mul(g, t, ci(g, st.Cx)), ci(g, st.C)));
		hg_loop_end(g, &lz);
	}
	HgLoop lb;
	LLVMValueRef b = hg_loop_begin(g, &lb, ci(g, 0), ci(g, st.B), 1, "b");
	/* xT[t + 1, c] = x[b, c, t], in parallel over blocks of XT_ROWS time rows */
	{
		enum { XT_ROWS = 64 };
		LLVMValueRef caps[2] = {hg_gepf(g, x, mul(g, b, ci(g, st.C * st.F))), xt};
		HgPar p;
		hg_par_begin(g, &p, api, ci(g, (st.F + XT_ROWS - 1) / XT_ROWS), caps, 2, "stem_xt");
		HgLoop lk;
		LLVMValueRef blk = hg_loop_begin(g, &lk, p.i0, p.i1, 1, "xtb");
		LLVMValueRef t0 = mul(g, blk, ci(g, XT_ROWS)), t1 = add(g, t0, ci(g, XT_ROWS));
		t1 = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, t1, ci(g, st.F), ""), t1, ci(g, st.F), "");
		HgLoop lc;
		LLVMValueRef c = hg_loop_begin(g, &lc, ci(g, 0), ci(g, st.C), 1, "tc");
		HgLoop ltt;
		LLVMValueRef t = hg_loop_begin(g, &ltt, t0, t1, 1, "tt");
		LLVMValueRef v = hg_load(g, g->t_f32, p.cap[0], add(g, mul(g, c, ci(g, st.F)), t));
		if (st.bf)
			v = LLVMBuildFPTrunc(g->b, v, hg_t_bf16(g, 0), "xbf");
		hg_store(g, v, p.cap[1], add(g, mul(g, add(g, t, ci(g, 1)), ci(g, st.Cx)), c));
		hg_loop_end(g, &ltt);
		hg_loop_end(g, &lc);
		hg_loop_end(g, &lk);
		hg_par_end(g, &p);
	}
	emit_conv(g, &st, api, xt, st.Cx, st.C, 1, st.F, wp1, b1, h1, st.Dp, 1, NULL, st.bf, st.bf, "stem_conv1");
	LLVMValueRef yb = hg_gepf(g, y, mul(g, b, ci(g, st.F2 * st.D)));
	emit_conv(g, &st, api, h1, st.Dp, st.D, 2, st.F2, wp2, b2, yb, st.D, 0, pos, st.bf, false, "stem_conv2");
	hg_loop_end(g, &lb);
	return WL_OK;
}

uint64_t hg_scratch_conv_stem(HostGen *g, const Node *n)
{
	Stem st;
	Diag d = {0};
	if (stem_parse(g, n, &st, &d))
		return 0;
	return st.scratch;
}
