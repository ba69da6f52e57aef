/* cmd_compare.c — `wlower compare`: the per-tensor accuracy report.
 *
 *   wlower compare A B --input NAME=FILE.npy ... [--threshold DB] [--json FILE] [--threads N]
 *
 * A is the reference, B the candidate (e.g. a float model and its int8 QDQ
 * form). A model (.onnx, .onnxtxt) runs on the float reference executor and
 * every node output is recorded by name (the executor's observer, as
 * calibration uses); a module directory gives its outputs: a host module
 * (`wlower MODEL --target host -o DIR`) runs on the host runtime, a Chimera
 * one (--target qc-n|qc-p|qc-u) on the bit-exact emulator, whose simulated
 * cycles and saturated stores are printed too (runtime/pipelines/program.c
 * runs both). Both get the same inputs.
 * For every tensor both record under one name, in A's order (graph order),
 * one row: shape, MSE, PSNR, SQNR, max abs error, cosine
 * (runtime/interp/metrics.c rt_metrics). The first tensor whose SQNR is below
 * the threshold (default 25 dB) is marked "<< first below" and named on the
 * last line: that is where the error enters. A tensor x that B quantizes,
 * y = DequantizeLinear(QuantizeLinear(x)), is compared through y (what B's
 * graph reads in place of x; the op column shows "+QDQ"), so an
 * over-quantized residual add is flagged at the add itself. Tensors of different shapes or
 * types under one name are listed as not comparable. --json FILE writes the
 * same table (atomically).
 *
 * Errors (exit 1, one line naming file and input): an input file that is
 * missing or misshapen for either side, an input one side lacks, nothing in
 * common. Usage errors exit 2.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "compiler/driver/commands.h"
#include "runtime/interp/interp.h"
#include "runtime/module/module.h"
#include "runtime/pipelines/pipeline.h"

static const char CMD[] = "compare";

static const char usage_compare[] =
"usage: wlower compare A B --input NAME=FILE.npy ... [--threshold DB] [--json FILE] [--threads N]\n"
"\n"
"Runs A (the reference) and B on the same inputs and prints, for every tensor\n"
"both produce under the same name (node outputs and graph outputs, in A's graph\n"
"order): MSE, PSNR (peak = max|A|), SQNR = 10 log10(sum A^2 / sum (A-B)^2), max\n"
"abs error and cosine similarity, marking the first tensor whose SQNR is below\n"
"the threshold: where the error enters.\n"
"\n"
"  A, B                  a model (.onnx or .onnxtxt: the float reference executor,\n"
"                        every node output recorded) or a module directory: host\n"
"                        (wlower MODEL --target host -o DIR) or Chimera (--target\n"
"                        qc-n|qc-p|qc-u: run on the emulator, with its simulated\n"
"                        cycles and saturated stores); a directory gives its outputs\n"
"  --input NAME=FILE     value of input NAME (.npy or TensorProto .pb), given to\n"
"                        both sides; every input of each side must be given\n"
"  --threshold DB        SQNR in dB below which a tensor is bad (default 25)\n"
"  --json FILE           also write the table as JSON (atomically)\n"
"  --threads N           threads for the kernels (default: the online CPUs)\n"
"  -h, --help            this help\n"
"\n"
"exit status: 0 success (whatever the numbers), 1 bad input, 2 usage error\n";

typedef struct CmpInput {
	char *name;
	const char *file;
	RTensor t;
	bool loaded, used;
} CmpInput;

/* One recorded tensor. */
typedef struct Rec {
	const char *name, *node;        /* borrowed from the side's module or runtime */
	char op[64];
	bool qdq;                       /* B: the value of DequantizeLinear(QuantizeLinear(name)) */
	RTensor t;                      /* owned copy */
} Rec;

typedef struct Side {
	const char *path;
	Module *m;
	Exec *e;
	Program *prog;                 /* a module directory: host or qc runner */
	char **names; int nnames;      /* output names kept from its manifest */
	bool qc;                       /* a Chimera module: its run's simulated facts */
	int64_t qc_cycles, qc_saturated;
	char qc_kernel[128];
	Rec *r; int n, cap;
} Side;

static const char *side_keep(Side *s, const char *name)
{
	char **nn = realloc(s->names, (size_t)(s->nnames + 1) * sizeof *nn);
	if (!nn || !(nn[s->nnames] = strdup(name)))
		wl_die(__FILE__, __LINE__, "out of memory");
	s->names = nn;
	return s->names[s->nnames++];
}

typedef struct CmpArgs {
	const char *a, *b, *json;
	OptList inputs;
	CmpInput *in; int nin;
	double threshold;
	long threads;
} CmpArgs;

static void rec_add(Side *s, const char *name, const char *node, const char *op, const RTensor *t, bool qdq)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->r[i].name, name) == 0) {
			if (!qdq || s->r[i].qdq)
				return;             /* first value wins (subgraph bodies run many times) */
			rt_free(&s->r[i].t);    /* the quantized form of the tensor replaces it */
			s->r[i].qdq = true;
			rt_alloc(&s->r[i].t, t->dtype, t->ndim, t->dims);
			if (t->nbytes && s->r[i].t.nbytes == t->nbytes)
				memcpy(s->r[i].t.data, t->data, t->nbytes);
			return;
		}
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->r = realloc(s->r, (size_t)s->cap * sizeof *s->r);
		if (!s->r)
			wl_die(__FILE__, __LINE__, "out of memory");
	}
	Rec *r = &s->r[s->n++];
	*r = (Rec){.name = name, .node = node, .qdq = qdq};
	snprintf(r->op, sizeof r->op, "%s", op);
	rt_alloc(&r->t, t->dtype, t->ndim, t->dims);
	if (t->nbytes && r->t.nbytes == t->nbytes)
		memcpy(r->t.data, t->data, t->nbytes);
}

static void observe(void *ctx, const Value *v, const RTensor *t)
{
	Side *s = ctx;
	const Node *n = v->producer;
	char op[64];
	if (v->name && *v->name)
		rec_add(s, v->name, n && n->name ? n->name : "", n ? node_op_name(n, op, sizeof op) : "", t, false);
	/* y = DequantizeLinear(QuantizeLinear(x)): y is what the graph reads in
	 * place of x, so x is compared through it */
	const Node *q = n && n->op == OP_DequantizeLinear && n->ninputs > 0 && n->inputs[0] ? n->inputs[0]->producer : NULL;
	if (q && q->op == OP_QuantizeLinear && q->ninputs > 0 && q->inputs[0] && q->inputs[0]->name &&
	    q->inputs[0]->producer)
		rec_add(s, q->inputs[0]->name, "", "", t, true);
}

static int load_inputs(CmpArgs *a, Diag *d)
{
	for (int k = 0; k < a->nin; k++) {
		CmpInput *in = &a->in[k];
		int rc = str_ends_with(in->file, ".pb") ? pb_tensor_read(in->file, &in->t, d) : npy_read(in->file, &in->t, d);
		if (rc != WL_OK) {
			diag_prefix(d, "input '%s': ", in->name);
			return WL_ERR;
		}
		in->loaded = true;
	}
	return WL_OK;
}

static int run_model(Side *s, CmpArgs *a, Diag *d)
{
	if (model_read(s->path, &s->m, d) != WL_OK || ir_verify(s->m, d) != WL_OK)
		return WL_ERR;
	if (exec_new(s->m, a->threads ? (int)a->threads : cmd_default_threads(), &s->e, d) != WL_OK)
		return WL_ERR;
	for (int i = 0; i < exec_input_count(s->e); i++) {
		const Value *v = exec_input(s->e, i);
		CmpInput *in = NULL;
		for (int k = 0; k < a->nin; k++)
			if (strcmp(a->in[k].name, v->name) == 0)
				in = &a->in[k];
		if (!in) {
			char ty[256];
			return diag_fail(d, "%s: input '%s' (%s) not given: add --input %s=FILE.npy", s->path, v->name,
			                 cmd_describe_value(v, ty, sizeof ty), v->name);
		}
		in->used = true;
		if (exec_bind(s->e, in->name, &in->t, d) != WL_OK) {
			size_t l = strlen(d->msg);
			snprintf(d->msg + l, sizeof d->msg - l, " (%s, %s)", in->file, s->path);
			return WL_ERR;
		}
	}
	exec_set_observer(s->e, observe, s);
	if (exec_run(s->e, d) != WL_OK)
		return WL_ERR;
	for (int i = 0; i < exec_output_count(s->e); i++)     /* outputs that are inputs or initializers */
		rec_add(s, exec_output_name(s->e, i), "", "", exec_output(s->e, i), false);
	return WL_OK;
}

/* The runner of a module directory, from its manifest.json: "host" for a
 * host module, "qc" for a Chimera one (qc-n, qc-p, qc-u: the bit-exact
 * emulator). The manifest's first program gives the io names. */
static int dir_io(Side *s, cJSON **mf, const cJSON **prog, const char **runner, Diag *d)
{
	if (manifest_read(s->path, mf, d) != WL_OK)
		return WL_ERR;
	const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(*mf, "target"));
	if (t && strcmp(t, "host") == 0)
		*runner = "host";
	else if (t && strncmp(t, "qc-", 3) == 0)
		*runner = "qc";
	else
		return diag_fail(d, "%s/manifest.json: target '%s': compare runs host and qc-* module directories "
		                 "(for the reference, give the model)", s->path, t ? t : "");
	*prog = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(*mf, "programs"), 0);
	return WL_OK;
}

static int run_dir(Side *s, CmpArgs *a, Diag *d)
{
	cJSON *mf = NULL;
	const cJSON *prog = NULL, *io;
	const char *runner = NULL;
	int rc = dir_io(s, &mf, &prog, &runner, d);
	if (rc == WL_OK)
		rc = program_open(s->path, runner, a->threads ? (int)a->threads : 0, &s->prog, d);
	const cJSON *ins = rc == WL_OK ? cJSON_GetObjectItemCaseSensitive(prog, "inputs") : NULL;
	const cJSON *outs = cJSON_GetObjectItemCaseSensitive(prog, "outputs");
	cJSON_ArrayForEach(io, ins) {
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(io, "name"));
		CmpInput *in = NULL;
		for (int k = 0; k < a->nin; k++)
			if (strcmp(a->in[k].name, name) == 0)
				in = &a->in[k];
		if (!in) {
			rc = diag_fail(d, "%s: input '%s' not given: add --input %s=FILE.npy", s->path, name, name);
			break;
		}
		in->used = true;
		if ((rc = program_bind(s->prog, in->name, &in->t, d)) != WL_OK) {
			diag_prefix(d, "%s: ", in->file);
			break;
		}
	}
	if (rc == WL_OK)
		rc = program_run(s->prog, d);
	if (rc != WL_OK)
		outs = NULL;
	cJSON_ArrayForEach(io, outs) {
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(io, "name"));
		const RTensor *t = program_output(s->prog, name, d);
		if (!t) {
			rc = WL_ERR;
			break;
		}
		/* the names are the manifest's: kept until side_free */
		rec_add(s, side_keep(s, name), "", "output", t, false);
	}
	if (rc == WL_OK && strcmp(runner, "qc") == 0) {
		const ProgramStats *st = program_stats(s->prog);
		s->qc_cycles = st->cycles_per_run;
		s->qc_saturated = st->runs > 0 ? st->saturated[st->runs - 1] : 0;
		snprintf(s->qc_kernel, sizeof s->qc_kernel, "%s", st->first_saturated_kernel);
		s->qc = true;
	}
	cJSON_Delete(mf);
	return rc;
}

static int run_side(Side *s, CmpArgs *a, Diag *d)
{
	struct stat st;
	if (stat(s->path, &st) == 0 && S_ISDIR(st.st_mode))
		return run_dir(s, a, d);
	return run_model(s, a, d);
}

static void side_free(Side *s)
{
	for (int i = 0; i < s->n; i++)
		rt_free(&s->r[i].t);
	free(s->r);
	if (s->e)
		exec_free(s->e);
	program_close(s->prog);
	for (int i = 0; i < s->nnames; i++)
		free(s->names[i]);
	free(s->names);
	if (s->m)
		module_free(s->m);
}

/* ---------------------------------------------------------------- the table */

typedef struct Row {
	const Rec *ra, *rb;
	RtMetrics mt;
	bool comparable;
	char why[256];
} Row;

static void fmt_db(char *buf, size_t n, double v)
{
	if (isinf(v))
		snprintf(buf, n, "%s", v > 0 ? "inf" : "-inf");
	else
		snprintf(buf, n, "%.2f", v);
}

static void json_num(FILE *f, const char *key, double v)
{
	if (isfinite(v))
		fprintf(f, ", \"%s\": %.17g", key, v);
	else
		fprintf(f, ", \"%s\": %s", key, isnan(v) ? "null" : v > 0 ? "\"inf\"" : "\"-inf\"");
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static int write_json(const CmpArgs *a, const Row *rows, int n, int first, Diag *d)
{
	AtomicFile af;
	if (atomic_open(&af, a->json, d) != WL_OK)
		return WL_ERR;
	FILE *f = af.f;
	fputs("{\"format\": \"wlower-compare\", \"version\": 1, \"a\": ", f);
	json_str(f, a->a);
	fputs(", \"b\": ", f);
	json_str(f, a->b);
	fprintf(f, ", \"threshold_db\": %.9g, \"first_below\": ", a->threshold);
	if (first >= 0)
		json_str(f, rows[first].ra->name);
	else
		fputs("null", f);
	fputs(",\n \"tensors\": [", f);
	for (int i = 0; i < n; i++) {
		const Row *r = &rows[i];
		char shape[128];
		fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", f);
		json_str(f, r->ra->name);
		fputs(", \"node\": ", f);
		json_str(f, r->ra->node);
		fputs(", \"op\": ", f);
		json_str(f, r->ra->op);
		fputs(", \"shape\": ", f);
		json_str(f, rt_describe(&r->ra->t, shape, sizeof shape));
		if (!r->comparable) {
			fputs(", \"comparable\": false, \"why\": ", f);
			json_str(f, r->why);
			fputs("}", f);
			continue;
		}
		fprintf(f, ", \"comparable\": true, \"b_qdq\": %s", r->rb->qdq ? "true" : "false");
		json_num(f, "mse", r->mt.mse);
		json_num(f, "psnr_db", r->mt.psnr);
		json_num(f, "sqnr_db", r->mt.sqnr);
		json_num(f, "max_abs", r->mt.max_abs);
		json_num(f, "cosine", r->mt.cosine);
		fprintf(f, ", \"below\": %s}", r->mt.sqnr < a->threshold ? "true" : "false");
	}
	fputs(n ? "\n ]\n}\n" : "]\n}\n", f);
	return atomic_commit(&af, d);
}

static int report(const CmpArgs *a, const Side *sa, const Side *sb, Diag *d)
{
	Row *rows = calloc((size_t)sa->n + 1, sizeof *rows);
	if (!rows)
		wl_die(__FILE__, __LINE__, "out of memory");
	int n = 0, first = -1, below = 0, ncmp = 0;
	for (int i = 0; i < sa->n; i++) {
		const Rec *rb = NULL;
		for (int k = 0; k < sb->n && !rb; k++)
			if (strcmp(sb->r[k].name, sa->r[i].name) == 0)
				rb = &sb->r[k];
		if (!rb)
			continue;
		Row *r = &rows[n++];
		r->ra = &sa->r[i];
		r->rb = rb;
		Diag md = {0};
		r->comparable = rt_metrics(&r->ra->t, &rb->t, &r->mt, &md) == WL_OK;
		if (!r->comparable) {
			snprintf(r->why, sizeof r->why, "%.200s", md.msg);
			continue;
		}
		ncmp++;
		if (r->mt.sqnr < a->threshold) {
			below++;
			if (first < 0)
				first = n - 1;
		}
	}
	int rc = WL_OK;
	if (n == 0) {
		rc = diag_fail(d, "%s and %s have no tensor name in common", a->a, a->b);
		goto out;
	}
	printf("wlower compare: A = %s, B = %s: %d tensors in common (A %d, B %d), SQNR threshold %.2f dB\n",
	       a->a, a->b, n, sa->n, sb->n, a->threshold);
	const Side *sides[2] = {sa, sb};
	for (int k = 0; k < 2; k++)
		if (sides[k]->qc)
			printf("%s (Chimera emulator): %lld simulated cycles, %lld saturated stores%s%s%s\n", k ? "B" : "A",
			       (long long)sides[k]->qc_cycles, (long long)sides[k]->qc_saturated,
			       sides[k]->qc_kernel[0] ? " (first in kernel '" : "", sides[k]->qc_kernel,
			       sides[k]->qc_kernel[0] ? "')" : "");
	printf("%4s  %-40s %-20s %-22s %12s %9s %9s %12s %10s\n", "#", "tensor", "op", "shape", "mse", "psnr_db",
	       "sqnr_db", "max_abs", "cosine");
	for (int i = 0; i < n; i++) {
		const Row *r = &rows[i];
		char shape[128];
		rt_describe(&r->ra->t, shape, sizeof shape);
		if (!r->comparable) {
			printf("%4d  %-40s %-20s %-22s not comparable: %s\n", i, r->ra->name, r->ra->op, shape, r->why);
			continue;
		}
		char p[32], q[32], op[80];
		snprintf(op, sizeof op, "%s%s", r->ra->op, r->rb->qdq ? "+QDQ" : "");
		fmt_db(p, sizeof p, r->mt.psnr);
		fmt_db(q, sizeof q, r->mt.sqnr);
		printf("%4d  %-40s %-20s %-22s %12.4e %9s %9s %12.4e %10.6f%s\n", i, r->ra->name, op, shape,
		       r->mt.mse, p, q, r->mt.max_abs, r->mt.cosine, i == first ? "  << first below" : "");
	}
	if (first >= 0)
		printf("first tensor below %.2f dB SQNR: '%s' (node '%s', %s), SQNR %.2f dB; %d of %d compared below\n",
		       a->threshold, rows[first].ra->name, rows[first].ra->node, rows[first].ra->op, rows[first].mt.sqnr,
		       below, ncmp);
	else
		printf("no tensor below %.2f dB SQNR (%d compared)\n", a->threshold, ncmp);
	rc = stdout_check(d);
	if (rc == WL_OK && a->json)
		rc = write_json(a, rows, n, first, d);
out:
	free(rows);
	return rc;
}

/* ---------------------------------------------------------------- command */

static const OptSpec cmp_opts[] = {
	{"--input", NULL, OPT_LIST, offsetof(CmpArgs, inputs)},
	{"--json", NULL, OPT_STRING, offsetof(CmpArgs, json)},
	{"--threshold", NULL, OPT_REAL, offsetof(CmpArgs, threshold), -1000, 1000},
	{"--threads", NULL, OPT_INT, offsetof(CmpArgs, threads), 1, 1024},
	OPT_END,
};

int cmd_compare(int argc, char **argv)
{
	if (opt_help(argc, argv, usage_compare))
		return CMD_OK;
	CmpArgs a = {.threshold = 25};
	Side sa = {0}, sb = {0};
	Diag d = {0};
	/* two positionals: A and B are taken out of argv (every option of
	 * cmp_opts takes a value: "--opt VALUE" skips VALUE), the rest parsed */
	int rc = CMD_OK;
	char **av = malloc((size_t)(argc + 1) * sizeof *av);
	if (!av)
		wl_die(__FILE__, __LINE__, "out of memory");
	int ac = 0, npos = 0;
	const char *pos[2] = {0};
	for (int i = 0; i < argc; i++) {
		const char *s = argv[i];
		if (i > 0 && (s[0] != '-' || !s[1])) {
			if (npos == 2) {
				rc = cmd_usage(CMD, "more than two models given ('%s')", s);
				break;
			}
			pos[npos++] = s;
			continue;
		}
		av[ac++] = argv[i];
		if (i > 0 && s[0] == '-' && s[1] == '-' && !strchr(s, '=') && i + 1 < argc)
			av[ac++] = argv[++i];
	}
	av[ac] = NULL;
	if (rc == CMD_OK)
		rc = opt_parse(CMD, cmp_opts, ac, av, &a, NULL, "model", NULL);
	if (rc == CMD_OK)
		rc = CMD_BINDINGS(CMD, "--input", &a.inputs, "input '%s' given twice", &a.in);
	a.nin = a.inputs.n;
	if (rc == CMD_OK && npos < 2)
		rc = cmd_usage(CMD, npos ? "only one model given: compare A B" : "no models given: compare A B");
	if (rc != CMD_OK)
		goto out;
	a.a = pos[0];
	a.b = pos[1];
	sa.path = a.a;
	sb.path = a.b;
	rc = CMD_BAD_INPUT;
	if (load_inputs(&a, &d) != WL_OK || run_side(&sa, &a, &d) != WL_OK || run_side(&sb, &a, &d) != WL_OK)
		goto fail;
	for (int k = 0; k < a.nin; k++)
		if (!a.in[k].used) {
			diag_fail(&d, "%s: input '%s' is an input of neither %s nor %s", a.in[k].file, a.in[k].name, a.a, a.b);
			goto fail;
		}
	if (report(&a, &sa, &sb, &d) != WL_OK)
		goto fail;
	rc = CMD_OK;
	goto out;
fail:
	cmd_error(CMD, &d);
out:
	side_free(&sa);
	side_free(&sb);
	for (int k = 0; k < a.nin; k++) {
		if (a.in && a.in[k].loaded)
			rt_free(&a.in[k].t);
		if (a.in)
			free(a.in[k].name);
	}
	free(a.in);
	opt_free_lists(cmp_opts, &a);
	free(av);
	return rc;
}
