#!/usr/bin/python3
"""test_sim_e2e.py WLOWER WORKDIR [--only SUBSTR] [--psnr MIN]

`wlower sim` on real compiled modules (small generated graphs):
  whisper   1-layer Whisper-tiny-shaped encoder (200 frames), 4-bit MatMulNBits,
            calibrated on its input, compiled for qc-p x4 (32 MB OCM)
  qwen2     1-layer Qwen2-shaped prefill (hidden 256, 4/2 heads), compiled for
            qc-n and qc-u
For each: `wlower sim --compare` against ONNX Runtime on the same graph and
inputs (the PSNR wlower prints is gated at --psnr, default 20 dB — the vendor's
gate — and reported), 'TotalCycles: N', the profiles, and a second run that
must hit the build cache and give byte-identical outputs, report and profiles.
Prints 'sim-e2e: N passed, M failed'.
"""
import argparse
import filecmp
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PY = "/usr/bin/python3"
MODELS = os.path.join(ROOT, "examples", "models")


class Fail(Exception):
    pass


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).strip().splitlines()
        raise Fail("%s exited %d: %s" % (" ".join(os.path.basename(c) for c in cmd[:2]), r.returncode,
                                         msg[-1] if msg else ""))
    return r


def npy_inputs(refdir, names):
    return ["%s=%s" % (n, os.path.join(refdir, n + ".npy")) for n in names]


def sim_and_check(a, env, mdir, feeds, ortdir, work, label):
    outs = [f[:-4] for f in sorted(os.listdir(ortdir)) if f.endswith(".npy")]
    base = [a.wlower, "sim", mdir, "--verbose"]
    for f in feeds:
        base += ["--input", f]
    for o in outs:
        base += ["--compare", "%s=%s" % (o, os.path.join(ortdir, o + ".npy"))]
    r1 = run(base + ["--output-dir", os.path.join(work, "sim1")], env)
    r2 = run(base + ["--output-dir", os.path.join(work, "sim2")], env)
    sys.stdout.write("".join("    " + l + "\n" for l in r1.stdout.splitlines()
                             if re.search(r"output '|TotalCycles|latency|MAC utilization", l)))
    if not re.search(r"^TotalCycles: [1-9][0-9]*$", r1.stdout, re.M):
        raise Fail("no TotalCycles line")
    if "building module (cached)" not in r2.stderr:
        raise Fail("second run did not use the build cache: %r" % r2.stderr.strip())
    if r1.stdout != r2.stdout:
        raise Fail("reports differ between two runs")
    d1, d2 = os.path.join(work, "sim1"), os.path.join(work, "sim2")
    names = sorted(os.listdir(d1))
    for want in ["profile.svg", "profile_core0.json", "counters.json"]:
        if want not in names:
            raise Fail("%s missing" % want)
    _, mismatch, errors = filecmp.cmpfiles(d1, d2, names, shallow=False)
    if mismatch or errors:
        raise Fail("not byte-identical across runs: %s" % ", ".join(mismatch + errors))
    for o in outs:
        m = re.search(r"output '%s'\s+MSE (\S+)\s+PSNR (\S+) dB" % re.escape(o), r1.stdout)
        if not m:
            raise Fail("no comparison line for %s" % o)
        psnr = float(m.group(2))
        print("  %s %s: MSE %s PSNR %.2f dB" % (label, o, m.group(1), psnr))
        if not psnr >= a.psnr:
            raise Fail("%s: PSNR %.2f dB < %.1f dB" % (o, psnr, a.psnr))


def whisper(a, env, work):
    g = os.path.join(work, "gen")
    if not os.path.exists(os.path.join(g, "encoder_model.onnx")):
        run([PY, os.path.join(MODELS, "whisper.py"), "--size", "tiny", "--layers", "1", "--frames", "200",
             "--vocab", "1000", "--which", "encoder", "--out", g, "--ref", os.path.join(g, "ref")])
    m4 = os.path.join(work, "enc4.onnx")
    run([a.wlower, "quantize", os.path.join(g, "encoder_model.onnx"), "--nbits", "4", "--block-size", "32",
         "-o", m4])
    refdir = os.path.join(g, "ref", "encoder_model")
    feeds = npy_inputs(refdir, ["input_features"])
    tr = os.path.join(work, "enc4.tranges")
    run([a.wlower, "calibrate", m4, "--samples", feeds[0], "-o", tr])
    ortdir = os.path.join(work, "ort")
    run(["node", os.path.join(HERE, "ort_run.js"), m4, ortdir] + feeds)
    mdir = os.path.join(work, "qcp")
    run([a.wlower, m4, "--tranges", tr, "--target", "qc-p", "--cores", "4", "--ocm", "32MB", "-o", mdir])
    sim_and_check(a, env, mdir, feeds, ortdir, work, "qc-p x4")


def qwen2(a, env, work):
    g = os.path.join(work, "gen")
    if not os.path.exists(os.path.join(g, "prefill.onnx")):
        run([PY, os.path.join(MODELS, "qwen2.py"), "--layers", "1", "--hidden", "256", "--heads", "4",
             "--kv-heads", "2", "--ffn", "512", "--vocab", "1000", "--which", "prefill", "--out", g,
             "--ref", os.path.join(g, "ref")])
    m = os.path.join(g, "prefill.onnx")
    refdir = os.path.join(g, "ref", "prefill")
    feeds = npy_inputs(refdir, ["hidden_states"])
    tr = os.path.join(work, "prefill.tranges")
    run([a.wlower, "calibrate", m, "--samples", feeds[0], "-o", tr])
    ortdir = os.path.join(work, "ort")
    run(["node", os.path.join(HERE, "ort_run.js"), m, ortdir] + feeds)
    for target in ("qc-n", "qc-u"):
        mdir = os.path.join(work, target)
        run([a.wlower, m, "--tranges", tr, "--target", target, "-o", mdir])
        sub = os.path.join(work, target + "-run")
        os.makedirs(sub, exist_ok=True)
        sim_and_check(a, env, mdir, feeds, ortdir, sub, target)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("wlower")
    ap.add_argument("workdir")
    ap.add_argument("--only", default="")
    ap.add_argument("--psnr", type=float, default=20.0)
    a = ap.parse_args()
    a.wlower = os.path.abspath(a.wlower)
    os.makedirs(a.workdir, exist_ok=True)
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(os.path.abspath(a.workdir), "cache"))
    passed, failed = 0, 0
    for name, fn in (("whisper", whisper), ("qwen2", qwen2)):
        if a.only and a.only not in name:
            continue
        work = os.path.join(os.path.abspath(a.workdir), name)
        os.makedirs(work, exist_ok=True)
        print("%s:" % name, flush=True)
        try:
            fn(a, env, work)
            passed += 1
            print("  ok", flush=True)
        except Fail as e:
            failed += 1
            print("  FAIL %s: %s" % (name, e), flush=True)
    print("sim-e2e: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
