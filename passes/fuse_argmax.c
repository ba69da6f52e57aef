/* fuse_argmax.c — --append-argmax: the logits output becomes greedy token ids.
 *
 *   g (...) => (float[B, T, V] logits) {          g (...) => (int32[B, T] token_ids) {
 *     logits = MatMul (h, w_lm)            →        logits = MatMul (h, w_lm)
 *   }                                               token_ids = ai.wlower.GreedyArgMax (logits)
 *                                                 }
 *
 * Which outputs are logits is decided by structure, not by name: a float
 * graph output of rank >= 2 produced by a linear layer (MatMul,
 * com.microsoft or ai.wlower MatMulNBits, Gemm; optionally through its bias
 * Add) whose last dimension V is known and
 *   - equals the row count of the token-embedding table (a Gather from a
 *     constant float [V, D] initializer; of several, the largest D: not a
 *     RoPE cos/sin table), when the graph has one;
 *   - else (graphs fed with embeddings, e.g. Qwen2's single-token graph) is
 *     the largest dimension of the output and at least 1000.
 * The output keeps its position; it is named `token_ids` (int32, the logits'
 * shape without the last axis). The logits value stays for its other users.
 * Does nothing without ctx->fuse.append_argmax.
 *
 * Near misses left alone: outputs of other producers (hidden states from a
 * norm), non-float outputs, V that matches no embedding table, rank 1.
 *
 * requires  shape-infer (output types)
 * maintains topological order, use lists, other outputs
 * breaks    graph outputs (one is replaced)
 */
#include <string.h>
#include "passes.h"
#include "match.h"

typedef struct ArgMaxCapture {
	int slot;                  /* graph output index */
	Value *logits;
	int64_t V;
} ArgMaxCapture;

static bool is_linear(const Node *n)
{
	return n && (n->op == OP_MatMul || n->op == OP_MsMatMulNBits || n->op == OP_WlMatMulNBits ||
	             n->op == OP_Gemm);
}

/* Rows of the token-embedding table, or -1 when the graph has none: of the
 * constant float [R, D] tables gathered along axis 0 by run-time indices,
 * the widest (largest D; the first of equals): RoPE cos/sin tables
 * ([max_seq, head_dim], canonicalize-rope) are narrower than the embedding. */
static int64_t embedding_rows(Graph *g)
{
	int64_t rows = -1, width = 0;
	FOR_NODES(g, n) {
		if (n->op != OP_Gather || n->ninputs != 2 || !n->inputs[0] || !n->inputs[0]->init)
			continue;
		const Tensor *t = n->inputs[0]->init;
		if (t->dtype == DT_FLOAT && t->ndim == 2 && attr_int(n, "axis", 0) == 0 && n->inputs[1] &&
		    !n->inputs[1]->init && t->dims[1] > width) {
			rows = t->dims[0];
			width = t->dims[1];
		}
	}
	return rows;
}

static bool match_argmax(Graph *g, int slot, int64_t vocab, ArgMaxCapture *c)
{
	memset(c, 0, sizeof *c);
	Value *v = g->outputs[slot];
	const Type *ty = &v->type;
	if (ty->kind != TY_TENSOR || ty->elem != DT_FLOAT || !ty->has_shape || ty->rank < 2)
		return false;
	const Dim *last = &ty->dims[ty->rank - 1];
	if (last->kind != DIM_VALUE || last->value < 2)
		return false;
	Node *p = v->producer;
	if (p && p->op == OP_Add && p->ninputs == 2) {
		Node *a = p->inputs[0] ? p->inputs[0]->producer : NULL, *b = p->inputs[1] ? p->inputs[1]->producer : NULL;
		p = is_linear(a) ? a : b;
	}
	if (!is_linear(p))
		return false;
	if (vocab > 0) {
		if (last->value != vocab)
			return false;
	} else {
		if (last->value < 1000)
			return false;
		for (int i = 0; i < ty->rank - 1; i++)
			if (ty->dims[i].kind != DIM_VALUE || ty->dims[i].value > last->value)
				return false;
	}
	c->slot = slot;
	c->logits = v;
	c->V = last->value;
	return true;
}

static void rewrite_argmax(Module *m, ArgMaxCapture *c)
{
	Graph *g = m->graph;
	Arena *ar = m->arena;
	Value *ids = graph_new_value(g, "token_ids");
	const Type *lt = &c->logits->type;
	int64_t dims[16];
	for (int i = 0; i < lt->rank - 1 && i < 16; i++)
		dims[i] = lt->dims[i].kind == DIM_VALUE ? lt->dims[i].value : -1;
	type_set_tensor(ar, &ids->type, DT_INT32, lt->rank - 1, dims);
	for (int i = 0; i < lt->rank - 1; i++)
		ids->type.dims[i] = lt->dims[i];     /* keeps symbolic dims */
	Node *n = node_new(g, "GreedyArgMax", "ai.wlower", "/greedy_argmax");
	node_append(g, n);
	node_add_input(n, c->logits);
	node_add_output(n, ids);
	g->outputs[c->slot] = ids;
	ids->is_output = true;
	c->logits->is_output = false;
	for (int i = 0; i < g->noutputs; i++)
		if (g->outputs[i] == c->logits)
			c->logits->is_output = true;
	c->logits->in_value_info = true;
}

int pass_fuse_argmax(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	if (!ctx || !ctx->fuse.append_argmax)
		return WL_OK;
	Graph *g = m->graph;
	int64_t vocab = embedding_rows(g);
	int changed = 0;
	for (int i = 0; i < g->noutputs; i++) {
		ArgMaxCapture c;
		if (!match_argmax(g, i, vocab, &c))
			continue;
		rewrite_argmax(m, &c);
		changed++;
	}
	return fusion_done(m, ctx, changed);
}
