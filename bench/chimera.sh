#!/bin/sh
# chimera.sh — the Chimera target at full size (issue 5), for bench/RESULTS.md.
#
#   1. tests/oracle/test_chimera.py --full: full-size Whisper-tiny (4+4 layers, 3000
#      frames, vocab 51865), encoder 4-bit calibrated on 5 samples, qc-p x4 32 MB:
#      PSNR vs ONNX Runtime; decoder_prefill 4-bit --append-argmax fed the simulated
#      states: ids vs ORT on them and vs the all-float chain; --prepend-logmel on
#      jfk.wav vs ORT on a float64 log-mel.  (Qwen2 at full size with BENCH_QWEN=1:
#      the 1.12 GB single-token graph.)
#   2. timings with /usr/bin/time of the encoder with --prepend-logmel (the vendor's
#      calibration point): `wlower` compile (gate 10 s); `wlower sim` cold (g++ build
#      included, empty cache) and warm (cached build; gate 60 s), run twice more and
#      compared byte for byte (outputs and counters);
#   3. predicted vs vendor cycles per category (docs/cost-model.md's calibration point).
#
# Usage: sh bench/chimera.sh [BUILD_DIR] [WORKDIR]   (defaults: build, /tmp/wlower-bench-chimera)
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${1:-build}
WORK=${2:-/tmp/wlower-bench-chimera}
case $BUILD in /*) W="$BUILD/wlower" ;; *) W="$ROOT/$BUILD/wlower" ;; esac
PY=/usr/bin/python3
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(uname -m), load average $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== 1. accuracy at full size (tests/oracle/test_chimera.py --full) =="
QWEN="--skip-qwen"
[ "${BENCH_QWEN:-0}" = 1 ] && QWEN=""
$PY tests/oracle/test_chimera.py "$W" "$WORK" --full $QWEN --report "$WORK/report.json" || true

echo "== 2. timings: encoder with --prepend-logmel, qc-p x4, 32 MB =="
T="/usr/bin/time -f %e"
$T -o "$WORK/t_compile" "$W" "$WORK/encoder3k_4bit.onnx" --tranges "$WORK/encoder3k.tranges" --target qc-p \
	--cores 4 --ocm 32MB --prepend-logmel -o "$WORK/bench_enc" 2>&1 | tail -1
export XDG_CACHE_HOME="$WORK/cache"
rm -rf "$XDG_CACHE_HOME"
$T -o "$WORK/t_sim_cold" "$W" sim "$WORK/bench_enc" --input waveform="$WORK/jfk_wav.npy" \
	--output-dir "$WORK/bench_sim0" > "$WORK/sim0.txt"
$T -o "$WORK/t_sim_warm1" "$W" sim "$WORK/bench_enc" --input waveform="$WORK/jfk_wav.npy" \
	--output-dir "$WORK/bench_sim1" --compare last_hidden_state="$WORK/ort_enc3k/last_hidden_state.npy" > "$WORK/sim1.txt"
$T -o "$WORK/t_sim_warm2" "$W" sim "$WORK/bench_enc" --input waveform="$WORK/jfk_wav.npy" \
	--output-dir "$WORK/bench_sim2" > "$WORK/sim2.txt"
same=yes
for f in last_hidden_state.npy counters.json profile_core0.json profile.svg; do
	cmp -s "$WORK/bench_sim1/$f" "$WORK/bench_sim2/$f" || { same=no; echo "DIFFERENT: $f"; }
	cmp -s "$WORK/bench_sim0/$f" "$WORK/bench_sim2/$f" || { same=no; echo "DIFFERENT (cold vs warm): $f"; }
done
echo "compile:            $(tail -1 "$WORK/t_compile") s  (gate 10 s)"
echo "sim cold (g++ build): $(tail -1 "$WORK/t_sim_cold") s"
echo "sim warm:           $(tail -1 "$WORK/t_sim_warm1") s, $(tail -1 "$WORK/t_sim_warm2") s  (gate 60 s)"
echo "byte-identical runs (outputs, counters, profiles): $same"

echo "== 3. predicted vs vendor cycles (qc-p x4, 32 MB, 16 MACs/PE, 128 GB/s) =="
$PY - "$WORK/sim1.txt" "$WORK/report.json" <<'EOF'
import json, re, sys
txt = open(sys.argv[1]).read()
vendor = {"total": 43925705, "compute": 19.679e6, "mac": 6.154e6, "data_array": 3.478e6,
          "data_ocm": 11.834e6, "data_external": 2.302e6}
ours = {"total": int(re.search(r"TotalCycles:\s*(\d+)", txt).group(1))}
for k in ("compute", "mac", "data_array", "data_ocm", "data_external"):
    m = re.search(r"^\s*%s\s+(\d+)" % k, txt, re.M)
    ours[k] = int(m.group(1)) if m else None
print("| category | ours | vendor | ours / vendor |")
print("|---|---|---|---|")
for k in ("total", "compute", "mac", "data_array", "data_ocm", "data_external"):
    o, v = ours[k], vendor[k]
    print("| %s | %s | %s | %s |" % (k, "{:,}".format(o) if o is not None else "-", "{:,}".format(int(v)),
                                    "%.3f" % (o / v) if o else "-"))
for line in txt.splitlines():
    if re.search(r"latency|executions/s|PSNR|MSE|network GMACs|max OCM|MAC utilization", line):
        print(line)
try:
    r = json.load(open(sys.argv[2]))
    for k, v in r.items():
        if isinstance(v, dict) and "psnr" in v:
            print("%-28s PSNR %.2f dB  MSE %.3g" % (k, v["psnr"], v["mse"]))
        elif k == "decoder_ids":
            print("decoder ids: sim %s, ORT on sim states %s, float chain %s" % (v["sim"], v["ort_on_sim"], v["float_chain"]))
except OSError:
    pass
EOF
