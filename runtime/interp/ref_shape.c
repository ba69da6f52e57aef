/* ref_shape.c — shape computation and data movement: Reshape, Flatten,
 * Squeeze, Unsqueeze, Identity, Dropout (inference), Transpose, Gather,
 * GatherElements, Concat, Slice, Split, Tile, Pad, Shape, Size, Constant,
 * ConstantOfShape, Range, Trilu.
 *
 * These ops move bytes and never look at element values (except the index
 * and shape inputs), so they work for every element type by size. Inputs
 * that decide an output shape are declared in data_inputs so the executor
 * computes them while planning. Attribute and input forms of the same
 * parameter (Slice, Split, Squeeze, Unsqueeze, Pad across opsets) are both
 * read: an input, when present, wins.
 */
#include "ref.h"

static int64_t esz(const RTensor *t)
{
	return elem_size(t->dtype);
}

int ref_copy_run(KCall *c, Diag *d)
{
	if (c->out[0]->nbytes)
		memcpy(c->out[0]->data, c->in[0]->data, c->out[0]->nbytes);
	(void)d;
	return WL_OK;
}

/* ---------------------------------------------------------------- Reshape & co */

int ref_reshape_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_ALL) || need_in(c, d, 1, DTM(DT_INT64)))
		return WL_ERR;
	RTensor *x = c->in[0];
	int64_t shp[RT_MAX_DIMS], allowzero;
	int n;
	if (read_ints(c, 1, shp, RT_MAX_DIMS, &n, d) || attr_get_int(c, d, "allowzero", 0, &allowzero))
		return WL_ERR;
	int64_t known = 1, neg = -1;
	for (int i = 0; i < n; i++) {
		if (shp[i] == 0 && !allowzero) {
			if (i >= x->ndim)
				return kfail(c, d, "tensor '%s': 0 at position %d copies a dimension the input lacks",
				             kin_name(c, 1), i);
			shp[i] = x->dims[i];
		}
		if (shp[i] == -1) {
			if (neg >= 0)
				return kfail(c, d, "tensor '%s': more than one -1", kin_name(c, 1));
			neg = i;
		} else if (shp[i] < 0) {
			return kfail(c, d, "tensor '%s': bad dimension %lld", kin_name(c, 1), (long long)shp[i]);
		} else {
			if (shp[i] > 0 && known > INT64_MAX / shp[i])
				return kfail(c, d, "tensor '%s': shape too large", kin_name(c, 1));
			known *= shp[i];
		}
	}
	int64_t total = rt_numel(x);
	char b1[96];
	if (neg >= 0) {
		if (known == 0 || total % known)
			return kfail(c, d, "cannot reshape tensor '%s' %s: -1 does not divide", kin_name(c, 0), kdesc(x, b1));
		shp[neg] = total / known;
	} else if (known != total) {
		return kfail(c, d, "cannot reshape tensor '%s' %s into %lld elements", kin_name(c, 0), kdesc(x, b1),
		             (long long)known);
	}
	set_out(c->out[0], x->dtype, n, shp);
	return WL_OK;
}

int ref_flatten_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_ALL))
		return WL_ERR;
	RTensor *x = c->in[0];
	int64_t a, ax;
	if (attr_get_int(c, d, "axis", 1, &a))
		return WL_ERR;
	if (a < -x->ndim || a > x->ndim)
		return kfail(c, d, "axis %lld out of range for rank %d", (long long)a, x->ndim);
	ax = a < 0 ? a + x->ndim : a;
	int64_t od[2] = {1, 1};
	for (int i = 0; i < x->ndim; i++)
		od[i < ax ? 0 : 1] *= x->dims[i];
	set_out(c->out[0], x->dtype, 2, od);
	return WL_OK;
}

static int axes_list(KCall *c, Diag *d, int slot, int64_t *axes, int *n)
{
	*n = -1;
	if (c->nin > slot && c->in[slot]) {
		if (read_ints(c, slot, axes, RT_MAX_DIMS, n, d))
			return WL_ERR;
		return WL_OK;
	}
	const int64_t *a;
	int k = attr_ints(c->node, "axes", &a);
	if (k > RT_MAX_DIMS)
		return kfail(c, d, "too many axes");
	for (int i = 0; i < k; i++)
		axes[i] = a[i];
	*n = k;
	return WL_OK;
}

int ref_squeeze_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_ALL))
		return WL_ERR;
	RTensor *x = c->in[0];
	int64_t axes[RT_MAX_DIMS];
	int n;
	if (axes_list(c, d, 1, axes, &n))
		return WL_ERR;
	bool drop[RT_MAX_DIMS] = {0};
	if (n <= 0) {
		for (int i = 0; i < x->ndim; i++)
			drop[i] = x->dims[i] == 1;
	} else {
		for (int i = 0; i < n; i++) {
			int64_t a;
			if (norm_axis(c, d, axes[i], x->ndim, &a))
				return WL_ERR;
			if (x->dims[a] != 1) {
				char b1[96];
				return kfail(c, d, "tensor '%s' %s: dimension %lld is not 1", kin_name(c, 0), kdesc(x, b1),
				             (long long)a);
			}
			drop[a] = true;
		}
	}
	int64_t od[RT_MAX_DIMS];
	int r = 0;
	for (int i = 0; i < x->ndim; i++)
		if (!drop[i])
			od[r++] = x->dims[i];
	set_out(c->out[0], x->dtype, r, od);
	return WL_OK;
}

int ref_unsqueeze_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_ALL))
		return WL_ERR;
	RTensor *x = c->in[0];
	int64_t axes[RT_MAX_DIMS];
	int n;
	if (axes_list(c, d, 1, axes, &n))
		return WL_ERR;
	if (n < 0)
		return kfail(c, d, "axes are required");
	int r = x->ndim + n;
	if (r > RT_MAX_DIMS)
		return kfail(c, d, "result would have %d dimensions", r);
	bool ins[RT_MAX_DIMS] = {0};
	for (int i = 0; i < n; i++) {
		int64_t a;
		if (norm_axis(c, d, axes[i], r, &a))
			return WL_ERR;
		if (ins[a])
			return kfail(c, d, "axis %lld repeated", (long long)axes[i]);
		ins[a] = true;
	}
	int64_t od[RT_MAX_DIMS];
	for (int i = 0, k = 0; i < r; i++)
		od[i] = ins[i] ? 1 : x->dims[k++];
	set_out(c->out[0], x->dtype, r, od);
	return WL_OK;
}

int ref_identity_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_ALL))
		return WL_ERR;
	set_out(c->out[0], c->in[0]->dtype, c->in[0]->ndim, c->in[0]->dims);
	return WL_OK;
}

int ref_dropout_infer(KCall *c, Diag *d)
{
	if (ref_identity_infer(c, d))
		return WL_ERR;
	/* training: output = input only when ratio is 0 (otherwise random) */
	double ratio = (c->nin > 1 && c->in[1]) ? scalar_f64(c->in[1]) : 0.5;
	if (c->nin > 2 && c->in[2] && scalar_i64(c->in[2]) != 0 && ratio != 0)
		return kfail(c, d, "training_mode=true with ratio %g is random; the reference runs inference only", ratio);
	if (c->nout > 1)
		set_out(c->out[1], DT_BOOL, c->in[0]->ndim, c->in[0]->dims);
	return WL_OK;
}

int ref_dropout_run(KCall *c, Diag *d)
{
	ref_copy_run(c, d);
	if (c->nout > 1 && c->out[1] && c->out[1]->nbytes)
		memset(c->out[1]->data, 1, c->out[1]->nbytes);
	return WL_OK;
}

/* ---------------------------------------------------------------- Transpose */

typedef struct TrJob {
	int nd;
	int64_t od[RT_MAX_DIMS], is[RT_MAX_DIMS];   /* output dims, input strides (bytes) per output dim */
	int64_t run;                                /* contiguous bytes copied at once */
	int64_t rows;                               /* output rows (all dims but the run) */
	int rd;                                     /* dims covered by rows */
	const char *x;
	char *y;
	int es;
} TrJob;

static void tr_par(void *ctx, int64_t r0, int64_t r1, int tid)
{
	const TrJob *j = ctx;
	(void)tid;
	int64_t idx[RT_MAX_DIMS];
	int64_t t = r0;
	for (int k = j->rd - 1; k >= 0; k--) {
		idx[k] = t % j->od[k];
		t /= j->od[k];
	}
	for (int64_t r = r0; r < r1; r++) {
		int64_t off = 0;
		for (int k = 0; k < j->rd; k++)
			off += idx[k] * j->is[k];
		char *dst = j->y + r * j->run;
		if (j->run == j->es) {
			switch (j->es) {
			case 4: memcpy(dst, j->x + off, 4); break;
			case 8: memcpy(dst, j->x + off, 8); break;
			case 2: memcpy(dst, j->x + off, 2); break;
			default: *dst = j->x[off]; break;
			}
		} else {
			memcpy(dst, j->x + off, (size_t)j->run);
		}
		for (int k = j->rd - 1; k >= 0; k--) {
			if (++idx[k] < j->od[k])
				break;
			idx[k] = 0;
		}
	}
}

static int perm_of(const KCall *c, Diag *d, int64_t *perm)
{
	int r = c->in[0]->ndim;
	const int64_t *p;
	int n = attr_ints(c->node, "perm", &p);
	if (n < 0) {
		for (int i = 0; i < r; i++)
			perm[i] = r - 1 - i;
		return WL_OK;
	}
	if (n != r)
		return kfail(c, d, "perm has %d entries for rank %d", n, r);
	bool seen[RT_MAX_DIMS] = {0};
	for (int i = 0; i < r; i++) {
		if (p[i] < 0 || p[i] >= r || seen[p[i]])
			return kfail(c, d, "perm is not a permutation");
		seen[p[i]] = true;
		perm[i] = p[i];
	}
	return WL_OK;
}

int ref_transpose_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_ALL))
		return WL_ERR;
	int64_t perm[RT_MAX_DIMS], od[RT_MAX_DIMS];
	if (perm_of(c, d, perm))
		return WL_ERR;
	for (int i = 0; i < c->in[0]->ndim; i++)
		od[i] = c->in[0]->dims[perm[i]];
	set_out(c->out[0], c->in[0]->dtype, c->in[0]->ndim, od);
	return WL_OK;
}

int ref_transpose_run(KCall *c, Diag *d)
{
	RTensor *x = c->in[0], *y = c->out[0];
	int64_t perm[RT_MAX_DIMS], st[RT_MAX_DIMS];
	if (perm_of(c, d, perm))
		return WL_ERR;
	if (rt_numel(y) == 0)
		return WL_OK;
	TrJob j = {.nd = x->ndim, .x = x->data, .y = y->data, .es = (int)esz(x)};
	contiguous_strides(x->ndim, x->dims, st);
	for (int i = 0; i < x->ndim; i++) {
		j.od[i] = y->dims[i];
		j.is[i] = st[perm[i]] * j.es;
	}
	/* trailing output dims that stay in place form contiguous runs */
	int k = x->ndim;
	j.run = j.es;
	while (k > 0 && perm[k - 1] == k - 1) {
		j.run *= x->dims[k - 1];
		k--;
	}
	j.rd = k;
	j.rows = 1;
	for (int i = 0; i < k; i++)
		j.rows *= j.od[i];
	parallel_for(rt_numel(y) >= 65536 ? c->pool : NULL, j.rows, 256, tr_par, &j);
	return WL_OK;
}

/* ---------------------------------------------------------------- Gather */

int ref_gather_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_ALL) || need_in(c, d, 1, DTM_IDX))
		return WL_ERR;
	RTensor *x = c->in[0], *ix = c->in[1];
	int64_t ax;
	if (attr_axis(c, d, 0, x->ndim, &ax))
		return WL_ERR;
	int r = x->ndim - 1 + ix->ndim;
	if (r > RT_MAX_DIMS)
		return kfail(c, d, "result would have %d dimensions", r);
	int64_t od[RT_MAX_DIMS];
	int n = 0;
	for (int i = 0; i < ax; i++)
		od[n++] = x->dims[i];
	for (int i = 0; i < ix->ndim; i++)
		od[n++] = ix->dims[i];
	for (int i = (int)ax + 1; i < x->ndim; i++)
		od[n++] = x->dims[i];
	set_out(c->out[0], x->dtype, n, od);
	return WL_OK;
}

/* Index pos of input 1 is v, outside [-n, n): the message every target
 * gives (diag_index_range). */
static int index_fail(const KCall *c, Diag *d, int64_t pos, int64_t v, int64_t n)
{
	const Value *ix = c->node->inputs[1];
	const RTensor *t = c->in[1];
	return diag_index_range(d, ix->name, ix->is_input ? INDEX_GRAPH_INPUT : 0, c->node->name, c->node->op_type,
	                        t->ndim, t->dims, pos, v, n);
}

int ref_gather_run(KCall *c, Diag *d)
{
	RTensor *x = c->in[0], *ix = c->in[1], *y = c->out[0];
	int64_t ax;
	if (attr_axis(c, d, 0, x->ndim, &ax))
		return WL_ERR;
	int64_t outer = 1, inner = 1, n = x->dims[ax], ni = rt_numel(ix);
	for (int i = 0; i < ax; i++)
		outer *= x->dims[i];
	for (int i = (int)ax + 1; i < x->ndim; i++)
		inner *= x->dims[i];
	size_t blk = (size_t)(inner * esz(x));
	for (int64_t k = 0; k < ni; k++) {
		int64_t v = get_i64(ix->data, ix->dtype, k);
		if (v < -n || v >= n)
			return index_fail(c, d, k, v, n);
	}
	for (int64_t o = 0; o < outer; o++)
		for (int64_t k = 0; k < ni; k++) {
			int64_t v = get_i64(ix->data, ix->dtype, k);
			if (v < 0)
				v += n;
			memcpy((char *)y->data + (size_t)(o * ni + k) * blk, (const char *)x->data + (size_t)(o * n + v) * blk, blk);
		}
	return WL_OK;
}

int ref_gatherel_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_ALL) || need_in(c, d, 1, DTM_IDX))
		return WL_ERR;
	RTensor *x = c->in[0], *ix = c->in[1];
	int64_t ax;
	if (attr_axis(c, d, 0, x->ndim, &ax))
		return WL_ERR;
	if (ix->ndim != x->ndim)
		return kfail(c, d, "indices must have the rank of the data");
	set_out(c->out[0], x->dtype, ix->ndim, ix->dims);
	return WL_OK;
}

int ref_gatherel_run(KCall *c, Diag *d)
{
	RTensor *x = c->in[0], *ix = c->in[1], *y = c->out[0];
	int64_t ax;
	if (attr_axis(c, d, 0, x->ndim, &ax))
		return WL_ERR;
	int64_t xs[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0};
	contiguous_strides(x->ndim, x->dims, xs);
	int64_t n = rt_numel(ix), e = esz(x);
	for (int64_t i = 0; i < n; i++) {
		int64_t v = get_i64(ix->data, ix->dtype, i);
		if (v < -x->dims[ax] || v >= x->dims[ax])
			return index_fail(c, d, i, v, x->dims[ax]);
		if (v < 0)
			v += x->dims[ax];
		int64_t off = 0;
		for (int k = 0; k < x->ndim; k++) {
			int64_t q = k == ax ? v : idx[k];
			if (q >= x->dims[k])
				return kfail(c, d, "tensor '%s': shape does not fit the data", kin_name(c, 1));
			off += q * xs[k];
		}
		memcpy((char *)y->data + i * e, (const char *)x->data + off * e, (size_t)e);
		for (int k = ix->ndim - 1; k >= 0; k--) {
			if (++idx[k] < ix->dims[k])
				break;
			idx[k] = 0;
		}
	}
	return WL_OK;
}

/* ---------------------------------------------------------------- Concat */

int ref_concat_infer(KCall *c, Diag *d)
{
	if (c->nin < 1 || need_in(c, d, 0, DTM_ALL))
		return WL_ERR;
	RTensor *x0 = c->in[0];
	int64_t ax;
	if (attr_axis(c, d, 0, x0->ndim, &ax))
		return WL_ERR;
	int64_t od[RT_MAX_DIMS];
	for (int i = 0; i < x0->ndim; i++)
		od[i] = x0->dims[i];
	od[ax] = 0;
	for (int k = 0; k < c->nin; k++) {
		if (need_in(c, d, k, DTM_ALL))
			return WL_ERR;
		RTensor *x = c->in[k];
		char b1[96], b2[96];
		if (x->dtype != x0->dtype || x->ndim != x0->ndim)
			return kfail(c, d, "tensors '%s' %s and '%s' %s cannot be concatenated", kin_name(c, 0),
			             kdesc(x0, b1), kin_name(c, k), kdesc(x, b2));
		for (int i = 0; i < x->ndim; i++)
			if (i != ax && x->dims[i] != x0->dims[i])
				return kfail(c, d, "tensors '%s' %s and '%s' %s cannot be concatenated on axis %lld",
				             kin_name(c, 0), kdesc(x0, b1), kin_name(c, k), kdesc(x, b2), (long long)ax);
		od[ax] += x->dims[ax];
	}
	set_out(c->out[0], x0->dtype, x0->ndim, od);
	return WL_OK;
}

int ref_concat_run(KCall *c, Diag *d)
{
	RTensor *y = c->out[0];
	int64_t ax;
	if (attr_axis(c, d, 0, y->ndim, &ax))
		return WL_ERR;
	int64_t outer = 1, inner = esz(y);
	for (int i = 0; i < ax; i++)
		outer *= y->dims[i];
	for (int i = (int)ax + 1; i < y->ndim; i++)
		inner *= y->dims[i];
	int64_t orow = y->dims[ax] * inner, at = 0;
	for (int k = 0; k < c->nin; k++) {
		RTensor *x = c->in[k];
		int64_t xrow = x->dims[ax] * inner;
		for (int64_t o = 0; o < outer; o++)
			memcpy((char *)y->data + o * orow + at, (const char *)x->data + o * xrow, (size_t)xrow);
		at += xrow;
	}
	return WL_OK;
}

/* ---------------------------------------------------------------- Slice */

typedef struct SliceP { int64_t start[RT_MAX_DIMS], step[RT_MAX_DIMS], len[RT_MAX_DIMS]; } SliceP;

static int slice_params(KCall *c, Diag *d, SliceP *p)
{
	RTensor *x = c->in[0];
	int64_t st[RT_MAX_DIMS], en[RT_MAX_DIMS], ax[RT_MAX_DIMS], sp[RT_MAX_DIMS];
	int ns, ne, na = -1, nsp = -1;
	if (c->nin > 1 && c->in[1]) {
		if (read_ints(c, 1, st, RT_MAX_DIMS, &ns, d) || need_in(c, d, 2, DTM_IDX) ||
		    read_ints(c, 2, en, RT_MAX_DIMS, &ne, d))
			return WL_ERR;
		if (c->nin > 3 && c->in[3] && read_ints(c, 3, ax, RT_MAX_DIMS, &na, d))
			return WL_ERR;
		if (c->nin > 4 && c->in[4] && read_ints(c, 4, sp, RT_MAX_DIMS, &nsp, d))
			return WL_ERR;
	} else {
		const int64_t *a;
		ns = attr_ints(c->node, "starts", &a);
		if (ns < 0 || ns > RT_MAX_DIMS)
			return kfail(c, d, "starts are required");
		memcpy(st, a, sizeof(int64_t) * (size_t)ns);
		ne = attr_ints(c->node, "ends", &a);
		if (ne < 0 || ne > RT_MAX_DIMS)
			return kfail(c, d, "ends are required");
		memcpy(en, a, sizeof(int64_t) * (size_t)ne);
		na = attr_ints(c->node, "axes", &a);
		if (na > RT_MAX_DIMS)
			return kfail(c, d, "too many axes");
		if (na > 0)
			memcpy(ax, a, sizeof(int64_t) * (size_t)na);
	}
	if (ns != ne || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns))
		return kfail(c, d, "starts, ends, axes and steps differ in length");
	for (int i = 0; i < x->ndim; i++) {
		p->start[i] = 0;
		p->step[i] = 1;
		p->len[i] = x->dims[i];
	}
	bool seen[RT_MAX_DIMS] = {0};
	for (int i = 0; i < ns; i++) {
		int64_t a;
		if (norm_axis(c, d, na >= 0 ? ax[i] : i, x->ndim, &a))
			return WL_ERR;
		if (seen[a])
			return kfail(c, d, "axis %lld repeated", (long long)a);
		seen[a] = true;
		int64_t dim = x->dims[a], s = st[i], e = en[i], k = nsp >= 0 ? sp[i] : 1;
		if (k == 0)
			return kfail(c, d, "step 0");
		if (s < 0)
			s += dim;
		if (e < 0)
			e += dim;
		if (k > 0) {
			s = s < 0 ? 0 : (s > dim ? dim : s);
			e = e < 0 ? 0 : (e > dim ? dim : e);
			p->len[a] = e > s ? (e - s + k - 1) / k : 0;
		} else {
			s = s < 0 ? 0 : (s > dim - 1 ? dim - 1 : s);
			e = e < -1 ? -1 : (e > dim - 1 ? dim - 1 : e);
			p->len[a] = s > e ? (s - e + (-k) - 1) / (-k) : 0;
		}
		p->start[a] = s;
		p->step[a] = k;
	}
	return WL_OK;
}

int ref_slice_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_ALL))
		return WL_ERR;
	SliceP p;
	if (slice_params(c, d, &p))
		return WL_ERR;
	set_out(c->out[0], c->in[0]->dtype, c->in[0]->ndim, p.len);
	return WL_OK;
}

int ref_slice_run(KCall *c, Diag *d)
{
	RTensor *x = c->in[0], *y = c->out[0];
	SliceP p;
	if (slice_params(c, d, &p))
		return WL_ERR;
	int64_t n = rt_numel(y);
	if (n == 0)
		return WL_OK;
	int64_t xs[RT_MAX_DIMS], e = esz(x);
	contiguous_strides(x->ndim, x->dims, xs);
	int r = x->ndim;
	/* last dim with step 1 copies runs */
	int64_t run = (r > 0 && p.step[r - 1] == 1) ? p.len[r - 1] : 1;
	int rd = (r > 0 && p.step[r - 1] == 1) ? r - 1 : r;
	int64_t idx[RT_MAX_DIMS] = {0};
	char *dst = y->data;
	for (int64_t o = 0; o < n; o += run) {
		int64_t off = 0;
		for (int k = 0; k < rd; k++)
			off += (p.start[k] + idx[k] * p.step[k]) * xs[k];
		if (rd < r)
			off += p.start[r - 1] * xs[r - 1];
		memcpy(dst, (const char *)x->data + off * e, (size_t)(run * e));
		dst += run * e;
		for (int k = rd - 1; k >= 0; k--) {
			if (++idx[k] < p.len[k])
				break;
			idx[k] = 0;
		}
	}
	return WL_OK;
}

/* ---------------------------------------------------------------- Split */

static int split_sizes(KCall *c, Diag *d, int64_t *ax, int64_t *sizes)
{
	RTensor *x = c->in[0];
	if (attr_axis(c, d, 0, x->ndim, ax))
		return WL_ERR;
	int64_t dim = x->dims[*ax];
	int no = c->nout;
	int n = -1;
	int64_t sp[256];
	if (no > 256)
		return kfail(c, d, "too many outputs");
	if (c->nin > 1 && c->in[1]) {
		if (read_ints(c, 1, sp, 256, &n, d))
			return WL_ERR;
	} else {
		const int64_t *v;
		n = attr_ints(c->node, "split", &v);
		if (n > 256)
			return kfail(c, d, "split too long");
		for (int i = 0; i < n; i++)
			sp[i] = v[i];
	}
	if (n >= 0) {
		if (n != no)
			return kfail(c, d, "split has %d entries for %d outputs", n, no);
		int64_t s = 0;
		for (int i = 0; i < n; i++) {
			if (sp[i] < 0)
				return kfail(c, d, "negative split");
			s += sp[i];
			sizes[i] = sp[i];
		}
		if (s != dim)
			return kfail(c, d, "split sums to %lld, dimension is %lld", (long long)s, (long long)dim);
		return WL_OK;
	}
	int64_t parts;
	if (attr_get_int(c, d, "num_outputs", no, &parts))
		return WL_ERR;
	if (parts != no || no < 1)
		return kfail(c, d, "num_outputs=%lld for %d outputs", (long long)parts, no);
	int64_t each = (dim + no - 1) / no;
	if (!node_attr(c->node, "num_outputs") && dim % no)
		return kfail(c, d, "dimension %lld does not split evenly in %d", (long long)dim, no);
	for (int i = 0; i < no; i++) {
		int64_t left = dim - each * i;
		sizes[i] = left < 0 ? 0 : (left < each ? left : each);
	}
	return WL_OK;
}

int ref_split_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_ALL))
		return WL_ERR;
	int64_t ax, sizes[256];
	if (split_sizes(c, d, &ax, sizes))
		return WL_ERR;
	for (int i = 0; i < c->nout; i++) {
		int64_t od[RT_MAX_DIMS];
		memcpy(od, c->in[0]->dims, sizeof od);
		od[ax] = sizes[i];
		set_out(c->out[i], c->in[0]->dtype, c->in[0]->ndim, od);
	}
	return WL_OK;
}

int ref_split_run(KCall *c, Diag *d)
{
	RTensor *x = c->in[0];
	int64_t ax, sizes[256];
	if (split_sizes(c, d, &ax, sizes))
		return WL_ERR;
	int64_t outer = 1, inner = esz(x);
	for (int i = 0; i < ax; i++)
		outer *= x->dims[i];
	for (int i = (int)ax + 1; i < x->ndim; i++)
		inner *= x->dims[i];
	int64_t xrow = x->dims[ax] * inner, at = 0;
	for (int k = 0; k < c->nout; k++) {
		int64_t yrow = sizes[k] * inner;
		if (c->out[k])
			for (int64_t o = 0; o < outer; o++)
				memcpy((char *)c->out[k]->data + o * yrow, (const char *)x->data + o * xrow + at, (size_t)yrow);
		at += yrow;
	}
	return WL_OK;
}

/* ---------------------------------------------------------------- Tile, Pad */

int ref_tile_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_ALL) || need_in(c, d, 1, DTM(DT_INT64)))
		return WL_ERR;
	RTensor *x = c->in[0];
	int64_t rep[RT_MAX_DIMS], od[RT_MAX_DIMS];
	int n;
	if (read_ints(c, 1, rep, RT_MAX_DIMS, &n, d))
		return WL_ERR;
	if (n != x->ndim)
		return kfail(c, d, "repeats has %d entries for rank %d", n, x->ndim);
	for (int i = 0; i < n; i++) {
		if (rep[i] < 0 || (x->dims[i] > 0 && rep[i] > INT64_MAX / 16 / x->dims[i]))
			return kfail(c, d, "tensor '%s': bad repeat %lld", kin_name(c, 1), (long long)rep[i]);
		od[i] = x->dims[i] * rep[i];
	}
	set_out(c->out[0], x->dtype, n, od);
	return WL_OK;
}

int ref_tile_run(KCall *c, Diag *d)
{
	RTensor *x = c->in[0], *y = c->out[0];
	int64_t n = rt_numel(y), e = esz(x), xs[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0};
	contiguous_strides(x->ndim, x->dims, xs);
	for (int64_t o = 0; o < n; o++) {
		int64_t off = 0;
		for (int k = 0; k < y->ndim; k++)
			off += (idx[k] % x->dims[k]) * xs[k];
		memcpy((char *)y->data + o * e, (const char *)x->data + off * e, (size_t)e);
		for (int k = y->ndim - 1; k >= 0; k--) {
			if (++idx[k] < y->dims[k])
				break;
			idx[k] = 0;
		}
	}
	(void)d;
	return WL_OK;
}

static int pad_params(KCall *c, Diag *d, int64_t *pb, int64_t *pe)
{
	RTensor *x = c->in[0];
	int r = x->ndim;
	int64_t pads[2 * RT_MAX_DIMS], axes[RT_MAX_DIMS];
	int np, na = -1;
	if (c->nin > 1 && c->in[1]) {
		if (read_ints(c, 1, pads, 2 * RT_MAX_DIMS, &np, d))
			return WL_ERR;
		if (c->nin > 3 && c->in[3] && read_ints(c, 3, axes, RT_MAX_DIMS, &na, d))
			return WL_ERR;
	} else {
		const int64_t *a;
		np = attr_ints(c->node, "pads", &a);
		if (np < 0 || np > 2 * RT_MAX_DIMS)
			return kfail(c, d, "pads are required");
		memcpy(pads, a, sizeof(int64_t) * (size_t)np);
	}
	int nax = na >= 0 ? na : r;
	if (np != 2 * nax)
		return kfail(c, d, "pads has %d entries for %d axes", np, nax);
	for (int i = 0; i < r; i++)
		pb[i] = pe[i] = 0;
	for (int i = 0; i < nax; i++) {
		int64_t a = i;
		if (na >= 0 && norm_axis(c, d, axes[i], r, &a))
			return WL_ERR;
		pb[a] = pads[i];
		pe[a] = pads[i + nax];
	}
	return WL_OK;
}

int ref_pad_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_ALL))
		return WL_ERR;
	RTensor *x = c->in[0];
	int64_t pb[RT_MAX_DIMS], pe[RT_MAX_DIMS], od[RT_MAX_DIMS];
	if (pad_params(c, d, pb, pe))
		return WL_ERR;
	for (int i = 0; i < x->ndim; i++) {
		if (pb[i] > ((int64_t)1 << 40) || pe[i] > ((int64_t)1 << 40) || pb[i] < -((int64_t)1 << 40) ||
		    pe[i] < -((int64_t)1 << 40))
			return kfail(c, d, "pads too large");
		od[i] = x->dims[i] + pb[i] + pe[i];
		if (od[i] < 0)
			return kfail(c, d, "pads remove more than the dimension");
	}
	set_out(c->out[0], x->dtype, x->ndim, od);
	return WL_OK;
}

int ref_pad_run(KCall *c, Diag *d)
{
	RTensor *x = c->in[0], *y = c->out[0];
	int64_t pb[RT_MAX_DIMS], pe[RT_MAX_DIMS];
	if (pad_params(c, d, pb, pe))
		return WL_ERR;
	const char *mode = attr_string(c->node, "mode", "constant");
	int m = !strcmp(mode, "constant") ? 0 : !strcmp(mode, "reflect") ? 1 : !strcmp(mode, "edge") ? 2 :
	        !strcmp(mode, "wrap") ? 3 : -1;
	if (m < 0)
		return kfail(c, d, "unknown mode '%s'", mode);
	double cv = 0;
	if (c->nin > 2 && c->in[2] && rt_numel(c->in[2]) > 0)
		cv = get_f64(c->in[2]->data, c->in[2]->dtype, 0);
	else if (c->nin <= 1 || !c->in[1]) {
		float v;
		if (attr_get_float(c, d, "value", 0.0f, &v))
			return WL_ERR;
		cv = v;
	}
	int64_t n = rt_numel(y), e = esz(x), xs[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0};
	contiguous_strides(x->ndim, x->dims, xs);
	for (int k = 0; k < x->ndim; k++)
		if (m != 0 && x->dims[k] == 0 && y->dims[k] > 0)
			return kfail(c, d, "cannot pad an empty dimension in mode '%s'", mode);
	for (int64_t o = 0; o < n; o++) {
		int64_t off = 0;
		bool in = true;
		for (int k = 0; k < y->ndim; k++) {
			int64_t i = idx[k] - pb[k], dim = x->dims[k];
			if (i < 0 || i >= dim) {
				if (m == 0) {
					in = false;
					break;
				} else if (m == 2) {
					i = i < 0 ? 0 : dim - 1;
				} else if (m == 3) {
					i = ((i % dim) + dim) % dim;
				} else {
					if (dim == 1) {
						i = 0;
					} else {
						int64_t per = 2 * (dim - 1);
						i = ((i % per) + per) % per;
						if (i >= dim)
							i = per - i;
					}
				}
			}
			off += i * xs[k];
		}
		if (in)
			memcpy((char *)y->data + o * e, (const char *)x->data + off * e, (size_t)e);
		else
			set_f64(y->data, y->dtype, o, cv);
		for (int k = y->ndim - 1; k >= 0; k--) {
			if (++idx[k] < y->dims[k])
				break;
			idx[k] = 0;
		}
	}
	return WL_OK;
}

/* ---------------------------------------------------------------- Shape, Size */

static void shape_range(const KCall *c, int64_t *s, int64_t *e)
{
	int r = c->in[0]->ndim;
	int64_t a = 0, b = r;
	attr_get_int(c, NULL, "start", 0, &a);
	attr_get_int(c, NULL, "end", r, &b);
	if (a < 0)
		a += r;
	if (b < 0)
		b += r;
	a = a < 0 ? 0 : (a > r ? r : a);
	b = b < 0 ? 0 : (b > r ? r : b);
	*s = a;
	*e = b > a ? b : a;
}

int ref_shape_infer(KCall *c, Diag *d)
{
	if (c->nin < 1 || !c->in[0])
		return kfail(c, d, "input 0 is required");
	int64_t s, e;
	shape_range(c, &s, &e);
	int64_t n = e - s;
	set_out(c->out[0], DT_INT64, 1, &n);
	return WL_OK;
}

int ref_shape_run(KCall *c, Diag *d)
{
	int64_t s, e;
	shape_range(c, &s, &e);
	for (int64_t i = s; i < e; i++)
		((int64_t *)c->out[0]->data)[i - s] = c->in[0]->dims[i];
	(void)d;
	return WL_OK;
}

int ref_size_infer(KCall *c, Diag *d)
{
	if (c->nin < 1 || !c->in[0])
		return kfail(c, d, "input 0 is required");
	set_out(c->out[0], DT_INT64, 0, NULL);
	return WL_OK;
}

int ref_size_run(KCall *c, Diag *d)
{
	*(int64_t *)c->out[0]->data = rt_numel(c->in[0]);
	(void)d;
	return WL_OK;
}

/* ---------------------------------------------------------------- Constant */

typedef struct ConstVal {
	RTensor t;                 /* data points into the attribute or the arena */
} ConstVal;

int ref_const_prepare(KCall *c, Diag *d)
{
	ConstVal *cv = arena_alloc(c->arena, sizeof *cv);
	c->state = cv;
	const Node *n = c->node;
	const Attr *a;
	if ((a = node_attr(n, "value")) && a->type == AT_TENSOR && a->t) {
		const Tensor *t = a->t;
		if (elem_size(t->dtype) == 0 || t->ndim > RT_MAX_DIMS)
			return kfail(c, d, "constant of type %s is not supported",
			             dtype_name(t->dtype) ? dtype_name(t->dtype) : "?");
		cv->t.dtype = t->dtype;
		cv->t.ndim = t->ndim;
		for (int i = 0; i < t->ndim; i++)
			cv->t.dims[i] = t->dims[i];
		size_t need = dtype_nbytes(t->dtype, rt_numel(&cv->t));
		if (t->nbytes < need || (need && !t->data))
			return kfail(c, d, "constant tensor has %zu bytes, expected %zu", t->nbytes, need);
		cv->t.data = arena_alloc(c->arena, need ? need : 1);
		if (need)
			memcpy(cv->t.data, t->data, need);
		cv->t.nbytes = need;
	} else if ((a = node_attr(n, "value_float")) && a->type == AT_FLOAT) {
		cv->t.dtype = DT_FLOAT;
		cv->t.data = arena_alloc(c->arena, 4);
		memcpy(cv->t.data, &a->f, 4);
		cv->t.nbytes = 4;
	} else if ((a = node_attr(n, "value_int")) && a->type == AT_INT) {
		cv->t.dtype = DT_INT64;
		cv->t.data = arena_alloc(c->arena, 8);
		memcpy(cv->t.data, &a->i, 8);
		cv->t.nbytes = 8;
	} else if ((a = node_attr(n, "value_floats")) && a->type == AT_FLOATS) {
		cv->t.dtype = DT_FLOAT;
		cv->t.ndim = 1;
		cv->t.dims[0] = a->n;
		cv->t.data = arena_alloc(c->arena, (size_t)a->n * 4 + 1);
		if (a->n)
			memcpy(cv->t.data, a->floats, (size_t)a->n * 4);
		cv->t.nbytes = (size_t)a->n * 4;
	} else if ((a = node_attr(n, "value_ints")) && a->type == AT_INTS) {
		cv->t.dtype = DT_INT64;
		cv->t.ndim = 1;
		cv->t.dims[0] = a->n;
		cv->t.data = arena_alloc(c->arena, (size_t)a->n * 8 + 1);
		if (a->n)
			memcpy(cv->t.data, a->ints, (size_t)a->n * 8);
		cv->t.nbytes = (size_t)a->n * 8;
	} else {
		return kfail(c, d, "no supported value attribute (value, value_float(s), value_int(s))");
	}
	return WL_OK;
}

int ref_const_infer(KCall *c, Diag *d)
{
	const ConstVal *cv = c->state;
	set_out(c->out[0], cv->t.dtype, cv->t.ndim, cv->t.dims);
	(void)d;
	return WL_OK;
}

int ref_const_run(KCall *c, Diag *d)
{
	const ConstVal *cv = c->state;
	if (cv->t.nbytes)
		memcpy(c->out[0]->data, cv->t.data, cv->t.nbytes);
	(void)d;
	return WL_OK;
}

int ref_cos_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM(DT_INT64)))
		return WL_ERR;
	int64_t shp[RT_MAX_DIMS];
	int n;
	if (read_ints(c, 0, shp, RT_MAX_DIMS, &n, d))
		return WL_ERR;
	for (int i = 0; i < n; i++)
		if (shp[i] < 0)
			return kfail(c, d, "tensor '%s': negative dimension", kin_name(c, 0));
	int dt = DT_FLOAT;
	const Attr *a = node_attr(c->node, "value");
	if (a) {
		if (a->type != AT_TENSOR || !a->t || elem_size(a->t->dtype) == 0 || tensor_numel(a->t) != 1)
			return kfail(c, d, "attribute value must be a one-element numeric tensor");
		dt = a->t->dtype;
	}
	set_out(c->out[0], dt, n, shp);
	return WL_OK;
}

int ref_cos_run(KCall *c, Diag *d)
{
	RTensor *y = c->out[0];
	const Attr *a = node_attr(c->node, "value");
	int64_t n = rt_numel(y), e = esz(y);
	if (!a) {
		memset(y->data, 0, y->nbytes);
		return WL_OK;
	}
	if (!a->t->data || a->t->nbytes < (size_t)e)
		return kfail(c, d, "attribute value has no data");
	for (int64_t i = 0; i < n; i++)
		memcpy((char *)y->data + i * e, a->t->data, (size_t)e);
	return WL_OK;
}

/* ---------------------------------------------------------------- Range */

static int range_count(KCall *c, Diag *d, int64_t *n)
{
	for (int i = 0; i < 3; i++) {
		if (need_in(c, d, i, DTM_NUM))
			return WL_ERR;
		if (rt_numel(c->in[i]) != 1)
			return kfail(c, d, "tensor '%s' must be a scalar", kin_name(c, i));
		if (c->in[i]->dtype != c->in[0]->dtype)
			return kfail(c, d, "start, limit and delta must have one type");
	}
	int dt = c->in[0]->dtype;
	if (dt_is_float(dt)) {
		double s = scalar_f64(c->in[0]), l = scalar_f64(c->in[1]), k = scalar_f64(c->in[2]);
		if (k == 0 || !isfinite(s) || !isfinite(l) || !isfinite(k))
			return kfail(c, d, "bad range (start %g, limit %g, delta %g)", s, l, k);
		double q = ceil((l - s) / k);
		if (q > 1e10)
			return kfail(c, d, "range too long");
		*n = q > 0 ? (int64_t)q : 0;
	} else {
		int64_t s = scalar_i64(c->in[0]), l = scalar_i64(c->in[1]), k = scalar_i64(c->in[2]);
		if (k == 0)
			return kfail(c, d, "delta is 0");
		double q = ceil(((double)l - (double)s) / (double)k);
		if (q > 1e10)
			return kfail(c, d, "range too long");
		*n = q > 0 ? (int64_t)q : 0;
	}
	return WL_OK;
}

int ref_range_infer(KCall *c, Diag *d)
{
	int64_t n;
	if (range_count(c, d, &n))
		return WL_ERR;
	set_out(c->out[0], c->in[0]->dtype, 1, &n);
	return WL_OK;
}

int ref_range_run(KCall *c, Diag *d)
{
	int64_t n;
	if (range_count(c, d, &n))
		return WL_ERR;
	RTensor *y = c->out[0];
	int dt = y->dtype;
	if (dt == DT_FLOAT) {
		/* accumulate like the spec's Loop and ONNX Runtime */
		float v = (float)scalar_f64(c->in[0]), k = (float)scalar_f64(c->in[2]);
		for (int64_t i = 0; i < n; i++) {
			((float *)y->data)[i] = v;
			v += k;
		}
	} else if (dt_is_float(dt)) {
		double v = scalar_f64(c->in[0]), k = scalar_f64(c->in[2]);
		for (int64_t i = 0; i < n; i++) {
			set_f64(y->data, dt, i, v);
			v += k;
		}
	} else {
		int64_t v = scalar_i64(c->in[0]), k = scalar_i64(c->in[2]);
		for (int64_t i = 0; i < n; i++)
			set_i64(y->data, dt, i, v + i * k);
	}
	return WL_OK;
}

/* ---------------------------------------------------------------- Trilu */

int ref_trilu_infer(KCall *c, Diag *d)
{
	if (need_in(c, d, 0, DTM_ALL))
		return WL_ERR;
	if (c->in[0]->ndim < 2)
		return kfail(c, d, "tensor '%s' must have rank >= 2", kin_name(c, 0));
	if (c->nin > 1 && c->in[1] && (need_in(c, d, 1, DTM(DT_INT64)) || rt_numel(c->in[1]) != 1))
		return kfail(c, d, "tensor '%s': k must be an int64 scalar", kin_name(c, 1));
	set_out(c->out[0], c->in[0]->dtype, c->in[0]->ndim, c->in[0]->dims);
	return WL_OK;
}

int ref_trilu_run(KCall *c, Diag *d)
{
	RTensor *x = c->in[0], *y = c->out[0];
	int64_t upper, k = (c->nin > 1 && c->in[1]) ? scalar_i64(c->in[1]) : 0;
	if (attr_get_int(c, d, "upper", 1, &upper))
		return WL_ERR;
	int64_t R = x->dims[x->ndim - 2], C = x->dims[x->ndim - 1], e = esz(x);
	int64_t mats = (R * C != 0) ? rt_numel(x) / (R * C) : 0;
	for (int64_t m = 0; m < mats; m++)
		for (int64_t i = 0; i < R; i++)
			for (int64_t j = 0; j < C; j++) {
				int64_t at = ((m * R + i) * C + j) * e;
				bool keep = upper ? (j - i >= k) : (j - i <= k);
				if (keep)
					memcpy((char *)y->data + at, (const char *)x->data + at, (size_t)e);
				else
					memset((char *)y->data + at, 0, (size_t)e);
			}
	return WL_OK;
}
