/* canonicalize_layernorm.c — decomposed LayerNorm → LayerNormalization.
 *
 * torch.onnx at opset < 17 (nn.LayerNorm), gamma and beta each optional:
 *   mu = ReduceMean<axes = [-1]>(x)          keepdims 1; axes may be [rank-1],
 *   dx = Sub(x, mu)                          or an input (opset 18)
 *   sq = Pow(dx, two)                        two = 2.0
 *   va = ReduceMean<axes = [-1]>(sq)
 *   ve = Add(va, eps)                        either order; eps a scalar
 *   sd = Sqrt(ve)
 *   nx = Div(dx, sd)
 *   gx = Mul(nx, gamma)                      either order; gamma float[D]
 *   y  = Add(gx, beta)                       either order; beta float[D]
 *     → y = LayerNormalization<axis = -1, epsilon = eps>(x, gamma, beta)
 * (gamma absent: an initializer of D ones; beta absent: no third input).
 * The match is match_norm (match.h) with rms = false; canonicalize-rmsnorm
 * uses the same matcher.
 *
 * com.microsoft SkipLayerNormalization(x, skip, gamma, beta?, bias?) whose
 * mean / inv_std_var outputs are unused:
 *   s = Add(x, skip) [; s = Add(s, bias)]   (s replaces input_skip_bias_sum)
 *   y = LayerNormalization<axis = -1, epsilon>(s, gamma, beta)
 *
 * requires  fold-constants (eps, two, gamma, beta are initializers), types
 *           (the rank of x and D = its last dim must be known)
 * maintains topological order, use lists, the output value (name, type)
 * breaks    nothing. Raises the default-domain opset to 17 when it adds a
 *           LayerNormalization. From 14 to 17 only ops we never produce or
 *           fold changed meaning (RoiAlign-16 changed its default
 *           coordinate_transformation_mode; Scatter*-16, Shape-15, Pow-15,
 *           BatchNormalization-15 are supersets with the old defaults), so
 *           the pass does nothing on a graph that contains RoiAlign.
 *
 * Near misses left alone: a reduction over another or several axes,
 * keepdims 0, Pow by anything but 2, Sub/Div operands swapped, a different
 * x in the two Subs, intermediates read elsewhere, gamma/beta that are not
 * constant vectors of D floats.
 */
#include <math.h>
#include <string.h>
#include "passes.h"
#include "match.h"

static bool roi_align_free(Module *m)
{
	FOR_NODES(m->graph, n)
		if (!strcmp(n->op_type, "RoiAlign"))
			return false;
	return true;
}

/* ---------------------------------------------------------------- rewrite */

static Value *ones(Graph *g, int64_t D)
{
	void *d;
	Value *v = new_initializer(g, "layernorm_ones", DT_FLOAT, 1, &D, &d);
	float *p = d;
	for (int64_t i = 0; i < D; i++)
		p[i] = 1.0f;
	return v;
}

/* LayerNormalization(x, gamma, beta?) producing y, before `pos`. */
static Node *emit_ln(Module *m, Node *pos, const char *name, Value *x, Value *gamma, Value *beta, float eps)
{
	Node *n = node_new(pos->graph, "LayerNormalization", "", name);
	Attr *a = node_add_attr(n, "axis", AT_INT);
	a->i = -1;
	a = node_add_attr(n, "epsilon", AT_FLOAT);
	a->f = eps;
	node_insert_before(pos, n);
	node_add_input(n, x);
	node_add_input(n, gamma);
	if (beta)
		node_add_input(n, beta);
	module_set_opset(m, "", 17);
	return n;
}

static void rewrite_layernorm(Module *m, NormMatch *L, int *counter)
{
	Node *last = L->y->producer, *const *nodes = L->set.nodes;
	int nn = L->set.nn;
	Value *gamma = L->gamma ? L->gamma : ones(last->graph, L->D);
	const char *name = fused_node_name(m, nodes, nn, "LayerNorm", "LayerNorm", counter);
	Node *n = emit_ln(m, last, name, L->x, gamma, L->beta, L->eps);
	set_fused_from(m, n, nodes, nn);
	for (int i = 0; i < nn; i++)
		node_remove(nodes[i]);
	node_add_output(n, L->y);
}

/* com.microsoft SkipLayerNormalization → Add(s) + LayerNormalization. */
static bool rewrite_skip(Module *m, Node *n)
{
	Value *beta = n->ninputs > 3 ? n->inputs[3] : NULL, *bias = n->ninputs > 4 ? n->inputs[4] : NULL;
	Node *ln = node_new(n->graph, "LayerNormalization", "", n->name ? n->name : "");
	node_add_attr(ln, "axis", AT_INT)->i = -1;
	node_add_attr(ln, "epsilon", AT_FLOAT)->f = attr_float(n, "epsilon", 1e-12f);
	Value *params[2] = {n->ninputs > 2 ? n->inputs[2] : NULL, beta};
	if (!replace_skip_norm(m, n, ln, params, beta ? 2 : 1, bias))
		return false;
	module_set_opset(m, "", 17);
	return true;
}

int pass_canonicalize_layernorm(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	if (!roi_align_free(m))
		return WL_OK;
	int changed = 0, counter = 0;
	FOR_NODES_SAFE(m->graph, n, nx) {
		if (n->op == OP_ReduceMean) {
			NormMatch L;
			Node *prev = n->prev;   /* every matched node comes after n */
			if (match_norm(n, false, &L)) {
				rewrite_layernorm(m, &L, &counter);
				nx = prev ? prev->next : m->graph->first;
				changed++;
			}
		} else if (!strcmp(n->op_type, "SkipLayerNormalization") && !strcmp(n->domain, "com.microsoft")) {
			Node *prev = n->prev;
			if (rewrite_skip(m, n)) {
				changed++;
				nx = prev ? prev->next : m->graph->first;
			}
		}
	}
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
