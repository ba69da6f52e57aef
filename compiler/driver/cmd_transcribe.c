/* cmd_transcribe.c — `wlower transcribe`: audio files to text with a
 * Whisper pipeline directory (runtime/pipelines/whisper.c), in the manner
 * of whisper.cpp's whisper-cli: segments with timestamps on stdout, -o FILE
 * as txt, srt, vtt or json, a report on stderr.
 *
 *   wlower transcribe AUDIO... (--pipeline PIPE_DIR | --model WHISPER_DIR --target T)
 *                     [--language en] [--task transcribe|translate] [--no-timestamps] ...
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "compiler/driver/commands.h"
#include "runtime/pipelines/pipeline.h"

static const char CMD[] = "transcribe";

static const char usage_transcribe[] =
"usage: wlower transcribe AUDIO... (--pipeline PIPE_DIR | --model WHISPER_DIR --target ref|host|qc-n|qc-p|qc-u)\n"
"                         [options]\n"
"\n"
"Transcribes (or translates) speech with a Whisper pipeline: audio (any format libsndfile\n"
"reads, downmixed and resampled to 16 kHz) in windows of the pipeline's length (30 s for\n"
"Whisper), log-mel, encoder, cross-attention K/V once per window, then KV-cached decoding\n"
"with OpenAI's rules (suppressed tokens, timestamp pairs, <|endoftext|> ends).\n"
"PIPE_DIR: 'wlower WHISPER_DIR --pipeline whisper --target ref|host|qc-n|qc-p|qc-u -o PIPE_DIR'\n"
"(qc-*: with --calibrate AUDIO or --tranges DIR; run on the bit-exact emulator). With\n"
"--model, the pipeline is compiled on first use into a cache keyed by the sha256 of\n"
"WHISPER_DIR's files, the target and the options ($WLOWER_CACHE, else\n"
"$XDG_CACHE_HOME/wlower, else ~/.cache/wlower). --model takes the compile options --max-seq,\n"
"--cpu (host), and for qc-*: --calibrate AUDIO (repeatable) [--calibrate-margin M] or\n"
"--tranges DIR (one required), --cores, --ocm, --macs-per-pe, --clock, --ext-bw (the\n"
"calibration clips and ranges are keyed by content); --precision fp32|fp32dec-lmq8 (lmq8:\n"
"int8 LM head and embedding, --calibrate AUDIO required on every target; 'wlower --help').\n"
"\n"
"  --tokenizer FILE      Whisper's multilingual.tiktoken (default $WLOWER_WHISPER_TOKENIZER,\n"
"                        else WHISPER_DIR/multilingual.tiktoken of the pipeline's model)\n"
"  --language CODE       spoken language (default en): en, de, fr, ... (Whisper's 99)\n"
"  --task T              transcribe (default) or translate (to English)\n"
"  --no-timestamps       decode without timestamp tokens (one segment per window)\n"
"  --max-tokens N        tokens sampled per window (default 224)\n"
"  --temperature T       0 (default): greedy; > 0: sample (seeded by --seed)\n"
"  --fallback            on a window whose text compresses more than 2.4x (zlib) or whose\n"
"                        mean log-probability is < -1, retry at temperature +0.2 up to 1.0\n"
"  --seed S              the sampler's seed (default 0)\n"
"  --prompt TEXT         initial prompt: text the first window is conditioned on, encoded as\n"
"                        openai-whisper does (\" \" + TEXT stripped, tiktoken BPE, 512 tokens\n"
"                        at most)\n"
"  --no-context          do not condition a window on the previous windows' text\n"
"  --beam-size N         at temperature 0, beam search over N hypotheses (default 1: greedy;\n"
"                        whisper-cli and openai-whisper use 5), as openai-whisper's\n"
"                        BeamSearchDecoder; each hypothesis has its own cache (a fork copies\n"
"                        the parent's rows after the ids the free cache already shares with\n"
"                        it; the report counts them)\n"
"  --patience P          beam search ends once round(N * P) hypotheses finished (default 1)\n"
"  --length-penalty A    rank finished hypotheses by sum log-prob / ((5 + length) / 6)^A\n"
"                        (default: sum log-prob / length, as openai-whisper)\n"
"  --threads N           threads for the kernels (default: the online CPUs)\n"
"  -o FILE               write the transcript (one AUDIO) as .txt, .srt, .vtt or .json by the\n"
"                        extension (json: \"text\", \"segments\", \"report\"; the report's\n"
"                        \"windows_sampled\" lists every id sampled per window, \"prompt_ids\"\n"
"                        the --prompt ids), atomically\n"
"  --dump-logits DIR     DIR/mel_W.npy (window W's log-mel) and DIR/step_W_K.npy (the\n"
"                        float32 logits [vocab] that chose the K-th token of window W;\n"
"                        not with beam search, whose hypotheses each have their own)\n"
"  --print-tokens        print each segment's token ids too\n"
"  -h, --help            this help\n"
"\n"
"stdout: one line per segment, \"[HH:MM:SS.mmm --> HH:MM:SS.mmm]  text\"; stderr: progress\n"
"(on a terminal) and the report (per-stage wall time, tokens/s, real-time factor).\n"
"qc-* pipelines add the simulated device (cost model, at the configured clock): cycles and\n"
"latency per program, per window (mel + encoder + cross_kv) and per token (step), simulated\n"
"tokens/s and the simulated real-time factor (simulated seconds / audio seconds; every\n"
"program simulated), saturated fixed-point stores per program and\n"
"run (the step's runs are its positions, window after window), and per program the\n"
"vendor's per-run table; json: report.sim.\n"
"exit status: 0 success, 1 bad input (one line naming the file), 2 usage error\n";

typedef struct TrArgs {
	const char *pipeline, *model, *target, *cpu, *max_seq, *tokenizer, *language, *task, *prompt, *out, *dump;
	const char *margin, *tranges, *cores, *ocm, *macs_per_pe, *clock, *ext_bw;   /* --model, qc-* */
	const char *precision;                                                       /* --model */
	OptList calibrate;
	long max_tokens, threads, seed, beam;
	double temperature, patience, length_penalty;
	bool no_ts, fallback, no_context, print_tokens;
} TrArgs;

#define O(f) offsetof(TrArgs, f)
static const OptSpec tr_opts[] = {
	{"--pipeline", NULL, OPT_STRING, O(pipeline)},
	{"--model", NULL, OPT_STRING, O(model)},
	{"--target", NULL, OPT_STRING, O(target)},
	{"--cpu", NULL, OPT_STRING, O(cpu)},
	{"--max-seq", NULL, OPT_STRING, O(max_seq)},
	{"--calibrate", NULL, OPT_LIST, O(calibrate)},
	{"--calibrate-margin", NULL, OPT_STRING, O(margin)},
	{"--precision", NULL, OPT_STRING, O(precision)},
	{"--tranges", NULL, OPT_STRING, O(tranges)},
	{"--cores", NULL, OPT_STRING, O(cores)},
	{"--ocm", NULL, OPT_STRING, O(ocm)},
	{"--macs-per-pe", NULL, OPT_STRING, O(macs_per_pe)},
	{"--clock", NULL, OPT_STRING, O(clock)},
	{"--ext-bw", NULL, OPT_STRING, O(ext_bw)},
	{"--tokenizer", NULL, OPT_STRING, O(tokenizer)},
	{"--language", NULL, OPT_STRING, O(language)},
	{"--task", NULL, OPT_STRING, O(task)},
	{"--prompt", NULL, OPT_STRING, O(prompt)},
	{"--output", "-o", OPT_STRING, O(out)},
	{"--dump-logits", NULL, OPT_STRING, O(dump)},
	{"--max-tokens", NULL, OPT_INT, O(max_tokens), 1, 4096, false, "%s: '%s' is not 1..4096"},
	{"--threads", NULL, OPT_INT, O(threads), 1, 1024, false, "%s: '%s' is not 1..1024"},
	{"--seed", NULL, OPT_INT, O(seed), 0, 2147483647L, false, "%s: '%s' is not 0..2147483647"},
	{"--beam-size", NULL, OPT_INT, O(beam), 1, 64, false, "%s: '%s' is not 1..64"},
	{"--temperature", NULL, OPT_REAL, O(temperature), 0, 1, false, "%s: '%s' is not 0..1"},
	{"--patience", NULL, OPT_REAL, O(patience), 0, 64, true, "%s: '%s' is not in (0, 64]"},
	{"--length-penalty", NULL, OPT_REAL, O(length_penalty), 0, 10, false, "%s: '%s' is not 0..10"},
	{"--no-timestamps", NULL, OPT_FLAG, O(no_ts)},
	{"--fallback", NULL, OPT_FLAG, O(fallback)},
	{"--no-context", NULL, OPT_FLAG, O(no_context)},
	{"--print-tokens", NULL, OPT_FLAG, O(print_tokens)},
	OPT_END,
};
#undef O

typedef struct Sink {
	const char *dump;
	cJSON *windows;            /* [{"window": W, "tokens": [every sampled id, eot included]}] */
	bool tty;
	int last_window;
	double audio_s, window_s;
} Sink;

static int dump_npy(const char *dir, const char *name, const RTensor *t, Diag *d)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.npy", dir, name);
	RTensor flat = *t;
	if (strncmp(name, "step_", 5) == 0) {
		flat.ndim = 1;
		flat.dims[0] = rt_numel(t);
	}
	return npy_write(path, &flat, d);
}

static int on_step(void *ctx, int win, int k, int64_t id, const RTensor *logits, Diag *d)
{
	Sink *s = ctx;
	cJSON *last = cJSON_GetArrayItem(s->windows, cJSON_GetArraySize(s->windows) - 1);
	if (!last || cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(last, "window")) != win) {
		last = cJSON_CreateObject();
		cJSON_AddNumberToObject(last, "window", win);
		cJSON_AddArrayToObject(last, "tokens");
		cJSON_AddItemToArray(s->windows, last);
	}
	if (k == 0)                /* a fallback retry starts the window's ids again */
		cJSON_DeleteItemFromObjectCaseSensitive(last, "tokens"), cJSON_AddArrayToObject(last, "tokens");
	cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(last, "tokens"), cJSON_CreateNumber((double)id));
	if (!s->dump || !logits)  /* beam search: the chosen ids, no logits */
		return WL_OK;
	char name[64];
	snprintf(name, sizeof name, "step_%d_%d", win, k);
	return dump_npy(s->dump, name, logits, d);
}

static int on_mel(void *ctx, int win, const RTensor *mel, Diag *d)
{
	Sink *s = ctx;
	if (s->tty) {
		fprintf(stderr, "\rwlower transcribe: window %d (%.1f s of %.1f s)   ", win + 1,
		        win * s->window_s < s->audio_s ? win * s->window_s : s->audio_s, s->audio_s);
		fflush(stderr);
	}
	if (!s->dump)
		return WL_OK;
	char name[64];
	snprintf(name, sizeof name, "mel_%d", win);
	return dump_npy(s->dump, name, mel, d);
}

/* --model: the cached pipeline folder (sha256 of the export's files, the
 * target, the options, the calibration clips or ranges by content),
 * compiled first when absent or invalid. */
static int cached_pipeline(const TrArgs *a, char *dir, size_t n)
{
	static const char *files[] = {"config.json", "encoder_model.onnx", "decoder_model.onnx",
	                              "decoder_with_past_model.onnx", "encoder_model.onnx.data", "decoder_model.onnx.data",
	                              "decoder_with_past_model.onnx.data", "decoder_prefill.onnx",
	                              "decoder_prefill.onnx.data"};
	/* the vendor pair (cmd_pipeline_whisper.c): encoder_model.onnx + decoder_prefill.onnx, config.json optional */
	char vp[2][4096];
	struct stat vst;
	snprintf(vp[0], sizeof vp[0], "%s/decoder_with_past_model.onnx", a->model);
	snprintf(vp[1], sizeof vp[1], "%s/decoder_prefill.onnx", a->model);
	bool vendor = stat(vp[0], &vst) != 0 && stat(vp[1], &vst) == 0;
	static const char *const tr_progs[] = {"mel", "encoder", "step"};
	const char *opts[48] = {"--max-seq", a->max_seq, "--cpu", a->cpu, "--calibrate-margin", a->margin,
	                        "--tranges", a->tranges, "--cores", a->cores, "--ocm", a->ocm, "--macs-per-pe",
	                        a->macs_per_pe, "--clock", a->clock, "--ext-bw", a->ext_bw, "--precision", a->precision};
	int nopts = 20;
	char root[2048], key[65], txt[8192];
	Diag d = {0};
	int rc = cmd_cache_root(CMD, root, sizeof root);
	if (rc != CMD_OK)
		return rc;
	size_t len = (size_t)snprintf(txt, sizeof txt, "wlower %s\nwhisper\ntarget %s\n", WLOWER_VERSION, a->target);
	for (int i = 0; i < nopts; i += 2)
		len += (size_t)snprintf(txt + len, sizeof txt - len, "%s %s\n", opts[i], opts[i + 1] ? opts[i + 1] : "-");
	char extra[3 + 8][4096];
	int nx = 0;
	for (int i = 0; i < a->calibrate.n; i++) {
		snprintf(extra[nx++], sizeof extra[0], "%s", a->calibrate.v[i]);
		opts[nopts++] = "--calibrate";
		opts[nopts++] = a->calibrate.v[i];
	}
	for (int i = 0; a->tranges && i < 3; i++) {
		snprintf(extra[nx], sizeof extra[0], "%s/%s.tranges", a->tranges, tr_progs[i]);
		if (access(extra[nx], F_OK) == 0)     /* else compiling names the missing file */
			nx++;
	}
	for (int i = 0; i < nx; i++) {
		char hex[65];
		if (file_sha256_hex(extra[i], hex, &d) != WL_OK)
			return cmd_error(CMD, &d);
		len += (size_t)snprintf(txt + len, sizeof txt - len, "%s %s\n", i < a->calibrate.n ? "clip" : "tranges", hex);
	}
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		char path[4096], hex[65];
		snprintf(path, sizeof path, "%s/%s", a->model, files[i]);
		struct stat st;
		if (stat(path, &st) != 0) {
			if (vendor ? i != 1 && i != 7 : i >= 4)
				continue;
			diag_fail(&d, "%s: missing (an Optimum Whisper export: config.json, encoder_model.onnx, "
			          "decoder_model.onnx, decoder_with_past_model.onnx; or the vendor pair encoder_model.onnx + "
			          "decoder_prefill.onnx)", path);
			return cmd_error(CMD, &d);
		}
		if (file_sha256_hex(path, hex, &d) != WL_OK)
			return cmd_error(CMD, &d);
		len += (size_t)snprintf(txt + len, sizeof txt - len, "%s %s\n", files[i], hex);
	}
	sha256_hex(txt, len, key);
	snprintf(dir, n, "%s/pipelines/%.24s-whisper-%s", root, key, a->target);
	return cmd_cached_pipeline(CMD, "whisper", a->model, a->target, dir, opts, nopts);
}

/* The tokenizer file: --tokenizer, $WLOWER_WHISPER_TOKENIZER, or the
 * model folder's multilingual.tiktoken (pipeline.json model.dir). */
static int tokenizer_path(const TrArgs *a, char *buf, size_t n)
{
	if (a->tokenizer) {
		snprintf(buf, n, "%s", a->tokenizer);
		return CMD_OK;
	}
	const char *e = getenv("WLOWER_WHISPER_TOKENIZER");
	if (e && *e) {
		snprintf(buf, n, "%s", e);
		return CMD_OK;
	}
	char pj[4096];
	snprintf(pj, sizeof pj, "%s/pipeline.json", a->pipeline);
	cJSON *r = NULL;
	Diag d = {0};
	if (json_read_file(pj, &r, &d) == WL_OK) {
		const cJSON *dir = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "model"), "dir");
		if (cJSON_IsString(dir))
			snprintf(buf, n, "%s/multilingual.tiktoken", dir->valuestring);
		cJSON_Delete(r);
		struct stat st;
		if (cJSON_IsString(dir) && stat(buf, &st) == 0)
			return CMD_OK;
	}
	return cmd_usage(CMD, "%s", "no tokenizer: give --tokenizer multilingual.tiktoken (or set "
	                 "WLOWER_WHISPER_TOKENIZER)");
}

static void print_segments(const WhisperSegment *s, int n, const WhisperVocab *v, bool tokens)
{
	for (int i = 0; i < n; i++) {
		char a[32], b[32], *t = segment_text(v, &s[i]);
		transcript_time(s[i].start, '.', a, sizeof a);
		transcript_time(s[i].end, '.', b, sizeof b);
		printf("[%s --> %s]  %s\n", a, b, t);
		if (tokens) {
			printf("  tokens:");
			for (int k = 0; k < s[i].ntokens; k++)
				printf(" %lld", (long long)s[i].tokens[k]);
			printf("\n");
		}
		free(t);
	}
}

static cJSON *report_json(const WhisperInfo *wi, const WhisperReport *r, double wall_ms, long threads)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "target", wi->target);
	cJSON_AddNumberToObject(o, "threads", (double)threads);
	cJSON_AddNumberToObject(o, "audio_s", r->audio_s);
	cJSON_AddNumberToObject(o, "windows", r->windows);
	cJSON_AddNumberToObject(o, "wall_ms", round(wall_ms * 1000) / 1000);
	cJSON_AddNumberToObject(o, "mel_ms", round(r->mel_ms * 1000) / 1000);
	cJSON_AddNumberToObject(o, "encoder_ms", round(r->encoder_ms * 1000) / 1000);
	cJSON_AddNumberToObject(o, "cross_kv_ms", round(r->cross_ms * 1000) / 1000);
	cJSON_AddNumberToObject(o, "prompt_ms", round(r->prompt_ms * 1000) / 1000);
	cJSON_AddNumberToObject(o, "steps_ms", round(r->step_ms * 1000) / 1000);
	cJSON_AddNumberToObject(o, "prompt_tokens", r->prompt_tokens);
	cJSON_AddNumberToObject(o, "sampled_tokens", r->sampled_tokens);
	cJSON_AddNumberToObject(o, "steps", r->steps);
	cJSON_AddNumberToObject(o, "tokens_per_s", r->step_ms > 0 ? 1e3 * r->sampled_tokens / (r->step_ms + r->prompt_ms) : 0);
	cJSON_AddNumberToObject(o, "rtf", r->audio_s > 0 ? wall_ms / 1e3 / r->audio_s : 0);
	if (r->beam_steps) {
		cJSON_AddNumberToObject(o, "beam_steps", r->beam_steps);
		cJSON_AddNumberToObject(o, "beam_forks", r->forks);
		cJSON_AddNumberToObject(o, "beam_fork_mb", round(r->fork_mb * 1000) / 1000);
		cJSON_AddNumberToObject(o, "beam_fork_ms", round(r->fork_ms * 1000) / 1000);
		cJSON_AddNumberToObject(o, "beam_fork_prefix_mb", round(r->fork_prefix_mb * 1000) / 1000);
	}
	return o;
}

static void print_report(const WhisperInfo *wi, const WhisperReport *r, double wall_ms, const char *file)
{
	double as = r->audio_s > 0 ? r->audio_s : 1;
	fprintf(stderr, "%s: %.2f s of audio, %d window(s), target %s\n", file, r->audio_s, r->windows, wi->target);
	fprintf(stderr, "| stage | ms | RTF |\n");
	const char *nm[] = {"mel", "encoder", "cross_kv", "prompt", "steps", "total"};
	double v[] = {r->mel_ms, r->encoder_ms, r->cross_ms, r->prompt_ms, r->step_ms, wall_ms};
	for (int i = 0; i < 6; i++)
		fprintf(stderr, "| %s | %.1f | %.4f |\n", nm[i], v[i], v[i] / 1e3 / as);
	fprintf(stderr, "tokens: %d prompt, %d sampled; %.1f tokens/s\n", r->prompt_tokens, r->sampled_tokens,
	        r->step_ms + r->prompt_ms > 0 ? 1e3 * (r->sampled_tokens + r->prompt_tokens) / (r->step_ms + r->prompt_ms) : 0);
	if (r->beam_steps)
		fprintf(stderr, "beam search: %d hypothesis steps (%.2f ms each), %d cache forks copying %.1f MB in %.1f ms "
		        "(the rows after the ids the free slot shares with the parent; whole prefixes: %.1f MB)\n",
		        r->beam_steps, r->step_ms / r->beam_steps, r->forks, r->fork_mb, r->fork_ms, r->fork_prefix_mb);
}

/* qc-*: the simulated device's report (sim_report.c): one window costs a
 * mel, an encoder and a cross_kv run, one token (prompt or sampled) a step
 * run. A pipeline made before cross_kv had a CCL form runs it on ref: then it
 * is left out of the window and said so. */
static void sim_report(Whisper *w, const WhisperReport *r, cJSON *rep)
{
	Program *progs[SIM_MAX_PROGRAMS];
	const char *names[SIM_MAX_PROGRAMS];
	int n = whisper_program_count(w);
	for (int i = 0; i < n; i++)
		progs[i] = whisper_program(w, i, &names[i]);
	SimTotals t;
	sim_totals_collect(&t, progs, names, n);
	if (!t.on) {
		sim_totals_free(&t);
		return;
	}
	double total = 0, win = 0;
	for (int i = 0; i < t.nprog; i++) {
		total += (double)t.prog[i].cycles_per_run * t.prog[i].runs;
		if (strcmp(t.prog[i].name, "mel") == 0 || strcmp(t.prog[i].name, "encoder") == 0 ||
		    (strcmp(t.prog[i].name, "cross_kv") == 0 && t.prog[i].simulated))
			win += (double)t.prog[i].cycles_per_run;
	}
	const SimProg *ckv = sim_totals_find(&t, "cross_kv");
	bool ckv_sim = ckv && ckv->simulated;
	const SimProg *st = sim_totals_find(&t, "step");
	double tok = st ? (double)st->cycles_per_run : 0, hz = t.clock_hz;
	double secs = total / hz, rtf = r->audio_s > 0 ? secs / r->audio_s : 0;
	fprintf(stderr, "simulated (%s, cost model, %.3f GHz): %.4g ms per window (mel + encoder%s), %.4g ms per token "
	        "(step), %.2f tokens/s; %.4g ms in all for %.2f s of audio: real-time factor %.4f (%.1fx faster than "
	        "real time)%s\n", whisper_info(w)->target, hz / 1e9, win / hz * 1e3, ckv_sim ? " + cross_kv" : "", tok / hz * 1e3,
	        tok > 0 ? hz / tok : 0, secs * 1e3, r->audio_s, rtf, rtf > 0 ? 1 / rtf : 0,
	        ckv && !ckv_sim ? " (cross_kv on the reference executor: not included)" : "");
	cJSON *sim = rep ? cJSON_AddObjectToObject(rep, "sim") : NULL;
	if (sim) {
		cJSON_AddNumberToObject(sim, "clock_hz", hz);
		cJSON_AddNumberToObject(sim, "cycles", round(total));
		cJSON_AddNumberToObject(sim, "seconds", secs);
		cJSON_AddNumberToObject(sim, "rtf", rtf);
		cJSON_AddNumberToObject(sim, "cycles_per_window", round(win));
		cJSON_AddNumberToObject(sim, "ms_per_window", win / hz * 1e3);
		cJSON_AddNumberToObject(sim, "cycles_per_token", round(tok));
		cJSON_AddNumberToObject(sim, "ms_per_token", tok / hz * 1e3);
		cJSON_AddNumberToObject(sim, "tokens_per_s", tok > 0 ? hz / tok : 0);
	}
	sim_totals_print(&t, "run", sim ? cJSON_AddArrayToObject(sim, "programs") : NULL);
	sim_totals_free(&t);
}

static int transcribe_one(Whisper *w, const WhisperVocab *v, const WhisperOptions *o, const TrArgs *a,
                          const char *file)
{
	for (int i = 0; i < whisper_program_count(w); i++)
		program_stats_reset(whisper_program(w, i, NULL));
	Diag d = {0};
	float *x;
	int64_t n;
	if (audio_read_mono(file, 16000, &x, &n, &d) != WL_OK)
		return cmd_error(CMD, &d);
	const WhisperInfo *wi = whisper_info(w);
	Sink sink = {.dump = a->dump, .windows = cJSON_CreateArray(), .tty = isatty(2), .audio_s = n / 16000.0, .window_s = wi->window_samples / 16000.0};
	WhisperSegment *segs;
	int nseg;
	WhisperReport rep;
	double t0 = wl_now_ms();
	int rc = whisper_transcribe(w, x, n, o, &segs, &nseg, on_step, on_mel, &sink, &rep, &d);
	double wall = wl_now_ms() - t0;
	free(x);
	if (sink.tty)
		fprintf(stderr, "\r%60s\r", "");
	if (rc != WL_OK) {
		cJSON_Delete(sink.windows);
		return cmd_error(CMD, &d);
	}
	print_segments(segs, nseg, v, a->print_tokens);
	print_report(wi, &rep, wall, file);
	int ret = CMD_OK;
	if (!a->out)
		sim_report(w, &rep, NULL);
	else {
		cJSON *r = report_json(wi, &rep, wall, a->threads);
		sim_report(w, &rep, r);
		if (o->nprompt > 0) {
			cJSON *pi = cJSON_AddArrayToObject(r, "prompt_ids");
			for (int i = 0; i < o->nprompt; i++)
				cJSON_AddItemToArray(pi, cJSON_CreateNumber((double)o->prompt[i]));
		}
		cJSON_AddItemToObject(r, "windows_sampled", sink.windows);
		sink.windows = NULL;
		if (transcript_write(a->out, (TranscriptFormat)transcript_format(a->out), segs, nseg, v, r, &d) != WL_OK)
			ret = cmd_error(CMD, &d);
		cJSON_Delete(r);
	}
	cJSON_Delete(sink.windows);
	whisper_segments_free(segs, nseg);
	return ret;
}

int cmd_transcribe(int argc, char **argv)
{
	if (opt_help(argc, argv, usage_transcribe))
		return 0;
	TrArgs a = {.max_tokens = 224, .beam = 1, .patience = 1.0, .length_penalty = -1, .language = "en",
	            .task = "transcribe"};
	/* several AUDIO positionals: opt_parse takes one, so collect them first */
	const char **audio = calloc((size_t)argc + 1, sizeof *audio);
	char **rest = calloc((size_t)argc + 1, sizeof *rest);
	if (!audio || !rest)
		wl_die(__FILE__, __LINE__, "out of memory");
	int na = 0, nr = 0;
	rest[nr++] = argv[0];
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		bool takes = false;
		for (int k = 0; tr_opts[k].name; k++)
			if (tr_opts[k].kind != OPT_FLAG &&
			    (strcmp(s, tr_opts[k].name) == 0 || (tr_opts[k].alias && strcmp(s, tr_opts[k].alias) == 0)))
				takes = true;
		if (s[0] != '-' || strcmp(s, "-") == 0) {
			audio[na++] = s;
			continue;
		}
		rest[nr++] = argv[i];
		if (takes && i + 1 < argc)
			rest[nr++] = argv[++i];
	}
	const char *pos = NULL;
	int rc = opt_parse(CMD, tr_opts, nr, rest, &a, &pos, "argument", NULL);
	free(rest);
	if (rc == CMD_OK && na == 0)
		rc = cmd_usage(CMD, "%s", "no audio file given");
	if (rc == CMD_OK && !a.pipeline == !a.model)
		rc = cmd_usage(CMD, "%s", "give --pipeline PIPE_DIR or --model WHISPER_DIR --target T (one of them)");
	bool qc = a.target && strncmp(a.target, "qc-", 3) == 0;
	/* --precision fp32dec-lmq8 calibrates its LM head on every target */
	bool lmq8 = a.precision && strcmp(a.precision, "fp32dec-lmq8") == 0;
	const char *qc_opt = a.calibrate.n && !(lmq8 && !qc) ? "--calibrate" : a.margin ? "--calibrate-margin" : a.tranges ? "--tranges" :
	                     a.cores ? "--cores" : a.ocm ? "--ocm" : a.macs_per_pe ? "--macs-per-pe" : a.clock ? "--clock" :
	                     a.ext_bw ? "--ext-bw" : NULL;
	if (rc == CMD_OK && a.model && (!a.target || (strcmp(a.target, "ref") && strcmp(a.target, "host") &&
	                                              strcmp(a.target, "qc-n") && strcmp(a.target, "qc-p") &&
	                                              strcmp(a.target, "qc-u"))))
		rc = cmd_usage(CMD, "%s", "--model needs --target ref|host|qc-n|qc-p|qc-u");
	if (rc == CMD_OK && a.pipeline && (a.target || a.max_seq || a.cpu || qc_opt || a.precision || a.calibrate.n))
		rc = cmd_usage(CMD, "%s", "--target, --max-seq, --cpu, --precision, --calibrate, --tranges and the hardware "
		               "options go with --model, not --pipeline");
	if (rc == CMD_OK && a.model && !qc && qc_opt)
		rc = cmd_usage(CMD, "%s is for --target qc-n|qc-p|qc-u", qc_opt);
	if (rc == CMD_OK && a.model && qc && !a.calibrate.n == !a.tranges)
		rc = cmd_usage(CMD, "--model with --target %s needs --calibrate AUDIO (repeatable) or --tranges DIR (one "
		               "of them)", a.target);
	if (rc == CMD_OK && a.precision && !lmq8 && strcmp(a.precision, "fp32") != 0)
		rc = cmd_usage(CMD, "--precision: unknown precision '%s' (fp32, fp32dec-lmq8)", a.precision);
	if (rc == CMD_OK && lmq8 && !a.calibrate.n)
		rc = cmd_usage(CMD, "%s", "--precision fp32dec-lmq8 needs --calibrate AUDIO (repeatable: the clips whose "
		               "LM-head inputs set the int8 input scale)");
	if (rc == CMD_OK && a.calibrate.n > 8)
		rc = cmd_usage(CMD, "%s", "--calibrate: 8 clips at most with --model (compile the pipeline for more)");
	if (rc == CMD_OK && strcmp(a.task, "transcribe") && strcmp(a.task, "translate"))
		rc = cmd_usage(CMD, "--task '%s': expected transcribe or translate", a.task);
	if (rc == CMD_OK && a.out && transcript_format(a.out) < 0)
		rc = cmd_usage(CMD, "-o '%s': the extension must be .txt, .srt, .vtt or .json", a.out);
	if (rc == CMD_OK && a.out && na > 1)
		rc = cmd_usage(CMD, "%s", "-o FILE takes one AUDIO file");
	char cached[4096], tok[4096];
	if (rc == CMD_OK && a.model && (rc = cached_pipeline(&a, cached, sizeof cached)) == CMD_OK)
		a.pipeline = cached;
	if (rc == CMD_OK)
		rc = tokenizer_path(&a, tok, sizeof tok);
	if (rc != CMD_OK) {
		free(audio);
		opt_free_lists(tr_opts, &a);
		return rc;
	}
	if (!a.threads)
		a.threads = cmd_default_threads();
	Diag d = {0};
	Whisper *w = NULL;
	WhisperVocab *v = NULL;
	if (whisper_open(a.pipeline, (int)a.threads, &w, &d) != WL_OK ||
	    vocab_read(tok, whisper_info(w)->vocab, &v, &d) != WL_OK) {
		whisper_close(w);
		free(audio);
		opt_free_lists(tr_opts, &a);
		return cmd_error(CMD, &d);
	}
	const WhisperInfo *wi = whisper_info(w);
	int64_t lang = vocab_language(v, a.language);
	int64_t prompt[512];
	int np = 0;
	if (lang < 0)
		rc = cmd_error(CMD, (diag_fail(&d, "--language '%s': not one of Whisper's language codes (en, de, fr, es, "
		                               "zh, ja, ...)", a.language), &d));
	if (rc == CMD_OK && a.prompt) {        /* openai-whisper: encode(" " + initial_prompt.strip()) */
		const char *b = a.prompt, *e = a.prompt + strlen(a.prompt);
		while (*b && strchr(" \t\n\r\f\v", *b))
			b++;
		while (e > b && strchr(" \t\n\r\f\v", e[-1]))
			e--;
		char *txt = malloc((size_t)(e - b) + 2);
		if (!txt)
			wl_die(__FILE__, __LINE__, "out of memory");
		txt[0] = ' ';
		memcpy(txt + 1, b, (size_t)(e - b));
		txt[e - b + 1] = 0;
		Diag pd = {0};
		if ((np = vocab_encode(v, txt, prompt, 512, &pd)) < 0)
			rc = cmd_error(CMD, (diag_fail(&d, "--prompt: %s", pd.msg), &d));
		free(txt);
	}
	if (rc == CMD_OK && a.dump && mkdir_p(a.dump, &d) != WL_OK)
		rc = cmd_error(CMD, &d);
	WhisperOptions o = {.language = lang, .task = strcmp(a.task, "translate") ? wi->transcribe : wi->translate,
	                    .timestamps = !a.no_ts, .max_tokens = (int)a.max_tokens, .temperature = a.temperature,
	                    .fallback = a.fallback, .seed = (uint64_t)a.seed, .prompt = np ? prompt : NULL,
	                    .nprompt = np, .condition_on_previous = !a.no_context, .vocab = v, .beam = (int)a.beam,
	                    .patience = a.patience, .length_penalty = a.length_penalty};
	for (int i = 0; rc == CMD_OK && i < na; i++)
		rc = transcribe_one(w, v, &o, &a, audio[i]);
	vocab_free(v);
	whisper_close(w);
	free(audio);
	opt_free_lists(tr_opts, &a);
	return rc;
}
