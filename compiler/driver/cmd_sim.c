/* cmd_sim.c — `wlower sim DIR`: the command line; the work is
 * targets/chimera/sim/sim.c (sim_run). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "compiler/driver/commands.h"
#include "targets/chimera/sim/sim.h"

static const char CMD[] = "sim";

static const char usage_sim[] =
"usage: wlower sim DIR --input NAME=FILE.npy ... --output-dir OUT [--compare NAME=REF.npy ...]\n"
"       [--quiet | --verbose] [--cost-only] [--calibrate]\n"
"\n"
"Builds DIR/module.cpp (a module compiled with --target qc-n|qc-p|qc-u) against\n"
"the CCL emulation with g++ (cached by content hash under $XDG_CACHE_HOME/wlower/sim\n"
"or ~/.cache/wlower/sim; the CCL folder is $WLOWER_CCL_DIR or the built-in one),\n"
"runs it bit-exactly, writes OUT/<output>.npy, checks the run's MAC, ALU and DMA\n"
"counts against DIR/schedule.json, and prints the configuration, the report,\n"
"'TotalCycles: N' and cycles per category (docs/cost-model.md). Writes\n"
"OUT/profile_core<i>.json and OUT/profile.svg.\n"
"\n"
"  --input NAME=FILE     module input NAME (.npy; float32 inputs are quantized)\n"
"  --output-dir OUT      folder for outputs, counters and profiles: written as\n"
"                        OUT.tmp.XXXXXX and renamed; an existing OUT is replaced\n"
"                        only when empty or made by wlower (its .wlower-outputs)\n"
"  --compare NAME=REF    report MSE, PSNR and max|e| of output NAME against REF.npy\n"
"  --quiet               no build/progress messages on stderr\n"
"  --verbose             build messages on stderr also when it is not a terminal\n"
"                        (without it, they appear on a terminal only, so that an\n"
"                        error is the one line on stderr)\n"
"  --cost-only           skip build and run: cost model from schedule.json alone\n"
"  --calibrate           also print the raw figures per kernel class, the constants\n"
"                        and, for the vendor's two Whisper-tiny points (encoder,\n"
"                        decoder prefill), the residuals of v1 and v2 per category\n"
"  -h, --help            this help\n"
"\n"
"exit status: 0 success, 1 bad input (one line), 2 usage error\n";

typedef struct SimOpts {
	SimArgs a;
	OptList in, cmp;
	bool verbose;
} SimOpts;

static const OptSpec sim_opts[] = {
	{"--input", NULL, OPT_LIST, offsetof(SimOpts, in)},
	{"--compare", NULL, OPT_LIST, offsetof(SimOpts, cmp)},
	{"--output-dir", NULL, OPT_STRING, offsetof(SimOpts, a.outdir)},
	{"--quiet", NULL, OPT_FLAG, offsetof(SimOpts, a.quiet)},
	{"--verbose", NULL, OPT_FLAG, offsetof(SimOpts, verbose)},
	{"--cost-only", NULL, OPT_FLAG, offsetof(SimOpts, a.cost_only)},
	{"--calibrate", NULL, OPT_FLAG, offsetof(SimOpts, a.calibrate)},
	OPT_END,
};

static int parse_args(int argc, char **argv, SimOpts *o)
{
	SimArgs *a = &o->a;
	int rc = opt_parse(CMD, sim_opts, argc, argv, o, &a->dir, "module folder", NULL);
	if (rc == CMD_OK)
		rc = CMD_BINDINGS(CMD, "--input", &o->in, "--input '%s' given twice", &a->in);
	a->nin = a->in ? o->in.n : 0;
	if (rc == CMD_OK)
		rc = CMD_BINDINGS(CMD, "--compare", &o->cmp, "--compare '%s' given twice", &a->cmp);
	a->ncmp = a->cmp ? o->cmp.n : 0;
	if (rc != CMD_OK)
		return rc;
	if (!a->dir)
		return cmd_usage(CMD, "no module folder given");
	if (!a->outdir)
		return cmd_usage(CMD, "no --output-dir given");
	if (a->quiet && o->verbose)
		return cmd_usage(CMD, "--quiet and --verbose cannot be combined");
	if (!o->verbose && !isatty(2))
		a->quiet = true;       /* build messages: terminals, or --verbose */
	return CMD_OK;
}

int cmd_sim(int argc, char **argv)
{
	if (opt_help(argc, argv, usage_sim))
		return CMD_OK;
	SimOpts o = {0};
	int status = parse_args(argc, argv, &o);
	if (status == CMD_OK) {
		Diag d = {0};
		if (sim_run(&o.a, &d) != WL_OK)
			status = cmd_error(CMD, &d);
	}
	for (int k = 0; k < o.a.nin; k++)
		free(o.a.in[k].name);
	for (int k = 0; k < o.a.ncmp; k++)
		free(o.a.cmp[k].name);
	free(o.a.in);
	free(o.a.cmp);
	opt_free_lists(sim_opts, &o);
	return status;
}
