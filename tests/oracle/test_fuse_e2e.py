#!/usr/bin/python3
"""test_fuse_e2e.py — the fusion pipeline end to end on small generated graphs.

    test_fuse_e2e.py WLOWER WORKDIR [--require CHECKS] [--only SUBSTR] [--threads N] [--stop-after PASS]

Graphs (seeded, small): whisper tiny (--layers 1 --frames 200 --vocab 1000) at
opset 14 and 17 and scale styles q and qk (encoder_model, decoder_prefill,
decoder_with_past), Qwen2 small (1 layer, hidden 256, 4/2 heads; prefill and
single_token), each float and 4-bit (`wlower quantize --nbits 4 --block-size 32`);
Optimum-style dynamic exports (`--dynamic`: Shape/Gather/Concat chains, input dims fixed
static) of whisper tiny (opset 17, q) and Qwen2 small (prefill with attention_mask:
causal + padding mask); and a BERT-style block of com.microsoft Attention (packed QKV,
unidirectional) + SkipLayerNormalization, as onnxruntime's transformers optimizer writes
it (contrib-attention: built here with onnx.helper); and the real stories260K (llama2.c
checkpoint, 5 layers, GQA 8/4 heads) converted by examples/models/llama2c.py to an Optimum
export with symbolic dims (decoder_model: prompt of 8 with its presents; decoder_with_past_model:
one token after 7), RoPE computed at run time and from a table, the three mask forms
(transformers' expanded + causal; additive; Where), compiled with --dim and --max-seq, inputs:
ids, a mask of ones, positions P..P+S-1, seeded past K/V.

For each: `wlower M --stop-after=fuse --emit onnx -o F.onnx`, the op histogram of
F (always printed), then the checks
  no-MatMul, no-MatMulNBits (com.microsoft), no-Softmax, no-Erf, no-Conv
                      no such node remains
  WhisperAttention    1 per attention (encoder: 1 per layer; decoders: 2 per layer)
  ConvStem            1 in the encoder
  GroupQueryAttention 1 per Qwen2 layer
  support             every op left in F has a row in the support matrix
                      (`wlower --list-ops`) of the reference executor, the
                      chimera targets and the host target
  psnr                `wlower run F` vs ONNX Runtime on the original graph:
                      PSNR >= 100 dB on every output, equal tokens for logits
A check that is not in --require (comma list of the names above; default: all)
is reported as "(not required)" and does not fail: the list in tests/meson.build
names what the implemented passes achieve.

Ends with "fuse-e2e: N passed, M failed"; exit 1 on any required failure.
"""

import argparse
import collections
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_oracle as ro  # noqa: E402  (make_inputs, sh, brief)

ALL_CHECKS = ["no-MatMul", "no-MatMulNBits", "no-Softmax", "no-Erf", "no-Conv",
              "WhisperAttention", "ConvStem", "GroupQueryAttention", "support", "psnr"]
FORBIDDEN = {"no-MatMul": ("", "MatMul"), "no-MatMulNBits": ("com.microsoft", "MatMulNBits"),
             "no-Softmax": ("", "Softmax"), "no-Erf": ("", "Erf"), "no-Conv": ("", "Conv")}


def histogram(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    h = collections.Counter()
    for n in m.graph.node:
        dom = n.domain if n.domain not in ("", "ai.onnx") else ""
        h[(dom, n.op_type)] += 1
    return h


def support_matrix(wlower):
    """{(domain, op): (interp, chimera, host)} from `wlower --list-ops`."""
    r = subprocess.run([wlower, "--list-ops"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("wlower --list-ops exited %d: %s" % (r.returncode, r.stderr.strip()))
    m = {}
    for line in r.stdout.splitlines()[1:]:
        name, i, c, h = line.split()
        dom, _, op = name.rpartition(".")
        m[(dom, op)] = (i == "yes", c == "yes", h == "yes")
    if len(m) < 50:
        raise SystemExit("wlower --list-ops: %d ops only" % len(m))
    return m


def fmt_hist(h):
    items = sorted(h.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join("%s%s %d" % (d + "." if d else "", op, c) for (d, op), c in items)


class Tally:
    def __init__(self, required):
        self.required = required
        self.passed = 0
        self.failed = []

    def check(self, label, name, ok, detail):
        if ok:
            self.passed += 1
            print("  ok   %-20s %s" % (name, detail), flush=True)
        elif name in self.required:
            self.failed.append("%s: %s" % (label, name))
            print("  FAIL %-20s %s" % (name, detail), flush=True)
        else:
            print("  --   %-20s %s (not required)" % (name, detail), flush=True)


def expected_counts(graph, layers):
    """(op, count) the fused graph must hold."""
    if graph == "encoder_model":
        return [("WhisperAttention", layers), ("ConvStem", 1)]
    if graph.startswith("decoder") and not graph.endswith("_model"):
        return [("WhisperAttention", 2 * layers)]
    if graph in ("prefill", "single_token"):
        return [("GroupQueryAttention", layers)]
    if graph in ("decoder_model", "decoder_with_past_model"):   # llama2c: 5 layers
        return [("GroupQueryAttention", LLAMA2C_LAYERS)]
    if graph == "contrib":
        return [("WhisperAttention", layers)]
    return []


def one_graph(args, tally, label, model, graph, layers, feeds, work, extra=()):
    print("%s:" % label, flush=True)
    os.makedirs(work, exist_ok=True)
    fused = os.path.join(work, "fused.onnx")
    r, t = ro.sh([args.wlower, model, "--stop-after=" + args.stop_after, "--emit", "onnx", "-o", fused] + list(extra))
    if r.returncode != 0:
        tally.failed.append("%s: compile" % label)
        print("  FAIL compile: wlower exited %d: %s" % (r.returncode, ro.brief(r.stderr)), flush=True)
        return
    before, after = histogram(model), histogram(fused)
    print("  nodes %d -> %d (%.1f s)" % (sum(before.values()), sum(after.values()), t))
    print("  before: %s" % fmt_hist(before))
    print("  after:  %s" % fmt_hist(after), flush=True)
    for name, (dom, op) in FORBIDDEN.items():
        k = after.get((dom, op), 0)
        tally.check(label, name, k == 0, "%d left" % k)
    for op, want in expected_counts(graph, layers):
        k = after.get(("ai.wlower", op), 0)
        tally.check(label, op, k == want, "%d (want %d)" % (k, want))
    lacking = []
    for (dom, op) in sorted(after):
        rows = args.support.get((dom, op), (False, False, False))
        miss = [t for t, ok in zip(("interp", "chimera", "host"), rows) if not ok]
        if miss:
            lacking.append("%s%s (%s)" % (dom + "." if dom else "", op, "/".join(miss)))
    tally.check(label, "support", not lacking, "no row: " + ", ".join(lacking) if lacking
                else "every op has interp, chimera and host rows")
    wdir, odir = os.path.join(work, "wlower"), os.path.join(work, "ort")
    for d in (wdir, odir):
        subprocess.run(["rm", "-rf", d])
    cmd = [args.wlower, "run", fused, "--output-dir", wdir, "--threads", str(args.threads)]
    for f in feeds:
        cmd += ["--input", f]
    r, _ = ro.sh(cmd)
    if r.returncode != 0:
        tally.check(label, "psnr", False, "wlower run exited %d: %s" % (r.returncode, ro.brief(r.stderr)))
        return
    r, _ = ro.sh(["node", os.path.join(HERE, "ort_run.js"), model, odir, "--threads", str(args.threads)] + feeds)
    if r.returncode != 0:
        tally.check(label, "psnr", False, "ort_run.js exited %d: %s" % (r.returncode, ro.brief(r.stderr)))
        return
    r, _ = ro.sh([ro.PY, os.path.join(HERE, "compare.py"), odir, wdir, "--psnr", "100", "--label", "   "])
    sys.stdout.write(r.stdout)
    tally.check(label, "psnr", r.returncode == 0, "vs ONNX Runtime on the original (>= 100 dB, tokens)")


def contrib_graph(outdir, layers=1, S=8, D=64, H=4, seed=7):
    """A small ORT-fused transformer block: per layer
    a = com.microsoft.Attention <num_heads, unidirectional = 1> (x, W [D,3D], b [3D]);
    x = com.microsoft.SkipLayerNormalization (a, x, gamma, beta) (then a Gelu MLP with its own
    SkipLayerNormalization); writes contrib.onnx and ref/contrib/hidden_states.npy."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    g = np.random.default_rng(seed)
    inits, nodes = [], []

    def w(name, shape, std):
        inits.append(numpy_helper.from_array((g.standard_normal(shape) * std).astype(np.float32), name))
        return name
    x = "hidden_states"
    for i in range(layers):
        p = "/layers.%d" % i
        nodes.append(helper.make_node("Attention", [x, w(p + ".qkv.weight", (D, 3 * D), 2 * D ** -0.5),
                                                    w(p + ".qkv.bias", (3 * D,), 0.02)], [p + "/attn_out"],
                                      name=p + "/attention/Attention", domain="com.microsoft", num_heads=H,
                                      unidirectional=1))
        nodes.append(helper.make_node("MatMul", [p + "/attn_out", w(p + ".o.weight", (D, D), D ** -0.5)],
                                      [p + "/o_out"], name=p + "/attention/o_proj/MatMul"))
        nodes.append(helper.make_node("SkipLayerNormalization", [p + "/o_out", x, w(p + ".ln1.gamma", (D,), 0.05),
                                                                 w(p + ".ln1.beta", (D,), 0.02),
                                                                 w(p + ".o.bias", (D,), 0.02)],
                                      [p + "/ln1_out", "", "", p + "/res1"], name=p + "/ln1/SkipLayerNorm",
                                      domain="com.microsoft", epsilon=1e-5))
        nodes.append(helper.make_node("MatMul", [p + "/ln1_out", w(p + ".fc1.weight", (D, 2 * D), D ** -0.5)],
                                      [p + "/fc1_out"], name=p + "/mlp/fc1/MatMul"))
        nodes.append(helper.make_node("BiasGelu", [p + "/fc1_out", w(p + ".fc1.bias", (2 * D,), 0.02)],
                                      [p + "/gelu_out"], name=p + "/mlp/BiasGelu", domain="com.microsoft"))
        nodes.append(helper.make_node("MatMul", [p + "/gelu_out", w(p + ".fc2.weight", (2 * D, D), (2 * D) ** -0.5)],
                                      [p + "/fc2_out"], name=p + "/mlp/fc2/MatMul"))
        out = "output_hidden_states" if i == layers - 1 else p + "/out"
        nodes.append(helper.make_node("SkipLayerNormalization", [p + "/fc2_out", p + "/res1",
                                                                 w(p + ".ln2.gamma", (D,), 0.05),
                                                                 w(p + ".ln2.beta", (D,), 0.02)],
                                      [out], name=p + "/ln2/SkipLayerNorm", domain="com.microsoft", epsilon=1e-5))
        x = out
    graph = helper.make_graph(nodes, "contrib", [helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT,
                                                                              [1, S, D])],
                              [helper.make_tensor_value_info("output_hidden_states", TensorProto.FLOAT, [1, S, D])],
                              inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    os.makedirs(os.path.join(outdir, "ref", "contrib"), exist_ok=True)
    onnx.save(m, os.path.join(outdir, "contrib.onnx"))
    np.save(os.path.join(outdir, "ref", "contrib", "hidden_states.npy"),
            g.standard_normal((1, S, D)).astype(np.float32))


LLAMA2C_LAYERS = 5
LLAMA2C_CKPT = os.path.join(os.path.dirname(ro.ROOT), "shared", "data", "llama2c",
                            "stories260K.bin")
# graph -> (--dim values, prompt rows S, past rows P)
LLAMA2C_SHAPES = {"decoder_model": ({"batch_size": 1, "sequence_length": 8}, 8, 0),
                  "decoder_with_past_model": ({"batch_size": 1, "sequence_length": 1,
                                               "past_sequence_length": 7}, 1, 7)}


def llama_inputs(graph, out_dir, vocab=512, kv_heads=4, head_dim=8):
    """Feeds and compile options for a llama2c export graph (see LLAMA2C_SHAPES)."""
    import numpy as np
    dims, S, P = LLAMA2C_SHAPES[graph]
    os.makedirs(out_dir, exist_ok=True)
    g = np.random.default_rng(260)
    arrays = {"input_ids": g.integers(0, vocab, size=(1, S)).astype(np.int64),
              "attention_mask": np.ones((1, P + S), dtype=np.int64),
              "position_ids": np.arange(P, P + S, dtype=np.int64)[None]}
    for i in range(LLAMA2C_LAYERS if P else 0):
        for kv in ("key", "value"):
            arrays["past_key_values.%d.%s" % (i, kv)] = g.standard_normal((1, kv_heads, P, head_dim)).astype(np.float32)
    feeds = []
    for name, a in arrays.items():
        f = os.path.join(out_dir, name + ".npy")
        np.save(f, a)
        feeds.append("%s=%s" % (name, f))
    extra = ["--max-seq", "512"]
    for k, v in dims.items():
        extra += ["--dim", "%s=%d" % (k, v)]
    return feeds, extra


def generate(tag, cmd, outdir):
    if os.path.exists(os.path.join(outdir, "done")):
        return True
    if cmd is None:   # built here
        try:
            contrib_graph(outdir)
        except Exception as e:  # noqa: BLE001
            print("FAIL %s: generator: %s" % (tag, e), flush=True)
            return False
        open(os.path.join(outdir, "done"), "w").close()
        return True
    ref = [] if tag.startswith("llama2c") else ["--ref", os.path.join(outdir, "ref")]
    r, t = ro.sh(cmd + ["--out", outdir] + ref)
    if r.returncode != 0:
        print("FAIL %s: generator: %s" % (tag, (r.stdout + r.stderr).strip()[-600:]), flush=True)
        return False
    open(os.path.join(outdir, "done"), "w").close()
    print("%s: generated in %.1f s" % (tag, t), flush=True)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("wlower")
    ap.add_argument("workdir")
    ap.add_argument("--require", default=",".join(ALL_CHECKS),
                    help="comma list of checks that fail the test (default: all)")
    ap.add_argument("--only", default=None, help="only graphs whose label contains this")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--stop-after", default="fuse",
                    help="pass or group to stop after (default fuse; e.g. canonicalize to check those passes alone)")
    args = ap.parse_args()
    args.wlower = os.path.abspath(args.wlower)
    required = {c for c in args.require.split(",") if c}
    unknown = required - set(ALL_CHECKS)
    if unknown:
        ap.error("unknown checks %s (known: %s)" % (sorted(unknown), ",".join(ALL_CHECKS)))
    print("fuse-e2e: required checks: %s" % (",".join(c for c in ALL_CHECKS if c in required) or "none"))
    tally = Tally(required)
    args.support = support_matrix(args.wlower)
    r, _ = ro.sh(["sh", os.path.join(HERE, "install.sh")])
    if r.returncode != 0:
        print("fuse-e2e: the ONNX Runtime oracle could not be installed: %s" % ro.brief(r.stderr + r.stdout))
        print("fuse-e2e: 0 passed, 1 failed")
        return 1
    os.makedirs(args.workdir, exist_ok=True)
    layers = 1
    sets = []
    for opset in (14, 17):
        for style in ("q", "qk"):
            tag = "whisper-tiny-op%d-%s" % (opset, style)
            sets.append((tag, [ro.PY, os.path.join(ro.MODELS, "whisper.py"), "--size", "tiny",
                               "--layers", str(layers), "--frames", "200", "--vocab", "1000",
                               "--opset", str(opset), "--scale-style", style]))
    sets.append(("qwen2-small", [ro.PY, os.path.join(ro.MODELS, "qwen2.py"), "--layers", str(layers),
                                 "--hidden", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "512",
                                 "--vocab", "1000"]))
    # Optimum-style dynamic exports, input dims fixed static (one opset/style: the chains are the same)
    sets.append(("whisper-tiny-op17-q-dynamic", [ro.PY, os.path.join(ro.MODELS, "whisper.py"), "--size", "tiny",
                                                 "--layers", str(layers), "--frames", "200", "--vocab", "1000",
                                                 "--opset", "17", "--scale-style", "q", "--dynamic"]))
    sets.append(("qwen2-small-dynamic", [ro.PY, os.path.join(ro.MODELS, "qwen2.py"), "--layers", str(layers),
                                         "--hidden", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "512",
                                         "--vocab", "1000", "--max-pos", "64", "--dynamic", "--prefill-mask"]))
    sets.append(("contrib-attention", None))
    for rope in ("runtime", "cache"):
        sets.append(("llama2c-stories260K-%s-rope" % rope,
                     [ro.PY, os.path.join(ro.MODELS, "llama2c.py"), LLAMA2C_CKPT, "--rope", rope]))
    for mask in ("additive", "where"):   # the other mask forms, float only
        sets.append(("llama2c-stories260K-%s-mask" % mask,
                     [ro.PY, os.path.join(ro.MODELS, "llama2c.py"), LLAMA2C_CKPT, "--mask", mask]))
    gen_failed = 0
    for tag, cmd in sets:
        graphs = ("contrib",) if cmd is None else ("encoder_model", "decoder_prefill", "decoder_with_past",
                                                   "prefill", "single_token", "decoder_model",
                                                   "decoder_with_past_model")
        if args.only and not any(args.only in "%s/%s" % (tag, g) for g in graphs):
            continue
        outdir = os.path.join(args.workdir, tag)
        if not generate(tag, cmd, outdir):
            gen_failed += 1
            continue
        for model in sorted(f for f in os.listdir(outdir) if f.endswith(".onnx") and ".nbits" not in f):
            g = model[:-5]
            path = os.path.join(outdir, model)
            ref = os.path.join(outdir, "ref", g)
            extra = []
            if tag.startswith("llama2c"):
                feeds, extra = llama_inputs(g, os.path.join(outdir, "inputs", g))
            else:
                feeds = ro.make_inputs(path, ref if os.path.isdir(ref) else None, os.path.join(outdir, "inputs", g))
            for q in (False, True):
                if q and tag.endswith("-mask"):
                    continue
                label = "%s/%s%s" % (tag, g, "+nbits" if q else "")
                if args.only and args.only not in label:
                    continue
                m = path
                if q:
                    m = os.path.join(outdir, g + ".nbits.onnx")
                    if not os.path.exists(m):
                        r, _ = ro.sh([args.wlower, "quantize", path, "-o", m, "--nbits", "4", "--block-size", "32"])
                        if r.returncode != 0:
                            tally.failed.append("%s: quantize" % label)
                            print("FAIL %s: wlower quantize: %s" % (label, ro.brief(r.stderr)), flush=True)
                            continue
                one_graph(args, tally, label, m, g, layers, feeds, os.path.join(outdir, "run", label.split("/")[1]),
                          extra)
    failed = len(tally.failed) + gen_failed
    if tally.failed:
        print("failed checks:")
        for f in tally.failed:
            print("  " + f)
    print("fuse-e2e: %d passed, %d failed" % (tally.passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
