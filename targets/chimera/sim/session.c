/* session.c — a Chimera module folder run many times by one simulator
 * process: the pipelines' "qc" runner (runtime/pipelines/program.c) calls
 * it once per step, without rebuilding or restarting anything per step.
 *
 * Open: the checks of `wlower sim` (sim_module_check: manifest files with
 * sizes and sha256, schedule.json, the two against each other), the build
 * (build.c: g++, cached by content hash), the module's own io table against
 * the manifest (sim_module_io_check), the cost model once (cycles do not
 * depend on the inputs), then `module_sim DIR --serve` started with pipes
 * on its stdin, stdout and stderr (ccl/runner.cpp has the protocol).
 *
 * Run: every input's raw bytes to its stdin; from its stdout five uint64
 * counters per kernel (checked against schedule.json, as `wlower sim`
 * checks counters.json) and every output. A child that dies or replies
 * short: its first stderr line (or its signal) is the error. Close: stdin
 * closed, the child reaped (it exits 0 at a request boundary); a child that
 * does not is killed. The child is registered with tmp_child_add, so a
 * signal that stops wlower stops it too.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "sim.h"

extern char **environ;

struct SimSession {
	char *dir;
	SimSchedule s;
	CostResult cost;
	char *module;              /* manifest "model" base name */
	SimIo *io[2];              /* inputs, outputs */
	char **names[2];
	int n[2];
	void **out;                /* output buffers */
	uint64_t *cnt;             /* 5 per kernel */
	uint64_t saturated;
	char sat_kernel[160];
	pid_t pid;
	int fd_in, fd_out, fd_err;
	bool dead;
};

static cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static int io_dtype(const char *s)
{
	static const int dts[] = {DT_FLOAT, DT_FLOAT16, DT_INT64, DT_INT32, DT_INT8, DT_UINT8};
	for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++)
		if (!strcmp(s, manifest_io_dtype(dts[i])))
			return dts[i];
	return DT_UNDEFINED;
}

/* The io table of programs[0] (shapes checked by manifest_read). */
static int read_io(SimSession *ss, const cJSON *man, Diag *d)
{
	const cJSON *prog = cJSON_GetArrayItem(get(man, "programs"), 0);
	for (int k = 0; k < 2; k++) {
		const cJSON *list = get(prog, k ? "outputs" : "inputs"), *e;
		int n = cJSON_GetArraySize(list), i = 0;
		ss->io[k] = calloc((size_t)n + 1, sizeof *ss->io[k]);
		ss->names[k] = calloc((size_t)n + 1, sizeof *ss->names[k]);
		if (!ss->io[k] || !ss->names[k])
			wl_die(__FILE__, __LINE__, "out of memory");
		ss->n[k] = n;
		cJSON_ArrayForEach(e, list) {
			SimIo *io = &ss->io[k][i];
			const cJSON *nm = get(e, "name"), *dt = get(e, "dtype"), *sh = get(e, "shape"), *x;
			if (!(ss->names[k][i] = strdup(nm->valuestring)))
				wl_die(__FILE__, __LINE__, "out of memory");
			io->name = ss->names[k][i];
			io->dtype = io_dtype(dt->valuestring);
			if (io->dtype == DT_UNDEFINED)
				return diag_fail(d, "%s/manifest.json: %s '%s': dtype %s cannot be run by the simulator", ss->dir,
				                 k ? "output" : "input", io->name, dt->valuestring);
			size_t ne = 1;
			cJSON_ArrayForEach(x, sh) {
				io->dims[io->ndim++] = (int64_t)x->valuedouble;
				ne *= (size_t)x->valuedouble;
			}
			io->bytes = ne * (size_t)(dtype_bits(io->dtype) / 8);
			i++;
		}
	}
	ss->out = calloc((size_t)ss->n[1] + 1, sizeof *ss->out);
	if (!ss->out)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < ss->n[1]; i++)
		if (!(ss->out[i] = malloc(ss->io[1][i].bytes ? ss->io[1][i].bytes : 1)))
			wl_die(__FILE__, __LINE__, "out of memory");
	return WL_OK;
}

static int start(SimSession *ss, const char *exe, Diag *d)
{
	int pi[2], po[2], pe[2];
	if (pipe2(pi, O_CLOEXEC) != 0 || pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0)
		return diag_fail(d, "pipe: %s", strerror(errno));
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pi[0], 0);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
	posix_spawnattr_t sa;
	sim_spawnattr_init(&sa);
	char *argv[] = {(char *)exe, ss->dir, "--serve", NULL};
	int rc = posix_spawn(&ss->pid, exe, &fa, &sa, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&sa);
	close(pi[0]);
	close(po[1]);
	close(pe[1]);
	ss->fd_in = pi[1], ss->fd_out = po[0], ss->fd_err = pe[0];
	if (rc != 0) {
		ss->pid = 0;
		return diag_fail(d, "%s: cannot run it: %s", exe, strerror(rc));
	}
	tmp_child_add(ss->pid);
	return WL_OK;
}

int sim_session_open(const char *dir, bool quiet, SimSession **out, Diag *d)
{
	SimSession *ss = calloc(1, sizeof *ss);
	if (!ss || !(ss->dir = strdup(dir)))
		wl_die(__FILE__, __LINE__, "out of memory");
	ss->fd_in = ss->fd_out = ss->fd_err = -1;
	cJSON *man = NULL;
	char *exe = NULL;
	int rc = sim_module_check(dir, &man, &ss->s, d);
	rc = rc ?: read_io(ss, man, d);
	rc = rc ?: sim_build(dir, quiet, &exe, d);
	rc = rc ?: sim_module_io_check(exe, dir, man, d);
	rc = rc ?: start(ss, exe, d);
	if (rc == WL_OK) {
		const cJSON *model = get(man, "model");
		const char *mname = cJSON_IsString(model) && *model->valuestring ? model->valuestring : dir;
		const char *slash = strrchr(mname, '/');
		if (!(ss->module = strdup(slash && slash[1] ? slash + 1 : mname)))
			wl_die(__FILE__, __LINE__, "out of memory");
		cost_model(&ss->s.cfg, &cost_default_params, ss->s.k, ss->s.nk, &ss->cost);
		if (!(ss->cnt = calloc((size_t)ss->s.nk * 5 + 1, sizeof *ss->cnt)))
			wl_die(__FILE__, __LINE__, "out of memory");
	}
	free(exe);
	cJSON_Delete(man);
	if (rc != WL_OK) {
		sim_session_close(ss);
		return WL_ERR;
	}
	*out = ss;
	return WL_OK;
}

void sim_session_close(SimSession *ss)
{
	if (!ss)
		return;
	if (ss->fd_in >= 0)
		close(ss->fd_in);
	if (ss->pid > 0) {
		if (ss->dead)
			kill(ss->pid, SIGKILL);
		int st;
		while (waitpid(ss->pid, &st, 0) < 0 && errno == EINTR)
			;
		tmp_child_remove(ss->pid);
	}
	if (ss->fd_out >= 0)
		close(ss->fd_out);
	if (ss->fd_err >= 0)
		close(ss->fd_err);
	if (ss->cost.cyc)
		cost_result_free(&ss->cost);
	sim_schedule_free(&ss->s);
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < ss->n[k]; i++)
			free(ss->names[k][i]);
		free(ss->names[k]);
		free(ss->io[k]);
	}
	for (int i = 0; ss->out && i < ss->n[1]; i++)
		free(ss->out[i]);
	free(ss->out);
	free(ss->cnt);
	free(ss->module);
	free(ss->dir);
	free(ss);
}

int sim_session_count(const SimSession *ss, bool outputs) { return ss->n[outputs]; }
const SimIo *sim_session_io(const SimSession *ss, bool outputs, int i) { return &ss->io[outputs][i]; }
void *sim_session_output(SimSession *ss, int i) { return ss->out[i]; }
uint64_t sim_session_saturated(const SimSession *ss) { return ss->saturated; }
const char *sim_session_saturated_kernel(const SimSession *ss) { return ss->sat_kernel[0] ? ss->sat_kernel : NULL; }
const SimSchedule *sim_session_schedule(const SimSession *ss) { return &ss->s; }
const CostResult *sim_session_cost(const SimSession *ss) { return &ss->cost; }

void sim_session_report(const SimSession *ss, SimReport *rep)
{
	memset(rep, 0, sizeof *rep);
	rep->dir = ss->dir;
	rep->module = ss->module;
	rep->s = &ss->s;
	rep->r = &ss->cost;
	for (int i = 0; i < ss->s.nk; i++) {
		rep->macs += ss->s.k[i].macs;
		for (int c = 0; c < ss->s.k[i].ncores; c++) {
			rep->ext_read += ss->s.k[i].core[c].ext_read;
			rep->ext_write += ss->s.k[i].core[c].ext_write;
		}
	}
}

/* The child failed: its first stderr line, or how it ended. */
static int child_error(SimSession *ss, const char *what, Diag *d)
{
	ss->dead = true;
	close(ss->fd_in);
	ss->fd_in = -1;
	char err[1024];
	size_t n = 0;
	ssize_t k;
	while (n + 1 < sizeof err && ((k = read(ss->fd_err, err + n, sizeof err - 1 - n)) > 0 || (k < 0 && errno == EINTR)))
		if (k > 0)
			n += (size_t)k;
	err[n] = 0;
	err[strcspn(err, "\n")] = 0;
	int st = 0;
	pid_t r;
	while ((r = waitpid(ss->pid, &st, 0)) < 0 && errno == EINTR)
		;
	if (r == ss->pid) {
		tmp_child_remove(ss->pid);
		ss->pid = 0;
	}
	if (err[0])
		return diag_fail(d, "%s: %s", ss->dir, err);
	if (r > 0 && WIFSIGNALED(st))
		return diag_fail(d, "%s: the simulated module crashed (signal %d)", ss->dir, WTERMSIG(st));
	return diag_fail(d, "%s: the simulated module stopped (%s)", ss->dir, what);
}

static bool write_all(int fd, const void *p, size_t n)
{
	const char *b = p;
	while (n) {
		ssize_t k = write(fd, b, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;
		b += k;
		n -= (size_t)k;
	}
	return true;
}

static bool read_all(int fd, void *p, size_t n)
{
	char *b = p;
	while (n) {
		ssize_t k = read(fd, b, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;
		b += k;
		n -= (size_t)k;
	}
	return true;
}

int sim_session_run(SimSession *ss, const void *const *in, Diag *d)
{
	if (ss->dead)
		return diag_fail(d, "%s: the simulated module stopped earlier", ss->dir);
	for (int i = 0; i < ss->n[0]; i++)
		if (!write_all(ss->fd_in, in[i], ss->io[0][i].bytes))
			return child_error(ss, "writing its inputs", d);
	if (!read_all(ss->fd_out, ss->cnt, (size_t)ss->s.nk * 5 * sizeof *ss->cnt))
		return child_error(ss, "reading its counters", d);
	for (int i = 0; i < ss->n[1]; i++)
		if (!read_all(ss->fd_out, ss->out[i], ss->io[1][i].bytes))
			return child_error(ss, "reading its outputs", d);
	ss->saturated = 0;
	ss->sat_kernel[0] = 0;
	for (int k = 0; k < ss->s.nk; k++) {
		const uint64_t *q = &ss->cnt[(size_t)k * 5];
		if (sim_counters_check(ss->dir, &ss->s, k, q[0], q[1], q[2], q[3], d) != WL_OK)
			return WL_ERR;
		if (q[4] && !ss->saturated)
			snprintf(ss->sat_kernel, sizeof ss->sat_kernel, "%s (%s)", ss->s.k[k].name, ss->s.k[k].op);
		ss->saturated += q[4];
	}
	return WL_OK;
}
