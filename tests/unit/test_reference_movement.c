/* Data movement: gather, embedding, scatter_rows, reshape, transpose, concat, slice, argmax and
 * kv_cache_append (contents, errors, and the in-place growth of a cache handed back owned). */
#include "tests/unit/test_reference_util.h"

static void test_gather_axes_and_index_ranks(void) {
  const char *text =
      "func @f(%x: f32[3, 2], %i: i64[2, 2], %j: i64[1]) -> (f32[2, 2, 2], f32[3, 1]) {\n"
      "  %a = gather %x, %i {axis = 0} : f32[2, 2, 2]\n"
      "  %b = gather %x, %j {axis = 1} : f32[3, 1]\n"
      "  return %a, %b\n"
      "}\n";
  float x[] = {1, 2, 3, 4, 5, 6};
  int64_t i[] = {2, 0, 1, 1}, j[] = {1};
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(3, 2), x), ref_i64(2, SHAPE(2, 2), i),
                          ref_i64(1, SHAPE(1), j)};
  vlmc_tensor_t r[2];
  EXPECT_OK(ref_run(text, NULL, "f", args, 3, r, 2));
  ref_expect_f32(&r[0], (float[]){5, 6, 1, 2, 3, 4, 3, 4}, 8, 0, "gather rows");
  ref_expect_shape(&r[0], 3, SHAPE(2, 2, 2), "gather rows");
  ref_expect_f32(&r[1], (float[]){2, 4, 6}, 3, 0, "gather a column");
  ref_release_all(r, 2);
}

static void test_gather_and_embedding_refuse_bad_indices(void) {
  const char *text =
      "func @f(%x: f32[3, 2], %i: i64[2]) -> f32[2, 2] {\n"
      "  %a = gather %x, %i {axis = 0} : f32[2, 2]\n"
      "  return %a\n"
      "}\n"
      "func @g(%t: f32[3, 2], %ids: i64[2]) -> f32[2, 2] {\n"
      "  %e = embedding %t, %ids : f32[2, 2]\n"
      "  return %e\n"
      "}\n";
  float x[6] = {0};
  int64_t high[] = {0, 3}, negative[] = {-1, 0};
  vlmc_tensor_t a1[] = {ref_f32(2, SHAPE(3, 2), x), ref_i64(1, SHAPE(2), high)}, r[1];
  EXPECT_ERROR(ref_run(text, NULL, "f", a1, 2, r, 1),
               "test.vir:2:3: error: 'gather' op: index 3 at index 1 is outside [0, 3)");
  vlmc_tensor_t a2[] = {ref_f32(2, SHAPE(3, 2), x), ref_i64(1, SHAPE(2), negative)};
  EXPECT_ERROR(ref_run(text, NULL, "g", a2, 2, r, 1), "token id -1 at index 0 is outside [0, 3)");
}

static void test_embedding_and_scatter_rows(void) {
  const char *text =
      "func @f(%t: f32[4, 2], %ids: i64[1, 3], %rows: f32[2, 2], %pos: i64[2]) ->"
      " (f32[1, 3, 2], f32[4, 2]) {\n"
      "  %e = embedding %t, %ids : f32[1, 3, 2]\n"
      "  %s = scatter_rows %t, %rows, %pos : f32[4, 2]\n"
      "  return %e, %s\n"
      "}\n";
  float t[] = {0, 1, 10, 11, 20, 21, 30, 31}, rows[] = {-1, -2, -3, -4};
  int64_t ids[] = {3, 0, 3}, pos[] = {2, 0};
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(4, 2), t), ref_i64(2, SHAPE(1, 3), ids),
                          ref_f32(2, SHAPE(2, 2), rows), ref_i64(1, SHAPE(2), pos)};
  vlmc_tensor_t r[2];
  EXPECT_OK(ref_run(text, NULL, "f", args, 4, r, 2));
  ref_expect_f32(&r[0], (float[]){30, 31, 0, 1, 30, 31}, 6, 0, "embedding");
  ref_expect_f32(&r[1], (float[]){-3, -4, 10, 11, -1, -2, 30, 31}, 8, 0, "scatter_rows");
  EXPECT_TRUE(t[0] == 0 && t[4] == 20); /* the borrowed destination is not written */
  ref_release_all(r, 2);
}

static void test_reshape_transpose_concat_slice(void) {
  const char *text =
      "func @f(%x: f32[2, 3, 4]) -> (f32[4, 2, 3], f32[2, 3, 9], f32[2, 2, 4], f32[6, 4]) {\n"
      "  %t = transpose %x {perm = [2, 0, 1]} : f32[4, 2, 3]\n"
      "  %h = slice %x {axis = 2, start = 1, end = -1} : f32[2, 3, 2]\n"
      "  %c = concat %x, %h, %x {axis = 2} : f32[2, 3, 10]\n"
      "  %c9 = slice %c {axis = 2, start = 1} : f32[2, 3, 9]\n"
      "  %s = slice %x {axis = 1, start = -2} : f32[2, 2, 4]\n"
      "  %r = reshape %x : f32[6, 4]\n"
      "  return %t, %c9, %s, %r\n"
      "}\n";
  float x[24];
  for (int i = 0; i < 24; ++i) x[i] = (float)i;
  vlmc_tensor_t args[] = {ref_f32(3, SHAPE(2, 3, 4), x)}, r[4];
  EXPECT_OK(ref_run(text, NULL, "f", args, 1, r, 4));
  float t[24], c9[54], s[16];
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c) t[(a * 2 + b) * 3 + c] = x[(b * 3 + c) * 4 + a];
  ref_expect_f32(&r[0], t, 24, 0, "transpose [2, 0, 1]");
  for (int row = 0; row < 6; ++row) {
    const float *xr = x + row * 4;
    float full[10] = {xr[0], xr[1], xr[2], xr[3], xr[1], xr[2], xr[0], xr[1], xr[2], xr[3]};
    memcpy(c9 + row * 9, full + 1, 9 * sizeof(float));
  }
  ref_expect_f32(&r[1], c9, 54, 0, "concat then slice");
  for (int b = 0; b < 2; ++b) memcpy(s + b * 8, x + b * 12 + 4, 8 * sizeof(float));
  ref_expect_f32(&r[2], s, 16, 0, "slice from the end");
  ref_expect_f32(&r[3], x, 24, 0, "reshape");
  ref_expect_shape(&r[3], 2, SHAPE(6, 4), "reshape");
  ref_release_all(r, 4);
}

static void test_slice_out_of_bounds_at_run_time(void) {
  const char *text =
      "func @f(%x: f32[S, 2]) -> f32[S-3, 2] {\n"
      "  %y = slice %x {axis = 0, start = 3} : f32[S-3, 2]\n"
      "  return %y\n"
      "}\n";
  float x[4] = {0};
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(2, 2), x)}, r[1];
  /* S = 2 makes the result's S-3 negative: the shape cannot be evaluated. */
  EXPECT_ERROR(ref_run(text, NULL, "f", args, 1, r, 1), "'slice' op: result 0 dim 0:");
}

static void test_argmax_first_maximum_and_nan(void) {
  const char *text =
      "func @f(%x: f32[3, 4], %i: i64[2, 3]) -> (i64[3], i64[4], i64[2]) {\n"
      "  %a = argmax %x {axis = 1} : i64[3]\n"
      "  %b = argmax %x {axis = 0} : i64[4]\n"
      "  %c = argmax %i {axis = 1} : i64[2]\n"
      "  return %a, %b, %c\n"
      "}\n";
  float x[] = {1, 5, 5, 2, -1, -1, -3, -2, 0, NAN, 7, NAN};
  int64_t i[] = {4, 9, 9, -5, -5, -6};
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(3, 4), x), ref_i64(2, SHAPE(2, 3), i)}, r[3];
  EXPECT_OK(ref_run(text, NULL, "f", args, 2, r, 3));
  ref_expect_i64(&r[0], (int64_t[]){1, 0, 1}, 3, "argmax rows: first max, NaN wins");
  ref_expect_i64(&r[1], (int64_t[]){0, 2, 2, 2}, 4, "argmax columns");
  ref_expect_i64(&r[2], (int64_t[]){1, 0}, 2, "argmax integers");
  ref_release_all(r, 3);
}

static void test_argmax_of_an_empty_axis_and_bad_slice_bounds(void) {
  const char *text =
      "func @f(%x: f32[2, N]) -> i64[2] {\n"
      "  %a = argmax %x {axis = 1} : i64[2]\n"
      "  return %a\n"
      "}\n"
      "func @g(%x: f32[N]) -> f32[N-1] {\n"
      "  %s = slice %x {axis = 0, start = -1, end = -1} : f32[0]\n"
      "  %t = slice %x {axis = 0, start = 1} : f32[N-1]\n"
      "  return %t\n"
      "}\n";
  vlmc_tensor_t a1[] = {ref_f32(2, SHAPE(2, 0), NULL)}, r[1];
  EXPECT_ERROR(ref_run(text, NULL, "f", a1, 1, r, 1), "argmax over axis 1, which is empty");
  float x[3] = {1, 2, 3};
  vlmc_tensor_t a2[] = {ref_f32(1, SHAPE(3), x)};
  EXPECT_OK(ref_run(text, NULL, "g", a2, 1, r, 1));
  ref_expect_f32(&r[0], (float[]){2, 3}, 2, 0, "slice from 1");
  ref_release_all(r, 1);
  vlmc_tensor_t a3[] = {ref_f32(1, SHAPE(0), NULL)}; /* N = 0: start -1 resolves to -1 */
  EXPECT_ERROR(ref_run(text, NULL, "g", a3, 1, r, 1), "slice [-1, -1) of axis 0 does not fit");
}

static const char *kCacheText =
    "func @step(%cache: f32[C, 2, 3], %rows: f32[1, 2, 3]) -> f32[C+1, 2, 3] {\n"
    "  %new = kv_cache_append %cache, %rows : f32[C+1, 2, 3]\n"
    "  return %new\n"
    "}\n";

static void test_kv_cache_append_contents(void) {
  float cache[12], rows[6];
  for (int i = 0; i < 12; ++i) cache[i] = (float)i;
  for (int i = 0; i < 6; ++i) rows[i] = (float)(100 + i);
  vlmc_tensor_t args[] = {ref_f32(3, SHAPE(2, 2, 3), cache), ref_f32(3, SHAPE(1, 2, 3), rows)};
  vlmc_tensor_t r[1];
  EXPECT_OK(ref_run(kCacheText, NULL, "step", args, 2, r, 1));
  float expected[18];
  memcpy(expected, cache, sizeof cache);
  memcpy(expected + 12, rows, sizeof rows);
  ref_expect_f32(&r[0], expected, 18, 0, "appended");
  ref_expect_shape(&r[0], 3, SHAPE(3, 2, 3), "appended");
  EXPECT_TRUE(r[0].owned && r[0].capacity >= 18 * sizeof(float));
  /* An empty cache (C = 0) given without data. */
  vlmc_tensor_t empty[] = {ref_f32(3, SHAPE(0, 2, 3), NULL), ref_f32(3, SHAPE(1, 2, 3), rows)};
  vlmc_tensor_t r2[1];
  EXPECT_OK(ref_run(kCacheText, NULL, "step", empty, 2, r2, 1));
  ref_expect_f32(&r2[0], rows, 6, 0, "appended to nothing");
  ref_release_all(r, 1);
  ref_release_all(r2, 1);
}

/* 300 decode steps, each handing the previous (owned) cache back: the buffer grows
 * geometrically, so it moves only O(log steps) times, and the contents stay right. */
static void test_kv_cache_grows_in_place(void) {
  vlmc_module_t *module = ref_parse(kCacheText);
  if (!module) return;
  vlmc_executor_t *ex = NULL;
  EXPECT_OK(vlmc_executor_create(module, NULL, &ex));
  if (!ex) {
    vlmc_module_destroy(module);
    return;
  }
  vlmc_tensor_t cache = ref_f32(3, SHAPE(0, 2, 3), NULL);
  int moves = 0;
  const void *last = NULL;
  for (int step = 0; step < 300; ++step) {
    float row[6];
    for (int i = 0; i < 6; ++i) row[i] = (float)(step * 10 + i);
    vlmc_tensor_t args[] = {cache, ref_f32(3, SHAPE(1, 2, 3), row)}, r[1];
    vlmc_status_t st = vlmc_executor_run(ex, "step", args, 2, r, 1);
    EXPECT_OK(st);
    if (!r[0].data) break;
    EXPECT_TRUE(args[0].data == NULL || step == 0); /* the owned cache was taken */
    if (r[0].data != last) ++moves;
    last = r[0].data;
    cache = r[0];
  }
  EXPECT_EQ_INT(cache.shape[0], 300);
  EXPECT_TRUE(moves <= 12);
  bool right = cache.data != NULL;
  for (int step = 0; right && step < 300; ++step)
    for (int i = 0; i < 6; ++i)
      right = right && vlmc_tensor_f32(&cache)[step * 6 + i] == (float)(step * 10 + i);
  EXPECT_TRUE(right);
  vlmc_tensor_release(&cache);
  vlmc_executor_destroy(ex);
  vlmc_module_destroy(module);
}

int main(void) {
  RUN_TEST(test_gather_axes_and_index_ranks);
  RUN_TEST(test_gather_and_embedding_refuse_bad_indices);
  RUN_TEST(test_embedding_and_scatter_rows);
  RUN_TEST(test_reshape_transpose_concat_slice);
  RUN_TEST(test_slice_out_of_bounds_at_run_time);
  RUN_TEST(test_argmax_first_maximum_and_nan);
  RUN_TEST(test_argmax_of_an_empty_axis_and_bad_slice_bounds);
  RUN_TEST(test_kv_cache_append_contents);
  RUN_TEST(test_kv_cache_grows_in_place);
  return TEST_SUMMARY();
}
