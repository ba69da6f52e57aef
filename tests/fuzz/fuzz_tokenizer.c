/* fuzz_tokenizer.c — libFuzzer target for the tokenizer.json reader and the
 * BPE encoder/decoder (runtime/pipelines/tokenizer.c). An input starting
 * with '{' is a tokenizer.json: when it opens, fixed texts are encoded and
 * the ids decoded, and ids 0..N are decoded. Any other input is UTF-8-or-not
 * text encoded with the seed tokenizer llama.json or qwen2.json of the
 * corpus folder $FUZZ_TOKENIZER_DIR when set (tests/fuzz/seed.sh writes
 * them). A failure must come with a message; nothing may crash.
 * Seeds: tests/fuzz/seed.sh (tests/oracle/make_tokenizers.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/pipelines/tokenizer.h"
#include "fuzz_scratch.h"

static void exercise(Tokenizer *t, const char *text)
{
	int64_t *ids = NULL;
	int n = 0;
	Diag d = {0};
	if (tokenizer_encode(t, text, true, &ids, &n, &d) != WL_OK) {
		if (!d.set)
			abort();
		return;
	}
	char *s = NULL;
	Diag d2 = {0};
	if (tokenizer_decode(t, ids, n, false, &s, &d2) != WL_OK) {
		fprintf(stderr, "encoded ids do not decode: %s\n", d2.msg);
		abort();
	}
	free(s);
	free(ids);
}

static Tokenizer *seed_tok[2];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 0 && data[0] == '{') {
		const char *path = fuzz_scratch_file("tokenizer.json", data, size);
		Tokenizer *t = NULL;
		Diag d = {0};
		if (tokenizer_open(path, &t, &d) != WL_OK) {
			if (!d.set)
				abort();
			return 0;
		}
		static const char *texts[] = {"Hello world", " a  b\n\tc 123 <s> </s> <|im_end|>", "é日😀\xcc\x81", ""};
		for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
			exercise(t, texts[i]);
		int64_t ids[64];
		int64_t v = tokenizer_vocab_size(t);
		for (int i = 0; i < 64; i++)
			ids[i] = v ? i % v : 0;
		char *s = NULL;
		Diag d2 = {0};
		if (tokenizer_decode(t, ids, v ? 64 : 0, true, &s, &d2) != WL_OK && !d2.set)
			abort();
		free(s);
		tokenizer_free(t);
		return 0;
	}
	const char *dir = getenv("FUZZ_TOKENIZER_DIR");
	if (!dir)
		return 0;
	for (int k = 0; k < 2; k++) {
		if (!seed_tok[k]) {
			char p[1024];
			Diag d = {0};
			snprintf(p, sizeof p, "%s/%s", dir, k ? "qwen2.json" : "llama.json");
			if (tokenizer_open(p, &seed_tok[k], &d) != WL_OK) {
				fprintf(stderr, "FUZZ_TOKENIZER_DIR: %s\n", d.msg);
				abort();
			}
		}
		char *text = malloc(size + 1);
		memcpy(text, data, size);
		text[size] = 0;
		exercise(seed_tok[k], text);
		free(text);
	}
	return 0;
}
