// Test fixture: minimal CCL umbrella (see program.hpp).
#pragma once
#include <cstdint>
#include <cstring>
#include "program.hpp"
namespace ccl {
struct Ctx {
	uint8_t *ocm, *ddr;
	const uint8_t *w;
	unsigned long long macs, alu, ddr_to_ocm, ocm_to_ddr;
};
inline void dma(Ctx &c, void *dst, const void *src, unsigned long long bytes, Dir dir)
{
	std::memcpy(dst, src, bytes);
	(dir == DDR_TO_OCM ? c.ddr_to_ocm : c.ocm_to_ddr) += bytes;
}
}
