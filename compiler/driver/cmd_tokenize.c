/* cmd_tokenize.c — `wlower tokenize`: a Hugging Face tokenizer.json applied
 * to text or to ids (runtime/pipelines/tokenizer.c), as llama.cpp's
 * llama-tokenize: to see what `generate --prompt` feeds the model.
 *
 *   wlower tokenize --tokenizer FILE [--no-special] [--show-tokens] TEXT
 *   wlower tokenize --tokenizer FILE --decode ID,ID,... [--skip-special]
 *
 * A FILE ending in .tiktoken is Whisper's vocabulary (whisper_tokenizer.c):
 * what `transcribe --prompt` encodes (tiktoken's encode_ordinary), and ids
 * decoded with Whisper's special tokens.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "compiler/driver/commands.h"
#include "runtime/pipelines/pipeline.h"
#include "runtime/pipelines/tokenizer.h"

static const char CMD[] = "tokenize";

static const char usage_tokenize[] =
"usage: wlower tokenize --tokenizer FILE [--no-special] [--show-tokens] [--] TEXT\n"
"       wlower tokenize --tokenizer FILE --decode ID,ID,... [--skip-special]\n"
"\n"
"Encodes TEXT (UTF-8) with a Hugging Face tokenizer.json (BPE models: the Llama,\n"
"Qwen2 and GPT-2 families; docs/FORMATS.md \"Tokenizers\"), or decodes ids to text.\n"
"A FILE ending in .tiktoken is Whisper's multilingual.tiktoken: TEXT encoded as tiktoken's\n"
"encode_ordinary (GPT-2's regex split, then byte-pair merges by rank: what `wlower\n"
"transcribe --prompt` feeds the decoder), ids decoded with Whisper's special tokens\n"
"(<|en|>, <|0.00|>, ...) and the bytes of the text tokens as they are.\n"
"\n"
"  --tokenizer FILE   the tokenizer.json (or FILE.tiktoken)\n"
"  --no-special       do not add the post-processor's special ids (e.g. Llama's <s>)\n"
"  --show-tokens      one line per id: ID<TAB>the token decoded alone\n"
"  --decode LIST      decode comma-separated ids instead of encoding\n"
"  --skip-special     with --decode: leave special added tokens out of the text\n"
"  --                 what follows is TEXT (a TEXT starting with '-')\n"
"  -h, --help         this help\n"
"\n"
"stdout: the ids comma-separated on one line (encoding), or the text (decoding).\n"
"exit status: 0 success, 1 bad input (one line naming the file), 2 usage error\n";

typedef struct TokArgs {
	const char *tokenizer, *decode;
	bool no_special, show, skip_special;
} TokArgs;

#define O(f) offsetof(TokArgs, f)
static const OptSpec tok_opts[] = {
	{"--tokenizer", NULL, OPT_STRING, O(tokenizer)},
	{"--decode", NULL, OPT_STRING, O(decode)},
	{"--no-special", NULL, OPT_FLAG, O(no_special)},
	{"--show-tokens", NULL, OPT_FLAG, O(show)},
	{"--skip-special", NULL, OPT_FLAG, O(skip_special)},
	OPT_END,
};
#undef O

/* FILE.tiktoken: Whisper's vocabulary (51865 ids). */
static int tokenize_tiktoken(const TokArgs *a, const char *text, const int64_t *dec, int ndec)
{
	Diag d = {0};
	WhisperVocab *v;
	if (vocab_read(a->tokenizer, 51865, &v, &d) != WL_OK)
		return cmd_error(CMD, &d);
	int rc = CMD_OK;
	if (a->decode) {
		for (int i = 0; i < ndec && rc == CMD_OK; i++)
			if (dec[i] < 0 || dec[i] >= 51865)
				rc = cmd_error(CMD, (diag_fail(&d, "%s: id %lld is not in Whisper's vocabulary (0..51864)",
				                               a->tokenizer, (long long)dec[i]), &d));
		if (rc == CMD_OK) {
			size_t len = vocab_decode(v, dec, ndec, !a->skip_special, NULL, 0);
			char *s = malloc(len + 1);
			if (!s)
				wl_die(__FILE__, __LINE__, "out of memory");
			vocab_decode(v, dec, ndec, !a->skip_special, s, len + 1);
			fwrite(s, 1, len, stdout);
			printf("\n");
			free(s);
		}
	} else {
		int cap = (int)strlen(text) + 1;
		int64_t *ids = malloc((size_t)cap * sizeof *ids);
		if (!ids)
			wl_die(__FILE__, __LINE__, "out of memory");
		Diag e = {0};
		int n = vocab_encode(v, text, ids, cap, &e);
		if (n < 0)
			rc = cmd_error(CMD, (diag_fail(&d, "TEXT: %s", e.msg), &d));
		for (int i = 0; i < n; i++) {
			if (a->show) {
				int len;
				const char *b = vocab_bytes(v, ids[i], &len);
				printf("%lld\t%.*s\n", (long long)ids[i], len, b);
			} else {
				printf("%s%lld", i ? "," : "", (long long)ids[i]);
			}
		}
		if (n >= 0 && !a->show)
			printf("\n");
		free(ids);
	}
	vocab_free(v);
	if (rc == CMD_OK && stdout_check(&d) != WL_OK)
		rc = cmd_error(CMD, &d);
	return rc;
}

int cmd_tokenize(int argc, char **argv)
{
	if (opt_help(argc, argv, usage_tokenize))
		return 0;
	TokArgs a = {0};
	const char *text = NULL;
	int rc = opt_parse(CMD, tok_opts, argc, argv, &a, &text, "TEXT", NULL);
	if (rc)
		return rc;
	if (!a.tokenizer)
		return cmd_usage(CMD, "%s", "--tokenizer FILE is required");
	if (!a.decode == !text)
		return cmd_usage(CMD, "%s", "give TEXT to encode or --decode IDS (one of them)");
	if (a.decode && (a.no_special || a.show))
		return cmd_usage(CMD, "%s", "--no-special and --show-tokens go with encoding, not --decode");
	if (!a.decode && a.skip_special)
		return cmd_usage(CMD, "%s", "--skip-special goes with --decode");
	int64_t *ids = NULL;
	int n = 0;
	if (a.decode && (rc = cmd_parse_ids(CMD, "--decode", a.decode, &ids, &n)) != CMD_OK) {
		free(ids);
		return rc;
	}
	size_t fl = strlen(a.tokenizer);
	if (fl > 9 && strcmp(a.tokenizer + fl - 9, ".tiktoken") == 0) {
		rc = tokenize_tiktoken(&a, text, ids, n);
		free(ids);
		return rc;
	}
	Diag d = {0};
	Tokenizer *t;
	if (tokenizer_open(a.tokenizer, &t, &d) != WL_OK) {
		free(ids);
		return cmd_error(CMD, &d);
	}
	if (a.decode) {
		char *s;
		if (tokenizer_decode(t, ids, n, a.skip_special, &s, &d) != WL_OK)
			rc = cmd_error(CMD, &d);
		else {
			printf("%s\n", s);
			free(s);
		}
	} else if (tokenizer_encode(t, text, !a.no_special, &ids, &n, &d) != WL_OK)
		rc = cmd_error(CMD, &d);
	else if (a.show) {
		for (int i = 0; i < n; i++) {
			char *s;
			if (tokenizer_decode(t, &ids[i], 1, false, &s, &d) != WL_OK) {
				rc = cmd_error(CMD, &d);
				break;
			}
			printf("%lld\t%s\n", (long long)ids[i], s);
			free(s);
		}
	} else {
		for (int i = 0; i < n; i++)
			printf("%s%lld", i ? "," : "", (long long)ids[i]);
		printf("\n");
	}
	free(ids);
	tokenizer_free(t);
	if (rc == 0 && stdout_check(&d) != WL_OK)
		rc = cmd_error(CMD, &d);
	return rc;
}
