/* sim.c — `wlower sim DIR` (the command line is compiler/driver/cmd_sim.c): build module.cpp against the CCL emulation,
 * run it bit-exactly, check its counters against schedule.json, and report
 * cycles from the cost model (docs/cost-model.md).
 *
 *   wlower sim DIR --input NAME=FILE.npy ... --output-dir OUT
 *                  [--compare NAME=REF.npy ...] [--quiet] [--cost-only] [--calibrate]
 *
 * Steps: manifest.json (files present with their sizes and sha256),
 * schedule.json; every --input read by the one .npy reader
 * (runtime/interp/npy.c) and checked against the manifest's dtype and shape
 * (NaN/Inf counted: one note per input), every --compare file read and its
 * name checked, the output file names checked for clashes, OUT checked for
 * being replaceable — all before anything is created or built. Then the
 * temporary OUT.tmp.XXXXXX (fileutil OutputDir); each input written there
 * as raw little-endian bytes of its dtype (.input<i>.raw, removed before
 * the commit: the runner only checks their size, it has no .npy parser);
 * build (build.c, cached); run `module_sim DIR --input NAME=RAW ...
 * --output-dir TMP --counters TMP/counters.json --progress` (posix_spawn;
 * its `progress I N` lines drive a bar on a terminal); counters vs the
 * schedule (MACs, ALU ops, DMA bytes per kernel); cost model; report
 * (report.c) on stdout, profile_core<i>.json and profile.svg; the rename of
 * TMP to OUT. A failure or a signal removes TMP.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "runtime/interp/interp.h"
#include "sim.h"

extern char **environ;

/* ---------------------------------------------------------------- schedule.json
 * Read and checked by runtime/module/schedule.c; here the cost model's view. */

static cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

_Static_assert((int)COST_MAX_CORES == (int)SCHEDULE_MAX_CORES, "a CostKernel holds every per_core entry");

void sim_schedule_free(SimSchedule *s)
{
	for (int i = 0; i < s->nk; i++) {
		free(s->k[i].name);
		free(s->k[i].op);
		free(s->k[i].cpp);
		free(s->k[i].split);
	}
	free(s->k);
	memset(s, 0, sizeof *s);
}

static char *dup_str(const char *s)
{
	char *p = strdup(s ? s : "");
	if (!p)
		wl_die(__FILE__, __LINE__, "out of memory");
	return p;
}

/* What the cost model reads of a kernel: its counts, the sums of its DMA and
 * of its activation buffers (role in/out). */
static void cost_kernel_of(const SchedKernel *sk, CostKernel *k)
{
	k->name = dup_str(sk->name);
	k->op = dup_str(sk->op);
	k->cpp = dup_str(sk->cpp);
	k->split = dup_str(sk->split);
	k->macs = sk->macs;
	k->alu_ops = sk->alu_ops;
	if (sk->has_tile) {
		k->tile_m = sk->tile.m, k->tile_n = sk->tile.n, k->tile_k = sk->tile.k;
		k->tile_count = sk->tile.count;
		k->double_buffered = sk->tile.double_buffered;
	}
	for (int b = 0; b < sk->nbuffers; b++) {
		const char *role = sk->buffers[b].role;
		if (role && (!strcmp(role, "in") || !strcmp(role, "out")))
			k->act_bytes += sk->buffers[b].bytes;
	}
	for (int j = 0; j < sk->ndma; j++) {
		if (sk->dma[j].dir == SCHED_DDR_TO_OCM)
			k->ddr_to_ocm += sk->dma[j].bytes;
		else if (sk->dma[j].dir == SCHED_OCM_TO_DDR)
			k->ocm_to_ddr += sk->dma[j].bytes;
	}
	k->ncores = sk->nper_core;
	for (int c = 0; c < sk->nper_core; c++)
		k->core[c] = sk->per_core[c];
}

int sim_schedule_read(const char *dir, SimSchedule *s, Diag *d)
{
	memset(s, 0, sizeof *s);
	Schedule sch;
	if (schedule_read(dir, &sch, d) != WL_OK)
		return WL_ERR;
	snprintf(s->target, sizeof s->target, "%s", sch.target);
	s->cfg = sch.config;
	s->ocm_peak = sch.ocm_peak_bytes;
	s->lrm_peak = sch.lrm_peak_bytes;
	s->ddr_bytes = sch.ddr_bytes;
	s->weights_bytes = sch.weights_bytes;
	s->nspills = sch.nspills;
	s->nk = sch.nkernels;
	s->k = calloc(s->nk > 0 ? (size_t)s->nk : 1, sizeof *s->k);
	if (!s->k)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < s->nk; i++)
		cost_kernel_of(&sch.kernels[i], &s->k[i]);
	schedule_free(&sch);
	return WL_OK;
}

/* ---------------------------------------------------------------- manifest files */

static int check_files(const char *dir, const cJSON *man, Diag *d)
{
	char mpath[4096];
	snprintf(mpath, sizeof mpath, "%s/manifest.json", dir);
	const cJSON *files = get(man, "files"), *e;
	if (!cJSON_IsArray(files))
		return diag_fail(d, "%s: missing 'files'", mpath);
	bool need_module = true, need_sched = true;
	cJSON_ArrayForEach(e, files) {
		const cJSON *n = get(e, "name"), *b = get(e, "bytes"), *h = get(e, "sha256");
		if (!cJSON_IsString(n) || !cJSON_IsNumber(b) || !cJSON_IsString(h))
			return diag_fail(d, "%s: files: entry without name/bytes/sha256", mpath);
		if (strchr(n->valuestring, '/') || !strcmp(n->valuestring, ".."))
			return diag_fail(d, "%s: files: '%s' is not a plain file name", mpath, n->valuestring);
		char path[8192];
		snprintf(path, sizeof path, "%s/%s", dir, n->valuestring);
		struct stat st;
		if (stat(path, &st) != 0)
			return diag_fail(d, "%s: listed in the manifest but missing: %s", path, strerror(errno));
		if ((double)st.st_size != b->valuedouble)
			return diag_fail(d, "%s: %lld bytes, the manifest says %.0f (the module folder was modified)",
			                 path, (long long)st.st_size, b->valuedouble);
		char hex[65];
		if (file_sha256_hex(path, hex, d) != WL_OK)
			return WL_ERR;
		if (strcmp(hex, h->valuestring))
			return diag_fail(d, "%s: sha256 differs from the manifest's (the module folder was modified)", path);
		if (!strcmp(n->valuestring, "module.cpp"))
			need_module = false;
		if (!strcmp(n->valuestring, "schedule.json"))
			need_sched = false;
	}
	if (need_module || need_sched)
		return diag_fail(d, "%s: 'files' does not list %s (not a Chimera module folder?)", mpath,
		                 need_module ? "module.cpp" : "schedule.json");
	return WL_OK;
}

/* The inputs of programs[0]: each given once, nothing unknown. */
static int check_inputs(const char *dir, const cJSON *man, const SimArgs *a, Diag *d)
{
	const cJSON *p = cJSON_GetArrayItem(get(man, "programs"), 0);
	const cJSON *ins = get(p, "inputs"), *e;
	char known[2048] = "";
	size_t kn = 0;
	cJSON_ArrayForEach(e, ins) {
		const cJSON *n = get(e, "name");
		if (!cJSON_IsString(n))
			continue;
		int w = snprintf(known + kn, sizeof known - kn, "%s%s", kn ? ", " : "", n->valuestring);
		if (w > 0 && kn + (size_t)w < sizeof known)
			kn += (size_t)w;
		bool given = false;
		for (int i = 0; i < a->nin; i++)
			given |= !strcmp(a->in[i].name, n->valuestring);
		if (!given)
			return diag_fail(d, "%s/manifest.json: input '%s' not given: add --input %s=FILE.npy", dir,
			                 n->valuestring, n->valuestring);
	}
	for (int i = 0; i < a->nin; i++) {
		bool found = false;
		cJSON_ArrayForEach(e, ins) {
			const cJSON *n = get(e, "name");
			found |= cJSON_IsString(n) && !strcmp(n->valuestring, a->in[i].name);
		}
		if (!found)
			return diag_fail(d, "%s/manifest.json: the module has no input '%s' (inputs: %s)", dir,
			                 a->in[i].name, known);
	}
	return WL_OK;
}

/* The manifest's IO entry named name in programs[0].<key>, or NULL. */
static const cJSON *io_entry(const cJSON *man, const char *key, const char *name)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, get(cJSON_GetArrayItem(get(man, "programs"), 0), key)) {
		const cJSON *n = get(e, "name");
		if (cJSON_IsString(n) && !strcmp(n->valuestring, name))
			return e;
	}
	return NULL;
}

/* "float32[1,8]" of a manifest IO entry. */
static const char *io_describe(const cJSON *e, char *buf, size_t n)
{
	const cJSON *dt = get(e, "dtype"), *x;
	size_t k = (size_t)snprintf(buf, n, "%s[", cJSON_IsString(dt) ? dt->valuestring : "?");
	int i = 0;
	cJSON_ArrayForEach(x, get(e, "shape"))
		if (k < n)
			k += (size_t)snprintf(buf + k, n - k, "%s%.0f", i++ ? "," : "", x->valuedouble);
	if (k < n)
		snprintf(buf + k, n - k, "]");
	return buf;
}

static bool io_shape_matches(const cJSON *e, const RTensor *t)
{
	const cJSON *sh = get(e, "shape");
	if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) != t->ndim)
		return false;
	for (int i = 0; i < t->ndim; i++) {
		const cJSON *x = cJSON_GetArrayItem(sh, i);
		if (!cJSON_IsNumber(x) || x->valuedouble != (double)t->dims[i])
			return false;
	}
	return true;
}

static bool io_matches(const cJSON *e, const RTensor *t)
{
	const cJSON *dt = get(e, "dtype");
	return cJSON_IsString(dt) && !strcmp(dt->valuestring, manifest_io_dtype(t->dtype)) && io_shape_matches(e, t);
}

/* Every --input through the one .npy reader, checked against the manifest;
 * one note per input holding NaN or Inf. */
static int load_inputs(const char *dir, const cJSON *man, const SimArgs *a, RTensor *ts, Diag *d)
{
	for (int i = 0; i < a->nin; i++) {
		const SimBind *b = &a->in[i];
		const cJSON *e = io_entry(man, "inputs", b->name);
		if (!e)
			return diag_fail(d, "%s/manifest.json: the module has no input '%s'", dir, b->name);
		if (npy_read(b->file, &ts[i], d) != WL_OK) {
			diag_prefix(d, "input '%s': ", b->name);
			return WL_ERR;
		}
		char got[256], want[256];
		if (!io_matches(e, &ts[i]))
			return diag_fail(d, "%s: input '%s' is %s, the module expects %s", b->file, b->name,
			                 rt_describe(&ts[i], got, sizeof got), io_describe(e, want, sizeof want));
		char note[512];
		if (rt_nonfinite_note(&ts[i], b->name, b->file, note, sizeof note))
			fprintf(stderr, "wlower sim: note: %s\n", note);
	}
	return WL_OK;
}

/* Every --compare: a module output, a readable .npy (compared after the run). */
static int load_compares(const char *dir, const cJSON *man, const SimArgs *a, RTensor *ts, Diag *d)
{
	for (int i = 0; i < a->ncmp; i++) {
		const SimBind *b = &a->cmp[i];
		const cJSON *e = io_entry(man, "outputs", b->name);
		if (!e)
			return diag_fail(d, "%s/manifest.json: --compare %s: the module has no output '%s'", dir, b->name,
			                 b->name);
		if (npy_read(b->file, &ts[i], d) != WL_OK) {
			diag_prefix(d, "--compare %s: ", b->name);
			return WL_ERR;
		}
		char got[256], want[256];
		if (!io_shape_matches(e, &ts[i]))
			return diag_fail(d, "%s: --compare %s: the reference is %s, the output is %s", b->file, b->name,
			                 rt_describe(&ts[i], got, sizeof got), io_describe(e, want, sizeof want));
	}
	return WL_OK;
}

/* OUT/<name>.npy with the output-name rule of the runner (ccl/runner.cpp:
 * '/' and ':' become '_'). */
static char *out_file(const char *dir, const char *name)
{
	size_t n = strlen(name), len = strlen(dir) + n + 8;
	char *p = malloc(len);
	if (!p)
		wl_die(__FILE__, __LINE__, "out of memory");
	int k = snprintf(p, len, "%s/", dir);
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		p[k++] = c == '/' || c == ':' ? '_' : c;
	}
	memcpy(p + k, ".npy", 5);
	return p;
}

/* Two outputs mapping to one file name: an error before any work. */
static int check_output_names(const cJSON *man, const char *outdir, Diag *d)
{
	const cJSON *outs = get(cJSON_GetArrayItem(get(man, "programs"), 0), "outputs");
	int n = cJSON_GetArraySize(outs), rc = WL_OK;
	char **paths = calloc((size_t)n + 1, sizeof *paths);
	if (!paths)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < n && rc == WL_OK; i++) {
		const cJSON *nm = get(cJSON_GetArrayItem(outs, i), "name");
		const char *name = cJSON_IsString(nm) ? nm->valuestring : "";
		paths[i] = out_file(outdir, name);
		for (int k = 0; k < i && rc == WL_OK; k++)
			if (!strcmp(paths[k], paths[i]))
				rc = diag_fail(d, "outputs '%s' and '%s' both map to the file %s",
				               get(cJSON_GetArrayItem(outs, k), "name")->valuestring, name, paths[i]);
	}
	for (int i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return rc;
}

/* TMP/.input<i>.raw: the input's bytes, as the runner reads them. */
static char *raw_input_path(const char *tmp, int i)
{
	size_t n = strlen(tmp) + 32;
	char *p = malloc(n);
	if (!p)
		wl_die(__FILE__, __LINE__, "out of memory");
	snprintf(p, n, "%s/.input%d.raw", tmp, i);
	return p;
}

static int write_raw_inputs(const char *tmp, const SimArgs *a, const RTensor *ts, Diag *d)
{
	for (int i = 0; i < a->nin; i++) {
		char *path = raw_input_path(tmp, i);
		AtomicFile af;
		int rc = atomic_open(&af, path, d);
		if (rc == WL_OK) {
			if (ts[i].nbytes && fwrite(ts[i].data, 1, ts[i].nbytes, af.f) != ts[i].nbytes) {
				int e = errno;
				atomic_abort(&af);
				rc = diag_fail(d, "%s: write failed: %s", path, strerror(e));
			} else {
				rc = atomic_commit(&af, d);
			}
		}
		free(path);
		if (rc != WL_OK)
			return WL_ERR;
	}
	return WL_OK;
}

static void remove_raw_inputs(const char *tmp, int n)
{
	for (int i = 0; i < n; i++) {
		char *path = raw_input_path(tmp, i);
		unlink(path);
		free(path);
	}
}

/* ---------------------------------------------------------------- running module_sim */

static void draw_bar(long i, long n)
{
	int w = 40, fill = n > 0 ? (int)(w * i / n) : w;
	char bar[64];
	for (int k = 0; k < w; k++)
		bar[k] = k < fill ? '#' : '.';
	bar[w] = 0;
	fprintf(stderr, "\rkernels [%s] %ld/%ld", bar, i, n);
	fflush(stderr);
}

/* Runs module_sim; its stderr is kept for the error message, its stdout
 * `progress I N` lines drive the bar. */
static int run_module(const char *exe, const SimArgs *a, const char *outdir, const char *counters, Diag *d)
{
	int nargv = 8 + 2 * a->nin;
	char **argv = calloc((size_t)nargv + 1, sizeof *argv), **ins = calloc((size_t)a->nin + 1, sizeof *ins);
	if (!argv || !ins)
		wl_die(__FILE__, __LINE__, "out of memory");
	int k = 0;
	argv[k++] = (char *)exe;
	argv[k++] = (char *)a->dir;
	for (int i = 0; i < a->nin; i++) {
		char *raw = raw_input_path(outdir, i);
		size_t n = strlen(a->in[i].name) + strlen(raw) + 2;
		ins[i] = malloc(n);
		if (!ins[i])
			wl_die(__FILE__, __LINE__, "out of memory");
		snprintf(ins[i], n, "%s=%s", a->in[i].name, raw);
		free(raw);
		argv[k++] = "--input";
		argv[k++] = ins[i];
	}
	argv[k++] = "--output-dir";
	argv[k++] = (char *)outdir;
	argv[k++] = "--counters";
	argv[k++] = (char *)counters;
	argv[k++] = "--progress";
	argv[k] = NULL;

	int po[2], pe[2];
	if (pipe(po) != 0 || pipe(pe) != 0)
		wl_die(__FILE__, __LINE__, "pipe: %s", strerror(errno));
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addclose(&fa, po[0]);
	posix_spawn_file_actions_addclose(&fa, pe[0]);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
	posix_spawn_file_actions_addclose(&fa, po[1]);
	posix_spawn_file_actions_addclose(&fa, pe[1]);
	posix_spawnattr_t sa;
	sim_spawnattr_init(&sa);
	pid_t pid;
	int rc = posix_spawn(&pid, exe, &fa, &sa, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&sa);
	if (rc == 0)
		tmp_child_add(pid);
	close(po[1]);
	close(pe[1]);
	for (int i = 0; i < a->nin; i++)
		free(ins[i]);
	free(ins);
	free(argv);
	if (rc != 0) {
		close(po[0]);
		close(pe[0]);
		return diag_fail(d, "%s: cannot run it: %s", exe, strerror(rc));
	}
	bool bar = !a->quiet && isatty(2), drawn = false;
	char line[512], err[1024] = "";
	size_t ln = 0, en = 0;
	struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
	int open_fds = 2;
	while (open_fds > 0) {
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int j = 0; j < 2; j++) {
			if (fds[j].fd < 0 || !(fds[j].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char buf[4096];
			ssize_t n = read(fds[j].fd, buf, sizeof buf);
			if (n <= 0) {
				if (n < 0 && errno == EINTR)
					continue;
				close(fds[j].fd);
				fds[j].fd = -1;
				open_fds--;
				continue;
			}
			for (ssize_t q = 0; q < n; q++) {
				char ch = buf[q];
				if (j == 1) {
					/* keep the first line of stderr */
					if (en + 1 < sizeof err && !strchr(err, '\n'))
						err[en++] = ch, err[en] = 0;
					continue;
				}
				if (ch != '\n') {
					if (ln + 1 < sizeof line)
						line[ln++] = ch;
					continue;
				}
				line[ln] = 0;
				ln = 0;
				long pi, pn;
				if (sscanf(line, "progress %ld %ld", &pi, &pn) == 2) {
					if (bar) {
						draw_bar(pi, pn);
						drawn = true;
					}
				}
			}
		}
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	tmp_child_remove(pid);
	if (drawn)
		fprintf(stderr, "\n");
	err[strcspn(err, "\n")] = 0;
	if (!WIFEXITED(st))
		return diag_fail(d, "%s: the simulated module crashed (signal %d)%s%s", a->dir,
		                 WIFSIGNALED(st) ? WTERMSIG(st) : 0, err[0] ? ": " : "", err);
	if (WEXITSTATUS(st) != 0)
		return diag_fail(d, "%s", err[0] ? err : "the simulated module failed");
	return WL_OK;
}

int sim_counters_check(const char *where, const SimSchedule *s, int i, uint64_t macs, uint64_t alu, uint64_t d2o,
                       uint64_t o2d, Diag *d)
{
	const CostKernel *sk = &s->k[i];
	const char *what = NULL;
	uint64_t got = 0, want = 0;
	if (macs != sk->macs)
		what = "MACs", got = macs, want = sk->macs;
	else if (alu != sk->alu_ops)
		what = "ALU ops", got = alu, want = sk->alu_ops;
	else if (d2o != sk->ddr_to_ocm)
		what = "DMA ddr_to_ocm bytes", got = d2o, want = sk->ddr_to_ocm;
	else if (o2d != sk->ocm_to_ddr)
		what = "DMA ocm_to_ddr bytes", got = o2d, want = sk->ocm_to_ddr;
	if (what)
		return diag_fail(d, "%s: kernel '%s' (%s): the run counted %llu %s, schedule.json says %llu "
		                 "(the emulation and the schedule disagree)", where, sk->name, sk->op,
		                 (unsigned long long)got, what, (unsigned long long)want);
	return WL_OK;
}

/* counters.json vs schedule.json, kernel by kernel. */
static int check_counters(const char *path, const SimSchedule *s, Diag *d)
{
	cJSON *r;
	if (json_read_file(path, &r, d) != WL_OK)
		return WL_ERR;
	int rc = WL_OK;
	const cJSON *ks = get(r, "kernels");
	if (!cJSON_IsArray(ks)) {
		rc = diag_fail(d, "%s: missing 'kernels'", path);
		goto out;
	}
	if (cJSON_GetArraySize(ks) != s->nk) {
		rc = diag_fail(d, "%s: %d kernels ran, schedule.json has %d", path, cJSON_GetArraySize(ks), s->nk);
		goto out;
	}
	for (int i = 0; i < s->nk && rc == WL_OK; i++) {
		const cJSON *k = cJSON_GetArrayItem(ks, i);
		const CostKernel *sk = &s->k[i];
		char where[300];
		snprintf(where, sizeof where, "kernel '%s'", sk->name);
		uint64_t macs, alu, d2o, o2d;
		if (json_u64(path, where, k, "macs", true, &macs, d) != WL_OK ||
		    json_u64(path, where, k, "alu_ops", true, &alu, d) != WL_OK ||
		    json_u64(path, where, k, "ddr_to_ocm", true, &d2o, d) != WL_OK ||
		    json_u64(path, where, k, "ocm_to_ddr", true, &o2d, d) != WL_OK) {
			rc = WL_ERR;
			break;
		}
		const cJSON *nm = get(k, "name");
		if (!cJSON_IsString(nm) || strcmp(nm->valuestring, sk->name))
			rc = diag_fail(d, "%s: kernel %d is '%s', schedule.json has '%s' (the emulation and the schedule disagree)",
			               path, i, cJSON_IsString(nm) ? nm->valuestring : "?", sk->name);
		else
			rc = sim_counters_check(path, s, i, macs, alu, d2o, o2d, d);
		/* fixed-point stores that clipped: a value beyond its calibrated format */
		const cJSON *sat = get(k, "saturated");
		if (rc == WL_OK && cJSON_IsNumber(sat) && sat->valuedouble > 0)
			fprintf(stderr, "wlower sim: note: kernel '%s' (%s): %.0f fixed-point stores saturated "
			        "(values beyond the calibrated range; calibrate on more samples)\n",
			        sk->name, sk->op, sat->valuedouble);
	}
out:
	cJSON_Delete(r);
	return rc;
}

static int compare_output(const char *outdir, const SimBind *b, const RTensor *ref, SimCompare *c, Diag *d)
{
	char *got_path = out_file(outdir, b->name);
	RTensor got = {0};
	int rc = WL_OK;
	if (access(got_path, R_OK) != 0)
		rc = diag_fail(d, "--compare %s: the module wrote no output '%s' (%s missing)", b->name, b->name, got_path);
	else if (npy_read(got_path, &got, d) != WL_OK)
		rc = WL_ERR;
	else {
		RtMetrics m;
		if (rt_metrics(ref, &got, &m, d) != WL_OK) {
			diag_prefix(d, "--compare %s: %s: ", b->name, b->file);
			rc = WL_ERR;
		} else {
			c->name = strdup(b->name);
			c->mse = m.rms * m.rms;
			c->psnr = m.psnr;
			c->max_abs = m.max_abs;
		}
	}
	rt_free(&got);
	free(got_path);
	return rc;
}

/* The vendor's profiles (docs/cost-model.md "Calibration"): its simulator on
 * the Whisper-tiny encoder (log-mel fused) and decoder prefill, QC-P, 4 cores,
 * 32 MB OCM, 16 MACs/PE, 128 GB/s, 1.7 GHz. A module is taken for one of
 * them when its configuration is that and its network MACs are within 1%. */
typedef struct VendorPoint {
	const char *name;
	double gmacs, total, cat[CAT_COUNT];
} VendorPoint;
static const VendorPoint vendor_points[] = {
	{"Whisper-tiny encoder", 18.9995, 43925705,
	 {[CAT_COMPUTE] = 19.679e6, [CAT_MAC] = 6.154e6, [CAT_DATA_ARRAY] = 3.478e6,
	  [CAT_DATA_OCM] = 11.834e6, [CAT_DATA_EXTERNAL] = 2.302e6}},
	{"Whisper-tiny decoder prefill", 1.90065, 4297756,
	 {[CAT_COMPUTE] = 1.907e6, [CAT_MAC] = 380016, [CAT_DATA_ARRAY] = 487555,
	  [CAT_DATA_OCM] = 1.145e6, [CAT_DATA_EXTERNAL] = 372422}},
};

static const VendorPoint *vendor_point_of(const SimSchedule *s)
{
	const ChimeraConfig *c = &s->cfg;
	if (strcmp(s->target, "qc-p") || c->cores != 4 || c->ocm_bytes != 32ull << 20 || c->macs_per_pe != 16 ||
	    fabs(c->ext_bw - 128e9) > 1 || fabs(c->clock_hz - 1.7e9) > 1)
		return NULL;
	double macs = 0;
	for (int i = 0; i < s->nk; i++)
		macs += (double)s->k[i].macs;
	for (size_t i = 0; i < sizeof vendor_points / sizeof vendor_points[0]; i++)
		if (fabs(macs / 1e9 / vendor_points[i].gmacs - 1) < 0.01)
			return &vendor_points[i];
	return NULL;
}

static void print_calibration(const SimSchedule *s)
{
	CostParams unit = {.k = {1, 1, 1, 1, 1}, .k_mac_attn = 1};
	CostResult r;
	cost_model(&s->cfg, &unit, s->k, s->nk, &r);
	const CostParams *p = &cost_default_params;
	printf("calibration: raw figures per kernel class (Σ over kernels of the slowest core, constants 1)\n");
	printf("  %-10s %7s %12s %12s %12s %12s %12s %12s\n", "class", "kernels", "alu/PEs", "mac", "data_array",
	       "data_ocm", "ext (DDR)", "activations");
	for (int c = 0; c < COST_CLASS_COUNT; c++)
		printf("  %-10s %7d %12.0f %12.0f %12.0f %12.0f %12.0f %12.0f\n", cost_class_names[c], r.class_kernels[c],
		       r.raw_class[c][CAT_COMPUTE], r.raw_class[c][CAT_MAC], r.raw_class[c][CAT_DATA_ARRAY],
		       r.raw_class[c][CAT_DATA_OCM], r.raw_class[c][CAT_DATA_EXTERNAL], r.raw_class_act[c]);
	cost_result_free(&r);
	printf("constants (v2, scripts/fit_cost_model.py): c_alu %g, c_launch %g, k_mac %g, k_mac_attn %g, "
	       "k_array %g, k_ocm %g, a_row %g\n", p->k[CAT_COMPUTE], p->launch, p->k[CAT_MAC], p->k_mac_attn,
	       p->k[CAT_DATA_ARRAY], p->k[CAT_DATA_OCM], p->act_ddr[COST_ROWWISE]);
	const VendorPoint *v = vendor_point_of(s);
	if (!v) {
		printf("no vendor profile for this module (vendor points: qc-p x4, 32 MB, 16 MACs/PE, 128 GB/s, "
		       "1.7 GHz; Whisper-tiny encoder 18.9995 GMACs, decoder prefill 1.90065 GMACs)\n");
		return;
	}
	CostResult r1, r2;
	cost_model(&s->cfg, &cost_v1_params, s->k, s->nk, &r1);
	cost_model(&s->cfg, p, s->k, s->nk, &r2);
	printf("residuals vs the vendor's %s (v1: one constant per category, encoder only; v2: the default)\n",
	       v->name);
	printf("  %-14s %14s %14s %8s %14s %8s\n", "category", "vendor", "v1", "v1 err", "v2", "v2 err");
	for (int t = 0; t <= CAT_COUNT; t++) {
		bool tot = t == CAT_COUNT;
		double vv = tot ? v->total : v->cat[t];
		double a = tot ? (double)r1.total_cycles : r1.module_cat[t];
		double b = tot ? (double)r2.total_cycles : r2.module_cat[t];
		printf("  %-14s %14.0f %14.0f %+7.1f%% %14.0f %+7.1f%%\n", tot ? "TotalCycles" : cost_category_names[t], vv,
		       a, 100 * (a / vv - 1), b, 100 * (b / vv - 1));
	}
	cost_result_free(&r1);
	cost_result_free(&r2);
}

/* The report on stdout (checked: a report that could not be written fails
 * the command before OUT is committed). */
static int print_all(const SimArgs *a, const cJSON *man, const SimSchedule *s, SimReport *rep, Diag *d)
{
	const cJSON *model = get(man, "model");
	const char *mname = cJSON_IsString(model) && *model->valuestring ? model->valuestring : a->dir;
	const char *slash = strrchr(mname, '/');
	rep->module = slash && slash[1] ? slash + 1 : mname;
	for (int i = 0; i < s->nk; i++) {
		rep->macs += s->k[i].macs;
		for (int c = 0; c < s->k[i].ncores; c++) {
			rep->ext_read += s->k[i].core[c].ext_read;
			rep->ext_write += s->k[i].core[c].ext_write;
		}
	}
	sim_print_report(stdout, rep);
	sim_print_bars(stdout, rep);
	if (a->calibrate)
		print_calibration(s);
	return stdout_check(d);
}

/* manifest.json against schedule.json (whose sha256 the manifest's files
 * list has just checked): the same target, hardware, kernel count, OCM peak,
 * and a weights.bin entry of the schedule's size. */
static int check_against_schedule(const char *dir, const cJSON *man, const SimSchedule *s, Diag *d)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/manifest.json", dir);
	const cJSON *tg = get(man, "target"), *hw = get(man, "hardware");
	if (!cJSON_IsString(tg) || strcmp(tg->valuestring, s->target) != 0)
		return diag_fail(d, "%s: target: not \"%s\", the target schedule.json was made for", path, s->target);
	cJSON *want = chimera_config_json(&s->cfg);
	const cJSON *w;
	int rc = WL_OK;
	cJSON_ArrayForEach(w, want) {
		const cJSON *g = get(hw, w->string);
		if (!cJSON_IsNumber(g) || g->valuedouble != w->valuedouble) {
			rc = diag_fail(d, "%s: hardware.%s: not %.17g, the value schedule.json was made for", path, w->string,
			               w->valuedouble);
			break;
		}
	}
	cJSON_Delete(want);
	if (rc != WL_OK)
		return rc;
	const cJSON *prog = cJSON_GetArrayItem(get(man, "programs"), 0);
	const cJSON *nk = get(prog, "kernels"), *op = get(prog, "ocm_peak_bytes");
	if (!cJSON_IsNumber(nk) || nk->valuedouble != s->nk)
		return diag_fail(d, "%s: programs[0].kernels: not %d, the kernels of schedule.json", path, s->nk);
	if (!cJSON_IsNumber(op) || op->valuedouble != (double)s->ocm_peak)
		return diag_fail(d, "%s: programs[0].ocm_peak_bytes: not %llu, schedule.json's OCM peak", path,
		                 (unsigned long long)s->ocm_peak);
	const cJSON *f;
	cJSON_ArrayForEach(f, get(man, "files")) {
		const cJSON *nm = get(f, "name"), *b = get(f, "bytes");
		if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "weights.bin")) {
			if (!cJSON_IsNumber(b) || b->valuedouble != (double)s->weights_bytes)
				return diag_fail(d, "%s: files: weights.bin is not %llu bytes, schedule.json's weights", path,
				                 (unsigned long long)s->weights_bytes);
			return WL_OK;
		}
	}
	return diag_fail(d, "%s: files: no weights.bin entry (the module reads one)", path);
}

int sim_module_check(const char *dir, cJSON **man, SimSchedule *s, Diag *d)
{
	if (manifest_read(dir, man, d) != WL_OK || check_files(dir, *man, d) != WL_OK ||
	    sim_schedule_read(dir, s, d) != WL_OK || check_against_schedule(dir, *man, s, d) != WL_OK)
		return WL_ERR;
	return WL_OK;
}

/* Everything read and checked before any work (see the top of the file). */
static int check_all(const SimArgs *a, cJSON **man, SimSchedule *s, RTensor *in, RTensor *ref, Diag *d)
{
	if (sim_module_check(a->dir, man, s, d) != WL_OK)
		return WL_ERR;
	if (a->cost_only)
		return WL_OK;
	if (check_inputs(a->dir, *man, a, d) != WL_OK || load_inputs(a->dir, *man, a, in, d) != WL_OK ||
	    load_compares(a->dir, *man, a, ref, d) != WL_OK || check_output_names(*man, a->outdir, d) != WL_OK)
		return WL_ERR;
	return WL_OK;
}

/* The module's own io table (module_sim --describe) against manifest.json:
 * the same inputs and outputs, names, dtypes and shapes, in order. */
int sim_module_io_check(const char *exe, const char *dir, const cJSON *man, Diag *d)
{
	int po[2];
	if (pipe(po) != 0)
		return diag_fail(d, "pipe: %s", strerror(errno));
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addclose(&fa, po[0]);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_addclose(&fa, po[1]);
	posix_spawnattr_t sa;
	sim_spawnattr_init(&sa);
	char *argv[] = {(char *)exe, "--describe", NULL};
	pid_t pid;
	int rc = posix_spawn(&pid, exe, &fa, &sa, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&sa);
	close(po[1]);
	if (rc != 0) {
		close(po[0]);
		return diag_fail(d, "%s: cannot run it: %s", exe, strerror(rc));
	}
	tmp_child_add(pid);
	char buf[65536];
	size_t n = 0;
	ssize_t r;
	while (n + 1 < sizeof buf && (r = read(po[0], buf + n, sizeof buf - 1 - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		n += (size_t)r;
	}
	buf[n] = 0;
	close(po[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	tmp_child_remove(pid);
	char path[4096], want[65536];
	snprintf(path, sizeof path, "%s/manifest.json", dir);
	size_t k = 0;
	for (int io = 0; io < 2; io++) {
		const cJSON *e;
		cJSON_ArrayForEach(e, get(cJSON_GetArrayItem(get(man, "programs"), 0), io ? "outputs" : "inputs")) {
			const cJSON *nm = get(e, "name"), *dt = get(e, "dtype"), *sh = get(e, "shape"), *x;
			k += (size_t)snprintf(want + k, sizeof want - k, "%s %s %s %d", io ? "out" : "in",
			                      cJSON_IsString(nm) ? nm->valuestring : "?", cJSON_IsString(dt) ? dt->valuestring : "?",
			                      cJSON_GetArraySize(sh));
			cJSON_ArrayForEach(x, sh)
				k += (size_t)snprintf(want + k, sizeof want - k, " %lld", (long long)x->valuedouble);
			k += (size_t)snprintf(want + k, sizeof want - k, "\n");
			if (k >= sizeof want)
				return diag_fail(d, "%s: too many inputs and outputs", path);
		}
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return diag_fail(d, "%s: the built module could not describe its inputs and outputs", exe);
	if (strcmp(buf, want) != 0) {
		/* name the first io that differs */
		const char *a = buf, *b = want;
		while (*a && *a == *b) {
			a++;
			b++;
		}
		while (b > want && b[-1] != '\n')
			b--;
		while (a > buf && a[-1] != '\n')
			a--;
		return diag_fail(d, "%s: programs[0]: '%.*s' is not what module.cpp was compiled for ('%.*s')", path,
		                 (int)strcspn(b, "\n"), b, (int)strcspn(a, "\n"), a);
	}
	return WL_OK;
}

/* Build, run, counters, comparisons: into od->tmp. */
static int simulate(const SimArgs *a, const cJSON *man, const SimSchedule *s, const OutputDir *od, const RTensor *in,
                    const RTensor *ref, SimCompare *cmp, Diag *d)
{
	size_t n = strlen(od->tmp) + 16;
	char *counters = malloc(n), *exe = NULL;
	if (!counters)
		wl_die(__FILE__, __LINE__, "out of memory");
	snprintf(counters, n, "%s/counters.json", od->tmp);
	int rc = WL_ERR;
	if (write_raw_inputs(od->tmp, a, in, d) != WL_OK || sim_build(a->dir, a->quiet, &exe, d) != WL_OK ||
	    sim_module_io_check(exe, a->dir, man, d) != WL_OK ||
	    run_module(exe, a, od->tmp, counters, d) != WL_OK || check_counters(counters, s, d) != WL_OK)
		goto out;
	remove_raw_inputs(od->tmp, a->nin);
	for (int i = 0; i < a->ncmp; i++)
		if (compare_output(od->tmp, &a->cmp[i], &ref[i], &cmp[i], d) != WL_OK)
			goto out;
	rc = WL_OK;
out:
	free(exe);
	free(counters);
	return rc;
}

/* The whole of `wlower sim` after its options: WL_OK or WL_ERR + Diag. */
int sim_run(const SimArgs *ap, Diag *dg)
{
	const SimArgs *a = ap;
	Diag d = {0};
	cJSON *man = NULL;
	SimSchedule s = {0};
	SimCompare *cmp = calloc((size_t)a->ncmp + 1, sizeof *cmp);
	RTensor *in = calloc((size_t)a->nin + 1, sizeof *in), *ref = calloc((size_t)a->ncmp + 1, sizeof *ref);
	if (!cmp || !in || !ref)
		wl_die(__FILE__, __LINE__, "out of memory");
	OutputDir od = {0};
	CostResult r = {0};
	bool have_r = false;
	int status = WL_ERR;
	if (check_all(a, &man, &s, in, ref, &d) != WL_OK || output_dir_begin(&od, a->outdir, &d) != WL_OK)
		goto fail;
	if (!a->cost_only && simulate(a, man, &s, &od, in, ref, cmp, &d) != WL_OK)
		goto fail;
	cost_model(&s.cfg, &cost_default_params, s.k, s.nk, &r);
	have_r = true;
	SimReport rep = {.dir = a->dir, .s = &s, .r = &r, .cmp = cmp, .ncmp = a->cost_only ? 0 : a->ncmp};
	if (print_all(a, man, &s, &rep, &d) != WL_OK || sim_write_profiles(od.tmp, &rep, &d) != WL_OK ||
	    output_dir_commit(&od, &d) != WL_OK)
		goto fail;
	status = WL_OK;
	goto done;
fail:
	fflush(stdout);
	output_dir_abort(&od, &d);
	*dg = d;
done:
	if (have_r)
		cost_result_free(&r);
	for (int i = 0; i < a->ncmp; i++) {
		free(cmp[i].name);
		rt_free(&ref[i]);
	}
	for (int i = 0; i < a->nin; i++)
		rt_free(&in[i]);
	free(cmp);
	free(in);
	free(ref);
	sim_schedule_free(&s);
	cJSON_Delete(man);
	return status;
}
