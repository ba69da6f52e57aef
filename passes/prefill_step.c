/* prefill_step.c — --from-prefill step|prefill|cross-kv: the programs of the KV-cached
 * Whisper pipeline from the vendor's static-T decoder prefill
 * (decoder_prefill.onnx: input_ids [1,T] and encoder_hidden_states [1,C,D]
 * → logits [1,T,V]; no cache, no presents), once attention is fused.
 *
 * Matched (after fuse-whisper-attention; kv-step-position has made the
 * positional rows a Gather at the input position_ids [T]; L layers):
 *
 *   g (int64[1,T] input_ids, float[1,C,D] encoder_hidden_states, int64[T] position_ids)
 *     => (float[1,T,V] logits) {
 *     x  = Add (Gather (E, input_ids), Gather <axis = 0> (Wpos, position_ids))
 *     ...                                      # per layer i, in graph order:
 *     o  = ai.wlower.WhisperAttention <q_len = T, kv_len = T, causal = 1, kv_layout = "bsd">
 *            (q, k, v)                         # self-attention: k, v from the tokens
 *     oc = ai.wlower.WhisperAttention <q_len = T, kv_len = C, causal = 0, kv_layout = "bsd">
 *            (qc, kc, vc)                      # cross: kc, vc from encoder_hidden_states only
 *     ...
 *   }
 *
 * --from-prefill step (S = --max-seq, Wpos has >= S rows) → the one-token
 * step, the graph decoder_with_past_model.onnx fuses into (so kv-step-mask
 * and static-kv-cache then give the same step contract, runtime unchanged):
 *
 *   g (int64[1,1] input_ids, int64[1] position_ids,
 *      float[1,H,S-1,hd] past_key_values.i.decoder.{key,value},
 *      float[1,H,C,hd] past_key_values.i.encoder.{key,value})
 *     => (float[1,1,V] logits, float[1,H,S,hd] present.i.decoder.{key,value}) {
 *     o, present.i.decoder.key, present.i.decoder.value = ai.wlower.WhisperAttention
 *         <q_len = 1, kv_len = S, causal = 0, kv_layout = "bsd"> (q, k, v, past...key, past...value)
 *     oc = ai.wlower.WhisperAttention <q_len = 1, kv_len = C, causal = 0, kv_layout = "bhsd">
 *         (qc, past_key_values.i.encoder.key, past_key_values.i.encoder.value)
 *   }
 *
 * Every value computed from input_ids or position_ids is typed again at T =
 * 1 (shape inference node by node; fused attention typed here); a Reshape
 * left on that path with a constant target [1, T, ...] gets [1, 1, ...];
 * the cross K/V projections and encoder_hidden_states go.
 *
 * --from-prefill prefill → the same T rows with the cache outputs: the
 * self-attention presents [1,H,T,hd] (present.i.decoder.*) as graph outputs
 * (WhisperAttention's present outputs, no past), cross K/V read from the
 * inputs past_key_values.i.encoder.* as in the step; positions as they are.
 *
 * --from-prefill cross-kv → the cross-attention K/V of every layer, split
 * out (what Optimum's decoder_model.onnx gives as present.i.encoder.*):
 *
 *   g (int64[1,1] input_ids, float[1,C,D] encoder_hidden_states)
 *     => (float[1,H,C,hd] present.i.encoder.{key,value}) {
 *     present.i.encoder.key = Transpose <perm = [0,2,1,3]> (Reshape (kc, [1,C,H,hd]))
 *   }
 *
 * input_ids stays (unread) because the runtime binds it, as for Optimum's
 * cross_kv; everything else goes (dce).
 *
 * Near misses are errors naming the file, node and tensor (the option asks
 * for a derivation that this graph does not allow): a self-attention that
 * is not causal, one whose q_len is not input_ids' T, a cache already there
 * (past inputs), cross K/V that depend on the tokens, a different number of
 * self- and cross-attentions, positional rows that are a folded constant
 * (a static export keeps rows 0..T-1 only) or a table with fewer than S rows.
 *
 * requires  fuse-whisper-attention, kv-step-position (step), shape-infer
 * maintains topological order, use lists
 * breaks    graph inputs and outputs, types downstream of input_ids
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "passes.h"
#include "match.h"

enum { MAXL = 64 };

typedef struct PrefillMatch {
	Value *ids, *pos, *enc, *table;
	Node *self[MAXL], *cross[MAXL];
	int nl;
	int64_t T, C, D, H, hd;
} PrefillMatch;

static Value *graph_input(Graph *g, const char *name)
{
	for (int i = 0; i < g->ninputs; i++)
		if (strcmp(g->inputs[i]->name, name) == 0)
			return g->inputs[i];
	return NULL;
}

/* taint[v->id]: v is computed from `from` (forward over the topological order). */
static bool *taint_from(Module *m, Value *const *from, int nfrom)
{
	bool *t = calloc((size_t)m->next_value_id + 1, 1);
	if (!t)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i < nfrom; i++)
		if (from[i])
			t[from[i]->id] = true;
	for (Node *n = m->graph->first; n; n = n->next) {
		bool any = false;
		for (int i = 0; i < n->ninputs && !any; i++)
			any = n->inputs[i] && t[n->inputs[i]->id];
		for (int i = 0; any && i < n->noutputs; i++)
			if (n->outputs[i])
				t[n->outputs[i]->id] = true;
	}
	return t;
}

__attribute__((format(printf, 4, 5)))
static int fail_at(Diag *d, const PassContext *ctx, const Node *n, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return diag_fail(d, "%s: node '%s': --from-prefill: %s", ctx->model_path ? ctx->model_path : "<model>",
	                 n && n->name ? n->name : "?", msg);
}

/* The folded positional rows: Add (Gather (E, input_ids), c) with c a constant [T, D]. */
static Node *folded_positions(Module *m, const Value *ids)
{
	for (Node *n = m->graph->first; n; n = n->next) {
		if (n->op != OP_Add || n->ninputs != 2)
			continue;
		for (int i = 0; i < 2; i++) {
			Node *g = producer(n->inputs[i], OP_Gather);
			if (g && g->ninputs == 2 && g->inputs[1] == ids && n->inputs[1 - i]->init)
				return n;
		}
	}
	return NULL;
}

static int match_prefill(Module *m, PassContext *ctx, bool step, PrefillMatch *c, Diag *d)
{
	memset(c, 0, sizeof *c);
	Graph *g = m->graph;
	const char *file = ctx->model_path ? ctx->model_path : "<model>";
	int64_t dims[MATCH_MAXR];
	c->ids = graph_input(g, "input_ids");
	c->enc = graph_input(g, "encoder_hidden_states");
	if (!c->ids || c->ids->type.elem != DT_INT64 || static_shape(c->ids, dims) != 2 || dims[0] != 1)
		return diag_fail(d, "%s: --from-prefill: no graph input input_ids int64[1, T]", file);
	c->T = dims[1];
	if (!c->enc || static_shape(c->enc, dims) != 3 || dims[0] != 1)
		return diag_fail(d, "%s: --from-prefill: no graph input encoder_hidden_states float[1, C, D]", file);
	c->C = dims[1];
	c->D = dims[2];
	c->pos = graph_input(g, "position_ids");
	Value *from[2] = {c->ids, c->pos};
	bool *tok = taint_from(m, from, 2);
	int ns = 0, nc = 0, rc = WL_OK;
	for (Node *n = g->first; n && rc == WL_OK; n = n->next) {
		if (n->op != OP_WlWhisperAttention)
			continue;
		bool kv_tok = n->ninputs >= 3 && n->inputs[1] && n->inputs[2] && (tok[n->inputs[1]->id] || tok[n->inputs[2]->id]);
		int64_t ql = attr_int(n, "q_len", 0), kl = attr_int(n, "kv_len", 0);
		if (n->ninputs != 3 || n->noutputs != 1 || strcmp(attr_string(n, "kv_layout", "bsd"), "bsd") != 0)
			rc = fail_at(d, ctx, n, "attention with %d inputs, %d outputs, kv_layout \"%s\": a past, presents or "
			             "head-split K/V, not a prefill without cache", n->ninputs, n->noutputs,
			             attr_string(n, "kv_layout", "bsd"));
		else if (ql != c->T)
			rc = fail_at(d, ctx, n, "attention: q_len %lld but input_ids has %lld tokens", (long long)ql, (long long)c->T);
		else if (kv_tok && !attr_int(n, "causal", 0))
			rc = fail_at(d, ctx, n, "self-attention over the %lld tokens is not causal (kv_len %lld): not a decoder "
			             "prefill", (long long)c->T, (long long)kl);
		else if (kv_tok && kl != c->T)
			rc = fail_at(d, ctx, n, "self-attention: kv_len %lld, want input_ids' %lld tokens", (long long)kl,
			             (long long)c->T);
		else if (!kv_tok && kl != c->C)
			rc = fail_at(d, ctx, n, "cross-attention: kv_len %lld, encoder_hidden_states has %lld rows", (long long)kl,
			             (long long)c->C);
		else if (ns >= MAXL || nc >= MAXL)
			rc = fail_at(d, ctx, n, "attention: more than %d layers", MAXL);
		else if (kv_tok)
			c->self[ns++] = n;
		else
			c->cross[nc++] = n;
	}
	free(tok);
	if (rc != WL_OK)
		return rc;
	if (ns == 0 || ns != nc)
		return diag_fail(d, "%s: --from-prefill: %d causal self-attentions and %d cross-attentions (fused "
		                 "ai.wlower.WhisperAttention), want one of each per decoder layer", file, ns, nc);
	c->nl = ns;
	c->H = attr_int(c->self[0], "heads", 0);
	c->hd = c->H ? c->D / c->H : 0;
	if (c->H <= 0 || c->H * c->hd != c->D)
		return fail_at(d, ctx, c->self[0], "attention: heads %lld do not divide D = %lld", (long long)c->H,
		               (long long)c->D);
	if (!step)
		return WL_OK;
	if (c->pos && (static_shape(c->pos, dims) != 1 || dims[0] != c->T))
		return diag_fail(d, "%s: --from-prefill step: position_ids is not int64[%lld] (input_ids' tokens)", file,
		                 (long long)c->T);
	if (!c->pos) {
		Node *f = folded_positions(m, c->ids);
		if (f)
			return diag_fail(d, "%s: node '%s': --from-prefill step: the positional rows are a constant "
			                 "(rows 0..%lld of the table, folded at export); the step needs the whole "
			                 "table: export decoder_prefill.onnx with it kept (dynamic sequence axis fixed "
			                 "to %lld, e.g. examples/models/whisper.py --dynamic)", file, f->name ? f->name : "?",
			                 (long long)c->T - 1, (long long)c->T);
		return diag_fail(d, "%s: --from-prefill step: no positional table slice became input position_ids "
		                 "(kv-step-position: Slice (table, 0, T) of a [N, D] initializer)", file);
	}
	int64_t S = ctx->canon.max_seq;
	if (S <= c->T)
		return diag_fail(d, "%s: --from-prefill step: --max-seq %lld, want more than the %lld prefill tokens", file,
		                 (long long)S, (long long)c->T);
	for (int i = 0; i < c->pos->nusers; i++) {
		Node *u = c->pos->users[i].node;
		if (u->op == OP_Gather && u->ninputs == 2 && u->inputs[1] == c->pos && static_shape(u->inputs[0], dims) == 2)
			c->table = u->inputs[0];
	}
	if (!c->table)
		return diag_fail(d, "%s: --from-prefill step: position_ids feeds no Gather of a [N, D] table", file);
	static_shape(c->table, dims);
	if (dims[0] < S)
		return diag_fail(d, "%s: --from-prefill step: the positional table '%s' has %lld rows, --max-seq is %lld",
		                 file, c->table->name, (long long)dims[0], (long long)S);
	return WL_OK;
}

/* ---------------------------------------------------------------- rewrite */

/* A new value named exactly `name` (the runtime binds by name): a value
 * that has it already (say, a dead present of an Optimum decoder_model)
 * is renamed name_prefill[_N] first. */
static Value *named_value(Module *m, const char *name)
{
	Graph *g = m->graph;
	Value *old = graph_find_local(g, name);
	for (int k = 0; old; k++) {
		char alt[160];
		snprintf(alt, sizeof alt, k ? "%s_prefill_%d" : "%s_prefill", name, k);
		if (value_rename(old, alt))
			break;
	}
	return graph_new_value(g, name);
}

static Value *new_input(Module *m, const char *name, int elem, int rank, const int64_t *dims)
{
	Value *v = named_value(m, name);
	type_set_tensor(m->arena, &v->type, elem, rank, dims);
	graph_add_input(m->graph, v);
	return v;
}

static Value *new_output(Module *m, const char *name, const int64_t *dims)
{
	Value *v = named_value(m, name);
	type_set_tensor(m->arena, &v->type, DT_FLOAT, 4, dims);
	return v;
}

static void drop_input(Graph *g, const Value *v)
{
	for (int i = 0; i < g->ninputs; i++)
		if (g->inputs[i] == v) {
			graph_remove_input(g, i);
			return;
		}
}

static void drop_outputs(Graph *g)
{
	while (g->noutputs)
		graph_remove_output(g, g->noutputs - 1);
}

static void set_q1(Node *n, int64_t kv_len)
{
	node_add_attr(n, "q_len", AT_INT)->i = 1;
	node_add_attr(n, "kv_len", AT_INT)->i = kv_len;
	node_add_attr(n, "causal", AT_INT)->i = 0;
}

/* Self-attention presents as graph outputs (step: after past inputs of S-1
 * rows; prefill: the T rows), cross-attention K/V from the inputs that
 * cross_kv's outputs feed. */
static void attach_cache(Module *m, PrefillMatch *c, bool step, int64_t S)
{
	Graph *g = m->graph;
	int64_t past[4] = {1, c->H, S - 1, c->hd}, pres[4] = {1, c->H, step ? S : c->T, c->hd};
	int64_t xkv[4] = {1, c->H, c->C, c->hd};
	for (int i = 0; i < c->nl; i++) {
		char nm[96];
		Node *n = c->self[i];
		for (int kv = 0; step && kv < 2; kv++) {
			snprintf(nm, sizeof nm, "past_key_values.%d.decoder.%s", i, kv ? "value" : "key");
			node_add_input(n, new_input(m, nm, DT_FLOAT, 4, past));
		}
		for (int kv = 0; kv < 2; kv++) {
			snprintf(nm, sizeof nm, "present.%d.decoder.%s", i, kv ? "value" : "key");
			Value *p = new_output(m, nm, pres);
			node_add_output(n, p);
			graph_add_output(g, p);
		}
		if (step)
			set_q1(n, S);
		Node *x = c->cross[i];
		for (int kv = 0; kv < 2; kv++) {
			snprintf(nm, sizeof nm, "past_key_values.%d.encoder.%s", i, kv ? "value" : "key");
			node_set_input(x, 1 + kv, new_input(m, nm, DT_FLOAT, 4, xkv));
		}
		if (step)
			set_q1(x, c->C);
		set_string_attr(m, x, "kv_layout", "bhsd");
	}
}

/* dce, then encoder_hidden_states goes if nothing reads it */
static int drop_encoder_states(Module *m, PassContext *ctx, PrefillMatch *c, Diag *d)
{
	PassContext local = *ctx;
	int rc = pass_dce(m, &local, d);
	if (rc == WL_OK && c->enc->nusers == 0)
		drop_input(m->graph, c->enc);
	return rc;
}

/* A Reshape left on the token path whose constant target has T at axis 1
 * where its output had [1, T, ...]: a new target with 1 there. */
static void retarget_reshape(Module *m, Node *n, int64_t T)
{
	int64_t od[MATCH_MAXR];
	Value *s = n->ninputs >= 2 ? n->inputs[1] : NULL;
	if (n->op != OP_Reshape || !s || !s->init || s->init->dtype != DT_INT64 || s->init->ndim != 1 ||
	    tensor_numel(s->init) < 2 || tensor_get_i64(s->init, 1) != T || static_shape(n->outputs[0], od) < 2 ||
	    od[0] != 1 || od[1] != T)
		return;
	int64_t k = tensor_numel(s->init);
	void *d;
	Value *v = new_initializer(m->graph, "step_shape", DT_INT64, 1, &k, &d);
	int64_t *p = d;
	for (int64_t i = 0; i < k; i++)
		p[i] = i == 1 ? 1 : tensor_get_i64(s->init, i);
	node_set_input(n, 1, v);
}

static int rewrite_prefill(Module *m, PassContext *ctx, PrefillMatch *c, Diag *d)
{
	attach_cache(m, c, false, 0);
	return drop_encoder_states(m, ctx, c, d);
}

static int rewrite_step(Module *m, PassContext *ctx, PrefillMatch *c, Diag *d)
{
	Graph *g = m->graph;
	int64_t S = ctx->canon.max_seq, one[2] = {1, 1}, pres[4] = {1, c->H, S, c->hd};
	type_set_tensor(m->arena, &c->ids->type, DT_INT64, 2, one);
	type_set_tensor(m->arena, &c->pos->type, DT_INT64, 1, one);
	attach_cache(m, c, true, S);
	Value *from[2] = {c->ids, c->pos};
	bool *tok = taint_from(m, from, 2);     /* after attach_cache: its new values have ids too */
	/* type again what the tokens compute, at T = 1 */
	int rc = WL_OK;
	for (Node *n = g->first; n && rc == WL_OK; n = n->next) {
		bool any = false;
		for (int i = 0; i < n->noutputs; i++)
			any = any || (n->outputs[i] && tok[n->outputs[i]->id]);
		if (!any)
			continue;
		if (n->op == OP_WlWhisperAttention) {
			int64_t o[3] = {1, 1, c->D};
			type_set_tensor(m->arena, &n->outputs[0]->type, DT_FLOAT, 3, o);
			for (int k = 1; k < n->noutputs; k++)
				if (n->outputs[k])
					type_set_tensor(m->arena, &n->outputs[k]->type, DT_FLOAT, 4, pres);
			continue;
		}
		retarget_reshape(m, n, c->T);
		for (int i = 0; i < n->noutputs; i++)
			if (n->outputs[i])
				memset(&n->outputs[i]->type, 0, sizeof n->outputs[i]->type);
		rc = shape_infer_node(n, d);
		for (int i = 0; rc == WL_OK && i < n->noutputs; i++)
			if (n->outputs[i] && (n->outputs[i]->nusers || n->outputs[i]->is_output) &&
			    !type_shape_known(&n->outputs[i]->type))
				rc = diag_fail(d, "%s: node '%s': --from-prefill step: output '%s' has no static shape at one "
				               "token", ctx->model_path ? ctx->model_path : "<model>", n->name ? n->name : "?",
				               n->outputs[i]->name);
	}
	free(tok);
	/* the cross K/V projections and the encoder states go */
	return rc == WL_OK ? drop_encoder_states(m, ctx, c, d) : rc;
}

static int rewrite_cross_kv(Module *m, PassContext *ctx, PrefillMatch *c, Diag *d)
{
	Graph *g = m->graph;
	int64_t one[2] = {1, 1}, shp[4] = {1, c->C, c->H, c->hd}, xkv[4] = {1, c->H, c->C, c->hd}, four = 4;
	Value *outs[2 * MAXL];
	for (int i = 0; i < c->nl; i++) {
		Node *x = c->cross[i];
		for (int kv = 0; kv < 2; kv++) {
			char nm[96];
			Value *src = x->inputs[1 + kv];
			void *p;
			Value *tv = new_initializer(g, "cross_kv_shape", DT_INT64, 1, &four, &p);
			memcpy(p, shp, sizeof shp);
			snprintf(nm, sizeof nm, "%s/cross_kv_%s_reshape", x->name ? x->name : "", kv ? "value" : "key");
			Node *r = node_new(g, "Reshape", NULL, nm);
			node_insert_before(x, r);
			node_add_input(r, src);
			node_add_input(r, tv);
			Value *rv = graph_new_value(g, "cross_kv_heads");
			type_set_tensor(m->arena, &rv->type, DT_FLOAT, 4, shp);
			node_add_output(r, rv);
			snprintf(nm, sizeof nm, "%s/cross_kv_%s_transpose", x->name ? x->name : "", kv ? "value" : "key");
			Node *tr = node_new(g, "Transpose", NULL, nm);
			node_insert_before(x, tr);
			const int64_t perm[4] = {0, 2, 1, 3};
			Attr *a = node_add_attr(tr, "perm", AT_INTS);
			a->ints = arena_alloc(m->arena, sizeof perm);
			memcpy(a->ints, perm, sizeof perm);
			a->n = 4;
			node_add_input(tr, rv);
			snprintf(nm, sizeof nm, "present.%d.encoder.%s", i, kv ? "value" : "key");
			Value *o = new_output(m, nm, xkv);
			node_add_output(tr, o);
			outs[2 * i + kv] = o;
		}
	}
	drop_outputs(g);
	for (int i = 0; i < 2 * c->nl; i++)
		graph_add_output(g, outs[i]);
	PassContext local = *ctx;
	int rc = pass_dce(m, &local, d);
	if (rc == WL_OK && c->pos && c->pos->nusers == 0)
		drop_input(g, c->pos);
	type_set_tensor(m->arena, &c->ids->type, DT_INT64, 2, one);
	return rc;
}

int pass_prefill_step(Module *m, PassContext *ctx, Diag *d)
{
	if (!ctx || !ctx->canon.from_prefill)
		return WL_OK;
	const char *mode = ctx->canon.from_prefill;
	bool step = strcmp(mode, "step") == 0, pre = strcmp(mode, "prefill") == 0;
	if (!step && !pre && strcmp(mode, "cross-kv") != 0)
		return diag_fail(d, "--from-prefill: '%s' is not step, prefill or cross-kv", mode);
	PrefillMatch c;
	if (match_prefill(m, ctx, step, &c, d) != WL_OK)
		return WL_ERR;
	int rc = step ? rewrite_step(m, ctx, &c, d) : pre ? rewrite_prefill(m, ctx, &c, d) : rewrite_cross_kv(m, ctx, &c, d);
	return rc == WL_OK ? fusion_done(m, ctx, 2 * c.nl) : rc;
}
