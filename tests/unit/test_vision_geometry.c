/* Window order, segments, inverse and M-RoPE positions against the spec's worked examples
 * (spec §3.3, §3.9, §4.4), and the order∘inverse identity over every merged grid to 40×40. */
#include <stdbool.h>
#include <stdlib.h>

#include "reference/mrope_positions.h"
#include "reference/vision_geometry.h"
#include "tests/unit/test.h"

static const vlmc_window_geometry_t kQwen = {.merge = 2, .window_side = 4};

static void expect_array(const int64_t *actual, const int64_t *expected, size_t n, const char *what) {
  for (size_t i = 0; i < n; ++i)
    if (actual[i] != expected[i]) {
      TEST_FAIL_("%s[%zu] = %lld, expected %lld", what, i, (long long)actual[i],
                 (long long)expected[i]);
      return;
    }
}

static void test_inverse_of_201_is_120(void) {
  int64_t order[] = {2, 0, 1}, inv[3];
  EXPECT_OK(vlmc_permutation_inverse(order, 3, inv));
  int64_t expected[] = {1, 2, 0};
  expect_array(inv, expected, 3, "inverse");
}

static void test_inverse_refuses_non_permutations(void) {
  int64_t repeated[] = {0, 1, 1}, out_of_range[] = {0, 3, 1}, inv[3];
  EXPECT_ERROR(vlmc_permutation_inverse(repeated, 3, inv), "repeats entry [1]");
  EXPECT_ERROR(vlmc_permutation_inverse(out_of_range, 3, inv), "[1] = 3 is outside 0..2");
}

static void test_window_order_grid_1x12x20(void) {
  vlmc_grid_thw_t grid = {1, 12, 20};
  int64_t order[60];
  EXPECT_OK(vlmc_window_order(&grid, 1, kQwen, order));
  static const int64_t expected[60] = {
      0,  1,  2,  3,  10, 11, 12, 13, 20, 21, 22, 23, 30, 31, 32, 33, 4,  5,  6,  7,
      14, 15, 16, 17, 24, 25, 26, 27, 34, 35, 36, 37, 8,  9,  18, 19, 28, 29, 38, 39,
      40, 41, 42, 43, 50, 51, 52, 53, 44, 45, 46, 47, 54, 55, 56, 57, 48, 49, 58, 59};
  expect_array(order, expected, 60, "window_index");
  int64_t cu[61];
  size_t len = 0;
  EXPECT_OK(vlmc_window_segments(&grid, 1, kQwen, cu, &len));
  static const int64_t expected_cu[] = {0, 64, 128, 160, 192, 224, 240};
  EXPECT_EQ_INT(len, 7);
  expect_array(cu, expected_cu, 7, "cu_window");
}

static void test_window_segments_spec_examples(void) {
  int64_t cu[400];
  size_t len = 0;
  vlmc_grid_thw_t g16 = {1, 16, 16};
  EXPECT_OK(vlmc_window_segments(&g16, 1, kQwen, cu, &len));
  static const int64_t e16[] = {0, 64, 128, 192, 256};
  EXPECT_EQ_INT(len, 5);
  expect_array(cu, e16, 5, "cu(1,16,16)");

  vlmc_grid_thw_t two[] = {{1, 12, 20}, {1, 8, 8}};
  EXPECT_OK(vlmc_window_segments(two, 2, kQwen, cu, &len));
  static const int64_t etwo[] = {0, 64, 128, 160, 192, 224, 240, 304};
  EXPECT_EQ_INT(len, 8);
  expect_array(cu, etwo, 8, "cu(two images)");

  vlmc_grid_thw_t video = {2, 8, 12};
  EXPECT_OK(vlmc_window_segments(&video, 1, kQwen, cu, &len));
  static const int64_t evideo[] = {0, 64, 96, 160, 192};
  EXPECT_EQ_INT(len, 5);
  expect_array(cu, evideo, 5, "cu(video 2x8x12)");

  EXPECT_OK(vlmc_full_segments(two, 2, cu, &len));
  static const int64_t efull[] = {0, 240, 304};
  EXPECT_EQ_INT(len, 3);
  expect_array(cu, efull, 3, "cu_full");
}

/* Spec §3.9: order∘inverse is the identity for every grid; the wrong "inverse" (the order
 * itself) is harmless only for involutions such as 16×16 merged (448×448 images). */
static void test_order_inverse_identity_up_to_40x40(void) {
  int64_t *order = malloc(sizeof(int64_t) * 1600), *inv = malloc(sizeof(int64_t) * 1600);
  int failures = 0, involutions_16 = 0;
  for (int64_t hm = 1; hm <= 40; ++hm) {
    for (int64_t wm = 1; wm <= 40; ++wm) {
      vlmc_grid_thw_t grid = {1, 2 * hm, 2 * wm};
      size_t m = (size_t)(hm * wm);
      vlmc_status_t s = vlmc_window_order(&grid, 1, kQwen, order);
      if (!s) s = vlmc_permutation_inverse(order, m, inv);
      if (s) {
        vlmc_status_free(s);
        ++failures;
        continue;
      }
      bool involution = true;
      for (size_t u = 0; u < m; ++u) {
        if (order[inv[u]] != (int64_t)u || inv[order[u]] != (int64_t)u) ++failures;
        if (order[order[u]] != (int64_t)u) involution = false;
      }
      if (wm == 16 && involution) ++involutions_16;
    }
  }
  EXPECT_EQ_INT(failures, 0);
  /* W' = 16 is an involution exactly when H' mod 4 is 0 or 1: 20 of the 40 heights. */
  EXPECT_EQ_INT(involutions_16, 20);
  free(order);
  free(inv);
}

static void test_multi_image_order_never_mixes_images(void) {
  vlmc_grid_thw_t grids[] = {{1, 12, 20}, {1, 8, 8}, {1, 74, 74}};
  int64_t patches, merged;
  EXPECT_OK(vlmc_grids_count(grids, 3, 2, &patches, &merged));
  EXPECT_EQ_INT(merged, 60 + 16 + 37 * 37);
  int64_t *order = malloc(sizeof(int64_t) * (size_t)merged);
  int64_t *inv = malloc(sizeof(int64_t) * (size_t)merged);
  EXPECT_OK(vlmc_window_order(grids, 3, kQwen, order));
  EXPECT_OK(vlmc_permutation_inverse(order, (size_t)merged, inv));
  for (int64_t j = 0; j < 60; ++j) EXPECT_TRUE(order[j] < 60);
  for (int64_t j = 60; j < 76; ++j) EXPECT_TRUE(order[j] >= 60 && order[j] < 76);
  free(order);
  free(inv);
}

static void test_patch_positions_grid_1x4x6(void) {
  vlmc_grid_thw_t grid = {1, 4, 6};
  int64_t rc[48];
  EXPECT_OK(vlmc_vision_patch_positions(&grid, 1, 2, rc));
  static const int64_t expected[] = {0, 0, 0, 1, 1, 0, 1, 1, 0, 2, 0, 3, 1, 2, 1, 3,
                                     0, 4, 0, 5, 1, 4, 1, 5, 2, 0, 2, 1, 3, 0, 3, 1};
  expect_array(rc, expected, 32, "rc");
}

static void test_grid_errors_are_named(void) {
  vlmc_grid_thw_t odd = {1, 13, 20};
  int64_t order[100];
  EXPECT_ERROR(vlmc_window_order(&odd, 1, kQwen, order), "multiples of the merge size 2");
  vlmc_grid_thw_t zero = {1, 0, 20};
  EXPECT_ERROR(vlmc_window_order(&zero, 1, kQwen, order), "must be positive");
}

/* Spec §4.4 worked example: the §5.2 prompt with one 448×448 image. */
static void test_mrope_positions_single_image(void) {
  int64_t ids[281];
  size_t n = 0;
  for (int i = 0; i < 15; ++i) ids[n++] = 100 + i; /* through <|vision_start|> */
  for (int i = 0; i < 256; ++i) ids[n++] = 151655;
  for (int i = 0; i < 10; ++i) ids[n++] = 200 + i;
  vlmc_grid_thw_t grid = {1, 32, 32};
  vlmc_mrope_config_t config = {.image_token_id = 151655, .video_token_id = 151656, .merge = 2};
  int64_t pos[3 * 281], delta = 0;
  EXPECT_OK(vlmc_mrope_position_ids(ids, n, &grid, 1, config, pos, &delta));
  EXPECT_EQ_INT(delta, -240);
  EXPECT_EQ_INT(pos[14], 14);
  EXPECT_EQ_INT(pos[15], 15);           /* T of first image token */
  EXPECT_EQ_INT(pos[281 + 15 + 17], 16); /* H of token (r=1, c=1) */
  EXPECT_EQ_INT(pos[2 * 281 + 15 + 17], 16);
  EXPECT_EQ_INT(pos[2 * 281 + 15 + 255], 30);
  EXPECT_EQ_INT(pos[271], 31);
  EXPECT_EQ_INT(pos[280], 40);
}

static void test_mrope_positions_two_images(void) {
  int64_t ids[133];
  size_t n = 0;
  for (int i = 0; i < 3; ++i) ids[n++] = 1;
  for (int i = 0; i < 64; ++i) ids[n++] = 151655;
  for (int i = 0; i < 3; ++i) ids[n++] = 2;
  for (int i = 0; i < 60; ++i) ids[n++] = 151655;
  for (int i = 0; i < 3; ++i) ids[n++] = 3;
  vlmc_grid_thw_t grids[] = {{1, 16, 16}, {1, 12, 20}};
  vlmc_mrope_config_t config = {.image_token_id = 151655, .video_token_id = 151656, .merge = 2};
  int64_t pos[3 * 133], delta = 0;
  EXPECT_OK(vlmc_mrope_position_ids(ids, n, grids, 2, config, pos, &delta));
  EXPECT_EQ_INT(delta, -106);
  EXPECT_EQ_INT(pos[67], 11);
  EXPECT_EQ_INT(pos[70], 14);                /* second image T */
  EXPECT_EQ_INT(pos[133 + 70 + 59], 19);     /* H of its last token */
  EXPECT_EQ_INT(pos[2 * 133 + 70 + 59], 23); /* W of its last token */
  EXPECT_EQ_INT(pos[132], 26);
}

static void test_mrope_positions_mismatch_is_an_error(void) {
  int64_t ids[] = {1, 151655, 151655, 2};
  vlmc_grid_thw_t grid = {1, 4, 4}; /* needs 4 tokens */
  vlmc_mrope_config_t config = {.image_token_id = 151655, .video_token_id = 151656, .merge = 2};
  int64_t pos[12], delta;
  EXPECT_ERROR(vlmc_mrope_position_ids(ids, 4, &grid, 1, config, pos, &delta),
               "needs 4 consecutive image tokens");
  EXPECT_ERROR(vlmc_mrope_position_ids(ids, 1, &grid, 1, config, pos, &delta),
               "1 images given but the prompt holds 0 image blocks");
}

int main(void) {
  RUN_TEST(test_inverse_of_201_is_120);
  RUN_TEST(test_inverse_refuses_non_permutations);
  RUN_TEST(test_window_order_grid_1x12x20);
  RUN_TEST(test_window_segments_spec_examples);
  RUN_TEST(test_order_inverse_identity_up_to_40x40);
  RUN_TEST(test_multi_image_order_never_mixes_images);
  RUN_TEST(test_patch_positions_grid_1x4x6);
  RUN_TEST(test_grid_errors_are_named);
  RUN_TEST(test_mrope_positions_single_image);
  RUN_TEST(test_mrope_positions_two_images);
  RUN_TEST(test_mrope_positions_mismatch_is_an_error);
  return TEST_SUMMARY();
}
