/* quantize.c — `wlower quantize`: 4-bit block-wise weight quantization
 * (`--int8`: static int8 PTQ to QDQ, cmd_quantize_int8.c).
 *
 *   wlower quantize MODEL -o OUT --nbits 4 --block-size 32 [--symmetric] [--exclude NODE,...]
 *
 * A command, not a pipeline pass: it writes a model for ONNX Runtime and for
 * our own import, the way onnxruntime's matmul_4bits_quantizer.py does.
 *
 * Match (every graph, subgraphs too):
 *   y = MatMul(a, W)        W an initializer (not a graph input), float32, 2-D [K, N],
 *                           all values finite; the node not named in --exclude
 *   y = MatMul(a, Wt)       Wt = Transpose<perm = [1, 0]>(E), E such an initializer
 *   Wt = Transpose(E)       [N, K]: a tied LM head reading the embedding table (onnxruntime's
 *                           quantizer takes initializers only; E stays for its other
 *                           readers, the Transpose goes once nothing reads Wt)
 * Replace:
 *   y = com.microsoft.MatMulNBits<K, N, bits = 4, block_size = BS>(a, W_Q4, W_scales [, W_zero_points])
 *   W_Q4           uint8 [N, k_blocks, BS/2]   k_blocks = ceil(K / BS); column n, row k
 *                  in byte n*k_blocks*BS/2 + k/2, low nibble for even k
 *   W_scales       float [N, k_blocks]
 *   W_zero_points  uint8 [N * ceil(k_blocks/2)] (asymmetric only), per column, low
 *                  nibble first; an odd last block's high nibble is 8
 * and the com.microsoft opset (version 1) is imported. W goes once nothing else reads it;
 * a weight read by several MatMuls is quantized once.
 *
 * Numerics: exactly ONNX Runtime's MLAS BlockwiseQuantizer (q4_dq.cpp), in float:
 *   asymmetric  mn = min(0, min(block)), mx = max(0, max(block)), scale = (mx - mn) / 15,
 *               zp = clamp(roundf(-mn / scale), 0, 15) (zp = 0 when scale is 0)
 *   symmetric   v = the block's value of largest magnitude (signed; the min on a tie),
 *               scale = v / -8, zp = 8 (not stored)
 *   q = clamp(roundf(w * (1/scale) + zp), 0, 15)   (1/scale taken as 0 when scale is 0;
 *               roundf rounds half away from zero)
 *   The padding rows past K are zero-padding for the scales (min/max already include 0);
 *   their nibbles are 0, except the partner of the last row when K is odd, which holds zp
 *   — the bytes onnxruntime's quantizer writes. A zero block keeps scale 0 (-0 when
 *   symmetric), as onnxruntime stores it; it dequantizes to 0 all the same.
 * Dequantized weight: (q - zp) * scale.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "compiler/driver/commands.h"

static const char CMD[] = "quantize";

static const char usage_quantize[] =
"usage: wlower quantize MODEL -o OUT [--nbits 4] [--block-size 32] [--symmetric] [--exclude NODE,...]\n"
"\n"
"Rewrites every MatMul whose second input is a constant 2-D float32 weight into\n"
"com.microsoft MatMulNBits with ONNX Runtime's byte layout and rounding\n"
"(blocks of the weight's columns along K; K zero-padded to a whole block).\n"
"A weight that is Transpose(perm [1, 0]) of such a constant (a tied LM head reading\n"
"the embedding table) is quantized too; the table stays for its other readers.\n"
"\n"
"  -o, --output OUT      the quantized model: .onnx (binary) or .onnxtxt (text)\n"
"  --nbits N             bits per weight (only 4; the default)\n"
"  --block-size B        weights per block along K: a power of two >= 16 (default 32)\n"
"  --symmetric           scale = v / -8 with v the block's value of largest magnitude,\n"
"                        no zero points (default: asymmetric, scale = (max(0,max) -\n"
"                        min(0,min)) / 15 and a 4-bit zero point per block)\n"
"  --exclude A,B,...     leave the nodes with these names alone (repeatable)\n"
"  -h, --help            this help\n"
"\n"
"int8 static quantization to the ONNX QDQ form: 'wlower quantize --int8 --help'.\n"
"\n"
"exit status: 0 success, 1 bad input, 2 usage error\n";

typedef struct QuantOpts {
	int bits, block;
	bool symmetric;
	char **exclude; bool *excl_used; int nexclude;
} QuantOpts;

typedef struct Quantized {
	const Value *w;
	bool transposed;
	Value *q, *scales, *zp;
} Quantized;

typedef struct QuantState {
	Module *m;
	const QuantOpts *o;
	Quantized *done; int ndone, capdone;
	int matmuls, rewritten, nonconst;
	char kept[512];             /* "'n' (why), ..." for the summary */
	int nkept;
} QuantState;

/* ---------------------------------------------------------------- match */

static const char WHY_NOT_CONST[] = "weight is not a constant";

typedef struct MatchNBits {
	Node *mm;
	Value *a, *w;          /* w: the initializer ([K, N], or [N, K] when transposed) */
	bool transposed;       /* the MatMul reads Transpose(w) */
	int64_t K, N;
} MatchNBits;

/* w = Transpose<perm = [1, 0]>(E) with E an initializer: E, else NULL. */
static Value *transposed_init(const Value *w)
{
	const Node *t = w->producer;
	if (!t || t->op != OP_Transpose || t->ninputs != 1 || !t->inputs[0] || !t->inputs[0]->init ||
	    t->inputs[0]->is_input || t->inputs[0]->init->ndim != 2)
		return NULL;
	const int64_t *perm;
	int np = attr_ints(t, "perm", &perm);
	if (node_attr(t, "perm") && !(np == 2 && perm[0] == 1 && perm[1] == 0))
		return NULL;
	return t->inputs[0];
}

static bool excluded(const QuantOpts *o, const Node *n)
{
	for (int i = 0; i < o->nexclude; i++)
		if (n->name && strcmp(n->name, o->exclude[i]) == 0) {
			o->excl_used[i] = true;
			return true;
		}
	return false;
}

/* Fills cap on a full match; otherwise returns false and sets *why (NULL:
 * not a MatMul at all). Changes nothing. */
static bool match_nbits(Node *n, const QuantOpts *o, MatchNBits *cap, const char **why)
{
	*why = NULL;
	if (n->op != OP_MatMul || n->ninputs != 2 || !n->inputs[0] || !n->inputs[1] ||
	    n->noutputs != 1 || !n->outputs[0])
		return false;
	Value *w = n->inputs[1], *e = transposed_init(w);
	bool tr = e != NULL;
	if (tr)
		w = e;
	const Tensor *t = w->init;
	if (excluded(o, n))
		return *why = "excluded", false;
	if (!t || w->is_input)
		return *why = WHY_NOT_CONST, false;
	if (t->dtype != DT_FLOAT)
		return *why = "weight is not float32", false;
	if (t->ndim != 2)
		return *why = "weight is not 2-D", false;
	if (t->dims[0] <= 0 || t->dims[1] <= 0 || !t->data ||
	    t->nbytes < (size_t)(t->dims[0] * t->dims[1]) * sizeof(float))
		return *why = "weight is empty", false;
	*cap = (MatchNBits){.mm = n, .a = n->inputs[0], .w = w, .transposed = tr,
	                    .K = t->dims[tr ? 1 : 0], .N = t->dims[tr ? 0 : 1]};
	return true;
}

/* ---------------------------------------------------------------- numerics */

static inline float load_f32(const unsigned char *p, int64_t i)
{
	float v;
	memcpy(&v, p + 4 * i, sizeof v);
	return v;
}

/* One row block [k0, k1) of W [K, N] into q/scales/zp (see the top of the
 * file); w holds W's rows from row w0 on (0: all of W). No fused
 * multiply-add: the rounding must be onnxruntime's. */
__attribute__((optimize("fp-contract=off")))
static void quantize_rows(const unsigned char *w, int64_t w0, int64_t N, int64_t k0, int64_t k1, int64_t b,
                          int64_t kb, int bs, bool sym, float *mn, float *mx,
                          uint8_t *q, float *scales, uint8_t *zp)
{
	for (int64_t n = 0; n < N; n++) {
		mn[n] = 3.402823466e+38f;
		mx[n] = -3.402823466e+38f;
	}
	for (int64_t k = k0; k < k1; k++)
		for (int64_t n = 0; n < N; n++) {
			float v = load_f32(w, (k - w0) * N + n);
			if (v < mn[n]) mn[n] = v;
			if (v > mx[n]) mx[n] = v;
		}
	int64_t zb = (kb + 1) / 2, row_bytes = kb * bs / 2;
	for (int64_t n = 0; n < N; n++) {
		float scale;
		uint8_t z;
		if (sym) {
			float v = fabsf(mx[n]) > fabsf(mn[n]) ? mx[n] : mn[n];
			scale = v / -8.0f;
			z = 8;
		} else {
			float lo = mn[n] < 0.0f ? mn[n] : 0.0f, hi = mx[n] > 0.0f ? mx[n] : 0.0f;
			scale = (hi - lo) / 15.0f;
			float zf = lo;
			if (scale != 0.0f)
				zf = 0.0f - lo / scale;
			z = zf < 0.0f ? 0 : zf > 15.0f ? 15 : (uint8_t)roundf(zf);
			uint8_t *zbyte = &zp[n * zb + b / 2];
			if (b % 2 == 0)
				*zbyte = (uint8_t)((*zbyte & 0xf0) | z);
			else
				*zbyte = (uint8_t)((*zbyte & 0x0f) | (z << 4));
		}
		scales[n * kb + b] = scale;
		float r = scale != 0.0f ? 1.0f / scale : 0.0f;
		uint8_t *col = q + n * row_bytes;
		for (int64_t k = k0; k < k1; k++) {
			float v = load_f32(w, (k - w0) * N + n);
			float t = v * r;
			t = t + (float)z;
			float qf = roundf(t);
			qf = qf < 0.0f ? 0.0f : qf > 15.0f ? 15.0f : qf;
			uint8_t qi = (uint8_t)qf;
			if (k % 2 == 0)
				col[k / 2] = (uint8_t)((col[k / 2] & 0xf0) | qi);
			else
				col[k / 2] = (uint8_t)((col[k / 2] & 0x0f) | (qi << 4));
		}
		if (k1 % 2 == 1 && k1 < k0 + bs)   /* K odd: the last row's partner holds zp */
			col[k1 / 2] = (uint8_t)((col[k1 / 2] & 0x0f) | (z << 4));
	}
}

/* ---------------------------------------------------------------- rewrite */

static Value *new_init(Graph *g, const char *base, const char *suffix, int dtype, int ndim,
                       const int64_t *dims, void **data)
{
	Arena *a = g->mod->arena;
	char *hint = arena_printf(a, "%s%s", base, suffix);
	Value *v = graph_new_value(g, hint);
	Tensor *t = tensor_new(a, v->name, dtype, ndim, dims);
	*data = tensor_alloc_data(a, t);
	graph_set_init(g, v, t);
	return v;
}

/* tr: W is the transpose of w's [N, K] data (a tied LM head). */
static int quantize_weight(QuantState *s, Value *w, bool tr, Quantized *out, Diag *d)
{
	for (int i = 0; i < s->ndone; i++)
		if (s->done[i].w == w && s->done[i].transposed == tr) {
			*out = s->done[i];
			return WL_OK;
		}
	const Tensor *t = w->init;
	int64_t K = t->dims[tr ? 1 : 0], N = t->dims[tr ? 0 : 1];
	int bs = s->o->block;
	int64_t kb = (K + bs - 1) / bs;
	const unsigned char *src = t->data;
	for (int64_t i = 0; i < K * N; i++)
		if (!isfinite(load_f32(src, i)))
			return diag_fail(d, "%s: tensor '%s': non-finite weight at [%lld, %lld]; cannot quantize",
			                 s->m->path, w->name, (long long)(i / t->dims[1]), (long long)(i % t->dims[1]));
	/* transposed: W[k, n] = w[n, k], one block of rows of W at a time */
	unsigned char *tbuf = tr ? wl_xmalloc((size_t)(bs * N) * sizeof(float)) : NULL;
	Graph *g = w->graph;
	Quantized qz = {.w = w, .transposed = tr};
	void *qd, *sd, *zd = NULL;
	int64_t qdims[3] = {N, kb, bs / 2}, sdims[2] = {N, kb}, zdims[1] = {N * ((kb + 1) / 2)};
	char suffix[16];
	snprintf(suffix, sizeof suffix, "_Q%d", s->o->bits);
	const char *base = tr ? arena_printf(g->mod->arena, "%s_T", w->name) : w->name;
	qz.q = new_init(g, base, suffix, DT_UINT8, 3, qdims, &qd);
	qz.scales = new_init(g, base, "_scales", DT_FLOAT, 2, sdims, &sd);
	if (!s->o->symmetric) {
		qz.zp = new_init(g, base, "_zero_points", DT_UINT8, 1, zdims, &zd);
		memset(zd, 0x88, (size_t)zdims[0]);   /* nibbles of absent odd blocks stay 8 */
	}
	float *mn = malloc((size_t)N * sizeof *mn), *mx = malloc((size_t)N * sizeof *mx);
	if (!mn || !mx)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int64_t b = 0; b < kb; b++) {
		int64_t k0 = b * bs, k1 = k0 + bs < K ? k0 + bs : K;
		if (tr)
			for (int64_t n = 0; n < N; n++)
				for (int64_t k = k0; k < k1; k++)
					memcpy(tbuf + 4 * ((k - k0) * N + n), src + 4 * (n * K + k), 4);
		quantize_rows(tr ? tbuf : src, tr ? k0 : 0, N, k0, k1, b, kb, bs, s->o->symmetric, mn, mx, qd, sd, zd);
	}
	free(mn);
	free(mx);
	free(tbuf);
	if (s->ndone == s->capdone) {
		s->capdone = s->capdone ? 2 * s->capdone : 16;
		s->done = realloc(s->done, (size_t)s->capdone * sizeof *s->done);
		if (!s->done)
			wl_die(__FILE__, __LINE__, "out of memory");
	}
	s->done[s->ndone++] = qz;
	*out = qz;
	return WL_OK;
}

static int rewrite_nbits(QuantState *s, const MatchNBits *c, Diag *d)
{
	Quantized qz = {0};
	if (quantize_weight(s, c->w, c->transposed, &qz, d) != WL_OK)
		return WL_ERR;
	Node *mm = c->mm;
	Value *wt = mm->inputs[1];          /* Transpose(w) when transposed */
	Graph *g = mm->graph;
	const char *name = mm->name && *mm->name
		? arena_printf(s->m->arena, "%s_Q%d", mm->name, s->o->bits) : "";
	Node *nn = node_new(g, "MatMulNBits", "com.microsoft", name);
	node_add_input(nn, c->a);
	node_add_input(nn, qz.q);
	node_add_input(nn, qz.scales);
	if (qz.zp)
		node_add_input(nn, qz.zp);
	node_add_attr(nn, "K", AT_INT)->i = c->K;
	node_add_attr(nn, "N", AT_INT)->i = c->N;
	node_add_attr(nn, "bits", AT_INT)->i = s->o->bits;
	node_add_attr(nn, "block_size", AT_INT)->i = s->o->block;
	Value *y = mm->outputs[0];
	node_insert_before(mm, nn);
	node_remove(mm);
	node_add_output(nn, y);
	if (c->transposed && wt->nusers == 0 && !wt->is_output && wt->producer) {
		node_remove(wt->producer);
		wt->in_value_info = false;
	}
	Value *w = c->w;
	if (w->nusers == 0 && !w->is_output && !w->is_input)
		graph_remove_init(w->graph, w);
	return WL_OK;
}

static void note_kept(QuantState *s, const Node *n, const char *why)
{
	size_t l = strlen(s->kept);
	if (s->nkept < 6 && l + 64 < sizeof s->kept)
		snprintf(s->kept + l, sizeof s->kept - l, "%s'%.40s' (%s)", l ? ", " : "",
		         n->name && *n->name ? n->name : "<unnamed>", why);
	s->nkept++;
}

static int quantize_graph(QuantState *s, Graph *g, Diag *d)
{
	FOR_NODES_SAFE(g, n, nx) {
		FOR_SUBGRAPHS(n, sg)
			if (quantize_graph(s, sg, d) != WL_OK)
				return WL_ERR;
		MatchNBits cap;
		const char *why;
		if (match_nbits(n, s->o, &cap, &why)) {
			s->matmuls++;
			if (rewrite_nbits(s, &cap, d) != WL_OK)
				return WL_ERR;
			s->rewritten++;
		} else if (why) {
			s->matmuls++;
			if (strcmp(why, WHY_NOT_CONST) == 0)
				s->nonconst++;
			else
				note_kept(s, n, why);
		}
	}
	return WL_OK;
}

/* Names in --exclude that no node has. */
static bool name_exists(Graph *g, const char *name)
{
	FOR_NODES(g, n) {
		if (n->name && strcmp(n->name, name) == 0)
			return true;
		FOR_SUBGRAPHS(n, sg)
			if (name_exists(sg, name))
				return true;
	}
	return false;
}

/* ---------------------------------------------------------------- command */

static int add_excludes(QuantOpts *o, const char *list, int *cap)
{
	const char *p = list;
	if (!*p)
		return cmd_usage(CMD, "%s", "--exclude '': empty node name");
	while (*p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 0)
			return cmd_usage(CMD, "--exclude '%s': empty node name", list);
		if (o->nexclude == *cap) {
			*cap = *cap ? 2 * *cap : 8;
			o->exclude = realloc(o->exclude, (size_t)*cap * sizeof *o->exclude);
			o->excl_used = realloc(o->excl_used, (size_t)*cap * sizeof *o->excl_used);
			if (!o->exclude || !o->excl_used)
				wl_die(__FILE__, __LINE__, "out of memory");
		}
		o->exclude[o->nexclude] = strndup(p, n);
		o->excl_used[o->nexclude++] = false;
		p += n;
		if (*p == ',') {
			p++;
			if (!*p)
				return cmd_usage(CMD, "--exclude '%s': empty node name", list);
		}
	}
	return CMD_OK;
}

typedef struct QuantArgs {
	const char *out;
	long nbits, block;
	bool symmetric;
	OptList exclude;
} QuantArgs;

static const OptSpec quant_opts[] = {
	{"--output", "-o", OPT_STRING, offsetof(QuantArgs, out)},
	{"--nbits", NULL, OPT_INT, offsetof(QuantArgs, nbits), 1, 64},
	{"--block-size", NULL, OPT_INT, offsetof(QuantArgs, block), 1, 1 << 20},
	{"--exclude", NULL, OPT_LIST, offsetof(QuantArgs, exclude)},
	{"--symmetric", NULL, OPT_FLAG, offsetof(QuantArgs, symmetric)},
	OPT_END,
};

int cmd_quantize(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--int8") == 0)
			return cmd_quantize_int8(argc, argv);     /* cmd_quantize_int8.c */
	if (opt_help(argc, argv, usage_quantize))
		return CMD_OK;
	QuantOpts o = {.bits = 4, .block = 32};
	QuantArgs qa = {.nbits = 4, .block = 32};
	const char *model = NULL, *out = NULL;
	int rc = CMD_OK, cap_excl = 0;
	Module *m = NULL;
	Diag d = {0};
	QuantState s = {0};
	rc = opt_parse(CMD, quant_opts, argc, argv, &qa, &model, "model", NULL);
	out = qa.out;
	o.symmetric = qa.symmetric;
	if (rc == CMD_OK && qa.nbits != 4)
		rc = cmd_usage(CMD, "--nbits %ld: only 4 bits are supported", qa.nbits);
	if (rc == CMD_OK && (qa.block < 16 || (qa.block & (qa.block - 1)) != 0))
		rc = cmd_usage(CMD, "--block-size %ld: must be a power of two >= 16", qa.block);
	o.bits = (int)qa.nbits;
	o.block = (int)qa.block;
	for (int k = 0; rc == CMD_OK && k < qa.exclude.n; k++)
		rc = add_excludes(&o, qa.exclude.v[k], &cap_excl);
	opt_free_lists(quant_opts, &qa);
	if (rc == CMD_OK && !model)
		rc = cmd_usage(CMD, "no model given");
	if (rc == CMD_OK && !out)
		rc = cmd_usage(CMD, "no output given (-o OUT.onnx)");
	if (rc != CMD_OK)
		goto out;

	rc = CMD_BAD_INPUT;
	if (model_read(model, &m, &d) != WL_OK || ir_verify(m, &d) != WL_OK)
		goto fail;
	for (int i = 0; i < o.nexclude; i++)
		if (!name_exists(m->graph, o.exclude[i])) {
			diag_fail(&d, "%s: --exclude: no node named '%s'", model, o.exclude[i]);
			goto fail;
		}
	s = (QuantState){.m = m, .o = &o};
	if (quantize_graph(&s, m->graph, &d) != WL_OK)
		goto fail;
	if (s.rewritten)
		module_set_opset(m, "com.microsoft", 1);
	if (ir_verify(m, &d) != WL_OK) {
		diag_prefix(&d, "after quantization (internal error): ");
		goto fail;
	}
	if (str_ends_with(out, ".onnxtxt") || str_ends_with(out, ".onnxtext") || str_ends_with(out, ".txt")) {
		PrintOptions po = {0};
		if (text_print_file(m, out, &po, &d) != WL_OK)
			goto fail;
	} else {
		ExportOptions eo = {0};
		if (onnx_export_file(m, out, &eo, &d) != WL_OK)
			goto fail;
	}
	fprintf(stderr, "wlower quantize: %d of %d MatMul nodes -> MatMulNBits (%d bits, block %d, %s)",
	        s.rewritten, s.matmuls, o.bits, o.block, o.symmetric ? "symmetric" : "asymmetric");
	if (s.nonconst)
		fprintf(stderr, "; %d without a constant weight", s.nonconst);
	if (s.nkept)
		fprintf(stderr, "; kept %d: %s%s", s.nkept, s.kept, s.nkept > 6 ? ", ..." : "");
	fputc('\n', stderr);
	rc = CMD_OK;
	goto out;
fail:
	cmd_error(CMD, &d);
out:
	free(s.done);
	for (int i = 0; i < o.nexclude; i++)
		free(o.exclude[i]);
	free(o.exclude);
	free(o.excl_used);
	if (m)
		module_free(m);
	return rc;
}
