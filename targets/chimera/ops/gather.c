/* gather.c — Gather along axis 0 of a constant float table (token
 * embeddings) → nn::embedding (ccl/nn.hpp); an id outside [-V, V) ends the
 * run with the message of every target (ck_index_site). Blob "table": the table in the
 * output's format; the row sets `gathers`: alloc.c leaves the table in
 * weights.bin and counts only the gathered rows as read. ALU ops ids·D.
 */
#include <math.h>
#include <string.h>
#include "ops.h"

typedef struct Emb { int64_t NI, V, D; int fy; } Emb;

static int emb_dims(const Node *n, Emb *e, Diag *d)
{
	if (ck_need_const(n, 0, d) || ck_need_shape(n, nin(n, 1), d))
		return WL_ERR;
	if (attr_int(n, "axis", 0) != 0)
		return KFAIL(n, "only axis 0 is supported");
	const Tensor *t = nin(n, 0)->init;
	Value *ids = nin(n, 1);
	if (ids->type.elem != DT_INT64 && ids->type.elem != DT_INT32)
		return KFAIL(n, "tensor '%s': ids must be int64 or int32", ids->name);
	if (t->ndim < 1 || (t->dtype != DT_FLOAT && t->dtype != DT_FLOAT16))
		return KFAIL(n, "tensor '%s': a float table is required", nin(n, 0)->name);
	e->V = t->dims[0];
	e->D = e->V ? tnumel(t) / e->V : 0;
	e->NI = numel_of(ids);
	return ck_fmt(n, nout(n, 0), d, &e->fy);
}

int ck_embedding_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	Emb e;
	if (emb_dims(n, &e, d))
		return WL_ERR;
	ck_pack_plain(ki, "table", nin(n, 0)->init, e.fy);
	ki->alu_ops = (uint64_t)e.NI * e.D;
	return WL_OK;
}

int ck_embedding_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	Emb e;
	char y[24];
	if (emb_dims(n, &e, d) || ck_fo(n, nout(n, 0), d, y))
		return WL_ERR;
	fprintf(f, "%s<%lldLL, %lldLL, %lldLL, %s, %d>(c, %s, %s, %s, ", op->cpp, (long long)e.NI, (long long)e.V,
	        (long long)e.D, y, nin(n, 1)->type.elem == DT_INT64, a->in[1], a->blob[0], a->out[0]);
	ck_index_site(f, n, nin(n, 1), e.V, 0);
	fputs(");\n", f);
	return WL_OK;
}

/* ai.wlower.QGather (table int8 [V, D], scale float [V], ids) → nn::embeddingQ8:
 * the int8 row-wise table of --precision fp32dec-lmq8. Blob "table": the
 * int8 rows as they are (V·D bytes); blob "rowscale": int64 [V][2] =
 * {M_r, Q_r}, scale_r as M_r = round(scale_r · 2^Q_r), Q_r = max(30 −
 * ⌊log2 scale_r⌋, FY) (DequantizeLinear's rule, quant.c), so that q · M_r is
 * y at Q_r; stored in y's format by stq. A scale that is not positive and
 * finite (or too small for a multiplier) is an error naming the tensor; a
 * row of zeros may have scale 0 (M = 0). ALU ops ids·D. */
static int qemb_dims(const Node *n, Emb *e, Diag *d)
{
	if (ck_need_const(n, 0, d) || ck_need_const(n, 1, d) || ck_need_shape(n, nin(n, 2), d))
		return WL_ERR;
	const Tensor *t = nin(n, 0)->init, *s = nin(n, 1)->init;
	Value *ids = nin(n, 2);
	if (ids->type.elem != DT_INT64 && ids->type.elem != DT_INT32)
		return KFAIL(n, "tensor '%s': ids must be int64 or int32", ids->name);
	if (t->ndim != 2 || t->dtype != DT_INT8)
		return KFAIL(n, "tensor '%s': an int8 [V, D] table is required", nin(n, 0)->name);
	if (s->dtype != DT_FLOAT || tnumel(s) != t->dims[0])
		return KFAIL(n, "tensor '%s': one float scale per table row is required", nin(n, 1)->name);
	e->V = t->dims[0];
	e->D = t->dims[1];
	e->NI = numel_of(ids);
	return ck_fmt(n, nout(n, 0), d, &e->fy);
}

int ck_qembedding_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	Emb e;
	if (qemb_dims(n, &e, d))
		return WL_ERR;
	const Tensor *t = nin(n, 0)->init, *s = nin(n, 1)->init;
	CclBlob *tb = ck_add_blob(ki, "table", (size_t)(e.V * e.D));
	memcpy(tb->data, t->data, (size_t)(e.V * e.D));
	CclBlob *sb = ck_add_blob(ki, "rowscale", (size_t)e.V * 16);
	int64_t *mq = (int64_t *)sb->data;
	int fy = e.fy >= 0 ? e.fy : 0;
	for (int64_t r = 0; r < e.V; r++) {
		double sc = tensor_get_f64(s, r);
		if (!(sc >= 0) || !isfinite(sc))
			return KFAIL(n, "tensor '%s'[%lld] is %g: a row scale must be finite and not negative",
			             nin(n, 1)->name, (long long)r, sc);
		int Q = sc > 0 ? 30 - (int)floor(log2(sc)) : fy;
		if (Q < fy)
			Q = fy;
		if (Q > 62)
			return KFAIL(n, "tensor '%s'[%lld]: scale %g is too small for a fixed-point multiplier",
			             nin(n, 1)->name, (long long)r, sc);
		mq[2 * r] = llround(ldexp(sc, Q));
		mq[2 * r + 1] = Q;
	}
	ki->alu_ops = (uint64_t)e.NI * e.D;
	return WL_OK;
}

/* OP<NIDS, V, D, FY, IDS64>(c, ids, table, rowscale, y, site) */
int ck_qembedding_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	Emb e;
	char y[24];
	if (qemb_dims(n, &e, d) || ck_fo(n, nout(n, 0), d, y))
		return WL_ERR;
	fprintf(f, "%s<%lldLL, %lldLL, %lldLL, %s, %d>(c, %s, %s, %s, %s, ", op->cpp, (long long)e.NI, (long long)e.V,
	        (long long)e.D, y, nin(n, 2)->type.elem == DT_INT64, a->in[2], a->blob[0], a->blob[1], a->out[0]);
	ck_index_site(f, n, nin(n, 2), e.V, 0);
	fputs(");\n", f);
	return WL_OK;
}
