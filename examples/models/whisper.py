#!/usr/bin/python3
"""Seeded Whisper (tiny/base) graphs in the structure HF transformers + torch.onnx give.

No trained Whisper weights can be had offline, so this writes HF-style modules directly in
torch (`encoder.layers.N.self_attn.q_proj`, `fc1`, `self_attn_layer_norm`, `decoder.layers.N.
encoder_attn`, ...), fills them with seeded, trained-like weights and exports them with
torch.onnx.export at static shapes:

  encoder_model.onnx     input_features [1,80,F] float       -> last_hidden_state [1,F/2,d]
  decoder_prefill.onnx   input_ids [1,T] int64 (T=4),
                         encoder_hidden_states [1,F/2,d]     -> logits [1,T,vocab]
                         (--prefill-present adds present.N.{decoder,encoder}.{key,value}, as
                          Optimum's decoder_model.onnx)
  decoder_with_past.onnx input_ids [1,1],
                         past_key_values.N.decoder.{key,value} [1,h,P,hd] (P = --past),
                         past_key_values.N.encoder.{key,value} [1,h,F/2,hd]
                                                             -> logits [1,1,vocab],
                                                                present.N.decoder.{key,value} [1,h,P+1,hd]
                         (Optimum's decoder_with_past_model.onnx: no encoder_hidden_states input,
                          cross-attention K/V come from the past inputs)

--layout optimum writes an Optimum/HF export folder instead: encoder_model.onnx, decoder_model.onnx
(the prefill graph with its presents, as --prefill-present), decoder_with_past_model.onnx and
config.json (HF WhisperConfig keys) and a copy of ../shared/data/whisper/multilingual.tiktoken
(where `wlower transcribe` looks for the tokenizer by default), every sequence dim left symbolic (batch_size,
decoder_sequence_length, encoder_sequence_length, past_decoder_sequence_length, ...): what
`wlower DIR --pipeline whisper` and tests/oracle/ort_whisper.js read. --d-model, --heads, --ffn
shrink the model for tests (with the full vocab, so the special token ids stay Whisper's).

--dynamic exports as Optimum does: dynamic_axes for the batch and sequence dims (batch_size,
decoder_sequence_length, encoder_sequence_length, past_decoder_sequence_length, ...), so the
graphs compute reshape targets, position slices and masks with Shape/Gather/Unsqueeze/Concat
chains; the symbolic dims are then fixed to the static sizes above (Optimum's / onnxruntime's
static shape fixing): graph inputs and outputs are static, the chains stay in the graph.

Opset 14 decomposes LayerNorm (ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add); opset 17
exports LayerNormalization. GELU is exact (Div/Erf/Add/Mul/Mul) at both.
Attention follows HF's eager WhisperAttention (q_proj output * hd^-0.5, bmm, Softmax, bmm) with
--scale-style q, or openai-whisper's qkv_attention (q and k each * hd^-0.25, 4-D MatMul) with
--scale-style qk. The decoder LM head is tied to embed_tokens (logits = h @ embed_tokens.T):
the file keeps one copy of the table (Transpose node on the shared initializer) unless
--lm-head-copy, which keeps the transposed copy torch's constant folding makes.

Weights: linear and conv weights ~ N(0, 1/fan_in), biases ~ N(0, 0.02^2), layer-norm gains
~ N(1, 0.05^2) and biases ~ N(0, 0.02^2), encoder positions sinusoidal (openai `sinusoids`),
decoder positions ~ N(0, 0.02^2), token embeddings ~ N(0, 0.02^2) with --frequent (300)
seeded "frequent" rows (low BPE ranks, plus eot) scaled by 4..6 so logits have clear winners.
Two departures from N(0, 1/fan_in), both as trained models have them: q_proj/k_proj weights
x --attn-gain (2: attention logits std ~4 instead of ~1, so attention is peaky, not an average
over 1500 frames) and conv1/conv2 x --stem-gain (3: the conv stem's output outweighs the
sinusoidal positions, so the encoder output depends on the audio). With both at 1 the greedy
tokens hardly depend on the audio (the decoder sees a near-constant encoder output).
Each parameter is seeded from (--seed, its name): a smaller --layers keeps the same layer 0.

Usage (run with /usr/bin/python3):
  /usr/bin/python3 examples/models/whisper.py --size tiny --out /tmp/wt
  /usr/bin/python3 examples/models/whisper.py --size tiny --layers 1 --frames 200 --vocab 1000 \\
      --opset 17 --which encoder,decoder_prefill --out /tmp/wt-small
  /usr/bin/python3 examples/models/whisper.py --size tiny --which encoder,decoder_prefill --dynamic --out /tmp/wv
      (the vendor pair `wlower DIR --pipeline whisper` takes: static 4-token prefill, no cache; --dynamic
       keeps the decoder's positional table, which a static export folds to the 4 rows it uses)
  /usr/bin/python3 examples/models/whisper.py --size base --scale-style qk --out /tmp/wb
  /usr/bin/python3 examples/models/samples.py --mels 73 --out /tmp/cal
  /usr/bin/python3 examples/models/whisper.py --size tiny --out /tmp/wt --samples /tmp/cal/mels.npy
Options: see --help. --check runs onnx.checker and prints op histograms; --ref DIR also writes
inputs and torch's outputs as .npy (NAME.npy per graph input/output, under DIR/GRAPH/; the input
mel is the first --samples mel if given, else noise); --samples MELS.npy writes the decoder
graphs' calibration inputs computed by the torch model (OUT/samples/GRAPH/NAME.npy).
Debian's torch uses the reference (netlib) BLAS: --samples at 3000 frames takes ~10 s per mel
on 2 cores; LD_LIBRARY_PATH=<dir with OpenBLAS's libblas.so.3> makes it ~6x faster.
Full-size export times: tiny decoder_prefill ~11 s (117.6 MB).
"""

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

SIZES = {
    "tiny": dict(d=384, heads=6, enc_layers=4, dec_layers=4, ffn=1536),
    "base": dict(d=512, heads=8, enc_layers=6, dec_layers=6, ffn=2048),
}
VOCAB = 51865
N_MELS = 80
TEXT_CTX = 448
EOT, SOT, EN, TRANSCRIBE, NOTIMESTAMPS = 50257, 50258, 50259, 50359, 50363
PROMPT = [SOT, EN, TRANSCRIBE, NOTIMESTAMPS]


def build(torch, cfg):
    nn = torch.nn
    F = torch.nn.functional

    class WhisperAttention(nn.Module):
        def __init__(self, d, heads, scale_style):
            super().__init__()
            self.embed_dim, self.num_heads = d, heads
            self.head_dim = d // heads
            self.scaling = self.head_dim ** -0.5
            self.scale_style = scale_style
            self.k_proj = nn.Linear(d, d, bias=False)
            self.v_proj = nn.Linear(d, d)
            self.q_proj = nn.Linear(d, d)
            self.out_proj = nn.Linear(d, d)

        def _shape(self, t, seq_len, bsz):
            return t.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

        def forward(self, hidden_states, key_value_states=None, past_key_value=None, attention_mask=None,
                    cross=False):
            """Returns (output, (key, value)) with key/value [b, h, s, hd] unscaled, as HF caches them.
            cross: this is the cross-attention (with past: its K/V come from the cache alone)."""
            is_cross = cross or key_value_states is not None
            bsz, tgt_len, _ = hidden_states.size()
            if self.scale_style == "q":
                query_states = self.q_proj(hidden_states) * self.scaling
            else:
                query_states = self.q_proj(hidden_states)
            if is_cross and past_key_value is not None:
                key_states, value_states = past_key_value
            elif is_cross:
                key_states = self._shape(self.k_proj(key_value_states), -1, bsz)
                value_states = self._shape(self.v_proj(key_value_states), -1, bsz)
            elif past_key_value is not None:
                key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
                value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
                key_states = torch.cat([past_key_value[0], key_states], dim=2)
                value_states = torch.cat([past_key_value[1], value_states], dim=2)
            else:
                key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
                value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
            present = (key_states, value_states)

            if self.scale_style == "q":
                # transformers WhisperAttention (eager): 3-D bmm over bsz*heads
                proj_shape = (bsz * self.num_heads, -1, self.head_dim)
                q = self._shape(query_states, tgt_len, bsz).view(*proj_shape)
                k = key_states.reshape(*proj_shape)
                v = value_states.reshape(*proj_shape)
                src_len = k.size(1)
                attn_weights = torch.bmm(q, k.transpose(1, 2))
                if attention_mask is not None:
                    attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len) + attention_mask
                    attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
                attn_weights = F.softmax(attn_weights, dim=-1)
                attn_output = torch.bmm(attn_weights, v)
                attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim)
                attn_output = attn_output.transpose(1, 2)
                attn_output = attn_output.reshape(bsz, tgt_len, self.embed_dim)
            else:
                # openai-whisper MultiHeadAttention.qkv_attention: q, k each scaled by hd^-0.25
                scale = self.head_dim ** -0.25
                q = query_states.view(bsz, tgt_len, self.num_heads, -1).permute(0, 2, 1, 3) * scale
                k = key_states.permute(0, 1, 3, 2) * scale
                qk = q @ k
                if attention_mask is not None:
                    qk = qk + attention_mask
                w = F.softmax(qk, dim=-1)
                attn_output = (w @ value_states).permute(0, 2, 1, 3).flatten(start_dim=2)
            return self.out_proj(attn_output), present

    class WhisperEncoderLayer(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.self_attn = WhisperAttention(c["d"], c["heads"], c["scale_style"])
            self.self_attn_layer_norm = nn.LayerNorm(c["d"])
            self.fc1 = nn.Linear(c["d"], c["ffn"])
            self.fc2 = nn.Linear(c["ffn"], c["d"])
            self.final_layer_norm = nn.LayerNorm(c["d"])
            self.activation_fn = nn.GELU()

        def forward(self, hidden_states):
            residual = hidden_states
            hidden_states = self.self_attn_layer_norm(hidden_states)
            hidden_states, _ = self.self_attn(hidden_states)
            hidden_states = residual + hidden_states
            residual = hidden_states
            hidden_states = self.final_layer_norm(hidden_states)
            hidden_states = self.activation_fn(self.fc1(hidden_states))
            hidden_states = self.fc2(hidden_states)
            return residual + hidden_states

    class WhisperEncoder(nn.Module):
        def __init__(self, c):
            super().__init__()
            d = c["d"]
            self.conv1 = nn.Conv1d(N_MELS, d, kernel_size=3, padding=1)
            self.conv2 = nn.Conv1d(d, d, kernel_size=3, stride=2, padding=1)
            self.embed_positions = nn.Embedding(c["audio_ctx"], d)
            self.layers = nn.ModuleList([WhisperEncoderLayer(c) for _ in range(c["enc_layers"])])
            self.layer_norm = nn.LayerNorm(d)

        def forward(self, input_features):
            inputs_embeds = F.gelu(self.conv1(input_features))
            inputs_embeds = F.gelu(self.conv2(inputs_embeds))
            inputs_embeds = inputs_embeds.permute(0, 2, 1)
            hidden_states = inputs_embeds + self.embed_positions.weight
            for layer in self.layers:
                hidden_states = layer(hidden_states)
            return self.layer_norm(hidden_states)

    class WhisperDecoderLayer(nn.Module):
        def __init__(self, c):
            super().__init__()
            d = c["d"]
            self.self_attn = WhisperAttention(d, c["heads"], c["scale_style"])
            self.self_attn_layer_norm = nn.LayerNorm(d)
            self.encoder_attn = WhisperAttention(d, c["heads"], c["scale_style"])
            self.encoder_attn_layer_norm = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, c["ffn"])
            self.fc2 = nn.Linear(c["ffn"], d)
            self.final_layer_norm = nn.LayerNorm(d)
            self.activation_fn = nn.GELU()

        def forward(self, hidden_states, attention_mask, encoder_hidden_states, past_key_value):
            self_past = past_key_value[:2] if past_key_value is not None else None
            cross_past = past_key_value[2:] if past_key_value is not None else None
            residual = hidden_states
            hidden_states = self.self_attn_layer_norm(hidden_states)
            hidden_states, self_present = self.self_attn(
                hidden_states, past_key_value=self_past, attention_mask=attention_mask)
            hidden_states = residual + hidden_states
            residual = hidden_states
            hidden_states = self.encoder_attn_layer_norm(hidden_states)
            hidden_states, cross_present = self.encoder_attn(
                hidden_states, key_value_states=encoder_hidden_states, past_key_value=cross_past, cross=True)
            hidden_states = residual + hidden_states
            residual = hidden_states
            hidden_states = self.final_layer_norm(hidden_states)
            hidden_states = self.activation_fn(self.fc1(hidden_states))
            hidden_states = self.fc2(hidden_states)
            hidden_states = residual + hidden_states
            return hidden_states, self_present + cross_present

    def make_causal_mask(bsz, tgt_len, dtype, past_len=0):
        # transformers' _make_causal_mask (4.2x)
        mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min)
        mask_cond = torch.arange(mask.size(-1))
        mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
        mask = mask.to(dtype)
        if past_len > 0:
            mask = torch.cat([torch.zeros(tgt_len, past_len, dtype=dtype), mask], dim=-1)
        return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len + past_len)

    class WhisperDecoder(nn.Module):
        def __init__(self, c):
            super().__init__()
            d = c["d"]
            self.embed_tokens = nn.Embedding(c["vocab"], d)
            self.embed_positions = nn.Embedding(TEXT_CTX, d)
            self.layers = nn.ModuleList([WhisperDecoderLayer(c) for _ in range(c["dec_layers"])])
            self.layer_norm = nn.LayerNorm(d)
            if c.get("untied_head"):  # HF proj_out with tie_word_embeddings false (whisper_fit.py)
                self.proj_out = nn.Linear(d, c["vocab"], bias=False)

        def forward(self, input_ids, encoder_hidden_states=None, past_key_values=None):
            bsz, seq = input_ids.shape
            past_len = past_key_values[0][0].shape[2] if past_key_values is not None else 0
            inputs_embeds = self.embed_tokens(input_ids)
            positions = self.embed_positions.weight[past_len:past_len + seq]
            hidden_states = inputs_embeds + positions
            # transformers builds no mask for a single query token
            mask = make_causal_mask(bsz, seq, inputs_embeds.dtype, past_len) if seq > 1 else None
            presents = []
            for i, layer in enumerate(self.layers):
                pkv = past_key_values[i] if past_key_values is not None else None
                hidden_states, present = layer(hidden_states, mask, encoder_hidden_states, pkv)
                presents.append(present)
            hidden_states = self.layer_norm(hidden_states)
            # proj_out: nn.Linear(d, vocab, bias=False) tied to embed_tokens
            head = self.proj_out.weight if hasattr(self, "proj_out") else self.embed_tokens.weight
            logits = F.linear(hidden_states, head)
            return logits, presents

    class PrefillWrapper(nn.Module):
        def __init__(self, dec, with_present):
            super().__init__()
            self.decoder, self.with_present = dec, with_present

        def forward(self, input_ids, encoder_hidden_states):
            logits, presents = self.decoder(input_ids, encoder_hidden_states)
            if not self.with_present:
                return logits
            return (logits,) + tuple(t for p in presents for t in p)

    class WithPastWrapper(nn.Module):
        def __init__(self, dec):
            super().__init__()
            self.decoder = dec

        def forward(self, input_ids, *flat_past):
            pkv = [tuple(flat_past[4 * i:4 * i + 4]) for i in range(len(flat_past) // 4)]
            logits, presents = self.decoder(input_ids, None, pkv)
            return (logits,) + tuple(t for p in presents for t in p[:2])

    return WhisperEncoder, WhisperDecoder, PrefillWrapper, WithPastWrapper


def sinusoids(length, channels, max_timescale=10000):
    """openai-whisper's encoder positional embedding."""
    log_inc = np.log(max_timescale) / (channels // 2 - 1)
    inv = np.exp(-log_inc * np.arange(channels // 2))
    t = np.arange(length)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1).astype(np.float32)


def init_weights(torch, module, prefix, seed, cfg):
    """Trained-like seeded statistics; see the module docstring."""
    frequent = None
    with torch.no_grad():
        for name, p in module.named_parameters():
            full = prefix + name
            shape = tuple(p.shape)
            if name.endswith("embed_tokens.weight"):
                a = common.normal(seed, full, shape, 0.02)
                frequent = common.frequent_token_ids(seed, shape[0], cfg["frequent"], extra=[EOT])
                common.boost_rows(a, seed, frequent)
            elif name.endswith("embed_positions.weight"):
                if prefix.startswith("encoder") and cfg["enc_pos"] == "sinusoidal":
                    a = sinusoids(shape[0], shape[1])
                else:
                    a = common.normal(seed, full, shape, 0.02)
            elif "layer_norm" in name and name.endswith("weight"):
                a = common.normal(seed, full, shape, 0.05, mean=1.0)
            elif name.endswith("bias"):
                a = common.normal(seed, full, shape, 0.02)
            elif name.endswith("weight"):
                fan_in = int(np.prod(shape[1:]))
                std = fan_in ** -0.5
                if name.endswith(("q_proj.weight", "k_proj.weight")):
                    std *= cfg["attn_gain"]
                if name.startswith(("conv1.", "conv2.")):
                    std *= cfg["stem_gain"]
                a = common.normal(seed, full, shape, std)
            else:
                raise ValueError("no init rule for " + full)
            p.copy_(torch.from_numpy(a))
    return frequent


def write_samples(torch, a, cfg, enc, dec, which):
    mels = np.load(a.samples)
    if mels.ndim != 3 or mels.shape[1:] != (N_MELS, a.frames):
        raise SystemExit("%s: shape %s, want [N,%d,%d]" % (a.samples, mels.shape, N_MELS, a.frames))
    want = [w for w in which if w.startswith("decoder")]
    if not want:
        return
    n = mels.shape[0]
    L = cfg["dec_layers"]
    out = {w: {} for w in want}
    pids = [t % a.vocab for t in PROMPT]
    pre_ids = torch.tensor([(pids * ((a.tokens + 3) // 4))[:a.tokens]])
    past_ids = torch.tensor([(pids * ((a.past + 3) // 4))[:a.past]])

    def put(w, name, x):
        x = x.detach().numpy() if hasattr(x, "detach") else x
        d = out[w].get(name)
        if d is None:
            d = out[w][name] = np.empty((n,) + x.shape[1:], x.dtype)
        d[i] = x[0]

    with torch.no_grad():
        for i in range(n):
            e = enc(torch.from_numpy(np.ascontiguousarray(mels[i:i + 1])))
            if "decoder_prefill" in out:
                put("decoder_prefill", "input_ids", pre_ids)
                put("decoder_prefill", "encoder_hidden_states", e)
            if "decoder_with_past" in out:
                lg, pres = dec(past_ids, e)
                put("decoder_with_past", "input_ids", lg[:, -1:].argmax(-1))
                for j in range(L):
                    for k, nm in enumerate(("decoder.key", "decoder.value", "encoder.key", "encoder.value")):
                        put("decoder_with_past", "past_key_values.%d.%s" % (j, nm), pres[j][k])
    for w, arrs in out.items():
        d = os.path.join(a.out, "samples", w)
        os.makedirs(d, exist_ok=True)
        for name, x in arrs.items():
            np.save(os.path.join(d, name + ".npy"), x)
        print("samples/%s: %s" % (w, ", ".join("%s %s" % (k, list(v.shape)) for k, v in arrs.items())),
              file=sys.stderr)


def main(argv=None, fit=None):
    """fit: optional callable fit(torch, cfg, enc, dec, frequent_ids) -> dict, run on the seeded modules
    before export (examples/models/whisper_fit.py); its dict goes to config.json as "wlower_fit"."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(SIZES), default="tiny")
    ap.add_argument("--layers", type=int, help="encoder and decoder layers (override)")
    ap.add_argument("--enc-layers", type=int, help="encoder layers (override; wins over --layers)")
    ap.add_argument("--dec-layers", type=int, help="decoder layers (override; wins over --layers)")
    ap.add_argument("--opset", type=int, choices=(14, 17), default=14)
    ap.add_argument("--scale-style", choices=("q", "qk"), default="q",
                    help="q: HF (q_proj output * hd^-0.5, bmm); qk: openai (q and k * hd^-0.25, MatMul)")
    ap.add_argument("--frames", type=int, default=3000, help="input mel frames (even); audio ctx = frames/2")
    ap.add_argument("--vocab", type=int, default=VOCAB)
    ap.add_argument("--tokens", type=int, default=4, help="decoder_prefill tokens (default 4: the prompt)")
    ap.add_argument("--past", type=int, default=4, help="decoder_with_past past length (default 4)")
    ap.add_argument("--frequent", type=int, default=300, help="boosted 'frequent' token rows (default 300)")
    ap.add_argument("--enc-pos", choices=("sinusoidal", "seeded"), default="sinusoidal")
    ap.add_argument("--attn-gain", type=float, default=2.0,
                    help="q_proj/k_proj weight std x this (default 2: attention logits std ~4, peaky as trained)")
    ap.add_argument("--stem-gain", type=float, default=3.0,
                    help="conv1/conv2 weight std x this (default 3: the conv stem outweighs the positions)")
    ap.add_argument("--prefill-present", action="store_true",
                    help="decoder_prefill also outputs present.N.{decoder,encoder}.{key,value} (Optimum)")
    ap.add_argument("--lm-head-copy", action="store_true",
                    help="keep torch's folded transposed copy of the tied LM head (file holds the table twice)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--untied-head", action="store_true",
                    help="the LM head as its own weight proj_out (initialised to embed_tokens), "
                         "HF's tie_word_embeddings false; whisper_fit.py fits it")
    ap.add_argument("--dynamic", action="store_true",
                    help="Optimum-style export: dynamic batch/sequence axes, then fixed to static input dims")
    ap.add_argument("--layout", choices=("wlower", "optimum"), default="wlower",
                    help="optimum: encoder_model/decoder_model/decoder_with_past_model.onnx + config.json, "
                         "symbolic dims kept (see the docstring)")
    ap.add_argument("--d-model", type=int, help="model width (override)")
    ap.add_argument("--heads", type=int, help="attention heads (override)")
    ap.add_argument("--ffn", type=int, help="FFN width (override)")
    ap.add_argument("--which", default="encoder,decoder_prefill,decoder_with_past")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--check", action="store_true", help="onnx.checker + op histograms of what was written")
    ap.add_argument("--ref", metavar="DIR", help="write seeded inputs and torch outputs (.npy) to DIR/GRAPH/")
    ap.add_argument("--samples", metavar="MELS.npy",
                    help="calibration inputs from mels [N,80,F] (samples.py): run the torch model and write "
                         "OUT/samples/GRAPH/INPUT.npy [N, *shape[1:]] for the decoder graphs in --which "
                         "(encoder_hidden_states = encoder(mels); with_past: prompt K/V, prefill's argmax)")
    a = ap.parse_args(argv)

    import torch
    torch.manual_seed(a.seed)

    cfg = dict(SIZES[a.size])
    if a.layers is not None:
        cfg["enc_layers"] = cfg["dec_layers"] = a.layers
    if a.enc_layers is not None:
        cfg["enc_layers"] = a.enc_layers
    if a.dec_layers is not None:
        cfg["dec_layers"] = a.dec_layers
    for k in ("d_model", "heads", "ffn"):
        if getattr(a, k) is not None:
            cfg["d" if k == "d_model" else k] = getattr(a, k)
    if cfg["d"] % cfg["heads"]:
        ap.error("--d-model must be a multiple of --heads")
    optimum = a.layout == "optimum"
    if optimum:
        a.dynamic = a.prefill_present = True
    if a.frames % 2:
        ap.error("--frames must be even")
    if a.past + 1 > TEXT_CTX or a.tokens > TEXT_CTX:
        ap.error("--past/--tokens exceed text ctx %d" % TEXT_CTX)
    cfg.update(untied_head=a.untied_head, vocab=a.vocab, audio_ctx=a.frames // 2, scale_style=a.scale_style,
               frequent=a.frequent, enc_pos=a.enc_pos, attn_gain=a.attn_gain, stem_gain=a.stem_gain)
    which = [w.strip() for w in a.which.split(",") if w.strip()]
    for w in which:
        if w not in ("encoder", "decoder_prefill", "decoder_with_past"):
            ap.error("unknown graph in --which: " + w)
    os.makedirs(a.out, exist_ok=True)

    Enc, Dec, PrefillW, WithPastW = build(torch, cfg)
    d, h = cfg["d"], cfg["heads"]
    hd, ctx = d // h, cfg["audio_ctx"]
    print("whisper-%s: d %d, heads %d x %d, layers %d+%d, ffn %d, vocab %d, frames %d (ctx %d), opset %d, scale %s"
          % (a.size, d, h, hd, cfg["enc_layers"], cfg["dec_layers"], cfg["ffn"], a.vocab, a.frames, ctx,
             a.opset, a.scale_style), file=sys.stderr)

    g = np.random.default_rng(a.seed + 1000)
    written = []
    enc = None
    if "encoder" in which or a.ref or a.samples:
        enc = Enc(cfg).eval()
        init_weights(torch, enc, "encoder.", a.seed, cfg)
    dec = None
    fitted = None
    if any(w.startswith("decoder") for w in which):
        dec = Dec(cfg).eval()
        frequent = init_weights(torch, dec, "decoder.", a.seed, cfg)
        if a.untied_head:
            with torch.no_grad():
                dec.proj_out.weight.copy_(dec.embed_tokens.weight)
        if fit is not None:
            fitted = fit(torch, cfg, enc, dec, frequent)
    emb = dec.embed_tokens.weight.detach().numpy() if dec is not None else None

    def ref_write(graph, names, arrays):
        if not a.ref:
            return
        dd = os.path.join(a.ref, graph)
        os.makedirs(dd, exist_ok=True)
        for n, x in zip(names, arrays):
            np.save(os.path.join(dd, n + ".npy"), x.detach().numpy() if hasattr(x, "detach") else x)

    # inputs: mel-like features in Whisper's range, the prompt ids, encoder output from the seeded encoder
    if a.samples:  # the first calibration sample (real log-mel) as the reference input
        feats = torch.from_numpy(np.array(np.load(a.samples, mmap_mode="r")[:1]))
    else:
        feats = torch.from_numpy((g.standard_normal((1, N_MELS, a.frames)) * 0.4 - 0.2).clip(-1.5, 1.5)
                                 .astype(np.float32))
    if tuple(feats.shape) != (1, N_MELS, a.frames):
        raise SystemExit("%s: want [N,%d,%d] mels" % (a.samples, N_MELS, a.frames))
    enc_out = None
    if enc is not None:
        with torch.no_grad():
            enc_out = enc(feats)

    def dyn_axes(name):
        # Optimum's axis names (the mel frames stay static: the positional table is fixed)
        if name == "input_features":
            return {0: "batch_size"}
        if name in ("last_hidden_state", "encoder_hidden_states"):
            return {0: "batch_size", 1: "encoder_sequence_length"}
        if name in ("input_ids", "logits"):
            return {0: "batch_size", 1: "decoder_sequence_length"}
        if name.startswith("past_key_values.") and ".decoder." in name:
            return {0: "batch_size", 2: "past_decoder_sequence_length"}
        if name.startswith("past_key_values.") or (name.startswith("present.") and ".encoder." in name):
            return {0: "batch_size", 2: "encoder_sequence_length_out"}
        if name.startswith("present."):
            return {0: "batch_size", 2: "past_decoder_sequence_length + 1"}
        return None

    def dyn_axes_prefill(name):
        if name.startswith("present.") and ".decoder." in name:
            return {0: "batch_size", 2: "decoder_sequence_length"}
        return dyn_axes(name)

    def export(mod, args, path, names, outs, tokens, past):
        axes = dyn_axes_prefill if past == 0 and tokens else dyn_axes
        dyn = common.dynamic_axes_for(names + outs, axes) if a.dynamic else None
        common.export(mod, args, path, names, outs, a.opset, dynamic_axes=dyn)
        if a.dynamic and not optimum:
            common.fix_dims(path, {"batch_size": 1, "decoder_sequence_length": tokens,
                                   "encoder_sequence_length": ctx, "encoder_sequence_length_out": ctx,
                                   "past_decoder_sequence_length": past,
                                   "past_decoder_sequence_length + 1": past + tokens})

    if "encoder" in which:
        path = os.path.join(a.out, "encoder_model.onnx")
        with common.Timer("export " + path):
            export(enc, (feats,), path, ["input_features"], ["last_hidden_state"], 0, 0)
        written.append(path)
        ref_write("encoder_model", ["input_features", "last_hidden_state"], [feats, enc_out])

    if enc_out is None:
        enc_out = torch.from_numpy(g.standard_normal((1, ctx, d)).astype(np.float32))
    ids = [t if t < a.vocab else t % a.vocab for t in PROMPT]
    ids = (ids * ((a.tokens + 3) // 4))[:a.tokens]
    input_ids = torch.tensor([ids], dtype=torch.int64)

    if "decoder_prefill" in which:
        path = os.path.join(a.out, "decoder_model.onnx" if optimum else "decoder_prefill.onnx")
        mod = PrefillW(dec, a.prefill_present).eval()
        outs = ["logits"]
        if a.prefill_present:
            for i in range(cfg["dec_layers"]):
                outs += ["present.%d.decoder.key" % i, "present.%d.decoder.value" % i,
                         "present.%d.encoder.key" % i, "present.%d.encoder.value" % i]
        with common.Timer("export " + path):
            export(mod, (input_ids, enc_out), path, ["input_ids", "encoder_hidden_states"], outs, a.tokens,
                   0)
        if not a.lm_head_copy:
            n = common.untie_transposed_copies(path, [("decoder.embed_tokens.weight", emb)])
            print("  tied LM head: removed %d transposed copy" % n, file=sys.stderr)
        written.append(path)
        if a.ref:
            with torch.no_grad():
                r = mod(input_ids, enc_out)
            r = r if isinstance(r, tuple) else (r,)
            ref_write("decoder_prefill", ["input_ids", "encoder_hidden_states"] + outs, [input_ids, enc_out] + list(r))

    if "decoder_with_past" in which:
        path = os.path.join(a.out, "decoder_with_past_model.onnx" if optimum else "decoder_with_past.onnx")
        mod = WithPastW(dec).eval()
        # past from running the decoder on a --past-token prompt (consistent K/V, not noise)
        pids = (PROMPT * ((a.past + 3) // 4))[:a.past]
        pids = torch.tensor([[t % a.vocab for t in pids]], dtype=torch.int64)
        with torch.no_grad():
            logits0, presents = dec(pids, enc_out)
        nxt = int(logits0[0, -1].argmax())
        step_ids = torch.tensor([[nxt]], dtype=torch.int64)
        flat, names, outs = [], ["input_ids"], ["logits"]
        for i, p in enumerate(presents):
            flat += list(p)
            names += ["past_key_values.%d.decoder.key" % i, "past_key_values.%d.decoder.value" % i,
                      "past_key_values.%d.encoder.key" % i, "past_key_values.%d.encoder.value" % i]
            outs += ["present.%d.decoder.key" % i, "present.%d.decoder.value" % i]
        with common.Timer("export " + path):
            export(mod, (step_ids, *flat), path, names, outs, 1, a.past)
        if not a.lm_head_copy:
            n = common.untie_transposed_copies(path, [("decoder.embed_tokens.weight", emb)])
            print("  tied LM head: removed %d transposed copy" % n, file=sys.stderr)
        written.append(path)
        if a.ref:
            with torch.no_grad():
                r = mod(step_ids, *flat)
            ref_write("decoder_with_past", names + outs, [step_ids] + flat + list(r))

    if a.samples:
        with common.Timer("samples"):
            write_samples(torch, a, cfg, enc if enc is not None else None, dec, which)

    if optimum:  # HF WhisperConfig keys the pipeline compiler reads
        import json
        conf = {"model_type": "whisper", "d_model": d, "encoder_layers": cfg["enc_layers"],
                "decoder_layers": cfg["dec_layers"], "encoder_attention_heads": h, "decoder_attention_heads": h,
                "encoder_ffn_dim": cfg["ffn"], "decoder_ffn_dim": cfg["ffn"], "vocab_size": a.vocab,
                "num_mel_bins": N_MELS, "max_source_positions": ctx, "max_target_positions": TEXT_CTX,
                "decoder_start_token_id": SOT, "eos_token_id": EOT, "pad_token_id": EOT,
                "wlower_generator": {"seed": a.seed, "size": a.size, "frames": a.frames}}
        if a.untied_head:
            conf["tie_word_embeddings"] = False
        if fitted is not None:
            conf["wlower_fit"] = fitted
        with open(os.path.join(a.out, "config.json"), "w") as f:
            json.dump(conf, f, indent=1)
        # the tokenizer next to the model, where `wlower transcribe` looks for it by default
        tok = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data",
                           "whisper", "multilingual.tiktoken")
        if os.path.exists(tok):
            import shutil
            shutil.copy(tok, os.path.join(a.out, "multilingual.tiktoken"))
    for p in written:
        if a.check:
            print(common.describe(p))
        else:
            print("%s: %.1f MB" % (p, os.path.getsize(p) / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
