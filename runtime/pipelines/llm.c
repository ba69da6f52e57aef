/* llm.c — the LLM loop: decoding with a static-size KV cache updated in
 * place, one `prefill` program for prompt rows, one `step` program for
 * every position and one `lm_head` program for the row whose logits are
 * needed (docs/FORMATS.md "Pipeline directories").
 *
 * prefill and step are the Optimum decoder_with_past graph compiled with
 * past_sequence_length S (S = max_seq), the static-kv-cache pass and the
 * body of split-lm-head, for T rows (step: T = 1; prefill: T = N,
 * pipeline.json's llm.prefill_rows):
 *   input_ids [1,T], position_ids [1,T], attention_mask [1,S+T],
 *   past_key_values.i.key/value [1,KV,S,hd]  →  hidden_states [1,T,D],
 *   present.i.key/value [1,KV,T,hd] (the T new rows only)
 * lm_head is its final RMSNorm and projection: hidden_states [1,1,D] →
 * logits [1,1,V], run on the last valid row of each run (a prefill of N
 * rows pays for one row of the LM head, not N). The embedding lookup stays
 * the first node of prefill and step (a Gather reading the table in place:
 * ids in, nothing copied). With llm.argmax_on_device (--argmax-on-device)
 * lm_head ends in GreedyArgMax: token_ids [1,1] is read as the next id, no
 * logits leave the program, and sampling is refused.
 * The caches are the past inputs, read in place by the attention; rows < c
 * hold positions 0..c-1. A run for n <= T rows at positions c..c+n-1 sets
 * the mask to 1 on cache rows < c and on the n first new rows (padding rows
 * repeat the last id, at clamped positions, masked), then writes present row
 * t into cache row c+t for t < n: O(layers·KV·hd) per token, whatever c is,
 * and runs lm_head on hidden row n-1.
 * A prompt is processed by prefill in chunks of N rows (a chunk of one row
 * by step); the logits of its last row choose the first id, and each step
 * after reads the last id chosen. Positions 0..S-1 fit.
 *
 * With llm.kv_cache.dtype "int8" (--kv-cache int8) the caches are int8
 * (a quarter of the float bytes): the programs dequantize the past inputs
 * and quantize the presents themselves (passes/kv_cache_int8.c), and the
 * rows are copied as they are.
 *
 * When decoder_with_past was traced at one token without the causal part of
 * its mask, the prefill is decoder_model instead (llm.prefill_reads_cache
 * false): no past inputs, attention_mask [1,N]; it then takes only the first
 * chunk, and step the prompt rows after it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pipeline.h"

/* The inputs of one program of T rows. */
typedef struct Rows {
	Program *prog;
	int T, P;                  /* rows; cache rows read (S, or 0: no cache inputs) */
	RTensor ids, pos, mask;    /* [1,T], [1,T], [1,P+T] int64 */
} Rows;

struct Llm {
	LlmInfo info;
	char *target;
	Rows step, prefill;
	Program *head;             /* lm_head */
	RTensor *cache;            /* 2·layers: [1,KV,S,hd] float32 (or int8), key then value */
	RTensor row;               /* view: the hidden state of the last valid row [1,1,D] */
	char **past_names, **present_names;
};

static int read_info(const cJSON *root, const char *file, LlmInfo *li, Diag *d)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "llm");
	int64_t v[9];
	static const char *keys[] = {"layers", "kv_heads", "head_dim", "vocab", "max_seq", "bos", "eos", "prefill_rows",
	                             "hidden"};
	static const int64_t hi[] = {4096, 4096, 65536, 1 << 24, 1 << 24, 1 << 24, 1 << 24, 1 << 16, 1 << 20};
	if (!cJSON_IsObject(o))
		return diag_fail(d, "%s: missing 'llm'", file);
	for (int i = 0; i < 9; i++)
		if (json_int(o, keys[i], i == 5 || i == 6 ? -1 : 1, hi[i], file, &v[i], d) != WL_OK)
			return WL_ERR;
	if (v[4] < 2)
		return diag_fail(d, "%s: 'max_seq' must be at least 2", file);
	if (v[7] > v[4])
		return diag_fail(d, "%s: 'prefill_rows' exceeds 'max_seq'", file);
	const cJSON *am = cJSON_GetObjectItemCaseSensitive(o, "argmax_on_device");
	if (am && !cJSON_IsBool(am))
		return diag_fail(d, "%s: 'llm.argmax_on_device' is not true or false", file);
	*li = (LlmInfo){(int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4], v[5], v[6], NULL, (int)v[7], (int)v[8],
	                cJSON_IsTrue(am), false};
	const cJSON *kv = cJSON_GetObjectItemCaseSensitive(o, "kv_cache");
	if (kv) {
		const cJSON *dt = cJSON_GetObjectItemCaseSensitive(kv, "dtype");
		if (!cJSON_IsString(dt) || (strcmp(dt->valuestring, "int8") && strcmp(dt->valuestring, "float32")))
			return diag_fail(d, "%s: 'llm.kv_cache.dtype' is not \"int8\" or \"float32\"", file);
		li->kv_int8 = strcmp(dt->valuestring, "int8") == 0;
	}
	return WL_OK;
}

/* Program `name` of pipeline.json: its folder and runner. */
static int find_program(const cJSON *root, const char *file, const char *name, const char **dir,
                        const char **runner, Diag *d)
{
	const cJSON *p;
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(root, "programs")) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(p, "name");
		const cJSON *dr = cJSON_GetObjectItemCaseSensitive(p, "dir");
		const cJSON *rn = cJSON_GetObjectItemCaseSensitive(p, "runner");
		if (cJSON_IsString(nm) && strcmp(nm->valuestring, name) == 0) {
			if (!cJSON_IsString(dr) || !cJSON_IsString(rn) || strchr(dr->valuestring, '/') ||
			    strstr(dr->valuestring, ".."))
				return diag_fail(d, "%s: program '%s': needs a folder 'dir' and a 'runner'", file, name);
			*dir = dr->valuestring;
			*runner = rn->valuestring;
			return WL_OK;
		}
	}
	return diag_fail(d, "%s: no program named '%s'", file, name);
}

static char *fmt_name(const char *fmt, int i, const char *kv)
{
	char buf[128];
	snprintf(buf, sizeof buf, fmt, i, kv);
	char *s = strdup(buf);
	if (!s)
		wl_die(__FILE__, __LINE__, "out of memory");
	return s;
}

static void alloc_rows(Rows *r, int T, int P)
{
	int64_t one[2] = {1, T}, md[2] = {1, (int64_t)P + T};
	r->T = T;
	r->P = P;
	rt_alloc(&r->ids, DT_INT64, 2, one);
	rt_alloc(&r->pos, DT_INT64, 2, one);
	rt_alloc(&r->mask, DT_INT64, 2, md);
}

static void free_rows(Rows *r)
{
	program_close(r->prog);
	rt_free(&r->ids);
	rt_free(&r->pos);
	rt_free(&r->mask);
}

static void alloc_state(Llm *l, bool chunks)
{
	const LlmInfo *li = &l->info;
	int64_t cd[4] = {1, li->kv_heads, li->max_seq, li->head_dim};
	alloc_rows(&l->step, 1, li->max_seq);
	alloc_rows(&l->prefill, li->prefill_rows, chunks ? li->max_seq : 0);
	int n = 2 * li->layers;
	l->cache = calloc((size_t)n, sizeof *l->cache);
	l->past_names = calloc((size_t)n, sizeof *l->past_names);
	l->present_names = calloc((size_t)n, sizeof *l->present_names);
	if (!l->cache || !l->past_names || !l->present_names)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < n; i++) {
		rt_alloc(&l->cache[i], li->kv_int8 ? DT_INT8 : DT_FLOAT, 4, cd);
		const char *kv = i % 2 ? "value" : "key";
		l->past_names[i] = fmt_name("past_key_values.%d.%s", i / 2, kv);
		l->present_names[i] = fmt_name("present.%d.%s", i / 2, kv);
	}
}

static int open_program(const cJSON *root, const char *dir, const char *file, const char *name, int threads,
                        Program **out, Diag *d)
{
	const char *sub = NULL, *runner = NULL;
	if (find_program(root, file, name, &sub, &runner, d) != WL_OK)
		return WL_ERR;
	char pdir[4096];
	snprintf(pdir, sizeof pdir, "%s/%s", dir, sub);
	return program_open(pdir, runner, threads, out, d);
}

int llm_open(const char *dir, int threads, Llm **out, Diag *d)
{
	char file[4096];
	snprintf(file, sizeof file, "%s/pipeline.json", dir);
	cJSON *root;
	if (pipeline_read(dir, "llm", &root, d) != WL_OK)
		return WL_ERR;
	Llm *l = calloc(1, sizeof *l);
	if (!l)
		wl_die(__FILE__, __LINE__, "out of memory");
	const cJSON *tg = cJSON_GetObjectItemCaseSensitive(root, "target");
	int rc = read_info(root, file, &l->info, d);
	if (rc == WL_OK && !cJSON_IsString(tg))
		rc = diag_fail(d, "%s: missing 'target'", file);
	if (rc == WL_OK) {
		if (!(l->target = strdup(tg->valuestring)))
			wl_die(__FILE__, __LINE__, "out of memory");
		l->info.target = l->target;
		const cJSON *ch = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "llm"),
		                                                   "prefill_reads_cache");
		if (ch && !cJSON_IsBool(ch))
			rc = diag_fail(d, "%s: 'llm.prefill_reads_cache' is not true or false", file);
		alloc_state(l, !cJSON_IsFalse(ch));
		rc = rc ?: open_program(root, dir, file, "step", threads, &l->step.prog, d);
	}
	if (rc == WL_OK)
		rc = open_program(root, dir, file, "prefill", threads, &l->prefill.prog, d);
	if (rc == WL_OK)
		rc = open_program(root, dir, file, "lm_head", threads, &l->head, d);
	cJSON_Delete(root);
	if (rc != WL_OK) {
		llm_close(l);
		return WL_ERR;
	}
	*out = l;
	return WL_OK;
}

void llm_close(Llm *l)
{
	if (!l)
		return;
	free_rows(&l->step);
	free_rows(&l->prefill);
	program_close(l->head);
	for (int i = 0; l->cache && i < 2 * l->info.layers; i++) {
		rt_free(&l->cache[i]);
		free(l->past_names[i]);
		free(l->present_names[i]);
	}
	free(l->cache);
	free(l->past_names);
	free(l->present_names);
	free(l->target);
	free(l);
}

const LlmInfo *llm_info(const Llm *l) { return &l->info; }

/* Program order: prefill, step, lm_head (pipeline.json's order). */
int llm_program_count(const Llm *l) { (void)l; return 3; }

Program *llm_program(const Llm *l, int i, const char **name)
{
	static const char *const names[] = {"prefill", "step", "lm_head"};
	WL_ASSERT(i >= 0 && i < 3);
	if (name)
		*name = names[i];
	return i == 0 ? l->prefill.prog : i == 1 ? l->step.prog : l->head;
}

/* One run of r's program: ids tok[0..n) (n <= T) at positions c..c+n-1
 * against cache rows < c; their new K/V rows go to cache rows c..c+n-1;
 * then lm_head on row n-1: *logits, a view valid until the next run, or
 * with argmax_on_device *logits NULL and *id the id lm_head chose. */
static int run_rows(Llm *l, Rows *r, const int64_t *tok, int n, int c, const RTensor **logits, int64_t *id,
                    Diag *d)
{
	const LlmInfo *li = &l->info;
	int S = li->max_seq, T = r->T, P = r->P;
	int64_t *ids = r->ids.data, *pos = r->pos.data, *m = r->mask.data;
	WL_ASSERT(P || c == 0);
	for (int t = 0; t < T; t++) {
		ids[t] = tok[t < n ? t : n - 1];
		pos[t] = c + t < S ? c + t : S - 1;
		m[P + t] = t < n;
	}
	for (int j = 0; j < P; j++)
		m[j] = j < c;
	if (program_bind(r->prog, "input_ids", &r->ids, d) != WL_OK ||
	    program_bind(r->prog, "position_ids", &r->pos, d) != WL_OK ||
	    program_bind(r->prog, "attention_mask", &r->mask, d) != WL_OK)
		return WL_ERR;
	for (int i = 0; P && i < 2 * li->layers; i++)
		if (program_bind(r->prog, l->past_names[i], &l->cache[i], d) != WL_OK)
			return WL_ERR;
	if (program_run(r->prog, d) != WL_OK)
		return WL_ERR;
	const RTensor *hs = program_output(r->prog, "hidden_states", d);
	if (!hs)
		return WL_ERR;
	if (hs->dtype != DT_FLOAT || rt_numel(hs) != (int64_t)T * li->hidden)
		return diag_fail(d, "%s program: 'hidden_states' is not float32 with %d x %d values",
		                 T > 1 ? "prefill" : "step", T, li->hidden);
	RTensor *v = &l->row;
	*v = *hs;
	v->owned = false;
	v->ndim = 3;
	v->dims[0] = v->dims[1] = 1;
	v->dims[2] = li->hidden;
	v->data = (float *)hs->data + (int64_t)(n - 1) * li->hidden;
	v->nbytes = (size_t)li->hidden * sizeof(float);
	int64_t hd = li->head_dim;
	size_t es = li->kv_int8 ? 1 : sizeof(float);
	for (int i = 0; i < 2 * li->layers; i++) {
		const RTensor *pr = program_output(r->prog, l->present_names[i], d);
		if (!pr)
			return WL_ERR;
		if (pr->dtype != (li->kv_int8 ? DT_INT8 : DT_FLOAT) || pr->ndim != 4 || pr->dims[1] != li->kv_heads ||
		    pr->dims[2] != T || pr->dims[3] != hd)
			return diag_fail(d, "'%s' is not %s[1,%d,%d,%lld] (llm.kv_cache)", l->present_names[i],
			                 li->kv_int8 ? "int8" : "float32", li->kv_heads, T, (long long)hd);
		const char *src = pr->data;
		char *dst = l->cache[i].data;
		for (int h = 0; h < li->kv_heads; h++)
			memcpy(dst + ((int64_t)h * S + c) * hd * es, src + (int64_t)h * T * hd * es, (size_t)(n * hd) * es);
	}
	if (program_bind(l->head, "hidden_states", v, d) != WL_OK || program_run(l->head, d) != WL_OK)
		return WL_ERR;
	*logits = NULL;
	if (li->argmax_on_device) {
		const RTensor *t = program_output(l->head, "token_ids", d);
		if (!t)
			return WL_ERR;
		if ((t->dtype != DT_INT32 && t->dtype != DT_INT64) || rt_numel(t) != 1)
			return diag_fail(d, "%s", "lm_head program: 'token_ids' is not one int32/int64 id");
		*id = t->dtype == DT_INT32 ? *(const int32_t *)t->data : *(const int64_t *)t->data;
		if (*id < 0 || *id >= li->vocab)
			return diag_fail(d, "lm_head program: token id %lld is out of range (vocab %d)", (long long)*id,
			                 li->vocab);
		return WL_OK;
	}
	if (!(*logits = program_output(l->head, "logits", d)))
		return WL_ERR;
	if ((*logits)->dtype != DT_FLOAT || rt_numel(*logits) != li->vocab)
		return diag_fail(d, "lm_head program: 'logits' is not float32 with %d values", li->vocab);
	return WL_OK;
}

static int64_t argmax(const RTensor *t)
{
	const float *x = t->data;
	int64_t n = rt_numel(t), best = 0;
	for (int64_t i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

/* xorshift64* (Vigna): the sampler's generator; state never 0. */
static double next_uniform(uint64_t *st)
{
	*st ^= *st >> 12;
	*st ^= *st << 25;
	*st ^= *st >> 27;
	return (double)((*st * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0;   /* [0, 1) */
}

typedef struct Cand { double p; int64_t id; } Cand;

static int cand_cmp(const void *a, const void *b)
{
	const Cand *x = a, *y = b;
	return x->p < y->p ? 1 : x->p > y->p ? -1 : (x->id > y->id) - (x->id < y->id);
}

/* One id from logits by temperature / top-k / top-p (LlmSampling). */
static int64_t sample(const RTensor *t, const LlmSampling *s, uint64_t *st, Cand *c)
{
	const float *x = t->data;
	int64_t n = rt_numel(t);
	double mx = x[argmax(t)], sum = 0;
	for (int64_t i = 0; i < n; i++) {
		c[i].p = exp(((double)x[i] - mx) / s->temperature);
		c[i].id = i;
	}
	qsort(c, (size_t)n, sizeof *c, cand_cmp);
	int64_t k = s->top_k > 0 && s->top_k < n ? s->top_k : n;
	for (int64_t i = 0; i < k; i++)
		sum += c[i].p;
	double acc = 0;
	for (int64_t i = 0; i < k; i++) {     /* nucleus: the smallest prefix reaching top_p */
		acc += c[i].p / sum;
		if (acc >= s->top_p) {
			k = i + 1;
			break;
		}
	}
	double total = 0;
	for (int64_t i = 0; i < k; i++)
		total += c[i].p;
	double r = next_uniform(st) * total;
	for (int64_t i = 0; i < k; i++) {
		r -= c[i].p;
		if (r < 0)
			return c[i].id;
	}
	return c[k - 1].id;
}

int llm_generate(Llm *l, const int64_t *prompt, int np, int max_new, int64_t stop, const LlmSampling *smp,
                 int64_t *out, int *nout, LlmTokenFn fn, void *ctx, LlmReport *rep, Diag *d)
{
	bool greedy = !smp || smp->temperature <= 0;
	uint64_t st = smp && smp->seed ? smp->seed : 0x9E3779B97F4A7C15ULL;
	Cand *cand = NULL;
	const LlmInfo *li = &l->info;
	*nout = 0;
	memset(rep, 0, sizeof *rep);
	if (np < 1)
		return diag_fail(d, "%s", "the prompt is empty (give at least one id, e.g. the BOS id)");
	if (!greedy && li->argmax_on_device)
		return diag_fail(d, "%s", "the pipeline's lm_head computes the greedy id on the device (argmax_on_device): "
		                 "no logits to sample from");
	if ((int64_t)np + max_new > li->max_seq)
		return diag_fail(d, "prompt (%d ids) + --max-new-tokens (%d) exceeds the pipeline's max_seq %d", np,
		                 max_new, li->max_seq);
	for (int i = 0; i < np; i++)
		if (prompt[i] < 0 || prompt[i] >= li->vocab)
			return diag_fail(d, "prompt id %lld at position %d is out of range (vocab %d)", (long long)prompt[i],
			                 i, li->vocab);
	if (!greedy && !(cand = malloc((size_t)li->vocab * sizeof *cand)))
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < 2 * li->layers; i++)
		memset(l->cache[i].data, 0, l->cache[i].nbytes);
	rep->prompt_tokens = np;
	rep->step_pos0 = np;
	rep->step_ms = calloc((size_t)(max_new > 0 ? max_new : 1), sizeof *rep->step_ms);
	if (!rep->step_ms)
		wl_die(__FILE__, __LINE__, "out of memory");
	const RTensor *logits = NULL;
	int64_t dev_id = 0;
	int rc = WL_OK;
	double t0 = wl_now_ms();
	for (int c = 0; c < np && rc == WL_OK;) {     /* the prompt: chunks of N rows (one row: step) */
		int n = np - c < li->prefill_rows ? np - c : li->prefill_rows;
		if (c > 0 && !l->prefill.P)
			n = 1;                             /* a prefill without cache takes the first chunk only */
		rc = run_rows(l, n == 1 ? &l->step : &l->prefill, prompt + c, n, c, &logits, &dev_id, d);
		c += n;
		rep->prefill_runs++;
	}
	rep->prompt_ms = wl_now_ms() - t0;
	for (int p = np; rc == WL_OK && *nout < max_new; p++) {
		int64_t tok = !logits ? dev_id : greedy ? argmax(logits) : sample(logits, smp, &st, cand);
		if (tok == stop)
			break;
		out[(*nout)++] = tok;
		rep->generated = *nout;
		if (fn && (rc = fn(ctx, tok, logits, d)) != WL_OK)
			break;
		if (*nout == max_new)
			break;
		t0 = wl_now_ms();
		rc = run_rows(l, &l->step, &tok, 1, p, &logits, &dev_id, d);
		double dt = wl_now_ms() - t0;
		rep->step_ms[rep->nsteps++] = dt;
		rep->gen_ms += dt;                 /* the steps that read generated ids */
	}
	free(cand);
	return rc;
}

