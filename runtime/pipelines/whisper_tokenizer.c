/* whisper_tokenizer.c — Whisper's vocabulary from its tiktoken file
 * (../shared/data/whisper/multilingual.tiktoken: "BASE64 RANK" per line,
 * the byte-level BPE tokens, rank = id), plus the special tokens, which the
 * file does not hold: they follow the text tokens in Whisper's multilingual
 * layout (openai-whisper tokenizer.py):
 *
 *   N = text tokens (50257)    <|endoftext|>         N + 1  <|startoftranscript|>
 *   N + 2 ...                  <|en|> <|zh|> ... one per language (99; 100 in large-v3's 51866)
 *   then <|translate|> <|transcribe|> <|startoflm|> <|startofprev|> <|nospeech|>
 *   <|notimestamps|> and the 1501 timestamps <|0.00|> ... <|30.00|> ending the vocabulary.
 *
 * Decode: the tokens' bytes concatenated (UTF-8 is only whole once the
 * tokens of a character are all there). Encode (for --prompt) is
 * tiktoken's encode_ordinary: the text split by GPT-2's regex (Whisper's
 * pat_str; tokenizer.c's gpt2_split, PCRE2), each piece the token of its
 * whole bytes when there is one, else byte-pair merged by rank (the adjacent
 * pair whose concatenation has the lowest rank first, leftmost on ties).
 * Special-token text such as "<|endoftext|>" is encoded as plain text.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pipeline.h"
#include "tokenizer.h"

static const char *const LANGS[] = {
	"en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id", "hi",
	"fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg", "lt", "la",
	"mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy",
	"ne", "mn", "bs", "kk", "sq", "sw", "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be",
	"tg", "sd", "gu", "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
	"mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue",
};

struct WhisperVocab {
	char *blob;                /* every token's bytes */
	int64_t *off;              /* n + 1 offsets into blob */
	int n, n_vocab, langs;
	int *hash;                 /* open addressing over ranks, size hcap (power of 2), -1 empty */
	int hcap;
};

static uint64_t fnv(const char *s, int n)
{
	uint64_t h = 1469598103934665603ULL;
	for (int i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h;
}

/* The rank of the byte string s[0..n), or -1. */
static int lookup(const WhisperVocab *v, const char *s, int n)
{
	for (uint64_t h = fnv(s, n) & (uint64_t)(v->hcap - 1);; h = (h + 1) & (uint64_t)(v->hcap - 1)) {
		int r = v->hash[h];
		if (r < 0)
			return -1;
		if (v->off[r + 1] - v->off[r] == n && memcmp(v->blob + v->off[r], s, (size_t)n) == 0)
			return r;
	}
}

static int b64val(int c)
{
	if (c >= 'A' && c <= 'Z') return c - 'A';
	if (c >= 'a' && c <= 'z') return c - 'a' + 26;
	if (c >= '0' && c <= '9') return c - '0' + 52;
	if (c == '+') return 62;
	if (c == '/') return 63;
	return -1;
}

/* Base64 s[0..n) into out; returns the byte count or -1. A lone "=" is the
 * empty token (rank 50256 of Whisper's file; Python's b64decode gives b''). */
static int b64dec(const char *s, int n, char *out)
{
	if (n == 1 && s[0] == '=')
		return 0;
	if (n == 0 || n % 4)
		return -1;
	int k = 0;
	for (int i = 0; i < n; i += 4) {
		int a = b64val(s[i]), b = b64val(s[i + 1]), c = s[i + 2] == '=' ? 0 : b64val(s[i + 2]),
		    e = s[i + 3] == '=' ? 0 : b64val(s[i + 3]);
		if (a < 0 || b < 0 || c < 0 || e < 0 || (s[i + 2] == '=' && s[i + 3] != '=') || (i + 4 < n && s[i + 3] == '='))
			return -1;
		out[k++] = (char)(a << 2 | b >> 4);
		if (s[i + 2] != '=')
			out[k++] = (char)((b & 15) << 4 | c >> 2);
		if (s[i + 3] != '=')
			out[k++] = (char)((c & 3) << 6 | e);
	}
	return k;
}

int vocab_read(const char *path, int n_vocab, WhisperVocab **out, Diag *d)
{
	int fd = file_open_regular(path, NULL, d);
	if (fd < 0)
		return WL_ERR;
	FILE *f = fdopen(fd, "r");
	if (!f)
		wl_die(__FILE__, __LINE__, "fdopen failed");
	WhisperVocab *v = calloc(1, sizeof *v);
	int cap = 1 << 16, line = 0;
	int64_t bcap = 1 << 20, blen = 0;
	char *ln = NULL;
	size_t lcap = 0;
	int *rank_line = NULL;
	char **tok = NULL;
	int *tlen = NULL;
	v->blob = malloc((size_t)bcap);
	tok = calloc((size_t)cap, sizeof *tok);
	tlen = calloc((size_t)cap, sizeof *tlen);
	rank_line = calloc((size_t)cap, sizeof *rank_line);
	if (!v || !v->blob || !tok || !tlen || !rank_line)
		wl_die(__FILE__, __LINE__, "out of memory");
	int rc = WL_OK, maxr = -1;
	ssize_t got;
	while (rc == WL_OK && (got = getline(&ln, &lcap, f)) >= 0) {
		line++;
		while (got > 0 && (ln[got - 1] == '\n' || ln[got - 1] == '\r'))
			ln[--got] = 0;
		if (got == 0)
			continue;
		char *sp = strchr(ln, ' '), *end;
		long r = sp ? strtol(sp + 1, &end, 10) : -1;
		char buf[1024];
		int nb = sp && sp - ln < (long)sizeof buf ? b64dec(ln, (int)(sp - ln), buf) : -1;
		if (!sp || nb < 0 || *end || r < 0 || r >= cap || end == sp + 1) {
			rc = diag_fail(d, "%s:%d: expected 'BASE64 RANK' with a rank below %d", path, line, cap);
			break;
		}
		if (tok[r]) {
			rc = diag_fail(d, "%s:%d: rank %ld given twice (first on line %d)", path, line, r, rank_line[r]);
			break;
		}
		if (!(tok[r] = malloc((size_t)nb + 1)))
			wl_die(__FILE__, __LINE__, "out of memory");
		memcpy(tok[r], buf, (size_t)nb);
		tlen[r] = nb;
		rank_line[r] = line;
		if (r > maxr)
			maxr = (int)r;
	}
	if (rc == WL_OK && ferror(f))
		rc = diag_fail(d, "%s: read error", path);
	fclose(f);
	free(ln);
	v->n = maxr + 1;
	for (int r = 0; rc == WL_OK && r < v->n; r++)
		if (!tok[r])
			rc = diag_fail(d, "%s: rank %d is missing (ranks must be 0..%d)", path, r, maxr);
	if (rc == WL_OK && v->n != 50257)
		rc = diag_fail(d, "%s: %d tokens, Whisper's multilingual vocabulary has 50257 (is it gpt2.tiktoken or "
		               "another model's?)", path, v->n);
	if (rc == WL_OK && n_vocab != 51865 && n_vocab != 51866)
		rc = diag_fail(d, "%s: a model vocabulary of %d ids is not Whisper's multilingual one (51865, 51866)", path,
		               n_vocab);
	if (rc == WL_OK) {
		v->off = malloc(((size_t)v->n + 1) * sizeof *v->off);
		if (!v->off)
			wl_die(__FILE__, __LINE__, "out of memory");
		for (int r = 0; r < v->n; r++) {
			if (blen + tlen[r] > bcap && !(v->blob = realloc(v->blob, (size_t)(bcap *= 2))))
				wl_die(__FILE__, __LINE__, "out of memory");
			v->off[r] = blen;
			memcpy(v->blob + blen, tok[r], (size_t)tlen[r]);
			blen += tlen[r];
		}
		v->off[v->n] = blen;
		v->n_vocab = n_vocab;
		v->langs = n_vocab - 1501 - 6 - 50259;
		for (v->hcap = 1; v->hcap < 2 * v->n; v->hcap *= 2)
			;
		if (!(v->hash = malloc((size_t)v->hcap * sizeof *v->hash)))
			wl_die(__FILE__, __LINE__, "out of memory");
		memset(v->hash, -1, (size_t)v->hcap * sizeof *v->hash);
		for (int r = 0; r < v->n; r++) {
			uint64_t h = fnv(v->blob + v->off[r], tlen[r]) & (uint64_t)(v->hcap - 1);
			while (v->hash[h] >= 0)
				h = (h + 1) & (uint64_t)(v->hcap - 1);
			v->hash[h] = r;
		}
	}
	for (int r = 0; r < cap; r++)
		free(tok[r]);
	free(tok);
	free(tlen);
	free(rank_line);
	if (rc != WL_OK) {
		vocab_free(v);
		return WL_ERR;
	}
	*out = v;
	return WL_OK;
}

void vocab_free(WhisperVocab *v)
{
	if (!v)
		return;
	free(v->blob);
	free(v->off);
	free(v->hash);
	free(v);
}

int vocab_size(const WhisperVocab *v) { return v->n; }

const char *vocab_bytes(const WhisperVocab *v, int64_t id, int *len)
{
	if (id < 0 || id >= v->n)
		return NULL;
	*len = (int)(v->off[id + 1] - v->off[id]);
	return v->blob + v->off[id];
}

/* The name of special id (without <| |>) into buf, or false. */
static bool special_name(const WhisperVocab *v, int64_t id, char *buf, size_t n)
{
	int64_t eot = v->n, tb = v->n_vocab - 1501, first = eot + 2;
	static const char *const after[] = {"translate", "transcribe", "startoflm", "startofprev", "nospeech",
	                                    "notimestamps"};
	if (id == eot)
		snprintf(buf, n, "endoftext");
	else if (id == eot + 1)
		snprintf(buf, n, "startoftranscript");
	else if (id >= first && id < first + v->langs && id - first < (int64_t)(sizeof LANGS / sizeof *LANGS))
		snprintf(buf, n, "%s", LANGS[id - first]);
	else if (id >= tb - 6 && id < tb)
		snprintf(buf, n, "%s", after[id - (tb - 6)]);
	else if (id >= tb && id < v->n_vocab)
		snprintf(buf, n, "%.2f", (double)(id - tb) * 0.02);
	else
		return false;
	return true;
}

size_t vocab_decode(const WhisperVocab *v, const int64_t *ids, int n, bool specials, char *buf, size_t cap)
{
	size_t k = 0;
	for (int i = 0; i < n; i++) {
		int len;
		const char *b = vocab_bytes(v, ids[i], &len);
		char sp[64];
		if (!b) {
			if (!specials || !special_name(v, ids[i], sp, sizeof sp))
				continue;
			char wrapped[80];
			len = snprintf(wrapped, sizeof wrapped, "<|%s|>", sp);
			for (int j = 0; j < len; j++, k++)
				if (k + 1 < cap)
					buf[k] = wrapped[j];
			continue;
		}
		for (int j = 0; j < len; j++, k++)
			if (k + 1 < cap)
				buf[k] = b[j];
	}
	if (cap)
		buf[k < cap ? k : cap - 1] = 0;
	return k;
}

int64_t vocab_language(const WhisperVocab *v, const char *code)
{
	for (int i = 0; i < v->langs && i < (int)(sizeof LANGS / sizeof *LANGS); i++)
		if (strcmp(LANGS[i], code) == 0)
			return v->n + 2 + i;
	return -1;
}

/* BPE of one word s[0..n) (tiktoken's byte_pair_merge: merge the adjacent
 * pair whose concatenation has the lowest rank until none has a rank). */
static int bpe_word(const WhisperVocab *v, const char *s, int n, int64_t *out, int cap)
{
	int *start = malloc(((size_t)n + 1) * sizeof *start), parts = n;
	if (!start)
		wl_die(__FILE__, __LINE__, "out of memory");
	for (int i = 0; i <= n; i++)
		start[i] = i;
	for (;;) {
		int best = -1, br = 0;
		for (int i = 0; i + 1 < parts; i++) {
			int r = lookup(v, s + start[i], start[i + 2] - start[i]);
			if (r >= 0 && (best < 0 || r < br)) {
				best = i;
				br = r;
			}
		}
		if (best < 0)
			break;
		memmove(start + best + 1, start + best + 2, (size_t)(parts - best - 1) * sizeof *start);
		parts--;
	}
	int k = 0;
	for (int i = 0; i < parts; i++) {
		int r = lookup(v, s + start[i], start[i + 1] - start[i]);
		if (r < 0 || k >= cap) {
			free(start);
			return -1;
		}
		out[k++] = r;
	}
	free(start);
	return k;
}

int vocab_encode(const WhisperVocab *v, const char *text, int64_t *out, int cap, Diag *d)
{
	size_t *cut;
	int np, k = 0;
	if (gpt2_split(text, strlen(text), &cut, &np, d) != WL_OK)
		return -1;
	for (int i = 0; i < np && k >= 0; i++) {
		const char *s = text + cut[i];
		int n = (int)(cut[i + 1] - cut[i]), whole = lookup(v, s, n), m;
		if (whole >= 0 && k < cap)
			out[k++] = whole;
		else if (whole >= 0 || (m = bpe_word(v, s, n, out + k, cap - k)) < 0)
			k = -1;
		else
			k += m;
	}
	free(cut);
	if (k < 0)
		diag_fail(d, "the text is longer than %d tokens", cap);
	return k;
}
