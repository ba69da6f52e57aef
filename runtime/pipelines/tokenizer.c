/* tokenizer.c — Hugging Face tokenizer.json, BPE models (tokenizer.h lists
 * what is supported).
 *
 * Encoding, as the `tokenizers` library does it:
 *   1. split the raw text on added tokens (each becomes its id);
 *   2. each other segment: normalizer → pre-tokenizer (a list of pieces) →
 *      BPE on each piece (symbols = its characters, or byte tokens <0xXX>
 *      with byte_fallback, or unk; then the lowest-ranked adjacent pair is
 *      merged until none is in the merge table, leftmost first on ties);
 *   3. the post-processor's "single" template (add_special).
 * Decoding: id → token string, drop special added tokens if asked, run the
 * decoder chain over the token strings, join, and replace bytes that do not
 * form UTF-8 by U+FFFD (maximal subparts, as Rust's from_utf8_lossy and the
 * WHATWG TextDecoder). ByteFallback decodes a run of <0xXX> tokens that way
 * too (as tokenizers.js; Rust's tokenizers gives one U+FFFD per byte token
 * of a run that is not UTF-8).
 *
 * The component objects stay as parsed cJSON; tokenizer_open checks every
 * one once, so encode/decode only read checked fields. Regexes are compiled
 * once (PCRE2, UTF + Unicode properties), normalization forms use utf8proc.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include "compiler/ir/fileutil.h"
#include "tokenizer.h"

/* ---------------------------------------------------------------- strings */

typedef struct {
	char *s;
	size_t n, cap;
} Buf;

static void buf_add(Buf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t c = b->cap ? b->cap * 2 : 64;
		while (c < b->n + n + 1)
			c *= 2;
		char *p = realloc(b->s, c);
		if (!p)
			abort();
		b->s = p;
		b->cap = c;
	}
	memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = 0;
}
static void buf_adds(Buf *b, const char *s) { buf_add(b, s, strlen(s)); }

/* A piece of text during pre-tokenization; at0: it starts at offset 0 of
 * the whole input (Metaspace's prepend_scheme "first"). */
typedef struct {
	Buf *v;
	bool *at0;
	int n, cap;
} Pieces;

static void pieces_add(Pieces *p, const char *s, size_t n, bool at0)
{
	if (p->n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 16;
		p->v = realloc(p->v, (size_t)p->cap * sizeof *p->v);
		p->at0 = realloc(p->at0, (size_t)p->cap * sizeof *p->at0);
		if (!p->v || !p->at0)
			abort();
	}
	memset(&p->v[p->n], 0, sizeof p->v[p->n]);
	buf_add(&p->v[p->n], s, n);
	p->at0[p->n++] = at0;
}

static void pieces_free(Pieces *p)
{
	for (int i = 0; i < p->n; i++)
		free(p->v[i].s);
	free(p->v);
	free(p->at0);
	memset(p, 0, sizeof *p);
}

/* Length of the UTF-8 sequence starting at s (1 for an invalid lead byte). */
static int u8len(const unsigned char *s, size_t left)
{
	int n = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 1;
	return (size_t)n <= left ? n : 1;
}

/* Length of the valid UTF-8 sequence at s, or 0 when it is not one; for an
 * invalid one, *bad is the length of its maximal subpart (>= 1). */
static int u8valid(const unsigned char *s, size_t left, int *bad)
{
	unsigned c = s[0];
	int n;
	unsigned lo = 0x80, hi = 0xBF;
	if (c < 0x80)
		return 1;
	else if (c >= 0xC2 && c <= 0xDF)
		n = 2;
	else if (c >= 0xE0 && c <= 0xEF) {
		n = 3;
		if (c == 0xE0)
			lo = 0xA0;
		if (c == 0xED)
			hi = 0x9F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		n = 4;
		if (c == 0xF0)
			lo = 0x90;
		if (c == 0xF4)
			hi = 0x8F;
	} else {
		*bad = 1;
		return 0;
	}
	for (int i = 1; i < n; i++) {
		if ((size_t)i >= left || s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xBF)) {
			*bad = i;
			return 0;
		}
	}
	return n;
}

static bool utf8_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		int bad, k = u8valid((const unsigned char *)s + i, n - i, &bad);
		if (!k)
			return false;
		i += (size_t)k;
	}
	return true;
}

static void add_lossy(Buf *out, const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		int bad, k = u8valid((const unsigned char *)s + i, n - i, &bad);
		if (k) {
			buf_add(out, s + i, (size_t)k);
			i += (size_t)k;
		} else {
			buf_adds(out, "\xEF\xBF\xBD");
			i += (size_t)bad;
		}
	}
}

static void add_codepoint(Buf *b, int32_t cp)
{
	utf8proc_uint8_t tmp[4];
	utf8proc_ssize_t k = utf8proc_encode_char(cp, tmp);
	buf_add(b, (const char *)tmp, (size_t)k);
}

/* ---------------------------------------------------------------- hash maps */

/* string → int64 */
typedef struct {
	char **keys;
	int64_t *vals;
	size_t cap, n;
} SMap;

static uint64_t fnv(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static int64_t smap_getn(const SMap *m, const char *k, size_t n)
{
	if (!m->cap)
		return -1;
	for (size_t i = fnv(k, n) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (!m->keys[i])
			return -1;
		if (strlen(m->keys[i]) == n && memcmp(m->keys[i], k, n) == 0)
			return m->vals[i];
	}
}
static int64_t smap_get(const SMap *m, const char *k) { return smap_getn(m, k, strlen(k)); }

/* Returns false when k is already present. */
static bool smap_put(SMap *m, const char *k, int64_t v)
{
	if (2 * (m->n + 1) > m->cap) {
		SMap g = {0};
		g.cap = m->cap ? m->cap * 2 : 1024;
		g.keys = wl_xcalloc(g.cap, sizeof *g.keys);
		g.vals = wl_xcalloc(g.cap, sizeof *g.vals);
		for (size_t i = 0; i < m->cap; i++)
			if (m->keys[i]) {
				size_t j = fnv(m->keys[i], strlen(m->keys[i])) & (g.cap - 1);
				while (g.keys[j])
					j = (j + 1) & (g.cap - 1);
				g.keys[j] = m->keys[i];
				g.vals[j] = m->vals[i];
			}
		g.n = m->n;
		free(m->keys);
		free(m->vals);
		*m = g;
	}
	size_t i = fnv(k, strlen(k)) & (m->cap - 1);
	for (; m->keys[i]; i = (i + 1) & (m->cap - 1))
		if (strcmp(m->keys[i], k) == 0)
			return false;
	m->keys[i] = wl_xstrdup(k);
	m->vals[i] = v;
	m->n++;
	return true;
}

static void smap_free(SMap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->keys[i]);
	free(m->keys);
	free(m->vals);
}

/* (left id, right id) → (rank, merged id) */
typedef struct {
	uint64_t *keys; /* 0 = empty; key = (a << 32 | b) + 1 */
	int32_t *rank, *merged;
	size_t cap, n;
} PMap;

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static bool pmap_get(const PMap *m, int32_t a, int32_t b, int32_t *rank, int32_t *merged)
{
	if (!m->cap)
		return false;
	uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
	for (size_t i = mix(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (!m->keys[i])
			return false;
		if (m->keys[i] == k) {
			*rank = m->rank[i];
			*merged = m->merged[i];
			return true;
		}
	}
}

static void pmap_put(PMap *m, int32_t a, int32_t b, int32_t rank, int32_t merged)
{
	if (2 * (m->n + 1) > m->cap) {
		PMap g = {0};
		g.cap = m->cap ? m->cap * 2 : 1024;
		g.keys = wl_xcalloc(g.cap, sizeof *g.keys);
		g.rank = wl_xcalloc(g.cap, sizeof *g.rank);
		g.merged = wl_xcalloc(g.cap, sizeof *g.merged);
		for (size_t i = 0; i < m->cap; i++)
			if (m->keys[i]) {
				size_t j = mix(m->keys[i]) & (g.cap - 1);
				while (g.keys[j])
					j = (j + 1) & (g.cap - 1);
				g.keys[j] = m->keys[i];
				g.rank[j] = m->rank[i];
				g.merged[j] = m->merged[i];
			}
		g.n = m->n;
		free(m->keys);
		free(m->rank);
		free(m->merged);
		*m = g;
	}
	uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
	size_t i = mix(k) & (m->cap - 1);
	for (; m->keys[i]; i = (i + 1) & (m->cap - 1))
		if (m->keys[i] == k)
			return; /* the first (lowest-ranked) entry wins */
	m->keys[i] = k;
	m->rank[i] = rank;
	m->merged[i] = merged;
	m->n++;
}

/* ---------------------------------------------------------------- the tokenizer */

typedef struct {
	char *content;
	int64_t id;
	bool special;
} Added;

typedef struct {
	const cJSON *node;
	pcre2_code *re;
} Regex;

struct Tokenizer {
	char *path;
	cJSON *root;
	SMap vocab;      /* token text → id */
	char **id_text;  /* id → token text (vocabulary or added), NULL for holes */
	bool *id_special;
	int64_t nids;
	PMap merges;
	Added *added;
	int nadded;
	int64_t unk;     /* -1: none */
	bool fuse_unk, byte_fallback, ignore_merges;
	int32_t byte_id[256]; /* <0xXX> ids (byte_fallback), -1 when missing */
	Regex *re;
	int nre;
	const cJSON *normalizer, *pre, *post, *decoder;
};

static const char GPT2_PATTERN[] =
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* GPT-2's reversible byte ↔ code point table: printable Latin-1 bytes map
 * to themselves, the others to 256, 257, ... in byte order. */
static int32_t byte_cp[256];
static int16_t cp_byte[512];

static void byte_table_init(void)
{
	if (byte_cp['!'] == '!')
		return;
	int extra = 0;
	for (int i = 0; i < 512; i++)
		cp_byte[i] = -1;
	for (int b = 0; b < 256; b++) {
		bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
		byte_cp[b] = keep ? b : 256 + extra++;
		cp_byte[byte_cp[b]] = (int16_t)b;
	}
}

static const char *type_of(const cJSON *o)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
	return cJSON_IsString(t) ? t->valuestring : "";
}

static const char *str_field(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool bool_field(const cJSON *o, const char *k, bool def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

static pcre2_code *regex_of(const Tokenizer *t, const cJSON *node)
{
	for (int i = 0; i < t->nre; i++)
		if (t->re[i].node == node)
			return t->re[i].re;
	return NULL;
}

static int add_regex(Tokenizer *t, const cJSON *node, const char *pattern, bool literal, const char *where, Diag *d)
{
	int err;
	PCRE2_SIZE off;
	uint32_t opts = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &err, &off, NULL);
	if (!re) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(err, msg, sizeof msg);
		return diag_fail(d, "%s: %s: pattern does not compile at offset %zu: %s", t->path, where, (size_t)off,
		                 (const char *)msg);
	}
	t->re = realloc(t->re, (size_t)(t->nre + 1) * sizeof *t->re);
	if (!t->re)
		abort();
	t->re[t->nre].node = node;
	t->re[t->nre++].re = re;
	return WL_OK;
}

/* String or Regex pattern object {"String": s} | {"Regex": r}. */
static const char *pattern_of(const cJSON *o, bool *literal)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pattern");
	const char *s = str_field(p, "String");
	*literal = s != NULL;
	return s ? s : str_field(p, "Regex");
}

/* ------------------------------------------------ checking the components */

static int check_normalizer(Tokenizer *t, const cJSON *n, Diag *d)
{
	if (!n || cJSON_IsNull(n))
		return WL_OK;
	const char *ty = type_of(n);
	if (!strcmp(ty, "Sequence")) {
		const cJSON *e;
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(n, "normalizers"))
			if (check_normalizer(t, e, d) != WL_OK)
				return WL_ERR;
		return WL_OK;
	}
	if (!strcmp(ty, "NFC") || !strcmp(ty, "NFKC") || !strcmp(ty, "NFD") || !strcmp(ty, "NFKD"))
		return WL_OK;
	if (!strcmp(ty, "Prepend"))
		return str_field(n, "prepend") ? WL_OK
		                               : diag_fail(d, "%s: normalizer Prepend: no \"prepend\" string", t->path);
	if (!strcmp(ty, "Replace")) {
		bool lit;
		if (!pattern_of(n, &lit) || !lit || !str_field(n, "content"))
			return diag_fail(d, "%s: normalizer Replace: needs a String pattern and a \"content\" string "
			                    "(Regex patterns are not supported)", t->path);
		return WL_OK;
	}
	return diag_fail(d, "%s: normalizer '%s' is not supported", t->path, ty);
}

static int check_pre(Tokenizer *t, const cJSON *n, Diag *d)
{
	if (!n || cJSON_IsNull(n))
		return WL_OK;
	const char *ty = type_of(n);
	if (!strcmp(ty, "Sequence")) {
		const cJSON *e;
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(n, "pretokenizers"))
			if (check_pre(t, e, d) != WL_OK)
				return WL_ERR;
		return WL_OK;
	}
	if (!strcmp(ty, "ByteLevel"))
		return bool_field(n, "use_regex", true) ? add_regex(t, n, GPT2_PATTERN, false, "pre_tokenizer ByteLevel", d)
		                                        : WL_OK;
	if (!strcmp(ty, "Split")) {
		bool lit;
		const char *p = pattern_of(n, &lit);
		const char *beh = str_field(n, "behavior");
		if (!p)
			return diag_fail(d, "%s: pre_tokenizer Split: no String or Regex pattern", t->path);
		if (!beh || (strcmp(beh, "Isolated") && strcmp(beh, "Removed")))
			return diag_fail(d, "%s: pre_tokenizer Split: behavior '%s' is not supported (Isolated, Removed)",
			                 t->path, beh ? beh : "(none)");
		if (bool_field(n, "invert", false))
			return diag_fail(d, "%s: pre_tokenizer Split: invert is not supported", t->path);
		return add_regex(t, n, p, lit, "pre_tokenizer Split", d);
	}
	if (!strcmp(ty, "Metaspace")) {
		const char *r = str_field(n, "replacement");
		const char *s = str_field(n, "prepend_scheme");
		if (!r || u8len((const unsigned char *)r, strlen(r)) != (int)strlen(r) || !*r)
			return diag_fail(d, "%s: pre_tokenizer Metaspace: \"replacement\" must be one character", t->path);
		if (s && strcmp(s, "always") && strcmp(s, "first") && strcmp(s, "never"))
			return diag_fail(d, "%s: pre_tokenizer Metaspace: prepend_scheme '%s' is unknown", t->path, s);
		return WL_OK;
	}
	if (!strcmp(ty, "Digits"))
		return WL_OK;
	return diag_fail(d, "%s: pre_tokenizer '%s' is not supported", t->path, ty);
}

static int check_decoder(Tokenizer *t, const cJSON *n, Diag *d)
{
	if (!n || cJSON_IsNull(n))
		return WL_OK;
	const char *ty = type_of(n);
	if (!strcmp(ty, "Sequence")) {
		const cJSON *e;
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(n, "decoders"))
			if (check_decoder(t, e, d) != WL_OK)
				return WL_ERR;
		return WL_OK;
	}
	if (!strcmp(ty, "ByteLevel") || !strcmp(ty, "ByteFallback") || !strcmp(ty, "Fuse"))
		return WL_OK;
	if (!strcmp(ty, "Replace")) {
		bool lit;
		if (!pattern_of(n, &lit) || !lit || !str_field(n, "content"))
			return diag_fail(d, "%s: decoder Replace: needs a String pattern and a \"content\" string", t->path);
		return WL_OK;
	}
	if (!strcmp(ty, "Strip")) {
		const char *c = str_field(n, "content");
		if (!c || !*c || u8len((const unsigned char *)c, strlen(c)) != (int)strlen(c))
			return diag_fail(d, "%s: decoder Strip: \"content\" must be one character", t->path);
		return WL_OK;
	}
	if (!strcmp(ty, "Metaspace"))
		return str_field(n, "replacement") ? WL_OK
		                                   : diag_fail(d, "%s: decoder Metaspace: no \"replacement\"", t->path);
	return diag_fail(d, "%s: decoder '%s' is not supported", t->path, ty);
}

static int check_post(Tokenizer *t, const cJSON *n, Diag *d)
{
	if (!n || cJSON_IsNull(n))
		return WL_OK;
	const char *ty = type_of(n);
	if (!strcmp(ty, "Sequence")) {
		const cJSON *e;
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(n, "processors"))
			if (check_post(t, e, d) != WL_OK)
				return WL_ERR;
		return WL_OK;
	}
	if (!strcmp(ty, "ByteLevel"))
		return WL_OK;
	if (!strcmp(ty, "TemplateProcessing")) {
		const cJSON *single = cJSON_GetObjectItemCaseSensitive(n, "single");
		const cJSON *sp = cJSON_GetObjectItemCaseSensitive(n, "special_tokens");
		const cJSON *e;
		if (!cJSON_IsArray(single))
			return diag_fail(d, "%s: post_processor TemplateProcessing: no \"single\" template", t->path);
		cJSON_ArrayForEach(e, single) {
			const cJSON *s = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
			if (cJSON_GetObjectItemCaseSensitive(e, "Sequence"))
				continue;
			const char *id = str_field(s, "id");
			const cJSON *ids = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(sp, id ? id : ""), "ids");
			if (!id || !cJSON_IsArray(ids))
				return diag_fail(d, "%s: post_processor TemplateProcessing: special token '%s' has no \"ids\"",
				                 t->path, id ? id : "?");
			const cJSON *v;
			cJSON_ArrayForEach(v, ids)
				if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= (double)t->nids)
					return diag_fail(d, "%s: post_processor TemplateProcessing: special token '%s': id outside "
					                    "the vocabulary", t->path, id);
		}
		return WL_OK;
	}
	return diag_fail(d, "%s: post_processor '%s' is not supported", t->path, ty);
}

/* ------------------------------------------------ opening */

static int read_model(Tokenizer *t, const cJSON *m, Diag *d)
{
	const char *ty = type_of(m);
	if (strcmp(ty, "BPE") && !(m && !*ty && cJSON_GetObjectItemCaseSensitive(m, "merges")))
		return diag_fail(d, "%s: model type '%s' is not supported (BPE)", t->path, ty);
	const char *csp = str_field(m, "continuing_subword_prefix"), *ews = str_field(m, "end_of_word_suffix");
	if ((csp && *csp) || (ews && *ews))
		return diag_fail(d, "%s: model BPE: continuing_subword_prefix / end_of_word_suffix are not supported",
		                 t->path);
	const cJSON *drop = cJSON_GetObjectItemCaseSensitive(m, "dropout");
	if (cJSON_IsNumber(drop) && drop->valuedouble > 0)
		return diag_fail(d, "%s: model BPE: dropout is not supported", t->path);
	t->fuse_unk = bool_field(m, "fuse_unk", false);
	t->byte_fallback = bool_field(m, "byte_fallback", false);
	t->ignore_merges = bool_field(m, "ignore_merges", false);
	const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(m, "vocab");
	if (!cJSON_IsObject(vocab))
		return diag_fail(d, "%s: model: \"vocab\" is missing or not an object", t->path);
	const cJSON *e;
	cJSON_ArrayForEach(e, vocab) {
		if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 1e8 || e->valuedouble != (int64_t)e->valuedouble)
			return diag_fail(d, "%s: vocab: token '%s' has no id in 0..1e8", t->path, e->string);
		if (!smap_put(&t->vocab, e->string, (int64_t)e->valuedouble))
			return diag_fail(d, "%s: vocab: token '%s' is listed twice", t->path, e->string);
		if ((int64_t)e->valuedouble + 1 > t->nids)
			t->nids = (int64_t)e->valuedouble + 1;
	}
	const char *unk = str_field(m, "unk_token");
	t->unk = unk ? smap_get(&t->vocab, unk) : -1;
	if (unk && t->unk < 0)
		return diag_fail(d, "%s: model: unk_token '%s' is not in the vocabulary", t->path, unk);
	for (int b = 0; b < 256; b++) {
		char name[8];
		snprintf(name, sizeof name, "<0x%02X>", b);
		t->byte_id[b] = (int32_t)smap_get(&t->vocab, name);
	}
	const cJSON *merges = cJSON_GetObjectItemCaseSensitive(m, "merges");
	if (!cJSON_IsArray(merges))
		return diag_fail(d, "%s: model: \"merges\" is missing or not an array", t->path);
	int rank = 0;
	cJSON_ArrayForEach(e, merges) {
		char *a = NULL, *b = NULL;
		if (cJSON_IsString(e)) {
			const char *sp = strchr(e->valuestring, ' ');
			if (sp && !strchr(sp + 1, ' ')) {
				a = strndup(e->valuestring, (size_t)(sp - e->valuestring));
				b = strdup(sp + 1);
			}
		} else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(cJSON_GetArrayItem(e, 0)) &&
		           cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
			a = strdup(cJSON_GetArrayItem(e, 0)->valuestring);
			b = strdup(cJSON_GetArrayItem(e, 1)->valuestring);
		}
		if (!a || !b) {
			free(a);
			free(b);
			return diag_fail(d, "%s: merges[%d]: not \"a b\" nor [\"a\", \"b\"]", t->path, rank);
		}
		Buf ab = {0};
		buf_adds(&ab, a);
		buf_adds(&ab, b);
		int64_t ia = smap_get(&t->vocab, a), ib = smap_get(&t->vocab, b), iab = smap_get(&t->vocab, ab.s);
		int rc = WL_OK;
		if (ia < 0 || ib < 0 || iab < 0)
			rc = diag_fail(d, "%s: merges[%d]: '%s' + '%s' -> '%s' is not in the vocabulary", t->path, rank, a, b,
			               ab.s);
		else
			pmap_put(&t->merges, (int32_t)ia, (int32_t)ib, rank, (int32_t)iab);
		free(a);
		free(b);
		free(ab.s);
		if (rc != WL_OK)
			return rc;
		rank++;
	}
	return WL_OK;
}

static int read_added(Tokenizer *t, const cJSON *arr, Diag *d)
{
	const cJSON *e;
	int i = 0;
	cJSON_ArrayForEach(e, arr) {
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
		const char *content = str_field(e, "content");
		if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > 1e8 || !content || !*content)
			return diag_fail(d, "%s: added_tokens[%d]: needs an \"id\" in 0..1e8 and a non-empty \"content\"", t->path,
			                 i);
		if (bool_field(e, "lstrip", false) || bool_field(e, "rstrip", false) || bool_field(e, "single_word", false))
			return diag_fail(d, "%s: added_tokens[%d] '%s': lstrip, rstrip and single_word are not supported",
			                 t->path, i, content);
		t->added = realloc(t->added, (size_t)(t->nadded + 1) * sizeof *t->added);
		if (!t->added)
			abort();
		t->added[t->nadded].content = wl_xstrdup(content);
		t->added[t->nadded].id = (int64_t)id->valuedouble;
		t->added[t->nadded++].special = bool_field(e, "special", false);
		if ((int64_t)id->valuedouble + 1 > t->nids)
			t->nids = (int64_t)id->valuedouble + 1;
		i++;
	}
	return WL_OK;
}

int tokenizer_open(const char *path, Tokenizer **out, Diag *d)
{
	*out = NULL;
	byte_table_init();
	MappedFile mf;
	if (file_map(path, &mf, d) != WL_OK)
		return WL_ERR;
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts((const char *)mf.addr, mf.len, &end, false);
	file_unmap(&mf);
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return diag_fail(d, "%s: not a tokenizer.json (malformed JSON or not an object)", path);
	}
	Tokenizer *t = wl_xcalloc(1, sizeof *t);
	t->path = wl_xstrdup(path);
	t->root = root;
	int rc = read_model(t, cJSON_GetObjectItemCaseSensitive(root, "model"), d);
	if (rc == WL_OK)
		rc = read_added(t, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), d);
	if (rc == WL_OK) {
		t->id_text = wl_xcalloc((size_t)t->nids, sizeof *t->id_text);
		t->id_special = wl_xcalloc((size_t)t->nids, sizeof *t->id_special);
		for (size_t i = 0; i < t->vocab.cap; i++)
			if (t->vocab.keys[i])
				t->id_text[t->vocab.vals[i]] = t->vocab.keys[i];
		for (int i = 0; i < t->nadded; i++) {
			if (!t->id_text[t->added[i].id])
				t->id_text[t->added[i].id] = t->added[i].content;
			t->id_special[t->added[i].id] = t->added[i].special;
		}
		t->normalizer = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
		t->pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
		t->post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
		t->decoder = cJSON_GetObjectItemCaseSensitive(root, "decoder");
		rc = check_normalizer(t, t->normalizer, d);
	}
	if (rc == WL_OK)
		rc = check_pre(t, t->pre, d);
	if (rc == WL_OK)
		rc = check_post(t, t->post, d);
	if (rc == WL_OK)
		rc = check_decoder(t, t->decoder, d);
	if (rc != WL_OK) {
		tokenizer_free(t);
		return WL_ERR;
	}
	*out = t;
	return WL_OK;
}

void tokenizer_free(Tokenizer *t)
{
	if (!t)
		return;
	smap_free(&t->vocab);
	free(t->merges.keys);
	free(t->merges.rank);
	free(t->merges.merged);
	for (int i = 0; i < t->nadded; i++)
		free(t->added[i].content);
	free(t->added);
	for (int i = 0; i < t->nre; i++)
		pcre2_code_free(t->re[i].re);
	free(t->re);
	free(t->id_text);
	free(t->id_special);
	cJSON_Delete(t->root);
	free(t->path);
	free(t);
}

int64_t tokenizer_vocab_size(const Tokenizer *t) { return t->nids; }

int64_t tokenizer_token_id(const Tokenizer *t, const char *token)
{
	for (int i = 0; i < t->nadded; i++)
		if (!strcmp(t->added[i].content, token))
			return t->added[i].id;
	return smap_get(&t->vocab, token);
}

/* ------------------------------------------------ encoding */

static void replace_all(Buf *out, const char *s, size_t n, const char *pat, const char *with)
{
	size_t pn = strlen(pat);
	for (size_t i = 0; i < n;) {
		if (pn && i + pn <= n && !memcmp(s + i, pat, pn)) {
			buf_adds(out, with);
			i += pn;
		} else
			buf_add(out, s + i, 1), i++;
	}
}

static int normalize(const Tokenizer *t, const cJSON *n, Buf *s, Diag *d)
{
	if (!n || cJSON_IsNull(n))
		return WL_OK;
	const char *ty = type_of(n);
	if (!strcmp(ty, "Sequence")) {
		const cJSON *e;
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(n, "normalizers"))
			if (normalize(t, e, s, d) != WL_OK)
				return WL_ERR;
		return WL_OK;
	}
	Buf o = {0};
	if (ty[0] == 'N') {
		int opts = UTF8PROC_STABLE | (strchr(ty, 'K') ? UTF8PROC_COMPAT : 0) |
		           (ty[strlen(ty) - 1] == 'C' ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE);
		utf8proc_uint8_t *r = NULL;
		utf8proc_ssize_t k = utf8proc_map((const utf8proc_uint8_t *)(s->s ? s->s : ""), (utf8proc_ssize_t)s->n, &r,
		                                  (utf8proc_option_t)opts);
		if (k < 0)
			return diag_fail(d, "%s: normalizer %s: %s", t->path, ty, utf8proc_errmsg(k));
		buf_add(&o, (const char *)r, (size_t)k);
		free(r);
	} else if (!strcmp(ty, "Prepend")) {
		if (s->n)
			buf_adds(&o, str_field(n, "prepend"));
		buf_add(&o, s->s ? s->s : "", s->n);
	} else { /* Replace */
		bool lit;
		replace_all(&o, s->s ? s->s : "", s->n, pattern_of(n, &lit), str_field(n, "content"));
	}
	free(s->s);
	if (!o.s)
		buf_add(&o, "", 0);
	*s = o;
	return WL_OK;
}

/* Splits every piece by the regex: Isolated keeps matches and gaps as
 * pieces, Removed only the gaps. */
static int split_regex(const char *path, pcre2_code *re, bool removed, Pieces *p, Diag *d)
{
	Pieces o = {0};
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
	for (int i = 0; i < p->n; i++) {
		const char *s = p->v[i].s;
		size_t n = p->v[i].n, pos = 0, gap = 0;
		while (pos <= n) {
			int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, 0, md, NULL);
			if (rc == PCRE2_ERROR_NOMATCH)
				break;
			if (rc < 0) {
				pcre2_match_data_free(md);
				pieces_free(&o);
				return diag_fail(d, "%s: pre_tokenizer regex failed (PCRE2 error %d)", path, rc);
			}
			PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
			size_t a = ov[0], b = ov[1];
			if (b == a) { /* empty match: move on one character */
				pos = a + (a < n ? (size_t)u8len((const unsigned char *)s + a, n - a) : 1);
				continue;
			}
			if (a > gap)
				pieces_add(&o, s + gap, a - gap, p->at0[i] && gap == 0);
			if (!removed)
				pieces_add(&o, s + a, b - a, p->at0[i] && a == 0);
			gap = pos = b;
		}
		if (gap < n)
			pieces_add(&o, s + gap, n - gap, p->at0[i] && gap == 0);
	}
	pcre2_match_data_free(md);
	pieces_free(p);
	*p = o;
	return WL_OK;
}

int gpt2_split(const char *text, size_t n, size_t **cuts, int *npieces, Diag *d)
{
	if (!utf8_ok(text, n))
		return diag_fail(d, "%s", "the text is not valid UTF-8");
	int err;
	PCRE2_SIZE off;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)GPT2_PATTERN, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err,
	                               &off, NULL);
	if (!re)
		wl_die(__FILE__, __LINE__, "GPT-2's pattern does not compile");
	Pieces p = {0};
	pieces_add(&p, text, n, true);
	int rc = split_regex("GPT-2 pattern", re, false, &p, d);
	pcre2_code_free(re);
	if (rc == WL_OK) {
		*cuts = wl_xcalloc((size_t)p.n + 1, sizeof **cuts);
		for (int i = 0; i < p.n; i++)
			(*cuts)[i + 1] = (*cuts)[i] + p.v[i].n;
		*npieces = p.n;
	}
	pieces_free(&p);
	return rc;
}

static int pretokenize(const Tokenizer *t, const cJSON *n, Pieces *p, Diag *d)
{
	if (!n || cJSON_IsNull(n))
		return WL_OK;
	const char *ty = type_of(n);
	if (!strcmp(ty, "Sequence")) {
		const cJSON *e;
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(n, "pretokenizers"))
			if (pretokenize(t, e, p, d) != WL_OK)
				return WL_ERR;
		return WL_OK;
	}
	if (!strcmp(ty, "Split"))
		return split_regex(t->path, regex_of(t, n), !strcmp(str_field(n, "behavior"), "Removed"), p, d);
	if (!strcmp(ty, "ByteLevel")) {
		if (bool_field(n, "add_prefix_space", true))
			for (int i = 0; i < p->n; i++)
				if (p->v[i].n && p->v[i].s[0] != ' ') {
					Buf b = {0};
					buf_adds(&b, " ");
					buf_add(&b, p->v[i].s, p->v[i].n);
					free(p->v[i].s);
					p->v[i] = b;
				}
		if (bool_field(n, "use_regex", true) && split_regex(t->path, regex_of(t, n), false, p, d) != WL_OK)
			return WL_ERR;
		for (int i = 0; i < p->n; i++) {
			Buf b = {0};
			for (size_t k = 0; k < p->v[i].n; k++)
				add_codepoint(&b, byte_cp[(unsigned char)p->v[i].s[k]]);
			free(p->v[i].s);
			p->v[i] = b;
		}
		return WL_OK;
	}
	if (!strcmp(ty, "Digits")) {
		bool each = bool_field(n, "individual_digits", false);
		Pieces o = {0};
		for (int i = 0; i < p->n; i++) {
			const char *s = p->v[i].s;
			size_t n2 = p->v[i].n, a = 0;
			while (a < n2) {
				bool dg = s[a] >= '0' && s[a] <= '9';
				size_t b = a + 1;
				if (!dg || !each)
					while (b < n2 && ((s[b] >= '0' && s[b] <= '9') == dg))
						b++;
				pieces_add(&o, s + a, b - a, p->at0[i] && a == 0);
				a = b;
			}
		}
		pieces_free(p);
		*p = o;
		return WL_OK;
	}
	/* Metaspace */
	const char *rep = str_field(n, "replacement");
	const char *scheme = str_field(n, "prepend_scheme");
	if (!scheme)
		scheme = bool_field(n, "add_prefix_space", true) ? "always" : "never";
	bool split = bool_field(n, "split", true);
	Pieces o = {0};
	for (int i = 0; i < p->n; i++) {
		Buf r = {0}, b = {0};
		size_t rn = strlen(rep);
		replace_all(&r, p->v[i].s, p->v[i].n, " ", rep);
		bool pre = !strcmp(scheme, "always") || (!strcmp(scheme, "first") && p->at0[i]);
		if (pre && !(r.n >= rn && !memcmp(r.s, rep, rn)))
			buf_adds(&b, rep);
		if (r.n)
			buf_add(&b, r.s, r.n);
		free(r.s);
		if (!split || !b.n) {
			if (b.n)
				pieces_add(&o, b.s, b.n, p->at0[i]);
		} else {
			size_t a = 0;
			for (size_t k = 1; k <= b.n; k++)
				if (k == b.n || (b.n - k >= rn && !memcmp(b.s + k, rep, rn))) {
					pieces_add(&o, b.s + a, k - a, p->at0[i] && a == 0);
					a = k;
				}
		}
		free(b.s);
	}
	pieces_free(p);
	*p = o;
	return WL_OK;
}

typedef struct {
	int32_t rank, pos, left, right;
} Cand;

static bool cand_less(const Cand *a, const Cand *b)
{
	return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(Cand *h, int *n, Cand c)
{
	int i = (*n)++;
	h[i] = c;
	while (i > 0 && cand_less(&h[i], &h[(i - 1) / 2])) {
		Cand tmp = h[i];
		h[i] = h[(i - 1) / 2];
		h[(i - 1) / 2] = tmp;
		i = (i - 1) / 2;
	}
}

static Cand heap_pop(Cand *h, int *n)
{
	Cand top = h[0];
	h[0] = h[--(*n)];
	for (int i = 0;;) {
		int l = 2 * i + 1, r = l + 1, m = i;
		if (l < *n && cand_less(&h[l], &h[m]))
			m = l;
		if (r < *n && cand_less(&h[r], &h[m]))
			m = r;
		if (m == i)
			break;
		Cand tmp = h[i];
		h[i] = h[m];
		h[m] = tmp;
		i = m;
	}
	return top;
}

typedef struct {
	int64_t *v;
	int n, cap;
} Ids;

static void ids_add(Ids *o, int64_t id)
{
	if (o->n == o->cap) {
		o->cap = o->cap ? o->cap * 2 : 64;
		o->v = realloc(o->v, (size_t)o->cap * sizeof *o->v);
		if (!o->v)
			abort();
	}
	o->v[o->n++] = id;
}

/* BPE on one piece. */
static int bpe(const Tokenizer *t, const char *s, size_t n, Ids *out, Diag *d)
{
	if (!n)
		return WL_OK;
	int64_t whole = t->ignore_merges ? smap_getn(&t->vocab, s, n) : -1;
	if (whole >= 0) {
		ids_add(out, whole);
		return WL_OK;
	}
	int32_t *sym = wl_xmalloc((n + 1) * 4 * sizeof *sym); /* ids, then prev, next, alive */
	int32_t *prev = sym + n + 1, *next = prev + n + 1, *alive = next + n + 1;
	int ns = 0;
	for (size_t i = 0; i < n;) {
		int k = u8len((const unsigned char *)s + i, n - i);
		int64_t id = smap_getn(&t->vocab, s + i, (size_t)k);
		if (id >= 0)
			sym[ns++] = (int32_t)id;
		else {
			bool bytes = t->byte_fallback;
			for (int j = 0; j < k && bytes; j++)
				bytes = t->byte_id[(unsigned char)s[i + j]] >= 0;
			if (bytes)
				for (int j = 0; j < k; j++)
					sym[ns++] = t->byte_id[(unsigned char)s[i + j]];
			else if (t->unk >= 0) {
				if (!(t->fuse_unk && ns > 0 && sym[ns - 1] == t->unk))
					sym[ns++] = (int32_t)t->unk;
			} else {
				free(sym);
				Buf c = {0};
				add_lossy(&c, s + i, (size_t)k);
				int rc = diag_fail(d, "%s: the character '%s' has no token (no byte_fallback, no unk_token)",
				                   t->path, c.s);
				free(c.s);
				return rc;
			}
		}
		i += (size_t)k;
	}
	for (int i = 0; i < ns; i++) {
		prev[i] = i - 1;
		next[i] = i + 1 < ns ? i + 1 : -1;
		alive[i] = 1;
	}
	Cand *heap = wl_xmalloc((size_t)(2 * ns + 2) * sizeof *heap);
	int nh = 0;
	for (int i = 0; i + 1 < ns; i++) {
		int32_t r, m;
		if (pmap_get(&t->merges, sym[i], sym[i + 1], &r, &m))
			heap_push(heap, &nh, (Cand){r, i, sym[i], sym[i + 1]});
	}
	while (nh > 0) {
		Cand c = heap_pop(heap, &nh);
		int i = c.pos, j = next[c.pos];
		if (!alive[i] || j < 0 || sym[i] != c.left || sym[j] != c.right)
			continue; /* stale */
		int32_t r, m;
		pmap_get(&t->merges, sym[i], sym[j], &r, &m);
		sym[i] = m;
		alive[j] = 0;
		next[i] = next[j];
		if (next[j] >= 0)
			prev[next[j]] = i;
		if (prev[i] >= 0 && pmap_get(&t->merges, sym[prev[i]], sym[i], &r, &m))
			heap_push(heap, &nh, (Cand){r, prev[i], sym[prev[i]], sym[i]});
		if (next[i] >= 0 && pmap_get(&t->merges, sym[i], sym[next[i]], &r, &m))
			heap_push(heap, &nh, (Cand){r, i, sym[i], sym[next[i]]});
	}
	for (int i = 0; i >= 0 && ns > 0; i = next[i])
		ids_add(out, sym[i]);
	free(heap);
	free(sym);
	return WL_OK;
}

/* One segment of text between added tokens. */
static int encode_segment(const Tokenizer *t, const char *s, size_t n, bool at0, Ids *out, Diag *d)
{
	Buf b = {0};
	buf_add(&b, s, n);
	if (normalize(t, t->normalizer, &b, d) != WL_OK) {
		free(b.s);
		return WL_ERR;
	}
	Pieces p = {0};
	if (b.n)
		pieces_add(&p, b.s, b.n, at0);
	free(b.s);
	int rc = pretokenize(t, t->pre, &p, d);
	for (int i = 0; i < p.n && rc == WL_OK; i++)
		rc = bpe(t, p.v[i].s, p.v[i].n, out, d);
	pieces_free(&p);
	return rc;
}

static void post_process(const Tokenizer *t, const cJSON *n, const Ids *in, Ids *out)
{
	if (!n || cJSON_IsNull(n) || !strcmp(type_of(n), "ByteLevel")) {
		for (int i = 0; i < in->n; i++)
			ids_add(out, in->v[i]);
		return;
	}
	if (!strcmp(type_of(n), "Sequence")) {
		Ids cur = {0}, nxt = {0};
		for (int i = 0; i < in->n; i++)
			ids_add(&cur, in->v[i]);
		const cJSON *e;
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(n, "processors")) {
			nxt.n = 0;
			post_process(t, e, &cur, &nxt);
			Ids tmp = cur;
			cur = nxt;
			nxt = tmp;
		}
		for (int i = 0; i < cur.n; i++)
			ids_add(out, cur.v[i]);
		free(cur.v);
		free(nxt.v);
		return;
	}
	const cJSON *sp = cJSON_GetObjectItemCaseSensitive(n, "special_tokens");
	const cJSON *e;
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(n, "single")) {
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
		if (!s) {
			for (int i = 0; i < in->n; i++)
				ids_add(out, in->v[i]);
			continue;
		}
		const cJSON *v;
		cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(
		                          cJSON_GetObjectItemCaseSensitive(sp, str_field(s, "id")), "ids"))
			ids_add(out, (int64_t)v->valuedouble);
	}
}

int tokenizer_encode(const Tokenizer *t, const char *text, bool add_special, int64_t **ids, int *n, Diag *d)
{
	Ids raw = {0};
	size_t len = strlen(text), seg = 0;
	if (!utf8_ok(text, len))
		return diag_fail(d, "%s: the text to encode is not valid UTF-8", t->path);
	int rc = WL_OK;
	for (size_t i = 0; i <= len && rc == WL_OK;) {
		int best = -1;
		size_t bl = 0;
		for (int k = 0; k < t->nadded && i < len; k++) {
			size_t cl = strlen(t->added[k].content);
			if (cl > bl && cl <= len - i && !memcmp(text + i, t->added[k].content, cl)) {
				best = k;
				bl = cl;
			}
		}
		if (best < 0 && i < len) {
			i++;
			continue;
		}
		if (i > seg)
			rc = encode_segment(t, text + seg, i - seg, seg == 0, &raw, d);
		if (best < 0)
			break;
		ids_add(&raw, t->added[best].id);
		i += bl;
		seg = i;
	}
	if (rc != WL_OK) {
		free(raw.v);
		return rc;
	}
	Ids o = {0};
	if (add_special)
		post_process(t, t->post, &raw, &o);
	else
		o = raw, raw.v = NULL;
	free(raw.v);
	if (!o.v)
		o.v = wl_xmalloc(sizeof *o.v);
	*ids = o.v;
	*n = o.n;
	return WL_OK;
}

/* ------------------------------------------------ decoding */

typedef struct {
	Buf *v;
	int n, cap;
} Toks;

static void toks_add(Toks *t, const char *s, size_t n)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 64;
		t->v = realloc(t->v, (size_t)t->cap * sizeof *t->v);
		if (!t->v)
			abort();
	}
	memset(&t->v[t->n], 0, sizeof t->v[t->n]);
	buf_add(&t->v[t->n++], s, n);
}

static void toks_free(Toks *t)
{
	for (int i = 0; i < t->n; i++)
		free(t->v[i].s);
	free(t->v);
	memset(t, 0, sizeof *t);
}

static int byte_token(const Buf *b)
{
	unsigned v;
	char tail;
	if (b->n == 6 && sscanf(b->s, "<0x%2X%c", &v, &tail) == 2 && tail == '>' && b->s[3] != ' ' && b->s[3] != '+' &&
	    b->s[3] != '-')
		return (int)v;
	return -1;
}

static void decode_chain(const cJSON *n, Toks *tk)
{
	if (!n || cJSON_IsNull(n))
		return;
	const char *ty = type_of(n);
	Toks o = {0};
	if (!strcmp(ty, "Sequence")) {
		const cJSON *e;
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(n, "decoders"))
			decode_chain(e, tk);
		return;
	} else if (!strcmp(ty, "ByteLevel")) {
		Buf raw = {0}, lossy = {0};
		for (int i = 0; i < tk->n; i++) {
			Buf bytes = {0};
			bool all = true;
			for (size_t k = 0; k < tk->v[i].n && all;) {
				int32_t cp;
				utf8proc_ssize_t m = utf8proc_iterate((const utf8proc_uint8_t *)tk->v[i].s + k,
				                                      (utf8proc_ssize_t)(tk->v[i].n - k), &cp);
				if (m <= 0 || cp < 0 || cp >= 512 || cp_byte[cp] < 0)
					all = false;
				else {
					char c = (char)cp_byte[cp];
					buf_add(&bytes, &c, 1);
					k += (size_t)m;
				}
			}
			if (all)
				buf_add(&raw, bytes.s ? bytes.s : "", bytes.n);
			else
				buf_add(&raw, tk->v[i].s, tk->v[i].n);
			free(bytes.s);
		}
		add_lossy(&lossy, raw.s ? raw.s : "", raw.n);
		toks_add(&o, lossy.s ? lossy.s : "", lossy.n);
		free(raw.s);
		free(lossy.s);
	} else if (!strcmp(ty, "Replace")) {
		bool lit;
		const char *pat = pattern_of(n, &lit), *with = str_field(n, "content");
		for (int i = 0; i < tk->n; i++) {
			Buf b = {0};
			replace_all(&b, tk->v[i].s, tk->v[i].n, pat, with);
			toks_add(&o, b.s ? b.s : "", b.n);
			free(b.s);
		}
	} else if (!strcmp(ty, "ByteFallback")) {
		for (int i = 0; i < tk->n;) {
			if (byte_token(&tk->v[i]) < 0) {
				toks_add(&o, tk->v[i].s, tk->v[i].n);
				i++;
				continue;
			}
			Buf b = {0};
			int j = i;
			for (; j < tk->n && byte_token(&tk->v[j]) >= 0; j++) {
				char c = (char)byte_token(&tk->v[j]);
				buf_add(&b, &c, 1);
			}
			Buf lossy = {0};
			add_lossy(&lossy, b.s, b.n);
			toks_add(&o, lossy.s, lossy.n);
			free(lossy.s);
			free(b.s);
			i = j;
		}
	} else if (!strcmp(ty, "Fuse")) {
		Buf b = {0};
		for (int i = 0; i < tk->n; i++)
			buf_add(&b, tk->v[i].s, tk->v[i].n);
		toks_add(&o, b.s ? b.s : "", b.n);
		free(b.s);
	} else if (!strcmp(ty, "Strip")) {
		const char *c = str_field(n, "content");
		size_t cn = strlen(c);
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(n, "start"), *sp = cJSON_GetObjectItemCaseSensitive(n, "stop");
		int start = cJSON_IsNumber(st) ? (int)st->valuedouble : 0, stop = cJSON_IsNumber(sp) ? (int)sp->valuedouble : 0;
		for (int i = 0; i < tk->n; i++) {
			const char *s = tk->v[i].s;
			size_t a = 0, b = tk->v[i].n;
			for (int k = 0; k < start && b - a >= cn && !memcmp(s + a, c, cn); k++)
				a += cn;
			for (int k = 0; k < stop && b - a >= cn && !memcmp(s + b - cn, c, cn); k++)
				b -= cn;
			toks_add(&o, s + a, b - a);
		}
	} else { /* Metaspace */
		const char *rep = str_field(n, "replacement");
		const char *scheme = str_field(n, "prepend_scheme");
		bool strip_first = scheme ? strcmp(scheme, "never") != 0 : bool_field(n, "add_prefix_space", true);
		for (int i = 0; i < tk->n; i++) {
			Buf b = {0};
			replace_all(&b, tk->v[i].s, tk->v[i].n, rep, " ");
			size_t a = (i == 0 && strip_first && b.n && b.s[0] == ' ') ? 1 : 0;
			toks_add(&o, b.s ? b.s + a : "", b.n - a);
			free(b.s);
		}
	}
	toks_free(tk);
	*tk = o;
}

int tokenizer_decode(const Tokenizer *t, const int64_t *ids, int n, bool skip_special, char **text, Diag *d)
{
	Toks tk = {0};
	for (int i = 0; i < n; i++) {
		if (ids[i] < 0 || ids[i] >= t->nids || !t->id_text[ids[i]]) {
			toks_free(&tk);
			return diag_fail(d, "%s: id %lld is not in the vocabulary (0..%lld)", t->path, (long long)ids[i],
			                 (long long)t->nids - 1);
		}
		if (skip_special && t->id_special[ids[i]])
			continue;
		toks_add(&tk, t->id_text[ids[i]], strlen(t->id_text[ids[i]]));
	}
	decode_chain(t->decoder, &tk);
	Buf raw = {0}, out = {0};
	for (int i = 0; i < tk.n; i++)
		buf_add(&raw, tk.v[i].s, tk.v[i].n);
	add_lossy(&out, raw.s ? raw.s : "", raw.n);
	if (!out.s)
		buf_add(&out, "", 0);
	free(raw.s);
	toks_free(&tk);
	*text = out.s;
	return WL_OK;
}
