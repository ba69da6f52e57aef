/* options.c — what the commands share (commands.h): the option table and
 * its parser, the two kinds of error line, thread defaults, type
 * descriptions. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "compiler/driver/commands.h"
#include "runtime/interp/interp.h"
#include "runtime/pipelines/pipeline.h"

int cmd_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, cmd ? "wlower %s: " : "wlower: ", cmd);
	vfprintf(stderr, fmt, ap);
	if (cmd)
		fprintf(stderr, " (see 'wlower %s --help')\n", cmd);
	else
		fprintf(stderr, " (see 'wlower --help')\n");
	va_end(ap);
	return CMD_USAGE;
}

int cmd_error(const char *cmd, const Diag *d)
{
	const char *msg = d && d->set ? d->msg : "unknown error";
	if (cmd)
		fprintf(stderr, "wlower %s: error: %s\n", cmd, msg);
	else
		fprintf(stderr, "wlower: error: %s\n", msg);
	return CMD_BAD_INPUT;
}

/* ---------------------------------------------------------------- the option table */

bool opt_help(int argc, char **argv, const char *usage)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage, stdout);
			return true;
		}
	return false;
}

int opt_quantity(const char *s, const char *unit, bool binary, double *out)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || !(v > 0) || !isfinite(v))
		return -1;
	double k = binary ? 1024.0 : 1000.0;
	if (*end == 'K' || *end == 'k') { v *= k; end++; }
	else if (*end == 'M') { v *= k * k; end++; }
	else if (*end == 'G') { v *= k * k * k; end++; }
	if (binary && *end == 'i')
		end++;
	if (*end && strcmp(end, unit) != 0 && !(strcmp(unit, "Bps") == 0 && strcmp(end, "B/s") == 0))
		return -1;
	if (!isfinite(v))
		return -1;
	*out = v;
	return 0;
}

/* The value of row r at argv[*i] ("--name=v", "--name v", alias): 1 and *val
 * when it matches, 0 when not, -1 (usage printed) when the value is missing. */
static int opt_match(const char *cmd, const OptSpec *r, int argc, char **argv, int *i, const char **val)
{
	const char *a = argv[*i];
	for (int k = 0; k < 2; k++) {
		const char *name = k ? r->alias : r->name;
		if (!name)
			continue;
		size_t n = strlen(name);
		if (strncmp(a, name, n) != 0)
			continue;
		if (r->kind == OPT_FLAG) {
			if (a[n] == 0)
				return 1;
			continue;
		}
		if (a[n] == '=' && name[1] == '-') {
			*val = a + n + 1;
			return 1;
		}
		if (a[n] != 0)
			continue;
		if (*i + 1 >= argc) {
			cmd_usage(cmd, "option '%s' needs a value", name);
			return -1;
		}
		*val = argv[++*i];
		return 1;
	}
	return 0;
}

static int opt_bad(const char *cmd, const OptSpec *r, const char *v)
{
	if (r->bad)
		return cmd_usage(cmd, r->bad, r->name, v);
	return cmd_usage(cmd, "%s: expected an integer in %.0f..%.0f, got '%s'", r->name, r->lo, r->hi, v);
}

static int opt_store(const char *cmd, const OptSpec *r, const char *v, void *args)
{
	char *field = (char *)args + r->off;
	char *end;
	double q = 0;
	switch (r->kind) {
	case OPT_FLAG:
		*(bool *)field = true;
		return CMD_OK;
	case OPT_STRING:
		*(const char **)field = v;
		return CMD_OK;
	case OPT_LIST: {
		OptList *l = (OptList *)field;
		l->v = realloc(l->v, (size_t)(l->n + 1) * sizeof *l->v);
		if (!l->v)
			wl_die(__FILE__, __LINE__, "out of memory");
		l->v[l->n++] = v;
		return CMD_OK;
	}
	case OPT_INT: {
		errno = 0;
		long x = strtol(v, &end, 10);
		if (errno || end == v || *end || x < r->lo || x > r->hi)
			return opt_bad(cmd, r, v);
		*(long *)field = x;
		return CMD_OK;
	}
	case OPT_REAL:
		q = strtod(v, &end);
		if (end == v || *end || !isfinite(q) || q > r->hi || (r->lo_open ? !(q > r->lo) : !(q >= r->lo)))
			return opt_bad(cmd, r, v);
		break;
	case OPT_SIZE:
	case OPT_FREQ:
	case OPT_BANDWIDTH: {
		const char *unit = r->kind == OPT_SIZE ? "B" : r->kind == OPT_FREQ ? "Hz" : "Bps";
		if (opt_quantity(v, unit, r->kind == OPT_SIZE, &q) || q < r->lo || q > r->hi)
			return opt_bad(cmd, r, v);
		break;
	}
	}
	*(double *)field = q;
	return CMD_OK;
}

int opt_parse(const char *cmd, const OptSpec *spec, int argc, char **argv, void *args,
              const char **pos, const char *pos_what, bool *seen)
{
	bool opts_end = false;                  /* after "--" everything is positional */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		int k = 0, r = 0;
		if (!opts_end && strcmp(a, "--") == 0) {
			opts_end = true;
			continue;
		}
		for (; !opts_end && spec[k].name; k++)
			if ((r = opt_match(cmd, &spec[k], argc, argv, &i, &v)) != 0)
				break;
		if (r < 0)
			return CMD_USAGE;
		if (r > 0) {
			if (opt_store(cmd, &spec[k], v, args) != CMD_OK)
				return CMD_USAGE;
			if (seen)
				seen[k] = true;
			continue;
		}
		if (!opts_end && a[0] == '-' && a[1] != 0)
			return cmd_usage(cmd, "unknown option '%s'", a);
		if (*pos)
			return cmd_usage(cmd, "more than one %s given ('%s')", pos_what, a);
		*pos = a;
	}
	return CMD_OK;
}

void opt_free_lists(const OptSpec *spec, void *args)
{
	for (int k = 0; spec[k].name; k++)
		if (spec[k].kind == OPT_LIST) {
			OptList *l = (OptList *)((char *)args + spec[k].off);
			free(l->v);
			*l = (OptList){0};
		}
}

typedef struct Binding { char *name; const char *file; } Binding;

static int parse_bindings(const char *cmd, const char *opt, const OptList *l, const char *dup_fmt, Binding *b)
{
	for (int i = 0; i < l->n; i++) {
		const char *arg = l->v[i], *eq = strchr(arg, '=');
		if (!eq || eq == arg || !eq[1])
			return cmd_usage(cmd, "%s '%s': expected NAME=FILE.npy", opt, arg);
		b[i].name = strndup(arg, (size_t)(eq - arg));
		if (!b[i].name)
			wl_die(__FILE__, __LINE__, "out of memory");
		b[i].file = eq + 1;
		for (int k = 0; k < i; k++)
			if (strcmp(b[k].name, b[i].name) == 0)
				return cmd_usage(cmd, dup_fmt, b[i].name);
	}
	return CMD_OK;
}

int cmd_bindings(const char *cmd, const char *opt, const OptList *l, const char *dup_fmt, size_t size,
                 size_t name_off, size_t file_off, void *out)
{
	Binding *b = calloc((size_t)l->n + 1, sizeof *b);
	if (!b)
		wl_die(__FILE__, __LINE__, "out of memory");
	int rc = parse_bindings(cmd, opt, l, dup_fmt, b);
	char *recs = NULL;
	if (rc == CMD_OK) {
		recs = calloc((size_t)l->n + 1, size);
		if (!recs)
			wl_die(__FILE__, __LINE__, "out of memory");
		for (int i = 0; i < l->n; i++) {
			memcpy(recs + (size_t)i * size + name_off, &b[i].name, sizeof b[i].name);
			memcpy(recs + (size_t)i * size + file_off, &b[i].file, sizeof b[i].file);
		}
	} else {
		for (int i = 0; i < l->n; i++)
			free(b[i].name);
	}
	free(b);
	memcpy(out, &recs, sizeof recs);
	return rc;
}

int cmd_default_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

int cmd_cache_root(const char *cmd, char *buf, size_t n)
{
	const char *w = getenv("WLOWER_CACHE"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	if (w && *w)
		snprintf(buf, n, "%s", w);
	else if (x && *x)
		snprintf(buf, n, "%s/wlower", x);
	else if (h && *h)
		snprintf(buf, n, "%s/.cache/wlower", h);
	else
		return cmd_usage(cmd, "%s", "--model: no cache folder (set WLOWER_CACHE or HOME)");
	return CMD_OK;
}

int cmd_cached_pipeline(const char *cmd, const char *kind, const char *model, const char *target, const char *dir,
                        const char *const *opts, int nopts)
{
	cJSON *pj = NULL;
	Diag d = {0};
	if (pipeline_read(dir, kind, &pj, &d) == WL_OK) {
		cJSON_Delete(pj);
		return CMD_OK;
	}
	d = (Diag){0};
	char *parent = path_dirname(dir);
	int rc = mkdir_p(parent, &d);
	free(parent);
	if (rc != WL_OK)
		return cmd_error(cmd, &d);
	fprintf(stderr, "wlower %s: compiling %s for %s into %s (first use)\n", cmd, model, target, dir);
	const char *argv[48] = {"wlower", model, "--pipeline", kind, "--target", target, "-o", dir};
	int argc = 8;
	for (int i = 0; i + 1 < nopts && argc + 2 < 48; i += 2)
		if (opts[i + 1]) {
			argv[argc++] = opts[i];
			if (opts[i + 1][0])          /* "": a flag */
				argv[argc++] = opts[i + 1];
		}
	argv[argc] = NULL;
	rc = cmd_compile(argc, (char **)argv);
	return rc == 0 ? CMD_OK : rc;
}

bool parse_id_list(const char *s, int64_t **ids, int *n)
{
	int cap = 16;
	*n = 0;
	*ids = wl_xmalloc((size_t)cap * sizeof **ids);
	for (const char *p = s;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		char *end;
		errno = 0;
		long long v = strtoll(p, &end, 10);
		while (end != p && (*end == ' ' || *end == '\t'))
			end++;
		if (end == p || v < 0 || v > INT32_MAX || errno || (*end && *end != ',')) {
			free(*ids);
			*ids = NULL;
			*n = 0;
			return false;
		}
		if (*n == cap && !(*ids = realloc(*ids, (size_t)(cap *= 2) * sizeof **ids)))
			wl_die(__FILE__, __LINE__, "out of memory");
		(*ids)[(*n)++] = v;
		if (!*end)
			return true;
		p = end + 1;
	}
}

int cmd_parse_ids(const char *cmd, const char *opt, const char *s, int64_t **ids, int *n)
{
	if (!parse_id_list(s, ids, n))
		return cmd_usage(cmd, "%s '%s': expected non-negative ids separated by commas", opt, s);
	return CMD_OK;
}

const char *cmd_describe_value(const Value *v, char *buf, size_t n)
{
	const Type *t = &v->type;
	const char *dt = t->kind == TY_TENSOR ? dtype_name(t->elem) : NULL;
	if (t->kind == TY_TENSOR && t->elem == DT_FLOAT)
		dt = "float32";
	else if (t->kind == TY_TENSOR && t->elem == DT_DOUBLE)
		dt = "float64";
	size_t k = (size_t)snprintf(buf, n, "%s", dt ? dt : "?");
	if (t->kind != TY_TENSOR || !t->has_shape) {
		if (k < n)
			snprintf(buf + k, n - k, "[?]");
		return buf;
	}
	for (int i = 0; i < t->rank && k < n; i++) {
		const Dim *dm = &t->dims[i];
		if (dm->kind == DIM_VALUE)
			k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "[", (long long)dm->value);
		else if (dm->kind == DIM_PARAM)
			k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? "," : "[", dm->param);
		else
			k += (size_t)snprintf(buf + k, n - k, "%s?", i ? "," : "[");
	}
	if (k < n)
		snprintf(buf + k, n - k, "%s", t->rank ? "]" : "[]");
	return buf;
}

/* ---------------------------------------------------------------- samples files */

int cmd_sample_view(const RTensor *all, const Value *input, const char *file, const char *name,
                    const char *model, RTensor *view, size_t *stride, Diag *d)
{
	const RTensor *a = all;
	const Type *ty = &input->type;
	char got[128], want[256];
	if (a->ndim < 1)
		return diag_fail(d, "%s: samples for input '%s' are a scalar: expected [S, ...] with one "
		                 "sample per index of the first axis", file, name);
	int rank = ty->kind == TY_TENSOR && ty->has_shape ? ty->rank : -1;
	RTensor *v = view;
	*v = (RTensor){.dtype = a->dtype, .owned = false};
	if (rank >= 0 && a->ndim == rank + 1) {
		v->ndim = rank;
		memcpy(v->dims, a->dims + 1, (size_t)rank * sizeof *v->dims);
	} else if (rank >= 1 && a->ndim == rank && a->ndim < RT_MAX_DIMS &&
	           (ty->dims[0].kind != DIM_VALUE || ty->dims[0].value == 1)) {
		v->ndim = rank;
		v->dims[0] = 1;
		memcpy(v->dims + 1, a->dims + 1, (size_t)(rank - 1) * sizeof *v->dims);
	} else if (rank < 0) {
		v->ndim = a->ndim - 1;      /* rank unknown: take the file's */
		memcpy(v->dims, a->dims + 1, (size_t)v->ndim * sizeof *v->dims);
	} else {
		return diag_fail(d, "%s: samples for input '%s' have shape %s: expected [S, *input] or, when "
		                 "the input's first dim is 1, [S, *input[1:]] for input %s of %s", file, name,
		                 rt_describe(a, got, sizeof got), cmd_describe_value(input, want, sizeof want), model);
	}
	int64_t S = a->dims[0];
	*stride = S > 0 ? a->nbytes / (size_t)S : 0;
	v->nbytes = *stride;
	v->data = a->data;
	return WL_OK;
}
