/* vlmc compile --calibrate's parts in process: the checkpoint module an upcast op is named by
 * (the nearest weight, minus its last two name components), the headroom rule (a value stays
 * f32 above the dtype's max / headroom, 65504 / 4 = 16376 for f16 by default) in the policy
 * and the pass, the manifest's precision record (old manifests without it still read), and
 * vlmc_compile's refusals. The whole path through the CLI is tests/e2e/precision_overflow.sh. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, dirent: the pass test helper */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/artifact.h"
#include "artifact/manifest.h"
#include "codegen/compile.h"
#include "passes/precision.h"
#include "reference/mrope_positions.h"
#include "support/file.h"
#include "test.h"
#include "test_compiler_pass_util.h"

/* rms_norm -> gate and up projections -> SwiGLU product, as a vision block's MLP reads. */
static const char *const kMlp =
    "param @visual.blocks.1.norm2.weight : bf16[8]\n"
    "param @visual.blocks.1.mlp.gate_proj.weight : bf16[8,8]\n"
    "param @visual.blocks.1.mlp.up_proj.weight : bf16[8,8]\n"
    "func @f(%x: f32[S,8]) -> (f32[S,8], f32[S,8]) {\n"
    "  %nw = param @visual.blocks.1.norm2.weight : bf16[8]\n"
    "  %n32 = cast %nw {dtype=f32} : f32[8]\n"
    "  %h = rms_norm %x, %n32 {eps=1e-06} : f32[S,8]\n"
    "  %gw = param @visual.blocks.1.mlp.gate_proj.weight : bf16[8,8]\n"
    "  %g32 = cast %gw {dtype=f32} : f32[8,8]\n"
    "  %g = linear %h, %g32 : f32[S,8]\n"
    "  %s = silu %g : f32[S,8]\n"
    "  %uw = param @visual.blocks.1.mlp.up_proj.weight : bf16[8,8]\n"
    "  %u32 = cast %uw {dtype=f32} : f32[8,8]\n"
    "  %u = linear %h, %u32 : f32[S,8]\n"
    "  %p = mul %s, %u : f32[S,8]\n"
    "  %e = exp %x : f32[S,8]\n"
    "  return %p, %e\n"
    "}\n";

static vlmc_op_t *op_named(const vlmc_module_t *module, const char *name, uint32_t *out_index) {
  uint32_t index = 0;
  for (vlmc_op_t *op = module->funcs[0]->body.first; op; op = op->next, ++index)
    if (op->num_results && op->results[0].name && !strcmp(op->results[0].name, name)) {
      if (out_index) *out_index = index;
      return op;
    }
  return NULL;
}

static void test_param_module_drops_two_components(void) {
  static const char *const cases[][2] = {
      {"visual.blocks.3.mlp.up_proj.weight", "visual.blocks.3.mlp"},
      {"model.layers.0.self_attn.q_proj.bias", "model.layers.0.self_attn"},
      {"visual.merger.ln_q.weight", "visual.merger"},
      {"lm_head.weight", "lm_head"}, /* two components: only the last goes */
      {"scale", "scale"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char out[64];
    vlmc_precision_param_module(cases[i][0], out, sizeof out);
    EXPECT_STREQ(out, cases[i][1]);
  }
}

static void test_op_module_is_the_nearest_weight(void) {
  vlmc_module_t *module = parse_module(kMlp);
  if (!module) return;
  char out[64];
  /* The product reads up_proj's linear directly (weight 3 ops away) and gate_proj's through
   * silu (4 away): the nearer one names it. */
  EXPECT_TRUE(vlmc_precision_op_module(op_named(module, "p", NULL), out, sizeof out));
  EXPECT_STREQ(out, "visual.blocks.1.mlp");
  EXPECT_TRUE(vlmc_precision_op_module(op_named(module, "h", NULL), out, sizeof out));
  EXPECT_STREQ(out, "visual.blocks.1");
  /* An op reading only arguments belongs to no module. */
  EXPECT_TRUE(!vlmc_precision_op_module(op_named(module, "e", NULL), out, sizeof out));
  EXPECT_STREQ(out, "");
  vlmc_module_destroy(module);
}

static void test_headroom_limit(void) {
  EXPECT_NEAR(vlmc_precision_calibration_limit(VLMC_PRECISION_F16, 4), 16376.0, 0);
  EXPECT_NEAR(vlmc_precision_calibration_limit(VLMC_PRECISION_F16, 1), 65504.0, 0);
  EXPECT_NEAR(vlmc_precision_calibration_limit(VLMC_PRECISION_F16, 0), 65504.0, 0);
  EXPECT_NEAR(vlmc_precision_calibration_limit(VLMC_PRECISION_BF16, 4), FLT_MAX / 4.0, 1e30);
  EXPECT_TRUE(isinf(vlmc_precision_calibration_limit(VLMC_PRECISION_REF, 4)));
  EXPECT_EQ_INT(VLMC_PRECISION_DEFAULT_HEADROOM, 4);
}

static void collect(void *user, const char *message) { vlmc_strbuf_printf(user, "%s\n", message); }

/* The f16 policy on kMlp with %p's calibrated max |x| = max_abs: whether %p stays f32, and
 * the log. */
static uint64_t range_upcasts(double max_abs, double headroom, vlmc_strbuf_t *log) {
  vlmc_module_t *module = parse_module(kMlp);
  if (!module) return 99;
  uint32_t index = 0;
  op_named(module, "p", &index);
  char text[128];
  snprintf(text, sizeof text, "# vlmc precision calibration v1\n@f %u mul 0 max_abs=%g "
           "nonfinite=0\n", index, max_abs);
  vlmc_precision_calibration_t cal;
  vlmc_precision_calibration_init(&cal);
  EXPECT_OK(vlmc_precision_calibration_parse(text, strlen(text), "ranges.txt", &cal));
  vlmc_precision_options_t options = {VLMC_PRECISION_F16, &cal, collect, log, headroom};
  vlmc_precision_summary_t summary = {0};
  EXPECT_OK(vlmc_precision_apply(module, &options, &summary));
  EXPECT_OK(vlmc_module_verify(module));
  vlmc_precision_calibration_deinit(&cal);
  vlmc_module_destroy(module);
  return summary.range_upcasts;
}

static void test_headroom_rule_in_the_policy(void) {
  vlmc_strbuf_t log;
  vlmc_strbuf_init(&log);
  /* 20000 fits f16 (65504) but not with headroom 4 (16376): kept f32, logged with its module. */
  EXPECT_EQ_INT(range_upcasts(20000, 4, &log), 1);
  EXPECT_TRUE(strstr(vlmc_strbuf_cstr(&log), "upcast: @f: op #") != NULL);
  EXPECT_TRUE(strstr(vlmc_strbuf_cstr(&log),
                     "'mul' %p (visual.blocks.1.mlp) kept in f32: max |x| 2e+04 > 16376 (f16 "
                     "max / headroom 4) in calibration") != NULL);
  vlmc_strbuf_clear(&log);
  EXPECT_EQ_INT(range_upcasts(20000, 1, &log), 0);  /* no headroom: it fits */
  EXPECT_TRUE(strstr(vlmc_strbuf_cstr(&log), "upcast:") == NULL);
  EXPECT_EQ_INT(range_upcasts(16000, 4, &log), 0);  /* under the limit */
  EXPECT_EQ_INT(range_upcasts(70000, 1, &log), 1);  /* past f16 itself */
  vlmc_strbuf_deinit(&log);
}

/* The pass: option headroom (default 4), refused outside [1, 65504]. */
static void test_headroom_option_of_the_pass(void) {
  char dir[] = "/tmp/vlmc-calibrate-XXXXXX";
  if (!mkdtemp(dir)) {
    TEST_FAIL_("mkdtemp failed");
    return;
  }
  char path[256], text[160], pipeline[512];
  snprintf(path, sizeof path, "%s/ranges.txt", dir);
  vlmc_module_t *probe = parse_module(kMlp);
  uint32_t index = 0;
  if (probe) op_named(probe, "p", &index);
  vlmc_module_destroy(probe);
  snprintf(text, sizeof text, "# vlmc precision calibration v1\n@f %u mul 0 max_abs=20000 "
           "nonfinite=0\n", index);
  EXPECT_OK(vlmc_file_write_all(path, text, strlen(text)));
  static const char *const options[] = {"", ",headroom=4", ",headroom=1"};
  static const int upcasts[] = {1, 1, 0};
  for (int i = 0; i < 3; ++i) {
    vlmc_module_t *module = parse_module(kMlp);
    if (!module) break;
    vlmc_strbuf_t remarks;
    vlmc_strbuf_init(&remarks);
    snprintf(pipeline, sizeof pipeline, "precision{target=f16,calibration=%s%s}", path,
             options[i]);
    EXPECT_OK(run_passes(module, pipeline, &remarks));
    bool upcast = strstr(vlmc_strbuf_cstr(&remarks), "(visual.blocks.1.mlp) kept in f32") != NULL;
    EXPECT_EQ_INT(upcast, upcasts[i]);
    vlmc_strbuf_deinit(&remarks);
    vlmc_module_destroy(module);
  }
  vlmc_module_t *module = parse_module(kMlp);
  if (module)
    EXPECT_ERROR(run_passes(module, "precision{target=f16,headroom=0}", NULL),
                 "option 'headroom' is 0; expected 1 to 65504");
  vlmc_module_destroy(module);
  remove(path);
  rmdir(dir);
}

/* ---- the manifest's record -------------------------------------------------------------- */

static void minimal_manifest(vlmc_manifest_t *m) {
  vlmc_manifest_init(m);
  m->model_family = strdup("qwen2_5_vl");
  m->vocab_size = 512;
  m->merge_size = 2;
  vlmc_preprocess_params_init(&m->preprocess);
  EXPECT_OK(vlmc_manifest_set_default_convention(m, "qwen2_5_vl"));
}

static void test_manifest_precision_round_trip(void) {
  vlmc_manifest_t m, back;
  minimal_manifest(&m);
  m.precision.compute = strdup("f16");
  m.precision.calibrated = true;
  m.precision.upcasts_rule = 95;
  m.precision.upcasts_calibrated = 2;
  m.precision.calibrated_modules = strdup("visual.blocks.3.mlp,visual.merger");
  vlmc_strbuf_t json;
  vlmc_strbuf_init(&json);
  EXPECT_OK(vlmc_manifest_to_json(&m, &json));
  EXPECT_TRUE(strstr(vlmc_strbuf_cstr(&json),
                     "\"precision\":{\"compute\":\"f16\",\"calibrated\":true,\"upcasts_rule\":95,"
                     "\"upcasts_calibrated\":2,\"calibrated_modules\":[\"visual.blocks.3.mlp\","
                     "\"visual.merger\"]}") != NULL);
  EXPECT_OK(vlmc_manifest_from_json("m.vlmc", json.data, json.len, &back));
  EXPECT_STREQ(back.precision.compute ? back.precision.compute : "(none)", "f16");
  EXPECT_TRUE(back.precision.calibrated);
  EXPECT_EQ_INT(back.precision.upcasts_rule, 95);
  EXPECT_EQ_INT(back.precision.upcasts_calibrated, 2);
  EXPECT_STREQ(back.precision.calibrated_modules ? back.precision.calibrated_modules : "(none)",
               "visual.blocks.3.mlp,visual.merger");
  vlmc_manifest_deinit(&back);

  /* An artifact compiled before the record existed still opens, with no record. */
  free(m.precision.compute);
  m.precision.compute = NULL;
  vlmc_strbuf_clear(&json);
  EXPECT_OK(vlmc_manifest_to_json(&m, &json));
  EXPECT_TRUE(strstr(vlmc_strbuf_cstr(&json), "\"precision\"") == NULL);
  EXPECT_OK(vlmc_manifest_from_json("old.vlmc", json.data, json.len, &back));
  EXPECT_TRUE(back.precision.compute == NULL);
  vlmc_manifest_deinit(&back);

  /* A damaged record is refused by field. */
  const char *bad = "\"upcasts_rule\":95";
  vlmc_strbuf_clear(&json);
  m.precision.compute = strdup("f16");
  EXPECT_OK(vlmc_manifest_to_json(&m, &json));
  char *at = strstr(json.data, bad);
  if (at) memcpy(at, "\"upcasts_rule\":-5", strlen(bad)); /* same length */
  EXPECT_ERROR(vlmc_manifest_from_json("bad.vlmc", json.data, json.len, &back),
               "bad.vlmc: manifest: precision.upcasts_rule: expected a non-negative integer");
  vlmc_strbuf_deinit(&json);
  vlmc_manifest_deinit(&m);
}

/* ---- vlmc_compile's refusals ------------------------------------------------------------- */

static vlmc_status_t no_sample(void *user, const vlmc_compile_sample_source_t *source,
                               const char *image, const char *prompt, vlmc_compile_sample_t *out) {
  return vlmc_status_make(VLMC_INVALID_ARGUMENT, "unused");
}

static vlmc_status_t compile_tiny(const char *precision, const char *passes, bool sampler) {
  static const char *const images[] = {"tests/fixtures/images/square_336.png"};
  vlmc_compile_options_t o;
  memset(&o, 0, sizeof o);
  o.checkpoint_dir = "tests/fixtures/parity/tiny-vocab512";
  o.output_path = "/tmp/vlmc-test-calibrate-refused.vlmc";
  o.target = "ref";
  o.precision = precision;
  o.passes = passes;
  o.calibrate_images = images;
  o.num_calibrate_images = 1;
  if (sampler) o.sampler.build = no_sample;
  vlmc_status_t st = vlmc_compile(&o);
  remove(o.output_path);
  return st;
}

/* A synthetic request (the tool builds real ones from image files): 16x16 patches of
 * noise, the image's own tokens, their M-RoPE positions. */
enum { GRID = 16, ROWS = GRID * GRID, WIDTH = 1176, TOKENS = ROWS / 4 + 2 };
typedef struct {
  float pixels[ROWS * WIDTH];
  int64_t grid[3], ids[TOKENS], positions[3 * TOKENS];
  int built, released;
} synthetic_t;

static vlmc_status_t synthetic_sample(void *user, const vlmc_compile_sample_source_t *source,
                                      const char *image, const char *prompt,
                                      vlmc_compile_sample_t *out) {
  synthetic_t *s = user;
  uint64_t x = 7;
  for (size_t i = 0; i < ROWS * WIDTH; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    s->pixels[i] = (float)((double)(x >> 40) / 16777216.0 * 4.0 - 2.0);
  }
  s->grid[0] = 1, s->grid[1] = GRID, s->grid[2] = GRID;
  s->ids[0] = source->vision_start_token_id;
  for (int i = 1; i < TOKENS - 1; ++i) s->ids[i] = source->image_token_id;
  s->ids[TOKENS - 1] = source->vision_end_token_id;
  vlmc_grid_thw_t grid = {1, GRID, GRID};
  vlmc_mrope_config_t config = {source->image_token_id, source->video_token_id,
                                source->merge_size};
  int64_t delta = 0;
  VLMC_RETURN_IF_ERROR(vlmc_mrope_position_ids(s->ids, TOKENS, &grid, 1, config, s->positions,
                                               &delta));
  *out = (vlmc_compile_sample_t){s->ids, TOKENS, s->positions, delta, s->pixels, ROWS, WIDTH,
                                 s->grid, 1, "synthetic", s};
  s->built++;
  return NULL;
}

static void synthetic_release(void *user, vlmc_compile_sample_t *sample) {
  ((synthetic_t *)user)->released++;
}

static vlmc_status_t read_manifest(const char *path, vlmc_manifest_t *out) {
  vlmc_artifact_t *a = NULL;
  const vlmc_artifact_section_t *section = NULL;
  vlmc_status_t st = vlmc_artifact_open(path, &a);
  if (!st) st = vlmc_artifact_require(a, "manifest", "test", &section);
  if (!st) st = vlmc_manifest_from_json(path, (const char *)section->data, (size_t)section->size,
                                        out);
  vlmc_artifact_destroy(a);
  return st;
}

/* vlmc_compile with calibration, in process: a pipeline given with --passes is split at its
 * precision item (with or without options), the builder is called once per image and its
 * request released, and the manifest records the calibrated f16 program (the tiny model fits
 * f16 on this input: no calibration upcast). */
static void test_compile_calibrated(void) {
  static const char *const images[] = {"first.png", "second.png"};
  static const char *const pipelines[] = {
      NULL, "mrope-layout,window-reorder,canonicalize,cse,dce,precision{target=f16},dce"};
  synthetic_t *synthetic = calloc(1, sizeof *synthetic);
  for (int i = 0; synthetic && i < 2; ++i) {
    vlmc_compile_options_t o;
    memset(&o, 0, sizeof o);
    o.checkpoint_dir = "tests/fixtures/parity/tiny-vocab512";
    o.output_path = "/tmp/vlmc-test-calibrated.vlmc";
    o.target = "ref";
    o.precision = "f16";
    o.passes = pipelines[i];
    o.calibrate_images = images;
    o.num_calibrate_images = 2;
    o.calibrate_decode_steps = 2;
    o.sampler = (vlmc_compile_sampler_t){synthetic_sample, synthetic_release, synthetic};
    synthetic->built = synthetic->released = 0;
    EXPECT_OK(vlmc_compile(&o));
    EXPECT_EQ_INT(synthetic->built, 2);
    EXPECT_EQ_INT(synthetic->released, 2);
    vlmc_manifest_t m;
    vlmc_manifest_init(&m);
    EXPECT_OK(read_manifest(o.output_path, &m));
    EXPECT_STREQ(m.precision.compute ? m.precision.compute : "(none)", "f16");
    EXPECT_TRUE(m.precision.calibrated);
    EXPECT_EQ_INT(m.precision.upcasts_calibrated, 0);
    EXPECT_TRUE(m.precision.upcasts_rule > 0);
    EXPECT_STREQ(m.precision.calibrated_modules ? m.precision.calibrated_modules : "(none)", "");
    vlmc_manifest_deinit(&m);
    remove(o.output_path);
  }
  free(synthetic);
}

static void test_compile_refusals(void) {
  EXPECT_ERROR(compile_tiny("f32", NULL, true), "there is nothing to calibrate");
  EXPECT_ERROR(compile_tiny("f16", "canonicalize,dce", true),
               "--calibrate: the pipeline has no precision pass");
  EXPECT_ERROR(compile_tiny("f16", "canonicalize, precision ,dce", true),
               "there is nothing to calibrate"); /* precision alone: target ref */
  EXPECT_ERROR(compile_tiny("f16", "canonicalize,precision{target=f16,calibration=r.txt}", true),
               "already names a ranges file (calibration=...)");
  EXPECT_ERROR(compile_tiny("f16", NULL, false), "--calibrate: no request builder");
  /* The builder's error names the image. */
  EXPECT_ERROR(compile_tiny("f16", NULL, true),
               "--calibrate tests/fixtures/images/square_336.png: unused");
}

int main(void) {
  RUN_TEST(test_param_module_drops_two_components);
  RUN_TEST(test_op_module_is_the_nearest_weight);
  RUN_TEST(test_headroom_limit);
  RUN_TEST(test_headroom_rule_in_the_policy);
  RUN_TEST(test_headroom_option_of_the_pass);
  RUN_TEST(test_manifest_precision_round_trip);
  RUN_TEST(test_compile_refusals);
  RUN_TEST(test_compile_calibrated);
  return TEST_SUMMARY();
}
