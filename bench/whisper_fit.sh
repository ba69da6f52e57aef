#!/bin/sh
# whisper_fit.sh — fit the Whisper fixture (examples/models/whisper_fit.py), report its time and
# top-1/top-2 gap statistics, then transcribe the bundled clips with it on the host target.
#   bench/whisper_fit.sh [WORK] [--fast]
# Prints uptime, the fit's wall/CPU time and "wlower_fit" statistics (config.json), and the
# transcripts (tests/oracle/test_whisper_pipeline.py checks them against ../shared/data/README.md
# for --fast); records nothing itself.
set -eu
cd "$(dirname "$0")/.."
W=${1:-/tmp/whisper-fit-bench}
shift || true
TOK=../shared/data/whisper/multilingual.tiktoken
mkdir -p "$W"
grep -m1 "model name" /proc/cpuinfo
uptime
/usr/bin/time -f "fit: %e s wall, %U s user, %S s sys, %M KB max RSS" \
	/usr/bin/python3 examples/models/whisper_fit.py "$W/model" "$@" 2>&1 | grep -v -e Warning -e make_causal_mask
/usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))["wlower_fit"]
print(json.dumps({k: c[k] for k in ("steps", "examples", "candidates", "copies_per_window", "gap_all_copies",
                                     "clean_full_vocab", "seconds")}, indent=1))' "$W/model/config.json"
uptime
rm -rf "$W/pipe-host"
build/wlower "$W/model" --pipeline whisper --target host -o "$W/pipe-host"
for clip in jfk.wav 1272-141231-0002.wav; do
	build/wlower transcribe "../shared/data/audio/$clip" --pipeline "$W/pipe-host" --tokenizer "$TOK" --threads 1
done
uptime
