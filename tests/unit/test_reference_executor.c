/* The executor's API: argument checks and symbol binding, parameters (conversion, caching,
 * errors), ownership of arguments and results, f16 / bf16 emulation, the range recorder, taps,
 * the trace, and error locations for parsed and built modules. */
#include "tests/unit/test_reference_util.h"

static const char *kTwoArgs =
    "func @f(%x: f32[S, 3], %y: f32[S/2, 3]) -> f32[S, 3] {\n"
    "  %z = add %x, %x : f32[S, 3]\n"
    "  return %z\n"
    "}\n";

static void test_argument_shape_errors_name_function_argument_and_type(void) {
  float x[24] = {0};
  vlmc_tensor_t r[1];
  vlmc_tensor_t a1[] = {ref_f32(2, SHAPE(4, 3), x), ref_f32(2, SHAPE(2, 4), x)};
  EXPECT_ERROR(ref_run(kTwoArgs, NULL, "f", a1, 2, r, 1),
               "@f: argument 1 (%y): expected f32[S/2,3], got shape [2, 4]");
  vlmc_tensor_t a2[] = {ref_f32(2, SHAPE(4, 3), x), ref_f32(2, SHAPE(3, 3), x)};
  EXPECT_ERROR(ref_run(kTwoArgs, NULL, "f", a2, 2, r, 1),
               "got shape [3, 3] (S = 4 from an earlier dimension)");
  vlmc_tensor_t a3[] = {ref_f32(2, SHAPE(5, 3), x), ref_f32(2, SHAPE(2, 3), x)};
  EXPECT_ERROR(ref_run(kTwoArgs, NULL, "f", a3, 2, r, 1),
               "@f: argument 1 (%y): expected f32[S/2,3], got shape [2, 3]");
  vlmc_tensor_t a4[] = {ref_f32(1, SHAPE(12), x), ref_f32(2, SHAPE(2, 3), x)};
  EXPECT_ERROR(ref_run(kTwoArgs, NULL, "f", a4, 2, r, 1), "(rank differs)");
  vlmc_tensor_t a5[] = {ref_i64(2, SHAPE(4, 3), (const int64_t *)x), ref_f32(2, SHAPE(2, 3), x)};
  EXPECT_ERROR(ref_run(kTwoArgs, NULL, "f", a5, 2, r, 1),
               "@f: argument 0 (%x): expected float storage (f32, f16, bf16 or f64) for f32, "
               "got i64");
  vlmc_tensor_t a6[] = {ref_f32(2, SHAPE(4, 3), x), ref_f32(2, SHAPE(2, 3), x)};
  EXPECT_ERROR(ref_run(kTwoArgs, NULL, "f", a6, 1, r, 1), "@f takes 2 arguments, got 1");
  EXPECT_ERROR(ref_run(kTwoArgs, NULL, "nope", a6, 2, r, 1), "no function @nope");
  EXPECT_ERROR(ref_run(kTwoArgs, NULL, "f", a6, 2, r, 0), "@f returns 1 results, 0 asked for");
  EXPECT_OK(ref_run(kTwoArgs, NULL, "f", a6, 2, r, 1));
  ref_release_all(r, 1);
}

static void test_integer_arguments_are_range_checked(void) {
  const char *text =
      "func @f(%i: i32[2]) -> i32[2] {\n"
      "  %j = add %i, %i : i32[2]\n"
      "  return %j\n"
      "}\n";
  int64_t big[] = {1, 1ll << 40};
  int32_t narrow[] = {5, -7};
  vlmc_tensor_t a1[] = {ref_i64(1, SHAPE(2), big)}, r[1];
  EXPECT_ERROR(ref_run(text, NULL, "f", a1, 1, r, 1),
               "argument 0 (%i): value 1099511627776 at index 1 does not fit i32");
  vlmc_tensor_t a2[] = {vlmc_tensor_view(VLMC_DTYPE_I32, 1, SHAPE(2), narrow)};
  EXPECT_OK(ref_run(text, NULL, "f", a2, 1, r, 1));
  ref_expect_i64(&r[0], (int64_t[]){10, -14}, 2, "i32 storage read as i64");
  ref_release_all(r, 1);
}

static const char *kParamText =
    "param @a : f32[3]\n"
    "param @h : f16[3]\n"
    "func @f(%x: f32[3]) -> (f32[3], f16[3]) {\n"
    "  %a = param @a : f32[3]\n"
    "  %h = param @h : f16[3]\n"
    "  %y = mul %x, %a : f32[3]\n"
    "  return %y, %h\n"
    "}\n";

static void test_params_are_converted_once_and_cached(void) {
  uint16_t a_bf16[] = {vlmc_f32_to_bf16(1.5f), vlmc_f32_to_bf16(-2.0f), vlmc_f32_to_bf16(0.25f)};
  float h_f32[] = {0.1f, 70000.0f, 3.0f};
  ref_param_t ps[] = {{"a", vlmc_tensor_view(VLMC_DTYPE_BF16, 1, SHAPE(3), a_bf16)},
                      {"h", ref_f32(1, SHAPE(3), h_f32)}};
  ref_params_t params = {ps, 2, 0};
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.get_param = ref_get_param;
  o.param_ctx = &params;
  o.emulate_low_precision = true;
  vlmc_module_t *module = ref_parse(kParamText);
  if (!module) return;
  vlmc_executor_t *ex = NULL;
  EXPECT_OK(vlmc_executor_create(module, &o, &ex));
  float x[] = {2, 2, 2};
  for (int run = 0; ex && run < 2; ++run) {
    vlmc_tensor_t args[] = {ref_f32(1, SHAPE(3), x)}, r[2];
    EXPECT_OK(vlmc_executor_run(ex, "f", args, 1, r, 2));
    ref_expect_f32(&r[0], (float[]){3.0f, -4.0f, 0.5f}, 3, 0, "bf16 parameter");
    /* f32 data for an f16 parameter is rounded to f16 under emulation (70000 -> inf). */
    ref_expect_f32(&r[1], (float[]){vlmc_round_f16(0.1f), INFINITY, 3.0f}, 3, 0, "f16 parameter");
    ref_release_all(r, 2);
  }
  EXPECT_EQ_INT(params.calls, 2); /* once per parameter, not per run */
  vlmc_executor_destroy(ex);
  vlmc_module_destroy(module);
}

static void test_param_errors(void) {
  float x[] = {2, 2, 2}, wrong[4] = {0};
  vlmc_tensor_t args[] = {ref_f32(1, SHAPE(3), x)}, r[2];
  EXPECT_ERROR(ref_run(kParamText, NULL, "f", args, 1, r, 2),
               "param @a: the executor has no parameter source (options.get_param)");
  ref_param_t ps[] = {{"a", ref_f32(1, SHAPE(4), wrong)}};
  ref_params_t params = {ps, 1, 0};
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.get_param = ref_get_param;
  o.param_ctx = &params;
  EXPECT_ERROR(ref_run(kParamText, &o, "f", args, 1, r, 2),
               "test.vir:4:3: error: 'param' op: param @a: expected f32[3], got f32 data of "
               "shape [4]");
  ref_param_t ps2[] = {{"a", ref_f32(1, SHAPE(3), wrong)}};
  ref_params_t params2 = {ps2, 1, 0};
  o.param_ctx = &params2;
  EXPECT_ERROR(ref_run(kParamText, &o, "f", args, 1, r, 2),
               "param @h: test has no tensor named h");
}

/* Owned arguments are taken (and freed or reused); borrowed ones are left alone. Results are
 * always owned, also when the function returns an argument or one value twice. */
static void test_ownership_of_arguments_and_results(void) {
  const char *text =
      "func @f(%x: f32[2], %y: f32[2]) -> (f32[2], f32[2], f32[2]) {\n"
      "  %s = add %x, %y : f32[2]\n"
      "  return %s, %s, %y\n"
      "}\n";
  vlmc_tensor_t owned;
  EXPECT_OK(vlmc_tensor_alloc(VLMC_DTYPE_F32, 1, SHAPE(2), &owned));
  vlmc_tensor_f32(&owned)[0] = 1;
  vlmc_tensor_f32(&owned)[1] = 2;
  float y[] = {10, 20};
  vlmc_tensor_t args[] = {owned, ref_f32(1, SHAPE(2), y)}, r[3];
  EXPECT_OK(ref_run(text, NULL, "f", args, 2, r, 3));
  EXPECT_TRUE(args[0].data == NULL && !args[0].owned); /* taken */
  EXPECT_TRUE(args[1].data == y);                      /* borrowed: untouched */
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(r[i].owned);
  EXPECT_TRUE(r[0].data != r[1].data && r[2].data != y);
  ref_expect_f32(&r[0], (float[]){11, 22}, 2, 0, "sum");
  ref_expect_f32(&r[1], (float[]){11, 22}, 2, 0, "sum again");
  ref_expect_f32(&r[2], y, 2, 0, "the argument, copied");
  ref_release_all(r, 3);
  /* On error, owned arguments are released too (ASan would see a leak otherwise). */
  EXPECT_OK(vlmc_tensor_alloc(VLMC_DTYPE_F32, 1, SHAPE(3), &owned));
  vlmc_tensor_t bad[] = {owned, ref_f32(1, SHAPE(2), y)};
  EXPECT_ERROR(ref_run(text, NULL, "f", bad, 2, r, 3), "argument 0 (%x)");
  EXPECT_TRUE(bad[0].data == NULL);
}

/* x * 1000 overflows in f16 for x = 100 (1e5 > 65504): with emulation, the f16-typed program
 * gets inf and the rms_norm after it NaN where the inf was and 0 elsewhere (rsqrt(inf) = 0, as
 * in transformers: spec §6.1's failure); the f32-typed one stays finite,
 * and so does the f16 program once the overflowing op is upcast (what the precision pass does). */
static void test_f16_emulation_overflows_where_f16_would(void) {
  const char *text =
      "func @f16(%x: f16[2], %w: f16[2]) -> (f16[2], f16[2]) {\n"
      "  %k = constant {value = [1000.0, 1000.0]} : f16[2]\n"
      "  %y = mul %x, %k : f16[2]\n"
      "  %n = rms_norm %y, %w {eps = 1e-06} : f16[2]\n"
      "  return %y, %n\n"
      "}\n"
      "func @f32(%x: f32[2], %w: f32[2]) -> (f32[2], f32[2]) {\n"
      "  %k = constant {value = [1000.0, 1000.0]} : f32[2]\n"
      "  %y = mul %x, %k : f32[2]\n"
      "  %n = rms_norm %y, %w {eps = 1e-06} : f32[2]\n"
      "  return %y, %n\n"
      "}\n"
      "func @upcast(%x: f16[2], %w: f16[2]) -> f16[2] {\n"
      "  %x32 = cast %x {dtype = f32} : f32[2]\n"
      "  %w32 = cast %w {dtype = f32} : f32[2]\n"
      "  %k = constant {value = [1000.0, 1000.0]} : f32[2]\n"
      "  %y = mul %x32, %k : f32[2]\n"
      "  %n = rms_norm %y, %w32 {eps = 1e-06} : f32[2]\n"
      "  %h = cast %n {dtype = f16} : f16[2]\n"
      "  return %h\n"
      "}\n";
  float x[] = {100.0f, 1.0f}, w[] = {1.0f, 1.0f};
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.emulate_low_precision = true;
  vlmc_tensor_t a[] = {ref_f32(1, SHAPE(2), x), ref_f32(1, SHAPE(2), w)}, r[2];
  EXPECT_OK(ref_run(text, &o, "f16", a, 2, r, 2));
  ref_expect_f32(&r[0], (float[]){INFINITY, 1000.0f}, 2, 0, "f16 overflow");
  ref_expect_f32(&r[1], (float[]){NAN, 0.0f}, 2, 0, "rms_norm after the overflow");
  ref_release_all(r, 2);
  vlmc_tensor_t b[] = {ref_f32(1, SHAPE(2), x), ref_f32(1, SHAPE(2), w)};
  EXPECT_OK(ref_run(text, &o, "f32", b, 2, r, 2));
  ref_expect_f32(&r[0], (float[]){100000.0f, 1000.0f}, 2, 0, "f32 does not overflow");
  ref_expect_f32(&r[1], (float[]){1.41414284f, 0.0141414284f}, 2, 1e-6, "f32 norm");
  ref_release_all(r, 2);
  vlmc_tensor_t c[] = {ref_f32(1, SHAPE(2), x), ref_f32(1, SHAPE(2), w)};
  EXPECT_OK(ref_run(text, &o, "upcast", c, 2, r, 1));
  ref_expect_f32(&r[0], (float[]){vlmc_round_f16(1.41414284f), vlmc_round_f16(0.0141414284f)}, 2,
                 0, "upcast fixes it");
  ref_release_all(r, 1);
  /* Without emulation the f16 program computes in f32 and does not overflow. */
  vlmc_tensor_t d[] = {ref_f32(1, SHAPE(2), x), ref_f32(1, SHAPE(2), w)};
  EXPECT_OK(ref_run(text, NULL, "f16", d, 2, r, 2));
  ref_expect_f32(&r[0], (float[]){100000.0f, 1000.0f}, 2, 0, "no emulation");
  ref_release_all(r, 2);
}

typedef struct {
  int calls;
  double max_abs_of_y;
  int64_t nonfinite_of_y;
  double min_of_y;
  char last_op[32];
} ranges_t;

static void record_range(void *ctx, const vlmc_value_range_t *range) {
  ranges_t *r = ctx;
  ++r->calls;
  snprintf(r->last_op, sizeof r->last_op, "%s", vlmc_op_info(range->op->kind)->mnemonic);
  if (range->value->name && strcmp(range->value->name, "y") == 0) {
    r->max_abs_of_y = range->max_abs;
    r->nonfinite_of_y = range->nonfinite;
    r->min_of_y = range->min;
    EXPECT_EQ_INT(range->count, 4);
  }
}

static void test_range_recorder_sees_the_max(void) {
  const char *text =
      "func @f(%x: f32[4]) -> f32[4] {\n"
      "  %k = constant {value = [1000.0, -3000.0, 1.0, 1.0]} : f32[4]\n"
      "  %y = mul %x, %k : f32[4]\n"
      "  %z = exp %y : f32[4]\n"
      "  return %z\n"
      "}\n";
  float x[] = {100.0f, 2.0f, NAN, INFINITY};
  ranges_t seen;
  memset(&seen, 0, sizeof seen);
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.on_range = record_range;
  o.range_ctx = &seen;
  vlmc_tensor_t a[] = {ref_f32(1, SHAPE(4), x)}, r[1];
  EXPECT_OK(ref_run(text, &o, "f", a, 1, r, 1));
  EXPECT_EQ_INT(seen.calls, 3); /* constant, mul, exp */
  EXPECT_NEAR(seen.max_abs_of_y, 100000.0, 0);
  EXPECT_NEAR(seen.min_of_y, -6000.0, 0);
  EXPECT_EQ_INT(seen.nonfinite_of_y, 2);
  EXPECT_STREQ(seen.last_op, "exp");
  ref_release_all(r, 1);
}

typedef struct {
  char names[4][32];
  float first[4];
  int count;
  bool fail;
} taps_t;

static vlmc_status_t record_tap(void *ctx, const char *name, const vlmc_op_t *op,
                                const vlmc_tensor_t *tensor) {
  taps_t *t = ctx;
  if (t->fail) return vlmc_status_make(VLMC_IO_ERROR, "cannot write stage %s", name);
  if (t->count < 4) {
    snprintf(t->names[t->count], sizeof t->names[0], "%s", name);
    t->first[t->count] = vlmc_tensor_f32(tensor)[0];
  }
  ++t->count;
  return NULL;
}

static void test_tap_hands_values_to_the_callback(void) {
  const char *text =
      "func @f(%x: f32[2]) -> f32[2] {\n"
      "  tap @input %x\n"
      "  %y = neg %x : f32[2]\n"
      "  tap @stage.neg %y\n"
      "  return %y\n"
      "}\n";
  float x[] = {3, 4};
  taps_t taps;
  memset(&taps, 0, sizeof taps);
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.on_tap = record_tap;
  o.tap_ctx = &taps;
  vlmc_tensor_t a[] = {ref_f32(1, SHAPE(2), x)}, r[1];
  EXPECT_OK(ref_run(text, &o, "f", a, 1, r, 1));
  EXPECT_EQ_INT(taps.count, 2);
  EXPECT_STREQ(taps.names[0], "input");
  EXPECT_STREQ(taps.names[1], "stage.neg");
  EXPECT_NEAR(taps.first[0], 3, 0);
  EXPECT_NEAR(taps.first[1], -3, 0);
  ref_release_all(r, 1);
  taps.fail = true;
  vlmc_tensor_t b[] = {ref_f32(1, SHAPE(2), x)};
  EXPECT_ERROR(ref_run(text, &o, "f", b, 1, r, 1),
               "test.vir:2:3: error: 'tap' op: cannot write stage input");
  vlmc_tensor_t c[] = {ref_f32(1, SHAPE(2), x)};
  EXPECT_OK(ref_run(text, NULL, "f", c, 1, r, 1)); /* no callback: taps do nothing */
  ref_release_all(r, 1);
}

static void count_trace(void *ctx, const vlmc_op_t *op, const vlmc_tensor_t *results,
                        uint32_t num_results, double seconds) {
  int *n = ctx;
  ++*n;
  EXPECT_TRUE(seconds >= 0);
  EXPECT_EQ_INT(num_results, op->num_results);
}

static void test_trace_sees_every_op(void) {
  int n = 0;
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.on_trace = count_trace;
  o.trace_ctx = &n;
  float x[12] = {0};
  vlmc_tensor_t a[] = {ref_f32(2, SHAPE(4, 3), x), ref_f32(2, SHAPE(2, 3), x)}, r[1];
  EXPECT_OK(ref_run(kTwoArgs, &o, "f", a, 2, r, 1));
  EXPECT_EQ_INT(n, 1);
  ref_release_all(r, 1);
  /* The ready-made printer writes one line per op. */
  FILE *f = tmpfile();
  if (!f) return;
  o.on_trace = vlmc_executor_trace_print;
  o.trace_ctx = f;
  vlmc_tensor_t b[] = {ref_f32(2, SHAPE(4, 3), x), ref_f32(2, SHAPE(2, 3), x)};
  EXPECT_OK(ref_run(kTwoArgs, &o, "f", b, 2, r, 1));
  ref_release_all(r, 1);
  char line[256] = "";
  rewind(f);
  EXPECT_TRUE(fgets(line, sizeof line, f) != NULL);
  EXPECT_TRUE(strstr(line, "%z = add %x, %x : f32[S,3]") && strstr(line, "[4, 3] min 0 max 0"));
  fclose(f);
}

/* A built (not parsed) module: errors name the function and the op's position. */
static void test_built_module_errors_name_func_and_op(void) {
  vlmc_module_t *module = NULL;
  EXPECT_OK(vlmc_module_create(&module));
  if (!module) return;
  vlmc_type_t types[2] = {vlmc_type_make(VLMC_DTYPE_F32, 2, SHAPE(3, 2)),
                          vlmc_type_make(VLMC_DTYPE_I64, 1, SHAPE(2))};
  vlmc_type_t result = vlmc_type_make(VLMC_DTYPE_F32, 2, SHAPE(2, 2));
  vlmc_func_t *func = NULL;
  EXPECT_OK(vlmc_module_func_add(module, "pick", 2, types, NULL, 1, &result, &func));
  vlmc_builder_t b;
  vlmc_builder_init(&b, func);
  vlmc_value_t *neg = NULL, *g = NULL;
  vlmc_value_t *x = &func->args[0];
  EXPECT_OK(vlmc_builder_simple(&b, VLMC_OP_NEG, 1, &x, NULL, &neg));
  EXPECT_OK(vlmc_builder_gather(&b, neg, &func->args[1], 0, NULL, &g));
  EXPECT_OK(vlmc_builder_return(&b, 1, &g));
  float data[6] = {1, 2, 3, 4, 5, 6};
  int64_t idx[] = {0, 7};
  vlmc_executor_t *ex = NULL;
  EXPECT_OK(vlmc_executor_create(module, NULL, &ex));
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(3, 2), data), ref_i64(1, SHAPE(2), idx)}, r[1];
  if (ex)
    EXPECT_ERROR(vlmc_executor_run(ex, "pick", args, 2, r, 1),
                 "@pick: op #1 'gather': index 7 at index 1 is outside [0, 3)");
  vlmc_executor_destroy(ex);
  vlmc_module_destroy(module);
}

int main(void) {
  RUN_TEST(test_argument_shape_errors_name_function_argument_and_type);
  RUN_TEST(test_integer_arguments_are_range_checked);
  RUN_TEST(test_params_are_converted_once_and_cached);
  RUN_TEST(test_param_errors);
  RUN_TEST(test_ownership_of_arguments_and_results);
  RUN_TEST(test_f16_emulation_overflows_where_f16_would);
  RUN_TEST(test_range_recorder_sees_the_max);
  RUN_TEST(test_tap_hands_values_to_the_callback);
  RUN_TEST(test_trace_sees_every_op);
  RUN_TEST(test_built_module_errors_name_func_and_op);
  return TEST_SUMMARY();
}
