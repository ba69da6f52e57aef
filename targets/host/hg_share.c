/* hg_share.c — kernel sharing: nodes whose kernels would be the same code
 * share one LLVM function, so code generation and O3 cost one function per
 * distinct kernel, not one per node (a 100,000-node chain of Add/Mul has two).
 *
 * A kernel function reaches its data only through `args` (hostgen.h), and a
 * generator reads only its node's op, attributes, the types of its inputs and
 * outputs, which inputs are absent or initializers, and the scratch size. The
 * key is exactly that; a generator that starts to read anything else (a value
 * name, initializer bytes) must add it to kernel_key. Nodes with a graph
 * attribute never share.
 *
 * What differs between nodes of one key stays out of the code: an index
 * site (WlIndexSite: the tensor, node and op names an out-of-range index is
 * reported with) is an args pointer (hg_index_site); the kernel keeps only
 * the site's node-independent part (HgKfn.site: which input, the axis size,
 * the flags, all decided by the key), and host.c makes every node's own
 * site from it and passes it through the step table. So a shared Gather
 * names the node whose index was bad. */
#include <stdlib.h>
#include <string.h>
#include "hostgen.h"

typedef struct Key { char *p; size_t n, cap; } Key;

static void put(Key *k, const void *s, size_t n)
{
	if (k->n + n > k->cap) {
		k->cap = (k->n + n) * 2 + 64;
		k->p = realloc(k->p, k->cap);
		WL_ASSERT(k->p);
	}
	memcpy(k->p + k->n, s, n);
	k->n += n;
}

static void put_i64(Key *k, int64_t v) { put(k, &v, sizeof v); }

static void put_str(Key *k, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	put_i64(k, (int64_t)n);
	put(k, s ? s : "", n);
}

static void put_type(Key *k, const Type *t)
{
	put_i64(k, t->kind);
	put_i64(k, t->elem);
	put_i64(k, t->has_shape ? t->rank : -1);
	for (int i = 0; t->has_shape && i < t->rank; i++) {
		put_i64(k, t->dims[i].kind);
		if (t->dims[i].kind == DIM_VALUE)
			put_i64(k, t->dims[i].value);
		else
			put_str(k, t->dims[i].param);
	}
}

static void put_tensor(Key *k, const Tensor *t)
{
	put_i64(k, t->dtype);
	put_i64(k, t->ndim);
	for (int i = 0; i < t->ndim; i++)
		put_i64(k, t->dims[i]);
	put_i64(k, (int64_t)t->nbytes);
	if (t->data)
		put(k, t->data, t->nbytes);
}

/* false: the attribute cannot be keyed (graphs, sparse tensors, types) */
static bool put_attr(Key *k, const Attr *a)
{
	put_str(k, a->name);
	put_i64(k, a->type);
	switch (a->type) {
	case AT_FLOAT: put(k, &a->f, sizeof a->f); return true;
	case AT_INT: put_i64(k, a->i); return true;
	case AT_STRING: put_i64(k, (int64_t)a->s.len); put(k, a->s.ptr, a->s.len); return true;
	case AT_TENSOR: put_tensor(k, a->t); return true;
	case AT_FLOATS: put_i64(k, a->n); put(k, a->floats, (size_t)a->n * sizeof *a->floats); return true;
	case AT_INTS: put_i64(k, a->n); put(k, a->ints, (size_t)a->n * sizeof *a->ints); return true;
	case AT_STRINGS:
		put_i64(k, a->n);
		for (int i = 0; i < a->n; i++) {
			put_i64(k, (int64_t)a->strings[i].len);
			put(k, a->strings[i].ptr, a->strings[i].len);
		}
		return true;
	case AT_TENSORS:
		put_i64(k, a->n);
		for (int i = 0; i < a->n; i++)
			put_tensor(k, a->tensors[i]);
		return true;
	default: return false;
	}
}

static void put_value(Key *k, const Value *v)
{
	if (!v) {
		put_i64(k, -1);
		return;
	}
	put_i64(k, v->init ? 1 : 0);
	put_type(k, &v->type);
}

/* the key of n's kernel (scratch: its scratch bytes); false if n must not share */
static bool kernel_key(Key *k, const Node *n, uint64_t scratch)
{
	k->n = 0;
	put_i64(k, n->op);
	put_str(k, n->op_type);
	put_str(k, n->domain);
	put_i64(k, (int64_t)scratch);
	put_i64(k, n->ninputs);
	for (int i = 0; i < n->ninputs; i++)
		put_value(k, n->inputs[i]);
	put_i64(k, n->noutputs);
	for (int i = 0; i < n->noutputs; i++)
		put_value(k, n->outputs[i]);
	put_i64(k, n->nattrs);
	for (int i = 0; i < n->nattrs; i++)
		if (!put_attr(k, &n->attrs[i]))
			return false;
	return true;
}

static uint64_t hash(const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
	return h;
}

typedef struct Slot { char *key; size_t len; uint64_t h; HgKfn k; } Slot;
struct HgShare { Slot *s; size_t cap, n; Key k; };

HgShare *hg_share_new(void)
{
	HgShare *c = calloc(1, sizeof *c);
	WL_ASSERT(c);
	c->cap = 64;
	c->s = calloc(c->cap, sizeof *c->s);
	WL_ASSERT(c->s);
	return c;
}

void hg_share_free(HgShare *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->cap; i++)
		free(c->s[i].key);
	free(c->s);
	free(c->k.p);
	free(c);
}

static Slot *find(HgShare *c, uint64_t h, const char *key, size_t len)
{
	for (size_t i = h & (c->cap - 1);; i = (i + 1) & (c->cap - 1)) {
		Slot *s = &c->s[i];
		if (!s->key || (s->h == h && s->len == len && !memcmp(s->key, key, len)))
			return s;
	}
}

static void grow(HgShare *c)
{
	Slot *old = c->s;
	size_t ocap = c->cap;
	c->cap *= 2;
	c->s = calloc(c->cap, sizeof *c->s);
	WL_ASSERT(c->s);
	for (size_t i = 0; i < ocap; i++)
		if (old[i].key)
			*find(c, old[i].h, old[i].key, old[i].len) = old[i];
	free(old);
}

const HgKfn *hg_share_find(HgShare *c, const Node *n, uint64_t scratch)
{
	if (!kernel_key(&c->k, n, scratch))
		return NULL;
	Slot *s = find(c, hash(c->k.p, c->k.n), c->k.p, c->k.n);
	return s->key ? &s->k : NULL;
}

void hg_share_add(HgShare *c, const Node *n, uint64_t scratch, const HgKfn *k)
{
	if (!kernel_key(&c->k, n, scratch))
		return;
	if (2 * (c->n + 1) > c->cap)
		grow(c);
	uint64_t h = hash(c->k.p, c->k.n);
	Slot *s = find(c, h, c->k.p, c->k.n);
	if (s->key)
		return;
	s->key = malloc(c->k.n + 1);
	WL_ASSERT(s->key);
	memcpy(s->key, c->k.p, c->k.n);
	*s = (Slot){s->key, c->k.n, h, *k};
	c->n++;
}
