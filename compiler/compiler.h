/* compiler.h — the front and back of the compiler, and the pass manager.
 *
 *   onnx_import.c  ModelProto (binary) → Module; raw weights and external
 *                  data stay in mmaps (pbwire.c splits them off before
 *                  protobuf-c sees the message)
 *   onnx_export.c  Module → ModelProto file (temporary name, then rename)
 *   text_parse.c   ONNX textual syntax (onnx docs/Syntax.md) → Module
 *   text_print.c   Module → ONNX textual syntax, stable order
 *   passmgr.c      pass pipeline: --passes, --stop-after, --print-after...
 *   fileutil.c     whole-file mmap, atomic output (tmp + rename), hashing
 */
#ifndef WLOWER_COMPILER_H
#define WLOWER_COMPILER_H

#include "ir/ir.h"

/* ---------------------------------------------------------------- import */

/* Reads a binary ModelProto. The file is mmapped and kept mapped by the
 * Module; external data files (relative to the model's folder) are mapped
 * too. Errors name the file (and the tensor/node where known). */
int onnx_import_file(const char *path, Module **out, Diag *d);
/* Same, from bytes in memory (the fuzzer's entry point). `buf` must outlive
 * the Module; `path` is used for messages and to resolve external data
 * (may be NULL: external data is then an error). */
int onnx_import_buffer(const void *buf, size_t len, const char *path, Module **out, Diag *d);

/* Reads .onnx or .onnxtxt by extension (.onnxtxt, .txt, .onnxtext → text). */
int model_read(const char *path, Module **out, Diag *d);

/* ---------------------------------------------------------------- export */

typedef struct ExportOptions {
	/* Tensors stored externally on import stay external. Besides, when the
	 * model would exceed 2 GiB, every tensor of at least this many bytes goes
	 * external (0 = 1024). External data is written to "<out>.data" (name
	 * relative to the output's folder). */
	size_t external_threshold;
	bool all_external;     /* force every tensor >= threshold external */
	size_t size_limit;     /* message size that triggers the above (0 = 2 GiB - 1;
	                          tests use a small one instead of writing 2 GiB) */
} ExportOptions;
/* Writes to `path` atomically (temporary file in the same folder, then
 * rename); on error nothing is left behind. */
int onnx_export_file(Module *m, const char *path, const ExportOptions *opt, Diag *d);
/* Serializes into a malloc'ed buffer (no external data). */
int onnx_export_buffer(Module *m, void **buf, size_t *len, Diag *d);

/* ---------------------------------------------------------------- text */

/* Parses ONNX textual syntax. Errors: "FILE:LINE:COL: message". */
int text_parse(const char *src, size_t len, const char *path, Module **out, Diag *d);
int text_parse_file(const char *path, Module **out, Diag *d);

typedef struct PrintOptions {
	bool print_weights;    /* print every initializer in full */
	int64_t elide_over;    /* initializers with more elements print as a
	                          placeholder (shape, dtype, sha256); 0 = 16 */
} PrintOptions;
int text_print(Module *m, FILE *f, const PrintOptions *opt);
/* Atomic: writes to a temporary then renames. */
int text_print_file(Module *m, const char *path, const PrintOptions *opt, Diag *d);

/* Floating-point elements as text (text_parse.c; the printer uses them to
 * write the shortest text that reads back bit-exactly). dtype: DT_FLOAT,
 * DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16 or a float8 type. text_float_bits
 * reads decimal numbers, inf, -inf, nan, -nan and nan(0xBITS) (raw bits);
 * returns 0, 1 if s is not a number, 2 if it is out of range. */
double text_float_value(int dtype, uint64_t bits);
int text_float_bits(int dtype, const char *s, uint64_t *bits);

/* ---------------------------------------------------------------- passes */

typedef struct PassContext PassContext;
typedef struct Pass {
	const char *name;
	int (*run)(Module *m, PassContext *ctx, Diag *d);
	const char *requires;  /* free text, as QBE's contract comments */
	const char *invalidates;
	const char *group;     /* pass group it belongs to ("canonicalize"...) or NULL */
	const char *help;
} Pass;

/* The one table (passes/passes.c), in default pipeline order. */
extern const Pass pass_table[];
extern const int pass_count;
const Pass *pass_find(const char *name);

/* Options of the fusing pipeline (the driver's flags). Passes that a flag
 * enables do nothing without it. */
typedef struct FuseOptions {
	bool prepend_logmel;       /* --prepend-logmel: input becomes waveform [1,480000] */
	bool append_argmax;        /* --append-argmax: logits outputs become int32 ids */
	bool fp16_attention;       /* --fp16-attention: attention-adjacent edges float16 */
} FuseOptions;

/* Options of the numerics passes (group 'numerics'; chimera targets).
 * Passes do nothing without tranges_path. */
typedef struct NumericsOptions {
	const char *tranges_path;  /* --tranges FILE */
	bool print_fracbits;       /* --print-fracbits: table to stdout */
} NumericsOptions;

struct PassContext {
	const char *model_path;
	int verbose;
	FuseOptions fuse;
	NumericsOptions numerics;
	/* set by passes for --time-passes / statistics */
	int changed;
};

typedef struct PipelineOptions {
	const char *passes;        /* "a,b,c" (names or groups), NULL = default */
	const char *stop_after;    /* NULL = run all */
	const char *print_after;   /* comma list */
	bool print_after_all;
	bool time_passes;
	bool verify_each;          /* run ir_verify after every pass */
	FILE *print_to;            /* where --print-after goes (stderr default) */
	FuseOptions fuse;
	NumericsOptions numerics;
	PrintOptions print;
} PipelineOptions;

/* Validates names (unknown pass → error listing valid names). */
int pipeline_run(Module *m, const PipelineOptions *opt, Diag *d);
/* Expands "a,b,group" into pass pointers; returns count or WL_ERR. */
int pipeline_resolve(const char *spec, const Pass **out, int max, Diag *d);

/* ---------------------------------------------------------------- fileutil */

typedef struct MappedFile { void *addr; size_t len; } MappedFile;
/* Maps the whole file read-only (empty files give addr NULL, len 0). */
int file_map(const char *path, MappedFile *mf, Diag *d);
void file_unmap(MappedFile *mf);

/* Atomic output: open "<path>.tmp.XXXXXX" in the same folder; commit renames
 * it into place; abort unlinks it. */
typedef struct AtomicFile { FILE *f; char *tmp; char *path; } AtomicFile;
int atomic_open(AtomicFile *af, const char *path, Diag *d);
int atomic_commit(AtomicFile *af, Diag *d);
void atomic_abort(AtomicFile *af);

/* Atomic output directory: outdir_begin creates "<path>.tmp.XXXXXX" next to
 * path and returns it (malloc'ed) in *tmp; outdir_commit replaces path by it
 * (an existing path must be a directory holding a manifest.json, or empty —
 * it is removed; anything else is an error, so a wrong -o cannot delete a
 * user's folder); outdir_abort removes the temporary tree. */
int outdir_begin(const char *path, char **tmp, Diag *d);
int outdir_commit(const char *tmp, const char *path, Diag *d);
void outdir_abort(const char *tmp);
/* mkdir -p; an existing folder is fine, an existing non-folder an error. */
int mkdir_p(const char *dir, Diag *d);
/* Removes a directory tree (no symlink following). 0 on success. */
int remove_tree(const char *path);

/* SHA-256 (hex, 64 chars + NUL). */
void sha256_hex(const void *data, size_t len, char out[65]);

/* Folder part of a path ("." if none); malloc'ed. */
char *path_dirname(const char *path);

#endif
