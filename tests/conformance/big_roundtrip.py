#!/usr/bin/python3
"""big_roundtrip.py WLOWER WORKDIR [--size-mb N]

A Whisper-decoder-sized float graph (bench/gen_big.py, ~200 MB by default), once
embedded and once saved with external data, goes through
`wlower MODEL --passes= -o OUT.onnx`; the output must pass onnx.checker and keep
every node, attribute, input/output and initializer bit-identical (compared as
raw bytes). The embedded model is also exported with --external-data and back.
Prints 'big-roundtrip: N passed, M failed'.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def weights(model):
    out = {}
    for t in model.graph.initializer:
        a = numpy_helper.to_array(t)
        out[t.name] = (a.dtype.str, a.shape, a.tobytes())
    return out


def graph_sig(model):
    g = model.graph
    nodes = [(n.op_type, n.domain, list(n.input), list(n.output),
              [a.SerializeToString() for a in n.attribute]) for n in g.node]
    ios = ([i.SerializeToString() for i in g.input], [o.SerializeToString() for o in g.output])
    ops = sorted((o.domain, o.version) for o in model.opset_import)
    return nodes, ios, ops


def check(name, src, out, failures):
    try:
        onnx.checker.check_model(out)
        a, b = onnx.load(src), onnx.load(out)
        if graph_sig(a) != graph_sig(b):
            raise AssertionError("graph differs")
        wa, wb = weights(a), weights(b)
        if wa.keys() != wb.keys():
            raise AssertionError("initializer names differ")
        for k in wa:
            if wa[k] != wb[k]:
                raise AssertionError("initializer %s differs" % k)
        print("ok   %s (%d initializers, %.1f MB)" % (name, len(wa), sum(len(v[2]) for v in wa.values()) / 1e6))
    except Exception as e:  # noqa: BLE001 - report every failure
        print("FAIL %s: %s" % (name, e))
        failures.append(name)


def main():
    wl, work = sys.argv[1], sys.argv[2]
    size = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--size-mb" else "200"
    os.makedirs(work, exist_ok=True)
    gen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "gen_big.py")
    emb = os.path.join(work, "big.onnx")
    ext = os.path.join(work, "big_ext.onnx")
    subprocess.run([sys.executable, gen, "--out", emb, "--size-mb", size], check=True)
    subprocess.run([sys.executable, gen, "--out", ext, "--size-mb", size, "--external"], check=True)
    failures = []
    cases = [("embedded", emb, os.path.join(work, "rt_emb.onnx"), []),
             ("external", ext, os.path.join(work, "rt_ext.onnx"), []),
             ("embedded->external", emb, os.path.join(work, "rt_emb_ext.onnx"), ["--external-data"])]
    for name, src, out, extra in cases:
        r = subprocess.run([wl, src, "--passes=", "-o", out] + extra, capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL %s: wlower exit %d: %s" % (name, r.returncode, r.stderr.strip()))
            failures.append(name)
            continue
        if extra and not os.path.exists(out + ".data"):
            print("FAIL %s: no external data file written" % name)
            failures.append(name)
            continue
        check(name, src, out, failures)
    # and the external-data output read back by wlower once more
    back = os.path.join(work, "rt_back.onnx")
    r = subprocess.run([wl, os.path.join(work, "rt_emb_ext.onnx"), "--passes=", "-o", back],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL external->again: %s" % r.stderr.strip())
        failures.append("external->again")
    else:
        check("external->again", emb, back, failures)
    n = len(cases) + 1
    print("big-roundtrip: %d passed, %d failed" % (n - len(failures), len(failures)))
    for f in os.listdir(work):
        os.unlink(os.path.join(work, f))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
