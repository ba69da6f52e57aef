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
 * output) reads them.
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

enum { MAXN = 32, MAXR = 6 };

typedef struct WaMatch {
	Node *nodes[MAXN];
	int nn;
	Value *q, *k, *v, *past_k, *past_v, *present_k, *present_v, *out;
	int64_t B, T, S, P, H, hd;
	bool causal, bhsd;
	double scale;
	Node *last;
} WaMatch;

/* ---------------------------------------------------------------- helpers */

static int shape(const Value *v, int64_t *d)
{
	if (!v || !type_shape_known(&v->type) || v->type.rank > MAXR)
		return -1;
	for (int i = 0; i < v->type.rank; i++)
		d[i] = v->type.dims[i].value;
	return v->type.rank;
}

static bool dims_eq(const Value *v, int r, const int64_t *want)
{
	int64_t d[MAXR];
	if (shape(v, d) != r)
		return false;
	for (int i = 0; i < r; i++)
		if (d[i] != want[i])
			return false;
	return true;
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

static void push(WaMatch *m, Node *n)
{
	if (m->nn < MAXN)
		m->nodes[m->nn++] = n;
	else
		m->nn = MAXN + 1;   /* overflow: refuse in check_private */
}

/* For Mul (x, c), Mul (c, x) or Div (x, c) with c a finite nonzero float
 * scalar constant: returns x and sets *c; else NULL. */
static Value *scaled(const Node *n, double *c)
{
	if (!n || n->ninputs != 2 || !n->inputs[0] || !n->inputs[1])
		return NULL;
	for (int ci = 1; ci >= 0; ci--) {
		const Value *o = n->inputs[ci];
		if (n->op == OP_Div && ci == 0)
			break;
		if (!o->init || o->init->dtype != DT_FLOAT || tensor_numel(o->init) != 1 || !o->init->data ||
		    n->inputs[1 - ci]->init)
			continue;
		*c = tensor_get_f64(o->init, 0);
		if (isfinite(*c) && *c != 0)
			return n->inputs[1 - ci];
	}
	return NULL;
}

/* Skips float -> float Casts. */
static Value *skip_cast_fwd(WaMatch *m, Value *v)
{
	while (v->nusers == 1 && v->users[0].node->op == OP_Cast && v->type.elem == DT_FLOAT &&
	       attr_int(v->users[0].node, "to", 0) == DT_FLOAT) {
		push(m, v->users[0].node);
		v = v->users[0].node->outputs[0];
	}
	return v;
}

/* An initializer, or an Expand of one (torch's expanded causal mask). */
static bool const_like(const Value *v)
{
	Node *ex = prod(v, OP_Expand);
	return v && (v->init || (ex && ex->inputs[0] && ex->inputs[0]->init));
}

static Node *sole_user(const Value *v, Op op)
{
	if (!v || v->nusers != 1 || v->is_output)
		return NULL;
	Node *u = v->users[0].node;
	return u->op == op ? u : NULL;
}

/* ---------------------------------------------------------------- match */

/* The causal test on a constant mask (initializer, or Expand of one whose
 * leading dims are 1) of logical shape [.., T, L]. */
static bool mask_is_causal(const WaMatch *m, const Value *mask)
{
	const Value *c = mask;
	Node *ex = prod(mask, OP_Expand);
	if (ex)
		c = ex->inputs[0];
	if (!c || !c->init || c->init->dtype != DT_FLOAT || !c->init->data)
		return false;
	const Tensor *t = c->init;
	int64_t out[MAXR];
	int r = shape(mask, out);
	if (r < 2 || t->ndim < 2 || t->dims[t->ndim - 2] != m->T || t->dims[t->ndim - 1] != m->P + m->S)
		return false;
	for (int i = 0; i + 2 < t->ndim; i++)
		if (t->dims[i] != 1)
			return false;
	for (int i = 0; i + 2 < r; i++)     /* broadcast over batch and heads only: [B|1, 1, T, L] */
		if (out[i] != 1 && !(i == 0 && out[i] == m->B))
			return false;
	if (out[r - 2] != m->T || out[r - 1] != m->P + m->S)
		return false;
	int64_t L = m->P + m->S;
	for (int64_t i = 0; i < m->T; i++)
		for (int64_t j = 0; j < L; j++) {
			double x = tensor_get_f64(t, i * L + j);
			if (j <= m->P + i ? x != 0.0 : !(x <= -1e9))
				return false;
		}
	return true;
}

/* Where form: a bool constant [.., T, L] (leading dims 1) that is true
 * exactly on and below the diagonal j <= P+i (keep = true), or exactly
 * above it (keep = false: it selects the negative fill). */
static bool where_is_causal(const WaMatch *m, const Value *cond, bool keep)
{
	const Tensor *t = cond->init;
	int64_t L = m->P + m->S;
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

/* kh: the [B,H,L,hd] keys or values. Fills k/v input, past and layout. */
static bool match_kv4(WaMatch *m, Value *kh, Value **x, Value **past, Value **present, bool *bhsd)
{
	int64_t d[MAXR];
	if (shape(kh, d) != 4 || d[0] != m->B || d[1] != m->H || d[3] != m->hd)
		return false;
	*past = *present = NULL;
	Value *nw = kh;
	Node *cat = prod(kh, OP_Concat);
	if (cat && cat->ninputs == 2 && attr_int(cat, "axis", 0) % 4 == 2 && attr_int(cat, "axis", 0) >= -2) {
		int64_t pd[MAXR];
		if (shape(cat->inputs[0], pd) != 4 || pd[0] != m->B || pd[1] != m->H || pd[3] != m->hd)
			return false;
		push(m, cat);
		*past = cat->inputs[0];
		*present = kh;
		nw = cat->inputs[1];
	}
	Node *tr = prod(nw, OP_Transpose);
	Node *rs = tr ? prod(tr->inputs[0], OP_Reshape) : NULL;
	int64_t pm[4] = {0, 2, 1, 3};
	int64_t sd[MAXR];
	if (tr && rs && perm_is(tr, 4, pm) && shape(rs->inputs[0], sd) == 3 && sd[0] == m->B &&
	    sd[2] == m->H * m->hd && sole_user(rs->outputs[0], OP_Transpose) && nw->nusers == 1) {
		push(m, tr);
		push(m, rs);
		*x = rs->inputs[0];
		*bhsd = false;
	} else {
		*x = nw;
		*bhsd = true;
	}
	return true;
}

/* Peels a Reshape between the 3-D [B·H, r, c] and 4-D [B, H, r, c] views. */
static Value *peel_view(WaMatch *m, Value *v, bool back)
{
	Node *n = back ? prod(v, OP_Reshape) : sole_user(v, OP_Reshape);
	if (!n)
		return v;
	Value *a = n->inputs[0], *b = n->outputs[0];
	int64_t da[MAXR], db[MAXR];
	int ra = shape(a, da), rb = shape(b, db);
	if (ra < 3 || rb < 3 || da[ra - 1] != db[rb - 1] || da[ra - 2] != db[rb - 2])
		return v;
	int64_t pa = 1, pb = 1;
	for (int i = 0; i < ra - 2; i++)
		pa *= da[i];
	for (int i = 0; i < rb - 2; i++)
		pb *= db[i];
	if (pb != pa || (m->H && pa != m->B * m->H))   /* B, H unknown while walking the scores */
		return v;
	if (back && (b->nusers != 1 || b->is_output))
		return v;
	push(m, n);
	return back ? a : b;
}

static bool match_wa(Node *sm, WaMatch *m)
{
	memset(m, 0, sizeof *m);
	m->scale = 1.0;
	int64_t sd[MAXR];
	int sr = shape(sm->outputs[0], sd);
	if (sr < 3 || sm->ninputs != 1)
		return false;
	int64_t ax = attr_int(sm, "axis", -1);
	if (ax != -1 && ax != sr - 1)
		return false;
	push(m, sm);
	/* forward: ·V and head merge */
	Value *p = skip_cast_fwd(m, sm->outputs[0]);
	Node *mm2 = sole_user(p, OP_MatMul);
	if (!mm2 || mm2->inputs[0] != p)
		return false;
	push(m, mm2);
	/* backward from the Softmax: views, mask, scale, QK^T */
	Value *s = sm->inputs[0];
	Node *mm1 = NULL;
	Value *mask = NULL;
	Node *where = NULL;
	bool where_keep = false;
	for (int guard = 0; guard < 6 && !mm1; guard++) {
		if (s->nusers != 1 || s->is_output)
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
		} else if (n->op == OP_Where && !mask && !where && n->ninputs == 3) {
			/* Where (keep, s, neg) or Where (drop, neg, s) */
			int si = n->inputs[1] && !n->inputs[1]->init ? 1 : 2;
			double neg;
			Value *nv = n->inputs[3 - si];
			if (!nv || !n->inputs[si] || !n->inputs[0] || !nv->init || tensor_numel(nv->init) != 1 ||
			    !nv->init->data || !n->inputs[0]->init)
				return false;
			neg = tensor_get_f64(nv->init, 0);
			if (!(neg <= -1e9))
				return false;
			where = n;
			where_keep = si == 1;
			push(m, n);
			s = n->inputs[si];
		} else if (n->op == OP_Add && !mask) {
			Value *x = n->inputs[0], *o = n->inputs[1];
			if (!const_like(o)) {
				Value *t = x; x = o; o = t;
			}
			if (!const_like(o) || const_like(x))
				return false;
			mask = o;
			push(m, n);
			s = x;
		} else if ((n->op == OP_Div || n->op == OP_Mul) && (sx = scaled(n, &c)) && c > 0) {
			/* before or after the mask: a positive scale keeps masked scores masked */
			m->scale *= n->op == OP_Div ? 1.0 / c : c;
			push(m, n);
			s = sx;
		} else {
			return false;
		}
	}
	if (!mm1)
		return false;
	push(m, mm1);
	/* Q: [Reshape 3-D] <- [Mul] <- Transpose 0213 <- Reshape <- [Mul] <- q */
	Value *qv = mm1->inputs[0];
	double c;
	Node *n;
	Value *x;
	if ((n = prod(qv, OP_Mul)) && qv->nusers == 1 && (x = scaled(n, &c))) {
		m->scale *= c; push(m, n); qv = x;
	}
	int64_t qd[MAXR];
	if (shape(qv, qd) == 3) {   /* 3-D bmm form */
		Node *r3 = prod(qv, OP_Reshape);
		if (!r3 || qv->nusers != 1)
			return false;
		push(m, r3);
		qv = r3->inputs[0];
	}
	if ((n = prod(qv, OP_Mul)) && qv->nusers == 1 && (x = scaled(n, &c))) {
		m->scale *= c; push(m, n); qv = x;
	}
	int64_t p0213[4] = {0, 2, 1, 3};
	Node *qt = prod(qv, OP_Transpose);
	if (!perm_is(qt, 4, p0213) || qv->nusers != 1 || shape(qv, qd) != 4)
		return false;
	m->B = qd[0]; m->H = qd[1]; m->T = qd[2]; m->hd = qd[3];
	push(m, qt);
	Node *qr = prod(qt->inputs[0], OP_Reshape);
	if (!qr || !sole_user(qr->outputs[0], OP_Transpose))
		return false;
	push(m, qr);
	qv = qr->inputs[0];
	if ((n = prod(qv, OP_Mul)) && qv->nusers == 1 && (x = scaled(n, &c))) {
		m->scale *= c; push(m, n); qv = x;
	}
	int64_t want_q[3] = {m->B, m->T, m->H * m->hd};
	if (!dims_eq(qv, 3, want_q))
		return false;
	m->q = qv;
	/* K: [Mul] <- Transpose (3-D 021 of Reshape(kh) | 4-D 0132 of kh | 0231 of Reshape(k)) */
	Value *kv = mm1->inputs[1];
	if ((n = prod(kv, OP_Mul)) && kv->nusers == 1 && (x = scaled(n, &c))) {
		m->scale *= c; push(m, n); kv = x;
	}
	Node *kt = prod(kv, OP_Transpose);
	if (!kt || kv->nusers != 1)
		return false;
	push(m, kt);
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
		Node *kr = prod(kt->inputs[0], OP_Reshape);
		int64_t want[3];
		if (!kr || kt->inputs[0]->nusers != 1 || shape(kr->inputs[0], want) != 3 || want[0] != m->B ||
		    want[2] != m->H * m->hd)
			return false;
		push(m, kr);
		m->k = kr->inputs[0];
		m->S = want[1];
	} else {
		return false;
	}
	if (kh) {
		if (!match_kv4(m, kh, &m->k, &m->past_k, &m->present_k, &kb))
			return false;
	}
	/* V */
	Value *vv = mm2->inputs[1];
	if (shape(vv, qd) == 3) {
		Value *a = peel_view(m, vv, true);
		if (a == vv)
			return false;
		vv = a;
	}
	bool vb = false;
	if (!match_kv4(m, vv, &m->v, &m->past_v, &m->present_v, &vb))
		return false;
	if (!kh) {   /* openai form: k from a [B,S,D] projection, no past */
		if (m->past_v || vb)
			return false;
		kb = false;
	}
	if (kb != vb || !m->past_k != !m->past_v)
		return false;
	m->bhsd = kb;
	int64_t kd[MAXR];
	int kr = shape(m->k, kd);
	m->S = kb ? kd[2] : kd[1];
	if (kr != (kb ? 4 : 3) || !type_equal(&m->k->type, &m->v->type))
		return false;
	if (m->past_k) {
		int64_t pd[MAXR];
		shape(m->past_k, pd);
		m->P = pd[2];
		if (!type_equal(&m->past_k->type, &m->past_v->type))
			return false;
	}
	/* mask */
	if (mask && where)
		return false;
	if (mask) {
		if (!mask_is_causal(m, mask))
			return false;
		m->causal = true;
	}
	if (where) {
		if (!where_is_causal(m, where->inputs[0], where_keep))
			return false;
		m->causal = true;
	}
	/* head merge: [Reshape 4-D] -> Transpose 0213 -> Reshape [B,T,D] */
	Value *o = mm2->outputs[0];
	if (shape(o, qd) == 3)
		o = peel_view(m, o, false);
	Node *ot = sole_user(o, OP_Transpose);
	if (!perm_is(ot, 4, p0213))
		return false;
	push(m, ot);
	Node *orr = sole_user(ot->outputs[0], OP_Reshape);
	if (!orr || !dims_eq(orr->outputs[0], 3, want_q))
		return false;
	push(m, orr);
	m->out = orr->outputs[0];
	m->last = orr;
	return m->nn <= MAXN;
}

static bool in_set(const WaMatch *m, const Node *n)
{
	return node_in(m->nodes, m->nn, n);
}

/* Every value the pattern produces is read only inside it (except out and
 * the present values), and the readers of present come after `last`. */
static bool check_private(const WaMatch *m)
{
	const Value *late[2] = {m->present_k, m->present_v};
	return m->nn <= MAXN && match_is_private(m->nodes, m->nn, m->last, m->out, late, 2);
}

/* ---------------------------------------------------------------- rewrite */

static void rewrite_wa(Module *mod, WaMatch *m, int *counter)
{
	Graph *g = m->last->graph;
	Node *ordered[MAXN] = {0};
	int no = 0;
	FOR_NODES(g, x)
		if (in_set(m, x))
			ordered[no++] = x;
	const char *name = fused_node_name(mod, ordered, no, "core", "WhisperAttention", counter);
	Node *n = node_new(g, "WhisperAttention", "ai.wlower", name);
	struct { const char *k; int64_t v; } ia[] = {
		{"embed", m->H * m->hd}, {"heads", m->H}, {"q_len", m->T}, {"kv_len", m->P + m->S},
		{"causal", m->causal},
	};
	for (size_t i = 0; i < sizeof ia / sizeof ia[0]; i++)
		node_add_attr(n, ia[i].k, AT_INT)->i = ia[i].v;
	node_add_attr(n, "scale", AT_FLOAT)->f = (float)m->scale;
	const char *lay = m->bhsd ? "bhsd" : "bsd";
	node_add_attr(n, "kv_layout", AT_STRING)->s = (StrRef){arena_strdup(mod->arena, lay), strlen(lay)};
	set_fused_from(mod, n, ordered, no);
	node_insert_before(m->last, n);
	node_add_input(n, m->q);
	node_add_input(n, m->k);
	node_add_input(n, m->v);
	if (m->past_k) {
		node_add_input(n, m->past_k);
		node_add_input(n, m->past_v);
	}
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
	bool keep = m->present_k && (m->present_k->nusers || m->present_k->is_output ||
	                             m->present_v->nusers || m->present_v->is_output);
	if (keep) {
		node_add_output(n, m->present_k);
		node_add_output(n, m->present_v);
	} else if (m->present_k) {
		m->present_k->in_value_info = m->present_v->in_value_info = false;
		m->present_k->type.kind = m->present_v->type.kind = TY_NONE;
	}
	module_set_opset(mod, "ai.wlower", 1);
}

int pass_fuse_whisper_attention(Module *mod, PassContext *ctx, Diag *d)
{
	(void)d;
	int changed = 0, counter = 0;
	FOR_NODES_SAFE(mod->graph, n, nx) {
		if (n->op != OP_Softmax)
			continue;
		WaMatch m;
		if (!match_wa(n, &m) || !check_private(&m))
			continue;
		nx = m.last->next;
		rewrite_wa(mod, &m, &counter);
		changed++;
	}
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
