/* fileutil.h — files (compiler/ir/fileutil.c): whole-file mmap, atomic
 * output (tmp + rename), atomic output directories, hashing, paths. The
 * bottom layer: every other folder may use it. */
#ifndef WLOWER_FILEUTIL_H
#define WLOWER_FILEUTIL_H

#include "compiler/ir/ir.h"

typedef struct MappedFile { void *addr; size_t len; } MappedFile;
/* Maps the whole file read-only (empty files give addr NULL, len 0). */
int file_map(const char *path, MappedFile *mf, Diag *d);
void file_unmap(MappedFile *mf);

/* Atomic output: open "<path>.tmp.XXXXXX" in the same folder; commit renames
 * it into place; abort unlinks it. */
typedef struct AtomicFile { FILE *f; char *tmp; char *path; } AtomicFile;
int atomic_open(AtomicFile *af, const char *path, Diag *d);
int atomic_commit(AtomicFile *af, Diag *d);
void atomic_abort(AtomicFile *af);

/* Atomic output directory: outdir_begin creates "<path>.tmp.XXXXXX" next to
 * path and returns it (malloc'ed) in *tmp; outdir_commit replaces path by it
 * and outdir_abort removes the temporary tree. An existing path is replaced
 * only when it is an empty folder or `replaceable` says yes (a complete
 * module directory made by wlower: runtime/module's module_dir_replaceable),
 * so a wrong -o cannot delete a user's files; `why` says why not. */
typedef bool (*OutdirCheck)(const char *dir, char *why, size_t n);
int outdir_begin(const char *path, char **tmp, Diag *d);
int outdir_commit(const char *tmp, const char *path, OutdirCheck replaceable, Diag *d);
void outdir_abort(const char *tmp);
/* mkdir -p; an existing folder is fine, an existing non-folder an error. */
int mkdir_p(const char *dir, Diag *d);
/* Removes a directory tree (no symlink following). 0 on success. */
int remove_tree(const char *path);

/* SHA-256 (hex, 64 chars + NUL). */
void sha256_hex(const void *data, size_t len, char out[65]);

/* CLOCK_MONOTONIC in milliseconds (timings and progress). */
double wl_now_ms(void);
/* s ends with suf. */
bool str_ends_with(const char *s, const char *suf);

/* Folder part of a path ("." if none); malloc'ed. */
char *path_dirname(const char *path);

#endif
