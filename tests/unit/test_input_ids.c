/* Token id lists (runtime/input_ids.h), as vlmc-run reads --input-ids and its chat lines:
 * accepted lists come back as they are written; every malformed one is refused with a message
 * naming the text, the element and what is wrong. */
#include <stdlib.h>
#include <string.h>

#include "runtime/input_ids.h"
#include "tests/unit/test.h"

static vlmc_status_t parse(const char *text, int64_t **ids, size_t *n) {
  return vlmc_parse_token_ids("ids.json", text, strlen(text), ids, n);
}

static void test_accepts_lists(void) {
  int64_t *ids = NULL;
  size_t n = 0;
  EXPECT_OK(parse(" [151644, 0, 2147483647, 1e2]\n", &ids, &n));
  EXPECT_EQ_INT(n, 4);
  if (n == 4) {
    EXPECT_EQ_INT(ids[0], 151644);
    EXPECT_EQ_INT(ids[1], 0);
    EXPECT_EQ_INT(ids[2], 2147483647);
    EXPECT_EQ_INT(ids[3], 100);
  }
  free(ids);
}

/* The text need not be NUL-terminated: a chat line is a slice of a longer buffer. */
static void test_reads_only_len_bytes(void) {
  const char line[] = "[5, 6]garbage";
  int64_t *ids = NULL;
  size_t n = 0;
  EXPECT_OK(vlmc_parse_token_ids("stdin:2", line, 6, &ids, &n));
  EXPECT_EQ_INT(n, 2);
  free(ids);
}

/* Each refusal names the text and says what is wrong; nothing is returned. */
static void expect_refused(const char *text, const char *needle) {
  int64_t *ids = (int64_t *)1;
  size_t n = 7;
  vlmc_status_t status = parse(text, &ids, &n);
  EXPECT_TRUE(status != NULL);
  if (status) {
    const char *message = vlmc_status_message(status);
    if (!strstr(message, needle) || !strstr(message, "ids.json"))
      TEST_FAIL_("'%s': got \"%s\", expected it to contain \"%s\"", text, message, needle);
  }
  EXPECT_TRUE(ids == NULL && n == 0);
  vlmc_status_free(status);
}

static void test_refuses_malformed(void) {
  expect_refused("", "invalid JSON");
  expect_refused("[1, 2", "invalid JSON");
  expect_refused("[1] [2]", "unexpected text after the JSON value");
  expect_refused("{\"ids\": [1]}", "expected a JSON list of token ids, got an object");
  expect_refused("42", "expected a JSON list of token ids, got a number");
  expect_refused("[]", "the list of token ids is empty");
  expect_refused("[1, 2.5]", "[1]: 2.5 is not an integer");
  expect_refused("[-1]", "[0]: -1 is negative");
  expect_refused("[3, 2147483648]", "[1]: 2.14748e+09 is larger than any token id");
  expect_refused("[1e999]", "is larger than any token id");
  expect_refused("[1, [2]]", "[1]: expected a token id, got a nested list");
  expect_refused("[\"7\"]", "[0]: expected a token id, got a string");
  expect_refused("[null]", "[0]: expected a token id, got null");
}

int main(void) {
  RUN_TEST(test_accepts_lists);
  RUN_TEST(test_reads_only_len_bytes);
  RUN_TEST(test_refuses_malformed);
  return TEST_SUMMARY();
}
