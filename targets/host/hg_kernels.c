/* hg_kernels.c — the host op table: one row per op of compiler/ir/ops.def
 * that has a host kernel, indexed by Op: {emit, scratch}. Generators live in
 * kgen_*.c (declared in hostgen.h). */
#include "hostgen.h"

static const HgKernel hg_kernels[OP_COUNT_] = {
	[OP_WlMatMulNBits] = {hg_emit_matmul_nbits, hg_scratch_matmul_nbits},
	[OP_WlQMatMul] = {hg_emit_qmatmul, hg_scratch_qmatmul},
	[OP_QuantizeLinear] = {hg_emit_qdq, NULL},
	[OP_DequantizeLinear] = {hg_emit_qdq, NULL},
	[OP_WlQGather] = {hg_emit_qgather, NULL},
	[OP_WlWhisperAttention] = {hg_emit_whisper_attention, hg_scratch_whisper_attention},
	[OP_WlGroupQueryAttention] = {hg_emit_gqa, hg_scratch_gqa},
	[OP_WlConvStem] = {hg_emit_conv_stem, hg_scratch_conv_stem},
	[OP_WlLogMel] = {hg_emit_logmel, hg_scratch_logmel},
	[OP_WlGelu] = {hg_emit_unary, NULL},
	[OP_WlSiLU] = {hg_emit_unary, NULL},
	[OP_WlRMSNorm] = {hg_emit_rmsnorm, NULL},
	[OP_WlGreedyArgMax] = {hg_emit_argmax, NULL},
	[OP_Gelu] = {hg_emit_unary, NULL},
	[OP_Exp] = {hg_emit_unary, NULL},
	[OP_Pow] = {hg_emit_unary, NULL},
	[OP_Cast] = {hg_emit_unary, NULL},
	[OP_Identity] = {hg_emit_unary, NULL},
	[OP_Add] = {hg_emit_binary, NULL},
	[OP_Mul] = {hg_emit_binary, NULL},
	[OP_Sub] = {hg_emit_binary, NULL},
	[OP_Gather] = {hg_emit_gather, NULL},
	[OP_LayerNormalization] = {hg_emit_layernorm, NULL},
	[OP_Reshape] = {hg_emit_unary, NULL},
	[OP_Transpose] = {hg_emit_transpose, NULL},
};

bool host_op_supported(Op op)
{
	return op > OP_UNKNOWN && op < OP_COUNT_ && hg_kernels[op].emit;
}

const HgKernel *hg_kernel_find(const Node *n)
{
	return host_op_supported(n->op) ? &hg_kernels[n->op] : NULL;
}
