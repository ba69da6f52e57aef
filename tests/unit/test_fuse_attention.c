/* test_fuse_attention.c — ai.wlower WhisperAttention and GroupQueryAttention
 * against the unfused subgraphs they replace.
 *
 * Each case is an unfused graph in ONNX textual syntax: the positive cases of
 * tests/lit/fuse_whisper_attention.onnxtxt and fuse_gqa.onnxtxt (self, causal,
 * openai qk, with past, cross "bhsd", Where mask; GQA prefill with RoPE, and a
 * Qwen2 single-token step: RoPE rows gathered at position_ids, past K/V,
 * repeat_kv, the transformers attention_mask chain, here with a padded key). The
 * graph runs through the reference executor as written (the reference),
 * then through shape-infer, the fusion pass and dce, and again on the same
 * random inputs: the fused op must be the only node left, and every output
 * within 1e-5 relative (max |ref - got| / max |ref|). Also the mask variants
 * of fuse_gqa_masks.onnxtxt (Where / Trilu causal masks, causal + padding)
 * and com.microsoft Attention (fuse_ms_attention.onnxtxt: the contrib
 * reference kernel vs MatMulNBits + WhisperAttention). With fp16 = 1 the
 * outputs differ, but by less than binary16 rounding allows (2e-3).
 */
#include <check.h>
#include "check_run.h"
#include "unit_util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "passes/passes.h"
#include "runtime/interp/interp.h"

#ifndef WLOWER_SOURCE_ROOT
#define WLOWER_SOURCE_ROOT "."
#endif

/* The "#--- NAME" section of a split-file lit test, as a malloc'ed string. */
static char *lit_section(const char *file, const char *name)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/tests/lit/%s", WLOWER_SOURCE_ROOT, file);
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = malloc((size_t)n + 1);
	ck_assert(fread(s, 1, (size_t)n, f) == (size_t)n);
	s[n] = 0;
	fclose(f);
	char tag[128];
	snprintf(tag, sizeof tag, "#--- %s\n", name);
	char *b = strstr(s, tag);
	ck_assert_msg(b != NULL, "no section %s in %s", name, path);
	b += strlen(tag);
	char *e = strstr(b, "\n#--- ");
	size_t len = e ? (size_t)(e - b) + 1 : strlen(b);
	char *out = malloc(len + 1);
	memcpy(out, b, len);
	out[len] = 0;
	free(s);
	return out;
}

/* Runs m; copies every output into out[] (returns the count). */
static int run(Module *m, Inputs *in, RTensor *out)
{
	Exec *e = run_inputs(m, in, 2);
	int no = exec_output_count(e);
	ck_assert_int_le(no, MAXIO);
	for (int i = 0; i < no; i++)
		copy_tensor(&out[i], exec_output(e, i));
	exec_free(e);
	return no;
}

static double rel_err(const RTensor *a, const RTensor *b)
{
	ck_assert_int_eq(a->dtype, DT_FLOAT);
	ck_assert(a->ndim == b->ndim && rt_numel(a) == rt_numel(b));
	const float *x = a->data, *y = b->data;
	double peak = 0, err = 0;
	for (int64_t i = 0; i < rt_numel(a); i++) {
		peak = fmax(peak, fabs(x[i]));
		err = fmax(err, fabs((double)x[i] - y[i]));
	}
	return peak > 0 ? err / peak : err;
}

static void compare(Module *ref, Module *got, const char *op, bool fp16);

/* Fuses src with `pass`; the fused op must be the only node; compares. */
static void check(const char *src, const char *pass, const char *op, bool fp16)
{
	Module *ref = parse_text(src), *got = parse_text(src);
	run_pipeline(ref, (PipelineOptions){.passes = "shape-infer"});
	char passes[256];
	snprintf(passes, sizeof passes, "shape-infer,%s,fp16-attention,dce", pass);
	run_pipeline(got, (PipelineOptions){.passes = passes, .fuse.fp16_attention = fp16});
	ck_assert_int_eq(got->graph->nnodes, 1);
	Node *n = got->graph->first;
	ck_assert_str_eq(n->op_type, op);
	ck_assert_str_eq(n->domain, "ai.wlower");
	ck_assert(node_attr(n, "fused_from") != NULL);
	ck_assert_int_eq(module_opset(got, "ai.wlower"), 1);
	ck_assert_int_eq(attr_int(n, "fp16", 0), fp16);
	compare(ref, got, op, fp16);
}

/* Runs ref and got on the same seeded inputs; every output within 1e-5
 * relative (2e-3 with fp16). Frees both modules. */
static void compare(Module *ref, Module *got, const char *op, bool fp16)
{
	Inputs in;
	make_inputs(ref, &in, 7, 2.0f, true);
	RTensor a[MAXIO], b[MAXIO];
	int na = run(ref, &in, a), nb = run(got, &in, b);
	ck_assert_int_eq(na, nb);
	for (int i = 0; i < na; i++) {
		double e = rel_err(&a[i], &b[i]);
		if (fp16)
			ck_assert_msg(e < 2e-3, "%s output %d: fp16 relative error %g", op, i, e);
		else
			ck_assert_msg(e < 1e-5, "%s output %d: relative error %g", op, i, e);
		rt_free(&a[i]);
		rt_free(&b[i]);
	}
	free_inputs(&in);
	module_free(ref);
	module_free(got);
}

static void check_lit(const char *file, const char *section, const char *pass, const char *op, bool fp16)
{
	char *src = lit_section(file, section);
	check(src, pass, op, fp16);
	free(src);
}

/* fuse_gqa_masks.onnxtxt: causal masks as Where / Trilu, causal + padding. */
#define GQM_CASE(name)                                                                           \
	START_TEST(test_gqm_##name)                                                              \
	{                                                                                        \
		check_lit("fuse_gqa_masks.onnxtxt", #name ".onnxtxt", "fold-constants,fuse-gqa",    \
		          "GroupQueryAttention", false);                                         \
	}                                                                                        \
	END_TEST
GQM_CASE(where_keep)
GQM_CASE(where_drop)
GQM_CASE(trilu)
GQM_CASE(trilu_where)
GQM_CASE(combined)
GQM_CASE(combined_where)
GQM_CASE(additive)
GQM_CASE(where_and)

/* A prefill that returns its cache: the presents are the op's outputs 1 and 2. */
START_TEST(test_gqa_presents)
{
	check_lit("fuse_gqa.onnxtxt", "presents.onnxtxt", "fuse-gqa", "GroupQueryAttention", false);
}
END_TEST

/* fuse-ms-attention: com.microsoft Attention (run by its reference kernel)
 * against ai.wlower.MatMulNBits (QKV, splits) + WhisperAttention. */
static void check_msa(const char *section)
{
	char *src = lit_section("fuse_ms_attention.onnxtxt", section);
	Module *ref = parse_text(src), *got = parse_text(src);
	free(src);
	run_pipeline(ref, (PipelineOptions){.passes = "shape-infer"});
	run_pipeline(got, (PipelineOptions){.passes = "shape-infer,fuse-ms-attention,dce"});
	ck_assert_int_eq(got->graph->nnodes, 2);
	Node *p = got->graph->first, *a = p->next;
	ck_assert_str_eq(p->op_type, "MatMulNBits");
	ck_assert_str_eq(p->domain, "ai.wlower");
	ck_assert_str_eq(a->op_type, "WhisperAttention");
	ck_assert_str_eq(a->domain, "ai.wlower");
	ck_assert(node_attr(a, "fused_from") != NULL);
	compare(ref, got, "WhisperAttention", false);
}

START_TEST(test_msa_self)
{
	check_msa("self.onnxtxt");
}
END_TEST

START_TEST(test_msa_causal)
{
	check_msa("causal.onnxtxt");
}
END_TEST

START_TEST(test_msa_scale)
{
	check_msa("scale.onnxtxt");
}
END_TEST

#define WA_CASE(name)                                                                               \
	START_TEST(test_wa_##name)                                                                  \
	{                                                                                           \
		check_lit("fuse_whisper_attention.onnxtxt", #name ".onnxtxt", "fuse-whisper-attention", \
		          "WhisperAttention", false);                                               \
	}                                                                                           \
	END_TEST
WA_CASE(self)
WA_CASE(causal)
WA_CASE(qk)
WA_CASE(past)
WA_CASE(cross)
WA_CASE(where)

START_TEST(test_wa_fp16)
{
	check_lit("fuse_whisper_attention.onnxtxt", "past.onnxtxt", "fuse-whisper-attention", "WhisperAttention",
	          true);
}
END_TEST

START_TEST(test_gqa_prefill)
{
	check_lit("fuse_gqa.onnxtxt", "prefill.onnxtxt", "fuse-gqa", "GroupQueryAttention", false);
}
END_TEST


START_TEST(test_gqa_step)
{
	check_lit("fuse_gqa.onnxtxt", "step.onnxtxt", "fuse-gqa", "GroupQueryAttention", false);
}
END_TEST

START_TEST(test_gqa_step_fp16)
{
	check_lit("fuse_gqa.onnxtxt", "step.onnxtxt", "fuse-gqa", "GroupQueryAttention", true);
}
END_TEST

CHECK_MAIN("fuse_attention", "core",
	test_wa_self, test_wa_causal, test_wa_qk, test_wa_past, test_wa_cross, test_wa_where,
	test_wa_fp16, test_gqa_prefill, test_gqa_step, test_gqa_step_fp16, test_gqm_where_keep,
	test_gqm_where_drop, test_gqm_trilu, test_gqm_trilu_where, test_gqm_combined,
	test_gqm_combined_where, test_gqm_additive, test_gqm_where_and, test_gqa_presents, test_msa_self, test_msa_causal, test_msa_scale)
