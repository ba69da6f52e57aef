/* assign_fracbits.c — numerics: tranges → Value ranges → fractional bits.
 *
 * The one rule is documented in docs/numerics.md ("Fractional bits"); in
 * short, for a value with range [lo, hi]:
 *
 *   I = max(intBits(hi), intBitsNeg(-lo))      integer bits needed
 *   intBits(x)    = floor(log2(floor(x))) + 1  (0 for x < 1)
 *   intBitsNeg(x) = k if x == 2^k exactly (−2^k fits), else intBits(x)
 *   F = 31 − I                                 FixedPoint32<F>
 *   Add / Sub / Sum outputs (accumulations, residuals) and LayerNormalization /
 *   RMSNorm outputs (outlier features): F − 1 (1 guard bit)
 *
 * Which values: every float tensor of the main graph that is a graph input,
 * a graph output, or an input or output of a node, except initializers
 * (constants: the target chooses their packed format). Values that are
 * inputs or outputs of a WhisperAttention / GroupQueryAttention node with
 * fp16 = 1 are FRAC_FP16 (binary16 edges) and need no range. Non-float
 * values (int64 ids, int32 argmax ids, masks) keep FRAC_UNSET.
 *
 * Ranges come from the tranges, keyed by the ORIGINAL graph tensor names
 * (fusion keeps the names of the values that survive: a fused node's outputs
 * are the replaced subgraph's outputs). When a range is missing it is derived:
 *   Reshape, Transpose, Squeeze, Unsqueeze, Flatten, Identity, Cast to the same
 *     type: the input's range (data movement only);
 *   Gather of a constant table: the table's min/max;
 *   a graph input read by ai.wlower.LogMel (the waveform): [-1, 1]
 *     (normalized PCM; the runner quantizes saturating);
 *   a constant input of a derivation: its data's min/max;
 *   int8 edges (QDQ graphs, `wlower quantize --int8`): the float output of a
 *     DequantizeLinear (per-tensor constant scale s, zero point z) is
 *     [(qmin − z)·s, (qmax − z)·s] (a static bound: an int8 cannot leave it);
 *     a float value read by a QuantizeLinear (its tranges entry is left out by
 *     quantize --int8) gets the same interval of that quantizer: the range the
 *     int8 edge can represent, values beyond it saturate anyway.
 * Static bounds widen the calibrated range even when the tranges has one:
 * Gather of a constant table (calibration saw only some rows, e.g. token
 * embeddings) and Add/Sub of two static bounds (embedding + positional
 * table) give [table min, max] and the interval sum, joined with the
 * tranges' range.
 * Anything else is an error:
 *   "MODEL: no range for tensor 'T' (output of node 'N', op OP) in TRANGES".
 *
 * With ctx->numerics.print_fracbits the pass prints one row per value
 * (graph inputs, then node outputs in node order) to stdout: name, op,
 * range, format, where the range came from.
 *
 * requires  fuse (the fused graph), shape-infer types
 * maintains everything (sets Value.has_range/rmin/rmax/frac_bits only)
 * breaks    nothing
 * Does nothing without ctx->numerics.tranges_path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "passes.h"
#include "tranges/tranges.h"

enum { SRC_NONE, SRC_TRANGES, SRC_DERIVED, SRC_FP16 };

typedef struct Row {
	Value *v;
	const char *op;        /* producer op, "input" */
	int src;
	const char *why;       /* derivation: op it passed through, "LogMel waveform" ... */
} Row;

typedef struct FB {
	Module *m;
	const TRanges *tr;
	const char *model, *trpath;
	Row *rows; int nrows, cap;
	unsigned char *seen;   /* by Value.id: 1 assigned, 2 assigned with a static bound */
	int nseen;
} FB;

/* ---------------------------------------------------------------- the rule */

/* floor(log2(floor(x))) + 1, 0 for x < 1: bits left of the binary point for
 * a positive magnitude strictly below 2^intBits. */
static int int_bits(double x)
{
	if (!(x >= 1.0))
		return 0;
	double f = floor(x);
	int e;
	frexp(f, &e);          /* f = m·2^e, m in [0.5, 1): floor(log2 f) = e − 1 */
	return e;
}

/* The negative side: exactly −2^k fits in k integer bits (two's complement). */
static int int_bits_neg(double x)
{
	if (!(x >= 1.0))
		return 0;
	int e;
	double mant = frexp(x, &e);
	if (mant == 0.5)       /* x == 2^(e−1) */
		return e - 1;
	return int_bits(x);
}

/* Integer bits of [lo, hi]; -1 if it needs more than 31. */
static int range_int_bits(double lo, double hi)
{
	if (hi >= 2147483648.0 || lo < -2147483648.0)
		return -1;
	int a = int_bits(hi), b = int_bits_neg(-lo);
	return a > b ? a : b;
}

/* Outputs that take one guard bit (docs/numerics.md "Guard bits"). */
static bool is_accumulating(const Node *n)
{
	return n->op == OP_Add || n->op == OP_Sub || n->op == OP_Sum ||
	       n->op == OP_LayerNormalization || n->op == OP_WlRMSNorm;
}

static bool is_float(const Value *v)
{
	return v->type.kind == TY_TENSOR &&
	       (v->type.elem == DT_FLOAT || v->type.elem == DT_FLOAT16 || v->type.elem == DT_BFLOAT16 ||
	        v->type.elem == DT_DOUBLE);
}

static bool is_fp16_attention(const Node *n)
{
	return (n->op == OP_WlWhisperAttention || n->op == OP_WlGroupQueryAttention) &&
	       attr_int(n, "fp16", 0) == 1;
}

/* ---------------------------------------------------------------- helpers */

static const char *node_label(const Node *n, char *buf, size_t len)
{
	if (n->name && *n->name)
		return n->name;
	int k = 0;
	for (const Node *p = n->graph->first; p && p != n; p = p->next)
		k++;
	snprintf(buf, len, "#%d", k);
	return buf;
}

static const char *op_label(const Node *n)
{
	static char buf[256];
	if (!n->domain || !*n->domain || domain_is_default(n->domain))
		return n->op_type;
	snprintf(buf, sizeof buf, "%s.%s", n->domain, n->op_type);
	return buf;
}

static bool const_range(const Value *v, double *lo, double *hi)
{
	const Tensor *t = v->init;
	if (!t)
		return false;
	int64_t n = tensor_numel(t);
	if (n <= 0)
		return false;
	double a = INFINITY, b = -INFINITY;
	for (int64_t i = 0; i < n; i++) {
		double x = tensor_get_f64(t, i);
		if (!isfinite(x))
			continue;   /* masks of −inf: not representable anyway */
		if (x < a) a = x;
		if (x > b) b = x;
	}
	if (a > b)
		return false;
	*lo = a;
	*hi = b;
	return true;
}

static void add_row(FB *fb, Value *v, const char *op, int src, const char *why)
{
	if (fb->nrows == fb->cap) {
		fb->cap = fb->cap ? 2 * fb->cap : 64;
		fb->rows = realloc(fb->rows, (size_t)fb->cap * sizeof *fb->rows);
		if (!fb->rows)
			wl_die(__FILE__, __LINE__, "out of memory");
	}
	fb->rows[fb->nrows++] = (Row){v, op, src, why};
}

/* A value is an fp16 edge if an fp16 attention node reads or writes it. */
static bool is_fp16_edge(const Value *v)
{
	if (v->producer && is_fp16_attention(v->producer))
		return true;
	for (int i = 0; i < v->nusers; i++)
		if (v->users[i].node && is_fp16_attention(v->users[i].node))
			return true;
	return false;
}

static bool read_by_logmel(const Value *v)
{
	for (int i = 0; i < v->nusers; i++)
		if (v->users[i].node && v->users[i].node->op == OP_WlLogMel && v->users[i].slot == 0)
			return true;
	return false;
}

/* [(qmin − z)·s, (qmax − z)·s] of a Quantize/DequantizeLinear node with a
 * per-tensor constant scale s (input 1) and zero point z (input 2, absent: 0)
 * for the int8 / uint8 type q. */
static bool qdq_range(const Node *n, int q, double *lo, double *hi)
{
	if (n->ninputs < 2 || !n->inputs[1] || !n->inputs[1]->init || tensor_numel(n->inputs[1]->init) != 1)
		return false;
	double s = tensor_get_f64(n->inputs[1]->init, 0), z = 0;
	if (!(s > 0) || !isfinite(s))
		return false;
	if (n->ninputs > 2 && n->inputs[2]) {
		if (!n->inputs[2]->init || tensor_numel(n->inputs[2]->init) != 1)
			return false;
		z = tensor_get_f64(n->inputs[2]->init, 0);
	}
	double qmin, qmax;
	if (q == DT_INT8) {
		qmin = -128;
		qmax = 127;
	} else if (q == DT_UINT8) {
		qmin = 0;
		qmax = 255;
	} else {
		return false;
	}
	*lo = (qmin - z) * s;
	*hi = (qmax - z) * s;
	return true;
}

/* Range of an input of a derivation: a value already assigned, or a constant.
 * *bound: the range is a static bound (holds for every input of the model). */
static bool input_range(const FB *fb, const Value *v, double *lo, double *hi, bool *bound)
{
	if (!v)
		return false;
	if (v->init) {
		*bound = true;
		return const_range(v, lo, hi);
	}
	if (v->has_range) {
		*lo = v->rmin;
		*hi = v->rmax;
		*bound = v->id >= 0 && v->id < fb->nseen && fb->seen[v->id] == 2;
		return true;
	}
	return false;
}

/* The range of ai.wlower.QGather's rows: q · scale_r over every row of the
 * int8 table (ref_quant.c's product, in double). */
static bool qgather_range(const Node *n, double *lo, double *hi)
{
	const Tensor *t = n->ninputs > 1 && n->inputs[0] ? n->inputs[0]->init : NULL;
	const Tensor *s = t && n->inputs[1] ? n->inputs[1]->init : NULL;
	if (!t || !s || t->ndim != 2 || tensor_numel(s) != t->dims[0] || t->dims[0] * t->dims[1] <= 0)
		return false;
	double a = INFINITY, b = -INFINITY;
	for (int64_t r = 0; r < t->dims[0]; r++) {
		double sc = (float)tensor_get_f64(s, r);
		for (int64_t j = 0; j < t->dims[1]; j++) {
			double x = (double)(float)(tensor_get_f64(t, r * t->dims[1] + j) * sc);
			if (x < a) a = x;
			if (x > b) b = x;
		}
	}
	if (!isfinite(a) || !isfinite(b))
		return false;
	*lo = a;
	*hi = b;
	return true;
}

/* Derived range of a node output missing from the tranges. */
static bool derive(const FB *fb, const Value *v, double *lo, double *hi, const char **why, bool *bound)
{
	const Node *n = v->producer;
	*bound = false;
	if (!n)
		return false;
	switch (n->op) {
	case OP_Reshape: case OP_Transpose: case OP_Squeeze: case OP_Unsqueeze:
	case OP_Flatten: case OP_Identity:
		*why = n->op_type;
		return n->ninputs > 0 && input_range(fb, n->inputs[0], lo, hi, bound);
	case OP_Cast:
		*why = "Cast";
		return n->ninputs > 0 && n->inputs[0] && n->inputs[0]->type.elem == v->type.elem &&
		       input_range(fb, n->inputs[0], lo, hi, bound);
	case OP_Gather:
		*why = "Gather of a constant table";
		*bound = true;
		return n->ninputs > 0 && n->inputs[0] && n->inputs[0]->init && const_range(n->inputs[0], lo, hi);
	case OP_WlQGather:
		*why = "QGather of a constant int8 table";
		*bound = true;
		return qgather_range(n, lo, hi);
	case OP_DequantizeLinear:
		*why = "DequantizeLinear (int8 scale)";
		*bound = true;
		return qdq_range(n, n->ninputs > 0 && n->inputs[0] ? n->inputs[0]->type.elem : DT_UNDEFINED, lo, hi);
	default:
		return false;
	}
}

/* A float value read by a QuantizeLinear with a per-tensor constant scale:
 * the interval its int8 (uint8) output represents. */
static bool quantized_input_range(const Value *v, double *lo, double *hi, const char **why)
{
	for (int i = 0; i < v->nusers; i++) {
		const Node *u = v->users[i].node;
		if (!u || u->op != OP_QuantizeLinear || v->users[i].slot != 0 || u->noutputs < 1 || !u->outputs[0])
			continue;
		if (qdq_range(u, u->outputs[0]->type.elem, lo, hi)) {
			*why = "QuantizeLinear input (int8 scale)";
			return true;
		}
	}
	return false;
}

/* A static bound that must widen a calibrated range: Gather of a constant
 * table (calibration saw only some rows: token embeddings), and Add/Sub of
 * two static bounds (token embedding + positional table). */
static bool static_bound(const FB *fb, const Value *v, double *lo, double *hi, const char **why)
{
	const Node *n = v->producer;
	bool b0 = false, b1 = false;
	double l0, h0, l1, h1;
	if (!n)
		return false;
	if (n->op == OP_Gather && n->ninputs > 0 && n->inputs[0] && n->inputs[0]->init) {
		*why = "Gather of a constant table";
		return const_range(n->inputs[0], lo, hi);
	}
	if (n->op == OP_WlQGather) {
		*why = "QGather of a constant int8 table";
		return qgather_range(n, lo, hi);
	}
	if ((n->op == OP_Add || n->op == OP_Sub) && n->ninputs == 2 &&
	    input_range(fb, n->inputs[0], &l0, &h0, &b0) && b0 &&
	    input_range(fb, n->inputs[1], &l1, &h1, &b1) && b1) {
		*why = "sum of static bounds";
		if (n->op == OP_Add) {
			*lo = l0 + l1;
			*hi = h0 + h1;
		} else {
			*lo = l0 - h1;
			*hi = h0 - l1;
		}
		return true;
	}
	return false;
}

/* ---------------------------------------------------------------- assign */

static int assign(FB *fb, Value *v, Diag *d)
{
	if (!v || v->init || !is_float(v) || v->id < 0 || v->id >= fb->nseen || fb->seen[v->id])
		return WL_OK;
	fb->seen[v->id] = 1;
	const Node *p = v->producer;
	const char *op = p ? op_label(p) : v->is_input ? "input" : "outer";
	/* keep the op label: op_label's buffer is reused */
	const char *opc = arena_strdup(fb->m->arena, op);

	double lo, hi, blo, bhi;
	const char *why = NULL;
	int src = SRC_NONE;
	bool bound = false;
	if (static_bound(fb, v, &blo, &bhi, &why)) {
		/* the static bound, widened by the calibrated range if that is wider */
		bound = true;
		lo = blo;
		hi = bhi;
		src = SRC_DERIVED;
		double tl, th;
		if (tranges_get(fb->tr, v->name, &tl, &th)) {
			lo = fmin(lo, tl);
			hi = fmax(hi, th);
		}
	} else if (tranges_get(fb->tr, v->name, &lo, &hi))
		src = SRC_TRANGES;
	else if (derive(fb, v, &lo, &hi, &why, &bound))
		src = SRC_DERIVED;
	else if (quantized_input_range(v, &lo, &hi, &why))
		src = SRC_DERIVED;
	else if (!p && v->is_input && read_by_logmel(v)) {
		lo = -1.0;
		hi = 1.0;
		why = "LogMel waveform (normalized PCM)";
		src = SRC_DERIVED;
	}
	bool fp16 = is_fp16_edge(v);
	if (bound)
		fb->seen[v->id] = 2;
	if (src != SRC_NONE) {
		v->has_range = true;
		v->rmin = lo;
		v->rmax = hi;
	}
	if (fp16) {
		v->frac_bits = FRAC_FP16;
		add_row(fb, v, opc, src == SRC_NONE ? SRC_FP16 : src, why);
		return WL_OK;
	}
	if (src == SRC_NONE) {
		char buf[32];
		if (p)
			return diag_fail(d, "%s: no range for tensor '%s' (output of node '%s', op %s) in %s",
			                 fb->model, v->name, node_label(p, buf, sizeof buf), op_label(p), fb->trpath);
		return diag_fail(d, "%s: no range for tensor '%s' (graph input) in %s",
		                 fb->model, v->name, fb->trpath);
	}
	int ib = range_int_bits(lo, hi);
	int guard = p && is_accumulating(p) ? 1 : 0;
	if (ib < 0 || 31 - ib - guard < 0) {
		char buf[32];
		return diag_fail(d, "%s: tensor '%s'%s%s%s: range [%g, %g] in %s does not fit FixedPoint32 "
		                 "(needs %s integer bits)", fb->model, v->name,
		                 p ? " (output of node '" : "", p ? node_label(p, buf, sizeof buf) : "",
		                 p ? "')" : "", lo, hi, fb->trpath, ib < 0 ? "more than 31" : "31 plus a guard bit,");
	}
	v->frac_bits = 31 - ib - guard;
	add_row(fb, v, opc, src, why);
	return WL_OK;
}

/* ---------------------------------------------------------------- table */

static void format_range(const Value *v, char *buf, size_t len)
{
	if (v->has_range)
		snprintf(buf, len, "[%.6g, %.6g]", v->rmin, v->rmax);
	else
		snprintf(buf, len, "-");
}

static void format_fmt(const Value *v, char *buf, size_t len)
{
	if (v->frac_bits == FRAC_FP16)
		snprintf(buf, len, "fp16");
	else if (v->frac_bits == FRAC_F32)
		snprintf(buf, len, "f32");
	else
		snprintf(buf, len, "%d", v->frac_bits);
}

static void print_table(const FB *fb, FILE *f)
{
	int wn = 5, wo = 2, wr = 5;
	char r[96], fm[16];
	for (int i = 0; i < fb->nrows; i++) {
		const Row *w = &fb->rows[i];
		int l = (int)strlen(w->v->name);
		if (l > wn) wn = l;
		l = (int)strlen(w->op);
		if (l > wo) wo = l;
		format_range(w->v, r, sizeof r);
		l = (int)strlen(r);
		if (l > wr) wr = l;
	}
	fprintf(f, "# fractional bits: %s (%d values; docs/numerics.md)\n", fb->trpath, fb->nrows);
	fprintf(f, "%-*s  %-*s  %-*s  %4s  %s\n", wn, "value", wo, "op", wr, "range", "F", "from");
	for (int i = 0; i < fb->nrows; i++) {
		const Row *w = &fb->rows[i];
		format_range(w->v, r, sizeof r);
		format_fmt(w->v, fm, sizeof fm);
		const char *from = w->src == SRC_TRANGES ? "tranges" : w->src == SRC_FP16 ? "fp16 attention edge" : "derived";
		bool guard = w->v->producer && is_accumulating(w->v->producer) && w->v->frac_bits <= 31;
		fprintf(f, "%-*s  %-*s  %-*s  %4s  %s%s%s%s%s\n", wn, w->v->name, wo, w->op, wr, r, fm, from,
		        w->why ? ": " : "", w->why ? w->why : "",
		        w->v->frac_bits == FRAC_FP16 && w->src != SRC_FP16 ? ", fp16 attention edge" : "",
		        guard ? ", 1 guard bit" : "");
	}
	fflush(f);
}

/* ---------------------------------------------------------------- pass */

int pass_assign_fracbits(Module *m, PassContext *ctx, Diag *d)
{
	if (!ctx || !ctx->numerics.tranges_path)
		return WL_OK;
	TRanges *tr = NULL;
	if (tranges_read(ctx->numerics.tranges_path, &tr, d) != WL_OK)
		return WL_ERR;
	FB fb = {.m = m, .tr = tr, .trpath = ctx->numerics.tranges_path,
	         .model = ctx->model_path ? ctx->model_path : m->path ? m->path : "model"};
	fb.nseen = m->next_value_id > 0 ? m->next_value_id : 1;
	fb.seen = calloc((size_t)fb.nseen, 1);
	if (!fb.seen)
		wl_die(__FILE__, __LINE__, "out of memory");
	Graph *g = m->graph;
	int rc = WL_OK;
	for (int i = 0; rc == WL_OK && i < g->ninputs; i++)
		rc = assign(&fb, g->inputs[i], d);
	FOR_NODES(g, n) {
		/* inputs first: an outer or otherwise unvisited input value */
		for (int i = 0; rc == WL_OK && i < n->ninputs; i++)
			rc = assign(&fb, n->inputs[i], d);
		for (int i = 0; rc == WL_OK && i < n->noutputs; i++)
			rc = assign(&fb, n->outputs[i], d);
		if (rc != WL_OK)
			break;
	}
	for (int i = 0; rc == WL_OK && i < g->noutputs; i++)
		rc = assign(&fb, g->outputs[i], d);
	if (rc == WL_OK && ctx->numerics.print_fracbits)
		print_table(&fb, stdout);
	free(fb.rows);
	free(fb.seen);
	tranges_free(tr);
	return rc;
}
