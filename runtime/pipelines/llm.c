/* llm.c — the LLM loop: greedy decoding with a static-size KV cache and one
 * `step` program for every position (docs/FORMATS.md "Pipeline directories").
 *
 * The step program is the Optimum decoder_with_past graph compiled with
 * sequence_length 1 and past_sequence_length S-1 (S = max_seq):
 *   input_ids [1,1], position_ids [1,1] = p, attention_mask [1,S],
 *   past_key_values.i.key/value [1,KV,S-1,hd]  →  logits [1,1,V],
 *   present.i.key/value [1,KV,S,hd]
 * The cache buffers are the past inputs; rows < p hold positions 0..p-1.
 * The new token's key and value sit in the last row (S-1) of the present
 * (attention does not depend on the order of the keys: RoPE has already put
 * the position into each key), so the mask is 1 on rows < p and on row S-1,
 * 0 elsewhere; after the step, row S-1 of each present is written to cache
 * row p. Positions 0..S-1 fit: at p = S-1 every cache row is in use.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pipeline.h"

struct Llm {
	LlmInfo info;
	char *target;
	Program *step;
	RTensor ids, pos, mask;    /* [1,1], [1,1], [1,S] int64 */
	RTensor *cache;            /* 2·layers: [1,KV,S-1,hd] float32, key then value */
	char **past_names, **present_names;
};

static int read_info(const cJSON *root, const char *file, LlmInfo *li, Diag *d)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "llm");
	int64_t v[7];
	static const char *keys[] = {"layers", "kv_heads", "head_dim", "vocab", "max_seq", "bos", "eos"};
	static const int64_t hi[] = {4096, 4096, 65536, 1 << 24, 1 << 24, 1 << 24, 1 << 24};
	if (!cJSON_IsObject(o))
		return diag_fail(d, "%s: missing 'llm'", file);
	for (int i = 0; i < 7; i++)
		if (json_int(o, keys[i], i < 5 ? 1 : -1, hi[i], file, &v[i], d) != WL_OK)
			return WL_ERR;
	if (v[4] < 2)
		return diag_fail(d, "%s: 'max_seq' must be at least 2", file);
	*li = (LlmInfo){(int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4], v[5], v[6], NULL};
	return WL_OK;
}

/* The step program's entry of pipeline.json: its folder and runner. */
static int find_step(const cJSON *root, const char *file, const char **dir, const char **runner, Diag *d)
{
	const cJSON *p;
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(root, "programs")) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(p, "name");
		const cJSON *dr = cJSON_GetObjectItemCaseSensitive(p, "dir");
		const cJSON *rn = cJSON_GetObjectItemCaseSensitive(p, "runner");
		if (cJSON_IsString(nm) && strcmp(nm->valuestring, "step") == 0) {
			if (!cJSON_IsString(dr) || !cJSON_IsString(rn) || strchr(dr->valuestring, '/') ||
			    strstr(dr->valuestring, ".."))
				return diag_fail(d, "%s: program 'step': needs a folder 'dir' and a 'runner'", file);
			*dir = dr->valuestring;
			*runner = rn->valuestring;
			return WL_OK;
		}
	}
	return diag_fail(d, "%s: no program named 'step'", file);
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

static void alloc_state(Llm *l)
{
	const LlmInfo *li = &l->info;
	int64_t one[2] = {1, 1}, md[2] = {1, li->max_seq};
	int64_t cd[4] = {1, li->kv_heads, li->max_seq - 1, li->head_dim};
	rt_alloc(&l->ids, DT_INT64, 2, one);
	rt_alloc(&l->pos, DT_INT64, 2, one);
	rt_alloc(&l->mask, DT_INT64, 2, md);
	int n = 2 * li->layers;
	l->cache = calloc((size_t)n, sizeof *l->cache);
	l->past_names = calloc((size_t)n, sizeof *l->past_names);
	l->present_names = calloc((size_t)n, sizeof *l->present_names);
	if (!l->cache || !l->past_names || !l->present_names)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < n; i++) {
		rt_alloc(&l->cache[i], DT_FLOAT, 4, cd);
		const char *kv = i % 2 ? "value" : "key";
		l->past_names[i] = fmt_name("past_key_values.%d.%s", i / 2, kv);
		l->present_names[i] = fmt_name("present.%d.%s", i / 2, kv);
	}
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
	const char *sdir = NULL, *runner = NULL;
	const cJSON *tg = cJSON_GetObjectItemCaseSensitive(root, "target");
	int rc = read_info(root, file, &l->info, d);
	if (rc == WL_OK)
		rc = find_step(root, file, &sdir, &runner, d);
	if (rc == WL_OK && !cJSON_IsString(tg))
		rc = diag_fail(d, "%s: missing 'target'", file);
	if (rc == WL_OK) {
		char pdir[4096];
		snprintf(pdir, sizeof pdir, "%s/%s", dir, sdir);
		if (!(l->target = strdup(tg->valuestring)))
			wl_die(__FILE__, __LINE__, "out of memory");
		l->info.target = l->target;
		rc = program_open(pdir, runner, threads, &l->step, d);
	}
	cJSON_Delete(root);
	if (rc != WL_OK) {
		llm_close(l);
		return WL_ERR;
	}
	alloc_state(l);
	*out = l;
	return WL_OK;
}

void llm_close(Llm *l)
{
	if (!l)
		return;
	program_close(l->step);
	for (int i = 0; l->cache && i < 2 * l->info.layers; i++) {
		rt_free(&l->cache[i]);
		free(l->past_names[i]);
		free(l->present_names[i]);
	}
	free(l->cache);
	free(l->past_names);
	free(l->present_names);
	rt_free(&l->ids);
	rt_free(&l->pos);
	rt_free(&l->mask);
	free(l->target);
	free(l);
}

const LlmInfo *llm_info(const Llm *l) { return &l->info; }

int llm_program_count(const Llm *l) { (void)l; return 1; }

Program *llm_program(const Llm *l, int i, const char **name)
{
	WL_ASSERT(i == 0);
	if (name)
		*name = "step";
	return l->step;
}

/* One position: token `tok` at position p; logits into *logits (a view). */
static int step(Llm *l, int64_t tok, int p, const RTensor **logits, Diag *d)
{
	const LlmInfo *li = &l->info;
	int S = li->max_seq;
	((int64_t *)l->ids.data)[0] = tok;
	((int64_t *)l->pos.data)[0] = p;
	int64_t *m = l->mask.data;
	for (int j = 0; j < S; j++)
		m[j] = j < p || j == S - 1;
	if (program_bind(l->step, "input_ids", &l->ids, d) != WL_OK ||
	    program_bind(l->step, "position_ids", &l->pos, d) != WL_OK ||
	    program_bind(l->step, "attention_mask", &l->mask, d) != WL_OK)
		return WL_ERR;
	for (int i = 0; i < 2 * li->layers; i++)
		if (program_bind(l->step, l->past_names[i], &l->cache[i], d) != WL_OK)
			return WL_ERR;
	if (program_run(l->step, d) != WL_OK)
		return WL_ERR;
	if (!(*logits = program_output(l->step, "logits", d)))
		return WL_ERR;
	if ((*logits)->dtype != DT_FLOAT || rt_numel(*logits) != li->vocab)
		return diag_fail(d, "step: 'logits' is not float32 with %d values", li->vocab);
	if (p >= S - 1)
		return WL_OK;          /* the last position: nothing left to cache */
	int64_t hd = li->head_dim, rows = S - 1;
	for (int i = 0; i < 2 * li->layers; i++) {
		const RTensor *pr = program_output(l->step, l->present_names[i], d);
		if (!pr)
			return WL_ERR;
		if (pr->dtype != DT_FLOAT || pr->ndim != 4 || pr->dims[1] != li->kv_heads || pr->dims[2] != S ||
		    pr->dims[3] != hd)
			return diag_fail(d, "step: '%s' is not float32[1,%d,%d,%lld]", l->present_names[i], li->kv_heads, S,
			                 (long long)hd);
		const float *src = pr->data;
		float *dst = l->cache[i].data;
		for (int h = 0; h < li->kv_heads; h++)
			memcpy(dst + ((int64_t)h * rows + p) * hd, src + ((int64_t)h * S + S - 1) * hd,
			       (size_t)hd * sizeof(float));
	}
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
	rep->step_ms = calloc((size_t)(np + max_new), sizeof *rep->step_ms);
	if (!rep->step_ms)
		wl_die(__FILE__, __LINE__, "out of memory");
	int64_t tok = prompt[0];
	for (int p = 0; p < np + max_new - 1 && *nout < max_new; p++) {
		const RTensor *logits;
		double t0 = wl_now_ms();
		if (step(l, tok, p, &logits, d) != WL_OK) {
			free(cand);
			return WL_ERR;
		}
		double dt = wl_now_ms() - t0;
		rep->step_ms[rep->nsteps++] = dt;
		if (p < np)
			rep->prompt_ms += dt;      /* the steps that read prompt ids */
		else
			rep->gen_ms += dt;         /* the steps that read generated ids */
		if (p + 1 < np) {
			tok = prompt[p + 1];
			continue;
		}
		tok = greedy ? argmax(logits) : sample(logits, smp, &st, cand);
		if (tok == stop)
			break;
		out[(*nout)++] = tok;
		rep->generated = *nout;
		if (fn && fn(ctx, tok, logits, d) != WL_OK) {
			free(cand);
			return WL_ERR;
		}
	}
	free(cand);
	return WL_OK;
}
