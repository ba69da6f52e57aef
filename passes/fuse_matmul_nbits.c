/* fuse_matmul_nbits.c — being written (issue 4): does nothing yet. */
#include "passes.h"

int pass_fuse_matmul_nbits(Module *m, PassContext *ctx, Diag *d)
{
	(void)m; (void)ctx; (void)d;
	return WL_OK;
}
