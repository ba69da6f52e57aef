/* whisper_lmq8.c — `--pipeline whisper --precision fp32dec-lmq8`: the
 * precision of ../shared/reference/whisper-base-webgpu-export.json (§3 of
 * its README): encoder and decoder linears float; the LM head with int8
 * per-output-channel symmetric weights and an int8 per-tensor affine static
 * input activation, calibrated on the LM head's inputs from the --calibrate
 * clips; the token embedding table int8 row-wise (int8 rows + one float
 * scale per row).
 *
 * Calibration (lmq8_observe, called by whisper_calibrate): the float ref
 * pipeline transcribes every clip (greedy, timestamps, as for the qc-*
 * ranges); the LM head's input (input 0 of the producer of the step's
 * `logits`) is observed at every step run: its min/max over all of them,
 * and the number of vectors (one row per step run: prompt and sampled
 * tokens). Scale and zero point as quantize_static (and `wlower quantize
 * --int8 --asymmetric-activations`) compute them from min/max:
 * s = (max(hi,0) − min(lo,0)) / 255, z = clamp(rint(−128 − min(lo,0)/s)).
 * (The reference used a histogram observer; min/max keeps every observed
 * vector in range.)
 *
 * Rewrite of decoder_with_past_model.onnx before it is compiled (the
 * step program), in ONNX terms:
 *
 *   logits = MatMul (h, W)                     W a float initializer [d, V]
 * →
 *   hq = QuantizeLinear (h, sx, zx)            sx float, zx int8 scalars
 *   hd = DequantizeLinear (hq, sx, zx)
 *   wd = DequantizeLinear <axis = 1> (Wq, sw, 0)   Wq int8 [d, V], sw [V]:
 *                                              sw[n] = max_k |W[k,n]| / 127
 *                                              (1 for a zero column),
 *                                              Wq = clamp(rint(W / sw))
 *   logits = MatMul (hd, wd)
 * which fuse-qdq-matmul turns into ai.wlower.QMatMul (hq, sx, zx, Wq, sw):
 * int8 × int8 with int32 accumulation on every target; and
 *
 *   e = Gather (E, input_ids)                  E a float initializer [V, d]
 * →
 *   e = ai.wlower.QGather (Eq, se, input_ids)  Eq int8 [V, d], se [V]:
 *                                              se[r] = max_j |E[r,j]| / 127
 *                                              (1 for a zero row)
 * (QGather: docs/OPS.md; the unfused form is Gather(Eq) → Cast → Mul by
 * Gather(se)). Positions (embed_positions) stay float.
 *
 * Errors (one line naming the model, node and tensor): no `logits` output,
 * an LM head that is not a MatMul of a constant float [d, vocab] weight, no
 * (or more than one) Gather of a constant float [vocab, d] table, a
 * non-finite weight.
 */
#include <math.h>
#include <string.h>
#include "compiler/driver/commands.h"
#include "runtime/pipelines/pipeline.h"
#include "tranges/calibrate.h"

/* the graph output `logits` and its producer's activation input */
static Value *lm_head_input(const Graph *g, Node **prod)
{
	for (int i = 0; i < g->noutputs; i++) {
		Value *v = g->outputs[i];
		if (v && v->name && strcmp(v->name, "logits") == 0) {
			*prod = v->producer;
			return v->producer && v->producer->ninputs > 0 ? v->producer->inputs[0] : NULL;
		}
	}
	*prod = NULL;
	return NULL;
}

int lmq8_observe(const PipelineArgs *pa, const Module *step, Calib *cal, int64_t runs, Diag *d)
{
	Node *head;
	Value *x = lm_head_input(step->graph, &head);
	if (!x)
		return diag_fail(d, "--precision fp32dec-lmq8: the step program has no LM head (no node producing 'logits')");
	CalibReport cr;
	TRanges *tr = calib_collect(cal, (Module *)step, "step", runs, 100, &cr);
	double lo, hi;
	bool ok = tranges_get(tr, x->name, &lo, &hi);
	tranges_free(tr);
	if (!ok || !isfinite(lo) || !isfinite(hi))
		return diag_fail(d, "--calibrate: node '%s': tensor '%s' (the LM head's input) was not observed with finite "
		                 "values", head->name, x->name);
	pa->lmq8->lo = lo;
	pa->lmq8->hi = hi;
	pa->lmq8->vectors = runs;
	pa->lmq8->done = true;
	return WL_OK;
}

static inline float ldf(const Tensor *t, int64_t i)
{
	float v;
	memcpy(&v, (const char *)t->data + 4 * i, 4);
	return v;
}

static int finite_weights(const Tensor *t, const char *model, const Node *n, const Value *w, Diag *d)
{
	int64_t ne = tensor_numel(t);
	for (int64_t i = 0; i < ne; i++)
		if (!isfinite(ldf(t, i)))
			return diag_fail(d, "%s: node '%s': tensor '%s': non-finite value at [%lld, %lld]; cannot quantize", model,
			                 n->name, w->name, (long long)(i / t->dims[1]), (long long)(i % t->dims[1]));
	return WL_OK;
}

static bool float_2d(const Value *v)
{
	return v && v->init && v->init->dtype == DT_FLOAT && v->init->ndim == 2;
}

/* The LM head: int8 per-column weights, int8 static activation (QDQ). */
__attribute__((optimize("fp-contract=off")))
static int rewrite_head(const PipelineArgs *pa, Module *m, const char *model, int64_t vocab, cJSON *rec, Diag *d)
{
	Graph *g = m->graph;
	Arena *ar = m->arena;
	Node *mm;
	Value *x = lm_head_input(g, &mm);
	if (!mm)
		return diag_fail(d, "%s: no node produces the output 'logits' (the LM head of a decoder_with_past_model.onnx)",
		                 model);
	Value *w = mm->ninputs == 2 ? mm->inputs[1] : NULL;
	if (mm->op != OP_MatMul || !x || !float_2d(w) || w->init->dims[1] != vocab)
		return diag_fail(d, "%s: node '%s': the LM head is %s%s%s; --precision fp32dec-lmq8 needs a MatMul of a "
		                 "constant float [d_model, %lld] weight", model, mm->name && *mm->name ? mm->name : "(unnamed, "
		                 "producing 'logits')", mm->op_type,
		                 w ? " reading " : "", w ? w->name : "", (long long)vocab);
	const Tensor *t = w->init;
	int64_t K = t->dims[0], N = t->dims[1];
	if (finite_weights(t, model, mm, w, d) != WL_OK)
		return WL_ERR;
	void *sd, *zd, *qd;
	int64_t nd[1] = {N}, wd[2] = {K, N};
	Value *sw = new_const(g, arena_printf(ar, "%s_scale", w->name), DT_FLOAT, 1, nd, &sd);
	Value *zw = new_const(g, arena_printf(ar, "%s_zero_point", w->name), DT_INT8, 1, nd, &zd);
	Value *wq = new_const(g, arena_printf(ar, "%s_quantized", w->name), DT_INT8, 2, wd, &qd);
	float *sc = sd;
	int8_t *q = qd;
	memset(zd, 0, (size_t)N);
	for (int64_t n = 0; n < N; n++)
		sc[n] = 0;
	for (int64_t i = 0; i < K * N; i++) {
		float a = fabsf(ldf(t, i));
		if (a > sc[i % N])
			sc[i % N] = a;
	}
	for (int64_t n = 0; n < N; n++) {
		float s = sc[n] / 127.0f;
		sc[n] = s > 0 ? s : 1.0f;
	}
	for (int64_t i = 0; i < K * N; i++) {
		float r = rintf(ldf(t, i) / sc[i % N]);
		q[i] = (int8_t)(r < -128 ? -128 : r > 127 ? 127 : r);
	}
	const Lmq8Calib *c = pa->lmq8;
	QParams qp = act_params(c->lo, c->hi, false);
	void *sxd, *zxd;
	Value *sx = new_const(g, arena_printf(ar, "%s_scale", x->name), DT_FLOAT, 0, NULL, &sxd);
	Value *zx = new_const(g, arena_printf(ar, "%s_zero_point", x->name), DT_INT8, 0, NULL, &zxd);
	memcpy(sxd, &qp.scale, 4);
	memcpy(zxd, &qp.zp, 1);
	Value *wdq = insert_qdq(g, mm->prev, NULL, wq, sw, zw, 1, w);
	Value *xdq = insert_qdq(g, x->producer, x, NULL, sx, zx, -1, x);
	node_set_input(mm, 0, xdq);
	node_set_input(mm, 1, wdq);
	cJSON *h = cJSON_AddObjectToObject(rec, "lm_head");
	cJSON_AddStringToObject(h, "node", mm->name ? mm->name : "");
	cJSON_AddStringToObject(h, "weight", w->name);
	cJSON_AddStringToObject(h, "weights", "int8 per-output-channel symmetric (max |w| / 127 per column)");
	cJSON_AddStringToObject(h, "activation", "int8 per-tensor affine static (min/max of the calibration vectors)");
	cJSON_AddStringToObject(h, "lowered_to", "QuantizeLinear + ai.wlower.QMatMul");
	cJSON_AddNumberToObject(h, "rows", (double)N);
	cJSON_AddNumberToObject(h, "weight_bytes", (double)(K * N));
	cJSON_AddNumberToObject(h, "float_weight_bytes", (double)(4 * K * N));
	cJSON_AddNumberToObject(h, "scale_bytes", (double)(4 * N));
	cJSON_AddStringToObject(h, "input", x->name);
	cJSON *clips = cJSON_AddArrayToObject(h, "calibration_clips");
	for (int i = 0; i < pa->ncalibrate; i++)
		cJSON_AddItemToArray(clips, cJSON_CreateString(pa->calibrate[i]));
	cJSON_AddNumberToObject(h, "calibration_vectors", (double)c->vectors);
	cJSON *r = cJSON_AddArrayToObject(h, "input_range");
	cJSON_AddItemToArray(r, cJSON_CreateNumber(c->lo));
	cJSON_AddItemToArray(r, cJSON_CreateNumber(c->hi));
	cJSON_AddNumberToObject(h, "input_scale", (double)qp.scale);
	cJSON_AddNumberToObject(h, "input_zero_point", (double)qp.zp);
	return WL_OK;
}

/* The token embedding: ai.wlower.QGather of an int8 row-wise table. */
__attribute__((optimize("fp-contract=off")))
static int rewrite_embedding(Module *m, const char *model, int64_t vocab, cJSON *rec, Diag *d)
{
	Graph *g = m->graph;
	Arena *ar = m->arena;
	Node *ga = NULL;
	FOR_NODES(g, n) {
		if (n->op != OP_Gather || n->ninputs != 2 || n->noutputs != 1 || !float_2d(n->inputs[0]) ||
		    n->inputs[0]->init->dims[0] != vocab || attr_int(n, "axis", 0) != 0)
			continue;
		if (ga)
			return diag_fail(d, "%s: nodes '%s' and '%s' both gather rows of a float [%lld, d] table: which one is "
			                 "the token embedding is ambiguous", model, ga->name, n->name, (long long)vocab);
		ga = n;
	}
	if (!ga)
		return diag_fail(d, "%s: no Gather of a constant float [%lld, d_model] table (the token embedding of a "
		                 "decoder_with_past_model.onnx)", model, (long long)vocab);
	Value *e = ga->inputs[0];
	const Tensor *t = e->init;
	int64_t V = t->dims[0], D = t->dims[1];
	if (finite_weights(t, model, ga, e, d) != WL_OK)
		return WL_ERR;
	void *sd, *qd;
	int64_t vd[1] = {V}, td[2] = {V, D};
	Value *se = new_const(g, arena_printf(ar, "%s_row_scale", e->name), DT_FLOAT, 1, vd, &sd);
	Value *eq = new_const(g, arena_printf(ar, "%s_int8_rows", e->name), DT_INT8, 2, td, &qd);
	float *sc = sd;
	int8_t *q = qd;
	for (int64_t r = 0; r < V; r++) {
		float a = 0;
		for (int64_t j = 0; j < D; j++)
			a = fmaxf(a, fabsf(ldf(t, r * D + j)));
		float s = a / 127.0f;
		sc[r] = s > 0 ? s : 1.0f;
		for (int64_t j = 0; j < D; j++) {
			float v = rintf(ldf(t, r * D + j) / sc[r]);
			q[r * D + j] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
		}
	}
	const char *name = ga->name && *ga->name ? arena_printf(ar, "%s_QGather", ga->name) : "";
	Node *f = node_new(g, "QGather", "ai.wlower", name);
	node_add_input(f, eq);
	node_add_input(f, se);
	node_add_input(f, ga->inputs[1]);
	Value *y = ga->outputs[0];
	node_insert_before(ga, f);
	node_remove(ga);
	node_add_output(f, y);
	module_set_opset(m, "ai.wlower", 1);
	cJSON *j = cJSON_AddObjectToObject(rec, "embedding_table");
	cJSON_AddStringToObject(j, "node", name);
	cJSON_AddStringToObject(j, "table", e->name);
	cJSON_AddStringToObject(j, "form", "int8 rowwise: int8 rows + one float scale per row (max |row| / 127)");
	cJSON_AddStringToObject(j, "lowered_to", "ai.wlower.QGather");
	cJSON_AddNumberToObject(j, "rows", (double)V);
	cJSON_AddNumberToObject(j, "bytes", (double)(V * D + 4 * V));
	cJSON_AddNumberToObject(j, "float_bytes", (double)(4 * V * D));
	return WL_OK;
}

int lmq8_rewrite(const PipelineArgs *pa, Module *m, const char *model, int64_t vocab, cJSON *rec, Diag *d)
{
	if (!pa->lmq8 || !pa->lmq8->done)
		return diag_fail(d, "%s: --precision fp32dec-lmq8 without LM-head calibration (--calibrate AUDIO)", model);
	cJSON_AddStringToObject(rec, "name", "fp32dec-lmq8");
	cJSON_AddStringToObject(rec, "float", "mel, encoder, cross_kv and the decoder's linears (fp32)");
	if (rewrite_head(pa, m, model, vocab, rec, d) != WL_OK || rewrite_embedding(m, model, vocab, rec, d) != WL_OK)
		return WL_ERR;
	return WL_OK;
}
