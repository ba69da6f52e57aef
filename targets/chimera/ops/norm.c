/* norm.c — LayerNormalization → nn::layerNorm, RMSNorm → nn::rmsNorm
 * (ccl/nn.hpp), over the last axis. Blob "gamma": the scale [D] in its own
 * fixed-point format fg, for LayerNorm followed by the bias [D] in fb (zeros
 * without one). ALU ops rows·D·4 (LayerNorm) / rows·D·3 (RMSNorm).
 */
#include <math.h>
#include "ops.h"

typedef struct Norm {
	int64_t R, D;              /* rows, last axis */
	bool ln;                   /* LayerNormalization (else RMSNorm) */
	const Tensor *g, *b;       /* scale, LayerNorm bias (or NULL) */
	int fg, fb;                /* their formats */
} Norm;

static int norm_dims(const Node *n, Norm *m, Diag *d)
{
	Value *x = nin(n, 0);
	if (ck_need_shape(n, x, d))
		return WL_ERR;
	int r = rank_of(x);
	int64_t ax = attr_int(n, "axis", -1);
	if (r < 1 || (ax != -1 && ax != r - 1))
		return KFAIL(n, "tensor '%s': only the last axis is supported", x->name);
	m->D = dim_of(x, r - 1);
	m->R = m->D > 0 ? numel_of(x) / m->D : 0;
	m->ln = n->op == OP_LayerNormalization;
	if (ck_need_const(n, 1, d))
		return WL_ERR;
	m->g = nin(n, 1)->init;
	m->b = NULL;
	if (m->ln && nin(n, 2)) {
		if (ck_need_const(n, 2, d))
			return WL_ERR;
		m->b = nin(n, 2)->init;
	}
	if (tnumel(m->g) != m->D || (m->b && tnumel(m->b) != m->D))
		return KFAIL(n, "tensor '%s': scale must have %lld elements", nin(n, 1)->name, (long long)m->D);
	m->fg = ck_const_fbits(ck_maxabs(m->g));
	m->fb = m->b ? ck_const_fbits(ck_maxabs(m->b)) : 31;
	return WL_OK;
}

int ck_norm_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	Norm m;
	if (norm_dims(n, &m, d))
		return WL_ERR;
	CclBlob *bl = ck_add_blob(ki, "gamma", (size_t)(m.ln ? 2 : 1) * m.D * 4);
	int32_t *p = (int32_t *)bl->data;
	for (int64_t i = 0; i < m.D; i++) {
		p[i] = ck_q32(tensor_get_f64(m.g, i), m.fg);
		if (m.ln)
			p[m.D + i] = m.b ? ck_q32(tensor_get_f64(m.b, i), m.fb) : 0;
	}
	ki->alu_ops = (uint64_t)m.R * m.D * (m.ln ? 4 : 3);
	return WL_OK;
}

int ck_norm_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	Norm m;
	char x[48], y[24];
	if (norm_dims(n, &m, d) || ck_fq(n, nin(n, 0), d, x) || ck_fo(n, nout(n, 0), d, y))
		return WL_ERR;
	double eps = attr_float(n, "epsilon", m.ln ? 1e-5f : 1e-6f);
	long long e40 = llround(eps * ldexp(1.0, 40));
	fprintf(f, "%s<%lld, %lld, %s, %s, %d, ", op->cpp, (long long)m.R, (long long)m.D, x, y, m.fg);
	if (m.ln)
		fprintf(f, "%d, ", m.fb);
	fprintf(f, "%lldLL>(c, %s, %s, %s);\n", e40, a->in[0], a->blob[0], a->out[0]);
	return WL_OK;
}
