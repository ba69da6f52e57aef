/* test_ir.c — IR construction, use lists, mutation, verifier, arena, dtypes,
 * op table, pass table resolution. */
#include <check.h>
#include "check_run.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "passes/passes.h"

static Module *tiny(Node **add_out, Node **relu_out)
{
	/* y = Relu(Add(x, w)) with w an initializer */
	Module *m = module_new("tiny.onnx");
	module_set_opset(m, "", 17);
	Graph *g = m->graph = graph_new(m, NULL, NULL, "g");
	Value *x = graph_value(g, "x"), *w = graph_value(g, "w");
	int64_t dims[2] = {2, 3};
	type_set_tensor(m->arena, &x->type, DT_FLOAT, 2, dims);
	graph_add_input(g, x);
	Tensor *t = tensor_new(m->arena, "w", DT_FLOAT, 2, dims);
	float *p = tensor_alloc_data(m->arena, t);
	for (int i = 0; i < 6; i++) p[i] = (float)i;
	graph_set_init(g, w, t);
	Node *add = node_new(g, "Add", "", "add0");
	node_add_input(add, x);
	node_add_input(add, w);
	node_add_output(add, graph_value(g, "s"));
	node_append(g, add);
	Node *relu = node_new(g, "Relu", "", "relu0");
	node_add_input(relu, add->outputs[0]);
	Value *y = graph_value(g, "y");
	node_add_output(relu, y);
	node_append(g, relu);
	graph_add_output(g, y);
	if (add_out) *add_out = add;
	if (relu_out) *relu_out = relu;
	return m;
}

START_TEST(build_and_verify)
{
	Node *add, *relu;
	Module *m = tiny(&add, &relu);
	Diag d = {0};
	ck_assert_int_eq(ir_verify(m, &d), WL_OK);
	ck_assert_int_eq(add->op, OP_Add);
	ck_assert_int_eq(relu->op, OP_Relu);
	ck_assert_int_eq(m->graph->nnodes, 2);
	Value *s = graph_find(m->graph, "s");
	ck_assert_ptr_eq(s->producer, add);
	ck_assert_int_eq(s->nusers, 1);
	ck_assert_ptr_eq(s->users[0].node, relu);
	ck_assert_int_eq(graph_find(m->graph, "w")->init->nbytes, 24);
	ck_assert(tensor_get_f64(graph_find(m->graph, "w")->init, 5) == 5.0);
	module_free(m);
}
END_TEST

START_TEST(replace_and_remove)
{
	Node *add, *relu;
	Module *m = tiny(&add, &relu);
	Graph *g = m->graph;
	Value *x = graph_find(g, "x"), *s = graph_find(g, "s");
	value_replace_uses(s, x);          /* relu reads x directly */
	ck_assert_int_eq(s->nusers, 0);
	ck_assert_int_eq(x->nusers, 2);
	node_remove(add);
	ck_assert_int_eq(g->nnodes, 1);
	ck_assert_ptr_eq(g->first, relu);
	ck_assert_int_eq(x->nusers, 1);
	ck_assert_int_eq(graph_find(g, "w")->nusers, 0);
	Diag d = {0};
	ck_assert_int_eq(ir_verify(m, &d), WL_OK);
	module_free(m);
}
END_TEST

START_TEST(verifier_catches_use_before_def)
{
	Node *add, *relu;
	Module *m = tiny(&add, &relu);
	Graph *g = m->graph;
	/* move relu before add: its input is not yet defined */
	node_remove(relu);
	Node *r2 = node_new(g, "Relu", "", "relu1");
	node_add_input(r2, graph_find(g, "s"));
	node_add_output(r2, graph_new_value(g, "y2"));
	node_insert_before(add, r2);
	Diag d = {0};
	ck_assert_int_eq(ir_verify(m, &d), WL_ERR);
	ck_assert_ptr_nonnull(strstr(d.msg, "before it is defined"));
	ck_assert_ptr_nonnull(strstr(d.msg, "tiny.onnx"));
	module_free(m);
}
END_TEST

/* w read by 12 Relu nodes: above the verifier's few-users threshold, its use
 * list is checked by count and duplicates rather than per edge */
static Module *many_readers(Value **wout)
{
	Module *m = tiny(NULL, NULL);
	Graph *g = m->graph;
	Value *w = graph_find(g, "w");
	for (int i = 0; i < 12; i++) {
		char name[16];
		snprintf(name, sizeof name, "r%d", i);
		Node *r = node_new(g, "Relu", "", name);
		node_add_input(r, w);
		node_add_output(r, graph_new_value(g, name));
		node_append(g, r);
	}
	*wout = w;
	return m;
}

START_TEST(verifier_checks_long_use_lists)
{
	Value *w;
	Module *m = many_readers(&w);
	Diag d = {0};
	ck_assert_int_eq(w->nusers, 13);
	ck_assert_int_eq(ir_verify(m, &d), WL_OK);
	w->nusers--;                       /* an edge without its use */
	ck_assert_int_eq(ir_verify(m, &d), WL_ERR);
	ck_assert_ptr_nonnull(strstr(d.msg, "'w': 13 input edges but 12 uses"));
	module_free(m);

	m = many_readers(&w);
	w->users[5] = w->users[4];         /* a use listed twice, another missing */
	Diag d2 = {0};
	ck_assert_int_eq(ir_verify(m, &d2), WL_ERR);
	ck_assert_ptr_nonnull(strstr(d2.msg, "listed twice"));
	module_free(m);
}
END_TEST

START_TEST(verifier_catches_undefined_output_and_arity)
{
	Module *m = tiny(NULL, NULL);
	Graph *g = m->graph;
	graph_add_output(g, graph_value(g, "nowhere"));
	Diag d = {0};
	ck_assert_int_eq(ir_verify(m, &d), WL_ERR);
	ck_assert_ptr_nonnull(strstr(d.msg, "nowhere"));
	module_free(m);

	m = tiny(NULL, NULL);
	g = m->graph;
	Node *bad = node_new(g, "MatMul", "", "mm");
	node_add_input(bad, graph_find(g, "x"));
	node_add_output(bad, graph_new_value(g, "z"));
	node_append(g, bad);
	Diag d2 = {0};
	ck_assert_int_eq(ir_verify(m, &d2), WL_ERR);
	ck_assert_ptr_nonnull(strstr(d2.msg, "1 inputs"));
	module_free(m);
}
END_TEST

START_TEST(unique_names_and_scopes)
{
	Module *m = tiny(NULL, NULL);
	Graph *g = m->graph;
	Value *a = graph_new_value(g, "x");
	ck_assert_str_eq(a->name, "x_1");
	Value *b = graph_new_value(g, "x");
	ck_assert_str_eq(b->name, "x_2");
	Graph *sub = graph_new(m, g, g->first, "body");
	ck_assert_ptr_eq(graph_find(sub, "x"), graph_find(g, "x"));
	ck_assert_ptr_null(graph_find_local(sub, "x"));
	Value *c = graph_new_value(sub, "x");   /* does not shadow */
	ck_assert_str_eq(c->name, "x_3");
	/* many names: the hash map grows */
	char buf[32];
	for (int i = 0; i < 5000; i++) {
		snprintf(buf, sizeof buf, "v%d", i);
		graph_value(g, buf);
	}
	ck_assert_str_eq(graph_find(g, "v4321")->name, "v4321");
	module_free(m);
}
END_TEST

START_TEST(attributes)
{
	Node *add;
	Module *m = tiny(&add, NULL);
	Attr *a = node_add_attr(add, "axis", AT_INT);
	a->i = -1;
	ck_assert_int_eq(attr_int(add, "axis", 7), -1);
	ck_assert_int_eq(attr_int(add, "nope", 7), 7);
	Attr *l = node_add_attr(add, "perm", AT_INTS);
	static int64_t perm[] = {0, 2, 1};
	l->ints = perm;
	l->n = 3;
	const int64_t *out;
	ck_assert_int_eq(attr_ints(add, "perm", &out), 3);
	ck_assert_int_eq(out[2], 1);
	Attr *s = node_add_attr(add, "mode", AT_STRING);
	s->s.ptr = "constant";
	s->s.len = 8;
	ck_assert_str_eq(attr_string(add, "mode", ""), "constant");
	node_add_attr(add, "axis", AT_FLOAT)->f = 2.5f;   /* replaces */
	ck_assert_int_eq(add->nattrs, 3);
	ck_assert(attr_float(add, "axis", 0) == 2.5f);
	module_free(m);
}
END_TEST

START_TEST(dtypes_and_ops)
{
	ck_assert_str_eq(dtype_name(DT_FLOAT16), "float16");
	ck_assert_int_eq(dtype_from_name("bfloat16", 8), DT_BFLOAT16);
	ck_assert_int_eq(dtype_from_name("floaty", 6), DT_UNDEFINED);
	ck_assert_int_eq(dtype_nbytes(DT_INT4, 5), 3);
	ck_assert_int_eq(dtype_nbytes(DT_INT64, 3), 24);
	ck_assert_int_eq(op_lookup("com.microsoft", "MatMulNBits"), OP_MsMatMulNBits);
	ck_assert_int_eq(op_lookup("ai.wlower", "MatMulNBits"), OP_WlMatMulNBits);
	ck_assert_int_eq(op_lookup("ai.onnx", "MatMul"), OP_MatMul);
	ck_assert_int_eq(op_lookup("com.microsoft", "MatMul"), OP_UNKNOWN);
	ck_assert_int_eq(op_lookup("", "NoSuchOp"), OP_UNKNOWN);
	Module *m = module_new(NULL);
	module_set_opset(m, "ai.onnx", 14);
	module_set_opset(m, "", 17);
	module_set_opset(m, "com.microsoft", 1);
	ck_assert_int_eq(m->nopsets, 2);
	ck_assert_int_eq(module_opset(m, ""), 17);
	ck_assert_int_eq(module_opset(m, "com.microsoft"), 1);
	ck_assert_int_eq(module_opset(m, "ai.wlower"), 0);
	module_free(m);
}
END_TEST

START_TEST(int4_and_half_reads)
{
	Module *m = module_new(NULL);
	int64_t n = 3;
	Tensor *t = tensor_new(m->arena, "q", DT_INT4, 1, &n);
	unsigned char *p = tensor_alloc_data(m->arena, t);
	p[0] = 0x9F;        /* low nibble 15 → -1, high 9 → -7 */
	p[1] = 0x07;
	ck_assert_int_eq(tensor_get_i64(t, 0), -1);
	ck_assert_int_eq(tensor_get_i64(t, 1), -7);
	ck_assert_int_eq(tensor_get_i64(t, 2), 7);
	Tensor *h = tensor_new(m->arena, "h", DT_FLOAT16, 1, &n);
	uint16_t *hp = tensor_alloc_data(m->arena, h);
	hp[0] = 0x3C00; hp[1] = 0xC000; hp[2] = 0x0001;
	ck_assert(tensor_get_f64(h, 0) == 1.0);
	ck_assert(tensor_get_f64(h, 1) == -2.0);
	ck_assert(tensor_get_f64(h, 2) == 1.0 / (1 << 24));
	module_free(m);
}
END_TEST

START_TEST(arena_big_and_small)
{
	Arena *a = arena_new();
	char *s = arena_strdup(a, "hello");
	void *big = arena_alloc(a, 1 << 20);
	ck_assert(((uintptr_t)big & 15) == 0);
	memset(big, 1, 1 << 20);
	char *s2 = arena_printf(a, "%s-%d", s, 42);
	ck_assert_str_eq(s2, "hello-42");
	ck_assert_str_eq(s, "hello");
	ck_assert_uint_ge(arena_bytes(a), (1 << 20));
	arena_free(a);
}
END_TEST

START_TEST(pass_table_resolution)
{
	const Pass *p[32];
	Diag d = {0};
	ck_assert_int_eq(pipeline_resolve("dce,shape-infer", p, 32, &d), 2);
	ck_assert_str_eq(p[0]->name, "dce");
	int n = pipeline_resolve("canonicalize", p, 32, &d);
	int in_group = 0;
	for (int i = 0; i < pass_count; i++)
		in_group += pass_table[i].group && strcmp(pass_table[i].group, "canonicalize") == 0;
	ck_assert_int_eq(n, in_group);
	ck_assert_int_ge(n, 4);
	ck_assert_str_eq(p[0]->name, "specialize-dims");
	Diag d2 = {0};
	ck_assert_int_eq(pipeline_resolve("dce,bogus", p, 16, &d2), WL_ERR);
	ck_assert_ptr_nonnull(strstr(d2.msg, "unknown pass 'bogus'"));
	ck_assert_ptr_nonnull(strstr(d2.msg, "shape-infer"));
	Diag d3 = {0};
	ck_assert_int_eq(pipeline_resolve("dce,,dce", p, 16, &d3), WL_ERR);
	ck_assert_ptr_nonnull(pass_find("identity-elim"));
	ck_assert_ptr_null(pass_find("canonicalize"));
}
END_TEST

START_TEST(atomic_files)
{
	char path[] = "/tmp/wlower-atomic-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(path));
	char out[256];
	snprintf(out, sizeof out, "%s/o.txt", path);
	AtomicFile af;
	Diag d = {0};
	ck_assert_int_eq(atomic_open(&af, out, &d), WL_OK);
	fputs("partial", af.f);
	atomic_abort(&af);
	ck_assert_int_ne(access(out, F_OK), 0);
	ck_assert_int_eq(atomic_open(&af, out, &d), WL_OK);
	fputs("whole", af.f);
	ck_assert_int_eq(atomic_commit(&af, &d), WL_OK);
	ck_assert_int_eq(access(out, F_OK), 0);
	MappedFile mf;
	ck_assert_int_eq(file_map(out, &mf, &d), WL_OK);
	ck_assert_int_eq(mf.len, 5);
	ck_assert(memcmp(mf.addr, "whole", 5) == 0);
	char hex[65];
	sha256_hex("abc", 3, hex);
	ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	Diag d2 = {0};
	ck_assert_int_eq(file_map("/nonexistent/x.onnx", &mf, &d2), WL_ERR);
	ck_assert_ptr_nonnull(strstr(d2.msg, "/nonexistent/x.onnx"));
	unlink(out);
	rmdir(path);
}
END_TEST

START_TEST(diag_one_line)
{
	Diag d = {0};
	ck_assert_int_eq(diag_fail(&d, "f.onnx: tensor '%s': bad", "a\nb"), WL_ERR);
	ck_assert_ptr_null(strchr(d.msg, '\n'));
	diag_fail(&d, "second is ignored");
	ck_assert_ptr_nonnull(strstr(d.msg, "f.onnx"));
	diag_prefix(&d, "%s: ", "outer");
	ck_assert(strncmp(d.msg, "outer: f.onnx", 13) == 0);
}
END_TEST

CHECK_MAIN("ir", "core",
	build_and_verify, replace_and_remove, verifier_catches_use_before_def,
	verifier_catches_undefined_output_and_arity, verifier_checks_long_use_lists, unique_names_and_scopes, attributes,
	dtypes_and_ops, int4_and_half_reads, arena_big_and_small, pass_table_resolution,
	atomic_files, diag_one_line)
