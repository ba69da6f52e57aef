/* nn.hpp — normalizations, activations, elementwise ops, embedding, argmax,
 * copy and the attention kernels (API.md). Integer-only numerics; F32
 * storage is converted at the edges only. */
#ifndef CCL_NN_HPP
#define CCL_NN_HPP

#include <cstdint>
#include <vector>
#include "fixed.hpp"
#include "mathfx.hpp"
#include "parallel.hpp"

#pragma GCC push_options
#pragma GCC optimize("O3")

namespace ccl {
namespace detail {

/* 1/sqrt(v · 2^-Q) for a positive int128 (mantissa Q30, exponent e). */
inline void rsqrt128(unsigned __int128 v, int Q, int64_t &mant, int &e)
{
	int p = msb128(v);
	int s = p > 61 ? p - 61 : 0;
	if (s & 1)
		s++;
	rsqrt((uint64_t)(v >> s), Q - s, mant, e);
}

/* y_i = c_i · rstd · g_i (+ beta_i), c_i at Q (int64), see API.md. */
template <int D, int QX, int FY, int FG, int FB, bool LN, long long EPS40>
void norm_row(const int64_t *cx, const int32_t *g, const int32_t *bt, void *y, size_t yoff)
{
	unsigned __int128 ss = 0;
	for (int i = 0; i < D; i++) {
		__int128 v = cx[i];
		ss += (unsigned __int128)(v * v);
	}
	/* var + eps at 2·QX: Σc²/D + eps·2^(2QX−40) */
	unsigned __int128 var = (ss + D / 2) / D;
	int64_t eps = rshift_round(EPS40, 40 - 2 * QX);
	var += (unsigned __int128)eps;
	if (var == 0)
		var = 1;
	int64_t mant;
	int e;
	rsqrt128(var, 2 * QX, mant, e);
	const int FZ = QX - e - 1;           /* z = c·mant >> 31 is at FZ */
	for (int i = 0; i < D; i++) {
		int64_t z = rshift_round128((__int128)cx[i] * mant, 31);
		__int128 t = (__int128)z * g[i];  /* at FZ + FG */
		int F = FZ + FG;
		if (LN) {
			int d = F - FB;
			if (d >= 0)
				t += (__int128)bt[i] * ((__int128)1 << (d > 90 ? 90 : d));
			else
				t += (__int128)rshift_round(bt[i], -d);
		}
		constexpr int Qt = isFixed(FY) ? FY : 40;   /* one rounding, straight to the output */
		stq<FY>(y, yoff + i, rshift_round128(t, F - Qt), Qt);
	}
}

} // namespace detail
} // namespace ccl

namespace nn {

template <int ROWS, int D, int FX, int QX, int FY, int FG, int FB, long long EPS40>
void layerNorm(ccl::Ctx &c, const void *x, const void *gb, void *y)
{
	using namespace ccl;
	const int32_t *g = (const int32_t *)gb, *bt = g + D;
	parallel_for(ROWS, 16, [&](long long r0, long long r1, int) {
		std::vector<int64_t> cx(D);
		for (long long r = r0; r < r1; r++) {
			int64_t sum = 0;
			for (int i = 0; i < D; i++) {
				cx[i] = ldq<FX>(x, (size_t)(r * D + i), QX);
				sum += cx[i];
			}
			int64_t mean = sum >= 0 ? (sum + D / 2) / D : -((-sum + D / 2) / D);
			for (int i = 0; i < D; i++)
				cx[i] -= mean;
			detail::norm_row<D, QX, FY, FG, FB, true, EPS40>(cx.data(), g, bt, y, (size_t)(r * D));
		}
	});
	c.alu += (unsigned long long)ROWS * D * 4;
}

template <int ROWS, int D, int FX, int QX, int FY, int FG, long long EPS40>
void rmsNorm(ccl::Ctx &c, const void *x, const void *g, void *y)
{
	using namespace ccl;
	parallel_for(ROWS, 16, [&](long long r0, long long r1, int) {
		std::vector<int64_t> cx(D);
		for (long long r = r0; r < r1; r++) {
			for (int i = 0; i < D; i++)
				cx[i] = ldq<FX>(x, (size_t)(r * D + i), QX);
			detail::norm_row<D, QX, FY, FG, 0, false, EPS40>(cx.data(), (const int32_t *)g, nullptr, y,
			                                                 (size_t)(r * D));
		}
	});
	c.alu += (unsigned long long)ROWS * D * 3;
}

template <long long NEL, int FX, int QX, int FY, int TANH>
void gelu(ccl::Ctx &c, const void *x, void *y)
{
	using namespace ccl;
	parallel_for(NEL, 4096, [&](long long i0, long long i1, int) {
		for (long long i = i0; i < i1; i++) {
			int64_t v = ldq<FX>(x, (size_t)i, QX), p;
			if (TANH) {
				int64_t x24 = rshift_round(v, QX - 24);
				const int64_t L = (int64_t)16 << 24;
				x24 = x24 > L ? L : x24 < -L ? -L : x24;
				int64_t x2 = rshift_round(x24 * x24, 24), x3 = rshift_round(x2 * x24, 24);
				int64_t u = x24 + rshift_round(48013132LL * x3, 30);   /* 0.044715 in Q30 */
				int64_t z = rshift_round(u * SQRT_2_OVER_PI_Q30, 30);
				p = sigmoid_q30(2 * z, 24);
			} else {
				p = phi_q30(v, QX);
			}
			stq<FY>(y, (size_t)i, v * p, QX + 30);
		}
	});
	c.alu += (unsigned long long)NEL * 4;
}

template <long long NEL, int FX, int QX, int FY>
void silu(ccl::Ctx &c, const void *x, void *y)
{
	using namespace ccl;
	parallel_for(NEL, 4096, [&](long long i0, long long i1, int) {
		for (long long i = i0; i < i1; i++) {
			int64_t v = ldq<FX>(x, (size_t)i, QX);
			stq<FY>(y, (size_t)i, v * sigmoid_q30(v, QX), QX + 30);
		}
	});
	c.alu += (unsigned long long)NEL * 4;
}

namespace detail {
template <bool MUL, int FA, int QA, int FB, int QB, int FY, long long O0, long long O1, long long O2, long long O3,
          long long SA0, long long SA1, long long SA2, long long SA3, long long SB0, long long SB1, long long SB2,
          long long SB3>
void binary(ccl::Ctx &c, const void *a, const void *b, void *y)
{
	using namespace ccl;
	constexpr int F = QA > QB ? QA : QB;
	parallel_for(O0 * O1, 1, [&](long long u0, long long u1, int) {
		for (long long u = u0; u < u1; u++) {
			long long i0 = u / O1, i1 = u % O1;
			for (long long i2 = 0; i2 < O2; i2++) {
				long long ia = i0 * SA0 + i1 * SA1 + i2 * SA2, ib = i0 * SB0 + i1 * SB1 + i2 * SB2;
				size_t iy = (size_t)(((u * O2) + i2) * O3);
				for (long long i3 = 0; i3 < O3; i3++) {
					int64_t va = ldq<FA>(a, (size_t)(ia + i3 * SA3), QA);
					int64_t vb = ldq<FB>(b, (size_t)(ib + i3 * SB3), QB);
					if (MUL)
						stq<FY>(y, iy + i3, va * vb, QA + QB);
					else
						stq<FY>(y, iy + i3, va * ((int64_t)1 << (F - QA)) + vb * ((int64_t)1 << (F - QB)), F);
				}
			}
		}
	});
	c.alu += (unsigned long long)(O0 * O1 * O2 * O3);
}
} // namespace detail

template <int FA, int QA, int FB, int QB, int FY, long long O0, long long O1, long long O2, long long O3,
          long long SA0, long long SA1, long long SA2, long long SA3, long long SB0, long long SB1, long long SB2,
          long long SB3>
void add(ccl::Ctx &c, const void *a, const void *b, void *y)
{
	detail::binary<false, FA, QA, FB, QB, FY, O0, O1, O2, O3, SA0, SA1, SA2, SA3, SB0, SB1, SB2, SB3>(c, a, b, y);
}

template <int FA, int QA, int FB, int QB, int FY, long long O0, long long O1, long long O2, long long O3,
          long long SA0, long long SA1, long long SA2, long long SA3, long long SB0, long long SB1, long long SB2,
          long long SB3>
void mul(ccl::Ctx &c, const void *a, const void *b, void *y)
{
	detail::binary<true, FA, QA, FB, QB, FY, O0, O1, O2, O3, SA0, SA1, SA2, SA3, SB0, SB1, SB2, SB3>(c, a, b, y);
}

template <long long NIDS, long long V, long long D, int FY, int IDS64>
void embedding(ccl::Ctx &c, const void *ids, const void *table, void *y, const ccl::IndexSite &site)
{
	constexpr size_t es = ccl::elemSize(FY), row = (size_t)D * es;
	for (long long i = 0; i < NIDS; i++) {
		long long id = IDS64 ? (long long)((const int64_t *)ids)[i] : (long long)((const int32_t *)ids)[i];
		if (id < -V || id >= V)
			ccl::index_fail(site, i, id);
		if (id < 0)
			id += V;
		std::memcpy((uint8_t *)y + (size_t)i * row, (const uint8_t *)table + (size_t)id * row, row);
	}
	c.alu += (unsigned long long)NIDS * D;
}

/* ai.wlower.QGather: int8 rows, row r's scale as {M_r, Q_r} (ops/gather.c):
 * y = q · M_r at Q_r, stored in FY by stq (half up, saturating). */
template <long long NIDS, long long V, long long D, int FY, int IDS64>
void embeddingQ8(ccl::Ctx &c, const void *ids, const void *table, const void *rowscale, void *y,
                 const ccl::IndexSite &site)
{
	using namespace ccl;
	const int64_t *mq = (const int64_t *)rowscale;
	for (long long i = 0; i < NIDS; i++) {
		long long id = IDS64 ? (long long)((const int64_t *)ids)[i] : (long long)((const int32_t *)ids)[i];
		if (id < -V || id >= V)
			ccl::index_fail(site, i, id);
		if (id < 0)
			id += V;
		const int8_t *row = (const int8_t *)table + (size_t)id * D;
		int64_t M = mq[2 * id];
		int Q = (int)mq[2 * id + 1];
		for (long long j = 0; j < D; j++)
			stq<FY>(y, (size_t)(i * D + j), (int64_t)row[j] * M, Q);
	}
	c.alu += (unsigned long long)NIDS * D;
}

/* DequantizeLinear, per tensor: y = (q - ZP) * scale with M = round(scale * 2^Q)
 * (ops/quant.c): (q - ZP) * M is y at Q, stored in FY (round half up, saturating). */
template <long long NEL, int SIGNED, long long ZP, long long M, int Q, int FY>
void dequantize(ccl::Ctx &c, const void *x, void *y)
{
	using namespace ccl;
	for (long long i = 0; i < NEL; i++) {
		int64_t q = SIGNED ? (int64_t)((const int8_t *)x)[i] : (int64_t)((const uint8_t *)x)[i];
		stq<FY>(y, (size_t)i, (q - ZP) * M, Q);
	}
	c.alu += (unsigned long long)NEL;
}

} // namespace nn

namespace ccl {

template <long long ROWS, long long V, int FX>
void argmax(Ctx &c, const void *x, void *ids)
{
	for (long long r = 0; r < ROWS; r++) {
		long long best = 0;
		if constexpr (isFixed(FX)) {
			const int32_t *p = (const int32_t *)x + r * V;
			for (long long v = 1; v < V; v++)
				if (p[v] > p[best])
					best = v;
		} else if constexpr (FX == FP16) {
			const uint16_t *p = (const uint16_t *)x + r * V;
			auto key = [](uint16_t h) { return (h & 0x8000) ? -(int)(h & 0x7fff) : (int)(h & 0x7fff); };
			for (long long v = 1; v < V; v++)
				if (key(p[v]) > key(p[best]))
					best = v;
		} else {
			const float *p = (const float *)x + r * V;
			float bv = p[0];
			for (long long v = 1; v < V; v++)
				if (p[v] > bv || (bv != bv && p[v] == p[v])) {
					bv = p[v];
					best = v;
				}
		}
		((int32_t *)ids)[r] = (int32_t)best;
	}
	c.alu += (unsigned long long)ROWS * V;
}

template <long long NEL, int FX, int FY>
void copy(Ctx &c, const void *x, void *y)
{
	for (long long i = 0; i < NEL; i++)
		cvt<FX, FY>(x, (size_t)i, y, (size_t)i);
	c.alu += (unsigned long long)NEL;
}

/* Transpose (API.md): y in order over dims O0..O3, reading x at element
 * i0·S0 + i1·S1 + i2·S2 + i3·S3, converted FX → FY as ccl::copy does. */
template <int FX, int FY, long long O0, long long O1, long long O2, long long O3, long long S0, long long S1,
          long long S2, long long S3>
void transpose(Ctx &c, const void *x, void *y)
{
	size_t j = 0;
	for (long long a = 0; a < O0; a++)
		for (long long b = 0; b < O1; b++)
			for (long long e = 0; e < O2; e++)
				for (long long f = 0; f < O3; f++)
					cvt<FX, FY>(x, (size_t)(a * S0 + b * S1 + e * S2 + f * S3), y, j++);
	c.alu += (unsigned long long)(O0 * O1 * O2 * O3);
}

/* QuantizeLinear with a per-tensor scale (API.md): the requantization from a
 * fixed-point format to int8 (ccl::I8), one multiplier rq = {mult, shift, zp}
 * (int64[3]; r = mult·2^−shift = 2^−QX / scale):
 *   q = saturate_int8(round-half-up(x_QX · mult · 2^−shift) + zp).
 * DequantizeLinear is nn::dequantize. */
template <long long NEL, int FX, int QX>
void quantize(Ctx &c, const void *x, const void *rq, void *y)
{
	const int64_t *r = (const int64_t *)rq;
	for (long long i = 0; i < NEL; i++) {
		int64_t v = rshift_round128((__int128)ldq<FX>(x, (size_t)i, QX) * r[0], (int)r[1]) + r[2];
		((int8_t *)y)[i] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
	}
	c.alu += (unsigned long long)NEL;
}

namespace detail {

/* Work buffers of an attention: q [B,T,H·hd] at qQ, k/v [B,Hkv,L,hd] at kQ/vQ. */
struct Attn {
	int B, T, H, Hkv, hd, L, P;
	bool causal;
	long long scale30;
	const int32_t *q;
	int qQ;
	int32_t *k;       /* shifted in place per (b, kv head) */
	int kQ;
	const int32_t *v;
	int vQ;
	const uint8_t *masked;   /* [B, L] 1 = masked, or null */
};

inline int bitlen(int64_t m) { return m ? msb64((uint64_t)m) + 1 : 0; }

template <int FO>
void attn_core(const Attn &a, void *out)
{
	const int hd = a.hd, L = a.L, T = a.T, D = a.H * hd, group = a.H / a.Hkv;
	/* per-(b,h) q shift, per-(b,kh) k shift: at most 24 significant bits */
	std::vector<int> qs((size_t)a.B * a.H), ks((size_t)a.B * a.Hkv);
	for (int b = 0; b < a.B; b++) {
		for (int h = 0; h < a.H; h++) {
			int64_t m = 0;
			for (int t = 0; t < T; t++)
				for (int e = 0; e < hd; e++) {
					int64_t x = a.q[((size_t)b * T + t) * D + h * hd + e];
					m = std::max(m, x < 0 ? -x : x);
				}
			qs[b * a.H + h] = std::max(0, bitlen(m) - 24);
		}
		for (int h = 0; h < a.Hkv; h++) {
			int32_t *K = a.k + ((size_t)b * a.Hkv + h) * L * hd;
			int64_t m = 0;
			for (size_t i = 0; i < (size_t)L * hd; i++) {
				int64_t x = K[i];
				m = std::max(m, x < 0 ? -x : x);
			}
			int s = std::max(0, bitlen(m) - 24);
			ks[b * a.Hkv + h] = s;
			if (s)
				for (size_t i = 0; i < (size_t)L * hd; i++)
					K[i] = (int32_t)rshift_round(K[i], s);
		}
	}
	const int TQ = 8;
	long long tch = (T + TQ - 1) / TQ;
	const int64_t LIM = -(int64_t)(((__int128)40 << 54) / a.scale30);
	parallel_for((long long)a.B * a.H * tch, 1, [&](long long u0, long long u1, int) {
		std::vector<int64_t> sc(L), ex(L), acc(hd);
		std::vector<int32_t> qr(hd);
		for (long long u = u0; u < u1; u++) {
			int b = (int)(u / (a.H * tch)), h = (int)(u / tch % a.H), t0 = (int)(u % tch) * TQ;
			int kh = h / group;
			const int32_t *K = a.k + ((size_t)b * a.Hkv + kh) * L * hd;
			const int32_t *V = a.v + ((size_t)b * a.Hkv + kh) * L * hd;
			int sq = qs[b * a.H + h], sk = ks[b * a.Hkv + kh];
			int Fd = a.qQ - sq + a.kQ - sk;
			const uint8_t *mk = a.masked ? a.masked + (size_t)b * L : nullptr;
			for (int t = t0; t < t0 + TQ && t < T; t++) {
				int hi = a.causal ? std::min(a.P + t + 1, L) : L;
				const int32_t *qp = a.q + ((size_t)b * T + t) * D + h * hd;
				for (int e = 0; e < hd; e++)
					qr[e] = (int32_t)rshift_round(qp[e], sq);
				bool any = true;
				if (mk) {
					any = false;
					for (int j = 0; j < hi; j++)
						if (!mk[j]) {
							any = true;
							break;
						}
				}
				int64_t mx = INT64_MIN;
				for (int j = 0; j < hi; j++) {
					const int32_t *kr = K + (size_t)j * hd;
					int64_t d = 0;
					for (int e = 0; e < hd; e++)
						d += (int64_t)qr[e] * kr[e];
					int64_t s = rshift_round(d, Fd - 24);
					if (mk && !any)
						s = 0;                    /* every visible key masked: uniform */
					sc[j] = s;
					if ((!mk || !any || !mk[j]) && s > mx)
						mx = s;
				}
				int64_t sum = 0;
				for (int j = 0; j < hi; j++) {
					if (mk && any && mk[j]) {
						ex[j] = 0;
						continue;
					}
					int64_t df = sc[j] - mx;
					if (df < LIM)
						df = LIM;
					ex[j] = exp_fx(rshift_round(df * a.scale30, 26), 28);
					sum += ex[j];
				}
				int64_t R = (int64_t)((((unsigned __int128)1 << 62) + (uint64_t)sum / 2) / (uint64_t)sum);
				for (int e = 0; e < hd; e++)
					acc[e] = 0;
				for (int j = 0; j < hi; j++) {
					if (!ex[j])
						continue;
					int64_t p = rshift_round(ex[j] * R, 32);
					const int32_t *vr = V + (size_t)j * hd;
					for (int e = 0; e < hd; e++)
						acc[e] += p * vr[e];
				}
				size_t o = ((size_t)b * T + t) * D + h * hd;
				for (int e = 0; e < hd; e++)
					stq<FO>(out, o + e, acc[e], 30 + a.vQ);
			}
		}
	});
}

inline int32_t *scratch_or(void *scratch, size_t n, std::vector<int32_t> &v)
{
	if (scratch)
		return (int32_t *)scratch;
	v.resize(n);
	return v.data();
}

} // namespace detail
} // namespace ccl

namespace nn {

template <int B, int T, int S, int P, int D, int H, int CAUSAL, int BHSD, int FQ, int QQ, int FK, int QK, int FV,
          int QV, int FPK, int QPK, int FPV, int QPV, int FO, int FPKO, int FPVO, long long SCALE30>
void whisperAttention(ccl::Ctx &c, const void *q, const void *k, const void *v, const void *past_k,
                      const void *past_v, void *out, void *present_k, void *present_v, void *scratch)
{
	using namespace ccl;
	constexpr int hd = D / H, L = P + S;
	constexpr int kQ = P ? (QK < QPK ? QK : QPK) : QK, vQ = P ? (QV < QPV ? QV : QPV) : QV;
	std::vector<int32_t> own;
	size_t nq = (size_t)B * T * D, nk = (size_t)B * L * D;
	int32_t *Qw = ccl::detail::scratch_or(scratch, nq + 2 * nk, own), *Kw = Qw + nq, *Vw = Kw + nk;
	for (size_t i = 0; i < nq; i++)
		Qw[i] = ldq<FQ>(q, i, QQ);
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++)
			for (int l = 0; l < L; l++)
				for (int e = 0; e < hd; e++) {
					size_t dst = (((size_t)b * H + h) * L + l) * hd + e;
					if (l < P) {
						size_t src = (((size_t)b * H + h) * P + l) * hd + e;
						Kw[dst] = ldq<FPK>(past_k, src, kQ);
						Vw[dst] = ldq<FPV>(past_v, src, vQ);
					} else {
						int s = l - P;
						size_t src = BHSD ? (((size_t)b * H + h) * S + s) * hd + e : ((size_t)b * S + s) * D + h * hd + e;
						Kw[dst] = ldq<FK>(k, src, kQ);
						Vw[dst] = ldq<FV>(v, src, vQ);
					}
					if (present_k)
						stq<FPKO>(present_k, dst, Kw[dst], kQ);
					if (present_v)
						stq<FPVO>(present_v, dst, Vw[dst], vQ);
				}
	ccl::detail::Attn a{B, T, H, H, hd, L, P, CAUSAL != 0, SCALE30, Qw, QQ, Kw, kQ, Vw, vQ, nullptr};
	ccl::detail::attn_core<FO>(a, out);
	c.macs += (unsigned long long)B * H * T * L * hd * 2;
	c.alu += (unsigned long long)B * H * T * L * 3 + (unsigned long long)B * T * D;
}

template <int B, int T, int P, int H, int HKV, int HD, int CAUSAL, int ROPE, int POS, int MASK, int FQ, int QQ,
          int FK, int QK, int FV, int QV, int FCS, int QCS, int FPK, int QPK, int FPV, int QPV, int FO, int FPKO,
          int FPVO, long long SCALE30, int STATIC = 0>
void gqa(ccl::Ctx &c, const void *q, const void *k, const void *v, const void *cos, const void *sin,
         const void *past_k, const void *past_v, const void *mask, const void *pos_ids, void *out, void *present_k,
         void *present_v, void *scratch, const ccl::IndexSite &pos_site)
{
	using namespace ccl;
	if constexpr (ROPE && POS != 0) {
		/* position_ids index the cos/sin rows: [0, rows) or the run ends */
		for (long long i = 0; i < (POS >= 10 ? T : (long long)B * T); i++) {
			long long r = POS % 10 == 1 ? (long long)((const int64_t *)pos_ids)[i]
			                            : (long long)((const int32_t *)pos_ids)[i];
			if (r < 0 || r >= pos_site.size)
				index_fail(pos_site, i, r);
		}
	}
	constexpr int L = P + T, D = H * HD, DK = HKV * HD;
	constexpr int qQ = QQ - (ROPE ? 1 : 0);
	constexpr int kN = QK - (ROPE ? 1 : 0);
	constexpr int kQ = P ? (kN < QPK ? kN : QPK) : kN, vQ = P ? (QV < QPV ? QV : QPV) : QV;
	std::vector<int32_t> own;
	size_t nq = (size_t)B * T * D, nk = (size_t)B * L * DK;
	int32_t *Qw = ccl::detail::scratch_or(scratch, nq + 2 * nk, own), *Kw = Qw + nq, *Vw = Kw + nk;
	auto row_of = [&](int b, int t) -> long long {
		if (POS == 0)
			return t;
		long long i = POS >= 10 ? t : (long long)b * T + t, r;
		if (POS % 10 == 1)
			r = ((const int64_t *)pos_ids)[i];
		else
			r = ((const int32_t *)pos_ids)[i];
		return r;
	};
	/* rotate (x, at Qin) into dst (int32 at Qout) */
	auto rot = [&](const void *src, auto ldfn, size_t base, int Qin, long long row, int32_t *dst, size_t dstride,
	               int Qout) {
		int64_t xv[1024];
		for (int e = 0; e < HD; e++)
			xv[e] = ldfn(src, base + e, Qin);
		for (int e = 0; e < HD; e++) {
			int64_t val;
			if (ROPE) {
				int64_t cs = ldq<FCS>(cos, (size_t)(row * HD + e), 30), sn = ldq<FCS>(sin, (size_t)(row * HD + e), 30);
				int64_t rh = e < HD / 2 ? -xv[e + HD / 2] : xv[e - HD / 2];
				val = rshift_round(xv[e] * cs + rh * sn, 30 + Qin - Qout);
			} else {
				val = rshift_round(xv[e], Qin - Qout);
			}
			dst[e * dstride] = sat32(val);
		}
	};
	static_assert(HD <= 1024, "head_dim <= 1024");
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			long long row = row_of(b, t);
			for (int h = 0; h < H; h++) {
				size_t o = ((size_t)b * T + t) * D + h * HD;
				rot(q, [](const void *p, size_t i, int Qx) { return (int64_t)ldq<FQ>(p, i, Qx); }, o, QQ, row, Qw + o, 1,
				    qQ);
			}
			for (int h = 0; h < HKV; h++) {
				size_t src = ((size_t)b * T + t) * DK + h * HD, dst = (((size_t)b * HKV + h) * L + P + t) * HD;
				rot(k, [](const void *p, size_t i, int Qx) { return (int64_t)ldq<FK>(p, i, Qx); }, src, QK, row,
				    Kw + dst, 1, kQ);
				for (int e = 0; e < HD; e++)
					Vw[dst + e] = ldq<FV>(v, src + e, vQ);
			}
		}
	for (int b = 0; b < B; b++)
		for (int h = 0; h < HKV; h++)
			for (int l = 0; l < L; l++)
				for (int e = 0; e < HD; e++) {
					size_t dst = (((size_t)b * HKV + h) * L + l) * HD + e;
					if (l < P) {
						size_t src = (((size_t)b * HKV + h) * P + l) * HD + e;
						Kw[dst] = ldq<FPK>(past_k, src, kQ);
						Vw[dst] = ldq<FPV>(past_v, src, vQ);
					}
					/* STATIC (static_cache): the presents are the T new rows only */
					if (STATIC && l < P)
						continue;
					size_t pdst = STATIC ? (((size_t)b * HKV + h) * T + (l - P)) * HD + e : dst;
					if (present_k)
						stq<FPKO>(present_k, pdst, Kw[dst], kQ);
					if (present_v)
						stq<FPVO>(present_v, pdst, Vw[dst], vQ);
				}
	std::vector<uint8_t> mk;
	if (MASK) {
		mk.resize((size_t)B * L);
		for (size_t i = 0; i < mk.size(); i++) {
			long long m = MASK == 1 ? (long long)((const int64_t *)mask)[i] : (long long)((const int32_t *)mask)[i];
			mk[i] = m != 1;
		}
	}
	ccl::detail::Attn a{B, T, H, HKV, HD, L, P, CAUSAL != 0, SCALE30, Qw, qQ, Kw, kQ, Vw, vQ, MASK ? mk.data() : nullptr};
	ccl::detail::attn_core<FO>(a, out);
	c.macs += (unsigned long long)B * H * T * L * HD * 2;
	c.alu += (unsigned long long)B * H * T * L * 3 + (unsigned long long)B * T * D * (1 + 2 * ROPE);
}

} // namespace nn

#pragma GCC pop_options
#endif
