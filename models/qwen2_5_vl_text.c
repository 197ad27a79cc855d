/* prefill and decode: the Qwen2 decoder with M-RoPE (spec §4), and Qwen3's (q/k norms, no
 * q/k/v biases, an explicit head_dim, interleaved M-RoPE, and Qwen3-VL's deepstack: the vision
 * tower's deepstack features added to the image tokens' hidden rows after the first layers,
 * transformers' Qwen3VLTextModel._deepstack_process). One layer body serves both functions: in
 * prefill the keys and values of the prompt are the cache (returned), in decode the step's
 * row is appended to the cache arguments with kv_cache_append and returned grown by one. */
#include <math.h>
#include <string.h>

#include "models/qwen2_5_vl_internal.h"

typedef struct {
  int64_t hidden, heads, kv_heads, head_dim, inner, vocab;
  vlmc_dim_t tokens;         /* S in prefill, 1 in decode */
  vlmc_value_t *positions;   /* i64[3, tokens] */
  /* prefill of a deepstack model: the image tokens' rows and the features added to them after
   * layers 0 .. deepstack_count - 1 (Qwen3-VL); none in decode */
  vlmc_value_t *image_rows_at;
  vlmc_value_t *deepstack[VLMC_CONFIG_MAX_DEPTH];
  int deepstack_count;
} decoder_t;

static void decoder_init(const qwen_ctx_t *ctx, decoder_t *d, vlmc_dim_t tokens) {
  const vlmc_text_config_t *t = &ctx->config->text;
  memset(d, 0, sizeof *d);
  d->hidden = t->hidden_size;
  d->heads = t->num_attention_heads;
  d->kv_heads = t->num_key_value_heads;
  d->head_dim = t->head_dim;
  d->inner = t->intermediate_size;
  d->vocab = t->vocab_size;
  d->tokens = tokens;
}

static vlmc_type_t cache_type(const decoder_t *d, vlmc_dim_t length) {
  vlmc_type_t type = {VLMC_DTYPE_F32, 3,
                      {length, vlmc_dim_static(d->kv_heads), vlmc_dim_static(d->head_dim)}};
  return type;
}

/* ---- one decoder layer ------------------------------------------------------------------- */

/* q, k or v [tokens, heads, head_dim]; Qwen3's q and k then RMSNorm over head_dim per head
 * (self_attn.q_norm / k_norm, before the rotary). */
static vlmc_status_t projection(qwen_ctx_t *ctx, const decoder_t *d, vlmc_value_t *a,
                                const char *prefix, const char *which, int64_t heads,
                                vlmc_value_t **out) {
  const vlmc_text_config_t *t = &ctx->config->text;
  char sub[VLMC_MODEL_NAME_MAX];
  vlmc_value_t *y;
  vlmc_model_name(sub, "%s.self_attn.%s_proj", prefix, which);
  VLMC_RETURN_IF_ERROR(
      vlmc_model_linear(&ctx->m, a, sub, heads * d->head_dim, d->hidden, t->qkv_bias, NULL, &y));
  vlmc_dim_t dims[3] = {d->tokens, vlmc_dim_static(heads), vlmc_dim_static(d->head_dim)};
  VLMC_RETURN_IF_ERROR(vlmc_model_reshape(&ctx->m, y, 3, dims, NULL, out));
  if (!t->qk_norm || which[0] == 'v') return NULL;
  vlmc_model_name(sub, "%s.self_attn.%s_norm.weight", prefix, which);
  return vlmc_model_rms_norm(&ctx->m, *out, sub, d->head_dim, t->rms_norm_eps, NULL, out);
}

static vlmc_status_t text_rope(qwen_ctx_t *ctx, const decoder_t *d, vlmc_value_t *x,
                               const char *name, vlmc_value_t **out) {
  const vlmc_text_config_t *t = &ctx->config->text;
  const char *layout = t->mrope_interleaved ? "mrope_interleaved" : "mrope_sectioned";
  vlmc_named_attr_t attrs[3] = {{"layout", vlmc_attr_enum(layout)},
                                {"theta", vlmc_attr_float(t->rope_theta)},
                                {"sections", vlmc_attr_ints(t->mrope_section, 3)}};
  vlmc_value_t *operands[2] = {x, d->positions};
  vlmc_op_t *op;
  VLMC_RETURN_IF_ERROR(
      vlmc_builder_op(&ctx->m.b, VLMC_OP_ROPE, 2, operands, 3, attrs, NULL, name, &op));
  *out = &op->results[0];
  return NULL;
}

static vlmc_status_t cache_append(qwen_ctx_t *ctx, vlmc_value_t *cache, vlmc_value_t *rows,
                                  const char *name, vlmc_value_t **out) {
  if (!cache) {
    *out = rows;
    return NULL;
  }
  vlmc_value_t *operands[2] = {cache, rows};
  return vlmc_builder_simple(&ctx->m.b, VLMC_OP_KV_CACHE_APPEND, 2, operands, name, out);
}

typedef struct {
  vlmc_value_t *k_cache, *v_cache; /* decode: the cache arguments; prefill: NULL */
  vlmc_value_t *k_out, *v_out;     /* the layer's cache results */
} layer_cache_t;

static vlmc_status_t layer_attention(qwen_ctx_t *ctx, const decoder_t *d, int64_t j,
                                     vlmc_value_t *x, layer_cache_t *cache,
                                     vlmc_value_t **out_x) {
  char prefix[VLMC_MODEL_NAME_MAX], sub[VLMC_MODEL_NAME_MAX], name[VLMC_MODEL_NAME_MAX];
  vlmc_model_name(prefix, "model.layers.%lld", (long long)j);
  vlmc_value_t *a, *q, *k, *v, *attn, *flat, *o;
  vlmc_model_name(sub, "%s.input_layernorm.weight", prefix);
  vlmc_model_name(name, "L%lld.norm1", (long long)j);
  VLMC_RETURN_IF_ERROR(
      vlmc_model_rms_norm(&ctx->m, x, sub, d->hidden, ctx->config->text.rms_norm_eps, name, &a));
  VLMC_RETURN_IF_ERROR(projection(ctx, d, a, prefix, "q", d->heads, &q));
  VLMC_RETURN_IF_ERROR(projection(ctx, d, a, prefix, "k", d->kv_heads, &k));
  VLMC_RETURN_IF_ERROR(projection(ctx, d, a, prefix, "v", d->kv_heads, &v));
  vlmc_model_name(name, "L%lld.q", (long long)j);
  VLMC_RETURN_IF_ERROR(text_rope(ctx, d, q, name, &q));
  vlmc_model_name(name, "L%lld.k", (long long)j);
  VLMC_RETURN_IF_ERROR(text_rope(ctx, d, k, name, &k));
  vlmc_model_name(name, "L%lld.k_cache", (long long)j);
  VLMC_RETURN_IF_ERROR(cache_append(ctx, cache->k_cache, k, name, &cache->k_out));
  vlmc_model_name(name, "L%lld.v_cache", (long long)j);
  VLMC_RETURN_IF_ERROR(cache_append(ctx, cache->v_cache, v, name, &cache->v_out));
  /* Causal by cache index: query i of S sits at position T - S + i of the T keys (spec §4.6). */
  vlmc_model_name(name, "L%lld.attn", (long long)j);
  VLMC_RETURN_IF_ERROR(vlmc_model_attention(&ctx->m, q, cache->k_out, cache->v_out, NULL,
                                            1.0 / sqrt((double)d->head_dim), true, name, &attn));
  vlmc_dim_t dims[2] = {d->tokens, vlmc_dim_static(d->heads * d->head_dim)};
  VLMC_RETURN_IF_ERROR(vlmc_model_reshape(&ctx->m, attn, 2, dims, NULL, &flat));
  vlmc_model_name(sub, "%s.self_attn.o_proj", prefix);
  VLMC_RETURN_IF_ERROR(
      vlmc_model_linear(&ctx->m, flat, sub, d->hidden, d->heads * d->head_dim, false, NULL, &o));
  vlmc_model_name(name, "L%lld.x_attn", (long long)j);
  return vlmc_model_binary(&ctx->m, VLMC_OP_ADD, x, o, name, out_x);
}

static vlmc_status_t decoder_layer(qwen_ctx_t *ctx, const decoder_t *d, int64_t j,
                                   vlmc_value_t *x, layer_cache_t *cache, vlmc_value_t **out_x) {
  char sub[VLMC_MODEL_NAME_MAX], name[VLMC_MODEL_NAME_MAX];
  vlmc_value_t *b, *mlp;
  VLMC_RETURN_IF_ERROR(layer_attention(ctx, d, j, x, cache, &x));
  vlmc_model_name(sub, "model.layers.%lld.post_attention_layernorm.weight", (long long)j);
  vlmc_model_name(name, "L%lld.norm2", (long long)j);
  VLMC_RETURN_IF_ERROR(
      vlmc_model_rms_norm(&ctx->m, x, sub, d->hidden, ctx->config->text.rms_norm_eps, name, &b));
  vlmc_model_name(sub, "model.layers.%lld.mlp", (long long)j);
  vlmc_model_name(name, "L%lld.mlp", (long long)j);
  VLMC_RETURN_IF_ERROR(vlmc_model_swiglu(&ctx->m, b, sub, d->hidden, d->inner, false, name, &mlp));
  vlmc_model_name(name, "L%lld.out", (long long)j);
  return vlmc_model_binary(&ctx->m, VLMC_OP_ADD, x, mlp, name, out_x);
}

/* ---- embedding and head ------------------------------------------------------------------ */

/* Final norm and the head on the last position: logits f32[V]. */
static vlmc_status_t head(qwen_ctx_t *ctx, const decoder_t *d, vlmc_value_t *x,
                          const char *name, vlmc_value_t **out_logits) {
  vlmc_named_attr_t attrs[2] = {{"axis", vlmc_attr_int(0)}, {"start", vlmc_attr_int(-1)}};
  vlmc_op_t *op;
  VLMC_RETURN_IF_ERROR(vlmc_builder_op(&ctx->m.b, VLMC_OP_SLICE, 1, &x, 2, attrs, NULL, "last",
                                       &op));
  vlmc_value_t *h, *w, *logits;
  VLMC_RETURN_IF_ERROR(vlmc_model_rms_norm(&ctx->m, &op->results[0], "model.norm.weight", d->hidden,
                                     ctx->config->text.rms_norm_eps, "final_norm", &h));
  /* Tied (the 3B checkpoint has no lm_head tensor): the head is the embedding table. */
  const char *head_name =
      ctx->config->tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  int64_t shape[2] = {d->vocab, d->hidden};
  VLMC_RETURN_IF_ERROR(vlmc_model_weight(&ctx->m, head_name, 2, shape, &w));
  VLMC_RETURN_IF_ERROR(vlmc_builder_linear(&ctx->m.b, h, w, NULL, NULL, &logits));
  vlmc_dim_t dims[1] = {vlmc_dim_static(d->vocab)};
  return vlmc_model_reshape(&ctx->m, logits, 1, dims, name, out_logits);
}

/* ---- the functions ----------------------------------------------------------------------- */

/* After layer j of a deepstack prefill: x's image-token rows += deepstack feature j (taps
 * lm_layer.{j}, the layer's output before the addition, and deepstack_visual_embeds.{j}). */
static vlmc_status_t add_deepstack(qwen_ctx_t *ctx, const decoder_t *d, int64_t j, vlmc_value_t *x,
                                   vlmc_value_t **out_x) {
  char name[VLMC_MODEL_NAME_MAX];
  vlmc_value_t *rows, *sum;
  vlmc_model_name(name, "lm_layer.%lld", (long long)j);
  VLMC_RETURN_IF_ERROR(vlmc_model_tap(&ctx->m, name, x));
  vlmc_model_name(name, "deepstack_visual_embeds.%lld", (long long)j);
  VLMC_RETURN_IF_ERROR(vlmc_model_tap(&ctx->m, name, d->deepstack[j]));
  vlmc_model_name(name, "L%lld.image_rows", (long long)j);
  VLMC_RETURN_IF_ERROR(vlmc_builder_gather(&ctx->m.b, x, d->image_rows_at, 0, name, &rows));
  vlmc_model_name(name, "L%lld.deepstack", (long long)j);
  VLMC_RETURN_IF_ERROR(vlmc_model_binary(&ctx->m, VLMC_OP_ADD, rows, d->deepstack[j], name, &sum));
  vlmc_value_t *operands[3] = {x, sum, d->image_rows_at};
  vlmc_model_name(name, "L%lld.with_deepstack", (long long)j);
  return vlmc_builder_simple(&ctx->m.b, VLMC_OP_SCATTER_ROWS, 3, operands, name, out_x);
}

/* Runs the layers; results[0] is left for the logits, results[1 + 2j] / [2 + 2j] get layer j's
 * k / v cache. cache_args is NULL in prefill. */
static vlmc_status_t run_layers(qwen_ctx_t *ctx, const decoder_t *d, vlmc_value_t *x,
                                vlmc_value_t *cache_args, vlmc_value_t **results,
                                vlmc_value_t **out_x) {
  for (int64_t j = 0; j < ctx->config->text.num_hidden_layers; ++j) {
    layer_cache_t cache = {cache_args ? &cache_args[2 * j] : NULL,
                           cache_args ? &cache_args[2 * j + 1] : NULL, NULL, NULL};
    VLMC_RETURN_IF_ERROR(decoder_layer(ctx, d, j, x, &cache, &x));
    if (j < d->deepstack_count) VLMC_RETURN_IF_ERROR(add_deepstack(ctx, d, j, x, &x));
    results[1 + 2 * j] = cache.k_out;
    results[2 + 2 * j] = cache.v_out;
  }
  *out_x = x;
  return NULL;
}

/* Result types shared by prefill and decode: logits, then (k, v) per layer of `length`. */
static vlmc_type_t *result_types(const qwen_ctx_t *ctx, const decoder_t *d, vlmc_dim_t length,
                                 uint32_t *out_count) {
  uint32_t n = 1 + 2 * (uint32_t)ctx->config->text.num_hidden_layers;
  vlmc_type_t *types = vlmc_arena_alloc(&ctx->m.module->arena, n * sizeof *types,
                                        _Alignof(vlmc_type_t));
  if (!types) return NULL;
  int64_t vocab = d->vocab;
  types[0] = vlmc_type_make(VLMC_DTYPE_F32, 1, &vocab);
  for (uint32_t i = 1; i < n; ++i) types[i] = cache_type(d, length);
  *out_count = n;
  return types;
}

static vlmc_status_t finish(qwen_ctx_t *ctx, const decoder_t *d, vlmc_value_t *x,
                            vlmc_value_t *cache_args, uint32_t num_results) {
  vlmc_value_t **results =
      vlmc_arena_alloc(&ctx->m.module->arena, num_results * sizeof *results, _Alignof(void *));
  if (!results) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  VLMC_RETURN_IF_ERROR(run_layers(ctx, d, x, cache_args, results, &x));
  bool prefill = cache_args == NULL;
  VLMC_RETURN_IF_ERROR(head(ctx, d, x, prefill ? "logits_last" : "logits", &results[0]));
  if (prefill) VLMC_RETURN_IF_ERROR(vlmc_model_tap(&ctx->m, "logits_last", results[0]));
  return vlmc_builder_return(&ctx->m.b, num_results, results);
}

/* prefill(input_ids, image_embeds, deepstack.0, ..., positions): encode_image's results in its
 * order between the ids and the positions (models/family.h). */
vlmc_status_t qwen_build_prefill(qwen_ctx_t *ctx) {
  vlmc_dim_t tokens, image_tokens;
  VLMC_RETURN_IF_ERROR(vlmc_dim_symbolic(ctx->sym_tokens, 1, 1, 0, &tokens));
  VLMC_RETURN_IF_ERROR(vlmc_dim_symbolic(ctx->sym_image_tokens, 1, 1, 0, &image_tokens));
  decoder_t d;
  decoder_init(ctx, &d, tokens);
  d.deepstack_count = ctx->config->has_vision ? ctx->config->vision.deepstack_count : 0;
  uint32_t features = 1 + (uint32_t)d.deepstack_count, num_args = features + 2;
  vlmc_type_t args[3 + VLMC_CONFIG_MAX_DEPTH];
  const char *names[3 + VLMC_CONFIG_MAX_DEPTH];
  args[0] = (vlmc_type_t){VLMC_DTYPE_I64, 1, {tokens}};
  names[0] = "input_ids";
  for (uint32_t i = 0; i < features; ++i) {
    args[1 + i] = (vlmc_type_t){VLMC_DTYPE_F32, 2, {image_tokens, vlmc_dim_static(d.hidden)}};
    char name[VLMC_MODEL_NAME_MAX] = "image_embeds";
    if (i > 0) vlmc_model_name(name, "deepstack.%u", i - 1);
    names[1 + i] = vlmc_arena_strdup(&ctx->m.module->arena, name);
    if (!names[1 + i]) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  args[num_args - 1] = (vlmc_type_t){VLMC_DTYPE_I64, 2, {vlmc_dim_static(3), tokens}};
  names[num_args - 1] = "positions";
  uint32_t num_results;
  vlmc_type_t *results = result_types(ctx, &d, tokens, &num_results);
  if (!results) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_func_t *func;
  VLMC_RETURN_IF_ERROR(vlmc_module_func_add(ctx->m.module, "prefill", num_args, args, names,
                                            num_results, results, &func));
  vlmc_builder_init(&ctx->m.b, func);
  d.positions = &func->args[num_args - 1];
  for (int i = 0; i < d.deepstack_count; ++i) d.deepstack[i] = &func->args[2 + i];
  vlmc_value_t *x, *where;
  VLMC_RETURN_IF_ERROR(vlmc_model_embedding(&ctx->m, "model.embed_tokens.weight", d.vocab,
                                            d.hidden, &func->args[0], "embeds", &x));
  /* Image rows replace the embeddings of the image pad tokens, in order (spec §4.1). */
  vlmc_named_attr_t token = {"token", vlmc_attr_int(ctx->config->image_token_id)};
  vlmc_type_t where_type = {VLMC_DTYPE_I64, 1, {image_tokens}};
  vlmc_value_t *ids = &func->args[0];
  vlmc_op_t *op;
  VLMC_RETURN_IF_ERROR(vlmc_builder_op(&ctx->m.b, VLMC_OP_TOKEN_POSITIONS, 1, &ids, 1, &token,
                                       &where_type, "image_rows_at", &op));
  where = d.image_rows_at = &op->results[0];
  vlmc_value_t *operands[3] = {x, &func->args[1], where};
  VLMC_RETURN_IF_ERROR(
      vlmc_builder_simple(&ctx->m.b, VLMC_OP_SCATTER_ROWS, 3, operands, "inputs_embeds", &x));
  VLMC_RETURN_IF_ERROR(vlmc_model_tap(&ctx->m, "inputs_embeds", x));
  return finish(ctx, &d, x, NULL, num_results);
}

vlmc_status_t qwen_build_decode(qwen_ctx_t *ctx) {
  vlmc_dim_t cache_len, grown;
  VLMC_RETURN_IF_ERROR(vlmc_dim_symbolic(ctx->sym_cache, 1, 1, 0, &cache_len));
  VLMC_RETURN_IF_ERROR(vlmc_dim_symbolic(ctx->sym_cache, 1, 1, 1, &grown));
  decoder_t d;
  decoder_init(ctx, &d, vlmc_dim_static(1));
  uint32_t layers = (uint32_t)ctx->config->text.num_hidden_layers, num_args = 2 + 2 * layers;
  vlmc_type_t *args = vlmc_arena_alloc(&ctx->m.module->arena, num_args * sizeof *args,
                                       _Alignof(vlmc_type_t));
  const char **names = vlmc_arena_alloc(&ctx->m.module->arena, num_args * sizeof *names,
                                        _Alignof(char *));
  if (!args || !names) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  args[0] = (vlmc_type_t){VLMC_DTYPE_I64, 1, {vlmc_dim_static(1)}};
  args[1] = (vlmc_type_t){VLMC_DTYPE_I64, 2, {vlmc_dim_static(3), vlmc_dim_static(1)}};
  names[0] = "token";
  names[1] = "position";
  for (uint32_t j = 0; j < layers; ++j) {
    char name[VLMC_MODEL_NAME_MAX];
    args[2 + 2 * j] = args[3 + 2 * j] = cache_type(&d, cache_len);
    vlmc_model_name(name, "k_cache.%u", j);
    names[2 + 2 * j] = vlmc_arena_strdup(&ctx->m.module->arena, name);
    vlmc_model_name(name, "v_cache.%u", j);
    names[3 + 2 * j] = vlmc_arena_strdup(&ctx->m.module->arena, name);
    if (!names[2 + 2 * j] || !names[3 + 2 * j])
      return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  uint32_t num_results;
  vlmc_type_t *results = result_types(ctx, &d, grown, &num_results);
  if (!results) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_func_t *func;
  VLMC_RETURN_IF_ERROR(vlmc_module_func_add(ctx->m.module, "decode", num_args, args, names,
                                            num_results, results, &func));
  vlmc_builder_init(&ctx->m.b, func);
  d.positions = &func->args[1];
  vlmc_value_t *x;
  VLMC_RETURN_IF_ERROR(vlmc_model_embedding(&ctx->m, "model.embed_tokens.weight", d.vocab,
                                            d.hidden, &func->args[0], "embeds", &x));
  return finish(ctx, &d, x, &func->args[2], num_results);
}
