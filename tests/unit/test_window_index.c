/* The window order and its inverse (ir/index_ops.c) over every merged grid to 40×40 and
 * several images (spec §3.3, §3.9), and M-RoPE positions against the spec's worked examples
 * (§4.4). The spec's exact window-order and segment lists are in test_ir_index_ops.c. */
#include <stdbool.h>
#include <stdlib.h>

#include "reference/mrope_positions.h"
#include "ir/ir.h"
#include "tests/unit/test.h"

/* Qwen2.5-VL's geometry: window 112 px, patch 14, merge 2 (k = 4 merged tokens a side). */
static vlmc_status_t qwen_order(const int64_t *grid, size_t images, int64_t **out, size_t *n) {
  return vlmc_index_window_order(grid, images, 112, 14, 2, out, n);
}

static void test_inverse_of_201_is_120(void) {
  int64_t order[] = {2, 0, 1}, inv[3];
  EXPECT_OK(vlmc_index_inverse_permutation(order, 3, inv));
  EXPECT_EQ_INT(inv[0], 1);
  EXPECT_EQ_INT(inv[1], 2);
  EXPECT_EQ_INT(inv[2], 0);
}

/* Spec §3.9: order∘inverse is the identity for every single-image merged grid up to 40×40;
 * the wrong "inverse" (the order itself) is harmless only for involutions, among them W' = 16
 * with H' mod 4 in {0, 1} (448×448 images): 20 of the 40 heights. */
static void test_order_inverse_identity_up_to_40x40(void) {
  int failures = 0, involutions_16 = 0, grids = 0;
  for (int64_t hm = 1; hm <= 40; ++hm) {
    for (int64_t wm = 1; wm <= 40; ++wm) {
      int64_t grid[3] = {1, 2 * hm, 2 * wm}, *order = NULL;
      size_t m = 0;
      vlmc_status_t s = qwen_order(grid, 1, &order, &m);
      int64_t *inv = malloc((m ? m : 1) * sizeof *inv);
      if (!s) s = vlmc_index_inverse_permutation(order, m, inv);
      if (s || m != (size_t)(hm * wm)) {
        vlmc_status_free(s);
        ++failures;
      } else {
        bool involution = true;
        for (size_t u = 0; u < m; ++u) {
          if (order[inv[u]] != (int64_t)u || inv[order[u]] != (int64_t)u) ++failures;
          if (order[order[u]] != (int64_t)u) involution = false;
        }
        if (wm == 16 && involution) ++involutions_16;
      }
      ++grids;
      free(order);
      free(inv);
    }
  }
  EXPECT_EQ_INT(grids, 1600);
  EXPECT_EQ_INT(failures, 0);
  EXPECT_EQ_INT(involutions_16, 20);
}

/* Several images (incl. the 37×37 merged grid of a 1036×1036 image, whose windows are padded):
 * the order never mixes images, and order∘inverse is the identity. */
static void test_multi_image_order_never_mixes_images(void) {
  int64_t grids[] = {1, 12, 20, 1, 8, 8, 1, 74, 74};
  int64_t *order = NULL;
  size_t m = 0;
  EXPECT_OK(qwen_order(grids, 3, &order, &m));
  EXPECT_EQ_INT(m, 60 + 16 + 37 * 37);
  int64_t *inv = malloc((m ? m : 1) * sizeof *inv);
  EXPECT_OK(vlmc_index_inverse_permutation(order, m, inv));
  int bad = 0;
  for (size_t j = 0; order && j < m; ++j) {
    if (order[inv[j]] != (int64_t)j) ++bad;
    int image_of_j = j < 60 ? 0 : j < 76 ? 1 : 2;
    int image_of_token = order[j] < 60 ? 0 : order[j] < 76 ? 1 : 2;
    if (image_of_j != image_of_token) ++bad;
  }
  EXPECT_EQ_INT(bad, 0);
  free(order);
  free(inv);
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
  RUN_TEST(test_order_inverse_identity_up_to_40x40);
  RUN_TEST(test_multi_image_order_never_mixes_images);
  RUN_TEST(test_mrope_positions_single_image);
  RUN_TEST(test_mrope_positions_two_images);
  RUN_TEST(test_mrope_positions_mismatch_is_an_error);
  return TEST_SUMMARY();
}
