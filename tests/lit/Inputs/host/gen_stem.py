#!/usr/bin/python3
"""Prints a one-node ai.wlower.ConvStem graph (textual ONNX): gen_stem.py B C F D
CONST. CONST 1: W1 [D, C, 3] and W2 [D, D, 3] are initializers with
deterministic values (the host packs them at compile time); 0: graph inputs."""
import sys

B, C, F, D, const = (int(a) for a in sys.argv[1:6])
F2 = (F - 1) // 2 + 1
ins = ["float[%d,%d,%d] x" % (B, C, F)]
if not const:
    ins.append("float[%d,%d,3] w1" % (D, C))
ins.append("float[%d] b1" % D)
if not const:
    ins.append("float[%d,%d,3] w2" % (D, D))
ins += ["float[%d] b2" % D, "float[%d,%d] pos" % (F2, D)]
print('<ir_version: 8, opset_import: ["" : 17, "ai.wlower" : 1]>')
print("g (%s) => (float[%d,%d,%d] y)" % (", ".join(ins), B, F2, D))
if const:
    w1 = ", ".join("%.3g" % (((i * 13) % 17 - 8) * 0.01) for i in range(D * C * 3))
    w2 = ", ".join("%.3g" % (((i * 7) % 11 - 5) * 0.01) for i in range(D * D * 3))
    print("  <float[%d,%d,3] w1 = {%s}, float[%d,%d,3] w2 = {%s}>" % (D, C, w1, D, D, w2))
print("{")
print("   y = ai.wlower.ConvStem <strides = [1, 2], pads = [1, 1]> (x, w1, b1, w2, b2, pos)")
print("}")
