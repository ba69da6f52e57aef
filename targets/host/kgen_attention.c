/* kgen_attention.c — host kernels of ai.wlower.WhisperAttention and
 * ai.wlower.GroupQueryAttention (docs/OPS.md; reference semantics in
 * runtime/interp/ref_fused_attention.c).
 *
 * Tiled online-softmax ("flash") attention: no T x L score matrix exists in
 * memory. Two parallel phases over api->parallel_for:
 *
 *  1. pack, one task per (batch, KV head) — or per chunk of its new rows
 *     when there are fewer than 8 such heads and no past rows (nsc chunks of
 *     at least 256 rows, whole key blocks; the first writes the padding and
 *     the bias): the keys
 *     and values of the head
 *     (past rows first, then the new rows; GQA rotates new keys with RoPE;
 *     fp16 rounds to binary16) are written to the present outputs when the
 *     node has them, and packed into the kernel's scratch as
 *       Kt [B, Hkv, Lp/Kw, hd, Kw]  keys transposed in panels of Kw keys
 *                             (key index fastest; Kw = 2 vectors, the
 *                             micro-kernel's width), Lp = L rounded up to
 *                             the panel width Kw, zero padded
 *       Vp [B, Hkv, Lp, hdp]  values, rows zero padded to hdp (multiple of vw)
 *       bias [B, Lpb]         additive key bias (Lpb = L rounded up to
 *                             the key block Bc): 0, −3.4028235e38 where the
 *                             int attention_mask is != 1, −inf past L.
 *     repeat_kv is index mapping: query head h reads KV head h / (H/Hkv).
 *  2. attend, one task per (batch, head, block of nrt·Br query rows; nrt =
 *     up to 4 row tiles of Br, halved when that leaves one task in all, so
 *     two threads share its rows): the block's queries (scaled, rotated,
 *     rounded), O, the running max m and the lane-wise running sum l sit in
 *     small stack tiles; for each block of Bc = 4 vectors of keys (64 on
 *     AVX-512, 32 on AVX2), and on it for each row tile (the block's Kt
 *     panels and V rows stay in L1 across the tiles; a tile past T or, causal,
 *     before the block's first key is skipped):
 *       - S = Q Kᵀ (Br x Bc) as Bc/Kw register tiles of Br x Kw (Br = 12
 *         rows x 2 vectors = 24 accumulators on AVX-512, 6 x 2 on AVX2): a
 *         broadcast-FMA micro-kernel over the head dimension streaming one
 *         contiguous Kt panel, stored to the Br x Bc stack tile P;
 *       - online softmax per row, in base 2 (the query scale carries
 *         log2 e, so S holds s·log2 e and exp(s − m) = 2^(S − M)): + key
 *         bias, causal keys masked by index (−inf), the Br row maxima as ONE
 *         transposing shuffle tree of vmaxps (hg_vreduce_max_rows), m_new =
 *         max(m, ·) as a vector of the Br rows; their rescale factors
 *         alpha_i = 2^(m_i − m_new,i) as ONE vector exp2; p = 2^(s − m_new)
 *         (hg_exp2: rint, a degree-6 polynomial on <vw x float>, <= 2 ulp of
 *         libm, 2^n by vscalefps on AVX-512; tests/oracle/test_host_kernels.py
 *         exp2_libm) back into P; the lane-wise running sum l = alpha·l + Σ p;
 *       - O = alpha·O + P V: O [Br, hdp] (stack) rescaled once per block
 *         (so per Bc keys, not per key) while it is loaded into the
 *         accumulators of the second broadcast-FMA micro-kernel, Br rows x
 *         pvc = 2 vectors of the head dimension per pass over the block's
 *         Bc contiguous V rows (Vp is already a panel: row j, then j + 1).
 *     Causal blocks stop at the diagonal. At the end O / l is stored
 *     (rounded when fp16) to out[b, t, h*hd ...].
 *     Threads: the pool hands out contiguous chunks of these tasks (query
 *     blocks of one head, then the next head), a shrinking share of what is
 *     left per claim (runtime/interp/threadpool.c);
 *     Kt/Vp are only read in this phase and each task writes only its own
 *     Br output rows of hd floats (whole 64-byte lines when hd is a
 *     multiple of 16), so no two threads write one cache line.
 *     Cost (Whisper-tiny encoder, 6 heads x 1500 x 1500 x 64, AVX-512): per
 *     12 x 64 block 6144 vector FMAs against 48 vector exp2 (10 operations
 *     each), one max tree, one alpha exp2 and 48 O loads / stores: 80–90 %
 *     of the FMA peak (12 rows rather than 8: 2–3 % faster, the two
 *     micro-kernels' loops are the cost)
 *     (bench/host_attention.py; bench/RESULTS.md, measured on a loaded
 *     machine).
 *
 * Scratch: Kt, Vp and bias (O(L·hd) per KV head), never O(T·L).
 *
 * bf16 (--host-precision bf16, AVX512-BF16; the tiled path with an even head
 * dimension, not fp16: Attn.bf): Kt and Vp hold bf16 pairs (put_k / put_v),
 * the query tile is bf16 and p is rounded into a bf16 tile Pb after the float
 * exp; Q·Kᵀ steps over head-dimension pairs and P·V over key pairs, each a
 * 32-bit broadcast of a pair into vdpbf16ps (ld32 / bc32 / madd), half the
 * steps of the float micro-kernels with the same register tiles. The scores,
 * the softmax and O stay float; l sums the float p.
 *
 * GroupQueryAttention static_cache = 1 (the LLM pipeline's step and
 * prefill): past_k/past_v are the static caches of P = max_seq rows. Before
 * the phases, nv = 1 + the last cache row with attention_mask 1 is found
 * (run time); pack copies only cache rows < nv and puts the T new rows right
 * after them (packed key j < nv: cache row j; nv + t: new row t, mask entry
 * P + t), so packing and attending cost O(nv) — the keys in use — not
 * O(max_seq); the present outputs get the T new rows only. With T <= DEC_MAXT
 * (the step program) there is no pack at all: emit_decode reads the row-major
 * cache in place (see there), so a step copies nothing and its time grows
 * with the position only through the scores and the weighted sum.
 *
 * WhisperAttention with T <= DEC_MAXT over K/V and nothing else (no past,
 * no presents, not causal, not fp16: a Whisper step's cross-attention over
 * the 1500 encoder keys, bhsd, or a decoder prefill's over its own K/V
 * projections, bsd) takes the same decode path with K/V as the "cache" (all
 * S rows valid, no new rows; bsd rows of one head are kvs = D floats apart,
 * and the packed P·V of a head dimension below a vector is off there): the
 * pack would copy 2·S·hd floats per head (4.6 MB per layer of Whisper-tiny)
 * to read them once. Whisper-tiny's 4-token prefill: 0.6–0.8 → 0.43 ms per
 * cross-attention.
 */
#include <math.h>
#include <float.h>
#include <string.h>
#include "hostgen.h"

#define ALIGN64(x) (((x) + 63) & ~(uint64_t)63)

typedef struct Attn {
	int64_t B, T, H, Hkv, hd, P, S, L;
	bool causal, fp16, bhsd, rope, stat;
	float scale;
	/* argument slots (-1 = absent) */
	int a_q, a_k, a_v, a_pk, a_pv, a_cos, a_sin, a_mask, a_pos, a_out, a_prk, a_prv, a_scr;
	int mask_dt, pos_dt;
	int64_t pos_numel, cs_rows;
	bool dec;   /* the decode path (emit_decode): static_cache, T <= DEC_MAXT */
	bool xdec;  /* ... WhisperAttention over constant K/V (cross-attention in a step):
	             * K/V [B, H, S, hd] or [B, S, D] read in place as the "cache", no new rows */
	int64_t kvs;  /* the decode path: elements between two cache rows (hd; D for bsd K/V) */
	bool bf;    /* --host-precision bf16 on the tiled path: Kt, Vp, Q and P in bf16,
	             * Q·Kᵀ and P·V by vdpbf16ps (see "bf16" in the header) */
	/* tiling */
	int64_t Br, Bc, Kw, Lp, Lpb, hdp, nrt, nqb, pvc, nsc, sch;
	uint64_t off_kt, off_vp, off_bias, scratch;
} Attn;

static bool present_in(const Node *n, int i)
{
	return i < n->ninputs && n->inputs[i];
}

static bool present_out(const Node *n, int i)
{
	return i < n->noutputs && n->outputs[i];
}

/* Query rows up to which a static-cache GroupQueryAttention takes the decode
 * path (the step program has T = 1; the prefill's 16 rows take the tiled one). */
#define DEC_MAXT 4

static void attn_tiling(HostGen *g, Attn *a)
{
	int64_t vw = g->vw > 0 ? g->vw : 16;
	/* a Whisper step's (bhsd) or a decoder prefill's (bsd) cross-attention: a
	 * few query rows against the S encoder keys of the K/V inputs, no past,
	 * no presents, no mask, not causal */
	a->xdec = !a->stat && a->T <= DEC_MAXT && a->P == 0 && a->a_prk < 0 && a->a_prv < 0 &&
	          a->a_mask < 0 && !a->causal && !a->fp16 && !a->rope && a->H == a->Hkv;
	a->kvs = a->xdec && !a->bhsd ? a->H * a->hd : a->hd;
	a->dec = (a->stat && a->T <= DEC_MAXT) || a->xdec;
	a->bf = g->bf16 && g->avx512 && vw == 16 && !a->dec && !a->fp16 && a->hd % 2 == 0;
	/* query rows per register tile: 12 on AVX-512 (Q·Kᵀ and P·V tiles of
	 * 12 x 2 vectors, 24 accumulators, like the GEMM's), 6 on AVX2 (12 of the
	 * 16 registers; 4 rows measured 7 % slower, 8 spill) */
	a->Br = a->T < 12 ? a->T : 12;
	if (!g->avx512 && a->Br > 6)
		a->Br = 6;
	if (a->Br > vw)   /* the row maxima's shuffle tree: one row per lane (SSE: 4) */
		a->Br = vw;
	if (a->Br < 1)
		a->Br = 1;
	/* key block Bc = 4 vectors: the softmax's per-row work (max, alpha, the
	 * rescale of O) is paid once per 4·vw keys; Q·Kᵀ computes it as Bc/Kw
	 * register tiles of Br x Kw (Kw = 2 vectors: 2·Br accumulators). The
	 * decode path keeps 2-vector blocks. */
	a->Kw = 2 * vw;
	a->Bc = a->dec ? 2 * vw : 4 * vw;
	a->pvc = 2;   /* head-dim vectors per P·V pass: Br x 2 accumulators */
	/* keys are packed up to a whole panel (Kw), the key bias up to a whole
	 * block (Bc): the last block may hold fewer panels than Bc/Kw (1500 keys:
	 * 23 blocks of 64 and one of 32, not 36 padded keys computed per row) */
	a->Lp = (a->L + a->Kw - 1) / a->Kw * a->Kw;
	a->Lpb = (a->L + a->Bc - 1) / a->Bc * a->Bc;
	a->hdp = (a->hd + vw - 1) / vw * vw;
	/* row tiles per attend task: up to 4 (48 rows on AVX-512) share each key
	 * block's Kt panels and V rows while they are in L1 */
	a->nrt = (a->T + a->Br - 1) / a->Br;
	if (a->nrt > 4)
		a->nrt = 4;
	if (a->nrt < 1)
		a->nrt = 1;
	a->nqb = (a->T + a->nrt * a->Br - 1) / (a->nrt * a->Br);
	/* a single attend task (one (batch, head) of a few row tiles:
	 * absorb-cross-kv's one head of T·H rows): two, so a second thread has work */
	if (a->B * a->H * a->nqb == 1 && a->nrt > 1) {
		a->nrt = (a->nrt + 1) / 2;
		a->nqb = (a->T + a->nrt * a->Br - 1) / (a->nrt * a->Br);
	}
	/* pack tasks: (batch, KV head), each cut in nsc chunks of new rows when
	 * there are fewer than 8 of them and nothing else to copy (no past rows) */
	a->nsc = 1;
	a->sch = a->S;
	if (a->P == 0 && !a->stat && a->B * a->Hkv < 8) {
		int64_t n = (8 + a->B * a->Hkv - 1) / (a->B * a->Hkv);
		if (n > a->S / 256)
			n = a->S / 256 > 1 ? a->S / 256 : 1;
		/* chunks of whole key blocks: no two tasks write one Kt panel */
		a->sch = ((a->S + n - 1) / n + a->Bc - 1) / a->Bc * a->Bc;
		a->nsc = (a->S + a->sch - 1) / a->sch;
	}
	uint64_t kt = (uint64_t)(a->B * a->Hkv * a->hd * a->Lp) * 4;
	uint64_t vp = (uint64_t)(a->B * a->Hkv * a->Lp * a->hdp) * 4;
	uint64_t bias = (uint64_t)(a->B * a->Lpb) * 4;
	a->off_kt = 0;
	a->off_vp = ALIGN64(kt);
	a->off_bias = a->off_vp + ALIGN64(vp);
	a->scratch = a->off_bias + ALIGN64(bias);
	if (a->dec) {
		/* the decode path's scratch: the new rows only, Kn and Vn [B, Hkv, T, hd] */
		uint64_t kn = (uint64_t)(a->B * a->Hkv * a->T * a->hd) * 4;
		a->off_kt = 0;
		a->off_vp = ALIGN64(kn);
		a->off_bias = a->off_vp;
		a->scratch = a->off_vp + ALIGN64(kn);
	}
}

static int dims_of(HostGen *g, const Node *n, int i, int64_t dims[8], Diag *d)
{
	return hg_dims(g, n, n->inputs[i], dims, d);
}

static const char *model_of(HostGen *g)
{
	return g->opt && g->opt->model_path ? g->opt->model_path : "model";
}

#define nfail(n, d, tensor, msg) \
	diag_fail((d), "%s: node '%s': tensor '%s': %s", model_of(g), (n)->name ? (n)->name : "", (tensor) ? (tensor) : "", (msg))

/* ---------------------------------------------------------------- node → Attn */

static int wa_parse(HostGen *g, const Node *n, Attn *a, Diag *d)
{
	memset(a, 0, sizeof *a);
	int64_t qd[8], kd[8], vd[8], pd[8];
	if (n->ninputs < 3 || !present_in(n, 0) || !present_in(n, 1) || !present_in(n, 2))
		return nfail(n, d, "", "WhisperAttention needs q, k and v");
	int64_t heads = attr_int(n, "heads", 0);
	if (heads <= 0)
		return nfail(n, d, n->inputs[0]->name, "attribute heads must be positive");
	const char *lay = attr_string(n, "kv_layout", "bsd");
	if (strcmp(lay, "bsd") && strcmp(lay, "bhsd"))
		return nfail(n, d, n->inputs[1]->name, "kv_layout is neither \"bsd\" nor \"bhsd\"");
	a->bhsd = strcmp(lay, "bhsd") == 0;
	a->causal = attr_int(n, "causal", 0) != 0;
	a->fp16 = attr_int(n, "fp16", 0) != 0;
	a->scale = attr_float(n, "scale", 0.0f);
	int rq = dims_of(g, n, 0, qd, d);
	if (rq < 0)
		return WL_ERR;
	if (rq != 3 || qd[2] % heads)
		return nfail(n, d, n->inputs[0]->name, "q must be [B, T, heads*hd]");
	a->B = qd[0];
	a->T = qd[1];
	a->H = a->Hkv = heads;
	a->hd = qd[2] / heads;
	int rk = dims_of(g, n, 1, kd, d), rv = rk < 0 ? -1 : dims_of(g, n, 2, vd, d);
	if (rk < 0 || rv < 0)
		return WL_ERR;
	if (rk != rv || memcmp(kd, vd, sizeof(int64_t) * (size_t)rk))
		return nfail(n, d, n->inputs[2]->name, "k and v shapes differ");
	if (a->bhsd) {
		if (rk != 4 || kd[0] != a->B || kd[1] != a->H || kd[3] != a->hd)
			return nfail(n, d, n->inputs[1]->name, "k must be [B, H, S, hd] (kv_layout bhsd)");
		a->S = kd[2];
	} else {
		if (rk != 3 || kd[0] != a->B || kd[2] != qd[2])
			return nfail(n, d, n->inputs[1]->name, "k must be [B, S, D]");
		a->S = kd[1];
	}
	a->a_q = 0;
	a->a_k = 1;
	a->a_v = 2;
	a->a_pk = a->a_pv = a->a_cos = a->a_sin = a->a_mask = a->a_pos = -1;
	if (present_in(n, 3) || present_in(n, 4)) {
		if (!present_in(n, 3) || !present_in(n, 4))
			return nfail(n, d, "", "past_k and past_v must both be present");
		int rp = dims_of(g, n, 3, pd, d);
		if (rp < 0)
			return WL_ERR;
		if (rp != 4 || pd[0] != a->B || pd[1] != a->H || pd[3] != a->hd)
			return nfail(n, d, n->inputs[3]->name, "past must be [B, H, P, hd]");
		a->P = pd[2];
		a->a_pk = 3;
		a->a_pv = 4;
	}
	a->L = a->P + a->S;
	a->a_out = n->ninputs;
	a->a_prk = present_out(n, 1) ? n->ninputs + 1 : -1;
	a->a_prv = present_out(n, 2) ? n->ninputs + 2 : -1;
	a->a_scr = n->ninputs + n->noutputs;
	attn_tiling(g, a);
	return WL_OK;
}

enum { G_Q, G_K, G_V, G_COS, G_SIN, G_PK, G_PV, G_MASK, G_POS };

static int gqa_parse(HostGen *g, const Node *n, Attn *a, Diag *d)
{
	memset(a, 0, sizeof *a);
	int64_t qd[8], kd[8], vd[8], pd[8], cd[8];
	if (n->ninputs < 3 || !present_in(n, 0) || !present_in(n, 1) || !present_in(n, 2))
		return nfail(n, d, "", "GroupQueryAttention needs q, k and v");
	a->H = attr_int(n, "heads", 0);
	a->Hkv = attr_int(n, "kv_heads", 0);
	a->hd = attr_int(n, "head_dim", 0);
	if (a->H <= 0 || a->Hkv <= 0 || a->H % a->Hkv || a->hd <= 0 || a->hd % 2)
		return nfail(n, d, n->inputs[0]->name, "heads, kv_heads and head_dim do not fit");
	a->causal = attr_int(n, "causal", 0) != 0;
	a->rope = attr_int(n, "rope", 0) != 0;
	a->fp16 = attr_int(n, "fp16", 0) != 0;
	a->stat = attr_int(n, "static_cache", 0) != 0;
	a->scale = attr_float(n, "scale", 0.0f);
	int rq = dims_of(g, n, G_Q, qd, d);
	if (rq < 0)
		return WL_ERR;
	if (rq != 3 || qd[2] != a->H * a->hd)
		return nfail(n, d, n->inputs[0]->name, "q must be [B, T, heads*head_dim]");
	a->B = qd[0];
	a->T = a->S = qd[1];
	int rk = dims_of(g, n, G_K, kd, d), rv = rk < 0 ? -1 : dims_of(g, n, G_V, vd, d);
	if (rk < 0 || rv < 0)
		return WL_ERR;
	if (rk != 3 || rv != 3 || kd[0] != a->B || kd[1] != a->T || kd[2] != a->Hkv * a->hd ||
	    memcmp(kd, vd, sizeof kd[0] * 3))
		return nfail(n, d, n->inputs[1]->name, "k and v must be [B, T, kv_heads*head_dim]");
	a->a_q = G_Q;
	a->a_k = G_K;
	a->a_v = G_V;
	a->a_pk = a->a_pv = a->a_cos = a->a_sin = a->a_mask = a->a_pos = -1;
	if (present_in(n, G_PK) || present_in(n, G_PV)) {
		if (!present_in(n, G_PK) || !present_in(n, G_PV))
			return nfail(n, d, "", "past_k and past_v must both be present");
		int rp = dims_of(g, n, G_PK, pd, d);
		if (rp < 0)
			return WL_ERR;
		if (rp != 4 || pd[0] != a->B || pd[1] != a->Hkv || pd[3] != a->hd)
			return nfail(n, d, n->inputs[G_PK]->name, "past must be [B, kv_heads, P, head_dim]");
		a->P = pd[2];
		a->a_pk = G_PK;
		a->a_pv = G_PV;
	}
	a->L = a->P + a->S;
	if (present_in(n, G_POS)) {
		const Value *pv = n->inputs[G_POS];
		a->pos_dt = pv->type.elem;
		a->pos_numel = hg_numel(pv);
		if ((a->pos_dt != DT_INT64 && a->pos_dt != DT_INT32) ||
		    (a->pos_numel != a->T && a->pos_numel != a->B * a->T))
			return nfail(n, d, pv->name, "position_ids must be [B or 1, T] int64/int32");
		a->a_pos = G_POS;
	}
	if (a->rope) {
		if (!present_in(n, G_COS) || !present_in(n, G_SIN))
			return nfail(n, d, "", "rope needs cos and sin");
		int rc = dims_of(g, n, G_COS, cd, d);
		if (rc < 0)
			return WL_ERR;
		if (rc < 1 || cd[rc - 1] != a->hd || hg_numel(n->inputs[G_SIN]) != hg_numel(n->inputs[G_COS]))
			return nfail(n, d, n->inputs[G_COS]->name, "cos/sin must be float [..., head_dim]");
		a->cs_rows = hg_numel(n->inputs[G_COS]) / a->hd;
		if (a->a_pos < 0 && a->cs_rows != a->T)
			return nfail(n, d, n->inputs[G_COS]->name, "cos/sin need T rows without position_ids");
		a->a_cos = G_COS;
		a->a_sin = G_SIN;
	}
	if (present_in(n, G_MASK)) {
		const Value *mv = n->inputs[G_MASK];
		a->mask_dt = mv->type.elem;
		if ((a->mask_dt != DT_INT64 && a->mask_dt != DT_INT32) || hg_numel(mv) != a->B * a->L)
			return nfail(n, d, mv->name, "attention_mask must be [B, P+T] int64/int32");
		a->a_mask = G_MASK;
	}
	if (a->stat && (a->a_pk < 0 || a->a_mask < 0))
		return nfail(n, d, "", "static_cache needs past_k, past_v and attention_mask");
	a->a_out = n->ninputs;
	a->a_prk = present_out(n, 1) ? n->ninputs + 1 : -1;
	a->a_prv = present_out(n, 2) ? n->ninputs + 2 : -1;
	a->a_scr = n->ninputs + n->noutputs;
	attn_tiling(g, a);
	return WL_OK;
}

/* ---------------------------------------------------------------- emission helpers */

static LLVMValueRef r16(HostGen *g, LLVMValueRef x, bool on)
{
	if (!on)
		return x;
	LLVMTypeRef ty = LLVMTypeOf(x), hty = g->t_f16;
	if (LLVMGetTypeKind(ty) == LLVMVectorTypeKind)
		hty = LLVMVectorType(g->t_f16, LLVMGetVectorSize(ty));
	LLVMValueRef h = LLVMBuildFPTrunc(g->b, x, hty, "h16");
	return LLVMBuildFPExt(g->b, h, ty, "r16");
}

static LLVMValueRef mul(HostGen *g, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildMul(g->b, a, b, "");
}

static LLVMValueRef add(HostGen *g, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildAdd(g->b, a, b, "");
}

static LLVMValueRef ci(HostGen *g, int64_t v)
{
	return hg_i64(g, v);
}

/* Integer element i of an int64/int32 tensor as i64. */
static LLVMValueRef load_int(HostGen *g, int dt, LLVMValueRef p, LLVMValueRef i)
{
	if (dt == DT_INT32)
		return LLVMBuildSExt(g->b, hg_load(g, g->t_i32, p, i), g->t_i64, "");
	return hg_load(g, g->t_i64, p, i);
}

/* The cos/sin row of query t in batch b: position_ids[b or 0, t] (checked
 * against the table by check_positions) or t. */
static LLVMValueRef rope_row(HostGen *g, const Attn *a, LLVMValueRef pos, LLVMValueRef b, LLVMValueRef t)
{
	if (a->a_pos < 0)
		return t;
	LLVMValueRef idx = a->pos_numel == a->T ? t : add(g, mul(g, b, ci(g, a->T)), t);
	return load_int(g, a->pos_dt, pos, idx);
}

/* position_ids in [0, cos/sin rows), before the parallel bodies: one
 * compare + branch per id; out of range → api->index_error, the kernel
 * returns WL_MODULE_EINDEX (the message of every target). */
static void check_positions(HostGen *g, const Node *n, const Attn *a, LLVMValueRef fn)
{
	LLVMValueRef site = hg_index_site(g, n, fn, n->inputs[G_POS], a->cs_rows, INDEX_NO_WRAP);
	LLVMValueRef p = hg_arg(g, fn, a->a_pos);
	HgLoop l;
	LLVMValueRef i = hg_loop_begin(g, &l, ci(g, 0), ci(g, a->pos_numel), 1, "p");
	hg_index_check(g, fn, site, i, load_int(g, a->pos_dt, p, i), a->cs_rows, INDEX_NO_WRAP);
	hg_loop_end(g, &l);
}

/* Element e (runtime i64) of a source row src (float*) after fp16 rounding
 * and, with rope, x·cos + rotate_half(x)·sin (row crow of cos/sin). */
static LLVMValueRef row_elem(HostGen *g, const Attn *a, LLVMValueRef src, LLVMValueRef e, bool rope,
                             LLVMValueRef cosp, LLVMValueRef sinp, LLVMValueRef crow)
{
	LLVMValueRef x = r16(g, hg_load(g, g->t_f32, src, e), a->fp16);
	if (!rope)
		return x;
	int64_t half = a->hd / 2;
	LLVMValueRef first = LLVMBuildICmp(g->b, LLVMIntSLT, e, ci(g, half), "");
	LLVMValueRef oi = LLVMBuildSelect(g->b, first, add(g, e, ci(g, half)), LLVMBuildSub(g->b, e, ci(g, half), ""), "");
	LLVMValueRef o = r16(g, hg_load(g, g->t_f32, src, oi), a->fp16);
	LLVMValueRef rh = LLVMBuildSelect(g->b, first, LLVMBuildFNeg(g->b, o, ""), o, "");
	LLVMValueRef ce = add(g, mul(g, crow, ci(g, a->hd)), e);
	LLVMValueRef c = hg_load(g, g->t_f32, cosp, ce), s = hg_load(g, g->t_f32, sinp, ce);
	LLVMValueRef p1 = LLVMBuildFMul(g->b, x, c, ""), p2 = LLVMBuildFMul(g->b, rh, s, "");
	return LLVMBuildFAdd(g->b, p1, p2, "");
}

static LLVMValueRef arg_or_null(HostGen *g, LLVMValueRef fn, int slot)
{
	return slot >= 0 ? hg_arg(g, fn, slot) : LLVMConstNull(g->t_ptr);
}

static LLVMValueRef byte_off(HostGen *g, LLVMValueRef p, uint64_t off)
{
	return hg_gep(g, g->t_i8, p, ci(g, (int64_t)off));
}

/* ---------------------------------------------------------------- phase 1: pack */

enum { C_Q, C_K, C_V, C_PK, C_PV, C_COS, C_SIN, C_MASK, C_POS, C_OUT, C_PRK, C_PRV, C_KT, C_VP, C_BIAS, C_NV, C_N };

/* Cache rows in use (i64): the constant P, or with static_cache the run-time
 * count computed before the parallel phases (captured as C_NV). */
static LLVMValueRef nvalid(HostGen *g, const Attn *a, LLVMValueRef *c)
{
	return a->stat ? c[C_NV] : ci(g, a->P);
}

/* The end of the packed keys, a multiple of the panel width Kw: Lp, or with
 * static_cache nv + S rounded up to Kw. */
static LLVMValueRef packed_end(HostGen *g, const Attn *a, LLVMValueRef nv)
{
	if (!a->stat)
		return ci(g, a->Lp);
	LLVMValueRef e = add(g, nv, ci(g, a->S + a->Kw - 1));
	return mul(g, LLVMBuildSDiv(g->b, e, ci(g, a->Kw), ""), ci(g, a->Kw));
}

/* Kt's element (key j, head-dim e) in the packed panels [Lp/Kw][hd][Kw]: the
 * Kw keys of one register tile of Q·Kᵀ are one contiguous hd x Kw panel,
 * streamed in order by the micro-kernel. */
static LLVMValueRef kt_index(HostGen *g, const Attn *a, LLVMValueRef j, LLVMValueRef e)
{
	LLVMValueRef blk = LLVMBuildSDiv(g->b, j, ci(g, a->Kw), "");
	LLVMValueRef jr = LLVMBuildSRem(g->b, j, ci(g, a->Kw), "");
	return add(g, add(g, mul(g, blk, ci(g, a->hd * a->Kw)), mul(g, e, ci(g, a->Kw))), jr);
}

/* bf16 (a->bf): the same panels with the float elements as bf16 (rounded to
 * nearest even) in pairs, a pair being one 32-bit lane of vdpbf16ps (low
 * half: the even index):
 *   Kt [Lp/Kw][hd/2][Kw][2]  per panel and head-dim pair, Kw lanes of
 *                            (k[j][2p], k[j][2p+1])
 *   Vp [Lp/2][hdp][2]        per key pair, hdp lanes of (v[2q][e], v[2q+1][e])
 * (Lp is a multiple of Kw, so of 2). */
static void put_k(HostGen *g, const Attn *a, LLVMValueRef kt, LLVMValueRef j, LLVMValueRef e, LLVMValueRef x)
{
	if (!a->bf) {
		hg_store(g, x, kt, kt_index(g, a, j, e));
		return;
	}
	LLVMValueRef blk = LLVMBuildSDiv(g->b, j, ci(g, a->Kw), "");
	LLVMValueRef jr = LLVMBuildSRem(g->b, j, ci(g, a->Kw), "");
	LLVMValueRef ep = LLVMBuildAShr(g->b, e, ci(g, 1), ""), eo = LLVMBuildAnd(g->b, e, ci(g, 1), "");
	LLVMValueRef i = add(g, add(g, mul(g, blk, ci(g, a->hd * a->Kw)), mul(g, ep, ci(g, 2 * a->Kw))),
	                     add(g, mul(g, jr, ci(g, 2)), eo));
	hg_store(g, LLVMBuildFPTrunc(g->b, x, hg_t_bf16(g, 0), "kbf"), kt, i);
}

static void put_v(HostGen *g, const Attn *a, LLVMValueRef vp, LLVMValueRef j, LLVMValueRef e, LLVMValueRef x)
{
	if (!a->bf) {
		hg_store(g, x, vp, add(g, mul(g, j, ci(g, a->hdp)), e));
		return;
	}
	LLVMValueRef jp = LLVMBuildAShr(g->b, j, ci(g, 1), ""), jo = LLVMBuildAnd(g->b, j, ci(g, 1), "");
	LLVMValueRef i = add(g, add(g, mul(g, jp, ci(g, 2 * a->hdp)), mul(g, e, ci(g, 2))), jo);
	hg_store(g, LLVMBuildFPTrunc(g->b, x, hg_t_bf16(g, 0), "vbf"), vp, i);
}

static void emit_pack(HostGen *g, const Attn *a, LLVMValueRef api, LLVMValueRef *caps)
{
	HgPar par;
	hg_par_begin(g, &par, api, ci(g, a->B * a->Hkv * a->nsc), caps, C_N, "attn_pack");
	LLVMValueRef *c = par.cap;
	HgLoop lt;
	LLVMValueRef ptask = hg_loop_begin(g, &lt, par.i0, par.i1, 1, "bk");
	/* (batch, KV head) and the chunk sc of its new rows: [s0, s1) */
	LLVMValueRef task = LLVMBuildSDiv(g->b, ptask, ci(g, a->nsc), "bkv");
	LLVMValueRef sc = LLVMBuildSRem(g->b, ptask, ci(g, a->nsc), "sc");
	LLVMValueRef s0 = mul(g, sc, ci(g, a->sch));
	LLVMValueRef s1 = add(g, s0, ci(g, a->sch));
	s1 = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, s1, ci(g, a->S), ""), s1, ci(g, a->S), "s1");
	LLVMValueRef first = LLVMBuildICmp(g->b, LLVMIntEQ, sc, ci(g, 0), "first");
	LLVMValueRef b = LLVMBuildSDiv(g->b, task, ci(g, a->Hkv), "b");
	LLVMValueRef kh = LLVMBuildSRem(g->b, task, ci(g, a->Hkv), "kh");
	LLVMValueRef kt = hg_gepf(g, c[C_KT], mul(g, task, ci(g, a->hd * a->Lp)));
	LLVMValueRef vp = hg_gepf(g, c[C_VP], mul(g, task, ci(g, a->Lp * a->hdp)));
	int64_t prows = a->stat ? a->S : a->L;   /* rows of a present output */
	LLVMValueRef prk = a->a_prk >= 0 ? hg_gepf(g, c[C_PRK], mul(g, task, ci(g, prows * a->hd))) : NULL;
	LLVMValueRef prv = a->a_prv >= 0 ? hg_gepf(g, c[C_PRV], mul(g, task, ci(g, prows * a->hd))) : NULL;
	LLVMValueRef zero = hg_f32(g, 0.0f);
	LLVMValueRef nv = nvalid(g, a, c), pend = packed_end(g, a, nv);

	/* one row j of K and V from ksrc/vsrc */
#define STORE_ROW(J, PJ, KVAL_EXPR, VVAL_EXPR)                                                   \
	do {                                                                                       \
		HgLoop le;                                                                         \
		LLVMValueRef e = hg_loop_begin(g, &le, ci(g, 0), ci(g, a->hd), 1, "e");            \
		LLVMValueRef kval = (KVAL_EXPR), vval = (VVAL_EXPR);                               \
		if (prk && (PJ))                                                                   \
			hg_store(g, kval, prk, add(g, mul(g, (PJ), ci(g, a->hd)), e));             \
		if (prv && (PJ))                                                                   \
			hg_store(g, vval, prv, add(g, mul(g, (PJ), ci(g, a->hd)), e));             \
		put_k(g, a, kt, (J), e, kval);                                                     \
		put_v(g, a, vp, (J), e, vval);                                                     \
		hg_loop_end(g, &le);                                                               \
		for (int64_t ee = a->hd; ee < a->hdp; ee++)                                        \
			put_v(g, a, vp, (J), ci(g, ee), zero);                                     \
	} while (0)

	if (a->P > 0) {
		HgLoop lj;
		LLVMValueRef j = hg_loop_begin(g, &lj, ci(g, 0), nv, 1, "jp");
		LLVMValueRef off = mul(g, add(g, mul(g, task, ci(g, a->P)), j), ci(g, a->hd));
		LLVMValueRef ks = hg_gepf(g, c[C_PK], off), vs = hg_gepf(g, c[C_PV], off);
		STORE_ROW(j, a->stat ? NULL : j, r16(g, hg_load(g, g->t_f32, ks, e), a->fp16), r16(g, hg_load(g, g->t_f32, vs, e), a->fp16));
		hg_loop_end(g, &lj);
	}
	{
		HgLoop ls;
		LLVMValueRef s = hg_loop_begin(g, &ls, s0, s1, 1, "s");
		LLVMValueRef off;
		if (a->bhsd)
			off = mul(g, add(g, mul(g, task, ci(g, a->S)), s), ci(g, a->hd));
		else
			off = add(g, mul(g, add(g, mul(g, b, ci(g, a->S)), s), ci(g, a->Hkv * a->hd)), mul(g, kh, ci(g, a->hd)));
		LLVMValueRef ks = hg_gepf(g, c[C_K], off), vs = hg_gepf(g, c[C_V], off);
		LLVMValueRef crow = a->rope ? rope_row(g, a, c[C_POS], b, s) : NULL;
		LLVMValueRef j = add(g, s, nv);
		STORE_ROW(j, a->stat ? s : j, r16(g, row_elem(g, a, ks, e, a->rope, c[C_COS], c[C_SIN], crow), a->fp16),
		          r16(g, hg_load(g, g->t_f32, vs, e), a->fp16));
		hg_loop_end(g, &ls);
	}
#undef STORE_ROW
	/* the padding rows and the key bias row: the first chunk's task */
	HgIf f0;
	hg_if_begin(g, &f0, first);
	if (a->Lp > a->L || a->stat) {
		HgLoop lj;
		LLVMValueRef j = hg_loop_begin(g, &lj, add(g, nv, ci(g, a->S)), pend, 1, "jz");
		HgLoop le;
		LLVMValueRef e = hg_loop_begin(g, &le, ci(g, 0), ci(g, a->hd), 1, "ez");
		put_k(g, a, kt, j, e, zero);
		hg_loop_end(g, &le);
		HgLoop le2;
		LLVMValueRef e2 = hg_loop_begin(g, &le2, ci(g, 0), ci(g, a->hdp), 1, "ez2");
		put_v(g, a, vp, j, e2, zero);
		hg_loop_end(g, &le2);
		hg_loop_end(g, &lj);
	}
	/* the key bias row of batch b, written by its first KV head's task */
	HgIf fi;
	hg_if_begin(g, &fi, LLVMBuildICmp(g->b, LLVMIntEQ, kh, ci(g, 0), ""));
	{
		LLVMValueRef brow = hg_gepf(g, c[C_BIAS], mul(g, b, ci(g, a->Lpb)));
		HgLoop lj;
		LLVMValueRef j = hg_loop_begin(g, &lj, ci(g, 0), ci(g, a->Lpb), 1, "jb");
		LLVMValueRef inside = LLVMBuildICmp(g->b, LLVMIntSLT, j, add(g, nv, ci(g, a->S)), "");
		LLVMValueRef v = zero;
		if (a->a_mask >= 0) {
			/* packed key j: cache row j (j < nv), else new row j - nv = mask entry P + j - nv */
			LLVMValueRef jm = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, j, nv, ""), j,
			                                  add(g, j, LLVMBuildSub(g->b, ci(g, a->P), nv, "")), "");
			LLVMValueRef jc = LLVMBuildSelect(g->b, inside, jm, ci(g, 0), "");
			LLVMValueRef mval = load_int(g, a->mask_dt, c[C_MASK], add(g, mul(g, b, ci(g, a->L)), jc));
			LLVMValueRef off = LLVMBuildICmp(g->b, LLVMIntNE, mval, ci(g, 1), "");
			v = LLVMBuildSelect(g->b, off, hg_f32(g, -3.4028234663852886e38f), zero, "");
		}
		v = LLVMBuildSelect(g->b, inside, v, hg_f32(g, -INFINITY), "");
		hg_store(g, v, brow, j);
		hg_loop_end(g, &lj);
	}
	hg_if_end(g, &fi);
	hg_if_end(g, &f0);
	hg_loop_end(g, &lt);
	hg_par_end(g, &par);
}

/* ---------------------------------------------------------------- phase 2: attend */

#define MAXBR 12
#define MAXNC 4

/* max(a, b) as one vmaxps (select on a > b; the scores are never NaN for
 * finite inputs and a NaN input poisons p through exp anyway) */
static LLVMValueRef vmax(HostGen *g, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOGT, a, b, ""), a, b, "");
}

/* The products' operands in 32-bit units: float, or (a->bf) a pair of bf16.
 * ld32: the vector at p[i]; bc32: p[i] broadcast to every lane; madd: acc +
 * x·y lane-wise (fma), or acc + the pairs' dot product per lane (vdpbf16ps). */
static LLVMValueRef ld32(HostGen *g, const Attn *a, LLVMValueRef p, LLVMValueRef i)
{
	return a->bf ? hg_bf16_load(g, p, i) : hg_vload(g, p, i);
}

static LLVMValueRef bc32(HostGen *g, const Attn *a, LLVMValueRef p, LLVMValueRef i)
{
	return a->bf ? hg_bf16_bcast(g, p, i) : hg_vbroadcast(g, p, i);
}

static LLVMValueRef madd(HostGen *g, const Attn *a, LLVMValueRef acc, LLVMValueRef x, LLVMValueRef y)
{
	return a->bf ? hg_dpbf16(g, acc, x, y) : hg_fma(g, x, y, acc);
}

/* O = alpha · O + P V for one row tile and key block: O [Br, hdp] (Os) is
 * rescaled by the rows' alpha while it is loaded into the accumulators, then
 * pvc vectors of the head dimension at a time take nsteps keys (bf16: key
 * pairs) of P (Br rows of Bc) against Vp's rows from key j0 */
static void emit_pv(HostGen *g, const Attn *a, LLVMValueRef Os, LLVMValueRef P, LLVMValueRef vp, LLVMValueRef j0,
                    LLVMValueRef *alpha, LLVMValueRef nsteps)
{
	const int64_t vw = g->vw, Br = a->Br, Bc = a->Bc, NV = a->hdp / vw, vsteps = a->bf ? Bc / 2 : Bc;
	for (int64_t v0 = 0; v0 < NV; v0 += a->pvc) {
		int64_t nvec = NV - v0 < a->pvc ? NV - v0 : a->pvc;
		LLVMValueRef oinit[MAXBR][4];
		for (int64_t i = 0; i < Br; i++)
			for (int64_t cv = 0; cv < nvec; cv++)
				oinit[i][cv] = LLVMBuildFMul(g->b, hg_vload(g, Os, ci(g, i * a->hdp + (v0 + cv) * vw)),
				                             hg_vsplat(g, alpha[i]), "");
		/* per key (bf16: per key pair), Vp's row (hdp lanes of v pairs)
		 * against each row's p (pair) broadcast */
		HgLoop lk;
		LLVMValueRef jj = hg_loop_begin(g, &lk, ci(g, 0), nsteps, 1, "jj");
		LLVMValueRef o[MAXBR][4];
		for (int64_t i = 0; i < Br; i++)
			for (int64_t cv = 0; cv < nvec; cv++)
				o[i][cv] = hg_loop_carry(g, &lk, oinit[i][cv]);
		LLVMValueRef vrow = mul(g, add(g, LLVMBuildSDiv(g->b, j0, ci(g, Bc / vsteps), ""), jj), ci(g, a->hdp));
		LLVMValueRef vv[4];
		for (int64_t cv = 0; cv < nvec; cv++)
			vv[cv] = ld32(g, a, vp, add(g, vrow, ci(g, (v0 + cv) * vw)));
		for (int64_t i = 0; i < Br; i++) {
			LLVMValueRef pv = bc32(g, a, P, add(g, ci(g, i * vsteps), jj));
			for (int64_t cv = 0; cv < nvec; cv++)
				hg_loop_next(g, &lk, o[i][cv], madd(g, a, o[i][cv], pv, vv[cv]));
		}
		hg_loop_end(g, &lk);
		for (int64_t i = 0; i < Br; i++)
			for (int64_t cv = 0; cv < nvec; cv++)
				hg_vstore(g, o[i][cv], Os, ci(g, i * a->hdp + (v0 + cv) * vw));
	}
}

static void emit_attend(HostGen *g, const Attn *a, LLVMValueRef api, LLVMValueRef *caps)
{
	const int64_t vw = g->vw, Br = a->Br, Bc = a->Bc, NCB = Bc / vw, NC = a->Kw / vw, NV = a->hdp / vw;
	const int64_t D = a->H * a->hd, group = a->H / a->Hkv, Rt = a->nrt * Br;
	WL_ASSERT(Br <= MAXBR && NCB <= MAXNC && Br <= vw);
	HgPar par;
	hg_par_begin(g, &par, api, ci(g, a->B * a->H * a->nqb), caps, C_N, "attn_core");
	LLVMValueRef *c = par.cap;
	/* the task's Rt = nrt·Br query rows: queries, O, running max m and
	 * lane-wise running sum l per row; P: one row tile's probabilities */
	/* steps of the two products: bf16 takes pairs (of head-dim elements, of keys) */
	const int64_t ksteps = a->bf ? a->hd / 2 : a->hd, vsteps = a->bf ? Bc / 2 : Bc;
	LLVMTypeRef qty = a->bf ? hg_t_bf16(g, 0) : g->t_f32;
	LLVMValueRef Qa = hg_alloca(g, qty, Rt * a->hd, 64, "qtile");
	LLVMValueRef Oa = hg_alloca(g, g->t_f32, Rt * a->hdp, 64, "otile");
	LLVMValueRef Ma = hg_alloca(g, g->t_f32, Rt, 64, "mtile");
	LLVMValueRef La = hg_alloca(g, g->t_f32, Rt * vw, 64, "ltile");
	LLVMValueRef Ps = hg_alloca(g, g->t_f32, Br * Bc, 64, "ptile");
	LLVMValueRef Pb = a->bf ? hg_alloca(g, hg_t_bf16(g, 0), Br * Bc, 64, "pbtile") : NULL;
	LLVMValueRef zero = hg_f32(g, 0.0f), vzero = hg_vconst(g, 0.0f);

	HgLoop lt;
	LLVMValueRef task = hg_loop_begin(g, &lt, par.i0, par.i1, 1, "task");
	LLVMValueRef bh = LLVMBuildSDiv(g->b, task, ci(g, a->nqb), "bh");
	LLVMValueRef qb = LLVMBuildSRem(g->b, task, ci(g, a->nqb), "qb");
	LLVMValueRef b = LLVMBuildSDiv(g->b, bh, ci(g, a->H), "b");
	LLVMValueRef h = LLVMBuildSRem(g->b, bh, ci(g, a->H), "h");
	LLVMValueRef kvt = add(g, mul(g, b, ci(g, a->Hkv)), LLVMBuildSDiv(g->b, h, ci(g, group), "kh"));
	LLVMValueRef kt = hg_gepf(g, c[C_KT], mul(g, kvt, ci(g, a->hd * a->Lp)));
	LLVMValueRef vp = hg_gepf(g, c[C_VP], mul(g, kvt, ci(g, a->Lp * a->hdp)));
	LLVMValueRef brow = hg_gepf(g, c[C_BIAS], mul(g, b, ci(g, a->Lpb)));
	LLVMValueRef t0 = mul(g, qb, ci(g, Rt));
	LLVMValueRef nv = nvalid(g, a, c);

	/* query rows: scale·log2 e · q (rounded, rotated), zero rows past T; O = 0,
	 * m = −FLT_MAX, l = 0 */
	{
		HgLoop lq;
		LLVMValueRef i = hg_loop_begin(g, &lq, ci(g, 0), ci(g, Rt), 1, "qi");
		LLVMValueRef t = add(g, t0, i);
		LLVMValueRef valid = LLVMBuildICmp(g->b, LLVMIntSLT, t, ci(g, a->T), "");
		LLVMValueRef tc = LLVMBuildSelect(g->b, valid, t, ci(g, a->T - 1), "");
		LLVMValueRef src = hg_gepf(g, c[C_Q], add(g, mul(g, add(g, mul(g, b, ci(g, a->T)), tc), ci(g, D)), mul(g, h, ci(g, a->hd))));
		LLVMValueRef crow = a->rope ? rope_row(g, a, c[C_POS], b, tc) : NULL;
		LLVMValueRef qrow = mul(g, i, ci(g, a->hd)), orow = mul(g, i, ci(g, a->hdp));
		HgLoop le;
		LLVMValueRef e = hg_loop_begin(g, &le, ci(g, 0), ci(g, a->hd), 1, "qe");
		LLVMValueRef x = row_elem(g, a, src, e, a->rope, c[C_COS], c[C_SIN], crow);
		x = LLVMBuildFMul(g->b, x, hg_f32(g, a->scale * (float)M_LOG2E), "");
		x = LLVMBuildSelect(g->b, valid, x, zero, "");
		if (a->bf)
			x = LLVMBuildFPTrunc(g->b, x, qty, "qbf");
		hg_store(g, x, Qa, add(g, qrow, e));
		hg_loop_end(g, &le);
		for (int64_t v = 0; v < NV; v++)
			hg_vstore(g, vzero, Oa, add(g, orow, ci(g, v * vw)));
		hg_store(g, hg_f32(g, -FLT_MAX), Ma, i);
		hg_vstore(g, vzero, La, mul(g, i, ci(g, vw)));
		hg_loop_end(g, &lq);
	}

	/* key blocks [0, kv_end) */
	LLVMValueRef pend = packed_end(g, a, nv), kv_end = pend;
	if (a->causal) {
		/* last visible key of the task's last row: nv + t0 + Rt − 1 */
		LLVMValueRef e = add(g, add(g, t0, nv), ci(g, Rt + Bc - 1));
		e = mul(g, LLVMBuildSDiv(g->b, e, ci(g, Bc), ""), ci(g, Bc));
		LLVMValueRef gt = LLVMBuildICmp(g->b, LLVMIntSGT, e, pend, "");
		kv_end = LLVMBuildSelect(g->b, gt, pend, e, "kv_end");
	}
	HgLoop lj;
	LLVMValueRef j0 = hg_loop_begin(g, &lj, ci(g, 0), kv_end, Bc, "j0");
	LLVMValueRef bias[MAXNC], jv[MAXNC] = {0};
	for (int64_t cc = 0; cc < NCB; cc++)
		bias[cc] = hg_vload(g, brow, add(g, j0, ci(g, cc * vw)));
	if (a->causal) {
		LLVMValueRef lanes[64];
		for (int64_t k = 0; k < vw; k++)
			lanes[k] = hg_i32(g, (int32_t)k);
		LLVMValueRef iota = LLVMConstVector(lanes, (unsigned)vw);
		LLVMValueRef j0v = hg_vsplat(g, LLVMBuildTrunc(g->b, j0, g->t_i32, ""));
		for (int64_t cc = 0; cc < NCB; cc++)
			jv[cc] = LLVMBuildAdd(g->b, LLVMBuildAdd(g->b, j0v, iota, ""), hg_vsplat(g, hg_i32(g, (int32_t)(cc * vw))), "jv");
	}

	/* the task's row tiles of Br rows on this key block (its Kt panels and V
	 * rows stay in L1 for all of them); a tile wholly past T, or, causal,
	 * wholly before the block's first key, is skipped */
	HgLoop lr;
	LLVMValueRef rt = hg_loop_begin(g, &lr, ci(g, 0), ci(g, a->nrt), 1, "rt");
	LLVMValueRef r0 = add(g, t0, mul(g, rt, ci(g, Br)));
	LLVMValueRef live = LLVMBuildICmp(g->b, LLVMIntSLT, r0, ci(g, a->T), "");
	if (a->causal)
		live = LLVMBuildAnd(g->b, live, LLVMBuildICmp(g->b, LLVMIntSLE, j0, add(g, add(g, r0, nv), ci(g, Br - 1)), ""), "");
	HgIf fl;
	hg_if_begin(g, &fl, live);
	LLVMValueRef ri = mul(g, rt, ci(g, Br));
	LLVMValueRef Qs = hg_gep(g, qty, Qa, mul(g, ri, ci(g, a->hd)));
	LLVMValueRef Os = hg_gepf(g, Oa, mul(g, ri, ci(g, a->hdp)));
	LLVMValueRef Ms = hg_gepf(g, Ma, ri);
	LLVMValueRef Ls = hg_gepf(g, La, mul(g, ri, ci(g, vw)));

	/* S = key bias + Q Kᵀ into the Br x Bc tile Ps (the accumulators start
	 * at the bias): Bc/Kw register tiles of Br x Kw, each a broadcast-FMA
	 * micro-kernel over the head dimension on one Kt panel. The last block
	 * may end early (kv_end is a multiple of Kw only): its missing panels
	 * are not computed, their scores are the bias there, −inf */
	for (int64_t c0 = 0; c0 < NCB; c0 += NC) {
		HgIf fpan;
		if (c0 > 0)
			hg_if_begin(g, &fpan, LLVMBuildICmp(g->b, LLVMIntSLT, add(g, j0, ci(g, c0 * vw)), kv_end, ""));
		/* per step e of the head dimension (bf16: per pair), the panel's row
		 * e against each row's q (pair) broadcast */
		HgLoop le;
		LLVMValueRef e = hg_loop_begin(g, &le, ci(g, 0), ci(g, ksteps), 1, "e");
		LLVMValueRef acc[MAXBR][MAXNC];
		for (int64_t i = 0; i < Br; i++)
			for (int64_t cc = 0; cc < NC; cc++)
				acc[i][cc] = hg_loop_carry(g, &le, bias[c0 + cc]);
		/* kt_index(j0 + c0·vw, e): panel (j0 + c0·vw)/Kw, row e */
		LLVMValueRef krow = add(g, mul(g, add(g, j0, ci(g, c0 * vw)), ci(g, ksteps)), mul(g, e, ci(g, a->Kw)));
		LLVMValueRef kv[MAXNC];
		for (int64_t cc = 0; cc < NC; cc++)
			kv[cc] = ld32(g, a, kt, add(g, krow, ci(g, cc * vw)));
		for (int64_t i = 0; i < Br; i++) {
			LLVMValueRef qv = bc32(g, a, Qs, add(g, ci(g, i * ksteps), e));
			for (int64_t cc = 0; cc < NC; cc++)
				hg_loop_next(g, &le, acc[i][cc], madd(g, a, acc[i][cc], qv, kv[cc]));
		}
		hg_loop_end(g, &le);
		for (int64_t i = 0; i < Br; i++)
			for (int64_t cc = 0; cc < NC; cc++)
				hg_vstore(g, acc[i][cc], Ps, ci(g, i * Bc + (c0 + cc) * vw));
		if (c0 > 0) {
			/* a panel past the last key: its scores are the key bias, −inf */
			hg_if_else(g, &fpan);
			for (int64_t i = 0; i < Br; i++)
				for (int64_t cc = 0; cc < NC; cc++)
					hg_vstore(g, bias[c0 + cc], Ps, ci(g, i * Bc + (c0 + cc) * vw));
			hg_if_end(g, &fpan);
		}
	}

	/* online softmax per row, in base 2 (S is s·log2 e + key bias): s = S
	 * (causal: −inf past the row's last key), m_new = max(m, max_j s) for
	 * the Br rows by one max tree, p = 2^(s − m_new) into Ps; the rescale
	 * factors alpha_i = 2^(m_i − m_new,i) of all Br rows are one vector exp2 */
	LLVMValueRef s[MAXBR][MAXNC], mx[MAXBR], mnew[MAXBR];
	for (int64_t i = 0; i < Br; i++) {
		mx[i] = NULL;
		for (int64_t cc = 0; cc < NCB; cc++) {
			s[i][cc] = hg_vload(g, Ps, ci(g, i * Bc + cc * vw));
			if (a->causal) {
				LLVMValueRef lim = LLVMBuildTrunc(g->b, add(g, add(g, r0, nv), ci(g, i)), g->t_i32, "");
				LLVMValueRef over = LLVMBuildICmp(g->b, LLVMIntSGT, jv[cc], hg_vsplat(g, lim), "");
				s[i][cc] = LLVMBuildSelect(g->b, over, hg_vconst(g, -INFINITY), s[i][cc], "");
			}
			mx[i] = mx[i] ? vmax(g, mx[i], s[i][cc]) : s[i][cc];
		}
	}
	/* lane i: row i's m and new max (lanes past Br unused) */
	LLVMValueRef mold = hg_vload_n(g, Ms, ci(g, 0), ci(g, Br));
	LLVMValueRef mnv = vmax(g, mold, hg_vreduce_max_rows(g, mx, (int)Br));
	hg_vstore_n(g, mnv, Ms, ci(g, 0), ci(g, Br));
	LLVMValueRef av = hg_exp2(g, LLVMBuildFSub(g->b, mold, mnv, "")), alpha[MAXBR];
	for (int64_t i = 0; i < Br; i++) {
		alpha[i] = LLVMBuildExtractElement(g->b, av, hg_i32(g, (int32_t)i), "alpha");
		mnew[i] = LLVMBuildExtractElement(g->b, mnv, hg_i32(g, (int32_t)i), "mnew");
		LLVMValueRef mv = hg_vsplat(g, mnew[i]), psum = NULL;
		for (int64_t cc = 0; cc < NCB; cc++) {
			LLVMValueRef p = hg_exp2(g, LLVMBuildFSub(g->b, s[i][cc], mv, ""));
			if (a->bf) {
				LLVMValueRef st = LLVMBuildStore(g->b, hg_to_bf16(g, p), hg_gep(g, hg_t_bf16(g, 0), Pb, ci(g, i * Bc + cc * vw)));
				LLVMSetAlignment(st, 2);
			} else {
				hg_vstore(g, p, Ps, ci(g, i * Bc + cc * vw));
			}
			psum = psum ? LLVMBuildFAdd(g->b, psum, p, "") : p;
		}
		LLVMValueRef lold = hg_vload(g, Ls, ci(g, i * vw));
		hg_vstore(g, hg_fma(g, lold, hg_vsplat(g, alpha[i]), psum), Ls, ci(g, i * vw));
	}

	/* O = alpha · O + P V over the block's keys: Bc (a constant trip count),
	 * or fewer in a last block that ends early */
	LLVMValueRef nkey = LLVMBuildSub(g->b, kv_end, j0, "");
	if (a->Lp % Bc == 0 && !a->stat && !a->causal) {
		emit_pv(g, a, Os, a->bf ? Pb : Ps, vp, j0, alpha, ci(g, vsteps));
	} else {
		HgIf ff;
		hg_if_begin(g, &ff, LLVMBuildICmp(g->b, LLVMIntSGE, nkey, ci(g, Bc), ""));
		emit_pv(g, a, Os, a->bf ? Pb : Ps, vp, j0, alpha, ci(g, vsteps));
		hg_if_else(g, &ff);
		emit_pv(g, a, Os, a->bf ? Pb : Ps, vp, j0, alpha, a->bf ? LLVMBuildSDiv(g->b, nkey, ci(g, 2), "") : nkey);
		hg_if_end(g, &ff);
	}
	hg_if_end(g, &fl);
	hg_loop_end(g, &lr);
	hg_loop_end(g, &lj);

	/* out = O / l */
	{
		HgLoop lo;
		LLVMValueRef i = hg_loop_begin(g, &lo, ci(g, 0), ci(g, Rt), 1, "oi");
		LLVMValueRef t = add(g, t0, i);
		HgIf fi;
		hg_if_begin(g, &fi, LLVMBuildICmp(g->b, LLVMIntSLT, t, ci(g, a->T), ""));
		LLVMValueRef inv = LLVMBuildFDiv(g->b, hg_f32(g, 1.0f), hg_vreduce_add(g, hg_vload(g, La, mul(g, i, ci(g, vw)))), "");
		LLVMValueRef invv = hg_vsplat(g, inv);
		LLVMValueRef dst = hg_gepf(g, c[C_OUT], add(g, mul(g, add(g, mul(g, b, ci(g, a->T)), t), ci(g, D)), mul(g, h, ci(g, a->hd))));
		LLVMValueRef orow = mul(g, i, ci(g, a->hdp));
		for (int64_t v = 0; v < NV; v++) {
			LLVMValueRef y = r16(g, LLVMBuildFMul(g->b, hg_vload(g, Oa, add(g, orow, ci(g, v * vw))), invv, ""), a->fp16);
			int64_t left = a->hd - v * vw;
			if (left >= vw)
				hg_vstore(g, y, dst, ci(g, v * vw));
			else
				hg_vstore_n(g, y, dst, ci(g, v * vw), ci(g, left));
		}
		hg_if_end(g, &fi);
		hg_loop_end(g, &lo);
	}
	hg_loop_end(g, &lt);
	hg_par_end(g, &par);
}

/* ---------------------------------------------------------------- decode path
 *
 * GroupQueryAttention with static_cache and T <= DEC_MAXT query rows (the
 * step program): no pack. One task per (batch, KV head) handles the
 * R = (H/Hkv)·T query rows that share its keys:
 *  - the T new rows are rotated / rounded once into the scratch Kn, Vn
 *    [B, Hkv, T, hd] (and the present outputs);
 *  - the cache rows j < nv are read in place from past_k / past_v (row-major
 *    [B, Hkv, P, hd]), then the T new rows from Kn / Vn, in blocks of Bc keys;
 *    per block and query row: scores are dot products over the head dimension
 *    (<vw x float> products over hd, masked tail), vw keys at a time summed
 *    by a transpose tree of two-source shuffles (dec_keys; lane masks only
 *    in the block's last group), + the key bias of the attention mask
 *    (vectors of the mask for a full block), causal among the new rows;
 *    online softmax (running max m and sum l per row, p = exp(s − m) in a Bc
 *    stack tile); O = alpha·O + p·V with V rows read as <vw x float> vectors
 *    over hd (O in registers); a head dimension below one vector that
 *    divides it packs vw/hd keys per vector (dec_packed), O's partial rows
 *    folded at the end.
 * Cost: O(nv·hd) reads of the cache, nothing copied, no O(max_seq) work
 * beyond nvalid's scan of the mask. */

/* &x[row·stride + v·vw] as a vector over the head dimension (masked tail),
 * rounded to binary16 when fp16. */
static LLVMValueRef dec_vrow(HostGen *g, const Attn *a, LLVMValueRef p, LLVMValueRef row, int64_t v)
{
	int64_t vw = g->vw, left = a->hd - v * vw;
	LLVMValueRef i = add(g, mul(g, row, ci(g, a->kvs)), ci(g, v * vw));
	LLVMValueRef x = left >= vw ? hg_vload(g, p, i) : hg_vload_n(g, p, i, ci(g, left));
	return r16(g, x, a->fp16);
}

/* q·k of key j (run time) as a vector over the head dimension: NV chunks,
 * nothing read when j >= n (then 0); n NULL: j is a key (constant lane
 * masks, no per-key test). */
static LLVMValueRef dec_qk(HostGen *g, const Attn *a, LLVMValueRef kp, LLVMValueRef *qv, LLVMValueRef j, LLVMValueRef n)
{
	int64_t vw = g->vw, NV = a->hdp / vw;
	LLVMValueRef in = n ? LLVMBuildICmp(g->b, LLVMIntSLT, j, n, "") : NULL;
	LLVMValueRef acc = NULL;
	for (int64_t v = 0; v < NV; v++) {
		int64_t left = a->hd - v * vw < vw ? a->hd - v * vw : vw;
		LLVMValueRef cnt = in ? LLVMBuildSelect(g->b, in, ci(g, left), ci(g, 0), "") : ci(g, left);
		LLVMValueRef ki = add(g, mul(g, j, ci(g, a->kvs)), ci(g, v * vw));
		LLVMValueRef k = !in && left == vw ? hg_vload(g, kp, ki) : hg_vload_n(g, kp, ki, cnt);
		k = r16(g, k, a->fp16);
		acc = acc ? hg_fma(g, qv[v], k, acc) : LLVMBuildFMul(g->b, qv[v], k, "");
	}
	return acc;
}

/* The scores of keys j0 .. j0+cnt-1 (cnt a power of two <= vw), in key
 * order: the q·k vectors of the keys reduced by a transposing shuffle tree,
 * depth first (the first half's cnt/2 keys, then the second half's, merged
 * by hg_rows_merge), so few partial vectors are live at once. One vector of
 * vw sums at cnt = vw (vw − 1 merges instead of vw lane reductions). */
static LLVMValueRef dec_keys(HostGen *g, const Attn *a, LLVMValueRef kp, LLVMValueRef *qv, LLVMValueRef j0,
                             int64_t cnt, LLVMValueRef n)
{
	if (cnt == 1)
		return dec_qk(g, a, kp, qv, j0, n);
	LLVMValueRef x = dec_keys(g, a, kp, qv, j0, cnt / 2, n);
	LLVMValueRef y = dec_keys(g, a, kp, qv, add(g, j0, ci(g, cnt / 2)), cnt / 2, n);
	return hg_rows_merge(g, x, y, (int)(cnt / 2), false);
}

/* Head dimensions smaller than a vector that divide it (stories260K: 8 of
 * 16) pack vw/hd keys into one vector in the P·V product: O holds vw/hd
 * partial rows, folded at the end. Only where the rows are contiguous (not
 * the rows of one head in bsd K/V). */
static bool dec_packed(HostGen *g, const Attn *a)
{
	return a->hd < g->vw && g->vw % a->hd == 0 && a->kvs == a->hd;
}

/* The key bias of one block of n (run time) keys into Bs [Bc]: 0 /
 * −3.4028235e38 (mask != 1) for j < n, −inf past n; a full block as vectors
 * of the mask (its entries start at mask[mrow]); no mask (xdec): 0 for j < n. */
static void dec_key_bias(HostGen *g, const Attn *a, LLVMValueRef *c, LLVMValueRef Bs, LLVMValueRef n,
                         LLVMValueRef mrow)
{
	const int64_t vw = g->vw, Bc = a->Bc;
	LLVMValueRef zero = hg_f32(g, 0.0f), ninf = hg_f32(g, -INFINITY);
	if (a->a_mask < 0) {
		HgLoop lj;
		LLVMValueRef j = hg_loop_begin(g, &lj, ci(g, 0), ci(g, Bc), 1, "dbj");
		hg_store(g, LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, j, n, ""), zero, ninf, ""), Bs, j);
		hg_loop_end(g, &lj);
		return;
	}
	HgIf fb;
	hg_if_begin(g, &fb, LLVMBuildICmp(g->b, LLVMIntEQ, n, ci(g, Bc), ""));
	{
		LLVMTypeRef et = a->mask_dt == DT_INT32 ? g->t_i32 : g->t_i64;
		LLVMTypeRef vt = LLVMVectorType(et, (unsigned)vw);
		for (int64_t k = 0; k < Bc / vw; k++) {
			LLVMValueRef mp = hg_gep(g, et, c[C_MASK], add(g, mrow, ci(g, k * vw)));
			LLVMValueRef mv = LLVMBuildLoad2(g->b, vt, mp, "");
			LLVMSetAlignment(mv, a->mask_dt == DT_INT32 ? 4 : 8);
			LLVMValueRef ones[64];
			for (int64_t l = 0; l < vw; l++)
				ones[l] = LLVMConstInt(et, 1, 0);
			LLVMValueRef off = LLVMBuildICmp(g->b, LLVMIntNE, mv, LLVMConstVector(ones, (unsigned)vw), "");
			hg_vstore(g, LLVMBuildSelect(g->b, off, hg_vconst(g, -3.4028234663852886e38f), hg_vconst(g, 0.0f), ""),
			          Bs, ci(g, k * vw));
		}
	}
	hg_if_else(g, &fb);
	{
		HgLoop lj;
		LLVMValueRef j = hg_loop_begin(g, &lj, ci(g, 0), ci(g, Bc), 1, "dbj");
		LLVMValueRef inside = LLVMBuildICmp(g->b, LLVMIntSLT, j, n, "");
		LLVMValueRef jc = LLVMBuildSelect(g->b, inside, j, ci(g, 0), "");
		LLVMValueRef mval = load_int(g, a->mask_dt, c[C_MASK], add(g, mrow, jc));
		LLVMValueRef off = LLVMBuildICmp(g->b, LLVMIntNE, mval, ci(g, 1), "");
		LLVMValueRef v = LLVMBuildSelect(g->b, off, hg_f32(g, -3.4028234663852886e38f), zero, "");
		hg_store(g, LLVMBuildSelect(g->b, inside, v, ninf, ""), Bs, j);
		hg_loop_end(g, &lj);
	}
	hg_if_end(g, &fb);
}

/* One block of n (run time, 1..Bc) keys: rows kp[j·kvs], vp[j·kvs]; the mask
 * entries of these keys start at mask[mrow]; newrows: the block holds the new
 * rows (causal: query row t sees new key j iff j <= t). */
static void emit_dec_block(HostGen *g, const Attn *a, LLVMValueRef *c, LLVMValueRef tiles[6], LLVMValueRef kp,
                           LLVMValueRef vp, LLVMValueRef n, LLVMValueRef mrow, bool newrows)
{
	const int64_t vw = g->vw, Bc = a->Bc, NB = Bc / vw, NV = a->hdp / vw;
	const int64_t R = a->H / a->Hkv * a->T;
	LLVMValueRef Qs = tiles[0], Os = tiles[1], Ss = tiles[2], Ms = tiles[3], Ls = tiles[4], Bs = tiles[5];
	dec_key_bias(g, a, c, Bs, n, mrow);
	HgLoop lr;
	LLVMValueRef r = hg_loop_begin(g, &lr, ci(g, 0), ci(g, R), 1, "dr");
	LLVMValueRef t = LLVMBuildSRem(g->b, r, ci(g, a->T), "t");
	LLVMValueRef qv[64], ov[64];
	WL_ASSERT(NV <= 32);
	for (int64_t v = 0; v < NV; v++)
		qv[v] = hg_vload(g, Qs, add(g, mul(g, r, ci(g, a->hdp)), ci(g, v * vw)));
	/* scores, vw keys at a time (dec_keys) + the key bias (−inf past n), the
	 * groups past n −inf */
	{
		LLVMValueRef ng = mul(g, LLVMBuildSDiv(g->b, add(g, n, ci(g, vw - 1)), ci(g, vw), ""), ci(g, vw));
		HgLoop lj;
		LLVMValueRef j0 = hg_loop_begin(g, &lj, ci(g, 0), ng, vw, "dsj");
		/* a full group (every load unmasked or with a constant mask), else the last one */
		HgIf fi;
		hg_if_begin(g, &fi, LLVMBuildICmp(g->b, LLVMIntSLE, add(g, j0, ci(g, vw)), n, ""));
		hg_vstore(g, dec_keys(g, a, kp, qv, j0, vw, NULL), Ss, j0);
		hg_if_else(g, &fi);
		hg_vstore(g, dec_keys(g, a, kp, qv, j0, vw, n), Ss, j0);
		hg_if_end(g, &fi);
		LLVMValueRef sv = LLVMBuildFAdd(g->b, hg_vload(g, Ss, j0), hg_vload(g, Bs, j0), "s");
		if (newrows && a->causal) {
			LLVMValueRef lanes[64];
			for (int64_t k = 0; k < vw; k++)
				lanes[k] = hg_i32(g, (int32_t)k);
			LLVMValueRef jv = LLVMBuildAdd(g->b, LLVMConstVector(lanes, (unsigned)vw),
			                               hg_vsplat(g, LLVMBuildTrunc(g->b, j0, g->t_i32, "")), "");
			LLVMValueRef over = LLVMBuildICmp(g->b, LLVMIntSGT, jv, hg_vsplat(g, LLVMBuildTrunc(g->b, t, g->t_i32, "")), "");
			sv = LLVMBuildSelect(g->b, over, hg_vconst(g, -INFINITY), sv, "");
		}
		hg_vstore(g, sv, Ss, j0);
		hg_loop_end(g, &lj);
		HgLoop lz;
		LLVMValueRef jz = hg_loop_begin(g, &lz, ng, ci(g, Bc), vw, "dsz");
		hg_vstore(g, hg_vconst(g, -INFINITY), Ss, jz);
		hg_loop_end(g, &lz);
	}
	/* online softmax */
	LLVMValueRef sv[16], mx = NULL;
	WL_ASSERT(NB <= 16);
	for (int64_t k = 0; k < NB; k++) {
		sv[k] = hg_vload(g, Ss, ci(g, k * vw));
		mx = mx ? hg_fmax(g, mx, sv[k]) : sv[k];
	}
	LLVMValueRef m = hg_load(g, g->t_f32, Ms, r);
	LLVMValueRef mnew = hg_fmax(g, m, hg_vreduce_max(g, mx));
	LLVMValueRef alpha = hg_exp(g, LLVMBuildFSub(g->b, m, mnew, ""));
	LLVMValueRef mv = hg_vsplat(g, mnew), psum = NULL;
	for (int64_t k = 0; k < NB; k++) {
		LLVMValueRef p = hg_exp(g, LLVMBuildFSub(g->b, sv[k], mv, ""));
		hg_vstore(g, p, Ss, ci(g, k * vw));
		psum = psum ? LLVMBuildFAdd(g->b, psum, p, "") : p;
	}
	hg_store(g, hg_fma(g, hg_load(g, g->t_f32, Ls, r), alpha, hg_vreduce_add(g, psum)), Ls, r);
	hg_store(g, mnew, Ms, r);
	/* O = alpha·O + P V */
	LLVMValueRef av = hg_vsplat(g, alpha);
	LLVMValueRef orow = mul(g, r, ci(g, a->hdp));
	for (int64_t v = 0; v < NV; v++)
		ov[v] = LLVMBuildFMul(g->b, hg_vload(g, Os, add(g, orow, ci(g, v * vw))), av, "");
	if (dec_packed(g, a)) {
		/* kv = vw/hd keys per vector: V rows j..j+kv-1 (contiguous, masked past n),
		 * p lanes l → p[j + l/hd] */
		int64_t kv = vw / a->hd;
		LLVMValueRef idx[64];
		for (int64_t l = 0; l < vw; l++)
			idx[l] = hg_i32(g, (int32_t)(l / a->hd));
		LLVMValueRef spread = LLVMConstVector(idx, (unsigned)vw);
		/* two accumulators (2·kv keys per iteration): two FMA chains; the
		 * iterations below nfull read whole vectors, the last one is masked */
		LLVMValueRef nfull = mul(g, LLVMBuildSDiv(g->b, n, ci(g, 2 * kv), ""), ci(g, 2 * kv));
		LLVMValueRef acc[2] = {ov[0], hg_vconst(g, 0.0f)};
		for (int tail = 0; tail < 2; tail++) {
			HgLoop lj;
			LLVMValueRef j = hg_loop_begin(g, &lj, tail ? nfull : ci(g, 0), tail ? n : nfull, 2 * kv, "dpj");
			LLVMValueRef o[2] = {hg_loop_carry(g, &lj, acc[0]), hg_loop_carry(g, &lj, acc[1])};
			for (int u = 0; u < 2; u++) {
				LLVMValueRef ju = add(g, j, ci(g, u * kv));
				LLVMValueRef vi = mul(g, ju, ci(g, a->hd)), vr;
				if (tail) {
					LLVMValueRef left = LLVMBuildSub(g->b, n, ju, "");
					left = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, left, ci(g, 0), ""), ci(g, 0), left, "");
					LLVMValueRef rows = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, left, ci(g, kv), ""),
					                                    left, ci(g, kv), "");
					vr = hg_vload_n(g, vp, vi, mul(g, rows, ci(g, a->hd)));
				} else {
					vr = hg_vload(g, vp, vi);
				}
				vr = r16(g, vr, a->fp16);
				LLVMValueRef pl = hg_vload(g, Ss, ju);
				LLVMValueRef pe = LLVMBuildShuffleVector(g->b, pl, pl, spread, "");
				hg_loop_next(g, &lj, o[u], hg_fma(g, pe, vr, o[u]));
			}
			hg_loop_end(g, &lj);
			acc[0] = o[0];
			acc[1] = o[1];
		}
		hg_vstore(g, LLVMBuildFAdd(g->b, acc[0], acc[1], ""), Os, orow);
	} else {
		HgLoop lj;
		LLVMValueRef j = hg_loop_begin(g, &lj, ci(g, 0), n, 1, "dpj");
		LLVMValueRef o[64];
		for (int64_t v = 0; v < NV; v++)
			o[v] = hg_loop_carry(g, &lj, ov[v]);
		LLVMValueRef pj = hg_vbroadcast(g, Ss, j);
		for (int64_t v = 0; v < NV; v++)
			hg_loop_next(g, &lj, o[v], hg_fma(g, pj, dec_vrow(g, a, vp, j, v), o[v]));
		hg_loop_end(g, &lj);
		for (int64_t v = 0; v < NV; v++)
			hg_vstore(g, o[v], Os, add(g, orow, ci(g, v * vw)));
	}
	hg_loop_end(g, &lr);
}

static void emit_decode(HostGen *g, const Attn *a, LLVMValueRef api, LLVMValueRef *caps)
{
	const int64_t vw = g->vw, NV = a->hdp / vw, group = a->H / a->Hkv, R = group * a->T;
	const int64_t D = a->H * a->hd, Bc = a->Bc;
	HgPar par;
	hg_par_begin(g, &par, api, ci(g, a->B * a->Hkv), caps, C_N, "attn_decode");
	LLVMValueRef *c = par.cap;
	LLVMValueRef tiles[6];
	tiles[0] = hg_alloca(g, g->t_f32, R * a->hdp, 64, "dqtile");
	tiles[1] = hg_alloca(g, g->t_f32, R * a->hdp, 64, "dotile");
	tiles[2] = hg_alloca(g, g->t_f32, 2 * Bc, 64, "dstile");   /* Bc + the packed P·V's overread */
	tiles[3] = hg_alloca(g, g->t_f32, R, 4, "dm");
	tiles[4] = hg_alloca(g, g->t_f32, R, 4, "dl");
	tiles[5] = hg_alloca(g, g->t_f32, Bc, 64, "dbias");
	LLVMValueRef Qs = tiles[0], Os = tiles[1], Ms = tiles[3], Ls = tiles[4];
	LLVMValueRef zero = hg_f32(g, 0.0f), vzero = hg_vconst(g, 0.0f);

	HgLoop lt;
	LLVMValueRef task = hg_loop_begin(g, &lt, par.i0, par.i1, 1, "bk");
	LLVMValueRef b = LLVMBuildSDiv(g->b, task, ci(g, a->Hkv), "b");
	LLVMValueRef kh = LLVMBuildSRem(g->b, task, ci(g, a->Hkv), "kh");
	LLVMValueRef kn = hg_gepf(g, c[C_KT], mul(g, task, ci(g, a->T * a->hd)));
	LLVMValueRef vn = hg_gepf(g, c[C_VP], mul(g, task, ci(g, a->T * a->hd)));
	LLVMValueRef prk = a->a_prk >= 0 ? hg_gepf(g, c[C_PRK], mul(g, task, ci(g, a->T * a->hd))) : NULL;
	LLVMValueRef prv = a->a_prv >= 0 ? hg_gepf(g, c[C_PRV], mul(g, task, ci(g, a->T * a->hd))) : NULL;
	LLVMValueRef nv = c[C_NV];

	/* the new rows: rotated / rounded k, rounded v → Kn, Vn and the presents
	 * (xdec: none, K/V are the keys) */
	if (!a->xdec) {
		HgLoop ls;
		LLVMValueRef s = hg_loop_begin(g, &ls, ci(g, 0), ci(g, a->T), 1, "ds");
		LLVMValueRef off = add(g, mul(g, add(g, mul(g, b, ci(g, a->T)), s), ci(g, a->Hkv * a->hd)), mul(g, kh, ci(g, a->hd)));
		LLVMValueRef ks = hg_gepf(g, c[C_K], off), vs = hg_gepf(g, c[C_V], off);
		LLVMValueRef crow = a->rope ? rope_row(g, a, c[C_POS], b, s) : NULL;
		HgLoop le;
		LLVMValueRef e = hg_loop_begin(g, &le, ci(g, 0), ci(g, a->hd), 1, "de");
		LLVMValueRef kval = r16(g, row_elem(g, a, ks, e, a->rope, c[C_COS], c[C_SIN], crow), a->fp16);
		LLVMValueRef vval = r16(g, hg_load(g, g->t_f32, vs, e), a->fp16);
		LLVMValueRef di = add(g, mul(g, s, ci(g, a->hd)), e);
		hg_store(g, kval, kn, di);
		hg_store(g, vval, vn, di);
		if (prk)
			hg_store(g, kval, prk, di);
		if (prv)
			hg_store(g, vval, prv, di);
		hg_loop_end(g, &le);
		hg_loop_end(g, &ls);
	}
	/* query rows r = gi·T + t (head kh·group + gi): scale · q, rotated, rounded; O = 0 */
	{
		HgLoop lr;
		LLVMValueRef r = hg_loop_begin(g, &lr, ci(g, 0), ci(g, R), 1, "dqr");
		LLVMValueRef gi = LLVMBuildSDiv(g->b, r, ci(g, a->T), "gi");
		LLVMValueRef t = LLVMBuildSRem(g->b, r, ci(g, a->T), "t");
		LLVMValueRef h = add(g, mul(g, kh, ci(g, group)), gi);
		LLVMValueRef src = hg_gepf(g, c[C_Q], add(g, mul(g, add(g, mul(g, b, ci(g, a->T)), t), ci(g, D)), mul(g, h, ci(g, a->hd))));
		LLVMValueRef crow = a->rope ? rope_row(g, a, c[C_POS], b, t) : NULL;
		LLVMValueRef qrow = mul(g, r, ci(g, a->hdp));
		HgLoop le;
		LLVMValueRef e = hg_loop_begin(g, &le, ci(g, 0), ci(g, a->hd), 1, "dqe");
		LLVMValueRef x = row_elem(g, a, src, e, a->rope, c[C_COS], c[C_SIN], crow);
		hg_store(g, LLVMBuildFMul(g->b, x, hg_f32(g, a->scale), ""), Qs, add(g, qrow, e));
		hg_loop_end(g, &le);
		for (int64_t ee = a->hd; ee < a->hdp; ee++)
			hg_store(g, zero, Qs, add(g, qrow, ci(g, ee)));
		for (int64_t v = 0; v < NV; v++)
			hg_vstore(g, vzero, Os, add(g, qrow, ci(g, v * vw)));
		hg_store(g, hg_f32(g, -FLT_MAX), Ms, r);
		hg_store(g, zero, Ls, r);
		hg_loop_end(g, &lr);
	}
	/* the cache rows in use, read in place, then the new rows (xdec: the S
	 * rows of K/V [B, H, S, hd], or of head kh in [B, S, D], nothing after
	 * them) */
	{
		int64_t rows = a->xdec ? a->S : a->P;
		LLVMValueRef base = mul(g, task, ci(g, rows * a->hd));
		if (a->kvs != a->hd)
			base = add(g, mul(g, b, ci(g, rows * a->kvs)), mul(g, kh, ci(g, a->hd)));
		LLVMValueRef pk = hg_gepf(g, c[a->xdec ? C_K : C_PK], base);
		LLVMValueRef pv = hg_gepf(g, c[a->xdec ? C_V : C_PV], base);
		HgLoop lj;
		LLVMValueRef j0 = hg_loop_begin(g, &lj, ci(g, 0), nv, Bc, "dj0");
		LLVMValueRef left = LLVMBuildSub(g->b, nv, j0, "");
		LLVMValueRef n = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, left, ci(g, Bc), ""), left, ci(g, Bc), "n");
		LLVMValueRef ro = mul(g, j0, ci(g, a->kvs));
		emit_dec_block(g, a, c, tiles, hg_gepf(g, pk, ro), hg_gepf(g, pv, ro), n,
		               add(g, mul(g, b, ci(g, a->L)), j0), false);
		hg_loop_end(g, &lj);
	}
	if (!a->xdec)
		emit_dec_block(g, a, c, tiles, kn, vn, ci(g, a->T), add(g, mul(g, b, ci(g, a->L)), ci(g, a->P)), true);
	/* out = O / l */
	{
		HgLoop lr;
		LLVMValueRef r = hg_loop_begin(g, &lr, ci(g, 0), ci(g, R), 1, "dor");
		LLVMValueRef gi = LLVMBuildSDiv(g->b, r, ci(g, a->T), "gi");
		LLVMValueRef t = LLVMBuildSRem(g->b, r, ci(g, a->T), "t");
		LLVMValueRef h = add(g, mul(g, kh, ci(g, group)), gi);
		LLVMValueRef dst = hg_gepf(g, c[C_OUT], add(g, mul(g, add(g, mul(g, b, ci(g, a->T)), t), ci(g, D)), mul(g, h, ci(g, a->hd))));
		LLVMValueRef invv = hg_vsplat(g, LLVMBuildFDiv(g->b, hg_f32(g, 1.0f), hg_load(g, g->t_f32, Ls, r), ""));
		if (dec_packed(g, a)) {
			/* fold the vw/hd partial rows: lanes e < hd get Σ_s O[s·hd + e] */
			LLVMValueRef o = hg_vload(g, Os, mul(g, r, ci(g, a->hdp)));
			for (int64_t w = vw / 2; w >= a->hd; w /= 2) {
				LLVMValueRef idx[64];
				for (int64_t l = 0; l < vw; l++)
					idx[l] = hg_i32(g, (int32_t)((l + w) % vw));
				o = LLVMBuildFAdd(g->b, o, LLVMBuildShuffleVector(g->b, o, o, LLVMConstVector(idx, (unsigned)vw), ""), "");
			}
			hg_vstore_n(g, r16(g, LLVMBuildFMul(g->b, o, invv, ""), a->fp16), dst, ci(g, 0), ci(g, a->hd));
		}
		for (int64_t v = 0; !dec_packed(g, a) && v < NV; v++) {
			LLVMValueRef y = r16(g, LLVMBuildFMul(g->b, hg_vload(g, Os, add(g, mul(g, r, ci(g, a->hdp)), ci(g, v * vw))), invv, ""), a->fp16);
			int64_t left = a->hd - v * vw;
			if (left >= vw)
				hg_vstore(g, y, dst, ci(g, v * vw));
			else
				hg_vstore_n(g, y, dst, ci(g, v * vw), ci(g, left));
		}
		hg_loop_end(g, &lr);
	}
	hg_loop_end(g, &lt);
	hg_par_end(g, &par);
}

/* static_cache: the cache rows in use, nv = 1 + the last j < P with
 * attention_mask[b, j] == 1 over the batches (0 when none). Keys past nv are
 * masked: leaving them out changes nothing but the case the op leaves open
 * (a query whose visible keys are all masked). */
static LLVMValueRef emit_nvalid(HostGen *g, const Attn *a, LLVMValueRef mask)
{
	HgLoop lb;
	LLVMValueRef b = hg_loop_begin(g, &lb, ci(g, 0), ci(g, a->B), 1, "nvb");
	LLVMValueRef acc = hg_loop_carry(g, &lb, ci(g, 0));
	HgLoop lj;
	LLVMValueRef j = hg_loop_begin(g, &lj, ci(g, 0), ci(g, a->P), 1, "nvj");
	LLVMValueRef cur = hg_loop_carry(g, &lj, acc);
	LLVMValueRef m = load_int(g, a->mask_dt, mask, add(g, mul(g, b, ci(g, a->L)), j));
	LLVMValueRef on = LLVMBuildICmp(g->b, LLVMIntEQ, m, ci(g, 1), "");
	LLVMValueRef j1 = add(g, j, ci(g, 1));
	LLVMValueRef more = LLVMBuildAnd(g->b, on, LLVMBuildICmp(g->b, LLVMIntSGT, j1, cur, ""), "");
	hg_loop_next(g, &lj, cur, LLVMBuildSelect(g->b, more, j1, cur, ""));
	hg_loop_end(g, &lj);
	hg_loop_next(g, &lb, acc, cur);
	hg_loop_end(g, &lb);
	return acc;
}

static int emit_attn(HostGen *g, const Attn *a, LLVMValueRef fn)
{
	LLVMValueRef api = hg_api(g, fn);
	LLVMValueRef scr = hg_arg(g, fn, a->a_scr);
	LLVMValueRef caps[C_N];
	caps[C_Q] = hg_arg(g, fn, a->a_q);
	caps[C_K] = hg_arg(g, fn, a->a_k);
	caps[C_V] = hg_arg(g, fn, a->a_v);
	caps[C_PK] = arg_or_null(g, fn, a->a_pk);
	caps[C_PV] = arg_or_null(g, fn, a->a_pv);
	caps[C_COS] = arg_or_null(g, fn, a->a_cos);
	caps[C_SIN] = arg_or_null(g, fn, a->a_sin);
	caps[C_MASK] = arg_or_null(g, fn, a->a_mask);
	caps[C_POS] = arg_or_null(g, fn, a->a_pos);
	caps[C_OUT] = hg_arg(g, fn, a->a_out);
	caps[C_PRK] = arg_or_null(g, fn, a->a_prk);
	caps[C_PRV] = arg_or_null(g, fn, a->a_prv);
	caps[C_KT] = byte_off(g, scr, a->off_kt);
	caps[C_VP] = byte_off(g, scr, a->off_vp);
	caps[C_BIAS] = byte_off(g, scr, a->off_bias);
	caps[C_NV] = ci(g, a->P);
	if (a->B * a->T * a->H == 0)
		return WL_OK;
	if (a->stat)
		caps[C_NV] = emit_nvalid(g, a, caps[C_MASK]);
	else if (a->xdec)
		caps[C_NV] = ci(g, a->S);     /* every K/V row is a key in use */
	if (a->dec) {
		emit_decode(g, a, api, caps);
		return WL_OK;
	}
	emit_pack(g, a, api, caps);
	emit_attend(g, a, api, caps);
	return WL_OK;
}

/* ---------------------------------------------------------------- entry points */

int hg_emit_whisper_attention(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d)
{
	Attn a;
	if (wa_parse(g, n, &a, d))
		return WL_ERR;
	return emit_attn(g, &a, fn);
}

int hg_emit_gqa(HostGen *g, const Node *n, LLVMValueRef fn, Diag *d)
{
	Attn a;
	if (gqa_parse(g, n, &a, d))
		return WL_ERR;
	if (a.rope && a.a_pos >= 0)
		check_positions(g, n, &a, fn);
	return emit_attn(g, &a, fn);
}

uint64_t hg_scratch_whisper_attention(HostGen *g, const Node *n)
{
	Attn a;
	Diag d = {0};
	if (wa_parse(g, n, &a, &d))
		return 0;
	return a.scratch;
}

uint64_t hg_scratch_gqa(HostGen *g, const Node *n)
{
	Attn a;
	Diag d = {0};
	if (gqa_parse(g, n, &a, &d))
		return 0;
	return a.scratch;
}
