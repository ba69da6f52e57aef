#!/bin/sh
# whisper_lmq8.sh — --precision fp32dec-lmq8 against the float pipeline on the fitted Whisper
# fixture, one target: transcripts, ids, logits PSNR, LM-head and embedding bytes.
#
#   sh bench/whisper_lmq8.sh [WLOWER] [WORKDIR] [TARGET] [MODEL_DIR] [CLIPS]
#
# MODEL_DIR: a fitted export (examples/models/whisper_fit.py OUT, the full Whisper-tiny fit takes
# about 15 min); default WORKDIR/fitted, made with whisper_fit.py --fast when missing.
# TARGET: host (default), ref or qc-p (x4, 32 MB, fp16 attention, as test_whisper_pipeline.py).
# CLIPS: "jfk libri long" (default; long = jfk cut to 11.00 s + the LibriSpeech clip padded to
# 13.34 s + the jfk cut, two windows) or a subset.
# Both pipelines are calibrated on the same clip (3..5 s of jfk.wav at 0.8 gain, none of the
# transcribed clips): the float one needs it on qc-p only (ranges), lmq8 on every target (the LM
# head's input scale and zero point). For each clip: the text of each pipeline, whether the
# sampled ids are equal, and the PSNR of every step's logits (lmq8 vs float: min and median).
# Prints the figures for bench/RESULTS.md (with the CPU model and uptime).
set -e
W=${1:-build/wlower}
C=${2:-/tmp/wlower-lmq8-bench}
T=${3:-host}
M=${4:-$C/fitted}
CLIPS=${5:-jfk libri long}
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")/.." && pwd)
DATA="$HERE/../shared/data"
TOK="$DATA/whisper/multilingual.tiktoken"
mkdir -p "$C"
export XDG_CACHE_HOME="$C/cache"
grep -m1 "model name" /proc/cpuinfo
grep -m1 -E "^cpu family" /proc/cpuinfo
grep -m1 -E "^model\s" /proc/cpuinfo
uptime
if [ ! -f "$M/config.json" ]; then
	$PY "$HERE/examples/models/whisper_fit.py" "$M" --fast >/dev/null
fi
$PY - "$C" "$DATA" <<'EOF'
import sys, wave, numpy as np
C, D = sys.argv[1], sys.argv[2]
def rd(p):
    with wave.open(p, "rb") as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
def wr(p, x):
    with wave.open(p, "wb") as w:
        w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000); w.writeframes(x.astype("<i2").tobytes())
j, l = rd(D + "/audio/jfk.wav"), rd(D + "/audio/1272-141231-0002.wav")
wr(C + "/cal.wav", (j[48000:80000].astype(np.float64) * 0.8).astype(np.int16))
a, b = j[:176000], np.concatenate([l, np.zeros(-len(l) % 320, np.int16)])
wr(C + "/long.wav", np.concatenate([a, b, a]))
EOF
HW=""
[ "$T" = "qc-p" ] && HW="--cores 4 --ocm 32MB --fp16-attention"
for P in fp32 fp32dec-lmq8; do
	rm -rf "$C/pipe-$T-$P"
	CAL="--calibrate $C/cal.wav"
	[ "$P" = fp32 ] && [ "$T" != qc-p ] && CAL=""
	/usr/bin/time -f "compile $P: %e s wall, %U s user" "$W" "$M" --pipeline whisper --target "$T" $HW \
		--precision "$P" $CAL -o "$C/pipe-$T-$P"
done
for c in $CLIPS; do
	case $c in
	jfk) A="$DATA/audio/jfk.wav" ;;
	libri) A="$DATA/audio/1272-141231-0002.wav" ;;
	long) A="$C/long.wav" ;;
	esac
	for P in fp32 fp32dec-lmq8; do
		rm -rf "$C/dump-$c-$P"
		/usr/bin/time -f "transcribe $c $P: %e s wall" "$W" transcribe "$A" --pipeline "$C/pipe-$T-$P" \
			--tokenizer "$TOK" --threads 1 --dump-logits "$C/dump-$c-$P" -o "$C/$c-$P.json" 2>&1 |
			grep -E "^\[|transcribe|error|per token|real-time factor" || true
	done
done
$PY - "$C" "$T" "$M" $CLIPS <<'EOF'
import json, os, sys, numpy as np
C, T, M, clips = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def psnr(r, g):
    r, g = r.astype(np.float64), g.astype(np.float64)
    e = np.mean((r - g) ** 2)
    return float("inf") if e == 0 else 10 * np.log10(np.max(np.abs(r)) ** 2 / e)
pj = json.load(open(os.path.join(C, "pipe-%s-fp32dec-lmq8" % T, "pipeline.json")))
pr = pj["precision"]
h, e = pr["lm_head"], pr["embedding_table"]
print("lmq8 facts: clips %s, %d vectors, input range [%.4f, %.4f], scale %.6g, zero point %d" % (
    h["calibration_clips"], h["calibration_vectors"], h["input_range"][0], h["input_range"][1], h["input_scale"],
    h["input_zero_point"]))
print("LM head weight bytes %d (float %d: %.4f); embedding table %d bytes (float %d: %.4f)" % (
    h["weight_bytes"], h["float_weight_bytes"], h["weight_bytes"] / h["float_weight_bytes"], e["bytes"],
    e["float_bytes"], e["bytes"] / e["float_bytes"]))
for P in ("fp32", "fp32dec-lmq8"):
    wb = os.path.join(C, "pipe-%s-%s" % (T, P), "step", "weights.bin")
    if os.path.exists(wb):
        print("step weights.bin %s: %d bytes" % (P, os.path.getsize(wb)))
for c in clips:
    js = [json.load(open(os.path.join(C, "%s-%s.json" % (c, P)))) for P in ("fp32", "fp32dec-lmq8")]
    texts = [" ".join(s["text"].strip() for s in j["segments"]) for j in js]
    ids = [j["report"]["windows_sampled"] for j in js]
    fd, qd = (os.path.join(C, "dump-%s-%s" % (c, P)) for P in ("fp32", "fp32dec-lmq8"))
    names = sorted(n for n in os.listdir(qd) if n.startswith("step_") and os.path.exists(os.path.join(fd, n)))
    ps = [psnr(np.load(os.path.join(fd, n)), np.load(os.path.join(qd, n))) for n in names]
    print("%s: text %s, ids %s, logits lmq8 vs fp32 over %d steps: min %.1f dB, median %.1f dB" % (
        c, "equal" if texts[0] == texts[1] else "DIFFERENT", "equal" if ids[0] == ids[1] else "DIFFERENT",
        len(ps), min(ps) if ps else float("nan"), float(np.median(ps)) if ps else float("nan")))
    if texts[0] != texts[1]:
        print("  fp32: %s\n  lmq8: %s" % (texts[0], texts[1]))
EOF
uptime
