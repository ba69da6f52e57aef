/* cmdutil.c — small helpers the subcommands share (commands.h): option
 * parsing, the two kinds of error line, thread defaults, type descriptions. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "compiler/driver/commands.h"

int cmd_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "wlower %s: ", cmd);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, " (see 'wlower %s --help')\n", cmd);
	va_end(ap);
	return CMD_USAGE;
}

int cmd_error(const char *cmd, const Diag *d)
{
	fprintf(stderr, "wlower %s: error: %s\n", cmd, d && d->set ? d->msg : "unknown error");
	return CMD_BAD_INPUT;
}

int cmd_opt(const char *cmd, const char *name, int argc, char **argv, int *i, const char **val)
{
	size_t n = strlen(name);
	const char *a = argv[*i];
	if (strncmp(a, name, n) != 0)
		return 0;
	if (a[n] == '=') {
		*val = a + n + 1;
		return 1;
	}
	if (a[n] != 0)
		return 0;
	if (*i + 1 >= argc) {
		cmd_usage(cmd, "option '%s' needs a value", name);
		return -1;
	}
	*val = argv[++*i];
	return 1;
}

int cmd_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		cmd_usage(cmd, "%s: expected an integer in %ld..%ld, got '%s'", opt, lo, hi, s);
		return -1;
	}
	*out = v;
	return 0;
}

bool cmd_split_binding(const char *arg, char **name, const char **file)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg || !eq[1])
		return false;
	*name = strndup(arg, (size_t)(eq - arg));
	if (!*name)
		wl_die(__FILE__, __LINE__, "out of memory");
	*file = eq + 1;
	return true;
}

int cmd_default_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 64 ? 64 : (int)n;
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
