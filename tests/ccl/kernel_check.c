/* kernel_check.c — every CCL kernel end to end against the float reference
 * executor (runtime/), through the real C side (targets/chimera/ops/):
 *
 *   for each case (a one-node graph in ONNX text syntax):
 *     random inputs and constants → reference run (float, runtime kernels),
 *     value ranges from that run → frac_bits by the numerics rule
 *     (31 − intBits(maxabs), −1 guard bit on Add), fp16 edges where asked;
 *     ccl_kernel_info (packed blobs, macs, alu) and ccl_emit_call (C++ text);
 *   all cases go into one generated C++ file compiled with g++ against
 *   targets/chimera/ccl/ and run; outputs are compared with the reference
 *   (PSNR with peak = max |ref|, max |err| / peak; ids exactly) and the
 *   kernels' run-time macs/alu counters with the op table's (ops/).
 *   Transpose and Reshape (data movement, same format in and out): the
 *   output must equal the reference's output stored in its format, bit for
 *   bit. QMatMul (qmatmul_*): int8 input and weights; the output must equal,
 *   bit for bit, qmm_expect below (the integer arithmetic API.md specifies
 *   for linalg::qMatMul, written here from the graph's constants, not from
 *   the packed blobs) and stay within one int8 step / the PSNR gate of the
 *   float reference.
 *
 * usage: kernel_check CCL_DIR WORK_DIR [CASE_SUBSTRING]   (exit 1 on any failure)
 * $CXX overrides g++.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "compiler/onnx/onnx.h"
#include "runtime/interp/interp.h"
#include "targets/chimera/chimera.h"

typedef struct Case {
	const char *name;
	const char *text;
	const char *consts;   /* "name:lo:hi,..." constants (uniform; uint8: random bytes) */
	const char *ranges;   /* "name:lo:hi,..." input value ranges (float uniform; int uniform integers) */
	int fp16;             /* attention node: inputs/outputs stored as binary16 */
	int f32_out;          /* graph outputs stay float */
	double min_psnr;
} Case;

#define HDR "<ir_version: 8, opset_import: [\"\" : 17, \"ai.wlower\" : 1]>\n"

static const Case cases[] = {
	{"matmul4_splits",
	 HDR "g (float[2,5,64] a, uint8[48,2,16] w, float[96] s, uint8[48,1] z, float[48] b) => (float[2,5,16] q, float[2,5,16] k, float[2,5,16] v) {\n"
	 "  q, k, v = ai.wlower.MatMulNBits <K = 64, N = 48, bits = 4, block_size = 32, splits = [16, 16, 16]> (a, w, s, z, b)\n}\n",
	 "w:0:0,s:0.005:0.05,z:0:0,b:-0.5:0.5", "", 0, 0, 130},
	{"matmul4_nozp",
	 HDR "g (float[7,96] a, uint8[40,3,16] w, float[120] s) => (float[7,40] y) {\n"
	 "  y = ai.wlower.MatMulNBits <K = 96, N = 40, bits = 4, block_size = 32> (a, w, s)\n}\n",
	 "w:0:0,s:-0.05:0.05", "a:-8:8", 0, 0, 130},
	{"matmul32_transb_f32out",
	 HDR "g (float[1,3,32] a, float[50,32] w) => (float[1,3,50] y) {\n"
	 "  y = ai.wlower.MatMulNBits <K = 32, N = 50, bits = 32, trans_b = 1> (a, w)\n}\n",
	 "w:-0.3:0.3", "", 0, 1, 135},
	{"matmul32_bias",
	 HDR "g (float[9,24] a, float[24,20] w, float[20] b) => (float[9,20] y) {\n"
	 "  y = ai.wlower.MatMulNBits <K = 24, N = 20, bits = 32> (a, w, , , b)\n}\n",
	 "w:-1:1,b:-3:3", "", 0, 0, 135},
	{"layernorm",
	 HDR "g (float[6,64] x, float[64] ga, float[64] be) => (float[6,64] y) {\n"
	 "  y = LayerNormalization <axis = -1, epsilon = 1e-5> (x, ga, be)\n}\n",
	 "ga:0.5:1.5,be:-0.2:0.2", "x:-20:30", 0, 0, 140},
	{"layernorm_f32out",
	 HDR "g (float[3,48] x, float[48] ga, float[48] be) => (float[3,48] y) {\n"
	 "  y = LayerNormalization <axis = -1, epsilon = 1e-5> (x, ga, be)\n}\n",
	 "ga:0.5:1.5,be:-0.2:0.2", "x:-0.01:0.01", 0, 1, 140},
	{"rmsnorm",
	 HDR "g (float[5,48] x, float[48] ga) => (float[5,48] y) {\n"
	 "  y = ai.wlower.RMSNorm <epsilon = 1e-6> (x, ga)\n}\n",
	 "ga:0.5:2", "x:-3:3", 0, 0, 140},
	{"gelu",
	 HDR "g (float[4,100] x) => (float[4,100] y) {\n  y = ai.wlower.Gelu (x)\n}\n", "", "x:-9:9", 0, 0, 140},
	{"gelu_tanh",
	 HDR "g (float[4,100] x) => (float[4,100] y) {\n  y = ai.wlower.Gelu <approximate = \"tanh\"> (x)\n}\n", "",
	 "x:-6:6", 0, 0, 140},
	{"silu",
	 HDR "g (float[4,100] x) => (float[4,100] y) {\n  y = ai.wlower.SiLU (x)\n}\n", "", "x:-12:12", 0, 0, 140},
	{"add_pos_const",
	 HDR "g (float[1,6,32] x, float[6,32] p) => (float[1,6,32] y) {\n  y = Add (x, p)\n}\n", "p:-1:1", "", 0, 0, 140},
	{"add_bcast",
	 HDR "g (float[2,3,8] x, float[3,1] t) => (float[2,3,8] y) {\n  y = Add (x, t)\n}\n", "", "t:-5:5", 0, 0, 140},
	{"mul",
	 HDR "g (float[4,8] x, float[4,8] t) => (float[4,8] y) {\n  y = Mul (x, t)\n}\n", "", "", 0, 0, 140},
	{"dequant_int8",
	 HDR "g (int8[4,64] x, float s, int8 z) => (float[4,64] y) {\n  y = DequantizeLinear (x, s, z)\n}\n",
	 "s:0.01:0.05,z:-5:5", "x:-128:127", 0, 0, 140},
	{"dequant_uint8_f32",
	 HDR "g (uint8[3,50] x, float s) => (float[3,50] y) {\n  y = DequantizeLinear (x, s)\n}\n",
	 "s:0.2:0.3", "x:0:255", 0, 1, 140},
	{"embedding",
	 HDR "g (float[50,16] tab, int64[1,5] ids) => (float[1,5,16] y) {\n  y = Gather <axis = 0> (tab, ids)\n}\n",
	 "tab:-1:1", "ids:0:49", 0, 0, 140},
	{"qembedding",
	 HDR "g (int8[50,16] tab, float[50] s, int64[1,5] ids) => (float[1,5,16] y) {\n"
	 "  y = ai.wlower.QGather (tab, s, ids)\n}\n",
	 "tab:-128:127,s:0.001:0.05", "ids:0:49", 0, 0, 140},
	{"argmax",
	 HDR "g (float[3,50] x) => (int32[3] y) {\n  y = ai.wlower.GreedyArgMax (x)\n}\n", "", "", 0, 0, 0},
	{"whisper_self",
	 HDR "g (float[1,12,32] q, float[1,12,32] k, float[1,12,32] v) => (float[1,12,32] o) {\n"
	 "  o = ai.wlower.WhisperAttention <embed = 32, heads = 4, q_len = 12, kv_len = 12, causal = 0, scale = 0.35355339, kv_layout = \"bsd\"> (q, k, v)\n}\n",
	 "", "q:-4:4,k:-4:4", 0, 0, 135},
	{"whisper_causal_past",
	 HDR "g (float[1,4,32] q, float[1,4,32] k, float[1,4,32] v, float[1,4,6,8] pk, float[1,4,6,8] pv) => (float[1,4,32] o, float[1,4,10,8] prk, float[1,4,10,8] prv) {\n"
	 "  o, prk, prv = ai.wlower.WhisperAttention <embed = 32, heads = 4, q_len = 4, kv_len = 10, causal = 1, scale = 0.35355339, kv_layout = \"bsd\"> (q, k, v, pk, pv)\n}\n",
	 "", "q:-4:4,k:-4:4", 0, 0, 135},
	{"whisper_cross_bhsd",
	 HDR "g (float[1,5,32] q, float[1,4,20,8] k, float[1,4,20,8] v) => (float[1,5,32] o) {\n"
	 "  o = ai.wlower.WhisperAttention <embed = 32, heads = 4, q_len = 5, kv_len = 20, causal = 0, scale = 0.35355339, kv_layout = \"bhsd\"> (q, k, v)\n}\n",
	 "", "q:-4:4,k:-4:4", 0, 0, 135},
	{"whisper_self_fp16",
	 HDR "g (float[1,12,32] q, float[1,12,32] k, float[1,12,32] v) => (float[1,12,32] o) {\n"
	 "  o = ai.wlower.WhisperAttention <embed = 32, heads = 4, q_len = 12, kv_len = 12, causal = 0, scale = 0.35355339, kv_layout = \"bsd\", fp16 = 1> (q, k, v)\n}\n",
	 "", "q:-4:4,k:-4:4", 1, 0, 70},
	{"gqa_rope_past_mask",
	 HDR "g (float[1,3,16] q, float[1,3,8] k, float[1,3,8] v, float[1,1,3,8] cs, float[1,1,3,8] sn, float[1,1,2,8] pk, float[1,1,2,8] pv, int64[1,5] am) => (float[1,3,16] o, float[1,1,5,8] prk, float[1,1,5,8] prv) {\n"
	 "  o, prk, prv = ai.wlower.GroupQueryAttention <heads = 2, kv_heads = 1, head_dim = 8, scale = 0.35355339, causal = 1, rope = 1> (q, k, v, cs, sn, pk, pv, am)\n}\n",
	 "cs:-1:1,sn:-1:1", "q:-4:4,k:-4:4", 0, 0, 135},
	{"gqa_posids",
	 HDR "g (float[1,2,32] q, float[1,2,16] k, float[1,2,16] v, float[10,8] cs, float[10,8] sn, int64[1,2] pos) => (float[1,2,32] o) {\n"
	 "  o = ai.wlower.GroupQueryAttention <heads = 4, kv_heads = 2, head_dim = 8, scale = 0.35355339, causal = 0, rope = 1> (q, k, v, cs, sn, , , , pos)\n}\n",
	 "cs:-1:1,sn:-1:1", "pos:0:9", 0, 0, 135},
	{"convstem",
	 HDR "g (float[1,8,20] x, float[16,8,3] w1, float[16] b1, float[16,16,3] w2, float[16] b2, float[10,16] pos) => (float[1,10,16] y) {\n"
	 "  y = ai.wlower.ConvStem <strides = [1, 2], pads = [1, 1]> (x, w1, b1, w2, b2, pos)\n}\n",
	 "w1:-0.5:0.5,b1:-0.1:0.1,w2:-0.3:0.3,b2:-0.1:0.1,pos:-1:1", "", 0, 0, 135},
	{"qmatmul_fixed_pc",
	 HDR "g (int8[2,5,40] xq, float sx, int8 zx, int8[40,24] w, float[24] sw) => (float[2,5,24] y) {\n"
	 "  y = ai.wlower.QMatMul (xq, sx, zx, w, sw)\n}\n",
	 "sx:0.01:0.03,zx:-9:9,w:-128:127,sw:0.001:0.02", "xq:-128:127", 0, 0, 110},
	{"qmatmul_q8_pt",
	 HDR "g (int8[7,33] xq, float sx, int8 zx, int8[33,9] w, float sw, float sy, int8 zy) => (int8[7,9] y) {\n"
	 "  y = ai.wlower.QMatMul (xq, sx, zx, w, sw, sy, zy)\n}\n",
	 "sx:0.01:0.03,zx:-9:9,w:-128:127,sw:0.001:0.004,sy:0.02:0.04,zy:-20:20", "xq:-128:127", 0, 0, 0},
	{"quantize_int8",
	 HDR "g (float[3,40] x, float s, int8 z) => (int8[3,40] y) {\n  y = QuantizeLinear (x, s, z)\n}\n",
	 "s:0.02:0.03,z:-10:10", "x:-3:3", 0, 0, 0},
	/* data movement (cross_kv's Reshape + Transpose): bit-exact, the reference's output in the output's format */
	{"transpose_heads",
	 HDR "g (float[1,6,2,4] x) => (float[1,2,6,4] y) {\n  y = Transpose <perm = [0, 2, 1, 3]> (x)\n}\n", "",
	 "x:-3:3", 0, 0, 0},
	{"transpose_inner",
	 HDR "g (float[3,5,7] x) => (float[7,3,5] y) {\n  y = Transpose <perm = [2, 0, 1]> (x)\n}\n", "",
	 "x:-100:100", 0, 0, 0},
	{"transpose_default_perm",
	 HDR "g (float[2,3,1,5,2] x) => (float[2,5,1,3,2] y) {\n  y = Transpose (x)\n}\n", "", "x:-1:1", 0, 0, 0},
	{"reshape",
	 HDR "g (float[1,6,8] x) => (float[1,6,2,4] y) <int64[4] sh = {1, 6, 2, 4}> {\n  y = Reshape (x, sh)\n}\n", "",
	 "x:-5:5", 0, 0, 0},
	{"logmel",
	 HDR "g (float[1,3200] waveform, float[16,201] mf) => (float[1,16,20] y) {\n"
	 "  y = ai.wlower.LogMel <n_fft = 400, hop = 160, n_mels = 16> (waveform, mf)\n}\n",
	 "mf:0:0.02", "waveform:-0.5:0.5", 0, 0, 135},
};

static double urand(unsigned long long *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(*s >> 11) / 9007199254740992.0;
}

/* spec lookup "name:lo:hi" */
static int spec_get(const char *spec, const char *name, double *lo, double *hi)
{
	size_t nl = strlen(name);
	for (const char *p = spec; p && *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len > nl && !strncmp(p, name, nl) && p[nl] == ':') {
			if (sscanf(p + nl + 1, "%lf:%lf", lo, hi) == 2)
				return 1;
		}
		p = e ? e + 1 : NULL;
	}
	return 0;
}

static int int_bits(double x)
{
	if (x < 1)
		return 0;
	return (int)floor(log2(floor(x))) + 1;
}

static int rule_fbits(double lo, double hi)
{
	int a = int_bits(hi), b;
	double n = -lo;
	if (n >= 1 && n == ldexp(1.0, (int)round(log2(n))))
		b = (int)round(log2(n));
	else
		b = int_bits(n);
	return 31 - (a > b ? a : b);
}

typedef struct Obs { Module *m; } Obs;

static void observe(void *ctx, const Value *v, const RTensor *t)
{
	(void)ctx;
	if (t->dtype != DT_FLOAT)
		return;
	Value *w = (Value *)v;
	const float *x = t->data;
	for (int64_t i = 0; i < rt_numel(t); i++) {
		if (!w->has_range) {
			w->has_range = true;
			w->rmin = w->rmax = x[i];
		}
		if (x[i] < w->rmin)
			w->rmin = x[i];
		if (x[i] > w->rmax)
			w->rmax = x[i];
	}
}

static size_t elem_bytes(const Value *v)
{
	if (v->type.elem == DT_INT64)
		return 8;
	if (v->type.elem == DT_INT8 || v->type.elem == DT_UINT8)
		return 1;
	if (v->frac_bits == FRAC_FP16)
		return 2;
	return 4;
}

static int write_bin(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	size_t w = fwrite(p, 1, n, f);
	fclose(f);
	return w == n ? 0 : -1;
}

static void *read_bin(const char *path, size_t n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	void *p = malloc(n ? n : 1);
	size_t r = fread(p, 1, n, f);
	fclose(f);
	if (r != n) {
		free(p);
		return NULL;
	}
	return p;
}

/* storage of a float value in its format */
static void quantize(const Value *v, const float *x, int64_t n, void *out)
{
	for (int64_t i = 0; i < n; i++) {
		if (v->frac_bits == FRAC_FP16)
			((uint16_t *)out)[i] = rt_float_to_half(x[i]);
		else if (v->frac_bits == FRAC_F32)
			((float *)out)[i] = x[i];
		else {
			double q = floor(ldexp((double)x[i], v->frac_bits) + 0.5);
			q = q > 2147483647.0 ? 2147483647.0 : q < -2147483648.0 ? -2147483648.0 : q;
			((int32_t *)out)[i] = (int32_t)q;
		}
	}
}

static double deq(const Value *v, const void *p, int64_t i)
{
	if (v->frac_bits == FRAC_FP16)
		return rt_half_to_float(((const uint16_t *)p)[i]);
	if (v->frac_bits == FRAC_F32)
		return ((const float *)p)[i];
	return ldexp((double)((const int32_t *)p)[i], -v->frac_bits);
}

typedef struct Prepared {
	Module *m;
	Node *n;
	CclKernelInfo ki;
	RTensor ref[4];
	int nref;
	int8_t *xq;           /* QMatMul: the int8 input, for qmm_expect */
} Prepared;

/* ---------------------------------------------------------------- QMatMul's arithmetic
 * API.md linalg::qMatMul, from the node's constants: acc = Σ_k (x − zx)·w
 * (exact), r = x_scale·w_scale[n]·2^QY (float out, QY = the output's
 * format) or x_scale·w_scale[n] / y_scale (int8 out) as m·2^−s with m in
 * [2^30, 2^31) (frexp: r = f·2^e, f in [0.5, 1): m = round(f·2^31), s = 31 − e,
 * a carry to 2^31 halves m), v = floor((acc·m + 2^(s−1)) / 2^s); int8:
 * saturate(v + zy), fixed: saturate to int32. Returns the mismatches. */
static long qmm_expect(const Node *n, const int8_t *x, const void *got)
{
	const Tensor *w = n->inputs[3]->init, *sw = n->inputs[4]->init;
	int64_t K = w->dims[0], N = w->dims[1], M = type_numel(&n->inputs[0]->type) / K, ns = tensor_numel(sw);
	bool qout = n->ninputs > 5 && n->inputs[5];
	double sx = tensor_get_f64(n->inputs[1]->init, 0), zx = tensor_get_f64(n->inputs[2]->init, 0);
	double sy = qout ? tensor_get_f64(n->inputs[5]->init, 0) : 1, zy = qout ? tensor_get_f64(n->inputs[6]->init, 0) : 0;
	int F = n->outputs[0]->frac_bits;
	long bad = 0;
	for (int64_t j = 0; j < N; j++) {
		double r = sx * tensor_get_f64(sw, ns == 1 ? 0 : j);
		r = qout ? r / sy : ldexp(r, F);
		int e;
		double f = frexp(r, &e);
		long long m = llround(ldexp(f, 31));
		int s = 31 - e;
		if (m == 1LL << 31) {
			m /= 2;
			s--;
		}
		for (int64_t i = 0; i < M; i++) {
			long long acc = 0;
			for (int64_t k = 0; k < K; k++)
				acc += ((long long)x[i * K + k] - (long long)zx) * ((const int8_t *)w->data)[k * N + j];
			__int128 p = (__int128)acc * m;
			long long v = s > 0 ? (long long)((p + ((__int128)1 << (s - 1))) >> s) : (long long)(p * ((__int128)1 << -s));
			if (qout) {
				v += (long long)zy;
				v = v < -128 ? -128 : v > 127 ? 127 : v;
				bad += ((const int8_t *)got)[i * N + j] != v;
			} else {
				v = v > 2147483647LL ? 2147483647LL : v < -2147483648LL ? -2147483648LL : v;
				bad += ((const int32_t *)got)[i * N + j] != v;
			}
		}
	}
	return bad;
}

static int prepare(int ci, const Case *c, const char *work, FILE *cpp, Prepared *pp)
{
	Diag d = {0};
	Module *m = NULL;
	if (text_parse(c->text, strlen(c->text), c->name, &m, &d) != WL_OK) {
		fprintf(stderr, "%s: parse: %s\n", c->name, d.msg);
		return -1;
	}
	Graph *g = m->graph;
	unsigned long long seed = 12345 + 977 * (unsigned long long)ci;
	/* constants */
	for (int i = 0; i < g->ninputs; i++) {
		Value *v = g->inputs[i];
		double lo, hi;
		if (!spec_get(c->consts, v->name, &lo, &hi))
			continue;
		int64_t dims[8];
		for (int k = 0; k < v->type.rank; k++)
			dims[k] = v->type.dims[k].value;
		Tensor *t = tensor_new(m->arena, v->name, v->type.elem, v->type.rank, dims);
		uint8_t *data = tensor_alloc_data(m->arena, t);
		int64_t ne = type_numel(&v->type);
		for (int64_t k = 0; k < ne; k++) {
			if (v->type.elem == DT_UINT8)
				data[k] = (uint8_t)(urand(&seed) * 256);
			else if (v->type.elem == DT_INT8)
				((int8_t *)data)[k] = (int8_t)floor(lo + (hi - lo + 1) * urand(&seed));
			else
				((float *)data)[k] = (float)(lo + (hi - lo) * urand(&seed));
		}
		graph_set_init(g, v, t);
	}
	/* run the reference */
	Exec *e = NULL;
	if (exec_new(m, 1, &e, &d) != WL_OK) {
		fprintf(stderr, "%s: exec_new: %s\n", c->name, d.msg);
		return -1;
	}
	RTensor ins[12];
	int nin = 0;
	for (int i = 0; i < g->ninputs; i++) {
		Value *v = g->inputs[i];
		if (v->init)
			continue;
		int64_t dims[8];
		for (int k = 0; k < v->type.rank; k++)
			dims[k] = v->type.dims[k].value;
		RTensor *t = &ins[nin++];
		memset(t, 0, sizeof *t);
		rt_alloc(t, v->type.elem, v->type.rank, dims);
		double lo = -2, hi = 2;
		bool has = spec_get(c->ranges, v->name, &lo, &hi);
		for (int64_t k = 0; k < rt_numel(t); k++) {
			if (v->type.elem == DT_FLOAT)
				((float *)t->data)[k] = (float)(lo + (hi - lo) * urand(&seed));
			else if (v->type.elem == DT_INT8)
				((int8_t *)t->data)[k] = (int8_t)floor(lo + (hi - lo + 1) * urand(&seed));
			else if (v->type.elem == DT_UINT8)
				((uint8_t *)t->data)[k] = (uint8_t)floor(lo + (hi - lo + 1) * urand(&seed));
			else if (has)
				((int64_t *)t->data)[k] = (int64_t)floor(lo + (hi - lo + 1) * urand(&seed));
			else
				((int64_t *)t->data)[k] = k == 1 ? 0 : 1;    /* attention mask: one padded key */
		}
		if (exec_bind(e, v->name, t, &d) != WL_OK) {
			fprintf(stderr, "%s: bind: %s\n", c->name, d.msg);
			return -1;
		}
		if (v->type.elem == DT_FLOAT)
			observe(NULL, v, t);
	}
	exec_set_observer(e, observe, NULL);
	if (exec_run(e, &d) != WL_OK) {
		fprintf(stderr, "%s: run: %s\n", c->name, d.msg);
		return -1;
	}
	pp->nref = exec_output_count(e);
	for (int i = 0; i < pp->nref; i++) {
		const RTensor *r = exec_output(e, i);
		memset(&pp->ref[i], 0, sizeof pp->ref[i]);
		rt_alloc(&pp->ref[i], r->dtype, r->ndim, r->dims);
		memcpy(pp->ref[i].data, r->data, r->nbytes);
	}
	Node *n = g->first;
	pp->n = n;
	pp->m = m;
	/* formats */
	for (int i = 0; i < n->ninputs + n->noutputs; i++) {
		Value *v = i < n->ninputs ? n->inputs[i] : n->outputs[i - n->ninputs];
		if (!v || v->init || v->type.elem != DT_FLOAT)
			continue;
		v->frac_bits = rule_fbits(v->rmin, v->rmax);
		if (i >= n->ninputs && !strcmp(n->op_type, "Add"))
			v->frac_bits--;
		if (c->fp16)
			v->frac_bits = FRAC_FP16;
		if (c->f32_out && i >= n->ninputs)
			v->frac_bits = FRAC_F32;
	}
	if (ccl_kernel_info(n, &pp->ki, &d) != WL_OK) {
		fprintf(stderr, "%s: ccl_kernel_info: %s\n", c->name, d.msg);
		return -1;
	}
	/* data files and the C++ block */
	char path[1024], ebuf[16][48];
	const char *inx[16], *outx[16], *blx[8];
	fprintf(cpp, "\t{ /* %s */\n", c->name);
	int ri = 0;
	for (int i = 0; i < n->ninputs; i++) {
		Value *v = n->inputs[i];
		inx[i] = "nullptr";
		if (!v || v->init)
			continue;
		/* find its bound tensor */
		int k = 0;
		for (int j = 0; j < g->ninputs; j++) {
			if (g->inputs[j]->init)
				continue;
			if (g->inputs[j] == v)
				break;
			k++;
		}
		RTensor *t = &ins[k];
		int64_t ne = rt_numel(t);
		size_t es = elem_bytes(v);
		void *buf = malloc((size_t)ne * es);
		if (v->type.elem == DT_FLOAT)
			quantize(v, t->data, ne, buf);
		else
			memcpy(buf, t->data, (size_t)ne * es);
		if (v->type.elem == DT_INT8 && n->op == OP_WlQMatMul && i == 0) {
			pp->xq = malloc((size_t)ne);
			memcpy(pp->xq, t->data, (size_t)ne);
		}
		snprintf(path, sizeof path, "%s/c%d_in%d.bin", work, ci, i);
		write_bin(path, buf, (size_t)ne * es);
		free(buf);
		fprintf(cpp, "\t\tauto in%d = ld(dir + \"/c%d_in%d.bin\", %zu);\n", i, ci, i, (size_t)ne * es);
		snprintf(ebuf[i], sizeof ebuf[i], "in%d.data()", i);
		inx[i] = ebuf[i];
		ri++;
	}
	for (int b = 0; b < pp->ki.nblobs; b++) {
		snprintf(path, sizeof path, "%s/c%d_blob%d.bin", work, ci, b);
		write_bin(path, pp->ki.blobs[b].data, pp->ki.blobs[b].len);
		fprintf(cpp, "\t\tauto bl%d = ld(dir + \"/c%d_blob%d.bin\", %zu);\n", b, ci, b, pp->ki.blobs[b].len);
		static char bb[8][24];
		snprintf(bb[b], sizeof bb[b], "bl%d.data()", b);
		blx[b] = bb[b];
	}
	static char ob[8][24];
	for (int j = 0; j < n->noutputs; j++) {
		Value *v = n->outputs[j];
		outx[j] = "nullptr";
		if (!v)
			continue;
		size_t bytes = (size_t)type_numel(&v->type) * elem_bytes(v);
		fprintf(cpp, "\t\tstd::vector<uint8_t> out%d(%zu);\n", j, bytes);
		snprintf(ob[j], sizeof ob[j], "out%d.data()", j);
		outx[j] = ob[j];
	}
	const char *scr = NULL;
	if (pp->ki.scratch_bytes) {
		fprintf(cpp, "\t\tstd::vector<uint8_t> scr(%llu);\n", (unsigned long long)pp->ki.scratch_bytes);
		scr = "scr.data()";
	}
	fprintf(cpp, "\t\tccl::Ctx c{};\n\t\t");
	if (ccl_emit_call(n, inx, outx, blx, scr, cpp, &d) != WL_OK) {
		fprintf(stderr, "%s: ccl_emit_call: %s\n", c->name, d.msg);
		return -1;
	}
	for (int j = 0; j < n->noutputs; j++)
		if (n->outputs[j])
			fprintf(cpp, "\t\tsv(dir + \"/c%d_out%d.bin\", out%d);\n", ci, j, j);
	fprintf(cpp, "\t\tstd::printf(\"c%d %%llu %%llu\\n\", c.macs, c.alu);\n\t}\n", ci);
	exec_free(e);
	for (int i = 0; i < nin; i++)
		rt_free(&ins[i]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: kernel_check CCL_DIR WORK_DIR [CASE]\n");
		return 2;
	}
	const char *ccl = argv[1], *work = argv[2], *only = argc > 3 ? argv[3] : NULL;
	mkdir(work, 0777);
	char path[2048], cmd[8192];
	snprintf(path, sizeof path, "%s/kernels.cpp", work);
	FILE *cpp = fopen(path, "w");
	if (!cpp) {
		fprintf(stderr, "%s: cannot write\n", path);
		return 1;
	}
	fprintf(cpp, "#include \"ccl.hpp\"\n#include <cstdio>\n#include <string>\n#include <vector>\n"
	             "static std::vector<uint8_t> ld(const std::string &p, size_t n) {\n"
	             "\tstd::vector<uint8_t> v(n + 64); FILE *f = std::fopen(p.c_str(), \"rb\");\n"
	             "\tif (!f || std::fread(v.data(), 1, n, f) != n) { std::fprintf(stderr, \"%%s: read\\n\", p.c_str()); std::exit(1); }\n"
	             "\tstd::fclose(f); return v; }\n"
	             "static void sv(const std::string &p, const std::vector<uint8_t> &v) {\n"
	             "\tFILE *f = std::fopen(p.c_str(), \"wb\"); std::fwrite(v.data(), 1, v.size(), f); std::fclose(f); }\n"
	             "int main(int, char **argv) {\n\tstd::string dir = argv[1];\n");
	int nc = (int)(sizeof cases / sizeof cases[0]);
	Prepared pp[sizeof cases / sizeof cases[0]];
	memset(pp, 0, sizeof pp);
	int fails = 0;
	bool run[sizeof cases / sizeof cases[0]];
	for (int i = 0; i < nc; i++) {
		run[i] = !only || strstr(cases[i].name, only);
		if (run[i] && prepare(i, &cases[i], work, cpp, &pp[i]) != 0) {
			fails++;
			run[i] = false;
		}
	}
	fprintf(cpp, "\treturn 0;\n}\n");
	fclose(cpp);
	const char *cxx = getenv("CXX") && *getenv("CXX") ? getenv("CXX") : "g++";
	snprintf(cmd, sizeof cmd, "%s -std=c++17 -O2 -march=native -pthread -Wall -Werror -I'%s' '%s/kernels.cpp' -o '%s/kernels'",
	         cxx, ccl, work, work);
	if (system(cmd) != 0) {
		fprintf(stderr, "kernel_check: g++ failed: %s\n", cmd);
		return 1;
	}
	snprintf(cmd, sizeof cmd, "'%s/kernels' '%s' > '%s/counters.txt'", work, work, work);
	if (system(cmd) != 0) {
		fprintf(stderr, "kernel_check: the kernels binary failed\n");
		return 1;
	}
	snprintf(path, sizeof path, "%s/counters.txt", work);
	FILE *cf = fopen(path, "r");
	unsigned long long cm[64] = {0}, ca[64] = {0};
	int id;
	unsigned long long a, b;
	while (cf && fscanf(cf, "c%d %llu %llu\n", &id, &a, &b) == 3)
		if (id >= 0 && id < 64) {
			cm[id] = a;
			ca[id] = b;
		}
	if (cf)
		fclose(cf);
	printf("%-24s %-6s %10s %12s  %s\n", "case", "output", "PSNR dB", "maxerr/peak", "result");
	for (int i = 0; i < nc; i++) {
		if (!run[i])
			continue;
		Node *n = pp[i].n;
		bool ok = true;
		if (cm[i] != pp[i].ki.macs || ca[i] != pp[i].ki.alu_ops) {
			printf("%-24s counters: kernel macs %llu alu %llu, op table macs %llu alu %llu  FAIL\n", cases[i].name,
			       cm[i], ca[i], (unsigned long long)pp[i].ki.macs, (unsigned long long)pp[i].ki.alu_ops);
			ok = false;
		}
		for (int j = 0, r = 0; j < n->noutputs; j++) {
			Value *v = n->outputs[j];
			if (!v)
				continue;
			RTensor *ref = &pp[i].ref[r++];
			int64_t ne = rt_numel(ref);
			snprintf(path, sizeof path, "%s/c%d_out%d.bin", work, i, j);
			void *got = read_bin(path, (size_t)ne * elem_bytes(v));
			if (!got) {
				printf("%-24s out%d: missing output  FAIL\n", cases[i].name, j);
				ok = false;
				continue;
			}
			if (n->op == OP_WlQMatMul) {
				long bad = pp[i].xq ? qmm_expect(n, pp[i].xq, got) : -1;
				printf("%-24s out%-3d %10s %12ld  %s\n", cases[i].name, j, "integer", bad, bad ? "FAIL" : "ok");
				ok = ok && !bad;
			}
			if (ref->dtype == DT_INT8) {
				{
					int md = 0;
					for (int64_t k = 0; k < ne; k++) {
						int dd = abs(((const int8_t *)got)[k] - ((const int8_t *)ref->data)[k]);
						md = dd > md ? dd : md;
					}
					printf("%-24s out%-3d %10s %12d  %s\n", cases[i].name, j, "vs ref", md, md > 1 ? "FAIL" : "ok");
					ok = ok && md <= 1;
					free(got);
					continue;
				}
			}
			if (n->op == OP_Transpose || n->op == OP_Reshape) {
				/* bit-exact: the input was stored in its format, moved, never rounded again */
				size_t nb = (size_t)ne * elem_bytes(v);
				void *want = malloc(nb);
				quantize(v, (const float *)ref->data, ne, want);
				int bad = v->frac_bits != n->inputs[0]->frac_bits || memcmp(got, want, nb) != 0;
				printf("%-24s out%-3d %10s %12s  %s\n", cases[i].name, j, "bit-exact", bad ? "differ" : "0",
				       bad ? "FAIL" : "ok");
				ok = ok && !bad;
				free(want);
				free(got);
				continue;
			}
			if (ref->dtype == DT_INT32) {
				int bad = memcmp(got, ref->data, (size_t)ne * 4) != 0;
				printf("%-24s out%-3d %10s %12s  %s\n", cases[i].name, j, "exact", bad ? "differ" : "0",
				       bad ? "FAIL" : "ok");
				ok = ok && !bad;
				free(got);
				continue;
			}
			double peak = 0, se = 0, me = 0;
			for (int64_t k = 0; k < ne; k++) {
				double rv = ((float *)ref->data)[k], gv = deq(v, got, k), df = fabs(gv - rv);
				peak = fmax(peak, fabs(rv));
				se += df * df;
				me = fmax(me, df);
			}
			double mse = se / (double)ne, psnr = mse > 0 ? 10 * log10(peak * peak / mse) : 999;
			bool pass = psnr >= cases[i].min_psnr;
			printf("%-24s out%-3d %10.2f %12.3g  %s\n", cases[i].name, j, psnr, peak > 0 ? me / peak : me,
			       pass ? "ok" : "FAIL");
			ok = ok && pass;
			free(got);
		}
		if (!ok)
			fails++;
		ccl_kernel_info_free(&pp[i].ki);
		free(pp[i].xq);
		for (int r = 0; r < pp[i].nref; r++)
			rt_free(&pp[i].ref[r]);
		module_free(pp[i].m);
	}
	printf("kernel_check: %d failure(s)\n", fails);
	return fails ? 1 : 0;
}
