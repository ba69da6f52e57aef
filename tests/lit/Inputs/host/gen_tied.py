#!/usr/bin/python3
"""Prints a tied-table graph (textual ONNX): an embedding Gather of W [V, K]
and the LM head MatMulNBits (bits 32, trans_b = 1) reading the same W, with
deterministic weights: gen_tied.py V K T [extra] — extra: W also feeds a Mul
whose result is a graph output (a third user that needs the float table)."""
import sys

V, K, T = (int(a) for a in sys.argv[1:4])
extra = len(sys.argv) > 4 and sys.argv[4] == "extra"
w = ", ".join("%.3g" % ((((i * 13) % 17) - 8) * 0.01) for i in range(V * K))
print('<ir_version: 8, opset_import: ["" : 17, "ai.wlower" : 1]>')
print("g (int64[1, %d] ids) => (float[1, %d, %d] e, float[1, %d, %d] y%s)"
      % (T, T, K, T, V, ", float[%d, %d] w2" % (V, K) if extra else ""))
print("  <float[%d, %d] w = {%s}> {" % (V, K, w))
print("   e = Gather <axis = 0> (w, ids)")
print("   h = Mul (e, e)")
print("   y = ai.wlower.MatMulNBits <K = %d, N = %d, bits = 32, trans_b = 1> (h, w)" % (K, V))
if extra:
    print("   w2 = Mul (w, w)")
print("}")
