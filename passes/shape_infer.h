/* shape_infer.h — internals of the shape-inference pass, one section per file:
 *
 *   shape_infer.c  the pass: driver, merging with declared types, messages,
 *                  elementwise ops, reductions, normalizations, MatMul, Gemm,
 *                  Conv, contrib attention ops
 *   shape_ops.c    shape and data-movement ops (Reshape, Slice, Gather,
 *                  Concat, Split, Expand, ...)
 *   shape_fold.c   the constant folder for small integer tensors
 *
 * Shapes are Sh: up to MAXR dims, each a value, a symbolic parameter or
 * unknown (ir.h's Dim); rank < 0 is an unknown rank. A folded tensor is a
 * CVal: its elements in row-major order, each a Dim too, so that the
 * contents of Shape(x) can hold x's symbolic dims.
 * Not part of passes.h: nothing outside these three files uses it.
 */
#ifndef WLOWER_SHAPE_INFER_H
#define WLOWER_SHAPE_INFER_H

#include <string.h>
#include "passes.h"

enum { MAXR = 16, MAXV = 64, MAXEW = 8, CV_MAX = 4096, FOLD_DEPTH = 48 };

typedef struct Sh { int r; Dim d[MAXR]; } Sh;      /* r < 0: rank unknown */
typedef struct CVal { int64_t n; Dim *e; } CVal;  /* contents, row-major */

typedef struct SI {
	Module *m;
	Diag *d;               /* NULL: quiet (the folder re-deriving a plan) */
	const char *path;
	Arena *tmp;            /* folded contents; freed with the SI */
	CVal **cv;             /* by Value.id; a sentinel once found not constant */
	int ncv;
	int changed;
} SI;

/* ---------------------------------------------------------------- dims */

static inline Dim dv(int64_t v) { Dim x = {0}; x.kind = DIM_VALUE; x.value = v; return x; }
static inline Dim du(void) { Dim x = {0}; return x; }
static inline bool known(Dim x) { return x.kind == DIM_VALUE; }
static inline bool isv(Dim x, int64_t v) { return x.kind == DIM_VALUE && x.value == v; }
static inline bool clash(Dim a, Dim b) { return known(a) && known(b) && a.value != b.value; }

static inline bool same(Dim a, Dim b)
{
	if (a.kind != b.kind || a.kind == DIM_UNKNOWN)
		return false;
	if (a.kind == DIM_VALUE)
		return a.value == b.value;
	return a.param && b.param && strcmp(a.param, b.param) == 0;
}

/* Two dims that must be equal: the more specific one. */
static inline Dim unify(Dim a, Dim b)
{
	return known(a) || (a.kind == DIM_PARAM && !known(b)) ? a : b;
}

static inline Dim dadd(Dim a, Dim b)
{
	if (known(a) && known(b)) return dv(a.value + b.value);
	if (isv(a, 0)) return b;
	if (isv(b, 0)) return a;
	return du();
}

static inline Dim dmul(Dim a, Dim b)
{
	if (known(a) && known(b)) return dv(a.value * b.value);
	if (isv(a, 1)) return b;
	if (isv(b, 1)) return a;
	if (isv(a, 0) || isv(b, 0)) return dv(0);
	return du();
}

static inline Dim ddiv(Dim a, int64_t b)
{
	return known(a) && b > 0 && a.value % b == 0 ? dv(a.value / b) : (b == 1 ? a : du());
}

static inline Dim dprod(const Dim *d, int n)
{
	Dim p = dv(1);
	for (int i = 0; i < n; i++)
		p = dmul(p, d[i]);
	return p;
}

/* ---------------------------------------------------------------- shapes of values */

static inline bool ty_sh(const Type *t, Sh *s)
{
	s->r = -1;
	if (t->kind != TY_TENSOR || !t->has_shape || t->rank > MAXR)
		return false;
	s->r = t->rank;
	for (int i = 0; i < t->rank; i++)
		s->d[i] = t->dims[i];
	return true;
}

static inline Value *in(const Node *n, int i) { return i >= 0 && i < n->ninputs ? n->inputs[i] : NULL; }
static inline bool ish(const Node *n, int i, Sh *s) { Value *v = in(n, i); s->r = -1; return v && ty_sh(&v->type, s); }
static inline const char *iname(const Node *n, int i) { Value *v = in(n, i); return v ? v->name : ""; }

static inline int ielem(const Node *n, int i)
{
	Value *v = in(n, i);
	return v && v->type.kind == TY_TENSOR ? v->type.elem : DT_UNDEFINED;
}

/* Shape of v when every dim is a value. */
static inline bool vsh_known(const Value *v, Sh *s)
{
	if (!v || !ty_sh(&v->type, s))
		return false;
	for (int i = 0; i < s->r; i++)
		if (!known(s->d[i]))
			return false;
	return true;
}

/* ---------------------------------------------------------------- shape_infer.c */

/* "float[N, 4]" (elem 0: the shape alone); rotating static buffers. */
const char *si_fty(int elem, const Sh *s);
const char *si_fsh(const Sh *s);
/* "FILE: node 'N' (Op): " + message; returns WL_ERR. */
int si_fail(SI *s, const Node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Normalizes axis ax against rank r, or fails naming input in_slot. */
int si_naxis(SI *s, const Node *n, int64_t ax, int r, int in_slot, int *out);
/* Merges an inferred type into output `slot`: declared values must agree,
 * declared symbolic/unknown dims take inferred values. elem 0: unknown. */
int si_set_out(SI *s, Node *n, int slot, int elem, const Sh *sh);
/* Multidirectional broadcast; an, bn name the operands in messages. */
int si_bcast(SI *s, Node *n, Sh *o, const Sh *a, const char *an, const Sh *b, const char *bn);
/* Inputs i and j must have the same element type (when both known). */
int si_same_elem(SI *s, Node *n, int i, int j);

/* ---------------------------------------------------------------- shape_ops.c */

/* Shape, Reshape, Slice, Gather, Concat, ...: WL_OK also for ops it does not
 * cover (their declared types stay). */
int si_infer_shape_op(SI *s, Node *n);
/* Shape's [start, end) for a rank-r input. */
void si_shape_range(const Node *n, int r, int64_t *st, int64_t *en);
/* Slice's per-axis start, step and length: 1 when its parameters are
 * constant, 0 when not (sliced dims then unknown in len), WL_ERR. */
int si_slice_plan(SI *s, Node *n, const Sh *a, int64_t *st, int64_t *sp, Dim *len);

/* ---------------------------------------------------------------- shape_fold.c */

/* Contents of v when known (initializer, or folded from its producer),
 * else NULL. Cached per value in s->cv. */
CVal *si_cval(SI *s, Value *v, int depth);
/* Input i's contents when all are values: count (<= max), else -1. */
int si_civals(SI *s, Node *n, int i, int64_t *out, int max);
/* Ints of attribute `name` (NULL: none), else of input `slot`: count;
 * -1 not constant; -2 neither present. */
int si_ints_of(SI *s, Node *n, const char *name, int slot, int64_t *out, int max);
/* A numeric scalar input (folded ints, or an initializer of any number type). */
bool si_scalar_of(SI *s, Node *n, int i, double *out);

#endif
