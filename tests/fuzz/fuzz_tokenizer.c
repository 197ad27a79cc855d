/* Fuzz target for the tokenizer and the chat template. The first byte picks what the rest is:
 *   '0' (and every byte = 0 mod 3): a tokenizer.json to load; when it loads, text is encoded
 *        and decoded with it;
 *   '1' (= 1 mod 3): text for the real Qwen tokenizer (loaded once): encode must succeed exactly
 *        when the text is valid UTF-8, and decode(encode(text)) must be its NFC form; the same
 *        bytes are also fed to the streaming decoder as ids, whose output must be valid UTF-8;
 *   '2' (= 2 mod 3): a chat template to recognise, and messages JSON to render.
 * The real tokenizer is found through $VLMC_TOKENIZER, the working directory, or this file's
 * own path in the source tree; without it, '1' inputs only exercise the other paths. */
#define _POSIX_C_SOURCE 200809L
#include <assert.h>
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "frontend/chat_template.h"
#include "frontend/tokenizer.h"

static const char kRelativeTokenizer[] = "assets/qwen-tokenizer/tokenizer.json.gz";

static vlmc_tokenizer_t *try_load(const char *path) {
  vlmc_tokenizer_t *tokenizer = NULL;
  vlmc_status_t status = vlmc_tokenizer_create_from_file(path, &tokenizer);
  vlmc_status_free(status);
  return tokenizer;
}

/* Loaded on first use and kept for the whole run: loading takes far longer than one input. */
static vlmc_tokenizer_t *real_tokenizer(void) {
  static bool tried = false;
  static vlmc_tokenizer_t *tokenizer = NULL;
  if (tried) return tokenizer;
  tried = true;
  const char *env = getenv("VLMC_TOKENIZER");
  if (env) tokenizer = try_load(env);
  if (!tokenizer) tokenizer = try_load(kRelativeTokenizer);
  const char *self = __FILE__, *tests = strstr(self, "tests/fuzz/");
  if (!tokenizer && tests) {
    char path[4096];
    snprintf(path, sizeof path, "%.*s%s", (int)(tests - self), self, kRelativeTokenizer);
    tokenizer = try_load(path);
  }
  if (!tokenizer) fprintf(stderr, "fuzz_tokenizer: real tokenizer not found; set VLMC_TOKENIZER\n");
  return tokenizer;
}

static bool is_valid_utf8(const uint8_t *s, size_t len) {
  size_t i = 0;
  while (i < len) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t n = utf8proc_iterate(s + i, (utf8proc_ssize_t)(len - i), &cp);
    if (n <= 0) return false;
    i += (size_t)n;
  }
  return true;
}

/* `strict` (the real tokenizer): encoding fails exactly on invalid UTF-8 and decoding gives
 * the NFC text back. A fuzzed tokenizer may fail otherwise (a regex over its match limit) and
 * may have no normalizer. */
static void encode_and_decode(const vlmc_tokenizer_t *tokenizer, const uint8_t *data,
                              size_t size, bool strict) {
  vlmc_token_ids_t ids;
  vlmc_token_ids_init(&ids);
  vlmc_status_t status = vlmc_tokenizer_encode(tokenizer, (const char *)data, size, &ids);
  bool valid = is_valid_utf8(data, size);
  assert(!strict || (status == NULL) == valid);
  vlmc_status_free(status);
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  status = vlmc_tokenizer_decode(tokenizer, ids.data, ids.len, false, &text);
  assert(status == NULL);
  assert(is_valid_utf8((const uint8_t *)vlmc_strbuf_cstr(&text), text.len));
  if (valid && strict) {
    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t n =
        utf8proc_map(data, (utf8proc_ssize_t)size, &nfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    assert(n >= 0 && (size_t)n == text.len && memcmp(nfc, vlmc_strbuf_cstr(&text), text.len) == 0);
    free(nfc);
  }
  vlmc_strbuf_deinit(&text);
  vlmc_token_ids_deinit(&ids);
}

/* Every 3 bytes are one id, some of them out of range on purpose. */
static void stream_ids(const vlmc_tokenizer_t *tokenizer, const uint8_t *data, size_t size) {
  vlmc_tokenizer_decoder_t decoder;
  vlmc_tokenizer_decoder_init(&decoder, tokenizer, size % 2 == 0);
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  size_t limit = vlmc_tokenizer_id_limit(tokenizer) + 16;
  for (size_t i = 0; i + 2 < size; i += 3) {
    uint32_t raw = (uint32_t)data[i] | (uint32_t)data[i + 1] << 8 | (uint32_t)data[i + 2] << 16;
    vlmc_status_free(vlmc_tokenizer_decoder_push(&decoder, (int32_t)(raw % limit) - 8, &out));
  }
  vlmc_tokenizer_decoder_finish(&decoder, &out);
  assert(is_valid_utf8((const uint8_t *)vlmc_strbuf_cstr(&out), out.len));
  vlmc_strbuf_deinit(&out);
}

static void fuzz_tokenizer_json(const uint8_t *data, size_t size) {
  vlmc_tokenizer_t *tokenizer = NULL;
  vlmc_status_t status =
      vlmc_tokenizer_create_from_buffer("fuzz.json", (const char *)data, size, &tokenizer);
  if (status) {
    assert(tokenizer == NULL);
    vlmc_status_free(status);
    return;
  }
  static const char sample[] = "abc <|x|> h\xC3\xA9llo  \n 12 cafe\xCC\x81";
  encode_and_decode(tokenizer, (const uint8_t *)sample, sizeof sample - 1, false);
  stream_ids(tokenizer, data, size < 300 ? size : 300);
  vlmc_tokenizer_destroy(tokenizer);
}

static void fuzz_chat_template(const uint8_t *data, size_t size) {
  vlmc_chat_template_t chat_template;
  vlmc_status_free(
      vlmc_chat_template_recognize("fuzz.jinja", (const char *)data, size, &chat_template));
  char *text = NULL;
  vlmc_status_free(
      vlmc_chat_template_text_from_file("fuzz.json", (const char *)data, size, &text));
  free(text);
  cJSON *messages = cJSON_ParseWithLength((const char *)data, size);
  vlmc_arena_t arena;
  vlmc_arena_init(&arena);
  vlmc_chat_message_t *list = NULL;
  size_t count = 0;
  vlmc_status_t status =
      vlmc_chat_messages_from_json("fuzz.json", "messages", messages, &arena, &list, &count);
  if (!status) {
    vlmc_chat_render_options_t options = {size % 2 == 0, size % 3 == 0, size % 5 == 0};
    vlmc_strbuf_t out;
    vlmc_strbuf_init(&out);
    /* every text template and Qwen3-VL's on the same messages, then Qwen2-VL's (whose text is
     * tokenized) */
    static const vlmc_chat_template_kind_t kinds[] = {
        VLMC_CHAT_TEMPLATE_QWEN2_TEXT, VLMC_CHAT_TEMPLATE_QWEN2_5_TEXT,
        VLMC_CHAT_TEMPLATE_QWEN3_TEXT, VLMC_CHAT_TEMPLATE_QWEN3_VL, VLMC_CHAT_TEMPLATE_QWEN2_VL};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; ++k) {
      vlmc_chat_template_t qwen = {kinds[k]};
      vlmc_strbuf_clear(&out);
      vlmc_status_free(vlmc_chat_template_render(&qwen, list, count, &options, &out));
    }
    vlmc_tokenizer_t *tokenizer = real_tokenizer();
    if (tokenizer) {
      vlmc_chat_grid_t grids[2] = {{1, 2, 2}, {1, 4, 2}};
      vlmc_chat_prompt_t prompt;
      vlmc_status_free(vlmc_chat_prompt_tokenize(tokenizer, vlmc_strbuf_cstr(&out), out.len, grids,
                                                 size % 3, NULL, 0, 2, &prompt));
      vlmc_chat_prompt_deinit(&prompt);
    }
    vlmc_strbuf_deinit(&out);
  }
  vlmc_status_free(status);
  vlmc_arena_deinit(&arena);
  cJSON_Delete(messages);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  const uint8_t *rest = data + 1;
  size_t rest_size = size - 1;
  switch (data[0] % 3) {
    case 0:
      fuzz_tokenizer_json(rest, rest_size);
      break;
    case 1: {
      vlmc_tokenizer_t *tokenizer = real_tokenizer();
      if (!tokenizer) break;
      encode_and_decode(tokenizer, rest, rest_size, true);
      stream_ids(tokenizer, rest, rest_size);
      break;
    }
    default:
      fuzz_chat_template(rest, rest_size);
      break;
  }
  return 0;
}
