"""genai_llama.py — a Llama/Qwen2-style decoder in the structure ONNX Runtime GenAI's model builder
(onnxruntime-genai src/python/py/models/builder.py) writes, with seeded weights, for the
fuse-ms-gqa pass and its oracle test.

    /usr/bin/python3 examples/models/genai_llama.py OUT_DIR [--layers 2] [--hidden 64] [--heads 4]
        [--kv-heads 2] [--ffn 128] [--vocab 512] [--max-pos 64] [--rotary attn|node] [--seed 7]

writes OUT_DIR/model.onnx (float MatMuls: `wlower quantize --nbits 4 --block-size 32` turns
them into com.microsoft MatMulNBits, as the builder's int4 mode does with ONNX Runtime's
quantizer) and OUT_DIR/genai_config.json (the model's sizes, in the builder's key names).

One graph for prompt and generation, symbolic dims batch_size, sequence_length,
past_sequence_length and total_sequence_length:
  inputs   input_ids int64 [B,S], attention_mask int64 [B,total],
           past_key_values.{i}.key/value float [B,kv_heads,past,head_dim]
           (+ position_ids int64 [B,S] with --rotary node)
  outputs  logits float [B,S,vocab], present.{i}.key/value float [B,kv_heads,total,head_dim]
Per layer (builder names):
  /model/layers.{i}/input_layernorm: SimplifiedLayerNormalization (layer 0) or
      com.microsoft SkipSimplifiedLayerNormalization (residual sum as its 4th output)
  /model/layers.{i}/attn/{q,k,v}_proj/MatMul (+ Add bias with --qkv-bias)
  /model/layers.{i}/attn/GroupQueryAttention: com.microsoft GroupQueryAttention (q, k, v,
      past_key, past_value, seqlens_k, total_sequence_length, cos_cache, sin_cache) with
      do_rotary = 1 (--rotary attn), or com.microsoft RotaryEmbedding nodes on q and k
      before it (--rotary node, the builder's form for EPs without rotary in the attention op)
  /model/layers.{i}/attn/o_proj/MatMul
  /model/layers.{i}/post_attention_layernorm: SkipSimplifiedLayerNormalization
  /model/layers.{i}/mlp/{gate,up}_proj/MatMul, act_fn (Sigmoid, Mul), Mul, down_proj/MatMul
  /model/layers.{L}/final_norm_layernorm: SkipSimplifiedLayerNormalization; /lm_head/MatMul
The builder's attention-mask reformatting for GQA:
  seqlens_k = Cast<int32>(Sub(ReduceSum(attention_mask, [1]), 1))       [B,1]
  total_sequence_length = Cast<int32>(Gather(Shape(attention_mask), 1))  scalar
cos_cache / sin_cache: [max_pos, head_dim/2] tables of cos/sin(pos · inv_freq), θ = rope_theta.

Weights: linear ~ N(0, 1/fan_in), norm gains 1 + N(0, 0.1²), embeddings N(0, 1) with 64
"frequent" rows boosted ×4–6 and an LM head tied to the embeddings (stored as its transposed
copy, as the builder writes a tied head), so that logits have clear winners.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def build(cfg):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    L, D, H, KV = cfg["layers"], cfg["hidden"], cfg["heads"], cfg["kv_heads"]
    hd, F, V, seed = D // H, cfg["ffn"], cfg["vocab"], cfg["seed"]
    eps = cfg["eps"]
    nodes, inits = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op, ins, outs, name, domain="", **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=name, domain=domain or None, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def linear(x, prefix, k, n, bias=False):
        w = init(prefix + ".weight", common.normal(seed, prefix + ".weight", (k, n), 1.0 / np.sqrt(k)))
        base = "/" + prefix.replace("model.layers", "model/layers").replace(".attn.", "/attn/").replace(".mlp.", "/mlp/")
        y = node("MatMul", [x, w], [base + "/MatMul/output_0"], base + "/MatMul")
        if bias:
            b = init(prefix + ".bias", common.normal(seed, prefix + ".bias", (n,), 0.1))
            y = node("Add", [b, y], [base + "/Add/output_0"], base + "/Add")
        return y

    def gain(name):
        return init(name, common.normal(seed, name, (D,), 0.1, mean=1.0))

    # embeddings (tied LM head)
    emb = common.normal(seed, "model.embed_tokens.weight", (V, D), 1.0)
    ids = common.frequent_token_ids(seed, V, 64, low=V)
    common.boost_rows(emb, seed, ids)
    init("model.embed_tokens.weight", emb)
    x = node("Gather", ["model.embed_tokens.weight", "input_ids"], ["/model/embed_tokens/Gather/output_0"],
             "/model/embed_tokens/Gather")

    # attention mask reformatting for GQA
    init("/model/constants/INT64/[1]", np.array([1], np.int64))
    init("/model/constants/INT64/1", np.array(1, np.int64))
    rs = node("ReduceSum", ["attention_mask", "/model/constants/INT64/[1]"], ["/model/attn_mask_reformat/ReduceSum/output_0"],
              "/model/attn_mask_reformat/attn_mask_subgraph/ReduceSum")
    sb = node("Sub", [rs, "/model/constants/INT64/[1]"], ["/model/attn_mask_reformat/Sub/output_0"],
              "/model/attn_mask_reformat/attn_mask_subgraph/Sub")
    seqlens = node("Cast", [sb], ["/model/attn_mask_reformat/seqlens_k"], "/model/attn_mask_reformat/attn_mask_subgraph/Sub/Cast",
                   to=TensorProto.INT32)
    sh = node("Shape", ["attention_mask"], ["/model/attn_mask_reformat/Shape/output_0"], "/model/attn_mask_reformat/attn_mask_subgraph/Shape")
    g1 = node("Gather", [sh, "/model/constants/INT64/1"], ["/model/attn_mask_reformat/Gather/output_0"],
              "/model/attn_mask_reformat/attn_mask_subgraph/Gather", axis=0)
    total = node("Cast", [g1], ["/model/attn_mask_reformat/total_seq_len"], "/model/attn_mask_reformat/attn_mask_subgraph/Gather/Cast",
                 to=TensorProto.INT32)

    # rotary caches [max_pos, hd/2]
    inv = 1.0 / (cfg["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    ang = np.outer(np.arange(cfg["max_pos"], dtype=np.float64), inv)
    init("cos_cache", np.cos(ang).astype(np.float32))
    init("sin_cache", np.sin(ang).astype(np.float32))

    residual = None
    for i in range(L):
        p = "model.layers.%d" % i
        if i == 0:
            h = node("SimplifiedLayerNormalization", [x, gain(p + ".input_layernorm.weight")],
                     ["/model/layers.0/input_layernorm/output_0"], "/model/layers.0/input_layernorm/LayerNorm",
                     axis=-1, epsilon=eps, stash_type=1)
            residual = x
        else:
            outs = ["/model/layers.%d/input_layernorm/output_0" % i, "", "",
                    "/model/layers.%d/input_layernorm/output_3" % i]
            h, _, _, residual = node("SkipSimplifiedLayerNormalization", [x, residual, gain(p + ".input_layernorm.weight")],
                                     outs, "/model/layers.%d/input_layernorm/SkipLayerNorm" % i, "com.microsoft",
                                     epsilon=eps)
        q = linear(h, p + ".attn.q_proj", D, H * hd, cfg["qkv_bias"])
        k = linear(h, p + ".attn.k_proj", D, KV * hd, cfg["qkv_bias"])
        v = linear(h, p + ".attn.v_proj", D, KV * hd, cfg["qkv_bias"])
        rot = {"do_rotary": 1, "rotary_interleaved": 0}
        caches = ["cos_cache", "sin_cache"]
        if cfg["rotary"] == "node":
            q = node("RotaryEmbedding", [q, "position_ids", "cos_cache", "sin_cache"], ["/model/layers.%d/attn/q_rotary/output_0" % i],
                     "/model/layers.%d/attn/q_rotary/RotaryEmbedding" % i, "com.microsoft", interleaved=0, num_heads=H)
            k = node("RotaryEmbedding", [k, "position_ids", "cos_cache", "sin_cache"], ["/model/layers.%d/attn/k_rotary/output_0" % i],
                     "/model/layers.%d/attn/k_rotary/RotaryEmbedding" % i, "com.microsoft", interleaved=0, num_heads=KV)
            rot, caches = {}, []
        a, _, _ = node("GroupQueryAttention",
                       [q, k, v, "past_key_values.%d.key" % i, "past_key_values.%d.value" % i, seqlens, total] + caches,
                       ["/model/layers.%d/attn/GroupQueryAttention/output_0" % i, "present.%d.key" % i, "present.%d.value" % i],
                       "/model/layers.%d/attn/GroupQueryAttention" % i, "com.microsoft",
                       num_heads=H, kv_num_heads=KV, local_window_size=-1, softcap=0.0, **rot)
        o = linear(a, p + ".attn.o_proj", H * hd, D)
        outs = ["/model/layers.%d/post_attention_layernorm/output_0" % i, "", "",
                "/model/layers.%d/post_attention_layernorm/output_3" % i]
        h, _, _, residual = node("SkipSimplifiedLayerNormalization", [o, residual, gain(p + ".post_attention_layernorm.weight")],
                                 outs, "/model/layers.%d/post_attention_layernorm/SkipLayerNorm" % i, "com.microsoft",
                                 epsilon=eps)
        g = linear(h, p + ".mlp.gate_proj", D, F)
        u = linear(h, p + ".mlp.up_proj", D, F)
        sg = node("Sigmoid", [g], ["/model/layers.%d/mlp/act_fn/Sigmoid/output_0" % i], "/model/layers.%d/mlp/act_fn/Sigmoid" % i)
        act = node("Mul", [g, sg], ["/model/layers.%d/mlp/act_fn/Mul/output_0" % i], "/model/layers.%d/mlp/act_fn/Mul" % i)
        m = node("Mul", [act, u], ["/model/layers.%d/mlp/Mul/output_0" % i], "/model/layers.%d/mlp/Mul" % i)
        x = linear(m, p + ".mlp.down_proj", F, D)
    outs = ["/model/layers.%d/final_norm_layernorm/output_0" % L, "", "", ""]
    h, _, _, _ = node("SkipSimplifiedLayerNormalization", [x, residual, gain("model.norm.weight")], outs,
                      "/model/layers.%d/final_norm_layernorm/SkipLayerNorm" % L, "com.microsoft", epsilon=eps)
    init("lm_head.MatMul.weight", np.ascontiguousarray(emb.T))
    node("MatMul", [h, "lm_head.MatMul.weight"], ["logits"], "/lm_head/MatMul")
    nodes[-1].output[0] = "logits"

    def t(name, elem, dims):
        return helper.make_tensor_value_info(name, elem, dims)

    F32, I64 = TensorProto.FLOAT, TensorProto.INT64
    inputs = [t("input_ids", I64, ["batch_size", "sequence_length"]),
              t("attention_mask", I64, ["batch_size", "total_sequence_length"])]
    if cfg["rotary"] == "node":
        inputs.append(t("position_ids", I64, ["batch_size", "sequence_length"]))
    outputs = [t("logits", F32, ["batch_size", "sequence_length", V])]
    for i in range(L):
        for kv in ("key", "value"):
            inputs.append(t("past_key_values.%d.%s" % (i, kv), F32, ["batch_size", KV, "past_sequence_length", hd]))
            outputs.append(t("present.%d.%s" % (i, kv), F32, ["batch_size", KV, "total_sequence_length", hd]))
    graph = helper.make_graph(nodes, "main_graph", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid("com.microsoft", 1)],
                              producer_name="onnxruntime-genai")
    model.ir_version = 8
    return model


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--max-pos", type=int, default=64)
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--qkv-bias", action="store_true", help="q/k/v biases (Qwen2)")
    ap.add_argument("--rotary", choices=("attn", "node"), default="attn",
                    help="attn: do_rotary in GroupQueryAttention; node: com.microsoft RotaryEmbedding before it")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args(argv)
    if a.hidden % a.heads or a.heads % a.kv_heads or (a.hidden // a.heads) % 2:
        ap.error("hidden must split into heads of even size, heads into kv-heads")
    cfg = {"layers": a.layers, "hidden": a.hidden, "heads": a.heads, "kv_heads": a.kv_heads, "ffn": a.ffn,
           "vocab": a.vocab, "max_pos": a.max_pos, "eps": a.eps, "rope_theta": a.rope_theta,
           "qkv_bias": a.qkv_bias, "rotary": a.rotary, "seed": a.seed}
    import onnx
    model = build(cfg)
    # (onnx.checker knows no SimplifiedLayerNormalization: ONNX Runtime registers it in the default domain)
    os.makedirs(a.out_dir, exist_ok=True)
    onnx.save(model, os.path.join(a.out_dir, "model.onnx"))
    gc = {"model": {"type": "llama", "vocab_size": a.vocab, "context_length": a.max_pos, "bos_token_id": 1,
                    "eos_token_id": 2, "decoder": {"filename": "model.onnx", "hidden_size": a.hidden,
                                                   "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads,
                                                   "head_size": a.hidden // a.heads, "num_hidden_layers": a.layers}}}
    with open(os.path.join(a.out_dir, "genai_config.json"), "w") as f:
        json.dump(gc, f, indent=2)
    print("genai_llama: %s (%d nodes)" % (os.path.join(a.out_dir, "model.onnx"), len(model.graph.node)))


if __name__ == "__main__":
    main()
