#!/usr/bin/python3
"""Host kernels of kgen_attention.c / kgen_conv.c / kgen_logmel.c against the
reference executor: each case is a one-node fused graph (textual ONNX),
run with `wlower run MODEL.onnxtxt` (reference) and compiled with
`wlower MODEL --target host -o DIR` + `wlower run DIR`; every output must
reach PSNR >= 90 dB (and be finite). exp_libm / exp2_libm: the vectorised
exp (hg_exp, through the host Exp kernel) and the softmax's base-2 exponent
(hg_exp2, through the host kernel of Pow(2, x)) within 2 ulp of libm.

usage: test_host_kernels.py WLOWER WORKDIR [--only NAME,...] [--cpu CPU] [--bench]
  --bench: full-size Whisper-tiny kernels (encoder attention 6 heads x 1500 x 64,
           causal 448, conv stem 80x3000 -> 1500x384, log-mel of 30 s), 2 threads;
           prints median_ms of the reference and of the host module.
"""
import argparse
import math
import os
import subprocess
import sys

import numpy as np

PSNR_MIN = 90.0
PSNR_BF16 = 50.0   # --host-precision bf16: q, k, v and the probabilities rounded to bf16 (8-bit mantissa)


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
        return math.inf, "max err 0"
    return 10 * math.log10(peak * peak / mse), "max err %.3g" % float(np.max(np.abs(ref - got)))


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    return r


def tdecl(dt, shape):
    return "%s[%s]" % (dt, ",".join(str(s) for s in shape))


def graph(op, attrs, ins, outs, inits=()):
    """ins/outs: lists of (name, dtype, shape) (name '' = absent input);
    inits: (name, float32 array) pairs that are initializers instead of inputs."""
    init_names = set(n for n, _ in inits)
    sig_in = ", ".join(tdecl(dt, s) + " " + n for n, dt, s in ins if n and n not in init_names)
    sig_out = ", ".join(tdecl(dt, s) + " " + n for n, dt, s in outs)
    at = ", ".join("%s = %s" % kv for kv in attrs)
    args = ", ".join(n for n, _, _ in ins)
    # trailing absent inputs are dropped
    while args.endswith(", "):
        args = args[:-2]
    onames = ", ".join(n for n, _, _ in outs)
    init = ""
    if inits:
        init = " <" + ", ".join("%s %s = {%s}" % (tdecl("float", v.shape), n, ", ".join(repr(float(x)) for x in v.ravel()))
                                for n, v in inits) + ">"
    return ('<ir_version: 8, opset_import: ["" : 17, "ai.wlower" : 1]>\n'
            "g (%s) => (%s)%s {\n   %s = ai.wlower.%s <%s> (%s)\n}\n" % (sig_in, sig_out, init, onames, op, at, args))


def rnd(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def whisper_attn(name, B=1, T=37, S=37, H=2, hd=16, P=0, causal=0, bhsd=False, fp16=0, scale=None, rng=None):
    D = H * hd
    scale = scale if scale is not None else hd ** -0.5
    feeds = {"q": rnd(rng, (B, T, D))}
    kshape = (B, H, S, hd) if bhsd else (B, S, D)
    feeds["k"] = rnd(rng, kshape)
    feeds["v"] = rnd(rng, kshape)
    ins = [("q", "float", (B, T, D)), ("k", "float", kshape), ("v", "float", kshape)]
    outs = [("o", "float", (B, T, D))]
    if P:
        feeds["pk"] = rnd(rng, (B, H, P, hd))
        feeds["pv"] = rnd(rng, (B, H, P, hd))
        ins += [("pk", "float", (B, H, P, hd)), ("pv", "float", (B, H, P, hd))]
        outs += [("prk", "float", (B, H, P + S, hd)), ("prv", "float", (B, H, P + S, hd))]
    attrs = [("embed", D), ("heads", H), ("q_len", T), ("kv_len", P + S), ("causal", causal),
             ("scale", "%.9g" % scale), ("kv_layout", '"%s"' % ("bhsd" if bhsd else "bsd"))]
    if fp16:
        attrs.append(("fp16", 1))
    return name, graph("WhisperAttention", attrs, ins, outs), feeds


def gqa(name, B=1, T=5, H=4, Hkv=2, hd=16, P=0, causal=1, rope=1, mask=False, pos=False, fp16=0, rows=None,
        rng=None):
    feeds = {"q": rnd(rng, (B, T, H * hd)), "k": rnd(rng, (B, T, Hkv * hd)), "v": rnd(rng, (B, T, Hkv * hd))}
    ins = [("q", "float", (B, T, H * hd)), ("k", "float", (B, T, Hkv * hd)), ("v", "float", (B, T, Hkv * hd))]
    if rope:
        nrows = rows if pos else T
        inv = 1.0 / (10000 ** (np.arange(0, hd, 2) / hd))
        fr = np.outer(np.arange(nrows), inv)
        emb = np.concatenate([fr, fr], axis=-1)
        feeds["cos"] = np.cos(emb).astype(np.float32)
        feeds["sin"] = np.sin(emb).astype(np.float32)
        ins += [("cos", "float", (nrows, hd)), ("sin", "float", (nrows, hd))]
    else:
        ins += [("", "", ()), ("", "", ())]
    outs = [("o", "float", (B, T, H * hd))]
    if P:
        feeds["pk"] = rnd(rng, (B, Hkv, P, hd))
        feeds["pv"] = rnd(rng, (B, Hkv, P, hd))
        ins += [("pk", "float", (B, Hkv, P, hd)), ("pv", "float", (B, Hkv, P, hd))]
        outs += [("prk", "float", (B, Hkv, P + T, hd)), ("prv", "float", (B, Hkv, P + T, hd))]
    else:
        ins += [("", "", ()), ("", "", ())]
    if mask:
        m = np.ones((B, P + T), np.int64)
        m[:, 0] = 0   # left padding
        feeds["mask"] = m
        ins.append(("mask", "int64", (B, P + T)))
    else:
        ins.append(("", "", ()))
    if pos:
        feeds["pos"] = (np.arange(T, dtype=np.int64) + P).reshape(1, T)
        ins.append(("pos", "int64", (1, T)))
    attrs = [("heads", H), ("kv_heads", Hkv), ("head_dim", hd), ("scale", "%.9g" % hd ** -0.5),
             ("causal", causal), ("rope", rope)]
    if fp16:
        attrs.append(("fp16", 1))
    return name, graph("GroupQueryAttention", attrs, ins, outs), feeds


def gqa_static(name, B=1, T=1, H=4, Hkv=2, hd=16, P=40, nv=(7,), causal=1, rope=1, fp16=0, mask_dt="int64",
               rng=None):
    """static_cache = 1 (the LLM step): past_k/past_v are a cache of P rows of which
    rows < nv[b] are in use (mask 1; row 0 masked out too when nv > 2), then the T
    new rows; present = the T new rows. T <= 4 takes kgen_attention.c's decode path."""
    feeds = {"q": rnd(rng, (B, T, H * hd)), "k": rnd(rng, (B, T, Hkv * hd)), "v": rnd(rng, (B, T, Hkv * hd))}
    ins = [("q", "float", (B, T, H * hd)), ("k", "float", (B, T, Hkv * hd)), ("v", "float", (B, T, Hkv * hd))]
    rows = P + T
    if rope:
        inv = 1.0 / (10000 ** (np.arange(0, hd, 2) / hd))
        fr = np.outer(np.arange(rows), inv)
        emb = np.concatenate([fr, fr], axis=-1)
        feeds["cos"] = np.cos(emb).astype(np.float32)
        feeds["sin"] = np.sin(emb).astype(np.float32)
        ins += [("cos", "float", (rows, hd)), ("sin", "float", (rows, hd))]
    else:
        ins += [("", "", ()), ("", "", ())]
    feeds["pk"] = rnd(rng, (B, Hkv, P, hd))
    feeds["pv"] = rnd(rng, (B, Hkv, P, hd))
    ins += [("pk", "float", (B, Hkv, P, hd)), ("pv", "float", (B, Hkv, P, hd))]
    mdt = np.int64 if mask_dt == "int64" else np.int32
    m = np.zeros((B, P + T), mdt)
    for b in range(B):
        m[b, :nv[b]] = 1
        if nv[b] > 2:
            m[b, 0] = 0
    m[:, P:] = 1
    feeds["mask"] = m
    ins.append(("mask", mask_dt, (B, P + T)))
    pos = np.array([[max(nv) + t for t in range(T)]], np.int64)
    feeds["pos"] = pos
    ins.append(("pos", "int64", (1, T)))
    outs = [("o", "float", (B, T, H * hd)), ("prk", "float", (B, Hkv, T, hd)), ("prv", "float", (B, Hkv, T, hd))]
    attrs = [("heads", H), ("kv_heads", Hkv), ("head_dim", hd), ("scale", "%.9g" % hd ** -0.5),
             ("causal", causal), ("rope", rope), ("static_cache", 1)]
    if fp16:
        attrs.append(("fp16", 1))
    return name, graph("GroupQueryAttention", attrs, ins, outs), feeds


def conv_stem(name, B=1, C=6, F=21, D=40, const_w=False, rng=None):
    """const_w: W1 and W2 are initializers (the host packs them at compile time)."""
    F2 = (F - 1) // 2 + 1
    feeds = {"x": rnd(rng, (B, C, F)), "w1": rnd(rng, (D, C, 3), 0.3), "b1": rnd(rng, (D,), 0.1),
             "w2": rnd(rng, (D, D, 3), 0.1), "b2": rnd(rng, (D,), 0.1), "pos": rnd(rng, (F2, D))}
    ins = [("x", "float", (B, C, F)), ("w1", "float", (D, C, 3)), ("b1", "float", (D,)),
           ("w2", "float", (D, D, 3)), ("b2", "float", (D,)), ("pos", "float", (F2, D))]
    outs = [("y", "float", (B, F2, D))]
    inits = [(k, feeds.pop(k)) for k in ("w1", "w2")] if const_w else []
    return name, graph("ConvStem", [("strides", "[1, 2]"), ("pads", "[1, 1]")], ins, outs, inits), feeds


def logmel(name, N=4000, M=80, rng=None):
    t = np.arange(N) / 16000.0
    wav = (0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(N)).astype(np.float32)
    filt = np.abs(rnd(rng, (M, 201), 0.01))
    feeds = {"wav": wav.reshape(1, N), "filt": filt}
    ins = [("wav", "float", (1, N)), ("filt", "float", (M, 201))]
    outs = [("mel", "float", (1, M, N // 160))]
    return name, graph("LogMel", [("n_fft", 400), ("hop", 160), ("n_mels", M)], ins, outs), feeds


def cases(rng):
    return [
        whisper_attn("wa_self", rng=rng),
        whisper_attn("wa_self_hd64", T=70, S=70, H=3, hd=64, rng=rng),
        whisper_attn("wa_causal", T=33, S=33, causal=1, rng=rng),
        # several key blocks (64 keys on AVX-512, 32 on AVX2), the causal diagonal
        # inside and across blocks, a tail block, queries past a block of rows
        whisper_attn("wa_causal_blocks", T=141, S=141, H=2, hd=64, causal=1, rng=rng),
        whisper_attn("wa_cross", T=9, S=50, bhsd=True, rng=rng),
        # keys packed to a whole panel only: the last key block ends early (80 keys:
        # a block of 64 and a panel of 32 on AVX-512; 2 blocks of 32 and a panel of
        # 16 on AVX2), the first block is the last (10 keys); a missing panel's scores
        # are the -inf key bias
        whisper_attn("wa_key_tail", B=2, T=19, S=80, H=2, hd=64, rng=rng),
        whisper_attn("wa_key_tail_first", T=9, S=10, H=2, hd=32, rng=rng),
        whisper_attn("wa_key_tail_causal", T=80, S=80, H=1, hd=32, causal=1, rng=rng),
        # a step's cross-attention, q_len <= 4: the decode path (K/V read in place)
        whisper_attn("wa_xdec_step", T=1, S=1500, H=6, hd=64, bhsd=True, rng=rng),
        whisper_attn("wa_xdec_t4", T=4, S=37, H=2, hd=16, bhsd=True, rng=rng),
        whisper_attn("wa_xdec_b2_odd_hd", B=2, T=2, S=50, H=3, hd=6, bhsd=True, rng=rng),
        whisper_attn("wa_xdec_hd8", T=3, S=33, H=2, hd=8, bhsd=True, rng=rng),
        whisper_attn("wa_xdec_hd80", T=1, S=70, H=2, hd=80, bhsd=True, rng=rng),
        # the same over bsd K/V [B, S, D] (a prefill's cross-attention: rows of one
        # head D apart): Whisper's shape, 2 batches, hd 8 (below a vector: no key
        # packing across rows D apart), a masked head-dim tail
        whisper_attn("wa_xdec_bsd_prefill", T=4, S=1500, H=6, hd=64, rng=rng),
        whisper_attn("wa_xdec_bsd_b2", B=2, T=2, S=45, H=3, hd=16, rng=rng),
        whisper_attn("wa_xdec_bsd_hd8", T=3, S=33, H=2, hd=8, rng=rng),
        whisper_attn("wa_xdec_bsd_hd20", T=1, S=70, H=2, hd=20, rng=rng),
        # one (batch, head) of 24 rows of width 384 (absorb-cross-kv's shape): two attend
        # tasks, the pack cut in chunks of whole key blocks; and B * H = 4 < 8 heads
        whisper_attn("wa_pack_chunks", T=24, S=700, H=1, hd=384, rng=rng),
        whisper_attn("wa_pack_chunks_b2", B=2, T=9, S=600, H=2, hd=32, rng=rng),
        whisper_attn("wa_past", T=1, S=1, P=20, causal=1, rng=rng),
        whisper_attn("wa_past_t4", T=4, S=4, P=7, causal=1, rng=rng),
        whisper_attn("wa_fp16", T=20, S=20, fp16=1, rng=rng),
        whisper_attn("wa_odd_hd", T=11, S=13, H=3, hd=6, rng=rng),
        gqa("gqa_prefill", rng=rng),
        gqa("gqa_past_mask_pos", T=1, P=6, mask=True, pos=True, rows=32, rng=rng),
        gqa("gqa_prefill_mask_pos", T=6, P=3, mask=True, pos=True, rows=16, fp16=1, rng=rng),
        gqa("gqa_norope", T=9, rope=0, causal=0, H=6, Hkv=3, rng=rng),
        # static cache, decode path: empty cache (first step), head_dim 8 and 4 (< one vector:
        # keys packed in the P·V product; stories260K has 8) and 20 (a masked tail), nv across a key block (33, 65), the full
        # cache, T = 3 causal among the new rows, 2 batches with different nv, MHA and
        # group 4, int32 mask, fp16, no RoPE; T = 6 stays on the tiled path
        gqa_static("gqa_static_empty", nv=(0,), hd=8, H=8, Hkv=4, rng=rng),
        gqa_static("gqa_static_hd8", nv=(33,), hd=8, H=8, Hkv=4, P=64, rng=rng),
        gqa_static("gqa_static_tail", nv=(65,), hd=20, P=70, mask_dt="int32", rng=rng),
        gqa_static("gqa_static_full_t3", T=3, nv=(40,), hd=64, H=8, Hkv=2, rng=rng),
        gqa_static("gqa_static_b2", B=2, nv=(5, 31), H=2, Hkv=2, hd=32, fp16=1, rng=rng),
        gqa_static("gqa_static_hd4_g4", T=2, nv=(21,), hd=4, H=4, Hkv=1, P=24, rng=rng),
        gqa_static("gqa_static_norope", T=2, nv=(17,), rope=0, causal=0, hd=24, P=20, rng=rng),
        gqa_static("gqa_static_tiled_t6", T=6, nv=(9,), hd=16, P=24, rng=rng),
        conv_stem("stem_small", rng=rng),
        conv_stem("stem_wide", C=16, F=30, D=80, rng=rng),
        conv_stem("stem_tail", B=2, C=5, F=17, D=72, rng=rng),
        # constant W1/W2: packed at compile time into weights.bin (hg_prepare_conv_stem)
        conv_stem("stem_const_w", B=2, C=5, F=17, D=72, const_w=True, rng=rng),
        conv_stem("stem_const_w_odd_d", C=6, F=20, D=37, const_w=True, rng=rng),
        logmel("logmel_80", rng=rng),
        logmel("logmel_128", N=3300, M=128, rng=rng),
    ]


def bf16_cases(rng):
    """--host-precision bf16 (kgen_attention.c "bf16": Q·Kᵀ and P·V by
    vdpbf16ps on bf16 panels) on the tiled path: one and several key blocks,
    the causal diagonal, past rows, bhsd K/V, GQA with RoPE and a static
    cache; the ConvStem's two convolutions (odd channel counts, channel tails);
    an odd head dimension and the decode path stay float (PSNR_MIN)."""
    return [
        (whisper_attn("bf16_self", rng=rng), PSNR_BF16),
        (whisper_attn("bf16_hd64", T=70, S=70, H=3, hd=64, rng=rng), PSNR_BF16),
        (whisper_attn("bf16_causal_blocks", T=141, S=141, H=2, hd=64, causal=1, rng=rng), PSNR_BF16),
        (whisper_attn("bf16_cross", T=9, S=50, bhsd=True, rng=rng), PSNR_BF16),
        (whisper_attn("bf16_past_t4", T=4, S=4, P=7, causal=1, rng=rng), PSNR_BF16),
        (whisper_attn("bf16_hd6", T=11, S=13, H=3, hd=6, rng=rng), PSNR_BF16),
        (whisper_attn("bf16_pack_chunks", T=17, S=530, H=1, hd=64, rng=rng), PSNR_BF16),
        (whisper_attn("bf16_key_tail", B=2, T=19, S=80, H=2, hd=64, rng=rng), PSNR_BF16),
        (gqa("bf16_gqa_prefill", rng=rng), PSNR_BF16),
        (gqa_static("bf16_gqa_static_tiled_t6", T=6, nv=(9,), hd=16, P=24, rng=rng), PSNR_BF16),
        # ConvStem: bf16 pairs over the input channels (xT, h1 and both weight panels)
        (conv_stem("bf16_stem_small", rng=rng), PSNR_BF16),
        (conv_stem("bf16_stem_wide", C=16, F=30, D=80, rng=rng), PSNR_BF16),
        (conv_stem("bf16_stem_odd_c_tail", B=2, C=5, F=17, D=72, rng=rng), PSNR_BF16),
        (conv_stem("bf16_stem_odd_d", C=6, F=20, D=37, rng=rng), PSNR_BF16),
        (conv_stem("bf16_stem_const_w", B=2, C=5, F=17, D=37, const_w=True, rng=rng), PSNR_BF16),
        (whisper_attn("bf16_odd_hd_float", T=11, S=13, H=3, hd=5, rng=rng), PSNR_MIN),
        (whisper_attn("bf16_xdec_float", T=1, S=70, H=2, hd=16, bhsd=True, rng=rng), PSNR_MIN),
    ]


def cpu_flag(f):
    with open("/proc/cpuinfo") as fh:
        return any(l.startswith("flags") and f in l.split() for l in fh)


def run_case(wl, work, name, text, feeds, reps=0, threads=None, cpu=None, flags=(), psnr_min=PSNR_MIN):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    model = os.path.join(d, "model.onnxtxt")
    with open(model, "w") as f:
        f.write(text)
    inargs = []
    for k, v in feeds.items():
        p = os.path.join(d, k + ".npy")
        np.save(p, v)
        inargs += ["--input", "%s=%s" % (k, p)]
    extra = ["--reps", str(reps)] if reps else []
    thr = ["--threads", str(threads)] if threads else []
    r = sh([wl, "run", model, "--output-dir", os.path.join(d, "ref")] + inargs + extra + thr)
    if r.returncode:
        return False, "reference: " + r.stderr.strip()[-300:], None
    ref_ms = r.stdout.strip()
    mod = os.path.join(d, "mod")
    r = sh([wl, model, "--target", "host", "-o", mod] + (["--cpu", cpu] if cpu else []) + list(flags))
    if r.returncode:
        return False, "compile: " + r.stderr.strip()[-300:], None
    r = sh([wl, "run", mod, "--output-dir", os.path.join(d, "host")] + inargs + extra + thr)
    if r.returncode:
        return False, "host run: " + r.stderr.strip()[-300:], None
    host_ms = r.stdout.strip()
    msgs = []
    ok = True
    for f in sorted(f for f in os.listdir(os.path.join(d, "ref")) if f.endswith(".npy")):
        a = np.load(os.path.join(d, "ref", f))
        b = np.load(os.path.join(d, "host", f))
        p, why = psnr(a, b)
        msgs.append("%s psnr %.1f (%s)" % (f, p, why))
        ok = ok and p >= psnr_min
    return ok, "; ".join(msgs), (ref_ms, host_ms)


EXP_LO, EXP_HI, EXP_MAX_ULP = -87.0, 88.3762626647949, 2.0
EXP2_LO, EXP2_HI = -126.0, 127.0


def host_unary(wl, work, name, body, x, cpu=None):
    """Compiles `y = BODY` over float[n] x for the host and runs it on x: y, or an error."""
    n = x.size
    text = ('<ir_version: 8, opset_import: ["" : 17]>\n'
            "g (float[%d] x) => (float[%d] y) {\n%s\n}\n" % (n, n, body))
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.onnxtxt"), "w") as f:
        f.write(text)
    np.save(os.path.join(d, "x.npy"), x)
    r = sh([wl, os.path.join(d, "model.onnxtxt"), "--target", "host", "-o", os.path.join(d, "mod")] +
           (["--cpu", cpu] if cpu else []))
    if r.returncode:
        return None, "compile: " + r.stderr.strip()[-300:]
    r = sh([wl, "run", os.path.join(d, "mod"), "--input", "x=" + os.path.join(d, "x.npy"),
            "--output-dir", os.path.join(d, "host")])
    if r.returncode:
        return None, "host run: " + r.stderr.strip()[-300:]
    return np.load(os.path.join(d, "host", "y.npy")).astype(np.float64), ""


def ulp_check(x, y, lo, hi, fn):
    """max ulp of y against fn (double) over x in [lo, hi]: (ok, message)"""
    inr = (x >= np.float32(lo)) & (x <= np.float32(hi))
    true = np.array([fn(float(v)) for v in x[inr]])
    ulp = np.abs(y[inr] - true) / np.spacing(true.astype(np.float32)).astype(np.float64)
    worst = int(np.argmax(ulp))
    msg = "%d points in [%g, %g]: max %.2f ulp (x = %.9g), max rel err %.3g" % (
        int(inr.sum()), lo, hi, float(ulp[worst]), float(x[inr][worst]), float(np.max(np.abs(y[inr] / true - 1))))
    return bool(np.all(np.isfinite(y[inr]))) and float(ulp.max()) <= EXP_MAX_ULP, msg


def exp_libm(wl, work, cpu=None):
    """targets/host/hg_util.c hg_exp through the host Exp kernel against libm
    (math.exp in double): <= EXP_MAX_ULP ulp of the float result over
    [EXP_LO, EXP_HI] (a dense grid, random points in [-87, 0], both ends),
    exactly 0 below EXP_LO and for -inf, >= exp(EXP_HI) = 2.4e38 above
    EXP_HI (+inf past 88.72 with vscalefps), exp(0) = 1 exactly."""
    rng = np.random.default_rng(3)
    grid = np.linspace(EXP_LO, EXP_HI, 200001, dtype=np.float64).astype(np.float32)
    soft = (-rng.random(60000) * 87.0).astype(np.float32)
    small = (rng.standard_normal(20000) * 1e-3).astype(np.float32)
    edge = np.array([EXP_LO, np.nextafter(np.float32(EXP_LO), np.float32(0)), 0.0, -0.0, 1e-30, -1e-30,
                     np.float32(EXP_HI), -0.5 * math.log(2), 0.5 * math.log(2)], dtype=np.float32)
    below = np.array([-np.inf, -3.4028235e38, -1e4, -104.0, -87.5, np.nextafter(np.float32(EXP_LO), np.float32(-100))],
                     dtype=np.float32)
    above = np.array([88.5, 89.0, 100.0, 1e30, np.inf], dtype=np.float32)
    x = np.concatenate([grid, soft, small, edge, below, above]).astype(np.float32)
    y, err = host_unary(wl, work, "exp_libm", "   y = Exp (x)", x, cpu)
    if y is None:
        return False, err
    ok, msg = ulp_check(x, y, EXP_LO, EXP_HI, math.exp)
    msgs = [msg]
    over = y[x > np.float32(EXP_HI)]   # exp(x) or +inf (AVX-512: vscalefps), exp(EXP_HI) (AVX2: clamped)
    if over.size != above.size or not np.all(over >= 2.4e38):
        ok = False
        msgs.append("above %g: %s" % (EXP_HI, over[:5]))
    under = y[x < np.float32(EXP_LO)]
    if not np.all(under == 0.0):
        ok = False
        msgs.append("below %g not 0: %s" % (EXP_LO, under[under != 0][:4]))
    if y[grid.size + soft.size + small.size + 2] != 1.0:
        ok = False
        msgs.append("exp(0) = %r" % y[grid.size + soft.size + small.size + 2])
    return ok, "; ".join(msgs)


def exp2_libm(wl, work, cpu=None):
    """targets/host/hg_util.c hg_exp2 (the attention's softmax exponent, base
    2) through the host kernel of Pow(2, x) against libm (2.0 ** x in
    double): <= EXP_MAX_ULP ulp over [EXP2_LO, EXP2_HI] (a dense grid, random
    points in the softmax range [-150, 0], both ends); in [0, 2^-126] from
    -150 to EXP2_LO (subnormal, or 0 on AVX2); exactly 0 at and below -150
    and for -inf; >= 2^127 above EXP2_HI (+inf past 128 with vscalefps);
    2^0 = 1 exactly."""
    rng = np.random.default_rng(5)
    grid = np.linspace(EXP2_LO, EXP2_HI, 200001, dtype=np.float64).astype(np.float32)
    soft = (-rng.random(60000) * 150.0).astype(np.float32)
    small = (rng.standard_normal(20000) * 1e-3).astype(np.float32)
    edge = np.array([0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5, np.nextafter(np.float32(0.5), np.float32(1)),
                     np.nextafter(np.float32(-0.5), np.float32(-1)), EXP2_LO, EXP2_HI], dtype=np.float32)
    below = np.array([-np.inf, -3.4028235e38, -1e4, -200.0, -150.5, -150.0], dtype=np.float32)
    above = np.array([127.5, 128.5, 1e4, np.inf], dtype=np.float32)
    x = np.concatenate([grid, soft, small, edge, below, above]).astype(np.float32)
    y, err = host_unary(wl, work, "exp2_libm", '   two = Constant <value = float {2.0}> ()\n   y = Pow (two, x)', x, cpu)
    if y is None:
        return False, err
    ok, msg = ulp_check(x, y, EXP2_LO, EXP2_HI, lambda v: 2.0 ** v)
    msgs = [msg]
    sub = y[(x < np.float32(EXP2_LO)) & (x > -150.0)]
    if not np.all((sub >= 0) & (sub <= 2.0 ** -126)):
        ok = False
        msgs.append("in (-150, %g) outside [0, 2^-126]: %s" % (EXP2_LO, sub[(sub < 0) | (sub > 2.0 ** -126)][:4]))
    under = y[x <= -150.0]
    if under.size != below.size or not np.all(under == 0.0):
        ok = False
        msgs.append("at or below -150 not 0: %s" % under[under != 0][:4])
    over = y[x > np.float32(EXP2_HI)]
    if over.size != above.size or not np.all(over >= 2.0 ** 127):
        ok = False
        msgs.append("above %g: %s" % (EXP2_HI, over[:4]))
    if y[grid.size + soft.size + small.size] != 1.0 or y[grid.size + soft.size + small.size + 1] != 1.0:
        ok = False
        msgs.append("2^0 = %r" % y[grid.size + soft.size + small.size])
    return ok, "; ".join(msgs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("wlower")
    ap.add_argument("work")
    ap.add_argument("--only", default="")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--cpu", default=None, help="--cpu for the compiles (e.g. x86-64-v3: the AVX2 path)")
    a = ap.parse_args()
    only = set(x for x in a.only.split(",") if x)
    rng = np.random.default_rng(7)
    os.makedirs(a.work, exist_ok=True)
    if a.bench:
        rng = np.random.default_rng(1)
        benches = [whisper_attn("bench_enc_attn", T=1500, S=1500, H=6, hd=64, rng=rng),
                   whisper_attn("bench_dec_causal", T=448, S=448, H=6, hd=64, causal=1, rng=rng),
                   conv_stem("bench_conv_stem", C=80, F=3000, D=384, const_w=True, rng=rng),
                   logmel("bench_logmel", N=480000, M=80, rng=rng)]
        for name, text, feeds in benches:
            if only and name not in only:
                continue
            ok, msg, ms = run_case(a.wlower, a.work, name, text, feeds, reps=5, threads=2)
            print("%s: %s: %s; reference %s, host %s" % ("PASS" if ok else "FAIL", name, msg,
                                                         ms[0] if ms else "-", ms[1] if ms else "-"))
        return 0
    fails = 0
    for name, fn in (("exp_libm", exp_libm), ("exp2_libm", exp2_libm)):
        if not only or name in only:
            ok, msg = fn(a.wlower, a.work, a.cpu)
            print("%s: %s: %s" % ("PASS" if ok else "FAIL", name, msg))
            fails += not ok
    for name, text, feeds in cases(rng):
        if only and name not in only:
            continue
        ok, msg, _ = run_case(a.wlower, a.work, name, text, feeds, cpu=a.cpu)
        print("%s: %s: %s" % ("PASS" if ok else "FAIL", name, msg))
        fails += not ok
    bf16 = bf16_cases(np.random.default_rng(11))
    if a.cpu is None and not cpu_flag("avx512_bf16"):
        print("NOTE: %d --host-precision bf16 cases not run: this CPU has no AVX512-BF16 "
              "(tests/lit/host_matmul.onnxtxt checks the refusal)" % len(bf16))
    elif a.cpu is None:
        for (name, text, feeds), pmin in bf16:
            if only and name not in only:
                continue
            ok, msg, _ = run_case(a.wlower, a.work, name, text, feeds, flags=["--host-precision", "bf16"], psnr_min=pmin)
            print("%s: %s (bf16, >= %.0f dB): %s" % ("PASS" if ok else "FAIL", name, pmin, msg))
            fails += not ok
    print("host kernels: %d failed" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
