/* Loading tokenizer.json: the BPE model (vocab, merges), added tokens and the pipeline
 * settings, each checked and refused by name when vlmc cannot reproduce it exactly. */
#include <assert.h>
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/gunzip.h"
#include "frontend/tokenizer_internal.h"
#include "support/strbuf.h"
#include "support/checked_math.h"
#include "support/file.h"

/* A decompressed tokenizer.json is ~11 MB; anything past this is not a tokenizer. */
#define VLMC_TOK_MAX_JSON_BYTES ((size_t)1 << 30)

/* "NAME: " + the formatted message, which starts with the JSON path. */
static vlmc_status_t load_error(const vlmc_tokenizer_t *tokenizer, vlmc_status_code_t code,
                                const char *fmt, ...) VLMC_PRINTF(3, 4);
static vlmc_status_t load_error(const vlmc_tokenizer_t *tokenizer, vlmc_status_code_t code,
                                const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlmc_status_t status = vlmc_status_makev(code, fmt, ap);
  va_end(ap);
  return vlmc_status_annotate(status, "%s: ", tokenizer->name);
}

/* A token's text for a message: JSON-quoted, cut after 40 bytes. */
static const char *quote_for_message(const char *text, size_t len, char out[128]) {
  vlmc_strbuf_t buf;
  vlmc_strbuf_init(&buf);
  bool cut = len > 40;
  vlmc_tokenizer_json_string_encode(text, cut ? 40 : len, &buf);
  snprintf(out, 128, "%s%s", vlmc_strbuf_cstr(&buf), cut ? "..." : "");
  vlmc_strbuf_deinit(&buf);
  return out;
}

/* ---- small cJSON accessors ---- */

static bool json_is_absent(const cJSON *item) { return item == NULL || cJSON_IsNull(item); }

static const cJSON *json_get(const cJSON *object, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(object, key);
}

/* Reads an integer in [0, limit). */
static bool json_get_index(const cJSON *item, size_t limit, size_t *out) {
  if (!cJSON_IsNumber(item)) return false;
  double v = item->valuedouble;
  if (!(v >= 0 && v < (double)limit) || v != (double)(size_t)v) return false;
  *out = (size_t)v;
  return true;
}

/* An optional boolean that must equal `wanted` (absent counts as `absent_value`). */
static vlmc_status_t expect_bool(const vlmc_tokenizer_t *tokenizer, const cJSON *object,
                                 const char *key, bool absent_value, bool wanted,
                                 const char *path) {
  const cJSON *item = json_get(object, key);
  if (item == NULL) {
    if (absent_value == wanted) return NULL;
    return load_error(tokenizer, VLMC_UNSUPPORTED,
                      "%s.%s: absent means %s, which vlmc does not support (expected %s)", path,
                      key, absent_value ? "true" : "false", wanted ? "true" : "false");
  }
  if (!cJSON_IsBool(item))
    return load_error(tokenizer, VLMC_PARSE_ERROR, "%s.%s: expected true or false", path, key);
  if (cJSON_IsTrue(item) != wanted)
    return load_error(tokenizer, VLMC_UNSUPPORTED, "%s.%s: %s is not supported (expected %s)",
                      path, key, wanted ? "false" : "true", wanted ? "true" : "false");
  return NULL;
}

/* object.type when it is a string, else NULL. */
static const char *json_type_name(const cJSON *object) {
  const cJSON *type = json_get(object, "type");
  return cJSON_IsString(type) ? type->valuestring : NULL;
}

/* ---- model ---- */

static vlmc_status_t check_empty_string_option(const vlmc_tokenizer_t *tokenizer,
                                               const cJSON *model, const char *key) {
  const cJSON *item = json_get(model, key);
  if (json_is_absent(item) || (cJSON_IsString(item) && item->valuestring[0] == '\0')) return NULL;
  return load_error(tokenizer, VLMC_UNSUPPORTED,
                    "model.%s: only null or \"\" is supported (vlmc reads byte-level BPE)", key);
}

static vlmc_status_t load_model_options(vlmc_tokenizer_t *tokenizer, const cJSON *model) {
  const char *type = json_type_name(model);
  if (!type)
    return load_error(tokenizer, VLMC_PARSE_ERROR, "model.type: missing (expected \"BPE\")");
  if (strcmp(type, "BPE") != 0)
    return load_error(tokenizer, VLMC_UNSUPPORTED,
                      "model.type: \"%s\" is not supported (vlmc reads BPE models)", type);
  const cJSON *dropout = json_get(model, "dropout");
  if (!json_is_absent(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0))
    return load_error(tokenizer, VLMC_UNSUPPORTED,
                      "model.dropout: BPE dropout is not supported (expected null)");
  const cJSON *unk = json_get(model, "unk_token");
  if (!json_is_absent(unk) && !cJSON_IsString(unk))
    return load_error(tokenizer, VLMC_PARSE_ERROR, "model.unk_token: expected null or a string");
  VLMC_RETURN_IF_ERROR(check_empty_string_option(tokenizer, model, "continuing_subword_prefix"));
  VLMC_RETURN_IF_ERROR(check_empty_string_option(tokenizer, model, "end_of_word_suffix"));
  VLMC_RETURN_IF_ERROR(expect_bool(tokenizer, model, "byte_fallback", false, false, "model"));
  const cJSON *ignore = json_get(model, "ignore_merges");
  if (!json_is_absent(ignore) && !cJSON_IsBool(ignore))
    return load_error(tokenizer, VLMC_PARSE_ERROR, "model.ignore_merges: expected true or false");
  tokenizer->ignore_merges = cJSON_IsTrue(ignore);
  return NULL;
}

static bool is_valid_utf8(const char *text, size_t len) {
  return vlmc_tok_utf8_validate((const uint8_t *)text, len) == len;
}

static vlmc_status_t vocab_insert(vlmc_tokenizer_t *tokenizer, const char *key, size_t id) {
  size_t len = strlen(key);
  char quoted[128];
  if (!is_valid_utf8(key, len))
    return load_error(tokenizer, VLMC_PARSE_ERROR, "model.vocab[%s]: key is not valid UTF-8",
                      quote_for_message(key, len, quoted));
  vlmc_tok_entry_t *entry = &tokenizer->entries[id];
  if (entry->kind != VLMC_TOK_ENTRY_HOLE) {
    char other[128];
    return load_error(tokenizer, VLMC_PARSE_ERROR, "model.vocab[%s]: id %zu is already used by %s",
                      quote_for_message(key, len, quoted), id,
                      quote_for_message(entry->text, entry->text_len, other));
  }
  if (len > UINT32_MAX)
    return load_error(tokenizer, VLMC_OUT_OF_RANGE, "model.vocab: a key is too long");
  size_t slot = (size_t)vlmc_tok_hash_bytes(key, len) & tokenizer->vocab_mask;
  while (tokenizer->vocab_slots[slot] != VLMC_TOK_EMPTY_ID) {
    const vlmc_tok_entry_t *other = &tokenizer->entries[tokenizer->vocab_slots[slot]];
    if (other->text_len == len && memcmp(other->text, key, len) == 0)
      return load_error(tokenizer, VLMC_PARSE_ERROR, "model.vocab[%s]: key appears twice",
                        quote_for_message(key, len, quoted));
    slot = (slot + 1) & tokenizer->vocab_mask;
  }
  entry->text = vlmc_arena_strndup(&tokenizer->arena, key, len);
  if (!entry->text) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "tokenizer vocab");
  entry->text_len = (uint32_t)len;
  entry->kind = VLMC_TOK_ENTRY_MODEL;
  tokenizer->vocab_slots[slot] = (uint32_t)id;
  return NULL;
}

static size_t table_size_for(size_t count) {
  size_t size = 16;
  while (size < count * 2) size *= 2;
  return size;
}

static vlmc_status_t load_vocab(vlmc_tokenizer_t *tokenizer, const cJSON *vocab, size_t id_bound) {
  size_t count = (size_t)cJSON_GetArraySize(vocab);
  size_t slots = table_size_for(count);
  tokenizer->vocab_slots = VLMC_ARENA_NEW_ARRAY(&tokenizer->arena, uint32_t, slots);
  if (!tokenizer->vocab_slots) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "tokenizer vocab");
  memset(tokenizer->vocab_slots, 0xFF, slots * sizeof(uint32_t));
  tokenizer->vocab_mask = slots - 1;
  size_t index = 0;
  for (const cJSON *item = vocab->child; item; item = item->next, ++index) {
    char quoted[128];
    size_t id;
    if (!json_get_index(item, id_bound, &id))
      return load_error(tokenizer, VLMC_OUT_OF_RANGE,
                        "model.vocab[%s]: expected an integer id in [0, %zu) (ids count the vocab "
                        "and the added tokens)",
                        quote_for_message(item->string, strlen(item->string), quoted), id_bound);
    VLMC_RETURN_IF_ERROR(vocab_insert(tokenizer, item->string, id));
  }
  return NULL;
}

/* Splits a merges entry into its two parts (views into the cJSON strings). */
static bool merge_parts(const cJSON *item, const char **out_left, size_t *out_left_len,
                        const char **out_right, size_t *out_right_len) {
  if (cJSON_IsString(item)) {
    /* The reference splits on ' ' and wants exactly two parts. */
    const char *text = item->valuestring;
    const char *space = strchr(text, ' ');
    if (!space || strchr(space + 1, ' ')) return false;
    *out_left = text;
    *out_left_len = (size_t)(space - text);
    *out_right = space + 1;
    *out_right_len = strlen(space + 1);
    return true;
  }
  if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != 2) return false;
  const cJSON *left = item->child, *right = left->next;
  if (!cJSON_IsString(left) || !cJSON_IsString(right)) return false;
  *out_left = left->valuestring;
  *out_left_len = strlen(left->valuestring);
  *out_right = right->valuestring;
  *out_right_len = strlen(right->valuestring);
  return true;
}

static vlmc_status_t load_one_merge(vlmc_tokenizer_t *tokenizer, const cJSON *item, size_t rank,
                                    vlmc_strbuf_t *scratch) {
  const char *left, *right;
  size_t left_len, right_len;
  if (!merge_parts(item, &left, &left_len, &right, &right_len))
    return load_error(tokenizer, VLMC_PARSE_ERROR,
                      "model.merges[%zu]: expected \"a b\" or [\"a\",\"b\"]", rank);
  char quoted[128];
  int32_t left_id = vlmc_tok_vocab_find(tokenizer, left, left_len);
  if (left_id < 0)
    return load_error(tokenizer, VLMC_PARSE_ERROR, "model.merges[%zu]: %s is not in model.vocab",
                      rank, quote_for_message(left, left_len, quoted));
  int32_t right_id = vlmc_tok_vocab_find(tokenizer, right, right_len);
  if (right_id < 0)
    return load_error(tokenizer, VLMC_PARSE_ERROR, "model.merges[%zu]: %s is not in model.vocab",
                      rank, quote_for_message(right, right_len, quoted));
  vlmc_strbuf_clear(scratch);
  vlmc_strbuf_append(scratch, left, left_len);
  vlmc_strbuf_append(scratch, right, right_len);
  if (scratch->failed) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "tokenizer merges");
  int32_t merged_id = vlmc_tok_vocab_find(tokenizer, scratch->data, scratch->len);
  if (merged_id < 0)
    return load_error(tokenizer, VLMC_PARSE_ERROR,
                      "model.merges[%zu]: the merged token %s is not in model.vocab", rank,
                      quote_for_message(scratch->data, scratch->len, quoted));
  /* A repeated pair keeps its last rank, as the reference's hash map does. */
  uint64_t pair = ((uint64_t)(uint32_t)left_id << 32) | (uint32_t)right_id;
  vlmc_tok_merge_slot_t *slot = vlmc_tok_merge_slot_for_insert(tokenizer, pair);
  slot->pair = pair;
  slot->rank = (uint32_t)rank;
  slot->merged_id = (uint32_t)merged_id;
  return NULL;
}

static vlmc_status_t load_merges(vlmc_tokenizer_t *tokenizer, const cJSON *merges) {
  size_t count = (size_t)cJSON_GetArraySize(merges);
  if (count >= UINT32_MAX)
    return load_error(tokenizer, VLMC_OUT_OF_RANGE, "model.merges: too many entries");
  size_t slots = table_size_for(count);
  tokenizer->merge_slots = VLMC_ARENA_NEW_ARRAY(&tokenizer->arena, vlmc_tok_merge_slot_t, slots);
  if (!tokenizer->merge_slots) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "tokenizer merges");
  for (size_t i = 0; i < slots; ++i) tokenizer->merge_slots[i].pair = VLMC_TOK_EMPTY_PAIR;
  tokenizer->merge_mask = slots - 1;
  vlmc_strbuf_t scratch;
  vlmc_strbuf_init(&scratch);
  vlmc_status_t status = NULL;
  size_t rank = 0;
  for (const cJSON *item = merges->child; item && !status; item = item->next, ++rank)
    status = load_one_merge(tokenizer, item, rank, &scratch);
  vlmc_strbuf_deinit(&scratch);
  return status;
}

/* Byte-level BPE starts every word from single-byte symbols; a vocab without one of them
 * would silently drop bytes, so it is refused. */
static vlmc_status_t check_byte_alphabet(vlmc_tokenizer_t *tokenizer) {
  for (unsigned b = 0; b < VLMC_TOK_BYTE_SYMBOLS; ++b) {
    uint8_t utf8[4];
    size_t n = vlmc_tok_utf8_put(vlmc_tok_byte_to_codepoint((uint8_t)b), utf8);
    int32_t id = vlmc_tok_vocab_find(tokenizer, (const char *)utf8, n);
    if (id < 0)
      return load_error(tokenizer, VLMC_PARSE_ERROR,
                        "model.vocab: the byte-level symbol \"%.*s\" (byte 0x%02X) is missing; a "
                        "byte-level BPE vocab needs all 256",
                        (int)n, (const char *)utf8, b);
    tokenizer->byte_ids[b] = id;
  }
  return NULL;
}

static vlmc_status_t load_model(vlmc_tokenizer_t *tokenizer, const cJSON *model,
                                size_t added_count) {
  if (!cJSON_IsObject(model))
    return load_error(tokenizer, VLMC_PARSE_ERROR,
                      "model: %s (expected the BPE model object)",
                      model ? "not an object" : "missing");
  VLMC_RETURN_IF_ERROR(load_model_options(tokenizer, model));
  const cJSON *vocab = json_get(model, "vocab");
  if (!cJSON_IsObject(vocab))
    return load_error(tokenizer, VLMC_PARSE_ERROR,
                      "model.vocab: expected an object of \"token\": id");
  const cJSON *merges = json_get(model, "merges");
  if (!cJSON_IsArray(merges))
    return load_error(tokenizer, VLMC_PARSE_ERROR, "model.merges: expected an array");
  size_t id_bound;
  if (!vlmc_add_size((size_t)cJSON_GetArraySize(vocab), added_count, &id_bound) ||
      id_bound >= INT32_MAX)
    return load_error(tokenizer, VLMC_OUT_OF_RANGE, "model.vocab: too many entries");
  tokenizer->entries = VLMC_ARENA_NEW_ARRAY(&tokenizer->arena, vlmc_tok_entry_t, id_bound);
  if (!tokenizer->entries && id_bound)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "tokenizer vocab");
  tokenizer->entry_count = id_bound;
  VLMC_RETURN_IF_ERROR(load_vocab(tokenizer, vocab, id_bound));
  VLMC_RETURN_IF_ERROR(check_byte_alphabet(tokenizer));
  return load_merges(tokenizer, merges);
}

/* ---- added tokens ---- */

static vlmc_status_t load_added_flags(const vlmc_tokenizer_t *tokenizer, const cJSON *item,
                                      size_t index, bool *out_special) {
  char path[64];
  snprintf(path, sizeof path, "added_tokens[%zu]", index);
  static const char *const must_be_false[] = {"lstrip", "rstrip", "single_word", "normalized"};
  for (size_t i = 0; i < sizeof must_be_false / sizeof must_be_false[0]; ++i)
    VLMC_RETURN_IF_ERROR(expect_bool(tokenizer, item, must_be_false[i], false, false, path));
  const cJSON *special = json_get(item, "special");
  if (!json_is_absent(special) && !cJSON_IsBool(special))
    return load_error(tokenizer, VLMC_PARSE_ERROR, "%s.special: expected true or false", path);
  *out_special = cJSON_IsTrue(special);
  return NULL;
}

static vlmc_status_t load_added_token(vlmc_tokenizer_t *tokenizer, const cJSON *item,
                                      size_t index, vlmc_tok_added_t *out_added) {
  if (!cJSON_IsObject(item))
    return load_error(tokenizer, VLMC_PARSE_ERROR, "added_tokens[%zu]: expected an object", index);
  size_t id;
  if (!json_get_index(json_get(item, "id"), tokenizer->entry_count, &id))
    return load_error(tokenizer, VLMC_OUT_OF_RANGE,
                      "added_tokens[%zu].id: expected an integer id in [0, %zu)", index,
                      tokenizer->entry_count);
  const cJSON *content = json_get(item, "content");
  if (!cJSON_IsString(content) || content->valuestring[0] == '\0')
    return load_error(tokenizer, VLMC_PARSE_ERROR,
                      "added_tokens[%zu].content: expected a non-empty string", index);
  size_t len = strlen(content->valuestring);
  if (!is_valid_utf8(content->valuestring, len))
    return load_error(tokenizer, VLMC_PARSE_ERROR,
                      "added_tokens[%zu].content: not valid UTF-8", index);
  bool special = false;
  VLMC_RETURN_IF_ERROR(load_added_flags(tokenizer, item, index, &special));
  vlmc_tok_entry_t *entry = &tokenizer->entries[id];
  bool same_text = entry->text_len == len && memcmp(entry->text, content->valuestring, len) == 0;
  /* An added token may restate a vocab entry (same id, same text); anything else clashes. */
  if (entry->kind == VLMC_TOK_ENTRY_ADDED || entry->kind == VLMC_TOK_ENTRY_SPECIAL ||
      (entry->kind == VLMC_TOK_ENTRY_MODEL && !same_text)) {
    char quoted[128];
    return load_error(tokenizer, VLMC_PARSE_ERROR,
                      "added_tokens[%zu].id: %zu is already used by %s", index, id,
                      quote_for_message(entry->text, entry->text_len, quoted));
  }
  entry->text = vlmc_arena_strndup(&tokenizer->arena, content->valuestring, len);
  if (!entry->text) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "tokenizer added tokens");
  entry->text_len = (uint32_t)len;
  entry->kind = special ? VLMC_TOK_ENTRY_SPECIAL : VLMC_TOK_ENTRY_ADDED;
  out_added->content = entry->text;
  out_added->len = (uint32_t)len;
  out_added->id = (int32_t)id;
  return NULL;
}

static int compare_added(const void *a, const void *b) {
  const vlmc_tok_added_t *x = a, *y = b;
  uint8_t fx = (uint8_t)x->content[0], fy = (uint8_t)y->content[0];
  if (fx != fy) return fx < fy ? -1 : 1;
  if (x->len != y->len) return x->len > y->len ? -1 : 1; /* longest first */
  return x->id < y->id ? -1 : x->id > y->id;
}

/* Orders the added tokens for the longest-first match at each position of the text. */
static void index_added_tokens(vlmc_tokenizer_t *tokenizer) {
  qsort(tokenizer->added, tokenizer->added_count, sizeof *tokenizer->added, compare_added);
  size_t next = 0;
  for (unsigned b = 0; b <= 256; ++b) {
    while (next < tokenizer->added_count && (uint8_t)tokenizer->added[next].content[0] < b) ++next;
    tokenizer->added_first[b] = (uint32_t)next;
  }
  tokenizer->added_first[256] = (uint32_t)tokenizer->added_count;
}

static vlmc_status_t load_added_tokens(vlmc_tokenizer_t *tokenizer, const cJSON *added) {
  tokenizer->added = VLMC_ARENA_NEW_ARRAY(&tokenizer->arena, vlmc_tok_added_t,
                                          tokenizer->added_count ? tokenizer->added_count : 1);
  if (!tokenizer->added) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "tokenizer added tokens");
  size_t index = 0;
  for (const cJSON *item = added ? added->child : NULL; item; item = item->next, ++index)
    VLMC_RETURN_IF_ERROR(load_added_token(tokenizer, item, index, &tokenizer->added[index]));
  index_added_tokens(tokenizer);
  return NULL;
}

/* ---- decoding bytes of each id ---- */

/* What the ByteLevel decoder emits for a token: its characters mapped back to bytes when all
 * of them are byte-level symbols, and its UTF-8 text unchanged otherwise (as the reference). */
static vlmc_status_t compute_entry_bytes(vlmc_tokenizer_t *tokenizer, vlmc_tok_entry_t *entry) {
  uint8_t *bytes = vlmc_arena_alloc(&tokenizer->arena, entry->text_len + 1, 1);
  if (!bytes) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "tokenizer vocab");
  const uint8_t *text = (const uint8_t *)entry->text;
  size_t i = 0, n = 0;
  while (i < entry->text_len) {
    uint32_t cp;
    size_t step = vlmc_tok_utf8_next(text + i, entry->text_len - i, &cp);
    int byte = step ? vlmc_tok_codepoint_to_byte(cp) : -1;
    if (byte < 0) {
      memcpy(bytes, text, entry->text_len);
      n = entry->text_len;
      break;
    }
    bytes[n++] = (uint8_t)byte;
    i += step;
  }
  entry->bytes = bytes;
  entry->bytes_len = (uint32_t)n;
  return NULL;
}

static vlmc_status_t compute_all_entry_bytes(vlmc_tokenizer_t *tokenizer) {
  size_t limit = 0;
  for (size_t id = 0; id < tokenizer->entry_count; ++id) {
    vlmc_tok_entry_t *entry = &tokenizer->entries[id];
    if (entry->kind == VLMC_TOK_ENTRY_HOLE) continue;
    VLMC_RETURN_IF_ERROR(compute_entry_bytes(tokenizer, entry));
    limit = id + 1;
  }
  tokenizer->entry_count = limit; /* trailing holes reserved for added tokens never used */
  return NULL;
}

/* ---- normalizer, post-processor, decoder ---- */

static vlmc_status_t load_normalizer(vlmc_tokenizer_t *tokenizer, const cJSON *normalizer) {
  if (json_is_absent(normalizer)) return NULL;
  const char *type = cJSON_IsObject(normalizer) ? json_type_name(normalizer) : NULL;
  if (!type)
    return load_error(tokenizer, VLMC_PARSE_ERROR,
                      "normalizer: expected null or an object with a \"type\"");
  if (strcmp(type, "NFC") != 0)
    return load_error(tokenizer, VLMC_UNSUPPORTED,
                      "normalizer.type: \"%s\" is not supported (vlmc supports null and NFC)",
                      type);
  tokenizer->nfc = true;
  return NULL;
}

static vlmc_status_t load_byte_level_stage(const vlmc_tokenizer_t *tokenizer, const cJSON *stage,
                                           const char *path, bool null_ok) {
  if (json_is_absent(stage) && null_ok) return NULL;
  const char *type = cJSON_IsObject(stage) ? json_type_name(stage) : NULL;
  if (!type)
    return load_error(tokenizer, VLMC_PARSE_ERROR, "%s: expected an object with a \"type\"",
                      path);
  if (strcmp(type, "ByteLevel") != 0)
    return load_error(tokenizer, VLMC_UNSUPPORTED,
                      "%s.type: \"%s\" is not supported (vlmc supports ByteLevel%s)", path, type,
                      null_ok ? " and null" : "");
  return NULL;
}

static vlmc_status_t check_null_setting(const vlmc_tokenizer_t *tokenizer, const cJSON *root,
                                        const char *key) {
  if (json_is_absent(json_get(root, key))) return NULL;
  return load_error(tokenizer, VLMC_UNSUPPORTED,
                    "%s: only null is supported (vlmc never %s the ids)", key,
                    strcmp(key, "padding") == 0 ? "pads" : "truncates");
}

static vlmc_status_t load_root(vlmc_tokenizer_t *tokenizer, const cJSON *root) {
  if (!cJSON_IsObject(root))
    return load_error(tokenizer, VLMC_PARSE_ERROR, "expected a JSON object at the top level");
  VLMC_RETURN_IF_ERROR(check_null_setting(tokenizer, root, "truncation"));
  VLMC_RETURN_IF_ERROR(check_null_setting(tokenizer, root, "padding"));
  const cJSON *added = json_get(root, "added_tokens");
  if (!json_is_absent(added) && !cJSON_IsArray(added))
    return load_error(tokenizer, VLMC_PARSE_ERROR, "added_tokens: expected an array");
  tokenizer->added_count = cJSON_IsArray(added) ? (size_t)cJSON_GetArraySize(added) : 0;
  VLMC_RETURN_IF_ERROR(load_model(tokenizer, json_get(root, "model"), tokenizer->added_count));
  VLMC_RETURN_IF_ERROR(load_added_tokens(tokenizer, cJSON_IsArray(added) ? added : NULL));
  VLMC_RETURN_IF_ERROR(compute_all_entry_bytes(tokenizer));
  VLMC_RETURN_IF_ERROR(load_normalizer(tokenizer, json_get(root, "normalizer")));
  VLMC_RETURN_IF_ERROR(vlmc_tok_pre_tokenizer_load(tokenizer, root));
  VLMC_RETURN_IF_ERROR(
      load_byte_level_stage(tokenizer, json_get(root, "post_processor"), "post_processor", true));
  return load_byte_level_stage(tokenizer, json_get(root, "decoder"), "decoder", false);
}

/* ---- entry points ---- */

vlmc_status_t vlmc_tokenizer_create_from_buffer(const char *name, const char *json, size_t len,
                                                vlmc_tokenizer_t **out_tokenizer) {
  *out_tokenizer = NULL;
  vlmc_tokenizer_t *tokenizer = calloc(1, sizeof *tokenizer);
  if (!tokenizer) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: tokenizer", name);
  vlmc_arena_init(&tokenizer->arena);
  tokenizer->name = vlmc_arena_strdup(&tokenizer->arena, name);
  if (!tokenizer->name) {
    vlmc_tokenizer_destroy(tokenizer);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: tokenizer", name);
  }
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
  vlmc_status_t status = NULL;
  if (!root) {
    size_t offset = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
    size_t line, col;
    vlmc_text_line_col(json, offset, &line, &col);
    status = vlmc_status_make(VLMC_PARSE_ERROR, "%s: invalid JSON at line %zu, column %zu", name,
                              line, col);
  } else {
    status = load_root(tokenizer, root);
    cJSON_Delete(root);
  }
  if (status) {
    vlmc_tokenizer_destroy(tokenizer);
    return status;
  }
  *out_tokenizer = tokenizer;
  return NULL;
}

vlmc_status_t vlmc_tokenizer_create_from_file(const char *path, vlmc_tokenizer_t **out_tokenizer) {
  *out_tokenizer = NULL;
  char *data;
  size_t len;
  VLMC_RETURN_IF_ERROR(vlmc_file_read_all(path, &data, &len));
  if (vlmc_is_gzip(data, len)) {
    char *text = NULL;
    size_t text_len = 0;
    vlmc_status_t status = vlmc_gunzip(path, data, len, VLMC_TOK_MAX_JSON_BYTES, &text, &text_len);
    free(data);
    VLMC_RETURN_IF_ERROR(status);
    data = text;
    len = text_len;
  }
  vlmc_status_t status = vlmc_tokenizer_create_from_buffer(path, data, len, out_tokenizer);
  free(data);
  return status;
}

void vlmc_tokenizer_destroy(vlmc_tokenizer_t *tokenizer) {
  if (!tokenizer) return;
  pcre2_code_free(tokenizer->split_regex);
  vlmc_arena_deinit(&tokenizer->arena);
  free(tokenizer);
}

/* ---- lookups ---- */

size_t vlmc_tokenizer_id_limit(const vlmc_tokenizer_t *tokenizer) { return tokenizer->entry_count; }

int32_t vlmc_tokenizer_token_to_id(const vlmc_tokenizer_t *tokenizer, const char *text,
                                   size_t len) {
  for (size_t i = 0; i < tokenizer->added_count; ++i) {
    const vlmc_tok_added_t *added = &tokenizer->added[i];
    if (added->len == len && memcmp(added->content, text, len) == 0) return added->id;
  }
  return vlmc_tok_vocab_find(tokenizer, text, len);
}

static const vlmc_tok_entry_t *entry_of(const vlmc_tokenizer_t *tokenizer, int32_t id) {
  if (id < 0 || (size_t)id >= tokenizer->entry_count) return NULL;
  const vlmc_tok_entry_t *entry = &tokenizer->entries[id];
  return entry->kind == VLMC_TOK_ENTRY_HOLE ? NULL : entry;
}

const char *vlmc_tokenizer_id_to_token(const vlmc_tokenizer_t *tokenizer, int32_t id) {
  const vlmc_tok_entry_t *entry = entry_of(tokenizer, id);
  return entry ? entry->text : NULL;
}

bool vlmc_tokenizer_id_is_special(const vlmc_tokenizer_t *tokenizer, int32_t id) {
  const vlmc_tok_entry_t *entry = entry_of(tokenizer, id);
  return entry && entry->kind == VLMC_TOK_ENTRY_SPECIAL;
}
