/* test_text.c — the ONNX textual syntax: parser (text_parse.c) and printer
 * (text_print.c). parse → print → parse → print is a fixed point; every
 * attribute kind, every dtype (bit-exact), names with punctuation, node
 * names, subgraphs, functions, type comments, elided tensors; errors give
 * WL_ERR and "FILE:LINE:COL: ..."; a seeded mutation loop never crashes. */
#include <check.h>
#include "check_run.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "compiler/onnx/onnx.h"

static const PrintOptions full = {.print_weights = true};

static char *to_text(Module *m, const PrintOptions *o)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(text_print(m, f, o), WL_OK);
	ck_assert_int_eq(fclose(f), 0);
	return buf;
}

static Module *parse_ok(const char *src)
{
	Module *m = NULL;
	Diag d = {0};
	int rc = text_parse(src, strlen(src), "t.onnxtxt", &m, &d);
	if (rc != WL_OK)
		ck_abort_msg("parse failed: %s\n--- input:\n%s", d.msg, src);
	ck_assert_ptr_nonnull(m);
	return m;
}

/* print(parse(print(m))) == print(m); returns print(m) (malloc'ed). */
static char *fixed_point(Module *m, const PrintOptions *o)
{
	char *t1 = to_text(m, o);
	Module *m2 = parse_ok(t1);
	char *t2 = to_text(m2, o);
	if (strcmp(t1, t2) != 0)
		ck_abort_msg("not a fixed point:\n--- first:\n%s\n--- second:\n%s", t1, t2);
	module_free(m2);
	free(t2);
	return t1;
}

/* Parses src, checks the fixed point, returns the module. */
static Module *roundtrip(const char *src)
{
	Module *m = parse_ok(src);
	free(fixed_point(m, &full));
	return m;
}

static Node *nth_node(Graph *g, int i)
{
	FOR_NODES(g, n)
		if (i-- == 0)
			return n;
	ck_abort_msg("no node %d", i);
	return NULL;
}

static bool contains(const char *hay, const char *needle)
{
	return strstr(hay, needle) != NULL;
}

/* ---------------------------------------------------------------- basics */

START_TEST(syntax_md_example)
{
	Module *m = roundtrip(
		"<\n  ir_version: 7,\n  opset_import: [ \"\" : 10 ]\n>\n"
		"agraph (float[N, 128] X, float[128, 10] W, float[10] B) => (float[N, 10] C)\n"
		"{\n    T = MatMul(X, W)\n    S = Add(T, B)\n    C = Softmax(S)\n}\n");
	ck_assert_int_eq(m->ir_version, 7);
	ck_assert_int_eq(module_opset(m, ""), 10);
	Graph *g = m->graph;
	ck_assert_str_eq(g->name, "agraph");
	ck_assert_int_eq(g->ninputs, 3);
	ck_assert_int_eq(g->noutputs, 1);
	ck_assert_int_eq(g->nnodes, 3);
	Value *x = g->inputs[0];
	ck_assert_int_eq(x->type.kind, TY_TENSOR);
	ck_assert_int_eq(x->type.elem, DT_FLOAT);
	ck_assert_int_eq(x->type.rank, 2);
	ck_assert_int_eq(x->type.dims[0].kind, DIM_PARAM);
	ck_assert_str_eq(x->type.dims[0].param, "N");
	ck_assert_int_eq(x->type.dims[1].value, 128);
	Node *mm = nth_node(g, 0);
	ck_assert_int_eq(mm->op, OP_MatMul);
	ck_assert_ptr_eq(mm->inputs[0], x);
	ck_assert_ptr_eq(nth_node(g, 1)->inputs[0], mm->outputs[0]);
	ck_assert_ptr_eq(g->outputs[0], nth_node(g, 2)->outputs[0]);
	Diag d = {0};
	ck_assert_int_eq(ir_verify(m, &d), WL_OK);
	module_free(m);
}
END_TEST

START_TEST(header_fields_and_layout)
{
	const char *src =
		"<\n"
		"  ir_version: 8,\n"
		"  opset_import: [\"\" : 17, \"com.microsoft\" : 1],\n"
		"  producer_name: \"pytorch\",\n"
		"  producer_version: \"1.13.1\",\n"
		"  domain: \"ai.wlower.test\",\n"
		"  model_version: 3,\n"
		"  doc_string: \"two\\nlines\",\n"
		"  metadata_props: [\"k\" : \"v\", \"k2\" : \"\"]\n"
		">\n"
		"main (float[N,4] x) => (float[N,4] y)\n"
		"<\n"
		"  float[4] b = {1.0, 2.0, 3.0, 4.0},\n"
		"  float[N,4] t\n"
		">\n"
		"{\n"
		"  t = Add (x, b)  # /add\n"
		"  y = com.microsoft.FastGelu (t)\n"
		"}\n";
	Module *m = parse_ok(src);
	char *t = to_text(m, &full);
	ck_assert_str_eq(t, src);   /* already in printed form */
	ck_assert_str_eq(m->producer_version, "1.13.1");
	ck_assert_str_eq(m->doc, "two\nlines");
	ck_assert_int_eq(m->model_version, 3);
	ck_assert_int_eq(m->nmetadata, 2);
	ck_assert_str_eq(m->metadata[1].key, "k2");
	ck_assert_str_eq(nth_node(m->graph, 0)->name, "/add");
	ck_assert_str_eq(nth_node(m->graph, 1)->domain, "com.microsoft");
	ck_assert_str_eq(nth_node(m->graph, 1)->op_type, "FastGelu");
	ck_assert_int_eq(m->graph->inits[0]->init->dtype, DT_FLOAT);
	free(t);
	module_free(m);
}
END_TEST

/* value_infos of shape inference results are printed */
START_TEST(value_infos_printed)
{
	Module *m = parse_ok("g (float[2] x) => (y) { t = Relu (x)  y = Neg (t) }");
	Graph *g = m->graph;
	Value *t = graph_find(g, "t");
	int64_t d2[1] = {2};
	type_set_tensor(m->arena, &t->type, DT_FLOAT, 1, d2);
	char *s = to_text(m, &full);
	ck_assert_msg(contains(s, "<\n  float[2] t\n>\n"), "%s", s);
	ck_assert_msg(contains(s, "=> (y)"), "%s", s);
	free(s);
	free(fixed_point(m, &full));
	module_free(m);
}
END_TEST

/* ---------------------------------------------------------------- attributes */

START_TEST(every_attribute_kind)
{
	Module *m = roundtrip(
		"<ir_version: 8, opset_import: [\"\" : 17]>\n"
		"g (float[2] x, bool c) => (y, z)\n"
		"{\n"
		"  y = Op <i = -3, f = 0.5, f2 = 1e-05, fi: float = 2, s = \"str\\\"q\", "
		"ints = [1, -2, 3], floats = [1.5, 2, -0.0], strs = [\"a\", \"\"], "
		"t = float[2] {1.0, 2.0}, tn = int64[2,1] name {7, 8}, ts = float {3.0}, "
		"ei: ints = [], ef: floats = [], es: strings = [], "
		"tl: tensors = [float[1] {1.0}, int32 {2}], "
		"sp = sparse_tensor([3, 4], float[2] {1.0, 2.0}, int64[2] {1, 5}), "
		"spl: sparse_tensors = [sparse_tensor([2], int8[1] {1}, int64[1] {0})], "
		"tp: type_proto = seq(float[N]), tps: type_protos = [float, map(int64, string[])], "
		"inf1 = inf, inf2 = -inf, nan1 = nan> (x)\n"
		"  z = If (c) <\n"
		"    then_branch = then_g () => (float[2] a)\n"
		"    {\n"
		"      a = Identity (x)\n"
		"    },\n"
		"    else_branch = else_g () => (float[2] b)\n"
		"    {\n"
		"      b = Neg (x)\n"
		"    },\n"
		"    gl: graphs = [g1 () => (o) { o = Identity (x) }, g2 () => (o) { o = Identity (x) }]\n"
		"  >  # the if\n"
		"}\n");
	Node *n = nth_node(m->graph, 0);
	Attr *a;
	ck_assert_int_eq(attr_int(n, "i", 0), -3);
	ck_assert(attr_float(n, "f", 0) == 0.5f);
	ck_assert(attr_float(n, "f2", 0) == 1e-05f);
	ck_assert_int_eq(node_attr(n, "fi")->type, AT_FLOAT);
	ck_assert(node_attr(n, "fi")->f == 2.0f);
	a = node_attr(n, "s");
	ck_assert_int_eq(a->type, AT_STRING);
	ck_assert_int_eq(a->s.len, 5);
	ck_assert(memcmp(a->s.ptr, "str\"q", 5) == 0);
	a = node_attr(n, "ints");
	ck_assert_int_eq(a->type, AT_INTS);
	ck_assert_int_eq(a->n, 3);
	ck_assert_int_eq(a->ints[1], -2);
	a = node_attr(n, "floats");
	ck_assert_int_eq(a->type, AT_FLOATS);
	ck_assert(a->floats[1] == 2.0f && signbit(a->floats[2]));
	a = node_attr(n, "strs");
	ck_assert_int_eq(a->type, AT_STRINGS);
	ck_assert_int_eq(a->strings[1].len, 0);
	a = node_attr(n, "t");
	ck_assert_int_eq(a->type, AT_TENSOR);
	ck_assert_int_eq(a->t->dtype, DT_FLOAT);
	ck_assert(((const float *)a->t->data)[1] == 2.0f);
	a = node_attr(n, "tn");
	ck_assert_str_eq(a->t->name, "name");
	ck_assert_int_eq(tensor_get_i64(a->t, 1), 8);
	ck_assert_int_eq(node_attr(n, "ts")->t->ndim, 0);
	ck_assert_int_eq(node_attr(n, "ei")->type, AT_INTS);
	ck_assert_int_eq(node_attr(n, "ei")->n, 0);
	ck_assert_int_eq(node_attr(n, "ef")->type, AT_FLOATS);
	ck_assert_int_eq(node_attr(n, "es")->type, AT_STRINGS);
	a = node_attr(n, "tl");
	ck_assert_int_eq(a->type, AT_TENSORS);
	ck_assert_int_eq(a->n, 2);
	ck_assert_int_eq(a->tensors[1]->dtype, DT_INT32);
	a = node_attr(n, "sp");
	ck_assert_int_eq(a->type, AT_SPARSE_TENSOR);
	ck_assert_int_eq(a->sp->ndim, 2);
	ck_assert_int_eq(a->sp->dims[1], 4);
	ck_assert_int_eq(tensor_get_i64(a->sp->indices, 1), 5);
	ck_assert_int_eq(node_attr(n, "spl")->type, AT_SPARSE_TENSORS);
	a = node_attr(n, "tp");
	ck_assert_int_eq(a->type, AT_TYPE_PROTO);
	ck_assert_int_eq(a->tp->kind, TY_SEQUENCE);
	ck_assert_int_eq(a->tp->inner->dims[0].kind, DIM_PARAM);
	a = node_attr(n, "tps");
	ck_assert_int_eq(a->type, AT_TYPE_PROTOS);
	ck_assert_int_eq(a->types[1]->kind, TY_MAP);
	ck_assert_int_eq(a->types[1]->map_key, DT_INT64);
	ck_assert_int_eq(a->types[1]->inner->has_shape, false);
	ck_assert(isinf(attr_float(n, "inf1", 0)) && attr_float(n, "inf2", 0) < 0);
	ck_assert(isnan(attr_float(n, "nan1", 0)));

	Node *iff = nth_node(m->graph, 1);
	ck_assert_str_eq(iff->name, "the if");
	a = node_attr(iff, "then_branch");
	ck_assert_int_eq(a->type, AT_GRAPH);
	Graph *tg = a->g;
	ck_assert_str_eq(tg->name, "then_g");
	ck_assert_ptr_eq(tg->parent, m->graph);
	ck_assert_ptr_eq(tg->owner, iff);
	/* the branch reads the outer x */
	ck_assert_ptr_eq(tg->first->inputs[0], m->graph->inputs[0]);
	ck_assert_int_eq(node_attr(iff, "gl")->type, AT_GRAPHS);
	ck_assert_int_eq(node_attr(iff, "gl")->n, 2);
	module_free(m);
}
END_TEST

START_TEST(function_with_attribute_refs)
{
	Module *m = roundtrip(
		"<ir_version: 8, opset_import: [\"\" : 17, \"local\" : 1]>\n"
		"g (float[2] x) => (y) { y = local.Scale <alpha = 2.0> (x) }\n"
		"<domain: \"local\", opset_import: [\"\" : 17], doc_string: \"scales\">\n"
		"Scale <alpha, beta> (a) => (b)\n"
		"{\n"
		"  k = Constant <value_float: float = @alpha> ()\n"
		"  b = Mul (a, k)\n"
		"}\n"
		"<domain: \"local\", opset_import: []>\n"
		"Empty () => () {}\n");
	ck_assert_int_eq(m->nfuncs, 2);
	Function *fn = m->funcs[0];
	ck_assert_str_eq(fn->name, "Scale");
	ck_assert_str_eq(fn->domain, "local");
	ck_assert_str_eq(fn->doc, "scales");
	ck_assert_int_eq(fn->nattr_names, 2);
	ck_assert_str_eq(fn->attr_names[1], "beta");
	ck_assert_int_eq(fn->nopsets, 1);
	ck_assert_int_eq(fn->body->ninputs, 1);
	ck_assert_int_eq(fn->body->noutputs, 1);
	Attr *a = node_attr(fn->body->first, "value_float");
	ck_assert_str_eq(a->ref_attr_name, "alpha");
	ck_assert_int_eq(a->type, AT_FLOAT);
	ck_assert_ptr_eq(fn->body->last->inputs[1], fn->body->first->outputs[0]);
	module_free(m);
}
END_TEST

/* ---------------------------------------------------------------- dtypes */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* A module whose one initializer holds `n` elements of dtype dt with
 * bytes from fill (or random bytes). */
static Module *one_init(int dt, int64_t n, const void *fill)
{
	Module *m = module_new("dt.onnx");
	module_set_opset(m, "", 17);
	Graph *g = m->graph = graph_new(m, NULL, NULL, "g");
	Value *v = graph_value(g, "w");
	Tensor *t = tensor_new(m->arena, "w", dt, 1, &n);
	void *p = tensor_alloc_data(m->arena, t);
	if (dt == DT_STRING) {
		StrRef *s = p;
		for (int64_t i = 0; i < n; i++) {
			size_t len = (size_t)(rnd() % 6);
			char *c = arena_alloc(m->arena, len + 1);
			for (size_t k = 0; k < len; k++)
				c[k] = (char)(rnd() & 0xff);
			s[i].ptr = c;
			s[i].len = len;
		}
	} else if (fill) {
		memcpy(p, fill, t->nbytes);
	} else {
		for (size_t i = 0; i < t->nbytes; i++)
			((unsigned char *)p)[i] = (unsigned char)rnd();
	}
	graph_set_init(g, v, t);
	Node *nd = node_new(g, "Identity", "", "");
	node_add_input(nd, v);
	Value *y = graph_value(g, "y");
	node_add_output(nd, y);
	node_append(g, nd);
	graph_add_output(g, y);
	return m;
}

static void check_same_tensor(const Tensor *a, const Tensor *b)
{
	ck_assert_int_eq(a->dtype, b->dtype);
	ck_assert_int_eq(a->ndim, b->ndim);
	ck_assert_int_eq(tensor_numel(a), tensor_numel(b));
	if (a->dtype == DT_STRING) {
		for (int64_t i = 0; i < tensor_numel(a); i++) {
			ck_assert_int_eq(a->strs[i].len, b->strs[i].len);
			ck_assert(memcmp(a->strs[i].ptr, b->strs[i].ptr, a->strs[i].len) == 0);
		}
		return;
	}
	ck_assert_int_eq(a->nbytes, b->nbytes);
	for (size_t i = 0; i < a->nbytes; i++)
		if (((const unsigned char *)a->data)[i] != ((const unsigned char *)b->data)[i])
			ck_abort_msg("%s: byte %zu differs: %02x vs %02x", dtype_name(a->dtype), i,
			             ((const unsigned char *)a->data)[i], ((const unsigned char *)b->data)[i]);
}

static void check_dtype_roundtrip(int dt, int64_t n, const void *fill)
{
	Module *m = one_init(dt, n, fill);
	char *t = fixed_point(m, &full);
	Module *m2 = parse_ok(t);
	ck_assert_int_eq(m2->graph->ninits, 1);
	check_same_tensor(m->graph->inits[0]->init, m2->graph->inits[0]->init);
	free(t);
	module_free(m2);
	module_free(m);
}

START_TEST(every_dtype_bit_exact)
{
	/* every 16-bit pattern of float16 and bfloat16, every float8 byte */
	static uint16_t all16[65536];
	for (int i = 0; i < 65536; i++)
		all16[i] = (uint16_t)i;
	check_dtype_roundtrip(DT_FLOAT16, 65536, all16);
	check_dtype_roundtrip(DT_BFLOAT16, 65536, all16);
	static uint8_t all8[256];
	for (int i = 0; i < 256; i++)
		all8[i] = (uint8_t)i;
	int f8[] = {DT_FLOAT8E4M3FN, DT_FLOAT8E4M3FNUZ, DT_FLOAT8E5M2, DT_FLOAT8E5M2FNUZ,
	            DT_INT8, DT_UINT8, DT_UINT4, DT_INT4};
	for (size_t k = 0; k < sizeof f8 / sizeof f8[0]; k++)
		check_dtype_roundtrip(f8[k], f8[k] == DT_INT4 || f8[k] == DT_UINT4 ? 512 : 256, all8);
	/* floats: special values and random bit patterns (NaN payloads too) */
	static uint32_t f32[20000];
	uint32_t special[] = {0, 0x80000000, 1, 0x807fffff, 0x7f800000, 0xff800000, 0x7fc00000,
	                      0xffc00000, 0x7f800001, 0x3f800000, 0x33d6bf95, 0x7f7fffff};
	for (int i = 0; i < 20000; i++)
		f32[i] = i < 12 ? special[i] : (uint32_t)rnd();
	check_dtype_roundtrip(DT_FLOAT, 20000, f32);
	static uint64_t f64[5000];
	for (int i = 0; i < 5000; i++)
		f64[i] = i == 0 ? 1 : i == 1 ? 0x8000000000000000ull : rnd();
	check_dtype_roundtrip(DT_DOUBLE, 5000, f64);
	int rest[] = {DT_INT16, DT_UINT16, DT_INT32, DT_UINT32, DT_INT64, DT_UINT64,
	              DT_COMPLEX64, DT_COMPLEX128, DT_STRING};
	for (size_t k = 0; k < sizeof rest / sizeof rest[0]; k++)
		check_dtype_roundtrip(rest[k], 300, NULL);
	uint8_t bools[4] = {0, 1, 1, 0};
	check_dtype_roundtrip(DT_BOOL, 4, bools);
}
END_TEST

START_TEST(dtype_literals)
{
	Module *m = roundtrip(
		"g () => (y) <\n"
		"  bool[4] b = {true, false, 1, 0},\n"
		"  float16[3] h = {0.1, 65504, -inf},\n"
		"  bfloat16[2] bf = {1.5, nan},\n"
		"  double d = {0.1},\n"
		"  uint64[1] u = {18446744073709551615},\n"
		"  int64[1] i = {-9223372036854775808},\n"
		"  complex64[2] c = {1.0, 2.0, 3.0, -4.0},\n"
		"  string[2] s = {\"x\\x00y\", \"\\xff\"},\n"
		"  int4[3] q = {-8, 7, 1},\n"
		"  float[0] e = {},\n"
		"  float f = {nan(0x7fc00001)}\n"
		"> { y = Identity (b) }\n");
	Graph *g = m->graph;
	Tensor *h = graph_find(g, "h")->init;
	ck_assert_int_eq(((const uint16_t *)h->data)[0], 0x2e66);   /* 0.1 in half */
	ck_assert_int_eq(((const uint16_t *)h->data)[1], 0x7bff);
	ck_assert_int_eq(((const uint16_t *)h->data)[2], 0xfc00);
	ck_assert_int_eq(((const uint16_t *)graph_find(g, "bf")->init->data)[0], 0x3fc0);
	ck_assert(((const double *)graph_find(g, "d")->init->data)[0] == 0.1);
	ck_assert(((const uint64_t *)graph_find(g, "u")->init->data)[0] == UINT64_MAX);
	ck_assert(((const int64_t *)graph_find(g, "i")->init->data)[0] == INT64_MIN);
	ck_assert(((const float *)graph_find(g, "c")->init->data)[3] == -4.0f);
	Tensor *s = graph_find(g, "s")->init;
	ck_assert_int_eq(s->strs[0].len, 3);
	ck_assert_int_eq(s->strs[0].ptr[1], 0);
	ck_assert_int_eq((unsigned char)s->strs[1].ptr[0], 0xff);
	Tensor *q = graph_find(g, "q")->init;
	ck_assert_int_eq(tensor_get_i64(q, 0), -8);
	ck_assert_int_eq(tensor_get_i64(q, 2), 1);
	ck_assert_int_eq(tensor_numel(graph_find(g, "e")->init), 0);
	uint32_t fb;
	memcpy(&fb, graph_find(g, "f")->init->data, 4);
	ck_assert_uint_eq(fb, 0x7fc00001);
	module_free(m);
}
END_TEST

START_TEST(float_printing)
{
	Module *m = parse_ok("g () => (y) <float[4] w = {0.1, 1, -0.0, 3e-39}> { y = Identity (w) }");
	char *s = to_text(m, &full);
	/* shortest exact forms; a subnormal exactly (onnx 1.12's stof needs that) */
	ck_assert_msg(contains(s, "float[4] w = {0.1, 1.0, -0.0, 3.00000064591599977"), "%s", s);
	free(s);
	module_free(m);
	m = parse_ok("g () => (y) { y = Op <a = 1.0, b = 100000000.0, c = 1e-07> () }");
	s = to_text(m, &full);
	ck_assert_msg(contains(s, "<a = 1.0, b = 1e+08, c = 1e-07>"), "%s", s);
	free(s);
	module_free(m);
	uint64_t bits;
	ck_assert_int_eq(text_float_bits(DT_FLOAT, "1e39", &bits), 2);
	ck_assert_int_eq(text_float_bits(DT_FLOAT, "x", &bits), 1);
	ck_assert_int_eq(text_float_bits(DT_FLOAT16, "-nan", &bits), 0);
	ck_assert_uint_eq(bits, 0xfe00);
	ck_assert(text_float_value(DT_FLOAT8E4M3FN, 0x7e) == 448.0);
	ck_assert(text_float_value(DT_FLOAT8E5M2, 0x7b) == 57344.0);
}
END_TEST

/* ---------------------------------------------------------------- names */

static const char *const weird_names[] = {
	"/layers.0/self_attn/MatMul_output_0", "onnx::MatMul_123", "layers.0.fc1.weight",
	"a__b", "__init__", "x_", "_", "__", "_1", "1abc", "0", "float", "nan", "inf", "seq",
	"int4", "a b", "caf\xc3\xa9", "__n", "__s", "a__u", "q\"uote", "back\\slash", "tab\there",
	"x-y", "a__xzz", "__x41", "ends_/", "unk__123",
};

START_TEST(names_with_punctuation)
{
	int n = (int)(sizeof weird_names / sizeof weird_names[0]);
	Module *m = module_new("names.onnx");
	module_set_opset(m, "", 17);
	Graph *g = m->graph = graph_new(m, NULL, NULL, "main-graph.v1");
	Value *prev = graph_value(g, "in:0");
	int64_t d1[1] = {2};
	type_set_tensor(m->arena, &prev->type, DT_FLOAT, 1, d1);
	prev->type.dims[0].kind = DIM_PARAM;
	prev->type.dims[0].param = "past + 1";
	graph_add_input(g, prev);
	for (int i = 0; i < n; i++) {
		Node *nd = node_new(g, i % 2 ? "Relu" : "My-Op", i % 2 ? "" : "com.ex-ample..x", weird_names[n - 1 - i]);
		node_add_input(nd, prev);
		Value *v = graph_value(g, weird_names[i]);
		node_add_output(nd, v);
		node_append(g, nd);
		prev = v;
	}
	graph_add_output(g, prev);
	char *t = fixed_point(m, &full);
	Module *m2 = parse_ok(t);
	Graph *g2 = m2->graph;
	ck_assert_str_eq(g2->name, "main-graph.v1");
	ck_assert_str_eq(g2->inputs[0]->type.dims[0].param, "past + 1");
	for (int i = 0; i < n; i++) {
		Node *nd = nth_node(g2, i);
		ck_assert_msg(graph_find_local(g2, weird_names[i]) != NULL, "lost %s in\n%s", weird_names[i], t);
		ck_assert_str_eq(nd->outputs[0]->name, weird_names[i]);
		ck_assert_str_eq(nd->name, weird_names[n - 1 - i]);
		ck_assert_str_eq(nd->domain, i % 2 ? "" : "com.ex-ample..x");
		ck_assert_str_eq(nd->op_type, i % 2 ? "Relu" : "My-Op");
	}
	/* the printed form is made of identifiers only (what onnx 1.12 reads) */
	ck_assert_msg(contains(t, "__slayers__d0__sself_attn__sMatMul_output_0 ="), "%s", t);
	ck_assert_msg(contains(t, "onnx__c__cMatMul_123"), "%s", t);
	ck_assert_msg(contains(t, "__nfloat"), "%s", t);
	ck_assert_msg(contains(t, "__n1abc"), "%s", t);
	ck_assert_msg(contains(t, "# /layers.0/self_attn/MatMul_output_0\n"), "%s", t);
	free(t);
	module_free(m2);
	module_free(m);
}
END_TEST

START_TEST(quoted_names_and_empty_optionals)
{
	/* newer onnx's quoted names and node labels; "" and nothing for absent values */
	Module *m = roundtrip(
		"\"main graph\" (float[2] \"in/0\") => (\"y.0\")\n"
		"{\n"
		"  [\"my node\"] \"t:1\", , z = Op (\"in/0\", , \"\", \"in/0\")\n"
		"  \"\", w = Op2 (, \"t:1\")\n"
		"  \"y.0\" = Add (\"t:1\", z)  # \"quoted \\\"name\\\" \"\n"
		"}\n");
	Graph *g = m->graph;
	ck_assert_str_eq(g->name, "main graph");
	Node *a = nth_node(g, 0);
	ck_assert_str_eq(a->name, "my node");
	ck_assert_int_eq(a->noutputs, 3);
	ck_assert_ptr_null(a->outputs[1]);
	ck_assert_int_eq(a->ninputs, 4);
	ck_assert_ptr_null(a->inputs[1]);
	ck_assert_ptr_null(a->inputs[2]);
	Node *b = nth_node(g, 1);
	ck_assert_ptr_null(b->outputs[0]);
	ck_assert_ptr_null(b->inputs[0]);
	ck_assert_str_eq(nth_node(g, 2)->name, "quoted \"name\" ");
	ck_assert_str_eq(g->outputs[0]->name, "y.0");
	char *t = to_text(m, &full);
	ck_assert_msg(contains(t, "\"\", w = Op2 (\"\", t__c1)"), "%s", t);
	ck_assert_msg(contains(t, "t__c1, , z = Op (in__s0, , , in__s0)  # my node\n"), "%s", t);
	free(t);
	module_free(m);
}
END_TEST

/* ---------------------------------------------------------------- types */

START_TEST(type_comments_for_types_onnx_112_cannot_read)
{
	Module *m = roundtrip(
		"g (seq(float[N]) s, map(int64, optional(float)) mp, float8e4m3fn[2] f8, float[] u, float sc)"
		" => (sparse_tensor(float[3,4]) sp)\n"
		"<optional(seq(float)) o>\n"
		"{ sp = Op (s, mp, f8, u, sc)  o = Op2 () }\n");
	Graph *g = m->graph;
	ck_assert_int_eq(g->inputs[0]->type.kind, TY_SEQUENCE);
	ck_assert_int_eq(g->inputs[1]->type.kind, TY_MAP);
	ck_assert_int_eq(g->inputs[1]->type.inner->kind, TY_OPTIONAL);
	ck_assert_int_eq(g->inputs[1]->type.inner->inner->has_shape, true);  /* scalar */
	ck_assert_int_eq(g->inputs[2]->type.elem, DT_FLOAT8E4M3FN);
	ck_assert_int_eq(g->inputs[3]->type.has_shape, false);
	ck_assert_int_eq(g->inputs[4]->type.rank, 0);
	ck_assert_int_eq(g->outputs[0]->type.kind, TY_SPARSE_TENSOR);
	Value *o = graph_find(g, "o");
	ck_assert_int_eq(o->type.kind, TY_OPTIONAL);
	char *t = to_text(m, &full);
	ck_assert_msg(contains(t, "g (\n  s,  # type: seq(float[N])\n"), "%s", t);
	ck_assert_msg(contains(t, "  f8,  # type: float8e4m3fn[2]\n"), "%s", t);
	ck_assert_msg(contains(t, "  float[] u,\n  float sc\n) => (\n  sp  # type: sparse_tensor(float[3,4])\n)"), "%s", t);
	ck_assert_msg(contains(t, "  o  # type: optional(seq(float))\n"), "%s", t);
	free(t);
	module_free(m);
}
END_TEST

/* ---------------------------------------------------------------- elision */

START_TEST(large_initializers_elided)
{
	static float big[384 * 16];
	for (int i = 0; i < 384 * 16; i++)
		big[i] = (float)i;
	Module *m = one_init(DT_FLOAT, 384 * 16, big);
	char *t = to_text(m, NULL);
	char hex[65];
	sha256_hex(big, sizeof big, hex);
	char want[160];
	snprintf(want, sizeof want, "  float[6144] w  # elided: 6144 x float, sha256 %.16s\n", hex);
	ck_assert_msg(contains(t, want), "want %s in\n%s", want, t);
	/* onnx 1.12 and we read the placeholder as a declared type */
	Module *m2 = parse_ok(t);
	Value *w = graph_find(m2->graph, "w");
	ck_assert_ptr_null(w->init);
	ck_assert_int_eq(w->type.elem, DT_FLOAT);
	ck_assert_int_eq(w->type.dims[0].value, 6144);
	module_free(m2);
	free(t);
	/* elide_over and print_weights */
	PrintOptions o = {.elide_over = 10000};
	t = to_text(m, &o);
	ck_assert_msg(contains(t, "float[6144] w = {0.0, 1.0, 2.0"), "%.200s", t);
	free(t);
	module_free(m);

	/* int4 has no 1.12 type name: the type goes in the comment, before the note */
	m = one_init(DT_INT4, 64, NULL);
	t = to_text(m, NULL);
	ck_assert_msg(contains(t, "  w  # type: int4[64], elided: 64 x int4, sha256 "), "%s", t);
	m2 = parse_ok(t);
	ck_assert_int_eq(graph_find(m2->graph, "w")->type.elem, DT_INT4);
	module_free(m2);
	free(t);
	module_free(m);

	/* strings are elided too */
	m = one_init(DT_STRING, 20, NULL);
	t = to_text(m, NULL);
	ck_assert_msg(contains(t, "string[20] w  # elided: 20 x string, sha256 "), "%s", t);
	free(t);
	module_free(m);

	/* an elided attribute tensor prints '{}' with the note, and reading it back fails clearly */
	m = parse_ok("g () => (y) { y = Constant <value = float[20] {0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9}> () }");
	t = to_text(m, NULL);
	ck_assert_msg(contains(t, "y = Constant () <\n    value = float[20] {}  # elided: 20 x float, sha256 "), "%s", t);
	Diag d = {0};
	Module *bad = NULL;
	ck_assert_int_eq(text_parse(t, strlen(t), "e.onnxtxt", &bad, &d), WL_ERR);
	ck_assert_msg(contains(d.msg, "e.onnxtxt:") && contains(d.msg, "--print-weights"), "%s", d.msg);
	free(t);
	module_free(m);
}
END_TEST

START_TEST(print_and_parse_files)
{
	char dir[] = "/tmp/wlower_text_XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char path[256];
	snprintf(path, sizeof path, "%s/m.onnxtxt", dir);
	Module *m = parse_ok("g (float[2] x) => (y) { y = Relu (x) }");
	Diag d = {0};
	ck_assert_int_eq(text_print_file(m, path, &full, &d), WL_OK);
	Module *m2 = NULL;
	ck_assert_int_eq(text_parse_file(path, &m2, &d), WL_OK);
	ck_assert_int_eq(m2->graph->nnodes, 1);
	ck_assert_str_eq(m2->path, path);
	module_free(m2);
	unlink(path);
	/* a missing file, and a folder that does not exist (nothing left behind) */
	ck_assert_int_eq(text_parse_file(path, &m2, &d), WL_ERR);
	ck_assert_ptr_null(m2);
	Diag d2 = {0};
	ck_assert_int_eq(text_print_file(m, "/nonexistent/dir/x.onnxtxt", &full, &d2), WL_ERR);
	ck_assert(d2.set);
	module_free(m);
	rmdir(dir);
}
END_TEST

/* ---------------------------------------------------------------- errors */

static const struct {
	const char *src;
	const char *where;      /* "t.onnxtxt:LINE:COL:" */
	const char *what;       /* part of the message */
} bad_inputs[] = {
	{"", "t.onnxtxt:1:1:", "graph name"},
	{"g (float[2] x => (y) {}", "t.onnxtxt:1:15:", "expected ')'"},
	{"g (x) => (y)\n{\n  y = Op <axes = [1, 2> (x)\n}\n", "t.onnxtxt:3:23:", "expected ']'"},
	{"g (x) => (y) { y = Op <axes = [1, 2 (x) }", "t.onnxtxt:1:37:", "expected ']'"},
	{"g (floot[2] x) => (y) {}", "t.onnxtxt:1:4:", "unknown type 'floot'"},
	{"g () => (y) <floot[2] w = {1}> {}", "t.onnxtxt:1:14:", "unknown type 'floot'"},
	{"g (x) => (y) {\n  y Relu (x)\n}", "t.onnxtxt:2:5:", "expected '='"},
	{"g (x) => (y) { y = Relu (x) $ }", "t.onnxtxt:1:29:", "unexpected character '$'"},
	{"g (x) => (y) { y = Op <s = \"abc> (x) }", "t.onnxtxt:1:28:", "unterminated string"},
	{"g (x) => (y) { y = Relu (x)", "t.onnxtxt:1:28:", "expected '}'"},
	{"g (x) = (y) {}", "t.onnxtxt:1:7:", "expected '=>'"},
	{"g (x) => (y) { y = Op <a = 1.5e> (x) }", "t.onnxtxt:1:28:", "exponent"},
	{"g (x) => (y) { y = Op <a = 12abc> (x) }", "t.onnxtxt:1:30:", "invalid number"},
	{"g () => (y) <float[2] w = {1.0, 2.0, 3.0}> {}", "t.onnxtxt:1:38:", "too many values"},
	{"g () => (y) <float[3] w = {1.0, 2.0}> {}", "t.onnxtxt:1:36:", "has 2 values"},
	{"g () => (y) <int8[1] w = {300}> {}", "t.onnxtxt:1:27:", "out of range for int8"},
	{"g () => (y) <float[1] w = {1e39}> {}", "t.onnxtxt:1:28:", "out of range"},
	{"g () => (y) <float[N] w = {1}> {}", "t.onnxtxt:1:23:", "numeric dimensions"},
	{"g () => (y) <float[1] w = {\"a\"}> {}", "t.onnxtxt:1:28:", "expected a number"},
	{"g (x) => (y) { y = Op <a = 1, a = 2> (x) }", "t.onnxtxt:1:31:", "duplicate attribute"},
	{"g (x) => (y) { y = Op <a = []> (x) }", "t.onnxtxt:1:24:", "a: ints = []"},
	{"g (x) => (y) { y = Op <a: ints = 1> (x) }", "t.onnxtxt:1:34:", "write a list"},
	{"g (x) => (y) { y = Op <a: int = 1.5> (x) }", "t.onnxtxt:1:33:", "declared int"},
	{"g (x) => (y) { y = Op <a: bogus = 1> (x) }", "t.onnxtxt:1:27:", "unknown attribute type"},
	{"g (x) => (y) { y = Op <a = [1, \"s\"]> (x) }", "t.onnxtxt:1:24:", "mixes"},
	{"g (x) => (y) { y = Relu (x)  y = Relu (x) }", "t.onnxtxt:1:30:", "defined twice"},
	{"g (x, x) => (y) {}", "t.onnxtxt:1:7:", "declared twice"},
	{"<ir_version: 8, bogus: 1> g () => () {}", "t.onnxtxt:1:17:", "unknown model field"},
	{"<ir_version 8> g () => () {}", "t.onnxtxt:1:13:", "expected ':'"},
	{"<opset_import: [\"\" 17]> g () => () {}", "t.onnxtxt:1:20:", "expected ':'"},
	{"g (map(float16) x) => () {}", "t.onnxtxt:1:15:", "expected ','"},
	{"g (seq(x) x) => () {}", "t.onnxtxt:1:8:", "unknown type 'x'"},
	{"g (x) => () {}\nfoo", "t.onnxtxt:2:4:", "expected '('"},
	{"g (x) => () {}\n<domain: \"d\"> F <a = 1> (x) => (y) {}", "t.onnxtxt:2:20:", "default values"},
	{"g (x) => (y) { y = Op <a = @> (x) }", "t.onnxtxt:1:29:", "after '@'"},
	{"g (x) => (y) { y = Op <g = h (x) => (y)> (x) }", "t.onnxtxt:1:40:", "expected '{'"},
	{"g (x) => (y) { y = 3 (x) }", "t.onnxtxt:1:20:", "operator name"},
	{"g (x) => (y) { y = a. (x) }", "t.onnxtxt:1:23:", "after '.'"},
	{"g (x) => (y) {\n  y = Relu (x)\n}\n\x01", "t.onnxtxt:4:1:", "unexpected byte 0x01"},
	{"g (float[2] x) => (y) { y = Relu (x) }\n<ir_version: 3>", "t.onnxtxt:2:2:", "unknown function field"},
	{"g (x) => (y) { y = Op <a = -> (x) }", "t.onnxtxt:1:28:", "expected a number"},
	{"g (x) => (y) { y = Op <t = float[2] {1.0, 2.0> (x) }", "t.onnxtxt:1:46:", "expected '}'"},
	{"g () => (y) <string[1] s = {\"a}> {}", "t.onnxtxt:1:29:", "unterminated string"},
	{"g () => (y) <bool[1] b = {yes}> {}", "t.onnxtxt:1:27:", "expected an integer"},
	{"g () => (y) <float[99999999999] w = {1}> {}", "t.onnxtxt:1:38:", "fewer values"},
};

START_TEST(errors_name_file_line_col)
{
	char report[8192] = "";
	size_t off = 0;
	for (size_t i = 0; i < sizeof bad_inputs / sizeof bad_inputs[0]; i++) {
		Module *m = (Module *)0x1;
		Diag d = {0};
		int rc = text_parse(bad_inputs[i].src, strlen(bad_inputs[i].src), "t.onnxtxt", &m, &d);
		ck_assert_msg(rc == WL_ERR, "case %zu accepted: %s", i, bad_inputs[i].src);
		ck_assert_ptr_null(m);
		ck_assert_msg(!strchr(d.msg, '\n'), "multi-line message: %s", d.msg);
		if ((strncmp(d.msg, bad_inputs[i].where, strlen(bad_inputs[i].where)) != 0 ||
		     !contains(d.msg, bad_inputs[i].what)) && off < sizeof report - 512)
			off += (size_t)snprintf(report + off, sizeof report - off,
			                        "\ncase %zu (%s): want '%s ... %s', got '%s'", i,
			                        bad_inputs[i].src, bad_inputs[i].where, bad_inputs[i].what, d.msg);
	}
	ck_assert_msg(off == 0, "%s", report);
}
END_TEST

START_TEST(deep_nesting_is_an_error)
{
	/* seq(seq(...)) and graphs in graphs a thousand deep: an error, not a crash */
	size_t n = 1000;
	char *s = malloc(16 * n + 64);
	ck_assert_ptr_nonnull(s);
	strcpy(s, "g (");
	for (size_t i = 0; i < n; i++)
		strcat(s, "seq(");
	strcat(s, "float");
	for (size_t i = 0; i < n; i++)
		strcat(s, ")");
	strcat(s, " x) => () {}");
	Module *m = NULL;
	Diag d = {0};
	ck_assert_int_eq(text_parse(s, strlen(s), "t.onnxtxt", &m, &d), WL_ERR);
	ck_assert_msg(contains(d.msg, "nested too deeply"), "%s", d.msg);
	strcpy(s, "g () => () {");
	for (size_t i = 0; i < n / 10; i++)
		strcat(s, " y = If <then_branch = h () => () {");
	Diag d2 = {0};
	ck_assert_int_eq(text_parse(s, strlen(s), "t.onnxtxt", &m, &d2), WL_ERR);
	ck_assert_msg(contains(d2.msg, "nested too deeply"), "%s", d2.msg);
	free(s);
}
END_TEST

/* ---------------------------------------------------------------- fuzz */

static const char fuzz_seed[] =
	"<\n  ir_version: 8,\n  opset_import: [\"\" : 17, \"local\" : 1],\n  producer_name: \"p\"\n>\n"
	"main (float[N,4] x, bool c, seq(float) s) => (float[N,4] y, z)\n"
	"<\n  float[4] b = {1.0, 2.5, -inf, nan},\n  int64[2] sh = {1, -1},\n  string[1] st = {\"a\\\"\"},\n"
	"  float16[2] h = {0.5, 65504},\n  float[N,4] t\n>\n"
	"{\n"
	"  t = Add (x, b)  # /add.0\n"
	"  r = Reshape <allowzero = 0> (t, sh)\n"
	"  \"\", y = local.F <alpha = 0.5, names = [\"a\", \"b\"], p: ints = []> (r, )\n"
	"  z = If (c) <\n"
	"    then_branch = tg () => (float[2] o) { o = Constant <value = float[2] v {1.0, 2.0}> () },\n"
	"    else_branch = eg () => (o) { o = Identity (b) }\n"
	"  >\n"
	"}\n"
	"<domain: \"local\", opset_import: [\"\" : 17]>\n"
	"F <alpha> (a, b) => (c, d) { c = Mul <k: float = @alpha> (a, a)  d = Identity (b) }\n";

START_TEST(mutation_fuzz_never_crashes)
{
	const char *alphabet = "()[]{}<>,=:.@?#\"\\-+_ \n\t0123456789eaxnfloat[]=>";
	size_t base = strlen(fuzz_seed);
	char *buf = malloc(base * 2 + 64);
	ck_assert_ptr_nonnull(buf);
	rng_state = 12345;
	int accepted = 0;
	for (int iter = 0; iter < 2000; iter++) {
		memcpy(buf, fuzz_seed, base + 1);
		size_t len = base;
		int edits = 1 + (int)(rnd() % 4);
		for (int e = 0; e < edits; e++) {
			size_t pos = len ? (size_t)(rnd() % len) : 0;
			int op = (int)(rnd() % 4);
			char c = rnd() % 4 ? alphabet[rnd() % strlen(alphabet)] : (char)(rnd() & 0xff);
			if (op == 0 && len > 0) {                      /* delete a byte */
				memmove(buf + pos, buf + pos + 1, len - pos);
				len--;
			} else if (op == 1) {                          /* insert a byte */
				memmove(buf + pos + 1, buf + pos, len - pos + 1);
				buf[pos] = c;
				len++;
			} else if (op == 2 && len > 0) {               /* replace a byte */
				buf[pos] = c;
			} else if (len > 0) {                          /* cut the tail */
				len = pos;
				buf[len] = 0;
			}
		}
		Module *m = NULL;
		Diag d = {0};
		int rc = text_parse(buf, len, "f.onnxtxt", &m, &d);
		if (rc != WL_OK) {
			ck_assert_ptr_null(m);
			ck_assert_msg(strncmp(d.msg, "f.onnxtxt:", 10) == 0, "iteration %d: %s", iter, d.msg);
			continue;
		}
		accepted++;
		/* what we accept, we print, and read back to the same text */
		char *t1 = to_text(m, &full);
		Module *m2 = NULL;
		Diag d2 = {0};
		if (text_parse(t1, strlen(t1), "p.onnxtxt", &m2, &d2) != WL_OK)
			ck_abort_msg("iteration %d: printed text does not parse: %s\n%s", iter, d2.msg, t1);
		char *t2 = to_text(m2, &full);
		ck_assert_msg(strcmp(t1, t2) == 0, "iteration %d: not a fixed point:\n%s\n---\n%s", iter, t1, t2);
		free(t1);
		free(t2);
		module_free(m2);
		module_free(m);
	}
	ck_assert_msg(accepted > 50, "only %d mutants accepted", accepted);
	free(buf);
}
END_TEST

CHECK_MAIN("text", "core",
	syntax_md_example, header_fields_and_layout, value_infos_printed, every_attribute_kind,
	function_with_attribute_refs, every_dtype_bit_exact, dtype_literals, float_printing,
	names_with_punctuation, quoted_names_and_empty_optionals,
	type_comments_for_types_onnx_112_cannot_read, large_initializers_elided,
	print_and_parse_files, errors_name_file_line_col, deep_nesting_is_an_error,
	mutation_fuzz_never_crashes)
