#!/usr/bin/python3
"""make_bad.py KIND OUT — malformed models for the bad-input lit tests.
KIND: truncated | random | ext_missing | ext_offset | ext_escape | rawsize
"""
import os
import random
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

kind, out = sys.argv[1], sys.argv[2]


def model_with(init):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    g = helper.make_graph([helper.make_node("Add", ["x", init.name], ["y"], name="add0")],
                          "g", [x], [y], [init])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


w = numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(2, 4), "w")
if kind in ("truncated", "random"):
    data = model_with(w).SerializeToString()
    if kind == "truncated":
        data = data[: len(data) * 2 // 3]
    else:
        rnd = random.Random(7)
        data = bytes(rnd.randrange(256) for _ in range(len(data)))
    open(out, "wb").write(data)
elif kind == "rawsize":
    w.raw_data = w.raw_data[:20]          # 5 floats for a [2,4] tensor
    open(out, "wb").write(model_with(w).SerializeToString())
else:
    t = TensorProto()
    t.name, t.data_type = "w", TensorProto.FLOAT
    t.dims.extend([2, 4])
    t.data_location = TensorProto.EXTERNAL
    loc = {"ext_missing": "nothere.bin", "ext_offset": os.path.basename(out) + ".bin",
           "ext_escape": "../../etc/passwd"}[kind]
    for k, v in (("location", loc), ("offset", "4096" if kind == "ext_offset" else "0"), ("length", "32")):
        e = t.external_data.add()
        e.key, e.value = k, v
    if kind == "ext_offset":
        open(out + ".bin", "wb").write(b"\0" * 64)
    open(out, "wb").write(model_with(t).SerializeToString())
