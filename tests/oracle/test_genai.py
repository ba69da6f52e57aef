#!/usr/bin/python3
"""test_genai.py — ONNX Runtime GenAI model-builder graphs through wlower, against ONNX Runtime.

    test_genai.py WLOWER WORKDIR [--targets ref,host] [--pipeline-targets ref,host]

(--pipeline-targets ref: the lighter variant meson runs under sanitizers, where each host
pipeline costs three LLVM O3 compiles; the normal build runs both.)

Models: examples/models/genai_llama.py (2 layers, hidden 64, GQA 4/2 heads of 16, vocab 512),
(a) rotary inside com.microsoft GroupQueryAttention (do_rotary, cos/sin caches) and (b) com.microsoft
RotaryEmbedding nodes before it with q/k/v biases; both made 4-bit by `wlower quantize`
(com.microsoft MatMulNBits), so the graphs hold GroupQueryAttention, RotaryEmbedding,
SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization and MatMulNBits as the builder's
int4 graphs do.

For each model, a greedy loop of ONNX Runtime (tests/oracle/ort_run.js on the com.microsoft graph:
prompt 1,5,9,3,7 with an empty past, then 3 single-token steps fed its own presents):
  - `wlower MODEL --dim ... --stop-after=fuse` leaves no com.microsoft op, no ReduceMean/Softmax,
    and one ai.wlower.GroupQueryAttention per layer;
  - `wlower run` of the fused graph (ref) on the same inputs: every output (logits, present.*)
    at PSNR >= 100 dB and the same argmax token, at every step;
  - --target host (prompt only: compiled alone, the single-token graph keeps the integer seqlens_k
    chain, ReduceSum/Sub/Cast, which has no host kernel; the pipeline below reads the positions
    from position_ids instead, --position-input): the same gates.
Then each model as a GenAI folder (genai_config.json + model.onnx, the 4-bit graph; the second with
its io renamed — past_kv.%d.k, present_kv.%d.k, next_logits... — and genai_config.json's
model.decoder.inputs / outputs naming them) through `wlower DIR --pipeline llm --target T`
(max-seq 32, prefill rows 4) and `wlower generate` (prompt of 7 ids: one full prefill chunk and
one padded, then one step per id): the ids equal those of tests/oracle/ort_generate.js (ONNX
Runtime's own greedy loop on the GenAI graph, growing past, independent of wlower), and the
logits that chose each id reach PSNR >= 100 dB against ONNX Runtime's, on every target.
Ends with "genai: N passed, M failed"; exit 1 on any failure.
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GEN = os.path.join(ROOT, "examples", "models", "genai_llama.py")
PY = "/usr/bin/python3"
PROMPT = [1, 5, 9, 3, 7]
STEPS = 3
LAYERS, KV, HD = 2, 2, 16


class Tally:
    def __init__(self):
        self.passed, self.failed = 0, []

    def check(self, name, ok, detail=""):
        print("  %s %s%s" % ("ok  " if ok else "FAIL", name, (": " + detail) if detail else ""), flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
        return ok


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def brief(s):
    s = s.strip().splitlines()
    return s[-1][:300] if s else ""


def psnr(ref, got):
    r, g = ref.astype(np.float64), got.astype(np.float64)
    if r.shape != g.shape:
        return -1.0
    mse = float(np.mean((r - g) ** 2)) if r.size else 0.0
    peak = float(np.max(np.abs(r))) if r.size else 0.0
    return float("inf") if mse == 0 else 10 * np.log10(peak * peak / mse)


def feeds_for(d, ids, past, with_pos):
    """Write the inputs of one call into d; returns NAME=FILE pairs."""
    os.makedirs(d, exist_ok=True)
    total = len(ids) + past[0].shape[2]
    arrays = {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, total), np.int64)}
    for i in range(LAYERS):
        arrays["past_key_values.%d.key" % i] = past[2 * i]
        arrays["past_key_values.%d.value" % i] = past[2 * i + 1]
    pairs = []
    for n, a in arrays.items():
        f = os.path.join(d, n + ".npy")
        np.save(f, a)
        pairs.append("%s=%s" % (n, f))
    if with_pos:
        f = os.path.join(d, "position_ids.npy")
        np.save(f, np.arange(total - len(ids), total, dtype=np.int64)[None, :])
        pairs.append("position_ids=%s" % f)
    return pairs


def outputs(d):
    names = ["logits"] + ["present.%d.%s" % (i, kv) for i in range(LAYERS) for kv in ("key", "value")]
    return {n: np.load(os.path.join(d, n + ".npy")) for n in names}


def compare(tally, label, ref, d):
    try:
        got = outputs(d)
    except OSError as e:
        return tally.check(label, False, str(e))
    worst = min(psnr(ref[n], got[n]) for n in ref)
    tok = int(ref["logits"][0, -1].argmax()) == int(got["logits"][0, -1].argmax())
    return tally.check(label, worst >= 100 and tok, "min psnr %.1f dB, token %s" % (worst, "equal" if tok else "DIFFERS"))


def fused_ops(tally, wl, model, dims, label):
    r = run([wl, model] + dims + ["--stop-after=fuse", "--emit", "onnx-text"])
    if not tally.check(label + " fuses", r.returncode == 0, brief(r.stderr)):
        return
    body = r.stdout
    gqa = body.count("ai.wlower.GroupQueryAttention <")
    left = [op for op in ("com.microsoft.", "ReduceMean", "Softmax", "SimplifiedLayerNormalization") if op in body]
    tally.check(label + " ops", gqa == LAYERS and not left,
                "%d GroupQueryAttention (want %d), left: %s" % (gqa, LAYERS, ", ".join(left) or "none"))


def one_model(args, tally, tag, gen_args):
    work = os.path.join(args.workdir, tag)
    os.makedirs(work, exist_ok=True)
    r = run([PY, GEN, work] + gen_args)
    if not tally.check(tag + " generate", r.returncode == 0, brief(r.stderr)):
        return
    model = os.path.join(work, "model.nbits.onnx")
    r = run([args.wlower, "quantize", os.path.join(work, "model.onnx"), "-o", model, "--nbits", "4", "--block-size", "32"])
    if not tally.check(tag + " quantize", r.returncode == 0, brief(r.stderr)):
        return
    past = [np.zeros((1, KV, 0, HD), np.float32)] * (2 * LAYERS)
    ids = list(PROMPT)
    for step in range(STEPS + 1):
        S, P = len(ids), past[0].shape[2]
        dims = ["--dim", "batch_size=1", "--dim", "sequence_length=%d" % S, "--dim", "past_sequence_length=%d" % P,
                "--dim", "total_sequence_length=%d" % (S + P)]
        label = "%s step %d (S %d, P %d)" % (tag, step, S, P)
        d = os.path.join(work, "s%d" % step)
        pairs = feeds_for(os.path.join(d, "in"), ids, past, "--rotary" in gen_args)
        r = run(["node", os.path.join(HERE, "ort_run.js"), model, os.path.join(d, "ort")] + pairs)
        if not tally.check(label + " ort", r.returncode == 0, brief(r.stderr)):
            return
        ref = outputs(os.path.join(d, "ort"))
        if step < 2:
            fused_ops(tally, args.wlower, model, dims, label)
        inputs = [a for p in pairs for a in ("--input", p)]
        for t in args.targets:
            if t == "host" and P > 0:
                continue
            if t == "ref":
                f = os.path.join(d, "fused.onnx")
                r = run([args.wlower, model] + dims + ["--stop-after=fuse", "-o", f])
            else:
                f = os.path.join(d, "host_module")
                r = run([args.wlower, model] + dims + ["--target", "host", "-o", f])
            if not tally.check("%s %s compile" % (label, t), r.returncode == 0, brief(r.stderr)):
                continue
            r = run([args.wlower, "run", f] + inputs + ["--output-dir", os.path.join(d, t)])
            if tally.check("%s %s run" % (label, t), r.returncode == 0, brief(r.stderr)):
                compare(tally, "%s %s vs ort" % (label, t), ref, os.path.join(d, t))
        ids = [int(ref["logits"][0, -1].argmax())]
        past = [ref["present.%d.%s" % (i, kv)] for i in range(LAYERS) for kv in ("key", "value")]


GEN_PROMPT = [1, 17, 33, 49, 65, 81, 97]
GEN_NEW = 6
RENAMES = {"past_key_names": "past_kv.%d.k", "past_value_names": "past_kv.%d.v",
           "present_key_names": "present_kv.%d.k", "present_value_names": "present_kv.%d.v",
           "logits": "next_logits", "input_ids": "ids"}


def genai_folder(src_dir, model, out, rename):
    """out/: genai_config.json + model.onnx (the 4-bit graph), io renamed when asked."""
    import json
    import onnx
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(src_dir, "genai_config.json")) as f:
        cfg = json.load(f)
    if not rename:
        shutil.copyfile(model, os.path.join(out, "model.onnx"))
    else:
        m = onnx.load(model)
        canon = {"past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value",
                 "present_key_names": "present.%d.key", "present_value_names": "present.%d.value",
                 "logits": "logits", "input_ids": "input_ids"}
        ren = {}
        for k, new in RENAMES.items():
            for i in range(LAYERS if "%d" in new else 1):
                ren[canon[k].replace("%d", str(i))] = new.replace("%d", str(i))
        g = m.graph
        for v in list(g.input) + list(g.output):
            v.name = ren.get(v.name, v.name)
        for n in g.node:
            n.input[:] = [ren.get(x, x) for x in n.input]
            n.output[:] = [ren.get(x, x) for x in n.output]
        onnx.save(m, os.path.join(out, "model.onnx"))
        dec = cfg["model"]["decoder"]
        dec["inputs"] = {k: v for k, v in RENAMES.items() if k in ("past_key_names", "past_value_names", "input_ids")}
        dec["inputs"]["attention_mask"] = "attention_mask"
        dec["outputs"] = {k: v for k, v in RENAMES.items() if k not in dec["inputs"]}
    with open(os.path.join(out, "genai_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def pipeline(args, tally, tag, rename):
    work = os.path.join(args.workdir, tag)
    gdir = os.path.join(work, "genai")
    try:
        genai_folder(work, os.path.join(work, "model.nbits.onnx"), gdir, rename)
    except Exception as e:  # noqa: BLE001 (reported as a failure)
        tally.check(tag + " genai folder", False, str(e))
        return
    ids = ",".join(map(str, GEN_PROMPT))
    r = run(["node", os.path.join(HERE, "ort_generate.js"), gdir, "--prompt-ids", ids, "--max-new-tokens",
             str(GEN_NEW), "--logits-dir", os.path.join(work, "gen-ort")])
    if not tally.check(tag + " ort_generate", r.returncode == 0, brief(r.stderr)):
        return
    want = r.stdout.strip()
    for t in args.pipeline_targets:
        pdir = os.path.join(work, "pipe-" + t)
        r = run([args.wlower, gdir, "--pipeline", "llm", "--target", t, "--max-seq", "32", "--prefill-rows", "4",
                 "-o", pdir])
        if not tally.check("%s pipeline %s compile" % (tag, t), r.returncode == 0, brief(r.stderr)):
            continue
        ld = os.path.join(work, "gen-" + t)
        r = run([args.wlower, "generate", "--pipeline", pdir, "--prompt-ids", ids, "--max-new-tokens", str(GEN_NEW),
                 "--ignore-eos", "--dump-logits", ld])
        if not tally.check("%s generate %s" % (tag, t), r.returncode == 0, brief(r.stderr)):
            continue
        got = r.stdout.strip().splitlines()[0] if r.stdout.strip() else ""
        worst = min(psnr(np.load(os.path.join(work, "gen-ort", "step_%d.npy" % k)),
                         np.load(os.path.join(ld, "step_%d.npy" % k))) for k in range(GEN_NEW))
        tally.check("%s generate %s = ort_generate" % (tag, t), got == want and worst >= 100,
                    "ids %s vs ort %s, logits min psnr %.1f dB" % (got, want, worst))
    # generate --model GENAI_DIR: compiled into the cache on first use (key: genai_config.json and model.onnx)
    env = dict(os.environ, WLOWER_CACHE=os.path.join(work, "cache"))
    shutil.rmtree(env["WLOWER_CACHE"], ignore_errors=True)    # a rerun in the same build dir: first use again
    cmd = [args.wlower, "generate", "--model", gdir, "--target", "ref", "--max-seq", "32", "--prefill-rows", "4",
           "--prompt-ids", ids, "--max-new-tokens", str(GEN_NEW), "--ignore-eos"]
    r1 = subprocess.run(cmd, capture_output=True, text=True, env=env)
    r2 = subprocess.run(cmd, capture_output=True, text=True, env=env)
    ok = r1.returncode == 0 and r2.returncode == 0 and "first use" in r1.stderr and "first use" not in r2.stderr
    got = [r.stdout.strip().splitlines()[0] if r.stdout.strip() else "" for r in (r1, r2)]
    tally.check("%s generate --model (cached) = ort_generate" % tag, ok and got == [want, want],
                "ids %s vs ort %s %s" % (got, want, brief(r1.stderr if r1.returncode else r2.stderr)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("wlower")
    ap.add_argument("workdir")
    ap.add_argument("--targets", default="ref,host")
    ap.add_argument("--pipeline-targets", default="ref,host")
    args = ap.parse_args()
    args.targets = args.targets.split(",")
    args.pipeline_targets = args.pipeline_targets.split(",")
    print("genai: targets %s, pipeline targets %s" % (",".join(args.targets), ",".join(args.pipeline_targets)))
    os.makedirs(args.workdir, exist_ok=True)
    r = run(["sh", os.path.join(HERE, "install.sh")])
    if r.returncode != 0:
        print("genai: the ONNX Runtime oracle could not be installed: %s" % brief(r.stderr + r.stdout))
        return 1
    tally = Tally()
    one_model(args, tally, "rotary-in-gqa", [])
    one_model(args, tally, "rotary-nodes", ["--rotary", "node", "--qkv-bias"])
    pipeline(args, tally, "rotary-in-gqa", False)
    pipeline(args, tally, "rotary-nodes", True)
    print("genai: %d passed, %d failed" % (tally.passed, len(tally.failed)))
    return 1 if tally.failed else 0


if __name__ == "__main__":
    sys.exit(main())
