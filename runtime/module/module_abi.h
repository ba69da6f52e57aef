/* module_abi.h — the ABI between a host module.so and the runtime, without
 * LLVM headers: included by targets/host/hostgen.h (the code generator) and
 * runtime/rt/wlower_rt.c (the loader). Details in hostgen.h's header comment
 * and docs/host-contracts.md "Module ABI".
 *
 * ABI 2 (ABI 1 had a void wl_module_run and no wl_module_info):
 *   - wl_module_run / wl_module_run_kernel return a status (WL_MODULE_OK, or
 *     WL_MODULE_EINDEX after reporting through api->index_error);
 *   - wl_module_info describes the module's io, workspace and weights, so the
 *     runtime checks manifest.json against the code that will run. */
#ifndef WLOWER_MODULE_ABI_H
#define WLOWER_MODULE_ABI_H

#include <stdint.h>

#define WL_MODULE_ABI 2

/* Run status of wl_module_run / wl_module_run_kernel. */
enum { WL_MODULE_OK = 0, WL_MODULE_EINDEX = 1 };

/* An index-consuming kernel (Gather, ...): constant data in module.so. The
 * layout has no padding (LLVM struct {ptr, ptr, ptr, ptr, i64, i32, i32}). */
typedef struct WlIndexSite {
	const char *tensor;         /* the indices tensor */
	const char *node;           /* the node's name */
	const char *op;             /* its op type */
	const int64_t *dims;        /* the indices tensor's shape (rank dims) */
	int64_t size;               /* the axis size: valid indices are [-size, size) */
	int32_t rank;
	int32_t flags;              /* INDEX_GRAPH_INPUT 1: a graph input; INDEX_NO_WRAP 2: valid
	                             * indices are [0, size), else [-size, size) (compiler/ir/ir.h) */
} WlIndexSite;

typedef struct WlHostApi {
	void *pool;
	int nthreads;
	/* Calls body(ctx, i0, i1) over [0, n) split into chunks across the pool;
	 * returns when all are done. Safe to call with n == 0. */
	void (*parallel_for)(void *pool, int64_t n, void (*body)(void *ctx, int64_t i0, int64_t i1), void *ctx);
	void *rt;                   /* the runtime's context for index_error */
	/* An index out of range: called once, from the kernel's thread, with the
	 * first bad index (flat position pos in site's tensor, its value); the
	 * kernel then returns WL_MODULE_EINDEX and wl_module_run returns it
	 * without running the other kernels. */
	void (*index_error)(void *rt, const WlIndexSite *site, int64_t pos, int64_t value);
} WlHostApi;

/* What the module was compiled for (wl_module_info): the runtime checks
 * manifest.json against it. Layouts without padding. */
typedef struct WlModuleIo {
	const char *name;
	const int64_t *dims;        /* rank dims */
	int32_t dtype;              /* ONNX TensorProto number (WL_DTYPE_* of wlower_rt.h) */
	int32_t rank;
} WlModuleIo;

typedef struct WlModuleInfo {
	int32_t abi;                /* WL_MODULE_ABI */
	int32_t ninputs, noutputs;
	int32_t reserved;
	const WlModuleIo *io;       /* ninputs inputs, then noutputs outputs (io[] order) */
	uint64_t workspace_bytes;   /* the workspace the code addresses */
	uint64_t weights_bytes;     /* the size of weights.bin the code reads */
} WlModuleInfo;

/* The symbols module.so exports (the generator defines them, the runtime
 * looks them up with dlsym). */
typedef int32_t (*WlModuleAbiFn)(void);                                   /* wl_module_abi */
typedef const WlModuleInfo *(*WlModuleInfoFn)(void);                      /* wl_module_info */
typedef int32_t (*WlModuleRunFn)(const WlHostApi *api, void *const *io,   /* wl_module_run */
                                 const uint8_t *weights, uint8_t *workspace);
typedef int32_t (*WlModuleKernelCountFn)(void);                           /* wl_module_kernel_count */
typedef const char *(*WlModuleKernelNameFn)(int32_t i);                   /* wl_module_kernel_name */
typedef int32_t (*WlModuleRunKernelFn)(const WlHostApi *api, int32_t i,   /* wl_module_run_kernel */
                                       void *const *io, const uint8_t *weights, uint8_t *workspace);

#endif
