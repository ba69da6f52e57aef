/* mathfx.hpp — integer-only elementary functions (tables in mathfx_tables.hpp):
 *   exp_fx(x, Q)    e^x for x <= 0 given at Q → Q30              (|err| ≲ 2^-30)
 *   log2_q30(v, Q)  log2(v · 2^-Q) for v > 0 → Q30 (int64)      (|err| ≲ 2^-29)
 *   rsqrt(v, Q)     1/sqrt(v · 2^-Q) as mantissa Q30 in (2^29, 2^30] and exponent
 *   sigmoid_q30(x, Q), phi_q30(x, Q) (standard normal CDF)     → Q30
 */
#ifndef CCL_MATHFX_HPP
#define CCL_MATHFX_HPP

#include <cstdint>
#include "fixed.hpp"
#include "mathfx_tables.hpp"

namespace ccl {

constexpr int64_t LOG2E_Q30 = 1549082005LL;   /* log2(e) */
constexpr int64_t LN2_Q30 = 744261118LL;      /* ln(2) */
constexpr int64_t LOG10_2_Q30 = 323228497LL;  /* log10(2) */
constexpr int64_t SQRT_2_OVER_PI_Q30 = 856722024LL;
constexpr int64_t ONE30 = (int64_t)1 << 30;

/* e^x for x = xv · 2^-Q <= 0 (Q <= 40), result Q30 in [0, 2^30]:
 * 2^(x·log2 e) = 2^ip · 2^(i/64) · e^(r·ln2), |r| < 2^-6, cubic for the last. */
inline int64_t exp_fx(int64_t xv, int Q)
{
	if (xv >= 0)
		return ONE30;
	if (xv < -((int64_t)22 << Q))   /* e^-22 < 2^-31 */
		return 0;
	int64_t y = rshift_round128((__int128)xv * LOG2E_Q30, Q + 30 - 40);   /* log2 domain, Q40, <= 0 */
	int64_t ip = y >> 40;                                /* floor */
	int64_t fr = y - ip * ((int64_t)1 << 40);                         /* [0, 2^40) */
	int idx = (int)(fr >> 34);
	int64_t r = fr & (((int64_t)1 << 34) - 1);           /* Q40, < 2^-6 */
	int64_t t = rshift_round128((__int128)r * LN2_Q30, 40); /* r·ln2 in Q30 */
	int64_t t2 = rshift_round(t * t, 30);
	int64_t t3 = rshift_round(t2 * t, 30);
	int64_t poly = ONE30 + t + (t2 + 1) / 2 + (t3 + 3) / 6;    /* e^t, Q30 */
	int64_t m = rshift_round(tab::exp2_64[idx] * poly, 30);    /* 2^(fr) in Q30, [2^30, 2^31) */
	return rshift_round(m, (int)-ip);
}

inline int64_t exp_q24(int64_t x) { return exp_fx(x, 24); }

/* log2(v · 2^-Q), v > 0 → Q30. */
inline int64_t log2_q30(uint64_t v, int Q)
{
	int p = msb64(v);
	uint64_t m = p >= 30 ? (v >> (p - 30)) : (v << (30 - p));   /* [2^30, 2^31), truncated */
	/* keep the bits below for z: use 62-bit normalization for the remainder */
	uint64_t m62 = p >= 62 ? (v >> (p - 62)) : (v << (62 - p));  /* [2^62, 2^63) */
	int idx = (int)((m >> 24) & 63);
	uint64_t base62 = ((uint64_t)1 << 62) + ((uint64_t)idx << 56);
	/* z = (m − base)/base in Q30 */
	int64_t z = (int64_t)((((unsigned __int128)(m62 - base62) << 30) + base62 / 2) / base62);
	int64_t z2 = rshift_round(z * z, 30), z3 = rshift_round(z2 * z, 30), z4 = rshift_round(z3 * z, 30);
	int64_t ln = z - z2 / 2 + z3 / 3 - z4 / 4;                  /* ln(1+z), Q30 */
	int64_t l2 = tab::log2_64[idx] + rshift_round(ln * LOG2E_Q30, 30);
	return l2 + ((int64_t)p - Q) * ONE30;
}

inline int64_t log2_q30_128(unsigned __int128 v, int Q)
{
	int p = msb128(v);
	if (p <= 62)
		return log2_q30((uint64_t)v, Q);
	int s = p - 62;
	return log2_q30((uint64_t)(v >> s), Q - s);   /* truncation below 2^-62 relative */
}

/* 1/sqrt(v · 2^-Q) = mant · 2^-30 · 2^e with mant in (2^29, 2^30]; v > 0. */
inline void rsqrt(uint64_t v, int Q, int64_t &mant, int &e)
{
	int p = msb64(v);
	int s = p - 30;               /* m = v · 2^-s in [2^30, 2^31) */
	if (((30 + s - Q) & 1) != 0)  /* make the exponent even: m in [2^31, 2^32) */
		s -= 1;
	uint64_t m = s >= 0 ? (v >> s) : (v << -s);   /* truncated below 2^-30 relative */
	int64_t y = tab::rsqrt_seed[(m >> 27) - 8];
	for (int it = 0; it < 4; it++) {
		int64_t y2 = rshift_round(y * y, 30);
		int64_t my2 = rshift_round((int64_t)m * y2, 30);
		y = rshift_round(y * (3 * ONE30 - my2), 31);
	}
	if (y > ONE30)
		y = ONE30;
	mant = y;
	e = -(30 + s - Q) / 2;
}

/* σ(x), x = xv · 2^-Q → Q30. */
inline int64_t sigmoid_q30(int64_t xv, int Q)
{
	int64_t ax = xv < 0 ? -xv : xv;
	int64_t a28 = rshift_round(ax, Q - 28);
	if (a28 > ((int64_t)40 << 28))
		a28 = (int64_t)40 << 28;
	int64_t e = exp_fx(-a28, 28);   /* e^-|x| */
	int64_t den = ONE30 + e;
	if (xv >= 0)
		return (((int64_t)1 << 60) + den / 2) / den;
	return ((e << 30) + den / 2) / den;
}

/* Φ(x) (standard normal CDF), x = xv · 2^-Q → Q30; cubic Hermite on the
 * 1/128 grid of [-8, 8]. */
inline int64_t phi_q30(int64_t xv, int Q)
{
	int64_t x28 = rshift_round(xv, Q - 28);
	if (x28 <= -((int64_t)8 << 28))
		return 0;
	if (x28 >= ((int64_t)8 << 28))
		return ONE30;
	int64_t pos = x28 + ((int64_t)8 << 28);
	int i = (int)(pos >> 21);
	int64_t t = (pos & ((1 << 21) - 1)) << 9;       /* Q30 in [0, 1) */
	int64_t t2 = rshift_round(t * t, 30), t3 = rshift_round(t2 * t, 30);
	int64_t h00 = 2 * t3 - 3 * t2 + ONE30, h10 = t3 - 2 * t2 + t, h01 = -2 * t3 + 3 * t2, h11 = t3 - t2;
	int64_t acc = h00 * tab::phi[i] + h10 * tab::dphi[i] + h01 * tab::phi[i + 1] + h11 * tab::dphi[i + 1];
	return rshift_round(acc, 30);
}

} // namespace ccl
#endif
