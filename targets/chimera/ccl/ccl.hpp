/* ccl.hpp — umbrella of the CCL emulation library (API.md). module.cpp
 * includes only this. */
#ifndef CCL_HPP
#define CCL_HPP

#include <cstdint>
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

} // namespace ccl

#include "fp16.hpp"
#include "fixed.hpp"
#include "mathfx.hpp"
#include "parallel.hpp"
#include "linalg.hpp"
#include "nn.hpp"
#include "whisper.hpp"

#endif
