/* shape_ops.c — shape inference of shape and data-movement ops:
 * Transpose Reshape Flatten Gather GatherElements GatherND Concat Slice Split
 * Unsqueeze Squeeze Shape Size Expand Tile Pad Range ConstantOfShape Constant.
 * Targets given as tensors (Reshape's shape, Slice's starts, Expand's shape,
 * ...) come from the constant folder (shape_fold.c); opset-dependent forms
 * (attributes before opset 10/13/18, inputs after) are told apart by what
 * the node carries. Part of the shape-infer pass: see shape_infer.c.
 */
#include <math.h>
#include "shape_infer.h"

void si_shape_range(const Node *n, int r, int64_t *st, int64_t *en)
{
	int64_t b = attr_int(n, "start", 0), e = attr_int(n, "end", r);
	if (b < 0) b += r;
	if (e < 0) e += r;
	*st = b < 0 ? 0 : b > r ? r : b;
	*en = e < 0 ? 0 : e > r ? r : e;
	if (*en < *st)
		*en = *st;
}

static int64_t clampi(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Per-axis start, step and length of a Slice: 1 when the parameters are
 * constant, 0 when not (len then marks the sliced dims unknown), WL_ERR. */
int si_slice_plan(SI *s, Node *n, const Sh *a, int64_t *st, int64_t *sp, Dim *len)
{
	int64_t b[MAXR], e[MAXR], ax[MAXR], stp[MAXR];
	bool attrs = node_attr(n, "starts") != NULL;
	int nb = si_ints_of(s, n, attrs ? "starts" : NULL, 1, b, MAXR);
	int ne = si_ints_of(s, n, attrs ? "ends" : NULL, 2, e, MAXR);
	int na = si_ints_of(s, n, attrs ? "axes" : NULL, attrs ? 99 : 3, ax, MAXR);
	int ns = attrs ? -2 : si_ints_of(s, n, NULL, 4, stp, MAXR);
	for (int i = 0; i < a->r; i++) {
		st[i] = 0;
		sp[i] = 1;
		len[i] = a->d[i];
	}
	if (nb < 0 || ne < 0 || na == -1 || ns == -1) {
		Sh bs;   /* without axes, starts' length tells the axes */
		int cnt = na >= 0 ? na : a->r;
		if (na == -2 && nb >= 0) cnt = nb;
		else if (na == -2 && !attrs && ish(n, 1, &bs) && bs.r == 1 && known(bs.d[0]))
			cnt = (int)bs.d[0].value;
		for (int k = 0; k < cnt && k < a->r; k++) {
			int x = k;
			if (na >= 0 && si_naxis(s, n, ax[k], a->r, 0, &x))
				return WL_ERR;
			len[x] = du();
		}
		return 0;
	}
	if (ne != nb || (na >= 0 && na != nb) || (ns >= 0 && ns != nb))
		return si_fail(s, n, "starts, ends, axes and steps have different lengths (%d, %d, %d, %d)",
		               nb, ne, na, ns);
	for (int k = 0; k < nb; k++) {
		int x;
		int64_t step = ns >= 0 ? stp[k] : 1;
		if (si_naxis(s, n, na >= 0 ? ax[k] : k, a->r, 0, &x))
			return WL_ERR;
		if (step == 0)
			return si_fail(s, n, "step 0 on axis %d of input '%s'", x, iname(n, 0));
		sp[x] = step;
		if (!known(a->d[x])) {
			len[x] = step == 1 && b[k] == 0 && e[k] >= INT32_MAX ? a->d[x] : du();
			continue;
		}
		int64_t dim = a->d[x].value, s0 = b[k], e0 = e[k], l;
		if (s0 < 0) s0 += dim;
		if (e0 < 0) e0 += dim;
		if (step > 0) {
			s0 = clampi(s0, 0, dim);
			e0 = clampi(e0, 0, dim);
			l = e0 > s0 ? (e0 - s0 + step - 1) / step : 0;
		} else {
			s0 = clampi(s0, 0, dim - 1);
			e0 = clampi(e0, -1, dim - 1);
			l = s0 > e0 ? (s0 - e0 - step - 1) / -step : 0;
		}
		st[x] = s0;
		len[x] = dv(l);
	}
	return 1;
}

static int infer_reshape(SI *s, Node *n, const Sh *a, Sh *o)
{
	CVal *c = si_cval(s, in(n, 1), 0);
	Sh t;
	o->r = -1;
	if (!c) {
		if (ish(n, 1, &t) && t.r == 1 && known(t.d[0]) && t.d[0].value <= MAXR) {
			o->r = (int)t.d[0].value;
			for (int i = 0; i < o->r; i++)
				o->d[i] = du();
		}
		return WL_OK;
	}
	if (c->n > MAXR)
		return WL_OK;
	bool allowzero = attr_int(n, "allowzero", 0) != 0;
	int neg = -1;
	t.r = o->r = (int)c->n;
	for (int i = 0; i < t.r; i++)
		t.d[i] = c->e[i];
	for (int i = 0; i < o->r; i++) {
		Dim x = t.d[i];
		if (isv(x, 0) && !allowzero) {
			if (a->r >= 0 && i >= a->r)
				return si_fail(s, n, "shape '%s' is %s: dimension %d copies input '%s' of shape %s",
				               iname(n, 1), si_fsh(&t), i, iname(n, 0), si_fsh(a));
			x = a->r >= 0 ? a->d[i] : du();
		} else if (isv(x, -1)) {
			if (neg >= 0)
				return si_fail(s, n, "shape '%s' has more than one -1", iname(n, 1));
			neg = i;
			x = du();
		} else if (known(x) && x.value < 0)
			return si_fail(s, n, "shape '%s' has dimension %lld", iname(n, 1), (long long)x.value);
		o->d[i] = x;
	}
	if (a->r < 0)
		return WL_OK;
	/* balance the element counts: values multiply, parameters cancel */
	int64_t pin = 1, pout = 1;
	const char *sin[MAXR], *sout[MAXR];
	int nin = 0, nout = 0, rin = 0, rout = 0;
	bool unk = false;
	for (int i = 0; i < a->r; i++)
		if (known(a->d[i])) unk |= !wl_mul_i64(pin, a->d[i].value, &pin);
		else if (a->d[i].kind == DIM_PARAM) sin[nin++] = a->d[i].param;
		else unk = true;
	for (int i = 0; i < o->r; i++)
		if (i == neg) continue;
		else if (known(o->d[i])) {
			if (!wl_mul_i64(pout, o->d[i].value, &pout))
				return si_fail(s, n, "shape '%s' has more than 2^63 elements", iname(n, 1));
		} else if (o->d[i].kind == DIM_PARAM) sout[nout++] = o->d[i].param;
		else unk = true;
	if (unk)
		return WL_OK;
	for (int i = 0; i < nin; i++)
		for (int j = 0; j < nout && sin[i]; j++)
			if (sout[j] && strcmp(sin[i], sout[j]) == 0)
				sin[i] = sout[j] = NULL;
	const char *left = NULL;
	for (int i = 0; i < nin; i++)
		if (sin[i]) { rin++; left = sin[i]; }
	for (int j = 0; j < nout; j++)
		rout += sout[j] != NULL;
	if (rin || rout) {
		if (neg >= 0 && rin == 1 && rout == 0 && pin == pout) {
			o->d[neg].kind = DIM_PARAM;
			o->d[neg].param = left;
		}
		return WL_OK;
	}
	if (neg >= 0 ? (pout == 0 || pin % pout != 0) : pin != pout)
		return si_fail(s, n, "input '%s' has shape %s (%lld elements) but shape '%s' is %s",
		               iname(n, 0), si_fsh(a), (long long)pin, iname(n, 1), si_fsh(&t));
	if (neg >= 0)
		o->d[neg] = dv(pin / pout);
	return WL_OK;
}

int si_infer_shape_op(SI *s, Node *n)
{
	Sh a, b, o, t;
	int e0 = ielem(n, 0);
	int64_t iv[2 * MAXR], iv2[MAXR];
	int k, ax = 0;
	ish(n, 0, &a);
	o.r = -1;
	switch (n->op) {
	case OP_Transpose: {
		const int64_t *perm;
		int np = attr_ints(n, "perm", &perm);
		if (a.r >= 0) {
			bool seen[MAXR] = {0};
			if (np >= 0 && np != a.r)
				return si_fail(s, n, "perm has %d entries but input '%s' has shape %s", np, iname(n, 0), si_fsh(&a));
			o.r = a.r;
			for (int i = 0; i < a.r; i++) {
				int64_t p = np >= 0 ? perm[i] : a.r - 1 - i;
				if (p < 0 || p >= a.r || seen[p]) {
					t.r = a.r;
					for (int j = 0; j < a.r; j++)
						t.d[j] = dv(perm[j]);
					return si_fail(s, n, "perm %s is not a permutation of the %d axes of input '%s'",
					               si_fsh(&t), a.r, iname(n, 0));
				}
				seen[p] = true;
				o.d[i] = a.d[p];
			}
		}
		return si_set_out(s, n, 0, e0, &o);
	}
	case OP_Reshape:
		if (infer_reshape(s, n, &a, &o))
			return WL_ERR;
		return si_set_out(s, n, 0, e0, &o);
	case OP_Flatten:
		if (a.r >= 0) {
			int64_t axis = attr_int(n, "axis", 1);
			if (axis < -a.r || axis > a.r)
				return si_fail(s, n, "axis %lld is out of range for input '%s' of rank %d", (long long)axis, iname(n, 0), a.r);
			ax = (int)(axis < 0 ? axis + a.r : axis);
			o.r = 2;
			o.d[0] = dprod(a.d, ax);
			o.d[1] = dprod(a.d + ax, a.r - ax);
		}
		return si_set_out(s, n, 0, e0, &o);
	case OP_Gather: {
		ish(n, 1, &b);
		if (a.r < 0 || b.r < 0)
			return si_set_out(s, n, 0, e0, &o);
		if (si_naxis(s, n, attr_int(n, "axis", 0), a.r, 0, &ax))
			return WL_ERR;
		CVal *ix = si_cval(s, in(n, 1), 0);
		for (int64_t j = 0; ix && known(a.d[ax]) && j < ix->n; j++) {
			int64_t v = ix->e[j].value, A = a.d[ax].value;
			if (known(ix->e[j]) && (v < -A || v >= A))
				return si_fail(s, n, "index %lld in '%s' is out of range for axis %d of input '%s' with shape %s",
				               (long long)v, iname(n, 1), ax, iname(n, 0), si_fsh(&a));
		}
		if (a.r + b.r - 1 <= MAXR) {
			o.r = 0;
			for (int i = 0; i < ax; i++) o.d[o.r++] = a.d[i];
			for (int i = 0; i < b.r; i++) o.d[o.r++] = b.d[i];
			for (int i = ax + 1; i < a.r; i++) o.d[o.r++] = a.d[i];
		}
		return si_set_out(s, n, 0, e0, &o);
	}
	case OP_GatherElements:
		if (a.r >= 0 && si_naxis(s, n, attr_int(n, "axis", 0), a.r, 0, &ax))
			return WL_ERR;
		ish(n, 1, &o);
		return si_set_out(s, n, 0, e0, &o);
	case OP_GatherND: {
		int64_t bd = attr_int(n, "batch_dims", 0);
		ish(n, 1, &b);
		if (a.r >= 0 && b.r >= 1 && known(b.d[b.r - 1])) {
			int64_t last = b.d[b.r - 1].value;
			if (bd + last > a.r)
				return si_fail(s, n, "indices '%s' has shape %s but data '%s' has shape %s", iname(n, 1),
				               si_fsh(&b), iname(n, 0), si_fsh(&a));
			o.r = 0;
			for (int i = 0; i < b.r - 1; i++) o.d[o.r++] = b.d[i];
			for (int64_t i = bd + last; i < a.r && o.r < MAXR; i++) o.d[o.r++] = a.d[i];
		}
		return si_set_out(s, n, 0, e0, &o);
	}
	case OP_Concat: {
		int first = -1;
		bool unk = false;
		if (!node_attr(n, "axis"))
			return si_fail(s, n, "attribute 'axis' is missing");
		for (int i = 0; i < n->ninputs; i++) {
			if (first >= 0 && si_same_elem(s, n, first, i))
				return WL_ERR;
			if (!ish(n, i, &b)) {
				unk = true;
				continue;
			}
			if (first < 0) {
				if (si_naxis(s, n, attr_int(n, "axis", 0), b.r, i, &ax))
					return WL_ERR;
				first = i;
				o = t = b;
				continue;
			}
			if (b.r != o.r)
				return si_fail(s, n, "input '%s' has shape %s but input '%s' has shape %s: ranks differ",
				               iname(n, i), si_fsh(&b), iname(n, first), si_fsh(&t));
			for (int d = 0; d < o.r; d++) {
				if (d == ax) continue;
				if (clash(o.d[d], b.d[d]))
					return si_fail(s, n, "input '%s' has shape %s but input '%s' has shape %s: dimension %d differs",
					               iname(n, i), si_fsh(&b), iname(n, first), si_fsh(&t), d);
				o.d[d] = unify(o.d[d], b.d[d]);
			}
			o.d[ax] = dadd(o.d[ax], b.d[ax]);
		}
		if (unk && o.r >= 0)
			o.d[ax] = du();
		return si_set_out(s, n, 0, first >= 0 ? ielem(n, first) : e0, &o);
	}
	case OP_Slice: {
		int64_t st[MAXR], sp[MAXR];
		Dim len[MAXR];
		if (a.r >= 0) {
			if (si_slice_plan(s, n, &a, st, sp, len) < 0)
				return WL_ERR;
			o.r = a.r;
			memcpy(o.d, len, (size_t)a.r * sizeof *len);
		}
		return si_set_out(s, n, 0, e0, &o);
	}
	case OP_Split: {
		int64_t sp[MAXV];
		k = si_ints_of(s, n, "split", 1, sp, MAXV);
		if (a.r < 0) {
			for (int j = 0; j < n->noutputs; j++)
				if (si_set_out(s, n, j, e0, &o))
					return WL_ERR;
			return WL_OK;
		}
		if (si_naxis(s, n, attr_int(n, "axis", 0), a.r, 0, &ax))
			return WL_ERR;
		Dim d = a.d[ax];
		int64_t parts = attr_int(n, "num_outputs", n->noutputs), sum = 0;
		if (k > 0 && k != n->noutputs)
			return si_fail(s, n, "split has %d entries for %d outputs", k, n->noutputs);
		for (int j = 0; j < k; j++)
			sum += sp[j];
		if (k > 0 && known(d) && sum != d.value)
			return si_fail(s, n, "split sizes add up to %lld but input '%s' has shape %s",
			               (long long)sum, iname(n, 0), si_fsh(&a));
		if (parts <= 0)
			return si_fail(s, n, "num_outputs is %lld", (long long)parts);
		int64_t chunk = known(d) ? (d.value + parts - 1) / parts : 0;
		for (int j = 0; j < n->noutputs; j++) {
			o = a;
			if (k > 0) o.d[ax] = dv(sp[j]);
			else if (k == -1 || !known(d)) o.d[ax] = du();
			else {
				int64_t sz = j < parts - 1 ? chunk : d.value - chunk * (parts - 1);
				if (sz < 0)
					return si_fail(s, n, "input '%s' with shape %s cannot be split in %lld", iname(n, 0), si_fsh(&a), (long long)parts);
				o.d[ax] = dv(sz);
			}
			if (si_set_out(s, n, j, e0, &o))
				return WL_ERR;
		}
		return WL_OK;
	}
	case OP_Unsqueeze: {
		bool ins[MAXR] = {0};
		k = si_ints_of(s, n, "axes", 1, iv, MAXR);
		if (k == -2)
			return si_fail(s, n, "axes are missing");
		if (a.r >= 0 && k >= 0 && a.r + k <= MAXR) {
			o.r = a.r + k;
			for (int i = 0; i < k; i++) {
				if (si_naxis(s, n, iv[i], o.r, 0, &ax))
					return WL_ERR;
				if (ins[ax])
					return si_fail(s, n, "axis %lld appears twice", (long long)iv[i]);
				ins[ax] = true;
			}
			for (int i = 0, j = 0; i < o.r; i++)
				o.d[i] = ins[i] ? dv(1) : a.d[j++];
		}
		return si_set_out(s, n, 0, e0, &o);
	}
	case OP_Squeeze: {
		bool rm[MAXR] = {0};
		k = si_ints_of(s, n, "axes", 1, iv, MAXR);
		if (a.r < 0 || k == -1)
			return si_set_out(s, n, 0, e0, &o);
		for (int i = 0; i < k; i++) {
			if (si_naxis(s, n, iv[i], a.r, 0, &ax))
				return WL_ERR;
			if (known(a.d[ax]) && a.d[ax].value != 1)
				return si_fail(s, n, "axis %d of input '%s' with shape %s is not 1", ax, iname(n, 0), si_fsh(&a));
			rm[ax] = true;
		}
		for (int i = 0; k <= 0 && i < a.r; i++) {
			if (!known(a.d[i]))
				return si_set_out(s, n, 0, e0, &o);
			rm[i] = a.d[i].value == 1;
		}
		o.r = 0;
		for (int i = 0; i < a.r; i++)
			if (!rm[i])
				o.d[o.r++] = a.d[i];
		return si_set_out(s, n, 0, e0, &o);
	}
	case OP_Shape: {
		int64_t st, en;
		o.r = 1;
		o.d[0] = du();
		if (a.r >= 0) {
			si_shape_range(n, a.r, &st, &en);
			o.d[0] = dv(en - st);
		}
		return si_set_out(s, n, 0, DT_INT64, &o);
	}
	case OP_Size:
		o.r = 0;
		return si_set_out(s, n, 0, DT_INT64, &o);
	case OP_Expand: {
		CVal *c = si_cval(s, in(n, 1), 0);
		if (c && c->n <= MAXR) {
			t.r = (int)c->n;
			for (int i = 0; i < t.r; i++)
				t.d[i] = c->e[i];
		} else if (ish(n, 1, &b) && b.r == 1 && known(b.d[0]) && b.d[0].value <= MAXR) {
			t.r = (int)b.d[0].value;
			for (int i = 0; i < t.r; i++)
				t.d[i] = du();
		} else
			t.r = -1;
		if (si_bcast(s, n, &o, &a, iname(n, 0), &t, iname(n, 1)))
			return WL_ERR;
		return si_set_out(s, n, 0, e0, &o);
	}
	case OP_Tile:
		k = si_civals(s, n, 1, iv, MAXR);
		if (a.r >= 0) {
			if (k >= 0 && k != a.r)
				return si_fail(s, n, "repeats '%s' has %d entries but input '%s' has shape %s", iname(n, 1), k, iname(n, 0), si_fsh(&a));
			o = a;
			for (int i = 0; i < a.r; i++)
				o.d[i] = k < 0 ? du() : dmul(a.d[i], dv(iv[i]));
		}
		return si_set_out(s, n, 0, e0, &o);
	case OP_Pad: {
		bool attrp = node_attr(n, "pads") != NULL;
		k = si_ints_of(s, n, attrp ? "pads" : NULL, 1, iv, 2 * MAXR);
		int na = si_ints_of(s, n, NULL, 3, iv2, MAXR);
		if (a.r < 0)
			return si_set_out(s, n, 0, e0, &o);
		int cnt = na >= 0 ? na : a.r;
		o = a;
		if (k >= 0 && na != -1 && k != 2 * cnt)
			return si_fail(s, n, "pads has %d entries for %d axes of input '%s' with shape %s", k, cnt, iname(n, 0), si_fsh(&a));
		for (int j = 0; j < (na == -1 ? a.r : cnt); j++) {
			ax = j;
			if (na >= 0 && si_naxis(s, n, iv2[j], a.r, 0, &ax))
				return WL_ERR;
			if (k < 0 || na == -1) {
				o.d[ax] = du();
				continue;
			}
			o.d[ax] = dadd(dadd(a.d[ax], dv(iv[j])), dv(iv[j + cnt]));
			if (known(o.d[ax]) && o.d[ax].value < 0)
				return si_fail(s, n, "pads make axis %d of input '%s' with shape %s negative", ax, iname(n, 0), si_fsh(&a));
		}
		return si_set_out(s, n, 0, e0, &o);
	}
	case OP_Range: {
		double v[3];
		o.r = 1;
		o.d[0] = du();
		if (si_scalar_of(s, n, 0, &v[0]) && si_scalar_of(s, n, 1, &v[1]) && si_scalar_of(s, n, 2, &v[2])) {
			if (v[2] == 0)
				return si_fail(s, n, "delta '%s' is 0", iname(n, 2));
			double c = ceil((v[1] - v[0]) / v[2]);
			o.d[0] = dv(c > 0 ? (int64_t)c : 0);
		}
		return si_set_out(s, n, 0, e0, &o);
	}
	case OP_ConstantOfShape: {
		Attr *va = node_attr(n, "value");
		int elem = va && va->type == AT_TENSOR && va->t ? va->t->dtype : DT_FLOAT;
		CVal *c = si_cval(s, in(n, 0), 0);
		if (c && c->n <= MAXR) {
			o.r = (int)c->n;
			for (int i = 0; i < o.r; i++) {
				o.d[i] = c->e[i];
				if (known(o.d[i]) && o.d[i].value < 0)
					return si_fail(s, n, "input '%s' holds negative dimension %lld", iname(n, 0), (long long)o.d[i].value);
			}
		} else if (a.r == 1 && known(a.d[0]) && a.d[0].value <= MAXR) {
			o.r = (int)a.d[0].value;
			for (int i = 0; i < o.r; i++)
				o.d[i] = du();
		}
		return si_set_out(s, n, 0, elem, &o);
	}
	case OP_Constant: {
		Attr *at = n->nattrs == 1 ? &n->attrs[0] : NULL;
		int elem = DT_UNDEFINED;
		if (!at)
			return WL_OK;
		o.r = at->type == AT_FLOATS || at->type == AT_INTS || at->type == AT_STRINGS ? 1 : 0;
		o.d[0] = dv(at->n);
		switch (at->type) {
		case AT_TENSOR:
			if (!at->t || at->t->ndim > MAXR)
				return WL_OK;
			elem = at->t->dtype;
			o.r = at->t->ndim;
			for (int i = 0; i < o.r; i++)
				o.d[i] = dv(at->t->dims[i]);
			break;
		case AT_FLOAT: case AT_FLOATS: elem = DT_FLOAT; break;
		case AT_INT: case AT_INTS: elem = DT_INT64; break;
		case AT_STRING: case AT_STRINGS: elem = DT_STRING; break;
		default: return WL_OK;   /* sparse_value: keep the declared type */
		}
		return si_set_out(s, n, 0, elem, &o);
	}
	default:
		return WL_OK;     /* uncovered and unknown ops keep their declared types */
	}
}
