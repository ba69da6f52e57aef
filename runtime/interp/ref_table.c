/* ref_table.c — the reference executor's op table: one row per op of
 * compiler/ir/ops.def that has a float reference kernel, indexed by Op (the
 * way a QBE backend gives each op of the one op table its own row). Ops
 * without a row (and OP_UNKNOWN: ops the table of ops.def does not know)
 * have no kernel; exec_new rejects a node of such an op, naming it.
 *
 * Row: {prepare, infer, run, data_inputs, shape_only, unaligned_ok}
 * (ref.h, Kernel). unaligned_ok lists the inputs a kernel reads safely at
 * any address; ~0u: all of them (elementwise, reductions, shapes, norms and
 * the com.microsoft attention ops read floats through ufloat and everything
 * else through memcpy-based accessors).
 */
#include "ref.h"

#define BIN {ref_bin_prepare, ref_bin_infer, ref_bin_run, 0, false, ~0u}
#define VAR {NULL, ref_var_infer, ref_var_run, 0, false, ~0u}
#define UN {ref_un_prepare, ref_un_infer, ref_un_run, 0, false, ~0u}
#define CAST {NULL, ref_cast_infer, ref_cast_run, 0, false, ~0u}
#define RED {ref_red_prepare, ref_red_infer, ref_red_run, 1u << 1, false, ~0u}
#define ARG {NULL, ref_arg_infer, ref_arg_run, 0, false, ~0u}
#define SOFTMAX {NULL, ref_sm_infer, ref_sm_run, 0, false, ~0u}
#define LN {NULL, ref_ln_infer, ref_ln_run, 0, false, ~0u}
#define SKIPLN {NULL, ref_skip_infer, ref_skip_run, 0, false, ~0u}
#define GELU {NULL, ref_gelu_infer, ref_gelu_run, 0, false, ~0u}

static const Kernel ref_kernels[OP_COUNT_] = {
	/* ref_elementwise.c */
	[OP_Add] = BIN, [OP_Sub] = BIN, [OP_Mul] = BIN, [OP_Div] = BIN, [OP_Pow] = BIN, [OP_Mod] = BIN,
	[OP_Equal] = BIN, [OP_Less] = BIN, [OP_Greater] = BIN, [OP_LessOrEqual] = BIN,
	[OP_GreaterOrEqual] = BIN, [OP_And] = BIN, [OP_Or] = BIN, [OP_Xor] = BIN, [OP_BitShift] = BIN,
	[OP_PRelu] = BIN,
	[OP_Max] = VAR, [OP_Min] = VAR, [OP_Sum] = VAR, [OP_Mean] = VAR,
	[OP_Sqrt] = UN, [OP_Erf] = UN, [OP_Tanh] = UN, [OP_Sigmoid] = UN, [OP_Neg] = UN, [OP_Exp] = UN,
	[OP_Log] = UN, [OP_Cos] = UN, [OP_Sin] = UN, [OP_Relu] = UN, [OP_Abs] = UN, [OP_Floor] = UN,
	[OP_Ceil] = UN, [OP_Reciprocal] = UN, [OP_Softplus] = UN, [OP_LeakyRelu] = UN, [OP_Round] = UN,
	[OP_Sign] = UN, [OP_Elu] = UN, [OP_Selu] = UN, [OP_HardSigmoid] = UN, [OP_HardSwish] = UN,
	[OP_Softsign] = UN, [OP_ThresholdedRelu] = UN, [OP_Celu] = UN, [OP_Acos] = UN, [OP_Asin] = UN,
	[OP_Atan] = UN, [OP_Cosh] = UN, [OP_Sinh] = UN, [OP_Tan] = UN, [OP_Acosh] = UN, [OP_Asinh] = UN,
	[OP_Atanh] = UN, [OP_IsNaN] = UN, [OP_IsInf] = UN, [OP_Not] = UN, [OP_WlSiLU] = UN,
	[OP_Clip] = {NULL, ref_clip_infer, ref_clip_run, 0, false, ~0u},
	[OP_Cast] = CAST, [OP_CastLike] = CAST,
	[OP_Where] = {NULL, ref_where_infer, ref_where_run, 0, false, ~0u},
	[OP_Expand] = {NULL, ref_expand_infer, ref_expand_run, 1u << 1, false, ~0u},   /* memcpy rows */

	/* ref_reduce.c */
	[OP_ReduceSum] = RED, [OP_ReduceMean] = RED, [OP_ReduceMax] = RED, [OP_ReduceMin] = RED,
	[OP_ReduceProd] = RED, [OP_ReduceSumSquare] = RED, [OP_ReduceL1] = RED, [OP_ReduceL2] = RED,
	[OP_ReduceLogSum] = RED, [OP_ReduceLogSumExp] = RED,
	[OP_ArgMax] = ARG, [OP_ArgMin] = ARG,
	[OP_Softmax] = SOFTMAX, [OP_LogSoftmax] = SOFTMAX, [OP_Hardmax] = SOFTMAX,
	[OP_CumSum] = {NULL, ref_cumsum_infer, ref_cumsum_run, 1u << 1, false, ~0u},

	/* ref_matmul.c; unaligned_ok: the GEMM reads A, B, scales, zero points and bias as ufloat */
	[OP_MatMul] = {NULL, ref_matmul_infer, ref_matmul_run, 0, false, 0x3},
	[OP_Gemm] = {NULL, ref_gemm_infer, ref_gemm_run_op, 0, false, 0x3},
	[OP_Conv] = {NULL, ref_conv_infer, ref_conv_run, 0, false, 0x3},
	[OP_MsMatMulNBits] = {ref_nbits_prepare, ref_nbits_infer, ref_nbits_run, 0, false, 0x2f},
	[OP_WlMatMulNBits] = {ref_wl_nbits_prepare, ref_wl_nbits_infer, ref_wl_nbits_run, 0, false, 0x1f},

	/* ref_shape.c; unaligned_ok: these ops move bytes with memcpy and read
	 * indices, shapes and scalars through get_i64/get_f64 (memcpy) */
	[OP_Reshape] = {NULL, ref_reshape_infer, ref_copy_run, 1u << 1, false, ~0u},
	[OP_Flatten] = {NULL, ref_flatten_infer, ref_copy_run, 0, false, ~0u},
	[OP_Squeeze] = {NULL, ref_squeeze_infer, ref_copy_run, 1u << 1, false, ~0u},
	[OP_Unsqueeze] = {NULL, ref_unsqueeze_infer, ref_copy_run, 1u << 1, false, ~0u},
	[OP_Identity] = {NULL, ref_identity_infer, ref_copy_run, 0, false, ~0u},
	[OP_Dropout] = {NULL, ref_dropout_infer, ref_dropout_run, (1u << 1) | (1u << 2), false, 0},
	[OP_Transpose] = {NULL, ref_transpose_infer, ref_transpose_run, 0, false, ~0u},
	[OP_Gather] = {NULL, ref_gather_infer, ref_gather_run, 0, false, ~0u},
	[OP_GatherElements] = {NULL, ref_gatherel_infer, ref_gatherel_run, 0, false, ~0u},
	[OP_Concat] = {NULL, ref_concat_infer, ref_concat_run, 0, false, ~0u},
	[OP_Slice] = {NULL, ref_slice_infer, ref_slice_run, 0x1eu, false, ~0u},
	[OP_Split] = {NULL, ref_split_infer, ref_split_run, 1u << 1, false, ~0u},
	[OP_Tile] = {NULL, ref_tile_infer, ref_tile_run, 1u << 1, false, ~0u},
	[OP_Pad] = {NULL, ref_pad_infer, ref_pad_run, (1u << 1) | (1u << 3), false, ~0u},
	[OP_Shape] = {NULL, ref_shape_infer, ref_shape_run, 0, true, ~0u},
	[OP_Size] = {NULL, ref_size_infer, ref_size_run, 0, true, ~0u},
	[OP_Constant] = {ref_const_prepare, ref_const_infer, ref_const_run, 0, false, 0},
	[OP_ConstantOfShape] = {NULL, ref_cos_infer, ref_cos_run, 1u << 0, false, ~0u},
	[OP_Range] = {NULL, ref_range_infer, ref_range_run, 0x7u, false, ~0u},
	[OP_Trilu] = {NULL, ref_trilu_infer, ref_trilu_run, 0, false, ~0u},

	/* ref_norm.c; SimplifiedLayerNormalization in both of its domains */
	[OP_LayerNormalization] = LN, [OP_MsSimplifiedLayerNormalization] = LN, [OP_WlRMSNorm] = LN,
	[OP_MsSkipLayerNormalization] = SKIPLN, [OP_MsSkipSimplifiedLayerNormalization] = SKIPLN,
	[OP_BatchNormalization] = {NULL, ref_bn_infer, ref_bn_run, 0, false, ~0u},
	[OP_Gelu] = GELU, [OP_MsGelu] = GELU, [OP_MsFastGelu] = GELU, [OP_MsBiasGelu] = GELU,
	[OP_MsQuickGelu] = GELU, [OP_WlGelu] = GELU,

	/* ref_attention.c */
	[OP_MsRotaryEmbedding] = {NULL, ref_rot_infer, ref_rot_run, 0, false, ~0u},
	[OP_MsGroupQueryAttention] = {NULL, ref_gqa_infer, ref_gqa_run, (1u << 5) | (1u << 6), false, ~0u},
	[OP_MsMultiHeadAttention] = {NULL, ref_mha_infer, ref_mha_run, 0, false, ~0u},

	/* ref_control.c: cond and the outer values the branches read are data inputs */
	[OP_If] = {ref_if_prepare, ref_if_infer, ref_if_run, ~0u, false, 0},

	/* ref_contrib.c */
	[OP_MsAttention] = {NULL, ref_msa_infer, ref_msa_run, 0, false, (1u << 0) | (1u << 1) | (1u << 2) | (1u << 5)},

	/* ref_fused_attention.c */
	[OP_WlWhisperAttention] = {ref_wa_prepare, ref_wa_infer, ref_wa_run, 0, false, 0},
	[OP_WlGroupQueryAttention] = {ref_gq_prepare, ref_gq_infer, ref_gq_run, 0, false, 0},

	/* ref_fused.c */
	[OP_WlConvStem] = {ref_stem_prepare, ref_stem_infer, ref_stem_run, 0, false, 0x3f},
	[OP_WlLogMel] = {ref_lm_prepare, ref_lm_infer, ref_lm_run, 0, false, 0x2},
	[OP_WlGreedyArgMax] = {NULL, ref_am_infer, ref_am_run, 0, false, 0},

	/* ref_quant.c; unaligned_ok: floats through memcpy, integers through get_i64 */
	[OP_QuantizeLinear] = {NULL, ref_qlin_infer, ref_qlin_run, 0, false, ~0u},
	[OP_DequantizeLinear] = {NULL, ref_dqlin_infer, ref_dqlin_run, 0, false, ~0u},
	[OP_WlQMatMul] = {NULL, ref_qmm_infer, ref_qmm_run, 0, false, ~0u},
	[OP_WlQGather] = {NULL, ref_qgather_infer, ref_qgather_run, 0, false, ~0u},
};

const Kernel *ref_kernel(Op op)
{
	return op > OP_UNKNOWN && op < OP_COUNT_ && ref_kernels[op].run ? &ref_kernels[op] : NULL;
}

bool interp_op_supported(Op op)
{
	return ref_kernel(op) != NULL;
}
