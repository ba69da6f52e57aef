#!/usr/bin/python3
"""llama2c_samples.py — int8 calibration samples for a llama2.c checkpoint's Optimum export
(examples/models/llama2c.py), from text the float model generates itself.

From every prompt (comma-separated ids; default BOS alone) the float torch model (the same
HF-layout conversion as llama2c.py) generates --sequences stories, each sampled at --temperature
(default 1: the model's own distribution; 0: greedy) with its own seed (--seed + k, torch's
generator; so not the tests' greedy text), until the sequence has --tokens ids (eos not
honoured), and the activations of those runs are written as `wlower quantize --int8 --samples`
files:

  OUT/prefill/{input_ids,attention_mask,position_ids}.npy
        [S, T] int64: every generated sequence whole (decoder_model.onnx sees every position
        of it at once, causally: the activations of each position are those of the decoding run)
  OUT/step/{input_ids,position_ids}.npy            [S*T, 1] int64
  OUT/step/attention_mask.npy                      [S*T, T] int64
  OUT/step/past_key_values.N.{key,value}.npy       [S*T, KV, T-1, hd] float32
        one sample per position p of every sequence for decoder_with_past_model.onnx: the id at p,
        the float model's own cache of the p earlier rows, zero-padded to T-1 rows (a common
        shape), and the mask 1 on the p real rows and the new one, 0 on the padding: the padded
        rows take no attention weight, so each sample's activations are those of step p.
  OUT/sequences.json                               the prompts and the generated ids

Usage:
  /usr/bin/python3 examples/models/llama2c_samples.py ../shared/data/llama2c/stories260K.bin \\
      --out DIR [--tokens 64] [--sequences 4] [--temperature 1] [--seed 0] [--prompts "1;1,403"]
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_llama  # noqa: E402
import llama2c  # noqa: E402



def decode(torch, model, cfg, prompt, T, temperature, seed):
    """Sampled (or greedy) to T ids; the cache (2L tensors [KV, T, hd]) of the whole sequence."""
    L = cfg["layers"]
    g = torch.Generator().manual_seed(seed)
    ids, past = list(prompt), []
    with torch.no_grad():
        for pos in range(T):       # one row a call, with the model's own KV cache
            out = model(torch.tensor([[ids[pos]]]), torch.ones(1, pos + 1, dtype=torch.int64),
                        torch.tensor([[pos]]), *past)
            past = list(out[1:1 + 2 * L])
            if pos + 1 == T:
                return ids, [p[0].numpy() for p in past]
            if pos + 1 < len(ids):
                continue
            logits = out[0][0, -1]
            if temperature > 0:
                probs = torch.softmax(logits.double() / temperature, -1)
                ids.append(int(torch.multinomial(probs, 1, generator=g)))
            else:
                ids.append(int(torch.argmax(logits)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", type=int, default=64, help="length of every generated sequence (ids)")
    ap.add_argument("--sequences", type=int, default=4, help="sequences per prompt")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prompts", default="1", help="prompts separated by ';', ids by ','")
    a = ap.parse_args()
    cfg, w = llama2c.read_checkpoint(a.checkpoint)
    cfg.update(rope="runtime", mask="expanded")
    try:
        prompts = [[int(t) for t in p.split(",")] for p in a.prompts.split(";") if p.strip()]
    except ValueError:
        llama2c.fail(f"--prompts '{a.prompts}': expected ids separated by ',' and prompts by ';'")
    T = a.tokens
    if not prompts or any(not p or len(p) >= T or min(p) < 0 or max(p) >= cfg["vocab"] for p in prompts):
        llama2c.fail(f"--prompts: every prompt needs 1..{T - 1} ids below vocab {cfg['vocab']}")
    import torch

    torch.manual_seed(0)
    model = hf_llama.build(torch, cfg)(cfg).eval()
    llama2c.load(torch, model, cfg, w)
    L = cfg["layers"]
    seqs, caches = [], []
    for p in prompts:
        for k in range(a.sequences):
            ids, cache = decode(torch, model, cfg, p, T, a.temperature, a.seed + len(seqs))
            seqs.append(ids)
            caches.append(cache)
    S = len(seqs)
    pre, st = os.path.join(a.out, "prefill"), os.path.join(a.out, "step")
    os.makedirs(pre, exist_ok=True)
    os.makedirs(st, exist_ok=True)
    ids = np.array(seqs, dtype=np.int64)
    np.save(os.path.join(pre, "input_ids.npy"), ids)
    np.save(os.path.join(pre, "attention_mask.npy"), np.ones((S, T), np.int64))
    np.save(os.path.join(pre, "position_ids.npy"), np.tile(np.arange(T, dtype=np.int64), (S, 1)))
    kv, hd = cfg["kv_heads"], cfg["hidden"] // cfg["heads"]
    step_ids = ids.reshape(S * T, 1)
    pos = np.tile(np.arange(T, dtype=np.int64), S).reshape(S * T, 1)
    mask = np.zeros((S * T, T), np.int64)
    past = np.zeros((2 * L, S * T, kv, T - 1, hd), np.float32)
    for s in range(S):
        for p in range(T):
            r = s * T + p
            mask[r, :p] = 1
            mask[r, T - 1] = 1       # the new row (the last column: past rows first)
            for k in range(2 * L):
                past[k, r, :, :p] = caches[s][k][:, :p]
    np.save(os.path.join(st, "input_ids.npy"), step_ids)
    np.save(os.path.join(st, "position_ids.npy"), pos)
    np.save(os.path.join(st, "attention_mask.npy"), mask)
    for k in range(2 * L):
        np.save(os.path.join(st, "past_key_values.%d.%s.npy" % (k // 2, "value" if k % 2 else "key")), past[k])
    with open(os.path.join(a.out, "sequences.json"), "w") as f:
        json.dump({"prompts": prompts, "ids": seqs}, f)
        f.write("\n")
    print("%d sequences of %d ids: %d prefill samples, %d step samples -> %s" % (S, T, S, S * T, a.out))


if __name__ == "__main__":
    main()
