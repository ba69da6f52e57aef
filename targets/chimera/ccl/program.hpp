/* program.hpp — the table module.cpp defines (docs: targets/chimera/ccl/API.md). */
#ifndef CCL_PROGRAM_HPP
#define CCL_PROGRAM_HPP

namespace ccl {
enum Fmt : int { F32 = -1, FP16 = -2, I32 = -3, I64 = -4, I8 = -5, U8 = -6 };   /* 0..31 = FixedPoint32<F>; I8/U8: int8/uint8 (QDQ) */
enum Mem : int { MEM_DDR = 0, MEM_OCM = 1 };
enum Dir : int { DDR_TO_OCM = 0, OCM_TO_DDR = 1 };
struct Config { const char *target; int cores, pe_rows, pe_cols, macs_per_pe;
                unsigned long long lrm_bytes, ocm_bytes; double clock_hz, ext_bw; };
struct IO { const char *name; const char *dtype; /* "float32","float16","int64","int32","int8","uint8" as in the .npy */
            int fmt; int ndim; long long shape[8]; int mem; unsigned long long off, bytes; };
struct Ctx;
struct Kernel { const char *name; const char *op; void (*fn)(Ctx &); unsigned long long macs; };
struct Program { const char *module; Config cfg;
                 unsigned long long ocm_bytes, ddr_bytes, weights_bytes;
                 int ninputs; const IO *inputs; int noutputs; const IO *outputs;
                 int nkernels; const Kernel *kernels; };
}
extern "C" const ccl::Program wl_program;   /* defined by module.cpp */

#endif
