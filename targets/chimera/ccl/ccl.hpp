/* ccl.hpp — umbrella of the CCL emulation library (API.md). module.cpp
 * includes only this. */
#ifndef CCL_HPP
#define CCL_HPP

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "program.hpp"

namespace ccl {

struct Ctx {
	uint8_t *ocm;          /* cfg.ocm_bytes */
	uint8_t *ddr;          /* activation arena in DDR */
	const uint8_t *w;      /* weights.bin (mmapped) */
	unsigned long long macs, alu, ddr_to_ocm, ocm_to_ddr;   /* of the running kernel */
};

/* A DMA: a real memcpy plus the byte counter of its direction. */
inline void dma(Ctx &c, void *dst, const void *src, unsigned long long bytes, Dir dir)
{
	if (bytes)
		std::memmove(dst, src, (size_t)bytes);
	if (dir == DDR_TO_OCM)
		c.ddr_to_ocm += bytes;
	else
		c.ocm_to_ddr += bytes;
}

/* The indices of an index-consuming kernel (emitted by targets/chimera/ops/
 * ck_index_site): the tensor, its node and op, flags (1: a graph input; 2:
 * valid indices are [0, size), else [-size, size)), the axis size, the
 * tensor's shape. */
struct IndexSite {
	const char *tensor, *node, *op;
	int flags;
	long long size;
	int rank;
	long long dims[8];
};

/* Index `value` at flat position pos of s's tensor is out of s's range:
 * ends the run with the one line every target gives (compiler/ir/diag.c
 * diag_index_range) on stderr, exit status 1, before any output is written. */
[[noreturn]] inline void index_fail(const IndexSite &s, long long pos, long long value)
{
	long long at[8] = {0};
	for (int i = (s.rank < 8 ? s.rank : 8) - 1; i >= 0; i--) {
		long long n = s.dims[i] > 0 ? s.dims[i] : 1;
		at[i] = pos % n;
		pos /= n;
	}
	char where[256];
	size_t k = (size_t)std::snprintf(where, sizeof where, "[");
	for (int i = 0; i < s.rank && i < 8 && k < sizeof where; i++)
		k += (size_t)std::snprintf(where + k, sizeof where - k, "%s%lld", i ? "," : "", at[i]);
	if (k < sizeof where)
		std::snprintf(where + k, sizeof where - k, "]");
	bool nowrap = s.flags & 2;
	std::fprintf(stderr, "%s '%s' of node '%s' (%s): index %lld at %s out of range [%s%lld, %lld)\n",
	             s.flags & 1 ? "input" : "tensor", s.tensor, s.node, s.op, value, where, nowrap ? "" : "-",
	             nowrap ? 0LL : s.size, s.size);
	std::fflush(stderr);
	std::exit(1);
}

} // namespace ccl

#include "fp16.hpp"
#include "fixed.hpp"
#include "mathfx.hpp"
#include "parallel.hpp"
#include "linalg.hpp"
#include "nn.hpp"
#include "whisper.hpp"

#endif
