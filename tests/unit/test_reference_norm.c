/* rms_norm, layer_norm and softmax against hand-computed values and loops written here. */
#include "tests/unit/test_reference_util.h"

static void test_rms_norm_by_hand(void) {
  const char *text =
      "func @f(%x: f32[2, 2], %w: f32[2]) -> f32[2, 2] {\n"
      "  %y = rms_norm %x, %w {eps = 0.0} : f32[2, 2]\n"
      "  return %y\n"
      "}\n";
  /* Row [3, 4]: mean square 12.5, rms 3.5355339. Row [0, 0] with eps 0 gives 0 * inf = NaN,
   * as transformers would. */
  float x[] = {3, 4, 0, 0}, w[] = {1, 2};
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(2, 2), x), ref_f32(1, SHAPE(2), w)}, r[1];
  EXPECT_OK(ref_run(text, NULL, "f", args, 2, r, 1));
  ref_expect_f32(&r[0], (float[]){0.848528137f, 2.26274170f, NAN, NAN}, 4, 1e-6, "rms_norm");
  ref_release_all(r, 1);
}

static void test_rms_norm_awkward_rows(void) {
  const char *text =
      "func @f(%x: f32[37, 172], %w: f32[172]) -> f32[37, 172] {\n"
      "  %y = rms_norm %x, %w {eps = 1e-06} : f32[37, 172]\n"
      "  return %y\n"
      "}\n";
  float *x = ref_rand_array(37 * 172, 11), *w = ref_rand_array(172, 12);
  float *expected = malloc(sizeof(float) * 37 * 172);
  for (int r = 0; r < 37; ++r) {
    double ss = 0;
    for (int i = 0; i < 172; ++i) ss += (double)x[r * 172 + i] * x[r * 172 + i];
    double inv = 1.0 / sqrt(ss / 172 + 1e-6);
    for (int i = 0; i < 172; ++i) expected[r * 172 + i] = (float)(x[r * 172 + i] * inv * w[i]);
  }
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(37, 172), x), ref_f32(1, SHAPE(172), w)}, r[1];
  EXPECT_OK(ref_run(text, NULL, "f", args, 2, r, 1));
  ref_expect_f32(&r[0], expected, 37 * 172, 1e-6, "rms_norm 37x172");
  ref_release_all(r, 1);
  free(x);
  free(w);
  free(expected);
}

static void test_layer_norm_with_and_without_bias(void) {
  const char *text =
      "func @f(%x: f32[2, 4], %w: f32[4], %b: f32[4]) -> (f32[2, 4], f32[2, 4]) {\n"
      "  %y = layer_norm %x, %w, %b {eps = 0.0} : f32[2, 4]\n"
      "  %z = layer_norm %x, %w {eps = 1.0} : f32[2, 4]\n"
      "  return %y, %z\n"
      "}\n";
  /* Row [1, 2, 3, 4]: mean 2.5, variance 1.25. Row [5, 5, 5, 5] with eps 1: all 0. */
  float x[] = {1, 2, 3, 4, 5, 5, 5, 5}, w[] = {1, 1, 2, 2}, b[] = {0, 1, 0, 1};
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(2, 4), x), ref_f32(1, SHAPE(4), w),
                          ref_f32(1, SHAPE(4), b)};
  vlmc_tensor_t r[2];
  EXPECT_OK(ref_run(text, NULL, "f", args, 3, r, 2));
  float s = 1.0f / sqrtf(1.25f);
  ref_expect_f32(&r[0], (float[]){-1.5f * s, -0.5f * s + 1, 1.0f * s, 3.0f * s + 1, NAN, NAN, NAN,
                                  NAN}, 8, 1e-6, "layer_norm eps 0");
  float t = 1.0f / sqrtf(2.25f);
  ref_expect_f32(&r[1], (float[]){-1.5f * t, -0.5f * t, 1.0f * t, 3.0f * t, 0, 0, 0, 0}, 8, 1e-6,
                 "layer_norm eps 1");
  ref_release_all(r, 2);
}

static void test_softmax_axes_and_large_values(void) {
  const char *text =
      "func @f(%x: f32[2, 3]) -> (f32[2, 3], f32[2, 3]) {\n"
      "  %a = softmax %x {axis = 1} : f32[2, 3]\n"
      "  %b = softmax %x {axis = 0} : f32[2, 3]\n"
      "  return %a, %b\n"
      "}\n";
  float x[] = {1000, 1001, 1002, 0, 0, -INFINITY};
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(2, 3), x)}, r[2];
  EXPECT_OK(ref_run(text, NULL, "f", args, 1, r, 2));
  double e1 = exp(-1.0), e2 = exp(-2.0), z = 1 + e1 + e2;
  ref_expect_f32(&r[0], (float[]){(float)(e2 / z), (float)(e1 / z), (float)(1 / z), 0.5f, 0.5f, 0},
                 6, 1e-7, "softmax rows (max subtracted: no overflow at 1000)");
  ref_expect_f32(&r[1], (float[]){1, 1, 1, 0, 0, 0}, 6, 0, "softmax columns");
  ref_release_all(r, 2);
}

int main(void) {
  RUN_TEST(test_rms_norm_by_hand);
  RUN_TEST(test_rms_norm_awkward_rows);
  RUN_TEST(test_layer_norm_with_and_without_bias);
  RUN_TEST(test_softmax_axes_and_large_values);
  return TEST_SUMMARY();
}
