/* fuse_conv_stem.c — Whisper's encoder stem becomes ai.wlower.ConvStem
 * (vendor: 15 nodes → whisper::convStem).
 *
 *   h1 = Conv <kernel_shape = [3], pads = [1, 1], strides = [1]> (x, w1, b1)
 *   g1 = GELU (h1)                  ai.wlower.Gelu <approximate = "none">, or the
 *                                   Erf form: Mul (Mul (h1, Add (Erf (Div (h1, 1.41421)), 1)), 0.5)
 *   h2 = Conv <kernel_shape = [3], pads = [1, 1], strides = [2]> (g1, w2, b2)
 *   g2 = GELU (h2)
 *   t  = Transpose <perm = [0, 2, 1]> (g2)
 *   y  = Add (t, pos)               pos: float [F2, D] or [1, F2, D] constant, or
 *                                   Slice (table, [0], [>= F2], [0 or -2]) of a constant
 *     →
 *   y = ai.wlower.ConvStem <strides = [1, 2], pads = [1, 1]> (x, w1, b1, w2, b2, pos)
 *
 * The Erf form is accepted as torch exports it at opset 14/17: Div by √2 (or
 * Mul by 1/√2), Add of 1 (either order), then x·(1+erf)·0.5 with the two Muls
 * in either nesting (x·(1+erf) then ·0.5, or x·0.5 then ·(1+erf)).
 * Constants are compared with a relative tolerance of 1e-6.
 *
 * Near misses left alone: another kernel size, stride, padding, dilation or
 * group; a conv without a constant weight or bias; an activation that is not
 * exactly GELU (e.g. tanh-GELU, a wrong constant); another transpose
 * permutation; an Add of a non-constant or wrongly shaped tensor; any
 * intermediate that is read elsewhere or is a graph output.
 *
 * requires  shape-infer (x is [B, C, F]), constants as initializers
 * maintains topological order, use lists, y's name and type
 * breaks    nothing (a Slice'd table is referenced in place, not copied)
 */
#include <math.h>
#include <string.h>
#include "passes.h"
#include "match.h"

typedef struct StemCapture {
	MatchSet set;
	Value *x, *w1, *b1, *w2, *b2, *pos, *y;
	Node *slice;               /* positional table through Slice, or NULL */
	int64_t F2, D;
} StemCapture;

/* A float or double scalar constant within 1e-6 relative of want. */
static bool scalar_is(const Value *v, double want)
{
	double x;
	return (const_of(v, DT_FLOAT) || const_of(v, DT_DOUBLE)) && const_scalar(v, &x) &&
	       fabs(x - want) <= 1e-6 * fabs(want);
}

/* GELU of h: returns its output or NULL, recording the nodes. */
static Value *match_gelu(StemCapture *c, Value *h)
{
	if (h->is_output)
		return NULL;
	if (h->nusers == 1) {
		Node *g = h->users[0].node;
		if (g->op == OP_WlGelu && g->noutputs == 1 &&
		    strcmp(attr_string(g, "approximate", "none"), "none") == 0) {
			match_push(&c->set, g);
			return g->outputs[0];
		}
		return NULL;
	}
	if (h->nusers != 2)
		return NULL;
	/* Erf form: users are the Div/Mul(1/√2) and one of the final Muls. */
	Node *scale = NULL, *mul = NULL;
	for (int i = 0; i < 2; i++) {
		Node *u = h->users[i].node;
		if (u->op == OP_Div && u->ninputs == 2 && u->inputs[0] == h && scalar_is(u->inputs[1], M_SQRT2))
			scale = u;
		else if (u->op == OP_Mul && scalar_is(other_operand(u, h), M_SQRT1_2) && !scale)
			scale = u;
		else if (u->op == OP_Mul)
			mul = u;
	}
	if (!scale || !mul || scale == mul)
		return NULL;
	Node *erf = sole_user(scale->outputs[0], OP_Erf);
	if (!erf)
		return NULL;
	Node *add = sole_user(erf->outputs[0], OP_Add);
	if (!add || !scalar_is(other_operand(add, erf->outputs[0]), 1.0))
		return NULL;
	/* mul is x·(1+erf) or x·0.5 */
	Value *mo = other_operand(mul, h);
	Node *last = sole_user(mul->outputs[0], OP_Mul);
	if (!last)
		return NULL;
	if (mo == add->outputs[0]) {
		if (!scalar_is(other_operand(last, mul->outputs[0]), 0.5))
			return NULL;
	} else if (scalar_is(mo, 0.5)) {
		if (other_operand(last, mul->outputs[0]) != add->outputs[0])
			return NULL;
	} else {
		return NULL;
	}
	if (!sole_read(add->outputs[0]))
		return NULL;
	Node *seq[] = {scale, erf, add, mul, last};
	for (int i = 0; i < 5; i++)
		match_push(&c->set, seq[i]);
	return last->outputs[0];
}

static bool ints_are(const Node *n, const char *name, int k, const int64_t *want, bool absent_ok)
{
	const int64_t *v;
	int cnt = attr_ints(n, name, &v);
	if (cnt < 0)
		return absent_ok;
	if (cnt != k)
		return false;
	for (int i = 0; i < k; i++)
		if (v[i] != want[i])
			return false;
	return true;
}

/* Conv(k3, p1, stride s) with constant float weight [D, C, 3] and bias [D]. */
static bool conv_ok(const Node *n, int64_t stride)
{
	static const int64_t k3[1] = {3}, p1[2] = {1, 1}, one[1] = {1};
	int64_t st[1] = {stride};
	if (n->op != OP_Conv || n->ninputs != 3 || n->noutputs != 1)
		return false;
	const Value *w = n->inputs[1], *b = n->inputs[2];
	if (!w || !w->init || w->init->dtype != DT_FLOAT || w->init->ndim != 3 || w->init->dims[2] != 3)
		return false;
	if (!b || !b->init || b->init->dtype != DT_FLOAT || tensor_numel(b->init) != w->init->dims[0])
		return false;
	if (strcmp(attr_string(n, "auto_pad", "NOTSET"), "NOTSET") != 0 || attr_int(n, "group", 1) != 1)
		return false;
	return ints_are(n, "kernel_shape", 1, k3, true) && ints_are(n, "pads", 2, p1, false) &&
	       ints_are(n, "strides", 1, st, stride == 1) && ints_are(n, "dilations", 1, one, true);
}

/* pos: constant [F2, D] / [1, F2, D], or Slice of a constant table from row 0. */
static bool match_pos(StemCapture *c, Value *p)
{
	if (p->init && p->init->dtype == DT_FLOAT && p->init->data) {
		const Tensor *t = p->init;
		bool ok = (t->ndim == 2 && t->dims[0] == c->F2 && t->dims[1] == c->D) ||
		          (t->ndim == 3 && t->dims[0] == 1 && t->dims[1] == c->F2 && t->dims[2] == c->D);
		if (ok)
			c->pos = p;
		return ok;
	}
	Node *s = p->producer;
	if (!s || s->op != OP_Slice || s->ninputs < 3 || p->nusers != 1 || p->is_output)
		return false;
	const Value *tab = s->inputs[0], *st = s->inputs[1], *en = s->inputs[2];
	const Value *ax = s->ninputs > 3 ? s->inputs[3] : NULL, *sp = s->ninputs > 4 ? s->inputs[4] : NULL;
	if (!tab || !tab->init || tab->init->dtype != DT_FLOAT || !tab->init->data || tab->init->ndim != 2 ||
	    tab->init->dims[1] != c->D || tab->init->dims[0] < c->F2)
		return false;
	if (!st || !st->init || !en || !en->init || tensor_numel(st->init) != 1 || tensor_numel(en->init) != 1)
		return false;
	if (tensor_get_i64(st->init, 0) != 0 || tensor_get_i64(en->init, 0) < c->F2)
		return false;
	if (ax && (!ax->init || tensor_numel(ax->init) != 1 ||
	           (tensor_get_i64(ax->init, 0) != 0 && tensor_get_i64(ax->init, 0) != -2)))
		return false;
	if (sp && (!sp->init || tensor_numel(sp->init) != 1 || tensor_get_i64(sp->init, 0) != 1))
		return false;
	int64_t rows = tensor_get_i64(en->init, 0) < tab->init->dims[0] ? tensor_get_i64(en->init, 0) : tab->init->dims[0];
	if (rows != c->F2)
		return false;
	c->slice = s;
	c->pos = (Value *)tab;
	return true;
}

static bool match_conv_stem(Node *conv1, StemCapture *c)
{
	memset(c, 0, sizeof *c);
	match_init(&c->set, 23);
	if (!conv_ok(conv1, 1))
		return false;
	c->x = conv1->inputs[0];
	if (!c->x || !c->x->type.has_shape || c->x->type.rank != 3)
		return false;
	const Dim *fd = &c->x->type.dims[2];
	if (fd->kind != DIM_VALUE || fd->value < 1)
		return false;
	c->w1 = conv1->inputs[1];
	c->b1 = conv1->inputs[2];
	c->D = c->w1->init->dims[0];
	c->F2 = (fd->value - 1) / 2 + 1;
	match_push(&c->set, conv1);
	Value *g1 = match_gelu(c, conv1->outputs[0]);
	Node *conv2 = g1 ? sole_user(g1, OP_Conv) : NULL;
	if (!conv2 || !conv_ok(conv2, 2) || conv2->inputs[0] != g1)
		return false;
	c->w2 = conv2->inputs[1];
	c->b2 = conv2->inputs[2];
	if (c->w2->init->dims[0] != c->D || c->w2->init->dims[1] != c->D)
		return false;
	match_push(&c->set, conv2);
	Value *g2 = match_gelu(c, conv2->outputs[0]);
	Node *tr = g2 ? sole_user(g2, OP_Transpose) : NULL;
	static const int64_t perm[3] = {0, 2, 1};
	if (!tr || tr->noutputs != 1 || !ints_are(tr, "perm", 3, perm, false))
		return false;
	match_push(&c->set, tr);
	Node *add = sole_user(tr->outputs[0], OP_Add);
	if (!add || add->noutputs != 1)
		return false;
	Value *p = other_operand(add, tr->outputs[0]);
	if (!p || !match_pos(c, p))
		return false;
	if (c->slice)
		match_push(&c->set, c->slice);
	match_push(&c->set, add);
	c->y = add->outputs[0];
	return !match_full(&c->set);
}

static const char *stem_name(Arena *ar, const StemCapture *c, int k)
{
	const char *s = c->set.nodes[0]->name ? c->set.nodes[0]->name : "";
	if (*s == '/' && strchr(s + 1, '/')) {
		/* "/conv1/Conv", "/encoder/conv1/Conv": the folder above conv1 */
		const char *e = strrchr(s, '/');
		size_t n = (size_t)(e - s);
		while (n > 0 && s[n - 1] != '/')
			n--;
		return arena_printf(ar, "%.*sconv_stem", (int)n, s);
	}
	return arena_printf(ar, "/ConvStem_%d", k);
}

static void rewrite_conv_stem(Module *m, StemCapture *c, int k)
{
	Arena *ar = m->arena;
	Graph *g = c->set.nodes[0]->graph;
	Node *last = c->y->producer;
	Node *f = node_new(g, "ConvStem", "ai.wlower", stem_name(ar, c, k));
	Attr *a = node_add_attr(f, "strides", AT_INTS);
	a->n = 2;
	a->ints = arena_alloc(ar, 2 * sizeof(int64_t));
	a->ints[0] = 1;
	a->ints[1] = 2;
	a = node_add_attr(f, "pads", AT_INTS);
	a->n = 2;
	a->ints = arena_alloc(ar, 2 * sizeof(int64_t));
	a->ints[0] = a->ints[1] = 1;
	/* fused_from in graph order; a canonical Gelu stands for its own nodes */
	Node *ordered[MATCH_MAXN];
	set_fused_from_nested(m, f, ordered, match_in_order(&c->set, g, ordered));
	Value *pos = c->pos;
	if (c->slice) {
		/* the first F2 rows of the table, referenced in place */
		Value *v = graph_new_value(g, "conv_stem_pos");
		int64_t dims[2] = {c->F2, c->D};
		Tensor *t = tensor_new(ar, v->name, DT_FLOAT, 2, dims);
		t->data = c->pos->init->data;
		t->nbytes = (size_t)(c->F2 * c->D) * 4;
		graph_set_init(g, v, t);
		pos = v;
	}
	node_insert_before(last, f);
	const Value *keep[1] = {c->y};
	match_remove(&c->set, keep, 1);
	Value *ins[6] = {c->x, c->w1, c->b1, c->w2, c->b2, pos};
	for (int i = 0; i < 6; i++)
		node_add_input(f, ins[i]);
	node_add_output(f, c->y);
}

int pass_fuse_conv_stem(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	int changed = 0;
	for (Node *n = m->graph->first; n; n = n->next) {
		StemCapture c;
		if (!match_conv_stem(n, &c))
			continue;
		Node *prev = n->prev;
		rewrite_conv_stem(m, &c, changed);
		changed++;
		n = prev ? prev : m->graph->first;
	}
	return fusion_done(m, ctx, changed);
}
