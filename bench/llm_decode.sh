#!/bin/sh
# llm_decode.sh — the LLM pipeline (`wlower generate`, host target) against ONNX Runtime's
# greedy loop on the same Optimum export (tests/oracle/ort_generate.js: decoder_model for the
# prompt, decoder_with_past per token, cache grown by concatenation), in one invocation:
#   stories260K   the real trained model (examples/models/llama2c.py), max_seq 512
#   qwen2-1.5b    a seeded Qwen2-1.5B-shaped export: 1 layer (hidden 1536, 12 heads / 2 KV heads,
#                 FFN 8960) + the 151936-wide LM head, 4-bit MatMulNBits (wlower quantize
#                 --nbits 4 --block-size 32; ORT runs the same files), where-mask, run-time RoPE
# For each: token generation tokens/s (wlower: mean ± sd over REPS; ORT: mean step) at 1 and 2
# threads, prompt processing tokens/s for a PROMPT-id prompt, step time by position (wlower's
# per-step times at 5 positions of a long generation, medians of 9 steps, and the ratio of
# the last to the first: flat = the step does no per-position copies), peak memory, and
# whether the ids agree. CPU model from /proc/cpuinfo and `uptime` before and after.
#
#   bench/llm_decode.sh            (WLOWER=build/wlower, BENCH_CACHE=/tmp/wlower-bench-llm,
#                                   REPS=3, MODELS="stories260K qwen2-1.5b", THREADS="1 2")
set -u
cd "$(dirname "$0")/.."
W=${WLOWER:-build/wlower}
C=${BENCH_CACHE:-/tmp/wlower-bench-llm}
REPS=${REPS:-3}
MODELS=${MODELS:-"stories260K qwen2-1.5b"}
THREADS=${THREADS:-"1 2"}
PY=/usr/bin/python3
W=$(cd "$(dirname "$W")" && pwd)/$(basename "$W")
[ -x "$W" ] || { echo "llm_decode: $W: no wlower binary (set WLOWER)" >&2; exit 1; }
sh tests/oracle/install.sh >/dev/null || { echo "llm_decode: cannot install onnxruntime-node" >&2; exit 1; }
mkdir -p "$C"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) online"
echo "load before: $(uptime | sed 's/.*load average/load average/')"

# ---- models (once)
if [ ! -f "$C/stories260K/config.json" ]; then
	$PY examples/models/llama2c.py ../shared/data/llama2c/stories260K.bin --mask where --out "$C/stories260K" \
		>/dev/null 2>&1 || { echo "llm_decode: llama2c.py failed" >&2; exit 1; }
fi
if echo "$MODELS" | grep -q qwen2 && [ ! -f "$C/qwen2-1.5b/config.json" ]; then
	[ -f "$C/qwen2-f32/decoder_with_past_model.onnx" ] ||
	$PY examples/models/hf_llama.py --arch qwen2 --layers 1 --hidden 1536 --heads 12 --kv-heads 2 \
		--ffn 8960 --vocab 151936 --max-pos 4096 --mask where --out "$C/qwen2-f32" >/dev/null 2>&1 ||
		{ echo "llm_decode: hf_llama.py failed" >&2; exit 1; }
	mkdir -p "$C/qwen2-1.5b.tmp"
	cp "$C/qwen2-f32/config.json" "$C/qwen2-1.5b.tmp/"
	for g in decoder_model decoder_with_past_model; do
		"$W" quantize "$C/qwen2-f32/$g.onnx" --nbits 4 --block-size 32 -o "$C/qwen2-1.5b.tmp/$g.onnx" ||
			{ echo "llm_decode: quantize failed" >&2; exit 1; }
	done
	rm -rf "$C/qwen2-1.5b" && mv "$C/qwen2-1.5b.tmp" "$C/qwen2-1.5b"
fi

json() {   # json FILE EXPR: a value of the report
	$PY -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"
}

for m in $MODELS; do
	case $m in
	stories260K) S=512 PROMPT=64 N=64 LONG=510 ;;
	*) S=256 PROMPT=16 N=32 LONG=200 ;;
	esac
	src="$C/$m"
	pipe="$C/pipe-$m"
	t0=$(date +%s)
	"$W" "$src" --pipeline llm --target host --max-seq $S -o "$pipe" 2>/dev/null ||
		{ echo "llm_decode: compile of $m failed" >&2; exit 1; }
	echo
	echo "## $m (max_seq $S, compiled in $(( $(date +%s) - t0 )) s; prefill rows $(json "$pipe/pipeline.json" 'r["llm"]["prefill_rows"]'))"
	ids=$($PY -c "print(','.join(['1'] + [str((7 * i + 3) % 500) for i in range($PROMPT - 1)]))")
	echo "| threads | wlower tg t/s | ORT tg t/s | tg ratio | wlower pp$PROMPT t/s | ORT pp$PROMPT t/s | pp ratio | wlower peak MiB | ids equal |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|:--|"
	for t in $THREADS; do
		"$W" generate --pipeline "$pipe" --prompt-ids 1 --max-new-tokens $N --ignore-eos --threads $t --reps $REPS \
			--json "$C/tg.json" >"$C/tg.ids" 2>/dev/null || { echo "llm_decode: generate failed" >&2; exit 1; }
		node tests/oracle/ort_generate.js "$src" --prompt-ids 1 --max-new-tokens $N --threads $t \
			>"$C/ort.ids" 2>"$C/ort.err" || { echo "llm_decode: ORT failed" >&2; exit 1; }
		"$W" generate --pipeline "$pipe" --prompt-ids "$ids" --max-new-tokens 2 --ignore-eos --threads $t \
			--reps $REPS --json "$C/pp.json" >/dev/null 2>&1 || { echo "llm_decode: generate (pp) failed" >&2; exit 1; }
		node tests/oracle/ort_generate.js "$src" --prompt-ids "$ids" --max-new-tokens 2 --threads $t \
			>/dev/null 2>"$C/ortpp.err" || { echo "llm_decode: ORT (pp) failed" >&2; exit 1; }
		wtg=$(json "$C/tg.json" '"%.1f ± %.1f" % (r["report"]["tg_tokens_per_s"], r["report"]["tg_tokens_per_s_sd"])')
		otg=$(sed -n 's/.*(\([0-9.]*\) tokens\/s).*/\1/p' "$C/ort.err")
		wpp=$(json "$C/pp.json" '"%.1f" % r["report"]["pp_tokens_per_s"]')
		opp=$($PY -c "import sys,re; ms=float(re.search(r'prompt ([0-9.]+) ms', open(sys.argv[1]).read()).group(1)); print('%.1f' % ($PROMPT * 1e3 / ms))" "$C/ortpp.err")
		peak=$(json "$C/tg.json" 'r["report"]["peak_memory_mib"]')
		same=no
		cmp -s "$C/tg.ids" "$C/ort.ids" && same=yes
		rt=$($PY -c "import sys; print('%.2f' % (float(sys.argv[1].split()[0]) / float(sys.argv[2])))" "$wtg" "$otg")
		rp=$($PY -c "import sys; print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$wpp" "$opp")
		echo "| $t | $wtg | $otg | ${rt}× | $wpp | $opp | ${rp}× | $peak | $same |"
	done
	for t in $THREADS; do
		"$W" generate --pipeline "$pipe" --prompt-ids 1 --max-new-tokens $LONG --ignore-eos --threads $t \
			--json "$C/long.json" >/dev/null 2>&1 || { echo "llm_decode: generate (long) failed" >&2; exit 1; }
		json "$C/long.json" '(lambda s, p0: "step time by position, %d thread(s): " % r["report"]["threads"] +
			", ".join("p=%d %.4f ms" % (p0 + k, sorted(s[max(0, k - 4):k + 5])[len(s[max(0, k - 4):k + 5]) // 2])
			for k in (0, len(s) // 4, len(s) // 2, 3 * len(s) // 4, len(s) - 1)) +
			" (each the median of the 9 steps around it); last/first %.2f" %
			(sorted(s[-9:])[4] / sorted(s[:9])[4]))(r["report"]["step_ms"], r["report"]["step_pos0"])'
	done
done
echo
echo "load after: $(uptime | sed 's/.*load average/load average/')"
