/* kernels_fused_attention.c — being written (issue 4). */
#include "kernels.h"

const Kernel kernels_fused_attention[] = {
	{0},
};
