#!/usr/bin/python3
"""Host kernels of kgen_matmul.c / kgen_elementwise.c / kgen_norm.c against
the reference executor: each case is a tiny graph (textual ONNX, weights as
initializers), run with `wlower run MODEL.onnxtxt` (reference) and compiled
with `wlower MODEL --target host -o DIR` + `wlower run DIR --threads 2`;
float outputs must reach PSNR >= 90 dB, integer outputs must be equal (Reshape and
Transpose, data movement: every output equal).
The int8 GEMM (ai.wlower.QMatMul, kgen_qmatmul.c) and the int8 edges
(QuantizeLinear / DequantizeLinear) must be bit-exact, float and int8 outputs alike, on each path: VNNI 512-bit (native here when the CPU
has AVX512-VNNI), AVX-VNNI 256-bit (--cpu alderlake, only where the CPU has
avx_vnni), pmaddwd 512-bit (WLOWER_HOST_NO_VNNI=1) and AVX2 pmaddwd
(--cpu x86-64-v3).
ai.wlower.QGather (int8 rows x a float scale per row, kgen_quant.c) too, bit-exact.
Shapes are chosen to hit the tails (N not a multiple of the panel width, M
not a multiple of MR, K not a multiple of the vector width, splits).

usage: test_hostgen_kernels.py WLOWER WORKDIR [--only NAME,...] [--cpu NAME]
  --cpu NAME: compile the cases that name no CPU, flags or environment of
           their own for --cpu NAME (e.g. x86-64: SSE2 without FMA3 or AVX2);
           the others are listed as not run.
       test_hostgen_kernels.py WLOWER WORKDIR --bench [--threads 2]
  --bench: MatMulNBits 4-bit M=1500 K=384 N=1536 (Whisper-tiny fc1 shape);
           prints median ms and GFLOP/s of the host module.
"""
import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np

PSNR_MIN = 90.0
PSNR_BF16 = 45.0   # bf16 inputs (8-bit mantissa), float sums over K <= 96


def psnr(ref, got):
    ref = ref.astype(np.float64)
    got = got.astype(np.float64)
    if ref.shape != got.shape:
        return -1.0, "shape %s vs %s" % (ref.shape, got.shape)
    if not np.all(np.isfinite(got)):
        return -1.0, "non-finite values"
    mse = float(np.mean((ref - got) ** 2))
    peak = float(np.max(np.abs(ref))) if ref.size else 1.0
    if mse == 0:
        return math.inf, "exact"
    return 10 * math.log10(peak * peak / mse), "max err %.3g" % float(np.max(np.abs(ref - got)))


def sh(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1800)


DT = {np.float32: "float", np.uint8: "uint8", np.int8: "int8", np.int64: "int64", np.int32: "int32"}


def tdecl(a):
    if a.ndim == 0:
        return DT[a.dtype.type]
    return "%s[%s]" % (DT[a.dtype.type], ",".join(str(s) for s in a.shape))


def lit(a):
    if a.dtype == np.float32:
        return ", ".join("%.9g" % v for v in a.ravel())
    return ", ".join(str(int(v)) for v in a.ravel())


def graph(nodes, ins, inits, outs):
    """nodes: text lines; ins: {name: array}; inits: {name: array}; outs: [(name, dtype, shape)]."""
    sig_in = ", ".join("%s %s" % (tdecl(a), n) for n, a in ins.items())
    sig_out = ", ".join("%s[%s] %s" % (dt, ",".join(map(str, s)), n) for n, dt, s in outs)
    init = ""
    if inits:
        init = "\n  <" + ",\n   ".join("%s %s = {%s}" % (tdecl(a), n, lit(a)) for n, a in inits.items()) + ">"
    body = "\n".join("   " + l for l in nodes)
    return ('<ir_version: 8, opset_import: ["" : 17, "ai.wlower" : 1]>\n'
            "g (%s) => (%s)%s {\n%s\n}\n" % (sig_in, sig_out, init, body))


def rnd(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def ints(v):
    return "[" + ", ".join(str(x) for x in v) + "]"


# ---------------------------------------------------------------- cases

def mm4(name, rng, M=37, K=64, N=80, block=32, zp="packed", bias=True, splits=None, lead=(1,)):
    """splits: one ai.wlower.MatMulNBits per entry reading the same x (the
    host compile's fuse-qkv joins them into one node with `splits`)."""
    kb = (K + block - 1) // block   # a K that is not a multiple of the block: the last one is partial
    x = rnd(rng, tuple(lead) + (M, K))
    inits, nodes, outs = {}, [], []
    for i, n in enumerate(splits or [N]):
        inits["q%d" % i] = rng.integers(0, 256, (n, kb, block // 2), dtype=np.uint8)
        inits["s%d" % i] = (rng.random(n * kb) * 0.05 + 0.01).astype(np.float32)
        args = ["x", "q%d" % i, "s%d" % i, "", ""]
        if zp == "packed":
            inits["zp%d" % i] = rng.integers(0, 256, (n, (kb * 4 + 7) // 8), dtype=np.uint8)
            args[3] = "zp%d" % i
        elif zp == "float":
            inits["zp%d" % i] = (rng.random(n * kb) * 15).astype(np.float32)
            args[3] = "zp%d" % i
        if bias:
            inits["b%d" % i] = rnd(rng, (n,))
            args[4] = "b%d" % i
        while args[-1] == "":
            args.pop()
        at = "K = %d, N = %d, bits = 4, block_size = %d" % (K, n, block)
        nodes.append("y%d = ai.wlower.MatMulNBits <%s> (%s)" % (i, at, ", ".join(args)))
        outs.append(("y%d" % i, "float", tuple(lead) + (M, n)))
    return name, graph(nodes, {"x": x}, inits, outs), {"x": x}


def mm32(name, rng, M=13, K=24, N=40, bias=True, trans_b=0, splits=None):
    x = rnd(rng, (M, K))
    inits, nodes, outs = {}, [], []
    for i, n in enumerate(splits or [N]):
        inits["w%d" % i] = rnd(rng, (n, K) if trans_b else (K, n), 0.3)
        args = ["x", "w%d" % i, "", "", ""]
        if bias:
            inits["b%d" % i] = rnd(rng, (n,))
            args[4] = "b%d" % i
        while args[-1] == "":
            args.pop()
        at = "K = %d, N = %d, bits = 32" % (K, n)
        if trans_b:
            at += ", trans_b = 1"
        nodes.append("y%d = ai.wlower.MatMulNBits <%s> (%s)" % (i, at, ", ".join(args)))
        outs.append(("y%d" % i, "float", (M, n)))
    return name, graph(nodes, {"x": x}, inits, outs), {"x": x}


def mm32_groups(name, rng, K=384, N=2304, G=6, Ms=(1, 4, 13), opts=None):
    """ai.wlower.MatMulNBits <bits = 32, groups = G>: B float32 [K, N/G] holds the
    diagonal blocks of a block-diagonal [K, N] weight (absorb-cross-kv's q times
    every head's K weight). Per M (M = 4 as Whisper's [1, 4, 384] query; 1 and
    13 for the small-M and MR-tail tiles) one node with bias and one without,
    all reading one weight. The reference executor's outputs are also checked
    against numpy's block-diagonal product (opts "expect"), so its grouped
    semantics are not only compared with themselves."""
    Kg, Ng = K // G, N // G
    w = rnd(rng, (K, Ng), 0.3)
    b = rnd(rng, (N,))
    inits = {"w": w, "b": b}
    ins, nodes, outs, expect = {}, [], [], {}
    for M in Ms:
        shape = (1, M, K) if M == 4 else (M, K)
        x = rnd(rng, shape)
        ins["x%d" % M] = x
        x2 = x.reshape(-1, K).astype(np.float64)
        y = np.concatenate([x2[:, g * Kg:(g + 1) * Kg] @ w[g * Kg:(g + 1) * Kg].astype(np.float64)
                            for g in range(G)], axis=1)
        at = "K = %d, N = %d, bits = 32, groups = %d" % (K, N, G)
        for tag, args, yy in (("b", "x%d, w, , , b" % M, y + b), ("nb", "x%d, w" % M, y)):
            o = "y%d_%s" % (M, tag)
            nodes.append("%s = ai.wlower.MatMulNBits <%s> (%s)" % (o, at, args))
            outs.append((o, "float", shape[:-1] + (N,)))
            expect[o + ".npy"] = yy.reshape(shape[:-1] + (N,))
    o = {"expect": expect}
    o.update(opts or {})
    return name, graph(nodes, ins, inits, outs), ins, o


def mm_epilogue(name, rng, bits=4, M=21, K=64, N=48, trans_b=0, gelu=True, res="before", extra_user=False, groups=1):
    """MatMulNBits -> ai.wlower.Gelu -> Add(residual): the host compile fuses
    the GELU and the residual add into the GEMM epilogue when the residual is
    computed before the matmul (res="before"); res="after" (computed later)
    and extra_user (the matmul output also a graph output) must not fuse.
    groups (bits 32): the weight is [K, N/groups], block diagonal."""
    x = rnd(rng, (1, M, K))
    r = rnd(rng, (1, M, N))
    inits = {}
    if bits == 4:
        kb = K // 32
        inits["q"] = rng.integers(0, 256, (N, kb, 16), dtype=np.uint8)
        inits["s"] = (rng.random(N * kb) * 0.05 + 0.01).astype(np.float32)
        inits["b"] = rnd(rng, (N,))
        node = "t = ai.wlower.MatMulNBits <K = %d, N = %d, bits = 4, block_size = 32> (x, q, s, , b)" % (K, N)
    else:
        inits["w"] = rnd(rng, (N, K) if trans_b else (K, N // groups), 0.3)
        inits["b"] = rnd(rng, (N,))
        node = "t = ai.wlower.MatMulNBits <K = %d, N = %d, bits = 32%s%s> (x, w, , , b)" % (
            K, N, ", trans_b = 1" if trans_b else "", ", groups = %d" % groups if groups > 1 else "")
    nodes = []
    ins = {"x": x, "r": r}
    if res == "before":
        nodes.append("rr = Mul (r, r)")
    nodes.append(node)
    if res == "after":
        nodes.append("rr = Mul (r, r)")
    nodes.append("g = ai.wlower.Gelu (t)" if gelu else "g = Identity (t)")
    nodes.append("y = Add (rr, g)")
    outs = [("y", "float", (1, M, N))]
    if extra_user:
        outs.append(("t", "float", (1, M, N)))
    return name, graph(nodes, ins, inits, outs), ins


def tied(name, rng, V=37, K=40, T=3, extra=False):
    """A tied table: the embedding Gather of W [V, K] and the LM head (bits 32,
    trans_b) read the same W; extra: W also feeds a Mul (a graph output)."""
    ids = np.array([[0, V - 1] + list(rng.integers(-V, V, T - 2))], dtype=np.int64)
    inits = {"w": rnd(rng, (V, K), 0.3)}
    nodes = ["e = Gather <axis = 0> (w, ids)", "h = Mul (e, e)",
             "y = ai.wlower.MatMulNBits <K = %d, N = %d, bits = 32, trans_b = 1> (h, w)" % (K, V)]
    outs = [("e", "float", (1, T, K)), ("y", "float", (1, T, V))]
    if extra:
        nodes.append("w2 = Mul (w, w)")
        outs.append(("w2", "float", (V, K)))
    return name, graph(nodes, {"ids": ids}, inits, outs), {"ids": ids}


def norm(name, rng, op="LayerNormalization", shape=(2, 5, 48), bias=True):
    D = shape[-1]
    x = rnd(rng, shape, 2.0) + 0.5
    inits = {"g": rnd(rng, (D,)), }
    args = "x, g"
    if op == "LayerNormalization":
        if bias:
            inits["b"] = rnd(rng, (D,))
            args += ", b"
        node = "y = LayerNormalization <axis = -1, epsilon = 1e-5> (%s)" % args
    else:
        node = "y = ai.wlower.RMSNorm <epsilon = 1e-6> (%s)" % args
    return name, graph([node], {"x": x}, inits, [("y", "float", shape)]), {"x": x}


def binop(name, rng, op, a_shape, b_shape, out_shape, b_const=False):
    a = rnd(rng, a_shape)
    b = rnd(rng, b_shape)
    ins = {"a": a}
    inits = {}
    if b_const:
        inits["b"] = b
    else:
        ins["b"] = b
    return name, graph(["y = %s (a, b)" % op], ins, inits, [("y", "float", out_shape)]), ins


def unary(name, rng, node, shape=(3, 7, 45), scale=3.0):
    x = rnd(rng, shape, scale)
    return name, graph(["y = " + node + " (x)"], {"x": x}, {}, [("y", "float", shape)]), {"x": x}


def gather(name, rng):
    data = rnd(rng, (50, 24))
    idx = np.array([[3, 0, 49, -1]], dtype=np.int64)
    g = graph(["y = Gather <axis = 0> (e, ids)"], {"ids": idx}, {"e": data}, [("y", "float", (1, 4, 24))])
    return name, g, {"ids": idx}


def qgather(name, rng):
    """ai.wlower.QGather: int8 rows times one float scale per row (a zero-scale
    row of zeros too), int32 ids with a negative one; bit for bit."""
    tab = rng.integers(-128, 128, (50, 24), dtype=np.int8)
    tab[7] = 0
    sc = (rng.random(50) * 0.05 + 1e-3).astype(np.float32)
    sc[7] = 0
    idx = np.array([[3, 0, 49, -1, 7]], dtype=np.int32)
    g = graph(["y = ai.wlower.QGather (t, s, ids)"], {"ids": idx}, {"t": tab, "s": sc}, [("y", "float", (1, 5, 24))])
    return name, g, {"ids": idx}, {"exact": True}


def argmax(name, rng):
    x = rnd(rng, (2, 3, 100))
    x[0, 1, 7] = x[0, 1, 9] = 50.0   # tie: first index
    return name, graph(["y = ai.wlower.GreedyArgMax (x)"], {"x": x}, {}, [("y", "int32", (2, 3))]), {"x": x}


def qmm(name, rng, M=37, K=67, N=45, per_channel=False, qout=False, zx=5, extreme=False, lead=(1,), opts=None):
    """ai.wlower.QMatMul: xq int8 input, int8 weights [K, N], per-tensor or
    per-channel scales, float or int8 (requantized) output. extreme: every
    x and w -128 and zx 127 (|x - zx| = 255: the largest products, the
    column-sum correction and the pmaddwd pairs at their limits)."""
    if extreme:
        xq = np.full(tuple(lead) + (M, K), -128, dtype=np.int8)
        w = np.full((K, N), -128, dtype=np.int8)
        w[:, ::3] = 127
    else:
        xq = rng.integers(-128, 128, tuple(lead) + (M, K), dtype=np.int8)
        w = rng.integers(-128, 128, (K, N), dtype=np.int8)
    inits = {"sx": np.array([0.0173], dtype=np.float32), "zx": np.array([zx], dtype=np.int8), "w": w,
             "sw": ((rng.random(N) * 0.02 + 0.001) if per_channel else np.array([0.0041])).astype(np.float32)}
    args = "xq, sx, zx, w, sw"
    odt = "float"
    if qout:
        # a y scale that saturates part of the outputs
        inits["sy"] = np.array([0.35 if not extreme else 40.0], dtype=np.float32)
        inits["zy"] = np.array([-3], dtype=np.int8)
        args += ", sy, zy"
        odt = "int8"
    g = graph(["y = ai.wlower.QMatMul (%s)" % args], {"xq": xq}, inits, [("y", odt, tuple(lead) + (M, N))])
    o = {"exact": True}
    o.update(opts or {})
    return name, g, {"xq": xq}, o


def qdq_chain(name, rng, M=11, K=40, N=37, opts=None):
    """QuantizeLinear -> QMatMul (int8 out) -> DequantizeLinear (the fused form
    of a QDQ MatMul), and a separate QuantizeLinear -> DequantizeLinear of the
    input with saturation and exact ties (x = 2.5 steps): host Quantize/
    DequantizeLinear kernels bit-exact with the reference."""
    x = rnd(rng, (1, M, K), 2.0)
    x[0, 0, :4] = [0.125, -0.125, 50.0, -50.0]   # ties at s 0.05 (2.5 steps), saturation
    inits = {"sx": np.array([0.05], dtype=np.float32), "zx": np.array([-3], dtype=np.int8),
             "w": rng.integers(-128, 128, (K, N), dtype=np.int8),
             "sw": (rng.random(N) * 0.01 + 0.001).astype(np.float32),
             "sy": np.array([0.07], dtype=np.float32), "zy": np.array([4], dtype=np.int8)}
    nodes = ["xq = QuantizeLinear (x, sx, zx)",
             "yq = ai.wlower.QMatMul (xq, sx, zx, w, sw, sy, zy)",
             "y = DequantizeLinear (yq, sy, zy)",
             "xr = DequantizeLinear (xq, sx, zx)"]
    g = graph(nodes, {"x": x}, inits, [("y", "float", (1, M, N)), ("xr", "float", (1, M, K))])
    o = {"exact": True}
    o.update(opts or {})
    return name, g, {"x": x}, o


def mm4_multi(name, rng, M=50, shapes=((80, 50), (81, 96), (96, 64)), opts=None):
    """one 4-bit MatMulNBits (packed zero points, bias) per (K, N), each with
    its own input x<i>: K tails (a partial last block, an odd K), N tails,
    M = 50 (an MR tail in every register tile)"""
    inits, nodes, outs, feeds = {}, [], [], {}
    for i, (K, n) in enumerate(shapes):
        kb = (K + 31) // 32
        feeds["x%d" % i] = rnd(rng, (M, K))
        inits["q%d" % i] = rng.integers(0, 256, (n, kb, 16), dtype=np.uint8)
        inits["s%d" % i] = (rng.random(n * kb) * 0.05 + 0.01).astype(np.float32)
        inits["zp%d" % i] = rng.integers(0, 256, (n, (kb * 4 + 7) // 8), dtype=np.uint8)
        inits["b%d" % i] = rnd(rng, (n,))
        nodes.append("y%d = ai.wlower.MatMulNBits <K = %d, N = %d, bits = 4, block_size = 32> (x%d, q%d, s%d, zp%d, b%d)"
                     % (i, K, n, i, i, i, i, i))
        outs.append(("y%d" % i, "float", (M, n)))
    return name, graph(nodes, feeds, inits, outs), feeds, opts


def mm_variant_cases(rng):
    """every register tile the autotune can pick (kgen_matmul.c tiles512 /
    tiles256), forced with WLOWER_HOST_MM_BLOCKING=MR,NV,MC,KC: M blocks of
    2·MR rows (the last one partial), K blocks of 32 (several, the last one
    partial); then kc >= K (one K block) and the in-register path (MC 0)."""
    def forced(b, cpu=None):
        o = {"env": {"WLOWER_HOST_MM_BLOCKING": b}}
        if cpu:
            o["cpu"] = cpu
        return o
    out = []
    if cpu_flag("avx512f"):
        for mr, nv in ((12, 2), (8, 3), (6, 4), (14, 2)):
            out.append(mm4_multi("mm4_tile%dx%d" % (mr, nv), rng, opts=forced("%d,%d,%d,32" % (mr, nv, 2 * mr))))
        out.append(mm4_multi("mm4_tile12x2_kcfull", rng, opts=forced("12,2,24,4096")))
        out.append(mm4_multi("mm4_inregister_ktail", rng, opts=forced("12,2,0,0")))
    if cpu_flag("avx512_bf16"):
        # --host-precision bf16 (vdpbf16ps; A and W rounded to bf16: PSNR_BF16)
        for b in ("12,2,24,32", "8,3,16,4096"):
            o = forced(b)
            o["flags"] = ["--host-precision", "bf16"]
            o["psnr"] = PSNR_BF16
            out.append(mm4_multi("mm4_bf16_%s" % b.replace(",", "_"), rng, opts=o))
        # float weights (bits 32) repacked into bf16 panels at compile time: an odd K
        # and N tails on the model's blocking; several K blocks (forced kc 32, K 100);
        # splits; the GELU + residual epilogue; M = 3 and 1 (the in-register path: A pairs
        # rounded on the fly, an odd K's last pair (a, 0), N groups)
        bf = {"flags": ["--host-precision", "bf16"], "psnr": PSNR_BF16}
        out.append(mm32("mm32_bf16_oddk", rng, M=50, K=67, N=45) + (dict(bf),))
        out.append(mm32("mm32_bf16_kblocks", rng, M=40, K=100, N=70)
                   + (dict(bf, env={"WLOWER_HOST_MM_BLOCKING": "8,3,16,32"}),))
        out.append(mm32("mm32_bf16_splits", rng, M=64, K=48, N=80, splits=[32, 20, 28]) + (dict(bf),))
        out.append(mm_epilogue("mm32_bf16_gelu_res", rng, bits=32, M=60, N=40) + (dict(bf),))
        out.append(mm32("mm32_bf16_m3", rng, M=3, K=40, N=37) + (dict(bf),))
        out.append(mm32("mm32_bf16_m1_oddk", rng, M=1, K=41, N=300) + (dict(bf),))
        # trans_b (the tied LM head read in place): a bf16 copy of W, dot products
        # by vdpbf16ps over K rounded up to 32; K and N tails, M below and above 4
        out.append(mm32("mm32_bf16_transb", rng, M=3, K=40, N=37, trans_b=1) + (dict(bf),))
        out.append(mm_epilogue("mm32_bf16_transb_gelu_res", rng, bits=32, trans_b=1, M=21, K=70, N=37) + (dict(bf),))
        # a tied table: the embedding Gather reads the head's bf16 rows (widened; negative
        # ids, a K tail), the float table leaves weights.bin; with a third user it stays
        out.append(tied("tied_bf16", rng) + (dict(bf),))
        out.append(tied("tied_bf16_k384", rng, V=300, K=384, T=5) + (dict(bf),))
        out.append(tied("tied_bf16_extra", rng, extra=True) + (dict(bf),))
        # grouped float weights are not repacked: they stay fp32 (PSNR_MIN)
        out.append(mm32_groups("mm32_groups_bf16_stays_f32", rng, K=64, N=128, G=2,
                               opts={"flags": ["--host-precision", "bf16"]}))
    for mr, nv in ((6, 2), (4, 3), (3, 3)):
        out.append(mm4_multi("mm4_avx2_tile%dx%d" % (mr, nv), rng,
                             opts=forced("%d,%d,%d,32" % (mr, nv, 2 * mr), cpu="x86-64-v3")))
    # groups on AVX2 (panel width 16)
    out.append(mm32_groups("mm32_groups_k384_g6_avx2", rng, opts={"cpu": "x86-64-v3"}))
    out.append(mm32_groups("mm32_groups_k64_g2_avx2", rng, K=64, N=128, G=2, opts={"cpu": "x86-64-v3"}))
    return out


def autotune_check(wlower, work):
    """--cpu native on a shape big enough for the panel path: the first compile
    measures (manifest how "autotune", one line in the cache), the second takes
    the cached choice (no new line, the same module.so), --no-autotune the
    model's ("model"); each module's output vs the reference executor."""
    rng = np.random.default_rng(3)
    name, text, feeds, _ = mm4_multi("autotune", rng, M=96, shapes=((64, 64),))
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    cache = os.path.join(d, "autotune.tsv")
    if os.path.exists(cache):
        os.remove(cache)
    msgs, ok, sos = [], True, []
    for flags, want, lines in ((["--cpu", "native"], "autotune", 1), (["--cpu", "native"], "autotune", 1),
                               (["--no-autotune"], "model", 1)):
        good, msg = run_case(wlower, work, name, text, feeds, 2,
                             {"env": {"WLOWER_AUTOTUNE_CACHE": cache}, "flags": flags})
        man = json.load(open(os.path.join(d, "mod", "manifest.json")))
        bl = man["programs"][0].get("matmul_blocking", [])
        how = bl[0]["how"] if bl else "none"
        n = len(open(cache).read().splitlines()) if os.path.exists(cache) else 0
        sos.append(open(os.path.join(d, "mod", "module.so"), "rb").read())
        good &= how == want and n == lines
        msgs.append("%s: %s, cache lines %d, %s" % (" ".join(flags), how, n, msg))
        ok &= good
    same = sos[0] == sos[1]
    msgs.append("cached compile same module.so: %s" % same)
    return ok and same, "; ".join(msgs)


def cpu_flag(flag):
    try:
        return (" " + flag + " ") in open("/proc/cpuinfo").read().replace("\n", " ")
    except OSError:
        return False


def qmm_cases(rng):
    out = [
        qmm("qmm_pt_f32_tails", rng),
        qmm("qmm_pc_q8", rng, M=9, K=64, N=32, per_channel=True, qout=True, zx=-20),
        qmm("qmm_m1_k1_n1", rng, M=1, K=1, N=1),
        qmm("qmm_k2_q8_m13", rng, M=13, K=2, N=70, qout=True, per_channel=True),
        qmm("qmm_extreme", rng, M=5, K=130, N=35, zx=127, extreme=True),
        qmm("qmm_extreme_q8", rng, M=3, K=131, N=17, zx=127, extreme=True, qout=True),
        qdq_chain("qdq_chain", rng),
    ]
    # the other instruction paths (CI budget: the cases that reach their tails
    # and limits; the int8 epilogue is shared by every path)
    out += [
        qmm("qmm_pt_f32_tails_avx2", rng, opts={"cpu": "x86-64-v3"}),
        qmm("qmm_pc_q8_avx2", rng, M=9, K=64, N=32, per_channel=True, qout=True, zx=-20, opts={"cpu": "x86-64-v3"}),
        qmm("qmm_extreme_avx2", rng, M=5, K=131, N=35, zx=127, extreme=True, opts={"cpu": "x86-64-v3"}),
        qmm("qmm_pt_f32_tails_pmaddwd", rng, opts={"env": {"WLOWER_HOST_NO_VNNI": "1"}}),
    ]
    if cpu_flag("avx_vnni"):
        out += [
            qmm("qmm_pt_f32_tails_avxvnni", rng, opts={"cpu": "alderlake"}),
            qmm("qmm_extreme_avxvnni", rng, M=5, K=131, N=35, zx=127, extreme=True, opts={"cpu": "alderlake"}),
        ]
    return out


def io_copies(name, rng):
    """graph outputs not written by a kernel: an initializer, an Identity of
    another output (copied by the module's copy_outputs)"""
    x = rnd(rng, (2, 3))
    c = rnd(rng, (2,))
    g = graph(["y = Add (x, x)", "y2 = Identity (y)"], {"x": x}, {"c": c},
              [("y", "float", (2, 3)), ("c", "float", (2,)), ("y2", "float", (2, 3))])
    return name, g, {"x": x}


def qdq_tensor(name, rng):
    """QuantizeLinear int8 per tensor (zp 3, scale 0.25 so that x / scale hits
    exact halves: round half to even; values beyond the range saturate; NaN
    gives zp), 18000 elements (several chunks), then DequantizeLinear of it."""
    x = rnd(rng, (2, 9000), 20.0)
    x[0, :8] = np.array([0.125, 0.375, -0.125, -0.375, 0.625, 100.0, -100.0, np.nan], np.float32)
    inits = {"s": np.array(0.25, np.float32), "z": np.array(3, np.int8)}
    g = graph(["q = QuantizeLinear (x, s, z)", "y = DequantizeLinear (q, s, z)"], {"x": x}, inits,
              [("q", "int8", (2, 9000)), ("y", "float", (2, 9000))])
    return name, g, {"x": x}


def qdq_axis(name, rng):
    """per axis: QuantizeLinear uint8 axis 1 with zero points, and back;
    QuantizeLinear axis -1 without a zero point (uint8 by default);
    DequantizeLinear of an int8 graph input along axis 0 and of int32."""
    x = rnd(rng, (3, 5, 37), 3.0)
    x2 = rnd(rng, (4, 33), 2.0)
    q8 = rng.integers(-128, 128, (4, 33), dtype=np.int8)
    i32 = rng.integers(-100000, 100000, (7,), dtype=np.int32)
    inits = {"s1": (rng.random(5) * 0.05 + 0.01).astype(np.float32),
             "z1": rng.integers(0, 256, (5,), dtype=np.uint8),
             "s2": (rng.random(33) * 0.03 + 0.005).astype(np.float32),
             "s0": (rng.random(4) * 0.1 + 0.01).astype(np.float32),
             "z0": rng.integers(-128, 128, (4,), dtype=np.int8),
             "sc": np.array(0.001, np.float32)}
    nodes = ["q1 = QuantizeLinear <axis = 1> (x, s1, z1)", "y1 = DequantizeLinear <axis = 1> (q1, s1, z1)",
             "q2 = QuantizeLinear <axis = -1> (x2, s2)",
             "y0 = DequantizeLinear <axis = 0> (q8, s0, z0)", "y32 = DequantizeLinear (i32, sc)"]
    outs = [("q1", "uint8", (3, 5, 37)), ("y1", "float", (3, 5, 37)), ("q2", "uint8", (4, 33)),
            ("y0", "float", (4, 33)), ("y32", "float", (7,))]
    ins = {"x": x, "x2": x2, "q8": q8, "i32": i32}
    return name, graph(nodes, ins, inits, outs), ins


def heads(name, rng):
    """cross_kv's form: Reshape [1,M,d] -> [1,M,H,hd], Transpose 0,2,1,3 (rows of hd: memcpy);
    an int64 Transpose whose last axis moves (element loop); exact"""
    x = rnd(rng, (1, 37, 24))
    z = rng.integers(-2**40, 2**40, size=(3, 5, 7)).astype(np.int64)
    g = graph(["r = Reshape (x, sh)", "y = Transpose <perm = [0, 2, 1, 3]> (r)", "t = Transpose <perm = [2, 0, 1]> (z)"],
              {"x": x, "z": z}, {"sh": np.array([1, 37, 4, 6], dtype=np.int64)},
              [("y", "float", (1, 4, 37, 6)), ("t", "int64", (7, 3, 5))])
    return name, g, {"x": x, "z": z}


def cases(rng):
    return [
        mm4("mm4_zp_bias", rng),
        mm4("mm4_nozp_m4_splits", rng, M=4, K=128, N=80, zp=None, bias=False, splits=[32, 16, 32]),
        mm4("mm4_floatzp_m1", rng, M=1, K=64, N=33, zp="float", bias=True),
        # float zero points keep float offsets on the panel path too (packed and
        # default zero points are bytes there: host_zp_bytes)
        mm4("mm4_floatzp_panel", rng, M=100, K=96, N=80, zp="float", bias=True),
        mm4("mm4_nozp_panel", rng, M=100, K=96, N=80, zp=None, bias=False),
        mm4("mm4_block64_m25", rng, M=25, K=128, N=64, block=64, splits=[40, 24]),
        mm32("mm32_bias", rng),
        mm32("mm32_splits", rng, M=14, K=32, N=48, splits=[16, 20, 12]),
        # constant float weights packed at compile time into panel-major float panels
        # (host_f32p): a step's GEMV over a wide head with an N tail and an odd K, the
        # in-register path with an M tail, and both on AVX2
        mm32("mm32_f32p_m1_n300", rng, M=1, K=41, N=300),
        mm32("mm32_f32p_m50_oddk", rng, M=50, K=67, N=45),
        mm32("mm32_f32p_m1_n300_avx2", rng, M=1, K=41, N=300) + ({"cpu": "x86-64-v3"},),
        mm32("mm32_f32p_m50_oddk_avx2", rng, M=50, K=67, N=45) + ({"cpu": "x86-64-v3"},),
        mm32("mm32_transb", rng, M=3, K=40, N=37, trans_b=1),
        mm32("mm32_transb_m6", rng, M=6, K=32, N=9, trans_b=1, bias=False),
        mm32_groups("mm32_groups_k384_g6", rng),
        mm32_groups("mm32_groups_k64_g2", rng, K=64, N=128, G=2),
        mm_epilogue("mm4_gelu_res", rng),
        mm_epilogue("mm32_gelu_res_tail", rng, bits=32, N=40),
        mm_epilogue("mm32_transb_gelu_res", rng, bits=32, trans_b=1, N=37),
        mm_epilogue("mm32_groups_gelu_res", rng, bits=32, M=7, N=128, groups=2),
        mm_epilogue("mm4_res_after_nofuse", rng, res="after"),
        mm_epilogue("mm4_extra_user_nofuse", rng, extra_user=True),
        norm("layernorm", rng),
        norm("layernorm_tail_nobias", rng, shape=(3, 20), bias=False),
        norm("rmsnorm", rng, op="RMSNorm", shape=(2, 4, 40)),
        binop("add_same", rng, "Add", (2, 5, 48), (2, 5, 48), (2, 5, 48)),
        binop("add_suffix_const", rng, "Add", (2, 5, 48), (48,), (2, 5, 48), b_const=True),
        binop("mul_prefix", rng, "Mul", (5, 37), (5, 1), (5, 37)),
        binop("mul_scalar", rng, "Mul", (3, 33), (1,), (3, 33)),
        binop("add_pos", rng, "Add", (1, 7, 24), (7, 24), (1, 7, 24), b_const=True),
        unary("gelu", rng, 'ai.wlower.Gelu <approximate = "none">'),
        unary("gelu_tanh", rng, 'ai.wlower.Gelu <approximate = "tanh">'),
        unary("silu", rng, "ai.wlower.SiLU", scale=6.0),
        unary("cast", rng, "Cast <to = 1>"),
        gather("gather", rng),
        argmax("argmax", rng),
        io_copies("io_copies", rng),
        heads("reshape_transpose", rng),
        qdq_tensor("qdq_tensor", rng),
        qdq_axis("qdq_axis", rng),
    ] + qmm_cases(rng) + [qgather("qgather", rng)] + mm_variant_cases(rng)


def run_case(wlower, work, name, text, feeds, threads, opts=None):
    opts = opts or {}
    env = dict(os.environ, **opts.get("env", {}))
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    model = os.path.join(d, "model.onnxtxt")
    with open(model, "w") as f:
        f.write(text)
    args = []
    for k, v in feeds.items():
        p = os.path.join(d, k + ".npy")
        np.save(p, v)
        args += ["--input", "%s=%s" % (k, p)]
    r = sh([wlower, "run", model] + args + ["--output-dir", os.path.join(d, "ref")])
    if r.returncode:
        return False, "reference failed: " + r.stderr.strip()
    mod = os.path.join(d, "mod")
    r = subprocess.run([wlower, model, "--target", "host", "-o", mod] + (["--cpu", opts["cpu"]] if "cpu" in opts else [])
                       + opts.get("flags", []),
                       capture_output=True, text=True, timeout=1800, env=env)
    if r.returncode:
        return False, "compile failed: " + r.stderr.strip()
    r = sh([wlower, "run", mod, "--threads", str(threads)] + args + ["--output-dir", os.path.join(d, "out")])
    if r.returncode:
        return False, "host run failed: " + r.stderr.strip()
    msgs, ok = [], True
    # an independent expectation (numpy) for the reference executor's outputs
    for f, want in sorted(opts.get("expect", {}).items()):
        p, m = psnr(want, np.load(os.path.join(d, "ref", f)))
        ok &= p >= PSNR_MIN
        msgs.append("ref %s vs numpy %.1f dB (%s)" % (f, p, m))
    for f in sorted(f for f in os.listdir(os.path.join(d, "ref")) if f.endswith(".npy")):
        ref = np.load(os.path.join(d, "ref", f))
        got = np.load(os.path.join(d, "out", f))
        if ref.dtype.kind in "iu" or opts.get("exact") or name.startswith(("qdq", "reshape")):   # bit for bit
            same = ref.shape == got.shape and np.array_equal(ref, got, equal_nan=ref.dtype.kind == "f")
            ok &= same
            msgs.append("%s %s" % (f, "equal" if same else "DIFFERENT (%d of %d)" % (
                int(np.sum(ref != got)) if ref.shape == got.shape else -1, ref.size)))
        else:
            p, m = psnr(ref, got)
            ok &= p >= opts.get("psnr", PSNR_MIN)
            msgs.append("%s %.1f dB (%s)" % (f, p, m))
    return ok, "; ".join(msgs)


def bench(wlower, work, threads, M=1500, K=384, N=1536, reps=20):
    rng = np.random.default_rng(1)
    name, text, feeds = mm4("bench", rng, M=M, K=K, N=N, zp=None, bias=True)
    d = os.path.join(work, "bench")
    os.makedirs(d, exist_ok=True)
    # big initializers in text are slow to parse but fine once
    model = os.path.join(d, "model.onnxtxt")
    with open(model, "w") as f:
        f.write(text)
    np.save(os.path.join(d, "x.npy"), feeds["x"])
    r = sh([wlower, model, "--target", "host", "-o", os.path.join(d, "mod")])
    if r.returncode:
        print(r.stderr)
        return 1
    r = sh([wlower, "run", os.path.join(d, "mod"), "--threads", str(threads), "--input",
            "x=" + os.path.join(d, "x.npy"), "--output-dir", os.path.join(d, "out"), "--reps", str(reps)])
    print(r.stdout.strip(), r.stderr.strip())
    ms = float(r.stdout.split("median_ms=")[1].split()[0])
    print("MatMulNBits 4-bit M=%d K=%d N=%d threads=%d: %.3f ms, %.1f GFLOP/s" %
          (M, K, N, threads, ms, 2.0 * M * K * N / ms / 1e6))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("wlower")
    ap.add_argument("work")
    ap.add_argument("--only")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--cpu")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    if a.bench:
        return bench(a.wlower, a.work, a.threads)
    rng = np.random.default_rng(7)
    fails = 0
    skipped = []
    if not cpu_flag("avx512_bf16"):
        print("NOTE: the --host-precision bf16 cases are not run: this CPU has no AVX512-BF16 "
              "(tests/lit/host_matmul.onnxtxt checks the refusal)", flush=True)
    for case in cases(rng):
        name, text, feeds = case[:3]
        if a.only and name not in a.only.split(","):
            continue
        opts = dict(case[3]) if len(case) > 3 and case[3] else {}
        if a.cpu:
            if set(opts) & {"cpu", "flags", "env"}:
                skipped.append(name)
                continue
            opts["cpu"] = a.cpu
        ok, msg = run_case(a.wlower, a.work, name, text, feeds, a.threads, opts)
        print("%s %s: %s" % ("PASS" if ok else "FAIL", name, msg), flush=True)
        fails += not ok
    if skipped:
        print("NOTE: %d cases with their own CPU, flags or environment not run for --cpu %s: %s"
              % (len(skipped), a.cpu, ",".join(skipped)), flush=True)
    if not a.cpu and (not a.only or "autotune" in a.only.split(",")):
        ok, msg = autotune_check(a.wlower, a.work)
        print("%s autotune: %s" % ("PASS" if ok else "FAIL", msg), flush=True)
        fails += not ok
    print("%d failed" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
