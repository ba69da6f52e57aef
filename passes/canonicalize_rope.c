/* canonicalize_rope.c — RoPE computed at run time from position_ids → a table
 * gathered by position_ids (the form fuse-gqa and the targets take).
 *
 * transformers ≥ 4.38 (LlamaRotaryEmbedding.forward) exports, after
 * fold-constants:
 *
 *   u = Unsqueeze (position_ids, [1])                # int64 [B,1,T]
 *   f = Cast <to = FLOAT> (u)
 *   m = MatMul (inv_freq, f)                         # inv_freq: constant [B|1, hd/2, 1]
 *   t = Transpose <perm = [0, 2, 1]> (m)             # [B, T, hd/2]
 *   c = Concat <axis = -1> (t, t)                    # [B, T, hd]
 *   cos = Cos (c)                                    # and sin = Sin (c)
 * →
 *   cos = Gather <axis = 0> (rope_cos_table, position_ids)   # table [R, hd]
 *   sin = Gather <axis = 0> (rope_sin_table, position_ids)
 *
 * table[p, j] = cos(fl(inv_freq[j mod hd/2] · p)) with the product rounded to
 * float32 as the graph's MatMul does (one term: exact product, one rounding),
 * the cosine in double rounded once. R = --max-seq (default 4096): positions
 * ≥ R are out of range for the Gather (an error on every target, not a wrong
 * row). The Cos/Sin output keeps its value (name, type); the chain above goes
 * with dce.
 *
 * requires  fold-constants (inv_freq, Expand folded to a constant), shape-infer
 * maintains topological order, use lists, graph inputs and outputs, types
 * breaks    nothing; adds two initializers per distinct chain
 *
 * Near misses left alone: Concat of two different values, a non-constant
 * inv_freq or one whose rows differ, a position input that is not an integer
 * tensor of shape [B, T], Cos of anything else.
 */
#include <math.h>
#include <string.h>
#include "passes.h"
#include "match.h"

enum { ROPE_DEFAULT_ROWS = 4096 };

typedef struct RopeMatch {
	Node *fn;                  /* Cos or Sin */
	Value *pos;                /* position_ids [B, T] int */
	const Tensor *inv;         /* [B|1, hd/2, 1] */
	int64_t hd;
} RopeMatch;

/* ---------------------------------------------------------------- match */

static bool match_rope_fn(Node *fn, RopeMatch *r)
{
	memset(r, 0, sizeof *r);
	if (fn->ninputs != 1 || fn->noutputs != 1 || !fn->inputs[0] || !fn->outputs[0])
		return false;
	Node *cat = producer(fn->inputs[0], OP_Concat);
	int64_t cd[MATCH_MAXR];
	if (!cat || cat->ninputs != 2 || cat->inputs[0] != cat->inputs[1] || static_shape(cat->outputs[0], cd) != 3)
		return false;
	int64_t ax = attr_int(cat, "axis", 0);
	if (ax != -1 && ax != 2)
		return false;
	Node *tr = producer(cat->inputs[0], OP_Transpose);
	static const int64_t p021[3] = {0, 2, 1};
	if (!perm_is(tr, 3, p021))
		return false;
	Node *mm = producer(tr->inputs[0], OP_MatMul);
	if (!mm || !mm->inputs[0] || !mm->inputs[0]->init)
		return false;
	Node *cast = producer(mm->inputs[1], OP_Cast);
	Node *un = cast ? producer(cast->inputs[0], OP_Unsqueeze) : NULL;
	if (!un || attr_int(cast, "to", 0) != DT_FLOAT)
		return false;
	const Tensor *inv = mm->inputs[0]->init;
	int64_t hd = cd[2], pd[MATCH_MAXR];
	if (inv->dtype != DT_FLOAT || inv->ndim != 3 || inv->dims[1] * 2 != hd || inv->dims[2] != 1 || hd < 2)
		return false;
	Value *pos = un->inputs[0];
	if (static_shape(pos, pd) != 2 || pd[0] != cd[0] || pd[1] != cd[1] ||
	    (pos->type.elem != DT_INT64 && pos->type.elem != DT_INT32))
		return false;
	int64_t ud[MATCH_MAXR];
	if (static_shape(un->outputs[0], ud) != 3 || ud[1] != 1 || (inv->dims[0] != 1 && inv->dims[0] != pd[0]))
		return false;
	for (int64_t b = 1; b < inv->dims[0]; b++)          /* every row the same inv_freq */
		for (int64_t j = 0; j < hd / 2; j++)
			if (tensor_get_f64(inv, b * (hd / 2) + j) != tensor_get_f64(inv, j))
				return false;
	*r = (RopeMatch){fn, pos, inv, hd};
	return true;
}

/* ---------------------------------------------------------------- rewrite */

static Value *rope_table(Module *m, const RopeMatch *r, bool is_cos, int64_t rows)
{
	int64_t dims[2] = {rows, r->hd}, h = r->hd / 2;
	Graph *g = m->graph;
	void *d;
	Value *tv = new_initializer(g, is_cos ? "rope_cos_table" : "rope_sin_table", DT_FLOAT, 2, dims, &d);
	float *p = d;
	for (int64_t i = 0; i < rows; i++)
		for (int64_t j = 0; j < h; j++) {
			float f = (float)tensor_get_f64(r->inv, j) * (float)i;
			float v = (float)(is_cos ? cos((double)f) : sin((double)f));
			p[i * r->hd + j] = p[i * r->hd + j + h] = v;
		}
	return tv;
}

static void rewrite_rope(Module *m, const RopeMatch *r, int64_t rows)
{
	bool is_cos = r->fn->op == OP_Cos;
	Value *tab = rope_table(m, r, is_cos, rows), *y = r->fn->outputs[0];
	const char *name = r->fn->name ? r->fn->name : "rope";
	Node *ga = node_new(m->graph, "Gather", "", name);
	node_add_attr(ga, "axis", AT_INT)->i = 0;
	node_insert_before(r->fn, ga);
	node_add_input(ga, tab);
	node_add_input(ga, r->pos);
	node_remove(r->fn);
	node_add_output(ga, y);
}

int pass_canonicalize_rope(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	int64_t rows = ctx && ctx->canon.max_seq > 0 ? ctx->canon.max_seq : ROPE_DEFAULT_ROWS;
	int changed = 0;
	FOR_NODES_SAFE(m->graph, n, nx) {
		RopeMatch r;
		if ((n->op != OP_Cos && n->op != OP_Sin) || !match_rope_fn(n, &r))
			continue;
		rewrite_rope(m, &r, rows);
		changed++;
	}
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
