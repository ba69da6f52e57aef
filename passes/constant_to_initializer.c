/* constant_to_initializer.c — ai.onnx Constant nodes become initializers.
 *
 *   c = Constant <value = float[2] {1, 2}> ()      →   initializer float[2] c = {1, 2}
 *
 * requires  nothing beyond a verified graph
 * maintains topological order, use lists (a Constant has no inputs; its
 *           output keeps its name, its Value and every use), value types
 *           (the initializer's dtype and dims are the constant's)
 * breaks    nothing
 *
 * Every attribute form is handled: value (TENSOR), value_float(s),
 * value_int(s), value_string(s); the tensor is shared with the attribute,
 * not copied. Subgraphs (If/Loop/Scan bodies) are walked too, and a constant
 * there becomes an initializer of that subgraph.
 * Left alone, on purpose:
 *   - sparse_value: a sparse initializer has no Value in the IR, and the
 *     users of the constant read a dense tensor; the node stays;
 *   - a constant whose output is also a graph output: ONNX lets a graph
 *     output name an initializer, but ONNX Runtime rejects or ignores such
 *     outputs in several versions, so the node is kept;
 *   - attributes that refer to a function attribute (ref_attr_name), which
 *     only occur in function bodies: those are not walked.
 */
#include <string.h>
#include "passes.h"

/* The dense tensor a Constant node holds, or NULL if it holds none we move. */
static Tensor *constant_tensor(Arena *a, const Node *n)
{
	if (n->nattrs != 1)
		return NULL;
	const Attr *at = &n->attrs[0];
	if (at->ref_attr_name)
		return NULL;
	const char *k = at->name;
	Tensor *t = NULL;
	int64_t dim = at->n;
	if (strcmp(k, "value") == 0 && at->type == AT_TENSOR && at->t) {
		return at->t;
	} else if (strcmp(k, "value_float") == 0 && at->type == AT_FLOAT) {
		t = tensor_new(a, "", DT_FLOAT, 0, NULL);
		float *p = tensor_alloc_data(a, t);
		*p = at->f;
	} else if (strcmp(k, "value_floats") == 0 && at->type == AT_FLOATS) {
		t = tensor_new(a, "", DT_FLOAT, 1, &dim);
		float *p = tensor_alloc_data(a, t);
		if (at->n)
			memcpy(p, at->floats, (size_t)at->n * sizeof *p);
	} else if (strcmp(k, "value_int") == 0 && at->type == AT_INT) {
		t = tensor_new(a, "", DT_INT64, 0, NULL);
		int64_t *p = tensor_alloc_data(a, t);
		*p = at->i;
	} else if (strcmp(k, "value_ints") == 0 && at->type == AT_INTS) {
		t = tensor_new(a, "", DT_INT64, 1, &dim);
		int64_t *p = tensor_alloc_data(a, t);
		if (at->n)
			memcpy(p, at->ints, (size_t)at->n * sizeof *p);
	} else if (strcmp(k, "value_string") == 0 && at->type == AT_STRING) {
		t = tensor_new(a, "", DT_STRING, 0, NULL);
		StrRef *p = tensor_alloc_data(a, t);
		*p = at->s;
	} else if (strcmp(k, "value_strings") == 0 && at->type == AT_STRINGS) {
		t = tensor_new(a, "", DT_STRING, 1, &dim);
		StrRef *p = tensor_alloc_data(a, t);
		if (at->n)
			memcpy(p, at->strings, (size_t)at->n * sizeof *p);
	}
	/* sparse_value and malformed attributes: leave the node */
	return t;
}

static int run_graph(Graph *g, int *changed);

static int run_subgraphs(Node *n, int *changed)
{
	FOR_SUBGRAPHS(n, sg)
		if (run_graph(sg, changed))
			return WL_ERR;
	return WL_OK;
}

static int run_graph(Graph *g, int *changed)
{
	Arena *a = g->mod->arena;
	FOR_NODES_SAFE(g, n, nx) {
		if (run_subgraphs(n, changed))
			return WL_ERR;
		if (n->op != OP_Constant || n->noutputs != 1 || !n->outputs[0])
			continue;
		Value *v = n->outputs[0];
		if (v->is_output || v->graph != g)
			continue;
		Tensor *t = constant_tensor(a, n);
		if (!t)
			continue;
		/* the tensor's own type wins over a stale declaration */
		Type declared = v->type;
		v->type.kind = TY_NONE;
		node_remove(n);
		graph_set_init(g, v, t);
		if (declared.kind == TY_TENSOR && declared.denotation)
			v->type.denotation = declared.denotation;
		v->in_value_info = false;
		(*changed)++;
	}
	return WL_OK;
}

int pass_constant_to_initializer(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	int changed = 0;
	if (run_graph(m->graph, &changed))
		return WL_ERR;
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
