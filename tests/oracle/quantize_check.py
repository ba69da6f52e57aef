#!/usr/bin/python3
"""quantize_check.py — check `wlower quantize` against ONNX Runtime.

    quantize_check.py WLOWER WORKDIR [--model M.onnx --input NAME=FILE.npy ...]

Without --model it builds a small graph with onnx.helper that covers the
cases that matter: K a multiple of the block, K not (zero-padded), K odd,
a weight shared by two MatMuls, a 3-D activation, a MatMul whose weight is
an activation (left alone), one excluded by name, and a tied LM head (the
weight is Transpose(perm [1, 0]) of an embedding table a Gather also reads). For each variant
(asymmetric and symmetric; block 16, 32, 64) it

  1. runs `wlower quantize`;
  2. re-quantizes every weight in numpy with ONNX Runtime's formulas (MLAS
     BlockwiseQuantizer) and requires the bytes of B, scales and zero points
     to be identical;
  3. dequantizes the written weights ((q - zp) * scale) into a float model
     with plain MatMuls, runs both models with ONNX Runtime (ort_run.js) and
     requires max |quantized - dequantized float| <= 1e-5 (on the built-in
     graph: they agree exactly), or 1e-5 * max(1, peak) for a --model, peak =
     max |output| (on a
     4-layer decoder with a 51865-wide head, ONNX Runtime's MatMulNBits and
     its float GEMM round differently by ~1e-5 on logits of magnitude ~7).

Prints one line per variant and exits 1 on any failure.
"""

import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ORT_RUN = os.path.join(HERE, "ort_run.js")
TOL = 1e-5


def build_model(path, seed=0):
    """A graph with the interesting MatMul cases; returns {input name: array}."""
    g = np.random.default_rng(seed)

    def w(name, k, n, scale=None):
        a = g.standard_normal((k, n)).astype(np.float32) * np.float32(scale or 1.0 / np.sqrt(k))
        return numpy_helper.from_array(a, name)

    inits = [
        w("blk.fc1.weight", 64, 48),      # K a multiple of every block size
        w("blk.fc2.weight", 48, 40),      # K = 48: padded for block 32 and 64
        w("blk.odd.weight", 37, 24),      # K odd
        w("blk.shared.weight", 24, 24),   # read by two MatMuls
        w("blk.excl.weight", 24, 16),
        w("blk.emb.weight", 20, 24),      # [V, K]: read by a Gather and, transposed, by the head
    ]
    # a block of zeros and a block with a single outlier in fc1
    fc1 = numpy_helper.to_array(inits[0]).copy()
    fc1[0:32, 0] = 0.0
    fc1[5, 1] = 3.0
    fc1[40:64, 2] = np.abs(fc1[40:64, 2])   # all positive: zero point 0
    fc1[0:16, 3] = -np.abs(fc1[0:16, 3])    # all negative: zero point 15
    inits[0] = numpy_helper.from_array(fc1, "blk.fc1.weight")
    nodes = [
        helper.make_node("MatMul", ["x", "blk.fc1.weight"], ["h1"], name="/fc1/MatMul"),
        helper.make_node("Relu", ["h1"], ["h1r"], name="/act/Relu"),
        helper.make_node("MatMul", ["h1r", "blk.fc2.weight"], ["h2"], name="/fc2/MatMul"),
        helper.make_node("Slice", ["h2", "s0", "s1", "s2"], ["h2s"], name="/Slice"),
        helper.make_node("MatMul", ["h2s", "blk.odd.weight"], ["h3"], name="/odd/MatMul"),
        helper.make_node("MatMul", ["h3", "blk.shared.weight"], ["h4"], name="/shared/MatMul"),
        helper.make_node("MatMul", ["h4", "blk.shared.weight"], ["h5"], name="/shared/MatMul_1"),
        helper.make_node("MatMul", ["h5", "blk.excl.weight"], ["y"], name="/excl/MatMul"),
        # weight is an activation: stays a MatMul
        helper.make_node("Transpose", ["h5"], ["h5t"], perm=[0, 2, 1], name="/Transpose"),
        helper.make_node("MatMul", ["h5", "h5t"], ["gram"], name="/gram/MatMul"),
        # tied head: MatMul(h5, Transpose(emb)) next to Gather(emb, ids)
        helper.make_node("Gather", ["blk.emb.weight", "ids"], ["emb"], name="/embed/Gather"),
        helper.make_node("Transpose", ["blk.emb.weight"], ["emb_t"], perm=[1, 0], name="/lm_head/Transpose"),
        helper.make_node("MatMul", ["h5", "emb_t"], ["logits"], name="/lm_head/MatMul"),
    ]
    inits += [
        numpy_helper.from_array(np.array([0], np.int64), "s0"),
        numpy_helper.from_array(np.array([37], np.int64), "s1"),
        numpy_helper.from_array(np.array([2], np.int64), "s2"),
    ]
    graph = helper.make_graph(
        nodes, "quantize_check",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 64]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 16]),
         helper.make_tensor_value_info("gram", TensorProto.FLOAT, [2, 5, 5]),
         helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 5, 20]),
         helper.make_tensor_value_info("emb", TensorProto.FLOAT, [1, 3, 24])],
        inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return {"x": g.standard_normal((2, 5, 64)).astype(np.float32), "ids": np.array([[1, 19, 7]], np.int64)}


def ort_quantize(w, block, symmetric):
    """numpy mirror of onnxruntime's MLAS BlockwiseQuantizer (columnwise, 4 bits),
    in float32 arithmetic: returns (packed [N, kb, block/2], scales [N*kb], zp bytes)."""
    f = np.float32
    K, N = w.shape
    kb = (K + block - 1) // block
    packed = np.zeros((N, kb * block // 2), np.uint8)
    scales = np.zeros((N, kb), np.float32)
    zp = np.full(N * ((kb + 1) // 2), 0x88, np.uint8)
    for n in range(N):
        for b in range(kb):
            blk = w[b * block:min((b + 1) * block, K), n]
            mn, mx = f(blk.min()), f(blk.max())
            if symmetric:
                v = mx if abs(mx) > abs(mn) else mn
                scale = f(v / f(-8.0))
                z = 8
            else:
                mn, mx = min(mn, f(0)), max(mx, f(0))
                scale = f((mx - mn) / f(15.0))
                zf = mn if scale == 0 else f(f(0) - f(mn / scale))
                z = 0 if zf < 0 else 15 if zf > 15 else int(np.floor(abs(zf) + 0.5))
                i = n * ((kb + 1) // 2) + b // 2
                zp[i] = (zp[i] & 0xF0) | z if b % 2 == 0 else (zp[i] & 0x0F) | (z << 4)
            scales[n, b] = scale
            r = f(1.0) / scale if scale != 0 else f(0)
            t = (blk * r).astype(np.float32) + f(z)
            # roundf: half away from zero (in float64, where |t| + 0.5 is exact)
            q = np.clip(np.sign(t) * np.floor(np.abs(t).astype(np.float64) + 0.5), 0, 15).astype(np.uint8)
            for j, qi in enumerate(q):
                k = b * block + j
                if k % 2 == 0:
                    packed[n, k // 2] = (packed[n, k // 2] & 0xF0) | qi
                else:
                    packed[n, k // 2] = (packed[n, k // 2] & 0x0F) | (qi << 4)
            if K % 2 == 1 and b == kb - 1:
                packed[n, K // 2] = (packed[n, K // 2] & 0x0F) | (z << 4)
    return packed.reshape(N, kb, block // 2), scales, zp


def dequantize(packed, scales, zp, K, N, block):
    kb = (K + block - 1) // block
    p = packed.reshape(N, -1)
    q = np.empty((N, p.shape[1] * 2), np.float32)
    q[:, 0::2] = p & 0x0F
    q[:, 1::2] = p >> 4
    s = scales.reshape(N, kb)
    if zp is None:
        z = np.full((N, kb), 8.0, np.float32)
    else:
        zz = zp.reshape(N, -1)
        z = np.empty((N, zz.shape[1] * 2), np.float32)
        z[:, 0::2] = zz & 0x0F
        z[:, 1::2] = zz >> 4
        z = z[:, :kb]
    w = (q[:, :kb * block].reshape(N, kb, block) - z[:, :, None]) * s[:, :, None]
    return np.ascontiguousarray(w.reshape(N, kb * block)[:, :K].T.astype(np.float32))


def check_variant(wlower, src, feeds, work, tag, block, symmetric, exclude, relative):
    qpath = os.path.join(work, tag + ".onnx")
    cmd = [wlower, "quantize", src, "-o", qpath, "--nbits", "4", "--block-size", str(block)]
    if symmetric:
        cmd.append("--symmetric")
    if exclude:
        cmd += ["--exclude", exclude]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("%s: FAIL wlower quantize exited %d: %s" % (tag, r.returncode, r.stderr.strip()))
        return False
    orig = {t.name: numpy_helper.to_array(t) for t in onnx.load(src).graph.initializer}
    qm = onnx.load(qpath)
    onnx.checker.check_model(qm)
    inits = {t.name: t for t in qm.graph.initializer}
    problems = []
    if not any(o.domain == "com.microsoft" and o.version == 1 for o in qm.opset_import):
        problems.append("no com.microsoft opset import")
    deq = onnx.ModelProto()
    deq.CopyFrom(qm)
    deq.graph.ClearField("node")
    nq = 0
    for node in qm.graph.node:
        if node.op_type != "MatMulNBits":
            deq.graph.node.append(node)
            continue
        nq += 1
        at = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        K, N = at["K"], at["N"]
        if at["bits"] != 4 or at["block_size"] != block or node.domain != "com.microsoft":
            problems.append("%s: attributes %s" % (node.name, at))
        wname = node.input[1][:-3]          # "<weight>_Q4"
        packed = numpy_helper.to_array(inits[node.input[1]])
        scales = numpy_helper.to_array(inits[node.input[2]])
        zp = numpy_helper.to_array(inits[node.input[3]]) if len(node.input) > 3 and node.input[3] else None
        if (zp is None) != symmetric:
            problems.append("%s: zero points %s" % (node.name, "missing" if zp is None else "present"))
        if wname not in orig and wname.endswith("_T") and wname[:-2] in orig:
            worig = np.ascontiguousarray(orig[wname[:-2]].T)      # a tied head: Transpose(table)
        else:
            worig = orig[wname]
        rp, rs, rz = ort_quantize(worig, block, symmetric)
        if packed.shape != rp.shape or not np.array_equal(packed, rp):
            problems.append("%s: B bytes differ from onnxruntime's quantizer (%d of %d)"
                            % (node.name, int(np.count_nonzero(packed != rp)) if packed.shape == rp.shape else -1,
                               rp.size))
        if scales.shape != rs.shape or not np.array_equal(scales.view(np.uint32), rs.view(np.uint32)):
            problems.append("%s: scales differ from onnxruntime's quantizer" % node.name)
        if zp is not None and not np.array_equal(zp, rz):
            problems.append("%s: zero points differ from onnxruntime's quantizer" % node.name)
        wd = dequantize(packed, scales, zp, K, N, block)
        dname = node.name + "_deq"
        deq.graph.initializer.append(numpy_helper.from_array(wd, dname))
        deq.graph.node.append(helper.make_node("MatMul", [node.input[0], dname], list(node.output), name=dname))
    if not relative:    # the built-in graph: which MatMuls became MatMulNBits
        names = sorted(n.name for n in qm.graph.node if n.op_type == "MatMulNBits")
        want = sorted(["/fc1/MatMul_Q4", "/fc2/MatMul_Q4", "/odd/MatMul_Q4", "/shared/MatMul_Q4",
                       "/shared/MatMul_1_Q4", "/lm_head/MatMul_Q4"])
        if names != want:
            problems.append("MatMulNBits nodes %s, expected %s" % (names, want))
        if "blk.emb.weight" not in inits or any(n.op_type == "Transpose" and n.input[0] == "blk.emb.weight"
                                                 for n in qm.graph.node):
            problems.append("tied head: the table must stay (the Gather reads it) and its Transpose go")
    dpath = os.path.join(work, tag + "_deq.onnx")
    onnx.save(deq, dpath)

    args = ["%s=%s" % (k, v) for k, v in feeds.items()]
    outs = {}
    for which, path in (("q", qpath), ("deq", dpath)):
        od = os.path.join(work, tag + "_" + which)
        r = subprocess.run(["node", ORT_RUN, path, od] + args, capture_output=True, text=True)
        if r.returncode != 0:
            print("%s: FAIL ort_run.js on %s: %s" % (tag, path, r.stderr.strip()))
            return False
        outs[which] = od
    worst = peak = 0.0
    for f in sorted(f for f in os.listdir(outs["deq"]) if f.endswith(".npy")):
        a = np.load(os.path.join(outs["q"], f)).astype(np.float64)
        b = np.load(os.path.join(outs["deq"], f)).astype(np.float64)
        if not np.issubdtype(b.dtype, np.floating):
            continue
        worst = max(worst, float(np.max(np.abs(a - b))))
        peak = max(peak, float(np.max(np.abs(b))))
    tol = TOL * max(1.0, peak) if relative else TOL
    if worst > tol:
        problems.append("ORT MatMulNBits vs dequantized float MatMul: max abs %.3g > %g" % (worst, tol))
    status = "ok" if not problems else "FAIL"
    print("%s: %s: %d MatMulNBits, bytes %s onnxruntime's quantizer, ORT max_abs(nbits - float)=%.3g "
          "(peak %.3g, tolerance %.3g)"
          % (tag, status, nq, "==" if not any("differ" in p for p in problems) else "!=", worst, peak, tol))
    for p in problems:
        print("  " + p)
    return not problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("wlower")
    ap.add_argument("workdir")
    ap.add_argument("--model", help="quantize this model instead of the built-in graph")
    ap.add_argument("--input", action="append", default=[], help="NAME=FILE.npy for --model")
    ap.add_argument("--block-size", type=int, action="append", help="block sizes (default 16, 32, 64)")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    if args.model:
        src = args.model
        feeds = dict(a.split("=", 1) for a in args.input)
        exclude = None
    else:
        src = os.path.join(args.workdir, "matmuls.onnx")
        arrays = build_model(src)
        feeds = {}
        for k, v in arrays.items():
            p = os.path.join(args.workdir, k + ".npy")
            np.save(p, v)
            feeds[k] = p
        exclude = "/excl/MatMul"
    ok = True
    for block in args.block_size or [16, 32, 64]:
        for sym in (False, True):
            tag = "%s_b%d_%s" % (os.path.splitext(os.path.basename(src))[0], block, "sym" if sym else "asym")
            ok &= check_variant(args.wlower, src, feeds, args.workdir, tag, block, sym, exclude, bool(args.model))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
