#!/bin/sh
# whisper_qc.sh — simulated real-time factor of Whisper-tiny (seeded, full size: 4+4 layers,
# d 384, 6 heads, 30 s windows of 3000 mel frames, 448 text positions, 51865 ids) on qc-p x4,
# 32 MB OCM (the vendor's configuration), transcribing ../shared/data/audio/jfk.wav.
#
#   sh bench/whisper_qc.sh [WLOWER] [WORKDIR] [TARGET]
#
# 1. examples/models/whisper.py --size tiny --layout optimum (seeded weights: greedy decoding of
#    a seeded decoder does not end early, so every window decodes --max-tokens tokens).
# 2. `--pipeline whisper --target qc-p --cores 4 --ocm 32MB --calibrate` on the LibriSpeech clip
#    (not the transcribed one): every program (mel, encoder, cross_kv, step) on Chimera.
# 3. `wlower transcribe jfk.wav --max-tokens 32 -o out.json`: the simulated report (cycles per
#    program, per window, per token, RTF = simulated seconds / audio seconds at the clock), then
#    the window-0 ids and per-step logits against ONNX Runtime's loop (tests/oracle/ort_whisper.js)
#    on the same export fed the same log-mel.
# Prints the figures for bench/RESULTS.md.
set -e
W=${1:-build/wlower}
C=${2:-/tmp/wlower-whisper-qc-bench}
T=${3:-qc-p}
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")/.." && pwd)
DATA="$HERE/../shared/data"
mkdir -p "$C"
export XDG_CACHE_HOME="$C/cache"
E="$C/tiny"
if [ ! -f "$E/config.json" ]; then
	$PY "$HERE/examples/models/whisper.py" --size tiny --layout optimum --out "$E" >/dev/null
fi
P="$C/pipe-$T"
if [ ! -f "$P/pipeline.json" ]; then
	/usr/bin/time -f "compile + calibrate: %e s, %M KiB" "$W" "$E" --pipeline whisper --target "$T" --cores 4 \
		--ocm 32MB --calibrate "$DATA/audio/1272-141231-0002.wav" -o "$P"
fi
rm -rf "$C/dump"
/usr/bin/time -f "transcribe: %e s, %M KiB" "$W" transcribe "$DATA/audio/jfk.wav" --pipeline "$P" \
	--tokenizer "$DATA/whisper/multilingual.tiktoken" --max-tokens 32 --dump-logits "$C/dump" \
	-o "$C/out.json" 2>"$C/transcribe.err" || { cat "$C/transcribe.err"; exit 1; }
grep -v '^  \|^Configuration\|^Report\|^TotalCycles' "$C/transcribe.err"
rm -rf "$C/ort"
node "$HERE/tests/oracle/ort_whisper.js" "$E" --mel "$C/dump/mel_0.npy" --max-tokens 32 --logits-dir "$C/ort" \
	--threads 1 >"$C/ort.ids"
$PY - "$C" <<'PYEOF'
import json, os, sys
import numpy as np
c = sys.argv[1]
rep = json.load(open(os.path.join(c, "out.json")))["report"]
got = rep["windows_sampled"][0]["tokens"]
got = got[:-1] if got and got[-1] == 50257 else got
want = [int(x) for x in open(os.path.join(c, "ort.ids")).read().strip().split(",") if x]
worst = float("inf")
for n in sorted(os.listdir(os.path.join(c, "ort"))):
    a = np.load(os.path.join(c, "ort", n)).astype(np.float64)
    b = np.load(os.path.join(c, "dump", n)).astype(np.float64)
    mse = np.mean((a - b) ** 2)
    worst = min(worst, float("inf") if mse == 0 else 10 * np.log10(np.max(np.abs(a)) ** 2 / mse))
s = rep["sim"]
print("window-0 ids equal ONNX Runtime's loop: %s (%d ids); worst per-step logits PSNR %.1f dB" %
      (got == want, len(want), worst))
print("sim: %.4f ms/window (mel+encoder), %.4f ms/token, %.1f tokens/s, %.4f s for %.2f s audio: RTF %.4f" %
      (s["ms_per_window"], s["ms_per_token"], s["tokens_per_s"], s["seconds"], rep["audio_s"], s["rtf"]))
for p in s["programs"]:
    print("  %-8s %-4s %12s cycles/run %5d runs saturated %s" % (p["name"], p["runner"], p.get("cycles_per_run", "-"),
          p["runs"], p.get("saturated", "-")))
PYEOF
