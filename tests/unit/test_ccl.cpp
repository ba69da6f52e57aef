/* test_ccl.cpp — unit tests of the CCL emulation's numerics
 * (targets/chimera/ccl/): round-half-up shifts and saturation at the edges,
 * FixedPoint32, binary16 conversions (exhaustive decode, RNE ties,
 * subnormals, overflow) against an independent reference, the integer
 * elementary functions against <cmath>, and the GEMM core's exact integer
 * results on ragged shapes. Plain C++ (no Check): prints each failure,
 * exits 1 if any. */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "ccl.hpp"

static int fails = 0;
#define EXPECT(c, ...)                                                         \
	do {                                                                   \
		if (!(c)) {                                                    \
			fails++;                                               \
			std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #c); \
			std::printf(__VA_ARGS__);                              \
			std::printf("\n");                                     \
		}                                                              \
	} while (0)

static void test_shifts()
{
	using ccl::rshift_round;
	EXPECT(rshift_round(5, 1) == 3, "2.5 -> 3");
	EXPECT(rshift_round(-5, 1) == -2, "-2.5 -> -2 (half up)");
	EXPECT(rshift_round(3, 1) == 2, "1.5 -> 2");
	EXPECT(rshift_round(-3, 1) == -1, "-1.5 -> -1");
	EXPECT(rshift_round(-6, 2) == -1, "-1.5 -> -1");
	EXPECT(rshift_round(-7, 2) == -2, "-1.75 -> -2");
	EXPECT(rshift_round(1, 1) == 1, "0.5 -> 1");
	EXPECT(rshift_round(-1, 1) == 0, "-0.5 -> 0");
	EXPECT(rshift_round(INT64_MAX, 1) == ((int64_t)1 << 62), "no overflow at INT64_MAX: %lld",
	       (long long)rshift_round(INT64_MAX, 1));
	EXPECT(rshift_round(INT64_MIN, 63) == 0, "shift >= 63");
	EXPECT(rshift_round(7, 0) == 7, "s = 0");
	EXPECT(rshift_round(3, -4) == 48, "left shift");
	EXPECT(rshift_round((int64_t)1 << 61, -3) == INT64_MAX, "left shift saturates");
	EXPECT(rshift_round(-((int64_t)1 << 61), -3) == INT64_MIN, "left shift saturates (neg)");
	EXPECT(ccl::sat32((int64_t)INT32_MAX + 1) == INT32_MAX, "sat32 high");
	EXPECT(ccl::sat32((int64_t)INT32_MIN - 1) == INT32_MIN, "sat32 low");
	EXPECT(ccl::sat32(-5) == -5, "sat32 pass");
	/* the brief's formula (a + (1 << (F-1))) >> F for every small a and F */
	for (int F = 1; F < 12; F++)
		for (int64_t a = -5000; a <= 5000; a++) {
			int64_t want = (int64_t)std::floor((double)a / (double)(1 << F) + 0.5);
			if (rshift_round(a, F) != want) {
				EXPECT(false, "a=%lld F=%d got %lld want %lld", (long long)a, F, (long long)rshift_round(a, F),
				       (long long)want);
				return;
			}
		}
	using F30 = ccl::FixedPoint32<30>;
	using F31 = ccl::FixedPoint32<31>;
	F30 x = F30::fromRaw(3 << 29);   /* 1.5 */
	EXPECT((x * x).raw == INT32_MAX, "1.5*1.5 saturates in Q30: %d", (x * x).raw);
	F31 m1 = F31::fromRaw(INT32_MIN); /* -1.0 */
	EXPECT((m1 * m1).raw == INT32_MAX, "-1*-1 saturates in Q31");
	F30 h = F30::fromRaw(1 << 29);    /* 0.5 */
	EXPECT((h * h).raw == (1 << 28), "0.5*0.5");
	F30 e = F30::fromRaw(3);          /* 3·2^-30 · 2^-1 → 1.5 LSB rounds to 2 */
	EXPECT((e * h).raw == 2, "round half up in multiply: %d", (e * h).raw);
	EXPECT((x + x).raw == INT32_MAX, "add saturates");
	EXPECT(x.to<28>().raw == (3 << 27), "format change");
	EXPECT(F30::fromRaw(3).to<29>().raw == 2, "format change rounds half up");
	EXPECT(F30::fromRaw(-3).to<29>().raw == -1, "format change rounds half up (neg)");
	EXPECT(F30::fromRaw(INT32_MAX).to<31>().raw == INT32_MAX, "format change saturates");
}

/* independent binary16 reference: RNE by nearbyint under the default rounding mode */
static double half_ref(double x, bool sat)
{
	if (x == 0)
		return 0;
	double a = std::fabs(x);
	int e = (int)std::floor(std::log2(a));
	if (e < -14)
		e = -14;
	double ulp = std::ldexp(1.0, e - 10);
	double r = std::nearbyint(a / ulp) * ulp;
	if (r > 65504)
		r = sat ? 65504 : INFINITY;
	return x < 0 ? -r : r;
}

static void test_fp16()
{
	/* exhaustive decode, and float → half → float identity */
	for (uint32_t h = 0; h < 65536; h++) {
		int e = (h >> 10) & 31, m = h & 1023;
		double want = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
		if (h & 0x8000)
			want = -want;
		float f = ccl::fp16_to_float((uint16_t)h);
		if (e == 31 && m) {
			EXPECT(f != f, "NaN %04x", h);
			continue;
		}
		if ((double)f != want) {
			EXPECT(false, "decode %04x: %g want %g", h, (double)f, want);
			return;
		}
		uint16_t back = ccl::float_to_fp16(f);
		if (back != h) {
			EXPECT(false, "float_to_fp16(fp16_to_float(%04x)) = %04x", h, back);
			return;
		}
		if (e != 31) {   /* fixed point at Q = 24 holds every finite binary16 exactly (|v| < 2^16) */
			int64_t q = ccl::fp16_to_fixed64((uint16_t)h, 24);
			if ((double)q != std::ldexp(want, 24)) {
				EXPECT(false, "fp16_to_fixed64(%04x, 24) = %lld", h, (long long)q);
				return;
			}
			if (h != 0x8000 && ccl::fixed64_to_fp16(q, 24) != h) {
				EXPECT(false, "fixed64_to_fp16 round trip %04x -> %04x", h, ccl::fixed64_to_fp16(q, 24));
				return;
			}
		}
	}
	/* ties to even, subnormals, overflow */
	EXPECT(ccl::float_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00, "1 + half ulp -> 1 (even)");
	EXPECT(ccl::float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02, "1 + 1.5 ulp -> 1 + 2 ulp (even)");
	EXPECT(ccl::float_to_fp16(std::ldexp(1.0f, -24)) == 0x0001, "min subnormal");
	EXPECT(ccl::float_to_fp16(std::ldexp(1.0f, -25)) == 0x0000, "half of min subnormal -> 0 (even)");
	EXPECT(ccl::float_to_fp16(3 * std::ldexp(1.0f, -26)) == 0x0001, "0.75 min subnormal -> 1");
	EXPECT(ccl::float_to_fp16(std::ldexp(1023.5f, -24)) == 0x0400, "subnormal rounds up into the smallest normal");
	EXPECT(ccl::float_to_fp16(65519.0f) == 0x7bff, "65519 -> 65504");
	EXPECT(ccl::float_to_fp16(65520.0f) == 0x7c00, "65520 -> inf (a cast overflows)");
	EXPECT(ccl::float_to_fp16(-1e6f) == 0xfc00, "-inf");
	EXPECT(ccl::fixed64_to_fp16((int64_t)1 << 40, 16) == 0x7bff, "fixed overflow saturates to 65504");
	EXPECT(ccl::fixed64_to_fp16(-((int64_t)1 << 40), 16) == 0xfbff, "fixed overflow saturates to -65504");
	EXPECT(ccl::fp16_to_fixed64(0x3c01, 9) == 513, "1 + 2^-10 at Q9 = 512.5 -> 513");
	EXPECT(ccl::fp16_to_fixed64(0xbc01, 9) == -512, "-512.5 -> -512 (half up)");
	EXPECT(ccl::fp16_to_fixed64(0x7c00, 10) == INT64_MAX, "inf saturates");
	/* fixed → binary16 against the reference on pseudo-random values and formats */
	unsigned long long s = 1;
	for (int i = 0; i < 200000; i++) {
		s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		int Q = (int)(s >> 59) + 4;          /* 4..35 */
		int bits = (int)((s >> 40) % 40) + 1;
		int64_t v = (int64_t)((s >> 3) & ((1ULL << bits) - 1));
		if (s & 4)
			v = -v;
		double x = std::ldexp((double)v, -Q);
		double want = half_ref(x, true), got = ccl::fp16_to_float(ccl::fixed64_to_fp16(v, Q));
		if (got != want) {
			EXPECT(false, "fixed64_to_fp16(%lld, %d) = %.10g, want %.10g", (long long)v, Q, got, want);
			return;
		}
	}
}

static void test_mathfx()
{
	double me = 0;
	for (int i = 0; i <= 300000; i++) {
		double x = -30.0 * i / 300000;
		int64_t x24 = (int64_t)std::llround(std::ldexp(x, 24));
		double got = std::ldexp((double)ccl::exp_q24(x24), -30), want = std::exp(std::ldexp((double)x24, -24));
		me = std::fmax(me, std::fabs(got - want));
	}
	EXPECT(me < 3e-9, "exp_q24 max abs error %g", me);
	std::printf("exp_q24 max abs error %.3g\n", me);
	me = 0;
	unsigned long long s = 7;
	for (int i = 0; i < 200000; i++) {
		s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t v = (s >> ((s & 63) % 60)) | 1;
		int Q = (int)((s >> 20) % 60);
		double got = std::ldexp((double)ccl::log2_q30(v, Q), -30), want = std::log2((double)v) - Q;
		me = std::fmax(me, std::fabs(got - want) - std::fabs(want) * 1e-16);
	}
	EXPECT(me < 4e-9, "log2_q30 max abs error %g", me);
	std::printf("log2_q30 max abs error %.3g\n", me);
	me = 0;
	for (int i = 0; i < 200000; i++) {
		s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t v = (s >> ((s & 63) % 62)) | 1;
		int Q = (int)((s >> 20) % 62);
		int64_t m;
		int e;
		ccl::rsqrt(v, Q, m, e);
		double got = std::ldexp((double)m, e - 30), want = 1.0 / std::sqrt(std::ldexp((double)v, -Q));
		me = std::fmax(me, std::fabs(got / want - 1));
		if (m <= (1 << 29) || m > (1 << 30)) {
			EXPECT(false, "rsqrt mantissa out of range: %lld", (long long)m);
			break;
		}
	}
	EXPECT(me < 3e-9, "rsqrt max rel error %g", me);
	std::printf("rsqrt max rel error %.3g\n", me);
	double ms = 0, mp = 0;
	for (int i = -200000; i <= 200000; i++) {
		double x = 12.0 * i / 200000;
		int64_t xv = (int64_t)std::llround(std::ldexp(x, 26));
		double xd = std::ldexp((double)xv, -26);
		double sg = std::ldexp((double)ccl::sigmoid_q30(xv, 26), -30), ph = std::ldexp((double)ccl::phi_q30(xv, 26), -30);
		ms = std::fmax(ms, std::fabs(sg - 1 / (1 + std::exp(-xd))));
		mp = std::fmax(mp, std::fabs(ph - 0.5 * (1 + std::erf(xd / std::sqrt(2.0)))));
	}
	EXPECT(ms < 3e-9, "sigmoid max abs error %g", ms);
	EXPECT(mp < 3e-9, "phi max abs error %g", mp);
	std::printf("sigmoid max abs error %.3g, phi %.3g\n", ms, mp);
}

/* the GEMM core on ragged shapes, exact against brute force (bits 32 path, splits) */
static void test_gemm_exact()
{
	constexpr int M = 7, K = 37, N = 19;
	std::vector<int32_t> a(M * K), w(N * K);
	std::vector<int64_t> cols(2 * N);
	unsigned long long s = 3;
	auto r = [&](int bits) {
		s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		return (int32_t)((int64_t)(s >> 33) % (1LL << bits)) - (1 << (bits - 1));
	};
	for (auto &x : a)
		x = r(31);
	for (auto &x : w)
		x = r(20);
	for (int n = 0; n < N; n++) {
		cols[2 * n] = (int64_t)r(30) * 4096;
		cols[2 * n + 1] = 24;   /* accumulator F; outputs below at F 0 and 3 */
	}
	std::vector<int32_t> y0(M * 11), y1(M * 8);
	ccl::Ctx c{};
	linalg::matMulNBits<M, K, N, 32, 0, 27, 27, 11, 0, 8, 3>(c, a.data(), w.data(), nullptr, nullptr, cols.data(),
	                                                           y0.data(), y1.data());
	for (int m = 0; m < M; m++)
		for (int n = 0; n < N; n++) {
			__int128 acc = cols[2 * n];
			for (int k = 0; k < K; k++)
				acc += (__int128)a[m * K + k] * w[n * K + k];
			int F = n < 11 ? 0 : 3;
			int64_t want = ccl::sat32(ccl::rshift_round((int64_t)acc, 24 - F));
			int32_t got = n < 11 ? y0[m * 11 + n] : y1[m * 8 + n - 11];
			if (got != want) {
				EXPECT(false, "gemm m=%d n=%d got %d want %lld", m, n, got, (long long)want);
				return;
			}
		}
	EXPECT(c.macs == (unsigned long long)M * K * N && c.alu == (unsigned long long)M * N, "counters");
}

/* Stores that clip (a value outside its calibrated format) are counted, so
 * the runner can report them (counters.json "saturated"): found debugging
 * the float Whisper decoder, where one LayerNorm output (4.043 at F 29,
 * limit 4) clipped silently and flipped a near-tie token. */
static void test_saturation_count()
{
	int32_t y[4];
	unsigned long long s0 = ccl::saturated_stores.load();
	ccl::stq<29>(y, 0, (int64_t)(3.99 * (1 << 29)), 29);
	EXPECT(ccl::saturated_stores.load() == s0, "in range: no count");
	ccl::stq<29>(y, 1, (int64_t)(4.043 * (1 << 29)), 29);
	ccl::stq_rt(29, y, 2, -(int64_t)(4.5 * (1 << 30)), 30);
	EXPECT(y[1] == INT32_MAX && y[2] == INT32_MIN, "clipped");
	EXPECT(ccl::saturated_stores.load() == s0 + 2, "two clipped stores: %llu",
	       ccl::saturated_stores.load() - s0);
	/* a layerNorm whose output leaves F 29: one outlier in a row of 32
	 * normalizes to sqrt(31) = 5.57 > 4 */
	constexpr int D = 32;
	int32_t x[D], gb[2 * D], out[D];
	for (int i = 0; i < D; i++) {
		x[i] = i == 3 ? 1 << 27 : 0;                      /* F 27 */
		gb[i] = 1 << 30;                                  /* gamma 1 at F 30 */
		gb[D + i] = 0;
	}
	ccl::Ctx c{};
	s0 = ccl::saturated_stores.load();
	nn::layerNorm<1, D, 27, 27, 29, 30, 31, 10995116LL>(c, x, gb, out);
	EXPECT(out[3] == INT32_MAX, "outlier clipped at 4: %d", out[3]);
	EXPECT(ccl::saturated_stores.load() == s0 + 1, "layerNorm: one clipped store: %llu",
	       ccl::saturated_stores.load() - s0);
}

int main()
{
	test_saturation_count();
	test_shifts();
	test_fp16();
	test_mathfx();
	test_gemm_exact();
	std::printf("test_ccl: %d failure(s)\n", fails);
	return fails ? 1 : 0;
}
