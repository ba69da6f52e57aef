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
 * com.microsoft SkipSimplifiedLayerNormalization(x, skip, gamma, bias?) with
 * float input and its mean / inv_std_var outputs unread (ONNX Runtime GenAI's
 * residual + norm):
 *   s = Add(x, skip) [; s = Add(s, bias)]   (s replaces input_skip_bias_sum)
 *   y = ai.wlower.RMSNorm<epsilon (default 1e-12), axis = -1>(s, gamma)
 *
 * The match is match_norm (match.h) with rms = true, the matcher
 * canonicalize-layernorm uses with rms = false.
 *
 * requires  fold-constants (two, eps, one, gamma are initializers), types
 *           (the rank and last dim of xf)
 * maintains topological order, use lists, the output value (name, type)
 * breaks    nothing; imports ai.wlower opset 1 when it adds a node. The
 *           Cast producing xf stays (dce removes it when nothing else reads it).
 *
 * Near misses left alone: a Skip/SimplifiedLayerNormalization whose
 * inv_std_var is read, Pow by 3, a mean over another axis, keepdims 0,
 * Div(sd, one), a Mul by something other than xf, a Cast that changes the
 * element type, a gamma that is not a constant vector of D floats, any
 * intermediate read elsewhere.
 */
#include <math.h>
#include <string.h>
#include "passes.h"
#include "match.h"

/* ---------------------------------------------------------------- rewrite */

/* Replaces nodes[0..nn) (the last produces y) by RMSNorm(x, gamma). */
static Node *emit_rms(Module *m, Node *const *nodes, int nn, Value *x, Value *gamma, Value *y, float eps, int *counter)
{
	Node *last = y->producer;
	const char *name = fused_node_name(m, nodes, nn, "RMSNorm", "RMSNorm", counter);
	Node *n = node_new(last->graph, "RMSNorm", "ai.wlower", name);
	Attr *a = node_add_attr(n, "epsilon", AT_FLOAT);
	a->f = eps;
	a = node_add_attr(n, "axis", AT_INT);
	a->i = -1;
	Value *ins[2] = {x, gamma};
	replace_nodes(m, n, nodes, nn, last, ins, 2, y);
	module_set_opset(m, "ai.wlower", 1);
	return n;
}

static void rewrite_rmsnorm(Module *m, NormMatch *R, int *counter)
{
	emit_rms(m, R->set.nodes, R->set.nn, R->x, R->gamma, R->y, R->eps, counter);
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

/* com.microsoft SkipSimplifiedLayerNormalization → Add(s) + RMSNorm. */
static bool rewrite_skip_rms(Module *m, Node *n)
{
	Value *x = n->ninputs > 0 ? n->inputs[0] : NULL;
	if (!x || x->type.kind != TY_TENSOR || x->type.elem != DT_FLOAT)
		return false;
	Node *rn = node_new(n->graph, "RMSNorm", "ai.wlower", n->name ? n->name : "");
	node_add_attr(rn, "epsilon", AT_FLOAT)->f = attr_float(n, "epsilon", 1e-12f);
	node_add_attr(rn, "axis", AT_INT)->i = -1;
	Value *gamma = n->ninputs > 2 ? n->inputs[2] : NULL;
	if (!replace_skip_norm(m, n, rn, &gamma, 1, n->ninputs > 3 ? n->inputs[3] : NULL))
		return false;
	module_set_opset(m, "ai.wlower", 1);
	return true;
}

int pass_canonicalize_rmsnorm(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	int changed = 0, counter = 0;
	FOR_NODES_SAFE(m->graph, n, nx) {
		NormMatch R;
		Node *prev = n->prev;   /* every matched node comes after n */
		if (n->op == OP_Pow && n->ninputs == 2 && match_norm(n, true, &R)) {
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
		} else if (n->op == OP_MsSkipSimplifiedLayerNormalization && rewrite_skip_rms(m, n)) {
			nx = prev ? prev->next : m->graph->first;
			changed++;
		}
	}
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
