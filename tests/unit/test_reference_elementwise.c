/* The reference executor's elementwise ops against hand-computed values: broadcasting (awkward
 * sizes included), integer wrapping and division, the unary functions, gelu, clamp, cast, and
 * the f16 / bf16 / q8_0 / q4_0 conversions underneath. */
#include <float.h>

#include "tests/unit/test_reference_util.h"

static void test_add_broadcasts_a_row(void) {
  const char *text =
      "func @f(%x: f32[2, 3], %b: f32[3]) -> f32[2, 3] {\n"
      "  %y = add %x, %b : f32[2, 3]\n"
      "  return %y\n"
      "}\n";
  float x[] = {1, 2, 3, 4, 5, 6}, b[] = {10, 20, 30};
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(2, 3), x), ref_f32(1, SHAPE(3), b)}, r[1];
  EXPECT_OK(ref_run(text, NULL, "f", args, 2, r, 1));
  float expected[] = {11, 22, 33, 14, 25, 36};
  ref_expect_f32(&r[0], expected, 6, 0, "x + b");
  ref_expect_shape(&r[0], 2, SHAPE(2, 3), "x + b");
  ref_release_all(r, 1);
}

static void test_sub_mul_div_with_column_and_scalar_broadcast(void) {
  const char *text =
      "func @f(%x: f32[2, 2], %c: f32[2, 1], %s: f32[1]) -> (f32[2, 2], f32[2, 2], f32[2, 2]) {\n"
      "  %a = sub %x, %c : f32[2, 2]\n"
      "  %m = mul %c, %x : f32[2, 2]\n"
      "  %d = div %x, %s : f32[2, 2]\n"
      "  return %a, %m, %d\n"
      "}\n";
  float x[] = {1, 2, 3, 4}, c[] = {1, 10}, s[] = {4};
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(2, 2), x), ref_f32(2, SHAPE(2, 1), c),
                          ref_f32(1, SHAPE(1), s)};
  vlmc_tensor_t r[3];
  EXPECT_OK(ref_run(text, NULL, "f", args, 3, r, 3));
  ref_expect_f32(&r[0], (float[]){0, 1, -7, -6}, 4, 0, "x - c");
  ref_expect_f32(&r[1], (float[]){1, 2, 30, 40}, 4, 0, "c * x");
  ref_expect_f32(&r[2], (float[]){0.25f, 0.5f, 0.75f, 1}, 4, 0, "x / s");
  ref_release_all(r, 3);
}

/* [37, 1, 172] + [176, 1]: both operands stretch; checked against a loop written here. */
static void test_broadcast_awkward_sizes(void) {
  const char *text =
      "func @f(%a: f32[37, 1, 172], %b: f32[176, 1]) -> f32[37, 176, 172] {\n"
      "  %y = mul %a, %b : f32[37, 176, 172]\n"
      "  return %y\n"
      "}\n";
  float *a = ref_rand_array(37 * 172, 1), *b = ref_rand_array(176, 2);
  vlmc_tensor_t args[] = {ref_f32(3, SHAPE(37, 1, 172), a), ref_f32(2, SHAPE(176, 1), b)}, r[1];
  EXPECT_OK(ref_run(text, NULL, "f", args, 2, r, 1));
  float *expected = malloc(sizeof(float) * 37 * 176 * 172);
  for (int i = 0; i < 37; ++i)
    for (int j = 0; j < 176; ++j)
      for (int k = 0; k < 172; ++k) expected[(i * 176 + j) * 172 + k] = a[i * 172 + k] * b[j];
  ref_expect_f32(&r[0], expected, 37 * 176 * 172, 0, "a * b");
  free(expected);
  free(a);
  free(b);
  ref_release_all(r, 1);
}

static void test_integer_arithmetic_wraps_and_truncates(void) {
  const char *text =
      "func @f(%a: i64[3], %b: i64[3], %c: i32[2]) -> (i64[3], i64[3], i32[2], i64[3]) {\n"
      "  %q = div %a, %b : i64[3]\n"
      "  %p = mul %a, %b : i64[3]\n"
      "  %w = add %c, %c : i32[2]\n"
      "  %n = neg %a : i64[3]\n"
      "  return %q, %p, %w, %n\n"
      "}\n";
  int64_t a[] = {-7, 7, INT64_MIN}, b[] = {2, -2, -1}, c[] = {INT32_MAX, -3};
  vlmc_tensor_t args[] = {ref_i64(1, SHAPE(3), a), ref_i64(1, SHAPE(3), b),
                          ref_i64(1, SHAPE(2), c)};
  vlmc_tensor_t r[4];
  EXPECT_OK(ref_run(text, NULL, "f", args, 3, r, 4));
  ref_expect_i64(&r[0], (int64_t[]){-3, -3, INT64_MIN}, 3, "a / b (toward zero, wrapping)");
  ref_expect_i64(&r[1], (int64_t[]){-14, -14, INT64_MIN}, 3, "a * b");
  ref_expect_i64(&r[2], (int64_t[]){-2, -6}, 2, "i32 add wraps");
  ref_expect_i64(&r[3], (int64_t[]){7, -7, INT64_MIN}, 3, "neg");
  ref_release_all(r, 4);
}

static void test_integer_division_by_zero_is_an_error(void) {
  const char *text =
      "func @f(%a: i64[2], %b: i64[2]) -> i64[2] {\n"
      "  %q = div %a, %b : i64[2]\n"
      "  return %q\n"
      "}\n";
  int64_t a[] = {1, 2}, b[] = {1, 0};
  vlmc_tensor_t args[] = {ref_i64(1, SHAPE(2), a), ref_i64(1, SHAPE(2), b)}, r[1];
  EXPECT_ERROR(ref_run(text, NULL, "f", args, 2, r, 1),
               "test.vir:2:3: error: 'div' op: integer division by zero (divisor index 1)");
}

static void test_unary_functions(void) {
  const char *text =
      "func @f(%x: f32[3]) -> (f32[3], f32[3], f32[3], f32[3], f32[3], f32[3], f32[3], f32[3],"
      " f32[3], f32[3]) {\n"
      "  %e = exp %x : f32[3]\n"
      "  %s = sqrt %x : f32[3]\n"
      "  %r = rsqrt %x : f32[3]\n"
      "  %t = tanh %x : f32[3]\n"
      "  %f = erf %x : f32[3]\n"
      "  %c = cos %x : f32[3]\n"
      "  %n = sin %x : f32[3]\n"
      "  %g = sigmoid %x : f32[3]\n"
      "  %l = silu %x : f32[3]\n"
      "  %m = neg %x : f32[3]\n"
      "  return %e, %s, %r, %t, %f, %c, %n, %g, %l, %m\n"
      "}\n";
  float x[] = {0.0f, 1.0f, 4.0f};
  vlmc_tensor_t args[] = {ref_f32(1, SHAPE(3), x)}, r[10];
  EXPECT_OK(ref_run(text, NULL, "f", args, 1, r, 10));
  ref_expect_f32(&r[0], (float[]){1.0f, 2.71828183f, 54.5981500f}, 3, 1e-5, "exp");
  ref_expect_f32(&r[1], (float[]){0.0f, 1.0f, 2.0f}, 3, 0, "sqrt");
  ref_expect_f32(&r[2], (float[]){INFINITY, 1.0f, 0.5f}, 3, 0, "rsqrt");
  ref_expect_f32(&r[3], (float[]){0.0f, 0.761594156f, 0.999329300f}, 3, 1e-7, "tanh");
  ref_expect_f32(&r[4], (float[]){0.0f, 0.842700793f, 0.999999985f}, 3, 1e-7, "erf");
  ref_expect_f32(&r[5], (float[]){1.0f, 0.540302306f, -0.653643621f}, 3, 1e-7, "cos");
  ref_expect_f32(&r[6], (float[]){0.0f, 0.841470985f, -0.756802495f}, 3, 1e-7, "sin");
  ref_expect_f32(&r[7], (float[]){0.5f, 0.731058579f, 0.982013790f}, 3, 1e-7, "sigmoid");
  ref_expect_f32(&r[8], (float[]){0.0f, 0.731058579f, 3.92805516f}, 3, 1e-6, "silu");
  ref_expect_f32(&r[9], (float[]){-0.0f, -1.0f, -4.0f}, 3, 0, "neg");
  ref_release_all(r, 10);
}

static void test_gelu_erf_and_tanh(void) {
  const char *text =
      "func @f(%x: f32[4]) -> (f32[4], f32[4]) {\n"
      "  %a = gelu %x {approx = erf} : f32[4]\n"
      "  %b = gelu %x {approx = tanh} : f32[4]\n"
      "  return %a, %b\n"
      "}\n";
  float x[] = {-1.0f, 0.0f, 1.0f, 3.0f};
  vlmc_tensor_t args[] = {ref_f32(1, SHAPE(4), x)}, r[2];
  EXPECT_OK(ref_run(text, NULL, "f", args, 1, r, 2));
  /* 0.5 x (1 + erf(x / sqrt 2)) and 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
  ref_expect_f32(&r[0], (float[]){-0.158655254f, 0.0f, 0.841344746f, 2.99595031f}, 4, 1e-7,
                 "gelu erf");
  ref_expect_f32(&r[1], (float[]){-0.158808009f, 0.0f, 0.841191991f, 2.99636261f}, 4, 1e-6,
                 "gelu tanh");
  ref_release_all(r, 2);
}

static void test_clamp_bounds_and_nan(void) {
  const char *text =
      "func @f(%x: f32[4]) -> (f32[4], f32[4]) {\n"
      "  %a = clamp %x {min = -1.0, max = 1.0} : f32[4]\n"
      "  %b = clamp %x {max = 0.5} : f32[4]\n"
      "  return %a, %b\n"
      "}\n";
  float x[] = {-3.0f, 0.25f, 7.0f, NAN};
  vlmc_tensor_t args[] = {ref_f32(1, SHAPE(4), x)}, r[2];
  EXPECT_OK(ref_run(text, NULL, "f", args, 1, r, 2));
  ref_expect_f32(&r[0], (float[]){-1.0f, 0.25f, 1.0f, NAN}, 4, 0, "clamp [-1, 1]");
  ref_expect_f32(&r[1], (float[]){-3.0f, 0.25f, 0.5f, NAN}, 4, 0, "clamp max 0.5");
  ref_release_all(r, 2);
}

static void test_cast_rounds_to_f16_and_bf16(void) {
  const char *text =
      "func @f(%x: f32[5]) -> (f16[5], bf16[5], f32[5]) {\n"
      "  %h = cast %x {dtype = f16} : f16[5]\n"
      "  %b = cast %x {dtype = bf16} : bf16[5]\n"
      "  %back = cast %h {dtype = f32} : f32[5]\n"
      "  return %h, %b, %back\n"
      "}\n";
  float x[] = {1.0f / 3.0f, 65519.0f, 65520.0f, 1e-8f, -2049.0f};
  vlmc_tensor_t args[] = {ref_f32(1, SHAPE(5), x)}, r[3];
  EXPECT_OK(ref_run(text, NULL, "f", args, 1, r, 3));
  float f16[] = {0.333251953125f, 65504.0f, INFINITY, 0.0f, -2048.0f};
  ref_expect_f32(&r[0], f16, 5, 0, "f16");
  float bf16[] = {0.333984375f, 65536.0f, 65536.0f, 1.0011717677116394e-08f, -2048.0f};
  ref_expect_f32(&r[1], bf16, 5, 0, "bf16");
  ref_expect_f32(&r[2], f16, 5, 0, "f16 -> f32 keeps the rounded value");
  ref_release_all(r, 3);
}

static void test_cast_between_integers_and_floats(void) {
  const char *text =
      "func @f(%x: f32[4], %i: i64[3]) -> (i64[4], i8[3], f16[3], bool[4]) {\n"
      "  %t = cast %x {dtype = i64} : i64[4]\n"
      "  %w = cast %i {dtype = i8} : i8[3]\n"
      "  %h = cast %i {dtype = f16} : f16[3]\n"
      "  %b = cast %x {dtype = bool} : bool[4]\n"
      "  return %t, %w, %h, %b\n"
      "}\n";
  float x[] = {-2.7f, 2.7f, 0.0f, 1e10f};
  int64_t i[] = {200, -129, 2049};
  vlmc_tensor_t args[] = {ref_f32(1, SHAPE(4), x), ref_i64(1, SHAPE(3), i)}, r[4];
  EXPECT_OK(ref_run(text, NULL, "f", args, 2, r, 4));
  ref_expect_i64(&r[0], (int64_t[]){-2, 2, 0, 10000000000}, 4, "f32 -> i64 truncates");
  ref_expect_i64(&r[1], (int64_t[]){-56, 127, 1}, 3, "i64 -> i8 wraps");
  ref_expect_f32(&r[2], (float[]){200.0f, -129.0f, 2048.0f}, 3, 0, "i64 -> f16 rounds");
  ref_expect_i64(&r[3], (int64_t[]){1, 1, 0, 1}, 4, "f32 -> bool");
  ref_release_all(r, 4);
}

static void test_cast_of_nan_or_out_of_range_to_int_is_an_error(void) {
  const char *text =
      "func @f(%x: f32[2]) -> i32[2] {\n"
      "  %t = cast %x {dtype = i32} : i32[2]\n"
      "  return %t\n"
      "}\n";
  float nan_in[] = {1.0f, NAN}, big[] = {3e9f, 0.0f};
  vlmc_tensor_t a1[] = {ref_f32(1, SHAPE(2), nan_in)}, a2[] = {ref_f32(1, SHAPE(2), big)}, r[1];
  EXPECT_ERROR(ref_run(text, NULL, "f", a1, 1, r, 1), "value nan at index 1 does not fit i32");
  EXPECT_ERROR(ref_run(text, NULL, "f", a2, 1, r, 1), "value 3e+09 at index 0 does not fit i32");
}

/* A cast to q8_0 / q4_0 is the round trip through ggml's block format. */
static void test_cast_to_quantized_round_trips_blocks(void) {
  const char *text =
      "func @f(%x: f32[2, 32]) -> (q8_0[2, 32], q4_0[2, 32]) {\n"
      "  %a = cast %x {dtype = q8_0} : q8_0[2, 32]\n"
      "  %b = cast %x {dtype = q4_0} : q4_0[2, 32]\n"
      "  return %a, %b\n"
      "}\n";
  float x[64];
  for (int i = 0; i < 32; ++i) x[i] = (float)(i - 16) / 16.0f;   /* amax 1 at index 0 */
  for (int i = 0; i < 32; ++i) x[32 + i] = (float)i * 0.5f;       /* amax 15.5 at the end */
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(2, 32), x)}, r[2];
  EXPECT_OK(ref_run(text, NULL, "f", args, 1, r, 2));
  /* q8_0 block 0: d = f16(1/127); q = round(x * 127). q4_0 block 0: max = -1, d = 1/8,
   * q = trunc(x * -8 + 8.5) clamped to 15, value (q - 8) * d. */
  float d8 = vlmc_round_f16(1.0f / 127.0f);
  EXPECT_NEAR(vlmc_tensor_f32(&r[0])[0], -127 * d8, 0);
  EXPECT_NEAR(vlmc_tensor_f32(&r[0])[17], 8 * d8, 0);   /* round(127 / 16) = 8 */
  EXPECT_NEAR(vlmc_tensor_f32(&r[1])[0], -1.0f, 0);     /* -1 * 8 + 8.5 -> q 0 -> -8 / 8 */
  EXPECT_NEAR(vlmc_tensor_f32(&r[1])[16], 0.0f, 0);     /* 0 + 8.5 -> q 8 -> 0 */
  EXPECT_NEAR(vlmc_tensor_f32(&r[1])[20], 0.25f, 0);    /* 0.25 * 8 + 8.5 -> q 10 -> 2 / 8 */
  for (int i = 0; i < 64; ++i) {
    double amax = i < 32 ? 1.0 : 15.5; /* half a step, plus the f16 scale's rounding */
    EXPECT_NEAR(vlmc_tensor_f32(&r[0])[i], x[i], 0.5 * amax / 127 + amax / 1000);
  }
  ref_release_all(r, 2);
}

/* ---- the conversions underneath (reference/tensor.h) ---- */

static void test_f16_round_trips_every_pattern(void) {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = vlmc_f16_to_f32((uint16_t)h);
    uint16_t back = vlmc_f32_to_f16(f);
    bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    if (nan ? !isnan(f) || (back & 0x7c00) != 0x7c00 || !(back & 0x3ff) : back != h) ++bad;
  }
  EXPECT_EQ_INT(bad, 0);
}

static void test_f16_rounding_ties_subnormals_overflow(void) {
  EXPECT_EQ_INT(vlmc_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);      /* tie: to even (down) */
  EXPECT_EQ_INT(vlmc_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);  /* tie: to even (up) */
  EXPECT_EQ_INT(vlmc_f32_to_f16(0x1p-24f), 0x0001);             /* smallest subnormal */
  EXPECT_EQ_INT(vlmc_f32_to_f16(0x1p-25f), 0x0000);             /* tie with 0: to even */
  EXPECT_EQ_INT(vlmc_f32_to_f16(0x1.8p-25f), 0x0001);
  EXPECT_EQ_INT(vlmc_f32_to_f16(0x1.ffcp-15f), 0x0400);         /* rounds up to a normal */
  EXPECT_EQ_INT(vlmc_f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ_INT(vlmc_f32_to_f16(65519.99f), 0x7bff);
  EXPECT_EQ_INT(vlmc_f32_to_f16(65520.0f), 0x7c00);             /* overflow to inf */
  EXPECT_EQ_INT(vlmc_f32_to_f16(-1e30f), 0xfc00);
  EXPECT_EQ_INT(vlmc_f32_to_f16(-0.0f), 0x8000);
  EXPECT_TRUE(isnan(vlmc_round_f16(NAN)));
  EXPECT_NEAR(vlmc_f16_to_f32(0x3555), 0.333251953125, 0);
}

static void test_bf16_rounding(void) {
  EXPECT_EQ_INT(vlmc_f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ_INT(vlmc_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);         /* tie: to even */
  EXPECT_EQ_INT(vlmc_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ_INT(vlmc_f32_to_bf16(FLT_MAX), 0x7f80);                /* rounds to inf */
  EXPECT_TRUE(isnan(vlmc_round_bf16(NAN)));
  EXPECT_NEAR(vlmc_round_bf16(1.0f / 3.0f), 0.333984375, 0);
}

static void test_q8_0_and_q4_0_layouts(void) {
  /* q8_0 block: f16 scale 0.5 (0x3800), then 32 int8. */
  uint8_t q8[34] = {0x00, 0x38};
  for (int j = 0; j < 32; ++j) q8[2 + j] = (uint8_t)(int8_t)(j - 16);
  float out[32];
  vlmc_dequantize_q8_0(q8, 1, out);
  EXPECT_NEAR(out[0], -8.0, 0);
  EXPECT_NEAR(out[31], 7.5, 0);
  /* q4_0 block: scale 2 (0x4000); byte j holds element j (low) and j + 16 (high). */
  uint8_t q4[18] = {0x00, 0x40};
  for (int j = 0; j < 16; ++j) q4[2 + j] = (uint8_t)(j | ((15 - j) << 4));
  vlmc_dequantize_q4_0(q4, 1, out);
  EXPECT_NEAR(out[0], -16.0, 0);  /* (0 - 8) * 2 */
  EXPECT_NEAR(out[15], 14.0, 0);  /* (15 - 8) * 2 */
  EXPECT_NEAR(out[16], 14.0, 0);  /* high nibble of byte 0: 15 */
  EXPECT_NEAR(out[31], -16.0, 0);
  /* The quantizers invert them on representable data. */
  uint8_t again[18];
  vlmc_quantize_q4_0(out, 1, again);
  float twice[32];
  vlmc_dequantize_q4_0(again, 1, twice);
  for (int j = 0; j < 32; ++j) EXPECT_NEAR(twice[j], out[j], 0);
}

int main(void) {
  RUN_TEST(test_add_broadcasts_a_row);
  RUN_TEST(test_sub_mul_div_with_column_and_scalar_broadcast);
  RUN_TEST(test_broadcast_awkward_sizes);
  RUN_TEST(test_integer_arithmetic_wraps_and_truncates);
  RUN_TEST(test_integer_division_by_zero_is_an_error);
  RUN_TEST(test_unary_functions);
  RUN_TEST(test_gelu_erf_and_tanh);
  RUN_TEST(test_clamp_bounds_and_nan);
  RUN_TEST(test_cast_rounds_to_f16_and_bf16);
  RUN_TEST(test_cast_between_integers_and_floats);
  RUN_TEST(test_cast_of_nan_or_out_of_range_to_int_is_an_error);
  RUN_TEST(test_cast_to_quantized_round_trips_blocks);
  RUN_TEST(test_f16_round_trips_every_pattern);
  RUN_TEST(test_f16_rounding_ties_subnormals_overflow);
  RUN_TEST(test_bf16_rounding);
  RUN_TEST(test_q8_0_and_q4_0_layouts);
  return TEST_SUMMARY();
}
