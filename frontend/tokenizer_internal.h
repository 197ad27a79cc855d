/* Shared by frontend/tokenizer_*.c only: the loaded tokenizer's tables and the GPT-2
 * byte-to-unicode mapping. Not a public header. */
#ifndef VLMC_FRONTEND_TOKENIZER_INTERNAL_H
#define VLMC_FRONTEND_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frontend/tokenizer.h"
#include "support/arena.h"

enum {
  VLMC_TOK_BYTE_SYMBOLS = 256,
  /* GPT-2 maps the 68 unprintable bytes to U+0100..U+0143; every symbol is below this. */
  VLMC_TOK_BYTE_SYMBOL_LIMIT = 256 + 68,
};

typedef enum {
  VLMC_TOK_ENTRY_HOLE = 0, /* no token has this id */
  VLMC_TOK_ENTRY_MODEL,    /* from model.vocab */
  VLMC_TOK_ENTRY_ADDED,    /* from added_tokens, special: false */
  VLMC_TOK_ENTRY_SPECIAL,  /* from added_tokens, special: true */
} vlmc_tok_entry_kind_t;

typedef struct {
  const char *text;     /* as in tokenizer.json, NUL-terminated, in the arena */
  const uint8_t *bytes; /* what decoding this id emits */
  uint32_t text_len;
  uint32_t bytes_len;
  vlmc_tok_entry_kind_t kind;
} vlmc_tok_entry_t;

typedef struct {
  uint64_t pair; /* (left id << 32) | right id; VLMC_TOK_EMPTY_PAIR for a free slot */
  uint32_t rank;
  uint32_t merged_id;
} vlmc_tok_merge_slot_t;

#define VLMC_TOK_EMPTY_PAIR UINT64_MAX
#define VLMC_TOK_EMPTY_ID UINT32_MAX

typedef struct {
  const char *content; /* in the arena */
  uint32_t len;
  int32_t id;
} vlmc_tok_added_t;

struct vlmc_tokenizer_s {
  vlmc_arena_t arena;
  char *name; /* for messages */

  vlmc_tok_entry_t *entries; /* indexed by id */
  size_t entry_count;

  /* model.vocab text -> id, open addressing (linear probing), VLMC_TOK_EMPTY_ID = free. */
  uint32_t *vocab_slots;
  size_t vocab_mask;

  vlmc_tok_merge_slot_t *merge_slots;
  size_t merge_mask;

  int32_t byte_ids[VLMC_TOK_BYTE_SYMBOLS]; /* id of each single-byte symbol */
  bool ignore_merges;

  /* Added tokens sorted by first byte, then longest first; those starting with byte b are
   * added[added_first[b] .. added_first[b + 1]). */
  vlmc_tok_added_t *added;
  size_t added_count;
  uint32_t added_first[257];

  bool nfc;
  pcre2_code *split_regex;
};

/* GPT-2's byte -> code point table, and its inverse (-1 for code points no byte maps to). */
uint32_t vlmc_tok_byte_to_codepoint(uint8_t byte);
int vlmc_tok_codepoint_to_byte(uint32_t codepoint);

/* Length of the UTF-8 sequence a lead byte starts (1..4), or 0 for a byte that cannot lead. */
size_t vlmc_tok_utf8_lead_length(uint8_t lead);
/* Whether `byte` may stand at position `index` (1..3) of a sequence led by `lead`. */
bool vlmc_tok_utf8_continuation_ok(uint8_t lead, size_t index, uint8_t byte);
/* Decodes one UTF-8 character of valid UTF-8 at s[0..len); returns its length (>= 1) and the
 * code point in *out_cp, or 0 when the bytes there are not well-formed UTF-8. */
size_t vlmc_tok_utf8_next(const uint8_t *s, size_t len, uint32_t *out_cp);
/* Offset of the first byte that is not part of well-formed UTF-8, or len when all are. */
size_t vlmc_tok_utf8_validate(const uint8_t *s, size_t len);
/* Encodes a code point (<= 0x10FFFF); returns the length (1..4). */
size_t vlmc_tok_utf8_put(uint32_t cp, uint8_t out[4]);

struct cJSON;
/* Reads root.pre_tokenizer into tokenizer->split_regex (frontend/tokenizer_pretok.c). */
vlmc_status_t vlmc_tok_pre_tokenizer_load(vlmc_tokenizer_t *tokenizer, const struct cJSON *root);

uint64_t vlmc_tok_hash_bytes(const void *data, size_t len);
/* Looks text up in model.vocab; -1 when absent. */
int32_t vlmc_tok_vocab_find(const vlmc_tokenizer_t *tokenizer, const char *text, size_t len);
/* The merge of (left, right), or NULL when those two ids do not merge. */
const vlmc_tok_merge_slot_t *vlmc_tok_merge_find(const vlmc_tokenizer_t *tokenizer,
                                                 uint32_t left, uint32_t right);
/* The slot holding `pair`, or the free slot where it goes (the table is never full). */
vlmc_tok_merge_slot_t *vlmc_tok_merge_slot_for_insert(vlmc_tokenizer_t *tokenizer, uint64_t pair);

#endif
