/* The byte-level BPE tokenizer of Qwen2/Qwen2.5-VL, read from a HuggingFace tokenizer.json
 * (or tokenizer.json.gz), producing exactly the ids of the `tokenizers` library.
 *
 * What a tokenizer.json may contain, and what vlmc refuses by name (file and JSON path):
 *   model          BPE with vocab and merges ("a b" or ["a","b"]); no dropout, no subword
 *                  prefix/suffix, no byte fallback. The vocab must hold all 256 byte symbols.
 *   added_tokens   matched atomically on the raw text, longest first; lstrip, rstrip,
 *                  single_word and normalized must be false (Qwen's are).
 *   normalizer     null or NFC (utf8proc).
 *   pre_tokenizer  Sequence[Split(regex or string, "Isolated"), ByteLevel(use_regex=false)],
 *                  the Qwen2 form; the regex runs in PCRE2 with Unicode (UTF+UCP) semantics,
 *                  with `\s` narrowed to Unicode White_Space as in Oniguruma.
 *   post_processor null or ByteLevel (adds nothing to ids);  decoder  ByteLevel.
 *
 * Encoding: split on added tokens, NFC the rest, split with the regex, map bytes through the
 * GPT-2 byte-to-unicode table, then BPE by merge rank (lowest rank first, leftmost first).
 * No BOS/EOS is added. A loaded tokenizer is immutable: encode and decode may run on several
 * threads at once.
 *
 * Decoding concatenates the tokens' bytes and replaces each maximal ill-formed UTF-8
 * subsequence with U+FFFD, as the reference (Rust's from_utf8_lossy) does; the streaming
 * decoder emits the same text one id at a time, holding back an incomplete character. */
#ifndef VLMC_FRONTEND_TOKENIZER_H
#define VLMC_FRONTEND_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "support/status.h"
#include "support/strbuf.h"

typedef struct vlmc_tokenizer_s vlmc_tokenizer_t;

/* Reads `path`, gzip-compressed or not (recognised by its magic bytes, not its name). */
vlmc_status_t vlmc_tokenizer_create_from_file(const char *path, vlmc_tokenizer_t **out_tokenizer);
/* Parses tokenizer.json text already in memory (not compressed). `name` starts every error
 * message ("tokenizer.json: model.merges[12]: expected \"a b\" or [\"a\",\"b\"]"). */
vlmc_status_t vlmc_tokenizer_create_from_buffer(const char *name, const char *json, size_t len,
                                                vlmc_tokenizer_t **out_tokenizer);
void vlmc_tokenizer_destroy(vlmc_tokenizer_t *tokenizer);

/* One more than the largest id (vocab and added tokens). Ids below it may still be holes. */
size_t vlmc_tokenizer_id_limit(const vlmc_tokenizer_t *tokenizer);
/* Id of a vocab entry or added token given by its exact text (byte-level form for vocab
 * entries, e.g. "Ġthe"; content for added tokens, e.g. "<|im_end|>"); -1 when absent. */
int32_t vlmc_tokenizer_token_to_id(const vlmc_tokenizer_t *tokenizer, const char *text,
                                   size_t len);
/* The token's text as written in tokenizer.json (borrowed, NUL-terminated); NULL for an id
 * that names nothing. */
const char *vlmc_tokenizer_id_to_token(const vlmc_tokenizer_t *tokenizer, int32_t id);
bool vlmc_tokenizer_id_is_special(const vlmc_tokenizer_t *tokenizer, int32_t id);

/* A growable list of token ids. */
typedef struct {
  int32_t *data;
  size_t len;
  size_t capacity;
} vlmc_token_ids_t;

void vlmc_token_ids_init(vlmc_token_ids_t *ids);
void vlmc_token_ids_deinit(vlmc_token_ids_t *ids);
vlmc_status_t vlmc_token_ids_append(vlmc_token_ids_t *ids, int32_t id);

/* Appends the ids of `text` (UTF-8, `len` bytes, NULs allowed) to `out_ids`. Text that is not
 * valid UTF-8 is an error naming the byte offset (the reference takes only Unicode strings). */
vlmc_status_t vlmc_tokenizer_encode(const vlmc_tokenizer_t *tokenizer, const char *text,
                                    size_t len, vlmc_token_ids_t *out_ids);

/* Streaming decoder: feed ids one at a time; only complete UTF-8 is appended to `out`.
 * A plain struct so that callers can keep it on the stack; it owns nothing. */
typedef struct {
  const vlmc_tokenizer_t *tokenizer;
  bool skip_special_tokens; /* drop added tokens marked special (<|im_end|>, ...) */
  uint8_t pending[4];       /* bytes of a character not yet complete */
  uint8_t pending_len;
  uint8_t pending_need;     /* total length of that character */
} vlmc_tokenizer_decoder_t;

void vlmc_tokenizer_decoder_init(vlmc_tokenizer_decoder_t *decoder,
                                 const vlmc_tokenizer_t *tokenizer, bool skip_special_tokens);
/* An id that names nothing is an error (VLMC_OUT_OF_RANGE) and leaves the state unchanged; the
 * reference silently skips such ids, so a caller wanting its text may skip them too. */
vlmc_status_t vlmc_tokenizer_decoder_push(vlmc_tokenizer_decoder_t *decoder, int32_t id,
                                          vlmc_strbuf_t *out);
/* Flushes a character left incomplete as U+FFFD and resets the decoder. */
void vlmc_tokenizer_decoder_finish(vlmc_tokenizer_decoder_t *decoder, vlmc_strbuf_t *out);

/* The whole-list form of the streaming decoder (appends to `out`). */
vlmc_status_t vlmc_tokenizer_decode(const vlmc_tokenizer_t *tokenizer, const int32_t *ids,
                                    size_t count, bool skip_special_tokens, vlmc_strbuf_t *out);

/* JSON string literals for line-oriented tools (`vlmc tokenize`, fixtures): decodes one literal
 * with optional surrounding whitespace and nothing else; \uXXXX escapes with surrogate pairs
 * are combined, lone surrogates, raw control characters and invalid UTF-8 are errors
 * ("column 7: lone surrogate \\ud800"). Embedded NULs are kept (out->len counts them). */
vlmc_status_t vlmc_tokenizer_json_string_decode(const char *text, size_t len, vlmc_strbuf_t *out);
/* Appends `text` as a JSON string literal (quotes, escapes for '"', '\\' and controls). */
void vlmc_tokenizer_json_string_encode(const char *text, size_t len, vlmc_strbuf_t *out);

#endif
