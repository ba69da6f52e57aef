#!/usr/bin/python3
"""int8_gemm.py [--rounds R] [--reps N] [--threads T] [--shapes MxKxN,...] [--work DIR] [--cpu CPU]

The host int8 GEMM (ai.wlower.QMatMul, targets/host/kgen_qmatmul.c) against,
in one run and on the same shapes:
  f32    the host float GEMM (ai.wlower.MatMulNBits bits 32, [K, N] weights)
  q4     the host 4-bit GEMM (ai.wlower.MatMulNBits bits 4, block 32)
  qdq    the same QDQ graph run by both: int8 input xq [M, K] →
         DequantizeLinear → MatMul with DequantizeLinear(int8 weight [K, N],
         per-channel scales) → QuantizeLinear → int8 [M, N]; wlower compiles it
         (fuse-qdq-matmul → QMatMul with int8 output) for --target host,
         ONNX Runtime (onnxruntime-node, tests/oracle/ort_run.js, all graph
         optimizations) runs the file as given.
Each round runs every module once (REPS timed runs after a warm-up, the
median), modules alternating; the figure is the median over rounds. Prints a
Markdown table (ms, GOP/s = 2·M·K·N / time, ratios) and how many int8
outputs of wlower and ORT differ (ORT's requantization may round a tie the
other way: at most one step).

Models are written once under --work (default /tmp/wlower-bench-int8).
--cpu CPU: --cpu for the three wlower compiles (x86-64-v3: the AVX2 paths,
vpmaddwd for int8); the modules go to mod_<kind>_<cpu>.
"""
import argparse
import os
import statistics
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORT_RUN = os.path.join(ROOT, "tests", "oracle", "ort_run.js")


def sh(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        sys.stderr.write("int8_gemm: failed: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
        sys.exit(1)
    return r.stdout


def save(path, nodes, ins, outs, inits, wl=True):
    g = helper.make_graph(nodes, "g", ins, outs, [numpy_helper.from_array(a, n) for n, a in inits.items()])
    ops = [helper.make_opsetid("", 19)] + ([helper.make_opsetid("ai.wlower", 1)] if wl else [])
    m = helper.make_model(g, opset_imports=ops, ir_version=9)
    onnx.save(m, path)


def models(d, M, K, N, rng):
    os.makedirs(d, exist_ok=True)
    if os.path.exists(os.path.join(d, "done")):
        return
    xq = rng.integers(-128, 128, (M, K), dtype=np.int8)
    x = (xq.astype(np.float32) * 0.02)
    w8 = rng.integers(-127, 128, (K, N), dtype=np.int8)
    sw = (rng.random(N) * 0.002 + 0.0005).astype(np.float32)
    np.save(os.path.join(d, "xq.npy"), xq)
    np.save(os.path.join(d, "x.npy"), x)
    vi = helper.make_tensor_value_info
    # the QDQ graph (ORT and wlower run this same file)
    inits = {"sx": np.array(0.02, np.float32), "zx": np.array(0, np.int8), "w": w8, "sw": sw,
             "zw": np.zeros(N, np.int8), "sy": np.array(0.25, np.float32), "zy": np.array(0, np.int8)}
    nodes = [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], axis=1),
             helper.make_node("MatMul", ["xd", "wd"], ["y"]),
             helper.make_node("QuantizeLinear", ["y", "sy", "zy"], ["yq"])]
    save(os.path.join(d, "qdq.onnx"), nodes, [vi("xq", TensorProto.INT8, [M, K])],
         [vi("yq", TensorProto.INT8, [M, N])], inits, wl=False)
    # float: MatMulNBits bits 32 with the dequantized weights
    wf = w8.astype(np.float32) * sw[None, :]
    save(os.path.join(d, "f32.onnx"),
         [helper.make_node("MatMulNBits", ["x", "w"], ["y"], domain="ai.wlower", K=K, N=N, bits=32)],
         [vi("x", TensorProto.FLOAT, [M, K])], [vi("y", TensorProto.FLOAT, [M, N])], {"w": wf})
    # 4-bit: ORT's MatMulNBits layout, block 32
    kb = K // 32
    q4 = rng.integers(0, 256, (N, kb, 16), dtype=np.uint8)
    s4 = (rng.random(N * kb) * 0.01 + 0.001).astype(np.float32)
    save(os.path.join(d, "q4.onnx"),
         [helper.make_node("MatMulNBits", ["x", "w", "s"], ["y"], domain="ai.wlower", K=K, N=N, bits=4,
                           block_size=32)],
         [vi("x", TensorProto.FLOAT, [M, K])], [vi("y", TensorProto.FLOAT, [M, N])], {"w": q4, "s": s4})
    open(os.path.join(d, "done"), "w").close()


def median_ms(out):
    return float(out.split("median_ms=")[1].split()[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shapes", default="16x1536x1536,1x1536x8960,128x1536x1536")
    ap.add_argument("--work", default="/tmp/wlower-bench-int8")
    ap.add_argument("--wlower", default=os.path.join(ROOT, "build", "wlower"))
    ap.add_argument("--cpu", default=None)
    a = ap.parse_args()
    sh(["sh", os.path.join(ROOT, "tests", "oracle", "install.sh")])
    rng = np.random.default_rng(5)
    T = str(a.threads)
    rows = []
    for shp in a.shapes.split(","):
        M, K, N = (int(v) for v in shp.split("x"))
        d = os.path.join(a.work, shp)
        models(d, M, K, N, rng)
        sfx = "_" + a.cpu if a.cpu else ""
        for k in ("qdq", "f32", "q4"):
            sh([a.wlower, os.path.join(d, k + ".onnx"), "--target", "host", "-o", os.path.join(d, "mod_" + k + sfx)]
               + (["--cpu", a.cpu] if a.cpu else []))
        t = {k: [] for k in ("int8", "f32", "q4", "ort")}
        for _ in range(a.rounds):
            for k, mod, feed in (("int8", "mod_qdq", "xq"), ("f32", "mod_f32", "x"), ("q4", "mod_q4", "x")):
                out = sh([a.wlower, "run", os.path.join(d, mod + sfx), "--threads", T, "--reps", str(a.reps),
                          "--input", "%s=%s" % (feed, os.path.join(d, feed + ".npy")),
                          "--output-dir", os.path.join(d, "out_" + k)])
                t[k].append(median_ms(out))
            out = sh(["node", ORT_RUN, os.path.join(d, "qdq.onnx"), os.path.join(d, "out_ort"),
                      "xq=" + os.path.join(d, "xq.npy"), "--threads", T, "--reps", str(a.reps)])
            t["ort"].append(median_ms(out))
        a8 = np.load(os.path.join(d, "out_int8", "yq.npy")).astype(np.int32)
        o8 = np.load(os.path.join(d, "out_ort", "yq.npy")).astype(np.int32)
        diff = int(np.count_nonzero(a8 != o8))
        step = int(np.max(np.abs(a8 - o8))) if a8.size else 0
        m = {k: max(statistics.median(v), 1e-6) for k, v in t.items()}
        gop = (lambda M, K, N: lambda ms: 2.0 * M * K * N / ms / 1e6)(M, K, N)
        rows.append((M, K, N, m, gop, diff, a8.size, step))
    print("| M×K×N | int8 ms (GOP/s) | f32 ms (GFLOP/s) | 4-bit ms (GFLOP/s) | ORT QDQ ms (GOP/s) | f32/int8 | 4-bit/int8 | ORT/int8 | int8 outputs ≠ ORT |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for M, K, N, m, gop, diff, tot, step in rows:
        print("| %d×%d×%d | %.3f (%.1f) | %.3f (%.1f) | %.3f (%.1f) | %.3f (%.1f) | %.2f | %.2f | %.2f | %d of %d (max step %d) |"
              % (M, K, N, m["int8"], gop(m["int8"]), m["f32"], gop(m["f32"]), m["q4"], gop(m["q4"]), m["ort"],
                 gop(m["ort"]), m["f32"] / m["int8"], m["q4"] / m["int8"], m["ort"] / m["int8"], diff, tot, step))
    return 0


if __name__ == "__main__":
    sys.exit(main())
