/* passmgr.c — runs a pipeline of passes from the one table (passes/passes.c).
 *   --passes=a,b,group   run exactly these (groups expand in table order)
 *   --stop-after=NAME    run the default pipeline up to NAME (pass or group)
 *   --print-after=NAME   print the IR (textual syntax) after NAME
 *   --print-after-all    print after every pass
 *   --time-passes        a table of wall time per pass on stderr
 * In debug builds (and with verify_each), ir_verify runs after every pass; a
 * verifier failure after a pass is an internal error naming the pass. */
#include <string.h>
#include <time.h>
#include "passes/passes.h"

enum { MAX_PIPE = 256 };

static int unknown_pass(Diag *d, const char *name, size_t len)
{
	char valid[1024] = "";
	size_t off = 0;
	const char *last_group = NULL;
	for (int i = 0; i < pass_count && off < sizeof valid - 64; i++) {
		const char *grp = pass_table[i].group;
		if (grp && (!last_group || strcmp(grp, last_group) != 0)) {
			off += (size_t)snprintf(valid + off, sizeof valid - off, "%s%s", off ? ", " : "", grp);
			last_group = grp;
		}
		off += (size_t)snprintf(valid + off, sizeof valid - off, "%s%s", off ? ", " : "", pass_table[i].name);
	}
	return diag_fail(d, "unknown pass '%.*s' (valid: %s)", (int)len, name, valid);
}

int pipeline_resolve(const char *spec, const Pass **out, int max, Diag *d)
{
	int n = 0;
	const char *p = spec;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char name[128];
		if (len == 0 || len >= sizeof name)
			return len ? unknown_pass(d, p, len) : diag_fail(d, "empty pass name in '%s'", spec);
		memcpy(name, p, len);
		name[len] = 0;
		bool found = false;
		for (int i = 0; i < pass_count; i++) {
			const Pass *ps = &pass_table[i];
			if (strcmp(ps->name, name) == 0 || (ps->group && strcmp(ps->group, name) == 0)) {
				if (n == max)
					return diag_fail(d, "pipeline too long (more than %d passes)", max);
				out[n++] = ps;
				found = true;
			}
		}
		if (!found)
			return unknown_pass(d, name, len);
		p = e ? e + 1 : p + len;
	}
	return n;
}

/* Is `name` (pass or group) the pass `ps`, or a group ending at `ps`? */
static bool ends_at(const char *name, const Pass *ps, const Pass *const *pipe, int i, int n)
{
	if (strcmp(name, ps->name) == 0)
		return true;
	if (!ps->group || strcmp(name, ps->group) != 0)
		return false;
	for (int j = i + 1; j < n; j++)
		if (pipe[j]->group && strcmp(pipe[j]->group, name) == 0)
			return false;
	return true;
}

static bool in_list(const char *list, const Pass *ps, const Pass *const *pipe, int i, int n)
{
	if (!list)
		return false;
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char name[128];
		if (len < sizeof name) {
			memcpy(name, p, len);
			name[len] = 0;
			if (ends_at(name, ps, pipe, i, n))
				return true;
		}
		p = e ? e + 1 : p + len;
	}
	return false;
}

static int check_names(const char *list, Diag *d)
{
	if (!list)
		return WL_OK;
	const Pass *tmp[MAX_PIPE];
	return pipeline_resolve(list, tmp, MAX_PIPE, d) < 0 ? WL_ERR : WL_OK;
}

int pipeline_run(Module *m, const PipelineOptions *opt, Diag *d)
{
	const Pass *pipe[MAX_PIPE];
	int n;
	if (opt->passes) {
		n = pipeline_resolve(opt->passes, pipe, MAX_PIPE, d);
		if (n < 0)
			return WL_ERR;
	} else {
		n = 0;
		for (int i = 0; i < pass_count; i++)
			pipe[n++] = &pass_table[i];
	}
	if (check_names(opt->print_after, d) || check_names(opt->stop_after, d))
		return WL_ERR;
	if (opt->stop_after) {
		int stop = -1;
		for (int i = 0; i < n; i++)
			if (ends_at(opt->stop_after, pipe[i], pipe, i, n))
				stop = i;
		if (stop < 0)
			return diag_fail(d, "--stop-after=%s: not in the pipeline", opt->stop_after);
		n = stop + 1;
	}
	FILE *pf = opt->print_to ? opt->print_to : stderr;
	double times[MAX_PIPE], total = 0;
	int nodes[MAX_PIPE], changes[MAX_PIPE];
	PassContext ctx = {.model_path = m->path, .canon = opt->canon, .fuse = opt->fuse, .numerics = opt->numerics};
	for (int i = 0; i < n; i++) {
		double t0 = wl_now_ms();
		ctx.changed = 0;
		if (pipe[i]->run(m, &ctx, d) != WL_OK) {
			if (!d->set)
				diag_fail(d, "%s: pass %s failed", m->path, pipe[i]->name);
			return WL_ERR;
		}
		times[i] = wl_now_ms() - t0;
		total += times[i];
		nodes[i] = m->graph->nnodes;
		changes[i] = ctx.changed;
		if (opt->verify_each || m->debug_verify) {
			Diag vd = {0};
			if (ir_verify(m, &vd) != WL_OK)
				wl_die(__FILE__, __LINE__, "IR verifier failed after pass %s: %s", pipe[i]->name, vd.msg);
		}
		if (opt->print_after_all || in_list(opt->print_after, pipe[i], pipe, i, n)) {
			fprintf(pf, "# ---- IR after %s (%d nodes) ----\n", pipe[i]->name, nodes[i]);
			text_print(m, pf, &opt->print);
		}
	}
	if (opt->time_passes) {
		fprintf(stderr, "===-------------------------------------------===\n");
		fprintf(stderr, "  pass execution timing report (wall, ms; nodes after the pass; rewrites)\n");
		fprintf(stderr, "===-------------------------------------------===\n");
		fprintf(stderr, "  %10s  %6s  %6s  %8s  %s\n", "ms", "%", "nodes", "rewrites", "pass");
		int all = 0;
		for (int i = 0; i < n; i++) {
			fprintf(stderr, "  %10.3f  %5.1f%%  %6d  %8d  %s\n", times[i],
			        total > 0 ? 100.0 * times[i] / total : 0.0, nodes[i], changes[i], pipe[i]->name);
			all += changes[i];
		}
		fprintf(stderr, "  %10.3f  100.0%%  %6d  %8d  total\n", total, m->graph->nnodes, all);
	}
	return WL_OK;
}
