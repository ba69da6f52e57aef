/* canonicalize_rmsnorm.c — RMSNorm (Qwen2RMSNorm, LlamaRMSNorm) → ai.wlower.RMSNorm.
 *
 * torch.onnx of HF's RMSNorm (hidden.to(float32); variance = pow(2).mean(-1,
 * keepdim); hidden * rsqrt(variance + eps); weight * hidden.to(dtype)):
 *   xf = Cast<to = 1>(x)                       optional, may have other readers
 *   sq = Pow(xf, two)                          two = 2.0
 *   va = ReduceMean<axes = [-1]>(sq)           keepdims 1; axes attr or input
 *   ve = Add(va, eps)                          either order
 *   sd = Sqrt(ve)
 *   r  = Div(one, sd)                          or Reciprocal(sd)
 *   nx = Mul(xf, r)                            either order
 *        (or nx = Div(xf, sd) in place of the two above)
 *   nc = Cast<to = 1>(nx)                      optional; an identity cast only
 *   y  = Mul(gamma, nc)                        either order; gamma float[D]
 *     → y = ai.wlower.RMSNorm<epsilon = eps, axis = -1>(xf, gamma)
 *
 * SimplifiedLayerNormalization (ai.onnx as ONNX Runtime registers it, or
 * com.microsoft) with axis -1 (or rank-1), float input and only its first
 * output read → ai.wlower.RMSNorm(x, scale) with the same epsilon (default
 * 1e-5).
 *
 * requires  fold-constants (two, eps, one, gamma are initializers), types
 *           (the rank and last dim of xf)
 * maintains topological order, use lists, the output value (name, type)
 * breaks    nothing; imports ai.wlower opset 1 when it adds a node. The
 *           Cast producing xf stays (dce removes it when nothing else reads it).
 *
 * Near misses left alone: Pow by 3, a mean over another axis, keepdims 0,
 * Div(sd, one), a Mul by something other than xf, a Cast that changes the
 * element type, a gamma that is not a constant vector of D floats, any
 * intermediate read elsewhere.
 */
#include <math.h>
#include <string.h>
#include "passes.h"
#include "match.h"

typedef struct RmsMatch {
	Value *x, *y, *gamma;
	float eps;
	Node *nodes[9];
	int nn;
} RmsMatch;

/* ---------------------------------------------------------------- helpers */

static bool inner(const Value *v)
{
	return v && v->nusers == 1 && !v->is_output;
}

static Node *sole_user(const Value *v)
{
	return inner(v) ? v->users[0].node : NULL;
}

static bool scalar_const(const Value *v, double *out)
{
	if (!v || !v->init || v->init->dtype != DT_FLOAT || tensor_numel(v->init) != 1 || !v->init->data)
		return false;
	*out = tensor_get_f64(v->init, 0);
	return true;
}

static Value *other(const Node *n, const Value *v)
{
	if (n->ninputs != 2)
		return NULL;
	if (n->inputs[0] == v && n->inputs[1] != v)
		return n->inputs[1];
	if (n->inputs[1] == v && n->inputs[0] != v)
		return n->inputs[0];
	return NULL;
}

static bool param_vec(const Value *v, int64_t D)
{
	if (!v || !v->init || v->init->dtype != DT_FLOAT || !v->init->data || tensor_numel(v->init) != D)
		return false;
	return v->init->ndim == 1 && v->init->dims[0] == D;
}

static bool mean_last(const Node *n, const Value *x)
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

/* ---------------------------------------------------------------- match */

static bool match_rmsnorm(Node *pw, RmsMatch *R)
{
	memset(R, 0, sizeof *R);
	Value *xf = pw->inputs[0];
	double c;
	if (!xf || xf->type.kind != TY_TENSOR || xf->type.elem != DT_FLOAT || !xf->type.has_shape ||
	    xf->type.rank < 1 || !scalar_const(pw->inputs[1], &c) || c != 2.0)
		return false;
	Dim dl = xf->type.dims[xf->type.rank - 1];
	if (dl.kind != DIM_VALUE)
		return false;
	int64_t D = dl.value;
	Node *va = sole_user(pw->outputs[0]);
	if (!mean_last(va, pw->outputs[0]))
		return false;
	Node *ad = sole_user(va->outputs[0]);
	if (!ad || ad->op != OP_Add || !scalar_const(other(ad, va->outputs[0]), &c) || !(c >= 0) || c > 1.0)
		return false;
	R->eps = (float)c;
	Node *sq = sole_user(ad->outputs[0]);
	if (!sq || sq->op != OP_Sqrt)
		return false;
	Node *seq[] = {pw, va, ad, sq};
	memcpy(R->nodes, seq, sizeof seq);
	R->nn = 4;
	Node *k = sole_user(sq->outputs[0]);
	Value *nx;
	if (k && k->op == OP_Div && k->inputs[0] == xf && k->inputs[1] == sq->outputs[0]) {
		R->nodes[R->nn++] = k;          /* nx = xf / sd */
		nx = k->outputs[0];
	} else {
		bool recip = k && k->op == OP_Reciprocal;
		bool div1 = k && k->op == OP_Div && k->inputs[1] == sq->outputs[0] && scalar_const(k->inputs[0], &c) &&
		            c == 1.0;
		if (!recip && !div1)
			return false;
		R->nodes[R->nn++] = k;
		Node *mu = sole_user(k->outputs[0]);
		if (!mu || mu->op != OP_Mul || other(mu, k->outputs[0]) != xf)
			return false;
		R->nodes[R->nn++] = mu;
		nx = mu->outputs[0];
	}
	Node *u = sole_user(nx);
	if (u && u->op == OP_Cast && attr_int(u, "to", 0) == DT_FLOAT) {
		R->nodes[R->nn++] = u;
		nx = u->outputs[0];
		u = sole_user(nx);
	}
	if (!u || u->op != OP_Mul || !param_vec(other(u, nx), D))
		return false;
	R->gamma = other(u, nx);
	R->nodes[R->nn++] = u;
	R->x = xf;
	R->y = u->outputs[0];
	return true;
}

/* ---------------------------------------------------------------- rewrite */

/* Replaces nodes[0..nn) (the last produces y) by RMSNorm(x, gamma). */
static Node *emit_rms(Module *m, Node **nodes, int nn, Value *x, Value *gamma, Value *y, float eps, int *counter)
{
	Node *last = y->producer;
	const char *name = fused_node_name(m, nodes, nn, "RMSNorm", "RMSNorm", counter);
	Node *n = node_new(last->graph, "RMSNorm", "ai.wlower", name);
	Attr *a = node_add_attr(n, "epsilon", AT_FLOAT);
	a->f = eps;
	a = node_add_attr(n, "axis", AT_INT);
	a->i = -1;
	set_fused_from(m, n, nodes, nn);
	node_insert_before(last, n);
	node_add_input(n, x);
	node_add_input(n, gamma);
	for (int i = 0; i < nn; i++)
		node_remove(nodes[i]);
	node_add_output(n, y);
	module_set_opset(m, "ai.wlower", 1);
	return n;
}

static void rewrite_rmsnorm(Module *m, RmsMatch *R, int *counter)
{
	emit_rms(m, R->nodes, R->nn, R->x, R->gamma, R->y, R->eps, counter);
}

static bool match_simplified(Node *n)
{
	if (strcmp(n->op_type, "SimplifiedLayerNormalization") ||
	    !(domain_is_default(n->domain) || !strcmp(n->domain, "com.microsoft")))
		return false;
	if (n->ninputs != 2 || !n->inputs[0] || !n->inputs[1] || n->noutputs < 1 || !n->outputs[0])
		return false;
	for (int i = 1; i < n->noutputs; i++)
		if (n->outputs[i] && (n->outputs[i]->nusers || n->outputs[i]->is_output))
			return false;
	Value *x = n->inputs[0];
	if (x->type.kind != TY_TENSOR || x->type.elem != DT_FLOAT || !x->type.has_shape || x->type.rank < 1)
		return false;
	int64_t ax = attr_int(n, "axis", -1);
	return ax == -1 || ax == x->type.rank - 1;
}

int pass_canonicalize_rmsnorm(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	int changed = 0, counter = 0;
	FOR_NODES_SAFE(m->graph, n, nx) {
		RmsMatch R;
		Node *prev = n->prev;   /* every matched node comes after n */
		if (n->op == OP_Pow && n->ninputs == 2 && match_rmsnorm(n, &R)) {
			rewrite_rmsnorm(m, &R, &counter);
			nx = prev ? prev->next : m->graph->first;
			changed++;
		} else if (match_simplified(n)) {
			Node *one[1] = {n};
			Value *y = n->outputs[0];
			for (int i = 1; i < n->noutputs; i++)
				if (n->outputs[i]) {
					n->outputs[i]->type.kind = TY_NONE;
					n->outputs[i]->in_value_info = false;
				}
			emit_rms(m, one, 1, n->inputs[0], n->inputs[1], y, attr_float(n, "epsilon", 1e-5f), &counter);
			nx = prev ? prev->next : m->graph->first;
			changed++;
		}
	}
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
