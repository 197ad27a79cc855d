/* Which template writes the kernel of a region, by its anchor's op kind (the same choice as
 * the cpu target's, so the template names and work rules agree). */
#include "codegen/targets/vulkan/kernels.h"

vlmc_vk_template_fn vlmc_vk_template_for(vlmc_op_kind_t kind) {
  if (vlmc_op_info(kind)->flags & VLMC_OP_FLAG_ELEMENTWISE) return vlmc_vk_kernel_elementwise;
  switch (kind) {
    case VLMC_OP_RESHAPE: return vlmc_vk_kernel_elementwise;
    case VLMC_OP_LINEAR: return vlmc_vk_kernel_linear;
    case VLMC_OP_MATMUL: return vlmc_vk_kernel_matmul;
    case VLMC_OP_RMS_NORM: return vlmc_vk_kernel_rms_norm;
    case VLMC_OP_LAYER_NORM: return vlmc_vk_kernel_layer_norm;
    case VLMC_OP_SOFTMAX: return vlmc_vk_kernel_softmax;
    case VLMC_OP_ROPE: return vlmc_vk_kernel_rope;
    case VLMC_OP_ATTENTION: return vlmc_vk_kernel_attention;
    case VLMC_OP_GATHER: return vlmc_vk_kernel_gather;
    case VLMC_OP_EMBEDDING: return vlmc_vk_kernel_embedding;
    case VLMC_OP_SCATTER_ROWS: return vlmc_vk_kernel_scatter_rows;
    case VLMC_OP_SLICE: return vlmc_vk_kernel_slice;
    case VLMC_OP_CONCAT: return vlmc_vk_kernel_concat;
    case VLMC_OP_TRANSPOSE: return vlmc_vk_kernel_transpose;
    case VLMC_OP_KV_CACHE_APPEND: return vlmc_vk_kernel_kv_cache_append;
    case VLMC_OP_ARGMAX: return vlmc_vk_kernel_argmax;
    default: return NULL; /* window_attention is lowered by window-reorder before codegen */
  }
}

/* The hot templates' variants: for Vulkan devices that are CPUs (lavapipe; docs/vulkan.md,
 * "Kernel variants for CPU devices"; README.md, "Lanes variants"), and, for an f16 linear
 * of many rows and f16 attention beyond a decode step, for GPUs with cooperative matrices
 * (kernel_linear_coop.c, kernel_attention_coop.c; the device falls back to the main kernel
 * without them). */
const vlmc_vk_variant_t *vlmc_vk_variants_for(vlmc_op_kind_t kind, size_t *out_count) {
  static const vlmc_vk_variant_t kLinear[] = {{"cpu", vlmc_vk_kernel_linear_lanes, NULL},
                                              {"gpu", vlmc_vk_kernel_linear_coop, vlmc_vk_linear_coop_applies}};
  static const vlmc_vk_variant_t kAttention[] = {{"cpu", vlmc_vk_kernel_attention_lanes, NULL},
                                                 {"gpu", vlmc_vk_kernel_attention_coop, vlmc_vk_attention_coop_applies}};
  static const vlmc_vk_variant_t kRmsNorm[] = {{"cpu", vlmc_vk_kernel_rms_norm_lanes, vlmc_vk_norm_lanes_applies}};
  static const vlmc_vk_variant_t kLayerNorm[] = {{"cpu", vlmc_vk_kernel_layer_norm_lanes, vlmc_vk_norm_lanes_applies}};
  static const vlmc_vk_variant_t kRope[] = {{"cpu", vlmc_vk_kernel_rope_lanes, NULL}};
  *out_count = 0;
  if (kind == VLMC_OP_ROPE) {
    *out_count = 1;
    return kRope;
  }
  if (kind == VLMC_OP_RMS_NORM || kind == VLMC_OP_LAYER_NORM) {
    *out_count = 1;
    return kind == VLMC_OP_RMS_NORM ? kRmsNorm : kLayerNorm;
  }
  if (kind == VLMC_OP_LINEAR) {
    *out_count = sizeof kLinear / sizeof kLinear[0];
    return kLinear;
  }
  if (kind == VLMC_OP_ATTENTION) {
    *out_count = sizeof kAttention / sizeof kAttention[0];
    return kAttention;
  }
  return NULL;
}
