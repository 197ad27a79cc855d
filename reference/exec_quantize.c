/* dequantize: affine group dequantization of packed weights (docs/ir.md, docs/quantization.md).
 * The oracle's definition, which every kernel matches: element (n, k) is
 * f32(scale) * q + f32(bias), the product and the sum each rounded to f32 (no fused
 * multiply-add), q the unsigned `bits`-bit value at bit (k mod 32/bits) * bits of word
 * k * bits / 32. A dequantize of parameters is static, so the executor computes it once. */
#include "reference/exec_internal.h"
#include "reference/tensor.h"

/* The unsigned `bits`-bit value k of a row of packed words (held as i64, one per word). */
static uint32_t packed_value(const int64_t *words, int64_t k, int64_t bits) {
  int64_t per_word = 32 / bits;
  uint32_t word = (uint32_t)words[k / per_word];
  return (word >> ((k % per_word) * bits)) & ((1u << bits) - 1u);
}

vlmc_status_t vlmc_ref_eval_DEQUANTIZE(vlmc_ref_ctx_t *ctx) {
  int64_t bits = vlmc_op_attr_int(ctx->op, "bits"), group = vlmc_op_attr_int(ctx->op, "group");
  int64_t cols = vlmc_op_attr_int(ctx->op, "cols");
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  const vlmc_tensor_t *packed = ctx->in[0], *scales = ctx->in[1], *biases = ctx->in[2];
  int64_t rows = packed->shape[0], words = packed->shape[1], groups = scales->shape[1];
  float *w = vlmc_tensor_f32(&ctx->out[0]);
  for (int64_t n = 0; n < rows; ++n) {
    const int64_t *row = vlmc_tensor_i64(packed) + n * words;
    for (int64_t k = 0; k < cols; ++k) {
      int64_t g = n * groups + k / group;
      /* two roundings: -std=c11 (not gnu11) keeps the compiler from contracting them */
      float product = vlmc_ref_load_float(scales->data, scales->dtype, g) *
                      (float)packed_value(row, k, bits);
      w[n * cols + k] = product + vlmc_ref_load_float(biases->data, biases->dtype, g);
    }
  }
  return NULL;
}
