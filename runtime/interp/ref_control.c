/* ref_control.c — control flow: If with a condition known only at run time
 * (inline-if removes those whose condition folds).
 *
 *   y1, y2 = If (cond) <then_branch = g1 () => (a1, a2) {...}, else_branch = g2 () => (b1, b2) {...}>
 *
 * Each branch is a graph with no inputs that reads values of the enclosing
 * graphs by name (outer scope). The executor gives the If those values as
 * inputs after cond (exec_outer_reads) and keeps them alive until the If
 * runs; prepare builds one sub-executor per branch (exec_new_sub), infer
 * binds the outer values into the branch cond selects and plans it (its
 * output shapes become the If's), run runs it and copies its outputs.
 * cond and the outer values are data inputs: the planning pass computes
 * them, so the branch can be planned (its shapes may depend on them).
 *
 * Errors (one line naming the node): a missing branch, a branch whose
 * output count differs from the If's, a condition that does not hold
 * exactly one bool or number, a branch output whose shape at run time is
 * not the one it was planned with.
 */
#include "ref.h"

typedef struct IfState {
	Exec *br[2];                 /* else, then */
	int nouter;
} IfState;

static const Graph *branch(const Node *n, const char *name)
{
	for (int a = 0; a < n->nattrs; a++)
		if (n->attrs[a].type == AT_GRAPH && !strcmp(n->attrs[a].name, name))
			return n->attrs[a].g;
	return NULL;
}

int ref_if_prepare(KCall *c, Diag *d)
{
	const Node *n = c->node;
	IfState *st = arena_alloc(c->arena, sizeof *st);
	static const char *names[2] = {"else_branch", "then_branch"};
	for (int b = 0; b < 2; b++) {
		const Graph *g = branch(n, names[b]);
		if (!g)
			return kfail(c, d, "no %s graph", names[b]);
		if (g->noutputs != n->noutputs)
			return kfail(c, d, "%s has %d outputs, the If %d", names[b], g->noutputs, n->noutputs);
		if (exec_new_sub(c->exec, g, &st->br[b], d) != WL_OK)
			return WL_ERR;
	}
	st->nouter = c->nin - n->ninputs;
	c->state = st;
	return WL_OK;
}

/* The branch cond selects, with the outer values bound. */
static int pick(KCall *c, Diag *d, Exec **out)
{
	const IfState *st = c->state;
	const RTensor *cond = c->in[0];
	char b1[96];
	if (!cond || rt_numel(cond) != 1 || cond->ndim > 1 || !cond->data || elem_size(cond->dtype) == 0 ||
	    cond->dtype == DT_STRING)
		return kfail(c, d, "tensor '%s' %s: the condition must hold exactly one bool or number", kin_name(c, 0),
		             cond ? kdesc(cond, b1) : "(absent)");
	Exec *e = st->br[get_f64(cond->data, cond->dtype, 0) != 0.0];
	const int nown = c->node->ninputs;
	const Value *outer[EXEC_MAX_OUTER + 1];
	int k = exec_outer_reads(c->node, outer, EXEC_MAX_OUTER);
	for (int i = 0; i < k && i < st->nouter; i++)
		if (c->in[nown + i] && exec_bind_value(e, outer[i], c->in[nown + i], d) != WL_OK)
			return WL_ERR;
	*out = e;
	return WL_OK;
}

int ref_if_infer(KCall *c, Diag *d)
{
	Exec *e;
	if (pick(c, d, &e) != WL_OK || exec_plan(e, d) != WL_OK)
		return WL_ERR;
	for (int i = 0; i < c->nout; i++) {
		const RTensor *t = exec_output(e, i);
		if (c->out[i])
			set_out(c->out[i], t->dtype, t->ndim, t->dims);
	}
	return WL_OK;
}

int ref_if_run(KCall *c, Diag *d)
{
	Exec *e;
	if (pick(c, d, &e) != WL_OK || exec_run(e, d) != WL_OK)
		return WL_ERR;
	for (int i = 0; i < c->nout; i++) {
		const RTensor *t = exec_output(e, i);
		RTensor *o = c->out[i];
		if (!o)
			continue;
		char b1[96], b2[96];
		if (t->dtype != o->dtype || t->ndim != o->ndim || memcmp(t->dims, o->dims, sizeof(int64_t) * (size_t)t->ndim) ||
		    t->nbytes != o->nbytes)
			return kfail(c, d, "output '%s': the branch gave %s, planned %s", kout_name(c, i), kdesc(t, b1),
			             kdesc(o, b2));
		if (t->nbytes)
			memcpy(o->data, t->data, t->nbytes);
	}
	return WL_OK;
}
