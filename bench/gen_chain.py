#!/usr/bin/python3
"""Generate a chain of N elementwise nodes on float[1,64] for compile-time benchmarks.

  x -> Mul(., a) -> Add(., b) -> Mul(., a) -> Add(., b) -> ... -> y     (N nodes in all)

a (0.5) and b (in [-0.5, 0.25]) are [64] initializers shared by every node, so values stay
in (-2, 2) whatever N (both targets have Add and Mul kernels). Opset 17; onnx.helper only.
Also writes x.npy (seeded) next to the model with --input.

Usage:
  /usr/bin/python3 bench/gen_chain.py --nodes 10000 --out /tmp/chain.onnx [--input /tmp/x.npy]
"""

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

W = 64


def build(n):
	nodes = []
	prev = "x"
	for i in range(n):
		out = "y" if i == n - 1 else "t%d" % i
		if i % 2 == 0:
			nodes.append(helper.make_node("Mul", [prev, "a"], [out], name="mul%d" % i))
		else:
			nodes.append(helper.make_node("Add", [prev, "b"], [out], name="add%d" % i))
		prev = out
	b = np.linspace(-0.5, 0.25, W, dtype=np.float32)
	graph = helper.make_graph(
		nodes, "chain%d" % n,
		[helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, W])],
		[helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, W])],
		[numpy_helper.from_array(np.full(W, 0.5, np.float32), "a"), numpy_helper.from_array(b, "b")])
	return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
	                         producer_name="gen_chain")


def main():
	ap = argparse.ArgumentParser()
	ap.add_argument("--nodes", type=int, required=True)
	ap.add_argument("--out", required=True)
	ap.add_argument("--input", help="also write a seeded x.npy here")
	a = ap.parse_args()
	m = build(a.nodes)
	m.ir_version = 8
	onnx.save(m, a.out)
	if a.input:
		rng = np.random.default_rng(1)
		np.save(a.input, rng.standard_normal((1, W)).astype(np.float32))


if __name__ == "__main__":
	main()
