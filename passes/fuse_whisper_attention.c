/* fuse_whisper_attention.c — the Whisper attention core between the q/k/v
 * projections and out_proj → one ai.wlower.WhisperAttention (docs/OPS.md).
 *
 * Matched (transformers' eager form, --scale-style q; B batch, T queries,
 * S new keys, P past keys, L = P + S, H heads, hd head dim, D = H·hd):
 *
 *   qs = Mul (q, c)                       # c scalar, optional (q style)
 *   q4 = Reshape (qs, _)                  # [B,T,D] -> [B,T,H,hd]
 *   qh = Transpose <perm=[0,2,1,3]> (q4)  # [B,H,T,hd]
 *   q3 = Reshape (qh, _)                  # [B·H,T,hd]   (3-D bmm form only)
 *   kh = Transpose <perm=[0,2,1,3]> (Reshape (k, _))   # or Concat <axis=2> (past_k, that)
 *                                                      # or k itself when [B,H,S,hd] (kv_layout "bhsd")
 *   kt = Transpose <perm=[0,2,1]> (Reshape (kh, _))    # 3-D form; 4-D: perm [0,1,3,2] of kh,
 *                                                      # openai: perm [0,2,3,1] of Reshape (k, _)
 *   kt' = Mul (kt, c)                     # optional (qk style: q and k each · hd^-0.25)
 *   s  = MatMul (q3, kt')
 *   s' = Div (s, c) | Mul (s, c)          # optional
 *   s''= Add (Reshape (s'), mask)         # optional; mask a constant [T,L] / [1,1,T,L]
 *                                         # (or Expand of one), 0 on and below the
 *                                         # diagonal j <= P+i, <= -1e9 or -inf above;
 *      | Where (keep, s', neg)            # or keep a bool constant true on and below
 *      | Where (drop, neg, s')            # the diagonal (drop: above), neg <= -1e9
 *                                         # (Trilu masks are constants once folded)
 *   p  = Softmax <axis=-1> (Reshape (s''))  # Reshapes between 3-D and 4-D views optional
 *   o3 = MatMul (Cast? (p), v3)           # v3 like kh (3-D form: Reshape of it)
 *   o  = Reshape (Transpose <perm=[0,2,1,3]> (Reshape (o3, _)), _)   # [B,T,D]
 * →
 *   o, present_k?, present_v? = ai.wlower.WhisperAttention <embed, heads, q_len,
 *       kv_len, causal, scale, kv_layout> (q, k, v, past_k?, past_v?)
 *
 * Reshapes are recognised by the types of their input and output (shape
 * inference has run), never by the target tensor, so Optimum's Shape/Gather/
 * Concat targets match too. A Softmax over any axis but the last, a mask
 * that is not exactly causal, a scale that is not a scalar constant, or an
 * intermediate value read outside the pattern leaves the pattern alone.
 * The present outputs are the Concat results when something else (a graph
 * output) reads them. The Softmax, ·V, head split and merge, K/V Concat and
 * causal-mask tests are match.h's, shared with fuse-gqa.
 *
 * requires  shape-infer (every value in the pattern has a known static
 *           shape), canonicalize (constants are initializers)
 * maintains topological order, use lists, graph inputs and outputs, types
 *           (the fused node's outputs are the replaced values themselves)
 * breaks    nothing; leaves dead mask nodes for dce
 */
#include <math.h>
#include <string.h>
#include "passes.h"
#include "match.h"

enum { MAXN = 32 };

typedef struct WaMatch {
	AttnCore c;
	Value *q, *k, *v, *past_k, *past_v;
	int64_t B, T, S, P, H, hd;
	bool causal, bhsd;
	double scale;
} WaMatch;

/* ---------------------------------------------------------------- helpers */

/* For Mul (x, c), Mul (c, x) or Div (x, c) with c a finite nonzero float
 * scalar constant: returns x and sets *c; else NULL. */
static Value *scaled(const Node *n, double *c)
{
	Value *x = scaled_operand(n, DT_FLOAT, c);
	return x && isfinite(*c) && *c != 0 ? x : NULL;
}

/* [Mul (x, c)] read only here → x, with c folded into the scale (q and k
 * scaled on their way to QK^T). */
static Value *peel_scale(WaMatch *m, Value *v)
{
	double c;
	Node *n = producer(v, OP_Mul);
	Value *x = n && v->nusers == 1 ? scaled(n, &c) : NULL;
	if (!x)
		return v;
	m->scale *= c;
	match_push(&m->c.set, n);
	return x;
}

/* An initializer, or an Expand of one (torch's expanded causal mask). */
static bool const_like(const Value *v)
{
	Node *ex = producer(v, OP_Expand);
	return v && (v->init || (ex && ex->inputs[0] && ex->inputs[0]->init));
}

/* ---------------------------------------------------------------- match */

/* kh: the [B,H,L,hd] keys or values. Fills k/v input, past and layout. */
static bool match_kv4(WaMatch *m, Value *kh, Value **x, Value **past, Value **present, bool *bhsd)
{
	int64_t d[MATCH_MAXR], pd[MATCH_MAXR];
	if (static_shape(kh, d) != 4 || d[0] != m->B || d[1] != m->H || d[3] != m->hd)
		return false;
	Value *nw = match_past(&m->c.set, kh, past, present);
	if (!nw)
		return false;
	if (*past && (static_shape(*past, pd) != 4 || pd[0] != m->B || pd[1] != m->H || pd[3] != m->hd))
		return false;
	int mark = m->c.set.nn;
	int64_t hd[4];
	Value *a = nw->nusers == 1 ? match_head_split(&m->c.set, nw, hd) : NULL;
	if (a && head_proj(a, hd)) {
		*x = a;
		*bhsd = false;
	} else {
		match_truncate(&m->c.set, mark);     /* k itself is [B,H,S,hd] */
		*x = nw;
		*bhsd = true;
	}
	return true;
}

/* Peels a Reshape between the 3-D [B·H, r, c] and 4-D [B, H, r, c] views. */
static Value *peel_view(WaMatch *m, Value *v, bool back)
{
	Node *n = back ? producer(v, OP_Reshape) : sole_user(v, OP_Reshape);
	if (!n)
		return v;
	Value *a = n->inputs[0], *b = n->outputs[0];
	int64_t da[MATCH_MAXR], db[MATCH_MAXR];
	int ra = static_shape(a, da), rb = static_shape(b, db);
	if (ra < 3 || rb < 3 || da[ra - 1] != db[rb - 1] || da[ra - 2] != db[rb - 2])
		return v;
	int64_t pa = 1, pb = 1;
	for (int i = 0; i < ra - 2; i++)
		pa *= da[i];
	for (int i = 0; i < rb - 2; i++)
		pb *= db[i];
	if (pb != pa || (m->H && pa != m->B * m->H))   /* B, H unknown while walking the scores */
		return v;
	if (back && !sole_read(b))
		return v;
	match_push(&m->c.set, n);
	return back ? a : b;
}

static bool match_wa(Node *sm, WaMatch *m)
{
	memset(m, 0, sizeof *m);
	match_init(&m->c.set, MAXN);
	m->scale = 1.0;
	int64_t sd[MATCH_MAXR];
	if (softmax_last(sm, sd) < 3)
		return false;
	match_push(&m->c.set, sm);
	/* forward: ·V (Casts only from a float Softmax) */
	Node *mm2 = match_pv(&m->c.set, sm);
	if (!mm2 || (mm2->inputs[0] != sm->outputs[0] && sm->outputs[0]->type.elem != DT_FLOAT))
		return false;
	/* backward from the Softmax: views, mask, scale, QK^T */
	Value *s = sm->inputs[0];
	Node *mm1 = NULL;
	Value *mask = NULL;
	Node *where = NULL;
	bool where_keep = false;
	for (int guard = 0; guard < 6 && !mm1; guard++) {
		if (!sole_read(s))
			return false;
		Node *n = s->producer;
		if (!n)
			return false;
		double c;
		Value *sx;
		if (n->op == OP_MatMul) {
			mm1 = n;
		} else if (n->op == OP_Reshape) {
			Value *a = peel_view(m, s, true);
			if (a == s)
				return false;
			s = a;
		} else if (n->op == OP_Where && !mask && !where) {
			if (!(sx = where_scores(n, &where_keep)))
				return false;
			where = n;
			match_push(&m->c.set, n);
			s = sx;
		} else if (n->op == OP_Add && !mask) {
			Value *x = n->inputs[0], *o = n->inputs[1];
			if (!const_like(o)) {
				Value *t = x; x = o; o = t;
			}
			if (!const_like(o) || const_like(x))
				return false;
			mask = o;
			match_push(&m->c.set, n);
			s = x;
		} else if ((n->op == OP_Div || n->op == OP_Mul) && (sx = scaled(n, &c)) && c > 0) {
			/* before or after the mask: a positive scale keeps masked scores masked */
			m->scale *= n->op == OP_Div ? 1.0 / c : c;
			match_push(&m->c.set, n);
			s = sx;
		} else {
			return false;
		}
	}
	if (!mm1)
		return false;
	match_push(&m->c.set, mm1);
	/* Q: [Reshape 3-D] <- [Mul] <- Transpose 0213 <- Reshape <- [Mul] <- q */
	Value *qv = peel_scale(m, mm1->inputs[0]);
	int64_t qd[MATCH_MAXR];
	if (static_shape(qv, qd) == 3) {   /* 3-D bmm form */
		Node *r3 = producer(qv, OP_Reshape);
		if (!r3 || qv->nusers != 1)
			return false;
		match_push(&m->c.set, r3);
		qv = r3->inputs[0];
	}
	qv = peel_scale(m, qv);
	int64_t hq[4];
	if (qv->nusers != 1 || !(qv = match_head_split(&m->c.set, qv, hq)))
		return false;
	m->B = hq[0]; m->H = hq[1]; m->T = hq[2]; m->hd = hq[3];
	qv = peel_scale(m, qv);
	if (!head_proj(qv, hq))
		return false;
	m->q = qv;
	/* K: [Mul] <- Transpose (3-D 021 of Reshape(kh) | 4-D 0132 of kh | 0231 of Reshape(k)) */
	Value *kv = peel_scale(m, mm1->inputs[1]);
	Node *kt = producer(kv, OP_Transpose);
	if (!kt || kv->nusers != 1)
		return false;
	match_push(&m->c.set, kt);
	int64_t p021[3] = {0, 2, 1}, p0132[4] = {0, 1, 3, 2}, p0231[4] = {0, 2, 3, 1};
	Value *kh = NULL;
	bool kb = false;
	if (perm_is(kt, 3, p021)) {
		Value *a = peel_view(m, kt->inputs[0], true);
		if (a == kt->inputs[0])
			return false;
		kh = a;
	} else if (perm_is(kt, 4, p0132)) {
		kh = kt->inputs[0];
	} else if (perm_is(kt, 4, p0231)) {
		Node *kr = producer(kt->inputs[0], OP_Reshape);
		int64_t want[MATCH_MAXR];
		if (!kr || kt->inputs[0]->nusers != 1 || static_shape(kr->inputs[0], want) != 3 || want[0] != m->B ||
		    want[2] != m->H * m->hd)
			return false;
		match_push(&m->c.set, kr);
		m->k = kr->inputs[0];
		m->S = want[1];
	} else {
		return false;
	}
	if (kh) {
		if (!match_kv4(m, kh, &m->k, &m->past_k, &m->c.present_k, &kb))
			return false;
	}
	/* V */
	Value *vv = mm2->inputs[1];
	if (static_shape(vv, qd) == 3) {
		Value *a = peel_view(m, vv, true);
		if (a == vv)
			return false;
		vv = a;
	}
	bool vb = false;
	if (!match_kv4(m, vv, &m->v, &m->past_v, &m->c.present_v, &vb))
		return false;
	if (!kh) {   /* openai form: k from a [B,S,D] projection, no past */
		if (m->past_v || vb)
			return false;
		kb = false;
	}
	if (kb != vb || !m->past_k != !m->past_v)
		return false;
	m->bhsd = kb;
	int64_t kd[MATCH_MAXR];
	int kr = static_shape(m->k, kd);
	m->S = kb ? kd[2] : kd[1];
	if (kr != (kb ? 4 : 3) || !type_equal(&m->k->type, &m->v->type))
		return false;
	if (m->past_k) {
		int64_t pd[MATCH_MAXR];
		static_shape(m->past_k, pd);
		m->P = pd[2];
		if (!type_equal(&m->past_k->type, &m->past_v->type))
			return false;
	}
	/* mask: exactly causal, additive or Where */
	int64_t L = m->P + m->S;
	if (mask && where)
		return false;
	if (mask && !mask_is_causal(mask, CAUSAL_ADD, m->B, m->T, m->P, L))
		return false;
	if (where && !mask_is_causal(where->inputs[0], where_keep ? CAUSAL_KEEP : CAUSAL_DROP, m->B, m->T, m->P, L))
		return false;
	m->causal = mask || where;
	/* head merge: [Reshape 4-D] -> Transpose 0213 -> Reshape [B,T,D] */
	Value *o = mm2->outputs[0];
	if (static_shape(o, qd) == 3)
		o = peel_view(m, o, false);
	int64_t want_q[3] = {m->B, m->T, m->H * m->hd};
	if (!(m->c.out = match_head_merge(&m->c.set, o, want_q)))
		return false;
	m->c.last = m->c.out->producer;
	return !match_full(&m->c.set);
}

/* ---------------------------------------------------------------- rewrite */

static void rewrite_wa(Module *mod, WaMatch *m, int *counter)
{
	Node *ordered[MATCH_MAXN];
	int no;
	const char *name = attn_name(mod, &m->c, "WhisperAttention", ordered, &no, counter);
	WaAttrs wa = {.embed = m->H * m->hd, .heads = m->H, .q_len = m->T, .kv_len = m->P + m->S,
	              .causal = m->causal, .scale = m->scale, .kv_layout = m->bhsd ? "bhsd" : "bsd"};
	Node *n = new_whisper_attention(mod, m->c.last->graph, name, &wa);
	Value *in[5] = {m->q, m->k, m->v, m->past_k, m->past_v};
	if (!attn_replace(mod, &m->c, n, ordered, no, in, m->past_k ? 5 : 3) && m->c.present_k) {
		m->c.present_k->in_value_info = m->c.present_v->in_value_info = false;
		m->c.present_k->type.kind = m->c.present_v->type.kind = TY_NONE;
	}
}

int pass_fuse_whisper_attention(Module *mod, PassContext *ctx, Diag *d)
{
	(void)d;
	int changed = 0, counter = 0;
	FOR_NODES_SAFE(mod->graph, n, nx) {
		if (n->op != OP_Softmax)
			continue;
		WaMatch m;
		if (!match_wa(n, &m) || !attn_is_private(&m.c))
			continue;
		nx = m.c.last->next;
		rewrite_wa(mod, &m, &counter);
		changed++;
	}
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
