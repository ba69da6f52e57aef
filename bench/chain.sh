#!/bin/sh
# chain.sh [N ...] — compile time of a chain of N elementwise nodes (bench/gen_chain.py:
# Mul and Add on float[1,64], two shared [64] weights) for --target host and --target
# qc-p (default N: 1000 10000 100000). Prints the CPU model and load first, then per
# compile the wall time, user+sys CPU time (steadier than wall on a shared machine)
# and peak RSS, and checks that the host module's output equals the reference's.
#   WLOWER=build-h/wlower bench/chain.sh 1000 10000
set -eu
cd "$(dirname "$0")/.."
W=${WLOWER:-build/wlower}
[ $# -gt 0 ] || set -- 1000 10000 100000
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
grep -m1 "model name" /proc/cpuinfo
echo "cores: $(nproc); $(uptime)"
for n in "$@"; do
	/usr/bin/python3 bench/gen_chain.py --nodes "$n" --out "$T/c.onnx" --input "$T/x.npy"
	"$W" calibrate "$T/c.onnx" --samples x="$T/x.npy" -o "$T/c.tranges" >/dev/null 2>&1
	for t in host qc-p; do
		rm -rf "$T/out"
		/usr/bin/time -f "%e %U %S %M" -o "$T/time" "$W" "$T/c.onnx" --tranges "$T/c.tranges" \
			--target "$t" -o "$T/out" >/dev/null 2>&1
		read -r wall user sys rss < "$T/time"
		cpu=$(echo "$user + $sys" | bc)
		printf '%-6s %7s nodes: wall %7.2f s  cpu %7.2f s  rss %5d MB\n' "$t" "$n" "$wall" "$cpu" $((rss / 1024))
		if [ "$t" = host ]; then
			"$W" run "$T/out" --input x="$T/x.npy" --output-dir "$T/rh" >/dev/null
			"$W" run "$T/c.onnx" --input x="$T/x.npy" --output-dir "$T/rr" >/dev/null
			cmp -s "$T/rh/y.npy" "$T/rr/y.npy" || { echo "host output differs from the reference" >&2; exit 1; }
			rm -rf "$T/rh" "$T/rr"
		fi
	done
done
