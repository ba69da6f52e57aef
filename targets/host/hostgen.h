/* hostgen.h — inside the host target (targets/host/). Files:
 *
 *   host.c        host_compile (target.h): buffer plan, the module's `run`
 *                 function, weights.bin, optimization (LLVMRunPasses O3),
 *                 object emission (TargetMachine), link of module.so, manifest
 *   hg_util.c     builder helpers shared by the kernel generators (loops,
 *                 vector types, parallel_for outlining, intrinsics)
 *   hg_kernels.c  the op table: Op → {emit, scratch}
 *   kgen_*.c      one file per kernel family (the generators the table names;
 *                 kgen_qmatmul.c: the int8 GEMM, VNNI where the CPU has it)
 *
 * Module ABI (what module.so exports; the runtime, runtime/rt/wlower_rt.c, calls it):
 *
 *   int32_t wl_module_abi(void);                    returns WL_MODULE_ABI (2)
 *   const WlModuleInfo *wl_module_info(void);       io names/dtypes/shapes, workspace and
 *                                                   weights bytes (checked against the manifest)
 *   int32_t wl_module_run(const WlHostApi *api, void *const *io,
 *                         const uint8_t *weights, uint8_t *workspace);
 *     returns WL_MODULE_OK, or the status of the first kernel that failed
 *     (WL_MODULE_EINDEX: an index out of range, reported through
 *     api->index_error; the later kernels do not run);
 *     io: input buffers in manifest order, then output buffers (caller-owned,
 *         dense row-major, dtype/shape of the manifest);
 *     weights: DIR/weights.bin mapped (64-byte aligned offsets baked into the code);
 *     workspace: program.workspace_bytes of the manifest, 64-byte aligned,
 *         allocated once by the runtime (intermediates live here at offsets
 *         fixed at compile time; no allocation inside run).
 *
 * Kernel functions: one LLVM function per distinct kernel (nodes with the
 * same key share it: hg_share.c), internal linkage, signature
 *   int32_t kN(const WlHostApi *api, void *const *args)    (WL_MODULE_OK or a status)
 * args: the node's inputs (node input order; absent optional → NULL;
 * initializers point into weights), then its outputs, then one scratch
 * pointer if the generator asked for scratch, then one pointer per index
 * site of the kernel (the node's own WlIndexSite: hg_index_site). `run_step`
 * (host.c) fills an args array on `wl_module_run`'s stack from the step
 * table, so a shared kernel reaches each node's data and reports each node's
 * name.
 */
#ifndef WLOWER_HOSTGEN_H
#define WLOWER_HOSTGEN_H

#include <stdint.h>
#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>
#include "targets/target.h"

#include "runtime/module/module_abi.h"   /* WL_MODULE_ABI, WlHostApi */

typedef struct HostGen {
	LLVMContextRef ctx;
	LLVMModuleRef mod;
	LLVMBuilderRef b;
	LLVMTargetMachineRef tm;
	Module *m;
	const TargetOptions *opt;
	int vw;                       /* floats per vector register: 16 (AVX-512), 8 (AVX), 4 (SSE) */
	bool avx512;
	bool avx2;                    /* 256-bit integer vectors (vpmaddwd ymm); without: SSE2 halves */
	bool fma;                     /* FMA3; without it hg_fma is a multiply and an add (two
	                               * roundings): llvm.fma would become a libm fmaf call per lane */
	bool vnni;                    /* vpdpbusd: AVX512-VNNI (vw 16) or AVX-VNNI (vw 8) */
	struct HgCpu *cpu;            /* caches and tuning of the target CPU (cpus.c) */
	bool bf16;                    /* --host-precision bf16: 4-bit GEMM panels in bf16, vdpbf16ps */
	LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_f32, t_f16, t_ptr, t_vf, t_vi32;
	LLVMTypeRef t_kernel;         /* i32 (ptr api, ptr args): WL_MODULE_OK or a status */
	LLVMTypeRef t_body;           /* void (ptr ctx, i64 i0, i64 i1) */
	LLVMTypeRef t_api;            /* struct WlHostApi */
	struct HgKfn *cur;            /* the kernel being generated (host.c node_kernel) */
} HostGen;

/* Node-specific constants are not baked into a kernel's code (kernels are
 * shared, hg_share.c): a generator asks hg_index_site for a site, which
 * records its node-independent part here and returns the args slot that
 * holds the pointer; host.c makes each node's WlIndexSite from the spec and
 * passes it through the step table (kargs kind "const"). */
#define HG_MAX_SITES 4
typedef struct HgSiteSpec {
	int input;                    /* the indices: the node's input number */
	int flags;                    /* INDEX_NO_WRAP (INDEX_GRAPH_INPUT is the node's) */
	int64_t size;                 /* the axis size */
} HgSiteSpec;
typedef struct HgKfn {
	LLVMValueRef fn;
	int arg0;                     /* args index of the first site pointer */
	int nsites;
	HgSiteSpec site[HG_MAX_SITES];
} HgKfn;

/* A row of the op table (hg_kernels.c). A kernel generator fills the body of
 * fn (already created with t_kernel, entry block positioned) for node n. */
typedef struct HgKernel {
	int (*emit)(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);
	/* scratch bytes (0 = none); may be NULL */
	uint64_t (*scratch)(HostGen *g, const Node *n);
} HgKernel;

/* hg_kernels.c: the row of n's op; NULL if the op has no host kernel
 * (host_op_supported, target.h). */
const HgKernel *hg_kernel_find(const Node *n);


/* ---------------------------------------------------------------- hg_util.c
 *
 * Builder helpers shared by the kernel generators (owner: helper "hostgen";
 * these declarations are stable). Every helper emits at the builder's current
 * position (g->b). Integers are i64 unless stated; "vector" means g->t_vf
 * (<vw x float>, vw = g->vw). Helpers that take a float "scalar or vector"
 * infer the type from their operands.
 *
 * Per-chunk scratch inside parallel bodies: use hg_alloca inside the body
 * function (thread stack; keep it well under 1 MB), or partition the kernel's
 * scratch by the chunk's index range.
 */

/* constants */
LLVMValueRef hg_i64(HostGen *g, int64_t v);
LLVMValueRef hg_i32(HostGen *g, int32_t v);
LLVMValueRef hg_f32(HostGen *g, float v);
/* the model's path for messages ("model" when unknown) */
const char *hg_model_name(const HostGen *g);
/* a new 1-D initializer of `count` elements of dtype in gr (repacked weights); *data its bytes */
Value *hg_new_init(Graph *gr, const char *hint, int dtype, int64_t count, void **data);
LLVMValueRef hg_vconst(HostGen *g, float v);            /* splat constant vector */
LLVMValueRef hg_vsplat(HostGen *g, LLVMValueRef s);     /* f32 (or i32) scalar → vw lanes */

/* kernel parameters: fn has type g->t_kernel (api, args) */
LLVMValueRef hg_api(HostGen *g, LLVMValueRef fn);       /* param 0 */
LLVMValueRef hg_arg(HostGen *g, LLVMValueRef fn, int i);/* load args[i] (ptr) */

/* addressing and scalar memory: &p[i] / p[i] for element type ty (i: i64) */
LLVMValueRef hg_gep(HostGen *g, LLVMTypeRef ty, LLVMValueRef p, LLVMValueRef i);
LLVMValueRef hg_gepf(HostGen *g, LLVMValueRef p, LLVMValueRef i);      /* float* */
LLVMValueRef hg_load(HostGen *g, LLVMTypeRef ty, LLVMValueRef p, LLVMValueRef i);
void hg_store(HostGen *g, LLVMValueRef v, LLVMValueRef p, LLVMValueRef i); /* element type = type of v */
/* alloca in the entry block of the current function: count elements of ty,
 * align bytes (0 = natural). Safe to call inside loops. */
LLVMValueRef hg_alloca(HostGen *g, LLVMTypeRef ty, int64_t count, unsigned align, const char *name);

/* vectors of vw floats at &p[i] (p: float*, unaligned) */
LLVMValueRef hg_vload(HostGen *g, LLVMValueRef p, LLVMValueRef i);
void hg_vstore(HostGen *g, LLVMValueRef v, LLVMValueRef p, LLVMValueRef i);
/* masked (tails): only lanes < n (i64, 0..vw) are read (others 0.0f) / written */
LLVMValueRef hg_vload_n(HostGen *g, LLVMValueRef p, LLVMValueRef i, LLVMValueRef n);
void hg_vstore_n(HostGen *g, LLVMValueRef v, LLVMValueRef p, LLVMValueRef i, LLVMValueRef n);
LLVMValueRef hg_vbroadcast(HostGen *g, LLVMValueRef p, LLVMValueRef i); /* splat of p[i] (float) */
LLVMValueRef hg_vreduce_add(HostGen *g, LLVMValueRef v);   /* sum of lanes (reassociated) */
LLVMValueRef hg_vreduce_max(HostGen *g, LLVMValueRef v);   /* max of lanes */
LLVMValueRef hg_vreduce_max_rows(HostGen *g, LLVMValueRef *v, int n);   /* lane r: max of v[r]'s lanes */
LLVMValueRef hg_rows_merge(HostGen *g, LLVMValueRef a, LLVMValueRef b, int rows, bool max);   /* 2·rows rows of half the lanes */

/* math on float scalars or vectors */
LLVMValueRef hg_fma(HostGen *g, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c); /* a*b+c, llvm.fma */
LLVMValueRef hg_fmax(HostGen *g, LLVMValueRef a, LLVMValueRef b);  /* llvm.maxnum */
LLVMValueRef hg_fmin(HostGen *g, LLVMValueRef a, LLVMValueRef b);  /* llvm.minnum */
LLVMValueRef hg_sqrt(HostGen *g, LLVMValueRef x);                  /* llvm.sqrt */
LLVMValueRef hg_exp(HostGen *g, LLVMValueRef x);   /* inline polynomial (vectorizes), <= 2 ulp of libm (tested); exp(-inf) = 0, x < -87 → 0 */
LLVMValueRef hg_exp2(HostGen *g, LLVMValueRef t);  /* inline polynomial, <= 2 ulp of libm (tested); 2^-inf = 0, t < -150 → 0 */
LLVMValueRef hg_erf(HostGen *g, LLVMValueRef x);   /* inline polynomial, abs. err < 2e-7 */
LLVMValueRef hg_gelu(HostGen *g, LLVMValueRef x);  /* 0.5·x·(1+erf(x/√2)) */
LLVMValueRef hg_silu(HostGen *g, LLVMValueRef x);  /* x / (1 + exp(-x)) */
/* any overloaded intrinsic on one type: hg_intrinsic(g, "llvm.fabs", ty, args, 1) */
LLVMValueRef hg_intrinsic(HostGen *g, const char *name, LLVMTypeRef ty, LLVMValueRef *args, int nargs);

/* AVX512-BF16 (--host-precision bf16; only when g->bf16, vw 16):
 *   hg_x86      a non-overloaded target intrinsic (llvm.x86.*) by name
 *   hg_t_bf16   bfloat (lanes 0) or <lanes x bfloat>
 *   hg_to_bf16  <16 x float> → <16 x bfloat>, round to nearest even (vcvtneps2bf16)
 *   hg_dpbf16   acc[i] += a[2i]·b[2i] + a[2i+1]·b[2i+1] (vdpbf16ps): acc <16 x float>,
 *               a, b <32 x bfloat>; a k pair is one 32-bit lane (low half: even k) */
LLVMValueRef hg_x86(HostGen *g, const char *name, LLVMValueRef *args, int nargs);
LLVMTypeRef hg_t_bf16(HostGen *g, unsigned lanes);
LLVMValueRef hg_to_bf16(HostGen *g, LLVMValueRef v);
LLVMValueRef hg_dpbf16(HostGen *g, LLVMValueRef acc, LLVMValueRef a, LLVMValueRef b);
/* bf16 pairs addressed in 32-bit units (i: i64, p: any pointer):
 *   hg_bf16_load   the <32 x bfloat> (16 pairs) at p + 4·i
 *   hg_bf16_bcast  the pair at p + 4·i in every lane, as <32 x bfloat> */
LLVMValueRef hg_bf16_load(HostGen *g, LLVMValueRef p, LLVMValueRef i);
LLVMValueRef hg_bf16_bcast(HostGen *g, LLVMValueRef p, LLVMValueRef i);
/* n (<= lanes; fewer: a masked load) bf16 at p[i] (i: i64, in bf16 elements)
 * widened to <lanes x float> (exact: the bits shifted up by 16) */
LLVMValueRef hg_bf16_to_f32(HostGen *g, LLVMValueRef p, LLVMValueRef i, int64_t n);

/* counted loop: for (iv = start; iv < end; iv += step), i64, step > 0.
 *   HgLoop l; LLVMValueRef i = hg_loop_begin(g, &l, start, end, step, "i");
 *   LLVMValueRef acc = hg_loop_carry(g, &l, init);   // loop-carried (phi)
 *   ... body ...; hg_loop_next(g, &l, acc, new_acc);
 *   hg_loop_end(g, &l);   // builder now after the loop; `acc` there holds the final value
 * hg_loop_carry must be called right after hg_loop_begin (before nested loops
 * or other blocks are started); hg_loop_next before hg_loop_end. */
#define HG_MAX_CARRY 64
typedef struct HgLoop {
	LLVMBasicBlockRef pre, head, body, exit;
	LLVMValueRef iv, step;
	int ncarry;
	LLVMValueRef carry[HG_MAX_CARRY], next[HG_MAX_CARRY];
} HgLoop;
LLVMValueRef hg_loop_begin(HostGen *g, HgLoop *l, LLVMValueRef start, LLVMValueRef end, int64_t step, const char *name);
LLVMValueRef hg_loop_carry(HostGen *g, HgLoop *l, LLVMValueRef init);
void hg_loop_next(HostGen *g, HgLoop *l, LLVMValueRef carry, LLVMValueRef next);
void hg_loop_end(HostGen *g, HgLoop *l);

/* if (cond) { then } [else { ... }]:
 *   HgIf f; hg_if_begin(g, &f, cond); ...; hg_if_else(g, &f); ...; hg_if_end(g, &f); */
typedef struct HgIf { LLVMBasicBlockRef then_bb, else_bb, end_bb; bool has_else; } HgIf;
void hg_if_begin(HostGen *g, HgIf *f, LLVMValueRef cond);
void hg_if_else(HostGen *g, HgIf *f);
void hg_if_end(HostGen *g, HgIf *f);

/* Parallel loop body outlined as a t_body function called through
 * api->parallel_for(api->pool, n, body, ctx):
 *   LLVMValueRef caps[] = {x, y, w};
 *   HgPar p; hg_par_begin(g, &p, api, n, caps, 3, "attn");
 *   // builder is now inside the body function: p.i0, p.i1 (i64) bound the chunk,
 *   // p.cap[k] is caps[k] reloaded inside the body (use these, never the originals)
 *   HgLoop l; LLVMValueRef i = hg_loop_begin(g, &l, p.i0, p.i1, 1, "t"); ... hg_loop_end(g, &l);
 *   hg_par_end(g, &p);  // back in the caller, after the parallel_for call
 * Captured values may be of any first-class type (pointers, i64, float...). */
#define HG_MAX_CAP 32
typedef struct HgPar {
	LLVMValueRef fn;                 /* the outlined body (internal) */
	LLVMValueRef i0, i1;
	LLVMValueRef cap[HG_MAX_CAP];
	int ncap;
	/* private */
	LLVMBasicBlockRef caller_bb;
	LLVMValueRef api, n, ctx;
} HgPar;
void hg_par_begin(HostGen *g, HgPar *p, LLVMValueRef api, LLVMValueRef n, LLVMValueRef *caps, int ncap, const char *name);
void hg_par_end(HostGen *g, HgPar *p);

/* Constant data (private globals): a C string; n int64s (a null pointer
 * for n <= 0). */
LLVMValueRef hg_const_str(HostGen *g, const char *s);
LLVMValueRef hg_const_i64s(HostGen *g, const int64_t *v, int n);

/* Index bounds (module_abi.h): hg_index_site, in kernel fn (before any
 * parallel body), gives the WlIndexSite of node n's indices `ind` (one of
 * n's inputs) over an axis of `size` (flags: INDEX_NO_WRAP for [0, size),
 * else [-size, size); INDEX_GRAPH_INPUT is added from ind): a pointer loaded
 * from args, since the site names the node and a kernel is shared by nodes
 * (HgKfn above); hg_site_data makes the constant itself (host.c, per node).
 * hg_index_check, in kernel fn (not in a parallel body), checks the index k
 * (i64) at flat position pos: one unsigned compare and one branch to a
 * block that calls api->index_error and returns WL_MODULE_EINDEX. Returns k,
 * a negative one wrapped into [0, size) (ONNX: it counts from the end). */
LLVMValueRef hg_index_site(HostGen *g, const Node *n, LLVMValueRef fn, const Value *ind, int64_t size, int flags);
LLVMValueRef hg_site_data(HostGen *g, const Node *n, const HgSiteSpec *s);
LLVMValueRef hg_index_check(HostGen *g, LLVMValueRef fn, LLVMValueRef site, LLVMValueRef pos, LLVMValueRef k,
                            int64_t size, int flags);

/* Static shapes of graph values (WL_ERR + Diag naming node and tensor if a
 * dim is symbolic/unknown). hg_dims fills up to 8 dims, returns the rank. */
int hg_dims(HostGen *g, const Node *n, const Value *v, int64_t dims[8], Diag *d);
int64_t hg_numel(const Value *v);                     /* -1 if not static */

/* Kernel generators of the other files (hg_kernels.c holds the table). */
int hg_emit_whisper_attention(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);
int hg_emit_gqa(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);
int hg_emit_conv_stem(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);
int hg_emit_logmel(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);
uint64_t hg_scratch_whisper_attention(HostGen *g, const Node *n);
uint64_t hg_scratch_gqa(HostGen *g, const Node *n);
uint64_t hg_scratch_conv_stem(HostGen *g, const Node *n);
/* ... and its compile-time repack of constant weights (host.c, before the plan) */
int hg_prepare_conv_stem(HostGen *g, Node *n, Diag *d);
uint64_t hg_scratch_logmel(HostGen *g, const Node *n);

/* kgen_matmul.c / kgen_elementwise.c / kgen_norm.c (helper "hostgen") */
/* Called by host.c for every ai.wlower.MatMulNBits node before the buffer
 * plan: replaces the node's weight inputs with repacked initializers
 * (bits 4: N-interleaved 4-bit panels, scales and -zp·scale per panel column,
 * padded bias) and marks the node (attribute "host_packed"). */
int hg_prepare_matmul_nbits(HostGen *g, Node *n, Diag *d);
int hg_emit_matmul_nbits(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);
uint64_t hg_scratch_matmul_nbits(HostGen *g, const Node *n);
/* kgen_qmatmul.c: ai.wlower.QMatMul (int8 GEMM); hg_prepare_qmatmul repacks
 * the int8 weights into VNNI / pmaddwd panels with column sums and scales
 * (input 7), before the buffer plan. */
int hg_prepare_qmatmul(HostGen *g, Node *n, Diag *d);
int hg_emit_qmatmul(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);
uint64_t hg_scratch_qmatmul(HostGen *g, const Node *n);
int hg_emit_binary(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);   /* Add, Mul */
int hg_emit_unary(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);    /* Gelu, SiLU, Cast, Identity, Reshape, Exp, Pow(2, x) */
int hg_check_pow(HostGen *g, const Node *n, Diag *d);   /* every Pow node, before the plan: base the constant 2 */
int hg_emit_gather(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);
int hg_emit_transpose(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d); /* any perm, <= 4 merged dims */
int hg_emit_argmax(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);
int hg_emit_layernorm(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);
int hg_emit_rmsnorm(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);
/* kgen_quant.c: QuantizeLinear / DequantizeLinear (int8/uint8/int32, per
 * tensor or per axis). hg_prepare_qdq (host.c, before the plan) checks the
 * node and its constant scales and zero points; hg_check_scales: the constant
 * float scales of a Q/DQ (input 1) or QMatMul (x_scale, w_scale, y_scale)
 * node are positive and finite (errors name node and tensor). */
int hg_prepare_qdq(HostGen *g, Node *n, Diag *d);
int hg_emit_qdq(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);
/* ai.wlower.QGather: the int8 row-wise embedding table (kgen_quant.c) */
int hg_emit_qgather(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);
int hg_check_scales(HostGen *g, const Node *n, Diag *d);

/* hg_share.c: nodes with the same kernel key (op, attributes, input and
 * output types, absent/initializer inputs, scratch bytes) share one kernel
 * function. A generator must read nothing else of its node (no names, no
 * initializer data), or add it to the key there; node-specific constants
 * (index sites) go through args instead (HgKfn). */
typedef struct HgShare HgShare;
HgShare *hg_share_new(void);
void hg_share_free(HgShare *c);
const HgKfn *hg_share_find(HgShare *c, const Node *n, uint64_t scratch);   /* NULL: none yet */
void hg_share_add(HgShare *c, const Node *n, uint64_t scratch, const HgKfn *k);

/* cpus.c: what the generators tune for. Cache sizes come from sysfs
 * (/sys/devices/system/cpu/cpu0/cache/index*) for --cpu native (CPUID's
 * cache leaves where sysfs has none), else from a table by CPU name
 * (generic defaults for names it does not list). */
typedef struct HgCpu {
	char name[64];                /* LLVM's CPU name (native: the host's) */
	char model[128];              /* /proc/cpuinfo model name (native), else name */
	int64_t l1d, l2, l3;          /* bytes per core (l3: whole cache) */
	const char *cache_source;     /* "sysfs", "cpuid" (no sysfs cache directory) or "table" */
	bool native, autotune;        /* autotune: --cpu native without --no-autotune */
} HgCpu;
void host_cpu_describe(HgCpu *c, const char *name, bool native);

/* kgen_matmul.c: MatMulNBits blocking (docs/host-contracts.md "Micro-kernel
 * model"). mr x nv: register tile (rows x vectors of vw floats); mc: rows
 * per M block, kc: k per cache block (mc 0: dequantize in registers, the
 * small-M path). hg_mm_default_blocking is the model's choice from the
 * cache sizes; hg_mm_blocking also runs the autotune when enabled. */
typedef struct HgBlocking {
	int mr, nv;
	int64_t mc, kc;
	const char *how;              /* "model", "autotune" (measured now or cached), "forced" */
	double ms;                    /* autotune: the winner's time (0: not measured) */
} HgBlocking;
void hg_mm_default_blocking(HostGen *g, int64_t M, int64_t K, int64_t N, int64_t block, HgBlocking *bl);
int hg_mm_tile_candidates(HostGen *g, const int (**t)[2]);
int hg_mm_blocking(HostGen *g, Node *n, int64_t M, int64_t K, int64_t N, int64_t block, bool has_res, HgBlocking *bl,
                   Diag *d);

/* host.c, shared with the autotune (hg_autotune.c): the HostGen types of
 * g->ctx and g->vw, the attributes of a kernel function, `cc -shared`. */
void hg_init_types(HostGen *g);
void hg_set_fn_attrs(HostGen *g, LLVMValueRef fn);
int hg_run_cc(const char *so, const char *obj, Diag *d);

/* hg_autotune.c: times each candidate blocking of a 4-bit MatMulNBits of
 * shape M x K x N (block) on the compiling machine (generated kernels, one
 * thread, random data, min over a few rounds) and returns the fastest in
 * *best (how "autotune", ms its time); results are cached per CPU model and
 * shape in $WLOWER_AUTOTUNE_CACHE, else $XDG_CACHE_HOME/wlower/autotune.tsv
 * or ~/.cache/wlower/autotune.tsv (a later compile takes the cached choice
 * and its time: the same module). Emits the trial kernels with
 * hg_mm_trial_kernel (kgen_matmul.c). */
int hg_autotune_mm(HostGen *g, const Node *n, int64_t M, int64_t K, int64_t N, int64_t block, bool has_res,
                   const HgBlocking *cand, int ncand, HgBlocking *best, Diag *d);
void hg_mm_trial_kernel(HostGen *g, const Node *n, int64_t M, int64_t K, int64_t N, int64_t block,
                        const HgBlocking *bl, LLVMValueRef fn);

/* cpus.c: the --cpu names of --target host (64-bit x86 processors of LLVM
 * 19, and "native"); host_cpu_list prints them, a few per line. */
bool host_cpu_known(const char *name);
void host_cpu_list(FILE *f);

#endif
