#!/usr/bin/python3
"""run_oracle.py — `wlower run` against ONNX Runtime on generated models.

    run_oracle.py WLOWER WORKDIR [--full | --light] [--only SUBSTR] [--threads N] [--no-quantize]

Models (examples/models generators, run with /usr/bin/python3, seeded):
  whisper tiny  opset 14 and 17 x attention scale style q and qk, and whisper
                base (opset 17, q): encoder_model, decoder_prefill, decoder_with_past;
                small variants (1 layer, 200 frames, vocab 1000) unless --full
                (4/6 layers, 3000 frames, vocab 51865)
  qwen2         prefill and single-token graphs (when examples/models/qwen2.py exists):
                small (2 layers, hidden 384, 6/2 heads, vocab 1000) unless --full
                (the Qwen2-1.5B shapes, 1 layer, the 151936-wide LM head)
  ops           a graph built here with onnx.helper (Conv, LayerNorm, Softmax, Gather,
                Where/Trilu masks, Split, Expand, ... ) for ops the exports above miss
and, for each, its MatMulNBits variant made by `wlower quantize` (4 bits, block 32).

For each graph: inputs are the generator's seeded inputs (--ref), else seeded
random ones; `wlower run` and tests/oracle/ort_run.js run it on the same inputs;
tests/oracle/compare.py gates every output at PSNR >= 100 dB and equal argmax
tokens for logits outputs. Then tests/oracle/quantize_check.py checks that
`wlower quantize` writes onnxruntime's bytes and that ONNX Runtime runs the
result within 1e-5 of the dequantized float graph (the built-in graph, and a
whisper decoder graph).

Ends with "oracle: N passed, M failed"; exit 1 on any failure.
"""

import argparse
import glob
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODELS = os.path.join(ROOT, "examples", "models")
PY = "/usr/bin/python3"
PSNR_MIN = 100.0


class Tally:
    def __init__(self):
        self.passed = 0
        self.failed = []

    def ok(self, what):
        self.passed += 1

    def fail(self, what, why):
        self.failed.append(what)
        print("FAIL %s: %s" % (what, why), flush=True)


def brief(stderr):
    """The telling part of a failed command's stderr: its first error-looking
    line (a sanitizer report starts with one) and its last line."""
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    if not lines:
        return "(no message)"
    first = next((l for l in lines if "error" in l.lower()), lines[0])
    return first.strip()[:300] + ("" if first == lines[-1] else " ... " + lines[-1].strip()[:300])


def sh(cmd, timeout=3600, **kw):
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    return r, time.time() - t


def graph_inputs(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    out = []
    for v in m.graph.input:
        if v.name in inits:
            continue
        tt = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        out.append((v.name, tt.elem_type, dims))
    return out


def make_inputs(path, ref_dir, out_dir):
    """NAME=FILE.npy for every graph input: the generator's seeded input when there
    is one, else seeded random data (int inputs: small non-negative ids)."""
    from onnx import TensorProto
    os.makedirs(out_dir, exist_ok=True)
    g = np.random.default_rng(1234)
    feeds = []
    for name, et, dims in graph_inputs(path):
        f = os.path.join(ref_dir, name + ".npy") if ref_dir else None
        if not f or not os.path.exists(f):
            f = os.path.join(out_dir, name.replace("/", "_") + ".npy")
            if et == TensorProto.FLOAT:
                a = g.standard_normal(dims).astype(np.float32)
            elif et == TensorProto.FLOAT16:
                a = g.standard_normal(dims).astype(np.float16)
            elif et in (TensorProto.INT64, TensorProto.INT32):
                a = g.integers(0, 100, size=dims).astype(np.int64 if et == TensorProto.INT64 else np.int32)
            elif et == TensorProto.BOOL:
                a = np.ones(dims, dtype=bool)
            else:
                raise SystemExit("%s: input '%s' has element type %d: no input generator" % (path, name, et))
            np.save(f, a)
        feeds.append("%s=%s" % (name, f))
    return feeds


def compare_model(args, tally, label, model, feeds, work):
    wdir = os.path.join(work, "wlower")
    odir = os.path.join(work, "ort")
    for d in (wdir, odir):
        subprocess.run(["rm", "-rf", d])
    cmd = [args.wlower, "run", model, "--output-dir", wdir, "--threads", str(args.threads)]
    for f in feeds:
        cmd += ["--input", f]
    r, tw = sh(cmd)
    if r.returncode != 0:
        tally.fail(label, "wlower run exited %d: %s" % (r.returncode, brief(r.stderr)))
        return
    r, to = sh(["node", os.path.join(HERE, "ort_run.js"), model, odir, "--threads", str(args.threads)] + feeds)
    if r.returncode != 0:
        tally.fail(label, "ort_run.js exited %d: %s" % (r.returncode, brief(r.stderr)))
        return
    r, _ = sh([PY, os.path.join(HERE, "compare.py"), odir, wdir, "--psnr", str(PSNR_MIN), "--label", label])
    sys.stdout.write(r.stdout)
    print("  (%s: wlower run %.1f s, ort %.1f s)" % (label, tw, to), flush=True)
    if r.returncode != 0:
        tally.fail(label, "below the gate (PSNR >= %g dB, tokens equal)" % PSNR_MIN)
    else:
        tally.ok(label)


def quantized(args, tally, label, model, work):
    q = os.path.join(work, os.path.basename(model)[:-5] + ".nbits.onnx")
    r, _ = sh([args.wlower, "quantize", model, "-o", q, "--nbits", "4", "--block-size", "32"])
    if r.returncode != 0:
        tally.fail(label + "+nbits", "wlower quantize exited %d: %s" % (r.returncode, brief(r.stderr)))
        return None
    return q


def check_result(tally, what, r):
    if r.returncode == 0:
        tally.ok(what)
    else:
        tally.fail(what, brief(r.stderr) if r.stderr.strip() else "see above")


def run_generated(args, tally, tag, gen_cmd, outdir):
    """Runs a generator (which writes *.onnx into outdir and seeded inputs into
    outdir/ref/GRAPH/), then checks every graph, float and MatMulNBits."""
    if not os.path.exists(os.path.join(outdir, "done")):
        r, t = sh(gen_cmd + ["--out", outdir, "--ref", os.path.join(outdir, "ref")])
        if r.returncode != 0:
            tally.fail(tag, "generator failed: %s" % (r.stdout + r.stderr).strip()[-800:])
            return
        print("%s: generated in %.1f s" % (tag, t), flush=True)
        open(os.path.join(outdir, "done"), "w").close()
    for model in sorted(glob.glob(os.path.join(outdir, "*.onnx"))):
        if model.endswith(".nbits.onnx"):
            continue
        g = os.path.basename(model)[:-5]
        label = "%s/%s" % (tag, g)
        if args.only and args.only not in label:
            continue
        ref = os.path.join(outdir, "ref", g)
        feeds = make_inputs(model, ref if os.path.isdir(ref) else None, os.path.join(outdir, "inputs", g))
        compare_model(args, tally, label, model, feeds, os.path.join(outdir, "run", g))
        if not args.no_quantize:
            q = quantized(args, tally, label, model, outdir)
            if q:
                compare_model(args, tally, label + "+nbits", q, feeds, os.path.join(outdir, "run", g + "_nbits"))


def ops_model(path):
    """A graph with ops the generated exports may not have, at small shapes."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    g = np.random.default_rng(7)

    def init(name, a):
        return numpy_helper.from_array(np.asarray(a), name)

    T, D, H = 6, 16, 2
    inits = [
        init("conv_w", (g.standard_normal((D, 8, 3)) / np.sqrt(24)).astype(np.float32)),
        init("conv_b", (g.standard_normal(D) * 0.02).astype(np.float32)),
        init("ln_g", (1 + 0.05 * g.standard_normal(D)).astype(np.float32)),
        init("ln_b", (0.02 * g.standard_normal(D)).astype(np.float32)),
        init("wqkv", (g.standard_normal((D, 3 * D)) / np.sqrt(D)).astype(np.float32)),
        init("emb", (g.standard_normal((50, D)) * 0.5).astype(np.float32)),
        init("perm_shape", np.array([1, T, H, D // H], np.int64)),
        init("split", np.array([D, D, D], np.int64)),
        init("scale", np.array(1.0 / np.sqrt(D // H), np.float32)),
        init("ones", np.ones((T, T), np.float32)),
        init("neg", np.array(-1e9, np.float32)),
        init("axes0", np.array([0], np.int64)),
        init("out_shape", np.array([1, T, D], np.int64)),
    ]
    n = helper.make_node
    nodes = [
        # conv stem on [1, 8, 2T] → [1, D, T]
        n("Conv", ["x", "conv_w", "conv_b"], ["c"], pads=[1, 1], strides=[2]),
        n("Relu", ["c"], ["cr"]),
        n("Transpose", ["cr"], ["h0"], perm=[0, 2, 1]),
        # token embedding added
        n("Gather", ["emb", "ids"], ["e"], axis=0),
        n("Add", ["h0", "e"], ["h"]),
        n("LayerNormalization", ["h", "ln_g", "ln_b"], ["hn"], axis=-1, epsilon=1e-5),
        n("MatMul", ["hn", "wqkv"], ["qkv"]),
        n("Split", ["qkv", "split"], ["q", "k", "v"], axis=-1),
        n("Reshape", ["q", "perm_shape"], ["q4"]),
        n("Reshape", ["k", "perm_shape"], ["k4"]),
        n("Reshape", ["v", "perm_shape"], ["v4"]),
        n("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
        n("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        n("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]),
        n("MatMul", ["qt", "kt"], ["s0"]),
        n("Mul", ["s0", "scale"], ["s1"]),
        # causal mask: Trilu + Where
        n("Trilu", ["ones"], ["tri"], upper=0),
        n("Cast", ["tri"], ["trib"], to=TensorProto.BOOL),
        n("Where", ["trib", "s1", "neg"], ["s2"]),
        n("Softmax", ["s2"], ["p"], axis=-1),
        n("MatMul", ["p", "vt"], ["o4"]),
        n("Transpose", ["o4"], ["o3"], perm=[0, 2, 1, 3]),
        n("Reshape", ["o3", "out_shape"], ["o"]),
        n("Erf", ["o"], ["oe"]),
        n("Add", ["o", "oe"], ["y0"]),
        n("ReduceMean", ["y0"], ["mean"], axes=[-1], keepdims=1),
        n("Sub", ["y0", "mean"], ["y1"]),
        n("Tanh", ["y1"], ["y2"]),
        n("Sigmoid", ["y1"], ["y3"]),
        n("Mul", ["y2", "y3"], ["y"]),
        n("ReduceMax", ["y"], ["ymax"], axes=[1], keepdims=0),
        n("ArgMax", ["y"], ["amax"], axis=-1, keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "ops",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 2 * T]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, [1, T])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, T, D]),
         helper.make_tensor_value_info("ymax", TensorProto.FLOAT, [1, D]),
         helper.make_tensor_value_info("amax", TensorProto.INT64, [1, T])],
        inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)
    ref = os.path.join(os.path.dirname(path), "ref", "ops")
    os.makedirs(ref, exist_ok=True)
    np.save(os.path.join(ref, "x.npy"), g.standard_normal((1, 8, 2 * T)).astype(np.float32))
    np.save(os.path.join(ref, "ids.npy"), g.integers(0, 50, size=(1, T)).astype(np.int64))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("wlower")
    ap.add_argument("workdir")
    ap.add_argument("--full", action="store_true", help="full-size graphs (slow)")
    ap.add_argument("--light", action="store_true",
                    help="one whisper variant (tiny, opset 17, q) instead of five (sanitizer builds)")
    ap.add_argument("--only", help="only labels containing this")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-quantize", action="store_true", help="skip the MatMulNBits variants and checks")
    args = ap.parse_args()
    args.wlower = os.path.abspath(args.wlower)
    os.makedirs(args.workdir, exist_ok=True)
    tally = Tally()
    t0 = time.time()

    # ops graph
    ops_dir = os.path.join(args.workdir, "ops")
    os.makedirs(ops_dir, exist_ok=True)
    ops_path = os.path.join(ops_dir, "ops.onnx")
    ops_model(ops_path)
    open(os.path.join(ops_dir, "done"), "w").close()
    run_generated(args, tally, "ops", None, ops_dir)

    # whisper
    small = [] if args.full else ["--layers", "1", "--frames", "200", "--vocab", "1000"]
    variants = [("tiny", 14, "q"), ("tiny", 14, "qk"), ("tiny", 17, "q"), ("tiny", 17, "qk"), ("base", 17, "q")]
    if args.light:
        variants = [("tiny", 17, "q")]
    for size, opset, style in variants:
        tag = "whisper-%s-op%d-%s%s" % (size, opset, style, "" if args.full else "-small")
        cmd = [PY, os.path.join(MODELS, "whisper.py"), "--size", size, "--opset", str(opset),
               "--scale-style", style] + small
        run_generated(args, tally, tag, cmd, os.path.join(args.workdir, tag))

    # qwen2, when its generator exists
    qwen = os.path.join(MODELS, "qwen2.py")
    if os.path.exists(qwen):
        tag = "qwen2" + ("" if args.full else "-small")
        cmd = [PY, qwen] + ([] if args.full else ["--layers", "2", "--hidden", "384", "--heads", "6",
                                                   "--kv-heads", "2", "--ffn", "1024", "--vocab", "1000"])
        run_generated(args, tally, tag, cmd, os.path.join(args.workdir, tag))
    else:
        print("note: examples/models/qwen2.py not there yet: no qwen2 graphs", flush=True)

    # quantize vs ONNX Runtime: bytes and 1e-5
    if not args.no_quantize and (not args.only or "quantize" in args.only):
        qc = os.path.join(HERE, "quantize_check.py")
        r, _ = sh([PY, qc, args.wlower, os.path.join(args.workdir, "quantize")])
        sys.stdout.write(r.stdout)
        check_result(tally, "quantize-check", r)
        dec = sorted(glob.glob(os.path.join(args.workdir, "whisper-tiny-op17-q*", "decoder_prefill.onnx")))
        if dec:
            d = os.path.dirname(dec[0])
            feeds = make_inputs(dec[0], os.path.join(d, "ref", "decoder_prefill"), os.path.join(d, "inputs", "dp"))
            cmd = [PY, qc, args.wlower, os.path.join(args.workdir, "quantize-whisper"), "--model", dec[0],
                   "--block-size", "32"]
            for f in feeds:
                cmd += ["--input", f]
            r, _ = sh(cmd)
            sys.stdout.write(r.stdout)
            check_result(tally, "quantize-check-whisper", r)

    print("oracle: %.0f s" % (time.time() - t0))
    if tally.failed:
        print("failed: " + ", ".join(tally.failed))
    print("oracle: %d passed, %d failed" % (tally.passed, len(tally.failed)))
    return 1 if tally.failed else 0


if __name__ == "__main__":
    sys.exit(main())
