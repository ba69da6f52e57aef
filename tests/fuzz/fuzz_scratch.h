/* fuzz_scratch.h — a private scratch folder for the fuzz targets whose reader
 * takes a path (npy, tranges, manifest): made once per process under
 * /dev/shm (else $TMPDIR or /tmp), removed at exit. */
#ifndef FUZZ_SCRATCH_H
#define FUZZ_SCRATCH_H
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_dir[512];

static void fuzz_scratch_cleanup(void)
{
	DIR *d = opendir(fuzz_dir);
	struct dirent *e;
	char p[1024];
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof p, "%s/%s", fuzz_dir, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(fuzz_dir);
}

static const char *fuzz_scratch_path(const char *name)
{
	static char p[1024];
	if (!fuzz_dir[0]) {
		const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
		snprintf(fuzz_dir, sizeof fuzz_dir, "%s/wlower-fuzz.XXXXXX", base ? base : "/tmp");
		if (!mkdtemp(fuzz_dir)) {
			perror("mkdtemp");
			abort();
		}
		atexit(fuzz_scratch_cleanup);
	}
	snprintf(p, sizeof p, "%s/%s", fuzz_dir, name);
	return p;
}

/* Writes data to the scratch file NAME; returns its path. */
static const char *fuzz_scratch_file(const char *name, const uint8_t *data, size_t size)
{
	const char *p = fuzz_scratch_path(name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		perror(p);
		abort();
	}
	size_t off = 0;
	while (off < size) {
		ssize_t w = write(fd, data + off, size - off);
		if (w <= 0) {
			perror(p);
			abort();
		}
		off += (size_t)w;
	}
	close(fd);
	return p;
}
#endif
