/* tranges.c — the tranges file: read (cJSON), write, look up.
 *
 * Reading checks everything a later pass relies on, so that passes can trust
 * a TRanges: "format" is "wlower-tranges", "version" is 1, "tensors" is an
 * object whose members are objects with numeric "min" and "max", min <= max,
 * each name once. Every error is one line naming the file (and the tensor).
 *
 * Writing prints one tensor per line, numbers in the shortest form that reads
 * back to the same double, so files diff well and round-trip exactly.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <cjson/cJSON.h>
#include "compiler/onnx/onnx.h"
#include "tranges/tranges.h"

enum { TRANGES_VERSION = 1 };
static const char TRANGES_FORMAT[] = "wlower-tranges";

/* ---------------------------------------------------------------- table */

typedef struct TRangeMap {
	int *slot;             /* index into r, -1 empty */
	int cap;               /* power of two */
} TRangeMap;

static int map_find(const TRanges *tr, const char *name)
{
	const TRangeMap *m = tr->map;
	for (uint64_t i = wl_hash_str(name) & (uint64_t)(m->cap - 1);; i = (i + 1) & (uint64_t)(m->cap - 1)) {
		int k = m->slot[i];
		if (k < 0 || strcmp(tr->r[k].name, name) == 0)
			return k;
	}
}

static void map_insert(TRanges *tr, int k)
{
	TRangeMap *m = tr->map;
	uint64_t i = wl_hash_str(tr->r[k].name) & (uint64_t)(m->cap - 1);
	while (m->slot[i] >= 0)
		i = (i + 1) & (uint64_t)(m->cap - 1);
	m->slot[i] = k;
}

static void map_rebuild(TRanges *tr, int cap)
{
	free(tr->map->slot);
	tr->map->cap = cap;
	tr->map->slot = wl_xmalloc((size_t)cap * sizeof(int));
	for (int i = 0; i < cap; i++)
		tr->map->slot[i] = -1;
	for (int k = 0; k < tr->n; k++)
		map_insert(tr, k);
}

TRanges *tranges_new(const char *model, int64_t samples)
{
	TRanges *tr = wl_xmalloc(sizeof *tr);
	memset(tr, 0, sizeof *tr);
	tr->model = model ? wl_xstrdup(model) : NULL;
	tr->samples = samples;
	tr->map = wl_xmalloc(sizeof *tr->map);
	tr->map->slot = NULL;
	map_rebuild(tr, 64);
	return tr;
}

void tranges_free(TRanges *tr)
{
	if (!tr)
		return;
	for (int i = 0; i < tr->n; i++)
		free(tr->r[i].name);
	free(tr->r);
	free(tr->map->slot);
	free(tr->map);
	free(tr->model);
	free(tr->path);
	free(tr);
}

void tranges_set(TRanges *tr, const char *name, double min, double max)
{
	int k = map_find(tr, name);
	if (k >= 0) {
		tr->r[k].min = min;
		tr->r[k].max = max;
		return;
	}
	if (tr->n == tr->cap) {
		tr->cap = tr->cap ? 2 * tr->cap : 64;
		tr->r = realloc(tr->r, (size_t)tr->cap * sizeof *tr->r);
		if (!tr->r)
			wl_die(__FILE__, __LINE__, "out of memory");
	}
	k = tr->n++;
	tr->r[k] = (TRange){wl_xstrdup(name), min, max};
	if (2 * tr->n > tr->map->cap)
		map_rebuild(tr, 2 * tr->map->cap);
	else
		map_insert(tr, k);
}

bool tranges_get(const TRanges *tr, const char *name, double *min, double *max)
{
	int k = map_find(tr, name);
	if (k < 0)
		return false;
	if (min)
		*min = tr->r[k].min;
	if (max)
		*max = tr->r[k].max;
	return true;
}

int tranges_require(const TRanges *tr, const char *tensor, const char *node,
                    double *min, double *max, Diag *d)
{
	if (tranges_get(tr, tensor, min, max))
		return WL_OK;
	const char *file = tr->path ? tr->path : "tranges";
	if (node && *node)
		return diag_fail(d, "%s: no range for tensor '%s' (node '%s'); calibrate the model "
		                 "this file was made from, or a model with the same tensor names", file, tensor, node);
	return diag_fail(d, "%s: no range for tensor '%s'; calibrate the model this file was made "
	                 "from, or a model with the same tensor names", file, tensor);
}

/* ---------------------------------------------------------------- read */

/* 1-based line and column of byte offset `off` in buf. */
static void line_col(const char *buf, size_t off, int *line, int *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off; i++) {
		if (buf[i] == '\n') {
			++*line;
			*col = 1;
		} else {
			++*col;
		}
	}
}

static int read_bound(const char *path, const char *tensor, const cJSON *o, const char *key,
                      double *out, Diag *d)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v)
		return diag_fail(d, "%s: tensor '%s': no \"%s\"", path, tensor, key);
	if (!cJSON_IsNumber(v))
		return diag_fail(d, "%s: tensor '%s': \"%s\" is not a number", path, tensor, key);
	if (!isfinite(v->valuedouble))
		return diag_fail(d, "%s: tensor '%s': \"%s\" is not finite", path, tensor, key);
	*out = v->valuedouble;
	return WL_OK;
}

/* only white space may follow the JSON value (cJSON stops after it) */
static int trailing(const char *path, const char *buf, size_t len, const char *end, Diag *d)
{
	const char *p = end && end >= buf && end <= buf + len ? end : buf + len;
	while (p < buf + len && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	if (p == buf + len)
		return WL_OK;
	int line, col;
	line_col(buf, (size_t)(p - buf), &line, &col);
	return diag_fail(d, "%s:%d:%d: text after the JSON object", path, line, col);
}

static int parse(const char *path, const char *buf, size_t len, TRanges **out, Diag *d)
{
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(buf, len, &end, false);
	if (!root) {
		size_t off = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;
		int line, col;
		line_col(buf, off, &line, &col);
		return diag_fail(d, "%s:%d:%d: malformed JSON", path, line, col);
	}
	int rc = WL_ERR;
	TRanges *tr = NULL;
	if (trailing(path, buf, len, end, d) != WL_OK)
		goto out;
	if (!cJSON_IsObject(root)) {
		diag_fail(d, "%s: not a tranges file (the top level is not a JSON object)", path);
		goto out;
	}
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
	if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, TRANGES_FORMAT) != 0) {
		diag_fail(d, "%s: not a tranges file (\"format\" is %s%s%s, expected \"%s\")", path,
		          cJSON_IsString(fmt) ? "\"" : "", cJSON_IsString(fmt) ? fmt->valuestring : "missing or not a string",
		          cJSON_IsString(fmt) ? "\"" : "", TRANGES_FORMAT);
		goto out;
	}
	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
	if (!cJSON_IsNumber(ver)) {
		diag_fail(d, "%s: \"version\" is missing or not a number", path);
		goto out;
	}
	if (ver->valuedouble != TRANGES_VERSION) {
		diag_fail(d, "%s: unsupported tranges version %g (this wlower reads version %d)",
		          path, ver->valuedouble, TRANGES_VERSION);
		goto out;
	}
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
	if (model && !cJSON_IsString(model) && !cJSON_IsNull(model)) {
		diag_fail(d, "%s: \"model\" is not a string", path);
		goto out;
	}
	const cJSON *samples = cJSON_GetObjectItemCaseSensitive(root, "samples");
	if (samples && (!cJSON_IsNumber(samples) || samples->valuedouble < 0 ||
	                samples->valuedouble != floor(samples->valuedouble))) {
		diag_fail(d, "%s: \"samples\" is not a non-negative integer", path);
		goto out;
	}
	const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(root, "tensors");
	if (!cJSON_IsObject(tensors)) {
		diag_fail(d, "%s: \"tensors\" is missing or not an object", path);
		goto out;
	}
	if (samples && !(samples->valuedouble >= 0 && samples->valuedouble <= 9e15)) {
		diag_fail(d, "%s: \"samples\" is not a count in 0..9e15", path);
		goto out;
	}
	tr = tranges_new(cJSON_IsString(model) ? model->valuestring : NULL,
	                 samples ? (int64_t)samples->valuedouble : 0);
	tr->path = wl_xstrdup(path);
	const cJSON *t;
	cJSON_ArrayForEach(t, tensors) {
		const char *name = t->string;
		if (!cJSON_IsObject(t)) {
			diag_fail(d, "%s: tensor '%s': expected {\"min\": a, \"max\": b}", path, name);
			goto out;
		}
		double mn, mx;
		if (read_bound(path, name, t, "min", &mn, d) != WL_OK ||
		    read_bound(path, name, t, "max", &mx, d) != WL_OK)
			goto out;
		if (mn > mx) {
			diag_fail(d, "%s: tensor '%s': min %.9g > max %.9g", path, name, mn, mx);
			goto out;
		}
		if (tranges_get(tr, name, NULL, NULL)) {
			diag_fail(d, "%s: tensor '%s' is listed twice", path, name);
			goto out;
		}
		tranges_set(tr, name, mn, mx);
	}
	*out = tr;
	tr = NULL;
	rc = WL_OK;
out:
	tranges_free(tr);
	cJSON_Delete(root);
	return rc;
}

int tranges_read(const char *path, TRanges **out, Diag *d)
{
	*out = NULL;
	MappedFile mf;
	if (file_map(path, &mf, d) != WL_OK)
		return WL_ERR;
	if (mf.len == 0)
		return diag_fail(d, "%s: empty file (expected tranges JSON)", path);
	int rc = parse(path, mf.addr, mf.len, out, d);
	munmap(mf.addr, mf.len);
	return rc;
}

/* ---------------------------------------------------------------- write */

/* Shortest "%.*g" that reads back as x. */
static void fmt_double(char *buf, size_t n, double x)
{
	WL_ASSERT(isfinite(x));
	if (x == floor(x) && fabs(x) < 1e15) {
		snprintf(buf, n, "%.0f", x == 0 ? 0.0 : x);   /* -0 prints as 0 */
		return;
	}
	for (int p = 1; p <= 17; p++) {
		snprintf(buf, n, "%.*g", p, x);
		if (strtod(buf, NULL) == x)
			return;
	}
}

static void put_json_string(FILE *f, const char *s)
{
	cJSON *j = cJSON_CreateString(s);
	char *p = j ? cJSON_PrintUnformatted(j) : NULL;
	if (!p)
		wl_die(__FILE__, __LINE__, "out of memory");
	fputs(p, f);
	cJSON_free(p);
	cJSON_Delete(j);
}

int tranges_write(const char *path, const TRanges *tr, Diag *d)
{
	AtomicFile af;
	if (atomic_open(&af, path, d) != WL_OK)
		return WL_ERR;
	FILE *f = af.f;
	fprintf(f, "{\"format\": \"%s\", \"version\": %d, \"model\": ", TRANGES_FORMAT, TRANGES_VERSION);
	if (tr->model)
		put_json_string(f, tr->model);
	else
		fputs("null", f);
	fprintf(f, ", \"samples\": %lld,\n \"tensors\": {", (long long)tr->samples);
	for (int i = 0; i < tr->n; i++) {
		char a[40], b[40];
		fmt_double(a, sizeof a, tr->r[i].min);
		fmt_double(b, sizeof b, tr->r[i].max);
		fputs(i ? ",\n  " : "\n  ", f);
		put_json_string(f, tr->r[i].name);
		fprintf(f, ": {\"min\": %s, \"max\": %s}", a, b);
	}
	fputs(tr->n ? "\n }\n}\n" : "}\n}\n", f);
	return atomic_commit(&af, d);
}
