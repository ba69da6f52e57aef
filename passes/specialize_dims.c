/* specialize_dims.c — --dim NAME=N: symbolic dims become static, so that the
 * Shape/Gather/Concat chains of a dynamic export fold and fusion sees fixed
 * shapes (what onnxruntime's make_dynamic_shape_fixed does, at compile time).
 *
 *   g (int64[batch_size, sequence_length] input_ids,           --dim batch_size=1
 *      float[batch_size, 4, past_sequence_length, 8] past)     --dim sequence_length=1
 *     => (float[batch_size, past_sequence_length + sequence_length, 8] y)   --dim past_sequence_length=7
 *   →
 *   g (int64[1, 1] input_ids, float[1, 4, 7, 8] past) => (float[1, 8, 8] y)
 *
 * Every declared type in the main graph is rewritten: graph inputs and
 * outputs and value_info. A dim_param that is an expression of bound names
 * and integers joined by + - * (torch.onnx writes "past_sequence_length +
 * sequence_length"; evaluated left to right with * first) gets its value when
 * every name in it is bound. Dims whose names are not all bound stay
 * symbolic (compilation to a target then names them).
 *
 * Errors (naming the model): a --dim NAME that no graph input or output
 * uses (with the dims it has); an expression that evaluates to a value < 0
 * or overflows.
 *
 * requires  nothing (runs first, before shape-infer)
 * maintains topological order, use lists, every node
 * breaks    nothing (types only become more precise)
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include "passes.h"

/* The bound value of name[0..n), or -1. */
static int64_t bound(const PassContext *ctx, const char *name, size_t n)
{
	for (int i = 0; i < ctx->canon.ndims; i++)
		if (strlen(ctx->canon.dims[i].name) == n && memcmp(ctx->canon.dims[i].name, name, n) == 0)
			return ctx->canon.dims[i].value;
	return -1;
}

/* One term: an integer or a bound name. Returns false when unbound or malformed. */
static bool term(const PassContext *ctx, const char **s, int64_t *out)
{
	const char *p = *s;
	while (*p == ' ')
		p++;
	const char *b = p;
	if (isdigit((unsigned char)*p)) {
		int64_t v = 0;
		while (isdigit((unsigned char)*p)) {
			if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *p - '0', &v))
				return false;
			p++;
		}
		*out = v;
	} else {
		while (isalnum((unsigned char)*p) || *p == '_' || *p == '.')
			p++;
		if (p == b)
			return false;
		*out = bound(ctx, b, (size_t)(p - b));
		if (*out < 0)
			return false;
	}
	*s = p;
	return true;
}

/* Value of a dim_param expression over bound names; false when it has an
 * unbound name, is malformed or overflows (*overflow set for the last). */
static bool eval_dim(const PassContext *ctx, const char *s, int64_t *out, bool *overflow)
{
	int64_t sum = 0, prod;
	int sign = 1;
	*overflow = false;
	for (;;) {
		if (!term(ctx, &s, &prod))
			return false;
		while (*s == ' ')
			s++;
		while (*s == '*') {
			int64_t f;
			s++;
			if (!term(ctx, &s, &f))
				return false;
			if (__builtin_mul_overflow(prod, f, &prod))
				return !(*overflow = true);
			while (*s == ' ')
				s++;
		}
		if (__builtin_add_overflow(sum, sign * prod, &sum))
			return !(*overflow = true);
		if (!*s)
			break;
		if (*s != '+' && *s != '-')
			return false;
		sign = *s == '+' ? 1 : -1;
		s++;
	}
	*out = sum;
	return true;
}

/* Does dim_param s mention name (as a whole word)? */
static bool mentions(const char *s, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = strstr(s, name); p; p = strstr(p + 1, name)) {
		bool left = p == s || !(isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '.');
		bool right = !(isalnum((unsigned char)p[n]) || p[n] == '_' || p[n] == '.');
		if (left && right)
			return true;
	}
	return false;
}

static int specialize_type(Module *m, const PassContext *ctx, const Value *v, Type *t, Diag *d, int *changed)
{
	if (t->kind != TY_TENSOR || !t->has_shape)
		return WL_OK;
	for (int i = 0; i < t->rank; i++) {
		Dim *dm = &t->dims[i];
		if (dm->kind != DIM_PARAM || !dm->param)
			continue;
		int64_t val;
		bool overflow;
		if (!eval_dim(ctx, dm->param, &val, &overflow)) {
			if (overflow)
				return diag_fail(d, "%s: tensor '%s': dim %d '%s' overflows int64 with the --dim values",
				                 m->path, v->name, i, dm->param);
			continue;
		}
		if (val < 0)
			return diag_fail(d, "%s: tensor '%s': dim %d '%s' is %lld with the --dim values (must be >= 0)",
			                 m->path, v->name, i, dm->param, (long long)val);
		dm->kind = DIM_VALUE;
		dm->value = val;
		dm->param = NULL;
		(*changed)++;
	}
	return WL_OK;
}

/* The symbolic dims of the graph's inputs and outputs, comma-separated, into buf. */
static void list_params(const Graph *g, char *buf, size_t n)
{
	size_t k = 0;
	buf[0] = 0;
	for (int io = 0; io < 2; io++) {
		Value **vs = io ? g->outputs : g->inputs;
		int nv = io ? g->noutputs : g->ninputs;
		for (int i = 0; i < nv; i++) {
			const Type *t = &vs[i]->type;
			for (int j = 0; t->kind == TY_TENSOR && t->has_shape && j < t->rank; j++) {
				const char *p = t->dims[j].kind == DIM_PARAM ? t->dims[j].param : NULL;
				if (!p || strchr(p, ' ') || (k && mentions(buf, p)) || k + strlen(p) + 3 >= n)
					continue;
				k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? ", " : "", p);
			}
		}
	}
	if (!k)
		snprintf(buf, n, "none");
}

/* Every --dim name must appear in a graph input or output. */
static int check_names(Module *m, const PassContext *ctx, Diag *d)
{
	const Graph *g = m->graph;
	for (int b = 0; b < ctx->canon.ndims; b++) {
		const char *name = ctx->canon.dims[b].name;
		bool found = false;
		for (int io = 0; io < 2 && !found; io++) {
			Value **vs = io ? g->outputs : g->inputs;
			int nv = io ? g->noutputs : g->ninputs;
			for (int i = 0; i < nv && !found; i++) {
				const Type *t = &vs[i]->type;
				for (int j = 0; t->kind == TY_TENSOR && t->has_shape && j < t->rank && !found; j++)
					found = t->dims[j].kind == DIM_PARAM && t->dims[j].param &&
					        mentions(t->dims[j].param, name);
			}
		}
		if (!found) {
			char have[512];
			list_params(g, have, sizeof have);
			return diag_fail(d, "%s: --dim %s: no graph input or output has a dim named '%s' (symbolic dims: %s)",
			                 m->path, name, name, have);
		}
	}
	return WL_OK;
}

int pass_specialize_dims(Module *m, PassContext *ctx, Diag *d)
{
	if (ctx->canon.ndims == 0)
		return WL_OK;
	if (check_names(m, ctx, d) != WL_OK)
		return WL_ERR;
	Graph *g = m->graph;
	int changed = 0;
	for (int i = 0; i < g->nvalues; i++) {
		Value *v = g->values[i];
		if (specialize_type(m, ctx, v, &v->type, d, &changed) != WL_OK)
			return WL_ERR;
	}
	ctx->changed += changed;
	return WL_OK;
}
