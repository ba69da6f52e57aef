/* manifest.c — manifest.json of a module directory (module.h has the schema),
 * common to every target; read back by the runtime and the simulator. */
#include <dirent.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "module.h"

struct Manifest {
	cJSON *root, *hardware, *program, *files;
	double t_start_ms;
};

const char *manifest_io_dtype(int dt)
{
	switch (dt) {
	case DT_FLOAT: return "float32";
	case DT_FLOAT16: return "float16";
	case DT_INT64: return "int64";
	case DT_INT32: return "int32";
	case DT_INT8: return "int8";
	case DT_UINT8: return "uint8";
	default: return dtype_name(dt) ? dtype_name(dt) : "unknown";
	}
}

cJSON *manifest_io(const Value *v)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "name", v->name);
	cJSON_AddStringToObject(o, "dtype", manifest_io_dtype(v->type.elem));
	cJSON *shape = cJSON_AddArrayToObject(o, "shape");
	for (int i = 0; v->type.has_shape && i < v->type.rank; i++) {
		const Dim *dm = &v->type.dims[i];
		if (dm->kind == DIM_VALUE)
			cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)dm->value));
		else
			cJSON_AddItemToArray(shape, cJSON_CreateString(dm->param ? dm->param : "?"));
	}
	bool isfloat = v->type.elem == DT_FLOAT || v->type.elem == DT_FLOAT16;
	const char *fmt = !isfloat ? "int"
		: v->frac_bits >= 0 && v->frac_bits <= 31 ? "fixed"
		: v->frac_bits == FRAC_FP16 ? "float16" : "float32";
	if (!isfloat && v->type.elem != DT_INT64 && v->type.elem != DT_INT32)
		fmt = manifest_io_dtype(v->type.elem);
	cJSON_AddStringToObject(o, "format", fmt);
	if (!strcmp(fmt, "fixed"))
		cJSON_AddNumberToObject(o, "frac_bits", v->frac_bits);
	if (v->has_range) {
		cJSON *r = cJSON_AddArrayToObject(o, "range");
		cJSON_AddItemToArray(r, cJSON_CreateNumber(v->rmin));
		cJSON_AddItemToArray(r, cJSON_CreateNumber(v->rmax));
	}
	return o;
}

static int static_shape_check(const Value *v, const char *model, Diag *d)
{
	if (!v->type.has_shape)
		return diag_fail(d, "%s: graph value '%s' has no static shape (targets need static shapes)",
		                 model, v->name);
	for (int i = 0; i < v->type.rank; i++)
		if (v->type.dims[i].kind != DIM_VALUE)
			return diag_fail(d, "%s: graph value '%s' dim %d is symbolic ('%s'); targets need static shapes",
			                 model, v->name, i, v->type.dims[i].param ? v->type.dims[i].param : "?");
	return WL_OK;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int manifest_new(Module *m, const ManifestInfo *o, Manifest **out, Diag *d)
{
	Graph *g = m->graph;
	for (int i = 0; i < g->ninputs; i++)
		if (!g->inputs[i]->init && static_shape_check(g->inputs[i], o->model_path, d) != WL_OK)
			return WL_ERR;
	for (int i = 0; i < g->noutputs; i++)
		if (static_shape_check(g->outputs[i], o->model_path, d) != WL_OK)
			return WL_ERR;

	Manifest *mf = calloc(1, sizeof *mf);
	mf->t_start_ms = o->t_start_ms > 0 ? o->t_start_ms : wl_now_ms();
	cJSON *r = mf->root = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "format", "wlower-module");
	cJSON_AddNumberToObject(r, "version", 1);
	cJSON_AddStringToObject(r, "wlower_version", WLOWER_VERSION);
	cJSON_AddStringToObject(r, "model", o->model_path ? o->model_path : "");
	MappedFile mfile;
	Diag dd = {0};
	if (o->model_path && file_map(o->model_path, &mfile, &dd) == WL_OK) {
		char hex[65];
		sha256_hex(mfile.addr, mfile.len, hex);
		cJSON_AddStringToObject(r, "model_sha256", hex);
		if (mfile.addr)
			file_unmap(&mfile);
	}
	cJSON_AddStringToObject(r, "target", o->target_name ? o->target_name : "");
	mf->hardware = cJSON_AddObjectToObject(r, "hardware");
	cJSON *fz = cJSON_AddObjectToObject(r, "fuse");
	cJSON_AddBoolToObject(fz, "prepend_logmel", o->fuse.prepend_logmel);
	cJSON_AddBoolToObject(fz, "append_argmax", o->fuse.append_argmax);
	cJSON_AddBoolToObject(fz, "fp16_attention", o->fuse.fp16_attention);
	cJSON *ps = cJSON_AddArrayToObject(r, "passes");
	for (int i = 0; i < o->npasses_run; i++)
		cJSON_AddItemToArray(ps, cJSON_CreateString(o->passes_run[i]));
	cJSON *progs = cJSON_AddArrayToObject(r, "programs");
	cJSON *p = mf->program = cJSON_CreateObject();
	cJSON_AddItemToArray(progs, p);
	cJSON_AddStringToObject(p, "name", "main");
	cJSON *ins = cJSON_AddArrayToObject(p, "inputs");
	for (int i = 0; i < g->ninputs; i++)
		if (!g->inputs[i]->init)
			cJSON_AddItemToArray(ins, manifest_io(g->inputs[i]));
	cJSON *outs = cJSON_AddArrayToObject(p, "outputs");
	for (int i = 0; i < g->noutputs; i++)
		cJSON_AddItemToArray(outs, manifest_io(g->outputs[i]));
	/* op counts, sorted by name for stable output */
	cJSON *oc = cJSON_AddObjectToObject(p, "op_counts");
	int nn = 0;
	for (Node *n = g->first; n; n = n->next)
		nn++;
	char **keys = calloc(nn ? nn : 1, sizeof *keys);
	int nk = 0;
	for (Node *n = g->first; n; n = n->next) {
		bool dom = n->domain && *n->domain;
		size_t len = strlen(n->op_type) + (dom ? strlen(n->domain) + 1 : 0) + 1;
		keys[nk] = malloc(len);
		snprintf(keys[nk++], len, "%s%s%s", dom ? n->domain : "", dom ? "." : "", n->op_type);
	}
	qsort(keys, nk, sizeof *keys, cmp_str);
	for (int i = 0; i < nk;) {
		int j = i;
		while (j < nk && strcmp(keys[j], keys[i]) == 0)
			j++;
		cJSON_AddNumberToObject(oc, keys[i], j - i);
		i = j;
	}
	for (int i = 0; i < nk; i++)
		free(keys[i]);
	free(keys);
	mf->files = cJSON_AddArrayToObject(r, "files");
	*out = mf;
	return WL_OK;
}

cJSON *manifest_hardware(Manifest *mf) { return mf->hardware; }
cJSON *manifest_program(Manifest *mf) { return mf->program; }
cJSON *manifest_root(Manifest *mf) { return mf->root; }

int files_add_entry(cJSON *files, const char *dir, const char *name, Diag *d)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	MappedFile f;
	if (file_map(path, &f, d) != WL_OK)
		return WL_ERR;
	char hex[65];
	sha256_hex(f.addr ? f.addr : "", f.len, hex);
	cJSON *e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "name", name);
	cJSON_AddNumberToObject(e, "bytes", (double)f.len);
	cJSON_AddStringToObject(e, "sha256", hex);
	cJSON_AddItemToArray(files, e);
	if (f.addr)
		file_unmap(&f);
	return WL_OK;
}

int manifest_add_file(Manifest *mf, const char *dir, const char *name, Diag *d)
{
	return files_add_entry(mf->files, dir, name, d);
}

void manifest_free(Manifest *mf)
{
	if (!mf)
		return;
	cJSON_Delete(mf->root);
	free(mf);
}

int manifest_write(Manifest *mf, const char *dir, Diag *d)
{
	cJSON_AddNumberToObject(mf->root, "compile_ms", (double)(long)(wl_now_ms() - mf->t_start_ms));
	char path[4096];
	snprintf(path, sizeof path, "%s/manifest.json", dir);
	int rc = json_write_atomic(path, mf->root, d);
	manifest_free(mf);
	return rc;
}

int json_write_atomic(const char *path, const cJSON *root, Diag *d)
{
	char *txt = cJSON_Print(root);
	if (!txt)
		return diag_fail(d, "%s: out of memory", path);
	AtomicFile af;
	int rc = WL_ERR;
	if (atomic_open(&af, path, d) == WL_OK) {
		fputs(txt, af.f);
		fputc('\n', af.f);
		rc = atomic_commit(&af, d);
	}
	free(txt);
	return rc;
}

int json_read_file(const char *path, cJSON **out, Diag *d)
{
	MappedFile f;
	if (file_map(path, &f, d) != WL_OK)
		return WL_ERR;
	const char *end = NULL;
	cJSON *r = f.addr ? cJSON_ParseWithLengthOpts(f.addr, f.len, &end, 0) : NULL;
	size_t rest = r && end ? f.len - (size_t)(end - (const char *)f.addr) : 0;
	if (r && rest > 0 && strspn(end, " \t\r\n") < rest) {
		size_t at = (size_t)(end - (const char *)f.addr);
		file_unmap(&f);
		cJSON_Delete(r);
		return diag_fail(d, "%s: trailing data after the JSON value (at byte %zu)", path, at);
	}
	file_unmap(&f);
	if (!r)
		return diag_fail(d, "%s: not valid JSON", path);
	*out = r;
	return WL_OK;
}

/* ---------------------------------------------------------------- reading: fields
 *
 * manifest_read checks every field of the schema (module.h) for presence,
 * JSON type and range; a message names the file and the field
 * ("out/manifest.json: programs[0].inputs[1].shape[2]: not an integer in
 * [0, 2^40]"). Keys a target adds are left to the target's reader. */

enum { J_STR = 1, J_NUM = 2, J_OBJ = 4, J_ARR = 8, J_BOOL = 16 };
#define MAX_DIM ((double)((uint64_t)1 << 40))

static bool jtype(const cJSON *j, int t)
{
	return ((t & J_STR) && cJSON_IsString(j)) || ((t & J_NUM) && cJSON_IsNumber(j)) ||
	       ((t & J_OBJ) && cJSON_IsObject(j)) || ((t & J_ARR) && cJSON_IsArray(j)) ||
	       ((t & J_BOOL) && cJSON_IsBool(j));
}

static const char *jtype_name(int t)
{
	return t == J_STR ? "a string" : t == J_NUM ? "a number" : t == J_OBJ ? "an object"
	     : t == J_ARR ? "an array" : "true or false";
}

/* at.key of JSON type t into *out; a missing required key is an error, a
 * missing optional one leaves *out NULL. */
static int field(const char *path, const char *at, const cJSON *o, const char *key, int t, bool required,
                 const cJSON **out, Diag *d)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
	*out = j;
	if (!j)
		return required ? diag_fail(d, "%s: %s%s%s: missing", path, at, *at ? "." : "", key) : WL_OK;
	if (!jtype(j, t))
		return diag_fail(d, "%s: %s%s%s: not %s", path, at, *at ? "." : "", key, jtype_name(t));
	return WL_OK;
}

/* An integer in [0, max] (JSON numbers are doubles: max <= 2^53). */
static bool json_count(const cJSON *j, double max)
{
	return cJSON_IsNumber(j) && j->valuedouble >= 0 && j->valuedouble <= max &&
	       j->valuedouble == (double)(int64_t)j->valuedouble;
}

static int io_dtype_size(const char *s)
{
	static const struct { const char *n; int size; } T[] = {
		{"float32", 4}, {"float16", 2}, {"int64", 8}, {"int32", 4}, {"int8", 1}, {"uint8", 1}, {"bool", 1},
	};
	for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
		if (!strcmp(T[i].n, s))
			return T[i].size;
	return 0;
}

static int check_shape(const char *path, const char *at, const cJSON *shape, int esize, Diag *d)
{
	int nd = cJSON_GetArraySize(shape);
	if (nd > 8)
		return diag_fail(d, "%s: %s.shape: %d dims (at most 8)", path, at, nd);
	double bytes = esize;
	for (int i = 0; i < nd; i++) {
		const cJSON *v = cJSON_GetArrayItem(shape, i);
		if (!json_count(v, MAX_DIM))
			return diag_fail(d, "%s: %s.shape[%d]: not an integer in [0, 2^40]", path, at, i);
		bytes *= v->valuedouble;
	}
	if (bytes > MAX_DIM)
		return diag_fail(d, "%s: %s.shape: %.0f bytes, more than 2^40", path, at, bytes);
	return WL_OK;
}

static int check_format(const char *path, const char *at, const cJSON *io, Diag *d)
{
	const cJSON *fmt, *fb, *range;
	if (field(path, at, io, "format", J_STR, false, &fmt, d) || field(path, at, io, "frac_bits", J_NUM, false, &fb, d) ||
	    field(path, at, io, "range", J_ARR, false, &range, d))
		return WL_ERR;
	bool fixed = fmt && !strcmp(fmt->valuestring, "fixed");
	if (fmt && !fixed && strcmp(fmt->valuestring, "float32") && strcmp(fmt->valuestring, "float16") &&
	    strcmp(fmt->valuestring, "int") && !io_dtype_size(fmt->valuestring))
		return diag_fail(d, "%s: %s.format: unknown format \"%s\"", path, at, fmt->valuestring);
	if (fixed && !fb)
		return diag_fail(d, "%s: %s.frac_bits: missing (format \"fixed\")", path, at);
	if (fb && !json_count(fb, 31))
		return diag_fail(d, "%s: %s.frac_bits: not an integer in [0, 31]", path, at);
	if (range && (cJSON_GetArraySize(range) != 2 || !cJSON_IsNumber(range->child) ||
	              !cJSON_IsNumber(range->child->next)))
		return diag_fail(d, "%s: %s.range: not [min, max]", path, at);
	return WL_OK;
}

static int check_io(const char *path, const char *at, const cJSON *io, Diag *d)
{
	if (!cJSON_IsObject(io))
		return diag_fail(d, "%s: %s: not an object", path, at);
	const cJSON *name, *dt, *shape;
	if (field(path, at, io, "name", J_STR, true, &name, d) || field(path, at, io, "dtype", J_STR, true, &dt, d) ||
	    field(path, at, io, "shape", J_ARR, true, &shape, d))
		return WL_ERR;
	if (!*name->valuestring)
		return diag_fail(d, "%s: %s.name: empty", path, at);
	int es = io_dtype_size(dt->valuestring);
	if (!es)
		return diag_fail(d, "%s: %s.dtype: unsupported dtype \"%s\" ('%s')", path, at, dt->valuestring,
		                 name->valuestring);
	char named[256];                 /* the io's name in every message below */
	snprintf(named, sizeof named, "%s ('%.120s')", at, name->valuestring);
	if (check_shape(path, named, shape, es, d) != WL_OK)
		return WL_ERR;
	return check_format(path, named, io, d);
}

static int check_ios(const char *path, const char *at, const cJSON *prog, const char *key, Diag *d)
{
	const cJSON *a;
	if (field(path, at, prog, key, J_ARR, true, &a, d))
		return WL_ERR;
	int i = 0;
	const cJSON *io;
	cJSON_ArrayForEach(io, a) {
		char w[96];
		snprintf(w, sizeof w, "%s.%s[%d]", at, key, i++);
		if (check_io(path, w, io, d) != WL_OK)
			return WL_ERR;
	}
	return WL_OK;
}

static int check_program(const char *path, int idx, const cJSON *p, Diag *d)
{
	char at[64];
	snprintf(at, sizeof at, "programs[%d]", idx);
	if (!cJSON_IsObject(p))
		return diag_fail(d, "%s: %s: not an object", path, at);
	const cJSON *name, *oc;
	if (field(path, at, p, "name", J_STR, true, &name, d) || check_ios(path, at, p, "inputs", d) ||
	    check_ios(path, at, p, "outputs", d) || field(path, at, p, "op_counts", J_OBJ, false, &oc, d))
		return WL_ERR;
	const cJSON *c;
	cJSON_ArrayForEach(c, oc)
		if (!json_count(c, 1e15))
			return diag_fail(d, "%s: %s.op_counts.%s: not a non-negative integer", path, at, c->string);
	return WL_OK;
}

/* A file name of the module directory: a plain name, no path. */
static bool plain_name(const char *s)
{
	return *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

static int check_files(const char *path, const cJSON *files, Diag *d)
{
	int i = 0;
	const cJSON *f;
	cJSON_ArrayForEach(f, files) {
		char at[48];
		snprintf(at, sizeof at, "files[%d]", i++);
		const cJSON *name, *bytes, *sha;
		if (!cJSON_IsObject(f))
			return diag_fail(d, "%s: %s: not an object", path, at);
		if (field(path, at, f, "name", J_STR, true, &name, d) || field(path, at, f, "bytes", J_NUM, true, &bytes, d) ||
		    field(path, at, f, "sha256", J_STR, true, &sha, d))
			return WL_ERR;
		if (!plain_name(name->valuestring))
			return diag_fail(d, "%s: %s.name: \"%s\" is not a plain file name", path, at, name->valuestring);
		if (!json_count(bytes, 9007199254740992.0))
			return diag_fail(d, "%s: %s.bytes: not an integer in [0, 2^53] ('%s')", path, at, name->valuestring);
		if (strlen(sha->valuestring) != 64 || strspn(sha->valuestring, "0123456789abcdef") != 64)
			return diag_fail(d, "%s: %s.sha256: not 64 lowercase hex digits ('%s')", path, at, name->valuestring);
	}
	return WL_OK;
}

/* Every field of the schema but format and version (checked first). */
static int check_manifest(const char *path, const cJSON *r, Diag *d)
{
	const cJSON *j, *fuse, *passes, *progs, *files;
	if (field(path, "", r, "wlower_version", J_STR, false, &j, d) || field(path, "", r, "model", J_STR, true, &j, d) ||
	    field(path, "", r, "model_sha256", J_STR, false, &j, d) || field(path, "", r, "target", J_STR, true, &j, d) ||
	    field(path, "", r, "hardware", J_OBJ, true, &j, d) || field(path, "", r, "fuse", J_OBJ, false, &fuse, d) ||
	    field(path, "", r, "passes", J_ARR, false, &passes, d) ||
	    field(path, "", r, "programs", J_ARR, true, &progs, d) || field(path, "", r, "files", J_ARR, true, &files, d) ||
	    field(path, "", r, "compile_ms", J_NUM, false, &j, d))
		return WL_ERR;
	const cJSON *hw = cJSON_GetObjectItemCaseSensitive(r, "hardware"), *vb;
	if ((vb = cJSON_GetObjectItemCaseSensitive(hw, "vector_bits")) &&
	    (!cJSON_IsNumber(vb) || (vb->valuedouble != 128 && vb->valuedouble != 256 && vb->valuedouble != 512)))
		return diag_fail(d, "%s: hardware.vector_bits: not 128, 256 or 512", path);
	/* host: the CPU the blocking was tuned for (informational, but typed) */
	const cJSON *cm = cJSON_GetObjectItemCaseSensitive(hw, "cpu_model"), *ca, *cv;
	if (cm && !cJSON_IsString(cm))
		return diag_fail(d, "%s: hardware.cpu_model: not a string", path);
	if ((ca = cJSON_GetObjectItemCaseSensitive(hw, "caches"))) {
		if (!cJSON_IsObject(ca))
			return diag_fail(d, "%s: hardware.caches: not an object", path);
		static const char *const levels[] = {"l1d", "l2", "l3"};
		for (int k = 0; k < 3; k++)
			if ((cv = cJSON_GetObjectItemCaseSensitive(ca, levels[k])) &&
			    (!cJSON_IsNumber(cv) || cv->valuedouble < 0 || cv->valuedouble > 1e15 ||
			     cv->valuedouble != floor(cv->valuedouble)))
				return diag_fail(d, "%s: hardware.caches.%s: not a byte count", path, levels[k]);
		if ((cv = cJSON_GetObjectItemCaseSensitive(ca, "source")) && !cJSON_IsString(cv))
			return diag_fail(d, "%s: hardware.caches.source: not a string", path);
	}
	const cJSON *ms = cJSON_GetObjectItemCaseSensitive(r, "model_sha256");
	if (ms && (strlen(ms->valuestring) != 64 || strspn(ms->valuestring, "0123456789abcdef") != 64))
		return diag_fail(d, "%s: model_sha256: not 64 lowercase hex digits", path);
	cJSON_ArrayForEach(j, fuse)
		if (!cJSON_IsBool(j))
			return diag_fail(d, "%s: fuse.%s: not true or false", path, j->string);
	int i = 0;
	cJSON_ArrayForEach(j, passes) {
		if (!cJSON_IsString(j))
			return diag_fail(d, "%s: passes[%d]: not a string", path, i);
		i++;
	}
	if (cJSON_GetArraySize(progs) < 1)
		return diag_fail(d, "%s: programs: empty", path);
	i = 0;
	cJSON_ArrayForEach(j, progs)
		if (check_program(path, i++, j, d) != WL_OK)
			return WL_ERR;
	return check_files(path, files, d);
}

int manifest_read(const char *dir, cJSON **out, Diag *d)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/manifest.json", dir);
	cJSON *r;
	if (json_read_file(path, &r, d) != WL_OK)
		return WL_ERR;
	if (!cJSON_IsObject(r)) {
		cJSON_Delete(r);
		return diag_fail(d, "%s: not a JSON object", path);
	}
	cJSON *fmt = cJSON_GetObjectItemCaseSensitive(r, "format");
	cJSON *ver = cJSON_GetObjectItemCaseSensitive(r, "version");
	if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "wlower-module") != 0) {
		cJSON_Delete(r);
		return diag_fail(d, "%s: 'format' is not \"wlower-module\"", path);
	}
	if (!cJSON_IsNumber(ver) || ver->valuedouble != 1) {
		cJSON_Delete(r);
		return diag_fail(d, "%s: unsupported 'version' (this wlower reads version 1)", path);
	}
	if (check_manifest(path, r, d) != WL_OK) {
		cJSON_Delete(r);
		return WL_ERR;
	}
	*out = r;
	return WL_OK;
}

bool wl_dir_replaceable(const char *dir, const char *manifest, const char *format, WlDirEntryOk entry_ok, char *why,
                        size_t n)
{
	why[0] = 0;
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, manifest);
	cJSON *r = NULL;
	Diag d = {0};
	if (json_read_file(path, &r, &d) != WL_OK) {
		snprintf(why, n, "%s", d.msg);
		return false;
	}
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(r, "format");
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(r, "files");
	bool ok = cJSON_IsString(fmt) && strcmp(fmt->valuestring, format) == 0 && cJSON_IsArray(files);
	if (!ok)
		snprintf(why, n, "%s is not a %s manifest", path, format);
	DIR *dd = ok ? opendir(dir) : NULL;
	struct dirent *e;
	while (ok && dd && (e = readdir(dd))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, manifest))
			continue;
		char p[8192];
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		if (!entry_ok(files, p, e->d_name, why, n)) {
			if (!why[0])
				snprintf(why, n, "it holds '%s', which its %s does not list", e->d_name, manifest);
			ok = false;
		}
	}
	if (dd)
		closedir(dd);
	cJSON_Delete(r);
	return ok;
}

/* a module directory's entry: a regular file its "files" list names */
static bool module_entry_ok(const cJSON *files, const char *path, const char *name, char *why, size_t n)
{
	(void)why;
	(void)n;
	bool listed = false;
	const cJSON *f;
	cJSON_ArrayForEach(f, files) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
		listed |= cJSON_IsString(nm) && strcmp(nm->valuestring, name) == 0;
	}
	struct stat st;
	return listed && lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool module_dir_replaceable(const char *dir, char *why, size_t n)
{
	return wl_dir_replaceable(dir, "manifest.json", "wlower-module", module_entry_ok, why, n);
}
