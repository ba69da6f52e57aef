/* cmd_sim.c — `wlower sim DIR`: the command line; the work is
 * targets/chimera/sim/sim.c (sim_run). */
#include <stdlib.h>
#include <string.h>
#include "compiler/driver/commands.h"
#include "targets/chimera/sim/sim.h"

static const char CMD[] = "sim";

static const char usage_sim[] =
"usage: wlower sim DIR --input NAME=FILE.npy ... --output-dir OUT [--compare NAME=REF.npy ...]\n"
"       [--quiet] [--cost-only] [--calibrate]\n"
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
"  --output-dir OUT      folder for outputs, counters and profiles (created)\n"
"  --compare NAME=REF    report MSE, PSNR and max|e| of output NAME against REF.npy\n"
"  --quiet               no build/progress messages on stderr\n"
"  --cost-only           skip build and run: cost model from schedule.json alone\n"
"  --calibrate           also print the raw figures per category and the constants\n"
"                        that would reproduce the vendor's Whisper-tiny encoder profile\n"
"  -h, --help            this help\n"
"\n"
"exit status: 0 success, 1 bad input (one line), 2 usage error\n";

static int add_bind(const char *opt, const char *v, Bind *v_arr, int *n)
{
	Bind *b = &v_arr[*n];
	if (!cmd_split_binding(v, &b->name, &b->file))
		return cmd_usage(CMD, "%s '%s': expected NAME=FILE.npy", opt, v);
	for (int k = 0; k < *n; k++)
		if (!strcmp(v_arr[k].name, b->name)) {
			cmd_usage(CMD, "%s '%s' given twice", opt, b->name);
			free(b->name);
			return CMD_USAGE;
		}
	(*n)++;
	return CMD_OK;
}

static int parse_args(int argc, char **argv, SimArgs *a)
{
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i], *v;
		int r;
		if ((r = cmd_opt(CMD, "--input", argc, argv, &i, &v)) != 0) {
			if (r < 0 || add_bind("--input", v, a->in, &a->nin) != CMD_OK)
				return CMD_USAGE;
			continue;
		}
		if ((r = cmd_opt(CMD, "--compare", argc, argv, &i, &v)) != 0) {
			if (r < 0 || add_bind("--compare", v, a->cmp, &a->ncmp) != CMD_OK)
				return CMD_USAGE;
			continue;
		}
		if ((r = cmd_opt(CMD, "--output-dir", argc, argv, &i, &v)) != 0) {
			if (r < 0)
				return CMD_USAGE;
			a->outdir = v;
			continue;
		}
		if (!strcmp(s, "--quiet")) { a->quiet = true; continue; }
		if (!strcmp(s, "--cost-only")) { a->cost_only = true; continue; }
		if (!strcmp(s, "--calibrate")) { a->calibrate = true; continue; }
		if (s[0] == '-' && s[1] != 0)
			return cmd_usage(CMD, "unknown option '%s'", s);
		if (a->dir)
			return cmd_usage(CMD, "more than one module folder given ('%s')", s);
		a->dir = s;
	}
	if (!a->dir)
		return cmd_usage(CMD, "no module folder given");
	if (!a->outdir)
		return cmd_usage(CMD, "no --output-dir given");
	return CMD_OK;
}


int cmd_sim(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(usage_sim, stdout);
			return CMD_OK;
		}
	SimArgs a = {0};
	a.in = calloc((size_t)argc + 1, sizeof *a.in);
	a.cmp = calloc((size_t)argc + 1, sizeof *a.cmp);
	if (!a.in || !a.cmp)
		wl_die(__FILE__, __LINE__, "out of memory");
	int status = parse_args(argc, argv, &a);
	if (status == CMD_OK) {
		Diag d = {0};
		if (sim_run(&a, &d) != WL_OK)
			status = cmd_error(CMD, &d);
	}
	for (int i = 0; i < a.nin; i++)
		free(a.in[i].name);
	for (int i = 0; i < a.ncmp; i++)
		free(a.cmp[i].name);
	free(a.in);
	free(a.cmp);
	return status;
}
