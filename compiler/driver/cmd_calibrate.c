/* cmd_calibrate.c — `wlower calibrate`: record the value range of every tensor.
 *
 *   wlower calibrate MODEL --samples NAME=FILE.npy ... -o X.tranges
 *                    [--percentile P] [--threads N]
 *
 * The first axis of each samples file indexes samples: a file for input
 * [1,80,3000] holds [S,80,3000] (the input's leading 1 dropped) or
 * [S,1,80,3000]. Every file gives the same S. Sample s binds a view of
 * slice s (no copy) and runs the float reference executor, observed by
 * tranges/calibrate.c (the rules for ranges, infinities and --percentile
 * are there). On a terminal, stderr shows a progress bar.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "compiler/driver/commands.h"
#include "runtime/interp/interp.h"
#include "tranges/calibrate.h"

static const char CMD[] = "calibrate";

static const char usage_calibrate[] =
"usage: wlower calibrate MODEL --samples NAME=FILE.npy ... -o X.tranges [--percentile P] [--threads N]\n"
"\n"
"Runs the float graph of MODEL on every sample and writes the min/max of every\n"
"graph input and node output to X.tranges (JSON, format wlower-tranges v1).\n"
"\n"
"  --samples NAME=FILE   samples for graph input NAME, stacked on a new first axis:\n"
"                        shape [S, *input], or [S, *input[1:]] when the input's\n"
"                        first dim is 1 (e.g. [73,80,3000] for input_features\n"
"                        [1,80,3000]); every input needs one, all with the same S\n"
"  -o, --output FILE     the tranges file to write (atomically)\n"
"  --percentile P        clip outliers: per tensor, c = the P-th percentile of |x|\n"
"                        pooled over all samples, range = [max(min,-c), min(max,c)]\n"
"                        (0 < P <= 100; 100 = plain min/max, the default)\n"
"  --threads N           threads for the kernels (default: the online CPUs)\n"
"  -h, --help            this help\n"
"\n"
"exit status: 0 success, 1 bad input (one line naming file, input, tensor), 2 usage error\n";

/* ---------------------------------------------------------------- samples */

typedef struct Samples {
	char *name;
	const char *file;
	RTensor all;                /* [S, ...] as read */
	bool loaded;
	const Value *input;
	RTensor view;               /* one sample; data points into all */
	size_t stride;              /* bytes per sample */
} Samples;

/* Shape of one sample from the file's [S, ...] and the input's declared type. */
static int sample_shape(Samples *sm, const char *model, Diag *d)
{
	return cmd_sample_view(&sm->all, sm->input, sm->file, sm->name, model, &sm->view, &sm->stride, d);
}

/* ---------------------------------------------------------------- progress */

static void progress(int done, int total, double t0_ms, bool tty)
{
	if (!tty)
		return;
	static double last_ms = -1e9;
	double now = wl_now_ms();
	if (done > 0 && done < total && now - last_ms < 100)
		return;                     /* at most 10 redraws a second */
	last_ms = now;
	double el = (now - t0_ms) / 1e3;
	enum { W = 30 };
	int fill = total ? (int)((int64_t)W * done / total) : W;
	char bar[W + 1];
	for (int i = 0; i < W; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[W] = 0;
	fprintf(stderr, "\rcalibrate [%s] %d/%d samples  %.1f s", bar, done, total, el);
	if (done > 0 && done < total)
		fprintf(stderr, ", ~%.0f s left ", el / done * (total - done));
	else
		fputs("              ", stderr);
	if (done == total)
		fputc('\n', stderr);
	fflush(stderr);
}

/* ---------------------------------------------------------------- command */

typedef struct CalArgs {
	const char *model, *out;
	OptList samples;
	Samples *sm; int nsm;
	double percentile;
	long threads;
} CalArgs;

static const OptSpec cal_opts[] = {
	{"--samples", NULL, OPT_LIST, offsetof(CalArgs, samples)},
	{"--output", "-o", OPT_STRING, offsetof(CalArgs, out)},
	{"--percentile", NULL, OPT_REAL, offsetof(CalArgs, percentile), 0, 100, true,
	 "%s: expected a number in (0, 100], got '%s'"},
	{"--threads", NULL, OPT_INT, offsetof(CalArgs, threads), 1, 1024},
	OPT_END,
};

static int parse_cal_args(int argc, char **argv, CalArgs *a)
{
	int rc = opt_parse(CMD, cal_opts, argc, argv, a, &a->model, "model", NULL);
	if (rc == CMD_OK)
		rc = CMD_BINDINGS(CMD, "--samples", &a->samples, "samples for input '%s' given twice", &a->sm);
	if (rc != CMD_OK)
		return rc;
	a->nsm = a->samples.n;
	if (!a->model)
		return cmd_usage(CMD, "no model given");
	if (!a->out)
		return cmd_usage(CMD, "no output given (-o X.tranges)");
	if (a->nsm == 0)
		return cmd_usage(CMD, "no samples given (--samples NAME=FILE.npy)");
	return CMD_OK;
}

/* Loads and checks every samples file; returns S or WL_ERR. */
static int64_t load_samples(Exec *e, CalArgs *a, Diag *d)
{
	char list[512];
	int64_t S = -1;
	const char *s_file = NULL;
	for (int k = 0; k < a->nsm; k++) {
		Samples *sm = &a->sm[k];
		for (int i = 0; i < exec_input_count(e); i++)
			if (strcmp(exec_input(e, i)->name, sm->name) == 0)
				sm->input = exec_input(e, i);
		if (!sm->input) {
			size_t n = 0;
			list[0] = 0;
			for (int i = 0; i < exec_input_count(e) && n + 1 < sizeof list; i++)
				n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", exec_input(e, i)->name);
			return diag_fail(d, "%s: input '%s' is not an input of %s (inputs: %s)", sm->file, sm->name,
			                 a->model, list);
		}
		if (npy_read(sm->file, &sm->all, d) != WL_OK) {
			diag_prefix(d, "samples for input '%s': ", sm->name);
			return WL_ERR;
		}
		sm->loaded = true;
		if (sample_shape(sm, a->model, d) != WL_OK)
			return WL_ERR;
		if (S >= 0 && sm->all.dims[0] != S)
			return diag_fail(d, "%s: %lld samples for input '%s', but %s has %lld", sm->file,
			                 (long long)sm->all.dims[0], sm->name, s_file, (long long)S);
		S = sm->all.dims[0];
		s_file = sm->file;
	}
	for (int i = 0; i < exec_input_count(e); i++) {
		const Value *v = exec_input(e, i);
		bool given = false;
		for (int k = 0; k < a->nsm; k++)
			given |= a->sm[k].input == v;
		if (!given) {
			char ty[256];
			return diag_fail(d, "%s: input '%s' (%s) has no samples: add --samples %s=FILE.npy", a->model,
			                 v->name, cmd_describe_value(v, ty, sizeof ty), v->name);
		}
	}
	if (S == 0)
		return diag_fail(d, "%s: no samples (the first axis is 0)", s_file);
	return S;
}

int cmd_calibrate(int argc, char **argv)
{
	if (opt_help(argc, argv, usage_calibrate))
		return CMD_OK;
	CalArgs a = {0};
	Diag d = {0};
	Module *m = NULL;
	Exec *e = NULL;
	TRanges *tr = NULL;
	Calib *c = NULL;
	int rc = parse_cal_args(argc, argv, &a);
	if (rc != CMD_OK)
		goto out;
	rc = CMD_BAD_INPUT;
	if (model_read(a.model, &m, &d) != WL_OK || ir_verify(m, &d) != WL_OK)
		goto fail;
	if (exec_new(m, a.threads ? (int)a.threads : cmd_default_threads(), &e, &d) != WL_OK)
		goto fail;
	int64_t S = load_samples(e, &a, &d);
	if (S < 0)
		goto fail;
	if (S > 0x7fffffff) {
		diag_fail(&d, "%s: too many samples (%lld)", a.sm[0].file, (long long)S);
		goto fail;
	}
	c = calib_new(a.percentile > 0 && a.percentile < 100);
	exec_set_observer(e, calib_observe, c);
	bool tty = isatty(2);
	double t0 = wl_now_ms();
	progress(0, (int)S, t0, tty);
	for (int64_t s = 0; s < S; s++) {
		for (int k = 0; k < a.nsm; k++) {
			Samples *sm = &a.sm[k];
			sm->view.data = (char *)sm->all.data + (size_t)s * sm->stride;
			if (exec_bind(e, sm->name, &sm->view, &d) != WL_OK) {
				size_t l = strlen(d.msg);
				snprintf(d.msg + l, sizeof d.msg - l, " (%s, sample %lld)", sm->file, (long long)s);
				if (tty)
					fputc('\n', stderr);
				goto fail;
			}
			calib_observe(c, sm->input, &sm->view);
		}
		if (exec_run(e, &d) != WL_OK) {
			diag_prefix(&d, "sample %lld: ", (long long)s);
			if (tty)
				fputc('\n', stderr);
			goto fail;
		}
		progress((int)s + 1, (int)S, t0, tty);
	}
	CalibReport rep;
	tr = calib_collect(c, m, a.model, S, a.percentile, &rep);
	if (rep.n_all_nan) {
		diag_fail(&d, "%s: tensor '%s' is NaN in every sample (%d tensor%s without a single finite value): "
		          "no range can be built", a.model, rep.all_nan, rep.n_all_nan, rep.n_all_nan == 1 ? "" : "s");
		goto fail;
	}
	if (tr->n == 0) {
		diag_fail(&d, "%s: no tensor got a range from %lld samples", a.model, (long long)S);
		goto fail;
	}
	if (tranges_write(a.out, tr, &d) != WL_OK)
		goto fail;
	if (rep.n_nan)
		fprintf(stderr, "wlower calibrate: note: %d tensor%s held NaN (%lld values in all, first: '%s'); "
		        "NaN is left out of the ranges\n", rep.n_nan, rep.n_nan == 1 ? "" : "s",
		        (long long)rep.nan_values, rep.nan_first);
	if (rep.n_inf)
		fprintf(stderr, "wlower calibrate: note: %d tensor%s held infinities, recorded as +-3.4e38: %s%s\n",
		        rep.n_inf, rep.n_inf == 1 ? "" : "s", rep.inf_names, rep.n_inf > 4 ? ", ..." : "");
	if (rep.n_missing)
		fprintf(stderr, "wlower calibrate: warning: the executor reported no values for %d tensor%s "
		        "(first: '%s'); they have no range\n", rep.n_missing, rep.n_missing == 1 ? "" : "s", rep.missing);
	fprintf(stderr, "wlower calibrate: %lld samples, %d tensors -> %s\n", (long long)S, tr->n, a.out);
	rc = CMD_OK;
	goto out;
fail:
	cmd_error(CMD, &d);
out:
	tranges_free(tr);
	if (e)
		exec_free(e);
	for (int k = 0; k < a.nsm; k++) {
		if (a.sm[k].loaded)
			rt_free(&a.sm[k].all);
		free(a.sm[k].name);
	}
	free(a.sm);
	opt_free_lists(cal_opts, &a);
	calib_free(c);
	if (m)
		module_free(m);
	return rc;
}
