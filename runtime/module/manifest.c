/* manifest.c — manifest.json of a module directory (module.h has the schema),
 * common to every target; read back by the runtime and the simulator. */
#include <dirent.h>
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

int manifest_add_file(Manifest *mf, const char *dir, const char *name, Diag *d)
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
	cJSON_AddItemToArray(mf->files, e);
	if (f.addr)
		file_unmap(&f);
	return WL_OK;
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
	cJSON *r = f.addr ? cJSON_ParseWithLength(f.addr, f.len) : NULL;
	file_unmap(&f);
	if (!r)
		return diag_fail(d, "%s: not valid JSON", path);
	*out = r;
	return WL_OK;
}

int manifest_read(const char *dir, cJSON **out, Diag *d)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/manifest.json", dir);
	cJSON *r;
	if (json_read_file(path, &r, d) != WL_OK)
		return WL_ERR;
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
	cJSON *progs = cJSON_GetObjectItemCaseSensitive(r, "programs");
	if (!cJSON_IsArray(progs) || cJSON_GetArraySize(progs) < 1) {
		cJSON_Delete(r);
		return diag_fail(d, "%s: missing 'programs'", path);
	}
	*out = r;
	return WL_OK;
}

bool module_dir_replaceable(const char *dir, char *why, size_t n)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/manifest.json", dir);
	cJSON *r = NULL;
	Diag d = {0};
	if (json_read_file(path, &r, &d) != WL_OK) {
		snprintf(why, n, "%s", d.msg);
		return false;
	}
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(r, "format");
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(r, "files");
	bool ok = cJSON_IsString(fmt) && strcmp(fmt->valuestring, "wlower-module") == 0 && cJSON_IsArray(files);
	if (!ok)
		snprintf(why, n, "%s is not a wlower module manifest", path);
	DIR *dd = ok ? opendir(dir) : NULL;
	struct dirent *e;
	while (ok && dd && (e = readdir(dd))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "manifest.json"))
			continue;
		bool listed = false;
		const cJSON *f;
		cJSON_ArrayForEach(f, files) {
			const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
			listed |= cJSON_IsString(nm) && strcmp(nm->valuestring, e->d_name) == 0;
		}
		char p[8192];
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		struct stat st;
		if (!listed || lstat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
			snprintf(why, n, "it holds '%s', which its manifest does not list", e->d_name);
			ok = false;
		}
	}
	if (dd)
		closedir(dd);
	cJSON_Delete(r);
	return ok;
}
