/* unit_util.h — what the pass tests share: parse the textual syntax, run a
 * pipeline and verify the result, count the nodes of an op. */
#ifndef WLOWER_UNIT_UTIL_H
#define WLOWER_UNIT_UTIL_H
#include <check.h>
#include <string.h>
#include "passes/passes.h"

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

#endif
