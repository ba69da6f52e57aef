#!/bin/sh
# matmul_nbits.sh [REPS] — the host MatMulNBits kernel (4-bit, block 32) on the
# Whisper-tiny encoder's GEMM shapes (M x K x N = 1500x384x384, 1500x384x1536,
# 1500x1536x384, plus 1500x400x384: K not a multiple of the block), one
# single-node model each (`wlower quantize` of a float MatMul), against the FMA
# peak measured by bench/fma_peak.c in the same run, and against ONNX Runtime
# on the same file.
#
# Per shape: compile time (`wlower MODEL --target host`, incl. autotune), the
# minimum over ROUNDS of `wlower run --reps REPS` medians, GFLOP/s and % of
# peak, ORT's, and PSNR of wlower vs ORT.
#
# Environment: WLOWER (default build/wlower), THREADS (2), ROUNDS (5),
# SHAPES ("MxKxN ..."), CACHE (/tmp/wlower-bench-mmnb), WFLAGS (extra
# compile flags, e.g. "--no-autotune" or "--host-precision bf16").
set -u
cd "$(dirname "$0")/.."
REPS=${1:-10}
T=${THREADS:-2}
ROUNDS=${ROUNDS:-5}
W=${WLOWER:-build/wlower}
C=${CACHE:-/tmp/wlower-bench-mmnb}
SHAPES=${SHAPES:-"1500x384x384 1500x384x1536 1500x1536x384 1500x400x384"}
WFLAGS=${WFLAGS:-}
PY=/usr/bin/python3
mkdir -p "$C"
sh tests/oracle/install.sh >/dev/null || { echo "matmul_nbits: cannot install onnxruntime-node" >&2; exit 1; }
cc -O2 -pthread bench/fma_peak.c -o "$C/fma_peak" || exit 1
# the peak: the best of many short bench/fma_peak.c windows (5 ms, about one
# kernel run; 20 here and 20 per round below): under load a long window is
# always preempted while a short kernel run may not be, so both are measured
# on the same time scale and the least disturbed of each is compared
peak() { for i in $(seq 20); do "$C/fma_peak" "$T" 0.005; done | sed -n 's/^fma_peak_gflops=\([0-9.]*\).*/\1/p' | sort -n | tail -1; }
: > "$C/peaks.txt"
peak >> "$C/peaks.txt"
echo "# matmul_nbits: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), family $(sed -n 's/^cpu family[^:]*: //p' /proc/cpuinfo | head -1) model $(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1)), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# threads $T, min over $ROUNDS rounds of the median of $REPS runs; flags: ${WFLAGS:-none}"
ROWS=""
for s in $SHAPES; do
	M=${s%%x*}; r=${s#*x}; K=${r%%x*}; N=${r#*x}
	d=$C/$s
	if [ ! -f "$d/q.onnx" ]; then
		mkdir -p "$d"
		$PY - "$M" "$K" "$N" "$d" <<'PY' || exit 1
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
M, K, N = map(int, sys.argv[1:4]); d = sys.argv[4]
rng = np.random.default_rng(7)
w = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)
g = helper.make_graph([helper.make_node("MatMul", ["a", "w"], ["y"], name="mm")], "mm",
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, [M, K])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])], [numpy_helper.from_array(w, "w")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d + "/f.onnx")
np.save(d + "/a.npy", rng.standard_normal((M, K)).astype(np.float32))
PY
		"$W" quantize "$d/f.onnx" --nbits 4 --block-size 32 -o "$d/q.onnx" >/dev/null || exit 1
	fi
	rm -rf "$d/mod"
	t0=$(date +%s.%N)
	"$W" "$d/q.onnx" --target host $WFLAGS -o "$d/mod" >"$d/compile.txt" 2>&1 || { echo "| $s | compile failed: $(head -c 300 "$d/compile.txt") |"; continue; }
	ct=$(echo "$(date +%s.%N) - $t0" | bc)
	: > "$d/w.txt"; : > "$d/o.txt"
	for i in $(seq "$ROUNDS"); do
		peak >> "$C/peaks.txt"
		"$W" run "$d/mod" --input a="$d/a.npy" --output-dir "$d/out-w" --threads "$T" --reps "$REPS" | sed -n 's/^median_ms=//p' >> "$d/w.txt"
		node tests/oracle/ort_run.js "$d/q.onnx" "$d/out-o" a="$d/a.npy" --threads "$T" --reps "$REPS" | sed -n 's/^median_ms=//p' >> "$d/o.txt"
	done
	w=$(sort -n "$d/w.txt" | head -1); o=$(sort -n "$d/o.txt" | head -1)
	psnr=$($PY tests/oracle/compare.py "$d/out-o" "$d/out-w" 2>&1 | sed -n 's/.*psnr=\([^ ]*\).*/\1/p' | head -1)
	ROWS="$ROWS $s:$w:$o:$ct:$psnr"
done
PEAK=$(sort -n "$C/peaks.txt" | tail -1)
echo "# FMA peak (bench/fma_peak.c, $T threads, 5 ms windows): best of $((20 * $(wc -l < "$C/peaks.txt"))) in this run: $PEAK GFLOP/s (best per round: $(sort -n "$C/peaks.txt" | tr '\n' ' '))"
echo "# compile: wall time of \`wlower MODEL --target host\` incl. the autotune (under load: see the load above)"
printf '| M x K x N | compile | wlower | GFLOP/s (%% peak) | ORT | ORT GFLOP/s (%% peak) | wlower/ORT | PSNR vs ORT |\n|---|---|---|---|---|---|---|---|\n'
for r in $ROWS; do
	echo "$r" | awk -F: -v p="$PEAK" '{
		split($1, d, "x"); f = 2 * d[1] * d[2] * d[3]; w = $2; o = $3; gw = f / (w * 1e6); go = f / (o * 1e6);
		printf "| %s | %.2f s | %.3f ms | %.1f (%.0f%%) | %.3f ms | %.1f (%.0f%%) | %.2fx | %s dB |\n",
			$1, $4, w, gw, 100 * gw / p, o, go, 100 * go / p, w / o, $5 }'
done
