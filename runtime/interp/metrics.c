/* metrics.c — how close a tensor is to a reference, for C tests and tools
 * (the numbers tests/oracle/compare.py prints):
 *
 *   PSNR     10·log10(peak² / MSE), peak = max |ref| over its finite values;
 *            +inf when MSE is 0, -inf when MSE > 0 and peak is 0
 *   max_abs  max |ref - got|;  rms = sqrt(MSE)
 *   SQNR     10·log10(Σref² / Σ(ref-got)²), the signal-to-quantization-noise
 *            ratio (wlower compare): +inf when equal, -inf when ref is all 0
 *   cosine   Σref·got / sqrt(Σref²·Σgot²): 1 when both are all 0, 0 when one is
 *   tokens   argmax over the last axis (the first index on ties), compared
 *            position by position
 * Computed in double. Equal infinities (masks) and NaN against NaN count as
 * exact; any other non-finite difference is counted in nonfinite and makes
 * PSNR -inf and max_abs inf.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "interp.h"

static bool numeric(int dt)
{
	switch (dt) {
	case DT_FLOAT: case DT_FLOAT16: case DT_DOUBLE: case DT_INT8: case DT_UINT8: case DT_INT16:
	case DT_UINT16: case DT_INT32: case DT_UINT32: case DT_INT64: case DT_UINT64: case DT_BOOL:
		return true;
	default:
		return false;
	}
}

static double elem(const RTensor *t, int64_t i)
{
	const void *p = t->data;
	switch (t->dtype) {
	case DT_FLOAT: return ((const float *)p)[i];
	case DT_FLOAT16: return rt_half_to_float(((const uint16_t *)p)[i]);
	case DT_DOUBLE: return ((const double *)p)[i];
	case DT_INT8: return ((const int8_t *)p)[i];
	case DT_UINT8: case DT_BOOL: return ((const uint8_t *)p)[i];
	case DT_INT16: return ((const int16_t *)p)[i];
	case DT_UINT16: return ((const uint16_t *)p)[i];
	case DT_INT32: return ((const int32_t *)p)[i];
	case DT_UINT32: return ((const uint32_t *)p)[i];
	case DT_INT64: return (double)((const int64_t *)p)[i];
	case DT_UINT64: return (double)((const uint64_t *)p)[i];
	default: WL_UNREACHABLE();
	}
}

int rt_metrics(const RTensor *ref, const RTensor *got, RtMetrics *m, Diag *d)
{
	char a[128], b[128];
	memset(m, 0, sizeof *m);
	if (ref->dtype != got->dtype || ref->ndim != got->ndim ||
	    memcmp(ref->dims, got->dims, (size_t)ref->ndim * sizeof ref->dims[0]) != 0)
		return diag_fail(d, "got %s, reference %s", rt_describe(got, a, sizeof a), rt_describe(ref, b, sizeof b));
	if (!numeric(ref->dtype))
		return diag_fail(d, "cannot compare %s tensors", rt_describe(ref, a, sizeof a));
	int64_t n = rt_numel(ref);
	double se = 0, peak = 0, maxabs = 0, srr = 0, sgg = 0, srg = 0;
	for (int64_t i = 0; i < n; i++) {
		double r = elem(ref, i), g = elem(got, i);
		if (isfinite(r) && fabs(r) > peak)
			peak = fabs(r);
		if (isfinite(r) && isfinite(g)) {
			srr += r * r;
			sgg += g * g;
			srg += r * g;
		}
		if (r == g || (isnan(r) && isnan(g)))
			continue;
		if (!isfinite(r) || !isfinite(g)) {
			m->nonfinite++;
			continue;
		}
		double e = r - g;
		se += e * e;
		if (fabs(e) > maxabs)
			maxabs = fabs(e);
	}
	double mse = n ? se / (double)n : 0;
	m->peak = peak;
	m->rms = sqrt(mse);
	m->max_abs = m->nonfinite ? INFINITY : maxabs;
	m->mse = m->nonfinite ? INFINITY : mse;
	if (m->nonfinite)
		m->sqnr = -INFINITY;
	else if (se == 0)
		m->sqnr = INFINITY;
	else if (srr == 0)
		m->sqnr = -INFINITY;
	else
		m->sqnr = 10.0 * log10(srr / se);
	if (srr == 0 && sgg == 0)
		m->cosine = 1;
	else if (srr == 0 || sgg == 0)
		m->cosine = 0;
	else
		m->cosine = srg / sqrt(srr * sgg);
	if (m->nonfinite)
		m->psnr = -INFINITY;
	else if (mse == 0)
		m->psnr = INFINITY;
	else if (peak == 0)
		m->psnr = -INFINITY;
	else
		m->psnr = 10.0 * log10(peak * peak / mse);
	/* tokens: argmax over the last axis */
	if (ref->ndim >= 1 && n > 0 && ref->dims[ref->ndim - 1] > 0) {
		int64_t w = ref->dims[ref->ndim - 1], rows = n / w;
		for (int64_t r = 0; r < rows; r++) {
			int64_t ar = 0, ag = 0;
			double br = elem(ref, r * w), bg = elem(got, r * w);
			for (int64_t k = 1; k < w; k++) {
				double x = elem(ref, r * w + k), y = elem(got, r * w + k);
				if (x > br) { br = x; ar = k; }
				if (y > bg) { bg = y; ag = k; }
			}
			m->tokens++;
			m->tokens_equal += ar == ag;
		}
	}
	return WL_OK;
}
