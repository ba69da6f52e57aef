/* sim.h — inside `wlower sim` (targets/chimera/sim/):
 *
 *   sim.c      the command's work (its options: compiler/driver/cmd_sim.c):
 *              manifest + schedule checks, run, counters
 *   build.c    g++ build of module.cpp + ccl/runner.cpp, cached by content hash;
 *              child processes (posix_spawn)
 *   cost.c     the cycle model (chimera.h, docs/cost-model.md)
 *   report.c   configuration table, report, bars, profile_core<i>.json, profile.svg
 *   session.c  one module_sim kept running for many runs (module_sim --serve):
 *              the pipelines' "qc" runner (runtime/pipelines/program.c)
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
/* What `wlower sim` checks of a module folder before it builds: manifest.json
 * (every file's size and sha256), schedule.json, the two against each other.
 * *man: the manifest (cJSON_Delete), *s: the schedule (sim_schedule_free),
 * also on failure. */
int sim_module_check(const char *dir, cJSON **man, SimSchedule *s, Diag *d);
/* The built module's io table (module_sim --describe) against manifest.json. */
int sim_module_io_check(const char *exe, const char *dir, const cJSON *man, Diag *d);
/* One run's counters of kernel i against the schedule ("WHERE: kernel 'K'
 * (Op): the run counted ..."). */
int sim_counters_check(const char *where, const SimSchedule *s, int i, uint64_t macs, uint64_t alu, uint64_t d2o,
                       uint64_t o2d, Diag *d);

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

/* ---------------------------------------------------------------- session.c */
/* A module folder run many times by one module_sim process (built or found
 * in the cache by sim_build, started with --serve, stopped by
 * sim_session_close). Each run sends every input, reads back every output
 * and the counters, and checks the counters against schedule.json. */
typedef struct SimSession SimSession;
typedef struct SimIo {
	const char *name;
	int dtype;                 /* DT_FLOAT, DT_INT64, ... (the manifest's dtype) */
	int ndim;
	int64_t dims[8];
	size_t bytes;              /* raw bytes in and out (float32 outputs: 4 per value) */
} SimIo;
int sim_session_open(const char *dir, bool quiet, SimSession **out, Diag *d);
void sim_session_close(SimSession *s);
int sim_session_count(const SimSession *s, bool outputs);
const SimIo *sim_session_io(const SimSession *s, bool outputs, int i);
/* One run: in[i] points to the raw bytes of input i (SimIo.bytes). */
int sim_session_run(SimSession *s, const void *const *in, Diag *d);
/* Output i of the last run (float32 for dtype float32), valid until the next run. */
void *sim_session_output(SimSession *s, int i);
/* Fixed-point stores that saturated in the last run. */
uint64_t sim_session_saturated(const SimSession *s);
/* "name (Op)" of the first kernel that saturated in the last run, or NULL. */
const char *sim_session_saturated_kernel(const SimSession *s);
/* The schedule, the cost model's result (cycles per run: they do not depend
 * on the inputs) and the report's totals, for sim_print_report. */
const SimSchedule *sim_session_schedule(const SimSession *s);
const CostResult *sim_session_cost(const SimSession *s);
/* The report of the module (SimReport without comparisons). */
void sim_session_report(const SimSession *s, SimReport *rep);

#endif
