/* mrope-layout: the per-frequency plane tables of each rope layout, checked slot by slot
 * against spec §4.3 (Qwen2.5-VL contiguous sections), §4.5 (Qwen3-VL interleaved) and §3.2
 * (vision 2-D), and the refusal of sections that do not fit the rotary half-width. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, dirent: the pass test helper */
#include <stdio.h>

#include "test.h"
#include "test_compiler_pass_util.h"

/* One function with a rope of the given layout over heads of head_dim, positions from
 * `planes` planes. */
static vlmc_module_t *rope_module(const char *layout_attrs, int head_dim, int planes) {
  char text[1024];
  snprintf(text, sizeof text,
           "func @f(%%x: f32[S,4,%d], %%pos: i64[%d,S]) -> f32[S,4,%d] {\n"
           "  %%r = rope %%x, %%pos {%s} : f32[S,4,%d]\n"
           "  return %%r\n"
           "}\n",
           head_dim, planes, head_dim, layout_attrs, head_dim);
  return parse_module(text);
}

/* Runs the pass and copies the planes table of the (only) rope; returns its length. */
static int resolve(vlmc_module_t *module, int64_t *planes, int capacity, vlmc_strbuf_t *log) {
  EXPECT_OK(run_passes(module, "mrope-layout", log));
  const vlmc_op_t *rope = find_op(module->funcs[0], VLMC_OP_ROPE, 0);
  const vlmc_attr_t *table = rope ? vlmc_op_attr(rope, "planes") : NULL;
  if (!table || (int)table->v.ints.count > capacity) return -1;
  memcpy(planes, table->v.ints.data, table->v.ints.count * sizeof *planes);
  return (int)table->v.ints.count;
}

static void test_sectioned_16_24_24(void) {
  vlmc_module_t *module = rope_module(
      "layout=mrope_sectioned, theta=1000000.0, sections=[16, 24, 24]", 128, 3);
  if (!module) return;
  int64_t planes[64];
  EXPECT_EQ_INT(resolve(module, planes, 64, NULL), 64);
  /* Boundaries 15/16 (t -> h) and 39/40 (h -> w). */
  EXPECT_EQ_INT(planes[0], 0);
  EXPECT_EQ_INT(planes[15], 0);
  EXPECT_EQ_INT(planes[16], 1);
  EXPECT_EQ_INT(planes[39], 1);
  EXPECT_EQ_INT(planes[40], 2);
  EXPECT_EQ_INT(planes[63], 2);
  int counts[3] = {0, 0, 0};
  for (int j = 0; j < 64; ++j) counts[planes[j]]++;
  EXPECT_EQ_INT(counts[0], 16);
  EXPECT_EQ_INT(counts[1], 24);
  EXPECT_EQ_INT(counts[2], 24);
  /* Contiguous: the plane never decreases. */
  for (int j = 1; j < 64; ++j) EXPECT_TRUE(planes[j] >= planes[j - 1]);
  vlmc_module_destroy(module);
}

static void test_interleaved_24_20_20(void) {
  vlmc_module_t *module = rope_module(
      "layout=mrope_interleaved, theta=5000000.0, sections=[24, 20, 20]", 128, 3);
  if (!module) return;
  int64_t planes[64];
  EXPECT_EQ_INT(resolve(module, planes, 64, NULL), 64);
  for (int j = 1; j <= 58; j += 3) EXPECT_EQ_INT(planes[j], 1);  /* H: 1, 4, ..., 58 */
  for (int j = 2; j <= 59; j += 3) EXPECT_EQ_INT(planes[j], 2);  /* W: 2, 5, ..., 59 */
  for (int j = 0; j <= 57; j += 3) EXPECT_EQ_INT(planes[j], 0);  /* T: 0, 3, ..., 57 */
  for (int j = 60; j < 64; ++j) EXPECT_EQ_INT(planes[j], 0);     /* and 60..63 */
  int counts[3] = {0, 0, 0};
  for (int j = 0; j < 64; ++j) counts[planes[j]]++;
  EXPECT_EQ_INT(counts[0], 24);
  EXPECT_EQ_INT(counts[1], 20);
  EXPECT_EQ_INT(counts[2], 20);
  vlmc_module_destroy(module);
}

/* The two Qwen generations put the same numbers of slots on each plane, but on different
 * slots: a backend that ignores the layout gets one of them wrong. */
static void test_sectioned_and_interleaved_differ(void) {
  vlmc_module_t *a = rope_module("layout=mrope_sectioned, theta=1.0e6, sections=[24, 20, 20]",
                                 128, 3);
  vlmc_module_t *b = rope_module("layout=mrope_interleaved, theta=1.0e6, sections=[24, 20, 20]",
                                 128, 3);
  if (!a || !b) return;
  int64_t pa[64], pb[64];
  EXPECT_EQ_INT(resolve(a, pa, 64, NULL), 64);
  EXPECT_EQ_INT(resolve(b, pb, 64, NULL), 64);
  int differ = 0;
  for (int j = 0; j < 64; ++j) differ += pa[j] != pb[j];
  EXPECT_TRUE(differ > 0);
  EXPECT_TRUE(pa[1] == 0 && pb[1] == 1); /* slot 1: temporal in Qwen2.5-VL, height in Qwen3-VL */
  vlmc_module_destroy(a);
  vlmc_module_destroy(b);
}

static void test_vision_2d_and_plain(void) {
  vlmc_module_t *vision = rope_module("layout=vision_2d, theta=10000.0", 80, 2);
  if (!vision) return;
  int64_t planes[64];
  vlmc_strbuf_t log;
  vlmc_strbuf_init(&log);
  EXPECT_EQ_INT(resolve(vision, planes, 64, &log), 40);
  for (int j = 0; j < 40; ++j) EXPECT_EQ_INT(planes[j], j < 20 ? 0 : 1);
  EXPECT_TRUE(strstr(vlmc_strbuf_cstr(&log),
                     "[mrope-layout] @f: rope vision_2d, 40 slots: row 0-19, col 20-39") != NULL);
  vlmc_strbuf_deinit(&log);
  vlmc_module_destroy(vision);

  vlmc_module_t *plain = rope_module("layout=plain, theta=10000.0, rotary_dim=32", 64, 1);
  if (!plain) return;
  EXPECT_EQ_INT(resolve(plain, planes, 64, NULL), 16);
  for (int j = 0; j < 16; ++j) EXPECT_EQ_INT(planes[j], 0);
  vlmc_module_destroy(plain);
}

static void test_refuses_bad_sections(void) {
  vlmc_module_t *module = rope_module(
      "layout=mrope_sectioned, theta=1000000.0, sections=[16, 24, 16]", 128, 3);
  if (!module) return;
  EXPECT_ERROR(run_passes(module, "mrope-layout", NULL),
               "mrope_section [16,24,16] sums to 56, rotary half-width is 64");
  vlmc_module_destroy(module);
  /* The tiny config's [2,3,3] is right for head_dim 16, wrong for 32. */
  module = rope_module("layout=mrope_sectioned, theta=1000000.0, sections=[2, 3, 3]", 32, 3);
  if (!module) return;
  EXPECT_ERROR(run_passes(module, "mrope-layout", NULL),
               "mrope_section [2,3,3] sums to 8, rotary half-width is 16");
  vlmc_module_destroy(module);
  /* Interleaving [4,10,2] over 16 slots would need height slot 28. */
  module = rope_module("layout=mrope_interleaved, theta=1.0, sections=[4, 10, 2]", 32, 3);
  if (!module) return;
  EXPECT_ERROR(run_passes(module, "mrope-layout", NULL),
               "mrope_section [4,10,2]: interleaved height/width slots run to 28/5, past the "
               "rotary half-width 16");
  vlmc_module_destroy(module);
}

static void test_idempotent_and_checks_existing_tables(void) {
  vlmc_module_t *module = rope_module(
      "layout=mrope_sectioned, theta=1.0e6, sections=[2, 3, 3]", 16, 3);
  if (!module) return;
  EXPECT_OK(run_passes(module, "mrope-layout", NULL));
  char *once = vlmc_module_to_string(module);
  EXPECT_OK(run_passes(module, "mrope-layout", NULL));
  char *twice = vlmc_module_to_string(module);
  EXPECT_STREQ(twice, once);
  EXPECT_TRUE(strstr(once, "planes=[0, 0, 1, 1, 1, 2, 2, 2]") != NULL);
  free(once);
  free(twice);
  vlmc_module_destroy(module);
  module = rope_module("layout=mrope_sectioned, theta=1.0e6, sections=[2, 3, 3], "
                       "planes=[0, 0, 0, 1, 1, 2, 2, 2]", 16, 3);
  if (!module) return;
  EXPECT_ERROR(run_passes(module, "mrope-layout", NULL),
               "the 'planes' table disagrees with layout mrope_sectioned");
  vlmc_module_destroy(module);
}

int main(void) {
  RUN_TEST(test_sectioned_16_24_24);
  RUN_TEST(test_interleaved_24_20_20);
  RUN_TEST(test_sectioned_and_interleaved_differ);
  RUN_TEST(test_vision_2d_and_plain);
  RUN_TEST(test_refuses_bad_sections);
  RUN_TEST(test_idempotent_and_checks_existing_tables);
  return TEST_SUMMARY();
}
