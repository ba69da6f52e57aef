/* fixed.hpp — FixedPoint32<F>, round-half-up shifts, saturation, and the
 * load/store conversions between storage formats (API.md "Formats").
 * Integer-only except for values whose storage is F32 (float). */
#ifndef CCL_FIXED_HPP
#define CCL_FIXED_HPP

#include <atomic>
#include <cstdint>
#include <cstring>
#include <cmath>
#include "program.hpp"
#include "fp16.hpp"

namespace ccl {

inline int32_t sat32(int64_t v)
{
	return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
}

inline int64_t sat_shl64(int64_t v, int s)
{
	if (v == 0 || s <= 0)
		return v;
	if (s >= 63)
		return v > 0 ? INT64_MAX : INT64_MIN;
	int64_t lim = INT64_MAX >> s;
	if (v > lim)
		return INT64_MAX;
	if (v < -lim - 1)
		return INT64_MIN;
	return (int64_t)((uint64_t)v << s);
}

/* v · 2^-s with round-half-up: (v + (1 << (s-1))) >> s (arithmetic shift);
 * s <= 0 shifts left (saturating at int64). */
inline int64_t rshift_round(int64_t v, int s)
{
	if (s <= 0)
		return sat_shl64(v, -s);
	if (s > 62)
		return 0;
	int64_t h = (int64_t)1 << (s - 1);
	if (v > INT64_MAX - h)        /* would overflow: exact result of the sum >> s */
		return (int64_t)(((__int128)v + h) >> s);
	return (v + h) >> s;
}

inline int64_t rshift_round128(__int128 v, int s)
{
	if (s <= 0) {
		__int128 r = v * ((__int128)1 << (s < -62 ? 62 : -s));
		return r > INT64_MAX ? INT64_MAX : r < INT64_MIN ? INT64_MIN : (int64_t)r;
	}
	if (s > 126)
		return 0;
	__int128 r = (v + ((__int128)1 << (s - 1))) >> s;
	return r > INT64_MAX ? INT64_MAX : r < INT64_MIN ? INT64_MIN : (int64_t)r;
}

/* FixedPoint32<F>: int32 holding round(v · 2^F). */
template <int F>
struct FixedPoint32 {
	static_assert(F >= 0 && F <= 31, "F in 0..31");
	int32_t raw;
	static FixedPoint32 fromRaw(int32_t r) { FixedPoint32 x; x.raw = r; return x; }
	/* saturating add of the same format */
	FixedPoint32 operator+(FixedPoint32 o) const { return fromRaw(sat32((int64_t)raw + o.raw)); }
	FixedPoint32 operator-(FixedPoint32 o) const { return fromRaw(sat32((int64_t)raw - o.raw)); }
	/* 64-bit product, round-half-up back to F, saturated */
	FixedPoint32 operator*(FixedPoint32 o) const
	{
		int64_t p = (int64_t)raw * o.raw;
		return fromRaw(sat32(F ? rshift_round(p, F) : p));
	}
	template <int G> FixedPoint32<G> to() const
	{
		return FixedPoint32<G>::fromRaw(sat32(rshift_round(raw, F - G)));
	}
};

constexpr bool isFixed(int fmt) { return fmt >= 0 && fmt <= 31; }
constexpr int elemSize(int fmt) { return fmt == FP16 ? 2 : fmt == I64 ? 8 : fmt == I8 || fmt == U8 ? 1 : 4; }

/* float → fixed Q (F32 storage only): round half up, saturating. */
inline int64_t f32_to_fixed64(float f, int Q)
{
	if (f != f)
		return 0;
	double x = std::floor(std::ldexp((double)f, Q) + 0.5);
	if (x >= 9.2e18)
		return INT64_MAX;
	if (x <= -9.2e18)
		return INT64_MIN;
	return (int64_t)x;
}

/* Element i of storage format FMT as an int32 fixed-point value at Q (saturating). */
template <int FMT>
inline int32_t ldq(const void *p, size_t i, int Q)
{
	if constexpr (isFixed(FMT)) {
		int32_t v = ((const int32_t *)p)[i];
		if (Q == FMT)
			return v;
		return sat32(rshift_round(v, FMT - Q));
	} else if constexpr (FMT == FP16) {
		return sat32(fp16_to_fixed64(((const uint16_t *)p)[i], Q));
	} else {
		static_assert(FMT == F32, "activation format");
		return sat32(f32_to_fixed64(((const float *)p)[i], Q));
	}
}

/* Stores to a fixed-point format that clipped at int32: the value left its
 * calibrated format. Counted (relaxed atomic: kernels run on threads) so the
 * runner can report them per kernel ("saturated" in counters.json). */
inline std::atomic<unsigned long long> saturated_stores{0};

inline int32_t sat32_store(int64_t v)
{
	if (v > INT32_MAX || v < INT32_MIN)
		saturated_stores.fetch_add(1, std::memory_order_relaxed);
	return sat32(v);
}

/* Stores v (fixed point at Q, int64) in storage format FMT at element i. */
template <int FMT>
inline void stq(void *p, size_t i, int64_t v, int Q)
{
	if constexpr (isFixed(FMT)) {
		((int32_t *)p)[i] = sat32_store(rshift_round(v, Q - FMT));
	} else if constexpr (FMT == FP16) {
		((uint16_t *)p)[i] = fixed64_to_fp16(v, Q);
	} else {
		static_assert(FMT == F32, "activation format");
		((float *)p)[i] = (float)std::ldexp((double)v, -Q);
	}
}

/* Run-time format versions (split outputs). */
inline void stq_rt(int fmt, void *p, size_t i, int64_t v, int Q)
{
	if (isFixed(fmt))
		((int32_t *)p)[i] = sat32_store(rshift_round(v, Q - fmt));
	else if (fmt == FP16)
		((uint16_t *)p)[i] = fixed64_to_fp16(v, Q);
	else
		((float *)p)[i] = (float)std::ldexp((double)v, -Q);
}

inline int32_t ldq_rt(int fmt, const void *p, size_t i, int Q)
{
	if (isFixed(fmt))
		return sat32(rshift_round(((const int32_t *)p)[i], fmt - Q));
	if (fmt == FP16)
		return sat32(fp16_to_fixed64(((const uint16_t *)p)[i], Q));
	return sat32(f32_to_fixed64(((const float *)p)[i], Q));
}

/* Direct format conversion of element i (copy): no intermediate rounding. */
template <int FX, int FY>
inline void cvt(const void *x, size_t i, void *y, size_t j)
{
	if constexpr (isFixed(FX)) {
		stq<FY>(y, j, ((const int32_t *)x)[i], FX);
	} else if constexpr (FX == FP16) {
		uint16_t h = ((const uint16_t *)x)[i];
		if constexpr (FY == FP16)
			((uint16_t *)y)[j] = h;
		else if constexpr (FY == F32)
			((float *)y)[j] = fp16_to_float(h);
		else
			((int32_t *)y)[j] = sat32(fp16_to_fixed64(h, FY));
	} else {
		float f = ((const float *)x)[i];
		if constexpr (FY == F32)
			((float *)y)[j] = f;
		else if constexpr (FY == FP16)
			((uint16_t *)y)[j] = float_to_fp16(f);
		else
			((int32_t *)y)[j] = sat32(f32_to_fixed64(f, FY));
	}
}

/* position of the highest set bit of v > 0 (0-based) */
inline int msb64(uint64_t v) { return 63 - __builtin_clzll(v); }
inline int msb128(unsigned __int128 v)
{
	uint64_t hi = (uint64_t)(v >> 64);
	return hi ? 64 + msb64(hi) : msb64((uint64_t)v);
}

} // namespace ccl
#endif
