/* ir.c — construction and mutation of the IR: modules, graphs, values with
 * their use lists, nodes, attributes, tensors and types. All memory comes
 * from the module's arena; name lookup uses one hash map per graph scope. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "ir.h"

/* ---------------------------------------------------------------- names */

typedef struct NameMap {
	Value **slot;
	size_t cap, n;   /* cap is a power of two */
} NameMap;

uint64_t wl_hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;      /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static void map_put(Arena *a, NameMap *m, Value *v);

static void map_grow(Arena *a, NameMap *m)
{
	Value **old = m->slot;
	size_t oldcap = m->cap;
	m->cap = oldcap ? oldcap * 2 : 64;
	m->slot = arena_alloc(a, m->cap * sizeof *m->slot);
	m->n = 0;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i])
			map_put(a, m, old[i]);
}

static void map_put(Arena *a, NameMap *m, Value *v)
{
	if ((m->n + 1) * 2 > m->cap)
		map_grow(a, m);
	size_t i = wl_hash_str(v->name) & (m->cap - 1);
	while (m->slot[i]) {
		WL_ASSERT(strcmp(m->slot[i]->name, v->name) != 0);
		i = (i + 1) & (m->cap - 1);
	}
	m->slot[i] = v;
	m->n++;
}

static Value *map_get(const NameMap *m, const char *name)
{
	if (!m || !m->cap)
		return NULL;
	size_t i = wl_hash_str(name) & (m->cap - 1);
	for (; m->slot[i]; i = (i + 1) & (m->cap - 1))
		if (strcmp(m->slot[i]->name, name) == 0)
			return m->slot[i];
	return NULL;
}

/* ---------------------------------------------------------------- module */

Module *module_new(const char *path)
{
	Arena *a = arena_new();
	Module *m = arena_alloc(a, sizeof *m);
	m->arena = a;
	m->path = arena_strdup(a, path ? path : "<memory>");
	m->ir_version = 8;
	m->producer_name = "";
	m->producer_version = "";
	m->domain = "";
	m->doc = "";
#ifdef WLOWER_DEBUG
	m->debug_verify = true;
#endif
	return m;
}

void module_free(Module *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->nmaps; i++)
		if (m->maps[i].addr && m->maps[i].len)
			munmap(m->maps[i].addr, m->maps[i].len);
	arena_free(m->arena);
}

void module_add_mapping(Module *m, void *addr, size_t len)
{
	Mapping mp = {addr, len};
	VEC_PUSH(m->arena, m->maps, m->nmaps, m->cap_maps, mp);
}

void module_set_opset(Module *m, const char *domain, int64_t version)
{
	for (int i = 0; i < m->nopsets; i++)
		if (domain_eq(m->opsets[i].domain, domain)) {
			if (m->opsets[i].version < version)
				m->opsets[i].version = version;
			return;
		}
	Opset o = {arena_strdup(m->arena, domain ? domain : ""), version};
	VEC_PUSH(m->arena, m->opsets, m->nopsets, m->cap_opsets, o);
}

int64_t module_opset(const Module *m, const char *domain)
{
	for (int i = 0; i < m->nopsets; i++)
		if (domain_eq(m->opsets[i].domain, domain))
			return m->opsets[i].version;
	return 0;
}

/* ---------------------------------------------------------------- graphs */

Graph *graph_new(Module *m, Graph *parent, Node *owner, const char *name)
{
	Graph *g = arena_alloc(m->arena, sizeof *g);
	g->mod = m;
	g->parent = parent;
	g->owner = owner;
	g->name = arena_strdup(m->arena, name ? name : "");
	g->doc = "";
	g->names = arena_alloc(m->arena, sizeof *g->names);
	return g;
}

Value *graph_find_local(Graph *g, const char *name)
{
	return map_get(g->names, name);
}

Value *graph_find(Graph *g, const char *name)
{
	for (; g; g = g->parent) {
		Value *v = map_get(g->names, name);
		if (v)
			return v;
	}
	return NULL;
}

static Value *value_create(Graph *g, const char *name)
{
	Arena *a = g->mod->arena;
	Value *v = arena_alloc(a, sizeof *v);
	v->name = arena_strdup(a, name);
	v->graph = g;
	v->doc = "";
	v->frac_bits = -1;
	v->id = g->mod->next_value_id++;
	map_put(a, g->names, v);
	VEC_PUSH(a, g->values, g->nvalues, g->cap_values, v);
	return v;
}

bool value_rename(Value *v, const char *name)
{
	Graph *g = v->graph;
	Arena *a = g->mod->arena;
	if (map_get(g->names, name))
		return false;
	v->name = arena_strdup(a, name);
	if (v->init)
		v->init->name = v->name;
	/* open addressing without deletion: rebuild the scope's map */
	NameMap *m = g->names;
	m->slot = arena_alloc(a, m->cap * sizeof *m->slot);
	m->n = 0;
	for (int i = 0; i < g->nvalues; i++)
		map_put(a, m, g->values[i]);
	return true;
}

Value *graph_value(Graph *g, const char *name)
{
	Value *v = map_get(g->names, name);
	return v ? v : value_create(g, name);
}

Value *graph_new_value(Graph *g, const char *hint)
{
	if (!hint || !*hint)
		hint = "t";
	if (!graph_find(g, hint))
		return value_create(g, hint);
	char buf[512];
	for (int i = 1;; i++) {
		snprintf(buf, sizeof buf, "%s_%d", hint, i);
		if (!graph_find(g, buf))
			return value_create(g, buf);
	}
}

void graph_add_input(Graph *g, Value *v)
{
	v->is_input = true;
	VEC_PUSH(g->mod->arena, g->inputs, g->ninputs, g->cap_inputs, v);
}

void graph_add_output(Graph *g, Value *v)
{
	v->is_output = true;
	VEC_PUSH(g->mod->arena, g->outputs, g->noutputs, g->cap_outputs, v);
}

void graph_remove_input(Graph *g, int idx)
{
	WL_ASSERT(idx >= 0 && idx < g->ninputs);
	Value *v = g->inputs[idx];
	memmove(&g->inputs[idx], &g->inputs[idx + 1], (size_t)(g->ninputs - idx - 1) * sizeof *g->inputs);
	g->ninputs--;
	v->is_input = false;
}

void graph_remove_output(Graph *g, int idx)
{
	WL_ASSERT(idx >= 0 && idx < g->noutputs);
	Value *v = g->outputs[idx];
	memmove(&g->outputs[idx], &g->outputs[idx + 1], (size_t)(g->noutputs - idx - 1) * sizeof *g->outputs);
	g->noutputs--;
	v->is_output = false;
	for (int i = 0; i < g->noutputs; i++)
		if (g->outputs[i] == v)
			v->is_output = true;
}

void graph_set_init(Graph *g, Value *v, Tensor *t)
{
	WL_ASSERT(v->graph == g);
	t->name = v->name;
	if (!v->init)
		VEC_PUSH(g->mod->arena, g->inits, g->ninits, g->cap_inits, v);
	v->init = t;
	if (v->type.kind == TY_NONE)
		type_set_tensor(g->mod->arena, &v->type, t->dtype, t->ndim, t->dims);
}

void graph_remove_init(Graph *g, Value *v)
{
	for (int i = 0; i < g->ninits; i++)
		if (g->inits[i] == v) {
			memmove(&g->inits[i], &g->inits[i + 1], (size_t)(g->ninits - i - 1) * sizeof *g->inits);
			g->ninits--;
			break;
		}
	v->init = NULL;
}

/* ---------------------------------------------------------------- uses */

static void use_add(Value *v, Node *n, int slot)
{
	Use u = {n, slot};
	VEC_PUSH(n->graph->mod->arena, v->users, v->nusers, v->cap_users, u);
}

static void use_del(Value *v, Node *n, int slot)
{
	for (int i = 0; i < v->nusers; i++)
		if (v->users[i].node == n && v->users[i].slot == slot) {
			v->users[i] = v->users[--v->nusers];
			return;
		}
	WL_UNREACHABLE();
}

/* ---------------------------------------------------------------- nodes */

Node *node_new(Graph *g, const char *op_type, const char *domain, const char *name)
{
	Arena *a = g->mod->arena;
	Node *n = arena_alloc(a, sizeof *n);
	n->graph = g;
	n->op_type = arena_strdup(a, op_type);
	n->domain = arena_strdup(a, domain ? domain : "");
	n->name = arena_strdup(a, name ? name : "");
	n->doc = "";
	n->op = op_lookup(n->domain, n->op_type);
	return n;
}

const char *node_op_name(const Node *n, char *buf, size_t len)
{
	if (domain_is_default(n->domain))
		snprintf(buf, len, "%s", n->op_type);
	else
		snprintf(buf, len, "%s.%s", n->domain, n->op_type);
	return buf;
}

static void link_between(Graph *g, Node *prev, Node *n, Node *next)
{
	WL_ASSERT(n->graph == g && !n->prev && !n->next && g->first != n);
	n->prev = prev;
	n->next = next;
	if (prev) prev->next = n; else g->first = n;
	if (next) next->prev = n; else g->last = n;
	g->nnodes++;
}

void node_append(Graph *g, Node *n) { link_between(g, g->last, n, NULL); }
void node_insert_before(Node *pos, Node *n) { link_between(pos->graph, pos->prev, n, pos); }
void node_insert_after(Node *pos, Node *n) { link_between(pos->graph, pos, n, pos->next); }

void node_add_input(Node *n, Value *v)
{
	VEC_PUSH(n->graph->mod->arena, n->inputs, n->ninputs, n->cap_inputs, v);
	if (v)
		use_add(v, n, n->ninputs - 1);
}

void node_add_output(Node *n, Value *v)
{
	VEC_PUSH(n->graph->mod->arena, n->outputs, n->noutputs, n->cap_outputs, v);
	if (v) {
		WL_ASSERT(!v->producer);
		v->producer = n;
		v->producer_slot = n->noutputs - 1;
	}
}

void node_set_input(Node *n, int slot, Value *v)
{
	WL_ASSERT(slot >= 0 && slot < n->ninputs);
	if (n->inputs[slot])
		use_del(n->inputs[slot], n, slot);
	n->inputs[slot] = v;
	if (v)
		use_add(v, n, slot);
}

void node_remove(Node *n)
{
	Graph *g = n->graph;
	for (int i = 0; i < n->ninputs; i++)
		if (n->inputs[i]) {
			use_del(n->inputs[i], n, i);
			n->inputs[i] = NULL;
		}
	for (int i = 0; i < n->noutputs; i++)
		if (n->outputs[i] && n->outputs[i]->producer == n)
			n->outputs[i]->producer = NULL;
	if (n->prev) n->prev->next = n->next; else g->first = n->next;
	if (n->next) n->next->prev = n->prev; else g->last = n->prev;
	n->prev = n->next = NULL;
	g->nnodes--;
}

void value_replace_uses(Value *from, Value *to)
{
	WL_ASSERT(from != to);
	while (from->nusers) {
		Use u = from->users[from->nusers - 1];
		node_set_input(u.node, u.slot, to);
	}
	Graph *g = from->graph;
	for (int i = 0; i < g->noutputs; i++)
		if (g->outputs[i] == from) {
			g->outputs[i] = to;
			to->is_output = true;
		}
	from->is_output = false;
}

bool value_is_const(const Value *v)
{
	return v && v->init;
}

/* ---------------------------------------------------------------- attrs */

Attr *node_attr(const Node *n, const char *name)
{
	for (int i = 0; i < n->nattrs; i++)
		if (strcmp(n->attrs[i].name, name) == 0)
			return &n->attrs[i];
	return NULL;
}

Graph *node_subgraph(const Node *n, int i)
{
	for (int a = 0; a < n->nattrs; a++) {
		const Attr *at = &n->attrs[a];
		if (at->type == AT_GRAPH && at->g && i-- == 0)
			return at->g;
		for (int k = 0; at->type == AT_GRAPHS && k < at->n; k++)
			if (at->graphs[k] && i-- == 0)
				return at->graphs[k];
	}
	return NULL;
}

Attr *node_add_attr(Node *n, const char *name, int type)
{
	Attr *at = node_attr(n, name);
	if (!at) {
		Attr z = {0};
		VEC_PUSH(n->graph->mod->arena, n->attrs, n->nattrs, n->cap_attrs, z);
		at = &n->attrs[n->nattrs - 1];
	} else
		memset(at, 0, sizeof *at);
	at->name = arena_strdup(n->graph->mod->arena, name);
	at->type = type;
	at->doc = "";
	return at;
}

int64_t attr_int(const Node *n, const char *name, int64_t dflt)
{
	Attr *a = node_attr(n, name);
	return a && a->type == AT_INT ? a->i : dflt;
}

float attr_float(const Node *n, const char *name, float dflt)
{
	Attr *a = node_attr(n, name);
	if (a && a->type == AT_FLOAT) return a->f;
	if (a && a->type == AT_INT) return (float)a->i;
	return dflt;
}

const char *attr_string(const Node *n, const char *name, const char *dflt)
{
	Attr *a = node_attr(n, name);
	if (!a || a->type != AT_STRING)
		return dflt;
	return arena_strndup(n->graph->mod->arena, a->s.ptr, a->s.len);
}

int attr_ints(const Node *n, const char *name, const int64_t **out)
{
	Attr *a = node_attr(n, name);
	if (!a || (a->type != AT_INTS && a->type != AT_INT))
		return -1;
	if (a->type == AT_INT) {
		*out = &a->i;
		return 1;
	}
	*out = a->ints;
	return a->n;
}

/* ---------------------------------------------------------------- tensors */

int64_t tensor_numel(const Tensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		if (!wl_mul_i64(n, t->dims[i], &n))
			return -1;
	return n;
}

Tensor *tensor_new(Arena *a, const char *name, int dtype, int ndim, const int64_t *dims)
{
	Tensor *t = arena_alloc(a, sizeof *t);
	t->name = arena_strdup(a, name ? name : "");
	t->dtype = dtype;
	t->ndim = ndim;
	t->dims = arena_alloc(a, (size_t)(ndim ? ndim : 1) * sizeof *t->dims);
	if (ndim)
		memcpy(t->dims, dims, (size_t)ndim * sizeof *dims);
	t->doc = "";
	t->storage = TS_RAW;
	return t;
}

void *tensor_alloc_data(Arena *a, Tensor *t)
{
	int64_t n = tensor_numel(t);
	if (t->dtype == DT_STRING) {
		t->strs = arena_alloc(a, (size_t)(n ? n : 1) * sizeof *t->strs);
		return t->strs;
	}
	t->nbytes = dtype_nbytes(t->dtype, n);
	void *p = arena_alloc(a, t->nbytes ? t->nbytes : 1);
	t->data = p;
	return p;
}

Tensor *tensor_clone_meta(Arena *a, const Tensor *t)
{
	Tensor *c = tensor_new(a, t->name, t->dtype, t->ndim, t->dims);
	c->doc = t->doc;
	return c;
}

static double half_to_f64(uint16_t h)
{
	int s = h >> 15, e = (h >> 10) & 31, f = h & 1023;
	double v;
	if (e == 0) v = f * (1.0 / (1 << 24));
	else if (e == 31) v = f ? __builtin_nan("") : __builtin_inf();
	else v = (1024 + f) * __builtin_ldexp(1.0, e - 25);
	return s ? -v : v;
}

double tensor_get_f64(const Tensor *t, int64_t i)
{
	const unsigned char *p = t->data;
	switch (t->dtype) {
	case DT_FLOAT: { float f; memcpy(&f, p + 4 * i, 4); return f; }
	case DT_DOUBLE: { double f; memcpy(&f, p + 8 * i, 8); return f; }
	case DT_FLOAT16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return half_to_f64(h); }
	case DT_BFLOAT16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return bits_to_f32((uint32_t)h << 16); }
	default: return (double)tensor_get_i64(t, i);
	}
}

int64_t tensor_get_i64(const Tensor *t, int64_t i)
{
	const unsigned char *p = t->data;
	switch (t->dtype) {
	case DT_INT64: { int64_t v; memcpy(&v, p + 8 * i, 8); return v; }
	case DT_UINT64: { uint64_t v; memcpy(&v, p + 8 * i, 8); return (int64_t)v; }
	case DT_INT32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
	case DT_UINT32: { uint32_t v; memcpy(&v, p + 4 * i, 4); return v; }
	case DT_INT16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
	case DT_UINT16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return v; }
	case DT_INT8: return (int8_t)p[i];
	case DT_UINT8: case DT_BOOL: return p[i];
	case DT_UINT4: return (p[i / 2] >> (4 * (i & 1))) & 15;
	case DT_INT4: { int v = (p[i / 2] >> (4 * (i & 1))) & 15; return v >= 8 ? v - 16 : v; }
	case DT_FLOAT: case DT_DOUBLE: case DT_FLOAT16: case DT_BFLOAT16:
		return (int64_t)tensor_get_f64(t, i);
	default: WL_UNREACHABLE();
	}
}

/* ---------------------------------------------------------------- types */

void type_set_tensor(Arena *a, Type *ty, int elem, int rank, const int64_t *dims)
{
	memset(ty, 0, sizeof *ty);
	ty->kind = TY_TENSOR;
	ty->elem = elem;
	if (rank < 0)
		return;
	ty->has_shape = true;
	ty->rank = rank;
	ty->dims = arena_alloc(a, (size_t)(rank ? rank : 1) * sizeof *ty->dims);
	for (int i = 0; i < rank; i++)
		if (dims && dims[i] >= 0) {
			ty->dims[i].kind = DIM_VALUE;
			ty->dims[i].value = dims[i];
		}
}

Type type_copy(Arena *a, const Type *t)
{
	Type c = *t;
	if (t->has_shape) {
		c.dims = arena_alloc(a, (size_t)(t->rank ? t->rank : 1) * sizeof *c.dims);
		if (t->rank)
			memcpy(c.dims, t->dims, (size_t)t->rank * sizeof *c.dims);
	}
	if (t->inner) {
		c.inner = arena_alloc(a, sizeof *c.inner);
		*c.inner = type_copy(a, t->inner);
	}
	return c;
}

static bool str_eq(const char *a, const char *b)
{
	return (!a || !*a) ? (!b || !*b) : (b && strcmp(a, b) == 0);
}

bool type_equal(const Type *a, const Type *b)
{
	if (a->kind != b->kind || a->elem != b->elem || a->has_shape != b->has_shape ||
	    a->map_key != b->map_key)
		return false;
	if (a->has_shape) {
		if (a->rank != b->rank)
			return false;
		for (int i = 0; i < a->rank; i++) {
			const Dim *x = &a->dims[i], *y = &b->dims[i];
			if (x->kind != y->kind) return false;
			if (x->kind == DIM_VALUE && x->value != y->value) return false;
			if (x->kind == DIM_PARAM && !str_eq(x->param, y->param)) return false;
		}
	}
	if (!a->inner != !b->inner)
		return false;
	return !a->inner || type_equal(a->inner, b->inner);
}

bool type_shape_known(const Type *t)
{
	if (t->kind != TY_TENSOR || !t->has_shape)
		return false;
	for (int i = 0; i < t->rank; i++)
		if (t->dims[i].kind != DIM_VALUE)
			return false;
	return true;
}

int64_t type_numel(const Type *t)
{
	if (!type_shape_known(t))
		return -1;
	int64_t n = 1;
	for (int i = 0; i < t->rank; i++)
		if (!wl_mul_i64(n, t->dims[i].value, &n))
			return -1;
	return n;
}
