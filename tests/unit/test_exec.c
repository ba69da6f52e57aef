/* test_exec.c — the reference executor: .npy/.pb I/O, float16 rounding,
 * every kernel family on small cases whose expected values are worked out
 * by hand or by an independent naive loop here (never by the code under
 * test), broadcasting, negative axes, MatMulNBits against an independent
 * dequantize + matmul, bit-identical results for 1 and 2 threads, the
 * buffer planner, and the error paths (missing input, wrong dtype/shape,
 * unknown op, bad data). */
#include <check.h>
#include "check_run.h"
#include "unit_util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include "runtime/interp/interp.h"
#include "onnx.pb-c.h"

/* ---------------------------------------------------------------- helpers */

static void fill(float *p, int64_t n, double scale)
{
	for (int64_t i = 0; i < n; i++)
		p[i] = (float)(urand() * scale);
}

/* One-node graph builder. */
typedef struct TB {
	Module *m;
	Graph *g;
	Node *n;
	int nin;
	RTensor in[8];
	const char *inname[8];
} TB;

static TB *tb_new(const char *op, const char *domain, int opset)
{
	TB *t = calloc(1, sizeof *t);
	t->m = module_new("t.onnx");
	module_set_opset(t->m, "", opset);
	if (domain && *domain)
		module_set_opset(t->m, domain, 1);
	t->g = t->m->graph = graph_new(t->m, NULL, NULL, "g");
	t->n = node_new(t->g, op, domain ? domain : "", "n0");
	node_append(t->g, t->n);
	return t;
}

/* A graph input of that type; data is bound at run. */
static void tb_in(TB *t, const char *name, int dt, int nd, const int64_t *dims, const void *data)
{
	Value *v = graph_value(t->g, name);
	type_set_tensor(t->m->arena, &v->type, dt, nd, dims);
	graph_add_input(t->g, v);
	node_add_input(t->n, v);
	RTensor *r = &t->in[t->nin];
	r->dtype = dt;
	r->ndim = nd;
	for (int i = 0; i < nd; i++)
		r->dims[i] = dims[i];
	r->nbytes = dtype_nbytes(dt, rt_numel(r));
	r->data = (void *)data;
	t->inname[t->nin++] = v->name;
}

static void tb_init(TB *t, const char *name, int dt, int nd, const int64_t *dims, const void *data)
{
	Value *v = graph_value(t->g, name);
	Tensor *ts = tensor_new(t->m->arena, name, dt, nd, dims);
	void *p = tensor_alloc_data(t->m->arena, ts);
	memcpy(p, data, ts->nbytes);
	graph_set_init(t->g, v, ts);
	type_set_tensor(t->m->arena, &v->type, dt, nd, dims);
	node_add_input(t->n, v);
}

static void tb_absent(TB *t)
{
	node_add_input(t->n, NULL);
}

static void tb_out(TB *t, const char *name)
{
	Value *v = graph_value(t->g, name);
	node_add_output(t->n, v);
	graph_add_output(t->g, v);
}

static void tb_int(TB *t, const char *name, int64_t v)
{
	node_add_attr(t->n, name, AT_INT)->i = v;
}

static void tb_float(TB *t, const char *name, float v)
{
	node_add_attr(t->n, name, AT_FLOAT)->f = v;
}

static void tb_ints(TB *t, const char *name, int n, const int64_t *v)
{
	Attr *a = node_add_attr(t->n, name, AT_INTS);
	a->n = n;
	a->ints = arena_alloc(t->m->arena, sizeof(int64_t) * (size_t)(n ? n : 1));
	memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
}

static void tb_str(TB *t, const char *name, const char *s)
{
	Attr *a = node_add_attr(t->n, name, AT_STRING);
	a->s.ptr = arena_strdup(t->m->arena, s);
	a->s.len = strlen(s);
}

/* Builds, binds, runs; returns the Exec (caller frees with tb_free). */
static Exec *tb_run(TB *t, int threads)
{
	Exec *e = NULL;
	Diag d = {0};
	if (exec_new(t->m, threads, &e, &d) != WL_OK)
		ck_abort_msg("exec_new: %s", d.msg);
	for (int i = 0; i < t->nin; i++)
		if (exec_bind(e, t->inname[i], &t->in[i], &d) != WL_OK)
			ck_abort_msg("bind: %s", d.msg);
	if (exec_run(e, &d) != WL_OK)
		ck_abort_msg("run: %s", d.msg);
	return e;
}

/* Expects failure at exec_new, bind or run; returns the message. */
static const char *tb_fail(TB *t, Diag *d)
{
	Exec *e = NULL;
	if (exec_new(t->m, 1, &e, d) != WL_OK)
		return d->msg;
	for (int i = 0; i < t->nin; i++)
		if (exec_bind(e, t->inname[i], &t->in[i], d) != WL_OK) {
			exec_free(e);
			return d->msg;
		}
	if (exec_run(e, d) != WL_OK) {
		exec_free(e);
		return d->msg;
	}
	exec_free(e);
	ck_abort_msg("expected a failure");
	return NULL;
}

static void tb_free(TB *t, Exec *e)
{
	exec_free(e);
	module_free(t->m);
	free(t);
}

static const float *outf(Exec *e, int i)
{
	return exec_output(e, i)->data;
}

static void check_shape(const RTensor *r, int nd, const int64_t *dims)
{
	ck_assert_int_eq(r->ndim, nd);
	for (int i = 0; i < nd; i++)
		ck_assert_int_eq(r->dims[i], dims[i]);
}

static void near(const float *got, const double *want, int64_t n, double rtol, double atol)
{
	for (int64_t i = 0; i < n; i++)
		if (!(fabs(got[i] - want[i]) <= atol + rtol * fabs(want[i])))
			ck_abort_msg("element %lld: got %.9g, expected %.9g", (long long)i, got[i], want[i]);
}

static char tmpdir[256];

static const char *tmp(const char *name)
{
	static char buf[4][512];
	static int k;
	if (!tmpdir[0]) {
		snprintf(tmpdir, sizeof tmpdir, "/tmp/test_exec.XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	}
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
	return buf[k];
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(p, 1, n, f), n);
	fclose(f);
}

/* ---------------------------------------------------------------- I/O */

START_TEST(npy_roundtrip)
{
	Diag d = {0};
	RTensor t, r;
	int64_t dims[2] = {2, 3};
	rt_alloc(&t, DT_FLOAT, 2, dims);
	for (int i = 0; i < 6; i++)
		((float *)t.data)[i] = (float)i - 2.5f;
	ck_assert_int_eq(npy_write(tmp("a.npy"), &t, &d), WL_OK);
	ck_assert_int_eq(npy_read(tmp("a.npy"), &r, &d), WL_OK);
	ck_assert_int_eq(r.dtype, DT_FLOAT);
	check_shape(&r, 2, dims);
	ck_assert_mem_eq(r.data, t.data, 24);
	rt_free(&r);
	rt_free(&t);
	/* header: padded to 64 bytes, v1, shape "(2, 3)" */
	FILE *f = fopen(tmp("a.npy"), "rb");
	unsigned char h[256];
	ck_assert_uint_eq(fread(h, 1, 256, f), 128 + 24);      /* the 59-byte dict pads to 128 */
	fclose(f);
	ck_assert_int_eq(h[6], 1);
	ck_assert_int_eq(h[8] | h[9] << 8, 128 - 10);
	ck_assert(memmem(h, 128, "'shape': (2, 3)", 15) != NULL);
	ck_assert_int_eq(h[127], '\n');

	const int dts[] = {DT_FLOAT16, DT_INT64, DT_INT32, DT_INT8, DT_UINT8, DT_BOOL};
	int64_t one = 5;
	for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
		rt_alloc(&t, dts[k], 1, &one);
		for (size_t i = 0; i < t.nbytes; i++)
			((uint8_t *)t.data)[i] = dts[k] == DT_BOOL ? (uint8_t)(i & 1) : (uint8_t)(i * 7 + 1);
		ck_assert_int_eq(npy_write(tmp("b.npy"), &t, &d), WL_OK);
		ck_assert_int_eq(npy_read(tmp("b.npy"), &r, &d), WL_OK);
		ck_assert_int_eq(r.dtype, dts[k]);
		ck_assert_int_eq(r.ndim, 1);
		ck_assert_int_eq(r.dims[0], 5);
		ck_assert_mem_eq(r.data, t.data, t.nbytes);
		rt_free(&r);
		rt_free(&t);
	}
	/* scalar */
	rt_alloc(&t, DT_INT64, 0, NULL);
	*(int64_t *)t.data = -7;
	ck_assert_int_eq(npy_write(tmp("s.npy"), &t, &d), WL_OK);
	ck_assert_int_eq(npy_read(tmp("s.npy"), &r, &d), WL_OK);
	ck_assert_int_eq(r.ndim, 0);
	ck_assert_int_eq(*(int64_t *)r.data, -7);
	rt_free(&r);
	rt_free(&t);
}
END_TEST

static void npy_raw(const char *path, int ver, const char *hdr, const void *data, size_t n)
{
	unsigned char buf[1024];
	size_t hl = strlen(hdr), off = ver == 1 ? 10 : 12;
	memcpy(buf, "\x93NUMPY", 6);
	buf[6] = (unsigned char)ver;
	buf[7] = 0;
	if (ver == 1) {
		buf[8] = (unsigned char)(hl & 0xff);
		buf[9] = (unsigned char)(hl >> 8);
	} else {
		buf[8] = (unsigned char)(hl & 0xff);
		buf[9] = (unsigned char)(hl >> 8);
		buf[10] = buf[11] = 0;
	}
	memcpy(buf + off, hdr, hl);
	memcpy(buf + off + hl, data, n);
	write_file(path, buf, off + hl + n);
}

START_TEST(npy_versions_and_errors)
{
	Diag d = {0};
	RTensor r;
	float v[3] = {1, 2, 3};
	npy_raw(tmp("v2.npy"), 2, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3,)}\n", v, 12);
	ck_assert_int_eq(npy_read(tmp("v2.npy"), &r, &d), WL_OK);
	ck_assert_int_eq(r.dims[0], 3);
	ck_assert(((float *)r.data)[2] == 3.0f);
	rt_free(&r);
	npy_raw(tmp("v3.npy"), 3, "{'shape': (1, 3), 'fortran_order': False, 'descr': '<f4'}\n", v, 12);
	ck_assert_int_eq(npy_read(tmp("v3.npy"), &r, &d), WL_OK);
	ck_assert_int_eq(r.ndim, 2);
	rt_free(&r);

	struct { const char *hdr; size_t n; const char *want; } bad[] = {
		{"{'descr': '<f4', 'fortran_order': True, 'shape': (3,)}\n", 12, "fortran"},
		{"{'descr': '>f4', 'fortran_order': False, 'shape': (3,)}\n", 12, "big-endian"},
		{"{'descr': '<c16', 'fortran_order': False, 'shape': (3,)}\n", 12, "unsupported dtype '<c16'"},
		{"{'descr': '<f8', 'fortran_order': False, 'shape': (3,)}\n", 12, "unsupported dtype '<f8'"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (4,)}\n", 12, "truncated"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}\n", 12, "after the array"},
		{"{'descr': '<f4', 'fortran_order': False}\n", 12, "shape"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		Diag e = {0};
		npy_raw(tmp("bad.npy"), 1, bad[i].hdr, v, bad[i].n);
		ck_assert_int_eq(npy_read(tmp("bad.npy"), &r, &e), WL_ERR);
		ck_assert_msg(strstr(e.msg, bad[i].want) && strstr(e.msg, "bad.npy") && !strchr(e.msg, '\n'),
		              "case %zu: %s", i, e.msg);
	}
	Diag e = {0};
	write_file(tmp("junk.npy"), "hello", 5);
	ck_assert_int_eq(npy_read(tmp("junk.npy"), &r, &e), WL_ERR);
	ck_assert(strstr(e.msg, "junk.npy") != NULL);
	Diag e2 = {0};
	ck_assert_int_eq(npy_read(tmp("missing.npy"), &r, &e2), WL_ERR);
	ck_assert(strstr(e2.msg, "missing.npy") != NULL);
	/* writing an unsupported dtype */
	RTensor t;
	int64_t two = 2;
	rt_alloc(&t, DT_DOUBLE, 1, &two);
	Diag e3 = {0};
	ck_assert_int_eq(npy_write(tmp("d.npy"), &t, &e3), WL_ERR);
	ck_assert(access(tmp("d.npy"), F_OK) != 0);
	rt_free(&t);
}
END_TEST

START_TEST(pb_tensor_files)
{
	Diag d = {0};
	Onnx__TensorProto tp;
	onnx__tensor_proto__init(&tp);
	int64_t dims[2] = {2, 2};
	float fd[4] = {1.5f, -2, 3, 4};
	tp.n_dims = 2;
	tp.dims = dims;
	tp.has_data_type = 1;
	tp.data_type = DT_FLOAT;
	tp.n_float_data = 4;
	tp.float_data = fd;
	uint8_t buf[256];
	size_t n = onnx__tensor_proto__pack(&tp, buf);
	write_file(tmp("t.pb"), buf, n);
	RTensor r;
	ck_assert_int_eq(pb_tensor_read(tmp("t.pb"), &r, &d), WL_OK);
	ck_assert_int_eq(r.dtype, DT_FLOAT);
	check_shape(&r, 2, dims);
	ck_assert_mem_eq(r.data, fd, 16);
	rt_free(&r);
	/* raw_data, int64 */
	onnx__tensor_proto__init(&tp);
	int64_t iv[3] = {7, -1, 1LL << 40}, d3 = 3;
	tp.n_dims = 1;
	tp.dims = &d3;
	tp.has_data_type = 1;
	tp.data_type = DT_INT64;
	tp.has_raw_data = 1;
	tp.raw_data.len = 24;
	tp.raw_data.data = (uint8_t *)iv;
	n = onnx__tensor_proto__pack(&tp, buf);
	write_file(tmp("i.pb"), buf, n);
	ck_assert_int_eq(pb_tensor_read(tmp("i.pb"), &r, &d), WL_OK);
	ck_assert_int_eq(r.dtype, DT_INT64);
	ck_assert_mem_eq(r.data, iv, 24);
	rt_free(&r);
	/* typed float16 in int32_data */
	onnx__tensor_proto__init(&tp);
	int32_t hv[2] = {0x3c00, 0xc000};
	int64_t d2 = 2;
	tp.n_dims = 1;
	tp.dims = &d2;
	tp.has_data_type = 1;
	tp.data_type = DT_FLOAT16;
	tp.n_int32_data = 2;
	tp.int32_data = hv;
	n = onnx__tensor_proto__pack(&tp, buf);
	write_file(tmp("h.pb"), buf, n);
	ck_assert_int_eq(pb_tensor_read(tmp("h.pb"), &r, &d), WL_OK);
	ck_assert_int_eq(((uint16_t *)r.data)[1], 0xc000);
	rt_free(&r);
	/* wrong count */
	tp.n_int32_data = 1;
	n = onnx__tensor_proto__pack(&tp, buf);
	write_file(tmp("bad.pb"), buf, n);
	Diag e = {0};
	ck_assert_int_eq(pb_tensor_read(tmp("bad.pb"), &r, &e), WL_ERR);
	ck_assert(strstr(e.msg, "bad.pb") != NULL);
	write_file(tmp("junk.pb"), "\xff\xff\xff\xff", 4);
	Diag e2 = {0};
	ck_assert_int_eq(pb_tensor_read(tmp("junk.pb"), &r, &e2), WL_ERR);
	ck_assert(strstr(e2.msg, "junk.pb") != NULL);
}
END_TEST

/* ---------------------------------------------------------------- float16 */

static float f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

START_TEST(half_rounding)
{
	/* hand-worked: binary16 has 10 mantissa bits, bias 15 */
	ck_assert_int_eq(rt_float_to_half(1.0f), 0x3c00);
	ck_assert_int_eq(rt_float_to_half(-2.0f), 0xc000);
	ck_assert_int_eq(rt_float_to_half(65504.0f), 0x7bff);          /* largest finite */
	ck_assert_int_eq(rt_float_to_half(65519.0f), 0x7bff);          /* below the tie */
	ck_assert_int_eq(rt_float_to_half(65520.0f), 0x7c00);          /* tie -> even = inf */
	ck_assert_int_eq(rt_float_to_half(1e6f), 0x7c00);
	ck_assert_int_eq(rt_float_to_half(1.0f + 0x1p-11f), 0x3c00);   /* tie -> even (down) */
	ck_assert_int_eq(rt_float_to_half(1.0f + 0x3p-11f), 0x3c02);   /* tie -> even (up) */
	ck_assert_int_eq(rt_float_to_half(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  /* above tie */
	ck_assert_int_eq(rt_float_to_half(0x1p-14f), 0x0400);          /* smallest normal */
	ck_assert_int_eq(rt_float_to_half(0x1p-24f), 0x0001);          /* smallest subnormal */
	ck_assert_int_eq(rt_float_to_half(0x1p-25f), 0x0000);          /* tie with 0 -> even */
	ck_assert_int_eq(rt_float_to_half(0x3p-25f), 0x0002);          /* 1.5 ulp -> even 2 */
	ck_assert_int_eq(rt_float_to_half(0x1.8p-25f), 0x0001);        /* 0.75 ulp -> 1 */
	ck_assert_int_eq(rt_float_to_half(0x1.ffcp-15f), 0x0400);      /* rounds up into the normals */
	ck_assert_int_eq(rt_float_to_half(-0.0f), 0x8000);
	ck_assert_int_eq(rt_float_to_half(INFINITY), 0x7c00);
	uint16_t nan = rt_float_to_half(NAN);
	ck_assert((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff) != 0);
	ck_assert(rt_half_to_float(0x0001) == 0x1p-24f);
	ck_assert(rt_half_to_float(0x03ff) == 0x3ffp-24f);
	ck_assert(rt_half_to_float(0x7bff) == 65504.0f);
	ck_assert(rt_half_to_float(0x3555) == f32(0x3eaaa000));        /* 0.333251953125 */
	ck_assert(isinf(rt_half_to_float(0xfc00)) && rt_half_to_float(0xfc00) < 0);
	/* every half survives the round trip */
	for (uint32_t h = 0; h < 0x10000; h++) {
		if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
			continue;
		ck_assert_int_eq(rt_float_to_half(rt_half_to_float((uint16_t)h)), h);
	}
}
END_TEST

START_TEST(half_elementwise)
{
	/* Add in float16: 1 + 2^-11 is a tie -> 1 (even); (1+2^-10) + 2^-11 is a
	 * tie between 0x3c01 and 0x3c02 -> 0x3c02 (even).
	 * Mul: 3 * 0x3555 (0.333251953125) = 1 - 2^-12, a tie between 0x3bff and
	 * 0x3c00 -> 0x3c00 (even); 5 * (1 + 2^-10) = 5 + 1.25 ulp -> 0x4501. */
	uint16_t a[4] = {0x3c00, 0x3c01, 0x4200, 0x4500}, b[4] = {0x1000, 0x1000, 0x3555, 0x3c01};
	int64_t n3 = 3, n4 = 4;
	TB *t = tb_new("Add", "", 17);
	tb_in(t, "a", DT_FLOAT16, 1, &n3, a);
	tb_in(t, "b", DT_FLOAT16, 1, &n3, b);
	tb_out(t, "y");
	Exec *e = tb_run(t, 1);
	const uint16_t *y = exec_output(e, 0)->data;
	ck_assert_int_eq(exec_output(e, 0)->dtype, DT_FLOAT16);
	ck_assert_int_eq(y[0], 0x3c00);
	ck_assert_int_eq(y[1], 0x3c02);
	tb_free(t, e);
	t = tb_new("Mul", "", 17);
	tb_in(t, "a", DT_FLOAT16, 1, &n4, a);
	tb_in(t, "b", DT_FLOAT16, 1, &n4, b);
	tb_out(t, "y");
	e = tb_run(t, 1);
	y = exec_output(e, 0)->data;
	ck_assert_int_eq(y[2], 0x3c00);
	ck_assert_int_eq(y[3], 0x4501);
	tb_free(t, e);
	/* Cast float -> float16 rounds to nearest even */
	float f[3] = {1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 70000.0f};
	t = tb_new("Cast", "", 17);
	tb_in(t, "x", DT_FLOAT, 1, &n3, f);
	tb_int(t, "to", DT_FLOAT16);
	tb_out(t, "y");
	e = tb_run(t, 1);
	y = exec_output(e, 0)->data;
	ck_assert_int_eq(y[0], 0x3c00);
	ck_assert_int_eq(y[1], 0x3c02);
	ck_assert_int_eq(y[2], 0x7c00);
	tb_free(t, e);
}
END_TEST

/* ---------------------------------------------------------------- elementwise */

START_TEST(broadcast_binary)
{
	/* [2,3,4] - [3,1] and [4] - [2,1,1]: expected by index arithmetic */
	float a[24], b[3], c[4], dd[2];
	for (int i = 0; i < 24; i++)
		a[i] = (float)i;
	for (int i = 0; i < 3; i++)
		b[i] = 100.0f * (float)(i + 1);
	for (int i = 0; i < 4; i++)
		c[i] = 0.5f * (float)i;
	dd[0] = 10;
	dd[1] = 20;
	int64_t da[3] = {2, 3, 4}, db[2] = {3, 1}, dc[1] = {4}, ddd[3] = {2, 1, 1};
	TB *t = tb_new("Sub", "", 17);
	tb_in(t, "a", DT_FLOAT, 3, da, a);
	tb_in(t, "b", DT_FLOAT, 2, db, b);
	tb_out(t, "y");
	Exec *e = tb_run(t, 2);
	check_shape(exec_output(e, 0), 3, da);
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 3; j++)
			for (int k = 0; k < 4; k++)
				ck_assert(outf(e, 0)[(i * 3 + j) * 4 + k] == a[(i * 3 + j) * 4 + k] - b[j]);
	tb_free(t, e);
	t = tb_new("Div", "", 17);
	tb_in(t, "c", DT_FLOAT, 1, dc, c);
	tb_in(t, "d", DT_FLOAT, 3, ddd, dd);
	tb_out(t, "y");
	e = tb_run(t, 1);
	int64_t want[3] = {2, 1, 4};
	check_shape(exec_output(e, 0), 3, want);
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 4; k++)
			ck_assert(outf(e, 0)[i * 4 + k] == c[k] / dd[i]);
	tb_free(t, e);
	/* Where with three broadcasts, Equal to bool */
	uint8_t cond[2] = {1, 0};
	float x[3] = {1, 2, 3}, y0 = -1;
	int64_t dcond[2] = {2, 1}, dx[1] = {3};
	t = tb_new("Where", "", 17);
	tb_in(t, "c", DT_BOOL, 2, dcond, cond);
	tb_in(t, "x", DT_FLOAT, 1, dx, x);
	tb_in(t, "y", DT_FLOAT, 0, NULL, &y0);
	tb_out(t, "o");
	e = tb_run(t, 1);
	const float want_w[6] = {1, 2, 3, -1, -1, -1};
	ck_assert_mem_eq(outf(e, 0), want_w, sizeof want_w);
	tb_free(t, e);
	/* bad broadcast names the tensor */
	int64_t d4[1] = {4}, d5[1] = {5};
	float z[5] = {0};
	t = tb_new("Add", "", 17);
	tb_in(t, "p", DT_FLOAT, 1, d4, z);
	tb_in(t, "q", DT_FLOAT, 1, d5, z);
	tb_out(t, "o");
	Diag d = {0};
	const char *msg = tb_fail(t, &d);
	ck_assert_msg(strstr(msg, "'q'") && strstr(msg, "n0") && strstr(msg, "broadcast"), "%s", msg);
	tb_free(t, NULL);
}
END_TEST

START_TEST(unary_and_ints)
{
	float x[6] = {-2, -0.5f, 0, 0.5f, 2, 30};
	int64_t d6 = 6;
	const char *ops[] = {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "Softplus", "Floor", "Ceil"};
	for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
		TB *t = tb_new(ops[o], "", 17);
		tb_in(t, "x", DT_FLOAT, 1, &d6, x);
		tb_out(t, "y");
		Exec *e = tb_run(t, 1);
		double want[6];
		for (int i = 0; i < 6; i++) {
			double v = x[i];
			switch (o) {
			case 0: want[i] = v > 0 ? v : 0; break;
			case 1: want[i] = 1 / (1 + exp(-v)); break;
			case 2: want[i] = tanh(v); break;
			case 3: want[i] = erf(v); break;
			case 4: want[i] = exp(v); break;
			case 5: want[i] = -v; break;
			case 6: want[i] = fabs(v); break;
			case 7: want[i] = log(1 + exp(v)); break;
			case 8: want[i] = floor(v); break;
			default: want[i] = ceil(v); break;
			}
		}
		near(outf(e, 0), want, 6, 1e-6, 1e-7);
		tb_free(t, e);
	}
	/* integer Div truncates, Mod follows the divisor's sign, Pow on ints */
	int32_t a[4] = {7, -7, 7, -7}, b[4] = {2, 2, -2, -2};
	int64_t d4 = 4;
	TB *t = tb_new("Div", "", 17);
	tb_in(t, "a", DT_INT32, 1, &d4, a);
	tb_in(t, "b", DT_INT32, 1, &d4, b);
	tb_out(t, "y");
	Exec *e = tb_run(t, 1);
	const int32_t wd[4] = {3, -3, -3, 3};
	ck_assert_mem_eq(exec_output(e, 0)->data, wd, 16);
	tb_free(t, e);
	t = tb_new("Mod", "", 17);
	tb_in(t, "a", DT_INT32, 1, &d4, a);
	tb_in(t, "b", DT_INT32, 1, &d4, b);
	tb_out(t, "y");
	e = tb_run(t, 1);
	const int32_t wm[4] = {1, 1, -1, -1};
	ck_assert_mem_eq(exec_output(e, 0)->data, wm, 16);
	tb_free(t, e);
	/* division by zero on ints does not trap */
	int32_t zero[4] = {0, 0, 0, 0};
	t = tb_new("Div", "", 17);
	tb_in(t, "a", DT_INT32, 1, &d4, a);
	tb_in(t, "b", DT_INT32, 1, &d4, zero);
	tb_out(t, "y");
	e = tb_run(t, 1);
	tb_free(t, e);
	/* Clip with min/max inputs (opset 13) and attributes (opset 6) */
	float lo = -1, hi = 1;
	t = tb_new("Clip", "", 13);
	tb_in(t, "x", DT_FLOAT, 1, &d6, x);
	tb_in(t, "lo", DT_FLOAT, 0, NULL, &lo);
	tb_in(t, "hi", DT_FLOAT, 0, NULL, &hi);
	tb_out(t, "y");
	e = tb_run(t, 1);
	const float wc[6] = {-1, -0.5f, 0, 0.5f, 1, 1};
	ck_assert_mem_eq(outf(e, 0), wc, 24);
	tb_free(t, e);
	t = tb_new("Clip", "", 6);
	tb_in(t, "x", DT_FLOAT, 1, &d6, x);
	tb_float(t, "min", 0);
	tb_out(t, "y");
	e = tb_run(t, 1);
	const float wc6[6] = {0, 0, 0, 0.5f, 2, 30};
	ck_assert_mem_eq(outf(e, 0), wc6, 24);
	tb_free(t, e);
	/* Max/Min variadic with broadcast; Cast float -> int64 truncates */
	float m1[2] = {1, 5}, m2 = 3;
	int64_t d2 = 2;
	t = tb_new("Max", "", 17);
	tb_in(t, "a", DT_FLOAT, 1, &d2, m1);
	tb_in(t, "b", DT_FLOAT, 0, NULL, &m2);
	tb_out(t, "y");
	e = tb_run(t, 1);
	ck_assert(outf(e, 0)[0] == 3 && outf(e, 0)[1] == 5);
	tb_free(t, e);
	t = tb_new("Cast", "", 17);
	tb_in(t, "x", DT_FLOAT, 1, &d6, x);
	tb_int(t, "to", DT_INT64);
	tb_out(t, "y");
	e = tb_run(t, 1);
	const int64_t wi[6] = {-2, 0, 0, 0, 2, 30};
	ck_assert_mem_eq(exec_output(e, 0)->data, wi, 48);
	tb_free(t, e);
}
END_TEST

/* ---------------------------------------------------------------- reductions */

START_TEST(reduce_softmax_axes)
{
	float x[24];
	for (int i = 0; i < 24; i++)
		x[i] = (float)((i * 7) % 11) - 5.0f;
	int64_t dx[3] = {2, 3, 4};
	/* ReduceMean over axes [-1] keepdims, opset 17 (attribute) */
	int64_t ax[1] = {-1};
	TB *t = tb_new("ReduceMean", "", 17);
	tb_in(t, "x", DT_FLOAT, 3, dx, x);
	tb_ints(t, "axes", 1, ax);
	tb_out(t, "y");
	Exec *e = tb_run(t, 1);
	int64_t wd[3] = {2, 3, 1};
	check_shape(exec_output(e, 0), 3, wd);
	double want[6];
	for (int r = 0; r < 6; r++)
		want[r] = (x[r * 4] + x[r * 4 + 1] + x[r * 4 + 2] + x[r * 4 + 3]) / 4.0;
	near(outf(e, 0), want, 6, 0, 0);
	tb_free(t, e);
	/* ReduceSum opset 13, axes input [0, -2], keepdims 0 */
	int64_t axes2[2] = {0, -2}, d2 = 2;
	t = tb_new("ReduceSum", "", 13);
	tb_in(t, "x", DT_FLOAT, 3, dx, x);
	tb_in(t, "axes", DT_INT64, 1, &d2, axes2);
	tb_int(t, "keepdims", 0);
	tb_out(t, "y");
	e = tb_run(t, 1);
	int64_t w4 = 4;
	check_shape(exec_output(e, 0), 1, &w4);
	double ws[4] = {0};
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 3; j++)
			for (int k = 0; k < 4; k++)
				ws[k] += x[(i * 3 + j) * 4 + k];
	near(outf(e, 0), ws, 4, 0, 0);
	tb_free(t, e);
	/* ReduceMax with no axes reduces everything */
	t = tb_new("ReduceMax", "", 17);
	tb_in(t, "x", DT_FLOAT, 3, dx, x);
	tb_int(t, "keepdims", 0);
	tb_out(t, "y");
	e = tb_run(t, 1);
	ck_assert_int_eq(exec_output(e, 0)->ndim, 0);
	ck_assert(outf(e, 0)[0] == 5.0f);
	tb_free(t, e);
	/* Softmax axis 1 (opset 13: that axis only) vs opset 11 (flatten from axis 1) */
	for (int opset = 11; opset <= 13; opset += 2) {
		t = tb_new("Softmax", "", opset);
		tb_in(t, "x", DT_FLOAT, 3, dx, x);
		tb_int(t, "axis", opset == 13 ? -2 : 1);
		tb_out(t, "y");
		e = tb_run(t, 2);
		double w[24];
		for (int b = 0; b < 2; b++) {
			if (opset == 13) {
				for (int k = 0; k < 4; k++) {
					double s = 0, m = -1e30;
					for (int j = 0; j < 3; j++)
						m = fmax(m, x[(b * 3 + j) * 4 + k]);
					for (int j = 0; j < 3; j++)
						s += exp(x[(b * 3 + j) * 4 + k] - m);
					for (int j = 0; j < 3; j++)
						w[(b * 3 + j) * 4 + k] = exp(x[(b * 3 + j) * 4 + k] - m) / s;
				}
			} else {
				double s = 0;
				for (int i = 0; i < 12; i++)
					s += exp(x[b * 12 + i]);
				for (int i = 0; i < 12; i++)
					w[b * 12 + i] = exp(x[b * 12 + i]) / s;
			}
		}
		near(outf(e, 0), w, 24, 1e-6, 1e-9);
		tb_free(t, e);
	}
	/* ArgMax axis -1, keepdims 0, first index on ties */
	float am[6] = {1, 3, 3, 0, -1, -1};
	int64_t dam[2] = {2, 3};
	t = tb_new("ArgMax", "", 17);
	tb_in(t, "x", DT_FLOAT, 2, dam, am);
	tb_int(t, "axis", -1);
	tb_int(t, "keepdims", 0);
	tb_out(t, "y");
	e = tb_run(t, 1);
	const int64_t wam[2] = {1, 0};
	ck_assert_mem_eq(exec_output(e, 0)->data, wam, 16);
	tb_free(t, e);
	/* CumSum exclusive reverse on axis 0 */
	int64_t axis0 = 0;
	t = tb_new("CumSum", "", 17);
	tb_in(t, "x", DT_FLOAT, 2, dam, am);
	tb_in(t, "a", DT_INT64, 0, NULL, &axis0);
	tb_int(t, "exclusive", 1);
	tb_int(t, "reverse", 1);
	tb_out(t, "y");
	e = tb_run(t, 1);
	const float wcs[6] = {0, -1, -1, 0, 0, 0};
	ck_assert_mem_eq(outf(e, 0), wcs, 24);
	tb_free(t, e);
}
END_TEST

/* ---------------------------------------------------------------- matmul family */

static void naive_mm(const float *a, const float *b, double *c, int64_t M, int64_t K, int64_t N)
{
	for (int64_t m = 0; m < M; m++)
		for (int64_t n = 0; n < N; n++) {
			double s = 0;
			for (int64_t k = 0; k < K; k++)
				s += (double)a[m * K + k] * b[k * N + n];
			c[m * N + n] = s;
		}
}

START_TEST(matmul_small_and_batched)
{
	/* hand: [[1,2,3],[4,5,6]] x [[1,0],[0,1],[1,1]] = [[4,5],[10,11]] */
	float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1};
	int64_t da[2] = {2, 3}, db[2] = {3, 2};
	TB *t = tb_new("MatMul", "", 17);
	tb_in(t, "a", DT_FLOAT, 2, da, a);
	tb_init(t, "b", DT_FLOAT, 2, db, b);
	tb_out(t, "y");
	Exec *e = tb_run(t, 1);
	const float want[4] = {4, 5, 10, 11};
	ck_assert_mem_eq(outf(e, 0), want, 16);
	tb_free(t, e);
	/* the same in float16 (integers are exact in binary16) */
	uint16_t ah[6], bh[6];
	for (int i = 0; i < 6; i++) {
		ah[i] = rt_float_to_half(a[i]);
		bh[i] = rt_float_to_half(b[i]);
	}
	t = tb_new("MatMul", "", 17);
	tb_in(t, "a", DT_FLOAT16, 2, da, ah);
	tb_in(t, "b", DT_FLOAT16, 2, db, bh);
	tb_out(t, "y");
	e = tb_run(t, 2);
	ck_assert_int_eq(exec_output(e, 0)->dtype, DT_FLOAT16);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(((uint16_t *)exec_output(e, 0)->data)[i], rt_float_to_half(want[i]));
	tb_free(t, e);
	/* batch broadcast: [2,1,5,7] x [3,7,6] -> [2,3,5,6]; and 1-D promotions */
	float A[70], B[126];
	fill(A, 70, 1);
	fill(B, 126, 1);
	int64_t dA[4] = {2, 1, 5, 7}, dB[3] = {3, 7, 6};
	t = tb_new("MatMul", "", 17);
	tb_in(t, "a", DT_FLOAT, 4, dA, A);
	tb_in(t, "b", DT_FLOAT, 3, dB, B);
	tb_out(t, "y");
	e = tb_run(t, 2);
	int64_t wd[4] = {2, 3, 5, 6};
	check_shape(exec_output(e, 0), 4, wd);
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 3; j++) {
			double c[30];
			naive_mm(A + i * 35, B + j * 42, c, 5, 7, 6);
			near(outf(e, 0) + (i * 3 + j) * 30, c, 30, 1e-5, 1e-6);
		}
	tb_free(t, e);
	int64_t d7 = 7;
	t = tb_new("MatMul", "", 17);
	tb_in(t, "a", DT_FLOAT, 1, &d7, A);
	tb_in(t, "b", DT_FLOAT, 3, dB, B);
	tb_out(t, "y");
	e = tb_run(t, 1);
	int64_t wv[2] = {3, 6};
	check_shape(exec_output(e, 0), 2, wv);
	for (int j = 0; j < 3; j++) {
		double c[6];
		naive_mm(A, B + j * 42, c, 1, 7, 6);
		near(outf(e, 0) + j * 6, c, 6, 1e-5, 1e-6);
	}
	tb_free(t, e);
}
END_TEST

START_TEST(matmul_blocked_edges)
{
	/* sizes that cut every tile edge: M, N not multiples of 8/32/256, K > 256 */
	int64_t sizes[][3] = {{300, 290, 97}, {1, 300, 70}, {2, 33, 513}, {9, 257, 31}};
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		int64_t M = sizes[s][0], K = sizes[s][1], N = sizes[s][2];
		float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
		double *C = malloc(sizeof(double) * (size_t)(M * N));
		fill(A, M * K, 1);
		fill(B, K * N, 1);
		naive_mm(A, B, C, M, K, N);
		int64_t da[2] = {M, K}, db[2] = {K, N};
		TB *t = tb_new("MatMul", "", 17);
		tb_in(t, "a", DT_FLOAT, 2, da, A);
		tb_init(t, "b", DT_FLOAT, 2, db, B);
		tb_out(t, "y");
		Exec *e = tb_run(t, 2);
		near(outf(e, 0), C, M * N, 1e-4, 1e-4);
		tb_free(t, e);
		free(A);
		free(B);
		free(C);
	}
}
END_TEST

START_TEST(gemm_variants)
{
	float A[12], B[20], C[5];
	fill(A, 12, 1);
	fill(B, 20, 1);
	fill(C, 5, 1);
	for (int ta = 0; ta < 2; ta++)
		for (int tbb = 0; tbb < 2; tbb++) {
			/* logical A [3,4], B [4,5] */
			int64_t da[2] = {ta ? 4 : 3, ta ? 3 : 4}, db[2] = {tbb ? 5 : 4, tbb ? 4 : 5}, dc[1] = {5};
			TB *t = tb_new("Gemm", "", 13);
			tb_in(t, "a", DT_FLOAT, 2, da, A);
			tb_in(t, "b", DT_FLOAT, 2, db, B);
			tb_in(t, "c", DT_FLOAT, 1, dc, C);
			tb_int(t, "transA", ta);
			tb_int(t, "transB", tbb);
			tb_float(t, "alpha", 0.5f);
			tb_float(t, "beta", 2.0f);
			tb_out(t, "y");
			Exec *e = tb_run(t, 1);
			double w[15];
			for (int m = 0; m < 3; m++)
				for (int n = 0; n < 5; n++) {
					double s = 0;
					for (int k = 0; k < 4; k++)
						s += (double)(ta ? A[k * 3 + m] : A[m * 4 + k]) * (tbb ? B[n * 4 + k] : B[k * 5 + n]);
					w[m * 5 + n] = 0.5 * s + 2.0 * C[n];
				}
			near(outf(e, 0), w, 15, 1e-5, 1e-6);
			tb_free(t, e);
		}
}
END_TEST

/* naive conv over one spatial layout (1-D or 2-D), explicit pads */
static void naive_conv(const float *x, const float *w, const float *bias, double *y, int sp, int64_t N, int64_t C,
                       const int64_t *in, int64_t M, const int64_t *k, int64_t G, const int64_t *st,
                       const int64_t *dl, const int64_t *pb, const int64_t *out)
{
	int64_t Cg = C / G, Mg = M / G;
	int64_t in1 = sp == 2 ? in[1] : 1, k1 = sp == 2 ? k[1] : 1, o1 = sp == 2 ? out[1] : 1;
	for (int64_t n = 0; n < N; n++)
		for (int64_t m = 0; m < M; m++)
			for (int64_t a = 0; a < out[0]; a++)
				for (int64_t b = 0; b < o1; b++) {
					double s = bias ? bias[m] : 0;
					int64_t g = m / Mg;
					for (int64_t c = 0; c < Cg; c++)
						for (int64_t i = 0; i < k[0]; i++)
							for (int64_t j = 0; j < k1; j++) {
								int64_t p = a * st[0] + i * dl[0] - pb[0];
								int64_t q = sp == 2 ? b * st[1] + j * dl[1] - pb[1] : 0;
								if (p < 0 || p >= in[0] || q < 0 || q >= in1)
									continue;
								s += (double)x[((n * C + g * Cg + c) * in[0] + p) * in1 + q] *
								     w[((m * Cg + c) * k[0] + i) * k1 + j];
							}
					y[((n * M + m) * out[0] + a) * o1 + b] = s;
				}
}

START_TEST(conv_1d_2d)
{
	/* 1-D: [2,6,17] * [4,3,3] groups 2, stride 2, dilation 2, pads (1,2) */
	{
		int64_t N = 2, C = 6, L = 17, M = 4, K = 3, G = 2, st = 2, dl = 2, pb = 1, pe = 2;
		int64_t out = (L + pb + pe - ((K - 1) * dl + 1)) / st + 1;
		float x[2 * 6 * 17], w[4 * 3 * 3], b[4];
		fill(x, N * C * L, 1);
		fill(w, M * (C / G) * K, 1);
		fill(b, M, 1);
		int64_t dx[3] = {N, C, L}, dw[3] = {M, C / G, K}, dbb[1] = {M}, pads[2] = {pb, pe};
		TB *t = tb_new("Conv", "", 17);
		tb_in(t, "x", DT_FLOAT, 3, dx, x);
		tb_init(t, "w", DT_FLOAT, 3, dw, w);
		tb_init(t, "b", DT_FLOAT, 1, dbb, b);
		tb_int(t, "group", G);
		tb_ints(t, "strides", 1, &st);
		tb_ints(t, "dilations", 1, &dl);
		tb_ints(t, "pads", 2, pads);
		tb_out(t, "y");
		Exec *e = tb_run(t, 2);
		int64_t wd[3] = {N, M, out};
		check_shape(exec_output(e, 0), 3, wd);
		double y[2 * 4 * 16];
		int64_t L2[2] = {L, 1}, K2[2] = {K, 1}, st2[2] = {st, 1}, dl2[2] = {dl, 1}, pb2[2] = {pb, 0}, o2[2] = {out, 1};
		naive_conv(x, w, b, y, 1, N, C, L2, M, K2, G, st2, dl2, pb2, o2);
		near(outf(e, 0), y, N * M * out, 1e-5, 1e-6);
		tb_free(t, e);
	}
	/* 2-D: [1,3,9,8] * [5,3,3,2], auto_pad SAME_UPPER, stride (2,1) */
	{
		int64_t N = 1, C = 3, in[2] = {9, 8}, M = 5, k[2] = {3, 2}, st[2] = {2, 1}, dl[2] = {1, 1};
		int64_t out[2] = {5, 8};   /* ceil(9/2), ceil(8/1) */
		/* total pad: (5-1)*2+3-9 = 2 -> (1,1); (8-1)*1+2-8 = 1 -> (0,1) */
		int64_t pb[2] = {1, 0};
		float x[3 * 9 * 8], w[5 * 3 * 3 * 2];
		fill(x, 216, 1);
		fill(w, 90, 1);
		int64_t dx[4] = {N, C, 9, 8}, dw[4] = {M, C, 3, 2};
		TB *t = tb_new("Conv", "", 17);
		tb_in(t, "x", DT_FLOAT, 4, dx, x);
		tb_init(t, "w", DT_FLOAT, 4, dw, w);
		tb_str(t, "auto_pad", "SAME_UPPER");
		tb_ints(t, "strides", 2, st);
		tb_out(t, "y");
		Exec *e = tb_run(t, 1);
		int64_t wd[4] = {1, 5, 5, 8};
		check_shape(exec_output(e, 0), 4, wd);
		double y[5 * 5 * 8];
		naive_conv(x, w, NULL, y, 2, N, C, in, M, k, 1, st, dl, pb, out);
		near(outf(e, 0), y, 200, 1e-5, 1e-6);
		tb_free(t, e);
	}
}
END_TEST

/* MatMulNBits against our own dequantization (low nibble first). */
static void nbits_case(int64_t M, int64_t K, int64_t N, int64_t block, bool zp, bool bias, int threads)
{
	int64_t kb = (K + block - 1) / block, blob = block / 2, zrow = (kb + 1) / 2;
	uint8_t *q = malloc((size_t)(N * kb * blob)), *z = malloc((size_t)(N * zrow));
	float *s = malloc(sizeof(float) * (size_t)(N * kb)), *A = malloc(sizeof(float) * (size_t)(M * K));
	float *bs = malloc(sizeof(float) * (size_t)N), *W = calloc((size_t)(K * N), sizeof(float));
	double *C = malloc(sizeof(double) * (size_t)(M * N));
	for (int64_t i = 0; i < N * kb * blob; i++)
		q[i] = (uint8_t)(urand() * 128 + 128);
	for (int64_t i = 0; i < N * zrow; i++)
		z[i] = (uint8_t)(urand() * 128 + 128);
	fill(s, N * kb, 0.1);
	fill(A, M * K, 1);
	fill(bs, N, 1);
	for (int64_t n = 0; n < N; n++)
		for (int64_t k = 0; k < K; k++) {
			int64_t b = k / block, r = k % block;
			uint8_t byte = q[(n * kb + b) * blob + r / 2];
			int v = (r % 2 == 0) ? (byte & 15) : (byte >> 4);
			uint8_t zb = z[n * zrow + b / 2];
			int zz = zp ? ((b % 2 == 0) ? (zb & 15) : (zb >> 4)) : 8;
			W[k * N + n] = (float)(v - zz) * s[n * kb + b];
		}
	naive_mm(A, W, C, M, K, N);
	if (bias)
		for (int64_t i = 0; i < M * N; i++)
			C[i] += bs[i % N];
	int64_t da[3] = {1, M, K}, dq[3] = {N, kb, blob}, dsc = N * kb, dz = N * zrow;
	TB *t = tb_new("MatMulNBits", "com.microsoft", 17);
	tb_in(t, "a", DT_FLOAT, 3, da, A);
	tb_init(t, "q", DT_UINT8, 3, dq, q);
	tb_init(t, "s", DT_FLOAT, 1, &dsc, s);
	if (zp)
		tb_init(t, "z", DT_UINT8, 1, &dz, z);
	else if (bias)
		tb_absent(t);
	if (bias) {
		tb_absent(t);
		tb_init(t, "bias", DT_FLOAT, 1, &N, bs);
	}
	tb_int(t, "K", K);
	tb_int(t, "N", N);
	tb_int(t, "bits", 4);
	tb_int(t, "block_size", block);
	tb_out(t, "y");
	Exec *e = tb_run(t, threads);
	int64_t wd[3] = {1, M, N};
	check_shape(exec_output(e, 0), 3, wd);
	near(outf(e, 0), C, M * N, 1e-4, 1e-5);
	tb_free(t, e);
	free(q);
	free(z);
	free(s);
	free(A);
	free(bs);
	free(W);
	free(C);
}

START_TEST(matmulnbits_vs_dequant)
{
	nbits_case(5, 96, 37, 32, true, false, 1);
	nbits_case(5, 80, 37, 32, false, true, 2);      /* K padded to a whole block */
	nbits_case(1, 256, 70, 16, true, true, 2);      /* GEMV path */
	nbits_case(2, 200, 33, 64, false, false, 1);
	nbits_case(40, 384, 65, 128, true, true, 2);
	nbits_case(17, 600, 40, 256, true, false, 2);   /* block > KC chunk edge */
}
END_TEST

/* ---------------------------------------------------------------- threads */

typedef struct PfCtx { int *hits; int tids[8]; int64_t n, grain; int small; } PfCtx;
static void pf_fn(void *ctx, int64_t b, int64_t e, int tid)
{
	PfCtx *p = ctx;
	/* guided claims shrink towards the end but never below the grain,
	 * except the last one */
	if (e - b < p->grain && e != p->n)
		__atomic_fetch_add(&p->small, 1, __ATOMIC_RELAXED);
	for (int64_t i = b; i < e; i++)
		__atomic_fetch_add(&p->hits[i], 1, __ATOMIC_RELAXED);
	if (tid >= 0 && tid < 8)
		__atomic_fetch_add(&p->tids[tid], 1, __ATOMIC_RELAXED);
}

START_TEST(thread_pool)
{
	/* every index exactly once, for several sizes, pools and grains */
	for (int th = 1; th <= 3; th++) {
		ThreadPool *p = threadpool_new(th);
		ck_assert_int_eq(threadpool_threads(p), th);
		for (int64_t n = 0; n < 2000; n = n * 3 + 1) {
			PfCtx c = {calloc((size_t)n + 1, sizeof(int)), {0}, n, 1 + n % 7, 0};
			parallel_for(p, n, 1 + n % 7, pf_fn, &c);
			for (int64_t i = 0; i < n; i++)
				ck_assert_int_eq(c.hits[i], 1);
			ck_assert_int_eq(c.small, 0);
			int used = 0;
			for (int t = 0; t < 8; t++)
				used += c.tids[t] > 0;
			ck_assert(used <= th);
			free(c.hits);
		}
		threadpool_free(p);
	}
	PfCtx c = {calloc(10, sizeof(int)), {0}};
	parallel_for(NULL, 10, 1, pf_fn, &c);          /* no pool: inline */
	ck_assert_int_eq(c.hits[9], 1);
	free(c.hits);
}
END_TEST

/* shared pools: one per thread count, alive until the last holder frees
 * it; two threads running jobs on one shared pool at once both finish with
 * every index visited once (the second runs inline) */
typedef struct SharedJob { ThreadPool *p; int rc; } SharedJob;
static void *shared_job(void *arg)
{
	SharedJob *j = arg;
	for (int r = 0; r < 200; r++) {
		PfCtx c = {calloc(1000, sizeof(int)), {0}};
		parallel_for(j->p, 1000, 1, pf_fn, &c);
		for (int i = 0; i < 1000; i++)
			if (c.hits[i] != 1)
				j->rc = 1;
		free(c.hits);
	}
	return NULL;
}

START_TEST(thread_pool_shared)
{
	ThreadPool *a = threadpool_shared(2), *b = threadpool_shared(2), *c = threadpool_shared(3);
	ck_assert_ptr_eq(a, b);
	ck_assert_ptr_ne(a, c);
	ck_assert_int_eq(threadpool_threads(a), 2);
	ck_assert_int_eq(threadpool_threads(c), 3);
	threadpool_free(b);                    /* a still holds it */
	SharedJob j1 = {a, 0}, j2 = {a, 0};
	pthread_t t1, t2;
	ck_assert_int_eq(pthread_create(&t1, NULL, shared_job, &j1), 0);
	ck_assert_int_eq(pthread_create(&t2, NULL, shared_job, &j2), 0);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	ck_assert_int_eq(j1.rc, 0);
	ck_assert_int_eq(j2.rc, 0);
	ThreadPool *priv = threadpool_new(2);  /* threadpool_new: never shared */
	ck_assert_ptr_ne(priv, a);
	threadpool_free(priv);
	threadpool_free(a);
	threadpool_free(c);
	ThreadPool *d = threadpool_shared(2);  /* a new pool once all are freed */
	ck_assert_int_eq(threadpool_threads(d), 2);
	threadpool_free(d);
}
END_TEST

static bool same_bits(TB *t)
{
	Exec *e1 = tb_run(t, 1);
	RTensor r1 = *exec_output(e1, 0);
	void *copy = malloc(r1.nbytes);
	memcpy(copy, r1.data, r1.nbytes);
	exec_free(e1);
	Exec *e2 = tb_run(t, 2);
	bool same = exec_output(e2, 0)->nbytes == r1.nbytes && memcmp(copy, exec_output(e2, 0)->data, r1.nbytes) == 0;
	exec_free(e2);
	free(copy);
	return same;
}

START_TEST(threads_bit_identical)
{
	int64_t M = 333, K = 300, N = 520;
	float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
	fill(A, M * K, 1);
	fill(B, K * N, 1);
	int64_t da[2] = {M, K}, db[2] = {K, N};
	TB *t = tb_new("MatMul", "", 17);
	tb_in(t, "a", DT_FLOAT, 2, da, A);
	tb_init(t, "b", DT_FLOAT, 2, db, B);
	tb_out(t, "y");
	ck_assert(same_bits(t));
	module_free(t->m);
	free(t);
	/* Conv 1-D like Whisper's stem, smaller */
	int64_t dx[3] = {1, 80, 300}, dw[3] = {64, 80, 3}, pad[2] = {1, 1};
	float *w = malloc(sizeof(float) * 64 * 80 * 3);
	fill(w, 64 * 80 * 3, 0.1);
	t = tb_new("Conv", "", 17);
	tb_in(t, "x", DT_FLOAT, 3, dx, A);
	tb_init(t, "w", DT_FLOAT, 3, dw, w);
	tb_ints(t, "pads", 2, pad);
	tb_out(t, "y");
	ck_assert(same_bits(t));
	module_free(t->m);
	free(t);
	/* MatMulNBits, tiled path (M = 333) and GEMV path (M = 1) */
	for (int gm = 0; gm < 2; gm++) {
		int64_t K2 = 256, N2 = 300, kb = K2 / 32;
		uint8_t *q = malloc((size_t)(N2 * kb * 16));
		float *sc = malloc(sizeof(float) * (size_t)(N2 * kb));
		for (int64_t i = 0; i < N2 * kb * 16; i++)
			q[i] = (uint8_t)(i * 37 + 11);
		fill(sc, N2 * kb, 0.1);
		int64_t dA[2] = {gm ? 1 : 333, K2}, dq[3] = {N2, kb, 16}, dsc = N2 * kb;
		t = tb_new("MatMulNBits", "com.microsoft", 17);
		tb_in(t, "a", DT_FLOAT, 2, dA, A);
		tb_init(t, "q", DT_UINT8, 3, dq, q);
		tb_init(t, "s", DT_FLOAT, 1, &dsc, sc);
		tb_int(t, "K", K2);
		tb_int(t, "N", N2);
		tb_int(t, "block_size", 32);
		tb_out(t, "y");
		ck_assert(same_bits(t));
		module_free(t->m);
		free(t);
		free(q);
		free(sc);
	}
	/* Softmax and LayerNormalization over big rows */
	int64_t ds[2] = {300, 520};
	t = tb_new("Softmax", "", 17);
	tb_in(t, "x", DT_FLOAT, 2, ds, B);
	tb_out(t, "y");
	ck_assert(same_bits(t));
	module_free(t->m);
	free(t);
	int64_t dn = 520;
	t = tb_new("LayerNormalization", "", 17);
	tb_in(t, "x", DT_FLOAT, 2, ds, B);
	tb_init(t, "g", DT_FLOAT, 1, &dn, A);
	tb_init(t, "b", DT_FLOAT, 1, &dn, A + 520);
	tb_out(t, "y");
	ck_assert(same_bits(t));
	module_free(t->m);
	free(t);
	free(A);
	free(B);
	free(w);
}
END_TEST

/* ---------------------------------------------------------------- normalization */

START_TEST(layernorm_family)
{
	/* hand: x = [1,2,3,4]: mean 2.5, var 1.25 */
	float x[8] = {1, 2, 3, 4, 0, 0, 0, 8}, g[4] = {1, 2, 1, 1}, b[4] = {0, 0, 0, 1};
	int64_t dx[2] = {2, 4}, d4 = 4;
	TB *t = tb_new("LayerNormalization", "", 17);
	tb_in(t, "x", DT_FLOAT, 2, dx, x);
	tb_init(t, "g", DT_FLOAT, 1, &d4, g);
	tb_init(t, "b", DT_FLOAT, 1, &d4, b);
	tb_float(t, "epsilon", 0);
	tb_out(t, "y");
	tb_out(t, "mean");
	tb_out(t, "inv");
	Exec *e = tb_run(t, 1);
	double inv = 1 / sqrt(1.25), inv2 = 1 / sqrt(12.0);     /* row 2: mean 2, var (4+4+4+36)/4 = 12 */
	double want[8] = {-1.5 * inv, -0.5 * inv * 2, 0.5 * inv, 1.5 * inv + 1,
	                  -2 * inv2, -2 * inv2 * 2, -2 * inv2, 6 * inv2 + 1};
	near(outf(e, 0), want, 8, 1e-6, 1e-7);
	int64_t ws[2] = {2, 1};
	check_shape(exec_output(e, 1), 2, ws);
	ck_assert(outf(e, 1)[0] == 2.5f && outf(e, 1)[1] == 2.0f);
	near(outf(e, 2), (double[]){inv, inv2}, 2, 1e-6, 0);
	tb_free(t, e);
	/* SimplifiedLayerNormalization (RMS): x / sqrt(mean(x^2) + eps) * g */
	t = tb_new("SimplifiedLayerNormalization", "", 17);
	tb_in(t, "x", DT_FLOAT, 2, dx, x);
	tb_init(t, "g", DT_FLOAT, 1, &d4, g);
	tb_float(t, "epsilon", 0);
	tb_out(t, "y");
	e = tb_run(t, 1);
	double r1 = 1 / sqrt(30.0 / 4), r2 = 1 / sqrt(64.0 / 4);
	double wr[8] = {1 * r1, 4 * r1, 3 * r1, 4 * r1, 0, 0, 0, 8 * r2};
	near(outf(e, 0), wr, 8, 1e-6, 1e-7);
	tb_free(t, e);
	/* SkipLayerNormalization: (x + skip + bias) normalized; sum output */
	float skip[4] = {1, 1, 1, 1}, bias[4] = {-1, -1, -1, -1};
	t = tb_new("SkipLayerNormalization", "com.microsoft", 17);
	tb_in(t, "x", DT_FLOAT, 2, dx, x);
	tb_init(t, "skip", DT_FLOAT, 1, &d4, skip);
	tb_init(t, "g", DT_FLOAT, 1, &d4, g);
	tb_init(t, "b", DT_FLOAT, 1, &d4, b);
	tb_init(t, "bias", DT_FLOAT, 1, &d4, bias);
	tb_float(t, "epsilon", 0);
	tb_out(t, "y");
	tb_out(t, "mean");
	tb_out(t, "inv");
	tb_out(t, "sum");
	e = tb_run(t, 1);
	near(outf(e, 0), want, 8, 1e-6, 1e-7);     /* skip + bias cancel */
	ck_assert_mem_eq(outf(e, 3), x, 32);
	tb_free(t, e);
	/* Gelu (com.microsoft): 0.5 x (1 + erf(x / sqrt 2)) */
	float gx[3] = {-1, 0.5f, 3};
	int64_t d3 = 3;
	t = tb_new("Gelu", "com.microsoft", 17);
	tb_in(t, "x", DT_FLOAT, 1, &d3, gx);
	tb_out(t, "y");
	e = tb_run(t, 1);
	double wg[3];
	for (int i = 0; i < 3; i++)
		wg[i] = 0.5 * gx[i] * (1 + erf(gx[i] / sqrt(2.0)));
	near(outf(e, 0), wg, 3, 1e-6, 1e-7);
	tb_free(t, e);
}
END_TEST

/* ---------------------------------------------------------------- attention */

/* naive attention for one head: q [S,H], k/v [T,H]; allowed(s,t) */
static void naive_head(const float *q, int64_t qs, const float *k, int64_t ks, const float *v, int64_t vs, double *o,
                       int64_t os, int64_t S, int64_t T, int64_t H, double scale, int64_t past, bool causal)
{
	for (int64_t s = 0; s < S; s++) {
		double sc[64], m = -1e300, sum = 0;
		int64_t hi = causal ? past + s + 1 : T;
		for (int64_t t = 0; t < hi; t++) {
			double d = 0;
			for (int64_t x = 0; x < H; x++)
				d += (double)q[s * qs + x] * k[t * ks + x];
			sc[t] = d * scale;
			m = fmax(m, sc[t]);
		}
		for (int64_t t = 0; t < hi; t++)
			sum += exp(sc[t] - m);
		for (int64_t x = 0; x < H; x++) {
			double acc = 0;
			for (int64_t t = 0; t < hi; t++)
				acc += exp(sc[t] - m) / sum * v[t * vs + x];
			o[s * os + x] = acc;
		}
	}
}

static void naive_rot(const float *x, float *y, int64_t H, int64_t pos, const float *cs, const float *sn)
{
	int64_t h = H / 2;
	for (int64_t i = 0; i < h; i++) {
		float c = cs[pos * h + i], s = sn[pos * h + i];
		y[i] = x[i] * c - x[i + h] * s;
		y[i + h] = x[i + h] * c + x[i] * s;
	}
}

START_TEST(rotary_embedding)
{
	int64_t B = 1, S = 3, N = 2, H = 8, maxp = 10;
	float x[48], cs[40], sn[40];
	fill(x, 48, 1);
	for (int p = 0; p < maxp; p++)
		for (int i = 0; i < 4; i++) {
			double th = p * pow(10000, -2.0 * i / H);
			cs[p * 4 + i] = (float)cos(th);
			sn[p * 4 + i] = (float)sin(th);
		}
	int64_t pos[3] = {4, 5, 6}, dx[3] = {B, S, N * H}, dp[2] = {1, 3}, dc[2] = {maxp, 4};
	TB *t = tb_new("RotaryEmbedding", "com.microsoft", 17);
	tb_in(t, "x", DT_FLOAT, 3, dx, x);
	tb_in(t, "pos", DT_INT64, 2, dp, pos);
	tb_init(t, "cos", DT_FLOAT, 2, dc, cs);
	tb_init(t, "sin", DT_FLOAT, 2, dc, sn);
	tb_out(t, "y");
	Exec *e = tb_run(t, 1);
	for (int s = 0; s < S; s++)
		for (int n = 0; n < N; n++) {
			float y[8];
			naive_rot(x + s * 16 + n * 8, y, H, pos[s], cs, sn);
			ck_assert_mem_eq(outf(e, 0) + s * 16 + n * 8, y, 32);
		}
	tb_free(t, e);
}
END_TEST

START_TEST(group_query_attention)
{
	/* prompt (S = total = 4, no past), then one token with past 4 */
	int64_t N = 4, Nkv = 2, H = 16, S = 4, maxp = 16;
	float q[4 * 64], k[4 * 32], v[4 * 32], cs[16 * 8], sn[16 * 8];
	fill(q, 256, 1);
	fill(k, 128, 1);
	fill(v, 128, 1);
	for (int p = 0; p < maxp; p++)
		for (int i = 0; i < 8; i++) {
			cs[p * 8 + i] = (float)cos(p * 0.1 * (i + 1));
			sn[p * 8 + i] = (float)sin(p * 0.1 * (i + 1));
		}
	for (int rotary = 0; rotary < 2; rotary++) {
		int32_t seqlens = 3, total = 4;
		int64_t dq[3] = {1, S, N * H}, dk[3] = {1, S, Nkv * H}, one = 1, dc[2] = {maxp, 8};
		TB *t = tb_new("GroupQueryAttention", "com.microsoft", 17);
		tb_in(t, "q", DT_FLOAT, 3, dq, q);
		tb_in(t, "k", DT_FLOAT, 3, dk, k);
		tb_in(t, "v", DT_FLOAT, 3, dk, v);
		tb_absent(t);
		tb_absent(t);
		tb_in(t, "seqlens", DT_INT32, 1, &one, &seqlens);
		tb_in(t, "total", DT_INT32, 0, NULL, &total);
		if (rotary) {
			tb_init(t, "cos", DT_FLOAT, 2, dc, cs);
			tb_init(t, "sin", DT_FLOAT, 2, dc, sn);
			tb_int(t, "do_rotary", 1);
		}
		tb_int(t, "num_heads", N);
		tb_int(t, "kv_num_heads", Nkv);
		tb_out(t, "o");
		tb_out(t, "pk");
		tb_out(t, "pv");
		Exec *e = tb_run(t, 2);
		/* reference: rotate, then causal attention per head, kv head = n / 2 */
		float qr[256], kr[128];
		for (int s = 0; s < S; s++) {
			for (int n = 0; n < N; n++) {
				if (rotary)
					naive_rot(q + s * 64 + n * 16, qr + s * 64 + n * 16, H, s, cs, sn);
				else
					memcpy(qr + s * 64 + n * 16, q + s * 64 + n * 16, 64);
			}
			for (int n = 0; n < Nkv; n++) {
				if (rotary)
					naive_rot(k + s * 32 + n * 16, kr + s * 32 + n * 16, H, s, cs, sn);
				else
					memcpy(kr + s * 32 + n * 16, k + s * 32 + n * 16, 64);
			}
		}
		double o[256];
		for (int n = 0; n < N; n++)
			naive_head(qr + n * 16, 64, kr + (n / 2) * 16, 32, v + (n / 2) * 16, 32, o + n * 16, 64, S, S, H,
			           1 / sqrt(16.0), 0, true);
		near(outf(e, 0), o, 256, 1e-5, 1e-6);
		int64_t wp[4] = {1, Nkv, 4, H};
		check_shape(exec_output(e, 1), 4, wp);
		for (int n = 0; n < Nkv; n++)
			for (int s = 0; s < S; s++) {
				ck_assert_mem_eq(outf(e, 1) + (n * 4 + s) * 16, kr + s * 32 + n * 16, 64);
				ck_assert_mem_eq(outf(e, 2) + (n * 4 + s) * 16, v + s * 32 + n * 16, 64);
			}
		/* token step: past = the presents, one new token at position 4 */
		float pk[2 * 4 * 16], pv[2 * 4 * 16];
		memcpy(pk, outf(e, 1), sizeof pk);
		memcpy(pv, outf(e, 2), sizeof pv);
		tb_free(t, e);
		int32_t sl2 = 4, tot2 = 5;
		int64_t dq1[3] = {1, 1, N * H}, dk1[3] = {1, 1, Nkv * H}, dpast[4] = {1, Nkv, 4, H};
		t = tb_new("GroupQueryAttention", "com.microsoft", 17);
		tb_in(t, "q", DT_FLOAT, 3, dq1, q + 3 * 64);
		tb_in(t, "k", DT_FLOAT, 3, dk1, k + 3 * 32);
		tb_in(t, "v", DT_FLOAT, 3, dk1, v + 3 * 32);
		tb_in(t, "pk", DT_FLOAT, 4, dpast, pk);
		tb_in(t, "pv", DT_FLOAT, 4, dpast, pv);
		tb_in(t, "seqlens", DT_INT32, 1, &one, &sl2);
		tb_in(t, "total", DT_INT32, 0, NULL, &tot2);
		if (rotary) {
			tb_init(t, "cos", DT_FLOAT, 2, dc, cs);
			tb_init(t, "sin", DT_FLOAT, 2, dc, sn);
			tb_int(t, "do_rotary", 1);
		}
		tb_int(t, "num_heads", N);
		tb_int(t, "kv_num_heads", Nkv);
		tb_out(t, "o");
		tb_out(t, "pk2");
		tb_out(t, "pv2");
		e = tb_run(t, 1);
		float q1[64], kall[2 * 5 * 16], vall[2 * 5 * 16];
		for (int n = 0; n < N; n++) {
			if (rotary)
				naive_rot(q + 3 * 64 + n * 16, q1 + n * 16, H, 4, cs, sn);
			else
				memcpy(q1 + n * 16, q + 3 * 64 + n * 16, 64);
		}
		for (int n = 0; n < Nkv; n++) {
			memcpy(kall + n * 80, pk + n * 64, 256);
			memcpy(vall + n * 80, pv + n * 64, 256);
			if (rotary)
				naive_rot(k + 3 * 32 + n * 16, kall + n * 80 + 64, H, 4, cs, sn);
			else
				memcpy(kall + n * 80 + 64, k + 3 * 32 + n * 16, 64);
			memcpy(vall + n * 80 + 64, v + 3 * 32 + n * 16, 64);
		}
		double o1[64];
		for (int n = 0; n < N; n++)
			naive_head(q1 + n * 16, 64, kall + (n / 2) * 80, 16, vall + (n / 2) * 80, 16, o1 + n * 16, 64, 1, 5, H,
			           1 / sqrt(16.0), 4, true);
		near(outf(e, 0), o1, 64, 1e-5, 1e-6);
		ck_assert_mem_eq(outf(e, 1), kall, sizeof kall);
		tb_free(t, e);
	}
}
END_TEST

START_TEST(multi_head_attention)
{
	/* cross attention: q [1,3,2*8], k/v [1,5,16] with bias; then causal self with past */
	int64_t N = 2, H = 8, S = 3, L = 5;
	float q[48], k[80], v[80], bias[48];
	fill(q, 48, 1);
	fill(k, 80, 1);
	fill(v, 80, 1);
	fill(bias, 48, 0.5);
	int64_t dq[3] = {1, S, N * H}, dk[3] = {1, L, N * H}, db = 48;
	TB *t = tb_new("MultiHeadAttention", "com.microsoft", 17);
	tb_in(t, "q", DT_FLOAT, 3, dq, q);
	tb_in(t, "k", DT_FLOAT, 3, dk, k);
	tb_in(t, "v", DT_FLOAT, 3, dk, v);
	tb_init(t, "bias", DT_FLOAT, 1, &db, bias);
	tb_int(t, "num_heads", N);
	tb_out(t, "o");
	Exec *e = tb_run(t, 2);
	float qb[48], kb[80], vb[80];
	for (int i = 0; i < 48; i++)
		qb[i] = q[i] + bias[i % 16];
	for (int i = 0; i < 80; i++) {
		kb[i] = k[i] + bias[16 + i % 16];
		vb[i] = v[i] + bias[32 + i % 16];
	}
	double o[48];
	for (int n = 0; n < N; n++)
		naive_head(qb + n * 8, 16, kb + n * 8, 16, vb + n * 8, 16, o + n * 8, 16, S, L, H, 1 / sqrt(8.0), 0, false);
	near(outf(e, 0), o, 48, 1e-5, 1e-6);
	tb_free(t, e);
	/* unidirectional with past [1,2,2,8]: keys = past (2) + new (3) */
	float pk[32], pv[32];
	fill(pk, 32, 1);
	fill(pv, 32, 1);
	int64_t dk3[3] = {1, S, N * H}, dp[4] = {1, N, 2, H};
	t = tb_new("MultiHeadAttention", "com.microsoft", 17);
	tb_in(t, "q", DT_FLOAT, 3, dq, q);
	tb_in(t, "k", DT_FLOAT, 3, dk3, k);
	tb_in(t, "v", DT_FLOAT, 3, dk3, v);
	tb_absent(t);
	tb_absent(t);
	tb_absent(t);
	tb_in(t, "pk", DT_FLOAT, 4, dp, pk);
	tb_in(t, "pv", DT_FLOAT, 4, dp, pv);
	tb_int(t, "num_heads", N);
	tb_int(t, "unidirectional", 1);
	tb_out(t, "o");
	tb_out(t, "pko");
	tb_out(t, "pvo");
	e = tb_run(t, 1);
	float kall[2 * 5 * 8], vall[2 * 5 * 8];
	for (int n = 0; n < N; n++) {
		memcpy(kall + n * 40, pk + n * 16, 64);
		memcpy(vall + n * 40, pv + n * 16, 64);
		for (int s = 0; s < S; s++) {
			memcpy(kall + n * 40 + (2 + s) * 8, k + s * 16 + n * 8, 32);
			memcpy(vall + n * 40 + (2 + s) * 8, v + s * 16 + n * 8, 32);
		}
	}
	for (int n = 0; n < N; n++)
		naive_head(q + n * 8, 16, kall + n * 40, 8, vall + n * 40, 8, o + n * 8, 16, S, 5, H, 1 / sqrt(8.0), 2, true);
	near(outf(e, 0), o, 48, 1e-5, 1e-6);
	ck_assert_mem_eq(outf(e, 1), kall, sizeof kall);
	tb_free(t, e);
}
END_TEST

/* ---------------------------------------------------------------- shape ops */

START_TEST(shape_ops)
{
	float x[24];
	for (int i = 0; i < 24; i++)
		x[i] = (float)i;
	int64_t dx[3] = {2, 3, 4};
	/* Transpose perm (2,0,1) */
	int64_t perm[3] = {2, 0, 1};
	TB *t = tb_new("Transpose", "", 17);
	tb_in(t, "x", DT_FLOAT, 3, dx, x);
	tb_ints(t, "perm", 3, perm);
	tb_out(t, "y");
	Exec *e = tb_run(t, 1);
	for (int k = 0; k < 4; k++)
		for (int i = 0; i < 2; i++)
			for (int j = 0; j < 3; j++)
				ck_assert(outf(e, 0)[(k * 2 + i) * 3 + j] == x[(i * 3 + j) * 4 + k]);
	tb_free(t, e);
	/* Reshape with 0 and -1 */
	int64_t shp[2] = {0, -1}, d2 = 2;
	t = tb_new("Reshape", "", 17);
	tb_in(t, "x", DT_FLOAT, 3, dx, x);
	tb_init(t, "s", DT_INT64, 1, &d2, shp);
	tb_out(t, "y");
	e = tb_run(t, 1);
	int64_t wr[2] = {2, 12};
	check_shape(exec_output(e, 0), 2, wr);
	tb_free(t, e);
	/* Slice with negative start/end/step: x[:, -1:0:-2, :] along axis -2 */
	int64_t st = -1, en = 0, ax = -2, sp = -2, one = 1;
	t = tb_new("Slice", "", 17);
	tb_in(t, "x", DT_FLOAT, 3, dx, x);
	tb_init(t, "st", DT_INT64, 1, &one, &st);
	tb_init(t, "en", DT_INT64, 1, &one, &en);
	tb_init(t, "ax", DT_INT64, 1, &one, &ax);
	tb_init(t, "sp", DT_INT64, 1, &one, &sp);
	tb_out(t, "y");
	e = tb_run(t, 1);
	int64_t ws[3] = {2, 1, 4};
	check_shape(exec_output(e, 0), 3, ws);
	ck_assert(outf(e, 0)[0] == 8 && outf(e, 0)[4] == 20);
	tb_free(t, e);
	/* Gather axis -1 with a negative index */
	int64_t idx[2] = {-1, 0};
	t = tb_new("Gather", "", 17);
	tb_in(t, "x", DT_FLOAT, 3, dx, x);
	tb_init(t, "i", DT_INT64, 1, &d2, idx);
	tb_int(t, "axis", -1);
	tb_out(t, "y");
	e = tb_run(t, 1);
	int64_t wg[3] = {2, 3, 2};
	check_shape(exec_output(e, 0), 3, wg);
	ck_assert(outf(e, 0)[0] == 3 && outf(e, 0)[1] == 0 && outf(e, 0)[11] == 20);
	tb_free(t, e);
	/* Concat axis -1, Split opset 13 with sizes, Unsqueeze axes -1 */
	t = tb_new("Concat", "", 17);
	tb_in(t, "a", DT_FLOAT, 3, dx, x);
	tb_in(t, "b", DT_FLOAT, 3, dx, x);
	tb_int(t, "axis", -1);
	tb_out(t, "y");
	e = tb_run(t, 1);
	ck_assert(outf(e, 0)[4] == 0 && outf(e, 0)[8] == 4 && outf(e, 0)[15] == 7);
	tb_free(t, e);
	int64_t sizes[2] = {1, 3};
	t = tb_new("Split", "", 13);
	tb_in(t, "x", DT_FLOAT, 3, dx, x);
	tb_init(t, "s", DT_INT64, 1, &d2, sizes);
	tb_int(t, "axis", 2);
	tb_out(t, "y0");
	tb_out(t, "y1");
	e = tb_run(t, 1);
	ck_assert(outf(e, 1)[0] == 1 && outf(e, 1)[3] == 5 && outf(e, 0)[1] == 4);
	tb_free(t, e);
	int64_t uax = -1;
	t = tb_new("Unsqueeze", "", 13);
	tb_in(t, "x", DT_FLOAT, 3, dx, x);
	tb_init(t, "a", DT_INT64, 1, &one, &uax);
	tb_out(t, "y");
	e = tb_run(t, 1);
	int64_t wu[4] = {2, 3, 4, 1};
	check_shape(exec_output(e, 0), 4, wu);
	tb_free(t, e);
	/* Expand, Range, ConstantOfShape, Trilu, Shape */
	int64_t eshape[3] = {2, 1, 3}, d3 = 3;
	float ex[3] = {1, 2, 3};
	t = tb_new("Expand", "", 17);
	tb_in(t, "x", DT_FLOAT, 1, &d3, ex);
	tb_init(t, "s", DT_INT64, 1, &d3, eshape);
	tb_out(t, "y");
	e = tb_run(t, 1);
	check_shape(exec_output(e, 0), 3, eshape);
	ck_assert(outf(e, 0)[5] == 3);
	tb_free(t, e);
	int64_t r0 = 10, r1 = 1, rd = -3;
	t = tb_new("Range", "", 17);
	tb_in(t, "a", DT_INT64, 0, NULL, &r0);
	tb_in(t, "b", DT_INT64, 0, NULL, &r1);
	tb_in(t, "c", DT_INT64, 0, NULL, &rd);
	tb_out(t, "y");
	e = tb_run(t, 1);
	const int64_t wrg[3] = {10, 7, 4};
	ck_assert_int_eq(exec_output(e, 0)->dims[0], 3);
	ck_assert_mem_eq(exec_output(e, 0)->data, wrg, 24);
	tb_free(t, e);
	float tr[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	int64_t dtr[2] = {3, 3}, kk = -1;
	t = tb_new("Trilu", "", 17);
	tb_in(t, "x", DT_FLOAT, 2, dtr, tr);
	tb_init(t, "k", DT_INT64, 0, NULL, &kk);
	tb_int(t, "upper", 0);
	tb_out(t, "y");
	e = tb_run(t, 1);
	const float wtr[9] = {0, 0, 0, 4, 0, 0, 7, 8, 0};
	ck_assert_mem_eq(outf(e, 0), wtr, 36);
	tb_free(t, e);
	t = tb_new("Shape", "", 17);
	tb_in(t, "x", DT_FLOAT, 3, dx, x);
	tb_int(t, "start", -2);
	tb_out(t, "y");
	e = tb_run(t, 1);
	const int64_t wsh[2] = {3, 4};
	ck_assert_mem_eq(exec_output(e, 0)->data, wsh, 16);
	tb_free(t, e);
}
END_TEST

/* Shape -> Gather -> Concat -> Reshape with a symbolic dim: shapes that
 * depend on computed values, planned again when the input shape changes. */
static Module *dyn_model(void)
{
	Module *m = module_new("dyn.onnx");
	module_set_opset(m, "", 17);
	Graph *g = m->graph = graph_new(m, NULL, NULL, "g");
	Value *x = graph_value(g, "x");
	type_set_tensor(m->arena, &x->type, DT_FLOAT, 2, (int64_t[]){-1, 6});
	x->type.dims[0].kind = DIM_PARAM;
	x->type.dims[0].param = "n";
	graph_add_input(g, x);
	Node *sh = node_new(g, "Shape", "", "shape");
	node_add_input(sh, x);
	node_add_output(sh, graph_value(g, "s"));
	node_append(g, sh);
	Value *i0 = graph_value(g, "i0");
	Tensor *ti = tensor_new(m->arena, "i0", DT_INT64, 1, (int64_t[]){1});
	*(int64_t *)tensor_alloc_data(m->arena, ti) = 0;
	graph_set_init(g, i0, ti);
	Node *ga = node_new(g, "Gather", "", "gather");
	node_add_input(ga, graph_value(g, "s"));
	node_add_input(ga, i0);
	node_add_output(ga, graph_value(g, "n"));
	node_append(g, ga);
	Value *tail = graph_value(g, "tail");
	Tensor *tt = tensor_new(m->arena, "tail", DT_INT64, 1, (int64_t[]){2});
	int64_t *tp = tensor_alloc_data(m->arena, tt);
	tp[0] = 3;
	tp[1] = 2;
	graph_set_init(g, tail, tt);
	Node *cc = node_new(g, "Concat", "", "concat");
	node_add_input(cc, graph_value(g, "n"));
	node_add_input(cc, tail);
	node_add_output(cc, graph_value(g, "shape3"));
	node_add_attr(cc, "axis", AT_INT)->i = 0;
	node_append(g, cc);
	Node *rs = node_new(g, "Reshape", "", "reshape");
	node_add_input(rs, x);
	node_add_input(rs, graph_value(g, "shape3"));
	node_add_output(rs, graph_value(g, "r"));
	node_append(g, rs);
	Node *sm = node_new(g, "Softmax", "", "softmax");
	node_add_input(sm, graph_value(g, "r"));
	Value *y = graph_value(g, "y");
	node_add_output(sm, y);
	node_append(g, sm);
	graph_add_output(g, y);
	return m;
}

static int observed;
static void count_obs(void *ctx, const Value *v, const RTensor *t)
{
	(void)ctx;
	(void)v;
	observed += t->ndim >= 0;
}

START_TEST(planner_dynamic_shapes)
{
	Module *m = dyn_model();
	Exec *e;
	Diag d = {0};
	ck_assert_int_eq(exec_new(m, 2, &e, &d), WL_OK);
	exec_set_observer(e, count_obs, NULL);
	for (int round = 0; round < 3; round++) {
		int64_t n = round == 1 ? 5 : 2;
		float *x = malloc(sizeof(float) * (size_t)(n * 6));
		for (int64_t i = 0; i < n * 6; i++)
			x[i] = (float)i;
		RTensor in = {.dtype = DT_FLOAT, .ndim = 2, .dims = {n, 6}, .data = x, .nbytes = (size_t)(n * 24)};
		ck_assert_int_eq(exec_bind(e, "x", &in, &d), WL_OK);
		observed = 0;
		ck_assert_msg(exec_run(e, &d) == WL_OK, "%s", d.msg);
		ck_assert_int_eq(observed, 5);
		const RTensor *y = exec_output(e, 0);
		int64_t wd[3] = {n, 3, 2};
		check_shape(y, 3, wd);
		for (int64_t r = 0; r < n * 3; r++) {
			/* softmax of (a, a+1): 1/(1+e), e/(1+e) */
			ck_assert(fabsf(((float *)y->data)[2 * r] - (float)(1 / (1 + M_E))) < 1e-6f);
		}
		free(x);
	}
	ExecStats st;
	exec_stats(e, &st);
	ck_assert_int_eq(st.plans, 3);      /* n = 2, 5, 2 */
	ck_assert(st.arena_bytes > 0);
	/* same shape again: no new plan */
	float x2[12] = {0};
	RTensor in = {.dtype = DT_FLOAT, .ndim = 2, .dims = {2, 6}, .data = x2, .nbytes = 48};
	ck_assert_int_eq(exec_bind(e, "x", &in, &d), WL_OK);
	ck_assert_int_eq(exec_run(e, &d), WL_OK);
	exec_stats(e, &st);
	ck_assert_int_eq(st.plans, 3);
	exec_free(e);
	module_free(m);
}
END_TEST

START_TEST(misaligned_initializer)
{
	/* an initializer whose bytes are not 4-aligned (as in an mmapped file):
	 * kernels that read through ufloat/memcpy take it in place (Add); for a
	 * kernel that does not declare so (Dropout) it is copied once */
	ExecStats st;
	Exec *e;
	TB *t;
	for (int k = 0; k < 2; k++) {
		t = tb_new(k ? "Dropout" : "Add", "", 17);
		float x[5] = {1, 2, 3, 4, 5};
		int64_t d5 = 5;
		if (!k)
			tb_in(t, "x", DT_FLOAT, 1, &d5, x);
		Value *w = graph_value(t->g, "w");
		Tensor *ts = tensor_new(t->m->arena, "w", DT_FLOAT, 1, &d5);
		unsigned char *raw = arena_alloc(t->m->arena, 64);
		float wv[5] = {10, 20, 30, 40, 50};
		memcpy(raw + 1, wv, 20);
		ts->data = raw + 1;
		ts->nbytes = 20;
		graph_set_init(t->g, w, ts);
		node_add_input(t->n, w);
		tb_out(t, "y");
		e = tb_run(t, 1);
		const float want[5] = {11, 22, 33, 44, 55};
		ck_assert_mem_eq(outf(e, 0), k ? wv : want, 20);
		exec_stats(e, &st);
		ck_assert_uint_eq(st.copied_init_bytes, k ? 20 : 0);
		tb_free(t, e);
	}
	/* MatMul reads B in place at any address (ufloat / memcpy) */
	int64_t M = 3, K = 40, N = 37, db[2] = {K, N};
	float A[120], B[1480];
	double C[111];
	fill(A, 120, 1);
	fill(B, 1480, 1);
	naive_mm(A, B, C, M, K, N);
	for (int mm = 1; mm <= 2; mm++) {           /* M = 3: tiles; M = 1: GEMV */
		t = tb_new("MatMul", "", 17);
		int64_t dam[2] = {mm == 1 ? M : 1, K};
		tb_in(t, "a", DT_FLOAT, 2, dam, A);
		Value *bv = graph_value(t->g, "b");
		Tensor *bt = tensor_new(t->m->arena, "b", DT_FLOAT, 2, db);
		unsigned char *braw = arena_alloc(t->m->arena, sizeof B + 8);
		memcpy(braw + 3, B, sizeof B);
		bt->data = braw + 3;
		bt->nbytes = sizeof B;
		graph_set_init(t->g, bv, bt);
		node_add_input(t->n, bv);
		tb_out(t, "y");
		e = tb_run(t, 2);
		near(outf(e, 0), C, mm == 1 ? M * N : N, 1e-5, 1e-6);
		exec_stats(e, &st);
		ck_assert_uint_eq(st.copied_init_bytes, 0);
		tb_free(t, e);
	}
}
END_TEST

/* ---------------------------------------------------------------- errors */

START_TEST(errors)
{
	float x[6] = {0};
	int64_t d23[2] = {2, 3};
	/* unknown op: exec_new names the node */
	TB *t = tb_new("FancyOp", "ai.example", 17);
	tb_in(t, "x", DT_FLOAT, 2, d23, x);
	tb_out(t, "y");
	Exec *e = NULL;
	Diag d = {0};
	ck_assert_int_eq(exec_new(t->m, 1, &e, &d), WL_ERR);
	ck_assert_msg(strstr(d.msg, "t.onnx: node 'n0' (ai.example.FancyOp): no reference kernel for this op"), "%s", d.msg);
	tb_free(t, NULL);
	/* missing input, wrong dtype, wrong shape, unknown name */
	t = tb_new("Relu", "", 17);
	tb_in(t, "x", DT_FLOAT, 2, d23, x);
	tb_out(t, "y");
	ck_assert_int_eq(exec_new(t->m, 1, &e, &d), WL_OK);
	Diag d1 = {0};
	ck_assert_int_eq(exec_run(e, &d1), WL_ERR);
	ck_assert_msg(strstr(d1.msg, "input 'x' is missing"), "%s", d1.msg);
	int32_t xi[6] = {0};
	RTensor bad = {.dtype = DT_INT32, .ndim = 2, .dims = {2, 3}, .data = xi, .nbytes = 24};
	Diag d2 = {0};
	ck_assert_int_eq(exec_bind(e, "x", &bad, &d2), WL_ERR);
	ck_assert_msg(strstr(d2.msg, "input 'x': expected float32[2,3], got int32[2,3]"), "%s", d2.msg);
	RTensor bad2 = {.dtype = DT_FLOAT, .ndim = 2, .dims = {3, 2}, .data = x, .nbytes = 24};
	Diag d3 = {0};
	ck_assert_int_eq(exec_bind(e, "x", &bad2, &d3), WL_ERR);
	ck_assert_msg(strstr(d3.msg, "expected float32[2,3], got float32[3,2]"), "%s", d3.msg);
	Diag d4 = {0};
	ck_assert_int_eq(exec_bind(e, "nope", &bad2, &d4), WL_ERR);
	ck_assert_msg(strstr(d4.msg, "'nope'"), "%s", d4.msg);
	RTensor shortbuf = {.dtype = DT_FLOAT, .ndim = 2, .dims = {2, 3}, .data = x, .nbytes = 8};
	Diag d5 = {0};
	ck_assert_int_eq(exec_bind(e, "x", &shortbuf, &d5), WL_ERR);
	exec_free(e);
	tb_free(t, NULL);
	/* a kernel error names node and tensor: Reshape of 6 into 4 */
	int64_t shp[1] = {4}, one = 1;
	t = tb_new("Reshape", "", 17);
	tb_in(t, "x", DT_FLOAT, 2, d23, x);
	tb_init(t, "s", DT_INT64, 1, &one, shp);
	tb_out(t, "y");
	Diag d6 = {0};
	const char *msg = tb_fail(t, &d6);
	ck_assert_msg(strstr(msg, "node 'n0' (Reshape)") && strstr(msg, "'x'") && !strchr(msg, '\n'), "%s", msg);
	tb_free(t, NULL);
	/* Gather index out of range */
	int64_t idx = 7;
	t = tb_new("Gather", "", 17);
	tb_in(t, "x", DT_FLOAT, 2, d23, x);
	tb_in(t, "i", DT_INT64, 1, &one, &idx);
	tb_out(t, "y");
	Diag d7 = {0};
	msg = tb_fail(t, &d7);
	ck_assert_msg(strstr(msg, "'i' of node 'n0' (Gather): index 7 at [0] out of range [-2, 2)"), "%s", msg);
	tb_free(t, NULL);
	/* MatMulNBits with inconsistent weights */
	uint8_t q[8] = {0};
	float s[2] = {1, 1};
	int64_t dq = 8, ds = 2, da[2] = {1, 32};
	float a[32] = {0};
	t = tb_new("MatMulNBits", "com.microsoft", 17);
	tb_in(t, "a", DT_FLOAT, 2, da, a);
	tb_init(t, "q", DT_UINT8, 1, &dq, q);
	tb_init(t, "s", DT_FLOAT, 1, &ds, s);
	tb_int(t, "K", 32);
	tb_int(t, "N", 2);
	tb_int(t, "block_size", 32);
	tb_out(t, "y");
	Diag d8 = {0};
	msg = tb_fail(t, &d8);
	ck_assert_msg(strstr(msg, "'q'") && strstr(msg, "expected [2,1,16]"), "%s", msg);
	tb_free(t, NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("exec");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 300);
	check_add(tc, (const TTest *const[]){
		npy_roundtrip, npy_versions_and_errors, pb_tensor_files, half_rounding,
		half_elementwise, broadcast_binary, unary_and_ints, reduce_softmax_axes,
		matmul_small_and_batched, matmul_blocked_edges, gemm_variants, conv_1d_2d,
		matmulnbits_vs_dequant, thread_pool, thread_pool_shared, threads_bit_identical, layernorm_family,
		rotary_embedding, group_query_attention, multi_head_attention, shape_ops,
		planner_dynamic_shapes, misaligned_initializer, errors, NULL
	});
	return check_run(s, tc);
}
