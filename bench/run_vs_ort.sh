#!/bin/sh
# run_vs_ort.sh [ROUNDS] — `wlower run` (the float reference executor) against
# ONNX Runtime (onnxruntime-node, 2 intra-op threads, all graph optimizations)
# on the full-size Whisper-tiny encoder ([1,80,3000] real log-mel of jfk.wav),
# float and 4-bit MatMulNBits, alternating in one invocation. Prints the median
# of each round's median_ms and the ratio wlower/ORT.
# Models are generated on demand into $BENCH_CACHE (default /tmp/wlower-bench).
set -eu
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
REPS=${REPS:-10}
W=${WLOWER:-build/wlower}
C=${BENCH_CACHE:-/tmp/wlower-bench}
mkdir -p "$C"
sh tests/oracle/install.sh >/dev/null
if [ ! -f "$C/tiny/encoder_model.onnx" ]; then
	echo "generating whisper-tiny encoder (once)..." >&2
	/usr/bin/python3 examples/models/whisper.py --size tiny --which encoder --out "$C/tiny" >/dev/null
fi
[ -f "$C/tiny/encoder_nbits.onnx" ] ||
	"$W" quantize "$C/tiny/encoder_model.onnx" --nbits 4 --block-size 32 -o "$C/tiny/encoder_nbits.onnx"
[ -f "$C/mels/mels.npy" ] || /usr/bin/python3 examples/models/samples.py --mels 1 --frames 3000 --out "$C/mels" >/dev/null
/usr/bin/python3 - "$C/mels/mels.npy" "$C/in.npy" <<'PY'
import sys, numpy as np
a = np.load(sys.argv[1]); np.save(sys.argv[2], a[:1].astype(np.float32))
PY
med() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for kind in model nbits; do
	m="$C/tiny/encoder_$kind.onnx"
	: > "$C/w.txt"; : > "$C/o.txt"
	for r in $(seq "$ROUNDS"); do
		"$W" run "$m" --input input_features="$C/in.npy" --output-dir "$C/out-w" --threads 2 --reps "$REPS" |
			sed -n 's/^median_ms=//p' >> "$C/w.txt"
		node tests/oracle/ort_run.js "$m" "$C/out-o" input_features="$C/in.npy" --threads 2 --reps "$REPS" |
			sed -n 's/^median_ms=//p' >> "$C/o.txt"
	done
	w=$(med < "$C/w.txt"); o=$(med < "$C/o.txt")
	psnr=$(/usr/bin/python3 tests/oracle/compare.py "$C/out-o/last_hidden_state.npy" "$C/out-w/last_hidden_state.npy" 2>&1 | tr '\n' ' ')
	printf 'whisper-tiny encoder %-6s wlower %8.1f ms  ORT %8.1f ms  ratio %.2fx  (%s)\n' \
		"$kind" "$w" "$o" "$(awk "BEGIN {print $w / $o}")" "$psnr"
done
