/* assign_fracbits.c — numerics: tranges → Value ranges → fractional bits.
 * (Placeholder until the numerics pass lands: does nothing.) */
#include "passes.h"

int pass_assign_fracbits(Module *m, PassContext *ctx, Diag *d)
{
	(void)m; (void)ctx; (void)d;
	return WL_OK;
}
