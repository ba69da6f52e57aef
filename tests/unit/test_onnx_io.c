/* test_onnx_io.c — binary ONNX import and export (onnx_import.c,
 * onnx_export.c, pbwire.c).
 *
 * Models are built with the IR API, or written byte by byte with protobuf-c
 * when the IR cannot express the case (malformed or hostile files), or by
 * /usr/bin/python3 with onnx 1.12 for an independent encoder. Covered:
 * every attribute kind; every dtype in raw and typed form (and typed data
 * written by protobuf-c and by python); value_info types, functions,
 * metadata; external data (python-made, our own, >2 GiB via a sparse file,
 * and each bad-location class); subgraphs with outer-scope references;
 * unsorted graphs, cycles, undefined inputs, duplicate producers; empty,
 * truncated, random and missing files; failed exports leave no file; and
 * that imported weights point into the file's mapping (no copy).
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "compiler/onnx/onnx.h"
#include "onnx.pb-c.h"
#include "compiler/onnx/pbwire.h"

#define PYTHON "/usr/bin/python3"

static char tmpdir[256];

/* ---------------------------------------------------------------- helpers */

static const char *
tpath(const char *name)
{
	static char buf[8][512];
	static int k;
	char *p = buf[k++ & 7];
	snprintf(p, 512, "%s/%s", tmpdir, name);
	return p;
}

static void
write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(p, 1, n, f), n);
	ck_assert_int_eq(fclose(f), 0);
}

static bool
exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* Runs python with a script and arguments; returns its exit status. */
static int
python(const char *script, const char *args)
{
	const char *sp = tpath("script.py");
	write_file(sp, script, strlen(script));
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "%s %s %s", PYTHON, sp, args);
	return system(cmd);
}

static int
onnx_checker(const char *path)
{
	return python("import sys, onnx\nonnx.checker.check_model(onnx.load(sys.argv[1]))\n", path);
}

static bool
in_mapping(const Module *m, const void *p, size_t n)
{
	for (int i = 0; i < m->nmaps; i++) {
		const char *a = m->maps[i].addr;
		if ((const char *)p >= a && (const char *)p + n <= a + m->maps[i].len)
			return true;
	}
	return false;
}

static Module *
new_module(const char *path)
{
	Module *m = module_new(path);
	module_set_opset(m, "", 17);
	m->graph = graph_new(m, NULL, NULL, "g");
	return m;
}

static Value *
add_input(Graph *g, const char *name, int dt, int rank, const int64_t *dims)
{
	Value *v = graph_value(g, name);
	type_set_tensor(g->mod->arena, &v->type, dt, rank, dims);
	graph_add_input(g, v);
	return v;
}

static Node *
add_node(Graph *g, const char *op, const char *dom, const char *name, Value **in, int nin,
         const char *out)
{
	Node *n = node_new(g, op, dom, name);
	for (int i = 0; i < nin; i++)
		node_add_input(n, in[i]);
	if (out)
		node_add_output(n, graph_value(g, out));
	node_append(g, n);
	return n;
}

static Tensor *
float_tensor(Arena *a, const char *name, int n, float base)
{
	int64_t dims[1] = {n};
	Tensor *t = tensor_new(a, name, DT_FLOAT, 1, dims);
	float *p = tensor_alloc_data(a, t);
	for (int i = 0; i < n; i++)
		p[i] = base + (float)i;
	return t;
}

static Tensor *
add_init(Graph *g, Tensor *t)
{
	graph_set_init(g, graph_value(g, t->name), t);
	return t;
}

/* export → import; *buf keeps the first export (free it). */
static Module *
reimport(Module *m, void **buf, size_t *len)
{
	Diag d = {0};
	Module *r = NULL;
	ck_assert_msg(onnx_export_buffer(m, buf, len, &d) == WL_OK, "export: %s", d.msg);
	ck_assert_msg(onnx_import_buffer(*buf, *len, "mem.onnx", &r, &d) == WL_OK, "import: %s", d.msg);
	return r;
}

/* export(import(export(x))) == export(x) */
static void
assert_stable(Module *r, const void *buf, size_t len)
{
	void *b2;
	size_t n2;
	Diag d = {0};
	ck_assert_msg(onnx_export_buffer(r, &b2, &n2, &d) == WL_OK, "%s", d.msg);
	ck_assert_uint_eq(n2, len);
	ck_assert(memcmp(b2, buf, len) == 0);
	free(b2);
}

static void
assert_fails(int rc, const Diag *d, const char *must_contain)
{
	ck_assert_int_eq(rc, WL_ERR);
	ck_assert(d->set);
	ck_assert_msg(strstr(d->msg, must_contain) != NULL, "message '%s' lacks '%s'", d->msg,
	              must_contain);
	ck_assert_msg(strchr(d->msg, '\n') == NULL, "message not one line: %s", d->msg);
}

static void
assert_import_fails(const char *path, const char *must_contain)
{
	Module *m = NULL;
	Diag d = {0};
	assert_fails(onnx_import_file(path, &m, &d), &d, must_contain);
	ck_assert_ptr_null(m);
	ck_assert_msg(strstr(d.msg, path) != NULL, "message '%s' does not name %s", d.msg, path);
}

/* ---------------------------------------------------------------- protobuf-c builders
 * For files the IR cannot express. Structures live in a scratch arena. */

static Arena *pa;

#define PNEW(T, init) ({ T *p_ = arena_alloc(pa, sizeof(T)); init(p_); p_; })

static Onnx__TensorProto *
pb_tensor(const char *name, int dt, int ndim, const int64_t *dims)
{
	Onnx__TensorProto *t = PNEW(Onnx__TensorProto, onnx__tensor_proto__init);
	t->name = (char *)name;
	t->has_data_type = 1;
	t->data_type = dt;
	t->n_dims = (size_t)ndim;
	t->dims = arena_alloc(pa, 8 * (size_t)(ndim + 1));
	memcpy(t->dims, dims, 8 * (size_t)ndim);
	return t;
}

static void
pb_external(Onnx__TensorProto *t, const char *loc, const char *off, const char *len)
{
	const char *kv[3][2] = {{"location", loc}, {"offset", off}, {"length", len}};
	t->has_data_location = 1;
	t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	t->external_data = arena_alloc(pa, 3 * sizeof *t->external_data);
	for (int i = 0; i < 3; i++) {
		if (!kv[i][1])
			continue;
		Onnx__StringStringEntryProto *e =
			PNEW(Onnx__StringStringEntryProto, onnx__string_string_entry_proto__init);
		e->key = (char *)kv[i][0];
		e->value = (char *)kv[i][1];
		t->external_data[t->n_external_data++] = e;
	}
}

static Onnx__ValueInfoProto *
pb_vi(const char *name)
{
	Onnx__ValueInfoProto *v = PNEW(Onnx__ValueInfoProto, onnx__value_info_proto__init);
	v->name = (char *)name;
	return v;
}

/* A node "op(in...) -> out..." from a compact spec: "Op name in,in out,out". */
static Onnx__NodeProto *
pb_node(const char *op, const char *name, const char *ins, const char *outs)
{
	Onnx__NodeProto *n = PNEW(Onnx__NodeProto, onnx__node_proto__init);
	n->op_type = (char *)op;
	n->name = (char *)name;
	n->input = arena_alloc(pa, 8 * sizeof(char *));
	n->output = arena_alloc(pa, 8 * sizeof(char *));
	char *s = arena_strdup(pa, ins), *tok, *save;
	for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		n->input[n->n_input++] = tok;
	s = arena_strdup(pa, outs);
	for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		n->output[n->n_output++] = tok;
	return n;
}

typedef struct PbGraph {
	Onnx__NodeProto *node[8];
	int nnode;
	Onnx__TensorProto *init[8];
	int ninit;
	const char *in[4], *out[4];
	int nin, nout;
} PbGraph;

static void *
pb_model(const PbGraph *s, size_t *len)
{
	Onnx__ModelProto *m = PNEW(Onnx__ModelProto, onnx__model_proto__init);
	Onnx__GraphProto *g = PNEW(Onnx__GraphProto, onnx__graph_proto__init);
	Onnx__OperatorSetIdProto *os = PNEW(Onnx__OperatorSetIdProto, onnx__operator_set_id_proto__init);
	os->domain = "";
	os->has_version = 1;
	os->version = 17;
	m->has_ir_version = 1;
	m->ir_version = 8;
	m->n_opset_import = 1;
	m->opset_import = arena_alloc(pa, sizeof(void *));
	m->opset_import[0] = os;
	m->graph = g;
	g->name = "g";
	g->n_node = (size_t)s->nnode;
	g->node = (Onnx__NodeProto **)s->node;
	g->n_initializer = (size_t)s->ninit;
	g->initializer = (Onnx__TensorProto **)s->init;
	g->n_input = (size_t)s->nin;
	g->input = arena_alloc(pa, 8 * sizeof(void *));
	for (int i = 0; i < s->nin; i++)
		g->input[i] = pb_vi(s->in[i]);
	g->n_output = (size_t)s->nout;
	g->output = arena_alloc(pa, 8 * sizeof(void *));
	for (int i = 0; i < s->nout; i++)
		g->output[i] = pb_vi(s->out[i]);
	*len = protobuf_c_message_get_packed_size(&m->base);
	void *buf = malloc(*len);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(protobuf_c_message_pack(&m->base, buf), *len);
	return buf;
}

static void
pb_model_file(const char *path, const PbGraph *s)
{
	size_t n;
	void *b = pb_model(s, &n);
	write_file(path, b, n);
	free(b);
}

static void
setup(void)
{
	pa = arena_new();
}

static void
teardown(void)
{
	arena_free(pa);
	pa = NULL;
}

/* ---------------------------------------------------------------- attributes */

static Graph *
branch(Module *m, Node *owner, const char *name, Value *outer, const char *out)
{
	Graph *sg = graph_new(m, m->graph, owner, name);
	Value *in[1] = {outer};
	add_node(sg, "Identity", "", NULL, in, 1, out);
	Value *o = graph_find_local(sg, out);
	o->type = type_copy(m->arena, &outer->type);
	graph_add_output(sg, o);
	return sg;
}

static SparseTensor *
sparse(Arena *a, const char *name)
{
	SparseTensor *s = arena_alloc(a, sizeof *s);
	int64_t two[1] = {2};
	s->values = float_tensor(a, name, 2, 1.5f);
	s->indices = tensor_new(a, "", DT_INT64, 1, two);
	int64_t *ix = tensor_alloc_data(a, s->indices);
	ix[0] = 1;
	ix[1] = 3;
	s->ndim = 1;
	s->dims = arena_alloc(a, sizeof *s->dims);
	s->dims[0] = 4;
	return s;
}

static Type *
nested_type(Arena *a)
{
	/* seq(map(int64, optional(tensor(float, [N, 3])))) */
	Type *t = arena_alloc(a, sizeof *t), *mp = arena_alloc(a, sizeof *t);
	Type *op = arena_alloc(a, sizeof *t), *tt = arena_alloc(a, sizeof *t);
	int64_t dims[2] = {-1, 3};
	type_set_tensor(a, tt, DT_FLOAT, 2, dims);
	tt->dims[0].kind = DIM_PARAM;
	tt->dims[0].param = "N";
	tt->dims[0].denotation = "DATA_BATCH";
	op->kind = TY_OPTIONAL;
	op->inner = tt;
	mp->kind = TY_MAP;
	mp->map_key = DT_INT64;
	mp->inner = op;
	t->kind = TY_SEQUENCE;
	t->inner = mp;
	t->denotation = "SEQ";
	return t;
}

static Module *
all_attrs_module(void)
{
	Module *m = new_module("attrs.onnx");
	Arena *a = m->arena;
	Graph *g = m->graph;
	int64_t dims[2] = {2, 3};
	module_set_opset(m, "ai.wlower", 1);
	Value *x = add_input(g, "x", DT_FLOAT, 2, dims);
	Value *in[1] = {x};
	Node *n = add_node(g, "AllAttrs", "ai.wlower", "n0", in, 1, "y");
	graph_add_output(g, n->outputs[0]);
	type_set_tensor(a, &n->outputs[0]->type, DT_FLOAT, 2, dims);
	Attr *at;
	at = node_add_attr(n, "f", AT_FLOAT); at->f = 1.5f;
	at = node_add_attr(n, "i", AT_INT); at->i = -7;
	at = node_add_attr(n, "s", AT_STRING); at->s = (StrRef){"he\0llo", 6};
	at = node_add_attr(n, "t", AT_TENSOR); at->t = float_tensor(a, "tv", 3, 0.25f);
	at = node_add_attr(n, "g", AT_GRAPH); at->g = branch(m, n, "gbody", x, "g_out");
	at = node_add_attr(n, "floats", AT_FLOATS);
	at->n = 3;
	at->floats = arena_alloc(a, 3 * sizeof(float));
	at->floats[0] = -1; at->floats[1] = 0.5f; at->floats[2] = 1e30f;
	at = node_add_attr(n, "ints", AT_INTS);
	at->n = 2;
	at->ints = arena_alloc(a, 2 * sizeof(int64_t));
	at->ints[0] = INT64_MIN; at->ints[1] = 42;
	at = node_add_attr(n, "strings", AT_STRINGS);
	at->n = 2;
	at->strings = arena_alloc(a, 2 * sizeof(StrRef));
	at->strings[0] = (StrRef){"ab", 2}; at->strings[1] = (StrRef){"", 0};
	at = node_add_attr(n, "tensors", AT_TENSORS);
	at->n = 2;
	at->tensors = arena_alloc(a, 2 * sizeof(Tensor *));
	at->tensors[0] = float_tensor(a, "", 2, 7);
	at->tensors[1] = float_tensor(a, "t2", 1, 9);
	at->tensors[1]->storage = TS_TYPED;
	at = node_add_attr(n, "graphs", AT_GRAPHS);
	at->n = 2;
	at->graphs = arena_alloc(a, 2 * sizeof(Graph *));
	at->graphs[0] = branch(m, n, "b0", x, "b0_out");
	at->graphs[1] = branch(m, n, "b1", x, "b1_out");
	at = node_add_attr(n, "sp", AT_SPARSE_TENSOR); at->sp = sparse(a, "spv");
	at = node_add_attr(n, "sps", AT_SPARSE_TENSORS);
	at->n = 1;
	at->sparse = arena_alloc(a, sizeof(SparseTensor *));
	at->sparse[0] = sparse(a, "spv2");
	at = node_add_attr(n, "tp", AT_TYPE_PROTO); at->tp = nested_type(a);
	at = node_add_attr(n, "tps", AT_TYPE_PROTOS);
	at->n = 2;
	at->types = arena_alloc(a, 2 * sizeof(Type *));
	at->types[0] = nested_type(a);
	at->types[1] = arena_alloc(a, sizeof(Type));
	type_set_tensor(a, at->types[1], DT_INT4, -1, NULL);
	return m;
}

START_TEST(every_attribute_kind)
{
	Module *m = all_attrs_module();
	void *buf;
	size_t len;
	Module *r = reimport(m, &buf, &len);
	Node *n = r->graph->first;
	ck_assert_str_eq(n->op_type, "AllAttrs");
	ck_assert_str_eq(n->domain, "ai.wlower");
	ck_assert_int_eq(n->nattrs, 14);
	static const char *names[] = {"f", "i", "s", "t", "g", "floats", "ints", "strings",
	                              "tensors", "graphs", "sp", "sps", "tp", "tps"};
	static const int kinds[] = {AT_FLOAT, AT_INT, AT_STRING, AT_TENSOR, AT_GRAPH, AT_FLOATS,
	                            AT_INTS, AT_STRINGS, AT_TENSORS, AT_GRAPHS, AT_SPARSE_TENSOR,
	                            AT_SPARSE_TENSORS, AT_TYPE_PROTO, AT_TYPE_PROTOS};
	for (int i = 0; i < 14; i++) {
		ck_assert_str_eq(n->attrs[i].name, names[i]);
		ck_assert_int_eq(n->attrs[i].type, kinds[i]);
	}
	ck_assert(node_attr(n, "f")->f == 1.5f);
	ck_assert_int_eq(node_attr(n, "i")->i, -7);
	ck_assert_uint_eq(node_attr(n, "s")->s.len, 6);
	ck_assert(memcmp(node_attr(n, "s")->s.ptr, "he\0llo", 6) == 0);
	const Tensor *t = node_attr(n, "t")->t;
	ck_assert_str_eq(t->name, "tv");
	ck_assert(tensor_get_f64(t, 2) == 2.25);
	Graph *sg = node_attr(n, "g")->g;
	ck_assert_ptr_eq(sg->parent, r->graph);
	ck_assert_ptr_eq(sg->owner, n);
	ck_assert_str_eq(sg->name, "gbody");
	ck_assert(node_attr(n, "floats")->floats[2] == 1e30f);
	ck_assert_int_eq(node_attr(n, "ints")->ints[0], INT64_MIN);
	ck_assert_uint_eq(node_attr(n, "strings")->strings[1].len, 0);
	ck_assert_int_eq(node_attr(n, "tensors")->tensors[1]->storage, TS_TYPED);
	ck_assert(tensor_get_f64(node_attr(n, "tensors")->tensors[1], 0) == 9.0);
	ck_assert_str_eq(node_attr(n, "graphs")->graphs[1]->name, "b1");
	const SparseTensor *sp = node_attr(n, "sp")->sp;
	ck_assert_int_eq(sp->ndim, 1);
	ck_assert_int_eq(sp->dims[0], 4);
	ck_assert_int_eq(tensor_get_i64(sp->indices, 1), 3);
	ck_assert_int_eq(node_attr(n, "sps")->n, 1);
	const Type *tp = node_attr(n, "tp")->tp;
	ck_assert_int_eq(tp->kind, TY_SEQUENCE);
	ck_assert_str_eq(tp->denotation, "SEQ");
	ck_assert_int_eq(tp->inner->kind, TY_MAP);
	ck_assert_int_eq(tp->inner->map_key, DT_INT64);
	ck_assert_int_eq(tp->inner->inner->kind, TY_OPTIONAL);
	const Type *tt = tp->inner->inner->inner;
	ck_assert_int_eq(tt->kind, TY_TENSOR);
	ck_assert_int_eq(tt->dims[0].kind, DIM_PARAM);
	ck_assert_str_eq(tt->dims[0].param, "N");
	ck_assert_str_eq(tt->dims[0].denotation, "DATA_BATCH");
	ck_assert_int_eq(tt->dims[1].value, 3);
	ck_assert(type_equal(tp, nested_type(r->arena)));
	const Type *t4 = node_attr(n, "tps")->types[1];
	ck_assert_int_eq(t4->elem, DT_INT4);
	ck_assert(!t4->has_shape);
	assert_stable(r, buf, len);
	/* and onnx.checker accepts it (custom domain, every attribute kind) */
	write_file(tpath("attrs.onnx"), buf, len);
	ck_assert_int_eq(onnx_checker(tpath("attrs.onnx")), 0);
	Diag d = {0};
	ck_assert_msg(ir_verify(r, &d) == WL_OK, "%s", d.msg);
	free(buf);
	module_free(r);
	module_free(m);
}
END_TEST

START_TEST(old_attribute_without_type)
{
	/* IR version 1 files have no AttributeProto.type: inferred from the field */
	Onnx__NodeProto *n = pb_node("LeakyRelu", "lr", "x", "y");
	Onnx__AttributeProto *at = PNEW(Onnx__AttributeProto, onnx__attribute_proto__init);
	at->name = "alpha";
	at->has_f = 1;
	at->f = 0.125f;
	n->n_attribute = 1;
	n->attribute = &at;
	PbGraph s = {.node = {n}, .nnode = 1, .in = {"x"}, .nin = 1, .out = {"y"}, .nout = 1};
	pb_model_file(tpath("notype.onnx"), &s);
	Module *m;
	Diag d = {0};
	ck_assert_msg(onnx_import_file(tpath("notype.onnx"), &m, &d) == WL_OK, "%s", d.msg);
	ck_assert_int_eq(m->graph->first->attrs[0].type, AT_FLOAT);
	ck_assert(attr_float(m->graph->first, "alpha", 0) == 0.125f);
	module_free(m);
}
END_TEST

/* ---------------------------------------------------------------- dtypes */

static const int all_dtypes[] = {
	DT_FLOAT, DT_UINT8, DT_INT8, DT_UINT16, DT_INT16, DT_INT32, DT_INT64, DT_BOOL,
	DT_FLOAT16, DT_DOUBLE, DT_UINT32, DT_UINT64, DT_COMPLEX64, DT_COMPLEX128, DT_BFLOAT16,
	DT_FLOAT8E4M3FN, DT_FLOAT8E4M3FNUZ, DT_FLOAT8E5M2, DT_FLOAT8E5M2FNUZ, DT_UINT4, DT_INT4,
};

/* 5 elements with recognisable bytes (bool 0/1; 4-bit padding nibble 0). */
static Tensor *
pattern_tensor(Arena *a, int dt, int storage)
{
	int64_t dims[1] = {5};
	char name[64];
	snprintf(name, sizeof name, "t_%s_%s", dtype_name(dt), storage == TS_RAW ? "raw" : "typed");
	Tensor *t = tensor_new(a, name, dt, 1, dims);
	uint8_t *p = tensor_alloc_data(a, t);
	for (size_t i = 0; i < t->nbytes; i++)
		p[i] = dt == DT_BOOL ? (uint8_t)(i & 1) : (uint8_t)(0x81 + 37 * i);
	if (dt == DT_INT4 || dt == DT_UINT4)
		p[2] &= 0x0f;
	t->storage = storage;
	return t;
}

START_TEST(every_dtype_raw_and_typed)
{
	Module *m = new_module("dtypes.onnx");
	Graph *g = m->graph;
	int n = (int)(sizeof all_dtypes / sizeof *all_dtypes);
	for (int i = 0; i < n; i++) {
		add_init(g, pattern_tensor(m->arena, all_dtypes[i], TS_RAW));
		add_init(g, pattern_tensor(m->arena, all_dtypes[i], TS_TYPED));
	}
	int64_t three[1] = {3};
	Tensor *s = tensor_new(m->arena, "t_string", DT_STRING, 1, three);
	tensor_alloc_data(m->arena, s);
	s->strs[0] = (StrRef){"a", 1};
	s->strs[1] = (StrRef){"", 0};
	s->strs[2] = (StrRef){"x\0y", 3};
	s->storage = TS_TYPED;
	add_init(g, s);
	Value *first = g->inits[0];
	graph_add_output(g, first);
	void *buf;
	size_t len;
	Module *r = reimport(m, &buf, &len);
	ck_assert_int_eq(r->graph->ninits, g->ninits);
	for (int i = 0; i < g->ninits; i++) {
		const Tensor *a = g->inits[i]->init, *b = r->graph->inits[i]->init;
		ck_assert_str_eq(a->name, b->name);
		ck_assert_int_eq(a->dtype, b->dtype);
		ck_assert_int_eq(a->storage, b->storage);
		ck_assert_uint_eq(a->nbytes, b->nbytes);
		if (a->nbytes)
			ck_assert_msg(memcmp(a->data, b->data, a->nbytes) == 0, "%s differs", a->name);
	}
	const Tensor *rs = r->graph->inits[g->ninits - 1]->init;
	ck_assert_uint_eq(rs->strs[2].len, 3);
	ck_assert(memcmp(rs->strs[2].ptr, "x\0y", 3) == 0);
	/* typed int8 -1 is int32 -1 on the wire, bytes come back as 0xff */
	ck_assert_int_eq(tensor_get_i64(graph_find(r->graph, "t_int8_typed")->init, 0),
	                 (int8_t)0x81);
	assert_stable(r, buf, len);
	free(buf);
	module_free(r);
	module_free(m);
}
END_TEST

/* Typed fields written by protobuf-c as onnx.proto describes them. */
START_TEST(typed_fields_from_protobuf)
{
	int64_t d2[1] = {2}, d3[1] = {3};
	Onnx__TensorProto *h = pb_tensor("h", DT_FLOAT16, 1, d2);
	int32_t hv[2] = {0x3c00, 0xc000};            /* 1.0, -2.0 */
	h->n_int32_data = 2;
	h->int32_data = hv;
	Onnx__TensorProto *q = pb_tensor("q", DT_INT4, 1, d3);
	int32_t qv[2] = {0x21, 0x0d};                /* 1, 2, -3 packed */
	q->n_int32_data = 2;
	q->int32_data = qv;
	Onnx__TensorProto *b = pb_tensor("b", DT_BFLOAT16, 1, d2);
	int32_t bv[2] = {0x3f80, 0xc000};            /* 1.0, -2.0 */
	b->n_int32_data = 2;
	b->int32_data = bv;
	Onnx__TensorProto *u = pb_tensor("u", DT_UINT32, 1, d2);
	uint64_t uv[2] = {4000000000u, 7};
	u->n_uint64_data = 2;
	u->uint64_data = uv;
	Onnx__TensorProto *s = pb_tensor("s", DT_STRING, 1, d2);
	ProtobufCBinaryData sv[2] = {{2, (uint8_t *)"hi"}, {0, NULL}};
	s->n_string_data = 2;
	s->string_data = sv;
	PbGraph g = {.init = {h, q, b, u, s}, .ninit = 5, .out = {"h"}, .nout = 1};
	pb_model_file(tpath("typed.onnx"), &g);
	Module *m;
	Diag d = {0};
	ck_assert_msg(onnx_import_file(tpath("typed.onnx"), &m, &d) == WL_OK, "%s", d.msg);
	const Tensor *t = graph_find(m->graph, "h")->init;
	ck_assert_int_eq(t->storage, TS_TYPED);
	ck_assert_uint_eq(t->nbytes, 4);
	ck_assert(memcmp(t->data, "\x00\x3c\x00\xc0", 4) == 0);
	ck_assert(tensor_get_f64(t, 1) == -2.0);
	t = graph_find(m->graph, "q")->init;
	ck_assert_uint_eq(t->nbytes, 2);
	ck_assert_int_eq(tensor_get_i64(t, 0), 1);
	ck_assert_int_eq(tensor_get_i64(t, 1), 2);
	ck_assert_int_eq(tensor_get_i64(t, 2), -3);
	t = graph_find(m->graph, "b")->init;
	ck_assert(tensor_get_f64(t, 0) == 1.0 && tensor_get_f64(t, 1) == -2.0);
	t = graph_find(m->graph, "u")->init;
	ck_assert_int_eq(tensor_get_i64(t, 0), 4000000000LL);
	t = graph_find(m->graph, "s")->init;
	ck_assert_uint_eq(t->strs[0].len, 2);
	ck_assert(memcmp(t->strs[0].ptr, "hi", 2) == 0);
	module_free(m);

	/* wrong counts and wrong fields are errors naming the tensor */
	h->n_int32_data = 1;
	pb_model_file(tpath("typed_bad.onnx"), &g);
	assert_import_fails(tpath("typed_bad.onnx"), "tensor 'h'");
	h->n_int32_data = 2;
	q->n_int32_data = 0;
	q->n_float_data = 2;
	float fv[2] = {1, 2};
	q->float_data = fv;
	pb_model_file(tpath("typed_bad2.onnx"), &g);
	assert_import_fails(tpath("typed_bad2.onnx"), "tensor 'q'");
}
END_TEST

/* Typed data written by onnx's own python helper. */
START_TEST(typed_fields_from_python)
{
	static const char py[] =
		"import sys, onnx\n"
		"from onnx import helper, TensorProto as T\n"
		"ts = [helper.make_tensor('f16', T.FLOAT16, [3], [1.0, -2.0, 0.5]),\n"
		"      helper.make_tensor('bf16', T.BFLOAT16, [2], [1.0, -2.0]),\n"
		"      helper.make_tensor('bo', T.BOOL, [3], [True, False, True]),\n"
		"      helper.make_tensor('i8', T.INT8, [2], [-1, 2]),\n"
		"      helper.make_tensor('u16', T.UINT16, [1], [65535]),\n"
		"      helper.make_tensor('dbl', T.DOUBLE, [1], [1.5]),\n"
		"      helper.make_tensor('u64', T.UINT64, [1], [2**63 + 5]),\n"
		"      helper.make_tensor('c64', T.COMPLEX64, [1], [1 + 2j]),\n"
		"      helper.make_tensor('str', T.STRING, [2], [b'a', b'bc']),\n"
		"      helper.make_tensor('f32raw', T.FLOAT, [2], b'\\x00\\x00\\x40\\x40\\x00\\x00\\x80\\x40', raw=True)]\n"
		"g = helper.make_graph([helper.make_node('Identity', ['f16'], ['y'])], 'g', [],\n"
		"    [helper.make_tensor_value_info('y', T.FLOAT16, [3])], ts)\n"
		"m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)])\n"
		"onnx.checker.check_model(m)\n"
		"onnx.save(m, sys.argv[1])\n";
	ck_assert_int_eq(python(py, tpath("py_typed.onnx")), 0);
	Module *m;
	Diag d = {0};
	ck_assert_msg(onnx_import_file(tpath("py_typed.onnx"), &m, &d) == WL_OK, "%s", d.msg);
	Graph *g = m->graph;
	const Tensor *t = graph_find(g, "f16")->init;
	ck_assert_int_eq(t->storage, TS_TYPED);
	ck_assert(memcmp(t->data, "\x00\x3c\x00\xc0\x00\x38", 6) == 0);
	t = graph_find(g, "bf16")->init;
	ck_assert(memcmp(t->data, "\x80\x3f\x00\xc0", 4) == 0);
	ck_assert(memcmp(graph_find(g, "bo")->init->data, "\x01\x00\x01", 3) == 0);
	ck_assert(memcmp(graph_find(g, "i8")->init->data, "\xff\x02", 2) == 0);
	ck_assert(memcmp(graph_find(g, "u16")->init->data, "\xff\xff", 2) == 0);
	ck_assert(tensor_get_f64(graph_find(g, "dbl")->init, 0) == 1.5);
	ck_assert((uint64_t)tensor_get_i64(graph_find(g, "u64")->init, 0) == (1ull << 63) + 5);
	float c[2];
	memcpy(c, graph_find(g, "c64")->init->data, 8);
	ck_assert(c[0] == 1 && c[1] == 2);
	ck_assert_uint_eq(graph_find(g, "str")->init->strs[1].len, 2);
	t = graph_find(g, "f32raw")->init;
	ck_assert_int_eq(t->storage, TS_RAW);
	ck_assert(in_mapping(m, t->data, t->nbytes));
	/* export keeps typed as typed: python reads the same numbers back */
	ck_assert_msg(onnx_export_file(m, tpath("py_typed_out.onnx"), NULL, &d) == WL_OK, "%s", d.msg);
	static const char py2[] =
		"import sys, onnx\n"
		"from onnx import numpy_helper\n"
		"a, b = onnx.load(sys.argv[1]), onnx.load(sys.argv[2])\n"
		"onnx.checker.check_model(b)\n"
		"assert a == b, 'protobuf messages differ'\n"
		"for x, y in zip(a.graph.initializer, b.graph.initializer):\n"
		"    if x.data_type not in (8, 14):  # strings: object arrays; complex: onnx 1.12 bug\n"
		"        assert numpy_helper.to_array(x).tobytes() == numpy_helper.to_array(y).tobytes()\n";
	char args[1100];
	snprintf(args, sizeof args, "%s %s", tpath("py_typed.onnx"), tpath("py_typed_out.onnx"));
	ck_assert_int_eq(python(py2, args), 0);
	module_free(m);
}
END_TEST

START_TEST(raw_size_mismatch)
{
	int64_t d3[1] = {3};
	Onnx__TensorProto *t = pb_tensor("w", DT_FLOAT, 1, d3);
	t->has_raw_data = 1;
	t->raw_data.len = 11;
	t->raw_data.data = (uint8_t *)"0123456789a";
	PbGraph g = {.init = {t}, .ninit = 1, .out = {"w"}, .nout = 1};
	pb_model_file(tpath("rawbad.onnx"), &g);
	assert_import_fails(tpath("rawbad.onnx"), "tensor 'w': raw_data has 11 bytes, expected 12");
	t->data_type = 99;
	t->raw_data.len = 12;
	pb_model_file(tpath("dtbad.onnx"), &g);
	assert_import_fails(tpath("dtbad.onnx"), "tensor 'w': unknown data type 99");
	t->data_type = DT_FLOAT;
	int64_t neg[1] = {-3};
	t->dims = neg;
	pb_model_file(tpath("dimbad.onnx"), &g);
	assert_import_fails(tpath("dimbad.onnx"), "negative dimension");
	int64_t huge[3] = {1ll << 40, 1ll << 40, 1ll << 40};
	t->n_dims = 3;
	t->dims = huge;
	pb_model_file(tpath("hugebad.onnx"), &g);
	assert_import_fails(tpath("hugebad.onnx"), "too many elements");
}
END_TEST

/* ---------------------------------------------------------------- whole models */

static const char kitchen_py[] =
	"import sys, numpy as np, onnx\n"
	"from onnx import helper, TensorProto as TP, numpy_helper\n"
	"rng = np.random.default_rng(7)\n"
	"w = numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), 'w')\n"
	"w.doc_string = 'weight doc'\n"
	"sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.5, -2.0], np.float32), 'sp'),\n"
	"    numpy_helper.from_array(np.array([1, 3], np.int64), 'sp_idx'), [4])\n"
	"fn = helper.make_function('ai.wlower', 'MyFn', ['X'], ['Y'],\n"
	"    [helper.make_node('Relu', ['X'], ['T']), helper.make_node('Neg', ['T'], ['Y'])],\n"
	"    [helper.make_opsetid('', 17)], [])\n"
	"fn.doc_string = 'function doc'\n"
	"then_g = helper.make_graph([helper.make_node('Identity', ['h'], ['o1'], name='then_id')], 'then_b', [],\n"
	"    [helper.make_tensor_value_info('o1', TP.FLOAT, ['N', 4])])\n"
	"else_g = helper.make_graph([helper.make_node('Neg', ['h'], ['o2'], name='else_neg')], 'else_b', [],\n"
	"    [helper.make_tensor_value_info('o2', TP.FLOAT, ['N', 4])])\n"
	"nodes = [helper.make_node('MatMul', ['x', 'w'], ['h'], name='mm', doc_string='node doc'),\n"
	"    helper.make_node('MyFn', ['h'], ['f'], name='call', domain='ai.wlower'),\n"
	"    helper.make_node('SequenceConstruct', ['f', 'f'], ['seq'], name='sc'),\n"
	"    helper.make_node('If', ['c'], ['r'], name='if0', then_branch=then_g, else_branch=else_g),\n"
	"    helper.make_node('Optional', ['f'], ['opt'], name='opt0')]\n"
	"x = helper.make_tensor_value_info('x', TP.FLOAT, ['N', 4])\n"
	"x.type.tensor_type.shape.dim[0].denotation = 'DATA_BATCH'\n"
	"x.type.denotation = 'TENSOR'\n"
	"c = helper.make_tensor_value_info('c', TP.BOOL, [])\n"
	"mp = onnx.ValueInfoProto(); mp.name = 'mp'\n"
	"mp.type.map_type.key_type = TP.INT64\n"
	"mp.type.map_type.value_type.tensor_type.elem_type = TP.FLOAT\n"
	"spin = helper.make_sparse_tensor_value_info('spin', TP.FLOAT, [8])\n"
	"seq_vi = helper.make_tensor_sequence_value_info('seq', TP.FLOAT, ['N', 4])\n"
	"opt_vi = helper.make_value_info('opt', helper.make_optional_type_proto(\n"
	"    helper.make_tensor_type_proto(TP.FLOAT, ['N', 4])))\n"
	"h_vi = helper.make_tensor_value_info('h', TP.FLOAT, ['N', None])\n"
	"g = helper.make_graph(nodes, 'kitchen', [x, c, mp, spin],\n"
	"    [helper.make_tensor_value_info('r', TP.FLOAT, ['N', 4]), seq_vi, opt_vi], [w],\n"
	"    value_info=[h_vi], sparse_initializer=[sp], doc_string='graph doc')\n"
	"m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17),\n"
	"    helper.make_opsetid('com.microsoft', 1), helper.make_opsetid('ai.wlower', 1)],\n"
	"    functions=[fn], producer_name='ks', producer_version='1.0', doc_string='model doc',\n"
	"    model_version=3, domain='ai.wlower.test')\n"
	"helper.set_model_props(m, {'author': 'wlower', 'license': 'MIT'})\n"
	"onnx.checker.check_model(m)\n"
	"onnx.save(m, sys.argv[1])\n";

START_TEST(kitchen_sink_model)
{
	const char *src = tpath("kitchen.onnx"), *out = tpath("kitchen_out.onnx");
	ck_assert_int_eq(python(kitchen_py, src), 0);
	Module *m;
	Diag d = {0};
	ck_assert_msg(onnx_import_file(src, &m, &d) == WL_OK, "%s", d.msg);
	ck_assert_int_eq(m->ir_version, 8);
	ck_assert_int_eq(m->model_version, 3);
	ck_assert_str_eq(m->producer_name, "ks");
	ck_assert_str_eq(m->producer_version, "1.0");
	ck_assert_str_eq(m->domain, "ai.wlower.test");
	ck_assert_str_eq(m->doc, "model doc");
	ck_assert_int_eq(module_opset(m, "com.microsoft"), 1);
	ck_assert_int_eq(module_opset(m, "ai.wlower"), 1);
	ck_assert_int_eq(module_opset(m, ""), 17);
	ck_assert_int_eq(m->nmetadata, 2);
	ck_assert_str_eq(m->metadata[0].key, "author");
	ck_assert_str_eq(m->metadata[1].value, "MIT");
	ck_assert_int_eq(m->nfuncs, 1);
	Function *fn = m->funcs[0];
	ck_assert_str_eq(fn->name, "MyFn");
	ck_assert_str_eq(fn->domain, "ai.wlower");
	ck_assert_str_eq(fn->doc, "function doc");
	ck_assert_int_eq(fn->body->nnodes, 2);
	ck_assert_int_eq(fn->body->ninputs, 1);
	ck_assert_int_eq(fn->nopsets, 1);
	Graph *g = m->graph;
	ck_assert_str_eq(g->name, "kitchen");
	ck_assert_str_eq(g->doc, "graph doc");
	ck_assert_int_eq(g->nnodes, 5);
	ck_assert_int_eq(g->nsparse, 1);
	ck_assert_str_eq(g->first->doc, "node doc");
	ck_assert_str_eq(graph_find(g, "w")->init->doc, "weight doc");
	Value *x = graph_find(g, "x");
	ck_assert_str_eq(x->type.denotation, "TENSOR");
	ck_assert_int_eq(x->type.dims[0].kind, DIM_PARAM);
	ck_assert_str_eq(x->type.dims[0].param, "N");
	ck_assert_str_eq(x->type.dims[0].denotation, "DATA_BATCH");
	Value *mp = graph_find(g, "mp");
	ck_assert_int_eq(mp->type.kind, TY_MAP);
	ck_assert_int_eq(mp->type.map_key, DT_INT64);
	ck_assert_int_eq(mp->type.inner->kind, TY_TENSOR);
	ck_assert_int_eq(graph_find(g, "spin")->type.kind, TY_SPARSE_TENSOR);
	ck_assert_int_eq(graph_find(g, "seq")->type.kind, TY_SEQUENCE);
	ck_assert_int_eq(graph_find(g, "opt")->type.kind, TY_OPTIONAL);
	Value *h = graph_find(g, "h");
	ck_assert(h->in_value_info);
	ck_assert_int_eq(h->type.dims[1].kind, DIM_UNKNOWN);
	/* If branches read 'h' from the outer graph: one Value, with uses */
	Node *ifn = graph_find(g, "r")->producer;
	Graph *then_b = node_attr(ifn, "then_branch")->g;
	ck_assert_ptr_eq(then_b->first->inputs[0], h);
	int outer_uses = 0;
	for (int i = 0; i < h->nusers; i++)
		outer_uses += h->users[i].node->graph != g;
	ck_assert_int_eq(outer_uses, 2);

	ck_assert_msg(onnx_export_file(m, out, NULL, &d) == WL_OK, "%s", d.msg);
	static const char same[] =
		"import sys, onnx\n"
		"a, b = onnx.load(sys.argv[1]), onnx.load(sys.argv[2])\n"
		"onnx.checker.check_model(b)\n"
		"assert a == b, 'protobuf messages differ'\n";
	char args[1100];
	snprintf(args, sizeof args, "%s %s", src, out);
	ck_assert_int_eq(python(same, args), 0);
	void *buf;
	size_t len;
	Module *r = reimport(m, &buf, &len);
	assert_stable(r, buf, len);
	free(buf);
	module_free(r);
	module_free(m);
}
END_TEST

/* ---------------------------------------------------------------- graphs */

START_TEST(subgraph_outer_reference)
{
	Module *m = new_module("sub.onnx");
	Graph *g = m->graph;
	int64_t dims[1] = {3};
	Value *c = add_input(g, "c", DT_BOOL, 0, NULL);
	Value *x = add_input(g, "x", DT_FLOAT, 1, dims);
	Value *in[1] = {c};
	Node *ifn = add_node(g, "If", "", "if0", in, 1, "r");
	graph_add_output(g, ifn->outputs[0]);
	Attr *at = node_add_attr(ifn, "then_branch", AT_GRAPH);
	Graph *tb = at->g = graph_new(m, g, ifn, "then");
	Tensor *one = float_tensor(m->arena, "one", 3, 1);
	graph_set_init(tb, graph_value(tb, "one"), one);
	Value *ain[2] = {x, graph_find_local(tb, "one")};
	add_node(tb, "Add", "", "add_in_then", ain, 2, "t_out");
	Value *tout = graph_find_local(tb, "t_out");
	tout->type = type_copy(m->arena, &x->type);
	graph_add_output(tb, tout);
	ifn->outputs[0]->type = type_copy(m->arena, &x->type);
	at = node_add_attr(ifn, "else_branch", AT_GRAPH);
	at->g = branch(m, ifn, "else", x, "e_out");
	Diag d = {0};
	ck_assert_msg(ir_verify(m, &d) == WL_OK, "%s", d.msg);

	void *buf;
	size_t len;
	Module *r = reimport(m, &buf, &len);
	Graph *rg = r->graph;
	Value *rx = graph_find(rg, "x");
	Node *rif = rg->first;
	Graph *rtb = node_attr(rif, "then_branch")->g;
	ck_assert_ptr_eq(rtb->parent, rg);
	ck_assert_ptr_eq(rtb->owner, rif);
	ck_assert_int_eq(rtb->ninits, 1);
	ck_assert_ptr_eq(rtb->first->inputs[0], rx);          /* resolved outward */
	ck_assert_ptr_null(graph_find_local(rtb, "x"));
	bool used = false;
	for (int i = 0; i < rx->nusers; i++)
		used |= rx->users[i].node == rtb->first && rx->users[i].slot == 0;
	ck_assert(used);
	ck_assert_int_eq(rx->nusers, 2);
	ck_assert_msg(ir_verify(r, &d) == WL_OK, "%s", d.msg);
	assert_stable(r, buf, len);
	write_file(tpath("sub.onnx"), buf, len);
	ck_assert_int_eq(onnx_checker(tpath("sub.onnx")), 0);
	free(buf);
	module_free(r);
	module_free(m);
}
END_TEST

START_TEST(unsorted_graph_is_sorted)
{
	/* c = Neg(b); b = Relu(a); a = Abs(x), written in reverse */
	PbGraph s = {.node = {pb_node("Neg", "n3", "b", "c"), pb_node("Relu", "n2", "a", "b"),
	                      pb_node("Abs", "n1", "x", "a")},
	             .nnode = 3, .in = {"x"}, .nin = 1, .out = {"c"}, .nout = 1};
	pb_model_file(tpath("unsorted.onnx"), &s);
	Module *m;
	Diag d = {0};
	ck_assert_msg(onnx_import_file(tpath("unsorted.onnx"), &m, &d) == WL_OK, "%s", d.msg);
	ck_assert_str_eq(m->graph->first->name, "n1");
	ck_assert_str_eq(m->graph->first->next->name, "n2");
	ck_assert_str_eq(m->graph->last->name, "n3");
	ck_assert_msg(ir_verify(m, &d) == WL_OK, "%s", d.msg);
	module_free(m);
	/* a sorted file keeps its order exactly */
	PbGraph t = {.node = {pb_node("Abs", "p", "x", "a"), pb_node("Neg", "q", "x", "b"),
	                      pb_node("Add", "r", "a,b", "c")},
	             .nnode = 3, .in = {"x"}, .nin = 1, .out = {"c"}, .nout = 1};
	pb_model_file(tpath("sorted.onnx"), &t);
	ck_assert(onnx_import_file(tpath("sorted.onnx"), &m, &d) == WL_OK);
	ck_assert_str_eq(m->graph->first->next->name, "q");
	module_free(m);
}
END_TEST

START_TEST(graph_errors)
{
	PbGraph cyc = {.node = {pb_node("Relu", "A", "b", "a"), pb_node("Relu", "B", "a", "b")},
	               .nnode = 2, .out = {"a"}, .nout = 1};
	pb_model_file(tpath("cycle.onnx"), &cyc);
	assert_import_fails(tpath("cycle.onnx"), "cycle");

	PbGraph und = {.node = {pb_node("Relu", "X", "nowhere", "y")}, .nnode = 1,
	               .out = {"y"}, .nout = 1};
	pb_model_file(tpath("undef.onnx"), &und);
	assert_import_fails(tpath("undef.onnx"), "node 'X': input 'nowhere' is not defined");

	PbGraph dup = {.node = {pb_node("Abs", "P", "x", "y"), pb_node("Neg", "Q", "x", "y")},
	               .nnode = 2, .in = {"x"}, .nin = 1, .out = {"y"}, .nout = 1};
	pb_model_file(tpath("dup.onnx"), &dup);
	assert_import_fails(tpath("dup.onnx"), "node 'Q': output 'y' is already defined");

	PbGraph redef = {.node = {pb_node("Abs", "P", "x", "x")}, .nnode = 1,
	                 .in = {"x"}, .nin = 1, .out = {"x"}, .nout = 1};
	pb_model_file(tpath("redef.onnx"), &redef);
	assert_import_fails(tpath("redef.onnx"), "output 'x' is already defined");

	PbGraph noout = {.node = {pb_node("Abs", "P", "x", "y")}, .nnode = 1,
	                 .in = {"x"}, .nin = 1, .out = {"z"}, .nout = 1};
	pb_model_file(tpath("noout.onnx"), &noout);
	assert_import_fails(tpath("noout.onnx"), "output 'z' is not defined");

	int64_t d1[1] = {1};
	Onnx__TensorProto *w1 = pb_tensor("w", DT_FLOAT, 1, d1), *w2 = pb_tensor("w", DT_FLOAT, 1, d1);
	w1->has_raw_data = w2->has_raw_data = 1;
	w1->raw_data.len = w2->raw_data.len = 4;
	w1->raw_data.data = w2->raw_data.data = (uint8_t *)"abcd";
	PbGraph dupi = {.init = {w1, w2}, .ninit = 2, .out = {"w"}, .nout = 1};
	pb_model_file(tpath("dupinit.onnx"), &dupi);
	assert_import_fails(tpath("dupinit.onnx"), "duplicate initializer 'w'");

	/* errors inside a model-local function name the function */
	Onnx__FunctionProto *fn = PNEW(Onnx__FunctionProto, onnx__function_proto__init);
	fn->name = "F";
	fn->domain = "ai.wlower";
	char *fin[1] = {"X"}, *fout[1] = {"Y"};
	Onnx__NodeProto *fnode[1] = {pb_node("Relu", "inner", "T", "Y")};
	fn->n_input = fn->n_output = fn->n_node = 1;
	fn->input = fin;
	fn->output = fout;
	fn->node = fnode;
	PbGraph fg = {.node = {pb_node("Abs", "P", "x", "y")}, .nnode = 1,
	              .in = {"x"}, .nin = 1, .out = {"y"}, .nout = 1};
	size_t flen;
	void *fb = pb_model(&fg, &flen);
	Onnx__ModelProto *fm = onnx__model_proto__unpack(NULL, flen, fb);
	ck_assert_ptr_nonnull(fm);
	free(fb);
	Onnx__FunctionProto **fns = &fn;
	fm->n_functions = 1;
	fm->functions = fns;
	flen = protobuf_c_message_get_packed_size(&fm->base);
	fb = malloc(flen);
	protobuf_c_message_pack(&fm->base, fb);
	fm->n_functions = 0;
	fm->functions = NULL;
	onnx__model_proto__free_unpacked(fm, NULL);
	write_file(tpath("fnbad.onnx"), fb, flen);
	free(fb);
	assert_import_fails(tpath("fnbad.onnx"), "function 'F': node 'inner': input 'T' is not defined");

	/* graph input that is also an initializer (IR version < 4) is fine */
	PbGraph old = {.init = {w1}, .ninit = 1, .in = {"w"}, .nin = 1,
	               .node = {pb_node("Abs", "P", "w", "y")}, .nnode = 1, .out = {"y"}, .nout = 1};
	pb_model_file(tpath("old.onnx"), &old);
	Module *m;
	Diag d = {0};
	ck_assert_msg(onnx_import_file(tpath("old.onnx"), &m, &d) == WL_OK, "%s", d.msg);
	Value *w = graph_find(m->graph, "w");
	ck_assert(w->is_input && w->init);
	void *buf;
	size_t len;
	Module *r = reimport(m, &buf, &len);
	ck_assert_int_eq(r->graph->ninputs, 1);
	ck_assert_int_eq(r->graph->ninits, 1);
	free(buf);
	module_free(r);
	module_free(m);
}
END_TEST

/* ---------------------------------------------------------------- malformed files */

START_TEST(empty_and_missing_files)
{
	write_file(tpath("empty.onnx"), "", 0);
	assert_import_fails(tpath("empty.onnx"), "empty");
	assert_import_fails(tpath("does_not_exist.onnx"), "does_not_exist.onnx");
	/* a protobuf that is not a model */
	write_file(tpath("nograph.onnx"), "\x08\x07", 2);
	assert_import_fails(tpath("nograph.onnx"), "no graph");
	/* model_read dispatches on the extension */
	Module *m;
	Diag d = {0};
	ck_assert_int_eq(model_read(tpath("empty.onnx"), &m, &d), WL_ERR);
}
END_TEST

/* The offset of the graph field (7) in an exported model. */
static void
graph_span(const uint8_t *p, size_t n, size_t *begin, size_t *end)
{
	PbReader r;
	PbField f;
	pb_init(&r, p, n);
	while (pb_next(&r, &f) > 0)
		if (f.num == 7) {
			*begin = (size_t)(f.start - p);
			*end = (size_t)(f.stop - p);
			return;
		}
	ck_abort_msg("no graph field");
}

START_TEST(truncated_files)
{
	Module *m = all_attrs_module();
	void *buf;
	size_t len;
	Diag d = {0};
	ck_assert(onnx_export_buffer(m, &buf, &len, &d) == WL_OK);
	size_t gb = 0, ge = 0;
	graph_span(buf, len, &gb, &ge);
	/* cuts inside the first field, and all over the graph, and the last byte */
	size_t cuts[64];
	int nc = 0;
	cuts[nc++] = 1;
	for (size_t c = gb + 1; c < ge && nc < 60; c += (ge - gb) / 50 + 1)
		cuts[nc++] = c;
	cuts[nc++] = ge - 1;
	cuts[nc++] = len - 1;
	for (int i = 0; i < nc; i++) {
		char name[64];
		snprintf(name, sizeof name, "trunc_%zu.onnx", cuts[i]);
		write_file(tpath(name), buf, cuts[i]);
		assert_import_fails(tpath(name), name);
	}
	/* the same through the in-memory entry point, at every length */
	for (size_t c = 0; c < len; c++) {
		Module *r = NULL;
		Diag dd = {0};
		if (onnx_import_buffer(buf, c, "cut.onnx", &r, &dd) == WL_OK)
			module_free(r);       /* a cut on a field boundary is a valid model */
		else
			ck_assert(strstr(dd.msg, "cut.onnx") != NULL);
	}
	free(buf);
	module_free(m);
}
END_TEST

START_TEST(random_bytes)
{
	srand(12345);
	for (int k = 0; k < 200; k++) {
		size_t n = 1 + (size_t)(rand() % 4096);
		uint8_t *p = malloc(n);
		ck_assert_ptr_nonnull(p);
		for (size_t i = 0; i < n; i++)
			p[i] = (uint8_t)rand();
		if (k < 10) {
			char name[64];
			snprintf(name, sizeof name, "random_%d.onnx", k);
			write_file(tpath(name), p, n);
			assert_import_fails(tpath(name), name);
		} else {
			Module *m = NULL;
			Diag d = {0};
			assert_fails(onnx_import_buffer(p, n, "random.onnx", &m, &d), &d, "random.onnx");
		}
		free(p);
	}
	/* mutations of a valid model: any outcome but a crash */
	Module *m = all_attrs_module();
	void *buf;
	size_t len;
	Diag d = {0};
	ck_assert(onnx_export_buffer(m, &buf, &len, &d) == WL_OK);
	uint8_t *p = malloc(len);
	for (int k = 0; k < 2000; k++) {
		memcpy(p, buf, len);
		for (int j = 0; j < 1 + k % 4; j++)
			p[(size_t)rand() % len] = (uint8_t)rand();
		Module *r = NULL;
		Diag dd = {0};
		if (onnx_import_buffer(p, len, "mut.onnx", &r, &dd) == WL_OK) {
			void *b2;
			size_t n2;
			if (onnx_export_buffer(r, &b2, &n2, &dd) == WL_OK)
				free(b2);
			module_free(r);
		} else
			ck_assert(strstr(dd.msg, "mut.onnx") != NULL);
	}
	free(p);
	free(buf);
	module_free(m);
}
END_TEST

START_TEST(deep_nesting_is_rejected)
{
	/* 10000 nested GraphProto→NodeProto→AttributeProto levels: must not
	 * overflow the stack of a recursive decoder */
	size_t cap = 1 << 20, n = 0;
	uint8_t *inner = malloc(cap), *outer = malloc(cap);
	ck_assert(inner && outer);
	for (int lvl = 0; lvl < 10000; lvl++) {
		/* wrap: attr{ g = inner } ; node{ attribute = attr } ; graph{ node = node } */
		static const uint8_t tags[3] = {(6 << 3) | 2, (5 << 3) | 2, (1 << 3) | 2};
		for (int t = 0; t < 3; t++) {
			size_t k = 0;
			outer[k++] = tags[t];
			size_t v = n;
			do {
				outer[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
				v >>= 7;
			} while (v);
			if (k + n > cap)
				goto done;
			memcpy(outer + k, inner, n);
			n += k;
			uint8_t *tmp = inner;
			inner = outer;
			outer = tmp;
		}
	}
done:;
	/* model{ graph = inner } */
	uint8_t *model = malloc(n + 16);
	size_t k = 0, v = n;
	model[k++] = (7 << 3) | 2;
	do {
		model[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	memcpy(model + k, inner, n);
	Module *m = NULL;
	Diag d = {0};
	assert_fails(onnx_import_buffer(model, k + n, "deep.onnx", &m, &d), &d, "deep.onnx");
	ck_assert_msg(strstr(d.msg, "If/Loop nesting deeper than 64"), "%s", d.msg);
	free(model);
	free(inner);
	free(outer);
}
END_TEST

/* ---------------------------------------------------------------- external data */

static const char ext_py[] =
	"import sys, numpy as np, onnx\n"
	"from onnx import helper, TensorProto as T, numpy_helper\n"
	"rng = np.random.default_rng(3)\n"
	"ts = [numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), 'a'),\n"
	"      numpy_helper.from_array(np.arange(10, dtype=np.int64), 'b'),\n"
	"      numpy_helper.from_array(rng.standard_normal(33).astype(np.float16), 'c')]\n"
	"g = helper.make_graph([helper.make_node('Identity', ['b'], ['y'])], 'g', [],\n"
	"    [helper.make_tensor_value_info('y', T.INT64, [10])], ts)\n"
	"m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)])\n"
	"onnx.save(m, sys.argv[1] + '/inl.onnx')\n"
	"onnx.save(m, sys.argv[1] + '/ext.onnx', save_as_external_data=True,\n"
	"    all_tensors_to_one_file=True, location='ext.bin', size_threshold=0)\n";

START_TEST(external_data_roundtrip)
{
	ck_assert_int_eq(python(ext_py, tmpdir), 0);
	Module *mi, *me;
	Diag d = {0};
	ck_assert_msg(onnx_import_file(tpath("inl.onnx"), &mi, &d) == WL_OK, "%s", d.msg);
	ck_assert_msg(onnx_import_file(tpath("ext.onnx"), &me, &d) == WL_OK, "%s", d.msg);
	ck_assert_int_eq(me->nmaps, 2);                       /* model + ext.bin */
	for (int i = 0; i < 3; i++) {
		const Tensor *a = mi->graph->inits[i]->init, *b = me->graph->inits[i]->init;
		ck_assert_int_eq(a->storage, TS_RAW);
		ck_assert_int_eq(b->storage, TS_EXTERNAL);
		ck_assert_str_eq(b->ext_location, "ext.bin");
		ck_assert_uint_eq(a->nbytes, b->nbytes);
		ck_assert(memcmp(a->data, b->data, a->nbytes) == 0);
		/* no copy: inline weights point into the model file, external
		 * ones into the data file's mapping */
		ck_assert(a->data >= mi->maps[0].addr &&
		          (const char *)a->data + a->nbytes <= (char *)mi->maps[0].addr + mi->maps[0].len);
		ck_assert(b->data >= me->maps[1].addr &&
		          (const char *)b->data + b->nbytes <= (char *)me->maps[1].addr + me->maps[1].len);
	}
	/* external stays external, 64-byte aligned, beside the output */
	ck_assert_msg(onnx_export_file(me, tpath("re.onnx"), NULL, &d) == WL_OK, "%s", d.msg);
	ck_assert(exists(tpath("re.onnx.data")));
	ck_assert_int_eq(onnx_checker(tpath("re.onnx")), 0);
	Module *r;
	ck_assert_msg(onnx_import_file(tpath("re.onnx"), &r, &d) == WL_OK, "%s", d.msg);
	for (int i = 0; i < 3; i++) {
		const Tensor *a = mi->graph->inits[i]->init, *b = r->graph->inits[i]->init;
		ck_assert_int_eq(b->storage, TS_EXTERNAL);
		ck_assert_str_eq(b->ext_location, "re.onnx.data");
		ck_assert_int_eq(b->ext_offset % 64, 0);
		ck_assert(memcmp(a->data, b->data, a->nbytes) == 0);
	}
	module_free(r);
	/* inline model, everything >= 100 bytes forced external */
	ExportOptions o = {.external_threshold = 100, .all_external = true};
	ck_assert_msg(onnx_export_file(mi, tpath("forced.onnx"), &o, &d) == WL_OK, "%s", d.msg);
	ck_assert_int_eq(onnx_checker(tpath("forced.onnx")), 0);
	ck_assert_msg(onnx_import_file(tpath("forced.onnx"), &r, &d) == WL_OK, "%s", d.msg);
	ck_assert_int_eq(r->graph->inits[0]->init->storage, TS_EXTERNAL);   /* 16 KiB */
	ck_assert_int_eq(r->graph->inits[1]->init->storage, TS_RAW);        /* 80 bytes */
	ck_assert_int_eq(r->graph->inits[2]->init->storage, TS_RAW);        /* 66 bytes */
	ck_assert(memcmp(r->graph->inits[0]->init->data, mi->graph->inits[0]->init->data, 16384) == 0);
	module_free(r);
	/* in-memory export inlines external tensors */
	void *buf;
	size_t len;
	r = reimport(me, &buf, &len);
	ck_assert_int_eq(r->graph->inits[0]->init->storage, TS_RAW);
	free(buf);
	module_free(r);
	module_free(mi);
	module_free(me);
}
END_TEST

/* A one-initializer model whose data is external. */
static void
ext_model(const char *path, const char *loc, const char *off, const char *len, int64_t n)
{
	int64_t dims[1] = {n};
	Onnx__TensorProto *t = pb_tensor("w", DT_FLOAT, 1, dims);
	pb_external(t, loc, off, len);
	PbGraph g = {.init = {t}, .ninit = 1, .out = {"w"}, .nout = 1};
	pb_model_file(path, &g);
}

START_TEST(external_data_errors)
{
	uint8_t data[256] = {0};
	write_file(tpath("w.bin"), data, sizeof data);
	ext_model(tpath("ok.onnx"), "w.bin", "64", "64", 16);
	Module *m;
	Diag d = {0};
	ck_assert_msg(onnx_import_file(tpath("ok.onnx"), &m, &d) == WL_OK, "%s", d.msg);
	ck_assert_int_eq(m->graph->inits[0]->init->ext_offset, 64);
	module_free(m);
	ext_model(tpath("nolen.onnx"), "w.bin", NULL, NULL, 64);     /* length: to the end */
	ck_assert_msg(onnx_import_file(tpath("nolen.onnx"), &m, &d) == WL_OK, "%s", d.msg);
	module_free(m);

	ext_model(tpath("missing.onnx"), "nothere.bin", NULL, NULL, 4);
	assert_import_fails(tpath("missing.onnx"), "nothere.bin");
	ext_model(tpath("beyond.onnx"), "w.bin", "4096", "64", 16);
	assert_import_fails(tpath("beyond.onnx"), "beyond the end");
	ext_model(tpath("past.onnx"), "w.bin", "200", "64", 16);
	assert_import_fails(tpath("past.onnx"), "past the end");
	ext_model(tpath("short.onnx"), "w.bin", "0", "60", 16);
	assert_import_fails(tpath("short.onnx"), "expected 64");
	ext_model(tpath("dotdot.onnx"), "../w.bin", NULL, NULL, 4);
	assert_import_fails(tpath("dotdot.onnx"), "leaves the model's folder");
	ext_model(tpath("dotdot2.onnx"), "sub/../../w.bin", NULL, NULL, 4);
	assert_import_fails(tpath("dotdot2.onnx"), "leaves the model's folder");
	ext_model(tpath("abs.onnx"), "/etc/passwd", NULL, NULL, 4);
	assert_import_fails(tpath("abs.onnx"), "absolute");
	ext_model(tpath("badoff.onnx"), "w.bin", "-4", NULL, 4);
	assert_import_fails(tpath("badoff.onnx"), "bad external data offset");
	ext_model(tpath("hugeoff.onnx"), "w.bin", "99999999999999999999999", NULL, 4);
	assert_import_fails(tpath("hugeoff.onnx"), "bad external data offset");
	ext_model(tpath("noloc.onnx"), NULL, "0", NULL, 4);
	assert_import_fails(tpath("noloc.onnx"), "without a location");
	/* from memory there is no folder to resolve against */
	size_t n;
	int64_t dims[1] = {4};
	Onnx__TensorProto *t = pb_tensor("w", DT_FLOAT, 1, dims);
	pb_external(t, "w.bin", NULL, NULL);
	PbGraph g = {.init = {t}, .ninit = 1, .out = {"w"}, .nout = 1};
	void *b = pb_model(&g, &n);
	assert_fails(onnx_import_buffer(b, n, NULL, &m, &d), &d, "<memory>");
	free(b);
}
END_TEST

/* > 2 GiB of weights in a sparse external file: imports instantly, mapped. */
START_TEST(external_data_over_2gib)
{
	const uint64_t gib = 1ull << 30;
	int fd = open(tpath("huge.bin"), O_CREAT | O_TRUNC | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)(3 * gib)), 0);
	ck_assert_int_eq(pwrite(fd, "\x01\x02\x03\x04", 4, (off_t)(2 * gib)), 4);
	ck_assert_int_eq(close(fd), 0);
	int64_t dims[1] = {(int64_t)(gib / 4)};
	Onnx__TensorProto *t[3];
	static const char *offs[3] = {"0", "1073741824", "2147483648"};
	static const char *names[3] = {"w0", "w1", "w2"};
	for (int i = 0; i < 3; i++) {
		t[i] = pb_tensor(names[i], DT_FLOAT, 1, dims);
		pb_external(t[i], "huge.bin", offs[i], "1073741824");
	}
	PbGraph g = {.init = {t[0], t[1], t[2]}, .ninit = 3, .out = {"w0"}, .nout = 1};
	pb_model_file(tpath("huge.onnx"), &g);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	Module *m;
	Diag d = {0};
	ck_assert_msg(onnx_import_file(tpath("huge.onnx"), &m, &d) == WL_OK, "%s", d.msg);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
	ck_assert_msg(secs < 0.5, "import took %.3f s", secs);
	ck_assert(arena_bytes(m->arena) < (1u << 20));          /* nothing copied */
	for (int i = 0; i < 3; i++) {
		const Tensor *w = m->graph->inits[i]->init;
		ck_assert_uint_eq(w->nbytes, gib);
		ck_assert(in_mapping(m, w->data, w->nbytes));
	}
	ck_assert(memcmp(m->graph->inits[2]->init->data, "\x01\x02\x03\x04", 4) == 0);
	module_free(m);
	unlink(tpath("huge.bin"));
}
END_TEST

/* Over the protobuf limit, big tensors move to "<out>.data" by themselves
 * (a real 2 GiB export works the same but writes gigabytes: the limit is
 * lowered instead). */
START_TEST(export_over_limit_goes_external)
{
	Module *m = new_module("limit.onnx");
	Graph *g = m->graph;
	add_init(g, float_tensor(m->arena, "big0", 1000, 0));
	add_init(g, float_tensor(m->arena, "small", 4, 0));
	add_init(g, float_tensor(m->arena, "big1", 2000, 1));
	graph_add_output(g, g->inits[0]);
	Diag d = {0};
	ExportOptions o = {.size_limit = 10000};
	ck_assert_msg(onnx_export_file(m, tpath("limit.onnx"), &o, &d) == WL_OK, "%s", d.msg);
	struct stat st;
	ck_assert_int_eq(stat(tpath("limit.onnx.data"), &st), 0);
	ck_assert_int_eq(st.st_size, 4032 + 8000);             /* big1 at 64-aligned 4032 */
	ck_assert_int_eq(onnx_checker(tpath("limit.onnx")), 0);
	Module *r;
	ck_assert_msg(onnx_import_file(tpath("limit.onnx"), &r, &d) == WL_OK, "%s", d.msg);
	ck_assert_int_eq(r->graph->inits[0]->init->storage, TS_EXTERNAL);
	ck_assert_int_eq(r->graph->inits[1]->init->storage, TS_RAW);
	ck_assert_int_eq(r->graph->inits[2]->init->storage, TS_EXTERNAL);
	ck_assert_int_eq(r->graph->inits[2]->init->ext_offset, 4032);
	for (int i = 0; i < 3; i++)
		ck_assert(memcmp(r->graph->inits[i]->init->data, g->inits[i]->init->data,
		                 g->inits[i]->init->nbytes) == 0);
	module_free(r);
	/* under the limit nothing moves; over it with nothing big enough: error */
	unlink(tpath("limit.onnx.data"));
	o.size_limit = 100000;
	ck_assert(onnx_export_file(m, tpath("limit2.onnx"), &o, &d) == WL_OK);
	ck_assert(!exists(tpath("limit2.onnx.data")));
	o.size_limit = 100;
	assert_fails(onnx_export_file(m, tpath("limit3.onnx"), &o, &d), &d, "over the protobuf limit");
	ck_assert(!exists(tpath("limit3.onnx")));
	ck_assert(!exists(tpath("limit3.onnx.data")));
	module_free(m);
}
END_TEST

/* ---------------------------------------------------------------- failed exports */

static int
count_files(const char *dir)
{
	DIR *dp = opendir(dir);
	ck_assert_ptr_nonnull(dp);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(dp)))
		n += e->d_name[0] != '.';
	closedir(dp);
	return n;
}

START_TEST(failed_export_leaves_nothing)
{
	char dir[600];
	snprintf(dir, sizeof dir, "%s/exp_fail", tmpdir);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	char out[700];
	snprintf(out, sizeof out, "%s/out.onnx", dir);
	Module *m = new_module("big.onnx");
	add_init(m->graph, float_tensor(m->arena, "w", 100000, 0));
	graph_add_output(m->graph, m->graph->inits[0]);
	Diag d = {0};

	/* a tensor whose bytes do not match its shape: caught before writing */
	Tensor *bad = add_init(m->graph, float_tensor(m->arena, "bad", 4, 0));
	bad->nbytes = 3;
	assert_fails(onnx_export_file(m, out, NULL, &d), &d, "tensor 'bad'");
	ck_assert_int_eq(count_files(dir), 0);
	bad->nbytes = 16;

	/* the disk fills up half way through (RLIMIT_FSIZE; Check forks) */
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit rl = {100000, 100000};
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	memset(&d, 0, sizeof d);
	assert_fails(onnx_export_file(m, out, NULL, &d), &d, out);
	ck_assert_int_eq(count_files(dir), 0);
	ExportOptions o = {.all_external = true};
	memset(&d, 0, sizeof d);
	assert_fails(onnx_export_file(m, out, &o, &d), &d, "out.onnx");
	ck_assert_int_eq(count_files(dir), 0);
	rl.rlim_cur = rl.rlim_max = RLIM_INFINITY;
	setrlimit(RLIMIT_FSIZE, &rl);

	/* a folder that does not exist */
	memset(&d, 0, sizeof d);
	assert_fails(onnx_export_file(m, "/nonexistent-dir/x.onnx", NULL, &d), &d, "/nonexistent-dir/x.onnx");
	module_free(m);
}
END_TEST

/* ---------------------------------------------------------------- pbwire */

START_TEST(pbwire_scanner)
{
	uint64_t v;
	const uint8_t *p;
	static const uint8_t ten[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
	p = ten;
	ck_assert_int_eq(pb_varint(&p, ten + 10, &v), 0);
	ck_assert(v == UINT64_MAX);
	static const uint8_t over[11] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
	p = over;
	ck_assert_int_eq(pb_varint(&p, over + 11, &v), -1);
	p = ten;
	ck_assert_int_eq(pb_varint(&p, ten + 5, &v), -1);          /* runs off the end */
	/* fields of every wire type, a group included */
	static const uint8_t msg[] = {
		0x08, 0x96, 0x01,                      /* 1: varint 150 */
		0x11, 1, 2, 3, 4, 5, 6, 7, 8,          /* 2: fixed64 */
		0x1a, 0x03, 'a', 'b', 'c',             /* 3: "abc" */
		0x23, 0x08, 0x01, 0x24,                /* 4: group { 1: 1 } */
		0x2d, 1, 0, 0, 0,                      /* 5: fixed32 1 */
	};
	PbReader r;
	PbField f;
	pb_init(&r, msg, sizeof msg);
	ck_assert_int_eq(pb_next(&r, &f), 1);
	ck_assert(f.num == 1 && f.u == 150);
	ck_assert_int_eq(pb_next(&r, &f), 1);
	ck_assert(f.num == 2 && f.u == 0x0807060504030201ull);
	ck_assert_int_eq(pb_next(&r, &f), 1);
	ck_assert(f.num == 3 && f.len == 3 && memcmp(f.data, "abc", 3) == 0);
	ck_assert_int_eq(pb_next(&r, &f), 1);
	ck_assert(f.num == 4 && f.wt == PB_SGROUP && f.len == 2);
	ck_assert_int_eq(pb_next(&r, &f), 1);
	ck_assert(f.num == 5 && f.u == 1);
	ck_assert_int_eq(pb_next(&r, &f), 0);
	/* every truncation is detected, never read past */
	for (size_t n = 1; n < sizeof msg; n++) {
		uint8_t *c = malloc(n);
		memcpy(c, msg, n);
		pb_init(&r, c, n);
		int rc;
		while ((rc = pb_next(&r, &f)) > 0)
			;
		bool boundary = n == 3 || n == 12 || n == 17 || n == 21;
		ck_assert_int_eq(rc, boundary ? 0 : -1);
		free(c);
	}
	static const uint8_t bad[][3] = {{0x00, 0x00}, {0x0e, 0x00}, {0x0c, 0x00}, {0x12, 0x05}};
	for (int i = 0; i < 4; i++) {
		pb_init(&r, bad[i], 2);
		ck_assert_int_eq(pb_next(&r, &f), -1);
	}
}
END_TEST

/* ---------------------------------------------------------------- suite */

static Suite *
suite(void)
{
	Suite *s = suite_create("onnx_io");
	TCase *tc = tcase_create("io");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, every_attribute_kind);
	tcase_add_test(tc, old_attribute_without_type);
	tcase_add_test(tc, every_dtype_raw_and_typed);
	tcase_add_test(tc, typed_fields_from_protobuf);
	tcase_add_test(tc, typed_fields_from_python);
	tcase_add_test(tc, raw_size_mismatch);
	tcase_add_test(tc, kitchen_sink_model);
	tcase_add_test(tc, subgraph_outer_reference);
	tcase_add_test(tc, unsorted_graph_is_sorted);
	tcase_add_test(tc, graph_errors);
	tcase_add_test(tc, empty_and_missing_files);
	tcase_add_test(tc, truncated_files);
	tcase_add_test(tc, random_bytes);
	tcase_add_test(tc, deep_nesting_is_rejected);
	tcase_add_test(tc, external_data_roundtrip);
	tcase_add_test(tc, external_data_errors);
	tcase_add_test(tc, external_data_over_2gib);
	tcase_add_test(tc, export_over_limit_goes_external);
	tcase_add_test(tc, failed_export_leaves_nothing);
	tcase_add_test(tc, pbwire_scanner);
	suite_add_tcase(s, tc);
	return s;
}

static void
rm_tree(const char *dir)
{
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

int
main(void)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/wlower-onnx-io-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	rm_tree(tmpdir);
	return failed ? 1 : 0;
}
