/* fuse_ms_gqa.c — ONNX Runtime GenAI's attention (the model builder's
 * com.microsoft GroupQueryAttention, rotating q and k itself or fed by
 * com.microsoft RotaryEmbedding nodes) → ai.wlower.GroupQueryAttention.
 *
 * Matched (B batch, S queries, P past, L = P + S, H = num_heads,
 * Hkv = kv_num_heads, hd = head dim; shapes static):
 *
 *   sl = Cast <to = int32> (Sub (ReduceSum (attention_mask, [1]), 1))  # the builder's mask
 *                                       # reformatting (keepdims 0 or 1); or a constant [B], all L-1
 *   tl = a constant L                   # Cast (Gather (Shape (attention_mask), 1)), folded
 *   o, pk?, pv? = com.microsoft.GroupQueryAttention <num_heads = H, kv_num_heads = Hkv,
 *             do_rotary = r?, rotary_interleaved = 0?, scale = c?>
 *             (q, k, v, past_k?, past_v?, sl, tl, cos_cache?, sin_cache?)
 *       q float[B,S,H·hd], k, v float[B,S,Hkv·hd], past float[B,Hkv,P,hd];
 *       do_rotary = 1: cos_cache, sin_cache float[maxpos, hd/2] initializers
 *   or (do_rotary = 0)
 *     q = com.microsoft.RotaryEmbedding <interleaved = 0> (q0, position_ids, cos_cache, sin_cache)
 *     k = com.microsoft.RotaryEmbedding <interleaved = 0> (k0, position_ids, cos_cache, sin_cache)
 *       position_ids int [B,S], the same for both, as are the caches
 * →
 *   o, pk?, pv? = ai.wlower.GroupQueryAttention <heads = H, kv_heads = Hkv, head_dim = hd,
 *             scale = c (default hd^-0.5), causal = 1, rope>
 *             (q0, k0, v, cos, sin, past_k?, past_v?, attention_mask?, position_ids?)
 *
 * Positions and tables. The com.microsoft op puts query i at position i for
 * a prompt (P = 0) and at seqlens_k + 1 - S + i otherwise; the ai.wlower op
 * reads rows of full-width tables cat(c, c) (rotate_half form, which is
 * rotary_interleaved = 0). New initializers hold those rows: at P = 0 rows
 * 0..S-1 (no position_ids); at P > 0 with a constant sl rows P..L-1; at
 * P > 0 from attention_mask (S = 1 only) rows 0..L-1 with position_ids = sl
 * (the token is at position seqlens_k); from RotaryEmbedding the whole cache
 * with its position_ids. Tables are shared between layers.
 *
 * --position-input (FuseOptions.position_input; the LLM pipeline): with
 * seqlens_k from attention_mask and rotary inside the op, the positions are
 * read from the graph input position_ids int64 [B,S] (added when missing;
 * one already there must be int32/int64 [B,S], else the node is left alone)
 * against the whole tables, for any S and P: the pipeline feeds the
 * position of every row (equal to the op's own when the mask is ones, and
 * right for the padded rows of a static cache, where seqlens_k is not). The
 * reformatting chain then goes with dce.
 *
 * Keys. The com.microsoft op attends to keys 0..seqlens_k[b] (causal); the
 * ai.wlower op to every key whose attention_mask is 1 (causal). The two agree
 * when each row of attention_mask is ones followed by zeros (right padding;
 * all ones at batch 1, what onnxruntime-genai feeds), the contract of the
 * builder's graphs. With past (P > 0), B must be 1, as ONNX Runtime's CPU
 * kernel also requires for S > 1.
 *
 * Left alone (not miscompiled): packed QKV (key and value absent);
 * rotary_interleaved, a rotary dim below hd (a cache narrower than hd/2),
 * RotaryEmbedding in its scalar-offset position form; local_window_size
 * < L, softcap, smooth_softmax, causal = 0, a quantized cache, qk_output;
 * the inputs position_ids, attention_bias, head_sink and beyond; seqlens_k
 * neither of the two forms; total_sequence_length other than L; P > 0 with
 * B > 1, or with S > 1 and seqlens_k from attention_mask; unknown shapes.
 *
 * requires  shape-infer (static shapes), fold-constants (tl, caches are initializers)
 * maintains topological order, use lists, graph inputs and outputs, the
 *           output values (name, type)
 * breaks    nothing; the mask reformatting nodes left dead go with dce.
 *           Runs before fuse-matmul-nbits (q, k, v are MatMulNBits outputs).
 */
#include <math.h>
#include <string.h>
#include "passes.h"
#include "match.h"

typedef struct MgMatch {
	Node *n, *rq, *rk;          /* the GQA; RotaryEmbedding of q and k (or NULL) */
	Value *q, *k, *v, *pk, *pv, *sl, *am, *pos, *cache_c, *cache_s;
	int64_t B, S, P, L, H, Hkv, hd;
	int64_t r0, rows;           /* table rows [r0, r0 + rows) of the caches */
	bool rope, const_sl, pos_input;   /* pos_input: position_ids, the graph input (added if missing) */
	float scale;
} MgMatch;

/* The graph input position_ids, if there is one. */
static Value *pos_graph_input(const Graph *g)
{
	for (int i = 0; i < g->ninputs; i++)
		if (g->inputs[i]->name && strcmp(g->inputs[i]->name, "position_ids") == 0)
			return g->inputs[i];
	return NULL;
}

/* A float cache [maxpos, hd/2] initializer pair. */
static bool caches_ok(const Value *c, const Value *s, int64_t hd)
{
	return const_of(c, DT_FLOAT) && const_of(s, DT_FLOAT) && c->init->ndim == 2 && s->init->ndim == 2 &&
	       c->init->dims[0] == s->init->dims[0] && c->init->dims[1] == hd / 2 && s->init->dims[1] == hd / 2;
}

/* sl = Cast <to = int32> (Sub (ReduceSum (am, [1]), 1)) → am [B, L] int. */
static Value *mask_of_seqlens(const MgMatch *m, const Value *sl)
{
	Node *c = producer(sl, OP_Cast);
	Node *sub = c && attr_int(c, "to", 0) == DT_INT32 ? producer(c->inputs[0], OP_Sub) : NULL;
	Node *rs = sub ? producer(sub->inputs[0], OP_ReduceSum) : NULL;
	double one, ax;
	if (!rs || !const_scalar(sub->inputs[1], &one) || one != 1.0 || attr_int(rs, "noop_with_empty_axes", 0))
		return NULL;
	const int64_t *axes;
	int na = attr_ints(rs, "axes", &axes);
	if (rs->ninputs > 1 && rs->inputs[1]) {
		if (na >= 0 || !const_scalar(rs->inputs[1], &ax))
			return NULL;
	} else if (na == 1) {
		ax = (double)axes[0];
	} else {
		return NULL;
	}
	Value *am = rs->inputs[0];
	int64_t d[MATCH_MAXR];
	if ((ax != 1 && ax != -1) || static_shape(am, d) != 2 || d[0] != m->B || d[1] != m->L ||
	    (am->type.elem != DT_INT64 && am->type.elem != DT_INT32))
		return NULL;
	return am;
}

/* sl is a constant [B] (or [B,1]) int, every value L-1. */
static bool seqlens_full(const MgMatch *m, const Value *sl)
{
	if (!sl->init || !sl->init->data || tensor_numel(sl->init) != m->B)
		return false;
	for (int64_t b = 0; b < m->B; b++)
		if (tensor_get_f64(sl->init, b) != (double)(m->L - 1))
			return false;
	return true;
}

/* x = com.microsoft.RotaryEmbedding <interleaved = 0> (x0, pos [B,S], c, s), read once. */
static Node *rotary_of(const MgMatch *m, const Value *x)
{
	Node *r = producer(x, OP_MsRotaryEmbedding);
	int64_t d[MATCH_MAXR];
	if (!r || !sole_read(x) || r->ninputs != 4 || attr_int(r, "interleaved", 0) != 0 ||
	    attr_int(r, "is_packed_batching", 0) != 0 || attr_float(r, "scale", 1.0f) != 1.0f)
		return NULL;
	int64_t rd = attr_int(r, "rotary_embedding_dim", 0);
	if ((rd != 0 && rd != m->hd) || !caches_ok(r->inputs[2], r->inputs[3], m->hd))
		return NULL;
	Value *pos = r->inputs[1];
	if (static_shape(pos, d) != 2 || d[0] != m->B || d[1] != m->S ||
	    (pos->type.elem != DT_INT64 && pos->type.elem != DT_INT32))
		return NULL;
	return r;
}

static bool match_ms_gqa(Node *n, bool position_input, MgMatch *m)
{
	memset(m, 0, sizeof *m);
	if (n->op != OP_MsGroupQueryAttention || n->ninputs < 7 || !n->inputs[0] || !n->inputs[1] || !n->inputs[2] ||
	    !n->inputs[5] || !n->inputs[6] || n->noutputs < 1 || !n->outputs[0])
		return false;
	for (int i = 9; i < n->ninputs; i++)
		if (n->inputs[i])
			return false;          /* position_ids, attention_bias, head_sink, scales, norms */
	if (n->noutputs > 3 && n->outputs[3] && (n->outputs[3]->nusers || n->outputs[3]->is_output))
		return false;
	if (attr_int(n, "causal", 1) != 1 || attr_int(n, "rotary_interleaved", 0) != 0 ||
	    attr_float(n, "softcap", 0.0f) != 0.0f || attr_int(n, "smooth_softmax", -1) > 0 ||
	    attr_int(n, "qk_output", 0) != 0 || strcmp(attr_string(n, "k_quant_type", "NONE"), "NONE") ||
	    strcmp(attr_string(n, "v_quant_type", "NONE"), "NONE"))
		return false;
	m->n = n;
	m->H = attr_int(n, "num_heads", 0);
	m->Hkv = attr_int(n, "kv_num_heads", 0);
	m->q = n->inputs[0];
	m->k = n->inputs[1];
	m->v = n->inputs[2];
	int64_t qd[MATCH_MAXR], kd[MATCH_MAXR], vd[MATCH_MAXR];
	if (m->H <= 0 || m->Hkv <= 0 || m->H % m->Hkv || static_shape(m->q, qd) != 3 || m->q->type.elem != DT_FLOAT ||
	    qd[2] % m->H)
		return false;
	m->B = qd[0];
	m->S = qd[1];
	m->hd = qd[2] / m->H;
	if (m->hd < 2 || m->hd % 2 || static_shape(m->k, kd) != 3 || static_shape(m->v, vd) != 3 ||
	    m->k->type.elem != DT_FLOAT || m->v->type.elem != DT_FLOAT || kd[0] != m->B || kd[1] != m->S ||
	    kd[2] != m->Hkv * m->hd || vd[0] != m->B || vd[1] != m->S || vd[2] != kd[2])
		return false;
	/* past */
	m->pk = n->ninputs > 3 ? n->inputs[3] : NULL;
	m->pv = n->ninputs > 4 ? n->inputs[4] : NULL;
	if (!m->pk != !m->pv)
		return false;
	if (m->pk) {
		int64_t pd[MATCH_MAXR];
		if (static_shape(m->pk, pd) != 4 || !type_equal(&m->pk->type, &m->pv->type) ||
		    m->pk->type.elem != DT_FLOAT || pd[0] != m->B || pd[1] != m->Hkv || pd[3] != m->hd)
			return false;
		m->P = pd[2];
	}
	m->L = m->P + m->S;
	if (m->P > 0 && m->B != 1)
		return false;
	int64_t win = attr_int(n, "local_window_size", -1);
	if (win >= 0 && win < m->L)
		return false;
	double tl;
	if (!const_scalar(n->inputs[6], &tl) || tl != (double)m->L)
		return false;
	/* seqlens_k */
	m->sl = n->inputs[5];
	if (seqlens_full(m, m->sl))
		m->const_sl = true;
	else if (!(m->am = mask_of_seqlens(m, m->sl)))
		return false;
	/* rotary */
	bool inner = attr_int(n, "do_rotary", 0) != 0;
	m->rq = inner ? NULL : rotary_of(m, m->q);
	m->rk = inner ? NULL : rotary_of(m, m->k);
	if (!m->rq != !m->rk)
		return false;
	if (inner) {
		if (n->ninputs < 9 || !caches_ok(n->inputs[7], n->inputs[8], m->hd))
			return false;
		m->cache_c = n->inputs[7];
		m->cache_s = n->inputs[8];
		int64_t maxpos = m->cache_c->init->dims[0];
		if (position_input && !m->const_sl) {
			const Value *gp = pos_graph_input(n->graph);
			int64_t pd[MATCH_MAXR];
			if (gp && (static_shape(gp, pd) != 2 || pd[0] != m->B || pd[1] != m->S ||
			           (gp->type.elem != DT_INT64 && gp->type.elem != DT_INT32)))
				return false;
			m->r0 = 0, m->rows = maxpos;
			m->pos_input = true;
		} else if (m->P == 0) {
			m->r0 = 0, m->rows = m->S;
		} else if (m->const_sl) {
			m->r0 = m->P, m->rows = m->S;
		} else if (m->S == 1) {
			m->r0 = 0, m->rows = m->L;
			m->pos = m->sl;
		} else {
			return false;
		}
		if (m->r0 + m->rows > maxpos)
			return false;
	} else if (m->rq) {
		if (m->rq->inputs[1] != m->rk->inputs[1] || m->rq->inputs[2] != m->rk->inputs[2] ||
		    m->rq->inputs[3] != m->rk->inputs[3])
			return false;
		m->cache_c = m->rq->inputs[2];
		m->cache_s = m->rq->inputs[3];
		m->pos = m->rq->inputs[1];
		m->r0 = 0;
		m->rows = m->cache_c->init->dims[0];
		m->q = m->rq->inputs[0];
		m->k = m->rk->inputs[0];
	} else if (n->ninputs > 7 && (n->inputs[7] || (n->ninputs > 8 && n->inputs[8]))) {
		return false;
	}
	m->rope = m->cache_c != NULL;
	m->scale = attr_float(n, "scale", 0.0f);
	if (m->scale == 0.0f)
		m->scale = (float)(1.0 / sqrt((double)m->hd));
	return true;
}

/* ---------------------------------------------------------------- rewrite */

/* Full-width rows [r0, r0 + rows) of a [maxpos, hd/2] cache: row i = cat(c[i], c[i]). */
typedef struct TableCache {
	const Value *src;
	int64_t r0, rows;
	Value *v;
} TableCache;

static Value *full_table(Module *mod, TableCache *tc, int *ntc, const Value *src, int64_t r0, int64_t rows,
                         bool is_cos)
{
	for (int i = 0; i < *ntc; i++)
		if (tc[i].src == src && tc[i].r0 == r0 && tc[i].rows == rows)
			return tc[i].v;
	const Tensor *c = src->init;
	int64_t h = c->dims[1], dims[2] = {rows, 2 * h};
	void *d;
	Value *v = new_initializer(mod->graph, is_cos ? "gqa_cos_table" : "gqa_sin_table", DT_FLOAT, 2, dims, &d);
	float *p = d;
	for (int64_t i = 0; i < rows; i++)
		for (int64_t j = 0; j < h; j++)
			p[i * 2 * h + j] = p[i * 2 * h + h + j] = (float)tensor_get_f64(c, (r0 + i) * h + j);
	if (*ntc < 16)
		tc[(*ntc)++] = (TableCache){src, r0, rows, v};
	return v;
}

static void rewrite_ms_gqa(Module *mod, MgMatch *m, TableCache *tc, int *ntc)
{
	Node *an = m->n;
	Graph *g = an->graph;
	Node *from[3] = {an, m->rq, m->rk};
	int nfrom = m->rq ? 3 : 1;
	if (m->rq) {               /* in graph order: the rotations come first */
		from[0] = m->rq;
		from[1] = m->rk;
		from[2] = an;
	}
	Node *w = node_new(g, "GroupQueryAttention", "ai.wlower", an->name ? an->name : "");
	IntAttr ia[] = {
		{"heads", m->H}, {"kv_heads", m->Hkv}, {"head_dim", m->hd}, {"causal", 1}, {"rope", m->rope},
	};
	set_int_attrs(w, ia, 5);
	node_add_attr(w, "scale", AT_FLOAT)->f = m->scale;
	set_fused_from(mod, w, from, nfrom);
	Value *cs = m->rope ? full_table(mod, tc, ntc, m->cache_c, m->r0, m->rows, true) : NULL;
	Value *sn = m->rope ? full_table(mod, tc, ntc, m->cache_s, m->r0, m->rows, false) : NULL;
	if (m->pos_input && !(m->pos = pos_graph_input(g))) {
		m->pos = graph_new_value(g, "position_ids");
		int64_t dims[2] = {m->B, m->S};
		type_set_tensor(mod->arena, &m->pos->type, DT_INT64, 2, dims);
		graph_add_input(g, m->pos);
	}
	Value *in[9] = {m->q, m->k, m->v, cs, sn, m->pk, m->pv, m->am, m->pos};
	int nin = 9;
	while (nin > 3 && !in[nin - 1])
		nin--;
	node_insert_before(an, w);
	for (int i = 0; i < nin; i++)
		node_add_input(w, in[i]);
	Value *outs[3] = {an->outputs[0], an->noutputs > 1 ? an->outputs[1] : NULL,
	                  an->noutputs > 2 ? an->outputs[2] : NULL};
	for (int i = 1; i < 3; i++)
		if (outs[i] && !outs[i]->nusers && !outs[i]->is_output)
			outs[i] = NULL;
	for (int i = 0; i < an->noutputs; i++) {
		Value *o = an->outputs[i];
		if (o && (i > 2 || !outs[i])) {
			o->in_value_info = false;
			o->type.kind = TY_NONE;
		}
	}
	node_remove(an);
	if (m->rq) {
		node_remove(m->rq);
		node_remove(m->rk);
	}
	int nout = outs[2] ? 3 : outs[1] ? 2 : 1;
	for (int i = 0; i < nout; i++)
		node_add_output(w, outs[i]);
}

int pass_fuse_ms_gqa(Module *mod, PassContext *ctx, Diag *d)
{
	(void)d;
	int changed = 0, ntc = 0;
	TableCache tc[16];
	FOR_NODES_SAFE(mod->graph, n, nx) {
		MgMatch m;
		if (!match_ms_gqa(n, ctx && ctx->fuse.position_input, &m))
			continue;
		rewrite_ms_gqa(mod, &m, tc, &ntc);
		changed++;
	}
	return fusion_done(mod, ctx, changed);
}
