/* attention and window_attention: a case by hand, then GQA, causal, segmented and both, at
 * awkward sizes, against a masked-matrix implementation written here, and bit for bit against
 * the documented order of operations whatever the blocking; the errors; and window_attention
 * equal, bit for bit, to the program the window-reorder pass lowers it to. */
#include "tests/unit/test_reference_util.h"

static void test_attention_by_hand(void) {
  const char *text =
      "func @f(%q: f32[1, 1, 2], %k: f32[2, 1, 2], %v: f32[2, 1, 2]) -> f32[1, 1, 2] {\n"
      "  %y = attention %q, %k, %v {scale = 1.0} : f32[1, 1, 2]\n"
      "  return %y\n"
      "}\n";
  float q[] = {1, 0}, k[] = {1, 0, 0, 1}, v[] = {1, 2, 3, 4};
  vlmc_tensor_t args[] = {ref_f32(3, SHAPE(1, 1, 2), q), ref_f32(3, SHAPE(2, 1, 2), k),
                          ref_f32(3, SHAPE(2, 1, 2), v)};
  vlmc_tensor_t r[1];
  EXPECT_OK(ref_run(text, NULL, "f", args, 3, r, 1));
  /* Scores [1, 0]: weights e/(e+1), 1/(e+1). */
  double p = exp(1.0) / (exp(1.0) + 1);
  ref_expect_f32(&r[0], (float[]){(float)(p * 1 + (1 - p) * 3), (float)(p * 2 + (1 - p) * 4)}, 2,
                 1e-6, "attention");
  ref_release_all(r, 1);
}

/* The straightforward definition: a full S x T mask, masked scores at -inf, softmax per row. */
static void attention_expected(const float *q, const float *k, const float *v, int s, int t,
                               int hq, int hkv, int d, double scale, bool causal,
                               const int64_t *cu, int segments, float *y) {
  double *score = malloc(sizeof(double) * (size_t)t);
  for (int h = 0; h < hq; ++h) {
    int kh = h / (hq / hkv);
    for (int i = 0; i < s; ++i) {
      double max = -INFINITY, sum = 0;
      for (int j = 0; j < t; ++j) {
        bool visible = !causal || j <= t - s + i;
        if (cu) {
          int seg_i = 0, seg_j = 0;
          for (int g = 0; g < segments; ++g) {
            if (i >= cu[g] && i < cu[g + 1]) seg_i = g;
            if (j >= cu[g] && j < cu[g + 1]) seg_j = g;
          }
          visible = visible && seg_i == seg_j;
        }
        double dot = 0;
        const float *qi = q + (i * hq + h) * d, *kj = k + (j * hkv + kh) * d;
        for (int c = 0; c < d; ++c) dot += (double)qi[c] * kj[c];
        score[j] = visible ? dot * scale : -INFINITY;
        if (score[j] > max) max = score[j];
      }
      for (int j = 0; j < t; ++j) sum += exp(score[j] - max);
      for (int c = 0; c < d; ++c) {
        double acc = 0;
        for (int j = 0; j < t; ++j) acc += exp(score[j] - max) / sum * v[(j * hkv + kh) * d + c];
        y[(i * hq + h) * d + c] = (float)acc;
      }
    }
  }
  free(score);
}

typedef struct {
  int s, t, hq, hkv, d;
  bool causal;
  const int64_t *cu;
  int segments;
  uint32_t threads;
} attention_case_t;

static void check_attention_case(const attention_case_t *c, const char *text) {
  float *q = ref_rand_array(c->s * c->hq * c->d, 21), *k = ref_rand_array(c->t * c->hkv * c->d, 22);
  float *v = ref_rand_array(c->t * c->hkv * c->d, 23);
  float *expected = malloc(sizeof(float) * (size_t)(c->s * c->hq * c->d));
  for (int i = 0; i < c->s * c->hq * c->d; ++i) q[i] *= 3; /* sharper softmax */
  attention_expected(q, k, v, c->s, c->t, c->hq, c->hkv, c->d, 1.0 / sqrt(c->d), c->causal, c->cu,
                     c->segments, expected);
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.threads = c->threads;
  vlmc_tensor_t args[] = {ref_f32(3, SHAPE(c->s, c->hq, c->d), q),
                          ref_f32(3, SHAPE(c->t, c->hkv, c->d), k),
                          ref_f32(3, SHAPE(c->t, c->hkv, c->d), v),
                          ref_i64(1, SHAPE(c->segments + 1), c->cu)};
  vlmc_tensor_t r[1];
  EXPECT_OK(ref_run(text, &o, "f", args, c->cu ? 4 : 3, r, 1));
  ref_expect_f32(&r[0], expected, c->s * c->hq * c->d, 1e-6, "attention");
  ref_release_all(r, 1);
  free(q);
  free(k);
  free(v);
  free(expected);
}

static void test_attention_gqa_causal_with_a_cache(void) {
  /* 5 new queries over 37 keys (32 cached): query i sits at position 32 + i. 4 query heads
   * share 2 kv heads. */
  const char *text =
      "func @f(%q: f32[S, 4, 16], %k: f32[T, 2, 16], %v: f32[T, 2, 16]) -> f32[S, 4, 16] {\n"
      "  %y = attention %q, %k, %v {causal = true} : f32[S, 4, 16]\n"
      "  return %y\n"
      "}\n";
  attention_case_t c = {5, 37, 4, 2, 16, true, NULL, 0, 1};
  check_attention_case(&c, text);
  attention_case_t c1 = {1, 176, 4, 2, 16, true, NULL, 0, 2}; /* one decode step, 2 threads */
  check_attention_case(&c1, text);
  attention_case_t c2 = {37, 37, 4, 2, 16, true, NULL, 0, 2}; /* prefill */
  check_attention_case(&c2, text);
}

static void test_attention_segments_block_diagonal(void) {
  const char *text =
      "func @f(%q: f32[S, 2, 8], %k: f32[S, 2, 8], %v: f32[S, 2, 8], %cu: i64[K]) ->"
      " f32[S, 2, 8] {\n"
      "  %y = attention %q, %k, %v, %cu : f32[S, 2, 8]\n"
      "  return %y\n"
      "}\n"
      "func @g(%q: f32[S, 2, 8], %k: f32[S, 2, 8], %v: f32[S, 2, 8], %cu: i64[K]) ->"
      " f32[S, 2, 8] {\n"
      "  %y = attention %q, %k, %v, %cu {causal = true} : f32[S, 2, 8]\n"
      "  return %y\n"
      "}\n";
  int64_t cu[] = {0, 1, 17, 17, 37}; /* segments of 1, 16, 0 and 20 rows */
  attention_case_t c = {37, 37, 2, 2, 8, false, cu, 4, 2};
  check_attention_case(&c, text);
  /* Both rules at once (@g). */
  float *x = ref_rand_array(37 * 16, 31);
  float *expected = malloc(sizeof(float) * 37 * 16);
  attention_expected(x, x, x, 37, 37, 2, 2, 8, 1.0 / sqrt(8.0), true, cu, 4, expected);
  vlmc_tensor_t args[] = {ref_f32(3, SHAPE(37, 2, 8), x), ref_f32(3, SHAPE(37, 2, 8), x),
                          ref_f32(3, SHAPE(37, 2, 8), x), ref_i64(1, SHAPE(5), cu)};
  vlmc_tensor_t r[1];
  EXPECT_OK(ref_run(text, NULL, "g", args, 4, r, 1));
  ref_expect_f32(&r[0], expected, 37 * 16, 1e-6, "causal + segments");
  ref_release_all(r, 1);
  free(x);
  free(expected);
}

/* The executor's own order of operations (README): per query, the visible keys' scores
 * (f64 dot products in c order, times scale), their max, exp(score - max) and its sum in key
 * order, the weighted sum of v in key order, one division. Blocking may not change a bit. */
static void attention_exact(const float *q, const float *k, const float *v, int s, int t, int hq,
                            int hkv, int d, int dv, bool causal, const int64_t *cu,
                            int segments, float *y) {
  double *score = malloc(sizeof(double) * (size_t)t), *acc = malloc(sizeof(double) * dv);
  double scale = 1.0 / sqrt(d);
  for (int i = 0; i < s; ++i)
    for (int h = 0; h < hq; ++h) {
      int kh = h / (hq / hkv), lo = 0, hi = t;
      for (int g = 0; cu && g < segments; ++g)
        if (i >= cu[g] && i < cu[g + 1]) lo = (int)cu[g], hi = (int)cu[g + 1];
      if (causal && t - s + i + 1 < hi) hi = t - s + i + 1;
      double max = -INFINITY, sum = 0;
      const float *qi = q + (i * hq + h) * d;
      for (int j = lo; j < hi; ++j) {
        double dot = 0;
        for (int c = 0; c < d; ++c) dot += (double)qi[c] * k[(j * hkv + kh) * d + c];
        score[j] = dot * scale;
        max = fmax(max, score[j]);
      }
      for (int c = 0; c < dv; ++c) acc[c] = 0;
      for (int j = lo; j < hi; ++j) {
        double p = exp(score[j] - max);
        sum += p;
        for (int c = 0; c < dv; ++c) acc[c] += p * v[(j * hkv + kh) * dv + c];
      }
      for (int c = 0; c < dv; ++c) y[(i * hq + h) * dv + c] = (float)(acc[c] / sum);
    }
  free(score);
  free(acc);
}

static void check_attention_exact(int s, int t, int d, int dv, bool causal, const int64_t *cu,
                                  int segments, uint32_t threads) {
  char text[512];
  snprintf(text, sizeof text,
           "func @f(%%q: f32[%d, 4, %d], %%k: f32[%d, 2, %d], %%v: f32[%d, 2, %d]%s) ->"
           " f32[%d, 4, %d] {\n"
           "  %%y = attention %%q, %%k, %%v%s {causal = %s} : f32[%d, 4, %d]\n"
           "  return %%y\n"
           "}\n",
           s, d, t, d, t, dv, cu ? ", %cu: i64[K]" : "", s, dv, cu ? ", %cu" : "",
           causal ? "true" : "false", s, dv);
  float *q = ref_rand_array(s * 4 * d, 61), *k = ref_rand_array(t * 2 * d, 62);
  float *v = ref_rand_array(t * 2 * dv, 63), *want = malloc(sizeof(float) * s * 4 * dv);
  for (int i = 0; i < s * 4 * d; ++i) q[i] *= 3;
  attention_exact(q, k, v, s, t, 4, 2, d, dv, causal, cu, segments, want);
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.threads = threads;
  vlmc_tensor_t args[] = {ref_f32(3, SHAPE(s, 4, d), q), ref_f32(3, SHAPE(t, 2, d), k),
                          ref_f32(3, SHAPE(t, 2, dv), v), ref_i64(1, SHAPE(segments + 1), cu)};
  vlmc_tensor_t r[1];
  EXPECT_OK(ref_run(text, &o, "f", args, cu ? 4 : 3, r, 1));
  ref_expect_f32(&r[0], want, s * 4 * dv, 0, "attention, bit for bit");
  ref_release_all(r, 1);
  free(q);
  free(k);
  free(v);
  free(want);
}

/* Query blocks of 4 and key panels of 64 do not line up with these sizes, segments or causal
 * horizons; head sizes above 64 and value sizes that are not multiples of 4 take other paths.
 * Every case, on one thread and two, gives the plain loop's bits. */
static void test_attention_is_bit_exact_across_blockings(void) {
  int64_t cu[] = {0, 3, 64, 64, 70, 130};
  for (uint32_t threads = 1; threads <= 2; ++threads) {
    check_attention_exact(130, 130, 16, 16, false, NULL, 0, threads);
    check_attention_exact(130, 130, 16, 6, true, NULL, 0, threads);
    check_attention_exact(130, 130, 8, 12, false, cu, 5, threads);
    check_attention_exact(130, 130, 8, 8, true, cu, 5, threads);
    check_attention_exact(7, 135, 70, 4, true, NULL, 0, threads);
    check_attention_exact(1, 65, 32, 32, true, NULL, 0, threads);
  }
}

static void test_attention_bad_segments_and_hidden_queries(void) {
  const char *text =
      "func @f(%q: f32[S, 1, 2], %k: f32[S, 1, 2], %v: f32[S, 1, 2], %cu: i64[K]) ->"
      " f32[S, 1, 2] {\n"
      "  %y = attention %q, %k, %v, %cu : f32[S, 1, 2]\n"
      "  return %y\n"
      "}\n"
      "func @g(%q: f32[S, 1, 2], %k: f32[T, 1, 2], %v: f32[T, 1, 2]) -> f32[S, 1, 2] {\n"
      "  %y = attention %q, %k, %v {causal = true} : f32[S, 1, 2]\n"
      "  return %y\n"
      "}\n";
  float x[8] = {0};
  int64_t short_cu[] = {0, 2, 3}, backwards[] = {0, 3, 2, 4};
  vlmc_tensor_t a1[] = {ref_f32(3, SHAPE(4, 1, 2), x), ref_f32(3, SHAPE(4, 1, 2), x),
                        ref_f32(3, SHAPE(4, 1, 2), x), ref_i64(1, SHAPE(3), short_cu)};
  vlmc_tensor_t r[1];
  EXPECT_ERROR(ref_run(text, NULL, "f", a1, 4, r, 1),
               "cu_seqlens must start at 0, never decrease and end at 4");
  vlmc_tensor_t a2[] = {ref_f32(3, SHAPE(4, 1, 2), x), ref_f32(3, SHAPE(4, 1, 2), x),
                        ref_f32(3, SHAPE(4, 1, 2), x), ref_i64(1, SHAPE(4), backwards)};
  EXPECT_ERROR(ref_run(text, NULL, "f", a2, 4, r, 1), "test.vir:2:3: error: 'attention' op:");
  /* 4 queries over 2 keys, causal: query 0 sits at position -2. */
  vlmc_tensor_t a3[] = {ref_f32(3, SHAPE(4, 1, 2), x), ref_f32(3, SHAPE(2, 1, 2), x),
                        ref_f32(3, SHAPE(2, 1, 2), x)};
  EXPECT_ERROR(ref_run(text, NULL, "g", a3, 3, r, 1), "query 0 of 4 sees no key");
}

/* window_attention == window_order, gather into window order (merge^2 patches per merged
 * token), attention over window_segments, gather back by the inverse permutation. */
static const char *kWindowText =
    "func @direct(%q: f32[P, 2, 8], %k: f32[P, 2, 8], %v: f32[P, 2, 8], %grid: i64[N, 3]) ->"
    " f32[P, 2, 8] {\n"
    "  %y = window_attention %q, %k, %v, %grid {window = 112, patch = 14, merge = 2} :"
    " f32[P, 2, 8]\n"
    "  return %y\n"
    "}\n"
    "func @lowered(%q: f32[P, 2, 8], %k: f32[P, 2, 8], %v: f32[P, 2, 8], %grid: i64[N, 3]) ->"
    " f32[P, 2, 8] {\n"
    "  %order = window_order %grid {window = 112, patch = 14, merge = 2} : i64[P/4]\n"
    "  %cu = window_segments %grid {window = 112, patch = 14, merge = 2} : i64[W]\n"
    "  %inv = inverse_permutation %order : i64[P/4]\n"
    "  %q4 = reshape %q : f32[P/4, 4, 16]\n"
    "  %k4 = reshape %k : f32[P/4, 4, 16]\n"
    "  %v4 = reshape %v : f32[P/4, 4, 16]\n"
    "  %qw4 = gather %q4, %order {axis = 0} : f32[P/4, 4, 16]\n"
    "  %kw4 = gather %k4, %order {axis = 0} : f32[P/4, 4, 16]\n"
    "  %vw4 = gather %v4, %order {axis = 0} : f32[P/4, 4, 16]\n"
    "  %qw = reshape %qw4 : f32[P, 2, 8]\n"
    "  %kw = reshape %kw4 : f32[P, 2, 8]\n"
    "  %vw = reshape %vw4 : f32[P, 2, 8]\n"
    "  %yw = attention %qw, %kw, %vw, %cu : f32[P, 2, 8]\n"
    "  %yw4 = reshape %yw : f32[P/4, 4, 16]\n"
    "  %y4 = gather %yw4, %inv {axis = 0} : f32[P/4, 4, 16]\n"
    "  %y = reshape %y4 : f32[P, 2, 8]\n"
    "  return %y\n"
    "}\n";

static void check_window_attention(const int64_t *grid, int images, int64_t patches) {
  float *q = ref_rand_array(patches * 16, 41), *k = ref_rand_array(patches * 16, 42);
  float *v = ref_rand_array(patches * 16, 43);
  vlmc_tensor_t a1[] = {ref_f32(3, SHAPE(patches, 2, 8), q), ref_f32(3, SHAPE(patches, 2, 8), k),
                        ref_f32(3, SHAPE(patches, 2, 8), v), ref_i64(2, SHAPE(images, 3), grid)};
  vlmc_tensor_t a2[4];
  memcpy(a2, a1, sizeof a1);
  vlmc_tensor_t direct[1], lowered[1];
  EXPECT_OK(ref_run(kWindowText, NULL, "direct", a1, 4, direct, 1));
  EXPECT_OK(ref_run(kWindowText, NULL, "lowered", a2, 4, lowered, 1));
  if (direct[0].data && lowered[0].data)
    EXPECT_TRUE(memcmp(direct[0].data, lowered[0].data, sizeof(float) * (size_t)patches * 16) == 0);
  /* Not the plain full attention: the windows matter on these grids. */
  float *full = malloc(sizeof(float) * (size_t)patches * 16);
  attention_expected(q, k, v, (int)patches, (int)patches, 2, 2, 8, 1.0 / sqrt(8.0), false, NULL, 0,
                     full);
  if (direct[0].data) EXPECT_TRUE(vlmc_tensor_max_abs_diff(&direct[0], &lowered[0]) == 0);
  double far = 0;
  for (int64_t i = 0; direct[0].data && i < patches * 16; ++i)
    far = fmax(far, fabs(vlmc_tensor_f32(&direct[0])[i] - full[i]));
  EXPECT_TRUE(far > 1e-3);
  ref_release_all(direct, 1);
  ref_release_all(lowered, 1);
  free(full);
  free(q);
  free(k);
  free(v);
}

static void test_window_attention_matches_its_lowering(void) {
  int64_t g1[] = {1, 12, 20};           /* partial windows on both axes */
  check_window_attention(g1, 1, 240);
  int64_t g2[] = {1, 12, 20, 1, 8, 8};  /* two images: offsets and segments per image */
  check_window_attention(g2, 2, 304);
  int64_t g3[] = {1, 16, 16};           /* empty padding windows: repeated boundaries */
  check_window_attention(g3, 1, 256);
}

static void test_window_attention_grid_mismatch(void) {
  int64_t grid[] = {1, 12, 20};
  float x[100 * 16] = {0};
  vlmc_tensor_t args[] = {ref_f32(3, SHAPE(100, 2, 8), x), ref_f32(3, SHAPE(100, 2, 8), x),
                          ref_f32(3, SHAPE(100, 2, 8), x), ref_i64(2, SHAPE(1, 3), grid)};
  vlmc_tensor_t r[1];
  EXPECT_ERROR(ref_run(kWindowText, NULL, "direct", args, 4, r, 1),
               "the grid has 60 merged tokens of 4 patches, but q has 100 rows");
  int64_t odd[] = {1, 5, 20}; /* h not a multiple of merge */
  vlmc_tensor_t a2[] = {ref_f32(3, SHAPE(100, 2, 8), x), ref_f32(3, SHAPE(100, 2, 8), x),
                        ref_f32(3, SHAPE(100, 2, 8), x), ref_i64(2, SHAPE(1, 3), odd)};
  EXPECT_ERROR(ref_run(kWindowText, NULL, "direct", a2, 4, r, 1), "grid row 0 is (1, 5, 20)");
}

int main(void) {
  RUN_TEST(test_attention_by_hand);
  RUN_TEST(test_attention_gqa_causal_with_a_cache);
  RUN_TEST(test_attention_segments_block_diagonal);
  RUN_TEST(test_attention_is_bit_exact_across_blockings);
  RUN_TEST(test_attention_bad_segments_and_hidden_queries);
  RUN_TEST(test_window_attention_matches_its_lowering);
  RUN_TEST(test_window_attention_grid_mismatch);
  return TEST_SUMMARY();
}
