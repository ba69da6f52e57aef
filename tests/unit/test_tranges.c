/* test_tranges.c — the tranges file: write/read round trip (exact doubles,
 * names that need escaping, order kept), look-ups, and one clear error per
 * malformed file: bad JSON (with line:col), wrong format or version, missing
 * or non-numeric bounds, min > max, a tensor listed twice, a missing tensor. */
#include <check.h>
#include "check_run.h"
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tranges/tranges.h"

static char dir[256];

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/test_tranges.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static const char *write_file(const char *name, const char *text)
{
	static char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/* Reads `text` as a tranges file and expects an error containing `want`. */
static void expect_error(const char *text, const char *want)
{
	const char *p = write_file("bad.tranges", text);
	TRanges *tr = (TRanges *)1;
	Diag d = {0};
	ck_assert_int_eq(tranges_read(p, &tr, &d), WL_ERR);
	ck_assert_ptr_null(tr);
	ck_assert_msg(strstr(d.msg, want) != NULL, "message '%s' lacks '%s'", d.msg, want);
	ck_assert_msg(strstr(d.msg, "bad.tranges") != NULL, "message '%s' does not name the file", d.msg);
	ck_assert_ptr_null(strchr(d.msg, '\n'));
}

START_TEST(round_trip)
{
	TRanges *tr = tranges_new("enc \"tiny\".onnx", 73);
	double vals[][2] = {{-0.1f, 0.1}, {-1e-30, 3.4028234663852886e38}, {0, 0}, {-7, 12345.678}, {1, 1}};
	const char *names[] = {"input_features", "/conv1/Conv_output_0", "onnx::MatMul_1234", "a\"b\\c\td", "x.y"};
	for (int i = 0; i < 5; i++)
		tranges_set(tr, names[i], vals[i][0], vals[i][1]);
	tranges_set(tr, "x.y", -2, 2);           /* replaces, keeps the order */
	ck_assert_int_eq(tr->n, 5);
	char path[512];
	snprintf(path, sizeof path, "%s/rt.tranges", dir);
	Diag d = {0};
	ck_assert_int_eq(tranges_write(path, tr, &d), WL_OK);
	TRanges *back = NULL;
	ck_assert_msg(tranges_read(path, &back, &d) == WL_OK, "%s", d.msg);
	ck_assert_int_eq(back->n, 5);
	ck_assert_int_eq(back->samples, 73);
	ck_assert_str_eq(back->model, "enc \"tiny\".onnx");
	for (int i = 0; i < 5; i++) {
		ck_assert_str_eq(back->r[i].name, names[i]);
		double mn, mx;
		ck_assert(tranges_get(back, names[i], &mn, &mx));
		double wmn = i == 4 ? -2 : vals[i][0], wmx = i == 4 ? 2 : vals[i][1];
		ck_assert_msg(mn == wmn && mx == wmx, "%s: %.17g %.17g", names[i], mn, mx);
	}
	ck_assert(!tranges_get(back, "nope", NULL, NULL));
	tranges_free(tr);
	tranges_free(back);
}
END_TEST

START_TEST(many_tensors)
{
	TRanges *tr = tranges_new(NULL, 1);
	char name[32];
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof name, "t%d", i);
		tranges_set(tr, name, -i, i);
	}
	for (int i = 0; i < 5000; i++) {
		double mn, mx;
		snprintf(name, sizeof name, "t%d", i);
		ck_assert(tranges_get(tr, name, &mn, &mx));
		ck_assert(mn == -i && mx == i);
	}
	tranges_free(tr);
}
END_TEST

START_TEST(trailing_white_space)
{
	const char *p = write_file("ws.tranges",
		"{\"format\":\"wlower-tranges\",\"version\":1,\"tensors\":{\"a\":{\"min\":-1,\"max\":2}}}\n \t\r\n");
	TRanges *tr;
	Diag d = {0};
	ck_assert_int_eq(tranges_read(p, &tr, &d), WL_OK);
	tranges_free(tr);
}
END_TEST

START_TEST(require_names_tensor)
{
	const char *p = write_file("r.tranges",
		"{\"format\":\"wlower-tranges\",\"version\":1,\"model\":\"m.onnx\",\"samples\":2,"
		"\"tensors\":{\"a\":{\"min\":-1,\"max\":2}}}");
	TRanges *tr;
	Diag d = {0};
	ck_assert_int_eq(tranges_read(p, &tr, &d), WL_OK);
	double mn, mx;
	ck_assert_int_eq(tranges_require(tr, "a", "n", &mn, &mx, &d), WL_OK);
	ck_assert(mn == -1 && mx == 2);
	ck_assert_int_eq(tranges_require(tr, "ghost", "/attn/Softmax", &mn, &mx, &d), WL_ERR);
	ck_assert_msg(strstr(d.msg, "r.tranges: no range for tensor 'ghost' (node '/attn/Softmax')"), "%s", d.msg);
	tranges_free(tr);
}
END_TEST

START_TEST(errors)
{
	expect_error("", "empty file");
	expect_error("{\"format\": \"wlower-tranges\",\n \"version\": 1,\n \"tensors\": {\"a\": {\"min\": 1,, }}}",
	             "bad.tranges:3:");
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 1", "malformed JSON");
	expect_error("[1, 2]", "top level is not a JSON object");
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 1, \"tensors\": {}}\n x",
	             "bad.tranges:2:2: text after the JSON object");
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 1, \"tensors\": {}}{}",
	             "bad.tranges:1:58: text after the JSON object");
	expect_error("{\"version\": 1, \"tensors\": {}}", "\"format\" is missing");
	expect_error("{\"format\": \"other\", \"version\": 1, \"tensors\": {}}", "\"format\" is \"other\"");
	expect_error("{\"format\": \"wlower-tranges\", \"tensors\": {}}", "\"version\" is missing");
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 2, \"tensors\": {}}", "unsupported tranges version 2");
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 1}", "\"tensors\" is missing");
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 1, \"samples\": -3, \"tensors\": {}}", "\"samples\"");
	/* fuzz_tranges found this one: a huge count was cast to int64 (UB). */
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 1, \"samples\": 8.9e114, \"tensors\": {}}",
	             "\"samples\" is not a count in 0..9e15");
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 1, \"samples\": 1e300, \"tensors\": {\"t\": {\"min\": 0, \"max\": 1}}}",
	             "\"samples\" is not a count");
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 1, \"samples\": 2.5, \"tensors\": {}}", "\"samples\" is not a non-negative integer");
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 1, \"tensors\": {\"t\": 3}}", "tensor 't': expected");
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 1, \"tensors\": {\"t\": {\"max\": 1}}}",
	             "tensor 't': no \"min\"");
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 1, \"tensors\": {\"t\": {\"min\": \"0\", \"max\": 1}}}",
	             "tensor 't': \"min\" is not a number");
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 1, \"tensors\": {\"t\": {\"min\": 0, \"max\": null}}}",
	             "tensor 't': \"max\" is not a number");
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 1, \"tensors\": {\"t\": {\"min\": 2, \"max\": 1}}}",
	             "tensor 't': min 2 > max 1");
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 1, \"tensors\": {\"t\": {\"min\": 0, \"max\": 1e999}}}",
	             "tensor 't': \"max\" is not finite");
	expect_error("{\"format\": \"wlower-tranges\", \"version\": 1, \"tensors\": "
	             "{\"t\": {\"min\": 0, \"max\": 1}, \"t\": {\"min\": 0, \"max\": 2}}}", "tensor 't' is listed twice");
}
END_TEST

START_TEST(missing_file)
{
	char path[512];
	snprintf(path, sizeof path, "%s/none.tranges", dir);
	TRanges *tr;
	Diag d = {0};
	ck_assert_int_eq(tranges_read(path, &tr, &d), WL_ERR);
	ck_assert_msg(strstr(d.msg, "none.tranges") != NULL, "%s", d.msg);
	/* writing into a missing folder fails cleanly */
	snprintf(path, sizeof path, "%s/no/such/dir/x.tranges", dir);
	TRanges *t2 = tranges_new("m", 0);
	Diag d2 = {0};
	ck_assert_int_eq(tranges_write(path, t2, &d2), WL_ERR);
	ck_assert_msg(strstr(d2.msg, "x.tranges") != NULL, "%s", d2.msg);
	tranges_free(t2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tranges");
	TCase *tc = tcase_create("tranges");
	tcase_add_checked_fixture(tc, setup, teardown);
	check_add(tc, (const TTest *const[]){
		round_trip, many_tensors, require_names_tensor, trailing_white_space, errors, missing_file, NULL
	});
	return check_run(s, tc);
}
