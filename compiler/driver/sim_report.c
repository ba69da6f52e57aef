/* sim_report.c — the simulated device's part of the reports of `wlower
 * generate` and `wlower transcribe` on qc-* pipelines (commands.h): per
 * program the cost model's cycles per run, the runs, the fixed-point stores
 * that saturated per run (a run is one position of a step program) and the
 * vendor's per-run table (`wlower sim`'s configuration and report). What a
 * token or a window costs is the command's own sum over these. */
#include <stdio.h>
#include <string.h>
#include "compiler/driver/commands.h"
#include "runtime/pipelines/pipeline.h"

void sim_totals_collect(SimTotals *t, Program *const *progs, const char *const *names, int n)
{
	memset(t, 0, sizeof *t);
	for (int i = 0; i < n && i < SIM_MAX_PROGRAMS; i++) {
		SimProg *sp = &t->prog[t->nprog++];
		const ProgramStats *st = program_stats(progs[i]);
		sp->name = names[i];
		sp->prog = progs[i];
		sp->runs = st->runs;
		if (!st->cycles_per_run)
			continue;                  /* not on the simulated device (ref, host) */
		t->on = true;
		t->clock_hz = st->clock_hz;
		sp->simulated = true;
		sp->cycles_per_run = st->cycles_per_run;
		sp->first_kernel = st->first_saturated_kernel;
		sp->sat_runs = cJSON_CreateArray();
		for (int r = 0; st->saturated && r < st->runs; r++) {
			sp->saturated += st->saturated[r];
			if (!st->saturated[r])
				continue;
			sp->nsat++;
			cJSON *e = cJSON_CreateArray();
			cJSON_AddItemToArray(e, cJSON_CreateNumber(r));
			cJSON_AddItemToArray(e, cJSON_CreateNumber((double)st->saturated[r]));
			cJSON_AddItemToArray(sp->sat_runs, e);
		}
	}
}

const SimProg *sim_totals_find(const SimTotals *t, const char *name)
{
	for (int i = 0; i < t->nprog; i++)
		if (strcmp(t->prog[i].name, name) == 0)
			return &t->prog[i];
	return NULL;
}

void sim_totals_print(const SimTotals *t, const char *unit, cJSON *progs)
{
	for (int i = 0; i < t->nprog; i++) {
		const SimProg *sp = &t->prog[i];
		if (!sp->simulated) {
			fprintf(stderr, "program '%s': %d runs, not simulated (runner %s)\n", sp->name, sp->runs,
			        program_runner(sp->prog));
			if (progs) {
				cJSON *p = cJSON_CreateObject();
				cJSON_AddStringToObject(p, "name", sp->name);
				cJSON_AddStringToObject(p, "runner", program_runner(sp->prog));
				cJSON_AddNumberToObject(p, "runs", sp->runs);
				cJSON_AddItemToArray(progs, p);
			}
			continue;
		}
		fprintf(stderr, "program '%s': %llu cycles per run (%.4g ms), %d runs; saturated fixed-point stores: %llu",
		        sp->name, (unsigned long long)sp->cycles_per_run, (double)sp->cycles_per_run / t->clock_hz * 1e3,
		        sp->runs, (unsigned long long)sp->saturated);
		if (sp->nsat) {
			fprintf(stderr, " at %d of %d %ss (%s:count", sp->nsat, sp->runs, unit, unit);
			int k = 0;
			const cJSON *e;
			cJSON_ArrayForEach(e, sp->sat_runs)
				if (k++ < 8)
					fprintf(stderr, " %d:%d", cJSON_GetArrayItem(e, 0)->valueint, cJSON_GetArrayItem(e, 1)->valueint);
			fprintf(stderr, "%s; first in kernel '%s'); recalibrate on more inputs or with a wider "
			        "--calibrate-margin", sp->nsat > 8 ? " ..." : "", sp->first_kernel);
		}
		fputc('\n', stderr);
		program_print_report(sp->prog, stderr);
		if (progs) {
			char key[64];
			cJSON *p = cJSON_CreateObject();
			cJSON_AddStringToObject(p, "name", sp->name);
			cJSON_AddStringToObject(p, "runner", program_runner(sp->prog));
			cJSON_AddNumberToObject(p, "cycles_per_run", (double)sp->cycles_per_run);
			cJSON_AddNumberToObject(p, "ms_per_run", (double)sp->cycles_per_run / t->clock_hz * 1e3);
			cJSON_AddNumberToObject(p, "runs", sp->runs);
			cJSON_AddNumberToObject(p, "saturated", (double)sp->saturated);
			snprintf(key, sizeof key, "saturated_per_%s", unit);
			cJSON_AddItemToObject(p, key, cJSON_Duplicate(sp->sat_runs, 1));
			cJSON_AddItemToArray(progs, p);
		}
	}
}

void sim_totals_free(SimTotals *t)
{
	for (int i = 0; i < t->nprog; i++)
		cJSON_Delete(t->prog[i].sat_runs);
	memset(t, 0, sizeof *t);
}
