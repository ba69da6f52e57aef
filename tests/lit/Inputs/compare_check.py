#!/usr/bin/python3
"""compare_check.py A.npy B.npy REPORT.json NAME: recompute the row
NAME of a `wlower compare --json` report with numpy (float64) from the two
tensors and fail unless every metric agrees to 1e-9 relative."""
import json
import sys

import numpy as np

a = np.load(sys.argv[1]).astype(np.float64)
b = np.load(sys.argv[2]).astype(np.float64)
row = [t for t in json.load(open(sys.argv[3]))["tensors"] if t["name"] == sys.argv[4]][0]
e = a - b
mse = np.mean(e * e)
want = {
    "mse": mse,
    "psnr_db": 10 * np.log10(np.max(np.abs(a)) ** 2 / mse),
    "sqnr_db": 10 * np.log10(np.sum(a * a) / np.sum(e * e)),
    "max_abs": np.max(np.abs(e)),
    "cosine": np.sum(a * b) / np.sqrt(np.sum(a * a) * np.sum(b * b)),
}
bad = [k for k, v in want.items() if not abs(row[k] - v) <= 1e-9 * max(1.0, abs(v))]
if bad or mse == 0:
    sys.exit("mismatch: " + ", ".join("%s report %r numpy %r" % (k, row[k], want[k]) for k in bad or want))
print("numpy agrees on %s: %s" % (sys.argv[4], " ".join(want)))
