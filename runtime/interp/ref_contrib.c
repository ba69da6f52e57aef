/* ref_contrib.c — com.microsoft Attention (ONNX Runtime contrib op):
 * the BERT/GPT-2 style self-attention with a packed QKV projection.
 *
 *   qkv = input [B,S,Din] · weights [Din, Dq+Dk+Dv] (+ bias [Dq+Dk+Dv])
 *   q, k, v = split (qkv) along the last axis (qkv_hidden_sizes, default
 *             three equal parts), heads N = num_heads (q/k head size
 *             Dq/N, v head size Dv/N)
 *   scores = scale · q_h · k_hᵀ (scale: attribute, default (Dq/N)^-0.5)
 *            + relative_position_bias [B or 1, N, S, S] when given
 *            + mask_filter_value (default -10000) where masked: key t > query
 *              s when unidirectional = 1; key t with mask_index[b, t] == 0
 *              for a 2-D mask_index [B, S]
 *   out [B, S, Dv] = softmax (scores) · v_h, heads merged
 *
 * present (output 1) is [2, B, N, S, hd]: k and v in heads layout.
 * The reference the unfused side of fuse-ms-attention's tests runs. Not
 * supported (an error naming the node): a past input (KV cache),
 * past_sequence_length, attention_bias, other mask_index layouts,
 * do_rotary. Float32 only; plain loops with double accumulation.
 */
#include "ref.h"

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

typedef struct MsAtt {
	int64_t B, S, Din, Dq, Dk, Dv, N, hq, hv;
	bool causal;
	float scale, filter;
} MsAtt;

static const RTensor *opt_in(const KCall *c, int i)
{
	return c->nin > i ? c->in[i] : NULL;
}

static int msa_params(KCall *c, Diag *d, MsAtt *a)
{
	memset(a, 0, sizeof *a);
	if (need_in(c, d, 0, DTM(DT_FLOAT)) || need_in(c, d, 1, DTM(DT_FLOAT)))
		return WL_ERR;
	const RTensor *x = c->in[0], *w = c->in[1], *bias = opt_in(c, 2);
	if (x->ndim != 3)
		return kfail(c, d, "input '%s' must be [B, S, hidden]", kin_name(c, 0));
	a->B = x->dims[0];
	a->S = x->dims[1];
	a->Din = x->dims[2];
	if (w->ndim != 2 || w->dims[0] != a->Din)
		return kfail(c, d, "weights '%s' must be [%lld, q+k+v hidden]", kin_name(c, 1), (long long)a->Din);
	a->N = attr_int(c->node, "num_heads", 0);
	if (a->N <= 0)
		return kfail(c, d, "num_heads must be positive");
	const int64_t *qs;
	int nq = attr_ints(c->node, "qkv_hidden_sizes", &qs);
	if (nq >= 0) {
		if (nq != 3)
			return kfail(c, d, "qkv_hidden_sizes must have 3 entries");
		a->Dq = qs[0];
		a->Dk = qs[1];
		a->Dv = qs[2];
	} else {
		if (w->dims[1] % 3)
			return kfail(c, d, "weights '%s': %lld columns do not split in three", kin_name(c, 1),
			             (long long)w->dims[1]);
		a->Dq = a->Dk = a->Dv = w->dims[1] / 3;
	}
	if (a->Dq != a->Dk || a->Dq + a->Dk + a->Dv != w->dims[1] || a->Dq <= 0 || a->Dv <= 0 || a->Dq % a->N ||
	    a->Dv % a->N)
		return kfail(c, d, "q/k/v hidden sizes %lld/%lld/%lld do not fit weights '%s' and %lld heads",
		             (long long)a->Dq, (long long)a->Dk, (long long)a->Dv, kin_name(c, 1), (long long)a->N);
	a->hq = a->Dq / a->N;
	a->hv = a->Dv / a->N;
	if (bias) {
		if (bias->dtype != DT_FLOAT || bias->ndim != 1 || bias->dims[0] != w->dims[1])
			return kfail(c, d, "bias '%s' must be float [%lld]", kin_name(c, 2), (long long)w->dims[1]);
	}
	const RTensor *mask = opt_in(c, 3);
	if (mask && (mask->ndim != 2 || mask->dims[0] != a->B || mask->dims[1] != a->S ||
	             (mask->dtype != DT_INT32 && mask->dtype != DT_INT64)))
		return kfail(c, d, "mask_index '%s': only a 2-D [B, S] int mask is supported", kin_name(c, 3));
	for (int i = 4; i < c->nin; i++)
		if (c->in[i] && i != 5)
			return kfail(c, d, "input %d ('%s') is not supported (past, past_sequence_length, attention_bias)", i,
			             kin_name(c, i));
	const RTensor *rpb = opt_in(c, 5);
	if (rpb && (rpb->dtype != DT_FLOAT || rpb->ndim != 4 || (rpb->dims[0] != 1 && rpb->dims[0] != a->B) ||
	            rpb->dims[1] != a->N || rpb->dims[2] != a->S || rpb->dims[3] != a->S))
		return kfail(c, d, "relative_position_bias '%s' must be float [B or 1, N, S, S]", kin_name(c, 5));
	if (attr_int(c->node, "do_rotary", 0))
		return kfail(c, d, "do_rotary = 1 is not supported");
	int64_t uni = attr_int(c->node, "unidirectional", 0);
	if (uni != 0 && uni != 1)
		return kfail(c, d, "unidirectional must be 0 or 1");
	a->causal = uni == 1;
	a->scale = attr_float(c->node, "scale", 0.0f);
	if (a->scale == 0.0f)
		a->scale = (float)(1.0 / sqrt((double)a->hq));
	a->filter = attr_float(c->node, "mask_filter_value", -10000.0f);
	return WL_OK;
}

int ref_msa_infer(KCall *c, Diag *d)
{
	MsAtt a;
	if (msa_params(c, d, &a))
		return WL_ERR;
	int64_t od[3] = {a.B, a.S, a.Dv};
	set_out(c->out[0], DT_FLOAT, 3, od);
	if (c->nout > 1 && c->out[1]) {
		if (a.hq != a.hv)
			return kfail(c, d, "output present needs equal k and v head sizes");
		int64_t pd[5] = {2, a.B, a.N, a.S, a.hq};
		set_out(c->out[1], DT_FLOAT, 5, pd);
	}
	c->shared = ALIGN64((size_t)(a.B * a.S * (a.Dq + a.Dk + a.Dv)) * 4) + ALIGN64((size_t)a.S * 4);
	c->scratch = ALIGN64((size_t)(a.Dq + a.Dk + a.Dv) * sizeof(double));
	return WL_OK;
}

int ref_msa_run(KCall *c, Diag *d)
{
	MsAtt a;
	if (msa_params(c, d, &a))
		return WL_ERR;
	const RTensor *x = c->in[0], *w = c->in[1], *bias = opt_in(c, 2), *mask = opt_in(c, 3), *rpb = opt_in(c, 5);
	const ufloat *xp = x->data, *wp = w->data, *bp = bias ? bias->data : NULL;
	int64_t Dt = a.Dq + a.Dk + a.Dv, M = a.B * a.S;
	float *qkv = c->shared_base;
	float *r = (float *)((char *)c->shared_base + ALIGN64((size_t)(M * Dt) * 4));
	double *acc = kscratch(c, 0);
	for (int64_t i = 0; i < M; i++) {
		for (int64_t n = 0; n < Dt; n++)
			acc[n] = bp ? bp[n] : 0.0;
		for (int64_t k = 0; k < a.Din; k++) {
			double xv = xp[i * a.Din + k];
			const ufloat *row = wp + k * Dt;
			for (int64_t n = 0; n < Dt; n++)
				acc[n] += xv * row[n];
		}
		for (int64_t n = 0; n < Dt; n++)
			qkv[i * Dt + n] = (float)acc[n];
	}
	if (c->nout > 1 && c->out[1]) {   /* present [2, B, N, S, hd] = k, v in heads layout */
		float *pr = c->out[1]->data;
		for (int64_t kv = 0; kv < 2; kv++)
			for (int64_t b = 0; b < a.B; b++)
				for (int64_t h = 0; h < a.N; h++)
					for (int64_t t = 0; t < a.S; t++)
						memcpy(pr + (((kv * a.B + b) * a.N + h) * a.S + t) * a.hq,
						       qkv + (b * a.S + t) * Dt + a.Dq + kv * a.Dk + h * a.hq, (size_t)a.hq * 4);
	}
	float *out = c->out[0]->data;
	for (int64_t b = 0; b < a.B; b++)
		for (int64_t h = 0; h < a.N; h++)
			for (int64_t s = 0; s < a.S; s++) {
				const float *q = qkv + (b * a.S + s) * Dt + h * a.hq;
				for (int64_t t = 0; t < a.S; t++) {
					const float *k = qkv + (b * a.S + t) * Dt + a.Dq + h * a.hq;
					double dot = 0;
					for (int64_t e = 0; e < a.hq; e++)
						dot += (double)q[e] * k[e];
					float sc = (float)dot * a.scale;
					if (rpb) {
						int64_t bb = rpb->dims[0] == 1 ? 0 : b;
						sc += ((const ufloat *)rpb->data)[((bb * a.N + h) * a.S + s) * a.S + t];
					}
					bool masked = a.causal && t > s;
					if (mask)
						masked |= get_i64(mask->data, mask->dtype, b * a.S + t) == 0;
					r[t] = masked ? sc + a.filter : sc;
				}
				softmax_row_f32(r, a.S, 0, a.S, NAN);
				float *o = out + (b * a.S + s) * a.Dv + h * a.hv;
				for (int64_t e = 0; e < a.hv; e++) {
					double sum = 0;
					for (int64_t t = 0; t < a.S; t++)
						sum += (double)r[t] * qkv[(b * a.S + t) * Dt + a.Dq + a.Dk + h * a.hv + e];
					o[e] = (float)sum;
				}
			}
	return WL_OK;
}
