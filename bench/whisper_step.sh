#!/bin/sh
# whisper_step.sh — host time of the Whisper `step` program by position: the seeded full-size
# Whisper-tiny Optimum export (examples/models/whisper.py --size tiny --layout optimum, 4+4
# layers, text_ctx 448) compiled with --pipeline whisper --target host, then its step module run
# alone (`wlower run DIR --reps N`, median of N after a warm-up) at positions 1, 100, 200, 400:
# position_ids = p, attention_mask 1 on cache rows < p and on the new row (S-1), seeded normal
# past K/V (self: the static cache; cross: 1500 rows). A step that copies no cache costs the
# same at every p but for attention over p rows. With WLOWER_PROFILE=1 the line also gives the
# time of the 4 self-attention kernels per run (the step's GroupQueryAttention nodes).
#   bench/whisper_step.sh [WORK] [THREADS] [REPS]      (WLOWER=path/to/wlower, default build/wlower;
#                                                       KEEP=1: reuse WORK/pipe-host, e.g. one compiled
#                                                       by an older wlower, to compare in one session)
# Prints uptime, the CPU, and one line per position; records nothing itself.
set -eu
cd "$(dirname "$0")/.."
W=${1:-/tmp/whisper-step-bench}
T=${2:-1}
R=${3:-50}
WL=${WLOWER:-build/wlower}
mkdir -p "$W"
[ -f "$W/tiny/config.json" ] || /usr/bin/python3 examples/models/whisper.py --layout optimum --size tiny --out "$W/tiny"
if [ "${KEEP:-0}" != 1 ] || [ ! -f "$W/pipe-host/pipeline.json" ]; then
	rm -rf "$W/pipe-host"
	"$WL" "$W/tiny" --pipeline whisper --target host -o "$W/pipe-host" >/dev/null
fi
uptime
grep -m1 "model name" /proc/cpuinfo
/usr/bin/python3 - "$W" "$WL" "$T" "$R" <<'PY'
import json, os, subprocess, sys
import numpy as np
w, wl, threads, reps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
pj = json.load(open(w + "/pipe-host/pipeline.json"))
step = [p for p in pj["programs"] if p["name"] == "step"][0]
sdir = os.path.join(w, "pipe-host", step["dir"])
S = pj["whisper"]["text_ctx"]
outs = {o["name"]: o["shape"] for o in step["outputs"]}
print("step present.0.decoder.key", outs.get("present.0.decoder.key"))
g = np.random.default_rng(0)
ind = os.path.join(w, "in")
os.makedirs(ind, exist_ok=True)
dt = {"int64": np.int64, "int32": np.int32, "float32": np.float32}
for p in (1, 100, 200, 400):
    args = [wl, "run", sdir, "--threads", threads, "--reps", reps, "--output-dir", os.path.join(w, "out")]
    for i in step["inputs"]:
        n, shape = i["name"], i["shape"]
        if n == "input_ids":
            x = np.full(shape, 50364, np.int64)
        elif n == "position_ids":
            x = np.full(shape, p, np.int64)
        elif n == "attention_mask":
            x = np.zeros(shape, np.int64)
            x[0, :p] = 1
            x[0, shape[1] - 1] = 1
        else:
            x = g.standard_normal(shape).astype(np.float32)
        f = os.path.join(ind, n + ".npy")
        np.save(f, x)
        args += ["--input", n + "=" + f]
    r = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, WLOWER_PROFILE="1"))
    if r.returncode:
        sys.exit("wlower run failed at p=%d: %s" % (p, r.stderr.strip()))
    ms = [l.split("=")[1] for l in r.stdout.split() if l.startswith("median_ms=")]
    # the decoder self-attention kernels (GroupQueryAttention after kv-step-mask), ms per run
    sa = [l.split()[3] for l in r.stderr.splitlines() if l.split()[:1] == ["GroupQueryAttention"]]
    print("p=%d step median_ms=%s self-attention kernels ms/run=%s (threads %s, %s reps)" %
          (p, ms[0], sa[0] if sa else "?", threads, reps))
PY
uptime
