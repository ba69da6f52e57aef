#!/usr/bin/python3
"""make_invalid.py KIND OUT [N] — well-formed binary models that the importer's
validation must refuse or accept (tests/lit/import_validate.onnxtxt).
KIND:
  nested_if N    If nodes nested N deep (the innermost branches: Identity of x)
  opset N        Relu at default-domain opset N
  softmax_float  Softmax with axis = 1.0 (a float attribute)
  big_dims       input x: float[2^40, 2^40]
"""
import sys

import onnx
from onnx import AttributeProto, TensorProto, helper

kind, out = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 0
X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
C = helper.make_tensor_value_info("c", TensorProto.BOOL, [])


def branch(depth, name):
    """a graph computing its output from outer x (and outer c) with an If nested `depth` deep"""
    o = helper.make_tensor_value_info(name + "_o", TensorProto.FLOAT, [2, 3])
    if depth == 0:
        node = helper.make_node("Identity", ["x"], [name + "_o"], name=name + "_id")
    else:
        node = helper.make_node("If", ["c"], [name + "_o"], name="if%d" % depth,
                                then_branch=branch(depth - 1, name + "t"),
                                else_branch=branch(0, name + "e"))
    return helper.make_graph([node], name, [], [o])


def model(nodes, inputs, opset=17):
    g = helper.make_graph(nodes, "g", inputs, [Y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


if kind == "nested_if":
    sys.setrecursionlimit(10000)
    top = helper.make_node("If", ["c"], ["y"], name="if%d" % n,
                           then_branch=branch(n - 1, "b"), else_branch=branch(0, "e"))
    m = model([top], [X, C])
elif kind == "opset":
    m = model([helper.make_node("Relu", ["x"], ["y"], name="relu0")], [X], opset=n)
elif kind == "softmax_float":
    node = helper.make_node("Softmax", ["x"], ["y"], name="sm0")
    a = node.attribute.add()
    a.name, a.type, a.f = "axis", AttributeProto.FLOAT, 1.0
    m = model([node], [X])
elif kind == "big_dims":
    big = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1 << 40, 1 << 40])
    m = model([helper.make_node("Relu", ["x"], ["y"], name="relu0")], [big])
else:
    sys.exit("unknown kind " + kind)
open(out, "wb").write(m.SerializeToString())
