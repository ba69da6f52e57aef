/* ops.c — the Chimera op table: one row (chimera.h ChOp) per IR op that has
 * a CCL kernel, indexed by Node.op (compiler/ir/ops.def); every other op is
 * unsupported. A row holds the C++ kernel, its info and emit functions
 * (ops/<family>.c), and what lower.c and alloc.c need to split, tile and
 * stage it. Adding a kernel: docs/chimera-contracts.md "Adding a kernel".
 */
#include <stdlib.h>
#include <string.h>
#include "ops.h"

/* the kernel fields of a row: C++ name, ck_<fam>_info, ck_<fam>_emit */
#define KERNEL(cpp, fam) cpp, ck_##fam##_info, ck_##fam##_emit

const ChOp chimera_ops[OP_COUNT_] = {
	/*                               C++ kernel, info/emit                    tiling (lower.c)  row reductions */
	/* matmul.c */
	[OP_WlMatMulNBits]         = {KERNEL("linalg::matMulNBits", matmul_nbits),  CH_TILE_MATMUL,    0},
	[OP_WlQMatMul]             = {KERNEL("linalg::qMatMul", qmatmul),           CH_TILE_MATMUL,    0},
	/* attention.c */
	[OP_WlWhisperAttention]    = {KERNEL("nn::whisperAttention", whisper_attn), CH_TILE_ATTENTION, 2},
	[OP_WlGroupQueryAttention] = {KERNEL("nn::gqa", gqa),                       CH_TILE_GQA,       2},
	/* norm.c */
	[OP_LayerNormalization]    = {KERNEL("nn::layerNorm", norm),                CH_TILE_ROWS,      2},
	[OP_WlRMSNorm]             = {KERNEL("nn::rmsNorm", norm),                  CH_TILE_ROWS,      1},
	/* elementwise.c: unary */
	[OP_Gelu]                  = {KERNEL("nn::gelu", unary),                    CH_TILE_ROWS,      0},
	[OP_WlGelu]                = {KERNEL("nn::gelu", unary),                    CH_TILE_ROWS,      0},
	[OP_WlSiLU]                = {KERNEL("nn::silu", unary),                    CH_TILE_ROWS,      0},
	[OP_Cast]                  = {KERNEL("ccl::copy", unary),                   CH_TILE_ROWS,      0},
	[OP_Identity]              = {KERNEL("ccl::copy", unary),                   CH_TILE_ROWS,      0},
	[OP_Reshape]               = {KERNEL("ccl::copy", unary),                   CH_TILE_ROWS,      0},
	[OP_Transpose]             = {KERNEL("ccl::transpose", transpose),          CH_TILE_ROWS,      0},
	/* elementwise.c: binary, broadcasting */
	[OP_Add]                   = {KERNEL("nn::add", binary),                    CH_TILE_ROWS,      0},
	[OP_Mul]                   = {KERNEL("nn::mul", binary),                    CH_TILE_ROWS,      0},
	/* gather.c */
	[OP_Gather]                = {KERNEL("nn::embedding", embedding),           CH_TILE_GATHER,    0,
	                              .gathers = true},
	[OP_WlQGather]             = {KERNEL("nn::embeddingQ8", qembedding),        CH_TILE_GATHER,    0,
	                              .gathers = true},
	/* argmax.c */
	[OP_WlGreedyArgMax]        = {KERNEL("ccl::argmax", argmax),                CH_TILE_ARGMAX,    1},
	/* conv.c */
	[OP_WlConvStem]            = {KERNEL("whisper::convStem", conv_stem),       CH_TILE_CONV,      0},
	/* quant.c: the int8 / uint8 edges of QDQ graphs */
	[OP_QuantizeLinear]        = {KERNEL("ccl::quantize", quantize),            CH_TILE_ROWS,      0},
	[OP_DequantizeLinear]      = {KERNEL("nn::dequantize", dequant),            CH_TILE_ROWS,      0},
	/* logmel.c */
	[OP_WlLogMel]              = {KERNEL("whisper::logMel", logmel),            CH_TILE_LOGMEL,    1},
};

const ChOp *chimera_op(Op op)
{
	return op > OP_UNKNOWN && op < OP_COUNT_ && chimera_ops[op].info ? &chimera_ops[op] : NULL;
}

bool chimera_op_supported(Op op)
{
	return chimera_op(op) != NULL;
}

int ccl_kernel_info(const Node *n, CclKernelInfo *ki, Diag *d)
{
	memset(ki, 0, sizeof *ki);
	const ChOp *op = chimera_op(n->op);
	if (!op)
		return KFAIL(n, "no CCL kernel for op %s%s%s", n->domain && n->domain[0] ? n->domain : "",
		             n->domain && n->domain[0] ? "." : "", n->op_type);
	ki->cpp_name = op->cpp;
	if (op->info(n, ki, d)) {
		ccl_kernel_info_free(ki);
		return WL_ERR;
	}
	return WL_OK;
}

void ccl_kernel_info_free(CclKernelInfo *ki)
{
	for (int i = 0; i < ki->nblobs; i++)
		free(ki->blobs[i].data);
	ki->nblobs = 0;
}

int ccl_emit_call(const Node *n, const char *const *in, const char *const *out, const char *const *blob,
                  const char *scratch, FILE *f, Diag *d)
{
	const ChOp *op = chimera_op(n->op);
	if (!op)
		return KFAIL(n, "no CCL kernel for op %s", n->op_type);
	ChCallArgs a = {in, out, blob, scratch};
	return op->emit(op, n, &a, f, d);
}
