/* commands.h — the commands of the wlower driver (compiler/driver/, the top
 * layer: it may include from every folder below).
 *
 *   main.c           the command table
 *   cmd_compile.c    wlower MODEL ...  (compile; --target writes a module directory)
 *   cmd_run.c        wlower run
 *   cmd_calibrate.c  wlower calibrate
 *   cmd_quantize.c   wlower quantize (4-bit MatMulNBits)
 *   cmd_quantize_int8.c  wlower quantize --int8 (static int8 PTQ, ONNX QDQ)
 *   cmd_sim.c        wlower sim
 *   cmd_pipeline.c   wlower SRC --pipeline KIND (a pipeline directory of programs)
 *   cmd_pipeline_whisper.c  --pipeline whisper (its programs and host contract)
 *   cmd_generate.c   wlower generate (the LLM loop on a pipeline directory)
 *   cmd_tokenize.c   wlower tokenize (a tokenizer.json on text or ids)
 *   cmd_compare.c    wlower compare (the per-tensor accuracy report)
 *   cmd_sweep.c      wlower sweep (hardware design-space exploration, ninja / Slurm)
 *   cmd_transcribe.c wlower transcribe (audio to text on a whisper pipeline)
 *   sim_report.c     the simulated device's report (generate, transcribe on qc-*)
 *   options.c        the helpers below, shared by the commands
 *
 * main() calls cmd_X(argc - 1, argv + 1): argv[0] is the command's name
 * (cmd_compile gets the whole argv).
 * Each command parses its own options, prints its own one-line errors
 * ("wlower run: error: FILE: input 'x': ...") and returns the exit status:
 * 0 success, 1 bad input, 2 usage error (DESIGN.md).
 */
#ifndef WLOWER_COMMANDS_H
#define WLOWER_COMMANDS_H

#include "passes/passes.h"

int cmd_compile(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_quantize_int8(int argc, char **argv);   /* cmd_quantize_int8.c: quantize --int8 */
/* cmd_quantize_int8.c, shared with --precision fp32dec-lmq8 (whisper_lmq8.c):
 * quantize_static's int8 activation scale and zero point of the range [lo, hi]
 * (sym: zero point 0); a new constant initializer (its data zeroed, in g's
 * arena); q = QuantizeLinear(x, sc, zp) when x is given, then y =
 * DequantizeLinear(q, sc, zp) (axis >= 0: per axis), inserted after `after`
 * (NULL: at the start of g), named after `like`; returns y. */
typedef struct QParams { float scale; int8_t zp; } QParams;
QParams act_params(double lo, double hi, bool sym);
Value *new_const(Graph *g, const char *name, int dtype, int ndim, const int64_t *dims, void **data);
Value *insert_qdq(Graph *g, Node *after, Value *x, Value *q, Value *sc, Value *zp, int axis, const Value *like);
int cmd_sim(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_transcribe(int argc, char **argv);

/* cmd_pipeline.c: `wlower SRC --pipeline KIND --target T -o OUT` (called by
 * cmd_compile with the options it parsed). */
struct TargetOptions;
struct cJSON;
typedef struct PipelineArgs {
	const char *src, *kind, *target, *out;
	bool ref;                            /* --target ref: fused ONNX on the reference executor */
	const struct TargetOptions *to;      /* host/qc-*: as for --target */
	const PipelineOptions *pipe;         /* fuse flags, --max-seq, ... (dims are per program) */
	const char *const *calibrate;        /* qc-*: --calibrate FILE (llm: one PROMPTS.txt; whisper: clips) */
	int ncalibrate;
	const char *tranges_dir;             /* qc-*: --tranges DIR (DIR/<program>.tranges) */
	double calibrate_margin;             /* --calibrate-margin M (0: the default, 2) */
	long prefill_rows;                   /* --prefill-rows (0: default) */
	bool argmax_on_device;               /* llm: lm_head → token_ids (GreedyArgMax), not logits */
	bool kv_cache_int8;                  /* llm: --kv-cache int8 (scales from --calibrate or
	                                        pipe->fuse.kv_cache_ranges) */
	struct Lmq8Calib *lmq8;              /* whisper --precision fp32dec-lmq8 (else NULL) */
} PipelineArgs;
int cmd_compile_pipeline(const PipelineArgs *pa);
/* cmd_pipeline.c: module m (freed here; `model` names it in messages) → the
 * module directory DIR/name, compiled as pa says with the dims bound, its
 * entry ({"name", "dir", "runner", inputs, outputs, op_counts}) appended to
 * `programs`. pa->ref: the fused graph for the reference executor.
 * need_causal: PROGRAM_NOT_CAUSAL (nothing written) when the fused graph's
 * attention is not causal over its rows. */
int pipeline_compile_module(const PipelineArgs *pa, Module *m, const char *model, const DimBinding *dims, int nd,
                            const char *name, const char *dir, bool need_causal, struct cJSON *programs, Diag *d);
/* cmd_pipeline.c: the program entry `prog` (as pipeline_compile_module
 * appends it) has input ("inputs") or output ("outputs") `name` of the given
 * rank and shape (entries < 0: any), else a one-line error naming model. */
int pipeline_check_io(const struct cJSON *prog, const char *list, const char *name, int rank, const int64_t *shape,
                      const char *model, Diag *d);
/* cmd_pipeline_whisper.c: `--pipeline whisper` (programs mel, encoder,
 * cross_kv, step) into the temporary folder dir; fills root (pipeline.json
 * without "files"). */
int whisper_pipeline(const PipelineArgs *pa, const char *dir, struct cJSON *root, Diag *d);

/* ---------------------------------------------------------------- options.c */

enum { CMD_OK = 0, CMD_BAD_INPUT = 1, CMD_USAGE = 2 };

/* Prints "wlower CMD: MSG (see 'wlower CMD --help')" to stderr; returns 2.
 * cmd NULL: the compiler ("wlower: MSG (see 'wlower --help')"). */
int cmd_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "wlower CMD: error: MSG" to stderr; returns 1 (cmd NULL: "wlower: error: MSG"). */
int cmd_error(const char *cmd, const Diag *d);
/* ---------------------------------------------------------------- the option table
 * Every command declares its options as one table of OptSpec rows and calls
 * opt_parse: "--name=value" and "--name value" (and the alias, e.g. "-o"),
 * typed values checked against their range, one usage line per error. */
typedef enum OptKind {
	OPT_FLAG,       /* bool */
	OPT_STRING,     /* const char * */
	OPT_LIST,       /* OptList: every occurrence's value, in order (--input, --exclude) */
	OPT_INT,        /* long in [lo, hi] */
	OPT_REAL,       /* double in [lo, hi] ((lo, hi] with lo_open) */
	OPT_SIZE,       /* double, bytes: "32MB", "16MiB", "4096" (K/M/G = 2^10, 2^20, 2^30) */
	OPT_FREQ,       /* double, Hz: "1.7GHz" */
	OPT_BANDWIDTH,  /* double, bytes/s: "128GBps", "128GB/s" */
} OptKind;

typedef struct OptList { const char **v; int n; } OptList;

typedef struct OptSpec {
	const char *name, *alias;   /* "--output", "-o" (alias may be NULL) */
	OptKind kind;
	size_t off;                 /* offsetof the field in the command's args struct */
	double lo, hi;              /* numbers: the accepted range (finite) */
	bool lo_open;
	const char *bad;            /* numbers: the usage message for a bad value, a format
	                               taking the option's name and the value, e.g.
	                               "%s: '%s' is not 1..4"; NULL: "%s: expected an integer
	                               in LO..HI, got '%s'" */
} OptSpec;
#define OPT_END {NULL, NULL, OPT_FLAG, 0, 0, 0, false, NULL}

/* Parses argv[1..] by spec (a table ending in OPT_END) into args. One
 * positional argument (not starting with '-', or "-" itself) goes to *pos;
 * a second is "more than one POS_WHAT given". seen (may be NULL) gets, per
 * row, whether the option was given. After "--" every argument is
 * positional (a TEXT that starts with '-'). OptList values point into argv and
 * are malloc'ed arrays (opt_free_lists). cmd NULL: the compiler ("wlower:
 * ..."). Returns CMD_OK or CMD_USAGE (the message printed). */
int opt_parse(const char *cmd, const OptSpec *spec, int argc, char **argv, void *args,
              const char **pos, const char *pos_what, bool *seen);
void opt_free_lists(const OptSpec *spec, void *args);
/* True if argv[1..] holds -h or --help; then prints usage to stdout
 * (commands print their help and exit 0 whatever else is on the line). */
bool opt_help(int argc, char **argv, const char *usage);
/* "32MB" (binary), "1.7GHz", "128GBps": the value in base units; -1 if
 * malformed, not positive or not finite. unit: "B", "Hz" or "Bps". */
int opt_quantity(const char *s, const char *unit, bool binary, double *out);

/* NAME=FILE bindings of a list option (--input, --samples, --compare), into
 * the command's own records (a struct with `char *name; const char *file;`):
 * CMD_BINDINGS(cmd, "--input", &list, dup_fmt, &recs) sets recs to l->n + 1
 * zeroed records, record i with its name (malloc'ed) and file (into argv);
 * the caller frees recs and each name. Malformed → "OPT 'ARG': expected
 * NAME=FILE.npy", a name twice → dup_fmt (one %s, the name): then recs is
 * NULL and CMD_USAGE returned. cmd_bindings is the untyped form (out points
 * to the records pointer; size and offsets of one record). */
int cmd_bindings(const char *cmd, const char *opt, const OptList *l, const char *dup_fmt, size_t size,
                 size_t name_off, size_t file_off, void *out);
#define CMD_BINDINGS(cmd, opt, l, dup_fmt, out) \
	cmd_bindings(cmd, opt, l, dup_fmt, sizeof **(out), offsetof(__typeof__(**(out)), name), \
	             offsetof(__typeof__(**(out)), file), (out))
/* Samples files (calibrate, quantize --int8): the first axis of `all`
 * indexes samples, [S, *input] or, when the input's first dim is 1,
 * [S, *input[1:]]. Sets view to sample 0 (data into all; dtype, shape) and
 * stride to bytes per sample; a shape that fits neither is an error naming
 * file, input and model. */
struct RTensor;
int cmd_sample_view(const struct RTensor *all, const Value *input, const char *file, const char *name,
                    const char *model, struct RTensor *view, size_t *stride, Diag *d);
/* Default thread count: the online CPUs (at least 1). */
int cmd_default_threads(void);
/* The cache folder for pipelines compiled by --model (generate, transcribe):
 * $WLOWER_CACHE, else $XDG_CACHE_HOME/wlower, else ~/.cache/wlower; a usage
 * error when none is set. */
int cmd_cache_root(const char *cmd, char *buf, size_t n);
/* --model: dir (a folder under the cache root) is used when it reads as a
 * verified pipeline of `kind`; else it is compiled there from model with
 * `wlower MODEL --pipeline KIND --target T -o DIR` plus the option pairs
 * opts[2i] = name, opts[2i+1] = value (skipped when NULL; "" = a flag: the
 * name alone). */
int cmd_cached_pipeline(const char *cmd, const char *kind, const char *model, const char *target, const char *dir,
                        const char *const *opts, int nopts);
/* "1, 2,3": comma-separated ids in [0, INT32_MAX], blanks around them allowed
 * (*ids malloc'ed, the caller frees it); false (and *ids NULL) on anything
 * else. cmd_parse_ids: the same, anything else a usage error naming opt. */
bool parse_id_list(const char *s, int64_t **ids, int *n);
int cmd_parse_ids(const char *cmd, const char *opt, const char *s, int64_t **ids, int *n);
/* "float32[1,80,3000]" / "int64[batch,4]" for a graph value's declared type. */
const char *cmd_describe_value(const Value *v, char *buf, size_t n);

/* ---------------------------------------------------------------- sim_report.c
 * The simulated device's part of the generate/transcribe reports (qc-*
 * pipelines): per program cycles per run, runs, saturated stores per run,
 * and the vendor's per-run table. */
struct Program;
enum { SIM_MAX_PROGRAMS = 8 };
typedef struct SimProg {
	const char *name;
	struct Program *prog;
	bool simulated;            /* runner qc (else the fields below are 0) */
	uint64_t cycles_per_run, saturated;
	int runs, nsat;            /* runs, runs with a saturated store */
	const char *first_kernel;  /* the first kernel that saturated */
	struct cJSON *sat_runs;    /* [[run, count], ...] */
} SimProg;
typedef struct SimTotals {
	bool on;                   /* some program is simulated */
	double clock_hz;
	int nprog;
	SimProg prog[SIM_MAX_PROGRAMS];
} SimTotals;
/* After the runs: the stats of progs[0..n) (named names[i]). */
void sim_totals_collect(SimTotals *t, struct Program *const *progs, const char *const *names, int n);
const SimProg *sim_totals_find(const SimTotals *t, const char *name);
/* One line per program (cycles, ms and runs; saturated stores, the first few
 * by run, labelled `unit`: "position", "run") and the vendor's table, to
 * stderr; with progs (a JSON array) also one object per program there. */
void sim_totals_print(const SimTotals *t, const char *unit, struct cJSON *progs);
void sim_totals_free(SimTotals *t);

/* ---------------------------------------------------------------- cmd_pipeline.c: --calibrate
 * The float pipeline (built for ref in a scratch folder) is run with every
 * program observed; the kind's own driver (llm: prompts, whisper: clips)
 * runs it, then the ranges of the programs compiled for qc-* are written,
 * widened by --calibrate-margin. */
struct Calib;
typedef struct CalibPrograms {
	int n;
	const char *name[SIM_MAX_PROGRAMS];
	struct Program *prog[SIM_MAX_PROGRAMS];
	struct Calib *cal[SIM_MAX_PROGRAMS];
} CalibPrograms;
/* Observers on prog[0..n) (filled by the caller). */
int calib_programs_observe(CalibPrograms *cp, Diag *d);
/* DIR/<name>.tranges for each program named in keep (NULL-terminated);
 * `what` names the calibration input in errors (infinities, all-NaN). */
int calib_programs_write(const PipelineArgs *pa, CalibPrograms *cp, const char *dir, const char *const *keep,
                         const char *what, Diag *d);
void calib_programs_free(CalibPrograms *cp);
/* cmd_pipeline_whisper.c: the programs of a qc-* whisper pipeline that run
 * on Chimera (NULL-terminated), and --calibrate's driver: the ref pipeline
 * in cdir transcribes each clip, the ranges go to dir. */
extern const char *const whisper_qc_programs[];
int whisper_calibrate(const PipelineArgs *pa, const char *cdir, const char *dir, Diag *d);
/* whisper_lmq8.c: --precision fp32dec-lmq8 of the Whisper pipeline. The
 * calibration facts (whisper_calibrate fills them from the float step
 * program: the LM head's input range over every step of every clip), then
 * the step module rewritten before it is compiled: LM head int8 (QDQ, fused
 * into ai.wlower.QMatMul), token embedding ai.wlower.QGather; `rec`
 * (pipeline.json "precision") says what was done. */
typedef struct Lmq8Calib {
	double lo, hi;                       /* the LM-head input's observed range */
	int64_t vectors;                     /* LM-head input rows observed */
	bool done;
} Lmq8Calib;
int lmq8_observe(const PipelineArgs *pa, const Module *step, struct Calib *cal, int64_t runs, Diag *d);
int lmq8_rewrite(const PipelineArgs *pa, Module *step, const char *model, int64_t vocab, struct cJSON *rec, Diag *d);
/* cmd_pipeline_whisper.c: the rewrite tried on the step graph before calibrating (fails fast). */
int whisper_lmq8_precheck(const PipelineArgs *pa, Diag *d);

#endif
