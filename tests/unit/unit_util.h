/* unit_util.h — what the pass tests share: parse the textual syntax, run a
 * pipeline and verify the result, count the nodes of an op, random numbers,
 * seeded inputs for a graph. */
#ifndef WLOWER_UNIT_UTIL_H
#define WLOWER_UNIT_UTIL_H
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "passes/passes.h"
#include "runtime/interp/interp.h"

static inline Module *parse_text(const char *src)
{
	Module *m = NULL;
	Diag d = {0};
	ck_assert_msg(text_parse(src, strlen(src), "t.onnxtxt", &m, &d) == WL_OK, "parse: %s", d.msg);
	return m;
}

/* Runs o's passes with verify_each on, then verifies the module. */
static inline void run_pipeline(Module *m, PipelineOptions o)
{
	o.verify_each = true;
	Diag d = {0};
	ck_assert_msg(pipeline_run(m, &o, &d) == WL_OK, "%s: %s", o.passes, d.msg);
	ck_assert_msg(ir_verify(m, &d) == WL_OK, "verify: %s", d.msg);
}

/* Nodes of the main graph with this domain ("" for ONNX) and op. */
static inline int count_op(Module *m, const char *domain, const char *op)
{
	int k = 0;
	FOR_NODES(m->graph, n)
		if (!strcmp(n->op_type, op) && !strcmp(n->domain ? n->domain : "", domain))
			k++;
	return k;
}

/* xorshift64, the same sequence in every test process: uniform in [-1, 1). */
static inline double urand(void)
{
	static uint64_t rng = 88172645463325252ull;
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}

enum { MAXIO = 8 };
typedef struct Inputs { RTensor t[MAXIO]; const char *name[MAXIO]; int n; } Inputs;

/* Seeded inputs for the graph inputs of m (the same for the same seed):
 * floats uniform in [-scale, scale). With mask_ints, integer inputs
 * (attention_mask) are 1 everywhere but element 1, which is 0 (a padded
 * key); without, every input must be float32. */
static inline void make_inputs(Module *m, Inputs *in, unsigned seed, float scale, bool mask_ints)
{
	srand(seed);
	in->n = 0;
	Graph *g = m->graph;
	for (int i = 0; i < g->ninputs; i++) {
		Value *v = g->inputs[i];
		if (v->init)
			continue;
		ck_assert_int_lt(in->n, MAXIO);
		ck_assert(mask_ints || v->type.elem == DT_FLOAT);
		ck_assert(type_shape_known(&v->type));
		int64_t dims[RT_MAX_DIMS];
		for (int k = 0; k < v->type.rank; k++)
			dims[k] = v->type.dims[k].value;
		RTensor *t = &in->t[in->n];
		memset(t, 0, sizeof *t);
		rt_alloc(t, v->type.elem, v->type.rank, dims);
		for (int64_t k = 0; k < rt_numel(t); k++) {
			if (v->type.elem == DT_FLOAT)
				((float *)t->data)[k] = 2.0f * scale * ((float)rand() / (float)RAND_MAX) - scale;
			else
				((int64_t *)t->data)[k] = k == 1 ? 0 : 1;
		}
		in->name[in->n++] = v->name;
	}
}

static inline void free_inputs(Inputs *in)
{
	for (int i = 0; i < in->n; i++)
		rt_free(&in->t[i]);
}

/* An executor of m (threads) with in bound, run once; exec_free it. */
static inline Exec *run_inputs(Module *m, Inputs *in, int threads)
{
	Exec *e = NULL;
	Diag d = {0};
	ck_assert_msg(exec_new(m, threads, &e, &d) == WL_OK, "exec_new: %s", d.msg);
	for (int i = 0; i < in->n; i++)
		ck_assert_msg(exec_bind(e, in->name[i], &in->t[i], &d) == WL_OK, "bind: %s", d.msg);
	ck_assert_msg(exec_run(e, &d) == WL_OK, "run: %s", d.msg);
	return e;
}

/* *out becomes an owned copy of r. */
static inline void copy_tensor(RTensor *out, const RTensor *r)
{
	memset(out, 0, sizeof *out);
	rt_alloc(out, r->dtype, r->ndim, r->dims);
	memcpy(out->data, r->data, r->nbytes);
}

#endif
