/* passes.c — THE pass table, in default pipeline order. Adding a pass is one
 * .c file, one row here, one line in meson.build and one lit test.
 * A group name ("canonicalize") stands for its rows, in table order. */
#include <string.h>
#include "passes.h"

const Pass pass_table[] = {
	/* canonicalize: normal forms that fusion matches against */
	{"specialize-dims", pass_specialize_dims,
	 "nothing", "nothing (declared types become static)", "canonicalize",
	 "--dim NAME=N: symbolic dims become static"},
	{"constant-to-initializer", pass_constant_to_initializer,
	 "nothing", "nothing (Constant nodes become initializers)", "canonicalize",
	 "turn Constant nodes into initializers"},
	{"identity-elim", pass_identity_elim,
	 "use lists", "nothing", "canonicalize",
	 "remove Identity nodes, rewiring their users"},
	{"shape-infer", pass_shape_infer,
	 "topological order", "nothing (refines Value.type)", "canonicalize",
	 "infer element types and shapes (symbolic dims kept)"},
	{"fold-constants", pass_fold_constants,
	 "shape-infer", "nothing (adds initializers, removes folded nodes)", "canonicalize",
	 "evaluate nodes whose inputs are all constant (shape chains, masks)"},
	{"inline-if", pass_inline_if,
	 "fold-constants", "nothing (an If with a constant condition becomes its branch)", "canonicalize",
	 "If with a constant condition -> the nodes of the branch it takes"},
	{"fold-constants-inlined", pass_fold_constants,
	 "shape-infer", "nothing", "canonicalize",
	 "fold-constants again, for the shape chains of inlined branches"},
	{"identity-elim-typed", pass_identity_elim,
	 "shape-infer", "nothing", "canonicalize",
	 "identity-elim again with types known (Cast to the type it has)"},
	{"canonicalize-layernorm", pass_canonicalize_layernorm,
	 "fold-constants", "nothing", "canonicalize",
	 "decomposed LayerNorm -> LayerNormalization"},
	{"canonicalize-gelu", pass_canonicalize_gelu,
	 "fold-constants", "nothing", "canonicalize",
	 "Erf-GELU, tanh-GELU, com.microsoft Gelu -> ai.wlower.Gelu"},
	{"canonicalize-rmsnorm", pass_canonicalize_rmsnorm,
	 "fold-constants", "nothing", "canonicalize",
	 "Pow/ReduceMean/Add/Sqrt/Div/Mul(/Cast) RMSNorm -> ai.wlower.RMSNorm"},
	{"canonicalize-silu", pass_canonicalize_silu,
	 "nothing", "nothing", "canonicalize",
	 "x*Sigmoid(x) -> ai.wlower.SiLU"},
	{"canonicalize-rope", pass_canonicalize_rope,
	 "fold-constants", "nothing (adds the RoPE tables)", "canonicalize",
	 "RoPE computed from position_ids (Cos/Sin) -> Gather of a table (--max-seq rows)"},
	{"dce", pass_dce,
	 "use lists", "nothing", "canonicalize",
	 "remove nodes and initializers that no graph output depends on"},
	/* fuse: custom ops of domain ai.wlower (docs/OPS.md) */
	{"fuse-conv-stem", pass_fuse_conv_stem,
	 "canonicalize", "nothing", "fuse",
	 "Conv/GELU/Conv/GELU/Transpose/Add(pos) -> ai.wlower.ConvStem"},
	{"fuse-ms-attention", pass_fuse_ms_attention,
	 "canonicalize", "nothing", "fuse",
	 "com.microsoft Attention -> ai.wlower.MatMulNBits (QKV, splits) + WhisperAttention"},
	{"fuse-whisper-attention", pass_fuse_whisper_attention,
	 "canonicalize", "nothing", "fuse",
	 "Whisper attention cores (self, causal, cross, KV cache) -> ai.wlower.WhisperAttention"},
	{"fuse-gqa", pass_fuse_gqa,
	 "canonicalize", "nothing", "fuse",
	 "Qwen2 attention core with RoPE and repeat_kv -> ai.wlower.GroupQueryAttention"},
	{"fuse-matmul-nbits", pass_fuse_matmul_nbits,
	 "canonicalize", "nothing", "fuse",
	 "MatMulNBits or MatMul with constant weight, + bias Add -> ai.wlower.MatMulNBits"},
	{"fuse-qkv", pass_fuse_qkv,
	 "fuse-matmul-nbits", "nothing", "fuse",
	 "projections of one input -> one ai.wlower.MatMulNBits with concatenated weight"},
	{"fuse-logmel", pass_fuse_logmel,
	 "nothing", "graph inputs", "fuse",
	 "--prepend-logmel: waveform input + ai.wlower.LogMel"},
	{"fuse-argmax", pass_fuse_argmax,
	 "nothing", "graph outputs", "fuse",
	 "--append-argmax: logits outputs -> ai.wlower.GreedyArgMax int32 ids"},
	{"fp16-attention", pass_fp16_attention,
	 "fuse-whisper-attention, fuse-gqa", "nothing", "fuse",
	 "--fp16-attention: attention-adjacent edges become float16"},
	{"fuse-dce", pass_dce,
	 "use lists", "nothing", "fuse",
	 "dce after fusion"},
	/* numerics: fixed-point formats for the chimera targets (no-op without --tranges) */
	{"assign-fracbits", pass_assign_fracbits,
	 "fuse", "nothing (sets Value ranges and frac_bits)", "numerics",
	 "--tranges: value ranges -> fractional bits (docs/numerics.md)"},
};
const int pass_count = (int)(sizeof pass_table / sizeof pass_table[0]);

const Pass *pass_find(const char *name)
{
	for (int i = 0; i < pass_count; i++)
		if (strcmp(pass_table[i].name, name) == 0)
			return &pass_table[i];
	return NULL;
}
