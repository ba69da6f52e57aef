/* sim.h — inside `wlower sim` (targets/chimera/sim/):
 *
 *   sim.c      the command's work (its options: compiler/driver/cmd_sim.c):
 *              manifest + schedule checks, run, counters
 *   build.c    g++ build of module.cpp + ccl/runner.cpp, cached by content hash;
 *              child processes (posix_spawn)
 *   cost.c     the cycle model (chimera.h, docs/cost-model.md)
 *   report.c   configuration table, report, bars, profile_core<i>.json, profile.svg
 */
#ifndef WLOWER_SIM_H
#define WLOWER_SIM_H

#include <spawn.h>
#include "targets/chimera/chimera.h"

/* The options of `wlower sim` (compiler/driver/cmd_sim.c parses them). */
typedef struct SimBind { char *name; const char *file; } SimBind;
typedef struct SimArgs {
	const char *dir, *outdir;
	SimBind *in; int nin;
	SimBind *cmp; int ncmp;
	bool quiet, cost_only, calibrate;
} SimArgs;
/* Everything after the options: checks, build, run, counters, cost model,
 * report on stdout, profiles. WL_OK, or WL_ERR + Diag (one line). */
int sim_run(const SimArgs *a, Diag *d);

/* schedule.json as the cost model and the report read it (sim.c, from the
 * Schedule of runtime/module/schedule.h). */
typedef struct SimSchedule {
	char target[32];
	ChimeraConfig cfg;
	uint64_t ocm_peak, lrm_peak, ddr_bytes, weights_bytes;
	int nspills;
	CostKernel *k;
	int nk;
} SimSchedule;
int sim_schedule_read(const char *dir, SimSchedule *s, Diag *d);
void sim_schedule_free(SimSchedule *s);

/* ---------------------------------------------------------------- build.c */
/* The CCL folder: $WLOWER_CCL_DIR, else the compile-time WLOWER_CCL_DIR. */
const char *sim_ccl_dir(void);
/* Builds (or finds in the cache) DIR/module.cpp linked with the CCL runner;
 * *exe is the malloc'ed path of module_sim. Prints "building module ..."
 * on stderr unless quiet. */
int sim_build(const char *dir, bool quiet, char **exe, Diag *d);
/* Attributes of every child process: SIGPIPE back to its default (wlower
 * ignores it, compiler/ir/fileutil.h) and the other signals unblocked. */
void sim_spawnattr_init(posix_spawnattr_t *sa);

/* ---------------------------------------------------------------- report.c */
typedef struct SimCompare {
	char *name;
	double mse, psnr, max_abs;
} SimCompare;

typedef struct SimReport {
	const char *dir, *module;      /* module name (manifest "model" base name) */
	const SimSchedule *s;
	const CostResult *r;
	const SimCompare *cmp;
	int ncmp;
	uint64_t ext_read, ext_write;  /* summed over kernels and cores */
	uint64_t macs;
} SimReport;
void sim_print_report(FILE *f, const SimReport *rep);
void sim_print_bars(FILE *f, const SimReport *rep);
/* OUT/profile_core<i>.json and OUT/profile.svg (atomic, deterministic). */
int sim_write_profiles(const char *outdir, const SimReport *rep, Diag *d);

#endif
