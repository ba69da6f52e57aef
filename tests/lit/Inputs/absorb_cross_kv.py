#!/usr/bin/python3
"""absorb_cross_kv.py WORK — numerics of the absorb-cross-kv rewrite
(tests/lit/absorb_cross_kv.onnxtxt); absorb_cross_kv.py --graphs DIR writes
that test's text graphs (pos, near) instead.

Graphs of fused ops (ai.wlower.MatMulNBits K/V projections of x, one
WhisperAttention over them) with seeded weights: 4-bit (com.microsoft layout,
packed zero points) and float, with and without a V bias, B = 2, T = 2 and 4.
The expected output is numpy's: dequantize (written here), K = x·Wk, V = x·Wv
+ bv, softmax(scale·q_h·k_hᵀ)·v_h per head. Checked:
  - the reference executor on the original graph (the test's own baseline),
  - the reference executor on the rewritten graph (`--absorb-cross-kv -o`),
    which must hold the grouped MatMulNBits and a one-head attention,
  - the host target (absorbs by default) and the host target with
    --no-absorb-cross-kv,
each within a relative error of 2e-5 of numpy's float64 result. Exits 1 with
a line per failure.
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WLOWER = os.environ.get("WLOWER", "wlower")


def pack4(w, block, rng):
    """w [K, N] float -> (q [N, kb, block/2] uint8, scales [N*kb], zp [N, ceil(kb/2)], dequantized [K, N])"""
    K, N = w.shape
    kb = (K + block - 1) // block
    q = np.zeros((N, kb, block // 2), np.uint8)
    sc = np.zeros((N, kb), np.float32)
    zp = rng.integers(4, 12, size=(N, kb)).astype(np.uint8)
    deq = np.zeros((K, N), np.float64)
    for n in range(N):
        for b in range(kb):
            col = w[b * block:(b + 1) * block, n]
            s = np.float32(max(np.abs(col).max(), 1e-3) / 7.0)
            sc[n, b] = s
            v = np.clip(np.rint(col / s) + zp[n, b], 0, 15).astype(np.uint8)
            for i in range(0, block, 2):
                q[n, b, i // 2] = v[i] | (v[i + 1] << 4)
            deq[b * block:(b + 1) * block, n] = (v.astype(np.float64) - zp[n, b]) * np.float64(s)
    zpp = np.zeros((N, (kb + 1) // 2), np.uint8)
    for n in range(N):
        for b in range(kb):
            zpp[n, b // 2] |= zp[n, b] << ((b & 1) * 4)
    return q, sc.reshape(-1), zpp, deq


def make(path, B, T, S, D, H, bits, vbias, seed):
    rng = np.random.default_rng(seed)
    wk = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
    wv = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
    bv = (rng.standard_normal(D) * 0.1).astype(np.float32)
    inits, kin, vin = [], ["x"], ["x"]
    attrs = dict(K=D, N=D, bits=bits)
    if bits == 4:
        attrs["block_size"] = 32
        mats = {}
        for nm, w in (("k", wk), ("v", wv)):
            q, sc, zp, deq = pack4(w, 32, rng)
            inits += [numpy_helper.from_array(q, "w%s_q" % nm), numpy_helper.from_array(sc, "w%s_s" % nm),
                      numpy_helper.from_array(zp, "w%s_z" % nm)]
            mats[nm] = deq
        kin += ["wk_q", "wk_s", "wk_z"]
        vin += ["wv_q", "wv_s", "wv_z"]
        dk, dv = mats["k"], mats["v"]
    else:
        inits += [numpy_helper.from_array(wk, "wk"), numpy_helper.from_array(wv, "wv")]
        kin.append("wk")
        vin.append("wv")
        dk, dv = wk.astype(np.float64), wv.astype(np.float64)
    if vbias:
        inits.append(numpy_helper.from_array(bv, "bv"))
        vin += [""] * (4 - len(vin)) + ["bv"]
    scale = 1.0 / np.sqrt(D // H)
    nodes = [
        helper.make_node("MatMulNBits", kin, ["k"], name="/l/enc_attn/k_proj", domain="ai.wlower", **attrs),
        helper.make_node("MatMulNBits", vin, ["v"], name="/l/enc_attn/v_proj", domain="ai.wlower", **attrs),
        helper.make_node("WhisperAttention", ["q", "k", "v"], ["o"], name="/l/enc_attn/core", domain="ai.wlower",
                         embed=D, heads=H, q_len=T, kv_len=S, causal=0, scale=float(scale), kv_layout="bsd"),
    ]
    g = helper.make_graph(nodes, "absorb",
                          [helper.make_tensor_value_info("q", TensorProto.FLOAT, [B, T, D]),
                           helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, D])],
                          [helper.make_tensor_value_info("o", TensorProto.FLOAT, [B, T, D])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.wlower", 1)])
    m.ir_version = 8
    onnx.save(m, path)
    # numpy's expectation, float64
    q = rng.standard_normal((B, T, D)).astype(np.float32)
    x = rng.standard_normal((B, S, D)).astype(np.float32)
    K = x.astype(np.float64) @ dk
    V = x.astype(np.float64) @ dv + (bv.astype(np.float64) if vbias else 0.0)
    hd = D // H
    o = np.zeros((B, T, D))
    for b in range(B):
        for h in range(H):
            sl = slice(h * hd, (h + 1) * hd)
            s = scale * (q[b, :, sl].astype(np.float64) @ K[b, :, sl].T)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            o[b, :, sl] = p @ V[b, :, sl]
    return q, x, o


def text_graphs(out):
    """pos.onnxtxt and near.onnxtxt of the lit test: D = 64, H = 2, S = 16."""
    D = 64
    wk = ", ".join(str(i) for i in range(D * D))                 # Wk[j, c] = 64j + c
    wv = ", ".join(str(10000 + i) for i in range(D * D))         # Wv[j, c] = 10000 + 64j + c
    bv = ", ".join(str(i) for i in range(D))
    head = '<ir_version: 8, opset_import: ["" : 17, "ai.wlower" : 1]>\n'
    att = ('ai.wlower.WhisperAttention <embed = %d, heads = %%d, q_len = %%d, kv_len = 16, causal = 0, '
           'scale = 0.1767767, kv_layout = "%%s">' % D)
    proj = "ai.wlower.MatMulNBits <K = %d, N = %d, bits = 32>" % (D, D)
    pos = head + ("g (float[1, 1, %d] q, float[1, 16, %d] x) => (float[1, 1, %d] o)\n"
                  "    <float[%d, %d] wk = {%s}, float[%d, %d] wv = {%s}, float[%d] bv = {%s}> {\n"
                  % (D, D, D, D, D, wk, D, D, wv, D, bv))
    pos += "   k = %s (x, wk)  # /l/enc_attn/k_proj\n" % proj
    pos += "   v = %s (x, wv, , , bv)  # /l/enc_attn/v_proj\n" % proj
    pos += "   o = %s (q, k, v)  # /l/enc_attn/core\n}\n" % (att % (2, 1, "bsd"))
    near = head + ("g (float[1, 1, %d] q, float[1, 8, %d] q8, float[1, 16, %d] x, float[1, 16, %d] x2,\n"
                   "   float[1, 2, 16, 32] pk, float[1, 2, 16, 32] pv)\n"
                   "   => (float[1, 1, %d] o1, float[1, 16, %d] k1, float[1, 1, %d] o2, float[1, 1, %d] o3,\n"
                   "       float[1, 8, %d] o4, float[1, 1, %d] o5, float[1, 1, %d] o6)\n"
                   "    <float[%d, %d] wk = {%s}, float[%d, %d] wv = {%s}, float[%d] bk = {%s}> {\n"
                   % ((D,) * 11 + (D, D, wk, D, D, wv, D, bv)))
    rows = [("k1", "x", "", "v1", "x", "o1", "q", 2, 1, "shared"),      # K is also a graph output
            ("k2", "x", ", , , bk", "v2", "x", "o2", "q", 2, 1, "kbias"),
            ("k3", "x", "", "v3", "x2", "o3", "q", 2, 1, "twox"),       # V from another input
            ("k4", "x", "", "v4", "x", "o4", "q8", 2, 8, "many"),      # T = 8: too many queries
            ("k5", "x", "", "v5", "x", "o5", "q", 4, 1, "hd16")]       # hd 16
    for k, kx, kb, v, vx, o, q, H, T, tag in rows:
        near += "   %s = %s (%s, wk%s)  # /%s/k_proj\n" % (k, proj, kx, kb, tag)
        near += "   %s = %s (%s, wv)  # /%s/v_proj\n" % (v, proj, vx, tag)
        near += "   %s = %s (%s, %s, %s)  # /%s/core\n" % (o, att % (H, T, "bsd"), q, k, v, tag)
    near += "   o6 = %s (q, pk, pv)  # /cached/core\n}\n" % (att % (2, 1, "bhsd"))
    for name, text in (("pos", pos), ("near", near)):
        with open(os.path.join(out, name + ".onnxtxt"), "w") as f:
            f.write(text)


def run(args, what, fails):
    r = subprocess.run([WLOWER] + args, capture_output=True, text=True)
    if r.returncode != 0:
        fails.append("%s: wlower %s: exit %d: %s" % (what, " ".join(args), r.returncode, r.stderr.strip()[:300]))
        return False
    return True


def check(outdir, want, what, fails):
    got = np.load(os.path.join(outdir, "o.npy")).astype(np.float64)
    err = np.abs(got - want).max() / np.abs(want).max()
    print("%-44s max rel err %.2e" % (what, err))
    if not err <= 2e-5:
        fails.append("%s: max relative error %.3g > 2e-5" % (what, err))


def main():
    if sys.argv[1] == "--graphs":
        text_graphs(sys.argv[2])
        return 0
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    fails = []
    cases = [(2, 2, 40, 64, 2, 4, True), (2, 4, 40, 64, 2, 32, False), (1, 2, 100, 128, 4, 4, True)]
    for i, (B, T, S, D, H, bits, vb) in enumerate(cases):
        tag = "B%d_T%d_S%d_D%d_H%d_bits%d%s" % (B, T, S, D, H, bits, "_bias" if vb else "")
        d = os.path.join(work, tag)
        os.makedirs(d, exist_ok=True)
        model = os.path.join(d, "model.onnx")
        q, x, want = make(model, B, T, S, D, H, bits, vb, 7 + i)
        np.save(os.path.join(d, "q.npy"), q)
        np.save(os.path.join(d, "x.npy"), x)
        ins = ["--input", "q=" + os.path.join(d, "q.npy"), "--input", "x=" + os.path.join(d, "x.npy")]
        # reference executor, original graph
        if run(["run", model] + ins + ["--output-dir", os.path.join(d, "ref")], tag, fails):
            check(os.path.join(d, "ref"), want, tag + " ref original", fails)
        # the rewritten graph on the reference executor
        rw = os.path.join(d, "absorbed.onnx")
        if run([model, "--absorb-cross-kv", "-o", rw], tag, fails):
            ops = [(n.op_type, {a.name: helper.get_attribute_value(a) for a in n.attribute})
                   for n in onnx.load(rw).graph.node]
            heads = [a.get("heads") for op, a in ops if op == "WhisperAttention"]
            groups = [a.get("groups") for op, a in ops if op == "MatMulNBits"]
            if heads != [1] or groups != [H, H]:
                fails.append("%s: rewritten graph has attention heads %s and MatMulNBits groups %s, not [1] and [%d, %d]"
                             % (tag, heads, groups, H, H))
            if run(["run", rw] + ins + ["--output-dir", os.path.join(d, "ref_abs")], tag, fails):
                check(os.path.join(d, "ref_abs"), want, tag + " ref absorbed", fails)
        # host, absorbed (default) and not
        for flag, sub in (([], "host"), (["--no-absorb-cross-kv"], "host_noabs")):
            mod = os.path.join(d, sub + ".mod")
            if not run([model, "--target", "host", "--no-autotune"] + flag + ["-o", mod], tag, fails):
                continue
            counts = json.load(open(os.path.join(mod, "manifest.json")))["programs"][0]["op_counts"]
            absorbed = counts.get("Reshape", 0) == 2
            if absorbed != (not flag):
                fails.append("%s: %s: op_counts %s (absorbed: %s)" % (tag, sub, counts, absorbed))
            if run(["run", mod] + ins + ["--output-dir", os.path.join(d, sub)], tag, fails):
                check(os.path.join(d, sub), want, tag + " " + sub, fails)
    for f in fails:
        print("FAIL: " + f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
