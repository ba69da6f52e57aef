/* dce.c — dead code elimination.
 *
 * requires  topological order (every use of a value comes after its
 *           producer, uses inside subgraphs after the owning node)
 * maintains topological order, use lists, graph inputs and outputs (never
 *           removed, even when unused), value types of live values
 * breaks    nothing
 *
 * A node is live when one of its outputs is a graph output or is read by a
 * live node (in this graph or in a subgraph of a live node). One backward
 * walk over the node list decides this: when a node is reached, every reader
 * of its outputs has been visited already and dead readers are gone, so a
 * node whose outputs have no users left and are not graph outputs is dead.
 * Removing a node that owns subgraphs first removes their nodes, so that the
 * outer values they read lose those uses. Subgraphs of live nodes are cleaned
 * the same way (their outputs are their roots).
 * Afterwards initializers that nothing reads and that are neither graph
 * inputs nor graph outputs are dropped, in every graph walked. Sparse
 * initializers are kept. Nodes have no side effects in ONNX, so unknown ops
 * are removed like any other.
 */
#include "passes.h"
#include "match.h"

static void forget(Value *v)
{
	if (!v)
		return;
	v->in_value_info = false;
	v->type.kind = TY_NONE;
}

static void remove_deep(Node *n);

static void clear_graph(Graph *g)
{
	FOR_NODES_SAFE(g, n, nx)
		remove_deep(n);
}

/* Removes n and everything inside its subgraphs. */
static void remove_deep(Node *n)
{
	FOR_SUBGRAPHS(n, sg)
		clear_graph(sg);
	node_remove(n);
	for (int i = 0; i < n->noutputs; i++)
		forget(n->outputs[i]);
}

static bool is_live(const Node *n)
{
	for (int i = 0; i < n->noutputs; i++) {
		const Value *v = n->outputs[i];
		if (v && (v->nusers > 0 || v->is_output))
			return true;
	}
	return false;
}

static void run_graph(Graph *g, int *changed)
{
	for (Node *n = g->last, *pv; n; n = pv) {
		pv = n->prev;
		if (is_live(n)) {
			for_each_subgraph(n, run_graph, changed);
			continue;
		}
		remove_deep(n);
		(*changed)++;
	}
	for (int i = g->ninits - 1; i >= 0; i--) {
		Value *v = g->inits[i];
		if (v->nusers || v->is_input || v->is_output)
			continue;
		graph_remove_init(g, v);
		forget(v);
		(*changed)++;
	}
}

int pass_dce(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	return pass_on_graph(m, ctx, run_graph);
}
