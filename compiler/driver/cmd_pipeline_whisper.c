/* cmd_pipeline_whisper.c — `wlower WHISPER_DIR --pipeline whisper --target
 * ref|host -o PIPE_DIR`: the programs runtime/pipelines/whisper.c runs, from
 * an Optimum/HF export folder (config.json, encoder_model.onnx,
 * decoder_model.onnx, decoder_with_past_model.onnx, symbolic dims; the
 * bundled generator writes one with examples/models/whisper.py --layout
 * optimum):
 *
 *   mel       waveform [1, 160·F] → mel [1, M, F]: one ai.wlower.LogMel (a
 *             one-node graph made here and fused by fuse-logmel)
 *   encoder   encoder_model.onnx at batch_size 1: input_features [1, M, F] →
 *             last_hidden_state [1, C, d] (C = F/2 = max_source_positions)
 *   cross_kv  decoder_model.onnx at batch 1, one token, with only its
 *             present.N.encoder.{key,value} [1, H, C, hd] outputs kept (dce
 *             drops the rest): every layer's cross-attention K and V, once per
 *             window. After fuse-qkv one MatMulNBits computes every layer's
 *             K and V ([1, C, d] each); a Reshape to [1, C, H, hd] and a
 *             Transpose to [1, H, C, hd] per output are left, compiled for
 *             the target like the other programs (host: a copy and a
 *             row-memcpy transpose; Chimera: ccl::copy and ccl::transpose).
 *   step      decoder_with_past_model.onnx at batch 1, one token, past
 *             S-1 rows (S = --max-seq, default max_target_positions, 448),
 *             with --kv-step: inputs input_ids [1,1], position_ids [1],
 *             attention_mask [1,S], past_key_values.N.decoder.* [1,H,S-1,hd]
 *             (the static-size self-attention cache) and .encoder.* (cross
 *             K/V); outputs logits [1,1,V] and present.N.decoder.* [1,H,1,hd]:
 *             with --static-kv-cache the self-attention (GroupQueryAttention
 *             after kv-step-mask) reads the cache in place and outputs only
 *             the new token's K/V, which the runtime writes into cache row p
 *             (whisper.c says how).
 * The vendor pair (encoder_model.onnx + decoder_prefill.onnx: a static-T
 * prefill, input_ids [1,T] and encoder_hidden_states [1,C,d] → logits
 * [1,T,V], no cache, no presents; config.json optional, else the dims come
 * from the graphs' io and the cross_kv program, text_ctx 448): step and
 * cross_kv are derived from the fused prefill by the pass prefill-step
 * (--from-prefill step|cross-kv; kv-step-position makes its positional
 * Slice of rows [0, T) a Gather at position_ids), so the step has the same
 * io as the one made from decoder_with_past and the runtime does not
 * change. The prefill must keep the positional table (a static export
 * folds it to rows 0..T-1: that is an error naming the node).
 *
 * Prefill is the step run for each prompt token (no separate program); the
 * final norm and LM head are in step (no lm_head program), and the greedy
 * choice is made by the runtime after the timestamp rules.
 *
 * qc-n|qc-p|qc-u: mel, encoder, cross_kv and step compiled for Chimera with the ranges
 * of --calibrate AUDIO (repeatable; whisper_calibrate: the float pipeline
 * transcribes each clip, greedy with timestamps, up to text_ctx/2 tokens per
 * window, every tensor of every program observed at every window and step)
 * or --tranges DIR. The step's length mask stays a mask: kv-step-mask makes
 * it GroupQueryAttention's int64 attention_mask input (a key with mask 0
 * gets weight exactly 0 inside the kernel), so no -inf reaches a range.
 * cross_kv is compiled for the same target with its own ranges (the
 * calibration observes it once per window), so every program is simulated.
 *
 * --precision fp32dec-lmq8 (whisper_lmq8.c; needs --calibrate AUDIO on every
 * target): the step's LM head int8 (ai.wlower.QMatMul, input scale and zero
 * point from the LM head's inputs over the clips) and its token embedding
 * int8 row-wise (ai.wlower.QGather); pipeline.json "precision" records it
 * with the calibration facts. The ranges of the qc-* programs come from the
 * same float calibration run.
 *
 * pipeline.json "whisper": the dims, the special token ids of Whisper's
 * multilingual vocabulary (by position from the vocab size: 51865 for
 * tiny..large-v2, 51866 for large-v3), and "host_contract" (audio framing,
 * log-mel parameters, prompt, argmax range), as
 * ../shared/reference/whisper-base-webgpu-export.json has them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "compiler/driver/commands.h"
#include "runtime/pipelines/pipeline.h"
#include "targets/target.h"

typedef struct WhisperConfig {
	int64_t d, layers, heads, vocab, mels, ctx, text_ctx;
} WhisperConfig;

static int read_config(const char *dir, WhisperConfig *c, cJSON **json, Diag *d)
{
	char file[4096];
	snprintf(file, sizeof file, "%s/config.json", dir);
	cJSON *r;
	if (json_read_file(file, &r, d) != WL_OK)
		return WL_ERR;
	int rc = WL_OK;
	rc = rc ?: json_int(r, "d_model", 1, 1 << 16, file, &c->d, d);
	rc = rc ?: json_int(r, "decoder_layers", 1, 1024, file, &c->layers, d);
	rc = rc ?: json_int(r, "decoder_attention_heads", 1, 1024, file, &c->heads, d);
	rc = rc ?: json_int(r, "vocab_size", 51865, 51866, file, &c->vocab, d);
	rc = rc ?: json_int(r, "num_mel_bins", 80, 128, file, &c->mels, d);
	rc = rc ?: json_int(r, "max_source_positions", 1, 1500, file, &c->ctx, d);
	rc = rc ?: json_int(r, "max_target_positions", 2, 4096, file, &c->text_ctx, d);
	if (rc == WL_OK && c->mels != 80 && c->mels != 128)
		rc = diag_fail(d, "%s: 'num_mel_bins' is %lld (Whisper has 80 or 128)", file, (long long)c->mels);
	if (rc == WL_OK && (c->d % c->heads || (c->d / c->heads) % 2))
		rc = diag_fail(d, "%s: d_model %lld is not an even head_dim times decoder_attention_heads %lld", file,
		               (long long)c->d, (long long)c->heads);
	if (rc != WL_OK) {
		cJSON_Delete(r);
		return WL_ERR;
	}
	*json = r;
	return WL_OK;
}

/* The special ids of the multilingual vocabulary: 1501 timestamps end it. */
static void add_tokens(cJSON *w, int64_t vocab)
{
	int64_t tb = vocab - 1501;
	const char *keys[] = {"eot", "sot", "first_language", "translate", "transcribe", "sot_lm", "sot_prev",
	                      "no_speech", "no_timestamps", "timestamp_begin"};
	int64_t ids[] = {50257, 50258, 50259, tb - 6, tb - 5, tb - 4, tb - 3, tb - 2, tb - 1, tb};
	cJSON *t = cJSON_AddObjectToObject(w, "tokens");
	for (int i = 0; i < 10; i++)
		cJSON_AddNumberToObject(t, keys[i], (double)ids[i]);
	cJSON_AddNumberToObject(t, "languages", (double)(tb - 6 - 50259));
}

static void add_contract(cJSON *root, const WhisperConfig *c, int64_t S)
{
	int64_t F = 2 * c->ctx;
	cJSON *h = cJSON_AddObjectToObject(root, "host_contract");
	cJSON *a = cJSON_AddObjectToObject(h, "audio");
	cJSON_AddNumberToObject(a, "sample_rate", 16000);
	cJSON_AddNumberToObject(a, "channels", 1);
	cJSON_AddNumberToObject(a, "window_samples", (double)(160 * F));
	cJSON_AddStringToObject(a, "framing", "30 s windows (160·frames samples), zero padded; seek by the last "
	                        "timestamp token of a window");
	cJSON *m = cJSON_AddObjectToObject(h, "log_mel");
	cJSON_AddNumberToObject(m, "n_fft", 400);
	cJSON_AddNumberToObject(m, "hop_length", 160);
	cJSON_AddNumberToObject(m, "n_mels", (double)c->mels);
	cJSON_AddNumberToObject(m, "frames", (double)F);
	cJSON_AddStringToObject(m, "window", "periodic hann 400, reflect pad 200, |STFT|^2, last frame dropped");
	cJSON_AddStringToObject(m, "normalize", "log10(max(x,1e-10)); max(x, max-8); (x+4)/4");
	cJSON_AddStringToObject(m, "program", "mel");
	cJSON *p = cJSON_AddObjectToObject(h, "prompt");
	cJSON_AddStringToObject(p, "ids", "<|startoftranscript|> <|lang|> <|transcribe|>|<|translate|> "
	                        "[<|notimestamps|>]; with previous text: <|startofprev|> text... first");
	cJSON_AddNumberToObject(p, "max_tokens", (double)S);
	cJSON *g = cJSON_AddObjectToObject(h, "argmax");
	cJSON_AddNumberToObject(g, "begin", 0);
	cJSON_AddNumberToObject(g, "end", (double)c->vocab);
	cJSON_AddStringToObject(g, "rules", "OpenAI greedy: special tokens suppressed, blank and eot suppressed "
	                        "at the first step, timestamp pairs, monotonic, initial timestamp <= 1 s");
}

static int need_file(const char *dir, const char *name, char *path, size_t n, Diag *d)
{
	snprintf(path, n, "%s/%s", dir, name);
	struct stat st;
	if (stat(path, &st) != 0)
		return diag_fail(d, "%s: no %s (an Optimum Whisper export: config.json, encoder_model.onnx, "
		                 "decoder_model.onnx, decoder_with_past_model.onnx; or the vendor pair "
		                 "encoder_model.onnx + decoder_prefill.onnx)", dir, name);
	return WL_OK;
}

/* The static shape of graph input or output `name` of the model at path. */
static int io_shape(const char *path, bool input, const char *name, int rank, int64_t *out, Diag *d)
{
	Module *m;
	if (model_read(path, &m, d) != WL_OK)
		return WL_ERR;
	Graph *g = m->graph;
	Value *v = NULL;
	for (int i = 0; i < (input ? g->ninputs : g->noutputs); i++)
		if (strcmp((input ? g->inputs[i] : g->outputs[i])->name, name) == 0)
			v = input ? g->inputs[i] : g->outputs[i];
	bool ok = v && type_shape_known(&v->type) && v->type.rank == rank;
	for (int i = 0; ok && i < rank; i++)
		out[i] = v->type.dims[i].value;
	module_free(m);
	if (!ok)
		return diag_fail(d, "%s: no graph %s '%s' of static rank %d (the vendor pair is static)", path,
		                 input ? "input" : "output", name, rank);
	return WL_OK;
}

/* The vendor pair without config.json: d, vocab, mels and ctx from the io;
 * layers and heads from the cross_kv program (whisper_pipeline). */
static int config_from_io(const char *enc, const char *pre, WhisperConfig *c, cJSON **json, Diag *d)
{
	int64_t f[3], h[3], l[3];
	if (io_shape(enc, true, "input_features", 3, f, d) != WL_OK ||
	    io_shape(pre, true, "encoder_hidden_states", 3, h, d) != WL_OK ||
	    io_shape(pre, false, "logits", 3, l, d) != WL_OK)
		return WL_ERR;
	*c = (WhisperConfig){.d = h[2], .layers = 0, .heads = 0, .vocab = l[2], .mels = f[1], .ctx = h[1],
	                     .text_ctx = 448};
	if (c->mels != 80 && c->mels != 128)
		return diag_fail(d, "%s: input_features has %lld mel bins (Whisper has 80 or 128)", enc, (long long)c->mels);
	if (f[2] != 2 * c->ctx)
		return diag_fail(d, "%s: input_features has %lld frames, %s's encoder_hidden_states %lld rows (want half)",
		                 enc, (long long)f[2], pre, (long long)c->ctx);
	if (c->vocab != 51865 && c->vocab != 51866)
		return diag_fail(d, "%s: logits has %lld columns (Whisper's vocabulary: 51865 or 51866)", pre,
		                 (long long)c->vocab);
	cJSON *r = cJSON_CreateObject();
	cJSON_AddNumberToObject(r, "d_model", (double)c->d);
	cJSON_AddNumberToObject(r, "vocab_size", (double)c->vocab);
	cJSON_AddNumberToObject(r, "num_mel_bins", (double)c->mels);
	cJSON_AddNumberToObject(r, "max_source_positions", (double)c->ctx);
	cJSON_AddNumberToObject(r, "max_target_positions", (double)c->text_ctx);
	cJSON_AddStringToObject(r, "source", "the graphs' io (no config.json): decoder_layers and "
	                        "decoder_attention_heads from the cross_kv program");
	*json = r;
	return WL_OK;
}

/* layers and heads from the cross_kv program's present.N.encoder.key [1,H,C,hd] outputs */
static int layers_from_cross(const cJSON *prog, WhisperConfig *c, const char *model, Diag *d)
{
	const cJSON *io;
	int64_t n = 0, H = 0;
	cJSON_ArrayForEach(io, cJSON_GetObjectItemCaseSensitive(prog, "outputs")) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(io, "name");
		const cJSON *sh = cJSON_GetObjectItemCaseSensitive(io, "shape");
		if (!cJSON_IsString(nm) || !strstr(nm->valuestring, ".encoder.key") || cJSON_GetArraySize(sh) != 4)
			continue;
		n++;
		H = (int64_t)cJSON_GetArrayItem(sh, 1)->valuedouble;
	}
	if (!n || H <= 0 || c->d % H || (c->d / H) % 2)
		return diag_fail(d, "%s: the derived cross_kv program has %lld present.N.encoder.key outputs with %lld "
		                 "heads (want >= 1, an even head_dim)", model, (long long)n, (long long)H);
	c->layers = n;
	c->heads = H;
	return WL_OK;
}

/* The mel program's graph: input_features [1, M, F] passed through, then
 * fuse-logmel (--prepend-logmel) puts the LogMel in front. */
static int mel_module(const WhisperConfig *c, Module **m, Diag *d)
{
	char txt[512];
	int n = snprintf(txt, sizeof txt,
	                 "<ir_version: 8, opset_import: [\"\" : 17]>\n"
	                 "mel (float[1,%lld,%lld] input_features) => (float[1,%lld,%lld] mel) {\n"
	                 "  mel = Identity (input_features)\n}\n",
	                 (long long)c->mels, (long long)(2 * c->ctx), (long long)c->mels, (long long)(2 * c->ctx));
	return text_parse(txt, (size_t)n, "<mel>", m, d);
}

/* decoder_model.onnx with only its present.N.encoder.* outputs. */
static int cross_kv_module(const char *path, const WhisperConfig *c, Module **out, Diag *d)
{
	Module *m;
	if (model_read(path, &m, d) != WL_OK)
		return WL_ERR;
	Graph *g = m->graph;
	for (int i = g->noutputs - 1; i >= 0; i--)
		if (!strstr(g->outputs[i]->name, ".encoder."))
			graph_remove_output(g, i);
	if (g->noutputs != 2 * c->layers) {
		module_free(m);
		return diag_fail(d, "%s: %d present.N.encoder.{key,value} outputs, config.json's decoder_layers says %lld "
		                 "(an Optimum decoder_model.onnx has them)", path, g->noutputs, (long long)(2 * c->layers));
	}
	*out = m;
	return WL_OK;
}

int whisper_pipeline(const PipelineArgs *pa, const char *dir, cJSON *root, Diag *d)
{
	WhisperConfig c;
	cJSON *cfg;
	char enc[4096], dec[4096], step[4096], cfile[4096];
	struct stat st;
	snprintf(step, sizeof step, "%s/decoder_with_past_model.onnx", pa->src);
	snprintf(dec, sizeof dec, "%s/decoder_prefill.onnx", pa->src);
	snprintf(cfile, sizeof cfile, "%s/config.json", pa->src);
	/* the vendor pair: decoder_prefill.onnx and no decoder_with_past_model.onnx */
	bool vendor = stat(step, &st) != 0 && stat(dec, &st) == 0;
	if (need_file(pa->src, "encoder_model.onnx", enc, sizeof enc, d) != WL_OK)
		return WL_ERR;
	if (vendor) {
		snprintf(step, sizeof step, "%s", dec);
		if (stat(cfile, &st) == 0 ? read_config(pa->src, &c, &cfg, d) : config_from_io(enc, dec, &c, &cfg, d))
			return WL_ERR;
	} else if (read_config(pa->src, &c, &cfg, d) != WL_OK ||
	           need_file(pa->src, "decoder_model.onnx", dec, sizeof dec, d) != WL_OK ||
	           need_file(pa->src, "decoder_with_past_model.onnx", step, sizeof step, d) != WL_OK) {
		return WL_ERR;
	}
	cJSON *model = cJSON_AddObjectToObject(root, "model");
	cJSON_AddStringToObject(model, "dir", pa->src);
	cJSON_AddStringToObject(model, "layout", vendor ? "vendor-prefill" : "optimum");
	cJSON_AddItemToObject(model, "config", cfg);
	int64_t S = pa->pipe->canon.max_seq ? pa->pipe->canon.max_seq : c.text_ctx;
	if (S > c.text_ctx)
		return diag_fail(d, "--max-seq %lld exceeds max_target_positions %lld of %s/config.json", (long long)S,
		                 (long long)c.text_ctx, pa->src);
	cJSON *w = cJSON_AddObjectToObject(root, "whisper");
	add_contract(root, &c, S);
	cJSON *programs = cJSON_AddArrayToObject(root, "programs");
	PipelineOptions base = *pa->pipe, mel = base, stp = base, xkv = base, pre = base;
	mel.fuse.prepend_logmel = true;
	stp.canon.kv_step = true;
	stp.fuse.static_kv_cache = true;
	if (vendor) {
		stp.canon.from_prefill = "step";
		stp.canon.max_seq = S;
		xkv.canon.from_prefill = "cross-kv";
		pre.canon.from_prefill = "prefill";
	}
	PipelineArgs amel = *pa, abase = *pa, astep = *pa, axkv = *pa, apre = *pa;
	amel.pipe = &mel;
	abase.pipe = &base;
	astep.pipe = &stp;
	axkv.pipe = &xkv;
	apre.pipe = &pre;
	apre.ref = pa->ref || pa->to->kind != TARGET_HOST;   /* qc-*: no ranges are recorded for it */
	DimBinding enc_dims[] = {{"batch_size", 1}, {"encoder_sequence_length", c.ctx}};
	DimBinding kv_dims[] = {{"batch_size", 1}, {"decoder_sequence_length", 1}, {"encoder_sequence_length", c.ctx},
	                        {"encoder_sequence_length_out", c.ctx}};
	DimBinding step_dims[] = {{"batch_size", 1}, {"decoder_sequence_length", 1},
	                          {"past_decoder_sequence_length", S - 1}, {"encoder_sequence_length_out", c.ctx}};
	Module *m;
	if (mel_module(&c, &m, d) != WL_OK ||
	    pipeline_compile_module(&amel, m, "<mel>", NULL, 0, "mel", dir, false, programs, d) != WL_OK)
		return WL_ERR;
	if (model_read(enc, &m, d) != WL_OK ||
	    pipeline_compile_module(&abase, m, enc, vendor ? NULL : enc_dims, vendor ? 0 : 2, "encoder", dir, false,
	                            programs, d) != WL_OK)
		return WL_ERR;
	if (vendor ? model_read(dec, &m, d) : cross_kv_module(dec, &c, &m, d))
		return WL_ERR;
	if (pipeline_compile_module(&axkv, m, dec, vendor ? NULL : kv_dims, vendor ? 0 : 4, "cross_kv", dir, false,
	                            programs, d) != WL_OK)
		return WL_ERR;
	const cJSON *xp = cJSON_GetArrayItem(programs, cJSON_GetArraySize(programs) - 1);
	int64_t cl = c.layers, ch = c.heads;     /* config.json's, if any */
	if (vendor && layers_from_cross(xp, &c, dec, d) != WL_OK)
		return WL_ERR;
	if (vendor && cl && (cl != c.layers || ch != c.heads))
		return diag_fail(d, "%s: %lld decoder layers of %lld heads, %s says %lld of %lld", dec, (long long)c.layers,
		                 (long long)c.heads, cfile, (long long)cl, (long long)ch);
	int64_t vals[] = {c.layers, c.heads, c.d / c.heads, c.d, c.vocab, c.mels, c.ctx, 2 * c.ctx, S};
	const char *keys[] = {"layers", "heads", "head_dim", "d_model", "vocab", "n_mels", "audio_ctx", "frames",
	                      "text_ctx"};
	for (int i = 0; i < 9; i++)
		cJSON_AddNumberToObject(w, keys[i], (double)vals[i]);
	add_tokens(w, c.vocab);
	if (model_read(step, &m, d) != WL_OK)
		return WL_ERR;
	if (pa->lmq8 && lmq8_rewrite(pa, m, step, c.vocab, cJSON_AddObjectToObject(root, "precision"), d) != WL_OK) {
		module_free(m);
		return WL_ERR;
	}
	if (pipeline_compile_module(&astep, m, step, vendor ? NULL : step_dims, vendor ? 0 : 4, "step", dir, false,
	                            programs, d) != WL_OK)
		return WL_ERR;
	/* the runtime writes each present's one row into the cache (whisper.c) */
	const cJSON *sp = cJSON_GetArrayItem(programs, cJSON_GetArraySize(programs) - 1);
	int64_t row[4] = {1, c.heads, 1, c.d / c.heads};
	for (int64_t i = 0; i < 2 * c.layers; i++) {
		char nm[64];
		snprintf(nm, sizeof nm, "present.%lld.decoder.%s", (long long)(i / 2), i % 2 ? "value" : "key");
		if (pipeline_check_io(sp, "outputs", nm, 4, row, step, d) != WL_OK)
			return WL_ERR;
	}
	if (vendor) {
		if (model_read(dec, &m, d) != WL_OK ||
		    pipeline_compile_module(&apre, m, dec, NULL, 0, "prefill", dir, false, programs, d) != WL_OK)
			return WL_ERR;
		cJSON *nt = cJSON_GetObjectItemCaseSensitive(w, "notes");
		cJSON_AddStringToObject(nt ? nt : cJSON_AddObjectToObject(w, "notes"), "prefill",
		                        "the prompt rows in one run (the vendor's decoder_prefill with the self-attention "
		                        "presents [1,H,T,hd] as outputs, cross K/V from cross_kv); wlower transcribe runs "
		                        "the prompt through step instead; on qc-* it runs on ref (no ranges recorded)");
	}
	return WL_OK;
}

/* --precision fp32dec-lmq8, before the calibration run: the step graph has
 * the LM head and token embedding the rewrite needs (whisper_lmq8.c), so
 * that a graph without them fails at once, not after the clips. */
int whisper_lmq8_precheck(const PipelineArgs *pa, Diag *d)
{
	WhisperConfig c;
	cJSON *cfg;
	char step[4096];
	if (read_config(pa->src, &c, &cfg, d) != WL_OK)
		return WL_ERR;
	cJSON_Delete(cfg);
	if (need_file(pa->src, "decoder_with_past_model.onnx", step, sizeof step, d) != WL_OK)
		return WL_ERR;
	Module *m;
	if (model_read(step, &m, d) != WL_OK)
		return WL_ERR;
	Lmq8Calib probe = {.lo = -1, .hi = 1, .vectors = 1, .done = true};
	PipelineArgs pp = *pa;
	pp.lmq8 = &probe;
	cJSON *rec = cJSON_CreateObject();
	int rc = lmq8_rewrite(&pp, m, step, c.vocab, rec, d);
	cJSON_Delete(rec);
	module_free(m);
	return rc;
}

const char *const whisper_qc_programs[] = {"mel", "encoder", "cross_kv", "step", NULL};

int whisper_calibrate(const PipelineArgs *pa, const char *cdir, const char *dir, Diag *d)
{
	Whisper *w = NULL;
	if (whisper_open(cdir, cmd_default_threads(), &w, d) != WL_OK)
		return WL_ERR;
	CalibPrograms cp = {0};
	for (int i = 0; i < whisper_program_count(w); i++) {
		cp.prog[cp.n] = whisper_program(w, i, &cp.name[cp.n]);
		cp.n++;
	}
	const WhisperInfo *wi = whisper_info(w);
	WhisperOptions o = {.language = wi->first_language, .task = wi->transcribe, .timestamps = true,
	                    .max_tokens = wi->text_ctx / 2, .condition_on_previous = true};
	int rc = calib_programs_observe(&cp, d);
	bool tty = isatty(2);
	double t0 = wl_now_ms();
	for (int k = 0; rc == WL_OK && k < pa->ncalibrate; k++) {
		const char *clip = pa->calibrate[k];
		float *x = NULL;
		int64_t n = 0;
		WhisperSegment *segs = NULL;
		int nseg = 0;
		WhisperReport rep;
		rc = audio_read_mono(clip, 16000, &x, &n, d);
		if (rc == WL_OK && (rc = whisper_transcribe(w, x, n, &o, &segs, &nseg, NULL, NULL, NULL, &rep, d)) != WL_OK)
			diag_prefix(d, "%s: ", clip);
		free(x);
		whisper_segments_free(segs, nseg);
		if (tty && rc == WL_OK)
			fprintf(stderr, "\rcalibrate: clip %d/%d, %.1f s", k + 1, pa->ncalibrate, (wl_now_ms() - t0) / 1e3);
	}
	if (tty)
		fputc('\n', stderr);
	for (int i = 0; rc == WL_OK && pa->lmq8 && i < cp.n; i++)     /* --precision fp32dec-lmq8 */
		if (strcmp(cp.name[i], "step") == 0)
			rc = lmq8_observe(pa, program_module(cp.prog[i]), cp.cal[i], program_stats(cp.prog[i])->runs, d);
	if (!pa->ref && pa->to->kind != TARGET_HOST)
		rc = rc ?: calib_programs_write(pa, &cp, dir, whisper_qc_programs, "--calibrate (the clips)", d);
	calib_programs_free(&cp);
	whisper_close(w);
	return rc;
}
