/* report.c — what `wlower sim` prints and writes: the configuration table,
 * the report (latency, executions/s, external bytes, bandwidth, MAC
 * utilization), `TotalCycles: N`, text bars per category, and the profiles
 * OUT/profile_core<i>.json and OUT/profile.svg. Everything is a function of
 * schedule.json and the cost model, so the files are byte-identical run to run.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "sim.h"

static void size_text(uint64_t b, char *buf, size_t n)
{
	if (b >= (1ull << 20))
		snprintf(buf, n, "%.2f MB (%llu B)", b / 1048576.0, (unsigned long long)b);
	else if (b >= 1024)
		snprintf(buf, n, "%.2f kB (%llu B)", b / 1024.0, (unsigned long long)b);
	else
		snprintf(buf, n, "%llu B", (unsigned long long)b);
}

void sim_print_report(FILE *f, const SimReport *rep)
{
	const SimSchedule *s = rep->s;
	const ChimeraConfig *c = &s->cfg;
	const CostResult *r = rep->r;
	char b1[64], b2[64];
	fprintf(f, "Configuration\n");
	fprintf(f, "  %-22s %s\n", "module", rep->module);
	fprintf(f, "  %-22s %s\n", "target", s->target);
	fprintf(f, "  %-22s %d\n", "cores", c->cores);
	fprintf(f, "  %-22s %d x %d\n", "PE array", c->pe_rows, c->pe_cols);
	fprintf(f, "  %-22s %.3f GHz\n", "clock", c->clock_hz / 1e9);
	size_text(c->ocm_bytes, b1, sizeof b1);
	fprintf(f, "  %-22s %s\n", "OCM (L2) size", b1);
	fprintf(f, "  %-22s %llu B per PE\n", "LRM size", (unsigned long long)c->lrm_bytes);
	fprintf(f, "  %-22s %.1f GB/s read, %.1f GB/s write\n", "external bandwidth", c->ext_bw / 1e9,
	        c->ext_bw / 1e9);
	fprintf(f, "  %-22s %d\n", "MACs/PE", c->macs_per_pe);
	size_text(s->ocm_peak, b1, sizeof b1);
	fprintf(f, "  %-22s %s, %.1f%%\n", "max OCM used", b1,
	        c->ocm_bytes ? 100.0 * s->ocm_peak / c->ocm_bytes : 0.0);
	fprintf(f, "  %-22s %llu B, %.1f%%\n", "max LRM used", (unsigned long long)s->lrm_peak,
	        c->lrm_bytes ? 100.0 * s->lrm_peak / c->lrm_bytes : 0.0);
	fprintf(f, "  %-22s %d\n", "kernels", s->nk);
	fprintf(f, "  %-22s %d\n", "spills to DDR", s->nspills);
	fprintf(f, "  %-22s %.6f\n", "network GMACs", rep->macs / 1e9);
	for (int i = 0; i < rep->ncmp; i++) {
		const SimCompare *m = &rep->cmp[i];
		char lbl[256];
		snprintf(lbl, sizeof lbl, "output '%s'", m->name);
		fprintf(f, "  %-22s MSE %.6g  PSNR %.2f dB  max|e| %.6g\n", lbl, m->mse, m->psnr, m->max_abs);
	}

	double secs = r->total_cycles / c->clock_hz;
	fprintf(f, "Report\n");
	fprintf(f, "  %-22s %.6g ms at %.3f GHz\n", "latency", secs * 1e3, c->clock_hz / 1e9);
	fprintf(f, "  %-22s %.2f\n", "executions/s", secs > 0 ? 1.0 / secs : 0.0);
	size_text(rep->ext_read, b1, sizeof b1);
	size_text(rep->ext_write, b2, sizeof b2);
	fprintf(f, "  %-22s %s\n", "external bytes read", b1);
	fprintf(f, "  %-22s %s\n", "external bytes written", b2);
	double act = cost_model_act_bytes(&cost_default_params, s->k, s->nk);
	size_text(rep->ext_read + rep->ext_write + (uint64_t)llround(act), b1, sizeof b1);
	fprintf(f, "  %-22s %s (with the modelled activation traffic, docs/cost-model.md)\n",
	        "external bytes, model", b1);
	fprintf(f, "  %-22s %.2f GB/s\n", "average bandwidth",
	        secs > 0 ? (rep->ext_read + rep->ext_write) / secs / 1e9 : 0.0);
	double peak = (double)r->total_cycles * c->cores * c->pe_rows * c->pe_cols * c->macs_per_pe;
	fprintf(f, "  %-22s %.2f%%\n", "MAC utilization", peak > 0 ? 100.0 * rep->macs / peak : 0.0);
	fprintf(f, "TotalCycles: %llu\n", (unsigned long long)r->total_cycles);
}

static void bar(FILE *f, const char *label, double v, double max, double total)
{
	int w = 40, n = max > 0 ? (int)lround(w * v / max) : 0;
	char b[64];
	for (int k = 0; k < w; k++)
		b[k] = k < n ? '#' : ' ';
	b[w] = 0;
	fprintf(f, "  %-14s %12.0f %5.1f%% |%s|\n", label, v, total > 0 ? 100.0 * v / total : 0.0, b);
}

void sim_print_bars(FILE *f, const SimReport *rep)
{
	const CostResult *r = rep->r;
	double max = 0, total = (double)r->total_cycles;
	for (int t = 0; t < CAT_COUNT; t++)
		if (r->module_cat[t] > max)
			max = r->module_cat[t];
	fprintf(f, "Cycles per category (slowest core of each kernel, summed over kernels)\n");
	for (int t = 0; t < CAT_COUNT; t++)
		bar(f, cost_category_names[t], r->module_cat[t], max, total);
	if (r->overhead_cycles > 0)
		bar(f, "overhead", r->overhead_cycles, max, total);
	fprintf(f, "Cycles per core (busy = the sum of its kernels' times)\n");
	for (int c = 0; c < r->cores; c++) {
		fprintf(f, "  core %d: busy %.0f", c, r->core_busy[c]);
		for (int t = 0; t < CAT_COUNT; t++)
			fprintf(f, "  %s %.0f", cost_category_names[t], r->core_cat[c][t]);
		fputc('\n', f);
	}
}

static double rnd(double x) { return (double)llround(x); }

static void svg_text(FILE *f, const char *s)
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

static int write_svg(const char *path, const SimReport *rep, Diag *d)
{
	static const char *const colors[COST_MAX_CORES] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759"};
	const CostResult *r = rep->r;
	int W = 720, H = 400, left = 90, right = 20, top = 50, bottom = 60;
	double pw = W - left - right, ph = H - top - bottom;
	double max = 0;
	for (int c = 0; c < r->cores; c++)
		for (int t = 0; t < CAT_COUNT; t++)
			if (r->core_cat[c][t] > max)
				max = r->core_cat[c][t];
	/* axis step: 1, 2 or 5 times a power of ten, about 5 ticks */
	double step = 1;
	if (max > 0) {
		double raw = max / 5, p = pow(10, floor(log10(raw)));
		step = raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
	}
	double ymax = max > 0 ? ceil(max / step) * step : 1;
	AtomicFile af;
	if (atomic_open(&af, path, d) != WL_OK)
		return WL_ERR;
	FILE *f = af.f;
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
	        "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
	fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
	fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"15\">", left);
	svg_text(f, rep->module);
	fprintf(f, " on %s x%d: cycles per core per category (TotalCycles %llu)</text>\n",
	        rep->s->target, rep->s->cfg.cores, (unsigned long long)r->total_cycles);
	for (double y = 0; y <= ymax + step / 2; y += step) {
		double py = top + ph - ph * y / ymax;
		fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", left, py,
		        W - right, py);
		char lbl[32];
		if (ymax >= 1e6)
			snprintf(lbl, sizeof lbl, "%.3gM", y / 1e6);
		else if (ymax >= 1e3)
			snprintf(lbl, sizeof lbl, "%.3gk", y / 1e3);
		else
			snprintf(lbl, sizeof lbl, "%.3g", y);
		fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", left - 6, py + 4, lbl);
	}
	double gw = pw / CAT_COUNT, bw = (gw * 0.8) / r->cores;
	for (int t = 0; t < CAT_COUNT; t++) {
		double gx = left + gw * t + gw * 0.1;
		for (int c = 0; c < r->cores; c++) {
			double v = r->core_cat[c][t], h = ph * v / ymax;
			fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
			        "<title>core %d %s: %.0f cycles</title></rect>\n",
			        gx + bw * c, top + ph - h, bw, h, colors[c % COST_MAX_CORES], c,
			        cost_category_names[t], v);
		}
		fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", gx + gw * 0.4,
		        top + (int)ph + 18, cost_category_names[t]);
	}
	fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", left, top + (int)ph,
	        W - right, top + (int)ph);
	for (int c = 0; c < r->cores; c++) {
		int lx = left + 110 * c;
		fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>", lx, H - 24,
		        colors[c % COST_MAX_CORES]);
		fprintf(f, "<text x=\"%d\" y=\"%d\">core %d</text>\n", lx + 16, H - 14, c);
	}
	fprintf(f, "</svg>\n");
	return atomic_commit(&af, d);
}

int sim_write_profiles(const char *outdir, const SimReport *rep, Diag *d)
{
	const CostResult *r = rep->r;
	const SimSchedule *s = rep->s;
	for (int c = 0; c < r->cores; c++) {
		cJSON *root = cJSON_CreateObject();
		cJSON_AddStringToObject(root, "format", "wlower-profile");
		cJSON_AddNumberToObject(root, "version", 1);
		cJSON_AddStringToObject(root, "module", rep->module);
		cJSON_AddStringToObject(root, "target", s->target);
		cJSON_AddNumberToObject(root, "core", c);
		cJSON_AddNumberToObject(root, "clock_hz", s->cfg.clock_hz);
		cJSON_AddNumberToObject(root, "module_total_cycles", (double)r->total_cycles);
		cJSON_AddNumberToObject(root, "busy_cycles", rnd(r->core_busy[c]));
		cJSON *cats = cJSON_AddObjectToObject(root, "categories");
		for (int t = 0; t < CAT_COUNT; t++)
			cJSON_AddNumberToObject(cats, cost_category_names[t], rnd(r->core_cat[c][t]));
		cJSON *ks = cJSON_AddArrayToObject(root, "kernels");
		for (int i = 0; i < s->nk; i++) {
			cJSON *k = cJSON_CreateObject();
			cJSON_AddNumberToObject(k, "id", i);
			cJSON_AddStringToObject(k, "name", s->k[i].name);
			cJSON_AddStringToObject(k, "op", s->k[i].op);
			cJSON_AddNumberToObject(k, "cycles", rnd(r->ktime[i][c]));
			cJSON_AddNumberToObject(k, "kernel_cycles", rnd(r->kernel_cycles[i]));
			cJSON_AddBoolToObject(k, "critical", r->critical[i] == c);
			for (int t = 0; t < CAT_COUNT; t++)
				cJSON_AddNumberToObject(k, cost_category_names[t], rnd(r->cyc[i][c][t]));
			cJSON_AddItemToArray(ks, k);
		}
		char path[4096];
		snprintf(path, sizeof path, "%s/profile_core%d.json", outdir, c);
		int rc = json_write_atomic(path, root, d);
		cJSON_Delete(root);
		if (rc != WL_OK)
			return WL_ERR;
	}
	char path[4096];
	snprintf(path, sizeof path, "%s/profile.svg", outdir);
	return write_svg(path, rep, d);
}
