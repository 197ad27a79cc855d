/* UTF-8 and byte-level helpers shared by the tokenizer files: the GPT-2 byte-to-unicode
 * table, well-formedness per Unicode Table 3-7, and a string hash. */
#include <assert.h>
#include <string.h>

#include "frontend/tokenizer_internal.h"

/* GPT-2 keeps the printable bytes '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF as themselves and
 * moves the other 68 bytes, in byte order, to U+0100 upwards, so that every byte is a visible
 * character in vocab files. */
static bool byte_is_printable(unsigned byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
}

/* The 68 moved bytes are 0x00..0x20, 0x7F..0xA0 and 0xAD, in that order. */
uint32_t vlmc_tok_byte_to_codepoint(uint8_t byte) {
  if (byte_is_printable(byte)) return byte;
  if (byte <= 0x20) return 256u + byte;
  if (byte <= 0xA0) return 256u + 33u + (byte - 0x7Fu);
  assert(byte == 0xAD);
  return 256u + 67u;
}

int vlmc_tok_codepoint_to_byte(uint32_t codepoint) {
  if (codepoint < 256) return byte_is_printable(codepoint) ? (int)codepoint : -1;
  if (codepoint >= VLMC_TOK_BYTE_SYMBOL_LIMIT) return -1;
  uint32_t k = codepoint - 256;
  if (k < 33) return (int)k;
  if (k < 67) return (int)(0x7F + (k - 33));
  return 0xAD;
}

size_t vlmc_tok_utf8_lead_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

bool vlmc_tok_utf8_continuation_ok(uint8_t lead, size_t index, uint8_t byte) {
  uint8_t lo = 0x80, hi = 0xBF;
  if (index == 1) {
    /* The second byte carries the limits that exclude overlongs, surrogates and > U+10FFFF. */
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  }
  return byte >= lo && byte <= hi;
}

size_t vlmc_tok_utf8_next(const uint8_t *s, size_t len, uint32_t *out_cp) {
  if (len == 0) return 0;
  size_t n = vlmc_tok_utf8_lead_length(s[0]);
  if (n == 0 || n > len) return 0;
  uint32_t cp = n == 1 ? s[0] : (uint32_t)(s[0] & (0x7F >> n));
  for (size_t i = 1; i < n; ++i) {
    if (!vlmc_tok_utf8_continuation_ok(s[0], i, s[i])) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  *out_cp = cp;
  return n;
}

size_t vlmc_tok_utf8_validate(const uint8_t *s, size_t len) {
  size_t i = 0;
  while (i < len) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp;
    size_t n = vlmc_tok_utf8_next(s + i, len - i, &cp);
    if (n == 0) return i;
    i += n;
  }
  return len;
}

size_t vlmc_tok_utf8_put(uint32_t cp, uint8_t out[4]) {
  assert(cp <= 0x10FFFF);
  if (cp < 0x80) {
    out[0] = (uint8_t)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (uint8_t)(0xC0 | (cp >> 6));
    out[1] = (uint8_t)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (uint8_t)(0xE0 | (cp >> 12));
    out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (uint8_t)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (uint8_t)(0xF0 | (cp >> 18));
  out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (uint8_t)(0x80 | (cp & 0x3F));
  return 4;
}

/* FNV-1a, 64-bit: vocab keys are short and the table is built once. */
uint64_t vlmc_tok_hash_bytes(const void *data, size_t len) {
  const uint8_t *p = data;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

int32_t vlmc_tok_vocab_find(const vlmc_tokenizer_t *tokenizer, const char *text, size_t len) {
  size_t slot = (size_t)vlmc_tok_hash_bytes(text, len) & tokenizer->vocab_mask;
  for (;;) {
    uint32_t id = tokenizer->vocab_slots[slot];
    if (id == VLMC_TOK_EMPTY_ID) return -1;
    const vlmc_tok_entry_t *entry = &tokenizer->entries[id];
    if (entry->text_len == len && memcmp(entry->text, text, len) == 0) return (int32_t)id;
    slot = (slot + 1) & tokenizer->vocab_mask;
  }
}

static size_t merge_slot_of(uint64_t pair, size_t mask) {
  /* A multiplicative mix: ids are small and dense, so the raw pair would cluster. */
  return (size_t)((pair * 0x9E3779B97F4A7C15ull) >> 17) & mask;
}

const vlmc_tok_merge_slot_t *vlmc_tok_merge_find(const vlmc_tokenizer_t *tokenizer,
                                                 uint32_t left, uint32_t right) {
  uint64_t pair = ((uint64_t)left << 32) | right;
  size_t slot = merge_slot_of(pair, tokenizer->merge_mask);
  for (;;) {
    const vlmc_tok_merge_slot_t *s = &tokenizer->merge_slots[slot];
    if (s->pair == pair) return s;
    if (s->pair == VLMC_TOK_EMPTY_PAIR) return NULL;
    slot = (slot + 1) & tokenizer->merge_mask;
  }
}

vlmc_tok_merge_slot_t *vlmc_tok_merge_slot_for_insert(vlmc_tokenizer_t *tokenizer, uint64_t pair) {
  size_t slot = merge_slot_of(pair, tokenizer->merge_mask);
  for (;;) {
    vlmc_tok_merge_slot_t *s = &tokenizer->merge_slots[slot];
    if (s->pair == pair || s->pair == VLMC_TOK_EMPTY_PAIR) return s;
    slot = (slot + 1) & tokenizer->merge_mask;
  }
}
