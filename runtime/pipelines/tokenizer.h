/* tokenizer.h — Hugging Face tokenizer.json (BPE models) for the LLM
 * pipeline: text → ids for `--prompt`, ids → text for the output
 * (runtime/pipelines/, beside pipeline.h).
 *
 * Supported (anything else is a one-line error naming the file and the
 * component, never a silent approximation):
 *   model          BPE: vocab, merges ("a b" strings or [a, b] pairs), unk_token,
 *                  fuse_unk, byte_fallback, ignore_merges (no dropout, no
 *                  continuing_subword_prefix / end_of_word_suffix)
 *   added_tokens   split off the raw text first (leftmost, then longest match);
 *                  lstrip / rstrip / single_word must be false
 *   normalizer     null, NFC, NFKC, NFD, NFKD (utf8proc), Prepend, Replace
 *                  (String pattern), Sequence
 *   pre_tokenizer  null, ByteLevel (add_prefix_space, use_regex: GPT-2's
 *                  pattern), Split (String or Regex pattern — PCRE2 with UTF
 *                  and Unicode properties; behavior Isolated or Removed),
 *                  Metaspace (replacement, prepend_scheme, split), Digits,
 *                  Sequence
 *   post_processor null, ByteLevel (no effect on ids), TemplateProcessing
 *                  (the "single" template), Sequence
 *   decoder        null, ByteLevel, Replace, ByteFallback, Fuse, Strip,
 *                  Metaspace, Sequence
 * This covers the Llama 2 (SentencePiece BPE with byte fallback), Llama 3
 * and Qwen2 (byte-level BPE with a regex split) families.
 */
#ifndef WLOWER_TOKENIZER_H
#define WLOWER_TOKENIZER_H

#include <stdbool.h>
#include <stdint.h>
#include "compiler/ir/ir.h"

typedef struct Tokenizer Tokenizer;

/* Reads and checks PATH (a tokenizer.json). */
int tokenizer_open(const char *path, Tokenizer **out, Diag *d);
void tokenizer_free(Tokenizer *t);
/* Largest id + 1 over the vocabulary and the added tokens. */
int64_t tokenizer_vocab_size(const Tokenizer *t);
/* The id of a token's exact text (vocabulary or added tokens), or -1. */
int64_t tokenizer_token_id(const Tokenizer *t, const char *token);

/* Text (UTF-8) → ids; add_special applies the post-processor's template
 * (e.g. Llama's leading <s>). *ids is malloc'ed. */
int tokenizer_encode(const Tokenizer *t, const char *text, bool add_special, int64_t **ids, int *n, Diag *d);
/* Ids → text (malloc'ed, NUL-terminated UTF-8; bytes that do not form UTF-8
 * become U+FFFD, as the Hugging Face decoders do). skip_special drops added
 * tokens marked special. An id outside the vocabulary is an error. */
int tokenizer_decode(const Tokenizer *t, const int64_t *ids, int n, bool skip_special, char **text, Diag *d);

/* GPT-2's pre-tokenizer (its regex, which is also tiktoken's gpt2 and
 * Whisper's pat_str; PCRE2 with UTF and Unicode properties): the pieces of
 * text[0..n) as byte offsets, piece i = [cuts[i], cuts[i + 1]) (*cuts
 * malloc'ed, *npieces + 1 entries). Text that is not UTF-8 is an error. */
int gpt2_split(const char *text, size_t n, size_t **cuts, int *npieces, Diag *d);

#endif
