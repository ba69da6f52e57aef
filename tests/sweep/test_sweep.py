#!/usr/bin/python3
"""test_sweep.py WLOWER WORKDIR [--chromium PATH] — `wlower sweep` end to end on a tiny model (tests/sweep/make_tiny.py).

ninja: 6 configurations (qc-n, qc-p, an unknown target x 1 and 4 cores), run by `ninja -j 2`:
  progress lines, results.csv / results.json / report.html structure, the unknown target's points
  failed with the message and the others costed (TotalCycles > 0, categories add up); a re-run
  does no work (ninja: no work to do, point files untouched); a removed point is redone alone
  (resume); a malformed size fails its points with the compiler's message; bad lists are usage
  errors; --help.
slurm: the same sweep with --scheduler slurm --wait and a fake `sbatch` first on PATH that
  records its arguments and runs every array task locally with SLURM_ARRAY_TASK_ID: the same
  results.csv as the ninja run; a second submission submits nothing (every point done).
--chromium PATH: also tests/sweep/report_browser.py on the report (screenshot, charts drawn,
no console error). Ends with "N passed, M failed".
"""
import csv
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
W, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
CHROMIUM = sys.argv[sys.argv.index("--chromium") + 1] if "--chromium" in sys.argv else None
PY = "/usr/bin/python3"
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
        print("ok   " + what)
    else:
        failed += 1
        print("FAIL " + what)


def run(args, env=None, code=0):
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    if p.returncode != code:
        print("command %s exited %d (expected %d)\nstdout:\n%s\nstderr:\n%s" %
              (args, p.returncode, code, p.stdout, p.stderr))
    return p


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
run([PY, os.path.join(HERE, "make_tiny.py"), WORK])
m4, tr = os.path.join(WORK, "tiny4.onnx"), os.path.join(WORK, "tiny4.tranges")
run([W, "quantize", os.path.join(WORK, "tiny.onnx"), "--nbits", "4", "--block-size", "32", "-o", m4])
run([W, "calibrate", m4, "--samples", "x=" + os.path.join(WORK, "x.npy"), "-o", tr])

LISTS = ["--target", "qc-n,qc-p,qc-z", "--cores", "1,4", "--ocm", "1MB", "--macs-per-pe", "16",
         "--ext-bw", "64GBps"]
S = os.path.join(WORK, "sw")
p = run([W, "sweep", m4, "--tranges", tr] + LISTS + ["-o", S, "-j", "2"])
check(p.returncode == 0, "ninja sweep exits 0 with failed points")
check("[1/7]" in p.stdout and "[7/7] collect" in p.stdout, "ninja progress shown (6 points + collect)")
check("--target 'qc-z'" in p.stderr and "warning" in p.stderr, "a bad value is warned about up front")
for f in ("build.ninja", "sweep.json", "results.csv", "results.json", "report.html"):
    check(os.path.isfile(os.path.join(S, f)), "%s written" % f)
check(not [f for f in os.listdir(S) if ".tmp" in f], "no temporaries left")
rows = list(csv.DictReader(open(os.path.join(S, "results.csv"))))
check(len(rows) == 6, "results.csv: 6 rows")
for col in ("name", "status", "target", "cores", "ocm_bytes", "macs_per_pe", "ext_bw", "total_cycles",
            "latency_ms", "compute", "mac", "data_array", "data_ocm", "data_external", "max_ocm_bytes", "spills",
            "ext_read_bytes", "ext_write_bytes", "mac_utilization", "error"):
    check(col in rows[0], "results.csv column %s" % col)
ok = [r for r in rows if r["status"] == "ok"]
bad = [r for r in rows if r["status"] == "error"]
check(len(ok) == 4 and len(bad) == 2, "4 points ok, the 2 qc-z ones failed")
check(all("qc-z" in r["error"] and "not qc-n, qc-p or qc-u" in r["error"] for r in bad), "failed points say why")
for r in ok:
    cats = sum(float(r[c]) for c in ("compute", "mac", "data_array", "data_ocm", "data_external"))
    tot = float(r["total_cycles"])
    check(tot > 0 and abs(cats - tot) <= 8, "%s: categories add up to TotalCycles (%d vs %d)" % (r["name"], cats, tot))
    check(abs(float(r["latency_ms"]) - tot / 1.7e6) < 1e-6 * tot, "%s: latency = cycles / 1.7 GHz" % r["name"])
    check(float(r["ext_bw"]) == 64e9 and float(r["ocm_bytes"]) == 1 << 20, "%s: hardware as asked" % r["name"])
by = {r["name"]: r for r in ok}
check(float(by["qc-p.c4.ocm1MB.m16.bw64GBps"]["mac"]) < float(by["qc-p.c1.ocm1MB.m16.bw64GBps"]["mac"]),
      "4 cores: fewer MAC cycles than 1")
res = json.load(open(os.path.join(S, "results.json")))
check(res["format"] == "wlower-sweep-results" and len(res["points"]) == 6 and res["failed"] == 2,
      "results.json: format, 6 points, 2 failed")
pt = [x for x in res["points"] if x["status"] == "ok"][0]
check(all(k in pt for k in ("config", "hardware", "total_cycles", "categories", "max_ocm_bytes", "spills",
                            "ext_read_bytes", "mac_utilization", "compile_ms")), "results.json point fields")
html = open(os.path.join(S, "report.html")).read()
check(html.count('class="bar"') == 4, "report: one latency bar per costed point")
check('id="chart-pareto"' in html and html.count('class="pt"') == 4, "report: Pareto chart with every point")
check('id="chart-categories"' in html and html.count('class="seg"') % 5 == 0 and 'class="seg"' in html,
      "report: stacked category bars")
check('class="sortable"' in html and "<script>" in html and "addEventListener('click'" in html,
      "report: sortable tables (inline script)")
check("not qc-n, qc-p or qc-u" in html and "Failed and missing" in html, "report: failed points listed")
check("http" not in html.replace("http://www.w3.org/2000/svg", ""), "report: self-contained (no external URL)")

# a re-run does no work
mt = {f: os.stat(os.path.join(S, "points", f)).st_mtime_ns for f in os.listdir(os.path.join(S, "points"))}
p = run([W, "sweep", m4, "--tranges", tr] + LISTS + ["-o", S, "-j", "2"])
check("ninja: no work to do" in p.stdout, "re-run: ninja has no work to do")
check(mt == {f: os.stat(os.path.join(S, "points", f)).st_mtime_ns for f in os.listdir(os.path.join(S, "points"))},
      "re-run: point files untouched")
# resume: only the removed point is redone
os.unlink(os.path.join(S, "points", "qc-n.c4.ocm1MB.m16.bw64GBps.json"))
p = run([W, "sweep", m4, "--tranges", tr] + LISTS + ["-o", S, "-j", "2"])
check("[1/2] qc-n.c4.ocm1MB.m16.bw64GBps" in p.stdout and "[2/2] collect" in p.stdout,
      "resume: one point redone, then collect")
rows2 = list(csv.DictReader(open(os.path.join(S, "results.csv"))))
check(rows2 == rows, "resume: the same results.csv")

# malformed size: its points fail with the compiler's message, the rest go on
S2 = os.path.join(WORK, "sw2")
p = run([W, "sweep", m4, "--tranges", tr, "--target", "qc-p", "--ocm", "1MB,4XB", "-o", S2])
r2 = {r["name"]: r for r in csv.DictReader(open(os.path.join(S2, "results.csv")))}
check(r2["qc-p.ocm1MB"]["status"] == "ok" and r2["qc-p.ocm4XB"]["status"] == "error" and
      "'4XB' is not a size like 32MB" in r2["qc-p.ocm4XB"]["error"], "--ocm 4XB: that point fails, with why")
# OCM below the largest kernel's working set (weights + scratch)
p = run([W, "sweep", m4, "--tranges", tr, "--target", "qc-n", "--ocm", "64KB", "-o", os.path.join(WORK, "sw3")])
r3 = list(csv.DictReader(open(os.path.join(WORK, "sw3", "results.csv"))))
check(r3[0]["status"] in ("ok", "error") and (r3[0]["status"] == "ok" or "working set" in r3[0]["error"]),
      "64KB OCM: costed or failed for the working set")

# usage errors
for args, msg in ((["--ocm", "4MB,,8MB"], "empty item"), (["--cores", "1,1"], "given twice"),
                  (["--scheduler", "pbs"], "unknown scheduler")):
    p = run([W, "sweep", m4, "--tranges", tr, "--target", "qc-p", "-o", os.path.join(WORK, "u")] + args, code=2)
    check(p.returncode == 2 and msg in p.stderr and p.stderr.count("\n") == 1, "usage: %s -> %s" % (args, msg))
p = run([W, "sweep", "--help"])
check(p.returncode == 0 and "--scheduler" in p.stdout and "--collect" in p.stdout, "--help")

# slurm, with a fake sbatch that runs the array tasks here
fake = os.path.join(WORK, "fakebin")
os.makedirs(fake)
with open(os.path.join(fake, "sbatch"), "w") as f:
    f.write("""#!/bin/sh
# fake sbatch: records its arguments, runs every task of the script's --array locally
echo "$@" >> "$FAKE_SBATCH_LOG"
for last; do :; done
range=$(sed -n 's/^#SBATCH --array=//p' "$last")
i=${range%%-*}; n=${range##*-}
while [ "$i" -le "$n" ]; do SLURM_ARRAY_TASK_ID=$i sh "$last" || exit 1; i=$((i + 1)); done
echo "Submitted batch job 42"
""")
os.chmod(os.path.join(fake, "sbatch"), 0o755)
env = dict(os.environ, PATH=fake + ":" + os.environ["PATH"], FAKE_SBATCH_LOG=os.path.join(WORK, "sbatch.log"))
SL = os.path.join(WORK, "sl")
p = run([W, "sweep", m4, "--tranges", tr] + LISTS + ["-o", SL, "--scheduler", "slurm", "--wait",
                                                      "--sbatch-arg", "--partition=debug"], env=env)
check(p.returncode == 0 and "submitting 6 of 6 points" in p.stdout, "slurm: 6 points submitted")
log = open(os.path.join(WORK, "sbatch.log")).read().split("\n")[0]
check(log.startswith("--wait --partition=debug ") and log.endswith("slurm/sweep.sbatch"), "slurm: sbatch arguments")
script = open(os.path.join(SL, "slurm", "sweep.sbatch")).read()
check("#SBATCH --array=0-5" in script and "SLURM_ARRAY_TASK_ID" in script, "slurm: one array job of 6 tasks")
check(open(os.path.join(SL, "results.csv")).read() == open(os.path.join(S, "results.csv")).read(),
      "slurm: the same results.csv as the ninja run")
p = run([W, "sweep", m4, "--tranges", tr] + LISTS + ["-o", SL, "--scheduler", "slurm", "--wait"], env=env)
check("every point is done" in p.stdout and len(open(os.path.join(WORK, "sbatch.log")).read().split("\n")) == 2,
      "slurm: nothing resubmitted when every point is done")
p = run([W, "sweep", "--collect", SL])
check(p.returncode == 0 and "6 points (4 ok, 2 failed, 0 missing)" in p.stdout, "--collect")

# the report in headless Chromium (tests/sweep/report_browser.py): screenshot, charts, console
if CHROMIUM:
    p = run([PY, os.path.join(HERE, "report_browser.py"), CHROMIUM, os.path.join(S, "report.html"),
             os.path.join(WORK, "browser")])
    print(p.stdout, end="")
    m = [ln for ln in p.stdout.splitlines() if ln.endswith(" failed") and " passed, " in ln]
    n_ok, n_bad = (int(x) for x in m[-1].replace(" passed,", "").replace(" failed", "").split()) if m else (0, 1)
    passed, failed = passed + n_ok, failed + n_bad + (p.returncode != 0 and not n_bad)

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
