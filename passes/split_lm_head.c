/* split_lm_head.c — --split-lm-head body|head: a decoder cut into the body
 * (embedding lookup and layers: ids → hidden states) and the LM head (final
 * RMSNorm and projection: hidden states → logits), two programs of an LLM
 * pipeline. A prefill of N rows then runs the head on one row, not N.
 *
 *   g (ids, ...) => (logits, present...) {
 *     h = Add (...)                                  # the last layer's residual
 *     n = ai.wlower.RMSNorm <epsilon> (h, gamma)
 *     logits = ai.wlower.MatMulNBits <...> (n, w, ...)
 *   }
 * or, an int8 head (wlower quantize --int8, then fuse-qdq-matmul):
 *     nq = QuantizeLinear (n, s, z)
 *     logits = ai.wlower.QMatMul (nq, s, z, wq, sw)
 * body →
 *   g (ids, ...) => (hidden_states, present...) {
 *     hidden_states = Add (...)
 *   }
 * head →
 *   g (hidden_states) => (logits) {
 *     n = ai.wlower.RMSNorm <epsilon> (hidden_states, gamma)
 *     logits = ai.wlower.MatMulNBits <...> (n, w, ...)
 *   }
 *
 * Matched: the one graph output produced by an ai.wlower.MatMulNBits (one
 * output: no splits) reading an ai.wlower.RMSNorm of a value h that the norm
 * alone reads (or an ai.wlower.QMatMul reading the QuantizeLinear of that
 * norm, the quantization the norm's only reader: it goes with the head); or, after fuse-argmax (--append-argmax, the pipeline's
 * --argmax-on-device), the token_ids output of an ai.wlower.GreedyArgMax
 * reading such a projection whose logits nothing else reads: the head then
 * keeps the argmax (hidden_states → token_ids). body: h, renamed hidden_states, takes the output's place.
 * head: hidden_states (h's type) is a new graph input read by the norm, every
 * other graph output goes, the pass runs dce and drops the graph inputs left
 * unread. Does nothing without ctx->fuse.split_lm_head; with it, a graph
 * without that structure (or with two) is an error naming the model.
 *
 * Near misses (errors when the split is asked for): a projection not fed by
 * an RMSNorm (a LayerNorm head, a norm output that something else reads too),
 * a head whose output is not a graph output.
 *
 * requires  canonicalize-rmsnorm, fuse-matmul-nbits or fuse-qdq-matmul (the fused head)
 * maintains topological order, use lists
 * breaks    graph inputs and outputs (as above)
 */
#include <string.h>
#include "passes.h"

typedef struct HeadMatch {
	int slot;                  /* graph output index of the logits */
	Value *logits, *h;
	Node *norm;
} HeadMatch;

/* v's readers are `keep` and nodes whose outputs nothing reads (the
 * DequantizeLinear that fuse-qdq-matmul left for dce). */
static bool only_live_reader(const Value *v, const Node *keep)
{
	for (int i = 0; i < v->nusers; i++) {
		const Node *u = v->users[i].node;
		if (u == keep)
			continue;
		for (int k = 0; k < u->noutputs; k++)
			if (u->outputs[k] && (u->outputs[k]->nusers || u->outputs[k]->is_output))
				return false;
	}
	return true;
}

static bool match_head(Graph *g, int slot, HeadMatch *m)
{
	Value *lg = g->outputs[slot];
	Node *lin = lg->producer;
	if (lin && lin->op == OP_WlGreedyArgMax && lin->ninputs == 1 && lin->inputs[0]) {
		Value *logits = lin->inputs[0];
		if (logits->nusers != 1 || logits->is_output)
			return false;
		lin = logits->producer;
	}
	if (!lin || (lin->op != OP_WlMatMulNBits && lin->op != OP_WlQMatMul) || lin->noutputs != 1 ||
	    lin->ninputs < 1 || !lin->inputs[0])
		return false;
	Value *nv = lin->inputs[0];
	if (lin->op == OP_WlQMatMul) {
		Node *q = nv->producer;
		if (!q || q->op != OP_QuantizeLinear || !only_live_reader(nv, lin) || nv->is_output || !q->inputs[0])
			return false;
		nv = q->inputs[0];
	}
	Node *norm = nv->producer;
	if (!norm || norm->op != OP_WlRMSNorm || nv->nusers != 1 || nv->is_output || !norm->inputs[0])
		return false;
	Value *h = norm->inputs[0];
	if (h->nusers != 1 || h->is_output || !h->producer || !h->type.has_shape)
		return false;
	*m = (HeadMatch){slot, lg, h, norm};
	return true;
}

static void rewrite_body(Graph *g, HeadMatch *m)
{
	Value *hs = graph_new_value(g, "hidden_states");
	hs->type = type_copy(g->mod->arena, &m->h->type);
	Node *p = m->h->producer;
	int k = m->h->producer_slot;
	p->outputs[k] = hs;
	hs->producer = p;
	hs->producer_slot = k;
	m->h->producer = NULL;
	value_replace_uses(m->h, hs);
	g->outputs[m->slot] = hs;
	hs->is_output = true;
	m->logits->is_output = false;
	for (int i = 0; i < g->noutputs; i++)
		if (g->outputs[i] == m->logits)
			m->logits->is_output = true;
}

static int rewrite_head(Module *mod, PassContext *ctx, HeadMatch *m, Diag *d)
{
	Graph *g = mod->graph;
	Value *hs = graph_new_value(g, "hidden_states");
	hs->type = type_copy(mod->arena, &m->h->type);
	graph_add_input(g, hs);
	node_set_input(m->norm, 0, hs);
	for (int i = g->noutputs - 1; i >= 0; i--)
		if (g->outputs[i] != m->logits)
			graph_remove_output(g, i);
	if (pass_dce(mod, ctx, d) != WL_OK)
		return WL_ERR;
	for (int i = g->ninputs - 1; i >= 0; i--)
		if (g->inputs[i] != hs && !g->inputs[i]->init && g->inputs[i]->nusers == 0)
			graph_remove_input(g, i);
	return WL_OK;
}

int pass_split_lm_head(Module *mod, PassContext *ctx, Diag *d)
{
	const char *mode = ctx->fuse.split_lm_head;
	if (!mode)
		return WL_OK;
	bool head = strcmp(mode, "head") == 0;
	if (!head && strcmp(mode, "body") != 0)
		return diag_fail(d, "--split-lm-head '%s': expected body or head", mode);
	Graph *g = mod->graph;
	HeadMatch m, x;
	int found = 0;
	for (int i = 0; i < g->noutputs; i++)
		if (match_head(g, i, found ? &x : &m))
			found++;
	if (found != 1)
		return diag_fail(d, "%s: --split-lm-head: %s graph output computed as MatMulNBits (RMSNorm (h)) "
		                 "or QMatMul (QuantizeLinear (RMSNorm (h))) (the final norm and LM head, optionally "
		                 "then GreedyArgMax)", ctx->model_path ? ctx->model_path : mod->path,
		                 found ? "more than one" : "no");
	ctx->changed++;
	if (head)
		return rewrite_head(mod, ctx, &m, d);
	rewrite_body(g, &m);
	return WL_OK;
}
