/* A minimal unit-test harness: one executable per test file, one line per failure with
 * file:line, and a closing "N passed, N failed" line.
 *
 *   static void test_inverse(void) { EXPECT_EQ_INT(inv[0], 1); }
 *   int main(void) { RUN_TEST(test_inverse); return TEST_SUMMARY(); }
 */
#ifndef VLMC_TESTS_UNIT_TEST_H
#define VLMC_TESTS_UNIT_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "support/status.h"

static int test_failures_in_current_ = 0;
static int test_passed_ = 0;
static int test_failed_ = 0;

#define TEST_FAIL_(...)                                  \
  do {                                                   \
    fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                        \
    fprintf(stderr, "\n");                               \
    ++test_failures_in_current_;                         \
  } while (0)

#define EXPECT_TRUE(cond) \
  do {                    \
    if (!(cond)) TEST_FAIL_("expected %s", #cond); \
  } while (0)

#define EXPECT_EQ_INT(actual, expected)                                                   \
  do {                                                                                    \
    long long a_ = (long long)(actual), e_ = (long long)(expected);                       \
    if (a_ != e_) TEST_FAIL_("%s == %lld, expected %s == %lld", #actual, a_, #expected, e_); \
  } while (0)

#define EXPECT_NEAR(actual, expected, tol)                                                \
  do {                                                                                    \
    double a_ = (double)(actual), e_ = (double)(expected);                                \
    if (!(fabs(a_ - e_) <= (tol))) TEST_FAIL_("%s == %.9g, expected %.9g (tol %g)", #actual, a_, e_, (double)(tol)); \
  } while (0)

#define EXPECT_STREQ(actual, expected)                                                    \
  do {                                                                                    \
    const char *a_ = (actual), *e_ = (expected);                                          \
    if (!a_ || !e_ || strcmp(a_, e_) != 0)                                                \
      TEST_FAIL_("%s == \"%s\", expected \"%s\"", #actual, a_ ? a_ : "(null)", e_ ? e_ : "(null)"); \
  } while (0)

/* Consumes the status. */
#define EXPECT_OK(expr)                                                                   \
  do {                                                                                    \
    vlmc_status_t s_ = (expr);                                                            \
    if (s_) TEST_FAIL_("%s failed: %s", #expr, vlmc_status_message(s_));                  \
    vlmc_status_free(s_);                                                                 \
  } while (0)

/* Expects an error whose message contains `needle`. Consumes the status. */
#define EXPECT_ERROR(expr, needle)                                                        \
  do {                                                                                    \
    vlmc_status_t s_ = (expr);                                                            \
    if (!s_) TEST_FAIL_("%s succeeded, expected an error containing \"%s\"", #expr, (needle)); \
    else if (!strstr(vlmc_status_message(s_), (needle)))                                  \
      TEST_FAIL_("%s: error \"%s\" does not contain \"%s\"", #expr, vlmc_status_message(s_), (needle)); \
    vlmc_status_free(s_);                                                                 \
  } while (0)

#define RUN_TEST(fn)                                   \
  do {                                                 \
    test_failures_in_current_ = 0;                     \
    fn();                                              \
    if (test_failures_in_current_) {                   \
      ++test_failed_;                                  \
      fprintf(stderr, "[FAILED] %s\n", #fn);           \
    } else {                                           \
      ++test_passed_;                                  \
    }                                                  \
  } while (0)

#define TEST_SUMMARY() \
  (printf("%d passed, %d failed\n", test_passed_, test_failed_), test_failed_ ? 1 : 0)

#endif
