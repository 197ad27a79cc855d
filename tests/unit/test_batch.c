/* Batch requests (runtime/batch.h), as vlmc-run --batch reads each line: accepted requests
 * come back as written (the id as JSON text to echo), every malformed one is refused with a
 * message naming the line and the key. */
#include <string.h>

#include "runtime/batch.h"
#include "tests/unit/test.h"

static vlmc_status_t parse(const char *text, vlmc_batch_request_t *q) {
  return vlmc_batch_request_parse("req.jsonl:3", text, strlen(text), q);
}

static void test_accepts_full_request(void) {
  vlmc_batch_request_t q;
  EXPECT_OK(parse("{\"id\": \"scene \\\"7\\\"\", \"prompt\": \"What is here?\", \"images\": "
                  "[\"a.png\", \"b.jpg\"], \"system\": \"Be terse.\", \"max_new_tokens\": 48}",
                  &q));
  EXPECT_STREQ(q.id, "\"scene \\\"7\\\"\"");
  EXPECT_STREQ(q.prompt, "What is here?");
  EXPECT_STREQ(q.system, "Be terse.");
  EXPECT_EQ_INT(q.num_images, 2);
  if (q.num_images == 2) {
    EXPECT_STREQ(q.images[0], "a.png");
    EXPECT_STREQ(q.images[1], "b.jpg");
  }
  EXPECT_EQ_INT(q.max_new_tokens, 48);
  vlmc_batch_request_deinit(&q);
}

/* Only the prompt is required; what is absent takes the command line's values. */
static void test_defaults(void) {
  vlmc_batch_request_t q;
  EXPECT_OK(parse("{\"prompt\": \"\", \"id\": 12, \"system\": null}", &q));
  EXPECT_STREQ(q.id, "12");
  EXPECT_STREQ(q.prompt, "");
  EXPECT_TRUE(q.system == NULL);
  EXPECT_EQ_INT(q.num_images, 0);
  EXPECT_EQ_INT(q.max_new_tokens, 0);
  vlmc_batch_request_deinit(&q);
  EXPECT_OK(parse("{\"prompt\": \"p\"}", &q));
  EXPECT_STREQ(q.id, "");
  vlmc_batch_request_deinit(&q);
}

/* Token ids instead of a prompt: parsed as --input-ids parses them. */
static void test_accepts_input_ids(void) {
  vlmc_batch_request_t q;
  EXPECT_OK(parse("{\"input_ids\": [151652, 0, 2147483647], \"images\": [\"a.png\"], "
                  "\"max_new_tokens\": 33}", &q));
  EXPECT_TRUE(q.prompt == NULL);
  EXPECT_EQ_INT(q.num_input_ids, 3);
  if (q.num_input_ids == 3) {
    EXPECT_EQ_INT(q.input_ids[0], 151652);
    EXPECT_EQ_INT(q.input_ids[1], 0);
    EXPECT_EQ_INT(q.input_ids[2], 2147483647);
  }
  EXPECT_EQ_INT(q.num_images, 1);
  EXPECT_EQ_INT(q.max_new_tokens, 33);
  vlmc_batch_request_deinit(&q);
}

/* The line is a slice of a longer buffer: only `len` bytes are read. */
static void test_reads_only_len_bytes(void) {
  const char line[] = "{\"prompt\": \"p\"}garbage";
  vlmc_batch_request_t q;
  EXPECT_OK(vlmc_batch_request_parse("stdin:1", line, 15, &q));
  vlmc_batch_request_deinit(&q);
}

static void expect_refused(const char *text, const char *needle) {
  vlmc_batch_request_t q;
  vlmc_status_t status = parse(text, &q);
  EXPECT_TRUE(status != NULL);
  if (status) {
    const char *message = vlmc_status_message(status);
    if (!strstr(message, needle) || !strstr(message, "req.jsonl:3"))
      TEST_FAIL_("'%s': got \"%s\", expected it to contain \"%s\"", text, message, needle);
  }
  EXPECT_TRUE(q.doc == NULL && q.prompt == NULL && q.num_images == 0);
  vlmc_batch_request_deinit(&q); /* safe after a refusal */
  vlmc_status_free(status);
}

static void test_refuses_malformed(void) {
  expect_refused("", "invalid JSON");
  expect_refused("{\"prompt\": \"p\"", "invalid JSON");
  expect_refused("{\"prompt\": \"p\"} {}", "unexpected text after the JSON value");
  expect_refused("[\"p\"]", "expected a JSON object (a request), got an array");
  expect_refused("{}", "required key prompt is missing");
  expect_refused("{\"prompt\": \"p\", \"input_ids\": [1]}", "a prompt or input_ids, not both");
  expect_refused("{\"input_ids\": [1], \"system\": \"s\"}", "system goes with a text prompt");
  expect_refused("{\"input_ids\": []}", "input_ids");
  expect_refused("{\"input_ids\": [1, -2]}", "input_ids");
  expect_refused("{\"input_ids\": [1, 2.5]}", "not an integer");
  expect_refused("{\"input_ids\": [2147483648]}", "input_ids");
  expect_refused("{\"input_ids\": \"1 2\"}", "input_ids");
  expect_refused("{\"id\": 1, \"input_ids\": [1], \"images\": 3}", "images: expected an array");
  expect_refused("{\"prompt\": 5}", "prompt: expected a string");
  expect_refused("{\"prompt\": \"p\", \"image\": [\"a.png\"]}", "unknown key \"image\"");
  expect_refused("{\"prompt\": \"p\", \"prompt\": \"q\"}", "given twice");
  expect_refused("{\"prompt\": \"p\", \"images\": \"a.png\"}", "images: expected an array");
  expect_refused("{\"prompt\": \"p\", \"images\": [\"a.png\", 3]}", "images[1]");
  expect_refused("{\"prompt\": \"p\", \"images\": [\"\"]}", "an empty path");
  expect_refused("{\"prompt\": \"p\", \"max_new_tokens\": 0}", "max_new_tokens");
  expect_refused("{\"prompt\": \"p\", \"max_new_tokens\": 2.5}", "max_new_tokens");
  expect_refused("{\"prompt\": \"p\", \"max_new_tokens\": 1e30}", "max_new_tokens");
  expect_refused("{\"prompt\": \"p\", \"id\": [1]}", "id: expected a string");
  expect_refused("{\"prompt\": \"p\", \"id\": 1.5}", "id");
  expect_refused("{\"prompt\": \"p\", \"system\": false}", "system: expected a string");
}

static void test_refuses_past_limits(void) {
  char text[4096];
  char id[VLMC_BATCH_MAX_ID + 2];
  memset(id, 'x', sizeof id - 1);
  id[sizeof id - 1] = '\0';
  snprintf(text, sizeof text, "{\"prompt\": \"p\", \"id\": \"%s\"}", id);
  expect_refused(text, "longer than 256 bytes");
  size_t len = (size_t)snprintf(text, sizeof text, "{\"prompt\": \"p\", \"images\": [");
  for (int i = 0; i <= VLMC_BATCH_MAX_IMAGES; ++i)
    len += (size_t)snprintf(text + len, sizeof text - len, "%s\"i%d.png\"", i ? ", " : "", i);
  snprintf(text + len, sizeof text - len, "]}");
  expect_refused(text, "more than 64 images");
}

int main(void) {
  RUN_TEST(test_accepts_full_request);
  RUN_TEST(test_defaults);
  RUN_TEST(test_accepts_input_ids);
  RUN_TEST(test_reads_only_len_bytes);
  RUN_TEST(test_refuses_malformed);
  RUN_TEST(test_refuses_past_limits);
  return TEST_SUMMARY();
}
