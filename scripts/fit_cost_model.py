#!/usr/bin/python3
"""fit_cost_model.py — fits the Chimera cost model v2 (docs/cost-model.md) on the vendor's points.

Reads the schedule.json of our compilation of each vendor point, computes the model's per-kernel
raw figures (the same formulas as targets/chimera/sim/cost.c, cost_kernel_raw), sums them per
kernel class, and solves for the constants with numpy least squares on the relative residuals
(every category of every point weighs the same):

  compute       = c_alu * alu/PEs + c_launch * kernels            (launch: per kernel, per core)
  mac           = k_mac * mac_raw[matmul-like] + k_mac_attn * mac_raw[attention]
  data_array    = k_array * array_raw
  data_ocm      = k_ocm * ocm_raw
  data_external = 1 * ext_raw (DDR at its nominal bandwidth) + a_row * act_raw[row-wise kernels]
  TotalCycles   = sum of the categories (no DMA overlap)

Seven constants for ten category figures. Prints the constants, the fit's residuals per point and
category, and the C block of cost_default_params; --check COST_C compares the #define FIT_* block between
the "BEGIN fitted" and "END fitted" markers of targets/chimera/sim/cost.c with the fit (exit 1 if a
constant differs by more than 1e-4 relative, or a residual is outside the
targets: 25% per category, 10% on the total). --json FILE writes constants and residuals.

Usage: /usr/bin/python3 scripts/fit_cost_model.py [--check targets/chimera/sim/cost.c] [--json F]
         [ENC_DIR DEC_DIR]   (defaults: tests/data/cost/encoder_qcp, tests/data/cost/decoder_qcp)
"""
import argparse
import json
import os
import re
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CATS = ["compute", "mac", "data_array", "data_ocm", "data_external"]
# The vendor's profiles (issue 13; the encoder: docs/DESIGN.md "Chimera machine model").
VENDOR = {
    "encoder": {"total": 43925705, "compute": 19.679e6, "mac": 6.154e6, "data_array": 3.478e6,
                "data_ocm": 11.834e6, "data_external": 2.302e6},
    "decoder": {"total": 4297756, "compute": 1.907e6, "mac": 380016, "data_array": 487555,
                "data_ocm": 1.145e6, "data_external": 372422},
}
NAMES = ["c_alu", "c_launch", "k_mac", "k_mac_attn", "k_array", "k_ocm", "a_row"]
ATTN = ("nn::whisperAttention", "nn::gqa")
MATMUL = ("linalg::matMulNBits", "whisper::convStem", "whisper::logMel")


def kernel_class(cpp):
    """cost.c cost_kernel_class: matmul-like, attention, or row-wise (everything else)."""
    return "attn" if cpp in ATTN else "mm" if cpp in MATMUL else "row"


def features(dir_):
    """Per point: {category: {feature: value}}, raw figures of each kernel's slowest core."""
    s = json.load(open(os.path.join(dir_, "schedule.json")))
    c = s["config"]
    pes = c["pe_rows"] * c["pe_cols"]
    bpc = c["ext_bw"] / c["clock_hz"]
    links = c["pe_rows"] * (c["pe_cols"] - 1) + c["pe_cols"] * (c["pe_rows"] - 1)
    f = {"alu": 0.0, "kernels": 0, "mac_mm": 0.0, "mac_attn": 0.0, "arr": 0.0, "ocm": 0.0, "ext": 0.0,
         "act_row": 0.0}
    for k in s["kernels"]:
        cls = kernel_class(k["cpp"])
        pc = k["per_core"]
        t = k.get("tile")
        util = 1.0
        if t and k["macs"] and t["m"] > 0 and t["n"] > 0 and t["k"] > 0 and t["count"] > 0:
            util = min(1.0, k["macs"] / (t["count"] * t["m"] * t["n"] * t["k"]))
        sharers = sum(1 for x in pc if x["ext_read"] or x["ext_write"] or 1)
        act = sum(b["bytes"] for b in k["buffers"] if b["role"] in ("in", "out"))
        f["kernels"] += 1
        f["alu"] += max(x["alu_ops"] for x in pc) / pes
        mac = max(x["macs"] for x in pc) / (pes * c["macs_per_pe"] * util)
        f["mac_attn" if cls == "attn" else "mac_mm"] += mac
        f["arr"] += max(x["array_bytes"] for x in pc) / (4.0 * links)
        f["ocm"] += max(x["ocm_read"] + x["ocm_write"] for x in pc) / (4.0 * c["pe_cols"])
        f["ext"] += max(max(x["ext_read"], x["ext_write"]) for x in pc) * sharers / bpc
        if cls == "row":
            f["act_row"] += act / len(pc) * sharers / bpc
    return f


def design(f):
    """Rows (category, coefficients over NAMES, fixed part)."""
    z = [0.0] * len(NAMES)

    def row(**kw):
        r = list(z)
        for k, v in kw.items():
            r[NAMES.index(k)] = v
        return r
    return {
        "compute": (row(c_alu=f["alu"], c_launch=f["kernels"]), 0.0),
        "mac": (row(k_mac=f["mac_mm"], k_mac_attn=f["mac_attn"]), 0.0),
        "data_array": (row(k_array=f["arr"]), 0.0),
        "data_ocm": (row(k_ocm=f["ocm"]), 0.0),
        "data_external": (row(a_row=f["act_row"]), f["ext"]),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("enc", nargs="?", default=os.path.join(ROOT, "tests/data/cost/encoder_qcp"))
    ap.add_argument("dec", nargs="?", default=os.path.join(ROOT, "tests/data/cost/decoder_qcp"))
    ap.add_argument("--check", help="cost.c whose fitted block must equal the fit")
    ap.add_argument("--json", help="write constants and residuals here")
    a = ap.parse_args()
    pts = {"encoder": features(a.enc), "decoder": features(a.dec)}
    A, b, keys = [], [], []
    for p, f in pts.items():
        for cat, (coef, fixed) in design(f).items():
            v = VENDOR[p][cat]
            A.append([x / v for x in coef])
            b.append((v - fixed) / v)
            keys.append((p, cat))
    A, b = np.array(A), np.array(b)
    theta, _, rank, _ = np.linalg.lstsq(A, b, rcond=None)
    if rank < len(NAMES) or np.any(theta < 0):
        sys.exit("fit_cost_model: degenerate or negative fit: %s" % dict(zip(NAMES, theta)))
    const = dict(zip(NAMES, theta.tolist()))
    print("constants (least squares on relative residuals, 2 points x 5 categories, %d unknowns):" % len(NAMES))
    for n in NAMES:
        print("  %-11s %.6g" % (n, const[n]))
    out = {"constants": const, "points": {}}
    print("\n| point | category | predicted | vendor | residual |")
    print("|---|---|---:|---:|---:|")
    for p, f in pts.items():
        total = 0.0
        res = {}
        for cat, (coef, fixed) in design(f).items():
            pred = float(np.dot(coef, theta) + fixed)
            total += pred
            res[cat] = {"predicted": pred, "vendor": VENDOR[p][cat], "residual": pred / VENDOR[p][cat] - 1}
        res["total"] = {"predicted": total, "vendor": VENDOR[p]["total"], "residual": total / VENDOR[p]["total"] - 1}
        for cat in CATS + ["total"]:
            r = res[cat]
            print("| %s | %s | %s | %s | %+.1f%% |" % (p, cat, "{:,.0f}".format(r["predicted"]),
                                                      "{:,.0f}".format(r["vendor"]), 100 * r["residual"]))
        out["points"][p] = {"features": f, "residuals": res}
    print("\nC block (targets/chimera/sim/cost.c, between BEGIN fitted and END fitted):")
    for n in NAMES:
        print("#define FIT_%s %.6g" % (n, const[n]))
    if a.json:
        with open(a.json + ".tmp", "w") as fh:
            json.dump(out, fh, indent=1, sort_keys=True)
        os.replace(a.json + ".tmp", a.json)
    if a.check:
        txt = open(a.check).read()
        m = re.search(r"BEGIN fitted(.*?)END fitted", txt, re.S)
        if not m:
            sys.exit("fit_cost_model: %s: no BEGIN fitted ... END fitted block" % a.check)
        got = dict((k, float(v)) for k, v in re.findall(r"#define FIT_(\w+)\s+([-+0-9.eE]+)", m.group(1)))
        bad = [n for n in NAMES if n not in got or abs(got[n] - const[n]) > 1e-4 * max(abs(const[n]), 1e-12)]
        if bad:
            sys.exit("fit_cost_model: %s differs from the fit: %s" %
                     (a.check, ", ".join("%s %s vs %.6g" % (n, got.get(n), const[n]) for n in bad)))
        print("%s: the fitted block equals the fit" % a.check)
        off = ["%s %s %+.1f%%" % (p, c, 100 * r["residual"]) for p, v in out["points"].items()
               for c, r in v["residuals"].items() if abs(r["residual"]) > (0.10 if c == "total" else 0.25)]
        if off:
            sys.exit("fit_cost_model: outside the targets (categories 25%%, total 10%%): %s" % ", ".join(off))
        print("every category within 25%, both totals within 10%")


if __name__ == "__main__":
    main()
