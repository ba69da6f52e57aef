/* build.c — `wlower sim`'s build step: g++ module.cpp + ccl/runner.cpp into
 * a cache keyed by the content hash of everything that decides the binary:
 *
 *   ccl key    = sha256(every CCL file's relative path and bytes, sorted by
 *                path; `g++ --version` output; the flags)
 *   module key = sha256(ccl key, module.cpp bytes)
 *   CACHE/runner-<ccl key>.o      runner.cpp compiled once per CCL version
 *   CACHE/<module key>/module_sim module.o linked with it
 *   CACHE = $XDG_CACHE_HOME/wlower/sim or ~/.cache/wlower/sim
 *
 * module.cpp and (when not cached) runner.cpp compile in parallel. A build
 * goes to CACHE/<key>.tmp.PID and is renamed into place, so a killed build
 * never leaves a half-written binary under its key. A failed build leaves
 * its log at CACHE/<key>.log (runner: CACHE/runner-<key>.log), named in the
 * one-line error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "sim.h"

extern char **environ;

#ifndef WLOWER_CCL_DIR
#define WLOWER_CCL_DIR "targets/chimera/ccl"
#endif

/* targets/chimera/ccl/API.md recommends these */
static const char *const gxx_flags[] = {"-std=c++17", "-O2", "-march=native", "-pthread", NULL};

const char *sim_ccl_dir(void)
{
	const char *e = getenv("WLOWER_CCL_DIR");
	return e && *e ? e : WLOWER_CCL_DIR;
}

/* A growable byte buffer for the hash input. */
typedef struct Buf { char *p; size_t n, cap; } Buf;

static void buf_add(Buf *b, const void *data, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t c = b->cap ? b->cap : 4096;
		while (c < b->n + n + 1)
			c *= 2;
		b->p = realloc(b->p, c);
		if (!b->p)
			wl_die(__FILE__, __LINE__, "out of memory");
		b->cap = c;
	}
	memcpy(b->p + b->n, data, n);
	b->n += n;
	b->p[b->n] = 0;
}

static void buf_str(Buf *b, const char *s) { buf_add(b, s, strlen(s) + 1); }

static int buf_file(Buf *b, const char *path, Diag *d)
{
	MappedFile f;
	if (file_map(path, &f, d) != WL_OK)
		return WL_ERR;
	char len[32];
	snprintf(len, sizeof len, "%zu", f.len);
	buf_str(b, len);
	if (f.len)
		buf_add(b, f.addr, f.len);
	if (f.addr)
		file_unmap(&f);
	return WL_OK;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file under root/rel (no hidden names), paths relative to
 * root, appended to the list; sorted by the caller. */
static void list_files(const char *root, const char *rel, char ***v, int *n, int *cap)
{
	char path[4096];
	snprintf(path, sizeof path, "%s%s%s", root, *rel ? "/" : "", rel);
	DIR *dh = opendir(path);
	if (!dh)
		return;
	struct dirent *e;
	while ((e = readdir(dh))) {
		if (e->d_name[0] == '.')
			continue;
		char sub[4096], full[8192];
		snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
		snprintf(full, sizeof full, "%s/%s", root, sub);
		struct stat st;
		if (stat(full, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			list_files(root, sub, v, n, cap);
		} else if (S_ISREG(st.st_mode)) {
			if (*n == *cap) {
				*cap = *cap ? *cap * 2 : 32;
				*v = realloc(*v, (size_t)*cap * sizeof **v);
				if (!*v)
					wl_die(__FILE__, __LINE__, "out of memory");
			}
			(*v)[(*n)++] = strdup(sub);
		}
	}
	closedir(dh);
}

void sim_spawnattr_init(posix_spawnattr_t *sa)
{
	sigset_t def, none;
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	sigemptyset(&none);
	posix_spawnattr_init(sa);
	posix_spawnattr_setsigdefault(sa, &def);
	posix_spawnattr_setsigmask(sa, &none);
	posix_spawnattr_setflags(sa, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
}

/* posix_spawnp with sim_spawnattr_init; the child is registered (killed
 * with wlower on a signal: tmp_child_add) until wait_child. */
static int spawn(pid_t *pid, char *const argv[], const posix_spawn_file_actions_t *fa)
{
	posix_spawnattr_t sa;
	sim_spawnattr_init(&sa);
	int rc = posix_spawnp(pid, argv[0], fa, &sa, argv, environ);
	posix_spawnattr_destroy(&sa);
	if (rc == 0)
		tmp_child_add(*pid);
	return rc;
}

/* Runs argv with stdout+stderr into `log` (a file path) or, when log is NULL,
 * captured into *out (malloc'ed). Returns the exit status, -1 if it could not
 * start (errno kept in *err). */
static int run_child(char *const argv[], const char *log, char **out, int *err)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	int pfd[2] = {-1, -1};
	if (log) {
		posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		posix_spawn_file_actions_adddup2(&fa, 1, 2);
	} else {
		if (pipe(pfd) != 0) {
			*err = errno;
			posix_spawn_file_actions_destroy(&fa);
			return -1;
		}
		posix_spawn_file_actions_addclose(&fa, pfd[0]);
		posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
		posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
		posix_spawn_file_actions_addclose(&fa, pfd[1]);
	}
	pid_t pid;
	int rc = spawn(&pid, argv, &fa);
	posix_spawn_file_actions_destroy(&fa);
	if (!log)
		close(pfd[1]);
	if (rc != 0) {
		*err = rc;
		if (!log)
			close(pfd[0]);
		return -1;
	}
	if (!log) {
		Buf b = {0};
		char tmp[4096];
		ssize_t k;
		buf_add(&b, "", 0);
		while ((k = read(pfd[0], tmp, sizeof tmp)) > 0 || (k < 0 && errno == EINTR))
			if (k > 0)
				buf_add(&b, tmp, (size_t)k);
		close(pfd[0]);
		*out = b.p;
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			*err = errno;
			tmp_child_remove(pid);
			return -1;
		}
	tmp_child_remove(pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Starts argv with stdout+stderr into the file `log`; the pid, or -1 (errno in *err). */
static pid_t spawn_logged(char *const argv[], const char *log, int *err)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	pid_t pid;
	int rc = spawn(&pid, argv, &fa);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		*err = rc;
		return -1;
	}
	return pid;
}

/* Exit status of pid (128 + signal when killed), -1 on a wait error. */
static int wait_child(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			tmp_child_remove(pid);
			return -1;
		}
	tmp_child_remove(pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* First line of the log mentioning "error" (or the first line), in buf. */
static void first_error(const char *log, char *buf, size_t n)
{
	buf[0] = 0;
	FILE *f = fopen(log, "r");
	if (!f)
		return;
	char line[1024], first[1024] = "";
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		if (!first[0])
			snprintf(first, sizeof first, "%s", line);
		if (strstr(line, "error")) {
			size_t k = strlen(line) < n - 1 ? strlen(line) : n - 1;
			memcpy(buf, line, k);
			buf[k] = 0;
			fclose(f);
			return;
		}
	}
	fclose(f);
	snprintf(buf, n, "%s", first);
}

static char *cache_root(void)
{
	const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	char path[4096];
	if (x && *x)
		snprintf(path, sizeof path, "%s/wlower/sim", x);
	else
		snprintf(path, sizeof path, "%s/.cache/wlower/sim", h && *h ? h : "/tmp");
	return strdup(path);
}

int sim_build(const char *dir, bool quiet, char **exe, Diag *d)
{
	const char *ccl = sim_ccl_dir();
	char module[4096], runner[4096];
	snprintf(module, sizeof module, "%s/module.cpp", dir);
	snprintf(runner, sizeof runner, "%s/runner.cpp", ccl);
	if (access(runner, R_OK) != 0)
		return diag_fail(d, "%s: the CCL runner is missing (set WLOWER_CCL_DIR to the ccl/ folder)", runner);

	/* the key */
	Buf b = {0};
	buf_str(&b, "wlower-sim-ccl-1");
	char **files = NULL;
	int nf = 0, cap = 0;
	list_files(ccl, "", &files, &nf, &cap);
	qsort(files, (size_t)nf, sizeof *files, cmp_str);
	int rc = WL_OK;
	for (int i = 0; i < nf; i++) {
		char p[8192];
		snprintf(p, sizeof p, "%s/%s", ccl, files[i]);
		buf_str(&b, files[i]);
		if (rc == WL_OK && buf_file(&b, p, d) != WL_OK)
			rc = WL_ERR;
		free(files[i]);
	}
	free(files);
	if (rc != WL_OK) {
		free(b.p);
		return WL_ERR;
	}
	char *ver = NULL;
	int err = 0;
	char *vargv[] = {"g++", "--version", NULL};
	int vs = run_child(vargv, NULL, &ver, &err);
	if (vs != 0) {
		free(ver);
		free(b.p);
		return diag_fail(d, "g++: cannot run it (%s); `wlower sim` needs g++ (C++17)",
		                 vs < 0 ? strerror(err) : "exit status not 0");
	}
	buf_str(&b, ver);
	free(ver);
	for (int i = 0; gxx_flags[i]; i++)
		buf_str(&b, gxx_flags[i]);
	char ccl_key[65], key[65];
	sha256_hex(b.p, b.n, ccl_key);
	free(b.p);
	b = (Buf){0};
	buf_str(&b, "wlower-sim-module-1");
	buf_str(&b, ccl_key);
	if (buf_file(&b, module, d) != WL_OK) {
		free(b.p);
		return WL_ERR;
	}
	sha256_hex(b.p, b.n, key);
	free(b.p);

	char *root = cache_root();
	char final_dir[4096], exe_path[4200];
	snprintf(final_dir, sizeof final_dir, "%s/%s", root, key);
	snprintf(exe_path, sizeof exe_path, "%s/module_sim", final_dir);
	if (access(exe_path, X_OK) == 0) {
		if (!quiet)
			fprintf(stderr, "building module (cached)\n");
		free(root);
		*exe = strdup(exe_path);
		return WL_OK;
	}
	if (mkdir_p(root, d) != WL_OK) {
		free(root);
		return WL_ERR;
	}
	char tmp_dir[4200], tmp_exe[4300], tmp_obj[4300], log[4300], link_log[4300];
	snprintf(tmp_dir, sizeof tmp_dir, "%s.tmp.%ld", final_dir, (long)getpid());
	snprintf(tmp_exe, sizeof tmp_exe, "%s/module_sim", tmp_dir);
	snprintf(tmp_obj, sizeof tmp_obj, "%s/module.o", tmp_dir);
	snprintf(log, sizeof log, "%s/g++.log", tmp_dir);
	snprintf(link_log, sizeof link_log, "%s/link.log", tmp_dir);
	/* the runner's object, shared by every module built with this CCL */
	char runner_obj[4300], runner_tmp[4400], runner_log[4300];
	snprintf(runner_obj, sizeof runner_obj, "%s/runner-%s.o", root, ccl_key);
	snprintf(runner_tmp, sizeof runner_tmp, "%s.tmp.%ld", runner_obj, (long)getpid());
	snprintf(runner_log, sizeof runner_log, "%s/runner-%s.log", root, ccl_key);
	remove_tree(tmp_dir);
	if (mkdir(tmp_dir, 0777) != 0) {
		int e = errno;
		free(root);
		return diag_fail(d, "%s: cannot create folder: %s", tmp_dir, strerror(e));
	}
	tmp_register(tmp_dir, true);
	tmp_register(runner_tmp, false);
	tmp_register(runner_log, false);        /* kept only when the build fails */
	bool tty = !quiet && isatty(2);
	if (tty) {
		fprintf(stderr, "building module ...");
		fflush(stderr);
	}
	char inc[4200];
	snprintf(inc, sizeof inc, "-I%s", ccl);
	char *argv[32], *rargv[32], *largv[32];
	int a = 0, ra = 0, la = 0;
	argv[a++] = rargv[ra++] = largv[la++] = "g++";
	for (int i = 0; gxx_flags[i]; i++)
		argv[a++] = rargv[ra++] = largv[la++] = (char *)gxx_flags[i];
	argv[a++] = rargv[ra++] = inc;
	argv[a++] = rargv[ra++] = "-c";
	argv[a++] = module;
	rargv[ra++] = runner;
	argv[a++] = rargv[ra++] = "-o";
	argv[a++] = tmp_obj;
	rargv[ra++] = runner_tmp;
	argv[a] = rargv[ra] = NULL;
	largv[la++] = tmp_obj;
	largv[la++] = runner_obj;
	largv[la++] = "-o";
	largv[la++] = tmp_exe;
	largv[la] = NULL;

	double t0 = (wl_now_ms() / 1e3);
	int rerr = 0;
	bool need_runner = access(runner_obj, R_OK) != 0;
	pid_t rpid = need_runner ? spawn_logged(rargv, runner_log, &rerr) : 0;
	pid_t mpid = spawn_logged(argv, log, &err);
	int rst = need_runner ? (rpid < 0 ? -1 : wait_child(rpid)) : 0;
	int st = mpid < 0 ? -1 : wait_child(mpid);
	if (need_runner && rst == 0 && rename(runner_tmp, runner_obj) != 0)
		rst = -1;
	if (need_runner && rst != 0)
		unlink(runner_tmp);
	else if (need_runner)
		unlink(runner_log);
	if (st == 0 && rst == 0) {
		pid_t lpid = spawn_logged(largv, link_log, &err);
		st = lpid < 0 ? -1 : wait_child(lpid);
	}
	double dt = (wl_now_ms() / 1e3) - t0;
	if (tty)
		fprintf(stderr, "\r");
	if (rst != 0 || st != 0) {
		char failed_log[4300], line[512];
		const char *which = st != 0 && access(tmp_obj, R_OK) != 0 ? log : rst != 0 ? runner_log : link_log;
		snprintf(failed_log, sizeof failed_log, "%s.log", final_dir);
		first_error(which, line, sizeof line);
		if (which == runner_log)
			snprintf(failed_log, sizeof failed_log, "%s", runner_log);
		else
			rename(which, failed_log);
		remove_tree(tmp_dir);
		tmp_unregister(tmp_dir);
		tmp_unregister(runner_tmp);
		tmp_unregister(runner_log);
		free(root);
		if (mpid < 0 || (need_runner && rpid < 0))
			return diag_fail(d, "g++: cannot run it: %s", strerror(mpid < 0 ? err : rerr));
		return diag_fail(d, "%s: g++ failed: %s; full log: %s",
		                 which == runner_log ? runner : module, line, failed_log);
	}
	unlink(tmp_obj);
	tmp_unregister(runner_tmp);
	tmp_unregister(runner_log);
	if (rename(tmp_dir, final_dir) != 0) {
		/* another build won the race: use its binary */
		remove_tree(tmp_dir);
		tmp_unregister(tmp_dir);
		if (access(exe_path, X_OK) != 0) {
			free(root);
			return diag_fail(d, "%s: cannot move the build into the cache", final_dir);
		}
	}
	tmp_unregister(tmp_dir);
	if (!quiet)
		fprintf(stderr, "building module: %.1f s\n", dt);
	free(root);
	*exe = strdup(exe_path);
	return WL_OK;
}
