/* chimera.h — inside the Chimera target (targets/chimera/). Files:
 *
 *   chimera.c   chimera_compile (target.h): drives the stages below
 *   lower.c     kernel list, core split, tiling onto the PE array / LRM,
 *               per-core MAC/ALU/byte counts           (schedule owner)
 *   alloc.c     OCM buffer allocation by liveness within --ocm, spills to DDR
 *   emit_cpp.c  module.cpp (one function per kernel + the ccl::Program table),
 *               weights.bin layout, schedule.json
 *   ops/        per-op knowledge of the CCL kernels (numerics owner; the C++
 *               side is ccl/ headers): the op table chimera_ops[] (ops.c),
 *               indexed by Node.op, one row per op with its kernel (which
 *               constant inputs are packed into blobs and how, MAC/ALU
 *               counts, scratch, the C++ call text) and how lower.c/alloc.c
 *               split, tile and stage it. The kernels by family:
 *                 matmul.c      MatMulNBits
 *                 attention.c   WhisperAttention, GroupQueryAttention
 *                 norm.c        LayerNormalization, RMSNorm
 *                 elementwise.c Gelu, SiLU, Cast/Identity (copy), Add, Mul
 *                 gather.c      Gather (embedding rows)
 *                 argmax.c      GreedyArgMax
 *                 conv.c        ConvStem
 *                 logmel.c      LogMel
 *                 quant.c       QuantizeLinear (int8), DequantizeLinear (int8/uint8), per tensor
 *               util.c: shared checks, formats and constant packers (ops.h)
 *   sim/        `wlower sim`: build + run module.cpp against ccl/, cost model
 *               (docs/cost-model.md), reports, profiles
 *   ccl/        the CCL emulation library (C++17, header-only + runner.cpp)
 *
 * Adding a kernel: docs/chimera-contracts.md "Adding a kernel".
 */
#ifndef WLOWER_CHIMERA_H
#define WLOWER_CHIMERA_H

#include <stdio.h>
#include "targets/target.h"

/* ---------------------------------------------------------------- ops/
 * Node inputs that are initializers are "constants": the op's kernel packs
 * them into blobs (fixed-point, int4 blocks, ...) that go to weights.bin;
 * every other float input/output is an activation in the format of its
 * Value.frac_bits (FixedPoint32<F> as int32, FRAC_FP16 as uint16 binary16,
 * FRAC_F32 as float); int64/int32 values stay as they are. */
typedef struct CclBlob {
	const char *role;        /* "weight", "scales", "bias", "gamma", "table"... (for schedule.json) */
	uint8_t *data;           /* malloc'ed; freed by ccl_kernel_info_free */
	size_t len;
} CclBlob;

typedef struct CclKernelInfo {
	const char *cpp_name;    /* "linalg::matMulNBits" — for schedule.json and reports */
	uint64_t macs;           /* multiply-accumulates (docs/cost-model.md formulas) */
	uint64_t alu_ops;        /* PE ALU element operations (same doc) */
	uint64_t scratch_bytes;  /* OCM scratch the kernel needs (0: none) */
	int nblobs;
	CclBlob blobs[8];        /* packed constant operands, in call order */
} CclKernelInfo;

/* Argument expressions of one kernel call (C++ text, already typed as the
 * kernel wants or `void *`):
 *   in[i]    for each node input i (constant inputs: NULL; absent optional: NULL),
 *   out[j]   for each node output j,
 *   blob[b]  for each blob b of the kernel info, in order,
 *   scratch  the scratch buffer (NULL if scratch_bytes == 0).
 * The first argument of every kernel is the ccl::Ctx reference `c`. */
typedef struct ChCallArgs {
	const char *const *in, *const *out, *const *blob;
	const char *scratch;
} ChCallArgs;

/* How lower.c splits an op over the cores and tiles it (lower.c's header). */
typedef enum ChTile {
	CH_TILE_ROWS,            /* row-wise (norms, elementwise): rows of the output */
	CH_TILE_MATMUL,          /* MatMulNBits: rows, or output channels for few rows */
	CH_TILE_ATTENTION,       /* WhisperAttention: heads, or (head, query row) pairs */
	CH_TILE_GQA,             /* GroupQueryAttention: the same, its own dims */
	CH_TILE_CONV,            /* ConvStem: two convolutions as matmuls, output rows */
	CH_TILE_LOGMEL,          /* LogMel: DFT and mel matmuls, frames */
	CH_TILE_ARGMAX,          /* GreedyArgMax: rows of the input, or its last axis */
	CH_TILE_GATHER,          /* Gather: rows; reads only the gathered table rows */
} ChTile;

/* One row of the op table: everything the target knows about one op. */
typedef struct ChOp ChOp;
struct ChOp {
	/* the kernel (ops/<family>.c) */
	const char *cpp;         /* C++ kernel ("linalg::matMulNBits"): the call, schedule.json "cpp" */
	/* checks the node (bad input → WL_ERR naming node and op), packs its
	 * blobs, counts MACs/ALU ops, sizes its scratch */
	int (*info)(const Node *n, CclKernelInfo *ki, Diag *d);
	/* writes one C++ statement (ending in ";\n") calling op->cpp */
	int (*emit)(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d);
	/* lowering (lower.c, alloc.c) */
	ChTile tile;             /* core split and tiling */
	int reductions;          /* row reductions per row (norm statistics, softmax max/sum): array traffic */
	bool gathers;            /* reads only the rows of its blob it gathers (as many bytes as
	                          * its output): the blob stays in weights.bin, never staged */
};

/* ops/ops.c: the op table, indexed by Op; rows without info: no CCL kernel. */
extern const ChOp chimera_ops[OP_COUNT_];
/* The row of op, or NULL if the chimera targets have no kernel for it. */
const ChOp *chimera_op(Op op);
/* chimera_op_supported (target.h) says whether it has one. */

/* Bad input (unsupported op, attribute or format) → WL_ERR naming node and op. */
int ccl_kernel_info(const Node *n, CclKernelInfo *ki, Diag *d);
void ccl_kernel_info_free(CclKernelInfo *ki);
/* Writes one C++ statement (ending in ";\n") calling the kernel, with the
 * argument expressions of ChCallArgs. */
int ccl_emit_call(const Node *n, const char *const *in, const char *const *out,
                  const char *const *blob, const char *scratch, FILE *f, Diag *d);

/* ---------------------------------------------------------------- sim/cost.c
 * The cost model (docs/cost-model.md): cycles per category of one kernel on
 * one core, from the per-core counts of schedule.json. */
enum { CAT_COMPUTE, CAT_MAC, CAT_DATA_ARRAY, CAT_DATA_OCM, CAT_DATA_EXTERNAL, CAT_COUNT };
extern const char *const cost_category_names[CAT_COUNT];   /* "compute", "mac", ... */

/* (sim helper's section) The model, docs/cost-model.md. Counts of one kernel
 * on one core, as schedule.json's "per_core" entries give them. */
typedef SchedCore CostCoreCounts;       /* runtime/module/schedule.h */

enum { COST_MAX_CORES = 4 };

typedef struct CostKernel {
	char *name, *op, *cpp, *split;
	uint64_t macs, alu_ops;                 /* kernel totals (schedule) */
	uint64_t ddr_to_ocm, ocm_to_ddr;        /* sums of its "dma" entries */
	uint64_t act_bytes;                     /* its activation buffers (role in/out) */
	int64_t tile_m, tile_n, tile_k, tile_count;
	bool double_buffered;
	int ncores;
	CostCoreCounts core[COST_MAX_CORES];
} CostKernel;

/* Kernel classes of the model (cost_kernel_class, from the kernel's "cpp"):
 * matmul-like (linalg::matMulNBits, whisper::convStem, whisper::logMel),
 * attention (nn::whisperAttention, nn::gqa), row-wise (everything else:
 * norms, elementwise, GELU, embedding, argmax, copies). */
enum { COST_MATMUL, COST_ATTENTION, COST_ROWWISE, COST_CLASS_COUNT };
extern const char *const cost_class_names[COST_CLASS_COUNT];   /* "matmul", "attention", "rowwise" */
int cost_kernel_class(const CostKernel *k);

/* The constants (docs/cost-model.md). k[cat] multiplies the category's raw
 * figure (cost_kernel_raw; k[CAT_MAC] for matmul-like kernels, k_mac_attn
 * for attention ones); launch is added to compute once per kernel and core;
 * act_ddr[class] is the share of a kernel's activation bytes that go through
 * DDR; kernel_overhead is added once per kernel outside the categories;
 * overlap: double-buffered tiles hide DMA behind the on-chip work. */
typedef struct CostParams {
	double k[CAT_COUNT];
	double k_mac_attn;
	double launch;
	double act_ddr[COST_CLASS_COUNT];
	double kernel_overhead;
	bool overlap;
} CostParams;
/* v2, fitted on both vendor points (scripts/fit_cost_model.py): the default. */
extern const CostParams cost_default_params;
/* v1 (one constant per category, fitted on the encoder alone), kept for comparison. */
extern const CostParams cost_v1_params;

/* Raw figures (cycles before the constants) of one kernel on one core. */
/* raw_act: DDR cycles of the kernel's activations if all went through DDR
 * (scaled by act_ddr[class], then by k[CAT_DATA_EXTERNAL]). */
void cost_kernel_raw(const ChimeraConfig *cfg, const CostKernel *k, int ci, double raw[CAT_COUNT],
                     double *raw_act);
/* min(1, macs / (tile count · m · n · k)); 1 without a tile or MACs. */
double cost_tile_util(const CostKernel *k);

typedef struct CostResult {
	int nkernels, cores;
	/* [kernel][core][cat] cycles, [kernel][core] time with overlap */
	double (*cyc)[COST_MAX_CORES][CAT_COUNT];
	double (*ktime)[COST_MAX_CORES];
	double *kernel_cycles;      /* max over cores + overhead */
	int *critical;              /* core deciding each kernel's time */
	double core_cat[COST_MAX_CORES][CAT_COUNT];   /* per core, summed over kernels */
	double core_busy[COST_MAX_CORES];             /* per core, sum of its kernel times */
	double module_cat[CAT_COUNT];                 /* critical core per kernel, summed */
	double raw_module_cat[CAT_COUNT];             /* Σ_k max_c raw (constants 1, act_ddr 0) */
	double raw_module_act;                        /* Σ_k max_c raw_act */
	double raw_class[COST_CLASS_COUNT][CAT_COUNT];  /* raw_module_cat per kernel class */
	double raw_class_act[COST_CLASS_COUNT];         /* raw_module_act per kernel class */
	int class_kernels[COST_CLASS_COUNT];
	double launch_cycles;                         /* nkernels · launch (inside compute) */
	double overhead_cycles;                       /* nkernels · kernel_overhead */
	uint64_t total_cycles;                        /* sum of kernel_cycles, rounded */
} CostResult;
/* Evaluates the model for every kernel (cfg->cores cores). */
void cost_model(const ChimeraConfig *cfg, const CostParams *p, const CostKernel *ks, int nk,
                CostResult *r);
void cost_result_free(CostResult *r);
/* The activation bytes the model sends through DDR: Σ_k act_bytes · act_ddr[class]. */
double cost_model_act_bytes(const CostParams *p, const CostKernel *ks, int nk);


/* ---------------------------------------------------------------- lower.c, alloc.c, emit_cpp.c
 * (lower helper's section) The lowered module: one ChKernel per node in
 * graph (topological) order, one ChVal per activation value. */
enum { CH_MEM_DDR = 0, CH_MEM_OCM = 1, CH_MEM_W = 2 };   /* c.ddr, c.ocm, c.w */
enum { CH_MAX_CORES = 4, CH_MAX_BUFS = 48, CH_MAX_DMA = 40 };

typedef struct ChVal {
	Value *v;
	uint64_t bytes;          /* numel x element size of its format */
	int def;                 /* producing kernel (-1: module input); the last reader
	                            comes from plan_liveness (alloc.c) */
	bool io_in, io_out;      /* module input / output: home in the DDR arena */
	bool spilled;            /* did not fit in OCM: home in the DDR arena */
	int mem;                 /* CH_MEM_OCM (resident def..last) or CH_MEM_DDR */
	uint64_t off;
	bool copy;               /* module input: filled once into OCM at copy_off */
	uint64_t copy_off;
} ChVal;

typedef struct ChBuf {
	const char *value;       /* value name, or "NODE#role" for blobs/scratch */
	const char *role;        /* "in" "out" "weight" "scratch" */
	int mem;                 /* CH_MEM_* */
	uint64_t off, bytes;
} ChBuf;

typedef struct ChDma {
	int dir;                 /* 0 DDR_TO_OCM (before the call), 1 OCM_TO_DDR (after) */
	int src_mem, dst_mem;    /* CH_MEM_* */
	uint64_t src_off, dst_off, bytes;
	const char *what;        /* "weights" "activations" "spill" "fill" */
} ChDma;

typedef SchedCore ChCore;               /* the per_core entry it becomes in schedule.json */

typedef struct ChKernel {
	Node *n;
	const ChOp *op;          /* its row of chimera_ops */
	CclKernelInfo ki;
	const char *split;       /* "rows" "cols" "heads" "none" */
	int ncores;              /* cores used: 0..ncores-1 */
	int64_t units;           /* rows / output channels / heads split over cores */
	int64_t tile_m, tile_n, tile_k, tile_count;
	uint64_t tile_lrm;
	ChCore core[CH_MAX_CORES];
	/* filled by alloc.c */
	ChBuf buf[CH_MAX_BUFS]; int nbuf;
	ChDma dma[CH_MAX_DMA]; int ndma;
	const char *in_expr[16], *out_expr[8], *blob_expr[8], *scratch_expr;
	uint64_t blob_woff[8];   /* offsets of the blobs in weights.bin */
	uint64_t direct_ext_read, direct_ext_write;   /* DDR bytes read/written in place */
} ChKernel;

typedef struct ChModule {
	Module *m;
	const TargetOptions *o;
	const ChimeraConfig *cfg;
	Arena *a;                /* the module's arena (strings) */
	ChKernel *k; int nk;
	ChVal *vals; int nvals;  /* indexed by Value.id (NULL v: not an activation) */
	uint64_t weights_bytes, ddr_bytes, ocm_peak, lrm_peak;
	int nspills;
	ChVal **spills;          /* in spill order */
} ChModule;

/* lower.c: kernel list (validation, the op's row and kernel info, liveness). */
int ch_lower(ChModule *cm, Diag *d);
/* lower.c: split, tiling and per-core counts (after ch_alloc). */
void ch_tile(ChModule *cm);
/* alloc.c: weights.bin offsets, OCM allocation, spills, DMA plan, arguments. */
int ch_alloc(ChModule *cm, Diag *d);
/* emit_cpp.c: module.cpp, weights.bin, schedule.json into dir. */
int ch_emit(ChModule *cm, const char *dir, Diag *d);
void ch_free(ChModule *cm);
/* lower.c: "domain.op_type" (op_type alone in the default domain), and the
 * node's name or else its first output's (for messages, comments, tables). */
const char *ch_op_name(Arena *a, const Node *n);
const char *ch_node_label(const Node *n);
/* Element format label for comments: "Q27", "fp16", "f32", "i64", "i32". */
const char *ch_fmt_label(const Value *v, char buf[16]);
/* ccl::Fmt number of a value: 0..31, -1 F32, -2 FP16, -3 I32, -4 I64. */
int ch_fmt(const Value *v);

#endif
