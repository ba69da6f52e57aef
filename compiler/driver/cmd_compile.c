/* cmd_compile.c — `wlower MODEL ...`: the compiler. It reads top to bottom
 * in compile(): read → passes (the table in passes/passes.c) → emit, and in
 * compile_target(): read → passes → a target writes the module directory.
 * Exit status: 0 success, 1 bad input (one line naming file, node, tensor),
 * 2 usage. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "compiler/driver/commands.h"
#include "targets/target.h"

enum { EXIT_BAD_INPUT = 1, EXIT_USAGE = 2 };

static const char *prog = "wlower";

static const char usage_main[] =
"usage: wlower MODEL [options]\n"
"       wlower COMMAND [args]      (run, calibrate, quantize, sim; see 'wlower COMMAND --help')\n"
"\n"
"Reads MODEL (.onnx binary, or .onnxtxt ONNX textual syntax), runs the pass\n"
"pipeline and writes the result.\n"
"\n"
"output:\n"
"  -o FILE               write the result to FILE (atomically: nothing is left on error);\n"
"                        -o - writes text to stdout\n"
"  --emit onnx|onnx-text format of the result; default: from -o's extension\n"
"                        (.onnx → onnx, else onnx-text); text goes to stdout without -o\n"
"  --print-weights       print every initializer in full (default: tensors with more than\n"
"                        16 elements print as a placeholder with dtype, shape and sha256)\n"
"  --external-data       with --emit onnx: store every initializer of 1 KiB or more in\n"
"                        FILE.data (tensors that were external stay external anyway;\n"
"                        models over 2 GiB always use it)\n"
"\n"
"pipeline:\n"
"  --passes=A,B,...      run exactly these passes or groups, in this order\n"
"  --stop-after=NAME     run the default pipeline up to and including NAME\n"
"  --print-after=NAME    print the IR after pass or group NAME (to stderr)\n"
"  --print-after-all     print the IR after every pass (to stderr)\n"
"  --time-passes         print the wall time of each pass (to stderr)\n"
"  --verify              run the IR verifier after every pass (always on in debug builds)\n"
"  --stats               print read / pass / write times and peak memory (to stderr)\n"
"  --list-passes         list the passes and groups, with their contracts\n"
"\n"
"fusion (group 'fuse'):\n"
"  --prepend-logmel      the input becomes the waveform [1,480000]; an ai.wlower.LogMel\n"
"                        node computes Whisper's log-mel feeding the old input\n"
"  --append-argmax       logits outputs become int32 token ids (ai.wlower.GreedyArgMax)\n"
"  --fp16-attention      mark the attention-adjacent edges float16\n"
"\n"
"compilation to a target (writes the module directory DIR, atomically):\n"
"  --target qc-n|qc-p|qc-u|host -o DIR\n"
"                        qc-*: Chimera GPNPU (8x8, 16x16, 32x32 PEs): CCL C++ + schedule.json,\n"
"                        run with 'wlower sim DIR'; host: native module.so (LLVM), run\n"
"                        with 'wlower run DIR'\n"
"  --tranges FILE        calibration ranges (wlower calibrate); required for qc-*\n"
"  --print-fracbits      print the fractional-bits table (name, op, range, bits)\n"
"  --cores N             qc-*: cores 1..4 (default 4)\n"
"  --ocm SIZE            qc-*: on-chip memory per module, e.g. 32MB (default 16MB)\n"
"  --macs-per-pe N       qc-*: MACs per PE per cycle (default 16)\n"
"  --clock FREQ          qc-*: clock, e.g. 1.7GHz (default)\n"
"  --ext-bw BW           qc-*: external (DDR) bandwidth, e.g. 128GBps (default)\n"
"  --cpu NAME            host: CPU to tune for: native (default), x86-64-v3, skylake-avx512...\n"
"  --threads N           host: default thread count recorded in the manifest (0 = all cores)\n"
"  --emit llvm-ir        host: also write DIR/module.ll (the optimized LLVM IR)\n"
"\n"
"  -h, --help            this help\n"
"  --version             print the version\n"
"\n"
"exit status: 0 success, 1 bad input, 2 usage error\n";

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "%s: ", prog);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (see '%s --help')\n", prog);
	return EXIT_USAGE;
}

static int bad_input(const Diag *d)
{
	fprintf(stderr, "%s: error: %s\n", prog, d->set ? d->msg : "unknown error");
	return EXIT_BAD_INPUT;
}

typedef struct Options {
	const char *model, *out, *emit, *tranges, *target;
	const char *cores, *ocm, *macs_per_pe, *clock, *ext_bw, *cpu, *threads;
	bool print_weights, external_data, list_passes, stats, print_fracbits;
	PipelineOptions pipe;
} Options;

/* "--name=value" or "--name value"; returns the value or NULL. */
static const char *opt_value(const char *name, int argc, char **argv, int *i, int *err)
{
	size_t n = strlen(name);
	const char *a = argv[*i];
	if (strncmp(a, name, n) != 0)
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n] != 0)
		return NULL;
	if (*i + 1 >= argc) {
		usage_error("option '%s' needs a value", name);
		*err = 1;
		return NULL;
	}
	return argv[++*i];
}

static int parse_args(int argc, char **argv, Options *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		int err = 0;
#define VAL(name, field) \
		if ((v = opt_value(name, argc, argv, &i, &err)) || err) { \
			if (err) return EXIT_USAGE; \
			field = v; continue; }
		if (strcmp(a, "-o") == 0) {
			if (i + 1 >= argc)
				return usage_error("option '%s' needs a value", "-o");
			o->out = argv[++i];
			continue;
		}
		VAL("--output", o->out)
		VAL("--emit", o->emit)
		VAL("--passes", o->pipe.passes)
		VAL("--stop-after", o->pipe.stop_after)
		VAL("--print-after", o->pipe.print_after)
		VAL("--tranges", o->tranges)
		VAL("--target", o->target)
		VAL("--cores", o->cores)
		VAL("--ocm", o->ocm)
		VAL("--macs-per-pe", o->macs_per_pe)
		VAL("--clock", o->clock)
		VAL("--ext-bw", o->ext_bw)
		VAL("--cpu", o->cpu)
		VAL("--threads", o->threads)
#undef VAL
		if (strcmp(a, "--print-after-all") == 0) o->pipe.print_after_all = true;
		else if (strcmp(a, "--time-passes") == 0) o->pipe.time_passes = true;
		else if (strcmp(a, "--verify") == 0) o->pipe.verify_each = true;
		else if (strcmp(a, "--print-weights") == 0) o->print_weights = true;
		else if (strcmp(a, "--external-data") == 0) o->external_data = true;
		else if (strcmp(a, "--list-passes") == 0) o->list_passes = true;
		else if (strcmp(a, "--stats") == 0) o->stats = true;
		else if (strcmp(a, "--print-fracbits") == 0) o->print_fracbits = true;
		else if (strcmp(a, "--prepend-logmel") == 0) o->pipe.fuse.prepend_logmel = true;
		else if (strcmp(a, "--append-argmax") == 0) o->pipe.fuse.append_argmax = true;
		else if (strcmp(a, "--fp16-attention") == 0) o->pipe.fuse.fp16_attention = true;
		else if (a[0] == '-' && a[1] != 0)
			return usage_error("unknown option '%s'", a);
		else if (o->model)
			return usage_error("more than one model given ('%s')", a);
		else
			o->model = a;
	}
	return 0;
}

static bool ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return n >= m && strcmp(s + n - m, suf) == 0;
}

static void list_passes(void)
{
	printf("passes, in default pipeline order (group: pass):\n");
	for (int i = 0; i < pass_count; i++) {
		const Pass *p = &pass_table[i];
		printf("  %-14s %-26s %s\n", p->group ? p->group : "-", p->name, p->help);
		printf("  %-14s %-26s requires: %s; invalidates: %s\n", "", "", p->requires, p->invalidates);
	}
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static long peak_rss_kb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static void print_stats(const Module *m, double t_read, long rss_read, double t_pass, double t_write)
{
	size_t mapped = 0;
	for (int i = 0; i < m->nmaps; i++)
		mapped += m->maps[i].len;
	fprintf(stderr, "stats: read %.1f ms (peak RSS %.1f MB after read), passes %.1f ms, write %.1f ms; "
	        "arena %.1f MB, mapped %.1f MB, peak RSS %.1f MB\n",
	        t_read, rss_read / 1e3, t_pass, t_write, arena_bytes(m->arena) / 1e6, mapped / 1e6,
	        peak_rss_kb() / 1e3);
}

/* The whole compiler, top to bottom. */
static int compile(Options *o)
{
	Diag d = {0};
	Module *m = NULL;
	PrintOptions po = {.print_weights = o->print_weights};
	o->pipe.print = po;

	double t0 = now_ms();
	if (model_read(o->model, &m, &d) != WL_OK)
		return bad_input(&d);
	double t1 = now_ms();
	long rss_read = peak_rss_kb();
	if (ir_verify(m, &d) != WL_OK) {
		module_free(m);
		return bad_input(&d);
	}
	if (pipeline_run(m, &o->pipe, &d) != WL_OK) {
		module_free(m);
		return bad_input(&d);
	}
	double t2 = now_ms();
	int rc = WL_OK;
	if (strcmp(o->emit, "onnx") == 0) {
		ExportOptions eo = {.all_external = o->external_data};
		rc = onnx_export_file(m, o->out, &eo, &d);
	} else if (o->out && strcmp(o->out, "-") != 0) {
		rc = text_print_file(m, o->out, &po, &d);
	} else {
		rc = text_print(m, stdout, &po);
		if (rc == WL_OK && (fflush(stdout) != 0 || ferror(stdout)))
			rc = diag_fail(&d, "<stdout>: write failed");
	}
	if (o->stats)
		print_stats(m, t1 - t0, rss_read, t2 - t1, now_ms() - t2);
	module_free(m);
	return rc == WL_OK ? 0 : bad_input(&d);
}

/* "32MB", "16MiB", "4096", "1.5GB" (decimal K/M/G = 2^10.. for sizes, as the
 * vendor's tables mean MB = MiB), "1.7GHz", "128GBps", "128GB/s". unit: the
 * suffix after the multiplier ("B", "Hz", "Bps"), optional. */
static int parse_quantity(const char *s, const char *unit, bool binary, double *out)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || !(v > 0))
		return -1;
	double k = binary ? 1024.0 : 1000.0;
	if (*end == 'K' || *end == 'k') { v *= k; end++; }
	else if (*end == 'M') { v *= k * k; end++; }
	else if (*end == 'G') { v *= k * k * k; end++; }
	if (binary && *end == 'i')
		end++;
	if (*end && strcmp(end, unit) != 0 && !(strcmp(unit, "Bps") == 0 && strcmp(end, "B/s") == 0))
		return -1;
	*out = v;
	return 0;
}

static int compile_target(Options *o, TargetKind kind)
{
	bool chimera = kind != TARGET_HOST;
	TargetOptions to = {.kind = kind, .target_name = o->target, .model_path = o->model,
	                    .tranges_path = o->tranges, .print_fracbits = o->print_fracbits,
	                    .fuse = o->pipe.fuse, .t_start_ms = now_ms()};
	chimera_config_preset(chimera ? kind : TARGET_QC_P, &to.chimera);
	to.host.cpu = o->cpu ? o->cpu : "native";
	double q;
	if (o->cores) {
		char *end;
		long c = strtol(o->cores, &end, 10);
		if (*end || c < 1 || c > 4)
			return usage_error("--cores: '%s' is not 1..4", o->cores);
		to.chimera.cores = (int)c;
	}
	if (o->ocm) {
		if (parse_quantity(o->ocm, "B", true, &q) || q < 65536 || q > 1e12)
			return usage_error("--ocm: '%s' is not a size like 32MB (at least 64KB)", o->ocm);
		to.chimera.ocm_bytes = (uint64_t)q;
	}
	if (o->macs_per_pe) {
		char *end;
		long c = strtol(o->macs_per_pe, &end, 10);
		if (*end || c < 1 || c > 1024)
			return usage_error("--macs-per-pe: '%s' is not 1..1024", o->macs_per_pe);
		to.chimera.macs_per_pe = (int)c;
	}
	if (o->clock) {
		if (parse_quantity(o->clock, "Hz", false, &q) || q < 1e6)
			return usage_error("--clock: '%s' is not a frequency like 1.7GHz", o->clock);
		to.chimera.clock_hz = q;
	}
	if (o->ext_bw) {
		if (parse_quantity(o->ext_bw, "Bps", false, &q) || q < 1e6)
			return usage_error("--ext-bw: '%s' is not a bandwidth like 128GBps", o->ext_bw);
		to.chimera.ext_bw = q;
	}
	if (o->threads) {
		char *end;
		long c = strtol(o->threads, &end, 10);
		if (*end || c < 0 || c > 1024)
			return usage_error("--threads: '%s' is not 0..1024", o->threads);
		to.host.threads = (int)c;
	}
	if (o->emit) {
		if (kind != TARGET_HOST || strcmp(o->emit, "llvm-ir") != 0)
			return usage_error("--emit %s: with --target, only '--emit llvm-ir' (host) is accepted", o->emit);
		to.host.emit_llvm_ir = true;
	}
	if (!o->out)
		return usage_error("--target %s needs -o DIR", o->target);
	if (chimera && !o->tranges)
		return usage_error("--target %s needs --tranges FILE (from 'wlower calibrate')", o->target);
	if (o->pipe.passes || o->pipe.stop_after)
		return usage_error("%s", "--passes/--stop-after cannot be combined with --target");
	if (chimera) {
		o->pipe.numerics.tranges_path = o->tranges;
		o->pipe.numerics.print_fracbits = o->print_fracbits;
	}

	Diag d = {0};
	Module *m = NULL;
	if (model_read(o->model, &m, &d) != WL_OK)
		return bad_input(&d);
	if (ir_verify(m, &d) != WL_OK || pipeline_run(m, &o->pipe, &d) != WL_OK) {
		module_free(m);
		return bad_input(&d);
	}
	const char *names[256];
	int nn = 0;
	for (int i = 0; i < pass_count && nn < 256; i++)
		if (chimera || !pass_table[i].group || strcmp(pass_table[i].group, "numerics") != 0)
			names[nn++] = pass_table[i].name;
	to.passes_run = names;
	to.npasses_run = nn;

	char *tmp = NULL;
	int rc = outdir_begin(o->out, &tmp, &d);
	if (rc == WL_OK) {
		rc = chimera ? chimera_compile(m, &to, tmp, &d) : host_compile(m, &to, tmp, &d);
		if (rc == WL_OK)
			rc = outdir_commit(tmp, o->out, &d);
		if (rc != WL_OK)
			outdir_abort(tmp);
	}
	free(tmp);
	if (o->stats)
		print_stats(m, 0, peak_rss_kb(), 0, now_ms() - to.t_start_ms);
	module_free(m);
	if (rc != WL_OK)
		return bad_input(&d);
	fprintf(stderr, "%s: compiled %s for %s in %.0f ms -> %s\n", prog, o->model, o->target,
	        now_ms() - to.t_start_ms, o->out);
	return 0;
}

int cmd_compile(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage_main, stderr);
		return EXIT_USAGE;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage_main, stdout);
			return 0;
		}
		if (strcmp(argv[i], "--version") == 0) {
			printf("wlower %s\n", WLOWER_VERSION);
			return 0;
		}
	}
	Options o = {0};
	int rc = parse_args(argc, argv, &o);
	if (rc)
		return rc;
	if (o.list_passes) {
		list_passes();
		return 0;
	}
	if (!o.model)
		return usage_error("%s", "no model given");
	if (o.target) {
		TargetKind kind = target_parse(o.target);
		if (kind == TARGET_NONE)
			return usage_error("--target: unknown target '%s' (qc-n, qc-p, qc-u, host)", o.target);
		return compile_target(&o, kind);
	}
	if (o.cores || o.ocm || o.macs_per_pe || o.clock || o.ext_bw || o.cpu || o.threads)
		return usage_error("%s", "the hardware options (--cores, --ocm, ..., --cpu, --threads) need --target");
	if (o.print_fracbits && !o.tranges)
		return usage_error("%s", "--print-fracbits needs --tranges FILE");
	/* Without --target, --tranges runs the numerics group in the pipeline
	 * (e.g. --stop-after=assign-fracbits --print-fracbits to see the formats). */
	o.pipe.numerics.tranges_path = o.tranges;
	o.pipe.numerics.print_fracbits = o.print_fracbits;
	if (o.pipe.passes && o.pipe.stop_after)
		return usage_error("%s", "--passes and --stop-after cannot be combined");
	if (!o.emit)
		o.emit = (o.out && ends_with(o.out, ".onnx")) ? "onnx" : "onnx-text";
	if (strcmp(o.emit, "onnx") != 0 && strcmp(o.emit, "onnx-text") != 0)
		return usage_error("--emit: unknown format '%s' (onnx, onnx-text)", o.emit);
	if (strcmp(o.emit, "onnx") == 0 && (!o.out || strcmp(o.out, "-") == 0))
		return usage_error("%s", "--emit onnx needs -o FILE");
	return compile(&o);
}
