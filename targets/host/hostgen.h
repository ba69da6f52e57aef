/* hostgen.h — inside the host target (targets/host/). Files:
 *
 *   host.c        host_compile (target.h): buffer plan, the module's `run`
 *                 function, weights.bin, optimization (LLVMRunPasses O3),
 *                 object emission (TargetMachine), link of module.so, manifest
 *   hg_util.c     builder helpers shared by the kernel generators (loops,
 *                 vector types, parallel_for outlining, intrinsics)
 *   kgen_*.c      one file per kernel family; each registers in the op table
 *                 hg_kernels.c: op → {emit, scratch}
 *
 * Module ABI (what module.so exports; the runtime, runtime/wlower_rt.c, calls it):
 *
 *   int32_t wl_module_abi(void);                    returns WL_MODULE_ABI (1)
 *   void wl_module_run(const WlHostApi *api, void *const *io,
 *                      const uint8_t *weights, uint8_t *workspace);
 *     io: input buffers in manifest order, then output buffers (caller-owned,
 *         dense row-major, dtype/shape of the manifest);
 *     weights: DIR/weights.bin mapped (64-byte aligned offsets baked into the code);
 *     workspace: program.workspace_bytes of the manifest, 64-byte aligned,
 *         allocated once by the runtime (intermediates live here at offsets
 *         fixed at compile time; no allocation inside run).
 *
 * Kernel functions: one LLVM function per node, internal linkage, signature
 *   void kN(const WlHostApi *api, void *const *args)
 * args: the node's inputs (node input order; absent optional → NULL;
 * initializers point into weights), then its outputs, then one scratch
 * pointer if the generator asked for scratch. `run` fills an args array on
 * its stack per call.
 */
#ifndef WLOWER_HOSTGEN_H
#define WLOWER_HOSTGEN_H

#include <stdint.h>
#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>
#include "../target.h"

#define WL_MODULE_ABI 1

/* Shared with the runtime (runtime/wlower_rt.c provides it). */
typedef struct WlHostApi {
	void *pool;
	int nthreads;
	/* Calls body(ctx, i0, i1) over [0, n) split into chunks across the pool;
	 * returns when all are done. Safe to call with n == 0. */
	void (*parallel_for)(void *pool, int64_t n, void (*body)(void *ctx, int64_t i0, int64_t i1), void *ctx);
} WlHostApi;

typedef struct HostGen {
	LLVMContextRef ctx;
	LLVMModuleRef mod;
	LLVMBuilderRef b;
	LLVMTargetMachineRef tm;
	Module *m;
	const TargetOptions *opt;
	int vw;                       /* floats per vector register: 16 (AVX-512), 8 (AVX2) */
	bool avx512;
	LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_f32, t_f16, t_ptr, t_vf, t_vi32;
	LLVMTypeRef t_kernel;         /* void (ptr api, ptr args) */
	LLVMTypeRef t_body;           /* void (ptr ctx, i64 i0, i64 i1) */
	LLVMTypeRef t_api;            /* struct WlHostApi */
} HostGen;

/* A kernel generator fills the body of fn (already created with t_kernel,
 * entry block positioned) for node n. */
typedef struct HgKernel {
	const char *domain, *op_type;
	int (*emit)(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d);
	/* scratch bytes (0 = none); may be NULL */
	uint64_t (*scratch)(HostGen *g, const Node *n);
} HgKernel;

/* hg_kernels.c: the one table; NULL if the op has no host kernel. */
const HgKernel *hg_kernel_find(const Node *n);

#endif
