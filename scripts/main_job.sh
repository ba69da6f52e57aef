#!/bin/sh
# main_job.sh — the main job (issue 5): Whisper-tiny, waveform to token ids, on a
# simulated Chimera QC-P with 4 cores and 32 MB OCM, as the vendor's notebook does it.
#
#   1. generate the example Whisper-tiny graphs (seeded weights; examples/models/whisper.py:
#      full size, 4+4 layers, 3000 frames, vocab 51865), quantize the encoder to 4 bits
#      (MatMulNBits, block 32; the decoder stays float, as the vendor's);
#   2. calibrate on a few real samples (examples/models/samples.py: log-mels of the bundled
#      clips and augmentations; decoder ranges from the float encoder's outputs on them);
#   3. compile the encoder with --prepend-logmel (input: the 16 kHz waveform) and
#      decoder_prefill with --append-argmax (output: token ids) for qc-p, 4 cores, 32 MB;
#   4. simulate the encoder on a clip from ../shared/data/audio, feed its hidden states to
#      the simulated decoder; print both reports and the token ids (and, for comparison,
#      the float reference executor's ids on the same clip).
#
# Usage: sh scripts/main_job.sh [CLIP.wav] [WORKDIR]
#   defaults: ../shared/data/audio/jfk.wav, /tmp/wlower-main-job; BUILD=build.
# Generating the graphs takes 1-2 minutes (Debian's torch); later runs reuse them.
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) W="$BUILD/wlower" ;; *) W="$ROOT/$BUILD/wlower" ;; esac
PY=/usr/bin/python3
CLIP=${1:-$ROOT/../shared/data/audio/jfk.wav}
WORK=${2:-/tmp/wlower-main-job}
HW="--cores 4 --ocm 32MB"
mkdir -p "$WORK"
[ -x "$W" ] || { echo "main_job: $W not built (run sh scripts/setup.sh first)" >&2; exit 1; }
[ -f "$CLIP" ] || { echo "main_job: no clip '$CLIP'" >&2; exit 1; }

step() { echo; echo "== $* =="; }

step "1. Whisper-tiny graphs (seeded) -> $WORK/whisper"
if [ ! -f "$WORK/whisper/decoder_prefill.onnx" ]; then
	echo "  (1-2 minutes with Debian's torch; log: $WORK/generate.log)"
	$PY examples/models/whisper.py --size tiny --which encoder,decoder_prefill --out "$WORK/whisper.tmp" \
		>"$WORK/generate.log" 2>&1 || { tail -20 "$WORK/generate.log"; exit 1; }
	rm -rf "$WORK/whisper" && mv "$WORK/whisper.tmp" "$WORK/whisper"
fi
[ -f "$WORK/encoder_4bit.onnx" ] ||
	"$W" quantize "$WORK/whisper/encoder_model.onnx" --nbits 4 --block-size 32 -o "$WORK/encoder_4bit.onnx"
ls -l "$WORK/whisper/encoder_model.onnx" "$WORK/encoder_4bit.onnx" "$WORK/whisper/decoder_prefill.onnx" | awk '{print "  " $5 " B  " $9}'

step "2. calibration (8 samples: the bundled clips and augmentations)"
if [ ! -f "$WORK/cal/mels.npy" ]; then
	$PY examples/models/samples.py --mels 8 --frames 3000 --tokens 8 --out "$WORK/cal"
fi
"$W" calibrate "$WORK/encoder_4bit.onnx" --samples input_features="$WORK/cal/mels.npy" -o "$WORK/encoder.tranges"
# decoder ranges from the float encoder's outputs on the same samples (the vendor's way)
$PY - "$W" "$WORK" <<'EOF'
import os, subprocess, sys
import numpy as np
w, work = sys.argv[1], sys.argv[2]
mels = np.load(os.path.join(work, "cal", "mels.npy"))
hs = []
for i in range(len(mels)):
    np.save(os.path.join(work, "mel_i.npy"), mels[i:i + 1])
    subprocess.run([w, "run", os.path.join(work, "encoder_4bit.onnx"), "--input",
                    "input_features=" + os.path.join(work, "mel_i.npy"), "--output-dir",
                    os.path.join(work, "float_enc_i")], check=True)
    hs.append(np.load(os.path.join(work, "float_enc_i", "last_hidden_state.npy"))[0])
np.save(os.path.join(work, "cal_hidden.npy"), np.stack(hs))
EOF
"$W" calibrate "$WORK/whisper/decoder_prefill.onnx" --samples input_ids="$WORK/cal/input_ids.npy" \
	--samples encoder_hidden_states="$WORK/cal_hidden.npy" -o "$WORK/decoder.tranges"

step "3. compile for qc-p x4, 32 MB OCM"
"$W" "$WORK/encoder_4bit.onnx" --tranges "$WORK/encoder.tranges" --target qc-p $HW --prepend-logmel \
	--print-fracbits -o "$WORK/encoder_qcp"
"$W" "$WORK/whisper/decoder_prefill.onnx" --tranges "$WORK/decoder.tranges" --target qc-p $HW --append-argmax \
	-o "$WORK/decoder_qcp"

step "4. simulate on $(basename "$CLIP")"
$PY - "$CLIP" "$WORK" <<'EOF'
import sys, wave
import numpy as np
clip, work = sys.argv[1], sys.argv[2]
with wave.open(clip, "rb") as f:
    assert f.getnchannels() == 1 and f.getsampwidth() == 2 and f.getframerate() == 16000, clip
    pcm = np.frombuffer(f.readframes(f.getnframes()), dtype="<i2")
wav = np.zeros((1, 480000), np.float32)
n = min(480000, len(pcm))
wav[0, :n] = pcm[:n].astype(np.float32) / 32768.0
np.save(work + "/waveform.npy", wav)
np.save(work + "/input_ids.npy", np.array([[50258, 50259, 50359, 50363]], np.int64))
print("  waveform [1, 480000] float32 from %s (%.2f s)" % (clip, len(pcm) / 16000))
EOF
echo
echo "-- encoder (waveform -> log-mel -> 4 layers) --"
"$W" sim "$WORK/encoder_qcp" --input waveform="$WORK/waveform.npy" --output-dir "$WORK/sim_encoder"
echo
echo "-- decoder prefill (prompt + simulated hidden states -> token ids) --"
"$W" sim "$WORK/decoder_qcp" --input input_ids="$WORK/input_ids.npy" \
	--input encoder_hidden_states="$WORK/sim_encoder/last_hidden_state.npy" --output-dir "$WORK/sim_decoder"

# the float reference executor on the same clip, for comparison
"$W" "$WORK/encoder_4bit.onnx" --prepend-logmel --stop-after=fuse -o "$WORK/encoder_logmel.onnx" 2>/dev/null
"$W" "$WORK/whisper/decoder_prefill.onnx" --append-argmax --stop-after=fuse -o "$WORK/decoder_argmax.onnx" 2>/dev/null
"$W" run "$WORK/encoder_logmel.onnx" --input waveform="$WORK/waveform.npy" --output-dir "$WORK/float_encoder" 2>/dev/null
"$W" run "$WORK/decoder_argmax.onnx" --input input_ids="$WORK/input_ids.npy" \
	--input encoder_hidden_states="$WORK/float_encoder/last_hidden_state.npy" --output-dir "$WORK/float_decoder" 2>/dev/null

step "token ids"
$PY - "$WORK" "$ROOT/../shared/data/whisper/multilingual.tiktoken" <<'EOF'
import base64, os, sys
import numpy as np
work, tok = sys.argv[1], sys.argv[2]
vocab = {}
if os.path.exists(tok):
    for line in open(tok, "rb"):
        b, r = line.split()
        vocab[int(r)] = base64.b64decode(b)
special = {50257: "<|endoftext|>", 50258: "<|startoftranscript|>", 50259: "<|en|>", 50359: "<|transcribe|>",
           50363: "<|notimestamps|>"}
def text(ids):
    return "".join(special.get(i) or vocab.get(i, b"?").decode("utf-8", "replace") for i in ids)
prompt = np.load(work + "/input_ids.npy")[0].tolist()
sim = np.load(work + "/sim_decoder/token_ids.npy")[0].tolist()
ref = np.load(work + "/float_decoder/token_ids.npy")[0].tolist()
h_s = np.load(work + "/sim_encoder/last_hidden_state.npy").astype(np.float64)
h_f = np.load(work + "/float_encoder/last_hidden_state.npy").astype(np.float64)
mse = np.mean((h_s - h_f) ** 2)
print("prompt                 %s" % prompt)
print("simulated (qc-p x4)    %s  %r" % (sim, text(sim)))
print("float reference        %s  %r  (%s)" % (ref, text(ref), "equal" if sim == ref else "DIFFERENT"))
print("encoder output, simulated vs float reference: PSNR %.2f dB, MSE %.3g"
      % (10 * np.log10(np.max(np.abs(h_f)) ** 2 / mse) if mse else float("inf"), mse))
print("(seeded weights, not trained ones: the ids are the model's greedy choices, not a transcript)")
EOF
