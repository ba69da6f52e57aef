#!/bin/sh
# whisper_vendor_pair.sh — the vendor pair against the Optimum export of the same seeded weights:
# examples/models/whisper.py --size tiny writes (seed 0) the Optimum folder (--layout optimum) and
# the vendor pair encoder_model.onnx + decoder_prefill.onnx (--which encoder,decoder_prefill
# --dynamic: static 4 tokens, no cache, positional table kept); both are compiled with
# --pipeline whisper --target host; the step modules (one derived by prefill-step from the
# prefill, one from decoder_with_past) are run alone (`wlower run DIR --reps N`, median after a
# warm-up, alternating, ROUNDS rounds) at position 200 on the same inputs: logits max |diff| and
# the time ratio vendor / optimum; then `wlower transcribe` of jfk.wav with each (ids equal).
#   bench/whisper_vendor_pair.sh [WORK] [THREADS] [REPS] [ROUNDS]   (WLOWER=path, default build/wlower)
# Prints uptime, the CPU, the figures; records nothing itself.
set -eu
cd "$(dirname "$0")/.."
W=${1:-/tmp/whisper-vendor-bench}
T=${2:-1}
R=${3:-30}
N=${4:-3}
WL=${WLOWER:-build/wlower}
mkdir -p "$W"
[ -f "$W/optimum/config.json" ] || /usr/bin/python3 examples/models/whisper.py --layout optimum --size tiny --out "$W/optimum"
[ -f "$W/vendor/decoder_prefill.onnx" ] || /usr/bin/python3 examples/models/whisper.py --size tiny \
	--which encoder,decoder_prefill --dynamic --out "$W/vendor"
for k in optimum vendor; do
	[ -f "$W/pipe-$k/pipeline.json" ] || "$WL" "$W/$k" --pipeline whisper --target host -o "$W/pipe-$k" >/dev/null
done
uptime
grep -m1 "model name" /proc/cpuinfo
/usr/bin/python3 - "$W" "$WL" "$T" "$R" "$N" <<'PY'
import json, os, subprocess, sys
import numpy as np
W, WL, T, R, N = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
d = os.path.join(W, "in")
os.makedirs(d, exist_ok=True)
g = np.random.default_rng(0)
step = {p["name"]: p for p in json.load(open(os.path.join(W, "pipe-vendor", "pipeline.json")))["programs"]}["step"]
args = []
for io in step["inputs"]:
    n, s = io["name"], io["shape"]
    if n == "input_ids":
        x = np.array([[50363]], np.int64)
    elif n == "position_ids":
        x = np.array([200], np.int64)
    elif n == "attention_mask":
        x = np.zeros(s, np.int64)
        x[0, :200] = 1
        x[0, -1] = 1
    else:
        x = g.standard_normal(s).astype(np.float32)
    np.save(os.path.join(d, n + ".npy"), x)
    args += ["--input", "%s=%s" % (n, os.path.join(d, n + ".npy"))]
ms = {"optimum": [], "vendor": []}
for _ in range(N):
    for k in ms:
        r = subprocess.run([WL, "run", os.path.join(W, "pipe-" + k, "step"), "--output-dir", os.path.join(W, "out-" + k),
                            "--threads", T, "--reps", R] + args, capture_output=True, text=True, check=True)
        ms[k].append(float(r.stdout.split("median_ms=")[1].split()[0]))
a = np.load(os.path.join(W, "out-vendor", "logits.npy"))
b = np.load(os.path.join(W, "out-optimum", "logits.npy"))
print("step at p=200, %s thread(s): optimum %s ms, vendor %s ms; ratio vendor/optimum %.3f; logits max |diff| %g"
      % (T, ms["optimum"], ms["vendor"], np.median(ms["vendor"]) / np.median(ms["optimum"]), np.abs(a - b).max()))
jfk = os.path.join(os.path.dirname(os.getcwd()), "shared", "data", "audio", "jfk.wav")
tok = os.path.join(os.path.dirname(os.getcwd()), "shared", "data", "whisper", "multilingual.tiktoken")
ids = {}
for k in ms:
    out = os.path.join(W, "jfk-%s.json" % k)
    subprocess.run([WL, "transcribe", jfk, "--pipeline", os.path.join(W, "pipe-" + k), "--tokenizer", tok,
                    "--threads", T, "--max-tokens", "32", "-o", out], capture_output=True, text=True, check=True)
    ids[k] = [w["tokens"] for w in json.load(open(out))["report"]["windows_sampled"]]
print("jfk.wav transcribe: window ids equal: %s (%d windows)" % (ids["vendor"] == ids["optimum"], len(ids["vendor"])))
PY
