/* match.h — the matcher library of the canonicalize and fuse passes
 * (passes/match.c), after onnx-mlir's shared matchers: the tests a pattern is
 * built from, written once. The tests and the match_* functions read the
 * graph and change nothing (match_* fill a capture struct); attn_replace and
 * the rewrite helpers change it, and run only on a full match.
 *
 * Structure, never names: nothing here looks at a node or tensor name except
 * fused_node_name (and attn_name), which derive the new node's name from the
 * replaced ones.
 */
#ifndef WLOWER_MATCH_H
#define WLOWER_MATCH_H
#include "passes/passes.h"

enum {
	MATCH_MAXR = 6,            /* ranks static_shape reads */
	MATCH_MAXN = 48,           /* nodes one MatchSet holds */
};

/* ---------------------------------------------------------------- values */

/* v's producer if it is an op node, else NULL. */
Node *producer(const Value *v, Op op);
/* v has exactly one reader and is not a graph output (an intermediate a
 * rewrite may delete). */
bool sole_read(const Value *v);
/* The one reader of v if sole_read(v) and it is an op node, else NULL. */
Node *sole_user(const Value *v, Op op);
/* The operand of binary n that is not v (NULL if neither or both are v). */
Value *other_operand(const Node *n, const Value *v);

/* ---------------------------------------------------------------- constants */

/* v is an initializer of that element type, with data. */
bool const_of(const Value *v, int dtype);
/* v is a constant holding one number of any numeric type: *out = it. */
bool const_scalar(const Value *v, double *out);
/* The same, float32 only. */
bool float_scalar(const Value *v, double *out);
/* A float32 scalar constant within rtol·|want| of want. */
bool float_scalar_near(const Value *v, double want, double rtol);
/* A constant float32 vector of shape exactly [D] (a norm's gamma or beta;
 * a [1,1,D] one would broadcast x up). */
bool param_vec(const Value *v, int64_t D);
/* Mul (x, c), Mul (c, x) or Div (x, c) with c a scalar constant of element
 * type dtype (DT_UNDEFINED: any numeric) and x not constant: returns x and
 * sets *c to the constant as written (Div: the divisor); else NULL. */
Value *scaled_operand(const Node *n, int dtype, double *c);

/* ---------------------------------------------------------------- shapes */

/* Rank of v with its dims in d when its shape is static (rank <= MATCH_MAXR),
 * else -1. */
int static_shape(const Value *v, int64_t d[MATCH_MAXR]);
/* v's static shape is exactly want[0..r). */
bool shape_is(const Value *v, int r, const int64_t *want);
/* n is a Transpose with perm exactly p[0..r). */
bool perm_is(const Node *n, int r, const int64_t *p);
/* n = ReduceMean (x) over the last axis only (axes attribute, or a
 * one-element axes input at opset 18), keepdims 1. */
bool mean_last(const Node *n, const Value *x);

/* ---------------------------------------------------------------- match sets */

/* The nodes a match will replace. match_push ignores a node already in the
 * set; past `max` nodes the set is full and match_is_private refuses it. */
typedef struct MatchSet {
	Node *nodes[MATCH_MAXN];
	int nn, max;
} MatchSet;

void match_init(MatchSet *s, int max);
void match_push(MatchSet *s, Node *n);
bool match_contains(const MatchSet *s, const Node *n);
bool match_full(const MatchSet *s);
/* Drops the nodes pushed after the first nn (a tentative sub-match that
 * failed; nn from s->nn before it). */
void match_truncate(MatchSet *s, int nn);
/* A match may be replaced only if it is not full and every value its nodes
 * produce is read inside it, except `out` and the `late` values (present
 * K/V), whose readers outside must come after `last` in the same graph. */
bool match_is_private(const MatchSet *s, const Node *last, const Value *out,
                      const Value *const *late, int nlate);
/* The nodes of s in graph order (out holds MATCH_MAXN); returns how many. */
int match_in_order(const MatchSet *s, const Graph *g, Node **out);

/* ---------------------------------------------------------------- norms */

/* LayerNorm and RMSNorm as torch.onnx decomposes them (onnx-mlir's
 * matchLayerNormPattern (..., isRMSLayerNorm)); set holds the replaced nodes
 * in pattern order, y is the value the norm node will produce.
 *
 * LayerNorm (rms false; first = the ReduceMean of the mean):
 *   mu = ReduceMean (x); dx = Sub (x, mu); sq = Pow (dx, 2.0); va = ReduceMean (sq)
 *   ve = Add (va, eps); sd = Sqrt (ve); nx = Div (dx, sd)
 *   [gx = Mul (nx, gamma)]; [y = Add (gx, beta)]      gamma, beta: float[D]
 * RMSNorm (rms true; first = the Pow):
 *   sq = Pow (x, 2.0); va .. sd as above
 *   nx = Div (x, sd) | Mul (x, Reciprocal (sd)) | Mul (x, Div (1.0, sd))
 *   [nc = Cast <to = float> (nx)]; y = Mul (gamma, nc)
 * Both: x float with a static last dim D, every ReduceMean over the last axis
 * with keepdims 1, eps a float scalar in [0, 1], commutative operands in
 * either order, every intermediate read once and not a graph output. */
typedef struct NormMatch {
	MatchSet set;
	Value *x, *y, *gamma, *beta;
	float eps;
	int64_t D;
} NormMatch;

bool match_norm(Node *first, bool rms, NormMatch *N);

/* ---------------------------------------------------------------- causal masks */

/* An attention mask that is exactly causal for T queries over L keys, the
 * first P of them past: key j visible to query i iff j <= P + i.
 *   CAUSAL_ADD   an additive mask: a float constant [.., T, L] (or an Expand
 *                of one) whose leading dims are 1, 0 where visible and
 *                <= -1e9 (or -inf) elsewhere; the mask value itself is
 *                [.., T, L] with leading dims 1 (the first may be B)
 *   CAUSAL_KEEP  a Where condition: a bool constant [.., T, L], leading dims
 *                1, true exactly where visible
 *   CAUSAL_DROP  the same, true exactly where not visible */
typedef enum { CAUSAL_ADD, CAUSAL_KEEP, CAUSAL_DROP } CausalForm;

bool mask_is_causal(const Value *mask, CausalForm form, int64_t B, int64_t T, int64_t P, int64_t L);
/* Where (keep, s, neg) or Where (drop, neg, s) on attention scores s: neg a
 * scalar constant <= -1e9, the condition a constant. Returns s and sets *keep
 * (true: the first form); NULL if n is not of that form. */
Value *where_scores(const Node *n, bool *keep);

/* ---------------------------------------------------------------- attention */

/* The pieces of eager attention (transformers' Whisper and Qwen2, openai
 * whisper) that fuse-whisper-attention and fuse-gqa both walk:
 *
 *   h  = Transpose <perm=[0,2,1,3]> (Reshape (x, _))   # head split, [B,n,S,hd]
 *   p  = Softmax <axis=-1> (scores)
 *   o  = MatMul (Cast? (p), v)                          # PV
 *   y  = Reshape (Transpose <perm=[0,2,1,3]> (o), _)    # head merge, [B,T,n·hd]
 */

/* Rank of sm's output (dims in d) if sm is a one-input Softmax over the last
 * axis of a static shape, else -1. */
int softmax_last(const Node *sm, int64_t d[MATCH_MAXR]);
/* The MatMul (p, v) reading the Softmax sm's output p, through Casts to
 * float, each value read only by the next: pushes the Casts and the MatMul. */
Node *match_pv(MatchSet *s, Node *sm);
/* Head split: h = Transpose <perm=[0,2,1,3]> (Reshape (x, _)) with h static
 * [B,n,S,hd] (into d) and the Reshape read only by the Transpose. Pushes both
 * and returns x, whose shape the caller checks (head_proj); else NULL. */
Value *match_head_split(MatchSet *s, Value *h, int64_t d[4]);
/* x is the [B,S,n·hd] projection split into heads d = [B,n,S,hd]. */
bool head_proj(const Value *x, const int64_t d[4]);
/* The KV cache: ka = Concat <axis=2> (past, new) of K or V [B,n,L,hd]. Pushes
 * the Concat, sets *past and *present (= ka) and returns new. Returns ka with
 * *past = *present = NULL when ka is not such a Concat; NULL when it is one
 * but past is not 4-D. */
Value *match_past(MatchSet *s, Value *ka, Value **past, Value **present);
/* Head merge: y = Reshape (Transpose <perm=[0,2,1,3]> (o), _) with y static
 * want = [B,T,n·hd], each read only by the next. Pushes both, returns y. */
Value *match_head_merge(MatchSet *s, Value *o, const int64_t want[3]);

/* What an attention fusion replaces, in fuse-whisper-attention and fuse-gqa
 * alike: the nodes; out, produced by the head merge's Reshape (last); the
 * K/V Concat results present_k/v (NULL without past), which may be read
 * outside the pattern after last (the KV cache outputs). */
typedef struct AttnCore {
	MatchSet set;
	Value *out, *present_k, *present_v;
	Node *last;
} AttnCore;

/* match_is_private for a core: only out and present are read outside. */
bool attn_is_private(const AttnCore *c);
/* The fused node's name: the core's common "/a/b/" prefix + "core", else
 * "/<op>_<counter++>". ordered (MATCH_MAXN) gets the core's nodes in graph
 * order, *no their count. */
const char *attn_name(Module *m, const AttnCore *c, const char *op, Node **ordered, int *no, int *counter);
/* n, new with its attributes, replaces the core: fused_from lists ordered,
 * n goes before last, reads ins[0..nin) and produces out, then present K
 * and V while anything still reads them. Imports ai.wlower. Returns whether
 * present was kept. */
bool attn_replace(Module *m, const AttnCore *c, Node *n, Node *const *ordered, int no, Value *const *ins,
                  int nin);

/* ---------------------------------------------------------------- fake quantization */
/* The QDQ pairs of an attention core, as `wlower quantize --int8` and ONNX
 * Runtime's quantize_static write them around the core's MatMul/Mul/Add
 * inputs (RoPE products, QK^T, the scores, the probabilities, V):
 *
 *   xq = QuantizeLinear (x, s, z)       x float, s a float scalar constant,
 *   y  = DequantizeLinear (xq, s, z)    z absent or an int8/uint8 scalar
 *                                       constant, the same s and z on both;
 *                                       xq read by this DequantizeLinear only,
 *                                       y not a graph output
 *
 * qdq_bypass_attention walks back from the PV MatMul of the Softmax sm
 * (sm's output through Cast / QuantizeLinear / DequantizeLinear to a MatMul)
 * over the core's nodes, stopping at a head split's Reshape (a rank-3 input:
 * the q/k/v projections and everything before them keep their QDQ pairs),
 * a MatMul or ai.wlower.QMatMul with a constant weight, and constants. Every
 * pair found is bypassed tentatively: y's readers read x and the
 * QuantizeLinear's input is detached, so the attention matcher sees the
 * float pattern. Then either qdq_bypass_commit (the core matched: the pairs
 * read only inside `core` are removed, the others restored) or
 * qdq_bypass_undo (no match: the graph is as before).
 * Returns the number of pairs bypassed (0: nothing to undo or commit). */
/* dq is the DequantizeLinear of such a pair: its QuantizeLinear, else NULL. */
Node *fake_quant_pair(const Node *dq);
typedef struct QdqBypass {
	Node *q[32], *dq[32];
	Value *x[32];
	int np;
	struct QdqUse {
		Node *n;
		int slot, pair;
	} *use;
	int nuse;
} QdqBypass;
int qdq_bypass_attention(Node *sm, QdqBypass *b);
void qdq_bypass_undo(QdqBypass *b);
void qdq_bypass_commit(QdqBypass *b, const MatchSet *core);

/* ---------------------------------------------------------------- rewrite helpers */

/* Names and provenance of the nodes a rewrite creates. The name is the
 * replaced nodes' common "/a/b/" prefix + suffix, else "/<op>_<counter++>";
 * fused_from lists the replaced nodes' names in order. */
const char *fused_node_name(Module *m, Node *const *nodes, int nn, const char *suffix,
                            const char *op, int *counter);
void set_fused_from(Module *m, Node *n, Node *const *nodes, int nn);
/* fused_from of a node that replaces fused nodes too: their own fused_from
 * lists stand in for their names. */
void set_fused_from_nested(Module *m, Node *n, Node *const *nodes, int nn);

typedef struct IntAttr {
	const char *name;
	int64_t v;
} IntAttr;
void set_int_attrs(Node *n, const IntAttr *a, int na);
void set_string_attr(Module *m, Node *n, const char *name, const char *v);
/* A new initializer of g: a value named after hint, of type dtype[dims], and
 * its tensor, whose data (rank dims, allocated in the module's arena) the
 * caller fills through *data. */
Value *new_initializer(Graph *g, const char *hint, int dtype, int rank, const int64_t *dims, void **data);

/* n, a new node with its attributes, replaces nodes[0..nn): fused_from lists
 * them, n goes before pos and reads ins[0..nin), the nodes are removed and n
 * produces y (the value the last of them produced). */
void replace_nodes(Module *m, Node *n, Node *const *nodes, int nn, Node *pos, Value *const *ins, int nin,
                   Value *y);
/* com.microsoft SkipLayerNormalization / SkipSimplifiedLayerNormalization n
 * (x, skip, gamma, ...) whose mean and inv_std_var outputs are unread:
 *   s = Add (x, skip) [; s = Add (s, bias)]; y = norm (s, params...)
 * replaces n. norm is new (node_new, attributes set, no inputs, not in the
 * node list); s is n's input_skip_bias_sum output when it has one. Returns
 * false, changing nothing, when n has not that form. */
bool replace_skip_norm(Module *m, Node *n, Node *norm, Value *const *params, int np, Value *bias);
/* Removes the nodes of s, in push order; the values they produced, other
 * than keep[0..nkeep) (the outputs the fused node takes over), leave the
 * value_info and lose their type. */
void match_remove(const MatchSet *s, const Value *const *keep, int nkeep);

/* A new ai.wlower.WhisperAttention <embed, heads, q_len, kv_len, causal,
 * scale, kv_layout> named `name`: not yet in the node list, no fused_from,
 * inputs or outputs. */
typedef struct WaAttrs {
	int64_t embed, heads, q_len, kv_len;
	bool causal;
	double scale;
	const char *kv_layout;
} WaAttrs;
Node *new_whisper_attention(Module *m, Graph *g, const char *name, const WaAttrs *a);

/* ---------------------------------------------------------------- passes */

/* Runs fn on every subgraph attribute (If/Loop/Scan bodies) of n. */
void for_each_subgraph(Node *n, void (*fn)(Graph *g, int *changed), int *changed);
/* A pass that is run_graph on the main graph (run_graph recurses with
 * for_each_subgraph): runs it and adds its changes to ctx. */
int pass_on_graph(Module *m, PassContext *ctx, void (*run_graph)(Graph *g, int *changed));
/* The end of a fusion pass: imports ai.wlower opset 1 if it changed
 * anything, adds the changes to ctx. Returns WL_OK. */
int fusion_done(Module *m, PassContext *ctx, int changed);

#endif
