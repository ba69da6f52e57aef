#!/bin/sh
# sweep.sh — `wlower sweep` on the full-size Whisper-tiny encoder (log-mel fused), for
# bench/RESULTS.md: 3 targets x 3 core counts x 4 OCM sizes x 2 MACs/PE = 72 points with ninja;
# a re-run (no work); an interrupted run (SIGINT after INTERRUPT_S seconds) resumed.
#
# Usage: sh bench/sweep.sh [BUILD_DIR] [WORKDIR]   (defaults: build, /tmp/wlower-bench-sweep)
#   WORKDIR/enc4.onnx and enc4.tranges are made as docs/cost-model.md says if missing.
#   JOBS (default nproc), INTERRUPT_S (default 40), FULL=0: keep an earlier WORKDIR/s1 (only the
#   interrupt + resume part).
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${1:-build}
WORK=${2:-/tmp/wlower-bench-sweep}
case $BUILD in /*) W="$BUILD/wlower" ;; *) W="$ROOT/$BUILD/wlower" ;; esac
PY=/usr/bin/python3
JOBS=${JOBS:-$(nproc)}
mkdir -p "$WORK"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ! -f "$WORK/enc4.tranges" ]; then
	$PY examples/models/whisper.py --size tiny --which encoder --out "$WORK/w" >/dev/null 2>&1
	$PY examples/models/samples.py --mels 1 --frames 3000 --out "$WORK/mels" >/dev/null
	"$W" quantize "$WORK/w/encoder_model.onnx" --nbits 4 --block-size 32 -o "$WORK/enc4.onnx"
	"$W" calibrate "$WORK/enc4.onnx" --samples input_features="$WORK/mels/mels.npy" -o "$WORK/enc4.tranges"
fi
sweep() {
	"$W" sweep "$WORK/enc4.onnx" --tranges "$WORK/enc4.tranges" --prepend-logmel --target qc-n,qc-p,qc-u \
		--cores 1,2,4 --ocm 4MB,8MB,16MB,32MB --macs-per-pe 8,16 -o "$1" -j "$JOBS"
}
rm -rf "$WORK/s2"
if [ "${FULL:-1}" = 1 ] || [ ! -f "$WORK/s1/results.csv" ]; then
rm -rf "$WORK/s1"
t0=$(date +%s.%N)
sweep "$WORK/s1" > "$WORK/s1.log"
t1=$(date +%s.%N)
tail -1 "$WORK/s1.log"
echo "72 points with ninja -j $JOBS: $(echo "$t1 - $t0" | bc) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s.%N)
sweep "$WORK/s1" > "$WORK/s1b.log"
echo "re-run: $(echo "$(date +%s.%N) - $t0" | bc) s: $(grep -c '^\[' "$WORK/s1b.log" || true) jobs run ($(grep -o 'no work to do' "$WORK/s1b.log" || true))"
fi
# interrupted after INTERRUPT_S s (SIGTERM to the sweep's process group: a non-interactive
# shell starts background jobs with SIGINT ignored), then resumed
setsid "$W" sweep "$WORK/enc4.onnx" --tranges "$WORK/enc4.tranges" --prepend-logmel --target qc-n,qc-p,qc-u \
	--cores 1,2,4 --ocm 4MB,8MB,16MB,32MB --macs-per-pe 8,16 -o "$WORK/s2" -j "$JOBS" > "$WORK/s2a.log" 2>&1 &
pid=$!     # setsid execs in the child: its pid is the new process group's
sleep "${INTERRUPT_S:-40}"
kill -TERM "-$pid" || true
wait "$pid" 2>/dev/null || true
done_before=$(ls "$WORK/s2/points" | grep -c '\.json$' || true)
echo "left behind by the interrupt: $(ls "$WORK/s2/points" | grep -c 'tmp' || true) temporaries, $(ls -d "$WORK/s2/points/"*.module 2>/dev/null | wc -l) module folders"
sweep "$WORK/s2" > "$WORK/s2b.log"
ran=$(grep -c '^\[.*\] [a-z]' "$WORK/s2b.log" || true)
echo "interrupted after ${INTERRUPT_S:-40} s with $done_before points done; the resumed run ran $ran jobs (points + collect)"
cmp "$WORK/s1/results.csv" "$WORK/s2/results.csv" && echo "results.csv: interrupted+resumed == uninterrupted"
