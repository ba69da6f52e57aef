/* ref_fused.c — reference kernels of ai.wlower ConvStem, LogMel and
 * GreedyArgMax (docs/OPS.md).
 *
 *   ConvStem      x [B,C,F]; w1 [D,C,3]; b1 [D]; w2 [D,D,3]; b2 [D]; pos [F2,D]
 *                 → y [B,F2,D], F2 = (F - 1) / 2 + 1. Both convolutions run on
 *                 the blocked GEMM (im2col read in place, as Conv does), GELU
 *                 is the exact erf form computed in double, then the transpose
 *                 and the positional add. Intermediates live in the node's
 *                 shared scratch.
 *   LogMel        waveform [1,N]; mel_filters [M,201] → mels [1,M,(N/160)]:
 *                 Whisper's recipe (reflect pad 200, periodic Hann 400, |rFFT|²
 *                 by a direct DFT against cos/sin tables, last frame dropped,
 *                 mel projection, log10 clamp at 1e-10, max − 8, (x + 4) / 4).
 *                 Frames are windowed in float; every sum is accumulated in
 *                 double. Frames run in parallel; results do not depend on the
 *                 thread count.
 *   GreedyArgMax  logits [..., V] float → int32 ids [...], first index on ties.
 */
#include "ref.h"

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

/* ---------------------------------------------------------------- ConvStem */

typedef struct Stem {
	int64_t B, C, F, F2, D;
} Stem;

int ref_stem_prepare(KCall *c, Diag *d)
{
	(void)d;
	c->state = arena_alloc(c->arena, sizeof(Stem));
	return WL_OK;
}

int ref_stem_infer(KCall *c, Diag *d)
{
	for (int i = 0; i < 6; i++)
		if (need_in(c, d, i, DTM(DT_FLOAT)))
			return WL_ERR;
	const int64_t *st, *pd;
	int ns = attr_ints(c->node, "strides", &st), np = attr_ints(c->node, "pads", &pd);
	if ((ns >= 0 && (ns != 2 || st[0] != 1 || st[1] != 2)) || (np >= 0 && (np != 2 || pd[0] != 1 || pd[1] != 1)))
		return kfail(c, d, "only strides [1, 2] and pads [1, 1] are supported");
	RTensor *x = c->in[0], *w1 = c->in[1], *b1 = c->in[2], *w2 = c->in[3], *b2 = c->in[4], *pos = c->in[5];
	char b[96];
	if (x->ndim != 3)
		return kfail(c, d, "tensor '%s' %s: expected [B, C, F]", kin_name(c, 0), kdesc(x, b));
	Stem *s = c->state;
	s->B = x->dims[0];
	s->C = x->dims[1];
	s->F = x->dims[2];
	s->F2 = s->F > 0 ? (s->F - 1) / 2 + 1 : 0;
	s->D = w1->ndim == 3 ? w1->dims[0] : -1;
	if (w1->ndim != 3 || w1->dims[1] != s->C || w1->dims[2] != 3)
		return kfail(c, d, "tensor '%s' %s: expected [D, %lld, 3]", kin_name(c, 1), kdesc(w1, b), (long long)s->C);
	if (w2->ndim != 3 || w2->dims[0] != s->D || w2->dims[1] != s->D || w2->dims[2] != 3)
		return kfail(c, d, "tensor '%s' %s: expected [%lld, %lld, 3]", kin_name(c, 3), kdesc(w2, b),
		             (long long)s->D, (long long)s->D);
	if (rt_numel(b1) != s->D || rt_numel(b2) != s->D)
		return kfail(c, d, "biases must have %lld elements", (long long)s->D);
	if (rt_numel(pos) != s->F2 * s->D)
		return kfail(c, d, "tensor '%s' %s: expected [%lld, %lld]", kin_name(c, 5), kdesc(pos, b),
		             (long long)s->F2, (long long)s->D);
	int64_t od[3] = {s->B, s->F2, s->D};
	set_out(c->out[0], DT_FLOAT, 3, od);
	c->scratch = gemm_scratch();
	c->shared = ALIGN64((size_t)(s->D * s->F) * 4) + ALIGN64((size_t)(s->D * s->F2) * 4);
	return WL_OK;
}

static void stem_conv(KCall *c, const float *x, int64_t C, int64_t Fin, int64_t Fout, int64_t stride,
                      const RTensor *w, const RTensor *bias, int64_t D, float *y)
{
	GemmB gb = {.kind = GB_IM2COL, .x = x, .sp = 1, .in = {Fin}, .out = {Fout}, .ker = {3},
	            .stride = {stride}, .dil = {1}, .pad = {1}};
	GemmArgs g = {.M = D, .N = Fout, .K = C * 3, .batch = 1, .a = w->data, .lda = C * 3, .b = &gb,
	              .c = y, .ldc = Fout};
	gemm_run(c->pool, c->scratch_base, c->scratch_stride, &g);
	const ufloat *bb = bias->data;
	for (int64_t m = 0; m < D; m++) {
		float *row = y + m * Fout;
		for (int64_t i = 0; i < Fout; i++) {
			double v = (double)(row[i] + bb[m]);
			row[i] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
		}
	}
}

int ref_stem_run(KCall *c, Diag *d)
{
	(void)d;
	Stem *s = c->state;
	float *h1 = c->shared_base;
	float *h2 = (float *)((char *)c->shared_base + ALIGN64((size_t)(s->D * s->F) * 4));
	const ufloat *pos = c->in[5]->data;
	const float *x = c->in[0]->data;
	float *y = c->out[0]->data;
	for (int64_t b = 0; b < s->B; b++) {
		stem_conv(c, x + b * s->C * s->F, s->C, s->F, s->F, 1, c->in[1], c->in[2], s->D, h1);
		stem_conv(c, h1, s->D, s->F, s->F2, 2, c->in[3], c->in[4], s->D, h2);
		float *yb = y + b * s->F2 * s->D;
		for (int64_t t = 0; t < s->F2; t++)
			for (int64_t k = 0; k < s->D; k++)
				yb[t * s->D + k] = h2[k * s->F2 + t] + pos[t * s->D + k];
	}
	return WL_OK;
}

/* ---------------------------------------------------------------- LogMel */

enum { LM_NFFT = 400, LM_HOP = 160, LM_BINS = LM_NFFT / 2 + 1, LM_PAD = LM_NFFT / 2 };

typedef struct LogMel {
	double cosb[LM_BINS * LM_NFFT], sinb[LM_BINS * LM_NFFT];
	float window[LM_NFFT];
	int64_t N, frames, mels;
} LogMel;

int ref_lm_prepare(KCall *c, Diag *d)
{
	int64_t nfft, hop, nm;
	if (attr_get_int(c, d, "n_fft", LM_NFFT, &nfft) || attr_get_int(c, d, "hop", LM_HOP, &hop) ||
	    attr_get_int(c, d, "n_mels", 80, &nm))
		return WL_ERR;
	if (nfft != LM_NFFT || hop != LM_HOP)
		return kfail(c, d, "only n_fft 400 and hop 160 are supported");
	LogMel *s = arena_alloc(c->arena, sizeof *s);
	for (int n = 0; n < LM_NFFT; n++)
		s->window[n] = (float)(0.5 - 0.5 * cos(2.0 * M_PI * n / LM_NFFT));
	for (int k = 0; k < LM_BINS; k++)
		for (int n = 0; n < LM_NFFT; n++) {
			int64_t p = ((int64_t)k * n) % LM_NFFT;   /* exact phase index */
			s->cosb[k * LM_NFFT + n] = cos(2.0 * M_PI * (double)p / LM_NFFT);
			s->sinb[k * LM_NFFT + n] = sin(2.0 * M_PI * (double)p / LM_NFFT);
		}
	s->mels = nm;
	c->state = s;
	return WL_OK;
}

int ref_lm_infer(KCall *c, Diag *d)
{
	LogMel *s = c->state;
	if (need_in(c, d, 0, DTM(DT_FLOAT)) || need_in(c, d, 1, DTM(DT_FLOAT)))
		return WL_ERR;
	RTensor *w = c->in[0], *f = c->in[1];
	char b[96];
	if (w->ndim != 2 || w->dims[0] != 1 || w->dims[1] <= LM_PAD)
		return kfail(c, d, "tensor '%s' %s: expected [1, samples] with more than %d samples", kin_name(c, 0),
		             kdesc(w, b), LM_PAD);
	if (f->ndim != 2 || f->dims[0] != s->mels || f->dims[1] != LM_BINS)
		return kfail(c, d, "tensor '%s' %s: expected [%lld, %d]", kin_name(c, 1), kdesc(f, b),
		             (long long)s->mels, LM_BINS);
	s->N = w->dims[1];
	s->frames = s->N / LM_HOP;   /* 1 + N / hop frames, the last dropped */
	int64_t od[3] = {1, s->mels, s->frames};
	set_out(c->out[0], DT_FLOAT, 3, od);
	c->scratch = (size_t)(LM_NFFT + LM_BINS) * sizeof(double) + 64;
	return WL_OK;
}

typedef struct LMJob {
	const LogMel *s;
	const KCall *c;
	const float *x;
	const ufloat *filt;
	float *y;                  /* [mels, frames]: log10 of the mel energies */
} LMJob;

static float reflect_at(const float *x, int64_t n, int64_t i)
{
	if (i < 0)
		i = -i;
	if (i >= n)
		i = 2 * (n - 1) - i;
	return x[i];
}

static void lm_frames(void *ctx, int64_t t0, int64_t t1, int tid)
{
	LMJob *j = ctx;
	const LogMel *s = j->s;
	double *fr = kscratch(j->c, tid), *pw = fr + LM_NFFT;
	for (int64_t t = t0; t < t1; t++) {
		int64_t start = t * LM_HOP - LM_PAD;
		for (int n = 0; n < LM_NFFT; n++)
			fr[n] = (double)(reflect_at(j->x, s->N, start + n) * s->window[n]);
		for (int k = 0; k < LM_BINS; k++) {
			const double *cb = s->cosb + k * LM_NFFT, *sb = s->sinb + k * LM_NFFT;
			double re = 0, im = 0;
			for (int n = 0; n < LM_NFFT; n++) {
				re += fr[n] * cb[n];
				im += fr[n] * sb[n];
			}
			pw[k] = (double)(float)(re * re + im * im);
		}
		for (int64_t m = 0; m < s->mels; m++) {
			double e = 0;
			for (int k = 0; k < LM_BINS; k++)
				e += (double)j->filt[m * LM_BINS + k] * pw[k];
			float ef = (float)e;
			j->y[m * s->frames + t] = log10f(ef > 1e-10f ? ef : 1e-10f);
		}
	}
}

int ref_lm_run(KCall *c, Diag *d)
{
	(void)d;
	LogMel *s = c->state;
	float *y = c->out[0]->data;
	LMJob j = {s, c, c->in[0]->data, c->in[1]->data, y};
	parallel_for(c->pool, s->frames, 8, lm_frames, &j);
	int64_t n = s->mels * s->frames;
	float mx = -INFINITY;
	for (int64_t i = 0; i < n; i++)
		mx = y[i] > mx ? y[i] : mx;
	for (int64_t i = 0; i < n; i++) {
		float v = y[i] > mx - 8.0f ? y[i] : mx - 8.0f;
		y[i] = (v + 4.0f) / 4.0f;
	}
	return WL_OK;
}

/* ---------------------------------------------------------------- GreedyArgMax */

int ref_am_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM(DT_FLOAT) | DTM(DT_FLOAT16)))
		return WL_ERR;
	RTensor *x = c->in[0];
	char b[96];
	if (x->ndim < 1 || x->dims[x->ndim - 1] < 1)
		return kfail(c, d, "tensor '%s' %s: expected [..., V] with V >= 1", kin_name(c, 0), kdesc(x, b));
	set_out(c->out[0], DT_INT32, x->ndim - 1, x->dims);
	return WL_OK;
}

int ref_am_run(KCall *c, Diag *d)
{
	(void)d;
	RTensor *x = c->in[0];
	int64_t V = x->dims[x->ndim - 1], rows = rt_numel(x) / V;
	int32_t *ids = c->out[0]->data;
	for (int64_t r = 0; r < rows; r++) {
		int64_t best = 0;
		double bv = get_f64(x->data, x->dtype, r * V);
		for (int64_t v = 1; v < V; v++) {
			double e = get_f64(x->data, x->dtype, r * V + v);
			if (e > bv || (bv != bv && e == e)) {
				bv = e;
				best = v;
			}
		}
		ids[r] = (int32_t)best;
	}
	return WL_OK;
}
