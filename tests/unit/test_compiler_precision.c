/* precision: the dtype policy on small functions (rules, calibration upcasts and their
 * readers, the calling convention), the calibration's text form, and its refusals. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, dirent: the pass test helper */
#include <stdio.h>
#include <stdlib.h>

#include "passes/precision.h"
#include "reference/executor.h"
#include "test.h"
#include "test_compiler_pass_util.h"

/* rms_norm -> linear -> silu -> mul -> add -> return, weights stored in bf16. */
static const char *const kBlock =
    "func @block(%x: f32[S,8], %wn: bf16[8], %w: bf16[8,8]) -> f32[S,8] {\n"
    "  %n32 = cast %wn {dtype=f32} : f32[8]\n"
    "  %h = rms_norm %x, %n32 {eps=1e-06} : f32[S,8]\n"
    "  %w32 = cast %w {dtype=f32} : f32[8,8]\n"
    "  %y = linear %h, %w32 : f32[S,8]\n"
    "  %z = silu %y : f32[S,8]\n"
    "  %p = mul %z, %y : f32[S,8]\n"
    "  %o = add %p, %x : f32[S,8]\n"
    "  return %o\n"
    "}\n";

static void collect(void *user, const char *message) { vlmc_strbuf_printf(user, "%s\n", message); }

static vlmc_status_t apply(vlmc_module_t *module, vlmc_precision_target_t target,
                           const vlmc_precision_calibration_t *cal, vlmc_strbuf_t *log,
                           vlmc_precision_summary_t *summary) {
  vlmc_precision_options_t options = {target, cal, log ? collect : NULL, log, 1};
  VLMC_RETURN_IF_ERROR(vlmc_precision_apply(module, &options, summary));
  return vlmc_module_verify(module);
}

static const vlmc_value_t *named(const vlmc_func_t *func, const char *name) {
  for (const vlmc_op_t *op = func->body.first; op; op = op->next)
    if (op->num_results && op->results[0].name && strcmp(op->results[0].name, name) == 0)
      return &op->results[0];
  return NULL;
}

static vlmc_dtype_t dtype_of(const vlmc_module_t *module, const char *name) {
  const vlmc_value_t *v = named(module->funcs[0], name);
  return v ? v->type.dtype : VLMC_DTYPE_COUNT;
}

/* The one use of a value, when it is a cast: the dtype it is stored in. */
static vlmc_dtype_t stored_as(const vlmc_module_t *module, const char *name) {
  const vlmc_value_t *v = named(module->funcs[0], name);
  for (const vlmc_op_t *op = module->funcs[0]->body.first; v && op; op = op->next)
    if (op->kind == VLMC_OP_CAST && op->operands[0] == v) return op->results[0].type.dtype;
  return v ? v->type.dtype : VLMC_DTYPE_COUNT;
}

static void test_rules_f16(void) {
  vlmc_module_t *module = parse_module(kBlock);
  if (!module) return;
  vlmc_strbuf_t log;
  vlmc_strbuf_init(&log);
  vlmc_precision_summary_t summary;
  EXPECT_OK(apply(module, VLMC_PRECISION_F16, NULL, &log, &summary));
  /* Weights stored in f16; the norm and the linear compute in f32 and store f16; silu and mul
   * compute in f16; the result is returned as f32. */
  EXPECT_EQ_INT(dtype_of(module, "n32"), VLMC_DTYPE_F16);
  EXPECT_EQ_INT(dtype_of(module, "w32"), VLMC_DTYPE_F16);
  EXPECT_EQ_INT(dtype_of(module, "h"), VLMC_DTYPE_F32);
  EXPECT_EQ_INT(stored_as(module, "h"), VLMC_DTYPE_F16);
  EXPECT_EQ_INT(dtype_of(module, "y"), VLMC_DTYPE_F32);
  EXPECT_EQ_INT(stored_as(module, "y"), VLMC_DTYPE_F16);
  EXPECT_EQ_INT(dtype_of(module, "z"), VLMC_DTYPE_F16);
  EXPECT_EQ_INT(dtype_of(module, "p"), VLMC_DTYPE_F16);
  EXPECT_EQ_INT(dtype_of(module, "o"), VLMC_DTYPE_F16);
  EXPECT_EQ_INT(module->funcs[0]->result_types[0].dtype, VLMC_DTYPE_F32);
  EXPECT_EQ_INT(summary.rule_upcasts, 2);
  EXPECT_EQ_INT(summary.range_upcasts, 0);
  EXPECT_STREQ(vlmc_strbuf_cstr(&log),
               "@block: activations stored in f16; in f32 by rule: 1 linear/matmul (f32 "
               "accumulation), 1 norm (f32 statistics)\n");
  vlmc_strbuf_deinit(&log);
  vlmc_module_destroy(module);
}

/* Under f16, a bf16 parameter keeps its widening cast (the kernel reading it widens each
 * element as it loads) rather than a narrowing cast to f16, which would be a region of its
 * own kept on the device: a second copy of every weight. An f16 argument is not a weight. */
static const char *const kParams =
    "param @wn : bf16[8]\n"
    "param @w : bf16[8,8]\n"
    "func @block(%x: f32[S,8]) -> f32[S,8] {\n"
    "  %pn = param @wn : bf16[8]\n"
    "  %n32 = cast %pn {dtype=f32} : f32[8]\n"
    "  %h = rms_norm %x, %n32 {eps=1e-06} : f32[S,8]\n"
    "  %pw = param @w : bf16[8,8]\n"
    "  %w32 = cast %pw {dtype=f32} : f32[8,8]\n"
    "  %y = linear %h, %w32 : f32[S,8]\n"
    "  %o = add %y, %x : f32[S,8]\n"
    "  return %o\n"
    "}\n";

static void test_f16_keeps_bf16_params(void) {
  vlmc_module_t *module = parse_module(kParams);
  if (!module) return;
  vlmc_precision_summary_t summary;
  EXPECT_OK(apply(module, VLMC_PRECISION_F16, NULL, NULL, &summary));
  EXPECT_EQ_INT(dtype_of(module, "n32"), VLMC_DTYPE_F32);
  EXPECT_EQ_INT(dtype_of(module, "w32"), VLMC_DTYPE_F32);
  EXPECT_EQ_INT(stored_as(module, "y"), VLMC_DTYPE_F16);
  int narrowing = 0;
  for (const vlmc_op_t *op = module->funcs[0]->body.first; op; op = op->next)
    narrowing += op->kind == VLMC_OP_CAST && op->operands[0]->def &&
                 op->operands[0]->def->kind == VLMC_OP_PARAM &&
                 op->results[0].type.dtype == VLMC_DTYPE_F16;
  EXPECT_EQ_INT(narrowing, 0);
  vlmc_module_destroy(module);
}

static void test_ref_changes_nothing(void) {
  vlmc_module_t *module = parse_module(kBlock);
  if (!module) return;
  char *before = vlmc_module_to_string(module);
  EXPECT_OK(apply(module, VLMC_PRECISION_REF, NULL, NULL, NULL));
  char *after = vlmc_module_to_string(module);
  EXPECT_STREQ(after, before);
  free(before);
  free(after);
  vlmc_module_destroy(module);
}

/* A calibration that says %y reached 1e5: in f16 it stays f32, and so do the ops reading it
 * (silu, mul), whose own results fit and are stored in f16. In bf16 the same range fits. */
static void test_calibration_upcast_and_readers(void) {
  vlmc_precision_calibration_t cal;
  vlmc_precision_calibration_init(&cal);
  const char *text = "# vlmc precision calibration v1\n"
                     "@block 3 linear 0 max_abs=100000 nonfinite=0\n"
                     "@block 4 silu 0 max_abs=100000 nonfinite=0\n"
                     "@block 1 rms_norm 0 max_abs=3.5 nonfinite=0\n";
  EXPECT_OK(vlmc_precision_calibration_parse(text, strlen(text), "ranges.txt", &cal));
  vlmc_module_t *module = parse_module(kBlock);
  if (!module) return;
  vlmc_strbuf_t log;
  vlmc_strbuf_init(&log);
  vlmc_precision_summary_t summary;
  EXPECT_OK(apply(module, VLMC_PRECISION_F16, &cal, &log, &summary));
  EXPECT_EQ_INT(dtype_of(module, "y"), VLMC_DTYPE_F32);
  EXPECT_EQ_INT(stored_as(module, "y"), VLMC_DTYPE_F32);
  EXPECT_EQ_INT(dtype_of(module, "z"), VLMC_DTYPE_F32);
  EXPECT_EQ_INT(dtype_of(module, "p"), VLMC_DTYPE_F32);
  EXPECT_EQ_INT(stored_as(module, "p"), VLMC_DTYPE_F16);
  EXPECT_EQ_INT(summary.range_upcasts, 2);
  EXPECT_EQ_INT(summary.f32_readers, 1);
  const char *out = vlmc_strbuf_cstr(&log);
  EXPECT_TRUE(strstr(out, "upcast: @block: op #3 'linear' %y (no weight) kept in f32: max |x| "
                          "1e+05 > 65504 (f16 max / headroom 1) in calibration\n") != NULL);
  EXPECT_TRUE(strstr(out, "upcast: @block: op #4 'silu' %z (no weight) kept in f32") != NULL);
  EXPECT_TRUE(strstr(out, "@block: op #5 'mul' %p computes in f32: it reads %z, kept in f32; its "
                          "result is stored in f16\n") != NULL);
  vlmc_strbuf_deinit(&log);
  vlmc_module_destroy(module);

  module = parse_module(kBlock);
  if (!module) return;
  EXPECT_OK(apply(module, VLMC_PRECISION_BF16, &cal, NULL, &summary));
  EXPECT_EQ_INT(summary.range_upcasts, 0);
  EXPECT_EQ_INT(dtype_of(module, "z"), VLMC_DTYPE_BF16);
  vlmc_module_destroy(module);
  vlmc_precision_calibration_deinit(&cal);
}

static void test_nonfinite_upcasts_in_bf16_too(void) {
  vlmc_precision_calibration_t cal;
  vlmc_precision_calibration_init(&cal);
  const char *text = "@block 6 add 0 max_abs=2 nonfinite=3\n";
  EXPECT_OK(vlmc_precision_calibration_parse(text, strlen(text), "ranges.txt", &cal));
  vlmc_module_t *module = parse_module(kBlock);
  vlmc_strbuf_t log;
  vlmc_strbuf_init(&log);
  if (module) EXPECT_OK(apply(module, VLMC_PRECISION_BF16, &cal, &log, NULL));
  EXPECT_EQ_INT(dtype_of(module, "o"), VLMC_DTYPE_F32);
  EXPECT_TRUE(strstr(vlmc_strbuf_cstr(&log),
                     "op #6 'add' %o (no weight) kept in f32: 3 inf/NaN values in "
                     "calibration") != NULL);
  vlmc_strbuf_deinit(&log);
  vlmc_module_destroy(module);
  vlmc_precision_calibration_deinit(&cal);
}

static void test_calibration_must_match_the_ir(void) {
  vlmc_precision_calibration_t cal;
  vlmc_precision_calibration_init(&cal);
  const char *text = "@block 3 silu 0 max_abs=1e5 nonfinite=0\n";
  EXPECT_OK(vlmc_precision_calibration_parse(text, strlen(text), "ranges.txt", &cal));
  vlmc_module_t *module = parse_module(kBlock);
  if (module)
    EXPECT_ERROR(apply(module, VLMC_PRECISION_F16, &cal, NULL, NULL),
                 "precision: the calibration does not match the IR: @block op 3 is linear, the "
                 "ranges say 'silu' (result 0)");
  vlmc_module_destroy(module);
  vlmc_precision_calibration_deinit(&cal);
}

static void test_calibration_text(void) {
  vlmc_precision_calibration_t cal;
  vlmc_precision_calibration_init(&cal);
  const char *text = "# a comment\n\n  @f 0 linear 0 max_abs=1.5 nonfinite=0  \r\n"
                     "@g 12 add 1 max_abs=70000 nonfinite=4\n";
  EXPECT_OK(vlmc_precision_calibration_parse(text, strlen(text), "r.txt", &cal));
  EXPECT_EQ_INT(cal.count, 2);
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  vlmc_precision_calibration_print(&cal, &out);
  EXPECT_STREQ(vlmc_strbuf_cstr(&out), "# vlmc precision calibration v1\n"
                                       "@f 0 linear 0 max_abs=1.5 nonfinite=0\n"
                                       "@g 12 add 1 max_abs=70000 nonfinite=4\n");
  vlmc_precision_calibration_t again;
  vlmc_precision_calibration_init(&again);
  EXPECT_OK(vlmc_precision_calibration_parse(vlmc_strbuf_cstr(&out), out.len, "r2.txt", &again));
  EXPECT_EQ_INT(again.count, 2);
  vlmc_strbuf_deinit(&out);
  vlmc_precision_calibration_deinit(&again);
  vlmc_precision_calibration_deinit(&cal);

  static const struct {
    const char *text, *error;
  } bad[] = {
      {"f 0 linear 0 max_abs=1 nonfinite=0", "r.txt:1: expected '@function'"},
      {"@f x linear 0 max_abs=1 nonfinite=0", "r.txt:1: expected the op position"},
      {"@f 0", "r.txt:1: expected the op mnemonic"},
      {"@f 0 linear", "r.txt:1: expected the result index"},
      {"\n@f 0 linear 0 max=1 nonfinite=0", "r.txt:2: expected 'max_abs=<number>'"},
      {"@f 0 linear 0 max_abs=-1 nonfinite=0", "r.txt:1: expected 'max_abs=<number>'"},
      {"@f 0 linear 0 max_abs=nan nonfinite=0", "r.txt:1: expected 'max_abs=<number>'"},
      {"@f 0 linear 0 max_abs=1 nonfinite=0.5", "r.txt:1: expected 'nonfinite=<count>'"},
      {"@f 0 linear 0 max_abs=1 nonfinite=0 extra", "r.txt:1: unexpected text after the counts"},
      {"@f 0 linear 0 max_abs=1 nonfinite=0\n@f 0 linear 0 max_abs=2 nonfinite=0",
       "r.txt:2: @f op 0 result 0 is given twice"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    vlmc_precision_calibration_init(&cal);
    EXPECT_ERROR(vlmc_precision_calibration_parse(bad[i].text, strlen(bad[i].text), "r.txt", &cal),
                 bad[i].error);
    vlmc_precision_calibration_deinit(&cal);
  }
}

/* Calibration through the executor: the recorded ranges are the values' largest |x|. */
static void test_calibrate_records_ranges(void) {
  vlmc_module_t *module = parse_module(
      "func @f(%x: f32[4]) -> f32[4] {\n"
      "  %c = constant {value=[1000.0, -2000.0, 3.0, 4.0]} : f32[4]\n"
      "  %y = mul %x, %c : f32[4]\n"
      "  %z = exp %y : f32[4]\n"
      "  return %z\n"
      "}\n");
  if (!module) return;
  float x[4] = {100.0f, 1.0f, 0.5f, -1.0f};
  int64_t shape = 4;
  vlmc_tensor_t arg = vlmc_tensor_view(VLMC_DTYPE_F32, 1, &shape, x);
  vlmc_precision_sample_t sample = {"f", &arg, 1};
  vlmc_precision_calibration_t cal;
  vlmc_precision_calibration_init(&cal);
  EXPECT_OK(vlmc_precision_calibrate(module, NULL, &sample, 1, &cal));
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  vlmc_precision_calibration_print(&cal, &out);
  /* y = [1e5, -2000, 1.5, -4]; exp(1e5) is inf in f32 itself. */
  const char *text = vlmc_strbuf_cstr(&out);
  EXPECT_TRUE(strstr(text, "@f 0 constant 0 max_abs=2000 nonfinite=0\n") != NULL);
  EXPECT_TRUE(strstr(text, "@f 1 mul 0 max_abs=100000 nonfinite=0\n") != NULL);
  EXPECT_TRUE(strstr(text, "@f 2 exp 0 max_abs=4.48168898 nonfinite=1\n") != NULL);
  vlmc_precision_sample_t wrong = {"nope", &arg, 1};
  EXPECT_ERROR(vlmc_precision_calibrate(module, NULL, &wrong, 1, &cal),
               "calibration sample: no function @nope");
  vlmc_strbuf_deinit(&out);
  vlmc_precision_calibration_deinit(&cal);
  vlmc_module_destroy(module);
}

/* The calling convention: KV caches keep their dtype, rows are cast to it. */
static void test_cache_keeps_its_dtype(void) {
  vlmc_module_t *module = parse_module(
      "func @step(%k: f32[1,2,4], %cache: f32[C,2,4]) -> f32[C+1,2,4] {\n"
      "  %r = neg %k : f32[1,2,4]\n"
      "  %grown = kv_cache_append %cache, %r : f32[C+1,2,4]\n"
      "  return %grown\n"
      "}\n");
  if (!module) return;
  EXPECT_OK(apply(module, VLMC_PRECISION_F16, NULL, NULL, NULL));
  EXPECT_EQ_INT(dtype_of(module, "r"), VLMC_DTYPE_F16);
  EXPECT_EQ_INT(dtype_of(module, "grown"), VLMC_DTYPE_F32);
  vlmc_module_destroy(module);
}

/* bf16-matmul: the two linears with bf16 weights and the one with a quantized weight read one
 * rounding of %x to bf16, each through a widening cast of its own (fuse makes it that linear's
 * prologue); the linear with an f32 weight, and every activation, stay f32. */
static const char *const kProjections =
    "func @proj(%x: f32[S,32], %wq: bf16[8,32], %wk: bf16[8,32], %wf: f32[8,32],\n"
    "           %pv: u32[8,4], %sv: f16[8,1], %bv: f16[8,1]) -> f32[S,8] {\n"
    "  %q32 = cast %wq {dtype=f32} : f32[8,32]\n"
    "  %k32 = cast %wk {dtype=f32} : f32[8,32]\n"
    "  %v32 = dequantize %pv, %sv, %bv {bits=4, group=32, cols=32} : f32[8,32]\n"
    "  %q = linear %x, %q32 : f32[S,8]\n"
    "  %k = linear %x, %k32 : f32[S,8]\n"
    "  %v = linear %x, %v32 : f32[S,8]\n"
    "  %f = linear %x, %wf : f32[S,8]\n"
    "  %s = add %q, %k : f32[S,8]\n"
    "  %t = add %s, %v : f32[S,8]\n"
    "  %o = add %t, %f : f32[S,8]\n"
    "  return %o\n"
    "}\n";

/* The value a linear named `name` reads as its input, and what that is a cast of. */
static const vlmc_value_t *linear_input(const vlmc_module_t *module, const char *name) {
  const vlmc_value_t *y = named(module->funcs[0], name);
  return y && y->def->kind == VLMC_OP_LINEAR ? y->def->operands[0] : NULL;
}

static void test_bf16_matmul(void) {
  vlmc_module_t *module = parse_module(kProjections);
  if (!module) return;
  vlmc_strbuf_t log;
  vlmc_strbuf_init(&log);
  vlmc_precision_summary_t summary;
  EXPECT_OK(apply(module, VLMC_PRECISION_BF16_MATMUL, NULL, &log, &summary));
  const vlmc_value_t *q = linear_input(module, "q"), *k = linear_input(module, "k");
  const vlmc_value_t *v = linear_input(module, "v");
  const vlmc_value_t *f = linear_input(module, "f"), *x = &module->funcs[0]->args[0];
  EXPECT_TRUE(q && k && v && f);
  if (q && k && v && f) {
    EXPECT_TRUE(q != k); /* one widening cast per linear */
    EXPECT_TRUE(q->def && q->def->kind == VLMC_OP_CAST && q->type.dtype == VLMC_DTYPE_F32);
    EXPECT_TRUE(k->def && k->def->kind == VLMC_OP_CAST && k->type.dtype == VLMC_DTYPE_F32);
    const vlmc_value_t *rounded = q->def ? q->def->operands[0] : NULL;
    EXPECT_TRUE(rounded && rounded->type.dtype == VLMC_DTYPE_BF16);
    EXPECT_TRUE(k->def && k->def->operands[0] == rounded); /* one rounding, shared */
    EXPECT_TRUE(v != q && v->def && v->def->kind == VLMC_OP_CAST && v->def->operands[0] == rounded);
    EXPECT_TRUE(rounded && rounded->def && rounded->def->operands[0] == x);
    EXPECT_TRUE(f == x); /* an f32 weight: its input is not rounded */
  }
  EXPECT_EQ_INT(dtype_of(module, "s"), VLMC_DTYPE_F32);
  EXPECT_EQ_INT(dtype_of(module, "o"), VLMC_DTYPE_F32);
  EXPECT_EQ_INT(summary.bf16_matmul_inputs, 3);
  EXPECT_EQ_INT(summary.casts_inserted, 4);
  EXPECT_EQ_INT(summary.rule_upcasts, 0);
  EXPECT_STREQ(vlmc_strbuf_cstr(&log),
               "@proj: bf16-matmul: 3 linears read their input rounded to bf16 (bf16 or "
               "quantized weights), 1 keep an f32 input; every activation stays f32\n");
  EXPECT_EQ_INT(vlmc_precision_calibration_limit(VLMC_PRECISION_BF16_MATMUL, 4) > 1e300, 1);
  vlmc_strbuf_deinit(&log);
  vlmc_module_destroy(module);
}

int main(void) {
  RUN_TEST(test_rules_f16);
  RUN_TEST(test_bf16_matmul);
  RUN_TEST(test_f16_keeps_bf16_params);
  RUN_TEST(test_ref_changes_nothing);
  RUN_TEST(test_calibration_upcast_and_readers);
  RUN_TEST(test_nonfinite_upcasts_in_bf16_too);
  RUN_TEST(test_calibration_must_match_the_ir);
  RUN_TEST(test_calibration_text);
  RUN_TEST(test_calibrate_records_ranges);
  RUN_TEST(test_cache_keeps_its_dtype);
  return TEST_SUMMARY();
}
