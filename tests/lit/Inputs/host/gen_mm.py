#!/usr/bin/python3
"""Prints a one-node ai.wlower.MatMulNBits graph (textual ONNX) with
deterministic weights: gen_mm.py BITS M K N [trans_b] [groups] (bits 32
with groups G: the weight is [K, N/G] and the node has groups = G)."""
import sys

bits, M, K, N = (int(a) for a in sys.argv[1:5])
trans_b = len(sys.argv) > 5 and sys.argv[5] == "1"
groups = int(sys.argv[6]) if len(sys.argv) > 6 else 1
block = 32
print('<ir_version: 8, opset_import: ["" : 17, "ai.wlower" : 1]>')
print("g (float[%d, %d] x) => (float[%d, %d] y)" % (M, K, M, N))
if bits == 4:
    kb = K // block
    q = ", ".join(str((i * 37 + 11) % 256) for i in range(N * kb * block // 2))
    s = ", ".join("%.3g" % (0.01 + (i % 7) * 0.001) for i in range(N * kb))
    b = ", ".join("%.3g" % ((i % 5) * 0.1) for i in range(N))
    print("  <uint8[%d, %d, %d] q = {%s}, float[%d] s = {%s}, float[%d] b = {%s}> {"
          % (N, kb, block // 2, q, N * kb, s, N, b))
    print("   y = ai.wlower.MatMulNBits <K = %d, N = %d, bits = %d, block_size = %d> (x, q, s, , b)"
          % (K, N, bits, block))
else:
    r0, r1 = (N, K) if trans_b else (K, N // groups)
    w = ", ".join("%.3g" % (((i * 13) % 17) * 0.01) for i in range(r0 * r1))
    print("  <float[%d, %d] w = {%s}> {" % (r0, r1, w))
    print("   y = ai.wlower.MatMulNBits <K = %d, N = %d, bits = %d%s%s> (x, w)"
          % (K, N, bits, ", trans_b = 1" if trans_b else "", ", groups = %d" % groups if groups > 1 else ""))
print("}")
