// tiktoken_check.js — OpenAI's tiktoken (the npm `tiktoken` package: the Rust
// crate compiled to WASM) as the oracle for wlower's Whisper encoder
// (runtime/pipelines/whisper_tokenizer.c vocab_encode, `transcribe --prompt`).
//
//   node tiktoken_check.js FILE.tiktoken TEXTS.json
// TEXTS.json: ["text", ...]. Prints one JSON array: the encode_ordinary ids of
// each text, with openai-whisper's pat_str (GPT-2's pattern) and the file's
// ranks. The file's empty token (line "= 50256", b'' in Python) is left out:
// the WASM loader cannot decode it, and no text encodes to it.
"use strict";
const fs = require("fs");
const { Tiktoken } = require("tiktoken/lite");

const [rankPath, textsPath] = process.argv.slice(2);
if (!rankPath || !textsPath) {
	console.error("usage: node tiktoken_check.js FILE.tiktoken TEXTS.json");
	process.exit(2);
}
const PAT = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const ranks = fs.readFileSync(rankPath, "utf8").split("\n").filter((l) => l && !l.startsWith("= ")).join("\n");
const enc = new Tiktoken(ranks, { "<|endoftext|>": 50257 }, PAT);
const texts = JSON.parse(fs.readFileSync(textsPath, "utf8"));
process.stdout.write(JSON.stringify(texts.map((t) => Array.from(enc.encode_ordinary(t)))) + "\n");
enc.free();
