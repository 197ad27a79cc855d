/* Qwen2.5-VL: the family entry, the entry points and the checks of the config against itself
 * and of the options against the config; the vision tower is qwen2_5_vl_vision.c, the text
 * decoder qwen2_5_vl_text.c. Semantics: the model spec, sections 1, 3, 4 and 8. */
#include <string.h>

#include "models/qwen2_5_vl_internal.h"
#include "support/checked_math.h"

/* ---- the family entry ------------------------------------------------------------------- */

static const char *const kModelTypes[] = {"qwen2_5_vl", NULL};

const vlmc_model_family_t vlmc_qwen2_5_vl_family = {
    .name = "qwen2_5_vl",
    .display_name = "Qwen2.5-VL",
    .model_types = kModelTypes,
    .parse_config = vlmc_qwen2_5_vl_config_parse,
    .build = vlmc_qwen2_5_vl_build,
    .build_from_checkpoint = vlmc_qwen2_5_vl_build_from_checkpoint,
    .plan_tensors = vlmc_qwen2_5_vl_plan_tensors,
    .convention = VLMC_QWEN_VL_CONVENTION,
};

/* ---- checks of the config and the options ----------------------------------------------- */

/* The widths of a pixel_values row (in_channels x temporal_patch x patch^2: 1176) and of a
 * merged row (hidden x merge^2: 5120 for 3B) become static dims: each key alone is bounded by
 * the parser, their products must be too (2^24 cubed overflows int64). */
static vlmc_status_t check_row_widths(const vlmc_vision_config_t *v) {
  int64_t features, merged;
  bool ok = vlmc_mul_i64(v->in_channels, v->temporal_patch_size, &features) &&
            vlmc_mul_i64(features, v->patch_size, &features) &&
            vlmc_mul_i64(features, v->patch_size, &features) && features <= INT32_MAX;
  if (!ok)
    return vlmc_status_make(VLMC_OUT_OF_RANGE,
                            "config.json: vision_config: in_channels %lld x temporal_patch_size "
                            "%lld x patch_size^2 (%lld) is too large for a pixel row",
                            (long long)v->in_channels, (long long)v->temporal_patch_size,
                            (long long)v->patch_size);
  ok = vlmc_mul_i64(v->spatial_merge_size, v->spatial_merge_size, &merged) &&
       vlmc_mul_i64(merged, v->hidden_size, &merged) && merged <= INT32_MAX;
  if (!ok)
    return vlmc_status_make(VLMC_OUT_OF_RANGE,
                            "config.json: vision_config: hidden_size %lld x spatial_merge_size^2 "
                            "(%lld) is too large for a merged row",
                            (long long)v->hidden_size, (long long)v->spatial_merge_size);
  return NULL;
}

static vlmc_status_t check_config(const vlmc_model_config_t *c) {
  /* A config another family's parser read may not describe this model (Qwen2-VL's is the same
   * model without windows, with its own parser: models/qwen2_vl.c). */
  static const vlmc_model_family_t *const built[] = {
      &vlmc_qwen2_5_vl_family, &vlmc_qwen2_vl_family, &vlmc_qwen2_family,
      &vlmc_qwen3_vl_family, &vlmc_qwen3_family};
  bool known = false;
  for (size_t i = 0; i < sizeof built / sizeof built[0]; ++i)
    known |= vlmc_model_family_accepts(built[i], c->model_type);
  if (!known)
    return vlmc_status_make(VLMC_UNSUPPORTED, "config.json: model_type is none of qwen2_5_vl, "
                            "qwen2_vl, qwen2, qwen3_vl, qwen3");
  const vlmc_text_config_t *t = &c->text;
  const vlmc_vision_config_t *v = &c->vision;
  if (c->has_vision && v->out_hidden_size != t->hidden_size)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "config.json: vision_config.out_hidden_size %lld must equal the text "
                            "hidden_size %lld (image rows replace token embeddings)",
                            (long long)v->out_hidden_size, (long long)t->hidden_size);
  if (t->num_key_value_heads <= 0 || t->num_attention_heads % t->num_key_value_heads != 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "config.json: num_attention_heads %lld is not a multiple of "
                            "num_key_value_heads %lld",
                            (long long)t->num_attention_heads, (long long)t->num_key_value_heads);
  /* Qwen3's head_dim is its own key; Qwen2's is hidden_size / num_attention_heads. */
  bool text_heads_ok = t->head_dim > 0 && t->head_dim % 2 == 0 &&
                       (t->head_dim_explicit || t->head_dim * t->num_attention_heads == t->hidden_size);
  if (!c->has_vision) { /* a text-only checkpoint: nothing else to check here */
    if (!text_heads_ok)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "config.json: head sizes: text %lld/%lld heads",
                              (long long)t->hidden_size, (long long)t->num_attention_heads);
    return NULL;
  }
  if (!text_heads_ok || v->head_dim <= 0 || v->head_dim * v->num_heads != v->hidden_size || v->head_dim % 4 != 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "config.json: head sizes: text %lld/%lld heads, vision %lld/%lld "
                            "heads (the vision head_dim must be a multiple of 4)",
                            (long long)t->hidden_size, (long long)t->num_attention_heads,
                            (long long)v->hidden_size, (long long)v->num_heads);
  int64_t unit = v->patch_size * v->spatial_merge_size;
  if (v->patch_size <= 0 || v->spatial_merge_size <= 0 ||
      (v->windows && (v->window_size <= 0 || v->window_size % unit != 0)))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "config.json: vision_config.window_size %lld is not a multiple of "
                            "patch_size * spatial_merge_size = %lld",
                            (long long)v->window_size, (long long)unit);
  return check_row_widths(v);
}

static vlmc_status_t check_grid(const vlmc_model_config_t *c,
                                const vlmc_model_build_options_t *options, int64_t *out_patches) {
  int64_t m = c->vision.spatial_merge_size, total = 0;
  if (!c->has_vision)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "fixed grid: this model takes no images "
                            "(a text-only checkpoint)");
  if (options->num_images == 0 || options->num_images > INT32_MAX)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "fixed grid: expected at least one image");
  for (size_t i = 0; i < options->num_images; ++i) {
    const int64_t *g = &options->grid[3 * i];
    int64_t n;
    if (g[0] <= 0 || g[1] <= 0 || g[2] <= 0 || g[1] % m || g[2] % m)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "fixed grid: image %zu is (%lld, %lld, %lld); expected positive "
                              "t, h, w with h and w multiples of spatial_merge_size %lld",
                              i, (long long)g[0], (long long)g[1], (long long)g[2], (long long)m);
    if (!vlmc_mul_i64(g[0], g[1], &n) || !vlmc_mul_i64(n, g[2], &n) ||
        !vlmc_add_i64(total, n, &total) || total > INT32_MAX)
      return vlmc_status_make(VLMC_OUT_OF_RANGE, "fixed grid: too many patches");
  }
  *out_patches = total;
  return NULL;
}

/* The sizes the config implies against the tensors present, before anything is allocated for
 * them: the layer and block counts (per-layer argument and result arrays are allocated up
 * front) and the hidden sizes of both towers. The build checks every tensor again as it goes. */
static vlmc_status_t check_tensors_cover_config(const qwen_ctx_t *ctx) {
  const vlmc_text_config_t *t = &ctx->config->text;
  const vlmc_vision_config_t *v = &ctx->config->vision;
  int64_t embed[2] = {t->vocab_size, t->hidden_size};
  VLMC_RETURN_IF_ERROR(vlmc_model_check_tensor(&ctx->m, "model.embed_tokens.weight", 2, embed));
  VLMC_RETURN_IF_ERROR(vlmc_model_require_blocks(&ctx->m, "num_hidden_layers",
                                                 t->num_hidden_layers, "model.layers.",
                                                 ".input_layernorm.weight"));
  char name[VLMC_MODEL_NAME_MAX];
  vlmc_model_name(name, "model.layers.%lld.input_layernorm.weight",
                  (long long)t->num_hidden_layers - 1);
  VLMC_RETURN_IF_ERROR(vlmc_model_check_tensor(&ctx->m, name, 1, &t->hidden_size));
  if (!ctx->config->has_vision) return NULL;
  VLMC_RETURN_IF_ERROR(vlmc_model_require_blocks(&ctx->m, "vision_config.depth", v->depth,
                                                 "visual.blocks.", ".norm1.weight"));
  vlmc_model_name(name, "visual.blocks.%lld.norm1.weight", (long long)v->depth - 1);
  return vlmc_model_check_tensor(&ctx->m, name, 1, &v->hidden_size);
}

/* ---- entry points ----------------------------------------------------------------------- */

static vlmc_status_t add_symbols(qwen_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_module_symbol(ctx->m.module, "P", &ctx->sym_patches));
  VLMC_RETURN_IF_ERROR(vlmc_module_symbol(ctx->m.module, "G", &ctx->sym_images));
  VLMC_RETURN_IF_ERROR(vlmc_module_symbol(ctx->m.module, "S", &ctx->sym_tokens));
  VLMC_RETURN_IF_ERROR(vlmc_module_symbol(ctx->m.module, "M", &ctx->sym_image_tokens));
  return vlmc_module_symbol(ctx->m.module, "C", &ctx->sym_cache);
}

static vlmc_status_t build_all(qwen_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(add_symbols(ctx));
  if (ctx->config->has_vision) VLMC_RETURN_IF_ERROR(qwen_build_encode_image(ctx));
  VLMC_RETURN_IF_ERROR(qwen_build_prefill(ctx));
  VLMC_RETURN_IF_ERROR(qwen_build_decode(ctx));
  return vlmc_status_annotate(vlmc_module_verify(ctx->m.module),
                              "qwen2_5_vl: the built module: ");
}

vlmc_status_t vlmc_qwen2_5_vl_build(const vlmc_model_config_t *config,
                                    const vlmc_model_tensors_t *tensors,
                                    const vlmc_model_build_options_t *options,
                                    vlmc_module_t **out_module) {
  static const vlmc_model_build_options_t defaults = {NULL, 0, false};
  if (!options) options = &defaults;
  VLMC_RETURN_IF_ERROR(check_config(config));
  int64_t patches = 0;
  if (options->grid) VLMC_RETURN_IF_ERROR(check_grid(config, options, &patches));
  qwen_ctx_t ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.config = config;
  ctx.options = options;
  ctx.m.tensors = tensors;
  ctx.m.taps = options->taps;
  ctx.m.quant_bits = config->quant_bits;
  ctx.m.quant_group = config->quant_group;
  VLMC_RETURN_IF_ERROR(check_tensors_cover_config(&ctx));
  VLMC_RETURN_IF_ERROR(vlmc_module_create(&ctx.m.module));
  vlmc_status_t st = build_all(&ctx);
  if (st) {
    vlmc_module_destroy(ctx.m.module);
    return st;
  }
  *out_module = ctx.m.module;
  return NULL;
}

vlmc_status_t vlmc_qwen2_5_vl_plan_tensors(const vlmc_model_config_t *config,
                                           vlmc_model_tensor_fn add, void *ctx) {
  VLMC_RETURN_IF_ERROR(check_config(config)); /* the shapes are products of its sizes */
  /* Every layer and vision block has at least 12 tensors: refuse a plan that cannot be held
   * before naming millions of them (num_hidden_layers 2^24 took minutes). */
  int64_t blocks = config->text.num_hidden_layers + config->vision.depth;
  if (blocks > VLMC_MODEL_MAX_PLANNED_TENSORS / 12)
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "the config implies more than %d tensors "
                            "(num_hidden_layers %lld, vision_config.depth %lld)",
                            VLMC_MODEL_MAX_PLANNED_TENSORS,
                            (long long)config->text.num_hidden_layers,
                            (long long)config->vision.depth);
  qwen_plan_tensors(config, add, ctx);
  return NULL;
}

static bool checkpoint_find(void *user, const char *name, vlmc_model_tensor_info_t *out_info) {
  const vlmc_st_tensor_t *t = vlmc_checkpoint_find(user, name);
  if (!t) return false;
  if (!vlmc_st_dtype_to_ir(t->dtype, &out_info->dtype))
    out_info->dtype = VLMC_DTYPE_COUNT; /* I16 and future ones: no IR dtype */
  out_info->rank = (uint32_t)t->rank;
  for (int i = 0; i < t->rank && i < VLMC_IR_MAX_RANK; ++i) out_info->shape[i] = t->shape[i];
  return true;
}

vlmc_status_t vlmc_qwen2_5_vl_build_from_checkpoint(const vlmc_checkpoint_t *checkpoint,
                                                    const vlmc_model_build_options_t *options,
                                                    vlmc_module_t **out_module) {
  vlmc_model_tensors_t tensors = {checkpoint_find, (void *)checkpoint,
                                  vlmc_checkpoint_dir(checkpoint)};
  return vlmc_qwen2_5_vl_build(vlmc_checkpoint_config(checkpoint), &tensors, options, out_module);
}
