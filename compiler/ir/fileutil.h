/* fileutil.h — files (compiler/ir/fileutil.c): whole-file mmap, atomic
 * output (tmp + rename), atomic output directories, hashing, paths. The
 * bottom layer: every other folder may use it. */
#ifndef WLOWER_FILEUTIL_H
#define WLOWER_FILEUTIL_H

#include <sys/stat.h>
#include <sys/types.h>
#include "compiler/ir/ir.h"

typedef struct MappedFile { void *addr; size_t len; } MappedFile;
/* Opens an input file read-only, refusing anything but a regular file: the
 * open uses O_NONBLOCK, so a FIFO or a device never blocks, then fstat checks
 * S_ISREG ("PATH: not a regular file (a FIFO)"). The fd is O_CLOEXEC and back
 * in blocking mode; *st (if not NULL) is its fstat. -1 and a Diag on error.
 * Every reader of an input file goes through it (file_map does). */
int file_open_regular(const char *path, struct stat *st, Diag *d);
/* Maps the whole file read-only (empty files give addr NULL, len 0); a
 * regular file only (file_open_regular). */
int file_map(const char *path, MappedFile *mf, Diag *d);
void file_unmap(MappedFile *mf);

/* Atomic output: open "<path>.tmp.XXXXXX" in the same folder; commit renames
 * it into place; abort unlinks it. */
typedef struct AtomicFile { FILE *f; char *tmp; char *path; } AtomicFile;
/* atomic_commit checks ferror, fflush, fsync and fclose: a full disk
 * (ENOSPC) is "PATH: write failed: No space left on device". */
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
/* The same test as outdir_commit's, before any work: WL_ERR and the same
 * one line when path exists and would not be replaced. */
int outdir_check(const char *path, OutdirCheck replaceable, Diag *d);
void outdir_abort(const char *tmp);
/* Output folders of `wlower run` and `wlower sim`: outdir_list_write
 * writes TMP/.wlower-outputs (docs/FORMATS.md: "wlower-outputs 1", then the
 * name of every regular file in TMP, one a line) just before the commit, and
 * outdir_listed_replaceable (an OutdirCheck) says yes only for a folder whose
 * every entry is a regular file that list names: a folder of outputs made by
 * an earlier run, never a user's folder. */
int outdir_list_write(const char *tmp, Diag *d);
bool outdir_listed_replaceable(const char *dir, char *why, size_t n);
/* The output folder of `wlower run` and `wlower sim`, all steps:
 * output_dir_begin refuses (before any work) a path that exists and is not
 * replaceable by that rule, creates missing parent folders, and the
 * temporary "<path>.tmp.XXXXXX" (o->tmp, where every output goes);
 * output_dir_commit writes the list, checks stdout (stdout_check: a report
 * that could not be written fails the command) and renames the temporary
 * into place; output_dir_abort (also called by a failed commit) removes the
 * temporary and the parents it created and, given d, makes its message name
 * the final path. */
typedef struct OutputDir { const char *path; char *tmp, *made; } OutputDir;
int output_dir_begin(OutputDir *o, const char *path, Diag *d);
int output_dir_commit(OutputDir *o, Diag *d);
void output_dir_abort(OutputDir *o, Diag *d);
/* A Diag that names a file inside the temporary folder tmp names it inside
 * path instead (the folder the user asked for). */
void diag_tmp_to_final(Diag *d, const char *tmp, const char *path);

/* Temporaries removed on a signal. atomic_open and outdir_begin register
 * their temporary, commit and abort unregister it; tmp_register is there for
 * other temporaries (the simulator's build folder). On SIGINT, SIGTERM or
 * SIGHUP the handler (installed by cleanup_signals_install, from the driver's
 * main) removes every registered temporary, sends the same signal to the
 * registered child processes, and dies by that signal (the shell shows
 * 128+sig). The handler uses only async-signal-safe calls: the paths sit in
 * static buffers; a folder is removed by a recursive walk with openat,
 * getdents64, unlinkat and close (not nftw/opendir/readdir: they allocate,
 * and a signal that lands inside malloc would deadlock). A signal ignored
 * when wlower started (SIGINT of a background job) stays ignored. SIGPIPE is
 * ignored: a write to a closed pipe fails with EPIPE, and the writer reports
 * it as a write error (exit 1). */
void cleanup_signals_install(void);
void tmp_register(const char *path, bool is_dir);
void tmp_unregister(const char *path);
void tmp_child_add(pid_t pid);
void tmp_child_remove(pid_t pid);
/* stdout flushed and error-free: else "stdout: write failed: ..." (EPIPE when
 * the reader went away, ENOSPC on /dev/full). Call it right after printing:
 * a failed write's errno is gone after the next system call (then "I/O error"). */
int stdout_check(Diag *d);

/* mkdir -p; an existing folder is fine, an existing non-folder an error. */
int mkdir_p(const char *dir, Diag *d);
/* Removes a directory tree (no symlink following). 0 on success. */
int remove_tree(const char *path);

/* SHA-256 (hex, 64 chars + NUL). */
void sha256_hex(const void *data, size_t len, char out[65]);
/* SHA-256 of a whole file (mapped, not copied); errors name the file. */
int file_sha256_hex(const char *path, char out[65], Diag *d);

/* CLOCK_MONOTONIC in milliseconds (timings and progress). */
double wl_now_ms(void);
/* s ends with suf. */
bool str_ends_with(const char *s, const char *suf);

/* Folder part of a path ("." if none); malloc'ed. */
char *path_dirname(const char *path);

#endif
