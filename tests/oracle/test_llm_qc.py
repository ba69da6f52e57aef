#!/usr/bin/python3
"""test_llm_qc.py — the LLM pipeline on the Chimera targets (qc-*), on the bit-exact emulator.

    test_llm_qc.py WLOWER WORKDIR

1. stories260K (examples/models/llama2c.py on ../shared/data/llama2c/stories260K.bin) compiled with
   `--pipeline llm --target qc-n --cores 1 --max-seq 128 --calibrate PROMPTS.txt` (ranges from float
   decoding of prompts that are NOT the test's prompt); `wlower generate --prompt-ids 1
   --max-new-tokens 64` must print exactly the 64 ids of llama2.c's run.c
   (tests/oracle/stories260K_greedy.json), with the simulated report: cycles, latency and tokens/s
   per token, saturation per program, the vendor's per-run table (stderr and --json).
2. The qc runner (one module_sim --serve process) against `wlower sim` (a process per run) on the
   inputs of positions 0 and 1: logits bit-identical.
   --tranges DIR (the first pipeline's folder) gives the same step program (module.cpp), here with
   --argmax-on-device (lm_head ends in GreedyArgMax: 16 ids, still run.c's); `generate --model
   EXPORT --target qc-n --calibrate ...` compiles into $WLOWER_CACHE on first use and reuses it.
3. Seeded Qwen2/Llama-shaped exports (examples/models/hf_llama.py; one 4-bit from `wlower quantize`)
   on qc-n and qc-u: `wlower generate --prompt-ids 1,5,9 --max-new-tokens 16` equal to ONNX Runtime's
   own greedy loop (tests/oracle/ort_generate.js), per-step logits PSNR >= 40 dB.
4. Bad input: qc-* without --calibrate/--tranges (usage, exit 2), --calibrate with --target host
   (usage), a PROMPTS.txt line that is not ids (exit 1, names file:line, nothing left behind), a
   prompt id >= vocab in PROMPTS.txt (file:line).
The simulator builds go to WORKDIR/cache (XDG_CACHE_HOME), so the test does not depend on an earlier
build. Ends with "llm-qc: N passed, M failed".
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CKPT = os.path.join(os.path.dirname(ROOT), "shared", "data", "llama2c", "stories260K.bin")
PY = "/usr/bin/python3"
# calibration prompts: not the test prompts ("1" for stories260K, "1,5,9" for the seeded models)
STORIES_PROMPTS = "1,403,407\n\n1,365,1\n"
SEEDED_PROMPTS = "1\n1,7,3,12\n1,100,200,300\n"
SEEDED = [  # (name, hf_llama.py arguments, 4-bit, target)
    ("qwen2-runtime-expanded", ["--arch", "qwen2", "--rope", "runtime", "--mask", "expanded"], True, "qc-n"),
    ("llama-runtime-where", ["--arch", "llama", "--rope", "runtime", "--mask", "where"], False, "qc-u"),
]


class Tally:
    def __init__(self):
        self.passed, self.failed = 0, []

    def check(self, name, ok, detail=""):
        print("  %s %s%s" % ("ok  " if ok else "FAIL", name, (": " + detail) if detail else ""), flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def one_line_error(r, code, needle):
    err = [l for l in r.stderr.splitlines() if l.strip()]
    ok = r.returncode == code and len(err) == 1 and needle in err[0]
    return ok, "exit %d, stderr %r" % (r.returncode, r.stderr.strip()[-300:])


def stories(W, work, env, t):
    want = json.load(open(os.path.join(HERE, "stories260K_greedy.json")))["ids"]
    export = os.path.join(work, "stories260K")
    if not os.path.exists(os.path.join(export, "config.json")):
        r = run([PY, os.path.join(ROOT, "examples", "models", "llama2c.py"), CKPT, "--out", export])
        t.check("convert stories260K", r.returncode == 0, r.stderr.strip()[-300:])
        if r.returncode:
            return None
    prompts = os.path.join(work, "stories-prompts.txt")
    open(prompts, "w").write(STORIES_PROMPTS)
    pipe = os.path.join(work, "pipe-stories-qc-n")
    shutil.rmtree(pipe, ignore_errors=True)
    r = run([W, export, "--pipeline", "llm", "--target", "qc-n", "--cores", "1", "--max-seq", "128",
             "--calibrate", prompts, "-o", pipe], env=env)
    t.check("stories260K: compile for qc-n (1 core) with --calibrate", r.returncode == 0, r.stderr.strip()[-300:])
    if r.returncode:
        return None
    pj = json.load(open(os.path.join(pipe, "pipeline.json")))
    progs = {p["name"]: p for p in pj["programs"]}
    step = progs.get("step", {})
    t.check("step: runner qc, 5 GroupQueryAttention, ranges recorded",
            step.get("runner") == "qc" and step["op_counts"].get("ai.wlower.GroupQueryAttention") == 5 and
            step.get("tranges") == "step.tranges" and any(f["name"] == "step.tranges" for f in pj["files"]),
            json.dumps(step)[:300])
    t.check("programs prefill, step, lm_head: all qc, each with its ranges",
            sorted(progs) == ["lm_head", "prefill", "step"] and
            all(p["runner"] == "qc" and any(f["name"] == p["name"] + ".tranges" for f in pj["files"])
                for p in progs.values()), json.dumps(sorted(progs)))
    tr = json.load(open(os.path.join(pipe, "step.tranges")))
    past = [k for k in tr["tensors"] if k.startswith("past_key_values.")]
    # each 3-id prompt: the prefill takes the prompt and gives the first id, then one step per
    # further id up to max_seq 128: 128 - 3 - 1 step runs per prompt
    t.check("step.tranges: every KV cache input has a range, over every position",
            len(past) == 10 and tr["samples"] == 2 * (128 - 3 - 1), "%d cache inputs, %s samples" %
            (len(past), tr["samples"]))
    js = os.path.join(work, "gen-stories-qc-n.json")
    r = run([W, "generate", "--pipeline", pipe, "--prompt-ids", "1", "--max-new-tokens", "64", "--json", js],
            env=env)
    got = [int(x) for x in r.stdout.strip().split(",")] if r.returncode == 0 and r.stdout.strip() else None
    detail = ""
    if got != want:
        detail = "got %s: %s" % (got, r.stderr.strip()[-300:]) if got is None or len(got) != 64 else \
            "first difference at step %d" % next(i for i in range(64) if got[i] != want[i])
    t.check("stories260K qc-n: 64 greedy ids equal llama2.c run.c's", got == want, detail)
    fields = ["simulated (qc-n, cost model):", "cycles per token", "tokens/s", "saturated fixed-point stores: 0",
              "module ", "target ", "cores ", "clock ", "OCM (L2) size", "LRM size", "max OCM used",
              "max LRM used", "external bandwidth", "MACs/PE", "network GMACs", "external bytes read",
              "external bytes written", "MAC utilization", "TotalCycles:"]
    missing = [f for f in fields if f not in r.stderr]
    t.check("report: simulated per token, saturation, the vendor's per-run table", not missing,
            "missing %s" % missing)
    ok = False
    if os.path.exists(js):
        sim = json.load(open(js))["report"].get("sim", {})
        ps = {p.get("name"): p for p in sim.get("programs") or []}
        st, hd = ps.get("step", {}), ps.get("lm_head", {})
        # a 1-id prompt: every position is a step run, each followed by lm_head on its row
        ok = (sim.get("cycles_per_token", 0) > 0 and st.get("runs") == 64 and hd.get("runs") == 64 and
              all(p.get("saturated") == 0 for p in ps.values()) and
              abs(sim["tokens_per_s"] - sim["clock_hz"] / sim["cycles_per_token"]) < 1e-6 * sim["tokens_per_s"]
              and abs(st.get("cycles_per_run", 0) + hd.get("cycles_per_run", 0) - sim["cycles_per_token"]) <= 1)
        detail = json.dumps(sim)[:300]
    t.check("--json report.sim: cycles, tokens/s at the clock, 64 runs, no saturation", ok, detail)
    twin(W, work, pipe, env, t)
    again = os.path.join(work, "pipe-stories-qc-n-tranges")
    shutil.rmtree(again, ignore_errors=True)
    r = run([W, export, "--pipeline", "llm", "--target", "qc-n", "--cores", "1", "--max-seq", "128",
             "--tranges", pipe, "--argmax-on-device", "-o", again], env=env)
    same = r.returncode == 0 and open(os.path.join(pipe, "step", "module.cpp")).read() == \
        open(os.path.join(again, "step", "module.cpp")).read()
    t.check("--tranges DIR (the first pipeline): the same step program", same, r.stderr.strip()[-300:])
    # --argmax-on-device (the same ranges): lm_head gives the id on the device, the ids stay run.c's
    r = run([W, "generate", "--pipeline", again, "--prompt-ids", "1", "--max-new-tokens", "16"], env=env) \
        if same else r
    t.check("--argmax-on-device on qc-n: 16 greedy ids equal run.c's",
            same and r.returncode == 0 and r.stdout.strip() == ",".join(map(str, want[:16])) and
            json.load(open(os.path.join(again, "pipeline.json")))["llm"].get("argmax_on_device") is True,
            r.stdout.strip()[:200] + r.stderr.strip()[-300:])
    cenv = dict(env, WLOWER_CACHE=os.path.join(work, "pipelines"))
    shutil.rmtree(cenv["WLOWER_CACHE"], ignore_errors=True)
    outs = []
    for i in range(2):
        r = run([W, "generate", "--model", export, "--target", "qc-n", "--cores", "1", "--max-seq", "128",
                 "--calibrate", prompts, "--prompt-ids", "1", "--max-new-tokens", "16"], env=cenv)
        outs.append((r.returncode, r.stdout.strip(), "compiling" in r.stderr))
    t.check("--model --target qc-n --calibrate: compiled on first use, reused after, ids equal run.c's",
            outs[0][0] == 0 and outs[1][0] == 0 and outs[0][2] and not outs[1][2] and
            outs[0][1] == outs[1][1] == ",".join(map(str, want[:16])), str(outs)[:300])
    return export


def twin(W, work, pipe, env, t):
    """The qc runner (one module_sim --serve process per program, runs 1 and 2) against `wlower sim`
    (one process per run) on the same inputs: positions 0 and 1 of prompt 1 through `step` then
    `lm_head`, the static cache of position 1 built here from position 0's new rows as
    runtime/pipelines/llm.c keeps it. Logits must be bit-identical."""
    import numpy as np
    lg = os.path.join(work, "twin-logits")
    shutil.rmtree(lg, ignore_errors=True)
    r = run([W, "generate", "--pipeline", pipe, "--prompt-ids", "1", "--max-new-tokens", "2", "--ignore-eos",
             "--dump-logits", lg], env=env)
    if r.returncode:
        t.check("qc runner = wlower sim, bit for bit", False, r.stderr.strip()[-300:])
        return
    tok0 = int(r.stdout.strip().split(",")[0])
    step = os.path.join(pipe, "step")
    head = os.path.join(pipe, "lm_head")
    man = json.load(open(os.path.join(step, "manifest.json")))["programs"][0]
    M = next(io["shape"][1] for io in man["inputs"] if io["name"] == "attention_mask")   # S + 1
    past = {io["name"]: np.zeros(io["shape"], np.float32) for io in man["inputs"]
            if io["name"].startswith("past_key_values.")}

    def sim(module, feeds, d, out):
        os.makedirs(d, exist_ok=True)
        args = []
        for k, v in feeds.items():
            np.save(os.path.join(d, k + ".npy"), v)
            args += ["--input", "%s=%s" % (k, os.path.join(d, k + ".npy"))]
        shutil.rmtree(out, ignore_errors=True)
        r = run([W, "sim", module, "--output-dir", out, "--quiet"] + args, env=env)
        return r.stderr.strip()[-300:] if r.returncode else None

    same = []
    for p, tok in ((0, 1), (1, tok0)):
        mask = np.zeros((1, M), np.int64)
        mask[0, :p] = 1          # cache rows in use
        mask[0, M - 1] = 1       # the new row
        feeds = dict(past, input_ids=np.array([[tok]], np.int64), position_ids=np.array([[p]], np.int64),
                     attention_mask=mask)
        out = os.path.join(work, "twin-out-%d" % p)
        err = sim(step, feeds, os.path.join(work, "twin-in-%d" % p), out)
        hout = os.path.join(work, "twin-head-%d" % p)
        err = err or sim(head, {"hidden_states": np.load(os.path.join(out, "hidden_states.npy"))},
                         os.path.join(work, "twin-hin-%d" % p), hout)
        if err:
            t.check("qc runner = wlower sim, bit for bit", False, err)
            return
        got = np.load(os.path.join(lg, "step_%d.npy" % p)).ravel()
        same.append(np.array_equal(np.load(os.path.join(hout, "logits.npy")).ravel(), got))
        for k in past:   # the new row becomes cache row p
            pres = np.load(os.path.join(out, k.replace("past_key_values", "present") + ".npy"))
            past[k][:, :, p, :] = pres[:, :, 0, :]
    t.check("qc runner (one process per program, runs 1 and 2) = wlower sim (a process per run), bit for bit",
            all(same), str(same))


def seeded(W, work, env, t):
    prompts = os.path.join(work, "seeded-prompts.txt")
    open(prompts, "w").write(SEEDED_PROMPTS)
    for name, gen_args, nbits, target in SEEDED:
        src = os.path.join(work, name)
        if not os.path.exists(os.path.join(src, "config.json")):
            r = run([PY, os.path.join(ROOT, "examples", "models", "hf_llama.py"), "--out", src] + gen_args)
            if r.returncode:
                t.check(name + ": generate the export", False, r.stderr.strip()[-300:])
                continue
        label = name
        if nbits:
            q = src + "-nbits"
            os.makedirs(q, exist_ok=True)
            shutil.copy(os.path.join(src, "config.json"), q)
            for g in ("decoder_model", "decoder_with_past_model"):
                r = run([W, "quantize", os.path.join(src, g + ".onnx"), "-o", os.path.join(q, g + ".onnx"),
                         "--nbits", "4", "--block-size", "32"])
                if r.returncode:
                    break
            t.check(name + ": wlower quantize", r.returncode == 0, r.stderr.strip()[-300:])
            if r.returncode:
                continue
            src, label = q, name + "-nbits"
        ort_dir = os.path.join(work, label + "-ort-logits")
        shutil.rmtree(ort_dir, ignore_errors=True)
        r = run(["node", os.path.join(HERE, "ort_generate.js"), src, "--prompt-ids", "1,5,9", "--max-new-tokens",
                 "16", "--threads", "2", "--logits-dir", ort_dir])
        if r.returncode:
            t.check(label + ": ONNX Runtime loop", False, r.stderr.strip()[-300:])
            continue
        want = r.stdout.strip()
        pipe = os.path.join(work, "pipe-%s-%s" % (label, target))
        shutil.rmtree(pipe, ignore_errors=True)
        r = run([W, src, "--pipeline", "llm", "--target", target, "--max-seq", "64", "--calibrate", prompts,
                 "-o", pipe], env=env)
        if r.returncode:
            t.check("%s/%s: compile" % (label, target), False, r.stderr.strip()[-300:])
            continue
        lg = os.path.join(work, "%s-%s-logits" % (label, target))
        shutil.rmtree(lg, ignore_errors=True)
        r = run([W, "generate", "--pipeline", pipe, "--prompt-ids", "1,5,9", "--max-new-tokens", "16",
                 "--ignore-eos", "--dump-logits", lg], env=env)
        same = r.returncode == 0 and r.stdout.strip() == want
        t.check("%s/%s: ids equal the ONNX Runtime loop" % (label, target), same,
                "" if same else "got %s want %s %s" % (r.stdout.strip(), want, r.stderr.strip()[-200:]))
        r = run([PY, os.path.join(HERE, "compare.py"), ort_dir, lg, "--psnr", "40"])
        worst = min((l for l in r.stdout.splitlines() if "psnr=" in l),
                    key=lambda l: float(l.split("psnr=")[1].split()[0]), default="")
        t.check("%s/%s: per-step logits >= 40 dB" % (label, target), r.returncode == 0 and worst != "",
                "worst " + worst.strip())


def bad_input(W, work, export, env, t):
    out = os.path.join(work, "pipe-bad")
    shutil.rmtree(out, ignore_errors=True)
    r = run([W, export, "--pipeline", "llm", "--target", "qc-n", "--max-seq", "32", "-o", out], env=env)
    t.check("qc-n without --calibrate/--tranges: usage", *one_line_error(r, 2, "--calibrate PROMPTS.txt or --tranges"))
    prompts = os.path.join(work, "prompts-host.txt")
    open(prompts, "w").write("1\n")
    r = run([W, export, "--pipeline", "llm", "--target", "host", "--calibrate", prompts, "-o", out], env=env)
    t.check("--calibrate with --target host: usage", *one_line_error(r, 2, "for the qc-* targets"))
    for label, text, needle in (("a line that is not ids", "1,2\n\n1,x,3\n", "prompts-bad.txt:3:"),
                                ("an id >= vocab", "1\n1,600\n", "prompts-bad.txt:2: prompt id 600")):
        bad = os.path.join(work, "prompts-bad.txt")
        open(bad, "w").write(text)
        r = run([W, export, "--pipeline", "llm", "--target", "qc-n", "--max-seq", "32", "--calibrate", bad,
                 "-o", out], env=env)
        ok, detail = one_line_error(r, 1, needle)
        left = [f for f in os.listdir(work) if f.startswith("pipe-bad")]
        t.check("PROMPTS.txt with %s: names file:line, nothing left" % label, ok and not left,
                detail + " leftovers %s" % left)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    W = os.path.abspath(sys.argv[1])
    work = os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(work, "cache"))
    t = Tally()
    print("stories260K on qc-n:", flush=True)
    export = stories(W, work, env, t)
    print("seeded exports against the ONNX Runtime loop:", flush=True)
    r = run(["sh", os.path.join(HERE, "install.sh")])
    if r.returncode:
        t.check("install the ONNX Runtime oracle", False, (r.stdout + r.stderr).strip()[-300:])
    else:
        seeded(W, work, env, t)
    if export:
        print("bad input:", flush=True)
        bad_input(W, work, export, env, t)
    print("llm-qc: %d passed, %d failed" % (t.passed, len(t.failed)))
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
