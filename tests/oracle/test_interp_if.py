#!/usr/bin/python3
"""test_interp_if.py — the reference executor's If kernel against ONNX Runtime.

    test_interp_if.py WLOWER WORKDIR

Graphs built here with onnx.helper: (1) an If whose condition is computed at run time
(Greater (ReduceSum (x), t)) with branches that read outer-scope values (one read nowhere
else in the main graph, with same-sized values planned in between), two outputs of which
one has a data-dependent length in the else branch (NonZero-free: a Slice by a value read
from the outer scope) — both conditions; (2) an If nested in a branch reading values of
both enclosing scopes — all three paths. `wlower run` and tests/oracle/ort_run.js on the
same inputs, every output equal within 1e-6.
Ends with "interp-if: N passed, M failed"; exit 1 on any failure.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
F = TensorProto.FLOAT


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def model_runtime_cond(path):
    then_g = helper.make_graph(
        [helper.make_node("Add", ["h", "two"], ["a"]),
         helper.make_node("Mul", ["x", "t"], ["b"])],
        "then", [], [helper.make_tensor_value_info("a", F, [4]), helper.make_tensor_value_info("b", F, [4])],
        [const("two", np.array([2.0], np.float32))])
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["x", "one"], ["e"]),
         helper.make_node("Slice", ["x", "zero", "n"], ["f"])],
        "else", [], [helper.make_tensor_value_info("e", F, [4]), helper.make_tensor_value_info("f", F, None)])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=1),
        helper.make_node("Greater", ["s", "t"], ["c1"]),
        helper.make_node("Squeeze", ["c1"], ["c"]),
        helper.make_node("Mul", ["x", "x"], ["h"]),
        helper.make_node("Add", ["x", "x"], ["u"]),
        helper.make_node("Add", ["u", "u"], ["v"]),
        helper.make_node("Add", ["v", "u"], ["w"]),
        helper.make_node("If", ["c"], ["y", "z"], then_branch=then_g, else_branch=else_g),
    ]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", F, [4]), helper.make_tensor_value_info("t", F, [1]),
                           helper.make_tensor_value_info("n", TensorProto.INT64, [1])],
                          [helper.make_tensor_value_info("y", F, [4]), helper.make_tensor_value_info("z", F, None),
                           helper.make_tensor_value_info("w", F, [4])],
                          [const("one", np.array([1.0], np.float32)), const("zero", np.array([0], np.int64))])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)


def model_nested(path):
    inner_t = helper.make_graph([helper.make_node("Mul", ["h", "k"], ["p"])], "it", [],
                                [helper.make_tensor_value_info("p", F, [4])])
    inner_e = helper.make_graph([helper.make_node("Identity", ["h"], ["q"])], "ie", [],
                                [helper.make_tensor_value_info("q", F, [4])])
    then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["k"]),
                                helper.make_node("If", ["c2"], ["a"], then_branch=inner_t, else_branch=inner_e)],
                               "then", [], [helper.make_tensor_value_info("a", F, [4])])
    else_g = helper.make_graph([helper.make_node("Sqrt", ["h"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", F, [4])])
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["h"]),
         helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
        "g", [helper.make_tensor_value_info("x", F, [4]), helper.make_tensor_value_info("c", TensorProto.BOOL, []),
              helper.make_tensor_value_info("c2", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", F, [4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)


def main():
    wl, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    r = subprocess.run(["sh", os.path.join(HERE, "install.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        print("interp-if: the ONNX Runtime oracle could not be installed: %s" % (r.stderr + r.stdout)[-300:])
        return 1
    passed, failed = 0, []
    m1, m2 = os.path.join(work, "if.onnx"), os.path.join(work, "nested.onnx")
    model_runtime_cond(m1)
    model_nested(m2)
    x = np.array([1.5, -2.0, 3.0, 0.25], np.float32)
    cases = [
        ("runtime-cond then", m1, {"x": x, "t": np.array([0.0], np.float32), "n": np.array([3], np.int64)}),
        ("runtime-cond else", m1, {"x": x, "t": np.array([9.0], np.float32), "n": np.array([3], np.int64)}),
        ("runtime-cond else n=1", m1, {"x": x, "t": np.array([9.0], np.float32), "n": np.array([1], np.int64)}),
    ]
    for a in (True, False):
        for b in (True, False) if a else (True,):
            cases.append(("nested %s/%s" % (a, b), m2, {"x": x, "c": np.array(a), "c2": np.array(b)}))
    for i, (label, model, feeds) in enumerate(cases):
        d = os.path.join(work, "c%d" % i)
        os.makedirs(d, exist_ok=True)
        pairs = []
        for n, a in feeds.items():
            f = os.path.join(d, n + ".npy")
            np.save(f, a)
            pairs.append("%s=%s" % (n, f))
        ro = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), model, os.path.join(d, "ort")] + pairs,
                            capture_output=True, text=True)
        rw = subprocess.run([wl, "run", model] + [a for p in pairs for a in ("--input", p)] +
                            ["--output-dir", os.path.join(d, "wl")], capture_output=True, text=True)
        ok, detail = ro.returncode == 0 and rw.returncode == 0, (ro.stderr + rw.stderr).strip()[-300:]
        if ok:
            for f in sorted(os.listdir(os.path.join(d, "ort"))):
                a, b = np.load(os.path.join(d, "ort", f)), np.load(os.path.join(d, "wl", f))
                same = a.shape == b.shape and a.dtype == b.dtype and np.allclose(a, b, rtol=0, atol=1e-6)
                detail += " %s %s%s" % (f, list(a.shape), "" if same else " DIFFERS (%s vs %s)" % (a, b))
                ok &= same
        print("  %s %s:%s" % ("ok  " if ok else "FAIL", label, detail), flush=True)
        if ok:
            passed += 1
        else:
            failed.append(label)
    print("interp-if: %d passed, %d failed" % (passed, len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
