/* ref_attention.c — com.microsoft RotaryEmbedding, GroupQueryAttention
 * and MultiHeadAttention, as ONNX Runtime's CPU kernels define them
 * (docs/ContribOperators.md and contrib_ops/cpu/bert), float32.
 *
 * Attention for one (batch, head): scores = scale * Q K^T (blocked GEMM,
 * inline on the thread), plus additive bias and masks, softmax over the
 * allowed keys (float exponentials, double sum), out = P V. Heads are split
 * over the thread pool; each thread has its own scores buffer.
 *
 * GroupQueryAttention: query [B,S,N*H] (or packed QKV [B,S,(N+2Nkv)*H]),
 * key/value [B,S,Nkv*H], past_key/value [B,Nkv,P,H] (BNSH),
 * seqlens_k[b] = total length - 1, total_sequence_length T (scalar);
 * present = max(T, P) rows; the first prompt (S == T) starts at position 0,
 * later steps at seqlens_k[b] + 1 - S. present_key/value get the past rows,
 * then the new (rotated) keys; query s attends causally to keys
 * [0, past + s], or with local_window_size W > 0 to the last W of them (as
 * ONNX Runtime 1.2x+ does; older releases took W + 1).
 * do_rotary rotates Q and K with cos/sin caches [max_pos, rotary_dim/2].
 *
 * MultiHeadAttention: query [B,S,D]; key/value [B,L,D] (BSNH) with optional
 * bias [D+D+Dv] and past_key/value [B,N,P,H] concatenated in front, or
 * key/value already [B,N,L,H] (BNSH); key_padding_mask (B), (B,T) or
 * (B,S,T) and `unidirectional` add mask_filter_value; attention_bias
 * [B|1,N|1,S,T] is added. present_key/value are [B,N,P+L,H].
 */
#include "ref.h"

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

/* ---------------------------------------------------------------- rotary */

/* Rotates one head vector x[0:rd) (rest copied) at cache row `pos`. */
static void rotate(const ufloat *x, float *y, int64_t H, int64_t rd, const ufloat *cosr, const ufloat *sinr,
                   bool interleaved)
{
	int64_t half = rd / 2;
	for (int64_t i = 0; i < rd; i++) {
		int64_t ci, j;
		float sign;
		if (interleaved) {
			ci = (i / 2) % half;
			sign = (i % 2 == 0) ? -1.0f : 1.0f;
			j = (i % 2 == 0) ? i + 1 : i - 1;
		} else {
			ci = i % half;
			sign = i < half ? -1.0f : 1.0f;
			j = (i + half) % rd;
		}
		y[i] = x[i] * cosr[ci] + sign * x[j] * sinr[ci];
	}
	for (int64_t i = rd; i < H; i++)
		y[i] = x[i];
}

typedef struct RotP {
	int64_t B, S, N, H, rd, maxpos;
	int64_t bs, ss, hs;              /* strides of batch, sequence, head (elements) */
	bool fmt2d, interleaved;         /* position_ids [B,S] (else one start value) */
} RotP;

static int rot_params(const KCall *c, Diag *d, RotP *p)
{
	RTensor *x = c->in[0], *pos = c->in[1], *cs = c->in[2], *sn = c->in[3];
	int64_t nh, rdim, il;
	if (attr_get_int(c, d, "num_heads", 0, &nh) || attr_get_int(c, d, "rotary_embedding_dim", 0, &rdim) ||
	    attr_get_int(c, d, "interleaved", 0, &il))
		return WL_ERR;
	char b1[96], b2[96];
	if (x->ndim != 3 && x->ndim != 4)
		return kfail(c, d, "tensor '%s' %s must be 3-D or 4-D", kin_name(c, 0), kdesc(x, b1));
	if (cs->ndim != 2 || !same_shape(cs, sn))
		return kfail(c, d, "tensors '%s' %s and '%s' %s: caches must be 2-D and alike", kin_name(c, 2),
		             kdesc(cs, b1), kin_name(c, 3), kdesc(sn, b2));
	if (rdim > 0 && nh <= 0)
		return kfail(c, d, "num_heads is required with rotary_embedding_dim");
	p->B = x->dims[0];
	p->interleaved = il != 0;
	int64_t hidden;
	if (x->ndim == 4) {
		p->N = x->dims[1];
		p->S = x->dims[2];
		p->H = x->dims[3];
		hidden = p->N * p->H;
	} else {
		p->S = x->dims[1];
		hidden = x->dims[2];
		p->H = rdim == 0 ? (nh > 0 ? hidden / nh : cs->dims[1] * 2) : hidden / nh;
		if (p->H <= 0 || hidden % p->H)
			return kfail(c, d, "hidden size %lld is not a multiple of the head size", (long long)hidden);
		p->N = hidden / p->H;
	}
	p->rd = rdim > 0 ? rdim : cs->dims[1] * 2;
	if (p->rd > p->H || p->rd % 2 || cs->dims[1] * 2 != p->rd)
		return kfail(c, d, "rotary dim %lld does not fit head size %lld and cache %s", (long long)p->rd,
		             (long long)p->H, kdesc(cs, b1));
	p->maxpos = cs->dims[0];
	if (x->ndim == 4) {
		p->ss = p->H;
		p->hs = p->S * p->H;
		p->bs = p->N * p->hs;
	} else {
		p->hs = p->H;
		p->ss = p->N * p->H;
		p->bs = p->S * p->ss;
	}
	if (rt_numel(pos) == 1 && pos->ndim <= 1) {
		p->fmt2d = false;
	} else if (pos->ndim == 2 && pos->dims[0] == p->B && pos->dims[1] == p->S) {
		p->fmt2d = true;
	} else {
		return kfail(c, d, "tensor '%s' %s: position_ids must be [1] or [%lld,%lld]", kin_name(c, 1),
		             kdesc(pos, b1), (long long)p->B, (long long)p->S);
	}
	return WL_OK;
}

int ref_rot_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM(DT_FLOAT)) || need_in(c, d, 1, DTM_IDX) || need_in(c, d, 2, DTM(DT_FLOAT)) ||
	    need_in(c, d, 3, DTM(DT_FLOAT)))
		return WL_ERR;
	RotP p;
	if (rot_params(c, d, &p))
		return WL_ERR;
	set_out(c->out[0], DT_FLOAT, c->in[0]->ndim, c->in[0]->dims);
	return WL_OK;
}

int ref_rot_run(KCall *c, Diag *d)
{
	RotP p;
	if (rot_params(c, d, &p))
		return WL_ERR;
	const ufloat *x = c->in[0]->data, *cs = c->in[2]->data, *sn = c->in[3]->data;
	float *y = c->out[0]->data;
	RTensor *pos = c->in[1];
	int64_t half = p.rd / 2;
	for (int64_t b = 0; b < p.B; b++)
		for (int64_t s = 0; s < p.S; s++) {
			int64_t q = p.fmt2d ? get_i64(pos->data, pos->dtype, b * p.S + s) : scalar_i64(pos) + s;
			if (q < 0 || q >= p.maxpos)
				return kfail(c, d, "position %lld outside the cos/sin cache (%lld rows)", (long long)q,
				             (long long)p.maxpos);
			for (int64_t n = 0; n < p.N; n++) {
				int64_t off = b * p.bs + s * p.ss + n * p.hs;
				rotate(x + off, y + off, p.H, p.rd, cs + q * half, sn + q * half, p.interleaved);
			}
		}
	return WL_OK;
}

/* ---------------------------------------------------------------- attention core */

typedef struct Head {
	const ufloat *q; int64_t qs;       /* S rows */
	const ufloat *k; int64_t ks;       /* T rows */
	const ufloat *v; int64_t vs;
	float *o; int64_t os;
	int64_t S, T, H, Hv;
} Head;

/* Computes the (S x T) scores = scale * Q K^T into sc. */
static void head_scores(const Head *h, float scale, float *sc, void *gscratch)
{
	GemmB gb = {.kind = GB_COLS, .b = h->k, .ldb = h->ks};
	GemmArgs g = {.M = h->S, .N = h->T, .K = h->H, .batch = 1, .a = h->q, .lda = h->qs, .b = &gb,
	              .c = sc, .ldc = h->T};
	gemm_run(NULL, gscratch, 0, &g);
	if (scale != 1.0f)
		for (int64_t i = 0; i < h->S * h->T; i++)
			sc[i] *= scale;
}

static void head_output(const Head *h, const ufloat *p, void *gscratch)
{
	GemmB gb = {.kind = GB_ROWS, .b = h->v, .ldb = h->vs};
	GemmArgs g = {.M = h->S, .N = h->Hv, .K = h->T, .batch = 1, .a = p, .lda = h->T, .b = &gb,
	              .c = h->o, .ldc = h->os};
	gemm_run(NULL, gscratch, 0, &g);
}

/* ---------------------------------------------------------------- GroupQueryAttention */

typedef struct Gqa {
	int64_t B, S, N, Nkv, H, P, T, present, rd;
	bool packed, rotary, interleaved, first;
	float scale, softcap;
	int64_t window;
	bool smooth;
} Gqa;

static int gqa_params(const KCall *c, Diag *d, Gqa *g)
{
	int64_t nh, nkv, rot, il, win, smooth;
	float scale, softcap;
	if (attr_get_int(c, d, "num_heads", 0, &nh) || attr_get_int(c, d, "kv_num_heads", 0, &nkv) ||
	    attr_get_int(c, d, "do_rotary", 0, &rot) || attr_get_int(c, d, "rotary_interleaved", 0, &il) ||
	    attr_get_int(c, d, "local_window_size", -1, &win) || attr_get_int(c, d, "smooth_softmax", 0, &smooth) ||
	    attr_get_float(c, d, "scale", 0.0f, &scale) || attr_get_float(c, d, "softcap", 0.0f, &softcap))
		return WL_ERR;
	if (nh <= 0 || nkv <= 0 || nh % nkv)
		return kfail(c, d, "num_heads %lld must be a positive multiple of kv_num_heads %lld", (long long)nh,
		             (long long)nkv);
	for (int i = 0; i < 7; i++)
		if (i != 1 && i != 2 && i != 3 && i != 4 &&
		    need_in(c, d, i, i >= 5 ? DTM(DT_INT32) : DTM(DT_FLOAT)))
			return WL_ERR;
	RTensor *q = c->in[0], *k = c->in[1], *v = c->in[2], *pk = c->in[3], *pv = c->in[4];
	RTensor *sl = c->in[5], *ts = c->in[6];
	char b1[96], b2[96];
	if (q->ndim != 3)
		return kfail(c, d, "tensor '%s' %s must be 3-D", kin_name(c, 0), kdesc(q, b1));
	g->B = q->dims[0];
	g->S = q->dims[1];
	g->N = nh;
	g->Nkv = nkv;
	g->packed = !k;
	if (g->packed) {
		if (v)
			return kfail(c, d, "key absent but value present");
		g->H = q->dims[2] / (nh + 2 * nkv);
		if (g->H * (nh + 2 * nkv) != q->dims[2])
			return kfail(c, d, "packed QKV width %lld does not split into heads", (long long)q->dims[2]);
	} else {
		if (!v || k->dtype != DT_FLOAT || v->dtype != DT_FLOAT)
			return kfail(c, d, "key and value must both be float tensors");
		g->H = q->dims[2] / nh;
		if (g->H * nh != q->dims[2] || k->ndim != 3 || v->ndim != 3 || k->dims[0] != g->B || k->dims[1] != g->S ||
		    !same_shape(k, v) || k->dims[2] != nkv * g->H)
			return kfail(c, d, "tensors '%s' %s and '%s' %s do not fit query %s", kin_name(c, 1), kdesc(k, b1),
			             kin_name(c, 2), kdesc(v, b2), kdesc(q, b2));
	}
	if (g->H <= 0)
		return kfail(c, d, "head size is 0");
	g->P = 0;
	if (pk || pv) {
		if (!pk || !pv || pk->dtype != DT_FLOAT || !same_shape(pk, pv) || pk->ndim != 4 || pk->dims[0] != g->B ||
		    pk->dims[1] != nkv || pk->dims[3] != g->H)
			return kfail(c, d, "past_key/past_value must both be [%lld,%lld,P,%lld] float", (long long)g->B,
			             (long long)nkv, (long long)g->H);
		g->P = pk->dims[2];
	}
	if (rt_numel(sl) != g->B)
		return kfail(c, d, "tensor '%s' %s: seqlens_k must have batch_size values", kin_name(c, 5), kdesc(sl, b1));
	if (rt_numel(ts) != 1)
		return kfail(c, d, "tensor '%s': total_sequence_length must be a scalar", kin_name(c, 6));
	g->T = scalar_i64(ts);
	if (g->T < g->S || g->T > ((int64_t)1 << 24))
		return kfail(c, d, "total_sequence_length %lld is smaller than the sequence %lld", (long long)g->T,
		             (long long)g->S);
	g->present = g->T > g->P ? g->T : g->P;
	bool subsequent = g->S > 1 && g->S != g->T;
	if (subsequent && g->B != 1)
		return kfail(c, d, "batch_size must be 1 when sequence_length > 1 with past context");
	g->first = !subsequent && g->S == g->T;
	if (!subsequent && !g->first && g->S != 1)
		return kfail(c, d, "sequence_length must be 1 when it is not the prompt");
	for (int64_t b = 0; b < g->B; b++) {
		int64_t tot = get_i64(sl->data, sl->dtype, b) + 1;
		int64_t past = g->first ? 0 : tot - g->S;
		if (tot < 1 || tot > g->present || past < 0 || past > g->P || past + g->S > g->present)
			return kfail(c, d, "seqlens_k[%lld]=%lld does not fit (past %lld, total %lld)", (long long)b,
			             (long long)(tot - 1), (long long)g->P, (long long)g->T);
	}
	g->rotary = rot != 0;
	g->interleaved = il != 0;
	if (g->rotary) {
		if (c->nin < 9 || !c->in[7] || !c->in[8] || need_in(c, d, 7, DTM(DT_FLOAT)) || need_in(c, d, 8, DTM(DT_FLOAT)))
			return kfail(c, d, "do_rotary needs cos_cache and sin_cache");
		RTensor *cs = c->in[7];
		if (cs->ndim != 2 || !same_shape(cs, c->in[8]) || cs->dims[1] * 2 > g->H)
			return kfail(c, d, "tensor '%s' %s: cache must be [max_pos, <= head_size/2]", kin_name(c, 7), kdesc(cs, b1));
		g->rd = cs->dims[1] * 2;
	}
	if (c->nin > 11 && c->in[11])
		return kfail(c, d, "input head_sink is not supported");
	if (c->nin > 12)
		for (int i = 12; i < c->nin; i++)
			if (c->in[i])
				return kfail(c, d, "input %d (%s) is not supported", i, kin_name(c, i));
	g->scale = scale != 0.0f ? scale : 1.0f / sqrtf((float)g->H);
	g->softcap = softcap;
	g->window = win;
	g->smooth = smooth != 0;
	return WL_OK;
}

static int64_t gqa_pos(const KCall *c, const Gqa *g, int64_t b, int64_t s)
{
	if (c->nin > 9 && c->in[9])
		return get_i64(c->in[9]->data, c->in[9]->dtype, b * g->S + s);
	if (g->first)
		return s;
	return get_i64(c->in[5]->data, c->in[5]->dtype, b) + 1 - g->S + s;
}

int ref_gqa_infer(KCall *c, Diag *d)
{
	Gqa g;
	if (gqa_params(c, d, &g))
		return WL_ERR;
	int64_t od[3] = {g.B, g.S, g.N * g.H}, pd[4] = {g.B, g.Nkv, g.present, g.H};
	set_out(c->out[0], DT_FLOAT, 3, od);
	for (int i = 1; i < 3 && i < c->nout; i++)
		set_out(c->out[i], DT_FLOAT, 4, pd);
	if (c->nout > 3 && c->out[3])
		return kfail(c, d, "output qk is not supported");
	c->scratch = gemm_scratch() + ALIGN64((size_t)(g.S * g.present) * 4);
	size_t kv = (size_t)(g.B * g.Nkv * g.present * g.H) * 4;
	c->shared = ALIGN64((size_t)(g.B * g.S * g.N * g.H) * 4) + 2 * ALIGN64(kv);
	return WL_OK;
}

typedef struct GqaJob {
	const KCall *c;
	const Gqa *g;
	const ufloat *q;          /* [B,S,N,H] (rotated if needed) */
	const ufloat *pk, *pv;    /* present buffers [B,Nkv,present,H] */
	float *out;
} GqaJob;

static void gqa_par(void *ctx, int64_t i0, int64_t i1, int tid)
{
	const GqaJob *j = ctx;
	const Gqa *g = j->g;
	char *base = kscratch(j->c, tid);
	float *sc = (float *)(base + gemm_scratch());
	const RTensor *sl = j->c->in[5];
	const RTensor *ab = j->c->nin > 10 ? j->c->in[10] : NULL;
	for (int64_t i = i0; i < i1; i++) {
		int64_t b = i / g->N, n = i % g->N, kvh = n / (g->N / g->Nkv);
		int64_t tot = get_i64(sl->data, sl->dtype, b) + 1, past = g->first ? 0 : tot - g->S;
		Head h = {.q = j->q + (b * g->S * g->N + n) * g->H, .qs = g->N * g->H,
		          .k = j->pk + (b * g->Nkv + kvh) * g->present * g->H, .ks = g->H,
		          .v = j->pv + (b * g->Nkv + kvh) * g->present * g->H, .vs = g->H,
		          .o = j->out + (b * g->S * g->N + n) * g->H, .os = g->N * g->H,
		          .S = g->S, .T = tot, .H = g->H, .Hv = g->H};
		head_scores(&h, g->scale, sc, base);
		for (int64_t s = 0; s < g->S; s++) {
			float *r = sc + s * tot;
			int64_t hi = past + s + 1, lo = 0;
			if (g->window > 0 && hi > g->window)
				lo = hi - g->window;            /* the last local_window_size keys */
			if (ab) {
				int64_t bb = ab->dims[0] == 1 ? 0 : b, nn = ab->dims[1] == 1 ? 0 : n;
				const ufloat *br = (const ufloat *)ab->data + ((bb * ab->dims[1] + nn) * g->S + s) * ab->dims[3];
				for (int64_t t = lo; t < hi; t++)
					r[t] += br[t];
			}
			if (g->softcap > 0)
				for (int64_t t = lo; t < hi; t++)
					r[t] = g->softcap * tanhf(r[t] / g->softcap);
			softmax_row_f32(r, tot, lo, hi, g->smooth ? 0.0f : NAN);
		}
		head_output(&h, sc, base);
	}
}

int ref_gqa_run(KCall *c, Diag *d)
{
	Gqa g;
	if (gqa_params(c, d, &g))
		return WL_ERR;
	RTensor *ab = c->nin > 10 ? c->in[10] : NULL;
	if (ab && (ab->dtype != DT_FLOAT || ab->ndim != 4 || (ab->dims[0] != 1 && ab->dims[0] != g.B) ||
	           (ab->dims[1] != 1 && ab->dims[1] != g.N) || ab->dims[2] != g.S || ab->dims[3] < g.T))
		return kfail(c, d, "tensor '%s': attention_bias must be [B|1, N|1, S, T] float", kin_name(c, 10));
	int64_t D = g.N * g.H, Dkv = g.Nkv * g.H, W = g.packed ? D + 2 * Dkv : D;
	const ufloat *qin = c->in[0]->data;
	const ufloat *kin = g.packed ? qin + D : c->in[1]->data, *vin = g.packed ? qin + D + Dkv : c->in[2]->data;
	int64_t kstride = g.packed ? W : Dkv;
	char *sh = c->shared_base;
	float *q = (float *)sh;
	size_t kv = ALIGN64((size_t)(g.B * g.Nkv * g.present * g.H) * 4);
	float *pk = (c->nout > 1 && c->out[1]) ? c->out[1]->data : (float *)(sh + ALIGN64((size_t)(g.B * g.S * D) * 4));
	float *pv = (c->nout > 2 && c->out[2]) ? c->out[2]->data : (float *)(sh + ALIGN64((size_t)(g.B * g.S * D) * 4) + kv);
	const ufloat *cs = g.rotary ? c->in[7]->data : NULL, *sn = g.rotary ? c->in[8]->data : NULL;
	int64_t half = g.rd / 2, maxpos = g.rotary ? c->in[7]->dims[0] : 0;
	/* Q, rotated */
	for (int64_t b = 0; b < g.B; b++)
		for (int64_t s = 0; s < g.S; s++) {
			int64_t pos = gqa_pos(c, &g, b, s);
			if (g.rotary && (pos < 0 || pos >= maxpos))
				return kfail(c, d, "position %lld outside the cos/sin cache (%lld rows)", (long long)pos,
				             (long long)maxpos);
			for (int64_t n = 0; n < g.N; n++) {
				const ufloat *src = qin + (b * g.S + s) * W + n * g.H;
				float *dst = q + ((b * g.S + s) * g.N + n) * g.H;
				if (g.rotary)
					rotate(src, dst, g.H, g.rd, cs + pos * half, sn + pos * half, g.interleaved);
				else
					memcpy(dst, src, (size_t)g.H * 4);
			}
		}
	/* present K/V: zero, past rows, then the new rows */
	memset(pk, 0, (size_t)(g.B * g.Nkv * g.present * g.H) * 4);
	memset(pv, 0, (size_t)(g.B * g.Nkv * g.present * g.H) * 4);
	for (int64_t b = 0; b < g.B; b++) {
		int64_t tot = get_i64(c->in[5]->data, c->in[5]->dtype, b) + 1, past = g.first ? 0 : tot - g.S;
		for (int64_t h = 0; h < g.Nkv; h++) {
			float *kd = pk + (b * g.Nkv + h) * g.present * g.H, *vd = pv + (b * g.Nkv + h) * g.present * g.H;
			if (past > 0) {
				memcpy(kd, (const ufloat *)c->in[3]->data + (b * g.Nkv + h) * g.P * g.H, (size_t)(past * g.H) * 4);
				memcpy(vd, (const ufloat *)c->in[4]->data + (b * g.Nkv + h) * g.P * g.H, (size_t)(past * g.H) * 4);
			}
			for (int64_t s = 0; s < g.S; s++) {
				const ufloat *ks = kin + (b * g.S + s) * kstride + h * g.H;
				const ufloat *vs = vin + (b * g.S + s) * kstride + h * g.H;
				float *kr = kd + (past + s) * g.H;
				if (g.rotary) {
					int64_t pos = gqa_pos(c, &g, b, s);
					rotate(ks, kr, g.H, g.rd, cs + pos * half, sn + pos * half, g.interleaved);
				} else {
					memcpy(kr, ks, (size_t)g.H * 4);
				}
				memcpy(vd + (past + s) * g.H, vs, (size_t)g.H * 4);
			}
		}
	}
	GqaJob j = {c, &g, q, pk, pv, c->out[0]->data};
	parallel_for(c->pool, g.B * g.N, 1, gqa_par, &j);
	return WL_OK;
}

/* ---------------------------------------------------------------- MultiHeadAttention */

typedef struct Mha {
	int64_t B, S, L, N, H, Hv, P, T;
	bool kv_bnsh;            /* key/value given as [B,N,L,H] */
	float scale, mask_value;
	bool causal;
	int mask_kind;           /* 0 none, 1 lengths (B), 2 (B,T), 3 (B,S,T) */
} Mha;

static int mha_params(const KCall *c, Diag *d, Mha *m)
{
	int64_t nh, uni;
	float scale, mfv;
	if (attr_get_int(c, d, "num_heads", 0, &nh) || attr_get_int(c, d, "unidirectional", 0, &uni) ||
	    attr_get_float(c, d, "scale", 0.0f, &scale) || attr_get_float(c, d, "mask_filter_value", -10000.0f, &mfv))
		return WL_ERR;
	if (nh <= 0)
		return kfail(c, d, "num_heads is required");
	if (need_in(c, d, 0, DTM(DT_FLOAT)))
		return WL_ERR;
	RTensor *q = c->in[0], *k = c->nin > 1 ? c->in[1] : NULL, *v = c->nin > 2 ? c->in[2] : NULL;
	RTensor *bias = c->nin > 3 ? c->in[3] : NULL, *pk = c->nin > 6 ? c->in[6] : NULL, *pv = c->nin > 7 ? c->in[7] : NULL;
	char b1[96], b2[96];
	if (q->ndim != 3)
		return kfail(c, d, "tensor '%s' %s: only query [B,S,D] is supported (no packed QKV)", kin_name(c, 0), kdesc(q, b1));
	if (!k || !v || k->dtype != DT_FLOAT || v->dtype != DT_FLOAT)
		return kfail(c, d, "key and value (float) are required");
	m->B = q->dims[0];
	m->S = q->dims[1];
	m->N = nh;
	m->H = q->dims[2] / nh;
	if (m->H * nh != q->dims[2] || m->H == 0)
		return kfail(c, d, "hidden size %lld is not a multiple of num_heads %lld", (long long)q->dims[2], (long long)nh);
	if (k->ndim == 3 && v->ndim == 3) {
		m->kv_bnsh = false;
		m->L = k->dims[1];
		m->Hv = v->dims[2] / nh;
		if (k->dims[0] != m->B || k->dims[2] != q->dims[2] || v->dims[0] != m->B || v->dims[1] != m->L ||
		    m->Hv * nh != v->dims[2])
			return kfail(c, d, "tensors '%s' %s and '%s' %s do not fit the query", kin_name(c, 1), kdesc(k, b1),
			             kin_name(c, 2), kdesc(v, b2));
	} else if (k->ndim == 4 && v->ndim == 4) {
		m->kv_bnsh = true;
		m->L = k->dims[2];
		m->Hv = v->dims[3];
		if (k->dims[0] != m->B || k->dims[1] != nh || k->dims[3] != m->H || v->dims[0] != m->B ||
		    v->dims[1] != nh || v->dims[2] != m->L)
			return kfail(c, d, "tensors '%s' %s and '%s' %s must be [B,N,L,H]", kin_name(c, 1), kdesc(k, b1),
			             kin_name(c, 2), kdesc(v, b2));
		if (bias)
			return kfail(c, d, "bias with 4-D key/value is not supported");
	} else {
		return kfail(c, d, "key and value must be both 3-D or both 4-D");
	}
	if (bias && (bias->dtype != DT_FLOAT || rt_numel(bias) != 2 * m->N * m->H + m->N * m->Hv))
		return kfail(c, d, "tensor '%s': bias must have D + D + Dv values", kin_name(c, 3));
	m->P = 0;
	if (pk || pv) {
		if (!pk || !pv || m->kv_bnsh || pk->dtype != DT_FLOAT || pk->ndim != 4 || pk->dims[0] != m->B ||
		    pk->dims[1] != nh || pk->dims[3] != m->H || pv->ndim != 4 || pv->dims[2] != pk->dims[2] ||
		    pv->dims[3] != m->Hv)
			return kfail(c, d, "past_key/past_value must both be [B,N,P,H] with 3-D key/value");
		m->P = pk->dims[2];
	}
	m->T = m->P + m->L;
	RTensor *mask = c->nin > 4 ? c->in[4] : NULL;
	m->mask_kind = 0;
	if (mask) {
		if (need_in(c, d, 4, DTM(DT_INT32)))
			return WL_ERR;
		if (mask->ndim == 1 && mask->dims[0] == m->B)
			m->mask_kind = 1;
		else if (mask->ndim == 2 && mask->dims[0] == m->B && mask->dims[1] == m->T)
			m->mask_kind = 2;
		else if (mask->ndim == 3 && mask->dims[0] == m->B && mask->dims[1] == m->S && mask->dims[2] == m->T)
			m->mask_kind = 3;
		else
			return kfail(c, d, "tensor '%s' %s: unsupported key_padding_mask shape", kin_name(c, 4), kdesc(mask, b1));
	}
	RTensor *ab = c->nin > 5 ? c->in[5] : NULL;
	if (ab && (ab->dtype != DT_FLOAT || ab->ndim != 4 || (ab->dims[0] != 1 && ab->dims[0] != m->B) ||
	           (ab->dims[1] != 1 && ab->dims[1] != m->N) || ab->dims[2] != m->S || ab->dims[3] != m->T))
		return kfail(c, d, "tensor '%s': attention_bias must be [B|1, N|1, S, T] float", kin_name(c, 5));
	for (int i = 8; i < c->nin; i++)
		if (c->in[i])
			return kfail(c, d, "input %d (%s) is not supported", i, kin_name(c, i));
	m->scale = scale != 0.0f ? scale : 1.0f / sqrtf((float)m->H);
	m->mask_value = mfv;
	m->causal = uni != 0;
	return WL_OK;
}

int ref_mha_infer(KCall *c, Diag *d)
{
	Mha m;
	if (mha_params(c, d, &m))
		return WL_ERR;
	int64_t od[3] = {m.B, m.S, m.N * m.Hv}, kd[4] = {m.B, m.N, m.T, m.H}, vd[4] = {m.B, m.N, m.T, m.Hv};
	set_out(c->out[0], DT_FLOAT, 3, od);
	if (c->nout > 1)
		set_out(c->out[1], DT_FLOAT, 4, kd);
	if (c->nout > 2)
		set_out(c->out[2], DT_FLOAT, 4, vd);
	if (c->nout > 3 && c->out[3])
		return kfail(c, d, "output qk is not supported");
	c->scratch = gemm_scratch() + ALIGN64((size_t)(m.S * m.T) * 4);
	c->shared = ALIGN64((size_t)(m.B * m.S * m.N * m.H) * 4) + ALIGN64((size_t)(m.B * m.N * m.T * m.H) * 4) +
	            ALIGN64((size_t)(m.B * m.N * m.T * m.Hv) * 4);
	return WL_OK;
}

typedef struct MhaJob {
	const KCall *c;
	const Mha *m;
	const ufloat *q, *k, *v;  /* q [B,S,N,H]; k/v [B,N,T,H] */
	float *out;
} MhaJob;

static void mha_par(void *ctx, int64_t i0, int64_t i1, int tid)
{
	const MhaJob *j = ctx;
	const Mha *m = j->m;
	char *base = kscratch(j->c, tid);
	float *sc = (float *)(base + gemm_scratch());
	const RTensor *mask = j->c->nin > 4 ? j->c->in[4] : NULL, *ab = j->c->nin > 5 ? j->c->in[5] : NULL;
	for (int64_t i = i0; i < i1; i++) {
		int64_t b = i / m->N, n = i % m->N;
		Head h = {.q = j->q + (b * m->S * m->N + n) * m->H, .qs = m->N * m->H,
		          .k = j->k + (b * m->N + n) * m->T * m->H, .ks = m->H,
		          .v = j->v + (b * m->N + n) * m->T * m->Hv, .vs = m->Hv,
		          .o = j->out + (b * m->S * m->N + n) * m->Hv, .os = m->N * m->Hv,
		          .S = m->S, .T = m->T, .H = m->H, .Hv = m->Hv};
		head_scores(&h, m->scale, sc, base);
		for (int64_t s = 0; s < m->S; s++) {
			float *r = sc + s * m->T;
			if (ab) {
				int64_t bb = ab->dims[0] == 1 ? 0 : b, nn = ab->dims[1] == 1 ? 0 : n;
				const ufloat *br = (const ufloat *)ab->data + ((bb * ab->dims[1] + nn) * m->S + s) * m->T;
				for (int64_t t = 0; t < m->T; t++)
					r[t] += br[t];
			}
			for (int64_t t = 0; t < m->T; t++) {
				bool masked = false;
				if (m->causal && t > m->P + s)
					masked = true;
				if (mask) {
					const int32_t *mk = mask->data;
					if (m->mask_kind == 1)
						masked |= t >= mk[b];
					else if (m->mask_kind == 2)
						masked |= mk[b * m->T + t] == 0;
					else
						masked |= mk[(b * m->S + s) * m->T + t] == 0;
				}
				if (masked)
					r[t] += m->mask_value;
			}
			softmax_row_f32(r, m->T, 0, m->T, NAN);
		}
		head_output(&h, sc, base);
	}
}

int ref_mha_run(KCall *c, Diag *d)
{
	Mha m;
	if (mha_params(c, d, &m))
		return WL_ERR;
	RTensor *q = c->in[0], *k = c->in[1], *v = c->in[2], *bias = c->nin > 3 ? c->in[3] : NULL;
	int64_t D = m.N * m.H, Dv = m.N * m.Hv;
	char *sh = c->shared_base;
	float *qb = (float *)sh;
	float *kb = (c->nout > 1 && c->out[1]) ? c->out[1]->data : (float *)(sh + ALIGN64((size_t)(m.B * m.S * D) * 4));
	float *vb = (c->nout > 2 && c->out[2]) ? c->out[2]->data :
	            (float *)(sh + ALIGN64((size_t)(m.B * m.S * D) * 4) + ALIGN64((size_t)(m.B * m.N * m.T * m.H) * 4));
	const ufloat *bq = bias ? bias->data : NULL, *bk = bias ? (const ufloat *)bias->data + D : NULL;
	const ufloat *bv = bias ? (const ufloat *)bias->data + 2 * D : NULL;
	const ufloat *qi = q->data;
	for (int64_t i = 0; i < m.B * m.S; i++)
		for (int64_t x = 0; x < D; x++)
			qb[i * D + x] = bq ? qi[i * D + x] + bq[x] : qi[i * D + x];
	for (int64_t b = 0; b < m.B; b++)
		for (int64_t n = 0; n < m.N; n++) {
			float *kd = kb + (b * m.N + n) * m.T * m.H, *vd = vb + (b * m.N + n) * m.T * m.Hv;
			if (m.P) {
				memcpy(kd, (const ufloat *)c->in[6]->data + (b * m.N + n) * m.P * m.H, (size_t)(m.P * m.H) * 4);
				memcpy(vd, (const ufloat *)c->in[7]->data + (b * m.N + n) * m.P * m.Hv, (size_t)(m.P * m.Hv) * 4);
			}
			for (int64_t t = 0; t < m.L; t++) {
				float *kr = kd + (m.P + t) * m.H, *vr = vd + (m.P + t) * m.Hv;
				if (m.kv_bnsh) {
					memcpy(kr, (const ufloat *)k->data + ((b * m.N + n) * m.L + t) * m.H, (size_t)m.H * 4);
					memcpy(vr, (const ufloat *)v->data + ((b * m.N + n) * m.L + t) * m.Hv, (size_t)m.Hv * 4);
				} else {
					const ufloat *ks = (const ufloat *)k->data + (b * m.L + t) * D + n * m.H;
					const ufloat *vs = (const ufloat *)v->data + (b * m.L + t) * Dv + n * m.Hv;
					for (int64_t x = 0; x < m.H; x++)
						kr[x] = bk ? ks[x] + bk[n * m.H + x] : ks[x];
					for (int64_t x = 0; x < m.Hv; x++)
						vr[x] = bv ? vs[x] + bv[n * m.Hv + x] : vs[x];
				}
			}
		}
	MhaJob j = {c, &m, qb, kb, vb, c->out[0]->data};
	parallel_for(c->pool, m.B * m.N, 1, mha_par, &j);
	return WL_OK;
}
