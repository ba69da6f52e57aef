/* fuzz_npy.c — libFuzzer target for the .npy reader (runtime/interp/npy.c):
 * each input is written to a scratch file and read with npy_read, the path
 * every command takes; what reads is written back with npy_write and must
 * read again to the same dtype, shape and bytes. Seeds: tests/fuzz/seed.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "runtime/interp/interp.h"
#include "fuzz_scratch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_scratch_file("x.npy", data, size);
	RTensor t;
	Diag d = {0};
	if (npy_read(path, &t, &d) != WL_OK) {
		if (!d.set)
			abort(); /* an error without a message */
		return 0;
	}
	const char *back = fuzz_scratch_path("back.npy");
	Diag d2 = {0};
	if (npy_write(back, &t, &d2) != WL_OK) {
		fprintf(stderr, "npy_write failed: %s\n", d2.msg);
		abort();
	}
	RTensor u;
	Diag d3 = {0};
	if (npy_read(back, &u, &d3) != WL_OK) {
		fprintf(stderr, "written .npy does not read back: %s\n", d3.msg);
		abort();
	}
	int64_t n = rt_numel(&t);
	if (u.dtype != t.dtype || u.ndim != t.ndim || rt_numel(&u) != n ||
	    memcmp(u.dims, t.dims, sizeof t.dims[0] * (size_t)t.ndim) != 0 ||
	    (n && memcmp(u.data, t.data, dtype_nbytes(t.dtype, n)) != 0)) {
		fprintf(stderr, "written .npy reads back different\n");
		abort();
	}
	rt_free(&u);
	rt_free(&t);
	return 0;
}
