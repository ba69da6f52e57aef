#!/usr/bin/python3
"""`wlower tokenize` against Hugging Face's tokenizers.js (the oracle,
tests/oracle/tokenizer_check.js) on the three tokenizer.json layouts of
tests/oracle/make_tokenizers.py (Llama 2 SentencePiece-BPE with byte
fallback, Qwen2 byte-level BPE with its regex split and NFC, Metaspace with
Digits): every text's ids with and without the special template, and the
text of every id list (the encodings, byte-fallback fragments that do not
form UTF-8, special tokens with and without --skip-special). Then the
one-line errors on bad files. Whisper's multilingual.tiktoken (what
`transcribe --prompt` encodes) against OpenAI's tiktoken (npm `tiktoken`, the
Rust crate as WASM: tests/oracle/tiktoken_check.js) on the same texts and more.

usage: test_tokenizer.py WLOWER WORKDIR
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "shared", "data")

TEXTS = [
    "Hello world",
    "And so my fellow Americans, ask not what your country can do for you.",
    "  leading spaces and   inner   runs  ",
    "line one\nline two\r\n\n\ttabbed",
    "Isn't it? They're here; we'll go. I'M SHOUTING'S",
    "Numbers 3.14159 and 2026-12-02 and 1234567890",
    "Café naïve résumé — déjà vu",
    "decomposed e\u0301 vs composed \u00e9",
    "日本語のテキスト and emoji 😀👍🏽",
    "<s>special</s> inside <unk> text",
    "<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n",
    "<bos><bos>twice",
    "x",
    " ",
    "",
    "punctuation!!! ??? ... ,,, ;;; ''' \"quoted\"",
]

# More for Whisper's tiktoken encoder (GPT-2's regex): contractions (the pattern's are lower case
# only), digits runs, leading/trailing/inner whitespace runs before words, punctuation runs, scripts
# with and without spaces, combining marks, emoji sequences, special-token text taken as plain text.
TIKTOKEN_TEXTS = [
    " And so my fellow Americans, ask not what your country can do for you",
    "I'm you're we've they'd she'll it's HE'S WE'LL O'Neil rock'n'roll ''s",
    "12345678901234567890 3.14159 1,000,000 -42 +7 0x1F 2nd 3rd 4th",
    "   three leading spaces",
    "trailing spaces   ",
    "a  b   c    d\t\te\n\nf\r\n g",
    " \n \n",
    "Ça va? Très bien — merci! Ångström Straße naïve façade",
    "Привет, мир! Γειά σου Κόσμε! مرحبا بالعالم שלום עולם",
    "我们今天去公园吧。東京は晴れです。서울은 맑습니다",
    "नमस्ते दुनिया ಕನ್ನಡ தமிழ் ภาษาไทย",
    "👩‍👩‍👧‍👦 🇫🇷 👍🏽 ❤️ e\u0301e\u0300 \u00a0nbsp\u2003em",
    "<|endoftext|><|startoftranscript|> as plain text",
    "https://example.com/path?q=1&r=2 foo@bar.baz #hashtag @user $100 50% (x) [y] {z}",
    "--dashes -- and ... ellipsis!!! ??? ;;; :) :-(",
    "\u2028line\u2029para\u0085nel\x0bvt\x0cff",
]


def run(cmd):
    """stdout and stderr as text, bytes kept exactly (no newline translation)."""
    r = subprocess.run(cmd, capture_output=True, timeout=120)
    r.stdout = r.stdout.decode("utf-8", "replace")
    r.stderr = r.stderr.decode("utf-8", "replace")
    return r


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    wlower, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    r = subprocess.run(["sh", os.path.join(HERE, "install.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr)
        print("tokenizer: 0 passed, 1 failed (the oracle could not be installed)")
        return 1
    r = run(["/usr/bin/python3", os.path.join(HERE, "make_tokenizers.py"), work])
    if r.returncode != 0:
        print(r.stderr)
        return 1
    passed = failed = 0

    def check(ok, what):
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print("FAIL:", what)

    for name in ("llama", "qwen2", "metaspace"):
        tok = os.path.join(work, name + ".json")
        ours_enc = []
        for t in TEXTS:
            got = {}
            for key, extra in (("special", []), ("plain", ["--no-special"])):
                r = run([wlower, "tokenize", "--tokenizer", tok] + extra + ["--", t] if t.startswith("-")
                        else [wlower, "tokenize", "--tokenizer", tok] + extra + [t])
                if r.returncode != 0:
                    got[key] = "exit %d: %s" % (r.returncode, r.stderr.strip())
                else:
                    line = r.stdout.rstrip("\n")
                    got[key] = [int(x) for x in line.split(",")] if line else []
            ours_enc.append(got)
        # id lists to decode: every encoding, plus byte-fallback fragments
        ids = [e["special"] for e in ours_enc if isinstance(e["special"], list) and e["special"]]
        vocab = json.load(open(tok, encoding="utf-8"))["model"]["vocab"]
        if "<0xE6>" in vocab:
            b = lambda x: vocab["<0x%02X>" % x]
            ids += [[b(0xE6), b(0x97)], [vocab["▁"], b(0xE6), b(0x97), b(0xA5), b(0xFF)], [b(0xC3)], [1, b(0x41), 2]]
        cases = os.path.join(work, name + ".cases.json")
        with open(cases, "w", encoding="utf-8") as f:
            json.dump({"texts": TEXTS, "ids": ids}, f, ensure_ascii=False)
        r = run(["node", os.path.join(HERE, "tokenizer_check.js"), tok, cases])
        if r.returncode != 0:
            check(False, "%s: tokenizers.js failed: %s" % (name, r.stderr.strip()[-400:]))
            continue
        ref = json.loads(r.stdout)
        for t, want, got in zip(TEXTS, ref["encode"], ours_enc):
            for key in ("special", "plain"):
                check(want[key] == got[key], "%s encode%s %r: tokenizers.js %s, wlower %s" %
                      (name, "" if key == "special" else " --no-special", t, want[key], got[key]))
        for lst, want in zip(ids, ref["decode"]):
            arg = ",".join(str(i) for i in lst)
            for key, extra in (("text", []), ("skip", ["--skip-special"])):
                r = run([wlower, "tokenize", "--tokenizer", tok, "--decode", arg] + extra)
                got = r.stdout[:-1] if r.returncode == 0 and r.stdout.endswith("\n") else "exit %d: %s" % (
                    r.returncode, r.stderr.strip())
                check(got == want[key], "%s decode%s %s: tokenizers.js %r, wlower %r" %
                      (name, " --skip-special" if key == "skip" else "", arg, want[key], got))

    # Whisper's multilingual.tiktoken: `wlower tokenize` (what transcribe --prompt encodes) against
    # OpenAI's tiktoken (npm `tiktoken`, the Rust crate as WASM) on the same ranks file
    tik = os.path.join(SHARED, "whisper", "multilingual.tiktoken")
    ttexts = TEXTS + TIKTOKEN_TEXTS
    tcases = os.path.join(work, "tiktoken.cases.json")
    with open(tcases, "w", encoding="utf-8") as f:
        json.dump(ttexts, f, ensure_ascii=False)
    r = run(["node", os.path.join(HERE, "tiktoken_check.js"), tik, tcases])
    check(r.returncode == 0, "tiktoken oracle failed: %s" % r.stderr.strip()[-400:])
    want_all = json.loads(r.stdout) if r.returncode == 0 else [None] * len(ttexts)
    for t, want in zip(ttexts, want_all):
        r = run([wlower, "tokenize", "--tokenizer", tik, "--", t] if t.startswith("-") else
                [wlower, "tokenize", "--tokenizer", tik, t])
        line = r.stdout.rstrip("\n")
        got = ([int(x) for x in line.split(",")] if line else []) if r.returncode == 0 else \
            "exit %d: %s" % (r.returncode, r.stderr.strip())
        check(want is not None and got == want, "tiktoken encode %r: tiktoken %s, wlower %s" % (t, want, got))
        if isinstance(got, list) and got:
            r = run([wlower, "tokenize", "--tokenizer", tik, "--decode", ",".join(map(str, got))])
            check(r.returncode == 0 and r.stdout == t + "\n", "tiktoken decode of %r: %r" % (t, r.stdout))
    r = run([wlower, "tokenize", "--tokenizer", tik, "--decode", "50258,50259,50359,2425,50364,50257"])
    check(r.stdout == "<|startoftranscript|><|en|><|transcribe|> Hello<|0.00|><|endoftext|>\n",
          "tiktoken decode with specials: %r" % r.stdout)
    r = run([wlower, "tokenize", "--tokenizer", tik, "--decode", "51865"])
    check(r.returncode == 1 and "id 51865 is not in Whisper's vocabulary" in r.stderr, "tiktoken bad id: %r" % r.stderr)
    r = subprocess.run([wlower.encode(), b"tokenize", b"--tokenizer", tik.encode(), b"ab\xff"], capture_output=True,
                       timeout=60)
    check(r.returncode == 1 and b"not valid UTF-8" in r.stderr, "tiktoken text that is not UTF-8: %r" % r.stderr)

    # bad input: one line naming the file, exit 1 (usage errors exit 2)
    llama = os.path.join(work, "llama.json")
    tj = json.load(open(llama, encoding="utf-8"))

    def bad(label, obj, text, want, raw=None):
        p = os.path.join(work, "bad-%s.json" % label)
        with open(p, "w", encoding="utf-8") as f:
            f.write(raw if raw is not None else json.dumps(obj, ensure_ascii=False))
        r = run([wlower, "tokenize", "--tokenizer", p, text])
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 1 and len(lines) == 1 and p in lines[0] and want in lines[0] and not r.stdout,
              "bad %s: exit %d, stderr %r" % (label, r.returncode, r.stderr))

    bad("truncated", None, "hi", "not a tokenizer.json", raw=json.dumps(tj)[:500])
    bad("empty", None, "hi", "not a tokenizer.json", raw="")
    t2 = json.loads(json.dumps(tj)); t2["model"]["type"] = "WordPiece"
    bad("model", t2, "hi", "model type 'WordPiece' is not supported")
    t2 = json.loads(json.dumps(tj)); t2["model"]["merges"].append("▁zz qq")
    bad("merge", t2, "hi", "is not in the vocabulary")
    t2 = json.loads(json.dumps(tj)); t2["normalizer"] = {"type": "Lowercase"}
    bad("normalizer", t2, "hi", "normalizer 'Lowercase' is not supported")
    t2 = json.loads(json.dumps(tj)); t2["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(["},
                                                           "behavior": "Isolated", "invert": False}
    bad("regex", t2, "hi", "pattern does not compile")
    t2 = json.loads(json.dumps(tj)); t2["model"]["byte_fallback"] = False; t2["model"]["unk_token"] = None
    bad("nounk", t2, "日", "has no token")
    r = run([wlower, "tokenize", "--tokenizer", llama, "--decode", "999999"])
    check(r.returncode == 1 and "id 999999 is not in the vocabulary" in r.stderr, "decode of an unknown id: %r" % r.stderr)
    r = run([wlower, "tokenize", "--tokenizer", llama, "--decode", "1,x"])
    check(r.returncode == 2 and "--decode '1,x'" in r.stderr, "decode of a bad list: %r" % r.stderr)
    r = run([wlower, "tokenize", "--tokenizer", os.path.join(work, "missing.json"), "hi"])
    check(r.returncode == 1 and "missing.json" in r.stderr, "missing file: %r" % r.stderr)
    r = subprocess.run([wlower.encode(), b"tokenize", b"--tokenizer", llama.encode(), b"ab\xff\xfe"],
                       capture_output=True, timeout=60)
    check(r.returncode == 1 and b"not valid UTF-8" in r.stderr, "text that is not UTF-8: %r" % r.stderr)

    # wlower generate --prompt TEXT --tokenizer: a seeded Llama whose vocabulary is llama.json's
    vocab_n = len(tj["model"]["vocab"])
    model = os.path.join(work, "gen-llama")
    pipe = os.path.join(work, "gen-pipe")
    r = run(["/usr/bin/python3", os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "models",
                                              "hf_llama.py"),
             "--arch", "llama", "--layers", "1", "--hidden", "32", "--heads", "4", "--kv-heads", "2", "--ffn", "64",
             "--vocab", str(vocab_n), "--max-pos", "64", "--mask", "where", "--out", model])
    check(r.returncode == 0, "hf_llama.py: %s" % r.stderr[-300:])
    r = run([wlower, model, "--pipeline", "llm", "--target", "ref", "--max-seq", "64", "-o", pipe])
    check(r.returncode == 0, "compile the seeded llama: %s" % r.stderr[-300:])
    text = "Once upon a time, Lily"
    js = os.path.join(work, "gen.json")
    gen = [wlower, "generate", "--pipeline", pipe, "--tokenizer", llama, "--max-new-tokens", "8", "--ignore-eos"]
    r = run(gen + ["--prompt", text, "--json", js])
    ok = r.returncode == 0 and os.path.exists(js)
    check(ok, "generate --prompt: %s" % r.stderr[-300:])
    if ok:
        j = json.load(open(js, encoding="utf-8"))
        enc = run([wlower, "tokenize", "--tokenizer", llama, text]).stdout.strip()
        check(j["prompt_ids"] == [int(x) for x in enc.split(",")], "prompt ids %s vs tokenize %s" % (j["prompt_ids"], enc))
        dec = run([wlower, "tokenize", "--tokenizer", llama, "--skip-special", "--decode",
                   ",".join(str(i) for i in j["ids"])]).stdout[:-1]
        lines = r.stdout.split("\n")
        check(j["text"] == dec and lines[0] == ",".join(str(i) for i in j["ids"]) and lines[1] == dec and
              j.get("prompt") == text, "text %r / stdout %r vs tokenize --decode %r" % (j["text"], r.stdout, dec))
        r2 = run(gen + ["--prompt-ids", enc])
        check(r2.returncode == 0 and r2.stdout == r.stdout, "--prompt-ids of the encoding: %r vs %r" % (r2.stdout, r.stdout))
        r3 = run(gen + ["--prompt", text, "--stream"])
        check(r3.returncode == 0 and r3.stdout == dec + "\n", "--stream with a tokenizer: %r vs %r" % (r3.stdout, dec))
    r = run([wlower, "generate", "--pipeline", pipe, "--prompt", text])
    check(r.returncode == 2 and "--tokenizer" in r.stderr, "--prompt without a tokenizer: usage, %r" % r.stderr)
    r = run(gen + ["--prompt", text, "--prompt-ids", "1"])
    check(r.returncode == 2 and "one of them" in r.stderr, "--prompt with --prompt-ids: usage, %r" % r.stderr)
    r = run(gen[:4] + ["--tokenizer", os.path.join(work, "bad-truncated.json"), "--prompt", text])
    check(r.returncode == 1 and "bad-truncated.json" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
          "generate with a truncated tokenizer: %r" % r.stderr)

    print("tokenizer: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
