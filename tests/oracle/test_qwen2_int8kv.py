#!/usr/bin/python3
"""test_qwen2_int8kv.py — the vendor's single-token Qwen2 graph form (int8 past K/V
`past_key_values.N.key_quantized`, dequantized in the graph by DequantizeLinear) against ONNX Runtime.

    test_qwen2_int8kv.py WLOWER WORKDIR [--targets ref,host,qc-n]

(--targets ref: the lighter variant meson runs under sanitizers, without the host LLVM O3
compile and the qc-n calibration, compile and simulator build.)

examples/models/qwen2.py --int8-kv 0.05 (2 layers, hidden 256, 4/2 heads, vocab 1000, past 15, mask
[1,16]) with its seeded --ref inputs: `wlower --stop-after=fuse` gives one ai.wlower.GroupQueryAttention
per layer (the dequantized past feeds it); `wlower run` of the fused graph (ref) equals ONNX Runtime on
the original: logits and presents PSNR >= 100 dB, the same token; so does the graph compiled with
--target host (DequantizeLinear: targets/host/kgen_quant.c) and run with `wlower run DIR`; and for
qc-n (DequantizeLinear: nn::dequantize, targets/chimera/ops/quant.c; ranges from `wlower calibrate`
on these inputs) run with `wlower sim`: PSNR >= 60 dB, the same token.
Ends with "qwen2-int8kv: N passed, M failed"; exit 1 on any failure.
"""
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("wlower")
    ap.add_argument("work")
    ap.add_argument("--targets", default="ref,host,qc-n")
    a = ap.parse_args()
    wl, work, targets = a.wlower, a.work, a.targets.split(",")
    print("qwen2-int8kv: targets %s" % ",".join(targets))
    os.makedirs(work, exist_ok=True)
    run = lambda cmd: subprocess.run(cmd, capture_output=True, text=True)
    res = []

    def check(name, ok, detail=""):
        print("  %s %s%s" % ("ok  " if ok else "FAIL", name, (": " + detail) if detail else ""), flush=True)
        res.append(ok)
        return ok

    r = run(["sh", os.path.join(HERE, "install.sh")])
    if not check("install ONNX Runtime", r.returncode == 0, (r.stderr + r.stdout).strip()[-200:]):
        return 1
    r = run(["/usr/bin/python3", os.path.join(ROOT, "examples", "models", "qwen2.py"), "--layers", "2", "--hidden", "256",
             "--heads", "4", "--kv-heads", "2", "--ffn", "512", "--vocab", "1000", "--which", "single_token",
             "--int8-kv", "0.05", "--out", work, "--ref", os.path.join(work, "ref")])
    if not check("generate", r.returncode == 0, r.stderr.strip()[-300:]):
        return 1
    model = os.path.join(work, "single_token.onnx")
    rd = os.path.join(work, "ref", "single_token")
    names = ["inputs_embeds", "attention_mask"] + ["past_key_values.%d.%s_quantized" % (i, kv) for i in range(2)
                                                   for kv in ("key", "value")]
    pairs = ["%s=%s" % (n, os.path.join(rd, n + ".npy")) for n in names]
    check("int8 past inputs", all(np.load(os.path.join(rd, n + ".npy")).dtype == np.int8 for n in names[2:]))
    r = run(["node", os.path.join(HERE, "ort_run.js"), model, os.path.join(work, "ort")] + pairs)
    if not check("ort", r.returncode == 0, r.stderr.strip()[-300:]):
        return 1
    r = run([wl, model, "--stop-after=fuse", "--emit", "onnx-text"])
    gqa = r.stdout.count("ai.wlower.GroupQueryAttention <")
    check("fused: one GroupQueryAttention per layer", r.returncode == 0 and gqa == 2 and "= Softmax" not in r.stdout,
          "%d GroupQueryAttention %s" % (gqa, r.stderr.strip()[-200:]))
    fused = os.path.join(work, "fused.onnx")
    r = run([wl, model, "--stop-after=fuse", "-o", fused])
    r = r if r.returncode else run([wl, "run", fused] + [a for p in pairs for a in ("--input", p)] +
                                   ["--output-dir", os.path.join(work, "wl")])
    if check("ref run", r.returncode == 0, r.stderr.strip()[-300:]):
        r = run(["/usr/bin/python3", os.path.join(HERE, "compare.py"), os.path.join(work, "ort"), os.path.join(work, "wl"),
                 "--psnr", "100"])
        check("ref vs ort (PSNR >= 100 dB, tokens)", r.returncode == 0, " ".join(r.stdout.split("\n")[:1]))
    hdir = os.path.join(work, "host")
    r = run([wl, model, "--target", "host", "-o", hdir]) if "host" in targets else None
    r = r if r is None or r.returncode else run([wl, "run", hdir] + [a for p in pairs for a in ("--input", p)] +
                                   ["--output-dir", os.path.join(work, "wl-host")])
    if r is not None and check("host compile + run", r.returncode == 0, r.stderr.strip()[-300:]):
        r = run(["/usr/bin/python3", os.path.join(HERE, "compare.py"), os.path.join(work, "ort"),
                 os.path.join(work, "wl-host"), "--psnr", "100"])
        check("host vs ort (PSNR >= 100 dB, tokens)", r.returncode == 0, " ".join(r.stdout.split("\n")[:1]))
    tr = os.path.join(work, "x.tranges")
    r = None if "qc-n" not in targets else run([wl, "calibrate", model] + [a for p in pairs for a in ("--samples", p)] + ["-o", tr])
    qdir = os.path.join(work, "qcn")
    r = r if r is None or r.returncode else run([wl, model, "--tranges", tr, "--target", "qc-n", "-o", qdir])
    r = r if r is None or r.returncode else run([wl, "sim", qdir] + [a for p in pairs for a in ("--input", p)] +
                                   ["--output-dir", os.path.join(work, "wl-qcn")])
    if r is not None and check("qc-n calibrate + compile + sim", r.returncode == 0, r.stderr.strip()[-300:]):
        r = run(["/usr/bin/python3", os.path.join(HERE, "compare.py"), os.path.join(work, "ort"),
                 os.path.join(work, "wl-qcn"), "--psnr", "60"])
        check("qc-n vs ort (PSNR >= 60 dB, tokens)", r.returncode == 0, " ".join(r.stdout.split("\n")[:1]))
    print("qwen2-int8kv: %d passed, %d failed" % (sum(res), len(res) - sum(res)))
    return 0 if all(res) else 1


if __name__ == "__main__":
    sys.exit(main())
