/* tranges.h — tensor ranges: the calibration file and the calibrate command.
 *
 *   tranges.c    read/write the tranges JSON (cJSON), look up ranges
 *   calibrate.c  `wlower calibrate`: run the float graph per sample and
 *                record min/max of every tensor
 *
 * Format (DESIGN.md):
 *   {"format":"wlower-tranges","version":1,"model":"encoder.onnx","samples":73,
 *    "tensors":{"NAME":{"min":a,"max":b},...}}
 * min and max are finite numbers with min <= max. Tensors keep the order in
 * which they were added (graph inputs, then node outputs in node order).
 * Other keys are ignored on reading (room for later versions' extras).
 */
#ifndef WLOWER_TRANGES_H
#define WLOWER_TRANGES_H

#include "compiler/ir/ir.h"

typedef struct TRange {
	char *name;
	double min, max;
} TRange;

typedef struct TRanges {
	char *path;            /* file it was read from (messages); NULL if built */
	char *model;           /* "model" field; may be NULL */
	int64_t samples;       /* "samples" field */
	TRange *r; int n, cap;
	struct TRangeMap *map; /* name -> index */
} TRanges;

TRanges *tranges_new(const char *model, int64_t samples);
void tranges_free(TRanges *tr);
/* Adds or replaces the range of `name`. */
void tranges_set(TRanges *tr, const char *name, double min, double max);
/* true and fills min/max if `name` has a range. */
bool tranges_get(const TRanges *tr, const char *name, double *min, double *max);
/* For passes: the range of `tensor`, or WL_ERR with the one-line error
 * "X.tranges: no range for tensor 'T' (node 'N')" (node may be NULL). */
int tranges_require(const TRanges *tr, const char *tensor, const char *node,
                    double *min, double *max, Diag *d);

/* Errors name the file: malformed JSON (with the byte offset), wrong
 * "format"/"version", a tensor whose min/max is missing or not a number, or
 * min > max. */
int tranges_read(const char *path, TRanges **out, Diag *d);
/* Atomic (temporary file, then rename). Non-finite bounds are an internal
 * error: the caller clamps them first. */
int tranges_write(const char *path, const TRanges *tr, Diag *d);

/* The command (calibrate.c). */


#endif
