/* ref_fused_attention.c — ai.wlower WhisperAttention and
 * GroupQueryAttention (docs/OPS.md), float32 reference kernels computing
 * what the unfused subgraphs compute.
 *
 * Both ops first lay the keys and values out as [B, Hkv, L, hd] with
 * L = P + S (past rows first, then the new rows; GroupQueryAttention
 * rotates the new keys first), in the present outputs when they are asked
 * for and in shared scratch otherwise. Then, per (batch, head) over the
 * thread pool:
 *   s_j = scale * <q_i, k_j> (float, double accumulation)
 *   causal: query i (absolute position P + i) sees keys j <= P + i
 *   padding (GroupQueryAttention attention_mask [B, L], 1 = attend): a
 *     key with mask != 1 gets s_j + (-3.4028235e38), as the graph's
 *     Where(..., finfo.min) mask adds it
 *   p = softmax over the visible keys (float exponentials, double sum)
 *   out_i = sum_j p_j v_j (double accumulation), heads merged [B, T, H*hd].
 * Results do not depend on the thread count.
 *
 * GroupQueryAttention static_cache = 1: the same computation (K/V laid out
 * in shared scratch); the present outputs receive only the T new rows.
 *
 * fp16 = 1 (set by the fp16-attention pass): q, k, v, past and the outputs
 * are rounded to binary16 (round to nearest even) on the way in and out, as
 * if those edges were float16 tensors.
 */
#include "ref.h"

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

typedef struct Core {
	int64_t B, T, H, Hkv, hd, P, S, L;
	bool causal, fp16;
	float scale;
	const float *q;          /* [B, T, H*hd] (rotated when rope) */
	const float *k, *v;      /* [B, Hkv, L, hd] */
	const RTensor *mask;     /* [B, L] or NULL */
	float *out;              /* [B, T, H*hd] */
	const KCall *c;
} Core;

static inline float r16(float x, bool on)
{
	return on ? rt_half_to_float(rt_float_to_half(x)) : x;
}

static void core_par(void *ctx, int64_t i0, int64_t i1, int tid)
{
	const Core *a = ctx;
	float *sc = kscratch(a->c, tid);
	int64_t D = a->H * a->hd, group = a->H / a->Hkv;
	for (int64_t i = i0; i < i1; i++) {
		int64_t b = i / a->H, h = i % a->H, kh = h / group;
		const float *K = a->k + (b * a->Hkv + kh) * a->L * a->hd;
		const float *V = a->v + (b * a->Hkv + kh) * a->L * a->hd;
		for (int64_t t = 0; t < a->T; t++) {
			const float *q = a->q + (b * a->T + t) * D + h * a->hd;
			int64_t hi = a->causal ? a->P + t + 1 : a->L;
			if (hi > a->L)
				hi = a->L;
			for (int64_t j = 0; j < hi; j++) {
				double acc = 0;
				for (int64_t e = 0; e < a->hd; e++)
					acc += (double)q[e] * K[j * a->hd + e];
				float s = (float)acc * a->scale;
				if (a->mask && get_i64(a->mask->data, a->mask->dtype, b * a->L + j) != 1)
					s = s + -3.4028234663852886e38f;
				sc[j] = s;
			}
			softmax_row_f32(sc, hi, 0, hi, NAN);
			float *o = a->out + (b * a->T + t) * D + h * a->hd;
			for (int64_t e = 0; e < a->hd; e++) {
				double acc = 0;
				for (int64_t j = 0; j < hi; j++)
					acc += (double)sc[j] * V[j * a->hd + e];
				o[e] = r16((float)acc, a->fp16);
			}
		}
	}
}

static void core_run(KCall *c, Core *a)
{
	a->c = c;
	parallel_for(c->pool, a->B * a->H, 1, core_par, a);
}

/* dst[b, h, P + s, :] = src row (b, s, h) for the new rows; layout bsd:
 * src [B, S, Hk*hd]; bhsd: src [B, Hk, S, hd]. Past rows copied first. */
static void fill_kv(float *dst, const RTensor *past, const float *src, bool bhsd, int64_t B, int64_t Hk,
                    int64_t P, int64_t S, int64_t hd, bool fp16)
{
	int64_t L = P + S;
	for (int64_t b = 0; b < B; b++)
		for (int64_t h = 0; h < Hk; h++) {
			float *row = dst + (b * Hk + h) * L * hd;
			if (past) {
				const float *pp = (const float *)past->data + (b * Hk + h) * P * hd;
				for (int64_t e = 0; e < P * hd; e++)
					row[e] = r16(pp[e], fp16);
			}
			for (int64_t s = 0; s < S; s++) {
				const float *x = bhsd ? src + ((b * Hk + h) * S + s) * hd : src + (b * S + s) * Hk * hd + h * hd;
				for (int64_t e = 0; e < hd; e++)
					row[(P + s) * hd + e] = r16(x[e], fp16);
			}
		}
}

/* ---------------------------------------------------------------- WhisperAttention */

typedef struct Wa {
	int64_t heads;
	bool causal, bhsd, fp16;
	float scale;
} Wa;

int ref_wa_prepare(KCall *c, Diag *d)
{
	Wa *w = arena_alloc(c->arena, sizeof *w);
	int64_t heads, causal, fp16;
	float scale;
	if (attr_get_int(c, d, "heads", 0, &heads) || attr_get_int(c, d, "causal", 0, &causal) ||
	    attr_get_int(c, d, "fp16", 0, &fp16) || attr_get_float(c, d, "scale", 0.0f, &scale))
		return WL_ERR;
	if (heads <= 0)
		return kfail(c, d, "attribute heads must be positive");
	const char *lay = attr_string(c->node, "kv_layout", "bsd");
	if (strcmp(lay, "bsd") && strcmp(lay, "bhsd"))
		return kfail(c, d, "kv_layout '%s' is neither \"bsd\" nor \"bhsd\"", lay);
	w->heads = heads;
	w->causal = causal != 0;
	w->bhsd = strcmp(lay, "bhsd") == 0;
	w->fp16 = fp16 != 0;
	w->scale = scale;
	c->state = w;
	return WL_OK;
}

static int wa_shapes(const KCall *c, Diag *d, Core *a)
{
	const Wa *w = c->state;
	for (int i = 0; i < 3; i++)
		if (need_in(c, d, i, DTM(DT_FLOAT)))
			return WL_ERR;
	const RTensor *q = c->in[0], *k = c->in[1], *v = c->in[2];
	const RTensor *pk = c->nin > 3 ? c->in[3] : NULL, *pv = c->nin > 4 ? c->in[4] : NULL;
	char b1[96], b2[96];
	if (q->ndim != 3 || q->dims[2] % w->heads)
		return kfail(c, d, "tensor '%s' %s must be [B,T,heads*hd]", kin_name(c, 0), kdesc(q, b1));
	a->B = q->dims[0];
	a->T = q->dims[1];
	a->H = a->Hkv = w->heads;
	a->hd = q->dims[2] / w->heads;
	if (w->bhsd) {
		if (k->ndim != 4 || k->dims[0] != a->B || k->dims[1] != a->H || k->dims[3] != a->hd)
			return kfail(c, d, "tensor '%s' %s must be [B,H,S,hd]", kin_name(c, 1), kdesc(k, b1));
		a->S = k->dims[2];
	} else {
		if (k->ndim != 3 || k->dims[0] != a->B || k->dims[2] != q->dims[2])
			return kfail(c, d, "tensor '%s' %s must be [B,S,D]", kin_name(c, 1), kdesc(k, b1));
		a->S = k->dims[1];
	}
	if (!same_shape(k, v) || v->dtype != DT_FLOAT)
		return kfail(c, d, "tensors '%s' %s and '%s' %s differ", kin_name(c, 1), kdesc(k, b1), kin_name(c, 2),
		             kdesc(v, b2));
	a->P = 0;
	if (pk || pv) {
		if (!pk || !pv || pk->dtype != DT_FLOAT || !same_shape(pk, pv) || pk->ndim != 4 || pk->dims[0] != a->B ||
		    pk->dims[1] != a->H || pk->dims[3] != a->hd)
			return kfail(c, d, "past_k/past_v must both be float [B,H,P,hd]");
		a->P = pk->dims[2];
	}
	a->L = a->P + a->S;
	a->causal = w->causal;
	a->fp16 = w->fp16;
	a->scale = w->scale;
	a->mask = NULL;
	return WL_OK;
}

int ref_wa_infer(KCall *c, Diag *d)
{
	Core a;
	if (wa_shapes(c, d, &a))
		return WL_ERR;
	set_out(c->out[0], DT_FLOAT, 3, c->in[0]->dims);
	int64_t pd[4] = {a.B, a.H, a.L, a.hd};
	for (int i = 1; i < 3 && i < c->nout; i++)
		if (c->out[i])
			set_out(c->out[i], DT_FLOAT, 4, pd);
	size_t kv = (size_t)(a.B * a.H * a.L * a.hd) * 4;
	c->shared = 2 * ALIGN64(kv) + ALIGN64((size_t)(a.B * a.T * a.H * a.hd) * 4);
	c->scratch = ALIGN64((size_t)a.L * 4);
	return WL_OK;
}

int ref_wa_run(KCall *c, Diag *d)
{
	Core a;
	if (wa_shapes(c, d, &a))
		return WL_ERR;
	const Wa *w = c->state;
	size_t kv = ALIGN64((size_t)(a.B * a.H * a.L * a.hd) * 4);
	char *sh = c->shared_base;
	float *K = c->nout > 1 && c->out[1] ? c->out[1]->data : (float *)sh;
	float *V = c->nout > 2 && c->out[2] ? c->out[2]->data : (float *)(sh + kv);
	float *Q = (float *)(sh + 2 * kv);
	const RTensor *pk = c->nin > 3 ? c->in[3] : NULL, *pv = c->nin > 4 ? c->in[4] : NULL;
	fill_kv(K, pk, c->in[1]->data, w->bhsd, a.B, a.H, a.P, a.S, a.hd, a.fp16);
	fill_kv(V, pv, c->in[2]->data, w->bhsd, a.B, a.H, a.P, a.S, a.hd, a.fp16);
	const float *q = c->in[0]->data;
	int64_t nq = a.B * a.T * a.H * a.hd;
	for (int64_t i = 0; i < nq; i++)
		Q[i] = r16(q[i], a.fp16);
	a.q = Q;
	a.k = K;
	a.v = V;
	a.out = c->out[0]->data;
	core_run(c, &a);
	return WL_OK;
}

/* ---------------------------------------------------------------- GroupQueryAttention */

enum { G_Q, G_K, G_V, G_COS, G_SIN, G_PK, G_PV, G_MASK, G_POS };

typedef struct Gq {
	int64_t heads, kv_heads, hd;
	bool causal, rope, fp16, static_cache;
	float scale;
} Gq;

static const RTensor *gin(const KCall *c, int i)
{
	return c->nin > i ? c->in[i] : NULL;
}

int ref_gq_prepare(KCall *c, Diag *d)
{
	Gq *g = arena_alloc(c->arena, sizeof *g);
	int64_t h, kvh, hd, causal, rope, fp16, st;
	if (attr_get_int(c, d, "heads", 0, &h) || attr_get_int(c, d, "kv_heads", 0, &kvh) ||
	    attr_get_int(c, d, "head_dim", 0, &hd) || attr_get_int(c, d, "causal", 0, &causal) ||
	    attr_get_int(c, d, "rope", 0, &rope) || attr_get_int(c, d, "fp16", 0, &fp16) ||
	    attr_get_int(c, d, "static_cache", 0, &st) ||
	    attr_get_float(c, d, "scale", 0.0f, &g->scale))
		return WL_ERR;
	if (h <= 0 || kvh <= 0 || h % kvh || hd <= 0 || hd % 2)
		return kfail(c, d, "heads %lld, kv_heads %lld, head_dim %lld do not fit", (long long)h, (long long)kvh,
		             (long long)hd);
	g->heads = h;
	g->kv_heads = kvh;
	g->hd = hd;
	g->causal = causal != 0;
	g->rope = rope != 0;
	g->fp16 = fp16 != 0;
	g->static_cache = st != 0;
	c->state = g;
	return WL_OK;
}

static int gq_shapes(const KCall *c, Diag *d, Core *a)
{
	const Gq *g = c->state;
	for (int i = 0; i < 3; i++)
		if (need_in(c, d, i, DTM(DT_FLOAT)))
			return WL_ERR;
	const RTensor *q = c->in[G_Q], *k = c->in[G_K], *v = c->in[G_V];
	const RTensor *pk = gin(c, G_PK), *pv = gin(c, G_PV), *m = gin(c, G_MASK), *pos = gin(c, G_POS);
	char b1[96];
	a->H = g->heads;
	a->Hkv = g->kv_heads;
	a->hd = g->hd;
	if (q->ndim != 3 || q->dims[2] != a->H * a->hd)
		return kfail(c, d, "tensor '%s' %s must be [B,T,heads*head_dim]", kin_name(c, 0), kdesc(q, b1));
	a->B = q->dims[0];
	a->T = a->S = q->dims[1];
	if (k->ndim != 3 || k->dims[0] != a->B || k->dims[1] != a->T || k->dims[2] != a->Hkv * a->hd ||
	    !same_shape(k, v) || v->dtype != DT_FLOAT)
		return kfail(c, d, "tensors '%s' %s and '%s' must be [B,T,kv_heads*head_dim]", kin_name(c, 1),
		             kdesc(k, b1), kin_name(c, 2));
	a->P = 0;
	if (pk || pv) {
		if (!pk || !pv || pk->dtype != DT_FLOAT || !same_shape(pk, pv) || pk->ndim != 4 || pk->dims[0] != a->B ||
		    pk->dims[1] != a->Hkv || pk->dims[3] != a->hd)
			return kfail(c, d, "past_k/past_v must both be float [B,kv_heads,P,head_dim]");
		a->P = pk->dims[2];
	}
	if (g->static_cache && (!pk || !m))
		return kfail(c, d, "static_cache needs past_k, past_v and attention_mask");
	a->L = a->P + a->S;
	if (g->rope) {
		const RTensor *cs = gin(c, G_COS), *sn = gin(c, G_SIN);
		if (!cs || !sn || cs->dtype != DT_FLOAT || !same_shape(cs, sn) || cs->ndim < 1 ||
		    cs->dims[cs->ndim - 1] != a->hd)
			return kfail(c, d, "rope needs float cos/sin [..., head_dim]");
		int64_t rows = rt_numel(cs) / a->hd;
		if (pos) {
			if (!dt_is_int(pos->dtype) || rt_numel(pos) != a->T * (pos->ndim && pos->dims[0] == a->B ? a->B : 1))
				return kfail(c, d, "tensor '%s' %s: position_ids must be [B or 1, T] integers", kin_name(c, G_POS),
				             kdesc(pos, b1));
			int64_t n = pos->data ? rt_numel(pos) : 0;    /* no data yet while planning a computed one */
			for (int64_t i = 0; i < n; i++) {
				int64_t p = get_i64(pos->data, pos->dtype, i);
				if (p < 0 || p >= rows) {
					const Value *pv = c->node->inputs[G_POS];
					return diag_index_range(d, pv->name, INDEX_NO_WRAP | (pv->is_input ? INDEX_GRAPH_INPUT : 0),
					                        c->node->name, c->node->op_type, pos->ndim, pos->dims, i, p, rows);
				}
			}
		} else if (rows != a->T) {
			return kfail(c, d, "cos/sin have %lld rows for %lld queries and no position_ids", (long long)rows,
			             (long long)a->T);
		}
	}
	if (m && (!dt_is_int(m->dtype) || rt_numel(m) != a->B * a->L))
		return kfail(c, d, "tensor '%s' %s: attention_mask must be [B, %lld] integers", kin_name(c, G_MASK),
		             kdesc(m, b1), (long long)a->L);
	a->mask = m;
	a->causal = g->causal;
	a->fp16 = g->fp16;
	a->scale = g->scale;
	return WL_OK;
}

int ref_gq_infer(KCall *c, Diag *d)
{
	Core a;
	if (gq_shapes(c, d, &a))
		return WL_ERR;
	set_out(c->out[0], DT_FLOAT, 3, c->in[0]->dims);
	const Gq *g = c->state;
	int64_t pd[4] = {a.B, a.Hkv, g->static_cache ? a.T : a.L, a.hd};
	for (int i = 1; i < 3 && i < c->nout; i++)
		if (c->out[i])
			set_out(c->out[i], DT_FLOAT, 4, pd);
	size_t kv = ALIGN64((size_t)(a.B * a.Hkv * a.L * a.hd) * 4);
	c->shared = 2 * kv + ALIGN64((size_t)(a.B * a.T * a.H * a.hd) * 4) +
	            ALIGN64((size_t)(a.B * a.T * a.Hkv * a.hd) * 4);
	c->scratch = ALIGN64((size_t)a.L * 4);
	return WL_OK;
}

/* HF apply_rotary_pos_emb: y = x*cos + rotate_half(x)*sin, rotate_half(x)
 * = cat(-x[half:], x[:half]); cos/sin rows of the query positions. */
static void rope_rows(const KCall *c, const Core *a, const float *x, float *y, int64_t nh, bool fp16)
{
	const RTensor *cs = c->in[G_COS], *sn = c->in[G_SIN], *pos = gin(c, G_POS);
	const float *C = cs->data, *S = sn->data;
	int64_t hd = a->hd, half = hd / 2;
	for (int64_t b = 0; b < a->B; b++)
		for (int64_t t = 0; t < a->T; t++) {
			int64_t row = t;
			if (pos)
				row = get_i64(pos->data, pos->dtype, (rt_numel(pos) == a->T ? 0 : b * a->T) + t);
			const float *cr = C + row * hd, *sr = S + row * hd;
			for (int64_t h = 0; h < nh; h++) {
				const float *xi = x + ((b * a->T + t) * nh + h) * hd;
				float *yo = y + ((b * a->T + t) * nh + h) * hd;
				for (int64_t e = 0; e < hd; e++) {
					float xe = r16(xi[e], fp16);
					float rh = e < half ? -r16(xi[e + half], fp16) : r16(xi[e - half], fp16);
					float p1 = xe * cr[e], p2 = rh * sr[e];
					yo[e] = p1 + p2;
				}
			}
		}
}

int ref_gq_run(KCall *c, Diag *d)
{
	Core a;
	if (gq_shapes(c, d, &a))
		return WL_ERR;
	const Gq *g = c->state;
	size_t kv = ALIGN64((size_t)(a.B * a.Hkv * a.L * a.hd) * 4);
	size_t qb = ALIGN64((size_t)(a.B * a.T * a.H * a.hd) * 4);
	char *sh = c->shared_base;
	bool full = !g->static_cache;      /* present = the concatenation, else the new rows */
	float *K = full && c->nout > 1 && c->out[1] ? c->out[1]->data : (float *)sh;
	float *V = full && c->nout > 2 && c->out[2] ? c->out[2]->data : (float *)(sh + kv);
	float *Q = (float *)(sh + 2 * kv), *Kn = (float *)(sh + 2 * kv + qb);
	const float *q = c->in[G_Q]->data, *k = c->in[G_K]->data;
	if (g->rope) {
		rope_rows(c, &a, q, Q, a.H, a.fp16);
		rope_rows(c, &a, k, Kn, a.Hkv, a.fp16);
	} else {
		int64_t nq = a.B * a.T * a.H * a.hd, nk = a.B * a.T * a.Hkv * a.hd;
		for (int64_t i = 0; i < nq; i++)
			Q[i] = r16(q[i], a.fp16);
		for (int64_t i = 0; i < nk; i++)
			Kn[i] = r16(k[i], a.fp16);
	}
	fill_kv(K, gin(c, G_PK), Kn, false, a.B, a.Hkv, a.P, a.S, a.hd, a.fp16);
	fill_kv(V, gin(c, G_PV), c->in[G_V]->data, false, a.B, a.Hkv, a.P, a.S, a.hd, a.fp16);
	for (int i = 1; !full && i < 3 && i < c->nout; i++)
		if (c->out[i]) {   /* the new rows [B, Hkv, T, hd], from the laid-out keys / values */
			const float *src = i == 1 ? K : V;
			float *dst = c->out[i]->data;
			for (int64_t bh = 0; bh < a.B * a.Hkv; bh++)
				memcpy(dst + bh * a.T * a.hd, src + (bh * a.L + a.P) * a.hd, (size_t)(a.T * a.hd) * sizeof(float));
		}
	a.q = Q;
	a.k = K;
	a.v = V;
	a.out = c->out[0]->data;
	core_run(c, &a);
	return WL_OK;
}
