/* fuzz_tranges.c — libFuzzer target for the .tranges reader (tranges/):
 * each input is written to a scratch file and read with tranges_read; what
 * reads is written with tranges_write and must read back to the same ranges.
 * Seeds: tests/fuzz/seed.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tranges/tranges.h"
#include "fuzz_scratch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_scratch_file("x.tranges", data, size);
	TRanges *tr = NULL;
	Diag d = {0};
	if (tranges_read(path, &tr, &d) != WL_OK) {
		if (!d.set)
			abort(); /* an error without a message */
		return 0;
	}
	char back[1024];
	snprintf(back, sizeof back, "%s", fuzz_scratch_path("back.tranges"));
	Diag d2 = {0};
	if (tranges_write(back, tr, &d2) != WL_OK) {
		fprintf(stderr, "tranges_write failed: %s\n", d2.msg);
		abort();
	}
	TRanges *tr2 = NULL;
	Diag d3 = {0};
	if (tranges_read(back, &tr2, &d3) != WL_OK) {
		fprintf(stderr, "written tranges does not read back: %s\n", d3.msg);
		abort();
	}
	for (int i = 0; i < tr->n; i++) {
		double a, b;
		if (!tranges_get(tr2, tr->r[i].name, &a, &b) || a != tr->r[i].min || b != tr->r[i].max) {
			fprintf(stderr, "tensor '%s' reads back different\n", tr->r[i].name);
			abort();
		}
	}
	if (tr2->n != tr->n) {
		fprintf(stderr, "written tranges holds %d tensors, not %d\n", tr2->n, tr->n);
		abort();
	}
	tranges_free(tr2);
	tranges_free(tr);
	return 0;
}
