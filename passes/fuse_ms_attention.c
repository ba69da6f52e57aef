/* fuse_ms_attention.c — com.microsoft Attention (ONNX Runtime's fused
 * BERT/GPT-2 self-attention, as onnxruntime.transformers' optimizer writes
 * it) → the QKV projection and the attention core as ai.wlower ops.
 *
 * Matched (B batch, S sequence, Din input hidden, D = 3 equal parts of the
 * packed weight, H = num_heads, hd = D / H):
 *
 *   out = com.microsoft.Attention <num_heads = H, unidirectional = u?,
 *             scale = c?, qkv_hidden_sizes = [D, D, D]?, mask_filter_value?>
 *             (x, w, bias?)                   # x float[B,S,Din]; w float[Din,3D] and
 *                                             # bias float[3D] initializers
 * →
 *   q, k, v = ai.wlower.MatMulNBits <K = Din, N = 3D, bits = 32, splits = [D, D, D]> (x, w, , , bias?)
 *   out = ai.wlower.WhisperAttention <embed = D, heads = H, q_len = S, kv_len = S,
 *             causal = u, scale = c (default hd^-0.5), kv_layout = "bsd"> (q, k, v)
 *
 * unidirectional = 1 masks key t > query s with mask_filter_value (-10000 by
 * default) added to the score: the same softmax as WhisperAttention's
 * exclusion as long as the scores stay far above -10000 + 88 (float exp
 * underflow), true of any trained model; a mask_filter_value above -1e3 is
 * left alone.
 *
 * Left alone (not miscompiled): a mask_index, past, relative_position_bias,
 * past_sequence_length or attention_bias input; a present output that is
 * read; unequal qkv_hidden_sizes; do_rotary; past_present_share_buffer;
 * unidirectional other than 0/1; weights or bias that are not float
 * initializers of those shapes; unknown shapes.
 *
 * requires  shape-infer (x's shape), constant-to-initializer (w, bias)
 * maintains topological order, use lists, graph inputs and outputs, the
 *           output value (name, type)
 * breaks    nothing. Runs before fuse-matmul-nbits / fuse-qkv (its
 *           MatMulNBits already has splits, so fuse-qkv leaves it).
 */
#include <math.h>
#include <string.h>
#include "passes.h"
#include "match.h"

typedef struct MsaMatch {
	Node *n;
	Value *x, *w, *bias, *out;
	int64_t B, S, Din, D, H;
	bool causal;
	float scale;
} MsaMatch;

static bool float_init(const Value *v, int ndim)
{
	return const_of(v, DT_FLOAT) && v->init->ndim == ndim;
}

static bool match_msa(Node *n, MsaMatch *m)
{
	memset(m, 0, sizeof *m);
	if (n->op != OP_MsAttention || n->ninputs < 2 || !n->inputs[0] || !n->inputs[1] || n->noutputs < 1 ||
	    !n->outputs[0])
		return false;
	for (int i = 3; i < n->ninputs; i++)
		if (n->inputs[i])
			return false;          /* mask_index, past, relative_position_bias, ... */
	for (int i = 1; i < n->noutputs; i++)
		if (n->outputs[i] && (n->outputs[i]->nusers || n->outputs[i]->is_output))
			return false;          /* present */
	if (attr_int(n, "do_rotary", 0) != 0 || attr_int(n, "past_present_share_buffer", 0) != 0)
		return false;
	int64_t uni = attr_int(n, "unidirectional", 0);
	if (uni != 0 && uni != 1)
		return false;
	if (uni && attr_float(n, "mask_filter_value", -10000.0f) > -1000.0f)
		return false;
	m->n = n;
	m->x = n->inputs[0];
	m->w = n->inputs[1];
	m->bias = n->ninputs > 2 ? n->inputs[2] : NULL;
	m->out = n->outputs[0];
	m->causal = uni == 1;
	m->H = attr_int(n, "num_heads", 0);
	const Type *xt = &m->x->type;
	if (m->H <= 0 || !type_shape_known(xt) || xt->elem != DT_FLOAT || xt->rank != 3)
		return false;
	m->B = xt->dims[0].value;
	m->S = xt->dims[1].value;
	m->Din = xt->dims[2].value;
	if (!float_init(m->w, 2) || m->w->init->dims[0] != m->Din || m->w->init->dims[1] % 3)
		return false;
	m->D = m->w->init->dims[1] / 3;
	const int64_t *qs;
	int nq = attr_ints(n, "qkv_hidden_sizes", &qs);
	if (nq >= 0 && (nq != 3 || qs[0] != m->D || qs[1] != m->D || qs[2] != m->D))
		return false;
	if (m->D % m->H)
		return false;
	if (m->bias && (!float_init(m->bias, 1) || m->bias->init->dims[0] != 3 * m->D))
		return false;
	m->scale = attr_float(n, "scale", 0.0f);
	if (m->scale == 0.0f)
		m->scale = (float)(1.0 / sqrt((double)(m->D / m->H)));
	/* the output must be what the op computes: float [B, S, D] */
	const Type *ot = &m->out->type;
	if (ot->kind == TY_TENSOR && type_shape_known(ot) &&
	    (ot->rank != 3 || ot->dims[0].value != m->B || ot->dims[1].value != m->S || ot->dims[2].value != m->D))
		return false;
	return true;
}

static void rewrite_msa(Module *mod, MsaMatch *m, int *counter)
{
	Node *an = m->n;
	Graph *g = an->graph;
	Arena *ar = mod->arena;
	Node *from[1] = {an};
	int c0 = *counter;
	const char *pname = fused_node_name(mod, from, 1, "qkv_proj", "MatMulNBits", counter);
	*counter = c0;
	const char *cname = fused_node_name(mod, from, 1, "core", "WhisperAttention", counter);
	/* projection */
	Node *p = node_new(g, "MatMulNBits", "ai.wlower", pname);
	node_add_attr(p, "K", AT_INT)->i = m->Din;
	node_add_attr(p, "N", AT_INT)->i = 3 * m->D;
	node_add_attr(p, "bits", AT_INT)->i = 32;
	Attr *sp = node_add_attr(p, "splits", AT_INTS);
	sp->n = 3;
	sp->ints = arena_alloc(ar, 3 * sizeof(int64_t));
	sp->ints[0] = sp->ints[1] = sp->ints[2] = m->D;
	set_fused_from(mod, p, from, 1);
	node_insert_before(an, p);
	node_add_input(p, m->x);
	node_add_input(p, m->w);
	if (m->bias) {
		node_add_input(p, NULL);
		node_add_input(p, NULL);
		node_add_input(p, m->bias);
	}
	static const char *const part[3] = {"q", "k", "v"};
	Value *qkv[3];
	for (int i = 0; i < 3; i++) {
		qkv[i] = graph_new_value(g, arena_printf(ar, "%s_%s", m->out->name ? m->out->name : "attention", part[i]));
		qkv[i]->type = type_copy(ar, &m->x->type);
		qkv[i]->type.dims[2].value = m->D;
		node_add_output(p, qkv[i]);
	}
	/* core */
	WaAttrs wa = {.embed = m->D, .heads = m->H, .q_len = m->S, .kv_len = m->S, .causal = m->causal,
	              .scale = m->scale, .kv_layout = "bsd"};
	Node *a = new_whisper_attention(mod, g, cname, &wa);
	set_fused_from(mod, a, from, 1);
	node_insert_before(an, a);
	for (int i = 0; i < 3; i++)
		node_add_input(a, qkv[i]);
	for (int i = 1; i < an->noutputs; i++)
		if (an->outputs[i]) {
			an->outputs[i]->in_value_info = false;
			an->outputs[i]->type.kind = TY_NONE;
		}
	node_remove(an);
	node_add_output(a, m->out);
	module_set_opset(mod, "ai.wlower", 1);
}

int pass_fuse_ms_attention(Module *mod, PassContext *ctx, Diag *d)
{
	(void)d;
	int changed = 0, counter = 0;
	FOR_NODES_SAFE(mod->graph, n, nx) {
		MsaMatch m;
		if (!match_msa(n, &m))
			continue;
		rewrite_msa(mod, &m, &counter);
		changed++;
	}
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
