#!/bin/sh
# whisper_beam.sh — the cost of `wlower transcribe --beam-size 5` against greedy decoding on the
# same pipeline (host), and against the oracle's ONNX Runtime beam search (tests/oracle/ort_whisper.js
# --beam-size 5, a cache grown by concatenation per hypothesis) on the same export and log-mel:
# a seeded Whisper-tiny Optimum export (4+4 layers, d 384, 30 s windows), one window of jfk.wav,
# both limited to the same tokens.
#   bench/whisper_beam.sh [WORK] [THREADS] [TOKENS]
# Prints uptime, the CPU, both reports (per stage; beam: hypothesis steps, cache forks with their
# megabytes and milliseconds) and the ORT beam loop's time; records nothing itself.
set -eu
cd "$(dirname "$0")/.."
W=${1:-/tmp/whisper-beam}
T=${2:-1}
N=${3:-32}
TOK=../shared/data/whisper/multilingual.tiktoken
mkdir -p "$W"
[ -f "$W/tiny/config.json" ] || /usr/bin/python3 examples/models/whisper.py --layout optimum --size tiny --out "$W/tiny"
[ -f "$W/pipe-host/pipeline.json" ] || build/wlower "$W/tiny" --pipeline whisper --target host -o "$W/pipe-host"
uptime
grep -m1 "model name" /proc/cpuinfo
for b in 1 5; do
	rm -rf "$W/dump-$b"
	echo "== wlower host, --beam-size $b"
	build/wlower transcribe ../shared/data/audio/jfk.wav --pipeline "$W/pipe-host" --tokenizer $TOK \
		--threads "$T" --max-tokens "$N" --beam-size $b --dump-logits "$W/dump-$b" -o "$W/beam$b.json" >/dev/null
done
echo "== ONNX Runtime beam search, beam 5"
node tests/oracle/ort_whisper.js "$W/tiny" --mel "$W/dump-5/mel_0.npy" --max-tokens "$N" --threads "$T" \
	--beam-size 5 > "$W/ort.ids"
/usr/bin/python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
ort = [int(x) for x in open(w + "/ort.ids").read().strip().split(",") if x]
j = json.load(open(w + "/beam5.json"))["report"]
ids = j["windows_sampled"][0]["tokens"]
ids = ids[:-1] if ids and ids[-1] == 50257 else ids
print("beam 5 window-0 ids equal ORT's beam search:", ids == ort, len(ids))
g = json.load(open(w + "/beam1.json"))["report"]
print("steps: greedy %.1f ms, beam %.1f ms (%.2fx); forks %d, %.1f MB, %.1f ms = %.2f%% of the beam's steps"
      % (g["steps_ms"], j["steps_ms"], j["steps_ms"] / g["steps_ms"], j["beam_forks"], j["beam_fork_mb"],
         j["beam_fork_ms"], 100 * j["beam_fork_ms"] / j["steps_ms"]))
PY
