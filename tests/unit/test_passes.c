/* test_passes.c — the canonicalize passes on graphs built with the IR API:
 * constant-to-initializer, identity-elim, dce, and shape inference op by op,
 * including the bad-input errors. */
#include <check.h>
#include "check_run.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "passes/passes.h"

/* ---------------------------------------------------------------- builder */

typedef struct B { Module *m; Graph *g; } B;

static B mk(void)
{
	B b;
	b.m = module_new("t.onnx");
	module_set_opset(b.m, "", 17);
	b.g = b.m->graph = graph_new(b.m, NULL, NULL, "g");
	return b;
}

/* "N,4" → dims; "" → scalar; NULL → no shape; "?" unknown dim. */
static void settype(Arena *a, Type *t, int elem, const char *spec)
{
	memset(t, 0, sizeof *t);
	t->kind = TY_TENSOR;
	t->elem = elem;
	if (!spec)
		return;
	t->has_shape = true;
	t->dims = arena_alloc(a, 16 * sizeof *t->dims);
	for (const char *p = spec; *p;) {
		const char *q = strchr(p, ',');
		size_t len = q ? (size_t)(q - p) : strlen(p);
		Dim *d = &t->dims[t->rank++];
		if (*p >= '0' && *p <= '9') {
			d->kind = DIM_VALUE;
			d->value = strtoll(p, NULL, 10);
		} else if (*p != '?') {
			d->kind = DIM_PARAM;
			d->param = arena_strndup(a, p, len);
		}
		p += len + (q ? 1 : 0);
	}
}

static Value *input(B *b, const char *name, int elem, const char *spec)
{
	Value *v = graph_value(b->g, name);
	settype(b->m->arena, &v->type, elem, spec);
	graph_add_input(b->g, v);
	return v;
}

static Value *init_i64(B *b, Graph *g, const char *name, int rank, int n, ...)
{
	int64_t dim = n;
	Tensor *t = tensor_new(b->m->arena, name, DT_INT64, rank, &dim);
	int64_t *p = tensor_alloc_data(b->m->arena, t);
	va_list ap;
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		p[i] = va_arg(ap, int64_t);
	va_end(ap);
	Value *v = graph_value(g, name);
	graph_set_init(g, v, t);
	return v;
}
#define I(x) ((int64_t)(x))

static Value *init_f32(B *b, const char *name, int rank, const int64_t *dims)
{
	Tensor *t = tensor_new(b->m->arena, name, DT_FLOAT, rank, dims);
	(void)tensor_alloc_data(b->m->arena, t);
	Value *v = graph_value(b->g, name);
	graph_set_init(b->g, v, t);
	return v;
}

/* Node with comma-separated input and output names ("" = absent input). */
static Node *opd(B *b, Graph *g, const char *type, const char *dom, const char *ins, const char *outs)
{
	Node *n = node_new(g, type, dom, "");
	char buf[256];
	for (int pass = 0; pass < 2; pass++) {
		const char *s = pass ? outs : ins;
		if (!s || !*s)
			continue;
		snprintf(buf, sizeof buf, "%s", s);
		char *save = NULL, *p = buf;
		for (;;) {
			char *c = strchr(p, ',');
			if (c) *c = 0;
			Value *v = *p ? graph_find(g, p) : NULL;
			if (pass) {
				v = *p ? graph_value(g, p) : NULL;
				node_add_output(n, v);
			} else {
				if (*p && !v)
					v = graph_value(g, p);
				node_add_input(n, v);
			}
			if (!c) break;
			p = c + 1;
		}
		(void)save;
	}
	if (!n->name[0] && n->noutputs && n->outputs[0])
		n->name = arena_printf(b->m->arena, "%s_node", n->outputs[0]->name);
	node_append(g, n);
	return n;
}
#define op(b, type, ins, outs) opd((b), (b)->g, (type), "", (ins), (outs))
#define ms(b, type, ins, outs) opd((b), (b)->g, (type), "com.microsoft", (ins), (outs))

static void aint(Node *n, const char *name, int64_t v) { node_add_attr(n, name, AT_INT)->i = v; }
static void afloat(Node *n, const char *name, float v) { node_add_attr(n, name, AT_FLOAT)->f = v; }
static void astr(Node *n, const char *name, const char *s)
{
	Attr *a = node_add_attr(n, name, AT_STRING);
	a->s.ptr = arena_strdup(n->graph->mod->arena, s);
	a->s.len = strlen(s);
}
static void aints(Node *n, const char *name, int k, ...)
{
	Attr *a = node_add_attr(n, name, AT_INTS);
	a->n = k;
	a->ints = arena_alloc(n->graph->mod->arena, (size_t)(k ? k : 1) * sizeof *a->ints);
	va_list ap;
	va_start(ap, k);
	for (int i = 0; i < k; i++)
		a->ints[i] = va_arg(ap, int64_t);
	va_end(ap);
}

static void output(B *b, const char *name) { graph_add_output(b->g, graph_value(b->g, name)); }

/* "float[N,4]", "int64[]", "float" (no shape), "none". */
static const char *ts(B *b, const char *name)
{
	static char buf[8][160];
	static int k;
	char *s = buf[k++ % 8];
	Value *v = graph_find(b->g, name);
	if (!v || v->type.kind != TY_TENSOR)
		return "none";
	size_t len = (size_t)snprintf(s, 160, "%s", dtype_name(v->type.elem) ? dtype_name(v->type.elem) : "?");
	if (!v->type.has_shape)
		return s;
	len += (size_t)snprintf(s + len, 160 - len, "[");
	for (int i = 0; i < v->type.rank && len < 150; i++) {
		Dim *d = &v->type.dims[i];
		const char *sep = i ? "," : "";
		if (d->kind == DIM_VALUE) len += (size_t)snprintf(s + len, 160 - len, "%s%lld", sep, (long long)d->value);
		else if (d->kind == DIM_PARAM) len += (size_t)snprintf(s + len, 160 - len, "%s%s", sep, d->param);
		else len += (size_t)snprintf(s + len, 160 - len, "%s?", sep);
	}
	snprintf(s + len, 160 - len, "]");
	return s;
}

static int run(B *b, int (*pass)(Module *, PassContext *, Diag *), Diag *d)
{
	PassContext ctx = {0};
	ctx.model_path = "t.onnx";
	memset(d, 0, sizeof *d);
	int rc = pass(b->m, &ctx, d);
	if (rc == WL_OK) {
		Diag vd = {0};
		ck_assert_msg(ir_verify(b->m, &vd) == WL_OK, "verifier: %s", vd.msg);
	}
	return rc;
}

static void infer_ok(B *b)
{
	Diag d;
	int rc = run(b, pass_shape_infer, &d);
	ck_assert_msg(rc == WL_OK, "shape-infer failed: %s", d.msg);
}

static void infer_err(B *b, const char *needle1, const char *needle2)
{
	Diag d;
	int rc = run(b, pass_shape_infer, &d);
	ck_assert_msg(rc == WL_ERR, "expected an error containing '%s'", needle1);
	ck_assert_msg(d.set && strstr(d.msg, needle1), "message '%s' lacks '%s'", d.msg, needle1);
	if (needle2)
		ck_assert_msg(strstr(d.msg, needle2), "message '%s' lacks '%s'", d.msg, needle2);
	ck_assert_msg(strncmp(d.msg, "t.onnx: node '", 14) == 0, "message '%s' does not name file and node", d.msg);
	ck_assert(!strchr(d.msg, '\n'));
}

#define TY(name, want) ck_assert_str_eq(ts(&b, name), want)

/* ---------------------------------------------------------------- constant-to-initializer */

START_TEST(c2i_forms)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "2");
	Node *c1 = op(&b, "Constant", "", "c1");
	Attr *a = node_add_attr(c1, "value", AT_TENSOR);
	int64_t two = 2;
	a->t = tensor_new(b.m->arena, "whatever", DT_FLOAT, 1, &two);
	float *p = tensor_alloc_data(b.m->arena, a->t);
	p[0] = 1; p[1] = 2;
	afloat(op(&b, "Constant", "", "c2"), "value_float", 0.5f);
	aints(op(&b, "Constant", "", "c3"), "value_ints", 3, I(1), I(-1), I(4));
	aint(op(&b, "Constant", "", "c4"), "value_int", 7);
	astr(op(&b, "Constant", "", "c5"), "value_string", "hi");
	Node *sp = op(&b, "Constant", "", "c6");
	node_add_attr(sp, "sparse_value", AT_SPARSE_TENSOR)->sp = NULL;
	afloat(op(&b, "Constant", "", "out"), "value_float", 3.0f);   /* graph output: kept */
	op(&b, "Add", "x,c1", "s");
	op(&b, "Mul", "s,c2", "y");
	output(&b, "y");
	output(&b, "out");
	Diag d;
	ck_assert_int_eq(run(&b, pass_constant_to_initializer, &d), WL_OK);
	ck_assert_int_eq(b.g->ninits, 5);
	Value *c1v = graph_find(b.g, "c1");
	ck_assert_ptr_nonnull(c1v->init);
	ck_assert_str_eq(c1v->init->name, "c1");
	ck_assert(tensor_get_f64(c1v->init, 1) == 2.0);
	ck_assert_int_eq(c1v->nusers, 1);
	TY("c1", "float[2]");
	TY("c2", "float[]");
	TY("c3", "int64[3]");
	ck_assert_int_eq(tensor_get_i64(graph_find(b.g, "c3")->init, 1), -1);
	TY("c4", "int64[]");
	ck_assert_int_eq(tensor_get_i64(graph_find(b.g, "c4")->init, 0), 7);
	TY("c5", "string[]");
	ck_assert_int_eq((int)graph_find(b.g, "c5")->init->strs[0].len, 2);
	ck_assert_ptr_null(graph_find(b.g, "c6")->init);      /* sparse: node stays */
	ck_assert_ptr_null(graph_find(b.g, "out")->init);     /* graph output: node stays */
	ck_assert_int_eq(b.g->nnodes, 4);
	module_free(b.m);
}
END_TEST

START_TEST(c2i_subgraph)
{
	B b = mk();
	input(&b, "cond", DT_BOOL, "");
	Node *iff = op(&b, "If", "cond", "r");
	Graph *tg = graph_new(b.m, b.g, iff, "then");
	Graph *eg = graph_new(b.m, b.g, iff, "else");
	node_add_attr(iff, "then_branch", AT_GRAPH)->g = tg;
	node_add_attr(iff, "else_branch", AT_GRAPH)->g = eg;
	aints(opd(&b, tg, "Constant", "", "", "k"), "value_ints", 2, I(1), I(2));
	opd(&b, tg, "Identity", "", "k", "tout");
	graph_add_output(tg, graph_find(tg, "tout"));
	aints(opd(&b, eg, "Constant", "", "", "eout"), "value_ints", 2, I(3), I(4));
	graph_add_output(eg, graph_find(eg, "eout"));
	output(&b, "r");
	Diag d;
	ck_assert_int_eq(run(&b, pass_constant_to_initializer, &d), WL_OK);
	ck_assert_int_eq(tg->ninits, 1);
	ck_assert_ptr_nonnull(graph_find_local(tg, "k")->init);
	ck_assert_int_eq(tg->nnodes, 1);
	ck_assert_int_eq(eg->nnodes, 1);                 /* branch output kept */
	module_free(b.m);
}
END_TEST

/* ---------------------------------------------------------------- identity-elim */

START_TEST(ie_basic)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "2");
	op(&b, "Relu", "x", "t");
	op(&b, "Identity", "t", "u");
	op(&b, "Neg", "u", "v");
	op(&b, "Identity", "v", "y");     /* output: producer is rewired */
	output(&b, "y");
	Diag d;
	ck_assert_int_eq(run(&b, pass_identity_elim, &d), WL_OK);
	ck_assert_int_eq(b.g->nnodes, 2);
	Node *neg = b.g->last;
	ck_assert_str_eq(neg->op_type, "Neg");
	ck_assert_str_eq(neg->inputs[0]->name, "t");
	ck_assert_str_eq(neg->outputs[0]->name, "y");
	ck_assert_str_eq(b.g->outputs[0]->name, "y");
	ck_assert_ptr_eq(b.g->outputs[0]->producer, neg);
	module_free(b.m);
}
END_TEST

START_TEST(ie_kept)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "2");
	int64_t two = 2;
	init_f32(&b, "w", 1, &two);
	op(&b, "Identity", "x", "y1");     /* input → output: kept */
	op(&b, "Identity", "w", "y2");     /* initializer → output: kept */
	op(&b, "Relu", "x", "r");
	op(&b, "Identity", "r", "y3");     /* r is an output itself: kept */
	op(&b, "Identity", "w", "wi");     /* not an output: removed */
	op(&b, "Add", "r,wi", "y4");
	output(&b, "y1");
	output(&b, "y2");
	output(&b, "y3");
	output(&b, "r");
	output(&b, "y4");
	Diag d;
	ck_assert_int_eq(run(&b, pass_identity_elim, &d), WL_OK);
	ck_assert_int_eq(b.g->nnodes, 5);
	ck_assert_str_eq(b.g->last->inputs[1]->name, "w");
	module_free(b.m);
}
END_TEST

START_TEST(ie_dropout_and_subgraph)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "2");
	input(&b, "cond", DT_BOOL, "");
	Tensor *t = tensor_new(b.m->arena, "tm", DT_BOOL, 0, NULL);
	unsigned char *p = tensor_alloc_data(b.m->arena, t);
	*p = 1;
	graph_set_init(b.g, graph_value(b.g, "tm"), t);
	op(&b, "Dropout", "x", "d1");                 /* removed */
	op(&b, "Dropout", "d1,,tm", "d2");            /* training: kept */
	op(&b, "Dropout", "d2", "d3,mask");           /* mask used: kept */
	op(&b, "Dropout", "d3", "d4,mask2");          /* mask unused: removed */
	op(&b, "Identity", "d4", "i1");
	Node *iff = op(&b, "If", "cond", "r");
	Graph *tg = graph_new(b.m, b.g, iff, "then");
	Graph *eg = graph_new(b.m, b.g, iff, "else");
	node_add_attr(iff, "then_branch", AT_GRAPH)->g = tg;
	node_add_attr(iff, "else_branch", AT_GRAPH)->g = eg;
	opd(&b, tg, "Relu", "", "i1", "tr");
	opd(&b, tg, "Identity", "", "tr", "tout");    /* branch output: rewired */
	graph_add_output(tg, graph_find(tg, "tout"));
	opd(&b, eg, "Identity", "", "i1", "eout");    /* outer value: kept */
	graph_add_output(eg, graph_find(eg, "eout"));
	output(&b, "r");
	output(&b, "mask");
	Diag d;
	ck_assert_int_eq(run(&b, pass_identity_elim, &d), WL_OK);
	ck_assert_int_eq(b.g->nnodes, 3);
	ck_assert_str_eq(b.g->first->inputs[0]->name, "x");          /* d2 reads x */
	ck_assert_str_eq(tg->first->inputs[0]->name, "d3");           /* Relu reads d3 */
	ck_assert_str_eq(tg->first->outputs[0]->name, "tout");
	ck_assert_int_eq(tg->nnodes, 1);
	ck_assert_int_eq(eg->nnodes, 1);
	ck_assert_str_eq(eg->first->inputs[0]->name, "d3");
	module_free(b.m);
}
END_TEST

/* ---------------------------------------------------------------- dce */

START_TEST(dce_basic)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "2");
	input(&b, "unused_in", DT_FLOAT, "2");
	int64_t two = 2;
	init_f32(&b, "w", 1, &two);
	init_f32(&b, "dead_w", 1, &two);
	init_f32(&b, "lonely", 1, &two);
	op(&b, "Add", "x,w", "y");
	op(&b, "Mul", "x,dead_w", "d1");
	op(&b, "Relu", "d1", "d2");
	op(&b, "Split", "x", "s1,s2");       /* one output used: live */
	op(&b, "Neg", "s2", "z");
	output(&b, "y");
	output(&b, "z");
	Diag d;
	ck_assert_int_eq(run(&b, pass_dce, &d), WL_OK);
	ck_assert_int_eq(b.g->nnodes, 3);
	ck_assert_int_eq(b.g->ninits, 1);
	ck_assert_str_eq(b.g->inits[0]->name, "w");
	ck_assert_int_eq(b.g->ninputs, 2);
	module_free(b.m);
}
END_TEST

START_TEST(dce_subgraphs)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "2");
	input(&b, "cond", DT_BOOL, "");
	op(&b, "Relu", "x", "a");        /* read only by the dead If */
	op(&b, "Neg", "x", "bb");        /* read by the live If's branch */
	op(&b, "Exp", "x", "dead_in_branch");
	for (int k = 0; k < 2; k++) {
		Node *iff = op(&b, "If", "cond", k ? "r" : "dead_r");
		Graph *tg = graph_new(b.m, b.g, iff, "then");
		Graph *eg = graph_new(b.m, b.g, iff, "else");
		node_add_attr(iff, "then_branch", AT_GRAPH)->g = tg;
		node_add_attr(iff, "else_branch", AT_GRAPH)->g = eg;
		opd(&b, eg, "Sigmoid", "", "x", k ? "e1" : "f1");
		graph_add_output(eg, graph_find(eg, k ? "e1" : "f1"));
		opd(&b, tg, "Sigmoid", "", k ? "bb" : "a", k ? "t1" : "u1");
		opd(&b, tg, "Tanh", "", "dead_in_branch", k ? "t2" : "u2");   /* dead inside */
		graph_add_output(tg, graph_find(tg, k ? "t1" : "u1"));
	}
	output(&b, "r");
	Diag d;
	ck_assert_int_eq(run(&b, pass_dce, &d), WL_OK);
	ck_assert_int_eq(b.g->nnodes, 2);
	ck_assert_str_eq(b.g->first->op_type, "Neg");
	ck_assert_int_eq(graph_find(b.g, "a")->nusers, 0);
	ck_assert_int_eq(b.g->last->attrs[0].g->nnodes, 1);
	module_free(b.m);
}
END_TEST

/* ---------------------------------------------------------------- shape inference */

START_TEST(si_elementwise)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "N,1,4");
	input(&b, "y", DT_FLOAT, "3,1");
	input(&b, "z", DT_FLOAT, "M,4");
	input(&b, "i", DT_INT64, "N,S");
	op(&b, "Add", "x,y", "a");
	op(&b, "Equal", "x,y", "e");
	op(&b, "Add", "x,x", "xx");
	op(&b, "Sub", "z,x", "zx");
	op(&b, "Sqrt", "a", "u1");
	op(&b, "Not", "e", "u2");
	op(&b, "Cast", "a", "c");
	aint(b.g->last, "to", DT_FLOAT16);
	op(&b, "Where", "e,a,y", "w");
	op(&b, "Max", "x,y,a", "mx");
	op(&b, "Pow", "x,i", "pw");
	op(&b, "Clip", "x", "cl");
	input(&b, "nothing_known", DT_UNDEFINED, NULL);
	op(&b, "Relu", "nothing_known", "rk");
	infer_ok(&b);
	TY("a", "float[N,3,4]");
	TY("e", "bool[N,3,4]");
	TY("xx", "float[N,1,4]");
	TY("zx", "float[N,M,4]");
	TY("u1", "float[N,3,4]");
	TY("u2", "bool[N,3,4]");
	TY("c", "float16[N,3,4]");
	TY("w", "float[N,3,4]");
	TY("mx", "float[N,3,4]");
	TY("pw", "float[N,N,4]");
	TY("cl", "float[N,1,4]");
	TY("rk", "none");
	ck_assert(graph_find(b.g, "a")->in_value_info);
	module_free(b.m);
}
END_TEST

START_TEST(si_broadcast_symbolic)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "N,4");
	input(&b, "y", DT_FLOAT, "M,4");
	input(&b, "u", DT_FLOAT, "?,4");
	op(&b, "Add", "x,y", "a");
	op(&b, "Add", "x,u", "c");
	op(&b, "Add", "a,c", "d");
	infer_ok(&b);
	TY("a", "float[?,4]");
	TY("c", "float[?,4]");
	module_free(b.m);
}
END_TEST

START_TEST(si_broadcast_error)
{
	B b = mk();
	input(&b, "X", DT_FLOAT, "2,3");
	input(&b, "Y", DT_FLOAT, "4");
	op(&b, "Add", "X,Y", "s");
	infer_err(&b, "node 's_node' (Add): input 'X' has shape [2, 3] but input 'Y' has shape [4]", "3 and 4");
	module_free(b.m);
}
END_TEST

START_TEST(si_type_error)
{
	B b = mk();
	input(&b, "X", DT_FLOAT, "2");
	input(&b, "Y", DT_INT64, "2");
	op(&b, "Mul", "X,Y", "s");
	infer_err(&b, "input 'Y' has type int64 but input 'X' has type float", NULL);
	module_free(b.m);
}
END_TEST

START_TEST(si_matmul)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "N,S,384");
	input(&b, "v", DT_FLOAT, "4");
	input(&b, "m45", DT_FLOAT, "4,5");
	input(&b, "t234", DT_FLOAT, "2,3,4");
	input(&b, "b4", DT_FLOAT, "2,1,3,4");
	input(&b, "c5", DT_FLOAT, "5,4,6");
	int64_t wd[2] = {384, 1536};
	init_f32(&b, "w", 2, wd);
	op(&b, "MatMul", "x,w", "a");
	op(&b, "MatMul", "v,m45", "b1");
	op(&b, "MatMul", "t234,v", "b2");
	op(&b, "MatMul", "v,v", "b3");
	op(&b, "MatMul", "b4,c5", "b5");
	infer_ok(&b);
	TY("a", "float[N,S,1536]");
	TY("b1", "float[5]");
	TY("b2", "float[2,3]");
	TY("b3", "float[]");
	TY("b5", "float[2,5,3,6]");
	module_free(b.m);
}
END_TEST

START_TEST(si_matmul_error)
{
	B b = mk();
	input(&b, "A", DT_FLOAT, "N,4");
	input(&b, "B", DT_FLOAT, "5,2");
	op(&b, "MatMul", "A,B", "C");
	infer_err(&b, "input 'A' has shape [N, 4] but input 'B' has shape [5, 2]", "4 and 5");
	module_free(b.m);
}
END_TEST

START_TEST(si_gemm)
{
	B b = mk();
	input(&b, "a", DT_FLOAT, "3,4");
	input(&b, "w", DT_FLOAT, "5,4");
	input(&b, "c", DT_FLOAT, "5");
	aint(op(&b, "Gemm", "a,w,c", "y"), "transB", 1);
	op(&b, "Gemm", "a,w", "bad");
	Diag d;
	ck_assert_int_eq(run(&b, pass_shape_infer, &d), WL_ERR);
	ck_assert(strstr(d.msg, "inner dimensions differ"));
	TY("y", "float[3,5]");
	module_free(b.m);
}
END_TEST

START_TEST(si_conv)
{
	B b = mk();
	input(&b, "mel", DT_FLOAT, "1,80,3000");
	input(&b, "seq", DT_FLOAT, "1,80,T");
	input(&b, "img", DT_FLOAT, "1,3,224,224");
	input(&b, "w1", DT_FLOAT, "384,80,3");
	input(&b, "w2", DT_FLOAT, "384,384,3");
	input(&b, "w3", DT_FLOAT, "64,3,7,7");
	input(&b, "w4", DT_FLOAT, "64,1,3,3");
	Node *n = op(&b, "Conv", "mel,w1", "c1");
	aints(n, "pads", 2, I(1), I(1));
	n = op(&b, "Conv", "c1,w2", "c2");
	aints(n, "pads", 2, I(1), I(1));
	aints(n, "strides", 1, I(2));
	n = op(&b, "Conv", "seq,w1", "c3");
	aints(n, "pads", 2, I(1), I(1));
	n = op(&b, "Conv", "img,w3", "c4");
	astr(n, "auto_pad", "SAME_UPPER");
	aints(n, "strides", 2, I(2), I(2));
	n = op(&b, "Conv", "img,w3", "c5");
	aints(n, "dilations", 2, I(2), I(2));
	aints(n, "kernel_shape", 2, I(7), I(7));
	n = op(&b, "Conv", "c4,w4", "c6");
	aint(n, "group", 64);
	astr(n, "auto_pad", "VALID");
	infer_ok(&b);
	TY("c1", "float[1,384,3000]");
	TY("c2", "float[1,384,1500]");
	TY("c3", "float[1,384,T]");
	TY("c4", "float[1,64,112,112]");
	TY("c5", "float[1,64,212,212]");
	TY("c6", "float[1,64,110,110]");
	module_free(b.m);
}
END_TEST

START_TEST(si_conv_errors)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "1,16,10");
	input(&b, "w", DT_FLOAT, "8,8,3");
	op(&b, "Conv", "x,w", "y");
	infer_err(&b, "16 channels, expected 8 x group 1", "input 'x'");
	module_free(b.m);
	b = mk();
	input(&b, "x", DT_FLOAT, "1,8,2");
	input(&b, "w", DT_FLOAT, "8,8,3");
	op(&b, "Conv", "x,w", "y");
	infer_err(&b, "smaller than the kernel", NULL);
	module_free(b.m);
}
END_TEST

START_TEST(si_reduce)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "N,S,384");
	init_i64(&b, b.g, "ax", 1, 1, I(-1));
	init_i64(&b, b.g, "none", 1, 0);
	aints(op(&b, "ReduceMean", "x", "m1"), "axes", 1, I(-1));
	aint(op(&b, "ReduceMean", "x,ax", "m2"), "keepdims", 0);
	op(&b, "ReduceSum", "x", "m3");
	aint(op(&b, "ReduceSum", "x", "m4"), "keepdims", 0);
	aint(op(&b, "ReduceMax", "x,none", "m5"), "noop_with_empty_axes", 1);
	aint(op(&b, "ArgMax", "x", "am"), "axis", -1);
	Node *n = op(&b, "ArgMax", "x", "am2");
	aint(n, "axis", 2);
	aint(n, "keepdims", 0);
	aint(op(&b, "Softmax", "x", "sm"), "axis", -1);
	op(&b, "LogSoftmax", "x", "lsm");
	aints(op(&b, "ReduceMean", "x", "bad"), "axes", 1, I(3));
	Diag d;
	ck_assert_int_eq(run(&b, pass_shape_infer, &d), WL_ERR);
	ck_assert_msg(strstr(d.msg, "axis 3 is out of range for input 'x' of rank 3"), "%s", d.msg);
	TY("m1", "float[N,S,1]");
	TY("m2", "float[N,S]");
	TY("m3", "float[1,1,1]");
	TY("m4", "float[]");
	TY("m5", "float[N,S,384]");
	TY("am", "int64[N,S,1]");
	TY("am2", "int64[N,S]");
	TY("sm", "float[N,S,384]");
	TY("lsm", "float[N,S,384]");
	module_free(b.m);
}
END_TEST

START_TEST(si_reshape_chain)
{
	/* the torch export pattern: split heads with a dynamic batch */
	B b = mk();
	input(&b, "x", DT_FLOAT, "N,S,384");
	init_i64(&b, b.g, "zero", 0, 1, I(0));
	init_i64(&b, b.g, "ax0", 1, 1, I(0));
	init_i64(&b, b.g, "rest", 1, 3, I(-1), I(6), I(64));
	op(&b, "Shape", "x", "sh");
	aint(op(&b, "Gather", "sh,zero", "bsz"), "axis", 0);
	op(&b, "Unsqueeze", "bsz,ax0", "bsz1");
	aint(op(&b, "Concat", "bsz1,rest", "tgt"), "axis", 0);
	op(&b, "Reshape", "x,tgt", "heads");
	aints(op(&b, "Transpose", "heads", "ht"), "perm", 4, I(0), I(2), I(1), I(3));
	/* back: [N, S, -1] from Shape slices */
	init_i64(&b, b.g, "s0", 1, 1, I(0));
	init_i64(&b, b.g, "s2", 1, 1, I(2));
	init_i64(&b, b.g, "m1", 1, 1, I(-1));
	op(&b, "Slice", "sh,s0,s2", "ns");
	aint(op(&b, "Concat", "ns,m1", "tgt2"), "axis", 0);
	op(&b, "Reshape", "heads,tgt2", "merged");
	infer_ok(&b);
	TY("sh", "int64[3]");
	TY("bsz", "int64[]");
	TY("bsz1", "int64[1]");
	TY("tgt", "int64[4]");
	TY("heads", "float[N,S,6,64]");
	TY("ht", "float[N,6,S,64]");
	TY("ns", "int64[2]");
	TY("merged", "float[N,S,384]");
	module_free(b.m);
}
END_TEST

START_TEST(si_reshape_forms)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "2,3,4");
	input(&b, "e", DT_FLOAT, "0,3");
	init_i64(&b, b.g, "t1", 1, 2, I(0), I(-1));
	init_i64(&b, b.g, "t2", 1, 2, I(0), I(3));
	init_i64(&b, b.g, "t3", 1, 1, I(-1));
	op(&b, "Reshape", "x,t1", "r1");
	aint(op(&b, "Reshape", "e,t2", "r2"), "allowzero", 1);
	op(&b, "Reshape", "x,t3", "r3");
	aint(op(&b, "Flatten", "x", "f1"), "axis", 1);
	aint(op(&b, "Flatten", "x", "f0"), "axis", 0);
	aint(op(&b, "Flatten", "x", "fm"), "axis", -1);
	infer_ok(&b);
	TY("r1", "float[2,12]");
	TY("r2", "float[0,3]");
	TY("r3", "float[24]");
	TY("f1", "float[2,12]");
	TY("f0", "float[1,24]");
	TY("fm", "float[6,4]");
	module_free(b.m);
}
END_TEST

START_TEST(si_reshape_error)
{
	B b = mk();
	input(&b, "X", DT_FLOAT, "2,3");
	init_i64(&b, b.g, "shp", 1, 2, I(4), I(2));
	op(&b, "Reshape", "X,shp", "Y");
	infer_err(&b, "input 'X' has shape [2, 3] (6 elements) but shape 'shp' is [4, 2]", NULL);
	module_free(b.m);
	b = mk();
	input(&b, "X", DT_FLOAT, "N,5");
	init_i64(&b, b.g, "shp", 1, 2, I(-1), I(3));
	op(&b, "Reshape", "X,shp", "Y");
	infer_ok(&b);
	TY("Y", "float[?,3]");
	module_free(b.m);
}
END_TEST

START_TEST(si_gather_concat)
{
	B b = mk();
	input(&b, "emb", DT_FLOAT, "51865,384");
	input(&b, "ids", DT_INT64, "1,T");
	input(&b, "p", DT_FLOAT, "N,2");
	input(&b, "q", DT_FLOAT, "N,3");
	init_i64(&b, b.g, "k", 1, 2, I(0), I(-1));
	op(&b, "Gather", "emb,ids", "g1");
	aint(op(&b, "Gather", "emb,k", "g2"), "axis", 1);
	aint(op(&b, "Concat", "p,q", "c1"), "axis", -1);
	aint(op(&b, "Concat", "p,p", "c2"), "axis", 0);
	infer_ok(&b);
	TY("g1", "float[1,T,384]");
	TY("g2", "float[51865,2]");
	TY("c1", "float[N,5]");
	TY("c2", "float[?,2]");
	module_free(b.m);
}
END_TEST

START_TEST(si_gather_concat_errors)
{
	B b = mk();
	input(&b, "A", DT_FLOAT, "2,3");
	input(&b, "B", DT_FLOAT, "2,3,1");
	aint(op(&b, "Concat", "A,B", "C"), "axis", 0);
	infer_err(&b, "input 'B' has shape [2, 3, 1] but input 'A' has shape [2, 3]: ranks differ", NULL);
	module_free(b.m);
	b = mk();
	input(&b, "A", DT_FLOAT, "2,3");
	input(&b, "B", DT_FLOAT, "2,4");
	aint(op(&b, "Concat", "A,B", "C"), "axis", 0);
	infer_err(&b, "dimension 1 differs", NULL);
	module_free(b.m);
	b = mk();
	input(&b, "A", DT_FLOAT, "2,3");
	init_i64(&b, b.g, "i", 0, 1, I(5));
	op(&b, "Gather", "A,i", "C");
	infer_err(&b, "index 5 in 'i' is out of range for axis 0 of input 'A'", NULL);
	module_free(b.m);
}
END_TEST

START_TEST(si_slice)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "N,10,20");
	init_i64(&b, b.g, "st", 1, 2, I(2), I(-5));
	init_i64(&b, b.g, "en", 1, 2, I(INT64_MAX), I(100));
	init_i64(&b, b.g, "ax", 1, 2, I(1), I(2));
	init_i64(&b, b.g, "sp", 1, 2, I(3), I(1));
	init_i64(&b, b.g, "rst", 1, 1, I(-1));
	init_i64(&b, b.g, "ren", 1, 1, I(INT64_MIN));
	init_i64(&b, b.g, "rax", 1, 1, I(1));
	init_i64(&b, b.g, "rsp", 1, 1, I(-1));
	init_i64(&b, b.g, "z", 1, 1, I(0));
	init_i64(&b, b.g, "big", 1, 1, I(INT64_MAX));
	op(&b, "Slice", "x,st,en,ax,sp", "s1");
	op(&b, "Slice", "x,rst,ren,rax,rsp", "s2");
	op(&b, "Slice", "x,z,big", "s3");             /* full slice keeps N */
	op(&b, "Slice", "x,rst,big", "s4");           /* last element of N: unknown */
	Node *n = op(&b, "Slice", "x", "s5");         /* opset 1 attributes */
	aints(n, "starts", 1, I(1));
	aints(n, "ends", 1, I(3));
	aints(n, "axes", 1, I(2));
	input(&b, "unknown_st", DT_INT64, "1");
	op(&b, "Slice", "x,unknown_st,big", "s6");
	infer_ok(&b);
	TY("s1", "float[N,3,5]");
	TY("s2", "float[N,10,20]");
	TY("s3", "float[N,10,20]");
	TY("s4", "float[?,10,20]");
	TY("s5", "float[N,10,2]");
	TY("s6", "float[?,10,20]");
	module_free(b.m);
}
END_TEST

START_TEST(si_split_squeeze)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "N,7,1152");
	init_i64(&b, b.g, "sp", 1, 3, I(384), I(384), I(384));
	init_i64(&b, b.g, "ax", 1, 2, I(0), I(-1));
	aint(op(&b, "Split", "x,sp", "q,k,v"), "axis", 2);
	Node *n = op(&b, "Split", "x", "a1,a2,a3");
	aint(n, "axis", 1);
	aint(n, "num_outputs", 3);
	n = op(&b, "Split", "x", "b1,b2");
	aint(n, "axis", 1);
	aints(n, "split", 2, I(3), I(4));
	op(&b, "Unsqueeze", "q,ax", "u");
	aints(op(&b, "Unsqueeze", "q", "u2"), "axes", 1, I(1));
	op(&b, "Squeeze", "u,ax", "sq");
	op(&b, "Squeeze", "u", "sq2");                    /* N unknown: no rank */
	input(&b, "one", DT_FLOAT, "1,3,1");
	op(&b, "Squeeze", "one", "sq3");
	infer_ok(&b);
	TY("q", "float[N,7,384]");
	TY("v", "float[N,7,384]");
	TY("a1", "float[N,3,1152]");
	TY("a3", "float[N,1,1152]");
	TY("b2", "float[N,4,1152]");
	TY("u", "float[1,N,7,384,1]");
	TY("u2", "float[N,1,7,384]");
	TY("sq", "float[N,7,384]");
	TY("sq2", "float");
	TY("sq3", "float[3]");
	module_free(b.m);
}
END_TEST

START_TEST(si_split_errors)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "4,6");
	init_i64(&b, b.g, "sp", 1, 2, I(2), I(3));
	aint(op(&b, "Split", "x,sp", "a,c"), "axis", 1);
	infer_err(&b, "split sizes add up to 5 but input 'x' has shape [4, 6]", NULL);
	module_free(b.m);
	b = mk();
	input(&b, "x", DT_FLOAT, "4,6");
	aints(op(&b, "Squeeze", "x", "y"), "axes", 1, I(0));
	infer_err(&b, "axis 0 of input 'x' with shape [4, 6] is not 1", NULL);
	module_free(b.m);
}
END_TEST

START_TEST(si_shape_ops)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "B,S,384");
	input(&b, "c", DT_FLOAT, "3,1");
	init_i64(&b, b.g, "shp", 1, 3, I(2), I(1), I(4));
	init_i64(&b, b.g, "rep", 1, 2, I(2), I(3));
	init_i64(&b, b.g, "pads", 1, 4, I(1), I(0), I(2), I(0));
	init_i64(&b, b.g, "l", 0, 1, I(448));
	init_i64(&b, b.g, "z", 0, 1, I(0));
	init_i64(&b, b.g, "one", 0, 1, I(1));
	init_i64(&b, b.g, "ax1", 1, 1, I(1));
	Node *n = op(&b, "Shape", "x", "sh1");
	aint(n, "start", 1);
	aint(n, "end", -1);
	op(&b, "Shape", "x", "sh");
	op(&b, "Size", "x", "sz");
	op(&b, "Expand", "c,shp", "ex");
	op(&b, "Tile", "c,rep", "ti");
	op(&b, "Pad", "c,pads", "pd");
	op(&b, "Range", "z,l,one", "rg");
	op(&b, "ConstantOfShape", "sh", "cos");
	Node *co = op(&b, "ConstantOfShape", "shp", "cos2");
	Attr *va = node_add_attr(co, "value", AT_TENSOR);
	int64_t onee = 1;
	va->t = tensor_new(b.m->arena, "v", DT_INT64, 1, &onee);
	(void)tensor_alloc_data(b.m->arena, va->t);
	op(&b, "Trilu", "cos", "tri");
	op(&b, "CumSum", "x,one", "cs");
	op(&b, "Identity", "x", "id");
	op(&b, "Dropout", "x", "dr,mask");
	op(&b, "Gather", "sh,ax1", "seq1");
	op(&b, "Range", "z,seq1,one", "rg2");
	op(&b, "NonZero", "c", "nz");
	infer_ok(&b);
	TY("sh1", "int64[1]");
	TY("sh", "int64[3]");
	TY("sz", "int64[]");
	TY("ex", "float[2,3,4]");
	TY("ti", "float[6,3]");
	TY("pd", "float[6,1]");
	TY("rg", "int64[448]");
	TY("cos", "float[B,S,384]");
	TY("cos2", "int64[2,1,4]");
	TY("tri", "float[B,S,384]");
	TY("cs", "float[B,S,384]");
	TY("id", "float[B,S,384]");
	TY("dr", "float[B,S,384]");
	TY("mask", "bool[B,S,384]");
	TY("seq1", "int64[1]");
	TY("rg2", "int64[?]");
	TY("nz", "int64[2,?]");
	module_free(b.m);
}
END_TEST

START_TEST(si_expand_where_pattern)
{
	/* torch: Expand(x, Where(Equal(shape, -1), ones, shape)) */
	B b = mk();
	input(&b, "x", DT_FLOAT, "1,1,T");
	input(&b, "ids", DT_INT64, "B,T");
	init_i64(&b, b.g, "m1", 0, 1, I(-1));
	op(&b, "Shape", "ids", "s");
	init_i64(&b, b.g, "a1", 1, 1, I(1));
	init_i64(&b, b.g, "z0", 1, 1, I(0));
	aint(op(&b, "Gather", "s,z0", "bsz"), "axis", 0);
	init_i64(&b, b.g, "tail", 1, 2, I(-1), I(-1));
	aint(op(&b, "Concat", "bsz,a1,tail", "shp"), "axis", 0);   /* [B, 1, -1, -1] */
	op(&b, "Equal", "shp,m1", "eq");
	op(&b, "Where", "eq,a1,shp", "tgt");                    /* [B, 1, 1, 1] */
	op(&b, "Expand", "x,tgt", "ex");
	infer_ok(&b);
	TY("eq", "bool[4]");
	TY("tgt", "int64[4]");
	TY("ex", "float[B,1,1,T]");
	module_free(b.m);
}
END_TEST

START_TEST(si_norms)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "B,S,384");
	input(&b, "g", DT_FLOAT, "384");
	input(&b, "g5", DT_FLOAT, "385");
	aint(op(&b, "LayerNormalization", "x,g,g", "ln,mean,istd"), "axis", -1);
	op(&b, "SimplifiedLayerNormalization", "x,g", "rms");
	ms(&b, "SkipLayerNormalization", "x,x,g,g", "sln,sm,si,ssum");
	ms(&b, "SkipSimplifiedLayerNormalization", "x,x,g", "ssl,,,ssum2");
	ms(&b, "Gelu", "x", "ge");
	ms(&b, "FastGelu", "x,g", "fge");
	op(&b, "BatchNormalization", "x,g,g,g,g", "bn");
	infer_ok(&b);
	TY("ln", "float[B,S,384]");
	TY("mean", "float[B,S,1]");
	TY("istd", "float[B,S,1]");
	TY("rms", "float[B,S,384]");
	TY("sln", "float[B,S,384]");
	TY("sm", "float[B,S,1]");
	TY("ssum", "float[B,S,384]");
	TY("ssum2", "float[B,S,384]");
	TY("ge", "float[B,S,384]");
	TY("fge", "float[B,S,384]");
	TY("bn", "float[B,S,384]");
	module_free(b.m);
	b = mk();
	input(&b, "x", DT_FLOAT, "B,S,384");
	input(&b, "g5", DT_FLOAT, "385");
	ms(&b, "SkipLayerNormalization", "x,x,g5", "sln");
	infer_err(&b, "gamma 'g5' has shape [385]", NULL);
	module_free(b.m);
}
END_TEST

START_TEST(si_contrib)
{
	B b = mk();
	input(&b, "a", DT_FLOAT, "1,S,384");
	input(&b, "qb", DT_UINT8, "1536,12,16");
	input(&b, "sc", DT_FLOAT, "1536,12");
	Node *n = ms(&b, "MatMulNBits", "a,qb,sc", "mm");
	aint(n, "K", 384);
	aint(n, "N", 1536);
	aint(n, "bits", 4);
	aint(n, "block_size", 32);
	/* Qwen2 single token: 12 heads x 128, 2 KV heads, 15 past */
	input(&b, "q", DT_FLOAT, "1,1,1536");
	input(&b, "k", DT_FLOAT, "1,1,256");
	input(&b, "pk", DT_FLOAT, "1,2,15,128");
	input(&b, "sl", DT_INT32, "1");
	Tensor *t = tensor_new(b.m->arena, "tot", DT_INT32, 0, NULL);
	*(int32_t *)tensor_alloc_data(b.m->arena, t) = 16;
	graph_set_init(b.g, graph_value(b.g, "tot"), t);
	n = ms(&b, "GroupQueryAttention", "q,k,k,pk,pk,sl,tot", "o,pko,pvo");
	aint(n, "num_heads", 12);
	aint(n, "kv_num_heads", 2);
	n = ms(&b, "GroupQueryAttention", "q,,,,,sl,tot", "op,opk,opv");   /* packed QKV: 1536 = (8+2*2)*128 */
	aint(n, "num_heads", 8);
	aint(n, "kv_num_heads", 2);
	input(&b, "rq", DT_FLOAT, "1,S,1536");
	input(&b, "pos", DT_INT64, "1,S");
	input(&b, "cc", DT_FLOAT, "4096,64");
	ms(&b, "RotaryEmbedding", "rq,pos,cc,cc", "rot");
	/* Whisper self attention */
	input(&b, "mq", DT_FLOAT, "B,S,384");
	input(&b, "mk", DT_FLOAT, "B,L,384");
	aint(ms(&b, "MultiHeadAttention", "mq,mk,mk", "mo,mpk,mpv"), "num_heads", 6);
	input(&b, "ck", DT_FLOAT, "B,6,1500,64");
	aint(ms(&b, "MultiHeadAttention", "mq,ck,ck", "co"), "num_heads", 6);
	infer_ok(&b);
	TY("mm", "float[1,S,1536]");
	TY("o", "float[1,1,1536]");
	TY("pko", "float[1,2,16,128]");
	TY("pvo", "float[1,2,16,128]");
	TY("op", "float[1,1,1024]");
	TY("opk", "float[1,2,16,128]");
	TY("rot", "float[1,S,1536]");
	TY("mo", "float[B,S,384]");
	TY("mpk", "float[B,6,L,64]");
	TY("co", "float[B,S,384]");
	module_free(b.m);
	b = mk();
	input(&b, "a", DT_FLOAT, "1,S,385");
	input(&b, "qb", DT_UINT8, "1536,12,16");
	n = ms(&b, "MatMulNBits", "a,qb,qb", "mm");
	aint(n, "K", 384);
	aint(n, "N", 1536);
	infer_err(&b, "input 'a' has shape [1, S, 385] but K is 384", NULL);
	module_free(b.m);
}
END_TEST

START_TEST(si_declared)
{
	/* unknown ops keep declared types; declared symbolic dims are refined */
	B b = mk();
	input(&b, "x", DT_FLOAT, "N,4");
	opd(&b, b.g, "Frobnicate", "ai.custom", "x", "f");
	settype(b.m->arena, &graph_find(b.g, "f")->type, DT_FLOAT16, "7");
	op(&b, "Relu", "f", "r");
	op(&b, "Neg", "x", "y");
	settype(b.m->arena, &graph_find(b.g, "y")->type, DT_FLOAT, "K,?");
	output(&b, "y");
	infer_ok(&b);
	TY("f", "float16[7]");
	TY("r", "float16[7]");
	TY("y", "float[K,4]");
	module_free(b.m);
	b = mk();
	input(&b, "x", DT_FLOAT, "N,4");
	op(&b, "Neg", "x", "y");
	settype(b.m->arena, &graph_find(b.g, "y")->type, DT_FLOAT, "N,5");
	output(&b, "y");
	infer_err(&b, "output 'y' is declared float[N, 5] but inferred float[N, 4]", NULL);
	module_free(b.m);
	b = mk();
	input(&b, "x", DT_FLOAT, "N,4");
	op(&b, "Neg", "x", "y");
	settype(b.m->arena, &graph_find(b.g, "y")->type, DT_INT64, NULL);
	infer_err(&b, "output 'y' is declared int64 but inferred float[N, 4]", NULL);
	module_free(b.m);
}
END_TEST

START_TEST(si_if_and_node_api)
{
	B b = mk();
	input(&b, "cond", DT_BOOL, "");
	input(&b, "x", DT_FLOAT, "N,4");
	Node *iff = op(&b, "If", "cond", "r");
	Graph *tg = graph_new(b.m, b.g, iff, "then");
	Graph *eg = graph_new(b.m, b.g, iff, "else");
	node_add_attr(iff, "then_branch", AT_GRAPH)->g = tg;
	node_add_attr(iff, "else_branch", AT_GRAPH)->g = eg;
	opd(&b, tg, "Relu", "", "x", "tr");
	graph_add_output(tg, graph_find(tg, "tr"));
	opd(&b, eg, "Neg", "", "x", "er");
	graph_add_output(eg, graph_find(eg, "er"));
	output(&b, "r");
	infer_ok(&b);
	ck_assert_str_eq(ts(&b, "r"), "float[N,4]");
	/* a node made by a later pass */
	Node *n = op(&b, "Transpose", "x", "xt");
	Diag d = {0};
	ck_assert_int_eq(shape_infer_node(n, &d), WL_OK);
	TY("xt", "float[4,N]");
	module_free(b.m);
}
END_TEST

START_TEST(si_transpose_errors)
{
	B b = mk();
	input(&b, "x", DT_FLOAT, "2,3,4");
	aints(op(&b, "Transpose", "x", "y"), "perm", 3, I(0), I(0), I(1));
	infer_err(&b, "perm [0, 0, 1] is not a permutation of the 3 axes of input 'x'", NULL);
	module_free(b.m);
}
END_TEST

CHECK_MAIN("passes", "passes",
	c2i_forms, c2i_subgraph, ie_basic, ie_kept, ie_dropout_and_subgraph, dce_basic,
	dce_subgraphs, si_elementwise, si_broadcast_symbolic, si_broadcast_error, si_type_error,
	si_matmul, si_matmul_error, si_gemm, si_conv, si_conv_errors, si_reduce,
	si_reshape_chain, si_reshape_forms, si_reshape_error, si_gather_concat,
	si_gather_concat_errors, si_slice, si_split_squeeze, si_split_errors, si_shape_ops,
	si_expand_where_pattern, si_norms, si_contrib, si_declared, si_if_and_node_api,
	si_transpose_errors)
