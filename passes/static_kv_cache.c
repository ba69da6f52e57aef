/* static_kv_cache.c — --static-kv-cache: the step programs of the LLM and
 * Whisper pipelines. Each fused attention reads its KV cache in place and
 * returns only the new rows, which the runtime writes into the cache itself
 * (runtime/pipelines/llm.c, whisper.c), so a step costs no copy of the
 * cache. Whisper's decoder self-attention is a GroupQueryAttention (kv_heads
 * = heads, no RoPE) once kv-step-mask has run, so the same rewrite applies.
 *
 *   g (..., float[B,Hkv,P,hd] past_k, float[B,Hkv,P,hd] past_v, int64[B,P+T] mask)
 *     => (..., float[B,Hkv,P+T,hd] present_k, float[B,Hkv,P+T,hd] present_v) {
 *     o, present_k, present_v = ai.wlower.GroupQueryAttention <...>
 *                                   (q, k, v, cos, sin, past_k, past_v, mask, pos?)
 *   }
 * →
 *   g (..., float[B,Hkv,P,hd] past_k, float[B,Hkv,P,hd] past_v, int64[B,P+T] mask)
 *     => (..., float[B,Hkv,T,hd] present_k, float[B,Hkv,T,hd] present_v) {
 *     o, present_k, present_v = ai.wlower.GroupQueryAttention <..., static_cache = 1>
 *                                   (q, k, v, cos, sin, past_k, past_v, mask, pos?)
 *   }
 *
 * With static_cache = 1 (docs/OPS.md) the node computes what it computed
 * before (keys = the P cache rows, then the T new rows; attention_mask says
 * which are valid), but its present outputs hold only the T new rows
 * (rotated keys, values). The pipeline compiles decoder_with_past with P =
 * max_seq: the cache is then the static [1, Hkv, max_seq, hd] buffer, rows
 * < p valid.
 *
 * Matched: every ai.wlower.GroupQueryAttention whose past_k and past_v are
 * graph inputs read by no other node, whose present_k and present_v are
 * graph outputs read by no node, with an attention_mask. Does nothing
 * without ctx->fuse.static_kv_cache.
 *
 * Near misses left alone: a past that is computed (not a graph input) or
 * also read elsewhere, a present that another node reads (the new-rows
 * shape would break it) or that is not a graph output, no attention_mask
 * (every cache row would be attended), no past (a prefill without cache),
 * static_cache already set.
 *
 * requires  fuse-gqa (the fused node), shape-infer (static past/present types)
 * maintains topological order, use lists, graph inputs
 * breaks    graph output types (present shapes become [B, Hkv, T, hd])
 */
#include "passes.h"

enum { G_Q = 0, G_PK = 5, G_PV = 6, G_MASK = 7 };

typedef struct KvMatch {
	Node *n;
	Value *present[2];
	int64_t dims[4];           /* the new present shape */
} KvMatch;

static Value *in_at(const Node *n, int i)
{
	return i < n->ninputs ? n->inputs[i] : NULL;
}

/* A graph input, static rank 4, read only by n. */
static bool cache_input(const Node *n, const Value *v)
{
	return v && v->is_input && !v->init && v->nusers == 1 && v->users[0].node == n && v->type.has_shape &&
	       v->type.rank == 4;
}

static bool match_static_kv(Node *n, KvMatch *m)
{
	if (n->op != OP_WlGroupQueryAttention || attr_int(n, "static_cache", 0) || n->noutputs < 3)
		return false;
	Value *q = in_at(n, G_Q), *pk = in_at(n, G_PK), *pv = in_at(n, G_PV);
	if (!in_at(n, G_MASK) || !q || !q->type.has_shape || q->type.rank != 3 || !cache_input(n, pk) ||
	    !cache_input(n, pv))
		return false;
	for (int i = 0; i < 2; i++) {
		Value *o = n->outputs[1 + i];
		if (!o || !o->is_output || o->nusers || !o->type.has_shape || o->type.rank != 4)
			return false;
		m->present[i] = o;
	}
	const Dim *qd = q->type.dims, *pd = pk->type.dims;
	for (int i = 0; i < 4; i++)
		if (pd[i].kind != DIM_VALUE)
			return false;
	if (qd[1].kind != DIM_VALUE)
		return false;
	m->n = n;
	m->dims[0] = pd[0].value;
	m->dims[1] = pd[1].value;
	m->dims[2] = qd[1].value;
	m->dims[3] = pd[3].value;
	return true;
}

static void rewrite_static_kv(Module *mod, KvMatch *m)
{
	node_add_attr(m->n, "static_cache", AT_INT)->i = 1;
	for (int i = 0; i < 2; i++)
		type_set_tensor(mod->arena, &m->present[i]->type, DT_FLOAT, 4, m->dims);
}

int pass_static_kv_cache(Module *mod, PassContext *ctx, Diag *d)
{
	(void)d;
	if (!ctx->fuse.static_kv_cache)
		return WL_OK;
	FOR_NODES(mod->graph, n) {
		KvMatch m;
		if (match_static_kv(n, &m)) {
			rewrite_static_kv(mod, &m);
			ctx->changed++;
		}
	}
	return WL_OK;
}
