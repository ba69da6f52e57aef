/* match.c — the matcher library of the canonicalize and fuse passes
 * (match.h): value and constant tests, shapes, match sets, the norm and
 * causal-mask recognisers, the pieces of eager attention; then what every
 * rewriting pass needs for the nodes it creates: a stable, readable name and
 * the `fused_from` attribute (docs/OPS.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "match.h"

/* ---------------------------------------------------------------- values */

Node *producer(const Value *v, Op op)
{
	return v && v->producer && v->producer->op == op ? v->producer : NULL;
}

bool sole_read(const Value *v)
{
	return v && v->nusers == 1 && !v->is_output;
}

Node *sole_user(const Value *v, Op op)
{
	return sole_read(v) && v->users[0].node->op == op ? v->users[0].node : NULL;
}

Value *other_operand(const Node *n, const Value *v)
{
	if (!n || n->ninputs != 2)
		return NULL;
	if (n->inputs[0] == v && n->inputs[1] != v)
		return n->inputs[1];
	if (n->inputs[1] == v && n->inputs[0] != v)
		return n->inputs[0];
	return NULL;
}

/* ---------------------------------------------------------------- constants */

bool const_of(const Value *v, int dtype)
{
	return v && v->init && v->init->dtype == dtype && v->init->data;
}

/* Element types tensor_get_f64 reads. */
static bool numeric(int dt)
{
	switch (dt) {
	case DT_FLOAT: case DT_DOUBLE: case DT_FLOAT16: case DT_BFLOAT16:
	case DT_INT64: case DT_UINT64: case DT_INT32: case DT_UINT32: case DT_INT16: case DT_UINT16:
	case DT_INT8: case DT_UINT8: case DT_BOOL: case DT_INT4: case DT_UINT4:
		return true;
	default:
		return false;
	}
}

bool const_scalar(const Value *v, double *out)
{
	if (!v || !v->init || !v->init->data || tensor_numel(v->init) != 1 || !numeric(v->init->dtype))
		return false;
	*out = tensor_get_f64(v->init, 0);
	return true;
}

bool float_scalar(const Value *v, double *out)
{
	return const_of(v, DT_FLOAT) && const_scalar(v, out);
}

bool float_scalar_near(const Value *v, double want, double rtol)
{
	double c;
	return float_scalar(v, &c) && fabs(c - want) <= rtol * fabs(want);
}

bool param_vec(const Value *v, int64_t D)
{
	if (!const_of(v, DT_FLOAT) || tensor_numel(v->init) != D)
		return false;
	return v->init->ndim == 1 && v->init->dims[0] == D;
}

Value *scaled_operand(const Node *n, int dtype, double *c)
{
	if (!n || (n->op != OP_Mul && n->op != OP_Div) || n->ninputs != 2 || !n->inputs[0] || !n->inputs[1])
		return NULL;
	for (int ci = 1; ci >= 0; ci--) {
		if (n->op == OP_Div && ci == 0)
			break;
		const Value *k = n->inputs[ci];
		Value *x = n->inputs[1 - ci];
		if (x->init || !const_scalar(k, c) || (dtype != DT_UNDEFINED && k->init->dtype != dtype))
			continue;
		return x;
	}
	return NULL;
}

/* ---------------------------------------------------------------- shapes */

int static_shape(const Value *v, int64_t d[MATCH_MAXR])
{
	if (!v || !type_shape_known(&v->type) || v->type.rank > MATCH_MAXR)
		return -1;
	for (int i = 0; i < v->type.rank; i++)
		d[i] = v->type.dims[i].value;
	return v->type.rank;
}

bool shape_is(const Value *v, int r, const int64_t *want)
{
	int64_t d[MATCH_MAXR];
	if (static_shape(v, d) != r)
		return false;
	for (int i = 0; i < r; i++)
		if (d[i] != want[i])
			return false;
	return true;
}

bool perm_is(const Node *n, int r, const int64_t *p)
{
	const int64_t *got;
	if (!n || n->op != OP_Transpose || attr_ints(n, "perm", &got) != r)
		return false;
	for (int i = 0; i < r; i++)
		if (got[i] != p[i])
			return false;
	return true;
}

bool mean_last(const Node *n, const Value *x)
{
	if (!n || n->op != OP_ReduceMean || n->inputs[0] != x || attr_int(n, "keepdims", 1) != 1)
		return false;
	if (!x->type.has_shape || x->type.rank < 1)
		return false;
	int r = x->type.rank;
	const int64_t *ax;
	int64_t a;
	int k = attr_ints(n, "axes", &ax);
	if (k == 1)
		a = ax[0];
	else if (k < 0 && n->ninputs > 1 && n->inputs[1] && n->inputs[1]->init && tensor_numel(n->inputs[1]->init) == 1)
		a = tensor_get_i64(n->inputs[1]->init, 0);
	else
		return false;
	return a == -1 || a == r - 1;
}

/* ---------------------------------------------------------------- match sets */

void match_init(MatchSet *s, int max)
{
	s->nn = 0;
	s->max = max < MATCH_MAXN ? max : MATCH_MAXN;
}

bool match_contains(const MatchSet *s, const Node *n)
{
	for (int i = 0; i < s->nn && i < s->max; i++)
		if (s->nodes[i] == n)
			return true;
	return false;
}

void match_push(MatchSet *s, Node *n)
{
	if (match_contains(s, n))
		return;
	if (s->nn < s->max)
		s->nodes[s->nn++] = n;
	else
		s->nn = s->max + 1;   /* full: match_is_private refuses */
}

bool match_full(const MatchSet *s)
{
	return s->nn > s->max;
}

void match_truncate(MatchSet *s, int nn)
{
	if (nn < s->nn)
		s->nn = nn;
}

bool match_is_private(const MatchSet *s, const Node *last, const Value *out,
                      const Value *const *late, int nlate)
{
	if (match_full(s))
		return false;
	for (int i = 0; i < s->nn; i++) {
		Node *n = s->nodes[i];
		for (int j = 0; j < n->noutputs; j++) {
			Value *v = n->outputs[j];
			if (!v || v == out)
				continue;
			bool is_late = false;
			for (int k = 0; k < nlate; k++)
				is_late |= late[k] && v == late[k];
			if (v->is_output && !is_late)
				return false;
			for (int u = 0; u < v->nusers; u++) {
				Node *r = v->users[u].node;
				if (match_contains(s, r))
					continue;
				if (!is_late || r->graph != last->graph)
					return false;
				bool after = false;
				for (Node *x = last->next; x && !after; x = x->next)
					after = x == r;
				if (!after)
					return false;
			}
		}
	}
	return true;
}

int match_in_order(const MatchSet *s, const Graph *g, Node **out)
{
	int no = 0;
	FOR_NODES(g, x)
		if (match_contains(s, x))
			out[no++] = x;
	return no;
}

/* ---------------------------------------------------------------- norms */

bool match_norm(Node *first, bool rms, NormMatch *N)
{
	memset(N, 0, sizeof *N);
	match_init(&N->set, 10);
	Value *x, *d;            /* d: what is normalized, x - mean (LayerNorm) or x (RMSNorm) */
	Node *pw = NULL;
	double c;
	if (rms) {
		pw = first;
		x = d = pw->inputs[0];
	} else {
		Node *mu = first;
		x = mu->inputs[0];
		if (!x || !mean_last(mu, x))
			return false;
		Node *sub = sole_user(mu->outputs[0], OP_Sub);
		if (!sub || sub->inputs[0] != x || sub->inputs[1] != mu->outputs[0])
			return false;
		d = sub->outputs[0];
		if (!d || d->is_output || d->nusers != 2)
			return false;
		for (int i = 0; i < 2; i++)
			if (d->users[i].node->op == OP_Pow && d->users[i].slot == 0)
				pw = d->users[i].node;
		if (!pw)
			return false;
		match_push(&N->set, mu);
		match_push(&N->set, sub);
	}
	if (!x || x->type.kind != TY_TENSOR || x->type.elem != DT_FLOAT || !x->type.has_shape || x->type.rank < 1)
		return false;
	Dim dl = x->type.dims[x->type.rank - 1];
	if (dl.kind != DIM_VALUE || !float_scalar(pw->inputs[1], &c) || c != 2.0)
		return false;
	N->D = dl.value;
	/* the variance and its root */
	Node *va = sole_user(pw->outputs[0], OP_ReduceMean);
	if (!mean_last(va, pw->outputs[0]))
		return false;
	Node *ad = sole_user(va->outputs[0], OP_Add);
	if (!ad || !float_scalar(other_operand(ad, va->outputs[0]), &c) || !(c >= 0) || c > 1.0)
		return false;
	N->eps = (float)c;
	Node *sq = sole_user(ad->outputs[0], OP_Sqrt);
	if (!sq)
		return false;
	Node *seq[] = {pw, va, ad, sq};
	for (int i = 0; i < 4; i++)
		match_push(&N->set, seq[i]);
	/* nx = d / sd, or (RMSNorm) d · 1/sd */
	Value *sd = sq->outputs[0], *y;
	Node *k = sole_user(sd, OP_Div);
	if (k && k->inputs[0] == d && k->inputs[1] == sd) {
		match_push(&N->set, k);
		y = k->outputs[0];
	} else if (rms) {
		if (!k)
			k = sole_user(sd, OP_Reciprocal);
		bool div1 = k && k->op == OP_Div && k->inputs[1] == sd && float_scalar(k->inputs[0], &c) && c == 1.0;
		if (!(k && k->op == OP_Reciprocal) && !div1)
			return false;
		match_push(&N->set, k);
		Node *mu = sole_user(k->outputs[0], OP_Mul);
		if (!mu || other_operand(mu, k->outputs[0]) != d)
			return false;
		match_push(&N->set, mu);
		y = mu->outputs[0];
	} else {
		return false;
	}
	/* the affine tail */
	Node *u = rms ? sole_user(y, OP_Cast) : NULL;
	if (u && attr_int(u, "to", 0) == DT_FLOAT) {
		match_push(&N->set, u);
		y = u->outputs[0];
	}
	Node *mg = sole_user(y, OP_Mul);
	if (mg && param_vec(other_operand(mg, y), N->D)) {
		N->gamma = other_operand(mg, y);
		match_push(&N->set, mg);
		y = mg->outputs[0];
	} else if (rms) {
		return false;
	}
	Node *ab = rms ? NULL : sole_user(y, OP_Add);
	if (ab && param_vec(other_operand(ab, y), N->D)) {
		N->beta = other_operand(ab, y);
		match_push(&N->set, ab);
		y = ab->outputs[0];
	}
	N->x = x;
	N->y = y;
	return true;
}

/* ---------------------------------------------------------------- causal masks */

bool mask_is_causal(const Value *mask, CausalForm form, int64_t B, int64_t T, int64_t P, int64_t L)
{
	const Value *c = mask;
	if (form == CAUSAL_ADD) {
		Node *ex = producer(mask, OP_Expand);
		if (ex)
			c = ex->inputs[0];
		int64_t od[MATCH_MAXR];
		int r = static_shape(mask, od);
		if (!const_of(c, DT_FLOAT) || r < 2 || od[r - 2] != T || od[r - 1] != L)
			return false;
		for (int i = 0; i + 2 < r; i++)   /* broadcast over batch and heads only: [B|1, 1, T, L] */
			if (od[i] != 1 && !(i == 0 && od[i] == B))
				return false;
	} else if (!const_of(c, DT_BOOL)) {
		return false;
	}
	const Tensor *t = c->init;
	if (t->ndim < 2 || t->dims[t->ndim - 2] != T || t->dims[t->ndim - 1] != L)
		return false;
	for (int i = 0; i + 2 < t->ndim; i++)
		if (t->dims[i] != 1)
			return false;
	for (int64_t i = 0; i < T; i++)
		for (int64_t j = 0; j < L; j++) {
			bool visible = j <= P + i;
			if (form == CAUSAL_ADD) {
				double x = tensor_get_f64(t, i * L + j);
				if (visible ? x != 0.0 : !(x <= -1e9))
					return false;
			} else if ((tensor_get_i64(t, i * L + j) != 0) != (visible == (form == CAUSAL_KEEP))) {
				return false;
			}
		}
	return true;
}

Value *where_scores(const Node *n, bool *keep)
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

/* ---------------------------------------------------------------- attention */

static const int64_t p0213[4] = {0, 2, 1, 3};

int softmax_last(const Node *sm, int64_t d[MATCH_MAXR])
{
	int r = static_shape(sm->outputs[0], d);
	if (r < 1 || sm->ninputs != 1)
		return -1;
	int64_t ax = attr_int(sm, "axis", -1);
	return ax == -1 || ax == r - 1 ? r : -1;
}

Node *match_pv(MatchSet *s, Node *sm)
{
	Value *p = sm->outputs[0];
	Node *c;
	while ((c = sole_user(p, OP_Cast)) && attr_int(c, "to", 0) == DT_FLOAT) {
		match_push(s, c);
		p = c->outputs[0];
	}
	Node *mm = sole_user(p, OP_MatMul);
	if (!mm || mm->inputs[0] != p)
		return NULL;
	match_push(s, mm);
	return mm;
}

Value *match_head_split(MatchSet *s, Value *h, int64_t d[4])
{
	int64_t hd[MATCH_MAXR];
	Node *tr = producer(h, OP_Transpose);
	if (!perm_is(tr, 4, p0213) || static_shape(h, hd) != 4)
		return NULL;
	Node *rs = producer(tr->inputs[0], OP_Reshape);
	if (!rs || !sole_read(rs->outputs[0]))
		return NULL;
	memcpy(d, hd, 4 * sizeof *d);
	match_push(s, tr);
	match_push(s, rs);
	return rs->inputs[0];
}

bool head_proj(const Value *x, const int64_t d[4])
{
	int64_t want[3] = {d[0], d[2], d[1] * d[3]};
	return shape_is(x, 3, want);
}

Value *match_past(MatchSet *s, Value *ka, Value **past, Value **present)
{
	Node *cat = producer(ka, OP_Concat);
	*past = *present = NULL;
	if (!cat || cat->ninputs != 2 || attr_int(cat, "axis", 0) != 2)
		return ka;
	int64_t pd[MATCH_MAXR];
	if (static_shape(cat->inputs[0], pd) != 4)
		return NULL;
	match_push(s, cat);
	*past = cat->inputs[0];
	*present = ka;
	return cat->inputs[1];
}

Value *match_head_merge(MatchSet *s, Value *o, const int64_t want[3])
{
	Node *ot = sole_user(o, OP_Transpose);
	if (!perm_is(ot, 4, p0213))
		return NULL;
	match_push(s, ot);
	Node *orr = sole_user(ot->outputs[0], OP_Reshape);
	if (!orr || !shape_is(orr->outputs[0], 3, want))
		return NULL;
	match_push(s, orr);
	return orr->outputs[0];
}

bool attn_is_private(const AttnCore *c)
{
	const Value *late[2] = {c->present_k, c->present_v};
	return match_is_private(&c->set, c->last, c->out, late, 2);
}

const char *attn_name(Module *m, const AttnCore *c, const char *op, Node **ordered, int *no, int *counter)
{
	*no = match_in_order(&c->set, c->last->graph, ordered);
	return fused_node_name(m, ordered, *no, "core", op, counter);
}

bool attn_replace(Module *m, const AttnCore *c, Node *n, Node *const *ordered, int no, Value *const *ins,
                  int nin)
{
	set_fused_from(m, n, ordered, no);
	node_insert_before(c->last, n);
	for (int i = 0; i < nin; i++)
		node_add_input(n, ins[i]);
	const Value *keep[3] = {c->out, c->present_k, c->present_v};
	match_remove(&c->set, keep, 3);
	node_add_output(n, c->out);
	bool present = c->present_k && (c->present_k->nusers || c->present_k->is_output ||
	                                c->present_v->nusers || c->present_v->is_output);
	if (present) {
		node_add_output(n, c->present_k);
		node_add_output(n, c->present_v);
	}
	module_set_opset(m, "ai.wlower", 1);
	return present;
}

/* ---------------------------------------------------------------- rewrite helpers */

const char *fused_node_name(Module *m, Node *const *nodes, int nn, const char *suffix,
                            const char *op, int *counter)
{
	const char *first = nodes[0]->name ? nodes[0]->name : "";
	size_t len = strlen(first);
	for (int i = 1; i < nn; i++) {
		const char *s = nodes[i]->name ? nodes[i]->name : "";
		size_t k = 0;
		while (k < len && s[k] == first[k])
			k++;
		len = k;
	}
	while (len > 0 && first[len - 1] != '/')
		len--;
	if (len > 1)
		return arena_printf(m->arena, "%.*s%s", (int)len, first, suffix);
	return arena_printf(m->arena, "/%s_%d", op, (*counter)++);
}

static StrRef name_of(Module *m, const Node *n)
{
	const char *s = n->name ? n->name : "";
	return (StrRef){arena_strdup(m->arena, s), strlen(s)};
}

void set_fused_from(Module *m, Node *n, Node *const *nodes, int nn)
{
	Attr *a = node_add_attr(n, "fused_from", AT_STRINGS);
	a->n = nn;
	a->strings = arena_alloc(m->arena, (size_t)(nn ? nn : 1) * sizeof *a->strings);
	for (int i = 0; i < nn; i++)
		a->strings[i] = name_of(m, nodes[i]);
}

void set_fused_from_nested(Module *m, Node *n, Node *const *nodes, int nn)
{
	int nf = 0;
	for (int i = 0; i < nn; i++) {
		const Attr *ff = node_attr(nodes[i], "fused_from");
		nf += ff && ff->type == AT_STRINGS ? ff->n : 1;
	}
	Attr *a = node_add_attr(n, "fused_from", AT_STRINGS);
	a->strings = arena_alloc(m->arena, (size_t)(nf ? nf : 1) * sizeof *a->strings);
	for (int i = 0; i < nn; i++) {
		const Attr *ff = node_attr(nodes[i], "fused_from");
		if (ff && ff->type == AT_STRINGS) {
			for (int j = 0; j < ff->n; j++)
				a->strings[a->n++] = ff->strings[j];
		} else {
			a->strings[a->n++] = name_of(m, nodes[i]);
		}
	}
}

void set_int_attrs(Node *n, const IntAttr *a, int na)
{
	for (int i = 0; i < na; i++)
		node_add_attr(n, a[i].name, AT_INT)->i = a[i].v;
}

void set_string_attr(Module *m, Node *n, const char *name, const char *v)
{
	node_add_attr(n, name, AT_STRING)->s = (StrRef){arena_strdup(m->arena, v), strlen(v)};
}

Value *new_initializer(Graph *g, const char *hint, int dtype, int rank, const int64_t *dims, void **data)
{
	Arena *ar = g->mod->arena;
	Value *v = graph_new_value(g, hint);
	Tensor *t = tensor_new(ar, v->name, dtype, rank, dims);   /* graph_set_init types v */
	*data = tensor_alloc_data(ar, t);
	graph_set_init(g, v, t);
	return v;
}

void replace_nodes(Module *m, Node *n, Node *const *nodes, int nn, Node *pos, Value *const *ins, int nin,
                   Value *y)
{
	set_fused_from(m, n, nodes, nn);
	node_insert_before(pos, n);
	for (int i = 0; i < nin; i++)
		node_add_input(n, ins[i]);
	for (int i = 0; i < nn; i++)
		node_remove(nodes[i]);
	node_add_output(n, y);
}

bool replace_skip_norm(Module *m, Node *n, Node *norm, Value *const *params, int np, Value *bias)
{
	for (int i = 1; i < n->noutputs && i < 3; i++)
		if (n->outputs[i] && (n->outputs[i]->nusers || n->outputs[i]->is_output))
			return false;
	if (n->ninputs < 3 || !n->inputs[0] || !n->inputs[1] || !n->inputs[2] || n->noutputs < 1 || !n->outputs[0])
		return false;
	Graph *g = n->graph;
	Value *y = n->outputs[0], *sum = n->noutputs > 3 ? n->outputs[3] : NULL;
	const char *base = n->name ? n->name : "";
	Node *a1 = node_new(g, "Add", "", arena_printf(m->arena, "%s/skip_add", base)), *a2 = NULL;
	node_insert_before(n, a1);
	node_add_input(a1, n->inputs[0]);
	node_add_input(a1, n->inputs[1]);
	Value *s1 = (!bias && sum) ? NULL : graph_new_value(g, "skip_sum"), *s2 = NULL;
	if (bias) {
		a2 = node_new(g, "Add", "", arena_printf(m->arena, "%s/bias_add", base));
		node_insert_before(n, a2);
		node_add_input(a2, s1);
		node_add_input(a2, bias);
		s2 = sum ? NULL : graph_new_value(g, "skip_bias_sum");
	}
	Node *from[1] = {n};
	set_fused_from(m, norm, from, 1);
	node_insert_before(n, norm);
	node_add_input(norm, NULL);
	for (int i = 0; i < np; i++)
		node_add_input(norm, params[i]);
	node_remove(n);
	/* the sum value (name kept) is the last Add's output */
	Value *s = sum ? sum : bias ? s2 : s1;
	if (bias) {
		node_add_output(a1, s1);
		node_add_output(a2, s);
	} else {
		node_add_output(a1, s);
	}
	node_set_input(norm, 0, s);
	if (s1 && s1 != sum)
		s1->type = type_copy(m->arena, &y->type);
	if (s2)
		s2->type = type_copy(m->arena, &y->type);
	node_add_output(norm, y);
	for (int i = 1; i < n->noutputs && i < 3; i++)
		if (n->outputs[i]) {
			n->outputs[i]->type.kind = TY_NONE;
			n->outputs[i]->in_value_info = false;
		}
	return true;
}

void match_remove(const MatchSet *s, const Value *const *keep, int nkeep)
{
	for (int i = 0; i < s->nn; i++) {
		Node *n = s->nodes[i];
		node_remove(n);
		for (int j = 0; j < n->noutputs; j++) {
			Value *v = n->outputs[j];
			bool kept = !v;
			for (int k = 0; k < nkeep && !kept; k++)
				kept = v == keep[k];
			if (!kept) {
				v->in_value_info = false;
				v->type.kind = TY_NONE;
			}
		}
	}
}

Node *new_whisper_attention(Module *m, Graph *g, const char *name, const WaAttrs *a)
{
	Node *n = node_new(g, "WhisperAttention", "ai.wlower", name);
	IntAttr ia[] = {
		{"embed", a->embed}, {"heads", a->heads}, {"q_len", a->q_len}, {"kv_len", a->kv_len},
		{"causal", a->causal},
	};
	set_int_attrs(n, ia, 5);
	node_add_attr(n, "scale", AT_FLOAT)->f = (float)a->scale;
	set_string_attr(m, n, "kv_layout", a->kv_layout);
	return n;
}

/* ---------------------------------------------------------------- fake quantization */

/* z of a Q/DQ node: absent (0) or an int8/uint8 scalar constant. */
static bool qdq_zero_point(const Node *n, double *z)
{
	*z = 0;
	if (n->ninputs < 3 || !n->inputs[2])
		return true;
	return (const_of(n->inputs[2], DT_INT8) || const_of(n->inputs[2], DT_UINT8)) && const_scalar(n->inputs[2], z);
}

/* float32, or not typed yet (a pass before shape-infer; scale float32 makes the DQ output float32) */
static bool float_or_untyped(const Value *v)
{
	return v->type.kind == TY_NONE || (v->type.kind == TY_TENSOR && v->type.elem == DT_FLOAT);
}

Node *fake_quant_pair(const Node *dq)
{
	if (!dq || dq->op != OP_DequantizeLinear || dq->ninputs < 2 || !dq->inputs[0] || !dq->inputs[1] ||
	    !dq->outputs[0])
		return NULL;
	Node *q = producer(dq->inputs[0], OP_QuantizeLinear);
	double s1, s2, z1, z2;
	if (!q || !sole_read(q->outputs[0]) || dq->outputs[0]->is_output || !q->inputs[0] ||
	    !float_or_untyped(q->inputs[0]) || !float_or_untyped(dq->outputs[0]) ||
	    !float_scalar(q->inputs[1], &s1) || !float_scalar(dq->inputs[1], &s2) || s1 != s2 ||
	    !qdq_zero_point(q, &z1) || !qdq_zero_point(dq, &z2) || z1 != z2 ||
	    (q->ninputs > 2 && q->inputs[2] && dq->ninputs > 2 && dq->inputs[2] &&
	     q->inputs[2]->init->dtype != dq->inputs[2]->init->dtype))
		return NULL;
	return q;
}

/* A weight: a constant, DequantizeLinear of one, or of QuantizeLinear of one. */
static bool weight_like(const Value *v)
{
	for (int k = 0; v && k < 3; k++) {
		if (v->init)
			return true;
		Node *p = v->producer;
		if (!p || (p->op != OP_DequantizeLinear && p->op != OP_QuantizeLinear))
			return false;
		v = p->inputs[0];
	}
	return false;
}

/* A node the walk does not go past: a head split's Reshape (rank-3 input),
 * a projection (MatMul / QMatMul with a constant weight). */
static bool bypass_stop(const Node *n)
{
	if (n->op == OP_Reshape)
		return n->inputs[0] && n->inputs[0]->type.has_shape && n->inputs[0]->type.rank == 3;
	if (n->op == OP_MatMul)
		return n->ninputs == 2 && weight_like(n->inputs[1]);
	return n->op == OP_WlQMatMul;
}

int qdq_bypass_attention(Node *sm, QdqBypass *b)
{
	memset(b, 0, sizeof *b);
	Value *p = sm->outputs[0];
	Node *pv = NULL;
	for (int k = 0; k < 8 && sole_read(p); k++) {
		Node *u = p->users[0].node;
		if (u->op == OP_MatMul && u->inputs[0] == p) {
			pv = u;
			break;
		}
		if (u->op != OP_Cast && u->op != OP_QuantizeLinear && u->op != OP_DequantizeLinear)
			break;
		p = u->outputs[0];
	}
	if (!pv)
		return 0;
	enum { MAXW = 128 };
	Node *seen[MAXW];
	int ns = 0;
	seen[ns++] = pv;
	for (int i = 0; i < ns; i++) {
		Node *n = seen[i];
		if (n->op == OP_DequantizeLinear) {
			Node *q = fake_quant_pair(n);
			if (q && b->np < 32) {
				b->q[b->np] = q;
				b->dq[b->np] = n;
				b->x[b->np] = q->inputs[0];
				b->np++;
			}
		}
		if (i > 0 && bypass_stop(n))
			continue;
		for (int k = 0; k < n->ninputs; k++) {
			Node *pn = n->inputs[k] ? n->inputs[k]->producer : NULL;
			bool have = !pn;
			for (int j = 0; j < ns && !have; j++)
				have = seen[j] == pn;
			if (!have && ns < MAXW)
				seen[ns++] = pn;
		}
	}
	int nu = 0;
	for (int i = 0; i < b->np; i++)
		nu += b->dq[i]->outputs[0]->nusers;
	b->use = wl_xcalloc((size_t)nu + 1, sizeof *b->use);
	for (int i = 0; i < b->np; i++) {
		Value *y = b->dq[i]->outputs[0];
		while (y->nusers) {
			Use u = y->users[y->nusers - 1];
			b->use[b->nuse++] = (struct QdqUse){u.node, u.slot, i};
			node_set_input(u.node, u.slot, b->x[i]);
		}
		node_set_input(b->q[i], 0, NULL);
	}
	if (!b->np) {
		free(b->use);
		b->use = NULL;
	}
	return b->np;
}

void qdq_bypass_undo(QdqBypass *b)
{
	for (int i = 0; i < b->np; i++)
		node_set_input(b->q[i], 0, b->x[i]);
	for (int i = b->nuse - 1; i >= 0; i--)
		node_set_input(b->use[i].n, b->use[i].slot, b->dq[b->use[i].pair]->outputs[0]);
	free(b->use);
	memset(b, 0, sizeof *b);
}

void qdq_bypass_commit(QdqBypass *b, const MatchSet *core)
{
	bool outside[32] = {0};
	for (int i = 0; i < b->nuse; i++)
		if (!match_contains(core, b->use[i].n))
			outside[b->use[i].pair] = true;
	for (int i = b->nuse - 1; i >= 0; i--)
		if (outside[b->use[i].pair])
			node_set_input(b->use[i].n, b->use[i].slot, b->dq[b->use[i].pair]->outputs[0]);
	for (int i = 0; i < b->np; i++) {
		if (outside[i]) {
			node_set_input(b->q[i], 0, b->x[i]);
			continue;
		}
		node_remove(b->dq[i]);
		node_remove(b->q[i]);
	}
	free(b->use);
	memset(b, 0, sizeof *b);
}

/* ---------------------------------------------------------------- passes */

void for_each_subgraph(Node *n, void (*fn)(Graph *g, int *changed), int *changed)
{
	FOR_SUBGRAPHS(n, sg)
		fn(sg, changed);
}

int pass_on_graph(Module *m, PassContext *ctx, void (*run_graph)(Graph *g, int *changed))
{
	int changed = 0;
	run_graph(m->graph, &changed);
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}

int fusion_done(Module *m, PassContext *ctx, int changed)
{
	if (changed)
		module_set_opset(m, "ai.wlower", 1);
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
