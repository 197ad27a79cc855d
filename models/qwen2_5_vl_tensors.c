/* The checkpoint tensors a Qwen2.5-VL config implies (vlmc_qwen2_5_vl_plan_tensors): what
 * `vlmc random-checkpoint` writes and the fuzzer's synthetic tensor table holds. The builder
 * asks for exactly these (tests check it), so a change to the model is a change here too. */
#include <stdio.h>

#include "models/qwen2_5_vl_internal.h"

static void add_linear(vlmc_model_tensor_fn add, void *ctx, int64_t out, int64_t in, bool bias,
                       const char *prefix) {
  char name[VLMC_MODEL_NAME_MAX];
  int64_t w[2] = {out, in};
  snprintf(name, sizeof name, "%s.weight", prefix);
  add(ctx, name, 2, w, false);
  if (!bias) return;
  snprintf(name, sizeof name, "%s.bias", prefix);
  add(ctx, name, 1, &out, false);
}

/* A vision norm under `prefix`: its weight, and a LayerNorm's bias. */
static void add_norm(vlmc_model_tensor_fn add, void *ctx, const vlmc_vision_config_t *v, int64_t d,
                     const char *prefix) {
  char name[VLMC_MODEL_NAME_MAX];
  snprintf(name, sizeof name, "%s.weight", prefix);
  add(ctx, name, 1, &d, true);
  if (v->norm != VLMC_VISION_LAYER_NORM) return;
  snprintf(name, sizeof name, "%s.bias", prefix);
  add(ctx, name, 1, &d, false);
}

/* A merger under `prefix`: its norm (over the patches, or over the merged rows: postshuffle)
 * and its two linears, named as the family names them. */
static void add_merger(vlmc_model_tensor_fn add, void *ctx, const vlmc_vision_config_t *v,
                       const char *prefix, bool postshuffle) {
  int64_t d = v->hidden_size, wide = d * v->spatial_merge_size * v->spatial_merge_size;
  bool fc = v->merger == VLMC_MERGER_FC;
  char name[VLMC_MODEL_NAME_MAX];
  snprintf(name, sizeof name, fc ? "%s.norm" : "%s.ln_q", prefix);
  add_norm(add, ctx, v, postshuffle ? wide : d, name);
  snprintf(name, sizeof name, fc ? "%s.linear_fc1" : "%s.mlp.0", prefix);
  add_linear(add, ctx, wide, wide, true, name);
  snprintf(name, sizeof name, fc ? "%s.linear_fc2" : "%s.mlp.2", prefix);
  add_linear(add, ctx, v->out_hidden_size, wide, true, name);
}

static void plan_vision(const vlmc_vision_config_t *v, vlmc_model_tensor_fn add, void *ctx) {
  int64_t d = v->hidden_size, inner = v->intermediate_size;
  int64_t patch[5] = {d, v->in_channels, v->temporal_patch_size, v->patch_size, v->patch_size};
  add(ctx, "visual.patch_embed.proj.weight", 5, patch, false);
  if (v->patch_bias) add(ctx, "visual.patch_embed.proj.bias", 1, &d, false);
  if (v->num_position_embeddings) {
    int64_t table[2] = {v->num_position_embeddings, d};
    add(ctx, "visual.pos_embed.weight", 2, table, false);
  }
  char name[VLMC_MODEL_NAME_MAX];
  for (int64_t i = 0; i < v->depth; ++i) {
    for (int k = 1; k <= 2; ++k) {
      snprintf(name, sizeof name, "visual.blocks.%lld.norm%d", (long long)i, k);
      add_norm(add, ctx, v, d, name);
    }
    snprintf(name, sizeof name, "visual.blocks.%lld.attn.qkv", (long long)i);
    add_linear(add, ctx, 3 * d, d, true, name);
    snprintf(name, sizeof name, "visual.blocks.%lld.attn.proj", (long long)i);
    add_linear(add, ctx, d, d, true, name);
    if (v->mlp != VLMC_VISION_SWIGLU) {
      bool qwen3 = v->mlp == VLMC_VISION_GELU_TANH_MLP;
      snprintf(name, sizeof name, qwen3 ? "visual.blocks.%lld.mlp.linear_fc1"
                                        : "visual.blocks.%lld.mlp.fc1", (long long)i);
      add_linear(add, ctx, inner, d, true, name);
      snprintf(name, sizeof name, qwen3 ? "visual.blocks.%lld.mlp.linear_fc2"
                                        : "visual.blocks.%lld.mlp.fc2", (long long)i);
      add_linear(add, ctx, d, inner, true, name);
      continue;
    }
    static const char *const mlp[] = {"gate_proj", "up_proj"};
    for (int k = 0; k < 2; ++k) {
      snprintf(name, sizeof name, "visual.blocks.%lld.mlp.%s", (long long)i, mlp[k]);
      add_linear(add, ctx, inner, d, true, name);
    }
    snprintf(name, sizeof name, "visual.blocks.%lld.mlp.down_proj", (long long)i);
    add_linear(add, ctx, d, inner, true, name);
  }
  add_merger(add, ctx, v, "visual.merger", false);
  for (int k = 0; k < v->deepstack_count; ++k) {
    snprintf(name, sizeof name, "visual.deepstack_merger_list.%d", k);
    add_merger(add, ctx, v, name, true);
  }
}

static void plan_text(const vlmc_model_config_t *cfg, vlmc_model_tensor_fn add, void *ctx) {
  const vlmc_text_config_t *t = &cfg->text;
  int64_t h = t->hidden_size, kv = t->num_key_value_heads * t->head_dim;
  int64_t q = t->num_attention_heads * t->head_dim, hd = t->head_dim;
  int64_t embed[2] = {t->vocab_size, h};
  add(ctx, "model.embed_tokens.weight", 2, embed, false);
  char name[VLMC_MODEL_NAME_MAX];
  for (int64_t j = 0; j < t->num_hidden_layers; ++j) {
    snprintf(name, sizeof name, "model.layers.%lld.input_layernorm.weight", (long long)j);
    add(ctx, name, 1, &h, true);
    snprintf(name, sizeof name, "model.layers.%lld.post_attention_layernorm.weight",
             (long long)j);
    add(ctx, name, 1, &h, true);
    static const char *const proj[] = {"q_proj", "k_proj", "v_proj"};
    for (int k = 0; k < 3; ++k) {
      snprintf(name, sizeof name, "model.layers.%lld.self_attn.%s", (long long)j, proj[k]);
      add_linear(add, ctx, k == 0 ? q : kv, h, t->qkv_bias, name);
    }
    snprintf(name, sizeof name, "model.layers.%lld.self_attn.o_proj", (long long)j);
    add_linear(add, ctx, h, q, false, name);
    for (int k = 0; k < 2 && t->qk_norm; ++k) {
      snprintf(name, sizeof name, "model.layers.%lld.self_attn.%s_norm.weight", (long long)j,
               k ? "k" : "q");
      add(ctx, name, 1, &hd, true);
    }
    static const char *const mlp[] = {"gate_proj", "up_proj"};
    for (int k = 0; k < 2; ++k) {
      snprintf(name, sizeof name, "model.layers.%lld.mlp.%s", (long long)j, mlp[k]);
      add_linear(add, ctx, t->intermediate_size, h, false, name);
    }
    snprintf(name, sizeof name, "model.layers.%lld.mlp.down_proj", (long long)j);
    add_linear(add, ctx, h, t->intermediate_size, false, name);
  }
  add(ctx, "model.norm.weight", 1, &h, true);
  if (!cfg->tie_word_embeddings) add(ctx, "lm_head.weight", 2, embed, false);
}

/* The config must have passed the family's checks (vlmc_qwen2_5_vl_plan_tensors): the shapes
 * are products of its sizes. */
void qwen_plan_tensors(const vlmc_model_config_t *config, vlmc_model_tensor_fn add, void *ctx) {
  if (config->has_vision) plan_vision(&config->vision, add, ctx);
  plan_text(config, add, ctx);
}
