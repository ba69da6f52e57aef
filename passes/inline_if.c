/* inline_if.c — an If whose condition is a constant becomes the branch it
 * takes (torch.onnx writes If for Python conditions on shapes; once
 * --dim fixes the dims, fold-constants folds the condition).
 *
 *   c = {true}                                   (a folded constant)
 *   y = If (c) <then_branch = g1 () => (t) {     →   t1 = Add (x, one)
 *             t = Add (x, one) },                    y = Identity (t1)
 *           else_branch = g2 () => (e) {
 *             e = Sub (x, one) }>
 *
 * The branch's nodes are copied into the If's graph before it (values keep
 * their names, made unique in that scope), its initializers become
 * initializers there, and each If output is an Identity of the branch output
 * (identity-elim-typed removes those, keeping graph output names). The new
 * nodes get their types from shape inference; the pass table runs
 * fold-constants again after this pass, so shape chains inside the branch
 * fold too. Walks If nodes of the main graph, repeatedly (an inlined branch
 * may hold another If).
 *
 * requires  fold-constants (the condition is an initializer)
 * maintains topological order, use lists, graph inputs and outputs, types
 * breaks    nothing
 *
 * Near misses left alone: a condition that is not a constant, a branch whose
 * nodes hold subgraphs themselves (Loop/Scan/If inside: kept as the If).
 */
#include <stdlib.h>
#include <string.h>
#include "passes.h"

/* The constant truth value of n's condition: 1, 0, or -1 when not constant. */
static int const_cond(const Node *n)
{
	const Value *c = n->ninputs == 1 ? n->inputs[0] : NULL;
	if (!c || !c->init || tensor_numel(c->init) != 1 || c->init->dtype == DT_STRING)
		return -1;
	return tensor_get_f64(c->init, 0) != 0.0;
}

static bool has_subgraphs(const Graph *g)
{
	FOR_NODES(g, x)
		for (int a = 0; a < x->nattrs; a++)
			if (x->attrs[a].type == AT_GRAPH || x->attrs[a].type == AT_GRAPHS)
				return true;
	return false;
}

/* Parent value for branch value v: itself when it is declared outside the
 * branch, else a copy made on first use (map indexed by Value.id). */
static Value *mapped(Graph *parent, const Graph *br, Value **map, Value *v)
{
	if (!v || v->graph != br)
		return v;
	if (!map[v->id]) {
		Value *p = graph_new_value(parent, v->name);
		p->type = type_copy(parent->mod->arena, &v->type);
		if (v->init)
			graph_set_init(parent, p, v->init);
		map[v->id] = p;
	}
	return map[v->id];
}

static int inline_one(Module *m, Node *n, Diag *d)
{
	Attr *at = node_attr(n, const_cond(n) ? "then_branch" : "else_branch");
	Graph *br = at && at->type == AT_GRAPH ? at->g : NULL;
	if (!br || has_subgraphs(br) || br->noutputs != n->noutputs)
		return 0;
	Graph *g = n->graph;
	Value **map = calloc((size_t)m->next_value_id + 1, sizeof *map);
	if (!map)
		wl_die(__FILE__, __LINE__, "out of memory");
	int rc = 1;
	FOR_NODES(br, x) {
		Node *c = node_new(g, x->op_type, x->domain, x->name);
		for (int a = 0; a < x->nattrs; a++)
			*node_add_attr(c, x->attrs[a].name, x->attrs[a].type) = x->attrs[a];
		node_insert_before(n, c);
		for (int i = 0; i < x->ninputs; i++)
			node_add_input(c, mapped(g, br, map, x->inputs[i]));
		for (int i = 0; i < x->noutputs; i++)
			node_add_output(c, mapped(g, br, map, x->outputs[i]));
		if (shape_infer_node(c, d) != WL_OK) {
			rc = -1;
			break;
		}
	}
	for (int i = 0; rc > 0 && i < n->noutputs; i++) {
		Value *src = mapped(g, br, map, br->outputs[i]), *y = n->outputs[i];
		if (!y)
			continue;
		Node *id = node_new(g, "Identity", "", y->name);
		node_insert_before(n, id);
		node_add_input(id, src);
		n->outputs[i] = NULL;      /* y changes producer: the Identity */
		y->producer = NULL;
		node_add_output(id, y);
	}
	free(map);
	if (rc > 0)
		node_remove(n);
	return rc;
}

int pass_inline_if(Module *m, PassContext *ctx, Diag *d)
{
	int changed = 0, k;
	for (bool again = true; again;) {
		again = false;
		FOR_NODES_SAFE(m->graph, n, nx) {
			if (n->op != OP_If || const_cond(n) < 0)
				continue;
			if ((k = inline_one(m, n, d)) < 0)
				return WL_ERR;
			changed += k;
			again |= k > 0;
		}
	}
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
