/* ops.h — inside targets/chimera/ops/: what the kernel files share.
 *
 * The C++ side of every kernel is targets/chimera/ccl/ (API.md there is the
 * contract for every signature and blob layout); the formulas for macs and
 * alu_ops here must equal what the kernels count at run time.
 *
 *   ops.c          the op table chimera_ops[] (one row per Op), the entry
 *                  points ccl_kernel_info / ccl_emit_call
 *   util.c         checks, activation formats, constant packers (below)
 *   quant.c        QuantizeLinear / DequantizeLinear (int8 edges)
 *   <family>.c     the kernels: ck_<kernel>_info / ck_<kernel>_emit, the
 *                  functions of the rows (chimera.h ChOp)
 */
#ifndef WLOWER_CHIMERA_OPS_H
#define WLOWER_CHIMERA_OPS_H

#include "targets/chimera/chimera.h"

/* ---------------------------------------------------------------- util.c */

/* Bad input: WL_ERR with "MODEL: node 'N': op OP: message" (uses `d`). */
#define KFAIL(n, ...) ck_fail(n, d, __VA_ARGS__)
int ck_fail(const Node *n, Diag *d, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static inline Value *nin(const Node *n, int i) { return i < n->ninputs ? n->inputs[i] : NULL; }
static inline Value *nout(const Node *n, int i) { return i < n->noutputs ? n->outputs[i] : NULL; }
static inline int rank_of(const Value *v) { return v && v->type.has_shape ? v->type.rank : -1; }
static inline int64_t numel_of(const Value *v) { return v ? type_numel(&v->type) : -1; }
static inline int64_t dim_of(const Value *v, int i)
{
	if (!v || !v->type.has_shape || i < 0 || i >= v->type.rank || v->type.dims[i].kind != DIM_VALUE)
		return -1;
	return v->type.dims[i].value;
}
static inline int64_t tnumel(const Tensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= t->dims[i];
	return n;
}

/* Checks: input i a (non-string) constant; v with a static shape. */
int ck_need_const(const Node *n, int i, Diag *d);
int ck_need_shape(const Node *n, const Value *v, Diag *d);

/* Storage format of an activation (API.md "Formats"): 0..31, -1 F32,
 * -2 FP16, -3 I32, -4 I64, -5 I8 (int8 of QDQ graphs). */
int ck_fmt(const Node *n, const Value *v, Diag *d, int *out);
/* Work format (API.md): fixed → F; else from range; else 15 (FP16) / 16 (F32). */
int ck_work_q(const Value *v);
/* Template arguments of an activation: "FX, QX" (input, buf[48]) and "FX"
 * (output, buf[24]); the opt_ forms take an absent value as "0, 0" / "0". */
int ck_fq(const Node *n, const Value *v, Diag *d, char *buf);
int ck_fo(const Node *n, const Value *v, Diag *d, char *buf);
int ck_opt_fq(const Node *n, const Value *v, Diag *d, char *buf);
int ck_opt_fo(const Node *n, const Value *v, Diag *d, char *buf);
/* An optional argument expression: "nullptr" for NULL or "NULL". */
const char *ck_arg(const char *s);
/* The site of an index check (ccl.hpp ccl::IndexSite): prints
 * `ccl::IndexSite{"ids", "node", "Gather", flags, size, rank, {dims}}` for
 * node n's indices ind over an axis of size (flags: INDEX_NO_WRAP for [0,
 * size), INDEX_GRAPH_INPUT added from ind); an index out of range ends the
 * simulated run with the message every target gives (compiler/ir/diag.c
 * diag_index_range). */
void ck_index_site(FILE *f, const Node *n, const Value *ind, int64_t size, int flags);

/* Constants. */
void *ck_calloc(size_t n, size_t sz);   /* aborts when out of memory */
CclBlob *ck_add_blob(CclKernelInfo *ki, const char *role, size_t len);
/* Fractional bits of a constant with max |v| = maxabs (0..31). */
int ck_const_fbits(double maxabs);
double ck_maxabs(const Tensor *t);
int32_t ck_q32(double v, int F);        /* round half up, saturating */
/* Packs a constant float tensor into a blob `role` in storage format fmt
 * (0..31 int32, -2 binary16, -1 float). */
void ck_pack_plain(CclKernelInfo *ki, const char *role, const Tensor *t, int fmt);

/* Per-row weights of matmul-like kernels (docs/numerics.md "Constants").
 * ck_weight_bits: significant bits of packed weights (|w| < 2^bits) so that
 * K products of an int32 activation and a weight sum below 2^62 in int64.
 * ck_row_scale: the exponent E of a row of K weights with max |w| = maxabs
 * (maxabs·2^E < 2^ck_weight_bits(K), lowered so that the row's bias, if
 * any, fits in Q(qa + E) below 2^61); writes the row's {bias in Q(qa + E),
 * qa + E} int64 pair to col and returns E. */
int ck_weight_bits(int64_t K);
int ck_row_scale(double maxabs, int64_t K, int qa, const double *bias, int64_t col[2]);
/* Rows [N][K] of int32 weights w·2^E (get(ctx, n, k) reads the float
 * weight), their {bias, qa + E} pairs in cols; bias ([N]) may be NULL. */
typedef double (*CkWeightGet)(const void *ctx, int64_t n, int64_t k);
void ck_pack_rows(int32_t *dst, int64_t N, int64_t K, CkWeightGet get, const void *ctx, int qa,
                  const double *bias, int64_t *cols);

/* ---------------------------------------------------------------- the kernels (rows of ops.c) */

#define CK_KERNEL(name)                                                                     \
	int ck_##name##_info(const Node *n, CclKernelInfo *ki, Diag *d);                    \
	int ck_##name##_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)

CK_KERNEL(matmul_nbits);   /* matmul.c */
CK_KERNEL(qmatmul);        /* matmul.c: int8 QMatMul */
/* QMatMul's requantization multiplier: r = mult · 2^-shift, mult in [2^30, 2^31) */
void ck_qmm_multiplier(double r, int64_t *mult, int64_t *shift);
CK_KERNEL(whisper_attn);   /* attention.c */
CK_KERNEL(gqa);            /* attention.c */
CK_KERNEL(norm);           /* norm.c: LayerNormalization, RMSNorm */
CK_KERNEL(unary);          /* elementwise.c: Gelu, SiLU, Cast, Identity, Reshape */
CK_KERNEL(transpose);      /* elementwise.c: Transpose */
CK_KERNEL(binary);         /* elementwise.c: Add, Mul */
CK_KERNEL(embedding);      /* gather.c: Gather */
CK_KERNEL(qembedding);     /* gather.c: ai.wlower.QGather (int8 rows, a scale per row) */
CK_KERNEL(argmax);         /* argmax.c: GreedyArgMax */
CK_KERNEL(conv_stem);      /* conv.c: ConvStem */
CK_KERNEL(logmel);         /* logmel.c: LogMel */
CK_KERNEL(quantize);       /* quant.c: QuantizeLinear */
CK_KERNEL(dequant);        /* quant.c: DequantizeLinear (int8/uint8, per tensor) */

#endif
