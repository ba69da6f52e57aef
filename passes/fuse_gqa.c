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
 *   kx = Reshape (Expand (Unsqueeze <axes=[2]> (ka), _), _)   # repeat_kv [B,H,L,hd]; absent if g = 1
 *   s  = Div (MatMul (qr, Transpose <perm=[0,1,3,2]> (kx)), c) # or Mul by 1/c, c scalar
 *   s' = Add (s, mask)        # optional: a causal constant [1,1,T,L] (or Expand of one), or
 *                             # pad = Where (Cast<bool> (Cast<bool> (m)), finfo.min, m) with
 *                             # m = Sub (1, Cast<float> (Expand (Unsqueeze (Unsqueeze (attention_mask))))),
 *                             # or both (transformers' causal.masked_fill(pad.bool(), finfo.min)):
 *                             # Where (Cast<bool> (Cast<bool>? (pad)), finfo.min, causal)
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
 */
#include <float.h>
#include <math.h>
#include <string.h>
#include "passes.h"
#include "match.h"

enum { MAXN = 48, MAXR = 6 };

typedef struct GqMatch {
	Node *nodes[MAXN];
	int nn;
	Value *q, *k, *v, *cos, *sin, *pos, *past_k, *past_v, *present_k, *present_v, *am, *out;
	int64_t B, T, P, H, Hkv, hd;
	bool causal, rope;
	double scale;
	Node *last;
} GqMatch;

static int shape(const Value *v, int64_t *d)
{
	if (!v || !type_shape_known(&v->type) || v->type.rank > MAXR)
		return -1;
	for (int i = 0; i < v->type.rank; i++)
		d[i] = v->type.dims[i].value;
	return v->type.rank;
}

static bool perm_is(const Node *n, int r, const int64_t *p)
{
	const int64_t *got;
	if (!n || n->op != OP_Transpose || attr_ints(n, "perm", &got) != r)
		return false;
	for (int i = 0; i < r; i++)
		if (got[i] != p[i])
			return false;
	return true;
}

static Node *prod(const Value *v, Op op)
{
	return v && v->producer && v->producer->op == op ? v->producer : NULL;
}

static Node *sole_user(const Value *v, Op op)
{
	if (!v || v->nusers != 1 || v->is_output)
		return NULL;
	Node *u = v->users[0].node;
	return u->op == op ? u : NULL;
}

static void push(GqMatch *m, Node *n)
{
	for (int i = 0; i < m->nn && i < MAXN; i++)
		if (m->nodes[i] == n)
			return;
	if (m->nn < MAXN)
		m->nodes[m->nn++] = n;
	else
		m->nn = MAXN + 1;
}

static bool const_scalar(const Value *v, double *c)
{
	if (!v || !v->init || !v->init->data || tensor_numel(v->init) != 1 || v->init->dtype == DT_STRING)
		return false;
	*c = tensor_get_f64(v->init, 0);
	return true;
}

/* q/k/v head split: Transpose 0213 (Reshape (x [B,T,n·hd])) → x. */
static Value *match_split(GqMatch *m, Value *h, int64_t nh)
{
	int64_t p0213[4] = {0, 2, 1, 3}, d[MAXR], xd[MAXR];
	Node *tr = prod(h, OP_Transpose);
	if (!perm_is(tr, 4, p0213) || shape(h, d) != 4 || d[1] != nh || d[3] != m->hd)
		return NULL;
	Node *rs = prod(tr->inputs[0], OP_Reshape);
	if (!rs || tr->inputs[0]->nusers != 1 || shape(rs->inputs[0], xd) != 3 || xd[0] != d[0] ||
	    xd[1] != d[2] || xd[2] != nh * m->hd)
		return NULL;
	push(m, tr);
	push(m, rs);
	return rs->inputs[0];
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
	int64_t d[MAXR];
	int r = shape(c, d);
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
	Node *un = prod(c, OP_Unsqueeze);
	Node *ga = un ? prod(un->inputs[0], OP_Gather) : NULL;
	int64_t td[MAXR];
	if (!ga || attr_int(ga, "axis", 0) != 0 || !ga->inputs[0]->init || shape(ga->inputs[0], td) != 2 ||
	    td[1] != m->hd || ga->inputs[0]->init->dtype != DT_FLOAT)
		return false;
	int64_t gd[MAXR];
	if (shape(ga->outputs[0], gd) != 3 || r != 4 || d[1] != 1)
		return false;
	*tab = ga->inputs[0];
	*pos = ga->inputs[1];
	return true;
}

/* RoPE: y = Add (Mul (x, cos), Mul (Concat (Neg (Slice (x, h, end)), Slice (x, 0, h)), sin)). */
static Value *match_rope(GqMatch *m, Value *y, Node **nodes, int *nn)
{
	Node *add = prod(y, OP_Add);
	if (!add || add->ninputs != 2)
		return NULL;
	for (int sw = 0; sw < 2; sw++) {
		Node *m1 = prod(add->inputs[sw], OP_Mul), *m2 = prod(add->inputs[1 - sw], OP_Mul);
		if (!m1 || !m2)
			continue;
		for (int a = 0; a < 2; a++) {
			Value *x = m1->inputs[a], *cs = m1->inputs[1 - a];
			for (int b = 0; b < 2; b++) {
				Node *cat = prod(m2->inputs[b], OP_Concat);
				Value *sn = m2->inputs[1 - b];
				if (!cat || cat->ninputs != 2 || (attr_int(cat, "axis", 0) != -1 && attr_int(cat, "axis", 0) != 3))
					continue;
				Node *neg = prod(cat->inputs[0], OP_Neg);
				int64_t h = m->hd / 2;
				if (!neg || !slice_is(prod(neg->inputs[0], OP_Slice), x, h, m->hd, m->hd) ||
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
	int64_t d[MAXR], ad[MAXR];
	if (shape(x, d) != 4 || d[1] != m->H)
		return NULL;
	Node *rs = prod(x, OP_Reshape);
	Node *ex = rs ? prod(rs->inputs[0], OP_Expand) : NULL;
	Node *un = ex ? prod(ex->inputs[0], OP_Unsqueeze) : NULL;
	if (!un) {
		m->Hkv = m->H;
		return x;
	}
	int64_t ed[MAXR], ud[MAXR];
	Value *a = un->inputs[0];
	if (shape(a, ad) != 4 || shape(un->outputs[0], ud) != 5 || ud[2] != 1 || shape(ex->outputs[0], ed) != 5 ||
	    ed[1] != ad[1] || ed[2] * ad[1] != m->H || ed[3] != ad[2] || ed[4] != ad[3] || d[2] != ad[2] ||
	    un->outputs[0]->nusers != 1 || ex->outputs[0]->nusers != 1)
		return NULL;
	if (m->Hkv && m->Hkv != ad[1])
		return NULL;
	m->Hkv = ad[1];
	push(m, rs);
	push(m, ex);
	push(m, un);
	return a;
}

/* ka: Concat (past, new) along axis 2, or new. Returns new. */
static Value *match_past(GqMatch *m, Value *ka, Value **past, Value **present)
{
	Node *cat = prod(ka, OP_Concat);
	*past = *present = NULL;
	if (!cat || cat->ninputs != 2 || attr_int(cat, "axis", 0) != 2)
		return ka;
	int64_t pd[MAXR];
	if (shape(cat->inputs[0], pd) != 4)
		return NULL;
	push(m, cat);
	*past = cat->inputs[0];
	*present = ka;
	return cat->inputs[1];
}

static bool mask_causal(const GqMatch *m, const Value *mask)
{
	const Value *c = mask;
	Node *ex = prod(mask, OP_Expand);
	if (ex)
		c = ex->inputs[0];
	if (!c || !c->init || c->init->dtype != DT_FLOAT || !c->init->data)
		return false;
	const Tensor *t = c->init;
	int64_t L = m->P + m->T, od[MAXR];
	int r = shape(mask, od);     /* [B|1, 1, T, L], or fewer leading dims ([T, L] from a Trilu) */
	if (r < 2 || od[r - 2] != m->T || od[r - 1] != L)
		return false;
	for (int i = 0; i + 2 < r; i++)
		if (od[i] != 1 && !(i == 0 && r == 4 && od[i] == m->B))
			return false;
	if (t->ndim < 2 || t->dims[t->ndim - 2] != m->T || t->dims[t->ndim - 1] != L)
		return false;
	for (int i = 0; i + 2 < t->ndim; i++)
		if (t->dims[i] != 1)
			return false;
	for (int64_t i = 0; i < m->T; i++)
		for (int64_t j = 0; j < L; j++) {
			double x = tensor_get_f64(t, i * L + j);
			if (j <= m->P + i ? x != 0.0 : !(x <= -1e9))
				return false;
		}
	return true;
}

/* transformers' expanded padding mask from attention_mask [B, L]. */
static Value *mask_padding(const GqMatch *m, const Value *mask)
{
	Node *wh = prod(mask, OP_Where);
	double c, one;
	if (!wh || !const_scalar(wh->inputs[1], &c) || c != -FLT_MAX)
		return NULL;
	Node *sub = prod(wh->inputs[2], OP_Sub);
	Node *c1 = prod(wh->inputs[0], OP_Cast);
	while (c1 && attr_int(c1, "to", 0) == DT_BOOL && c1->inputs[0] != wh->inputs[2])
		c1 = prod(c1->inputs[0], OP_Cast);
	if (!sub || !c1 || attr_int(c1, "to", 0) != DT_BOOL || c1->inputs[0] != wh->inputs[2] ||
	    !const_scalar(sub->inputs[0], &one) || one != 1.0)
		return NULL;
	Node *cf = prod(sub->inputs[1], OP_Cast);
	Node *ex = cf ? prod(cf->inputs[0], OP_Expand) : NULL;
	Node *u2 = ex ? prod(ex->inputs[0], OP_Unsqueeze) : NULL;
	Node *u1 = u2 ? prod(u2->inputs[0], OP_Unsqueeze) : NULL;
	if (!u1 || attr_int(cf, "to", 0) != DT_FLOAT)
		return NULL;
	Value *am = u1->inputs[0];
	int64_t L = m->P + m->T, ad[MAXR], d1[MAXR], d2[MAXR], de[MAXR];
	if (shape(am, ad) != 2 || ad[0] != m->B || ad[1] != L || shape(u1->outputs[0], d1) != 3 || d1[1] != 1 ||
	    d1[2] != L || shape(u2->outputs[0], d2) != 4 || d2[1] != 1 || d2[2] != 1 || shape(ex->outputs[0], de) != 4 ||
	    de[0] != m->B || de[1] != 1 || de[2] != m->T || de[3] != L)
		return NULL;
	if (am->type.elem != DT_INT64 && am->type.elem != DT_INT32)
		return NULL;
	return am;
}

/* Where form of a causal mask: a bool constant [.., T, L] (leading dims 1)
 * true exactly on and below the diagonal j <= P+i (keep), or exactly above
 * it (!keep: it selects the negative fill). */
static bool where_causal(const GqMatch *m, const Value *cond, bool keep)
{
	const Tensor *t = cond ? cond->init : NULL;
	int64_t L = m->P + m->T;
	if (!t || t->dtype != DT_BOOL || !t->data || t->ndim < 2 || t->dims[t->ndim - 2] != m->T ||
	    t->dims[t->ndim - 1] != L)
		return false;
	for (int i = 0; i + 2 < t->ndim; i++)
		if (t->dims[i] != 1)
			return false;
	for (int64_t i = 0; i < m->T; i++)
		for (int64_t j = 0; j < L; j++)
			if ((tensor_get_i64(t, i * L + j) != 0) != ((j <= m->P + i) == keep))
				return false;
	return true;
}

/* Where (keep, s, neg) or Where (drop, neg, s) on the scores: returns s
 * (NULL if n is not of that form). */
static Value *where_scores(const Node *n, bool *keep)
{
	if (!n || n->op != OP_Where || n->ninputs != 3 || !n->inputs[0] || !n->inputs[1] || !n->inputs[2] ||
	    !n->inputs[0]->init)
		return NULL;
	int si = n->inputs[1]->init ? 2 : 1;
	double neg;
	if (n->inputs[si]->init || !const_scalar(n->inputs[3 - si], &neg) || !(neg <= -1e9))
		return NULL;
	*keep = si == 1;
	return n->inputs[si];
}

/* transformers' combined mask: Where (Cast<bool> (Cast<bool>? (pad)), finfo.min, causal). */
static Value *mask_combined(const GqMatch *m, const Value *mask)
{
	Node *wh = prod(mask, OP_Where);
	double c;
	if (!wh || wh->ninputs != 3 || !const_scalar(wh->inputs[1], &c) || c != -FLT_MAX ||
	    !mask_causal(m, wh->inputs[2]))
		return NULL;
	Node *cb = prod(wh->inputs[0], OP_Cast);
	if (!cb || attr_int(cb, "to", 0) != DT_BOOL)
		return NULL;
	Value *pad = cb->inputs[0];
	Node *c2 = prod(pad, OP_Cast);
	if (c2 && attr_int(c2, "to", 0) == DT_BOOL)
		pad = c2->inputs[0];
	return mask_padding(m, pad);
}

static bool match_gqa(Node *sm, GqMatch *m)
{
	memset(m, 0, sizeof *m);
	int64_t d[MAXR];
	if (shape(sm->outputs[0], d) != 4 || sm->ninputs != 1)
		return false;
	int64_t ax = attr_int(sm, "axis", -1);
	if (ax != -1 && ax != 3)
		return false;
	m->B = d[0];
	m->H = d[1];
	m->T = d[2];
	int64_t L = d[3];
	push(m, sm);
	Value *p = sm->outputs[0];
	while (p->nusers == 1 && !p->is_output && p->users[0].node->op == OP_Cast &&
	       attr_int(p->users[0].node, "to", 0) == DT_FLOAT) {
		push(m, p->users[0].node);
		p = p->users[0].node->outputs[0];
	}
	Node *mm2 = sole_user(p, OP_MatMul);
	if (!mm2 || mm2->inputs[0] != p)
		return false;
	push(m, mm2);
	/* scores: an additive mask and/or a Where mask, either order */
	Value *s = sm->inputs[0], *mask = NULL, *wcond = NULL;
	bool wkeep = false;
	Node *n;
	for (int guard = 0; guard < 2; guard++) {
		Value *sx;
		if (!wcond && (n = prod(s, OP_Where)) && (sx = where_scores(n, &wkeep))) {
			if (s->nusers != 1 || s->is_output)
				return false;
			wcond = n->inputs[0];
			push(m, n);
			s = sx;
		} else if (!mask && (n = prod(s, OP_Add)) && n->ninputs == 2) {
			if (s->nusers != 1 || s->is_output)
				return false;
			bool first = prod(n->inputs[0], OP_Div) || prod(n->inputs[0], OP_Mul) ||
			             prod(n->inputs[0], OP_MatMul) || where_scores(n->inputs[0]->producer, &(bool){0});
			mask = n->inputs[first ? 1 : 0];
			push(m, n);
			s = n->inputs[first ? 0 : 1];
		} else {
			break;
		}
	}
	m->scale = 1.0;
	double c;
	if ((n = prod(s, OP_Div)) && const_scalar(n->inputs[1], &c) && c != 0 && isfinite(c)) {
		m->scale = 1.0 / c;
		push(m, n);
		s = n->inputs[0];
	} else if ((n = prod(s, OP_Mul)) && n->ninputs == 2) {
		int ci = const_scalar(n->inputs[1], &c) ? 1 : const_scalar(n->inputs[0], &c) ? 0 : -1;
		if (ci < 0)
			return false;
		m->scale = c;
		push(m, n);
		s = n->inputs[1 - ci];
	}
	Node *mm1 = prod(s, OP_MatMul);
	if (!mm1)
		return false;
	push(m, mm1);
	int64_t qd[MAXR];
	if (shape(mm1->inputs[0], qd) != 4)
		return false;
	m->hd = qd[3];
	/* K side: Transpose 0132 (repeat_kv (Concat? (past, RoPE (split (k))))) */
	int64_t p0132[4] = {0, 1, 3, 2};
	Node *kt = prod(mm1->inputs[1], OP_Transpose);
	if (!perm_is(kt, 4, p0132))
		return false;
	push(m, kt);
	Value *ka = match_repeat(m, kt->inputs[0]);
	if (!ka)
		return false;
	Value *kr = match_past(m, ka, &m->past_k, &m->present_k);
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
		push(m, rn[i]);
	if (!kh)
		kh = kr;
	if (!(m->q = match_split(m, qh, m->H)) || !(m->k = match_split(m, kh, m->Hkv)))
		return false;
	/* V side */
	Value *va = match_repeat(m, mm2->inputs[1]);
	if (!va)
		return false;
	Value *vh = match_past(m, va, &m->past_v, &m->present_v);
	if (!vh || !(m->v = match_split(m, vh, m->Hkv)) || !m->past_k != !m->past_v)
		return false;
	if (m->past_k) {
		int64_t pd[MAXR];
		shape(m->past_k, pd);
		m->P = pd[2];
		if (!type_equal(&m->past_k->type, &m->past_v->type) || pd[0] != m->B || pd[1] != m->Hkv || pd[3] != m->hd)
			return false;
	}
	if (m->P + m->T != L)
		return false;
	if (mask) {
		if (mask_causal(m, mask))
			m->causal = true;
		else if ((m->am = mask_combined(m, mask)))
			m->causal = true;
		else if (!(m->am = mask_padding(m, mask)))
			return false;
	}
	if (wcond) {
		if (!where_causal(m, wcond, wkeep))
			return false;
		m->causal = true;
	}
	/* head merge */
	int64_t p0213[4] = {0, 2, 1, 3}, od[MAXR];
	Node *ot = sole_user(mm2->outputs[0], OP_Transpose);
	if (!perm_is(ot, 4, p0213))
		return false;
	push(m, ot);
	Node *orr = sole_user(ot->outputs[0], OP_Reshape);
	if (!orr || shape(orr->outputs[0], od) != 3 || od[0] != m->B || od[1] != m->T || od[2] != m->H * m->hd)
		return false;
	push(m, orr);
	m->out = orr->outputs[0];
	m->last = orr;
	return m->nn <= MAXN;
}

static bool in_set(const GqMatch *m, const Node *n)
{
	return node_in(m->nodes, m->nn, n);
}

static bool check_private(const GqMatch *m)
{
	const Value *late[2] = {m->present_k, m->present_v};
	return m->nn <= MAXN && match_is_private(m->nodes, m->nn, m->last, m->out, late, 2);
}

static void rewrite_gqa(Module *mod, GqMatch *m, int *counter)
{
	Graph *g = m->last->graph;
	Node *ordered[MAXN] = {0};
	int no = 0;
	FOR_NODES(g, x)
		if (in_set(m, x))
			ordered[no++] = x;
	const char *name = fused_node_name(mod, ordered, no, "core", "GroupQueryAttention", counter);
	Node *n = node_new(g, "GroupQueryAttention", "ai.wlower", name);
	struct { const char *k; int64_t v; } ia[] = {
		{"heads", m->H}, {"kv_heads", m->Hkv}, {"head_dim", m->hd}, {"causal", m->causal}, {"rope", m->rope},
	};
	for (size_t i = 0; i < sizeof ia / sizeof ia[0]; i++)
		node_add_attr(n, ia[i].k, AT_INT)->i = ia[i].v;
	node_add_attr(n, "scale", AT_FLOAT)->f = (float)m->scale;
	set_fused_from(mod, n, ordered, no);
	node_insert_before(m->last, n);
	Value *in[9] = {m->q, m->k, m->v, m->cos, m->sin, m->past_k, m->past_v, m->am, m->pos};
	int nin = 9;
	while (nin > 3 && !in[nin - 1])
		nin--;
	for (int i = 0; i < nin; i++)
		node_add_input(n, in[i]);
	for (int i = 0; i < m->nn; i++) {
		node_remove(m->nodes[i]);
		for (int j = 0; j < m->nodes[i]->noutputs; j++) {
			Value *v = m->nodes[i]->outputs[j];
			if (v && v != m->out && v != m->present_k && v != m->present_v) {
				v->in_value_info = false;
				v->type.kind = TY_NONE;
			}
		}
	}
	node_add_output(n, m->out);
	if (m->present_k && (m->present_k->nusers || m->present_k->is_output || m->present_v->nusers ||
	                     m->present_v->is_output)) {
		node_add_output(n, m->present_k);
		node_add_output(n, m->present_v);
	}
	module_set_opset(mod, "ai.wlower", 1);
}

int pass_fuse_gqa(Module *mod, PassContext *ctx, Diag *d)
{
	(void)d;
	int changed = 0, counter = 0;
	FOR_NODES_SAFE(mod->graph, n, nx) {
		if (n->op != OP_Softmax)
			continue;
		GqMatch m;
		if (!match_gqa(n, &m) || !check_private(&m))
			continue;
		nx = m.last->next;
		rewrite_gqa(mod, &m, &counter);
		changed++;
	}
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
