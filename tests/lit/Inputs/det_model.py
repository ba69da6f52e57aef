#!/usr/bin/python3
"""det_model.py OUT_DIR — the graph of tests/lit/determinism.onnxtxt and its input:
x [8, 1536] -> LayerNormalization(s, b) -> Gelu -> Mul(w) -> Add(x) -> y (opset 20 Gelu),
long reductions so that a change of summation order would show. Seeded."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
D = 1536
rng = np.random.default_rng(5)
inits = [numpy_helper.from_array((1 + 0.1 * rng.standard_normal(D)).astype(np.float32), "s"),
         numpy_helper.from_array((0.1 * rng.standard_normal(D)).astype(np.float32), "b"),
         numpy_helper.from_array((0.5 * rng.standard_normal(D)).astype(np.float32), "w")]
nodes = [helper.make_node("LayerNormalization", ["x", "s", "b"], ["l"], name="ln", axis=-1, epsilon=1e-5),
         helper.make_node("Gelu", ["l"], ["g"], name="gelu"),
         helper.make_node("Mul", ["g", "w"], ["m"], name="mul"),
         helper.make_node("Add", ["m", "x"], ["y"], name="add")]
g = helper.make_graph(nodes, "det", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, D])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, D])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
m.ir_version = 8
open(os.path.join(out, "det.onnx"), "wb").write(m.SerializeToString())
np.save(os.path.join(out, "x.npy"), (3 * rng.standard_normal((8, D))).astype(np.float32))
