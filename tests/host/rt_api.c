/* rt_api.c — the public runtime library (libwlower_rt, runtime/rt/wlower_rt.h)
 * used on its own, as an application would: `rt_api DIR` on the fixture
 * module of tests/host/test_run_dir.py (input x float32[2,3]; outputs y and
 * "s:sum"). Prints what it sees; the test compares. Exit 0 if every call
 * behaved. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wlower_rt.h"

static int fails;
#define CHECK(c) do { if (!(c)) { printf("CHECK FAILED line %d: %s\n", __LINE__, #c); fails++; } } while (0)

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: rt_api DIR\n");
		return 2;
	}
	char *err = NULL;
	CHECK(wl_open("/nonexistent/dir", 1, &err) == NULL && err && !strchr(err, '\n'));
	printf("open error: %s\n", err ? err : "(none)");
	free(err);
	WlModule *m = wl_open(argv[1], 2, &err);
	if (!m) {
		printf("wl_open: %s\n", err);
		free(err);
		return 1;
	}
	WlTensorInfo info;
	for (int i = 0; i < wl_input_count(m); i++) {
		wl_input_info(m, i, &info);
		printf("input %d: %s %s ndim=%d nbytes=%zu\n", i, info.name, wl_dtype_name(info.dtype), info.ndim,
		       info.nbytes);
	}
	for (int i = 0; i < wl_output_count(m); i++) {
		wl_output_info(m, i, &info);
		printf("output %d: %s %s ndim=%d nbytes=%zu\n", i, info.name, wl_dtype_name(info.dtype), info.ndim,
		       info.nbytes);
	}
	CHECK(wl_input_info(m, 5, &info) == -1 && strstr(wl_error(m), "out of range"));
	CHECK(wl_run(m) == -1);
	printf("run error: %s\n", wl_error(m));
	/* a deliberately misaligned input buffer: the runtime stages it */
	float storage[16];
	float *x = (float *)((char *)storage + 4);
	for (int i = 0; i < 6; i++)
		x[i] = (float)i - 2;
	int64_t shape[2] = {2, 3}, bad[2] = {3, 2};
	CHECK(wl_bind_input(m, "ghost", x, WL_DTYPE_FLOAT32, 2, shape) == -1);
	printf("bind error: %s\n", wl_error(m));
	CHECK(wl_bind_input(m, "x", x, WL_DTYPE_FLOAT32, 2, bad) == -1);
	printf("bind error: %s\n", wl_error(m));
	CHECK(wl_bind_input(m, "x", x, WL_DTYPE_FLOAT32, 2, shape) == 0);
	for (int r = 0; r < 2; r++) {
		CHECK(wl_run(m) == 0);
		CHECK(wl_error(m)[0] == 0);
		const float *y = wl_output(m, wl_output_index(m, "y"), &info);
		const float *s = wl_output(m, wl_output_index(m, "s:sum"), NULL);
		CHECK(y && s && ((uintptr_t)y & 63) == 0);
		printf("run %d: y =", r);
		for (int i = 0; i < 6; i++)
			printf(" %g", y[i]);
		printf("; s = %g\n", s[0]);
		x[0] += 1;              /* inputs are read at run time */
	}
	/* an index out of range (the fixture's kernel 0 reports x[0] == 99 as
	 * one): wl_run returns -1 with the one-line message; then runs again */
	float keep = x[0];
	x[0] = 99;
	CHECK(wl_run(m) == -1);
	CHECK(!strchr(wl_error(m), '\n'));
	printf("index error: %s\n", wl_error(m));
	x[0] = keep;
	CHECK(wl_run(m) == 0 && wl_error(m)[0] == 0);
	CHECK(wl_output(m, 7, NULL) == NULL);
	CHECK(wl_output_index(m, "nope") == -1);
	wl_close(m);
	printf("%s\n", fails ? "FAILED" : "OK");
	return fails ? 1 : 0;
}
