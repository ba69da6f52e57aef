/* identity_elim.c — removes Identity nodes, and Dropout nodes that are
 * identities (inference mode, mask unused).
 *
 *   t = MatMul(x, w)            t = MatMul(x, w)
 *   y = Identity(t)       →     z = Relu(t)
 *   z = Relu(y)
 *
 * requires  nothing beyond a verified graph
 * maintains topological order, use lists, graph input and output names,
 *           value types (the kept value takes the other's type when it had
 *           none)
 * breaks    nothing
 *
 * For `y = Identity(x)`:
 *   - y is not a graph output: every use of y reads x; the node goes.
 *   - y is a graph output (the output's name must stay): when x is produced
 *     by a node of the same graph and is not itself an output, that producer
 *     now produces y and every use of x reads y; the node goes.
 *   - otherwise (x is a graph input, an initializer, an outer-scope value or
 *     another output, and y must stay a distinct name) the node is kept.
 * Dropout is an identity when training_mode is absent or a constant false
 * (opset >= 12), is_test is not 0 (opset < 7), and its mask output is absent
 * or unused. The ratio input does not matter then.
 * A Cast to the element type its input already has is an identity too:
 *   y = Cast <to = 1> (x)       x float[...]  (Qwen2's RMSNorm `.to(float32)`)
 * It needs x's element type: a declared one (graph input, value_info,
 * initializer) here, any once shape-infer ran — the table runs this pass a
 * second time after fold-constants as `identity-elim-typed`. A Cast whose
 * input type is unknown, or that converts, stays.
 * Subgraphs are walked too; uses inside subgraphs are rewired with the rest.
 */
#include <string.h>
#include "passes.h"
#include "match.h"

/* A value that nothing reads any more: no value_info entry for it. */
static void forget(Value *v)
{
	if (!v)
		return;
	v->in_value_info = false;
	v->type.kind = TY_NONE;
}

static bool dropout_is_identity(const Node *n)
{
	if (n->noutputs < 1 || !n->outputs[0])
		return false;
	if (node_attr(n, "is_test") && attr_int(n, "is_test", 1) == 0)
		return false;
	if (n->ninputs > 2 && n->inputs[2]) {
		const Value *tm = n->inputs[2];
		if (!tm->init || tm->init->dtype == DT_STRING || tensor_numel(tm->init) != 1 ||
		    !tm->init->data)
			return false;
		if (tensor_get_i64(tm->init, 0) != 0)
			return false;
	}
	if (n->noutputs > 1 && n->outputs[1]) {
		const Value *mask = n->outputs[1];
		if (mask->nusers || mask->is_output)
			return false;
	}
	return true;
}

/* Removes `n`, an identity from x to y, if the names allow. */
static bool elim(Node *n, Value *x, Value *y)
{
	Graph *g = n->graph;
	if (!y->is_output) {
		if (x->type.kind == TY_NONE && y->type.kind != TY_NONE)
			x->type = type_copy(g->mod->arena, &y->type);
		node_remove(n);
		value_replace_uses(y, x);
		forget(y);
		for (int i = 1; i < n->noutputs; i++)
			forget(n->outputs[i]);
		return true;
	}
	Node *p = x->producer;
	if (!p || p->graph != g || x->graph != g || x->is_output || x->is_input || x->init)
		return false;
	int slot = x->producer_slot;
	if (y->type.kind == TY_NONE && x->type.kind != TY_NONE)
		y->type = type_copy(g->mod->arena, &x->type);
	node_remove(n);             /* drops the use of x, clears y's producer */
	value_replace_uses(x, y);   /* x is no output: only node inputs move */
	p->outputs[slot] = y;
	y->producer = p;
	y->producer_slot = slot;
	x->producer = NULL;
	forget(x);
	for (int i = 1; i < n->noutputs; i++)
		forget(n->outputs[i]);
	return true;
}

/* y = Cast <to = T> (x) with x already of element type T. */
static bool cast_is_identity(const Node *n)
{
	if (n->noutputs != 1 || !n->outputs[0] || n->ninputs != 1 || !n->inputs[0])
		return false;
	const Value *x = n->inputs[0];
	int elem = x->init ? x->init->dtype : (x->type.kind == TY_TENSOR ? x->type.elem : DT_UNDEFINED);
	if (elem == DT_UNDEFINED || elem == DT_STRING)
		return false;
	const Attr *to = node_attr(n, "to");
	return to && to->type == AT_INT && to->i == elem;
}

static void run_graph(Graph *g, int *changed)
{
	FOR_NODES_SAFE(g, n, nx) {
		for_each_subgraph(n, run_graph, changed);
		bool ok = false;
		if (n->op == OP_Identity)
			ok = n->noutputs == 1 && n->outputs[0];
		else if (n->op == OP_Dropout)
			ok = dropout_is_identity(n);
		else if (n->op == OP_Cast)
			ok = cast_is_identity(n);
		if (!ok || n->ninputs < 1 || !n->inputs[0])
			continue;
		Value *x = n->inputs[0], *y = n->outputs[0];
		if (x == y)
			continue;
		if (elim(n, x, y))
			(*changed)++;
	}
}

int pass_identity_elim(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	return pass_on_graph(m, ctx, run_graph);
}
