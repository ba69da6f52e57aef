/* cmd_pipeline.c — `wlower LLM_DIR --pipeline llm --target T -o PIPE_DIR`:
 * compiles the programs a KV-cached runtime needs into one pipeline
 * directory (runtime/pipelines/pipeline.h has the format), atomically.
 *
 * llm: LLM_DIR is an Optimum export (config.json, decoder_with_past_model.onnx
 * with symbolic dims). Both programs are decoder_with_past_model.onnx at
 * batch_size 1 and past_sequence_length S (S = --max-seq, default
 * config.json's max_position_embeddings up to 4096), RoPE tables of S rows,
 * with the static-kv-cache pass: the past inputs are the static caches
 * [1, KV, S, hd] read in place and the presents only the new rows:
 *   step     sequence_length 1: one token at position p;
 *   prefill  sequence_length N (--prefill-rows, default min(16, S)): up to
 *            N prompt rows at positions c..c+N-1, padded, with the mask.
 * Both end at hidden_states (split-lm-head body); `lm_head` is the final
 * RMSNorm and projection of the step graph (split-lm-head head); with
 * --argmax-on-device it ends in ai.wlower.GreedyArgMax (fuse-argmax, then the
 * split keeps it): output token_ids [1,1] int32, pipeline.json
 * llm.argmax_on_device true, and the runtime reads the id (greedy only).
 * Programs with byte-identical weights.bin (host: prefill and step) keep one
 * file, hard-linked (share_weights).
 * runtime/pipelines/llm.c says how the cache is kept. Target "ref" keeps the
 * fused graph (model.onnx, run by the reference executor); host and qc-*
 * compile it as `--target` does.
 *
 * qc-* need ranges for every tensor of every program, from real decoding
 * (a saturated store at one position corrupts the cache for every later
 * one). --calibrate PROMPTS.txt (one prompt a line, comma-separated ids;
 * blank lines skipped): the pipeline is first built for ref in
 * OUT.tmp/.calibrate, and from each prompt greedy decoding runs to max_seq
 * (eos ignored) with tranges/calibrate.c observing every program input (the
 * KV cache included) and node output at every position; the merged ranges,
 * widened --calibrate-margin times (default 2: one guard bit, since a later
 * prompt goes beyond the traces and a store that saturates corrupts the
 * cache row for every later position; 32-bit fixed point has bits to spare),
 * are written as OUT/<program>.tranges, then the qc programs are compiled
 * with them. --tranges DIR takes DIR/<program>.tranges instead (e.g. an
 * earlier qc pipeline's folder) and copies them into OUT. Either way the
 * pipeline records the ranges it was compiled with.
 *
 * llm from an ONNX Runtime GenAI folder (genai_config.json, no
 * decoder_with_past_model.onnx): the one graph of the model builder
 * (model.decoder.filename, default model.onnx), symbolic batch_size,
 * sequence_length, past_sequence_length and total_sequence_length. Its io
 * names (model.decoder.inputs / outputs: input_ids, attention_mask,
 * position_ids, past_key_names "past_key_values.%d.key", ..., logits,
 * present_key_names, ...) are renamed to the Optimum ones the programs use;
 * sizes come from model.decoder (num_hidden_layers, num_attention_heads,
 * num_key_value_heads, hidden_size, head_size) and model (vocab_size,
 * context_length, bos_token_id, eos_token_id: a number or a list, the first
 * taken). The com.microsoft GroupQueryAttention's positions, derived in the
 * graph from attention_mask (seqlens_k = ReduceSum(mask) - 1, integer ops),
 * are taken from position_ids instead (--position-input, pass fuse-ms-gqa):
 * the runtime feeds the position of every row, which the mask of a static
 * cache with padded rows does not give; total_sequence_length is bound to
 * S + T and folds. Both programs read the cache (no decoder_model).
 *
 * whisper: cmd_pipeline_whisper.c (whisper_pipeline), which compiles its
 * programs with pipeline_compile_module.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "compiler/driver/commands.h"
#include "runtime/pipelines/pipeline.h"
#include "targets/target.h"
#include "tranges/calibrate.h"

#define KV_RANGES "kv_cache.tranges"

typedef struct HfConfig {
	int64_t layers, heads, kv_heads, hidden, head_dim, vocab, max_pos, bos, eos;
} HfConfig;

static int read_hf_config(const char *dir, HfConfig *c, cJSON **json, Diag *d)
{
	char file[4096];
	snprintf(file, sizeof file, "%s/config.json", dir);
	cJSON *r;
	if (json_read_file(file, &r, d) != WL_OK)
		return WL_ERR;
	int rc = WL_OK;
	rc = rc ?: json_int(r, "num_hidden_layers", 1, 4096, file, &c->layers, d);
	rc = rc ?: json_int(r, "num_attention_heads", 1, 4096, file, &c->heads, d);
	rc = rc ?: json_int(r, "hidden_size", 1, 1 << 20, file, &c->hidden, d);
	rc = rc ?: json_int(r, "vocab_size", 1, 1 << 24, file, &c->vocab, d);
	rc = rc ?: json_int(r, "max_position_embeddings", 2, 1 << 24, file, &c->max_pos, d);
	c->kv_heads = c->heads;
	if (rc == WL_OK && cJSON_GetObjectItemCaseSensitive(r, "num_key_value_heads"))
		rc = json_int(r, "num_key_value_heads", 1, 4096, file, &c->kv_heads, d);
	c->head_dim = c->heads ? c->hidden / c->heads : 0;
	if (rc == WL_OK && cJSON_GetObjectItemCaseSensitive(r, "head_dim"))
		rc = json_int(r, "head_dim", 1, 65536, file, &c->head_dim, d);
	c->bos = c->eos = -1;
	if (rc == WL_OK && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(r, "bos_token_id")))
		rc = json_int(r, "bos_token_id", 0, c->vocab - 1, file, &c->bos, d);
	if (rc == WL_OK && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(r, "eos_token_id")))
		rc = json_int(r, "eos_token_id", 0, c->vocab - 1, file, &c->eos, d);
	if (rc == WL_OK && (c->heads % c->kv_heads || c->head_dim < 1))
		rc = diag_fail(d, "%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld", file,
		               (long long)c->heads, (long long)c->kv_heads);
	if (rc != WL_OK) {
		cJSON_Delete(r);
		return WL_ERR;
	}
	*json = r;
	return WL_OK;
}

/* ---------------------------------------------------------------- GenAI folders */

enum { IO_IDS, IO_MASK, IO_POS, IO_PK, IO_PV, IO_LOGITS, IO_PRK, IO_PRV, IO_N };
static const char *const io_key[IO_N] = {"input_ids", "attention_mask", "position_ids", "past_key_names",
                                         "past_value_names", "logits", "present_key_names", "present_value_names"};
static const char *const io_canon[IO_N] = {"input_ids", "attention_mask", "position_ids",
                                           "past_key_values.%d.key", "past_key_values.%d.value", "logits",
                                           "present.%d.key", "present.%d.value"};

typedef struct GenaiIo {
	const char *file;              /* model.decoder.filename */
	const char *name[IO_N];        /* per layer: a pattern with one %d */
} GenaiIo;

/* a name pattern of genai_config.json: exactly one %d, no other % */
static bool one_layer_pattern(const char *s)
{
	const char *p = strchr(s, '%');
	return p && p[1] == 'd' && !strchr(p + 2, '%');
}

static int read_genai_config(const char *dir, HfConfig *c, cJSON **json, GenaiIo *io, Diag *d)
{
	char file[4096];
	snprintf(file, sizeof file, "%s/genai_config.json", dir);
	cJSON *r;
	if (json_read_file(file, &r, d) != WL_OK)
		return WL_ERR;
	const cJSON *mo = cJSON_GetObjectItemCaseSensitive(r, "model");
	const cJSON *de = cJSON_GetObjectItemCaseSensitive(mo, "decoder");
	int rc = WL_OK;
	if (!cJSON_IsObject(de))
		rc = diag_fail(d, "%s: no 'model.decoder' object (an ONNX Runtime GenAI genai_config.json)", file);
	rc = rc ?: json_int(de, "num_hidden_layers", 1, 4096, file, &c->layers, d);
	rc = rc ?: json_int(de, "num_attention_heads", 1, 4096, file, &c->heads, d);
	rc = rc ?: json_int(de, "hidden_size", 1, 1 << 20, file, &c->hidden, d);
	rc = rc ?: json_int(mo, "vocab_size", 1, 1 << 24, file, &c->vocab, d);
	rc = rc ?: json_int(mo, "context_length", 2, 1 << 24, file, &c->max_pos, d);
	c->kv_heads = c->heads;
	if (rc == WL_OK && cJSON_GetObjectItemCaseSensitive(de, "num_key_value_heads"))
		rc = json_int(de, "num_key_value_heads", 1, 4096, file, &c->kv_heads, d);
	c->head_dim = c->heads ? c->hidden / c->heads : 0;
	if (rc == WL_OK && cJSON_GetObjectItemCaseSensitive(de, "head_size"))
		rc = json_int(de, "head_size", 1, 65536, file, &c->head_dim, d);
	c->bos = c->eos = -1;
	if (rc == WL_OK && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(mo, "bos_token_id")))
		rc = json_int(mo, "bos_token_id", 0, c->vocab - 1, file, &c->bos, d);
	const cJSON *eos = cJSON_GetObjectItemCaseSensitive(mo, "eos_token_id");
	if (rc == WL_OK && cJSON_IsArray(eos))         /* several: the first (e.g. Qwen2's <|im_end|>) */
		eos = cJSON_GetArrayItem(eos, 0);
	if (rc == WL_OK && cJSON_IsNumber(eos)) {
		if (eos->valuedouble < 0 || eos->valuedouble >= (double)c->vocab || eos->valuedouble != floor(eos->valuedouble))
			rc = diag_fail(d, "%s: 'model.eos_token_id' %g is not an id below vocab_size %lld", file,
			               eos->valuedouble, (long long)c->vocab);
		else
			c->eos = (int64_t)eos->valuedouble;
	}
	if (rc == WL_OK && (c->heads % c->kv_heads || c->head_dim < 1))
		rc = diag_fail(d, "%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld", file,
		               (long long)c->heads, (long long)c->kv_heads);
	const cJSON *fn = cJSON_GetObjectItemCaseSensitive(de, "filename");
	io->file = "model.onnx";
	if (rc == WL_OK && fn) {
		if (!cJSON_IsString(fn) || !fn->valuestring[0] || fn->valuestring[0] == '/' || strstr(fn->valuestring, ".."))
			rc = diag_fail(d, "%s: 'model.decoder.filename' must be a file name inside the folder", file);
		else
			io->file = fn->valuestring;
	}
	for (int k = 0; rc == WL_OK && k < IO_N; k++) {
		const cJSON *grp = cJSON_GetObjectItemCaseSensitive(de, k < IO_LOGITS ? "inputs" : "outputs");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(grp, io_key[k]);
		io->name[k] = io_canon[k];
		if (!v)
			continue;
		bool per_layer = k == IO_PK || k == IO_PV || k == IO_PRK || k == IO_PRV;
		if (!cJSON_IsString(v) || !v->valuestring[0] || (per_layer ? !one_layer_pattern(v->valuestring)
		                                                           : strchr(v->valuestring, '%') != NULL))
			rc = diag_fail(d, "%s: 'model.decoder.%s.%s' must be a name%s", file, k < IO_LOGITS ? "inputs" : "outputs",
			               io_key[k], per_layer ? " with one %d for the layer (e.g. past_key_values.%d.key)" : "");
		else
			io->name[k] = v->valuestring;
	}
	if (rc != WL_OK) {
		cJSON_Delete(r);
		return WL_ERR;
	}
	*json = r;
	return WL_OK;
}

/* The graph io of a GenAI model renamed to the names the programs use. */
static int rename_genai_io(Module *m, const GenaiIo *io, int64_t layers, const char *model, Diag *d)
{
	Graph *g = m->graph;
	for (int k = 0; k < IO_N; k++) {
		bool per_layer = k == IO_PK || k == IO_PV || k == IO_PRK || k == IO_PRV, input = k < IO_LOGITS;
		for (int64_t i = 0; i < (per_layer ? layers : 1); i++) {
			char from[512], to[512];
			snprintf(from, sizeof from, io->name[k], (int)i);   /* one %d, checked */
			snprintf(to, sizeof to, io_canon[k], (int)i);
			Value *v = graph_find_local(g, from);
			if (!v || (input ? !v->is_input || v->init : !v->is_output)) {
				if (k == IO_POS)
					continue;              /* optional: rotary inside the attention */
				return diag_fail(d, "%s: no graph %s '%s' (genai_config.json: model.decoder.%s.%s)", model,
				                 input ? "input" : "output", from, input ? "inputs" : "outputs", io_key[k]);
			}
			if (strcmp(from, to) != 0 && !value_rename(v, to))
				return diag_fail(d, "%s: cannot rename graph %s '%s' to '%s': the name is taken", model,
				                 input ? "input" : "output", from, to);
		}
	}
	return WL_OK;
}

/* Output `name` of the compiled program, with its shape, or an error. */
int pipeline_check_io(const cJSON *prog, const char *list, const char *name, int rank, const int64_t *shape,
                    const char *model, Diag *d)
{
	const cJSON *io;
	cJSON_ArrayForEach(io, cJSON_GetObjectItemCaseSensitive(prog, list)) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(io, "name");
		if (!cJSON_IsString(nm) || strcmp(nm->valuestring, name) != 0)
			continue;
		const cJSON *sh = cJSON_GetObjectItemCaseSensitive(io, "shape");
		bool ok = cJSON_GetArraySize(sh) == rank;
		for (int i = 0; ok && i < rank; i++)
			ok = cJSON_IsNumber(cJSON_GetArrayItem(sh, i)) &&
			     (shape[i] < 0 || cJSON_GetArrayItem(sh, i)->valuedouble == (double)shape[i]);
		if (!ok)
			return diag_fail(d, "%s: %s '%s' does not have the shape the %s program needs%s", model,
			                 strcmp(list, "inputs") ? "output" : "input", name,
			                 cJSON_GetObjectItemCaseSensitive(prog, "name")->valuestring,
			                 strncmp(name, "present", 7) ? "" : " (no GroupQueryAttention reading the past "
			                 "in place: the attention did not fuse)");
		return WL_OK;
	}
	return diag_fail(d, "%s: the export has no %s '%s' (an Optimum decoder_with_past export has input_ids, "
	                 "attention_mask, position_ids, past_key_values.N.key/value and logits, present.N.key/value)",
	                 model, strcmp(list, "inputs") ? "output" : "input", name);
}

/* The io of a program of T rows (step: 1, prefill: N) against the model
 * config: the static caches in (P = S; P = 0: no cache, decoder_model),
 * the new rows out. */
static int check_step(const cJSON *prog, const HfConfig *c, int64_t S, int64_t T, int64_t P, const char *model,
                      Diag *d)
{
	int64_t one[2] = {1, T}, m[2] = {1, P + T}, hs[3] = {1, T, c->hidden};
	int64_t past[4] = {1, c->kv_heads, S, c->head_dim}, pres[4] = {1, c->kv_heads, T, c->head_dim};
	int rc = pipeline_check_io(prog, "inputs", "input_ids", 2, one, model, d);
	rc = rc ?: pipeline_check_io(prog, "inputs", "position_ids", 2, one, model, d);
	rc = rc ?: pipeline_check_io(prog, "inputs", "attention_mask", 2, m, model, d);
	rc = rc ?: pipeline_check_io(prog, "outputs", "hidden_states", 3, hs, model, d);
	for (int64_t i = 0; rc == WL_OK && i < 2 * c->layers; i++) {
		char nm[64];
		snprintf(nm, sizeof nm, "past_key_values.%lld.%s", (long long)(i / 2), i % 2 ? "value" : "key");
		if (P)
			rc = pipeline_check_io(prog, "inputs", nm, 4, past, model, d);
		snprintf(nm, sizeof nm, "present.%lld.%s", (long long)(i / 2), i % 2 ? "value" : "key");
		rc = rc ?: pipeline_check_io(prog, "outputs", nm, 4, pres, model, d);
	}
	return rc;
}

/* The lm_head program: hidden_states [1,1,D] → logits [1,1,V], or with
 * --argmax-on-device → token_ids [1,1] (int32). */
static int check_head(const cJSON *prog, const HfConfig *c, bool argmax, const char *model, Diag *d)
{
	int64_t hs[3] = {1, 1, c->hidden}, lg[3] = {1, 1, c->vocab};
	int rc = pipeline_check_io(prog, "inputs", "hidden_states", 3, hs, model, d);
	if (argmax)
		return rc ?: pipeline_check_io(prog, "outputs", "token_ids", 2, lg, model, d);
	return rc ?: pipeline_check_io(prog, "outputs", "logits", 3, lg, model, d);
}

/* A program of several rows must attend causally: torch.onnx traces Python
 * conditions on shapes, and an export traced at one token (decoder_with_past)
 * may have dropped the causal part of its mask (transformers 4.36's
 * _prepare_4d_causal_attention_mask for q_len 1). Then every attention fuses
 * with causal = 0 and the graph is wrong for T > 1 rows. */
static bool causal_attention(const Module *m)
{
	int n = 0;
	FOR_NODES(m->graph, x) {
		if (x->op != OP_WlGroupQueryAttention)
			continue;
		if (!attr_int(x, "causal", 0))
			return false;
		n++;
	}
	return n > 0;
}

enum { PROGRAM_NOT_CAUSAL = 2 };

/* model → DIR/name (a module directory), its entry appended to `programs`.
 * With need_causal, a graph whose attentions are not causal is not written:
 * PROGRAM_NOT_CAUSAL. */
static int compile_program(const PipelineArgs *pa, const char *model, const GenaiIo *io, int64_t layers,
                           const DimBinding *dims, int nd, const char *name, const char *dir, bool need_causal,
                           cJSON *programs, Diag *d)
{
	Module *m = NULL;
	if (model_read(model, &m, d) != WL_OK)
		return WL_ERR;
	if (io && rename_genai_io(m, io, layers, model, d) != WL_OK) {
		module_free(m);
		return WL_ERR;
	}
	return pipeline_compile_module(pa, m, model, dims, nd, name, dir, need_causal, programs, d);
}

int pipeline_compile_module(const PipelineArgs *pa, Module *m, const char *model, const DimBinding *dims, int nd,
                            const char *name, const char *dir, bool need_causal, cJSON *programs, Diag *d)
{
	PipelineOptions pipe = *pa->pipe;
	pipe.canon.dims = dims;
	pipe.canon.ndims = nd;
	char sub[4096], tr[4096];
	snprintf(sub, sizeof sub, "%s/%s", dir, name);
	bool qc = !pa->ref && pa->to->kind != TARGET_HOST;
	snprintf(tr, sizeof tr, "%s/%s.tranges", dir, name);
	TargetOptions to = *pa->to;
	to.model_path = model;
	/* The fusion first (assign-fracbits, the last pass, does nothing without
	 * ranges): whether the attention is causal decides which graph this
	 * program is, and so which ranges it needs. */
	int rc = ir_verify(m, d);
	rc = rc ?: pipeline_run(m, &pipe, d);
	if (rc == WL_OK && need_causal && !causal_attention(m)) {
		module_free(m);
		return PROGRAM_NOT_CAUSAL;
	}
	if (rc == WL_OK && qc) {
		PipelineOptions nb = {.passes = "assign-fracbits", .numerics = pipe.numerics};
		nb.numerics.tranges_path = tr;
		rc = pipeline_run(m, &nb, d);
	}
	rc = rc ?: mkdir_p(sub, d);
	if (rc == WL_OK && pa->ref) {
		char path[8192];
		snprintf(path, sizeof path, "%s/model.onnx", sub);
		ExportOptions eo = {0};
		rc = onnx_export_file(m, path, &eo, d);
		Manifest *mf = NULL;
		ManifestInfo info = target_manifest_info(&to);
		info.target_name = "ref";
		rc = rc ?: manifest_new(m, &info, &mf, d);
		rc = rc ?: manifest_add_file(mf, sub, "model.onnx", d);
		if (rc == WL_OK)
			rc = manifest_write(mf, sub, d);
		else
			manifest_free(mf);
	} else if (rc == WL_OK) {
		rc = to.kind == TARGET_HOST ? host_compile(m, &to, sub, d) : chimera_compile(m, &to, sub, d);
	}
	module_free(m);
	cJSON *man = NULL;
	if (rc != WL_OK || manifest_read(sub, &man, d) != WL_OK)
		return WL_ERR;
	cJSON *p = cJSON_Duplicate(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(man, "programs"), 0), 1);
	cJSON_Delete(man);
	cJSON_DeleteItemFromObjectCaseSensitive(p, "name");
	cJSON_AddStringToObject(p, "name", name);
	cJSON_AddStringToObject(p, "dir", name);
	cJSON_AddStringToObject(p, "runner", pa->ref ? "ref" : qc ? "qc" : "host");
	if (qc) {
		char file[4200];
		snprintf(file, sizeof file, "%s.tranges", name);
		cJSON_AddStringToObject(p, "tranges", file);
	}
	cJSON_AddItemToArray(programs, p);
	return WL_OK;
}

static int llm_pipeline(const PipelineArgs *pa, const char *dir, cJSON *root, Diag *d)
{
	HfConfig c;
	cJSON *cfg;
	char step[4096], first[4096], gfile[4096];
	struct stat st;
	snprintf(step, sizeof step, "%s/decoder_with_past_model.onnx", pa->src);
	snprintf(gfile, sizeof gfile, "%s/genai_config.json", pa->src);
	GenaiIo gio;
	bool genai = stat(step, &st) != 0 && stat(gfile, &st) == 0;
	if (genai) {
		if (read_genai_config(pa->src, &c, &cfg, &gio, d) != WL_OK)
			return WL_ERR;
		snprintf(step, sizeof step, "%s/%s", pa->src, gio.file);
		if (stat(step, &st) != 0) {
			diag_fail(d, "%s: no %s (model.decoder.filename of genai_config.json)", pa->src, gio.file);
			cJSON_Delete(cfg);     /* gio.file points into it */
			return WL_ERR;
		}
	} else {
		if (read_hf_config(pa->src, &c, &cfg, d) != WL_OK)
			return WL_ERR;
		if (stat(step, &st) != 0) {
			cJSON_Delete(cfg);
			return diag_fail(d, "%s: no decoder_with_past_model.onnx (an Optimum export: config.json, "
			                 "decoder_model.onnx, decoder_with_past_model.onnx; or an ONNX Runtime GenAI folder: "
			                 "genai_config.json)", pa->src);
		}
	}
	int64_t S = pa->pipe->canon.max_seq ? pa->pipe->canon.max_seq : c.max_pos < 4096 ? c.max_pos : 4096;
	cJSON *model = cJSON_AddObjectToObject(root, "model");
	cJSON_AddStringToObject(model, "dir", pa->src);
	cJSON_AddStringToObject(model, "layout", genai ? "genai" : "optimum");
	cJSON_AddItemToObject(model, "config", cfg);
	cJSON *llm = cJSON_AddObjectToObject(root, "llm");
	int64_t N = pa->prefill_rows ? pa->prefill_rows : S < 16 ? S : 16;
	if (N > S)
		return diag_fail(d, "--prefill-rows %lld exceeds --max-seq %lld", (long long)N, (long long)S);
	int64_t vals[] = {c.layers, c.kv_heads, c.head_dim, c.vocab, S, c.bos, c.eos, N, c.hidden};
	const char *keys[] = {"layers", "kv_heads", "head_dim", "vocab", "max_seq", "bos", "eos", "prefill_rows", "hidden"};
	for (int i = 0; i < 9; i++)
		cJSON_AddNumberToObject(llm, keys[i], (double)vals[i]);
	cJSON *programs = cJSON_AddArrayToObject(root, "programs");
	PipelineOptions pipe = *pa->pipe;
	pipe.canon.max_seq = S;
	pipe.fuse.static_kv_cache = true;
	pipe.fuse.position_input = true;
	pipe.fuse.split_lm_head = "body";
	pipe.fuse.append_argmax = false;
	char kvr[4200];
	snprintf(kvr, sizeof kvr, "%s/%s", dir, KV_RANGES);
	pipe.fuse.kv_cache_ranges = pa->kv_cache_int8 ? kvr : NULL;   /* prefill and step, not lm_head */
	int64_t cache_bytes = 2 * c.layers * c.kv_heads * S * c.head_dim * (pa->kv_cache_int8 ? 1 : 4);
	cJSON *kvc = cJSON_AddObjectToObject(llm, "kv_cache");
	cJSON_AddStringToObject(kvc, "dtype", pa->kv_cache_int8 ? "int8" : "float32");
	cJSON_AddNumberToObject(kvc, "bytes", (double)cache_bytes);
	if (pa->kv_cache_int8) {
		cJSON_AddStringToObject(kvc, "scale", "per-tensor symmetric: max|x|/127 of each present's range, zero point 0");
		cJSON_AddStringToObject(kvc, "ranges", KV_RANGES);
	}
	PipelineArgs a = *pa;
	a.pipe = &pipe;
	const GenaiIo *io = genai ? &gio : NULL;
	int nd = genai ? 4 : 3;
	static const char *names[2] = {"prefill", "step"};
	int64_t rows[2] = {N, 1};
	bool chunks = true;        /* the prefill reads the cache: prompts of any length in chunks */
	for (int i = 0; i < 2; i++) {
		DimBinding dims[4] = {{"batch_size", 1}, {"sequence_length", rows[i]}, {"past_sequence_length", S},
		                      {"total_sequence_length", S + rows[i]}};
		const char *src = step;
		int rc = compile_program(&a, src, io, c.layers, dims, nd, names[i], dir, rows[i] > 1, programs, d);
		if (rc == PROGRAM_NOT_CAUSAL && genai)
			return diag_fail(d, "%s: no causal attention at sequence_length %lld (the prefill program)", step,
			                 (long long)N);
		if (rc == PROGRAM_NOT_CAUSAL) {
			/* decoder_model.onnx (no cache: the first N prompt rows; step does the rest) */
			snprintf(first, sizeof first, "%s/decoder_model.onnx", pa->src);
			if (stat(first, &st) != 0)
				return diag_fail(d, "%s: the attention of decoder_with_past_model.onnx is not causal at "
				                 "sequence_length %lld (traced at one token) and there is no decoder_model.onnx",
				                 pa->src, (long long)N);
			src = first;
			chunks = false;
			rc = compile_program(&a, src, NULL, c.layers, dims, 2, names[i], dir, true, programs, d);
			if (rc == PROGRAM_NOT_CAUSAL)
				return diag_fail(d, "%s: no causal attention at sequence_length %lld (the prefill program)",
				                 first, (long long)N);
		}
		if (rc != WL_OK || check_step(cJSON_GetArrayItem(programs, i), &c, S, rows[i], chunks || i ? S : 0, src,
		                              d) != WL_OK)
			return WL_ERR;
	}
	cJSON_AddBoolToObject(llm, "prefill_reads_cache", chunks);
	cJSON_AddBoolToObject(llm, "argmax_on_device", pa->argmax_on_device);
	pipe.fuse.split_lm_head = "head";
	pipe.fuse.kv_cache_ranges = NULL;
	pipe.fuse.append_argmax = pa->argmax_on_device;   /* fuse-argmax before the split: the head keeps it */
	DimBinding dims[4] = {{"batch_size", 1}, {"sequence_length", 1}, {"past_sequence_length", S},
	                      {"total_sequence_length", S + 1}};
	if (compile_program(&a, step, io, c.layers, dims, nd, "lm_head", dir, false, programs, d) != WL_OK)
		return WL_ERR;
	return check_head(cJSON_GetArrayItem(programs, 2), &c, pa->argmax_on_device, step, d);
}

/* Programs whose weights.bin are the same bytes (an llm pipeline's prefill and
 * step: the same layers, packed the same way) keep one file: the later
 * program's becomes a hard link to the first one's (link to a temporary name,
 * then rename over it, so a failure leaves the copy). Disk and, since every
 * program maps its weights read-only, memory hold those bytes once. A file
 * system without hard links keeps the copies. Returns the bytes saved. */
static uint64_t share_weights(const char *dir, const cJSON *programs)
{
	enum { MAXP = 16 };
	char path[MAXP][4200];
	struct stat st[MAXP];
	int n = 0;
	uint64_t saved = 0;
	const cJSON *p;
	cJSON_ArrayForEach(p, programs) {
		const cJSON *pd = cJSON_GetObjectItemCaseSensitive(p, "dir");
		if (n == MAXP || !cJSON_IsString(pd))
			break;
		snprintf(path[n], sizeof path[n], "%s/%s/weights.bin", dir, pd->valuestring);
		if (stat(path[n], &st[n]) != 0 || !S_ISREG(st[n].st_mode) || st[n].st_size == 0)
			continue;
		for (int j = 0; j < n; j++) {
			if (st[j].st_size != st[n].st_size || st[j].st_ino == st[n].st_ino)
				continue;
			MappedFile a = {0}, b = {0};
			Diag d = {0};
			if (file_map(path[j], &a, &d) != WL_OK)
				continue;
			bool same = file_map(path[n], &b, &d) == WL_OK && b.len == a.len && memcmp(a.addr, b.addr, a.len) == 0;
			if (b.addr)
				file_unmap(&b);
			file_unmap(&a);
			char tmp[4300];
			snprintf(tmp, sizeof tmp, "%s.link", path[n]);
			unlink(tmp);
			if (same && link(path[j], tmp) == 0) {
				if (rename(tmp, path[n]) == 0) {
					saved += (uint64_t)st[n].st_size;
					st[n] = st[j];
					break;
				}
				unlink(tmp);
			}
		}
		n++;
	}
	return saved;
}

/* The programs and pipeline.json of the pipeline into dir (which exists). */
static int build_pipeline(const PipelineArgs *pa, const char *dir, double t0, Diag *d)
{
	cJSON *root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "format", "wlower-pipeline");
	cJSON_AddNumberToObject(root, "version", 1);
	cJSON_AddStringToObject(root, "kind", pa->kind);
	cJSON_AddStringToObject(root, "target", pa->target);
	cJSON_AddStringToObject(root, "wlower_version", WLOWER_VERSION);
	int rc = strcmp(pa->kind, "whisper") == 0 ? whisper_pipeline(pa, dir, root, d) : llm_pipeline(pa, dir, root, d);
	uint64_t shared = rc == WL_OK ? share_weights(dir, cJSON_GetObjectItemCaseSensitive(root, "programs")) : 0;
	if (shared)
		fprintf(stderr, "wlower: programs with the same weights.bin share one file (hard links): %.1f MB saved\n",
		        (double)shared / 1e6);
	cJSON *files = cJSON_AddArrayToObject(root, "files");
	const cJSON *p;
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(root, "programs")) {
		if (rc == WL_OK)
			rc = pipeline_add_module(files, dir, cJSON_GetObjectItemCaseSensitive(p, "dir")->valuestring, d);
		const cJSON *tr = cJSON_GetObjectItemCaseSensitive(p, "tranges");
		if (rc == WL_OK && cJSON_IsString(tr))
			rc = files_add_entry(files, dir, tr->valuestring, d);
	}
	if (rc == WL_OK && pa->kv_cache_int8)
		rc = files_add_entry(files, dir, KV_RANGES, d);
	cJSON_AddNumberToObject(root, "compile_ms", (double)(long)(wl_now_ms() - t0));
	char path[4096];
	snprintf(path, sizeof path, "%s/pipeline.json", dir);
	if (rc == WL_OK)
		rc = json_write_atomic(path, root, d);
	cJSON_Delete(root);
	return rc;
}

/* One prompt of PROMPTS.txt: comma-separated non-negative ids. */
static int parse_prompt(const char *line, const char *file, int ln, int64_t **ids, int *n, Diag *d)
{
	if (!parse_id_list(line, ids, n))
		return diag_fail(d, "%s:%d: expected token ids separated by commas, got '%.60s'", file, ln, line);
	return WL_OK;
}

typedef struct Prompts { int64_t **ids; int *n, *line; int count; } Prompts;

static void prompts_free(Prompts *ps)
{
	for (int i = 0; i < ps->count; i++)
		free(ps->ids[i]);
	free(ps->ids);
	free(ps->n);
	free(ps->line);
}

/* PROMPTS.txt: one prompt a line, blank lines skipped; at least one. */
static int read_prompts(const char *file, Prompts *ps, Diag *d)
{
	memset(ps, 0, sizeof *ps);
	MappedFile f;
	if (file_map(file, &f, d) != WL_OK)
		return WL_ERR;
	const char *s = f.addr, *end = s + f.len;
	int rc = WL_OK, ln = 0, cap = 0;
	while (rc == WL_OK && s && s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t len = (size_t)((nl ? nl : end) - s);
		ln++;
		char *line = strndup(s, len);
		if (!line)
			wl_die(__FILE__, __LINE__, "out of memory");
		if (len && line[len - 1] == '\r')
			line[--len] = 0;
		bool blank = strspn(line, " \t") == len;
		if (!blank && memchr(line, 0, len))
			rc = diag_fail(d, "%s:%d: a NUL byte (not a text file)", file, ln);
		else if (!blank) {
			if (ps->count == cap) {
				cap = cap ? 2 * cap : 16;
				ps->ids = realloc(ps->ids, (size_t)cap * sizeof *ps->ids);
				ps->n = realloc(ps->n, (size_t)cap * sizeof *ps->n);
				ps->line = realloc(ps->line, (size_t)cap * sizeof *ps->line);
				if (!ps->ids || !ps->n || !ps->line)
					wl_die(__FILE__, __LINE__, "out of memory");
			}
			rc = parse_prompt(line, file, ln, &ps->ids[ps->count], &ps->n[ps->count], d);
			if (rc == WL_OK)
				ps->line[ps->count++] = ln;
		}
		free(line);
		s = nl ? nl + 1 : end;
	}
	if (f.addr)
		file_unmap(&f);
	if (rc == WL_OK && ps->count == 0)
		rc = diag_fail(d, "%s: no prompt (one a line: comma-separated token ids)", file);
	if (rc != WL_OK)
		prompts_free(ps);
	return rc;
}

int calib_programs_observe(CalibPrograms *cp, Diag *d)
{
	for (int i = 0; i < cp->n; i++) {
		cp->cal[i] = calib_new(false);
		if (program_observe(cp->prog[i], calib_observe, cp->cal[i], d) != WL_OK)
			return WL_ERR;
	}
	return WL_OK;
}

void calib_programs_free(CalibPrograms *cp)
{
	for (int i = 0; i < cp->n; i++)
		calib_free(cp->cal[i]);
	memset(cp, 0, sizeof *cp);
}

static bool listed(const char *const *keep, const char *name)
{
	for (; *keep; keep++)
		if (strcmp(*keep, name) == 0)
			return true;
	return false;
}

int calib_programs_write(const PipelineArgs *pa, CalibPrograms *cp, const char *dir, const char *const *keep,
                         const char *what, Diag *d)
{
	int rc = WL_OK;
	for (int i = 0; rc == WL_OK && i < cp->n; i++) {
		const char *name = cp->name[i];
		if (!listed(keep, name))
			continue;
		Program *p = cp->prog[i];
		CalibReport cr;
		TRanges *tr = calib_collect(cp->cal[i], program_module(p), name, program_stats(p)->runs, 100, &cr);
		if (cr.n_all_nan)
			rc = diag_fail(d, "%s: program '%s': tensor '%s' is NaN at every position: no range can be built",
			               what, name, cr.all_nan);
		else if (cr.n_inf)
			rc = diag_fail(d, "%s: program '%s': tensors hold infinities (%s): no fixed-point format fits",
			               what, name, cr.inf_names);
		double m = pa->calibrate_margin > 0 ? pa->calibrate_margin : 2;
		for (int k = 0; k < tr->n; k++) {
			tr->r[k].min = fmax(tr->r[k].min * m, -FLT_MAX);
			tr->r[k].max = fmin(tr->r[k].max * m, FLT_MAX);
		}
		char path[4200];
		snprintf(path, sizeof path, "%s/%s.tranges", dir, name);
		rc = rc ?: tranges_write(path, tr, d);
		tranges_free(tr);
	}
	return rc;
}

static const char *const llm_qc_programs[] = {"prefill", "step", "lm_head", NULL};

/* --kv-cache int8 --calibrate: the ranges of the present outputs (the new
 * cache rows) of prefill and step, merged, as recorded (no margin: a row
 * beyond them saturates at +-127 scale, it does not wrap) into
 * dir/kv_cache.tranges. */
static int write_kv_ranges(CalibPrograms *cp, const char *dir, const char *what, Diag *d)
{
	TRanges *kv = tranges_new("kv_cache", 0);
	int rc = WL_OK;
	for (int i = 0; rc == WL_OK && i < cp->n; i++) {
		if (strcmp(cp->name[i], "lm_head") == 0)
			continue;
		CalibReport cr;
		TRanges *tr = calib_collect(cp->cal[i], program_module(cp->prog[i]), cp->name[i],
		                            program_stats(cp->prog[i])->runs, 100, &cr);
		kv->samples += program_stats(cp->prog[i])->runs;
		for (int k = 0; k < tr->n; k++) {
			const char *nm = tr->r[k].name;
			if (strncmp(nm, "present.", 8) != 0)
				continue;
			double lo = tr->r[k].min, hi = tr->r[k].max, a, b;
			if (!isfinite(lo) || !isfinite(hi))
				rc = diag_fail(d, "%s: program '%s': '%s' is not finite: no int8 cache scale", what, cp->name[i], nm);
			if (tranges_get(kv, nm, &a, &b)) {
				lo = fmin(lo, a);
				hi = fmax(hi, b);
			}
			tranges_set(kv, nm, lo, hi);
		}
		tranges_free(tr);
	}
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", dir, KV_RANGES);
	rc = rc ?: tranges_write(path, kv, d);
	tranges_free(kv);
	return rc;
}

/* llm: greedy decoding from every prompt of PROMPTS.txt to max_seq on the
 * ref pipeline in cdir, observed; the ranges into dir. */
static int llm_calibrate(const PipelineArgs *pa, const char *cdir, const char *dir, Diag *d)
{
	if (pa->ncalibrate != 1)
		return diag_fail(d, "--pipeline llm takes one --calibrate PROMPTS.txt (got %d)", pa->ncalibrate);
	const char *file = pa->calibrate[0];
	Prompts ps;
	if (read_prompts(file, &ps, d) != WL_OK)
		return WL_ERR;
	Llm *l = NULL;
	CalibPrograms cp = {0};
	int rc = llm_open(cdir, cmd_default_threads(), &l, d);
	for (int i = 0; rc == WL_OK && i < llm_program_count(l); i++) {
		WL_ASSERT(cp.n < SIM_MAX_PROGRAMS);
		cp.prog[cp.n] = llm_program(l, i, &cp.name[cp.n]);
		cp.n++;
	}
	rc = rc ?: calib_programs_observe(&cp, d);
	bool tty = isatty(2);
	double t0 = wl_now_ms();
	int64_t *out = NULL;
	for (int k = 0; rc == WL_OK && k < ps.count; k++) {
		const LlmInfo *li = llm_info(l);
		int max_new = li->max_seq - ps.n[k];
		if (max_new < 1) {
			rc = diag_fail(d, "%s:%d: the prompt has %d ids; max_seq %d leaves no position to generate",
			               file, ps.line[k], ps.n[k], li->max_seq);
			break;
		}
		if (!(out = realloc(out, (size_t)max_new * sizeof *out)))
			wl_die(__FILE__, __LINE__, "out of memory");
		int nout;
		LlmReport rep;
		rc = llm_generate(l, ps.ids[k], ps.n[k], max_new, -1, NULL, out, &nout, NULL, NULL, &rep, d);
		free(rep.step_ms);
		if (rc != WL_OK) {
			diag_prefix(d, "%s:%d: ", file, ps.line[k]);
			break;
		}
		if (tty)
			fprintf(stderr, "\rcalibrate: prompt %d/%d, %.1f s", k + 1, ps.count, (wl_now_ms() - t0) / 1e3);
	}
	if (tty)
		fputc('\n', stderr);
	free(out);
	if (rc == WL_OK && !pa->ref && pa->to->kind != TARGET_HOST)
		rc = calib_programs_write(pa, &cp, dir, llm_qc_programs, file, d);
	if (rc == WL_OK && pa->kv_cache_int8 && !pa->pipe->fuse.kv_cache_ranges)
		rc = write_kv_ranges(&cp, dir, file, d);
	calib_programs_free(&cp);
	llm_close(l);
	prompts_free(&ps);
	return rc;
}

/* --calibrate: the ref pipeline in dir/.calibrate (the same fusion as the
 * qc programs, so the same tensor names), run by the kind's driver with
 * every program observed; the ranges as dir/<program>.tranges. */
static int calibrate(const PipelineArgs *pa, const char *dir, Diag *d)
{
	char cdir[4096];
	snprintf(cdir, sizeof cdir, "%s/.calibrate", dir);
	TargetOptions to = {.target_name = "ref", .model_path = pa->src, .fuse = pa->pipe->fuse, .t_start_ms = wl_now_ms()};
	PipelineArgs ra = *pa;
	ra.ref = true;
	ra.target = "ref";
	ra.to = &to;
	ra.calibrate = NULL;
	ra.ncalibrate = 0;
	ra.tranges_dir = NULL;
	ra.argmax_on_device = false;     /* the logits observed: the argmax head's ranges are these */
	ra.kv_cache_int8 = false;        /* the float cache observed: its ranges give the int8 scales */
	PipelineOptions fp = *pa->pipe;
	fp.fuse.kv_cache_ranges = NULL;
	ra.pipe = &fp;
	ra.lmq8 = NULL;                  /* the float pipeline is the one observed */
	int rc = mkdir_p(cdir, d);
	rc = rc ?: build_pipeline(&ra, cdir, wl_now_ms(), d);
	if (rc == WL_OK)
		rc = strcmp(pa->kind, "whisper") == 0 ? whisper_calibrate(pa, cdir, dir, d) : llm_calibrate(pa, cdir, dir, d);
	remove_tree(cdir);
	return rc;
}

/* --tranges DIR: DIR/<program>.tranges read (checked) and written into dir. */
static int copy_tranges(const PipelineArgs *pa, const char *dir, Diag *d)
{
	const char *const *programs = strcmp(pa->kind, "whisper") == 0 ? whisper_qc_programs : llm_qc_programs;
	for (size_t i = 0; programs[i]; i++) {
		char src[4200], dst[4200];
		snprintf(src, sizeof src, "%s/%s.tranges", pa->tranges_dir, programs[i]);
		snprintf(dst, sizeof dst, "%s/%s.tranges", dir, programs[i]);
		TRanges *tr;
		if (tranges_read(src, &tr, d) != WL_OK)
			return WL_ERR;
		int rc = tranges_write(dst, tr, d);
		tranges_free(tr);
		if (rc != WL_OK)
			return WL_ERR;
	}
	return WL_OK;
}

/* --kv-cache-ranges FILE: read (checked) and written as dir/kv_cache.tranges. */
static int copy_kv_ranges(const char *file, const char *dir, Diag *d)
{
	char dst[4200];
	snprintf(dst, sizeof dst, "%s/%s", dir, KV_RANGES);
	TRanges *tr;
	if (tranges_read(file, &tr, d) != WL_OK)
		return WL_ERR;
	int rc = tranges_write(dst, tr, d);
	tranges_free(tr);
	return rc;
}

int cmd_compile_pipeline(const PipelineArgs *pa)
{
	Diag d = {0};
	bool whisper = strcmp(pa->kind, "whisper") == 0;
	if (strcmp(pa->kind, "llm") != 0 && !whisper)
		return cmd_usage(NULL, "--pipeline: unknown kind '%s' (llm, whisper)", pa->kind);
	bool qc = !pa->ref && pa->to->kind != TARGET_HOST;
	if (pa->lmq8 && !whisper)
		return cmd_usage(NULL, "%s", "--precision fp32dec-lmq8 goes with --pipeline whisper");
	if (pa->lmq8 && !pa->ncalibrate)
		return cmd_usage(NULL, "--precision fp32dec-lmq8 needs --calibrate AUDIO (repeatable: the clips whose LM-head "
		                 "inputs set the int8 input scale)%s", qc ? "; --tranges alone does not calibrate it" : "");
	if (qc && !pa->ncalibrate == !pa->tranges_dir)
		return cmd_usage(NULL, "--pipeline %s with --target %s needs --calibrate %s or --tranges DIR (one of "
		                 "them: the ranges of every tensor of every program)", pa->kind, pa->target,
		                 whisper ? "AUDIO" : "PROMPTS.txt");
	if (!whisper && pa->ncalibrate > 1)
		return cmd_usage(NULL, "--pipeline llm takes one --calibrate PROMPTS.txt (%d given)", pa->ncalibrate);
	if (!qc && (pa->tranges_dir || (pa->ncalibrate && !pa->kv_cache_int8 && !pa->lmq8)))
		return cmd_usage(NULL, "%s", "--calibrate and --tranges are for the qc-* targets (ref and host run float; "
		                 "--calibrate also gives the --kv-cache int8 scales and the fp32dec-lmq8 LM-head scale)");
	double t0 = wl_now_ms();
	char *tmp = NULL;
	if (outdir_begin(pa->out, &tmp, &d) != WL_OK)
		return cmd_error(NULL, &d);
	int rc = pa->lmq8 ? whisper_lmq8_precheck(pa, &d) : WL_OK;
	if (rc == WL_OK && pa->kv_cache_int8 && pa->pipe->fuse.kv_cache_ranges)
		rc = copy_kv_ranges(pa->pipe->fuse.kv_cache_ranges, tmp, &d);
	if (rc == WL_OK && pa->ncalibrate)
		rc = calibrate(pa, tmp, &d);
	else if (rc == WL_OK && pa->tranges_dir)
		rc = copy_tranges(pa, tmp, &d);
	rc = rc ?: build_pipeline(pa, tmp, t0, &d);
	if (rc == WL_OK)
		rc = outdir_commit(tmp, pa->out, pipeline_dir_replaceable, &d);
	if (rc != WL_OK)
		outdir_abort(tmp);
	free(tmp);
	if (rc != WL_OK)
		return cmd_error(NULL, &d);
	fprintf(stderr, "wlower: compiled %s as %s %s pipeline for %s in %.0f ms -> %s\n", pa->src, whisper ? "a" : "an", pa->kind,
	        pa->target, wl_now_ms() - t0, pa->out);
	return 0;
}
