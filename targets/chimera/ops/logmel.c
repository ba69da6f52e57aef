/* logmel.c — LogMel (Whisper's front end: Hann 400, hop 160, |STFT|², mel
 * filters, log10, clamp to max − 8, (x + 4)/4) → whisper::logMel
 * (ccl/whisper.hpp). Blobs: "table" the windowed DFT basis (cos then sin,
 * [201][400] Q28 each), "gamma" the mel filters [M][201] in their own format.
 * MACs fr·400·201·2 + fr·201·M; ALU ops fr·201·2 + fr·M·4.
 */
#include <math.h>
#include "ops.h"

typedef struct LM { int64_t N, M, frames; int ff; } LM;

static int lm_dims(const Node *n, LM *l, Diag *d)
{
	Value *w = nin(n, 0);
	if (ck_need_shape(n, w, d) || ck_need_const(n, 1, d))
		return WL_ERR;
	if (attr_int(n, "n_fft", 400) != 400 || attr_int(n, "hop", 160) != 160)
		return KFAIL(n, "only n_fft 400 and hop 160 are supported");
	if (rank_of(w) != 2 || dim_of(w, 0) != 1 || dim_of(w, 1) <= 200)
		return KFAIL(n, "tensor '%s': expected [1, samples > 200]", w->name);
	l->N = dim_of(w, 1);
	l->M = attr_int(n, "n_mels", 80);
	l->frames = l->N / 160;
	const Tensor *t = nin(n, 1)->init;
	if (tnumel(t) != l->M * 201)
		return KFAIL(n, "tensor '%s': expected [%lld, 201]", nin(n, 1)->name, (long long)l->M);
	double mx = 0;
	for (int64_t m = 0; m < l->M; m++) {
		double s = 0;
		for (int k = 0; k < 201; k++)
			s += fabs(tensor_get_f64(t, m * 201 + k));
		mx = fmax(mx, s);
	}
	l->ff = ck_const_fbits(mx);
	return WL_OK;
}

int ck_logmel_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	LM l;
	if (lm_dims(n, &l, d))
		return WL_ERR;
	CclBlob *t = ck_add_blob(ki, "table", (size_t)2 * 201 * 400 * 4);
	int32_t *p = (int32_t *)t->data;
	for (int k = 0; k < 201; k++)
		for (int i = 0; i < 400; i++) {
			double win = 0.5 - 0.5 * cos(2.0 * M_PI * i / 400);
			int64_t ph = ((int64_t)k * i) % 400;
			p[k * 400 + i] = (int32_t)llround(win * cos(2.0 * M_PI * (double)ph / 400) * ldexp(1.0, 28));
			p[201 * 400 + k * 400 + i] = (int32_t)llround(win * sin(2.0 * M_PI * (double)ph / 400) * ldexp(1.0, 28));
		}
	ck_pack_plain(ki, "gamma", nin(n, 1)->init, l.ff);
	ki->macs = (uint64_t)(l.frames * 400 * 201 * 2 + l.frames * 201 * l.M);
	ki->alu_ops = (uint64_t)(l.frames * 201 * 2 + l.frames * l.M * 4);
	ki->scratch_bytes = (uint64_t)(4 * l.M * l.frames);
	return WL_OK;
}

int ck_logmel_emit(const ChOp *op, const Node *n, const ChCallArgs *a, FILE *f, Diag *d)
{
	LM l;
	char x[48], y[24];
	if (lm_dims(n, &l, d) || ck_fq(n, nin(n, 0), d, x) || ck_fo(n, nout(n, 0), d, y))
		return WL_ERR;
	fprintf(f, "%s<%lldLL, %lld, %s, %d, %s>(c, %s, %s, %s, %s, %s);\n", op->cpp, (long long)l.N, (long long)l.M, x,
	        l.ff, y, a->in[0], a->blob[0], a->blob[1], a->out[0], ck_arg(a->scratch));
	return WL_OK;
}
