/* cmd_sweep.c — `wlower sweep`: hardware design-space exploration.
 *
 *   wlower sweep (MODEL --tranges X | --pipeline PIPE_DIR --tranges X)
 *                --target LIST --cores LIST --ocm LIST --macs-per-pe LIST
 *                --ext-bw LIST [--clock LIST] -o SWEEP_DIR
 *                [-j N] [--scheduler ninja|slurm] [--no-run] ...
 *   wlower sweep --collect SWEEP_DIR
 *   wlower sweep --point OUT.json ...        (one configuration: the jobs)
 *
 * Every configuration of the cartesian product of the lists is one job: the
 * hidden `--point` mode compiles the model for it (a child `wlower MODEL
 * --target ...`, its stderr kept in points/NAME.log), costs the module with
 * the cost model (targets/chimera/sim/cost.c, schedule.json only: no
 * bit-exact run), and writes points/NAME.json atomically. A configuration the
 * compiler refuses (unknown target, cores 0, malformed size) or whose OCM is
 * smaller than the largest kernel's working set is a point with "status":
 * "error" and the message: the job succeeds and the sweep goes on.
 *
 * The jobs are run by an existing engine, never by a pool of our own:
 *   ninja  SWEEP_DIR/build.ninja, one edge per point plus one `collect`
 *          edge; `ninja -C SWEEP_DIR -j N` shows its progress, and a re-run
 *          skips the points already done (ninja's log of commands);
 *   slurm  SWEEP_DIR/slurm/jobs.txt (one command a line, the points not yet
 *          done) and slurm/sweep.sbatch, one `sbatch --array=0-(n-1)`
 *          job; `wlower sweep --collect SWEEP_DIR` merges when it is done
 *          (`--wait`: sbatch --wait, then collect).
 * Collect writes results.csv, results.json and report.html (one page,
 * inline SVG charts, sortable tables), each atomically. docs/FORMATS.md
 * "Sweep directories" has the files.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "compiler/driver/commands.h"
#include "runtime/module/schedule.h"
#include "targets/chimera/sim/sim.h"
#include "targets/target.h"

extern char **environ;

static const char CMD[] = "sweep";

static const char usage_sweep[] =
"usage: wlower sweep (MODEL | --pipeline PIPE_DIR) --tranges FILE --target LIST\n"
"                    [--cores LIST] [--ocm LIST] [--macs-per-pe LIST] [--ext-bw LIST]\n"
"                    [--clock LIST] -o SWEEP_DIR [-j N] [--scheduler ninja|slurm]\n"
"                    [--no-run] [--wait] [--sbatch-arg ARG ...]\n"
"                    [--prepend-logmel] [--append-argmax] [--fp16-attention] [--dim NAME=N ...]\n"
"       wlower sweep --collect SWEEP_DIR\n"
"\n"
"Compiles and costs MODEL (or the pipeline PIPE_DIR was compiled from) for\n"
"every configuration of the comma-separated lists (their cartesian product):\n"
"cost only, from schedule.json (docs/cost-model.md), no bit-exact run. Each\n"
"configuration is one job writing SWEEP_DIR/points/NAME.json; collecting them\n"
"writes SWEEP_DIR/results.csv, results.json and report.html (charts: latency per\n"
"configuration, Pareto front of latency against PEs x cores, cycles per category\n"
"on the front; tables sortable by column). A configuration that cannot be\n"
"compiled (cores 0 or > 4, unknown target, malformed size, OCM smaller than the\n"
"largest kernel's working set) is a failed point, with its message in the\n"
"results and the report; the others go on.\n"
"\n"
"  --target LIST         qc-n, qc-p, qc-u (e.g. qc-n,qc-p,qc-u)\n"
"  --cores LIST          cores, 1..4 (default: the target's)\n"
"  --ocm LIST            OCM sizes, e.g. 4MB,8MB,16MB,32MB (default 16MB)\n"
"  --macs-per-pe LIST    e.g. 8,16,32 (default 16)\n"
"  --ext-bw LIST         external bandwidth, e.g. 32GBps,128GBps (default 128GBps)\n"
"  --clock LIST          e.g. 1.7GHz (default 1.7GHz)\n"
"  --tranges FILE        calibration ranges (from 'wlower calibrate'), as for --target\n"
"  --pipeline PIPE_DIR   sweep a compiled pipeline: its pipeline.json's model and\n"
"                        kind are recompiled for each configuration; every program is\n"
"                        costed, per-token figures from the 'step' program\n"
"  --prepend-logmel, --append-argmax, --fp16-attention, --dim NAME=N\n"
"                        passed to each compilation\n"
"  -o, --output DIR      the sweep folder (created; kept between runs: a re-run\n"
"                        with the same lists does only the points not yet done)\n"
"  -j, --jobs N          parallel jobs for ninja (default: the online CPUs)\n"
"  --scheduler S         ninja (default: SWEEP_DIR/build.ninja run by 'ninja -C\n"
"                        SWEEP_DIR -j N', then collect) or slurm (one 'sbatch\n"
"                        --array' job of the points not yet done; collect later)\n"
"  --no-run              write build.ninja (or the sbatch script) and stop\n"
"  --wait                slurm: 'sbatch --wait', then collect\n"
"  --sbatch-arg ARG      slurm: one more argument for sbatch (repeatable)\n"
"  --collect DIR         merge DIR/points/*.json into results.csv, results.json\n"
"                        and report.html (points not done yet are 'missing')\n"
"  -h, --help            this help\n"
"\n"
"exit status: 0 success (failed points included), 1 bad input, 2 usage error\n";

/* ---------------------------------------------------------------- small helpers */

static char *xstrdup(const char *s)
{
	char *p = strdup(s ? s : "");
	if (!p)
		wl_die(__FILE__, __LINE__, "out of memory");
	return p;
}

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		wl_die(__FILE__, __LINE__, "out of memory");
	va_end(ap);
	return s;
}

/* This executable (the jobs run the same wlower). */
static char *self_exe(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
	if (n <= 0)
		return xstrdup("wlower");
	buf[n] = 0;
	return xstrdup(buf);
}

/* Shell word: 'x' with ' as '\'' (for /bin/sh -c, ninja and sbatch). */
static void put_shell_word(FILE *f, const char *s)
{
	bool plain = *s != 0;
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("/._-=+,:@%", *p))
			plain = false;
	if (plain) {
		fputs(s, f);
		return;
	}
	fputc('\'', f);
	for (const char *p = s; *p; p++)
		if (*p == '\'')
			fputs("'\\''", f);
		else
			fputc(*p, f);
	fputc('\'', f);
}

/* A ninja path: '$', ' ', ':' escaped. */
static void put_ninja_path(FILE *f, const char *s)
{
	for (const char *p = s; *p; p++) {
		if (*p == '$' || *p == ' ' || *p == ':')
			fputc('$', f);
		fputc(*p, f);
	}
}

/* Spawns argv (PATH lookup), stdin /dev/null, stderr to errfile if given;
 * returns the exit status (128 + signal), or -1 (Diag) if it could not start. */
static int run_child(char *const *argv, const char *errfile, Diag *d)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (errfile)
		posix_spawn_file_actions_addopen(&fa, 2, errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawnattr_t sa;
	sim_spawnattr_init(&sa);
	pid_t pid;
	int e = posix_spawnp(&pid, argv[0], &fa, &sa, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&sa);
	if (e) {
		diag_fail(d, "cannot run '%s': %s", argv[0], strerror(e));
		return -1;
	}
	tmp_child_add(pid);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	tmp_child_remove(pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* The last non-empty line of a file (malloc'ed), "" if none. */
static char *last_line(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[2048], last[2048] = "";
	if (f) {
		while (fgets(line, sizeof line, f)) {
			line[strcspn(line, "\n")] = 0;
			if (*line)
				snprintf(last, sizeof last, "%s", line);
		}
		fclose(f);
	}
	return xstrdup(last);
}

static const cJSON *jget(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static double jnum(const cJSON *o, const char *k)
{
	const cJSON *v = jget(o, k);
	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}
static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = jget(o, k);
	return cJSON_IsString(v) ? v->valuestring : "";
}

/* ---------------------------------------------------------------- the lists */

enum { L_TARGET, L_CORES, L_OCM, L_MACS, L_EXTBW, L_CLOCK, L_COUNT };
static const char *const list_opt[L_COUNT] = {"--target", "--cores", "--ocm", "--macs-per-pe", "--ext-bw", "--clock"};
static const char *const list_key[L_COUNT] = {"target", "cores", "ocm", "macs_per_pe", "ext_bw", "clock"};
static const char *const list_tag[L_COUNT] = {"", "c", "ocm", "m", "bw", "clk"};

typedef struct ValList { char **v; int n; } ValList;

/* Splits "a,b,c"; an empty item is a usage error. */
static int split_list(const char *opt, const char *s, ValList *l)
{
	if (!*s)
		return cmd_usage(CMD, "%s: empty list", opt);
	char *copy = xstrdup(s), *save = NULL;
	for (const char *p = s; *p; p++)
		if (*p == ',' && (p == s || p[1] == ',' || p[1] == 0)) {
			free(copy);
			return cmd_usage(CMD, "%s '%s': empty item in the list", opt, s);
		}
	if (*s == ',') {
		free(copy);
		return cmd_usage(CMD, "%s '%s': empty item in the list", opt, s);
	}
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		for (int i = 0; i < l->n; i++)
			if (!strcmp(l->v[i], t)) {
				int rc = cmd_usage(CMD, "%s '%s': '%s' given twice", opt, s, t);
				free(copy);
				return rc;
			}
		l->v = realloc(l->v, (size_t)(l->n + 1) * sizeof *l->v);
		if (!l->v)
			wl_die(__FILE__, __LINE__, "out of memory");
		l->v[l->n++] = xstrdup(t);
	}
	free(copy);
	return CMD_OK;
}

/* Why a value will fail its points (NULL: fine); the compiler says the same. */
static const char *value_problem(int which, const char *v)
{
	double q;
	char *end;
	switch (which) {
	case L_TARGET: {
		TargetKind k = target_parse(v);
		return k == TARGET_QC_N || k == TARGET_QC_P || k == TARGET_QC_U ? NULL : "not qc-n, qc-p or qc-u";
	}
	case L_CORES: {
		long c = strtol(v, &end, 10);
		return *end || end == v || c < 1 || c > 4 ? "not 1..4" : NULL;
	}
	case L_MACS: {
		long c = strtol(v, &end, 10);
		return *end || end == v || c < 1 || c > 1024 ? "not 1..1024" : NULL;
	}
	case L_OCM:
		return opt_quantity(v, "B", true, &q) || q < 65536 ? "not a size like 32MB (at least 64KB)" : NULL;
	case L_EXTBW:
		return opt_quantity(v, "Bps", false, &q) ? "not a bandwidth like 128GBps" : NULL;
	case L_CLOCK:
		return opt_quantity(v, "Hz", false, &q) ? "not a frequency like 1.7GHz" : NULL;
	}
	return NULL;
}

/* Point name: target.cN.ocmX.mN.bwX[.clkX], characters outside [A-Za-z0-9.-]
 * replaced by '_'. */
static char *point_name(char *const val[L_COUNT])
{
	char buf[512];
	size_t n = 0;
	for (int k = 0; k < L_COUNT; k++) {
		if (!val[k])
			continue;
		n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s%s", n ? "." : "", list_tag[k], val[k]);
		if (n >= sizeof buf)
			n = sizeof buf - 1;
	}
	for (char *p = buf; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-')
			*p = '_';
	return xstrdup(buf);
}

/* ---------------------------------------------------------------- options */

typedef struct SweepOpts {
	const char *model, *pipeline, *tranges, *out, *collect, *scheduler, *point;
	const char *list[L_COUNT];
	OptList dims, sbatch_args;
	long jobs;
	bool prepend_logmel, append_argmax, fp16_attention, no_run, wait;
} SweepOpts;

#define O(f) offsetof(SweepOpts, f)
static const OptSpec sweep_opts[] = {
	{"--pipeline", NULL, OPT_STRING, O(pipeline)},
	{"--tranges", NULL, OPT_STRING, O(tranges)},
	{"--output", "-o", OPT_STRING, O(out)},
	{"--collect", NULL, OPT_STRING, O(collect)},
	{"--scheduler", NULL, OPT_STRING, O(scheduler)},
	{"--point", NULL, OPT_STRING, O(point)},
	{"--target", NULL, OPT_STRING, O(list[L_TARGET])},
	{"--cores", NULL, OPT_STRING, O(list[L_CORES])},
	{"--ocm", NULL, OPT_STRING, O(list[L_OCM])},
	{"--macs-per-pe", NULL, OPT_STRING, O(list[L_MACS])},
	{"--ext-bw", NULL, OPT_STRING, O(list[L_EXTBW])},
	{"--clock", NULL, OPT_STRING, O(list[L_CLOCK])},
	{"--dim", NULL, OPT_LIST, O(dims)},
	{"--sbatch-arg", NULL, OPT_LIST, O(sbatch_args)},
	{"--jobs", "-j", OPT_INT, O(jobs), 1, 4096, false, "%s: '%s' is not 1..4096"},
	{"--prepend-logmel", NULL, OPT_FLAG, O(prepend_logmel)},
	{"--append-argmax", NULL, OPT_FLAG, O(append_argmax)},
	{"--fp16-attention", NULL, OPT_FLAG, O(fp16_attention)},
	{"--no-run", NULL, OPT_FLAG, O(no_run)},
	{"--wait", NULL, OPT_FLAG, O(wait)},
	OPT_END,
};
#undef O

/* The compile flags every point passes on (after the hardware options). */
static void put_compile_flags(FILE *f, const SweepOpts *o)
{
	if (o->prepend_logmel)
		fputs(" --prepend-logmel", f);
	if (o->append_argmax)
		fputs(" --append-argmax", f);
	if (o->fp16_attention)
		fputs(" --fp16-attention", f);
	for (int i = 0; i < o->dims.n; i++) {
		fputs(" --dim ", f);
		put_shell_word(f, o->dims.v[i]);
	}
}

/* ---------------------------------------------------------------- the point job */

/* Working set of the largest kernel: the bytes it must stage in OCM (its
 * weight blobs and scratch; activations may spill to DDR, tables it
 * gathers rows of are read in place). */
static uint64_t largest_working_set(const Schedule *s, const char **kname)
{
	uint64_t best = 0;
	*kname = "";
	for (int i = 0; i < s->nkernels; i++) {
		const SchedKernel *k = &s->kernels[i];
		if (k->cpp && (strstr(k->cpp, "embedding") || strstr(k->cpp, "gather")))
			continue;
		uint64_t b = 0;
		for (int j = 0; j < k->nbuffers; j++)
			if (!strcmp(k->buffers[j].role, "weight") || !strcmp(k->buffers[j].role, "scratch"))
				b += k->buffers[j].bytes;
		if (b > best) {
			best = b;
			*kname = k->name;
		}
	}
	return best;
}

/* Costs one module directory into obj (the figures of results.json). */
static int cost_module(const char *dir, cJSON *obj, Diag *d)
{
	Schedule sch;
	if (schedule_read(dir, &sch, d) != WL_OK)
		return WL_ERR;
	const char *kname;
	uint64_t ws = largest_working_set(&sch, &kname);
	uint64_t ocm = sch.config.ocm_bytes;
	if (ws > ocm) {
		diag_fail(d, "OCM %.2f MB is smaller than the largest kernel's working set: '%s' stages %.2f MB "
		          "(weights and scratch)", ocm / 1048576.0, kname, ws / 1048576.0);
		schedule_free(&sch);
		return WL_ERR;
	}
	schedule_free(&sch);
	SimSchedule s;
	if (sim_schedule_read(dir, &s, d) != WL_OK)
		return WL_ERR;
	CostResult r;
	cost_model(&s.cfg, &cost_default_params, s.k, s.nk, &r);
	uint64_t er = 0, ew = 0, macs = 0;
	for (int i = 0; i < s.nk; i++) {
		macs += s.k[i].macs;
		for (int c = 0; c < s.k[i].ncores; c++)
			er += s.k[i].core[c].ext_read, ew += s.k[i].core[c].ext_write;
	}
	const ChimeraConfig *c = &s.cfg;
	double secs = (double)r.total_cycles / c->clock_hz;
	double peak = (double)r.total_cycles * c->cores * c->pe_rows * c->pe_cols * c->macs_per_pe;
	cJSON_AddNumberToObject(obj, "total_cycles", (double)r.total_cycles);
	cJSON_AddNumberToObject(obj, "latency_ms", secs * 1e3);
	cJSON_AddNumberToObject(obj, "executions_per_s", secs > 0 ? 1 / secs : 0);
	cJSON *cat = cJSON_AddObjectToObject(obj, "categories");
	for (int t = 0; t < CAT_COUNT; t++)
		cJSON_AddNumberToObject(cat, cost_category_names[t], round(r.module_cat[t]));
	cJSON_AddNumberToObject(obj, "max_ocm_bytes", (double)s.ocm_peak);
	cJSON_AddNumberToObject(obj, "spills", s.nspills);
	cJSON_AddNumberToObject(obj, "ext_read_bytes", (double)er);
	cJSON_AddNumberToObject(obj, "ext_write_bytes", (double)ew);
	cJSON_AddNumberToObject(obj, "ext_bytes_model",
	                        round((double)(er + ew) + cost_model_act_bytes(&cost_default_params, s.k, s.nk)));
	cJSON_AddNumberToObject(obj, "mac_utilization", peak > 0 ? (double)macs / peak : 0);
	cJSON_AddNumberToObject(obj, "gmacs", (double)macs / 1e9);
	cJSON_AddNumberToObject(obj, "kernels", s.nk);
	cJSON_AddNumberToObject(obj, "largest_working_set_bytes", (double)ws);
	cost_result_free(&r);
	sim_schedule_free(&s);
	return WL_OK;
}

/* The resolved hardware of a configuration (preset + values), NULL-safe. */
static void add_resolved(cJSON *obj, char *const val[L_COUNT])
{
	TargetKind k = target_parse(val[L_TARGET]);
	if (k != TARGET_QC_N && k != TARGET_QC_P && k != TARGET_QC_U)
		return;
	ChimeraConfig c;
	chimera_config_preset(k, &c);
	double q;
	char *end;
	if (val[L_CORES]) {
		long v = strtol(val[L_CORES], &end, 10);
		if (!*end && v >= 1 && v <= 4)
			c.cores = (int)v;
	}
	if (val[L_MACS]) {
		long v = strtol(val[L_MACS], &end, 10);
		if (!*end && v >= 1 && v <= 1024)
			c.macs_per_pe = (int)v;
	}
	if (val[L_OCM] && !opt_quantity(val[L_OCM], "B", true, &q))
		c.ocm_bytes = (uint64_t)q;
	if (val[L_EXTBW] && !opt_quantity(val[L_EXTBW], "Bps", false, &q))
		c.ext_bw = q;
	if (val[L_CLOCK] && !opt_quantity(val[L_CLOCK], "Hz", false, &q))
		c.clock_hz = q;
	cJSON *h = cJSON_AddObjectToObject(obj, "hardware");
	cJSON_AddNumberToObject(h, "cores", c.cores);
	cJSON_AddNumberToObject(h, "pe_rows", c.pe_rows);
	cJSON_AddNumberToObject(h, "pe_cols", c.pe_cols);
	cJSON_AddNumberToObject(h, "pes_x_cores", (double)c.pe_rows * c.pe_cols * c.cores);
	cJSON_AddNumberToObject(h, "ocm_bytes", (double)c.ocm_bytes);
	cJSON_AddNumberToObject(h, "macs_per_pe", c.macs_per_pe);
	cJSON_AddNumberToObject(h, "ext_bw", c.ext_bw);
	cJSON_AddNumberToObject(h, "clock_hz", c.clock_hz);
}

/* The model and kind a pipeline directory was compiled from. */
static int pipeline_source(const char *dir, char **src, char **kind, Diag *d)
{
	char *file = xprintf("%s/pipeline.json", dir);
	cJSON *r;
	int rc = json_read_file(file, &r, d);
	if (rc == WL_OK) {
		const cJSON *m = jget(r, "model");
		const char *sd = jstr(m, "dir"), *k = jstr(r, "kind");
		if (!*sd || !*k)
			rc = diag_fail(d, "%s: no \"model\".\"dir\" or \"kind\"", file);
		else
			*src = xstrdup(sd), *kind = xstrdup(k);
		cJSON_Delete(r);
	}
	free(file);
	return rc;
}

/* `wlower sweep --point OUT.json --target T ... (MODEL | --pipeline P) --tranges X`. */
static int do_point(const SweepOpts *o)
{
	char *val[L_COUNT] = {0};
	for (int k = 0; k < L_COUNT; k++)
		val[k] = (char *)o->list[k];
	char *name = xstrdup(o->point);
	char *slash = strrchr(name, '/');
	char *base = xstrdup(slash ? slash + 1 : name);
	if (str_ends_with(base, ".json"))
		base[strlen(base) - 5] = 0;
	free(name);
	char *stem = xstrdup(o->point);
	if (str_ends_with(stem, ".json"))
		stem[strlen(stem) - 5] = 0;
	char *modir = xprintf("%s.module", stem), *log = xprintf("%s.log", stem);
	cJSON *obj = cJSON_CreateObject();
	cJSON_AddStringToObject(obj, "name", base);
	cJSON *cfg = cJSON_AddObjectToObject(obj, "config");
	for (int k = 0; k < L_COUNT; k++)
		if (val[k])
			cJSON_AddStringToObject(cfg, list_key[k], val[k]);
	add_resolved(obj, val);
	Diag d = {0};
	char *err = NULL;
	char *src = NULL, *kind = NULL;
	remove_tree(modir);
	/* a target the cost model has no machine for is refused before compiling */
	const char *bad = value_problem(L_TARGET, val[L_TARGET] ? val[L_TARGET] : "");
	if (bad) {
		err = xprintf("--target '%s': %s", val[L_TARGET] ? val[L_TARGET] : "", bad);
		goto done;
	}
	if (o->pipeline && pipeline_source(o->pipeline, &src, &kind, &d) != WL_OK) {
		err = xstrdup(d.msg);
		goto done;
	}
	/* the compiler checks every value: its one line is the point's message */
	char *argv[64];
	int n = 0;
	char *exe = self_exe();
	argv[n++] = exe;
	argv[n++] = (char *)(o->pipeline ? src : o->model);
	if (o->pipeline)
		argv[n++] = "--pipeline", argv[n++] = kind;
	argv[n++] = "--tranges", argv[n++] = (char *)o->tranges;
	for (int k = 0; k < L_COUNT; k++)
		if (val[k])
			argv[n++] = (char *)list_opt[k], argv[n++] = val[k];
	if (o->prepend_logmel)
		argv[n++] = "--prepend-logmel";
	if (o->append_argmax)
		argv[n++] = "--append-argmax";
	if (o->fp16_attention)
		argv[n++] = "--fp16-attention";
	for (int i = 0; i < o->dims.n && n < 58; i++)
		argv[n++] = "--dim", argv[n++] = (char *)o->dims.v[i];
	argv[n++] = "-o", argv[n++] = modir;
	argv[n] = NULL;
	double t0 = wl_now_ms();
	int st = run_child(argv, log, &d);
	free(exe);
	cJSON_AddNumberToObject(obj, "compile_ms", round(wl_now_ms() - t0));
	if (st != 0) {
		if (st < 0)
			err = xstrdup(d.msg);
		else {
			char *l = last_line(log);
			err = *l ? l : xprintf("the compiler exited with status %d", st);
			if (*l == 0)
				free(l);
		}
		goto done;
	}
	t0 = wl_now_ms();
	if (!o->pipeline) {
		if (cost_module(modir, obj, &d) != WL_OK)
			err = xstrdup(d.msg);
	} else {
		/* every program of the compiled pipeline; per token: "step" */
		char *pj = xprintf("%s/pipeline.json", modir);
		cJSON *p;
		if (json_read_file(pj, &p, &d) != WL_OK) {
			err = xstrdup(d.msg);
		} else {
			cJSON *progs = cJSON_AddArrayToObject(obj, "programs");
			const cJSON *e;
			double per_token = NAN;
			cJSON_ArrayForEach(e, jget(p, "programs")) {
				cJSON *po = cJSON_CreateObject();
				cJSON_AddStringToObject(po, "name", jstr(e, "name"));
				char *pd = xprintf("%s/%s", modir, jstr(e, "dir"));
				int rc = cost_module(pd, po, &d);
				free(pd);
				cJSON_AddItemToArray(progs, po);
				if (rc != WL_OK) {
					err = xprintf("program '%s': %s", jstr(e, "name"), d.msg);
					break;
				}
				if (!strcmp(jstr(e, "name"), "step") || isnan(per_token))
					per_token = jnum(po, "latency_ms");
				if (cJSON_GetArraySize(progs) == 1 || !strcmp(jstr(e, "name"), "step")) {
					/* the module-level figures: those of the step program */
					const char *keys[] = {"total_cycles", "latency_ms", "executions_per_s", "max_ocm_bytes",
					                      "spills", "ext_read_bytes", "ext_write_bytes", "mac_utilization",
					                      NULL};
					for (int i = 0; keys[i]; i++) {
						cJSON_DeleteItemFromObject(obj, keys[i]);
						cJSON_AddNumberToObject(obj, keys[i], jnum(po, keys[i]));
					}
					cJSON_DeleteItemFromObject(obj, "categories");
					cJSON_AddItemToObject(obj, "categories", cJSON_Duplicate(jget(po, "categories"), 1));
				}
			}
			if (!err) {
				cJSON_AddStringToObject(obj, "pipeline_kind", jstr(p, "kind"));
				cJSON_AddNumberToObject(obj, "per_token_ms", per_token);
				cJSON_AddNumberToObject(obj, "tokens_per_s", per_token > 0 ? 1e3 / per_token : 0);
			}
			cJSON_Delete(p);
		}
		free(pj);
	}
	cJSON_AddNumberToObject(obj, "cost_ms", round(wl_now_ms() - t0));
done:
	remove_tree(modir);
	cJSON_AddStringToObject(obj, "status", err ? "error" : "ok");
	if (err) {
		/* the compiler's usage line without its pointer to --help */
		char *see = strstr(err, " (see 'wlower");
		if (see)
			*see = 0;
		cJSON_DeleteItemFromObject(obj, "hardware");
		cJSON_AddStringToObject(obj, "error", err);
	}
	Diag wd = {0};
	int rc = json_write_atomic(o->point, obj, &wd);
	cJSON_Delete(obj);
	free(err);
	free(src);
	free(kind);
	free(modir);
	free(log);
	free(stem);
	free(base);
	if (rc != WL_OK)
		return cmd_error(CMD, &wd);
	return CMD_OK;
}

/* ---------------------------------------------------------------- collect */

static const char *const csv_cols[] = {
	"name", "status", "target", "cores", "ocm_bytes", "macs_per_pe", "ext_bw", "clock_hz", "pes_x_cores",
	"total_cycles", "latency_ms", "executions_per_s", "compute", "mac", "data_array", "data_ocm",
	"data_external", "max_ocm_bytes", "spills", "ext_read_bytes", "ext_write_bytes", "mac_utilization",
	"per_token_ms", "error", NULL,
};

/* The value of a results column for point p ("" when absent). */
static void col_value(const cJSON *p, const char *col, char *buf, size_t n)
{
	const cJSON *h = jget(p, "hardware"), *cat = jget(p, "categories"), *cfg = jget(p, "config");
	const cJSON *v = jget(p, col);
	if (!v && h)
		v = jget(h, col);
	if (!v && cat)
		v = jget(cat, col);
	if (!v && !strcmp(col, "target"))
		v = jget(cfg, "target");
	if (cJSON_IsString(v))
		snprintf(buf, n, "%s", v->valuestring);
	else if (cJSON_IsNumber(v) && isfinite(v->valuedouble))
		snprintf(buf, n, "%.10g", v->valuedouble);
	else
		buf[0] = 0;
}

static void put_csv_field(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s == '\n' ? ' ' : *s, f);
	}
	fputc('"', f);
}

static void put_html(FILE *f, const char *s)
{
	for (; *s; s++)
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
}

static bool point_ok(const cJSON *p) { return !strcmp(jstr(p, "status"), "ok"); }
static double pes_x_cores(const cJSON *p) { return jnum(jget(p, "hardware"), "pes_x_cores"); }
static const char *target_color(const char *t)
{
	return !strcmp(t, "qc-n") ? "#1b9e77" : !strcmp(t, "qc-p") ? "#d95f02" : !strcmp(t, "qc-u") ? "#7570b3" : "#777";
}
static const char *const cat_colors[CAT_COUNT] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2"};

static int cmp_latency(const void *a, const void *b)
{
	double x = jnum(*(const cJSON *const *)a, "latency_ms"), y = jnum(*(const cJSON *const *)b, "latency_ms");
	return x < y ? -1 : x > y;
}
static int cmp_resource(const void *a, const void *b)
{
	double x = pes_x_cores(*(const cJSON *const *)a), y = pes_x_cores(*(const cJSON *const *)b);
	if (x != y)
		return x < y ? -1 : 1;
	return cmp_latency(a, b);
}

/* The ok points not dominated in (PEs x cores, latency): both smaller or equal, one smaller. */
static int pareto_front(const cJSON **ok, int n, const cJSON **front)
{
	int m = 0;
	for (int i = 0; i < n; i++) {
		double ri = pes_x_cores(ok[i]), li = jnum(ok[i], "latency_ms");
		bool dom = false;
		for (int j = 0; j < n && !dom; j++) {
			double rj = pes_x_cores(ok[j]), lj = jnum(ok[j], "latency_ms");
			if (j != i && rj <= ri && lj <= li && (rj < ri || lj < li || j < i))
				dom = true;
		}
		if (!dom)
			front[m++] = ok[i];
	}
	qsort(front, (size_t)m, sizeof *front, cmp_resource);
	return m;
}

static const char html_head[] =
"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>wlower sweep</title>\n<style>\n"
"body{font:14px sans-serif;margin:1.5em;color:#222}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}\n"
"table{border-collapse:collapse;font-size:12px}th,td{border:1px solid #ccc;padding:2px 6px;text-align:right}\n"
"th{background:#eee;cursor:pointer;user-select:none}td.l,th.l{text-align:left}tr.err td{color:#b00}\n"
"svg text{font:11px sans-serif}.legend span{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px}\n"
"</style></head><body>\n";

static const char html_script[] =
"<script>\n"
"document.querySelectorAll('table.sortable').forEach(function(t){\n"
" t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){\n"
"  var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows),asc=th.dataset.dir!=='asc';\n"
"  t.querySelectorAll('th').forEach(function(h){delete h.dataset.dir;});th.dataset.dir=asc?'asc':'desc';\n"
"  rows.sort(function(x,y){var a=x.cells[i].dataset.v||x.cells[i].textContent,c=y.cells[i].dataset.v||y.cells[i].textContent;\n"
"   var na=parseFloat(a),nc=parseFloat(c),r=(!isNaN(na)&&!isNaN(nc))?na-nc:a.localeCompare(c);return asc?r:-r;});\n"
"  rows.forEach(function(r){b.appendChild(r);});});});});\n"
"</script>\n";

/* Latency per configuration: one horizontal bar each, fastest first. */
static void svg_latency(FILE *f, const cJSON **ok, int n)
{
	int lw = 260, bw = 520, rh = 14, h = n * rh + 30;
	double max = 0;
	for (int i = 0; i < n; i++)
		max = fmax(max, jnum(ok[i], "latency_ms"));
	fprintf(f, "<svg id=\"chart-latency\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">\n",
	        lw + bw + 90, h);
	for (int i = 0; i < n; i++) {
		double l = jnum(ok[i], "latency_ms");
		double w = max > 0 ? bw * l / max : 0;
		int y = 10 + i * rh;
		fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", lw - 6, y + 10);
		put_html(f, jstr(ok[i], "name"));
		fprintf(f, "</text><rect class=\"bar\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>"
		        "<text x=\"%.1f\" y=\"%d\">%.4g ms</text>\n",
		        lw, y, w > 0.5 ? w : 0.5, rh - 3, target_color(jstr(jget(ok[i], "config"), "target")),
		        lw + w + 4, y + 10, l);
	}
	fprintf(f, "</svg>\n");
}

/* Latency (log) against PEs x cores (log2), every ok point, the front joined. */
static void svg_pareto(FILE *f, const cJSON **ok, int n, const cJSON **front, int m)
{
	int W = 640, H = 380, L = 70, R = 20, T = 20, B = 50;
	double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
	for (int i = 0; i < n; i++) {
		double x = log2(pes_x_cores(ok[i])), y = log10(jnum(ok[i], "latency_ms"));
		x0 = fmin(x0, x), x1 = fmax(x1, x), y0 = fmin(y0, y), y1 = fmax(y1, y);
	}
	if (x1 - x0 < 1)
		x0 -= 0.5, x1 += 0.5;
	if (y1 - y0 < 0.1)
		y0 -= 0.05, y1 += 0.05;
#define PX(x) (L + ((x) - x0) / (x1 - x0) * (W - L - R))
#define PY(y) (H - B - ((y) - y0) / (y1 - y0) * (H - T - B))
	fprintf(f, "<svg id=\"chart-pareto\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">\n", W, H);
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n", L, T,
	        W - L - R, H - T - B);
	for (double e = ceil(x0); e <= floor(x1); e++)
		fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.0f</text>\n", PX(e), H - B + 15, pow(2, e));
	for (int i = 0; i <= 4; i++) {
		double y = y0 + (y1 - y0) * i / 4;
		fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n", L - 4, PY(y) + 4, pow(10, y));
	}
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">PEs x cores</text>\n", (L + W - R) / 2, H - 12);
	fprintf(f, "<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" text-anchor=\"middle\">latency (ms, log)"
	        "</text>\n", (T + H - B) / 2, (T + H - B) / 2);
	if (m > 1) {
		fprintf(f, "<polyline fill=\"none\" stroke=\"#000\" stroke-width=\"1.5\" points=\"");
		for (int i = 0; i < m; i++)
			fprintf(f, "%.1f,%.1f ", PX(log2(pes_x_cores(front[i]))), PY(log10(jnum(front[i], "latency_ms"))));
		fprintf(f, "\"/>\n");
	}
	for (int i = 0; i < n; i++) {
		bool on = false;
		for (int j = 0; j < m; j++)
			on |= front[j] == ok[i];
		fprintf(f, "<circle class=\"pt\" cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\" stroke=\"%s\"><title>",
		        PX(log2(pes_x_cores(ok[i]))), PY(log10(jnum(ok[i], "latency_ms"))), on ? 5 : 3,
		        target_color(jstr(jget(ok[i], "config"), "target")), on ? "#000" : "none");
		put_html(f, jstr(ok[i], "name"));
		fprintf(f, ": %.4g ms</title></circle>\n", jnum(ok[i], "latency_ms"));
	}
#undef PX
#undef PY
	fprintf(f, "</svg>\n");
}

/* Cycles per category of the front's points, stacked. */
static void svg_categories(FILE *f, const cJSON **front, int m)
{
	int lw = 260, bw = 520, rh = 18, h = m * rh + 20;
	double max = 0;
	for (int i = 0; i < m; i++)
		max = fmax(max, jnum(front[i], "total_cycles"));
	fprintf(f, "<svg id=\"chart-categories\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">\n",
	        lw + bw + 110, h);
	for (int i = 0; i < m; i++) {
		int y = 6 + i * rh;
		fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", lw - 6, y + 12);
		put_html(f, jstr(front[i], "name"));
		fprintf(f, "</text>");
		double x = lw;
		const cJSON *cat = jget(front[i], "categories");
		for (int t = 0; t < CAT_COUNT; t++) {
			double v = jnum(cat, cost_category_names[t]);
			double w = max > 0 && isfinite(v) ? bw * v / max : 0;
			fprintf(f, "<rect class=\"seg\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
			        "<title>%s %.0f</title></rect>", x, y, w, rh - 4, cat_colors[t], cost_category_names[t], v);
			x += w;
		}
		fprintf(f, "<text x=\"%.1f\" y=\"%d\">%.4g M</text>\n", x + 4, y + 12,
		        jnum(front[i], "total_cycles") / 1e6);
	}
	fprintf(f, "</svg>\n<div class=\"legend\">");
	for (int t = 0; t < CAT_COUNT; t++)
		fprintf(f, "<span style=\"background:%s\"></span>%s", cat_colors[t], cost_category_names[t]);
	fprintf(f, "</div>\n");
}

static void html_table(FILE *f, const cJSON *points, bool all)
{
	fprintf(f, "<table class=\"sortable\"><thead><tr>");
	for (int c = 0; csv_cols[c]; c++) {
		bool left = !strcmp(csv_cols[c], "name") || !strcmp(csv_cols[c], "status") ||
		            !strcmp(csv_cols[c], "target") || !strcmp(csv_cols[c], "error");
		fprintf(f, "<th%s>%s</th>", left ? " class=\"l\"" : "", csv_cols[c]);
	}
	fprintf(f, "</tr></thead><tbody>\n");
	const cJSON *p;
	cJSON_ArrayForEach(p, points) {
		if (!all && point_ok(p))
			continue;
		fprintf(f, "<tr%s>", point_ok(p) ? "" : " class=\"err\"");
		for (int c = 0; csv_cols[c]; c++) {
			char v[2048];
			col_value(p, csv_cols[c], v, sizeof v);
			bool left = !strcmp(csv_cols[c], "name") || !strcmp(csv_cols[c], "status") ||
			            !strcmp(csv_cols[c], "target") || !strcmp(csv_cols[c], "error");
			fprintf(f, "<td%s>", left ? " class=\"l\"" : "");
			put_html(f, v);
			fprintf(f, "</td>");
		}
		fprintf(f, "</tr>\n");
	}
	fprintf(f, "</tbody></table>\n");
}

static void write_html(FILE *f, const cJSON *res)
{
	const cJSON *points = jget(res, "points");
	int n = cJSON_GetArraySize(points), nok = 0;
	const cJSON **ok = calloc((size_t)n + 1, sizeof *ok), **front = calloc((size_t)n + 1, sizeof *front);
	if (!ok || !front)
		wl_die(__FILE__, __LINE__, "out of memory");
	const cJSON *p;
	cJSON_ArrayForEach(p, points)
		if (point_ok(p) && jnum(p, "latency_ms") > 0 && pes_x_cores(p) > 0)
			ok[nok++] = p;
	qsort(ok, (size_t)nok, sizeof *ok, cmp_latency);
	int m = pareto_front(ok, nok, front);
	fputs(html_head, f);
	fprintf(f, "<h1>wlower sweep: ");
	put_html(f, jstr(res, "model"));
	fprintf(f, "</h1>\n<p>%d configurations: %d costed, %d failed, %d missing. Cost model: docs/cost-model.md "
	        "(schedule.json only, no bit-exact run).</p>\n", n, nok,
	        (int)jnum(res, "failed"), (int)jnum(res, "missing"));
	fprintf(f, "<p class=\"legend\">targets:<span style=\"background:%s\"></span>qc-n<span style=\"background:%s\">"
	        "</span>qc-p<span style=\"background:%s\"></span>qc-u</p>\n", target_color("qc-n"),
	        target_color("qc-p"), target_color("qc-u"));
	fprintf(f, "<h2>Latency per configuration</h2>\n");
	svg_latency(f, ok, nok);
	fprintf(f, "<h2>Pareto front: latency against PEs x cores</h2>\n");
	svg_pareto(f, ok, nok, front, m);
	fprintf(f, "<h2>Cycles per category on the front (%d configurations)</h2>\n", m);
	svg_categories(f, front, m);
	if ((int)jnum(res, "failed") + (int)jnum(res, "missing") > 0) {
		fprintf(f, "<h2>Failed and missing configurations</h2>\n");
		html_table(f, points, false);
	}
	fprintf(f, "<h2>All configurations (click a column to sort)</h2>\n");
	html_table(f, points, true);
	fputs(html_script, f);
	fprintf(f, "</body></html>\n");
	free(ok);
	free(front);
}

static int do_collect(const char *dir)
{
	Diag d = {0};
	char *sj = xprintf("%s/sweep.json", dir);
	cJSON *sw;
	if (json_read_file(sj, &sw, &d) != WL_OK) {
		free(sj);
		return cmd_error(CMD, &d);
	}
	free(sj);
	cJSON *res = cJSON_CreateObject();
	cJSON_AddStringToObject(res, "format", "wlower-sweep-results");
	cJSON_AddNumberToObject(res, "version", 1);
	cJSON_AddStringToObject(res, "model", jstr(sw, "model"));
	cJSON *pts = cJSON_AddArrayToObject(res, "points");
	int failed = 0, missing = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, jget(sw, "points")) {
		const char *name = jstr(e, "name");
		char *pf = xprintf("%s/points/%s.json", dir, name);
		cJSON *p = NULL;
		Diag pd = {0};
		struct stat st;
		if (stat(pf, &st) != 0) {
			p = cJSON_CreateObject();
			cJSON_AddStringToObject(p, "name", name);
			cJSON_AddItemToObject(p, "config", cJSON_Duplicate(jget(e, "config"), 1));
			cJSON_AddStringToObject(p, "status", "missing");
			cJSON_AddStringToObject(p, "error", "not run yet (or still running)");
			missing++;
		} else if (json_read_file(pf, &p, &pd) != WL_OK) {
			p = cJSON_CreateObject();
			cJSON_AddStringToObject(p, "name", name);
			cJSON_AddItemToObject(p, "config", cJSON_Duplicate(jget(e, "config"), 1));
			cJSON_AddStringToObject(p, "status", "error");
			cJSON_AddStringToObject(p, "error", pd.msg);
			failed++;
		} else if (!point_ok(p)) {
			failed++;
		}
		cJSON_AddItemToArray(pts, p);
		free(pf);
	}
	cJSON_AddNumberToObject(res, "failed", failed);
	cJSON_AddNumberToObject(res, "missing", missing);
	cJSON_Delete(sw);
	int rc = WL_OK;
	char *rj = xprintf("%s/results.json", dir), *rc_ = xprintf("%s/results.csv", dir);
	char *rh = xprintf("%s/report.html", dir);
	AtomicFile af = {0};
	if (atomic_open(&af, rc_, &d) == WL_OK) {
		for (int c = 0; csv_cols[c]; c++)
			fprintf(af.f, "%s%s", c ? "," : "", csv_cols[c]);
		fputc('\n', af.f);
		const cJSON *p;
		cJSON_ArrayForEach(p, pts) {
			for (int c = 0; csv_cols[c]; c++) {
				char v[2048];
				col_value(p, csv_cols[c], v, sizeof v);
				if (c)
					fputc(',', af.f);
				put_csv_field(af.f, v);
			}
			fputc('\n', af.f);
		}
		rc = atomic_commit(&af, &d);
	} else {
		rc = WL_ERR;
	}
	if (rc == WL_OK)
		rc = json_write_atomic(rj, res, &d);
	if (rc == WL_OK && (rc = atomic_open(&af, rh, &d)) == WL_OK) {
		write_html(af.f, res);
		rc = atomic_commit(&af, &d);
	}
	int nres = cJSON_GetArraySize(pts);
	cJSON_Delete(res);
	free(rj);
	free(rc_);
	free(rh);
	if (rc != WL_OK)
		return cmd_error(CMD, &d);
	printf("wlower sweep: %d points (%d ok, %d failed, %d missing) -> %s/results.csv, results.json, report.html\n",
	       nres, nres - failed - missing, failed, missing, dir);
	return CMD_OK;
}

/* ---------------------------------------------------------------- generate and run */

typedef struct Point { char *name; char *val[L_COUNT]; } Point;

/* One point's job as a shell command, run in SWEEP_DIR. */
static void put_point_command(FILE *f, const SweepOpts *o, const char *exe, const char *model, const char *tranges,
                              const Point *p)
{
	put_shell_word(f, exe);
	fputs(" sweep --point points/", f);
	fputs(p->name, f);
	fputs(".json", f);
	if (o->pipeline) {
		fputs(" --pipeline ", f);
		put_shell_word(f, model);
	} else {
		fputc(' ', f);
		put_shell_word(f, model);
	}
	fputs(" --tranges ", f);
	put_shell_word(f, tranges);
	for (int k = 0; k < L_COUNT; k++)
		if (p->val[k]) {
			fprintf(f, " %s ", list_opt[k]);
			put_shell_word(f, p->val[k]);
		}
	put_compile_flags(f, o);
}

/* Writes path with the text of a memstream only if it changed (atomic). */
static int write_if_changed(const char *path, const char *text, size_t len, Diag *d)
{
	MappedFile mf;
	Diag ignore = {0};
	if (file_map(path, &mf, &ignore) == WL_OK) {
		bool same = mf.len == len && (len == 0 || memcmp(mf.addr, text, len) == 0);
		file_unmap(&mf);
		if (same)
			return WL_OK;
	}
	AtomicFile af = {0};
	if (atomic_open(&af, path, d) != WL_OK)
		return WL_ERR;
	fwrite(text, 1, len, af.f);
	return atomic_commit(&af, d);
}

static int generate(const SweepOpts *o, ValList lists[L_COUNT])
{
	Diag d = {0};
	const char *in = o->pipeline ? o->pipeline : o->model;
	char *model = realpath(in, NULL);
	if (!model) {
		diag_fail(&d, "%s: %s", in, strerror(errno));
		return cmd_error(CMD, &d);
	}
	char *tranges = realpath(o->tranges, NULL);
	if (!tranges) {
		diag_fail(&d, "%s: %s", o->tranges, strerror(errno));
		free(model);
		return cmd_error(CMD, &d);
	}
	if (o->pipeline) {
		char *src = NULL, *kind = NULL;
		if (pipeline_source(model, &src, &kind, &d) != WL_OK) {
			free(model), free(tranges);
			return cmd_error(CMD, &d);
		}
		free(src), free(kind);
	}
	char *pdir = xprintf("%s/points", o->out);
	if (mkdir_p(pdir, &d) != WL_OK) {
		free(pdir), free(model), free(tranges);
		return cmd_error(CMD, &d);
	}
	free(pdir);
	/* values that will fail their points: said now, failed per point later */
	for (int k = 0; k < L_COUNT; k++)
		for (int i = 0; i < lists[k].n; i++) {
			const char *why = value_problem(k, lists[k].v[i]);
			if (why)
				fprintf(stderr, "wlower sweep: warning: %s '%s': %s (its points will fail)\n", list_opt[k],
				        lists[k].v[i], why);
		}
	/* the cartesian product, in list order (target outermost) */
	int np = 1;
	for (int k = 0; k < L_COUNT; k++)
		np *= lists[k].n ? lists[k].n : 1;
	Point *pts = calloc((size_t)np, sizeof *pts);
	if (!pts)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < np; i++) {
		int r = i;
		for (int k = L_COUNT - 1; k >= 0; k--) {
			int n = lists[k].n ? lists[k].n : 1;
			pts[i].val[k] = lists[k].n ? lists[k].v[r % n] : NULL;
			r /= n;
		}
		pts[i].name = point_name(pts[i].val);
	}
	char *exe = self_exe();
	/* sweep.json: what collect reads */
	cJSON *sw = cJSON_CreateObject();
	cJSON_AddStringToObject(sw, "format", "wlower-sweep");
	cJSON_AddNumberToObject(sw, "version", 1);
	cJSON_AddStringToObject(sw, "model", model);
	cJSON_AddStringToObject(sw, "input", o->pipeline ? "pipeline" : "model");
	cJSON_AddStringToObject(sw, "tranges", tranges);
	cJSON *ja = cJSON_AddArrayToObject(sw, "points");
	for (int i = 0; i < np; i++) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "name", pts[i].name);
		cJSON *c = cJSON_AddObjectToObject(e, "config");
		for (int k = 0; k < L_COUNT; k++)
			if (pts[i].val[k])
				cJSON_AddStringToObject(c, list_key[k], pts[i].val[k]);
		cJSON_AddItemToArray(ja, e);
	}
	char *swp = xprintf("%s/sweep.json", o->out);
	char *swtext = cJSON_Print(sw);
	int rc = write_if_changed(swp, swtext, strlen(swtext), &d);
	free(swtext);
	free(swp);
	cJSON_Delete(sw);
	/* build.ninja */
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		wl_die(__FILE__, __LINE__, "out of memory");
	fprintf(f, "# build.ninja — written by `wlower sweep` (compiler/driver/cmd_sweep.c): one edge per\n"
	           "# configuration (compile + cost), then collect. Run: ninja -C THIS_DIR -j N\n"
	           "ninja_required_version = 1.5\n\n"
	           "rule point\n  command = $cmd\n  description = $name\n\n"
	           "rule collect\n  command = ");
	put_shell_word(f, exe);
	fprintf(f, " sweep --collect .\n  description = collect results.csv results.json report.html\n\n");
	for (int i = 0; i < np; i++) {
		fprintf(f, "build points/%s.json: point | ", pts[i].name);
		put_ninja_path(f, model);
		if (!o->pipeline) {
			fputc(' ', f);
			put_ninja_path(f, tranges);
		}
		fprintf(f, "\n  name = %s\n  cmd = ", pts[i].name);
		char *c = NULL;
		size_t cl = 0;
		FILE *cf = open_memstream(&c, &cl);
		put_point_command(cf, o, exe, model, tranges, &pts[i]);
		fclose(cf);
		for (char *q = c; *q; q++) {
			if (*q == '$')
				fputc('$', f);
			fputc(*q, f);
		}
		free(c);
		fputs("\n", f);
	}
	fprintf(f, "\nbuild results.csv results.json report.html: collect");
	for (int i = 0; i < np; i++)
		fprintf(f, " points/%s.json", pts[i].name);
	fprintf(f, " | sweep.json\ndefault results.csv\n");
	fclose(f);
	char *bn = xprintf("%s/build.ninja", o->out);
	if (rc == WL_OK)
		rc = write_if_changed(bn, text, len, &d);
	free(bn);
	free(text);
	bool slurm = o->scheduler && !strcmp(o->scheduler, "slurm");
	int status = CMD_OK;
	if (rc != WL_OK) {
		status = cmd_error(CMD, &d);
	} else if (slurm) {
		/* the points not done yet, one command a line; the array indexes them */
		char *sd = xprintf("%s/slurm", o->out), *jobs = xprintf("%s/jobs.txt", sd);
		char *script = xprintf("%s/sweep.sbatch", sd), *dirabs = realpath(o->out, NULL);
		int pending = 0;
		AtomicFile af = {0};
		if (mkdir_p(sd, &d) != WL_OK || atomic_open(&af, jobs, &d) != WL_OK) {
			status = cmd_error(CMD, &d);
		} else {
			for (int i = 0; i < np; i++) {
				char *pf = xprintf("%s/points/%s.json", o->out, pts[i].name);
				struct stat st;
				if (stat(pf, &st) != 0) {
					put_point_command(af.f, o, exe, model, tranges, &pts[i]);
					fputc('\n', af.f);
					pending++;
				}
				free(pf);
			}
			if (atomic_commit(&af, &d) != WL_OK || atomic_open(&af, script, &d) != WL_OK) {
				status = cmd_error(CMD, &d);
			} else {
				fprintf(af.f, "#!/bin/sh\n# sweep.sbatch — written by `wlower sweep --scheduler slurm`: task i runs\n"
				              "# line i+1 of jobs.txt (one configuration); then: wlower sweep --collect DIR\n"
				              "#SBATCH --job-name=wlower-sweep\n#SBATCH --array=0-%d\n"
				              "#SBATCH --output=slurm/task-%%a.out\n#SBATCH --chdir=", pending > 0 ? pending - 1 : 0);
				fputs(dirabs ? dirabs : o->out, af.f);
				fprintf(af.f, "\nset -eu\ncd ");
				put_shell_word(af.f, dirabs ? dirabs : o->out);
				fprintf(af.f, "\nline=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" slurm/jobs.txt)\n"
				              "[ -n \"$line\" ] || { echo \"sweep.sbatch: no job $SLURM_ARRAY_TASK_ID\" >&2; exit 1; }\n"
				              "eval \"exec $line\"\n");
				if (atomic_commit(&af, &d) != WL_OK)
					status = cmd_error(CMD, &d);
				else
					chmod(script, 0755);
			}
		}
		if (status == CMD_OK && !o->no_run) {
			if (pending == 0) {
				printf("wlower sweep: every point is done; collecting\n");
				fflush(stdout);
				status = do_collect(o->out);
			} else {
				char *argv[80];
				int n = 0;
				argv[n++] = "sbatch";
				if (o->wait)
					argv[n++] = "--wait";
				for (int i = 0; i < o->sbatch_args.n && n < 76; i++)
					argv[n++] = (char *)o->sbatch_args.v[i];
				argv[n++] = script;
				argv[n] = NULL;
				printf("wlower sweep: submitting %d of %d points as one array job (%s)\n", pending, np, script);
				fflush(stdout);
				int st = run_child(argv, NULL, &d);
				if (st != 0) {
					if (st > 0)
						diag_fail(&d, "sbatch exited with status %d", st);
					status = cmd_error(CMD, &d);
				} else if (o->wait) {
					status = do_collect(o->out);
				} else {
					printf("wlower sweep: when the job is done: wlower sweep --collect %s\n", o->out);
				}
			}
		}
		free(sd), free(jobs), free(script), free(dirabs);
	} else if (!o->no_run) {
		char jbuf[32];
		snprintf(jbuf, sizeof jbuf, "%ld", o->jobs > 0 ? o->jobs : (long)cmd_default_threads());
		char *argv[] = {"ninja", "-C", (char *)o->out, "-j", jbuf, NULL};
		fflush(stdout);
		int st = run_child(argv, NULL, &d);
		if (st != 0) {
			if (st > 0)
				diag_fail(&d, "ninja exited with status %d (SWEEP_DIR/points/*.log have the jobs' output)", st);
			status = cmd_error(CMD, &d);
		}
	} else {
		printf("wlower sweep: %d points; run: ninja -C %s\n", np, o->out);
	}
	for (int i = 0; i < np; i++)
		free(pts[i].name);
	free(pts);
	free(exe);
	free(model);
	free(tranges);
	return status;
}

int cmd_sweep(int argc, char **argv)
{
	if (opt_help(argc, argv, usage_sweep))
		return CMD_OK;
	SweepOpts o = {0};
	ValList lists[L_COUNT] = {{0}};
	int rc = opt_parse(CMD, sweep_opts, argc, argv, &o, &o.model, "model", NULL);
	if (rc != CMD_OK)
		goto out;
	if (o.collect) {
		if (o.model || o.point || o.out || o.pipeline)
			rc = cmd_usage(CMD, "%s", "--collect SWEEP_DIR takes no other arguments");
		else
			rc = do_collect(o.collect);
		goto out;
	}
	if (o.point) {
		if (!o.tranges || (!o.model) == (!o.pipeline))
			rc = cmd_usage(CMD, "%s", "--point needs MODEL or --pipeline, and --tranges");
		else
			rc = do_point(&o);
		goto out;
	}
	if (o.model && o.pipeline) {
		rc = cmd_usage(CMD, "%s", "give MODEL or --pipeline PIPE_DIR, not both");
		goto out;
	}
	if (!o.model && !o.pipeline) {
		rc = cmd_usage(CMD, "%s", "no model given (MODEL or --pipeline PIPE_DIR)");
		goto out;
	}
	if (!o.tranges) {
		rc = cmd_usage(CMD, "%s", "--tranges FILE is needed (from 'wlower calibrate')");
		goto out;
	}
	if (!o.out) {
		rc = cmd_usage(CMD, "%s", "no -o SWEEP_DIR given");
		goto out;
	}
	if (!o.list[L_TARGET]) {
		rc = cmd_usage(CMD, "%s", "no --target list given (e.g. --target qc-n,qc-p,qc-u)");
		goto out;
	}
	if (o.scheduler && strcmp(o.scheduler, "ninja") && strcmp(o.scheduler, "slurm")) {
		rc = cmd_usage(CMD, "--scheduler: unknown scheduler '%s' (ninja, slurm)", o.scheduler);
		goto out;
	}
	if ((o.wait || o.sbatch_args.n) && !(o.scheduler && !strcmp(o.scheduler, "slurm"))) {
		rc = cmd_usage(CMD, "%s", "--wait and --sbatch-arg are for --scheduler slurm");
		goto out;
	}
	for (int k = 0; k < L_COUNT && rc == CMD_OK; k++)
		if (o.list[k])
			rc = split_list(list_opt[k], o.list[k], &lists[k]);
	if (rc == CMD_OK)
		rc = generate(&o, lists);
out:
	for (int k = 0; k < L_COUNT; k++) {
		for (int i = 0; i < lists[k].n; i++)
			free(lists[k].v[i]);
		free(lists[k].v);
	}
	opt_free_lists(sweep_opts, &o);
	return rc;
}
