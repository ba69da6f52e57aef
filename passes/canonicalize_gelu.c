/* canonicalize_gelu.c — GELU in any of its exported forms → ai.wlower.Gelu.
 *
 * Erf form (torch.onnx of nn.GELU / F.gelu, every multiplication order):
 *   d = Div(x, c)           c = sqrt(2)      (or d = Mul(x, 1/sqrt(2)))
 *   e = Erf(d)
 *   a = Add(e, one)         one = 1.0        (either operand order)
 *   m = Mul(x, a)                            (either order)
 *   y = Mul(m, half)        half = 0.5       (either order)
 * or, with the half applied to x first (HF: x * 0.5 * (1 + erf(...))):
 *   h = Mul(x, half)
 *   y = Mul(h, a)
 *     → y = ai.wlower.Gelu<approximate = "none">(x)
 *
 * tanh form (HF NewGELU / gelu_pytorch_tanh):
 *   c3 = Pow(x, three)      (or Mul(Mul(x, x), x), Mul(x, Mul(x, x)))
 *   k  = Mul(c3, 0.044715)
 *   s  = Add(x, k)
 *   u  = Mul(s, sqrt(2/pi))
 *   t  = Tanh(u)
 *   a  = Add(t, one)    then the same 0.5·x·a tail as above
 *     → y = ai.wlower.Gelu<approximate = "tanh">(x)
 *
 * com.microsoft Gelu(x) → ai.wlower.Gelu<approximate = "none">(x);
 * com.microsoft FastGelu(x, bias?) → [Add(x, bias) →] ai.wlower.Gelu<"tanh">;
 * com.microsoft BiasGelu(x, bias) → Add(x, bias) → ai.wlower.Gelu<"none">.
 *
 * requires  fold-constants (the constants must be initializers), types
 * maintains topological order, use lists, the output value (name, type)
 * breaks    nothing; imports ai.wlower opset 1 when it adds a node
 *
 * Constants match within 1e-5 relative; every intermediate must have exactly
 * one reader and not be a graph output (x may have any number). A constant
 * off by more (Div by 1.5, Add of 2, Mul by 0.25) is a near miss: left alone.
 */
#include <math.h>
#include <string.h>
#include "passes.h"
#include "match.h"

typedef struct GeluMatch {
	MatchSet set;
	Value *x, *y;
	bool tanh_form;
} GeluMatch;

/* ---------------------------------------------------------------- match */

/* n = Op(a, k) or Op(k, a) with k constant ≈ want: returns a. */
static Value *other_than_const(const Node *n, double want)
{
	if (!n || n->ninputs != 2)
		return NULL;
	if (float_scalar_near(n->inputs[1], want, 1e-5))
		return n->inputs[0];
	if (n->op != OP_Div && n->op != OP_Sub && float_scalar_near(n->inputs[0], want, 1e-5))
		return n->inputs[1];
	return NULL;
}

/* From t = Erf(d) or Tanh(u): a = Add(t, 1), then the 0.5·x·a tail. Fills
 * y and nodes. */
static bool match_tail(GeluMatch *g, Value *t)
{
	Node *ad = sole_user(t, OP_Add);
	if (!ad || other_than_const(ad, 1.0) != t)
		return false;
	match_push(&g->set, ad);
	Value *a = ad->outputs[0];
	Node *m = sole_user(a, OP_Mul);
	if (!m)
		return false;
	Value *o = other_operand(m, a);
	if (!o)
		return false;
	if (o == g->x) {                    /* m = x·a, y = m·0.5 */
		Node *h = sole_user(m->outputs[0], OP_Mul);
		if (!h || other_than_const(h, 0.5) != m->outputs[0])
			return false;
		match_push(&g->set, m);
		match_push(&g->set, h);
		g->y = h->outputs[0];
		return true;
	}
	Node *h = producer(o, OP_Mul);      /* h = x·0.5, y = h·a */
	if (!h || !sole_read(o) || other_than_const(h, 0.5) != g->x)
		return false;
	match_push(&g->set, h);
	match_push(&g->set, m);
	g->y = m->outputs[0];
	return true;
}

static bool match_erf_gelu(Node *erf, GeluMatch *g)
{
	Value *dv = erf->inputs[0];
	Node *d = producer(dv, OP_Div);
	Value *x = d ? other_than_const(d, M_SQRT2) : NULL;
	if (!x) {
		d = producer(dv, OP_Mul);
		x = d ? other_than_const(d, M_SQRT1_2) : NULL;
	}
	if (!x || !sole_read(dv))
		return false;
	g->x = x;
	match_push(&g->set, d);
	match_push(&g->set, erf);
	return match_tail(g, erf->outputs[0]);
}

/* x³ as Pow(x, 3) or a product of three x: returns x. */
static Value *cube_of(Value *c, GeluMatch *g)
{
	if (!sole_read(c))
		return NULL;
	Node *p = producer(c, OP_Pow);
	if (p) {
		Value *x = other_than_const(p, 3.0);
		if (x && p->inputs[0] == x) {
			match_push(&g->set, p);
			return x;
		}
		return NULL;
	}
	Node *m = producer(c, OP_Mul);
	if (!m)
		return NULL;
	for (int s = 0; s < 2; s++) {
		Value *sq = m->inputs[s], *x = m->inputs[1 - s];
		Node *q = producer(sq, OP_Mul);
		if (q && sole_read(sq) && q->inputs[0] == x && q->inputs[1] == x) {
			match_push(&g->set, q);
			match_push(&g->set, m);
			return x;
		}
	}
	return NULL;
}

static bool match_tanh_gelu(Node *th, GeluMatch *g)
{
	Value *uv = th->inputs[0];
	Node *u = producer(uv, OP_Mul);
	Value *sv = u && sole_read(uv) ? other_than_const(u, 0.7978845608028654) : NULL;
	if (sv == uv)
		return false;
	Node *s = producer(sv, OP_Add);
	if (!s || !sole_read(sv))
		return false;
	for (int i = 0; i < 2 && !g->x; i++) {
		Value *kv = s->inputs[i], *x = s->inputs[1 - i];
		Node *k = producer(kv, OP_Mul);
		Value *c = k && sole_read(kv) ? other_than_const(k, 0.044715) : NULL;
		int mark = g->set.nn;
		if (c && cube_of(c, g) == x) {
			g->x = x;
			match_push(&g->set, k);
		} else {
			match_truncate(&g->set, mark);
		}
	}
	if (!g->x)
		return false;
	match_push(&g->set, s);
	match_push(&g->set, u);
	match_push(&g->set, th);
	g->tanh_form = true;
	return match_tail(g, th->outputs[0]);
}

/* The erf or tanh form from its Erf or Tanh node. */
static bool match_gelu(Node *n, GeluMatch *g)
{
	memset(g, 0, sizeof *g);
	match_init(&g->set, 10);
	if (n->op == OP_Erf && n->ninputs == 1)
		return match_erf_gelu(n, g);
	if (n->op == OP_Tanh && n->ninputs == 1)
		return match_tanh_gelu(n, g);
	return false;
}

/* ---------------------------------------------------------------- rewrite */

/* Replaces nodes[0..nn) (y = the output of last) by Gelu(x). */
static Node *emit_gelu(Module *m, Node *const *nodes, int nn, Node *last, Value *x, Value *y, bool tanh_form,
                       int *counter)
{
	Graph *g = last->graph;
	const char *name = fused_node_name(m, nodes, nn, "Gelu", "Gelu", counter);
	Node *n = node_new(g, "Gelu", "ai.wlower", name);
	set_string_attr(m, n, "approximate", tanh_form ? "tanh" : "none");
	replace_nodes(m, n, nodes, nn, last, &x, 1, y);
	module_set_opset(m, "ai.wlower", 1);
	return n;
}

static void rewrite_gelu(Module *m, GeluMatch *g, int *counter)
{
	/* nodes are pushed in graph order except for the tail; sort by position */
	Node *last = g->y->producer;
	emit_gelu(m, g->set.nodes, g->set.nn, last, g->x, g->y, g->tanh_form, counter);
}

/* com.microsoft Gelu / FastGelu / BiasGelu: one node for one node (+ bias Add). */
static bool rewrite_ms(Module *m, Node *n, int *counter)
{
	if (n->noutputs != 1 || !n->outputs[0] || n->ninputs < 1 || !n->inputs[0])
		return false;
	Value *x = n->inputs[0], *y = n->outputs[0];
	bool tanh_form = n->op == OP_MsFastGelu;
	if (n->op == OP_MsBiasGelu && (n->ninputs < 2 || !n->inputs[1]))
		return false;
	if (n->op != OP_MsGelu && n->ninputs > 1 && n->inputs[1]) {
		Value *b = n->inputs[1];
		Value *s = graph_new_value(n->graph, "gelu_bias_sum");
		s->type = type_copy(m->arena, &y->type);
		Node *add = node_new(n->graph, "Add", "", arena_printf(m->arena, "%s/bias_add", n->name ? n->name : ""));
		node_add_input(add, x);
		node_add_input(add, b);
		node_add_output(add, s);
		node_insert_before(n, add);
		x = s;
	}
	Node *one[1] = {n};
	emit_gelu(m, one, 1, n, x, y, tanh_form, counter);
	return true;
}

int pass_canonicalize_gelu(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	int changed = 0, counter = 0;
	Graph *g = m->graph;
	bool again = true;
	while (again) {
		again = false;
		FOR_NODES(g, n) {
			GeluMatch gm;
			if ((n->op == OP_MsGelu || n->op == OP_MsFastGelu || n->op == OP_MsBiasGelu) && rewrite_ms(m, n, &counter)) {
				changed++;
				again = true;
				break;
			}
			if (match_gelu(n, &gm)) {
				rewrite_gelu(m, &gm, &counter);
				changed++;
				again = true;
				break;
			}
		}
	}
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
