#!/usr/bin/python3
"""compare.py — compare tensors against the ONNX Runtime reference.

    compare.py REF.npy GOT.npy [--psnr MIN] [--max-abs MAX] [--tokens] [--label L]
    compare.py REFDIR GOTDIR   [--psnr MIN] [--max-abs MAX] [--tokens] [--label L]

Prints one line per tensor:

    LABEL: psnr=123.45 dB max_abs=1.2e-06 rms=3.4e-07 peak=12.3 [tokens=equal 4/4]

  PSNR     10*log10(peak^2 / MSE), peak = max |ref| ("inf" when MSE is 0)
  max_abs  max |ref - got|;  rms = sqrt(MSE); computed in float64
  tokens   argmax over the last axis, compared exactly (first index on ties)

With two folders every REFDIR/*.npy is compared with the file of the same name
in GOTDIR (a missing one fails), and the token check is made for every tensor
whose file name contains "logits" (for all of them with --tokens).

Exit status: 0 all gates met, 1 a gate failed (PSNR below MIN, max_abs above
MAX, tokens differ, shape or dtype mismatch, missing file), 2 usage.
"""

import argparse
import math
import os
import sys

import numpy as np


def metrics(ref, got):
    r = ref.astype(np.float64)
    g = got.astype(np.float64)
    diff = r - g
    finite = np.isfinite(r) & np.isfinite(g)
    # equal infinities (masks) are exact; any other non-finite mismatch is an error
    same = (r == g) | (np.isnan(r) & np.isnan(g))
    diff = np.where(same, 0.0, diff)
    bad_nonfinite = int(np.count_nonzero(~finite & ~same))
    mse = float(np.mean(diff * diff)) if diff.size else 0.0
    fr = r[np.isfinite(r)]
    peak = float(np.max(np.abs(fr))) if fr.size else 0.0
    if mse == 0.0:
        psnr = math.inf
    elif peak == 0.0:
        psnr = -math.inf
    else:
        psnr = 10.0 * math.log10(peak * peak / mse)
    max_abs = float(np.max(np.abs(diff))) if diff.size else 0.0
    return psnr, max_abs, math.sqrt(mse), peak, bad_nonfinite


def tokens(ref, got):
    if ref.ndim == 0:
        return None
    a = np.argmax(ref, axis=-1)
    b = np.argmax(got, axis=-1)
    return int(np.count_nonzero(a == b)), int(a.size)


def compare(label, ref_path, got_path, args, want_tokens):
    try:
        ref = np.load(ref_path)
    except Exception as e:
        print("%s: cannot read %s: %s" % (label, ref_path, e))
        return False
    try:
        got = np.load(got_path)
    except Exception as e:
        print("%s: cannot read %s: %s" % (label, got_path, e))
        return False
    if ref.shape != got.shape:
        print("%s: FAIL shape %s, reference %s" % (label, list(got.shape), list(ref.shape)))
        return False
    if ref.dtype != got.dtype:
        print("%s: FAIL dtype %s, reference %s" % (label, got.dtype, ref.dtype))
        return False
    psnr, max_abs, rms, peak, bad = metrics(ref, got)
    ok = True
    line = "%s: psnr=%s dB max_abs=%.3g rms=%.3g peak=%.4g" % (
        label, "inf" if math.isinf(psnr) and psnr > 0 else "%.2f" % psnr, max_abs, rms, peak)
    if bad:
        line += " nonfinite_mismatch=%d" % bad
        ok = False
    if args.psnr is not None and psnr < args.psnr:
        line += " [psnr < %g]" % args.psnr
        ok = False
    if args.max_abs is not None and max_abs > args.max_abs:
        line += " [max_abs > %g]" % args.max_abs
        ok = False
    if want_tokens:
        t = tokens(ref, got)
        if t is not None:
            eq, n = t
            line += " tokens=%s %d/%d" % ("equal" if eq == n else "DIFFER", eq, n)
            ok = ok and eq == n
    print(line + ("" if ok else " FAIL"))
    return ok


def main():
    ap = argparse.ArgumentParser(description="Compare tensors against a reference (PSNR, max error, tokens).")
    ap.add_argument("ref", help="reference .npy (or folder of .npy)")
    ap.add_argument("got", help=".npy to check (or folder)")
    ap.add_argument("--psnr", type=float, help="fail when PSNR (dB) is below this")
    ap.add_argument("--max-abs", type=float, help="fail when the max abs error is above this")
    ap.add_argument("--tokens", action="store_true", help="also require equal argmax over the last axis")
    ap.add_argument("--label", help="name to print (default: the file name)")
    args = ap.parse_args()

    if os.path.isdir(args.ref) != os.path.isdir(args.got):
        ap.error("REF and GOT must both be files or both be folders")
    ok = True
    if os.path.isdir(args.ref):
        names = sorted(f for f in os.listdir(args.ref) if f.endswith(".npy"))
        if not names:
            print("%s: no .npy files" % args.ref)
            return 1
        for f in names:
            label = (args.label + "/" if args.label else "") + f[:-4]
            g = os.path.join(args.got, f)
            if not os.path.exists(g):
                print("%s: FAIL missing %s" % (label, g))
                ok = False
                continue
            ok &= compare(label, os.path.join(args.ref, f), g, args, args.tokens or "logits" in f)
    else:
        label = args.label or os.path.basename(args.got)
        ok = compare(label, args.ref, args.got, args, args.tokens)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
