/* Private to models/qwen2_5_vl*.c: the build context and the small graph helpers the vision
 * tower and the text decoder share. */
#ifndef VLMC_MODELS_QWEN2_5_VL_INTERNAL_H
#define VLMC_MODELS_QWEN2_5_VL_INTERNAL_H

#include "models/qwen2_5_vl.h"

/* Longest tensor name the builder formats ("visual.blocks.31.mlp.down_proj.weight" is 37). */
enum { QWEN_NAME_MAX = 256 };

typedef struct {
  vlmc_module_t *module;
  const vlmc_model_config_t *config;
  const vlmc_model_tensors_t *tensors;
  const vlmc_qwen2_5_vl_options_t *options;
  vlmc_builder_t b; /* the function being built */
  /* Symbols of the calling convention. */
  uint32_t sym_patches, sym_images, sym_tokens, sym_image_tokens, sym_cache;
} qwen_ctx_t;

/* A weight in f32: the parameter `name` (added to the module on first use, after checking the
 * checkpoint's tensor against `shape`), cast to f32 when stored otherwise. */
vlmc_status_t qwen_weight(qwen_ctx_t *ctx, const char *name, uint32_t rank, const int64_t *shape,
                          vlmc_value_t **out_value);
/* The raw parameter (checkpoint dtype), e.g. for an embedding gather. */
vlmc_status_t qwen_param(qwen_ctx_t *ctx, const char *name, uint32_t rank, const int64_t *shape,
                         vlmc_value_t **out_value);

/* x·Wᵀ (+ b) with the weight `prefix.weight` [out, in] and, when `bias`, `prefix.bias`. */
vlmc_status_t qwen_linear(qwen_ctx_t *ctx, vlmc_value_t *x, const char *prefix, int64_t out,
                          int64_t in, bool bias, const char *name, vlmc_value_t **out_value);
/* RMSNorm with the weight `weight_name` [dim]. */
vlmc_status_t qwen_rms_norm(qwen_ctx_t *ctx, vlmc_value_t *x, const char *weight_name,
                            int64_t dim, double eps, const char *name, vlmc_value_t **out_value);
/* SiLU(x·Wgᵀ) ⊙ (x·Wuᵀ) then ·Wdᵀ, the SwiGLU MLP under `prefix` (gate/up/down_proj). */
vlmc_status_t qwen_swiglu(qwen_ctx_t *ctx, vlmc_value_t *x, const char *prefix, int64_t hidden,
                          int64_t inner, bool bias, const char *name, vlmc_value_t **out_value);

/* x viewed with a new shape (same dtype); dims are given as vlmc_dim_t. */
vlmc_status_t qwen_reshape(qwen_ctx_t *ctx, vlmc_value_t *x, uint32_t rank, const vlmc_dim_t *dims,
                           const char *name, vlmc_value_t **out_value);
/* Columns [start, end) of the last axis. */
vlmc_status_t qwen_slice(qwen_ctx_t *ctx, vlmc_value_t *x, int64_t axis, int64_t start,
                         int64_t end, const char *name, vlmc_value_t **out_value);
vlmc_status_t qwen_binary(qwen_ctx_t *ctx, vlmc_op_kind_t kind, vlmc_value_t *a, vlmc_value_t *b,
                          const char *name, vlmc_value_t **out_value);
/* `tap @stage %x` when taps are on; nothing otherwise. */
vlmc_status_t qwen_tap(qwen_ctx_t *ctx, const char *stage, vlmc_value_t *x);

/* The three functions (qwen2_5_vl_vision.c, qwen2_5_vl_text.c). */
vlmc_status_t qwen_build_encode_image(qwen_ctx_t *ctx);
vlmc_status_t qwen_build_prefill(qwen_ctx_t *ctx);
vlmc_status_t qwen_build_decode(qwen_ctx_t *ctx);

/* snprintf into a QWEN_NAME_MAX buffer; asserts that the name fits (names come from the
 * config's small integers, so a longer one is a bug). */
void qwen_name(char *out, const char *fmt, ...) VLMC_PRINTF(2, 3);

#endif
