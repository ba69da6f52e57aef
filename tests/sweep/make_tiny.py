#!/usr/bin/python3
"""make_tiny.py OUT_DIR — a tiny float model for `wlower sweep` tests: MatMul (constant
64x128 weight) -> Gelu-free LayerNorm -> MatMul (128x64) -> Add, written as OUT_DIR/tiny.onnx,
with one calibration sample OUT_DIR/x.npy (seeded)."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)
w1 = (rng.standard_normal((64, 128)) / 8).astype(np.float32)
w2 = (rng.standard_normal((128, 64)) / 11).astype(np.float32)
g = np.ones(128, np.float32)
b = np.zeros(128, np.float32)
nodes = [
    helper.make_node("MatMul", ["x", "w1"], ["h"], name="/fc1"),
    helper.make_node("LayerNormalization", ["h", "g", "b"], ["n"], name="/ln", axis=-1, epsilon=1e-5),
    helper.make_node("MatMul", ["n", "w2"], ["m"], name="/fc2"),
    helper.make_node("Add", ["m", "x"], ["y"], name="/res"),
]
graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 64])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
                           numpy_helper.from_array(g, "g"), numpy_helper.from_array(b, "b")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(model)
onnx.save(model, os.path.join(out, "tiny.onnx"))
np.save(os.path.join(out, "x.npy"), rng.standard_normal((1, 32, 64)).astype(np.float32))
