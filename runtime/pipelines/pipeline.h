/* pipeline.h — programs run in a loop (runtime/pipelines/, above the targets
 * and runtime/rt, below the driver).
 *
 *   pipeline.c   pipeline.json of a pipeline directory: write helpers, read
 *                and verify (every file's size and sha256), replaceability
 *   program.c    one program of a pipeline, whatever ran it: "ref" (the
 *                reference executor on the fused model.onnx) or "host"
 *                (libwlower_rt on module.so)
 *   llm.c        the LLM loop: decoding against a static KV cache updated
 *                in place, `prefill` for prompt chunks, one `step` program
 *                for every position
 *
 * A pipeline directory (docs/FORMATS.md "Pipeline directories"):
 *   PIPE_DIR/pipeline.json
 *   PIPE_DIR/<program>/          a module directory (manifest.json + files)
 * pipeline.json:
 * {
 *   "format": "wlower-pipeline", "version": 1, "kind": "llm", "target": "host",
 *   "wlower_version": "...", "model": {"dir": "...", "config": {...}},
 *   "llm": {"layers": L, "kv_heads": KV, "head_dim": hd, "vocab": V, "max_seq": S,
 *           "bos": 1, "eos": 2, "prefill_rows": N},
 *   "programs": [{"name": "prefill" | "step", "dir": "prefill" | "step",
 *                 "runner": "ref" | "host", "inputs": [IO...], "outputs": [IO...],
 *                 "op_counts": {...}}, ...],
 *     prefill: input_ids [1,N], position_ids [1,N], attention_mask [1,S+N],
 *              past_key_values.i.key/value [1,KV,S,hd] (the static caches, read
 *              in place) → hidden_states [1,N,D], present.i.key/value
 *              [1,KV,N,hd] (the new rows only); step: the same with 1 for N;
 *     lm_head: hidden_states [1,1,D] → logits [1,1,V].
 *   "files": [{"name": "step/manifest.json", "bytes": N, "sha256": "..."}, ...],
 *   "compile_ms": T
 * }
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
 * the reference executor; "host": the host runtime). threads <= 0: the
 * online CPUs. */
int program_open(const char *dir, const char *runner, int threads, Program **out, Diag *d);
void program_close(Program *p);
/* Binds input `name` to t (not copied: it must stay valid through program_run). */
int program_bind(Program *p, const char *name, const RTensor *t, Diag *d);
int program_run(Program *p, Diag *d);
/* Output `name` of the last run (a view, valid until the next run), or NULL
 * with an error. */
const RTensor *program_output(Program *p, const char *name, Diag *d);

/* ---------------------------------------------------------------- llm.c */

typedef struct Llm Llm;
typedef struct LlmInfo {
	int layers, kv_heads, head_dim, vocab, max_seq;
	int64_t bos, eos;
	const char *target;
	int prefill_rows;          /* N: prompt rows per prefill run */
	int hidden;                /* D: hidden_states width */
} LlmInfo;
/* Opens PIPE_DIR (pipeline_read with kind "llm", then the step, prefill and lm_head programs). */
int llm_open(const char *dir, int threads, Llm **out, Diag *d);
void llm_close(Llm *l);
const LlmInfo *llm_info(const Llm *l);

typedef struct LlmReport {
	int prompt_tokens, generated;
	int prefill_runs;                  /* program runs for the prompt (chunks of N rows) */
	double prompt_ms;                  /* wall time of the prompt's runs (np ids) */
	double gen_ms;                     /* ... of the steps that read generated ids (generated - 1) */
	double *step_ms;                   /* per step (malloc'ed): step k is at position step_pos0 + k */
	int nsteps, step_pos0;
} LlmReport;
/* Called with each generated id as it is produced, with the logits that
 * chose it (a view, valid during the call). Returns WL_OK or WL_ERR (stops). */
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
 * ids must be in [0, vocab) and np + max_new <= max_seq. */
int llm_generate(Llm *l, const int64_t *prompt, int np, int max_new, int64_t stop, const LlmSampling *smp,
                 int64_t *out, int *nout, LlmTokenFn fn, void *ctx, LlmReport *rep, Diag *d);

#endif
