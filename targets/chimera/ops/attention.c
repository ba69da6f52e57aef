/* attention.c — the fused attentions (ccl/nn.hpp), softmax in fixed point,
 * scores in int64; the scale as a Q30 template argument:
 *   WhisperAttention → nn::whisperAttention (self, causal, cross; past K/V
 *     inputs and present K/V outputs, kv_layout bsd or bhsd)
 *   GroupQueryAttention → nn::gqa (RoPE with cos/sin as constant Q30 "table"
 *     blobs or activations, past K/V, present K/V, int64/int32 attention
 *     mask and position ids; static_cache: presents = the new rows, STATIC)
 * MACs B·H·T·S·hd·2 (S: keys, past included); ALU ops B·H·T·S·3 plus
 * B·T·D (whisper) or B·T·H·hd·(1 + 2·rope) (gqa); scratch: q, k, v in int32.
 */
#include <math.h>
#include <string.h>
#include "ops.h"

/* Template arguments of q, k, v (inputs 0..2), past K/V (inputs past,
 * past + 1) and the output, present K/V (outputs 0..2). */
typedef struct AttnFmt { char q[48], k[48], v[48], pk[48], pv[48], o[24], ok[24], ov[24]; } AttnFmt;

static int attn_fmt(const Node *n, int past, AttnFmt *t, Diag *d)
{
	if (ck_fq(n, nin(n, 0), d, t->q) || ck_fq(n, nin(n, 1), d, t->k) || ck_fq(n, nin(n, 2), d, t->v) ||
	    ck_opt_fq(n, nin(n, past), d, t->pk) || ck_opt_fq(n, nin(n, past + 1), d, t->pv) ||
	    ck_fo(n, nout(n, 0), d, t->o) || ck_opt_fo(n, nout(n, 1), d, t->ok) || ck_opt_fo(n, nout(n, 2), d, t->ov))
		return WL_ERR;
	return WL_OK;
}

/* argument of optional input i / output j: "nullptr" when absent */
static const char *opt_in(const Node *n, const ChCallArgs *a, int i)
{
	return ck_arg(nin(n, i) ? a->in[i] : NULL);
}

static const char *opt_out(const Node *n, const ChCallArgs *a, int j)
{
	return ck_arg(nout(n, j) ? a->out[j] : NULL);
}

static int check_past(const Node *n, const Value *pk, const Value *pv, Diag *d)
{
	if ((pk == NULL) != (pv == NULL))
		return KFAIL(n, "past_k and past_v must both be present or absent");
	return WL_OK;
}

/* B batch, T query rows, L keys (past included), H heads over Hkv K/V heads
 * of hd: MACs (scores and weighted values), ALU ops (softmax: max, exp,
 * scale; per output element a shift, plus the RoPE rotation of q and k),
 * scratch (q, k, v in int32). */
static void attn_counts(CclKernelInfo *ki, int64_t B, int64_t T, int64_t L, int64_t H, int64_t Hkv, int64_t hd,
                        int rope)
{
	ki->macs = (uint64_t)(B * H * T * L * hd * 2);
	ki->alu_ops = (uint64_t)(B * H * T * L * 3 + B * T * H * hd * (1 + 2 * rope));
	ki->scratch_bytes = (uint64_t)(4 * (B * T * H * hd + 2 * B * L * Hkv * hd));
}

/* ---------------------------------------------------------------- WhisperAttention */

typedef struct WA { int64_t B, T, S, P, D, H, hd; int causal, bhsd; double scale; } WA;

static int wa_dims(const Node *n, WA *w, Diag *d)
{
	for (int i = 0; i < 3; i++)
		if (ck_need_shape(n, nin(n, i), d))
			return WL_ERR;
	for (int i = 0; i < n->ninputs; i++)
		if (nin(n, i) && nin(n, i)->init)
			return KFAIL(n, "input %d ('%s') is a constant: not supported", i, nin(n, i)->name);
	w->B = dim_of(nin(n, 0), 0);
	w->D = attr_int(n, "embed", -1);
	w->H = attr_int(n, "heads", -1);
	w->T = attr_int(n, "q_len", -1);
	int64_t L = attr_int(n, "kv_len", -1);
	w->causal = (int)attr_int(n, "causal", 0);
	w->scale = attr_float(n, "scale", 1.0f);
	const char *lay = attr_string(n, "kv_layout", "bsd");
	w->bhsd = strcmp(lay, "bhsd") == 0;
	if (w->D <= 0 || w->H <= 0 || w->D % w->H || w->T <= 0 || L <= 0)
		return KFAIL(n, "bad embed/heads/q_len/kv_len attributes");
	if (!(w->scale > 0))
		return KFAIL(n, "scale must be positive");
	w->hd = w->D / w->H;
	w->P = nin(n, 3) ? dim_of(nin(n, 3), 2) : 0;
	if (check_past(n, nin(n, 3), nin(n, 4), d))
		return WL_ERR;
	w->S = L - w->P;
	if (numel_of(nin(n, 0)) != w->B * w->T * w->D || numel_of(nin(n, 1)) != w->B * w->S * w->D)
		return KFAIL(n, "tensor '%s': shape does not match the attributes", nin(n, 1)->name);
	return WL_OK;
}

int ck_whisper_attn_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	WA w;
	if (wa_dims(n, &w, d))
		return WL_ERR;
	attn_counts(ki, w.B, w.T, w.P + w.S, w.H, w.H, w.hd, 0);
	return WL_OK;
}

int ck_whisper_attn_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	WA w;
	AttnFmt t;
	if (wa_dims(n, &w, d) || attn_fmt(n, 3, &t, d))
		return WL_ERR;
	fprintf(f, "%s<%lld, %lld, %lld, %lld, %lld, %lld, %d, %d, %s, %s, %s, %s, %s, %s, %s, %s, %lldLL>"
	        "(c, %s, %s, %s, %s, %s, %s, %s, %s, %s);\n", op->cpp,
	        (long long)w.B, (long long)w.T, (long long)w.S, (long long)w.P, (long long)w.D, (long long)w.H, w.causal,
	        w.bhsd, t.q, t.k, t.v, t.pk, t.pv, t.o, t.ok, t.ov, llround(w.scale * ldexp(1.0, 30)), a->in[0], a->in[1],
	        a->in[2], opt_in(n, a, 3), opt_in(n, a, 4), a->out[0], opt_out(n, a, 1), opt_out(n, a, 2),
	        ck_arg(a->scratch));
	return WL_OK;
}

/* ---------------------------------------------------------------- GroupQueryAttention */

typedef struct GQ { int64_t B, T, P, H, Hkv, hd; int causal, rope, pos, mask; double scale; } GQ;

static int gq_dims(const Node *n, GQ *g, Diag *d)
{
	for (int i = 0; i < 3; i++) {
		if (ck_need_shape(n, nin(n, i), d))
			return WL_ERR;
		if (nin(n, i)->init)
			return KFAIL(n, "input %d ('%s') is a constant: not supported", i, nin(n, i)->name);
	}
	g->H = attr_int(n, "heads", -1);
	g->Hkv = attr_int(n, "kv_heads", -1);
	g->hd = attr_int(n, "head_dim", -1);
	g->causal = (int)attr_int(n, "causal", 0);
	g->rope = (int)attr_int(n, "rope", 0);
	g->scale = attr_float(n, "scale", 1.0f);
	if (g->H <= 0 || g->Hkv <= 0 || g->H % g->Hkv || g->hd <= 0 || (g->rope && g->hd % 2))
		return KFAIL(n, "bad heads/kv_heads/head_dim attributes");
	if (!(g->scale > 0))
		return KFAIL(n, "scale must be positive");
	g->B = dim_of(nin(n, 0), 0);
	g->T = dim_of(nin(n, 0), 1);
	if (numel_of(nin(n, 0)) != g->B * g->T * g->H * g->hd || numel_of(nin(n, 1)) != g->B * g->T * g->Hkv * g->hd)
		return KFAIL(n, "tensor '%s': shape does not match the attributes", nin(n, 0)->name);
	if (check_past(n, nin(n, 5), nin(n, 6), d))
		return WL_ERR;
	g->P = nin(n, 5) ? dim_of(nin(n, 5), 2) : 0;
	Value *m = nin(n, 7), *p = nin(n, 8);
	g->mask = 0;
	if (m) {
		if (m->type.elem != DT_INT64 && m->type.elem != DT_INT32)
			return KFAIL(n, "tensor '%s': attention_mask must be int64 or int32", m->name);
		if (numel_of(m) != g->B * (g->P + g->T))
			return KFAIL(n, "tensor '%s': expected [%lld, %lld]", m->name, (long long)g->B, (long long)(g->P + g->T));
		g->mask = m->type.elem == DT_INT64 ? 1 : 2;
	}
	g->pos = 0;
	if (g->rope) {
		for (int i = 3; i < 5; i++)
			if (!nin(n, i) || ck_need_shape(n, nin(n, i), d))
				return nin(n, i) ? WL_ERR : KFAIL(n, "rope needs cos and sin");
		if (p) {
			if (p->type.elem != DT_INT64 && p->type.elem != DT_INT32)
				return KFAIL(n, "tensor '%s': position_ids must be int64 or int32", p->name);
			g->pos = p->type.elem == DT_INT64 ? 1 : 2;
			if (numel_of(p) == g->T && g->B > 1)
				g->pos += 10;
			else if (numel_of(p) != g->B * g->T)
				return KFAIL(n, "tensor '%s': expected [%lld, %lld]", p->name, (long long)g->B, (long long)g->T);
		} else if (numel_of(nin(n, 3)) != g->T * g->hd) {
			return KFAIL(n, "tensor '%s': expected %lld rows of %lld", nin(n, 3)->name, (long long)g->T,
			             (long long)g->hd);
		}
		if ((nin(n, 3)->init == NULL) != (nin(n, 4)->init == NULL))
			return KFAIL(n, "cos and sin must both be constants or both activations");
		if (numel_of(nin(n, 3)) % g->hd || numel_of(nin(n, 4)) != numel_of(nin(n, 3)))
			return KFAIL(n, "tensor '%s': rows of head_dim %lld expected", nin(n, 3)->name, (long long)g->hd);
	}
	return WL_OK;
}

int ck_gqa_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	GQ g;
	if (gq_dims(n, &g, d))
		return WL_ERR;
	if (g.rope && nin(n, 3)->init) {
		ck_pack_plain(ki, "table", nin(n, 3)->init, 30);
		ck_pack_plain(ki, "table", nin(n, 4)->init, 30);
	}
	attn_counts(ki, g.B, g.T, g.P + g.T, g.H, g.Hkv, g.hd, g.rope);
	return WL_OK;
}

int ck_gqa_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	GQ g;
	if (gq_dims(n, &g, d))
		return WL_ERR;
	char cs[48];
	const char *cosa = "nullptr", *sina = "nullptr";
	if (!g.rope) {
		strcpy(cs, "0, 0");
	} else if (nin(n, 3)->init) {
		strcpy(cs, "30, 30");
		cosa = a->blob[0];
		sina = a->blob[1];
	} else {
		if (ck_fq(n, nin(n, 3), d, cs))
			return WL_ERR;
		cosa = a->in[3];
		sina = a->in[4];
	}
	AttnFmt t;
	if (attn_fmt(n, 5, &t, d))
		return WL_ERR;
	fprintf(f, "%s<%lld, %lld, %lld, %lld, %lld, %lld, %d, %d, %d, %d, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
	        "%lldLL, %d>(c, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, ", op->cpp,
	        (long long)g.B, (long long)g.T, (long long)g.P, (long long)g.H, (long long)g.Hkv, (long long)g.hd,
	        g.causal, g.rope, g.pos, g.mask, t.q, t.k, t.v, cs, t.pk, t.pv, t.o, t.ok, t.ov,
	        llround(g.scale * ldexp(1.0, 30)), (int)(attr_int(n, "static_cache", 0) != 0), a->in[0], a->in[1],
	        a->in[2], cosa, sina, opt_in(n, a, 5),
	        opt_in(n, a, 6), ck_arg(g.mask ? a->in[7] : NULL), ck_arg(g.pos ? a->in[8] : NULL), a->out[0],
	        opt_out(n, a, 1), opt_out(n, a, 2), ck_arg(a->scratch));
	/* position_ids index the cos/sin rows: [0, rows) or the run ends (ck_index_site) */
	if (g.pos)
		ck_index_site(f, n, nin(n, 8), numel_of(nin(n, 3)) / (g.hd ? g.hd : 1), INDEX_NO_WRAP);
	else
		fputs("ccl::IndexSite{}", f);
	fputs(");\n", f);
	return WL_OK;
}
