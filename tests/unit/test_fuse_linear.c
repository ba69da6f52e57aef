/* test_fuse_linear.c — the linear fusions and their ai.wlower kernels:
 * MatMulNBits (bits 32 and 4, bias, fused Q/K/V `splits`), ConvStem,
 * GreedyArgMax and LogMel. Each fused graph is run by the executor and
 * compared with the unfused subgraph it replaced (run by the executor's
 * ONNX kernels), or with an independent loop here: argmax, and a float64
 * direct-DFT log-mel of a real clip (../shared/data/audio/jfk.wav, read
 * with libsndfile). The mel filters computed by fuse-logmel are checked
 * against Whisper's mel_filters.npz (read with zlib).
 */
#include <check.h>
#include "check_run.h"
#include "unit_util.h"
#include <math.h>
#include <sndfile.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_ZLIB
#include <zlib.h>
#endif
#include "runtime/interp/interp.h"
#include "passes/passes.h"

#define DATA_ROOT WLOWER_SOURCE_ROOT "/../shared/data"

/* ---------------------------------------------------------------- helpers */

/* Appends "{v0, v1, ...}" of n random values * scale (or ints in [0, imax)). */
static void put_vals(char **p, int n, double scale, int imax)
{
	*p += sprintf(*p, "{");
	for (int i = 0; i < n; i++) {
		if (imax)
			*p += sprintf(*p, "%s%d", i ? ", " : "", (int)((urand() + 1) * 0.5 * imax) % imax);
		else
			*p += sprintf(*p, "%s%.7g", i ? ", " : "", urand() * scale);
	}
	*p += sprintf(*p, "}");
}

/* Runs m with one input; copies every output into outs (caller frees). */
static int run(Module *m, int nin, const char **names, const RTensor *ins, RTensor *outs)
{
	Exec *e = NULL;
	Diag d = {0};
	ck_assert_msg(exec_new(m, 2, &e, &d) == WL_OK, "exec_new: %s", d.msg);
	for (int i = 0; i < nin; i++)
		ck_assert_msg(exec_bind(e, names[i], &ins[i], &d) == WL_OK, "bind: %s", d.msg);
	ck_assert_msg(exec_run(e, &d) == WL_OK, "run: %s", d.msg);
	int n = exec_output_count(e);
	for (int i = 0; i < n; i++) {
		const RTensor *t = exec_output(e, i);
		rt_alloc(&outs[i], t->dtype, t->ndim, t->dims);
		memcpy(outs[i].data, t->data, t->nbytes);
	}
	exec_free(e);
	return n;
}

static RTensor rand_tensor(int ndim, const int64_t *dims)
{
	RTensor t = {0};
	rt_alloc(&t, DT_FLOAT, ndim, dims);
	float *p = t.data;
	for (int64_t i = 0; i < rt_numel(&t); i++)
		p[i] = (float)urand();
	return t;
}

static void expect_close(const RTensor *ref, const RTensor *got, double tol)
{
	ck_assert_int_eq(ref->ndim, got->ndim);
	for (int i = 0; i < ref->ndim; i++)
		ck_assert_int_eq(ref->dims[i], got->dims[i]);
	const float *a = ref->data, *b = got->data;
	double worst = 0;
	for (int64_t i = 0; i < rt_numel(ref); i++) {
		double e = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)a[i]));
		worst = e > worst ? e : worst;
	}
	ck_assert_msg(worst <= tol, "max relative error %g > %g", worst, tol);
}

/* ---------------------------------------------------------------- MatMulNBits */

/* Q (bias), K (no bias), V (bias) projections of one input, float weights:
 * fuse-matmul-nbits + fuse-qkv give one bits-32 node with splits. */
START_TEST(matmul_float_qkv)
{
	char *src = malloc(1 << 16), *p = src;
	p += sprintf(p, "<ir_version: 8, opset_import: [\"\" : 17]>\n"
	                "g (float[2, 3, 8] x) => (float[2, 3, 8] q, float[2, 3, 4] k, float[2, 3, 4] v)\n"
	                "  <float[8, 8] wq = ");
	put_vals(&p, 64, 0.5, 0);
	p += sprintf(p, ", float[8] bq = ");
	put_vals(&p, 8, 1, 0);
	p += sprintf(p, ", float[8, 4] wk = ");
	put_vals(&p, 32, 0.5, 0);
	p += sprintf(p, ", float[8, 4] wv = ");
	put_vals(&p, 32, 0.5, 0);
	p += sprintf(p, ", float[4] bv = ");
	put_vals(&p, 4, 1, 0);
	p += sprintf(p, "> {\n  tq = MatMul (x, wq)\n  q = Add (tq, bq)\n  k = MatMul (x, wk)\n"
	                "  tv = MatMul (x, wv)\n  v = Add (bv, tv)\n}\n");
	Module *m = parse_text(src);
	int64_t xd[3] = {2, 3, 8};
	RTensor x = rand_tensor(3, xd), ref[3], got[3];
	const char *names[1] = {"x"};
	ck_assert_int_eq(run(m, 1, names, &x, ref), 3);
	run_pipeline(m, (PipelineOptions){.passes = "shape-infer,fuse-matmul-nbits,fuse-qkv,dce"});
	ck_assert_int_eq(count_op(m, "ai.wlower", "MatMulNBits"), 1);
	ck_assert_int_eq(count_op(m, "", "MatMul") + count_op(m, "", "Add"), 0);
	ck_assert_int_eq(m->graph->first->noutputs, 3);
	ck_assert_int_eq(run(m, 1, names, &x, got), 3);
	for (int i = 0; i < 3; i++) {
		expect_close(&ref[i], &got[i], 1e-6);
		rt_free(&ref[i]);
		rt_free(&got[i]);
	}
	rt_free(&x);
	module_free(m);
	free(src);
}
END_TEST

/* 4-bit com.microsoft MatMulNBits (+ bias Add on one of them) reading one
 * input: one ai.wlower node with concatenated B, scales, zero points, bias. */
START_TEST(matmul_nbits4_qkv)
{
	char *src = malloc(1 << 16), *p = src;
	/* K 64, block 32: 2 blocks of 16 bytes; N 4 and 6; packed zp 1 byte per row */
	p += sprintf(p, "<ir_version: 8, opset_import: [\"\" : 17, \"com.microsoft\" : 1]>\n"
	                "g (float[5, 64] x) => (float[5, 4] a, float[5, 6] b)\n  <uint8[4, 2, 16] qa = ");
	put_vals(&p, 128, 0, 256);
	p += sprintf(p, ", float[8] sa = ");
	put_vals(&p, 8, 0.1, 0);
	p += sprintf(p, ", uint8[4] za = ");
	put_vals(&p, 4, 0, 256);
	p += sprintf(p, ", uint8[6, 2, 16] qb = ");
	put_vals(&p, 192, 0, 256);
	p += sprintf(p, ", float[12] sb = ");
	put_vals(&p, 12, 0.1, 0);
	p += sprintf(p, ", uint8[6] zb = ");
	put_vals(&p, 6, 0, 256);
	p += sprintf(p, ", float[6] bb = ");
	put_vals(&p, 6, 1, 0);
	p += sprintf(p, "> {\n  a = com.microsoft.MatMulNBits <K = 64, N = 4, bits = 4, block_size = 32> (x, qa, sa, za)\n"
	                "  tb = com.microsoft.MatMulNBits <K = 64, N = 6, bits = 4, block_size = 32> (x, qb, sb, zb)\n"
	                "  b = Add (tb, bb)\n}\n");
	Module *m = parse_text(src);
	int64_t xd[2] = {5, 64};
	RTensor x = rand_tensor(2, xd), ref[2], got[2];
	const char *names[1] = {"x"};
	ck_assert_int_eq(run(m, 1, names, &x, ref), 2);
	run_pipeline(m, (PipelineOptions){.passes = "shape-infer,fuse-matmul-nbits,fuse-qkv,dce"});
	ck_assert_int_eq(count_op(m, "ai.wlower", "MatMulNBits"), 1);
	ck_assert_int_eq(count_op(m, "com.microsoft", "MatMulNBits"), 0);
	ck_assert_int_eq(run(m, 1, names, &x, got), 2);
	for (int i = 0; i < 2; i++) {
		expect_close(&ref[i], &got[i], 1e-6);
		rt_free(&ref[i]);
		rt_free(&got[i]);
	}
	rt_free(&x);
	module_free(m);
	free(src);
}
END_TEST

/* ---------------------------------------------------------------- ConvStem */

static void put_gelu_erf(char **p, const char *h, const char *o)
{
	*p += sprintf(*p, "  %s_d = Div (%s, sq2)\n  %s_e = Erf (%s_d)\n  %s_a = Add (%s_e, one)\n"
	                  "  %s_m = Mul (%s, %s_a)\n  %s = Mul (%s_m, half)\n",
	              h, h, h, h, h, h, h, h, h, o, h);
}

START_TEST(conv_stem)
{
	enum { C = 8, F = 21, D = 16, F2 = (F - 1) / 2 + 1 };
	char *src = malloc(1 << 17), *p = src;
	p += sprintf(p, "<ir_version: 8, opset_import: [\"\" : 17]>\n"
	                "g (float[2, %d, %d] x) => (float[2, %d, %d] y)\n  <float[%d, %d, 3] w1 = ", C, F, F2, D, D, C);
	put_vals(&p, D * C * 3, 0.5, 0);
	p += sprintf(p, ", float[%d] b1 = ", D);
	put_vals(&p, D, 0.2, 0);
	p += sprintf(p, ", float[%d, %d, 3] w2 = ", D, D);
	put_vals(&p, D * D * 3, 0.3, 0);
	p += sprintf(p, ", float[%d] b2 = ", D);
	put_vals(&p, D, 0.2, 0);
	p += sprintf(p, ", float[%d, %d] pos = ", F2, D);
	put_vals(&p, F2 * D, 1, 0);
	p += sprintf(p, ", float sq2 = {1.4142135}, float one = {1}, float half = {0.5}> {\n"
	                "  h1 = Conv <kernel_shape = [3], pads = [1, 1], strides = [1]> (x, w1, b1)\n");
	put_gelu_erf(&p, "h1", "g1");
	p += sprintf(p, "  h2 = Conv <kernel_shape = [3], pads = [1, 1], strides = [2]> (g1, w2, b2)\n");
	put_gelu_erf(&p, "h2", "g2");
	p += sprintf(p, "  t = Transpose <perm = [0, 2, 1]> (g2)\n  y = Add (t, pos)\n}\n");
	Module *m = parse_text(src);
	int64_t xd[3] = {2, C, F};
	RTensor x = rand_tensor(3, xd), ref, got;
	const char *names[1] = {"x"};
	run(m, 1, names, &x, &ref);
	run_pipeline(m, (PipelineOptions){.passes = "fuse-conv-stem,dce"});
	ck_assert_int_eq(count_op(m, "ai.wlower", "ConvStem"), 1);
	ck_assert_int_eq(m->graph->nnodes, 1);
	run(m, 1, names, &x, &got);
	ck_assert_int_eq(got.dims[1], F2);
	expect_close(&ref, &got, 2e-6);
	rt_free(&ref);
	rt_free(&got);
	rt_free(&x);
	module_free(m);
	free(src);
}
END_TEST

/* ---------------------------------------------------------------- GreedyArgMax */

START_TEST(greedy_argmax)
{
	/* fuse-argmax appends the node to an LM head; compare with a loop */
	char *src = malloc(1 << 16), *p = src;
	p += sprintf(p, "<ir_version: 8, opset_import: [\"\" : 17]>\n"
	                "g (int64[1, 3] ids) => (float[1, 3, 7] logits)\n  <float[7, 4] emb = ");
	put_vals(&p, 28, 1, 0);
	p += sprintf(p, ", float[4, 7] lm = ");
	put_vals(&p, 28, 1, 0);
	p += sprintf(p, "> {\n  h = Gather (emb, ids)\n  logits = MatMul (h, lm)\n}\n");
	Module *m = parse_text(src);
	RTensor ids = {0}, ref, got;
	int64_t idd[2] = {1, 3};
	rt_alloc(&ids, DT_INT64, 2, idd);
	int64_t *ip = ids.data;
	ip[0] = 2, ip[1] = 0, ip[2] = 6;
	const char *names[1] = {"ids"};
	run(m, 1, names, &ids, &ref);
	run_pipeline(m, (PipelineOptions){.passes = "shape-infer,fuse-argmax", .fuse.append_argmax = true});
	ck_assert_int_eq(count_op(m, "ai.wlower", "GreedyArgMax"), 1);
	run(m, 1, names, &ids, &got);
	ck_assert_int_eq(got.dtype, DT_INT32);
	ck_assert_int_eq(got.ndim, 2);
	const float *l = ref.data;
	for (int r = 0; r < 3; r++) {
		int best = 0;
		for (int v = 1; v < 7; v++)
			if (l[r * 7 + v] > l[r * 7 + best])
				best = v;
		ck_assert_int_eq(((int32_t *)got.data)[r], best);
	}
	rt_free(&ref);
	rt_free(&got);
	module_free(m);
	free(src);

	/* ties: the first index wins */
	Module *t = parse_text("<ir_version: 8, opset_import: [\"\" : 17, \"ai.wlower\" : 1]>\n"
	                  "g (float[2, 4] x) => (int32[2] y) {\n  y = ai.wlower.GreedyArgMax (x)\n}\n");
	RTensor x = {0};
	int64_t xd[2] = {2, 4};
	rt_alloc(&x, DT_FLOAT, 2, xd);
	float xv[8] = {1, 3, 3, 2, -5, -5, -5, -5};
	memcpy(x.data, xv, sizeof xv);
	const char *xn[1] = {"x"};
	run(t, 1, xn, &x, &got);
	ck_assert_int_eq(((int32_t *)got.data)[0], 1);
	ck_assert_int_eq(((int32_t *)got.data)[1], 0);
	rt_free(&got);
	rt_free(&x);
	rt_free(&ids);
	module_free(t);
}
END_TEST

/* ---------------------------------------------------------------- LogMel */

/* Whisper's log-mel in float64 with a direct DFT: the test's own reference. */
static void logmel_f64(const float *x, int64_t N, const float *filt, float *out)
{
	int64_t frames = N / 160;
	double win[400], *pw = malloc(sizeof(double) * 201 * (size_t)frames), *lg = malloc(sizeof(double) * 80 * (size_t)frames);
	static double cs[400], sn[400];
	for (int n = 0; n < 400; n++) {
		win[n] = 0.5 - 0.5 * cos(2 * M_PI * n / 400);
		cs[n] = cos(2 * M_PI * n / 400);
		sn[n] = sin(2 * M_PI * n / 400);
	}
	for (int64_t t = 0; t < frames; t++) {
		double fr[400];
		for (int n = 0; n < 400; n++) {
			int64_t i = t * 160 - 200 + n;
			if (i < 0)
				i = -i;
			if (i >= N)
				i = 2 * (N - 1) - i;
			fr[n] = x[i] * win[n];
		}
		for (int k = 0; k < 201; k++) {
			double re = 0, im = 0;
			for (int n = 0; n < 400; n++) {
				int ph = (k * n) % 400;
				re += fr[n] * cs[ph];
				im -= fr[n] * sn[ph];
			}
			pw[t * 201 + k] = re * re + im * im;
		}
	}
	double mx = -INFINITY;
	for (int m = 0; m < 80; m++)
		for (int64_t t = 0; t < frames; t++) {
			double e = 0;
			for (int k = 0; k < 201; k++)
				e += (double)filt[m * 201 + k] * pw[t * 201 + k];
			double v = log10(e > 1e-10 ? e : 1e-10);
			lg[m * frames + t] = v;
			mx = v > mx ? v : mx;
		}
	for (int64_t i = 0; i < 80 * frames; i++)
		out[i] = (float)(((lg[i] > mx - 8 ? lg[i] : mx - 8) + 4) / 4);
	free(pw);
	free(lg);
}

START_TEST(log_mel_jfk)
{
	SF_INFO info = {0};
	SNDFILE *sf = sf_open(DATA_ROOT "/audio/jfk.wav", SFM_READ, &info);
	ck_assert_msg(sf != NULL, "jfk.wav: %s", sf_strerror(NULL));
	ck_assert_int_eq(info.samplerate, 16000);
	ck_assert_int_eq(info.channels, 1);
	RTensor w = {0}, filt = {0}, got = {0};
	int64_t wd[2] = {1, 480000}, fd[2] = {80, 201};
	rt_alloc(&w, DT_FLOAT, 2, wd);                      /* zero padded to 30 s */
	sf_count_t n = sf_readf_float(sf, w.data, info.frames < 480000 ? info.frames : 480000);
	ck_assert_int_gt(n, 16000);
	sf_close(sf);
	rt_alloc(&filt, DT_FLOAT, 2, fd);
	whisper_mel_filters(80, filt.data);
	Module *m = parse_text("<ir_version: 8, opset_import: [\"\" : 17, \"ai.wlower\" : 1]>\n"
	                  "g (float[1, 480000] waveform, float[80, 201] mel_filters) => (float[1, 80, 3000] y) {\n"
	                  "  y = ai.wlower.LogMel <n_fft = 400, hop = 160, n_mels = 80> (waveform, mel_filters)\n}\n");
	const char *names[2] = {"waveform", "mel_filters"};
	RTensor ins[2] = {w, filt};
	run(m, 2, names, ins, &got);
	ck_assert_int_eq(got.dims[2], 3000);
	RTensor ref = {0};
	rt_alloc(&ref, DT_FLOAT, 3, got.dims);
	logmel_f64(w.data, 480000, filt.data, ref.data);
	RtMetrics mt;
	Diag d = {0};
	ck_assert_int_eq(rt_metrics(&ref, &got, &mt, &d), WL_OK);
	ck_assert_msg(mt.psnr >= 100 && mt.max_abs <= 1e-4, "psnr %.2f max %g", mt.psnr, mt.max_abs);
	rt_free(&ref);
	rt_free(&got);
	rt_free(&w);
	rt_free(&filt);
	module_free(m);
}
END_TEST

/* fuse-logmel replaces the input and the graph still runs end to end. */
START_TEST(log_mel_pass)
{
	Module *m = parse_text("<ir_version: 8, opset_import: [\"\" : 17]>\n"
	                  "g (float[1, 80, 50] input_features) => (float[1, 80, 50] y) {\n"
	                  "  y = Relu (input_features)\n}\n");
	PipelineOptions o = {0};
	o.passes = "fuse-logmel";
	o.fuse.prepend_logmel = true;
	Diag d = {0};
	ck_assert_msg(pipeline_run(m, &o, &d) == WL_OK, "%s", d.msg);
	ck_assert_int_eq(count_op(m, "ai.wlower", "LogMel"), 1);
	ck_assert_str_eq(m->graph->inputs[0]->name, "waveform");
	int64_t wd[2] = {1, 8000};
	RTensor w = rand_tensor(2, wd), got, ref = {0};
	const char *names[1] = {"waveform"};
	run(m, 1, names, &w, &got);
	rt_alloc(&ref, DT_FLOAT, 3, got.dims);
	float filt[80 * 201];
	whisper_mel_filters(80, filt);
	logmel_f64(w.data, 8000, filt, ref.data);
	expect_close(&ref, &got, 1e-5);
	rt_free(&w);
	rt_free(&got);
	rt_free(&ref);
	module_free(m);
}
END_TEST

#ifdef HAVE_ZLIB
/* mel_80.npy from the (deflated) mel_filters.npz, float32 [80, 201]. */
static bool read_npz_mel80(float *out)
{
	FILE *f = fopen(DATA_ROOT "/whisper/mel_filters.npz", "rb");
	if (!f)
		return false;
	static unsigned char buf[1 << 16];
	size_t len = fread(buf, 1, sizeof buf, f);
	fclose(f);
	for (size_t off = 0; off + 30 <= len;) {
		const unsigned char *h = buf + off;
		if (!(h[0] == 'P' && h[1] == 'K' && h[2] == 3 && h[3] == 4))
			break;
		unsigned method = h[8] | h[9] << 8;
		size_t csize = h[18] | h[19] << 8 | (size_t)h[20] << 16 | (size_t)h[21] << 24;
		size_t nlen = h[26] | h[27] << 8, xlen = h[28] | h[29] << 8;
		const unsigned char *data = h + 30 + nlen + xlen;
		if (nlen == 10 && memcmp(h + 30, "mel_80.npy", 10) == 0 && method == 8) {
			static unsigned char npy[80 * 201 * 4 + 512];
			z_stream z = {0};
			inflateInit2(&z, -15);
			z.next_in = (unsigned char *)data;
			z.avail_in = (unsigned)csize;
			z.next_out = npy;
			z.avail_out = sizeof npy;
			int rc = inflate(&z, Z_FINISH);
			inflateEnd(&z);
			if (rc != Z_STREAM_END)
				return false;
			size_t hl = npy[8] | npy[9] << 8;
			memcpy(out, npy + 10 + hl, 80 * 201 * 4);
			return strstr((char *)npy + 10, "'<f4'") != NULL;
		}
		off = (size_t)(data - buf) + csize;
	}
	return false;
}

START_TEST(mel_filters_npz)
{
	static float want[80 * 201], got[80 * 201];
	ck_assert(read_npz_mel80(want));
	whisper_mel_filters(80, got);
	float peak = 0, err = 0;
	for (int i = 0; i < 80 * 201; i++) {
		peak = fabsf(want[i]) > peak ? fabsf(want[i]) : peak;
		err = fabsf(want[i] - got[i]) > err ? fabsf(want[i] - got[i]) : err;
	}
	ck_assert_msg(err <= 1e-6f * peak, "max error %g (peak %g)", err, peak);
}
END_TEST
#endif

int main(void)
{
	Suite *s = suite_create("fuse_linear");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	check_add(tc, (const TTest *const[]){
		matmul_float_qkv, matmul_nbits4_qkv, conv_stem, greedy_argmax, log_mel_jfk,
		log_mel_pass, NULL
	});
#ifdef HAVE_ZLIB
	tcase_add_test(tc, mel_filters_npz);
#endif
	return check_run(s, tc);
}
