/* calibrate.h — per-tensor ranges from runs of the float reference executor
 * (tranges/calibrate.c). Use: c = calib_new(); exec_set_observer(e,
 * calib_observe, c); for each sample, bind inputs, calib_observe(c, input,
 * tensor) for each, exec_run; then calib_collect. */
#ifndef WLOWER_CALIBRATE_H
#define WLOWER_CALIBRATE_H

#include "runtime/interp/interp.h"
#include "tranges/tranges.h"

typedef struct Calib Calib;
/* want_hist: keep |x| histograms for a percentile clip (calib_collect). */
Calib *calib_new(bool want_hist);
void calib_free(Calib *c);
/* An ExecObserver (ctx = the Calib): records t's finite min/max for v. */
void calib_observe(void *ctx, const Value *v, const RTensor *t);
/* What calib_collect noticed, for the command's notes and errors. */
typedef struct CalibReport {
	int n_inf;                  /* tensors that held infinities */
	char inf_names[512];        /* the first few, quoted, comma separated */
	int n_missing;              /* graph values never observed */
	const char *missing;        /* the first */
	int n_nan;                  /* tensors that held NaN (skipped in their range) */
	int64_t nan_values;         /* NaN values in all */
	const char *nan_first;
	int n_all_nan;              /* tensors whose every value was NaN: no range */
	const char *all_nan;        /* the first */
} CalibReport;

/* The ranges in a stable order (graph inputs, node outputs in node order,
 * then other observed values); percentile in (0, 100) clips (see
 * calibrate.c). NaN values are skipped and counted. */
TRanges *calib_collect(Calib *c, Module *m, const char *model, int64_t S, double percentile, CalibReport *rep);

#endif
