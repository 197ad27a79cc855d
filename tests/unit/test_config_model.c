/* config.json: the real 3B/7B configs and the tiny test config in every layout, then every
 * missing key, wrong type and inconsistency, each refused with the file and key named. */
#define _POSIX_C_SOURCE 200809L
#include "tests/unit/test_safetensors_util.h"

#include <cJSON.h>

#include "frontend/config.h"
#include "tests/unit/test.h"

#define FIXTURES "tests/fixtures/configs/"
#define TINY FIXTURES "tiny_nested_config.json"
#define TINY_FLAT FIXTURES "tiny_flat_config.json"
#define TINY_5X FIXTURES "tiny_5x_config.json"
#define CFG_3B FIXTURES "qwen2_5_vl_3b_config.json"

static vlmc_status_t parse_fixture(const char *fixture, vlmc_model_config_t *out) {
  size_t len;
  char *text = read_fixture(fixture, &len);
  vlmc_status_t status = vlmc_qwen2_5_vl_config_parse(text, len, "config.json", out);
  free(text);
  return status;
}

/* The fixture with the value at dotted `path` replaced by the JSON text `value` (added when
 * absent), or removed when `value` is NULL; parsed as "config.json" into *out (may be NULL). */
static vlmc_status_t parse_edited_into(const char *fixture, const char *path, const char *value,
                                       vlmc_model_config_t *out) {
  size_t len;
  char *text = read_fixture(fixture, &len);
  cJSON *root = cJSON_Parse(text);
  free(text);
  char key_path[256];
  snprintf(key_path, sizeof key_path, "%s", path);
  cJSON *parent = root;
  char *key = key_path, *dot;
  while ((dot = strchr(key, '.')) != NULL) {
    *dot = '\0';
    parent = cJSON_GetObjectItemCaseSensitive(parent, key);
    key = dot + 1;
  }
  if (!parent) {
    fprintf(stderr, "test setup: %s has no parent for %s\n", fixture, path);
    exit(2);
  }
  cJSON_DeleteItemFromObjectCaseSensitive(parent, key);
  if (value) cJSON_AddItemToObject(parent, key, cJSON_Parse(value));
  char *edited = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  vlmc_model_config_t config;
  vlmc_status_t status =
      vlmc_qwen2_5_vl_config_parse(edited, strlen(edited), "config.json", out ? out : &config);
  free(edited);
  return status;
}

static vlmc_status_t parse_edited(const char *fixture, const char *path, const char *value) {
  return parse_edited_into(fixture, path, value, NULL);
}

static vlmc_status_t parse_text(const char *text) {
  vlmc_model_config_t config;
  return vlmc_qwen2_5_vl_config_parse(text, strlen(text), "config.json", &config);
}

/* ---- accepted configs -------------------------------------------------------------------- */

static void test_3b_legacy_flat(void) {
  vlmc_model_config_t c;
  EXPECT_OK(parse_fixture(CFG_3B, &c));
  EXPECT_STREQ(c.model_type, "qwen2_5_vl");
  EXPECT_TRUE(!c.nested);
  EXPECT_EQ_INT(c.text.vocab_size, 151936);
  EXPECT_EQ_INT(c.text.hidden_size, 2048);
  EXPECT_EQ_INT(c.text.intermediate_size, 11008);
  EXPECT_EQ_INT(c.text.num_hidden_layers, 36);
  EXPECT_EQ_INT(c.text.num_attention_heads, 16);
  EXPECT_EQ_INT(c.text.num_key_value_heads, 2);
  EXPECT_EQ_INT(c.text.head_dim, 128);
  EXPECT_NEAR(c.text.rms_norm_eps, 1e-6, 0);
  EXPECT_NEAR(c.text.rope_theta, 1e6, 0);
  EXPECT_EQ_INT(c.text.mrope_section[0], 16);
  EXPECT_EQ_INT(c.text.mrope_section[1], 24);
  EXPECT_EQ_INT(c.text.mrope_section[2], 24);
  EXPECT_EQ_INT(c.text.max_position_embeddings, 128000);
  EXPECT_TRUE(c.text.has_bos_token_id && c.text.bos_token_id == 151643);
  EXPECT_TRUE(c.text.has_eos_token_id && c.text.eos_token_id == 151645);
  EXPECT_EQ_INT(c.vision.depth, 32);
  EXPECT_EQ_INT(c.vision.hidden_size, 1280);
  EXPECT_EQ_INT(c.vision.intermediate_size, 3420);
  EXPECT_EQ_INT(c.vision.num_heads, 16);
  EXPECT_EQ_INT(c.vision.head_dim, 80);
  EXPECT_EQ_INT(c.vision.out_hidden_size, 2048);
  EXPECT_EQ_INT(c.vision.in_channels, 3); /* from the legacy in_chans */
  EXPECT_EQ_INT(c.vision.patch_size, 14); /* patch_size and spatial_patch_size agree */
  EXPECT_EQ_INT(c.vision.temporal_patch_size, 2);
  EXPECT_EQ_INT(c.vision.spatial_merge_size, 2);
  EXPECT_EQ_INT(c.vision.window_size, 112);
  EXPECT_EQ_INT(c.vision.tokens_per_second, 2);
  EXPECT_EQ_INT(c.vision.fullatt_count, 4);
  const int64_t full[4] = {7, 15, 23, 31};
  for (int i = 0; i < 4; ++i) EXPECT_EQ_INT(c.vision.fullatt_block_indexes[i], full[i]);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ_INT(c.image_token_id, 151655);
  EXPECT_EQ_INT(c.video_token_id, 151656);
  EXPECT_EQ_INT(c.vision_start_token_id, 151652);
  EXPECT_EQ_INT(c.vision_end_token_id, 151653);
  EXPECT_STREQ(c.weights_dtype, "bfloat16");
}

static void test_7b_flat_and_nested_agree(void) {
  vlmc_model_config_t flat, nested;
  EXPECT_OK(parse_fixture(FIXTURES "qwen2_5_vl_7b_config.json", &flat));
  EXPECT_OK(parse_fixture(FIXTURES "qwen2_5_vl_7b_nested_config.json", &nested));
  EXPECT_TRUE(!flat.nested && nested.nested);
  EXPECT_EQ_INT(flat.text.hidden_size, 3584);
  EXPECT_EQ_INT(flat.text.num_attention_heads, 28);
  EXPECT_EQ_INT(flat.text.num_key_value_heads, 4);
  EXPECT_EQ_INT(flat.text.vocab_size, 152064);
  EXPECT_EQ_INT(flat.vision.out_hidden_size, 3584);
  EXPECT_TRUE(!flat.tie_word_embeddings && !nested.tie_word_embeddings);
  EXPECT_TRUE(memcmp(&flat.text, &nested.text, sizeof flat.text) == 0);
  EXPECT_TRUE(memcmp(&flat.vision, &nested.vision, sizeof flat.vision) == 0);
  /* text_config.image_token_id is null there: the top-level id is used. */
  EXPECT_EQ_INT(nested.image_token_id, 151655);
  EXPECT_EQ_INT(nested.video_token_id, 151656);
}

static void test_tiny_layouts_agree(void) {
  vlmc_model_config_t nested, flat, five;
  EXPECT_OK(parse_fixture(TINY, &nested));
  EXPECT_OK(parse_fixture(TINY_FLAT, &flat));
  EXPECT_OK(parse_fixture(TINY_5X, &five));
  EXPECT_TRUE(nested.nested && !flat.nested && five.nested);
  EXPECT_EQ_INT(nested.text.head_dim, 16);
  EXPECT_EQ_INT(nested.text.mrope_section[0], 2);
  EXPECT_EQ_INT(nested.vision.head_dim, 16);
  EXPECT_EQ_INT(nested.vision.fullatt_count, 2);
  EXPECT_EQ_INT(nested.image_token_id, 500);
  EXPECT_STREQ(nested.weights_dtype, "");
  EXPECT_TRUE(memcmp(&nested.text, &flat.text, sizeof nested.text) == 0);
  EXPECT_TRUE(memcmp(&nested.vision, &flat.vision, sizeof nested.vision) == 0);
  EXPECT_TRUE(memcmp(&nested.text, &five.text, sizeof nested.text) == 0);
  EXPECT_TRUE(memcmp(&nested.vision, &five.vision, sizeof nested.vision) == 0);
  EXPECT_TRUE(!nested.tie_word_embeddings && five.tie_word_embeddings);
  EXPECT_STREQ(five.weights_dtype, "bfloat16");
}

static void test_preferences(void) {
  /* text_config wins over the top level; the top level wins for the multimodal ids. */
  vlmc_model_config_t c;
  EXPECT_OK(parse_edited_into(TINY, "hidden_size", "4096", &c));
  EXPECT_EQ_INT(c.text.hidden_size, 64);
  EXPECT_OK(parse_edited_into(TINY, "text_config.image_token_id", "7", &c));
  EXPECT_EQ_INT(c.image_token_id, 500);
  /* The flat layout reads the text keys at the top level. */
  EXPECT_OK(parse_edited_into(TINY_FLAT, "vocab_size", "1000", &c));
  EXPECT_EQ_INT(c.text.vocab_size, 1000);
  /* rope_parameters.rope_theta wins over rope_theta; the 5.x spelling of the type is accepted. */
  EXPECT_OK(parse_edited_into(
      TINY, "text_config.rope_scaling",
      "{\"rope_type\":\"default\",\"mrope_section\":[2,3,3],\"rope_theta\":5}", &c));
  EXPECT_NEAR(c.text.rope_theta, 5, 0);
  /* text_config.rope_parameters wins over a top-level rope_scaling. */
  EXPECT_OK(parse_edited_into(TINY_5X, "rope_scaling", "{\"mrope_section\":[1,1,1]}", &c));
  EXPECT_EQ_INT(c.text.mrope_section[1], 3);
  /* A null required value counts as missing, with the top-level fallback. */
  EXPECT_OK(
      parse_edited(FIXTURES "qwen2_5_vl_7b_nested_config.json", "text_config.hidden_size", "null"));
  EXPECT_ERROR(parse_edited(TINY, "text_config.hidden_size", "null"),
               "config.json: required key text_config.hidden_size is missing (also looked for "
               "hidden_size)");
}

static void test_load_from_folder_and_file(void) {
  char dir[256];
  scratch_dir_create(dir, sizeof dir);
  copy_fixture(TINY, dir, "config.json");
  vlmc_model_config_t c;
  EXPECT_OK(vlmc_model_config_load(dir, vlmc_qwen2_5_vl_config_parse, &c));
  EXPECT_EQ_INT(c.text.vocab_size, 512);
  char path[512];
  path_join_buf(path, sizeof path, dir, "config.json");
  EXPECT_OK(vlmc_model_config_load(path, vlmc_qwen2_5_vl_config_parse, &c));
  unlink(path);
  EXPECT_ERROR(vlmc_model_config_load(dir, vlmc_qwen2_5_vl_config_parse, &c),
               "/config.json: no such file");
  scratch_dir_remove(dir);
  EXPECT_ERROR(vlmc_model_config_load("/nonexistent/config.json", vlmc_qwen2_5_vl_config_parse, &c),
               "/nonexistent/config.json: no such file");
}

/* ---- refused configs --------------------------------------------------------------------- */

typedef struct {
  const char *fixture, *path, *value, *expected;
} edit_case_t;

static void run_edit_cases(const edit_case_t *cases, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    vlmc_status_t status = parse_edited(cases[i].fixture, cases[i].path, cases[i].value);
    if (!status) {
      TEST_FAIL_("editing %s = %s was accepted, expected \"%s\"", cases[i].path,
                 cases[i].value ? cases[i].value : "(removed)", cases[i].expected);
    } else if (!strstr(vlmc_status_message(status), cases[i].expected)) {
      TEST_FAIL_("editing %s = %s: \"%s\" does not contain \"%s\"", cases[i].path,
                 cases[i].value ? cases[i].value : "(removed)", vlmc_status_message(status),
                 cases[i].expected);
    }
    vlmc_status_free(status);
  }
}

#define MISSING "config.json: required key "

static void test_missing_keys(void) {
  static const edit_case_t cases[] = {
      {TINY, "model_type", NULL, MISSING "model_type is missing"},
      {TINY, "vision_config", NULL, MISSING "vision_config is missing"},
      {TINY, "text_config.vocab_size", NULL,
       MISSING "text_config.vocab_size is missing (also looked for vocab_size)"},
      {TINY, "text_config.hidden_size", NULL, MISSING "text_config.hidden_size is missing"},
      {TINY, "text_config.intermediate_size", NULL, MISSING "text_config.intermediate_size"},
      {TINY, "text_config.num_hidden_layers", NULL, MISSING "text_config.num_hidden_layers"},
      {TINY, "text_config.num_attention_heads", NULL, MISSING "text_config.num_attention_heads"},
      {TINY, "text_config.num_key_value_heads", NULL, MISSING "text_config.num_key_value_heads"},
      {TINY, "text_config.rms_norm_eps", NULL, MISSING "text_config.rms_norm_eps"},
      {TINY, "text_config.hidden_act", NULL, MISSING "text_config.hidden_act"},
      {TINY, "text_config.rope_scaling", NULL,
       MISSING "text_config.rope_parameters is missing (also looked for text_config.rope_scaling, "
               "rope_parameters, rope_scaling)"},
      {TINY, "text_config.rope_scaling.mrope_section", NULL,
       MISSING "text_config.rope_scaling.mrope_section is missing"},
      {TINY, "text_config.rope_theta", NULL,
       MISSING "text_config.rope_scaling.rope_theta is missing (also looked for "
               "text_config.rope_theta)"},
      {TINY, "vision_config.depth", NULL, MISSING "vision_config.depth is missing"},
      {TINY, "vision_config.hidden_size", NULL, MISSING "vision_config.hidden_size"},
      {TINY, "vision_config.intermediate_size", NULL, MISSING "vision_config.intermediate_size"},
      {TINY, "vision_config.num_heads", NULL, MISSING "vision_config.num_heads"},
      {TINY, "vision_config.out_hidden_size", NULL, MISSING "vision_config.out_hidden_size"},
      {TINY, "vision_config.in_channels", NULL,
       MISSING "vision_config.in_channels is missing (also looked for vision_config.in_chans)"},
      {TINY, "vision_config.patch_size", NULL,
       MISSING "vision_config.patch_size is missing (also looked for "
               "vision_config.spatial_patch_size)"},
      {TINY, "vision_config.temporal_patch_size", NULL, MISSING "vision_config.temporal_patch"},
      {TINY, "vision_config.spatial_merge_size", NULL, MISSING "vision_config.spatial_merge_size"},
      {TINY, "vision_config.window_size", NULL, MISSING "vision_config.window_size"},
      {TINY, "vision_config.tokens_per_second", NULL, MISSING "vision_config.tokens_per_second"},
      {TINY, "vision_config.fullatt_block_indexes", NULL, MISSING "vision_config.fullatt_block"},
      {TINY, "vision_config.hidden_act", NULL, MISSING "vision_config.hidden_act"},
      {TINY, "tie_word_embeddings", NULL,
       MISSING "tie_word_embeddings is missing (also looked for text_config.tie_word_embeddings)"},
      {TINY, "image_token_id", NULL, MISSING "image_token_id is missing"},
      {TINY, "video_token_id", NULL, MISSING "video_token_id is missing"},
      {TINY, "vision_start_token_id", NULL, MISSING "vision_start_token_id is missing"},
      {TINY, "vision_end_token_id", NULL, MISSING "vision_end_token_id is missing"},
      {CFG_3B, "hidden_size", NULL, MISSING "hidden_size is missing"},
      {CFG_3B, "rope_scaling", NULL,
       MISSING "rope_parameters is missing (also looked for rope_scaling)"},
      {CFG_3B, "rope_theta", NULL,
       MISSING "rope_scaling.rope_theta is missing (also looked for "
               "rope_theta)"},
      {CFG_3B, "vision_config.in_chans", NULL, MISSING "vision_config.in_channels is missing"},
      {TINY_5X, "text_config.rope_parameters.rope_theta", NULL,
       MISSING "text_config.rope_parameters.rope_theta is missing"},
  };
  run_edit_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_wrong_types(void) {
  static const edit_case_t cases[] = {
      {TINY, "text_config.hidden_size", "\"64\"",
       "config.json: text_config.hidden_size: expected an integer, got a string"},
      {TINY, "vision_config.depth", "4.5",
       "config.json: vision_config.depth: expected an integer, "
       "got 4.5"},
      {TINY, "vision_config.depth", "0", "vision_config.depth: expected an integer >= 1, got 0"},
      {TINY, "vision_config.depth", "300",
       "vision_config.depth: expected an integer <= 256, got 300"},
      {TINY, "text_config.num_hidden_layers", "-2",
       "text_config.num_hidden_layers: expected an "
       "integer >= 1, got -2"},
      {TINY, "text_config.vocab_size", "1e300",
       "text_config.vocab_size: expected an integer, got "
       "1e+300"},
      {TINY, "tie_word_embeddings", "\"yes\"",
       "config.json: tie_word_embeddings: expected true or false, got a string"},
      {TINY, "text_config.rms_norm_eps", "\"1e-6\"",
       "text_config.rms_norm_eps: expected a number, got a string"},
      {TINY, "text_config.rms_norm_eps", "0",
       "text_config.rms_norm_eps: expected a number in (0, 1)"},
      {TINY, "text_config.rope_theta", "-1", "text_config.rope_theta: expected a positive number"},
      {TINY, "vision_config.fullatt_block_indexes", "\"1,3\"",
       "vision_config.fullatt_block_indexes: expected an array, got a string"},
      {TINY, "vision_config.fullatt_block_indexes", "[1,\"3\"]",
       "vision_config.fullatt_block_indexes[1]: expected an integer, got a string"},
      {TINY, "text_config.rope_scaling.mrope_section", "[2,3]",
       "text_config.rope_scaling.mrope_section: expected 3 elements, got 2"},
      {TINY, "text_config.rope_scaling.mrope_section", "[2,3,true]",
       "text_config.rope_scaling.mrope_section[2]: expected an integer, got a boolean"},
      {TINY, "text_config.rope_scaling", "[2,3,3]",
       "text_config.rope_scaling: expected an object, got an array"},
      {TINY, "text_config", "[]", "config.json: text_config: expected an object, got an array"},
      {TINY, "vision_config", "7", "config.json: vision_config: expected an object, got a number"},
      {TINY, "text_config.hidden_act", "1",
       "text_config.hidden_act: expected a string, got a number"},
      {TINY, "model_type", "3", "config.json: model_type: expected a string, got a number"},
      {TINY, "image_token_id", "-1", "image_token_id: expected an integer >= 0, got -1"},
      {TINY, "text_config.eos_token_id", "[]", "text_config.eos_token_id: expected 1 to 8 ids"},
      {TINY, "text_config.use_sliding_window", "0",
       "text_config.use_sliding_window: expected true or false, got a number"},
  };
  run_edit_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_inconsistent_values(void) {
  static const edit_case_t cases[] = {
      {TINY, "text_config.rope_scaling.mrope_section", "[2,3,2]",
       "config.json: text_config.rope_scaling.mrope_section [2,3,2] sums to 7, rotary half-width "
       "is 8"},
      {CFG_3B, "rope_scaling.mrope_section", "[16,24,16]",
       "config.json: rope_scaling.mrope_section [16,24,16] sums to 56, rotary half-width is 64"},
      {TINY, "text_config.hidden_size", "66",
       "config.json: text_config.hidden_size 66 is not divisible by "
       "text_config.num_attention_heads 4"},
      {TINY, "text_config.num_key_value_heads", "3",
       "config.json: text_config.num_attention_heads 4 is not divisible by "
       "text_config.num_key_value_heads 3"},
      {CFG_3B, "num_key_value_heads", "3",
       "config.json: num_attention_heads 16 is not divisible by num_key_value_heads 3"},
      {TINY, "vision_config.out_hidden_size", "32",
       "config.json: vision_config.out_hidden_size 32 differs from text_config.hidden_size 64"},
      {TINY, "vision_config.fullatt_block_indexes", "[1,4]",
       "config.json: vision_config.fullatt_block_indexes[1] = 4 is out of range for "
       "vision_config.depth 4"},
      {TINY, "vision_config.fullatt_block_indexes", "[-1]",
       "vision_config.fullatt_block_indexes[0] = -1 is out of range"},
      {TINY, "vision_config.fullatt_block_indexes", "[3,1,3]",
       "vision_config.fullatt_block_indexes: block 3 is listed twice"},
      {TINY, "vision_config.fullatt_block_indexes", "[0,1,2,3,3]",
       "vision_config.fullatt_block_indexes: has 5 entries for vision_config.depth 4"},
      {TINY, "image_token_id", "512",
       "config.json: image_token_id 512 is not below "
       "text_config.vocab_size 512"},
      {TINY, "vision_end_token_id", "600", "config.json: vision_end_token_id 600 is not below"},
      {CFG_3B, "video_token_id", "151936",
       "config.json: video_token_id 151936 is not below "
       "vocab_size 151936"},
      {TINY, "text_config.eos_token_id", "512",
       "text_config.eos_token_id 512 is not below the "
       "vocabulary (512)"},
      {TINY, "vision_config.in_chans", "4",
       "config.json: vision_config.in_channels: 3 disagrees with vision_config.in_chans 4"},
      {CFG_3B, "vision_config.patch_size", "16",
       "vision_config.patch_size: 16 disagrees with vision_config.spatial_patch_size 14"},
      {TINY, "vision_config.window_size", "100",
       "config.json: vision_config.window_size 100 is not a multiple of patch_size * "
       "spatial_merge_size = 28"},
      {TINY, "vision_config.hidden_size", "72",
       "vision head_dim 18 (vision_config.hidden_size / num_heads) is not a multiple of 4"},
      {TINY, "vision_config.hidden_size", "66",
       "vision_config.hidden_size 66 is not divisible by vision_config.num_heads 4"},
  };
  run_edit_cases(cases, sizeof cases / sizeof cases[0]);
}

/* The message the task names, on a 5.x-style config with the 3B's text sizes. */
static void test_brief_mrope_message(void) {
  size_t len;
  char *text = read_fixture(TINY_5X, &len);
  cJSON *root = cJSON_Parse(text);
  free(text);
  cJSON *t = cJSON_GetObjectItem(root, "text_config");
  cJSON_SetNumberValue(cJSON_GetObjectItem(t, "hidden_size"), 2048);
  cJSON_SetNumberValue(cJSON_GetObjectItem(t, "num_attention_heads"), 16);
  cJSON *section = cJSON_GetObjectItem(cJSON_GetObjectItem(t, "rope_parameters"), "mrope_section");
  const int values[3] = {16, 24, 16};
  for (int i = 0; i < 3; ++i) cJSON_SetNumberValue(cJSON_GetArrayItem(section, i), values[i]);
  cJSON_SetNumberValue(
      cJSON_GetObjectItem(cJSON_GetObjectItem(root, "vision_config"), "out_hidden_size"), 2048);
  char *edited = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  EXPECT_ERROR(parse_text(edited),
               "config.json: text_config.rope_parameters.mrope_section "
               "[16,24,16] sums to 56, rotary half-width is 64");
  free(edited);
}

static void test_unsupported_values(void) {
  static const edit_case_t cases[] = {
      {TINY, "text_config.hidden_act", "\"gelu\"",
       "config.json: text_config.hidden_act: activation 'gelu' is not supported"},
      {TINY, "vision_config.hidden_act", "\"quick_gelu\"",
       "vision_config.hidden_act: activation 'quick_gelu' is not supported"},
      {TINY, "text_config.use_sliding_window", "true",
       "text_config.use_sliding_window: sliding-window attention is not supported"},
      {TINY, "text_config.rope_scaling.type", "\"yarn\"",
       "config.json: text_config.rope_scaling.type: 'yarn' is not supported"},
      {TINY, "vision_config.in_channels", "4",
       "config.json: vision_config.in_channels 4: only RGB (3) images are supported"},
      {TINY, "torch_dtype", "\"int8\"",
       "config.json: torch_dtype: 'int8' is not a weight dtype vlmc reads"},
  };
  /* Which model_types are refused, and how, is the family registry's (test_model_family). */
  run_edit_cases(cases, sizeof cases / sizeof cases[0]);
}

/* The first step for every family: model_type alone, whatever it names. */
static void test_model_type_alone(void) {
  char type[VLMC_MODEL_TYPE_MAX];
  const char *llama = "{\"model_type\":\"llama\",\"hidden_size\":8}";
  EXPECT_OK(vlmc_model_type_parse(llama, strlen(llama), "config.json", type));
  EXPECT_STREQ(type, "llama");
  EXPECT_ERROR(vlmc_model_type_parse("{}", 2, "config.json", type),
               "config.json: required key model_type is missing");
  EXPECT_ERROR(vlmc_model_type_parse("[]", 2, "config.json", type),
               "config.json: expected a JSON object, got an array");
  char long_type[128];
  snprintf(long_type, sizeof long_type, "{\"model_type\":\"%070d\"}", 0);
  EXPECT_ERROR(vlmc_model_type_parse(long_type, strlen(long_type), "config.json", type),
               "config.json: model_type: '0000");
  EXPECT_ERROR(vlmc_model_type_parse("{\"model_type\":\"\"}", 17, "config.json", type),
               "is not a model type name (1 to 63 characters)");
  EXPECT_OK(vlmc_model_type_load(TINY, type));
  EXPECT_STREQ(type, "qwen2_5_vl");
}

static void test_bad_json(void) {
  EXPECT_ERROR(parse_text("{\n  \"model_type\": \"qwen2_5_vl\",\n  \"x\": [1,,2]\n}"),
               "config.json:3:11: invalid JSON");
  EXPECT_ERROR(parse_text(""), "config.json:1:1: invalid JSON");
  EXPECT_ERROR(parse_text("[]"), "config.json: expected a JSON object, got an array");
  EXPECT_ERROR(parse_text("{} {}"), "config.json:1:4: unexpected text after the JSON value");
  EXPECT_ERROR(parse_text("{\"a\":1,\"b\":{\"c\":1,\"c\":2}}"),
               "config.json: key \"c\" is given twice in one object");
  size_t len;
  char *text = read_fixture(TINY, &len);
  for (size_t cut = 0; cut < len; cut += 7) { /* every truncation is refused, never a crash */
    vlmc_model_config_t c;
    vlmc_status_t status = vlmc_qwen2_5_vl_config_parse(text, cut, "config.json", &c);
    EXPECT_TRUE(status != NULL);
    vlmc_status_free(status);
  }
  free(text);
}

/* ---- Qwen2-VL (vlmc_qwen2_vl_config_parse) ----------------------------------------------- */

#define CFG_QWEN2_VL_2B FIXTURES "qwen2_vl_2b_config.json"

static vlmc_status_t parse_qwen2_vl(const char *text, size_t len, vlmc_model_config_t *out) {
  return vlmc_qwen2_vl_config_parse(text, len, "config.json", out);
}

/* The Qwen2-VL-2B config: vision embed_dim is the tower's width, its hidden_size the merger's
 * output, intermediate_size = embed_dim * mlp_ratio, quick_gelu by default, no windows (every
 * block full), LayerNorms; the text keys as Qwen2.5-VL's. */
static void test_qwen2_vl_2b(void) {
  size_t len;
  char *text = read_fixture(CFG_QWEN2_VL_2B, &len);
  vlmc_model_config_t c;
  EXPECT_OK(parse_qwen2_vl(text, len, &c));
  EXPECT_STREQ(c.model_type, "qwen2_vl");
  EXPECT_EQ_INT(c.text.hidden_size, 1536);
  EXPECT_EQ_INT(c.text.intermediate_size, 8960);
  EXPECT_EQ_INT(c.text.num_hidden_layers, 28);
  EXPECT_EQ_INT(c.text.head_dim, 128);
  EXPECT_EQ_INT(c.text.mrope_section[0], 16);
  EXPECT_EQ_INT(c.text.mrope_section[2], 24);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ_INT(c.vision.depth, 32);
  EXPECT_EQ_INT(c.vision.hidden_size, 1280);
  EXPECT_EQ_INT(c.vision.out_hidden_size, 1536);
  EXPECT_EQ_INT(c.vision.intermediate_size, 5120);
  EXPECT_EQ_INT(c.vision.num_heads, 16);
  EXPECT_EQ_INT(c.vision.head_dim, 80);
  EXPECT_EQ_INT(c.vision.in_channels, 3);
  EXPECT_EQ_INT(c.vision.patch_size, 14);
  EXPECT_TRUE(!c.vision.windows);
  EXPECT_EQ_INT(c.vision.window_size, 0);
  EXPECT_EQ_INT(c.vision.fullatt_count, 32);
  EXPECT_EQ_INT(c.vision.fullatt_block_indexes[31], 31);
  EXPECT_TRUE(c.vision.norm == VLMC_VISION_LAYER_NORM);
  EXPECT_TRUE(c.vision.mlp == VLMC_VISION_QUICK_GELU_MLP);
  EXPECT_EQ_INT(c.image_token_id, 151655);
  /* Qwen2.5-VL's parser reads its own vision keys: this config lacks them */
  EXPECT_ERROR(vlmc_qwen2_5_vl_config_parse(text, len, "config.json", &c),
               "required key vision_config.intermediate_size is missing");
  free(text);
  /* and Qwen2.5-VL's keys say which parts it has */
  EXPECT_OK(parse_fixture(CFG_3B, &c));
  EXPECT_TRUE(c.vision.windows && c.vision.norm == VLMC_VISION_RMS_NORM &&
              c.vision.mlp == VLMC_VISION_SWIGLU);
}

/* Qwen2-VL keys refused by name: another activation, an mlp_ratio that makes no MLP, a missing
 * embed_dim. */
static void test_qwen2_vl_refusals(void) {
  size_t len;
  char *text = read_fixture(CFG_QWEN2_VL_2B, &len);
  cJSON *root = cJSON_Parse(text);
  free(text);
  vlmc_model_config_t c;
  struct {
    const char *key, *value, *message;
  } cases[] = {
      {"hidden_act", "\"gelu\"", "activation 'gelu' is not supported (Qwen2-VL's vision tower uses 'quick_gelu')"},
      {"mlp_ratio", "0", "vision_config.mlp_ratio"},
      {"embed_dim", NULL, "vision_config.embed_dim"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    cJSON *copy = cJSON_Duplicate(root, true);
    cJSON *v = cJSON_GetObjectItemCaseSensitive(copy, "vision_config");
    cJSON_DeleteItemFromObjectCaseSensitive(v, cases[i].key);
    if (cases[i].value) cJSON_AddItemToObject(v, cases[i].key, cJSON_Parse(cases[i].value));
    char *edited = cJSON_PrintUnformatted(copy);
    EXPECT_ERROR(parse_qwen2_vl(edited, strlen(edited), &c), cases[i].message);
    free(edited);
    cJSON_Delete(copy);
  }
  cJSON_Delete(root);
}

/* ---- Qwen3-VL (vlmc_qwen3_vl_config_parse) ----------------------------------------------- */

#define CFG_QWEN3_VL_2B FIXTURES "qwen3_vl_2b_config.json"

static vlmc_status_t parse_qwen3_vl(const char *text, size_t len, vlmc_model_config_t *out) {
  return vlmc_qwen3_vl_config_parse(text, len, "config.json", out);
}

/* The Qwen3-VL-2B config: Qwen3's text model (head_dim 128 given, not hidden / heads; no q/k/v
 * bias; q/k norms; interleaved [24,20,20]), 16-pixel patches, a 48 x 48 position table,
 * deepstack after blocks 5, 11, 17, gelu_pytorch_tanh, LayerNorms, no windows. */
static void test_qwen3_vl_2b(void) {
  size_t len;
  char *text = read_fixture(CFG_QWEN3_VL_2B, &len);
  vlmc_model_config_t c;
  EXPECT_OK(parse_qwen3_vl(text, len, &c));
  EXPECT_STREQ(c.model_type, "qwen3_vl");
  EXPECT_EQ_INT(c.text.hidden_size, 2048);
  EXPECT_EQ_INT(c.text.head_dim, 128);
  EXPECT_TRUE(c.text.head_dim_explicit && c.text.qk_norm && !c.text.qkv_bias);
  EXPECT_TRUE(c.text.mrope_interleaved);
  EXPECT_EQ_INT(c.text.mrope_section[0], 24);
  EXPECT_EQ_INT(c.text.mrope_section[1], 20);
  EXPECT_NEAR(c.text.rope_theta, 5e6, 0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ_INT(c.vision.hidden_size, 1024);
  EXPECT_EQ_INT(c.vision.head_dim, 64);
  EXPECT_EQ_INT(c.vision.patch_size, 16);
  EXPECT_EQ_INT(c.vision.num_position_embeddings, 2304);
  EXPECT_EQ_INT(c.vision.deepstack_count, 3);
  EXPECT_EQ_INT(c.vision.deepstack_indexes[2], 17);
  EXPECT_TRUE(!c.vision.windows && c.vision.fullatt_count == 24);
  EXPECT_TRUE(c.vision.norm == VLMC_VISION_LAYER_NORM && c.vision.mlp == VLMC_VISION_GELU_TANH_MLP);
  EXPECT_TRUE(c.vision.merger == VLMC_MERGER_FC && c.vision.patch_bias);
  EXPECT_EQ_INT(c.vision_start_token_id, 151652);
  /* Qwen2.5-VL's parser reads its own keys: this config lacks them */
  EXPECT_ERROR(vlmc_qwen2_5_vl_config_parse(text, len, "config.json", &c),
               "vision_config.window_size");
  free(text);
}

/* Qwen3-VL keys refused by name. */
static void test_qwen3_vl_refusals(void) {
  size_t len;
  char *text = read_fixture(CFG_QWEN3_VL_2B, &len);
  cJSON *root = cJSON_Parse(text);
  free(text);
  vlmc_model_config_t c;
  struct {
    const char *section, *key, *value, *message;
  } cases[] = {
      {"vision_config", "hidden_act", "\"gelu\"",
       "activation 'gelu' is not supported (Qwen3-VL's vision tower uses 'gelu_pytorch_tanh')"},
      {"vision_config", "num_position_embeddings", "2300",
       "vision_config.num_position_embeddings: 2300 is not a square"},
      {"vision_config", "deepstack_visual_indexes", "[11, 5]",
       "vision_config.deepstack_visual_indexes[1]: 5 after 11: the blocks must be listed in "
       "increasing order"},
      {"vision_config", "deepstack_visual_indexes", "[5, 24]",
       "vision_config.deepstack_visual_indexes[1]"},
      {"vision_config", "deepstack_visual_indexes", "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,"
       "17,18,19,20,21,22,23]", NULL},
      {"text_config", "num_hidden_layers", "2",
       "vision_config.deepstack_visual_indexes has 3 entries, but text_config.num_hidden_layers "
       "is 2"},
      {"text_config", "head_dim", NULL, "text_config.head_dim"},
      {"text_config", "rope_scaling", "{\"mrope_section\": [24, 20, 19], \"rope_type\": \"default\"}",
       "mrope_section [24,20,19] sums to 63, rotary half-width is 64"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    cJSON *copy = cJSON_Duplicate(root, true);
    cJSON *v = cJSON_GetObjectItemCaseSensitive(copy, cases[i].section);
    cJSON_DeleteItemFromObjectCaseSensitive(v, cases[i].key);
    if (cases[i].value) cJSON_AddItemToObject(v, cases[i].key, cJSON_Parse(cases[i].value));
    char *edited = cJSON_PrintUnformatted(copy);
    if (cases[i].message) {
      EXPECT_ERROR(parse_qwen3_vl(edited, strlen(edited), &c), cases[i].message);
    } else { /* 24 deepstack blocks for 28 layers: allowed */
      EXPECT_OK(parse_qwen3_vl(edited, strlen(edited), &c));
      EXPECT_EQ_INT(c.vision.deepstack_count, 24);
    }
    free(edited);
    cJSON_Delete(copy);
  }
  cJSON_Delete(root);
}

/* Qwen3ForCausalLM (model_type qwen3): flat keys with Qwen3's attention, plain RoPE. */
static void test_qwen3_text(void) {
  const char *qwen3 = "{\"model_type\":\"qwen3\",\"vocab_size\":8,\"hidden_size\":16,"
                      "\"intermediate_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                      "\"num_key_value_heads\":1,\"head_dim\":12,\"hidden_act\":\"silu\","
                      "\"rms_norm_eps\":1e-6,\"rope_theta\":1000000,\"rope_scaling\":null,"
                      "\"attention_bias\":false,\"tie_word_embeddings\":true}";
  vlmc_model_config_t c;
  EXPECT_OK(vlmc_qwen3_config_parse(qwen3, strlen(qwen3), "config.json", &c));
  EXPECT_TRUE(!c.has_vision && c.text.qk_norm && !c.text.qkv_bias);
  EXPECT_EQ_INT(c.text.head_dim, 12); /* not 16 / 2 */
  EXPECT_EQ_INT(c.text.mrope_section[0], 4);
  EXPECT_TRUE(c.tie_word_embeddings);
}

/* ---- text-only Qwen2 (vlmc_qwen2_config_parse) ------------------------------------------- */

/* Qwen2.5-0.5B's config (model_type qwen2): flat keys, rope_theta, no rope_scaling, no vision;
 * plain RoPE as M-RoPE sections (half - 2, 1, 1) (any split reads t = h = w for text). */
static void test_qwen2_text(void) {
  size_t len;
  char *text = read_fixture(FIXTURES "qwen2_5_0_5b_config.json", &len);
  vlmc_model_config_t c;
  EXPECT_OK(vlmc_qwen2_config_parse(text, len, "config.json", &c));
  free(text);
  EXPECT_STREQ(c.model_type, "qwen2");
  EXPECT_TRUE(!c.has_vision);
  EXPECT_EQ_INT(c.text.hidden_size, 896);
  EXPECT_EQ_INT(c.text.head_dim, 64);
  EXPECT_EQ_INT(c.text.mrope_section[0], 30);
  EXPECT_EQ_INT(c.text.mrope_section[1], 1);
  EXPECT_EQ_INT(c.text.mrope_section[2], 1);
  EXPECT_NEAR(c.text.rope_theta, 1e6, 0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ_INT(c.image_token_id, 151936); /* vocab_size: never a token */
  EXPECT_OK(parse_fixture(CFG_3B, &c));
  EXPECT_TRUE(c.has_vision);
  const char *yarn = "{\"model_type\":\"qwen2\",\"vocab_size\":8,\"hidden_size\":16,"
                     "\"intermediate_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                     "\"num_key_value_heads\":1,\"hidden_act\":\"silu\",\"rms_norm_eps\":1e-6,"
                     "\"rope_theta\":10000,\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4}}";
  EXPECT_ERROR(vlmc_qwen2_config_parse(yarn, strlen(yarn), "config.json", &c),
               "config.json: rope_scaling.rope_type: 'yarn' is not supported (a text-only Qwen2 "
               "uses plain RoPE: 'default')");
  const char *with_vision = "{\"model_type\":\"qwen2\",\"vision_config\":{}}";
  EXPECT_ERROR(vlmc_qwen2_config_parse(with_vision, strlen(with_vision), "config.json", &c),
               "a text-only model_type 'qwen2' with a vision tower");
  const char *no_theta = "{\"model_type\":\"qwen2\",\"vocab_size\":8,\"hidden_size\":16,"
                         "\"intermediate_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                         "\"num_key_value_heads\":1,\"hidden_act\":\"silu\",\"rms_norm_eps\":1e-6}";
  EXPECT_ERROR(vlmc_qwen2_config_parse(no_theta, strlen(no_theta), "config.json", &c), "rope_theta");
}

int main(void) {
  RUN_TEST(test_3b_legacy_flat);
  RUN_TEST(test_qwen2_text);
  RUN_TEST(test_qwen2_vl_2b);
  RUN_TEST(test_qwen2_vl_refusals);
  RUN_TEST(test_qwen3_vl_2b);
  RUN_TEST(test_qwen3_vl_refusals);
  RUN_TEST(test_qwen3_text);
  RUN_TEST(test_model_type_alone);
  RUN_TEST(test_7b_flat_and_nested_agree);
  RUN_TEST(test_tiny_layouts_agree);
  RUN_TEST(test_preferences);
  RUN_TEST(test_load_from_folder_and_file);
  RUN_TEST(test_missing_keys);
  RUN_TEST(test_wrong_types);
  RUN_TEST(test_inconsistent_values);
  RUN_TEST(test_brief_mrope_message);
  RUN_TEST(test_unsupported_values);
  RUN_TEST(test_bad_json);
  return TEST_SUMMARY();
}
