/* window-reorder on a small tower (two windowed blocks around a full-attention block, with
 * rope positions, a residual add and a merge reshape): the lowered module computes exactly
 * what the executor computes for window_attention directly, for every grid kind of spec §7.3
 * (empty windows, partial windows, the involution 32x32, a single window, several images,
 * video, 37x37 merged tokens), with the grid known at compile time (constants, checked
 * inverse, window counts in the remarks) and at run time (index ops). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, dirent: the pass test helper */
#include <stdio.h>
#include <stdlib.h>

#include "reference/executor.h"
#include "test.h"
#include "test_compiler_pass_util.h"

typedef struct {
  const char *name;
  int64_t grid[6];
  int num_images;
} grid_case_t;

static const grid_case_t kGrids[] = {
    {"1x16x16 (empty windows)", {1, 16, 16}, 1},
    {"1x12x20 (partial windows)", {1, 12, 20}, 1},
    {"1x32x32 (involution)", {1, 32, 32}, 1},
    {"1x4x4 (one window)", {1, 4, 4}, 1},
    {"two images", {1, 12, 20, 1, 8, 8}, 2},
    {"video 2x8x12", {2, 8, 12}, 1},
    {"1x74x74 (37x37 merged)", {1, 74, 74}, 1},
};

static int64_t patches_of(const grid_case_t *g) {
  int64_t n = 0;
  for (int i = 0; i < g->num_images; ++i)
    n += g->grid[3 * i] * g->grid[3 * i + 1] * g->grid[3 * i + 2];
  return n;
}

/* The tower; with `fixed`, P is static and the ops read a constant grid. The full segments
 * have one entry per image frame plus one. */
static vlmc_module_t *tower_module(const grid_case_t *g, bool fixed) {
  char rows[32], tokens[32], grid_ref[16] = "%grid", constant[256] = "", dims[16], cu[16];
  int64_t p = patches_of(g);
  int frames = 0;
  for (int i = 0; i < g->num_images; ++i) frames += (int)g->grid[3 * i];
  if (fixed) {
    snprintf(cu, sizeof cu, "%d", frames + 1);
    snprintf(rows, sizeof rows, "%lld", (long long)p);
    snprintf(tokens, sizeof tokens, "%lld", (long long)(p / 4));
    snprintf(dims, sizeof dims, "%d", g->num_images);
    snprintf(grid_ref, sizeof grid_ref, "%%gc");
    size_t n = (size_t)snprintf(constant, sizeof constant, "  %%gc = constant {value=[");
    for (int i = 0; i < 3 * g->num_images; ++i)
      n += (size_t)snprintf(constant + n, sizeof constant - n, i ? ", %lld" : "%lld",
                            (long long)g->grid[i]);
    snprintf(constant + n, sizeof constant - n, "]} : i64[%d,3]\n", g->num_images);
  } else {
    snprintf(cu, sizeof cu, "F"); /* bound by full_segments: frames + 1 */
    snprintf(rows, sizeof rows, "P");
    snprintf(tokens, sizeof tokens, "P/4");
    snprintf(dims, sizeof dims, "G");
  }
  const char *r = rows, *gr = grid_ref;
  char text[4096];
  snprintf(text, sizeof text,
           "func @tower(%%x: f32[%s,8], %%grid: i64[%s,3]) -> f32[%s,32] {\n"
           "%s"
           "  %%pos = vision_positions %s {merge=2} : i64[2,%s]\n"
           "  %%cu = full_segments %s : i64[%s]\n"
           "  %%x3 = reshape %%x : f32[%s,2,4]\n"
           "  %%q = rope %%x3, %%pos {layout=vision_2d, theta=10000.0} : f32[%s,2,4]\n"
           "  %%a = window_attention %%q, %%x3, %%x3, %s {window=112, patch=14, merge=2} "
           ": f32[%s,2,4]\n"
           "  %%a2 = reshape %%a : f32[%s,8]\n"
           "  %%h = add %%a2, %%x : f32[%s,8]\n"
           "  %%s = silu %%h : f32[%s,8]\n"
           "  %%s3 = reshape %%s : f32[%s,2,4]\n"
           "  %%f = attention %%s3, %%s3, %%s3, %%cu : f32[%s,2,4]\n"
           "  %%b = window_attention %%f, %%s3, %%f, %s {window=112, patch=14, merge=2, "
           "scale=0.5} : f32[%s,2,4]\n"
           "  %%b2 = reshape %%b : f32[%s,8]\n"
           "  %%o = add %%b2, %%h : f32[%s,8]\n"
           "  %%m = reshape %%o : f32[%s,32]\n"
           "  return %%m\n"
           "}\n",
           r, dims, tokens, constant, gr, r, gr, cu, r, r, gr, r, r, r, r, r, r, gr, r, r, r,
           tokens);
  return parse_module(text);
}

static uint64_t lcg(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return *state >> 33;
}

/* Runs @tower on x [P, 8] and the grid; returns the [P/4, 32] result (owned). */
static vlmc_status_t run_tower(const vlmc_module_t *module, const grid_case_t *g, const float *x,
                               vlmc_tensor_t *out) {
  vlmc_executor_t *ex;
  VLMC_RETURN_IF_ERROR(vlmc_executor_create(module, NULL, &ex));
  int64_t xs[2] = {patches_of(g), 8}, gs[2] = {g->num_images, 3};
  vlmc_tensor_t args[2] = {vlmc_tensor_view(VLMC_DTYPE_F32, 2, xs, x),
                           vlmc_tensor_view(VLMC_DTYPE_I64, 2, gs, g->grid)};
  vlmc_status_t st = vlmc_executor_run(ex, "tower", args, 2, out, 1);
  vlmc_executor_destroy(ex);
  return st;
}

static int count_kind(const vlmc_func_t *func, vlmc_op_kind_t kind) {
  int n = 0;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next) n += op->kind == kind;
  return n;
}

/* Same numbers before and after the pass; the pass leaves the tower in window order between
 * one gather in (rows and positions) and one gather out. */
static void check_grid(const grid_case_t *g, bool fixed) {
  vlmc_module_t *direct = tower_module(g, fixed), *lowered = tower_module(g, fixed);
  if (!direct || !lowered) {
    TEST_FAIL_("%s: the test module does not parse", g->name);
    return;
  }
  vlmc_strbuf_t log;
  vlmc_strbuf_init(&log);
  EXPECT_OK(run_passes(lowered, "window-reorder", &log));
  const vlmc_func_t *f = lowered->funcs[0];
  EXPECT_EQ_INT(count_kind(f, VLMC_OP_WINDOW_ATTENTION), 0);
  /* In: x and its positions; out: the merged rows. */
  EXPECT_EQ_INT(count_kind(f, VLMC_OP_GATHER), 3);
  int64_t p = patches_of(g);
  float *x = malloc((size_t)p * 8 * sizeof *x);
  uint64_t seed = 42;
  for (int64_t i = 0; i < p * 8; ++i) x[i] = (float)((double)lcg(&seed) / 2147483648.0 * 2 - 1);
  vlmc_tensor_t a = {0}, b = {0};
  EXPECT_OK(run_tower(direct, g, x, &a));
  EXPECT_OK(run_tower(lowered, g, x, &b));
  if (a.data && b.data) {
    double diff = vlmc_tensor_max_abs_diff(&a, &b);
    if (!(diff <= 1e-6)) TEST_FAIL_("%s (%s grid): max |diff| %g", g->name,
                                    fixed ? "fixed" : "run-time", diff);
  }
  vlmc_tensor_release(&a);
  vlmc_tensor_release(&b);
  free(x);
  vlmc_strbuf_deinit(&log);
  vlmc_module_destroy(direct);
  vlmc_module_destroy(lowered);
}

static void test_lowering_matches_direct_evaluation(void) {
  for (size_t i = 0; i < sizeof kGrids / sizeof kGrids[0]; ++i) {
    check_grid(&kGrids[i], false);
    check_grid(&kGrids[i], true);
  }
}

static const vlmc_attr_t *named_constant(const vlmc_func_t *func, const char *name) {
  for (const vlmc_op_t *op = func->body.first; op; op = op->next)
    if (op->kind == VLMC_OP_CONSTANT && op->results[0].name &&
        strcmp(op->results[0].name, name) == 0)
      return vlmc_op_attr(op, "value");
  return NULL;
}

/* Spec §3.3's worked example, folded: the order, its inverse (not the order: 1x12x20 is no
 * involution), the segments, and what the remarks say. */
static void test_fixed_grid_constants(void) {
  vlmc_module_t *module = tower_module(&kGrids[1], true);
  if (!module) return;
  vlmc_strbuf_t log;
  vlmc_strbuf_init(&log);
  EXPECT_OK(run_passes(module, "window-reorder", &log));
  const vlmc_func_t *f = module->funcs[0];
  static const int64_t kOrder[60] = {0,  1,  2,  3,  10, 11, 12, 13, 20, 21, 22, 23, 30, 31, 32,
                                     33, 4,  5,  6,  7,  14, 15, 16, 17, 24, 25, 26, 27, 34, 35,
                                     36, 37, 8,  9,  18, 19, 28, 29, 38, 39, 40, 41, 42, 43, 50,
                                     51, 52, 53, 44, 45, 46, 47, 54, 55, 56, 57, 48, 49, 58, 59};
  const vlmc_attr_t *order = named_constant(f, "window_order");
  const vlmc_attr_t *inverse = named_constant(f, "window_inverse");
  const vlmc_attr_t *cu = named_constant(f, "window_segments");
  EXPECT_TRUE(order && inverse && cu);
  if (order && inverse && cu) {
    EXPECT_EQ_INT(order->v.dense.count, 60);
    EXPECT_TRUE(memcmp(order->v.dense.ints, kOrder, sizeof kOrder) == 0);
    int same = 0;
    for (int j = 0; j < 60; ++j) {
      EXPECT_EQ_INT(inverse->v.dense.ints[order->v.dense.ints[j]], j);
      same += inverse->v.dense.ints[j] == order->v.dense.ints[j];
    }
    EXPECT_TRUE(same < 60); /* the inverse is not the order */
    static const int64_t kCu[7] = {0, 64, 128, 160, 192, 224, 240};
    EXPECT_EQ_INT(cu->v.dense.count, 7);
    EXPECT_TRUE(memcmp(cu->v.dense.ints, kCu, sizeof kCu) == 0);
  }
  const char *text = vlmc_strbuf_cstr(&log);
  EXPECT_TRUE(strstr(text, "image 0: grid 1x12x20, merged 6x10: 2x3 windows per frame, 6 with "
                           "tokens\n") != NULL);
  EXPECT_TRUE(strstr(text, "windows with tokens: 6 in all; order ∘ inverse = identity checked "
                           "on 60 merged tokens") != NULL);
  vlmc_strbuf_deinit(&log);
  vlmc_module_destroy(module);
}

static void expect_segments(const grid_case_t *g, const int64_t *cu, size_t count,
                            const char *remark) {
  vlmc_module_t *module = tower_module(g, true);
  if (!module) return;
  vlmc_strbuf_t log;
  vlmc_strbuf_init(&log);
  EXPECT_OK(run_passes(module, "window-reorder", &log));
  const vlmc_attr_t *got = named_constant(module->funcs[0], "window_segments");
  EXPECT_TRUE(got && got->v.dense.count == count &&
              memcmp(got->v.dense.ints, cu, count * sizeof *cu) == 0);
  if (!strstr(vlmc_strbuf_cstr(&log), remark))
    TEST_FAIL_("%s: remarks lack \"%s\":\n%s", g->name, remark, vlmc_strbuf_cstr(&log));
  vlmc_strbuf_deinit(&log);
  vlmc_module_destroy(module);
}

/* Spec §3.3's segment lists and the per-image window counts. */
static void test_segments_and_window_counts(void) {
  static const int64_t k16[5] = {0, 64, 128, 192, 256};
  expect_segments(&kGrids[0], k16, 5,
                  "image 0: grid 1x16x16, merged 8x8: 3x3 windows per frame, 4 with tokens (the "
                  "rest empty: pad = k when a side is a multiple of k)");
  static const int64_t kTwo[8] = {0, 64, 128, 160, 192, 224, 240, 304};
  expect_segments(&kGrids[4], kTwo, 8,
                  "image 1: grid 1x8x8, merged 4x4: 2x2 windows per frame, 1 with tokens");
  static const int64_t kVideo[5] = {0, 64, 96, 160, 192};
  expect_segments(&kGrids[5], kVideo, 5,
                  "image 0: grid 2x8x12, merged 4x6: 2x2 windows per frame, 2 with tokens");
  static const int64_t kOne[2] = {0, 16};
  expect_segments(&kGrids[3], kOne, 2, "windows with tokens: 1 in all");
  int64_t big[101];
  big[0] = 0;
  for (int a = 0, n = 1; a < 10; ++a)
    for (int b = 0; b < 10; ++b, ++n) {
      int rows = a < 9 ? 4 : 1, cols = b < 9 ? 4 : 1;
      big[n] = big[n - 1] + rows * cols * 4;
    }
  expect_segments(&kGrids[6], big, 101,
                  "image 0: grid 1x74x74, merged 37x37: 10x10 windows per frame, 100 with "
                  "tokens\n");
}

/* With the grid an argument, the pass emits the index ops (the inverse by
 * inverse_permutation of the order) and a fresh symbol for the segment count. */
static void test_runtime_grid_ops(void) {
  vlmc_module_t *module = tower_module(&kGrids[1], false);
  if (!module) return;
  vlmc_strbuf_t log;
  vlmc_strbuf_init(&log);
  EXPECT_OK(run_passes(module, "window-reorder", &log));
  char *text = vlmc_module_to_string(module);
  EXPECT_TRUE(strstr(text, "%window_order = window_order %grid {window=112, patch=14, merge=2} "
                           ": i64[P/4]") != NULL);
  EXPECT_TRUE(strstr(text, "%window_inverse = inverse_permutation %window_order : i64[P/4]") !=
              NULL);
  EXPECT_TRUE(strstr(text, "%window_inverse_x4 = inverse_permutation %window_order_x4 : i64[P]")
              != NULL);
  EXPECT_TRUE(strstr(text, "%window_segments = window_segments %grid {window=112, patch=14, "
                           "merge=2} : i64[W]") != NULL);
  EXPECT_TRUE(strstr(text, "%pos.win = gather %pos, %window_order_x4 {axis=1} : i64[2,P]") !=
              NULL);
  EXPECT_TRUE(strstr(text, "%m.img = gather %m, %window_inverse {axis=0} : f32[P/4,32]") != NULL);
  EXPECT_TRUE(strstr(vlmc_strbuf_cstr(&log), "window count per image: computed at run time from "
                                             "%grid") != NULL);
  free(text);
  vlmc_strbuf_deinit(&log);
  vlmc_module_destroy(module);
}

/* A constant grid whose token count is not the rows' is refused by name. */
static void test_grid_row_mismatch(void) {
  vlmc_module_t *module = parse_module(
      "func @f(%x: f32[64,1,4]) -> f32[64,1,4] {\n"
      "  %g = constant {value=[1, 12, 20]} : i64[1,3]\n"
      "  %a = window_attention %x, %x, %x, %g {window=112, patch=14, merge=2} : f32[64,1,4]\n"
      "  return %a\n"
      "}\n");
  if (!module) return;
  EXPECT_ERROR(run_passes(module, "window-reorder", NULL),
               "window-reorder: the grid has 60 merged tokens, but the rows hold 16");
  vlmc_module_destroy(module);
}

int main(void) {
  RUN_TEST(test_lowering_matches_direct_evaluation);
  RUN_TEST(test_fixed_grid_constants);
  RUN_TEST(test_segments_and_window_counts);
  RUN_TEST(test_runtime_grid_ops);
  RUN_TEST(test_grid_row_mismatch);
  return TEST_SUMMARY();
}
