/* target.h — code generation: what the driver hands a target, the module
 * directory every target writes, and the manifest they share.
 *
 *   targets/manifest.c        manifest.json (DESIGN.md "Formats"), common part
 *   targets/chimera/chimera.c chimera_compile: lower, schedule, emit CCL C++
 *   targets/host/host.c       host_compile: LLVM C API → module.so
 *   compiler/fileutil.c       outdir_begin/commit/abort (atomic directories)
 *
 * The driver (compiler/main.c) runs canonicalize + fuse (+ numerics for the
 * chimera targets) and then calls the target's compile function with the
 * rewritten Module. A target writes every file into `dir` (a temporary
 * directory the driver renames into place on success), never elsewhere.
 */
#ifndef WLOWER_TARGET_H
#define WLOWER_TARGET_H

#include <cjson/cJSON.h>
#include "compiler.h"

typedef enum TargetKind { TARGET_NONE, TARGET_QC_N, TARGET_QC_P, TARGET_QC_U, TARGET_HOST } TargetKind;

typedef struct ChimeraConfig {
	int cores;              /* --cores 1..4 (default 4) */
	int pe_rows, pe_cols;   /* preset: 8x8 QC-N, 16x16 QC-P, 32x32 QC-U */
	int macs_per_pe;        /* --macs-per-pe (default 16) */
	uint64_t lrm_bytes;     /* per PE, 4096 */
	uint64_t ocm_bytes;     /* --ocm (default 16 MB = 16 << 20) */
	double clock_hz;        /* --clock (default 1.7e9) */
	double ext_bw;          /* --ext-bw, bytes/s (default 128e9), read and write each */
} ChimeraConfig;

typedef struct HostConfig {
	const char *cpu;        /* --cpu (default "native") */
	int threads;            /* --threads (default 0 = online CPUs, at run time) */
	bool emit_llvm_ir;      /* --emit llvm-ir: also write DIR/module.ll (lit tests) */
} HostConfig;

typedef struct TargetOptions {
	TargetKind kind;
	const char *target_name;    /* "qc-p", "host" ... as given */
	const char *model_path;
	const char *tranges_path;   /* chimera: required */
	bool print_fracbits;        /* --print-fracbits: table to stdout */
	FuseOptions fuse;
	ChimeraConfig chimera;
	HostConfig host;
	const char **passes_run;    /* names of the passes that ran, in order */
	int npasses_run;
	double t_start_ms;          /* CLOCK_MONOTONIC at driver start (compile time) */
	int verbose;
} TargetOptions;

/* Parses "qc-n" ... "host"; TARGET_NONE if unknown. */
TargetKind target_parse(const char *name);
/* Fills cfg with the preset of kind (QC-N/P/U) and the defaults above. */
void chimera_config_preset(TargetKind kind, ChimeraConfig *cfg);

/* Each writes its files into dir (exists, empty). WL_OK or WL_ERR + Diag. */
int chimera_compile(Module *m, const TargetOptions *o, const char *dir, Diag *d);
int host_compile(Module *m, const TargetOptions *o, const char *dir, Diag *d);

/* ---------------------------------------------------------------- manifest.c
 *
 * manifest.json, written last by every target:
 * {
 *   "format": "wlower-module", "version": 1,
 *   "model": "PATH", "model_sha256": "...", "wlower_version": "0.1.0",
 *   "target": "qc-p", "hardware": {...target specific...},
 *   "fuse": {"prepend_logmel": b, "append_argmax": b, "fp16_attention": b},
 *   "passes": ["constant-to-initializer", ...],
 *   "programs": [{"name": "main", "inputs": [IO...], "outputs": [IO...],
 *                 "op_counts": {"ai.wlower.MatMulNBits": 16, "Add": 8, ...}, ...target extras}],
 *   "files": [{"name": "module.cpp", "bytes": N, "sha256": "..."}, ...],
 *   "compile_ms": T
 * }
 * IO = {"name": "x", "dtype": "float32", "shape": [1,80,3000],
 *       "format": "fixed" | "float32" | "float16" | "int", "frac_bits": F (fixed only),
 *       "range": [min, max] (when known)}
 * Dims are integers; a symbolic dim is an error for the targets (static shapes).
 */
typedef struct Manifest Manifest;
/* Common part from the module (inputs/outputs/op counts/fuse/passes/model). */
int manifest_new(Module *m, const TargetOptions *o, Manifest **out, Diag *d);
/* The target adds its own keys: the hardware object and the program object
 * ("main") are returned for additions; keys must not clash with the above. */
cJSON *manifest_hardware(Manifest *mf);
cJSON *manifest_program(Manifest *mf);
cJSON *manifest_root(Manifest *mf);
/* Records DIR/name (size + sha256 of its bytes as now on disk). */
int manifest_add_file(Manifest *mf, const char *dir, const char *name, Diag *d);
/* Sets compile_ms, writes DIR/manifest.json atomically, frees mf. */
int manifest_write(Manifest *mf, const char *dir, Diag *d);
void manifest_free(Manifest *mf);
/* IO entry for a value (used by manifest_new; exported for targets that
 * describe extra buffers the same way). */
cJSON *manifest_io(const Value *v);

/* JSON files: pretty-printed + newline, written atomically; read whole
 * ("FILE: not valid JSON" on a parse error). */
int json_write_atomic(const char *path, const cJSON *root, Diag *d);
int json_read_file(const char *path, cJSON **out, Diag *d);

/* Reading (runtime, sim): parses DIR/manifest.json, checks format/version.
 * Errors name the file and key ("out/manifest.json: programs[0].inputs[1]: missing 'shape'"). */
int manifest_read(const char *dir, cJSON **out, Diag *d);

#endif
