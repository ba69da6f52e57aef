#!/usr/bin/python3
"""llama2c_ref.py — an independent float64 forward pass of a llama2.c checkpoint, written from
llama2.c's run.c (karpathy/llama2.c), to produce expected greedy token ids for wlower's LLM
pipeline tests. It shares no code with wlower or with examples/models/llama2c.py: it reads the
checkpoint itself and keeps llama2.c's own conventions (interleaved RoPE pairs (2i, 2i+1) within a
head, W as [out, in] row-major, RMSNorm eps 1e-5, shared classifier when vocab_size > 0).

  llama2c_ref.py CHECKPOINT.bin --prompt-ids 1 --steps 64 [--json] [--kv-int8 RANGES]

Prints the greedy ids generated after the prompt (prompt excluded), comma-separated. Like run.c
at temperature 0, the next token is the argmax of the logits; unlike run.c it does not stop at
BOS (id 1): --steps ids are always produced (a BOS among them is reported on stderr).
--kv-int8 RANGES keeps the cache the way `--kv-cache int8` pipelines do (wlower's convention, not
run.c's): a row's K and V are used in float by the position that computes them, then stored as
round(x / s) clamped to [-128, 127] times s, s = max|range| / 127 per layer and K/V.
"""

import argparse
import json
import struct
import sys

import numpy as np


def read_checkpoint(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 28:
        sys.exit(f"{path}: truncated header ({len(raw)} bytes)")
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack("<7i", raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    if min(dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len) <= 0 or dim % n_heads or n_heads % n_kv:
        sys.exit(f"{path}: impossible header {dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len}")
    hs = dim // n_heads
    w = np.frombuffer(raw, dtype="<f4", offset=28).astype(np.float64)
    off = 0

    def take(*shape):
        nonlocal off
        n = int(np.prod(shape))
        if off + n > w.size:
            sys.exit(f"{path}: truncated weights")
        a = w[off:off + n].reshape(shape)
        off += n
        return a

    m = {"dim": dim, "hidden": hidden, "layers": n_layers, "heads": n_heads, "kv_heads": n_kv,
         "vocab": vocab, "seq_len": seq_len, "head_size": hs}
    m["emb"] = take(vocab, dim)
    m["rms_att"] = take(n_layers, dim)
    m["wq"] = take(n_layers, n_heads * hs, dim)
    m["wk"] = take(n_layers, n_kv * hs, dim)
    m["wv"] = take(n_layers, n_kv * hs, dim)
    m["wo"] = take(n_layers, dim, n_heads * hs)
    m["rms_ffn"] = take(n_layers, dim)
    m["w1"] = take(n_layers, hidden, dim)
    m["w2"] = take(n_layers, dim, hidden)
    m["w3"] = take(n_layers, hidden, dim)
    m["rms_final"] = take(dim)
    take(seq_len, hs // 2)  # freq_cis_real (unused, as in run.c)
    take(seq_len, hs // 2)  # freq_cis_imag
    m["wcls"] = m["emb"] if shared else take(vocab, dim)
    return m


def rmsnorm(x, g):
    ss = np.dot(x, x) / x.size + 1e-5
    return g * (x / np.sqrt(ss))


def forward(m, token, pos, kcache, vcache, kv_scales=None):
    dim, hs, nh, nkv = m["dim"], m["head_size"], m["heads"], m["kv_heads"]
    kv_mul = nh // nkv
    kv_dim = nkv * hs
    x = m["emb"][token].copy()
    for l in range(m["layers"]):
        xb = rmsnorm(x, m["rms_att"][l])
        q = m["wq"][l] @ xb
        k = m["wk"][l] @ xb
        v = m["wv"][l] @ xb
        # RoPE as in run.c: pairs (i, i+1), frequency from the index within the head
        for i in range(0, dim, 2):
            head_dim = i % hs
            freq = 1.0 / (10000.0 ** (head_dim / hs))
            val = pos * freq
            fcr, fci = np.cos(val), np.sin(val)
            for vec in ((q, k) if i < kv_dim else (q,)):
                v0, v1 = vec[i], vec[i + 1]
                vec[i] = v0 * fcr - v1 * fci
                vec[i + 1] = v0 * fci + v1 * fcr
        kcache[l, pos] = k
        vcache[l, pos] = v
        out = np.zeros(nh * hs)
        for h in range(nh):
            qh = q[h * hs:(h + 1) * hs]
            kh = kcache[l, :pos + 1, (h // kv_mul) * hs:(h // kv_mul + 1) * hs]
            vh = vcache[l, :pos + 1, (h // kv_mul) * hs:(h // kv_mul + 1) * hs]
            att = kh @ qh / np.sqrt(hs)
            att = np.exp(att - att.max())
            att /= att.sum()
            out[h * hs:(h + 1) * hs] = att @ vh
        if kv_scales:   # an int8 cache: later positions read this row quantized (this one read it float)
            for c, s in zip((kcache, vcache), kv_scales[l]):
                c[l, pos] = np.clip(np.rint(c[l, pos] / s), -128, 127) * s
        x = x + m["wo"][l] @ out
        xb = rmsnorm(x, m["rms_ffn"][l])
        h1 = m["w1"][l] @ xb
        h3 = m["w3"][l] @ xb
        hb = (h1 / (1.0 + np.exp(-h1))) * h3
        x = x + m["w2"][l] @ hb
    x = rmsnorm(x, m["rms_final"])
    return m["wcls"] @ x


def generate(m, prompt, steps, kv_scales=None):
    L, S, kvd = m["layers"], m["seq_len"], m["kv_heads"] * m["head_size"]
    if len(prompt) + steps > S:
        sys.exit(f"prompt + steps = {len(prompt) + steps} > seq_len {S}")
    kc = np.zeros((L, S, kvd))
    vc = np.zeros((L, S, kvd))
    out, gaps = [], []
    token = prompt[0]
    for pos in range(len(prompt) + steps - 1):
        logits = forward(m, token, pos, kc, vc, kv_scales)
        if pos + 1 < len(prompt):
            token = prompt[pos + 1]
            continue
        order = np.argsort(-logits, kind="stable")
        token = int(order[0])
        gaps.append(float(logits[order[0]] - logits[order[1]]))
        out.append(token)
    return out, gaps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--prompt-ids", default="1")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--json", action="store_true", help="print ids and the top-1/top-2 logit gaps as JSON")
    ap.add_argument("--kv-int8", metavar="RANGES", help="keep the KV cache in int8, one symmetric scale per layer "
                    "and K/V: max|x|/127 of present.N.key/value in RANGES (a wlower tranges file, e.g. a "
                    "--kv-cache int8 pipeline's kv_cache.tranges); each row is quantized once computed")
    a = ap.parse_args()
    m = read_checkpoint(a.checkpoint)
    prompt = [int(t) for t in a.prompt_ids.split(",")]
    scales = None
    if a.kv_int8:
        t = json.load(open(a.kv_int8))["tensors"]
        scales = [[max(abs(t["present.%d.%s" % (l, kv)]["min"]), abs(t["present.%d.%s" % (l, kv)]["max"])) / 127
                   for kv in ("key", "value")] for l in range(m["layers"])]
    ids, gaps = generate(m, prompt, a.steps, scales)
    if 1 in ids:
        print(f"note: BOS (1) generated at step {ids.index(1)}; run.c would stop there", file=sys.stderr)
    if a.json:
        print(json.dumps({"prompt": prompt, "ids": ids, "min_gap": min(gaps), "gaps": gaps}))
    else:
        print(",".join(map(str, ids)))


if __name__ == "__main__":
    main()
