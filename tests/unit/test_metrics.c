/* test_metrics.c — rt_metrics: PSNR, max error, rms, tokens, and the
 * mismatch errors, on tensors small enough to work out by hand. */
#include <check.h>
#include "check_run.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/interp/interp.h"

static RTensor f32(int ndim, const int64_t *dims, const float *v)
{
	RTensor t;
	rt_alloc(&t, DT_FLOAT, ndim, dims);
	memcpy(t.data, v, t.nbytes);
	return t;
}

START_TEST(psnr_and_errors)
{
	int64_t dims[2] = {2, 3};
	float r[6] = {1, -4, 2, 0, 3, 1}, g[6] = {1, -4, 2, 0.5f, 3, 1};
	RTensor a = f32(2, dims, r), b = f32(2, dims, g);
	RtMetrics m;
	Diag d = {0};
	ck_assert_int_eq(rt_metrics(&a, &b, &m, &d), WL_OK);
	/* MSE = 0.25/6, peak 4: PSNR = 10 log10(16 / (0.25/6)) */
	ck_assert(fabs(m.psnr - 10 * log10(16 / (0.25 / 6))) < 1e-9);
	ck_assert(m.max_abs == 0.5 && m.peak == 4);
	ck_assert(fabs(m.rms - sqrt(0.25 / 6)) < 1e-12);
	ck_assert(fabs(m.mse - 0.25 / 6) < 1e-15);
	/* SQNR: sum ref^2 = 1+16+4+0+9+1 = 31 over 0.25; cosine: sum r*g = 31,
	 * sum g^2 = 31.25 */
	ck_assert(fabs(m.sqnr - 10 * log10(31 / 0.25)) < 1e-9);
	ck_assert(fabs(m.cosine - 31 / sqrt(31 * 31.25)) < 1e-12);
	/* argmax rows: ref (2, 3) → 2, 1; got (2, 4) → 2, 1 */
	ck_assert_int_eq(m.tokens, 2);
	ck_assert_int_eq(m.tokens_equal, 2);
	((float *)b.data)[5] = 3.5f;                 /* row 1 argmax moves */
	ck_assert_int_eq(rt_metrics(&a, &b, &m, &d), WL_OK);
	ck_assert_int_eq(m.tokens_equal, 1);
	ck_assert_int_eq(rt_metrics(&a, &a, &m, &d), WL_OK);
	ck_assert(isinf(m.psnr) && m.psnr > 0 && m.max_abs == 0);
	ck_assert(isinf(m.sqnr) && m.sqnr > 0 && m.cosine == 1 && m.mse == 0);
	rt_free(&a);
	rt_free(&b);
}
END_TEST

START_TEST(nonfinite_and_mismatch)
{
	int64_t dims[1] = {3};
	float r[3] = {-INFINITY, 1, 2}, g[3] = {-INFINITY, 1, 2};
	RTensor a = f32(1, dims, r), b = f32(1, dims, g);
	RtMetrics m;
	Diag d = {0};
	ck_assert_int_eq(rt_metrics(&a, &b, &m, &d), WL_OK);   /* equal masks are exact */
	ck_assert(isinf(m.psnr) && m.psnr > 0 && m.nonfinite == 0 && m.peak == 2);
	((float *)b.data)[0] = -1e9f;
	ck_assert_int_eq(rt_metrics(&a, &b, &m, &d), WL_OK);
	ck_assert(m.nonfinite == 1 && isinf(m.psnr) && m.psnr < 0);
	int64_t d2[1] = {2};
	RTensor c = f32(1, d2, r);
	ck_assert_int_eq(rt_metrics(&a, &c, &m, &d), WL_ERR);
	ck_assert_msg(strstr(d.msg, "got float32[2], reference float32[3]") != NULL, "%s", d.msg);
	rt_free(&a);
	rt_free(&b);
	rt_free(&c);
}
END_TEST

START_TEST(integers)
{
	int64_t dims[1] = {4};
	RTensor a, b;
	rt_alloc(&a, DT_INT64, 1, dims);
	rt_alloc(&b, DT_INT64, 1, dims);
	int64_t va[4] = {3, 9, 1, 9}, vb[4] = {3, 9, 1, 9};
	memcpy(a.data, va, sizeof va);
	memcpy(b.data, vb, sizeof vb);
	RtMetrics m;
	Diag d = {0};
	ck_assert_int_eq(rt_metrics(&a, &b, &m, &d), WL_OK);
	ck_assert(isinf(m.psnr) && m.tokens == 1 && m.tokens_equal == 1);
	rt_free(&a);
	rt_free(&b);
}
END_TEST

CHECK_MAIN("metrics", "metrics",
	psnr_and_errors, nonfinite_and_mismatch, integers)
