#!/bin/sh
# llm_qc.sh — simulated token generation of a Qwen2-1.5B-shaped single decoder layer
# (hidden 1536, 12 heads, 2 KV heads, head_dim 128, FFN 8960, vocab 151936, RoPE at run
# time) on qc-n and qc-u: `wlower generate` on the emulator, the vendor's per-run table.
#
#   sh bench/llm_qc.sh [WLOWER] [WORKDIR]
#
# 1. examples/models/hf_llama.py --arch qwen2 --layers 1 ... at vocab 1000 (torch 1.13 takes
#    minutes to fold and serialize a 933 MB initializer, and two of them pass protobuf's 2 GB),
#    then the embedding table and the LM head are replaced by full-size 151936-row ones drawn
#    the way hf_llama.py draws them (N(0, 0.02); the head's frequent rows boosted) and written
#    with external data; the logits dim and config.json follow.
# 2. `wlower quantize` 4-bit, block 32 (both graphs).
# 3. `--pipeline llm --max-seq 16` (the vendor's single-token graph has 15 past rows):
#    qc-n with --calibrate (two prompts, not the test's), qc-u with --tranges from it.
# 4. `wlower generate --prompt-ids 1,5,9 --max-new-tokens 8 --json` on each; ids and per-step
#    logits against ONNX Runtime's greedy loop (tests/oracle/ort_generate.js) on the same
#    4-bit export.
# Prints the table rows for bench/RESULTS.md. Needs ~6 GB of RAM and ~4 GB of disk.
set -e
W=${1:-build/wlower}
C=${2:-/tmp/wlower-llm-qc-bench}
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$C"
export XDG_CACHE_HOME="$C/cache"
F="$C/qwen2-1layer"
if [ ! -f "$F/done" ]; then
	rm -rf "$F"
	$PY "$HERE/examples/models/hf_llama.py" --arch qwen2 --layers 1 --hidden 1536 --heads 12 --kv-heads 2 \
		--ffn 8960 --vocab 1000 --max-pos 4096 --rope runtime --mask expanded --out "$F" 2>/dev/null
	$PY - "$F" "$HERE/examples/models" <<'EOF'
import json, os, sys
sys.path.insert(0, sys.argv[2])
import numpy as np, onnx
from onnx import numpy_helper
import common
d, V, seed = sys.argv[1], 151936, 0
emb = common.normal(seed, "model.embed_tokens.weight", (V, 1536), 0.02)
head = common.normal(seed, "lm_head.weight", (V, 1536), 0.02)
common.boost_rows(head, seed, common.frequent_token_ids(seed, V, 300))
for g in ("decoder_model", "decoder_with_past_model"):
    p = os.path.join(d, g + ".onnx")
    m = onnx.load(p)
    for i, t in enumerate(m.graph.initializer):
        dims = list(t.dims)
        if dims == [1000, 1536]:
            new = numpy_helper.from_array(emb, t.name)
        elif dims == [1536, 1000]:
            new = numpy_helper.from_array(np.ascontiguousarray(head.T), t.name)
        else:
            continue
        m.graph.initializer[i].CopyFrom(new)
    for v in list(m.graph.output) + list(m.graph.value_info):
        for dim in v.type.tensor_type.shape.dim:
            if dim.HasField("dim_value") and dim.dim_value == 1000:
                dim.dim_value = V
    onnx.save_model(m, p + ".tmp", save_as_external_data=True, all_tensors_to_one_file=True,
                    location=g + ".onnx.data", size_threshold=1024)
    os.replace(p + ".tmp", p)
c = json.load(open(os.path.join(d, "config.json")))
c["vocab_size"] = V
json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=2)
EOF
	touch "$F/done"
fi
Q="$C/qwen2-1layer-4bit"
if [ ! -f "$Q/done" ]; then
	rm -rf "$Q"
	mkdir -p "$Q"
	cp "$F/config.json" "$Q/"
	for g in decoder_model decoder_with_past_model; do
		$W quantize "$F/$g.onnx" -o "$Q/$g.onnx" --nbits 4 --block-size 32 2>&1 | tail -1
	done
	touch "$Q/done"
fi
printf '1,100,200\n1,7,3,12\n' > "$C/prompts.txt"
node "$HERE/tests/oracle/ort_generate.js" "$Q" --prompt-ids 1,5,9 --max-new-tokens 8 --threads 2 \
	--logits-dir "$C/ort-logits" > "$C/ort-ids.txt"
echo "ORT ids: $(cat "$C/ort-ids.txt")"
for T in qc-n qc-u; do
	P="$C/pipe-$T"
	if [ $T = qc-n ]; then R="--calibrate $C/prompts.txt"; else R="--tranges $C/pipe-qc-n"; fi
	/usr/bin/time -f "compile $T: %e s wall, %M kB max RSS" $W "$Q" --pipeline llm --target $T --max-seq 16 $R -o "$P"
	rm -rf "$C/logits-$T"
	/usr/bin/time -f "generate $T: %e s wall, %M kB max RSS" $W generate --pipeline "$P" --prompt-ids 1,5,9 \
		--max-new-tokens 8 --ignore-eos --json "$C/gen-$T.json" --dump-logits "$C/logits-$T" > "$C/ids-$T.txt" \
		2> "$C/report-$T.txt" || { cat "$C/report-$T.txt"; exit 1; }
	cat "$C/report-$T.txt"
	echo "$T ids: $(cat "$C/ids-$T.txt") (ORT: $(cat "$C/ort-ids.txt"))"
	$PY "$HERE/tests/oracle/compare.py" "$C/ort-logits" "$C/logits-$T" --psnr 40 | sort -t= -k2 -n | head -1
done
