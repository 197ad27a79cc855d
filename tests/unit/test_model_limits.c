/* Sizes a config implies are checked against the tensor table before the builder allocates
 * for them (issue 12): a config.json saying num_hidden_layers 16777216 (inside the parser's
 * range) over a two-layer checkpoint is refused by field, with the layers the table has,
 * after a handful of lookups, instead of allocating gigabytes of per-layer arrays first. The
 * vision depth likewise. */
#include <stdlib.h>
#include <string.h>

#include "frontend/config.h"
#include "ir/ir.h"
#include "models/qwen2_5_vl.h"
#include "test.h"
#include "test_compiler_model_util.h"

static const char *const kTinyConfig = "tests/fixtures/configs/tiny_nested_config.json";

static vlmc_model_config_t tiny_config(void) {
  vlmc_model_config_t config;
  memset(&config, 0, sizeof config);
  EXPECT_OK(vlmc_model_config_load(kTinyConfig, vlmc_qwen2_5_vl_config_parse, &config));
  return config;
}

static vlmc_status_t build(const vlmc_model_config_t *config, fake_table_t *table,
                           vlmc_module_t **out) {
  vlmc_model_tensors_t tensors = fake_tensors(table);
  return vlmc_qwen2_5_vl_build(config, &tensors, NULL, out);
}

/* The table of the tiny config (2 layers, 4 vision blocks), filled before `config` is
 * changed. */
static fake_table_t tiny_table(const vlmc_model_config_t *config, bool in_memory_names) {
  fake_table_t table = {0};
  table.in_memory_names = in_memory_names;
  fake_fill(&table, config, true);
  return table;
}

static void test_huge_layer_count_refused_before_building(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = tiny_table(&config, false);
  config.text.num_hidden_layers = 16777216;
  vlmc_module_t *module = NULL;
  EXPECT_ERROR(build(&config, &table, &module),
               "config.json: num_hidden_layers is 16777216, but fake.safetensors has blocks 0 "
               "to 1 only (model.layers.2.input_layernorm.weight is absent)");
  EXPECT_TRUE(module == NULL);
  /* Found by doubling and bisection: a few dozen lookups, not one per configured layer. */
  EXPECT_TRUE(table.lookups < 100);
  fake_free(&table);
}

static void test_huge_vision_depth_refused(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = tiny_table(&config, false);
  config.vision.depth = VLMC_CONFIG_MAX_DEPTH;
  vlmc_module_t *module = NULL;
  EXPECT_ERROR(build(&config, &table, &module),
               "config.json: vision_config.depth is 256, but fake.safetensors has blocks 0 to 3 "
               "only (visual.blocks.4.norm1.weight is absent)");
  EXPECT_TRUE(module == NULL);
  fake_free(&table);
}

/* The other spelling of the names (model.language_model.layers.*) counts the same. */
static void test_in_memory_names_counted(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = tiny_table(&config, true);
  vlmc_module_t *module = NULL;
  EXPECT_OK(build(&config, &table, &module));
  vlmc_module_destroy(module);
  module = NULL;
  config.text.num_hidden_layers = 3;
  EXPECT_ERROR(build(&config, &table, &module), "has blocks 0 to 1 only");
  fake_free(&table);
}

static void test_no_layer_at_all(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = {0};
  table.drop = "model.layers.0.input_layernorm.weight";
  config.text.num_hidden_layers = 1;
  fake_fill(&table, &config, true);
  config.text.num_hidden_layers = 5;
  vlmc_module_t *module = NULL;
  EXPECT_ERROR(build(&config, &table, &module),
               "config.json: num_hidden_layers is 5, but fake.safetensors has no block 0 "
               "(model.layers.0.input_layernorm.weight is absent)");
  fake_free(&table);
}

/* The last layer's norm has the hidden size the config says (checked up front too). */
static void test_last_layer_shape_checked(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = {0};
  table.reshape = "model.layers.1.input_layernorm.weight";
  fake_fill(&table, &config, true);
  vlmc_module_t *module = NULL;
  EXPECT_ERROR(build(&config, &table, &module),
               "tensor 'model.layers.1.input_layernorm.weight' has shape [65], config.json "
               "implies [64]");
  fake_free(&table);
}

int main(void) {
  RUN_TEST(test_huge_layer_count_refused_before_building);
  RUN_TEST(test_huge_vision_depth_refused);
  RUN_TEST(test_in_memory_names_counted);
  RUN_TEST(test_no_layer_at_all);
  RUN_TEST(test_last_layer_shape_checked);
  return TEST_SUMMARY();
}
