/* verify.c — the IR verifier, run after every pass in debug builds.
 * Checks, per graph and recursively into subgraphs:
 *   - list links and node counts are consistent;
 *   - SSA: a value has at most one producer, and producer/slot agree with
 *     the node's outputs; values are not both produced and inputs/inits;
 *   - use lists: every input edge is a Use of that value and vice versa;
 *   - no dangling values: each input is a graph input, an initializer, an
 *     output of an earlier node (topological order), or an outer-scope value;
 *   - graph outputs are defined; declared tensor types are well formed;
 *   - arity of known ops against the op table.
 * Failures are reported as Diag errors naming the graph, node and value: the
 * verifier also runs on imported models, where a failure is bad input. */
#include <stdlib.h>
#include <string.h>
#include "ir.h"

typedef struct V {
	Module *m;
	Diag *d;
	unsigned char *seen;   /* by Value.id: defined so far in a walk */
	int *edges;            /* by Value.id: input edges counted so far (values with many users) */
	int nseen;
} V;

/* A value read by few nodes has each edge looked up in its use list; one read
 * by more (a shared weight, a chain's constant) has its edges counted and the
 * count compared with its use list at the end of its graph, so the check stays
 * linear in the number of edges. */
enum { FEW_USERS = 8 };

static const char *nname(const Node *n)
{
	return n->name && *n->name ? n->name : n->op_type;
}

static int verify_graph(V *vf, Graph *g);

static bool defined(V *vf, Value *v)
{
	return v->id < vf->nseen && vf->seen[v->id];
}

static void define(V *vf, Value *v)
{
	WL_ASSERT(v->id < vf->nseen);
	vf->seen[v->id] = 1;
}

static int check_type(V *vf, Graph *g, Value *v)
{
	const Type *t = &v->type;
	if (t->kind == TY_TENSOR || t->kind == TY_SPARSE_TENSOR) {
		if (t->elem != DT_UNDEFINED && !dtype_valid(t->elem))
			return diag_fail(vf->d, "%s: value '%s': bad element type %d", vf->m->path, v->name, t->elem);
		if (t->has_shape && t->rank < 0)
			return diag_fail(vf->d, "%s: value '%s': negative rank", vf->m->path, v->name);
		for (int i = 0; t->has_shape && i < t->rank; i++)
			if (t->dims[i].kind == DIM_VALUE && t->dims[i].value < 0)
				return diag_fail(vf->d, "%s: value '%s': negative dimension %lld", vf->m->path,
				                 v->name, (long long)t->dims[i].value);
	}
	if (v->init) {
		Tensor *tt = v->init;
		if (tt->dtype != DT_STRING && tt->data == NULL && tensor_numel(tt) > 0)
			return diag_fail(vf->d, "%s: initializer '%s' has no data", vf->m->path, v->name);
	}
	(void)g;
	return WL_OK;
}

static bool has_use(const Value *v, const Node *n, int slot)
{
	for (int u = 0; u < v->nusers; u++)
		if (v->users[u].node == n && v->users[u].slot == slot)
			return true;
	return false;
}

static int cmp_use(const void *a, const void *b)
{
	const Use *x = a, *y = b;
	if (x->node != y->node)
		return (uintptr_t)x->node < (uintptr_t)y->node ? -1 : 1;
	return (x->slot > y->slot) - (x->slot < y->slot);
}

/* v has more than FEW_USERS users and every use is a real edge (checked by
 * the caller): the list is exact iff it has no duplicate and as many entries
 * as v has edges. */
static int check_many_uses(V *vf, Value *v)
{
	Use *u = malloc((size_t)v->nusers * sizeof *u);
	WL_ASSERT(u);
	memcpy(u, v->users, (size_t)v->nusers * sizeof *u);
	qsort(u, (size_t)v->nusers, sizeof *u, cmp_use);
	int dup = -1;
	for (int i = 1; i < v->nusers && dup < 0; i++)
		if (!cmp_use(&u[i - 1], &u[i]))
			dup = i;
	Use first = dup >= 0 ? u[dup] : (Use){0};
	free(u);
	if (dup >= 0)
		return diag_fail(vf->d, "%s: value '%s': use by node '%s' listed twice", vf->m->path, v->name,
		                 nname(first.node));
	if (vf->edges[v->id] != v->nusers)
		return diag_fail(vf->d, "%s: value '%s': %d input edges but %d uses", vf->m->path, v->name,
		                 vf->edges[v->id], v->nusers);
	return WL_OK;
}

static int verify_node(V *vf, Graph *g, Node *n)
{
	const char *path = vf->m->path;
	if (n->graph != g)
		return diag_fail(vf->d, "%s: node '%s' is linked into the wrong graph", path, nname(n));
	if (n->op != OP_UNKNOWN) {
		const OpInfo *oi = &op_info[n->op];
		if (n->ninputs < oi->min_in || (oi->max_in >= 0 && n->ninputs > oi->max_in))
			return diag_fail(vf->d, "%s: node '%s' (%s): %d inputs, expected %d..%d", path,
			                 nname(n), n->op_type, n->ninputs, oi->min_in, oi->max_in);
		if (n->noutputs < oi->min_out || (oi->max_out >= 0 && n->noutputs > oi->max_out))
			return diag_fail(vf->d, "%s: node '%s' (%s): %d outputs, expected %d..%d", path,
			                 nname(n), n->op_type, n->noutputs, oi->min_out, oi->max_out);
	}
	for (int i = 0; i < n->ninputs; i++) {
		Value *v = n->inputs[i];
		if (!v)
			continue;
		if (!defined(vf, v))
			return diag_fail(vf->d, "%s: node '%s' (%s): input '%s' is used before it is defined",
			                 path, nname(n), n->op_type, v->name);
		if (v->nusers > FEW_USERS) {
			vf->edges[v->id]++;
			continue;
		}
		if (!has_use(v, n, i))
			return diag_fail(vf->d, "%s: node '%s': input %d '%s' missing from its use list",
			                 path, nname(n), i, v->name);
	}
	/* subgraphs see everything defined so far */
	FOR_SUBGRAPHS(n, sg)
		if (verify_graph(vf, sg))
			return WL_ERR;
	for (int i = 0; i < n->noutputs; i++) {
		Value *v = n->outputs[i];
		if (!v)
			continue;
		if (v->producer != n || v->producer_slot != i)
			return diag_fail(vf->d, "%s: value '%s' has more than one producer (node '%s')",
			                 path, v->name, nname(n));
		if (v->init || v->is_input)
			return diag_fail(vf->d, "%s: node '%s' (%s) redefines %s '%s'", path, nname(n),
			                 n->op_type, v->init ? "initializer" : "graph input", v->name);
		if (defined(vf, v))
			return diag_fail(vf->d, "%s: value '%s' is defined twice", path, v->name);
		if (check_type(vf, g, v))
			return WL_ERR;
		define(vf, v);
	}
	return WL_OK;
}

static int verify_graph(V *vf, Graph *g)
{
	const char *path = vf->m->path;
	int count = 0;
	Node *prev = NULL;
	for (int i = 0; i < g->ninputs; i++) {
		if (g->inputs[i]->producer)
			return diag_fail(vf->d, "%s: graph input '%s' is also produced by node '%s'", path,
			                 g->inputs[i]->name, nname(g->inputs[i]->producer));
		if (check_type(vf, g, g->inputs[i]))
			return WL_ERR;
		define(vf, g->inputs[i]);
	}
	for (int i = 0; i < g->ninits; i++) {
		if (!g->inits[i]->init)
			return diag_fail(vf->d, "%s: initializer list holds '%s' without data", path, g->inits[i]->name);
		if (check_type(vf, g, g->inits[i]))
			return WL_ERR;
		define(vf, g->inits[i]);
	}
	for (int i = 0; i < g->nsparse; i++) {
		Value *v = graph_find_local(g, g->sparse_inits[i]->values->name);
		if (!v)
			return diag_fail(vf->d, "%s: sparse initializer '%s' has no value", path,
			                 g->sparse_inits[i]->values->name);
		define(vf, v);
	}
	FOR_NODES(g, n) {
		if (n->prev != prev)
			return diag_fail(vf->d, "%s: node list is corrupt at '%s'", path, nname(n));
		prev = n;
		count++;
		if (verify_node(vf, g, n))
			return WL_ERR;
	}
	if (g->last != prev || count != g->nnodes)
		return diag_fail(vf->d, "%s: graph '%s': node count %d != %d", path, g->name, count, g->nnodes);
	for (int i = 0; i < g->noutputs; i++)
		if (!defined(vf, g->outputs[i]))
			return diag_fail(vf->d, "%s: graph output '%s' is not defined", path, g->outputs[i]->name);
	/* every Use points at a live node that really reads the value */
	for (int i = 0; i < g->nvalues; i++) {
		Value *v = g->values[i];
		for (int u = 0; u < v->nusers; u++) {
			Use us = v->users[u];
			if (us.slot < 0 || us.slot >= us.node->ninputs || us.node->inputs[us.slot] != v)
				return diag_fail(vf->d, "%s: value '%s': stale use by node '%s'", path, v->name,
				                 nname(us.node));
		}
		if (v->nusers > FEW_USERS && v->id < vf->nseen && check_many_uses(vf, v))
			return WL_ERR;
	}
	return WL_OK;
}

static int verify_function(V *vf, Function *f)
{
	/* Function bodies may reference values only through their inputs. */
	for (int i = 0; i < f->body->ninputs; i++)
		define(vf, f->body->inputs[i]);
	return verify_graph(vf, f->body);
}

int ir_verify(Module *m, Diag *d)
{
	V vf = {m, d, NULL, NULL, m->next_value_id};
	vf.seen = calloc((size_t)vf.nseen + 1, 1);
	vf.edges = calloc((size_t)vf.nseen + 1, sizeof *vf.edges);
	WL_ASSERT(vf.seen && vf.edges);
	int rc = verify_graph(&vf, m->graph);
	for (int i = 0; rc == WL_OK && i < m->nfuncs; i++)
		rc = verify_function(&vf, m->funcs[i]);
	free(vf.seen);
	free(vf.edges);
	return rc;
}
