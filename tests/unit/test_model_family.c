/* The model family registry (models/family.h): lookup by model_type, the refusal that lists
 * the supported families, the Qwen2.5-VL entry and its calling convention, which must name
 * the functions the builder really makes. */
#define _POSIX_C_SOURCE 200809L
#include "tests/unit/test_safetensors_util.h"

#include <string.h>

#include "models/family.h"
#include "models/qwen2_5_vl.h"
#include "tests/unit/test.h"

#define TINY "tests/fixtures/configs/tiny_nested_config.json"
#define TINY_CHECKPOINT "tests/fixtures/parity/tiny-vocab512"

/* The whole message of an expected error (NULL-safe), freed. */
static void expect_message(vlmc_status_t status, const char *expected) {
  EXPECT_TRUE(status != NULL);
  EXPECT_STREQ(vlmc_status_message(status), expected);
  vlmc_status_free(status);
}

static vlmc_status_t parse_text(const char *text, const vlmc_model_family_t **out_family) {
  vlmc_model_config_t config;
  return vlmc_model_family_parse_config(text, strlen(text), "config.json", out_family, &config);
}

/* ---- the registry ------------------------------------------------------------------------ */

static void test_every_entry_is_complete(void) {
  size_t count = 0;
  for (const vlmc_model_family_t *f; (f = vlmc_model_family_at(count)) != NULL; ++count) {
    EXPECT_TRUE(f->name && f->name[0] && f->display_name && f->display_name[0]);
    EXPECT_TRUE(f->model_types && f->model_types[0]);
    EXPECT_TRUE(f->parse_config && f->build && f->build_from_checkpoint);
    const vlmc_model_convention_t *c = &f->convention;
    EXPECT_TRUE(c->encode_image && c->prefill && c->decode && c->positions);
    EXPECT_TRUE(c->positions && (!strcmp(c->positions, VLMC_POSITIONS_MROPE) ||
                                 !strcmp(c->positions, VLMC_POSITIONS_PLAIN)));
    /* A model_type belongs to one family only: lookup would otherwise depend on the order. */
    for (const char *const *type = f->model_types; *type; ++type) {
      const vlmc_model_family_t *found = NULL;
      EXPECT_OK(vlmc_model_family_find(*type, &found));
      EXPECT_TRUE(found == f);
    }
  }
  EXPECT_EQ_INT(count, 5);
  EXPECT_TRUE(vlmc_model_family_at(0) == &vlmc_qwen2_5_vl_family);
  EXPECT_TRUE(vlmc_model_family_at(1) == &vlmc_qwen2_vl_family);
  EXPECT_TRUE(vlmc_model_family_at(2) == &vlmc_qwen2_family);
  EXPECT_TRUE(vlmc_model_family_at(3) == &vlmc_qwen3_vl_family);
  EXPECT_TRUE(vlmc_model_family_at(4) == &vlmc_qwen3_family);
  /* a text-only family's convention has no image encoder */
  EXPECT_STREQ(vlmc_qwen2_family.convention.encode_image, "");
  EXPECT_STREQ(vlmc_qwen3_family.convention.encode_image, "");
}

static void test_lookup_by_model_type(void) {
  const vlmc_model_family_t *family = NULL;
  EXPECT_OK(vlmc_model_family_find("qwen2_5_vl", &family));
  EXPECT_TRUE(family == &vlmc_qwen2_5_vl_family);
  if (!family) return;
  EXPECT_STREQ(family->name, "qwen2_5_vl");
  EXPECT_STREQ(family->display_name, "Qwen2.5-VL");
  EXPECT_TRUE(vlmc_model_family_accepts(family, "qwen2_5_vl"));
  EXPECT_TRUE(!vlmc_model_family_accepts(family, "qwen2_5_vl_text"));
  EXPECT_TRUE(!vlmc_model_family_accepts(family, "Qwen2_5_VL"));
}

static void test_unknown_model_type_lists_the_supported(void) {
  const vlmc_model_family_t *family = &vlmc_qwen2_5_vl_family;
  expect_message(vlmc_model_family_find("llama", &family),
                 "model_type 'llama': not a supported model family; supported: qwen2_5_vl, "
                 "qwen2_vl, qwen2, qwen3_vl, qwen3");
  EXPECT_TRUE(family == NULL);
  expect_message(parse_text("{\"model_type\":\"llama\"}", NULL),
                 "config.json: model_type 'llama': not a supported model family; supported: "
                 "qwen2_5_vl, qwen2_vl, qwen2, qwen3_vl, qwen3");
  /* The text decoder's own model_type (text_config.model_type) is not a checkpoint's. */
  EXPECT_ERROR(parse_text("{\"model_type\":\"qwen2_5_vl_text\"}", NULL),
               "model_type 'qwen2_5_vl_text': not a supported model family");
}

static void test_planned_families_are_named(void) {
  expect_message(parse_text("{\"model_type\":\"qwen3_vl_moe\"}", NULL),
                 "config.json: model_type: 'qwen3_vl_moe' (Qwen3-VL-MoE) is not supported yet; "
                 "vlmc reads qwen2_5_vl (Qwen2.5-VL), qwen2_vl (Qwen2-VL), qwen2 (Qwen2 (text "
                 "only)), qwen3_vl (Qwen3-VL), qwen3 (Qwen3 (text only))");
  /* a registered family's own parser reads the rest: Qwen2-VL asks for its keys */
  const vlmc_model_family_t *family = NULL;
  EXPECT_ERROR(parse_text("{\"model_type\":\"qwen2_vl\"}", &family),
               "config.json: required key vision_config is missing");
  EXPECT_ERROR(parse_text("{\"model_type\":\"qwen3_vl\"}", &family),
               "config.json: required key vision_config is missing");
  /* model_type is looked up first: a Qwen3-VL-MoE config is named as such although its keys
   * are not Qwen3-VL's. */
  EXPECT_ERROR(parse_text("{\"model_type\":\"qwen3_vl_moe\",\"text_config\":{}}", NULL),
               "model_type: 'qwen3_vl_moe' (Qwen3-VL-MoE) is not supported yet");
}

static void test_parse_config_reads_with_the_family_parser(void) {
  size_t len;
  char *text = read_fixture(TINY, &len);
  const vlmc_model_family_t *family = NULL;
  vlmc_model_config_t config;
  EXPECT_OK(vlmc_model_family_parse_config(text, len, "config.json", &family, &config));
  EXPECT_TRUE(family == &vlmc_qwen2_5_vl_family);
  EXPECT_STREQ(config.model_type, "qwen2_5_vl");
  EXPECT_EQ_INT(config.text.vocab_size, 512);
  free(text);
  /* The family's parser still refuses what it cannot read, by key. */
  EXPECT_ERROR(parse_text("{\"model_type\":\"qwen2_5_vl\"}", NULL),
               "config.json: required key vision_config is missing");
  EXPECT_ERROR(parse_text("{\"model_type\":7}", NULL),
               "config.json: model_type: expected a string, got a number");
}

/* ---- checkpoints ------------------------------------------------------------------------- */

static void test_open_checkpoint_by_model_type(void) {
  const vlmc_model_family_t *family = NULL;
  vlmc_checkpoint_t *checkpoint = NULL;
  EXPECT_OK(vlmc_model_family_open_checkpoint(TINY_CHECKPOINT, &family, &checkpoint));
  EXPECT_TRUE(family == &vlmc_qwen2_5_vl_family);
  EXPECT_TRUE(checkpoint != NULL);
  vlmc_checkpoint_destroy(checkpoint);

  char dir[256], expected[512];
  scratch_dir_create(dir, sizeof dir);
  write_bytes(dir, "config.json", "{\"model_type\":\"qwen3_vl_moe\"}", 29);
  EXPECT_ERROR(vlmc_model_family_open_checkpoint(dir, &family, &checkpoint),
               "config.json: model_type: 'qwen3_vl_moe' (Qwen3-VL-MoE) is not supported yet");
  EXPECT_TRUE(checkpoint == NULL);
  write_bytes(dir, "config.json", "{\"model_type\":\"llama\"}", 22);
  snprintf(expected, sizeof expected,
           "%s/config.json: model_type 'llama': not a supported model family; supported: "
           "qwen2_5_vl, qwen2_vl, qwen2, qwen3_vl, qwen3",
           dir);
  expect_message(vlmc_model_family_open_checkpoint(dir, NULL, &checkpoint), expected);
  scratch_dir_remove(dir);
  EXPECT_ERROR(vlmc_model_family_open_checkpoint("/nonexistent/checkpoint", NULL, &checkpoint),
               "/nonexistent/checkpoint: not a checkpoint folder");
  EXPECT_ERROR(vlmc_model_family_open_checkpoint(TINY, NULL, &checkpoint),
               "not a checkpoint folder");
}

/* ---- the calling convention -------------------------------------------------------------- */

static void test_qwen2_5_vl_convention(void) {
  const vlmc_model_convention_t *c = &vlmc_qwen2_5_vl_family.convention;
  EXPECT_STREQ(c->encode_image, "encode_image");
  EXPECT_STREQ(c->prefill, "prefill");
  EXPECT_STREQ(c->decode, "decode");
  EXPECT_STREQ(c->positions, "mrope");
}

/* The convention names the functions the family's builder makes, and "mrope" positions are
 * i64[3, S] in prefill and i64[3, 1] in decode. */
static void test_convention_matches_the_built_module(void) {
  const vlmc_model_family_t *family = NULL;
  vlmc_checkpoint_t *checkpoint = NULL;
  vlmc_module_t *module = NULL;
  EXPECT_OK(vlmc_model_family_open_checkpoint(TINY_CHECKPOINT, &family, &checkpoint));
  if (!checkpoint) return;
  EXPECT_OK(family->build_from_checkpoint(checkpoint, NULL, &module));
  vlmc_checkpoint_destroy(checkpoint);
  if (!module) return;
  const vlmc_model_convention_t *c = &family->convention;
  vlmc_func_t *encode = vlmc_module_func_find(module, c->encode_image);
  vlmc_func_t *prefill = vlmc_module_func_find(module, c->prefill);
  vlmc_func_t *decode = vlmc_module_func_find(module, c->decode);
  EXPECT_TRUE(encode && prefill && decode);
  EXPECT_EQ_INT(module->num_funcs, 3);
  if (prefill && decode) {
    const vlmc_type_t *pos = &prefill->args[2].type, *step = &decode->args[1].type;
    EXPECT_EQ_INT(pos->dtype, VLMC_DTYPE_I64);
    EXPECT_EQ_INT(pos->rank, 2);
    EXPECT_TRUE(vlmc_dim_equal(pos->dims[0], vlmc_dim_static(3)));
    EXPECT_EQ_INT(step->rank, 2);
    EXPECT_TRUE(vlmc_dim_equal(step->dims[0], vlmc_dim_static(3)));
    EXPECT_TRUE(vlmc_dim_equal(step->dims[1], vlmc_dim_static(1)));
  }
  vlmc_module_destroy(module);
}

/* ---- the tensor plan ---------------------------------------------------------------------- */

typedef struct {
  const vlmc_checkpoint_t *checkpoint;
  size_t count, mismatches;
} plan_check_t;

/* A vlmc_model_tensor_fn: the planned tensor is in the checkpoint with that shape. */
static void check_planned(void *ctx, const char *name, uint32_t rank, const int64_t *shape,
                          bool is_norm) {
  plan_check_t *c = ctx;
  ++c->count;
  const vlmc_st_tensor_t *t = vlmc_checkpoint_find(c->checkpoint, name);
  bool same = t && (uint32_t)t->rank == rank;
  for (uint32_t i = 0; same && i < rank; ++i) same = t->shape[i] == shape[i];
  if (!same) {
    ++c->mismatches;
    TEST_FAIL_("planned tensor '%s' is not in the tiny checkpoint with that shape", name);
  }
}

/* The plan of the tiny checkpoint's config is its tensor list (what random-checkpoint writes
 * and the fuzzer's synthetic table holds): the same names, the same shapes, nothing more. */
static void test_plan_is_the_checkpoint_tensor_list(void) {
  const vlmc_model_family_t *family = NULL;
  vlmc_checkpoint_t *checkpoint = NULL;
  EXPECT_OK(vlmc_model_family_open_checkpoint(TINY_CHECKPOINT, &family, &checkpoint));
  if (!checkpoint) return;
  EXPECT_TRUE(family->plan_tensors != NULL);
  if (family->plan_tensors) {
    plan_check_t c = {.checkpoint = checkpoint};
    EXPECT_OK(family->plan_tensors(vlmc_checkpoint_config(checkpoint), check_planned, &c));
    EXPECT_EQ_INT(c.mismatches, 0);
    EXPECT_EQ_INT(c.count, vlmc_st_archive_count(vlmc_checkpoint_archive(checkpoint)));
  }
  vlmc_checkpoint_destroy(checkpoint);
}

int main(void) {
  RUN_TEST(test_every_entry_is_complete);
  RUN_TEST(test_lookup_by_model_type);
  RUN_TEST(test_unknown_model_type_lists_the_supported);
  RUN_TEST(test_planned_families_are_named);
  RUN_TEST(test_parse_config_reads_with_the_family_parser);
  RUN_TEST(test_open_checkpoint_by_model_type);
  RUN_TEST(test_qwen2_5_vl_convention);
  RUN_TEST(test_convention_matches_the_built_module);
  RUN_TEST(test_plan_is_the_checkpoint_tensor_list);
  return TEST_SUMMARY();
}
