/* fixture_module.c — a hand-written host module (the ABI of
 * targets/host/hostgen.h) for tests/host/test_run_dir.py: input x
 * float32[2,3]; outputs y = x * w + b (float32[2,3]) and "s:sum" = sum(y)
 * (float32[1]); weights.bin = w (6 floats) at offset 0, b (1 float) at 64;
 * 64 bytes of workspace. Two kernels, with the optional per-kernel entry
 * points of the profiling proposal. Buffers that are not 64-byte aligned make
 * the outputs NaN (the runtime must align them). Compile with -DABI=3 for a
 * module of a wrong ABI version. ABI 2: wl_module_info describes the io
 * above; the runtime checks the manifest against it. x[0] == 99 is "an index
 * out of range" (x as indices into a 6-row axis): the run fails through
 * api->index_error, as a generated Gather does. */
#include <stdint.h>
#include <math.h>

#ifndef ABI
#define ABI 2
#endif

typedef struct WlHostApi {
	void *pool;
	int nthreads;
	void (*parallel_for)(void *pool, int64_t n, void (*body)(void *ctx, int64_t i0, int64_t i1), void *ctx);
	void *rt;
	void (*index_error)(void *rt, const struct WlIndexSite *site, int64_t pos, int64_t value);
} WlHostApi;

typedef struct WlIndexSite {
	const char *tensor, *node, *op;
	const int64_t *dims;
	int64_t size;
	int32_t rank, flags;
} WlIndexSite;

typedef struct WlModuleIo { const char *name; const int64_t *dims; int32_t dtype, rank; } WlModuleIo;
typedef struct WlModuleInfo {
	int32_t abi, ninputs, noutputs, reserved;
	const WlModuleIo *io;
	uint64_t workspace_bytes, weights_bytes;
} WlModuleInfo;

static const int64_t d23[2] = {2, 3}, d1[1] = {1};
static const WlModuleIo ios[3] = {{"x", d23, 1, 2}, {"y", d23, 1, 2}, {"s:sum", d1, 1, 1}};
static const WlModuleInfo info = {ABI, 1, 2, 0, ios, 64, 68};
static const WlIndexSite site = {"x", "fixture", "Gather", d23, 6, 2, 1};

const WlModuleInfo *wl_module_info(void) { return &info; }

typedef struct Ctx { const float *x, *w; float *t; } Ctx;

static void mul_body(void *c, int64_t i0, int64_t i1)
{
	Ctx *k = c;
	for (int64_t i = i0; i < i1; i++)
		k->t[i] = k->x[i] * k->w[i];
}

static int misaligned(const void *p) { return ((uintptr_t)p & 63) != 0; }

static int32_t kernel(const WlHostApi *api, int32_t i, void *const *io, const uint8_t *weights,
                      uint8_t *workspace)
{
	const float *x = io[0];
	float *y = io[1], *s = io[2];
	float *t = (float *)workspace;
	if (i == 0) {
		if (x[0] == 99) {
			api->index_error(api->rt, &site, 0, 99);
			return 1;
		}
		Ctx c = {x, (const float *)weights, t};
		api->parallel_for(api->pool, 6, mul_body, &c);
		return 0;
	}
	float b = *(const float *)(weights + 64), sum = 0;
	int bad = misaligned(x) || misaligned(y) || misaligned(s) || misaligned(weights) || misaligned(workspace)
	          || api->nthreads < 1;
	for (int k = 0; k < 6; k++) {
		y[k] = bad ? NAN : t[k] + b;
		sum += y[k];
	}
	s[0] = sum;
	return 0;
}

int32_t wl_module_abi(void) { return ABI; }

int32_t wl_module_run(const WlHostApi *api, void *const *io, const uint8_t *weights, uint8_t *workspace)
{
	int32_t st = kernel(api, 0, io, weights, workspace);
	return st ? st : kernel(api, 1, io, weights, workspace);
}

int32_t wl_module_kernel_count(void) { return 2; }

const char *wl_module_kernel_name(int32_t i)
{
	return i == 0 ? "mul0 (Mul)" : i == 1 ? "add1 (Add)" : 0;
}

int32_t wl_module_run_kernel(const WlHostApi *api, int32_t i, void *const *io, const uint8_t *weights,
                             uint8_t *workspace)
{
	return kernel(api, i, io, weights, workspace);
}
