/* shape_fold.c — the constant folder of shape inference.
 *
 * Evaluates, on demand and without rewriting anything, the contents of small
 * integer and bool tensors (at most CV_MAX elements): initializers, and
 * outputs of Constant, Identity, Cast, Shape, Size, Gather, Concat, Slice,
 * Reshape, Squeeze, Unsqueeze, Flatten, Neg, Abs, Not, Add, Sub, Mul, Div,
 * Mod, Max, Min, Sum, Equal, Less, LessOrEqual, Greater, GreaterOrEqual, And,
 * Or, Xor, Where, Expand, ConstantOfShape and Range. Elements are Dims: the
 * contents of Shape(x) hold x's symbolic dims, and they flow through Gather,
 * Concat, Slice and Where into Reshape, Expand and ConstantOfShape targets.
 * Arithmetic on a symbolic element stays symbolic only where it is an
 * identity (N + 0, N * 1, N / 1); anything else becomes unknown. A symbolic
 * element is a dim, so it never equals a negative value (torch's
 * Where(Equal(shape, -1), ...) pattern resolves).
 * Results are cached per Value.id for the life of one SI; they live in
 * SI.tmp, not in the module's arena.
 */
#include "shape_infer.h"

static CVal not_const;
static bool int_elem(int e)
{
	return e == DT_INT64 || e == DT_INT32 || e == DT_INT16 || e == DT_INT8 || e == DT_UINT8 ||
	       e == DT_UINT16 || e == DT_UINT32 || e == DT_UINT64 || e == DT_BOOL;
}

static CVal *cv_new(SI *s, int64_t n)
{
	CVal *c = arena_alloc(s->tmp, sizeof *c);
	c->n = n;
	c->e = arena_alloc(s->tmp, (size_t)(n ? n : 1) * sizeof *c->e);
	return c;
}

static CVal *cv_tensor(SI *s, const Tensor *t)
{
	if (!t || !int_elem(t->dtype))
		return NULL;
	int64_t n = tensor_numel(t);
	if (n < 0 || n > CV_MAX || (n && (!t->data || t->nbytes < dtype_nbytes(t->dtype, n))))
		return NULL;
	CVal *c = cv_new(s, n);
	for (int64_t i = 0; i < n; i++)
		c->e[i] = dv(tensor_get_i64(t, i));
	return c;
}

/* Known int values of input i (all elements values): count or -1. */
int si_civals(SI *s, Node *n, int i, int64_t *out, int max)
{
	CVal *c = si_cval(s, in(n, i), 0);
	if (!c || c->n > max)
		return -1;
	for (int64_t k = 0; k < c->n; k++) {
		if (!known(c->e[k]))
			return -1;
		out[k] = c->e[k].value;
	}
	return (int)c->n;
}

/* Ints from attribute `name`, else from input `slot`: count; -1 not
 * constant; -2 neither present. */
int si_ints_of(SI *s, Node *n, const char *name, int slot, int64_t *out, int max)
{
	const int64_t *p;
	int k = name ? attr_ints(n, name, &p) : -1;
	if (k >= 0) {
		if (k > max)
			return -1;
		if (k)
			memcpy(out, p, (size_t)k * sizeof *out);
		return k;
	}
	if (!in(n, slot))
		return -2;
	return si_civals(s, n, slot, out, max);
}

/* A numeric scalar input: folded ints or an initializer of any number type. */
bool si_scalar_of(SI *s, Node *n, int i, double *out)
{
	Value *v = in(n, i);
	int64_t k;
	if (si_civals(s, n, i, &k, 1) == 1) {
		*out = (double)k;
		return true;
	}
	if (v && v->init && v->init->data && v->init->dtype != DT_STRING && tensor_numel(v->init) == 1) {
		*out = tensor_get_f64(v->init, 0);
		return true;
	}
	return false;
}

/* Index into an input of (known) shape `is` broadcast to `os`. */
static int64_t bindex(const Sh *os, const Sh *is, int64_t oi)
{
	int64_t ii = 0, stride = 1;
	for (int k = os->r - 1, j = is->r - 1; k >= 0; k--, j--) {
		int64_t ok = oi % os->d[k].value;
		oi /= os->d[k].value;
		if (j >= 0) {
			if (is->d[j].value != 1)
				ii += ok * stride;
			stride *= is->d[j].value;
		}
	}
	return ii;
}

static Dim ew(Op op, Dim x, Dim y)
{
	if (known(x) && known(y)) {
		int64_t a = x.value, b = y.value, r;
		switch (op) {
		case OP_Add: case OP_Sum: return dv((int64_t)((uint64_t)a + (uint64_t)b));
		case OP_Sub: return dv((int64_t)((uint64_t)a - (uint64_t)b));
		case OP_Mul: return dv((int64_t)((uint64_t)a * (uint64_t)b));
		case OP_Div:
			return b == 0 || (a == INT64_MIN && b == -1) ? du() : dv(a / b);
		case OP_Mod:
			if (b == 0 || (a == INT64_MIN && b == -1)) return du();
			r = a % b;
			return dv(r && ((r < 0) != (b < 0)) ? r + b : r);
		case OP_Max: return dv(a > b ? a : b);
		case OP_Min: return dv(a < b ? a : b);
		case OP_Equal: return dv(a == b);
		case OP_Less: return dv(a < b);
		case OP_LessOrEqual: return dv(a <= b);
		case OP_Greater: return dv(a > b);
		case OP_GreaterOrEqual: return dv(a >= b);
		case OP_And: return dv(a && b);
		case OP_Or: return dv(a || b);
		case OP_Xor: return dv(!a != !b);
		default: return du();
		}
	}
	switch (op) {
	case OP_Add: case OP_Sum: case OP_Sub: case OP_Mul: case OP_Div:
		if (op == OP_Mul || op == OP_Add || op == OP_Sum) {
			Dim r = op == OP_Mul ? dmul(x, y) : dadd(x, y);
			if (r.kind != DIM_UNKNOWN) return r;
		}
		if ((op == OP_Sub && isv(y, 0)) || (op == OP_Div && isv(y, 1))) return x;
		return du();
	case OP_Max: case OP_Min: return same(x, y) ? x : du();
	case OP_Equal:   /* symbolic elements are dims: never negative */
		if ((x.kind == DIM_PARAM && isv(y, -1)) || (y.kind == DIM_PARAM && isv(x, -1)))
			return dv(0);
		return same(x, y) ? dv(1) : du();
	default: return du();
	}
}


/* Contents of output `slot` of n (shape os, numel N), or NULL. */
static CVal *fold(SI *s, Node *n, const Sh *os, int64_t N, int depth)
{
	CVal *a = NULL, *c = NULL, *x[MAXEW];
	Sh xs[MAXEW], is;
	Attr *at;
#define CV(i) si_cval(s, in(n, (i)), depth)
	switch (n->op) {
	case OP_Constant:
		if ((at = node_attr(n, "value")) && at->type == AT_TENSOR)
			return cv_tensor(s, at->t);
		if ((at = node_attr(n, "value_int")) && at->type == AT_INT) {
			c = cv_new(s, 1);
			c->e[0] = dv(at->i);
		} else if ((at = node_attr(n, "value_ints")) && at->type == AT_INTS) {
			c = cv_new(s, at->n);
			for (int i = 0; i < at->n; i++)
				c->e[i] = dv(at->ints[i]);
		}
		return c && c->n == N ? c : NULL;
	case OP_Identity: case OP_Reshape: case OP_Squeeze: case OP_Unsqueeze: case OP_Flatten:
		a = CV(0);
		return a && a->n == N ? a : NULL;
	case OP_Cast:
		if (!(a = CV(0)) || a->n != N)
			return NULL;
		if (attr_int(n, "to", 0) != DT_BOOL)
			return a;
		c = cv_new(s, N);
		for (int64_t i = 0; i < N; i++)
			c->e[i] = known(a->e[i]) ? dv(a->e[i].value != 0) : du();
		return c;
	case OP_Shape: {
		int64_t b, e;
		if (!ish(n, 0, &is))
			return NULL;
		si_shape_range(n, is.r, &b, &e);
		if (e - b != N)
			return NULL;
		c = cv_new(s, N);
		for (int64_t i = 0; i < N; i++)
			c->e[i] = is.d[b + i];
		return c;
	}
	case OP_Size:
		if (!ish(n, 0, &is) || N != 1)
			return NULL;
		c = cv_new(s, 1);
		c->e[0] = dprod(is.d, is.r);
		return c;
	case OP_Gather: {
		CVal *ix = CV(1);
		int ax;
		int64_t axis = attr_int(n, "axis", 0);
		if (!(a = CV(0)) || !ix || !vsh_known(in(n, 0), &is) || axis < -is.r || axis >= is.r)
			return NULL;
		ax = (int)(axis < 0 ? axis + is.r : axis);
		int64_t outer = 1, inner = 1, A = is.d[ax].value;
		for (int i = 0; i < is.r; i++)
			if (i != ax) *(i < ax ? &outer : &inner) *= is.d[i].value;
		if (outer * ix->n * inner != N)
			return NULL;
		c = cv_new(s, N);
		for (int64_t o = 0; o < outer; o++)
			for (int64_t j = 0; j < ix->n; j++) {
				if (!known(ix->e[j]))
					return NULL;
				int64_t v = ix->e[j].value < 0 ? ix->e[j].value + A : ix->e[j].value;
				if (v < 0 || v >= A)
					return NULL;
				for (int64_t k = 0; k < inner; k++)
					c->e[(o * ix->n + j) * inner + k] = a->e[(o * A + v) * inner + k];
			}
		return c;
	}
	case OP_Concat: {
		int64_t axis = attr_int(n, "axis", 0), outer = 1, inner = 1, off = 0;
		if (axis < -os->r || axis >= os->r)
			return NULL;
		int ax = (int)(axis < 0 ? axis + os->r : axis);
		for (int i = 0; i < os->r; i++)
			if (i != ax) *(i < ax ? &outer : &inner) *= os->d[i].value;
		int64_t A = os->d[ax].value;
		c = cv_new(s, N);
		for (int i = 0; i < n->ninputs; i++) {
			CVal *xi = CV(i);
			Sh sh;
			if (!xi || !vsh_known(in(n, i), &sh) || sh.r != os->r)
				return NULL;
			int64_t ai = sh.d[ax].value;
			if (off + ai > A || xi->n != outer * ai * inner)
				return NULL;
			for (int64_t o = 0; o < outer; o++)
				for (int64_t j = 0; j < ai * inner; j++)
					c->e[(o * A + off) * inner + j] = xi->e[o * ai * inner + j];
			off += ai;
		}
		return off == A ? c : NULL;
	}
	case OP_Slice: {
		int64_t st[MAXR], sp[MAXR];
		Dim len[MAXR];
		SI q = *s;
		q.d = NULL;
		if (!(a = CV(0)) || !vsh_known(in(n, 0), &is) || si_slice_plan(&q, n, &is, st, sp, len) != 1)
			return NULL;
		c = cv_new(s, N);
		for (int64_t o = 0; o < N; o++) {
			int64_t rem = o, src = 0, stride = 1;
			for (int k = os->r - 1; k >= 0; k--) {
				int64_t ik = rem % os->d[k].value;
				rem /= os->d[k].value;
				src += (st[k] + ik * sp[k]) * stride;
				stride *= is.d[k].value;
			}
			if (src < 0 || src >= a->n)
				return NULL;
			c->e[o] = a->e[src];
		}
		return c;
	}
	case OP_Neg: case OP_Abs: case OP_Not:
		if (!(a = CV(0)) || a->n != N)
			return NULL;
		c = cv_new(s, N);
		for (int64_t i = 0; i < N; i++) {
			int64_t v = a->e[i].value;
			c->e[i] = !known(a->e[i]) ? du()
			        : dv(n->op == OP_Neg ? -v : n->op == OP_Abs ? (v < 0 ? -v : v) : !v);
		}
		return c;
	case OP_Add: case OP_Sub: case OP_Mul: case OP_Div: case OP_Mod: case OP_Max: case OP_Min:
	case OP_Sum: case OP_Equal: case OP_Less: case OP_LessOrEqual: case OP_Greater:
	case OP_GreaterOrEqual: case OP_And: case OP_Or: case OP_Xor: case OP_Where: case OP_Expand: {
		int k = n->op == OP_Expand ? 1 : n->ninputs;
		if (k < 1 || k > MAXEW)
			return NULL;
		for (int i = 0; i < k; i++)
			if (!(x[i] = CV(i)) || !vsh_known(in(n, i), &xs[i]))
				return NULL;
		c = cv_new(s, N);
		for (int64_t o = 0; o < N; o++) {
			Dim r = x[0]->e[bindex(os, &xs[0], o)];
			if (n->op == OP_Where) {
				Dim p = x[1]->e[bindex(os, &xs[1], o)], q = x[2]->e[bindex(os, &xs[2], o)];
				r = known(r) ? (r.value ? p : q) : same(p, q) ? p : du();
			} else
				for (int i = 1; i < k; i++)
					r = ew(n->op, r, x[i]->e[bindex(os, &xs[i], o)]);
			c->e[o] = r;
		}
		return c;
	}
	case OP_ConstantOfShape: {
		int64_t v = 0;
		if ((at = node_attr(n, "value")) && at->type == AT_TENSOR && at->t) {
			if (!int_elem(at->t->dtype) || !at->t->data || tensor_numel(at->t) != 1)
				return NULL;
			v = tensor_get_i64(at->t, 0);
		}
		c = cv_new(s, N);
		for (int64_t i = 0; i < N; i++)
			c->e[i] = dv(v);
		return c;
	}
	case OP_Range: {
		int64_t b, d;
		if (si_civals(s, n, 0, &b, 1) != 1 || si_civals(s, n, 2, &d, 1) != 1)
			return NULL;
		c = cv_new(s, N);
		for (int64_t i = 0; i < N; i++)
			c->e[i] = dv(b + i * d);
		return c;
	}
	default:
		return NULL;
	}
#undef CV
}

CVal *si_cval(SI *s, Value *v, int depth)
{
	if (!v)
		return NULL;
	if (v->id < s->ncv && s->cv[v->id])
		return s->cv[v->id] == &not_const ? NULL : s->cv[v->id];
	CVal *c = NULL;
	Sh os;
	if (v->init)
		c = cv_tensor(s, v->init);
	else if (v->producer && depth < FOLD_DEPTH && int_elem(v->type.elem) && vsh_known(v, &os)) {
		int64_t N = type_numel(&v->type);
		if (N >= 0 && N <= CV_MAX)
			c = fold(s, v->producer, &os, N, depth + 1);
	}
	if (v->id < s->ncv)
		s->cv[v->id] = c ? c : &not_const;
	return c;
}

