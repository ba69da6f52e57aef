#!/bin/sh
# seed.sh WLOWER OUTDIR — fuzz corpora: the binary models of libonnx-testdata
# (import/) and their textual form printed by wlower (text/); small valid and
# near-valid .npy files (npy/), .tranges files (tranges/) and host module
# manifests (manifest/; fuzz_manifest's scratch weights.bin is bytes 0..63) and
# tokenizer.json files with texts (tokenizer/).
# Each corpus is made once (skipped when its folder is not empty).
set -eu
WLOWER=$1
OUT=$2
DATA=/usr/share/libonnx-testdata/data
[ -d "$DATA" ] || { echo "seed.sh: $DATA missing (apt-get install libonnx-testdata)" >&2; exit 1; }
mkdir -p "$OUT/import" "$OUT/text" "$OUT/npy" "$OUT/tranges" "$OUT/manifest"
if [ -z "$(ls -A "$OUT/import")" ]; then
	i=0
	for m in "$DATA"/node/*/model.onnx "$DATA"/simple/*/model.onnx "$DATA"/pytorch-operator/*/model.onnx; do
		i=$((i + 1))
		cp "$m" "$OUT/import/$i.onnx"
		"$WLOWER" "$m" --passes=dce --emit onnx-text -o "$OUT/text/$i.onnxtxt" 2>/dev/null || true
	done
fi
if [ -z "$(ls -A "$OUT/npy")" ] || [ -z "$(ls -A "$OUT/tranges")" ] || [ -z "$(ls -A "$OUT/manifest")" ]; then
	/usr/bin/python3 - "$OUT" <<'PY'
import hashlib, io, json, os, sys
import numpy as np
out = sys.argv[1]
def put(sub, name, data):
    with open(os.path.join(out, sub, name), "wb") as f:
        f.write(data)
# npy: every dtype the reader takes, 0-d to 4-d, v1/v2/v3 headers, '=' and '|'
rng = np.random.default_rng(1)
arrays = [np.float32(1.5), np.zeros((0, 3), np.float32), rng.standard_normal((2, 3)).astype(np.float32),
          rng.standard_normal((1, 2, 2, 2)).astype(np.float16), np.arange(5, dtype=np.int64),
          np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(-3, 3, dtype=np.int8),
          np.arange(4, dtype=np.uint8), np.array([True, False])]
for i, a in enumerate(arrays):
    b = io.BytesIO()
    np.save(b, a)
    put("npy", "%d.npy" % i, b.getvalue())
for v in [(2, 0), (3, 0)]:
    b = io.BytesIO()
    np.lib.format.write_array(b, arrays[2], version=v)
    put("npy", "v%d.npy" % v[0], b.getvalue())
h = "{'descr': '=f4', 'fortran_order': False, 'shape': (2,), }"
h = h + " " * (63 - (10 + len(h)) % 64) + "\n"
put("npy", "eq.npy", b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h.encode() + b"\0" * 8)
# tranges
t = {"format": "wlower-tranges", "version": 1, "model": "m.onnx", "samples": 3,
     "tensors": {"x": {"min": -1.5, "max": 2}, "y": {"min": 0, "max": 0}, "z": {"min": -1e30, "max": 1e-30}}}
put("tranges", "0.tranges", json.dumps(t).encode())
put("tranges", "1.tranges", json.dumps(dict(t, tensors={})).encode())
put("tranges", "2.tranges", json.dumps(dict(t, model=None), indent=1).encode())
# manifests
w = bytes(range(64))
def fe(name, data):
    return {"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
m = {"format": "wlower-module", "version": 1, "wlower_version": "0.1.0", "model": "fixture", "target": "host",
     "hardware": {"cpu": "x86-64", "features": "+sse2,-avx512fp16"},
     "fuse": {"prepend_logmel": False, "append_argmax": False, "fp16_attention": False}, "passes": [],
     "programs": [{"name": "main",
                   "inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3], "format": "float32"}],
                   "outputs": [{"name": "y", "dtype": "float32", "shape": [2, 3], "format": "float32"},
                               {"name": "ids", "dtype": "int64", "shape": [1], "format": "int64"}],
                   "op_counts": {"Add": 1}, "workspace_bytes": 64, "abi": 1, "threads": 0}],
     "files": [fe("module.so", b"\x7fELF"), fe("weights.bin", w)], "compile_ms": 0}
put("manifest", "0.json", json.dumps(m, indent=2).encode())
put("manifest", "1.json", json.dumps(dict(m, hardware={"cpu": "x86-64-v3", "features": ["avx2", "fma"]})).encode())
put("manifest", "2.json", json.dumps(dict(m, target="qc-p")).encode())
put("manifest", "3.json", json.dumps(dict(m, files=[fe("weights.bin", w), fe("module.so", w)])).encode())
PY
fi
# tokenizer: the three tokenizer.json layouts of tests/oracle/make_tokenizers.py
# (fuzz_tokenizer also encodes non-JSON inputs with llama.json and qwen2.json
# of this folder) and a few texts
mkdir -p "$OUT/tokenizer"
if [ -z "$(ls -A "$OUT/tokenizer")" ]; then
	/usr/bin/python3 "$(dirname "$0")/../oracle/make_tokenizers.py" "$OUT/tokenizer"
	printf 'Hello world, 1234!' >"$OUT/tokenizer/t0.txt"
	printf ' <s>Caf\303\251 \346\227\245 \360\237\230\200\n\t  x' >"$OUT/tokenizer/t1.txt"
	printf '<|im_start|>user\r\nhi<|im_end|>' >"$OUT/tokenizer/t2.txt"
fi
