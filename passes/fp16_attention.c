/* fp16_attention.c — --fp16-attention: the attention-adjacent edges carry
 * binary16 precision (the vendor declares them float16: 8 edges in the
 * Whisper encoder).
 *
 *   o = ai.wlower.WhisperAttention <...> (q, k, v)
 * →
 *   o = ai.wlower.WhisperAttention <..., fp16 = 1> (q, k, v)
 *
 * How: the edges stay float32 tensors in the graph (so it stays valid ONNX
 * and every producer and consumer keeps its float32 type); the node gets
 * the attribute fp16 = 1, and the reference kernel rounds q, k, v, past_k,
 * past_v (the inputs) and out, present_k, present_v (the outputs) to
 * binary16, round to nearest even, as if those edges were float16 tensors.
 * Softmax, scores and accumulations stay float32/float64 inside the kernel.
 * A numerics stage that lowers to a target reads fp16 = 1 as "these edges
 * are float16". Declaring FLOAT16 value_info on values that float32 nodes
 * produce would make the exported graph invalid, so it is not done.
 *
 * Only with ctx->fuse.fp16_attention; otherwise nothing changes. Applies to
 * WhisperAttention and GroupQueryAttention nodes of every graph (subgraphs
 * included).
 *
 * requires  fuse-whisper-attention, fuse-gqa
 * maintains everything (adds one attribute)
 * breaks    nothing
 */
#include <string.h>
#include "passes.h"
#include "match.h"

static bool is_attention(const Node *n)
{
	return n->op == OP_WlWhisperAttention || n->op == OP_WlGroupQueryAttention;
}

static void run_graph(Graph *g, int *changed)
{
	FOR_NODES(g, n) {
		for_each_subgraph(n, run_graph, changed);
		if (!is_attention(n) || attr_int(n, "fp16", 0) == 1)
			continue;
		node_add_attr(n, "fp16", AT_INT)->i = 1;
		(*changed)++;
	}
}

int pass_fp16_attention(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	if (!ctx || !ctx->fuse.fp16_attention)
		return WL_OK;
	return pass_on_graph(m, ctx, run_graph);
}
