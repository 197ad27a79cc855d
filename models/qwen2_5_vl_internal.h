/* Private to models/qwen2_5_vl*.c: the build context the vision tower and the text decoder
 * share. The generic graph helpers (weights, linear, norms, SwiGLU, reshape, taps) are
 * models/builder.h's. */
#ifndef VLMC_MODELS_QWEN2_5_VL_INTERNAL_H
#define VLMC_MODELS_QWEN2_5_VL_INTERNAL_H

#include "models/builder.h"
#include "models/qwen2_5_vl.h"

typedef struct {
  vlmc_model_builder_t m; /* module, tensor table, the function being built, taps */
  const vlmc_model_config_t *config;
  const vlmc_model_build_options_t *options;
  /* Symbols of the calling convention. */
  uint32_t sym_patches, sym_images, sym_tokens, sym_image_tokens, sym_cache;
} qwen_ctx_t;

/* The three functions (qwen2_5_vl_vision.c, qwen2_5_vl_text.c). */
vlmc_status_t qwen_build_encode_image(qwen_ctx_t *ctx);
vlmc_status_t qwen_build_prefill(qwen_ctx_t *ctx);
vlmc_status_t qwen_build_decode(qwen_ctx_t *ctx);

/* The tensors of the checkpoint for a checked config (qwen2_5_vl_tensors.c). */
void qwen_plan_tensors(const vlmc_model_config_t *config, vlmc_model_tensor_fn add, void *ctx);

#endif
