/* fuse_qdq_matmul.c — a QDQ-wrapped MatMul with int8 weights becomes
 * ai.wlower.QMatMul, an int8 GEMM with int32 accumulation (docs/OPS.md).
 *
 * The forms `wlower quantize --int8` and ONNX Runtime's quantize_static
 * write, in ONNX text:
 *
 *   xd = DequantizeLinear (xq, sx, zx)     xq int8 (any producer, usually a
 *                                          QuantizeLinear); sx float, zx int8
 *                                          constant scalars (per tensor)
 *   wd = DequantizeLinear (wq, sw [, zw])  weights as int8: wq a constant int8
 *                                          [K, N]; sw a constant float [] / [1],
 *                                          or [N] with axis 1 (per output
 *                                          channel); zw absent or all 0
 * or, weights as QDQ pairs (the vendor's AddQDQPairToWeight):
 *   wq = QuantizeLinear (wf, sw, zw)       wf a constant float [K, N], the same
 *   wd = DequantizeLinear (wq, sw, zw)     scale (and axis) on both nodes
 *   y  = MatMul (xd, wd)
 * optionally followed by the output quantization
 *   yq = QuantizeLinear (y, sy, zy)        y read by this node only; sy float,
 *                                          zy int8 constant scalars
 *
 *     → y  = ai.wlower.QMatMul (xq, sx, zx, wq, sw)            (float out)
 *     → yq = ai.wlower.QMatMul (xq, sx, zx, wq, sw, sy, zy)    (int8 out)
 *
 * QDQ-pair weights are quantized here, once per weight QuantizeLinear (shared
 * by every MatMul that reads it), exactly as QuantizeLinear does (rintf(w / s)
 * + 0, saturated to [-128, 127]) into a new int8 initializer.
 * The DequantizeLinear / QuantizeLinear nodes of the weights stay for their
 * other readers (dce removes them when there are none).
 * Numerics: products summed exactly in int32, scaled once by sx·sw[n] (one
 * float rounding; the unfused graph sums float products, so the two differ by
 * float rounding only), then quantized as QuantizeLinear does.
 *
 * Near misses left alone: a weight DequantizeLinear with a non-zero zero
 * point, of a weight that is not a constant (or not int8, or not 2-D), with a
 * per-channel axis other than 1; a QDQ-pair weight whose QuantizeLinear uses
 * another scale; an activation DequantizeLinear with a per-axis scale or of a
 * uint8 tensor; a MatMul whose A is not a DequantizeLinear output. An output
 * QuantizeLinear with a uint8 zero point (or none: uint8) is not absorbed (the
 * MatMul still fuses, float out).
 *
 * requires  shape-infer (xq's type), constant initializers
 * maintains topological order, use lists, the output value (name, type)
 * breaks    nothing; imports ai.wlower opset 1 when it adds a node
 */
#include <math.h>
#include <string.h>
#include "passes.h"
#include "match.h"

typedef struct QmmCapture {
	Node *mm, *xdq, *wdq, *wq_node, *yq_node;
	Value *xq, *sx, *zx, *wq, *sw, *sy, *zy;
} QmmCapture;

static bool scalar_const(const Value *v, int dtype)
{
	return v && const_of(v, dtype) && tensor_numel(v->init) == 1 && v->init->ndim <= 1;
}

static bool all_zero(const Value *v)
{
	for (int64_t i = 0; i < tensor_numel(v->init); i++)
		if (tensor_get_i64(v->init, i) != 0)
			return false;
	return true;
}

/* zero point input of a weight Q/DQ: absent, or an int8 constant of zeros */
static bool zero_zp(const Node *q)
{
	const Value *z = q->ninputs > 2 ? q->inputs[2] : NULL;
	return !z || (const_of(z, DT_INT8) && all_zero(z));
}

static bool same_const(const Value *a, const Value *b)
{
	if (a == b)
		return true;
	if (!a || !b || !a->init || !b->init || a->init->dtype != b->init->dtype ||
	    tensor_numel(a->init) != tensor_numel(b->init))
		return false;
	return a->init->nbytes == b->init->nbytes && !memcmp(a->init->data, b->init->data, a->init->nbytes);
}

/* the weight scale: [] / [1] per tensor, or [N] on axis 1 of a [K, N] weight */
static bool weight_scale_ok(const Node *q, const Value *sw, int64_t N)
{
	if (!sw || !const_of(sw, DT_FLOAT))
		return false;
	int64_t ns = tensor_numel(sw->init), ax = attr_int(q, "axis", 1);
	if (attr_int(q, "block_size", 0) != 0)
		return false;
	return (ns == 1 && sw->init->ndim <= 1) || (sw->init->ndim == 1 && ns == N && (ax == 1 || ax == -1));
}

/* The weight of a DequantizeLinear: int8 constant, or a QDQ pair of a float constant. */
static bool match_weight(Node *wd, QmmCapture *c)
{
	if (!wd || wd->op != OP_DequantizeLinear || wd->ninputs < 2 || !wd->inputs[0] || !zero_zp(wd))
		return false;
	Value *w = wd->inputs[0], *sw = wd->inputs[1];
	Node *q = w->producer;
	if (const_of(w, DT_INT8) && w->init->ndim == 2) {
		if (!weight_scale_ok(wd, sw, w->init->dims[1]))
			return false;
	} else if (q && q->op == OP_QuantizeLinear && q->ninputs >= 2 && q->inputs[0] && const_of(q->inputs[0], DT_FLOAT) &&
	           q->inputs[0]->init->ndim == 2 && q->ninputs > 2 && q->inputs[2] && const_of(q->inputs[2], DT_INT8) &&
	           zero_zp(q) && same_const(q->inputs[1], sw) && attr_int(q, "axis", 1) == attr_int(wd, "axis", 1) &&
	           attr_int(q, "saturate", 1) == 1) {
		if (!weight_scale_ok(wd, sw, q->inputs[0]->init->dims[1]) || !weight_scale_ok(q, q->inputs[1], q->inputs[0]->init->dims[1]))
			return false;
		c->wq_node = q;
	} else {
		return false;
	}
	c->wdq = wd;
	c->wq = w;
	c->sw = sw;
	return true;
}

/* Fills c when n is a QDQ MatMul we fuse; changes nothing. */
static bool match_qdq_matmul(Node *n, QmmCapture *c)
{
	memset(c, 0, sizeof *c);
	if (n->op != OP_MatMul || n->ninputs != 2 || n->noutputs != 1 || !n->inputs[0] || !n->inputs[1] || !n->outputs[0])
		return false;
	Node *xd = n->inputs[0]->producer;
	if (!xd || xd->op != OP_DequantizeLinear)
		return false;
	if (xd->ninputs != 3 || !xd->inputs[0] || !scalar_const(xd->inputs[1], DT_FLOAT) ||
	    !scalar_const(xd->inputs[2], DT_INT8) || attr_int(xd, "block_size", 0) != 0)
		return false;
	const Value *xq = xd->inputs[0];
	if (xq->type.kind != TY_TENSOR || xq->type.elem != DT_INT8)
		return false;
	if (!match_weight(n->inputs[1]->producer, c))
		return false;
	c->mm = n;
	c->xdq = xd;
	c->xq = xd->inputs[0];
	c->sx = xd->inputs[1];
	c->zx = xd->inputs[2];
	/* the output QuantizeLinear, when y has no other reader */
	Node *u = sole_user(n->outputs[0], OP_QuantizeLinear);
	if (u && u->ninputs == 3 && u->inputs[0] == n->outputs[0] && scalar_const(u->inputs[1], DT_FLOAT) &&
	    scalar_const(u->inputs[2], DT_INT8) && u->noutputs == 1 && u->outputs[0] &&
	    attr_int(u, "block_size", 0) == 0 && attr_int(u, "saturate", 1) == 1) {
		c->yq_node = u;
		c->sy = u->inputs[1];
		c->zy = u->inputs[2];
	}
	return true;
}

/* int8 weights of a QDQ pair, as QuantizeLinear computes them */
__attribute__((optimize("fp-contract=off")))
static Value *quantize_weight(Module *m, const QmmCapture *c)
{
	const Value *wf = c->wq_node->inputs[0];
	const Tensor *s = c->sw->init;
	int64_t K = wf->init->dims[0], N = wf->init->dims[1], ns = tensor_numel(s);
	Graph *g = c->mm->graph;
	int64_t dims[2] = {K, N};
	void *d;
	Value *v = new_initializer(g, arena_printf(m->arena, "%s_int8", wf->name), DT_INT8, 2, dims, &d);
	int8_t *q = d;
	for (int64_t k = 0; k < K; k++)
		for (int64_t j = 0; j < N; j++) {
			float w = (float)tensor_get_f64(wf->init, k * N + j), sc = (float)tensor_get_f64(s, ns == 1 ? 0 : j);
			float r = w != w ? 0.0f : rintf(w / sc);
			q[k * N + j] = (int8_t)(r < -128.0f ? -128.0f : r > 127.0f ? 127.0f : r);
		}
	return v;
}

/* QDQ-pair weights quantized so far (one int8 initializer per weight
 * QuantizeLinear, however many MatMuls read it) */
typedef struct WCache {
	const Node *q[64];
	Value *v[64];
	int n;
} WCache;

static Value *weight_int8(Module *m, const QmmCapture *c, WCache *wc)
{
	for (int i = 0; i < wc->n; i++)
		if (wc->q[i] == c->wq_node)
			return wc->v[i];
	Value *v = quantize_weight(m, c);
	if (wc->n < 64) {
		wc->q[wc->n] = c->wq_node;
		wc->v[wc->n++] = v;
	}
	return v;
}

static void rewrite_qdq_matmul(Module *m, const QmmCapture *c, WCache *wc)
{
	Graph *g = c->mm->graph;
	const char *name = c->mm->name && *c->mm->name ? arena_printf(m->arena, "%s_QMatMul", c->mm->name) : "";
	Node *f = node_new(g, "QMatMul", "ai.wlower", name);
	node_add_input(f, c->xq);
	node_add_input(f, c->sx);
	node_add_input(f, c->zx);
	node_add_input(f, c->wq_node ? weight_int8(m, c, wc) : c->wq);
	node_add_input(f, c->sw);
	Node *from[2] = {c->mm, c->yq_node};
	set_fused_from(m, f, from, c->yq_node ? 2 : 1);
	Value *y = c->yq_node ? c->yq_node->outputs[0] : c->mm->outputs[0];
	if (c->yq_node) {
		node_add_input(f, c->sy);
		node_add_input(f, c->zy);
	}
	node_insert_before(c->mm, f);
	if (c->yq_node)
		node_remove(c->yq_node);
	node_remove(c->mm);
	node_add_output(f, y);
	module_set_opset(m, "ai.wlower", 1);
}

int pass_fuse_qdq_matmul(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	WCache wc = {.n = 0};
	FOR_NODES_SAFE(m->graph, n, nx) {
		QmmCapture c;
		if (match_qdq_matmul(n, &c)) {
			if (c.yq_node && nx == c.yq_node)
				nx = c.yq_node->next;
			rewrite_qdq_matmul(m, &c, &wc);
			if (ctx)
				ctx->changed++;
		}
	}
	return WL_OK;
}
