#!/bin/sh
# host_vs_ort.sh [ROUNDS] — the host target (`wlower MODEL --target host -o DIR`,
# run with `wlower run DIR --reps`) against ONNX Runtime (onnxruntime-node via
# tests/oracle/ort_run.js: 2 intra-op threads, all graph optimizations) on the
# same inputs, alternating in one invocation, on the full-size graphs:
#   encoder            Whisper-tiny encoder, [1,80,3000] real log-mel, 4-bit MatMulNBits
#   decoder_prefill    Whisper-tiny decoder prefill (4 tokens), 4-bit
#   decoder_with_past  one Whisper-tiny decoder_with_past step, 4-bit
#   qwen2_single_token the Qwen2-1.5B-shaped single-token graph (1 layer + the
#                      151936-wide LM head), 4-bit
# (4-bit = `wlower quantize --nbits 4 --block-size 32`; ORT runs the same file.)
# Prints, per graph: median latency of each (median over ROUNDS of each round's
# median of REPS timed runs), the ratio wlower/ORT of those medians and the
# range of the per-round ratios (each round runs both back to back, so the
# range shows what machine noise does to the ratio) with the ratio of the two
# fastest rounds ("best": noise only adds time), achieved GFLOP/s (FLOPs of
# the MatMul/Gemm/Conv nodes of the float graph) and % of the FMA peak measured
# by bench/fma_peak.c on the same threads, and PSNR/tokens of wlower vs ORT.
# Then, if the module has per-kernel entry points, WLOWER_PROFILE=1 per-kernel
# times (one extra run of REPS).
#
# Environment: WLOWER (default build/wlower), BENCH_CACHE (default
# /tmp/wlower-bench-host; models are generated there once, ~1 min each),
# REPS (default 10), THREADS (default 2), GRAPHS (space-separated subset of the
# names above), PROFILE_LINES (default 12; 0 = no profile), FMA_PEAK (GFLOP/s
# to compute % of peak against, e.g. a measurement on a quiet machine;
# default: bench/fma_peak.c measured at the start of this run), WFLAGS (extra
# compile flags, e.g. "--host-precision bf16"), PSNR_MIN (the verdict's floor
# vs ORT; default 90 dB, 50 dB with bf16 in WFLAGS).
set -u
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
REPS=${REPS:-10}
T=${THREADS:-2}
W=${WLOWER:-build/wlower}
C=${BENCH_CACHE:-/tmp/wlower-bench-host}
GRAPHS=${GRAPHS:-"encoder decoder_prefill decoder_with_past qwen2_single_token"}
PROFILE_LINES=${PROFILE_LINES:-12}
# the verdict's PSNR floor vs ORT: 90 dB in fp32, 50 dB when WFLAGS ask for bf16
case " ${WFLAGS:-} " in *bf16*) PSNR_MIN=${PSNR_MIN:-50};; *) PSNR_MIN=${PSNR_MIN:-90};; esac
PY=/usr/bin/python3
mkdir -p "$C"
W=$(cd "$(dirname "$W")" && pwd)/$(basename "$W")
[ -x "$W" ] || { echo "host_vs_ort: $W: no wlower binary (set WLOWER)" >&2; exit 1; }
sh tests/oracle/install.sh >/dev/null || { echo "host_vs_ort: cannot install onnxruntime-node" >&2; exit 1; }

# ---- models (once)
if [ ! -f "$C/mels/mels.npy" ]; then
	$PY examples/models/samples.py --mels 1 --frames 3000 --out "$C/mels" >/dev/null || exit 1
fi
if [ ! -f "$C/whisper-tiny/done" ]; then
	echo "generating full-size whisper-tiny graphs (once)..." >&2
	$PY examples/models/whisper.py --size tiny --out "$C/whisper-tiny" --ref "$C/whisper-tiny/ref" \
		--samples "$C/mels/mels.npy" >/dev/null && touch "$C/whisper-tiny/done" || exit 1
fi
case " $GRAPHS " in *" qwen2_single_token "*)
	if [ ! -f "$C/qwen2/done" ]; then
		echo "generating the Qwen2-1.5B-shaped single-token graph (once)..." >&2
		$PY examples/models/qwen2.py --which single_token --out "$C/qwen2" --ref "$C/qwen2/ref" >/dev/null &&
			touch "$C/qwen2/done" || exit 1
	fi;;
esac

# ---- FMA peak on T threads
cc -O2 -pthread bench/fma_peak.c -o "$C/fma_peak" || exit 1
MEASURED=$("$C/fma_peak" "$T" 1 | sed -n 's/^fma_peak_gflops=\([0-9.]*\).*/\1/p')
# FMA_PEAK=X: % of peak against X (e.g. a quiet-machine measurement) instead
PEAK=${FMA_PEAK:-$MEASURED}
ORTV=$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' tests/oracle/node_modules/onnxruntime-node/package.json 2>/dev/null | head -1)
echo "# host_vs_ort: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# threads $T, rounds $ROUNDS x reps $REPS, onnxruntime-node ${ORTV:-?}, FMA peak (bench/fma_peak.c, $T threads): $MEASURED GFLOP/s measured now${FMA_PEAK:+, % of peak uses FMA_PEAK=$FMA_PEAK}"

med() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# float model -> "name=file" feeds (one per line), written from the generator's --ref inputs
feeds() {
	$PY - "$1" "$2" "$3" <<'PY'
import os, sys
sys.path.insert(0, "tests/oracle")
import run_oracle as ro
model, ref, out = sys.argv[1:4]
for f in ro.make_inputs(model, ref if os.path.isdir(ref) else None, out):
    print(f)
PY
}

# FLOPs of MatMul/Gemm/Conv nodes (2 per multiply-add) of a float graph
flops() {
	$PY - "$1" <<'PY'
import sys, numpy as np, onnx
from onnx import shape_inference
m = shape_inference.infer_shapes(onnx.load(sys.argv[1]))
shapes = {}
for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
    d = [x.dim_value if x.HasField("dim_value") else None for x in v.type.tensor_type.shape.dim]
    shapes[v.name] = d
for t in m.graph.initializer:
    shapes[t.name] = list(t.dims)
def numel(s):
    return int(np.prod(s)) if s is not None and None not in s else None
total = 0
for n in m.graph.node:
    a, y = shapes.get(n.input[0]) if n.input else None, shapes.get(n.output[0])
    if n.op_type in ("MatMul", "Gemm") and a and numel(y):
        k = a[-1]
        if n.op_type == "Gemm" and any(at.name == "transA" and at.i for at in n.attribute):
            k = a[0]
        total += 2 * numel(y) * k
    elif n.op_type == "Conv" and numel(y):
        w = shapes.get(n.input[1])
        total += 2 * numel(y) * numel(w[1:])
print(total)
PY
}

printf '| graph | wlower | ONNX Runtime | ratio | ratio per round | GFLOP | wlower GFLOP/s (%% peak) | ORT GFLOP/s (%% peak) | wlower vs ORT |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
PROFILES=""
for g in $GRAPHS; do
	case $g in
	encoder) dir=$C/whisper-tiny; base=encoder_model;;
	decoder_prefill) dir=$C/whisper-tiny; base=decoder_prefill;;
	decoder_with_past) dir=$C/whisper-tiny; base=decoder_with_past;;
	qwen2_single_token) dir=$C/qwen2; base=single_token;;
	*) echo "host_vs_ort: unknown graph '$g'" >&2; continue;;
	esac
	float=$dir/$base.onnx
	m=$dir/$base.nbits.onnx
	if [ ! -f "$m" ] && ! "$W" quantize "$float" --nbits 4 --block-size 32 -o "$m" 2>"$C/err.txt"; then
		printf '| %s | quantize failed: %s |\n' "$g" "$(head -c 300 "$C/err.txt")"
		continue
	fi
	set -- $(feeds "$float" "$dir/ref/$base" "$dir/inputs/$base")
	ins=""
	for f in "$@"; do ins="$ins --input $f"; done
	gf=$(flops "$float")
	mod=$C/host/$g
	rm -rf "$mod"
	mkdir -p "$C/host"
	if ! "$W" "$m" --target host ${WFLAGS:-} -o "$mod" >"$C/compile.txt" 2>&1; then
		printf '| %s | compile failed: %s |\n' "$g" "$(grep -m1 error "$C/compile.txt" | head -c 300)"
		continue
	fi
	: > "$C/w.txt"; : > "$C/o.txt"
	fail=""
	for r in $(seq "$ROUNDS"); do
		rm -rf "$C/out-w" "$C/out-o"
		if ! "$W" run "$mod" $ins --output-dir "$C/out-w" --threads "$T" --reps "$REPS" >"$C/wrun.txt" 2>&1; then
			fail="wlower run failed: $(head -c 300 "$C/wrun.txt")"
			break
		fi
		sed -n 's/^median_ms=//p' "$C/wrun.txt" >> "$C/w.txt"
		if ! node tests/oracle/ort_run.js "$m" "$C/out-o" "$@" --threads "$T" --reps "$REPS" >"$C/orun.txt" 2>&1; then
			fail="ORT failed: $(head -c 300 "$C/orun.txt")"
			break
		fi
		sed -n 's/^median_ms=//p' "$C/orun.txt" >> "$C/o.txt"
	done
	if [ -n "$fail" ]; then
		printf '| %s | %s |\n' "$g" "$fail" | tr '\n' ' '
		echo
		continue
	fi
	w=$(med < "$C/w.txt"); o=$(med < "$C/o.txt")
	# each round's wlower/ORT (both measured back to back): the spread that
	# machine noise leaves on the ratio; "best" = the fastest round of wlower
	# over the fastest round of ORT (noise only ever adds time)
	rr=$(paste -d' ' "$C/w.txt" "$C/o.txt" | awk '{ r = $1 / $2; if (NR == 1 || r < lo) lo = r; if (NR == 1 || r > hi) hi = r
			if (NR == 1 || $1 < wb) wb = $1; if (NR == 1 || $2 < ob) ob = $2 }
		END { printf "%.2f-%.2fx (best %.2fx)", lo, hi, wb / ob }')
	# min PSNR over the outputs, token agreement, and compare.py's verdict at PSNR_MIN dB
	if $PY tests/oracle/compare.py "$C/out-o" "$C/out-w" --psnr "$PSNR_MIN" >"$C/cmp.txt" 2>&1; then verdict=ok; else verdict=FAIL; fi
	cmp=$(awk -v v="$verdict" '{ for (i = 1; i <= NF; i++) {
			if ($i ~ /^psnr=/) { x = substr($i, 6); if (x != "inf" && (m == "" || x + 0 < m)) m = x + 0 }
			if ($i ~ /^tokens=/) t = t " " substr($i, 8) " " $(i + 1) } }
		END { printf "%s: min PSNR %s dB, tokens%s", v, (m == "" ? "inf" : sprintf("%.1f", m)), (t == "" ? " -" : t) }' "$C/cmp.txt")
	awk -v g="$g" -v w="$w" -v o="$o" -v rr="$rr" -v f="$gf" -v p="$PEAK" -v c="$cmp" 'BEGIN {
		gw = f / (w * 1e6); go = f / (o * 1e6);
		printf "| %s | %.2f ms | %.2f ms | %.2fx | %s | %.2f | %.1f (%.0f%%) | %.1f (%.0f%%) | %s |\n",
			g, w, o, w / o, rr, f / 1e9, gw, (p > 0 ? 100 * gw / p : 0), go, (p > 0 ? 100 * go / p : 0), c }'
	if [ "$PROFILE_LINES" -gt 0 ]; then
		WLOWER_PROFILE=1 "$W" run "$mod" $ins --output-dir "$C/out-w" --threads "$T" --reps "$REPS" \
			>/dev/null 2>"$C/prof-$g.txt"
		PROFILES="$PROFILES $g"
	fi
done
for g in $PROFILES; do
	echo
	echo "## per-kernel profile: $g (WLOWER_PROFILE=1, $REPS runs)"
	if grep -q "^profile: by op type" "$C/prof-$g.txt"; then
		sed -n '1,/^profile: kernels/p' "$C/prof-$g.txt" | grep -v '^profile: kernels'
		grep -A "$PROFILE_LINES" '^profile: kernels' "$C/prof-$g.txt"
	else
		head -3 "$C/prof-$g.txt"
	fi
done
