/* pipeline.c — pipeline.json (pipeline.h has the schema): the file list that
 * makes a pipeline directory checkable, reading with verification, and the
 * rule for replacing an existing -o folder. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "pipeline.h"

int json_int(const cJSON *o, const char *key, int64_t lo, int64_t hi, const char *file, int64_t *out, Diag *d)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
	    v->valuedouble < (double)lo || v->valuedouble > (double)hi)
		return diag_fail(d, "%s: '%s': missing or not an integer in %lld..%lld", file, key, (long long)lo,
		                 (long long)hi);
	*out = (int64_t)v->valuedouble;
	return WL_OK;
}

int pipeline_add_module(cJSON *files, const char *dir, const char *sub, Diag *d)
{
	char mdir[4096], rel[4096];
	snprintf(mdir, sizeof mdir, "%s/%s", dir, sub);
	cJSON *man;
	if (manifest_read(mdir, &man, d) != WL_OK)
		return WL_ERR;
	int rc = WL_OK;
	const cJSON *f;
	cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(man, "files")) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
		if (!cJSON_IsString(nm))
			continue;
		snprintf(rel, sizeof rel, "%s/%s", sub, nm->valuestring);
		if ((rc = files_add_entry(files, dir, rel, d)) != WL_OK)
			break;
	}
	cJSON_Delete(man);
	snprintf(rel, sizeof rel, "%s/manifest.json", sub);
	return rc == WL_OK ? files_add_entry(files, dir, rel, d) : rc;
}

/* One listed file against the disk: a regular file of that size and sha256. */
static int verify_file(const char *dir, const char *file, const cJSON *e, int i, Diag *d)
{
	const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "sha256");
	int64_t bytes;
	if (!cJSON_IsString(nm) || !cJSON_IsString(sh) || strlen(sh->valuestring) != 64 || strstr(nm->valuestring, "..") ||
	    nm->valuestring[0] == '/')
		return diag_fail(d, "%s: files[%d]: needs a relative 'name' and a 'sha256' of 64 hex digits", file, i);
	if (json_int(e, "bytes", 0, INT64_MAX / 2, file, &bytes, d) != WL_OK)
		return WL_ERR;
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, nm->valuestring);
	struct stat st;
	if (stat(path, &st) != 0)
		return diag_fail(d, "%s: missing (listed in %s)", path, file);
	if (!S_ISREG(st.st_mode))
		return diag_fail(d, "%s: not a regular file", path);
	if ((int64_t)st.st_size != bytes)
		return diag_fail(d, "%s: %lld bytes, %s says %lld (altered or truncated)", path, (long long)st.st_size,
		                 file, (long long)bytes);
	char hex[65];
	if (file_sha256_hex(path, hex, d) != WL_OK)
		return WL_ERR;
	if (strcmp(hex, sh->valuestring) != 0)
		return diag_fail(d, "%s: sha256 differs from %s (the file was altered)", path, file);
	return WL_OK;
}

int pipeline_read(const char *dir, const char *kind, cJSON **out, Diag *d)
{
	char file[4096];
	snprintf(file, sizeof file, "%s/pipeline.json", dir);
	struct stat st;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return diag_fail(d, "%s: not a pipeline directory (no such folder)", dir);
	cJSON *r;
	if (json_read_file(file, &r, d) != WL_OK)
		return WL_ERR;
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(r, "format");
	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(r, "version");
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(r, "kind");
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(r, "files");
	int rc = WL_OK;
	if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "wlower-pipeline") != 0)
		rc = diag_fail(d, "%s: 'format' is not \"wlower-pipeline\"", file);
	else if (!cJSON_IsNumber(ver) || ver->valuedouble != 1)
		rc = diag_fail(d, "%s: unsupported 'version' (this wlower reads version 1)", file);
	else if (!cJSON_IsString(k) || (kind && strcmp(k->valuestring, kind) != 0))
		rc = diag_fail(d, "%s: 'kind' is not \"%s\"", file, kind ? kind : "a string");
	else if (!cJSON_IsArray(files) || cJSON_GetArraySize(files) < 1)
		rc = diag_fail(d, "%s: missing 'files'", file);
	int i = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, files) {
		if (rc != WL_OK)
			break;
		rc = verify_file(dir, file, e, i++, d);
	}
	if (rc != WL_OK) {
		cJSON_Delete(r);
		return WL_ERR;
	}
	*out = r;
	return WL_OK;
}

/* Is `name` (an entry of DIR) a listed file, or the folder of listed files? */
static bool listed(const cJSON *files, const char *name, bool is_dir)
{
	size_t n = strlen(name);
	const cJSON *f;
	cJSON_ArrayForEach(f, files) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
		if (!cJSON_IsString(nm))
			continue;
		const char *s = nm->valuestring;
		if (!is_dir && strcmp(s, name) == 0)
			return true;
		if (is_dir && strncmp(s, name, n) == 0 && s[n] == '/')
			return true;
	}
	return false;
}

/* a pipeline directory's entry: a listed file, or a folder of listed files
 * that is itself a replaceable module directory */
static bool pipeline_entry_ok(const cJSON *files, const char *path, const char *name, char *why, size_t n)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return false;
	bool isdir = S_ISDIR(st.st_mode);
	if (!(S_ISREG(st.st_mode) || isdir) || !listed(files, name, isdir))
		return false;
	return !isdir || module_dir_replaceable(path, why, n);
}

bool pipeline_dir_replaceable(const char *dir, char *why, size_t n)
{
	return wl_dir_replaceable(dir, "pipeline.json", "wlower-pipeline", pipeline_entry_ok, why, n);
}
