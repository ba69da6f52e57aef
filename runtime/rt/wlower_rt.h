/* wlower_rt.h — run a compiled host module directory (`wlower MODEL --target
 * host -o DIR`) from C. Public header of libwlower_rt (pkg-config wlower-rt);
 * it depends on nothing but the C library.
 *
 *   char *err = NULL;
 *   WlModule *m = wl_open("out", 2, &err);        // NULL + one-line *err on failure
 *   if (!m) { fprintf(stderr, "%s\n", err); free(err); return 1; }
 *   wl_bind_input(m, "input_features", data, WL_DTYPE_FLOAT32, 3, (int64_t[]){1, 80, 3000});
 *   if (wl_run(m) != 0) fprintf(stderr, "%s\n", wl_error(m));
 *   WlTensorInfo info;
 *   const float *y = wl_output(m, wl_output_index(m, "last_hidden_state"), &info);
 *   wl_close(m);
 *
 * DIR holds manifest.json (format "wlower-module", version 1, target "host"),
 * module.so (the native code; ABI version 2) and weights.bin (mapped, never
 * copied). wl_open validates all of it (the manifest's io, workspace and
 * weights sizes against what module.so reports it was compiled for) and allocates everything run needs
 * (workspace, output buffers, the thread pool); wl_run allocates nothing.
 *
 * Errors are one line naming the file and the key or input concerned, e.g.
 * "out/manifest.json: programs[0].workspace_bytes: missing or not a
 * non-negative integer" or "input 'x': expected float32[1,80,3000], got
 * float32[1,80,200]". A handle is not thread-safe: one wl_run at a time.
 */
#ifndef WLOWER_RT_PUBLIC_H
#define WLOWER_RT_PUBLIC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types: the ONNX TensorProto numbers. */
enum {
	WL_DTYPE_FLOAT32 = 1,
	WL_DTYPE_UINT8 = 2,
	WL_DTYPE_INT8 = 3,
	WL_DTYPE_INT32 = 6,
	WL_DTYPE_INT64 = 7,
	WL_DTYPE_BOOL = 9,
	WL_DTYPE_FLOAT16 = 10,
};

enum { WL_MAX_DIMS = 8 };

typedef struct WlModule WlModule;

/* A graph input or output as the manifest declares it. Pointers stay valid
 * until wl_close. */
typedef struct WlTensorInfo {
	const char *name;
	int dtype;                  /* WL_DTYPE_* */
	int ndim;
	int64_t shape[WL_MAX_DIMS];
	size_t nbytes;              /* dense row-major size in bytes */
} WlTensorInfo;

/* Loads DIR. threads > 0: that many threads; 0: the manifest's "threads"
 * if set, else the online CPUs. Modules opened with the same thread count
 * share one pool of worker threads in the process (wl_run on two of them at
 * once from two threads is fine: the second runs its kernels on its own
 * thread instead of adding workers). On failure returns NULL and, if err is not
 * NULL, sets *err to a malloc'ed one-line message (free() it). */
WlModule *wl_open(const char *dir, int threads, char **err);
/* wl_open with flags: WL_OPEN_NO_VERIFY skips the sha256 check of module.so
 * and weights.bin against the manifest, for trusted deployments where
 * opening must be fast. Still checked: file sizes, module.so's ELF headers
 * against its size (no SIGBUS in dlopen on a truncated file), the manifest
 * against the module's own description. Not detected: a same-size edit of
 * either file (module.so is native code: load only one you trust). */
enum { WL_OPEN_NO_VERIFY = 1 };
WlModule *wl_open_flags(const char *dir, int threads, unsigned flags, char **err);
void wl_close(WlModule *m);

/* The last error of a call on m (empty string if none). */
const char *wl_error(const WlModule *m);

/* The module's input and output descriptions, in manifest order. info is
 * filled; returns 0, or -1 (and sets the error) if i is out of range. */
int wl_input_count(const WlModule *m);
int wl_input_info(const WlModule *m, int i, WlTensorInfo *info);
int wl_output_count(const WlModule *m);
int wl_output_info(const WlModule *m, int i, WlTensorInfo *info);
/* Index of the input/output called name, or -1. */
int wl_input_index(const WlModule *m, const char *name);
int wl_output_index(const WlModule *m, const char *name);

/* Binds input `name` to caller memory (dense, row-major): dtype and shape
 * must equal the manifest's. Copies nothing now: wl_run reads the data (so
 * it must stay valid until the wl_run calls that use it have returned; a
 * buffer that is not 64-byte aligned is copied into an aligned one by
 * wl_run). Returns 0 or -1 with a one-line error. */
int wl_bind_input(WlModule *m, const char *name, const void *data, int dtype, int ndim,
                  const int64_t *shape);

/* Runs the module on the bound inputs (every input must be bound). Returns 0
 * or -1 with a one-line error: an input not bound, or an index out of range
 * ("input 'ids' of node 'emb' (Gather): index 1000 at [0,3] out of range
 * [-1000, 1000)", the message of the reference executor and the Chimera
 * emulation too; the outputs are then undefined). Allocates nothing. With the environment
 * variable WLOWER_PROFILE=1 at wl_open and a module that exports per-kernel
 * entry points, each kernel is timed (wl_profile). */
int wl_run(WlModule *m);

/* Output i of the last wl_run (runtime-owned, 64-byte aligned, valid until
 * the next wl_run or wl_close); info (may be NULL) is filled. NULL and an
 * error if i is out of range. */
const void *wl_output(WlModule *m, int i, WlTensorInfo *info);

/* Per-kernel profile (WLOWER_PROFILE=1 at wl_open and a module with
 * per-kernel entry points): number of kernels (0 when not profiling), and
 * for kernel i its name and the total milliseconds over all wl_run calls
 * so far. wl_profile_reset zeroes the totals and the run count. */
int wl_profile_count(const WlModule *m);
int wl_profile_kernel(const WlModule *m, int i, const char **name, double *total_ms);
long wl_profile_runs(const WlModule *m);
void wl_profile_reset(WlModule *m);

/* "float32" ... for a WL_DTYPE_*; NULL if unknown. */
const char *wl_dtype_name(int dtype);

#ifdef __cplusplus
}
#endif

#endif
