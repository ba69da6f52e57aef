#!/bin/sh
# same_outputs.sh OLD_WLOWER NEW_WLOWER [WORKDIR] — proves that two wlower binaries
# (e.g. before and after a refactor) produce the same bytes on the full-size graphs of
# the main job (scripts/main_job.sh), bench/chimera.sh and bench/host_vs_ort.sh.
#
# Models (generated once into WORKDIR/models, default WORKDIR /tmp/wlower-same-outputs;
# reused when WORKDIR/models/done exists; delete that folder to regenerate):
#   whisper/       examples/models/whisper.py --size tiny, FULL size (4+4 layers, 3000 frames,
#                  vocab 51865): encoder_model, decoder_prefill, decoder_with_past, with --ref
#                  inputs (the first real log-mel of examples/models/samples.py --mels 1)
#   qwen2/         examples/models/qwen2.py --which single_token, FULL size (Qwen2-1.5B-shaped:
#                  hidden 1536, 1 layer + the 151936-wide LM head, 1.12 GB), --ref inputs and
#                  --samples 4 (calibration); it takes ~1.5 min, so no reduced variant is needed
#   q4/            the four graphs quantized by OLD: wlower quantize --nbits 4 --block-size 32
#   cal/, *.tranges  calibration as main_job.sh does it, by OLD: encoder.tranges from
#                  CAL_SAMPLES (default 8, as main_job.sh) log-mels; decoder.tranges (float
#                  decoder_prefill) from the prompts and the reference executor's 4-bit encoder
#                  outputs on the same mels; qwen2.tranges from qwen2.py's 4 samples
#   waveform.npy   [1,480000] float32 of CLIP (default ../shared/data/audio/jfk.wav);
#   input_ids.npy  the prompt [[50258, 50259, 50359, 50363]]
# The one-time generation took ~30 min on 2 cores at load 8-11 (whisper.py 3 min, qwen2.py
# 1.5 min, quantize 25 s, and 23 min of reference executor on the full encoder: calibrating
# it on 8 mels, then its outputs on them; CAL_SAMPLES=2 cuts that part by 4x).
#
# Then each binary, OLD first, into WORKDIR/old and WORKDIR/new (each with its own
# XDG_CACHE_HOME, WORKDIR/cache/old|new, kept between runs: the sim build cache is keyed
# by the content of module.cpp, the binary's own built-in CCL folder and g++; FRESH_CACHE=1
# empties it first), from the side folder as working directory and with model paths
# relative to it (so printed paths and manifest "model" are equal on both sides):
#   quantize/       wlower quantize of the 4 float graphs (the q4/ used below are OLD's)
#   qcp_encoder     q4 encoder --prepend-logmel --target qc-p --cores 4 --ocm 32MB --print-fracbits
#   qcp_decoder_prefill  float decoder_prefill --append-argmax, qc-p --cores 4 --ocm 32MB --print-fracbits
#   qcn_qwen2       q4 qwen2 single_token, qc-n --cores 1 --print-fracbits
#   sim_*           wlower sim of those three (encoder on waveform.npy; decoder on the prompt
#                   and the --ref encoder states; qwen2 on its --ref inputs): outputs .npy,
#                   counters.json, profile_core*.json, profile.svg
#   host_*          --target host of q4 encoder, decoder_prefill, decoder_with_past, qwen2
#                   (host_vs_ort.sh's graphs); run_host_*: wlower run DIR --threads 2 on --ref inputs
#   fused/*.onnx, fused/*.onnxtxt   --stop-after=fuse -o X.onnx and --emit onnx-text of each
#                   compiled graph with its fusion flags (encoder_logmel, decoder_prefill_argmax,
#                   encoder, decoder_prefill, decoder_with_past, qwen2)
#   ref_*           wlower run MODEL.onnx (reference executor, --threads 2) on the originals and
#                   on the fused graphs
#   log/STEP.{out,err,rc}  every command's stdout, stderr and exit status
#   (WORKDIR/times-SIDE.txt, not compared: seconds per step)
# A compile that fails on OLD is reported as "skipped (fails on OLD)" and its sim is not
# run (the failure's text and exit status are still compared). Today every graph compiles.
#
# Compared byte for byte with cmp, every file under old/ and new/ (a file on one side only
# is DIFFERENT). Masked before comparing (not deterministic by nature): manifest.json's
# "compile_ms"; in printed text "... in N ms ->" (compile time) and the sim's "building
# module..." lines (g++ time, or "(cached)"); the two binaries' paths and WORKDIR/old|new
# (none appear today). Everything else was byte-identical over 4 invocations of one binary
# (2 host threads, sim, reference executor; host modules are built for the machine's CPU,
# --cpu native, so both binaries must run on one machine, as they do here).
# Prints `same|DIFFERENT NAME` per artifact (228 today: 105 files + 41 steps x out/err/rc),
# then `same_outputs: N same, M different`; exit 0 only if all are the same (1 otherwise,
# 2 usage). One comparison pass (both binaries) takes 5-12 min on 2 cores depending on the
# load (~40% of it the reference executor on the encoder; a cold sim cache adds ~1 min).
#
# Usage: sh bench/same_outputs.sh OLD_WLOWER NEW_WLOWER [WORKDIR]
#   e.g. sh bench/same_outputs.sh /work/base/build/wlower build/wlower /work/same-out
# Environment: CLIP, CAL_SAMPLES (generation only), FRESH_CACHE=1, COMPARE_ONLY=1 (compare
# the old/ and new/ left by the previous run again, without running anything).
set -u
[ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: sh bench/same_outputs.sh OLD_WLOWER NEW_WLOWER [WORKDIR]" >&2; exit 2; }
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
PY=/usr/bin/python3
abspath() { (cd "$(dirname "$1")" 2>/dev/null && echo "$(pwd)/$(basename "$1")"); }
OLD=$(abspath "$1") && [ -x "$OLD" ] || { echo "same_outputs: $1: not an executable" >&2; exit 2; }
NEW=$(abspath "$2") && [ -x "$NEW" ] || { echo "same_outputs: $2: not an executable" >&2; exit 2; }
WORK=${3:-/tmp/wlower-same-outputs}
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
M=$WORK/models
CLIP=${CLIP:-$ROOT/../shared/data/audio/jfk.wav}
CAL_SAMPLES=${CAL_SAMPLES:-8}
T=2    # threads for wlower run (host modules and the reference executor)
now() { date +%s; }
die() { echo "same_outputs: $*" >&2; exit 1; }

# ------------------------------------------------------------------ models (once)
gen() {
	t0=$(now)
	echo "== generating models into $M (once) =="
	mkdir -p "$M"
	if [ ! -f "$M/mels1/mels.npy" ]; then
		$PY examples/models/samples.py --mels 1 --frames 3000 --out "$M/mels1" >/dev/null || die "samples.py --mels 1 failed"
	fi
	if [ ! -f "$M/whisper/done" ]; then
		echo "  whisper-tiny full size (~3 min)"
		rm -rf "$M/whisper"
		$PY examples/models/whisper.py --size tiny --out "$M/whisper" --ref "$M/whisper/ref" \
			--samples "$M/mels1/mels.npy" >"$M/whisper.log" 2>&1 || { tail -20 "$M/whisper.log"; die "whisper.py failed"; }
		touch "$M/whisper/done"
	fi
	if [ ! -f "$M/qwen2/done" ]; then
		echo "  qwen2 single_token full size (~1.5 min)"
		rm -rf "$M/qwen2"
		$PY examples/models/qwen2.py --which single_token --out "$M/qwen2" --ref "$M/qwen2/ref" \
			--samples 4 >"$M/qwen2.log" 2>&1 || { tail -20 "$M/qwen2.log"; die "qwen2.py failed"; }
		touch "$M/qwen2/done"
	fi
	mkdir -p "$M/q4"
	for g in encoder:whisper/encoder_model decoder_prefill:whisper/decoder_prefill \
		decoder_with_past:whisper/decoder_with_past qwen2:qwen2/single_token; do
		[ -f "$M/q4/${g%%:*}.onnx" ] ||
			"$OLD" quantize "$M/${g#*:}.onnx" --nbits 4 --block-size 32 -o "$M/q4/${g%%:*}.onnx" ||
			die "quantize ${g#*:} failed"
	done
	if [ ! -f "$M/cal/mels.npy" ]; then
		$PY examples/models/samples.py --mels "$CAL_SAMPLES" --frames 3000 --tokens "$CAL_SAMPLES" \
			--out "$M/cal" >/dev/null || die "samples.py failed"
	fi
	if [ ! -f "$M/encoder.tranges" ]; then
		echo "  calibrating the encoder on $CAL_SAMPLES mels (reference executor; ~75 s a mel on 2 busy cores)"
		"$OLD" calibrate "$M/q4/encoder.onnx" --samples input_features="$M/cal/mels.npy" -o "$M/encoder.tranges" ||
			die "calibrate encoder failed"
	fi
	if [ ! -f "$M/cal_hidden.npy" ]; then
		echo "  4-bit encoder outputs on the $CAL_SAMPLES mels (for the decoder's ranges, as main_job.sh)"
		$PY - "$OLD" "$M" <<'EOF' || die "cal_hidden failed"
import os, shutil, subprocess, sys
import numpy as np
w, m = sys.argv[1], sys.argv[2]
mels = np.load(os.path.join(m, "cal", "mels.npy"))
tmp = os.path.join(m, "cal_tmp")
os.makedirs(tmp, exist_ok=True)
hs = []
for i in range(len(mels)):
    np.save(os.path.join(tmp, "mel_i.npy"), mels[i:i + 1])
    subprocess.run([w, "run", os.path.join(m, "q4", "encoder.onnx"), "--input",
                    "input_features=" + os.path.join(tmp, "mel_i.npy"), "--output-dir",
                    os.path.join(tmp, "enc_i")], check=True)
    hs.append(np.load(os.path.join(tmp, "enc_i", "last_hidden_state.npy"))[0])
np.save(os.path.join(m, "cal_hidden.npy.tmp.npy"), np.stack(hs))
os.rename(os.path.join(m, "cal_hidden.npy.tmp.npy"), os.path.join(m, "cal_hidden.npy"))
shutil.rmtree(tmp)
EOF
	fi
	if [ ! -f "$M/decoder.tranges" ]; then
		"$OLD" calibrate "$M/whisper/decoder_prefill.onnx" --samples input_ids="$M/cal/input_ids.npy" \
			--samples encoder_hidden_states="$M/cal_hidden.npy" -o "$M/decoder.tranges" || die "calibrate decoder failed"
	fi
	if [ ! -f "$M/qwen2.tranges" ]; then
		S=$M/qwen2/samples/single_token
		"$OLD" calibrate "$M/q4/qwen2.onnx" --samples inputs_embeds="$S/inputs_embeds.npy" \
			--samples past_key_values.0.key="$S/past_key_values.0.key.npy" \
			--samples past_key_values.0.value="$S/past_key_values.0.value.npy" \
			--samples attention_mask="$S/attention_mask.npy" -o "$M/qwen2.tranges" || die "calibrate qwen2 failed"
	fi
	if [ ! -f "$M/waveform.npy" ] || [ ! -f "$M/input_ids.npy" ]; then
		[ -f "$CLIP" ] || die "no clip '$CLIP'"
		$PY - "$CLIP" "$M" <<'EOF' || die "waveform failed"
import sys, wave
import numpy as np
clip, m = sys.argv[1], sys.argv[2]
with wave.open(clip, "rb") as f:
    assert f.getnchannels() == 1 and f.getsampwidth() == 2 and f.getframerate() == 16000, clip
    pcm = np.frombuffer(f.readframes(f.getnframes()), dtype="<i2")
wav = np.zeros((1, 480000), np.float32)
n = min(480000, len(pcm))
wav[0, :n] = pcm[:n].astype(np.float32) / 32768.0
np.save(m + "/waveform.npy", wav)
np.save(m + "/input_ids.npy", np.array([[50258, 50259, 50359, 50363]], np.int64))
EOF
	fi
	touch "$M/done"
	echo "== models generated in $(($(now) - t0)) s =="
}
[ -f "$M/done" ] || gen

# ------------------------------------------------------------------ one side
# Runs from WORKDIR/SIDE; model paths are relative (../models/...).
R=../models/whisper/ref
Q=../models/qwen2/ref/single_token
ENC_IN="--input input_features=$R/encoder_model/input_features.npy"
LOGMEL_IN="--input waveform=../models/waveform.npy"
DEC_IN="--input input_ids=../models/input_ids.npy --input encoder_hidden_states=$R/decoder_prefill/encoder_hidden_states.npy"
DWP_IN="--input input_ids=$R/decoder_with_past/input_ids.npy"
for l in 0 1 2 3; do
	for kv in decoder.key decoder.value encoder.key encoder.value; do
		DWP_IN="$DWP_IN --input past_key_values.$l.$kv=$R/decoder_with_past/past_key_values.$l.$kv.npy"
	done
done
QWEN_IN="--input inputs_embeds=$Q/inputs_embeds.npy --input past_key_values.0.key=$Q/past_key_values.0.key.npy"
QWEN_IN="$QWEN_IN --input past_key_values.0.value=$Q/past_key_values.0.value.npy --input attention_mask=$Q/attention_mask.npy"

# step NAME CMD...: runs CMD, log/NAME.out, .err, .rc; returns CMD's status
# (sh has no locals: step's variables start with _)
step() {
	_s=$1
	shift
	_t=$(now)
	"$@" >"log/$_s.out" 2>"log/$_s.err"
	_rc=$?
	echo "$_rc" >"log/$_s.rc"
	echo "$(($(now) - _t)) s $_s" >>"$WORK/times-$SIDE.txt"
	[ "$_rc" = 0 ] || echo "  [$SIDE] $_s: exit $_rc: $(head -c 300 "log/$_s.err" | tr '\n' ' ')"
	return "$_rc"
}

side() {
	SIDE=$1
	W=$2
	t0=$(now)
	echo "== $SIDE: $W =="
	rm -rf "${WORK:?}/$SIDE"
	mkdir -p "$WORK/$SIDE/log" "$WORK/$SIDE/quantize" "$WORK/$SIDE/fused" "$WORK/cache/$SIDE"
	[ "${FRESH_CACHE:-0}" = 1 ] && rm -rf "${WORK:?}/cache/$SIDE" && mkdir -p "$WORK/cache/$SIDE"
	cd "$WORK/$SIDE" || die "cd $WORK/$SIDE"
	: >"$WORK/times-$SIDE.txt"
	export XDG_CACHE_HOME="$WORK/cache/$SIDE"
	unset WLOWER_CCL_DIR WLOWER_PROFILE

	# quantize (compared; the models used below are OLD's, in ../models/q4)
	step quantize_encoder "$W" quantize ../models/whisper/encoder_model.onnx --nbits 4 --block-size 32 -o quantize/encoder.onnx
	step quantize_decoder_prefill "$W" quantize ../models/whisper/decoder_prefill.onnx --nbits 4 --block-size 32 -o quantize/decoder_prefill.onnx
	step quantize_decoder_with_past "$W" quantize ../models/whisper/decoder_with_past.onnx --nbits 4 --block-size 32 -o quantize/decoder_with_past.onnx
	step quantize_qwen2 "$W" quantize ../models/qwen2/single_token.onnx --nbits 4 --block-size 32 -o quantize/qwen2.onnx

	# Chimera: compile, then simulate
	step qcp_encoder "$W" ../models/q4/encoder.onnx --tranges ../models/encoder.tranges --target qc-p --cores 4 \
		--ocm 32MB --prepend-logmel --print-fracbits -o qcp_encoder
	step qcp_decoder_prefill "$W" ../models/whisper/decoder_prefill.onnx --tranges ../models/decoder.tranges \
		--target qc-p --cores 4 --ocm 32MB --append-argmax --print-fracbits -o qcp_decoder_prefill
	step qcn_qwen2 "$W" ../models/q4/qwen2.onnx --tranges ../models/qwen2.tranges --target qc-n --cores 1 \
		--print-fracbits -o qcn_qwen2
	for s in qcp_encoder:"$LOGMEL_IN" qcp_decoder_prefill:"$DEC_IN" qcn_qwen2:"$QWEN_IN"; do
		mod=${s%%:*}
		if [ -f "$mod/manifest.json" ]; then
			# shellcheck disable=SC2086
			step "sim_$mod" "$W" sim "$mod" ${s#*:} --output-dir "sim_$mod"
		elif [ "$SIDE" = old ]; then
			echo "  skipped (fails on OLD): $mod and sim_$mod"
		fi
	done

	# host: compile and run
	for g in encoder:"$ENC_IN" decoder_prefill:"$DEC_IN" decoder_with_past:"$DWP_IN" qwen2:"$QWEN_IN"; do
		n=${g%%:*}
		if step "host_$n" "$W" "../models/q4/$n.onnx" --target host -o "host_$n"; then
			# shellcheck disable=SC2086
			step "run_host_$n" "$W" run "host_$n" ${g#*:} --output-dir "run_host_$n" --threads $T
		elif [ "$SIDE" = old ]; then
			echo "  skipped (fails on OLD): host_$n and run_host_$n"
		fi
	done

	# fused graphs (binary and text) and the reference executor on them and on the originals
	for f in encoder_logmel:../models/q4/encoder.onnx:--prepend-logmel:"$LOGMEL_IN" \
		decoder_prefill_argmax:../models/whisper/decoder_prefill.onnx:--append-argmax:"$DEC_IN" \
		encoder:../models/q4/encoder.onnx::"$ENC_IN" \
		decoder_prefill:../models/q4/decoder_prefill.onnx::"$DEC_IN" \
		decoder_with_past:../models/q4/decoder_with_past.onnx::"$DWP_IN" \
		qwen2:../models/q4/qwen2.onnx::"$QWEN_IN"; do
		n=${f%%:*}; r=${f#*:}; model=${r%%:*}; r=${r#*:}; flag=${r%%:*}; ins=${r#*:}
		# shellcheck disable=SC2086
		step "fuse_$n" "$W" "$model" $flag --stop-after=fuse -o "fused/$n.onnx" &&
			step "ref_fused_$n" "$W" run "fused/$n.onnx" $ins --output-dir "ref_fused_$n" --threads $T
		# shellcheck disable=SC2086
		step "fusetext_$n" "$W" "$model" $flag --stop-after=fuse --emit onnx-text -o "fused/$n.onnxtxt"
	done
	for g in encoder:../models/q4/encoder.onnx:"$ENC_IN" \
		decoder_prefill_float:../models/whisper/decoder_prefill.onnx:"$DEC_IN" \
		decoder_prefill:../models/q4/decoder_prefill.onnx:"$DEC_IN" \
		decoder_with_past:../models/q4/decoder_with_past.onnx:"$DWP_IN" \
		qwen2:../models/q4/qwen2.onnx:"$QWEN_IN"; do
		n=${g%%:*}; r=${g#*:}; model=${r%%:*}; ins=${r#*:}
		# shellcheck disable=SC2086
		step "ref_$n" "$W" run "$model" $ins --output-dir "ref_$n" --threads $T
	done
	cd "$ROOT" || exit 1
	echo "== $SIDE done in $(($(now) - t0)) s =="
}

t_all=$(now)
if [ "${COMPARE_ONLY:-0}" != 1 ]; then
	side old "$OLD"
	side new "$NEW"
fi

# ------------------------------------------------------------------ compare
# Text that is masked: see the header. Writes the masked copy to $2.
mask() {
	sed -e "s|$OLD|WLOWER|g; s|$NEW|WLOWER|g; s|$WORK/old|WORKDIR/SIDE|g; s|$WORK/new|WORKDIR/SIDE|g" \
		-e 's|\("compile_ms":[[:space:]]*\)[0-9][0-9]*|\1MASKED|' \
		-e 's| in [0-9][0-9]* ms -> | in MASKED ms -> |' \
		-e '/^building module/d' "$1" >"$2"
}
echo "== comparing $WORK/old and $WORK/new =="
NORM=$WORK/masked
rm -rf "$NORM"
mkdir -p "$NORM/old" "$NORM/new"
LIST=$WORK/artifacts.txt
( cd "$WORK/old" && find . -type f; cd "$WORK/new" && find . -type f ) | sed 's|^\./||' | LC_ALL=C sort -u >"$LIST"
nsame=0
ndiff=0
while IFS= read -r f; do
	a=$WORK/old/$f
	b=$WORK/new/$f
	if [ ! -f "$a" ]; then
		echo "DIFFERENT $f (only in new)"
		ndiff=$((ndiff + 1))
		continue
	fi
	if [ ! -f "$b" ]; then
		echo "DIFFERENT $f (only in old)"
		ndiff=$((ndiff + 1))
		continue
	fi
	case $f in
	*/manifest.json | log/*.out | log/*.err)
		k=$(echo "$f" | tr / _)
		mask "$a" "$NORM/old/$k"
		mask "$b" "$NORM/new/$k"
		a=$NORM/old/$k
		b=$NORM/new/$k
		;;
	esac
	if cmp -s "$a" "$b"; then
		echo "same $f"
		nsame=$((nsame + 1))
	else
		echo "DIFFERENT $f"
		ndiff=$((ndiff + 1))
	fi
done <"$LIST"
echo "(total $(($(now) - t_all)) s)"
echo "same_outputs: $nsame same, $ndiff different"
[ "$ndiff" = 0 ] && [ "$nsame" -gt 0 ]
