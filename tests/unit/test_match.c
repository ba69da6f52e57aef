/* test_match.c — the matcher library of the canonicalize and fuse passes
 * (passes/match.h) on small graphs in ONNX textual syntax: value and
 * constant tests, match sets, the causal-mask recogniser (the union of what
 * fuse-whisper-attention and fuse-gqa accepted), the norm matcher, and the
 * attention pieces. The passes built on it are tested end to end in
 * test_canonicalize.c, test_fuse_attention.c and tests/lit.
 */
#include <check.h>
#include "check_run.h"
#include "unit_util.h"
#include <string.h>
#include "passes/passes.h"
#include "passes/match.h"

static Module *parse(const char *src)
{
	Module *m = parse_text(src);
	Diag d = {0};
	PipelineOptions o = {0};
	o.passes = "shape-infer";
	ck_assert_msg(pipeline_run(m, &o, &d) == WL_OK, "shape-infer: %s", d.msg);
	return m;
}

static Value *val(Module *m, const char *name)
{
	Value *v = graph_find(m->graph, name);
	ck_assert_msg(v != NULL, "no value %s", name);
	return v;
}

static Node *prod(Module *m, const char *name)
{
	Node *n = val(m, name)->producer;
	ck_assert_msg(n != NULL, "%s has no producer", name);
	return n;
}

START_TEST(values_and_constants)
{
	Module *m = parse("<ir_version: 8, opset_import: [\"\" : 17]>\n"
	                  "g (float[2, 4] x) => (float[2, 4] y, float[2, 4] z) <float c = {0.5}, int64 i = {3}, "
	                  "float[4] g4 = {1, 2, 3, 4}, float[1, 4] g14 = {1, 2, 3, 4}> {\n"
	                  "  a = Relu (x)\n  b = Neg (a)\n  y = Add (b, b)\n  s = Mul (c, x)\n  t = Div (s, c)\n"
	                  "  u = Div (c, t)\n  z = Mul (u, g4)\n}\n");
	Value *a = val(m, "a"), *b = val(m, "b"), *y = val(m, "y"), *c = val(m, "c");
	ck_assert_ptr_eq(sole_user(a, OP_Neg), prod(m, "b"));
	ck_assert_ptr_null(sole_user(a, OP_Abs));
	ck_assert(!sole_read(b));                  /* read twice by y */
	ck_assert(!sole_read(y));                  /* a graph output */
	ck_assert_ptr_eq(producer(b, OP_Neg), prod(m, "b"));
	ck_assert_ptr_null(producer(b, OP_Relu));
	ck_assert_ptr_null(other_operand(prod(m, "y"), b));   /* Add (b, b) */
	ck_assert_ptr_eq(other_operand(prod(m, "s"), val(m, "x")), c);
	double k;
	ck_assert(float_scalar(c, &k) && k == 0.5);
	ck_assert(!float_scalar(val(m, "i"), &k));
	ck_assert(const_scalar(val(m, "i"), &k) && k == 3);
	ck_assert(float_scalar_near(c, 0.5 + 1e-7, 1e-5));
	ck_assert(!float_scalar_near(c, 0.6, 1e-5));
	ck_assert(param_vec(val(m, "g4"), 4));
	ck_assert(!param_vec(val(m, "g14"), 4));
	ck_assert(!param_vec(val(m, "g4"), 3));
	/* Mul (c, x), Div (s, c); Div (c, t) divides by a non-constant */
	ck_assert_ptr_eq(scaled_operand(prod(m, "s"), DT_FLOAT, &k), val(m, "x"));
	ck_assert(k == 0.5);
	ck_assert_ptr_eq(scaled_operand(prod(m, "t"), DT_UNDEFINED, &k), val(m, "s"));
	ck_assert_ptr_null(scaled_operand(prod(m, "u"), DT_UNDEFINED, &k));
	ck_assert_ptr_null(scaled_operand(prod(m, "s"), DT_INT64, &k));
	module_free(m);
}
END_TEST

START_TEST(match_sets)
{
	Module *m = parse("<ir_version: 8, opset_import: [\"\" : 17]>\n"
	                  "g (float[2, 4] x) => (float[2, 4] y, float[2, 4] w) {\n"
	                  "  a = Relu (x)\n  b = Neg (a)\n  y = Abs (b)\n  w = Neg (a)\n}\n");
	Node *a = prod(m, "a"), *b = prod(m, "b"), *y = prod(m, "y");
	MatchSet s;
	match_init(&s, 2);
	match_push(&s, b);
	match_push(&s, a);
	match_push(&s, b);                         /* already in: ignored */
	ck_assert_int_eq(s.nn, 2);
	ck_assert(match_contains(&s, a) && !match_contains(&s, y) && !match_full(&s));
	Node *ordered[MATCH_MAXN];
	ck_assert_int_eq(match_in_order(&s, m->graph, ordered), 2);
	ck_assert_ptr_eq(ordered[0], a);
	ck_assert_ptr_eq(ordered[1], b);
	/* a is read by w outside the set */
	ck_assert(!match_is_private(&s, b, val(m, "b"), NULL, 0));
	match_push(&s, y);
	ck_assert(match_full(&s));
	match_truncate(&s, 1);
	ck_assert(!match_full(&s) && s.nn == 1 && match_contains(&s, b) && !match_contains(&s, a));
	/* {b, y}: only y (the output) leaves the set */
	match_init(&s, 4);
	match_push(&s, b);
	match_push(&s, y);
	ck_assert(match_is_private(&s, y, val(m, "y"), NULL, 0));
	module_free(m);
}
END_TEST

/* T = 3 queries, P = 2 past, L = 5 keys: key j visible to query i iff j <= 2 + i. */
#define CAUSAL "{0, 0, 0, -1e9, -1e9, 0, 0, 0, 0, -1e9, 0, 0, 0, 0, 0}"
#define SHIFTED "{0, 0, -1e9, -1e9, -1e9, 0, 0, 0, -1e9, -1e9, 0, 0, 0, 0, -1e9}"
#define SHALLOW "{0, 0, 0, -1e8, -1e8, 0, 0, 0, 0, -1e8, 0, 0, 0, 0, 0}"
#define KEEP "{1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1}"
#define DROP "{0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}"

START_TEST(causal_masks)
{
	Module *m = parse("<ir_version: 8, opset_import: [\"\" : 17]>\n"
	                  "g (float[2, 2, 3, 5] s) => (float[2, 2, 3, 5] y) <float[3, 5] m2 = " CAUSAL ", "
	                  "float[1, 1, 3, 5] m4 = " CAUSAL ", float[2, 1, 3, 5] m4b = {0, 0, 0, -1e9, -1e9, 0, 0, 0, "
	                  "0, -1e9, 0, 0, 0, 0, 0, 0, 0, 0, -1e9, -1e9, 0, 0, 0, 0, -1e9, 0, 0, 0, 0, 0}, "
	                  "float[1, 3, 5] m3 = " CAUSAL ", float[3, 5] shifted = " SHIFTED ", "
	                  "float[3, 5] shallow = " SHALLOW ", bool[3, 5] keep = " KEEP ", bool[3, 5] drop = " DROP ", "
	                  "int64[4] shp = {2, 1, 3, 5}, int64[3] shp3 = {2, 3, 5}> {\n"
	                  "  e = Expand (m2, shp)\n  e3 = Expand (m2, shp3)\n  y = Add (s, e)\n}\n");
	int64_t B = 2, T = 3, P = 2, L = 5;
	ck_assert(mask_is_causal(val(m, "m2"), CAUSAL_ADD, B, T, P, L));
	ck_assert(mask_is_causal(val(m, "m4"), CAUSAL_ADD, B, T, P, L));
	ck_assert(mask_is_causal(val(m, "m3"), CAUSAL_ADD, B, T, P, L));
	/* an Expand of a constant: to [B, 1, T, L], and to [B, T, L] (fuse-whisper-
	 * attention accepted a leading B at any rank, fuse-gqa at rank 4 only) */
	ck_assert(mask_is_causal(val(m, "e"), CAUSAL_ADD, B, T, P, L));
	ck_assert(mask_is_causal(val(m, "e3"), CAUSAL_ADD, B, T, P, L));
	ck_assert(!mask_is_causal(val(m, "e3"), CAUSAL_ADD, 1, T, P, L));
	/* near misses: a constant whose own leading dims are not 1, another
	 * diagonal, a fill above -1e9, other T / L / P */
	ck_assert(!mask_is_causal(val(m, "m4b"), CAUSAL_ADD, B, T, P, L));
	ck_assert(!mask_is_causal(val(m, "shifted"), CAUSAL_ADD, B, T, P, L));
	ck_assert(mask_is_causal(val(m, "shifted"), CAUSAL_ADD, B, T, 1, L));
	ck_assert(!mask_is_causal(val(m, "shallow"), CAUSAL_ADD, B, T, P, L));
	ck_assert(!mask_is_causal(val(m, "m2"), CAUSAL_ADD, B, 2, P, L));
	ck_assert(!mask_is_causal(val(m, "m2"), CAUSAL_ADD, B, T, P, 4));
	ck_assert(!mask_is_causal(val(m, "s"), CAUSAL_ADD, B, T, P, L));
	ck_assert(!mask_is_causal(NULL, CAUSAL_ADD, B, T, P, L));
	/* Where conditions */
	ck_assert(mask_is_causal(val(m, "keep"), CAUSAL_KEEP, B, T, P, L));
	ck_assert(!mask_is_causal(val(m, "keep"), CAUSAL_DROP, B, T, P, L));
	ck_assert(mask_is_causal(val(m, "drop"), CAUSAL_DROP, B, T, P, L));
	ck_assert(!mask_is_causal(val(m, "m2"), CAUSAL_KEEP, B, T, P, L));
	ck_assert(!mask_is_causal(val(m, "keep"), CAUSAL_ADD, B, T, P, L));
	module_free(m);
}
END_TEST

START_TEST(where_forms)
{
	Module *m = parse("<ir_version: 8, opset_import: [\"\" : 17]>\n"
	                  "g (float[3, 5] s) => (float[3, 5] a, float[3, 5] b, float[3, 5] c) <bool[3, 5] keep = " KEEP
	                  ", float neg = {-1e9}, float small = {-1e3}> {\n"
	                  "  a = Where (keep, s, neg)\n  b = Where (keep, neg, s)\n  c = Where (keep, s, small)\n}\n");
	bool keep = false;
	ck_assert_ptr_eq(where_scores(prod(m, "a"), &keep), val(m, "s"));
	ck_assert(keep);
	ck_assert_ptr_eq(where_scores(prod(m, "b"), &keep), val(m, "s"));
	ck_assert(!keep);
	ck_assert_ptr_null(where_scores(prod(m, "c"), &keep));
	module_free(m);
}
END_TEST

START_TEST(norms)
{
	Module *m = parse("<ir_version: 8, opset_import: [\"\" : 14]>\n"
	                  "g (float[2, 8] x) => (float[2, 8] y, float[2, 8] r, float[2, 8] q) <float two = {2.0}, "
	                  "float three = {3.0}, float eps = {1e-05}, float one = {1.0}, float[8] gamma = {1, 2, 3, 4, 5, 6, 7, 8}, "
	                  "float[8] beta = {0, 1, 0, 1, 0, 1, 0, 1}> {\n"
	                  "  mu = ReduceMean <axes = [-1]> (x)\n  dx = Sub (x, mu)\n  sq = Pow (dx, two)\n"
	                  "  va = ReduceMean <axes = [-1]> (sq)\n  ve = Add (eps, va)\n  sd = Sqrt (ve)\n"
	                  "  nx = Div (dx, sd)\n  gx = Mul (gamma, nx)\n  y = Add (gx, beta)\n"
	                  "  rq = Pow (x, two)\n  rv = ReduceMean <axes = [1]> (rq)\n  re = Add (rv, eps)\n"
	                  "  rd = Sqrt (re)\n  ri = Div (one, rd)\n  rn = Mul (x, ri)\n  r = Mul (rn, gamma)\n"
	                  "  qq = Pow (x, three)\n  qv = ReduceMean <axes = [-1]> (qq)\n  qe = Add (qv, eps)\n"
	                  "  qd = Sqrt (qe)\n  qn = Div (x, qd)\n  q = Mul (qn, gamma)\n}\n");
	NormMatch N;
	ck_assert(match_norm(prod(m, "mu"), false, &N));
	ck_assert_int_eq(N.set.nn, 9);
	ck_assert_ptr_eq(N.x, val(m, "x"));
	ck_assert_ptr_eq(N.y, val(m, "y"));
	ck_assert_ptr_eq(N.gamma, val(m, "gamma"));
	ck_assert_ptr_eq(N.beta, val(m, "beta"));
	ck_assert(N.eps == 1e-05f && N.D == 8);
	ck_assert(match_norm(prod(m, "rq"), true, &N));
	ck_assert_int_eq(N.set.nn, 7);
	ck_assert_ptr_eq(N.y, val(m, "r"));
	ck_assert_ptr_null(N.beta);
	/* an RMSNorm is no LayerNorm, x^3 no norm at all */
	ck_assert(!match_norm(prod(m, "rv"), false, &N));
	ck_assert(!match_norm(prod(m, "qq"), true, &N));
	module_free(m);
}
END_TEST

START_TEST(attention_pieces)
{
	Module *m = parse("<ir_version: 8, opset_import: [\"\" : 17]>\n"
	                  "g (float[1, 3, 8] x, float[1, 2, 3, 4] v) => (float[1, 3, 8] y, float[1, 2, 3, 3] p2) "
	                  "<int64[4] s4 = {1, 3, 2, 4}, int64[3] s3 = {1, 3, 8}> {\n"
	                  "  r = Reshape (x, s4)\n  h = Transpose <perm = [0, 2, 1, 3]> (r)\n"
	                  "  t = Transpose <perm = [0, 1, 3, 2]> (h)\n  sc = MatMul (h, t)\n"
	                  "  p = Softmax <axis = -1> (sc)\n  pc = Cast <to = 1> (p)\n  o = MatMul (pc, v)\n"
	                  "  ot = Transpose <perm = [0, 2, 1, 3]> (o)\n  y = Reshape (ot, s3)\n"
	                  "  p2 = Softmax <axis = 2> (sc)\n}\n");
	int64_t d[MATCH_MAXR];
	ck_assert_int_eq(softmax_last(prod(m, "p"), d), 4);
	ck_assert_int_eq(softmax_last(prod(m, "p2"), d), -1);
	MatchSet s;
	match_init(&s, MATCH_MAXN);
	ck_assert_ptr_eq(match_pv(&s, prod(m, "p")), prod(m, "o"));
	ck_assert_int_eq(s.nn, 2);                 /* the Cast and the MatMul */
	int64_t hd[4];
	Value *x = match_head_split(&s, val(m, "h"), hd);
	ck_assert_ptr_eq(x, val(m, "x"));
	ck_assert(hd[0] == 1 && hd[1] == 2 && hd[2] == 3 && hd[3] == 4);
	ck_assert(head_proj(x, hd));
	ck_assert(!head_proj(val(m, "v"), hd));
	int64_t want[3] = {1, 3, 8}, wrong[3] = {1, 8, 3};
	ck_assert_ptr_eq(match_head_merge(&s, val(m, "o"), want), val(m, "y"));
	ck_assert_ptr_null(match_head_merge(&s, val(m, "o"), wrong));
	Value *past, *present;
	ck_assert_ptr_eq(match_past(&s, val(m, "v"), &past, &present), val(m, "v"));
	ck_assert_ptr_null(past);
	module_free(m);
}
END_TEST

CHECK_MAIN("match", "match",
	values_and_constants, match_sets, causal_masks, where_forms, norms, attention_pieces)
