/* Qwen2.5-VL: the entry points, the checks of config against itself and of the tensor table
 * against the config, and the graph helpers shared by the vision tower
 * (qwen2_5_vl_vision.c) and the text decoder (qwen2_5_vl_text.c). Semantics: the model spec,
 * sections 1, 3, 4 and 8. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "models/qwen2_5_vl_internal.h"
#include "support/checked_math.h"

void qwen_name(char *out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out, QWEN_NAME_MAX, fmt, ap);
  va_end(ap);
  assert(n >= 0 && n < QWEN_NAME_MAX && "tensor and value names are short");
  (void)n;
}

/* ---- tensors ---------------------------------------------------------------------------- */

static void shape_print(char *out, size_t size, uint32_t rank, const int64_t *shape) {
  size_t n = (size_t)snprintf(out, size, "[");
  for (uint32_t i = 0; i < rank && n < size; ++i)
    n += (size_t)snprintf(out + n, size - n, i ? ",%lld" : "%lld", (long long)shape[i]);
  if (n < size) snprintf(out + n, size - n, "]");
}

/* Looks the tensor up under its hub name, then under the other spelling. */
static vlmc_status_t tensor_find(const qwen_ctx_t *ctx, const char *name,
                                 vlmc_model_tensor_info_t *out_info) {
  const vlmc_model_tensors_t *t = ctx->tensors;
  memset(out_info, 0, sizeof *out_info);
  if (t->find(t->user, name, out_info)) return NULL;
  char other[QWEN_NAME_MAX + 32];
  bool has_other = vlmc_checkpoint_alternate_name(name, other, sizeof other);
  if (has_other && t->find(t->user, other, out_info)) return NULL;
  if (has_other)
    return vlmc_status_make(VLMC_NOT_FOUND, "tensor '%s' not found (also tried '%s') in %s", name,
                            other, t->source ? t->source : "the tensor table");
  return vlmc_status_make(VLMC_NOT_FOUND, "tensor '%s' not found in %s", name,
                          t->source ? t->source : "the tensor table");
}

static vlmc_status_t tensor_check(const qwen_ctx_t *ctx, const char *name,
                                  const vlmc_model_tensor_info_t *info, uint32_t rank,
                                  const int64_t *shape) {
  const char *source = ctx->tensors->source ? ctx->tensors->source : "the tensor table";
  if (info->dtype < 0 || info->dtype >= VLMC_DTYPE_COUNT || !vlmc_dtype_info(info->dtype)->is_float)
    return vlmc_status_make(VLMC_UNSUPPORTED,
                            "%s: tensor '%s' has dtype %s; expected f32, f16 or bf16", source, name,
                            info->dtype >= 0 && info->dtype < VLMC_DTYPE_COUNT
                                ? vlmc_dtype_info(info->dtype)->name
                                : "(one vlmc does not read)");
  bool same = info->rank == rank;
  for (uint32_t i = 0; same && i < rank; ++i) same = info->shape[i] == shape[i];
  if (same) return NULL;
  char got[160], want[160];
  shape_print(got, sizeof got, info->rank < VLMC_IR_MAX_RANK ? info->rank : VLMC_IR_MAX_RANK,
              info->shape);
  shape_print(want, sizeof want, rank, shape);
  return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                          "%s: tensor '%s' has shape %s, config.json implies %s", source, name, got,
                          want);
}

vlmc_status_t qwen_param(qwen_ctx_t *ctx, const char *name, uint32_t rank, const int64_t *shape,
                         vlmc_value_t **out_value) {
  assert(rank <= VLMC_IR_MAX_RANK);
  if (!vlmc_module_param_find(ctx->module, name)) {
    vlmc_model_tensor_info_t info;
    VLMC_RETURN_IF_ERROR(tensor_find(ctx, name, &info));
    VLMC_RETURN_IF_ERROR(tensor_check(ctx, name, &info, rank, shape));
    vlmc_type_t type = vlmc_type_make(info.dtype, rank, shape);
    VLMC_RETURN_IF_ERROR(vlmc_module_param_add(ctx->module, name, &type, NULL));
  }
  return vlmc_builder_param(&ctx->b, name, NULL, out_value);
}

vlmc_status_t qwen_weight(qwen_ctx_t *ctx, const char *name, uint32_t rank, const int64_t *shape,
                          vlmc_value_t **out_value) {
  vlmc_value_t *raw;
  VLMC_RETURN_IF_ERROR(qwen_param(ctx, name, rank, shape, &raw));
  if (raw->type.dtype == VLMC_DTYPE_F32) {
    *out_value = raw;
    return NULL;
  }
  return vlmc_builder_cast(&ctx->b, raw, VLMC_DTYPE_F32, NULL, out_value);
}

/* ---- graph helpers ---------------------------------------------------------------------- */

vlmc_status_t qwen_linear(qwen_ctx_t *ctx, vlmc_value_t *x, const char *prefix, int64_t out,
                          int64_t in, bool bias, const char *name, vlmc_value_t **out_value) {
  char wname[QWEN_NAME_MAX];
  int64_t wshape[2] = {out, in};
  vlmc_value_t *w, *b = NULL;
  qwen_name(wname, "%s.weight", prefix);
  VLMC_RETURN_IF_ERROR(qwen_weight(ctx, wname, 2, wshape, &w));
  if (bias) {
    qwen_name(wname, "%s.bias", prefix);
    VLMC_RETURN_IF_ERROR(qwen_weight(ctx, wname, 1, &out, &b));
  }
  return vlmc_builder_linear(&ctx->b, x, w, b, name, out_value);
}

vlmc_status_t qwen_rms_norm(qwen_ctx_t *ctx, vlmc_value_t *x, const char *weight_name,
                            int64_t dim, double eps, const char *name, vlmc_value_t **out_value) {
  vlmc_value_t *w;
  VLMC_RETURN_IF_ERROR(qwen_weight(ctx, weight_name, 1, &dim, &w));
  return vlmc_builder_rms_norm(&ctx->b, x, w, eps, name, out_value);
}

vlmc_status_t qwen_binary(qwen_ctx_t *ctx, vlmc_op_kind_t kind, vlmc_value_t *a, vlmc_value_t *b,
                          const char *name, vlmc_value_t **out_value) {
  vlmc_value_t *operands[2] = {a, b};
  return vlmc_builder_simple(&ctx->b, kind, 2, operands, name, out_value);
}

vlmc_status_t qwen_swiglu(qwen_ctx_t *ctx, vlmc_value_t *x, const char *prefix, int64_t hidden,
                          int64_t inner, bool bias, const char *name, vlmc_value_t **out_value) {
  char sub[QWEN_NAME_MAX];
  vlmc_value_t *gate, *up, *act, *prod;
  qwen_name(sub, "%s.gate_proj", prefix);
  VLMC_RETURN_IF_ERROR(qwen_linear(ctx, x, sub, inner, hidden, bias, NULL, &gate));
  qwen_name(sub, "%s.up_proj", prefix);
  VLMC_RETURN_IF_ERROR(qwen_linear(ctx, x, sub, inner, hidden, bias, NULL, &up));
  VLMC_RETURN_IF_ERROR(vlmc_builder_simple(&ctx->b, VLMC_OP_SILU, 1, &gate, NULL, &act));
  VLMC_RETURN_IF_ERROR(qwen_binary(ctx, VLMC_OP_MUL, act, up, NULL, &prod));
  qwen_name(sub, "%s.down_proj", prefix);
  return qwen_linear(ctx, prod, sub, hidden, inner, bias, name, out_value);
}

vlmc_status_t qwen_reshape(qwen_ctx_t *ctx, vlmc_value_t *x, uint32_t rank, const vlmc_dim_t *dims,
                           const char *name, vlmc_value_t **out_value) {
  vlmc_type_t type = {x->type.dtype, rank, {{0}}};
  memcpy(type.dims, dims, rank * sizeof *dims);
  return vlmc_builder_reshape(&ctx->b, x, &type, name, out_value);
}

vlmc_status_t qwen_slice(qwen_ctx_t *ctx, vlmc_value_t *x, int64_t axis, int64_t start,
                         int64_t end, const char *name, vlmc_value_t **out_value) {
  vlmc_named_attr_t attrs[3] = {{"axis", vlmc_attr_int(axis)},
                                {"start", vlmc_attr_int(start)},
                                {"end", vlmc_attr_int(end)}};
  vlmc_op_t *op;
  VLMC_RETURN_IF_ERROR(vlmc_builder_op(&ctx->b, VLMC_OP_SLICE, 1, &x, 3, attrs, NULL, name, &op));
  *out_value = &op->results[0];
  return NULL;
}

vlmc_status_t qwen_tap(qwen_ctx_t *ctx, const char *stage, vlmc_value_t *x) {
  if (!ctx->options->taps) return NULL;
  vlmc_named_attr_t attr = {"name", vlmc_attr_symbol(stage)};
  return vlmc_builder_op(&ctx->b, VLMC_OP_TAP, 1, &x, 1, &attr, NULL, NULL, NULL);
}

/* ---- checks of the config and the options ----------------------------------------------- */

static vlmc_status_t check_config(const vlmc_model_config_t *c) {
  if (c->family != VLMC_MODEL_QWEN2_5_VL)
    return vlmc_status_make(VLMC_UNSUPPORTED, "config.json: model_type is not qwen2_5_vl");
  const vlmc_text_config_t *t = &c->text;
  const vlmc_vision_config_t *v = &c->vision;
  if (v->out_hidden_size != t->hidden_size)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "config.json: vision_config.out_hidden_size %lld must equal the text "
                            "hidden_size %lld (image rows replace token embeddings)",
                            (long long)v->out_hidden_size, (long long)t->hidden_size);
  if (t->num_key_value_heads <= 0 || t->num_attention_heads % t->num_key_value_heads != 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "config.json: num_attention_heads %lld is not a multiple of "
                            "num_key_value_heads %lld",
                            (long long)t->num_attention_heads, (long long)t->num_key_value_heads);
  if (t->head_dim <= 0 || t->head_dim * t->num_attention_heads != t->hidden_size ||
      v->head_dim <= 0 || v->head_dim * v->num_heads != v->hidden_size || v->head_dim % 4 != 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "config.json: head sizes: text %lld/%lld heads, vision %lld/%lld "
                            "heads (the vision head_dim must be a multiple of 4)",
                            (long long)t->hidden_size, (long long)t->num_attention_heads,
                            (long long)v->hidden_size, (long long)v->num_heads);
  int64_t unit = v->patch_size * v->spatial_merge_size;
  if (v->patch_size <= 0 || v->spatial_merge_size <= 0 || v->window_size <= 0 ||
      v->window_size % unit != 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "config.json: vision_config.window_size %lld is not a multiple of "
                            "patch_size * spatial_merge_size = %lld",
                            (long long)v->window_size, (long long)unit);
  return NULL;
}

static vlmc_status_t check_grid(const vlmc_model_config_t *c,
                                const vlmc_qwen2_5_vl_options_t *options, int64_t *out_patches) {
  int64_t m = c->vision.spatial_merge_size, total = 0;
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

/* ---- entry points ----------------------------------------------------------------------- */

static vlmc_status_t add_symbols(qwen_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_module_symbol(ctx->module, "P", &ctx->sym_patches));
  VLMC_RETURN_IF_ERROR(vlmc_module_symbol(ctx->module, "G", &ctx->sym_images));
  VLMC_RETURN_IF_ERROR(vlmc_module_symbol(ctx->module, "S", &ctx->sym_tokens));
  VLMC_RETURN_IF_ERROR(vlmc_module_symbol(ctx->module, "M", &ctx->sym_image_tokens));
  return vlmc_module_symbol(ctx->module, "C", &ctx->sym_cache);
}

static vlmc_status_t build_all(qwen_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(add_symbols(ctx));
  VLMC_RETURN_IF_ERROR(qwen_build_encode_image(ctx));
  VLMC_RETURN_IF_ERROR(qwen_build_prefill(ctx));
  VLMC_RETURN_IF_ERROR(qwen_build_decode(ctx));
  return vlmc_status_annotate(vlmc_module_verify(ctx->module), "qwen2_5_vl: the built module: ");
}

vlmc_status_t vlmc_qwen2_5_vl_build(const vlmc_model_config_t *config,
                                    const vlmc_model_tensors_t *tensors,
                                    const vlmc_qwen2_5_vl_options_t *options,
                                    vlmc_module_t **out_module) {
  static const vlmc_qwen2_5_vl_options_t defaults = {NULL, 0, false};
  if (!options) options = &defaults;
  VLMC_RETURN_IF_ERROR(check_config(config));
  int64_t patches = 0;
  if (options->grid) VLMC_RETURN_IF_ERROR(check_grid(config, options, &patches));
  qwen_ctx_t ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.config = config;
  ctx.tensors = tensors;
  ctx.options = options;
  VLMC_RETURN_IF_ERROR(vlmc_module_create(&ctx.module));
  vlmc_status_t st = build_all(&ctx);
  if (st) {
    vlmc_module_destroy(ctx.module);
    return st;
  }
  *out_module = ctx.module;
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
                                                    const vlmc_qwen2_5_vl_options_t *options,
                                                    vlmc_module_t **out_module) {
  vlmc_model_tensors_t tensors = {checkpoint_find, (void *)checkpoint,
                                  vlmc_checkpoint_dir(checkpoint)};
  return vlmc_qwen2_5_vl_build(vlmc_checkpoint_config(checkpoint), &tensors, options, out_module);
}
