/* The cpu kernel table (section "kernels.cpu.json"): a valid table checks out against its
 * program; every malformed one is refused with a message naming the section, the field and
 * what was expected; a program region without a kernel is refused at load (never run by the
 * interpreter). (The walker's refusal of a compute op outside regions: test_runtime_backends.) */
#include <stdlib.h>
#include <string.h>

#include "runtime/backends/cpu/cpu_backend.h"
#include "tests/unit/cpu_table_util.h"
#include "tests/unit/test.h"

static vlmc_module_t *parse(const char *text) {
  vlmc_module_t *m = NULL;
  vlmc_parse_options_t po = {.filename = "program", .first_line = 1};
  EXPECT_OK(vlmc_module_parse(text, strlen(text), &po, &m));
  return m;
}

/* The valid table with `from` replaced by `to` (which must occur). */
static vlmc_status_t check_edited(const vlmc_module_t *m, const char *from, const char *to) {
  const char *at = strstr(kValidTable, from);
  EXPECT_TRUE(at != NULL);
  if (!at) return vlmc_status_make(VLMC_INTERNAL, "test bug: '%s' not in the table", from);
  size_t n = strlen(kValidTable) + strlen(to) + 1;
  char *text = malloc(n);
  size_t head = (size_t)(at - kValidTable);
  memcpy(text, kValidTable, head);
  strcpy(text + head, to);
  strcat(text, at + strlen(from));
  vlmc_status_t st = vlmc_cpu_table_check("m.vlmc", text, strlen(text), m);
  free(text);
  return st;
}

static void test_valid_table(void) {
  vlmc_module_t *m = parse(kTableProgram);
  EXPECT_OK(vlmc_cpu_table_check("m.vlmc", kValidTable, strlen(kValidTable), m));
  vlmc_module_destroy(m);
}

static void test_malformed_tables(void) {
  vlmc_module_t *m = parse(kTableProgram);
  static const struct { const char *from, *to, *needle; } cases[] = {
      {"\"format\": 1", "\"format\": 2", "format"},
      {"\"format\": 1", "\"formt\": 1", "format"},
      {"[\"f32\", \"f32\"]", "[\"f32\", \"q4\"]", "expected f32, bf16, f16 or i64, got 'q4'"},
      {"\"output\": \"f32\", \"syms\": [\"S\"]", "\"output\": 7, \"syms\": [\"S\"]", "output"},
      {"\"syms\": [\"S\"]", "\"syms\": [\"T\"]", "symbol 'T' is not in the program"},
      {"\"cost\": 2", "\"cost\": -2", "cost"},
      {"\"func\": \"k\", \"dispatch\": 1", "\"func\": \"q\", \"dispatch\": 1", "no function @q"},
      {"\"dispatch\": 2", "\"dispatch\": 3", "dispatch"},
      {"\"kernel\": 1", "\"kernel\": 5", "kernel"},
      {"\"kernel\": 1", "\"kernel\": 0", "kernel vk0 takes 2 inputs, @k dispatch 2 has 1"},
      {"\"den\": 1, \"off\": 0", "\"den\": 0, \"off\": 0", "den"},
      {"\"scale\": 1}},", "\"scale\": \"1\"}},", "scale"},
      {"\"kernels\": [", "\"kernels\": {", "kernels"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    vlmc_status_t st = check_edited(m, cases[i].from, cases[i].to);
    const char *msg = st ? vlmc_status_message(st) : "(accepted)";
    if (!st || !strstr(msg, cases[i].needle) || !strstr(msg, "kernels.cpu.json"))
      TEST_FAIL_("case %zu (%s -> %s): got \"%s\", expected a refusal naming '%s'", i,
                 cases[i].from, cases[i].to, msg, cases[i].needle);
    vlmc_status_free(st);
  }
  vlmc_module_destroy(m);
}

/* A table that leaves a region without a kernel is refused when it is loaded. */
static void test_uncovered_region_is_refused(void) {
  vlmc_module_t *m = parse(kTableProgram);
  const char *cut = strstr(kValidTable, ",\n {\"func\": \"k\", \"dispatch\": 2");
  size_t head = (size_t)(cut - kValidTable);
  char text[2048];
  snprintf(text, sizeof text, "%.*s]}", (int)head, kValidTable);
  vlmc_status_t st = vlmc_cpu_table_check("m.vlmc", text, strlen(text), m);
  EXPECT_TRUE(st && strstr(vlmc_status_message(st), "no kernel for @k dispatch 2"));
  vlmc_status_free(st);
  vlmc_module_destroy(m);
}

int main(void) {
  RUN_TEST(test_valid_table);
  RUN_TEST(test_malformed_tables);
  RUN_TEST(test_uncovered_region_is_refused);
  return TEST_SUMMARY();
}
