/* cmd_run.c — `wlower run`: run a model with the float reference executor,
 * or a compiled host module directory with the runtime (wlower_rt.h).
 *
 *   wlower run MODEL --input NAME=FILE.npy ... --output-dir DIR [--threads N] [--reps N]
 *   wlower run MODDIR --input NAME=FILE.npy ... --output-dir DIR [--threads N] [--reps N]
 *
 * Reads MODEL (.onnx or .onnxtxt), binds every graph input from a .npy or an
 * ONNX TensorProto .pb file, runs once, and writes DIR/<output>.npy for every
 * graph output (each file written to a temporary name and renamed). With
 * --reps N it runs N more timed repetitions after that first (warm-up) run
 * and prints "median_ms=X" on stdout. Output file names are the output names
 * with every character outside [A-Za-z0-9._-] (and a leading '.') replaced
 * by '_' — the rule tests/oracle/ort_run.js follows too.
 *
 * MODDIR (a directory: `wlower MODEL --target host -o MODDIR`) is loaded with
 * wl_open and run the same way; inputs must match the manifest's dtypes and
 * shapes exactly. With WLOWER_PROFILE=1 in the environment and a module that
 * has per-kernel entry points, a per-kernel time table (averaged over the
 * timed runs, or the one run without --reps) goes to stderr.
 *
 * Errors are one line naming the file and the input. An unknown, missing,
 * mistyped or misshapen input is bad input (exit 1); a malformed command
 * line (no '=', missing value, unknown option) is a usage error (exit 2).
 *
 * Order: every input is read and checked (and its NaN/Inf counted: one note
 * per input), the output names are checked for clashes and OUT for being
 * replaceable, all before anything is created; then the outputs go to
 * OUT.tmp.XXXXXX, renamed to OUT on success and removed on failure or on a
 * signal (compiler/ir/fileutil.h OutputDir). An existing OUT is replaced only
 * when it is empty or a folder of outputs made by wlower (its
 * .wlower-outputs lists every file in it).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "compiler/driver/commands.h"
#include "runtime/interp/interp.h"
#include "runtime/rt/wlower_rt.h"

static const char CMD[] = "run";

static const char usage_run[] =
"usage: wlower run MODEL|DIR --input NAME=FILE.npy ... --output-dir OUT [--threads N] [--reps N]\n"
"\n"
"Runs MODEL (.onnx, or .onnxtxt textual syntax) with the float reference\n"
"executor, or DIR, a module directory compiled with 'wlower MODEL --target host\n"
"-o DIR', with the host runtime, and writes OUT/<output>.npy for every graph\n"
"output (characters outside [A-Za-z0-9._-] in an output name become '_').\n"
"\n"
"  --input NAME=FILE     value of graph input NAME: a .npy file (float32, float16,\n"
"                        int64, int32, int8, uint8, bool) or an ONNX TensorProto\n"
"                        .pb file; every graph input must be given once\n"
"  --output-dir OUT      folder for the outputs: written as OUT.tmp.XXXXXX and\n"
"                        renamed; an existing OUT is replaced only when empty or\n"
"                        made by wlower (its .wlower-outputs lists every file)\n"
"  --threads N           threads for the kernels (default: the online CPUs)\n"
"  --reps N              after one warm-up run, run N timed repetitions and\n"
"                        print median_ms=X on stdout\n"
"  --no-verify           DIR: skip the sha256 check of module.so and weights.bin\n"
"                        against the manifest (sizes are still checked)\n"
"  -h, --help            this help\n"
"\n"
"DIR: inputs must have the manifest's dtypes and shapes; WLOWER_PROFILE=1 in\n"
"the environment prints per-kernel times on stderr (if the module has them).\n"
"exit status: 0 success, 1 bad input (one line naming file and input), 2 usage error\n";

typedef struct RunInput {
	char *name;
	const char *file;
	RTensor t;
	bool loaded;
} RunInput;

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The output file name rule shared with tests/oracle/ort_run.js:
 * DIR/<name>.npy. */
static char *output_file_name(const char *dir, const char *name)
{
	size_t n = strlen(name);
	char *base = malloc(n + 5);
	if (!base)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		          c == '.' || c == '_' || c == '-';
		base[i] = ok && !(i == 0 && c == '.') ? c : '_';
	}
	memcpy(base + n, ".npy", 5);
	size_t len = strlen(dir) + 1 + n + 5;
	char *path = malloc(len);
	if (!path)
		wl_die(__FILE__, __LINE__, "out of memory");
	snprintf(path, len, "%s/%s", dir, base);
	free(base);
	return path;
}

static int load_tensor(const char *file, RTensor *t, Diag *d)
{
	if (str_ends_with(file, ".pb"))
		return pb_tensor_read(file, t, d);
	return npy_read(file, t, d);
}

/* "inputs: a, b, c" into buf */
static const char *input_list(const Exec *e, char *buf, size_t n)
{
	size_t k = 0;
	buf[0] = 0;
	for (int i = 0; i < exec_input_count(e) && k + 1 < n; i++) {
		int w = snprintf(buf + k, n - k, "%s%s", i ? ", " : "", exec_input(e, i)->name);
		if (w < 0)
			break;
		k += (size_t)w;
	}
	return buf;
}

typedef struct RunArgs {
	const char *model, *outdir;
	OptList inputs;
	RunInput *b; int nb;
	long threads, reps;
	bool no_verify;
} RunArgs;

static const OptSpec run_opts[] = {
	{"--input", NULL, OPT_LIST, offsetof(RunArgs, inputs)},
	{"--output-dir", NULL, OPT_STRING, offsetof(RunArgs, outdir)},
	{"--threads", NULL, OPT_INT, offsetof(RunArgs, threads), 1, 1024},
	{"--reps", NULL, OPT_INT, offsetof(RunArgs, reps), 0, 1000000},
	{"--no-verify", NULL, OPT_FLAG, offsetof(RunArgs, no_verify)},
	OPT_END,
};

static int parse_run_args(int argc, char **argv, RunArgs *a)
{
	int rc = opt_parse(CMD, run_opts, argc, argv, a, &a->model, "model", NULL);
	if (rc == CMD_OK)
		rc = CMD_BINDINGS(CMD, "--input", &a->inputs, "input '%s' given twice", &a->b);
	if (rc != CMD_OK)
		return rc;
	a->nb = a->inputs.n;
	if (!a->model)
		return cmd_usage(CMD, "no model given");
	if (!a->outdir)
		return cmd_usage(CMD, "no --output-dir given");
	return CMD_OK;
}

static void note_nonfinite(const RunInput *b)
{
	char note[512];
	if (rt_nonfinite_note(&b->t, b->name, b->file, note, sizeof note))
		fprintf(stderr, "wlower run: note: %s\n", note);
}

/* Binds every input; the one-line error names file and input. */
static int bind_inputs(Exec *e, RunArgs *a, Diag *d)
{
	char list[512];
	for (int k = 0; k < a->nb; k++) {
		RunInput *b = &a->b[k];
		bool known = false;
		for (int i = 0; i < exec_input_count(e); i++)
			known |= strcmp(exec_input(e, i)->name, b->name) == 0;
		if (!known)
			return diag_fail(d, "%s: input '%s' is not an input of %s (inputs: %s)", b->file, b->name,
			                 a->model, input_list(e, list, sizeof list));
		if (load_tensor(b->file, &b->t, d) != WL_OK) {
			diag_prefix(d, "input '%s': ", b->name);
			return WL_ERR;
		}
		b->loaded = true;
		note_nonfinite(b);
		if (exec_bind(e, b->name, &b->t, d) != WL_OK) {
			size_t l = strlen(d->msg);
			snprintf(d->msg + l, sizeof d->msg - l, " (%s)", b->file);
			return WL_ERR;
		}
	}
	for (int i = 0; i < exec_input_count(e); i++) {
		const Value *v = exec_input(e, i);
		bool given = false;
		for (int k = 0; k < a->nb; k++)
			given |= strcmp(a->b[k].name, v->name) == 0;
		if (!given) {
			char ty[256];
			return diag_fail(d, "%s: input '%s' (%s) not given: add --input %s=FILE.npy", a->model,
			                 v->name, cmd_describe_value(v, ty, sizeof ty), v->name);
		}
	}
	return WL_OK;
}

/* Two outputs that map to one file: an error before any work. */
static int check_output_names(const char *dir, int n, const char *const *names, Diag *d)
{
	char **paths = calloc((size_t)n + 1, sizeof *paths);
	if (!paths)
		wl_die(__FILE__, __LINE__, "out of memory");
	int rc = WL_OK;
	for (int i = 0; i < n && rc == WL_OK; i++) {
		paths[i] = output_file_name(dir, names[i]);
		for (int k = 0; k < i && rc == WL_OK; k++)
			if (strcmp(paths[k], paths[i]) == 0)
				rc = diag_fail(d, "outputs '%s' and '%s' both map to the file %s", names[k], names[i],
				               paths[i]);
	}
	for (int i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return rc;
}

/* Writes DIR/<names[i]>.npy for the n tensors. */
static int write_named_outputs(const char *dir, int n, const char *const *names, const RTensor *const *ts,
                               Diag *d)
{
	int rc = WL_OK;
	for (int i = 0; i < n && rc == WL_OK; i++) {
		char *path = output_file_name(dir, names[i]);
		if (npy_write(path, ts[i], d) != WL_OK) {
			diag_prefix(d, "output '%s': ", names[i]);
			rc = WL_ERR;
		}
		free(path);
	}
	return rc;
}

/* The graph's output names (malloc'ed array of borrowed strings). */
static const char **exec_output_names(const Exec *e)
{
	int n = exec_output_count(e);
	const char **names = calloc((size_t)n + 1, sizeof *names);
	if (!names)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < n; i++)
		names[i] = exec_output_name(e, i);
	return names;
}

static int write_outputs(Exec *e, const char *dir, Diag *d)
{
	int n = exec_output_count(e);
	const char **names = exec_output_names(e);
	const RTensor **ts = calloc((size_t)n + 1, sizeof *ts);
	if (!ts)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < n; i++)
		ts[i] = exec_output(e, i);
	int rc = write_named_outputs(dir, n, names, ts, d);
	free(names);
	free(ts);
	return rc;
}

/* Before any work: output names, then OUT (its temporary created last). */
static int begin_outputs(const char *outdir, int n, const char *const *names, OutputDir *od, Diag *d)
{
	if (check_output_names(outdir, n, names, d) != WL_OK)
		return WL_ERR;
	return output_dir_begin(od, outdir, d);
}

static int print_median(double *t, long reps, Diag *d)
{
	qsort(t, (size_t)reps, sizeof *t, cmp_double);
	double med = reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
	printf("median_ms=%.3f\n", med);
	return stdout_check(d);
}

/* ---------------------------------------------------------------- module directories */

static int cmp_prof(const void *a, const void *b)
{
	const double *x = a, *y = b;
	return (x[1] < y[1]) - (x[1] > y[1]);
}

/* The per-kernel table (WLOWER_PROFILE=1) on stderr: kernels by time, then
 * per op type (the "(Op)" suffix of kernel names). */
static void print_profile(WlModule *wm)
{
	int n = wl_profile_count(wm);
	long runs = wl_profile_runs(wm);
	if (n <= 0 || runs <= 0)
		return;
	double (*row)[2] = calloc((size_t)n, sizeof *row), total = 0;
	if (!row)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < n; i++) {
		double ms = 0;
		wl_profile_kernel(wm, i, NULL, &ms);
		row[i][0] = i;
		row[i][1] = ms / (double)runs;
		total += row[i][1];
	}
	qsort(row, (size_t)n, sizeof *row, cmp_prof);
	fprintf(stderr, "profile: %d kernels, %ld runs, %.3f ms per run in kernels\n", n, runs, total);
	/* per op type */
	const char **ops = calloc((size_t)n, sizeof *ops);
	double *opms = calloc((size_t)n, sizeof *opms);
	int *opcnt = calloc((size_t)n, sizeof *opcnt), nops = 0;
	size_t *oplen = calloc((size_t)n, sizeof *oplen);
	if (!ops || !opms || !opcnt || !oplen)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int r = 0; r < n; r++) {
		const char *name = "?";
		wl_profile_kernel(wm, (int)row[r][0], &name, NULL);
		const char *op = strrchr(name, '(');
		size_t len = op ? strcspn(op + 1, ")") : strlen(name);
		op = op ? op + 1 : name;
		int k = 0;
		while (k < nops && !(oplen[k] == len && !strncmp(ops[k], op, len)))
			k++;
		if (k == nops) {
			ops[k] = op;
			oplen[k] = len;
			nops++;
		}
		opms[k] += row[r][1];
		opcnt[k]++;
	}
	fprintf(stderr, "profile: by op type (ms per run, %% of kernel time)\n");
	for (int k = 0; k < nops; k++) {
		int best = k;
		for (int j = k + 1; j < nops; j++)
			if (opms[j] > opms[best])
				best = j;
		const char *to = ops[k]; ops[k] = ops[best]; ops[best] = to;
		size_t tl = oplen[k]; oplen[k] = oplen[best]; oplen[best] = tl;
		double tm = opms[k]; opms[k] = opms[best]; opms[best] = tm;
		int tc = opcnt[k]; opcnt[k] = opcnt[best]; opcnt[best] = tc;
		fprintf(stderr, "  %-28.*s %4d x %9.3f ms %5.1f%%\n", (int)oplen[k], ops[k], opcnt[k], opms[k],
		        total > 0 ? 100 * opms[k] / total : 0.0);
	}
	fprintf(stderr, "profile: kernels (ms per run, %% of kernel time)\n");
	for (int r = 0; r < n; r++) {
		const char *name = "?";
		wl_profile_kernel(wm, (int)row[r][0], &name, NULL);
		fprintf(stderr, "  %4d %9.3f ms %5.1f%%  %s\n", (int)row[r][0], row[r][1],
		        total > 0 ? 100 * row[r][1] / total : 0.0, name);
	}
	free(ops);
	free(opms);
	free(opcnt);
	free(oplen);
	free(row);
}

/* `wlower run DIR`: the host runtime. Same options, outputs and messages as
 * for a model. */
static int run_dir(RunArgs *a, Diag *d)
{
	char *err = NULL;
	WlModule *wm = wl_open_flags(a->model, a->threads ? (int)a->threads : 0,
	                              a->no_verify ? WL_OPEN_NO_VERIFY : 0, &err);
	if (!wm) {
		diag_fail(d, "%s", err ? err : "cannot open module");
		free(err);
		return WL_ERR;
	}
	int rc = WL_ERR;
	int nin = wl_input_count(wm), nout = wl_output_count(wm);
	const char **names = calloc((size_t)nout + 1, sizeof *names);
	RTensor *outs = calloc((size_t)nout + 1, sizeof *outs);
	const RTensor **pts = calloc((size_t)nout + 1, sizeof *pts);
	double *t = calloc((size_t)a->reps + 1, sizeof *t);
	if (!names || !outs || !pts || !t)
		wl_die(__FILE__, __LINE__, "out of memory");
	char list[512], ty[256];
	WlTensorInfo info;
	OutputDir od = {0};
	for (int k = 0; k < a->nb; k++) {
		RunInput *b = &a->b[k];
		if (wl_input_index(wm, b->name) < 0) {
			size_t l = 0;
			list[0] = 0;
			for (int i = 0; i < nin && l + 1 < sizeof list; i++) {
				wl_input_info(wm, i, &info);
				int w = snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", info.name);
				if (w < 0)
					break;
				l += (size_t)w;
			}
			diag_fail(d, "%s: input '%s' is not an input of %s (inputs: %s)", b->file, b->name, a->model,
			          nin ? list : "none");
			goto out;
		}
		if (load_tensor(b->file, &b->t, d) != WL_OK) {
			diag_prefix(d, "input '%s': ", b->name);
			goto out;
		}
		b->loaded = true;
		note_nonfinite(b);
		if (wl_bind_input(wm, b->name, b->t.data, b->t.dtype, b->t.ndim, b->t.dims) != 0) {
			diag_fail(d, "%s (%s)", wl_error(wm), b->file);
			goto out;
		}
	}
	for (int i = 0; i < nin; i++) {
		wl_input_info(wm, i, &info);
		bool given = false;
		for (int k = 0; k < a->nb; k++)
			given |= strcmp(a->b[k].name, info.name) == 0;
		if (!given) {
			RTensor tt = {.dtype = info.dtype, .ndim = info.ndim};
			memcpy(tt.dims, info.shape, sizeof(int64_t) * (size_t)info.ndim);
			diag_fail(d, "%s: input '%s' (%s) not given: add --input %s=FILE.npy", a->model, info.name,
			          rt_describe(&tt, ty, sizeof ty), info.name);
			goto out;
		}
	}
	for (int i = 0; i < nout; i++) {
		wl_output_info(wm, i, &info);
		names[i] = info.name;
	}
	if (begin_outputs(a->outdir, nout, names, &od, d) != WL_OK)
		goto out;
	if (wl_run(wm) != 0) {
		diag_fail(d, "%s", wl_error(wm));
		goto out;
	}
	if (a->reps > 0) {
		wl_profile_reset(wm);           /* the warm-up run is not profiled */
		for (long r = 0; r < a->reps; r++) {
			double t0 = wl_now_ms();
			if (wl_run(wm) != 0) {
				diag_fail(d, "%s", wl_error(wm));
				goto out;
			}
			t[r] = wl_now_ms() - t0;
		}
		if (print_median(t, a->reps, d) != WL_OK)
			goto out;
	}
	if (getenv("WLOWER_PROFILE") && strcmp(getenv("WLOWER_PROFILE"), "0") != 0) {
		if (wl_profile_count(wm) > 0)
			print_profile(wm);
		else
			fprintf(stderr, "profile: %s: module has no per-kernel entry points\n", a->model);
	}
	for (int i = 0; i < nout; i++) {
		const void *p = wl_output(wm, i, &info);
		names[i] = info.name;
		outs[i] = (RTensor){.dtype = info.dtype, .ndim = info.ndim, .data = (void *)p, .nbytes = info.nbytes};
		memcpy(outs[i].dims, info.shape, sizeof(int64_t) * (size_t)info.ndim);
		pts[i] = &outs[i];
	}
	if (write_named_outputs(od.tmp, nout, names, pts, d) == WL_OK && output_dir_commit(&od, d) == WL_OK)
		rc = WL_OK;
out:
	output_dir_abort(&od, d);
	free(names);
	free(outs);
	free(pts);
	free(t);
	wl_close(wm);
	return rc;
}

int cmd_run(int argc, char **argv)
{
	if (opt_help(argc, argv, usage_run))
		return CMD_OK;
	RunArgs a = {.threads = 0, .reps = 0};
	int rc = parse_run_args(argc, argv, &a);
	Diag d = {0};
	Module *m = NULL;
	Exec *e = NULL;
	OutputDir od = {0};
	if (rc != CMD_OK)
		goto out;
	rc = CMD_BAD_INPUT;
	struct stat st;
	if (stat(a.model, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (run_dir(&a, &d) != WL_OK)
			goto fail;
		rc = CMD_OK;
		goto out;
	}
	if (a.no_verify) {
		rc = cmd_usage(CMD, "--no-verify applies to a module directory, not to the model %s", a.model);
		goto out;
	}
	if (model_read(a.model, &m, &d) != WL_OK || ir_verify(m, &d) != WL_OK)
		goto fail;
	if (exec_new(m, a.threads ? (int)a.threads : cmd_default_threads(), &e, &d) != WL_OK)
		goto fail;
	if (bind_inputs(e, &a, &d) != WL_OK)
		goto fail;
	const char **names = exec_output_names(e);
	int nb = begin_outputs(a.outdir, exec_output_count(e), names, &od, &d);
	free(names);
	if (nb != WL_OK || exec_run(e, &d) != WL_OK)
		goto fail;
	if (a.reps > 0) {
		double *t = malloc((size_t)a.reps * sizeof *t);
		if (!t)
			wl_die(__FILE__, __LINE__, "out of memory");
		for (long r = 0; r < a.reps; r++) {
			double t0 = wl_now_ms();
			if (exec_run(e, &d) != WL_OK) {
				free(t);
				goto fail;
			}
			t[r] = wl_now_ms() - t0;
		}
		int pm = print_median(t, a.reps, &d);
		free(t);
		if (pm != WL_OK)
			goto fail;
	}
	if (write_outputs(e, od.tmp, &d) != WL_OK || output_dir_commit(&od, &d) != WL_OK)
		goto fail;
	rc = CMD_OK;
	goto out;
fail:
	output_dir_abort(&od, &d);
	cmd_error(CMD, &d);
out:
	if (e)
		exec_free(e);
	for (int k = 0; k < a.nb; k++) {
		if (a.b[k].loaded)
			rt_free(&a.b[k].t);
		free(a.b[k].name);
	}
	free(a.b);
	opt_free_lists(run_opts, &a);
	if (m)
		module_free(m);
	return rc;
}
