/* The cpu backend never interprets: an executor with a dispatch hook refuses a compute op
 * outside regions. (The kernel table itself, malformed tables and a region without a kernel
 * included, is tested through the artifact layer: test_kernel_table.c.) */
#include <stdlib.h>
#include <string.h>

#include "reference/executor.h"
#include "tests/unit/test.h"

static vlmc_module_t *parse(const char *text) {
  vlmc_module_t *m = NULL;
  vlmc_parse_options_t po = {.filename = "program", .first_line = 1};
  EXPECT_OK(vlmc_module_parse(text, strlen(text), &po, &m));
  return m;
}

static vlmc_status_t never_called(void *ctx, const vlmc_func_t *func, uint32_t region,
                                  vlmc_tensor_t *const *inputs, const bool *may_take,
                                  uint32_t num_inputs, const int64_t *symbols,
                                  vlmc_tensor_t *out) {
  return vlmc_status_make(VLMC_INTERNAL, "the dispatch hook was called");
}

/* With a dispatch hook, a compute op outside every region is an error, not interpreted. */
static void test_no_interpreter_fallback(void) {
  vlmc_module_t *m = parse("func @k(%x: f32[4]) -> f32[4] {\n"
                           "  %a = exp %x : f32[4]\n"
                           "  return %a\n"
                           "}\n");
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.on_dispatch = never_called;
  vlmc_executor_t *ex = NULL;
  EXPECT_OK(vlmc_executor_create(m, &o, &ex));
  float x[4] = {1, 2, 3, 4};
  vlmc_tensor_t arg = vlmc_tensor_view(VLMC_DTYPE_F32, 1, (const int64_t[]){4}, x), res;
  vlmc_status_t st = ex ? vlmc_executor_run(ex, "k", &arg, 1, &res, 1) : NULL;
  EXPECT_TRUE(st && strstr(vlmc_status_message(st), "no kernel") &&
              strstr(vlmc_status_message(st), "'exp'"));
  vlmc_status_free(st);
  vlmc_executor_destroy(ex);
  vlmc_module_destroy(m);
}

int main(void) {
  RUN_TEST(test_no_interpreter_fallback);
  return TEST_SUMMARY();
}
