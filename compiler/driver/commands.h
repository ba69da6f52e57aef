/* commands.h — the commands of the wlower driver (compiler/driver/, the top
 * layer: it may include from every folder below).
 *
 *   main.c           the command table
 *   cmd_compile.c    wlower MODEL ...  (compile; --target writes a module directory)
 *   cmd_run.c        wlower run
 *   cmd_calibrate.c  wlower calibrate
 *   cmd_quantize.c   wlower quantize
 *   cmd_sim.c        wlower sim
 *   options.c        the helpers below, shared by the commands
 *
 * main() calls cmd_X(argc - 1, argv + 1): argv[0] is the command's name
 * (cmd_compile gets the whole argv).
 * Each command parses its own options, prints its own one-line errors
 * ("wlower run: error: FILE: input 'x': ...") and returns the exit status:
 * 0 success, 1 bad input, 2 usage error (DESIGN.md).
 */
#ifndef WLOWER_COMMANDS_H
#define WLOWER_COMMANDS_H

#include "passes/passes.h"

int cmd_compile(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_sim(int argc, char **argv);

/* ---------------------------------------------------------------- options.c */

enum { CMD_OK = 0, CMD_BAD_INPUT = 1, CMD_USAGE = 2 };

/* Prints "wlower CMD: MSG (see 'wlower CMD --help')" to stderr; returns 2. */
int cmd_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "wlower CMD: error: MSG" to stderr; returns 1. */
int cmd_error(const char *cmd, const Diag *d);
/* "--name=value" or "--name value" at argv[*i]: 1 and *val set when it
 * matches, 0 when argv[*i] is another option, -1 (usage error printed) when
 * the value is missing. */
int cmd_opt(const char *cmd, const char *name, int argc, char **argv, int *i, const char **val);
/* Parses a decimal integer in [lo, hi]; -1 (usage error printed) otherwise. */
int cmd_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
/* Splits "NAME=FILE" (the name may not be empty). */
bool cmd_split_binding(const char *arg, char **name, const char **file);
/* Default thread count: the online CPUs (at least 1). */
int cmd_default_threads(void);
/* "float32[1,80,3000]" / "int64[batch,4]" for a graph value's declared type. */
const char *cmd_describe_value(const Value *v, char *buf, size_t n);

#endif
