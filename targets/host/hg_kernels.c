/* hg_kernels.c — the host op table: op → kernel generator (+ scratch size).
 * Generators live in kgen_*.c (declared in hostgen.h). */
#include <string.h>
#include "hostgen.h"

static const HgKernel table[] = {
	{"ai.wlower", "MatMulNBits", hg_emit_matmul_nbits, hg_scratch_matmul_nbits},
	{"ai.wlower", "WhisperAttention", hg_emit_whisper_attention, hg_scratch_whisper_attention},
	{"ai.wlower", "GroupQueryAttention", hg_emit_gqa, hg_scratch_gqa},
	{"ai.wlower", "ConvStem", hg_emit_conv_stem, hg_scratch_conv_stem},
	{"ai.wlower", "LogMel", hg_emit_logmel, hg_scratch_logmel},
	{"ai.wlower", "Gelu", hg_emit_unary, NULL},
	{"ai.wlower", "SiLU", hg_emit_unary, NULL},
	{"ai.wlower", "RMSNorm", hg_emit_rmsnorm, NULL},
	{"ai.wlower", "GreedyArgMax", hg_emit_argmax, NULL},
	{"", "Gelu", hg_emit_unary, NULL},
	{"", "Cast", hg_emit_unary, NULL},
	{"", "Identity", hg_emit_unary, NULL},
	{"", "Add", hg_emit_binary, NULL},
	{"", "Mul", hg_emit_binary, NULL},
	{"", "Sub", hg_emit_binary, NULL},
	{"", "Gather", hg_emit_gather, NULL},
	{"", "LayerNormalization", hg_emit_layernorm, NULL},
	{NULL, NULL, NULL, NULL},
};

const HgKernel *hg_kernel_find(const Node *n)
{
	const char *dom = n->domain && strcmp(n->domain, "ai.onnx") ? n->domain : "";
	for (const HgKernel *k = table; k->op_type; k++)
		if (!strcmp(k->domain, dom) && !strcmp(k->op_type, n->op_type))
			return k;
	return NULL;
}
