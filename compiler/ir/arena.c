/* arena.c — bump allocator. One arena per Module; everything the IR holds
 * (names, nodes, values, attribute payloads, owned tensor data) lives here and
 * is freed at once by arena_free. Large requests get their own chunk. */
#include <stdlib.h>
#include <string.h>
#include "ir.h"

enum { CHUNK = 64 * 1024, ALIGN = 16 };

typedef struct Chunk {
	struct Chunk *next;
	size_t cap, used;
	_Alignas(16) unsigned char mem[];
} Chunk;

struct Arena {
	Chunk *head;
	size_t handed;
};

static Chunk *chunk_new(size_t cap)
{
	Chunk *c = malloc(sizeof(Chunk) + cap);
	if (!c)
		wl_die(__FILE__, __LINE__, "out of memory (%zu bytes)", cap);
	c->next = NULL;
	c->cap = cap;
	c->used = 0;
	return c;
}

Arena *arena_new(void)
{
	Arena *a = calloc(1, sizeof *a);
	if (!a)
		wl_die(__FILE__, __LINE__, "out of memory");
	return a;
}

void arena_free(Arena *a)
{
	if (!a)
		return;
	for (Chunk *c = a->head, *nx; c; c = nx) {
		nx = c->next;
		free(c);
	}
	free(a);
}

void *arena_alloc(Arena *a, size_t n)
{
	n = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	if (n == 0)
		n = ALIGN;
	a->handed += n;
	if (n > CHUNK / 4) {
		/* big: own chunk, linked behind the head so the head keeps filling */
		Chunk *c = chunk_new(n);
		c->used = n;
		if (a->head) {
			c->next = a->head->next;
			a->head->next = c;
		} else
			a->head = c;
		memset(c->mem, 0, n);
		return c->mem;
	}
	if (!a->head || a->head->cap - a->head->used < n) {
		Chunk *c = chunk_new(CHUNK);
		c->next = a->head;
		a->head = c;
	}
	void *p = a->head->mem + a->head->used;
	a->head->used += n;
	memset(p, 0, n);
	return p;
}

void *arena_realloc(Arena *a, void *p, size_t old, size_t n)
{
	if (n <= old)
		return p;
	void *q = arena_alloc(a, n);
	if (p && old)
		memcpy(q, p, old);
	return q;
}

char *arena_strndup(Arena *a, const char *s, size_t n)
{
	if (!s)
		return NULL;
	char *p = arena_alloc(a, n + 1);
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

char *arena_strdup(Arena *a, const char *s)
{
	return s ? arena_strndup(a, s, strlen(s)) : NULL;
}

char *arena_printf(Arena *a, const char *fmt, ...)
{
	va_list ap, ap2;
	va_start(ap, fmt);
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	WL_ASSERT(n >= 0);
	char *p = arena_alloc(a, (size_t)n + 1);
	vsnprintf(p, (size_t)n + 1, fmt, ap2);
	va_end(ap2);
	return p;
}

size_t arena_bytes(const Arena *a)
{
	return a->handed;
}
