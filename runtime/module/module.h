/* module.h — the module-directory contract (runtime/module/): what every
 * target writes and every reader (the host runtime, the simulator, the
 * pipelines) checks. Writer and reader share these definitions.
 *
 *   manifest.c    manifest.json (DESIGN.md "Formats"): write and read
 *   schedule.c    schedule.json of a Chimera module (schedule.h): write and read
 *   module_abi.h  the ABI of a host module.so (generator and runtime)
 */
#ifndef WLOWER_MODULE_H
#define WLOWER_MODULE_H

#include <cjson/cJSON.h>
#include "passes/passes.h"
#include "schedule.h"

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
typedef struct ManifestInfo {
	const char *model_path;     /* the model as given on the command line */
	const char *target_name;    /* "qc-p", "host" ... */
	FuseOptions fuse;
	const char **passes_run;    /* names of the passes that ran, in order */
	int npasses_run;
	double t_start_ms;          /* CLOCK_MONOTONIC at driver start (compile time) */
} ManifestInfo;
int manifest_new(Module *m, const ManifestInfo *info, Manifest **out, Diag *d);
/* The target adds its own keys: the hardware object and the program object
 * ("main") are returned for additions; keys must not clash with the above. */
cJSON *manifest_hardware(Manifest *mf);
cJSON *manifest_program(Manifest *mf);
cJSON *manifest_root(Manifest *mf);
/* Records DIR/name (size + sha256 of its bytes as now on disk). */
int manifest_add_file(Manifest *mf, const char *dir, const char *name, Diag *d);
/* The same entry {"name", "bytes", "sha256"} appended to any "files" array
 * (pipeline.json lists its programs' files this way). */
int files_add_entry(cJSON *files, const char *dir, const char *name, Diag *d);
/* Sets compile_ms, writes DIR/manifest.json atomically, frees mf. */
int manifest_write(Manifest *mf, const char *dir, Diag *d);
void manifest_free(Manifest *mf);
/* IO entry for a value (used by manifest_new; exported for targets that
 * describe extra buffers the same way). */
cJSON *manifest_io(const Value *v);
/* The IO "dtype" string of an element type, as in the .npy: "float32",
 * "float16", "int64", "int32", "int8", "uint8", else dtype_name() or "unknown". */
const char *manifest_io_dtype(int dt);

/* JSON files: pretty-printed + newline, written atomically; read whole
 * ("FILE: not valid JSON" on a parse error). */
int json_write_atomic(const char *path, const cJSON *root, Diag *d);
int json_read_file(const char *path, cJSON **out, Diag *d);

/* outdir_commit's check (compiler/ir/fileutil.h): DIR is a complete module
 * directory made by wlower — a manifest.json of format wlower-module, and
 * every other entry a regular file its "files" list names. */
bool module_dir_replaceable(const char *dir, char *why, size_t n);
/* The walk behind it (also pipeline_dir_replaceable's): DIR/MANIFEST is JSON
 * of "format" FORMAT with a "files" array, and entry_ok accepts every other
 * entry (path: DIR/name); false with the reason in why otherwise ("it holds
 * 'X', which its MANIFEST does not list" when entry_ok leaves why empty). */
typedef bool (*WlDirEntryOk)(const cJSON *files, const char *path, const char *name, char *why, size_t n);
bool wl_dir_replaceable(const char *dir, const char *manifest, const char *format, WlDirEntryOk entry_ok, char *why,
                        size_t n);

/* Reading (runtime, sim): parses DIR/manifest.json (trailing data after the
 * JSON object is an error, as in every json_read_file), checks format and
 * version, then every field of the schema above for presence, JSON type and
 * range: strings, objects, arrays where the schema has them; dims integers
 * in [0, 2^40], at most 8, a tensor at most 2^40 bytes; known dtypes and
 * formats; frac_bits in [0, 31]; op counts and file bytes non-negative
 * integers; file names plain names; sha256 64 lowercase hex digits. Target
 * keys (host: abi, workspace_bytes, threads) are checked by their reader.
 * Errors name the file and field ("out/manifest.json:
 * programs[0].inputs[1].shape: missing"). */
int manifest_read(const char *dir, cJSON **out, Diag *d);

#endif
