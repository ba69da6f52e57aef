/* text_parse.c — ONNX textual syntax (onnx docs/Syntax.md) → Module.
 *
 * A tokenizer and a recursive-descent parser, chibicc style. Bad input gives
 * WL_ERR and one line "FILE:LINE:COL: message"; the parser never crashes and
 * every loop consumes a token or stops (a fuzzer runs it).
 *
 * Grammar accepted (a superset of what onnx 1.12's parse_model reads; the
 * printer, text_print.c, writes the 1.12 subset wherever 1.12 can say it):
 *
 *   model     ::= header? graph function*
 *   header    ::= '<' field (',' field)* '>'
 *   field     ::= 'ir_version' ':' int | 'model_version' ':' int
 *               | 'opset_import' ':' '[' (str ':' int (',' str ':' int)*)? ']'
 *               | ('producer_name' | 'producer_version' | 'domain' | 'doc_string') ':' str
 *               | 'metadata_props' ':' '[' (str ':' str (',' str ':' str)*)? ']'
 *   graph     ::= name '(' decls? ')' '=>' '(' decls? ')' ('<' decls? '>')? '{' node* '}'
 *   decl      ::= type? name ('=' ('{' elems? '}' | sparse))?
 *                 in '( )' a decl with a value is an input with an initializer,
 *                 in '< >' an initializer (a sparse one for a sparse_tensor
 *                 type); without a value, a declared type
 *   node      ::= ('[' name ']')? names '=' ident ('.' ident)* attrs? '(' names ')' attrs?
 *                 (attrs after the inputs only if there are none before)
 *   names     ::= item (',' item)*   item ::= name | ε   (ε or "": an absent optional)
 *   attrs     ::= '<' (attr (',' attr)*)? '>'
 *   attr      ::= name (':' attr-type)? '=' (value | '[' (value (',' value)*)? ']')
 *                 attr-type: int float string tensor graph sparse_tensor type_proto
 *                 ints floats strings tensors graphs sparse_tensors type_protos
 *   value     ::= int | float | str | '@' ident | tensor | graph | sparse | type
 *                 (a type only after ': type_proto' or ': type_protos')
 *   tensor    ::= tensor-type name? '='? '{' elems? '}'
 *   sparse    ::= 'sparse_tensor' '(' '[' ints? ']' ',' tensor ',' tensor ')'
 *                 (dims, values, indices: our extension, onnx has no syntax)
 *   type      ::= prim ('[' (dim (',' dim)*)? ']')? | 'seq' '(' type ')'
 *               | 'map' '(' prim ',' type ')' | 'optional' '(' type ')'
 *               | 'sparse_tensor' '(' prim ('[' (dim (',' dim)*)? ']')? ')'
 *                 prim without brackets is a scalar, prim '[]' has unknown rank
 *   dim       ::= int | name | '?'
 *   function  ::= ('<' field (',' field)* '>')? name ('<' name (',' name)* '>')?
 *                 '(' decls? ')' '=>' '(' decls? ')' ('<' decls '>')? '{' node* '}'
 *                 (fields: domain, opset_import, doc_string)
 *   name      ::= ident | str
 *   elem      ::= int | float | str | 'true' | 'false'; complex: re ',' im
 *
 * Tokens: ident [A-Za-z_][A-Za-z0-9_]*; str "..." with C escapes \" \\ \n \t
 * \r \xHH (any other backslash stays as written, as onnx 1.12 reads it); int
 * [+-]?[0-9]+; float [+-]?[0-9]+(.[0-9]*)?([eE][+-]?[0-9]+)?, inf, nan, and
 * nan(0xBITS) (the exact bit pattern of a NaN, in the element's width); '=>';
 * punctuation ( ) [ ] { } < > , = : . @ ?; '#' starts a comment to end of line.
 *
 * Names. onnx 1.12 reads names only as identifiers, so the printer escapes
 * every other name into one (and reads back exactly what it wrote):
 *   '__s' '/'   '__d' '.'   '__c' ':'   '__m' '-'   '__u' '_'
 *   '__xHH' any other byte  '__n' nothing (put before a name that starts with
 *   a digit or is a reserved word: the dtype names, seq, map, optional,
 *   sparse_tensor, inf, nan; alone it is the empty name)
 * so "/layers.0/fc1/MatMul_output_0" prints as __slayers__d0__sfc1__sMatMul_output_0
 * and "onnx::MatMul_12" as onnx__c__cMatMul_12. A '_' is written '__u' only
 * where the next byte is not a letter or digit, so that it is never read as
 * the start of an escape. When reading, an identifier's '__' followed by
 * anything else stays as written. A quoted string is a name taken verbatim
 * (newer onnx's quotable-id).
 *
 * Comments that carry meaning (what onnx 1.12 cannot say):
 *   - node name: a comment after a node's last token, on the same line:
 *       y = Relu (x)  # /layers.0/act/Relu
 *     The rest of the line, trimmed, is Node.name (any such comment: put
 *     remarks on lines of their own); a name that needs it is a quoted
 *     string with C escapes. A '[name]' label (newer onnx) also works.
 *   - type: a declaration without a type followed on its line (after its
 *     comma, if any) by '# type: TYPE ...' gets TYPE. The printer uses it for
 *     types onnx 1.12 cannot read (seq, map, optional, sparse_tensor, and the
 *     float8/int4 element types):  opt_in,  # type: optional(seq(float[N]))
 *   - an elided initializer, '# elided: 589824 x float, sha256 9f1c...', is
 *     information only: the declaration reads back as a typed value without
 *     a value (not a constant). An elided tensor attribute, '{}' for a shape
 *     that needs values, is an error (print with --print-weights).
 * Other comments are ignored. inf and nan cannot be written for onnx 1.12
 * (it has no syntax for them); we read and write them as above.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "compiler/onnx/onnx.h"

enum { MAX_DEPTH = 64 };   /* nesting of types and graphs */

/* ---------------------------------------------------------------- tokens */

typedef enum { TK_EOF, TK_IDENT, TK_STR, TK_INT, TK_FLOAT, TK_PUNCT, TK_ARROW } TokenKind;

typedef struct Token {
	TokenKind kind;
	const char *loc;           /* source text */
	size_t len;
	int line, col;
	char *str;                 /* TK_STR: decoded (arena), slen bytes */
	size_t slen;
	const char *cmt;           /* comment after this token on its line ('#'...) */
	size_t cmtlen;
	int cmt_line, cmt_col;
} Token;

typedef struct Parser {
	const char *path;
	const char *src, *end;     /* the input */
	const char *p;             /* scan position */
	int line;
	const char *line_start;
	Token tok;                 /* current token (not consumed) */
	Token prev;                /* last consumed token */
	Module *m;
	Arena *a;
	Diag *d;
	int depth;
	bool failed;
	char descbuf[96];
} Parser;

static int error_at(Parser *P, int line, int col, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int error_at(Parser *P, int line, int col, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	P->failed = true;
	return diag_fail(P->d, "%s:%d:%d: %s", P->path, line, col, msg);
}

#define error_tok(P, t, ...) error_at((P), (t)->line, (t)->col, __VA_ARGS__)

/* A short description of a token for messages. */
static const char *desc(Parser *P, const Token *t)
{
	char *b = P->descbuf;
	size_t n = t->len > 40 ? 40 : t->len;
	switch (t->kind) {
	case TK_EOF:
		return "end of input";
	case TK_STR:
		snprintf(b, sizeof P->descbuf, "string %.*s%s", (int)n, t->loc, n < t->len ? "..." : "");
		return b;
	default:
		snprintf(b, sizeof P->descbuf, "'%.*s%s'", (int)n, t->loc, n < t->len ? "..." : "");
		return b;
	}
}

static int col_of(Parser *P, const char *q)
{
	return (int)(q - P->line_start) + 1;
}

static bool is_ident_start(int c) { return isalpha(c) || c == '_'; }
static bool is_ident_char(int c) { return isalnum(c) || c == '_'; }

static bool word_at(const char *q, const char *end, const char *w)
{
	size_t n = strlen(w);
	return (size_t)(end - q) >= n && memcmp(q, w, n) == 0 &&
	       (q + n == end || !is_ident_char((unsigned char)q[n]));
}

/* Skips spaces and comments. A comment on the same line as `before` is
 * recorded on it. */
static void skip_space(Parser *P, Token *before)
{
	bool newline = false;
	while (P->p < P->end) {
		unsigned char c = (unsigned char)*P->p;
		if (c == '\n') {
			newline = true;
			P->p++;
			P->line++;
			P->line_start = P->p;
		} else if (isspace(c)) {
			P->p++;
		} else if (c == '#') {
			const char *s = P->p;
			while (P->p < P->end && *P->p != '\n')
				P->p++;
			if (!newline && before->kind != TK_EOF && !before->cmt) {
				before->cmt = s;
				before->cmtlen = (size_t)(P->p - s);
				before->cmt_line = P->line;
				before->cmt_col = col_of(P, s);
			}
		} else {
			return;
		}
	}
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

/* "..." starting at P->p. Newlines may occur inside (onnx 1.12 allows them). */
static int lex_string(Parser *P, Token *t)
{
	const char *q = P->p + 1;
	int line = P->line;
	const char *ls = P->line_start;
	while (q < P->end && *q != '"') {
		if (*q == '\\' && q + 1 < P->end)
			q++;
		if (*q == '\n') {
			line++;
			ls = q + 1;
		}
		q++;
	}
	if (q >= P->end)
		return error_at(P, t->line, t->col, "unterminated string");
	char *out = arena_alloc(P->a, (size_t)(q - P->p));
	size_t n = 0;
	for (const char *r = P->p + 1; r < q; r++) {
		if (*r != '\\') {
			out[n++] = *r;
			continue;
		}
		char e = r[1];
		int h1, h2;
		switch (e) {
		case '"': out[n++] = '"'; r++; break;
		case '\\': out[n++] = '\\'; r++; break;
		case 'n': out[n++] = '\n'; r++; break;
		case 't': out[n++] = '\t'; r++; break;
		case 'r': out[n++] = '\r'; r++; break;
		case 'x':
			if (r + 3 < q && (h1 = hexval(r[2])) >= 0 && (h2 = hexval(r[3])) >= 0) {
				out[n++] = (char)(h1 * 16 + h2);
				r += 3;
				break;
			}
			out[n++] = '\\';      /* not an escape: kept as written */
			break;
		default:
			out[n++] = '\\';
			break;
		}
	}
	t->kind = TK_STR;
	t->str = out;
	t->slen = n;
	P->p = q + 1;
	P->line = line;
	P->line_start = ls;
	return WL_OK;
}

/* inf, nan, nan(0xHEX) at q (after an optional sign); returns the end or NULL. */
static const char *special_float(const char *q, const char *end)
{
	if (word_at(q, end, "inf"))
		return q + 3;
	if ((size_t)(end - q) >= 3 && memcmp(q, "nan", 3) == 0) {
		const char *r = q + 3;
		if ((size_t)(end - r) >= 3 && r[0] == '(' && r[1] == '0' && (r[2] == 'x' || r[2] == 'X')) {
			const char *h = r + 3;
			while (h < end && hexval((unsigned char)*h) >= 0)
				h++;
			if (h > r + 3 && h < end && *h == ')')
				return h + 1;
		}
		if (r == end || !is_ident_char((unsigned char)*r))
			return r;
	}
	return NULL;
}

static int lex_number(Parser *P, Token *t)
{
	const char *q = P->p, *end = P->end;
	if (*q == '-' || *q == '+')
		q++;
	const char *sp = special_float(q, end);
	if (sp) {
		t->kind = TK_FLOAT;
		t->len = (size_t)(sp - P->p);
		P->p = sp;
		return WL_OK;
	}
	if (q >= end || !isdigit((unsigned char)*q))
		return error_at(P, t->line, t->col, "expected a number after '%c'", *P->p);
	bool is_float = false;
	while (q < end && isdigit((unsigned char)*q))
		q++;
	if (q < end && *q == '.') {
		is_float = true;
		q++;
		while (q < end && isdigit((unsigned char)*q))
			q++;
	}
	if (q < end && (*q == 'e' || *q == 'E')) {
		is_float = true;
		q++;
		if (q < end && (*q == '+' || *q == '-'))
			q++;
		if (q >= end || !isdigit((unsigned char)*q))
			return error_at(P, t->line, t->col, "exponent has no digits");
		while (q < end && isdigit((unsigned char)*q))
			q++;
	}
	if (q < end && (is_ident_char((unsigned char)*q) || *q == '.'))
		return error_at(P, t->line, col_of(P, q), "invalid number");
	t->kind = is_float ? TK_FLOAT : TK_INT;
	t->len = (size_t)(q - P->p);
	P->p = q;
	return WL_OK;
}

/* Scans the next token into *t; a comment before it on `before`'s line is
 * recorded on `before`. After an error every token is TK_EOF. */
static void lex(Parser *P, Token *t, Token *before)
{
	memset(t, 0, sizeof *t);
	if (P->failed) {
		t->kind = TK_EOF;
		t->loc = P->end;
		return;
	}
	skip_space(P, before);
	t->loc = P->p;
	t->line = P->line;
	t->col = col_of(P, P->p);
	if (P->p >= P->end) {
		t->kind = TK_EOF;
		return;
	}
	unsigned char c = (unsigned char)*P->p;
	int rc = WL_OK;
	if (is_ident_start(c)) {
		const char *q = P->p;
		while (q < P->end && is_ident_char((unsigned char)*q))
			q++;
		const char *sp = special_float(P->p, P->end);
		if (sp) {
			t->kind = TK_FLOAT;
			q = sp;
		} else {
			t->kind = TK_IDENT;
		}
		t->len = (size_t)(q - P->p);
		P->p = q;
	} else if (isdigit(c) || c == '-' || c == '+') {
		rc = lex_number(P, t);
	} else if (c == '"') {
		rc = lex_string(P, t);
		t->len = (size_t)(P->p - t->loc);
	} else if (c == '=' && P->p + 1 < P->end && P->p[1] == '>') {
		t->kind = TK_ARROW;
		t->len = 2;
		P->p += 2;
	} else if (c && strchr("()[]{}<>,=:.@?", c)) {
		t->kind = TK_PUNCT;
		t->len = 1;
		P->p++;
	} else {
		rc = isprint(c) ? error_at(P, t->line, t->col, "unexpected character '%c'", c)
		                : error_at(P, t->line, t->col, "unexpected byte 0x%02x", c);
	}
	if (rc != WL_OK) {
		memset(t, 0, sizeof *t);
		t->kind = TK_EOF;
		t->loc = P->end;
		t->line = P->line;
		t->col = col_of(P, P->p);
	}
}

static void advance(Parser *P)
{
	P->prev = P->tok;
	lex(P, &P->tok, &P->prev);
}

static bool is_punct(const Token *t, char c)
{
	return t->kind == TK_PUNCT && t->loc[0] == c;
}

static bool is_word(const Token *t, const char *w)
{
	return t->kind == TK_IDENT && t->len == strlen(w) && memcmp(t->loc, w, t->len) == 0;
}

static bool accept(Parser *P, char c)
{
	if (!is_punct(&P->tok, c))
		return false;
	advance(P);
	return true;
}

static int expect(Parser *P, char c, const char *ctx)
{
	if (accept(P, c))
		return WL_OK;
	return error_tok(P, &P->tok, "expected '%c' %s, got %s", c, ctx, desc(P, &P->tok));
}

#define TRY(x) do { if ((x) != WL_OK) return WL_ERR; } while (0)

/* ---------------------------------------------------------------- numbers */

/* Floating element codecs. text_float_bits is the one way the parser turns a
 * number's text into an element; text_print.c uses it to find the shortest
 * text that reads back bit-exactly. */

static int float_width(int dt)
{
	switch (dt) {
	case DT_DOUBLE: return 64;
	case DT_FLOAT16: case DT_BFLOAT16: return 16;
	case DT_FLOAT8E4M3FN: case DT_FLOAT8E4M3FNUZ: case DT_FLOAT8E5M2: case DT_FLOAT8E5M2FNUZ:
		return 8;
	default: return 32;
	}
}

static uint64_t canonical_nan(int dt)
{
	switch (dt) {
	case DT_DOUBLE: return 0x7ff8000000000000ull;
	case DT_FLOAT16: return 0x7e00;
	case DT_BFLOAT16: return 0x7fc0;
	case DT_FLOAT8E4M3FN: return 0x7f;
	case DT_FLOAT8E5M2: return 0x7e;
	case DT_FLOAT8E4M3FNUZ: case DT_FLOAT8E5M2FNUZ: return 0x80;
	default: return 0x7fc00000;
	}
}

static double f16_value(unsigned h)
{
	int e = (h >> 10) & 31, f = h & 1023;
	double v;
	if (e == 0) v = ldexp(f, -24);
	else if (e == 31) v = f ? NAN : INFINITY;
	else v = ldexp(1024 + f, e - 25);
	return (h & 0x8000) ? -v : v;
}

/* Round to nearest even. */
static unsigned f32_to_f16(float f)
{
	uint32_t x = f32_to_bits(f);
	unsigned sign = (x >> 16) & 0x8000;
	uint32_t ax = x & 0x7fffffff;
	if (ax > 0x7f800000)
		return sign | 0x7e00 | ((ax >> 13) & 0x3ff);
	if (ax >= 0x477ff000)                   /* >= 65520 rounds to inf */
		return sign | 0x7c00;
	if (ax < 0x38800000) {                  /* below 2^-14: subnormal */
		float q = fabsf(f) * 16777216.0f;   /* in units of 2^-24, exact */
		return sign | (unsigned)nearbyintf(q);
	}
	unsigned h = ((ax >> 23) - 112) << 10 | ((ax >> 13) & 0x3ff);
	unsigned rem = ax & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++;
	return sign | h;
}

static double f8_value(int dt, unsigned b)
{
	bool neg = b & 0x80;
	int e, m;
	double v;
	switch (dt) {
	case DT_FLOAT8E4M3FN:
		e = (b >> 3) & 15, m = b & 7;
		if (e == 15 && m == 7) return NAN;
		v = e ? ldexp(8 + m, e - 10) : ldexp(m, -9);
		break;
	case DT_FLOAT8E4M3FNUZ:
		if (b == 0x80) return NAN;
		e = (b >> 3) & 15, m = b & 7;
		v = e ? ldexp(8 + m, e - 11) : ldexp(m, -10);
		break;
	case DT_FLOAT8E5M2:
		e = (b >> 2) & 31, m = b & 3;
		if (e == 31) return m ? NAN : (neg ? -INFINITY : INFINITY);
		v = e ? ldexp(4 + m, e - 17) : ldexp(m, -16);
		break;
	default: /* DT_FLOAT8E5M2FNUZ */
		if (b == 0x80) return NAN;
		e = (b >> 2) & 31, m = b & 3;
		v = e ? ldexp(4 + m, e - 18) : ldexp(m, -17);
		break;
	}
	return neg ? -v : v;
}

/* Exact match if there is one, else nearest (ties to even); out-of-range
 * values saturate except to E5M2's infinities. */
static unsigned f32_to_f8(int dt, float f)
{
	if (isnan(f))
		return (unsigned)canonical_nan(dt);
	if (isinf(f) && dt == DT_FLOAT8E5M2)
		return f < 0 ? 0xfc : 0x7c;
	unsigned best = 0;
	double bestd = INFINITY;
	for (unsigned b = 0; b < 256; b++) {
		double v = f8_value(dt, b);
		if (isnan(v) || isinf(v))
			continue;
		if (v == f && !signbit(v) == !signbit(f))
			return b;
		double dd = isinf(f) ? (signbit(v) == signbit(f) ? -fabs(v) : INFINITY) : fabs(v - f);
		if (dd < bestd || (dd == bestd && !(b & 1))) {
			bestd = dd;
			best = b;
		}
	}
	return best;
}

double text_float_value(int dt, uint64_t bits)
{
	switch (dt) {
	case DT_DOUBLE: { double v; memcpy(&v, &bits, 8); return v; }
	case DT_FLOAT16: return f16_value((unsigned)bits);
	case DT_BFLOAT16: return bits_to_f32((uint32_t)bits << 16);
	case DT_FLOAT8E4M3FN: case DT_FLOAT8E4M3FNUZ: case DT_FLOAT8E5M2: case DT_FLOAT8E5M2FNUZ:
		return f8_value(dt, (unsigned)bits & 0xff);
	default: return bits_to_f32((uint32_t)bits);
	}
}

static uint64_t float_to_bits(int dt, float f)
{
	switch (dt) {
	case DT_FLOAT16: return f32_to_f16(f);
	case DT_BFLOAT16: return dtype_f32_to_bf16(f);
	case DT_FLOAT8E4M3FN: case DT_FLOAT8E4M3FNUZ: case DT_FLOAT8E5M2: case DT_FLOAT8E5M2FNUZ:
		return f32_to_f8(dt, f);
	default: return f32_to_bits(f);
	}
}

int text_float_bits(int dt, const char *s, uint64_t *bits)
{
	int w = float_width(dt);
	const char *q = s;
	bool neg = false;
	if (*q == '-' || *q == '+')
		neg = *q++ == '-';
	if (strncmp(q, "nan(0x", 6) == 0 || strncmp(q, "nan(0X", 6) == 0) {
		if (neg || q[6] == ')')
			return 1;
		uint64_t v = 0;
		const char *h = q + 6;
		for (; *h && *h != ')'; h++) {
			int x = hexval((unsigned char)*h);
			if (x < 0 || (v >> 60))
				return 1;
			v = v * 16 + (uint64_t)x;
		}
		if (*h != ')' || h[1])
			return 1;
		if (w < 64 && (v >> w))
			return 2;
		*bits = v;
		return 0;
	}
	if (strcmp(q, "nan") == 0) {
		*bits = canonical_nan(dt);
		if (neg && w != 8)
			*bits |= 1ull << (w - 1);
		return 0;
	}
	bool inf = strcmp(q, "inf") == 0;
	if (!inf) {
		if (!isdigit((unsigned char)*q))
			return 1;
		for (const char *r = q; *r; r++)
			if (!isdigit((unsigned char)*r) && !strchr(".eE+-", *r))
				return 1;
	}
	char *e;
	errno = 0;
	if (dt == DT_DOUBLE) {
		double v = inf ? (neg ? -INFINITY : INFINITY) : strtod(s, &e);
		if (!inf && (*e || (errno == ERANGE && isinf(v))))
			return *e ? 1 : 2;
		memcpy(bits, &v, 8);
		return 0;
	}
	float f = inf ? (neg ? -INFINITY : INFINITY) : strtof(s, &e);
	if (!inf && (*e || (errno == ERANGE && isinf(f))))
		return *e ? 1 : 2;
	*bits = float_to_bits(dt, f);
	return 0;
}

/* The current token's text, NUL-terminated, for strto*. */
static int tok_text(Parser *P, const Token *t, char *buf, size_t n)
{
	if (t->len >= n)
		return error_tok(P, t, "number too long");
	memcpy(buf, t->loc, t->len);
	buf[t->len] = 0;
	return WL_OK;
}

/* A number as an element of floating type dt (DT_FLOAT for float attributes). */
static int parse_fbits(Parser *P, int dt, uint64_t *bits)
{
	Token t = P->tok;
	char buf[1100];         /* an exact double subnormal has ~770 digits */
	if (t.kind != TK_INT && t.kind != TK_FLOAT)
		return error_tok(P, &t, "expected a number, got %s", desc(P, &t));
	TRY(tok_text(P, &t, buf, sizeof buf));
	int rc = text_float_bits(dt, buf, bits);
	if (rc == 2)
		return error_tok(P, &t, "%s out of range for %s", buf, dtype_name(dt));
	if (rc != 0)
		return error_tok(P, &t, "invalid number %s", buf);
	advance(P);
	return WL_OK;
}

static int parse_int(Parser *P, int64_t lo, int64_t hi, int64_t *out, const char *what)
{
	Token t = P->tok;
	char buf[64];
	if (t.kind != TK_INT)
		return error_tok(P, &t, "expected an integer (%s), got %s", what, desc(P, &t));
	TRY(tok_text(P, &t, buf, sizeof buf));
	errno = 0;
	long long v = strtoll(buf, NULL, 10);
	if (errno == ERANGE || v < lo || v > hi)
		return error_tok(P, &t, "%s out of range for %s", buf, what);
	*out = v;
	advance(P);
	return WL_OK;
}

static int parse_uint64(Parser *P, uint64_t *out)
{
	Token t = P->tok;
	char buf[64];
	if (t.kind != TK_INT)
		return error_tok(P, &t, "expected an integer (uint64), got %s", desc(P, &t));
	TRY(tok_text(P, &t, buf, sizeof buf));
	errno = 0;
	unsigned long long v = strtoull(buf, NULL, 10);
	if (errno == ERANGE || buf[0] == '-')
		return error_tok(P, &t, "%s out of range for uint64", buf);
	*out = v;
	advance(P);
	return WL_OK;
}

/* ---------------------------------------------------------------- names */

/* Undoes the printer's escapes (see the top of the file). */
static char *demangle(Arena *a, const char *s, size_t n)
{
	char *out = arena_alloc(a, n + 1);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '_' || i + 2 >= n || s[i + 1] != '_') {
			out[k++] = s[i];
			continue;
		}
		char c = s[i + 2];
		const char *map = strchr("s/d.c:m-u_", c);
		if (c && map && ((map - "s/d.c:m-u_") % 2) == 0) {
			out[k++] = map[1];
			i += 2;
		} else if (c == 'n') {
			i += 2;
		} else if (c == 'x' && i + 4 < n && hexval((unsigned char)s[i + 3]) >= 0 &&
		           hexval((unsigned char)s[i + 4]) >= 0) {
			out[k++] = (char)(hexval((unsigned char)s[i + 3]) * 16 + hexval((unsigned char)s[i + 4]));
			i += 4;
		} else {
			out[k++] = s[i];
		}
	}
	out[k] = 0;
	return out;
}

static bool at_name(Parser *P)
{
	return P->tok.kind == TK_IDENT || P->tok.kind == TK_STR;
}

static int parse_name(Parser *P, const char **out, const char *what)
{
	Token *t = &P->tok;
	if (t->kind == TK_IDENT)
		*out = demangle(P->a, t->loc, t->len);
	else if (t->kind == TK_STR)
		*out = arena_strndup(P->a, t->str, t->slen);
	else
		return error_tok(P, t, "expected %s, got %s", what, desc(P, t));
	advance(P);
	return WL_OK;
}

static int parse_string(Parser *P, const char **out, const char *what)
{
	Token *t = &P->tok;
	if (t->kind != TK_STR)
		return error_tok(P, t, "expected a string (%s), got %s", what, desc(P, t));
	*out = arena_strndup(P->a, t->str, t->slen);
	advance(P);
	return WL_OK;
}

/* names ::= item (',' item)*, item = name | nothing; ends before `stop`. An
 * empty or "" item is NULL (an absent optional value). */
static int parse_names(Parser *P, char stop, const char ***out, int *count)
{
	const char **v = NULL;
	int n = 0, cap = 0;
	if (!is_punct(&P->tok, stop)) {
		for (;;) {
			const char *name = NULL;
			if (at_name(P)) {
				TRY(parse_name(P, &name, "a name"));
				if (!*name)
					name = NULL;
			} else if (!is_punct(&P->tok, ',') && !is_punct(&P->tok, stop)) {
				return error_tok(P, &P->tok, "expected a name, ',' or '%c', got %s", stop,
				                 desc(P, &P->tok));
			}
			VEC_PUSH(P->a, v, n, cap, name);
			if (!accept(P, ','))
				break;
		}
	}
	*out = v;
	*count = n;
	return WL_OK;
}

/* ---------------------------------------------------------------- types */

static bool at_type(Parser *P)
{
	Token *t = &P->tok;
	return t->kind == TK_IDENT &&
	       (dtype_from_name(t->loc, t->len) != DT_UNDEFINED || is_word(t, "seq") ||
	        is_word(t, "map") || is_word(t, "optional") || is_word(t, "sparse_tensor"));
}

static int parse_prim(Parser *P, int *dt, const char *what)
{
	Token *t = &P->tok;
	if (t->kind != TK_IDENT || !(*dt = dtype_from_name(t->loc, t->len)))
		return error_tok(P, t, "expected an element type (%s), got %s", what, desc(P, t));
	advance(P);
	return WL_OK;
}

/* ('[' (dim (',' dim)*)? ']')?  — none: a scalar; '[]': unknown rank. */
static int parse_shape(Parser *P, Type *ty)
{
	ty->has_shape = true;
	if (!accept(P, '['))
		return WL_OK;
	if (accept(P, ']')) {
		ty->has_shape = false;
		return WL_OK;
	}
	int cap = 0;
	do {
		Dim dim = {0};
		if (accept(P, '?')) {
			dim.kind = DIM_UNKNOWN;
		} else if (at_name(P)) {
			dim.kind = DIM_PARAM;
			TRY(parse_name(P, &dim.param, "a dimension"));
		} else if (P->tok.kind == TK_INT) {
			dim.kind = DIM_VALUE;
			TRY(parse_int(P, INT64_MIN, INT64_MAX, &dim.value, "a dimension"));
		} else {
			return error_tok(P, &P->tok, "expected a dimension (number, name or '?'), got %s",
			                 desc(P, &P->tok));
		}
		VEC_PUSH(P->a, ty->dims, ty->rank, cap, dim);
	} while (accept(P, ','));
	return expect(P, ']', "after the dimensions");
}

static int parse_type(Parser *P, Type *ty);

static int parse_inner(Parser *P, Type *ty)
{
	ty->inner = arena_alloc(P->a, sizeof *ty->inner);
	return parse_type(P, ty->inner);
}

static int parse_type1(Parser *P, Type *ty)
{
	Token t = P->tok;
	int dt;
	memset(ty, 0, sizeof *ty);
	if (t.kind != TK_IDENT)
		return error_tok(P, &t, "expected a type, got %s", desc(P, &t));
	if ((dt = dtype_from_name(t.loc, t.len)) != DT_UNDEFINED) {
		advance(P);
		ty->kind = TY_TENSOR;
		ty->elem = dt;
		return parse_shape(P, ty);
	}
	advance(P);
	if (is_word(&t, "seq") || is_word(&t, "optional")) {
		ty->kind = is_word(&t, "seq") ? TY_SEQUENCE : TY_OPTIONAL;
		TRY(expect(P, '(', is_word(&t, "seq") ? "after 'seq'" : "after 'optional'"));
		TRY(parse_inner(P, ty));
		return expect(P, ')', "to close the type");
	}
	if (is_word(&t, "map")) {
		ty->kind = TY_MAP;
		TRY(expect(P, '(', "after 'map'"));
		TRY(parse_prim(P, &ty->map_key, "map key"));
		TRY(expect(P, ',', "after the map key type"));
		TRY(parse_inner(P, ty));
		return expect(P, ')', "to close the map type");
	}
	if (is_word(&t, "sparse_tensor")) {
		ty->kind = TY_SPARSE_TENSOR;
		TRY(expect(P, '(', "after 'sparse_tensor'"));
		TRY(parse_prim(P, &ty->elem, "sparse tensor"));
		TRY(parse_shape(P, ty));
		return expect(P, ')', "to close the sparse_tensor type");
	}
	return error_tok(P, &t, "unknown type %s", desc(P, &t));
}

static int parse_type(Parser *P, Type *ty)
{
	if (++P->depth > MAX_DEPTH)
		return error_tok(P, &P->tok, "nested too deeply");
	int rc = parse_type1(P, ty);
	P->depth--;
	return rc;
}

/* The comment after a declaration may give its type: "# type: TYPE ...".
 * It is read by a parser over the comment's text. */
static int type_comment(Parser *P, Type *ty)
{
	const Token *t = &P->prev;
	if (!t->cmt || ty->kind != TY_NONE)
		return WL_OK;
	const char *c = t->cmt + 1, *end = t->cmt + t->cmtlen;
	while (c < end && (*c == ' ' || *c == '\t'))
		c++;
	if ((size_t)(end - c) < 5 || memcmp(c, "type:", 5) != 0)
		return WL_OK;
	c += 5;
	Parser save = *P;
	P->p = c;
	P->end = end;
	P->line = t->cmt_line;
	P->line_start = t->cmt - (t->cmt_col - 1);
	P->tok.kind = TK_EOF;
	lex(P, &P->tok, &P->prev);
	int rc = parse_type(P, ty);
	bool failed = P->failed;
	*P = save;
	P->failed = failed;
	return rc;
}

/* ---------------------------------------------------------------- tensors */

static int tensor_shape(Parser *P, const Type *ty, const Token *at, int64_t **dims, int64_t *numel)
{
	if (ty->kind != TY_TENSOR || !ty->has_shape)
		return error_tok(P, at, "a tensor value needs a tensor type with a known rank");
	int64_t n = 1;
	*dims = arena_alloc(P->a, (size_t)(ty->rank ? ty->rank : 1) * sizeof **dims);
	for (int i = 0; i < ty->rank; i++) {
		if (ty->dims[i].kind != DIM_VALUE || ty->dims[i].value < 0)
			return error_tok(P, at, "a tensor value needs numeric dimensions");
		(*dims)[i] = ty->dims[i].value;
		if (__builtin_mul_overflow(n, ty->dims[i].value, &n) || n > (INT64_MAX >> 8))
			return error_tok(P, at, "tensor is too large");
	}
	*numel = n;
	return WL_OK;
}

static void put_bits(Tensor *t, int64_t i, uint64_t bits, int width)
{
	unsigned char *p = (unsigned char *)t->data + (size_t)i * (size_t)(width / 8);
	for (int k = 0; k < width / 8; k++)
		p[k] = (unsigned char)(bits >> (8 * k));
}

/* One element (two numbers for complex types) at index i. */
static int parse_elem(Parser *P, Tensor *t, int64_t i)
{
	static const struct { int dt; int64_t lo, hi; int w; } ints[] = {
		{DT_INT8, INT8_MIN, INT8_MAX, 8}, {DT_UINT8, 0, UINT8_MAX, 8},
		{DT_INT16, INT16_MIN, INT16_MAX, 16}, {DT_UINT16, 0, UINT16_MAX, 16},
		{DT_INT32, INT32_MIN, INT32_MAX, 32}, {DT_UINT32, 0, UINT32_MAX, 32},
		{DT_INT64, INT64_MIN, INT64_MAX, 64}, {DT_BOOL, 0, UINT8_MAX, 8},
	};
	int dt = t->dtype;
	uint64_t bits = 0, u = 0;
	int64_t v = 0;
	switch (dt) {
	case DT_FLOAT: case DT_DOUBLE: case DT_FLOAT16: case DT_BFLOAT16:
	case DT_FLOAT8E4M3FN: case DT_FLOAT8E4M3FNUZ: case DT_FLOAT8E5M2: case DT_FLOAT8E5M2FNUZ:
		TRY(parse_fbits(P, dt, &bits));
		put_bits(t, i, bits, float_width(dt));
		return WL_OK;
	case DT_COMPLEX64: case DT_COMPLEX128: {
		int part = dt == DT_COMPLEX64 ? DT_FLOAT : DT_DOUBLE, w = float_width(part);
		TRY(parse_fbits(P, part, &bits));
		put_bits(t, 2 * i, bits, w);
		TRY(expect(P, ',', "between the real and imaginary parts"));
		TRY(parse_fbits(P, part, &bits));
		put_bits(t, 2 * i + 1, bits, w);
		return WL_OK;
	}
	case DT_UINT64:
		TRY(parse_uint64(P, &u));
		put_bits(t, i, u, 64);
		return WL_OK;
	case DT_STRING:
		if (P->tok.kind != TK_STR)
			return error_tok(P, &P->tok, "expected a string, got %s", desc(P, &P->tok));
		t->strs[i].ptr = arena_strndup(P->a, P->tok.str, P->tok.slen);
		t->strs[i].len = P->tok.slen;
		advance(P);
		return WL_OK;
	case DT_INT4: case DT_UINT4: {
		bool s = dt == DT_INT4;
		TRY(parse_int(P, s ? -8 : 0, s ? 7 : 15, &v, dtype_name(dt)));
		unsigned char *p = (unsigned char *)t->data + i / 2;
		*p |= (unsigned char)((v & 15) << (4 * (i & 1)));
		return WL_OK;
	}
	default:
		break;
	}
	if (dt == DT_BOOL && (is_word(&P->tok, "true") || is_word(&P->tok, "false"))) {
		put_bits(t, i, is_word(&P->tok, "true"), 8);
		advance(P);
		return WL_OK;
	}
	for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
		if (ints[k].dt == dt) {
			TRY(parse_int(P, ints[k].lo, ints[k].hi, &v, dtype_name(dt)));
			put_bits(t, i, (uint64_t)v, ints[k].w);
			return WL_OK;
		}
	return error_tok(P, &P->tok, "tensors of type %s cannot be written as text",
	                 dtype_name(dt) ? dtype_name(dt) : "undefined");
}

/* '{' elems '}' for a value of type ty; `at` locates messages. */
static int parse_tensor_body(Parser *P, const Type *ty, const char *name, const Token *at, Tensor **out)
{
	int64_t *dims = NULL, numel = 0;
	TRY(tensor_shape(P, ty, at, &dims, &numel));
	TRY(expect(P, '{', "to start the tensor's values"));
	if (numel > 0 && is_punct(&P->tok, '}'))
		return error_tok(P, &P->tok, "tensor '%s' has no values but its shape needs %" PRId64
		                 " (elided? print with --print-weights)", name, numel);
	/* Each value takes at least two bytes of text: a bound before allocating. */
	if ((uint64_t)numel > (uint64_t)(P->end - P->tok.loc))
		return error_tok(P, &P->tok, "tensor '%s' has fewer values than its shape needs (%" PRId64 ")",
		                 name, numel);
	Tensor *t = tensor_new(P->a, name, ty->elem, ty->rank, dims);
	tensor_alloc_data(P->a, t);
	int64_t i = 0;
	if (!is_punct(&P->tok, '}')) {
		do {
			if (i >= numel)
				return error_tok(P, &P->tok, "too many values for tensor '%s': its shape needs %" PRId64,
				                 name, numel);
			TRY(parse_elem(P, t, i));
			i++;
		} while (accept(P, ','));
	}
	if (i != numel)
		return error_tok(P, &P->tok, "tensor '%s' has %" PRId64 " values, its shape needs %" PRId64,
		                 name, i, numel);
	TRY(expect(P, '}', "after the tensor's values"));
	t->storage = TS_RAW;
	*out = t;
	return WL_OK;
}

/* tensor ::= tensor-type name? '='? '{' elems '}' */
static int parse_tensor_literal(Parser *P, Tensor **out)
{
	Token at = P->tok;
	Type ty;
	const char *name = "";
	TRY(parse_type(P, &ty));
	if (at_name(P))
		TRY(parse_name(P, &name, "a tensor name"));
	accept(P, '=');
	return parse_tensor_body(P, &ty, name, &at, out);
}

/* sparse ::= 'sparse_tensor' '(' '[' ints ']' ',' tensor ',' tensor ')' */
static int parse_sparse(Parser *P, SparseTensor **out)
{
	if (!is_word(&P->tok, "sparse_tensor"))
		return error_tok(P, &P->tok, "expected 'sparse_tensor', got %s", desc(P, &P->tok));
	advance(P);
	SparseTensor *sp = arena_alloc(P->a, sizeof *sp);
	int cap = 0;
	TRY(expect(P, '(', "after 'sparse_tensor'"));
	TRY(expect(P, '[', "to start the sparse tensor's dimensions"));
	if (!accept(P, ']')) {
		do {
			int64_t v;
			TRY(parse_int(P, 0, INT64_MAX, &v, "a dimension"));
			VEC_PUSH(P->a, sp->dims, sp->ndim, cap, v);
		} while (accept(P, ','));
		TRY(expect(P, ']', "after the sparse tensor's dimensions"));
	}
	TRY(expect(P, ',', "after the sparse tensor's dimensions"));
	TRY(parse_tensor_literal(P, &sp->values));
	TRY(expect(P, ',', "after the sparse tensor's values"));
	TRY(parse_tensor_literal(P, &sp->indices));
	TRY(expect(P, ')', "to close the sparse tensor"));
	*out = sp;
	return WL_OK;
}

/* ---------------------------------------------------------------- attributes */

static const char *const attr_type_names[] = {
	[AT_FLOAT] = "float", [AT_INT] = "int", [AT_STRING] = "string", [AT_TENSOR] = "tensor",
	[AT_GRAPH] = "graph", [AT_FLOATS] = "floats", [AT_INTS] = "ints", [AT_STRINGS] = "strings",
	[AT_TENSORS] = "tensors", [AT_GRAPHS] = "graphs", [AT_SPARSE_TENSOR] = "sparse_tensor",
	[AT_SPARSE_TENSORS] = "sparse_tensors", [AT_TYPE_PROTO] = "type_proto",
	[AT_TYPE_PROTOS] = "type_protos",
};

static int attr_type_from_name(const Token *t)
{
	for (int i = 1; i <= AT_TYPE_PROTOS; i++)
		if (attr_type_names[i] && is_word(t, attr_type_names[i]))
			return i;
	return AT_UNDEFINED;
}

static const char *attr_type_name(int at)
{
	return at > 0 && at <= AT_TYPE_PROTOS ? attr_type_names[at] : "untyped";
}

/* The element kind of a list kind (AT_UNDEFINED for a scalar kind). */
static int list_elem(int at)
{
	switch (at) {
	case AT_FLOATS: return AT_FLOAT;
	case AT_INTS: return AT_INT;
	case AT_STRINGS: return AT_STRING;
	case AT_TENSORS: return AT_TENSOR;
	case AT_GRAPHS: return AT_GRAPH;
	case AT_SPARSE_TENSORS: return AT_SPARSE_TENSOR;
	case AT_TYPE_PROTOS: return AT_TYPE_PROTO;
	default: return AT_UNDEFINED;
	}
}

static int list_of(int at)
{
	for (int l = AT_FLOATS; l <= AT_TYPE_PROTOS; l++)
		if (list_elem(l) == at)
			return l;
	return AT_UNDEFINED;
}

static int parse_graph_rest(Parser *P, Graph *g);

/* One value (not a list) into *a; `want` is the declared kind or AT_UNDEFINED. */
static int parse_attr_value(Parser *P, Graph *g, Node *n, const char *aname, int want, Attr *a)
{
	Token t = P->tok;
	int got;
	uint64_t bits;
	switch (t.kind) {
	case TK_INT:
		if (want == AT_FLOAT) {
			TRY(parse_fbits(P, DT_FLOAT, &bits));
			a->f = bits_to_f32((uint32_t)bits);
			got = AT_FLOAT;
		} else {
			TRY(parse_int(P, INT64_MIN, INT64_MAX, &a->i, "int64"));
			got = AT_INT;
		}
		break;
	case TK_FLOAT:
		TRY(parse_fbits(P, DT_FLOAT, &bits));
		a->f = bits_to_f32((uint32_t)bits);
		got = AT_FLOAT;
		break;
	case TK_STR:
		a->s.ptr = arena_strndup(P->a, t.str, t.slen);
		a->s.len = t.slen;
		advance(P);
		got = AT_STRING;
		break;
	case TK_IDENT:
		if (want == AT_TYPE_PROTO) {
			a->tp = arena_alloc(P->a, sizeof *a->tp);
			TRY(parse_type(P, a->tp));
			got = AT_TYPE_PROTO;
		} else if (is_word(&t, "sparse_tensor")) {
			TRY(parse_sparse(P, &a->sp));
			got = AT_SPARSE_TENSOR;
		} else if (dtype_from_name(t.loc, t.len) != DT_UNDEFINED) {
			TRY(parse_tensor_literal(P, &a->t));
			got = AT_TENSOR;
		} else {
			const char *gname;
			TRY(parse_name(P, &gname, "a graph name"));
			a->g = graph_new(P->m, g, n, gname);
			TRY(parse_graph_rest(P, a->g));
			got = AT_GRAPH;
		}
		break;
	default:
		return error_tok(P, &t, "expected a value for attribute '%s', got %s", aname, desc(P, &t));
	}
	if (want != AT_UNDEFINED && want != got)
		return error_tok(P, &t, "attribute '%s' is declared %s but the value is %s", aname,
		                 attr_type_name(want), attr_type_name(got));
	a->type = got;
	return WL_OK;
}

/* '[' values ']' into *a; `want` is the declared list kind or AT_UNDEFINED. */
static int parse_attr_list(Parser *P, Graph *g, Node *n, const char *aname, int want, const Token *at,
                           Attr *a)
{
	Attr *el = NULL;
	int ne = 0, cap = 0;
	if (want != AT_UNDEFINED && list_elem(want) == AT_UNDEFINED)
		return error_tok(P, at, "attribute '%s' is declared %s but the value is a list", aname,
		                 attr_type_name(want));
	if (!accept(P, ']')) {
		do {
			Attr e = {0};
			TRY(parse_attr_value(P, g, n, aname, list_elem(want), &e));
			VEC_PUSH(P->a, el, ne, cap, e);
		} while (accept(P, ','));
		TRY(expect(P, ']', "to close the list"));
	}
	int kind = want;
	if (kind == AT_UNDEFINED) {
		if (ne == 0)
			return error_tok(P, at, "empty list: write its type, e.g. '%s: ints = []'", aname);
		int first = el[0].type;
		for (int i = 1; i < ne; i++) {
			int k = el[i].type;
			if ((k == AT_FLOAT && first == AT_INT) || (k == AT_INT && first == AT_FLOAT))
				first = AT_FLOAT;
			else if (k != first)
				return error_tok(P, at, "attribute '%s': list mixes %s and %s", aname,
				                 attr_type_name(first), attr_type_name(k));
		}
		kind = list_of(first);
	}
	a->type = kind;
	a->n = ne;
	size_t cnt = (size_t)(ne ? ne : 1);
	for (int i = 0; i < ne; i++) {
		Attr *e = &el[i];
		switch (kind) {
		case AT_FLOATS:
			if (!a->floats) a->floats = arena_alloc(P->a, cnt * sizeof *a->floats);
			a->floats[i] = e->type == AT_INT ? (float)e->i : e->f;
			break;
		case AT_INTS:
			if (!a->ints) a->ints = arena_alloc(P->a, cnt * sizeof *a->ints);
			a->ints[i] = e->i;
			break;
		case AT_STRINGS:
			if (!a->strings) a->strings = arena_alloc(P->a, cnt * sizeof *a->strings);
			a->strings[i] = e->s;
			break;
		case AT_TENSORS:
			if (!a->tensors) a->tensors = arena_alloc(P->a, cnt * sizeof *a->tensors);
			a->tensors[i] = e->t;
			break;
		case AT_GRAPHS:
			if (!a->graphs) a->graphs = arena_alloc(P->a, cnt * sizeof *a->graphs);
			a->graphs[i] = e->g;
			break;
		case AT_SPARSE_TENSORS:
			if (!a->sparse) a->sparse = arena_alloc(P->a, cnt * sizeof *a->sparse);
			a->sparse[i] = e->sp;
			break;
		case AT_TYPE_PROTOS:
			if (!a->types) a->types = arena_alloc(P->a, cnt * sizeof *a->types);
			a->types[i] = e->tp;
			break;
		default:
			WL_UNREACHABLE();
		}
	}
	return WL_OK;
}

/* attr ::= name (':' attr-type)? '=' (value | '[' values ']' | '@' ident) */
static int parse_attr(Parser *P, Graph *g, Node *n)
{
	Token at = P->tok;
	const char *name;
	int want = AT_UNDEFINED;
	TRY(parse_name(P, &name, "an attribute name"));
	if (node_attr(n, name))
		return error_tok(P, &at, "duplicate attribute '%s'", name);
	if (accept(P, ':')) {
		if (!(want = attr_type_from_name(&P->tok)))
			return error_tok(P, &P->tok, "unknown attribute type %s", desc(P, &P->tok));
		advance(P);
	}
	TRY(expect(P, '=', "after the attribute name"));
	Attr a = {0};
	if (accept(P, '@')) {
		Token r = P->tok;
		if (r.kind != TK_IDENT)
			return error_tok(P, &r, "expected an attribute name after '@', got %s", desc(P, &r));
		a.ref_attr_name = demangle(P->a, r.loc, r.len);
		a.type = want;
		advance(P);
	} else if (accept(P, '[')) {
		TRY(parse_attr_list(P, g, n, name, want, &at, &a));
	} else {
		if (list_elem(want) != AT_UNDEFINED)
			return error_tok(P, &P->tok, "attribute '%s' is declared %s: write a list [...]", name,
			                 attr_type_name(want));
		TRY(parse_attr_value(P, g, n, name, want, &a));
	}
	Attr *dst = node_add_attr(n, name, a.type);
	a.name = dst->name;
	a.doc = dst->doc;
	*dst = a;
	return WL_OK;
}

/* attrs ::= '<' (attr (',' attr)*)? '>'; the '<' is current. */
static int parse_attrs(Parser *P, Graph *g, Node *n)
{
	TRY(expect(P, '<', "to start the attributes"));
	if (accept(P, '>'))
		return WL_OK;
	do
		TRY(parse_attr(P, g, n));
	while (accept(P, ','));
	return expect(P, '>', "after the attributes");
}

/* ---------------------------------------------------------------- nodes */

/* The node name from a comment after the node: the rest of the line, or a
 * quoted string with escapes. NULL if none. */
static const char *comment_name(Parser *P, const Token *t)
{
	if (!t->cmt)
		return NULL;
	const char *c = t->cmt + 1, *end = t->cmt + t->cmtlen;
	while (c < end && (*c == ' ' || *c == '\t'))
		c++;
	while (end > c && isspace((unsigned char)end[-1]))
		end--;
	if (c == end)
		return NULL;
	if (*c == '"' && end - c >= 2 && end[-1] == '"') {
		Parser sub = *P;
		sub.p = c;
		sub.end = end;
		sub.d = NULL;           /* a failure here is not an error */
		sub.failed = false;
		Token st = {0};
		st.line = t->cmt_line;
		if (lex_string(&sub, &st) == WL_OK && sub.p == end)
			return arena_strndup(P->a, st.str, st.slen);
		/* not one string: the raw text is the name */
	}
	return arena_strndup(P->a, c, (size_t)(end - c));
}

/* Looks a value up for use as an input; creates it here if it is not
 * defined yet (the verifier reports values nobody defines). */
static Value *use_value(Graph *g, const char *name)
{
	Value *v = graph_find(g, name);
	return v ? v : graph_value(g, name);
}

/* node ::= ('[' name ']')? names '=' ident ('.' ident)* attrs? '(' names ')' attrs? */
static int parse_node(Parser *P, Graph *g)
{
	Token start = P->tok;
	const char *label = NULL;
	if (accept(P, '[')) {
		TRY(parse_name(P, &label, "a node name"));
		TRY(expect(P, ']', "after the node name"));
	}
	const char **outs, **ins;
	int nout, nin;
	TRY(parse_names(P, '=', &outs, &nout));
	Token eq = P->tok;
	if (!is_punct(&eq, '='))
		return error_tok(P, &eq, "expected '=' after the node's outputs, got %s", desc(P, &eq));
	advance(P);

	/* qualified op name: the last identifier is the op type, the rest the domain */
	Token optok = P->tok;
	const char *part;
	char *domain = NULL;
	if (optok.kind != TK_IDENT)
		return error_tok(P, &optok, "expected an operator name, got %s", desc(P, &optok));
	TRY(parse_name(P, &part, "an operator name"));
	while (accept(P, '.')) {
		domain = domain ? arena_printf(P->a, "%s.%s", domain, part) : arena_strdup(P->a, part);
		if (P->tok.kind != TK_IDENT)
			return error_tok(P, &P->tok, "expected an operator name after '.', got %s",
			                 desc(P, &P->tok));
		TRY(parse_name(P, &part, "an operator name"));
	}
	Node *n = node_new(g, part, domain ? domain : "", label ? label : "");
	node_append(g, n);

	bool attrs_before = is_punct(&P->tok, '<');
	if (attrs_before)
		TRY(parse_attrs(P, g, n));
	TRY(expect(P, '(', "to start the node's inputs"));
	TRY(parse_names(P, ')', &ins, &nin));
	TRY(expect(P, ')', "after the node's inputs"));
	if (!attrs_before && is_punct(&P->tok, '<'))
		TRY(parse_attrs(P, g, n));
	if (!label) {
		const char *cn = comment_name(P, &P->prev);
		if (cn)
			n->name = cn;
	}

	for (int i = 0; i < nin; i++)
		node_add_input(n, ins[i] ? use_value(g, ins[i]) : NULL);
	for (int i = 0; i < nout; i++) {
		Value *v = NULL;
		if (outs[i]) {
			v = graph_value(g, outs[i]);
			if (v->producer || v->is_input || v->init)
				return error_tok(P, &start, "value '%s' is defined twice", outs[i]);
		}
		node_add_output(n, v);
	}
	return WL_OK;
}

/* ---------------------------------------------------------------- graphs */

/* A declaration: type? name, resolved after the graph's nodes. */
typedef struct Decl {
	const char *name;
	Type type;
	Token at;
} Decl;

static int parse_decl(Parser *P, Decl *dc)
{
	memset(dc, 0, sizeof *dc);
	if (at_type(P))
		TRY(parse_type(P, &dc->type));
	dc->at = P->tok;
	TRY(parse_name(P, &dc->name, "a value name"));
	if (dc->type.kind == TY_NONE && is_punct(&P->tok, '['))
		return error_tok(P, &dc->at, "unknown type %s", desc(P, &dc->at));
	return WL_OK;
}

/* '(' (decl ('=' tensor)?)* ')' — graph inputs, the '(' consumed. */
static int parse_inputs(Parser *P, Graph *g)
{
	if (accept(P, ')'))
		return WL_OK;
	for (;;) {
		Decl dc;
		Tensor *t = NULL;
		TRY(parse_decl(P, &dc));
		if (accept(P, '='))
			TRY(parse_tensor_body(P, &dc.type, dc.name, &dc.at, &t));
		bool more = accept(P, ',');
		TRY(type_comment(P, &dc.type));
		if (graph_find_local(g, dc.name))
			return error_tok(P, &dc.at, "graph input '%s' is declared twice", dc.name);
		Value *v = graph_value(g, dc.name);
		v->type = dc.type;
		graph_add_input(g, v);
		if (t)
			graph_set_init(g, v, t);
		if (!more)
			break;
	}
	return expect(P, ')', "after the graph inputs");
}

/* Declarations until `close`, the opening consumed. In '< >' a declaration
 * with '= {...}' is an initializer (made now); the others are returned. */
static int parse_decls(Parser *P, Graph *g, char close, bool inits, Decl **out, int *nout)
{
	Decl *v = NULL;
	int n = 0, cap = 0;
	*out = NULL;
	*nout = 0;
	if (accept(P, close))
		return WL_OK;
	for (;;) {
		Decl dc;
		Tensor *t = NULL;
		SparseTensor *sp = NULL;
		TRY(parse_decl(P, &dc));
		if (inits && accept(P, '=')) {
			if (dc.type.kind == TY_SPARSE_TENSOR)
				TRY(parse_sparse(P, &sp));
			else
				TRY(parse_tensor_body(P, &dc.type, dc.name, &dc.at, &t));
		}
		bool more = accept(P, ',');
		TRY(type_comment(P, &dc.type));
		if (t) {
			Value *val = graph_find_local(g, dc.name);
			if (val && val->init)
				return error_tok(P, &dc.at, "initializer '%s' is defined twice", dc.name);
			val = graph_value(g, dc.name);
			val->type = dc.type;
			graph_set_init(g, val, t);
		} else if (sp) {
			if (sp->values)
				sp->values->name = dc.name;
			VEC_PUSH(P->a, g->sparse_inits, g->nsparse, g->cap_sparse, sp);
		} else {
			VEC_PUSH(P->a, v, n, cap, dc);
		}
		if (!more)
			break;
	}
	*out = v;
	*nout = n;
	return expect(P, close, close == ')' ? "after the graph outputs" : "after the declarations");
}

/* Everything after a graph's name: inputs, outputs, declarations, nodes. */
static int parse_graph_body(Parser *P, Graph *g)
{
	Decl *outs, *vis = NULL;
	int nout, nvi = 0;
	TRY(expect(P, '(', "after the graph name"));
	TRY(parse_inputs(P, g));
	if (P->tok.kind != TK_ARROW)
		return error_tok(P, &P->tok, "expected '=>' after the graph inputs, got %s", desc(P, &P->tok));
	advance(P);
	TRY(expect(P, '(', "to start the graph outputs"));
	TRY(parse_decls(P, g, ')', false, &outs, &nout));
	if (accept(P, '<'))
		TRY(parse_decls(P, g, '>', true, &vis, &nvi));
	TRY(expect(P, '{', "to start the graph's nodes"));
	while (!accept(P, '}')) {
		if (P->tok.kind == TK_EOF)
			return error_tok(P, &P->tok, "expected '}' at the end of graph '%s', got %s", g->name,
			                 desc(P, &P->tok));
		TRY(parse_node(P, g));
	}
	for (int i = 0; i < nout; i++) {
		Value *v = use_value(g, outs[i].name);
		if (outs[i].type.kind != TY_NONE)
			v->type = outs[i].type;
		graph_add_output(g, v);
	}
	for (int i = 0; i < nvi; i++) {
		Value *v = use_value(g, vis[i].name);
		if (vis[i].type.kind != TY_NONE)
			v->type = vis[i].type;
		v->in_value_info = true;
	}
	return WL_OK;
}

static int parse_graph_rest(Parser *P, Graph *g)
{
	if (++P->depth > MAX_DEPTH)
		return error_tok(P, &P->tok, "graphs nested too deeply");
	int rc = parse_graph_body(P, g);
	P->depth--;
	return rc;
}

/* ---------------------------------------------------------------- model */

static int parse_opsets(Parser *P, Opset **ops, int *n, int *cap)
{
	TRY(expect(P, '[', "to start the opset list"));
	if (accept(P, ']'))
		return WL_OK;
	do {
		Opset o;
		TRY(parse_string(P, &o.domain, "opset domain"));
		TRY(expect(P, ':', "after the opset domain"));
		TRY(parse_int(P, 0, INT64_MAX, &o.version, "opset version"));
		if (ops)
			VEC_PUSH(P->a, *ops, *n, *cap, o);
		else
			module_set_opset(P->m, o.domain, o.version);
	} while (accept(P, ','));
	return expect(P, ']', "after the opset list");
}

static int parse_metadata(Parser *P)
{
	Module *m = P->m;
	TRY(expect(P, '[', "to start metadata_props"));
	if (accept(P, ']'))
		return WL_OK;
	do {
		KV kv;
		TRY(parse_string(P, &kv.key, "metadata key"));
		TRY(expect(P, ':', "after the metadata key"));
		TRY(parse_string(P, &kv.value, "metadata value"));
		VEC_PUSH(P->a, m->metadata, m->nmetadata, m->cap_metadata, kv);
	} while (accept(P, ','));
	return expect(P, ']', "after metadata_props");
}

/* header ::= '<' field (',' field)* '>' */
static int parse_header(Parser *P)
{
	Module *m = P->m;
	do {
		Token k = P->tok;
		if (k.kind != TK_IDENT)
			return error_tok(P, &k, "expected a model field name, got %s", desc(P, &k));
		advance(P);
		TRY(expect(P, ':', "after the field name"));
		if (is_word(&k, "ir_version"))
			TRY(parse_int(P, 0, INT64_MAX, &m->ir_version, "ir_version"));
		else if (is_word(&k, "model_version"))
			TRY(parse_int(P, INT64_MIN, INT64_MAX, &m->model_version, "model_version"));
		else if (is_word(&k, "opset_import"))
			TRY(parse_opsets(P, NULL, NULL, NULL));
		else if (is_word(&k, "producer_name"))
			TRY(parse_string(P, &m->producer_name, "producer_name"));
		else if (is_word(&k, "producer_version"))
			TRY(parse_string(P, &m->producer_version, "producer_version"));
		else if (is_word(&k, "domain"))
			TRY(parse_string(P, &m->domain, "domain"));
		else if (is_word(&k, "doc_string"))
			TRY(parse_string(P, &m->doc, "doc_string"));
		else if (is_word(&k, "metadata_props"))
			TRY(parse_metadata(P));
		else
			return error_tok(P, &k, "unknown model field %s", desc(P, &k));
	} while (accept(P, ','));
	return expect(P, '>', "after the model fields");
}

/* function ::= ('<' field, ... '>')? name ('<' names '>')? '(' decls ')' '=>' '(' decls ')'
 *              ('<' decls '>')? '{' node* '}' */
static int parse_function(Parser *P)
{
	Module *m = P->m;
	Function *fn = arena_alloc(P->a, sizeof *fn);
	int capo = 0, capa = 0;
	fn->domain = "";
	fn->doc = "";
	if (accept(P, '<')) {
		do {
			Token k = P->tok;
			if (k.kind != TK_IDENT)
				return error_tok(P, &k, "expected a function field name, got %s", desc(P, &k));
			advance(P);
			TRY(expect(P, ':', "after the field name"));
			if (is_word(&k, "domain"))
				TRY(parse_string(P, &fn->domain, "domain"));
			else if (is_word(&k, "doc_string"))
				TRY(parse_string(P, &fn->doc, "doc_string"));
			else if (is_word(&k, "opset_import"))
				TRY(parse_opsets(P, &fn->opsets, &fn->nopsets, &capo));
			else
				return error_tok(P, &k, "unknown function field %s", desc(P, &k));
		} while (accept(P, ','));
		TRY(expect(P, '>', "after the function fields"));
	}
	TRY(parse_name(P, &fn->name, "a function name"));
	if (accept(P, '<') && !accept(P, '>')) {
		do {
			const char *an;
			TRY(parse_name(P, &an, "an attribute name"));
			if (is_punct(&P->tok, '='))
				return error_tok(P, &P->tok, "default values of function attributes are not supported");
			VEC_PUSH(P->a, fn->attr_names, fn->nattr_names, capa, an);
		} while (accept(P, ','));
		TRY(expect(P, '>', "after the function's attribute names"));
	}
	if (++P->depth > MAX_DEPTH)
		return error_tok(P, &P->tok, "nested too deeply");
	Graph *g = fn->body = graph_new(m, NULL, NULL, fn->name);
	TRY(parse_graph_body(P, g));
	P->depth--;
	VEC_PUSH(P->a, m->funcs, m->nfuncs, m->cap_funcs, fn);
	return WL_OK;
}

static int parse_model(Parser *P)
{
	if (accept(P, '<'))
		TRY(parse_header(P));
	const char *name = "";
	if (!is_punct(&P->tok, '('))    /* onnx 1.12 lets the name out */
		TRY(parse_name(P, &name, "a graph name"));
	P->m->graph = graph_new(P->m, NULL, NULL, name);
	TRY(parse_graph_rest(P, P->m->graph));
	while (P->tok.kind != TK_EOF)
		TRY(parse_function(P));
	return P->failed ? WL_ERR : WL_OK;
}

int text_parse(const char *src, size_t len, const char *path, Module **out, Diag *d)
{
	*out = NULL;
	Module *m = module_new(path);
	Parser P = {0};
	P.path = path ? path : "<text>";
	P.src = src ? src : "";
	P.end = P.src + (src ? len : 0);
	P.p = P.src;
	P.line = 1;
	P.line_start = P.src;
	P.m = m;
	P.a = m->arena;
	P.d = d;
	P.tok.kind = TK_EOF;
	lex(&P, &P.tok, &P.prev);
	if (parse_model(&P) != WL_OK || P.failed || onnx_validate(m, d) != WL_OK) {
		if (!d || !d->set)
			diag_fail(d, "%s: cannot parse", P.path);
		module_free(m);
		return WL_ERR;
	}
	*out = m;
	return WL_OK;
}

int text_parse_file(const char *path, Module **out, Diag *d)
{
	MappedFile mf;
	*out = NULL;
	TRY(file_map(path, &mf, d));
	int rc = text_parse(mf.addr, mf.len, path, out, d);
	if (mf.addr)
		munmap(mf.addr, mf.len);
	return rc;
}
