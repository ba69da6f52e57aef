/* fuse_gqa.c — the Qwen2 (transformers eager) attention core →
 * ai.wlower.GroupQueryAttention (docs/OPS.md).
 *
 * Matched (B batch, T queries, P past, L = P + T, H heads, Hkv KV heads,
 * g = H / Hkv, hd head dim):
 *
 *   qh = Transpose <perm=[0,2,1,3]> (Reshape (q, _))     # [B,H,T,hd]
 *   kh = Transpose <perm=[0,2,1,3]> (Reshape (k, _))     # [B,Hkv,T,hd]; vh likewise
 *   qr = Add (Mul (qh, cos), Mul (Concat <axis=-1> (Neg (Slice (qh, hd/2, end)),
 *                                                  Slice (qh, 0, hd/2)), sin))   # RoPE; kr likewise
 *        cos/sin: constants [1,1,T,hd] (folded), or Unsqueeze (Gather (table, position_ids))
 *   ka = Concat <axis=2> (past_k, kr)                    # optional; va = Concat (past_v, vh)
 *                                                        # without past, kr and vh may be graph
 *                                                        # outputs (a prefill returning its cache):
 *                                                        # they become present_k, present_v
 *   kx = Reshape (Expand (Unsqueeze <axes=[2]> (ka), _), _)   # repeat_kv [B,H,L,hd]; absent if g = 1
 *   s  = Div (MatMul (qr, Transpose <perm=[0,1,3,2]> (kx)), c) # or Mul by 1/c, c scalar
 *   s' = Add (s, mask)        # optional: a causal constant [.., T, L], leading dims 1 (the first
 *                             # may be B), or an Expand of one; or
 *                             # pad = Where (Cast<bool> (Cast<bool> (m)), finfo.min, m) with
 *                             # m = Sub (1, Cast<float> (Expand (Unsqueeze (Unsqueeze (attention_mask))))),
 *                             # or both (transformers' causal.masked_fill(pad.bool(), finfo.min)):
 *                             # Where (Cast<bool> (Cast<bool>? (pad)), finfo.min, causal)
 *                             # or the additive form Clip (Add (causal, Mul (Sub (1, Cast<float>
 *                             # (U (U (attention_mask)))), finfo.min)), finfo.min), or the Where
 *                             # form Where (And (keep, Greater (U (U (attention_mask)), 0)), 0,
 *                             # finfo.min) (attention_mask values other than 0/1 differ there)
 *   s' = Where (keep, s, neg) # and/or (either order with the Add): keep a bool constant
 *      | Where (drop, neg, s) # [..,T,L] true exactly on and below the diagonal j <= P+i
 *                             # (drop: exactly above it), neg a scalar <= -1e9 or -inf
 *                             # (Trilu-built masks are such constants once folded)
 *   p  = Softmax <axis=-1> (s')
 *   o  = Reshape (Transpose <perm=[0,2,1,3]> (MatMul (Cast? (p), vx)), _)   # [B,T,H·hd]
 * →
 *   o, present_k?, present_v? = ai.wlower.GroupQueryAttention <heads, kv_heads, head_dim,
 *       scale, causal, rope> (q, k, v, cos, sin, past_k?, past_v?, attention_mask?, position_ids?)
 *
 * requires  shape-infer (static shapes in the pattern), fold-constants
 *           (folded RoPE rows and causal masks are initializers)
 * maintains topological order, use lists, graph inputs and outputs, types
 *           (the outputs are the replaced values)
 * breaks    nothing; mask-building nodes left dead go with dce
 *
 * Near misses left alone: a mask constant or Where condition that is not
 * exactly causal (another diagonal offset, a hole), a fill that is not
 * negative enough (> -1e9), a combined mask whose fill is not finfo.min.
 * With causal and attention_mask, a query whose visible keys are all
 * padded differs (the graph then spreads the softmax over every key; the
 * op over the visible ones): transformers' outputs for such padding
 * queries are unused.
 *
 * QDQ graphs (`wlower quantize --int8`, ONNX Runtime's quantize_static):
 * fake-quant pairs DequantizeLinear (QuantizeLinear (x, s, z), s, z) on the
 * core's RoPE products, Q·K^T operands, scores, probabilities and V hide the
 * pattern. When the plain match fails, match.h's qdq_bypass_attention
 * bypasses the pairs between the head splits and the ·V MatMul and the match
 * is tried again: on success those pairs go with the core (the op computes
 * in the target's own formats, as the vendor's attention kernel does with its
 * fixed-point scales), the pairs on q/k/v and on the output stay; on failure
 * the graph is restored exactly. Near misses: a pair with two scales (not a
 * fake quantization), a dequantized value read outside the core.
 *
 * The Softmax, ·V, head split and merge, K/V Concat and causal-mask tests
 * are match.h's, shared with fuse-whisper-attention.
 */
#include <float.h>
#include <math.h>
#include <string.h>
#include "passes.h"
#include "match.h"

typedef struct GqMatch {
	AttnCore c;
	Value *q, *k, *v, *cos, *sin, *pos, *past_k, *past_v, *am;
	int64_t B, T, P, H, Hkv, hd;
	bool causal, rope;
	double scale;
} GqMatch;

/* q/k/v head split: Transpose 0213 (Reshape (x [B,T,nh·hd])) → x. */
static Value *match_split(GqMatch *m, Value *h, int64_t nh)
{
	int64_t d[4];
	Value *x = match_head_split(&m->c.set, h, d);
	return x && d[1] == nh && d[3] == m->hd && head_proj(x, d) ? x : NULL;
}

/* Slice of the last axis of x: [lo, hi) with step 1. */
static bool slice_is(const Node *n, const Value *x, int64_t lo, int64_t hi, int64_t hd)
{
	double s, e, a = -1, st = 1;
	if (!n || n->op != OP_Slice || n->inputs[0] != x || n->ninputs < 3 || !const_scalar(n->inputs[1], &s) ||
	    !const_scalar(n->inputs[2], &e))
		return false;
	if (n->ninputs > 3 && n->inputs[3] && !const_scalar(n->inputs[3], &a))
		return false;
	if (n->ninputs > 4 && n->inputs[4] && !const_scalar(n->inputs[4], &st))
		return false;
	if ((a != -1 && a != 3) || st != 1)
		return false;
	if (e > hd)
		e = hd;
	return s == lo && e == hi;
}

/* cos/sin operand: folded rows [1,..,1,T,hd], or Unsqueeze (Gather (table, pos)). */
static bool rope_table(GqMatch *m, Value *c, Value **tab, Value **pos)
{
	int64_t d[MATCH_MAXR];
	int r = static_shape(c, d);
	if (r < 2 || d[r - 1] != m->hd || d[r - 2] != m->T)
		return false;
	for (int i = 0; i + 2 < r; i++)
		if (d[i] != 1 && !(i == 0 && d[i] == m->B))
			return false;
	if (c->init) {
		for (int i = 0; i + 2 < r; i++)
			if (d[i] != 1)
				return false;
		*tab = c;
		*pos = NULL;
		return c->init->dtype == DT_FLOAT;
	}
	Node *un = producer(c, OP_Unsqueeze);
	Node *ga = un ? producer(un->inputs[0], OP_Gather) : NULL;
	int64_t td[MATCH_MAXR];
	if (!ga || attr_int(ga, "axis", 0) != 0 || !ga->inputs[0]->init || static_shape(ga->inputs[0], td) != 2 ||
	    td[1] != m->hd || ga->inputs[0]->init->dtype != DT_FLOAT)
		return false;
	int64_t gd[MATCH_MAXR];
	if (static_shape(ga->outputs[0], gd) != 3 || r != 4 || d[1] != 1)
		return false;
	*tab = ga->inputs[0];
	*pos = ga->inputs[1];
	return true;
}

/* RoPE: y = Add (Mul (x, cos), Mul (Concat (Neg (Slice (x, h, end)), Slice (x, 0, h)), sin)). */
static Value *match_rope(GqMatch *m, Value *y, Node **nodes, int *nn)
{
	Node *add = producer(y, OP_Add);
	if (!add || add->ninputs != 2)
		return NULL;
	for (int sw = 0; sw < 2; sw++) {
		Node *m1 = producer(add->inputs[sw], OP_Mul), *m2 = producer(add->inputs[1 - sw], OP_Mul);
		if (!m1 || !m2)
			continue;
		for (int a = 0; a < 2; a++) {
			Value *x = m1->inputs[a], *cs = m1->inputs[1 - a];
			for (int b = 0; b < 2; b++) {
				Node *cat = producer(m2->inputs[b], OP_Concat);
				Value *sn = m2->inputs[1 - b];
				if (!cat || cat->ninputs != 2 || (attr_int(cat, "axis", 0) != -1 && attr_int(cat, "axis", 0) != 3))
					continue;
				Node *neg = producer(cat->inputs[0], OP_Neg);
				int64_t h = m->hd / 2;
				if (!neg || !slice_is(producer(neg->inputs[0], OP_Slice), x, h, m->hd, m->hd) ||
				    !slice_is(cat->inputs[1]->producer, x, 0, h, m->hd))
					continue;
				Value *tc, *pc, *ts, *ps;
				if (!rope_table(m, cs, &tc, &pc) || !rope_table(m, sn, &ts, &ps) || pc != ps)
					continue;
				if (m->cos && (m->cos != tc || m->sin != ts || m->pos != pc))
					return NULL;
				m->cos = tc;
				m->sin = ts;
				m->pos = pc;
				Node *ns[] = {add, m1, m2, cat, neg, neg->inputs[0]->producer, cat->inputs[1]->producer};
				for (int i = 0; i < 7; i++)
					nodes[(*nn)++] = ns[i];
				/* the table-gathering nodes stay (shared by q and k); dce drops them */
				return x;
			}
		}
	}
	return NULL;
}

/* repeat_kv: Reshape (Expand (Unsqueeze (a, [2]))) [B,H,L,hd] → a [B,Hkv,L,hd]. */
static Value *match_repeat(GqMatch *m, Value *x)
{
	int64_t d[MATCH_MAXR], ad[MATCH_MAXR];
	if (static_shape(x, d) != 4 || d[1] != m->H)
		return NULL;
	Node *rs = producer(x, OP_Reshape);
	Node *ex = rs ? producer(rs->inputs[0], OP_Expand) : NULL;
	Node *un = ex ? producer(ex->inputs[0], OP_Unsqueeze) : NULL;
	if (!un) {
		m->Hkv = m->H;
		return x;
	}
	int64_t ed[MATCH_MAXR], ud[MATCH_MAXR];
	Value *a = un->inputs[0];
	if (static_shape(a, ad) != 4 || static_shape(un->outputs[0], ud) != 5 || ud[2] != 1 ||
	    static_shape(ex->outputs[0], ed) != 5 || ed[1] != ad[1] || ed[2] * ad[1] != m->H || ed[3] != ad[2] ||
	    ed[4] != ad[3] || d[2] != ad[2] || un->outputs[0]->nusers != 1 || ex->outputs[0]->nusers != 1)
		return NULL;
	if (m->Hkv && m->Hkv != ad[1])
		return NULL;
	m->Hkv = ad[1];
	match_push(&m->c.set, rs);
	match_push(&m->c.set, ex);
	match_push(&m->c.set, un);
	return a;
}

/* transformers' expanded padding mask from attention_mask [B, L]. */
static Value *mask_padding(const GqMatch *m, const Value *mask)
{
	Node *wh = producer(mask, OP_Where);
	double c, one;
	if (!wh || !const_scalar(wh->inputs[1], &c) || c != -FLT_MAX)
		return NULL;
	Node *sub = producer(wh->inputs[2], OP_Sub);
	Node *c1 = producer(wh->inputs[0], OP_Cast);
	while (c1 && attr_int(c1, "to", 0) == DT_BOOL && c1->inputs[0] != wh->inputs[2])
		c1 = producer(c1->inputs[0], OP_Cast);
	if (!sub || !c1 || attr_int(c1, "to", 0) != DT_BOOL || c1->inputs[0] != wh->inputs[2] ||
	    !const_scalar(sub->inputs[0], &one) || one != 1.0)
		return NULL;
	Node *cf = producer(sub->inputs[1], OP_Cast);
	Node *ex = cf ? producer(cf->inputs[0], OP_Expand) : NULL;
	Node *u2 = ex ? producer(ex->inputs[0], OP_Unsqueeze) : NULL;
	Node *u1 = u2 ? producer(u2->inputs[0], OP_Unsqueeze) : NULL;
	if (!u1 || attr_int(cf, "to", 0) != DT_FLOAT)
		return NULL;
	Value *am = u1->inputs[0];
	int64_t L = m->P + m->T, ad[MATCH_MAXR], d1[MATCH_MAXR], d2[MATCH_MAXR], de[MATCH_MAXR];
	if (static_shape(am, ad) != 2 || ad[0] != m->B || ad[1] != L || static_shape(u1->outputs[0], d1) != 3 ||
	    d1[1] != 1 || d1[2] != L || static_shape(u2->outputs[0], d2) != 4 || d2[1] != 1 || d2[2] != 1 ||
	    static_shape(ex->outputs[0], de) != 4 || de[0] != m->B || de[1] != 1 || de[2] != m->T || de[3] != L)
		return NULL;
	if (am->type.elem != DT_INT64 && am->type.elem != DT_INT32)
		return NULL;
	return am;
}

/* am [B, L] (int64/int32) read through Unsqueeze (Unsqueeze (am)) → [B,1,1,L]. */
static Value *mask_unsqueezed(const GqMatch *m, const Value *x)
{
	Node *u2 = producer(x, OP_Unsqueeze);
	Node *u1 = u2 ? producer(u2->inputs[0], OP_Unsqueeze) : NULL;
	if (!u1)
		return NULL;
	Value *am = u1->inputs[0];
	int64_t L = m->P + m->T, ad[MATCH_MAXR], d2[MATCH_MAXR];
	if (static_shape(am, ad) != 2 || ad[0] != m->B || ad[1] != L || static_shape(u2->outputs[0], d2) != 4 ||
	    d2[0] != m->B || d2[1] != 1 || d2[2] != 1 || d2[3] != L ||
	    (am->type.elem != DT_INT64 && am->type.elem != DT_INT32))
		return NULL;
	return am;
}

/* Additive form: Clip (Add (causal, Mul (Sub (1, Cast<float> (U (U (am)))), finfo.min)), finfo.min). */
static Value *mask_additive(const GqMatch *m, const Value *mask)
{
	Node *clip = producer(mask, OP_Clip), *add = clip ? producer(clip->inputs[0], OP_Add) : NULL;
	double lo, c, one;
	if (!add || clip->ninputs < 2 || !const_scalar(clip->inputs[1], &lo) || lo != -FLT_MAX ||
	    (clip->ninputs > 2 && clip->inputs[2]))
		return NULL;
	for (int sw = 0; sw < 2; sw++) {
		Node *mul = producer(add->inputs[1 - sw], OP_Mul);
		if (!mask_is_causal(add->inputs[sw], CAUSAL_ADD, m->B, m->T, m->P, m->P + m->T) || !mul)
			continue;
		for (int a = 0; a < 2; a++) {
			Node *sub = producer(mul->inputs[a], OP_Sub);
			Node *cf = sub ? producer(sub->inputs[1], OP_Cast) : NULL;
			if (cf && const_scalar(mul->inputs[1 - a], &c) && c == -FLT_MAX && const_scalar(sub->inputs[0], &one) &&
			    one == 1.0 && attr_int(cf, "to", 0) == DT_FLOAT)
				return mask_unsqueezed(m, cf->inputs[0]);
		}
	}
	return NULL;
}

/* Where form: Where (And (causal keep, Greater (U (U (am)), 0)), 0, finfo.min). */
static Value *mask_where(const GqMatch *m, const Value *mask)
{
	Node *wh = producer(mask, OP_Where), *and = wh ? producer(wh->inputs[0], OP_And) : NULL;
	double zero, c, z2;
	if (!and || !const_scalar(wh->inputs[1], &zero) || zero != 0.0 || !const_scalar(wh->inputs[2], &c) ||
	    c != -FLT_MAX)
		return NULL;
	for (int sw = 0; sw < 2; sw++) {
		Node *gt = producer(and->inputs[1 - sw], OP_Greater);
		if (gt && mask_is_causal(and->inputs[sw], CAUSAL_KEEP, m->B, m->T, m->P, m->P + m->T) &&
		    const_scalar(gt->inputs[1], &z2) && z2 == 0.0)
			return mask_unsqueezed(m, gt->inputs[0]);
	}
	return NULL;
}

/* transformers' combined mask: Where (Cast<bool> (Cast<bool>? (pad)), finfo.min, causal). */
static Value *mask_combined(const GqMatch *m, const Value *mask)
{
	Node *wh = producer(mask, OP_Where);
	double c;
	if (!wh || wh->ninputs != 3 || !const_scalar(wh->inputs[1], &c) || c != -FLT_MAX ||
	    !mask_is_causal(wh->inputs[2], CAUSAL_ADD, m->B, m->T, m->P, m->P + m->T))
		return NULL;
	Node *cb = producer(wh->inputs[0], OP_Cast);
	if (!cb || attr_int(cb, "to", 0) != DT_BOOL)
		return NULL;
	Value *pad = cb->inputs[0];
	Node *c2 = producer(pad, OP_Cast);
	if (c2 && attr_int(c2, "to", 0) == DT_BOOL)
		pad = c2->inputs[0];
	return mask_padding(m, pad);
}

/* Is v a graph output or read by a node outside the match? */
static bool used_outside(const MatchSet *s, const Value *v)
{
	if (v->is_output)
		return true;
	for (int u = 0; u < v->nusers; u++)
		if (!match_contains(s, v->users[u].node))
			return true;
	return false;
}

static bool match_gqa(Node *sm, GqMatch *m)
{
	memset(m, 0, sizeof *m);
	match_init(&m->c.set, MATCH_MAXN);
	int64_t d[MATCH_MAXR];
	if (softmax_last(sm, d) != 4)
		return false;
	m->B = d[0];
	m->H = d[1];
	m->T = d[2];
	int64_t L = d[3];
	match_push(&m->c.set, sm);
	Node *mm2 = match_pv(&m->c.set, sm);
	if (!mm2)
		return false;
	/* scores: an additive mask and/or a Where mask, either order */
	Value *s = sm->inputs[0], *mask = NULL, *wcond = NULL;
	bool wkeep = false;
	Node *n;
	for (int guard = 0; guard < 2; guard++) {
		Value *sx;
		if (!wcond && (n = producer(s, OP_Where)) && (sx = where_scores(n, &wkeep))) {
			if (!sole_read(s))
				return false;
			wcond = n->inputs[0];
			match_push(&m->c.set, n);
			s = sx;
		} else if (!mask && (n = producer(s, OP_Add)) && n->ninputs == 2) {
			if (!sole_read(s))
				return false;
			bool first = producer(n->inputs[0], OP_Div) || producer(n->inputs[0], OP_Mul) ||
			             producer(n->inputs[0], OP_MatMul) || where_scores(n->inputs[0]->producer, &(bool){0});
			mask = n->inputs[first ? 1 : 0];
			match_push(&m->c.set, n);
			s = n->inputs[first ? 0 : 1];
		} else {
			break;
		}
	}
	m->scale = 1.0;
	double c;
	Value *sx;
	if ((n = producer(s, OP_Div)) && (sx = scaled_operand(n, DT_UNDEFINED, &c)) && c != 0 && isfinite(c)) {
		m->scale = 1.0 / c;
		match_push(&m->c.set, n);
		s = sx;
	} else if ((n = producer(s, OP_Mul))) {
		if (!(sx = scaled_operand(n, DT_UNDEFINED, &c)))
			return false;
		m->scale = c;
		match_push(&m->c.set, n);
		s = sx;
	}
	Node *mm1 = producer(s, OP_MatMul);
	if (!mm1)
		return false;
	match_push(&m->c.set, mm1);
	int64_t qd[MATCH_MAXR];
	if (static_shape(mm1->inputs[0], qd) != 4)
		return false;
	m->hd = qd[3];
	/* K side: Transpose 0132 (repeat_kv (Concat? (past, RoPE (split (k))))) */
	int64_t p0132[4] = {0, 1, 3, 2};
	Node *kt = producer(mm1->inputs[1], OP_Transpose);
	if (!perm_is(kt, 4, p0132))
		return false;
	match_push(&m->c.set, kt);
	Value *ka = match_repeat(m, kt->inputs[0]);
	if (!ka)
		return false;
	Value *kr = match_past(&m->c.set, ka, &m->past_k, &m->c.present_k);
	if (!kr)
		return false;
	Node *rn[16];
	int rnn = 0;
	Value *kh = match_rope(m, kr, rn, &rnn);
	Value *qh = kh ? match_rope(m, mm1->inputs[0], rn, &rnn) : mm1->inputs[0];
	if (!qh || (kh && rnn != 14))
		return false;
	m->rope = kh != NULL;
	for (int i = 0; i < rnn; i++)
		match_push(&m->c.set, rn[i]);
	if (!kh)
		kh = kr;
	if (!(m->q = match_split(m, qh, m->H)) || !(m->k = match_split(m, kh, m->Hkv)))
		return false;
	/* V side */
	Value *va = match_repeat(m, mm2->inputs[1]);
	if (!va)
		return false;
	Value *vh = match_past(&m->c.set, va, &m->past_v, &m->c.present_v);
	if (!vh || !(m->v = match_split(m, vh, m->Hkv)) || !m->past_k != !m->past_v)
		return false;
	if (!m->past_k && (used_outside(&m->c.set, kr) || used_outside(&m->c.set, vh))) {
		/* a prefill that returns its cache: the rotated keys and the values are presents */
		m->c.present_k = kr;
		m->c.present_v = vh;
	}
	if (m->past_k) {
		int64_t pd[MATCH_MAXR];
		static_shape(m->past_k, pd);
		m->P = pd[2];
		if (!type_equal(&m->past_k->type, &m->past_v->type) || pd[0] != m->B || pd[1] != m->Hkv || pd[3] != m->hd)
			return false;
	}
	if (m->P + m->T != L)
		return false;
	if (mask) {
		if (mask_is_causal(mask, CAUSAL_ADD, m->B, m->T, m->P, L))
			m->causal = true;
		else if ((m->am = mask_combined(m, mask)) || (m->am = mask_additive(m, mask)) ||
		         (m->am = mask_where(m, mask)))
			m->causal = true;
		else if (!(m->am = mask_padding(m, mask)))
			return false;
	}
	if (wcond) {
		if (!mask_is_causal(wcond, wkeep ? CAUSAL_KEEP : CAUSAL_DROP, m->B, m->T, m->P, L))
			return false;
		m->causal = true;
	}
	/* head merge */
	int64_t want[3] = {m->B, m->T, m->H * m->hd};
	if (!(m->c.out = match_head_merge(&m->c.set, mm2->outputs[0], want)))
		return false;
	m->c.last = m->c.out->producer;
	return !match_full(&m->c.set);
}

static void rewrite_gqa(Module *mod, GqMatch *m, int *counter)
{
	Node *ordered[MATCH_MAXN];
	int no;
	const char *name = attn_name(mod, &m->c, "GroupQueryAttention", ordered, &no, counter);
	Node *n = node_new(m->c.last->graph, "GroupQueryAttention", "ai.wlower", name);
	IntAttr ia[] = {
		{"heads", m->H}, {"kv_heads", m->Hkv}, {"head_dim", m->hd}, {"causal", m->causal}, {"rope", m->rope},
	};
	set_int_attrs(n, ia, 5);
	node_add_attr(n, "scale", AT_FLOAT)->f = (float)m->scale;
	Value *in[9] = {m->q, m->k, m->v, m->cos, m->sin, m->past_k, m->past_v, m->am, m->pos};
	int nin = 9;
	while (nin > 3 && !in[nin - 1])
		nin--;
	attn_replace(mod, &m->c, n, ordered, no, in, nin);
}

int pass_fuse_gqa(Module *mod, PassContext *ctx, Diag *d)
{
	(void)d;
	int changed = 0, counter = 0;
	FOR_NODES_SAFE(mod->graph, n, nx) {
		if (n->op != OP_Softmax)
			continue;
		GqMatch m;
		QdqBypass qb = {0};
		if (!match_gqa(n, &m) || !attn_is_private(&m.c)) {
			/* a QDQ graph: the core's fake-quant pairs bypassed, then matched again */
			if (!qdq_bypass_attention(n, &qb))
				continue;
			if (!match_gqa(n, &m) || !attn_is_private(&m.c)) {
				qdq_bypass_undo(&qb);
				continue;
			}
			qdq_bypass_commit(&qb, &m.c.set);
		}
		nx = m.c.last->next;
		rewrite_gqa(mod, &m, &counter);
		changed++;
	}
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
