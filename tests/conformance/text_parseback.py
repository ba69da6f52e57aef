#!/usr/bin/python3
"""text_parseback.py WLOWER [DATA_DIR] — does onnx 1.12 read what we print?

For every ONNX backend node test (DATA_DIR/*/model.onnx, default
/usr/share/libonnx-testdata/data/node), runs

    WLOWER MODEL --passes= --emit onnx-text

(no passes, so the graph printed is the graph read) and parses the text
with onnx.parser.parse_model (python3-onnx 1.12, run with /usr/bin/python3).
The parsed model must match the original, recursively through subgraphs:
  - nodes: op_type, domain ("" and "ai.onnx" are the same), inputs, outputs,
    attribute names, and attribute values where 1.12 reads them (int, float,
    string, their lists, tensors not elided);
  - graph inputs and outputs: names, and types wherever the text gives them
    to 1.12 (tensor types of its 16 element types).
Names are compared in the escaped form 1.12 sees (escape() below mirrors
text_print.c: "/a.0" is __sa__d0, "0" is __n0).
Then, as a second check, our own parser must read the text back to the same
text (a fixed point: print(parse(print(m))) == print(m)), with
--print-weights so that nothing is elided.

Prints "text-parseback: N passed, M failed" and each failure with its
reason; exits 1 if fewer than 98% pass or any fixed point fails.
Known limits of onnx 1.12's parser, which show up as failures here (the
exceptions):
  - an absent first output or input ('"", Y_h = LSTM (...)'): 1.12 cannot
    write an empty name first in a list;
  - type_proto attributes (Optional's 'type'): 1.12 has no syntax for them.
"""
import concurrent.futures
import glob
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.parser
from onnx import numpy_helper

THRESHOLD = 0.98


RESERVED = {"float", "uint8", "int8", "uint16", "int16", "int32", "int64", "string", "bool",
            "float16", "double", "uint32", "uint64", "complex64", "complex128", "bfloat16",
            "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4", "int4",
            "seq", "map", "optional", "sparse_tensor", "inf", "nan"}
ESC = {"/": "__s", ".": "__d", ":": "__c", "-": "__m"}


def escape(name):
    """A name as text_print.c writes it: an identifier onnx 1.12 reads."""
    if name == "":
        return ""           # an absent value stays empty
    b = name.encode("utf-8")
    out = "__n" if (b[:1].isdigit() or name in RESERVED) else ""
    for i, c in enumerate(b):
        ch = chr(c)
        if ch.isascii() and ch.isalnum():
            out += ch
        elif ch == "_":
            nxt = b[i + 1:i + 2]
            out += "_" if (not nxt or (chr(nxt[0]).isascii() and chr(nxt[0]).isalnum())) else "__u"
        elif ch in ESC:
            out += ESC[ch]
        else:
            out += "__x%02x" % c
    return out


def escaped_type(t):
    """A tensor type with its dim params escaped, as 1.12 reads it."""
    c = onnx.TypeProto()
    c.CopyFrom(t)
    for d in c.tensor_type.shape.dim:
        if d.HasField("dim_param"):
            d.dim_param = escape(d.dim_param) if d.dim_param else ""
        d.ClearField("denotation")
    return c


def escs(names):
    return [escape(n) for n in names]


def dom(d):
    d = "" if d in ("", "ai.onnx") else d
    return ".".join(escape(p) or "__n" for p in d.split(".")) if d else ""


def type_112(t):
    """Does 1.12 read this type in a declaration?"""
    return t.HasField("tensor_type") and 1 <= t.tensor_type.elem_type <= 16


def same_array(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return np.array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)) or \
            np.array_equal(a, b, equal_nan=True)
    return np.array_equal(a, b)


def cmp_attr(where, a, b):
    A = onnx.AttributeProto
    if a.type != b.type:
        return "%s: attribute %s: type %d, parsed %d" % (where, a.name, a.type, b.type)
    if a.type == A.INT and a.i != b.i:
        return "%s: attribute %s: %d, parsed %d" % (where, a.name, a.i, b.i)
    if a.type == A.FLOAT and not (a.f == b.f or (math.isnan(a.f) and math.isnan(b.f))):
        return "%s: attribute %s: %r, parsed %r" % (where, a.name, a.f, b.f)
    if a.type == A.STRING and a.s != b.s:
        return "%s: attribute %s: %r, parsed %r" % (where, a.name, a.s, b.s)
    if a.type == A.INTS and list(a.ints) != list(b.ints):
        return "%s: attribute %s: %s, parsed %s" % (where, a.name, list(a.ints), list(b.ints))
    if a.type == A.FLOATS and not np.array_equal(np.array(a.floats, np.float32),
                                                 np.array(b.floats, np.float32), equal_nan=True):
        return "%s: attribute %s: %s, parsed %s" % (where, a.name, list(a.floats), list(b.floats))
    if a.type == A.STRINGS and list(a.strings) != list(b.strings):
        return "%s: attribute %s: %s, parsed %s" % (where, a.name, list(a.strings), list(b.strings))
    if a.type == A.TENSOR:
        ta = numpy_helper.to_array(a.t)
        if ta.size and not (b.t.float_data or b.t.int32_data or b.t.int64_data or
                            b.t.double_data or b.t.uint64_data or b.t.string_data or b.t.raw_data):
            return None     # elided: 1.12 reads the placeholder '{}'
        tb = numpy_helper.to_array(b.t)
        if not same_array(ta, tb):
            return "%s: attribute %s: tensor differs" % (where, a.name)
    if a.type == A.GRAPH:
        return cmp_graph(where + "/" + a.name, a.g, b.g)
    return None


def cmp_graph(where, a, b):
    def vis(lst):
        return [v.name for v in lst]
    if escs(vis(a.input)) != vis(b.input):
        return "%s: inputs %s, parsed %s" % (where, vis(a.input), vis(b.input))
    if escs(vis(a.output)) != vis(b.output):
        return "%s: outputs %s, parsed %s" % (where, vis(a.output), vis(b.output))
    for x, y in zip(list(a.input) + list(a.output), list(b.input) + list(b.output)):
        if type_112(x.type) and escaped_type(x.type) != y.type:
            return "%s: type of %s: %s, parsed %s" % (
                where, x.name, str(x.type).replace("\n", " "), str(y.type).replace("\n", " "))
    if len(a.node) != len(b.node):
        return "%s: %d nodes, parsed %d" % (where, len(a.node), len(b.node))
    for i, (n, m) in enumerate(zip(a.node, b.node)):
        w = "%s: node %d (%s)" % (where, i, n.op_type)
        if escape(n.op_type) != m.op_type or dom(n.domain) != (m.domain if m.domain != "ai.onnx" else ""):
            return "%s: op %s.%s, parsed %s.%s" % (w, n.domain, n.op_type, m.domain, m.op_type)
        if escs(n.input) != list(m.input):
            return "%s: inputs %s, parsed %s" % (w, list(n.input), list(m.input))
        if escs(n.output) != list(m.output):
            return "%s: outputs %s, parsed %s" % (w, list(n.output), list(m.output))
        an = sorted(n.attribute, key=lambda x: escape(x.name))
        am = sorted(m.attribute, key=lambda x: x.name)
        if escs(x.name for x in an) != [x.name for x in am]:
            return "%s: attributes %s, parsed %s" % (w, [x.name for x in an], [x.name for x in am])
        for x, y in zip(an, am):
            r = cmp_attr(w, x, y)
            if r:
                return r
    return None


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)


def first_line(b):
    s = b.decode("utf-8", "replace").strip().splitlines()
    return s[0] if s else ""


def check(wlower, model, tmp):
    """Returns (parseback failure or None, fixed-point failure or None)."""
    r = run([wlower, model, "--passes=", "--emit", "onnx-text"])
    if r.returncode != 0:
        return "wlower failed (%d): %s" % (r.returncode, first_line(r.stderr)), None
    text = r.stdout.decode("utf-8", "replace")
    try:
        parsed = onnx.parser.parse_model(text)
    except Exception as e:  # ParseError, or others on what it half read
        parsed = None
        msg = e.args[0] if e.args else e
        if isinstance(msg, bytes):
            msg = msg.decode("utf-8", "replace")
        fail = "onnx 1.12 cannot parse it: " + " ".join(str(msg).split())[:240]
    if parsed is not None:
        fail = cmp_graph("graph", onnx.load(model).graph, parsed.graph)

    r = run([wlower, model, "--passes=", "--emit", "onnx-text", "--print-weights"])
    if r.returncode != 0:
        return fail, "wlower --print-weights failed: " + first_line(r.stderr)
    path = os.path.join(tmp, "m.onnxtxt")
    with open(path, "wb") as f:
        f.write(r.stdout)
    r2 = run([wlower, path, "--passes=", "--emit", "onnx-text", "--print-weights"])
    if r2.returncode != 0:
        return fail, "our parser rejects our text: " + first_line(r2.stderr)
    if r2.stdout != r.stdout:
        a, b = r.stdout.decode().splitlines(), r2.stdout.decode().splitlines()
        k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        return fail, "print(parse(text)) differs at line %d: %r vs %r" % (
            k + 1, a[k] if k < len(a) else "", b[k] if k < len(b) else "")
    return fail, None


def main():
    args = sys.argv[1:]
    every = 1
    if len(args) >= 2 and args[0] == "--every":
        every = int(args[1])
        args = args[2:]
    if len(args) < 1 or every < 1:
        print("usage: text_parseback.py [--every N] WLOWER [DATA_DIR]", file=sys.stderr)
        return 2
    wlower = args[0]
    data = args[1] if len(args) > 1 else "/usr/share/libonnx-testdata/data/node"
    # --every N: every N-th model only (the sanitizer build: the printer's
    # memory safety does not need all 932, and ASan makes each run slow)
    models = sorted(glob.glob(os.path.join(data, "*", "model.onnx")))[::every]
    if not models:
        print("text-parseback: no models under %s" % data, file=sys.stderr)
        return 1
    failed, fixfailed = [], []
    def one(m, tmp):
        os.mkdir(tmp)
        try:
            return check(wlower, m, tmp)
        except subprocess.TimeoutExpired:
            return "timeout", None

    # two workers (the subprocesses run while the other thread parses), a
    # temporary folder per model; results kept in model order
    with tempfile.TemporaryDirectory() as t0:
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
            futs = [ex.submit(one, m, os.path.join(t0, str(i))) for i, m in enumerate(models)]
            for m, fu in zip(models, futs):
                name = os.path.basename(os.path.dirname(m))
                f, fx = fu.result()
                if f:
                    failed.append((name, f))
                if fx:
                    fixfailed.append((name, fx))
    n, bad = len(models), len(failed)
    print("text-parseback: %d passed, %d failed" % (n - bad, bad))
    for name, why in failed:
        print("  FAIL %s: %s" % (name, why))
    print("text-fixedpoint: %d passed, %d failed" % (n - len(fixfailed), len(fixfailed)))
    for name, why in fixfailed:
        print("  FAIL %s: %s" % (name, why))
    rate = (n - bad) / n
    if rate < THRESHOLD:
        print("text-parseback: %.1f%% passed, below %.0f%%" % (100 * rate, 100 * THRESHOLD))
        return 1
    return 1 if fixfailed else 0


if __name__ == "__main__":
    sys.exit(main())
