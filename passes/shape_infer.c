/* shape_infer.c — dtype and shape inference.
 *
 * requires  topological order; graph inputs typed as declared
 * maintains the graph itself: no node, edge or initializer changes
 * breaks    nothing; fills Value.type of node outputs (in_value_info set
 *           for intermediate values) and refines declared types: a
 *           declared symbolic or unknown dim may become a value
 * errors    bad input, one line naming node and tensor: shapes that cannot
 *           go together (MatMul inner dims, Concat ranks, broadcast of 3
 *           against 4, Reshape element counts, axes out of range, ...) and
 *           inferred types that contradict declared ones
 *
 * Dims are values, symbolic parameters ("N", "batch") or unknown. Ops that
 * keep a dim keep its parameter; broadcasting lets 1 give way, unifies equal
 * parameters and gives unknown for different ones.
 * A small constant folder evaluates shape-computing subgraphs on demand: the
 * contents of int/bool tensors of up to CV_MAX elements, each element a value,
 * a symbolic dim or unknown (Shape of float[N, 4] is {N, 4}). So the target
 * of Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), {-1, 64})) resolves
 * to [N, -1] with -1 balanced against x's symbolic dims. Nothing is rewritten.
 *
 * Ops covered (ai.onnx, any opset; opset-dependent forms are told apart by
 * the attributes and inputs present):
 *   elementwise  Add Sub Mul Div Pow Mod Max Min Sum Mean Equal Less
 *                LessOrEqual Greater GreaterOrEqual And Or Xor Not Where
 *                Sqrt Reciprocal Erf Tanh Sigmoid Neg Abs Exp Log Cos Sin
 *                Floor Ceil Round Relu LeakyRelu Softplus Clip IsNaN IsInf
 *                Cast CastLike Identity Dropout QuantizeLinear DequantizeLinear
 *   reductions   ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd
 *                ReduceSumSquare ReduceL2 (axes attribute or input, keepdims,
 *                noop_with_empty_axes) ArgMax ArgMin Softmax LogSoftmax
 *                CumSum LayerNormalization BatchNormalization TopK
 *   linear       MatMul Gemm Conv (1-D, 2-D, n-D; pads, auto_pad, strides,
 *                dilations, group)
 *   shape        Transpose Reshape (0, -1, allowzero) Flatten Gather
 *                GatherElements GatherND ScatterND Concat Slice Split
 *                Unsqueeze Squeeze Shape (start/end) Size Expand Tile Pad
 *                Trilu Range ConstantOfShape Constant NonZero If (branches)
 *   com.microsoft MatMulNBits Gelu FastGelu BiasGelu SkipLayerNormalization
 *                SimplifiedLayerNormalization SkipSimplifiedLayerNormalization
 *                RotaryEmbedding GroupQueryAttention MultiHeadAttention
 *                Attention
 *   ai.wlower    MatMulNBits Gelu SiLU RMSNorm
 * Other ops (Loop, Scan, Einsum, unknown ops) keep their declared types;
 * bodies of If/Loop/Scan are inferred like the main graph.
 *
 * The pass spans three files (shape_infer.h has a section for each): this
 * one, shape_ops.c (shape and data-movement ops) and shape_fold.c (the
 * constant folder).
 */
#include <stdlib.h>
#include "shape_infer.h"

static void cat(char *b, size_t cap, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void cat(char *b, size_t cap, size_t *len, const char *fmt, ...)
{
	if (*len + 1 >= cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(b + *len, cap - *len, fmt, ap);
	va_end(ap);
	*len = k < 0 ? *len : (*len + (size_t)k >= cap ? cap - 1 : *len + (size_t)k);
}

/* "float[N, 4]" (elem 0: shape only); rotating buffers for messages. */
const char *si_fty(int elem, const Sh *s)
{
	static char buf[6][320];
	static int k;
	char *b = buf[k++ % 6];
	size_t len = 0, cap = sizeof buf[0];
	b[0] = 0;
	if (elem)
		cat(b, cap, &len, "%s", dtype_name(elem) ? dtype_name(elem) : "?");
	if (s->r < 0) {
		cat(b, cap, &len, "%s", elem ? "" : "[unknown rank]");
		return b;
	}
	cat(b, cap, &len, "[");
	for (int i = 0; i < s->r; i++) {
		const Dim *x = &s->d[i];
		const char *sep = i ? ", " : "";
		if (x->kind == DIM_VALUE)
			cat(b, cap, &len, "%s%lld", sep, (long long)x->value);
		else if (x->kind == DIM_PARAM && x->param)
			cat(b, cap, &len, "%s%s", sep, x->param);
		else
			cat(b, cap, &len, "%s?", sep);
	}
	cat(b, cap, &len, "]");
	return b;
}

const char *si_fsh(const Sh *s) { return si_fty(0, s); }

static const char *nlabel(const Node *n)
{
	if (n->name && *n->name)
		return n->name;
	if (n->noutputs && n->outputs[0])
		return n->outputs[0]->name;
	return n->op_type;
}

int si_fail(SI *s, const Node *n, const char *fmt, ...)
{
	char msg[800];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return diag_fail(s->d, "%s: node '%s' (%s): %s", s->path, nlabel(n), n->op_type, msg);
}

int si_naxis(SI *s, const Node *n, int64_t ax, int r, int in_slot, int *out)
{
	if (ax < -r || ax >= r)
		return si_fail(s, n, "axis %lld is out of range for input '%s' of rank %d", (long long)ax,
		               iname(n, in_slot), r);
	*out = (int)(ax < 0 ? ax + r : ax);
	return WL_OK;
}

/* Merges the inferred type into output `slot`'s declared type. */
int si_set_out(SI *s, Node *n, int slot, int elem, const Sh *sh)
{
	Value *v = slot < n->noutputs ? n->outputs[slot] : NULL;
	if (!v)
		return WL_OK;
	Type *t = &v->type;
	if (t->kind != TY_NONE && t->kind != TY_TENSOR)
		return WL_OK;
	if (!dtype_valid(elem))
		elem = DT_UNDEFINED;     /* e.g. Cast to a type number we do not know */
	Sh dec, res;
	bool hasdec = ty_sh(t, &dec);
	if (t->kind == TY_TENSOR && t->elem && elem && t->elem != elem)
		return si_fail(s, n, "output '%s' is declared %s but inferred %s", v->name, si_fty(t->elem, &dec),
		               si_fty(elem, sh));
	if ((t->kind == TY_NONE || !t->elem) && !elem)
		return WL_OK;      /* nothing known about it */
	if (t->kind == TY_TENSOR && t->has_shape && !hasdec) {
		if (!t->elem) t->elem = elem;   /* rank beyond MAXR: keep as declared */
		return WL_OK;
	}
	res = hasdec ? dec : *sh;
	if (hasdec && sh->r >= 0) {
		if (dec.r != sh->r)
			return si_fail(s, n, "output '%s' is declared %s but inferred %s", v->name,
			               si_fty(t->elem, &dec), si_fty(elem ? elem : t->elem, sh));
		for (int i = 0; i < dec.r; i++) {
			if (clash(dec.d[i], sh->d[i]))
				return si_fail(s, n, "output '%s' is declared %s but inferred %s", v->name,
				               si_fty(t->elem, &dec), si_fty(elem ? elem : t->elem, sh));
			if (!known(dec.d[i]) && (known(sh->d[i]) || dec.d[i].kind == DIM_UNKNOWN))
				res.d[i] = sh->d[i];
		}
	}
	Type nt = {0};
	nt.kind = TY_TENSOR;
	nt.elem = t->kind == TY_TENSOR && t->elem ? t->elem : elem;
	nt.denotation = t->kind == TY_TENSOR ? t->denotation : NULL;
	if (res.r >= 0) {
		nt.has_shape = true;
		nt.rank = res.r;
		nt.dims = arena_alloc(s->m->arena, (size_t)(res.r ? res.r : 1) * sizeof *nt.dims);
		for (int i = 0; i < res.r; i++)
			nt.dims[i] = res.d[i];
		if (type_shape_known(&nt) && type_numel(&nt) < 0)
			return si_fail(s, n, "output '%s' would have shape %s: more than 2^63 elements", v->name,
			               si_fsh(&res));
	}
	if (!type_equal(&nt, t)) {
		*t = nt;
		s->changed++;
	}
	if (!v->is_output && !v->is_input && !v->init)
		v->in_value_info = true;
	return WL_OK;
}

/* Multidirectional broadcast of a (input ia) and b (input ib, or the
 * constant named bname). */
int si_bcast(SI *s, Node *n, Sh *o, const Sh *a, const char *an, const Sh *b, const char *bn)
{
	if (a->r < 0 || b->r < 0) {
		o->r = -1;
		return WL_OK;
	}
	Sh t;
	t.r = a->r > b->r ? a->r : b->r;
	for (int i = 0; i < t.r; i++) {
		int ja = i - (t.r - a->r), jb = i - (t.r - b->r);
		Dim x = ja >= 0 ? a->d[ja] : dv(1), y = jb >= 0 ? b->d[jb] : dv(1);
		if (isv(x, 1)) t.d[i] = y;
		else if (isv(y, 1)) t.d[i] = x;
		else if (clash(x, y))
			return si_fail(s, n, "input '%s' has shape %s but input '%s' has shape %s: %lld and %lld do not broadcast",
			               an, si_fsh(a), bn, si_fsh(b), (long long)x.value, (long long)y.value);
		else if (known(x) || known(y)) t.d[i] = known(x) ? x : y;
		else t.d[i] = same(x, y) ? x : du();
	}
	*o = t;
	return WL_OK;
}

int si_same_elem(SI *s, Node *n, int i, int j)
{
	int a = ielem(n, i), b = ielem(n, j);
	if (a && b && a != b)
		return si_fail(s, n, "input '%s' has type %s but input '%s' has type %s", iname(n, j),
		               dtype_name(b), iname(n, i), dtype_name(a));
	return WL_OK;
}

static int infer_reduce(SI *s, Node *n, const Sh *a, bool arg)
{
	int64_t ax[MAXR];
	int k;
	bool keep = attr_int(n, "keepdims", 1) != 0, red[MAXR] = {0};
	Sh o;
	int elem = arg ? DT_INT64 : ielem(n, 0);
	o.r = -1;
	if (arg) {
		ax[0] = attr_int(n, "axis", 0);
		k = 1;
	} else
		k = si_ints_of(s, n, "axes", 1, ax, MAXR);
	if (a->r < 0 || (k == -1 && !keep))
		return si_set_out(s, n, 0, elem, &o);
	if (k == -1) {
		o.r = a->r;
		for (int i = 0; i < a->r; i++)
			o.d[i] = du();
		return si_set_out(s, n, 0, elem, &o);
	}
	if (k <= 0 && attr_int(n, "noop_with_empty_axes", 0))
		return si_set_out(s, n, 0, elem, a);
	for (int i = 0; i < k; i++) {
		int x;
		if (si_naxis(s, n, ax[i], a->r, 0, &x))
			return WL_ERR;
		red[x] = true;
	}
	o.r = 0;
	for (int i = 0; i < a->r; i++)
		if (!red[i] && k > 0)
			o.d[o.r++] = a->d[i];
		else if (keep)
			o.d[o.r++] = dv(1);
	return si_set_out(s, n, 0, elem, &o);
}

static int infer_matmul(SI *s, Node *n, const Sh *a, const Sh *b, Sh *o)
{
	o->r = -1;
	if (a->r < 0 || b->r < 0)
		return WL_OK;
	if (a->r == 0 || b->r == 0)
		return si_fail(s, n, "input '%s' has shape %s and input '%s' has shape %s: MatMul needs rank >= 1",
		               iname(n, 0), si_fsh(a), iname(n, 1), si_fsh(b));
	Sh A = *a, B = *b, ba, bb, bo;
	if (A.r == 1) { A.r = 2; A.d[1] = a->d[0]; A.d[0] = dv(1); }
	if (B.r == 1) { B.r = 2; B.d[0] = b->d[0]; B.d[1] = dv(1); }
	if (clash(A.d[A.r - 1], B.d[B.r - 2]))
		return si_fail(s, n, "input '%s' has shape %s but input '%s' has shape %s: inner dimensions %lld and %lld differ",
		               iname(n, 0), si_fsh(a), iname(n, 1), si_fsh(b), (long long)A.d[A.r - 1].value,
		            (long long)B.d[B.r - 2].value);
	ba = A; ba.r -= 2;
	bb = B; bb.r -= 2;
	if (si_bcast(s, n, &bo, &ba, iname(n, 0), &bb, iname(n, 1)))
		return WL_ERR;
	if (bo.r + 2 > MAXR)
		return WL_OK;
	*o = bo;
	if (a->r > 1) o->d[o->r++] = A.d[A.r - 2];
	if (b->r > 1) o->d[o->r++] = B.d[B.r - 1];
	return WL_OK;
}

static int infer_conv(SI *s, Node *n, const Sh *a, Sh *o)
{
	Sh w;
	bool rw = ish(n, 1, &w);
	o->r = -1;
	if (a->r < 0)
		return WL_OK;
	if (a->r < 3)
		return si_fail(s, n, "input '%s' has shape %s but Conv needs rank >= 3", iname(n, 0), si_fsh(a));
	if (rw && w.r != a->r)
		return si_fail(s, n, "input '%s' has shape %s but weight '%s' has shape %s: ranks differ",
		               iname(n, 0), si_fsh(a), iname(n, 1), si_fsh(&w));
	int ns = a->r - 2;
	int64_t group = attr_int(n, "group", 1);
	if (rw && known(a->d[1]) && known(w.d[1]) && a->d[1].value != w.d[1].value * group)
		return si_fail(s, n, "input '%s' has shape %s but weight '%s' has shape %s: %lld channels, expected %lld x group %lld",
		               iname(n, 0), si_fsh(a), iname(n, 1), si_fsh(&w), (long long)a->d[1].value,
		            (long long)w.d[1].value, (long long)group);
	const int64_t *ks = NULL, *pads = NULL, *str = NULL, *dil = NULL;
	int nk = attr_ints(n, "kernel_shape", &ks), np = attr_ints(n, "pads", &pads);
	int nst = attr_ints(n, "strides", &str), nd = attr_ints(n, "dilations", &dil);
	const char *ap = attr_string(n, "auto_pad", "NOTSET");
	bool same_pad = strncmp(ap, "SAME", 4) == 0, valid = strcmp(ap, "VALID") == 0;
	o->r = a->r;
	o->d[0] = a->d[0];
	o->d[1] = rw ? w.d[0] : du();
	for (int i = 0; i < ns; i++) {
		Dim x = a->d[2 + i];
		int64_t k = nk == ns ? ks[i] : (rw && known(w.d[2 + i]) ? w.d[2 + i].value : -1);
		int64_t st = nst == ns ? str[i] : 1, dl = nd == ns ? dil[i] : 1;
		int64_t pb = np == 2 * ns ? pads[i] : 0, pe = np == 2 * ns ? pads[i + ns] : 0;
		if (st <= 0 || dl <= 0)
			return si_fail(s, n, "strides and dilations must be positive");
		int64_t ek = k < 0 ? -1 : (k - 1) * dl + 1;
		o->d[2 + i] = du();
		if (same_pad)
			o->d[2 + i] = known(x) ? dv((x.value + st - 1) / st) : st == 1 ? x : du();
		else if (!known(x) && st == 1 && !valid && ek >= 0 && pb + pe == ek - 1)
			o->d[2 + i] = x;
		else if (known(x) && ek >= 0) {
			int64_t span = x.value + (valid ? 0 : pb + pe);
			if (span < ek)
				return si_fail(s, n, "input '%s' has shape %s: spatial dimension %d (%lld, padded %lld) is smaller than the kernel (%lld)",
				               iname(n, 0), si_fsh(a), i, (long long)x.value, (long long)span, (long long)ek);
			o->d[2 + i] = dv((span - ek) / st + 1);
		}
	}
	return WL_OK;
}

/* Y, then statistics of shape X[:axis] + 1s: LayerNormalization & co. */
static int infer_norm(SI *s, Node *n, const Sh *a, int64_t axis, const int *slots, int nslots)
{
	int elem = ielem(n, 0), ax = 0;
	Sh st = *a;
	if (a->r >= 0) {
		if (si_naxis(s, n, axis, a->r, 0, &ax))
			return WL_ERR;
		for (int i = ax; i < a->r; i++)
			st.d[i] = dv(1);
	}
	for (int k = 0; k < nslots; k++)
		if (si_set_out(s, n, slots[k], DT_FLOAT, &st))
			return WL_ERR;
	return si_set_out(s, n, 0, elem, a);
}

static int infer_attention(SI *s, Node *n, const Sh *q)
{
	int elem = ielem(n, 0);
	int64_t nh = attr_int(n, "num_heads", 0), kvh = attr_int(n, "kv_num_heads", nh);
	Sh k, v, pk, o, pr;
	bool rk = ish(n, 1, &k), rv = ish(n, 2, &v);
	if (q->r < 0 || nh <= 0)
		return WL_OK;
	Dim B = q->d[0], S = q->r > 1 ? q->d[1] : du(), Dq = du(), Dv = du(), L = du(), T = du(), P = dv(0);
	if (n->op == OP_MsGroupQueryAttention) {
		if (q->r != 3)
			return si_fail(s, n, "query '%s' has shape %s but must have rank 3", iname(n, 0), si_fsh(q));
		Dim hs = ddiv(q->d[2], in(n, 1) ? nh : nh + 2 * kvh);
		Dq = dmul(dv(nh), hs);
		L = rk && k.r == 3 ? k.d[1] : S;
		int64_t tot;
		bool tk = si_civals(s, n, 6, &tot, 1) == 1;
		if (ish(n, 3, &pk) && pk.r == 4)
			T = tk && known(pk.d[2]) ? dv(pk.d[2].value > tot ? pk.d[2].value : tot) : du();
		else
			T = tk ? dv(tot) : L;
		o.r = 3; o.d[0] = B; o.d[1] = S; o.d[2] = Dq;
		pr.r = 4; pr.d[0] = B; pr.d[1] = dv(kvh); pr.d[2] = T; pr.d[3] = hs;
		int pe = ielem(n, 3) ? ielem(n, 3) : elem;
		if (si_set_out(s, n, 1, pe, &pr) || si_set_out(s, n, 2, pe, &pr))
			return WL_ERR;
		return si_set_out(s, n, 0, elem, &o);
	}
	if (n->op == OP_MsAttention) {
		const int64_t *qkv;
		Sh w;
		if (attr_ints(n, "qkv_hidden_sizes", &qkv) == 3) Dq = dv(qkv[0]), Dv = dv(qkv[2]);
		else if (ish(n, 1, &w) && w.r == 2) Dq = Dv = ddiv(w.d[1], 3);
		if (ish(n, 4, &pk) && pk.r == 5) P = pk.d[3];
		o.r = 3; o.d[0] = B; o.d[1] = S; o.d[2] = Dv;
		pr.r = 5; pr.d[0] = dv(2); pr.d[1] = B; pr.d[2] = dv(nh); pr.d[3] = dadd(P, S); pr.d[4] = ddiv(Dq, nh);
		if (si_set_out(s, n, 1, elem, &pr))
			return WL_ERR;
		return si_set_out(s, n, 0, elem, &o);
	}
	/* MultiHeadAttention */
	if (q->r == 5) {
		Dq = Dv = dmul(q->d[2], q->d[4]);
		L = S;
	} else if (q->r == 3) {
		Dq = q->d[2];
		if (rk && k.r == 5) Dv = dmul(k.d[2], k.d[4]), L = k.d[1];
		else if (rv && v.r == 3) Dv = v.d[2], L = v.d[1];
		else if (rv && v.r == 4) Dv = dmul(dv(nh), v.d[3]), L = v.d[2];
	} else
		return si_fail(s, n, "query '%s' has shape %s but must have rank 3 or 5", iname(n, 0), si_fsh(q));
	if (ish(n, 6, &pk) && pk.r == 4) P = pk.d[2];
	T = dadd(P, L);
	o.r = 3; o.d[0] = B; o.d[1] = S; o.d[2] = Dv;
	if (rk && k.r == 4 && rv && v.r == 4) {   /* key/value already BNSH */
		if (si_set_out(s, n, 1, elem, &k) || si_set_out(s, n, 2, elem, &v))
			return WL_ERR;
		T = k.d[2];
	} else {
		pr.r = 4; pr.d[0] = B; pr.d[1] = dv(nh); pr.d[2] = T; pr.d[3] = ddiv(Dq, nh);
		if (si_set_out(s, n, 1, elem, &pr))
			return WL_ERR;
		pr.d[3] = ddiv(Dv, nh);
		if (si_set_out(s, n, 2, elem, &pr))
			return WL_ERR;
	}
	pr.r = 4; pr.d[0] = B; pr.d[1] = dv(nh); pr.d[2] = S; pr.d[3] = T;
	if (si_set_out(s, n, 3, elem, &pr))
		return WL_ERR;
	return si_set_out(s, n, 0, elem, &o);
}

/* Output i of If: the branches' types where they agree. */
static int infer_if(SI *s, Node *n)
{
	Attr *tb = node_attr(n, "then_branch"), *eb = node_attr(n, "else_branch");
	if (!tb || !eb || tb->type != AT_GRAPH || eb->type != AT_GRAPH || !tb->g || !eb->g)
		return WL_OK;
	for (int i = 0; i < n->noutputs && i < tb->g->noutputs && i < eb->g->noutputs; i++) {
		Type *x = &tb->g->outputs[i]->type, *y = &eb->g->outputs[i]->type;
		Sh a, b, o;
		if (x->kind != TY_TENSOR || y->kind != TY_TENSOR || x->elem != y->elem)
			continue;
		ty_sh(x, &a);
		ty_sh(y, &b);
		o.r = a.r == b.r ? a.r : -1;
		for (int k = 0; k < o.r; k++)
			o.d[k] = same(a.d[k], b.d[k]) ? a.d[k] : du();
		if (si_set_out(s, n, i, x->elem, &o))
			return WL_ERR;
	}
	return WL_OK;
}

/* ---------------------------------------------------------------- per node */

static int infer_node(SI *s, Node *n)
{
	Sh a, b, o, t;
	int e0 = ielem(n, 0);
	int64_t iv[1];
	int ax = 0;
	ish(n, 0, &a);
	o.r = -1;
	switch (n->op) {
	case OP_Sqrt: case OP_Reciprocal: case OP_Erf: case OP_Tanh: case OP_Sigmoid: case OP_Neg:
	case OP_Abs: case OP_Exp: case OP_Log: case OP_Cos: case OP_Sin: case OP_Floor: case OP_Ceil:
	case OP_Round: case OP_Relu: case OP_LeakyRelu: case OP_Softplus: case OP_Clip:
	case OP_Identity: case OP_Trilu: case OP_CumSum:
	case OP_ScatterND: case OP_BatchNormalization: case OP_Gelu: case OP_MsGelu: case OP_MsFastGelu:
	case OP_MsRotaryEmbedding: case OP_WlGelu: case OP_WlSiLU: case OP_WlRMSNorm:
		return si_set_out(s, n, 0, e0, &a);
	case OP_Softmax: case OP_LogSoftmax: case OP_Hardmax:
		/* the default (1 before opset 13, -1 since) is valid for any rank >= 2 */
		if (a.r >= 0 && node_attr(n, "axis") && si_naxis(s, n, attr_int(n, "axis", -1), a.r, 0, &ax))
			return WL_ERR;
		return si_set_out(s, n, 0, e0, &a);
	case OP_Not: case OP_IsNaN: case OP_IsInf:
		return si_set_out(s, n, 0, DT_BOOL, &a);
	case OP_Dropout:
		return si_set_out(s, n, 0, e0, &a) || si_set_out(s, n, 1, DT_BOOL, &a) ? WL_ERR : WL_OK;
	case OP_Cast:
		return si_set_out(s, n, 0, (int)attr_int(n, "to", 0), &a);
	case OP_CastLike:
		return si_set_out(s, n, 0, ielem(n, 1), &a);
	case OP_QuantizeLinear:
		return si_set_out(s, n, 0, ielem(n, 2) ? ielem(n, 2)
		                  : attr_int(n, "output_dtype", 0) ? (int)attr_int(n, "output_dtype", 0) : DT_UINT8, &a);
	case OP_DequantizeLinear:
		return si_set_out(s, n, 0, ielem(n, 1), &a);
	case OP_Add: case OP_Sub: case OP_Mul: case OP_Div: case OP_Pow: case OP_Mod: case OP_Max:
	case OP_Min: case OP_Sum: case OP_Mean: case OP_Equal: case OP_Less: case OP_LessOrEqual:
	case OP_Greater: case OP_GreaterOrEqual: case OP_And: case OP_Or: case OP_Xor:
	case OP_MsBiasGelu:
		o = a;
		for (int i = 1; i < n->ninputs; i++) {
			if (n->op != OP_Pow && si_same_elem(s, n, 0, i))
				return WL_ERR;
			ish(n, i, &b);
			if (si_bcast(s, n, &o, &o, iname(n, i - 1), &b, iname(n, i)))
				return WL_ERR;
		}
		return si_set_out(s, n, 0, n->op >= OP_Equal && n->op <= OP_Xor ? DT_BOOL : e0, &o);
	case OP_Where:
		if (si_same_elem(s, n, 1, 2))
			return WL_ERR;
		ish(n, 1, &b);
		ish(n, 2, &t);
		if (si_bcast(s, n, &o, &a, iname(n, 0), &b, iname(n, 1)) ||
		    si_bcast(s, n, &o, &o, iname(n, 1), &t, iname(n, 2)))
			return WL_ERR;
		return si_set_out(s, n, 0, ielem(n, 1), &o);
	case OP_ReduceMean: case OP_ReduceSum: case OP_ReduceMax: case OP_ReduceMin:
	case OP_ReduceProd: case OP_ReduceSumSquare: case OP_ReduceL2:
		return infer_reduce(s, n, &a, false);
	case OP_ArgMax: case OP_ArgMin:
		return infer_reduce(s, n, &a, true);
	case OP_LayerNormalization: {
		static const int st[] = {1, 2};
		return infer_norm(s, n, &a, attr_int(n, "axis", -1), st, 2);
	}
	case OP_MsSimplifiedLayerNormalization: {
		static const int st[] = {1};
		return infer_norm(s, n, &a, attr_int(n, "axis", -1), st, 1);
	}
	case OP_MsSkipLayerNormalization: case OP_MsSkipSimplifiedLayerNormalization: {
		static const int st[] = {1, 2};
		ish(n, 2, &b);
		if (a.r > 0 && b.r > 0 && clash(a.d[a.r - 1], b.d[b.r - 1]))
			return si_fail(s, n, "input '%s' has shape %s but gamma '%s' has shape %s", iname(n, 0),
			               si_fsh(&a), iname(n, 2), si_fsh(&b));
		return si_set_out(s, n, 3, e0, &a) ? WL_ERR : infer_norm(s, n, &a, -1, st, 2);
	}
	case OP_TopK:
		o = a;
		if (a.r >= 0) {
			if (si_naxis(s, n, attr_int(n, "axis", -1), a.r, 0, &ax))
				return WL_ERR;
			o.d[ax] = si_civals(s, n, 1, iv, 1) == 1 ? dv(iv[0]) : du();
		}
		return si_set_out(s, n, 0, e0, &o) || si_set_out(s, n, 1, DT_INT64, &o) ? WL_ERR : WL_OK;
	case OP_MatMul:
		ish(n, 1, &b);
		if (si_same_elem(s, n, 0, 1) || infer_matmul(s, n, &a, &b, &o))
			return WL_ERR;
		return si_set_out(s, n, 0, e0, &o);
	case OP_Gemm: {
		ish(n, 1, &b);
		if (si_same_elem(s, n, 0, 1))
			return WL_ERR;
		if (a.r >= 0 && b.r >= 0) {
			if (a.r != 2 || b.r != 2)
				return si_fail(s, n, "input '%s' has shape %s and input '%s' has shape %s: Gemm needs rank 2",
				               iname(n, 0), si_fsh(&a), iname(n, 1), si_fsh(&b));
			int ta = attr_int(n, "transA", 0) != 0, tb = attr_int(n, "transB", 0) != 0;
			if (clash(a.d[1 - ta], b.d[tb]))
				return si_fail(s, n, "input '%s' has shape %s but input '%s' has shape %s: inner dimensions differ%s",
				               iname(n, 0), si_fsh(&a), iname(n, 1), si_fsh(&b), ta || tb ? " (after transA/transB)" : "");
			o.r = 2;
			o.d[0] = a.d[ta];
			o.d[1] = b.d[1 - tb];
			if (ish(n, 2, &t) && si_bcast(s, n, &b, &o, "A*B", &t, iname(n, 2)))
				return WL_ERR;
		}
		return si_set_out(s, n, 0, e0, &o);
	}
	case OP_WlQMatMul: {
		/* (xq [..., K] int8, x_scale, x_zero_point, wq [K, N] int8, w_scale [, y_scale, y_zero_point])
		 * -> float [..., N], or int8 with y_scale */
		const Value *wv = n->ninputs > 3 ? n->inputs[3] : NULL;
		o = a;
		if (o.r >= 1)
			o.d[o.r - 1] = wv && wv->init && wv->init->ndim == 2 ? dv(wv->init->dims[1]) : du();
		return si_set_out(s, n, 0, n->ninputs > 5 && n->inputs[5] ? DT_INT8 : DT_FLOAT, &o);
	}
	case OP_WlQGather: {
		/* (table [V, D] int8, scale [V] float, ids) -> float [ids..., D] */
		ish(n, 2, &b);
		o.r = -1;
		if (b.r >= 0 && a.r == 2 && b.r + 1 <= MAXR) {
			o = b;
			o.d[o.r++] = a.d[1];
		}
		return si_set_out(s, n, 0, DT_FLOAT, &o);
	}
	case OP_MsMatMulNBits: case OP_WlMatMulNBits: {
		int64_t K = attr_int(n, "K", -1), N = attr_int(n, "N", -1);
		if (a.r >= 1 && K >= 0 && clash(a.d[a.r - 1], dv(K)))
			return si_fail(s, n, "input '%s' has shape %s but K is %lld", iname(n, 0), si_fsh(&a), (long long)K);
		/* ai.wlower bits = 32: the weight is the float matrix [K, N] ([N, K] with trans_b,
		 * [K, N/groups] with groups: the block diagonal without its zero blocks) */
		const Value *wv = n->ninputs > 1 ? n->inputs[1] : NULL;
		bool tb = attr_int(n, "trans_b", 0) != 0;
		int64_t G = n->op == OP_WlMatMulNBits ? attr_int(n, "groups", 1) : 1;
		if (G < 1)
			return si_fail(s, n, "groups = %lld must be >= 1", (long long)G);
		if (G > 1 && (K < 0 || N < 0 || K % G || N % G))
			return si_fail(s, n, "groups = %lld: K = %lld and N = %lld must be multiples of it", (long long)G,
			               (long long)K, (long long)N);
		int64_t NB = N / G;
		if (n->op == OP_WlMatMulNBits && attr_int(n, "bits", 4) == 32 && wv && wv->init &&
		    (wv->init->ndim != 2 || wv->init->dims[0] != (tb ? N : K) || wv->init->dims[1] != (tb ? K : NB)))
			return si_fail(s, n, "weight '%s' is not [%lld, %lld] (%s) for bits = 32", wv->name,
			               (long long)(tb ? N : K), (long long)(tb ? K : NB),
			               tb ? "N, K: trans_b" : G > 1 ? "K, N/groups" : "K, N");
		o = a;
		if (o.r >= 1)
			o.d[o.r - 1] = N >= 0 ? dv(N) : du();
		/* ai.wlower: `splits` gives one output per part of N (fused QKV) */
		const int64_t *sp;
		int ns = n->op == OP_WlMatMulNBits ? attr_ints(n, "splits", &sp) : 0;
		if (ns > 0) {
			int64_t sum = 0;
			for (int i = 0; i < ns; i++)
				sum += sp[i];
			if (ns != n->noutputs || (N >= 0 && sum != N))
				return si_fail(s, n, "splits has %d parts summing to %lld, but the node has %d outputs and N %lld",
				               ns, (long long)sum, n->noutputs, (long long)N);
			for (int i = 0; i < ns; i++) {
				if (o.r >= 1)
					o.d[o.r - 1] = dv(sp[i]);
				if (si_set_out(s, n, i, e0, &o))
					return WL_ERR;
			}
			return WL_OK;
		}
		return si_set_out(s, n, 0, e0, &o);
	}
	case OP_Conv:
		if (infer_conv(s, n, &a, &o))
			return WL_ERR;
		return si_set_out(s, n, 0, e0, &o);
	case OP_NonZero:
		o.r = 2;
		o.d[0] = a.r >= 0 ? dv(a.r) : du();
		o.d[1] = du();
		return si_set_out(s, n, 0, DT_INT64, &o);
	case OP_If:
		return infer_if(s, n);
	case OP_MsGroupQueryAttention: case OP_MsMultiHeadAttention: case OP_MsAttention:
		return infer_attention(s, n, &a);
	default:
		return si_infer_shape_op(s, n);
	}
}

/* ---------------------------------------------------------------- driver */

static int infer_graph(SI *s, Graph *g)
{
	for (int i = 0; i < g->ninits; i++) {
		Value *v = g->inits[i];
		if (v->type.kind == TY_NONE && v->init)
			type_set_tensor(s->m->arena, &v->type, v->init->dtype, v->init->ndim, v->init->dims);
	}
	FOR_NODES(g, n) {
		FOR_SUBGRAPHS(n, sg)
			if (infer_graph(s, sg))
				return WL_ERR;
		if (infer_node(s, n))
			return WL_ERR;
	}
	return WL_OK;
}

static void si_init(SI *s, Module *m, Diag *d, const char *path)
{
	memset(s, 0, sizeof *s);
	s->m = m;
	s->d = d;
	s->path = path ? path : m->path;
	s->tmp = arena_new();
	s->ncv = m->next_value_id;
	s->cv = calloc((size_t)s->ncv + 1, sizeof *s->cv);
	WL_ASSERT(s->tmp && s->cv);
}

static void si_done(SI *s)
{
	free(s->cv);
	arena_free(s->tmp);
}

int shape_infer_node(Node *n, Diag *d)
{
	SI s;
	si_init(&s, n->graph->mod, d, NULL);
	int rc = infer_node(&s, n);
	si_done(&s);
	return rc;
}

int pass_shape_infer(Module *m, PassContext *ctx, Diag *d)
{
	SI s;
	si_init(&s, m, d, ctx && ctx->model_path ? ctx->model_path : NULL);
	int rc = infer_graph(&s, m->graph);
	if (ctx)
		ctx->changed += s.changed;
	si_done(&s);
	return rc;
}
