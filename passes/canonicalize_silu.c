/* canonicalize_silu.c — x·Sigmoid(x) → ai.wlower.SiLU.
 *
 * torch.onnx of nn.SiLU / F.silu (Qwen2's MLP act_fn) at opset < 20:
 *   s = Sigmoid(x)
 *   y = Mul(x, s)            (or Mul(s, x))
 *     → y = ai.wlower.SiLU(x)
 *
 * requires  nothing beyond a verified graph (types are copied, not inferred)
 * maintains topological order, use lists, the output value (name, type)
 * breaks    nothing; imports ai.wlower opset 1 when it adds a node
 *
 * s must have exactly one reader (the Mul) and not be a graph output; the
 * Mul's other operand must be the very value the Sigmoid reads. Near misses
 * left alone: Mul(y, Sigmoid(x)) with y ≠ x (a gate, e.g. GLU), a Sigmoid
 * read elsewhere, HardSigmoid.
 */
#include <string.h>
#include "passes.h"
#include "match.h"

typedef struct SiluMatch {
	Node *sig, *mul;
	Value *x, *y;
} SiluMatch;

/* ---------------------------------------------------------------- match */

static bool match_silu(Node *sig, SiluMatch *S)
{
	memset(S, 0, sizeof *S);
	if (sig->ninputs != 1 || sig->noutputs != 1 || !sig->inputs[0] || !sig->outputs[0])
		return false;
	Value *x = sig->inputs[0], *s = sig->outputs[0];
	Node *mul = sole_user(s, OP_Mul);
	if (!mul || mul->graph != sig->graph || other_operand(mul, s) != x || !mul->outputs[0])
		return false;
	*S = (SiluMatch){sig, mul, x, mul->outputs[0]};
	return true;
}

/* ---------------------------------------------------------------- rewrite */

static Node *rewrite_silu(Module *m, SiluMatch *S, int *counter)
{
	Node *from[2] = {S->sig, S->mul};
	Node *n = node_new(S->mul->graph, "SiLU", "ai.wlower", fused_node_name(m, from, 2, "SiLU", "SiLU", counter));
	Value *s = S->sig->outputs[0];
	replace_nodes(m, n, from, 2, S->mul, &S->x, 1, S->y);
	s->type.kind = TY_NONE;
	s->in_value_info = false;
	module_set_opset(m, "ai.wlower", 1);
	return n;
}

int pass_canonicalize_silu(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	int changed = 0, counter = 0;
	FOR_NODES_SAFE(m->graph, n, nx) {
		SiluMatch S;
		if (n->op == OP_Sigmoid && match_silu(n, &S)) {
			Node *prev = n->prev;   /* nodes between Sigmoid and Mul stay to visit */
			rewrite_silu(m, &S, &counter);
			nx = prev ? prev->next : m->graph->first;
			changed++;
		}
	}
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
