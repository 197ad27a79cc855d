/* Host index computations against the model spec's worked examples (section 3). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "ir/ir.h"
#include "tests/unit/test.h"

static void expect_array(const int64_t *got, size_t got_n, const int64_t *want, size_t want_n) {
  EXPECT_EQ_INT(got_n, want_n);
  for (size_t i = 0; i < got_n && i < want_n; ++i)
    if (got[i] != want[i]) {
      TEST_FAIL_("entry %zu is %lld, expected %lld", i, (long long)got[i], (long long)want[i]);
      return;
    }
}

static void test_window_order_12x20(void) {
  static const int64_t grid[] = {1, 12, 20};
  static const int64_t want[] = {0,  1,  2,  3,  10, 11, 12, 13, 20, 21, 22, 23, 30, 31, 32,
                                 33, 4,  5,  6,  7,  14, 15, 16, 17, 24, 25, 26, 27, 34, 35,
                                 36, 37, 8,  9,  18, 19, 28, 29, 38, 39, 40, 41, 42, 43, 50,
                                 51, 52, 53, 44, 45, 46, 47, 54, 55, 56, 57, 48, 49, 58, 59};
  int64_t *order;
  size_t n;
  EXPECT_OK(vlmc_index_window_order(grid, 1, 112, 14, 2, &order, &n));
  expect_array(order, n, want, 60);
  free(order);
}

static void test_window_segments(void) {
  struct {
    int64_t grid[6];
    size_t images;
    int64_t want[10];
    size_t want_n;
  } cases[] = {
      {{1, 12, 20}, 1, {0, 64, 128, 160, 192, 224, 240}, 7},
      {{1, 16, 16}, 1, {0, 64, 128, 192, 256}, 5},
      {{1, 12, 20, 1, 8, 8}, 2, {0, 64, 128, 160, 192, 224, 240, 304}, 8},
      {{2, 8, 12}, 1, {0, 64, 96, 160, 192}, 5},
      {{1, 4, 4}, 1, {0, 16}, 2},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    int64_t *cu;
    size_t n;
    EXPECT_OK(vlmc_index_window_segments(cases[c].grid, cases[c].images, 112, 14, 2, &cu, &n));
    expect_array(cu, n, cases[c].want, cases[c].want_n);
    free(cu);
  }
}

static void test_full_segments(void) {
  static const int64_t grid[] = {1, 12, 20, 2, 8, 12};
  static const int64_t want[] = {0, 240, 336, 432};
  int64_t *cu;
  size_t n;
  EXPECT_OK(vlmc_index_full_segments(grid, 2, &cu, &n));
  expect_array(cu, n, want, 4);
  free(cu);
}

static void test_vision_positions(void) {
  static const int64_t grid[] = {1, 4, 6};
  /* Spec 3.2: (0,0),(0,1),(1,0),(1,1),(0,2),(0,3),(1,2),(1,3),(0,4),(0,5),(1,4),(1,5),(2,0)... */
  static const int64_t rows[] = {0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3};
  static const int64_t cols[] = {0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 0, 1, 0, 1};
  int64_t *pos;
  size_t n;
  EXPECT_OK(vlmc_index_vision_positions(grid, 1, 2, &pos, &n));
  EXPECT_EQ_INT(n, 48);
  if (n == 48) {
    expect_array(pos, 16, rows, 16);
    expect_array(pos + 24, 16, cols, 16);
  }
  free(pos);
}

/* transformers' fast_pos_embed_interpolate for a 4 x 4 table and one 1 x 2 x 4 image: y =
 * linspace(0, 3, 2) = (0, 3), x = linspace(0, 3, 4) = (0, 1, 2, 3): every point is on the table,
 * so corner 0 carries weight 1; and a 2 x 2 image of a 2 x 2 table (exact corners too). The
 * 1 x 2 x 6 image has x = linspace(0, 3, 6) = 0, .6, 1.2, 1.8, 2.4, 3: fractional weights. */
static void test_pos_interp(void) {
  static const int64_t grid[] = {1, 2, 4};
  int64_t *index;
  float *weight;
  size_t n;
  EXPECT_OK(vlmc_index_pos_interp(grid, 1, 4, 2, &index, &weight, &n));
  EXPECT_EQ_INT(n, 32);
  /* merge-block order: (0,0),(0,1),(3,0),(3,1),(0,2),(0,3),(3,2),(3,3) in table (y, x) */
  static const int64_t corner0[] = {0, 1, 12, 13, 2, 3, 14, 15};
  static const int64_t corner3[] = {5, 6, 13, 14, 7, 7, 15, 15};
  expect_array(index, 8, corner0, 8);
  expect_array(index + 24, 8, corner3, 8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(weight[i] == 1.0f);
    EXPECT_TRUE(weight[8 + i] == 0.0f && weight[16 + i] == 0.0f && weight[24 + i] == 0.0f);
  }
  free(index);
  free(weight);
  static const int64_t wide[] = {1, 2, 6};
  EXPECT_OK(vlmc_index_pos_interp(wide, 1, 4, 2, NULL, &weight, &n));
  EXPECT_EQ_INT(n, 48);
  /* patch 1 of block 0 is (y 0, x .6): weights (1-.6), .6, 0, 0 */
  EXPECT_TRUE(fabsf(weight[1] - 0.4f) < 1e-6f && fabsf(weight[12 + 1] - 0.6f) < 1e-6f);
  float sum = weight[3] + weight[12 + 3] + weight[24 + 3] + weight[36 + 3];
  EXPECT_TRUE(fabsf(sum - 1.0f) < 1e-6f);
  free(weight);
  static const int64_t odd[] = {1, 3, 4};
  EXPECT_ERROR(vlmc_index_pos_interp(odd, 1, 4, 2, &index, NULL, &n), "multiples of merge");
}

/* Spec 3.9: the inverse is a scatter (inv[order[j]] = j). The order of 1x12x20 is not an
 * involution, so the order itself is not its inverse; the order of 1x32x32 is one. */
static void test_inverse_and_involutions(void) {
  static const int64_t g12[] = {1, 12, 20}, g32[] = {1, 32, 32};
  int64_t *order, *inv;
  size_t n;
  EXPECT_OK(vlmc_index_window_order(g12, 1, 112, 14, 2, &order, &n));
  inv = malloc(n * sizeof *inv);
  EXPECT_OK(vlmc_index_inverse_permutation(order, n, inv));
  bool involution = true;
  for (size_t j = 0; j < n; ++j) {
    EXPECT_EQ_INT(inv[order[j]], j);
    EXPECT_EQ_INT(order[inv[j]], j);
    involution = involution && order[order[j]] == (int64_t)j;
  }
  EXPECT_TRUE(!involution);
  free(order);
  free(inv);
  EXPECT_OK(vlmc_index_window_order(g32, 1, 112, 14, 2, &order, &n));
  involution = true;
  for (size_t j = 0; j < n; ++j) involution = involution && order[order[j]] == (int64_t)j;
  EXPECT_TRUE(involution);
  free(order);
}

static void test_bad_inputs(void) {
  int64_t *out = NULL;
  size_t n;
  static const int64_t odd[] = {1, 13, 20}, zero[] = {0, 4, 4}, huge[] = {1, INT64_MAX - 1, 2};
  EXPECT_ERROR(vlmc_index_window_order(odd, 1, 112, 14, 2, &out, &n), "multiples of merge");
  EXPECT_ERROR(vlmc_index_window_segments(zero, 1, 112, 14, 2, &out, &n), "positive t, h, w");
  EXPECT_ERROR(vlmc_index_window_order(odd, 1, 100, 14, 2, &out, &n), "multiple of patch");
  EXPECT_ERROR(vlmc_index_window_order(huge, 1, 112, 14, 2, &out, &n), "more than");
  EXPECT_ERROR(vlmc_index_vision_positions(odd, 1, 0, &out, &n), "merge must be");
  int64_t inv[3];
  static const int64_t repeated[] = {0, 2, 2}, out_of_range[] = {0, 3, 1};
  EXPECT_ERROR(vlmc_index_inverse_permutation(repeated, 3, inv), "repeated");
  EXPECT_ERROR(vlmc_index_inverse_permutation(out_of_range, 3, inv), "out of range");
}

int main(void) {
  RUN_TEST(test_window_order_12x20);
  RUN_TEST(test_window_segments);
  RUN_TEST(test_full_segments);
  RUN_TEST(test_vision_positions);
  RUN_TEST(test_pos_interp);
  RUN_TEST(test_inverse_and_involutions);
  RUN_TEST(test_bad_inputs);
  return TEST_SUMMARY();
}
