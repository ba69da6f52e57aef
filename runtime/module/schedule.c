/* schedule.c — schedule.json (schedule.h has the schema): written by the
 * Chimera target (targets/chimera/emit_cpp.c), read and checked by the
 * simulator (targets/chimera/sim/sim.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "module.h"

const char *const sched_dma_dir_names[4] = {"ddr_to_ocm", "ocm_to_ddr", "ocm_to_lrm", "lrm_to_ocm"};

/* ---------------------------------------------------------------- writing */

static void num(cJSON *o, const char *k, double v) { cJSON_AddNumberToObject(o, k, v); }
static void str(cJSON *o, const char *k, const char *v) { cJSON_AddStringToObject(o, k, v ? v : ""); }

cJSON *chimera_config_json(const ChimeraConfig *cfg)
{
	cJSON *c = cJSON_CreateObject();
	num(c, "cores", cfg->cores);
	num(c, "pe_rows", cfg->pe_rows);
	num(c, "pe_cols", cfg->pe_cols);
	num(c, "macs_per_pe", cfg->macs_per_pe);
	num(c, "lrm_bytes", (double)cfg->lrm_bytes);
	num(c, "ocm_bytes", (double)cfg->ocm_bytes);
	num(c, "clock_hz", cfg->clock_hz);
	num(c, "ext_bw", cfg->ext_bw);
	return c;
}

static cJSON *kernel_json(const SchedKernel *k, int id)
{
	cJSON *e = cJSON_CreateObject();
	num(e, "id", id);
	str(e, "fn", k->fn);
	str(e, "name", k->name);
	str(e, "op", k->op);
	str(e, "cpp", k->cpp);
	str(e, "split", k->split);
	cJSON *cs = cJSON_AddArrayToObject(e, "cores");
	for (int c = 0; c < k->ncores; c++)
		cJSON_AddItemToArray(cs, cJSON_CreateNumber(k->cores[c]));
	num(e, "macs", (double)k->macs);
	num(e, "alu_ops", (double)k->alu_ops);
	if (k->has_tile) {
		cJSON *t = cJSON_AddObjectToObject(e, "tile");
		num(t, "m", (double)k->tile.m);
		num(t, "n", (double)k->tile.n);
		num(t, "k", (double)k->tile.k);
		num(t, "count", (double)k->tile.count);
		num(t, "lrm_bytes", (double)k->tile.lrm_bytes);
		cJSON_AddBoolToObject(t, "double_buffered", k->tile.double_buffered);
	}
	cJSON *bs = cJSON_AddArrayToObject(e, "buffers");
	for (int b = 0; b < k->nbuffers; b++) {
		const SchedBuffer *sb = &k->buffers[b];
		cJSON *x = cJSON_CreateObject();
		str(x, "value", sb->value);
		str(x, "role", sb->role);
		str(x, "mem", sb->mem);
		if (sb->in_place)
			str(x, "in_place", sb->in_place);
		num(x, "offset", (double)sb->offset);
		num(x, "bytes", (double)sb->bytes);
		cJSON_AddItemToArray(bs, x);
	}
	cJSON *ds = cJSON_AddArrayToObject(e, "dma");
	for (int j = 0; j < k->ndma; j++) {
		cJSON *x = cJSON_CreateObject();
		str(x, "dir", sched_dma_dir_names[k->dma[j].dir]);
		num(x, "bytes", (double)k->dma[j].bytes);
		str(x, "what", k->dma[j].what);
		cJSON_AddItemToArray(ds, x);
	}
	cJSON *pc = cJSON_AddArrayToObject(e, "per_core");
	for (int c = 0; c < k->nper_core; c++) {
		const SchedCore *cc = &k->per_core[c];
		cJSON *y = cJSON_CreateObject();
		num(y, "core", cc->core);
		num(y, "macs", (double)cc->macs);
		num(y, "alu_ops", (double)cc->alu_ops);
		num(y, "array_bytes", (double)cc->array_bytes);
		num(y, "ocm_read", (double)cc->ocm_read);
		num(y, "ocm_write", (double)cc->ocm_write);
		num(y, "ext_read", (double)cc->ext_read);
		num(y, "ext_write", (double)cc->ext_write);
		cJSON_AddItemToArray(pc, y);
	}
	return e;
}

int schedule_write(const char *path, const Schedule *s, Diag *d)
{
	cJSON *r = cJSON_CreateObject();
	str(r, "format", "wlower-schedule");
	num(r, "version", 1);
	str(r, "target", s->target);
	cJSON_AddItemToObject(r, "config", chimera_config_json(&s->config));
	num(r, "ocm_peak_bytes", (double)s->ocm_peak_bytes);
	num(r, "lrm_peak_bytes", (double)s->lrm_peak_bytes);
	num(r, "ddr_bytes", (double)s->ddr_bytes);
	num(r, "weights_bytes", (double)s->weights_bytes);
	cJSON *sp = cJSON_AddArrayToObject(r, "spills");
	for (int i = 0; i < s->nspills; i++) {
		cJSON *e = cJSON_CreateObject();
		str(e, "value", s->spills[i].value);
		num(e, "bytes", (double)s->spills[i].bytes);
		str(e, "reason", s->spills[i].reason);
		cJSON_AddItemToArray(sp, e);
	}
	cJSON *ks = cJSON_AddArrayToObject(r, "kernels");
	for (int i = 0; i < s->nkernels; i++)
		cJSON_AddItemToArray(ks, kernel_json(&s->kernels[i], i));
	int rc = json_write_atomic(path, r, d);
	cJSON_Delete(r);
	return rc;
}

/* ---------------------------------------------------------------- reading */

static cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

#define TWO_POW_63 9223372036854775808.0

int json_u64(const char *file, const char *where, const cJSON *o, const char *k, bool req,
             uint64_t *out, Diag *d)
{
	const cJSON *v = get(o, k);
	if (!v) {
		*out = 0;
		return req ? diag_fail(d, "%s: %s: missing '%s'", file, where, k) : WL_OK;
	}
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 ||
	    v->valuedouble != floor(v->valuedouble))
		return diag_fail(d, "%s: %s: '%s' is not a non-negative integer", file, where, k);
	if (v->valuedouble > TWO_POW_63)
		return diag_fail(d, "%s: %s: '%s' is out of range (above 2^63)", file, where, k);
	*out = (uint64_t)v->valuedouble;
	return WL_OK;
}

static int num_dbl(const char *file, const char *where, const cJSON *o, const char *k, double *out, Diag *d)
{
	const cJSON *v = get(o, k);
	if (!cJSON_IsNumber(v) || !(v->valuedouble > 0))
		return diag_fail(d, "%s: %s: '%s' missing or not a positive number", file, where, k);
	*out = v->valuedouble;
	return WL_OK;
}

/* Keys no check covers: taken when well-formed, else dflt / 0. */
static const char *str_or(Arena *a, const cJSON *o, const char *k, const char *dflt)
{
	const cJSON *v = get(o, k);
	return arena_strdup(a, cJSON_IsString(v) ? v->valuestring : dflt);
}

static uint64_t u64_or_0(const cJSON *o, const char *k)
{
	uint64_t x;
	return json_u64("", "", o, k, false, &x, NULL) == WL_OK ? x : 0;
}

static void *arena_array(Arena *a, int n, size_t size)
{
	return n > 0 ? arena_alloc(a, (size_t)n * size) : NULL;
}

static int parse_kernel(Arena *a, const char *file, const cJSON *jk, int idx, const ChimeraConfig *cfg,
                        SchedKernel *k, Diag *d)
{
	char where[300];
	snprintf(where, sizeof where, "kernels[%d]", idx);
	if (!cJSON_IsObject(jk))
		return diag_fail(d, "%s: %s: not an object", file, where);
	k->fn = str_or(a, jk, "fn", NULL);
	k->name = str_or(a, jk, "name", "?");
	k->op = str_or(a, jk, "op", "?");
	k->cpp = str_or(a, jk, "cpp", "");
	k->split = str_or(a, jk, "split", "none");
	const cJSON *cs = get(jk, "cores"), *e;
	if (cJSON_IsArray(cs)) {
		k->cores = arena_array(a, cJSON_GetArraySize(cs), sizeof *k->cores);
		cJSON_ArrayForEach(e, cs)
			if (cJSON_IsNumber(e))
				k->cores[k->ncores++] = e->valueint;
	}
	snprintf(where, sizeof where, "kernel '%s'", k->name);
	if (json_u64(file, where, jk, "macs", true, &k->macs, d) != WL_OK ||
	    json_u64(file, where, jk, "alu_ops", true, &k->alu_ops, d) != WL_OK)
		return WL_ERR;
	const cJSON *t = get(jk, "tile");
	if (cJSON_IsObject(t)) {
		uint64_t m, n, kk, c;
		if (json_u64(file, where, t, "m", false, &m, d) != WL_OK ||
		    json_u64(file, where, t, "n", false, &n, d) != WL_OK ||
		    json_u64(file, where, t, "k", false, &kk, d) != WL_OK ||
		    json_u64(file, where, t, "count", false, &c, d) != WL_OK)
			return WL_ERR;
		k->has_tile = true;
		k->tile.m = (int64_t)m, k->tile.n = (int64_t)n, k->tile.k = (int64_t)kk, k->tile.count = (int64_t)c;
		k->tile.lrm_bytes = u64_or_0(t, "lrm_bytes");
		k->tile.double_buffered = cJSON_IsTrue(get(t, "double_buffered"));
	}
	/* the bytes of the activation buffers (role in/out) are checked */
	const cJSON *bufs = get(jk, "buffers");
	k->buffers = arena_array(a, cJSON_GetArraySize(bufs), sizeof *k->buffers);
	cJSON_ArrayForEach(e, bufs) {
		SchedBuffer *b = &k->buffers[k->nbuffers++];
		const cJSON *role = get(e, "role"), *in_place = get(e, "in_place");
		b->value = str_or(a, e, "value", NULL);
		b->role = str_or(a, e, "role", NULL);
		b->mem = str_or(a, e, "mem", NULL);
		b->in_place = cJSON_IsString(in_place) ? arena_strdup(a, in_place->valuestring) : NULL;
		b->offset = u64_or_0(e, "offset");
		if (!cJSON_IsString(role) || (strcmp(role->valuestring, "in") && strcmp(role->valuestring, "out")))
			b->bytes = u64_or_0(e, "bytes");
		else if (json_u64(file, where, e, "bytes", true, &b->bytes, d) != WL_OK)
			return WL_ERR;
	}
	const cJSON *dma = get(jk, "dma");
	if (dma && !cJSON_IsArray(dma))
		return diag_fail(d, "%s: %s: 'dma' is not an array", file, where);
	k->dma = arena_array(a, cJSON_GetArraySize(dma), sizeof *k->dma);
	cJSON_ArrayForEach(e, dma) {
		SchedDma *x = &k->dma[k->ndma];
		const cJSON *dir = get(e, "dir");
		if (!cJSON_IsString(dir))
			return diag_fail(d, "%s: %s: dma entry without 'dir'", file, where);
		if (json_u64(file, where, e, "bytes", true, &x->bytes, d) != WL_OK)
			return WL_ERR;
		int di = 0;
		while (di < 4 && strcmp(dir->valuestring, sched_dma_dir_names[di]))
			di++;
		if (di == 4)
			return diag_fail(d, "%s: %s: unknown dma dir '%s'", file, where, dir->valuestring);
		x->dir = (SchedDmaDir)di;
		x->what = str_or(a, e, "what", NULL);
		k->ndma++;
	}
	const cJSON *pc = get(jk, "per_core");
	if (!cJSON_IsArray(pc) || cJSON_GetArraySize(pc) < 1)
		return diag_fail(d, "%s: %s: missing 'per_core'", file, where);
	if (cJSON_GetArraySize(pc) > cfg->cores)
		return diag_fail(d, "%s: %s: %d per_core entries for %d cores", file, where,
		                 cJSON_GetArraySize(pc), cfg->cores);
	uint64_t core_macs = 0;
	cJSON_ArrayForEach(e, pc) {
		SchedCore *c = &k->per_core[k->nper_core];
		uint64_t core;
		if (json_u64(file, where, e, "core", true, &core, d) != WL_OK)
			return WL_ERR;
		if (core >= (uint64_t)cfg->cores)
			return diag_fail(d, "%s: %s: core %llu out of range (cores %d)", file, where,
			                 (unsigned long long)core, cfg->cores);
		for (int j = 0; j < k->nper_core; j++)
			if (k->per_core[j].core == (int)core)
				return diag_fail(d, "%s: %s: core %d listed twice", file, where, (int)core);
		c->core = (int)core;
		if (json_u64(file, where, e, "macs", true, &c->macs, d) != WL_OK ||
		    json_u64(file, where, e, "alu_ops", true, &c->alu_ops, d) != WL_OK ||
		    json_u64(file, where, e, "array_bytes", false, &c->array_bytes, d) != WL_OK ||
		    json_u64(file, where, e, "ocm_read", false, &c->ocm_read, d) != WL_OK ||
		    json_u64(file, where, e, "ocm_write", false, &c->ocm_write, d) != WL_OK ||
		    json_u64(file, where, e, "ext_read", false, &c->ext_read, d) != WL_OK ||
		    json_u64(file, where, e, "ext_write", false, &c->ext_write, d) != WL_OK)
			return WL_ERR;
		core_macs += c->macs;
		k->nper_core++;
	}
	if (core_macs != k->macs)
		return diag_fail(d, "%s: %s: per-core MACs sum to %llu, the kernel has %llu", file, where,
		                 (unsigned long long)core_macs, (unsigned long long)k->macs);
	return WL_OK;
}

static int parse_schedule(const char *file, const cJSON *r, Schedule *s, Diag *d)
{
	Arena *a = s->arena;
	const cJSON *fmt = get(r, "format"), *ver = get(r, "version");
	if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "wlower-schedule"))
		return diag_fail(d, "%s: 'format' is not \"wlower-schedule\"", file);
	if (!cJSON_IsNumber(ver) || ver->valueint != 1)
		return diag_fail(d, "%s: unsupported 'version' (this wlower reads version 1)", file);
	s->target = str_or(a, r, "target", "?");
	const cJSON *c = get(r, "config");
	if (!cJSON_IsObject(c))
		return diag_fail(d, "%s: missing 'config'", file);
	ChimeraConfig *cfg = &s->config;
	uint64_t cores, rows, cols, mpe;
	if (json_u64(file, "config", c, "cores", true, &cores, d) != WL_OK ||
	    json_u64(file, "config", c, "pe_rows", true, &rows, d) != WL_OK ||
	    json_u64(file, "config", c, "pe_cols", true, &cols, d) != WL_OK ||
	    json_u64(file, "config", c, "macs_per_pe", true, &mpe, d) != WL_OK ||
	    json_u64(file, "config", c, "lrm_bytes", true, &cfg->lrm_bytes, d) != WL_OK ||
	    json_u64(file, "config", c, "ocm_bytes", true, &cfg->ocm_bytes, d) != WL_OK ||
	    num_dbl(file, "config", c, "clock_hz", &cfg->clock_hz, d) != WL_OK ||
	    num_dbl(file, "config", c, "ext_bw", &cfg->ext_bw, d) != WL_OK)
		return WL_ERR;
	if (cores < 1 || cores > SCHEDULE_MAX_CORES || rows < 1 || rows > 1024 || cols < 1 || cols > 1024 ||
	    mpe < 1 || mpe > 4096)
		return diag_fail(d, "%s: config: cores/pe_rows/pe_cols/macs_per_pe out of range", file);
	cfg->cores = (int)cores, cfg->pe_rows = (int)rows, cfg->pe_cols = (int)cols;
	cfg->macs_per_pe = (int)mpe;
	if (json_u64(file, "schedule", r, "ocm_peak_bytes", false, &s->ocm_peak_bytes, d) != WL_OK ||
	    json_u64(file, "schedule", r, "lrm_peak_bytes", false, &s->lrm_peak_bytes, d) != WL_OK ||
	    json_u64(file, "schedule", r, "ddr_bytes", false, &s->ddr_bytes, d) != WL_OK ||
	    json_u64(file, "schedule", r, "weights_bytes", false, &s->weights_bytes, d) != WL_OK)
		return WL_ERR;
	const cJSON *sp = get(r, "spills"), *e;
	if (cJSON_IsArray(sp)) {
		s->spills = arena_array(a, cJSON_GetArraySize(sp), sizeof *s->spills);
		cJSON_ArrayForEach(e, sp) {
			SchedSpill *x = &s->spills[s->nspills++];
			x->value = str_or(a, e, "value", NULL);
			x->bytes = u64_or_0(e, "bytes");
			x->reason = str_or(a, e, "reason", NULL);
		}
	}
	const cJSON *ks = get(r, "kernels");
	if (!cJSON_IsArray(ks))
		return diag_fail(d, "%s: missing 'kernels'", file);
	s->kernels = arena_array(a, cJSON_GetArraySize(ks), sizeof *s->kernels);
	const cJSON *jk;
	cJSON_ArrayForEach(jk, ks) {
		if (parse_kernel(a, file, jk, s->nkernels, cfg, &s->kernels[s->nkernels], d) != WL_OK)
			return WL_ERR;
		s->nkernels++;
	}
	return WL_OK;
}

int schedule_read(const char *dir, Schedule *s, Diag *d)
{
	memset(s, 0, sizeof *s);
	char file[4096];
	snprintf(file, sizeof file, "%s/schedule.json", dir);
	cJSON *r;
	if (json_read_file(file, &r, d) != WL_OK)
		return WL_ERR;
	s->arena = arena_new();
	int rc = parse_schedule(file, r, s, d);
	cJSON_Delete(r);
	if (rc != WL_OK)
		schedule_free(s);
	return rc;
}

void schedule_free(Schedule *s)
{
	if (s->arena)
		arena_free(s->arena);
	memset(s, 0, sizeof *s);
}
