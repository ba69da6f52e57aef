#!/bin/sh
# llm_int8.sh — stories260K (real weights) int8 PTQ calibrated on generated text, on ref and
# qc-n (issue 12): how many of the 64 greedy ids from BOS equal the float model's (llama2.c
# run.c's, tests/oracle/stories260K_greedy.json), per quantization setting.
#
#   sh bench/llm_int8.sh [WLOWER] [WORKDIR] [TARGETS] [SETTINGS]
#   (TARGETS default: ref,qc-n; SETTINGS default: float,all,vo,l4)
#
# 1. examples/models/llama2c.py converts the checkpoint; examples/models/llama2c_samples.py
#    samples 4 stories of 64 ids from BOS with the float model (temperature 1, seeded) and writes
#    their activations as calibration samples.
# 2. For each setting, `wlower quantize --int8 --per-channel` of decoder_model and
#    decoder_with_past_model (RMSNorm, Add, Mul, Softmax, Sigmoid float; the attention-internal
#    MatMuls and the RoPE angle product float, so the attention fuses):
#      float  no quantization (the baseline of the cycles)
#      all    the 36 projections int8 (5 layers x q,k,v,o,gate,up,down + the LM head)
#      vo     v_proj and o_proj int8 (10), the rest float
#      l4     the last layer's 7 projections int8, the rest float
# 3. `--pipeline llm --max-seq 128` for each target (qc-n: 1 core, --calibrate with the prompts
#    of test_llm_qc.py for the ranges of the tensors that stay fixed point), `wlower generate
#    --prompt-ids 1 --max-new-tokens 64`; prints one row per setting and target: agreeing ids,
#    and for qc-n the simulated cycles per token and the saturated stores.
# 4. `wlower compare` float vs int8 ("all") decoder_model on the greedy text: the first tensor
#    below 25 dB SQNR and the logits' SQNR.
set -e
W=${1:-build/wlower}
C=${2:-/tmp/wlower-llm-int8-bench}
TARGETS=${3:-ref,qc-n}
SETTINGS=${4:-float,all,vo,l4}
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")/.." && pwd)
CKPT="$HERE/../shared/data/llama2c/stories260K.bin"
mkdir -p "$C"
export XDG_CACHE_HOME="$C/cache"
[ -f "$C/st/config.json" ] || $PY "$HERE/examples/models/llama2c.py" "$CKPT" --out "$C/st" >/dev/null 2>&1
[ -f "$C/cal/sequences.json" ] || $PY "$HERE/examples/models/llama2c_samples.py" "$CKPT" --out "$C/cal"
printf '1,403,407\n\n1,365,1\n' > "$C/prompts.txt"
WANT=$($PY -c "import json; print(','.join(map(str, json.load(open('$HERE/tests/oracle/stories260K_greedy.json'))['ids'])))")
proj() {   # the MatMul node names of projections $@ in every layer
	for i in 0 1 2 3 4; do for p in "$@"; do printf '/layers.%s/%s/MatMul,' $i $p; done; done
}
ATTN=/rotary/MatMul
for i in 0 1 2 3 4; do ATTN="$ATTN,/layers.$i/self_attn/MatMul,/layers.$i/self_attn/MatMul_1"; done
L03=$(for i in 0 1 2 3; do for p in self_attn/q_proj self_attn/k_proj self_attn/v_proj self_attn/o_proj \
	mlp/gate_proj mlp/up_proj mlp/down_proj; do printf '/layers.%s/%s/MatMul,' $i $p; done; done)
quantize() {   # $1 setting, $2 extra exclusions (comma-terminated or empty)
	Q="$C/q-$1"
	mkdir -p "$Q"
	cp "$C/st/config.json" "$Q/"
	S=""
	for f in "$C"/cal/prefill/*.npy; do S="$S --samples $(basename "$f" .npy)=$f"; done
	$W quantize "$C/st/decoder_model.onnx" --int8 --per-channel $S --exclude "$2$ATTN" \
		--exclude-op RMSNorm,Add,Mul,Softmax,Sigmoid -o "$Q/decoder_model.onnx" 2>/dev/null
	S=""
	for f in "$C"/cal/step/*.npy; do S="$S --samples $(basename "$f" .npy)=$f"; done
	$W quantize "$C/st/decoder_with_past_model.onnx" --int8 --per-channel $S --exclude "$2$ATTN" \
		--exclude-op RMSNorm,Add,Mul,Softmax,Sigmoid -o "$Q/decoder_with_past_model.onnx" 2>/dev/null
}
ln -sfn "$C/st" "$C/q-float"
quantize all ""
quantize vo "$(proj self_attn/q_proj self_attn/k_proj mlp/gate_proj mlp/up_proj mlp/down_proj)/lm_head/MatMul,"
quantize l4 "$L03/lm_head/MatMul,"
echo "| setting | target | int8 projections | ids equal to float (of 64) | cycles/token (qc) | saturated stores |"
echo "|---|---|---|---|---|---|"
for s in $(echo "$SETTINGS" | tr , ' '); do
	for t in $(echo "$TARGETS" | tr , ' '); do
		P="$C/pipe-$s-$t"
		rm -rf "$P"
		case $t in
		qc-*) $W "$C/q-$s" --pipeline llm --target "$t" --cores 1 --max-seq 128 --calibrate "$C/prompts.txt" -o "$P" 2>/dev/null ;;
		*) $W "$C/q-$s" --pipeline llm --target "$t" --max-seq 128 -o "$P" 2>/dev/null ;;
		esac
		$W generate --pipeline "$P" --prompt-ids 1 --max-new-tokens 64 --json "$C/gen-$s-$t.json" >/dev/null 2>"$C/gen-$s-$t.err"
		$PY - "$C/gen-$s-$t.json" "$P/pipeline.json" "$WANT" "$s" "$t" <<'EOF'
import json, sys
g, pj, want, s, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3], sys.argv[4], sys.argv[5]
want = [int(x) for x in want.split(",")]
ids = g["ids"]
n = next((i for i in range(64) if ids[i] != want[i]), 64)
ops = {p["name"]: p["op_counts"] for p in pj["programs"]}
nq = ops["step"].get("ai.wlower.QMatMul", 0) + ops["lm_head"].get("ai.wlower.QMatMul", 0)
sim = g["report"].get("sim") or {}
sat = sum(p.get("saturated", 0) for p in sim.get("programs") or [])
print("| %s | %s | %d of 36 | %d | %s | %s |" % (s, t, nq, n, "%.0f" % sim["cycles_per_token"] if sim else "-",
                                             sat if sim else "-"))
EOF
	done
done
$PY -c "
import numpy as np, json
w = [1] + json.load(open('$HERE/tests/oracle/stories260K_greedy.json'))['ids'][:63]
np.save('$C/ids.npy', np.array([w], np.int64)); np.save('$C/mask.npy', np.ones((1, 64), np.int64))
np.save('$C/pos.npy', np.arange(64, dtype=np.int64)[None])"
$W compare "$C/st/decoder_model.onnx" "$C/q-all/decoder_model.onnx" --input input_ids="$C/ids.npy" \
	--input attention_mask="$C/mask.npy" --input position_ids="$C/pos.npy" --json "$C/compare.json" > "$C/compare.txt"
$PY - "$C/compare.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {x["name"]: x for x in d["tensors"]}
f = rows[d["first_below"]]
print("compare float vs int8 (all), decoder_model on the greedy text: first below %g dB: %s (%s) %.1f dB; "
      "logits %.1f dB" % (d["threshold_db"], f["name"], f["op"], f["sqnr_db"], rows["logits"]["sqnr_db"]))
EOF
