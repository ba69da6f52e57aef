#!/usr/bin/python3
"""test_host.py — the host target end to end: compiled modules vs ONNX Runtime.

    test_host.py WLOWER WORKDIR [--graphs DIR] [--only SUBSTR] [--threads N] [--psnr DB]

Every small generated graph of tests/oracle/test_fuse_e2e.py (whisper tiny,
1 layer, 200 frames, vocab 1000, opset 14/17 x scale style q/qk:
encoder_model, decoder_prefill, decoder_with_past; Qwen2 small: prefill,
single_token; each float and 4-bit MatMulNBits) is compiled with
`wlower M --target host -o DIR` and run with `wlower run DIR`; ONNX Runtime
runs the original graph on the same inputs; tests/oracle/compare.py gates
every output at PSNR >= 90 dB (--psnr) and equal argmax tokens for logits.

Graphs are generated (and 4-bit variants quantized) into --graphs (default
WORKDIR/graphs) with test_fuse_e2e's helpers, which skip what is already
there: point --graphs at test_fuse_e2e's work directory to share them.

Ends with "host-e2e: N passed, M failed"; exit 1 on any failure.
"""

import argparse
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_oracle as ro  # noqa: E402
import test_fuse_e2e as fe  # noqa: E402  (generate, Tally)

GRAPHS = ("encoder_model", "decoder_prefill", "decoder_with_past", "prefill", "single_token")


def sets(layers=1):
    out = []
    for opset in (14, 17):
        for style in ("q", "qk"):
            out.append(("whisper-tiny-op%d-%s" % (opset, style),
                        [ro.PY, os.path.join(ro.MODELS, "whisper.py"), "--size", "tiny", "--layers", str(layers),
                         "--frames", "200", "--vocab", "1000", "--opset", str(opset), "--scale-style", style]))
    out.append(("qwen2-small", [ro.PY, os.path.join(ro.MODELS, "qwen2.py"), "--layers", str(layers),
                                "--hidden", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "512",
                                "--vocab", "1000"]))
    return out


def one_graph(args, tally, label, model, feeds, work):
    print("%s:" % label, flush=True)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    mdir, wdir, odir = (os.path.join(work, d) for d in ("module", "wlower", "ort"))
    r, t = ro.sh([args.wlower, model, "--target", "host", "-o", mdir])
    if r.returncode != 0:
        tally.check(label, "compile", False, "wlower --target host exited %d: %s" % (r.returncode, ro.brief(r.stderr)))
        return
    tally.check(label, "compile", True, "%.1f s" % t)
    cmd = [args.wlower, "run", mdir, "--output-dir", wdir, "--threads", str(args.threads)]
    for f in feeds:
        cmd += ["--input", f]
    r, t = ro.sh(cmd)
    if r.returncode != 0 or r.stderr.strip():
        tally.check(label, "run", False, "wlower run DIR exited %d: %s" % (r.returncode, ro.brief(r.stderr)))
        return
    r, _ = ro.sh(["node", os.path.join(HERE, "ort_run.js"), model, odir, "--threads", str(args.threads)] + feeds)
    if r.returncode != 0:
        tally.check(label, "psnr", False, "ort_run.js exited %d: %s" % (r.returncode, ro.brief(r.stderr)))
        return
    r, _ = ro.sh([ro.PY, os.path.join(HERE, "compare.py"), odir, wdir, "--psnr", str(args.psnr), "--label", "   "])
    sys.stdout.write(r.stdout)
    tally.check(label, "psnr", r.returncode == 0,
                "host module vs ONNX Runtime on the original (>= %g dB, tokens)" % args.psnr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("wlower")
    ap.add_argument("workdir")
    ap.add_argument("--graphs", default=None, help="where generated graphs live (shared with fuse-e2e)")
    ap.add_argument("--only", default=None, help="only graphs whose label contains this")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--psnr", type=float, default=90.0)
    args = ap.parse_args()
    args.wlower = os.path.abspath(args.wlower)
    work = os.path.abspath(args.workdir)
    graphs = os.path.abspath(args.graphs or os.path.join(work, "graphs"))
    tally = fe.Tally({"compile", "run", "psnr"})
    r, _ = ro.sh(["sh", os.path.join(HERE, "install.sh")])
    if r.returncode != 0:
        print("host-e2e: the ONNX Runtime oracle could not be installed: %s" % ro.brief(r.stderr + r.stdout))
        print("host-e2e: 0 passed, 1 failed")
        return 1
    os.makedirs(work, exist_ok=True)
    os.makedirs(graphs, exist_ok=True)
    gen_failed = 0
    for tag, cmd in sets():
        if args.only and not any(args.only in "%s/%s" % (tag, g) for g in GRAPHS):
            continue
        outdir = os.path.join(graphs, tag)
        if not fe.generate(tag, cmd, outdir):
            gen_failed += 1
            continue
        for model in sorted(f for f in os.listdir(outdir) if f.endswith(".onnx") and ".nbits" not in f):
            g = model[:-5]
            path = os.path.join(outdir, model)
            ref = os.path.join(outdir, "ref", g)
            feeds = ro.make_inputs(path, ref if os.path.isdir(ref) else None, os.path.join(outdir, "inputs", g))
            for q in (False, True):
                label = "%s/%s%s" % (tag, g, "+nbits" if q else "")
                if args.only and args.only not in label:
                    continue
                m = path
                if q:
                    m = os.path.join(outdir, g + ".nbits.onnx")
                    if not os.path.exists(m):
                        r, _ = ro.sh([args.wlower, "quantize", path, "-o", m, "--nbits", "4", "--block-size", "32"])
                        if r.returncode != 0:
                            tally.failed.append("%s: quantize" % label)
                            print("FAIL %s: wlower quantize: %s" % (label, ro.brief(r.stderr)), flush=True)
                            continue
                one_graph(args, tally, label, m, feeds, os.path.join(work, tag, label.split("/")[1]))
    failed = len(tally.failed) + gen_failed
    if tally.failed:
        print("failed checks:")
        for f in tally.failed:
            print("  " + f)
    print("host-e2e: %d passed, %d failed" % (tally.passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
