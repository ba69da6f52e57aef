#!/usr/bin/python3
"""Seeded Qwen2-1.5B-shaped decoder block graphs, HF-style modules exported with torch.onnx.

No trained Qwen weights can be had offline, so this writes transformers' Qwen2 modules
(eager attention, 4.40-era) directly in torch (`model.layers.N.self_attn.q_proj`, `mlp.gate_proj`,
`input_layernorm`, ...), fills them with seeded, trained-like weights and exports, at static shapes:

  prefill.onnx       hidden_states [1,S,H] (S = --seq, 16)           -> output_hidden_states [1,S,H]
                     (--layers decoder layers, causal mask, positions 0..S-1; no final norm)
  single_token.onnx  inputs_embeds [1,1,H],
                     past_key_values.N.key/value [1,KV,S-1,hd] float,
                     attention_mask [1,S] int64 (1 = attend)          -> logits [1,1,vocab],
                                                                        present.N.key/value [1,KV,S,hd]
                     (--layers decoder layers at position S-1, final norm, LM head)

Defaults are Qwen2-1.5B: hidden 1536, 12 heads, 2 KV heads, head_dim 128, FFN 8960 (SiLU gate:
down(silu(gate(x)) * up(x)), exported as Sigmoid/Mul), vocab 151936, RoPE theta 1e6 with
the half-split rotate_half, RMSNorm eps 1e-6 (Pow/ReduceMean/Add/Sqrt/Div/Mul/Mul: torch.rsqrt
exports as Sqrt + Div), q/k/v with bias, o/gate/up/down without, repeat_kv (Unsqueeze/Expand/
Reshape), causal mask built the transformers way (torch.finfo.min fill; folded to a constant
in prefill; in single_token from attention_mask: Cast/Sub/Cast/Where). Opset 14 or 17 give the
same graph here (no LayerNorm).

Weights: linear weights ~ N(0, 1/fan_in) (q/k x --attn-gain, default 2: attention logits std ~4,
peaky as trained), biases ~ N(0, 0.02^2), RMSNorm gains ~ N(1, 0.05^2), LM head rows
~ N(0, 0.02^2) with --frequent (300) seeded rows (low ids) scaled by 4..6 so logits have clear
winners. Each parameter is seeded from (--seed, its name).

--int8-kv SCALE: single_token.onnx takes int8 past_key_values.N.key_quantized / value_quantized
[1,KV,S-1,hd] read through DequantizeLinear (SCALE, zero point 0), the vendor's form.
--prefill-mask gives prefill.onnx an attention_mask [1,S] int64 input too (transformers'
combined 4-D mask: the causal mask masked_fill'ed where the padding mask is set: Where chains);
its --ref input pads the last 3 positions (right padding).
--dynamic exports as Optimum does: dynamic_axes for batch and sequence dims (batch_size,
sequence_length, past_sequence_length, total_sequence_length), so reshape targets, RoPE rows and
masks are computed from Shape/Gather/Unsqueeze/Concat/Range chains; then the symbolic dims are
fixed to the static sizes above (Optimum's / onnxruntime's static shape fixing): graph inputs
and outputs are static, the chains stay in the graph.

Sizes at the defaults: prefill 1 layer ~187 MB; single_token ~1.12 GB (the LM head is 933 MB);
both under 2 GB, so no external data.

--samples N writes calibration inputs under OUT/samples/{prefill,single_token}/NAME.npy with a
leading N: hidden_states = seeded token embeddings (N(0, 0.02^2) rows, as layer 0 sees them);
single_token: the 16th token's embedding, past K/V from running the same layers on the first 15,
attention_mask all ones.

Usage (run with /usr/bin/python3):
  /usr/bin/python3 examples/models/qwen2.py --out /tmp/qwen2
  /usr/bin/python3 examples/models/qwen2.py --layers 1 --hidden 256 --heads 4 --kv-heads 2 --ffn 512 \\
      --vocab 1000 --out /tmp/qwen2-small --check --samples 8
"""

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def build(torch, cfg):
    nn = torch.nn
    F = torch.nn.functional

    class Qwen2RMSNorm(nn.Module):
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.variance_epsilon = eps

        def forward(self, hidden_states):
            input_dtype = hidden_states.dtype
            hidden_states = hidden_states.to(torch.float32)
            variance = hidden_states.pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
            return self.weight * hidden_states.to(input_dtype)

    class Qwen2RotaryEmbedding(nn.Module):
        def __init__(self, dim, max_position_embeddings, base):
            super().__init__()
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
            self.register_buffer("inv_freq", inv_freq, persistent=False)
            t = torch.arange(max_position_embeddings, dtype=torch.int64).type_as(inv_freq)
            freqs = torch.outer(t, inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos_cached", emb.cos(), persistent=False)
            self.register_buffer("sin_cached", emb.sin(), persistent=False)

        def forward(self, x, seq_len):
            return self.cos_cached[:seq_len].to(dtype=x.dtype), self.sin_cached[:seq_len].to(dtype=x.dtype)

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def apply_rotary_pos_emb(q, k, cos, sin, position_ids):
        cos = cos[position_ids].unsqueeze(1)
        sin = sin[position_ids].unsqueeze(1)
        return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)

    def repeat_kv(hidden_states, n_rep):
        batch, num_key_value_heads, slen, head_dim = hidden_states.shape
        if n_rep == 1:
            return hidden_states
        hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
        return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)

    class Qwen2Attention(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.hidden_size = c["hidden"]
            self.num_heads = c["heads"]
            self.head_dim = c["hidden"] // c["heads"]
            self.num_key_value_heads = c["kv_heads"]
            self.num_key_value_groups = self.num_heads // self.num_key_value_heads
            self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.head_dim, bias=True)
            self.k_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=True)
            self.v_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=True)
            self.o_proj = nn.Linear(self.num_heads * self.head_dim, self.hidden_size, bias=False)
            self.rotary_emb = Qwen2RotaryEmbedding(self.head_dim, c["max_pos"], c["rope_theta"])

        def forward(self, hidden_states, attention_mask, position_ids, past_key_value=None):
            bsz, q_len, _ = hidden_states.size()
            query_states = self.q_proj(hidden_states)
            key_states = self.k_proj(hidden_states)
            value_states = self.v_proj(hidden_states)
            query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
            key_states = key_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
            value_states = value_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
            kv_seq_len = key_states.shape[-2]
            if past_key_value is not None:
                kv_seq_len += past_key_value[0].shape[-2]
            cos, sin = self.rotary_emb(value_states, seq_len=kv_seq_len)
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin, position_ids)
            if past_key_value is not None:
                key_states = torch.cat([past_key_value[0], key_states], dim=2)
                value_states = torch.cat([past_key_value[1], value_states], dim=2)
            present = (key_states, value_states)
            key_states = repeat_kv(key_states, self.num_key_value_groups)
            value_states = repeat_kv(value_states, self.num_key_value_groups)
            attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
            attn_weights = attn_weights + attention_mask
            attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
            attn_output = torch.matmul(attn_weights, value_states)
            attn_output = attn_output.transpose(1, 2).contiguous()
            attn_output = attn_output.reshape(bsz, q_len, self.hidden_size)
            return self.o_proj(attn_output), present

    class Qwen2MLP(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.gate_proj = nn.Linear(c["hidden"], c["ffn"], bias=False)
            self.up_proj = nn.Linear(c["hidden"], c["ffn"], bias=False)
            self.down_proj = nn.Linear(c["ffn"], c["hidden"], bias=False)
            self.act_fn = nn.SiLU()

        def forward(self, x):
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

    class Qwen2DecoderLayer(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.self_attn = Qwen2Attention(c)
            self.mlp = Qwen2MLP(c)
            self.input_layernorm = Qwen2RMSNorm(c["hidden"], eps=c["eps"])
            self.post_attention_layernorm = Qwen2RMSNorm(c["hidden"], eps=c["eps"])

        def forward(self, hidden_states, attention_mask, position_ids, past_key_value=None):
            residual = hidden_states
            hidden_states = self.input_layernorm(hidden_states)
            hidden_states, present = self.self_attn(hidden_states, attention_mask, position_ids, past_key_value)
            hidden_states = residual + hidden_states
            residual = hidden_states
            hidden_states = self.post_attention_layernorm(hidden_states)
            hidden_states = self.mlp(hidden_states)
            return residual + hidden_states, present

    def make_causal_mask(bsz, tgt_len, dtype, past_len=0):
        # transformers AttentionMaskConverter._make_causal_mask
        mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min)
        mask_cond = torch.arange(mask.size(-1))
        mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
        mask = mask.to(dtype)
        if past_len > 0:
            mask = torch.cat([torch.zeros(tgt_len, past_len, dtype=dtype), mask], dim=-1)
        return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len + past_len)

    def expand_mask(mask, dtype, tgt_len):
        # transformers AttentionMaskConverter._expand_mask
        bsz, src_len = mask.size()
        expanded_mask = mask[:, None, None, :].expand(bsz, 1, tgt_len, src_len).to(dtype)
        inverted_mask = 1.0 - expanded_mask
        return inverted_mask.masked_fill(inverted_mask.to(torch.bool), torch.finfo(dtype).min)

    def prepare_4d_mask(attention_mask, bsz, q_len, dtype, past_len):
        # transformers _prepare_4d_causal_attention_mask (eager)
        causal = make_causal_mask(bsz, q_len, dtype, past_len) if q_len > 1 else None
        if attention_mask is None:
            return causal
        expanded = expand_mask(attention_mask, dtype, q_len)
        if causal is not None:
            expanded = causal.masked_fill(expanded.bool(), torch.finfo(dtype).min)
        return expanded

    class Qwen2Layers(nn.Module):
        """model.layers + model.norm; lm_head beside it (as Qwen2ForCausalLM)."""

        def __init__(self, c):
            super().__init__()
            self.layers = nn.ModuleList([Qwen2DecoderLayer(c) for _ in range(c["layers"])])
            self.norm = Qwen2RMSNorm(c["hidden"], eps=c["eps"])

        def run(self, hidden_states, attention_mask=None, past_key_values=None):
            bsz, q_len, _ = hidden_states.shape
            past_len = past_key_values[0][0].shape[2] if past_key_values is not None else 0
            position_ids = torch.arange(past_len, q_len + past_len, dtype=torch.long).unsqueeze(0)
            mask = prepare_4d_mask(attention_mask, bsz, q_len, hidden_states.dtype, past_len)
            presents = []
            for i, layer in enumerate(self.layers):
                pkv = past_key_values[i] if past_key_values is not None else None
                hidden_states, present = layer(hidden_states, mask, position_ids, pkv)
                presents.append(present)
            return hidden_states, presents

    class Prefill(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, hidden_states, attention_mask=None):
            return self.model.run(hidden_states, attention_mask)[0]

    class SingleToken(nn.Module):
        """With lm_head_t_input, the LM head weight (transposed, [H, vocab]) is the last argument:
        exported as a graph input and turned into an initializer afterwards, because torch 1.13
        takes minutes to constant-fold and serialize a 933 MB initializer. The graph is the same:
        F.linear on a 3-D input exports as MatMul(x, W^T) with W^T folded."""

        def __init__(self, model, lm_head, lm_head_t_input=False):
            super().__init__()
            self.model, self.lm_head, self.lm_head_t_input = model, lm_head, lm_head_t_input

        def forward(self, inputs_embeds, *rest):
            if self.lm_head_t_input:
                rest, w_t = rest[:-1], rest[-1]
            flat, attention_mask = rest[:-1], rest[-1]
            pkv = [(flat[2 * i], flat[2 * i + 1]) for i in range(len(flat) // 2)]
            h, presents = self.model.run(inputs_embeds, attention_mask, pkv)
            h = self.model.norm(h)
            logits = torch.matmul(h, w_t) if self.lm_head_t_input else self.lm_head(h)
            return (logits,) + tuple(t for p in presents for t in p)

    return Qwen2Layers, Prefill, SingleToken


def init_weights(torch, module, prefix, seed, cfg):
    with torch.no_grad():
        for name, p in module.named_parameters():
            full = prefix + name
            shape = tuple(p.shape)
            if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
                a = common.normal(seed, full, shape, 0.05, mean=1.0)
            elif name.endswith("bias"):
                a = common.normal(seed, full, shape, 0.02)
            elif full == "lm_head.weight":
                a = common.normal(seed, full, shape, 0.02)
                ids = common.frequent_token_ids(seed, shape[0], cfg["frequent"])
                common.boost_rows(a, seed, ids)
            elif name.endswith("weight"):
                std = shape[1] ** -0.5
                if name.endswith(("q_proj.weight", "k_proj.weight")):
                    std *= cfg["attn_gain"]
                a = common.normal(seed, full, shape, std)
            else:
                raise ValueError("no init rule for " + full)
            p.copy_(torch.from_numpy(a))


def token_embeddings(seed, ids, hidden, std):
    """Seeded rows of a (never materialized) token embedding table: row t ~ N(0, std^2)."""
    return np.stack([common.normal(seed, "model.embed_tokens.weight.%d" % int(t), (hidden,), std) for t in ids])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=1, help="decoder layers per graph (default 1)")
    ap.add_argument("--hidden", type=int, default=1536)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=8960)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--seq", type=int, default=16, help="prefill tokens; single_token past = seq-1 (default 16)")
    ap.add_argument("--rope-theta", type=float, default=1e6)
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--max-pos", type=int, default=32768, help="RoPE cache rows (folded away at export)")
    ap.add_argument("--attn-gain", type=float, default=2.0, help="q_proj/k_proj weight std x this (default 2)")
    ap.add_argument("--frequent", type=int, default=300, help="boosted 'frequent' LM head rows (default 300)")
    ap.add_argument("--opset", type=int, choices=(14, 17), default=14)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--which", default="prefill,single_token")
    ap.add_argument("--prefill-mask", action="store_true", help="prefill.onnx takes attention_mask [1,S] too")
    ap.add_argument("--int8-kv", type=float, default=0, metavar="SCALE",
                    help="single_token.onnx takes its past K/V as int8 past_key_values.N.key_quantized/"
                         "value_quantized [1,KV,S-1,hd], dequantized in the graph (DequantizeLinear, this "
                         "scale, zero point 0), as the vendor's graph does")
    ap.add_argument("--dynamic", action="store_true",
                    help="Optimum-style export: dynamic batch/sequence axes, then fixed to static input dims")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--check", action="store_true", help="onnx.checker + op histograms of what was written")
    ap.add_argument("--ref", metavar="DIR", help="write seeded inputs and torch outputs (.npy) to DIR/GRAPH/")
    ap.add_argument("--samples", type=int, default=0, metavar="N", help="write N calibration samples (see above)")
    ap.add_argument("--sample-std", type=float, default=0.02, help="token embedding std for --samples/--ref")
    a = ap.parse_args(argv)
    if a.hidden % a.heads or a.heads % a.kv_heads:
        ap.error("--hidden must divide by --heads and --heads by --kv-heads")
    which = [w.strip() for w in a.which.split(",") if w.strip()]
    for w in which:
        if w not in ("prefill", "single_token"):
            ap.error("unknown graph in --which: " + w)

    import torch
    torch.manual_seed(a.seed)
    cfg = dict(hidden=a.hidden, heads=a.heads, kv_heads=a.kv_heads, ffn=a.ffn, vocab=a.vocab, layers=a.layers,
               eps=a.eps, rope_theta=a.rope_theta, max_pos=max(a.max_pos, a.seq), attn_gain=a.attn_gain,
               frequent=a.frequent)
    hd = a.hidden // a.heads
    S, H, KV, L = a.seq, a.hidden, a.kv_heads, a.layers
    print("qwen2: hidden %d, heads %d (kv %d) x %d, ffn %d, vocab %d, layers %d, seq %d, opset %d"
          % (H, a.heads, KV, hd, a.ffn, a.vocab, L, S, a.opset), file=sys.stderr)
    os.makedirs(a.out, exist_ok=True)

    Layers, Prefill, SingleToken = build(torch, cfg)
    model = Layers(cfg).eval()
    init_weights(torch, model, "model.", a.seed, cfg)
    lm_head = None
    if "single_token" in which:
        lm_head = torch.nn.Linear(H, a.vocab, bias=False)
        init_weights(torch, torch.nn.ModuleDict({"lm_head": lm_head}), "", a.seed, cfg)

    g = np.random.default_rng(a.seed + 1000)

    def embeds(n_tok):
        return torch.from_numpy(token_embeddings(a.seed, g.integers(0, a.vocab, n_tok), H, a.sample_std)[None])

    def ref_write(graph, names, arrays):
        if not a.ref:
            return
        d = os.path.join(a.ref, graph)
        os.makedirs(d, exist_ok=True)
        for n, x in zip(names, arrays):
            np.save(os.path.join(d, n + ".npy"), x.detach().numpy() if hasattr(x, "detach") else x)

    def dyn_axes(name):
        # Optimum's axis names
        if name in ("hidden_states", "inputs_embeds", "output_hidden_states", "logits"):
            return {0: "batch_size", 1: "sequence_length"}
        if name == "attention_mask":
            return {0: "batch_size", 1: "total_sequence_length"}
        if name.startswith("past_key_values."):
            return {0: "batch_size", 2: "past_sequence_length"}
        if name.startswith("present."):
            return {0: "batch_size", 2: "total_sequence_length"}
        return None

    def export(mod, args, path, names, outs, seq, past):
        dyn = common.dynamic_axes_for(names + outs, dyn_axes) if a.dynamic else None
        common.export(mod, args, path, names, outs, a.opset, dynamic_axes=dyn)
        if a.dynamic:
            common.fix_dims(path, {"batch_size": 1, "sequence_length": seq, "past_sequence_length": past,
                                   "total_sequence_length": seq + past})

    written = []
    if "prefill" in which:
        path = os.path.join(a.out, "prefill.onnx")
        mod = Prefill(model).eval()
        x = embeds(S)
        names, args = ["hidden_states"], (x,)
        if a.prefill_mask:
            pad = torch.ones((1, S), dtype=torch.int64)
            pad[0, max(1, S - 3):] = 0     # right padding: every query still sees a key
            names, args = names + ["attention_mask"], (x, pad)
        with common.Timer("export " + path):
            export(mod, args, path, names, ["output_hidden_states"], S, 0)
        written.append(path)
        if a.ref:
            with torch.no_grad():
                ref_write("prefill", names + ["output_hidden_states"], list(args) + [mod(*args)])

    def single_inputs():
        x = embeds(S)
        with torch.no_grad():
            _, pres = model.run(x[:, :S - 1])
        flat = [t for p in pres for t in p]
        return x[:, S - 1:], flat, torch.ones((1, S), dtype=torch.int64)

    if "single_token" in which:
        path = os.path.join(a.out, "single_token.onnx")
        mod = SingleToken(model, lm_head).eval()
        x1, flat, mask = single_inputs()
        names = ["inputs_embeds"]
        outs = ["logits"]
        for i in range(L):
            names += ["past_key_values.%d.key" % i, "past_key_values.%d.value" % i]
            outs += ["present.%d.key" % i, "present.%d.value" % i]
        names.append("attention_mask")
        w_t = lm_head.weight.detach().t().contiguous()
        with common.Timer("export " + path):
            export(SingleToken(model, lm_head, True).eval(), (x1, *flat, mask, w_t), path,
                   names + ["lm_head.weight_t"], outs, 1, S - 1)
            common.input_to_initializer(path, "lm_head.weight_t", w_t.numpy())
            for i in range(L) if a.int8_kv > 0 else ():
                for kv in ("key", "value"):
                    n = "past_key_values.%d.%s" % (i, kv)
                    common.dequantized_input(path, n, a.int8_kv, n + "_quantized")
        written.append(path)
        if a.ref:
            if a.int8_kv > 0:   # the cache as the int8 graph sees it: quantized, then dequantized
                q8 = [torch.clamp(torch.round(t / a.int8_kv), -128, 127) for t in flat]
                flat = [q * a.int8_kv for q in q8]
            with torch.no_grad():
                r = mod(x1, *flat, mask)
            pnames = names
            if a.int8_kv > 0:
                pnames = [n + "_quantized" if n.startswith("past_key_values.") else n for n in names]
                flat = [q.to(torch.int8) for q in q8]
            ref_write("single_token", pnames + outs, [x1] + flat + [mask] + list(r))

    if a.samples:
        with common.Timer("samples"):
            n = a.samples
            if "prefill" in which:
                hs = np.concatenate([embeds(S).numpy() for _ in range(n)])
                d = os.path.join(a.out, "samples", "prefill")
                os.makedirs(d, exist_ok=True)
                np.save(os.path.join(d, "hidden_states.npy"), hs)
                if a.prefill_mask:
                    np.save(os.path.join(d, "attention_mask.npy"), np.ones((n, S), dtype=np.int64))
                print("samples/prefill: hidden_states %s" % list(hs.shape), file=sys.stderr)
            if "single_token" in which:
                cols = {}
                for _ in range(n):
                    x1, flat, mask = single_inputs()
                    vals = [x1] + flat + [mask]
                    for k, v in zip(names, vals):
                        cols.setdefault(k, []).append(v.numpy())
                d = os.path.join(a.out, "samples", "single_token")
                os.makedirs(d, exist_ok=True)
                for k, v in cols.items():
                    np.save(os.path.join(d, k + ".npy"), np.concatenate(v))
                print("samples/single_token: %s" % ", ".join("%s [%d, %s]" % (k, n, ", ".join(map(str, v[0].shape[1:])))
                                                              for k, v in cols.items()), file=sys.stderr)

    for p in written:
        if a.check:
            print(common.describe(p))
        else:
            print("%s: %.1f MB" % (p, os.path.getsize(p) / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
