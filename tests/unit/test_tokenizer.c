/* The Qwen tokenizer on the project's real tokenizer.json.gz: hand-checked ids (spec §5.2 and
 * cases cross-checked against an independent GPT-2-style BPE written in Python), special
 * tokens inside text, whitespace runs, CJK, emoji and NFC, streaming decode, long inputs. */
#include <stdlib.h>
#include <string.h>

#include "frontend/tokenizer.h"
#include "tests/unit/test.h"

#define TOKENIZER_PATH "assets/qwen-tokenizer/tokenizer.json.gz"

static vlmc_tokenizer_t *tok;

/* Encodes `text` and compares with `expected` (count ids). */
static void expect_ids(const char *text, size_t len, const int32_t *expected, size_t count) {
  vlmc_token_ids_t ids;
  vlmc_token_ids_init(&ids);
  EXPECT_OK(vlmc_tokenizer_encode(tok, text, len, &ids));
  bool same = ids.len == count && (count == 0 || memcmp(ids.data, expected, count * 4) == 0);
  if (!same) {
    fprintf(stderr, "  encode(\"%.*s\") gave", (int)len, text);
    for (size_t i = 0; i < ids.len; ++i) fprintf(stderr, " %d", ids.data[i]);
    fprintf(stderr, "\n");
  }
  EXPECT_TRUE(same);
  vlmc_token_ids_deinit(&ids);
}

#define EXPECT_IDS(text, ...)                                              \
  do {                                                                     \
    static const int32_t expected_[] = {__VA_ARGS__};                      \
    expect_ids((text), strlen(text), expected_, sizeof expected_ / 4);     \
  } while (0)

/* decode(encode(text)) must give `expected` back. */
static void expect_round_trip(const char *text, size_t len, const char *expected,
                              size_t expected_len) {
  vlmc_token_ids_t ids;
  vlmc_token_ids_init(&ids);
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  EXPECT_OK(vlmc_tokenizer_encode(tok, text, len, &ids));
  EXPECT_OK(vlmc_tokenizer_decode(tok, ids.data, ids.len, false, &out));
  EXPECT_TRUE(out.len == expected_len && memcmp(vlmc_strbuf_cstr(&out), expected, out.len) == 0);
  vlmc_strbuf_deinit(&out);
  vlmc_token_ids_deinit(&ids);
}

static void test_spec_system_prompt_ids(void) {
  /* Spec §5.2: the default system turn and "Describe this image." */
  EXPECT_IDS("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n", 151644, 8948, 198,
             2610, 525, 264, 10950, 17847, 13, 151645, 198);
  EXPECT_IDS("Describe this image.", 74785, 419, 2168, 13);
  EXPECT_IDS("<|im_start|>assistant\n", 151644, 77091, 198);
  EXPECT_IDS("Hello world", 9707, 1879);
}

static void test_special_tokens_inline(void) {
  EXPECT_IDS("a<|im_end|>b", 64, 151645, 65);
  EXPECT_IDS("<|im_start|><|im_start|>user", 151644, 151644, 872);
  EXPECT_IDS("<|im_start", 27, 91, 318, 4906); /* not a token: ordinary text */
  EXPECT_IDS("x<tool_call>y", 87, 151657, 88); /* added, not special: still atomic */
  EXPECT_TRUE(vlmc_tokenizer_id_is_special(tok, 151645));
  EXPECT_TRUE(!vlmc_tokenizer_id_is_special(tok, 151657));
  EXPECT_TRUE(!vlmc_tokenizer_id_is_special(tok, 64));
}

static void test_whitespace_runs(void) {
  EXPECT_IDS("a  b", 64, 220, 293);
  EXPECT_IDS("a\n\n b", 64, 271, 293);
  EXPECT_IDS("  \t\n", 98251);
  EXPECT_IDS("end   ", 408, 262);
  EXPECT_IDS("12345", 16, 17, 18, 19, 20); /* digits one by one */
  EXPECT_IDS("I'm here, they'll go, it's OK", 40, 2776, 1588, 11, 807, 3278, 728, 11, 432, 594,
             10402);
  expect_ids("", 0, NULL, 0);
}

static void test_cjk_emoji_and_nfc(void) {
  EXPECT_IDS("你好，世界", 108386, 3837, 99489);
  EXPECT_IDS("🙂", 145080);
  EXPECT_IDS("café", 924, 58858);
  EXPECT_IDS("cafe\xCC\x81", 924, 58858); /* NFD input is composed first */
  EXPECT_IDS("\xF0\x9D\x84\x9E", 124596, 252); /* U+1D11E spans two tokens */
  const char nfd[] = "cafe\xCC\x81 na\xC3\xAFve e\xCC\x81te\xCC\x81";
  const char nfc[] = "caf\xC3\xA9 na\xC3\xAFve \xC3\xA9t\xC3\xA9";
  expect_round_trip(nfd, strlen(nfd), nfc, strlen(nfc));
}

static void test_round_trip(void) {
  static const char *const texts[] = {
      "Hello, world! <|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>",
      "  leading and trailing  \r\n\t",
      "مرحبا بالعالم — नमस्ते दुनिया — 👨‍👩‍👧 🇫🇷 ❤️",
      "def f(x):\n    return x ** 2  # comment\n",
      "<|im_start<|im_end|>|>",
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; ++i)
    expect_round_trip(texts[i], strlen(texts[i]), texts[i], strlen(texts[i]));
  const char with_nul[] = "a\0b";
  expect_round_trip(with_nul, 3, with_nul, 3);
}

static void test_long_inputs(void) {
  size_t n = 200000;
  char *text = malloc(n);
  static const char fills[] = {' ', 'a', '7', '\n', '='};
  for (size_t f = 0; f < sizeof fills; ++f) {
    memset(text, fills[f], n);
    expect_round_trip(text, n, text, n);
  }
  for (size_t i = 0; i < n; ++i) text[i] = "ab \n\t,"[i * 7919 % 6];
  expect_round_trip(text, n, text, n);
  free(text);
}

/* Feeds ids one at a time: nothing is emitted until a character is complete. */
static void test_streaming_decode_holds_partial_characters(void) {
  vlmc_tokenizer_decoder_t decoder;
  vlmc_tokenizer_decoder_init(&decoder, tok, false);
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  /* U+20000 = F0 A0 80 80 encodes as three tokens. */
  static const int32_t ids[] = {172, 63219, 222};
  EXPECT_OK(vlmc_tokenizer_decoder_push(&decoder, ids[0], &out));
  EXPECT_EQ_INT(out.len, 0);
  EXPECT_OK(vlmc_tokenizer_decoder_push(&decoder, ids[1], &out));
  EXPECT_EQ_INT(out.len, 0);
  EXPECT_OK(vlmc_tokenizer_decoder_push(&decoder, ids[2], &out));
  EXPECT_STREQ(vlmc_strbuf_cstr(&out), "\xF0\xA0\x80\x80");
  vlmc_tokenizer_decoder_finish(&decoder, &out);
  EXPECT_STREQ(vlmc_strbuf_cstr(&out), "\xF0\xA0\x80\x80");
  vlmc_strbuf_deinit(&out);
}

/* The id of the byte-level symbol for one raw byte. */
static int32_t byte_id(unsigned byte) {
  unsigned cp = byte;
  if (!((byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE))
    cp = 256 + (byte <= 0x20 ? byte : byte <= 0xA0 ? 33 + byte - 0x7F : 67);
  char utf8[3] = {0};
  if (cp < 0x80) {
    utf8[0] = (char)cp;
  } else {
    utf8[0] = (char)(0xC0 | (cp >> 6));
    utf8[1] = (char)(0x80 | (cp & 0x3F));
  }
  return vlmc_tokenizer_token_to_id(tok, utf8, strlen(utf8));
}

/* Decodes raw bytes (one byte token each) and compares with what from_utf8_lossy gives. */
static void expect_lossy(const unsigned char *bytes, size_t n, const char *expected) {
  vlmc_tokenizer_decoder_t decoder;
  vlmc_tokenizer_decoder_init(&decoder, tok, false);
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  for (size_t i = 0; i < n; ++i) {
    int32_t id = byte_id(bytes[i]);
    EXPECT_TRUE(id >= 0);
    EXPECT_OK(vlmc_tokenizer_decoder_push(&decoder, id, &out));
  }
  vlmc_tokenizer_decoder_finish(&decoder, &out);
  EXPECT_STREQ(vlmc_strbuf_cstr(&out), expected);
  vlmc_strbuf_deinit(&out);
}

#define FFFD "\xEF\xBF\xBD"

static void test_streaming_decode_replaces_invalid_utf8(void) {
  static const unsigned char truncated_then_ascii[] = {0xF0, 0x9F, 'A'};
  expect_lossy(truncated_then_ascii, 3, FFFD "A");
  static const unsigned char truncated_at_end[] = {'x', 0xE2, 0x82};
  expect_lossy(truncated_at_end, 3, "x" FFFD);
  static const unsigned char lone_continuation[] = {0x80, 'b'};
  expect_lossy(lone_continuation, 2, FFFD "b");
  static const unsigned char overlong[] = {0xE0, 0x80, 0x80}; /* E0 needs A0..BF next */
  expect_lossy(overlong, 3, FFFD FFFD FFFD);
  static const unsigned char surrogate[] = {0xED, 0xA0, 0x80};
  expect_lossy(surrogate, 3, FFFD FFFD FFFD);
  static const unsigned char split_euro[] = {0xE2, 0x82, 0xAC, 0xFF};
  expect_lossy(split_euro, 4, "\xE2\x82\xAC" FFFD);
}

static void test_decode_skips_special_tokens(void) {
  static const int32_t ids[] = {151644, 872, 198, 9707, 151645, 151657};
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  EXPECT_OK(vlmc_tokenizer_decode(tok, ids, 6, true, &out));
  EXPECT_STREQ(vlmc_strbuf_cstr(&out), "user\nHello<tool_call>");
  vlmc_strbuf_clear(&out);
  EXPECT_OK(vlmc_tokenizer_decode(tok, ids, 6, false, &out));
  EXPECT_STREQ(vlmc_strbuf_cstr(&out), "<|im_start|>user\nHello<|im_end|><tool_call>");
  static const int32_t bad[] = {9707, 151669};
  EXPECT_ERROR(vlmc_tokenizer_decode(tok, bad, 2, false, &out), "ids[1]: ");
  EXPECT_ERROR(vlmc_tokenizer_decode(tok, bad + 1, 1, false, &out),
               "token id 151669 names no token");
  static const int32_t negative[] = {-1};
  EXPECT_ERROR(vlmc_tokenizer_decode(tok, negative, 1, false, &out), "token id -1");
  vlmc_strbuf_deinit(&out);
}

static void test_lookups(void) {
  EXPECT_EQ_INT(vlmc_tokenizer_id_limit(tok), 151669);
  EXPECT_EQ_INT(vlmc_tokenizer_token_to_id(tok, "<|image_pad|>", 13), 151655);
  EXPECT_EQ_INT(vlmc_tokenizer_token_to_id(tok, "\xC4\xA0the", 5), 279); /* "Ġthe" */
  EXPECT_EQ_INT(vlmc_tokenizer_token_to_id(tok, "no such token!!", 15), -1);
  EXPECT_STREQ(vlmc_tokenizer_id_to_token(tok, 151645), "<|im_end|>");
  EXPECT_STREQ(vlmc_tokenizer_id_to_token(tok, 9707), "Hello");
  EXPECT_TRUE(vlmc_tokenizer_id_to_token(tok, 151669) == NULL);
  EXPECT_TRUE(vlmc_tokenizer_id_to_token(tok, -5) == NULL);
}

static void test_invalid_utf8_input_is_an_error(void) {
  vlmc_token_ids_t ids;
  vlmc_token_ids_init(&ids);
  EXPECT_ERROR(vlmc_tokenizer_encode(tok, "ab\xFF", 3, &ids), "not valid UTF-8 at byte 2");
  EXPECT_ERROR(vlmc_tokenizer_encode(tok, "\xED\xA0\x80", 3, &ids), "at byte 0"); /* surrogate */
  EXPECT_ERROR(vlmc_tokenizer_encode(tok, "x\xE2\x82", 3, &ids), "at byte 1");
  EXPECT_EQ_INT(ids.len, 0);
  vlmc_token_ids_deinit(&ids);
}

static void test_json_string_decode(void) {
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  const char *line = " \"a\\n\\u00e9\\ud83d\\ude42\\u0000z\\\"\\\\\\/\" ";
  EXPECT_OK(vlmc_tokenizer_json_string_decode(line, strlen(line), &out));
  EXPECT_EQ_INT(out.len, 13);
  EXPECT_TRUE(memcmp(out.data, "a\n\xC3\xA9\xF0\x9F\x99\x82\0z\"\\/", 13) == 0);
  static const struct {
    const char *line, *error;
  } bad[] = {
      {"\"\\ud800\"", "column 2: lone high surrogate"},
      {"\"\\udc00x\"", "column 2: lone low surrogate"},
      {"\"\\ud800\\u0041\"", "lone high surrogate"},
      {"\"abc", "unterminated string"},
      {"\"a\"b", "column 4: unexpected text after the string"},
      {"42", "column 1: expected a JSON string"},
      {"", "expected a JSON string"},
      {"\"\\x41\"", "unknown escape"},
      {"\"\\u12G4\"", "expected \\u and 4 hex digits"},
      {"\"\t\"", "raw control character"},
      {"\"\xC3\x28\"", "column 2: invalid UTF-8"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    vlmc_strbuf_clear(&out);
    EXPECT_ERROR(vlmc_tokenizer_json_string_decode(bad[i].line, strlen(bad[i].line), &out),
                 bad[i].error);
  }
  vlmc_strbuf_clear(&out);
  vlmc_tokenizer_json_string_encode("q\"\\\n\x01\xC3\xA9", 7, &out);
  EXPECT_STREQ(vlmc_strbuf_cstr(&out), "\"q\\\"\\\\\\n\\u0001\xC3\xA9\"");
  vlmc_strbuf_deinit(&out);
}

int main(void) {
  vlmc_status_t status = vlmc_tokenizer_create_from_file(TOKENIZER_PATH, &tok);
  if (status) {
    fprintf(stderr, "cannot load %s: %s\n", TOKENIZER_PATH, vlmc_status_message(status));
    vlmc_status_free(status);
    return 1;
  }
  RUN_TEST(test_spec_system_prompt_ids);
  RUN_TEST(test_special_tokens_inline);
  RUN_TEST(test_whitespace_runs);
  RUN_TEST(test_cjk_emoji_and_nfc);
  RUN_TEST(test_round_trip);
  RUN_TEST(test_long_inputs);
  RUN_TEST(test_streaming_decode_holds_partial_characters);
  RUN_TEST(test_streaming_decode_replaces_invalid_utf8);
  RUN_TEST(test_decode_skips_special_tokens);
  RUN_TEST(test_lookups);
  RUN_TEST(test_invalid_utf8_input_is_an_error);
  RUN_TEST(test_json_string_decode);
  vlmc_tokenizer_destroy(tok);
  return TEST_SUMMARY();
}
