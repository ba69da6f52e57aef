#!/usr/bin/python3
"""Writes small Hugging Face tokenizer.json files in the three layouts wlower
reads (runtime/pipelines/tokenizer.c), each with merges learnt by a plain BPE
trainer on a fixed corpus (the transcripts of ../shared/data plus a few
sentences), so that the merge tables are realistic rather than hand-picked:

  llama.json     Llama 2 (SentencePiece BPE): Prepend/Replace "▁" normalizer,
                 byte_fallback <0xXX> tokens, fuse_unk, decoder Replace +
                 ByteFallback + Fuse + Strip, template "<s> $A"
  qwen2.json     Qwen2 (byte-level BPE): NFC, Split by Qwen2's regex then
                 ByteLevel without regex, ByteLevel decoder, added
                 <|endoftext|> <|im_start|> <|im_end|>
  metaspace.json Metaspace pre-tokenizer (prepend_scheme "first", split) and
                 decoder, GPT-2 style ByteLevel-free unk handling, Digits

usage: make_tokenizers.py OUT_DIR
The files are test inputs; the expected encodings come from Hugging Face's
tokenizers.js (tests/oracle/tokenizer_check.js), not from this script.
"""
import collections
import json
import os
import re
import sys

CORPUS = """And so my fellow Americans, ask not what your country can do for you,
ask what you can do for your country.
He hoped there would be stew for dinner, turnips and carrots and bruised potatoes
and fat mutton pieces to be ladled out in thick peppered flour fattened sauce.
Once upon a time, there was a little girl named Lily. She loved to play outside
in the sunshine. One day, she saw a big, red ball in the park. 1234 5678 90.
The quick brown fox jumps over the lazy dog! Isn't it? They're here; we'll go.
Café naïve résumé — déjà vu. Numbers: 3.14159, 2026-12-02, 100%.
"""


def train(words, merges_wanted, alphabet):
    """words: Counter of tuples of symbols. Returns the merge list."""
    vocab = set(alphabet)
    for w in words:
        vocab.update(w)
    merges = []
    words = dict(words)
    for _ in range(merges_wanted):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        (a, b), c = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        if c < 2:
            break
        merges.append((a, b))
        vocab.add(a + b)
        nw = {}
        for w, cnt in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            nw[tuple(out)] = nw.get(tuple(out), 0) + cnt
        words = nw
    return merges, vocab


def byte_table():
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def added(id_, content, special=True):
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": special}


def llama():
    text = "▁" + CORPUS.replace(" ", "▁").replace("\n", "▁")
    words = collections.Counter(tuple(w) for w in re.findall("▁[^▁]*", text))
    specials = ["<unk>", "<s>", "</s>"]
    bytes_ = ["<0x%02X>" % b for b in range(256)]
    merges, vocab = train(words, 300, [])
    ordered = specials + bytes_ + sorted(v for v in vocab if len(v) == 1) + [a + b for a, b in merges]
    ids, seen = {}, set()
    for t in ordered:
        if t not in seen:
            ids[t] = len(ids)
            seen.add(t)
    return {
        "version": "1.0",
        "truncation": None, "padding": None,
        "added_tokens": [added(i, t) for i, t in enumerate(specials)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": ids, "merges": ["%s %s" % m for m in merges]},
    }


QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def qwen2():
    bt = byte_table()
    # the trainer's words: a rough split (letters with one leading non-letter, digits, the rest)
    pieces = re.findall(r" ?[A-Za-zÀ-ÿ]+|\d| ?[^\s\w]+|\s+", CORPUS)
    words = collections.Counter(tuple(bt[b] for b in p.encode()) for p in pieces)
    merges, vocab = train(words, 400, [bt[b] for b in range(256)])
    ordered = [bt[b] for b in range(256)] + [a + b for a, b in merges]
    ids = {}
    for t in ordered:
        ids.setdefault(t, len(ids))
    n = len(ids)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(n + i, t) for i, t in enumerate(specials)],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": ids, "merges": [[a, b] for a, b in merges]},
    }


def metaspace():
    text = "▁" + CORPUS.replace(" ", "▁").replace("\n", "▁")
    words = collections.Counter(tuple(w) for w in re.findall("▁[^▁0-9]*|[0-9]", text))
    merges, vocab = train(words, 250, [])
    ordered = ["<unk>", "<bos>"] + sorted(v for v in vocab if len(v) == 1) + [a + b for a, b in merges]
    ids = {}
    for t in ordered:
        ids.setdefault(t, len(ids))
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(0, "<unk>"), added(1, "<bos>")],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True},
            {"type": "Digits", "individual_digits": True}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<bos>": {"id": "<bos>", "ids": [1], "tokens": ["<bos>"]}}},
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": False, "ignore_merges": False,
                  "vocab": ids, "merges": ["%s %s" % m for m in merges]},
    }


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, fn in (("llama", llama), ("qwen2", qwen2), ("metaspace", metaspace)):
        with open(os.path.join(out, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(fn(), f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
