/* fp16.hpp — binary16 by bit manipulation: to/from fixed point (int64 at Q)
 * and float. Rounding to binary16 is round-to-nearest-even (as a float16
 * cast); from fixed point, overflow saturates to ±65504 (max finite), from
 * float it gives ±inf as a cast does. */
#ifndef CCL_FP16_HPP
#define CCL_FP16_HPP

#include <cstdint>
#include <cstring>

namespace ccl {

/* binary16 → int64 fixed point at Q, round half up; inf saturates, NaN → 0. */
inline int64_t fp16_to_fixed64(uint16_t h, int Q)
{
	int s = h >> 15, e = (h >> 10) & 31;
	int64_t m = h & 1023;
	if (e == 31)
		return m ? 0 : (s ? INT64_MIN : INT64_MAX);
	int sh;   /* value = m · 2^sh */
	if (e == 0) {
		sh = -24;
	} else {
		m |= 1024;
		sh = e - 25;
	}
	int t = sh + Q;   /* fixed = m · 2^t */
	int64_t v = s ? -m : m;
	if (t >= 0)
		return t > 40 ? (s ? INT64_MIN : INT64_MAX) : v * ((int64_t)1 << t);
	if (t < -62)
		return 0;
	return (v + ((int64_t)1 << (-t - 1))) >> -t;
}

/* magnitude mag · 2^-Q (mag > 0), sign s → binary16, RNE, saturating at 65504 */
inline uint16_t mag_to_fp16(uint64_t mag, int Q, int s, bool inf_on_overflow)
{
	uint16_t sg = (uint16_t)(s << 15);
	if (mag == 0)
		return sg;
	int p = 63 - __builtin_clzll(mag);
	int E = p - Q;    /* value in [2^E, 2^(E+1)) */
	uint16_t ovf = (uint16_t)(sg | (inf_on_overflow ? 0x7c00 : 0x7bff));
	if (E > 15)
		return ovf;
	int sh;           /* mantissa units: value / 2^(E-10) for normals, / 2^-24 for subnormals */
	if (E >= -14)
		sh = p - 10;  /* keep 11 bits */
	else
		sh = Q - 24;  /* units of 2^-24 */
	uint64_t r;
	if (sh <= 0) {
		r = sh < -40 ? 0 : mag << -sh;
	} else {
		if (sh >= 100)
			return sg;
		unsigned __int128 M = mag, one = 1;
		r = (uint64_t)(M >> sh);
		unsigned __int128 rem = M & ((one << sh) - 1), half = one << (sh - 1);
		if (rem > half || (rem == half && (r & 1)))
			r++;
	}
	if (E >= -14) {
		int ee = E + 15;
		if (r >= 2048) {  /* rounding carried */
			r >>= 1;
			ee++;
		}
		if (ee >= 31)
			return ovf;
		return (uint16_t)(sg | (ee << 10) | (r & 1023));
	}
	/* subnormal (r <= 1024; 1024 = smallest normal, encoded the same way) */
	return (uint16_t)(sg | r);
}

inline uint16_t fixed64_to_fp16(int64_t v, int Q)
{
	if (v < 0)
		return mag_to_fp16(v == INT64_MIN ? (uint64_t)1 << 63 : (uint64_t)-v, Q, 1, false);
	return mag_to_fp16((uint64_t)v, Q, 0, false);
}

inline float fp16_to_float(uint16_t h)
{
	uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 1023, u;
	if (e == 31)
		u = s | 0x7f800000 | (m << 13);
	else if (e == 0) {
		if (m == 0)
			u = s;
		else {   /* subnormal: normalize */
			int k = 0;
			while (!(m & 1024)) {
				m <<= 1;
				k++;
			}
			u = s | ((uint32_t)(113 - k) << 23) | ((m & 1023) << 13);
		}
	} else
		u = s | ((e + 112) << 23) | (m << 13);
	float f;
	std::memcpy(&f, &u, 4);
	return f;
}

inline uint16_t float_to_fp16(float f)
{
	uint32_t u;
	std::memcpy(&u, &f, 4);
	uint32_t s = (u >> 16) & 0x8000, e = (u >> 23) & 0xff, m = u & 0x7fffff;
	if (e == 0xff)
		return (uint16_t)(s | 0x7c00 | (m ? 0x200 : 0));
	if (e == 0)   /* float subnormals are far below binary16's range */
		return (uint16_t)s;
	return mag_to_fp16((uint64_t)(m | 0x800000), 150 - (int)e, s ? 1 : 0, true);
}

} // namespace ccl
#endif
