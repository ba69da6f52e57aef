#!/usr/bin/env node
// ort_run.js — run an ONNX model with ONNX Runtime (onnxruntime-node, CPU EP)
// on .npy inputs and write every output as OUTDIR/<output>.npy: the oracle
// that `wlower run` is checked against.
//
//   node ort_run.js MODEL OUTDIR NAME=FILE.npy ... [--threads N] [--reps N]
//                   [--opt-level all|extended|basic|disabled]
//
// Session: graphOptimizationLevel 'all' (default), sequential execution,
// intraOpNumThreads N (default: ONNX Runtime's choice), interOpNumThreads 1.
// --reps N: one warm-up run, then N timed runs; prints "median_ms=X" on stdout.
// Output file names: the output name with every character outside
// [A-Za-z0-9._-] replaced by '_' (and a leading '.' too) — the rule
// `wlower run` uses.
// .npy dtypes: float32, float16, float64, int64, int32, int8, uint8, bool
// (little endian, C order).
// Exit status: 0 success, 1 bad input or ONNX Runtime error, 2 usage.
'use strict';

const fs = require('fs');
const path = require('path');

const USAGE = 'usage: node ort_run.js MODEL OUTDIR NAME=FILE.npy ... [--threads N] [--reps N] ' +
	'[--opt-level all|extended|basic|disabled]';

function die(code, msg) {
	process.stderr.write('ort_run: ' + msg + '\n');
	process.exit(code);
}

// ---------------------------------------------------------------- .npy

// numpy descr → [ORT type, TypedArray constructor]
const NPY_TYPES = {
	'<f4': ['float32', Float32Array],
	'<f2': ['float16', Uint16Array],
	'<f8': ['float64', Float64Array],
	'<i8': ['int64', BigInt64Array],
	'<i4': ['int32', Int32Array],
	'|i1': ['int8', Int8Array],
	'<i1': ['int8', Int8Array],
	'|u1': ['uint8', Uint8Array],
	'<u1': ['uint8', Uint8Array],
	'|b1': ['bool', Uint8Array],
	'<b1': ['bool', Uint8Array],
};
const ORT_TO_DESCR = {
	float32: '<f4', float16: '<f2', float64: '<f8', int64: '<i8', int32: '<i4',
	int8: '|i1', uint8: '|u1', bool: '|b1',
};

function npyRead(file) {
	let buf;
	try {
		buf = fs.readFileSync(file);
	} catch (e) {
		die(1, file + ': ' + e.message);
	}
	const bad = (what) => die(1, file + ': not a valid .npy file (' + what + ')');
	if (buf.length < 10 || buf[0] !== 0x93 || buf.toString('latin1', 1, 6) !== 'NUMPY')
		bad('no \\x93NUMPY magic');
	const major = buf[6];
	let hlen, hstart;
	if (major === 1) {
		hlen = buf.readUInt16LE(8);
		hstart = 10;
	} else if (major === 2 || major === 3) {
		if (buf.length < 12) bad('truncated header');
		hlen = buf.readUInt32LE(8);
		hstart = 12;
	} else {
		bad('version ' + major);
	}
	if (hstart + hlen > buf.length) bad('truncated header');
	const header = buf.toString('latin1', hstart, hstart + hlen);
	const mDescr = /'descr'\s*:\s*'([^']*)'/.exec(header);
	const mFort = /'fortran_order'\s*:\s*(True|False)/.exec(header);
	const mShape = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
	if (!mDescr || !mFort || !mShape) bad('header lacks descr, fortran_order or shape');
	if (mFort[1] === 'True') die(1, file + ': Fortran-order arrays are not supported (save with np.ascontiguousarray)');
	const t = NPY_TYPES[mDescr[1]];
	if (!t) die(1, file + ": unsupported dtype '" + mDescr[1] + "'");
	const dims = mShape[1].split(',').map((s) => s.trim()).filter((s) => s.length > 0).map((s) => {
		if (!/^\d+$/.test(s)) bad('shape ' + mShape[1]);
		return Number(s);
	});
	const numel = dims.reduce((a, b) => a * b, 1);
	const off = hstart + hlen;
	const nbytes = numel * t[1].BYTES_PER_ELEMENT;
	if (buf.length - off < nbytes)
		die(1, file + ': truncated data (' + (buf.length - off) + ' bytes, need ' + nbytes + ')');
	// copy into a fresh, aligned ArrayBuffer
	const ab = buf.buffer.slice(buf.byteOffset + off, buf.byteOffset + off + nbytes);
	return { type: t[0], data: new t[1](ab), dims };
}

function npyBytes(type, dims, data) {
	const descr = ORT_TO_DESCR[type];
	if (!descr) return null;
	const shape = dims.length === 1 ? '(' + dims[0] + ',)' : '(' + dims.join(', ') + ')';
	let h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ', }';
	const total = 10 + h.length + 1;
	h += ' '.repeat((64 - (total % 64)) % 64) + '\n';
	const head = Buffer.alloc(10);
	head[0] = 0x93;
	head.write('NUMPY', 1, 'latin1');
	head[6] = 1;
	head[7] = 0;
	head.writeUInt16LE(h.length, 8);
	const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
	return Buffer.concat([head, Buffer.from(h, 'latin1'), body]);
}

function fileNameFor(output) {
	return output.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\./, '_') + '.npy';
}

function writeAtomic(file, bytes) {
	const tmp = file + '.tmp.' + process.pid;
	try {
		fs.writeFileSync(tmp, bytes);
		fs.renameSync(tmp, file);
	} catch (e) {
		try { fs.unlinkSync(tmp); } catch (e2) { /* nothing left */ }
		die(1, file + ': ' + e.message);
	}
}

// ---------------------------------------------------------------- main

async function main() {
	const argv = process.argv.slice(2);
	if (argv.includes('--help') || argv.includes('-h')) {
		process.stdout.write(USAGE + '\n');
		return 0;
	}
	const pos = [];
	const feeds = [];
	let threads = 0, reps = 0, optLevel = 'all';
	const intArg = (name, v) => {
		if (v === undefined || !/^\d+$/.test(v)) die(2, name + ' needs a non-negative integer\n' + USAGE);
		return Number(v);
	};
	for (let i = 0; i < argv.length; i++) {
		const a = argv[i];
		if (a === '--threads') threads = intArg(a, argv[++i]);
		else if (a === '--reps') reps = intArg(a, argv[++i]);
		else if (a === '--opt-level') {
			optLevel = argv[++i];
			if (!['all', 'extended', 'basic', 'disabled'].includes(optLevel))
				die(2, '--opt-level: all, extended, basic or disabled\n' + USAGE);
		} else if (a.startsWith('-')) die(2, "unknown option '" + a + "'\n" + USAGE);
		else if (pos.length < 2) pos.push(a);
		else {
			const eq = a.indexOf('=');
			if (eq <= 0) die(2, "input '" + a + "': expected NAME=FILE.npy\n" + USAGE);
			feeds.push([a.slice(0, eq), a.slice(eq + 1)]);
		}
	}
	if (pos.length < 2) die(2, USAGE);
	const [model, outdir] = pos;

	let ort;
	try {
		ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));
	} catch (e) {
		die(1, 'onnxruntime-node is not installed (run tests/oracle/install.sh): ' + e.message.split('\n')[0]);
	}

	const opts = {
		executionProviders: ['cpu'],
		graphOptimizationLevel: optLevel,
		executionMode: 'sequential',
		interOpNumThreads: 1,
		logSeverityLevel: 3,
	};
	if (threads > 0) opts.intraOpNumThreads = threads;
	let session;
	try {
		session = await ort.InferenceSession.create(model, opts);
	} catch (e) {
		die(1, model + ': ' + String(e.message || e).split('\n')[0]);
	}

	const inputs = {};
	for (const [name, file] of feeds) {
		if (!session.inputNames.includes(name))
			die(1, file + ": input '" + name + "' is not an input of " + model +
				' (inputs: ' + session.inputNames.join(', ') + ')');
		if (name in inputs) die(2, "input '" + name + "' given twice");
		const t = npyRead(file);
		inputs[name] = new ort.Tensor(t.type, t.data, t.dims);
	}
	for (const name of session.inputNames)
		if (!(name in inputs)) die(1, model + ": input '" + name + "' not given (" + name + '=FILE.npy)');

	const run = async () => {
		try {
			return await session.run(inputs);
		} catch (e) {
			die(1, model + ': ' + String(e.message || e).split('\n')[0]);
		}
	};
	let results = await run();
	if (reps > 0) {
		const times = [];
		for (let r = 0; r < reps; r++) {
			const t0 = process.hrtime.bigint();
			results = await run();
			times.push(Number(process.hrtime.bigint() - t0) / 1e6);
		}
		times.sort((a, b) => a - b);
		const mid = times.length >> 1;
		const median = times.length % 2 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
		process.stdout.write('median_ms=' + median.toFixed(3) + '\n');
	}

	fs.mkdirSync(outdir, { recursive: true });
	for (const name of session.outputNames) {
		const t = results[name];
		const bytes = npyBytes(t.type, t.dims, t.data);
		if (!bytes) die(1, model + ": output '" + name + "': unsupported type " + t.type);
		writeAtomic(path.join(outdir, fileNameFor(name)), bytes);
	}
	await session.release();
	return 0;
}

main().then((rc) => process.exit(rc), (e) => die(1, String(e && e.stack || e)));
