/* Stop strings over streamed text (runtime/stop_text.h): whatever way the pieces split the
 * text, the released text is the answer up to the first stop string, and no part of a stop
 * string is ever released; text that only looked like a stop string's start goes out later. */
#include <string.h>

#include "runtime/stop_text.h"
#include "tests/unit/test.h"

/* Feeds `text` in pieces of `step` bytes; returns whether it stopped, `out` what was released
 * (finish included). */
static bool feed(const char *const *stops, size_t n, const char *text, size_t step,
                 vlmc_strbuf_t *out, size_t *which) {
  vlmc_stop_text_t s;
  vlmc_stop_text_init(&s, stops, n);
  vlmc_strbuf_clear(out);
  bool stopped = false;
  for (size_t at = 0, len = strlen(text); at < len && !stopped; at += step) {
    size_t piece = len - at < step ? len - at : step;
    stopped = vlmc_stop_text_push(&s, text + at, piece, out);
  }
  vlmc_stop_text_finish(&s, out);
  *which = s.which;
  vlmc_stop_text_deinit(&s);
  return stopped;
}

static void test_every_split(void) {
  const char *stops[] = {"</answer>", "\n\nUser:"};
  const char *text = "A red square and a blue < circle.\n\nUser: more";
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  for (size_t step = 1; step <= strlen(text); ++step) {
    size_t which = 9;
    EXPECT_TRUE(feed(stops, 2, text, step, &out, &which));
    EXPECT_STREQ(vlmc_strbuf_cstr(&out), "A red square and a blue < circle.");
    EXPECT_EQ_INT(which, 1);
  }
  /* the earliest stop wins, whichever string it is */
  size_t which = 9;
  EXPECT_TRUE(feed(stops, 2, "x</answer>y\n\nUser:", 3, &out, &which));
  EXPECT_STREQ(vlmc_strbuf_cstr(&out), "x");
  EXPECT_EQ_INT(which, 0);
  vlmc_strbuf_deinit(&out);
}

/* A held-back tail that never completes is released: at the next piece or at the end. */
static void test_false_starts_are_released(void) {
  const char *stops[] = {"STOP"};
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  size_t which;
  for (size_t step = 1; step <= 6; ++step) {
    EXPECT_TRUE(!feed(stops, 1, "STOSTSTO", step, &out, &which));
    EXPECT_STREQ(vlmc_strbuf_cstr(&out), "STOSTSTO");
  }
  vlmc_stop_text_t s;
  vlmc_stop_text_init(&s, stops, 1);
  vlmc_strbuf_clear(&out);
  EXPECT_TRUE(!vlmc_stop_text_push(&s, "abST", 4, &out));
  EXPECT_STREQ(vlmc_strbuf_cstr(&out), "ab"); /* "ST" may begin STOP: held */
  EXPECT_TRUE(!vlmc_stop_text_push(&s, "x", 1, &out));
  EXPECT_STREQ(vlmc_strbuf_cstr(&out), "abSTx");
  EXPECT_TRUE(!vlmc_stop_text_push(&s, "", 0, &out));
  vlmc_stop_text_deinit(&s);
  /* no stop strings: everything passes through */
  EXPECT_TRUE(!feed(NULL, 0, "STOP here", 2, &out, &which));
  EXPECT_STREQ(vlmc_strbuf_cstr(&out), "STOP here");
  vlmc_strbuf_deinit(&out);
}

static void test_check(void) {
  const char *empty[] = {""};
  EXPECT_STREQ(vlmc_stop_text_check(empty, 1), "a stop string is empty");
  char longer[300];
  memset(longer, 'a', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  const char *too_long[] = {longer};
  EXPECT_STREQ(vlmc_stop_text_check(too_long, 1), "a stop string is longer than 256 bytes");
  const char *many[17];
  for (int i = 0; i < 17; ++i) many[i] = "x";
  EXPECT_STREQ(vlmc_stop_text_check(many, 17), "at most 16 stop strings");
  EXPECT_TRUE(vlmc_stop_text_check(many, 16) == NULL);
}

int main(void) {
  RUN_TEST(test_every_split);
  RUN_TEST(test_false_starts_are_released);
  RUN_TEST(test_check);
  return TEST_SUMMARY();
}
