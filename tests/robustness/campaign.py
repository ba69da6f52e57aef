#!/usr/bin/python3
"""campaign.py — the robustness campaign (issue 14): malformed inputs against wlower.

    campaign.py WLOWER WORKDIR [--sample N] [--seed S] [--jobs J] [--only CLASS,...]
                [--timeout SEC] [--list] [--keep]

Generates malformed cases (deterministic: every random choice comes from
--seed) in ten classes and runs WLOWER on each, in its own folder WORKDIR/cases/ID:

  onnx      truncations at many offsets, bit flips, external-data paths, unknown
            op, shape mismatch, attribute types, opset 0/99, axis 99, dims 2^80,
            If nesting, empty output names, out-of-range Gather ids
  npy       truncations, dtypes, shapes, bad headers, trailing bytes; v2/v3
            headers and '=f4'/'<f4' must be accepted (run, run DIR, sim, calibrate)
  tranges   truncations, bad JSON, missing range, trailing garbage, bad fields
  module    host (run DIR) and qc-n (sim DIR) module directories: edited manifest
            fields, missing files, truncated/corrupted/swapped weights.bin and
            module.so, extra files
  cli       odd sizes/clocks/bandwidths/counts, unknown --cpu, options meant for
            the other target
  fifo      a FIFO (or a device, or a folder) in place of every input file: must
            not hang (a timeout is a failure)
  disk      full disk: a small tmpfs (needs root; not root is a failure)
  clobber   -o / --output-dir onto a folder holding user files: refused, files
            untouched; an empty folder or a wlower module is replaced
  fuzz      seeded random mutations (byte flips, inserts, deletes) of every input kind
  genai     an ONNX Runtime GenAI folder for --pipeline llm: genai_config.json
            truncated, not JSON, missing or mistyped fields, io name patterns
            without one %d, names the graph lacks, a filename outside the
            folder or missing, a truncated model.onnx

Each case expects an exit status (1 bad input, 2 usage error; some accept 0
too, e.g. a bit flip inside weight data; valid variants expect 0) and, on
failure: exactly one line on stderr naming the offending file (and the node,
tensor or option where the case says), nothing new or changed in the case's
folder (no output, no DIR.tmp.*, no *.tmp), user files untouched, and no
sanitizer report. Success must leave the output. A case that does not finish
in --timeout seconds (FIFO cases: 10 s) fails.

KNOWN_FAILING lists the cases that fail today, by the class of fix they wait
for; they are reported as 'known' and do not fail the run; one that passes is
reported as 'fixed' and fails the run until its entry is removed.

--sample N runs a deterministic sample of about N cases covering every class
(the meson test 'robustness', CI under ASan+UBSan); without it every case runs
(bench/robustness.sh). Prints a summary per class and one line per failure.
Exit status 0 when nothing failed.
"""
import argparse
import fnmatch
import hashlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CLASSES = ["onnx", "npy", "tranges", "module", "cli", "fifo", "disk", "clobber", "fuzz", "genai"]

# ---------------------------------------------------------------------------
# KNOWN_FAILING: the cases that fail today (release and ASan builds, seed 14), by
# the fix they wait for: fnmatch patterns on the case id. They are reported as
# 'known' and do not fail the run; a listed case that passes is reported as
# 'fixed' and fails the run: remove its pattern when its fix lands.
KNOWN_FAILING_BY_FIX = {
    # empty: every case passes (or is ACCEPTED below); list a case here only with the fix it waits for
}
# ACCEPTED: cases whose exit 0 is the documented behaviour (docs/FORMATS.md), not a bug:
ACCEPTED = {
    # a folder whose manifest.json lists every entry in it is, by the -o rule, a complete module
    # directory made by wlower (FORMATS.md "Module directory"): it is replaced
    "clobber/module-manifest-lists-user-file/*": "a manifest that lists the file makes it part of the module",
    # model_sha256 records where a module came from; files carry their own sha256
    "module/*/manifest-del-model_sha256": "model_sha256 is optional provenance",
    # 12 KB was enough for the outputs of that run
    "disk/run/free-12288": "the outputs fit",
}
KNOWN_FAILING = {pat: why for why, pats in KNOWN_FAILING_BY_FIX.items() for pat in pats}

# ---------------------------------------------------------------------------


class Case:
    """One malformed (or valid control) input and what wlower must do with it.

    argv: arguments after WLOWER, relative to the case folder.
    setup(dir): creates the case's files in its folder.
    expect: the allowed exit statuses.
    names: substrings the one stderr line must hold ('a|b': either).
    out: the output path (relative) a success must create.
    timeout: seconds (None: the campaign's --timeout).
    """

    def __init__(self, cid, cls, argv, setup, expect=(1,), names=(), out=None, timeout=None, env=None):
        self.cid, self.cls, self.argv, self.setup = cid, cls, argv, setup
        self.expect, self.names, self.out, self.timeout = tuple(expect), tuple(names), out, timeout
        self.env = env or {}


def sha(b):
    return hashlib.sha256(b).hexdigest()


def rd(p):
    with open(p, "rb") as f:
        return f.read()


def wr(p, b):
    os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
    with open(p, "wb") as f:
        f.write(b if isinstance(b, bytes) else b.encode())


def npy_bytes(a, version=None):
    b = io.BytesIO()
    if version is None:
        np.save(b, a)
    else:
        np.lib.format.write_array(b, a, version=version)
    return b.getvalue()


def npy_raw(header, data, version=1):
    """A .npy file with the header dict text given as is."""
    pre = 10 if version == 1 else 12
    h = header + " " * ((64 - (pre + len(header) + 1) % 64) % 64) + "\n"
    n = len(h).to_bytes(2 if version == 1 else 4, "little")
    return b"\x93NUMPY" + bytes([version, 0]) + n + h.encode("latin1") + data


# ---------------------------------------------------------------------------
# fixtures: small models, inputs, ranges and module directories, made once


class Fixtures:
    def __init__(self, wlower, work, env):
        self.w, self.dir, self.env = wlower, os.path.join(work, "fixtures"), env
        self.p = lambda *a: os.path.join(self.dir, *a)

    def wl(self, *args):
        r = subprocess.run([self.w] + list(args), cwd=self.dir, env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=900)
        if r.returncode != 0:
            sys.exit("campaign: fixture step failed: wlower %s\n%s" % (" ".join(args), r.stderr.strip()))
        return r

    def make(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        # the FFN block of tests/lit/chimera_ffn.onnxtxt: LayerNorm, MatMul+Add,
        # Gelu, MatMul+Add, residual; x [1,4,8] -> y [1,4,8]
        text = rd(os.path.join(ROOT, "tests/lit/chimera_ffn.onnxtxt")).decode()
        parts, cur = {}, None
        for line in text.splitlines(True):
            if line.startswith("#--- "):
                cur = line[5:].strip()
                parts[cur] = ""
            elif cur:
                parts[cur] += line
        wr(self.p("ffn.onnxtxt"), parts["ffn.onnxtxt"])
        wr(self.p("model.tranges"), parts["ffn.tranges"])
        self.wl("ffn.onnxtxt", "-o", "model.onnx")
        # the same graph with other weights (same sizes): swapped weights.bin
        m2 = onnx.load(self.p("model.onnx"))
        for t in m2.graph.initializer:
            a = numpy_helper.to_array(t)
            if a.dtype == np.float32:
                t.CopyFrom(numpy_helper.from_array((a * 0.5 + 0.01).astype(np.float32), t.name))
        onnx.save(m2, self.p("model_b.onnx"))
        # external data: every initializer in model_ext.data
        m3 = onnx.load(self.p("model.onnx"))
        onnx.save(m3, self.p("model_ext.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                  location="model_ext.data", size_threshold=0)
        rng = np.random.default_rng(0)
        x = rng.uniform(-1, 0.9, (1, 4, 8)).astype(np.float32)
        wr(self.p("x.npy"), npy_bytes(x))
        # Gather: ids int64 [1,4] -> table [16,8] rows -> + bias -> y
        tbl = rng.standard_normal((16, 8)).astype(np.float32) * 0.5
        g = helper.make_graph(
            [helper.make_node("Gather", ["table", "ids"], ["e"], name="/embed", axis=0),
             helper.make_node("Add", ["e", "bias"], ["y"], name="/add")],
            "gather", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8])],
            [numpy_helper.from_array(tbl, "table"),
             numpy_helper.from_array(np.full((8,), 0.25, np.float32), "bias")])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
                  self.p("gather.onnx"))
        wr(self.p("ids.npy"), npy_bytes(np.array([[0, 3, 15, 7]], np.int64)))
        wr(self.p("gather.tranges"), json.dumps(
            {"format": "wlower-tranges", "version": 1, "model": "gather", "samples": 1,
             "tensors": {"ids": {"min": 0, "max": 15}, "table": {"min": -2, "max": 2},
                         "e": {"min": -2, "max": 2}, "bias": {"min": 0, "max": 0.5},
                         "y": {"min": -2, "max": 2.5}}}))
        # a bigger model (1 MB of weights) for the full-disk cases
        big = helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], ["y"], name="/mm")], "big",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])],
            [numpy_helper.from_array(rng.standard_normal((256, 1024)).astype(np.float32) * 0.05, "w")])
        onnx.save(helper.make_model(big, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
                  self.p("big.onnx"))
        wr(self.p("xbig.npy"), npy_bytes(rng.standard_normal((1, 256)).astype(np.float32)))
        # an ONNX Runtime GenAI folder (examples/models/genai_llama.py, float MatMuls)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "examples/models/genai_llama.py"), self.p("genai"),
                            "--layers", "1", "--hidden", "32", "--heads", "2", "--kv-heads", "1", "--ffn", "64",
                            "--vocab", "64", "--max-pos", "16"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=900)
        if r.returncode != 0:
            sys.exit("campaign: fixture step failed: genai_llama.py\n%s" % r.stderr.strip())
        # module directories
        self.wl("model.onnx", "--target", "host", "-o", "hmod")
        self.wl("model_b.onnx", "--target", "host", "-o", "hmod_b")
        self.wl("gather.onnx", "--target", "host", "-o", "hmod_g")
        self.wl("model.onnx", "--tranges", "model.tranges", "--target", "qc-n", "-o", "qmod")
        self.wl("model_b.onnx", "--tranges", "model.tranges", "--target", "qc-n", "-o", "qmod_b")
        self.wl("gather.onnx", "--tranges", "gather.tranges", "--target", "qc-n", "-o", "qmod_g")
        # build the simulated modules once (cached under XDG_CACHE_HOME)
        self.wl("sim", "qmod", "--input", "x=x.npy", "--output-dir", "sim_ok")
        self.wl("sim", "qmod_g", "--input", "ids=ids.npy", "--output-dir", "sim_ok_g")
        self.wl("run", "hmod", "--input", "x=x.npy", "--output-dir", "run_ok")
        wr(self.p(".ok"), "")


# ---------------------------------------------------------------------------
# case generators, one per class

def cp_fixture(fx, *names):
    """setup step: copies fixture files/folders into the case folder."""
    def f(d):
        for n in names:
            src, dst = fx.p(n), os.path.join(d, os.path.basename(n))
            if os.path.isdir(src):
                shutil.copytree(src, dst)
            else:
                shutil.copyfile(src, dst)
    return f


def seq(*steps):
    def f(d):
        for s in steps:
            s(d)
    return f


def put(name, data):
    return lambda d: wr(os.path.join(d, name), data)


# The commands that read an input kind, as (tag, argv, fixtures, output).
def npy_commands(fx):
    return [
        ("run", lambda f: ["run", fx.p("model.onnx"), "--input", "x=" + f, "--output-dir", "out"], "out"),
        ("runhost", lambda f: ["run", fx.p("hmod"), "--input", "x=" + f, "--output-dir", "out"], "out"),
        ("sim", lambda f: ["sim", fx.p("qmod"), "--input", "x=" + f, "--output-dir", "out"], "out"),
        ("calibrate", lambda f: ["calibrate", fx.p("model.onnx"), "--samples", "x=" + f, "-o", "out.tranges"],
         "out.tranges"),
    ]


def onnx_commands(fx):
    return [
        ("compile", lambda f: [f, "-o", "out.onnx"], "out.onnx"),
        ("run", lambda f: ["run", f, "--input", "x=" + fx.p("x.npy"), "--output-dir", "out"], "out"),
        ("host", lambda f: [f, "--target", "host", "-o", "out"], "out"),
        ("qcn", lambda f: [f, "--tranges", fx.p("model.tranges"), "--target", "qc-n", "-o", "out"], "out"),
    ]


def gen_onnx(fx, rng):
    cases = []
    good = rd(fx.p("model.onnx"))
    n = len(good)
    # truncations: every 7th offset plus the first and last 16 (compile); a
    # few offsets through every command
    offs = sorted(set(list(range(0, 16)) + list(range(16, n - 16, 7)) + list(range(n - 16, n))))
    for o in offs:
        cases.append(Case("onnx/trunc/compile/%d" % o, "onnx", ["m.onnx", "-o", "out.onnx"],
                          put("m.onnx", good[:o]), expect=(0, 1), names=["m.onnx"], out="out.onnx"))
    for tag, argv, out in onnx_commands(fx)[1:]:
        for o in sorted(rng.sample(range(1, n), 12)):
            cases.append(Case("onnx/trunc/%s/%d" % (tag, o), "onnx", argv("m.onnx"), put("m.onnx", good[:o]),
                              expect=(0, 1), names=["m.onnx"], out=out))
    # bit flips (one bit; compile, and some through run)
    for i in range(300):
        pos, bit = rng.randrange(n), rng.randrange(8)
        b = bytearray(good)
        b[pos] ^= 1 << bit
        tag, argv, out = onnx_commands(fx)[0] if i % 5 else onnx_commands(fx)[1]
        cases.append(Case("onnx/flip/%s/%d.%d" % (tag, pos, bit), "onnx", argv("m.onnx"), put("m.onnx", bytes(b)),
                          expect=(0, 1), names=["m.onnx"], out=out))
    # external data
    ext = onnx.load(fx.p("model_ext.onnx"), load_external_data=False)
    data = rd(fx.p("model_ext.data"))

    def ext_case(name, edit, extra=None, names=("m.onnx|data",), expect=(1,)):
        m = onnx.ModelProto()
        m.CopyFrom(ext)
        t = m.graph.initializer[2]
        edit(t)

        def setup(d):
            wr(os.path.join(d, "m.onnx"), m.SerializeToString())
            wr(os.path.join(d, "model_ext.data"), data)
            if extra:
                extra(d)
        for tag, argv, out in onnx_commands(fx)[:2]:
            cases.append(Case("onnx/extdata/%s/%s" % (tag, name), "onnx", argv("m.onnx"), setup, names=names,
                              out=out, expect=expect))

    def setkv(key, val):
        def f(t):
            for e in t.external_data:
                if e.key == key:
                    e.value = val
                    return
            t.external_data.add(key=key, value=val)
        return f
    ext_case("parent", setkv("location", "../../../../etc/passwd"))
    ext_case("absolute", setkv("location", "/etc/passwd"))
    ext_case("missing", setkv("location", "nothere.data"))
    ext_case("dir", setkv("location", "."))
    ext_case("subdir", setkv("location", "sub"), extra=lambda d: os.makedirs(os.path.join(d, "sub")))
    ext_case("symlink-out", setkv("location", "link.data"),   # the user's own link: may be followed
             extra=lambda d: os.symlink("/etc/passwd", os.path.join(d, "link.data")), expect=(0, 1))
    ext_case("empty-location", setkv("location", ""))
    ext_case("offset-past-end", setkv("offset", str(len(data) + 64)))
    ext_case("length-past-end", setkv("length", str(len(data) * 2)))
    ext_case("offset-negative", setkv("offset", "-4"))
    ext_case("length-text", setkv("length", "abc"))
    ext_case("offset-huge", setkv("offset", str(2 ** 70)))
    ext_case("length-short", setkv("length", "4"))
    ext_case("truncated-data", lambda t: None, extra=lambda d: wr(os.path.join(d, "model_ext.data"), data[:100]))

    # graph-level errors, built with onnx.helper
    base = onnx.load(fx.p("model.onnx"))

    def graph_case(name, edit, cmds=("compile", "run"), names=("m.onnx",), known_expect=(1,)):
        m = onnx.ModelProto()
        m.CopyFrom(base)
        edit(m)
        b = m.SerializeToString()
        for tag, argv, out in onnx_commands(fx):
            if tag in cmds:
                cases.append(Case("onnx/%s/%s" % (name, tag), "onnx", argv("m.onnx"), put("m.onnx", b),
                                  expect=known_expect, names=names, out=out))

    def node(m, name):
        return [n for n in m.graph.node if n.name == name][0]

    def unknown_op(m):
        node(m, "/act").op_type = "FrobnicateOp"
        node(m, "/act").domain = ""
    graph_case("unknown-op", unknown_op, cmds=("run", "host", "qcn"), names=("m.onnx", "/act|FrobnicateOp"))

    def shape_mismatch(m):
        for t in m.graph.initializer:
            if t.name == "w2":
                t.CopyFrom(numpy_helper.from_array(np.zeros((15, 8), np.float32), "w2"))
    graph_case("shape-mismatch", shape_mismatch, cmds=("compile", "run", "host", "qcn"),
               names=("m.onnx", "/fc2/MatMul|w2"))

    def attr(nodename, aname, a):
        def f(m):
            n = node(m, nodename)
            for i, x in enumerate(n.attribute):
                if x.name == aname:
                    del n.attribute[i]
                    break
            n.attribute.append(a)
        return f
    graph_case("attr-type-float-axis", attr("/ln", "axis", helper.make_attribute("axis", 1.5)),
               cmds=("compile", "run"), names=("m.onnx", "/ln", "axis"))
    graph_case("attr-type-string-eps", attr("/ln", "epsilon", helper.make_attribute("epsilon", "tiny")),
               cmds=("compile", "run"), names=("m.onnx", "/ln", "epsilon"))
    graph_case("attr-type-ints-axis", attr("/ln", "axis", helper.make_attribute("axis", [1, 2])),
               cmds=("compile", "run"), names=("m.onnx", "/ln", "axis"))
    graph_case("axis-99", attr("/ln", "axis", helper.make_attribute("axis", 99)),
               cmds=("compile", "run"), names=("m.onnx", "/ln", "axis"))

    def opset(v):
        def f(m):
            for o in m.opset_import:
                if o.domain in ("", "ai.onnx"):
                    o.version = v
        return f
    graph_case("opset-0", opset(0), cmds=("compile", "run"), names=("m.onnx", "opset"))
    graph_case("opset-99", opset(99), cmds=("compile", "run"), names=("m.onnx", "opset"))

    def dims_2_80(m):
        vi = m.graph.input[0]
        d = vi.type.tensor_type.shape.dim
        d[0].dim_value = 2 ** 40
        d[1].dim_value = 2 ** 40
    graph_case("dims-2^80", dims_2_80, cmds=("compile", "run"), names=("m.onnx", "x"))

    def empty_output_name(m):
        # a Dropout whose optional mask output is named '' (legal)
        m.graph.node.insert(0, helper.make_node("Dropout", ["x"], ["xd", ""], name="/drop"))
        for n in m.graph.node:
            if n.name == "/ln":
                n.input[0] = "xd"
    graph_case("empty-output-name", empty_output_name, cmds=("compile", "run"), known_expect=(0, 1))

    def if_nest(depth):
        def f(m):
            leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["o0"])], "b0", [],
                                     [helper.make_tensor_value_info("o0", TensorProto.FLOAT, [1, 4, 8])])
            inner = leaf
            for i in range(1, depth):
                inner = helper.make_graph(
                    [helper.make_node("If", ["c"], ["o%d" % i], then_branch=inner, else_branch=leaf)],
                    "b%d" % i, [], [helper.make_tensor_value_info("o%d" % i, TensorProto.FLOAT, [1, 4, 8])])
            m.graph.initializer.append(numpy_helper.from_array(np.array(True), "c"))
            m.graph.node.append(helper.make_node("If", ["c"], ["yy"], name="/deep", then_branch=inner,
                                                 else_branch=leaf))
            m.graph.output.append(helper.make_tensor_value_info("yy", TensorProto.FLOAT, [1, 4, 8]))
        return f
    graph_case("if-depth-120", if_nest(120), cmds=("compile",), names=("m.onnx", "depth|nest"))

    # Gather ids out of range: every target must refuse (one line naming the
    # input and the first bad index), not clamp or zero-fill
    for bad in [16, -17, 2 ** 63 - 1, -2 ** 63]:
        ids = npy_bytes(np.array([[0, 1, bad, 2]], np.int64))
        for tag, argv in [("run", ["run", fx.p("gather.onnx")]), ("runhost", ["run", fx.p("hmod_g")]),
                          ("sim", ["sim", fx.p("qmod_g")])]:
            cases.append(Case("onnx/gather-ids/%s/%d" % (tag, bad), "onnx",
                              argv + ["--input", "ids=ids.npy", "--output-dir", "out"], put("ids.npy", ids),
                              names=["ids", str(bad)], out="out"))
    return cases


def gen_npy(fx, rng):
    cases = []
    x = np.load(fx.p("x.npy"))
    good = npy_bytes(x)
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 8), }"
    raw = x.tobytes()
    variants = []   # (name, bytes, expect, names)
    for o in [0, 1, 5, 6, 7, 8, 9, 10, 11, 40, 70, 126, 127, 128, 129, 200, len(good) - 4, len(good) - 1]:
        variants.append(("trunc-%d" % o, good[:o], (1,), ["x.npy"]))
    for dt in ["<f8", "<i8", "<i4", "|i1", "|b1", "<c8", ">f4", "<u4", "<f2"]:
        a = x.astype(np.dtype(dt)) if dt != "|b1" else (x > 0)
        variants.append(("dtype-%s" % dt.replace("<", "lt").replace(">", "gt").replace("|", "bar"),
                         npy_bytes(a), (1,), ["x.npy"]))
    for shp in [(1, 4, 9), (4, 8), (1, 4, 8, 1), (), (0, 4, 8), (1, 8, 4), (2, 4, 8)]:
        a = np.zeros(shp, np.float32)
        variants.append(("shape-%s" % "x".join(map(str, shp)), npy_bytes(a), (1,), ["x.npy"]))
    bad_headers = {
        "magic": b"\x93NUMPZ" + good[6:],
        "version-9": good[:6] + b"\x09" + good[7:],
        "hlen-huge": good[:8] + b"\xff\xff" + good[10:],
        "hlen-zero": good[:8] + b"\x00\x00" + good[10:],
        "no-descr": npy_raw("{'fortran_order': False, 'shape': (1, 4, 8), }", raw),
        "descr-open": npy_raw("{'descr': '<f4, 'fortran_order': False, 'shape': (1, 4, 8), }", raw),
        "descr-long": npy_raw("{'descr': '" + "<f4" * 20 + "', 'fortran_order': False, 'shape': (1, 4, 8), }", raw),
        "fortran": npy_raw("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 4, 8), }", raw),
        "no-fortran": npy_raw("{'descr': '<f4', 'shape': (1, 4, 8), }", raw),
        "no-shape": npy_raw("{'descr': '<f4', 'fortran_order': False, }", raw),
        "shape-text": npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (a, 4, 8), }", raw),
        "shape-neg": npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4, 8), }", raw),
        "shape-huge": npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 4), }",
                              raw),
        "shape-2^62": npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }",
                              raw),
        "shape-open": npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 8", raw),
        "shape-9d": npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,4,8), }",
                            raw),
        "not-dict": npy_raw("[1, 2, 3]", raw),
        "empty-header": npy_raw("", raw),
        "text-file": b"1.0 2.0 3.0\n",
        "empty": b"",
    }
    for k, b in bad_headers.items():
        variants.append(("header-" + k, b, (1,), ["x.npy"]))
    # lenient, accepted or refused: a NUL between the header's entries
    variants.append(("header-nul", npy_raw("{'descr': '<f4',\0 'fortran_order': False, 'shape': (1, 4, 8), }", raw),
                     (0, 1), ["x.npy"]))
    for extra in [1, 4, 7, 4096]:
        variants.append(("trailing-%d" % extra, good + b"\0" * extra, (1,), ["x.npy"]))
    # valid variants: must run
    variants.append(("valid-v2", npy_bytes(x, (2, 0)), (0,), []))
    variants.append(("valid-v3", npy_bytes(x, (3, 0)), (0,), []))
    variants.append(("valid-eq-f4", npy_raw(hdr.replace("<f4", "=f4"), raw), (0,), []))
    variants.append(("valid-lt-f4", npy_raw(hdr, raw), (0,), []))
    variants.append(("valid-L-suffix", npy_raw(hdr.replace("(1, 4, 8)", "(1L, 4L, 8L)"), raw), (0,), []))
    variants.append(("valid-no-trailing-comma", npy_raw(hdr.replace(", }", "}"), raw), (0,), []))
    for name, b, expect, names in variants:
        for tag, argv, out in npy_commands(fx):
            e = expect
            if tag == "calibrate" and name == "shape-2x4x8":
                e = (0,)   # calibrate reads [S, *input[1:]]: 2 samples
            cases.append(Case("npy/%s/%s" % (tag, name), "npy", argv("x.npy"), put("x.npy", b), expect=e,
                              names=names, out=out))
    # NaN / Inf at the input boundary: run and sim note them (one line each on
    # stderr is allowed only for success: checked as exit 0 with the output)
    nan = x.copy()
    nan[0, 0, 0] = np.nan
    inf = x.copy()
    inf[0, 1, 2] = np.inf
    for name, a in [("nan", nan), ("inf", inf)]:
        for tag, argv, out in npy_commands(fx):
            expect = (0, 1)
            cases.append(Case("npy/%s/value-%s" % (tag, name), "npy", argv("x.npy"), put("x.npy", npy_bytes(a)),
                              expect=expect, names=["x.npy|x"], out=out))
    allnan = np.full((1, 4, 8), np.nan, np.float32)
    cases.append(Case("npy/calibrate/value-all-nan", "npy", npy_commands(fx)[3][1]("x.npy"),
                      put("x.npy", npy_bytes(allnan)), names=["x.npy|x"], out="out.tranges"))
    return cases


def gen_tranges(fx, rng):
    cases = []
    good = rd(fx.p("model.tranges"))
    j = json.loads(good)
    argv = lambda f: [fx.p("model.onnx"), "--tranges", f, "--target", "qc-n", "-o", "out"]
    n = len(good)
    for o in sorted(set([0, 1, 2, n // 3, n // 2, n - 2, n - 1] + rng.sample(range(1, n), 20))):
        if good[:o].strip() == good.strip():
            continue   # only whitespace cut: still the whole file
        cases.append(Case("tranges/trunc/%d" % o, "tranges", argv("t.tranges"), put("t.tranges", good[:o]),
                          names=["t.tranges"], out="out"))

    def jcase(name, obj, names=("t.tranges",), expect=(1,)):
        b = obj if isinstance(obj, (bytes, str)) else json.dumps(obj)
        cases.append(Case("tranges/%s" % name, "tranges", argv("t.tranges"), put("t.tranges", b),
                          names=names, out="out", expect=expect))
    s = good.decode()
    jcase("bad-json-comma", s.replace("}", ",}", 1))
    jcase("bad-json-quote", s.replace('"x"', '"x', 1))
    jcase("bad-json-nan", s.replace('"min": -1', '"min": NaN', 1))
    jcase("bad-json-binary", b"\x00\xff\xfe{}")
    jcase("not-object", "[1,2,3]")
    jcase("trailing-garbage", s.rstrip() + " xyz\n")
    jcase("trailing-object", s.rstrip() + "{}\n")
    for t in ["x", "h", "y"]:
        k = dict(j, tensors={a: b for a, b in j["tensors"].items() if a != t})
        jcase("missing-range-%s" % t, k, names=("t.tranges", "'%s'" % t))
    jcase("format", dict(j, format="onnx"))
    jcase("version-2", dict(j, version=2))
    jcase("version-text", dict(j, version="1"))
    jcase("no-tensors", {a: b for a, b in j.items() if a != "tensors"})
    jcase("tensors-array", dict(j, tensors=[1]))
    jcase("min-gt-max", dict(j, tensors=dict(j["tensors"], h={"min": 2, "max": 1})), names=("t.tranges", "h"))
    jcase("min-text", dict(j, tensors=dict(j["tensors"], h={"min": "a", "max": 1})), names=("t.tranges", "h"))
    jcase("min-missing", dict(j, tensors=dict(j["tensors"], h={"max": 1})), names=("t.tranges", "h"))
    jcase("range-huge", dict(j, tensors=dict(j["tensors"], h={"min": -1e300, "max": 1e300})),
          names=("t.tranges", "h"), expect=(0, 1))
    jcase("samples-neg", dict(j, samples=-1))
    jcase("duplicate", s.replace('"x": {', '"x": {"min": 0, "max": 1}, "x": {', 1))
    jcase("deep-nesting", "[" * 100000 + "]" * 100000)
    return cases


def edit_manifest(edit):
    """setup step: applies edit(dict) -> dict or a bytes/str to DIR/manifest.json."""
    def f(d):
        p = os.path.join(d, "mod", "manifest.json")
        m = json.loads(rd(p))
        r = edit(m)
        wr(p, r if isinstance(r, (bytes, str)) else json.dumps(r, indent=1))
    return f


def refresh_file(m, d, name):
    """The manifest's files entry of name made to match DIR/name."""
    b = rd(os.path.join(d, "mod", name))
    for e in m["files"]:
        if e["name"] == name:
            e["bytes"], e["sha256"] = len(b), sha(b)
    return m


def gen_module(fx, rng):
    cases = []
    kinds = [("host", "hmod", "hmod_b", "hmod_g",
              lambda: ["run", "mod", "--input", "x=" + fx.p("x.npy"), "--output-dir", "out"]),
             ("qcn", "qmod", "qmod_b", "qmod_g",
              lambda: ["sim", "mod", "--input", "x=" + fx.p("x.npy"), "--output-dir", "out"])]
    for kind, mod, mod_b, mod_g, argv in kinds:
        man = json.loads(rd(fx.p(mod, "manifest.json")))
        files = sorted(e["name"] for e in man["files"])

        def c(name, *steps, expect=(1,), names=("mod",)):
            cases.append(Case("module/%s/%s" % (kind, name), "module", argv(),
                              seq(lambda d, mod=mod: shutil.copytree(fx.p(mod), os.path.join(d, "mod")), *steps),
                              expect=expect, names=names, out="out"))

        def setpath(path, v):
            def e(m):
                o = m
                for k in path[:-1]:
                    o = o[k]
                if v is DELETE:
                    del o[path[-1]]
                else:
                    o[path[-1]] = v
                return m
            return e
        c("valid", expect=(0,))
        # every top-level key deleted, or of the wrong type
        for k in man:
            if k in ("compile_ms", "wlower_version", "passes", "fuse", "model"):
                continue   # informational keys
            c("manifest-del-%s" % k, edit_manifest(setpath([k], DELETE)), names=("manifest.json",))
            c("manifest-type-%s" % k, edit_manifest(setpath([k], [] if not isinstance(man[k], list) else 7)),
              names=("manifest.json",))
        c("manifest-format", edit_manifest(setpath(["format"], "onnx")), names=("manifest.json",))
        c("manifest-version-2", edit_manifest(setpath(["version"], 2)), names=("manifest.json",))
        c("manifest-target-swap", edit_manifest(setpath(["target"], "qc-n" if kind == "host" else "host")),
          names=("manifest.json",))
        c("manifest-programs-empty", edit_manifest(setpath(["programs"], [])), names=("manifest.json",))
        c("manifest-empty-object", edit_manifest(lambda m: "{}"), names=("manifest.json",))
        c("manifest-empty-file", edit_manifest(lambda m: ""), names=("manifest.json",))
        c("manifest-trailing", edit_manifest(lambda m: json.dumps(m) + " garbage"), names=("manifest.json",))
        c("manifest-trailing-object", edit_manifest(lambda m: json.dumps(m) + "{}"), names=("manifest.json",))
        c("manifest-truncated", edit_manifest(lambda m: json.dumps(m)[:200]), names=("manifest.json",))
        prog = man["programs"][0]
        for io_ in ("inputs", "outputs"):
            nm = prog[io_][0]["name"]
            P = ["programs", 0, io_, 0]
            c("manifest-%s-shape-smaller" % io_, edit_manifest(setpath(P + ["shape"], [1, 4, 4])),
              names=("manifest.json|mod", nm))
            c("manifest-%s-shape-larger" % io_, edit_manifest(setpath(P + ["shape"], [1, 4, 16])),
              names=("manifest.json|mod", nm))
            c("manifest-%s-shape-rank" % io_, edit_manifest(setpath(P + ["shape"], [4, 8])),
              names=("manifest.json|mod", nm))
            c("manifest-%s-shape-neg" % io_, edit_manifest(setpath(P + ["shape"], [1, -4, 8])),
              names=("manifest.json", nm))
            c("manifest-%s-shape-huge" % io_, edit_manifest(setpath(P + ["shape"], [1, 4, 1e30])),
              names=("manifest.json", nm))
            c("manifest-%s-dtype-f16" % io_, edit_manifest(setpath(P + ["dtype"], "float16")),
              names=("manifest.json|mod", nm))
            c("manifest-%s-dtype-bogus" % io_, edit_manifest(setpath(P + ["dtype"], "complex256")),
              names=("manifest.json", nm))
            c("manifest-%s-name" % io_, edit_manifest(setpath(P + ["name"], "zz")), names=("manifest.json|mod",))
            c("manifest-%s-del-name" % io_, edit_manifest(setpath(P + ["name"], DELETE)), names=("manifest.json",))
            c("manifest-%s-extra" % io_, edit_manifest(lambda m, io_=io_: (
                m["programs"][0][io_].append(dict(m["programs"][0][io_][0], name="extra")), m)[1]),
              names=("manifest.json|mod",))
            c("manifest-%s-none" % io_, edit_manifest(setpath(["programs", 0, io_], [])),
              names=("manifest.json|mod",))
        for k, vals in [("workspace_bytes", [16, -1, 1e30, "x"]), ("abi", [3, -1, "1"]), ("threads", [-1, 1e9]),
                        ("ocm_peak_bytes", [-1, 1e30]), ("kernels", [-1, 0, 1e9])]:
            if k in prog:
                for v in vals:
                    c("manifest-%s-%s" % (k, v), edit_manifest(setpath(["programs", 0, k], v)),
                      names=("manifest.json",))
        for hk in man.get("hardware", {}):
            c("manifest-hardware-%s-text" % hk, edit_manifest(setpath(["hardware", hk], "bogus")),
              names=("manifest.json",), expect=(0, 1) if hk in ("cpu", "name", "features", "cpu_model") else (1,))
            c("manifest-hardware-%s-neg" % hk, edit_manifest(setpath(["hardware", hk], -1)),
              names=("manifest.json",))
        for i, e in enumerate(man["files"]):
            f = e["name"]
            c("manifest-files-%s-bytes" % f, edit_manifest(lambda m, i=i: (m["files"][i].update(
                bytes=m["files"][i]["bytes"] + 1), m)[1]), names=(f,))
            c("manifest-files-%s-sha" % f, edit_manifest(lambda m, i=i: (m["files"][i].update(
                sha256="0" * 64), m)[1]), names=(f,))
            c("manifest-files-%s-del" % f, edit_manifest(lambda m, i=i: (m["files"].pop(i), m)[1]),
              names=("manifest.json|%s" % f,))
            c("manifest-files-%s-rename" % f, edit_manifest(lambda m, i=i: (m["files"][i].update(
                name="../" + m["files"][i]["name"]), m)[1]), names=("manifest.json|%s" % f,))
        # files: missing, truncated, corrupted, swapped, extra
        for f in files:
            c("missing-%s" % f, lambda d, f=f: os.unlink(os.path.join(d, "mod", f)), names=(f,))
            c("truncated-%s" % f, lambda d, f=f: wr(os.path.join(d, "mod", f), rd(os.path.join(d, "mod", f))[:100]),
              names=(f,))
            c("truncated-%s-manifest-edited" % f,
              lambda d, f=f: wr(os.path.join(d, "mod", f), rd(os.path.join(d, "mod", f))[:100]),
              edit_manifest_dir(lambda m, d, f=f: refresh_file(m, d, f)), names=(f,))
            c("empty-%s" % f, lambda d, f=f: wr(os.path.join(d, "mod", f), b""), names=(f,))

            def corrupt(d, f=f):
                b = bytearray(rd(os.path.join(d, "mod", f)))
                b[len(b) // 2] ^= 0x40
                wr(os.path.join(d, "mod", f), bytes(b))
            c("corrupt-%s" % f, corrupt, names=(f,))
        # swapped weights.bin (same size, other weights) and swapped module.so / module.cpp
        c("swapped-weights.bin",
          lambda d, m=mod_b: shutil.copyfile(fx.p(m, "weights.bin"), os.path.join(d, "mod", "weights.bin")),
          names=("weights.bin",))
        c("swapped-weights.bin-manifest-edited",
          lambda d, m=mod_b: shutil.copyfile(fx.p(m, "weights.bin"), os.path.join(d, "mod", "weights.bin")),
          edit_manifest_dir(lambda m, d: refresh_file(m, d, "weights.bin")), expect=(0, 1), names=("weights.bin",))
        code = "module.so" if kind == "host" else "module.cpp"
        c("swapped-%s-gather" % code,
          lambda d, m=mod_g, code=code: shutil.copyfile(fx.p(m, code), os.path.join(d, "mod", code)),
          names=(code,))
        c("swapped-%s-gather-manifest-edited" % code,
          lambda d, m=mod_g, code=code: shutil.copyfile(fx.p(m, code), os.path.join(d, "mod", code)),
          edit_manifest_dir(lambda m, d, code=code: refresh_file(m, d, code)), names=(code + "|mod",))
        c("extra-file", put("mod/notes.txt", "user notes\n"), expect=(0,))
        c("extra-folder", lambda d: os.makedirs(os.path.join(d, "mod", "sub")), expect=(0,))
        c("not-a-folder", lambda d: (shutil.rmtree(os.path.join(d, "mod")), wr(os.path.join(d, "mod"), "x")),
          names=("mod",))
        if kind == "qcn":
            sched = json.loads(rd(fx.p(mod, "schedule.json")))
            c("schedule-trailing", lambda d: wr(os.path.join(d, "mod", "schedule.json"),
                                                rd(os.path.join(d, "mod", "schedule.json")) + b" x"),
              edit_manifest_dir(lambda m, d: refresh_file(m, d, "schedule.json")), names=("schedule.json",))
            for k in sched:
                def sedit(d, k=k):
                    p = os.path.join(d, "mod", "schedule.json")
                    s = json.loads(rd(p))
                    del s[k]
                    wr(p, json.dumps(s))
                # sim reads what it needs from module.cpp: a key it does not use may go
                c("schedule-del-%s" % k, sedit, edit_manifest_dir(lambda m, d: refresh_file(m, d, "schedule.json")),
                  names=("schedule.json",), expect=(0, 1))
    return cases


class _Delete:
    pass


DELETE = _Delete()


def edit_manifest_dir(edit):
    def f(d):
        p = os.path.join(d, "mod", "manifest.json")
        m = json.loads(rd(p))
        wr(p, json.dumps(edit(m, d), indent=1))
    return f


def gen_cli(fx, rng):
    cases = []
    qcn = [fx.p("model.onnx"), "--tranges", fx.p("model.tranges"), "--target", "qc-n", "-o", "out"]
    host = [fx.p("model.onnx"), "--target", "host", "-o", "out"]
    run = ["run", fx.p("model.onnx"), "--input", "x=" + fx.p("x.npy"), "--output-dir", "out"]
    runh = ["run", fx.p("hmod"), "--input", "x=" + fx.p("x.npy"), "--output-dir", "out"]
    sim = ["sim", fx.p("qmod"), "--input", "x=" + fx.p("x.npy"), "--output-dir", "out"]
    cal = ["calibrate", fx.p("model.onnx"), "--samples", "x=" + fx.p("x.npy"), "-o", "out.tranges"]
    quant = ["quantize", fx.p("model.onnx"), "-o", "out.onnx"]
    tr = ["transcribe", fx.p("x.npy"), "--pipeline", "nopipe"]
    odd = {
        "--max-tokens": (tr, ["0", "-1", "abc", "99999999999999999999", "4097"]),
        "--temperature": (tr, ["-0.1", "1.5", "nan", "inf", "abc"]),
        "--beam-size": (tr, ["0", "-2", "65", "1.5", "abc"]),
        "--patience": (tr, ["0", "-1", "65", "nan", "inf", "abc"]),
        "--length-penalty": (tr, ["-1", "11", "nan", "abc"]),
        "--cores": (qcn, ["0", "5", "-1", "1.5", "abc", "", "99999999999999999999", "2x"]),
        "--ocm": (qcn, ["0", "-16MB", "1e400MB", "16XB", "infMB", "nanMB", "MB", "16MBB", "0.5B",
                        "99999999999999999999GB"]),
        "--macs-per-pe": (qcn, ["0", "-16", "abc", "1e400", "99999999999999999999"]),
        "--clock": (qcn, ["0GHz", "-1GHz", "infGHz", "1e400GHz", "nanGHz", "GHz", "1.7XHz", "abc", "1e-30Hz"]),
        "--ext-bw": (qcn, ["0GBps", "-1GBps", "infGBps", "1e400GBps", "nanGBps", "abc", "128GBpsx"]),
        "--threads": (run, ["-1", "abc", "1e9", "99999999999999999999", "1.5"]),
        "--reps": (run, ["-1", "abc", "99999999999999999999"]),
        "--percentile": (cal, ["101", "-1", "nan", "inf", "abc"]),
        "--nbits": (quant, ["0", "3", "9", "-4", "abc"]),
        "--block-size": (quant, ["0", "7", "-32", "abc", "99999999999999999999"]),
        "--cpu": (host, ["pentium-9000", "i386", "cortex-a53", "", "native,+avx512f", "-mcpu=x"]),
    }
    for opt, (argv, vals) in odd.items():
        for v in vals:
            cases.append(Case("cli/%s=%s" % (opt[2:], v or "empty"), "cli", argv + [opt, v], lambda d: None,
                              expect=(2,), names=[opt]))
    # quantize --int8 and compare
    q8 = ["quantize", fx.p("model.onnx"), "--int8", "--synthetic", "2", "-o", "out.onnx"]
    cmp = ["compare", fx.p("model.onnx"), fx.p("model.onnx"), "--input", "x=" + fx.p("x.npy")]
    for opt, argv, vals in (("--synthetic", ["quantize", fx.p("model.onnx"), "--int8", "-o", "out.onnx"],
                             ["0", "-1", "abc", "1e9", "99999999999999999999"]),
                            ("--calibration", q8, ["kl", "", "max"]),
                            ("--exclude-op", q8, ["", ",", "Add,"]),
                            ("--threshold", cmp, ["abc", "nan", "1e9", "inf"])):
        for v in vals:
            cases.append(Case("cli/int8-%s=%s" % (opt[2:], v or "empty"), "cli", argv + [opt, v], lambda d: None,
                              expect=(2,), names=[opt]))
    for name, argv, nm, ex in (("quantize8-exclude-nosuch", q8 + ["--exclude", "nosuch"], "nosuch", 1),
                               ("quantize8-no-data", q8[:3] + q8[5:], "--samples|--synthetic", 2),
                               ("compare-one-model", cmp[:2] + cmp[3:], "compare", 2),
                               ("compare-three-models", cmp + [fx.p("model.onnx")], "model", 2),
                               ("compare-input-unknown", cmp + ["--input", "zz=" + fx.p("x.npy")], "zz", 1)):
        cases.append(Case("cli/%s" % name, "cli", argv, lambda d: None, expect=(ex,), names=[nm]))
    # options meant for the other target / command
    other = [("host--cores", host + ["--cores", "2"], "--cores"), ("host--ocm", host + ["--ocm", "16MB"], "--ocm"),
             ("host--clock", host + ["--clock", "1GHz"], "--clock"),
             ("host--tranges", host + ["--tranges", fx.p("model.tranges")], "--tranges|host"),
             ("qcn--cpu", qcn + ["--cpu", "x86-64-v3"], "--cpu"),
             ("qcn--emit-llvm", qcn + ["--emit", "llvm-ir"], "--emit|llvm"),
             ("run-dir--threads-sim", sim + ["--threads", "2"], "--threads"),
             ("sim--no-verify-model", run + ["--no-verify"], "--no-verify"),
             ("runhost--compare", runh + ["--compare", "y=" + fx.p("x.npy")], "--compare"),
             ("compile--input", [fx.p("model.onnx"), "-o", "out.onnx", "--input", "x=" + fx.p("x.npy")], "--input"),
             ("unknown-option", run + ["--frobnicate"], "--frobnicate"),
             ("missing-value", [fx.p("model.onnx"), "-o"], "-o"),
             ("target-bogus", [fx.p("model.onnx"), "--target", "qc-z", "-o", "out"], "qc-z|--target"),
             ("qcn-no-tranges", [fx.p("model.onnx"), "--target", "qc-n", "-o", "out"], "--tranges"),
             ("qcn-no-o", [fx.p("model.onnx"), "--tranges", fx.p("model.tranges"), "--target", "qc-n"], "-o"),
             ("run-no-input", ["run", fx.p("model.onnx"), "--output-dir", "out"], "x|--input"),
             ("run-input-twice", run + ["--input", "x=" + fx.p("x.npy")], "x"),
             ("run-input-unknown", run + ["--input", "zz=" + fx.p("x.npy")], "zz"),
             ("run-input-noeq", ["run", fx.p("model.onnx"), "--input", fx.p("x.npy"), "--output-dir", "out"],
              "--input"),
             ("sim-compare-unknown", sim + ["--compare", "zz=" + fx.p("x.npy")], "zz"),
             ("subcommand-bogus", ["frobnicate", "x"], "frobnicate|x"),
             ("transcribe-no-audio", ["transcribe", "--pipeline", "nopipe"], "audio"),
             ("transcribe-task", tr + ["--task", "summarize"], "--task"),
             ("transcribe-ext", tr + ["-o", "out.mp4"], "out.mp4"),
             ("transcribe-both", tr + ["--model", "m", "--target", "ref"], "--pipeline|--model"),
             ("transcribe-model-qcn", ["transcribe", "a.wav", "--model", "m", "--target", "qc-n"], "--target")]
    for name, argv, nm in other:
        expect = (1, 2) if name in ("run-input-unknown", "sim-compare-unknown", "run-no-input") else (2,)
        cases.append(Case("cli/%s" % name, "cli", argv, lambda d: None, expect=expect, names=[nm]))
    return cases


def gen_fifo(fx, rng):
    """A FIFO, a character device and a folder in place of every input file."""
    cases = []

    def fifo(rel):
        return lambda d: os.mkfifo(os.path.join(d, rel))

    def dev(rel, target="/dev/zero"):
        return lambda d: os.symlink(target, os.path.join(d, rel))

    def folder(rel):
        return lambda d: os.makedirs(os.path.join(d, rel))
    kinds = [("fifo", fifo), ("devzero", dev), ("folder", folder)]
    for kname, mk in kinds:
        to = 10 if kname != "folder" else None
        # the model file
        for tag, argv, out in onnx_commands(fx):
            cases.append(Case("fifo/%s/model/%s" % (kname, tag), "fifo", argv("m.onnx"), mk("m.onnx"),
                              names=["m.onnx"], out=out, timeout=to))
        # external data
        cases.append(Case("fifo/%s/extdata/compile" % kname, "fifo", ["m.onnx", "-o", "out.onnx"],
                          seq(cp_fixture(fx, "model_ext.onnx"),
                              lambda d: os.rename(os.path.join(d, "model_ext.onnx"), os.path.join(d, "m.onnx")),
                              mk("model_ext.data")), names=["model_ext.data"], out="out.onnx", timeout=to))
        # .npy inputs
        for tag, argv, out in npy_commands(fx):
            cases.append(Case("fifo/%s/npy/%s" % (kname, tag), "fifo", argv("x.npy"), mk("x.npy"),
                              names=["x.npy"], out=out, timeout=to))
        # tranges
        cases.append(Case("fifo/%s/tranges/qcn" % kname, "fifo",
                          [fx.p("model.onnx"), "--tranges", "t.tranges", "--target", "qc-n", "-o", "out"],
                          mk("t.tranges"), names=["t.tranges"], out="out", timeout=to))
        # every file of both module directories
        for mod, argv in [("hmod", ["run", "mod", "--input", "x=" + fx.p("x.npy"), "--output-dir", "out"]),
                          ("qmod", ["sim", "mod", "--input", "x=" + fx.p("x.npy"), "--output-dir", "out"])]:
            for f in sorted(os.listdir(fx.p(mod))):
                cases.append(Case("fifo/%s/%s/%s" % (kname, mod, f), "fifo", argv,
                                  seq(lambda d, mod=mod: shutil.copytree(fx.p(mod), os.path.join(d, "mod")),
                                      lambda d, f=f: os.unlink(os.path.join(d, "mod", f)), mk("mod/" + f)),
                                  names=[f], out="out", timeout=to))
        # sim --compare reference
        cases.append(Case("fifo/%s/sim-compare" % kname, "fifo",
                          ["sim", fx.p("qmod"), "--input", "x=" + fx.p("x.npy"), "--output-dir", "out",
                           "--compare", "y=ref.npy"], mk("ref.npy"), names=["ref.npy"], out="out", timeout=to))
    return cases


def gen_disk(fx, rng):
    """Full disk: each case mounts a small tmpfs at DIR/disk (filled to leave
    FREE bytes) and writes its output there."""
    cases = []
    cmds = [
        ("compile", [fx.p("big.onnx"), "-o", "disk/out.onnx"], "disk/out.onnx"),
        ("compile-text", [fx.p("big.onnx"), "--print-weights", "-o", "disk/out.onnxtxt"], "disk/out.onnxtxt"),
        ("quantize", ["quantize", fx.p("big.onnx"), "-o", "disk/out.onnx"], "disk/out.onnx"),
        ("calibrate", ["calibrate", fx.p("model.onnx"), "--samples", "x=" + fx.p("x.npy"), "-o", "disk/out.tranges"],
         "disk/out.tranges"),
        ("run", ["run", fx.p("big.onnx"), "--input", "x=" + fx.p("xbig.npy"), "--output-dir", "disk/out"],
         "disk/out"),
        ("runhost", ["run", fx.p("hmod"), "--input", "x=" + fx.p("x.npy"), "--output-dir", "disk/out"], "disk/out"),
        ("host", [fx.p("model.onnx"), "--target", "host", "-o", "disk/out"], "disk/out"),
        ("qcn", [fx.p("model.onnx"), "--tranges", fx.p("model.tranges"), "--target", "qc-n", "-o", "disk/out"],
         "disk/out"),
        ("sim", ["sim", fx.p("qmod"), "--input", "x=" + fx.p("x.npy"), "--output-dir", "disk/out"], "disk/out"),
    ]
    for free in [0, 4096, 12288]:
        for tag, argv, out in cmds:
            c = Case("disk/%s/free-%d" % (tag, free), "disk", argv, lambda d: None, names=["disk/out|out|No space"],
                     out=out)
            c.disk_free = free
            if tag in ("calibrate", "runhost") and free > 0:
                c.expect = (0, 1)   # small outputs fit in a page
            if tag in ("host", "qcn", "sim") and free >= 12288:
                c.expect = (0, 1)
            cases.append(c)
    return cases


def gen_clobber(fx, rng):
    """-o / --output-dir onto a folder that holds user files: refused, untouched."""
    cases = []
    cmds = [
        ("host", [fx.p("model.onnx"), "--target", "host", "-o", "dst"]),
        ("qcn", [fx.p("model.onnx"), "--tranges", fx.p("model.tranges"), "--target", "qc-n", "-o", "dst"]),
        ("run", ["run", fx.p("model.onnx"), "--input", "x=" + fx.p("x.npy"), "--output-dir", "dst"]),
        ("runhost", ["run", fx.p("hmod"), "--input", "x=" + fx.p("x.npy"), "--output-dir", "dst"]),
        ("sim", ["sim", fx.p("qmod"), "--input", "x=" + fx.p("x.npy"), "--output-dir", "dst"]),
        ("compile", [fx.p("model.onnx"), "-o", "dst"]),
        ("calibrate", ["calibrate", fx.p("model.onnx"), "--samples", "x=" + fx.p("x.npy"), "-o", "dst"]),
    ]
    layouts = {
        "user-file": put("dst/notes.txt", "my notes\n"),
        "user-subfolder": put("dst/keep/data.txt", "keep me\n"),
        "manifest-{}": seq(put("dst/manifest.json", "{}"), put("dst/notes.txt", "my notes\n")),
        "manifest-only-{}": put("dst/manifest.json", "{}"),
        "host-module+user-file": seq(lambda d: shutil.copytree(fx.p("hmod"), os.path.join(d, "dst")),
                                     put("dst/notes.txt", "my notes\n")),
        "qcn-module+user-folder": seq(lambda d: shutil.copytree(fx.p("qmod"), os.path.join(d, "dst")),
                                      put("dst/keep/x.txt", "keep me\n")),
        "module-manifest-lists-user-file": seq(
            lambda d: shutil.copytree(fx.p("hmod"), os.path.join(d, "dst")), put("dst/notes.txt", "my notes\n"),
            lambda d: wr(os.path.join(d, "dst/manifest.json"), json.dumps(dict(
                json.loads(rd(fx.p("hmod/manifest.json"))),
                files=json.loads(rd(fx.p("hmod/manifest.json")))["files"] + [
                    {"name": "notes.txt", "bytes": 9, "sha256": sha(b"my notes\n")}])))),
        "regular-file": put("dst", "my file\n"),
        "symlink-to-user-folder": seq(put("userdir/notes.txt", "my notes\n"),
                                      lambda d: os.symlink("userdir", os.path.join(d, "dst"))),
    }
    for lname, setup in layouts.items():
        for tag, argv in cmds:
            expect = (1, 2)
            if lname in ("regular-file", "symlink-to-user-folder") and tag in ("compile", "calibrate"):
                expect = (0, 1)   # a file output replaces a file or a symlink (not what it points to)
            cases.append(Case("clobber/%s/%s" % (lname, tag), "clobber", argv, setup, expect=expect,
                              names=["dst"], out="dst"))
    # controls: an empty folder and a complete wlower module are replaced
    for tag, argv in cmds[:2]:
        cases.append(Case("clobber/empty-folder/%s" % tag, "clobber", argv, lambda d: os.makedirs(
            os.path.join(d, "dst")), expect=(0,), out="dst"))
        src = "hmod" if tag == "host" else "qmod"
        cases.append(Case("clobber/wlower-module/%s" % tag, "clobber", argv,
                          lambda d, src=src: shutil.copytree(fx.p(src), os.path.join(d, "dst")), expect=(0,),
                          out="dst"))
    return cases


def gen_genai(fx, rng):
    cases = []
    argv = ["genai", "--pipeline", "llm", "--target", "ref", "--max-seq", "8", "--prefill-rows", "2", "-o", "out"]
    good = rd(fx.p("genai", "genai_config.json"))
    cfg = json.loads(good)

    def case(name, data, names=("genai_config.json",), expect=(1,), model=None):
        steps = [cp_fixture(fx, "genai"), put("genai/genai_config.json", data)]
        if model is not None:
            steps.append(put("genai/model.onnx", model))
        cases.append(Case("genai/%s" % name, "genai", argv, seq(*steps), names=names, out="out", expect=expect))

    def edit(name, f, names=("genai_config.json",), expect=(1,)):
        c = json.loads(good)
        f(c["model"], c["model"]["decoder"])
        case(name, json.dumps(c), names, expect)
    case("valid", good, names=(), expect=(0,))
    n = len(good)
    for o in sorted(set([0, 1, n // 2, n - 2] + rng.sample(range(2, n - 2), 4))):
        case("trunc/%d" % o, good[:o])
    case("bad-json", good.decode().replace("}", ",}", 1))
    case("not-object", "[1]")
    case("no-decoder", json.dumps({"model": {k: v for k, v in cfg["model"].items() if k != "decoder"}}))
    edit("layers-text", lambda m, d: d.update(num_hidden_layers="1"), ("genai_config.json", "num_hidden_layers"))
    edit("layers-0", lambda m, d: d.update(num_hidden_layers=0), ("genai_config.json", "num_hidden_layers"))
    edit("layers-more", lambda m, d: d.update(num_hidden_layers=2), ("model.onnx", "past_key_values.1.key"))
    edit("kv-heads-3", lambda m, d: d.update(num_key_value_heads=3), ("genai_config.json", "num_key_value_heads"))
    edit("no-vocab", lambda m, d: m.pop("vocab_size"), ("genai_config.json", "vocab_size"))
    edit("context-1", lambda m, d: m.update(context_length=1), ("genai_config.json", "context_length"))
    edit("eos-huge", lambda m, d: m.update(eos_token_id=99999), ("genai_config.json", "eos_token_id"))
    edit("eos-list", lambda m, d: m.update(eos_token_id=[2, 3]), (), (0,))
    edit("filename-abs", lambda m, d: d.update(filename="/etc/hostname"), ("genai_config.json", "filename"))
    edit("filename-up", lambda m, d: d.update(filename="../model.onnx"), ("genai_config.json", "filename"))
    edit("filename-missing", lambda m, d: d.update(filename="none.onnx"), ("none.onnx",))
    edit("filename-number", lambda m, d: d.update(filename=3), ("genai_config.json", "filename"))
    edit("pattern-no-d", lambda m, d: d.update(inputs={"past_key_names": "pk"}), ("genai_config.json", "past_key_names"))
    edit("pattern-two-d", lambda m, d: d.update(inputs={"past_key_names": "pk.%d.%d"}),
         ("genai_config.json", "past_key_names"))
    edit("pattern-s", lambda m, d: d.update(inputs={"past_key_names": "pk.%s"}), ("genai_config.json", "past_key_names"))
    edit("pattern-number", lambda m, d: d.update(outputs={"logits": 5}), ("genai_config.json", "logits"))
    edit("name-absent", lambda m, d: d.update(inputs={"past_key_names": "pk.%d"}), ("model.onnx", "pk.0"))
    edit("output-absent", lambda m, d: d.update(outputs={"logits": "scores"}), ("model.onnx", "scores"))
    edit("input-is-output", lambda m, d: d.update(inputs={"input_ids": "logits"}), ("model.onnx", "logits"))
    mb = rd(fx.p("genai", "model.onnx"))
    case("model-trunc", good, ("model.onnx",), model=mb[:len(mb) // 3])
    return cases


def gen_fuzz(fx, rng):
    """Seeded random mutations of every input kind: a clean answer either way."""
    cases = []
    x = rd(fx.p("x.npy"))
    tr = rd(fx.p("model.tranges"))
    mo = rd(fx.p("model.onnx"))
    hm = rd(fx.p("hmod", "manifest.json"))
    qm = rd(fx.p("qmod", "manifest.json"))

    def mutate(b, r):
        b = bytearray(b)
        for _ in range(r.randint(1, 4)):
            op = r.randrange(4)
            p = r.randrange(len(b) + 1)
            if op == 0 and b:
                b[min(p, len(b) - 1)] = r.randrange(256)
            elif op == 1:
                b[p:p] = bytes(r.randrange(256) for _ in range(r.randint(1, 8)))
            elif op == 2:
                del b[p:p + r.randint(1, 16)]
            else:
                b[p:p] = r.choice([b"9999999999", b"-1", b"1e400", b"\"", b"{", b"]", b"nan", b"\0"])
        return bytes(b)
    for i in range(120):
        r = random.Random(rng.random())
        kind = ["npy", "tranges", "onnx", "hman", "qman"][i % 5]
        if kind == "npy":
            tag, argv, out = npy_commands(fx)[i // 5 % 4]
            cases.append(Case("fuzz/npy-%s/%d" % (tag, i), "fuzz", argv("x.npy"), put("x.npy", mutate(x, r)),
                              expect=(0, 1), names=["x.npy"], out=out))
        elif kind == "tranges":
            cases.append(Case("fuzz/tranges/%d" % i, "fuzz",
                              [fx.p("model.onnx"), "--tranges", "t.tranges", "--target", "qc-n", "-o", "out"],
                              put("t.tranges", mutate(tr, r)), expect=(0, 1), names=["t.tranges"], out="out"))
        elif kind == "onnx":
            tag, argv, out = onnx_commands(fx)[i // 5 % 2]
            cases.append(Case("fuzz/onnx-%s/%d" % (tag, i), "fuzz", argv("m.onnx"), put("m.onnx", mutate(mo, r)),
                              expect=(0, 1), names=["m.onnx"], out=out))
        else:
            mod, b, cmd = ("hmod", hm, "run") if kind == "hman" else ("qmod", qm, "sim")
            mb = mutate(b, r)
            cases.append(Case("fuzz/%s-manifest/%d" % (mod, i), "fuzz",
                              [cmd, "mod", "--input", "x=" + fx.p("x.npy"), "--output-dir", "out"],
                              seq(lambda d, mod=mod: shutil.copytree(fx.p(mod), os.path.join(d, "mod")),
                                  put("mod/manifest.json", mb)), expect=(0, 1), names=["manifest.json|mod"],
                              out="out"))
    return cases


GENERATORS = {"onnx": gen_onnx, "npy": gen_npy, "tranges": gen_tranges, "module": gen_module, "cli": gen_cli,
              "fifo": gen_fifo, "disk": gen_disk, "clobber": gen_clobber, "fuzz": gen_fuzz,
              "genai": gen_genai}

# ---------------------------------------------------------------------------
# running and checking one case


def snapshot(d):
    """{relative path: sha256 or 'dir' or 'fifo' or 'link:target'} of everything under d."""
    out = {}
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            p = os.path.join(root, n)
            rel = os.path.relpath(p, d)
            if os.path.islink(p):
                out[rel] = "link:" + os.readlink(p)
            elif os.path.isdir(p):
                out[rel] = "dir"
            elif not os.path.isfile(p):
                out[rel] = "special"
            else:
                out[rel] = sha(rd(p))
    return out


SANITIZER = ("AddressSanitizer", "runtime error:", "LeakSanitizer", "UndefinedBehaviorSanitizer",
             "ThreadSanitizer", "MemorySanitizer")


def mount_disk(d, free):
    mnt = os.path.join(d, "disk")
    os.makedirs(mnt)
    size = 1 << 20
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0755" % size, "tmpfs", mnt],
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        return "cannot mount a tmpfs: %s" % r.stderr.strip()
    # fill it, then free FREE bytes
    with open(os.path.join(mnt, "filler"), "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    try:
        os.unlink(os.path.join(mnt, "filler"))
    except OSError:
        pass
    with open(os.path.join(mnt, "filler"), "wb") as f:
        f.write(b"\0" * max(0, size - free))
    return None


def umount_disk(d):
    mnt = os.path.join(d, "disk")
    if os.path.ismount(mnt):
        subprocess.run(["umount", "-l", mnt])


def run_case(c, wlower, work, default_timeout, env):
    """Returns (status, detail): status 'pass' or 'fail'."""
    d = os.path.join(work, "cases", c.cid.replace("/", "__"))
    if os.path.lexists(d):
        umount_disk(d)
        shutil.rmtree(d)
    os.makedirs(d)
    try:
        c.setup(d)
    except Exception as e:   # a bug of the campaign, not of wlower
        return "fail", "setup: %s: %s" % (type(e).__name__, e)
    disk = getattr(c, "disk_free", None)
    if disk is not None:
        if os.geteuid() != 0:
            return "fail", "not root: cannot mount a small tmpfs for the full-disk class (run as root)"
        err = mount_disk(d, disk)
        if err:
            umount_disk(d)
            return "fail", err
    try:
        return check_case(c, d, wlower, default_timeout, env)
    finally:
        if disk is not None:
            umount_disk(d)


def check_case(c, d, wlower, default_timeout, env):
    before = snapshot(d)
    timeout = c.timeout or default_timeout
    e = dict(env)
    e.update(c.env)
    t0 = time.time()
    p = subprocess.Popen([wlower] + c.argv, cwd=d, env=e, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return "fail", "timeout: still running after %ds (hang?)" % timeout
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)   # helpers it left behind (g++, the simulated module)
        except ProcessLookupError:
            pass
    dt = time.time() - t0
    err = err.decode("utf-8", "replace")
    rc = p.returncode
    problems = []
    for s in SANITIZER:
        if s in err:
            line = [l for l in err.splitlines() if s in l][0]
            return "fail", "sanitizer report: %s" % line.strip()[:200]
    if rc < 0:
        return "fail", "killed by signal %d (%s)" % (-rc, signal.Signals(-rc).name)
    if rc not in c.expect:
        problems.append("exit %d, expected %s" % (rc, "/".join(map(str, c.expect))))
    after = snapshot(d)
    if rc == 0:
        if c.out and not os.path.exists(os.path.join(d, c.out)):
            problems.append("exit 0 but no output %s" % c.out)
        mine = lambda k: c.out and (k == c.out or k.startswith(c.out + "/"))
        touched = sorted(k for k in before if not mine(k) and after.get(k) != before[k])
        if touched:
            problems.append("exit 0 but changed or removed: %s" % ", ".join(touched[:4]))
        # no temporaries next to the output
        left = [k for k in after if k not in before and (".tmp" in os.path.basename(k))]
        if left:
            problems.append("temporaries left: %s" % ", ".join(sorted(left)[:3]))
    else:
        lines = [l for l in err.splitlines() if l.strip()]
        if len(lines) != 1:
            problems.append("%d lines on stderr: %s" % (len(lines), " | ".join(l.strip() for l in lines[:3])[:300]))
        elif rc in (1, 2):
            for n in c.names:
                if not any(a in lines[0] for a in n.split("|")):
                    problems.append("stderr does not name %s: %s" % (n, lines[0].strip()[:200]))
        new = sorted(k for k in after if k not in before)
        gone = sorted(k for k in before if k not in after)
        changed = sorted(k for k in before if k in after and before[k] != after[k])
        if new:
            problems.append("left behind: %s" % ", ".join(new[:4]))
        if gone:
            problems.append("removed: %s" % ", ".join(gone[:4]))
        if changed:
            problems.append("changed: %s" % ", ".join(changed[:4]))
    if problems:
        return "fail", "; ".join(problems)
    return "pass", "%.1fs" % dt


def accepted(cid):
    for pat, why in ACCEPTED.items():
        if fnmatch.fnmatchcase(cid, pat):
            return why
    return None


def known_class(cid):
    for pat, why in KNOWN_FAILING.items():
        if fnmatch.fnmatchcase(cid, pat):
            return why
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("wlower")
    ap.add_argument("work")
    ap.add_argument("--sample", type=int, default=0, help="run about N cases, every class (0: all)")
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--only", default="", help="classes, comma-separated")
    ap.add_argument("--match", default="", help="only case ids matching this fnmatch pattern")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--list", action="store_true", help="list the case ids and exit")
    ap.add_argument("--keep", action="store_true", help="keep the case folders")
    ap.add_argument("--reuse-fixtures", action="store_true")
    a = ap.parse_args()
    wlower = os.path.abspath(a.wlower)
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = os.path.join(work, "cache")   # the simulator's build cache
    env.pop("WLOWER_PROFILE", None)
    env["LC_ALL"] = "C"
    classes = [c for c in (a.only.split(",") if a.only else CLASSES) if c]
    for c in classes:
        if c not in CLASSES:
            sys.exit("campaign: unknown class '%s' (%s)" % (c, ", ".join(CLASSES)))
    fx = Fixtures(wlower, work, env)
    if not (a.reuse_fixtures and os.path.exists(fx.p(".ok"))) and not a.list:
        t0 = time.time()
        fx.make()
        print("fixtures: %.1f s" % (time.time() - t0), flush=True)
    rng = random.Random(a.seed)
    all_cases = []
    for cls in CLASSES:
        cs = GENERATORS[cls](fx, random.Random("%d/%s" % (a.seed, cls)))
        if cls in classes:
            all_cases.extend(cs)
    ids = [c.cid for c in all_cases]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1][:5]
    if a.match:
        all_cases = [c for c in all_cases if fnmatch.fnmatchcase(c.cid, a.match)]
    if a.sample:
        per = max(1, a.sample // len(classes))
        chosen = []
        for cls in classes:
            cs = [c for c in all_cases if c.cls == cls]
            chosen.extend(rng.sample(cs, min(per, len(cs))) if len(cs) > per else cs)
        all_cases = chosen
    if a.list:
        for c in all_cases:
            print(c.cid)
        return 0
    shutil.rmtree(os.path.join(work, "cases"), ignore_errors=True)
    fixtures_before = snapshot(fx.dir)
    t0 = time.time()
    results = {}

    def one(c):
        st, detail = run_case(c, wlower, work, a.timeout, env)
        if not a.keep:
            d = os.path.join(work, "cases", c.cid.replace("/", "__"))
            umount_disk(d)
            shutil.rmtree(d, ignore_errors=True)
        return c, st, detail
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        for c, st, detail in ex.map(one, all_cases):
            known = known_class(c.cid)
            if st == "fail" and detail.startswith("exit 0,") and accepted(c.cid):
                st, detail = "pass", "accepted: " + accepted(c.cid)
            if st == "fail" and known:
                st = "known"
            elif st == "pass" and known:
                st, detail = "fixed", "passes but KNOWN_FAILING lists it (%s): remove the entry" % known
            results[c.cid] = (c, st, detail)
            if st in ("fail", "fixed"):
                print("FAIL %s: %s" % (c.cid, detail), flush=True)
            elif st == "known":
                print("known %s [%s]: %s" % (c.cid, known, detail), flush=True)
    # cases read the fixtures in place: nothing may appear next to them either
    fixtures_after = snapshot(fx.dir)
    stray = sorted(set(fixtures_after) ^ set(fixtures_before)) + sorted(
        k for k in fixtures_before if k in fixtures_after and fixtures_before[k] != fixtures_after[k])
    if stray:
        print("FAIL fixtures: left behind or changed next to the inputs: %s" % ", ".join(stray[:6]))
    print()
    print("%-10s %6s %6s %6s %6s" % ("class", "cases", "passed", "failed", "known"))
    tot = [0, 0, 0, 0]
    for cls in classes:
        rs = [r for r in results.values() if r[0].cls == cls]
        n = [len(rs), sum(r[1] == "pass" for r in rs), sum(r[1] in ("fail", "fixed") for r in rs),
             sum(r[1] == "known" for r in rs)]
        tot = [x + y for x, y in zip(tot, n)]
        print("%-10s %6d %6d %6d %6d" % ((cls,) + tuple(n)))
    print("%-10s %6d %6d %6d %6d" % (("total",) + tuple(tot)))
    print("robustness: %d cases, %d passed, %d failed, %d known-failing (%s), %.0f s" % (
        tot[0], tot[1], tot[2], tot[3], "sample %d, seed %d" % (a.sample, a.seed) if a.sample else "full",
        time.time() - t0))
    return 1 if tot[2] or stray else 0


if __name__ == "__main__":
    sys.exit(main())
