#!/bin/sh
# import.sh [SIZE_MB] — import speed and memory of a Whisper-decoder-sized
# graph (bench/gen_big.py, default 200 MB), embedded and with external data.
# Prints wlower's --stats line for: import only (no passes, text summary to
# /dev/null) and import + export to binary. Peak RSS counts mapped file pages
# that were touched; "arena" is what the IR itself allocated.
set -eu
cd "$(dirname "$0")/.."
SIZE=${1:-200}
W=${WLOWER:-build/wlower}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
/usr/bin/python3 bench/gen_big.py --out "$T/big.onnx" --size-mb "$SIZE" >/dev/null
/usr/bin/python3 bench/gen_big.py --out "$T/ext.onnx" --size-mb "$SIZE" --external >/dev/null
echo "model: $(du -m "$T/big.onnx" | cut -f1) MB embedded; $(du -m "$T/ext.onnx.data" | cut -f1) MB external data"
for m in big ext; do
	for i in 1 2 3; do
		"$W" "$T/$m.onnx" --passes= --stats -o "$T/$m.txt" 2>&1 | sed "s/^/$m import+print #$i: /"
	done
	"$W" "$T/$m.onnx" --passes= --stats -o "$T/$m.out.onnx" 2>&1 | sed "s/^/$m import+export: /"
done
