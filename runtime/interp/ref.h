/* ref.h — the reference kernels' private interface (runtime/interp/ only).
 *
 *   ref_table.c            the op table: Op → kernel (ref_kernels[OP_COUNT_])
 *   ref_util.c             messages, element access for any numeric dtype,
 *                          broadcasting, attributes
 *   ref_elementwise.c      unary/binary/variadic elementwise ops, Where, Clip,
 *                          Cast, comparisons and logic, with broadcasting
 *   ref_reduce.c           Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax, CumSum
 *   ref_matmul.c           the blocked GEMM, MatMul, Gemm, Conv,
 *                          com.microsoft MatMulNBits
 *   ref_shape.c            shape and data movement (Reshape, Transpose, Gather,
 *                          Slice, Concat, Split, Expand, Tile, Range, ...)
 *   ref_norm.c             LayerNormalization, (Skip)(Simplified)LayerNorm,
 *                          Gelu variants
 *   ref_fused_attention.c  ai.wlower WhisperAttention, GroupQueryAttention
 *   ref_fused.c            ai.wlower ConvStem, LogMel, GreedyArgMax
 *   ref_attention.c        com.microsoft RotaryEmbedding, GroupQueryAttention,
 *                          MultiHeadAttention
 *   ref_contrib.c          com.microsoft Attention
 *   ref_quant.c            QuantizeLinear, DequantizeLinear (ONNX QDQ), ai.wlower
 *                          QMatMul (int8 GEMM, int32 accumulation), QGather
 *                          (int8 row-wise embedding table)
 *
 * A kernel is three functions over a KCall (one node, its input and output
 * tensors):
 *   prepare  once, at exec_new: checks attributes and arity, may keep parsed
 *            attributes in c->state (allocated from c->arena). Optional.
 *   infer    before each run of the node: sets every present output's dtype,
 *            ndim and dims from the inputs' dtypes and shapes; it may read
 *            the data of the inputs listed in `data_inputs` (a bit mask, bit
 *            i = input i), e.g. Reshape's shape. Sets c->scratch (bytes per
 *            thread) if run needs temporary memory.
 *   run      computes the outputs (their data is allocated by the executor).
 * A kernel serving several ops (Add and Sub, the Reduce* family) tells them
 * apart by c->node->op, never by the op's name.
 * Errors are one line: "MODEL: node 'NAME' (OpType): what" (kfail adds the
 * prefix). Kernels never allocate in run; they use the scratch they asked
 * for: kscratch(c, tid) is 64-byte aligned, c->scratch bytes per thread, and
 * c->shared_base, c->shared bytes for the whole node.
 */
#ifndef WLOWER_REF_H
#define WLOWER_REF_H

#include <math.h>
#include <string.h>
#include "interp.h"

typedef struct KCall {
	const Node *node;
	const char *path;       /* model file, for messages */
	int64_t opset;          /* ai.onnx opset of the model */
	Arena *arena;           /* lives as long as the Exec (prepare only) */
	void *state;            /* kernel-private, from prepare */
	int nin, nout;
	RTensor **in;           /* NULL entries: absent optional inputs */
	RTensor **out;          /* NULL entries: absent optional outputs */
	ThreadPool *pool;
	size_t scratch;         /* infer: bytes per thread needed by run */
	size_t shared;          /* infer: bytes of one shared scratch block */
	void *scratch_base;     /* run: threads * scratch_stride bytes */
	size_t scratch_stride;
	void *shared_base;      /* run: `shared` bytes, 64-byte aligned */
	Exec *exec;             /* the executor running the node (If builds its branches') */
} KCall;

typedef int KFn(KCall *c, Diag *d);

/* A row of the op table (ref_table.c). */
typedef struct Kernel {
	KFn *prepare;           /* optional */
	KFn *infer;
	KFn *run;               /* NULL: the op has no reference kernel */
	unsigned data_inputs;
	bool shape_only;        /* run reads only its inputs' shapes (Shape, Size) */
	unsigned unaligned_ok;  /* inputs read safely at any address (bit i = input i):
	                           a misaligned initializer feeding only such inputs
	                           is used in place, otherwise exec copies it */
} Kernel;

/* The kernel of op, or NULL (no reference kernel; also for OP_UNKNOWN). */
const Kernel *ref_kernel(Op op);

/* The kernels' entry points, by family (the table names them per op). */
/* ref_elementwise.c */
KFn ref_bin_prepare, ref_bin_infer, ref_bin_run, ref_var_infer, ref_var_run, ref_un_prepare, ref_un_infer,
	ref_un_run, ref_clip_infer, ref_clip_run, ref_cast_infer, ref_cast_run, ref_where_infer, ref_where_run,
	ref_expand_infer, ref_expand_run;
/* ref_reduce.c */
KFn ref_red_prepare, ref_red_infer, ref_red_run, ref_arg_infer, ref_arg_run, ref_sm_infer, ref_sm_run,
	ref_cumsum_infer, ref_cumsum_run;
/* ref_matmul.c */
KFn ref_matmul_infer, ref_matmul_run, ref_gemm_infer, ref_gemm_run_op, ref_conv_infer, ref_conv_run,
	ref_nbits_prepare, ref_nbits_infer, ref_nbits_run, ref_wl_nbits_prepare, ref_wl_nbits_infer,
	ref_wl_nbits_run;
/* ref_shape.c */
KFn ref_copy_run, ref_reshape_infer, ref_flatten_infer, ref_squeeze_infer, ref_unsqueeze_infer,
	ref_identity_infer, ref_dropout_infer, ref_dropout_run, ref_transpose_infer, ref_transpose_run,
	ref_gather_infer, ref_gather_run, ref_gatherel_infer, ref_gatherel_run, ref_concat_infer, ref_concat_run,
	ref_slice_infer, ref_slice_run, ref_split_infer, ref_split_run, ref_tile_infer, ref_tile_run,
	ref_pad_infer, ref_pad_run, ref_shape_infer, ref_shape_run, ref_size_infer, ref_size_run,
	ref_const_prepare, ref_const_infer, ref_const_run, ref_cos_infer, ref_cos_run, ref_range_infer,
	ref_range_run, ref_trilu_infer, ref_trilu_run;
/* ref_norm.c */
KFn ref_ln_infer, ref_ln_run, ref_skip_infer, ref_skip_run, ref_bn_infer, ref_bn_run, ref_gelu_infer,
	ref_gelu_run;
/* ref_attention.c */
KFn ref_rot_infer, ref_rot_run, ref_gqa_infer, ref_gqa_run, ref_mha_infer, ref_mha_run;
/* ref_fused_attention.c */
KFn ref_wa_prepare, ref_wa_infer, ref_wa_run, ref_gq_prepare, ref_gq_infer, ref_gq_run;
/* ref_fused.c */
KFn ref_stem_prepare, ref_stem_infer, ref_stem_run, ref_lm_prepare, ref_lm_infer, ref_lm_run, ref_am_infer,
	ref_am_run;
/* ref_contrib.c */
KFn ref_msa_infer, ref_msa_run;
/* ref_quant.c */
KFn ref_qlin_infer, ref_qlin_run, ref_dqlin_infer, ref_dqlin_run, ref_qmm_infer, ref_qmm_run,
    ref_qgather_infer, ref_qgather_run;
KFn ref_if_prepare, ref_if_infer, ref_if_run;            /* ref_control.c */

/* ---------------------------------------------------------------- util */

int kfail(const KCall *c, Diag *d, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline void *kscratch(const KCall *c, int tid)
{
	return (char *)c->scratch_base + (size_t)tid * c->scratch_stride;
}
/* Name of input/output slot i (for messages); "" if absent. */
const char *kin_name(const KCall *c, int i);
const char *kout_name(const KCall *c, int i);
const char *kdesc(const RTensor *t, char buf[96]);

/* Element size in bytes (0 for unsupported runtime dtypes). */
int elem_size(int dt);
bool dt_is_float(int dt);      /* float, double, float16, bfloat16 */
bool dt_is_int(int dt);        /* signed/unsigned integers (not bool) */
bool dt_is_unsigned(int dt);
bool dt_numeric(int dt);       /* float or int or bool, byte-sized */
/* Generic element access (slow paths): converts through double / int64. */
double get_f64(const void *p, int dt, int64_t i);
int64_t get_i64(const void *p, int dt, int64_t i);
uint64_t get_u64(const void *p, int dt, int64_t i);
void set_f64(void *p, int dt, int64_t i, double v);   /* float types round once; ints truncate */
void set_i64(void *p, int dt, int64_t i, int64_t v);  /* ints wrap; floats convert */
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);                      /* round to nearest even */

/* Reads a 0-d/1-d integer tensor (int32/int64) into out (at most max). */
int read_ints(const KCall *c, int slot, int64_t *out, int max, int *count, Diag *d);
/* Scalar value of an input as double / int64 (first element). */
double scalar_f64(const RTensor *t);
int64_t scalar_i64(const RTensor *t);

/* Normalizes axis in [-rank, rank) (or [-rank-1, rank] with `plus1`). */
int norm_axis(const KCall *c, Diag *d, int64_t axis, int rank, int64_t *out);

/* Multidirectional broadcasting of n shapes into out; error names inputs. */
int broadcast_shapes(const KCall *c, Diag *d, int n, RTensor *const *ts, int *ndim, int64_t *dims);
/* Strides (in elements) of t viewed as broadcast to [ndim, dims] (0 on
 * broadcast axes). */
void broadcast_strides(const RTensor *t, int ndim, const int64_t *dims, int64_t *strides);
void contiguous_strides(int ndim, const int64_t *dims, int64_t *strides);

/* Sets out dtype/shape. */
void set_out(RTensor *o, int dtype, int ndim, const int64_t *dims);
bool same_shape(const RTensor *a, const RTensor *b);

/* Requires that input slot i is present and of a dtype in `mask`
 * (bit dt set). Message names the tensor. */
int need_in(const KCall *c, Diag *d, int i, uint32_t mask);
#define DTM(x) (1u << (x))
#define DTM_FLOATS (DTM(DT_FLOAT) | DTM(DT_DOUBLE) | DTM(DT_FLOAT16) | DTM(DT_BFLOAT16))
#define DTM_INTS (DTM(DT_INT8) | DTM(DT_UINT8) | DTM(DT_INT16) | DTM(DT_UINT16) | \
                  DTM(DT_INT32) | DTM(DT_UINT32) | DTM(DT_INT64) | DTM(DT_UINT64))
#define DTM_NUM (DTM_FLOATS | DTM_INTS)
#define DTM_ALL (DTM_NUM | DTM(DT_BOOL))
#define DTM_IDX (DTM(DT_INT32) | DTM(DT_INT64))

/* Attribute helpers that check the attribute's type. */
int attr_get_int(const KCall *c, Diag *d, const char *name, int64_t dflt, int64_t *out);
/* The "axis" attribute (dflt if absent), normalized for rank (norm_axis). */
int attr_axis(const KCall *c, Diag *d, int64_t dflt, int rank, int64_t *out);
int attr_get_float(const KCall *c, Diag *d, const char *name, float dflt, float *out);

/* A float that may sit at any address: initializers point into the model
 * file, where raw_data has no alignment. Kernels that declare an input in
 * Kernel.unaligned_ok read it only through this type (or memcpy). */
typedef float ufloat __attribute__((aligned(1)));

/* ---------------------------------------------------------------- vector math
 * Hot loops are compiled per ISA (target_clones: AVX-512, AVX2+FMA,
 * baseline) at -O3 so GCC vectorizes them; no intrinsics. vexpf and verff
 * are branch-free so loops calling them vectorize:
 *   vexpf  Cephes' expf polynomial after Cody-Waite reduction, scaled by two
 *          exponent halves (subnormal results round correctly): <= 1 ulp
 *   verff  odd/even rational approximation on [-4, 4] (the form Eigen
 *          uses): <= 7 ulp, absolute error <= 4.3e-7 (measured against
 *          double erf on a 1e-5 grid) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KCLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), optimize("O3")))
#else
#define KCLONES
#endif

static inline __attribute__((always_inline)) float vexpf(float x)
{
	float xc = x < -104.0f ? -104.0f : (x > 88.72283935546875f ? 88.72283935546875f : x);
	float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;    /* round to nearest */
	float r = xc - n * 0.693359375f;
	r = r - n * -2.12194440e-4f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	int32_t ni = (int32_t)n, h = ni >> 1;
	uint32_t u1 = (uint32_t)(h + 127) << 23, u2 = (uint32_t)(ni - h + 127) << 23;
	float s1, s2;
	memcpy(&s1, &u1, 4);
	memcpy(&s2, &u2, 4);
	float y = p * s1 * s2;
	y = x > 88.72283935546875f ? INFINITY : y;
	y = x < -104.0f ? 0.0f : y;
	return x != x ? x : y;
}

static inline __attribute__((always_inline)) float verff(float a)
{
	float x = a < -4.0f ? -4.0f : (a > 4.0f ? 4.0f : a);
	float x2 = x * x;
	float p = -2.72614225801306e-10f;
	p = p * x2 + 2.77068142495902e-08f;
	p = p * x2 + -2.10102402082508e-06f;
	p = p * x2 + -5.69250639462346e-05f;
	p = p * x2 + -7.34990630326855e-04f;
	p = p * x2 + -2.95459980854025e-03f;
	p = p * x2 + -1.60960333262415e-02f;
	float q = -1.45660718464996e-05f;
	q = q * x2 + -2.13374055278905e-04f;
	q = q * x2 + -1.68282697438203e-03f;
	q = q * x2 + -7.37332916720468e-03f;
	q = q * x2 + -1.42647390514189e-02f;
	float y = x * p / q;
	return a != a ? a : y;
}

/* In-place softmax of r[lo, hi) (float exponentials, double sum); r[t]
 * outside [lo, hi) becomes 0. `extra`: one more logit in the denominator
 * (smooth softmax), NaN for none. */
void softmax_row_f32(float *r, int64_t n, int64_t lo, int64_t hi, float extra);

/* ---------------------------------------------------------------- gemm
 * C[M,N] (row stride ldc) = A[M,K] · B[K,N], float32, for `batch`
 * independent products. B comes from one of several sources, packed into
 * NR-wide panels on the fly (so weights are read in place). Work is split
 * over (batch, M tile, N tile); k is summed in fixed KC chunks, so results do
 * not depend on the thread count. */
enum { GB_ROWS = 0, GB_COLS = 1, GB_NBITS = 2, GB_IM2COL = 3 };
typedef struct GemmB {
	int kind;
	/* GB_ROWS: b[k*ldb + n]; GB_COLS: b[n*ldb + k] (B transposed) */
	const ufloat *b;
	int64_t ldb;
	/* GB_NBITS: com.microsoft MatMulNBits; element (k, n) */
	const uint8_t *q;          /* [N, kblocks, blob] */
	const ufloat *scales;      /* [N * kblocks] (float32; fp16 converted by caller) */
	const uint8_t *zp_packed;  /* [N, ceil(kblocks*bits/8)] or NULL */
	const ufloat *zp_float;    /* [N * kblocks] or NULL */
	int bits, block;
	int64_t kblocks, blob, zp_row;
	/* GB_IM2COL: convolution input, one image and one group;
	 * k = (c, k0, k1, ...), n = (o0, o1, ...) */
	const ufloat *x;           /* [C, in0, in1, ...] of this group */
	int sp;                    /* spatial rank (1..3) */
	int64_t in[3], out[3], ker[3], stride[3], dil[3], pad[3];
} GemmB;

typedef struct GemmArgs {
	int64_t M, N, K, batch;
	const ufloat *a;           /* A of batch 0 */
	int64_t lda;
	bool trans_a;              /* A stored [K, M]: a[k*lda + m] */
	const int64_t *a_off;      /* per batch element offsets (or NULL: 0) */
	const GemmB *b;
	const int64_t *b_off;      /* per batch offsets of b (GB_ROWS/COLS) or
	                              x (GB_IM2COL); NULL: all batches share B */
	float *c;
	int64_t ldc;
	const int64_t *c_off;
	const ufloat *bias;        /* [N] added to every row (after the sum), or NULL */
} GemmArgs;
/* Scratch bytes one thread needs. */
size_t gemm_scratch(void);
/* Runs with the pool (scratch: per-thread stride) or inline (pool NULL,
 * scratch of one thread). */
void gemm_run(ThreadPool *pool, void *scratch_base, size_t scratch_stride, const GemmArgs *g);

#endif
