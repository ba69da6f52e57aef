/* test_canonicalize.c — the canonical forms against the subgraphs they replace.
 *
 * Each case is an unfused graph in ONNX textual syntax. It is run through the
 * reference executor as written (the reference), then canonicalized
 * (shape-infer, fold-constants and the pass under test) and run again on the
 * same random inputs: the canonical op must be there, the unfused ops gone,
 * and every output within 1e-5 relative (max |ref - got| / max |ref|).
 * Also: fold-constants turns a Shape/Gather/Concat chain and a torch mask
 * construction into initializers with the executor's values.
 */
#include <check.h>
#include "check_run.h"
#include "unit_util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "passes/passes.h"
#include "runtime/interp/interp.h"

/* Runs m on the inputs; copies output o into *out (malloc'ed). */
static void run(Module *m, Inputs *in, int o, RTensor *out)
{
	Exec *e = run_inputs(m, in, 1);
	copy_tensor(out, exec_output(e, o));
	exec_free(e);
}

/* The unfused graph vs the graph after `passes`: canonical op present
 * `want` times, `gone` absent, outputs within 1e-5 relative. */
static void check_form(const char *src, const char *passes, const char *domain, const char *op, int want,
                       const char *gone)
{
	Module *ref = parse_text(src), *got = parse_text(src);
	run_pipeline(got, (PipelineOptions){.passes = passes});
	ck_assert_int_eq(count_op(got, domain, op), want);
	if (gone)
		ck_assert_int_eq(count_op(got, "", gone), 0);
	Inputs in;
	make_inputs(ref, &in, 42, 3.0f, false);  /* float32 only */
	for (int o = 0; o < ref->graph->noutputs; o++) {
		RTensor a, b;
		run(ref, &in, o, &a);
		run(got, &in, o, &b);
		ck_assert_int_eq(rt_numel(&a), rt_numel(&b));
		double peak = 0, err = 0;
		const float *pa = a.data, *pb = b.data;
		for (int64_t k = 0; k < rt_numel(&a); k++) {
			peak = fmax(peak, fabs(pa[k]));
			err = fmax(err, fabs((double)pa[k] - pb[k]));
		}
		ck_assert_msg(err <= 1e-5 * peak, "%s output %d: max error %g, peak %g", op, o, err, peak);
		rt_free(&a);
		rt_free(&b);
	}
	free_inputs(&in);
	module_free(ref);
	module_free(got);
}

#define CANON "shape-infer,fold-constants,canonicalize-layernorm,canonicalize-gelu,canonicalize-rmsnorm,canonicalize-silu"

START_TEST(gelu_erf)
{
	check_form("<ir_version: 8, opset_import: [\"\" : 14]>\n"
	           "g (float[3, 64] x) => (float[3, 64] y) <float s2 = {1.4142135}, float one = {1.0}, float half = {0.5}> {\n"
	           "  d = Div (x, s2)\n  e = Erf (d)\n  a = Add (e, one)\n  m = Mul (x, a)\n  y = Mul (m, half)\n}\n",
	           CANON, "ai.wlower", "Gelu", 1, "Erf");
	check_form("<ir_version: 8, opset_import: [\"\" : 14]>\n"
	           "g (float[3, 64] x) => (float[3, 64] y) <float r2 = {0.70710678}, float one = {1.0}, float half = {0.5}> {\n"
	           "  d = Mul (r2, x)\n  e = Erf (d)\n  a = Add (one, e)\n  h = Mul (x, half)\n  y = Mul (a, h)\n}\n",
	           CANON, "ai.wlower", "Gelu", 1, "Erf");
}
END_TEST

START_TEST(gelu_tanh)
{
	check_form("<ir_version: 8, opset_import: [\"\" : 14]>\n"
	           "g (float[3, 64] x) => (float[3, 64] y) <float three = {3.0}, float k = {0.044715}, "
	           "float c = {0.7978845608}, float one = {1.0}, float half = {0.5}> {\n"
	           "  p = Pow (x, three)\n  q = Mul (k, p)\n  s = Add (x, q)\n  u = Mul (c, s)\n  t = Tanh (u)\n"
	           "  a = Add (one, t)\n  h = Mul (half, x)\n  y = Mul (h, a)\n}\n",
	           CANON, "ai.wlower", "Gelu", 1, "Tanh");
}
END_TEST

START_TEST(layernorm)
{
	check_form("<ir_version: 8, opset_import: [\"\" : 14]>\n"
	           "g (float[2, 5, 32] x) => (float[2, 5, 32] y) <float two = {2.0}, float eps = {1e-05}, "
	           "float[32] gamma = {1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8}, "
	           "float[32] beta = {0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1}> {\n"
	           "  mu = ReduceMean <axes = [-1]> (x)\n  dx = Sub (x, mu)\n  sq = Pow (dx, two)\n"
	           "  va = ReduceMean <axes = [-1]> (sq)\n  ve = Add (va, eps)\n  sd = Sqrt (ve)\n"
	           "  nx = Div (dx, sd)\n  gx = Mul (nx, gamma)\n  y = Add (gx, beta)\n}\n",
	           CANON, "", "LayerNormalization", 1, "ReduceMean");
	/* without gamma and beta */
	check_form("<ir_version: 8, opset_import: [\"\" : 14]>\n"
	           "g (float[4, 16] x) => (float[4, 16] y) <float two = {2.0}, float eps = {1e-06}> {\n"
	           "  mu = ReduceMean <axes = [1]> (x)\n  dx = Sub (x, mu)\n  sq = Pow (dx, two)\n"
	           "  va = ReduceMean <axes = [-1]> (sq)\n  ve = Add (eps, va)\n  sd = Sqrt (ve)\n"
	           "  y = Div (dx, sd)\n}\n",
	           CANON, "", "LayerNormalization", 1, "ReduceMean");
}
END_TEST

START_TEST(rmsnorm)
{
	check_form("<ir_version: 8, opset_import: [\"\" : 14]>\n"
	           "g (float[1, 6, 16] x) => (float[1, 6, 16] y, float[1, 6, 16] r) <float two = {2.0}, float eps = {1e-06}, "
	           "float one = {1.0}, float[16] gamma = {1,2,3,4,5,6,7,8,0.5,0.25,1,1,1,1,2,2}> {\n"
	           "  xf = Cast <to = 1> (x)\n  sq = Pow (xf, two)\n  va = ReduceMean <axes = [-1]> (sq)\n"
	           "  ve = Add (va, eps)\n  sd = Sqrt (ve)\n  rs = Div (one, sd)\n  nx = Mul (xf, rs)\n"
	           "  nc = Cast <to = 1> (nx)\n  y = Mul (gamma, nc)\n  r = Add (xf, x)\n}\n",
	           CANON, "ai.wlower", "RMSNorm", 1, "ReduceMean");
	check_form("<ir_version: 8, opset_import: [\"\" : 17]>\n"
	           "g (float[6, 16] x) => (float[6, 16] y) <float two = {2.0}, float eps = {1e-05}, "
	           "float[16] gamma = {1,2,3,4,5,6,7,8,0.5,0.25,1,1,1,1,2,2}> {\n"
	           "  sq = Pow (x, two)\n  va = ReduceMean <axes = [-1]> (sq)\n  ve = Add (va, eps)\n"
	           "  sd = Sqrt (ve)\n  rs = Reciprocal (sd)\n  nx = Mul (rs, x)\n  y = Mul (nx, gamma)\n}\n",
	           CANON, "ai.wlower", "RMSNorm", 1, "ReduceMean");
}
END_TEST

START_TEST(silu)
{
	check_form("<ir_version: 8, opset_import: [\"\" : 17]>\n"
	           "g (float[4, 64] x) => (float[4, 64] y, float[4, 64] y2) {\n"
	           "  s = Sigmoid (x)\n  y = Mul (x, s)\n  s2 = Sigmoid (y)\n  y2 = Mul (s2, y)\n}\n",
	           CANON, "ai.wlower", "SiLU", 2, "Sigmoid");
}
END_TEST

/* contrib ops: one node for one node (+ Adds) */
START_TEST(contrib)
{
	check_form("<ir_version: 8, opset_import: [\"\" : 17, \"com.microsoft\" : 1]>\n"
	           "g (float[3, 16] x, float[16] b) => (float[3, 16] y, float[3, 16] z, float[3, 16] w) {\n"
	           "  y = com.microsoft.Gelu (x)\n  z = com.microsoft.FastGelu (x)\n"
	           "  w = com.microsoft.FastGelu (x, b)\n}\n",
	           CANON, "ai.wlower", "Gelu", 3, NULL);
	check_form("<ir_version: 8, opset_import: [\"\" : 14, \"com.microsoft\" : 1]>\n"
	           "g (float[1, 3, 16] x, float[1, 3, 16] s, float[16] gamma, float[16] beta, float[16] bias) => "
	           "(float[1, 3, 16] y, float[1, 3, 16] sum, float[1, 3, 16] y2) {\n"
	           "  y, m, i, sum = com.microsoft.SkipLayerNormalization <epsilon = 1e-05> (x, s, gamma, beta, bias)\n"
	           "  y2 = com.microsoft.SkipLayerNormalization (x, s, gamma)\n}\n",
	           CANON, "", "LayerNormalization", 2, NULL);
	check_form("<ir_version: 8, opset_import: [\"\" : 17]>\n"
	           "g (float[3, 16] x, float[16] gamma) => (float[3, 16] y) {\n"
	           "  y = SimplifiedLayerNormalization <axis = -1, epsilon = 1e-05> (x, gamma)\n}\n",
	           CANON, "ai.wlower", "RMSNorm", 1, "SimplifiedLayerNormalization");
}
END_TEST

START_TEST(fold_shape_chain)
{
	/* Optimum-style reshape target, and torch's mask construction */
	const char *src =
		"<ir_version: 8, opset_import: [\"\" : 17]>\n"
		"g (float[2, 6, 8] x) => (float[2, 6, 2, 4] y, float[2, 6] w) <int64[1] i1 = {1}, int64[1] two = {2}, "
		"int64[1] four = {4}, int64 z = {0}, int64[2] shp = {2, 6}, float neg = {-1}, float one = {1}, "
		"float big = {-1e9}> {\n"
		"  s = Shape (x)\n  b = Gather <axis = 0> (s, z)\n  bu = Unsqueeze (b, z1)\n"
		"  t = Gather <axis = 0> (s, i1)\n  c = Concat <axis = 0> (bu, t, two, four)\n  y = Reshape (x, c)\n"
		"  m = ConstantOfShape <value = float[1] {1}> (shp)\n  mm = Mul (m, neg)\n  eq = Equal (mm, neg)\n"
		"  wh = Where (eq, big, one)\n  w = Expand (wh, shp)\n}\n";
	/* Unsqueeze needs its axes as an input at opset 13+ */
	char buf[2048];
	const char *at = strstr(src, "int64 z = {0}");
	snprintf(buf, sizeof buf, "%.*sint64[1] z1 = {0}, %s", (int)(at - src), src, at);
	Module *m = parse_text(buf);
	run_pipeline(m, (PipelineOptions){.passes = "shape-infer,fold-constants,dce"});
	/* w is a graph output: its Expand stays, fed by a folded constant */
	ck_assert_int_eq(count_op(m, "", "Shape"), 0);
	ck_assert_int_eq(count_op(m, "", "Concat"), 0);
	ck_assert_int_eq(count_op(m, "", "Where"), 0);
	ck_assert_int_eq(count_op(m, "", "Expand"), 1);
	Value *c = graph_find(m->graph, "c");
	ck_assert_ptr_nonnull(c);
	ck_assert_ptr_nonnull(c->init);
	ck_assert_int_eq(tensor_numel(c->init), 4);
	int64_t want[4] = {2, 6, 2, 4};
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(tensor_get_i64(c->init, i), want[i]);
	Value *wh = graph_find(m->graph, "wh");
	ck_assert_ptr_nonnull(wh->init);
	ck_assert(tensor_get_f64(wh->init, 0) == -1e9f);
	module_free(m);
}
END_TEST

CHECK_MAIN("canonicalize", "forms",
	gelu_erf, gelu_tanh, layernorm, rmsnorm, silu, contrib, fold_shape_chain)
