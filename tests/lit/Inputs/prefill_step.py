"""prefill_step.onnxtxt: writes the small fused Whisper prefills (T = 2, one layer, D 8, 2 heads,
C 3, vocab 5, positional table of 6 rows) and their inputs into DIR; with --check compares the
derived step's outputs with the prefill's row 1 (numpy computes the cache row of token 0)."""
import os
import sys

import numpy as np

D, H, HD, C, V, N, T = 8, 2, 4, 3, 5, 6, 2
g = np.random.default_rng(7)
W = {n: (g.standard_normal(s) * 0.5).astype(np.float32) for n, s in (
    ("E", (V, D)), ("P", (N, D)), ("Wq", (D, D)), ("Wk", (D, D)), ("Wv", (D, D)), ("Wcq", (D, D)),
    ("Wck", (D, D)), ("Wcv", (D, D)), ("Wo", (D, V)))}
IDS = np.array([[3, 1]], np.int64)


def model(path, causal=1, t_ids=T, folded=False):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(a, n) for n, a in W.items() if not (folded and n == "P")]
    nodes = [helper.make_node("Gather", ["E", "input_ids"], ["e"], name="embed")]
    if folded:
        inits.append(numpy_helper.from_array(W["P"][:t_ids], "Prows"))
        nodes.append(helper.make_node("Add", ["e", "Prows"], ["x"], name="x_add"))
    else:
        inits += [numpy_helper.from_array(np.array([0], np.int64), "z"),
                  numpy_helper.from_array(np.array([t_ids], np.int64), "t"),
                  numpy_helper.from_array(np.array([0], np.int64), "ax")]
        nodes += [helper.make_node("Slice", ["P", "z", "t", "ax"], ["pos"], name="pos_slice"),
                  helper.make_node("Add", ["e", "pos"], ["x"], name="x_add")]
    wa = dict(domain="ai.wlower", embed=D, heads=H, scale=0.5, kv_layout="bsd")
    # a head split and merge left on the token path (constant targets with T at axis 1)
    inits += [numpy_helper.from_array(np.array([1, t_ids, H, HD], np.int64), "s4"),
              numpy_helper.from_array(np.array([1, t_ids, D], np.int64), "s3")]
    nodes += [helper.make_node("Reshape", ["x", "s4"], ["xr"], name="split"),
              helper.make_node("Reshape", ["xr", "s3"], ["xq"], name="merge"),
              helper.make_node("MatMul", ["xq", "Wq"], ["q"], name="q"),
              helper.make_node("MatMul", ["x", "Wk"], ["k"], name="k"),
              helper.make_node("MatMul", ["x", "Wv"], ["v"], name="v"),
              helper.make_node("WhisperAttention", ["q", "k", "v"], ["a"], name="self", q_len=T, kv_len=T,
                               causal=causal, **wa),
              helper.make_node("Add", ["x", "a"], ["h"], name="h"),
              helper.make_node("MatMul", ["h", "Wcq"], ["cq"], name="cq"),
              helper.make_node("MatMul", ["encoder_hidden_states", "Wck"], ["ck"], name="ck"),
              helper.make_node("MatMul", ["encoder_hidden_states", "Wcv"], ["cv"], name="cv"),
              helper.make_node("WhisperAttention", ["cq", "ck", "cv"], ["c"], name="cross", q_len=T, kv_len=C,
                               causal=0, **wa),
              helper.make_node("Add", ["h", "c"], ["h2"], name="h2"),
              helper.make_node("MatMul", ["h2", "Wo"], ["logits"], name="head")]
    gr = helper.make_graph(nodes, "prefill", [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, t_ids]),
        helper.make_tensor_value_info("encoder_hidden_states", TensorProto.FLOAT, [1, C, D])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, t_ids, V])], inits)
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.wlower", 1)])
    m.ir_version = 8
    onnx.save(m, path)


def heads(x):                     # [D] -> [H, HD]
    return x.reshape(H, HD)


def main():
    d = sys.argv[1]
    if "--check" in sys.argv:
        pre = np.load(os.path.join(d, "pre", "logits.npy"))
        st = np.load(os.path.join(d, "st", "logits.npy"))
        assert st.shape == (1, 1, V), st.shape
        err = np.abs(st[0, 0] - pre[0, 1]).max()
        assert err < 1e-5, (st, pre[:, 1], err)
        # and it is not row 0's (the position and the cache matter)
        assert np.abs(st[0, 0] - pre[0, 0]).max() > 1e-3
        x1 = W["E"][IDS[0, 1]] + W["P"][1]
        pk = np.load(os.path.join(d, "st", "present.0.decoder.key.npy"))
        pv = np.load(os.path.join(d, "st", "present.0.decoder.value.npy"))
        assert pk.shape == (1, H, 1, HD), pk.shape
        assert np.abs(pk[0, :, 0] - heads(x1 @ W["Wk"])).max() < 1e-5
        assert np.abs(pv[0, :, 0] - heads(x1 @ W["Wv"])).max() < 1e-5
        enc = np.load(os.path.join(d, "in", "enc.npy"))
        xk = np.load(os.path.join(d, "x", "present.0.encoder.key.npy"))
        assert np.abs(xk[0] - (enc[0] @ W["Wck"]).reshape(C, H, HD).transpose(1, 0, 2)).max() < 1e-5
        pp = np.load(os.path.join(d, "pp", "logits.npy"))
        assert np.abs(pp - pre).max() < 1e-5, (pp, pre)
        xs = W["E"][IDS[0]] + W["P"][:T]
        for n, w in (("key", "Wk"), ("value", "Wv")):
            got = np.load(os.path.join(d, "pp", "present.0.decoder.%s.npy" % n))
            assert got.shape == (1, H, T, HD), got.shape
            assert np.abs(got[0] - (xs @ W[w]).reshape(T, H, HD).transpose(1, 0, 2)).max() < 1e-5
        print("prefill-step: step row 1 equals the prefill (max |err| %.2e)" % err)
        return
    model(os.path.join(d, "prefill.onnx"))
    model(os.path.join(d, "notcausal.onnx"), causal=0)
    model(os.path.join(d, "tmismatch.onnx"), t_ids=3)
    model(os.path.join(d, "folded.onnx"), folded=True)
    i = os.path.join(d, "in")
    np.save(os.path.join(i, "ids.npy"), IDS)
    np.save(os.path.join(i, "id1.npy"), IDS[:, 1:])
    np.save(os.path.join(i, "pos1.npy"), np.array([1], np.int64))
    np.save(os.path.join(i, "enc.npy"), g.standard_normal((1, C, D)).astype(np.float32))
    # the static cache of S - 1 = 3 rows: row 0 holds token 0's K/V, rows 1, 2 garbage (masked)
    x0 = W["E"][IDS[0, 0]] + W["P"][0]
    pk = g.standard_normal((1, H, 3, HD)).astype(np.float32) * 10
    pv = g.standard_normal((1, H, 3, HD)).astype(np.float32) * 10
    pk[0, :, 0] = heads(x0 @ W["Wk"])
    pv[0, :, 0] = heads(x0 @ W["Wv"])
    np.save(os.path.join(i, "pk.npy"), pk)
    np.save(os.path.join(i, "pv.npy"), pv)
    np.save(os.path.join(i, "mask.npy"), np.array([[1, 0, 0, 1]], np.int64))


main()
