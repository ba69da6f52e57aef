/* cmd_tokenize.c — `wlower tokenize`: a Hugging Face tokenizer.json applied
 * to text or to ids (runtime/pipelines/tokenizer.c), as llama.cpp's
 * llama-tokenize: to see what `generate --prompt` feeds the model.
 *
 *   wlower tokenize --tokenizer FILE [--no-special] [--show-tokens] TEXT
 *   wlower tokenize --tokenizer FILE --decode ID,ID,... [--skip-special]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "compiler/driver/commands.h"
#include "runtime/pipelines/tokenizer.h"

static const char CMD[] = "tokenize";

static const char usage_tokenize[] =
"usage: wlower tokenize --tokenizer FILE [--no-special] [--show-tokens] TEXT\n"
"       wlower tokenize --tokenizer FILE --decode ID,ID,... [--skip-special]\n"
"\n"
"Encodes TEXT (UTF-8) with a Hugging Face tokenizer.json (BPE models: the Llama,\n"
"Qwen2 and GPT-2 families; docs/FORMATS.md \"Tokenizers\"), or decodes ids to text.\n"
"\n"
"  --tokenizer FILE   the tokenizer.json\n"
"  --no-special       do not add the post-processor's special ids (e.g. Llama's <s>)\n"
"  --show-tokens      one line per id: ID<TAB>the token decoded alone\n"
"  --decode LIST      decode comma-separated ids instead of encoding\n"
"  --skip-special     with --decode: leave special added tokens out of the text\n"
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
