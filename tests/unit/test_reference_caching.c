/* What the executor does to be fast without changing a bit of its results: values computed
 * from parameters and constants only are computed once per executor and cached; casts to f32
 * and reshapes pass their operand on instead of copying it; a bf16 / f16 weight that only
 * linear and embedding read stays in its own storage; linear weights are packed into panels
 * (bf16 when exact) once. Each is checked against the plain definition, bit for bit, and
 * against the same run with range recording on (which turns the raw weights off). */
#include "tests/unit/test_reference_util.h"

/* y[r, o] = sum_k x[r, k] * w[o, k] (f64, k order) + b[o]: linear's definition, exactly. */
static void linear_exact(const float *x, const float *w, const float *b, int64_t rows,
                         int64_t in, int64_t out, float *y) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t k = 0; k < in; ++k) acc += (double)x[r * in + k] * w[o * in + k];
      y[r * out + o] = (float)(acc + (b ? (double)b[o] : 0.0));
    }
}

/* ---- static values ---- */

typedef struct {
  const void *data[4]; /* the tapped tensor's data, by run */
  int taps;
  int ranges;          /* range reports of %s */
} observer_t;

static vlmc_status_t remember_tap(void *ctx, const char *name, const vlmc_op_t *op,
                                  const vlmc_tensor_t *t) {
  observer_t *o = ctx;
  if (o->taps < 4) o->data[o->taps] = t->data;
  ++o->taps;
  return NULL;
}

static void count_range(void *ctx, const vlmc_value_range_t *r) {
  observer_t *o = ctx;
  if (r->value->name && strcmp(r->value->name, "s") == 0) ++o->ranges;
}

static const char *kStaticText =
    "param @w : f32[2, 3]\n"
    "func @f(%x: f32[S, 3]) -> (f32[S, 2], f32[2, 3]) {\n"
    "  %w = param @w : f32[2, 3]\n"
    "  %c = constant {value = [1, 2, 3, 4, 5, 6]} : f32[2, 3]\n"
    "  %s = add %w, %c : f32[2, 3]\n"
    "  tap @s %s\n"
    "  %y = linear %x, %s : f32[S, 2]\n"
    "  return %y, %s\n"
    "}\n";

/* %s depends on a parameter and a constant only: computed on the first run, then the same
 * buffer is handed out (the tap sees one address), while range recording still sees it on
 * every run; a returned static value is a copy, so the cache survives the caller. */
static void test_static_values_are_computed_once(void) {
  float w[] = {0.5f, -1, 2, 0, 1, -3}, x[] = {1, 2, 3, -1, 0, 1};
  ref_param_t ps[] = {{"w", ref_f32(2, SHAPE(2, 3), w)}};
  ref_params_t params = {ps, 1, 0};
  observer_t seen = {{NULL}, 0, 0};
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.get_param = ref_get_param;
  o.param_ctx = &params;
  o.on_tap = remember_tap;
  o.tap_ctx = &seen;
  o.on_range = count_range;
  o.range_ctx = &seen;
  vlmc_module_t *module = ref_parse(kStaticText);
  if (!module) return;
  vlmc_executor_t *ex = NULL;
  EXPECT_OK(vlmc_executor_create(module, &o, &ex));
  float s[] = {1.5f, 1, 5, 4, 6, 3}, y[4];
  linear_exact(x, s, NULL, 2, 3, 2, y);
  for (int run = 0; ex && run < 3; ++run) {
    vlmc_tensor_t args[] = {ref_f32(2, SHAPE(2, 3), x)}, r[2];
    EXPECT_OK(vlmc_executor_run(ex, "f", args, 1, r, 2));
    ref_expect_f32(&r[0], y, 4, 0, "linear of a cached weight");
    ref_expect_f32(&r[1], s, 6, 0, "returned static value");
    EXPECT_TRUE(r[1].owned);
    if (r[1].data) vlmc_tensor_f32(&r[1])[0] = 99; /* the caller's copy, not the cache */
    ref_release_all(r, 2);
  }
  EXPECT_EQ_INT(seen.taps, 3);
  EXPECT_TRUE(seen.data[0] != NULL && seen.data[0] == seen.data[1] &&
              seen.data[1] == seen.data[2]);
  EXPECT_EQ_INT(seen.ranges, 3);
  EXPECT_EQ_INT(params.calls, 1);
  vlmc_executor_destroy(ex);
  vlmc_module_destroy(module);
}

/* A static op that fails is not cached: it fails on every run, located at the op. */
static void test_failing_static_op_fails_every_run(void) {
  const char *text =
      "func @f(%x: i64[2]) -> i64[2] {\n"
      "  %c = constant {value = [1.0, 3.0e30]} : f32[2]\n"
      "  %i = cast %c {dtype = i32} : i32[2]\n"
      "  %j = cast %i {dtype = i64} : i64[2]\n"
      "  %y = add %x, %j : i64[2]\n"
      "  return %y\n"
      "}\n";
  vlmc_module_t *module = ref_parse(text);
  if (!module) return;
  vlmc_executor_t *ex = NULL;
  EXPECT_OK(vlmc_executor_create(module, NULL, &ex));
  int64_t x[] = {1, 2};
  for (int run = 0; ex && run < 2; ++run) {
    vlmc_tensor_t args[] = {ref_i64(1, SHAPE(2), x)}, r[1];
    EXPECT_ERROR(vlmc_executor_run(ex, "f", args, 1, r, 1),
                 "test.vir:3:3: error: 'cast' op: value 3e+30 at index 1 does not fit i32");
  }
  vlmc_executor_destroy(ex);
  vlmc_module_destroy(module);
}

/* ---- passing operands on ---- */

/* reshape and cast-to-f32 hand on a borrowed argument as a view, take a dying buffer, and copy
 * one that is still used later; the results are right and owned in every case. */
static void test_reshape_and_cast_pass_values_on(void) {
  const char *text =
      "func @f(%x: f32[2, 3]) -> (f32[3, 2], f32[6], f32[2, 3], f32[6], f32[6]) {\n"
      "  %v = reshape %x : f32[3, 2]\n"
      "  %c = cast %x {dtype = f32} : f32[2, 3]\n"
      "  %a = add %x, %x : f32[2, 3]\n"
      "  %kept = reshape %a : f32[6]\n"
      "  %b = add %a, %a : f32[2, 3]\n"
      "  %taken = reshape %b : f32[6]\n"
      "  %n = neg %taken : f32[6]\n"
      "  return %v, %kept, %c, %taken, %n\n"
      "}\n";
  float x[] = {1, 2, 3, 4, 5, 6};
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(2, 3), x)}, r[5];
  EXPECT_OK(ref_run(text, NULL, "f", args, 1, r, 5));
  ref_expect_f32(&r[0], x, 6, 0, "reshape of an argument");
  ref_expect_shape(&r[0], 2, SHAPE(3, 2), "reshape of an argument");
  ref_expect_f32(&r[1], (float[]){2, 4, 6, 8, 10, 12}, 6, 0, "reshape of a live value");
  ref_expect_f32(&r[2], x, 6, 0, "cast to f32");
  ref_expect_f32(&r[3], (float[]){4, 8, 12, 16, 20, 24}, 6, 0, "reshape of a dying value");
  ref_expect_f32(&r[4], (float[]){-4, -8, -12, -16, -20, -24}, 6, 0, "its use");
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(r[i].owned && r[i].data != x);
  ref_release_all(r, 5);
}

/* ---- raw weights and packed panels ---- */

static const char *kWeightText =
    "param @embed : bf16[70, 33]\n"
    "param @norm : bf16[33]\n"
    "param @proj : bf16[5, 2, 33]\n"
    "func @f(%ids: i64[S]) -> (f32[S, 70], f32[S, 10]) {\n"
    "  %e = param @embed : bf16[70, 33]\n"
    "  %x = embedding %e, %ids : bf16[S, 33]\n"
    "  %xf = cast %x {dtype = f32} : f32[S, 33]\n"
    "  %n = param @norm : bf16[33]\n"
    "  %nf = cast %n {dtype = f32} : f32[33]\n"
    "  %h = rms_norm %xf, %nf {eps = 1e-6} : f32[S, 33]\n"
    "  %ef = cast %e {dtype = f32} : f32[70, 33]\n"
    "  %logits = linear %h, %ef : f32[S, 70]\n"
    "  %p = param @proj : bf16[5, 2, 33]\n"
    "  %pr = reshape %p : bf16[10, 33]\n"
    "  %pf = cast %pr {dtype = f32} : f32[10, 33]\n"
    "  %z = linear %h, %pf : f32[S, 10]\n"
    "  return %logits, %z\n"
    "}\n"
    "func @g(%h: f32[S, 33]) -> f32[S, 70] {\n"
    "  %e = param @embed : bf16[70, 33]\n"
    "  %ef = cast %e {dtype = f32} : f32[70, 33]\n"
    "  %y = linear %h, %ef : f32[S, 70]\n"
    "  return %y\n"
    "}\n";

typedef struct {
  uint16_t *embed, *norm, *proj; /* in `dtype` storage */
  float *embed_f32, *norm_f32, *proj_f32;
} weights_t;

/* Random weights that are exact in `dtype` (bf16 or f16). */
static void weights_init(weights_t *w, vlmc_dtype_t dtype) {
  int64_t counts[3] = {70 * 33, 33, 10 * 33};
  uint16_t **bits[3] = {&w->embed, &w->norm, &w->proj};
  float **wide[3] = {&w->embed_f32, &w->norm_f32, &w->proj_f32};
  for (int t = 0; t < 3; ++t) {
    float *r = ref_rand_array(counts[t], 40 + (uint64_t)t);
    *bits[t] = malloc(sizeof(uint16_t) * (size_t)counts[t]);
    *wide[t] = malloc(sizeof(float) * (size_t)counts[t]);
    for (int64_t i = 0; i < counts[t]; ++i) {
      uint16_t b = dtype == VLMC_DTYPE_BF16 ? vlmc_f32_to_bf16(r[i]) : vlmc_f32_to_f16(r[i]);
      (*bits[t])[i] = b;
      (*wide[t])[i] = dtype == VLMC_DTYPE_BF16 ? vlmc_bf16_to_f32(b) : vlmc_f16_to_f32(b);
    }
    free(r);
  }
}

static void weights_free(weights_t *w) {
  free(w->embed);
  free(w->norm);
  free(w->proj);
  free(w->embed_f32);
  free(w->norm_f32);
  free(w->proj_f32);
}

/* The expected results of @f, from the f32 values of the weights. */
static void weights_expected(const weights_t *w, const int64_t *ids, int64_t s, float *logits,
                             float *z) {
  float *h = malloc(sizeof(float) * (size_t)(s * 33));
  for (int64_t r = 0; r < s; ++r) {
    const float *x = w->embed_f32 + ids[r] * 33;
    double ss = 0;
    for (int i = 0; i < 33; ++i) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / 33.0 + 1e-6));
    for (int i = 0; i < 33; ++i) h[r * 33 + i] = w->norm_f32[i] * (x[i] * inv);
  }
  linear_exact(h, w->embed_f32, NULL, s, 33, 70, logits);
  linear_exact(h, w->proj_f32, NULL, s, 33, 10, z);
  free(h);
}

static void check_weights(vlmc_dtype_t dtype, bool record_ranges, uint32_t threads) {
  weights_t w;
  weights_init(&w, dtype);
  ref_param_t ps[] = {{"embed", vlmc_tensor_view(dtype, 2, SHAPE(70, 33), w.embed)},
                      {"norm", vlmc_tensor_view(dtype, 1, SHAPE(33), w.norm)},
                      {"proj", vlmc_tensor_view(dtype, 3, SHAPE(5, 2, 33), w.proj)}};
  ref_params_t params = {ps, 3, 0};
  observer_t seen = {{NULL}, 0, 0};
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.get_param = ref_get_param;
  o.param_ctx = &params;
  o.threads = threads;
  if (record_ranges) o.on_range = count_range, o.range_ctx = &seen;
  vlmc_module_t *module = ref_parse(kWeightText);
  if (!module) return;
  vlmc_executor_t *ex = NULL;
  EXPECT_OK(vlmc_executor_create(module, &o, &ex));
  int64_t ids[] = {3, 69, 0, 3, 41};
  float logits[5 * 70], z[5 * 10];
  weights_expected(&w, ids, 5, logits, z);
  for (int run = 0; ex && run < 2; ++run) {
    int64_t s = run ? 5 : 1; /* one row (a decode step), then five */
    vlmc_tensor_t args[] = {ref_i64(1, SHAPE(s), run ? ids : ids + 1)}, r[2];
    float *want = run ? logits : logits + 70, *want_z = run ? z : z + 10;
    EXPECT_OK(vlmc_executor_run(ex, "f", args, 1, r, 2));
    ref_expect_f32(&r[0], want, s * 70, 0, "logits from the tied embedding");
    ref_expect_f32(&r[1], want_z, s * 10, 0, "a reshaped weight");
    ref_release_all(r, 2);
  }
  /* Another function reads the same weight: the same packed panels serve it. */
  float *h = ref_rand_array(3 * 33, 44), y[3 * 70];
  linear_exact(h, w.embed_f32, NULL, 3, 33, 70, y);
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(3, 33), h)}, r[1];
  if (ex) EXPECT_OK(vlmc_executor_run(ex, "g", args, 1, r, 1));
  if (ex) ref_expect_f32(&r[0], y, 3 * 70, 0, "@g");
  if (ex) ref_release_all(r, 1);
  EXPECT_EQ_INT(params.calls, 3);
  free(h);
  vlmc_executor_destroy(ex);
  vlmc_module_destroy(module);
  weights_free(&w);
}

/* bf16 and f16 checkpoints, with the weights kept raw (the default) and converted to f32
 * (range recording), on one and two threads: always the definition's bits. */
static void test_raw_and_packed_weights_give_the_definitions_bits(void) {
  check_weights(VLMC_DTYPE_BF16, false, 1);
  check_weights(VLMC_DTYPE_BF16, true, 1);
  check_weights(VLMC_DTYPE_BF16, false, 2);
  check_weights(VLMC_DTYPE_F16, false, 1);
  check_weights(VLMC_DTYPE_F16, true, 2);
}

/* Static f32 weights are packed as bf16 panels only when every weight is a bf16 (bit-exact);
 * a weight that is not, and one computed at run time (an argument), take the f32 path. Sizes
 * are awkward: 130 outputs (two full panels and a 2-wide one), 37 rows, 71 inputs. */
static void test_packed_f32_weights(void) {
  const char *text =
      "param @exact : f32[130, 71]\n"
      "param @inexact : f32[130, 71]\n"
      "func @f(%x: f32[R, 71], %w: f32[130, 71], %b: f32[130]) ->"
      " (f32[R, 130], f32[R, 130], f32[R, 130]) {\n"
      "  %e = param @exact : f32[130, 71]\n"
      "  %i = param @inexact : f32[130, 71]\n"
      "  %ye = linear %x, %e, %b : f32[R, 130]\n"
      "  %yi = linear %x, %i, %b : f32[R, 130]\n"
      "  %yw = linear %x, %w : f32[R, 130]\n"
      "  return %ye, %yi, %yw\n"
      "}\n";
  float *exact = ref_rand_array(130 * 71, 50), *inexact = ref_rand_array(130 * 71, 51);
  float *w = ref_rand_array(130 * 71, 52), *b = ref_rand_array(130, 53);
  float *x = ref_rand_array(37 * 71, 54);
  for (int i = 0; i < 130 * 71; ++i) exact[i] = vlmc_round_bf16(exact[i]);
  exact[5] = -0.0f;
  ref_param_t ps[] = {{"exact", ref_f32(2, SHAPE(130, 71), exact)},
                      {"inexact", ref_f32(2, SHAPE(130, 71), inexact)}};
  float *want = malloc(sizeof(float) * 3 * 37 * 130);
  linear_exact(x, exact, b, 37, 71, 130, want);
  linear_exact(x, inexact, b, 37, 71, 130, want + 37 * 130);
  linear_exact(x, w, NULL, 37, 71, 130, want + 2 * 37 * 130);
  for (uint32_t threads = 1; threads <= 2; ++threads) {
    ref_params_t params = {ps, 2, 0};
    vlmc_executor_options_t o = vlmc_executor_options_default();
    o.get_param = ref_get_param;
    o.param_ctx = &params;
    o.threads = threads;
    vlmc_tensor_t args[] = {ref_f32(2, SHAPE(37, 71), x), ref_f32(2, SHAPE(130, 71), w),
                            ref_f32(1, SHAPE(130), b)};
    vlmc_tensor_t r[3];
    EXPECT_OK(ref_run(text, &o, "f", args, 3, r, 3));
    ref_expect_f32(&r[0], want, 37 * 130, 0, "bf16-exact f32 weight");
    ref_expect_f32(&r[1], want + 37 * 130, 37 * 130, 0, "f32 weight");
    ref_expect_f32(&r[2], want + 2 * 37 * 130, 37 * 130, 0, "weight computed at run time");
    ref_release_all(r, 3);
  }
  free(exact);
  free(inexact);
  free(w);
  free(b);
  free(x);
  free(want);
}

int main(void) {
  RUN_TEST(test_static_values_are_computed_once);
  RUN_TEST(test_failing_static_op_fails_every_run);
  RUN_TEST(test_reshape_and_cast_pass_values_on);
  RUN_TEST(test_raw_and_packed_weights_give_the_definitions_bits);
  RUN_TEST(test_packed_f32_weights);
  return TEST_SUMMARY();
}
