/* rms_norm, layer_norm and softmax: statistics in f64, the normalised value in f32.
 *
 * rms_norm follows transformers' Qwen2RMSNorm: n = x * rsqrt(mean(x^2) + eps), computed in
 * f32 from an f64 mean; under f16 / bf16 emulation n is rounded to the value's dtype (HF's
 * `.to(input_dtype)`) before the weight multiplies it. */
#include <math.h>

#include "reference/exec_internal.h"

static bool low_precision(const vlmc_ref_ctx_t *ctx, vlmc_dtype_t *out_dtype) {
  *out_dtype = ctx->op->results[0].type.dtype;
  return ctx->ex->options.emulate_low_precision &&
         (*out_dtype == VLMC_DTYPE_F16 || *out_dtype == VLMC_DTYPE_BF16);
}

vlmc_status_t vlmc_ref_eval_RMS_NORM(vlmc_ref_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  const vlmc_tensor_t *xt = ctx->in[0];
  int64_t h = xt->shape[xt->rank - 1], rows = h ? vlmc_tensor_count(xt) / h : 0;
  double eps = vlmc_op_attr_float(ctx->op, "eps");
  vlmc_dtype_t dtype;
  bool round = low_precision(ctx, &dtype);
  const float *w = vlmc_tensor_f32(ctx->in[1]);
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = vlmc_tensor_f32(xt) + r * h;
    float *y = vlmc_tensor_f32(&ctx->out[0]) + r * h;
    double ss = 0;
    for (int64_t i = 0; i < h; ++i) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / (double)h + eps));
    for (int64_t i = 0; i < h; ++i) {
      float n = x[i] * inv;
      y[i] = w[i] * (round ? vlmc_ref_round(dtype, n) : n);
    }
  }
  return NULL;
}

vlmc_status_t vlmc_ref_eval_LAYER_NORM(vlmc_ref_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  const vlmc_tensor_t *xt = ctx->in[0];
  int64_t h = xt->shape[xt->rank - 1], rows = h ? vlmc_tensor_count(xt) / h : 0;
  double eps = vlmc_op_attr_float(ctx->op, "eps");
  const float *w = vlmc_tensor_f32(ctx->in[1]);
  const float *b = ctx->op->num_operands == 3 ? vlmc_tensor_f32(ctx->in[2]) : NULL;
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = vlmc_tensor_f32(xt) + r * h;
    float *y = vlmc_tensor_f32(&ctx->out[0]) + r * h;
    double sum = 0, ss = 0;
    for (int64_t i = 0; i < h; ++i) sum += x[i];
    double mean = sum / (double)h;
    for (int64_t i = 0; i < h; ++i) ss += (x[i] - mean) * (x[i] - mean);
    double inv = 1.0 / sqrt(ss / (double)h + eps); /* biased variance, as torch */
    for (int64_t i = 0; i < h; ++i) {
      float n = (float)((x[i] - mean) * inv);
      y[i] = b ? n * w[i] + b[i] : n * w[i];
    }
  }
  return NULL;
}

/* Softmax along `axis`: rows of `len` elements `inner` apart, max subtracted, sums in f64. */
vlmc_status_t vlmc_ref_eval_SOFTMAX(vlmc_ref_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  const vlmc_tensor_t *xt = ctx->in[0];
  int64_t axis = vlmc_op_attr_int(ctx->op, "axis"), outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= xt->shape[d];
  for (uint32_t d = (uint32_t)axis + 1; d < xt->rank; ++d) inner *= xt->shape[d];
  int64_t len = xt->shape[axis];
  const float *x = vlmc_tensor_f32(xt);
  float *y = vlmc_tensor_f32(&ctx->out[0]);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * len * inner + i;
      double max = -INFINITY, sum = 0;
      for (int64_t k = 0; k < len; ++k) max = fmax(max, x[base + k * inner]);
      for (int64_t k = 0; k < len; ++k) sum += exp(x[base + k * inner] - max);
      for (int64_t k = 0; k < len; ++k)
        y[base + k * inner] = (float)(exp(x[base + k * inner] - max) / sum);
    }
  return NULL;
}
