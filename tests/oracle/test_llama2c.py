#!/usr/bin/python3
"""test_llama2c.py — the llama2.c checkpoint path against ids recorded from llama2.c's own run.c
(tests/oracle/stories260K_greedy.json):
  1. tests/oracle/llama2c_ref.py (independent float64 forward pass) reproduces the recorded ids;
  2. examples/models/llama2c.py's HF-layout conversion (rotate_half permutation, tied head), run
     greedily in torch with its KV cache, reproduces them too, for both RoPE forms;
  3. the converter refuses a truncated checkpoint and an impossible header with one line, exit 1.
usage: test_llama2c.py WORKDIR"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CKPT = os.path.join(os.path.dirname(ROOT), "shared", "data", "llama2c", "stories260K.bin")
PY = "/usr/bin/python3"


def run(args):
    return subprocess.run([PY] + args, capture_output=True, text=True)


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    want = json.load(open(os.path.join(HERE, "stories260K_greedy.json")))["ids"]
    if not os.path.isfile(CKPT):
        sys.exit(f"test_llama2c: FAILED: {CKPT} missing")
    failed = 0
    r = run([os.path.join(HERE, "llama2c_ref.py"), CKPT, "--steps", str(len(want))])
    got = [int(t) for t in r.stdout.strip().split(",")] if r.returncode == 0 else None
    if got != want:
        print(f"FAIL llama2c_ref: {r.stderr.strip() or got}")
        failed += 1
    else:
        print("ok   llama2c_ref: 64 ids equal run.c's")
    conv = os.path.join(ROOT, "examples", "models", "llama2c.py")
    for rope in ("runtime", "cache"):
        out = os.path.join(work, "stories260K-" + rope)
        r = run([conv, CKPT, "--out", out, "--rope", rope, "--check", str(len(want))])
        lines = [l for l in r.stdout.splitlines() if l and l[0].isdigit()]
        got = [int(t) for t in lines[-1].split(",")] if r.returncode == 0 and lines else None
        files = all(os.path.isfile(os.path.join(out, f)) for f in
                    ("decoder_model.onnx", "decoder_with_past_model.onnx", "config.json"))
        if got != want or not files:
            print(f"FAIL llama2c.py --rope {rope}: ids {got}, files {files}: {r.stderr.strip()[-400:]}")
            failed += 1
        else:
            print(f"ok   llama2c.py --rope {rope}: 64 ids equal run.c's, export written")
    raw = open(CKPT, "rb").read()
    bad = {"truncated": raw[: len(raw) // 2], "header": raw[:4] + (0).to_bytes(4, "little") + raw[8:],
           "short": raw[:10]}
    for name, data in bad.items():
        p = os.path.join(work, f"bad-{name}.bin")
        open(p, "wb").write(data)
        out = os.path.join(work, f"bad-{name}")
        r = run([conv, p, "--out", out])
        err = r.stderr.strip().splitlines()
        if r.returncode != 1 or len(err) != 1 or p not in err[0] or os.path.exists(out):
            print(f"FAIL bad checkpoint {name}: exit {r.returncode}, stderr {err}")
            failed += 1
        else:
            print(f"ok   bad checkpoint {name}: {err[0]}")
    print(f"test_llama2c: {'FAILED' if failed else 'ok'} ({failed} failed)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
