/* cmd_generate.c — `wlower generate`: autoregressive greedy decoding on an
 * LLM pipeline directory (runtime/pipelines/llm.c), with a report in the
 * style of llama-bench (prompt processing and token generation tokens/s).
 *
 *   wlower generate --pipeline PIPE_DIR --prompt-ids 1,2,3 [--max-new-tokens N]
 *                   [--threads N] [--reps N] [--ignore-eos] [--stream] [--json FILE]
 *
 * stdout: the generated ids, comma-separated, one line (or one id at a time
 * with --stream); with a tokenizer (--tokenizer, --prompt TEXT) also their
 * text on a second line (with --stream: the text as it is produced instead). stderr: the report (prompt processing = the prefill runs,
 * token generation = the steps, step time by position, peak memory: the
 * process's peak resident set, getrusage ru_maxrss). --json FILE (atomic):
 * {"ids": [...], "prompt_ids": [...], "report": {...}}. On a qc-* pipeline the
 * report adds the simulated device: cycles and latency per token and
 * tokens/s at the configured clock (the cost model's cycles per run of each
 * program, summed over the runs of the first repetition, per position),
 * saturated fixed-point stores per program and per position, and per
 * program the vendor's per-run table (`wlower sim`'s configuration and report).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "compiler/driver/commands.h"
#include "runtime/pipelines/pipeline.h"
#include "runtime/pipelines/tokenizer.h"
#include "tranges/tranges.h"

static const char CMD[] = "generate";

static const char usage_generate[] =
"usage: wlower generate (--pipeline PIPE_DIR | --model LLM_DIR --target T [--max-seq N] [compile options])\n"
"                       (--prompt-ids ID,ID,... | --prompt TEXT --tokenizer FILE) [options]\n"
"\n"
"Decoding (greedy: argmax, first index on ties; or sampled) against a static-size KV cache\n"
"updated in place: the prompt by the prefill program (chunks of its N rows), then one\n"
"step program run per generated id, and lm_head on the last row.\n"
"PIPE_DIR: 'wlower LLM_DIR --pipeline llm --target ref|host|qc-n|qc-p|qc-u -o PIPE_DIR'.\n"
"LLM_DIR: an Optimum export (config.json, decoder_with_past_model.onnx) or an ONNX Runtime\n"
"GenAI folder (genai_config.json and the model it names).\n"
"With --model, the pipeline is compiled on first use into a cache keyed by the sha256 of\n"
"LLM_DIR's files, the target and the compile options ($WLOWER_CACHE, else\n"
"$XDG_CACHE_HOME/wlower, else ~/.cache/wlower) and reused after. Compile options with\n"
"--model: --max-seq, --prefill-rows, --argmax-on-device, --kv-cache int8 (with --calibrate),\n"
"--cpu (host), --calibrate PROMPTS.txt\n"
"[--calibrate-margin M] or --tranges DIR (qc-*, one required), --cores, --ocm,\n"
"--macs-per-pe, --clock, --ext-bw (qc-*), as 'wlower --help' describes them.\n"
"qc-* pipelines run on the bit-exact emulator (one simulator process per program).\n"
"\n"
"  --prompt-ids LIST     prompt token ids, comma-separated (e.g. 1: the BOS id)\n"
"  --prompt TEXT         the prompt as text, encoded with the tokenizer (its template\n"
"                        adds e.g. Llama's <s>); one of --prompt and --prompt-ids\n"
"  --tokenizer FILE      a Hugging Face tokenizer.json (default with --model: LLM_DIR/\n"
"                        tokenizer.json when present): the text of the ids is printed\n"
"                        too (a second stdout line; with --stream the text is streamed\n"
"                        instead of the ids) and written as \"text\" with --json\n"
"  --max-new-tokens N    ids to generate (default 32); prompt + N <= max_seq\n"
"  --temperature T       0 (default): greedy; > 0: sample from softmax(logits / T)\n"
"  --top-k K             sample among the K most likely ids (default 0: all)\n"
"  --top-p P             then among the fewest ids reaching probability P (default 1)\n"
"  --seed S              the sampler's seed (default 0; same seed, same ids)\n"
"  --ignore-eos          do not stop at the model's eos id\n"
"  --stream              print each id as it is generated\n"
"  --threads N           threads for the kernels (default: the online CPUs)\n"
"  --reps N              generate N times (same ids) and report mean +- sd\n"
"  --json FILE           write {\"ids\", \"prompt_ids\", \"report\"} to FILE (atomically)\n"
"  --dump-logits DIR     write the logits that chose generated id K as DIR/step_K.npy\n"
"                        (float32 [vocab]; for numerics checks)\n"
"  -h, --help            this help\n"
"\n"
"stdout: the generated ids (prompt excluded), comma-separated (with a tokenizer, then their\n"
"text on a second line); stderr: the report\n"
"(prompt processing and token generation tokens/s, step time by position, KV cache type and\n"
"bytes (int8 for a pipeline compiled with --kv-cache int8), peak memory;\n"
"qc-*: simulated cycles, latency and tokens/s per token at the configured clock, saturated\n"
"fixed-point stores per program and position, the vendor's per-run table of each program).\n"
"exit status: 0 success, 1 bad input (one line naming the file or the id), 2 usage error\n";

typedef struct GenArgs {
	const char *pipeline, *prompt, *json, *dump, *model, *target, *max_seq, *cpu, *prefill_rows;
	const char *text, *tokenizer;      /* --prompt TEXT, --tokenizer FILE */
	const char *calibrate, *margin, *tranges, *cores, *ocm, *macs_per_pe, *clock, *ext_bw, *kv_cache;
	long max_new, threads, reps, top_k, seed;
	double temperature, top_p;
	bool ignore_eos, stream, argmax;
} GenArgs;

#define O(f) offsetof(GenArgs, f)
static const OptSpec gen_opts[] = {
	{"--pipeline", NULL, OPT_STRING, O(pipeline)},
	{"--model", NULL, OPT_STRING, O(model)},
	{"--target", NULL, OPT_STRING, O(target)},
	{"--max-seq", NULL, OPT_STRING, O(max_seq)},
	{"--prefill-rows", NULL, OPT_STRING, O(prefill_rows)},
	{"--argmax-on-device", NULL, OPT_FLAG, O(argmax)},
	{"--kv-cache", NULL, OPT_STRING, O(kv_cache)},
	{"--cpu", NULL, OPT_STRING, O(cpu)},
	{"--calibrate", NULL, OPT_STRING, O(calibrate)},
	{"--calibrate-margin", NULL, OPT_STRING, O(margin)},
	{"--tranges", NULL, OPT_STRING, O(tranges)},
	{"--cores", NULL, OPT_STRING, O(cores)},
	{"--ocm", NULL, OPT_STRING, O(ocm)},
	{"--macs-per-pe", NULL, OPT_STRING, O(macs_per_pe)},
	{"--clock", NULL, OPT_STRING, O(clock)},
	{"--ext-bw", NULL, OPT_STRING, O(ext_bw)},
	{"--prompt-ids", NULL, OPT_STRING, O(prompt)},
	{"--prompt", NULL, OPT_STRING, O(text)},
	{"--tokenizer", NULL, OPT_STRING, O(tokenizer)},
	{"--json", NULL, OPT_STRING, O(json)},
	{"--dump-logits", NULL, OPT_STRING, O(dump)},
	{"--max-new-tokens", NULL, OPT_INT, O(max_new), 1, 1 << 24, false, "%s: '%s' is not 1..16777216"},
	{"--threads", NULL, OPT_INT, O(threads), 1, 1024, false, "%s: '%s' is not 1..1024"},
	{"--reps", NULL, OPT_INT, O(reps), 1, 1000, false, "%s: '%s' is not 1..1000"},
	{"--temperature", NULL, OPT_REAL, O(temperature), 0, 100, false, "%s: '%s' is not 0..100"},
	{"--top-k", NULL, OPT_INT, O(top_k), 0, 1 << 24, false, "%s: '%s' is not 0..16777216"},
	{"--top-p", NULL, OPT_REAL, O(top_p), 0, 1, true, "%s: '%s' is not in (0, 1]"},
	{"--seed", NULL, OPT_INT, O(seed), 0, 2147483647L, false, "%s: '%s' is not 0..2147483647"},
	{"--ignore-eos", NULL, OPT_FLAG, O(ignore_eos)},
	{"--stream", NULL, OPT_FLAG, O(stream)},
	OPT_END,
};
#undef O

typedef struct TokenSink {
	bool stream;
	const char *dump;          /* --dump-logits DIR */
	int count;
	const Tokenizer *tok;      /* --stream with a tokenizer: text, not ids */
	int64_t *ids;              /* the ids so far (capacity: --max-new-tokens) */
	size_t printed;            /* bytes of their text already printed */
} TokenSink;

/* The text of the ids so far beyond what was printed; held back while it
 * ends in U+FFFD (a character cut between tokens) unless `final`. */
static int stream_text(TokenSink *s, bool final, Diag *d)
{
	char *t;
	if (tokenizer_decode(s->tok, s->ids, s->count, true, &t, d) != WL_OK)
		return WL_ERR;
	size_t n = strlen(t);
	bool cut = n >= 3 && memcmp(t + n - 3, "\xEF\xBF\xBD", 3) == 0;
	if (n > s->printed && (final || !cut)) {
		fputs(t + s->printed, stdout);
		fflush(stdout);
		s->printed = n;
	}
	free(t);
	return WL_OK;
}

/* Each generated id: printed at once with --stream; its logits written as
 * DIR/step_K.npy with --dump-logits. */
static int on_token(void *ctx, int64_t id, const RTensor *logits, Diag *d)
{
	TokenSink *s = ctx;
	if (s->dump) {
		char path[4096];
		snprintf(path, sizeof path, "%s/step_%d.npy", s->dump, s->count);
		RTensor flat = *logits;
		flat.ndim = 1;
		flat.dims[0] = rt_numel(logits);
		if (npy_write(path, &flat, d) != WL_OK)
			return WL_ERR;
	}
	if (s->stream && s->tok) {
		s->ids[s->count++] = id;
		return stream_text(s, false, d);
	}
	if (s->stream) {
		printf("%s%lld", s->count ? "," : "", (long long)id);
		fflush(stdout);
	}
	s->count++;
	return WL_OK;
}

static void mean_sd(const double *x, int n, double *mean, double *sd)
{
	double s = 0, q = 0;
	for (int i = 0; i < n; i++)
		s += x[i];
	*mean = n ? s / n : 0;
	for (int i = 0; i < n; i++)
		q += (x[i] - *mean) * (x[i] - *mean);
	*sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

static cJSON *ids_json(const int64_t *ids, int n)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)ids[i]));
	return a;
}

/* Tokens/s per rep: prompt processing (np ids) and generation (ids read by
 * the generation steps: generated - 1). */
static void sim_report(Llm *l, const SimTotals *t, cJSON *rep);

static void report(Llm *l, const SimTotals *sim, bool sim_on, const LlmReport *reps, int nrep, const GenArgs *a,
                   const int64_t *prompt, int np, const int64_t *ids, int nid, const char *text, int *rc, Diag *d)
{
	const LlmInfo *li = llm_info(l);
	double pp[1000], tg[1000], pm, ps, tm, ts;
	for (int r = 0; r < nrep; r++) {
		pp[r] = reps[r].prompt_ms > 0 ? 1e3 * reps[r].prompt_tokens / reps[r].prompt_ms : 0;
		tg[r] = reps[r].gen_ms > 0 ? 1e3 * (reps[r].generated - 1) / reps[r].gen_ms : 0;
	}
	mean_sd(pp, nrep, &pm, &ps);
	mean_sd(tg, nrep, &tm, &ts);
	const LlmReport *r0 = &reps[0];
	double first = r0->nsteps ? r0->step_ms[0] : 0, last = r0->nsteps ? r0->step_ms[r0->nsteps - 1] : 0;
	struct rusage ru;
	double peak_mb = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss / 1024.0 : 0;   /* ru_maxrss: KiB */
	fprintf(stderr, "| target | threads | max_seq | test | tokens | t/s |\n");
	fprintf(stderr, "| %s | %ld | %d | pp%d | %d | %.2f ± %.2f |\n", li->target, a->threads, li->max_seq, np, np, pm, ps);
	fprintf(stderr, "| %s | %ld | %d | tg%d | %d | %.2f ± %.2f |\n", li->target, a->threads, li->max_seq,
	        r0->generated, r0->generated, tm, ts);
	fprintf(stderr, "prompt: %d ids in %d prefill runs of up to %d rows\n", np, r0->prefill_runs, li->prefill_rows);
	if (r0->nsteps)
		fprintf(stderr, "step time: %.3f ms at p=%d, %.3f ms at p=%d (%d steps, %d reps)\n", first, r0->step_pos0,
		        last, r0->step_pos0 + r0->nsteps - 1, r0->nsteps, nrep);
	double kv_bytes = 2.0 * li->layers * li->kv_heads * li->max_seq * li->head_dim * (li->kv_int8 ? 1 : 4);
	fprintf(stderr, "KV cache: %s, %.0f bytes (%d layers x K,V x [1,%d,%d,%d])\n", li->kv_int8 ? "int8" : "float32",
	        kv_bytes, li->layers, li->kv_heads, li->max_seq, li->head_dim);
	fprintf(stderr, "peak memory: %.1f MiB\n", peak_mb);
	if (!a->json) {
		if (sim_on)
			sim_report(l, sim, NULL);
		return;
	}
	cJSON *root = cJSON_CreateObject();
	cJSON_AddItemToObject(root, "ids", ids_json(ids, nid));
	cJSON_AddItemToObject(root, "prompt_ids", ids_json(prompt, np));
	if (text) {
		cJSON_AddStringToObject(root, "text", text);
		if (a->text)
			cJSON_AddStringToObject(root, "prompt", a->text);
	}
	cJSON *rep = cJSON_AddObjectToObject(root, "report");
	cJSON_AddStringToObject(rep, "target", li->target);
	cJSON_AddNumberToObject(rep, "threads", (double)a->threads);
	cJSON_AddNumberToObject(rep, "max_seq", li->max_seq);
	cJSON_AddNumberToObject(rep, "reps", nrep);
	cJSON_AddNumberToObject(rep, "pp_tokens_per_s", pm);
	cJSON_AddNumberToObject(rep, "pp_tokens_per_s_sd", ps);
	cJSON_AddNumberToObject(rep, "tg_tokens_per_s", tm);
	cJSON_AddNumberToObject(rep, "tg_tokens_per_s_sd", ts);
	cJSON_AddNumberToObject(rep, "prefill_rows", li->prefill_rows);
	cJSON_AddBoolToObject(rep, "argmax_on_device", li->argmax_on_device);
	cJSON_AddNumberToObject(rep, "prefill_runs", r0->prefill_runs);
	cJSON_AddNumberToObject(rep, "peak_memory_mib", round(peak_mb * 10) / 10);
	cJSON_AddStringToObject(rep, "kv_cache", li->kv_int8 ? "int8" : "float32");
	cJSON_AddNumberToObject(rep, "kv_cache_bytes", kv_bytes);
	cJSON_AddNumberToObject(rep, "step_pos0", r0->step_pos0);
	cJSON *steps = cJSON_AddArrayToObject(rep, "step_ms");
	for (int i = 0; i < r0->nsteps; i++)
		cJSON_AddItemToArray(steps, cJSON_CreateNumber(round(r0->step_ms[i] * 1e3) / 1e3));
	if (sim_on)
		sim_report(l, sim, rep);
	if (json_write_atomic(a->json, root, d) != WL_OK)
		*rc = cmd_error(CMD, d);
	cJSON_Delete(root);
}

/* The compile options --model passes on (name, value; NULL when not given). */
typedef struct PassOpt { const char *name, *value; } PassOpt;
static int pass_opts(const GenArgs *a, PassOpt *o)
{
	PassOpt v[] = {{"--max-seq", a->max_seq}, {"--prefill-rows", a->prefill_rows}, {"--cpu", a->cpu},
	               {"--argmax-on-device", a->argmax ? "" : NULL},
	               {"--calibrate", a->calibrate}, {"--calibrate-margin", a->margin},
	               {"--tranges", a->tranges}, {"--cores", a->cores}, {"--ocm", a->ocm},
	               {"--macs-per-pe", a->macs_per_pe}, {"--clock", a->clock}, {"--ext-bw", a->ext_bw},
	               {"--kv-cache", a->kv_cache}};
	int n = (int)(sizeof v / sizeof v[0]);
	memcpy(o, v, sizeof v);
	return n;
}

/* sha256 of what decides the compiled pipeline: the files of LLM_DIR the
 * pipeline reads, the target, the compile options, the calibration prompts
 * or ranges (by content), the wlower version. */
static int cache_key(const GenArgs *a, char key[65], Diag *d)
{
	static const char *files[] = {"config.json", "decoder_with_past_model.onnx", "decoder_with_past_model.onnx.data",
	                              "decoder_model.onnx", "decoder_model.onnx.data"};
	size_t cap = 8192, len = 0;
	char *txt = malloc(cap);
	if (!txt)
		wl_die(__FILE__, __LINE__, "out of memory");
	len += (size_t)snprintf(txt + len, cap - len, "wlower %s\ntarget %s\n", WLOWER_VERSION, a->target);
	PassOpt po[16];
	int npo = pass_opts(a, po);
	for (int i = 0; i < npo; i++)
		len += (size_t)snprintf(txt + len, cap - len, "%s %s\n", po[i].name, po[i].value ? po[i].value : "-");
	static const char *const progs[] = {"prefill", "step", "lm_head"};
	char extra[4][4096] = {"", "", "", ""};
	if (a->calibrate)
		snprintf(extra[0], sizeof extra[0], "%s", a->calibrate);
	for (int i = 0; a->tranges && i < 3; i++) {
		snprintf(extra[1 + i], sizeof extra[1 + i], "%s/%s.tranges", a->tranges, progs[i]);
		if (access(extra[1 + i], F_OK) != 0)
			extra[1 + i][0] = 0;     /* compiling names the missing file */
	}
	for (int i = 0; i < 4; i++) {
		char hex[65];
		if (!extra[i][0])
			continue;
		if (file_sha256_hex(extra[i], hex, d) != WL_OK) {
			free(txt);
			return WL_ERR;
		}
		len += (size_t)snprintf(txt + len, cap - len, "%s %s\n", i ? progs[i - 1] : "prompts", hex);
	}
	/* an ONNX Runtime GenAI folder (cmd_pipeline.c): genai_config.json and the
	 * decoder it names (model.decoder.filename, default model.onnx) with its
	 * external data; a malformed config is the compile's error to report */
	char gfile[4096], dfile[4096], gname[512] = "model.onnx", gdata[600];
	struct stat gst;
	snprintf(gfile, sizeof gfile, "%s/genai_config.json", a->model);
	snprintf(dfile, sizeof dfile, "%s/decoder_with_past_model.onnx", a->model);
	bool genai = stat(dfile, &gst) != 0 && stat(gfile, &gst) == 0;
	if (genai) {
		cJSON *gc = NULL;
		Diag gd = {0};
		if (json_read_file(gfile, &gc, &gd) == WL_OK) {
			const cJSON *fn = cJSON_GetObjectItemCaseSensitive(
				cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(gc, "model"), "decoder"), "filename");
			if (cJSON_IsString(fn) && strlen(fn->valuestring) < sizeof gname)
				snprintf(gname, sizeof gname, "%s", fn->valuestring);
			cJSON_Delete(gc);
		}
		snprintf(gdata, sizeof gdata, "%s.data", gname);
	}
	const char *gfiles[] = {"genai_config.json", gname, gdata};
	const char *const *fl = genai ? gfiles : files;
	size_t nfl = genai ? 3 : sizeof files / sizeof files[0];
	for (size_t i = 0; i < nfl; i++) {
		char path[4096], hex[65];
		snprintf(path, sizeof path, "%s/%s", a->model, fl[i]);
		struct stat st;
		if (stat(path, &st) != 0) {
			if (i < 2) {
				free(txt);
				return diag_fail(d, genai ? "%s: missing (named by genai_config.json: model.decoder.filename)"
				                          : "%s: missing (an Optimum export: config.json, decoder_with_past_model.onnx; "
				                            "or an ONNX Runtime GenAI folder: genai_config.json, model.onnx)", path);
			}
			continue;
		}
		if (file_sha256_hex(path, hex, d) != WL_OK) {
			free(txt);
			return WL_ERR;
		}
		len += (size_t)snprintf(txt + len, cap - len, "%s %s\n", fl[i], hex);
	}
	sha256_hex(txt, len, key);
	free(txt);
	return WL_OK;
}

/* --model: the cached pipeline folder, compiled first when absent or invalid. */
static int cached_pipeline(const GenArgs *a, char *dir, size_t n)
{
	char root[2048], key[65];
	Diag d = {0};
	int rc = cmd_cache_root(CMD, root, sizeof root);
	if (rc != CMD_OK)
		return rc;
	if (cache_key(a, key, &d) != WL_OK)
		return cmd_error(CMD, &d);
	snprintf(dir, n, "%s/pipelines/%.24s-%s", root, key, a->target);
	PassOpt po[16];
	int npo = pass_opts(a, po);
	const char *opts[32];
	for (int i = 0; i < npo; i++) {
		opts[2 * i] = po[i].name;
		opts[2 * i + 1] = po[i].value;
	}
	return cmd_cached_pipeline(CMD, "llm", a->model, a->target, dir, opts, 2 * npo);
}

/* ---------------------------------------------------------------- the simulated device (qc-*) */

/* After the first repetition: what the programs cost on the device
 * (sim_report.c). */
static void sim_totals(Llm *l, SimTotals *t)
{
	Program *progs[SIM_MAX_PROGRAMS];
	const char *names[SIM_MAX_PROGRAMS];
	int n = 0;
	for (int i = 0; i < llm_program_count(l) && n < SIM_MAX_PROGRAMS; i++, n++)
		progs[n] = llm_program(l, i, &names[n]);
	sim_totals_collect(t, progs, names, n);
}

/* The simulated part of the report on stderr, and into the JSON report. */
static void sim_report(Llm *l, const SimTotals *t, cJSON *rep)
{
	double cycles_per_token = 0;      /* one step run and one lm_head run (the prefill's are the prompt's) */
	for (int i = 0; i < t->nprog; i++)
		if (strcmp(t->prog[i].name, "prefill") != 0)
			cycles_per_token += (double)t->prog[i].cycles_per_run;
	double ms = cycles_per_token / t->clock_hz * 1e3;
	fprintf(stderr, "simulated (%s, cost model): %.0f cycles per token, %.4g ms per token at %.3f GHz, "
	        "%.2f tokens/s\n", llm_info(l)->target, cycles_per_token, ms, t->clock_hz / 1e9, ms > 0 ? 1e3 / ms : 0);
	cJSON *sim = rep ? cJSON_AddObjectToObject(rep, "sim") : NULL;
	if (sim) {
		cJSON_AddNumberToObject(sim, "clock_hz", t->clock_hz);
		cJSON_AddNumberToObject(sim, "cycles_per_token", round(cycles_per_token));
		cJSON_AddNumberToObject(sim, "ms_per_token", ms);
		cJSON_AddNumberToObject(sim, "tokens_per_s", ms > 0 ? 1e3 / ms : 0);
	}
	sim_totals_print(t, "position", sim ? cJSON_AddArrayToObject(sim, "programs") : NULL);
}

static int generate(const GenArgs *a, const int64_t *prompt, int np, const Tokenizer *tok)
{
	Diag d = {0};
	Llm *l;
	if (llm_open(a->pipeline, (int)a->threads, &l, &d) != WL_OK)
		return cmd_error(CMD, &d);
	const LlmInfo *li = llm_info(l);
	if (li->argmax_on_device && (a->temperature > 0 || a->dump)) {
		llm_close(l);
		return cmd_usage(CMD, "%s: %s needs logits, and this pipeline's lm_head computes the greedy id on the "
		                 "device (compiled with --argmax-on-device; compile without it to sample or dump logits)",
		                 a->pipeline, a->dump ? "--dump-logits" : "--temperature > 0 (sampling)");
	}
	int64_t *ids = calloc((size_t)a->max_new, sizeof *ids);
	LlmReport *reps = calloc((size_t)a->reps, sizeof *reps);
	if (!ids || !reps)
		wl_die(__FILE__, __LINE__, "out of memory");
	int nid = 0, rc = 0;
	TokenSink sink = {.stream = a->stream, .dump = a->dump, .tok = tok};
	if (tok && a->stream && !(sink.ids = calloc((size_t)a->max_new, sizeof *sink.ids)))
		wl_die(__FILE__, __LINE__, "out of memory");
	Diag dd = {0};
	if (a->dump && mkdir_p(a->dump, &dd) != WL_OK) {
		free(ids);
		free(reps);
		free(sink.ids);
		llm_close(l);
		return cmd_error(CMD, &dd);
	}
	int64_t stop = a->ignore_eos ? -1 : li->eos;
	SimTotals sim = {0};
	for (int r = 0; r < a->reps && rc == 0; r++) {
		int n;
		sink.count = 0;
		sink.printed = 0;
		for (int i = 0; i < llm_program_count(l); i++)
			program_stats_reset(llm_program(l, i, NULL));
		LlmSampling smp = {a->temperature, a->top_p, (int)a->top_k, (uint64_t)a->seed};
		if (llm_generate(l, prompt, np, (int)a->max_new, stop, &smp, ids, &n, r == 0 ? on_token : NULL, &sink,
		                 &reps[r], &d) != WL_OK)
			rc = cmd_error(CMD, &d);
		else if (r > 0 && (n != nid))
			rc = cmd_error(CMD, &(Diag){.msg = "the ids differ between repetitions (non-deterministic run)"});
		if (rc == 0 && r == 0)
			sim_totals(l, &sim);
		nid = n;
	}
	char *text = NULL;
	if (rc == 0 && tok && tokenizer_decode(tok, ids, nid, true, &text, &d) != WL_OK)
		rc = cmd_error(CMD, &d);
	if (rc == 0 && tok && a->stream && stream_text(&sink, true, &d) != WL_OK)
		rc = cmd_error(CMD, &d);
	if (rc == 0) {
		if (!a->stream)
			for (int i = 0; i < nid; i++)
				printf("%s%lld", i ? "," : "", (long long)ids[i]);
		printf("\n");
		if (tok && !a->stream)
			printf("%s\n", text);
		if (fflush(stdout) != 0)
			rc = cmd_error(CMD, &(Diag){.msg = "<stdout>: write failed"});
	}
	if (rc == 0)
		report(l, &sim, sim.on, reps, (int)a->reps, a, prompt, np, ids, nid, text, &rc, &d);
	free(text);
	free(sink.ids);
	sim_totals_free(&sim);
	for (int r = 0; r < a->reps; r++)
		free(reps[r].step_ms);
	free(reps);
	free(ids);
	llm_close(l);
	return rc;
}

int cmd_generate(int argc, char **argv)
{
	if (opt_help(argc, argv, usage_generate))
		return 0;
	GenArgs a = {.max_new = 32, .reps = 1, .top_p = 1.0};
	const char *pos = NULL;
	int rc = opt_parse(CMD, gen_opts, argc, argv, &a, &pos, "argument", NULL);
	if (rc)
		return rc;
	if (pos)
		return cmd_usage(CMD, "unexpected argument '%s' (the pipeline is given with --pipeline)", pos);
	if (!a.pipeline == !a.model)
		return cmd_usage(CMD, "%s", "give --pipeline PIPE_DIR or --model LLM_DIR --target T (one of them)");
	if (a.model && !a.target)
		return cmd_usage(CMD, "%s", "--model needs --target ref|host|qc-n|qc-p|qc-u");
	PassOpt po[16];
	int npo = pass_opts(&a, po);
	for (int i = 0; a.pipeline && i < npo; i++)
		if (po[i].value || a.target)
			return cmd_usage(CMD, "%s", "--target and the compile options (--max-seq, --prefill-rows, --argmax-on-device, --kv-cache, --cpu, "
			                 "--calibrate, --tranges, hardware) go with --model, not --pipeline");
	char cached[4096];
	if (a.model) {
		if ((rc = cached_pipeline(&a, cached, sizeof cached)) != CMD_OK)
			return rc;
		a.pipeline = cached;
	}
	if (!a.prompt == !a.text)
		return cmd_usage(CMD, "%s", "give --prompt-ids IDS or --prompt TEXT (one of them; e.g. --prompt-ids 1)");
	char tpath[4096];
	if (!a.tokenizer && a.model) {   /* the model folder's own tokenizer.json, when it has one */
		snprintf(tpath, sizeof tpath, "%s/tokenizer.json", a.model);
		if (access(tpath, F_OK) == 0)
			a.tokenizer = tpath;
	}
	if (a.text && !a.tokenizer)
		return cmd_usage(CMD, "%s", "--prompt TEXT needs --tokenizer tokenizer.json (or LLM_DIR/tokenizer.json "
		                 "with --model)");
	if (!a.threads)
		a.threads = cmd_default_threads();
	Tokenizer *tok = NULL;
	Diag d = {0};
	if (a.tokenizer && tokenizer_open(a.tokenizer, &tok, &d) != WL_OK)
		return cmd_error(CMD, &d);
	int64_t *prompt = NULL;
	int np = 0;
	if (a.text) {
		if (tokenizer_encode(tok, a.text, true, &prompt, &np, &d) != WL_OK)
			rc = cmd_error(CMD, &d);
		else if (np == 0)
			rc = cmd_error(CMD, &(Diag){.msg = "--prompt: the text encodes to no ids"});
	} else
		rc = cmd_parse_ids(CMD, "--prompt-ids", a.prompt, &prompt, &np);
	if (rc == CMD_OK)
		rc = generate(&a, prompt, np, tok);
	free(prompt);
	tokenizer_free(tok);
	return rc;
}
