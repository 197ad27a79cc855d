/* The Qwen2.5-VL model builder on the tiny configuration of spec §7.3: the module verifies,
 * prints and parses back identically, has the functions and parameters the spec describes,
 * and refuses missing or misshapen tensors by name. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, dirent: the pass test helper */
#include <stdlib.h>
#include <string.h>

#include "frontend/checkpoint.h"
#include "frontend/config.h"
#include "ir/ir.h"
#include "models/qwen2_5_vl.h"
#include "test.h"
#include "test_compiler_model_util.h"
#include "test_compiler_pass_util.h"

static const char *const kTinyConfig = "tests/fixtures/configs/tiny_nested_config.json";

static vlmc_model_config_t tiny_config(void) {
  vlmc_model_config_t config;
  memset(&config, 0, sizeof config);
  EXPECT_OK(vlmc_model_config_load(kTinyConfig, vlmc_qwen2_5_vl_config_parse, &config));
  return config;
}

/* Builds with the fake table; the caller destroys the module. */
static vlmc_status_t build(const vlmc_model_config_t *config, fake_table_t *table,
                           const vlmc_model_build_options_t *options, vlmc_module_t **out) {
  vlmc_model_tensors_t tensors = fake_tensors(table);
  return vlmc_qwen2_5_vl_build(config, &tensors, options, out);
}

static int count_ops(const vlmc_func_t *func, vlmc_op_kind_t kind, int num_operands) {
  int n = 0;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next)
    n += op->kind == kind && (num_operands < 0 || (int)op->num_operands == num_operands);
  return n;
}

/* The "func @name(...) -> ... {" line of the printed module. */
static char *func_header(const char *text, const char *name) {
  char key[64];
  snprintf(key, sizeof key, "func @%s(", name);
  const char *begin = strstr(text, key);
  if (!begin) return NULL;
  const char *end = strchr(begin, '\n');
  size_t len = (size_t)(end - begin);
  char *out = malloc(len + 1);
  memcpy(out, begin, len);
  out[len] = '\0';
  return out;
}

static void expect_header(const char *text, const char *name, const char *expected) {
  char *header = func_header(text, name);
  EXPECT_STREQ(header, expected);
  free(header);
}

static void test_tiny_module_shape(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = {0};
  fake_fill(&table, &config, true);
  vlmc_module_t *module = NULL;
  EXPECT_OK(build(&config, &table, NULL, &module));
  if (!module) return;
  EXPECT_OK(vlmc_module_verify(module));
  EXPECT_EQ_INT(module->num_funcs, 3);
  /* 81 tensors in the tiny checkpoint (tests/oracle/README.md), every one a parameter. */
  EXPECT_EQ_INT(table.count, 81);
  EXPECT_EQ_INT(module->num_params, 81);
  for (uint32_t i = 0; i < module->num_params; ++i)
    EXPECT_EQ_INT(module->params[i]->type.dtype, VLMC_DTYPE_BF16);
  char *text = vlmc_module_to_string(module);
  expect_header(text, "encode_image",
                "func @encode_image(%pixel_values: f32[P,1176], %grid: i64[G,3]) -> "
                "f32[P/4,64] {");
  expect_header(text, "prefill",
                "func @prefill(%input_ids: i64[S], %image_embeds: f32[M,64], %positions: "
                "i64[3,S]) -> (f32[512], f32[S,2,16], f32[S,2,16], f32[S,2,16], f32[S,2,16]) {");
  expect_header(text, "decode",
                "func @decode(%token: i64[1], %position: i64[3,1], %k_cache.0: f32[C,2,16], "
                "%v_cache.0: f32[C,2,16], %k_cache.1: f32[C,2,16], %v_cache.1: f32[C,2,16]) -> "
                "(f32[512], f32[C+1,2,16], f32[C+1,2,16], f32[C+1,2,16], f32[C+1,2,16]) {");
  free(text);

  const vlmc_func_t *enc = vlmc_module_func_find(module, "encode_image");
  const vlmc_func_t *pre = vlmc_module_func_find(module, "prefill");
  const vlmc_func_t *dec = vlmc_module_func_find(module, "decode");
  /* Blocks 0 and 2 are windowed, 1 and 3 full (fullatt_block_indexes [1, 3]). */
  EXPECT_EQ_INT(count_ops(enc, VLMC_OP_WINDOW_ATTENTION, -1), 2);
  EXPECT_EQ_INT(count_ops(enc, VLMC_OP_ATTENTION, 4), 2);
  EXPECT_EQ_INT(count_ops(enc, VLMC_OP_ROPE, -1), 8);
  EXPECT_EQ_INT(count_ops(enc, VLMC_OP_FULL_SEGMENTS, -1), 1);
  EXPECT_EQ_INT(count_ops(enc, VLMC_OP_TAP, -1), 0);
  EXPECT_EQ_INT(count_ops(pre, VLMC_OP_ATTENTION, 3), 2);
  EXPECT_EQ_INT(count_ops(pre, VLMC_OP_ROPE, -1), 4);
  EXPECT_EQ_INT(count_ops(pre, VLMC_OP_SCATTER_ROWS, -1), 1);
  EXPECT_EQ_INT(count_ops(pre, VLMC_OP_KV_CACHE_APPEND, -1), 0);
  EXPECT_EQ_INT(count_ops(dec, VLMC_OP_KV_CACHE_APPEND, -1), 4);
  EXPECT_EQ_INT(count_ops(dec, VLMC_OP_ATTENTION, 3), 2);
  /* The text rope carries the config's sections and theta; the planes are the pass's job. */
  for (const vlmc_op_t *op = pre->body.first; op; op = op->next) {
    if (op->kind != VLMC_OP_ROPE) continue;
    EXPECT_STREQ(vlmc_op_attr_enum(op, "layout"), "mrope_sectioned");
    const vlmc_attr_t *sections = vlmc_op_attr(op, "sections");
    EXPECT_TRUE(sections && sections->v.ints.count == 3 && sections->v.ints.data[0] == 2 &&
                sections->v.ints.data[1] == 3 && sections->v.ints.data[2] == 3);
    EXPECT_NEAR(vlmc_op_attr_float(op, "theta"), 1e6, 0);
    EXPECT_TRUE(vlmc_op_attr(op, "planes") == NULL);
  }
  vlmc_module_destroy(module);
  fake_free(&table);
}

static void expect_roundtrip(const vlmc_module_t *module) {
  char *text = vlmc_module_to_string(module);
  vlmc_parse_options_t options = {"built.vir", 0};
  vlmc_module_t *parsed = NULL;
  EXPECT_OK(vlmc_module_parse(text, strlen(text), &options, &parsed));
  if (parsed) {
    EXPECT_OK(vlmc_module_verify(parsed));
    char *again = vlmc_module_to_string(parsed);
    EXPECT_TRUE(again && strcmp(text, again) == 0);
    free(again);
    vlmc_module_destroy(parsed);
  }
  free(text);
}

static void test_print_parse_roundtrip(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = {0};
  fake_fill(&table, &config, true);
  int64_t grid[6] = {1, 12, 20, 1, 8, 8};
  vlmc_model_build_options_t variants[3] = {{NULL, 0, false}, {NULL, 0, true}, {grid, 2, true}};
  for (int i = 0; i < 3; ++i) {
    vlmc_module_t *module = NULL;
    EXPECT_OK(build(&config, &table, &variants[i], &module));
    if (module) expect_roundtrip(module);
    vlmc_module_destroy(module);
  }
  fake_free(&table);
}

static void test_in_memory_names(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = {0};
  table.in_memory_names = true;
  fake_fill(&table, &config, true);
  vlmc_module_t *module = NULL;
  EXPECT_OK(build(&config, &table, NULL, &module));
  if (!module) return;
  /* Parameters keep the canonical hub names whatever the file's spelling. */
  EXPECT_TRUE(vlmc_module_param_find(module, "visual.blocks.3.attn.qkv.bias") != NULL);
  EXPECT_TRUE(vlmc_module_param_find(module, "model.layers.1.mlp.down_proj.weight") != NULL);
  EXPECT_TRUE(vlmc_module_param_find(module, "model.language_model.norm.weight") == NULL);
  vlmc_module_destroy(module);
  fake_free(&table);
}

static void test_missing_tensor_is_named(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = {0};
  table.drop = "visual.blocks.2.mlp.up_proj.bias";
  fake_fill(&table, &config, true);
  vlmc_module_t *module = NULL;
  EXPECT_ERROR(build(&config, &table, NULL, &module),
               "tensor 'visual.blocks.2.mlp.up_proj.bias' not found (also tried "
               "'model.visual.blocks.2.mlp.up_proj.bias', "
               "'vision_tower.blocks.2.mlp.up_proj.bias') in fake.safetensors");
  EXPECT_TRUE(module == NULL);
  fake_free(&table);
}

static void test_wrong_shape_is_named(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = {0};
  table.reshape = "model.layers.1.self_attn.k_proj.weight";
  fake_fill(&table, &config, true);
  vlmc_module_t *module = NULL;
  EXPECT_ERROR(build(&config, &table, NULL, &module),
               "fake.safetensors: tensor 'model.layers.1.self_attn.k_proj.weight' has shape "
               "[33,64], config.json implies [32,64]");
  fake_free(&table);

  fake_table_t conv = {0};
  conv.reshape = "visual.patch_embed.proj.weight";
  fake_fill(&conv, &config, true);
  EXPECT_ERROR(build(&config, &conv, NULL, &module), "has shape [65,3,2,14,14], config.json "
                                                     "implies [64,3,2,14,14]");
  fake_free(&conv);
}

static void test_non_float_tensor_refused(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = {0};
  fake_fill(&table, &config, true);
  for (size_t i = 0; i < table.count; ++i)
    if (strcmp(table.tensors[i].name, "model.norm.weight") == 0)
      table.tensors[i].info.dtype = VLMC_DTYPE_I64;
  vlmc_module_t *module = NULL;
  EXPECT_ERROR(build(&config, &table, NULL, &module),
               "tensor 'model.norm.weight' has dtype i64; expected f32, f16 or bf16");
  fake_free(&table);
}

static void test_tied_head(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = {0};
  fake_fill(&table, &config, false);
  vlmc_module_t *module = NULL;
  /* Untied (the tiny config) without lm_head.weight: refused by name. */
  EXPECT_ERROR(build(&config, &table, NULL, &module), "tensor 'lm_head.weight' not found");
  config.tie_word_embeddings = true;
  EXPECT_OK(build(&config, &table, NULL, &module));
  if (!module) return;
  EXPECT_TRUE(vlmc_module_param_find(module, "lm_head.weight") == NULL);
  EXPECT_EQ_INT(module->num_params, 80);
  /* The head's linear reads the embedding table (through its f32 cast). */
  const vlmc_func_t *pre = vlmc_module_func_find(module, "prefill");
  int head_reads_embedding = 0;
  for (const vlmc_op_t *op = pre->body.first; op; op = op->next) {
    if (op->kind != VLMC_OP_LINEAR) continue;
    const vlmc_op_t *cast = op->operands[1]->def;
    const vlmc_op_t *param = cast && cast->kind == VLMC_OP_CAST ? cast->operands[0]->def : NULL;
    const vlmc_attr_t *name = param ? vlmc_op_attr(param, "name") : NULL;
    head_reads_embedding += name && strcmp(name->v.symbol, "model.embed_tokens.weight") == 0;
  }
  EXPECT_EQ_INT(head_reads_embedding, 1);
  vlmc_module_destroy(module);
  fake_free(&table);
}

static void test_fixed_grid(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = {0};
  fake_fill(&table, &config, true);
  int64_t grid[6] = {1, 12, 20, 1, 8, 8};
  vlmc_model_build_options_t options = {grid, 2, false};
  vlmc_module_t *module = NULL;
  EXPECT_OK(build(&config, &table, &options, &module));
  if (!module) return;
  char *text = vlmc_module_to_string(module);
  /* 240 + 64 patches, 76 merged tokens, 2 images. */
  expect_header(text, "encode_image",
                "func @encode_image(%pixel_values: f32[304,1176], %grid: i64[2,3]) -> "
                "f32[76,64] {");
  EXPECT_TRUE(strstr(text, "%grid_fixed = constant {value=[1, 12, 20, 1, 8, 8]} : i64[2,3]") !=
              NULL);
  free(text);
  vlmc_module_destroy(module);

  int64_t odd[3] = {1, 12, 21};
  options.grid = odd;
  options.num_images = 1;
  EXPECT_ERROR(build(&config, &table, &options, &module),
               "fixed grid: image 0 is (1, 12, 21); expected positive t, h, w with h and w "
               "multiples of spatial_merge_size 2");
  fake_free(&table);
}

static void collect_taps(const vlmc_func_t *func, char *out, size_t size) {
  out[0] = '\0';
  for (const vlmc_op_t *op = func->body.first; op; op = op->next)
    if (op->kind == VLMC_OP_TAP) {
      strncat(out, vlmc_op_attr(op, "name")->v.symbol, size - strlen(out) - 2);
      strncat(out, " ", size - strlen(out) - 1);
    }
}

static void test_taps(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = {0};
  fake_fill(&table, &config, true);
  vlmc_model_build_options_t options = {NULL, 0, true};
  vlmc_module_t *module = NULL;
  EXPECT_OK(build(&config, &table, &options, &module));
  if (!module) return;
  char taps[512];
  collect_taps(vlmc_module_func_find(module, "encode_image"), taps, sizeof taps);
  EXPECT_STREQ(taps, "patch_embed vision_block.0 vision_block.1 vision_block.2 vision_block.3 "
                     "merger image_embeds ");
  collect_taps(vlmc_module_func_find(module, "prefill"), taps, sizeof taps);
  EXPECT_STREQ(taps, "inputs_embeds logits_last ");
  collect_taps(vlmc_module_func_find(module, "decode"), taps, sizeof taps);
  EXPECT_STREQ(taps, "");
  /* Window-order taps gather merged-token rows by the grid's window order. */
  const vlmc_func_t *enc = vlmc_module_func_find(module, "encode_image");
  EXPECT_EQ_INT(count_ops(enc, VLMC_OP_WINDOW_ORDER, -1), 1);
  EXPECT_EQ_INT(count_ops(enc, VLMC_OP_GATHER, -1), 5);
  vlmc_module_destroy(module);
  fake_free(&table);
}

static void test_config_disagreements(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = {0};
  fake_fill(&table, &config, true);
  vlmc_module_t *module = NULL;
  vlmc_model_config_t bad = config;
  bad.vision.out_hidden_size = 48;
  EXPECT_ERROR(build(&bad, &table, NULL, &module),
               "vision_config.out_hidden_size 48 must equal the text hidden_size 64");
  bad = config;
  bad.vision.window_size = 100;
  EXPECT_ERROR(build(&bad, &table, NULL, &module),
               "vision_config.window_size 100 is not a multiple of patch_size * "
               "spatial_merge_size = 28");
  bad = config; /* a config another family's parser read */
  snprintf(bad.model_type, sizeof bad.model_type, "llava");
  EXPECT_ERROR(build(&bad, &table, NULL, &module),
               "config.json: model_type is none of qwen2_5_vl, qwen2_vl, qwen2, qwen3_vl, qwen3");
  fake_free(&table);
}

static void test_from_checkpoint(void) {
  vlmc_checkpoint_t *checkpoint = NULL;
  EXPECT_OK(
      vlmc_model_family_open_checkpoint("tests/fixtures/parity/tiny-vocab512", NULL, &checkpoint));
  if (!checkpoint) return;
  vlmc_module_t *module = NULL;
  EXPECT_OK(vlmc_qwen2_5_vl_build_from_checkpoint(checkpoint, NULL, &module));
  if (module) {
    EXPECT_EQ_INT(module->num_params, 81);
    vlmc_param_t *pe = vlmc_module_param_find(module, "visual.patch_embed.proj.weight");
    EXPECT_TRUE(pe && pe->type.dtype == VLMC_DTYPE_BF16 && pe->type.rank == 5);
  }
  vlmc_module_destroy(module);
  vlmc_checkpoint_destroy(checkpoint);
}

/* The domain passes on the built module: it verifies after each, no window_attention is left,
 * and the tower is permuted once: rows (pixels and their positions) gathered into window order
 * before the first block, the merged rows gathered back once after the merger (plus, with
 * taps, the patch_embed tap, which transformers takes in image order). */
static void test_domain_pipeline(void) {
  vlmc_model_config_t config = tiny_config();
  fake_table_t table = {0};
  fake_fill(&table, &config, true);
  int64_t grid[6] = {1, 12, 20, 1, 8, 8};
  vlmc_model_build_options_t variants[4] = {
      {NULL, 0, false}, {NULL, 0, true}, {grid, 2, false}, {grid, 2, true}};
  for (int i = 0; i < 4; ++i) {
    vlmc_module_t *module = NULL;
    EXPECT_OK(build(&config, &table, &variants[i], &module));
    if (!module) continue;
    vlmc_strbuf_t log;
    vlmc_strbuf_init(&log);
    EXPECT_OK(run_passes(module, "mrope-layout,window-reorder,canonicalize,dce,cse", &log));
    EXPECT_OK(vlmc_module_verify(module));
    const vlmc_func_t *enc = vlmc_module_func_find(module, "encode_image");
    EXPECT_EQ_INT(count_ops(enc, VLMC_OP_WINDOW_ATTENTION, -1), 0);
    EXPECT_EQ_INT(count_ops(enc, VLMC_OP_ATTENTION, 4), 4);
    /* Pixel rows, their (row, col) positions (folded to a constant for a fixed grid), the
     * result; and the patch_embed tap. The inverse: of the merged order, and of the patch
     * order for the tap; folded for a fixed grid. */
    bool fixed = variants[i].grid != NULL, taps = variants[i].taps;
    EXPECT_EQ_INT(count_ops(enc, VLMC_OP_GATHER, -1), (fixed ? 2 : 3) + taps);
    EXPECT_EQ_INT(count_ops(enc, VLMC_OP_INVERSE_PERMUTATION, -1), fixed ? 0 : 1 + taps);
    for (uint32_t f = 0; f < module->num_funcs; ++f)
      for (const vlmc_op_t *op = module->funcs[f]->body.first; op; op = op->next)
        if (op->kind == VLMC_OP_ROPE) EXPECT_TRUE(vlmc_op_attr(op, "planes") != NULL);
    const char *text = vlmc_strbuf_cstr(&log);
    EXPECT_TRUE(strstr(text, "rows enter it at: %patch_rc (axis 1, rows of 4), %pixel_values "
                             "(axis 0, rows of 4)") != NULL);
    if (variants[i].grid)
      EXPECT_TRUE(strstr(text, "image 0: grid 1x12x20, merged 6x10: 2x3 windows per frame, 6 "
                               "with tokens\n") != NULL);
    expect_roundtrip(module);
    vlmc_strbuf_deinit(&log);
    vlmc_module_destroy(module);
  }
  fake_free(&table);
}

int main(void) {
  RUN_TEST(test_tiny_module_shape);
  RUN_TEST(test_print_parse_roundtrip);
  RUN_TEST(test_in_memory_names);
  RUN_TEST(test_missing_tensor_is_named);
  RUN_TEST(test_wrong_shape_is_named);
  RUN_TEST(test_non_float_tensor_refused);
  RUN_TEST(test_tied_head);
  RUN_TEST(test_fixed_grid);
  RUN_TEST(test_taps);
  RUN_TEST(test_config_disagreements);
  RUN_TEST(test_from_checkpoint);
  RUN_TEST(test_domain_pipeline);
  return TEST_SUMMARY();
}
