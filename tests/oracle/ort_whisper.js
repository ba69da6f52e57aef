#!/usr/bin/env node
// ort_whisper.js — the oracle's own Whisper loop for one window: ONNX Runtime
// on an Optimum export, written independently of wlower's
// runtime/pipelines/whisper.c, to check `wlower transcribe` against.
//
//   node ort_whisper.js EXPORT_DIR --mel MEL.npy [--language ID] [--task ID]
//        [--no-timestamps] [--max-tokens N] [--logits-dir DIR] [--threads N]
//        [--prev ID,ID,...] [--window W]
//        [--beam-size N [--patience P] [--length-penalty A]]
//
// MEL.npy: float32 [1, M, F] log-mel (what wlower's mel program wrote with
// --dump-logits; its own check is against numpy). encoder_model.onnx gives the
// hidden states; decoder_model.onnx runs the whole prompt
// <|startoftranscript|> <|lang|> <|task|> [<|notimestamps|>] in one run; every
// further token goes through decoder_with_past_model.onnx with the previous
// presents as the past (self-attention cache grown by concatenation, the
// cross K/V taken once from decoder_model's present.N.encoder.*).
// The next id is the argmax of the logits after OpenAI's greedy filters
// (openai-whisper decoding.py): SuppressBlank at the first sampled token
// (" " = 220 and <|endoftext|>), SuppressTokens (the default non-speech list
// and the special tokens), ApplyTimestampRules (no <|notimestamps|>, pairs,
// monotonic, first a timestamp <= 1.00 s, timestamps forced when their total
// probability beats every text token) and no timestamp past the window
// (audio_ctx positions of 0.02 s). Stops at <|endoftext|> or N tokens.
// stdout: the sampled ids before <|endoftext|>, comma-separated.
// stderr: wall times (encoder, prompt run, the single-token runs, total).
// --logits-dir DIR: DIR/step_0_K.npy, the raw float32 logits [V] of the step
// that chose the K-th sampled id (the <|endoftext|> step included; greedy only).
// --prev: the previous text as context, prompt <|startofprev|> IDS... before
// <|startoftranscript|> (openai-whisper's condition_on_previous_text; a later
// window of a long clip). --window W names the logits step_W_K.npy.
//
// --beam-size N: beam search as openai-whisper's BeamSearchDecoder and
// MaximumLikelihoodRanker, in their own shape: N copies of the prompt state;
// per step every beam's filtered log-probs give its N+1 best tokens (ties:
// lower id), candidate sequences go into an insertion-ordered Map keyed by
// the sequence (copies collapse as in the Python dict), are sorted by score
// (stable), and read best first: an <|endoftext|> one is finished, the others
// continue until N are kept; finished ones are collected until
// round(N * patience); then, if fewer than N finished, the live beams by sum
// descending (ties: lower index) with <|endoftext|> appended; the winner has
// the highest sum / length (sum / ((5 + length) / 6)^A with --length-penalty),
// the first on ties. Each beam keeps its own ONNX Runtime presents (a fork
// just reuses the parent's tensors as its past).
'use strict';

const fs = require('fs');
const path = require('path');

function die(code, msg) {
	process.stderr.write('ort_whisper: ' + msg + '\n');
	process.exit(code);
}

function npyRead(file) {
	const b = fs.readFileSync(file);
	if (b.toString('latin1', 1, 6) !== 'NUMPY') die(1, file + ': not a .npy file');
	const hl = b[6] === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
	const ho = b[6] === 1 ? 10 : 12;
	const h = b.toString('latin1', ho, ho + hl);
	if (!/'descr': '<f4'/.test(h) || /'fortran_order': True/.test(h)) die(1, file + ': want float32 C order');
	const shape = h.match(/'shape': \(([^)]*)\)/)[1].split(',').filter((s) => s.trim()).map((s) => parseInt(s, 10));
	const off = ho + hl;
	const data = new Float32Array(b.buffer.slice(b.byteOffset + off, b.byteOffset + b.length));
	return {data, shape};
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

// openai-whisper's default suppress_tokens for the multilingual vocabulary
const NON_SPEECH = [1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92, 93, 359,
	503, 522, 542, 873, 893, 902, 918, 922, 931, 1350, 1853, 1982, 2460, 2627, 3246, 3253, 3268, 3536, 3846, 3961,
	4183, 4667, 6585, 6647, 7273, 9061, 9383, 10428, 10929, 11938, 12033, 12331, 12562, 13793, 14157, 14635, 15265,
	15618, 16553, 16604, 18362, 18956, 20075, 21675, 22520, 26130, 26161, 26435, 28279, 29464, 31650, 32302, 32470,
	36865, 42863, 47425, 49870, 50254];

function logSoftmax(x) {
	const n = x.length, out = new Float64Array(n);
	let m = -Infinity;
	for (let i = 0; i < n; i++) if (x[i] > m) m = x[i];
	let s = 0;
	for (let i = 0; i < n; i++) s += Math.exp(x[i] - m);
	const ls = m + Math.log(s);
	for (let i = 0; i < n; i++) out[i] = x[i] - ls;
	return out;
}

// OpenAI's filters on a copy of the logits (Float64Array), given the sampled ids so far.
function filter(logits, sampled, tok, timestamps, audioCtx) {
	const V = logits.length, x = Float64Array.from(logits);
	const tb = tok.timestampBegin;
	if (sampled.length === 0) { x[220] = -Infinity; x[tok.eot] = -Infinity; }
	for (const t of NON_SPEECH) x[t] = -Infinity;
	for (const t of [tok.translate, tok.transcribe, tok.sot, tok.sotPrev, tok.sotLm, tok.noSpeech]) x[t] = -Infinity;
	if (!timestamps) return x;
	x[tok.noTimestamps] = -Infinity;
	const n = sampled.length;
	const lastTs = n >= 1 && sampled[n - 1] >= tb;
	const penultTs = n < 2 || sampled[n - 2] >= tb;
	if (lastTs) {
		if (penultTs) for (let i = tb; i < V; i++) x[i] = -Infinity;
		else for (let i = 0; i < tok.eot; i++) x[i] = -Infinity;
	}
	const ts = sampled.filter((t) => t >= tb);
	if (ts.length) {
		const last = ts[ts.length - 1];
		const upto = lastTs && !penultTs ? last : last + 1;
		for (let i = tb; i < upto; i++) x[i] = -Infinity;
	}
	for (let i = tb + audioCtx + 1; i < V; i++) x[i] = -Infinity;
	if (n === 0) {
		for (let i = 0; i < tb; i++) x[i] = -Infinity;
		for (let i = tb + 50 + 1; i < V; i++) x[i] = -Infinity;
	}
	const lp = logSoftmax(x);
	let mx = -Infinity;
	for (let i = tb; i < V; i++) if (lp[i] > mx) mx = lp[i];
	let s = 0;
	if (mx > -Infinity) for (let i = tb; i < V; i++) s += Math.exp(lp[i] - mx);
	const tsLp = mx > -Infinity ? mx + Math.log(s) : -Infinity;
	let textMax = -Infinity;
	for (let i = 0; i < tb; i++) if (lp[i] > textMax) textMax = lp[i];
	if (tsLp > textMax) for (let i = 0; i < tb; i++) x[i] = -Infinity;
	return x;
}

// Python's round(): half to even.
function roundHalfEven(x) {
	const f = Math.floor(x), r = x - f;
	if (r > 0.5) return f + 1;
	if (r < 0.5) return f;
	return f % 2 === 0 ? f : f + 1;
}

// The k best (value, index) of lp, by value descending then index ascending.
function topK(lp, k) {
	const best = [];
	for (let i = 0; i < lp.length; i++) {
		if (best.length === k && !(lp[i] > lp[best[k - 1]])) continue;
		if (best.length === k) best.pop();
		let j = best.length;
		best.push(i);
		while (j > 0 && lp[i] > lp[best[j - 1]]) { best[j] = best[j - 1]; j--; }
		best[j] = i;
	}
	return best;
}

async function beamSearch(ort, step, L, first, row0, tok, timestamps, audioCtx, maxTok, N, patience, lengthPenalty, cross) {
	const V = first.logits.dims[2];
	const maxCand = roundHalfEven(N * patience);
	// N identical beams, as openai-whisper repeats the audio N times
	let beams = [];
	for (let j = 0; j < N; j++) beams.push({tokens: [], sum: 0, out: first, row: row0});
	const finished = new Map();                 // sequence key → sum logprob
	let steps = 0;
	for (let i = 0; i < maxTok; i++) {
		const scores = new Map(), sources = new Map();
		for (let j = 0; j < beams.length; j++) {
			const b = beams[j], off = b.row * V;
			const x = filter(b.out.logits.data.slice(off, off + V), b.tokens, tok, timestamps, audioCtx);
			const lp = logSoftmax(x);
			for (const t of topK(lp, N + 1)) {
				const seq = b.tokens.concat([t]);
				scores.set(seq.join(','), b.sum + lp[t]);
				sources.set(seq.join(','), j);
			}
		}
		const order = [...scores.keys()].sort((a, b) => scores.get(b) - scores.get(a) || 0);
		const next = [], newlyFinished = new Map();
		for (const key of order) {
			const seq = key.split(',').map(Number);
			if (seq[seq.length - 1] === tok.eot) {
				newlyFinished.set(key, scores.get(key));
			} else {
				next.push({tokens: seq, sum: scores.get(key), src: sources.get(key)});
				if (next.length === N) break;
			}
		}
		for (const [key, sc] of newlyFinished) {
			if (finished.size >= maxCand) break;
			finished.set(key, sc);
		}
		const completed = finished.size >= maxCand;
		if (completed || i + 1 === maxTok) {
			beams = next;
			break;
		}
		const ran = [];
		for (const nb of next) {
			const parent = beams[nb.src].out;
			const feeds = {input_ids: new ort.Tensor('int64', BigInt64Array.from([BigInt(nb.tokens[nb.tokens.length - 1])]), [1, 1])};
			for (let l = 0; l < L; l++) for (const kv of ['key', 'value']) {
				feeds['past_key_values.' + l + '.decoder.' + kv] = parent['present.' + l + '.decoder.' + kv];
				feeds['past_key_values.' + l + '.encoder.' + kv] = cross[l + kv];
			}
			ran.push({tokens: nb.tokens, sum: nb.sum, out: await step.run(feeds), row: 0});
			steps++;
		}
		beams = ran;
	}
	const ended = finished.size;                // finished by <|endoftext|> itself
	if (finished.size < N) {
		const idx = beams.map((_, j) => j).sort((a, b) => (beams[b].sum - beams[a].sum) || (a - b));
		for (const j of idx) {
			if (finished.size >= N) break;
			finished.set(beams[j].tokens.concat([tok.eot]).join(','), beams[j].sum);
		}
	}
	let best = null, bestScore = -Infinity;
	for (const [key, sum] of finished) {
		const seq = key.split(',').map(Number);
		const len = seq.indexOf(tok.eot) >= 0 ? seq.indexOf(tok.eot) : seq.length;
		const penalty = lengthPenalty === null ? len : Math.pow((5 + len) / 6, lengthPenalty);
		const sc = sum / penalty;
		if (best === null || sc > bestScore) { best = seq.slice(0, len); bestScore = sc; }
	}
	return {ids: best, steps, ended};
}

function argmax(x) {
	let best = 0;
	for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
	return best;
}

async function main() {
	const args = process.argv.slice(2);
	let dir = null, mel = null, lang = 50259, task = 50359, timestamps = true, maxTok = 224, logitsDir = null,
		threads = 0, prev = null, win = 0, beam = 1, patience = 1.0, lengthPenalty = null;
	for (let i = 0; i < args.length; i++) {
		const a = args[i];
		if (a === '--mel') mel = args[++i];
		else if (a === '--language') lang = parseInt(args[++i], 10);
		else if (a === '--task') task = parseInt(args[++i], 10);
		else if (a === '--no-timestamps') timestamps = false;
		else if (a === '--max-tokens') maxTok = parseInt(args[++i], 10);
		else if (a === '--logits-dir') logitsDir = args[++i];
		else if (a === '--threads') threads = parseInt(args[++i], 10);
		else if (a === '--prev') prev = args[++i].split(',').filter((s) => s).map((s) => parseInt(s, 10));
		else if (a === '--window') win = parseInt(args[++i], 10);
		else if (a === '--beam-size') beam = parseInt(args[++i], 10);
		else if (a === '--patience') patience = parseFloat(args[++i]);
		else if (a === '--length-penalty') lengthPenalty = parseFloat(args[++i]);
		else if (!dir && !a.startsWith('-')) dir = a;
		else die(2, 'unexpected argument ' + a);
	}
	if (!dir || !mel) die(2, 'usage: node ort_whisper.js EXPORT_DIR --mel MEL.npy [options]');
	const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));
	const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
	const L = cfg.decoder_layers, V = cfg.vocab_size, tb = V - 1501;
	const tok = {eot: 50257, sot: 50258, translate: tb - 6, transcribe: tb - 5, sotLm: tb - 4, sotPrev: tb - 3,
		noSpeech: tb - 2, noTimestamps: tb - 1, timestampBegin: tb};
	const opts = {graphOptimizationLevel: 'all', executionMode: 'sequential', interOpNumThreads: 1};
	if (threads > 0) opts.intraOpNumThreads = threads;
	const enc = await ort.InferenceSession.create(path.join(dir, 'encoder_model.onnx'), opts);
	const first = await ort.InferenceSession.create(path.join(dir, 'decoder_model.onnx'), opts);
	const step = await ort.InferenceSession.create(path.join(dir, 'decoder_with_past_model.onnx'), opts);
	if (logitsDir) fs.mkdirSync(logitsDir, {recursive: true});
	const m = npyRead(mel);
	const now = () => Number(process.hrtime.bigint()) / 1e6;
	const t0 = now();
	const hid = (await enc.run({input_features: new ort.Tensor('float32', m.data, m.shape)})).last_hidden_state;
	const prompt = (prev ? [tok.sotPrev].concat(prev) : []).concat([tok.sot, lang, task],
		timestamps ? [] : [tok.noTimestamps]);
	if (prompt.some((t) => !Number.isInteger(t) || t < 0 || t >= V)) die(2, '--prev: ids must be integers in [0, ' + V + ')');
	const t1 = now();
	let out = await first.run({
		input_ids: new ort.Tensor('int64', BigInt64Array.from(prompt.map(BigInt)), [1, prompt.length]),
		encoder_hidden_states: hid,
	});
	const cross = {};
	for (let i = 0; i < L; i++) for (const kv of ['key', 'value']) cross[i + kv] = out['present.' + i + '.encoder.' + kv];
	const t2 = now();
	if (beam > 1) {
		const r = await beamSearch(ort, step, L, out, prompt.length - 1, tok, timestamps, cfg.max_source_positions,
			maxTok, beam, patience, lengthPenalty, cross);
		const t3 = now();
		process.stdout.write(r.ids.join(',') + '\n');
		process.stderr.write('ort_whisper: beam ' + beam + ', ' + r.ended + ' finished by <|endoftext|>, ' + r.steps +
			' hypothesis steps ' +
			(t3 - t2).toFixed(1) + ' ms, total ' + (t3 - t0).toFixed(1) + ' ms\n');
		return;
	}
	let self = out, row = prompt.length - 1;
	const sampled = [];
	for (let k = 0; k < maxTok; k++) {
		const lg = self.logits, off = row * V;
		const raw = lg.data.slice(off, off + V);
		if (logitsDir) npyWriteF32(path.join(logitsDir, 'step_' + win + '_' + k + '.npy'), raw);
		const id = argmax(filter(raw, sampled, tok, timestamps, cfg.max_source_positions));
		if (id === tok.eot) break;
		sampled.push(id);
		if (k + 1 === maxTok) break;
		const feeds = {input_ids: new ort.Tensor('int64', BigInt64Array.from([BigInt(id)]), [1, 1])};
		for (let i = 0; i < L; i++) for (const kv of ['key', 'value']) {
			feeds['past_key_values.' + i + '.decoder.' + kv] = self['present.' + i + '.decoder.' + kv];
			feeds['past_key_values.' + i + '.encoder.' + kv] = cross[i + kv];
		}
		self = await step.run(feeds);
		row = 0;
	}
	const t3 = now();
	process.stdout.write(sampled.join(',') + '\n');
	process.stderr.write('ort_whisper: encoder ' + (t1 - t0).toFixed(1) + ' ms, prompt ' + (t2 - t1).toFixed(1) +
		' ms, ' + sampled.length + ' tokens ' + (t3 - t2).toFixed(1) + ' ms, total ' + (t3 - t0).toFixed(1) + ' ms\n');
}

main().catch((e) => die(1, e.message));
