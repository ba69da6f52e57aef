/* gather.c — Gather along axis 0 of a constant float table (token
 * embeddings) → nn::embedding (ccl/nn.hpp); an id outside [-V, V) ends the
 * run with the message of every target (ck_index_site). Blob "table": the table in the
 * output's format; the row sets `gathers`: alloc.c leaves the table in
 * weights.bin and counts only the gathered rows as read. ALU ops ids·D.
 */
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
