/* kv_cache_int8.c — --kv-cache int8 (--kv-cache-ranges FILE): the static KV
 * cache of a step program kept in int8, a quarter of the float bytes. The
 * runtime stores what the program outputs (runtime/pipelines/llm.c).
 *
 *   g (..., float[B,Hkv,S,hd] past_k, float[B,Hkv,S,hd] past_v, ...)
 *     => (..., float[B,Hkv,T,hd] present_k, float[B,Hkv,T,hd] present_v) {
 *     o, present_k, present_v = ai.wlower.GroupQueryAttention <..., static_cache = 1>
 *                                   (q, k, v, cos, sin, past_k, past_v, mask, pos?)
 *   }
 * →
 *   g (..., int8[B,Hkv,S,hd] past_k, int8[B,Hkv,S,hd] past_v, ...)
 *     => (..., int8[B,Hkv,T,hd] present_k, int8[B,Hkv,T,hd] present_v) {
 *     past_k_f = DequantizeLinear (past_k, s_k, z)
 *     past_v_f = DequantizeLinear (past_v, s_v, z)
 *     o, present_k_f, present_v_f = ai.wlower.GroupQueryAttention <...>
 *                                   (q, k, v, cos, sin, past_k_f, past_v_f, mask, pos?)
 *     present_k = QuantizeLinear (present_k_f, s_k, z)
 *     present_v = QuantizeLinear (present_v_f, s_v, z)
 *   }
 *
 * One symmetric per-tensor scale per cache (per layer, K and V apart):
 * s = max(|min|, |max|) / 127 of the range FILE (the tranges format of
 * docs/FORMATS.md) gives the present output (e.g. present.0.key, the new rows
 * as calibration saw them: --pipeline llm --calibrate writes it), zero point
 * 0 (int8); the past input of the same attention slot uses the same scale,
 * since its rows are the earlier presents. Rows beyond the range saturate at
 * ±127·s. The attention of the run itself reads its own new rows in float;
 * later runs read them from the int8 cache.
 *
 * Matched: every GroupQueryAttention with static_cache = 1 whose past_k and
 * past_v are float graph inputs read by it alone and whose present outputs
 * are float graph outputs read by no node; and every GroupQueryAttention
 * without past inputs (a prefill from decoder_model, which fills the cache
 * without reading it) whose presents are such outputs: only its presents
 * are quantized. Does nothing without
 * ctx->fuse.kv_cache_ranges; with it, a static cache attention that does
 * not match, a present without a range in FILE, or no static cache
 * attention at all is an error naming the model (and FILE, the tensor).
 *
 * requires  static-kv-cache (static_cache = 1)
 * maintains topological order, use lists, graph io names
 * breaks    graph input and output types (past and present become int8)
 */
#include <math.h>
#include <string.h>
#include "passes.h"
#include "match.h"
#include "tranges/tranges.h"

enum { G_PK = 5, G_PV = 6 };

static bool float_input(const Node *n, const Value *v)
{
	return v && v->is_input && !v->init && v->nusers == 1 && v->users[0].node == n && v->type.has_shape &&
	       v->type.rank == 4 && v->type.elem == DT_FLOAT;
}

static bool float_output(const Value *v)
{
	return v && v->is_output && !v->nusers && v->type.has_shape && v->type.rank == 4 && v->type.elem == DT_FLOAT;
}

static Value *scalar(Graph *g, const char *name, int dtype, const void *val)
{
	void *d;
	Value *v = new_initializer(g, name, dtype, 0, NULL, &d);
	memcpy(d, val, dtype == DT_FLOAT ? 4 : 1);
	return v;
}

/* Cache slot i (0: key, 1: value) of the attention n, scale s; with_past:
 * the past input too. */
static void rewrite_slot(Graph *g, Node *n, int i, float s, bool with_past)
{
	Arena *ar = g->mod->arena;
	Value *pres = n->outputs[1 + i];
	int8_t z0 = 0;
	Value *sc = scalar(g, arena_printf(ar, "%s_kv_scale", pres->name), DT_FLOAT, &s);
	Value *zp = scalar(g, arena_printf(ar, "%s_kv_zero_point", pres->name), DT_INT8, &z0);
	if (with_past) {
		Value *past = n->inputs[i ? G_PV : G_PK];
		/* past: int8 input → DequantizeLinear → the attention */
		Value *pf = graph_new_value(g, arena_printf(ar, "%s_dequantized", past->name));
		pf->type = type_copy(ar, &past->type);
		past->type.elem = DT_INT8;
		Node *dq = node_new(g, "DequantizeLinear", "", arena_printf(ar, "%s_DequantizeLinear", past->name));
		node_add_input(dq, past);
		node_add_input(dq, sc);
		node_add_input(dq, zp);
		node_add_output(dq, pf);
		node_insert_before(n, dq);
		node_set_input(n, i ? G_PV : G_PK, pf);
	}
	/* present: the attention's float rows → QuantizeLinear → the int8 output (same name) */
	Value *rf = graph_new_value(g, arena_printf(ar, "%s_float", pres->name));
	rf->type = type_copy(ar, &pres->type);
	n->outputs[1 + i] = rf;
	rf->producer = n;
	rf->producer_slot = 1 + i;
	pres->producer = NULL;
	pres->type.elem = DT_INT8;
	Node *q = node_new(g, "QuantizeLinear", "", arena_printf(ar, "%s_QuantizeLinear", pres->name));
	node_add_input(q, rf);
	node_add_input(q, sc);
	node_add_input(q, zp);
	node_add_output(q, pres);
	node_insert_after(n, q);
}

int pass_kv_cache_int8(Module *mod, PassContext *ctx, Diag *d)
{
	const char *file = ctx->fuse.kv_cache_ranges;
	if (!file)
		return WL_OK;
	const char *model = ctx->model_path ? ctx->model_path : mod->path;
	Graph *g = mod->graph;
	TRanges *tr;
	if (tranges_read(file, &tr, d) != WL_OK)
		return WL_ERR;
	int found = 0, rc = WL_OK;
	FOR_NODES(g, n) {
		if (n->op != OP_WlGroupQueryAttention)
			continue;
		Value *pk = n->ninputs > G_PV ? n->inputs[G_PK] : NULL, *pv = n->ninputs > G_PV ? n->inputs[G_PV] : NULL;
		bool with_past = attr_int(n, "static_cache", 0);
		if (!with_past && (pk || pv))
			continue;         /* a cache that is not static: not this pass's */
		if (n->noutputs < 3 || (with_past && (!float_input(n, pk) || !float_input(n, pv))) ||
		    !float_output(n->outputs[1]) || !float_output(n->outputs[2])) {
			rc = diag_fail(d, "%s: node '%s': --kv-cache int8: the static cache attention's past K/V are not "
			               "float graph inputs read by it alone, or its presents not float graph outputs",
			               model, n->name);
			break;
		}
		float s[2];
		for (int i = 0; i < 2 && rc == WL_OK; i++) {
			const char *nm = n->outputs[1 + i]->name;
			double lo, hi;
			if (!tranges_get(tr, nm, &lo, &hi) || !isfinite(lo) || !isfinite(hi))
				rc = diag_fail(d, "%s: no finite range for '%s' (the --kv-cache int8 scale of node '%s')", file,
				               nm, n->name);
			double m = fmax(fabs(lo), fabs(hi));
			s[i] = m > 0 ? (float)(m / 127) : 1.0f;
		}
		if (rc != WL_OK)
			break;
		rewrite_slot(g, n, 0, s[0], with_past);
		rewrite_slot(g, n, 1, s[1], with_past);
		found++;
		ctx->changed++;
	}
	tranges_free(tr);
	if (rc == WL_OK && !found)
		rc = diag_fail(d, "%s: --kv-cache int8: no GroupQueryAttention reading a static cache (static_cache = 1; "
		               "--static-kv-cache) or filling one (no past)", model);
	return rc;
}
