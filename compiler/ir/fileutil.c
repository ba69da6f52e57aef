/* fileutil.c — whole-file mmap, atomic outputs (temporary + rename), SHA-256
 * (OpenSSL's libcrypto), path helpers. */
#include <dirent.h>
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

int file_map(const char *path, MappedFile *mf, Diag *d)
{
	mf->addr = NULL;
	mf->len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return diag_fail(d, "%s: cannot open: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return diag_fail(d, "%s: cannot stat: %s", path, strerror(e));
	}
	if (S_ISDIR(st.st_mode)) {
		close(fd);
		return diag_fail(d, "%s: is a directory", path);
	}
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
	return WL_OK;
}

int atomic_commit(AtomicFile *af, Diag *d)
{
	int rc = WL_OK;
	if (ferror(af->f) || fflush(af->f) != 0)
		rc = diag_fail(d, "%s: write failed: %s", af->path, strerror(errno));
	if (fclose(af->f) != 0 && rc == WL_OK)
		rc = diag_fail(d, "%s: write failed: %s", af->path, strerror(errno));
	af->f = NULL;
	if (rc == WL_OK && rename(af->tmp, af->path) != 0)
		rc = diag_fail(d, "%s: cannot rename output into place: %s", af->path, strerror(errno));
	if (rc != WL_OK)
		unlink(af->tmp);
	free(af->tmp);
	free(af->path);
	af->tmp = af->path = NULL;
	return rc;
}

void atomic_abort(AtomicFile *af)
{
	if (af->f)
		fclose(af->f);
	if (af->tmp)
		unlink(af->tmp);
	free(af->tmp);
	free(af->path);
	memset(af, 0, sizeof *af);
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

int outdir_commit(const char *tmp, const char *path, OutdirCheck replaceable, Diag *d)
{
	struct stat st;
	if (lstat(path, &st) == 0) {
		char why[512] = "not a folder";
		if (!S_ISDIR(st.st_mode) ||
		    (!dir_is_empty(path) && !(replaceable && replaceable(path, why, sizeof why))))
			return diag_fail(d, "%s: exists and is not a complete wlower module directory (%s); "
			                 "not replacing it", path, replaceable || !S_ISDIR(st.st_mode) ? why : "not empty");
		if (remove_tree(path) != 0)
			return diag_fail(d, "%s: cannot remove the old module directory: %s", path, strerror(errno));
	}
	if (rename(tmp, path) != 0)
		return diag_fail(d, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
	return WL_OK;
}

void outdir_abort(const char *tmp)
{
	if (tmp)
		remove_tree(tmp);
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
