/* kv_step_position.c — --kv-step: a decoder step whose positional row is
 * sliced at the past length (transformers' Whisper decoder:
 * embed_positions.weight[past_len : past_len + 1]) takes the position as a
 * graph input instead, so that one static-size cache serves every position
 * (runtime/pipelines/whisper.c keeps the cache; kv-step-mask adds the mask).
 *
 *   g (int64[1,1] input_ids, float[1,H,P,hd] past_k, ...) => (...) {
 *     s   = Shape (past_k)                    # past_k: a rank-4 graph input
 *     p   = Gather <axis = 0> (s, 2)          # the past length
 *     st  = Unsqueeze (p, [0])
 *     row = Slice (W, st, en, [0] ...)        # W a 2-D initializer [N, D]; one row:
 *   }                                         # en = Unsqueeze (Add (p, Gather (Shape (input_ids), 1)))
 *   →                                         # with input_ids [1, 1]
 *   g (..., int64[1] position_ids) => (...) {
 *     row = Gather <axis = 0> (W, position_ids)
 *   }
 *
 * With --from-prefill step (a static-T prefill, prefill-step makes it the
 * step) the slice of the first T rows becomes the same Gather, at an input
 * position_ids [T] (T = 1 once prefill-step has run):
 *
 *   row = Slice (W, 0, en, [0] ...)   # en = T or Unsqueeze (Gather (Shape (input_ids), 1)),
 *                                     # input_ids [1, T]
 *
 * The old chain is left for dce. A Slice whose rows are not exactly one
 * (input_ids [1, T], T > 1), whose axes are not [0], or whose start is not
 * the past length of a graph input is left alone.
 *
 * requires  specialize-dims, shape-infer, constant-to-initializer (runs
 *           before fold-constants: folding would turn the row into a constant)
 * maintains topological order, use lists, graph outputs
 * breaks    graph inputs (adds position_ids)
 */
#include <string.h>
#include "passes.h"
#include "match.h"

typedef struct PosMatch {
	Node *slice;
	Value *table;
	int64_t rows;              /* --from-prefill step: T (position_ids [T]); else 1 */
} PosMatch;

/* v = Gather <axis 0> (Shape (X), k) with X a graph input of rank `rank`
 * (0: any rank); returns X. */
static Value *shape_dim_of_input(const Value *v, int64_t k, int rank)
{
	Node *g = producer(v, OP_Gather);
	double idx;
	if (!g || g->ninputs != 2 || attr_int(g, "axis", 0) != 0 || !const_scalar(g->inputs[1], &idx) || idx != k)
		return NULL;
	Node *s = producer(g->inputs[0], OP_Shape);
	if (!s || s->ninputs != 1 || !s->inputs[0]->is_input)
		return NULL;
	Value *x = s->inputs[0];
	if (rank && (x->type.kind != TY_TENSOR || !x->type.has_shape || x->type.rank != rank))
		return NULL;
	return x;
}

/* Unsqueeze (x, [0]) (opset 13 axes input or the attribute); returns x. */
static Value *unsqueeze0(const Value *v)
{
	Node *u = producer(v, OP_Unsqueeze);
	if (!u || u->ninputs < 1)
		return NULL;
	double ax;
	const int64_t *axes;
	if (u->ninputs >= 2 ? !const_scalar(u->inputs[1], &ax) || ax != 0
	                    : attr_ints(u, "axes", &axes) != 1 || axes[0] != 0)
		return NULL;
	return u->inputs[0];
}

/* --from-prefill step: Slice start 0, end T = dim 1 of input_ids [1, T]. */
static bool prefill_rows(Node *n, Value *st, Value *en, int64_t *T)
{
	double s, e;
	if (!const_scalar(st, &s) || s != 0)
		return false;
	Graph *g = n->graph;
	Value *ids = NULL;
	for (int i = 0; i < g->ninputs; i++)
		if (strcmp(g->inputs[i]->name, "input_ids") == 0)
			ids = g->inputs[i];
	if (!ids || !type_shape_known(&ids->type) || ids->type.rank != 2 || ids->type.dims[0].value != 1)
		return false;
	*T = ids->type.dims[1].value;
	Value *u = unsqueeze0(en);
	if (const_scalar(en, &e))
		return e == (double)*T;
	return u && shape_dim_of_input(u, 1, 2) == ids;
}

static bool match_position(Node *n, PosMatch *c, bool prefill)
{
	memset(c, 0, sizeof *c);
	if (n->op != OP_Slice || n->ninputs < 4 || !n->inputs[1] || !n->inputs[2] || !n->inputs[3])
		return false;
	Value *w = n->inputs[0];
	int64_t wd[MATCH_MAXR];
	double ax, step = 1;
	if (!const_of(w, DT_FLOAT) || static_shape(w, wd) != 2 || !const_scalar(n->inputs[3], &ax) || ax != 0)
		return false;
	if (n->ninputs >= 5 && n->inputs[4] && (!const_scalar(n->inputs[4], &step) || step != 1))
		return false;
	if (prefill) {
		if (!prefill_rows(n, n->inputs[1], n->inputs[2], &c->rows) || c->rows >= wd[0])
			return false;
		c->slice = n;
		c->table = w;
		return true;
	}
	Value *p = unsqueeze0(n->inputs[1]), *e = unsqueeze0(n->inputs[2]);
	if (!p || !e || !shape_dim_of_input(p, 2, 4))
		return false;
	Node *add = producer(e, OP_Add);
	Value *t = add ? other_operand(add, p) : NULL;
	Value *ids = t ? shape_dim_of_input(t, 1, 2) : NULL;
	if (!ids || !type_shape_known(&ids->type) || ids->type.dims[0].value != 1 || ids->type.dims[1].value != 1)
		return false;
	c->slice = n;
	c->table = w;
	c->rows = 1;
	return true;
}

static Value *position_input(Module *m, int64_t rows)
{
	Graph *g = m->graph;
	for (int i = 0; i < g->ninputs; i++)
		if (strcmp(g->inputs[i]->name, "position_ids") == 0)
			return g->inputs[i];
	Value *v = graph_new_value(g, "position_ids");
	int64_t d1[1] = {rows};
	type_set_tensor(m->arena, &v->type, DT_INT64, 1, d1);
	graph_add_input(g, v);
	return v;
}

static void rewrite_position(Module *m, PosMatch *c)
{
	Graph *g = m->graph;
	Value *row = c->slice->outputs[0];
	int counter = 0;
	Node *n = node_new(g, "Gather", NULL, fused_node_name(m, &c->slice, 1, "position", "Gather", &counter));
	node_add_attr(n, "axis", AT_INT)->i = 0;
	node_insert_before(c->slice, n);
	node_add_input(n, c->table);
	node_add_input(n, position_input(m, c->rows));
	node_remove(c->slice);
	node_add_output(n, row);
	int64_t wd[MATCH_MAXR], rd[2];
	static_shape(c->table, wd);
	rd[0] = c->rows;
	rd[1] = wd[1];
	type_set_tensor(m->arena, &row->type, DT_FLOAT, 2, rd);
}

int pass_kv_step_position(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	if (!ctx || !ctx->canon.kv_step)
		return WL_OK;
	int changed = 0;
	for (Node *n = m->graph->first, *next; n; n = next) {
		next = n->next;
		PosMatch c;
		if (match_position(n, &c, ctx->canon.from_prefill && strcmp(ctx->canon.from_prefill, "step") == 0)) {
			rewrite_position(m, &c);
			changed++;
		}
	}
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
