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
 * A QDQ graph (`wlower quantize --int8` with Sigmoid float, the vendor's
 * setting) quantizes both Mul operands:
 *   y = Mul(DequantizeLinear(QuantizeLinear(x, a, za), a, za),
 *           DequantizeLinear(QuantizeLinear(s, b, zb), b, zb))
 *     → y = ai.wlower.SiLU(DequantizeLinear(QuantizeLinear(x, a, za), a, za))
 *       (s's pair goes: SiLU is one op of the fixed-point targets; x's pair
 *       stays, so x keeps its int8 edge and the range its scale gives)
 * each pair as match.h's fake_quant_pair (per tensor, same scale and zero
 * point on both nodes), each DequantizeLinear output read by the Mul only.
 *
 * s must have exactly one reader (the Mul, or the QuantizeLinear of its
 * pair) and not be a graph output; the Mul's other operand must be the very
 * value the Sigmoid reads (or its pair's output). Near misses left alone:
 * Mul(y, Sigmoid(x)) with y ≠ x (a gate, e.g. GLU), a Sigmoid read
 * elsewhere, HardSigmoid, a pair with two scales, a pair on one side only.
 */
#include <string.h>
#include "passes.h"
#include "match.h"

typedef struct SiluMatch {
	Node *sig, *mul;
	Value *x, *y;
	Node *qdq[4];               /* the QDQ form: Q and DQ of s, then of x */
	Value *xd;                  /* the QDQ form: x's DequantizeLinear output */
} SiluMatch;

/* v = DequantizeLinear (QuantizeLinear (x)) read by mul only: x (pushing Q, DQ), else NULL. */
static Value *through_pair(Value *v, const Node *mul, Node **qdq)
{
	Node *dq = v ? v->producer : NULL;
	Node *q = fake_quant_pair(dq);
	if (!q || !sole_read(v) || v->users[0].node != mul)
		return NULL;
	qdq[0] = q;
	qdq[1] = dq;
	return q->inputs[0];
}

/* ---------------------------------------------------------------- match */

static bool match_silu(Node *sig, SiluMatch *S)
{
	memset(S, 0, sizeof *S);
	if (sig->ninputs != 1 || sig->noutputs != 1 || !sig->inputs[0] || !sig->outputs[0])
		return false;
	Value *x = sig->inputs[0], *s = sig->outputs[0];
	Node *mul = sole_user(s, OP_Mul);
	if (mul) {
		if (mul->graph != sig->graph || other_operand(mul, s) != x || !mul->outputs[0])
			return false;
		*S = (SiluMatch){sig, mul, x, mul->outputs[0], {0}};
		return true;
	}
	/* the QDQ form */
	Node *q = sole_user(s, OP_QuantizeLinear);
	Node *dq = q ? sole_user(q->outputs[0], OP_DequantizeLinear) : NULL;
	mul = dq ? sole_user(dq->outputs[0], OP_Mul) : NULL;
	if (!mul || mul->graph != sig->graph || !mul->outputs[0] || mul->ninputs != 2)
		return false;
	Value *o = other_operand(mul, dq->outputs[0]);
	if (!through_pair(dq->outputs[0], mul, S->qdq) || through_pair(o, mul, S->qdq + 2) != x)
		return false;
	S->sig = sig;
	S->mul = mul;
	S->x = x;
	S->xd = o;
	S->y = mul->outputs[0];
	return true;
}

/* ---------------------------------------------------------------- rewrite */

static Node *rewrite_silu(Module *m, SiluMatch *S, int *counter)
{
	Node *from[4] = {S->sig, S->qdq[0], S->qdq[1], S->mul};
	int nf = 4;
	if (!S->qdq[0]) {
		from[1] = S->mul;
		nf = 2;
	}
	Node *named[2] = {S->sig, S->mul};   /* the name from the Sigmoid and the Mul */
	Node *n = node_new(S->mul->graph, "SiLU", "ai.wlower", fused_node_name(m, named, 2, "SiLU", "SiLU", counter));
	Value *dead[3] = {S->sig->outputs[0]};
	for (int i = 0; i < 2 && S->qdq[0]; i++)
		dead[1 + i] = S->qdq[i]->outputs[0];
	replace_nodes(m, n, from, nf, S->mul, S->xd ? &S->xd : &S->x, 1, S->y);
	for (int i = 0; i < 3 && dead[i]; i++) {
		dead[i]->type.kind = TY_NONE;
		dead[i]->in_value_info = false;
	}
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
			for (int i = 0; i < 2; i++)   /* (not s's pair: it goes) */
				if (prev && prev == S.qdq[i]) {
					prev = prev->prev;
					i = -1;
				}
			rewrite_silu(m, &S, &counter);
			nx = prev ? prev->next : m->graph->first;
			changed++;
		}
	}
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
