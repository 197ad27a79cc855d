/* support/base64.c: RFC 4648's test vectors, and the refusals vlmc-serve relies on. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "support/base64.h"
#include "tests/unit/test.h"

static bool decodes_to(const char *text, const char *want) {
  uint8_t *out = NULL;
  size_t n = 0;
  vlmc_status_t st = vlmc_base64_decode(text, strlen(text), &out, &n);
  bool ok = !st && n == strlen(want) && !memcmp(out, want, n);
  vlmc_status_free(st);
  free(out);
  return ok;
}

static bool refused(const char *text) {
  uint8_t *out = NULL;
  size_t n = 0;
  vlmc_status_t st = vlmc_base64_decode(text, strlen(text), &out, &n);
  bool ok = st != NULL && out == NULL;
  vlmc_status_free(st);
  free(out);
  return ok;
}

static void test_rfc4648_vectors(void) {
  EXPECT_TRUE(decodes_to("", ""));
  EXPECT_TRUE(decodes_to("Zg==", "f"));
  EXPECT_TRUE(decodes_to("Zm8=", "fo"));
  EXPECT_TRUE(decodes_to("Zm9v", "foo"));
  EXPECT_TRUE(decodes_to("Zm9vYg==", "foob"));
  EXPECT_TRUE(decodes_to("Zm9vYmE=", "fooba"));
  EXPECT_TRUE(decodes_to("Zm9vYmFy", "foobar"));
  EXPECT_TRUE(decodes_to("+/+/", "\xfb\xff\xbf"));
}

static void test_refusals(void) {
  EXPECT_TRUE(refused("Zm9"));       /* length */
  EXPECT_TRUE(refused("Zm9v!A=="));  /* alphabet */
  EXPECT_TRUE(refused("Zg==Zm9v"));  /* padding in the middle */
  EXPECT_TRUE(refused("Z==="));      /* too much padding */
  EXPECT_TRUE(refused("Zh=="));      /* non-zero bits after the last byte */
  EXPECT_TRUE(refused("Zm9v\nYmFy")); /* whitespace */
  EXPECT_TRUE(refused("Zm-_"));      /* the URL-safe alphabet */
}

int main(void) {
  RUN_TEST(test_rfc4648_vectors);
  RUN_TEST(test_refusals);
  return TEST_SUMMARY();
}
