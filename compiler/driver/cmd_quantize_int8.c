/* cmd_quantize_int8.c — `wlower quantize --int8`: static post-training
 * quantization to the ONNX QDQ form (the flow of ONNX Runtime's
 * quantize_static with QuantFormat.QDQ, which the vendor's Qwen2 notebook
 * runs: ../shared/reference/README.md §2).
 *
 *   wlower quantize MODEL --int8 (--samples NAME=FILE.npy ... | --synthetic N) -o OUT.onnx
 *          [--per-channel] [--symmetric-activations | --asymmetric-activations]
 *          [--exclude NODE,...] [--exclude-op OP,...] [--calibration minmax|percentile|entropy]
 *          [--percentile P] [--weights-qdq] [--seed S] [--threads N]
 *
 * 1. Calibration: the float graph runs on every sample (the reference
 *    executor observed by tranges/calibrate.c, as `wlower calibrate`): a
 *    range per tensor, min/max or a percentile clip of |x|.
 * 2. Quantized nodes: MatMul, Gemm, Add, Mul, Softmax, Sigmoid (the op types
 *    quantize_static quantizes in a transformer block), minus --exclude
 *    (node names; one that names no node is an error) and --exclude-op (op
 *    types, and the fused patterns RMSNorm and LayerNorm: every node of each
 *    torch-decomposed norm that passes/match.c match_norm finds, the way the
 *    vendor's exclusion list names them by hand).
 * 3. Rewrite, for every float input of a quantized node:
 *      activation x (not a constant):  x_q = QuantizeLinear(x, s, z);
 *                                      x_dq = DequantizeLinear(x_q, s, z)
 *        one pair per tensor, shared by every quantized reader; other
 *        readers keep x. int8 with
 *          symmetric (default)  s = max(|min|, |max|) / 127, z = 0
 *          asymmetric           s = (max(max,0) - min(min,0)) / 255,
 *                               z = clamp(round(-128 - min(min,0) / s), -128, 127)
 *        (s = 1 when the range is 0), as quantize_static computes them.
 *      weight W (a constant float 2-D input B of MatMul, A or B of Gemm):
 *        symmetric int8, s = max|W| / 127 per tensor, or per output channel
 *        with --per-channel (MatMul: axis 1; Gemm: the N axis of B); the
 *        MatMul reads W_dq = DequantizeLinear(W_quantized int8, W_scale,
 *        W_zero_point), or, with --weights-qdq (AddQDQPairToWeight), the
 *        float W stays and W_dq = DequantizeLinear(QuantizeLinear(W)).
 *    Constant inputs of Add/Mul/Softmax/Sigmoid, Gemm's bias and values
 *    computed from constants only (no graph input upstream: a causal mask
 *    of -3.4e38 would take the whole int8 range) stay float.
 * 4. Output: OUT (binary .onnx, or .onnxtxt) and OUT.tranges: the range of
 *    every calibrated tensor that was not quantized (what stays float), in
 *    the tranges format of docs/FORMATS.md, masks excepted: a tensor
 *    computed from constants only (a causal mask: the compiler folds it) or
 *    one whose range reaches |x| >= 1e30 (a finfo.min or -inf fill: the
 *    attention mask built from attention_mask, the masked scores) gets no
 *    range, since no fixed-point format holds -3.4e38 (the attention fusions
 *    take these tensors in; one left unfused is a "no range" error at
 *    compile time, naming it).
 *
 * The Constant nodes of the input become initializers and value types are
 * inferred (constant-to-initializer, shape-infer) before matching.
 * Bad input (exit 1, one line): samples of the wrong shape or dtype, an
 * --exclude name with no node, an integer input with --synthetic, a tensor
 * with no range (NaN in every sample), an opset below 13.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "compiler/driver/commands.h"
#include "passes/match.h"
#include "runtime/interp/interp.h"
#include "tranges/calibrate.h"

static const char CMD[] = "quantize";

static const char usage_int8[] =
"usage: wlower quantize MODEL --int8 (--samples NAME=FILE.npy ... | --synthetic N) -o OUT.onnx\n"
"       [--per-channel] [--symmetric-activations | --asymmetric-activations] [--exclude NODE,...]\n"
"       [--exclude-op OP,...] [--calibration minmax|percentile|entropy] [--percentile P] [--weights-qdq]\n"
"\n"
"Static int8 post-training quantization to the ONNX QDQ form: QuantizeLinear/\n"
"DequantizeLinear pairs on the float inputs of MatMul, Gemm, Add, Mul, Softmax and\n"
"Sigmoid nodes (activations calibrated on the samples), int8 weights with their\n"
"scales for constant MatMul/Gemm weights; OUT.tranges gets the range of every\n"
"tensor that stays float, masks excepted (computed from constants only, or holding\n"
"a finfo.min fill: no fixed-point format holds -3.4e38).\n"
"\n"
"  -o, --output OUT       the quantized model: .onnx (binary) or .onnxtxt (text)\n"
"  --samples NAME=FILE    calibration samples of input NAME, [S, *input] or, when the\n"
"                         input's first dim is 1, [S, *input[1:]] (as wlower calibrate)\n"
"  --synthetic N          N seeded N(0,1) samples for every (float) input instead\n"
"  --seed S               seed of --synthetic (default 0)\n"
"  --per-channel          weight scales per output channel (default: per tensor)\n"
"  --symmetric-activations   int8, zero point 0, scale max|x|/127 (the default)\n"
"  --asymmetric-activations  int8 with a zero point: scale (max-min)/255\n"
"  --exclude A,B,...      leave the nodes with these names float (repeatable)\n"
"  --exclude-op OP,...    leave every node of these op types float; RMSNorm and\n"
"                         LayerNorm name the nodes of each decomposed norm pattern\n"
"  --calibration C        minmax (default), percentile (clip |x| at --percentile P,\n"
"                         default 99.999) or entropy (the clip of least KL divergence\n"
"                         between |x|'s histogram and its 128-level quantization)\n"
"  --weights-qdq          keep float weights with QuantizeLinear/DequantizeLinear\n"
"                         pairs (AddQDQPairToWeight) instead of int8 initializers\n"
"  --threads N            threads for calibration (default: the online CPUs)\n"
"  -h, --help             this help\n"
"\n"
"exit status: 0 success, 1 bad input (one line naming file, node, tensor), 2 usage error\n";

typedef struct I8Samples {
	char *name;
	const char *file;
	RTensor all, view;
	bool loaded;
	const Value *input;
	size_t stride;
} I8Samples;

typedef struct I8Args {
	const char *model, *out, *calibration;
	OptList samples, exclude, exclude_op;
	long synthetic, seed, threads;
	double percentile;
	bool int8, per_channel, sym_act, asym_act, weights_qdq;
	I8Samples *given;           /* --samples, parsed (names malloc'ed) */
} I8Args;

static const OptSpec i8_opts[] = {
	{"--int8", NULL, OPT_FLAG, offsetof(I8Args, int8)},
	{"--output", "-o", OPT_STRING, offsetof(I8Args, out)},
	{"--samples", NULL, OPT_LIST, offsetof(I8Args, samples)},
	{"--synthetic", NULL, OPT_INT, offsetof(I8Args, synthetic), 1, 100000},
	{"--seed", NULL, OPT_INT, offsetof(I8Args, seed), 0, 2147483647},
	{"--per-channel", NULL, OPT_FLAG, offsetof(I8Args, per_channel)},
	{"--symmetric-activations", NULL, OPT_FLAG, offsetof(I8Args, sym_act)},
	{"--asymmetric-activations", NULL, OPT_FLAG, offsetof(I8Args, asym_act)},
	{"--exclude", NULL, OPT_LIST, offsetof(I8Args, exclude)},
	{"--exclude-op", NULL, OPT_LIST, offsetof(I8Args, exclude_op)},
	{"--calibration", NULL, OPT_STRING, offsetof(I8Args, calibration)},
	{"--percentile", NULL, OPT_REAL, offsetof(I8Args, percentile), 0, 100, true,
	 "%s: expected a number in (0, 100], got '%s'"},
	{"--weights-qdq", NULL, OPT_FLAG, offsetof(I8Args, weights_qdq)},
	{"--threads", NULL, OPT_INT, offsetof(I8Args, threads), 1, 1024},
	OPT_END,
};

/* ---------------------------------------------------------------- name lists */

typedef struct Names { char **v; bool *used; int n, cap; } Names;

static int names_add(Names *l, const char *opt, const char *list)
{
	const char *p = list;
	if (!*p)
		return cmd_usage(CMD, "%s '': empty name", opt);
	while (*p) {
		size_t n = strcspn(p, ",");
		if (n == 0)
			return cmd_usage(CMD, "%s '%s': empty name", opt, list);
		if (l->n == l->cap) {
			l->cap = l->cap ? 2 * l->cap : 8;
			l->v = realloc(l->v, (size_t)l->cap * sizeof *l->v);
			l->used = realloc(l->used, (size_t)l->cap * sizeof *l->used);
			if (!l->v || !l->used)
				wl_die(__FILE__, __LINE__, "out of memory");
		}
		l->v[l->n] = strndup(p, n);
		l->used[l->n++] = false;
		p += n;
		if (*p == ',' && !*++p)
			return cmd_usage(CMD, "%s '%s': empty name", opt, list);
	}
	return CMD_OK;
}

static void names_free(Names *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	free(l->used);
}

/* ---------------------------------------------------------------- node sets */

typedef struct NodeSet { const Node **v; int n, cap; } NodeSet;

static bool nodeset_has(const NodeSet *s, const Node *n)
{
	for (int i = 0; i < s->n; i++)
		if (s->v[i] == n)
			return true;
	return false;
}

static void nodeset_add(NodeSet *s, const Node *n)
{
	if (nodeset_has(s, n))
		return;
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->v = realloc(s->v, (size_t)s->cap * sizeof *s->v);
		if (!s->v)
			wl_die(__FILE__, __LINE__, "out of memory");
	}
	s->v[s->n++] = n;
}

/* ---------------------------------------------------------------- match */

static bool quantizable(Op op)
{
	return op == OP_MatMul || op == OP_Gemm || op == OP_Add || op == OP_Mul || op == OP_Softmax ||
	       op == OP_Sigmoid;
}

/* The excluded nodes: --exclude names, --exclude-op types and patterns.
 * Changes nothing in the graph. */
static int match_excluded(Graph *g, Names *ex, Names *exop, NodeSet *out, const char *model, Diag *d)
{
	FOR_NODES(g, n) {
		char op[96];
		node_op_name(n, op, sizeof op);
		for (int i = 0; i < ex->n; i++)
			if (n->name && strcmp(n->name, ex->v[i]) == 0) {
				ex->used[i] = true;
				nodeset_add(out, n);
			}
		for (int i = 0; i < exop->n; i++) {
			const char *t = exop->v[i];
			bool rms = strcmp(t, "RMSNorm") == 0, ln = strcmp(t, "LayerNorm") == 0 ||
			           strcmp(t, "LayerNormalization") == 0;
			NormMatch nm;
			if (strcmp(op, t) == 0 || (rms && (n->op == OP_WlRMSNorm || n->op == OP_MsSimplifiedLayerNormalization ||
			                                   n->op == OP_MsSkipSimplifiedLayerNormalization)) ||
			    (ln && (n->op == OP_LayerNormalization || n->op == OP_MsSkipLayerNormalization))) {
				exop->used[i] = true;
				nodeset_add(out, n);
			} else if ((rms && n->op == OP_Pow && n->ninputs == 2 && match_norm(n, true, &nm)) ||
			           (ln && n->op == OP_ReduceMean && match_norm(n, false, &nm))) {
				exop->used[i] = true;
				for (int k = 0; k < nm.set.nn; k++)
					nodeset_add(out, nm.set.nodes[k]);
			}
		}
	}
	for (int i = 0; i < ex->n; i++)
		if (!ex->used[i])
			return diag_fail(d, "%s: --exclude: no node named '%s'", model, ex->v[i]);
	return WL_OK;
}

/* A float weight input of a quantized node: (slot, axis of the output
 * channels), or false. */
static bool weight_slot(const Node *n, int slot, int *axis)
{
	const Value *v = n->inputs[slot];
	if (!v->init || v->init->dtype != DT_FLOAT || v->init->ndim != 2 || !v->init->data)
		return false;
	if (n->op == OP_MatMul && slot == 1) {
		*axis = 1;
		return true;
	}
	if (n->op == OP_Gemm && slot < 2) {
		/* the N axis: B [K,N] (axis 1) or B^T [N,K] (axis 0); A^T's columns are M */
		bool tb = attr_int(n, "transB", 0) != 0, ta = attr_int(n, "transA", 0) != 0;
		*axis = slot == 1 ? (tb ? 0 : 1) : (ta ? 1 : 0);
		return true;
	}
	return false;
}

static bool float_tensor(const Value *v)
{
	return v && v->type.kind == TY_TENSOR && v->type.elem == DT_FLOAT;
}

/* ---------------------------------------------------------------- numerics */

/* quantize_static's compute_scale_zp for int8 activations (commands.h). */
QParams act_params(double lo, double hi, bool sym)
{
	QParams q = {1.0f, 0};
	double rmin = lo < 0 ? lo : 0, rmax = hi > 0 ? hi : 0;
	if (sym) {
		double a = fabs(rmin) > fabs(rmax) ? fabs(rmin) : fabs(rmax);
		float s = (float)(a / 127.0);
		q.scale = s > 0 && isfinite(s) ? s : 1.0f;
		return q;
	}
	float s = (float)((rmax - rmin) / 255.0);
	if (!(s > 0) || !isfinite(s))
		return q;
	q.scale = s;
	double z = rint(-128.0 - rmin / s);
	q.zp = (int8_t)(z < -128 ? -128 : z > 127 ? 127 : z);
	return q;
}

static inline float ld_f32(const void *p, int64_t i)
{
	float v;
	memcpy(&v, (const char *)p + 4 * i, 4);
	return v;
}

/* ---------------------------------------------------------------- rewrite */

typedef struct Pair { const Value *from; Value *dq; } Pair;

typedef struct I8State {
	Module *m;
	const I8Args *a;
	const TRanges *tr;
	const NodeSet *vary;        /* nodes whose outputs depend on a graph input */
	Pair *p; int np, cap;
	int nodes, acts, weights;
	const char *model;
} I8State;

static Value *pair_find(const I8State *s, const Value *v)
{
	for (int i = 0; i < s->np; i++)
		if (s->p[i].from == v)
			return s->p[i].dq;
	return NULL;
}

static void pair_add(I8State *s, const Value *v, Value *dq)
{
	if (s->np == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->p = realloc(s->p, (size_t)s->cap * sizeof *s->p);
		if (!s->p)
			wl_die(__FILE__, __LINE__, "out of memory");
	}
	s->p[s->np++] = (Pair){v, dq};
}

Value *new_const(Graph *g, const char *name, int dtype, int ndim, const int64_t *dims, void **data)
{
	Arena *ar = g->mod->arena;
	Value *v = graph_new_value(g, name);
	Tensor *t = tensor_new(ar, v->name, dtype, ndim, dims);
	*data = tensor_alloc_data(ar, t);
	graph_set_init(g, v, t);
	type_set_tensor(ar, &v->type, dtype, ndim, dims);
	return v;
}

static Value *new_like(Graph *g, const Value *v, const char *suffix, int dtype)
{
	Arena *ar = g->mod->arena;
	Value *o = graph_new_value(g, arena_printf(ar, "%s%s", v->name, suffix));
	o->type = type_copy(ar, &v->type);
	o->type.elem = dtype;
	return o;
}

/* q = QuantizeLinear(x, s, z) (when x is given) and y = DequantizeLinear(q, s, z),
 * inserted after `after` (NULL: at the start of g). */
Value *insert_qdq(Graph *g, Node *after, Value *x, Value *q, Value *sc, Value *zp, int axis,
                         const Value *like)
{
	Arena *ar = g->mod->arena;
	Node *qn = NULL;
	if (x) {
		q = new_like(g, like, "_QuantizeLinear_Output", DT_INT8);
		qn = node_new(g, "QuantizeLinear", "", arena_printf(ar, "%s_QuantizeLinear", like->name));
		node_add_input(qn, x);
		node_add_input(qn, sc);
		node_add_input(qn, zp);
		node_add_output(qn, q);
		if (axis >= 0)
			node_add_attr(qn, "axis", AT_INT)->i = axis;
		if (after)
			node_insert_after(after, qn);
		else if (g->first)
			node_insert_before(g->first, qn);
		else
			node_append(g, qn);
		after = qn;
	}
	Value *y = new_like(g, like, "_DequantizeLinear_Output", DT_FLOAT);
	Node *dn = node_new(g, "DequantizeLinear", "", arena_printf(ar, "%s_DequantizeLinear", like->name));
	node_add_input(dn, q);
	node_add_input(dn, sc);
	node_add_input(dn, zp);
	node_add_output(dn, y);
	if (axis >= 0)
		node_add_attr(dn, "axis", AT_INT)->i = axis;
	if (after)
		node_insert_after(after, dn);
	else if (g->first)
		node_insert_before(g->first, dn);
	else
		node_append(g, dn);
	return y;
}

static int quantize_activation(I8State *s, Node *user, Value *x, Value **out, Diag *d)
{
	if ((*out = pair_find(s, x)))
		return WL_OK;
	double lo, hi;
	if (tranges_require(s->tr, x->name, user->name, &lo, &hi, d) != WL_OK)
		return WL_ERR;
	QParams qp = act_params(lo, hi, !s->a->asym_act);
	Graph *g = user->graph;
	void *sd, *zd;
	Value *sc = new_const(g, arena_printf(g->mod->arena, "%s_scale", x->name), DT_FLOAT, 0, NULL, &sd);
	Value *zp = new_const(g, arena_printf(g->mod->arena, "%s_zero_point", x->name), DT_INT8, 0, NULL, &zd);
	memcpy(sd, &qp.scale, 4);
	memcpy(zd, &qp.zp, 1);
	*out = insert_qdq(g, x->producer, x, NULL, sc, zp, -1, x);
	pair_add(s, x, *out);
	s->acts++;
	return WL_OK;
}

__attribute__((optimize("fp-contract=off")))
static int quantize_weight(I8State *s, Node *user, Value *w, int axis, Value **out, Diag *d)
{
	if ((*out = pair_find(s, w)))
		return WL_OK;
	const Tensor *t = w->init;
	Graph *g = user->graph;
	Arena *ar = g->mod->arena;
	int64_t R = t->dims[0], C = t->dims[1], nch = s->a->per_channel ? t->dims[axis] : 1;
	for (int64_t i = 0; i < R * C; i++)
		if (!isfinite(ld_f32(t->data, i)))
			return diag_fail(d, "%s: tensor '%s': non-finite weight at [%lld, %lld]; cannot quantize", s->model,
			                 w->name, (long long)(i / C), (long long)(i % C));
	void *sd, *zd;
	int64_t cd[1] = {nch};
	Value *sc = new_const(g, arena_printf(ar, "%s_scale", w->name), DT_FLOAT, s->a->per_channel, cd, &sd);
	Value *zp = new_const(g, arena_printf(ar, "%s_zero_point", w->name), DT_INT8, s->a->per_channel, cd, &zd);
	float *scale = sd;
	for (int64_t c = 0; c < nch; c++)
		scale[c] = 0;
	for (int64_t i = 0; i < R * C; i++) {
		int64_t c = !s->a->per_channel ? 0 : axis == 1 ? i % C : i / C;
		float v = fabsf(ld_f32(t->data, i));
		if (v > scale[c])
			scale[c] = v;
	}
	for (int64_t c = 0; c < nch; c++) {
		float sv = scale[c] / 127.0f;
		scale[c] = sv > 0 ? sv : 1.0f;
	}
	Node *before = user->prev;
	if (s->a->weights_qdq) {
		*out = insert_qdq(g, before, w, NULL, sc, zp, s->a->per_channel ? axis : -1, w);
	} else {
		void *qd;
		int64_t dims[2] = {R, C};
		Value *q = new_const(g, arena_printf(ar, "%s_quantized", w->name), DT_INT8, 2, dims, &qd);
		int8_t *qv = qd;
		for (int64_t i = 0; i < R * C; i++) {
			int64_t c = !s->a->per_channel ? 0 : axis == 1 ? i % C : i / C;
			float r = rintf(ld_f32(t->data, i) / scale[c]);
			qv[i] = (int8_t)(r < -128 ? -128 : r > 127 ? 127 : r);
		}
		*out = insert_qdq(g, before, NULL, q, sc, zp, s->a->per_channel ? axis : -1, w);
	}
	pair_add(s, w, *out);
	s->weights++;
	return WL_OK;
}

/* Values that depend on a graph input (the rest are constants computed in
 * the graph, e.g. a causal mask filled with -3.4e38: they stay float). */
static void mark_varying(Graph *g, NodeSet *vary_nodes)
{
	FOR_NODES(g, n) {
		bool v = false;
		for (int i = 0; i < n->ninputs && !v; i++) {
			const Value *x = n->inputs[i];
			v = x && !x->init && (x->is_input || (x->producer && nodeset_has(vary_nodes, x->producer)));
		}
		if (v)
			nodeset_add(vary_nodes, n);
	}
}

/* A mask, not a value with a fixed-point range: computed from constants only
 * (a causal mask; the compiler folds it and reads its data), or holding a
 * finfo.min / -inf fill (an attention mask from attention_mask, the scores it
 * was added to): -3.4e38 takes no fixed-point format, and the attention
 * fusions absorb these tensors. */
static bool is_mask(const I8State *s, const Value *v, double lo, double hi)
{
	if (!v->is_input && !(v->producer && nodeset_has(s->vary, v->producer)))
		return true;
	return lo <= -1e30 || hi >= 1e30;
}

static int rewrite_int8(I8State *s, Node *n, Diag *d)
{
	bool any = false;
	for (int i = 0; i < n->ninputs; i++) {
		Value *v = n->inputs[i], *dq = NULL;
		if (!float_tensor(v) || (n->op == OP_Gemm && i == 2))
			continue;
		int axis;
		if (v->init) {
			if (!weight_slot(n, i, &axis))
				continue;
			if (quantize_weight(s, n, v, axis, &dq, d) != WL_OK)
				return WL_ERR;
		} else if (!v->is_input && !(v->producer && nodeset_has(s->vary, v->producer))) {
			continue;           /* computed from constants only */
		} else if (quantize_activation(s, n, v, &dq, d) != WL_OK) {
			return WL_ERR;
		}
		node_set_input(n, i, dq);
		any = true;
	}
	s->nodes += any;
	return WL_OK;
}

/* ---------------------------------------------------------------- samples */

/* xorshift64* and Box-Muller: the --synthetic samples. */
static double synth_normal(uint64_t *st)
{
	double u[2];
	for (int k = 0; k < 2; k++) {
		*st ^= *st >> 12;
		*st ^= *st << 25;
		*st ^= *st >> 27;
		u[k] = ((double)((*st * 2685821657736338717ull) >> 11) + 0.5) / 9007199254740992.0;
	}
	return sqrt(-2 * log(u[0])) * cos(2 * M_PI * u[1]);
}

static int64_t load_samples(Exec *e, const I8Args *a, I8Samples **out, int *nout, Diag *d)
{
	int n = exec_input_count(e);
	I8Samples *sm = calloc((size_t)n + 1, sizeof *sm);
	if (!sm)
		wl_die(__FILE__, __LINE__, "out of memory");
	*out = sm;
	*nout = n;
	int64_t S = -1;
	const char *s_file = NULL;
	if (a->synthetic) {
		uint64_t st = 0x9e3779b97f4a7c15ull ^ (uint64_t)a->seed;
		for (int i = 0; i < n; i++) {
			const Value *v = exec_input(e, i);
			char ty[256];
			sm[i].input = v;
			sm[i].name = strdup(v->name);
			sm[i].file = "--synthetic";
			if (v->type.kind != TY_TENSOR || v->type.elem != DT_FLOAT || !type_shape_known(&v->type))
				return diag_fail(d, "%s: input '%s' (%s): --synthetic makes float32 inputs of a static shape "
				                 "only: give --samples %s=FILE.npy", a->model, v->name,
				                 cmd_describe_value(v, ty, sizeof ty), v->name);
			int64_t dims[RT_MAX_DIMS + 1] = {a->synthetic};
			for (int k = 0; k < v->type.rank; k++)
				dims[k + 1] = v->type.dims[k].value;
			rt_alloc(&sm[i].all, DT_FLOAT, v->type.rank + 1, dims);
			sm[i].loaded = true;
			float *f = sm[i].all.data;
			for (int64_t k = 0; k < rt_numel(&sm[i].all); k++)
				f[k] = (float)synth_normal(&st);
			if (cmd_sample_view(&sm[i].all, v, "--synthetic", v->name, a->model, &sm[i].view, &sm[i].stride, d))
				return WL_ERR;
		}
		return a->synthetic;
	}
	/* --samples NAME=FILE */
	for (int k = 0; k < a->samples.n; k++) {
		I8Samples *g = &a->given[k];
		int idx = -1;
		for (int i = 0; i < n; i++)
			if (strcmp(exec_input(e, i)->name, g->name) == 0)
				idx = i;
		if (idx < 0)
			return diag_fail(d, "%s: input '%s' is not an input of %s", g->file, g->name, a->model);
		sm[idx].name = strdup(g->name);
		sm[idx].file = g->file;
		sm[idx].input = exec_input(e, idx);
	}
	for (int i = 0; i < n; i++) {
		I8Samples *s = &sm[i];
		const Value *v = exec_input(e, i);
		if (!s->input) {
			char ty[256];
			return diag_fail(d, "%s: input '%s' (%s) has no samples: add --samples %s=FILE.npy", a->model, v->name,
			                 cmd_describe_value(v, ty, sizeof ty), v->name);
		}
		if (npy_read(s->file, &s->all, d) != WL_OK) {
			diag_prefix(d, "samples for input '%s': ", s->name);
			return WL_ERR;
		}
		s->loaded = true;
		if (cmd_sample_view(&s->all, v, s->file, s->name, a->model, &s->view, &s->stride, d) != WL_OK)
			return WL_ERR;
		if (S >= 0 && s->all.dims[0] != S)
			return diag_fail(d, "%s: %lld samples for input '%s', but %s has %lld", s->file,
			                 (long long)s->all.dims[0], s->name, s_file, (long long)S);
		S = s->all.dims[0];
		s_file = s->file;
	}
	if (S == 0)
		return diag_fail(d, "%s: no samples (the first axis is 0)", s_file);
	return S;
}

/* --calibration entropy: a second pass over the samples collects, per
 * tensor, a histogram of |x| in HBINS bins over [0, max(|min|, |max|)] of
 * the min/max pass; the clip threshold is the one whose 128-level
 * quantization of the clipped histogram has the least KL divergence from it
 * (TensorRT's entropy calibration): for i = 128 .. HBINS, P = hist[0, i) with
 * (in steps of 16 bins) the mass beyond added to bin i-1, Q = hist[0, i) merged into 128 groups and spread
 * back over each group's non-empty bins; threshold (i + 0.5) * width.
 * The range becomes [max(min, -t), min(max, t)]. */
enum { HBINS = 2048, QLEVELS = 128, HSTEP = 16 };

typedef struct Hist {
	const TRanges *tr;
	double *width;              /* per value id: bin width (0: none) */
	double (*h)[HBINS];         /* per value id */
	int n;
} Hist;

static void hist_observe(void *ctx, const Value *v, const RTensor *t)
{
	Hist *H = ctx;
	if (!v || v->id < 0 || v->id >= H->n || t->dtype != DT_FLOAT)
		return;
	double lo, hi;
	if (!H->width[v->id]) {
		if (!v->name || !tranges_get(H->tr, v->name, &lo, &hi))
			return;
		double a = fabs(lo) > fabs(hi) ? fabs(lo) : fabs(hi);
		if (!(a > 0))
			return;
		H->width[v->id] = a / HBINS;
	}
	double w = H->width[v->id];
	double *h = H->h[v->id];
	int64_t n = rt_numel(t);
	for (int64_t i = 0; i < n; i++) {
		float x = ld_f32(t->data, i);
		if (x != x)
			continue;
		double b = fabs(x) / w;
		h[b >= HBINS - 1 ? HBINS - 1 : (int)b] += 1;
	}
}

/* The KL-optimal clip threshold of one histogram (see above). */
static double kl_threshold(const double *h, double width)
{
	double best = INFINITY, bt = HBINS * width;
	static double P[HBINS], Q[HBINS], suffix[HBINS + 1];
	suffix[HBINS] = 0;
	for (int k = HBINS - 1; k >= 0; k--)
		suffix[k] = suffix[k + 1] + h[k];
	for (int i = QLEVELS; i <= HBINS; i += HSTEP) {
		for (int k = 0; k < i; k++)
			P[k] = h[k];
		P[i - 1] += suffix[i];
		/* Q: hist[0, i) merged into QLEVELS groups, spread over non-empty bins */
		for (int g = 0; g < QLEVELS; g++) {
			int a = (int)((int64_t)g * i / QLEVELS), b = (int)((int64_t)(g + 1) * i / QLEVELS);
			double sum = 0;
			int nz = 0;
			for (int k = a; k < b; k++) {
				sum += h[k];
				nz += h[k] != 0;
			}
			for (int k = a; k < b; k++)
				Q[k] = h[k] != 0 ? sum / nz : 0;
		}
		double sp = 0, sq = 0;
		for (int k = 0; k < i; k++) {
			sp += P[k];
			sq += Q[k];
		}
		if (sp <= 0 || sq <= 0)
			continue;
		double kl = 0;
		for (int k = 0; k < i; k++) {
			if (P[k] == 0)
				continue;
			double p = P[k] / sp, q = Q[k] / sq;
			kl += q > 0 ? p * log(p / q) : p * 30;   /* an empty Q bin under mass: heavy penalty */
		}
		if (kl < best) {
			best = kl;
			bt = (i + 0.5) * width;
		}
	}
	return bt;
}

/* Ranges of every tensor over the samples. */
static TRanges *calibrate(Module *m, const I8Args *a, Diag *d)
{
	Exec *e = NULL;
	I8Samples *sm = NULL;
	int nsm = 0;
	Calib *c = NULL;
	TRanges *tr = NULL;
	bool pct = a->calibration && strcmp(a->calibration, "percentile") == 0;
	bool ent = a->calibration && strcmp(a->calibration, "entropy") == 0;
	double p = pct ? (a->percentile > 0 ? a->percentile : 99.999) : 100;
	if (exec_new(m, a->threads ? (int)a->threads : cmd_default_threads(), &e, d) != WL_OK)
		goto out;
	int64_t S = load_samples(e, a, &sm, &nsm, d);
	if (S < 0)
		goto out;
	c = calib_new(pct && p < 100);
	exec_set_observer(e, calib_observe, c);
	for (int64_t s = 0; s < S; s++) {
		for (int k = 0; k < nsm; k++) {
			sm[k].view.data = (char *)sm[k].all.data + (size_t)s * sm[k].stride;
			if (exec_bind(e, sm[k].name, &sm[k].view, d) != WL_OK) {
				size_t l = strlen(d->msg);
				snprintf(d->msg + l, sizeof d->msg - l, " (%s, sample %lld)", sm[k].file, (long long)s);
				goto out;
			}
			calib_observe(c, sm[k].input, &sm[k].view);
		}
		if (exec_run(e, d) != WL_OK) {
			diag_prefix(d, "sample %lld: ", (long long)s);
			goto out;
		}
	}
	CalibReport rep;
	tr = calib_collect(c, m, a->model, S, p, &rep);
	if (ent) {
		Hist H = {.tr = tr, .n = m->next_value_id};
		H.width = calloc((size_t)H.n + 1, sizeof *H.width);
		H.h = calloc((size_t)H.n + 1, sizeof *H.h);
		if (!H.width || !H.h)
			wl_die(__FILE__, __LINE__, "out of memory");
		exec_set_observer(e, hist_observe, &H);
		int erc = WL_OK;
		for (int64_t si = 0; si < S && erc == WL_OK; si++) {
			for (int k = 0; k < nsm && erc == WL_OK; k++) {
				sm[k].view.data = (char *)sm[k].all.data + (size_t)si * sm[k].stride;
				erc = exec_bind(e, sm[k].name, &sm[k].view, d);
				hist_observe(&H, sm[k].input, &sm[k].view);
			}
			if (erc == WL_OK)
				erc = exec_run(e, d);
		}
		for (int id = 0; erc == WL_OK && id < H.n; id++) {
			if (!H.width[id])
				continue;
			const Value *v = NULL;
			FOR_NODES(m->graph, nd)
				for (int j = 0; j < nd->noutputs && !v; j++)
					if (nd->outputs[j] && nd->outputs[j]->id == id)
						v = nd->outputs[j];
			for (int j = 0; j < m->graph->ninputs && !v; j++)
				if (m->graph->inputs[j]->id == id)
					v = m->graph->inputs[j];
			double lo, hi;
			if (!v || !tranges_get(tr, v->name, &lo, &hi))
				continue;
			double t = kl_threshold(H.h[id], H.width[id]);
			tranges_set(tr, v->name, lo > -t ? lo : -t, hi < t ? hi : t);
		}
		free(H.width);
		free(H.h);
		if (erc != WL_OK) {
			tranges_free(tr);
			tr = NULL;
			goto out;
		}
	}
	fprintf(stderr, "wlower quantize: calibrated on %lld samples (%s), %d tensors\n", (long long)S,
	        ent ? "entropy" : pct && p < 100 ? "percentile" : "minmax", tr->n);
out:
	if (e)
		exec_free(e);
	for (int k = 0; k < nsm; k++) {
		if (sm[k].loaded)
			rt_free(&sm[k].all);
		free(sm[k].name);
	}
	free(sm);
	calib_free(c);
	return tr;
}

/* ---------------------------------------------------------------- command */

int cmd_quantize_int8(int argc, char **argv)
{
	if (opt_help(argc, argv, usage_int8))
		return CMD_OK;
	I8Args a = {0};
	Names ex = {0}, exop = {0};
	NodeSet excl = {0}, vary = {0};
	Module *m = NULL;
	TRanges *tr = NULL, *fl = NULL;
	I8State s = {0};
	Diag d = {0};
	char *tpath = NULL;
	int rc = opt_parse(CMD, i8_opts, argc, argv, &a, &a.model, "model", NULL);
	if (rc == CMD_OK)
		rc = CMD_BINDINGS(CMD, "--samples", &a.samples, "samples for input '%s' given twice", &a.given);
	for (int k = 0; rc == CMD_OK && k < a.exclude.n; k++)
		rc = names_add(&ex, "--exclude", a.exclude.v[k]);
	for (int k = 0; rc == CMD_OK && k < a.exclude_op.n; k++)
		rc = names_add(&exop, "--exclude-op", a.exclude_op.v[k]);
	if (rc != CMD_OK)
		goto out;
	if (!a.model)
		rc = cmd_usage(CMD, "no model given");
	else if (!a.out)
		rc = cmd_usage(CMD, "no output given (-o OUT.onnx)");
	else if (!a.synthetic == !a.samples.n)
		rc = cmd_usage(CMD, "--int8: give calibration data: --samples NAME=FILE.npy ... or --synthetic N (not both)");
	else if (a.sym_act && a.asym_act)
		rc = cmd_usage(CMD, "--symmetric-activations and --asymmetric-activations exclude each other");
	else if (a.calibration && strcmp(a.calibration, "minmax") && strcmp(a.calibration, "percentile") &&
	         strcmp(a.calibration, "entropy"))
		rc = cmd_usage(CMD, "--calibration '%s': expected minmax, percentile or entropy", a.calibration);
	else if (a.percentile > 0 && !(a.calibration && strcmp(a.calibration, "percentile") == 0))
		rc = cmd_usage(CMD, "--percentile needs --calibration percentile");
	if (rc != CMD_OK)
		goto out;

	rc = CMD_BAD_INPUT;
	if (model_read(a.model, &m, &d) != WL_OK || ir_verify(m, &d) != WL_OK)
		goto fail;
	if (module_opset(m, "") < 13) {
		diag_fail(&d, "%s: ai.onnx opset %lld: int8 QDQ needs opset 13 or later", a.model,
		          (long long)module_opset(m, ""));
		goto fail;
	}
	PassContext ctx = {.model_path = a.model};
	if (pass_constant_to_initializer(m, &ctx, &d) != WL_OK || pass_shape_infer(m, &ctx, &d) != WL_OK)
		goto fail;
	if (match_excluded(m->graph, &ex, &exop, &excl, a.model, &d) != WL_OK)
		goto fail;
	for (int i = 0; i < exop.n; i++)
		if (!exop.used[i])
			fprintf(stderr, "wlower quantize: note: --exclude-op %s: no node of %s is of it\n", exop.v[i], a.model);
	if (!(tr = calibrate(m, &a, &d)))
		goto fail;
	mark_varying(m->graph, &vary);
	s = (I8State){.m = m, .a = &a, .tr = tr, .model = a.model, .vary = &vary};
	FOR_NODES_SAFE(m->graph, n, nx) {
		if (!quantizable(n->op) || nodeset_has(&excl, n))
			continue;
		if (rewrite_int8(&s, n, &d) != WL_OK)
			goto fail;
	}
	if (ir_verify(m, &d) != WL_OK) {
		diag_prefix(&d, "after quantization (internal error): ");
		goto fail;
	}
	/* what stays float: every calibrated tensor without a QDQ pair, but masks */
	fl = tranges_new(a.out, tr->samples);
	int nmask = 0;
	for (int i = 0; i < tr->n; i++) {
		Value *v = graph_find(m->graph, tr->r[i].name);
		if (!v || !float_tensor(v) || pair_find(&s, v))
			continue;
		if (is_mask(&s, v, tr->r[i].min, tr->r[i].max)) {
			nmask++;
			continue;
		}
		tranges_set(fl, tr->r[i].name, tr->r[i].min, tr->r[i].max);
	}
	if (nmask)
		fprintf(stderr, "wlower quantize: note: %d mask tensors (computed from constants, or holding a "
		        "finfo.min fill) get no range in the tranges\n", nmask);
	tpath = malloc(strlen(a.out) + 9);
	if (!tpath)
		wl_die(__FILE__, __LINE__, "out of memory");
	sprintf(tpath, "%s.tranges", a.out);
	if (str_ends_with(a.out, ".onnxtxt") || str_ends_with(a.out, ".onnxtext") || str_ends_with(a.out, ".txt")) {
		PrintOptions po = {0};
		if (text_print_file(m, a.out, &po, &d) != WL_OK)
			goto fail;
	} else {
		ExportOptions eo = {0};
		if (onnx_export_file(m, a.out, &eo, &d) != WL_OK)
			goto fail;
	}
	if (tranges_write(tpath, fl, &d) != WL_OK) {
		unlink(a.out);
		goto fail;
	}
	fprintf(stderr, "wlower quantize: int8 QDQ: %d nodes quantized (%d activations, %d weights%s%s), "
	        "%d excluded, %s activations; %d float tensors -> %s\n", s.nodes, s.acts, s.weights,
	        a.per_channel ? ", per channel" : "", a.weights_qdq ? ", QDQ pairs" : "", excl.n,
	        a.asym_act ? "asymmetric" : "symmetric", fl->n, tpath);
	rc = CMD_OK;
	goto out;
fail:
	cmd_error(CMD, &d);
out:
	free(tpath);
	free(s.p);
	free(excl.v);
	free(vary.v);
	names_free(&ex);
	names_free(&exop);
	tranges_free(tr);
	tranges_free(fl);
	for (int k = 0; a.given && k < a.samples.n; k++)
		free(a.given[k].name);
	free(a.given);
	opt_free_lists(i8_opts, &a);
	if (m)
		module_free(m);
	return rc;
}
