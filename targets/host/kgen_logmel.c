/* kgen_logmel.c — host kernel of ai.wlower.LogMel (docs/OPS.md; reference
 * runtime/interp/ref_fused.c): Whisper's log-mel spectrogram.
 *
 *   frames t = 0 .. N/160 − 1 (the last STFT frame dropped): 400 samples at
 *   t·160 − 200, reflect padded, times the periodic Hann window (float);
 *   |rDFT|² as a matrix product in double against a cos/sin table (module
 *   global constant, [400][bin-vector][cos|sin][dv], exact phase index
 *   k·n mod 400), rounded to float like the reference; mel projection in
 *   double against the filters transposed into scratch; log10(max(x, 1e-10))
 *   in double (frexp + atanh series); then the global max and
 *   (max(x, max − 8) + 4) / 4.
 *
 * Parallel over blocks of FB frames: each task windows its frames into a
 * stack tile, then per table column block (3 bin vectors: cos and sin)
 * runs a Mr x 6 broadcast-FMA micro-kernel on <dv x double> over the 400
 * samples for each group of Mr frames (the column block stays in cache for
 * the FB frames), then the mel micro-kernel (vectors over mels).
 */
#include <math.h>
#include <string.h>
#include <stdlib.h>
#include "hostgen.h"

#define ALIGN64(x) (((x) + 63) & ~(uint64_t)63)

enum { NFFT = 400, HOP = 160, BINS = 201, PAD = 200, FB = 32 };

typedef struct Lm {
	int64_t N, frames, M, Mp;
	int64_t dv, nbv, Mr;        /* doubles per vector, bin vectors (padded bins / dv) */
	uint64_t scratch;
} Lm;

static const char *model_of(HostGen *g)
{
	return g->opt && g->opt->model_path ? g->opt->model_path : "model";
}

static int lm_parse(HostGen *g, const Node *n, Lm *s, Diag *d)
{
	memset(s, 0, sizeof *s);
	const char *nm = n->name ? n->name : "";
	if (n->ninputs < 2 || !n->inputs[0] || !n->inputs[1] || n->noutputs < 1)
		return diag_fail(d, "%s: node '%s': tensor '': LogMel needs waveform and mel_filters", model_of(g), nm);
	if (attr_int(n, "n_fft", NFFT) != NFFT || attr_int(n, "hop", HOP) != HOP)
		return diag_fail(d, "%s: node '%s': tensor '%s': only n_fft 400 and hop 160 are supported", model_of(g), nm,
		                 n->inputs[0]->name);
	int64_t wd[8], fd[8];
	int rw = hg_dims(g, n, n->inputs[0], wd, d);
	if (rw < 0)
		return WL_ERR;
	int rf = hg_dims(g, n, n->inputs[1], fd, d);
	if (rf < 0)
		return WL_ERR;
	if (rw != 2 || wd[0] != 1 || wd[1] <= PAD || n->inputs[0]->type.elem != DT_FLOAT)
		return diag_fail(d, "%s: node '%s': tensor '%s': expected float [1, samples] with more than %d samples",
		                 model_of(g), nm, n->inputs[0]->name, PAD);
	s->M = attr_int(n, "n_mels", 80);
	if (rf != 2 || fd[0] != s->M || fd[1] != BINS || n->inputs[1]->type.elem != DT_FLOAT)
		return diag_fail(d, "%s: node '%s': tensor '%s': expected float [%lld, %d]", model_of(g), nm,
		                 n->inputs[1]->name, (long long)s->M, BINS);
	s->N = wd[1];
	s->frames = s->N / HOP;
	s->dv = g->vw / 2;
	s->nbv = (BINS + s->dv - 1) / s->dv;
	s->Mp = (s->M + s->dv - 1) / s->dv * s->dv;
	s->Mr = g->avx512 ? 4 : 2;
	s->scratch = ALIGN64((uint64_t)(BINS * s->Mp) * 8);
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

static LLVMValueRef cdbl_(HostGen *g, double v)
{
	return LLVMConstReal(LLVMDoubleTypeInContext(g->ctx), v);
}

/* double vectors */
static LLVMValueRef dvload(HostGen *g, LLVMTypeRef vt, LLVMValueRef p, LLVMValueRef i)
{
	LLVMValueRef a = hg_gep(g, LLVMDoubleTypeInContext(g->ctx), p, i);
	LLVMValueRef v = LLVMBuildLoad2(g->b, vt, a, "");
	LLVMSetAlignment(v, 8);
	return v;
}

static void dvstore(HostGen *g, LLVMValueRef v, LLVMValueRef p, LLVMValueRef i)
{
	LLVMValueRef a = hg_gep(g, LLVMDoubleTypeInContext(g->ctx), p, i);
	LLVMValueRef s = LLVMBuildStore(g->b, v, a);
	LLVMSetAlignment(s, 8);
}

static LLVMValueRef dsplat(HostGen *g, LLVMTypeRef vt, LLVMValueRef x)
{
	unsigned n = LLVMGetVectorSize(vt);
	LLVMValueRef u = LLVMGetUndef(vt);
	u = LLVMBuildInsertElement(g->b, u, x, hg_i32(g, 0), "");
	LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(g->t_i32, n));
	return LLVMBuildShuffleVector(g->b, u, LLVMGetUndef(vt), zeros, "");
}

/* A module-global constant of raw bytes (64-byte aligned). */
static LLVMValueRef const_blob(HostGen *g, const char *name, const void *data, size_t len)
{
	LLVMValueRef init = LLVMConstStringInContext2(g->ctx, data, len, 1);
	LLVMValueRef gv = LLVMAddGlobal(g->mod, LLVMTypeOf(init), name);
	LLVMSetInitializer(gv, init);
	LLVMSetGlobalConstant(gv, 1);
	LLVMSetLinkage(gv, LLVMPrivateLinkage);
	LLVMSetUnnamedAddr(gv, 1);
	LLVMSetAlignment(gv, 64);
	return gv;
}

/* ln(x) for x > 0 (normal), double: x = m·2^e, m in [√½, √2),
 * ln m = 2·atanh(s), s = (m − 1)/(m + 1), series to s^15. */
static LLVMValueRef dlog(HostGen *g, LLVMValueRef x)
{
	LLVMBuilderRef b = g->b;
	LLVMTypeRef dt = LLVMDoubleTypeInContext(g->ctx);
	LLVMValueRef bits = LLVMBuildBitCast(b, x, g->t_i64, "");
	LLVMValueRef ex = LLVMBuildSub(b, LLVMBuildLShr(b, bits, ci(g, 52), ""), ci(g, 1023), "");
	LLVMValueRef mb = LLVMBuildOr(b, LLVMBuildAnd(b, bits, ci(g, 0x000FFFFFFFFFFFFFLL), ""), ci(g, 0x3FF0000000000000LL), "");
	LLVMValueRef m = LLVMBuildBitCast(b, mb, dt, "");   /* [1, 2) */
	LLVMValueRef big = LLVMBuildFCmp(b, LLVMRealOGT, m, cdbl_(g, 1.4142135623730951), "");
	m = LLVMBuildSelect(b, big, LLVMBuildFMul(b, m, cdbl_(g, 0.5), ""), m, "");
	ex = LLVMBuildSelect(b, big, add(g, ex, ci(g, 1)), ex, "");
	LLVMValueRef s = LLVMBuildFDiv(b, LLVMBuildFSub(b, m, cdbl_(g, 1.0), ""), LLVMBuildFAdd(b, m, cdbl_(g, 1.0), ""), "");
	LLVMValueRef s2 = LLVMBuildFMul(b, s, s, "");
	LLVMValueRef p = cdbl_(g, 1.0 / 15);
	for (int k = 13; k >= 1; k -= 2)
		p = LLVMBuildFAdd(b, LLVMBuildFMul(b, p, s2, ""), cdbl_(g, 1.0 / k), "");
	LLVMValueRef lnm = LLVMBuildFMul(b, LLVMBuildFMul(b, p, s, ""), cdbl_(g, 2.0), "");
	LLVMValueRef ef = LLVMBuildSIToFP(b, ex, dt, "");
	return LLVMBuildFAdd(b, LLVMBuildFMul(b, ef, cdbl_(g, 0.69314718055994530942), ""), lnm, "ln");
}

int hg_emit_logmel(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d)
{
	Lm s;
	if (lm_parse(g, n, &s, d))
		return WL_ERR;
	if (s.frames == 0 || s.M == 0)
		return WL_OK;
	const int64_t dv = s.dv, nbv = s.nbv, Mr = s.Mr, Mp = s.Mp, M = s.M, frames = s.frames;
	const int64_t ldt = nbv * 2 * dv;   /* table row: [bin vector][cos|sin][dv] */
	LLVMTypeRef dt = LLVMDoubleTypeInContext(g->ctx), vt = LLVMVectorType(dt, (unsigned)dv);

	/* constant tables */
	double *tab = calloc((size_t)(NFFT * ldt), sizeof(double));
	float win[NFFT];
	WL_ASSERT(tab);
	for (int k = 0; k < BINS; k++)
		for (int nn = 0; nn < NFFT; nn++) {
			int64_t p = ((int64_t)k * nn) % NFFT;
			int64_t kv = k / dv, lane = k % dv;
			tab[nn * ldt + kv * 2 * dv + lane] = cos(2.0 * M_PI * (double)p / NFFT);
			tab[nn * ldt + kv * 2 * dv + dv + lane] = sin(2.0 * M_PI * (double)p / NFFT);
		}
	for (int nn = 0; nn < NFFT; nn++)
		win[nn] = (float)(0.5 - 0.5 * cos(2.0 * M_PI * nn / NFFT));
	LLVMValueRef gtab = const_blob(g, "logmel.dft", tab, (size_t)(NFFT * ldt) * sizeof(double));
	LLVMValueRef gwin = const_blob(g, "logmel.window", win, sizeof win);
	free(tab);

	LLVMValueRef api = hg_api(g, fn);
	LLVMValueRef x = hg_arg(g, fn, 0), filt = hg_arg(g, fn, 1), y = hg_arg(g, fn, n->ninputs);
	LLVMValueRef ft = hg_arg(g, fn, n->ninputs + n->noutputs);

	/* ft[k, m] = filt[m, k] (double), zero for m ≥ M */
	{
		HgLoop lk;
		LLVMValueRef k = hg_loop_begin(g, &lk, ci(g, 0), ci(g, BINS), 1, "k");
		HgLoop lm;
		LLVMValueRef m = hg_loop_begin(g, &lm, ci(g, 0), ci(g, Mp), 1, "m");
		LLVMValueRef in = LLVMBuildICmp(g->b, LLVMIntSLT, m, ci(g, M), "");
		LLVMValueRef mc = LLVMBuildSelect(g->b, in, m, ci(g, 0), "");
		LLVMValueRef f = LLVMBuildFPExt(g->b, hg_load(g, g->t_f32, filt, add(g, mul(g, mc, ci(g, BINS)), k)), dt, "");
		f = LLVMBuildSelect(g->b, in, f, cdbl_(g, 0.0), "");
		hg_store(g, f, ft, add(g, mul(g, k, ci(g, Mp)), m));
		hg_loop_end(g, &lm);
		hg_loop_end(g, &lk);
	}

	const int64_t nblk = (frames + FB - 1) / FB;
	LLVMValueRef caps[5] = {x, y, ft, gtab, gwin};
	HgPar par;
	hg_par_begin(g, &par, api, ci(g, nblk), caps, 5, "logmel");
	LLVMValueRef cx = par.cap[0], cy = par.cap[1], cft = par.cap[2], ctab = par.cap[3], cwin = par.cap[4];
	LLVMValueRef fr = hg_alloca(g, dt, FB * NFFT, 64, "frames");
	LLVMValueRef pw = hg_alloca(g, dt, FB * nbv * dv, 64, "power");
	HgLoop lb;
	LLVMValueRef blk = hg_loop_begin(g, &lb, par.i0, par.i1, 1, "blk");
	LLVMValueRef f0 = mul(g, blk, ci(g, FB));

	/* windowed frames (rows past the last frame: clamped to it, not stored) */
	{
		HgLoop lf;
		LLVMValueRef i = hg_loop_begin(g, &lf, ci(g, 0), ci(g, FB), 1, "fi");
		LLVMValueRef t = add(g, f0, i);
		LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntSLT, t, ci(g, frames), "");
		t = LLVMBuildSelect(g->b, ok, t, ci(g, frames - 1), "");
		LLVMValueRef start = LLVMBuildSub(g->b, mul(g, t, ci(g, HOP)), ci(g, PAD), "");
		HgLoop ln;
		LLVMValueRef nn = hg_loop_begin(g, &ln, ci(g, 0), ci(g, NFFT), 1, "n");
		LLVMValueRef idx = add(g, start, nn);
		LLVMValueRef neg = LLVMBuildICmp(g->b, LLVMIntSLT, idx, ci(g, 0), "");
		idx = LLVMBuildSelect(g->b, neg, LLVMBuildNeg(g->b, idx, ""), idx, "");
		LLVMValueRef hi = LLVMBuildICmp(g->b, LLVMIntSGE, idx, ci(g, s.N), "");
		idx = LLVMBuildSelect(g->b, hi, LLVMBuildSub(g->b, ci(g, 2 * (s.N - 1)), idx, ""), idx, "");
		/* pathological short inputs: keep the index inside the buffer */
		LLVMValueRef lo = LLVMBuildICmp(g->b, LLVMIntSLT, idx, ci(g, 0), "");
		idx = LLVMBuildSelect(g->b, lo, ci(g, 0), idx, "");
		LLVMValueRef v = LLVMBuildFMul(g->b, hg_load(g, g->t_f32, cx, idx), hg_load(g, g->t_f32, cwin, nn), "");
		hg_store(g, LLVMBuildFPExt(g->b, v, dt, ""), fr, add(g, mul(g, i, ci(g, NFFT)), nn));
		hg_loop_end(g, &ln);
		hg_loop_end(g, &lf);
	}

	/* power[i, k] = (float)(re² + im²) for FB frames */
	const int64_t BV = 3;   /* bin vectors per column block (6 accumulator vectors per frame) */
	for (int64_t kb = 0; kb < nbv; kb += BV) {
		int64_t nb = nbv - kb < BV ? nbv - kb : BV;
		HgLoop ls;
		LLVMValueRef i0 = hg_loop_begin(g, &ls, ci(g, 0), ci(g, FB), Mr, "sub");
		HgLoop ln;
		LLVMValueRef nn = hg_loop_begin(g, &ln, ci(g, 0), ci(g, NFFT), 1, "n");
		LLVMValueRef acc[4][6];
		for (int64_t r = 0; r < Mr; r++)
			for (int64_t v = 0; v < 2 * nb; v++)
				acc[r][v] = hg_loop_carry(g, &ln, LLVMConstNull(vt));
		LLVMValueRef trow = add(g, mul(g, nn, ci(g, ldt)), ci(g, kb * 2 * dv));
		LLVMValueRef tv[6];
		for (int64_t v = 0; v < 2 * nb; v++)
			tv[v] = dvload(g, vt, ctab, add(g, trow, ci(g, v * dv)));
		for (int64_t r = 0; r < Mr; r++) {
			LLVMValueRef fx = hg_load(g, dt, fr, add(g, mul(g, add(g, i0, ci(g, r)), ci(g, NFFT)), nn));
			LLVMValueRef fb = dsplat(g, vt, fx);
			for (int64_t v = 0; v < 2 * nb; v++)
				hg_loop_next(g, &ln, acc[r][v], hg_fma(g, fb, tv[v], acc[r][v]));
		}
		hg_loop_end(g, &ln);
		for (int64_t r = 0; r < Mr; r++)
			for (int64_t v = 0; v < nb; v++) {
				LLVMValueRef re = acc[r][2 * v], im = acc[r][2 * v + 1];
				LLVMValueRef p2 = LLVMBuildFAdd(g->b, LLVMBuildFMul(g->b, re, re, ""), LLVMBuildFMul(g->b, im, im, ""), "");
				LLVMTypeRef fvt = LLVMVectorType(g->t_f32, (unsigned)dv);
				p2 = LLVMBuildFPExt(g->b, LLVMBuildFPTrunc(g->b, p2, fvt, ""), vt, "");
				dvstore(g, p2, pw, add(g, mul(g, add(g, i0, ci(g, r)), ci(g, nbv * dv)), ci(g, (kb + v) * dv)));
			}
		hg_loop_end(g, &ls);
	}

	/* mels: e[i, m] = Σ_k ft[k, m] · power[i, k]; y[m, t] = log10(max((float)e, 1e-10)) */
	{
		const int64_t nmv = Mp / dv;
		HgLoop lf;
		LLVMValueRef i = hg_loop_begin(g, &lf, ci(g, 0), ci(g, FB), 1, "mi");
		LLVMValueRef t = add(g, f0, i);
		HgIf fin;
		hg_if_begin(g, &fin, LLVMBuildICmp(g->b, LLVMIntSLT, t, ci(g, frames), ""));
		for (int64_t m0 = 0; m0 < nmv; m0 += 8) {
			int64_t nm = nmv - m0 < 8 ? nmv - m0 : 8;
			HgLoop lk;
			LLVMValueRef k = hg_loop_begin(g, &lk, ci(g, 0), ci(g, BINS), 1, "k");
			LLVMValueRef acc[8];
			for (int64_t v = 0; v < nm; v++)
				acc[v] = hg_loop_carry(g, &lk, LLVMConstNull(vt));
			LLVMValueRef pb = dsplat(g, vt, hg_load(g, dt, pw, add(g, mul(g, i, ci(g, nbv * dv)), k)));
			for (int64_t v = 0; v < nm; v++) {
				LLVMValueRef fv = dvload(g, vt, cft, add(g, mul(g, k, ci(g, Mp)), ci(g, (m0 + v) * dv)));
				hg_loop_next(g, &lk, acc[v], hg_fma(g, pb, fv, acc[v]));
			}
			hg_loop_end(g, &lk);
			for (int64_t v = 0; v < nm; v++)
				for (int64_t lane = 0; lane < dv; lane++) {
					int64_t m = (m0 + v) * dv + lane;
					if (m >= M)
						break;
					LLVMValueRef e = LLVMBuildExtractElement(g->b, acc[v], hg_i32(g, (int32_t)lane), "");
					LLVMValueRef ef = LLVMBuildFPTrunc(g->b, e, g->t_f32, "");
					ef = hg_fmax(g, ef, hg_f32(g, 1e-10f));
					LLVMValueRef l10 = LLVMBuildFMul(g->b, dlog(g, LLVMBuildFPExt(g->b, ef, dt, "")),
					                                 cdbl_(g, 0.43429448190325182765), "");
					hg_store(g, LLVMBuildFPTrunc(g->b, l10, g->t_f32, ""), cy, add(g, ci(g, m * frames), t));
				}
		}
		hg_if_end(g, &fin);
		hg_loop_end(g, &lf);
	}
	hg_loop_end(g, &lb);
	hg_par_end(g, &par);

	/* global max, then (max(y, max − 8) + 4) / 4 */
	int64_t total = M * frames;
	HgLoop lmx;
	LLVMValueRef i = hg_loop_begin(g, &lmx, ci(g, 0), ci(g, total), 1, "mx");
	LLVMValueRef mx = hg_loop_carry(g, &lmx, hg_f32(g, -INFINITY));
	hg_loop_next(g, &lmx, mx, hg_fmax(g, mx, hg_load(g, g->t_f32, y, i)));
	hg_loop_end(g, &lmx);
	LLVMValueRef floor8 = LLVMBuildFSub(g->b, mx, hg_f32(g, 8.0f), "");
	HgLoop ln2;
	LLVMValueRef j = hg_loop_begin(g, &ln2, ci(g, 0), ci(g, total), 1, "nm");
	LLVMValueRef v = hg_fmax(g, hg_load(g, g->t_f32, y, j), floor8);
	v = LLVMBuildFDiv(g->b, LLVMBuildFAdd(g->b, v, hg_f32(g, 4.0f), ""), hg_f32(g, 4.0f), "");
	hg_store(g, v, y, j);
	hg_loop_end(g, &ln2);
	return WL_OK;
}

uint64_t hg_scratch_logmel(HostGen *g, const Node *n)
{
	Lm s;
	Diag d = {0};
	if (lm_parse(g, n, &s, &d))
		return 0;
	return s.scratch;
}
