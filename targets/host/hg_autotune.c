/* hg_autotune.c — the measured choice among a few MatMulNBits blockings
 * (docs/host-contracts.md "Micro-kernel model"), at compile time, for
 * --cpu native (off with --no-autotune).
 *
 * For one shape: the candidates' kernels (hg_mm_trial_kernel) go into one
 * LLVM module in a context of their own, O3, one object, `cc -shared` into a
 * temporary directory, dlopen; each runs on random data (packed 4-bit
 * weights, scales, offsets, A) over min(M, TUNE_ROWS) rows on the compiling
 * thread (parallel_for runs inline: blocking is a per-core question), one
 * warm-up, then rounds over all candidates in turn (noise from other
 * processes hits all of them alike), the minimum per candidate; at most
 * TUNE_ROUNDS rounds or TUNE_BUDGET_S seconds of runs. Ties within 3% go to
 * the earlier candidate (the model's choice is first).
 *
 * Cache: one line per (CPU model, vector width, M, K, N, block, residual):
 *   model \t vw (+ "bf16" for --host-precision bf16) \t M \t K \t N \t block \t res \t mr \t nv \t mc \t kc \t ms
 * appended (O_APPEND, one write) to $WLOWER_AUTOTUNE_CACHE, else
 * $XDG_CACHE_HOME/wlower/autotune.tsv, else ~/.cache/wlower/autotune.tsv; a
 * cached choice is used only if it is still among the candidates. A cache
 * that cannot be read or written is ignored (tuning then runs each time).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include "hostgen.h"

enum { TUNE_ROUNDS = 5, TUNE_MAX = 8, TUNE_ROWS = 384 };
#define TUNE_BUDGET_S 0.3

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void cache_path(char *p, size_t n)
{
	const char *e = getenv("WLOWER_AUTOTUNE_CACHE"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	if (e && *e)
		snprintf(p, n, "%s", e);
	else if (x && *x)
		snprintf(p, n, "%s/wlower/autotune.tsv", x);
	else if (h && *h)
		snprintf(p, n, "%s/.cache/wlower/autotune.tsv", h);
	else
		p[0] = 0;
}

static void key(char *k, size_t n, const HostGen *g, int64_t M, int64_t K, int64_t N, int64_t block, bool res)
{
	char model[128];
	snprintf(model, sizeof model, "%s", g->cpu->model);
	for (char *c = model; *c; c++)
		if (*c == '\t' || *c == '\n')
			*c = ' ';
	snprintf(k, n, "%s\t%d%s\t%lld\t%lld\t%lld\t%lld\t%d\t", model, g->vw, g->bf16 ? "bf16" : "", (long long)M, (long long)K, (long long)N,
	         (long long)block, res ? 1 : 0);
}

static bool cache_get(const char *path, const char *k, const HgBlocking *cand, int nc, HgBlocking *best)
{
	FILE *f = path[0] ? fopen(path, "r") : NULL;
	if (!f)
		return false;
	char line[512];
	bool found = false;
	size_t kl = strlen(k);
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, k, kl))
			continue;
		int mr, nv;
		long long mc, kc;
		double ms;
		if (sscanf(line + kl, "%d\t%d\t%lld\t%lld\t%lf", &mr, &nv, &mc, &kc, &ms) != 5)
			continue;
		for (int i = 0; i < nc; i++)
			if (cand[i].mr == mr && cand[i].nv == nv && cand[i].mc == mc && cand[i].kc == kc) {
				*best = cand[i];
				best->ms = ms;
				found = true;   /* the last matching line wins */
			}
	}
	fclose(f);
	return found;
}

static void cache_put(const char *path, const char *k, const HgBlocking *b)
{
	if (!path[0])
		return;
	char dir[4096];
	snprintf(dir, sizeof dir, "%s", path);
	for (char *s = dir + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			mkdir(dir, 0755);
			*s = '/';
		}
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0)
		return;
	char line[512];
	int n = snprintf(line, sizeof line, "%s%d\t%d\t%lld\t%lld\t%.4f\n", k, b->mr, b->nv, (long long)b->mc,
	                 (long long)b->kc, b->ms);
	if (n > 0 && n < (int)sizeof line && write(fd, line, (size_t)n) != n) {
		/* a partial line fails to parse later: ignored */
	}
	close(fd);
}

static void serial_for(void *pool, int64_t n, void (*body)(void *, int64_t, int64_t), void *ctx)
{
	(void)pool;
	if (n > 0)
		body(ctx, 0, n);
}

static void *alloc64(size_t n)
{
	void *p = aligned_alloc(64, (n + 63) / 64 * 64);
	if (p)
		memset(p, 0, n);
	return p;
}

static uint32_t rnd(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

typedef int32_t (*KernelFn)(const WlHostApi *api, void *const *args);

int hg_autotune_mm(HostGen *g, const Node *n, int64_t M, int64_t K, int64_t N, int64_t block, bool has_res,
                   const HgBlocking *cand, int nc, HgBlocking *best, Diag *d)
{
	*best = cand[0];
	if (nc > TUNE_MAX)
		nc = TUNE_MAX;
	char path[4096], k[512];
	cache_path(path, sizeof path);
	key(k, sizeof k, g, M, K, N, block, has_res);
	if (cache_get(path, k, cand, nc, best)) {
		best->how = "autotune";   /* measured, on an earlier compile: the same module bytes */
		return WL_OK;
	}
	/* rows timed: TUNE_ROWS (a few M blocks; the compile-time budget) */
	int64_t Mt = M < TUNE_ROWS ? M : TUNE_ROWS;

	/* ---- the trial kernels, in a context of their own */
	HostGen t = {0};
	t.tm = g->tm;
	t.m = g->m;
	t.opt = g->opt;
	t.vw = g->vw;
	t.avx512 = g->avx512;
	t.vnni = g->vnni;
	t.cpu = g->cpu;
	t.ctx = LLVMContextCreate();
	t.mod = LLVMModuleCreateWithNameInContext("wlower_tune", t.ctx);
	t.b = LLVMCreateBuilderInContext(t.ctx);
	hg_init_types(&t);
	char *triple = LLVMGetTargetMachineTriple(g->tm);
	LLVMSetTarget(t.mod, triple);
	LLVMDisposeMessage(triple);
	LLVMTargetDataRef td = LLVMCreateTargetDataLayout(g->tm);
	char *dl = LLVMCopyStringRepOfTargetData(td);
	LLVMSetDataLayout(t.mod, dl);
	LLVMDisposeMessage(dl);
	LLVMDisposeTargetData(td);
	for (int i = 0; i < nc; i++) {
		char name[32];
		snprintf(name, sizeof name, "wl_tune_%d", i);
		LLVMValueRef fn = LLVMAddFunction(t.mod, name, t.t_kernel);
		hg_set_fn_attrs(&t, fn);
		LLVMPositionBuilderAtEnd(t.b, LLVMAppendBasicBlockInContext(t.ctx, fn, "entry"));
		hg_mm_trial_kernel(&t, n, Mt, K, N, block, &cand[i], fn);
	}
	int rc = WL_ERR;
	char *err = NULL;
	char dir[] = "/tmp/wlower-tune-XXXXXX", obj[64], so[64];
	bool have_dir = false;
	void *h = NULL;
	void *buf[8] = {0};
	if (LLVMVerifyModule(t.mod, LLVMReturnStatusAction, &err))
		wl_die(__FILE__, __LINE__, "autotune produced invalid LLVM IR: %s", err);
	LLVMDisposeMessage(err);
	err = NULL;
	LLVMPassBuilderOptionsRef pbo = LLVMCreatePassBuilderOptions();
	LLVMErrorRef pe = LLVMRunPasses(t.mod, "default<O3>", g->tm, pbo);
	LLVMDisposePassBuilderOptions(pbo);
	if (pe) {
		char *msg = LLVMGetErrorMessage(pe);
		diag_fail(d, "autotune: LLVM optimization failed: %s", msg);
		LLVMDisposeErrorMessage(msg);
		goto done;
	}
	if (!mkdtemp(dir)) {
		diag_fail(d, "autotune: mkdtemp %s: %s", dir, strerror(errno));
		goto done;
	}
	have_dir = true;
	snprintf(obj, sizeof obj, "%s/t.o", dir);
	snprintf(so, sizeof so, "%s/t.so", dir);
	if (LLVMTargetMachineEmitToFile(g->tm, t.mod, obj, LLVMObjectFile, &err)) {
		diag_fail(d, "autotune: %s: %s", obj, err);
		LLVMDisposeMessage(err);
		goto done;
	}
	if (hg_run_cc(so, obj, d) != WL_OK)
		goto done;
	h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		diag_fail(d, "autotune: dlopen %s: %s", so, dlerror());
		goto done;
	}
	KernelFn kf[TUNE_MAX];
	for (int i = 0; i < nc; i++) {
		char name[32];
		snprintf(name, sizeof name, "wl_tune_%d", i);
		kf[i] = (KernelFn)(uintptr_t)dlsym(h, name);
		if (!kf[i]) {
			diag_fail(d, "autotune: %s: no %s", so, name);
			goto done;
		}
	}
	/* ---- data: the largest panel width among the candidates */
	int64_t nrmax = 0, kp = (K + 1) / 2, kb = (K + block - 1) / block;
	for (int i = 0; i < nc; i++)
		if ((int64_t)cand[i].nv * g->vw > nrmax)
			nrmax = (int64_t)cand[i].nv * g->vw;
	int64_t T = (N + nrmax - 1) / nrmax + 1, np = T * nrmax;   /* columns incl. padding, any NR */
	buf[0] = alloc64((size_t)(Mt * K) * 4);
	buf[1] = alloc64((size_t)(np * kp));
	buf[2] = alloc64((size_t)(np * kb) * 4);
	buf[3] = alloc64((size_t)(np * kb));   /* zero-point bytes (hg_mm_trial_kernel) */
	buf[4] = alloc64((size_t)(Mt * N) * 4);
	for (int i = 0; i < 5; i++)
		if (!buf[i]) {
			diag_fail(d, "autotune: out of memory");
			goto done;
		}
	uint32_t s = 12345;
	float *A = buf[0], *sc = buf[2];
	uint8_t *w = buf[1], *zp = buf[3];
	for (int64_t i = 0; i < Mt * K; i++)
		A[i] = (float)(rnd(&s) % 2001) * 1e-3f - 1.0f;
	for (int64_t i = 0; i < np * kp; i++)
		w[i] = (uint8_t)rnd(&s);
	for (int64_t i = 0; i < np * kb; i++) {
		sc[i] = 0.01f;
		zp[i] = 8;
	}
	void *args[16] = {0};
	args[0] = buf[0];
	args[1] = buf[1];
	args[2] = buf[2];
	args[3] = buf[3];
	if (n->ninputs >= 16) {
		diag_fail(d, "autotune: node '%s': %d inputs", n->name, n->ninputs);
		goto done;
	}
	args[n->ninputs] = buf[4];
	WlHostApi api = {.pool = NULL, .nthreads = 1, .parallel_for = serial_for};
	double tmin[TUNE_MAX];
	for (int i = 0; i < nc; i++) {
		kf[i](&api, args);   /* warm-up */
		tmin[i] = 1e30;
	}
	double t0 = now_s();
	for (int r = 0; r < TUNE_ROUNDS; r++) {
		for (int i = 0; i < nc; i++) {
			double a = now_s();
			kf[i](&api, args);
			double e = now_s() - a;
			if (e < tmin[i])
				tmin[i] = e;
		}
		if (r >= 1 && now_s() - t0 > TUNE_BUDGET_S)
			break;
	}
	int bi = 0;
	for (int i = 1; i < nc; i++)
		if (tmin[i] < tmin[bi] * 0.97)
			bi = i;
	*best = cand[bi];
	best->ms = tmin[bi] * 1e3;
	best->how = "autotune";
	if (getenv("WLOWER_AUTOTUNE_VERBOSE"))
		for (int i = 0; i < nc; i++)
			fprintf(stderr, "autotune %s %lldx%lldx%lld (%lld rows timed): mr %d nv %d mc %lld kc %lld: %.3f ms%s\n",
			        n->name, (long long)M, (long long)K, (long long)N, (long long)Mt, cand[i].mr, cand[i].nv,
			        (long long)cand[i].mc, (long long)cand[i].kc, tmin[i] * 1e3, i == bi ? " *" : "");
	cache_put(path, k, best);
	rc = WL_OK;
done:
	for (int i = 0; i < 8; i++)
		free(buf[i]);
	if (h)
		dlclose(h);
	if (have_dir) {
		unlink(obj);
		unlink(so);
		rmdir(dir);
	}
	LLVMDisposeBuilder(t.b);
	LLVMDisposeModule(t.mod);
	LLVMContextDispose(t.ctx);
	return rc;
}
