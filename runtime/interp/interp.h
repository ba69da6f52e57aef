/* interp.h — runtime tensors and the reference executor's interface.
 *
 *   npy.c        RTensor helpers, float16 conversion, .npy read/write (float32,
 *                float16, int64, int32, int8, uint8, bool) and ONNX
 *                TensorProto .pb files
 *   threadpool.c a small fixed pool: parallel_for over index ranges
 *   exec.c       the float reference executor: plans buffers once, runs the
 *                graph node by node with the kernels of ref_table.c
 *   ref_table.c  the op table: Op → reference kernel
 *   ref_*.c      one file per op family; every op of the Whisper/Qwen2 exports
 *                and every ai.wlower/com.microsoft custom op we use
 *                (private interface: runtime/interp/ref.h)
 *   metrics.c    PSNR, max error and token agreement against a reference
 */
#ifndef WLOWER_RT_H
#define WLOWER_RT_H

#include "compiler/onnx/onnx.h"

enum { RT_MAX_DIMS = 8 };

/* A dense tensor in memory, row-major, elements in the ONNX raw layout of
 * `dtype` (DType numbering). `owned`: data was malloc'ed by the runtime. */
typedef struct RTensor {
	int dtype;
	int ndim;
	int64_t dims[RT_MAX_DIMS];
	void *data;
	size_t nbytes;
	bool owned;
} RTensor;

int64_t rt_numel(const RTensor *t);
/* Allocates (zeroed) data for dtype/dims; sets owned. */
void rt_alloc(RTensor *t, int dtype, int ndim, const int64_t *dims);
void rt_free(RTensor *t);
/* "float32[1,80,3000]" style description into buf. */
const char *rt_describe(const RTensor *t, char *buf, size_t n);
/* IEEE binary16 <-> binary32; float -> half rounds to nearest even
 * (subnormals, overflow to inf and NaN handled). */
float rt_half_to_float(uint16_t h);
uint16_t rt_float_to_half(float f);

/* ---------------------------------------------------------------- npy.c */
/* Errors name the file: "x.npy: unsupported dtype '<c16'". */
int npy_read(const char *path, RTensor *out, Diag *d);
int npy_write(const char *path, const RTensor *t, Diag *d);   /* atomic */
/* ONNX TensorProto file (test_data_set_N/input_0.pb). */
int pb_tensor_read(const char *path, RTensor *out, Diag *d);
/* NaN/Inf at the input boundary (docs/FORMATS.md): for a float input with
 * non-finite values, the one note every command prints (run on the
 * reference and host, sim) into buf, and true; false when there is none. */
bool rt_nonfinite_note(const RTensor *t, const char *name, const char *file, char *buf, size_t n);

/* ---------------------------------------------------------------- threadpool.c */
/* A persistent pool: threads-1 workers plus the calling thread. parallel_for
 * splits [0, n) into contiguous chunks handed out in order; each index is
 * visited exactly once, by some thread. Kernels make every output element's
 * arithmetic independent of the split, so results are bit-identical for any
 * thread count. tid in [0, threads) identifies the thread (per-thread
 * scratch). Nested calls from inside fn run inline on the calling thread. */
typedef struct ThreadPool ThreadPool;
typedef void (*ParallelFn)(void *ctx, int64_t begin, int64_t end, int tid);
ThreadPool *threadpool_new(int threads);       /* threads <= 1: no workers */
/* The process's pool of `threads` threads, shared by every caller asking for
 * the same count (reference counted; threadpool_free releases it). */
ThreadPool *threadpool_shared(int threads);
void threadpool_free(ThreadPool *p);
int threadpool_threads(const ThreadPool *p);   /* 1 for NULL */
/* p may be NULL (runs inline). `grain`: smallest chunk worth a hand-off. */
void parallel_for(ThreadPool *p, int64_t n, int64_t grain, ParallelFn fn, void *ctx);

/* ---------------------------------------------------------------- exec.c */
/* The float reference executor. exec_new checks every node has a kernel (an
 * op without one is an error naming the node: "M: node 'N' (Op): no
 * reference kernel for this op"). Shapes are resolved from the bound inputs
 * (symbolic dims allowed) and one arena is planned for them (exec_prepare);
 * exec_run plans only when the bound shapes, or the values of inputs that
 * decide shapes, differ from the last plan, so it does not allocate in
 * steady state. Initializers are read in place. The Module must outlive the
 * Exec. threads <= 0: one per online CPU. */
typedef struct Exec Exec;
/* True when op has a reference kernel (ref_table.c); false for OP_UNKNOWN. */
/* A MatMulNBits weight of bits 2/4/8 (com.microsoft layout: q [N, kblocks,
 * block·bits/8], scales [N·kblocks], zero points packed uint8 [N,
 * ceil(kblocks·bits/8)], float [N·kblocks] or none: 2^(bits−1)) as floats,
 * (q − zp)·scale: out[k·ldo + n] for k < K, n < N. Inputs may be unaligned. */
void interp_nbits_dequant(const uint8_t *q, const void *scales, const uint8_t *zp_packed, const void *zp_float,
                          int bits, int64_t block, int64_t K, int64_t N, float *out, int64_t ldo);
bool interp_op_supported(Op op);
int exec_new(Module *m, int threads, Exec **out, Diag *d);
void exec_free(Exec *e);
int exec_input_count(const Exec *e);
const Value *exec_input(const Exec *e, int i);     /* graph inputs that are not initializers */
/* Copies nothing: t must stay valid until exec_run returns. Checks dtype and
 * shape against the graph input ("input 'x': expected float32[1,80,3000], got ..."). */
int exec_bind(Exec *e, const char *name, const RTensor *t, Diag *d);
int exec_run(Exec *e, Diag *d);
/* Plans buffers for the shapes (and shape-determining values) bound now;
 * exec_run calls it when they differ from the last plan, so an explicit
 * call only moves the allocation out of the first run. */
int exec_prepare(Exec *e, Diag *d);
/* Bytes of the planned activation arena, of initializers that had to be
 * copied (misaligned in the file), and of scratch (for reports). */
typedef struct ExecStats {
	size_t arena_bytes, scratch_bytes, copied_init_bytes;
	int nodes, plans;
} ExecStats;
void exec_stats(const Exec *e, ExecStats *st);
int exec_output_count(const Exec *e);
const char *exec_output_name(const Exec *e, int i);
const RTensor *exec_output(const Exec *e, int i);  /* valid until the next run/free */
/* Control flow (the If kernel, ref_control.c). An If node reads, after its
 * own inputs, the values its branches use from outside them
 * (exec_outer_reads: at most EXEC_MAX_OUTER). exec_new_sub makes the
 * executor of a branch graph (one thread; freed with parent): those outer
 * values are its inputs, bound with exec_bind_value (a value the branch does
 * not read is ignored). exec_plan plans when the bound inputs differ from the
 * last plan (exec_run does it too); then exec_output gives the output shapes. */
enum { EXEC_MAX_OUTER = 31 };
int exec_outer_reads(const Node *n, const Value **out, int max);
int exec_new_sub(Exec *parent, const Graph *g, Exec **out, Diag *d);
int exec_bind_value(Exec *e, const Value *v, const RTensor *t, Diag *d);
int exec_plan(Exec *e, Diag *d);
/* Called after each node with each of its outputs (calibration). */
typedef void (*ExecObserver)(void *ctx, const Value *v, const RTensor *t);
void exec_set_observer(Exec *e, ExecObserver fn, void *ctx);

/* ---------------------------------------------------------------- metrics.c */
/* How close `got` is to the reference `ref` (same dtype and shape, any
 * numeric dtype; else WL_ERR "got float32[2], reference float32[3]"), the
 * numbers tests/oracle/compare.py prints: PSNR = 10·log10(peak²/MSE) with
 * peak = max |ref| (+inf when equal), max abs error, rms, and argmax over the
 * last axis compared row by row (tokens_equal of tokens). Equal infinities
 * are exact; other non-finite differences count in nonfinite (PSNR -inf). */
/* For the accuracy report (wlower compare) also: mse = rms², SQNR =
 * 10·log10(Σref² / Σ(ref-got)²) (+inf when equal, -inf when the reference
 * is all zero and got is not), cosine = Σref·got / (|ref|·|got|) (1 when
 * both are all zero, 0 when one is). */
typedef struct RtMetrics {
	double psnr, max_abs, rms, peak;
	double mse, sqnr, cosine;
	int64_t nonfinite, tokens, tokens_equal;
} RtMetrics;
int rt_metrics(const RTensor *ref, const RTensor *got, RtMetrics *m, Diag *d);

#endif
