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
/* The ranges in a stable order (graph inputs, node outputs in node order,
 * then other observed values); percentile in (0, 100) clips (see
 * calibrate.c). Reports tensors that held infinities (count and the first
 * names, in inf_names) and graph values never observed (count, first). */
TRanges *calib_collect(Calib *c, Module *m, const char *model, int64_t S, double percentile,
                       int *n_inf, char *inf_names, size_t inf_len, int *n_missing, const char **missing);

#endif
