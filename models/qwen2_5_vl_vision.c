/* encode_image: the Qwen2.5-VL vision tower (spec §3), in the original token order; and the
 * Qwen2-VL one, which is the same tower without windows (every block full attention over its
 * image), with LayerNorms (a weight and a bias) and a fc1 / quick_gelu / fc2 MLP
 * (transformers' modeling_qwen2_vl.py: VisionAttention, VisionMlp, PatchMerger with ln_q a
 * LayerNorm): vlmc_vision_config_t's norm, mlp and windows say which.
 *
 * Every block reads and writes original-order rows: windowed blocks use the model-level
 * `window_attention` (which knows its grid), full blocks use `attention` over per-image
 * segments. The window permutation is the window-reorder pass's business: it moves the whole
 * tower into window order once (before the first block) and back once (after the merger), as
 * transformers does. The taps that transformers takes in window order (vision_block.{i},
 * merger) are gathered into window order here, explicitly, by the `window_order` of the grid;
 * after window-reorder those gathers cancel against the pass's own. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "models/qwen2_5_vl_internal.h"

/* HF's Qwen2_5_VisionRotaryEmbedding base and the vision RMSNorm eps (both hard-coded there). */
#define VISION_ROPE_THETA 10000.0
#define VISION_NORM_EPS 1e-6

typedef struct {
  int64_t width, heads, head_dim, inner, out, merge2;
  vlmc_dim_t patches, tokens; /* P and P / merge^2 */
  vlmc_value_t *grid;        /* the argument, or a constant for a fixed grid */
  vlmc_value_t *positions;   /* i64[2,P]: (row, col) of each patch */
  vlmc_value_t *full_cu;     /* i64[G+1]: per-image segments, NULL without full blocks */
  vlmc_value_t *order;       /* i64[P/m^2]: window order, for the window-order taps only */
} tower_t;

static bool is_full_block(const vlmc_vision_config_t *v, int64_t block) {
  for (int i = 0; i < v->fullatt_count; ++i)
    if (v->fullatt_block_indexes[i] == block) return true;
  return false;
}

/* ---- host index values ------------------------------------------------------------------- */

static vlmc_status_t grid_value(qwen_ctx_t *ctx, vlmc_value_t *arg, vlmc_value_t **out_grid) {
  if (!ctx->options->grid) {
    *out_grid = arg;
    return NULL;
  }
  int64_t sizes[2] = {(int64_t)ctx->options->num_images, 3};
  vlmc_type_t type = vlmc_type_make(VLMC_DTYPE_I64, 2, sizes);
  return vlmc_builder_constant_ints(&ctx->m.b, &type, ctx->options->grid,
                                    3 * ctx->options->num_images, "grid_fixed", out_grid);
}

static vlmc_status_t index_op(qwen_ctx_t *ctx, vlmc_op_kind_t kind, vlmc_value_t *grid,
                              uint32_t num_attrs, const vlmc_named_attr_t *attrs,
                              const vlmc_type_t *type, const char *name, vlmc_value_t **out) {
  vlmc_op_t *op;
  VLMC_RETURN_IF_ERROR(
      vlmc_builder_op(&ctx->m.b, kind, 1, &grid, num_attrs, attrs, type, name, &op));
  *out = &op->results[0];
  return NULL;
}

static void window_attrs(const vlmc_vision_config_t *v, vlmc_named_attr_t *attrs) {
  attrs[0] = (vlmc_named_attr_t){"window", vlmc_attr_int(v->window_size)};
  attrs[1] = (vlmc_named_attr_t){"patch", vlmc_attr_int(v->patch_size)};
  attrs[2] = (vlmc_named_attr_t){"merge", vlmc_attr_int(v->spatial_merge_size)};
}

static vlmc_status_t tower_indices(qwen_ctx_t *ctx, tower_t *t, vlmc_dim_t images) {
  const vlmc_vision_config_t *v = &ctx->config->vision;
  vlmc_named_attr_t merge = {"merge", vlmc_attr_int(v->spatial_merge_size)};
  vlmc_type_t pos_type = {VLMC_DTYPE_I64, 2, {vlmc_dim_static(2), t->patches}};
  VLMC_RETURN_IF_ERROR(index_op(ctx, VLMC_OP_VISION_POSITIONS, t->grid, 1, &merge, &pos_type,
                                "patch_rc", &t->positions));
  if (v->fullatt_count > 0) {
    vlmc_type_t cu_type = {VLMC_DTYPE_I64, 1, {{0}}};
    VLMC_RETURN_IF_ERROR(vlmc_dim_add(images, vlmc_dim_static(1), &cu_type.dims[0]));
    VLMC_RETURN_IF_ERROR(index_op(ctx, VLMC_OP_FULL_SEGMENTS, t->grid, 0, NULL, &cu_type,
                                  "full_cu", &t->full_cu));
  }
  if (ctx->options->taps && v->windows) {
    vlmc_named_attr_t attrs[3];
    window_attrs(v, attrs);
    vlmc_type_t order_type = {VLMC_DTYPE_I64, 1, {t->tokens}};
    VLMC_RETURN_IF_ERROR(index_op(ctx, VLMC_OP_WINDOW_ORDER, t->grid, 3, attrs, &order_type,
                                  "tap_window_order", &t->order));
  }
  return NULL;
}

/* A tap of x [P or P/m^2, ...] in window order: merged-token rows gathered by the order. */
static vlmc_status_t tap_window_order(qwen_ctx_t *ctx, const tower_t *t, const char *stage,
                                      vlmc_value_t *x) {
  if (!ctx->options->taps) return NULL;
  if (!ctx->config->vision.windows) return vlmc_model_tap(&ctx->m, stage, x); /* no windows */
  int64_t width = x->type.dims[1].off;
  bool patch_rows = vlmc_dim_equal(x->type.dims[0], t->patches);
  vlmc_value_t *rows = x, *gathered;
  if (patch_rows) {
    vlmc_dim_t dims[2] = {t->tokens, vlmc_dim_static(width * t->merge2)};
    VLMC_RETURN_IF_ERROR(vlmc_model_reshape(&ctx->m, x, 2, dims, NULL, &rows));
  }
  VLMC_RETURN_IF_ERROR(vlmc_builder_gather(&ctx->m.b, rows, t->order, 0, NULL, &gathered));
  if (patch_rows) {
    vlmc_dim_t dims[2] = {t->patches, vlmc_dim_static(width)};
    VLMC_RETURN_IF_ERROR(vlmc_model_reshape(&ctx->m, gathered, 2, dims, NULL, &gathered));
  }
  return vlmc_model_tap(&ctx->m, stage, gathered);
}

/* ---- one block ----------------------------------------------------------------------------- */

/* The block's (or the merger's) norm of x under `prefix`: RMSNorm with prefix.weight, or
 * LayerNorm with prefix.weight and prefix.bias (Qwen2-VL). */
static vlmc_status_t vision_norm(qwen_ctx_t *ctx, vlmc_value_t *x, const char *prefix, int64_t dim,
                                 const char *name, vlmc_value_t **out) {
  if (ctx->config->vision.norm == VLMC_VISION_LAYER_NORM)
    return vlmc_model_layer_norm(&ctx->m, x, prefix, dim, VISION_NORM_EPS, true, name, out);
  char weight[VLMC_MODEL_NAME_MAX];
  vlmc_model_name(weight, "%s.weight", prefix);
  return vlmc_model_rms_norm(&ctx->m, x, weight, dim, VISION_NORM_EPS, name, out);
}

/* x * sigmoid(1.702 x): transformers' QuickGELUActivation. */
static vlmc_status_t quick_gelu(qwen_ctx_t *ctx, vlmc_value_t *x, vlmc_value_t **out) {
  vlmc_type_t scalar = vlmc_type_make(VLMC_DTYPE_F32, 0, NULL);
  const double factor = 1.702;
  vlmc_value_t *c, *scaled, *gate;
  vlmc_op_t *op;
  VLMC_RETURN_IF_ERROR(vlmc_builder_constant_floats(&ctx->m.b, &scalar, &factor, 1, NULL, &c));
  VLMC_RETURN_IF_ERROR(vlmc_model_binary(&ctx->m, VLMC_OP_MUL, x, c, NULL, &scaled));
  VLMC_RETURN_IF_ERROR(vlmc_builder_op(&ctx->m.b, VLMC_OP_SIGMOID, 1, &scaled, 0, NULL, NULL, NULL, &op));
  gate = &op->results[0];
  return vlmc_model_binary(&ctx->m, VLMC_OP_MUL, x, gate, NULL, out);
}

/* gelu(x) in its erf form (nn.GELU()) or its tanh form (gelu_pytorch_tanh). */
static vlmc_status_t gelu(qwen_ctx_t *ctx, vlmc_value_t *x, const char *approx, vlmc_value_t **out) {
  vlmc_named_attr_t attr = {"approx", vlmc_attr_enum(approx)};
  vlmc_op_t *op;
  VLMC_RETURN_IF_ERROR(vlmc_builder_op(&ctx->m.b, VLMC_OP_GELU, 1, &x, 1, &attr, NULL, NULL, &op));
  *out = &op->results[0];
  return NULL;
}

/* The block's MLP under `prefix`: SwiGLU (gate/up/down_proj), fc1 / quick_gelu / fc2
 * (Qwen2-VL), or linear_fc1 / gelu_pytorch_tanh / linear_fc2 (Qwen3-VL). */
static vlmc_status_t vision_mlp(qwen_ctx_t *ctx, const tower_t *t, vlmc_value_t *x, const char *prefix,
                                const char *name, vlmc_value_t **out) {
  vlmc_vision_mlp_t kind = ctx->config->vision.mlp;
  if (kind == VLMC_VISION_SWIGLU)
    return vlmc_model_swiglu(&ctx->m, x, prefix, t->width, t->inner, true, name, out);
  bool qwen3 = kind == VLMC_VISION_GELU_TANH_MLP;
  char sub[VLMC_MODEL_NAME_MAX];
  vlmc_value_t *h, *act;
  vlmc_model_name(sub, qwen3 ? "%s.linear_fc1" : "%s.fc1", prefix);
  VLMC_RETURN_IF_ERROR(vlmc_model_linear(&ctx->m, x, sub, t->inner, t->width, true, NULL, &h));
  if (qwen3) VLMC_RETURN_IF_ERROR(gelu(ctx, h, "tanh", &act));
  else VLMC_RETURN_IF_ERROR(quick_gelu(ctx, h, &act));
  vlmc_model_name(sub, qwen3 ? "%s.linear_fc2" : "%s.fc2", prefix);
  return vlmc_model_linear(&ctx->m, act, sub, t->width, t->inner, true, name, out);
}

static vlmc_status_t head_split(qwen_ctx_t *ctx, const tower_t *t, vlmc_value_t *qkv, int part,
                                const char *name, vlmc_value_t **out) {
  vlmc_value_t *cols;
  VLMC_RETURN_IF_ERROR(
      vlmc_model_slice(&ctx->m, qkv, 1, part * t->width, (part + 1) * t->width, NULL, &cols));
  vlmc_dim_t dims[3] = {t->patches, vlmc_dim_static(t->heads), vlmc_dim_static(t->head_dim)};
  return vlmc_model_reshape(&ctx->m, cols, 3, dims, name, out);
}

static vlmc_status_t vision_rope(qwen_ctx_t *ctx, const tower_t *t, vlmc_value_t *x,
                                 const char *name, vlmc_value_t **out) {
  vlmc_named_attr_t attrs[2] = {{"layout", vlmc_attr_enum("vision_2d")},
                                {"theta", vlmc_attr_float(VISION_ROPE_THETA)}};
  vlmc_value_t *operands[2] = {x, t->positions};
  vlmc_op_t *op;
  VLMC_RETURN_IF_ERROR(
      vlmc_builder_op(&ctx->m.b, VLMC_OP_ROPE, 2, operands, 2, attrs, NULL, name, &op));
  *out = &op->results[0];
  return NULL;
}

/* Windowed blocks: window_attention on the grid; full blocks: attention per image. */
static vlmc_status_t block_attention(qwen_ctx_t *ctx, const tower_t *t, bool full,
                                     vlmc_value_t *q, vlmc_value_t *k, vlmc_value_t *v,
                                     const char *name, vlmc_value_t **out) {
  double scale = 1.0 / sqrt((double)t->head_dim);
  if (full) return vlmc_model_attention(&ctx->m, q, k, v, t->full_cu, scale, false, name, out);
  vlmc_named_attr_t attrs[4];
  window_attrs(&ctx->config->vision, attrs);
  attrs[3] = (vlmc_named_attr_t){"scale", vlmc_attr_float(scale)};
  vlmc_value_t *operands[4] = {q, k, v, t->grid};
  vlmc_op_t *op;
  VLMC_RETURN_IF_ERROR(vlmc_builder_op(&ctx->m.b, VLMC_OP_WINDOW_ATTENTION, 4, operands, 4, attrs,
                                       NULL, name, &op));
  *out = &op->results[0];
  return NULL;
}

static vlmc_status_t block_attn_part(qwen_ctx_t *ctx, const tower_t *t, int64_t i,
                                     vlmc_value_t *x, vlmc_value_t **out_x) {
  char prefix[VLMC_MODEL_NAME_MAX], sub[VLMC_MODEL_NAME_MAX], name[VLMC_MODEL_NAME_MAX];
  vlmc_model_name(prefix, "visual.blocks.%lld", (long long)i);
  vlmc_value_t *a, *qkv, *q, *k, *v, *attn, *flat, *proj;
  vlmc_model_name(sub, "%s.norm1", prefix);
  vlmc_model_name(name, "vb%lld.norm1", (long long)i);
  VLMC_RETURN_IF_ERROR(vision_norm(ctx, x, sub, t->width, name, &a));
  vlmc_model_name(sub, "%s.attn.qkv", prefix);
  vlmc_model_name(name, "vb%lld.qkv", (long long)i);
  VLMC_RETURN_IF_ERROR(
      vlmc_model_linear(&ctx->m, a, sub, 3 * t->width, t->width, true, name, &qkv));
  vlmc_model_name(name, "vb%lld.q", (long long)i);
  VLMC_RETURN_IF_ERROR(head_split(ctx, t, qkv, 0, NULL, &q));
  VLMC_RETURN_IF_ERROR(vision_rope(ctx, t, q, name, &q));
  vlmc_model_name(name, "vb%lld.k", (long long)i);
  VLMC_RETURN_IF_ERROR(head_split(ctx, t, qkv, 1, NULL, &k));
  VLMC_RETURN_IF_ERROR(vision_rope(ctx, t, k, name, &k));
  vlmc_model_name(name, "vb%lld.v", (long long)i);
  VLMC_RETURN_IF_ERROR(head_split(ctx, t, qkv, 2, name, &v));
  vlmc_model_name(name, "vb%lld.attn", (long long)i);
  bool full = is_full_block(&ctx->config->vision, i);
  VLMC_RETURN_IF_ERROR(block_attention(ctx, t, full, q, k, v, name, &attn));
  vlmc_dim_t dims[2] = {t->patches, vlmc_dim_static(t->width)};
  VLMC_RETURN_IF_ERROR(vlmc_model_reshape(&ctx->m, attn, 2, dims, NULL, &flat));
  vlmc_model_name(sub, "%s.attn.proj", prefix);
  VLMC_RETURN_IF_ERROR(
      vlmc_model_linear(&ctx->m, flat, sub, t->width, t->width, true, NULL, &proj));
  vlmc_model_name(name, "vb%lld.x_attn", (long long)i);
  return vlmc_model_binary(&ctx->m, VLMC_OP_ADD, x, proj, name, out_x);
}

static vlmc_status_t vision_block(qwen_ctx_t *ctx, const tower_t *t, int64_t i, vlmc_value_t *x,
                                  vlmc_value_t **out_x) {
  char prefix[VLMC_MODEL_NAME_MAX], sub[VLMC_MODEL_NAME_MAX], name[VLMC_MODEL_NAME_MAX];
  vlmc_value_t *b, *mlp;
  VLMC_RETURN_IF_ERROR(block_attn_part(ctx, t, i, x, &x));
  vlmc_model_name(prefix, "visual.blocks.%lld", (long long)i);
  vlmc_model_name(sub, "%s.norm2", prefix);
  vlmc_model_name(name, "vb%lld.norm2", (long long)i);
  VLMC_RETURN_IF_ERROR(vision_norm(ctx, x, sub, t->width, name, &b));
  vlmc_model_name(sub, "%s.mlp", prefix);
  vlmc_model_name(name, "vb%lld.mlp", (long long)i);
  VLMC_RETURN_IF_ERROR(vision_mlp(ctx, t, b, sub, name, &mlp));
  vlmc_model_name(name, "vb%lld.out", (long long)i);
  VLMC_RETURN_IF_ERROR(vlmc_model_binary(&ctx->m, VLMC_OP_ADD, x, mlp, name, out_x));
  vlmc_model_name(name, "vision_block.%lld", (long long)i);
  return tap_window_order(ctx, t, name, *out_x);
}

/* ---- patch embedding and merger ---------------------------------------------------------- */

static vlmc_status_t patch_embed(qwen_ctx_t *ctx, const tower_t *t, vlmc_value_t *pixels,
                                 vlmc_value_t **out_x) {
  const vlmc_vision_config_t *v = &ctx->config->vision;
  int64_t features = pixels->type.dims[1].off;
  /* Conv3d weight (out, C, T, kh, kw): flattened, its input axes are exactly the feature order
   * of a pixel_values row (spec §2.4), so the convolution is a linear over F features. */
  int64_t shape[5] = {t->width, v->in_channels, v->temporal_patch_size, v->patch_size,
                      v->patch_size};
  /* mlx_vlm stores it channels-last, [out, T, kh, kw, C] (docs/mlx_format.md §6): read as it
   * is and transposed back (once, at load: a value of parameters alone). */
  int64_t mlx[5] = {t->width, v->temporal_patch_size, v->patch_size, v->patch_size,
                    v->in_channels};
  vlmc_model_tensor_info_t info;
  bool channels_last = vlmc_model_tensor_info(&ctx->m, "visual.patch_embed.proj.weight", &info) &&
                       info.rank == 5 && memcmp(info.shape, mlx, sizeof mlx) == 0 &&
                       memcmp(info.shape, shape, sizeof shape) != 0;
  vlmc_value_t *w, *w2d;
  if (channels_last) {
    static const int64_t kToChannelsFirst[5] = {0, 4, 1, 2, 3};
    VLMC_RETURN_IF_ERROR(vlmc_model_param(&ctx->m, "visual.patch_embed.proj.weight", 5, mlx, &w));
    VLMC_RETURN_IF_ERROR(vlmc_builder_transpose(&ctx->m.b, w, kToChannelsFirst, NULL, &w));
  } else {
    VLMC_RETURN_IF_ERROR(vlmc_model_param(&ctx->m, "visual.patch_embed.proj.weight", 5, shape, &w));
  }
  vlmc_dim_t dims[2] = {vlmc_dim_static(t->width), vlmc_dim_static(features)};
  VLMC_RETURN_IF_ERROR(vlmc_model_reshape(&ctx->m, w, 2, dims, NULL, &w2d));
  if (w2d->type.dtype != VLMC_DTYPE_F32)
    VLMC_RETURN_IF_ERROR(vlmc_builder_cast(&ctx->m.b, w2d, VLMC_DTYPE_F32, NULL, &w2d));
  vlmc_value_t *bias = NULL; /* Qwen3-VL's Conv3d has one */
  if (v->patch_bias)
    VLMC_RETURN_IF_ERROR(
        vlmc_model_weight(&ctx->m, "visual.patch_embed.proj.bias", 1, &t->width, &bias));
  VLMC_RETURN_IF_ERROR(vlmc_builder_linear(&ctx->m.b, pixels, w2d, bias, "patch_embed", out_x));
  return vlmc_model_tap(&ctx->m, "patch_embed", *out_x);
}

/* Qwen3-VL: x + the learned position table interpolated to the grid (transformers'
 * fast_pos_embed_interpolate): four corner rows per patch gathered from visual.pos_embed,
 * weighted and summed in transformers' order ((c0 + c1) + c2) + c3. The corners and weights
 * are host values of the grid (constants for a fixed grid). */
static vlmc_status_t add_position_table(qwen_ctx_t *ctx, const tower_t *t, vlmc_value_t *x,
                                        vlmc_value_t **out_x) {
  const vlmc_vision_config_t *v = &ctx->config->vision;
  int64_t side = 1;
  while ((side + 1) * (side + 1) <= v->num_position_embeddings) ++side;
  vlmc_named_attr_t attrs[2] = {{"side", vlmc_attr_int(side)},
                                {"merge", vlmc_attr_int(v->spatial_merge_size)}};
  vlmc_type_t index_type = {VLMC_DTYPE_I64, 2, {vlmc_dim_static(4), t->patches}};
  vlmc_type_t weight_type = {VLMC_DTYPE_F32, 2, {vlmc_dim_static(4), t->patches}};
  vlmc_value_t *index, *weight, *sum = NULL;
  VLMC_RETURN_IF_ERROR(index_op(ctx, VLMC_OP_POS_INTERP_INDEX, t->grid, 2, attrs, &index_type,
                                "pos_corners", &index));
  VLMC_RETURN_IF_ERROR(index_op(ctx, VLMC_OP_POS_INTERP_WEIGHT, t->grid, 2, attrs, &weight_type,
                                "pos_weights", &weight));
  for (int k = 0; k < 4; ++k) {
    vlmc_value_t *ids, *w, *rows, *term;
    vlmc_dim_t ids_dims[1] = {t->patches}, w_dims[2] = {t->patches, vlmc_dim_static(1)};
    VLMC_RETURN_IF_ERROR(vlmc_model_slice(&ctx->m, index, 0, k, k + 1, NULL, &ids));
    VLMC_RETURN_IF_ERROR(vlmc_model_reshape(&ctx->m, ids, 1, ids_dims, NULL, &ids));
    VLMC_RETURN_IF_ERROR(vlmc_model_slice(&ctx->m, weight, 0, k, k + 1, NULL, &w));
    VLMC_RETURN_IF_ERROR(vlmc_model_reshape(&ctx->m, w, 2, w_dims, NULL, &w));
    VLMC_RETURN_IF_ERROR(vlmc_model_embedding(&ctx->m, "visual.pos_embed.weight",
                                              v->num_position_embeddings, t->width, ids, NULL,
                                              &rows));
    VLMC_RETURN_IF_ERROR(vlmc_model_binary(&ctx->m, VLMC_OP_MUL, rows, w, NULL, &term));
    if (sum) VLMC_RETURN_IF_ERROR(vlmc_model_binary(&ctx->m, VLMC_OP_ADD, sum, term, NULL, &sum));
    else sum = term;
  }
  return vlmc_model_binary(&ctx->m, VLMC_OP_ADD, x, sum, "pos_embedded", out_x);
}

/* A patch merger under `prefix`: a norm, the 2x2 patches of each merged token as one row,
 * fc1, exact GELU, fc2. Its parts' names are the family's (ln_q, mlp.0, mlp.2 or norm,
 * linear_fc1, linear_fc2); `postshuffle` norms the merged rows (Qwen3-VL's deepstack mergers)
 * instead of the patches. */
static vlmc_status_t merger_at(qwen_ctx_t *ctx, const tower_t *t, vlmc_value_t *x,
                               const char *prefix, bool postshuffle, const char *name,
                               vlmc_value_t **out) {
  bool fc = ctx->config->vision.merger == VLMC_MERGER_FC;
  int64_t wide = t->width * t->merge2;
  char norm[VLMC_MODEL_NAME_MAX], fc1[VLMC_MODEL_NAME_MAX], fc2[VLMC_MODEL_NAME_MAX];
  vlmc_model_name(norm, fc ? "%s.norm" : "%s.ln_q", prefix);
  vlmc_model_name(fc1, fc ? "%s.linear_fc1" : "%s.mlp.0", prefix);
  vlmc_model_name(fc2, fc ? "%s.linear_fc2" : "%s.mlp.2", prefix);
  vlmc_value_t *y = x, *h, *act;
  /* Rows 4j..4j+3 are the 2x2 patches of merged token j (spec §2.4): one row of 4·D. */
  vlmc_dim_t dims[2] = {t->tokens, vlmc_dim_static(wide)};
  if (!postshuffle) VLMC_RETURN_IF_ERROR(vision_norm(ctx, y, norm, t->width, "merger.norm", &y));
  VLMC_RETURN_IF_ERROR(
      vlmc_model_reshape(&ctx->m, y, 2, dims, postshuffle ? NULL : "merger.rows", &y));
  if (postshuffle) VLMC_RETURN_IF_ERROR(vision_norm(ctx, y, norm, wide, NULL, &y));
  VLMC_RETURN_IF_ERROR(vlmc_model_linear(&ctx->m, y, fc1, wide, wide, true, NULL, &h));
  VLMC_RETURN_IF_ERROR(gelu(ctx, h, "erf", &act));
  return vlmc_model_linear(&ctx->m, act, fc2, t->out, wide, true, name, out);
}

static vlmc_status_t merger(qwen_ctx_t *ctx, const tower_t *t, vlmc_value_t *x,
                            vlmc_value_t **out) {
  VLMC_RETURN_IF_ERROR(merger_at(ctx, t, x, "visual.merger", false, "image_embeds", out));
  return tap_window_order(ctx, t, "merger", *out);
}

/* Qwen3-VL's deepstack feature k from block deepstack_indexes[k]'s output: its own merger,
 * normed after the 2x2 shuffle (tap deepstack.{k}). */
static vlmc_status_t deepstack_feature(qwen_ctx_t *ctx, const tower_t *t, int k, vlmc_value_t *x,
                                       vlmc_value_t **out) {
  char prefix[VLMC_MODEL_NAME_MAX], name[VLMC_MODEL_NAME_MAX];
  vlmc_model_name(prefix, "visual.deepstack_merger_list.%d", k);
  vlmc_model_name(name, "deepstack.%d", k);
  VLMC_RETURN_IF_ERROR(merger_at(ctx, t, x, prefix, true, name, out));
  return tap_window_order(ctx, t, name, *out);
}

/* ---- the function ------------------------------------------------------------------------ */

static vlmc_status_t tower_init(qwen_ctx_t *ctx, tower_t *t, vlmc_dim_t *out_images) {
  const vlmc_vision_config_t *v = &ctx->config->vision;
  memset(t, 0, sizeof *t);
  t->width = v->hidden_size;
  t->heads = v->num_heads;
  t->head_dim = v->head_dim;
  t->inner = v->intermediate_size;
  t->out = v->out_hidden_size;
  t->merge2 = v->spatial_merge_size * v->spatial_merge_size;
  if (ctx->options->grid) {
    int64_t patches = 0;
    for (size_t i = 0; i < ctx->options->num_images; ++i)
      patches += ctx->options->grid[3 * i] * ctx->options->grid[3 * i + 1] *
                 ctx->options->grid[3 * i + 2];
    t->patches = vlmc_dim_static(patches);
    t->tokens = vlmc_dim_static(patches / t->merge2);
    *out_images = vlmc_dim_static((int64_t)ctx->options->num_images);
    return NULL;
  }
  VLMC_RETURN_IF_ERROR(vlmc_dim_symbolic(ctx->sym_patches, 1, 1, 0, &t->patches));
  VLMC_RETURN_IF_ERROR(vlmc_dim_symbolic(ctx->sym_patches, 1, t->merge2, 0, &t->tokens));
  return vlmc_dim_symbolic(ctx->sym_images, 1, 1, 0, out_images);
}

/* encode_image(pixel_values, grid) -> (image_embeds, deepstack.0, ...): the merged rows and,
 * for Qwen3-VL, one feature per deepstack block, each [P/m^2, out]; prefill takes them in this
 * order (the calling convention: models/family.h). */
vlmc_status_t qwen_build_encode_image(qwen_ctx_t *ctx) {
  const vlmc_vision_config_t *v = &ctx->config->vision;
  tower_t t;
  vlmc_dim_t images;
  VLMC_RETURN_IF_ERROR(tower_init(ctx, &t, &images));
  int64_t features = v->in_channels * v->temporal_patch_size * v->patch_size * v->patch_size;
  vlmc_type_t args[2] = {{VLMC_DTYPE_F32, 2, {t.patches, vlmc_dim_static(features)}},
                         {VLMC_DTYPE_I64, 2, {images, vlmc_dim_static(3)}}};
  uint32_t num_results = 1 + (uint32_t)v->deepstack_count;
  vlmc_type_t results[1 + VLMC_CONFIG_MAX_DEPTH];
  for (uint32_t i = 0; i < num_results; ++i)
    results[i] = (vlmc_type_t){VLMC_DTYPE_F32, 2, {t.tokens, vlmc_dim_static(t.out)}};
  const char *names[2] = {"pixel_values", "grid"};
  vlmc_func_t *func;
  VLMC_RETURN_IF_ERROR(vlmc_module_func_add(ctx->m.module, "encode_image", 2, args, names,
                                            num_results, results, &func));
  vlmc_builder_init(&ctx->m.b, func);
  vlmc_value_t *x, *outs[1 + VLMC_CONFIG_MAX_DEPTH];
  VLMC_RETURN_IF_ERROR(grid_value(ctx, &func->args[1], &t.grid));
  VLMC_RETURN_IF_ERROR(tower_indices(ctx, &t, images));
  VLMC_RETURN_IF_ERROR(patch_embed(ctx, &t, &func->args[0], &x));
  if (v->num_position_embeddings) VLMC_RETURN_IF_ERROR(add_position_table(ctx, &t, x, &x));
  /* The first block's input (Qwen3-VL: with the positions added); a windowed tower's is the
   * patch embedding in window order, which patch_embed's tap already shows. */
  if (!v->windows) VLMC_RETURN_IF_ERROR(vlmc_model_tap(&ctx->m, "vision_block_input.0", x));
  int k = 0;
  for (int64_t i = 0; i < v->depth; ++i) {
    VLMC_RETURN_IF_ERROR(vision_block(ctx, &t, i, x, &x));
    if (k < v->deepstack_count && v->deepstack_indexes[k] == i) {
      VLMC_RETURN_IF_ERROR(deepstack_feature(ctx, &t, k, x, &outs[1 + k]));
      ++k;
    }
  }
  VLMC_RETURN_IF_ERROR(merger(ctx, &t, x, &outs[0]));
  VLMC_RETURN_IF_ERROR(vlmc_model_tap(&ctx->m, "image_embeds", outs[0]));
  return vlmc_builder_return(&ctx->m.b, num_results, outs);
}
