/* passes.h — the pass interface, the pass manager (passmgr.c) and the
 * entry points of the passes; the table is in passes.c. */
#ifndef WLOWER_PASSES_H
#define WLOWER_PASSES_H
#include "compiler/onnx/onnx.h"

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

/* Options of the canonicalize group. */
typedef struct DimBinding { const char *name; int64_t value; } DimBinding;
typedef struct CanonOptions {
	const DimBinding *dims;    /* --dim NAME=N: symbolic dims made static */
	int ndims;
	int64_t max_seq;           /* --max-seq N: rows of RoPE tables (0: default 4096) */
	bool kv_step;              /* --kv-step: a one-token decoder step takes position_ids and
	                              attention_mask for a static-size cache (kv-step-position,
	                              kv-step-mask) */
	const char *from_prefill;  /* --from-prefill step|prefill|cross-kv: a static-T Whisper
	                              prefill (decoder_prefill.onnx) becomes the one-token step,
	                              the prefill with presents or the cross K/V program (prefill-step; with --kv-step,
	                              kv-step-position takes its positional Slice at [0, T)) */
} CanonOptions;

/* Options of the fusing pipeline (the driver's flags). Passes that a flag
 * enables do nothing without it. */
typedef struct FuseOptions {
	bool prepend_logmel;       /* --prepend-logmel: input becomes waveform [1,480000] */
	bool append_argmax;        /* --append-argmax: logits outputs become int32 ids */
	bool fp16_attention;       /* --fp16-attention: attention-adjacent edges float16 */
	bool static_kv_cache;      /* --static-kv-cache: GQA past read in place, presents = new rows */
	const char *split_lm_head; /* --split-lm-head body|head (NULL: no split) */
	const char *kv_cache_ranges; /* --kv-cache int8: the tranges file of the present outputs
	                              (the cache scales; NULL: the cache stays float) */
	bool position_input;       /* --position-input: a com.microsoft GroupQueryAttention whose
	                              positions come from attention_mask reads them from the graph
	                              input position_ids [B,S] (the LLM pipeline feeds it) */
	bool absorb_cross_kv;      /* --absorb-cross-kv (set for --target host): attention of a few
	                              queries reads the sequence its K/V were projected from */
} FuseOptions;

/* Options of the numerics passes (group 'numerics'; chimera targets).
 * Passes do nothing without tranges_path. */
typedef struct NumericsOptions {
	const char *tranges_path;  /* --tranges FILE */
	bool print_fracbits;       /* --print-fracbits: table to stdout */
} NumericsOptions;

struct PassContext {
	const char *model_path;
	CanonOptions canon;
	FuseOptions fuse;
	NumericsOptions numerics;
	/* set by passes for --time-passes / statistics */
	int changed;               /* rewrites made (nodes replaced, folded...): the
	                               "rewrites" column of --time-passes */
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
	CanonOptions canon;
} PipelineOptions;

/* Validates names (unknown pass → error listing valid names). */
int pipeline_run(Module *m, const PipelineOptions *opt, Diag *d);
/* Expands "a,b,group" into pass pointers; returns count or WL_ERR. */
int pipeline_resolve(const char *spec, const Pass **out, int max, Diag *d);

/* ---------------------------------------------------------------- passes.c */

int pass_constant_to_initializer(Module *m, PassContext *ctx, Diag *d);
int pass_dce(Module *m, PassContext *ctx, Diag *d);
int pass_identity_elim(Module *m, PassContext *ctx, Diag *d);
int pass_shape_infer(Module *m, PassContext *ctx, Diag *d);
int pass_specialize_dims(Module *m, PassContext *ctx, Diag *d);
int pass_inline_if(Module *m, PassContext *ctx, Diag *d);
int pass_kv_step_position(Module *m, PassContext *ctx, Diag *d);
int pass_kv_step_mask(Module *m, PassContext *ctx, Diag *d);
int pass_prefill_step(Module *m, PassContext *ctx, Diag *d);
/* canonicalize (issue 4) */
int pass_fold_constants(Module *m, PassContext *ctx, Diag *d);
int pass_canonicalize_layernorm(Module *m, PassContext *ctx, Diag *d);
int pass_canonicalize_gelu(Module *m, PassContext *ctx, Diag *d);
int pass_canonicalize_rmsnorm(Module *m, PassContext *ctx, Diag *d);
int pass_canonicalize_silu(Module *m, PassContext *ctx, Diag *d);
int pass_canonicalize_rope(Module *m, PassContext *ctx, Diag *d);
/* fuse (issue 4) */
int pass_fuse_conv_stem(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_ms_attention(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_ms_gqa(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_whisper_attention(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_gqa(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_matmul_nbits(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_qdq_matmul(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_qkv(Module *m, PassContext *ctx, Diag *d);
int pass_absorb_cross_kv(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_logmel(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_argmax(Module *m, PassContext *ctx, Diag *d);
int pass_static_kv_cache(Module *m, PassContext *ctx, Diag *d);
int pass_split_lm_head(Module *m, PassContext *ctx, Diag *d);
int pass_kv_cache_int8(Module *m, PassContext *ctx, Diag *d);
int pass_fp16_attention(Module *m, PassContext *ctx, Diag *d);
int pass_assign_fracbits(Module *m, PassContext *ctx, Diag *d);

/* fuse_logmel.c: Whisper's mel filters [n_mels, 201] (librosa Slaney, sr 16000,
 * n_fft 400) into out. */
void whisper_mel_filters(int n_mels, float *out);

/* shape_infer.c: infer one node's output types from its inputs (used by
 * passes that create nodes). Unknown ops keep declared types. */
int shape_infer_node(Node *n, Diag *d);

/* match.h: the matcher library (match_*, sole_user, fused_node_name, ...)
 * the canonicalize and fuse passes share. */

#endif
