/* target.h — code generation: what the driver hands a target, the module
 * directory every target writes, and the manifest they share.
 *
 *   runtime/module/           manifest.json (DESIGN.md "Formats"), common part
 *   targets/chimera/chimera.c chimera_compile: lower, schedule, emit CCL C++
 *   targets/host/host.c       host_compile: LLVM C API → module.so
 *   compiler/ir/fileutil.c    outdir_begin/commit/abort (atomic directories)
 *
 * The driver (compiler/driver/cmd_compile.c) runs canonicalize + fuse (+ numerics for the
 * chimera targets) and then calls the target's compile function with the
 * rewritten Module. A target writes every file into `dir` (a temporary
 * directory the driver renames into place on success), never elsewhere.
 */
#ifndef WLOWER_TARGET_H
#define WLOWER_TARGET_H

#include "runtime/module/module.h"

typedef enum TargetKind { TARGET_NONE, TARGET_QC_N, TARGET_QC_P, TARGET_QC_U, TARGET_HOST } TargetKind;

/* ChimeraConfig: runtime/module/schedule.h (schedule.json and the simulator share it). */

typedef struct HostConfig {
	const char *cpu;        /* --cpu (default "native") */
	int threads;            /* --threads (default 0 = online CPUs, at run time) */
	bool emit_llvm_ir;      /* --emit llvm-ir: also write DIR/module.ll (lit tests) */
	bool no_autotune;       /* --no-autotune: the blocking model only, no measurements */
	const char *precision;  /* --host-precision fp32 (default) | bf16 | auto */
} HostConfig;

typedef struct TargetOptions {
	TargetKind kind;
	const char *target_name;    /* "qc-p", "host" ... as given */
	const char *model_path;
	bool print_fracbits;        /* --print-fracbits: table to stdout */
	FuseOptions fuse;
	ChimeraConfig chimera;
	HostConfig host;
	const char **passes_run;    /* names of the passes that ran, in order */
	int npasses_run;
	double t_start_ms;          /* CLOCK_MONOTONIC at driver start (compile time) */
} TargetOptions;

/* Parses "qc-n" ... "host"; TARGET_NONE if unknown. */
TargetKind target_parse(const char *name);
/* Fills cfg with the preset of kind (QC-N/P/U) and the defaults above. */
void chimera_config_preset(TargetKind kind, ChimeraConfig *cfg);

/* The manifest facts of a compilation (runtime/module/module.h). */
ManifestInfo target_manifest_info(const TargetOptions *o);

/* Each writes its files into dir (exists, empty). WL_OK or WL_ERR + Diag. */
int chimera_compile(Module *m, const TargetOptions *o, const char *dir, Diag *d);
int host_compile(Module *m, const TargetOptions *o, const char *dir, Diag *d);
/* True when op has a kernel on that target (the rows of targets/host/
 * hg_kernels.c and targets/chimera/ops/ops.c); `wlower --list-ops` prints
 * them with the interpreter's. */
bool host_op_supported(Op op);
bool chimera_op_supported(Op op);

/* Transpose as both targets run it: the output walked in order over at
 * most 4 dims o[0..3] (size-1 dims dropped, output dims that stay adjacent
 * in the input merged, padded in front with 1), reading input element
 * sum(i_k * s[k]) (s in elements). Reshape needs no plan (a copy).
 * WL_ERR + Diag naming the node when the shape is not static, perm is not a
 * permutation of the input's rank, or more than 4 dims remain. */
typedef struct TransposePlan { int64_t o[4], s[4]; } TransposePlan;
int target_transpose_plan(const char *model, const Node *n, TransposePlan *p, Diag *d);

#endif
