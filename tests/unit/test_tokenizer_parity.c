/* Parity with transformers on the oracle corpus (tests/oracle/, run on the GPU machine):
 * tests/fixtures/tokenizer/corpus.jsonl holds one JSON string per line and corpus_ids.txt
 * the reference ids of each (add_special_tokens=False), in the format of `vlmc tokenize`.
 * Every string must encode to exactly those ids, and decoding them must give the string back
 * in NFC (what the reference's own round trip gives for byte-level BPE). */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "frontend/tokenizer.h"
#include "support/file.h"
#include "tests/unit/test.h"

#define CORPUS "tests/fixtures/tokenizer/corpus.jsonl"
#define CORPUS_IDS "tests/fixtures/tokenizer/corpus_ids.txt"

static vlmc_tokenizer_t *tok;

typedef struct {
  char *data;
  size_t len;
  size_t pos;
} lines_t;

/* The next line without its '\n'; false at the end. */
static bool next_line(lines_t *lines, const char **out_line, size_t *out_len) {
  if (lines->pos >= lines->len) return false;
  const char *start = lines->data + lines->pos;
  const char *newline = memchr(start, '\n', lines->len - lines->pos);
  *out_line = start;
  *out_len = newline ? (size_t)(newline - start) : lines->len - lines->pos;
  lines->pos += *out_len + 1;
  return true;
}

static bool parse_ids(const char *line, size_t len, vlmc_token_ids_t *ids) {
  ids->len = 0;
  size_t i = 0;
  while (i < len) {
    if (line[i] == ' ' || line[i] == '\r') {
      ++i;
      continue;
    }
    long value = 0;
    size_t start = i;
    while (i < len && line[i] >= '0' && line[i] <= '9' && value < (1L << 31))
      value = value * 10 + (line[i++] - '0');
    if (i == start || value >= (1L << 31)) return false;
    if (vlmc_token_ids_append(ids, (int32_t)value)) return false;
  }
  return true;
}

static void print_ids(const char *label, const vlmc_token_ids_t *ids) {
  fprintf(stderr, "    %s:", label);
  for (size_t i = 0; i < ids->len; ++i) fprintf(stderr, " %d", ids->data[i]);
  fprintf(stderr, "\n");
}

static bool same_ids(const vlmc_token_ids_t *a, const vlmc_token_ids_t *b) {
  return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len * 4) == 0);
}

/* decode(ids) must equal NFC(text). */
static bool round_trips(const vlmc_strbuf_t *text, const vlmc_token_ids_t *ids) {
  utf8proc_uint8_t *nfc = NULL;
  utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)vlmc_strbuf_cstr(text),
                                    (utf8proc_ssize_t)text->len, &nfc,
                                    UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  vlmc_strbuf_t decoded;
  vlmc_strbuf_init(&decoded);
  vlmc_status_t status = vlmc_tokenizer_decode(tok, ids->data, ids->len, false, &decoded);
  bool ok = !status && n >= 0 && decoded.len == (size_t)n &&
            memcmp(vlmc_strbuf_cstr(&decoded), nfc, (size_t)n) == 0;
  vlmc_status_free(status);
  vlmc_strbuf_deinit(&decoded);
  free(nfc);
  return ok;
}

static void test_corpus_matches_transformers(void) {
  lines_t strings = {NULL, 0, 0}, expected_ids = {NULL, 0, 0};
  vlmc_status_t status = vlmc_file_read_all(CORPUS, &strings.data, &strings.len);
  if (!status) status = vlmc_file_read_all(CORPUS_IDS, &expected_ids.data, &expected_ids.len);
  if (status) {
    TEST_FAIL_("%s (the oracle fixtures come from tests/oracle/ on the GPU machine)",
               vlmc_status_message(status));
    vlmc_status_free(status);
    free(strings.data);
    return;
  }
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  vlmc_token_ids_t want, got;
  vlmc_token_ids_init(&want);
  vlmc_token_ids_init(&got);
  size_t line_no = 0, matched = 0, mismatched = 0, not_round_trip = 0;
  const char *line, *id_line;
  size_t len, id_len;
  while (next_line(&strings, &line, &len)) {
    ++line_no;
    if (!next_line(&expected_ids, &id_line, &id_len)) {
      TEST_FAIL_("%s has fewer lines than %s (%zu)", CORPUS_IDS, CORPUS, line_no);
      break;
    }
    vlmc_strbuf_clear(&text);
    EXPECT_OK(vlmc_tokenizer_json_string_decode(line, len, &text));
    EXPECT_TRUE(parse_ids(id_line, id_len, &want));
    got.len = 0;
    EXPECT_OK(vlmc_tokenizer_encode(tok, vlmc_strbuf_cstr(&text), text.len, &got));
    if (same_ids(&want, &got)) {
      ++matched;
    } else if (++mismatched <= 10) {
      fprintf(stderr, "  %s:%zu: %.*s\n", CORPUS, line_no, (int)len, line);
      print_ids("transformers", &want);
      print_ids("vlmc", &got);
    }
    if (!round_trips(&text, &want) && ++not_round_trip <= 10)
      fprintf(stderr, "  %s:%zu: decode(reference ids) != NFC(text)\n", CORPUS, line_no);
  }
  if (next_line(&expected_ids, &id_line, &id_len))
    TEST_FAIL_("%s has more lines than %s (%zu)", CORPUS_IDS, CORPUS, line_no);
  printf("tokenizer parity: %zu of %zu corpus strings match transformers\n", matched, line_no);
  EXPECT_TRUE(line_no >= 300);
  EXPECT_EQ_INT(mismatched, 0);
  EXPECT_EQ_INT(not_round_trip, 0);
  vlmc_token_ids_deinit(&want);
  vlmc_token_ids_deinit(&got);
  vlmc_strbuf_deinit(&text);
  free(strings.data);
  free(expected_ids.data);
}

int main(void) {
  vlmc_status_t status =
      vlmc_tokenizer_create_from_file("assets/qwen-tokenizer/tokenizer.json.gz", &tok);
  if (status) {
    fprintf(stderr, "cannot load the tokenizer: %s\n", vlmc_status_message(status));
    vlmc_status_free(status);
    return 1;
  }
  RUN_TEST(test_corpus_matches_transformers);
  vlmc_tokenizer_destroy(tok);
  return TEST_SUMMARY();
}
