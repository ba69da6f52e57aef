/* diag.c — the two error tiers.
 * Internal invariants: wl_die prints "wlower: internal error at FILE:LINE: ..."
 * and aborts. Bad input: a Diag carries one line back to the driver, which
 * alone prints it and exits 1. Newlines in messages are flattened to spaces so
 * that a message stays one line whatever a model's names contain. The
 * wl_x* allocators die on out of memory (an internal error, not bad input). */
#include <stdlib.h>
#include <string.h>
#include "ir.h"

_Noreturn void wl_die(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	fprintf(stderr, "wlower: internal error at %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

void *wl_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		wl_die(__FILE__, __LINE__, "out of memory");
	return p;
}

void *wl_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		wl_die(__FILE__, __LINE__, "out of memory");
	return p;
}

char *wl_xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		wl_die(__FILE__, __LINE__, "out of memory");
	return p;
}

static void flatten(char *s)
{
	for (; *s; s++)
		if (*s == '\n' || *s == '\r' || *s == '\t')
			*s = ' ';
		else if ((unsigned char)*s < 0x20)
			*s = '?';
}

int diag_vfail(Diag *d, const char *fmt, va_list ap)
{
	if (!d || d->set)
		return WL_ERR;
	vsnprintf(d->msg, sizeof d->msg, fmt, ap);
	flatten(d->msg);
	d->set = 1;
	return WL_ERR;
}

int diag_fail(Diag *d, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	diag_vfail(d, fmt, ap);
	va_end(ap);
	return WL_ERR;
}

void diag_prefix(Diag *d, const char *fmt, ...)
{
	if (!d)
		return;
	char pre[512], old[sizeof d->msg];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(pre, sizeof pre, fmt, ap);
	va_end(ap);
	memcpy(old, d->msg, sizeof old);
	size_t np = strlen(pre);
	if (np >= sizeof d->msg)
		np = sizeof d->msg - 1;
	memcpy(d->msg, pre, np);
	size_t rest = sizeof d->msg - 1 - np;
	size_t no = strnlen(old, rest);
	memcpy(d->msg + np, old, no);
	d->msg[np + no] = 0;
	flatten(d->msg);
	d->set = 1;
}

int diag_index_range(Diag *d, const char *tensor, int flags, const char *node, const char *op, int rank,
                     const int64_t *dims, int64_t pos, int64_t value, int64_t size)
{
	int64_t at[16] = {0};
	for (int i = rank < 16 ? rank - 1 : 15; i >= 0; i--) {
		int64_t n = dims[i] > 0 ? dims[i] : 1;
		at[i] = pos % n;
		pos /= n;
	}
	char where[256];
	size_t k = (size_t)snprintf(where, sizeof where, "[");
	for (int i = 0; i < rank && i < 16 && k < sizeof where; i++)
		k += (size_t)snprintf(where + k, sizeof where - k, "%s%lld", i ? "," : "", (long long)at[i]);
	if (k < sizeof where)
		snprintf(where + k, sizeof where - k, "]");
	return diag_fail(d, "%s '%s' of node '%s' (%s): index %lld at %s out of range [%s%lld, %lld)",
	                 flags & INDEX_GRAPH_INPUT ? "input" : "tensor", tensor ? tensor : "", node ? node : "",
	                 op ? op : "?", (long long)value, where, flags & INDEX_NO_WRAP ? "" : "-",
	                 flags & INDEX_NO_WRAP ? 0LL : (long long)size, (long long)size);
}
