/* kv_step_mask.c — --kv-step: the self-attention of a one-token decoder step
 * attends to a static-size cache through a length mask, so that one compiled
 * step serves every position (runtime/pipelines/whisper.c keeps the cache;
 * kv-step-position makes the position an input).
 *
 *   g (float[1,H,P,hd] past_k, float[1,H,P,hd] past_v, ...) => (..., pk, pv) {
 *     o, pk, pv = ai.wlower.WhisperAttention <heads = H, q_len = 1, kv_len = P+1,
 *                   kv_layout = "bsd", scale = s> (q, k, v, past_k, past_v)
 *   }
 *   →
 *   g (..., int64[1, P+1] attention_mask) => (..., pk, pv) {
 *     o, pk, pv = ai.wlower.GroupQueryAttention <heads = H, kv_heads = H, head_dim = hd,
 *                   scale = s, causal = 0, rope = 0>
 *                   (q, k, v, , , past_k, past_v, attention_mask)
 *   }
 *
 * GroupQueryAttention with kv_heads = heads and no RoPE is WhisperAttention
 * plus a key mask (docs/OPS.md: a key j with attention_mask[0, j] != 1 gets
 * score − 3.4028235e38, weight exactly 0). Every such node reads the one
 * graph input attention_mask. Cross-attention (kv_layout "bhsd", no past),
 * attention over more than one query, and nodes without past are left alone.
 *
 * requires  fuse-whisper-attention
 * maintains topological order, use lists, graph outputs, types
 * breaks    graph inputs (adds attention_mask)
 */
#include <string.h>
#include "passes.h"
#include "match.h"

typedef struct MaskMatch {
	Node *wa;
	int64_t heads, hd, L;
} MaskMatch;

static bool match_mask(Node *n, MaskMatch *c)
{
	memset(c, 0, sizeof *c);
	if (n->op != OP_WlWhisperAttention || n->ninputs != 5 || !n->inputs[3] || !n->inputs[4])
		return false;
	if (strcmp(attr_string(n, "kv_layout", "bsd"), "bsd") != 0 || attr_int(n, "q_len", 0) != 1)
		return false;
	int64_t pd[MATCH_MAXR], qd[MATCH_MAXR];
	if (static_shape(n->inputs[3], pd) != 4 || static_shape(n->inputs[0], qd) != 3 || pd[0] != 1 || qd[1] != 1)
		return false;
	c->wa = n;
	c->heads = attr_int(n, "heads", 0);
	c->hd = pd[3];
	c->L = pd[2] + 1;
	return c->heads == pd[1] && c->heads * c->hd == qd[2];
}

static Value *mask_input(Module *m, int64_t L)
{
	Graph *g = m->graph;
	for (int i = 0; i < g->ninputs; i++)
		if (strcmp(g->inputs[i]->name, "attention_mask") == 0)
			return g->inputs[i];
	Value *v = graph_new_value(g, "attention_mask");
	int64_t dims[2] = {1, L};
	type_set_tensor(m->arena, &v->type, DT_INT64, 2, dims);
	graph_add_input(g, v);
	return v;
}

static void rewrite_mask(Module *m, MaskMatch *c)
{
	Node *wa = c->wa;
	Graph *g = wa->graph;
	Node *n = node_new(g, "GroupQueryAttention", "ai.wlower", wa->name);
	IntAttr ia[] = {{"heads", c->heads}, {"kv_heads", c->heads}, {"head_dim", c->hd}, {"causal", 0}, {"rope", 0},
	                {"fp16", attr_int(wa, "fp16", 0)}};
	set_int_attrs(n, ia, 6);
	node_add_attr(n, "scale", AT_FLOAT)->f = attr_float(wa, "scale", 0.0f);
	Attr *ff = node_attr(wa, "fused_from");
	if (ff)
		*node_add_attr(n, "fused_from", ff->type) = *ff;
	node_insert_before(wa, n);
	Value *in[5], *out[3];
	for (int i = 0; i < 5; i++)
		in[i] = wa->inputs[i];
	for (int i = 0; i < 3; i++)
		out[i] = i < wa->noutputs ? wa->outputs[i] : NULL;
	int nout = wa->noutputs;
	node_remove(wa);
	Value *ins[8] = {in[0], in[1], in[2], NULL, NULL, in[3], in[4], mask_input(m, c->L)};
	for (int i = 0; i < 8; i++)
		node_add_input(n, ins[i]);
	for (int i = 0; i < nout; i++)
		node_add_output(n, out[i]);
}

int pass_kv_step_mask(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	if (!ctx || !ctx->canon.kv_step)
		return WL_OK;
	int changed = 0;
	for (Node *n = m->graph->first, *next; n; n = next) {
		next = n->next;
		MaskMatch c;
		if (match_mask(n, &c)) {
			rewrite_mask(m, &c);
			changed++;
		}
	}
	return fusion_done(m, ctx, changed);
}
