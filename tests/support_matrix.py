#!/usr/bin/python3
"""support_matrix.py WLOWER — print the support matrix (`wlower --list-ops`:
every op of compiler/ir/ops.def and whether the reference executor, the chimera
targets and the host target have a kernel for it) and fail when an op that
fused graphs are made of lacks a row:

  - every ai.wlower op (the fusion passes' output) on all three backends;
  - the ONNX ops the fused Whisper and Qwen2 graphs keep between the fused
    ops (KEPT below) on all three backends;
  - every op at all in the interpreter except the few listed in NO_REF
    (the reference executor is the oracle of every target and of folding).

tests/oracle/test_fuse_e2e.py checks the same matrix against the ops that
actually remain in the bundled generators' fused graphs (check 'support').
Ends with "support-matrix: N passed, M failed".
"""
import subprocess
import sys

KEPT = [("", "Add"), ("", "Mul"), ("", "LayerNormalization"), ("", "Cast"), ("", "Identity"), ("", "Gather"),
        ("", "DequantizeLinear")]   # the int8 past K/V of the vendor's single-token Qwen2 graph
# Ops the op table knows (for shape inference and passes) but the reference
# executor does not run yet: the known gaps (If: the LLM pipeline issue).
NO_REF = {("", "Einsum"), ("", "GatherND"), ("", "If"), ("", "Loop"), ("", "NonZero"), ("", "Scan"),
          ("", "ScatterND"), ("", "TopK")}


def main():
    wlower = sys.argv[1]
    r = subprocess.run([wlower, "--list-ops"], capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    if r.returncode != 0:
        print("support-matrix: wlower --list-ops exited %d: %s" % (r.returncode, r.stderr.strip()))
        print("support-matrix: 0 passed, 1 failed")
        return 1
    rows = {}
    for line in r.stdout.splitlines()[1:]:
        name, i, c, h = line.split()
        dom, _, op = name.rpartition(".")
        rows[(dom, op)] = {"interp": i == "yes", "chimera": c == "yes", "host": h == "yes"}
    passed, failed = 0, []

    def need(key, backends, why):
        nonlocal passed
        have = rows.get(key)
        name = (key[0] + "." if key[0] else "") + key[1]
        if have is None:
            failed.append("%s: not in ops.def (%s)" % (name, why))
            return
        miss = [b for b in backends if not have[b]]
        if miss:
            failed.append("%s: no %s row (%s)" % (name, "/".join(miss), why))
        else:
            passed += 1

    wl = [k for k in rows if k[0] == "ai.wlower"]
    if len(wl) < 9:
        failed.append("only %d ai.wlower ops listed" % len(wl))
    for k in sorted(wl):
        need(k, ("interp", "chimera", "host"), "a fused op")
    for k in KEPT:
        need(k, ("interp", "chimera", "host"), "kept between fused ops")
    for k in sorted(rows):
        if k not in NO_REF:
            need(k, ("interp",), "every op has a reference kernel")
    for f in failed:
        print("FAIL " + f)
    print("support-matrix: %d passed, %d failed" % (passed, len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
