/* wlower_rt.c — the host module runtime (public interface: wlower_rt.h).
 *
 * wl_open reads DIR/manifest.json (runtime/module/manifest.c: manifest_read checks
 * format and version) and validates every key used here, dlopens
 * DIR/module.so (RTLD_LOCAL | RTLD_NOW) and checks its ABI, maps
 * DIR/weights.bin (size and sha256 checked against the manifest's "files"
 * entries, module.so's too, unless WL_OPEN_NO_VERIFY),
 * allocates the workspace and the output buffers (64-byte aligned) and
 * starts the thread pool (runtime/interp/threadpool.c). The manifest is
 * checked against what module.so says it was compiled for (wl_module_info:
 * io names, dtypes and shapes, workspace and weights bytes), so an edited
 * manifest is an error, never a buffer overrun. wl_run fills the io array
 * and calls wl_module_run: no allocation; a status other than
 * WL_MODULE_OK (an index out of range, reported through
 * WlHostApi.index_error) makes it return -1 with the message.
 *
 * Module ABI 2 (runtime/module/module_abi.h, shared with the generator):
 *   int32_t wl_module_abi(void);
 *   const WlModuleInfo *wl_module_info(void);
 *   int32_t wl_module_run(const WlHostApi *api, void *const *io,
 *                         const uint8_t *weights, uint8_t *workspace);
 * Optional, for WLOWER_PROFILE=1 (docs/host-contracts.md "Profiling"):
 *   int32_t wl_module_kernel_count(void);
 *   const char *wl_module_kernel_name(int32_t i);
 *   int32_t wl_module_run_kernel(const WlHostApi *api, int32_t i, void *const *io,
 *                                const uint8_t *weights, uint8_t *workspace);
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "runtime/rt/wlower_rt.h"
#include "runtime/interp/interp.h"
#include "runtime/module/module.h"
#include "runtime/module/module_abi.h"

typedef struct Port {
	WlTensorInfo info;
	char *name;
	const void *bound;          /* inputs: caller data */
	void *buf;                  /* outputs: runtime buffer; inputs: aligned staging copy (lazy) */
} Port;

struct WlModule {
	char *dir;
	Diag d;
	unsigned flags;             /* WL_OPEN_* */
	int nin, nout;
	Port *in, *out;
	void **io;                  /* nin + nout pointers */
	void *so;
	const WlModuleInfo *info;   /* what module.so was compiled for */
	WlModuleRunFn run;
	WlModuleRunKernelFn run_kernel;
	int nkernels;               /* > 0 when profiling */
	const char **kname;
	double *kms;
	long pruns;
	uint8_t *weights;
	size_t weights_len;
	bool weights_mapped;
	uint8_t *workspace;
	uint64_t workspace_bytes;
	ThreadPool *pool;
	WlHostApi api;
};

/* ---------------------------------------------------------------- helpers */

static void *xaligned(size_t n)
{
	size_t sz = (n + 63) / 64 * 64;
	void *p = aligned_alloc(64, sz ? sz : 64);
	if (!p)
		wl_die(__FILE__, __LINE__, "out of memory");
	memset(p, 0, sz ? sz : 64);
	return p;
}

static const struct { int dt; const char *name; int size; } DTYPES[] = {
	{WL_DTYPE_FLOAT32, "float32", 4}, {WL_DTYPE_FLOAT16, "float16", 2},
	{WL_DTYPE_INT64, "int64", 8},     {WL_DTYPE_INT32, "int32", 4},
	{WL_DTYPE_INT8, "int8", 1},       {WL_DTYPE_UINT8, "uint8", 1},
	{WL_DTYPE_BOOL, "bool", 1},
};

const char *wl_dtype_name(int dtype)
{
	for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
		if (DTYPES[i].dt == dtype)
			return DTYPES[i].name;
	return NULL;
}

static int dtype_size(int dtype)
{
	for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
		if (DTYPES[i].dt == dtype)
			return DTYPES[i].size;
	return 0;
}

/* "float32[1,80,3000]" */
static const char *describe(int dtype, int ndim, const int64_t *shape, char *buf, size_t n)
{
	const char *dn = wl_dtype_name(dtype);
	char tmp[32];
	if (!dn) {
		snprintf(tmp, sizeof tmp, "dtype#%d", dtype);
		dn = tmp;
	}
	size_t k = (size_t)snprintf(buf, n, "%s[", dn);
	for (int i = 0; i < ndim && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)shape[i]);
	if (k < n)
		snprintf(buf + k, n - k, "]");
	return buf;
}

static void reset_err(WlModule *m)
{
	m->d.set = 0;
	m->d.msg[0] = 0;
}

const char *wl_error(const WlModule *m)
{
	return m ? m->d.msg : "";
}

/* ---------------------------------------------------------------- manifest */

static bool json_uint(const cJSON *j, uint64_t *out)
{
	if (!cJSON_IsNumber(j))
		return false;
	double v = j->valuedouble;
	if (!(v >= 0) || v > 9007199254740992.0 || v != floor(v))
		return false;
	*out = (uint64_t)v;
	return true;
}

/* Reads IO entry j ("programs[0].inputs[i]") into p. */
static int read_port(const char *mpath, const char *where, int idx, const cJSON *j, Port *p, Diag *d)
{
	if (!cJSON_IsObject(j))
		return diag_fail(d, "%s: programs[0].%s[%d]: not an object", mpath, where, idx);
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "dtype");
	const cJSON *shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
	if (!cJSON_IsString(name) || !*name->valuestring)
		return diag_fail(d, "%s: programs[0].%s[%d]: missing 'name'", mpath, where, idx);
	if (!cJSON_IsString(dt))
		return diag_fail(d, "%s: programs[0].%s[%d] ('%s'): missing 'dtype'", mpath, where, idx,
		                 name->valuestring);
	int dtype = 0;
	for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
		if (!strcmp(DTYPES[i].name, dt->valuestring))
			dtype = DTYPES[i].dt;
	if (!dtype)
		return diag_fail(d, "%s: programs[0].%s[%d] ('%s'): unsupported 'dtype' \"%s\"", mpath, where, idx,
		                 name->valuestring, dt->valuestring);
	if (!cJSON_IsArray(shape))
		return diag_fail(d, "%s: programs[0].%s[%d] ('%s'): missing 'shape'", mpath, where, idx,
		                 name->valuestring);
	int nd = cJSON_GetArraySize(shape);
	if (nd > WL_MAX_DIMS)
		return diag_fail(d, "%s: programs[0].%s[%d] ('%s'): 'shape' has %d dims (at most %d)", mpath, where,
		                 idx, name->valuestring, nd, WL_MAX_DIMS);
	p->info.ndim = nd;
	p->info.dtype = dtype;
	unsigned __int128 bytes = (unsigned)dtype_size(dtype);
	for (int i = 0; i < nd; i++) {
		uint64_t v;
		if (!json_uint(cJSON_GetArrayItem(shape, i), &v) || v > ((uint64_t)1 << 40))
			return diag_fail(d, "%s: programs[0].%s[%d] ('%s'): shape[%d] is not a static non-negative integer",
			                 mpath, where, idx, name->valuestring, i);
		p->info.shape[i] = (int64_t)v;
		bytes *= v;
	}
	if (bytes > ((unsigned __int128)1 << 40))
		return diag_fail(d, "%s: programs[0].%s[%d] ('%s'): tensor too large", mpath, where, idx,
		                 name->valuestring);
	p->info.nbytes = (size_t)bytes;
	p->name = wl_xstrdup(name->valuestring);
	p->info.name = p->name;
	return WL_OK;
}

/* The manifest's "files" entry for name: its "bytes" and "sha256". */
/* A file of the module directory as the manifest lists it. */
typedef struct ModFile {
	char path[4096];        /* DIR/name */
	uint64_t bytes;         /* its "bytes" */
	char hex[65];           /* its "sha256" */
} ModFile;

static int file_entry(const WlModule *m, const char *mpath, const cJSON *root, const char *name, ModFile *mf,
                      Diag *d)
{
	snprintf(mf->path, sizeof mf->path, "%s/%s", m->dir, name);
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files");
	if (!cJSON_IsArray(files))
		return diag_fail(d, "%s: missing 'files'", mpath);
	int i = 0;
	const cJSON *f;
	cJSON_ArrayForEach(f, files) {
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(f, "name");
		if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) {
			if (!json_uint(cJSON_GetObjectItemCaseSensitive(f, "bytes"), &mf->bytes))
				return diag_fail(d, "%s: files[%d] ('%s'): 'bytes' is not a non-negative integer", mpath, i,
				                 name);
			const cJSON *h = cJSON_GetObjectItemCaseSensitive(f, "sha256");
			if (!cJSON_IsString(h) || strlen(h->valuestring) != 64 ||
			    strspn(h->valuestring, "0123456789abcdef") != 64)
				return diag_fail(d, "%s: files[%d] ('%s'): 'sha256' is not 64 lowercase hex digits", mpath, i,
				                 name);
			memcpy(mf->hex, h->valuestring, 65);
			return WL_OK;
		}
		i++;
	}
	return diag_fail(d, "%s: 'files' has no entry for '%s'", mpath, name);
}

/* hardware.features ("+avx512f,+fma,..." or ["avx512f", ...]): every enabled
 * feature this CPU lacks (among those that decide whether the code runs at
 * all) is an error, instead of SIGILL in the middle of a run. */
static bool cpu_has(const char *f, bool *known)
{
	__builtin_cpu_init();
	*known = true;
#define F(s) if (!strcmp(f, s)) return __builtin_cpu_supports(s);
	F("avx512f") F("avx512bw") F("avx512dq") F("avx512vl") F("avx512cd") F("avx512vnni")
	F("avx512bf16") F("avx512vbmi") F("avx512ifma") F("avx2") F("avx") F("fma") F("f16c")
	F("bmi") F("bmi2") F("sse4.2") F("sse4.1") F("ssse3") F("popcnt") F("avxvnni")
#undef F
	*known = false;
	return true;
}

static int check_feature(const char *mpath, const char *cpu, const char *f, size_t len, Diag *d)
{
	char name[64];
	if (len && f[0] == '-')
		return WL_OK;
	if (len && f[0] == '+') {
		f++;
		len--;
	}
	if (len == 0 || len >= sizeof name)
		return WL_OK;
	memcpy(name, f, len);
	name[len] = 0;
	bool known;
	if (!cpu_has(name, &known))
		return diag_fail(d, "%s: hardware.features: the module needs '%s', which this CPU lacks "
		                 "(compiled for cpu '%s'; recompile with --cpu native)", mpath, name, cpu);
	return WL_OK;
}

static int check_hardware(const char *mpath, const cJSON *root, Diag *d)
{
	const cJSON *hw = cJSON_GetObjectItemCaseSensitive(root, "hardware");
	if (!cJSON_IsObject(hw))
		return diag_fail(d, "%s: missing 'hardware'", mpath);
	const cJSON *cpu = cJSON_GetObjectItemCaseSensitive(hw, "cpu");
	if (cpu && !cJSON_IsString(cpu))
		return diag_fail(d, "%s: hardware.cpu: not a string", mpath);
	const char *cpus = cpu ? cpu->valuestring : "?";
	const cJSON *fe = cJSON_GetObjectItemCaseSensitive(hw, "features");
	if (!fe)
		return WL_OK;
	if (cJSON_IsString(fe)) {
		const char *s = fe->valuestring;
		while (*s) {
			size_t n = strcspn(s, ",");
			if (check_feature(mpath, cpus, s, n, d) != WL_OK)
				return WL_ERR;
			s += n;
			if (*s)
				s++;
		}
		return WL_OK;
	}
	if (cJSON_IsArray(fe)) {
		const cJSON *f;
		int i = 0;
		cJSON_ArrayForEach(f, fe) {
			if (!cJSON_IsString(f))
				return diag_fail(d, "%s: hardware.features[%d]: not a string", mpath, i);
			if (check_feature(mpath, cpus, f->valuestring, strlen(f->valuestring), d) != WL_OK)
				return WL_ERR;
			i++;
		}
		return WL_OK;
	}
	return diag_fail(d, "%s: hardware.features: not a string or an array", mpath);
}

/* ---------------------------------------------------------------- pool */

typedef struct PfCtx {
	void (*body)(void *ctx, int64_t i0, int64_t i1);
	void *ctx;
} PfCtx;

static void pf_tramp(void *ctx, int64_t b, int64_t e, int tid)
{
	(void)tid;
	PfCtx *c = ctx;
	c->body(c->ctx, b, e);
}

static void api_parallel_for(void *pool, int64_t n, void (*body)(void *ctx, int64_t i0, int64_t i1), void *ctx)
{
	if (n <= 0)
		return;
	PfCtx c = {body, ctx};
	parallel_for(pool, n, 1, pf_tramp, &c);
}

/* WlHostApi.index_error: the message every target gives (diag_index_range). */
static void api_index_error(void *rt, const WlIndexSite *s, int64_t pos, int64_t value)
{
	WlModule *m = rt;
	diag_index_range(&m->d, s->tensor, s->flags, s->node, s->op, s->rank, s->dims, pos, value, s->size);
}

/* ---------------------------------------------------------------- open */

/* The bytes of a module file against the manifest's sha256 (not with
 * WL_OPEN_NO_VERIFY): a same-size edit or a swapped file is an error, not a
 * wrong answer. */
static int verify_sha(const WlModule *m, const char *path, const char *mpath, const void *data, size_t len,
                      const char *want, Diag *d)
{
	if (m->flags & WL_OPEN_NO_VERIFY)
		return WL_OK;
	char hex[65];
	sha256_hex(data ? data : "", len, hex);
	if (strcmp(hex, want) != 0)
		return diag_fail(d, "%s: sha256 %.12s..., the manifest says %.12s... (%s): the module directory was "
		                 "modified; recompile it", path, hex, want, mpath);
	return WL_OK;
}

static int load_weights(WlModule *m, const char *mpath, const ModFile *f, Diag *d)
{
	struct stat st;
	int fd = file_open_regular(f->path, &st, d);    /* a FIFO must not block */
	if (fd < 0)
		return WL_ERR;
	if ((uint64_t)st.st_size != f->bytes) {
		close(fd);
		return diag_fail(d, "%s: %s: %lld bytes, the manifest says %llu (%s)", f->path,
		                 (uint64_t)st.st_size < f->bytes ? "truncated" : "wrong size", (long long)st.st_size,
		                 (unsigned long long)f->bytes, mpath);
	}
	m->weights_len = (size_t)st.st_size;
	if (m->weights_len == 0) {
		close(fd);
		m->weights = xaligned(64);
		return verify_sha(m, f->path, mpath, NULL, 0, f->hex, d);
	}
	void *p = mmap(NULL, m->weights_len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	int e = errno;
	close(fd);
	if (p == MAP_FAILED)
		return diag_fail(d, "%s: cannot map: %s", f->path, strerror(e));
	madvise(p, m->weights_len, MADV_WILLNEED);
	m->weights = p;
	m->weights_mapped = true;
	return verify_sha(m, f->path, mpath, p, m->weights_len, f->hex, d);
}

/* The ELF headers of module.so against its size, before dlopen (also with
 * WL_OPEN_NO_VERIFY): a truncated file whose manifest was edited to match
 * would otherwise make dlopen fault (SIGBUS) on a segment past the end. */
static int check_elf(const char *path, uint64_t size, Diag *d)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return diag_fail(d, "%s: cannot open: %s", path, strerror(errno));
	Elf64_Ehdr eh;
	int rc = WL_OK;
	if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr))
		rc = diag_fail(d, "%s: cannot load: not a 64-bit ELF shared object", path);
	else if (eh.e_phoff > size || (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > size - eh.e_phoff ||
	         (eh.e_shoff && (eh.e_shoff > size || (uint64_t)eh.e_shnum * eh.e_shentsize > size - eh.e_shoff)))
		rc = diag_fail(d, "%s: cannot load: truncated (its ELF headers reach past its %llu bytes)", path,
		               (unsigned long long)size);
	for (int i = 0; rc == WL_OK && i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * sizeof ph)) != (ssize_t)sizeof ph)
			rc = diag_fail(d, "%s: cannot load: cannot read program header %d", path, i);
		else if (ph.p_type == PT_LOAD && (ph.p_offset > size || ph.p_filesz > size - ph.p_offset))
			rc = diag_fail(d, "%s: cannot load: truncated (segment %d ends at byte %llu of %llu)", path, i,
			               (unsigned long long)(ph.p_offset + ph.p_filesz), (unsigned long long)size);
	}
	close(fd);
	return rc;
}

static int load_so(WlModule *m, const char *mpath, const ModFile *f, Diag *d)
{
	struct stat st;
	if (stat(f->path, &st) != 0)
		return diag_fail(d, "%s: cannot open: %s", f->path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return diag_fail(d, "%s: not a regular file", f->path);
	if ((uint64_t)st.st_size != f->bytes)
		return diag_fail(d, "%s: %lld bytes, the manifest says %llu (%s): module directory out of date",
		                 f->path, (long long)st.st_size, (unsigned long long)f->bytes, mpath);
	if (!(m->flags & WL_OPEN_NO_VERIFY)) {
		MappedFile so;
		if (file_map(f->path, &so, d) != WL_OK)
			return WL_ERR;
		int vr = verify_sha(m, f->path, mpath, so.addr, so.len, f->hex, d);
		file_unmap(&so);
		if (vr != WL_OK)
			return WL_ERR;
	}
	if (check_elf(f->path, (uint64_t)st.st_size, d) != WL_OK)
		return WL_ERR;
	/* dlopen searches the library path unless the name has a '/' */
	char abs[4096 + 2];
	snprintf(abs, sizeof abs, "%s%s", f->path[0] == '/' ? "" : "./", f->path);
	dlerror();
	m->so = dlopen(abs, RTLD_LOCAL | RTLD_NOW);
	if (!m->so) {
		const char *e = dlerror();
		char msg[512];
		if (!e)
			e = "unknown error";
		size_t al = strlen(abs);     /* glibc repeats the path: "PATH: file too short" */
		if (!strncmp(e, abs, al) && e[al] == ':' && e[al + 1] == ' ')
			e += al + 2;
		snprintf(msg, sizeof msg, "%s", e);
		for (char *c = msg; *c; c++)
			if (*c == '\n' || *c == '\r')
				*c = ' ';
		return diag_fail(d, "%s: cannot load: %s", f->path, msg);
	}
	WlModuleAbiFn abi = (WlModuleAbiFn)dlsym(m->so, "wl_module_abi");
	if (!abi)
		return diag_fail(d, "%s: not a wlower host module (no wl_module_abi)", f->path);
	int32_t v = abi();
	if (v != WL_MODULE_ABI)
		return diag_fail(d, "%s: module ABI %d, this runtime runs ABI %d (recompile the model)", f->path, (int)v,
		                 WL_MODULE_ABI);
	m->run = (WlModuleRunFn)dlsym(m->so, "wl_module_run");
	if (!m->run)
		return diag_fail(d, "%s: not a wlower host module (no wl_module_run)", f->path);
	WlModuleInfoFn info = (WlModuleInfoFn)dlsym(m->so, "wl_module_info");
	m->info = info ? info() : NULL;
	if (!m->info || m->info->abi != WL_MODULE_ABI || m->info->ninputs < 0 || m->info->noutputs < 0 ||
	    (m->info->ninputs + m->info->noutputs > 0 && !m->info->io))
		return diag_fail(d, "%s: not a wlower host module (no valid wl_module_info)", f->path);
	const char *prof = getenv("WLOWER_PROFILE");
	if (prof && *prof && strcmp(prof, "0") != 0) {
		WlModuleKernelCountFn kc = (WlModuleKernelCountFn)dlsym(m->so, "wl_module_kernel_count");
		WlModuleKernelNameFn kn = (WlModuleKernelNameFn)dlsym(m->so, "wl_module_kernel_name");
		WlModuleRunKernelFn rk = (WlModuleRunKernelFn)dlsym(m->so, "wl_module_run_kernel");
		int32_t k = kc ? kc() : 0;
		if (kn && rk && k > 0 && k < 1000000) {
			m->run_kernel = rk;
			m->nkernels = k;
			m->kname = calloc((size_t)k, sizeof *m->kname);
			m->kms = calloc((size_t)k, sizeof *m->kms);
			if (!m->kname || !m->kms)
				wl_die(__FILE__, __LINE__, "out of memory");
			for (int32_t i = 0; i < k; i++) {
				const char *s = kn(i);
				m->kname[i] = s ? s : "?";
			}
		}
	}
	return WL_OK;
}

/* "[1,80,3000]" */
static const char *dims_str(int ndim, const int64_t *shape, char *buf, size_t n)
{
	size_t k = (size_t)snprintf(buf, n, "[");
	for (int i = 0; i < ndim && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)shape[i]);
	if (k < n)
		snprintf(buf + k, n - k, "]");
	return buf;
}

/* Manifest io entry p ("programs[0].inputs[i]") against the module's own. */
static int check_port(const char *mpath, const char *where, int i, const Port *p, const WlModuleIo *io,
                      const ModFile *so, Diag *d)
{
	char want[256], got[256];
	if (!io->name || strcmp(io->name, p->name) != 0)
		return diag_fail(d, "%s: programs[0].%s[%d].name: '%s', but %s was compiled for '%s'", mpath, where, i,
		                 p->name, so->path, io->name ? io->name : "");
	if (io->dtype != p->info.dtype) {
		const char *dn = wl_dtype_name(io->dtype);
		return diag_fail(d, "%s: programs[0].%s[%d].dtype: \"%s\" ('%s'), but %s was compiled for %s", mpath,
		                 where, i, wl_dtype_name(p->info.dtype), p->name, so->path, dn ? dn : "another dtype");
	}
	bool valid = io->rank >= 0 && io->rank <= WL_MAX_DIMS && (io->rank == 0 || io->dims);
	bool same = valid && io->rank == p->info.ndim;
	for (int k = 0; same && k < io->rank; k++)
		same = io->dims[k] == p->info.shape[k];
	if (!same)
		return diag_fail(d, "%s: programs[0].%s[%d].shape: %s ('%s'), but %s was compiled for %s", mpath, where, i,
		                 dims_str(p->info.ndim, p->info.shape, want, sizeof want), p->name, so->path,
		                 valid ? dims_str(io->rank, io->dims, got, sizeof got) : "another shape");
	return WL_OK;
}

/* The manifest against wl_module_info: io, workspace_bytes, weights.bin's size. */
static int check_info(const WlModule *m, const char *mpath, uint64_t ws, const ModFile *so, Diag *d)
{
	const WlModuleInfo *in = m->info;
	if (in->ninputs != m->nin || in->noutputs != m->nout)
		return diag_fail(d, "%s: programs[0]: %d inputs and %d outputs, but %s was compiled for %d and %d", mpath,
		                 m->nin, m->nout, so->path, (int)in->ninputs, (int)in->noutputs);
	for (int i = 0; i < m->nin; i++)
		if (check_port(mpath, "inputs", i, &m->in[i], &in->io[i], so, d) != WL_OK)
			return WL_ERR;
	for (int i = 0; i < m->nout; i++)
		if (check_port(mpath, "outputs", i, &m->out[i], &in->io[m->nin + i], so, d) != WL_OK)
			return WL_ERR;
	if (ws != in->workspace_bytes)
		return diag_fail(d, "%s: programs[0].workspace_bytes: %llu, but %s was compiled for %llu", mpath,
		                 (unsigned long long)ws, so->path, (unsigned long long)in->workspace_bytes);
	if (m->weights_len != in->weights_bytes)
		return diag_fail(d, "%s: files: weights.bin has %llu bytes, but %s was compiled for %llu", mpath,
		                 (unsigned long long)m->weights_len, so->path, (unsigned long long)in->weights_bytes);
	return WL_OK;
}

static int open_module(WlModule *m, int threads, Diag *d)
{
	cJSON *root = NULL;
	char mpath[4200];
	snprintf(mpath, sizeof mpath, "%s/manifest.json", m->dir);
	struct stat st;
	if (stat(m->dir, &st) != 0)
		return diag_fail(d, "%s: cannot open: %s", m->dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return diag_fail(d, "%s: not a module directory", m->dir);
	if (manifest_read(m->dir, &root, d) != WL_OK)
		return WL_ERR;
	int rc = WL_ERR;
	const cJSON *tg = cJSON_GetObjectItemCaseSensitive(root, "target");
	if (!cJSON_IsString(tg)) {
		diag_fail(d, "%s: missing 'target'", mpath);
		goto out;
	}
	if (strcmp(tg->valuestring, "host") != 0) {
		diag_fail(d, "%s: target is \"%s\", not \"host\"%s", mpath, tg->valuestring,
		          strncmp(tg->valuestring, "qc-", 3) == 0 ? " (run it with 'wlower sim')" : "");
		goto out;
	}
	if (check_hardware(mpath, root, d) != WL_OK)
		goto out;
	const cJSON *prog = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "programs"), 0);
	if (!cJSON_IsObject(prog)) {
		diag_fail(d, "%s: programs[0]: not an object", mpath);
		goto out;
	}
	uint64_t abi, ws, mthreads = 0;
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(prog, "abi");
	if (!json_uint(j, &abi)) {
		diag_fail(d, "%s: programs[0].abi: missing or not a non-negative integer", mpath);
		goto out;
	}
	if (abi != WL_MODULE_ABI) {
		diag_fail(d, "%s: programs[0].abi: %llu, this runtime runs ABI %d (recompile the model)", mpath,
		          (unsigned long long)abi, WL_MODULE_ABI);
		goto out;
	}
	if (!json_uint(cJSON_GetObjectItemCaseSensitive(prog, "workspace_bytes"), &ws) || ws > ((uint64_t)1 << 40)) {
		diag_fail(d, "%s: programs[0].workspace_bytes: missing or not a non-negative integer", mpath);
		goto out;
	}
	j = cJSON_GetObjectItemCaseSensitive(prog, "threads");
	if (j && (!json_uint(j, &mthreads) || mthreads > 1024)) {
		diag_fail(d, "%s: programs[0].threads: not an integer in [0, 1024]", mpath);
		goto out;
	}
	const cJSON *ins = cJSON_GetObjectItemCaseSensitive(prog, "inputs");
	const cJSON *outs = cJSON_GetObjectItemCaseSensitive(prog, "outputs");
	if (!cJSON_IsArray(ins)) {
		diag_fail(d, "%s: programs[0].inputs: missing or not an array", mpath);
		goto out;
	}
	if (!cJSON_IsArray(outs) || cJSON_GetArraySize(outs) < 1) {
		diag_fail(d, "%s: programs[0].outputs: missing, empty or not an array", mpath);
		goto out;
	}
	m->nin = cJSON_GetArraySize(ins);
	m->nout = cJSON_GetArraySize(outs);
	m->in = calloc((size_t)m->nin + 1, sizeof *m->in);
	m->out = calloc((size_t)m->nout, sizeof *m->out);
	m->io = calloc((size_t)(m->nin + m->nout), sizeof *m->io);
	if (!m->in || !m->out || !m->io)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < m->nin; i++)
		if (read_port(mpath, "inputs", i, cJSON_GetArrayItem(ins, i), &m->in[i], d) != WL_OK)
			goto out;
	for (int i = 0; i < m->nout; i++)
		if (read_port(mpath, "outputs", i, cJSON_GetArrayItem(outs, i), &m->out[i], d) != WL_OK)
			goto out;
	for (int i = 0; i < m->nin + m->nout; i++)
		for (int k = 0; k < i; k++) {
			const char *a = i < m->nin ? m->in[i].name : m->out[i - m->nin].name;
			const char *b = k < m->nin ? m->in[k].name : m->out[k - m->nin].name;
			if (!strcmp(a, b)) {
				diag_fail(d, "%s: programs[0]: '%s' appears twice among inputs and outputs", mpath, a);
				goto out;
			}
		}
	ModFile weights, so;
	if (file_entry(m, mpath, root, "weights.bin", &weights, d) != WL_OK ||
	    load_weights(m, mpath, &weights, d) != WL_OK ||
	    file_entry(m, mpath, root, "module.so", &so, d) != WL_OK || load_so(m, mpath, &so, d) != WL_OK ||
	    check_info(m, mpath, ws, &so, d) != WL_OK)
		goto out;
	m->workspace_bytes = ws;
	m->workspace = xaligned((size_t)ws);
	for (int i = 0; i < m->nout; i++)
		m->out[i].buf = xaligned(m->out[i].info.nbytes);
	if (threads <= 0)
		threads = mthreads > 0 ? (int)mthreads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (threads < 1)
		threads = 1;
	m->pool = threadpool_shared(threads);
	m->api = (WlHostApi){.pool = m->pool, .nthreads = threadpool_threads(m->pool),
	                     .parallel_for = api_parallel_for, .rt = m, .index_error = api_index_error};
	rc = WL_OK;
out:
	cJSON_Delete(root);
	return rc;
}

WlModule *wl_open(const char *dir, int threads, char **err)
{
	return wl_open_flags(dir, threads, 0, err);
}

WlModule *wl_open_flags(const char *dir, int threads, unsigned flags, char **err)
{
	if (err)
		*err = NULL;
	WlModule *m = calloc(1, sizeof *m);
	if (!m)
		wl_die(__FILE__, __LINE__, "out of memory");
	m->flags = flags;
	/* "out/" and "out" name the same files */
	m->dir = wl_xstrdup(dir && *dir ? dir : ".");
	size_t n = strlen(m->dir);
	while (n > 1 && m->dir[n - 1] == '/')
		m->dir[--n] = 0;
	if (open_module(m, threads, &m->d) != WL_OK) {
		if (err)
			*err = wl_xstrdup(m->d.msg);
		wl_close(m);
		return NULL;
	}
	return m;
}

void wl_close(WlModule *m)
{
	if (!m)
		return;
	threadpool_free(m->pool);
	if (m->so)
		dlclose(m->so);
	if (m->weights_mapped)
		munmap(m->weights, m->weights_len);
	else
		free(m->weights);
	free(m->workspace);
	for (int i = 0; m->in && i < m->nin; i++) {
		free(m->in[i].name);
		free(m->in[i].buf);
	}
	for (int i = 0; m->out && i < m->nout; i++) {
		free(m->out[i].name);
		free(m->out[i].buf);
	}
	free(m->in);
	free(m->out);
	free(m->io);
	free(m->kname);
	free(m->kms);
	free(m->dir);
	free(m);
}

/* ---------------------------------------------------------------- io */

int wl_input_count(const WlModule *m) { return m->nin; }
int wl_output_count(const WlModule *m) { return m->nout; }

int wl_input_info(const WlModule *m, int i, WlTensorInfo *info)
{
	if (i < 0 || i >= m->nin) {
		diag_fail(&((WlModule *)m)->d, "%s: input index %d out of range (%d inputs)", m->dir, i, m->nin);
		return -1;
	}
	*info = m->in[i].info;
	return 0;
}

int wl_output_info(const WlModule *m, int i, WlTensorInfo *info)
{
	if (i < 0 || i >= m->nout) {
		diag_fail(&((WlModule *)m)->d, "%s: output index %d out of range (%d outputs)", m->dir, i, m->nout);
		return -1;
	}
	*info = m->out[i].info;
	return 0;
}

int wl_input_index(const WlModule *m, const char *name)
{
	for (int i = 0; name && i < m->nin; i++)
		if (!strcmp(m->in[i].name, name))
			return i;
	return -1;
}

int wl_output_index(const WlModule *m, const char *name)
{
	for (int i = 0; name && i < m->nout; i++)
		if (!strcmp(m->out[i].name, name))
			return i;
	return -1;
}

int wl_bind_input(WlModule *m, const char *name, const void *data, int dtype, int ndim, const int64_t *shape)
{
	reset_err(m);
	int i = wl_input_index(m, name);
	if (i < 0) {
		char list[512];
		size_t k = 0;
		list[0] = 0;
		for (int j = 0; j < m->nin && k + 1 < sizeof list; j++) {
			int w = snprintf(list + k, sizeof list - k, "%s%s", j ? ", " : "", m->in[j].name);
			if (w < 0)
				break;
			k += (size_t)w;
		}
		diag_fail(&m->d, "input '%s' is not an input of %s (inputs: %s)", name ? name : "(null)", m->dir,
		          m->nin ? list : "none");
		return -1;
	}
	Port *p = &m->in[i];
	bool same = dtype == p->info.dtype && ndim == p->info.ndim && (ndim == 0 || shape);
	for (int k = 0; same && k < ndim; k++)
		same = shape[k] == p->info.shape[k];
	if (!same) {
		char want[256], got[256];
		diag_fail(&m->d, "input '%s': expected %s, got %s", name,
		          describe(p->info.dtype, p->info.ndim, p->info.shape, want, sizeof want),
		          ndim >= 0 && ndim <= WL_MAX_DIMS && (ndim == 0 || shape)
		          ? describe(dtype, ndim, shape, got, sizeof got) : "a bad shape");
		return -1;
	}
	if (!data && p->info.nbytes) {
		diag_fail(&m->d, "input '%s': no data", name);
		return -1;
	}
	p->bound = data;
	if (((uintptr_t)data & 63) && !p->buf)
		p->buf = xaligned(p->info.nbytes);
	return 0;
}

int wl_run(WlModule *m)
{
	reset_err(m);
	for (int i = 0; i < m->nin; i++) {
		Port *p = &m->in[i];
		if (!p->bound && p->info.nbytes) {
			char ty[256];
			diag_fail(&m->d, "%s: input '%s' (%s) not bound", m->dir, p->name,
			          describe(p->info.dtype, p->info.ndim, p->info.shape, ty, sizeof ty));
			return -1;
		}
		if ((uintptr_t)p->bound & 63) {
			memcpy(p->buf, p->bound, p->info.nbytes);
			m->io[i] = p->buf;
		} else
			m->io[i] = (void *)p->bound;
	}
	for (int i = 0; i < m->nout; i++)
		m->io[m->nin + i] = m->out[i].buf;
	int32_t st = WL_MODULE_OK;
	if (m->run_kernel) {
		for (int k = 0; k < m->nkernels && st == WL_MODULE_OK; k++) {
			double t0 = wl_now_ms();
			st = m->run_kernel(&m->api, k, m->io, m->weights, m->workspace);
			m->kms[k] += wl_now_ms() - t0;
		}
		m->pruns++;
	} else
		st = m->run(&m->api, m->io, m->weights, m->workspace);
	if (st != WL_MODULE_OK) {
		diag_fail(&m->d, "%s/module.so: run failed (status %d)", m->dir, (int)st);  /* unless index_error said why */
		return -1;
	}
	return 0;
}

const void *wl_output(WlModule *m, int i, WlTensorInfo *info)
{
	reset_err(m);
	if (i < 0 || i >= m->nout) {
		diag_fail(&m->d, "%s: output index %d out of range (%d outputs)", m->dir, i, m->nout);
		return NULL;
	}
	if (info)
		*info = m->out[i].info;
	return m->out[i].buf;
}

/* ---------------------------------------------------------------- profile */

int wl_profile_count(const WlModule *m) { return m->run_kernel ? m->nkernels : 0; }
long wl_profile_runs(const WlModule *m) { return m->pruns; }

int wl_profile_kernel(const WlModule *m, int i, const char **name, double *total_ms)
{
	if (!m->run_kernel || i < 0 || i >= m->nkernels)
		return -1;
	if (name)
		*name = m->kname[i];
	if (total_ms)
		*total_ms = m->kms[i];
	return 0;
}

void wl_profile_reset(WlModule *m)
{
	for (int i = 0; m->kms && i < m->nkernels; i++)
		m->kms[i] = 0;
	m->pruns = 0;
}
