/* fuse_matmul_nbits.c — linear layers become ai.wlower.MatMulNBits.
 *
 *   t = MatMul (a, w)                       y = ai.wlower.MatMulNBits <K: int = K, N: int = N,
 *   y = Add (t, bias)            →                 bits: int = 32> (a, w, , , bias)
 *      w: float[K, N] initializer, bias: float[N] initializer (Add either order)
 *
 *   t = com.microsoft.MatMulNBits <K, N, bits: int = 4, block_size> (a, b, scales, zp)
 *   y = Add (bias, t)            →     y = ai.wlower.MatMulNBits <K, N, bits: int = 4,
 *                                              block_size> (a, b, scales, zp, bias)
 *
 *   wt = Transpose <perm = [1, 0]> (w)     y = ai.wlower.MatMulNBits <K, N, bits: int = 32,
 *   y = MatMul (a, wt)            →             trans_b: int = 1> (a, w)
 *      w: float[N, K] initializer (a tied LM head: logits = h · embed_tokensᵀ);
 *      the weight is read in place, never transposed into a copy
 *
 * The Add is optional: a matmul without one becomes the node alone.
 * Input order of ai.wlower.MatMulNBits is A, B, scales?, zero_points?, bias?
 * (docs/OPS.md: no g_idx slot). Bits 4 (and 2, 8) keep B, scales and zero
 * points exactly as com.microsoft stores them; bits 32 keeps the float weight
 * [K, N] in place (no copy, no transpose).
 *
 * Near misses left alone: a MatMul whose B is not a constant 2-D float
 * initializer (attention scores q·kᵀ, attn·v), a MatMul whose A is not float
 * or has an unknown K, a com.microsoft MatMulNBits with g_idx. The Add is
 * not folded (the matmul alone converts) when its other operand is not a
 * constant float [N] vector (a residual add, a [1, N] bias), when the
 * matmul output is also read elsewhere or is a graph output, or when a
 * com.microsoft MatMulNBits already has a bias input.
 *
 * requires  shape-infer (types of a, w), constant initializers
 * maintains topological order, use lists, graph outputs (the fused node
 *           produces the Add's output value, name and type kept)
 * breaks    nothing
 */
#include <string.h>
#include "passes.h"
#include "match.h"

typedef struct MMCapture {
	Node *mm;          /* MatMul or com.microsoft.MatMulNBits */
	Node *add;         /* bias Add, or NULL */
	Value *a, *b, *scales, *zp, *bias;
	int64_t K, N, bits, block;
	bool trans_b;      /* bits 32: b is the [N, K] initializer under a Transpose */
} MMCapture;

static bool elem_is_float(const Value *v)
{
	return v->type.kind == TY_TENSOR && v->type.elem == DT_FLOAT;
}

/* The bias Add after the matmul output t: other operand a float [N] constant. */
static void match_bias(Value *t, MMCapture *c)
{
	Node *add = sole_user(t, OP_Add);
	if (!add || add->noutputs != 1 || add->graph != c->mm->graph)
		return;
	Value *o = other_operand(add, t);
	if (!const_of(o, DT_FLOAT) || o->init->ndim != 1 || o->init->dims[0] != c->N)
		return;
	c->add = add;
	c->bias = o;
}

/* Fills c when n is a matmul we convert; changes nothing. */
static bool match_matmul_nbits(Node *n, MMCapture *c)
{
	memset(c, 0, sizeof *c);
	c->mm = n;
	if (n->noutputs != 1 || !n->outputs[0] || n->ninputs < 2 || !n->inputs[0] || !n->inputs[1])
		return false;
	Value *a = n->inputs[0], *b = n->inputs[1];
	if (!elem_is_float(a) || !a->type.has_shape || a->type.rank < 1)
		return false;
	const Dim *kd = &a->type.dims[a->type.rank - 1];
	if (n->op == OP_MatMul) {
		Node *tp = b->producer;
		if (!b->init && tp && tp->op == OP_Transpose && tp->ninputs == 1 && const_of(tp->inputs[0], DT_FLOAT) &&
		    tp->inputs[0]->init->ndim == 2) {
			const int64_t *perm;
			int np = attr_ints(tp, "perm", &perm);
			if (np >= 0 && !(np == 2 && perm[0] == 1 && perm[1] == 0))
				return false;
			b = tp->inputs[0];
			c->trans_b = true;
			c->K = b->init->dims[1];
			c->N = b->init->dims[0];
		} else if (!const_of(b, DT_FLOAT) || b->init->ndim != 2) {
			return false;
		} else {
			c->K = b->init->dims[0];
			c->N = b->init->dims[1];
		}
		if (kd->kind != DIM_VALUE || kd->value != c->K || c->K <= 0 || c->N <= 0)
			return false;
		c->bits = 32;
	} else if (n->op == OP_MsMatMulNBits) {
		if (n->ninputs > 4 && n->inputs[4])
			return false;            /* g_idx */
		const Attr *ak = node_attr(n, "K"), *an = node_attr(n, "N"), *ab = node_attr(n, "block_size");
		if (!ak || !an || !ab || ak->type != AT_INT || an->type != AT_INT || ab->type != AT_INT)
			return false;
		c->K = ak->i;
		c->N = an->i;
		c->block = ab->i;
		c->bits = attr_int(n, "bits", 4);
		if (c->bits != 2 && c->bits != 4 && c->bits != 8)
			return false;
		if (n->ninputs < 3 || !n->inputs[2] || !b->init || b->init->dtype != DT_UINT8)
			return false;
		c->scales = n->inputs[2];
		if (!elem_is_float(c->scales) && !const_of(c->scales, DT_FLOAT))
			return false;
		c->zp = n->ninputs > 3 ? n->inputs[3] : NULL;
		if (n->ninputs > 5 && n->inputs[5])
			c->bias = n->inputs[5];
		if (c->bias && !(const_of(c->bias, DT_FLOAT) || elem_is_float(c->bias)))
			return false;
	} else {
		return false;
	}
	c->a = a;
	c->b = b;
	if (!c->bias)
		match_bias(n->outputs[0], c);
	return true;
}

/* "/a/b/MatMul" + "/a/b/Add" → "/a/b/matmul"; unnamed → "/MatMulNBits_<k>". */
static const char *fused_name(Arena *ar, const Node *x, const Node *y, int k)
{
	const char *s = x->name;
	size_t n = s ? strlen(s) : 0;
	if (y && y->name) {
		size_t i = 0;
		while (i < n && s[i] == y->name[i])
			i++;
		n = i;
	}
	while (n > 0 && s[n - 1] != '/')
		n--;
	if (n == 0)
		return arena_printf(ar, "/MatMulNBits_%d", k);
	return arena_printf(ar, "%.*smatmul", (int)n, s);
}

static void rewrite_matmul_nbits(Module *m, MMCapture *c, int k)
{
	Arena *ar = m->arena;
	Graph *g = c->mm->graph;
	Node *last = c->add ? c->add : c->mm;
	Value *y = last->outputs[0];
	Node *f = node_new(g, "MatMulNBits", "ai.wlower", fused_name(ar, c->mm, c->add, k));
	node_add_attr(f, "K", AT_INT)->i = c->K;
	node_add_attr(f, "N", AT_INT)->i = c->N;
	node_add_attr(f, "bits", AT_INT)->i = c->bits;
	if (c->bits != 32)
		node_add_attr(f, "block_size", AT_INT)->i = c->block;
	if (c->trans_b)
		node_add_attr(f, "trans_b", AT_INT)->i = 1;
	Node *from[2] = {c->mm, c->add};
	set_fused_from(m, f, from, c->add ? 2 : 1);
	node_insert_before(last, f);
	Value *t = c->mm->outputs[0];
	if (c->add)
		node_remove(c->add);
	node_remove(c->mm);
	node_add_input(f, c->a);
	node_add_input(f, c->b);
	node_add_input(f, c->scales);
	node_add_input(f, c->zp);
	node_add_input(f, c->bias);
	while (f->ninputs > 2 && !f->inputs[f->ninputs - 1])
		f->ninputs--;
	node_add_output(f, y);
	if (c->add && t != y) {
		t->in_value_info = false;
		t->type.kind = TY_NONE;
	}
}

int pass_fuse_matmul_nbits(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	int changed = 0;
	FOR_NODES_SAFE(m->graph, n, nx) {
		MMCapture c;
		if (!match_matmul_nbits(n, &c))
			continue;
		if (c.add && nx == c.add)
			nx = c.add->next;
		rewrite_matmul_nbits(m, &c, changed);
		changed++;
	}
	return fusion_done(m, ctx, changed);
}
