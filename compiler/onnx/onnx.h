/* onnx.h — reading and writing models (compiler/onnx/, above compiler/ir/).
 *
 *   onnx_import.c  ModelProto (binary) → Module; raw weights and external
 *                  data stay in mmaps (pbwire.c splits them off before
 *                  protobuf-c sees the message)
 *   onnx_export.c  Module → ModelProto file (temporary name, then rename)
 *   text_parse.c   ONNX textual syntax (onnx docs/Syntax.md) → Module
 *   text_print.c   Module → ONNX textual syntax, stable order
 *   validate.c     opset versions, attribute types, element counts (both readers)
 */
#ifndef WLOWER_ONNX_H
#define WLOWER_ONNX_H

#include "compiler/ir/ir.h"
#include "compiler/ir/fileutil.h"

/* ---------------------------------------------------------------- import */

/* Reads a binary ModelProto. The file is mmapped and kept mapped by the
 * Module; external data files (relative to the model's folder) are mapped
 * too. Errors name the file (and the tensor/node where known). */
int onnx_import_file(const char *path, Module **out, Diag *d);
/* Same, from bytes in memory (the fuzzer's entry point). `buf` must outlive
 * the Module; `path` is used for messages and to resolve external data
 * (may be NULL: external data is then an error). */
int onnx_import_buffer(const void *buf, size_t len, const char *path, Module **out, Diag *d);

/* The newest default-domain (ai.onnx) opset this build knows. */
#define ONNX_OPSET_MAX 26
#define ONNX_OPSET_MAX_RELEASE "ONNX 1.21"
/* Checks an imported model (validate.c): opset versions, attribute types
 * against the op's schema, declared shapes whose element count overflows.
 * Both readers call it; one line naming the file, node and attribute/tensor. */
int onnx_validate(Module *m, Diag *d);

/* Reads .onnx or .onnxtxt by extension (.onnxtxt, .txt, .onnxtext → text). */
int model_read(const char *path, Module **out, Diag *d);

/* ---------------------------------------------------------------- export */

typedef struct ExportOptions {
	/* Tensors stored externally on import stay external. Besides, when the
	 * model would exceed 2 GiB, every tensor of at least this many bytes goes
	 * external (0 = 1024). External data is written to "<out>.data" (name
	 * relative to the output's folder). */
	size_t external_threshold;
	bool all_external;     /* force every tensor >= threshold external */
	size_t size_limit;     /* message size that triggers the above (0 = 2 GiB - 1;
	                          tests use a small one instead of writing 2 GiB) */
} ExportOptions;
/* Writes to `path` atomically (temporary file in the same folder, then
 * rename); on error nothing is left behind. */
int onnx_export_file(Module *m, const char *path, const ExportOptions *opt, Diag *d);
/* Serializes into a malloc'ed buffer (no external data). */
int onnx_export_buffer(Module *m, void **buf, size_t *len, Diag *d);

/* ---------------------------------------------------------------- text */

/* Parses ONNX textual syntax. Errors: "FILE:LINE:COL: message". */
int text_parse(const char *src, size_t len, const char *path, Module **out, Diag *d);
int text_parse_file(const char *path, Module **out, Diag *d);

typedef struct PrintOptions {
	bool print_weights;    /* print every initializer in full */
	int64_t elide_over;    /* initializers with more elements print as a
	                          placeholder (shape, dtype, sha256); 0 = 16 */
} PrintOptions;
int text_print(Module *m, FILE *f, const PrintOptions *opt);
/* Atomic: writes to a temporary then renames. */
int text_print_file(Module *m, const char *path, const PrintOptions *opt, Diag *d);

/* Floating-point elements as text (text_parse.c; the printer uses them to
 * write the shortest text that reads back bit-exactly). dtype: DT_FLOAT,
 * DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16 or a float8 type. text_float_bits
 * reads decimal numbers, inf, -inf, nan, -nan and nan(0xBITS) (raw bits);
 * returns 0, 1 if s is not a number, 2 if it is out of range. */
double text_float_value(int dtype, uint64_t bits);
int text_float_bits(int dtype, const char *s, uint64_t *bits);

#endif
