/* fuse_logmel.c — --prepend-logmel: the encoder takes the waveform and
 * computes Whisper's log-mel itself.
 *
 *   g (float[1, 80, F] input_features) => (...) {      g (float[1, 160·F] waveform) => (...)
 *     ...                                    →           <float[80, 201] mel_filters = ...> {
 *   }                                                   input_features = ai.wlower.LogMel <n_fft: int = 400,
 *                                                          hop: int = 160, n_mels: int = 80> (waveform, mel_filters)
 *                                                       ...
 *                                                     }
 *
 * Matched by structure: every graph input of type float [1, M, F] with M 80
 * or 128 (Whisper's mel counts) and F known. F = 3000 gives Whisper's
 * waveform [1, 480000] (30 s at 16 kHz); smaller F (test graphs) give 160·F
 * samples. The old input becomes an internal value (name kept) produced by
 * the LogMel node, which goes first in the graph.
 *
 * Mel filters: computed here, in double, exactly as librosa.filters.mel(sr =
 * 16000, n_fft = 400, n_mels = M) builds them (Slaney mel scale, Slaney area
 * normalization, float32 rounding where librosa rounds), which is how
 * Whisper's mel_filters.npz was made. Computing them avoids reading a
 * deflated .npz at compile time; tests/unit/test_fuse_linear.c checks them
 * against ../shared/data/whisper/mel_filters.npz (max error < 1e-6 relative
 * to the largest weight).
 *
 * Does nothing without ctx->fuse.prepend_logmel.
 *
 * requires  nothing (input types as declared)
 * maintains topological order, use lists, outputs
 * breaks    graph inputs (input_features is replaced by waveform)
 */
#include <math.h>
#include <string.h>
#include "passes.h"
#include "match.h"

enum { SR = 16000, NFFT = 400, HOP = 160, BINS = NFFT / 2 + 1 };

static double hz_to_mel(double f)
{
	const double f_sp = 200.0 / 3, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
	const double logstep = log(6.4) / 27.0;
	if (f >= min_log_hz)
		return min_log_mel + log(f / min_log_hz) / logstep;
	return f / f_sp;
}

static double mel_to_hz(double m)
{
	const double f_sp = 200.0 / 3, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
	const double logstep = log(6.4) / 27.0;
	if (m >= min_log_mel)
		return min_log_hz * exp(logstep * (m - min_log_mel));
	return f_sp * m;
}

void whisper_mel_filters(int n_mels, float *out)
{
	double mel_f[130], fft[BINS];
	double lo = hz_to_mel(0.0), hi = hz_to_mel(SR / 2.0);
	double step = (hi - lo) / (n_mels + 1);
	for (int i = 0; i < n_mels + 2; i++)   /* np.linspace */
		mel_f[i] = mel_to_hz(i == n_mels + 1 ? hi : lo + i * step);
	for (int k = 0; k < BINS; k++)            /* np.fft.rfftfreq(400, 1/16000) */
		fft[k] = k * (1.0 / (NFFT * (1.0 / SR)));
	for (int i = 0; i < n_mels; i++) {
		double fd0 = mel_f[i + 1] - mel_f[i], fd1 = mel_f[i + 2] - mel_f[i + 1];
		double enorm = 2.0 / (mel_f[i + 2] - mel_f[i]);
		for (int k = 0; k < BINS; k++) {
			double lower = -(mel_f[i] - fft[k]) / fd0, upper = (mel_f[i + 2] - fft[k]) / fd1;
			double w = lower < upper ? lower : upper;
			float w32 = (float)(w > 0 ? w : 0);
			out[i * BINS + k] = (float)((double)w32 * enorm);
		}
	}
}

typedef struct LogMelCapture {
	int slot;                  /* graph input index */
	Value *feat;
	int64_t mels, frames;
} LogMelCapture;

static bool match_logmel(Graph *g, int slot, LogMelCapture *c)
{
	memset(c, 0, sizeof *c);
	Value *v = g->inputs[slot];
	const Type *t = &v->type;
	if (v->init || t->kind != TY_TENSOR || t->elem != DT_FLOAT || !t->has_shape || t->rank != 3)
		return false;
	for (int i = 0; i < 3; i++)
		if (t->dims[i].kind != DIM_VALUE)
			return false;
	if (t->dims[0].value != 1 || (t->dims[1].value != 80 && t->dims[1].value != 128) || t->dims[2].value < 2)
		return false;
	c->slot = slot;
	c->feat = v;
	c->mels = t->dims[1].value;
	c->frames = t->dims[2].value;
	return true;
}

static void rewrite_logmel(Module *m, LogMelCapture *c)
{
	Graph *g = m->graph;
	Arena *ar = m->arena;
	Value *wave = graph_new_value(g, "waveform");
	int64_t wd[2] = {1, c->frames * HOP};
	type_set_tensor(ar, &wave->type, DT_FLOAT, 2, wd);
	Value *filt = graph_new_value(g, "mel_filters");
	int64_t fd[2] = {c->mels, BINS};
	Tensor *t = tensor_new(ar, filt->name, DT_FLOAT, 2, fd);
	whisper_mel_filters((int)c->mels, tensor_alloc_data(ar, t));
	graph_set_init(g, filt, t);
	Node *n = node_new(g, "LogMel", "ai.wlower", "/log_mel");
	node_add_attr(n, "n_fft", AT_INT)->i = NFFT;
	node_add_attr(n, "hop", AT_INT)->i = HOP;
	node_add_attr(n, "n_mels", AT_INT)->i = c->mels;
	if (g->first)
		node_insert_before(g->first, n);
	else
		node_append(g, n);
	g->inputs[c->slot] = wave;
	wave->is_input = true;
	c->feat->is_input = false;
	c->feat->in_value_info = true;
	node_add_input(n, wave);
	node_add_input(n, filt);
	node_add_output(n, c->feat);
}

int pass_fuse_logmel(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	if (!ctx || !ctx->fuse.prepend_logmel)
		return WL_OK;
	Graph *g = m->graph;
	int changed = 0;
	for (int i = 0; i < g->ninputs; i++) {
		LogMelCapture c;
		if (!match_logmel(g, i, &c))
			continue;
		rewrite_logmel(m, &c);
		changed++;
	}
	return fusion_done(m, ctx, changed);
}
