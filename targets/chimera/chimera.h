/* chimera.h — inside the Chimera target (targets/chimera/). Files:
 *
 *   chimera.c   chimera_compile (target.h): drives the stages below
 *   lower.c     kernel list, core split, tiling onto the PE array / LRM,
 *               per-core MAC/ALU/byte counts           (schedule owner)
 *   alloc.c     OCM buffer allocation by liveness within --ocm, spills to DDR
 *   emit_cpp.c  module.cpp (one function per kernel + the ccl::Program table),
 *               weights.bin layout, schedule.json
 *   kernels.c   per-op knowledge of the CCL kernels: which constant inputs are
 *               packed into blobs and how, MAC/ALU counts, the C++ call text
 *               (numerics owner; the C++ side is ccl/*.hpp)
 *   sim/        `wlower sim`: build + run module.cpp against ccl/, cost model
 *               (docs/cost-model.md), reports, profiles
 *   ccl/        the CCL emulation library (C++17, header-only + runner.cpp)
 */
#ifndef WLOWER_CHIMERA_H
#define WLOWER_CHIMERA_H

#include <stdio.h>
#include "../target.h"

/* ---------------------------------------------------------------- kernels.c
 * Node inputs that are initializers are "constants": kernels.c packs them
 * into blobs (fixed-point, int4 blocks, ...) that go to weights.bin; every
 * other float input/output is an activation in the format of its
 * Value.frac_bits (FixedPoint32<F> as int32, FRAC_FP16 as uint16 binary16,
 * FRAC_F32 as float); int64/int32 values stay as they are. */
typedef struct CclBlob {
	const char *role;        /* "weight", "scales", "bias", "gamma", "table"... (for schedule.json) */
	uint8_t *data;           /* malloc'ed; freed by ccl_kernel_info_free */
	size_t len;
} CclBlob;

typedef struct CclKernelInfo {
	const char *cpp_name;    /* "linalg::matMulNBits" — for schedule.json and reports */
	uint64_t macs;           /* multiply-accumulates (docs/cost-model.md formulas) */
	uint64_t alu_ops;        /* PE ALU element operations (same doc) */
	uint64_t scratch_bytes;  /* OCM scratch the kernel needs (0: none) */
	int nblobs;
	CclBlob blobs[8];        /* packed constant operands, in call order */
} CclKernelInfo;

/* Bad input (unsupported op, attribute or format) → WL_ERR naming node and op. */
int ccl_kernel_info(const Node *n, CclKernelInfo *ki, Diag *d);
void ccl_kernel_info_free(CclKernelInfo *ki);
/* Writes one C++ statement (ending in ";\n") calling the kernel. Argument
 * expressions (C++ text, already typed as the kernel wants or `void *`):
 *   in[i]    for each node input i (constant inputs: NULL; absent optional: NULL),
 *   out[j]   for each node output j,
 *   blob[b]  for each blob b of ccl_kernel_info, in order,
 *   scratch  the scratch buffer (NULL if scratch_bytes == 0).
 * The first argument of every kernel is the ccl::Ctx reference `c`. */
int ccl_emit_call(const Node *n, const char *const *in, const char *const *out,
                  const char *const *blob, const char *scratch, FILE *f, Diag *d);

/* ---------------------------------------------------------------- sim/cost.c
 * The cost model (docs/cost-model.md): cycles per category of one kernel on
 * one core, from the per-core counts of schedule.json. */
enum { CAT_COMPUTE, CAT_MAC, CAT_DATA_ARRAY, CAT_DATA_OCM, CAT_DATA_EXTERNAL, CAT_COUNT };
extern const char *const cost_category_names[CAT_COUNT];   /* "compute", "mac", ... */

#endif
