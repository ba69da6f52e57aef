"""hf_llama.py — a Llama/Qwen2 causal LM written the way transformers writes it (eager attention),
and its export in the Optimum layout, for the LLM pipeline (issue 11) and its tests.

Modules (torch), parameter names as transformers' LlamaForCausalLM / Qwen2ForCausalLM:
  model.embed_tokens, model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
  post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head (tied to embed_tokens
  when cfg["tie"]).

Config keys: hidden, heads, kv_heads, ffn, vocab, layers, eps, rope_theta, max_pos, qkv_bias,
tie, rope ("runtime": inv_freq ⊗ position_ids → Cos/Sin inside the graph, transformers ≥ 4.38;
"cache": cos/sin tables gathered by position_ids, transformers 4.36–4.37), mask ("expanded":
transformers' _prepare_4d_causal_attention_mask, causal mask masked_fill'ed by the expanded
padding mask; "additive": causal + (1 − mask)·min; "where": one Where on the combined boolean).

export_optimum(torch, model, cfg, out_dir, opset) writes, as Optimum's `--task
text-generation-with-past` does:
  decoder_model.onnx            input_ids [B,S] int64, attention_mask [B,S] int64,
                                position_ids [B,S] int64
                                → logits [B,S,vocab], present.N.key/value [B,KV,S,hd]
  decoder_with_past_model.onnx  the same plus past_key_values.N.key/value [B,KV,P,hd]
                                (attention_mask [B,P+S]) → logits, present.N.key/value [B,KV,P+S,hd]
with symbolic dims batch_size, sequence_length, past_sequence_length and
past_sequence_length + sequence_length, so reshape targets, masks and positions are computed by
Shape/Gather/Concat/Range chains in the graph.
"""

import math
import os


def build(torch, cfg):
    nn = torch.nn
    F = torch.nn.functional
    MIN = torch.finfo(torch.float32).min

    class RMSNorm(nn.Module):
        def __init__(self, n, eps):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))
            self.eps = eps

        def forward(self, h):
            var = h.pow(2).mean(-1, keepdim=True)
            return self.weight * (h * torch.rsqrt(var + self.eps))

    class Rotary(nn.Module):
        def __init__(self, dim, max_pos, base, form):
            super().__init__()
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
            self.register_buffer("inv_freq", inv_freq, persistent=False)
            self.form = form
            if form == "cache":
                t = torch.arange(max_pos, dtype=torch.int64).type_as(inv_freq)
                emb = torch.cat((torch.outer(t, inv_freq),) * 2, dim=-1)
                self.register_buffer("cos_cached", emb.cos(), persistent=False)
                self.register_buffer("sin_cached", emb.sin(), persistent=False)

        def forward(self, position_ids):
            if self.form == "cache":
                return self.cos_cached[position_ids], self.sin_cached[position_ids]
            inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
            pos = position_ids[:, None, :].float()
            freqs = (inv @ pos).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos(), emb.sin()

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def repeat_kv(h, n_rep):
        b, kvh, slen, hd = h.shape
        if n_rep == 1:
            return h
        return h[:, :, None, :, :].expand(b, kvh, n_rep, slen, hd).reshape(b, kvh * n_rep, slen, hd)

    class Attention(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.nh, self.kvh = c["heads"], c["kv_heads"]
            self.hd = c["hidden"] // c["heads"]
            b = c["qkv_bias"]
            self.q_proj = nn.Linear(c["hidden"], self.nh * self.hd, bias=b)
            self.k_proj = nn.Linear(c["hidden"], self.kvh * self.hd, bias=b)
            self.v_proj = nn.Linear(c["hidden"], self.kvh * self.hd, bias=b)
            self.o_proj = nn.Linear(self.nh * self.hd, c["hidden"], bias=False)

        def forward(self, h, mask, cos, sin, past=None):
            bsz, q_len, _ = h.size()
            q = self.q_proj(h).view(bsz, q_len, self.nh, self.hd).transpose(1, 2)
            k = self.k_proj(h).view(bsz, q_len, self.kvh, self.hd).transpose(1, 2)
            v = self.v_proj(h).view(bsz, q_len, self.kvh, self.hd).transpose(1, 2)
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            if past is not None:
                k = torch.cat([past[0], k], dim=2)
                v = torch.cat([past[1], v], dim=2)
            present = (k, v)
            k = repeat_kv(k, self.nh // self.kvh)
            v = repeat_kv(v, self.nh // self.kvh)
            w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd)
            w = w + mask
            w = F.softmax(w, dim=-1, dtype=torch.float32)
            o = torch.matmul(w, v).transpose(1, 2).contiguous().reshape(bsz, q_len, self.nh * self.hd)
            return self.o_proj(o), present

    class MLP(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.gate_proj = nn.Linear(c["hidden"], c["ffn"], bias=False)
            self.up_proj = nn.Linear(c["hidden"], c["ffn"], bias=False)
            self.down_proj = nn.Linear(c["ffn"], c["hidden"], bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.self_attn = Attention(c)
            self.mlp = MLP(c)
            self.input_layernorm = RMSNorm(c["hidden"], c["eps"])
            self.post_attention_layernorm = RMSNorm(c["hidden"], c["eps"])

        def forward(self, h, mask, cos, sin, past=None):
            a, present = self.self_attn(self.input_layernorm(h), mask, cos, sin, past)
            h = h + a
            return h + self.mlp(self.post_attention_layernorm(h)), present

    def causal_mask(attention_mask, q_len, past_len, form):
        """[B,1,S,P+S] additive float mask from the [B,P+S] padding mask, in one of three forms."""
        total = past_len + q_len
        bsz = attention_mask.shape[0]
        rows = torch.arange(q_len).view(-1, 1) + past_len
        cols = torch.arange(total).view(1, -1)
        allowed = cols <= rows                                     # [S, P+S] bool
        if form == "where":
            keep = allowed[None, None, :, :] & (attention_mask[:, None, None, :] > 0)
            return torch.where(keep, torch.zeros(()), torch.full((), MIN))
        if form == "additive":
            causal = torch.zeros(q_len, total).masked_fill(~allowed, MIN)
            pad = (1.0 - attention_mask[:, None, None, :].float()) * MIN
            return (causal[None, None, :, :] + pad).clamp(min=MIN)
        # "expanded": transformers' _prepare_4d_causal_attention_mask (eager, 4.36-4.37):
        # _expand_mask, then masked_fill of _make_causal_mask where it is set; no causal part
        # for one query (so the single-token graph has the padding mask only)
        inverted = 1.0 - attention_mask[:, None, None, :].expand(bsz, 1, q_len, total).float()
        expanded = inverted.masked_fill(inverted.bool(), MIN)
        if q_len == 1:
            return expanded
        causal = torch.full((q_len, q_len), MIN)
        cond = torch.arange(q_len)
        causal.masked_fill_(cond < (cond + 1).view(q_len, 1), 0)
        if past_len > 0:
            causal = torch.cat([torch.zeros(q_len, past_len), causal], dim=-1)
        causal = causal[None, None, :, :].expand(bsz, 1, q_len, total)
        return causal.masked_fill(expanded.bool(), MIN)

    class CausalLM(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c = c
            self.model = nn.Module()
            self.model.embed_tokens = nn.Embedding(c["vocab"], c["hidden"])
            self.model.layers = nn.ModuleList([Layer(c) for _ in range(c["layers"])])
            self.model.norm = RMSNorm(c["hidden"], c["eps"])
            self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False)
            if c["tie"]:
                self.lm_head.weight = self.model.embed_tokens.weight
            self.rotary = Rotary(c["hidden"] // c["heads"], c["max_pos"], c["rope_theta"], c["rope"])

        def forward(self, input_ids, attention_mask, position_ids, *past_flat):
            q_len = input_ids.shape[1]
            past_len = past_flat[0].shape[2] if past_flat else 0
            mask = causal_mask(attention_mask, q_len, past_len, self.c["mask"])
            cos, sin = self.rotary(position_ids)
            h = self.model.embed_tokens(input_ids)
            presents = []
            for i, layer in enumerate(self.model.layers):
                past = (past_flat[2 * i], past_flat[2 * i + 1]) if past_flat else None
                h, p = layer(h, mask, cos, sin, past)
                presents += list(p)
            return (self.lm_head(self.model.norm(h)),) + tuple(presents)

    return CausalLM


def io_names(layers, with_past):
    ins = ["input_ids", "attention_mask", "position_ids"]
    if with_past:
        ins += [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    outs = ["logits"] + [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    return ins, outs


def export_optimum(torch, model, cfg, out_dir, opset=14, past_len=3, seq_len=4):
    """Write decoder_model.onnx and decoder_with_past_model.onnx (see the module doc) into out_dir,
    traced at seq_len prompt tokens and past_len past tokens (sizes do not matter: every dim
    that varies is symbolic)."""
    import common

    L, kvh, hd = cfg["layers"], cfg["kv_heads"], cfg["hidden"] // cfg["heads"]
    os.makedirs(out_dir, exist_ok=True)
    for with_past in (False, True):
        ins, outs = io_names(L, with_past)
        s = 1 if with_past else seq_len
        p = past_len if with_past else 0
        ids = torch.ones(1, s, dtype=torch.int64)
        am = torch.ones(1, p + s, dtype=torch.int64)
        pos = torch.arange(p, p + s, dtype=torch.int64).unsqueeze(0)
        past = [torch.zeros(1, kvh, p, hd) for _ in range(2 * L)] if with_past else []
        total = "past_sequence_length + sequence_length" if with_past else "sequence_length"

        def axes(n):
            if n in ("input_ids", "position_ids"):
                return {0: "batch_size", 1: "sequence_length"}
            if n == "attention_mask":
                return {0: "batch_size", 1: total}
            if n == "logits":
                return {0: "batch_size", 1: "sequence_length"}
            if n.startswith("past_key_values."):
                return {0: "batch_size", 2: "past_sequence_length"}
            if n.startswith("present."):
                return {0: "batch_size", 2: total}
            return None

        name = "decoder_with_past_model.onnx" if with_past else "decoder_model.onnx"
        common.export(model, (ids, am, pos, *past), os.path.join(out_dir, name), ins, outs, opset,
                      dynamic_axes=common.dynamic_axes_for(ins + outs, axes))


def main(argv=None):
    """Seeded Qwen2/Llama causal LMs in the Optimum layout (the LLM pipeline's test models)."""
    import argparse
    import json
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import common
    import qwen2

    ap = argparse.ArgumentParser(description="Seeded Qwen2/Llama causal LM, exported as Optimum does "
                                 "(decoder_model.onnx, decoder_with_past_model.onnx, config.json).")
    ap.add_argument("--arch", choices=("qwen2", "llama"), default="qwen2",
                    help="qwen2: q/k/v bias, RoPE theta 1e6, eps 1e-6, untied head; llama: no bias, "
                         "theta 1e4, eps 1e-5, tied head")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--max-pos", type=int, default=256)
    ap.add_argument("--rope", choices=("runtime", "cache"), default="runtime")
    ap.add_argument("--mask", choices=("expanded", "additive", "where"), default="expanded")
    ap.add_argument("--opset", type=int, choices=(14, 17), default=14)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    import torch

    q = a.arch == "qwen2"
    cfg = {"hidden": a.hidden, "heads": a.heads, "kv_heads": a.kv_heads, "ffn": a.ffn, "vocab": a.vocab,
           "layers": a.layers, "eps": 1e-6 if q else 1e-5, "rope_theta": 1e6 if q else 1e4,
           "max_pos": a.max_pos, "qkv_bias": q, "tie": not q, "rope": a.rope, "mask": a.mask,
           "attn_gain": 2.0, "frequent": min(300, a.vocab // 4)}
    model = build(torch, cfg)(cfg).eval()
    qwen2.init_weights(torch, model, "", a.seed, cfg)
    with torch.no_grad():   # token embeddings as trained ones look: small rows
        e = common.normal(a.seed, "model.embed_tokens.weight", (a.vocab, a.hidden), 0.02)
        if cfg["tie"]:      # the tied head gives the frequent ids clear winners too
            common.boost_rows(e, a.seed, common.frequent_token_ids(a.seed, a.vocab, cfg["frequent"]))
        model.model.embed_tokens.weight.copy_(torch.from_numpy(e))
    export_optimum(torch, model, cfg, a.out, a.opset)
    conf = {"architectures": ["Qwen2ForCausalLM" if q else "LlamaForCausalLM"], "model_type": a.arch,
            "hidden_size": a.hidden, "intermediate_size": a.ffn, "num_attention_heads": a.heads,
            "num_key_value_heads": a.kv_heads, "num_hidden_layers": a.layers, "vocab_size": a.vocab,
            "max_position_embeddings": a.max_pos, "rms_norm_eps": cfg["eps"], "rope_theta": cfg["rope_theta"],
            "tie_word_embeddings": cfg["tie"], "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2,
            "torch_dtype": "float32"}
    tmp = os.path.join(a.out, "config.json.tmp")
    with open(tmp, "w") as f:
        json.dump(conf, f, indent=2)
        f.write("\n")
    os.replace(tmp, os.path.join(a.out, "config.json"))


if __name__ == "__main__":
    main()
