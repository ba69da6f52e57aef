/* fuse_qdq_matmul.c — a QDQ-wrapped MatMul with int8 weights becomes
 * ai.wlower.QMatMul, an int8 GEMM with int32 accumulation (docs/OPS.md).
 *
 * The form `wlower quantize --int8` and ONNX Runtime's quantize_static
 * write (weights as int8 initializers):
 *   xd = DequantizeLinear(xq, sx, zx)         xq int8 (any producer, usually
 *                                             QuantizeLinear); sx float and zx int8
 *                                             scalars (per tensor)
 *   wd = DequantizeLinear(wq, sw [, zw])      wq a constant int8 [K, N]; sw a
 *                                             constant float [] / [1] or [N] with
 *                                             axis 1; zw absent or all 0 (symmetric)
 *   y  = MatMul(xd, wd)
 *     → y = ai.wlower.QMatMul(xq, sx, zx, wq, sw)
 * The DequantizeLinear nodes stay for their other readers (dce removes them
 * when there are none). Numerics: the products are summed exactly in int32
 * and scaled once by sx·sw[n]; the unfused graph sums float products, so the
 * two differ by float rounding only (the lit test runs both).
 *
 * Near misses left alone: a weight DequantizeLinear with a non-zero zero
 * point, of a weight that is not a constant (or not int8, or not 2-D), with a
 * per-channel axis other than 1; an activation DequantizeLinear with a
 * per-axis scale or of a uint8 tensor; a MatMul whose A is not a
 * DequantizeLinear output.
 *
 * requires  shape-infer (xq's type), constant initializers
 * maintains topological order, use lists, the output value (name, type)
 * breaks    nothing; imports ai.wlower opset 1 when it adds a node
 */
#include <string.h>
#include "passes.h"
#include "match.h"

typedef struct QmmCapture {
	Node *mm, *xdq, *wdq;
	Value *xq, *sx, *zx, *wq, *sw;
} QmmCapture;

static bool scalar_const(const Value *v, int dtype)
{
	return const_of(v, dtype) && tensor_numel(v->init) == 1 && v->init->ndim <= 1;
}

static bool all_zero(const Value *v)
{
	for (int64_t i = 0; i < tensor_numel(v->init); i++)
		if (tensor_get_i64(v->init, i) != 0)
			return false;
	return true;
}

/* Fills c when n is a QDQ MatMul we fuse; changes nothing. */
static bool match_qdq_matmul(Node *n, QmmCapture *c)
{
	memset(c, 0, sizeof *c);
	if (n->op != OP_MatMul || n->ninputs != 2 || n->noutputs != 1 || !n->inputs[0] || !n->inputs[1])
		return false;
	Node *xd = n->inputs[0]->producer, *wd = n->inputs[1]->producer;
	if (!xd || xd->op != OP_DequantizeLinear || !wd || wd->op != OP_DequantizeLinear)
		return false;
	if (xd->ninputs != 3 || !xd->inputs[0] || !scalar_const(xd->inputs[1], DT_FLOAT) ||
	    !scalar_const(xd->inputs[2], DT_INT8))
		return false;
	const Value *xq = xd->inputs[0];
	if (xq->type.kind != TY_TENSOR || xq->type.elem != DT_INT8)
		return false;
	const Value *wq = wd->inputs[0], *sw = wd->ninputs > 1 ? wd->inputs[1] : NULL;
	if (!wq || !const_of(wq, DT_INT8) || wq->init->ndim != 2 || !sw || !const_of(sw, DT_FLOAT))
		return false;
	int64_t N = wq->init->dims[1], ns = tensor_numel(sw->init);
	if (!(ns == 1 && sw->init->ndim <= 1) && !(sw->init->ndim == 1 && ns == N && attr_int(wd, "axis", 1) == 1))
		return false;
	if (wd->ninputs > 2 && wd->inputs[2] && (!const_of(wd->inputs[2], DT_INT8) || !all_zero(wd->inputs[2])))
		return false;
	if (attr_int(xd, "block_size", 0) != 0 || attr_int(wd, "block_size", 0) != 0)
		return false;
	*c = (QmmCapture){.mm = n, .xdq = xd, .wdq = wd, .xq = xd->inputs[0], .sx = xd->inputs[1],
	                  .zx = xd->inputs[2], .wq = wd->inputs[0], .sw = wd->inputs[1]};
	return true;
}

static void rewrite_qdq_matmul(Module *m, const QmmCapture *c)
{
	Graph *g = c->mm->graph;
	const char *name = c->mm->name && *c->mm->name ? arena_printf(m->arena, "%s_QMatMul", c->mm->name) : "";
	Node *f = node_new(g, "QMatMul", "ai.wlower", name);
	node_add_input(f, c->xq);
	node_add_input(f, c->sx);
	node_add_input(f, c->zx);
	node_add_input(f, c->wq);
	node_add_input(f, c->sw);
	Node *from[1] = {c->mm};
	set_fused_from(m, f, from, 1);
	Value *y = c->mm->outputs[0];
	node_insert_before(c->mm, f);
	node_remove(c->mm);
	node_add_output(f, y);
	module_set_opset(m, "ai.wlower", 1);
}

int pass_fuse_qdq_matmul(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	FOR_NODES_SAFE(m->graph, n, nx) {
		QmmCapture c;
		if (match_qdq_matmul(n, &c)) {
			rewrite_qdq_matmul(m, &c);
			if (ctx)
				ctx->changed++;
		}
	}
	return WL_OK;
}
