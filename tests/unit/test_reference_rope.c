/* rope: one rotation by hand, then every layout against a formula written here in f64 (the
 * plane of each frequency slot by the spec's rules: §4.3 sectioned, §4.5 interleaved, §3.2 2-D),
 * an explicit `planes` table, partial rotary, and the sections check. */
#include "tests/unit/test_reference_util.h"

static void test_plain_rope_by_hand(void) {
  const char *text =
      "func @f(%x: f32[1, 1, 4], %pos: i64[1]) -> f32[1, 1, 4] {\n"
      "  %y = rope %x, %pos {layout = plain, theta = 10000.0} : f32[1, 1, 4]\n"
      "  return %y\n"
      "}\n";
  /* head_dim 4: pairs (0, 2) at frequency 1 and (1, 3) at 10000^-0.5 = 0.01; position 1. */
  float x[] = {1, 2, 3, 4};
  int64_t pos[] = {1};
  vlmc_tensor_t args[] = {ref_f32(3, SHAPE(1, 1, 4), x), ref_i64(1, SHAPE(1), pos)}, r[1];
  EXPECT_OK(ref_run(text, NULL, "f", args, 2, r, 1));
  double c1 = cos(1.0), s1 = sin(1.0), c2 = cos(0.01), s2 = sin(0.01);
  ref_expect_f32(&r[0], (float[]){(float)(1 * c1 - 3 * s1), (float)(2 * c2 - 4 * s2),
                                  (float)(3 * c1 + 1 * s1), (float)(4 * c2 + 2 * s2)},
                 4, 1e-6, "rope");
  ref_release_all(r, 1);
}

typedef enum { PLAIN, SECTIONED, INTERLEAVED, VISION_2D } layout_t;

/* The plane of frequency slot j, by the spec's rules. */
static int slot_plane(layout_t layout, const int *sections, int half, int j) {
  switch (layout) {
    case SECTIONED: return j < sections[0] ? 0 : j < sections[0] + sections[1] ? 1 : 2;
    case INTERLEAVED:
      if (j % 3 == 1 && j < 3 * sections[1]) return 1;
      if (j % 3 == 2 && j < 3 * sections[2]) return 2;
      return 0;
    case VISION_2D: return j < half / 2 ? 0 : 1;
    default: return 0;
  }
}

/* HF's inverse frequencies: text 1/theta^(2j/R); vision 1/theta^(2i/(R/2)) per plane. */
static double slot_frequency(layout_t layout, double theta, int rotary, int j) {
  int half = rotary / 2;
  if (layout == VISION_2D) return pow(theta, -2.0 * (j % (half / 2)) / half);
  return pow(theta, -2.0 * j / rotary);
}

static void rope_expected(layout_t layout, const int *sections, double theta, int rotary,
                          const float *x, const int64_t *pos, int tokens, int heads, int dim,
                          float *y) {
  int half = rotary / 2;
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < heads; ++h) {
      const float *xi = x + (t * heads + h) * dim;
      float *yi = y + (t * heads + h) * dim;
      for (int j = 0; j < half; ++j) {
        double angle = (double)pos[slot_plane(layout, sections, half, j) * tokens + t] *
                       slot_frequency(layout, theta, rotary, j);
        yi[j] = (float)(xi[j] * cos(angle) - xi[j + half] * sin(angle));
        yi[j + half] = (float)(xi[j + half] * cos(angle) + xi[j] * sin(angle));
      }
      for (int j = rotary; j < dim; ++j) yi[j] = xi[j];
    }
}

static void check_layout(const char *text, layout_t layout, const int *sections, double theta,
                         int rotary, int planes, int tokens, int heads, int dim) {
  float *x = ref_rand_array(tokens * heads * dim, 51);
  int64_t *pos = malloc(sizeof(int64_t) * (size_t)(planes * tokens));
  for (int p = 0; p < planes; ++p)
    for (int t = 0; t < tokens; ++t) pos[p * tokens + t] = 3 + t + 7 * p * (t % 5);
  float *expected = malloc(sizeof(float) * (size_t)(tokens * heads * dim));
  rope_expected(layout, sections, theta, rotary, x, pos, tokens, heads, dim, expected);
  vlmc_tensor_t args[] = {ref_f32(3, SHAPE(tokens, heads, dim), x),
                          ref_i64(2, SHAPE(planes, tokens), pos)};
  vlmc_tensor_t r[1];
  EXPECT_OK(ref_run(text, NULL, "f", args, 2, r, 1));
  /* f32 angles (as HF) against f64 ones here: positions up to ~100 -> ~1e-5. */
  ref_expect_f32(&r[0], expected, tokens * heads * dim, 3e-5, "rope");
  ref_release_all(r, 1);
  free(x);
  free(pos);
  free(expected);
}

static void test_mrope_sectioned_tiny_model(void) {
  /* The tiny config: head_dim 16, mrope_section [2, 3, 3], theta 1e6; 37 tokens, 4 heads. */
  const char *text =
      "func @f(%x: f32[S, 4, 16], %pos: i64[3, S]) -> f32[S, 4, 16] {\n"
      "  %y = rope %x, %pos {layout = mrope_sectioned, theta = 1000000.0, sections = [2, 3, 3]}"
      " : f32[S, 4, 16]\n"
      "  return %y\n"
      "}\n";
  int sections[] = {2, 3, 3};
  check_layout(text, SECTIONED, sections, 1e6, 16, 3, 37, 4, 16);
}

static void test_planes_attribute_overrides_the_layout(void) {
  /* The table the mrope-layout pass writes for [2, 3, 3] gives the same result... */
  const char *text =
      "func @f(%x: f32[S, 2, 16], %pos: i64[3, S]) -> f32[S, 2, 16] {\n"
      "  %y = rope %x, %pos {layout = mrope_sectioned, theta = 1000000.0, sections = [2, 3, 3],"
      " planes = [0, 0, 1, 1, 1, 2, 2, 2]} : f32[S, 2, 16]\n"
      "  return %y\n"
      "}\n";
  int sections[] = {2, 3, 3};
  check_layout(text, SECTIONED, sections, 1e6, 16, 3, 5, 2, 16);
  /* ... and a different table is obeyed: all slots on plane 2 is plain rope on plane 2. */
  const char *all_w =
      "func @f(%x: f32[S, 2, 16], %pos: i64[3, S]) -> f32[S, 2, 16] {\n"
      "  %y = rope %x, %pos {layout = mrope_sectioned, theta = 1000000.0, sections = [2, 3, 3],"
      " planes = [2, 2, 2, 2, 2, 2, 2, 2]} : f32[S, 2, 16]\n"
      "  return %y\n"
      "}\n";
  float *x = ref_rand_array(5 * 2 * 16, 52), expected[5 * 2 * 16];
  int64_t pos[15] = {0, 0, 0, 0, 0, 9, 9, 9, 9, 9, 1, 2, 3, 4, 5};
  rope_expected(PLAIN, NULL, 1e6, 16, x, pos + 10, 5, 2, 16, expected);
  vlmc_tensor_t args[] = {ref_f32(3, SHAPE(5, 2, 16), x), ref_i64(2, SHAPE(3, 5), pos)}, r[1];
  EXPECT_OK(ref_run(all_w, NULL, "f", args, 2, r, 1));
  ref_expect_f32(&r[0], expected, 5 * 2 * 16, 1e-5, "planes all 2");
  ref_release_all(r, 1);
  free(x);
}

static void test_mrope_interleaved_qwen3(void) {
  const char *text =
      "func @f(%x: f32[S, 1, 128], %pos: i64[3, S]) -> f32[S, 1, 128] {\n"
      "  %y = rope %x, %pos {layout = mrope_interleaved, theta = 5000000.0,"
      " sections = [24, 20, 20]} : f32[S, 1, 128]\n"
      "  return %y\n"
      "}\n";
  int sections[] = {24, 20, 20};
  check_layout(text, INTERLEAVED, sections, 5e6, 128, 3, 9, 1, 128);
}

static void test_vision_2d_rope(void) {
  /* Vision heads of 16: 8 slots, 4 frequencies per plane (rows then columns). */
  const char *text =
      "func @f(%x: f32[P, 4, 16], %pos: i64[2, P]) -> f32[P, 4, 16] {\n"
      "  %y = rope %x, %pos {layout = vision_2d, theta = 10000.0} : f32[P, 4, 16]\n"
      "  return %y\n"
      "}\n";
  check_layout(text, VISION_2D, NULL, 1e4, 16, 2, 37, 4, 16);
}

static void test_partial_rotary_passes_the_rest(void) {
  const char *text =
      "func @f(%x: f32[S, 3, 6], %pos: i64[1, S]) -> f32[S, 3, 6] {\n"
      "  %y = rope %x, %pos {layout = plain, theta = 10000.0, rotary_dim = 4} : f32[S, 3, 6]\n"
      "  return %y\n"
      "}\n";
  check_layout(text, PLAIN, NULL, 1e4, 4, 1, 7, 3, 6);
}

static void test_sections_must_sum_to_the_half_width(void) {
  const char *text =
      "func @f(%x: f32[S, 1, 16], %pos: i64[3, S]) -> f32[S, 1, 16] {\n"
      "  %y = rope %x, %pos {layout = mrope_sectioned, theta = 10000.0, sections = [2, 3, 4]}"
      " : f32[S, 1, 16]\n"
      "  return %y\n"
      "}\n";
  float x[16] = {0};
  int64_t pos[3] = {0};
  vlmc_tensor_t args[] = {ref_f32(3, SHAPE(1, 1, 16), x), ref_i64(2, SHAPE(3, 1), pos)}, r[1];
  EXPECT_ERROR(ref_run(text, NULL, "f", args, 2, r, 1),
               "sections [2, 3, 4] must sum to the rotary half-width 8");
}

int main(void) {
  RUN_TEST(test_plain_rope_by_hand);
  RUN_TEST(test_mrope_sectioned_tiny_model);
  RUN_TEST(test_planes_attribute_overrides_the_layout);
  RUN_TEST(test_mrope_interleaved_qwen3);
  RUN_TEST(test_vision_2d_rope);
  RUN_TEST(test_partial_rotary_passes_the_rest);
  RUN_TEST(test_sections_must_sum_to_the_half_width);
  return TEST_SUMMARY();
}
