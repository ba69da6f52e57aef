/* whisper.hpp — whisper::convStem and whisper::logMel (API.md). */
#ifndef CCL_WHISPER_HPP
#define CCL_WHISPER_HPP

#include <cstdint>
#include <vector>
#include "fixed.hpp"
#include "mathfx.hpp"
#include "parallel.hpp"
#include "linalg.hpp"

#pragma GCC push_options
#pragma GCC optimize("O3")

namespace whisper {

template <int B, int C, int F, int D, int FX, int QX, int FH, int FP, int FY>
void convStem(ccl::Ctx &c, const void *x, const void *w1, const void *cols1, const void *w2, const void *cols2,
              const void *pos, void *y, void *scratch)
{
	using namespace ccl;
	constexpr int F2 = (F - 1) / 2 + 1;
	std::vector<int32_t> own;
	size_t nx = (size_t)(F + 2) * C, nh = (size_t)(F + 2) * D;
	int32_t *xp = ccl::detail::scratch_or(scratch, nx + nh, own), *h1 = xp + nx;
	const int32_t *W1 = (const int32_t *)w1, *W2 = (const int32_t *)w2, *P = (const int32_t *)pos;
	const int64_t *c1 = (const int64_t *)cols1, *c2 = (const int64_t *)cols2;
	auto tile = [](const int32_t *W, long long K) {
		return [W, K](long long n0, int nn, int32_t *wt) {
			for (int j = 0; j < nn; j++) {
				const int32_t *row = W + (n0 + j) * K;
				for (long long k = 0; k < K; k++)
					wt[k * detail::GEMM_NT + j] = row[k];
			}
		};
	};
	for (int b = 0; b < B; b++) {
		/* time-major, zero-padded input: row t+1 = x[:, t] */
		std::fill(xp, xp + nx, 0);
		for (int ch = 0; ch < C; ch++)
			for (int t = 0; t < F; t++)
				xp[(size_t)(t + 1) * C + ch] = ldq<FX>(x, ((size_t)b * C + ch) * F + t, QX);
		std::fill(h1, h1 + D, 0);
		std::fill(h1 + (size_t)(F + 1) * D, h1 + nh, 0);
		/* conv1 (k3 s1 p1): row t reads padded rows t..t+2 = 3C contiguous values */
		detail::gemm(xp, C, F, 3LL * C, D, tile(W1, 3LL * C), [&](long long t, long long o, int64_t acc) {
			int64_t v = acc + c1[2 * o];
			int Q = (int)c1[2 * o + 1];
			int64_t v28 = rshift_round(v, Q - 28);   /* GELU at Q28 (int64) */
			int64_t g = rshift_round128((__int128)v28 * phi_q30(v28, 28), 30 + 28 - FH);
			h1[(size_t)(t + 1) * D + o] = sat32(g);
		});
		/* conv2 (k3 s2 p1): output t reads padded rows 2t..2t+2 */
		detail::gemm(h1, 2LL * D, F2, 3LL * D, D, tile(W2, 3LL * D), [&](long long t, long long o, int64_t acc) {
			int64_t v = acc + c2[2 * o];
			int Q = (int)c2[2 * o + 1];
			int64_t v28 = rshift_round(v, Q - 28);
			__int128 g = (__int128)v28 * phi_q30(v28, 28);          /* at Q58 */
			g += (__int128)P[(size_t)t * D + o] * ((__int128)1 << (58 - FP));        /* + positional */
			constexpr int Qt = isFixed(FY) ? FY : 40;
			stq<FY>(y, ((size_t)b * F2 + t) * D + o, rshift_round128(g, 58 - Qt), Qt);
		});
	}
	c.macs += (unsigned long long)B * ((unsigned long long)F * C * 3 * D + (unsigned long long)F2 * D * 3 * D);
	c.alu += (unsigned long long)B * ((unsigned long long)F * D + (unsigned long long)F2 * D) * 4 +
	         (unsigned long long)B * F2 * D;
}

template <long long NS, int NMELS, int FX, int QX, int FF, int FY>
void logMel(ccl::Ctx &c, const void *wave, const void *dft, const void *filt, void *y, void *scratch)
{
	using namespace ccl;
	constexpr long long FR = NS / 160;
	constexpr int NB = 201, NF = 400;
	std::vector<int32_t> own;
	int32_t *lg = ccl::detail::scratch_or(scratch, (size_t)NMELS * FR, own);   /* log10 in Q26 */
	const int32_t *cs = (const int32_t *)dft, *sn = cs + NB * NF, *fl = (const int32_t *)filt;
	parallel_for(FR, 8, [&](long long f0, long long f1, int) {
		std::vector<int32_t> xs(NF);
		std::vector<int64_t> re(NB), im(NB);
		std::vector<unsigned __int128> pw(NB);
		for (long long t = f0; t < f1; t++) {
			long long st = t * 160 - 200;
			for (int n = 0; n < NF; n++) {
				long long i = st + n;
				if (i < 0)
					i = -i;
				if (i >= NS)
					i = 2 * (NS - 1) - i;
				xs[n] = (int32_t)rshift_round(ldq<FX>(wave, (size_t)i, QX), QX - 23);   /* F23 */
			}
			int64_t mx = 0;
			for (int k = 0; k < NB; k++) {
				int64_t r = 0, s = 0;
				const int32_t *ck = cs + k * NF, *sk = sn + k * NF;
				for (int n = 0; n < NF; n++) {
					r += (int64_t)xs[n] * ck[n];
					s += (int64_t)xs[n] * sk[n];
				}
				re[k] = r;   /* F51 */
				im[k] = s;
				mx = std::max(mx, std::max(r < 0 ? -r : r, s < 0 ? -s : s));
			}
			/* block exponent of the frame: |re|, |im| < 2^40 */
			int sh = mx ? std::max(0, msb64((uint64_t)mx) + 1 - 40) : 0;
			for (int k = 0; k < NB; k++) {
				__int128 r = rshift_round(re[k], sh), s = rshift_round(im[k], sh);
				pw[k] = (unsigned __int128)(r * r + s * s);   /* at 2·(51 − sh) */
			}
			int Qp = 2 * (51 - sh) + FF;
			for (int m = 0; m < NMELS; m++) {
				__int128 e = 0;
				const int32_t *fr = fl + m * NB;
				for (int k = 0; k < NB; k++)
					if (fr[k])
						e += (__int128)fr[k] * (__int128)pw[k];
				int64_t l10;
				if (e <= 0) {
					l10 = -((int64_t)10 << 26);
				} else {
					int64_t l2 = log2_q30_128((unsigned __int128)e, Qp);
					l10 = rshift_round128((__int128)l2 * LOG10_2_Q30, 34);   /* Q26 */
					if (l10 < -((int64_t)10 << 26))
						l10 = -((int64_t)10 << 26);   /* log10(max(x, 1e-10)) */
				}
				lg[(size_t)m * FR + t] = (int32_t)l10;
			}
		}
	});
	int32_t gmax = INT32_MIN;
	for (size_t i = 0; i < (size_t)NMELS * FR; i++)
		gmax = std::max(gmax, lg[i]);
	int32_t floor_ = gmax - (8 << 26);
	for (size_t i = 0; i < (size_t)NMELS * FR; i++) {
		int64_t v = std::max(lg[i], floor_);
		stq<FY>(y, i, v + (4LL << 26), 28);   /* (x + 4) / 4: Q26 → Q28 */
	}
	c.macs += (unsigned long long)FR * NF * NB * 2 + (unsigned long long)FR * NB * NMELS;
	c.alu += (unsigned long long)FR * NB * 2 + (unsigned long long)FR * NMELS * 4;
}

} // namespace whisper

#pragma GCC pop_options
#endif
