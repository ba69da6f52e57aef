#!/usr/bin/python3
"""qwen2_int8_qc.py — the vendor's Qwen2 int8 PTQ flow (../shared/reference/README.md §2) end to
end: the Qwen2-1.5B-shaped seeded block quantized with the vendor's settings, compiled for
Chimera, simulated, and the vendor's per-run table with the output MSE against ONNX Runtime.

    /usr/bin/python3 bench/qwen2_int8_qc.py [--wlower build/wlower] [--work DIR] [--small]

1. examples/models/qwen2.py (1 layer; default Qwen2-1.5B sizes: hidden 1536, 12 heads, 2 KV heads,
   FFN 8960, vocab 151936; --small: hidden 256, 4 heads, FFN 512, vocab 1000): prefill.onnx
   (hidden_states [1,16,H]) and single_token.onnx with the vendor's int8 KV cache (--int8-kv 0.05:
   past_key_values.0.key_quantized / value_quantized int8 [1,2,15,128] through DequantizeLinear,
   attention_mask [1,16], inputs_embeds [1,1,H] -> logits [1,1,vocab]: one layer + final norm +
   LM head).
2. `wlower quantize --int8` with the vendor's settings: symmetric activations, weights as QDQ
   pairs (--weights-qdq), every RMSNorm node (--exclude-op RMSNorm) and the two residual adds
   (found by structure: Add nodes whose inputs and output have the hidden-state shape) excluded,
   Softmax and Sigmoid float. Prefill: --synthetic 100 (the vendor's 100 synthetic samples).
   Single token: it has int8 and int64 inputs, which synthetic N(0,1) samples cannot fill, so 16
   samples of qwen2.py --samples (the 16th token's embedding, the past K/V of running the layer on
   the first 15, quantized with the graph's scale; mask all ones).
3. Evaluation input, not a calibration sample: prefill a fresh seeded N(0,1) draw (the
   distribution of the synthetic calibration); single token the 17th qwen2.py sample.
   ONNX Runtime (tests/oracle/ort_run.js, graph optimizations off) runs the float graph and the
   QDQ graph on it.
4. `wlower Q.onnx --target qc-n --cores 1 --ocm 16MB` (prefill) and `--target qc-u --cores 1
   --ocm 16MB` (single token), `wlower sim` on the input: the table.
The MSE columns: the simulated output vs ONNX Runtime on the float graph, and the QDQ graph's own
ONNX Runtime output vs the same (what the int8 graph costs before any target). The weight bytes:
the module's weights.bin against the float graph's float32 MatMul weights.
Prints a markdown table for bench/RESULTS.md. Full size needs ~8 GB of RAM and ~3 GB of disk.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ORT_RUN = os.path.join(ROOT, "tests", "oracle", "ort_run.js")
PY = "/usr/bin/python3"
KV_SCALE = 0.05


def run(cmd, **kw):
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write("FAILED: %s\n%s%s" % (" ".join(cmd), r.stdout[-4000:], r.stderr[-4000:]))
        raise SystemExit(1)
    sys.stderr.write("  %.1f s  %s\n" % (time.time() - t, " ".join(os.path.basename(c) if i == 0 else c
                                                                      for i, c in enumerate(cmd))[:160]))
    return r


def residual_adds(path):
    m = onnx.shape_inference.infer_shapes(onnx.load(path, load_external_data=False))
    shapes = {}
    for vi in list(m.graph.value_info) + list(m.graph.output) + list(m.graph.input):
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    hs = shapes[m.graph.input[0].name]
    return [n.name for n in m.graph.node
            if n.op_type == "Add" and all(shapes.get(v) == hs for v in list(n.input) + [n.output[0]])]


def float_weight_bytes(path):
    m = onnx.load(path, load_external_data=False)
    inits = {i.name: i for i in m.graph.initializer}
    n = 0
    for node in m.graph.node:
        if node.op_type == "MatMul" and node.input[1] in inits:
            n += 4 * int(np.prod(inits[node.input[1]].dims))
    return n


SIM_KEYS = ("cores", "PE array", "clock", "OCM (L2) size", "LRM size", "external bandwidth", "MACs/PE",
            "max OCM used", "max LRM used", "network GMACs", "latency", "executions/s", "external bytes read",
            "external bytes written", "MAC utilization")


def sim_table(out):
    rows = {}
    for line in out.splitlines():
        t = line.strip()
        for k in SIM_KEYS:
            if t.startswith(k + " ") and k not in rows:
                rows[k] = t[len(k):].strip()
    return rows


def mse(a, b):
    return float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wlower", default=os.path.join(ROOT, "build", "wlower"))
    ap.add_argument("--work", default="/tmp/wlower-qwen2-int8-qc")
    ap.add_argument("--small", action="store_true", help="hidden 256, 4 heads, FFN 512, vocab 1000")
    a = ap.parse_args()
    W, work = os.path.abspath(a.wlower), a.work
    os.makedirs(work, exist_ok=True)
    run(["sh", os.path.join(ROOT, "tests", "oracle", "install.sh")])
    gen = os.path.join(work, "small" if a.small else "full")
    size = ["--hidden", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "512", "--vocab", "1000"] if a.small else []
    if not os.path.exists(os.path.join(gen, "done")):
        run([PY, os.path.join(ROOT, "examples", "models", "qwen2.py"), "--layers", "1", "--int8-kv", str(KV_SCALE),
             "--samples", "17", "--out", gen] + size)
        open(os.path.join(gen, "done"), "w").close()
    sd = os.path.join(gen, "samples", "single_token")
    calib, ev = os.path.join(work, "calib"), os.path.join(work, "eval")
    os.makedirs(calib, exist_ok=True)
    os.makedirs(ev, exist_ok=True)
    st_in = {}
    for name in ("inputs_embeds", "past_key_values.0.key", "past_key_values.0.value", "attention_mask"):
        x = np.load(os.path.join(sd, name + ".npy"))
        if name.startswith("past"):
            x = np.clip(np.round(x / KV_SCALE), -128, 127).astype(np.int8)
            name += "_quantized"
        np.save(os.path.join(calib, name + ".npy"), x[:16])
        np.save(os.path.join(ev, name + ".npy"), x[16:17])
        st_in[name] = os.path.join(ev, name + ".npy")
    pf = os.path.join(gen, "samples", "prefill", "hidden_states.npy")
    shape = np.load(pf, mmap_mode="r").shape[1:]
    xe = np.random.default_rng(123).standard_normal(shape).astype(np.float32)[None]
    np.save(os.path.join(ev, "hidden_states.npy"), xe)

    graphs = [
        ("prefill", "qc-n", {"hidden_states": os.path.join(ev, "hidden_states.npy")}, "output_hidden_states",
         ["--synthetic", "100"]),
        ("single_token", "qc-u", st_in, "logits",
         sum((["--samples", "%s=%s" % (n, os.path.join(calib, n + ".npy"))] for n in st_in), [])),
    ]
    results = []
    for g, target, inputs, out, calib_opts in graphs:
        f = os.path.join(gen, g + ".onnx")
        q = os.path.join(work, g + "_int8.onnx")
        res = residual_adds(f)
        if len(res) != 2:
            sys.exit("%s: %d residual adds found (want 2): %s" % (f, len(res), res))
        run([W, "quantize", f, "--int8", "--symmetric-activations", "--weights-qdq", "--exclude-op",
             "RMSNorm,Softmax,Sigmoid", "--exclude", ",".join(res), "-o", q] + calib_opts)
        ins = ["%s=%s" % kv for kv in inputs.items()]
        of, oq = os.path.join(work, g + "_ort_float"), os.path.join(work, g + "_ort_int8")
        run(["node", ORT_RUN, f, of] + ins + ["--opt-level", "disabled"])
        run(["node", ORT_RUN, q, oq] + ins + ["--opt-level", "disabled"])
        mod = os.path.join(work, g + "_" + target)
        run([W, q, "--target", target, "--cores", "1", "--ocm", "16MB", "--tranges", q + ".tranges", "-o", mod])
        so = os.path.join(work, g + "_sim")
        r = run([W, "sim", mod, "--quiet", "--output-dir", so] + sum((["--input", i] for i in ins), []))
        t = sim_table(r.stdout)
        ref = np.load(os.path.join(of, out + ".npy"))
        sim = np.load(os.path.join(so, out + ".npy"))
        ortq = np.load(os.path.join(oq, out + ".npy"))
        extra = {}
        if g == "single_token":
            extra["argmax"] = "float %d, int8 ORT %d, sim %d" % (int(ref.argmax()), int(ortq.argmax()),
                                                                 int(sim.argmax()))
        results.append(dict(graph=g, target=target, table=t, mse_sim=mse(sim, ref), mse_ortq=mse(ortq, ref),
                            mse_sim_ortq=mse(sim, ortq), var=float(np.var(ref.astype(np.float64))),
                            wbytes=os.path.getsize(os.path.join(mod, "weights.bin")), fbytes=float_weight_bytes(f),
                            **extra))
    keys = [("target", None), ("cores", "cores"), ("PE array", "PE array"), ("clock", "clock"),
            ("L2 (OCM) size", "OCM (L2) size"), ("LRM size", "LRM size"), ("bandwidth", "external bandwidth"),
            ("MACs/PE", "MACs/PE"), ("max L2 used", "max OCM used"), ("max LRM used", "max LRM used"),
            ("network GMACs", "network GMACs")]
    print("| | " + " | ".join("%s (%s)" % (r["graph"], r["target"]) for r in results) + " |")
    print("|---|" + "---|" * len(results))
    for label, k in keys:
        print("| %s | %s |" % (label, " | ".join(r["target"] if k is None else r["table"].get(k, "?")
                                                  for r in results)))
    print("| output MSE, simulated vs ONNX Runtime (float graph) | %s |" % " | ".join(
        "%.4g (%s)" % (r["mse_sim"], "output var %.3g" % r["var"]) for r in results))
    print("| output MSE, int8 QDQ graph on ONNX Runtime vs ONNX Runtime (float graph) | %s |" % " | ".join(
        "%.4g" % r["mse_ortq"] for r in results))
    print("| output MSE, simulated vs ONNX Runtime (int8 QDQ graph) | %s |" % " | ".join(
        "%.4g" % r["mse_sim_ortq"] for r in results))
    for label, k in [("latency", "latency"), ("FPS", "executions/s"), ("external bytes read", "external bytes read"),
                     ("external bytes written", "external bytes written"), ("MAC utilization", "MAC utilization")]:
        print("| %s | %s |" % (label, " | ".join(r["table"].get(k, "?") for r in results)))
    print("| weights in the module (weights.bin) vs float32 MatMul weights | %s |" % " | ".join(
        "%.2f MB vs %.2f MB (%.3fx)" % (r["wbytes"] / 1e6, r["fbytes"] / 1e6, r["wbytes"] / r["fbytes"])
        for r in results))
    for r in results:
        if "argmax" in r:
            print("\n%s argmax token: %s" % (r["graph"], r["argmax"]))
    json.dump(results, open(os.path.join(work, "results.json"), "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
