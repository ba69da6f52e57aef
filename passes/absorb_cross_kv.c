/* absorb_cross_kv.c — attention of a few queries over the projections of a
 * long sequence reads the sequence itself (weight absorption): the K and V
 * projections of the S rows are not computed.
 *
 *   k = ai.wlower.MatMulNBits <K = D, N = D, bits> (x, wk, sk, zk)              x [B, S, D], no bias
 *   v = ai.wlower.MatMulNBits <K = D, N = D, bits> (x, wv, sv, zv, bv)
 *   o = ai.wlower.WhisperAttention <embed = D, heads = H, q_len = T, kv_len = S, causal = 0,
 *                                   scale = c, kv_layout = "bsd"> (q, k, v)        q [B, T, D]
 *     →
 *   qa = ai.wlower.MatMulNBits <K = D, N = H·D, bits = 32, groups = H> (q, wka)     [B, T, H·D]
 *   qh = Reshape (qa, [B, T·H, D])
 *   ph = ai.wlower.WhisperAttention <embed = D, heads = 1, q_len = T·H, kv_len = S, causal = 0,
 *                                    scale = c, kv_layout = "bsd"> (qh, x, x)      [B, T·H, D]
 *   pa = Reshape (ph, [B, T, H·D])
 *   o  = ai.wlower.MatMulNBits <K = H·D, N = D, bits = 32, groups = H> (pa, wva, , , bv)
 *
 *   wka [D, D]:    wka[h·hd + e, j] = Wk[j, h·hd + e]   (group h: Wk_hᵀ)
 *   wva [H·D, hd]: wva[h·D + j, e]  = Wv[j, h·hd + e]   (group h: Wv_h)
 *   (Wk, Wv: the dequantized weights as [K, N], hd = D / H)
 *
 * Per head h, q_h·k_hᵀ = q_h·(x·Wk_h)ᵀ = (q_h·Wk_hᵀ)·xᵀ, and, the rows of
 * the softmax P_h summing to 1, P_h·v_h = P_h·(x·Wv_h + bv_h) = (P_h·x)·Wv_h
 * + bv_h. So every head's queries become rows of one head of width D over
 * keys and values x (the T·H rows of qh are (t, h) in that order), and the
 * two grouped products (ai.wlower.MatMulNBits `groups`: a block-diagonal
 * weight without its zero blocks) map in and out of it. Exact in real
 * arithmetic; in float the sums run in another order (the host's Whisper-tiny
 * decoder_prefill stays >= 120 dB against ONNX Runtime: bench/RESULTS.md).
 *
 * When: the vendor's Whisper decoder_prefill (4 prompt tokens; its
 * cross-attention K/V are projections of the 1500 encoder states, read by
 * nothing else). Multiply-adds per batch: before 2·S·D² + 2·T·S·D, after
 * 2·T·D² + 2·H·T·S·D; the pass applies only when that is at most half
 * (roughly H·T <= D/2; Whisper-tiny: 447 M -> 29 M). The weights become
 * float: 2·D² floats per layer instead of the two projections (8x the bytes
 * of 4-bit ones).
 *
 * Only with ctx->fuse.absorb_cross_kv (the driver sets it for --target host;
 * the qc targets' tranges name the projections' tensors, and their kernels
 * have no `groups`). Near misses left alone: K or V read by anything else or
 * a graph output (an Optimum decoder_model's presents), K and V from
 * different x, a K bias, `splits` or `groups` on a projection, a projection
 * that is not D x D, past or present K/V, causal, fp16, kv_layout "bhsd"
 * (cached cross K/V inputs), shapes not static, D not a multiple of H, and
 * too many queries for the saving (H·T near D), and hd or D not a multiple
 * of 32 (each group must be whole 32-column panels of the host kernel).
 *
 * requires  fuse-whisper-attention, fuse-matmul-nbits (before fuse-qkv, which
 *           would join the K/V projections of all layers)
 * maintains topological order (the new nodes take the attention's place),
 *           use lists, the attention's output value (name and type)
 * breaks    nothing; the projections and their weights die in fuse-dce
 */
#include <stdlib.h>
#include <string.h>
#include "passes.h"
#include "match.h"
#include "runtime/interp/interp.h"

typedef struct AbsorbMatch {
	Node *att, *k, *v;
	Value *q, *x, *bv;
	int64_t B, T, S, D, H, hd;
	float scale;
} AbsorbMatch;

static Value *in(const Node *n, int i)
{
	return i < n->ninputs ? n->inputs[i] : NULL;
}

/* a D x D projection of x with constant weights, no splits or groups */
static bool projection(const Node *p, const Value *x, int64_t D)
{
	if (!p || p->ninputs < 2 || in(p, 0) != x || p->noutputs != 1 || node_attr(p, "splits") ||
	    attr_int(p, "groups", 1) != 1 || attr_int(p, "trans_b", 0) != 0 || attr_int(p, "K", -1) != D ||
	    attr_int(p, "N", -1) != D)
		return false;
	int64_t bits = attr_int(p, "bits", 4);
	if (bits == 32)
		return const_of(in(p, 1), DT_FLOAT) && !in(p, 2) && !in(p, 3) && shape_is(in(p, 1), 2, (int64_t[]){D, D});
	int64_t block = attr_int(p, "block_size", 0);
	if ((bits != 2 && bits != 4 && bits != 8) || block < 16 || (block & (block - 1)))
		return false;
	int64_t kb = (D + block - 1) / block, zrow = (kb * bits + 7) / 8;
	const Value *z = in(p, 3);
	return const_of(in(p, 1), DT_UINT8) && (int64_t)in(p, 1)->init->nbytes == D * kb * (block * bits / 8) &&
	       const_of(in(p, 2), DT_FLOAT) && tensor_numel(in(p, 2)->init) == D * kb &&
	       (!z || (const_of(z, DT_UINT8) && tensor_numel(z->init) == D * zrow) ||
	        (const_of(z, DT_FLOAT) && tensor_numel(z->init) == D * kb));
}

static bool match_absorb(Node *n, AbsorbMatch *c)
{
	memset(c, 0, sizeof *c);
	if (n->op != OP_WlWhisperAttention || n->ninputs != 3 || n->noutputs != 1 || !n->outputs[0] ||
	    attr_int(n, "causal", 0) != 0 || attr_int(n, "fp16", 0) != 0)
		return false;
	const char *layout = attr_string(n, "kv_layout", "");
	if (strcmp(layout, "bsd") != 0 || !node_attr(n, "scale"))
		return false;
	c->att = n;
	c->q = in(n, 0);
	c->D = attr_int(n, "embed", 0);
	c->H = attr_int(n, "heads", 0);
	c->scale = attr_float(n, "scale", 0.0f);
	if (c->D <= 0 || c->H <= 1 || c->D % c->H)
		return false;
	c->hd = c->D / c->H;
	if (c->hd % 32 || c->D % 32)   /* the groups: whole 32-column panels of the host kernel */
		return false;
	int64_t qd[MATCH_MAXR], kd[MATCH_MAXR];
	if (!c->q || static_shape(c->q, qd) != 3 || qd[2] != c->D)
		return false;
	c->B = qd[0];
	c->T = qd[1];
	/* K and V: projections of one x, read only by this attention */
	if (!sole_read(in(n, 1)) || !sole_read(in(n, 2)))
		return false;
	c->k = producer(in(n, 1), OP_WlMatMulNBits);
	c->v = producer(in(n, 2), OP_WlMatMulNBits);
	if (!c->k || !c->v || c->k == c->v)
		return false;
	c->x = in(c->k, 0);
	if (!c->x || static_shape(c->x, kd) != 3 || kd[0] != c->B || kd[2] != c->D)
		return false;
	c->S = kd[1];
	if (attr_int(n, "q_len", -1) != c->T || attr_int(n, "kv_len", -1) != c->S)
		return false;
	if (!projection(c->k, c->x, c->D) || !projection(c->v, c->x, c->D) || in(c->k, 4))
		return false;
	c->bv = in(c->v, 4);
	if (c->bv && !(const_of(c->bv, DT_FLOAT) && tensor_numel(c->bv->init) == c->D))
		return false;
	/* multiply-adds per batch, before and after */
	double before = 2.0 * c->S * c->D * c->D + 2.0 * c->T * c->S * c->D;
	double after = 2.0 * c->T * c->D * c->D + 2.0 * c->H * c->T * c->S * c->D;
	return c->B > 0 && c->T > 0 && c->S > 0 && 2.0 * after <= before;
}

/* The projection's weight as floats [D, D] (k rows, n columns). */
static void weight_of(const Node *p, int64_t D, float *out)
{
	int64_t bits = attr_int(p, "bits", 4);
	const Value *w = in(p, 1);
	if (bits == 32) {
		memcpy(out, w->init->data, (size_t)(D * D) * sizeof(float));   /* may be unaligned: bytes */
		return;
	}
	const Value *z = in(p, 3);
	interp_nbits_dequant(w->init->data, in(p, 2)->init->data, z && z->init->dtype == DT_UINT8 ? z->init->data : NULL,
	                     z && z->init->dtype == DT_FLOAT ? z->init->data : NULL, (int)bits,
	                     attr_int(p, "block_size", 0), D, D, out, D);
}

static Value *new_value(Module *m, const char *hint, int dt, int rank, const int64_t *dims)
{
	Value *v = graph_new_value(m->graph, hint);
	type_set_tensor(m->arena, &v->type, dt, rank, dims);
	return v;
}

/* a new node named after the attention: name + suffix */
static Node *add_node(Module *m, const char *op, const char *domain, const char *name, const char *suffix)
{
	return node_new(m->graph, op, domain, arena_printf(m->arena, "%s%s", name, suffix));
}

static Node *grouped_matmul(Module *m, const char *name, const char *suffix, int64_t K, int64_t N, int64_t G)
{
	Node *n = add_node(m, "MatMulNBits", "ai.wlower", name, suffix);
	set_int_attrs(n, (IntAttr[]){{"K", K}, {"N", N}, {"bits", 32}, {"groups", G}}, 4);
	return n;
}

static Node *reshape(Module *m, const char *name, const char *suffix, Value *x, int64_t d0, int64_t d1, int64_t d2)
{
	void *p;
	int64_t three = 3, shape[3] = {d0, d1, d2};
	Value *sv = new_initializer(m->graph, "absorb_shape", DT_INT64, 1, &three, &p);
	memcpy(p, shape, sizeof shape);
	Node *r = add_node(m, "Reshape", "", name, suffix);
	node_add_input(r, x);
	node_add_input(r, sv);
	node_add_output(r, new_value(m, "absorb_reshaped", DT_FLOAT, 3, shape));
	return r;
}

/* false (nothing changed) when the weights' scratch cannot be allocated */
static bool rewrite_absorb(Module *m, AbsorbMatch *c)
{
	int64_t D = c->D, H = c->H, hd = c->hd, B = c->B, T = c->T;
	const char *name = c->att->name ? c->att->name : "";
	float *wk = malloc((size_t)(D * D) * sizeof(float)), *wv = malloc((size_t)(D * D) * sizeof(float));
	if (!wk || !wv) {
		free(wk);
		free(wv);
		return false;
	}
	weight_of(c->k, D, wk);
	weight_of(c->v, D, wv);
	void *pk, *pv;
	int64_t dka[2] = {D, D}, dva[2] = {H * D, hd};
	Value *wka = new_initializer(m->graph, "absorb_wk", DT_FLOAT, 2, dka, &pk);
	Value *wva = new_initializer(m->graph, "absorb_wv", DT_FLOAT, 2, dva, &pv);
	float *ka = pk, *va = pv;
	/* column h·hd + e of row j: Wkᵀ's row h·hd + e; Wv_h's row h·D + j */
	for (int64_t h = 0; h < H; h++)
		for (int64_t j = 0; j < D; j++)
			for (int64_t e = 0; e < hd; e++) {
				ka[(h * hd + e) * D + j] = wk[j * D + h * hd + e];
				va[(h * D + j) * hd + e] = wv[j * D + h * hd + e];
			}
	free(wk);
	free(wv);

	Node *fused[3] = {c->k, c->v, c->att};
	int64_t dqa[3] = {B, T, H * D};
	Node *mq = grouped_matmul(m, name, "/absorb_q", D, H * D, H);
	node_add_input(mq, c->q);
	node_add_input(mq, wka);
	node_add_output(mq, new_value(m, "absorb_qa", DT_FLOAT, 3, dqa));
	Node *r1 = reshape(m, name, "/absorb_q_rows", mq->outputs[0], B, T * H, D);
	Node *at = add_node(m, "WhisperAttention", "ai.wlower", name, "/absorb_core");
	set_int_attrs(at, (IntAttr[]){{"embed", D}, {"heads", 1}, {"q_len", T * H}, {"kv_len", c->S}, {"causal", 0}}, 5);
	node_add_attr(at, "scale", AT_FLOAT)->f = c->scale;
	set_string_attr(m, at, "kv_layout", "bsd");
	node_add_input(at, r1->outputs[0]);
	node_add_input(at, c->x);
	node_add_input(at, c->x);
	int64_t dph[3] = {B, T * H, D};
	node_add_output(at, new_value(m, "absorb_px", DT_FLOAT, 3, dph));
	Node *r2 = reshape(m, name, "/absorb_px_heads", at->outputs[0], B, T, H * D);
	Node *mo = grouped_matmul(m, name, "/absorb_out", H * D, D, H);
	node_add_input(mo, r2->outputs[0]);
	node_add_input(mo, wva);
	if (c->bv) {
		node_add_input(mo, NULL);
		node_add_input(mo, NULL);
		node_add_input(mo, c->bv);
	}
	Node *made[5] = {mq, r1, at, r2, mo};
	for (int i = 0; i < 5; i++) {
		if (made[i] != r1 && made[i] != r2)
			set_fused_from_nested(m, made[i], fused, 3);
		node_insert_before(c->att, made[i]);
	}
	Value *o = c->att->outputs[0];
	node_remove(c->att);
	node_add_output(mo, o);
	/* the projections now have no reader; fuse-dce removes them and their weights */
	return true;
}

int pass_absorb_cross_kv(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	if (!ctx || !ctx->fuse.absorb_cross_kv)
		return WL_OK;
	int changed = 0;
	for (Node *n = m->graph->first; n; n = n->next) {
		AbsorbMatch c;
		if (!match_absorb(n, &c))
			continue;
		Node *prev = n->prev;
		if (!rewrite_absorb(m, &c))
			continue;
		n = prev ? prev : m->graph->first;   /* the new nodes do not match again (heads = 1) */
		changed++;
	}
	return fusion_done(m, ctx, changed);
}
