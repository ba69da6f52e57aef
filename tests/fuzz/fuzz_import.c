/* fuzz_import.c — libFuzzer target for the binary ONNX importer, then the
 * verifier, the default pipeline and both exporters on whatever imports.
 * Seed corpus: libonnx-testdata models (scripts/test.sh builds it). */
#include <stdlib.h>
#include <string.h>
#include "compiler/onnx/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy so that the importer's zero-copy references stay valid. */
	void *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	Module *m = NULL;
	Diag d = {0};
	if (onnx_import_buffer(buf, size, NULL, &m, &d) == WL_OK) {
		Diag d2 = {0};
		if (ir_verify(m, &d2) == WL_OK) {
			void *out = NULL;
			size_t len = 0;
			Diag d3 = {0};
			if (onnx_export_buffer(m, &out, &len, &d3) == WL_OK)
				free(out);
			FILE *f = fopen("/dev/null", "w");
			if (f) {
				PrintOptions po = {0};
				text_print(m, f, &po);
				fclose(f);
			}
		}
		module_free(m);
	} else if (!d.set) {
		abort(); /* an error without a message */
	}
	free(buf);
	return 0;
}
