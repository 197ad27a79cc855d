/* Host index ops evaluated at run time: the spec's worked examples (§3.3, §3.2), the binding of
 * a data-dependent length to its symbol, the check of a declared length that disagrees, token
 * positions, and the inverse permutation's refusal of a non-permutation. */
#include "tests/unit/test_reference_util.h"

static const char *kGridText =
    "func @f(%grid: i64[N, 3]) -> (i64[M], i64[W], i64[F], i64[M]) {\n"
    "  %order = window_order %grid {window = 112, patch = 14, merge = 2} : i64[M]\n"
    "  %cu = window_segments %grid {window = 112, patch = 14, merge = 2} : i64[W]\n"
    "  %full = full_segments %grid : i64[F]\n"
    "  %inv = inverse_permutation %order : i64[M]\n"
    "  return %order, %cu, %full, %inv\n"
    "}\n"
    "func @pos(%grid: i64[N, 3]) -> i64[2, P] {\n"
    "  %rc = vision_positions %grid {merge = 2} : i64[2, P]\n"
    "  return %rc\n"
    "}\n";

static void test_window_index_spec_examples(void) {
  int64_t grid[] = {1, 12, 20};
  vlmc_tensor_t args[] = {ref_i64(2, SHAPE(1, 3), grid)}, r[4];
  EXPECT_OK(ref_run(kGridText, NULL, "f", args, 1, r, 4));
  static const int64_t order[60] = {
      0,  1,  2,  3,  10, 11, 12, 13, 20, 21, 22, 23, 30, 31, 32, 33, 4,  5,  6,  7,
      14, 15, 16, 17, 24, 25, 26, 27, 34, 35, 36, 37, 8,  9,  18, 19, 28, 29, 38, 39,
      40, 41, 42, 43, 50, 51, 52, 53, 44, 45, 46, 47, 54, 55, 56, 57, 48, 49, 58, 59};
  ref_expect_i64(&r[0], order, 60, "window_index (1,12,20)");
  ref_expect_i64(&r[1], (int64_t[]){0, 64, 128, 160, 192, 224, 240}, 7, "cu_window (1,12,20)");
  ref_expect_i64(&r[2], (int64_t[]){0, 240}, 2, "cu_full (1,12,20)");
  bool inverse = r[3].data != NULL;
  for (int j = 0; inverse && j < 60; ++j) inverse = vlmc_tensor_i64(&r[3])[order[j]] == j;
  EXPECT_TRUE(inverse);
  ref_release_all(r, 4);
}

static void test_window_segments_several_images_and_video(void) {
  int64_t two[] = {1, 12, 20, 1, 8, 8}, video[] = {2, 8, 12};
  vlmc_tensor_t a1[] = {ref_i64(2, SHAPE(2, 3), two)}, a2[] = {ref_i64(2, SHAPE(1, 3), video)};
  vlmc_tensor_t r[4];
  EXPECT_OK(ref_run(kGridText, NULL, "f", a1, 1, r, 4));
  ref_expect_i64(&r[1], (int64_t[]){0, 64, 128, 160, 192, 224, 240, 304}, 8, "two images");
  ref_expect_i64(&r[2], (int64_t[]){0, 240, 304}, 3, "full, two images");
  ref_release_all(r, 4);
  EXPECT_OK(ref_run(kGridText, NULL, "f", a2, 1, r, 4));
  ref_expect_i64(&r[1], (int64_t[]){0, 64, 96, 160, 192}, 5, "video (2,8,12)");
  ref_expect_i64(&r[2], (int64_t[]){0, 96, 192}, 3, "full, per frame");
  ref_release_all(r, 4);
}

static void test_vision_positions_example(void) {
  int64_t grid[] = {1, 4, 6};
  vlmc_tensor_t args[] = {ref_i64(2, SHAPE(1, 3), grid)}, r[1];
  EXPECT_OK(ref_run(kGridText, NULL, "pos", args, 1, r, 1));
  ref_expect_shape(&r[0], 2, SHAPE(2, 24), "positions");
  /* (row, col): (0,0),(0,1),(1,0),(1,1),(0,2),(0,3),(1,2),(1,3),(0,4),(0,5),(1,4),(1,5),
   * (2,0),(2,1),(3,0),(3,1),... */
  if (r[0].data) {
    const int64_t *rows = vlmc_tensor_i64(&r[0]), *cols = rows + 24;
    static const int64_t er[16] = {0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3};
    static const int64_t ec[16] = {0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 0, 1, 0, 1};
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ_INT(rows[i], er[i]);
      EXPECT_EQ_INT(cols[i], ec[i]);
    }
  }
  ref_release_all(r, 1);
}

/* P bound by the argument: the host op's declared length P/4 is checked, not bound. */
static void test_declared_length_is_checked(void) {
  const char *text =
      "func @f(%x: f32[P, 2], %grid: i64[N, 3]) -> i64[P/4] {\n"
      "  %order = window_order %grid {window = 112, patch = 14, merge = 2} : i64[P/4]\n"
      "  return %order\n"
      "}\n";
  int64_t grid[] = {1, 12, 20};
  float x[2 * 236] = {0};
  vlmc_tensor_t good[] = {ref_f32(2, SHAPE(240, 2), x), ref_i64(2, SHAPE(1, 3), grid)}, r[1];
  EXPECT_OK(ref_run(text, NULL, "f", good, 2, r, 1));
  ref_release_all(r, 1);
  vlmc_tensor_t bad[] = {ref_f32(2, SHAPE(236, 2), x), ref_i64(2, SHAPE(1, 3), grid)};
  EXPECT_ERROR(ref_run(text, NULL, "f", bad, 2, r, 1),
               "'window_order' op: computed 60 entries, but the declared type i64[P/4] has 59 "
               "there (P = 236)");
}

static void test_token_positions_and_scatter(void) {
  const char *text =
      "func @f(%ids: i64[S], %emb: f32[S, 2], %img: f32[K, 2]) -> f32[S, 2] {\n"
      "  %pos = token_positions %ids {token = 500} : i64[K]\n"
      "  %out = scatter_rows %emb, %img, %pos : f32[S, 2]\n"
      "  return %out\n"
      "}\n";
  int64_t ids[] = {1, 500, 7, 500, 500};
  float emb[10] = {0}, img[] = {1, 2, 3, 4, 5, 6};
  vlmc_tensor_t args[] = {ref_i64(1, SHAPE(5), ids), ref_f32(2, SHAPE(5, 2), emb),
                          ref_f32(2, SHAPE(3, 2), img)};
  vlmc_tensor_t r[1];
  EXPECT_OK(ref_run(text, NULL, "f", args, 3, r, 1));
  ref_expect_f32(&r[0], (float[]){0, 0, 1, 2, 0, 0, 3, 4, 5, 6}, 10, 0, "image rows scattered");
  ref_release_all(r, 1);
  /* Two pad tokens but three image rows: K is bound to 3 by %img, the op finds 2. */
  int64_t short_ids[] = {1, 500, 7, 500, 2};
  vlmc_tensor_t a2[] = {ref_i64(1, SHAPE(5), short_ids), ref_f32(2, SHAPE(5, 2), emb),
                        ref_f32(2, SHAPE(3, 2), img)};
  EXPECT_ERROR(ref_run(text, NULL, "f", a2, 3, r, 1),
               "'token_positions' op: computed 2 entries, but the declared type i64[K] has 3");
}

static void test_inverse_permutation_refuses_non_permutations(void) {
  const char *text =
      "func @f(%p: i64[M]) -> i64[M] {\n"
      "  %inv = inverse_permutation %p : i64[M]\n"
      "  return %inv\n"
      "}\n";
  int64_t perm[] = {2, 0, 1}, repeated[] = {0, 1, 1};
  vlmc_tensor_t a1[] = {ref_i64(1, SHAPE(3), perm)}, r[1];
  EXPECT_OK(ref_run(text, NULL, "f", a1, 1, r, 1));
  ref_expect_i64(&r[0], (int64_t[]){1, 2, 0}, 3, "inverse of [2, 0, 1]");
  ref_release_all(r, 1);
  vlmc_tensor_t a2[] = {ref_i64(1, SHAPE(3), repeated)};
  EXPECT_ERROR(ref_run(text, NULL, "f", a2, 1, r, 1),
               "'inverse_permutation' op: not a permutation of 0..2: entry 2 is 1 (repeated)");
}

static void test_bad_grid_is_an_error(void) {
  int64_t zero[] = {1, 0, 4}, odd[] = {1, 3, 4};
  vlmc_tensor_t a1[] = {ref_i64(2, SHAPE(1, 3), zero)}, a2[] = {ref_i64(2, SHAPE(1, 3), odd)};
  vlmc_tensor_t r[4];
  EXPECT_ERROR(ref_run(kGridText, NULL, "f", a1, 1, r, 4), "'window_order' op: grid row 0 is");
  EXPECT_ERROR(ref_run(kGridText, NULL, "pos", a2, 1, r, 1),
               "expected positive t, h, w with h and w multiples of merge 2");
}

int main(void) {
  RUN_TEST(test_window_index_spec_examples);
  RUN_TEST(test_window_segments_several_images_and_video);
  RUN_TEST(test_vision_positions_example);
  RUN_TEST(test_declared_length_is_checked);
  RUN_TEST(test_token_positions_and_scatter);
  RUN_TEST(test_inverse_permutation_refuses_non_permutations);
  RUN_TEST(test_bad_grid_is_an_error);
  return TEST_SUMMARY();
}
