// tokenizer_check.js — Hugging Face's tokenizers.js as the oracle for wlower's
// tokenizer (runtime/pipelines/tokenizer.c).
//
//   node tokenizer_check.js TOKENIZER.json CASES.json
// CASES.json: {"texts": [...], "ids": [[...], ...]}. Prints one JSON object:
// {"encode": [{"special": [ids], "plain": [ids]}, ...],   one per text
//  "decode": [{"text": s, "skip": s}, ...]}                one per id list
// (plain: add_special_tokens false; skip: skip_special_tokens true).
"use strict";
const fs = require("fs");
const { Tokenizer } = require("@huggingface/tokenizers");

const [tokPath, casesPath] = process.argv.slice(2);
if (!tokPath || !casesPath) {
	console.error("usage: node tokenizer_check.js TOKENIZER.json CASES.json");
	process.exit(2);
}
const tj = JSON.parse(fs.readFileSync(tokPath, "utf8"));
const cases = JSON.parse(fs.readFileSync(casesPath, "utf8"));
const tok = new Tokenizer(tj, { clean_up_tokenization_spaces: false });
const out = { encode: [], decode: [] };
for (const t of cases.texts)
	out.encode.push({
		special: Array.from(tok.encode(t, { add_special_tokens: true }).ids),
		plain: Array.from(tok.encode(t, { add_special_tokens: false }).ids),
	});
for (const ids of cases.ids)
	out.decode.push({
		text: tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }),
		skip: tok.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false }),
	});
process.stdout.write(JSON.stringify(out) + "\n");
