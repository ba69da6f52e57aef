#!/bin/sh
# whisper_vs_ort.sh — `wlower transcribe` on a seeded Whisper-tiny Optimum export (4+4 layers,
# 30 s windows) against the oracle's ONNX Runtime loop on the same export and the same log-mel,
# one window of jfk.wav (11 s), greedy with timestamps, both limited to the same tokens.
#   bench/whisper_vs_ort.sh [WORK] [THREADS]
# Prints uptime, the wlower report (per stage) and the ORT loop's times; records nothing itself.
set -eu
cd "$(dirname "$0")/.."
W=${1:-/tmp/whisper-bench}
T=${2:-1}
TOK=../shared/data/whisper/multilingual.tiktoken
mkdir -p "$W"
[ -f "$W/tiny/config.json" ] || /usr/bin/python3 examples/models/whisper.py --layout optimum --size tiny --out "$W/tiny"
for tg in ref host; do
	[ -f "$W/pipe-$tg/pipeline.json" ] || build/wlower "$W/tiny" --pipeline whisper --target $tg -o "$W/pipe-$tg"
done
uptime
grep -m1 "model name" /proc/cpuinfo
for tg in host ref; do
	rm -rf "$W/dump-$tg"
	build/wlower transcribe ../shared/data/audio/jfk.wav --pipeline "$W/pipe-$tg" --tokenizer $TOK \
		--threads "$T" --max-tokens 32 --dump-logits "$W/dump-$tg" -o "$W/$tg.json" >/dev/null
done
node tests/oracle/ort_whisper.js "$W/tiny" --mel "$W/dump-host/mel_0.npy" --max-tokens 32 --threads "$T" \
	--logits-dir "$W/ort" > "$W/ort.ids"
/usr/bin/python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
ort = [int(x) for x in open(w + "/ort.ids").read().strip().split(",") if x]
for tg in ("host", "ref"):
    j = json.load(open("%s/%s.json" % (w, tg)))
    ids = j["report"]["windows_sampled"][0]["tokens"]
    ids = ids[:-1] if ids and ids[-1] == 50257 else ids
    print(tg, "window-0 ids equal ORT:", ids == ort, len(ids))
PY
