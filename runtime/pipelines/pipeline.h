/* pipeline.h — programs run in a loop (runtime/pipelines/, above the targets
 * and runtime/rt, below the driver).
 *
 *   pipeline.c   pipeline.json of a pipeline directory: write helpers, read
 *                and verify (every file's size and sha256), replaceability
 *   program.c    one program of a pipeline, whatever ran it: "ref" (the
 *                reference executor on the fused model.onnx), "host"
 *                (libwlower_rt on module.so) or "qc" (a Chimera module on
 *                the emulator, one module_sim process for every run)
 *   llm.c        the LLM loop: decoding against a static KV cache updated
 *                in place, `prefill` for prompt chunks, one `step` program
 *                for every position, `lm_head` on the last row
 *   whisper.c    the Whisper loop: 30 s windows → mel → encoder → cross_kv →
 *                KV-cached steps with OpenAI's decoding rules → segments
 *   whisper_audio.c      audio files (libsndfile) → 16 kHz mono (libsoxr)
 *   whisper_tokenizer.c  Whisper's tiktoken vocabulary: ids → text
 *   tokenizer.c  Hugging Face tokenizer.json (tokenizer.h): text ↔ ids
 *
 * A pipeline directory (docs/FORMATS.md "Pipeline directories"):
 *   PIPE_DIR/pipeline.json
 *   PIPE_DIR/<program>/          a module directory (manifest.json + files)
 * pipeline.json:
 * {
 *   "format": "wlower-pipeline", "version": 1, "kind": "llm", "target": "host",
 *   "wlower_version": "...", "model": {"dir": "...", "config": {...}},
 *   "llm": {"layers": L, "kv_heads": KV, "head_dim": hd, "vocab": V, "max_seq": S,
 *           "bos": 1, "eos": 2, "prefill_rows": N,
 *           "kv_cache": {"dtype": "float32" | "int8", "bytes": B, ...}},
 *   "programs": [{"name": "prefill" | "step", "dir": "prefill" | "step",
 *                 "runner": "ref" | "host" | "qc", "inputs": [IO...], "outputs": [IO...],
 *                 "op_counts": {...}}, ...],
 *     prefill: input_ids [1,N], position_ids [1,N], attention_mask [1,S+N],
 *              past_key_values.i.key/value [1,KV,S,hd] (the static caches, read
 *              in place) → hidden_states [1,N,D], present.i.key/value
 *              [1,KV,N,hd] (the new rows only); step: the same with 1 for N;
 *     lm_head: hidden_states [1,1,D] → logits [1,1,V].
 *   "files": [{"name": "step/manifest.json", "bytes": N, "sha256": "..."}, ...],
 *   "compile_ms": T
 * }
 * Kind "whisper" has "whisper" (dims and special token ids) and
 * "host_contract" in place of "llm", and programs mel, encoder, cross_kv,
 * step (docs/FORMATS.md).
 */
#ifndef WLOWER_PIPELINE_H
#define WLOWER_PIPELINE_H

#include "runtime/interp/interp.h"
#include "runtime/module/module.h"

/* ---------------------------------------------------------------- pipeline.c */

/* Reads DIR/pipeline.json: format, version, kind (must equal `kind` unless
 * NULL), and every listed file's size and sha256 against the disk (a missing
 * or altered program is an error naming the file). *out: the parsed JSON. */
int pipeline_read(const char *dir, const char *kind, cJSON **out, Diag *d);
/* Adds every file of the module directory DIR/sub (its manifest's "files"
 * and manifest.json itself) to `files`. */
int pipeline_add_module(cJSON *files, const char *dir, const char *sub, Diag *d);
/* outdir_commit's check: DIR holds pipeline.json of format wlower-pipeline
 * and nothing but the files and program folders it lists. */
bool pipeline_dir_replaceable(const char *dir, char *why, size_t n);
/* Integer member `key` of object o in [lo, hi], else an error naming file and key. */
int json_int(const cJSON *o, const char *key, int64_t lo, int64_t hi, const char *file, int64_t *out, Diag *d);

/* ---------------------------------------------------------------- program.c */

typedef struct Program Program;
/* Opens the module directory `dir` with `runner` ("ref": DIR/model.onnx on
 * the reference executor; "host": the host runtime; "qc": the Chimera
 * module built against the CCL emulation and kept running, one process for
 * every run). threads <= 0: the online CPUs. */
int program_open(const char *dir, const char *runner, int threads, Program **out, Diag *d);
void program_close(Program *p);
/* Binds input `name` to t (not copied: it must stay valid through program_run). */
int program_bind(Program *p, const char *name, const RTensor *t, Diag *d);
int program_run(Program *p, Diag *d);
/* Output `name` of the last run (a view, valid until the next run), or NULL
 * with an error. */
const RTensor *program_output(Program *p, const char *name, Diag *d);
/* What the runs so far cost on the simulated device (qc; zeros elsewhere):
 * cycles per run from the cost model (the same for every run), the clock,
 * and per run the fixed-point stores that saturated (values beyond their
 * calibrated format). */
typedef struct ProgramStats {
	int runs;
	uint64_t cycles_per_run;
	double clock_hz;
	uint64_t *saturated;       /* [runs], qc only (else NULL) */
	char first_saturated_kernel[128];  /* the kernel of the first saturated store ("" if none) */
} ProgramStats;
const ProgramStats *program_stats(const Program *p);
void program_stats_reset(Program *p);
/* ref only: fn sees every bound input and every node output (calibration,
 * tranges/calibrate.h); the Module behind it (NULL for other runners). */
int program_observe(Program *p, ExecObserver fn, void *ctx, Diag *d);
Module *program_module(Program *p);
const char *program_dir(const Program *p);
/* "ref", "host" or "qc". */
const char *program_runner(const Program *p);
/* qc: prints the vendor's per-run table (`wlower sim`'s configuration and
 * report) and returns 1; other runners print nothing and return 0. */
int program_print_report(const Program *p, FILE *f);

/* ---------------------------------------------------------------- llm.c */

typedef struct Llm Llm;
typedef struct LlmInfo {
	int layers, kv_heads, head_dim, vocab, max_seq;
	int64_t bos, eos;
	const char *target;
	int prefill_rows;          /* N: prompt rows per prefill run */
	int hidden;                /* D: hidden_states width */
	bool argmax_on_device;     /* lm_head outputs token_ids (the greedy id), not logits */
	bool kv_int8;              /* llm.kv_cache.dtype "int8": the caches (past in, present out) are int8 */
} LlmInfo;
/* Opens PIPE_DIR (pipeline_read with kind "llm", then the step, prefill and lm_head programs). */
int llm_open(const char *dir, int threads, Llm **out, Diag *d);
void llm_close(Llm *l);
const LlmInfo *llm_info(const Llm *l);
/* The programs of the pipeline (i in [0, llm_program_count)): name and program. */
int llm_program_count(const Llm *l);
Program *llm_program(const Llm *l, int i, const char **name);

typedef struct LlmReport {
	int prompt_tokens, generated;
	int prefill_runs;                  /* program runs for the prompt (chunks of N rows) */
	double prompt_ms;                  /* wall time of the prompt's runs (np ids) */
	double gen_ms;                     /* ... of the steps that read generated ids (generated - 1) */
	double *step_ms;                   /* per step (malloc'ed): step k is at position step_pos0 + k */
	int nsteps, step_pos0;
} LlmReport;
/* Called with each generated id as it is produced, with the logits that
 * chose it (a view, valid during the call; NULL when the pipeline's lm_head
 * gives the id: argmax_on_device). Returns WL_OK or WL_ERR (stops). */
typedef int (*LlmTokenFn)(void *ctx, int64_t id, const RTensor *logits, Diag *d);
/* How the next id is chosen: temperature 0 = greedy (argmax, first index on
 * ties); else softmax(logits / temperature) restricted to the top_k ids
 * (0 = all) and then to the smallest set whose probability reaches top_p
 * (1 = all), sampled with a xorshift64* generator seeded by seed (the same
 * seed gives the same ids run after run; across targets only while their
 * logits agree closely enough that no draw falls on the other side of a
 * bucket boundary). */
typedef struct LlmSampling {
	double temperature, top_p;
	int top_k;
	uint64_t seed;
} LlmSampling;

/* Decoding (sampling as above; NULL = greedy) of up to max_new ids after
 * prompt[0..np), stopping early at `stop` (>= 0) when it is generated (it is
 * not stored). Ids go to out (capacity max_new); *nout their count. Prompt
 * ids must be in [0, vocab) and np + max_new <= max_seq. An argmax_on_device
 * pipeline decodes greedily only (sampling is an error). */
int llm_generate(Llm *l, const int64_t *prompt, int np, int max_new, int64_t stop, const LlmSampling *smp,
                 int64_t *out, int *nout, LlmTokenFn fn, void *ctx, LlmReport *rep, Diag *d);

/* ---------------------------------------------------------------- whisper_audio.c */

/* Reads an audio file (what libsndfile reads: wav, flac, ogg, mp3, ...),
 * downmixes to mono and resamples to `rate` Hz (libsoxr, high quality).
 * *samples malloc'ed, *n their count. Errors name the file. */
int audio_read_mono(const char *path, int rate, float **samples, int64_t *n, Diag *d);

/* ---------------------------------------------------------------- whisper_tokenizer.c */

typedef struct WhisperVocab WhisperVocab;
/* Reads a tiktoken file ("BASE64 RANK" per line, ranks 0..N-1, each once);
 * special and timestamp ids follow Whisper's multilingual layout for a
 * model vocabulary of n_vocab ids (51865 or 51866). Errors name file:line. */
int vocab_read(const char *path, int n_vocab, WhisperVocab **out, Diag *d);
void vocab_free(WhisperVocab *v);
int vocab_size(const WhisperVocab *v);           /* the text tokens (ranks) */
/* The bytes of token id (text tokens), or NULL for special/timestamp ids. */
const char *vocab_bytes(const WhisperVocab *v, int64_t id, int *len);
/* Text of ids[0..n) into buf (NUL-terminated, truncated to cap-1 bytes):
 * text tokens' bytes concatenated; with `specials`, special tokens as
 * "<|en|>", "<|transcribe|>", timestamps as "<|1.08|>", else they are
 * skipped. Returns the full length (as snprintf). */
size_t vocab_decode(const WhisperVocab *v, const int64_t *ids, int n, bool specials, char *buf, size_t cap);
/* Language code ("en") → its token id, or -1. */
int64_t vocab_language(const WhisperVocab *v, const char *code);
/* tiktoken's encode_ordinary of text (UTF-8) with Whisper's GPT-2 regex
 * and the file's ranks: ids into out (capacity cap); returns their count,
 * or -1 (d: not UTF-8, more than cap tokens). For --prompt. */
int vocab_encode(const WhisperVocab *v, const char *text, int64_t *out, int cap, Diag *d);

/* ---------------------------------------------------------------- whisper.c */

typedef struct WhisperInfo {
	int layers, heads, head_dim, vocab, n_mels, audio_ctx, frames, text_ctx;
	int64_t window_samples;            /* 160 · frames (480000: 30 s) */
	int64_t eot, sot, first_language, translate, transcribe, sot_prev, no_speech, no_timestamps, ts_begin;
	int languages;
	const char *target;
} WhisperInfo;

typedef struct Whisper Whisper;
/* Opens PIPE_DIR (pipeline_read with kind "whisper", then its programs). */
int whisper_open(const char *dir, int threads, Whisper **out, Diag *d);
void whisper_close(Whisper *w);
const WhisperInfo *whisper_info(const Whisper *w);
/* The programs (i in [0, whisper_program_count)): mel, encoder, cross_kv, step. */
int whisper_program_count(const Whisper *w);
Program *whisper_program(const Whisper *w, int i, const char **name);

typedef struct WhisperOptions {
	int64_t language, task;            /* token ids */
	bool timestamps;
	int max_tokens;                    /* sampled per window (<= text_ctx/2) */
	double temperature;                /* 0: greedy; else the first temperature */
	bool fallback;                     /* retry at +0.2 up to 1.0 on compression ratio > 2.4
	                                      or avg_logprob < -1 (needs vocab) */
	uint64_t seed;
	const int64_t *prompt;             /* initial prompt ids (--prompt), may be NULL */
	int nprompt;
	bool condition_on_previous;        /* previous windows' text as context */
	const WhisperVocab *vocab;         /* for the fallback's compression ratio (may be NULL) */
	int beam;                          /* > 1: beam search at temperature 0 (whisper.c) */
	double patience;                   /* finished hypotheses collected: round(beam · patience) */
	double length_penalty;             /* < 0: rank by sum log-prob / length; else by
	                                      sum / ((5 + length) / 6)^length_penalty */
} WhisperOptions;

typedef struct WhisperSegment {
	double start, end;                 /* seconds */
	int64_t *tokens;                   /* malloc'ed: text and timestamp ids */
	int ntokens;
	double avg_logprob, no_speech_prob, temperature;
} WhisperSegment;

typedef struct WhisperReport {
	double audio_s, mel_ms, encoder_ms, cross_ms, prompt_ms, step_ms;
	int windows, prompt_tokens, sampled_tokens, steps;
	int beam_steps, forks;             /* beam search: hypothesis step runs, cache rows forked */
	double fork_ms, fork_mb;           /* time and megabytes of those cache copies */
	double fork_prefix_mb;             /* what they would copy with the whole prefix [0, p) each */
} WhisperReport;

/* Per decoding step: the logits that chose token `id` (a view), the window
 * and the index of the sampled token in it. With beam search the ids of the
 * chosen hypothesis, once it is chosen, and logits NULL. */
typedef int (*WhisperStepFn)(void *ctx, int window, int index, int64_t id, const RTensor *logits, Diag *d);
/* Called when a window's mel is ready (a view [1, M, F]). */
typedef int (*WhisperMelFn)(void *ctx, int window, const RTensor *mel, Diag *d);

/* Transcribes samples[0..n) (16 kHz mono) window by window: the segments
 * (malloc'ed array, *nseg) in time order. */
int whisper_transcribe(Whisper *w, const float *samples, int64_t n, const WhisperOptions *o,
                       WhisperSegment **segs, int *nseg, WhisperStepFn fn, WhisperMelFn melfn, void *ctx,
                       WhisperReport *rep, Diag *d);
void whisper_segments_free(WhisperSegment *s, int n);

/* ---------------------------------------------------------------- whisper_output.c */

typedef enum TranscriptFormat { TF_TXT, TF_SRT, TF_VTT, TF_JSON } TranscriptFormat;
/* The format for a file name by its extension (.txt .srt .vtt .json), or -1. */
int transcript_format(const char *path);
/* "HH:MM:SS,mmm" (sep ',': srt) or "HH:MM:SS.mmm" (vtt), rounded to ms. */
void transcript_time(double s, char sep, char *buf, size_t n);
/* Writes segs (their text decoded with v) to path atomically in fmt; json
 * adds "report" (may be NULL; the object is not consumed). */
int transcript_write(const char *path, TranscriptFormat fmt, const WhisperSegment *segs, int nseg,
                     const WhisperVocab *v, const cJSON *report, Diag *d);
/* The text of segment s (malloc'ed), timestamps and specials dropped. */
char *segment_text(const WhisperVocab *v, const WhisperSegment *s);

#endif
