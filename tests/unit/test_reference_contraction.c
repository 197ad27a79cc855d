/* linear and matmul: hand-computed cases, awkward sizes against loops written here (37 rows:
 * not a multiple of the 4-row block; 172 in, 176 out as in the tiny model), a rank-3 input,
 * broadcast batches, two threads giving the same bits, and block-quantized weights. */
#include "tests/unit/test_reference_util.h"

static void test_linear_by_hand(void) {
  const char *text =
      "param @w : f32[2, 3]\n"
      "func @f(%x: f32[S, 3], %b: f32[2]) -> f32[S, 2] {\n"
      "  %w = param @w : f32[2, 3]\n"
      "  %y = linear %x, %w, %b : f32[S, 2]\n"
      "  return %y\n"
      "}\n";
  float w[] = {1, 2, 3, 4, 5, 6}, x[] = {1, 0, 0, 0, 1, 1, 2, -1, 0.5f}, b[] = {0.5f, -1};
  ref_param_t ps[] = {{"w", ref_f32(2, SHAPE(2, 3), w)}};
  ref_params_t params = {ps, 1, 0};
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.get_param = ref_get_param;
  o.param_ctx = &params;
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(3, 3), x), ref_f32(1, SHAPE(2), b)}, r[1];
  EXPECT_OK(ref_run(text, &o, "f", args, 2, r, 1));
  /* row 2: [2, -1, .5] . [1, 2, 3] + .5 = 2;  . [4, 5, 6] - 1 = 5 */
  ref_expect_f32(&r[0], (float[]){1.5f, 3.0f, 5.5f, 10.0f, 2.0f, 5.0f}, 6, 0, "linear");
  ref_expect_shape(&r[0], 2, SHAPE(3, 2), "linear");
  ref_release_all(r, 1);
}

static void linear_expected(const float *x, const float *w, const float *b, int64_t rows,
                            int64_t in, int64_t out, float *y) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b ? b[o] : 0.0;
      for (int64_t k = 0; k < in; ++k) acc += (double)x[r * in + k] * w[o * in + k];
      y[r * out + o] = (float)acc;
    }
}

/* x [2, rows, 172] . w [176, 172]^T + b, with 1 and 2 threads. */
static void run_awkward_linear(int64_t rows, uint32_t threads, float *out_copy) {
  const char *text =
      "func @f(%x: f32[2, R, 172], %w: f32[176, 172], %b: f32[176]) -> f32[2, R, 176] {\n"
      "  %y = linear %x, %w, %b : f32[2, R, 176]\n"
      "  return %y\n"
      "}\n";
  float *x = ref_rand_array(2 * rows * 172, 3), *w = ref_rand_array(176 * 172, 4);
  float *b = ref_rand_array(176, 5), *expected = malloc(sizeof(float) * 2 * rows * 176);
  linear_expected(x, w, b, 2 * rows, 172, 176, expected);
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.threads = threads;
  vlmc_tensor_t args[] = {ref_f32(3, SHAPE(2, rows, 172), x), ref_f32(2, SHAPE(176, 172), w),
                          ref_f32(1, SHAPE(176), b)};
  vlmc_tensor_t r[1];
  EXPECT_OK(ref_run(text, &o, "f", args, 3, r, 1));
  /* Same formula, same f64 sums in another order: equal to ~1 f32 ulp. */
  ref_expect_f32(&r[0], expected, 2 * rows * 176, 2e-6, "linear 172 -> 176");
  if (out_copy && r[0].data) memcpy(out_copy, r[0].data, sizeof(float) * 2 * rows * 176);
  ref_release_all(r, 1);
  free(x);
  free(w);
  free(b);
  free(expected);
}

static void test_linear_awkward_sizes_and_threads(void) {
  float *one = malloc(sizeof(float) * 2 * 37 * 176), *two = malloc(sizeof(float) * 2 * 37 * 176);
  run_awkward_linear(37, 1, one);
  run_awkward_linear(37, 2, two);
  EXPECT_TRUE(memcmp(one, two, sizeof(float) * 2 * 37 * 176) == 0);
  run_awkward_linear(1, 2, NULL);
  free(one);
  free(two);
}

static void test_matmul_by_hand(void) {
  const char *text =
      "func @f(%a: f32[2, 3], %b: f32[3, 2]) -> f32[2, 2] {\n"
      "  %y = matmul %a, %b : f32[2, 2]\n"
      "  return %y\n"
      "}\n";
  float a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, 11, 12};
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(2, 3), a), ref_f32(2, SHAPE(3, 2), b)}, r[1];
  EXPECT_OK(ref_run(text, NULL, "f", args, 2, r, 1));
  ref_expect_f32(&r[0], (float[]){58, 64, 139, 154}, 4, 0, "matmul");
  ref_release_all(r, 1);
}

/* [2, 1, 37, 16] x [3, 16, 5] -> [2, 3, 37, 5]: batch dims broadcast both ways. */
static void test_matmul_broadcast_batches(void) {
  const char *text =
      "func @f(%a: f32[2, 1, 37, 16], %b: f32[3, 16, 5]) -> f32[2, 3, 37, 5] {\n"
      "  %y = matmul %a, %b : f32[2, 3, 37, 5]\n"
      "  return %y\n"
      "}\n";
  float *a = ref_rand_array(2 * 37 * 16, 6), *b = ref_rand_array(3 * 16 * 5, 7);
  float *expected = malloc(sizeof(float) * 2 * 3 * 37 * 5);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int m = 0; m < 37; ++m)
        for (int n = 0; n < 5; ++n) {
          double acc = 0;
          const float *arow = a + (i * 37 + m) * 16, *bcol = b + j * 16 * 5 + n;
          for (int k = 0; k < 16; ++k) acc += (double)arow[k] * bcol[k * 5];
          expected[((i * 3 + j) * 37 + m) * 5 + n] = (float)acc;
        }
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.threads = 2;
  vlmc_tensor_t args[] = {ref_f32(4, SHAPE(2, 1, 37, 16), a), ref_f32(3, SHAPE(3, 16, 5), b)};
  vlmc_tensor_t r[1];
  EXPECT_OK(ref_run(text, &o, "f", args, 2, r, 1));
  ref_expect_f32(&r[0], expected, 2 * 3 * 37 * 5, 0, "batched matmul");
  ref_release_all(r, 1);
  free(a);
  free(b);
  free(expected);
}

/* A q4_0 / q8_0 weight is dequantized (ggml's layout) and then used as f32. */
static void test_linear_with_quantized_weights(void) {
  const char *text =
      "param @w4 : q4_0[3, 64]\n"
      "param @w8 : q8_0[3, 64]\n"
      "func @f(%x: f32[2, 64]) -> (f32[2, 3], f32[2, 3]) {\n"
      "  %w4 = param @w4 : q4_0[3, 64]\n"
      "  %w8 = param @w8 : q8_0[3, 64]\n"
      "  %a = linear %x, %w4 : f32[2, 3]\n"
      "  %b = linear %x, %w8 : f32[2, 3]\n"
      "  return %a, %b\n"
      "}\n";
  float *w = ref_rand_array(3 * 64, 8), *x = ref_rand_array(2 * 64, 9);
  uint8_t q4[6 * 18], q8[6 * 34];
  vlmc_quantize_q4_0(w, 6, q4);
  vlmc_quantize_q8_0(w, 6, q8);
  float w4[3 * 64], w8[3 * 64], e4[6], e8[6];
  vlmc_dequantize_q4_0(q4, 6, w4);
  vlmc_dequantize_q8_0(q8, 6, w8);
  linear_expected(x, w4, NULL, 2, 64, 3, e4);
  linear_expected(x, w8, NULL, 2, 64, 3, e8);
  ref_param_t ps[] = {{"w4", vlmc_tensor_view(VLMC_DTYPE_Q4_0, 2, SHAPE(3, 64), q4)},
                      {"w8", vlmc_tensor_view(VLMC_DTYPE_Q8_0, 2, SHAPE(3, 64), q8)}};
  ref_params_t params = {ps, 2, 0};
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.get_param = ref_get_param;
  o.param_ctx = &params;
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(2, 64), x)}, r[2];
  EXPECT_OK(ref_run(text, &o, "f", args, 1, r, 2));
  ref_expect_f32(&r[0], e4, 6, 0, "q4_0 linear");
  ref_expect_f32(&r[1], e8, 6, 0, "q8_0 linear");
  float exact[6];
  linear_expected(x, w, NULL, 2, 64, 3, exact);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(e8[i], exact[i], 0.05); /* q8_0 is close */
  ref_release_all(r, 2);
  free(w);
  free(x);
}

int main(void) {
  RUN_TEST(test_linear_by_hand);
  RUN_TEST(test_linear_awkward_sizes_and_threads);
  RUN_TEST(test_matmul_by_hand);
  RUN_TEST(test_matmul_broadcast_batches);
  RUN_TEST(test_linear_with_quantized_weights);
  return TEST_SUMMARY();
}
