/* text_print.c — Module → ONNX textual syntax, in a stable order.
 *
 * The output is what text_parse.c reads (grammar and escapes are described
 * at the top of that file) and, wherever onnx 1.12 can say it, what onnx
 * 1.12's onnx.parser.parse_model reads:
 *
 *   <
 *     ir_version: 8,
 *     opset_import: ["" : 17, "com.microsoft" : 1],
 *     producer_name: "pytorch"
 *   >
 *   main_graph (float[1,80,3000] input_features) => (float[1,1500,384] hidden)
 *   <
 *     float[2] B = {1.0, 2.0},
 *     float[384,1536] fc1__dweight,  # elided: 589824 x float, sha256 9f1c2a3b4c5d6e7f
 *     float[1,1500,1536] t1
 *   >
 *   {
 *     t1 = MatMul (input_features, fc1__dweight)  # /fc1/MatMul
 *     y = If (c) <
 *       then_branch = then_g () => (float[2] a)
 *       {
 *         a = Identity (B)
 *       },
 *       else_branch = ...
 *     >
 *   }
 *   <
 *     domain: "local",
 *     opset_import: ["" : 17]
 *   >
 *   MyFn <alpha> (x) => (y)
 *   {
 *     y = Mul (x, x)
 *   }
 *
 * Order: model fields; the graph's inputs and outputs; in '< >' the
 * initializers (file order), sparse initializers, then the declared types of
 * other values (node outputs in node order, then other used values), so that
 * shape inference results show; nodes in graph order, one per line,
 * attributes before inputs (after them, one per line, when an attribute is a
 * graph or an elided tensor); then functions.
 *
 * What onnx 1.12 cannot say, and how we say it:
 *   - names that are not identifiers: escaped (__s for '/', __d '.', ...);
 *   - node names: a comment after the node, "# NAME";
 *   - seq/map/optional/sparse_tensor types and float8/int4 element types of
 *     declarations: the bare name then "# type: TYPE" (such a signature is
 *     printed one declaration per line);
 *   - an absent first input or output: "" (1.12 cannot read it at all);
 *   - inf/nan, empty lists ("axes: ints = []"), tensor/graph lists, sparse
 *     tensors, type_proto attributes, float16/bfloat16/complex/float8/int4
 *     values: printed in our syntax, which 1.12 rejects.
 * Dropped: doc strings of graphs, nodes and values, dimension denotations,
 * values of functions' body declarations.
 *
 * Large tensors (more than PrintOptions.elide_over elements, default 16,
 * strings too) print as a declaration without a value followed by
 * "# elided: N x DTYPE, sha256 XXXX" (16 hex digits of the SHA-256 of the
 * raw little-endian bytes; for strings, of each string's 8-byte LE length
 * and bytes). print_weights prints every value. Floats print in the
 * shortest form that reads back to the same bits (float16/bfloat16/float8 as
 * their values; float and double subnormals as their exact decimal expansion,
 * which onnx 1.12's std::stof reads without a range error), NaNs other than
 * the default one as nan(0xBITS).
 */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "compiler/onnx/onnx.h"

typedef struct Printer {
	FILE *f;
	Module *m;
	bool print_weights;
	int64_t elide_over;
	unsigned char *seen;       /* by Value.id: printed in a '< >' list */
	int nseen;
} Printer;

static void indent(Printer *P, int n)
{
	fprintf(P->f, "%*s", n, "");
}

/* ---------------------------------------------------------------- names */

static bool is_reserved(const char *s)
{
	static const char *const kw[] = {"seq", "map", "optional", "sparse_tensor", "inf", "nan"};
	if (dtype_from_name(s, strlen(s)) != DT_UNDEFINED)
		return true;
	for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
		if (strcmp(s, kw[i]) == 0)
			return true;
	return false;
}

/* n bytes of a name as an identifier (escapes: see text_parse.c); the
 * empty name prints as __n. */
static void print_name_n(Printer *P, const char *s, size_t n)
{
	FILE *f = P->f;
	char kw[16];
	bool reserved = false;
	if (n < sizeof kw) {
		memcpy(kw, s, n);
		kw[n] = 0;
		reserved = is_reserved(kw);
	}
	if (n == 0 || isdigit((unsigned char)s[0]) || reserved)
		fputs("__n", f);
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	for (; p < end; p++) {
		if (isalnum(*p)) {
			fputc(*p, f);
			continue;
		}
		bool last = p + 1 == end;
		switch (*p) {
		case '_': fputs(last || isalnum(p[1]) ? "_" : "__u", f); break;
		case '/': fputs("__s", f); break;
		case '.': fputs("__d", f); break;
		case ':': fputs("__c", f); break;
		case '-': fputs("__m", f); break;
		default: fprintf(f, "__x%02x", *p); break;
		}
	}
}

static void print_name(Printer *P, const char *s)
{
	print_name_n(P, s ? s : "", s ? strlen(s) : 0);
}

/* A quoted string with C escapes (bytes >= 0x80 as they are). */
static void print_str(Printer *P, const char *s, size_t n)
{
	FILE *f = P->f;
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		switch (c) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\t': fputs("\\t", f); break;
		case '\r': fputs("\\r", f); break;
		default:
			if (c < 0x20 || c == 0x7f)
				fprintf(f, "\\x%02x", c);
			else
				fputc(c, f);
		}
	}
	fputc('"', f);
}

static void print_cstr(Printer *P, const char *s)
{
	print_str(P, s ? s : "", s ? strlen(s) : 0);
}

/* Value names of a node or function: an absent value is nothing, except in
 * first place where it must be "". */
static void print_value_list(Printer *P, Value **vs, int n)
{
	for (int i = 0; i < n; i++) {
		if (i)
			fputs(", ", P->f);
		if (vs[i] && vs[i]->name[0])
			print_name(P, vs[i]->name);
		else if (i == 0)
			fputs("\"\"", P->f);
	}
}

/* ---------------------------------------------------------------- types */

static bool type_printable(const Type *t)
{
	switch (t->kind) {
	case TY_TENSOR: case TY_SPARSE_TENSOR:
		return dtype_valid(t->elem) && (!t->has_shape || t->rank == 0 || t->dims);
	case TY_SEQUENCE: case TY_OPTIONAL:
		return t->inner && type_printable(t->inner);
	case TY_MAP:
		return dtype_valid(t->map_key) && t->inner && type_printable(t->inner);
	default:
		return false;
	}
}

/* What onnx 1.12 reads in a declaration: tensors of its 16 element types. */
static bool type_is_112(const Type *t)
{
	return t->kind == TY_TENSOR && t->elem >= DT_FLOAT && t->elem <= DT_BFLOAT16;
}

static void print_dims(Printer *P, const Type *t)
{
	if (!t->has_shape) {
		fputs("[]", P->f);
		return;
	}
	if (t->rank == 0)
		return;
	fputc('[', P->f);
	for (int i = 0; i < t->rank; i++) {
		const Dim *d = &t->dims[i];
		if (i)
			fputc(',', P->f);
		if (d->kind == DIM_VALUE)
			fprintf(P->f, "%" PRId64, d->value);
		else if (d->kind == DIM_PARAM && d->param && d->param[0])
			print_name(P, d->param);
		else
			fputc('?', P->f);
	}
	fputc(']', P->f);
}

static void print_type(Printer *P, const Type *t)
{
	switch (t->kind) {
	case TY_TENSOR:
		fputs(dtype_name(t->elem), P->f);
		print_dims(P, t);
		break;
	case TY_SPARSE_TENSOR:
		fprintf(P->f, "sparse_tensor(%s", dtype_name(t->elem));
		print_dims(P, t);
		fputc(')', P->f);
		break;
	case TY_SEQUENCE:
	case TY_OPTIONAL:
		fputs(t->kind == TY_SEQUENCE ? "seq(" : "optional(", P->f);
		print_type(P, t->inner);
		fputc(')', P->f);
		break;
	case TY_MAP:
		fprintf(P->f, "map(%s, ", dtype_name(t->map_key));
		print_type(P, t->inner);
		fputc(')', P->f);
		break;
	default:
		WL_UNREACHABLE();
	}
}

static void print_tensor_type(Printer *P, const Tensor *t)
{
	fputs(dtype_name(t->dtype) ? dtype_name(t->dtype) : "undefined", P->f);
	if (t->ndim == 0)
		return;
	fputc('[', P->f);
	for (int i = 0; i < t->ndim; i++)
		fprintf(P->f, "%s%" PRId64, i ? "," : "", t->dims[i]);
	fputc(']', P->f);
}

/* ---------------------------------------------------------------- values */

static bool is_float_dtype(int dt)
{
	switch (dt) {
	case DT_FLOAT: case DT_DOUBLE: case DT_FLOAT16: case DT_BFLOAT16:
	case DT_FLOAT8E4M3FN: case DT_FLOAT8E4M3FNUZ: case DT_FLOAT8E5M2: case DT_FLOAT8E5M2FNUZ:
		return true;
	default:
		return false;
	}
}

/* The shortest text that text_float_bits reads back to `bits`; always with
 * a '.' or an exponent so that it reads as a float. */
static void fmt_float(char *buf, size_t n, int dt, uint64_t bits)
{
	double v = text_float_value(dt, bits);
	uint64_t b2;
	if (isnan(v)) {
		if (text_float_bits(dt, "nan", &b2) == 0 && b2 == bits)
			snprintf(buf, n, "nan");
		else
			snprintf(buf, n, "nan(0x%" PRIx64 ")", bits);
		return;
	}
	if (isinf(v)) {
		snprintf(buf, n, v < 0 ? "-inf" : "inf");
		return;
	}
	/* onnx 1.12's std::stof/stod throw on inexact subnormals: print
	 * those exactly (%g drops the trailing zeros) */
	if ((dt == DT_FLOAT && fpclassify((float)v) == FP_SUBNORMAL) ||
	    (dt == DT_DOUBLE && fpclassify(v) == FP_SUBNORMAL)) {
		snprintf(buf, n, "%.*g", dt == DT_FLOAT ? 150 : 800, v);
		return;
	}
	/* A decimal of p <= start digits that reads back to v is also what %g
	 * prints at `start` digits (trailing zeros dropped), so the search for
	 * the shortest can begin there. */
	int start = dt == DT_DOUBLE ? 15 : dt == DT_FLOAT ? 6 : dt == DT_FLOAT16 ? 3 :
	            dt == DT_BFLOAT16 ? 2 : 1;
	for (int prec = start; prec <= 17; prec++) {
		snprintf(buf, n, "%.*g", prec, v);
		if (text_float_bits(dt, buf, &b2) == 0 && b2 == bits)
			break;
	}
	if (!strpbrk(buf, ".e"))
		strncat(buf, ".0", n - strlen(buf) - 1);
}

enum { FLOAT_BUF = 1024 };      /* an exact double subnormal needs ~770 */

static void print_float(Printer *P, int dt, uint64_t bits)
{
	char buf[FLOAT_BUF];
	fmt_float(buf, sizeof buf, dt, bits);
	fputs(buf, P->f);
}

static uint64_t get_bits(const Tensor *t, int64_t i, int bytes)
{
	const unsigned char *p = (const unsigned char *)t->data + (size_t)i * (size_t)bytes;
	uint64_t v = 0;
	for (int k = 0; k < bytes; k++)
		v |= (uint64_t)p[k] << (8 * k);
	return v;
}

static bool tensor_data_ok(const Tensor *t)
{
	int64_t n = tensor_numel(t);
	if (n < 0 || !dtype_valid(t->dtype))
		return false;
	if (t->dtype == DT_STRING)
		return n == 0 || t->strs;
	return n == 0 || (t->data && t->nbytes >= dtype_nbytes(t->dtype, n));
}

static bool elided(Printer *P, const Tensor *t)
{
	return !tensor_data_ok(t) || (!P->print_weights && tensor_numel(t) > P->elide_over);
}

static void print_elem(Printer *P, const Tensor *t, int64_t i)
{
	int dt = t->dtype;
	if (is_float_dtype(dt)) {
		print_float(P, dt, get_bits(t, i, dtype_bits(dt) / 8));
		return;
	}
	switch (dt) {
	case DT_COMPLEX64:
	case DT_COMPLEX128: {
		int part = dt == DT_COMPLEX64 ? DT_FLOAT : DT_DOUBLE, w = dt == DT_COMPLEX64 ? 4 : 8;
		print_float(P, part, get_bits(t, 2 * i, w));
		fputs(", ", P->f);
		print_float(P, part, get_bits(t, 2 * i + 1, w));
		break;
	}
	case DT_UINT64:
		fprintf(P->f, "%" PRIu64, get_bits(t, i, 8));
		break;
	case DT_STRING:
		print_str(P, t->strs[i].ptr ? t->strs[i].ptr : "", t->strs[i].ptr ? t->strs[i].len : 0);
		break;
	default:
		fprintf(P->f, "%" PRId64, tensor_get_i64(t, i));
		break;
	}
}

static void print_tensor_values(Printer *P, const Tensor *t)
{
	int64_t n = tensor_numel(t);
	fputc('{', P->f);
	for (int64_t i = 0; i < n; i++) {
		if (i)
			fputs(", ", P->f);
		print_elem(P, t, i);
	}
	fputc('}', P->f);
}

/* "elided: N x DTYPE, sha256 XXXXXXXXXXXXXXXX" */
static void print_elided_note(Printer *P, const Tensor *t)
{
	char hex[65];
	int64_t n = tensor_numel(t);
	if (t->dtype == DT_STRING && t->strs) {
		size_t len = 0;
		for (int64_t i = 0; i < n; i++)
			len += 8 + (t->strs[i].ptr ? t->strs[i].len : 0);
		unsigned char *buf = malloc(len ? len : 1), *p = buf;
		if (!buf)
			wl_die(__FILE__, __LINE__, "out of memory");
		for (int64_t i = 0; i < n; i++) {
			uint64_t l = t->strs[i].ptr ? t->strs[i].len : 0;
			for (int k = 0; k < 8; k++)
				*p++ = (unsigned char)(l >> (8 * k));
			if (l)
				memcpy(p, t->strs[i].ptr, l);
			p += l;
		}
		sha256_hex(buf, len, hex);
		free(buf);
	} else {
		sha256_hex(t->data ? t->data : "", t->data ? t->nbytes : 0, hex);
	}
	fprintf(P->f, "elided: %" PRId64 " x %s, sha256 %.16s", n,
	        dtype_name(t->dtype) ? dtype_name(t->dtype) : "undefined", hex);
}

/* A tensor as an attribute value: "float[2] NAME {1.0, 2.0}" ("{}" when
 * elided; the caller prints the note). */
static void print_tensor_literal(Printer *P, const Tensor *t, bool may_elide)
{
	print_tensor_type(P, t);
	fputc(' ', P->f);
	if (t->name && t->name[0]) {
		print_name(P, t->name);
		fputc(' ', P->f);
	}
	if (!tensor_data_ok(t) || (may_elide && elided(P, t)))
		fputs("{}", P->f);
	else
		print_tensor_values(P, t);
}

static void print_sparse_literal(Printer *P, const SparseTensor *sp)
{
	fputs("sparse_tensor([", P->f);
	for (int i = 0; i < sp->ndim; i++)
		fprintf(P->f, "%s%" PRId64, i ? ", " : "", sp->dims[i]);
	fputs("], ", P->f);
	print_tensor_literal(P, sp->values, false);
	fputs(", ", P->f);
	print_tensor_literal(P, sp->indices, false);
	fputc(')', P->f);
}

/* ---------------------------------------------------------------- declarations */

/* How a declaration prints: "TYPE name", "TYPE name = {...}", or a bare
 * name followed by a comment with its type and/or the elided note. */
typedef struct DeclForm {
	const Value *v;
	const Tensor *init;        /* printed as a value (or elided) */
	const SparseTensor *sp;
	bool inline_type;          /* "TYPE name" */
	bool type_comment;         /* "# type: TYPE" */
	bool elide;                /* "# elided: ..." */
} DeclForm;

static DeclForm decl_form(Printer *P, const Value *v, const Tensor *init)
{
	DeclForm df = {v, init, NULL, false, false, false};
	if (init) {
		df.elide = elided(P, init);
		bool t112 = init->dtype >= DT_FLOAT && init->dtype <= DT_BFLOAT16;
		df.inline_type = !df.elide || t112;
		df.type_comment = df.elide && !t112 && dtype_valid(init->dtype);
	} else if (v && type_printable(&v->type)) {
		df.inline_type = type_is_112(&v->type);
		df.type_comment = !df.inline_type;
	}
	return df;
}

static bool decl_has_comment(const DeclForm *df)
{
	return df->type_comment || df->elide;
}

static void print_decl(Printer *P, const DeclForm *df)
{
	if (df->sp) {
		Type ty = {.kind = TY_SPARSE_TENSOR, .elem = df->sp->values ? df->sp->values->dtype : 0};
		fprintf(P->f, "sparse_tensor(%s[", dtype_name(ty.elem) ? dtype_name(ty.elem) : "undefined");
		for (int i = 0; i < df->sp->ndim; i++)
			fprintf(P->f, "%s%" PRId64, i ? "," : "", df->sp->dims[i]);
		fputs("]) ", P->f);
		print_name(P, df->sp->values ? df->sp->values->name : "");
		fputs(" = ", P->f);
		print_sparse_literal(P, df->sp);
		return;
	}
	if (df->init && df->inline_type) {
		print_tensor_type(P, df->init);
		fputc(' ', P->f);
	} else if (df->inline_type) {
		print_type(P, &df->v->type);
		fputc(' ', P->f);
	}
	print_name(P, df->v ? df->v->name : df->init->name);
	if (df->init && !df->elide) {
		fputs(" = ", P->f);
		print_tensor_values(P, df->init);
	}
}

static void print_decl_comment(Printer *P, const DeclForm *df)
{
	fputs("  # ", P->f);
	if (df->type_comment) {
		fputs("type: ", P->f);
		if (df->init)
			print_tensor_type(P, df->init);
		else
			print_type(P, &df->v->type);
		if (df->elide)
			fputs(", ", P->f);
	}
	if (df->elide)
		print_elided_note(P, df->init);
}

/* A list of declarations: on one line, or one per line when one needs a
 * comment (or always, for '< >' lists). */
static void print_decl_list(Printer *P, const DeclForm *ds, int n, char open, char close, bool lines,
                            int ind)
{
	for (int i = 0; i < n && !lines; i++)
		lines = decl_has_comment(&ds[i]);
	fputc(open, P->f);
	if (!lines) {
		for (int i = 0; i < n; i++) {
			if (i)
				fputs(", ", P->f);
			print_decl(P, &ds[i]);
		}
		fputc(close, P->f);
		return;
	}
	fputc('\n', P->f);
	for (int i = 0; i < n; i++) {
		indent(P, ind + 2);
		print_decl(P, &ds[i]);
		if (i + 1 < n)
			fputc(',', P->f);
		if (decl_has_comment(&ds[i]))
			print_decl_comment(P, &ds[i]);
		fputc('\n', P->f);
	}
	indent(P, ind);
	fputc(close, P->f);
}

static void mark(Printer *P, const Value *v)
{
	if (v->id >= 0 && v->id < P->nseen)
		P->seen[v->id] = 1;
}

static bool marked(Printer *P, const Value *v)
{
	return v->id >= 0 && v->id < P->nseen && P->seen[v->id];
}

/* A value whose declared type shows in '< >'. */
static bool wants_value_info(Printer *P, Graph *g, const Value *v)
{
	return v && v->graph == g && !v->is_input && !v->is_output && !v->init && !marked(P, v) &&
	       type_printable(&v->type);
}

/* ---------------------------------------------------------------- nodes */

static void print_graph(Printer *P, Graph *g, int ind);

static bool attr_printable(const Attr *a)
{
	if (a->ref_attr_name)
		return true;
	bool list = a->n > 0;
	switch (a->type) {
	case AT_FLOAT: case AT_INT: case AT_STRING: return true;
	case AT_TENSOR: return a->t != NULL;
	case AT_GRAPH: return a->g != NULL;
	case AT_SPARSE_TENSOR: return a->sp && a->sp->values && a->sp->indices;
	case AT_TYPE_PROTO: return a->tp && type_printable(a->tp);
	case AT_FLOATS: return !list || a->floats;
	case AT_INTS: return !list || a->ints;
	case AT_STRINGS: return !list || a->strings;
	case AT_TENSORS:
		for (int i = 0; i < a->n; i++)
			if (!a->tensors || !a->tensors[i])
				return false;
		return true;
	case AT_GRAPHS:
		for (int i = 0; i < a->n; i++)
			if (!a->graphs || !a->graphs[i])
				return false;
		return true;
	case AT_SPARSE_TENSORS:
		for (int i = 0; i < a->n; i++)
			if (!a->sparse || !a->sparse[i] || !a->sparse[i]->values || !a->sparse[i]->indices)
				return false;
		return true;
	case AT_TYPE_PROTOS:
		for (int i = 0; i < a->n; i++)
			if (!a->types || !a->types[i] || !type_printable(a->types[i]))
				return false;
		return true;
	default: return false;
	}
}

static const char *attr_kind(int type)
{
	static const char *const names[] = {
		[AT_FLOAT] = "float", [AT_INT] = "int", [AT_STRING] = "string", [AT_TENSOR] = "tensor",
		[AT_GRAPH] = "graph", [AT_FLOATS] = "floats", [AT_INTS] = "ints", [AT_STRINGS] = "strings",
		[AT_TENSORS] = "tensors", [AT_GRAPHS] = "graphs", [AT_SPARSE_TENSOR] = "sparse_tensor",
		[AT_SPARSE_TENSORS] = "sparse_tensors", [AT_TYPE_PROTO] = "type_proto",
		[AT_TYPE_PROTOS] = "type_protos",
	};
	return type >= AT_FLOAT && type <= AT_TYPE_PROTOS ? names[type] : NULL;
}

/* Attributes that need the one-per-line layout. */
static bool attr_multiline(Printer *P, const Attr *a)
{
	if (a->ref_attr_name)
		return false;
	return a->type == AT_GRAPH || (a->type == AT_GRAPHS && a->n > 0) ||
	       (a->type == AT_TENSOR && a->t && elided(P, a->t));
}

/* Prints one attribute; `ind` is the indentation of its line (for graphs).
 * Returns true if an elided note must follow. */
static bool print_attr(Printer *P, const Attr *a, int ind)
{
	FILE *f = P->f;
	print_name(P, a->name);
	if (a->ref_attr_name) {
		if (attr_kind(a->type))
			fprintf(f, ": %s", attr_kind(a->type));
		fputs(" = @", f);
		print_name(P, a->ref_attr_name);
		return false;
	}
	/* onnx 1.12 reads these kinds without a type; the others need one */
	bool untyped = (a->type <= AT_GRAPH && a->type != AT_UNDEFINED) ||
	               ((a->type == AT_FLOATS || a->type == AT_INTS || a->type == AT_STRINGS) && a->n > 0);
	if (!untyped)
		fprintf(f, ": %s", attr_kind(a->type));
	fputs(" = ", f);
	switch (a->type) {
	case AT_FLOAT: {
		uint32_t u;
		memcpy(&u, &a->f, 4);
		print_float(P, DT_FLOAT, u);
		break;
	}
	case AT_INT:
		fprintf(f, "%" PRId64, a->i);
		break;
	case AT_STRING:
		print_str(P, a->s.ptr ? a->s.ptr : "", a->s.ptr ? a->s.len : 0);
		break;
	case AT_TENSOR:
		print_tensor_literal(P, a->t, true);
		return elided(P, a->t);
	case AT_GRAPH:
		print_graph(P, a->g, ind);
		break;
	case AT_SPARSE_TENSOR:
		print_sparse_literal(P, a->sp);
		break;
	case AT_TYPE_PROTO:
		print_type(P, a->tp);
		break;
	default:
		fputc('[', f);
		for (int i = 0; i < a->n; i++) {
			if (i)
				fputs(", ", f);
			switch (a->type) {
			case AT_FLOATS: {
				uint32_t u;
				memcpy(&u, &a->floats[i], 4);
				print_float(P, DT_FLOAT, u);
				break;
			}
			case AT_INTS: fprintf(f, "%" PRId64, a->ints[i]); break;
			case AT_STRINGS:
				print_str(P, a->strings[i].ptr ? a->strings[i].ptr : "",
				          a->strings[i].ptr ? a->strings[i].len : 0);
				break;
			case AT_TENSORS: print_tensor_literal(P, a->tensors[i], false); break;
			case AT_GRAPHS: print_graph(P, a->graphs[i], ind); break;
			case AT_SPARSE_TENSORS: print_sparse_literal(P, a->sparse[i]); break;
			case AT_TYPE_PROTOS: print_type(P, a->types[i]); break;
			default: WL_UNREACHABLE();
			}
		}
		fputc(']', f);
		break;
	}
	return false;
}

/* A node name as a comment: as it is, or quoted when that is needed to
 * read it back exactly. */
static void print_node_name(Printer *P, const char *name)
{
	size_t n = strlen(name);
	bool plain = n > 0 && name[0] != '"' && !isspace((unsigned char)name[0]) &&
	             !isspace((unsigned char)name[n - 1]);
	for (size_t i = 0; plain && i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			plain = false;
	fputs("  # ", P->f);
	if (plain)
		fputs(name, P->f);
	else
		print_str(P, name, n);
}

static void print_node(Printer *P, Node *n, int ind)
{
	FILE *f = P->f;
	int nattrs = 0;
	bool lines = false;
	for (int i = 0; i < n->nattrs; i++)
		if (attr_printable(&n->attrs[i])) {
			nattrs++;
			lines |= attr_multiline(P, &n->attrs[i]);
		}
	indent(P, ind);
	print_value_list(P, n->outputs, n->noutputs);
	fputs(n->noutputs ? " = " : "= ", f);
	if (n->domain && n->domain[0]) {
		const char *s = n->domain;
		for (;;) {                  /* each part of the domain escaped alone */
			const char *dot = strchr(s, '.');
			print_name_n(P, s, dot ? (size_t)(dot - s) : strlen(s));
			fputc('.', f);
			if (!dot)
				break;
			s = dot + 1;
		}
	}
	print_name(P, n->op_type);
	if (!lines) {
		if (nattrs) {
			fputs(" <", f);
			int k = 0;
			for (int i = 0; i < n->nattrs; i++)
				if (attr_printable(&n->attrs[i])) {
					if (k++)
						fputs(", ", f);
					print_attr(P, &n->attrs[i], ind);
				}
			fputc('>', f);
		}
		fputs(" (", f);
		print_value_list(P, n->inputs, n->ninputs);
		fputc(')', f);
	} else {
		fputs(" (", f);
		print_value_list(P, n->inputs, n->ninputs);
		fputs(") <\n", f);
		int k = 0;
		for (int i = 0; i < n->nattrs; i++) {
			const Attr *a = &n->attrs[i];
			if (!attr_printable(a))
				continue;
			indent(P, ind + 2);
			bool note = print_attr(P, a, ind + 2);
			if (++k < nattrs)
				fputc(',', f);
			if (note) {
				fputs("  # ", f);
				print_elided_note(P, a->t);
			}
			fputc('\n', f);
		}
		indent(P, ind);
		fputc('>', f);
	}
	if (n->name && n->name[0])
		print_node_name(P, n->name);
	fputc('\n', f);
}

/* ---------------------------------------------------------------- graphs */

static void print_body(Printer *P, Graph *g, int ind)
{
	indent(P, ind);
	fputs("{\n", P->f);
	FOR_NODES(g, n)
		print_node(P, n, ind + 2);
	indent(P, ind);
	fputc('}', P->f);
}

/* "name (inputs) => (outputs) < decls > { nodes }", from the current
 * position; lines after the first are indented by `ind`. No newline at the end. */
static void print_graph(Printer *P, Graph *g, int ind)
{
	DeclForm *ds = NULL;
	int cap = g->ninputs + g->noutputs + g->ninits + g->nsparse + g->nvalues + 1, n = 0;
	ds = calloc((size_t)cap, sizeof *ds);
	if (!ds)
		wl_die(__FILE__, __LINE__, "out of memory");

	print_name(P, g->name);
	fputc(' ', P->f);
	for (int i = 0; i < g->ninputs; i++)
		ds[n++] = decl_form(P, g->inputs[i], g->inputs[i]->graph == g ? g->inputs[i]->init : NULL);
	print_decl_list(P, ds, n, '(', ')', false, ind);
	fputs(" => ", P->f);
	n = 0;
	for (int i = 0; i < g->noutputs; i++)
		ds[n++] = decl_form(P, g->outputs[i], NULL);
	print_decl_list(P, ds, n, '(', ')', false, ind);
	fputc('\n', P->f);

	/* initializers, sparse initializers, then declared types */
	n = 0;
	for (int i = 0; i < g->ninits; i++) {
		Value *v = g->inits[i];
		if (!v->is_input && v->init)
			ds[n++] = decl_form(P, v, v->init);
		mark(P, v);
	}
	for (int i = 0; i < g->nsparse; i++) {
		DeclForm df = {0};
		df.sp = g->sparse_inits[i];
		if (df.sp && df.sp->values && df.sp->indices)
			ds[n++] = df;
	}
	FOR_NODES(g, nd)
		for (int i = 0; i < nd->noutputs && n < cap; i++)
			if (wants_value_info(P, g, nd->outputs[i])) {
				ds[n++] = decl_form(P, nd->outputs[i], NULL);
				mark(P, nd->outputs[i]);
			}
	for (int i = 0; i < g->nvalues && n < cap; i++) {
		Value *v = g->values[i];
		if (v->nusers > 0 && !v->producer && wants_value_info(P, g, v)) {
			ds[n++] = decl_form(P, v, NULL);
			mark(P, v);
		}
	}
	if (n) {
		indent(P, ind);
		print_decl_list(P, ds, n, '<', '>', true, ind);
		fputc('\n', P->f);
	}
	free(ds);
	print_body(P, g, ind);
}

static void print_opsets(Printer *P, const Opset *ops, int n)
{
	fputc('[', P->f);
	for (int i = 0; i < n; i++) {
		if (i)
			fputs(", ", P->f);
		print_cstr(P, ops[i].domain);
		fprintf(P->f, " : %" PRId64, ops[i].version);
	}
	fputc(']', P->f);
}

static void print_header(Printer *P)
{
	Module *m = P->m;
	FILE *f = P->f;
	fprintf(f, "<\n  ir_version: %" PRId64 ",\n  opset_import: ", m->ir_version);
	print_opsets(P, m->opsets, m->nopsets);
	const struct { const char *key, *val; } strs[] = {
		{"producer_name", m->producer_name}, {"producer_version", m->producer_version},
		{"domain", m->domain},
	};
	for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
		if (strs[i].val && strs[i].val[0]) {
			fprintf(f, ",\n  %s: ", strs[i].key);
			print_cstr(P, strs[i].val);
		}
	if (m->model_version)
		fprintf(f, ",\n  model_version: %" PRId64, m->model_version);
	if (m->doc && m->doc[0]) {
		fputs(",\n  doc_string: ", f);
		print_cstr(P, m->doc);
	}
	if (m->nmetadata) {
		fputs(",\n  metadata_props: [", f);
		for (int i = 0; i < m->nmetadata; i++) {
			if (i)
				fputs(", ", f);
			print_cstr(P, m->metadata[i].key);
			fputs(" : ", f);
			print_cstr(P, m->metadata[i].value);
		}
		fputc(']', f);
	}
	fputs("\n>\n", f);
}

static void print_function(Printer *P, const Function *fn)
{
	FILE *f = P->f;
	fputs("<\n  domain: ", f);
	print_cstr(P, fn->domain);
	fputs(",\n  opset_import: ", f);
	print_opsets(P, fn->opsets, fn->nopsets);
	if (fn->doc && fn->doc[0]) {
		fputs(",\n  doc_string: ", f);
		print_cstr(P, fn->doc);
	}
	fputs("\n>\n", f);
	print_name(P, fn->name);
	if (fn->nattr_names) {
		fputs(" <", f);
		for (int i = 0; i < fn->nattr_names; i++) {
			if (i)
				fputs(", ", f);
			print_name(P, fn->attr_names[i]);
		}
		fputc('>', f);
	}
	Graph *g = fn->body;
	fputs(" (", f);
	if (g)
		print_value_list(P, g->inputs, g->ninputs);
	fputs(") => (", f);
	if (g)
		print_value_list(P, g->outputs, g->noutputs);
	fputs(")\n", f);
	if (g)
		print_body(P, g, 0);
	else
		fputs("{\n}", f);
	fputc('\n', f);
}

int text_print(Module *m, FILE *f, const PrintOptions *opt)
{
	Printer P = {0};
	P.f = f;
	P.m = m;
	P.print_weights = opt && opt->print_weights;
	P.elide_over = opt && opt->elide_over > 0 ? opt->elide_over : 16;
	P.nseen = m->next_value_id;
	P.seen = calloc((size_t)(P.nseen > 0 ? P.nseen : 1), 1);
	if (!P.seen)
		wl_die(__FILE__, __LINE__, "out of memory");
	print_header(&P);
	if (m->graph) {
		print_graph(&P, m->graph, 0);
		fputc('\n', f);
	}
	for (int i = 0; i < m->nfuncs; i++)
		print_function(&P, m->funcs[i]);
	free(P.seen);
	return ferror(f) ? WL_ERR : WL_OK;
}

int text_print_file(Module *m, const char *path, const PrintOptions *opt, Diag *d)
{
	AtomicFile af;
	if (atomic_open(&af, path, d) != WL_OK)
		return WL_ERR;
	if (text_print(m, af.f, opt) != WL_OK) {
		atomic_abort(&af);
		return diag_fail(d, "%s: write failed", path);
	}
	return atomic_commit(&af, d);
}
