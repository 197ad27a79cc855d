/* The `dequantize` op (docs/ir.md; MLX's affine group layout, docs/mlx_format.md): parsing and
 * printing, the shape rule's refusals, and the reference executor's values against
 * f32(scale) * q + f32(bias) computed here by hand, for 4 and 8 bits with a short last group
 * and a padded last word, with f32, bf16 (the docs' worked example) and f16 scales, through
 * parameters and arguments, feeding a linear. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/test_reference_util.h"

/* ---- parsing, printing, verifying ---- */

static vlmc_status_t parse_and_verify(const char *text, vlmc_module_t **out) {
  *out = NULL;
  vlmc_parse_options_t options = {"dq.vir", 1};
  vlmc_status_t st = vlmc_module_parse(text, strlen(text), &options, out);
  if (!st) st = vlmc_module_verify(*out);
  return st;
}

/* text must parse and verify; print(parse(print(text))) == print(text), which holds `op`. */
static void expect_round_trip(const char *text, const char *op) {
  vlmc_module_t *m;
  vlmc_status_t st = parse_and_verify(text, &m);
  if (st) {
    TEST_FAIL_("expected to verify, got: %s\n%s", vlmc_status_message(st), text);
    vlmc_status_free(st);
    vlmc_module_destroy(m);
    return;
  }
  char *first = vlmc_module_to_string(m);
  vlmc_module_t *again;
  st = parse_and_verify(first, &again);
  if (st) {
    TEST_FAIL_("printed text does not verify: %s\n%s", vlmc_status_message(st), first);
    vlmc_status_free(st);
  } else {
    char *second = vlmc_module_to_string(again);
    if (strcmp(first, second) != 0) TEST_FAIL_("printing is not a fixed point:\n%s\n%s", first,
                                               second);
    free(second);
  }
  if (!strstr(first, op)) TEST_FAIL_("'%s' not in the printed module:\n%s", op, first);
  vlmc_module_destroy(again);
  vlmc_module_destroy(m);
  free(first);
}

/* One dequantize of three arguments: "func @f(%w: PACKED, %s: SCALES, %b: BIASES) -> RESULT". */
static char *dequantize_func(const char *packed, const char *scales, const char *biases,
                             const char *attrs, const char *result) {
  static char text[1024];
  snprintf(text, sizeof text,
           "func @f(%%w: %s, %%s: %s, %%b: %s) -> %s {\n"
           "  %%d = dequantize %%w, %%s, %%b {%s} : %s\n"
           "  return %%d\n"
           "}\n",
           packed, scales, biases, result, attrs, result);
  return text;
}

static void test_parse_print_round_trip(void) {
  /* cols 20 at 4 bits: 3 words (the last half padding), 3 groups of 8 (the last of 4). */
  expect_round_trip(
      "param @w : u32[2, 3]\n"
      "param @s : bf16[2, 3]\n"
      "param @b : bf16[2, 3]\n"
      "func @f(%x: f32[S, 20]) -> f32[S, 2] {\n"
      "  %w = param @w : u32[2, 3]\n"
      "  %s = param @s : bf16[2, 3]\n"
      "  %b = param @b : bf16[2, 3]\n"
      "  %d = dequantize %w, %s, %b {bits = 4, group = 8, cols = 20} : f32[2, 20]\n"
      "  %y = linear %x, %d : f32[S, 2]\n"
      "  return %y\n"
      "}\n",
      "%d = dequantize %w, %s, %b {bits=4, group=8, cols=20} : f32[2,20]");
  /* 8 bits, group 4 (the smallest: one word), cols 18: 5 words, 5 groups (the last of 2). */
  expect_round_trip(dequantize_func("u32[3, 5]", "f16[3, 5]", "f16[3, 5]",
                                    "bits=8, group=4, cols=18", "f32[3, 18]"),
                    "dequantize %w, %s, %b {bits=8, group=4, cols=18} : f32[3,18]");
  /* MLX's shapes: [out, in*bits/32] words, [out, in/64] f32 scales; symbolic rows. */
  expect_round_trip(dequantize_func("u32[R, 8]", "f32[R, 1]", "f32[R, 1]",
                                    "bits=4, group=64, cols=64", "f32[R, 64]"),
                    "{bits=4, group=64, cols=64} : f32[R,64]");
  /* group 4096, the largest; one group per row. */
  expect_round_trip(dequantize_func("u32[1, 512]", "bf16[1, 1]", "bf16[1, 1]",
                                    "bits=4, group=4096, cols=4096", "f32[1, 4096]"),
                    "group=4096");
}

static void expect_refused(const char *text, const char *needle) {
  vlmc_module_t *m;
  vlmc_status_t st = parse_and_verify(text, &m);
  if (!st) TEST_FAIL_("expected an error containing \"%s\", it verified:\n%s", needle, text);
  else if (!strstr(vlmc_status_message(st), needle))
    TEST_FAIL_("error \"%s\" does not contain \"%s\"", vlmc_status_message(st), needle);
  vlmc_status_free(st);
  vlmc_module_destroy(m);
}

static void test_shape_rule_refusals(void) {
  const char *w = "u32[2, 3]", *s = "bf16[2, 3]", *res = "f32[2, 20]";
  const char *ok_attrs = "bits=4, group=8, cols=20";
  /* The valid base case, so that each refusal below is about its one change. */
  vlmc_module_t *m;
  EXPECT_OK(parse_and_verify(dequantize_func(w, s, s, ok_attrs, res), &m));
  vlmc_module_destroy(m);

  expect_refused(dequantize_func(w, s, s, "bits=5, group=8, cols=20", res),
                 "'dequantize' op: expected bits 4 or 8, got 5");
  expect_refused(dequantize_func(w, s, s, "bits=3, group=8, cols=20", res),
                 "expected bits 4 or 8, got 3");
  expect_refused(dequantize_func(w, s, s, "bits=0, group=8, cols=20", res),
                 "expected bits 4 or 8, got 0");
  expect_refused(dequantize_func("u32[2, 20]", s, s, "bits=32, group=8, cols=20", res),
                 "expected bits 4 or 8, got 32");
  /* A group spans whole words: a multiple of 8 at 4 bits, of 4 at 8 bits, at most 4096. */
  expect_refused(dequantize_func(w, "bf16[2, 2]", "bf16[2, 2]", "bits=4, group=12, cols=20", res),
                 "expected group to be a multiple of 8 (the elements of a word) from 8 to 4096, "
                 "got 12");
  expect_refused(dequantize_func(w, "bf16[2, 5]", "bf16[2, 5]", "bits=4, group=4, cols=20", res),
                 "multiple of 8 (the elements of a word) from 8 to 4096, got 4");
  expect_refused(dequantize_func("u32[2, 5]", "bf16[2, 4]", "bf16[2, 4]",
                                 "bits=8, group=6, cols=20", res),
                 "multiple of 4 (the elements of a word) from 4 to 4096, got 6");
  expect_refused(dequantize_func("u32[1, 1024]", "bf16[1, 1]", "bf16[1, 1]",
                                 "bits=4, group=8192, cols=8192", "f32[1, 8192]"),
                 "got 8192");
  expect_refused(dequantize_func(w, s, s, "bits=4, group=-8, cols=20", res), "got -8");
  expect_refused(dequantize_func("u32[2, 0]", "bf16[2, 0]", "bf16[2, 0]",
                                 "bits=4, group=8, cols=0", "f32[2, 0]"),
                 "expected cols in [1, 2^40], got 0");
  /* The packed words are u32, of rank 2, ceil(cols * bits / 32) per row. */
  expect_refused(dequantize_func("i32[2, 3]", s, s, ok_attrs, res),
                 "expected packed u32 words, got i32[2,3]");
  expect_refused(dequantize_func("u8[2, 12]", s, s, ok_attrs, res), "expected packed u32 words");
  expect_refused(dequantize_func("f32[2, 3]", s, s, ok_attrs, res), "expected packed u32 words");
  expect_refused(dequantize_func("u32[2, 2]", s, s, ok_attrs, res),
                 "expected packed words per row and ceil(cols * bits / 32) to match: 2 vs 3");
  expect_refused(dequantize_func("u32[2, 4]", s, s, ok_attrs, res),
                 "packed words per row and ceil(cols * bits / 32) to match: 4 vs 3");
  expect_refused(dequantize_func("u32[2, 3]", s, s, "bits=8, group=8, cols=20", res),
                 "packed words per row and ceil(cols * bits / 32) to match: 3 vs 5");
  expect_refused(dequantize_func("u32[2, W]", s, s, ok_attrs, res), "packed words per row");
  /* Scales and biases: ceil(cols / group) per row, one row per packed row. */
  expect_refused(dequantize_func(w, "bf16[2, 2]", s, ok_attrs, res),
                 "expected scales per row and ceil(cols / group) to match: 2 vs 3");
  expect_refused(dequantize_func(w, "bf16[2, 4]", "bf16[2, 4]", ok_attrs, res),
                 "scales per row and ceil(cols / group) to match: 4 vs 3");
  expect_refused(dequantize_func(w, s, "bf16[2, 2]", ok_attrs, res),
                 "expected biases per row and ceil(cols / group) to match: 2 vs 3");
  expect_refused(dequantize_func(w, "bf16[3, 3]", "bf16[3, 3]", ok_attrs, res),
                 "expected scale rows and packed rows to match: 3 vs 2");
  expect_refused(dequantize_func(w, s, "bf16[1, 3]", ok_attrs, res),
                 "expected bias rows and packed rows to match: 1 vs 2");
  /* One float dtype for both. */
  expect_refused(dequantize_func(w, "bf16[2, 3]", "f16[2, 3]", ok_attrs, res),
                 "expected operands 1 and 2 to have the same dtype, got bf16[2,3] and f16[2,3]");
  expect_refused(dequantize_func(w, "f32[2, 3]", "bf16[2, 3]", ok_attrs, res),
                 "expected operands 1 and 2 to have the same dtype");
  expect_refused(dequantize_func(w, "i32[2, 3]", "i32[2, 3]", ok_attrs, res),
                 "expected the scales to have a float dtype, got i32[2,3]");
  expect_refused(dequantize_func(w, "u32[2, 3]", "u32[2, 3]", ok_attrs, res),
                 "expected the scales to have a float dtype, got u32[2,3]");
  /* Rank 2 each. */
  expect_refused(dequantize_func("u32[1, 2, 3]", s, s, ok_attrs, res),
                 "expected the packed weight [rows, words] to have rank 2, got u32[1,2,3]");
  expect_refused(dequantize_func("u32[6]", s, s, ok_attrs, res),
                 "expected the packed weight [rows, words] to have rank 2");
  expect_refused(dequantize_func(w, "bf16[1, 2, 3]", s, ok_attrs, res),
                 "expected the scales [rows, groups] to have rank 2, got bf16[1,2,3]");
  expect_refused(dequantize_func(w, s, "bf16[1, 2, 3]", ok_attrs, res),
                 "expected the biases [rows, groups] to have rank 2, got bf16[1,2,3]");
  /* The result is f32[rows, cols]. */
  expect_refused(dequantize_func(w, s, s, ok_attrs, "f32[2, 21]"),
                 "result type f32[2,21] does not match f32[2,20] inferred from the operands");
  expect_refused(dequantize_func(w, s, s, ok_attrs, "bf16[2, 20]"),
                 "result type bf16[2,20] does not match f32[2,20]");
  expect_refused(dequantize_func(w, s, s, ok_attrs, "f32[3, 20]"), "does not match f32[2,20]");
  /* Attributes and operands. */
  expect_refused(dequantize_func(w, s, s, "bits=4, group=8", res),
                 "'dequantize' op: requires attribute 'cols'");
  expect_refused(dequantize_func(w, s, s, "group=8, cols=20", res), "requires attribute 'bits'");
  expect_refused(dequantize_func(w, s, s, "bits=4, group=8, cols=20, axis=1", res),
                 "'dequantize' has no attribute 'axis' (it has: bits, group, cols)");
  expect_refused("func @f(%w: u32[2, 3], %s: bf16[2, 3]) -> f32[2, 20] {\n"
                 "  %d = dequantize %w, %s {bits=4, group=8, cols=20} : f32[2, 20]\n"
                 "  return %d\n"
                 "}\n",
                 "'dequantize' expects 3 operands, got 2");
}

/* ---- the reference executor's values ---- */

/* By hand: bf16 is the top half of an f32; f16 (normal or subnormal) by its fields. */
static float bf16_value(uint16_t bits) {
  uint32_t u = (uint32_t)bits << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static float f16_value(uint16_t bits) {
  int exponent = (bits >> 10) & 31, mantissa = bits & 1023;
  double magnitude = exponent ? ldexp(1.0 + mantissa / 1024.0, exponent - 15)
                              : ldexp(mantissa / 1024.0, -14);
  return (float)(bits & 0x8000 ? -magnitude : magnitude);
}

/* The documented formula: f32(scale) * q + f32(bias), product and sum each rounded to f32. */
static float affine(float scale, uint32_t q, float bias) {
  volatile float product = scale * (float)q; /* no fused multiply-add */
  return product + bias;
}

/* Packs rows x cols values of `bits` into words_per_row u32 words per row, element 0 of a row in
 * the low bits of its first word; the unused values of each last word are all ones (padding:
 * the op must ignore them). */
static void pack(const uint32_t *q, int64_t rows, int64_t cols, int bits, int64_t words_per_row,
                 uint32_t *out) {
  int64_t per_word = 32 / bits;
  for (int64_t i = 0; i < rows * words_per_row; ++i) out[i] = 0xFFFFFFFFu;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) {
      uint32_t *word = &out[r * words_per_row + k / per_word];
      int shift = (int)(k % per_word) * bits;
      uint32_t mask = (bits == 32 ? 0xFFFFFFFFu : ((1u << bits) - 1u)) << shift;
      *word = (*word & ~mask) | (q[r * cols + k] << shift);
    }
}

/* A deterministic code in [0, 2^bits) with every bit pattern's extremes present. */
static uint32_t code(int64_t i, int bits) {
  uint32_t top = (1u << bits) - 1u;
  if (i % 7 == 0) return top;
  if (i % 5 == 0) return 0;
  return (uint32_t)(i * 37 + 11) & top;
}

typedef struct {
  const char *name;
  vlmc_dtype_t scale_dtype; /* F32, BF16 or F16 */
  const void *scales, *biases;
} scale_set_t;

static float scale_value(const scale_set_t *set, const void *data, int64_t i) {
  if (set->scale_dtype == VLMC_DTYPE_F32) return ((const float *)data)[i];
  uint16_t bits = ((const uint16_t *)data)[i];
  return set->scale_dtype == VLMC_DTYPE_BF16 ? bf16_value(bits) : f16_value(bits);
}

/* rows x cols at `bits`, group `group`, through parameters (@w, @s, @b) or arguments. */
static void check_dequantize(int bits, int64_t group, int64_t cols, const scale_set_t *set,
                             bool as_params) {
  enum { ROWS = 2 };
  int64_t per_word = 32 / bits, words = (cols + per_word - 1) / per_word;
  int64_t groups = (cols + group - 1) / group;
  uint32_t q[ROWS * 64], packed[ROWS * 64];
  float expected[ROWS * 64];
  if (cols > 64 || groups > 4) {
    TEST_FAIL_("test sizes too large");
    return;
  }
  for (int64_t i = 0; i < ROWS * cols; ++i) q[i] = code(i, bits);
  pack(q, ROWS, cols, bits, words, packed);
  for (int64_t r = 0; r < ROWS; ++r)
    for (int64_t k = 0; k < cols; ++k) {
      int64_t g = r * groups + k / group;
      expected[r * cols + k] = affine(scale_value(set, set->scales, g), q[r * cols + k],
                                      scale_value(set, set->biases, g));
    }
  const char *dt = vlmc_dtype_info(set->scale_dtype)->name;
  char text[2048], what[160];
  snprintf(what, sizeof what, "%d bits, group %lld, cols %lld, %s scales (%s)", bits,
           (long long)group, (long long)cols, set->name, as_params ? "params" : "arguments");
  vlmc_tensor_t w = vlmc_tensor_view(VLMC_DTYPE_U32, 2, SHAPE(ROWS, words), packed);
  vlmc_tensor_t s = vlmc_tensor_view(set->scale_dtype, 2, SHAPE(ROWS, groups), set->scales);
  vlmc_tensor_t b = vlmc_tensor_view(set->scale_dtype, 2, SHAPE(ROWS, groups), set->biases);
  vlmc_tensor_t r[1];
  if (as_params) {
    snprintf(text, sizeof text,
             "param @w : u32[2, %lld]\n"
             "param @s : %s[2, %lld]\n"
             "param @b : %s[2, %lld]\n"
             "func @f() -> f32[2, %lld] {\n"
             "  %%w = param @w : u32[2, %lld]\n"
             "  %%s = param @s : %s[2, %lld]\n"
             "  %%b = param @b : %s[2, %lld]\n"
             "  %%d = dequantize %%w, %%s, %%b {bits=%d, group=%lld, cols=%lld} : f32[2, %lld]\n"
             "  return %%d\n"
             "}\n",
             (long long)words, dt, (long long)groups, dt, (long long)groups, (long long)cols,
             (long long)words, dt, (long long)groups, dt, (long long)groups, bits,
             (long long)group, (long long)cols, (long long)cols);
    ref_param_t ps[] = {{"w", w}, {"s", s}, {"b", b}};
    ref_params_t params = {ps, 3, 0};
    vlmc_executor_options_t o = vlmc_executor_options_default();
    o.get_param = ref_get_param;
    o.param_ctx = &params;
    EXPECT_OK(ref_run(text, &o, "f", NULL, 0, r, 1));
  } else {
    /* Symbolic rows: the arguments bind R. */
    snprintf(text, sizeof text,
             "func @f(%%w: u32[R, %lld], %%s: %s[R, %lld], %%b: %s[R, %lld]) -> f32[R, %lld] {\n"
             "  %%d = dequantize %%w, %%s, %%b {bits=%d, group=%lld, cols=%lld} : f32[R, %lld]\n"
             "  return %%d\n"
             "}\n",
             (long long)words, dt, (long long)groups, dt, (long long)groups, (long long)cols,
             bits, (long long)group, (long long)cols, (long long)cols);
    vlmc_tensor_t args[] = {w, s, b};
    EXPECT_OK(ref_run(text, NULL, "f", args, 3, r, 1));
  }
  ref_expect_shape(&r[0], 2, SHAPE(ROWS, cols), what);
  ref_expect_f32(&r[0], expected, ROWS * cols, 0, what); /* bit for bit */
  ref_release_all(r, 1);
}

/* Scales and biases, 4 groups per row (2 rows), in each storage dtype: negative scales (MLX's
 * are when a group's maximum is its larger end), an f16 subnormal (MLX's eps 1e-7 scale),
 * values whose products round. */
static const float f32_scales[] = {0.0776367188f, -0.125f, 3.0e-3f, 1.0f / 3.0f,
                                   -0.0999755859f, 2.5f, 1.1920929e-07f, 0.7001953125f};
static const float f32_biases[] = {-0.69921875f, 1.875f, -0.0123456f, 0.0f,
                                   0.5f, -3.0f, 0.0f, -0.330078125f};
static const uint16_t bf16_scales[] = {0x3D9F, 0xBE00, 0x3B45, 0x3EAB,
                                       0xBDCD, 0x4020, 0x3400, 0x3F33};
static const uint16_t bf16_biases[] = {0xBF33, 0x3FF0, 0xBC4A, 0x0000,
                                       0x3F00, 0xC040, 0x8000, 0xBEA9};
static const uint16_t f16_scales[] = {0x2E66, 0xB400, 0x1A25, 0x3555,
                                      0xAE66, 0x4100, 0x0002, 0x399A};
static const uint16_t f16_biases[] = {0xB998, 0x3F80, 0xA252, 0x0000,
                                      0x3800, 0xC200, 0x8000, 0xB548};

static void test_reference_values(void) {
  const scale_set_t sets[] = {{"f32", VLMC_DTYPE_F32, f32_scales, f32_biases},
                              {"bf16", VLMC_DTYPE_BF16, bf16_scales, bf16_biases},
                              {"f16", VLMC_DTYPE_F16, f16_scales, f16_biases}};
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; ++i)
    for (int as_params = 0; as_params <= 1; ++as_params) {
      /* 4 bits: cols 20, group 8 -> groups of 8, 8, 4; 3 words, the last half padding. */
      check_dequantize(4, 8, 20, &sets[i], as_params);
      /* 4 bits, cols 64, group 32 (MLX's own shapes: no short group, no padding). */
      check_dequantize(4, 32, 64, &sets[i], as_params);
      /* 8 bits: cols 18, group 8 -> groups of 8, 8, 2; 5 words, the last half padding. */
      check_dequantize(8, 8, 18, &sets[i], as_params);
      /* 8 bits, cols 13, group 4 -> 4 groups (the last of 1); 4 words, 3 of 4 bytes padding. */
      check_dequantize(8, 4, 13, &sets[i], as_params);
    }
  /* The formula's independent anchors: the code 0 gives the bias exactly, the top code
   * scale * 15 + bias, each f32-rounded. */
  EXPECT_TRUE(affine(bf16_value(0x3D9F), 0, bf16_value(0xBF33)) == -0.69921875f);
  EXPECT_TRUE(f16_value(0x0002) == 0x1p-23f && f16_value(0x3C00) == 1.0f);
  EXPECT_TRUE(f16_value(0xB548) == -0.330078125f && bf16_value(0xBE00) == -0.125f);
}

/* docs/mlx_format.md section 3's worked example: the bf16 group whose first eight codes are
 * [0, 15, 9, 10, 6, 13, 0, 15] = word 0xF0D6A9F0 (scale 0x3D9F, bias 0xBF33) dequantizes to
 * [-0.69921875, 0.46533203, -0.00048828, 0.07714844, -0.23339844, 0.31005859, -0.69921875,
 * 0.46533203]; the other 56 values of the group (code 9 there) are dequantized too. */
static void test_mlx_worked_example(void) {
  const char *text =
      "param @w : u32[1, 8]\n"
      "param @s : bf16[1, 1]\n"
      "param @b : bf16[1, 1]\n"
      "func @f() -> f32[1, 64] {\n"
      "  %w = param @w : u32[1, 8]\n"
      "  %s = param @s : bf16[1, 1]\n"
      "  %b = param @b : bf16[1, 1]\n"
      "  %d = dequantize %w, %s, %b {bits=4, group=64, cols=64} : f32[1, 64]\n"
      "  return %d\n"
      "}\n";
  uint32_t words[8] = {0xF0D6A9F0u};
  for (int i = 1; i < 8; ++i) words[i] = 0x99999999u;
  uint16_t scale = 0x3D9F, bias = 0xBF33;
  ref_param_t ps[] = {{"w", vlmc_tensor_view(VLMC_DTYPE_U32, 2, SHAPE(1, 8), words)},
                      {"s", vlmc_tensor_view(VLMC_DTYPE_BF16, 2, SHAPE(1, 1), &scale)},
                      {"b", vlmc_tensor_view(VLMC_DTYPE_BF16, 2, SHAPE(1, 1), &bias)}};
  ref_params_t params = {ps, 3, 0};
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.get_param = ref_get_param;
  o.param_ctx = &params;
  vlmc_tensor_t r[1];
  EXPECT_OK(ref_run(text, &o, "f", NULL, 0, r, 1));
  /* the docs' values to 8 decimals; then code 9's -0.00048828 */
  float doc[64] = {-0.69921875f, 0.46533203f, -0.00048828f, 0.07714844f,
                   -0.23339844f, 0.31005859f, -0.69921875f, 0.46533203f};
  for (int k = 8; k < 64; ++k) doc[k] = -0.00048828f;
  ref_expect_f32(&r[0], doc, 64, 5e-9, "the worked example");
  ref_release_all(r, 1);
}

/* dequantize feeding a linear, as the model builder emits it: y = x . w^T with w dequantized
 * (4 bits, cols 20, group 8, bf16 scales); the executor computes the static dequantize once,
 * and a second run on the same executor gives the same values. */
static void test_dequantize_into_linear(void) {
  const char *text =
      "param @w : u32[3, 3]\n"
      "param @s : bf16[3, 3]\n"
      "param @b : bf16[3, 3]\n"
      "func @f(%x: f32[S, 20]) -> f32[S, 3] {\n"
      "  %w = param @w : u32[3, 3]\n"
      "  %s = param @s : bf16[3, 3]\n"
      "  %b = param @b : bf16[3, 3]\n"
      "  %d = dequantize %w, %s, %b {bits=4, group=8, cols=20} : f32[3, 20]\n"
      "  %y = linear %x, %d : f32[S, 3]\n"
      "  return %y\n"
      "}\n";
  uint32_t q[60], packed[9];
  for (int i = 0; i < 60; ++i) q[i] = code(i, 4);
  pack(q, 3, 20, 4, 3, packed);
  static const uint16_t scales[9] = {0x3D9F, 0xBE00, 0x3B45, 0x3EAB, 0xBDCD,
                                     0x4020, 0x3C00, 0x3F33, 0xBC80};
  static const uint16_t biases[9] = {0xBF33, 0x3FF0, 0xBC4A, 0x0000, 0x3F00,
                                     0xC040, 0x8000, 0xBEA9, 0x3E80};
  float w[60];
  for (int n = 0; n < 3; ++n)
    for (int k = 0; k < 20; ++k)
      w[n * 20 + k] = affine(bf16_value(scales[n * 3 + k / 8]), q[n * 20 + k],
                             bf16_value(biases[n * 3 + k / 8]));
  float *x = ref_rand_array(5 * 20, 11), expected[15];
  for (int m = 0; m < 5; ++m)
    for (int n = 0; n < 3; ++n) {
      double acc = 0;
      for (int k = 0; k < 20; ++k) acc += (double)x[m * 20 + k] * w[n * 20 + k];
      expected[m * 3 + n] = (float)acc;
    }
  ref_param_t ps[] = {{"w", vlmc_tensor_view(VLMC_DTYPE_U32, 2, SHAPE(3, 3), packed)},
                      {"s", vlmc_tensor_view(VLMC_DTYPE_BF16, 2, SHAPE(3, 3), scales)},
                      {"b", vlmc_tensor_view(VLMC_DTYPE_BF16, 2, SHAPE(3, 3), biases)}};
  ref_params_t params = {ps, 3, 0};
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.get_param = ref_get_param;
  o.param_ctx = &params;
  vlmc_module_t *module = ref_parse(text);
  vlmc_executor_t *ex = NULL;
  if (module) EXPECT_OK(vlmc_executor_create(module, &o, &ex));
  for (int run = 0; ex && run < 2; ++run) {
    vlmc_tensor_t args[] = {ref_f32(2, SHAPE(5, 20), x)}, r[1];
    memset(r, 0, sizeof r);
    EXPECT_OK(vlmc_executor_run(ex, "f", args, 1, r, 1));
    ref_expect_shape(&r[0], 2, SHAPE(5, 3), "linear of a dequantized weight");
    /* f64 sums in another order than the executor's: equal to ~1 f32 ulp. */
    ref_expect_f32(&r[0], expected, 15, 2e-6, "linear of a dequantized weight");
    ref_release_all(r, 1);
  }
  EXPECT_EQ_INT(params.calls, 3); /* each parameter read once, for both runs */
  vlmc_executor_destroy(ex);
  vlmc_module_destroy(module);
  free(x);
}

/* Packed words given as i64 storage (what the reference holds u32 values as) must fit u32. */
static void test_packed_storage_range(void) {
  const char *text = dequantize_func("u32[1, 1]", "f32[1, 1]", "f32[1, 1]",
                                     "bits=4, group=8, cols=8", "f32[1, 8]");
  int64_t word = 0x87654321;
  float scale = 0.5f, bias = -1.0f;
  vlmc_tensor_t args[] = {ref_i64(2, SHAPE(1, 1), &word), ref_f32(2, SHAPE(1, 1), &scale),
                          ref_f32(2, SHAPE(1, 1), &bias)};
  vlmc_tensor_t r[1];
  EXPECT_OK(ref_run(text, NULL, "f", args, 3, r, 1));
  /* nibbles from the low end: 1 2 3 4 5 6 7 8 */
  ref_expect_f32(&r[0], (float[]){-0.5f, 0, 0.5f, 1, 1.5f, 2, 2.5f, 3}, 8, 0, "i64 storage");
  ref_release_all(r, 1);
  int64_t too_big = (int64_t)1 << 32;
  vlmc_tensor_t bad[] = {ref_i64(2, SHAPE(1, 1), &too_big), ref_f32(2, SHAPE(1, 1), &scale),
                         ref_f32(2, SHAPE(1, 1), &bias)};
  EXPECT_ERROR(ref_run(text, NULL, "f", bad, 3, r, 1), "does not fit u32");
}

int main(void) {
  RUN_TEST(test_parse_print_round_trip);
  RUN_TEST(test_shape_rule_refusals);
  RUN_TEST(test_reference_values);
  RUN_TEST(test_mlx_worked_example);
  RUN_TEST(test_dequantize_into_linear);
  RUN_TEST(test_packed_storage_range);
  return TEST_SUMMARY();
}
