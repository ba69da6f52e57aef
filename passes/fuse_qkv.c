/* fuse_qkv.c — projections of one input become one MatMulNBits with a
 * concatenated weight and `splits` outputs (vendor: fused_qkv).
 *
 *   q = ai.wlower.MatMulNBits <K: int = K, N: int = Nq, bits, block_size> (x, wq, sq, zq, bq)
 *   k = ai.wlower.MatMulNBits <K: int = K, N: int = Nk, bits, block_size> (x, wk, sk, zk)
 *   v = ai.wlower.MatMulNBits <K: int = K, N: int = Nv, bits, block_size> (x, wv, sv, zv, bv)
 *     →
 *   q, k, v = ai.wlower.MatMulNBits <K: int = K, N: int = Nq+Nk+Nv, bits, block_size,
 *                                    splits: ints = [Nq, Nk, Nv]> (x, w_qkv, s_qkv, z_qkv, b_qkv)
 *
 * Every ai.wlower.MatMulNBits reading the same A (slot 0) with the same K,
 * bits, block_size and zero-point kind (none, packed uint8, float), with
 * constant weights, scales, zero points and bias, and without `splits`,
 * joins one node: Q/K/V of a self-attention, gate/up of a Qwen2 MLP, and the
 * cross-attention K/V projections of the encoder states — of all decoder
 * layers at once, since they all read encoder_hidden_states (the webgpu
 * export's `cross_kv` program computes them once per window the same way).
 * The members appear in graph order along N.
 *
 * Concatenation along N: bits 32 weights are [K, N] (rows interleave: each
 * row k of the result is row k of every member in turn); bits 2/4/8 weights
 * [N, k_blocks, blob], scales [N * k_blocks] and packed zero points
 * [N, ceil(k_blocks * bits / 8)] are per row of N, so they concatenate as
 * bytes. A missing bias becomes zeros (Whisper's k_proj has none).
 *
 * Near misses left alone: a different A, K, bits, block_size or zero-point
 * kind; a non-constant weight/scale/bias; a node that already has splits,
 * trans_b = 1 or groups > 1 (its weight is [K, N/groups]; the weight shape
 * check below would refuse it too).
 *
 * requires  fuse-matmul-nbits
 * maintains topological order (the node takes the place of the first
 *           member), use lists, output values (names and types kept)
 * breaks    nothing; new initializers are copies (the old ones die in dce)
 */
#include <string.h>
#include "passes.h"
#include "match.h"

enum { QKV_MAX = 64 };

typedef struct QKVCapture {
	Node *m[QKV_MAX];
	int n;
	Value *a;
	int64_t K, N, bits, block, kblocks, blob, zp_row;
	int zkind;                 /* 0 none, 1 packed uint8, 2 float */
	bool any_bias;
} QKVCapture;

static Value *in(const Node *n, int i)
{
	return i < n->ninputs ? n->inputs[i] : NULL;
}

static bool member_ok(const Node *n, const Value *a)
{
	if (n->op != OP_WlMatMulNBits || n->ninputs < 2 || n->inputs[0] != a || n->noutputs != 1 ||
	    !n->outputs[0] || node_attr(n, "splits") || attr_int(n, "trans_b", 0) != 0 ||
	    attr_int(n, "groups", 1) != 1)
		return false;
	int64_t bits = attr_int(n, "bits", 4);
	if (bits == 32) {
		if (!const_of(in(n, 1), DT_FLOAT) || in(n, 2) || in(n, 3))
			return false;
	} else {
		if (!const_of(in(n, 1), DT_UINT8) || !const_of(in(n, 2), DT_FLOAT))
			return false;
		if (in(n, 3) && !const_of(in(n, 3), DT_UINT8) && !const_of(in(n, 3), DT_FLOAT))
			return false;
	}
	if (in(n, 4) && !(const_of(in(n, 4), DT_FLOAT) && tensor_numel(in(n, 4)->init) == attr_int(n, "N", 0)))
		return false;
	return true;
}

static int zkind(const Node *n)
{
	const Value *z = in(n, 3);
	return !z ? 0 : z->init->dtype == DT_UINT8 ? 1 : 2;
}

static bool same_key(const Node *x, const Node *y)
{
	return attr_int(x, "K", -1) == attr_int(y, "K", -2) && attr_int(x, "bits", 4) == attr_int(y, "bits", 4) &&
	       attr_int(x, "block_size", 0) == attr_int(y, "block_size", 0) && zkind(x) == zkind(y);
}

static bool is_member(const QKVCapture *c, const Node *n)
{
	for (int i = 0; i < c->n; i++)
		if (c->m[i] == n)
			return true;
	return false;
}

/* Fills c with first and the compatible nodes after it reading the same A. */
static bool match_qkv(Node *first, QKVCapture *c)
{
	memset(c, 0, sizeof *c);
	Value *a = first->ninputs ? first->inputs[0] : NULL;
	if (!a || !member_ok(first, a))
		return false;
	c->a = a;
	c->m[c->n++] = first;
	int cand = 0;
	for (int u = 0; u < a->nusers; u++) {
		Node *x = a->users[u].node;
		if (x != first && a->users[u].slot == 0 && x->graph == first->graph && member_ok(x, a) &&
		    same_key(first, x))
			cand++;
	}
	if (cand == 0)
		return false;
	for (Node *x = first->next; x && c->n < QKV_MAX; x = x->next) {
		if (is_member(c, x) || !member_ok(x, a) || !same_key(first, x))
			continue;
		c->m[c->n++] = x;
	}
	if (c->n < 2)
		return false;
	c->K = attr_int(first, "K", 0);
	c->bits = attr_int(first, "bits", 4);
	c->block = attr_int(first, "block_size", 0);
	c->zkind = zkind(first);
	for (int i = 0; i < c->n; i++) {
		int64_t n = attr_int(c->m[i], "N", 0);
		if (n <= 0)
			return false;
		c->N += n;
		if (in(c->m[i], 4))
			c->any_bias = true;
	}
	if (c->bits != 32) {
		if (c->block <= 0)
			return false;
		c->kblocks = (c->K + c->block - 1) / c->block;
		c->blob = c->block * c->bits / 8;
		c->zp_row = (c->kblocks * c->bits + 7) / 8;
		for (int i = 0; i < c->n; i++) {
			int64_t n = attr_int(c->m[i], "N", 0);
			if ((int64_t)in(c->m[i], 1)->init->nbytes != n * c->kblocks * c->blob ||
			    tensor_numel(in(c->m[i], 2)->init) != n * c->kblocks)
				return false;
			const Value *z = in(c->m[i], 3);
			if (z && c->zkind == 1 && (int64_t)z->init->nbytes != n * c->zp_row)
				return false;
			if (z && c->zkind == 2 && tensor_numel(z->init) != n * c->kblocks)
				return false;
		}
	} else {
		for (int i = 0; i < c->n; i++) {
			const Tensor *w = in(c->m[i], 1)->init;
			if (w->ndim != 2 || w->dims[0] != c->K || w->dims[1] != attr_int(c->m[i], "N", 0))
				return false;
		}
	}
	return true;
}

/* Concatenates slot `slot` of every member as bytes along N; members without
 * it get `fill` bytes (row_bytes per row of N). */
static void cat_rows(const QKVCapture *c, int slot, uint8_t *dst, int64_t row_bytes, uint8_t fill)
{
	for (int i = 0; i < c->n; i++) {
		int64_t n = attr_int(c->m[i], "N", 0);
		const Value *v = in(c->m[i], slot);
		if (v)
			memcpy(dst, v->init->data, (size_t)(n * row_bytes));
		else
			memset(dst, fill, (size_t)(n * row_bytes));
		dst += n * row_bytes;
	}
}

static Node *rewrite_qkv(Module *m, QKVCapture *c, int k)
{
	Arena *ar = m->arena;
	Graph *g = c->m[0]->graph;
	void *p;
	Value *b, *s = NULL, *z = NULL, *bias = NULL;
	if (c->bits == 32) {
		int64_t dims[2] = {c->K, c->N};
		b = new_initializer(g, "fused_weight", DT_FLOAT, 2, dims, &p);
		float *dst = p;
		for (int64_t r = 0; r < c->K; r++)
			for (int i = 0; i < c->n; i++) {
				int64_t n = attr_int(c->m[i], "N", 0);
				memcpy(dst, (const char *)in(c->m[i], 1)->init->data + r * n * 4, (size_t)n * 4);
				dst += n;
			}
	} else {
		int64_t bd[3] = {c->N, c->kblocks, c->blob}, sd[1] = {c->N * c->kblocks};
		b = new_initializer(g, "fused_weight", DT_UINT8, 3, bd, &p);
		cat_rows(c, 1, p, c->kblocks * c->blob, 0);
		s = new_initializer(g, "fused_scales", DT_FLOAT, 1, sd, &p);
		cat_rows(c, 2, p, c->kblocks * 4, 0);
		if (c->zkind == 1) {
			int64_t zd[1] = {c->N * c->zp_row};
			z = new_initializer(g, "fused_zero_points", DT_UINT8, 1, zd, &p);
			cat_rows(c, 3, p, c->zp_row, 0);
		} else if (c->zkind == 2) {
			z = new_initializer(g, "fused_zero_points", DT_FLOAT, 1, sd, &p);
			cat_rows(c, 3, p, c->kblocks * 4, 0);
		}
	}
	if (c->any_bias) {
		int64_t nd[1] = {c->N};
		bias = new_initializer(g, "fused_bias", DT_FLOAT, 1, nd, &p);
		cat_rows(c, 4, p, 4, 0);   /* zeros for members without bias */
	}
	Node *f = node_new(g, "MatMulNBits", "ai.wlower", fused_node_name(m, c->m, c->n, "fused_proj", "fused_proj", &k));
	node_add_attr(f, "K", AT_INT)->i = c->K;
	node_add_attr(f, "N", AT_INT)->i = c->N;
	node_add_attr(f, "bits", AT_INT)->i = c->bits;
	if (c->bits != 32)
		node_add_attr(f, "block_size", AT_INT)->i = c->block;
	Attr *sp = node_add_attr(f, "splits", AT_INTS);
	sp->n = c->n;
	sp->ints = arena_alloc(ar, sizeof(int64_t) * (size_t)c->n);
	for (int i = 0; i < c->n; i++)
		sp->ints[i] = attr_int(c->m[i], "N", 0);
	set_fused_from_nested(m, f, c->m, c->n);
	node_insert_before(c->m[0], f);
	Value *outs[QKV_MAX];
	for (int i = 0; i < c->n; i++) {
		outs[i] = c->m[i]->outputs[0];
		node_remove(c->m[i]);
	}
	node_add_input(f, c->a);
	node_add_input(f, b);
	node_add_input(f, s);
	node_add_input(f, z);
	node_add_input(f, bias);
	while (f->ninputs > 2 && !f->inputs[f->ninputs - 1])
		f->ninputs--;
	for (int i = 0; i < c->n; i++)
		node_add_output(f, outs[i]);
	return f;
}

int pass_fuse_qkv(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	int changed = 0;
	for (Node *n = m->graph->first; n; n = n->next) {
		QKVCapture c;
		if (!match_qkv(n, &c))
			continue;
		n = rewrite_qkv(m, &c, changed);   /* members after it are unlinked */
		changed++;
	}
	return fusion_done(m, ctx, changed);
}
