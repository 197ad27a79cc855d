/* The parser's diagnostics (location, source line, caret), its limits, and robustness: every
 * prefix and thousands of mutations of real files parse or fail cleanly, and whatever parses
 * prints back to a fixed point. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "support/file.h"
#include "tests/unit/test.h"

static vlmc_status_t parse_text(const char *text, vlmc_module_t **out) {
  vlmc_parse_options_t options = {"t.vir", 0};
  return vlmc_module_parse(text, strlen(text), &options, out);
}

static void test_diagnostic_format(void) {
  vlmc_module_t *m;
  EXPECT_ERROR(parse_text("func @f(%a: f32[4]) -> f32[4] {\n  %x = add %a, %b : f32[4]\n}\n", &m),
               "t.vir:2:16: error: use of undefined value %b\n"
               "    %x = add %a, %b : f32[4]\n"
               "                 ^");
  /* Tabs stay tabs under the caret, so that it lines up in a terminal. */
  EXPECT_ERROR(parse_text("func @f() -> () {\n\t%x = bogus : f32[1]\n}\n", &m),
               "t.vir:2:7: error: unknown op 'bogus'\n  \t%x = bogus : f32[1]\n  \t     ^");
  /* first_line keeps line numbers right for --split-input-file chunks. */
  vlmc_parse_options_t options = {"big.vir", 41};
  const char *text = "\nparam @w : f32[4\n";
  EXPECT_ERROR(vlmc_module_parse(text, strlen(text), &options, &m),
               "big.vir:43:1: error: expected ',' or ']' in a shape, got end of input");
  /* Very long lines show a window around the column. */
  char *long_line = malloc(20000);
  strcpy(long_line, "func @f() -> i64[3000] {\n  %c = constant {value=[");
  for (int i = 0; i < 2999; ++i) strcat(long_line, "1, ");
  strcat(long_line, "x]} : i64[3000]\n  return %c\n}\n");
  vlmc_status_t st = parse_text(long_line, &m);
  EXPECT_TRUE(st != NULL);
  if (st) {
    const char *msg = vlmc_status_message(st);
    EXPECT_TRUE(strstr(msg, "t.vir:2:9022: error: expected a number, got 'x'") != NULL);
    EXPECT_TRUE(strstr(msg, "\n  ..., 1, 1, ") != NULL);
    EXPECT_TRUE(strlen(msg) < 400);
  }
  vlmc_status_free(st);
  free(long_line);
}

static void test_limits(void) {
  vlmc_module_t *m;
  char *ident = malloc(VLMC_IR_MAX_IDENT_BYTES + 64);
  strcpy(ident, "param @");
  memset(ident + 7, 'a', VLMC_IR_MAX_IDENT_BYTES + 1);
  strcpy(ident + 7 + VLMC_IR_MAX_IDENT_BYTES + 1, " : f32[1]\n");
  EXPECT_ERROR(parse_text(ident, &m), "token longer than 4096 bytes");
  free(ident);
  EXPECT_ERROR(parse_text("param @w : f32[1,2,3,4,5,6,7,8,9]\n", &m), "at most 8 dimensions");
  EXPECT_ERROR(parse_text("param @w : f32[18446744073709551616]\n", &m), "out of range");
  static const char with_nul[] = "param @w : f32[4]\0 trailing";
  vlmc_parse_options_t options = {"nul.vir", 0};
  EXPECT_ERROR(vlmc_module_parse(with_nul, sizeof with_nul - 1, &options, &m),
               "nul.vir:1:18: error: unexpected character '?'");
  /* Nesting cannot recurse: deep brackets are a plain syntax error. */
  char deep[4096];
  strcpy(deep, "func @f() -> () {\n  %c = constant {value=");
  memset(deep + strlen(deep), '[', 3000);
  deep[sizeof deep - 1 - 1000] = '\0';
  EXPECT_ERROR(parse_text(deep, &m), "expected a number, got '['");
}

static void test_empty_and_comments(void) {
  vlmc_module_t *m;
  EXPECT_OK(parse_text("", &m));
  EXPECT_EQ_INT(m->num_funcs + m->num_params, 0);
  vlmc_module_destroy(m);
  EXPECT_OK(parse_text("// only a comment\n\n   // and another", &m));
  char *text = vlmc_module_to_string(m);
  EXPECT_STREQ(text, "");
  free(text);
  vlmc_module_destroy(m);
}

/* Formatting does not matter to the parser; the printer gives one canonical text. */
static void test_canonical_text(void) {
  const char *a = "func @f(%x:f32[2*P/4,3]) -> (f32[P/2,3]) {%y=exp %x:f32[P/2,3]\nreturn %y}";
  const char *b = "func @f(\n  %x : f32[ P/2 , 3 ]\n) -> f32[P/2,3] {\n"
                  "  %y = exp %x : f32[P/2,3] // a comment\n  return %y\n}\n";
  vlmc_module_t *ma, *mb;
  EXPECT_OK(parse_text(a, &ma));
  EXPECT_OK(parse_text(b, &mb));
  char *ta = vlmc_module_to_string(ma), *tb = vlmc_module_to_string(mb);
  EXPECT_STREQ(ta, tb);
  EXPECT_STREQ(ta, "func @f(%x: f32[P/2,3]) -> f32[P/2,3] {\n  %y = exp %x : f32[P/2,3]\n"
                   "  return %y\n}\n");
  free(ta);
  free(tb);
  vlmc_module_destroy(ma);
  vlmc_module_destroy(mb);
}

/* Parses text; if it parses, print(parse(print)) must equal the first print. */
static int check_fixed_point(const char *text, size_t len) {
  vlmc_module_t *m;
  vlmc_status_t st = vlmc_module_parse(text, len, NULL, &m);
  if (st) {
    if (!strstr(vlmc_status_message(st), ": error: ")) TEST_FAIL_("unlocated error");
    vlmc_status_free(st);
    return 0;
  }
  vlmc_status_free(vlmc_module_verify(m));
  char *first = vlmc_module_to_string(m);
  vlmc_module_t *again;
  st = vlmc_module_parse(first, strlen(first), NULL, &again);
  if (st) {
    TEST_FAIL_("printed text does not parse: %s", vlmc_status_message(st));
    vlmc_status_free(st);
  } else {
    char *second = vlmc_module_to_string(again);
    if (strcmp(first, second) != 0) TEST_FAIL_("printing is not a fixed point:\n%s", first);
    free(second);
    vlmc_module_destroy(again);
  }
  free(first);
  vlmc_module_destroy(m);
  return 1;
}

static void test_prefixes_never_crash(void) {
  char *text;
  size_t len;
  EXPECT_OK(vlmc_file_read_all("tests/lit/example.vir", &text, &len));
  int parsed = 0;
  for (size_t n = 0; n <= len; n += 7) parsed += check_fixed_point(text, n);
  EXPECT_TRUE(parsed > 0);       /* prefixes that stop between top-level items parse */
  EXPECT_TRUE(parsed < (int)len / 7); /* and most do not */
  free(text);
}

static void test_mutations_never_crash(void) {
  char *text;
  size_t len;
  EXPECT_OK(vlmc_file_read_all("tests/lit/syntax.vir", &text, &len));
  char *copy = malloc(len + 1);
  uint64_t state = 12345;
  static const char alphabet[] = "%@[](){},:=-+*/09aPS\"\\\n #.e";
  for (int round = 0; round < 1500; ++round) {
    memcpy(copy, text, len);
    for (int k = 0; k < 4; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      size_t at = (size_t)(state >> 33) % len;
      copy[at] = alphabet[(state >> 20) % (sizeof alphabet - 1)];
    }
    check_fixed_point(copy, len);
  }
  free(copy);
  free(text);
}

int main(void) {
  RUN_TEST(test_diagnostic_format);
  RUN_TEST(test_limits);
  RUN_TEST(test_empty_and_comments);
  RUN_TEST(test_canonical_text);
  RUN_TEST(test_prefixes_never_crash);
  RUN_TEST(test_mutations_never_crash);
  return TEST_SUMMARY();
}
