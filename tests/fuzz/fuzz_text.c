/* fuzz_text.c — libFuzzer target for the ONNX textual-syntax parser; what
 * parses is verified, run through the default pipeline and printed, and the
 * printed text must parse again. */
#include <stdlib.h>
#include <string.h>
#include "compiler/onnx/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Module *m = NULL;
	Diag d = {0};
	if (text_parse((const char *)data, size, "fuzz.onnxtxt", &m, &d) != WL_OK) {
		if (!d.set)
			abort();
		return 0;
	}
	Diag d2 = {0};
	if (ir_verify(m, &d2) == WL_OK) {
		char *txt = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&txt, &len);
		if (f) {
			PrintOptions po = {.print_weights = true};
			text_print(m, f, &po);
			fclose(f);
			Module *m2 = NULL;
			Diag d3 = {0};
			if (text_parse(txt, len, "printed.onnxtxt", &m2, &d3) != WL_OK) {
				fprintf(stderr, "printed text does not parse: %s\n%s\n", d3.msg, txt);
				abort();
			}
			module_free(m2);
			free(txt);
		}
	}
	module_free(m);
	return 0;
}
