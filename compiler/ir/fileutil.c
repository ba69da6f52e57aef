/* fileutil.c — whole-file mmap, atomic outputs (temporary + rename), SHA-256
 * (OpenSSL's libcrypto), path helpers. */
#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <openssl/evp.h>
#include "fileutil.h"

static const char *file_kind(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	return "not a plain file";
}

int file_open_regular(const char *path, struct stat *stp, Diag *d)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		diag_fail(d, "%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		diag_fail(d, "%s: cannot stat: %s", path, strerror(e));
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		diag_fail(d, "%s: not a regular file (%s)", path, file_kind(st.st_mode));
		return -1;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	if (stp)
		*stp = st;
	return fd;
}

int file_map(const char *path, MappedFile *mf, Diag *d)
{
	mf->addr = NULL;
	mf->len = 0;
	struct stat st;
	int fd = file_open_regular(path, &st, d);
	if (fd < 0)
		return WL_ERR;
	if (st.st_size == 0) {
		close(fd);
		return WL_OK;
	}
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	int e = errno;
	close(fd);
	if (p == MAP_FAILED)
		return diag_fail(d, "%s: cannot map: %s", path, strerror(e));
	/* Weights are read later, by whoever needs them; the importer touches
	 * only message headers. Without this hint, read-around (8 MB here) and
	 * large page-cache folios make import fault in most of a model. */
	madvise(p, (size_t)st.st_size, MADV_RANDOM);
	mf->addr = p;
	mf->len = (size_t)st.st_size;
	return WL_OK;
}

int atomic_open(AtomicFile *af, const char *path, Diag *d)
{
	memset(af, 0, sizeof *af);
	size_t n = strlen(path);
	af->path = strdup(path);
	af->tmp = malloc(n + 16);
	if (!af->path || !af->tmp)
		wl_die(__FILE__, __LINE__, "out of memory");
	snprintf(af->tmp, n + 16, "%s.tmp.XXXXXX", path);
	int fd = mkstemp(af->tmp);
	if (fd < 0) {
		int e = errno;
		free(af->path);
		free(af->tmp);
		af->path = af->tmp = NULL;
		return diag_fail(d, "%s: cannot create output: %s", path, strerror(e));
	}
	{ mode_t um = umask(0); umask(um); fchmod(fd, 0666 & ~um); } /* mkstemp makes 0600 */
	af->f = fdopen(fd, "wb");
	if (!af->f) {
		int e = errno;
		close(fd);
		unlink(af->tmp);
		free(af->path);
		free(af->tmp);
		af->path = af->tmp = NULL;
		return diag_fail(d, "%s: cannot open output: %s", path, strerror(e));
	}
	tmp_register(af->tmp, false);
	return WL_OK;
}

int atomic_commit(AtomicFile *af, Diag *d)
{
	int rc = WL_OK;
	if (ferror(af->f) || fflush(af->f) != 0 || fsync(fileno(af->f)) != 0)
		rc = diag_fail(d, "%s: write failed: %s", af->path, strerror(errno ? errno : EIO));
	if (fclose(af->f) != 0 && rc == WL_OK)
		rc = diag_fail(d, "%s: write failed: %s", af->path, strerror(errno));
	af->f = NULL;
	errno = 0;
	if (rc == WL_OK && rename(af->tmp, af->path) != 0)
		rc = diag_fail(d, "%s: cannot rename output into place: %s", af->path, strerror(errno));
	if (rc != WL_OK)
		unlink(af->tmp);
	tmp_unregister(af->tmp);
	free(af->tmp);
	free(af->path);
	af->tmp = af->path = NULL;
	return rc;
}

void atomic_abort(AtomicFile *af)
{
	if (af->f)
		fclose(af->f);
	if (af->tmp) {
		unlink(af->tmp);
		tmp_unregister(af->tmp);
	}
	free(af->tmp);
	free(af->path);
	memset(af, 0, sizeof *af);
}

int file_sha256_hex(const char *path, char out[65], Diag *d)
{
	MappedFile f;
	if (file_map(path, &f, d) != WL_OK)
		return WL_ERR;
	sha256_hex(f.addr ? f.addr : "", f.len, out);
	if (f.addr)
		file_unmap(&f);
	return WL_OK;
}

void sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32)
		wl_die(__FILE__, __LINE__, "SHA-256 failed");
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

char *path_dirname(const char *path)
{
	char *c = strdup(path ? path : ".");
	if (!c)
		wl_die(__FILE__, __LINE__, "out of memory");
	char *r = strdup(dirname(c));
	free(c);
	if (!r)
		wl_die(__FILE__, __LINE__, "out of memory");
	return r;
}

/* ---------------------------------------------------------------- outdir */

static int rm_tree_at(int dirfd, const char *name)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0);
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	DIR *dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return -1;
	}
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(dir)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			rc |= rm_tree_at(fd, e->d_name);
	closedir(dir);
	return rc | unlinkat(dirfd, name, AT_REMOVEDIR);
}

int remove_tree(const char *path)
{
	return rm_tree_at(AT_FDCWD, path);
}

int outdir_begin(const char *path, char **tmp, Diag *d)
{
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	char *t = malloc(n + 16);
	if (!t)
		return diag_fail(d, "%s: out of memory", path);
	memcpy(t, path, n);
	strcpy(t + n, ".tmp.XXXXXX");
	if (!mkdtemp(t)) {
		int e = errno;
		free(t);
		return diag_fail(d, "%s: cannot create output directory: %s", path, strerror(e));
	}
	tmp_register(t, true);
	*tmp = t;
	return WL_OK;
}

static bool dir_is_empty(const char *path)
{
	DIR *dir = opendir(path);
	if (!dir)
		return false;
	bool empty = true;
	struct dirent *e;
	while (empty && (e = readdir(dir)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(dir);
	return empty;
}

static int outdir_refuse(const char *path, OutdirCheck replaceable, const struct stat *st, Diag *d)
{
	char why[512] = "not a folder";
	if (!S_ISDIR(st->st_mode) ||
	    (!dir_is_empty(path) && !(replaceable && replaceable(path, why, sizeof why)))) {
		const char *what = replaceable == outdir_listed_replaceable ? "a folder of outputs made by wlower"
		                                                             : "a complete wlower module or pipeline directory";
		return diag_fail(d, "%s: exists and is not %s (%s); not replacing it", path, what,
		                 replaceable || !S_ISDIR(st->st_mode) ? why : "not empty");
	}
	return WL_OK;
}

int outdir_check(const char *path, OutdirCheck replaceable, Diag *d)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return WL_OK;
	return outdir_refuse(path, replaceable, &st, d);
}

int outdir_commit(const char *tmp, const char *path, OutdirCheck replaceable, Diag *d)
{
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (outdir_refuse(path, replaceable, &st, d) != WL_OK)
			return WL_ERR;
		if (remove_tree(path) != 0)
			return diag_fail(d, "%s: cannot remove the old module directory: %s", path, strerror(errno));
	}
	if (rename(tmp, path) != 0)
		return diag_fail(d, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
	tmp_unregister(tmp);
	return WL_OK;
}

void outdir_abort(const char *tmp)
{
	if (tmp) {
		remove_tree(tmp);
		tmp_unregister(tmp);
	}
}

void file_unmap(MappedFile *mf)
{
	if (mf->addr)
		munmap(mf->addr, mf->len);
	mf->addr = NULL;
	mf->len = 0;
}

/* mkdir -p */
int mkdir_p(const char *dir, Diag *d)
{
	char *p = strdup(dir);
	if (!p)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (char *s = p + 1;; s++) {
		if (*s == '/' || *s == 0) {
			char c = *s;
			*s = 0;
			if (mkdir(p, 0777) != 0 && errno != EEXIST) {
				int e = errno;
				free(p);
				return diag_fail(d, "%s: cannot create folder: %s", dir, strerror(e));
			}
			*s = c;
			if (!c)
				break;
		}
	}
	free(p);
	struct stat st;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return diag_fail(d, "%s: not a folder", dir);
	return WL_OK;
}


double wl_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

bool str_ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return n >= m && strcmp(s + n - m, suf) == 0;
}

/* ---------------------------------------------------------------- output lists */

static const char LIST_NAME[] = ".wlower-outputs";
static const char LIST_HEAD[] = "wlower-outputs 1";

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int outdir_list_write(const char *tmp, Diag *d)
{
	DIR *dir = opendir(tmp);
	if (!dir)
		return diag_fail(d, "%s: cannot list: %s", tmp, strerror(errno));
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(dir))) {
		struct stat st;
		if (e->d_name[0] == '.' || fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			names = realloc(names, cap * sizeof *names);
			if (!names)
				wl_die(__FILE__, __LINE__, "out of memory");
		}
		if (!(names[n++] = strdup(e->d_name)))
			wl_die(__FILE__, __LINE__, "out of memory");
	}
	closedir(dir);
	qsort(names, n, sizeof *names, cmp_name);
	size_t len = strlen(tmp) + sizeof LIST_NAME + 1;
	char *path = malloc(len);
	if (!path)
		wl_die(__FILE__, __LINE__, "out of memory");
	snprintf(path, len, "%s/%s", tmp, LIST_NAME);
	AtomicFile af;
	int rc = atomic_open(&af, path, d);
	if (rc == WL_OK) {
		fprintf(af.f, "%s\n", LIST_HEAD);
		for (size_t i = 0; i < n; i++)
			fprintf(af.f, "%s\n", names[i]);
		rc = atomic_commit(&af, d);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(path);
	return rc;
}

/* name is a line of the list text (after its first line) */
static bool list_has(const char *text, size_t len, const char *name)
{
	size_t nl = strlen(name);
	const char *p = memchr(text, '\n', len), *end = text + len;
	while (p && p + 1 < end) {
		p++;
		const char *q = memchr(p, '\n', (size_t)(end - p));
		if (!q)
			return false;
		if ((size_t)(q - p) == nl && memcmp(p, name, nl) == 0)
			return true;
		p = q;
	}
	return false;
}

bool outdir_listed_replaceable(const char *dir, char *why, size_t n)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, LIST_NAME);
	Diag d = {0};
	MappedFile mf;
	if (file_map(path, &mf, &d) != WL_OK) {
		snprintf(why, n, "it holds files and no %s", LIST_NAME);
		return false;
	}
	const char *text = mf.addr ? mf.addr : "";
	size_t hl = strlen(LIST_HEAD);
	bool ok = mf.len > hl && memcmp(text, LIST_HEAD, hl) == 0 && text[hl] == '\n';
	if (!ok)
		snprintf(why, n, "%s is not a wlower output list", path);
	DIR *dh = ok ? opendir(dir) : NULL;
	struct dirent *e;
	while (ok && dh && (e = readdir(dh))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, LIST_NAME))
			continue;
		struct stat st;
		if (fstatat(dirfd(dh), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
		    !list_has(text, mf.len, e->d_name)) {
			snprintf(why, n, "it holds '%s', which its %s does not list", e->d_name, LIST_NAME);
			ok = false;
		}
	}
	if (dh)
		closedir(dh);
	file_unmap(&mf);
	return ok;
}

void diag_tmp_to_final(Diag *d, const char *tmp, const char *path)
{
	char *p = strstr(d->msg, tmp);
	size_t tl = strlen(tmp), pl = strlen(path);
	if (!p || pl > tl + 64)
		return;
	size_t rest = strlen(p + tl);
	if ((size_t)(p - d->msg) + pl + rest + 1 > sizeof d->msg)
		return;
	memmove(p + pl, p + tl, rest + 1);
	memcpy(p, path, pl);
}

int stdout_check(Diag *d)
{
	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return WL_OK;
	int e = errno ? errno : EIO;
	clearerr(stdout);       /* reported once */
	return diag_fail(d, "stdout: write failed: %s", strerror(e));
	return WL_OK;
}

/* ---------------------------------------------------------------- temporaries and signals
 *
 * The registry is a fixed table of static buffers (16 temporaries at once,
 * paths below 4096 bytes; beyond that a temporary is not registered), used
 * from the main thread only: registering copies the path, then sets `used`
 * (a signal fence between); unregistering clears `used` first. The handler
 * reads only slots whose `used` is set. */

enum { TMP_SLOTS = 16, TMP_PATH = 4096, TMP_CHILDREN = 4, RM_DEPTH = 24 };

static struct {
	volatile sig_atomic_t used;
	bool is_dir;
	char path[TMP_PATH];
} tmp_slots[TMP_SLOTS];
static volatile pid_t tmp_children[TMP_CHILDREN];

void tmp_register(const char *path, bool is_dir)
{
	if (strlen(path) >= TMP_PATH)
		return;
	for (int i = 0; i < TMP_SLOTS; i++)
		if (!tmp_slots[i].used) {
			memcpy(tmp_slots[i].path, path, strlen(path) + 1);
			tmp_slots[i].is_dir = is_dir;
			atomic_signal_fence(memory_order_seq_cst);
			tmp_slots[i].used = 1;
			return;
		}
	/* full: this temporary is still removed on failure, only not on a signal */
}

void tmp_unregister(const char *path)
{
	for (int i = 0; i < TMP_SLOTS; i++)
		if (tmp_slots[i].used && strcmp(tmp_slots[i].path, path) == 0) {
			tmp_slots[i].used = 0;
			atomic_signal_fence(memory_order_seq_cst);
			return;
		}
}

void tmp_child_add(pid_t pid)
{
	for (int i = 0; i < TMP_CHILDREN; i++)
		if (tmp_children[i] == 0) {
			tmp_children[i] = pid;
			return;
		}
}

void tmp_child_remove(pid_t pid)
{
	for (int i = 0; i < TMP_CHILDREN; i++)
		if (tmp_children[i] == pid)
			tmp_children[i] = 0;
}

/* Removes dirfd/name and, for a folder, everything under it, with
 * async-signal-safe calls only. A folder is read in batches with getdents64;
 * after each pass that removed something it is read again from the start
 * (removing entries while reading may skip some). */
static void rm_tree_sigsafe(int dirfd, const char *name, int depth)
{
	if (unlinkat(dirfd, name, 0) == 0 || (errno != EISDIR && errno != EPERM) || depth > RM_DEPTH)
		return;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	char buf[2048] __attribute__((aligned(8)));
	for (int pass = 0; pass < 64; pass++) {
		bool removed = false;
		ssize_t n;
		lseek(fd, 0, SEEK_SET);
		while ((n = getdents64(fd, buf, sizeof buf)) > 0)
			for (ssize_t off = 0; off < n;) {
				struct dirent64 *e = (struct dirent64 *)(buf + off);
				off += e->d_reclen;
				if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
					rm_tree_sigsafe(fd, e->d_name, depth + 1);
					removed = true;
				}
			}
		if (!removed)
			break;
	}
	close(fd);
	unlinkat(dirfd, name, AT_REMOVEDIR);
}

static void on_fatal_signal(int sig)
{
	for (int i = 0; i < TMP_CHILDREN; i++)
		if (tmp_children[i] > 0)
			kill(tmp_children[i], sig);
	for (int i = 0; i < TMP_SLOTS; i++)
		if (tmp_slots[i].used) {
			if (tmp_slots[i].is_dir)
				rm_tree_sigsafe(AT_FDCWD, tmp_slots[i].path, 0);
			else
				unlink(tmp_slots[i].path);
		}
	signal(sig, SIG_DFL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	_exit(128 + sig);
}

void cleanup_signals_install(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_fatal_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		struct sigaction old;
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		sigaction(sigs[i], &sa, NULL);
	}
	signal(SIGPIPE, SIG_IGN);
}

/* ---------------------------------------------------------------- output folders of run and sim */

/* mkdir -p of path's parent; *made is the first folder created (NULL if none). */
static int make_parents(const char *path, char **made, Diag *d)
{
	*made = NULL;
	char *parent = path_dirname(path);
	char *p = strdup(parent), *first = NULL;
	if (!p)
		wl_die(__FILE__, __LINE__, "out of memory");
	struct stat st;
	/* the first missing ancestor, from the top */
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;
		*s = 0;
		if (!first && stat(p, &st) != 0)
			first = strdup(p);
		*s = c;
		if (!c)
			break;
	}
	free(p);
	int rc = first ? mkdir_p(parent, d) : WL_OK;
	free(parent);
	if (rc == WL_OK)
		*made = first;
	else
		free(first);
	return rc;
}

/* rmdir path's parents up to made (only empty ones go). */
static void unmake_parents(const char *path, const char *made)
{
	if (!made)
		return;
	char *p = path_dirname(path);
	size_t ml = strlen(made);
	while (strlen(p) >= ml && strncmp(p, made, ml) == 0 && rmdir(p) == 0 && strlen(p) > ml) {
		char *up = path_dirname(p);
		free(p);
		p = up;
	}
	free(p);
}

int output_dir_begin(OutputDir *o, const char *path, Diag *d)
{
	memset(o, 0, sizeof *o);
	o->path = path;
	if (outdir_check(path, outdir_listed_replaceable, d) != WL_OK || make_parents(path, &o->made, d) != WL_OK)
		return WL_ERR;
	if (outdir_begin(path, &o->tmp, d) != WL_OK) {
		unmake_parents(path, o->made);
		free(o->made);
		o->made = NULL;
		return WL_ERR;
	}
	return WL_OK;
}

int output_dir_commit(OutputDir *o, Diag *d)
{
	if (outdir_list_write(o->tmp, d) != WL_OK || stdout_check(d) != WL_OK ||
	    outdir_commit(o->tmp, o->path, outdir_listed_replaceable, d) != WL_OK) {
		output_dir_abort(o, d);
		return WL_ERR;
	}
	free(o->tmp);
	free(o->made);
	o->tmp = o->made = NULL;
	return WL_OK;
}

void output_dir_abort(OutputDir *o, Diag *d)
{
	if (!o->tmp)
		return;
	if (d && d->set)
		diag_tmp_to_final(d, o->tmp, o->path);
	outdir_abort(o->tmp);
	unmake_parents(o->path, o->made);
	free(o->tmp);
	free(o->made);
	o->tmp = o->made = NULL;
}
