/* Encoding text into ids, in the reference's order: added tokens first (atomic, longest
 * first), then NFC, the split regex, the byte-level mapping and BPE on each piece. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "frontend/tokenizer_internal.h"
#include "support/checked_math.h"

/* ---- id lists ---- */

void vlmc_token_ids_init(vlmc_token_ids_t *ids) {
  ids->data = NULL;
  ids->len = 0;
  ids->capacity = 0;
}

void vlmc_token_ids_deinit(vlmc_token_ids_t *ids) {
  free(ids->data);
  vlmc_token_ids_init(ids);
}

vlmc_status_t vlmc_token_ids_append(vlmc_token_ids_t *ids, int32_t id) {
  if (ids->len == ids->capacity) {
    size_t capacity = ids->capacity ? ids->capacity * 2 : 64, bytes;
    if (!vlmc_mul_size(capacity, sizeof(int32_t), &bytes))
      return vlmc_status_make(VLMC_OUT_OF_MEMORY, "token ids");
    int32_t *grown = realloc(ids->data, bytes);
    if (!grown) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "token ids");
    ids->data = grown;
    ids->capacity = capacity;
  }
  ids->data[ids->len++] = id;
  return NULL;
}

/* ---- scratch space reused across the pieces of one encode call ---- */

typedef struct {
  int32_t id;
  int32_t prev; /* -1 at the start */
  int32_t next; /* -1 at the end */
  bool removed; /* merged into its left neighbour */
} bpe_symbol_t;

/* A candidate merge of the symbol at `pos` with its right neighbour. */
typedef struct {
  uint32_t rank;
  uint32_t pos;
  uint32_t merged_id;
} bpe_candidate_t;

typedef struct {
  bpe_symbol_t *symbols;
  size_t symbols_capacity;
  bpe_candidate_t *heap;
  size_t heap_len;
  size_t heap_capacity;
  pcre2_match_data *match;
  vlmc_strbuf_t word; /* the byte-level text of a piece, for ignore_merges */
} encode_scratch_t;

static void scratch_deinit(encode_scratch_t *scratch) {
  free(scratch->symbols);
  free(scratch->heap);
  pcre2_match_data_free(scratch->match);
  vlmc_strbuf_deinit(&scratch->word);
}

static bool grow(void **array, size_t *capacity, size_t need, size_t elem_size) {
  if (need <= *capacity) return true;
  size_t count = *capacity ? *capacity : 64, bytes;
  while (count < need) count *= 2;
  if (!vlmc_mul_size(count, elem_size, &bytes)) return false;
  void *grown = realloc(*array, bytes);
  if (!grown) return false;
  *array = grown;
  *capacity = count;
  return true;
}

/* ---- the candidate heap: lowest rank first, then leftmost, as the reference ---- */

static bool candidate_before(const bpe_candidate_t *a, const bpe_candidate_t *b) {
  return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_swap(bpe_candidate_t *heap, size_t i, size_t j) {
  bpe_candidate_t t = heap[i];
  heap[i] = heap[j];
  heap[j] = t;
}

static bool heap_push(encode_scratch_t *scratch, bpe_candidate_t candidate) {
  if (!grow((void **)&scratch->heap, &scratch->heap_capacity, scratch->heap_len + 1,
            sizeof *scratch->heap))
    return false;
  bpe_candidate_t *heap = scratch->heap;
  size_t i = scratch->heap_len++;
  heap[i] = candidate;
  while (i > 0 && candidate_before(&heap[i], &heap[(i - 1) / 2])) {
    heap_swap(heap, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
  return true;
}

static bpe_candidate_t heap_pop(encode_scratch_t *scratch) {
  bpe_candidate_t *heap = scratch->heap;
  assert(scratch->heap_len > 0);
  bpe_candidate_t top = heap[0];
  heap[0] = heap[--scratch->heap_len];
  size_t i = 0, n = scratch->heap_len;
  for (;;) {
    size_t best = i, left = 2 * i + 1, right = left + 1;
    if (left < n && candidate_before(&heap[left], &heap[best])) best = left;
    if (right < n && candidate_before(&heap[right], &heap[best])) best = right;
    if (best == i) break;
    heap_swap(heap, i, best);
    i = best;
  }
  return top;
}

/* ---- BPE on one piece ---- */

static bool push_candidate(const vlmc_tokenizer_t *tokenizer, encode_scratch_t *scratch,
                           int32_t pos) {
  const bpe_symbol_t *left = &scratch->symbols[pos];
  if (left->next < 0) return true;
  const vlmc_tok_merge_slot_t *merge =
      vlmc_tok_merge_find(tokenizer, (uint32_t)left->id, (uint32_t)scratch->symbols[left->next].id);
  if (!merge) return true;
  bpe_candidate_t candidate = {merge->rank, (uint32_t)pos, merge->merged_id};
  return heap_push(scratch, candidate);
}

/* Applies one popped candidate if it still describes the pair at its position (entries go
 * stale when a neighbour merged first). Returns false only when out of memory. */
static bool apply_candidate(const vlmc_tokenizer_t *tokenizer, encode_scratch_t *scratch,
                            bpe_candidate_t top) {
  bpe_symbol_t *symbols = scratch->symbols;
  bpe_symbol_t *left = &symbols[top.pos];
  if (left->removed || left->next < 0) return true;
  bpe_symbol_t *right = &symbols[left->next];
  const vlmc_tok_merge_slot_t *merge =
      vlmc_tok_merge_find(tokenizer, (uint32_t)left->id, (uint32_t)right->id);
  if (!merge || merge->merged_id != top.merged_id) return true;
  left->id = (int32_t)merge->merged_id;
  left->next = right->next;
  right->removed = true;
  if (right->next >= 0) symbols[right->next].prev = (int32_t)top.pos;
  if (left->prev >= 0 && !push_candidate(tokenizer, scratch, left->prev)) return false;
  return push_candidate(tokenizer, scratch, (int32_t)top.pos);
}

/* With ignore_merges, a piece that is a whole vocab entry is taken as is. */
static int32_t whole_word_id(const vlmc_tokenizer_t *tokenizer, encode_scratch_t *scratch,
                             const uint8_t *bytes, size_t len) {
  vlmc_strbuf_clear(&scratch->word);
  for (size_t i = 0; i < len; ++i) {
    uint8_t utf8[4];
    size_t n = vlmc_tok_utf8_put(vlmc_tok_byte_to_codepoint(bytes[i]), utf8);
    vlmc_strbuf_append(&scratch->word, (const char *)utf8, n);
  }
  if (scratch->word.failed) return -1;
  return vlmc_tok_vocab_find(tokenizer, scratch->word.data, scratch->word.len);
}

static vlmc_status_t bpe_piece(const vlmc_tokenizer_t *tokenizer, encode_scratch_t *scratch,
                               const uint8_t *bytes, size_t len, vlmc_token_ids_t *out_ids) {
  if (len == 0) return NULL;
  if (tokenizer->ignore_merges) {
    int32_t id = whole_word_id(tokenizer, scratch, bytes, len);
    if (id >= 0) return vlmc_token_ids_append(out_ids, id);
  }
  if (len > INT32_MAX) return vlmc_status_make(VLMC_OUT_OF_RANGE, "a piece of %zu bytes", len);
  if (!grow((void **)&scratch->symbols, &scratch->symbols_capacity, len, sizeof(bpe_symbol_t)))
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "tokenizer scratch");
  bpe_symbol_t *symbols = scratch->symbols;
  for (size_t i = 0; i < len; ++i) {
    symbols[i].id = tokenizer->byte_ids[bytes[i]];
    symbols[i].prev = (int32_t)i - 1;
    symbols[i].next = i + 1 < len ? (int32_t)i + 1 : -1;
    symbols[i].removed = false;
  }
  scratch->heap_len = 0;
  bool ok = true;
  for (size_t i = 0; ok && i + 1 < len; ++i) ok = push_candidate(tokenizer, scratch, (int32_t)i);
  while (ok && scratch->heap_len > 0) ok = apply_candidate(tokenizer, scratch, heap_pop(scratch));
  if (!ok) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "tokenizer scratch");
  for (int32_t i = 0; i >= 0; i = scratch->symbols[i].next)
    VLMC_RETURN_IF_ERROR(vlmc_token_ids_append(out_ids, scratch->symbols[i].id));
  return NULL;
}

/* ---- regex split ---- */

/* Splits a normalized segment like the reference's Split(Isolated): every match is a piece
 * and so is every gap between matches. */
static vlmc_status_t split_and_bpe(const vlmc_tokenizer_t *tokenizer, encode_scratch_t *scratch,
                                   const uint8_t *text, size_t len, vlmc_token_ids_t *out_ids) {
  size_t prev = 0, from = 0;
  while (from < len) {
    int rc = pcre2_match(tokenizer->split_regex, text, len, from, PCRE2_NO_UTF_CHECK,
                         scratch->match, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      return vlmc_status_make(VLMC_INTERNAL, "%s: the split regex failed at byte %zu: %s",
                              tokenizer->name, from, (const char *)message);
    }
    const PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(scratch->match);
    size_t start = ovector[0], end = ovector[1];
    VLMC_RETURN_IF_ERROR(bpe_piece(tokenizer, scratch, text + prev, start - prev, out_ids));
    VLMC_RETURN_IF_ERROR(bpe_piece(tokenizer, scratch, text + start, end - start, out_ids));
    prev = end;
    if (end > start) {
      from = end;
    } else if (end >= len) {
      break;
    } else {
      /* An empty match: search again one character further on. */
      size_t step = vlmc_tok_utf8_lead_length(text[end]);
      from = end + (step ? step : 1);
    }
  }
  return bpe_piece(tokenizer, scratch, text + prev, len - prev, out_ids);
}

static bool is_ascii(const uint8_t *text, size_t len) {
  for (size_t i = 0; i < len; ++i)
    if (text[i] >= 0x80) return false;
  return true;
}

/* A segment between added tokens: NFC (ASCII is already NFC), then split and BPE. */
static vlmc_status_t encode_segment(const vlmc_tokenizer_t *tokenizer, encode_scratch_t *scratch,
                                    const uint8_t *text, size_t len, vlmc_token_ids_t *out_ids) {
  if (len == 0) return NULL;
  if (!tokenizer->nfc || is_ascii(text, len))
    return split_and_bpe(tokenizer, scratch, text, len, out_ids);
  utf8proc_uint8_t *normalized = NULL;
  utf8proc_ssize_t n = utf8proc_map(text, (utf8proc_ssize_t)len, &normalized,
                                    UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  if (n < 0) {
    free(normalized);
    return vlmc_status_make(n == UTF8PROC_ERROR_NOMEM ? VLMC_OUT_OF_MEMORY : VLMC_INVALID_ARGUMENT,
                            "%s: NFC normalization failed: %s", tokenizer->name,
                            utf8proc_errmsg(n));
  }
  vlmc_status_t status = split_and_bpe(tokenizer, scratch, normalized, (size_t)n, out_ids);
  free(normalized);
  return status;
}

/* ---- added tokens ---- */

/* The first added token in text[from..len), leftmost and then longest; false when none. */
static bool find_added_token(const vlmc_tokenizer_t *tokenizer, const uint8_t *text, size_t len,
                             size_t from, size_t *out_start, const vlmc_tok_added_t **out_token) {
  if (tokenizer->added_count == 0) return false;
  for (size_t i = from; i < len; ++i) {
    uint32_t first = tokenizer->added_first[text[i]], last = tokenizer->added_first[text[i] + 1];
    for (uint32_t k = first; k < last; ++k) {
      const vlmc_tok_added_t *token = &tokenizer->added[k];
      if (token->len <= len - i && memcmp(text + i, token->content, token->len) == 0) {
        *out_start = i;
        *out_token = token;
        return true;
      }
    }
  }
  return false;
}

static vlmc_status_t encode_all(const vlmc_tokenizer_t *tokenizer, encode_scratch_t *scratch,
                                const uint8_t *text, size_t len, vlmc_token_ids_t *out_ids) {
  size_t pos = 0;
  while (pos < len) {
    size_t start = len;
    const vlmc_tok_added_t *token = NULL;
    bool found = find_added_token(tokenizer, text, len, pos, &start, &token);
    VLMC_RETURN_IF_ERROR(encode_segment(tokenizer, scratch, text + pos, start - pos, out_ids));
    if (!found) break;
    VLMC_RETURN_IF_ERROR(vlmc_token_ids_append(out_ids, token->id));
    pos = start + token->len;
  }
  return NULL;
}

vlmc_status_t vlmc_tokenizer_encode(const vlmc_tokenizer_t *tokenizer, const char *text,
                                    size_t len, vlmc_token_ids_t *out_ids) {
  const uint8_t *bytes = (const uint8_t *)text;
  size_t bad = vlmc_tok_utf8_validate(bytes, len);
  if (bad != len)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "text to encode is not valid UTF-8 at byte %zu",
                            bad);
  encode_scratch_t scratch;
  memset(&scratch, 0, sizeof scratch);
  vlmc_strbuf_init(&scratch.word);
  scratch.match = pcre2_match_data_create_from_pattern(tokenizer->split_regex, NULL);
  if (!scratch.match) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "tokenizer match data");
  size_t old_len = out_ids->len;
  vlmc_status_t status = encode_all(tokenizer, &scratch, bytes, len, out_ids);
  if (status) out_ids->len = old_len; /* all or nothing */
  scratch_deinit(&scratch);
  return status;
}
