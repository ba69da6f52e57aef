#!/usr/bin/python3
"""Convert a llama2.c checkpoint (e.g. ../shared/data/llama2c/stories260K.bin: real TinyStories
weights, 8 heads / 4 KV heads) into an Optimum-layout ONNX export of a Llama causal LM:

  OUT/decoder_model.onnx, OUT/decoder_with_past_model.onnx   (see hf_llama.py: symbolic dims,
                                                              presents as outputs)
  OUT/config.json                                            (transformers' LlamaConfig keys)

The checkpoint layout (llama2.c run.c, "legacy" version 0): 7 int32 (dim, hidden_dim, n_layers,
n_heads, n_kv_heads, vocab_size, seq_len; vocab_size < 0 means an unshared classifier follows),
then float32 token_embedding [vocab,dim], rms_att [L,dim], wq [L,dim,dim], wk/wv [L,kv_dim,dim],
wo [L,dim,dim], rms_ffn [L,dim], w1 [L,hidden,dim], w2 [L,dim,hidden], w3 [L,hidden,dim],
rms_final [dim], two unused RoPE tables [seq_len, head_size/2] each, (wcls [vocab,dim]).

Conversion to the HF layout (as transformers' convert_llama_weights_to_hf does): llama2.c rotates
interleaved pairs (2i, 2i+1) of each head, HF's rotate_half rotates (i, i + hd/2); the rows of wq
and wk are permuted per head so the two give the same attention. RMSNorm eps 1e-5, RoPE theta
10000, w1 → gate_proj, w3 → up_proj, w2 → down_proj, LM head tied to the embedding when shared.

Usage:
  /usr/bin/python3 examples/models/llama2c.py ../shared/data/llama2c/stories260K.bin --out DIR \\
      [--rope runtime|cache] [--mask expanded|additive|where] [--opset 14|17] [--check N]
--check N runs the converted torch model greedily from BOS (id 1) for N tokens with its KV cache
and prints the ids (a check of the conversion; the tests compare wlower with ids from an
independent implementation, tests/oracle/llama2c_ref.py).
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_llama  # noqa: E402


def fail(msg):
    print(f"llama2c.py: {msg}", file=sys.stderr)
    sys.exit(1)


def read_checkpoint(path):
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    if len(raw) < 28:
        fail(f"{path}: truncated header ({len(raw)} bytes, need 28)")
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("<7i", raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    if (min(dim, hidden, layers, heads, kv_heads, vocab, seq_len) <= 0 or dim % heads
            or heads % kv_heads or (dim // heads) % 2 or max(dim, hidden, vocab, seq_len) > 1 << 20
            or layers > 1024):
        fail(f"{path}: impossible header (dim {dim}, hidden {hidden}, layers {layers}, heads {heads}, "
             f"kv_heads {kv_heads}, vocab {vocab}, seq_len {seq_len})")
    hd = dim // heads
    kvd = kv_heads * hd
    shapes = [("emb", (vocab, dim)), ("rms_att", (layers, dim)), ("wq", (layers, dim, dim)),
              ("wk", (layers, kvd, dim)), ("wv", (layers, kvd, dim)), ("wo", (layers, dim, dim)),
              ("rms_ffn", (layers, dim)), ("w1", (layers, hidden, dim)), ("w2", (layers, dim, hidden)),
              ("w3", (layers, hidden, dim)), ("rms_final", (dim,)), ("freq_real", (seq_len, hd // 2)),
              ("freq_imag", (seq_len, hd // 2))]
    if not shared:
        shapes.append(("wcls", (vocab, dim)))
    need = 28 + 4 * sum(int(np.prod(s)) for _, s in shapes)
    if len(raw) != need:
        fail(f"{path}: {len(raw)} bytes, the header implies {need}"
             + (" (truncated)" if len(raw) < need else " (trailing bytes)"))
    w, off = {}, 28
    for name, shape in shapes:
        n = int(np.prod(shape))
        w[name] = np.frombuffer(raw, dtype="<f4", count=n, offset=off).reshape(shape)
        off += 4 * n
    if shared:
        w["wcls"] = w["emb"]
    cfg = {"hidden": dim, "heads": heads, "kv_heads": kv_heads, "ffn": hidden, "vocab": vocab,
           "layers": layers, "eps": 1e-5, "rope_theta": 10000.0, "max_pos": seq_len,
           "qkv_bias": False, "tie": shared}
    return cfg, w


def to_rotate_half(w, n_heads):
    """Rows of a llama2.c q/k projection (interleaved RoPE pairs) → HF order (half split)."""
    rows, cols = w.shape
    return w.reshape(n_heads, rows // n_heads // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def load(torch, model, cfg, w):
    sd = {"model.embed_tokens.weight": w["emb"], "model.norm.weight": w["rms_final"]}
    if not cfg["tie"]:
        sd["lm_head.weight"] = w["wcls"]
    for i in range(cfg["layers"]):
        p = f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = w["rms_att"][i]
        sd[p + "post_attention_layernorm.weight"] = w["rms_ffn"][i]
        sd[p + "self_attn.q_proj.weight"] = to_rotate_half(w["wq"][i], cfg["heads"])
        sd[p + "self_attn.k_proj.weight"] = to_rotate_half(w["wk"][i], cfg["kv_heads"])
        sd[p + "self_attn.v_proj.weight"] = w["wv"][i]
        sd[p + "self_attn.o_proj.weight"] = w["wo"][i]
        sd[p + "mlp.gate_proj.weight"] = w["w1"][i]
        sd[p + "mlp.up_proj.weight"] = w["w3"][i]
        sd[p + "mlp.down_proj.weight"] = w["w2"][i]
    params = dict(model.named_parameters())
    with torch.no_grad():
        for k, v in sd.items():
            if k not in params or tuple(params[k].shape) != v.shape:
                fail(f"internal: parameter {k} {v.shape} does not fit the model")
            params[k].copy_(torch.from_numpy(np.array(v, dtype=np.float32)))


def hf_config(cfg):
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "hidden_size": cfg["hidden"], "intermediate_size": cfg["ffn"],
            "num_attention_heads": cfg["heads"], "num_key_value_heads": cfg["kv_heads"],
            "num_hidden_layers": cfg["layers"], "vocab_size": cfg["vocab"],
            "max_position_embeddings": cfg["max_pos"], "rms_norm_eps": cfg["eps"],
            "rope_theta": cfg["rope_theta"], "tie_word_embeddings": cfg["tie"],
            "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}


def greedy(torch, model, cfg, n):
    """Greedy ids from BOS with the model's own KV cache (one token per call)."""
    L = cfg["layers"]
    tok, past, ids = 1, [], []
    with torch.no_grad():
        for pos in range(n):
            ids_t = torch.tensor([[tok]])
            am = torch.ones(1, pos + 1, dtype=torch.int64)
            out = model(ids_t, am, torch.tensor([[pos]]), *past)
            past = list(out[1:1 + 2 * L])
            tok = int(torch.argmax(out[0][0, -1]))
            ids.append(tok)
    return ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--rope", choices=("runtime", "cache"), default="runtime")
    ap.add_argument("--mask", choices=("expanded", "additive", "where"), default="expanded")
    ap.add_argument("--opset", type=int, choices=(14, 17), default=14)
    ap.add_argument("--check", type=int, default=0, metavar="N", help="print N greedy ids of the torch model")
    a = ap.parse_args()
    cfg, w = read_checkpoint(a.checkpoint)
    cfg.update(rope=a.rope, mask=a.mask)
    import torch

    torch.manual_seed(0)
    model = hf_llama.build(torch, cfg)(cfg).eval()
    load(torch, model, cfg, w)
    if a.check:
        print(",".join(map(str, greedy(torch, model, cfg, a.check))))
    hf_llama.export_optimum(torch, model, cfg, a.out, a.opset)
    tmp = os.path.join(a.out, "config.json.tmp")
    with open(tmp, "w") as f:
        json.dump(hf_config(cfg), f, indent=2)
        f.write("\n")
    os.replace(tmp, os.path.join(a.out, "config.json"))


if __name__ == "__main__":
    main()
