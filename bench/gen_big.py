#!/usr/bin/python3
"""Generate a large float ONNX graph (Whisper-base-decoder sized, ~200 MB) for load/import benchmarks.

numpy + onnx.helper only (no torch), a few seconds. The graph is decoder-shaped but simplified
(single-head attention, no activation in the FFN: only MatMul/Add/LayerNormalization/Softmax
plus Gather/Slice/Transpose/Mul):
  input_ids [1,T] int64 -> Gather(embed_tokens [V,512]) + Slice(positions [448,512])
  per layer: LayerNormalization -> self-attention (q/k/v/o MatMul 512x512 + bias, Softmax(q k^T/sqrt(512)) v)
             -> Add; LayerNormalization -> cross-attention on encoder_hidden_states [1,1500,512] -> Add;
             LayerNormalization -> MatMul 512x2048 + Add -> MatMul 2048x512 + Add -> Add
  final LayerNormalization -> logits [1,T,V] = h @ Transpose(embed_tokens) (same initializer: no second copy)
Opset 17. Weights ~ N(0, 1/fan_in), seeded.

Default sizes (--size-mb 200): vocab 51865 x 512 embedding (106 MB) + 6 layers of
8 x 512x512 + 2 x 512x2048 (100 MB) = ~207 MB. --size-mb N scales the layer count (and,
below ~120 MB, the vocabulary) to about N MB.

  --external   save with external data: FILE + FILE's basename + '.data' next to it
               (onnx.save_model(..., save_as_external_data=True, all_tensors_to_one_file=True,
                location=basename(FILE) + '.data', size_threshold=1024))

Checked with onnx.checker.check_model (path-based for --external).

Usage:
  /usr/bin/python3 bench/gen_big.py --out /tmp/big.onnx
  /usr/bin/python3 bench/gen_big.py --out /tmp/big_ext.onnx --external
  /usr/bin/python3 bench/gen_big.py --out /tmp/big50.onnx --size-mb 50
"""

import argparse
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

D, FFN, TEXT_CTX, ENC_CTX = 512, 2048, 448, 1500
VOCAB = 51865
LAYER_BYTES = (8 * D * D + 2 * D * FFN + 4 * D + FFN + 6 * D) * 4


def plan(size_mb):
    total = size_mb * 1e6
    emb_full = VOCAB * D * 4
    if total >= emb_full + LAYER_BYTES:
        vocab = VOCAB
        layers = max(1, int(round((total - emb_full) / LAYER_BYTES)))
    else:
        layers = 1
        vocab = max(16, int((total - LAYER_BYTES) / (D * 4)))
    return vocab, layers


def build(vocab, layers, tokens, seed):
    g = np.random.default_rng(seed)
    inits, nodes = [], []

    def W(name, shape, std):
        a = g.standard_normal(size=shape, dtype=np.float32)
        a *= np.float32(std)
        inits.append(numpy_helper.from_array(a, name))
        return name

    def C(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def N(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], name=out + "_node", **kw))
        return out

    def lin(x, name, k, n, bias=True):
        y = N("MatMul", [x, W(name + ".weight", (k, n), k ** -0.5)], name + ".mm")
        if bias:
            y = N("Add", [y, W(name + ".bias", (n,), 0.02)], name + ".out")
        return y

    def ln(x, name):
        gam = C(name + ".weight", (1.0 + 0.05 * g.standard_normal(D)).astype(np.float32))
        bet = W(name + ".bias", (D,), 0.02)
        return N("LayerNormalization", [x, gam, bet], name + ".out", axis=-1, epsilon=1e-5)

    def attn(x, kv, name):
        q = lin(x, name + ".q_proj", D, D)
        k = lin(kv, name + ".k_proj", D, D, bias=False)
        v = lin(kv, name + ".v_proj", D, D)
        kt = N("Transpose", [k], name + ".kT", perm=[0, 2, 1])
        s = N("MatMul", [q, kt], name + ".scores")
        s = N("Mul", [s, C(name + ".scale", np.array(D ** -0.5, np.float32))], name + ".scaled")
        p = N("Softmax", [s], name + ".probs", axis=-1)
        o = N("MatMul", [p, v], name + ".ctx")
        return lin(o, name + ".out_proj", D, D)

    emb = W("decoder.embed_tokens.weight", (vocab, D), 0.02)
    pos = W("decoder.embed_positions.weight", (TEXT_CTX, D), 0.02)
    x = N("Gather", [emb, "input_ids"], "embed")
    p = N("Slice", [pos, C("pos_start", np.array([0], np.int64)), C("pos_end", np.array([tokens], np.int64)),
                    C("pos_axis", np.array([0], np.int64))], "positions")
    x = N("Add", [x, p], "h0")
    for i in range(layers):
        pre = "decoder.layers.%d" % i
        h = ln(x, pre + ".self_attn_layer_norm")
        x = N("Add", [x, attn(h, h, pre + ".self_attn")], pre + ".res1")
        x = N("Add", [x, attn(ln(x, pre + ".encoder_attn_layer_norm"), "encoder_hidden_states", pre + ".encoder_attn")],
              pre + ".res2")
        h = lin(ln(x, pre + ".final_layer_norm"), pre + ".fc1", D, FFN)
        h = lin(h, pre + ".fc2", FFN, D)
        x = N("Add", [x, h], pre + ".res3")
    x = ln(x, "decoder.layer_norm")
    et = N("Transpose", [emb], "lm_head.weight_T", perm=[1, 0])
    N("MatMul", [x, et], "logits")

    graph = helper.make_graph(
        nodes, "gen_big",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, tokens]),
         helper.make_tensor_value_info("encoder_hidden_states", TensorProto.FLOAT, [1, ENC_CTX, D])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, tokens, vocab])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="wlower-gen_big")
    model.ir_version = 8
    return model


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output .onnx file")
    ap.add_argument("--external", action="store_true", help="weights in OUT's basename + '.data' next to it")
    ap.add_argument("--size-mb", type=float, default=200.0, help="approximate total size in MB (default 200)")
    ap.add_argument("--tokens", type=int, default=4, help="input_ids length (default 4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-check", action="store_true", help="skip onnx.checker")
    a = ap.parse_args(argv)

    t0 = time.time()
    vocab, layers = plan(a.size_mb)
    model = build(vocab, layers, a.tokens, a.seed)
    t1 = time.time()
    out = os.path.abspath(a.out)
    d = os.path.dirname(out)
    if d:
        os.makedirs(d, exist_ok=True)
    tmp = out + ".tmp"
    if a.external:
        loc = os.path.basename(out) + ".data"
        data_path = os.path.join(d, loc)
        if os.path.exists(data_path):
            os.remove(data_path)  # onnx appends to an existing data file
        onnx.save_model(model, tmp, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=loc, size_threshold=1024)
    else:
        onnx.save_model(model, tmp)
    os.replace(tmp, out)
    t2 = time.time()
    if not a.no_check:
        if a.external:
            onnx.checker.check_model(out)
        else:
            onnx.checker.check_model(model)
    t3 = time.time()
    size = os.path.getsize(out) + (os.path.getsize(os.path.join(d, os.path.basename(out) + ".data")) if a.external else 0)
    print("%s: %.1f MB%s, vocab %d, %d layers, %d nodes, %d initializers; build %.1f s, save %.1f s, check %.1f s"
          % (out, size / 1e6, " (external data %s.data)" % os.path.basename(out) if a.external else "",
             vocab, layers, len(model.graph.node), len(model.graph.initializer), t1 - t0, t2 - t1, t3 - t2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
