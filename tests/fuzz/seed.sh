#!/bin/sh
# seed.sh WLOWER OUTDIR — fuzz corpora from libonnx-testdata: the binary
# models (import/) and their textual form printed by wlower (text/).
set -eu
WLOWER=$1
OUT=$2
DATA=/usr/share/libonnx-testdata/data
[ -d "$DATA" ] || { echo "seed.sh: $DATA missing (apt-get install libonnx-testdata)" >&2; exit 1; }
mkdir -p "$OUT/import" "$OUT/text"
[ -n "$(ls -A "$OUT/import")" ] && exit 0
i=0
for m in "$DATA"/node/*/model.onnx "$DATA"/simple/*/model.onnx "$DATA"/pytorch-operator/*/model.onnx; do
	i=$((i + 1))
	cp "$m" "$OUT/import/$i.onnx"
	"$WLOWER" "$m" --passes=dce --emit onnx-text -o "$OUT/text/$i.onnxtxt" 2>/dev/null || true
done
