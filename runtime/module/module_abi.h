/* module_abi.h — the ABI between a host module.so and the runtime, without
 * LLVM headers: included by targets/host/hostgen.h (the code generator) and
 * runtime/rt/wlower_rt.c (the loader). Details in hostgen.h's header comment. */
#ifndef WLOWER_MODULE_ABI_H
#define WLOWER_MODULE_ABI_H

#include <stdint.h>

#define WL_MODULE_ABI 1

typedef struct WlHostApi {
	void *pool;
	int nthreads;
	/* Calls body(ctx, i0, i1) over [0, n) split into chunks across the pool;
	 * returns when all are done. Safe to call with n == 0. */
	void (*parallel_for)(void *pool, int64_t n, void (*body)(void *ctx, int64_t i0, int64_t i1), void *ctx);
} WlHostApi;

/* The symbols module.so exports (the generator defines them, the runtime
 * looks them up with dlsym). */
typedef int32_t (*WlModuleAbiFn)(void);                                   /* wl_module_abi */
typedef void (*WlModuleRunFn)(const WlHostApi *api, void *const *io,      /* wl_module_run */
                              const uint8_t *weights, uint8_t *workspace);
typedef int32_t (*WlModuleKernelCountFn)(void);                           /* wl_module_kernel_count */
typedef const char *(*WlModuleKernelNameFn)(int32_t i);                   /* wl_module_kernel_name */
typedef void (*WlModuleRunKernelFn)(const WlHostApi *api, int32_t i,      /* wl_module_run_kernel */
                                    void *const *io, const uint8_t *weights, uint8_t *workspace);

#endif
