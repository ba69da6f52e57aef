/* fold_constants.c — evaluates nodes whose inputs are all constant.
 *
 *   s = Shape(x)                 (x: float[1,1500,384], static)
 *   d = Gather<axis=0>(s, one)   →   r = Reshape(y, c)       with the
 *   c = Concat<axis=0>(d, k)          c = {1500, 6, 64}        initializer c
 *   r = Reshape(y, c)
 *
 *   m = ConstantOfShape(shp)  →  w = Where(cond, a, b)  with cond, a, b
 *   cond = Equal(m, neg1)         (every input constant) become initializers
 *   w = Where(cond, a, b)
 *
 * requires  shape-infer (the types of Shape/Size inputs), topological order
 * maintains topological order, use lists, graph inputs and outputs, types
 *           (a folded value keeps its name and gets the exact type of its
 *           contents)
 * breaks    nothing (adds initializers, removes the folded nodes; the
 *           initializers the folded nodes read are left to dce)
 *
 * A node of the main graph is folded when
 *   - it is Shape or Size of a value whose shape is fully static (the
 *     start/end attributes of Shape-15 are honoured), or every present
 *     input is an initializer (not a string) and the node is deterministic
 *     (no Random*, Multinomial, Bernoulli), is no Quantize/DequantizeLinear
 *     (QDQ weights keep their structure) and owns no subgraph;
 *   - none of its outputs is a graph output (their producers stay), and at
 *     least one output is read;
 *   - every output has at most FOLD_MAX_ELEMS (1M) elements (checked from the
 *     declared type when known, and again on the computed result).
 * Evaluation uses the reference executor (runtime/interp/interp.h) on a temporary
 * one-node module whose initializers point at the main module's bytes, so
 * folding means exactly what `wlower run` means. A node without a reference
 * kernel, or whose kernel fails, is left alone (never an error: the graph
 * may still be fine for a target that implements the op).
 * The walk is in topological order, so chains (Shape → Gather → Concat →
 * Reshape target; ConstantOfShape → Mul → Equal → Where → Expand of torch's
 * mask construction) fold in one pass.
 */
#include <string.h>
#include "passes.h"
#include "runtime/interp/interp.h"

#define FOLD_MAX_ELEMS ((int64_t)1 << 20)

static bool nondeterministic(const Node *n)
{
	/* (Quantize|Dequantize)Linear of weights stay: they are the QDQ
	 * structure later passes read, not a computation to fold away. */
	static const char *const bad[] = {"RandomNormal", "RandomUniform", "RandomNormalLike",
	                                  "RandomUniformLike", "Multinomial", "Bernoulli",
	                                  "QuantizeLinear", "DequantizeLinear", NULL};
	for (int i = 0; bad[i]; i++)
		if (!strcmp(n->op_type, bad[i]))
			return true;
	return false;
}

static bool has_subgraph(const Node *n)
{
	for (int i = 0; i < n->nattrs; i++)
		if (n->attrs[i].type == AT_GRAPH || n->attrs[i].type == AT_GRAPHS)
			return true;
	return false;
}

/* Outputs may be replaced: none is a graph output, one is read, sizes fit. */
static bool outputs_ok(const Node *n)
{
	bool used = false;
	for (int i = 0; i < n->noutputs; i++) {
		const Value *v = n->outputs[i];
		if (!v)
			continue;
		if (v->is_output)
			return false;
		if (v->nusers)
			used = true;
		int64_t k = type_numel(&v->type);
		if (k > FOLD_MAX_ELEMS)
			return false;
	}
	return used;
}

static bool inputs_const(const Node *n)
{
	int present = 0;
	for (int i = 0; i < n->ninputs; i++) {
		const Value *v = n->inputs[i];
		if (!v)
			continue;
		if (!v->init || v->init->dtype == DT_STRING || (!v->init->data && tensor_numel(v->init) > 0))
			return false;
		present++;
	}
	return present > 0;
}

/* The folded value v becomes an initializer holding `t`. */
static void make_const(Graph *g, Value *v, Tensor *t)
{
	graph_set_init(g, v, t);
	type_set_tensor(g->mod->arena, &v->type, t->dtype, t->ndim, t->dims);
}

/* Shape / Size of a statically shaped value. */
static bool fold_shape(Node *n)
{
	Graph *g = n->graph;
	const Value *x = n->inputs[0];
	Value *y = n->outputs[0];
	if (!x || !y || !type_shape_known(&x->type))
		return false;
	int r = x->type.rank;
	Tensor *t;
	if (n->op == OP_Size) {
		t = tensor_new(g->mod->arena, y->name, DT_INT64, 0, NULL);
		int64_t k = type_numel(&x->type);
		memcpy(tensor_alloc_data(g->mod->arena, t), &k, sizeof k);
	} else {
		int64_t s = attr_int(n, "start", 0), e = attr_int(n, "end", r);
		if (s < 0)
			s += r;
		if (e < 0)
			e += r;
		s = s < 0 ? 0 : (s > r ? r : s);
		e = e < 0 ? 0 : (e > r ? r : e);
		int64_t len = e > s ? e - s : 0;
		t = tensor_new(g->mod->arena, y->name, DT_INT64, 1, &len);
		int64_t *p = tensor_alloc_data(g->mod->arena, t);
		for (int64_t i = 0; i < len; i++)
			p[i] = x->type.dims[s + i].value;
	}
	node_remove(n);
	make_const(g, y, t);
	return true;
}

/* Runs n alone with the reference executor; on success its outputs become
 * initializers and n goes. */
static bool fold_exec(Module *m, Node *n)
{
	Module *tm = module_new(m->path);
	tm->ir_version = m->ir_version;
	for (int i = 0; i < m->nopsets; i++)
		module_set_opset(tm, m->opsets[i].domain, m->opsets[i].version);
	Graph *tg = graph_new(tm, NULL, NULL, "fold");
	tm->graph = tg;
	Node *c = node_new(tg, n->op_type, n->domain, n->name);
	for (int i = 0; i < n->nattrs; i++) {
		Attr *a = node_add_attr(c, n->attrs[i].name, n->attrs[i].type);
		*a = n->attrs[i];
	}
	for (int i = 0; i < n->ninputs; i++) {
		Value *v = n->inputs[i];
		Value *tv = NULL;
		if (v) {
			tv = graph_find_local(tg, v->name);
			if (!tv) {
				tv = graph_value(tg, v->name);
				Tensor *t = tensor_clone_meta(tm->arena, v->init);
				t->data = v->init->data;
				t->nbytes = v->init->nbytes;
				graph_set_init(tg, tv, t);
			}
		}
		node_add_input(c, tv);
	}
	for (int i = 0; i < n->noutputs; i++) {
		Value *tv = n->outputs[i] ? graph_value(tg, n->outputs[i]->name) : NULL;
		node_add_output(c, tv);
		if (tv)
			graph_add_output(tg, tv);
	}
	node_append(tg, c);

	bool ok = false;
	Diag d = {0};
	Exec *e = NULL;
	if (exec_new(tm, 1, &e, &d) == WL_OK && exec_run(e, &d) == WL_OK) {
		int no = exec_output_count(e);
		ok = true;
		for (int i = 0; i < no && ok; i++) {
			const RTensor *r = exec_output(e, i);
			if (!r || rt_numel(r) > FOLD_MAX_ELEMS || r->dtype == DT_STRING || !dtype_valid(r->dtype))
				ok = false;
		}
		if (ok) {
			Graph *g = n->graph;
			Tensor **ts = arena_alloc(tm->arena, (size_t)(no ? no : 1) * sizeof *ts);
			for (int i = 0; i < no; i++) {
				const RTensor *r = exec_output(e, i);
				ts[i] = tensor_new(m->arena, exec_output_name(e, i), r->dtype, r->ndim, r->dims);
				void *p = tensor_alloc_data(m->arena, ts[i]);
				if (r->nbytes)
					memcpy(p, r->data, ts[i]->nbytes < r->nbytes ? ts[i]->nbytes : r->nbytes);
			}
			Value **outs = arena_alloc(tm->arena, (size_t)(n->noutputs ? n->noutputs : 1) * sizeof *outs);
			for (int i = 0; i < n->noutputs; i++)
				outs[i] = n->outputs[i];
			node_remove(n);
			for (int i = 0; i < no; i++)
				for (int k = 0; k < n->noutputs; k++)
					if (outs[k] && !strcmp(outs[k]->name, exec_output_name(e, i)))
						make_const(g, outs[k], ts[i]);
		}
	}
	exec_free(e);
	module_free(tm);
	return ok;
}

int pass_fold_constants(Module *m, PassContext *ctx, Diag *d)
{
	(void)d;
	int changed = 0;
	Graph *g = m->graph;
	FOR_NODES_SAFE(g, n, nx) {
		if (!domain_is_default(n->domain) || has_subgraph(n) || nondeterministic(n) || !outputs_ok(n))
			continue;
		if ((n->op == OP_Shape || n->op == OP_Size) && n->ninputs >= 1 && n->noutputs == 1) {
			if (fold_shape(n))
				changed++;
			continue;
		}
		if (n->op == OP_Constant || !inputs_const(n))
			continue;
		if (fold_exec(m, n))
			changed++;
	}
	if (ctx)
		ctx->changed += changed;
	return WL_OK;
}
