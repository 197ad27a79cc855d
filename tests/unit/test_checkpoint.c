/* Checkpoint folders: both tensor-name layouts, lm_head tying, sharding, missing-tensor
 * messages, and the cross-file checks. Each test builds its folder in a scratch directory from
 * the committed configs and tensors written with vlmc_st_write_file. */
#define _POSIX_C_SOURCE 200809L
#include "tests/unit/test_safetensors_util.h"

#include "frontend/checkpoint.h"
#include "tests/unit/test.h"

#define FIXTURES "tests/fixtures/configs/"

static const float values[8] = {1, 2, 3, 4, 5, 6, 7, 8};
static const int64_t shape_2x4[2] = {2, 4};
static const int64_t shape_8[1] = {8};

/* Writes a small model file: a vision tensor, the embedding, a text norm and optionally
 * lm_head, under hub names or the in-memory names of transformers 4.52-4.5x. */
static void write_model(const char *dir, const char *file, bool in_memory_names, bool lm_head) {
  vlmc_st_write_tensor_t tensors[4] = {
      {in_memory_names ? "model.visual.patch_embed.proj.weight" : "visual.patch_embed.proj.weight",
       VLMC_ST_F32, 2, shape_2x4, values},
      {in_memory_names ? "model.language_model.embed_tokens.weight" : "model.embed_tokens.weight",
       VLMC_ST_F32, 2, shape_2x4, values},
      {in_memory_names ? "model.language_model.norm.weight" : "model.norm.weight", VLMC_ST_F32, 1,
       shape_8, values},
      {"lm_head.weight", VLMC_ST_F32, 1, shape_8, values},
  };
  char path[512];
  path_join_buf(path, sizeof path, dir, file);
  vlmc_status_t status = vlmc_st_write_file(path, tensors, lm_head ? 4 : 3);
  if (status) {
    fprintf(stderr, "test setup: %s\n", vlmc_status_message(status));
    exit(2);
  }
}

/* A folder with config.json from `config_fixture` and model.safetensors. */
static void make_checkpoint(char *dir, size_t size, const char *config_fixture,
                            bool in_memory_names, bool lm_head) {
  scratch_dir_create(dir, size);
  copy_fixture(config_fixture, dir, "config.json");
  write_model(dir, "model.safetensors", in_memory_names, lm_head);
}

static vlmc_status_t open_and_close(const char *dir) {
  vlmc_checkpoint_t *checkpoint = NULL;
  vlmc_status_t status = vlmc_checkpoint_open(dir, vlmc_qwen2_5_vl_config_parse, &checkpoint);
  vlmc_checkpoint_destroy(checkpoint);
  return status;
}

static void test_alternate_names(void) {
  char out[64];
  EXPECT_TRUE(vlmc_checkpoint_alternate_name("visual.blocks.0.norm1.weight", out, sizeof out));
  EXPECT_STREQ(out, "model.visual.blocks.0.norm1.weight");
  EXPECT_TRUE(vlmc_checkpoint_alternate_name("model.visual.merger.ln_q.weight", out, sizeof out));
  EXPECT_STREQ(out, "visual.merger.ln_q.weight");
  EXPECT_TRUE(vlmc_checkpoint_alternate_name("model.layers.3.mlp.up_proj.weight", out, sizeof out));
  EXPECT_STREQ(out, "model.language_model.layers.3.mlp.up_proj.weight");
  EXPECT_TRUE(vlmc_checkpoint_alternate_name("model.language_model.norm.weight", out, sizeof out));
  EXPECT_STREQ(out, "model.norm.weight");
  /* mlx_vlm's spellings (docs/mlx_format.md §6) are the second alternative, and lm_head's only */
  EXPECT_TRUE(vlmc_checkpoint_alternate_name_at("model.layers.3.mlp.up_proj.weight", 1, out, sizeof out));
  EXPECT_STREQ(out, "language_model.model.layers.3.mlp.up_proj.weight");
  EXPECT_TRUE(vlmc_checkpoint_alternate_name_at("visual.blocks.0.norm1.weight", 1, out, sizeof out));
  EXPECT_STREQ(out, "vision_tower.blocks.0.norm1.weight");
  EXPECT_TRUE(vlmc_checkpoint_alternate_name("vision_tower.merger.ln_q.weight", out, sizeof out));
  EXPECT_STREQ(out, "visual.merger.ln_q.weight");
  EXPECT_TRUE(vlmc_checkpoint_alternate_name("language_model.model.norm.weight", out, sizeof out));
  EXPECT_STREQ(out, "model.norm.weight");
  EXPECT_TRUE(!vlmc_checkpoint_alternate_name_at("model.norm.weight", 2, out, sizeof out));
  EXPECT_TRUE(vlmc_checkpoint_alternate_name("lm_head.weight", out, sizeof out));
  EXPECT_STREQ(out, "language_model.lm_head.weight");
  EXPECT_TRUE(!vlmc_checkpoint_alternate_name_at("lm_head.weight", 1, out, sizeof out));
  EXPECT_TRUE(!vlmc_checkpoint_alternate_name("visualx", out, sizeof out));
  char tiny[8];
  EXPECT_TRUE(!vlmc_checkpoint_alternate_name("visual.blocks.0", tiny, sizeof tiny)); /* no room */
}

static void check_lookups(const vlmc_checkpoint_t *checkpoint) {
  const char *hub[] = {"visual.patch_embed.proj.weight", "model.embed_tokens.weight",
                       "model.norm.weight"};
  const char *memory[] = {"model.visual.patch_embed.proj.weight",
                          "model.language_model.embed_tokens.weight",
                          "model.language_model.norm.weight"};
  for (int i = 0; i < 3; ++i) {
    const vlmc_st_tensor_t *a = vlmc_checkpoint_find(checkpoint, hub[i]);
    const vlmc_st_tensor_t *b = vlmc_checkpoint_find(checkpoint, memory[i]);
    EXPECT_TRUE(a != NULL && a == b);
  }
  const vlmc_st_tensor_t *tensor = NULL;
  EXPECT_OK(vlmc_checkpoint_get(checkpoint, "model.norm.weight", &tensor));
  EXPECT_TRUE(tensor && tensor->rank == 1 && tensor->shape[0] == 8);
  EXPECT_OK(vlmc_checkpoint_get_shaped(checkpoint, "visual.patch_embed.proj.weight", 2, shape_2x4,
                                       &tensor));
}

static void test_hub_names(void) {
  char dir[256];
  make_checkpoint(dir, sizeof dir, FIXTURES "tiny_nested_config.json", false, true);
  vlmc_checkpoint_t *checkpoint = NULL;
  EXPECT_OK(vlmc_checkpoint_open(dir, vlmc_qwen2_5_vl_config_parse, &checkpoint));
  if (checkpoint) {
    check_lookups(checkpoint);
    EXPECT_STREQ(vlmc_checkpoint_dir(checkpoint), dir);
    EXPECT_EQ_INT(vlmc_checkpoint_config(checkpoint)->text.vocab_size, 512);
    EXPECT_EQ_INT(vlmc_st_archive_count(vlmc_checkpoint_archive(checkpoint)), 4);
    EXPECT_TRUE(vlmc_checkpoint_preprocessor(checkpoint) == NULL);
    EXPECT_TRUE(vlmc_checkpoint_generation(checkpoint) == NULL);
    const vlmc_st_tensor_t *head = vlmc_checkpoint_find(checkpoint, "lm_head.weight");
    EXPECT_TRUE(head && strcmp(head->name, "lm_head.weight") == 0);
  }
  vlmc_checkpoint_destroy(checkpoint);
  scratch_dir_remove(dir);
}

static void test_in_memory_names(void) {
  char dir[256];
  make_checkpoint(dir, sizeof dir, FIXTURES "tiny_nested_config.json", true, true);
  vlmc_checkpoint_t *checkpoint = NULL;
  EXPECT_OK(vlmc_checkpoint_open(dir, vlmc_qwen2_5_vl_config_parse, &checkpoint));
  if (checkpoint) check_lookups(checkpoint);
  vlmc_checkpoint_destroy(checkpoint);
  scratch_dir_remove(dir);
}

static void test_tied_lm_head(void) {
  char dir[256];
  /* tiny_5x_config.json ties the embeddings and the file has no lm_head.weight (as the 3B). */
  make_checkpoint(dir, sizeof dir, FIXTURES "tiny_5x_config.json", true, false);
  vlmc_checkpoint_t *checkpoint = NULL;
  EXPECT_OK(vlmc_checkpoint_open(dir, vlmc_qwen2_5_vl_config_parse, &checkpoint));
  if (checkpoint) {
    const vlmc_st_tensor_t *head = vlmc_checkpoint_find(checkpoint, "lm_head.weight");
    EXPECT_TRUE(head && strcmp(head->name, "model.language_model.embed_tokens.weight") == 0);
  }
  vlmc_checkpoint_destroy(checkpoint);
  scratch_dir_remove(dir);
}

static void test_missing_tensors_are_named(void) {
  char dir[256];
  make_checkpoint(dir, sizeof dir, FIXTURES "tiny_nested_config.json", false, false);
  vlmc_checkpoint_t *checkpoint = NULL;
  EXPECT_OK(vlmc_checkpoint_open(dir, vlmc_qwen2_5_vl_config_parse, &checkpoint));
  if (!checkpoint) return;
  const vlmc_st_tensor_t *tensor = NULL;
  char expected[1024];
  snprintf(expected, sizeof expected,
           "tensor 'visual.blocks.0.norm1.weight' not found (also tried "
           "'model.visual.blocks.0.norm1.weight', 'vision_tower.blocks.0.norm1.weight') in "
           "%s/model.safetensors",
           dir);
  EXPECT_ERROR(vlmc_checkpoint_get(checkpoint, "visual.blocks.0.norm1.weight", &tensor), expected);
  EXPECT_TRUE(tensor == NULL);
  /* Not tied (tie_word_embeddings false) and absent. */
  snprintf(expected, sizeof expected,
           "tensor 'lm_head.weight' not found (also tried 'language_model.lm_head.weight') and "
           "config.json tie_word_embeddings is false in "
           "%s/model.safetensors",
           dir);
  EXPECT_ERROR(vlmc_checkpoint_get(checkpoint, "lm_head.weight", &tensor), expected);
  EXPECT_TRUE(vlmc_checkpoint_find(checkpoint, "lm_head.weight") == NULL);
  const int64_t wrong[2] = {4, 2};
  snprintf(expected, sizeof expected,
           "%s/model.safetensors: tensor 'visual.patch_embed.proj.weight' has shape [2,4], "
           "config.json implies [4,2]",
           dir);
  EXPECT_ERROR(
      vlmc_checkpoint_get_shaped(checkpoint, "visual.patch_embed.proj.weight", 2, wrong, &tensor),
      expected);
  EXPECT_TRUE(tensor == NULL);
  EXPECT_ERROR(vlmc_checkpoint_get_shaped(checkpoint, "model.norm.weight", 2, wrong, &tensor),
               "tensor 'model.norm.weight' has shape [8], config.json implies [4,2]");
  vlmc_checkpoint_destroy(checkpoint);
  scratch_dir_remove(dir);

  /* Tied, but the embedding is missing too. */
  scratch_dir_create(dir, sizeof dir);
  copy_fixture(FIXTURES "tiny_5x_config.json", dir, "config.json");
  vlmc_st_write_tensor_t only = {"visual.x", VLMC_ST_F32, 1, shape_8, values};
  char path[512];
  path_join_buf(path, sizeof path, dir, "model.safetensors");
  EXPECT_OK(vlmc_st_write_file(path, &only, 1));
  EXPECT_OK(vlmc_checkpoint_open(dir, vlmc_qwen2_5_vl_config_parse, &checkpoint));
  if (checkpoint)
    EXPECT_ERROR(vlmc_checkpoint_get(checkpoint, "lm_head.weight", &tensor),
                 "tensor 'lm_head.weight' not found (also tried 'language_model.lm_head.weight'), "
                 "nor model.embed_tokens.weight that config.json ties it to in");
  vlmc_checkpoint_destroy(checkpoint);
  scratch_dir_remove(dir);
}

static void test_sharded_checkpoint(void) {
  char dir[256];
  scratch_dir_create(dir, sizeof dir);
  copy_fixture(FIXTURES "tiny_nested_config.json", dir, "config.json");
  vlmc_st_write_tensor_t first[] = {
      {"model.embed_tokens.weight", VLMC_ST_F32, 2, shape_2x4, values},
      {"visual.patch_embed.proj.weight", VLMC_ST_F32, 2, shape_2x4, values},
  };
  vlmc_st_write_tensor_t second[] = {{"model.norm.weight", VLMC_ST_F32, 1, shape_8, values}};
  char path[512];
  path_join_buf(path, sizeof path, dir, "model-00001-of-00002.safetensors");
  EXPECT_OK(vlmc_st_write_file(path, first, 2));
  path_join_buf(path, sizeof path, dir, "model-00002-of-00002.safetensors");
  EXPECT_OK(vlmc_st_write_file(path, second, 1));
  const char *index =
      "{\"metadata\":{\"total_size\":96},\"weight_map\":{"
      "\"model.embed_tokens.weight\":\"model-00001-of-00002.safetensors\","
      "\"model.norm.weight\":\"model-00002-of-00002.safetensors\","
      "\"visual.patch_embed.proj.weight\":\"model-00001-of-00002.safetensors\"}}";
  write_bytes(dir, "model.safetensors.index.json", index, strlen(index));
  vlmc_checkpoint_t *checkpoint = NULL;
  EXPECT_OK(vlmc_checkpoint_open(dir, vlmc_qwen2_5_vl_config_parse, &checkpoint));
  if (checkpoint) {
    check_lookups(checkpoint);
    const vlmc_st_tensor_t *tensor = NULL;
    char expected[1024];
    snprintf(expected, sizeof expected,
             "in %s/model-00001-of-00002.safetensors, %s/model-00002-of-00002.safetensors", dir,
             dir);
    EXPECT_ERROR(vlmc_checkpoint_get(checkpoint, "model.layers.0.mlp.up_proj.weight", &tensor),
                 expected);
  }
  vlmc_checkpoint_destroy(checkpoint);
  scratch_dir_remove(dir);
}

static void test_both_spellings_refused(void) {
  char dir[256];
  scratch_dir_create(dir, sizeof dir);
  copy_fixture(FIXTURES "tiny_nested_config.json", dir, "config.json");
  vlmc_st_write_tensor_t tensors[] = {
      {"visual.a", VLMC_ST_F32, 1, shape_8, values},
      {"model.visual.a", VLMC_ST_F32, 1, shape_8, values},
  };
  char path[512];
  path_join_buf(path, sizeof path, dir, "model.safetensors");
  EXPECT_OK(vlmc_st_write_file(path, tensors, 2));
  EXPECT_ERROR(open_and_close(dir),
               "model.safetensors: tensor 'model.visual.a' is also present as 'visual.a'; a "
               "checkpoint must use one naming layout");
  scratch_dir_remove(dir);
}

static void test_configs_bundled_and_cross_checked(void) {
  char dir[256];
  make_checkpoint(dir, sizeof dir, FIXTURES "qwen2_5_vl_3b_config.json", false, false);
  copy_fixture(FIXTURES "preprocessor_config.json", dir, "preprocessor_config.json");
  copy_fixture(FIXTURES "generation_config.json", dir, "generation_config.json");
  vlmc_checkpoint_t *checkpoint = NULL;
  EXPECT_OK(vlmc_checkpoint_open(dir, vlmc_qwen2_5_vl_config_parse, &checkpoint));
  if (checkpoint) {
    const vlmc_preprocessor_config_t *pre = vlmc_checkpoint_preprocessor(checkpoint);
    const vlmc_generation_config_t *gen = vlmc_checkpoint_generation(checkpoint);
    EXPECT_TRUE(pre && pre->max_pixels == 12845056);
    EXPECT_TRUE(gen && gen->eos_count == 2);
    /* The 3B ties the head: it resolves to the embedding. */
    const vlmc_st_tensor_t *head = vlmc_checkpoint_find(checkpoint, "lm_head.weight");
    EXPECT_TRUE(head && strcmp(head->name, "model.embed_tokens.weight") == 0);
  }
  vlmc_checkpoint_destroy(checkpoint);

  /* An image processor that disagrees with the vision tower. */
  const char *pre =
      "{\"min_pixels\":3136,\"max_pixels\":12845056,\"patch_size\":14,"
      "\"temporal_patch_size\":2,\"merge_size\":3,\"image_mean\":[0,0,0],"
      "\"image_std\":[1,1,1]}";
  write_bytes(dir, "preprocessor_config.json", pre, strlen(pre));
  EXPECT_ERROR(open_and_close(dir),
               "/preprocessor_config.json: merge_size 3 differs from "
               "config.json vision_config.spatial_merge_size 2");
  write_bytes(dir, "preprocessor_config.json", "{", 1);
  EXPECT_ERROR(open_and_close(dir), "preprocessor_config.json:1:1: invalid JSON");
  copy_fixture(FIXTURES "preprocessor_config.json", dir, "preprocessor_config.json");

  /* Stop ids outside the vocabulary. */
  const char *gen = "{\"eos_token_id\":[151645,200000]}";
  write_bytes(dir, "generation_config.json", gen, strlen(gen));
  EXPECT_ERROR(open_and_close(dir),
               "/generation_config.json: eos_token_id 200000 is not below "
               "config.json vocab_size 151936");
  write_bytes(dir, "generation_config.json", "{\"top_p\":2}", 11);
  EXPECT_ERROR(open_and_close(dir), "generation_config.json: top_p: expected a number in (0, 1]");
  scratch_dir_remove(dir);
}

static void test_incomplete_folders(void) {
  char dir[256];
  scratch_dir_create(dir, sizeof dir);
  EXPECT_ERROR(open_and_close(dir), "/config.json: no such file");
  copy_fixture(FIXTURES "tiny_nested_config.json", dir, "config.json");
  EXPECT_ERROR(open_and_close(dir),
               "holds neither model.safetensors nor model.safetensors.index.json");
  /* The frontend reads model_type without judging it (the family registry does, see
   * test_model_family); the parser it is given reads the rest. */
  write_bytes(dir, "config.json", "{\"model_type\":\"qwen2_vl\"}", 25);
  write_model(dir, "model.safetensors", false, true);
  char model_type[VLMC_MODEL_TYPE_MAX];
  EXPECT_OK(vlmc_checkpoint_model_type(dir, model_type));
  EXPECT_STREQ(model_type, "qwen2_vl");
  EXPECT_ERROR(open_and_close(dir), "config.json: required key vision_config is missing");
  write_bytes(dir, "config.json", "{\"model_type\":1}", 16);
  EXPECT_ERROR(vlmc_checkpoint_model_type(dir, model_type),
               "config.json: model_type: expected a string, got a number");
  scratch_dir_remove(dir);
  EXPECT_ERROR(open_and_close("/nonexistent/checkpoint"),
               "/nonexistent/checkpoint: not a checkpoint folder");
  EXPECT_ERROR(open_and_close(FIXTURES "tiny_nested_config.json"), "not a checkpoint folder");
  EXPECT_ERROR(vlmc_checkpoint_model_type(FIXTURES "tiny_nested_config.json", model_type),
               "not a checkpoint folder");
}

int main(void) {
  RUN_TEST(test_alternate_names);
  RUN_TEST(test_hub_names);
  RUN_TEST(test_in_memory_names);
  RUN_TEST(test_tied_lm_head);
  RUN_TEST(test_missing_tensors_are_named);
  RUN_TEST(test_sharded_checkpoint);
  RUN_TEST(test_both_spellings_refused);
  RUN_TEST(test_configs_bundled_and_cross_checked);
  RUN_TEST(test_incomplete_folders);
  return TEST_SUMMARY();
}
