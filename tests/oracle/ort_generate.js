#!/usr/bin/env node
// ort_generate.js — the oracle's own LLM loop: greedy decoding with ONNX
// Runtime on an Optimum export, written independently of wlower's
// runtime/pipelines/llm.c, to check `wlower generate` against.
//
//   node ort_generate.js LLM_DIR --prompt-ids 1,2,3 --max-new-tokens N
//                        [--logits-dir DIR] [--threads N]
//
// LLM_DIR holds config.json, decoder_model.onnx and decoder_with_past_model.onnx
// (symbolic dims). The prompt goes through decoder_model.onnx in one run
// (attention_mask of ones, position_ids 0..n-1); each further token through
// decoder_with_past_model.onnx with the presents of the previous run as the
// past (the cache grows by concatenation, as transformers does).
// Or LLM_DIR is an ONNX Runtime GenAI folder (genai_config.json, no
// decoder_with_past_model.onnx): its one graph (model.decoder.filename) runs
// the prompt with an empty past [1, kv_heads, 0, head_size], then each token
// with the presents as the past, as onnxruntime-genai's greedy search feeds
// it (attention_mask of ones over past + new rows; position_ids only if the
// graph has that input); io names from model.decoder.inputs / outputs. The next id
// is the argmax of the last row of the logits (first index on ties). No stop
// at eos: exactly N ids.
// stdout: the ids, comma-separated. --logits-dir DIR: DIR/step_K.npy, the
// float32 logits [V] that chose id K (K = 0..N-1). stderr: the wall time of the
// prompt run and the mean of the single-token runs (tokens/s).
'use strict';

const fs = require('fs');
const path = require('path');

function die(code, msg) {
	process.stderr.write('ort_generate: ' + msg + '\n');
	process.exit(code);
}

function npyWriteF32(file, arr) {
	let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + arr.length + ",), }";
	const pad = 64 - ((10 + header.length + 1) % 64);
	header += ' '.repeat(pad % 64) + '\n';
	const h = Buffer.alloc(10);
	h.write('\x93NUMPY', 0, 'latin1');
	h[6] = 1;
	h[7] = 0;
	h.writeUInt16LE(header.length, 8);
	const body = Buffer.from(arr.buffer, arr.byteOffset, arr.byteLength);
	fs.writeFileSync(file, Buffer.concat([h, Buffer.from(header, 'latin1'), body]));
}

function argmax(data, off, n) {
	let best = 0;
	for (let i = 1; i < n; i++)
		if (data[off + i] > data[off + best]) best = i;
	return best;
}

async function main() {
	const args = process.argv.slice(2);
	let dir = null, prompt = null, maxNew = 0, logitsDir = null, threads = 0;
	for (let i = 0; i < args.length; i++) {
		const a = args[i];
		if (a === '--prompt-ids') prompt = args[++i].split(',').map((s) => BigInt(s));
		else if (a === '--max-new-tokens') maxNew = parseInt(args[++i], 10);
		else if (a === '--logits-dir') logitsDir = args[++i];
		else if (a === '--threads') threads = parseInt(args[++i], 10);
		else if (!dir && !a.startsWith('-')) dir = a;
		else die(2, 'unexpected argument ' + a);
	}
	if (!dir || !prompt || !(maxNew > 0)) die(2, 'usage: node ort_generate.js LLM_DIR --prompt-ids IDS --max-new-tokens N');
	const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));
	const opts = {graphOptimizationLevel: 'all', executionMode: 'sequential', interOpNumThreads: 1};
	if (threads > 0) opts.intraOpNumThreads = threads;
	const genai = fs.existsSync(path.join(dir, 'genai_config.json')) &&
		!fs.existsSync(path.join(dir, 'decoder_with_past_model.onnx'));
	let L, first, step, io = {
		input_ids: 'input_ids', attention_mask: 'attention_mask', position_ids: 'position_ids',
		past_key_names: 'past_key_values.%d.key', past_value_names: 'past_key_values.%d.value',
		logits: 'logits', present_key_names: 'present.%d.key', present_value_names: 'present.%d.value',
	};
	let emptyPast = null;
	if (genai) {
		const g = JSON.parse(fs.readFileSync(path.join(dir, 'genai_config.json'), 'utf8')).model.decoder;
		L = g.num_hidden_layers;
		Object.assign(io, g.inputs || {}, g.outputs || {});
		first = step = await ort.InferenceSession.create(path.join(dir, g.filename || 'model.onnx'), opts);
		const kv = g.num_key_value_heads || g.num_attention_heads;
		const hd = g.head_size || g.hidden_size / g.num_attention_heads;
		emptyPast = () => new ort.Tensor('float32', new Float32Array(0), [1, kv, 0, hd]);
	} else {
		L = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')).num_hidden_layers;
		first = await ort.InferenceSession.create(path.join(dir, 'decoder_model.onnx'), opts);
		step = await ort.InferenceSession.create(path.join(dir, 'decoder_with_past_model.onnx'), opts);
	}
	const nm = (pat, i) => pat.replace('%d', String(i));
	if (logitsDir) fs.mkdirSync(logitsDir, {recursive: true});
	const ids = [];
	let past = null, pos = 0, feedIds = prompt, promptMs = 0;
	const stepMs = [];
	for (let k = 0; k < maxNew; k++) {
		const n = feedIds.length;
		const feeds = {};
		feeds[io.input_ids] = new ort.Tensor('int64', BigInt64Array.from(feedIds), [1, n]);
		feeds[io.attention_mask] = new ort.Tensor('int64', new BigInt64Array(pos + n).fill(1n), [1, pos + n]);
		if (!genai || first.inputNames.includes(io.position_ids))
			feeds[io.position_ids] = new ort.Tensor('int64', BigInt64Array.from({length: n}, (_, i) => BigInt(pos + i)), [1, n]);
		if (past || genai) for (let i = 0; i < L; i++) {
			feeds[nm(io.past_key_names, i)] = past ? past[nm(io.present_key_names, i)] : emptyPast();
			feeds[nm(io.past_value_names, i)] = past ? past[nm(io.present_value_names, i)] : emptyPast();
		}
		const t0 = process.hrtime.bigint();
		const out = await (past ? step : first).run(feeds);
		const ms = Number(process.hrtime.bigint() - t0) / 1e6;
		if (past) stepMs.push(ms); else promptMs = ms;
		const lg = out[io.logits], V = lg.dims[2];
		const off = (n - 1) * V;
		const id = argmax(lg.data, off, V);
		if (logitsDir) npyWriteF32(path.join(logitsDir, 'step_' + k + '.npy'), lg.data.slice(off, off + V));
		ids.push(id);
		past = out;
		pos += n;
		feedIds = [BigInt(id)];
	}
	process.stdout.write(ids.join(',') + '\n');
	const mean = stepMs.length ? stepMs.reduce((a, b) => a + b, 0) / stepMs.length : 0;
	process.stderr.write('ort_generate: prompt ' + promptMs.toFixed(3) + ' ms; ' + stepMs.length +
		' steps, mean ' + mean.toFixed(3) + ' ms (' + (mean ? (1000 / mean).toFixed(1) : '-') + ' tokens/s)\n');
}

main().catch((e) => die(1, e.message));
