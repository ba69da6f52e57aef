/* conv.c — ConvStem (Whisper's two convolutions, kernel 3, strides 1 and 2,
 * pads 1, GELU after each, plus the positional table) → whisper::convStem
 * (ccl/whisper.hpp). Blobs: per convolution "weight" [D][3·Cin] int32 rows
 * (k = tap·Cin + c) and "bias" {bias, qa + E} pairs (util.c), then "table":
 * the positions in their own format. The hidden GELU output's format fh comes
 * from a bound on |conv1| given the weights and x's format.
 * MACs B·(F·C·3·D + F2·D·3·D); ALU ops B·(F·D + F2·D)·4 + B·F2·D.
 */
#include <math.h>
#include <stdlib.h>
#include "ops.h"

typedef struct CS { int64_t B, C, F, F2, D; int fh, fp; } CS;

static int cs_dims(const Node *n, CS *s, Diag *d)
{
	Value *x = nin(n, 0);
	if (ck_need_shape(n, x, d) || rank_of(x) != 3)
		return KFAIL(n, "tensor '%s': [B, C, F] with a static shape required", x->name);
	for (int i = 1; i < 6; i++)
		if (ck_need_const(n, i, d))
			return WL_ERR;
	const int64_t *st, *pd;
	int ns = attr_ints(n, "strides", &st), np = attr_ints(n, "pads", &pd);
	if ((ns >= 0 && (ns != 2 || st[0] != 1 || st[1] != 2)) || (np >= 0 && (np != 2 || pd[0] != 1 || pd[1] != 1)))
		return KFAIL(n, "only strides [1, 2] and pads [1, 1] are supported");
	s->B = dim_of(x, 0);
	s->C = dim_of(x, 1);
	s->F = dim_of(x, 2);
	s->F2 = (s->F - 1) / 2 + 1;
	const Tensor *w1 = nin(n, 1)->init;
	s->D = w1->ndim == 3 ? w1->dims[0] : -1;
	if (w1->ndim != 3 || w1->dims[1] != s->C || w1->dims[2] != 3 || tnumel(nin(n, 3)->init) != s->D * s->D * 3 ||
	    tnumel(nin(n, 2)->init) != s->D || tnumel(nin(n, 4)->init) != s->D ||
	    tnumel(nin(n, 5)->init) != s->F2 * s->D)
		return KFAIL(n, "tensor '%s': weight/bias/positional shapes do not match", nin(n, 1)->name);
	/* h1 = GELU(conv1) bound from the weights and x's format */
	int qx = ck_work_q(x);
	double xmax = ldexp(1.0, 31 - qx), hb = 0.2;
	for (int64_t o = 0; o < s->D; o++) {
		double acc = fabs(tensor_get_f64(nin(n, 2)->init, o));
		for (int64_t i = 0; i < s->C * 3; i++)
			acc += fabs(tensor_get_f64(w1, o * s->C * 3 + i)) * xmax;
		hb = fmax(hb, acc);
	}
	s->fh = ck_const_fbits(hb);
	s->fp = ck_const_fbits(ck_maxabs(nin(n, 5)->init));
	return WL_OK;
}

typedef struct CWCtx { const Tensor *t; int64_t Cin; } CWCtx;

/* packed k = tap·Cin + c  ←  w[o][c][tap] */
static double cw_get(const void *p, int64_t o, int64_t k)
{
	const CWCtx *w = p;
	int64_t tap = k / w->Cin, ch = k % w->Cin;
	return tensor_get_f64(w->t, (o * w->Cin + ch) * 3 + tap);
}

int ck_conv_stem_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	CS s;
	if (cs_dims(n, &s, d))
		return WL_ERR;
	int qx = ck_work_q(nin(n, 0));
	double *b = ck_calloc((size_t)s.D, sizeof *b);
	for (int k = 0; k < 2; k++) {
		int64_t Cin = k ? s.D : s.C;
		const Tensor *wt = nin(n, k ? 3 : 1)->init, *bt = nin(n, k ? 4 : 2)->init;
		for (int64_t o = 0; o < s.D; o++)
			b[o] = tensor_get_f64(bt, o);
		CclBlob *w = ck_add_blob(ki, "weight", (size_t)(s.D * Cin * 3) * 4);
		CclBlob *c = ck_add_blob(ki, "bias", (size_t)s.D * 16);
		CWCtx cw = {wt, Cin};
		ck_pack_rows((int32_t *)w->data, s.D, Cin * 3, cw_get, &cw, k ? s.fh : qx, b, (int64_t *)c->data);
	}
	free(b);
	ck_pack_plain(ki, "table", nin(n, 5)->init, s.fp);
	ki->macs = (uint64_t)(s.B * (s.F * s.C * 3 * s.D + s.F2 * s.D * 3 * s.D));
	ki->alu_ops = (uint64_t)(s.B * (s.F * s.D + s.F2 * s.D) * 4 + s.B * s.F2 * s.D);
	ki->scratch_bytes = (uint64_t)(4 * ((s.F + 2) * s.C + (s.F + 2) * s.D));
	return WL_OK;
}

int ck_conv_stem_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	CS s;
	char x[48], y[24];
	if (cs_dims(n, &s, d) || ck_fq(n, nin(n, 0), d, x) || ck_fo(n, nout(n, 0), d, y))
		return WL_ERR;
	fprintf(f, "%s<%lld, %lld, %lld, %lld, %s, %d, %d, %s>(c, %s, %s, %s, %s, %s, %s, %s, %s);\n", op->cpp,
	        (long long)s.B, (long long)s.C, (long long)s.F, (long long)s.D, x, s.fh, s.fp, y, a->in[0], a->blob[0],
	        a->blob[1], a->blob[2], a->blob[3], a->blob[4], a->out[0], ck_arg(a->scratch));
	return WL_OK;
}
