/* exec_node_tests.c — runs the ONNX backend node tests (Debian's
 * libonnx-testdata) through the reference executor.
 *
 *   exec_node_tests [--data DIR] [--threads N] [--verbose] [SUBSTRING...]
 *
 * For every folder under DIR (default /usr/share/libonnx-testdata/data/node)
 * whose ops all have a reference kernel: import model.onnx, bind
 * test_data_set_N/input_I.pb to the graph inputs in order, run, and compare
 * with output_N.pb: floats within atol 1e-5 + rtol 1e-4 (float16/bfloat16:
 * rtol 1e-3, their precision), NaN where NaN is expected; integers and bools
 * exactly. Folders with an op that has no kernel are "unsupported".
 * Prints `exec-node-tests: N passed, M failed (K unsupported)` and the
 * failures, and exits non-zero when fewer than 95% of the supported tests
 * whose ops are all in the list pass.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "runtime/interp/interp.h"
#include "runtime/interp/ref.h"

/* The ops issue 3 lists (plus the cheap extras it names). */
static const char *const listed[] = {
	"Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Erf", "Tanh", "Sigmoid", "Neg", "Exp", "Log", "Cos", "Sin",
	"Max", "Min", "Clip", "Relu", "ReduceMean", "ReduceSum", "ReduceMax", "Softmax", "MatMul", "Gemm",
	"Conv", "Transpose", "Reshape", "Gather", "Concat", "Slice", "Split", "Unsqueeze", "Squeeze", "Shape",
	"Cast", "Where", "Expand", "Equal", "Trilu", "LayerNormalization", "Range", "ConstantOfShape",
	"Identity", "ArgMax", "Less", "Greater", "Not", "And", "Or", "Abs", "Floor", "Ceil", "Reciprocal",
	"Softplus", "LeakyRelu", "Flatten", "Tile", "CumSum", "Constant", "Dropout",
};

static bool is_listed(const char *op)
{
	for (size_t i = 0; i < sizeof listed / sizeof listed[0]; i++)
		if (!strcmp(listed[i], op))
			return true;
	return false;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

/* Compares one output; fills why on mismatch. */
static bool compare(const RTensor *got, const RTensor *want, char *why, size_t n)
{
	char b1[128], b2[128];
	if (got->dtype != want->dtype || got->ndim != want->ndim) {
		snprintf(why, n, "got %s, expected %s", rt_describe(got, b1, sizeof b1), rt_describe(want, b2, sizeof b2));
		return false;
	}
	for (int i = 0; i < got->ndim; i++)
		if (got->dims[i] != want->dims[i]) {
			snprintf(why, n, "got %s, expected %s", rt_describe(got, b1, sizeof b1),
			         rt_describe(want, b2, sizeof b2));
			return false;
		}
	int64_t cnt = rt_numel(want);
	int dt = want->dtype;
	double rtol = (dt == DT_FLOAT16 || dt == DT_BFLOAT16) ? 1e-3 : 1e-4, atol = 1e-5;
	for (int64_t i = 0; i < cnt; i++) {
		if (dt_is_float(dt)) {
			double a = get_f64(got->data, dt, i), b = get_f64(want->data, dt, i);
			if (b != b) {
				if (a == a) {
					snprintf(why, n, "element %lld: got %.9g, expected NaN", (long long)i, a);
					return false;
				}
				continue;
			}
			if (isinf(b) && a == b)
				continue;
			if (!(fabs(a - b) <= atol + rtol * fabs(b))) {
				snprintf(why, n, "element %lld: got %.9g, expected %.9g", (long long)i, a, b);
				return false;
			}
		} else {
			uint64_t a = get_u64(got->data, dt, i), b = get_u64(want->data, dt, i);
			if (a != b) {
				snprintf(why, n, "element %lld: got %lld, expected %lld", (long long)i, (long long)a, (long long)b);
				return false;
			}
		}
	}
	return true;
}

typedef struct Result { char *name; char *msg; bool listed; } Result;

/* Returns 1 pass, 0 fail, -1 unsupported. */
static int run_test(const char *dir, const char *name, int threads, bool *all_listed, char *msg, size_t msgn)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name);
	Module *m = NULL;
	Diag d = {0};
	*all_listed = true;
	if (onnx_import_file(path, &m, &d) != WL_OK) {
		snprintf(msg, msgn, "import: %s", d.msg);
		return -1;
	}
	bool supported = true;
	FOR_NODES(m->graph, nd) {
		if (!interp_op_supported(nd->op)) {
			supported = false;
			snprintf(msg, msgn, "no kernel for %s", nd->op_type);
		}
		if (!domain_is_default(nd->domain) || !is_listed(nd->op_type))
			*all_listed = false;
	}
	/* sequence, optional and map values are outside the executor */
	Graph *g = m->graph;
	for (int i = 0; i < g->ninputs + g->noutputs; i++) {
		Value *v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
		if (v && v->type.kind != TY_NONE && v->type.kind != TY_TENSOR) {
			supported = false;
			snprintf(msg, msgn, "value '%s' is not a tensor", v->name);
		}
	}
	if (!supported) {
		module_free(m);
		return -1;
	}
	Exec *e = NULL;
	int ok = 0;
	if (exec_new(m, threads, &e, &d) != WL_OK) {
		snprintf(msg, msgn, "%s", d.msg);
		module_free(m);
		return 0;
	}
	int sets = 0;
	for (int s = 0;; s++) {
		char sd[4096];
		snprintf(sd, sizeof sd, "%s/%s/test_data_set_%d", dir, name, s);
		if (!exists(sd))
			break;
		sets++;
		int nin = exec_input_count(e);
		RTensor *ins = calloc((size_t)nin + 1, sizeof *ins);
		bool good = true;
		for (int i = 0; i < nin && good; i++) {
			char ip[4200];
			snprintf(ip, sizeof ip, "%s/input_%d.pb", sd, i);
			if (pb_tensor_read(ip, &ins[i], &d) != WL_OK) {
				snprintf(msg, msgn, "%s", d.msg);
				good = false;
				break;
			}
			/* onnx 1.12 stores bfloat16 test data as uint16 (same bits) */
			const Value *gv = exec_input(e, i);
			if (ins[i].dtype == DT_UINT16 && gv->type.kind == TY_TENSOR && gv->type.elem == DT_BFLOAT16)
				ins[i].dtype = DT_BFLOAT16;
			if (exec_bind(e, gv->name, &ins[i], &d) != WL_OK) {
				snprintf(msg, msgn, "%s", d.msg);
				good = false;
			}
		}
		if (good && exec_run(e, &d) != WL_OK) {
			snprintf(msg, msgn, "%s", d.msg);
			good = false;
		}
		for (int o = 0; good && o < exec_output_count(e); o++) {
			char op[4200], why[512];
			snprintf(op, sizeof op, "%s/output_%d.pb", sd, o);
			RTensor want;
			if (pb_tensor_read(op, &want, &d) != WL_OK) {
				snprintf(msg, msgn, "%s", d.msg);
				good = false;
				break;
			}
			if (want.dtype == DT_UINT16 && exec_output(e, o)->dtype == DT_BFLOAT16)
				want.dtype = DT_BFLOAT16;
			if (!compare(exec_output(e, o), &want, why, sizeof why)) {
				snprintf(msg, msgn, "set %d output '%s': %s", s, exec_output_name(e, o), why);
				good = false;
			}
			rt_free(&want);
		}
		for (int i = 0; i < nin; i++)
			rt_free(&ins[i]);
		free(ins);
		if (!good) {
			ok = 0;
			goto done;
		}
	}
	ok = sets > 0;
	if (!sets)
		snprintf(msg, msgn, "no test_data_set_0");
done:
	exec_free(e);
	module_free(m);
	return ok;
}

int main(int argc, char **argv)
{
	const char *dir = "/usr/share/libonnx-testdata/data/node";
	int threads = 2;
	bool verbose = false;
	const char **filters = calloc((size_t)argc + 1, sizeof *filters);
	int nf = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--data") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v"))
			verbose = true;
		else
			filters[nf++] = argv[i];
	}
	DIR *dp = opendir(dir);
	if (!dp) {
		fprintf(stderr, "exec-node-tests: %s: cannot open\n", dir);
		return 1;
	}
	char **names = NULL;
	size_t nn = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(dp))) {
		if (strncmp(de->d_name, "test_", 5))
			continue;
		bool keep = nf == 0;
		for (int i = 0; i < nf; i++)
			if (strstr(de->d_name, filters[i]))
				keep = true;
		if (!keep)
			continue;
		if (nn == cap) {
			cap = cap ? 2 * cap : 256;
			names = realloc(names, cap * sizeof *names);
		}
		names[nn++] = strdup(de->d_name);
	}
	closedir(dp);
	qsort(names, nn, sizeof *names, cmp_str);
	int pass = 0, fail = 0, unsup = 0, lpass = 0, lfail = 0;
	Result *fails = calloc(nn + 1, sizeof *fails);
	int nfails = 0;
	for (size_t i = 0; i < nn; i++) {
		char msg[1200] = "";
		bool all_listed;
		int r = run_test(dir, names[i], threads, &all_listed, msg, sizeof msg);
		if (r < 0) {
			unsup++;
			if (verbose)
				printf("UNSUPPORTED %s: %s\n", names[i], msg);
		} else if (r > 0) {
			pass++;
			lpass += all_listed;
			if (verbose)
				printf("PASS %s\n", names[i]);
		} else {
			fail++;
			lfail += all_listed;
			fails[nfails].name = names[i];
			fails[nfails].msg = strdup(msg);
			fails[nfails++].listed = all_listed;
			if (verbose)
				printf("FAIL %s: %s\n", names[i], msg);
		}
	}
	printf("exec-node-tests: %d passed, %d failed (%d unsupported)\n", pass, fail, unsup);
	double rate = lpass + lfail ? 100.0 * lpass / (lpass + lfail) : 100.0;
	printf("exec-node-tests: tests using only the listed ops: %d passed, %d failed (%.1f%%)\n", lpass, lfail, rate);
	for (int i = 0; i < nfails; i++) {
		printf("  FAIL%s %s: %s\n", fails[i].listed ? "" : " (extra op)", fails[i].name, fails[i].msg);
		free(fails[i].msg);
	}
	for (size_t i = 0; i < nn; i++)
		free(names[i]);
	free(names);
	free(fails);
	free(filters);
	return rate >= 95.0 ? 0 : 1;
}
