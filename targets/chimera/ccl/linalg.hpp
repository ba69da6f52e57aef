/* linalg.hpp — the int32×int32→int64 GEMM core, linalg::matMulNBits and
 * linalg::qMatMul (int8×int8→int32, integer requantization) (API.md). Accumulation is exact int64; each output is one round-half-up
 * shift of (acc + bias) from the column's accumulator format. */
#ifndef CCL_LINALG_HPP
#define CCL_LINALG_HPP

#include <cstdint>
#include <vector>
#include "fixed.hpp"
#include "parallel.hpp"

#pragma GCC push_options
#pragma GCC optimize("O3")
namespace ccl {
namespace detail {

constexpr int GEMM_NT = 8;    /* columns per weight tile */
constexpr int GEMM_MR = 4;    /* rows per micro-kernel step */
constexpr int GEMM_MB = 64;   /* rows per block */
constexpr int GEMM_TG = 8;    /* tiles per work unit */

/* C[m][n] = Σ_k A[m·lda + k] · W_n[k], for n in [0, N); the weights come
 * from tile(n0, nn, wt) which fills wt[k·GEMM_NT + j] (j < nn; the rest is
 * zeroed by the caller) for columns n0..n0+nn-1. epi(m, n, acc) consumes
 * each result. Bit-identical for any thread count. */
template <typename Tile, typename Epi>
void gemm(const int32_t *A, long long lda, long long M, long long K, long long N, Tile tile, Epi epi)
{
	long long ntiles = (N + GEMM_NT - 1) / GEMM_NT;
	long long tg = (ntiles + GEMM_TG - 1) / GEMM_TG;
	long long mb = (M + GEMM_MB - 1) / GEMM_MB;
	parallel_for(mb * tg, 1, [&](long long u0, long long u1, int) {
		std::vector<int32_t> wt((size_t)K * GEMM_NT);
		for (long long u = u0; u < u1; u++) {
			long long bm = u / tg, g = u % tg;
			long long m0 = bm * GEMM_MB, m1 = m0 + GEMM_MB < M ? m0 + GEMM_MB : M;
			for (long long t = g * GEMM_TG; t < (g + 1) * GEMM_TG && t < ntiles; t++) {
				long long n0 = t * GEMM_NT;
				int nn = (int)(N - n0 < GEMM_NT ? N - n0 : GEMM_NT);
				if (nn < GEMM_NT)
					std::fill(wt.begin(), wt.end(), 0);
				tile(n0, nn, wt.data());
				long long m = m0;
				for (; m + GEMM_MR <= m1; m += GEMM_MR) {
					int64_t acc[GEMM_MR][GEMM_NT] = {};
					const int32_t *a0 = A + m * lda;
					for (long long k = 0; k < K; k++) {
						const int32_t *w = wt.data() + k * GEMM_NT;
						for (int r = 0; r < GEMM_MR; r++) {
							int64_t x = a0[r * lda + k];
							for (int j = 0; j < GEMM_NT; j++)
								acc[r][j] += x * w[j];
						}
					}
					for (int r = 0; r < GEMM_MR; r++)
						for (int j = 0; j < nn; j++)
							epi(m + r, n0 + j, acc[r][j]);
				}
				for (; m < m1; m++) {
					int64_t acc[GEMM_NT] = {};
					const int32_t *a0 = A + m * lda;
					for (long long k = 0; k < K; k++) {
						int64_t x = a0[k];
						const int32_t *w = wt.data() + k * GEMM_NT;
						for (int j = 0; j < GEMM_NT; j++)
							acc[j] += x * w[j];
					}
					for (int j = 0; j < nn; j++)
						epi(m, n0 + j, acc[j]);
				}
			}
		}
	});
}

/* Input activation as int32 at Q: the storage itself when it already is, else a converted copy. */
template <int FX>
const int32_t *as_fixed(const void *x, long long n, int Q, std::vector<int32_t> &tmp)
{
	if constexpr (isFixed(FX)) {
		if (FX == Q)
			return (const int32_t *)x;
	}
	tmp.resize((size_t)n);
	for (long long i = 0; i < n; i++)
		tmp[(size_t)i] = ldq<FX>(x, (size_t)i, Q);
	return tmp.data();
}

} // namespace detail
} // namespace ccl
#pragma GCC pop_options

namespace linalg {

template <int M, int K, int N, int BITS, int BS, int FA, int QA, int... SPLITS, typename... OUT>
void matMulNBits(ccl::Ctx &c, const void *a, const void *w, const void *scales, const void *zp, const void *cols,
                 OUT... y)
{
	using namespace ccl;
	constexpr int NS = (int)sizeof...(SPLITS) / 2;
	static_assert(sizeof...(SPLITS) % 2 == 0 && NS >= 1, "SPLITS = n0, F0, n1, F1, ...");
	static_assert((int)sizeof...(OUT) == NS, "one output per split");
	static_assert(BITS == 32 || BITS == 2 || BITS == 4 || BITS == 8, "bits");
	const int sp[] = {SPLITS...};
	void *outs[] = {(void *)y...};
	std::vector<int> sidx(N), scol(N);
	{
		int n = 0;
		for (int s = 0; s < NS; s++)
			for (int j = 0; j < sp[2 * s]; j++, n++)
				if (n < N) {
					sidx[n] = s;
					scol[n] = j;
				}
	}
	std::vector<int32_t> tmp;
	const int32_t *A = detail::as_fixed<FA>(a, (long long)M * K, QA, tmp);
	const int64_t *cl = (const int64_t *)cols;
	auto epi = [&](long long m, long long n, int64_t acc) {
		int s = sidx[n];
		int64_t v = acc + cl[2 * n];
		stq_rt(sp[2 * s + 1], outs[s], (size_t)(m * sp[2 * s] + scol[n]), v, (int)cl[2 * n + 1]);
	};
	if constexpr (BITS == 32) {
		const int32_t *W = (const int32_t *)w;
		detail::gemm(A, K, M, K, N, [&](long long n0, int nn, int32_t *wt) {
			for (int j = 0; j < nn; j++) {
				const int32_t *row = W + (n0 + j) * (long long)K;
				for (long long k = 0; k < K; k++)
					wt[k * detail::GEMM_NT + j] = row[k];
			}
		}, epi);
	} else {
		constexpr long long KB = (K + BS - 1) / BS, ROWB = KB * BS * BITS / 8;
		const uint8_t *W = (const uint8_t *)w, *Z = (const uint8_t *)zp;
		const int32_t *S = (const int32_t *)scales;
		detail::gemm(A, K, M, K, N, [&](long long n0, int nn, int32_t *wt) {
			for (int j = 0; j < nn; j++) {
				long long n = n0 + j;
				const uint8_t *row = W + n * ROWB;
				for (long long b = 0; b < KB; b++) {
					int32_t sm = S[n * KB + b], z = Z[n * KB + b];
					long long k1 = (b + 1) * BS < K ? (b + 1) * BS : K;
					for (long long k = b * BS; k < k1; k++) {
						int q;
						if constexpr (BITS == 8)
							q = row[k];
						else
							q = (row[(k * BITS) >> 3] >> ((k * BITS) & 7)) & ((1 << BITS) - 1);
						wt[k * detail::GEMM_NT + j] = (q - z) * sm;
					}
				}
			}
		}, epi);
	}
	c.macs += (unsigned long long)M * K * N;
	c.alu += (unsigned long long)M * N;
}

/* linalg::qMatMul (API.md): y = requant_n(Σ_k xq[m,k]·w[n,k] + off_n). xq int8
 * [M, K], w int8 [N, K] (row n = column n of the ONNX weight); rq int64 [N, 4]
 * = {off_n = −zx·Σ_k w[n,k], mult_n, shift_n, zy}. The MACs accumulate in
 * int32 (exact: |Σ| <= K·2^14 < 2^31 for K <= 65793); requantization is one
 * 64×32-bit product and a round-half-up shift: v = (acc + off)·mult_n ·
 * 2^−shift_n, then for FY = I8: saturate(v + zy) to int8, else v is the value
 * at fixed point QY stored in FY (fixed/FP16/F32, ccl::stq). */
template <int M, int K, int N, int FY, int QY>
void qMatMul(ccl::Ctx &c, const void *xq, const void *w, const void *rq, void *y)
{
	using namespace ccl;
	static_assert(K > 0 && K <= 65793, "K: int32 accumulation");
	const int8_t *X = (const int8_t *)xq, *W = (const int8_t *)w;
	const int64_t *R = (const int64_t *)rq;
	parallel_for(M, 1, [&](long long m0, long long m1, int) {
		for (long long m = m0; m < m1; m++) {
			const int8_t *xr = X + m * (long long)K;
			for (long long n = 0; n < N; n++) {
				const int8_t *wr = W + n * (long long)K;
				int32_t acc = 0;
				for (long long k = 0; k < K; k++)
					acc += (int32_t)xr[k] * (int32_t)wr[k];
				const int64_t *r = R + 4 * n;
				int64_t v = rshift_round128((__int128)((int64_t)acc + r[0]) * r[1], (int)r[2]);
				size_t i = (size_t)(m * N + n);
				if constexpr (FY == I8) {
					v += r[3];
					((int8_t *)y)[i] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
				} else {
					stq<FY>(y, i, v, QY);
				}
			}
		}
	});
	c.macs += (unsigned long long)M * K * N;
	c.alu += (unsigned long long)M * N;
}

} // namespace linalg
#endif
