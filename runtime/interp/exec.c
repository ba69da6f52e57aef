/* exec.c — the float reference executor.
 *
 * exec_new walks the main graph once: every value a node reads or writes
 * gets a slot (graph input, initializer, or node output), every node gets
 * its kernel (an op without one is an error naming the node) and runs the
 * kernel's prepare. Initializers are used in place — their RTensor points at
 * the Module's bytes (the mmapped file). raw_data in a file has no
 * alignment; C may not read a float at an odd address, so the GEMM family
 * and the data-movement ops read such inputs through `ufloat` or memcpy
 * (Kernel.unaligned_ok) and take misaligned weights in place. A misaligned
 * initializer read by any other kernel (a bias for an Add, a LayerNorm
 * gain: small tensors) is copied once, aligned; exec_stats reports the bytes.
 *
 * Planning (exec_prepare, run by exec_run whenever the bound input shapes,
 * or the values of inputs that decide shapes, differ from the last plan):
 *   1. shape pass: every node's infer runs in graph order; nodes whose
 *      outputs feed a shape computation (Reshape's shape, Slice's starts,
 *      ConstantOfShape's input, ... — found once, backwards, from the
 *      kernels' data_inputs masks) are also run, on temporary buffers;
 *   2. each node output lives from its producer to its last reader (graph
 *      outputs to the end); the shared planner (compiler/ir/plan.h) places
 *      the blocks in one arena, 64-byte aligned, largest first, each at the
 *      lowest offset that does not overlap a block alive at the same time
 *      (the greedy-by-size heuristic of TFLite's arena planner);
 *   3. per-thread and shared scratch is the maximum any node asked for.
 * exec_run then only calls infer (cheap) and run per node; it does not
 * allocate unless a shape differs from the plan (possible only if a kernel's
 * output shape depends on data it did not declare), in which case that
 * output gets its own buffer and the next run plans again.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ref.h"
#include "compiler/ir/plan.h"

enum { SLOT_NODE = 0, SLOT_INPUT = 1, SLOT_INIT = 2 };

/* Limits that turn absurd shapes (from bad data) into errors, not OOM. */
#define MAX_TENSOR_BYTES ((size_t)4 << 30)
#define MAX_ARENA_BYTES ((size_t)16 << 30)

typedef struct Slot {
	const Value *v;
	int kind;
	RTensor t;              /* current dtype, shape, data */
	bool bound;             /* SLOT_INPUT: exec_bind was called */
	bool need_data;         /* data read while planning (shapes depend on it) */
	int def, last;          /* producing node, last reading node (plan_liveness) */
	size_t off;             /* planned place in the arena */
	int pdt, pndim;         /* planned dtype and shape */
	int64_t pdims[RT_MAX_DIMS];
	void *dyn;              /* own buffer (planning pass or fallback) */
	size_t dyn_cap;
	void *copy;             /* aligned copy of a misaligned initializer */
} Slot;

typedef struct ENode {
	const Node *n;
	const Kernel *k;
	int nin, nout;
	int *in, *out;          /* slot indices, -1 = absent */
	RTensor **pin, **pout;
	void *state;
	bool plan_run;          /* runs during the planning pass */
	size_t scratch, shared; /* from the last infer */
} ENode;

struct Exec {
	Module *m;
	Arena *arena;
	ThreadPool *pool;
	int threads;
	int64_t opset;
	Slot *slots;
	int nslots;
	int *slot_of;           /* Value.id -> slot, -1 */
	ENode *nodes;
	int nnodes;
	int *inputs, ninputs;   /* slots of bindable graph inputs */
	int *outputs, noutputs; /* slots of graph outputs */
	/* plan */
	bool planned, replan;
	void *arena_mem;
	size_t arena_bytes;
	void *scratch_mem, *shared_mem;
	size_t scratch_stride, shared_bytes;
	void *sig;              /* signature of the inputs the plan was made for */
	size_t sig_len;
	int plans;
	size_t copied_init_bytes;
	ExecObserver obs;
	void *obs_ctx;
	const Graph *g;         /* the graph run: the main graph, or an If branch */
	Exec **children;        /* executors of If branches (exec_new_sub), freed with e */
	int nchildren, capchildren;
};

static const char *mpath(const Exec *e)
{
	return e->m->path ? e->m->path : "model";
}

/* ---------------------------------------------------------------- setup */

static int slot_for(Exec *e, const Value *v)
{
	if (v->id < 0 || v->id >= e->m->next_value_id)
		return -1;
	return e->slot_of[v->id];
}

static int add_slot(Exec *e, const Value *v, int kind)
{
	int s = e->nslots++;
	Slot *sl = &e->slots[s];
	memset(sl, 0, sizeof *sl);
	sl->v = v;
	sl->kind = kind;
	sl->def = -1;
	sl->last = -1;
	e->slot_of[v->id] = s;
	return s;
}

/* True when every reader of v declares that input unaligned_ok (and v is
 * not a graph output): then a misaligned initializer is used in place. */
static bool unaligned_readers(const Value *v)
{
	if (v->is_output)
		return false;
	for (int i = 0; i < v->nusers; i++) {
		const Node *n = v->users[i].node;
		const Kernel *k = n ? ref_kernel(n->op) : NULL;
		int slot = v->users[i].slot;
		if (!k || slot < 0 || slot >= 32 || !(k->unaligned_ok >> slot & 1))
			return false;
	}
	return true;
}

static int init_slot(Exec *e, Slot *sl, Diag *d)
{
	const Tensor *t = sl->v->init;
	if (t->dtype == DT_STRING || elem_size(t->dtype) == 0) {
		/* kept as typed but without data: kernels reject the dtype */
		sl->t.dtype = t->dtype;
		sl->t.ndim = 0;
		return WL_OK;
	}
	if (t->ndim > RT_MAX_DIMS)
		return diag_fail(d, "%s: initializer '%s' has %d dimensions (at most %d)", mpath(e), sl->v->name,
		                 t->ndim, RT_MAX_DIMS);
	sl->t.dtype = t->dtype;
	sl->t.ndim = t->ndim;
	for (int i = 0; i < t->ndim; i++)
		sl->t.dims[i] = t->dims[i];
	size_t need = dtype_nbytes(t->dtype, rt_numel(&sl->t));
	if (t->nbytes < need || (need && !t->data))
		return diag_fail(d, "%s: initializer '%s': %zu bytes of data, expected %zu", mpath(e), sl->v->name,
		                 t->nbytes, need);
	sl->t.nbytes = need;
	int es = elem_size(t->dtype);
	if (need && ((uintptr_t)t->data % (uintptr_t)es) != 0 && !unaligned_readers(sl->v)) {
		if (posix_memalign(&sl->copy, 64, need) != 0)
			wl_die(__FILE__, __LINE__, "out of memory");
		memcpy(sl->copy, t->data, need);
		sl->t.data = sl->copy;
		e->copied_init_bytes += need;
	} else {
		sl->t.data = (void *)t->data;
	}
	return WL_OK;
}

static void kcall_init(Exec *e, ENode *en, KCall *c)
{
	memset(c, 0, sizeof *c);
	c->node = en->n;
	c->path = mpath(e);
	c->opset = e->opset;
	c->arena = e->arena;
	c->state = en->state;
	c->nin = en->nin;
	c->nout = en->nout;
	c->in = en->pin;
	c->out = en->pout;
	c->pool = e->pool;
	c->exec = e;
}

/* True when v is declared in sub or in a graph nested in it. */
static bool declared_within(const Value *v, const Graph *sub)
{
	for (const Graph *g = v->graph; g; g = g->parent)
		if (g == sub)
			return true;
	return false;
}

/* The values the subgraphs of n (If branches) read from outside them, once
 * each, into out (at most max; returns how many, or max + 1 past that). */
static int read_from(const Graph *sub, const Graph *root, const Value **out, int k, int max)
{
	FOR_NODES(sub, x) {
		for (int i = 0; i < x->ninputs; i++) {
			const Value *v = x->inputs[i];
			if (!v || declared_within(v, root))
				continue;
			bool seen = false;
			for (int j = 0; j < k && j < max && !seen; j++)
				seen = out[j] == v;
			if (!seen && k++ < max)
				out[k - 1] = v;
		}
		for (int a = 0; a < x->nattrs; a++)
			if (x->attrs[a].type == AT_GRAPH && x->attrs[a].g)
				k = read_from(x->attrs[a].g, root, out, k, max);
	}
	for (int i = 0; i < sub->noutputs; i++) {
		const Value *v = sub->outputs[i];
		bool seen = false;
		for (int j = 0; j < k && j < max && !seen; j++)
			seen = out[j] == v;
		if (v && !seen && !declared_within(v, root) && k++ < max)
			out[k - 1] = v;
	}
	return k;
}

int exec_outer_reads(const Node *n, const Value **out, int max)
{
	int k = 0;
	for (int a = 0; a < n->nattrs; a++)
		if (n->attrs[a].type == AT_GRAPH && n->attrs[a].g)
			k = read_from(n->attrs[a].g, n->attrs[a].g, out, k, max);
	return k;
}

/* The slot of v for a node of e's graph: its own, or, in a subgraph's
 * executor, a bindable input for a value of an enclosing graph. -1 if none. */
static int slot_or_outer(Exec *e, const Value *v)
{
	int s = slot_for(e, v);
	if (s >= 0 || !e->g->parent || declared_within(v, e->g))
		return s;
	s = add_slot(e, v, SLOT_INPUT);
	e->inputs[e->ninputs++] = s;
	return s;
}

static int exec_new_graph(Module *m, const Graph *g, int threads, Exec **out, Diag *d);

int exec_new(Module *m, int threads, Exec **out, Diag *d)
{
	*out = NULL;
	if (!m || !m->graph)
		return diag_fail(d, "%s: no graph", m && m->path ? m->path : "model");
	return exec_new_graph(m, m->graph, threads, out, d);
}

int exec_new_sub(Exec *parent, const Graph *g, Exec **out, Diag *d)
{
	int rc = exec_new_graph(parent->m, g, 1, out, d);
	if (rc == WL_OK)
		VEC_PUSH(parent->arena, parent->children, parent->nchildren, parent->capchildren, *out);
	return rc;
}

static int exec_new_graph(Module *m, const Graph *g, int threads, Exec **out, Diag *d)
{
	*out = NULL;
	Exec *e = calloc(1, sizeof *e);
	if (!e)
		wl_die(__FILE__, __LINE__, "out of memory");
	e->m = m;
	e->g = g;
	e->arena = arena_new();
	if (threads <= 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		threads = n > 0 ? (int)n : 1;
	}
	e->threads = threads;
	e->opset = module_opset(m, "");
	if (e->opset <= 0)
		e->opset = 21;
	int nv = m->next_value_id;
	e->slot_of = malloc(sizeof(int) * (size_t)(nv > 0 ? nv : 1));
	e->slots = calloc((size_t)(nv > 0 ? nv : 1), sizeof(Slot));
	e->nodes = calloc((size_t)(g->nnodes > 0 ? g->nnodes : 1), sizeof(ENode));
	e->inputs = malloc(sizeof(int) * (size_t)(g->ninputs + (g->parent ? nv : 0) + 1));
	e->outputs = malloc(sizeof(int) * (size_t)(g->noutputs + 1));
	if (!e->slot_of || !e->slots || !e->nodes || !e->inputs || !e->outputs)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < nv; i++)
		e->slot_of[i] = -1;

	/* initializers, then graph inputs that are not initializers */
	for (int i = 0; i < g->ninits; i++) {
		Value *v = g->inits[i];
		int s = add_slot(e, v, SLOT_INIT);
		if (init_slot(e, &e->slots[s], d) != WL_OK)
			goto fail;
	}
	for (int i = 0; i < g->ninputs; i++) {
		Value *v = g->inputs[i];
		if (slot_for(e, v) >= 0)
			continue;                    /* an input with a default (initializer) */
		int s = add_slot(e, v, SLOT_INPUT);
		e->inputs[e->ninputs++] = s;
	}

	/* nodes */
	int ni = 0, idx = -1;
	const Value *outer[EXEC_MAX_OUTER + 1];
	int *late = NULL, nlate = 0, caplate = 0;     /* (slot, node index) pairs: If reads */
	FOR_NODES(g, n) {
		idx++;
		/* Outputs with an empty name are absent (ONNX optional outputs). A
		 * node none of whose outputs is present computes nothing anyone can
		 * read: it is not run. One whose required output is absent is bad
		 * input (the kernels write every output the op always has). */
		bool any = n->noutputs == 0;
		for (int i = 0; i < n->noutputs; i++)
			any |= n->outputs[i] != NULL;
		if (!any)
			continue;
		for (int i = 0; i < n->noutputs && i < op_info[n->op].min_out; i++)
			if (!n->outputs[i]) {
				char op[sizeof d->msg];
				diag_fail(d, "%s: node '%s' (%s): output %d has an empty name, but the op always "
				          "produces it (only optional outputs may be unnamed)", mpath(e),
				          n->name ? n->name : "", node_op_name(n, op, sizeof op), i);
				goto fail;
			}
		ENode *en = &e->nodes[ni];
		en->n = n;
		en->k = ref_kernel(n->op);
		if (!en->k) {
			char op[sizeof d->msg];
			diag_fail(d, "%s: node '%s' (%s): no reference kernel for this op", mpath(e),
			          n->name ? n->name : "", node_op_name(n, op, sizeof op));
			goto fail;
		}
		/* an If reads the values its branches use from outside them: they are
		 * inputs after its own (the kernel binds them into the branch) */
		int nouter = n->op == OP_If ? exec_outer_reads(n, outer, EXEC_MAX_OUTER) : 0;
		if (nouter > EXEC_MAX_OUTER) {
			diag_fail(d, "%s: node '%s' (If): its branches read more than %d values from outside them",
			          mpath(e), n->name ? n->name : "", EXEC_MAX_OUTER);
			goto fail;
		}
		en->nin = n->ninputs + nouter;
		en->nout = n->noutputs;
		en->in = arena_alloc(e->arena, sizeof(int) * (size_t)(en->nin + 1));
		en->out = arena_alloc(e->arena, sizeof(int) * (size_t)(en->nout + 1));
		en->pin = arena_alloc(e->arena, sizeof(RTensor *) * (size_t)(en->nin + 1));
		en->pout = arena_alloc(e->arena, sizeof(RTensor *) * (size_t)(en->nout + 1));
		for (int i = 0; i < en->nin; i++) {
			const Value *v = i < n->ninputs ? n->inputs[i] : outer[i - n->ninputs];
			en->in[i] = -1;
			if (!v)
				continue;
			int s = slot_or_outer(e, v);
			if (s >= 0 && i >= n->ninputs) {
				VEC_PUSH(e->arena, late, nlate, caplate, s);
				VEC_PUSH(e->arena, late, nlate, caplate, idx);
			}
			if (s < 0) {
				diag_fail(d, "%s: node '%s' (%s): input '%s' is not a graph input, initializer or earlier node output",
				          mpath(e), n->name ? n->name : "", n->op_type, v->name);
				goto fail;
			}
			en->in[i] = s;
		}
		for (int i = 0; i < en->nout; i++) {
			Value *v = n->outputs[i];
			en->out[i] = -1;
			if (!v)
				continue;
			if (slot_for(e, v) >= 0) {
				diag_fail(d, "%s: node '%s' (%s): output '%s' is defined twice", mpath(e),
				          n->name ? n->name : "", n->op_type, v->name);
				goto fail;
			}
			en->out[i] = add_slot(e, v, SLOT_NODE);
		}
		ni++;
	}
	e->nnodes = ni;
	PlanLive *live = plan_liveness(g, nv);
	for (int s = 0; s < e->nslots; s++) {
		e->slots[s].def = live[e->slots[s].v->id].def;
		e->slots[s].last = live[e->slots[s].v->id].last;
	}
	free(live);
	for (int i = 0; i + 1 < nlate; i += 2)      /* values an If reads through its branches */
		if (e->slots[late[i]].last < late[i + 1])
			e->slots[late[i]].last = late[i + 1];
	for (int i = 0; i < g->noutputs; i++) {
		Value *v = g->outputs[i];
		int s = v ? slot_or_outer(e, v) : -1;
		if (s < 0) {
			diag_fail(d, "%s: graph output '%s' is not produced by any node", mpath(e), v ? v->name : "");
			goto fail;
		}
		e->slots[s].last = e->nnodes;          /* alive to the end */
		e->outputs[e->noutputs++] = s;
	}
	for (int i = 0; i < e->nnodes; i++) {
		ENode *en = &e->nodes[i];
		for (int j = 0; j < en->nin; j++)
			en->pin[j] = en->in[j] >= 0 ? &e->slots[en->in[j]].t : NULL;
		for (int j = 0; j < en->nout; j++)
			en->pout[j] = en->out[j] >= 0 ? &e->slots[en->out[j]].t : NULL;
		if (en->k->prepare) {
			KCall c;
			kcall_init(e, en, &c);
			if (en->k->prepare(&c, d) != WL_OK)
				goto fail;
			en->state = c.state;
		}
	}
	/* which values decide shapes: backwards closure over data_inputs */
	for (int i = e->nnodes - 1; i >= 0; i--) {
		ENode *en = &e->nodes[i];
		for (int j = 0; j < en->nin && j < 32; j++)
			if ((en->k->data_inputs >> j & 1) && en->in[j] >= 0)
				e->slots[en->in[j]].need_data = true;
		bool need = false;
		for (int j = 0; j < en->nout; j++)
			if (en->out[j] >= 0 && e->slots[en->out[j]].need_data)
				need = true;
		if (need) {
			en->plan_run = true;
			if (!en->k->shape_only)
				for (int j = 0; j < en->nin; j++)
					if (en->in[j] >= 0)
						e->slots[en->in[j]].need_data = true;
		}
	}
	e->pool = threadpool_shared(threads);
	*out = e;
	return WL_OK;
fail:
	exec_free(e);
	return WL_ERR;
}

static void free_plan(Exec *e)
{
	free(e->arena_mem);
	free(e->scratch_mem);
	free(e->shared_mem);
	e->arena_mem = e->scratch_mem = e->shared_mem = NULL;
	e->arena_bytes = e->scratch_stride = e->shared_bytes = 0;
	e->planned = false;
}

static void free_dyn(Exec *e)
{
	for (int i = 0; i < e->nslots; i++) {
		free(e->slots[i].dyn);
		e->slots[i].dyn = NULL;
		e->slots[i].dyn_cap = 0;
	}
}

void exec_free(Exec *e)
{
	if (!e)
		return;
	for (int i = 0; i < e->nchildren; i++)
		exec_free(e->children[i]);
	threadpool_free(e->pool);
	free_plan(e);
	free_dyn(e);
	for (int i = 0; i < e->nslots; i++)
		free(e->slots[i].copy);
	free(e->sig);
	free(e->slots);
	free(e->slot_of);
	free(e->nodes);
	free(e->inputs);
	free(e->outputs);
	arena_free(e->arena);
	free(e);
}

int exec_input_count(const Exec *e)
{
	return e->ninputs;
}

const Value *exec_input(const Exec *e, int i)
{
	return (i >= 0 && i < e->ninputs) ? e->slots[e->inputs[i]].v : NULL;
}

int exec_output_count(const Exec *e)
{
	return e->noutputs;
}

const char *exec_output_name(const Exec *e, int i)
{
	return (i >= 0 && i < e->noutputs) ? e->slots[e->outputs[i]].v->name : NULL;
}

const RTensor *exec_output(const Exec *e, int i)
{
	return (i >= 0 && i < e->noutputs) ? &e->slots[e->outputs[i]].t : NULL;
}

void exec_set_observer(Exec *e, ExecObserver fn, void *ctx)
{
	e->obs = fn;
	e->obs_ctx = ctx;
}

void exec_stats(const Exec *e, ExecStats *st)
{
	memset(st, 0, sizeof *st);
	st->arena_bytes = e->arena_bytes;
	st->scratch_bytes = e->scratch_stride * (size_t)threadpool_threads(e->pool) + e->shared_bytes;
	st->copied_init_bytes = e->copied_init_bytes;
	st->nodes = e->nnodes;
	st->plans = e->plans;
}

/* ---------------------------------------------------------------- bind */

static const char *type_desc(const Type *ty, char *buf, size_t n)
{
	RTensor t = {.dtype = ty->elem};
	rt_describe(&t, buf, n);                 /* "float32[]" */
	size_t k = strlen(buf);
	if (k >= 1)
		k--;                             /* drop the ']' */
	if (!ty->has_shape) {
		snprintf(buf + k, n - k, "?]");
		return buf;
	}
	for (int i = 0; i < ty->rank && k < n; i++) {
		const Dim *dm = &ty->dims[i];
		if (dm->kind == DIM_VALUE)
			k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)dm->value);
		else
			k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? "," : "",
			                      dm->kind == DIM_PARAM && dm->param ? dm->param : "?");
	}
	if (k < n)
		snprintf(buf + k, n - k, "]");
	return buf;
}

int exec_bind(Exec *e, const char *name, const RTensor *t, Diag *d)
{
	int s = -1;
	for (int i = 0; i < e->ninputs; i++)
		if (strcmp(e->slots[e->inputs[i]].v->name, name) == 0)
			s = e->inputs[i];
	if (s < 0)
		return diag_fail(d, "%s: input '%s': the graph has no such input", mpath(e), name);
	Slot *sl = &e->slots[s];
	const Type *ty = &sl->v->type;
	char want[256], got[160];
	rt_describe(t, got, sizeof got);
	if (t->ndim < 0 || t->ndim > RT_MAX_DIMS)
		return diag_fail(d, "%s: input '%s': bad rank %d", mpath(e), name, t->ndim);
	if (elem_size(t->dtype) == 0)
		return diag_fail(d, "%s: input '%s': unsupported element type %s", mpath(e), name, got);
	bool ok = true;
	if (ty->kind == TY_TENSOR) {
		if (ty->elem != DT_UNDEFINED && ty->elem != t->dtype)
			ok = false;
		if (ty->has_shape) {
			if (ty->rank != t->ndim)
				ok = false;
			else
				for (int i = 0; i < t->ndim; i++)
					if (ty->dims[i].kind == DIM_VALUE && ty->dims[i].value != t->dims[i])
						ok = false;
		}
	}
	for (int i = 0; i < t->ndim; i++)
		if (t->dims[i] < 0)
			ok = false;
	if (!ok)
		return diag_fail(d, "%s: input '%s': expected %s, got %s", mpath(e), name, type_desc(ty, want, sizeof want),
		                 got);
	size_t need = dtype_nbytes(t->dtype, rt_numel(t));
	if (t->nbytes < need || (need && !t->data))
		return diag_fail(d, "%s: input '%s' %s: %zu bytes of data, expected %zu", mpath(e), name, got, t->nbytes,
		                 need);
	sl->t = *t;
	sl->t.owned = false;
	sl->bound = true;
	return WL_OK;
}

int exec_bind_value(Exec *e, const Value *v, const RTensor *t, Diag *d)
{
	for (int i = 0; i < e->ninputs; i++)
		if (e->slots[e->inputs[i]].v == v)
			return exec_bind(e, v->name, t, d);
	return WL_OK;
}

/* ---------------------------------------------------------------- planning */

static int check_bound(Exec *e, Diag *d)
{
	for (int i = 0; i < e->ninputs; i++) {
		Slot *sl = &e->slots[e->inputs[i]];
		if (!sl->bound)
			return diag_fail(d, "%s: input '%s' is missing (not bound)", mpath(e), sl->v->name);
	}
	return WL_OK;
}

/* Signature of the bound inputs: dtype and dims of each, and the bytes of
 * those whose values decide shapes. Walks it once: copies it to `out` and/or
 * compares it with `ref` (either may be NULL). Returns its length, or
 * SIZE_MAX at the first byte that differs from ref. */
static size_t sig_walk(const Exec *e, unsigned char *out, const unsigned char *ref)
{
	size_t k = 0;
	for (int i = 0; i < e->ninputs; i++) {
		const Slot *sl = &e->slots[e->inputs[i]];
		int64_t hdr[2 + RT_MAX_DIMS] = {sl->t.dtype, sl->t.ndim};
		for (int j = 0; j < sl->t.ndim; j++)
			hdr[2 + j] = sl->t.dims[j];
		const void *part[2] = {hdr, sl->t.data};
		size_t len[2] = {sizeof(int64_t) * (size_t)(2 + sl->t.ndim), sl->need_data ? sl->t.nbytes : 0};
		for (int p = 0; p < 2; p++) {
			if (!len[p])
				continue;
			if (out)
				memcpy(out + k, part[p], len[p]);
			if (ref && memcmp(ref + k, part[p], len[p]) != 0)
				return SIZE_MAX;
			k += len[p];
		}
	}
	return k;
}

static void *dyn_buf(Slot *sl, size_t bytes)
{
	size_t want = bytes ? bytes : 64;
	if (sl->dyn_cap < want) {
		free(sl->dyn);
		sl->dyn = NULL;
		if (posix_memalign(&sl->dyn, 64, want) != 0)
			wl_die(__FILE__, __LINE__, "out of memory (%zu bytes)", want);
		sl->dyn_cap = want;
	}
	return sl->dyn;
}

static int node_infer(Exec *e, ENode *en, KCall *c, Diag *d)
{
	kcall_init(e, en, c);
	for (int j = 0; j < en->nout; j++)
		if (en->pout[j]) {
			en->pout[j]->dtype = DT_UNDEFINED;
			en->pout[j]->ndim = -1;
		}
	for (int j = 0; j < en->nin && j < 32; j++)
		if ((en->k->data_inputs >> j & 1) && en->pin[j] && en->pin[j]->nbytes && !en->pin[j]->data)
			return diag_fail(d, "%s: node '%s' (%s): input '%s' has no value yet", mpath(e),
			                 en->n->name ? en->n->name : "", en->n->op_type, kin_name(c, j));
	if (en->k->infer(c, d) != WL_OK)
		return WL_ERR;
	for (int j = 0; j < en->nout; j++) {
		RTensor *o = en->pout[j];
		if (!o)
			continue;
		if (o->ndim < 0 || o->dtype == DT_UNDEFINED)
			return diag_fail(d, "%s: node '%s' (%s): output '%s' was not given a shape", mpath(e),
			                 en->n->name ? en->n->name : "", en->n->op_type, kout_name(c, j));
		int64_t n = 1;
		for (int i = 0; i < o->ndim; i++) {
			if (o->dims[i] < 0)
				return diag_fail(d, "%s: node '%s' (%s): output '%s' has a negative dimension", mpath(e),
				                 en->n->name ? en->n->name : "", en->n->op_type, kout_name(c, j));
			if (o->dims[i] && n > INT64_MAX / 16 / o->dims[i])
				return diag_fail(d, "%s: node '%s' (%s): output '%s' is too large", mpath(e),
				                 en->n->name ? en->n->name : "", en->n->op_type, kout_name(c, j));
			n *= o->dims[i];
		}
		o->nbytes = dtype_nbytes(o->dtype, n);
		o->owned = false;
		if (o->nbytes > MAX_TENSOR_BYTES)
			return diag_fail(d, "%s: node '%s' (%s): output '%s' would need %zu bytes (limit %zu)", mpath(e),
			                 en->n->name ? en->n->name : "", en->n->op_type, kout_name(c, j), o->nbytes,
			                 MAX_TENSOR_BYTES);
	}
	if (c->scratch > MAX_TENSOR_BYTES || c->shared > MAX_TENSOR_BYTES)
		return diag_fail(d, "%s: node '%s' (%s): needs %zu bytes of scratch", mpath(e),
		                 en->n->name ? en->n->name : "", en->n->op_type,
		                 c->scratch > c->shared ? c->scratch : c->shared);
	en->scratch = c->scratch;
	en->shared = c->shared;
	return WL_OK;
}

/* Runs a node with temporary buffers (planning pass, fallback). */
static int run_with_dyn(Exec *e, ENode *en, KCall *c, Diag *d)
{
	for (int j = 0; j < en->nout; j++)
		if (en->pout[j])
			en->pout[j]->data = dyn_buf(&e->slots[en->out[j]], en->pout[j]->nbytes);
	size_t stride = (c->scratch + 63) & ~(size_t)63;
	void *sc = NULL, *sh = NULL;
	if (stride && posix_memalign(&sc, 64, stride * (size_t)threadpool_threads(e->pool)) != 0)
		wl_die(__FILE__, __LINE__, "out of memory");
	if (c->shared && posix_memalign(&sh, 64, c->shared) != 0)
		wl_die(__FILE__, __LINE__, "out of memory");
	c->scratch_base = sc;
	c->scratch_stride = stride;
	c->shared_base = sh;
	int rc = en->k->run(c, d);
	free(sc);
	free(sh);
	return rc;
}

int exec_prepare(Exec *e, Diag *d)
{
	if (check_bound(e, d) != WL_OK)
		return WL_ERR;
	free_plan(e);
	/* 1. shape pass */
	for (int i = 0; i < e->nnodes; i++) {
		ENode *en = &e->nodes[i];
		KCall c;
		if (node_infer(e, en, &c, d) != WL_OK)
			return WL_ERR;
		if (en->plan_run) {
			if (run_with_dyn(e, en, &c, d) != WL_OK)
				return WL_ERR;
		} else {
			/* not computed while planning: no stale pointers */
			for (int j = 0; j < en->nout; j++)
				if (en->pout[j])
					en->pout[j]->data = NULL;
		}
	}
	/* 2. arena */
	PlanItem *items = malloc(sizeof *items * (size_t)(e->nslots + 1));
	int *slot = malloc(sizeof *slot * (size_t)(e->nslots + 1));
	if (!items || !slot)
		wl_die(__FILE__, __LINE__, "out of memory");
	int n = 0;
	for (int s = 0; s < e->nslots; s++) {
		Slot *sl = &e->slots[s];
		if (sl->kind != SLOT_NODE)
			continue;
		sl->pdt = sl->t.dtype;
		sl->pndim = sl->t.ndim;
		memcpy(sl->pdims, sl->t.dims, sizeof sl->pdims);
		items[n] = (PlanItem){.bytes = sl->t.nbytes, .first = sl->def, .last = sl->last};
		slot[n++] = s;
	}
	Planner arena;
	plan_init(&arena, 64, PLAN_UNBOUNDED);
	plan_place_all(&arena, items, n, PLAN_LARGEST_FIRST);
	for (int i = 0; i < n; i++)
		e->slots[slot[i]].off = items[i].off;
	size_t total = arena.peak;
	plan_fini(&arena);
	free(items);
	free(slot);
	if (total > MAX_ARENA_BYTES)
		return diag_fail(d, "%s: the activations would need %zu bytes (limit %zu)", mpath(e), total, MAX_ARENA_BYTES);
	/* 3. scratch */
	size_t sc = 0, sh = 0;
	for (int i = 0; i < e->nnodes; i++) {
		if (e->nodes[i].scratch > sc)
			sc = e->nodes[i].scratch;
		if (e->nodes[i].shared > sh)
			sh = e->nodes[i].shared;
	}
	e->scratch_stride = (sc + 63) & ~(size_t)63;
	e->shared_bytes = (sh + 63) & ~(size_t)63;
	if (posix_memalign(&e->arena_mem, 64, total ? total : 64) != 0 ||
	    posix_memalign(&e->scratch_mem, 64, e->scratch_stride ? e->scratch_stride * (size_t)threadpool_threads(e->pool) : 64) != 0 ||
	    posix_memalign(&e->shared_mem, 64, e->shared_bytes ? e->shared_bytes : 64) != 0)
		wl_die(__FILE__, __LINE__, "out of memory (arena %zu bytes)", total);
	e->arena_bytes = total;
	free_dyn(e);
	free(e->sig);
	e->sig_len = sig_walk(e, NULL, NULL);
	e->sig = malloc(e->sig_len ? e->sig_len : 1);
	if (!e->sig)
		wl_die(__FILE__, __LINE__, "out of memory");
	sig_walk(e, e->sig, NULL);
	e->planned = true;
	e->replan = false;
	e->plans++;
	return WL_OK;
}

static bool sig_matches(Exec *e)
{
	if (!e->planned || e->replan)
		return false;
	/* the same length first, so that comparing stays inside e->sig */
	return sig_walk(e, NULL, NULL) == e->sig_len && sig_walk(e, NULL, e->sig) == e->sig_len;
}

int exec_plan(Exec *e, Diag *d)
{
	if (check_bound(e, d) != WL_OK)
		return WL_ERR;
	return sig_matches(e) ? WL_OK : exec_prepare(e, d);
}

/* ---------------------------------------------------------------- run */

int exec_run(Exec *e, Diag *d)
{
	if (check_bound(e, d) != WL_OK)
		return WL_ERR;
	if (!sig_matches(e) && exec_prepare(e, d) != WL_OK)
		return WL_ERR;
	for (int i = 0; i < e->nnodes; i++) {
		ENode *en = &e->nodes[i];
		KCall c;
		if (node_infer(e, en, &c, d) != WL_OK)
			return WL_ERR;
		bool fits = c.scratch <= e->scratch_stride && c.shared <= e->shared_bytes;
		for (int j = 0; j < en->nout; j++) {
			RTensor *o = en->pout[j];
			if (!o)
				continue;
			Slot *sl = &e->slots[en->out[j]];
			if (o->dtype != sl->pdt || o->ndim != sl->pndim ||
			    memcmp(o->dims, sl->pdims, sizeof(int64_t) * (size_t)o->ndim) != 0)
				fits = false;
		}
		int rc;
		if (fits) {
			for (int j = 0; j < en->nout; j++)
				if (en->pout[j])
					en->pout[j]->data = (char *)e->arena_mem + e->slots[en->out[j]].off;
			c.scratch_base = e->scratch_mem;
			c.scratch_stride = e->scratch_stride;
			c.shared_base = e->shared_mem;
			rc = en->k->run(&c, d);
		} else {
			e->replan = true;            /* shapes changed under the plan */
			rc = run_with_dyn(e, en, &c, d);
		}
		if (rc != WL_OK)
			return WL_ERR;
		if (e->obs)
			for (int j = 0; j < en->nout; j++)
				if (en->pout[j])
					e->obs(e->obs_ctx, e->slots[en->out[j]].v, en->pout[j]);
	}
	return WL_OK;
}
