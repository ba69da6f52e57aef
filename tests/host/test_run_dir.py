#!/usr/bin/python3
"""test_run_dir.py — `wlower run DIR` (runtime/rt/wlower_rt.c) on good and malformed
module directories.

    test_run_dir.py WLOWER WORKDIR [--cc CC] [--rt-api RT_API]

A good directory is made by hand: manifest.json written here, module.so
compiled with CC from tests/host/fixture_module.c (the module ABI of
targets/host/hostgen.h), weights.bin. It must run (outputs checked, --reps,
WLOWER_PROFILE=1). Then every malformed variant (missing or corrupt manifest,
wrong format/version/target/abi, missing keys, missing or bogus module.so,
wrong module ABI, truncated weights, wrong input name/dtype/shape, missing
input) must exit 1 with one line "wlower run: error: ..." naming the file or
input — never a crash. With --rt-api, tests/host/rt_api.c (built against
libwlower_rt alone) runs the fixture through the public C API. Last, a real
module: a tiny Add + LayerNormalization model compiled with `wlower M --target
host`, run against `wlower run M` (the reference executor), and its
truncated-weights / wrong-shape / missing-input errors.

Ends with "run-dir: N passed, M failed"; exit 1 on any failure.
"""

import argparse
import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
W = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
B = 0.5

failed = []
passed = 0


def ok(name, cond, detail=""):
    global passed
    if cond:
        passed += 1
        print("  ok   %s" % name, flush=True)
    else:
        failed.append(name)
        print("  FAIL %s %s" % (name, detail), flush=True)


def run(cmd, env=None):
    e = dict(os.environ)
    e.pop("WLOWER_PROFILE", None)
    if env:
        e.update(env)
    return subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=600)


def file_entry(d, name):
    with open(os.path.join(d, name), "rb") as f:
        b = f.read()
    return {"name": name, "bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}


def manifest(d):
    return {
        "format": "wlower-module", "version": 1, "wlower_version": "0.1.0",
        "model": "fixture", "target": "host",
        "hardware": {"cpu": "x86-64", "features": "+sse2,-avx512fp16"},
        "fuse": {"prepend_logmel": False, "append_argmax": False, "fp16_attention": False},
        "passes": [],
        "programs": [{"name": "main",
                      "inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3], "format": "float32"}],
                      "outputs": [{"name": "y", "dtype": "float32", "shape": [2, 3], "format": "float32"},
                                  {"name": "s:sum", "dtype": "float32", "shape": [1], "format": "float32"}],
                      "op_counts": {"Add": 1, "Mul": 1},
                      "workspace_bytes": 64, "abi": 2, "threads": 0}],
        "files": [file_entry(d, "module.so"), file_entry(d, "weights.bin")],
        "compile_ms": 0,
    }


def write_manifest(d, m):
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(m, f, indent=2)


def make_good(cc, d, abi=2):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    r = run([cc, "-O2", "-shared", "-fPIC", "-DABI=%d" % abi, "-o", os.path.join(d, "module.so"),
             os.path.join(HERE, "fixture_module.c")])
    if r.returncode != 0:
        print("cannot compile the fixture: %s" % r.stderr.strip())
        sys.exit(1)
    wb = bytearray(68)
    wb[0:24] = np.array(W, np.float32).tobytes()
    wb[64:68] = np.array([B], np.float32).tobytes()
    with open(os.path.join(d, "weights.bin"), "wb") as f:
        f.write(bytes(wb))
    m = manifest(d)
    write_manifest(d, m)
    return m


def expect_error(name, wlower, d, inputs, want, env=None, extra=()):
    """wlower run D must exit 1 with one line naming `want` (substrings)."""
    cmd = [wlower, "run", d, "--output-dir", d + ".out"] + list(extra)
    for k, v in inputs:
        cmd += ["--input", "%s=%s" % (k, v)]
    r = run(cmd, env)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    good = (r.returncode == 1 and len(lines) == 1 and lines[0].startswith("wlower run: error: ")
            and all(w in lines[0] for w in want))
    ok("%-28s %s" % (name, lines[0] if len(lines) == 1 else ""), good,
       "(exit %d, want %s; stderr: %r)" % (r.returncode, want, r.stderr[-800:]))


def variants(wlower, cc, work, x, x64, x32, xpath):
    """(name, setup(d), inputs, want) for the fixture directory."""
    good_in = [("x", xpath)]

    def mut_manifest(f):
        def setup(d, m):
            m2 = copy.deepcopy(m)
            f(m2)
            write_manifest(d, m2)
        return setup

    def write(name, data):
        def setup(d, m):
            with open(os.path.join(d, name), "w" if isinstance(data, str) else "wb") as fh:
                fh.write(data)
        return setup

    def append(name, text):
        def setup(d, m):
            with open(os.path.join(d, name), "a") as fh:
                fh.write(text)
        return setup

    def remove(name):
        return lambda d, m: os.remove(os.path.join(d, name))

    def truncate_weights(d, m):
        with open(os.path.join(d, "weights.bin"), "r+b") as f:
            f.truncate(40)

    def flip_weights(d, m):
        with open(os.path.join(d, "weights.bin"), "r+b") as f:
            b = f.read(1)
            f.seek(0)
            f.write(bytes([b[0] ^ 0x40]))

    def bogus_so(d, m):
        p = os.path.join(d, "module.so")
        with open(p, "w") as f:
            f.write("this is not an ELF file\n")
        m2 = copy.deepcopy(m)
        m2["files"][0] = file_entry(d, "module.so")
        write_manifest(d, m2)

    def wrong_abi_so(d, m):
        make_good(cc, d, abi=3)

    def sym_dim(m):
        m["programs"][0]["inputs"][0]["shape"] = ["batch", 3]

    def delkey(path):
        def f(m):
            o = m
            for k in path[:-1]:
                o = o[k]
            del o[path[-1]]
        return f

    def setkey(path, v):
        def f(m):
            o = m
            for k in path[:-1]:
                o = o[k]
            o[path[-1]] = v
        return f

    P = ["programs", 0]
    return [
        ("missing manifest", remove("manifest.json"), good_in, ["manifest.json", "cannot open"]),
        ("corrupt JSON", write("manifest.json", '{"format": "wlower-module", "version": 1,'), good_in,
         ["manifest.json", "not valid JSON"]),
        ("empty manifest", write("manifest.json", ""), good_in, ["manifest.json"]),
        ("wrong format", mut_manifest(setkey(["format"], "onnx")), good_in, ["manifest.json", "'format'"]),
        ("wrong version", mut_manifest(setkey(["version"], 7)), good_in, ["manifest.json", "'version'"]),
        ("no programs", mut_manifest(delkey(["programs"])), good_in, ["manifest.json", "programs: missing"]),
        ("chimera target", mut_manifest(setkey(["target"], "qc-p")), good_in, ["manifest.json", "qc-p", "sim"]),
        ("no hardware", mut_manifest(delkey(["hardware"])), good_in, ["manifest.json", "hardware: missing"]),
        ("bad features", mut_manifest(setkey(["hardware", "features"], 3)), good_in,
         ["manifest.json", "hardware.features"]),
        ("missing abi", mut_manifest(delkey(P + ["abi"])), good_in, ["manifest.json", "programs[0].abi"]),
        ("manifest abi 3", mut_manifest(setkey(P + ["abi"], 3)), good_in, ["manifest.json", "programs[0].abi", "ABI"]),
        ("missing workspace_bytes", mut_manifest(delkey(P + ["workspace_bytes"])), good_in,
         ["manifest.json", "programs[0].workspace_bytes"]),
        ("negative workspace_bytes", mut_manifest(setkey(P + ["workspace_bytes"], -64)), good_in,
         ["manifest.json", "programs[0].workspace_bytes"]),
        ("bad threads", mut_manifest(setkey(P + ["threads"], "two")), good_in,
         ["manifest.json", "programs[0].threads"]),
        ("missing inputs", mut_manifest(delkey(P + ["inputs"])), good_in, ["manifest.json", "programs[0].inputs"]),
        ("missing outputs", mut_manifest(delkey(P + ["outputs"])), good_in, ["manifest.json", "programs[0].outputs"]),
        ("input without shape", mut_manifest(delkey(P + ["inputs", 0, "shape"])), good_in,
         ["manifest.json", "programs[0].inputs[0].shape: missing"]),
        ("input bad dtype", mut_manifest(setkey(P + ["inputs", 0, "dtype"], "complex64")), good_in,
         ["manifest.json", "programs[0].inputs[0].dtype", "complex64"]),
        ("symbolic dim", mut_manifest(sym_dim), good_in, ["manifest.json", "programs[0].inputs[0]", "shape[0]"]),
        ("output without name", mut_manifest(delkey(P + ["outputs", 1, "name"])), good_in,
         ["manifest.json", "programs[0].outputs[1].name: missing"]),
        ("missing files", mut_manifest(delkey(["files"])), good_in, ["manifest.json", "files: missing"]),
        ("no weights entry", mut_manifest(lambda m: m["files"].pop(1)), good_in, ["manifest.json", "weights.bin"]),
        ("missing module.so", remove("module.so"), good_in, ["module.so", "cannot open"]),
        ("module.so not an ELF", bogus_so, good_in, ["module.so", "cannot load"]),
        ("module.so wrong size", write("module.so", "x"), good_in, ["module.so", "manifest"]),
        ("module.so ABI 3", wrong_abi_so, good_in, ["module.so", "ABI 3"]),
        ("missing weights.bin", remove("weights.bin"), good_in, ["weights.bin", "cannot open"]),
        ("truncated weights.bin", truncate_weights, good_in, ["weights.bin", "truncated", "40 bytes"]),
        ("weights.bin edited, same size", flip_weights, good_in, ["weights.bin", "sha256", "was modified"]),
        ("bad sha256 entry", mut_manifest(setkey(["files", 1, "sha256"], "xyz")), good_in,
         ["manifest.json", "files[1].sha256"]),
        # every field's type and range (runtime/module/manifest.c manifest_read)
        ("trailing garbage", append("manifest.json", "}x"), good_in, ["manifest.json", "trailing data"]),
        ("manifest not an object", write("manifest.json", "[1, 2]"), good_in, ["manifest.json", "not a JSON object"]),
        ("target a number", mut_manifest(setkey(["target"], 3)), good_in, ["manifest.json", "target: not a string"]),
        ("model missing", mut_manifest(delkey(["model"])), good_in, ["manifest.json", "model: missing"]),
        ("programs an object", mut_manifest(setkey(["programs"], {})), good_in,
         ["manifest.json", "programs: not an array"]),
        ("programs empty", mut_manifest(setkey(["programs"], [])), good_in, ["manifest.json", "programs: empty"]),
        ("program a string", mut_manifest(setkey(["programs", 0], "main")), good_in,
         ["manifest.json", "programs[0]: not an object"]),
        ("inputs an object", mut_manifest(setkey(P + ["inputs"], {})), good_in,
         ["manifest.json", "programs[0].inputs: not an array"]),
        ("negative dim", mut_manifest(setkey(P + ["inputs", 0, "shape"], [-2, 3])), good_in,
         ["manifest.json", "programs[0].inputs[0] ('x').shape[0]"]),
        ("fractional dim", mut_manifest(setkey(P + ["inputs", 0, "shape"], [2.5, 3])), good_in,
         ["manifest.json", "programs[0].inputs[0] ('x').shape[0]"]),
        ("huge dim", mut_manifest(setkey(P + ["outputs", 0, "shape"], [2 ** 41, 3])), good_in,
         ["manifest.json", "programs[0].outputs[0] ('y').shape[0]"]),
        ("shape product overflows", mut_manifest(setkey(P + ["outputs", 0, "shape"], [2 ** 30, 2 ** 30, 2 ** 30])),
         good_in, ["manifest.json", "programs[0].outputs[0] ('y').shape", "2^40"]),
        ("nine dims", mut_manifest(setkey(P + ["outputs", 0, "shape"], [1] * 9)), good_in,
         ["manifest.json", "programs[0].outputs[0] ('y').shape", "at most 8"]),
        ("dtype a number", mut_manifest(setkey(P + ["inputs", 0, "dtype"], 1)), good_in,
         ["manifest.json", "programs[0].inputs[0].dtype: not a string"]),
        ("frac_bits 40", mut_manifest(setkey(P + ["inputs", 0, "frac_bits"], 40)), good_in,
         ["manifest.json", "programs[0].inputs[0] ('x').frac_bits"]),
        ("unknown format", mut_manifest(setkey(P + ["inputs", 0, "format"], "posit")), good_in,
         ["manifest.json", "programs[0].inputs[0] ('x').format", "posit"]),
        ("op count negative", mut_manifest(setkey(P + ["op_counts", "Add"], -1)), good_in,
         ["manifest.json", "programs[0].op_counts.Add"]),
        ("negative file bytes", mut_manifest(setkey(["files", 1, "bytes"], -68)), good_in,
         ["manifest.json", "files[1].bytes"]),
        ("file bytes a string", mut_manifest(setkey(["files", 1, "bytes"], "68")), good_in,
         ["manifest.json", "files[1].bytes: not a number"]),
        ("file name with a path", mut_manifest(setkey(["files", 1, "name"], "../weights.bin")), good_in,
         ["manifest.json", "files[1].name", "plain file name"]),
        ("fuse value a string", mut_manifest(setkey(["fuse", "prepend_logmel"], "no")), good_in,
         ["manifest.json", "fuse.prepend_logmel"]),
        ("not a directory", None, good_in, ["not-a-dir", "not a module directory"]),
        ("wrong input name", None, [("x", xpath), ("ghost", xpath)], ["input 'ghost'", "not an input of", "x"]),
        ("wrong input dtype", None, [("x", x64)], ["input 'x'", "float32[2,3]", "int64[2,3]", os.path.basename(x64)]),
        ("wrong input shape", None, [("x", x32)], ["input 'x'", "float32[2,3]", "float32[3,2]", os.path.basename(x32)]),
        ("missing input", None, [], ["input 'x' (float32[2,3]) not given"]),
    ]


def check_good(wlower, d, xpath, want_y, label):
    out = d + ".out"
    shutil.rmtree(out, ignore_errors=True)
    r = run([wlower, "run", d, "--input", "x=" + xpath, "--output-dir", out, "--threads", "2"])
    ok(label + ": runs", r.returncode == 0, r.stderr.strip()[-500:])
    if r.returncode != 0:
        return
    files = sorted(os.listdir(out))
    ok(label + ": output files", files == [".wlower-outputs", "s_sum.npy", "y.npy"], str(files))
    y = np.load(os.path.join(out, "y.npy"))
    s = np.load(os.path.join(out, "s_sum.npy"))
    ok(label + ": values", y.dtype == np.float32 and np.array_equal(y, want_y) and
       abs(float(s[0]) - float(want_y.sum())) < 1e-4, "y=%s s=%s" % (y.tolist(), s.tolist()))
    r = run([wlower, "run", d + "/", "--input", "x=" + xpath, "--output-dir", out, "--threads", "1",
             "--reps", "3"])
    ok(label + ": --reps", r.returncode == 0 and r.stdout.startswith("median_ms="), r.stdout + r.stderr)
    r = run([wlower, "run", d, "--input", "x=" + xpath, "--output-dir", out, "--reps", "2"],
            env={"WLOWER_PROFILE": "1"})
    ok(label + ": WLOWER_PROFILE=1", r.returncode == 0 and "profile: 2 kernels, 2 runs" in r.stderr
       and "mul0 (Mul)" in r.stderr and "add1 (Add)" in r.stderr, r.stderr)


TINY = """<ir_version: 8, opset_import: ["" : 17]>
tiny (float[4,64] x, float[4,64] z) => (float[4,64] y) <float[64] g = GVALS, float[64] b = BVALS>
{
  s = Add(x, z)
  y = LayerNormalization <axis = -1, epsilon = 0.00001> (s, g, b)
}
"""


def real_module(wlower, work):
    rng = np.random.default_rng(3)
    model = os.path.join(work, "tiny.onnxtxt")
    g = ", ".join("%.3f" % v for v in rng.uniform(0.5, 1.5, 64))
    b = ", ".join("%.3f" % v for v in rng.uniform(-0.5, 0.5, 64))
    with open(model, "w") as f:
        f.write(TINY.replace("GVALS", "{" + g + "}").replace("BVALS", "{" + b + "}"))
    xs = [os.path.join(work, n) for n in ("tx.npy", "tz.npy", "tbad.npy")]
    np.save(xs[0], rng.standard_normal((4, 64)).astype(np.float32))
    np.save(xs[1], rng.standard_normal((4, 64)).astype(np.float32))
    np.save(xs[2], rng.standard_normal((4, 32)).astype(np.float32))
    d = os.path.join(work, "tiny-host")
    shutil.rmtree(d, ignore_errors=True)
    r = run([wlower, model, "--target", "host", "-o", d])
    ok("compile tiny model", r.returncode == 0, r.stderr.strip()[-500:])
    if r.returncode != 0:
        return
    ins = ["--input", "x=" + xs[0], "--input", "z=" + xs[1]]
    r1 = run([wlower, "run", d, "--output-dir", d + ".out", "--threads", "2"] + ins)
    r2 = run([wlower, "run", model, "--output-dir", d + ".ref", "--threads", "1"] + ins)
    ok("run module dir", r1.returncode == 0 and r2.returncode == 0, (r1.stderr + r2.stderr).strip()[-500:])
    if r1.returncode == 0 and r2.returncode == 0:
        y, yr = (np.load(os.path.join(p, "y.npy")) for p in (d + ".out", d + ".ref"))
        ok("module == reference executor", y.shape == (4, 64) and np.abs(y - yr).max() < 1e-5,
           "max err %g" % np.abs(y - yr).max())
    expect_error("real: wrong input shape", wlower, d, [("x", xs[2]), ("z", xs[1])],
                 ["input 'x'", "float32[4,64]", "float32[4,32]", "tbad.npy"])
    expect_error("real: missing input", wlower, d, [("x", xs[0])], ["input 'z' (float32[4,64]) not given"])
    t = d + "-trunc"
    shutil.rmtree(t, ignore_errors=True)
    shutil.copytree(d, t)
    with open(os.path.join(t, "weights.bin"), "r+b") as f:
        f.truncate(os.path.getsize(os.path.join(t, "weights.bin")) // 2)
    expect_error("real: truncated weights", wlower, t, [("x", xs[0]), ("z", xs[1])],
                 ["weights.bin", "truncated"])
    t = d + "-edited"
    shutil.rmtree(t, ignore_errors=True)
    shutil.copytree(d, t)
    with open(os.path.join(t, "weights.bin"), "r+b") as f:
        f.seek(8)
        b = f.read(1)
        f.seek(8)
        f.write(bytes([b[0] ^ 0x01]))
    expect_error("real: weights edited (same size)", wlower, t, [("x", xs[0]), ("z", xs[1])],
                 ["weights.bin", "sha256", "was modified"])
    r = run([wlower, "run", t, "--no-verify", "--output-dir", t + ".out"] + ins)
    ok("real: --no-verify runs the edited module", r.returncode == 0, r.stderr.strip()[-300:])
    manifest_vs_module(wlower, d, ins)
    truncated_so(wlower, d, ins)


def truncated_so(wlower, d, ins):
    """module.so cut in half, the manifest's size (and sha256) edited to
    match: an error naming module.so, never SIGBUS in dlopen."""
    cmd_ins = [tuple(a.split("=", 1)) for a in ins[1::2]]
    for label, sha, flag, want in (
            ("size edited", False, [], ["module.so", "sha256", "was modified"]),
            ("size edited --no-verify", False, ["--no-verify"], ["module.so", "cannot load: truncated"]),
            ("size and sha256 edited", True, [], ["module.so", "cannot load: truncated"])):
        t = d + "-so"
        shutil.rmtree(t, ignore_errors=True)
        shutil.copytree(d, t)
        so = os.path.join(t, "module.so")
        with open(so, "r+b") as f:
            f.truncate(os.path.getsize(so) // 2)
        with open(os.path.join(t, "manifest.json")) as f:
            m = json.load(f)
        for e in m["files"]:
            if e["name"] == "module.so":
                fe = file_entry(t, "module.so")
                e["bytes"] = fe["bytes"]
                if sha:
                    e["sha256"] = fe["sha256"]
        write_manifest(t, m)
        expect_error("real: truncated module.so, " + label, wlower, t, cmd_ins, want, extra=flag)


def manifest_vs_module(wlower, d, ins):
    """An edited manifest.json that disagrees with what module.so reports
    (wl_module_info): one line naming manifest.json and the field, never a
    buffer overrun (the issue: heap corruption and SIGSEGV)."""
    with open(os.path.join(d, "manifest.json")) as f:
        good = json.load(f)
    P = ["programs", 0]

    def setkey(m, path, v):
        o = m
        for k in path[:-1]:
            o = o[k]
        o[path[-1]] = v

    cases = [
        ("smaller output shape", P + ["outputs", 0, "shape"], [4, 32], ["programs[0].outputs[0].shape", "[4,32]",
                                                                         "compiled for [4,64]"]),
        ("smaller input shape", P + ["inputs", 0, "shape"], [4, 32], ["programs[0].inputs[0].shape", "[4,32]"]),
        ("workspace_bytes 16", P + ["workspace_bytes"], 16, ["programs[0].workspace_bytes", "16"]),
        ("output dtype float16", P + ["outputs", 0, "dtype"], "float16", ["programs[0].outputs[0].dtype",
                                                                          "float16", "compiled for float32"]),
        ("renamed input", P + ["inputs", 0, "name"], "q", ["programs[0].inputs[0].name", "'q'"]),
        ("one output fewer", P + ["outputs"], [], ["programs[0].outputs"]),
    ]
    for name, path, v, want in cases:
        t = d + "-mf"
        shutil.rmtree(t, ignore_errors=True)
        shutil.copytree(d, t)
        m = copy.deepcopy(good)
        setkey(m, path, v)
        write_manifest(t, m)
        for flag in ([], ["--no-verify"]):
            cmd_ins = [(k, v2) for k, v2 in (a.split("=", 1) for a in ins[1::2])]
            if name == "renamed input":
                cmd_ins = [("q" if k == "x" else k, v2) for k, v2 in cmd_ins]
            expect_error("real: manifest %s%s" % (name, " " + flag[0] if flag else ""), wlower, t, cmd_ins,
                         ["manifest.json"] + want, extra=flag)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("wlower")
    ap.add_argument("workdir")
    ap.add_argument("--cc", default="cc")
    ap.add_argument("--rt-api", default=None, help="the tests/host/rt_api.c executable")
    args = ap.parse_args()
    wlower = os.path.abspath(args.wlower)
    work = os.path.abspath(args.workdir)
    os.makedirs(work, exist_ok=True)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    xpath, x64, x32 = (os.path.join(work, f) for f in ("x.npy", "x64.npy", "x32.npy"))
    np.save(xpath, x)
    np.save(x64, x.astype(np.int64))
    np.save(x32, x.reshape(3, 2))
    want_y = (x * np.array(W, np.float32).reshape(2, 3) + np.float32(B)).astype(np.float32)

    print("fixture module:")
    good = os.path.join(work, "good")
    m = make_good(args.cc, good)
    check_good(wlower, good, xpath, want_y, "fixture")

    if args.rt_api:
        r = run([args.rt_api, good])
        sys.stdout.write("    " + r.stdout.replace("\n", "\n    ").rstrip() + "\n")
        ok("public C API (rt_api)", r.returncode == 0 and r.stdout.rstrip().endswith("OK")
           and "run 0: y = -1.5 -1.5 0.5 4.5 10.5 18.5; s = 31" in r.stdout
           and "run 1: y = -0.5 -1.5 0.5 4.5 10.5 18.5; s = 32" in r.stdout
           and "run error: " + good + ": input 'x' (float32[2,3]) not bound" in r.stdout
           and "index error: input 'x' of node 'fixture' (Gather): index 99 at [0,0] out of range [-6, 6)"
           in r.stdout,
           r.stderr[-500:])

    print("malformed module directories:")
    with open(os.path.join(work, "not-a-dir"), "w") as f:
        f.write("x")
    for i, (name, setup, inputs, want) in enumerate(variants(wlower, args.cc, work, x, x64, x32, xpath)):
        if name == "not a directory":
            d = os.path.join(work, "not-a-dir")
        elif setup is None:
            d = good
        else:
            d = os.path.join(work, "bad%02d" % i)
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(good, d)
            setup(d, m)
        if name == "not a directory":
            # a plain file is taken as a model: the message names it
            expect_error(name, wlower, d, inputs, ["not-a-dir"])
        else:
            expect_error(name, wlower, d, inputs, want)

    print("real module (--target host):")
    real_module(wlower, work)

    print("run-dir: %d passed, %d failed" % (passed, len(failed)))
    if failed:
        for f in failed:
            print("  failed: " + f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
