/* whisper.c — the Whisper loop (docs/FORMATS.md "Pipeline directories";
 * compiler/driver/cmd_pipeline_whisper.c makes the programs):
 *
 *   samples → windows of window_samples (30 s; zero padded) → mel → encoder
 *   → cross_kv (every layer's cross K/V, once per window) → the prompt
 *   <|startofprev|> prev... <|startoftranscript|> <|lang|> <|task|>
 *   [<|notimestamps|>] one position at a time through `step`, then sampled
 *   tokens until <|endoftext|> or max_tokens → segments split at timestamp
 *   pairs; the next window starts at the last timestamp (seek), as
 *   openai-whisper's transcribe() does.
 *
 * The self-attention cache is static: per layer key and value buffers
 * [1, H, S-1, hd] (S = text_ctx) bound as the step's past inputs and read in
 * place (GroupQueryAttention static_cache = 1: compiler/driver/
 * cmd_pipeline_whisper.c). At position p the step reads attention_mask 1 on
 * rows < p and on row S-1 (the new token's own key, after the S-1 cache
 * rows), 0 elsewhere, and position_ids = p; its present outputs are the new
 * token's K/V only ([1, H, 1, hd]), which are written into cache row p (hd
 * floats per head). Nothing copies the cache per step, so a step costs the
 * same at every p but for attention over the p rows in use. S-1 rows suffice:
 * positions run 0..S-1 and the last one's row is never read (not written).
 *
 * Decoding rules (openai-whisper decoding.py, greedy at temperature 0; beam
 * search below, decode_beam):
 * SuppressBlank (at the first sampled token " " and <|endoftext|>),
 * SuppressTokens (OpenAI's default non-speech list "-1" of the multilingual
 * vocabulary, and the special tokens translate, transcribe, startoftranscript,
 * startofprev, startoflm, nospeech), then with timestamps ApplyTimestampRules
 * (<|notimestamps|> suppressed; pairs; monotonic with nonzero segments; the
 * first token a timestamp <= 1.00 s; a timestamp forced when their summed
 * probability beats every text token; and, for windows shorter than 30 s
 * (test models), no timestamp past the window's end: audio_ctx · 0.02 s). avg_logprob = sum of the chosen
 * tokens' log-probabilities (eot included) / (tokens + 1); no_speech_prob =
 * softmax of the logits at <|startoftranscript|>, at <|nospeech|>. A window
 * with no_speech_prob > 0.6 and avg_logprob < -1 is skipped as silence.
 * With temperature > 0 tokens are sampled (xorshift64*, seeded); fallback
 * retries at +0.2 up to 1.0 while the text's zlib compression ratio is > 2.4
 * or avg_logprob < -1.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "pipeline.h"

enum { MAX_LAYERS = 64 };

struct Whisper {
	WhisperInfo info;
	char *target;
	Program *mel, *encoder, *cross, *step;
	RTensor wave, ids, pos, mask, sot;        /* [1,N] float, [1,1], [1], [1,S], [1,1] int64 */
	RTensor *cache;                           /* 2·layers [1,H,S-1,hd] */
	char **past, **present, **cross_in, **cross_out;
	float *work;                              /* vocab floats */
	double *lp;                               /* vocab log-probabilities */
	RTensor *slots;                           /* beam search: (nslots - 1) · 2·layers more caches */
	int nslots;                               /* cache sets (slot 0 is `cache`) */
	float *blogits;                           /* beam search: nslots · vocab logits */
};

/* OpenAI's default suppress_tokens ("-1": non-speech symbols) for the
 * multilingual vocabulary, as its generation config lists them. */
static const int64_t SUPPRESS[] = {
	1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92, 93, 359, 503, 522, 542, 873,
	893, 902, 918, 922, 931, 1350, 1853, 1982, 2460, 2627, 3246, 3253, 3268, 3536, 3846, 3961, 4183, 4667, 6585,
	6647, 7273, 9061, 9383, 10428, 10929, 11938, 12033, 12331, 12562, 13793, 14157, 14635, 15265, 15618, 16553,
	16604, 18362, 18956, 20075, 21675, 22520, 26130, 26161, 26435, 28279, 29464, 31650, 32302, 32470, 36865,
	42863, 47425, 49870, 50254,
};

static int find_program(const cJSON *root, const char *file, const char *name, const char *dir, int threads,
                        Program **out, Diag *d)
{
	const cJSON *p;
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(root, "programs")) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(p, "name");
		const cJSON *dr = cJSON_GetObjectItemCaseSensitive(p, "dir");
		const cJSON *rn = cJSON_GetObjectItemCaseSensitive(p, "runner");
		if (!cJSON_IsString(nm) || strcmp(nm->valuestring, name) != 0)
			continue;
		if (!cJSON_IsString(dr) || !cJSON_IsString(rn) || strchr(dr->valuestring, '/') ||
		    strstr(dr->valuestring, ".."))
			return diag_fail(d, "%s: program '%s': needs a folder 'dir' and a 'runner'", file, name);
		char pdir[4096];
		snprintf(pdir, sizeof pdir, "%s/%s", dir, dr->valuestring);
		return program_open(pdir, rn->valuestring, threads, out, d);
	}
	return diag_fail(d, "%s: no program named '%s'", file, name);
}

static int read_info(const cJSON *root, const char *file, WhisperInfo *wi, Diag *d)
{
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "whisper");
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(w, "tokens");
	if (!cJSON_IsObject(w) || !cJSON_IsObject(t))
		return diag_fail(d, "%s: missing 'whisper' (or its 'tokens')", file);
	int64_t v[8];
	static const char *keys[] = {"layers", "heads", "head_dim", "vocab", "n_mels", "audio_ctx", "frames", "text_ctx"};
	static const int64_t lo[] = {1, 1, 2, 51865, 80, 1, 2, 2}, hi[] = {MAX_LAYERS, 1024, 1024, 51866, 128, 1500, 3000, 4096};
	for (int i = 0; i < 8; i++)
		if (json_int(w, keys[i], lo[i], hi[i], file, &v[i], d) != WL_OK)
			return WL_ERR;
	int64_t k[9];
	static const char *tk[] = {"eot", "sot", "first_language", "translate", "transcribe", "sot_prev", "no_speech",
	                           "no_timestamps", "timestamp_begin"};
	for (int i = 0; i < 9; i++)
		if (json_int(t, tk[i], 0, v[3] - 1, file, &k[i], d) != WL_OK)
			return WL_ERR;
	if (k[8] != v[3] - 1501 || k[0] != 50257 || k[1] != 50258)
		return diag_fail(d, "%s: 'tokens' do not follow Whisper's multilingual layout", file);
	*wi = (WhisperInfo){(int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4], (int)v[5], (int)v[6], (int)v[7],
	                    160 * v[6], k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7], k[8], (int)(k[3] - k[2]), NULL};
	return WL_OK;
}

static char *fmt(const char *f, int i, const char *kv)
{
	char buf[128];
	snprintf(buf, sizeof buf, f, i, kv);
	char *s = strdup(buf);
	if (!s)
		wl_die(__FILE__, __LINE__, "out of memory");
	return s;
}

static void alloc_state(Whisper *w)
{
	const WhisperInfo *wi = &w->info;
	int S = wi->text_ctx, n = 2 * wi->layers;
	int64_t wd[2] = {1, wi->window_samples}, one[2] = {1, 1}, md[2] = {1, S};
	int64_t cd[4] = {1, wi->heads, S - 1, wi->head_dim};
	rt_alloc(&w->wave, DT_FLOAT, 2, wd);
	rt_alloc(&w->ids, DT_INT64, 2, one);
	rt_alloc(&w->sot, DT_INT64, 2, one);
	rt_alloc(&w->pos, DT_INT64, 1, one);
	rt_alloc(&w->mask, DT_INT64, 2, md);
	w->cache = calloc((size_t)n, sizeof *w->cache);
	w->past = calloc((size_t)n, sizeof *w->past);
	w->present = calloc((size_t)n, sizeof *w->present);
	w->cross_in = calloc((size_t)n, sizeof *w->cross_in);
	w->cross_out = calloc((size_t)n, sizeof *w->cross_out);
	w->work = malloc((size_t)wi->vocab * sizeof *w->work);
	w->lp = malloc((size_t)wi->vocab * sizeof *w->lp);
	if (!w->cache || !w->past || !w->present || !w->cross_in || !w->cross_out || !w->work || !w->lp)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < n; i++) {
		const char *kv = i % 2 ? "value" : "key";
		rt_alloc(&w->cache[i], DT_FLOAT, 4, cd);
		w->past[i] = fmt("past_key_values.%d.decoder.%s", i / 2, kv);
		w->present[i] = fmt("present.%d.decoder.%s", i / 2, kv);
		w->cross_in[i] = fmt("past_key_values.%d.encoder.%s", i / 2, kv);
		w->cross_out[i] = fmt("present.%d.encoder.%s", i / 2, kv);
	}
}

int whisper_open(const char *dir, int threads, Whisper **out, Diag *d)
{
	char file[4096];
	snprintf(file, sizeof file, "%s/pipeline.json", dir);
	cJSON *root;
	if (pipeline_read(dir, "whisper", &root, d) != WL_OK)
		return WL_ERR;
	Whisper *w = calloc(1, sizeof *w);
	if (!w)
		wl_die(__FILE__, __LINE__, "out of memory");
	const cJSON *tg = cJSON_GetObjectItemCaseSensitive(root, "target");
	int rc = read_info(root, file, &w->info, d);
	if (rc == WL_OK && !cJSON_IsString(tg))
		rc = diag_fail(d, "%s: missing 'target'", file);
	if (rc == WL_OK) {
		if (!(w->target = strdup(tg->valuestring)))
			wl_die(__FILE__, __LINE__, "out of memory");
		w->info.target = w->target;
	}
	rc = rc ?: find_program(root, file, "mel", dir, threads, &w->mel, d);
	rc = rc ?: find_program(root, file, "encoder", dir, threads, &w->encoder, d);
	rc = rc ?: find_program(root, file, "cross_kv", dir, threads, &w->cross, d);
	rc = rc ?: find_program(root, file, "step", dir, threads, &w->step, d);
	cJSON_Delete(root);
	if (rc != WL_OK) {
		whisper_close(w);
		return WL_ERR;
	}
	alloc_state(w);
	*out = w;
	return WL_OK;
}

void whisper_close(Whisper *w)
{
	if (!w)
		return;
	program_close(w->mel);
	program_close(w->encoder);
	program_close(w->cross);
	program_close(w->step);
	for (int i = 0; w->cache && i < 2 * w->info.layers; i++) {
		rt_free(&w->cache[i]);
		free(w->past[i]);
		free(w->present[i]);
		free(w->cross_in[i]);
		free(w->cross_out[i]);
	}
	for (int i = 0; w->slots && i < (w->nslots - 1) * 2 * w->info.layers; i++)
		rt_free(&w->slots[i]);
	free(w->slots);
	free(w->blogits);
	free(w->cache);
	free(w->past);
	free(w->present);
	free(w->cross_in);
	free(w->cross_out);
	free(w->work);
	free(w->lp);
	rt_free(&w->wave);
	rt_free(&w->ids);
	rt_free(&w->sot);
	rt_free(&w->pos);
	rt_free(&w->mask);
	free(w->target);
	free(w);
}

const WhisperInfo *whisper_info(const Whisper *w) { return &w->info; }

int whisper_program_count(const Whisper *w)
{
	(void)w;
	return 4;
}

Program *whisper_program(const Whisper *w, int i, const char **name)
{
	static const char *const names[4] = {"mel", "encoder", "cross_kv", "step"};
	Program *p[4] = {w->mel, w->encoder, w->cross, w->step};
	WL_ASSERT(i >= 0 && i < 4);
	if (name)
		*name = names[i];
	return p[i];
}

/* An output of prog with exactly `numel` float32 values. */
static const RTensor *out_f32(Program *prog, const char *prog_name, const char *name, int64_t numel, Diag *d)
{
	const RTensor *t = program_output(prog, name, d);
	if (t && (t->dtype != DT_FLOAT || rt_numel(t) != numel)) {
		diag_fail(d, "%s: output '%s' is not float32 with %lld values", prog_name, name, (long long)numel);
		return NULL;
	}
	return t;
}

/* mel → encoder → cross_kv for window samples x[0..n) (n <= window). */
static int encode_window(Whisper *w, const float *x, int64_t n, int win, WhisperMelFn melfn, void *ctx,
                         WhisperReport *rep, Diag *d)
{
	const WhisperInfo *wi = &w->info;
	float *wav = w->wave.data;
	memset(wav, 0, w->wave.nbytes);
	memcpy(wav, x, (size_t)n * sizeof *x);
	double t0 = wl_now_ms();
	const RTensor *mel, *hid;
	if (program_bind(w->mel, "waveform", &w->wave, d) != WL_OK || program_run(w->mel, d) != WL_OK ||
	    !(mel = out_f32(w->mel, "mel", "mel", (int64_t)wi->n_mels * wi->frames, d)))
		return WL_ERR;
	double t1 = wl_now_ms();
	if (melfn && melfn(ctx, win, mel, d) != WL_OK)
		return WL_ERR;
	double t2 = wl_now_ms();
	if (program_bind(w->encoder, "input_features", mel, d) != WL_OK || program_run(w->encoder, d) != WL_OK ||
	    !(hid = out_f32(w->encoder, "encoder", "last_hidden_state", (int64_t)wi->audio_ctx * wi->heads * wi->head_dim, d)))
		return WL_ERR;
	double t3 = wl_now_ms();
	((int64_t *)w->sot.data)[0] = wi->sot;
	if (program_bind(w->cross, "input_ids", &w->sot, d) != WL_OK ||
	    program_bind(w->cross, "encoder_hidden_states", hid, d) != WL_OK || program_run(w->cross, d) != WL_OK)
		return WL_ERR;
	for (int i = 0; i < 2 * wi->layers; i++) {
		const RTensor *kv = out_f32(w->cross, "cross_kv", w->cross_out[i],
		                            (int64_t)wi->heads * wi->audio_ctx * wi->head_dim, d);
		if (!kv || program_bind(w->step, w->cross_in[i], kv, d) != WL_OK)
			return WL_ERR;
	}
	rep->mel_ms += t1 - t0;
	rep->encoder_ms += t3 - t2;
	rep->cross_ms += wl_now_ms() - t3;
	return WL_OK;
}

/* Token tok at position p through step against the cache set `cache`
 * (2·layers tensors); *logits a view of [vocab]. */
static int step(Whisper *w, RTensor *cache, int64_t tok, int p, const RTensor **logits, Diag *d)
{
	const WhisperInfo *wi = &w->info;
	int S = wi->text_ctx;
	((int64_t *)w->ids.data)[0] = tok;
	((int64_t *)w->pos.data)[0] = p;
	int64_t *m = w->mask.data;
	for (int j = 0; j < S; j++)
		m[j] = j < p || j == S - 1;
	if (program_bind(w->step, "input_ids", &w->ids, d) != WL_OK ||
	    program_bind(w->step, "position_ids", &w->pos, d) != WL_OK ||
	    program_bind(w->step, "attention_mask", &w->mask, d) != WL_OK)
		return WL_ERR;
	for (int i = 0; i < 2 * wi->layers; i++)
		if (program_bind(w->step, w->past[i], &cache[i], d) != WL_OK)
			return WL_ERR;
	if (program_run(w->step, d) != WL_OK || !(*logits = out_f32(w->step, "step", "logits", wi->vocab, d)))
		return WL_ERR;
	if (p >= S - 1)
		return WL_OK;
	int64_t hd = wi->head_dim, rows = S - 1;
	for (int i = 0; i < 2 * wi->layers; i++) {
		const RTensor *pr = program_output(w->step, w->present[i], d);
		if (!pr)
			return WL_ERR;
		if (pr->dtype != DT_FLOAT || rt_numel(pr) != (int64_t)wi->heads * hd)
			return diag_fail(d, "step: output '%s' is not float32 [1,%d,1,%lld] (the new row only: a pipeline "
			                 "from an older wlower, whose step outputs the whole cache, must be recompiled)",
			                 w->present[i], wi->heads, (long long)hd);
		const float *src = pr->data;
		float *dst = cache[i].data;
		for (int h = 0; h < wi->heads; h++)
			memcpy(dst + ((int64_t)h * rows + p) * hd, src + (int64_t)h * hd, (size_t)hd * sizeof(float));
	}
	return WL_OK;
}

/* log-softmax of x[0..n) (-inf entries stay -inf) into lp. */
static void log_softmax(const float *x, int n, double *lp)
{
	double mx = -INFINITY, s = 0;
	for (int i = 0; i < n; i++)
		if (x[i] > mx)
			mx = x[i];
	for (int i = 0; i < n; i++)
		s += exp((double)x[i] - mx);
	double ls = mx + log(s);
	for (int i = 0; i < n; i++)
		lp[i] = (double)x[i] - ls;
}

/* The logit filters on x (a copy of the logits), given the tokens sampled
 * so far in this window, seq[0..ns). */
static void apply_rules(const Whisper *w, const WhisperOptions *o, float *x, const int64_t *seq, int ns, double *lp)
{
	const WhisperInfo *wi = &w->info;
	int V = wi->vocab;
	int64_t tb = wi->ts_begin;
	if (ns == 0) {                          /* SuppressBlank */
		x[220] = -INFINITY;
		x[wi->eot] = -INFINITY;
	}
	for (size_t i = 0; i < sizeof SUPPRESS / sizeof *SUPPRESS; i++)
		x[SUPPRESS[i]] = -INFINITY;
	int64_t sp[] = {wi->translate, wi->transcribe, wi->sot, wi->sot_prev, wi->sot_prev - 1, wi->no_speech};
	for (int i = 0; i < 6; i++)
		x[sp[i]] = -INFINITY;
	if (!o->timestamps)
		return;
	x[wi->no_timestamps] = -INFINITY;
	bool last_ts = ns >= 1 && seq[ns - 1] >= tb;
	bool penult_ts = ns < 2 || seq[ns - 2] >= tb;
	if (last_ts) {
		if (penult_ts)
			for (int i = (int)tb; i < V; i++)
				x[i] = -INFINITY;
		else
			for (int i = 0; i < wi->eot; i++)
				x[i] = -INFINITY;
	}
	int64_t lastts = -1;
	for (int i = 0; i < ns; i++)
		if (seq[i] >= tb)
			lastts = seq[i];
	if (lastts >= 0) {
		int64_t upto = last_ts && !penult_ts ? lastts : lastts + 1;
		for (int64_t i = tb; i < upto; i++)
			x[i] = -INFINITY;
	}
	for (int64_t i = tb + wi->audio_ctx + 1; i < V; i++)   /* past the window's end (none at 30 s) */
		x[i] = -INFINITY;
	if (ns == 0) {
		for (int i = 0; i < tb; i++)
			x[i] = -INFINITY;
		for (int64_t i = tb + 50 + 1; i < V; i++)   /* max_initial_timestamp 1.0 s */
			x[i] = -INFINITY;
	}
	log_softmax(x, V, lp);
	double mx = -INFINITY, s = 0, tmax = -INFINITY;
	for (int64_t i = tb; i < V; i++)
		if (lp[i] > mx)
			mx = lp[i];
	if (mx > -INFINITY)
		for (int64_t i = tb; i < V; i++)
			s += exp(lp[i] - mx);
	double ts_lp = mx > -INFINITY ? mx + log(s) : -INFINITY;
	for (int64_t i = 0; i < tb; i++)
		if (lp[i] > tmax)
			tmax = lp[i];
	if (ts_lp > tmax)
		for (int i = 0; i < tb; i++)
			x[i] = -INFINITY;
}

/* xorshift64* (Vigna); state never 0. */
static double uniform(uint64_t *st)
{
	*st ^= *st >> 12;
	*st ^= *st << 25;
	*st ^= *st >> 27;
	return (double)((*st * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0;
}

static int64_t choose(const float *x, int n, double temperature, uint64_t *st)
{
	int64_t best = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	if (temperature <= 0)
		return best;
	double s = 0;
	for (int i = 0; i < n; i++)
		s += exp(((double)x[i] - x[best]) / temperature);
	double r = uniform(st) * s;
	for (int i = 0; i < n; i++) {
		r -= exp(((double)x[i] - x[best]) / temperature);
		if (r < 0)
			return i;
	}
	return best;
}

typedef struct Decoded {
	int64_t *tok;
	int n;
	double sum_lp, no_speech;
} Decoded;

/* ---------------------------------------------------------------- beam search
 *
 * openai-whisper's BeamSearchDecoder + MaximumLikelihoodRanker (decoding.py),
 * at temperature 0, for one window; N = o->beam:
 *  - every live hypothesis (one after the prompt, N after the first step)
 *    gets the same logit filters as greedy decoding (apply_rules on its own
 *    sampled tokens), then log-softmax; its N+1 most likely tokens (ties: the
 *    lower id first) become candidates scored sum_logprob + logprob;
 *  - the candidates, sorted by score (stable: hypothesis order, then top-k
 *    order), are read best first: one ending in <|endoftext|> is finished,
 *    any other becomes one of the next N hypotheses, until N are kept;
 *  - finished ones (best first) are collected until round(N · patience)
 *    (Python's round: half to even) are there, which ends the search; so does
 *    max_tokens steps (the hypotheses then hold max_tokens tokens);
 *  - finalize: when fewer than N finished, the live hypotheses, by sum
 *    descending (ties: lower index), are added with <|endoftext|> appended
 *    and their sum unchanged, until N;
 *  - ranking: the finished sequence with the highest sum_logprob / length
 *    (length = sampled tokens, <|endoftext|> not counted; with
 *    length_penalty a ≥ 0: sum / ((5 + length) / 6)^a), the first on ties.
 * sum_logprob includes the <|endoftext|> token's log-probability when the
 * sequence finished by itself; avg_logprob = sum / (length + 1) as greedy.
 *
 * KV caches: the step program is batch 1 against one static cache, so each
 * live hypothesis owns a cache set (slot). After a step the hypotheses that
 * continue a distinct parent keep the parent's slot; every further child of
 * the same parent (a fork) gets a free slot and the parent's filled rows
 * [0, p). Row t of a cache depends only on the tokens at positions <= t, so
 * a slot keeps the ids its rows were computed from (slot_tok), and a fork
 * copies only the rows after the common prefix of the free slot's ids and
 * the parent's: hypotheses share all but their last few tokens, so a fork
 * copies a few rows (2·layers·heads·head_dim floats each) instead of p.
 * The report counts forks and the bytes and time they take (fork_*).
 */
typedef struct BeamCand {
	double score;
	int src, order;
	int64_t tok;
} BeamCand;

typedef struct BeamHyp {
	int64_t *tok;
	int n, slot, src;
	double sum;
	bool eot;                                 /* finished by itself (not by finalize) */
} BeamHyp;

static int cand_cmp(const void *a, const void *b)
{
	const BeamCand *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return x->order - y->order;
}

static RTensor *slot_cache(Whisper *w, int s)
{
	return s == 0 ? w->cache : w->slots + (size_t)(s - 1) * 2 * w->info.layers;
}

static void beam_alloc(Whisper *w, int n)
{
	const WhisperInfo *wi = &w->info;
	if (w->nslots >= n)
		return;
	int L2 = 2 * wi->layers;
	for (int i = 0; w->slots && i < (w->nslots - 1) * L2; i++)
		rt_free(&w->slots[i]);
	free(w->slots);
	free(w->blogits);
	int64_t cd[4] = {1, wi->heads, wi->text_ctx - 1, wi->head_dim};
	w->slots = calloc((size_t)(n - 1) * L2, sizeof *w->slots);
	w->blogits = malloc((size_t)n * wi->vocab * sizeof *w->blogits);
	if (!w->slots || !w->blogits)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < (n - 1) * L2; i++)
		rt_alloc(&w->slots[i], DT_FLOAT, 4, cd);
	w->nslots = n;
}

/* The k largest of lp[0..n) (ties: the lower index first) into top. */
static void topk(const double *lp, int n, int k, int64_t *top)
{
	int m = 0;
	for (int i = 0; i < n; i++) {
		if (m == k && !(lp[i] > lp[top[k - 1]]))
			continue;
		int j = m < k ? m++ : k - 1;
		while (j > 0 && lp[i] > lp[top[j - 1]]) {
			top[j] = top[j - 1];
			j--;
		}
		top[j] = i;
	}
}

static int decode_beam(Whisper *w, const WhisperOptions *o, const int64_t *prompt, int np, int sot_at, int maxn,
                       int win, WhisperStepFn fn, void *cbctx, Decoded *dec, WhisperReport *rep, Diag *d)
{
	const WhisperInfo *wi = &w->info;
	int N = o->beam, V = wi->vocab, K = N + 1, L2 = 2 * wi->layers, S = wi->text_ctx;
	int maxc = (int)nearbyint(N * (o->patience > 0 ? o->patience : 1.0));
	if (maxc < 1)
		maxc = 1;
	beam_alloc(w, N);
	for (int s = 1; s < N; s++)
		for (int i = 0; i < L2; i++)
			memset(slot_cache(w, s)[i].data, 0, slot_cache(w, s)[i].nbytes);
	int nhyp = 2 * N + maxc + N;
	int64_t *toks = malloc((size_t)nhyp * S * sizeof *toks), top[65];
	BeamHyp *cur = calloc((size_t)nhyp, sizeof *cur), *nxt = cur + N, *fin = cur + 2 * N;
	BeamCand *cand = malloc((size_t)N * K * sizeof *cand);
	/* per slot: the sampled ids its rows [np, np + slot_n) were computed from;
	 * slot_np: it holds the prompt rows [0, np) (slot 0 after the prompt) */
	int64_t *slot_tok = malloc((size_t)N * S * sizeof *slot_tok);
	int slot_n[64] = {0};
	bool slot_np[64] = {true};
	if (!toks || !cur || !cand || !slot_tok)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int h = 0; h < nhyp; h++)
		cur[h].tok = toks + (size_t)h * S;
	int rc = WL_OK, nb = 1, nfin = 0;
	const RTensor *lg = NULL;
	for (int p = 0; p < np && rc == WL_OK; p++) {
		double t0 = wl_now_ms();
		if ((rc = step(w, w->cache, prompt[p], p, &lg, d)) != WL_OK)
			break;
		rep->prompt_ms += wl_now_ms() - t0;
		rep->prompt_tokens++;
		rep->steps++;
		if (p == sot_at) {
			log_softmax(lg->data, V, w->lp);
			dec->no_speech = exp(w->lp[wi->no_speech]);
		}
	}
	if (rc == WL_OK)
		memcpy(w->blogits, lg->data, (size_t)V * sizeof *w->blogits);
	cur[0] = (BeamHyp){cur[0].tok, 0, 0, 0, 0, false};
	for (int i = 0; rc == WL_OK && i < maxn; i++) {
		int nc = 0;
		for (int b = 0; b < nb; b++) {
			memcpy(w->work, w->blogits + (size_t)b * V, (size_t)V * sizeof *w->work);
			apply_rules(w, o, w->work, cur[b].tok, cur[b].n, w->lp);
			log_softmax(w->work, V, w->lp);
			topk(w->lp, V, K, top);
			for (int k = 0; k < K; k++, nc++)
				cand[nc] = (BeamCand){cur[b].sum + w->lp[top[k]], b, nc, top[k]};
		}
		qsort(cand, (size_t)nc, sizeof *cand, cand_cmp);
		int saved = 0;
		for (int c = 0; c < nc && saved < N; c++) {
			const BeamHyp *src = &cur[cand[c].src];
			BeamHyp *h = cand[c].tok == wi->eot ? (nfin < maxc ? &fin[nfin++] : NULL) : &nxt[saved++];
			if (!h)
				continue;
			memcpy(h->tok, src->tok, (size_t)src->n * sizeof *h->tok);
			h->n = src->n;
			h->sum = cand[c].score;
			h->src = cand[c].src;
			h->eot = cand[c].tok == wi->eot;
			if (!h->eot)
				h->tok[h->n++] = cand[c].tok;
		}
		for (int k = 0; k < N; k++) {
			BeamHyp t = cur[k];
			cur[k] = nxt[k];
			nxt[k] = t;
		}
		nb = N;
		if (nfin >= maxc || i + 1 == maxn)
			break;
		/* slots: the first child of a parent keeps its slot, the others fork */
		bool taken[64] = {false};
		int fork[64], nfork = 0, parent_slot[64];
		for (int k = 0; k < N; k++) {
			int s = nxt[cur[k].src].slot;
			parent_slot[k] = s;
			if (!taken[s]) {
				taken[s] = true;
				cur[k].slot = s;
			} else {
				fork[nfork++] = k;
			}
		}
		int p = np + i;
		double t0 = wl_now_ms();
		for (int f = 0, s = 0; f < nfork; f++) {
			while (taken[s])
				s++;
			taken[s] = true;
			int k = fork[f];
			cur[k].slot = s;
			/* rows [0, r0) of slot s already equal the parent's */
			int c = 0;
			while (slot_np[s] && c < slot_n[s] && c < i && slot_tok[(size_t)s * S + c] == cur[k].tok[c])
				c++;
			int r0 = slot_np[s] ? np + c : 0;
			RTensor *from = slot_cache(w, parent_slot[k]), *to = slot_cache(w, s);
			for (int l = 0; l < L2; l++)
				for (int h = 0; h < wi->heads; h++) {
					size_t off = ((size_t)h * (S - 1) + (size_t)r0) * wi->head_dim;
					memcpy((float *)to[l].data + off, (const float *)from[l].data + off,
					       (size_t)(p - r0) * wi->head_dim * sizeof(float));
				}
			slot_np[s] = true;
			rep->forks++;
			rep->fork_mb += (double)L2 * wi->heads * (p - r0) * wi->head_dim * sizeof(float) / 1e6;
			rep->fork_prefix_mb += (double)L2 * wi->heads * p * wi->head_dim * sizeof(float) / 1e6;
		}
		rep->fork_ms += wl_now_ms() - t0;
		for (int k = 0; k < N && rc == WL_OK; k++) {
			double t1 = wl_now_ms();
			if ((rc = step(w, slot_cache(w, cur[k].slot), cur[k].tok[i], p, &lg, d)) != WL_OK)
				break;
			memcpy(slot_tok + (size_t)cur[k].slot * S, cur[k].tok, (size_t)(i + 1) * sizeof *slot_tok);
			slot_n[cur[k].slot] = i + 1;
			memcpy(w->blogits + (size_t)k * V, lg->data, (size_t)V * sizeof *w->blogits);
			rep->step_ms += wl_now_ms() - t1;
			rep->steps++;
			rep->beam_steps++;
		}
	}
	if (rc == WL_OK) {
		/* finalize: too few finished → the live ones, best sum first */
		int ord[64];
		for (int k = 0; k < N; k++)
			ord[k] = k;
		for (int a = 1; a < N; a++)
			for (int b = a; b > 0 && cur[ord[b]].sum > cur[ord[b - 1]].sum; b--) {
				int t = ord[b];
				ord[b] = ord[b - 1];
				ord[b - 1] = t;
			}
		for (int k = 0; k < N && nfin < N; k++) {
			BeamHyp *h = &fin[nfin++];
			memcpy(h->tok, cur[ord[k]].tok, (size_t)cur[ord[k]].n * sizeof *h->tok);
			h->n = cur[ord[k]].n;
			h->sum = cur[ord[k]].sum;
			h->eot = false;
		}
		int best = 0;
		double bs = -INFINITY;
		for (int f = 0; f < nfin; f++) {
			double len = fin[f].n > 0 ? fin[f].n : 1;
			double pen = o->length_penalty < 0 ? len : pow((5 + len) / 6, o->length_penalty);
			double sc = fin[f].sum / pen;
			if (f == 0 || sc > bs) {
				best = f;
				bs = sc;
			}
		}
		const BeamHyp *h = &fin[best];
		memcpy(dec->tok, h->tok, (size_t)h->n * sizeof *h->tok);
		dec->n = h->n;
		dec->sum_lp = h->sum;
		rep->sampled_tokens += h->n + h->eot;
		for (int k = 0; k < h->n + h->eot && rc == WL_OK; k++)
			if (fn)
				rc = fn(cbctx, win, k, k < h->n ? h->tok[k] : wi->eot, NULL, d);
	}
	free(toks);
	free(cur);
	free(cand);
	free(slot_tok);
	return rc;
}

/* One decoding pass over the encoded window: ctx_ids is the prompt before
 * <|startoftranscript|> (<|startofprev|> + text), then the sot sequence. */
static int decode_window(Whisper *w, const WhisperOptions *o, const int64_t *pre, int npre, double temperature,
                         int win, WhisperStepFn fn, void *cbctx, Decoded *dec, WhisperReport *rep, Diag *d)
{
	const WhisperInfo *wi = &w->info;
	int64_t prompt[4096];
	int np = 0;
	for (int i = 0; i < npre; i++)
		prompt[np++] = pre[i];
	int sot_at = np;
	prompt[np++] = wi->sot;
	prompt[np++] = o->language;
	prompt[np++] = o->task;
	if (!o->timestamps)
		prompt[np++] = wi->no_timestamps;
	int maxn = o->max_tokens;
	if (np + maxn > wi->text_ctx)
		maxn = wi->text_ctx - np;
	dec->n = 0;
	dec->sum_lp = 0;
	dec->no_speech = 0;
	for (int i = 0; i < 2 * wi->layers; i++)
		memset(w->cache[i].data, 0, w->cache[i].nbytes);
	if (o->beam > 1 && temperature <= 0)
		return decode_beam(w, o, prompt, np, sot_at, maxn, win, fn, cbctx, dec, rep, d);
	uint64_t st = o->seed ? o->seed + (uint64_t)win * 7919 : 0x9E3779B97F4A7C15ULL;
	int64_t tok = prompt[0];
	for (int p = 0; p < wi->text_ctx; p++) {
		const RTensor *lg;
		double t0 = wl_now_ms();
		if (step(w, w->cache, tok, p, &lg, d) != WL_OK)
			return WL_ERR;
		double dt = wl_now_ms() - t0;
		rep->steps++;
		if (p < np) {
			rep->prompt_ms += dt;
			rep->prompt_tokens++;
		} else {
			rep->step_ms += dt;
		}
		if (p == sot_at) {
			log_softmax(lg->data, wi->vocab, w->lp);
			dec->no_speech = exp(w->lp[wi->no_speech]);
		}
		if (p + 1 < np) {
			tok = prompt[p + 1];
			continue;
		}
		memcpy(w->work, lg->data, (size_t)wi->vocab * sizeof *w->work);
		apply_rules(w, o, w->work, dec->tok, dec->n, w->lp);
		tok = choose(w->work, wi->vocab, temperature, &st);
		log_softmax(w->work, wi->vocab, w->lp);
		dec->sum_lp += w->lp[tok];
		rep->sampled_tokens++;
		if (fn && fn(cbctx, win, dec->n, tok, lg, d) != WL_OK)
			return WL_ERR;
		if (tok == wi->eot)
			break;
		dec->tok[dec->n++] = tok;
		if (dec->n >= maxn || p + 1 >= wi->text_ctx)
			break;
	}
	return WL_OK;
}

/* zlib compression ratio of the text of ids (the fallback's repetition test). */
static double compression_ratio(const WhisperVocab *v, const int64_t *ids, int n)
{
	size_t len = vocab_decode(v, ids, n, false, NULL, 0);
	if (len == 0)
		return 0;
	char *txt = malloc(len + 1);
	uLongf zl = compressBound((uLong)len);
	Bytef *z = malloc(zl);
	if (!txt || !z)
		wl_die(__FILE__, __LINE__, "out of memory");
	vocab_decode(v, ids, n, false, txt, len + 1);
	compress2(z, &zl, (const Bytef *)txt, (uLong)len, Z_DEFAULT_COMPRESSION);
	free(txt);
	free(z);
	return (double)len / (double)zl;
}

static void push_segment(WhisperSegment **segs, int *nseg, int *cap, double start, double end, const int64_t *tok,
                         int n, const Decoded *dec, double temperature)
{
	if (*nseg == *cap && !(*segs = realloc(*segs, (size_t)(*cap = *cap ? 2 * *cap : 16) * sizeof **segs)))
		wl_die(__FILE__, __LINE__, "out of memory");
	WhisperSegment *s = &(*segs)[(*nseg)++];
	s->start = start;
	s->end = end;
	s->tokens = malloc((size_t)(n > 0 ? n : 1) * sizeof *s->tokens);
	if (!s->tokens)
		wl_die(__FILE__, __LINE__, "out of memory");
	memcpy(s->tokens, tok, (size_t)n * sizeof *tok);
	s->ntokens = n;
	s->avg_logprob = dec->sum_lp / (dec->n + 1);
	s->no_speech_prob = dec->no_speech;
	s->temperature = temperature;
}

int whisper_transcribe(Whisper *w, const float *x, int64_t n, const WhisperOptions *o, WhisperSegment **segs,
                       int *nseg, WhisperStepFn fn, WhisperMelFn melfn, void *ctx, WhisperReport *rep, Diag *d)
{
	const WhisperInfo *wi = &w->info;
	*segs = NULL;
	*nseg = 0;
	memset(rep, 0, sizeof *rep);
	rep->audio_s = (double)n / 16000.0;
	int cap = 0, half = wi->text_ctx / 2 - 1;
	int64_t frames_total = n / 160, seek = 0;         /* in mel frames (10 ms) */
	int64_t *all = malloc(sizeof *all * 1), nall = 0, allcap = 1;
	Decoded dec = {malloc((size_t)wi->text_ctx * sizeof(int64_t)), 0, 0, 0};
	if (!all || !dec.tok)
		wl_die(__FILE__, __LINE__, "out of memory");
	if (o->prompt)
		for (int i = 0; i < o->nprompt; i++) {
			if (nall == allcap && !(all = realloc(all, (size_t)(allcap *= 2) * sizeof *all)))
				wl_die(__FILE__, __LINE__, "out of memory");
			all[nall++] = o->prompt[i];
		}
	int rc = WL_OK, win = 0;
	while (rc == WL_OK && seek < frames_total) {
		int64_t off = seek * 160, len = n - off;
		if (len > wi->window_samples)
			len = wi->window_samples;
		int64_t seg_frames = len / 160;
		double t_off = (double)seek * 0.01;
		if ((rc = encode_window(w, x + off, len, win, melfn, ctx, rep, d)) != WL_OK)
			break;
		int64_t pre[4096];
		int npre = 0;
		if (nall > 0 && (o->condition_on_previous || nall <= o->nprompt)) {
			pre[npre++] = wi->sot_prev;
			int64_t from = nall > half ? nall - half : 0;
			for (int64_t i = from; i < nall; i++)
				pre[npre++] = all[i];
		}
		double temp = o->temperature;
		for (;;) {
			if ((rc = decode_window(w, o, pre, npre, temp, win, fn, ctx, &dec, rep, d)) != WL_OK)
				break;
			bool bad = dec.sum_lp / (dec.n + 1) < -1.0 ||
			           (o->vocab && compression_ratio(o->vocab, dec.tok, dec.n) > 2.4);
			if (!o->fallback || !bad || temp >= 1.0 - 1e-9)
				break;
			temp += 0.2;
		}
		if (rc != WL_OK)
			break;
		win++;
		rep->windows = win;
		double avg = dec.sum_lp / (dec.n + 1);
		if (dec.no_speech > 0.6 && avg < -1.0) {          /* silence: skip the window */
			seek += seg_frames;
			continue;
		}
		int64_t tb = wi->ts_begin, *t = dec.tok;
		int nt = dec.n, last = 0;
		bool single_end = nt >= 2 && t[nt - 2] < tb && t[nt - 1] >= tb;
		int cons[4096], nc = 0;
		for (int i = 1; i < nt; i++)
			if (t[i - 1] >= tb && t[i] >= tb)
				cons[nc++] = i;
		if (nc > 0) {
			if (single_end)
				cons[nc++] = nt;
			for (int k = 0; k < nc; k++) {
				int cur = cons[k];
				push_segment(segs, nseg, &cap, t_off + (double)(t[last] - tb) * 0.02,
				             t_off + (double)(t[cur - 1] - tb) * 0.02, t + last, cur - last, &dec, temp);
				last = cur;
			}
			if (single_end)
				seek += seg_frames;
			else
				seek += (t[last - 1] - tb) * 2 < seg_frames ? (t[last - 1] - tb) * 2 : seg_frames;
		} else {
			double dur = (double)seg_frames * 0.01;
			int64_t lastts = -1;
			for (int i = 0; i < nt; i++)
				if (t[i] >= tb)
					lastts = t[i];
			if (lastts > tb)
				dur = (double)(lastts - tb) * 0.02;
			push_segment(segs, nseg, &cap, t_off, t_off + dur, t, nt, &dec, temp);
			seek += seg_frames;
		}
		if (seek <= off / 160)                                /* no progress: move on */
			seek = off / 160 + seg_frames;
		for (int i = 0; i < nt; i++) {
			if (nall == allcap && !(all = realloc(all, (size_t)(allcap *= 2) * sizeof *all)))
				wl_die(__FILE__, __LINE__, "out of memory");
			all[nall++] = t[i];
		}
	}
	free(all);
	free(dec.tok);
	if (rc != WL_OK) {
		whisper_segments_free(*segs, *nseg);
		*segs = NULL;
		*nseg = 0;
	}
	return rc;
}

void whisper_segments_free(WhisperSegment *s, int n)
{
	for (int i = 0; s && i < n; i++)
		free(s[i].tokens);
	free(s);
}
