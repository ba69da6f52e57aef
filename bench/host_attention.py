#!/usr/bin/python3
"""host_attention.py [--rounds R] [--reps N] [--threads T] [--precisions fp32,bf16] [--base WLOWER2]
                    [--base-module DIR] [--work DIR]

The host attention kernel (targets/host/kgen_attention.c) on Whisper-tiny's
encoder self-attention — ai.wlower.WhisperAttention, 6 heads, 1500 queries x
1500 keys, head dim 64 (one layer of the encoder) — against the machine's FMA
peak measured in the same run (bench/fma_peak.c on the same threads).

Each round: fma_peak (T threads), then every module once with
WLOWER_PROFILE=1 (`wlower run DIR --threads T --reps N`, the kernel's ms per
run from the profile), modules alternating. FLOP = 2 x (Q·Kᵀ + P·V)
multiply-adds = 4·H·T·S·hd = 3.456 GFLOP. Two figures per module:
  wall  the best round's kernel time, GFLOP/s, % of the best fma_peak_gflops
        of the rounds (on a loaded machine both are diluted by time slicing;
        the % is only meaningful when the machine is quiet);
  cpu   on 1 thread: FLOPs per second of user CPU time over N extra runs
        ((user time of --reps 2N) − (user time of --reps N)) / N, best
        round, against fma_peak_cpu_gflops (the same unit for the peak): what
        the kernel achieves while it runs, which time slicing by other
        processes does not dilute (cache sharing and clock changes still do;
        1 thread because on a loaded machine a pool thread that waits for a
        descheduled peer burns CPU time that is not the kernel's).
--precisions: one module per --host-precision (default fp32; bf16 needs
AVX512-BF16: Q, K, V and the probabilities in bf16, vdpbf16ps), alternating.
--base WLOWER2: a second wlower binary (e.g. a build of an older commit)
compiled and measured alongside, alternating ("before/after" in one run).
--base-module DIR: the same, from a module directory already compiled from
WORK/model.onnxtxt (the bench's model, seed 1) by another build.
Outputs are checked against the reference executor once (PSNR, dB).
Prints a Markdown table with the CPU model and the load at start and end.
"""
import argparse
import math
import os
import resource
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "oracle"))
import test_host_kernels as thk  # noqa: E402  (the model generator of the kernel tests)

H, T, S, HD = 6, 1500, 1500, 64
GFLOP = 4.0 * H * T * S * HD / 1e9


def sh(cmd, env=None):
    """stdout + stderr (the profile goes to stderr); a failure ends the bench with its message"""
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        raise SystemExit("host_attention: %s: %s" % (" ".join(cmd[:3]), r.stderr.strip()[-400:]))
    return r.stdout + r.stderr


def cpu_of(cmd):
    """user CPU seconds of a child (system time: page faults of start-up, noisy)"""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    sh(cmd)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r1.ru_utime - r0.ru_utime


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_model():
    with open("/proc/cpuinfo") as f:
        info = f.read()
    get = lambda k: next((l.split(":", 1)[1].strip() for l in info.splitlines() if l.startswith(k)), "?")
    return "%s (family %s, model %s), %d CPUs" % (get("model name"), get("cpu family"), get("model\t"), os.cpu_count())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--wlower", default=os.path.join(HERE, "..", "build", "wlower"))
    ap.add_argument("--base", default=None, help="a second wlower binary measured alongside")
    ap.add_argument("--base-module", default=None, help="a module dir of the same model compiled by another build")
    ap.add_argument("--work", default="/tmp/wlower-bench-attn")
    ap.add_argument("--precisions", default="fp32", help="comma-separated --host-precision values, one module each")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    start_load = load()
    name, text, feeds = thk.whisper_attn("enc_attn", T=T, S=S, H=H, hd=HD, rng=np.random.default_rng(1))
    model = os.path.join(a.work, "model.onnxtxt")
    with open(model, "w") as f:
        f.write(text)
    inargs = []
    for k, v in feeds.items():
        np.save(os.path.join(a.work, k + ".npy"), v)
        inargs += ["--input", "%s=%s" % (k, os.path.join(a.work, k + ".npy"))]
    peak_exe = os.path.join(a.work, "fma_peak")
    sh(["cc", "-O2", "-pthread", os.path.join(HERE, "fma_peak.c"), "-o", peak_exe])
    ref = os.path.join(a.work, "ref")
    if not os.path.exists(os.path.join(ref, "o.npy")):
        sh([os.path.abspath(a.wlower), "run", model, "--output-dir", ref] + inargs)
    mods = {}
    precs = [p for p in a.precisions.split(",") if p]
    builds = [("wlower" if p == "fp32" else "wlower " + p, a.wlower, None, p) for p in precs] + \
        ([("base", a.base, None, "fp32")] if a.base else []) + \
        ([("base-module", a.wlower, a.base_module, "fp32")] if a.base_module else [])
    for label, wl, prebuilt, prec in builds:
        wl = os.path.abspath(wl)
        d = prebuilt or os.path.join(a.work, "mod_" + label.replace(" ", "_"))
        if not prebuilt:
            sh([wl, model, "--target", "host", "-o", d] + (["--host-precision", prec] if prec != "fp32" else []))
        sh([wl, "run", d, "--threads", str(a.threads), "--output-dir", d + "_out"] + inargs)
        r, g = np.load(os.path.join(ref, "o.npy")).astype(np.float64), np.load(os.path.join(d + "_out", "o.npy")).astype(np.float64)
        mse = float(np.mean((r - g) ** 2))
        mods[label] = {"wl": wl, "dir": d, "psnr": math.inf if mse == 0 else 10 * math.log10(np.max(np.abs(r)) ** 2 / mse),
                       "wall": [], "cpu": []}
    peaks, cpeaks = [], []
    env = dict(os.environ, WLOWER_PROFILE="1")
    for _ in range(a.rounds):
        out = sh([peak_exe, str(a.threads), "0.3"])
        peaks.append(float(out.split("fma_peak_gflops=")[1].split()[0]))
        cpeaks.append(float(out.split("fma_peak_cpu_gflops=")[1].split()[0]))
        for m in mods.values():
            run = [m["wl"], "run", m["dir"], "--threads", str(a.threads), "--output-dir", m["dir"] + "_out"] + inargs
            out = sh(run + ["--reps", str(a.reps)], env=env)
            m["wall"].append(float(out.split("profile: 1 kernels")[1].split(" runs, ")[1].split()[0]))
            run1 = [m["wl"], "run", m["dir"], "--threads", "1", "--output-dir", m["dir"] + "_out"] + inargs
            c1 = cpu_of(run1 + ["--reps", str(a.reps)])
            c2 = cpu_of(run1 + ["--reps", str(2 * a.reps)])
            m["cpu"].append((c2 - c1) / a.reps * 1000)
    peak, cpeak = max(peaks), max(cpeaks)
    print("# host_attention: WhisperAttention %d heads x %d x %d, head dim %d (%.3f GFLOP), %d threads, "
          "%d rounds x %d reps" % (H, T, S, HD, GFLOP, a.threads, a.rounds, a.reps))
    print("# %s; load %s at start, %s at end" % (cpu_model(), start_load, load()))
    print("# fma_peak (%d threads), GFLOP/s per round: wall %s; per CPU second of one thread %s" %
          (a.threads, "/".join("%.0f" % p for p in peaks), "/".join("%.0f" % p for p in cpeaks)))
    print()
    print("| module | kernel ms (wall, best) | GFLOP/s | %% of fma_peak %.0f | 1 thread: CPU ms per run (best) | GFLOP per CPU s | "
          "%% of %.0f per CPU s | PSNR vs reference |" % (peak, cpeak))
    print("|---|---|---|---|---|---|---|---|")
    for label, m in mods.items():
        w, c = min(m["wall"]), min(m["cpu"])
        print("| %s | %.2f | %.1f | %.0f%% | %.2f | %.1f | %.0f%% | %.1f dB |" % (
            label, w, GFLOP / w * 1e3, 100 * GFLOP / w * 1e3 / peak, c, GFLOP / c * 1e3,
            100 * GFLOP / c * 1e3 / cpeak, m["psnr"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
