/* validate.c — what an imported model must satisfy beyond being well formed,
 * checked by both readers (onnx_import.c, text_parse.c) right after import:
 *
 *   opset_import  every version >= 1; the default domain at most ONNX_OPSET_MAX
 *                 (the newest opset this build knows), ai.wlower and
 *                 com.microsoft at most 1;
 *   attributes    an attribute an op's schema types (the table below) has that
 *                 type: Softmax <axis = 1.5> is an error, not axis 0 (attr_int
 *                 would return its default);
 *   shapes        a declared tensor shape whose element count overflows int64
 *                 (dims of 2^40 x 2^40) is an error naming the tensor
 *                 (initializers: checked_numel in onnx_import.c).
 * Axis ranges need shapes: shape inference checks them (passes/shape_infer.c).
 * Errors are one line naming the file, node and attribute or tensor. */
#include <string.h>
#include "compiler/onnx/onnx.h"

typedef struct AttrSpec { const char *name; int type; } AttrSpec;

#define A(...) (const AttrSpec[]){__VA_ARGS__, {NULL, 0}}
#define AXIS {"axis", AT_INT}
#define REDUCE A({"axes", AT_INTS}, {"keepdims", AT_INT}, {"noop_with_empty_axes", AT_INT})
#define ARG A(AXIS, {"keepdims", AT_INT}, {"select_last_index", AT_INT})
#define ALPHA A({"alpha", AT_FLOAT})
#define NBITS_ {"K", AT_INT}, {"N", AT_INT}, {"bits", AT_INT}, {"block_size", AT_INT}, {"accuracy_level", AT_INT}
#define NBITS A(NBITS_)

/* the typed attributes of each op; attributes not listed are not checked */
static const AttrSpec *const attr_specs[OP_COUNT_] = {
	[OP_Softmax] = A(AXIS), [OP_LogSoftmax] = A(AXIS), [OP_Hardmax] = A(AXIS),
	[OP_Concat] = A(AXIS), [OP_Gather] = A(AXIS), [OP_GatherElements] = A(AXIS), [OP_Flatten] = A(AXIS),
	[OP_GatherND] = A({"batch_dims", AT_INT}),
	[OP_Split] = A(AXIS, {"split", AT_INTS}, {"num_outputs", AT_INT}),
	[OP_ArgMax] = ARG, [OP_ArgMin] = ARG,
	[OP_ReduceMean] = REDUCE, [OP_ReduceSum] = REDUCE, [OP_ReduceMax] = REDUCE, [OP_ReduceMin] = REDUCE,
	[OP_ReduceProd] = REDUCE, [OP_ReduceSumSquare] = REDUCE, [OP_ReduceL2] = REDUCE, [OP_ReduceL1] = REDUCE,
	[OP_ReduceLogSum] = REDUCE, [OP_ReduceLogSumExp] = REDUCE,
	[OP_LayerNormalization] = A(AXIS, {"epsilon", AT_FLOAT}, {"stash_type", AT_INT}),
	[OP_BatchNormalization] = A({"epsilon", AT_FLOAT}, {"momentum", AT_FLOAT}, {"training_mode", AT_INT}),
	[OP_TopK] = A(AXIS, {"largest", AT_INT}, {"sorted", AT_INT}),
	[OP_Transpose] = A({"perm", AT_INTS}),
	[OP_Squeeze] = A({"axes", AT_INTS}), [OP_Unsqueeze] = A({"axes", AT_INTS}),
	[OP_Cast] = A({"to", AT_INT}, {"saturate", AT_INT}), [OP_CastLike] = A({"saturate", AT_INT}),
	[OP_Gemm] = A({"alpha", AT_FLOAT}, {"beta", AT_FLOAT}, {"transA", AT_INT}, {"transB", AT_INT}),
	[OP_Conv] = A({"auto_pad", AT_STRING}, {"dilations", AT_INTS}, {"group", AT_INT}, {"kernel_shape", AT_INTS},
	              {"pads", AT_INTS}, {"strides", AT_INTS}),
	[OP_LeakyRelu] = ALPHA, [OP_Elu] = ALPHA, [OP_Celu] = ALPHA, [OP_ThresholdedRelu] = ALPHA,
	[OP_Selu] = A({"alpha", AT_FLOAT}, {"gamma", AT_FLOAT}),
	[OP_HardSigmoid] = A({"alpha", AT_FLOAT}, {"beta", AT_FLOAT}),
	[OP_Gelu] = A({"approximate", AT_STRING}),
	[OP_Mod] = A({"fmod", AT_INT}), [OP_BitShift] = A({"direction", AT_STRING}),
	[OP_IsInf] = A({"detect_negative", AT_INT}, {"detect_positive", AT_INT}),
	[OP_Shape] = A({"start", AT_INT}, {"end", AT_INT}),
	[OP_Reshape] = A({"allowzero", AT_INT}), [OP_Pad] = A({"mode", AT_STRING}), [OP_Trilu] = A({"upper", AT_INT}),
	[OP_CumSum] = A({"exclusive", AT_INT}, {"reverse", AT_INT}), [OP_Einsum] = A({"equation", AT_STRING}),
	[OP_Constant] = A({"value", AT_TENSOR}, {"value_float", AT_FLOAT}, {"value_floats", AT_FLOATS},
	                  {"value_int", AT_INT}, {"value_ints", AT_INTS}, {"value_string", AT_STRING},
	                  {"value_strings", AT_STRINGS}, {"sparse_value", AT_SPARSE_TENSOR}),
	[OP_ConstantOfShape] = A({"value", AT_TENSOR}),
	[OP_If] = A({"then_branch", AT_GRAPH}, {"else_branch", AT_GRAPH}), [OP_Loop] = A({"body", AT_GRAPH}),
	[OP_Scan] = A({"body", AT_GRAPH}, {"num_scan_inputs", AT_INT}),
	[OP_MsMatMulNBits] = NBITS,
	[OP_WlMatMulNBits] = A(NBITS_, {"trans_b", AT_INT}, {"groups", AT_INT}, {"splits", AT_INTS}),
	[OP_MsGroupQueryAttention] = A({"num_heads", AT_INT}, {"kv_num_heads", AT_INT}, {"scale", AT_FLOAT},
	                               {"do_rotary", AT_INT}, {"rotary_interleaved", AT_INT},
	                               {"local_window_size", AT_INT}, {"softcap", AT_FLOAT}),
	[OP_WlWhisperAttention] = A({"embed", AT_INT}, {"heads", AT_INT}, {"q_len", AT_INT}, {"kv_len", AT_INT},
	                            {"causal", AT_INT}, {"scale", AT_FLOAT}, {"kv_layout", AT_STRING}, {"fp16", AT_INT}),
	[OP_WlGroupQueryAttention] = A({"heads", AT_INT}, {"kv_heads", AT_INT}, {"head_dim", AT_INT},
	                               {"causal", AT_INT}, {"rope", AT_INT}, {"scale", AT_FLOAT}),
	[OP_WlConvStem] = A({"strides", AT_INTS}, {"pads", AT_INTS}),
};

static const char *const at_names[] = {
	[AT_UNDEFINED] = "undefined", [AT_FLOAT] = "a float", [AT_INT] = "an int", [AT_STRING] = "a string",
	[AT_TENSOR] = "a tensor", [AT_GRAPH] = "a graph", [AT_FLOATS] = "floats", [AT_INTS] = "ints",
	[AT_STRINGS] = "strings", [AT_TENSORS] = "tensors", [AT_GRAPHS] = "graphs",
	[AT_SPARSE_TENSOR] = "a sparse tensor", [AT_SPARSE_TENSORS] = "sparse tensors",
	[AT_TYPE_PROTO] = "a type", [AT_TYPE_PROTOS] = "types",
};

static const char *at_name(int t)
{
	return t >= 0 && t < (int)(sizeof at_names / sizeof at_names[0]) && at_names[t] ? at_names[t] : "of unknown type";
}

/* the node's name, else its first output's (as shape inference names it) */
static const char *nname(const Node *n)
{
	if (n->name && *n->name)
		return n->name;
	if (n->noutputs && n->outputs[0])
		return n->outputs[0]->name;
	return n->op_type;
}

static int check_opsets(const Module *m, const Opset *os, int n, const char *where, Diag *d)
{
	for (int i = 0; i < n; i++) {
		const char *dom = os[i].domain && *os[i].domain ? os[i].domain : "ai.onnx";
		int64_t v = os[i].version, max = -1;
		if (domain_is_default(os[i].domain))
			max = ONNX_OPSET_MAX;
		else if (domain_eq(os[i].domain, "ai.wlower") || domain_eq(os[i].domain, "com.microsoft"))
			max = 1;
		if (v < 1)
			return diag_fail(d, "%s: %sopset_import '%s': version %lld is not an opset version (they start at 1)",
			                 m->path, where, dom, (long long)v);
		if (max > 0 && v > max)
			return diag_fail(d, "%s: %sopset_import '%s': version %lld is newer than %lld, the newest this build knows%s",
			                 m->path, where, dom, (long long)v, (long long)max,
			                 max == ONNX_OPSET_MAX ? " (" ONNX_OPSET_MAX_RELEASE ")" : "");
	}
	return WL_OK;
}

static int check_attrs(const Module *m, const Node *n, Diag *d)
{
	const AttrSpec *spec = n->op != OP_UNKNOWN ? attr_specs[n->op] : NULL;
	for (int i = 0; spec && i < n->nattrs; i++) {
		const Attr *a = &n->attrs[i];
		if (a->ref_attr_name)
			continue;            /* function body: the caller's attribute */
		for (const AttrSpec *s = spec; s->name; s++)
			if (!strcmp(s->name, a->name) && s->type != a->type) {
				char op[64];
				return diag_fail(d, "%s: node '%s' (%s): attribute '%s' is %s, expected %s", m->path, nname(n),
				                 node_op_name(n, op, sizeof op), a->name, at_name(a->type), at_name(s->type));
			}
	}
	return WL_OK;
}

static int check_shape(const Module *m, const Value *v, Diag *d)
{
	const Type *t = &v->type;
	if ((t->kind != TY_TENSOR && t->kind != TY_SPARSE_TENSOR) || !type_shape_known(t) || type_numel(t) >= 0)
		return WL_OK;
	char dims[200];
	size_t k = 0;
	for (int i = 0; i < t->rank && k < sizeof dims - 24; i++)
		k += (size_t)snprintf(dims + k, sizeof dims - k, "%s%lld", i ? ", " : "", (long long)t->dims[i].value);
	return diag_fail(d, "%s: tensor '%s': shape [%s] has more than 2^63 elements", m->path, v->name, dims);
}

static int check_graph(const Module *m, const Graph *g, Diag *d)
{
	for (int i = 0; i < g->nvalues; i++)
		if (check_shape(m, g->values[i], d) != WL_OK)
			return WL_ERR;
	FOR_NODES(g, n) {
		if (check_attrs(m, n, d) != WL_OK)
			return WL_ERR;
		FOR_SUBGRAPHS(n, sg)
			if (check_graph(m, sg, d) != WL_OK)
				return WL_ERR;
	}
	return WL_OK;
}

int onnx_validate(Module *m, Diag *d)
{
	if (check_opsets(m, m->opsets, m->nopsets, "", d) != WL_OK || check_graph(m, m->graph, d) != WL_OK)
		return WL_ERR;
	for (int i = 0; i < m->nfuncs; i++) {
		const Function *f = m->funcs[i];
		char where[300];
		snprintf(where, sizeof where, "function '%s': ", f->name);
		if (check_opsets(m, f->opsets, f->nopsets, where, d) != WL_OK || check_graph(m, f->body, d) != WL_OK)
			return WL_ERR;
	}
	return WL_OK;
}
