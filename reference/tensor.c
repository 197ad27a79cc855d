/* Dense tensors, f16 / bf16 conversions and ggml's Q4_0 / Q8_0 blocks. */
#include "reference/tensor.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support/checked_math.h"

vlmc_tensor_t vlmc_tensor_view(vlmc_dtype_t dtype, uint32_t rank, const int64_t *shape,
                               const void *data) {
  assert(rank <= VLMC_IR_MAX_RANK);
  vlmc_tensor_t t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.rank = rank;
  for (uint32_t i = 0; i < rank; ++i) t.shape[i] = shape[i];
  t.data = (void *)data; /* a view never writes through the pointer it was given */
  return t;
}

bool vlmc_tensor_byte_size(vlmc_dtype_t dtype, uint32_t rank, const int64_t *shape,
                           size_t *out_bytes) {
  if (dtype < 0 || dtype >= VLMC_DTYPE_COUNT || rank > VLMC_IR_MAX_RANK) return false;
  const vlmc_dtype_info_t *info = vlmc_dtype_info(dtype);
  size_t count = 1;
  for (uint32_t i = 0; i < rank; ++i)
    if (shape[i] < 0 || !vlmc_mul_size(count, (size_t)shape[i], &count)) return false;
  if (info->block_size > 1) {
    int64_t last = rank ? shape[rank - 1] : 1;
    if (last % info->block_size != 0) return false;
    return vlmc_mul_size(count / info->block_size, info->block_bytes, out_bytes);
  }
  return vlmc_mul_size(count, info->block_bytes, out_bytes);
}

vlmc_status_t vlmc_tensor_alloc(vlmc_dtype_t dtype, uint32_t rank, const int64_t *shape,
                                vlmc_tensor_t *out_tensor) {
  size_t bytes;
  if (!vlmc_tensor_byte_size(dtype, rank, shape, &bytes))
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "tensor shape is invalid or too large");
  vlmc_tensor_t t = vlmc_tensor_view(dtype, rank, shape, NULL);
  t.data = calloc(bytes ? bytes : 1, 1);
  if (!t.data)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory allocating %zu bytes", bytes);
  t.capacity = bytes ? bytes : 1;
  t.owned = true;
  *out_tensor = t;
  return NULL;
}

void vlmc_tensor_release(vlmc_tensor_t *tensor) {
  if (tensor->owned) free(tensor->data);
  memset(tensor, 0, sizeof *tensor);
}

int64_t vlmc_tensor_count(const vlmc_tensor_t *tensor) {
  int64_t n = 1;
  for (uint32_t i = 0; i < tensor->rank; ++i) n *= tensor->shape[i];
  return n;
}

/* ---- ggml blocks ---- */

enum { QK = 32 };

static float block_scale(const uint8_t *block) {
  return vlmc_f16_to_f32((uint16_t)(block[0] | (block[1] << 8)));
}

static void set_block_scale(uint8_t *block, float d) {
  uint16_t h = vlmc_f32_to_f16(d);
  block[0] = (uint8_t)(h & 0xff);
  block[1] = (uint8_t)(h >> 8);
}

void vlmc_dequantize_q8_0(const uint8_t *data, size_t blocks, float *out) {
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t *block = data + b * 34;
    float d = block_scale(block);
    for (int j = 0; j < QK; ++j) out[b * QK + j] = d * (float)(int8_t)block[2 + j];
  }
}

void vlmc_dequantize_q4_0(const uint8_t *data, size_t blocks, float *out) {
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t *block = data + b * 18;
    float d = block_scale(block);
    for (int j = 0; j < QK / 2; ++j) {
      out[b * QK + j] = d * (float)((block[2 + j] & 0x0f) - 8);
      out[b * QK + j + QK / 2] = d * (float)((block[2 + j] >> 4) - 8);
    }
  }
}

/* The value of largest magnitude in a block (the first one on ties), and that magnitude. */
static float block_extreme(const float *x, float *out_amax) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < QK; ++j)
    if (amax < fabsf(x[j])) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  *out_amax = amax;
  return max;
}

/* The float-to-integer conversions below are undefined for NaN and out-of-range values in C;
 * ggml's inputs are finite, ours might not be. */
static float finite_or_zero(float v) { return isfinite(v) ? v : 0.0f; }

void vlmc_quantize_q8_0(const float *in, size_t blocks, uint8_t *out) {
  for (size_t b = 0; b < blocks; ++b) {
    const float *x = in + b * QK;
    uint8_t *block = out + b * 34;
    float amax;
    block_extreme(x, &amax);
    float d = finite_or_zero(amax / 127.0f);
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    set_block_scale(block, d);
    for (int j = 0; j < QK; ++j) {
      float q = finite_or_zero(roundf(x[j] * id));
      block[2 + j] = (uint8_t)(int8_t)fmaxf(-128.0f, fminf(127.0f, q));
    }
  }
}

void vlmc_quantize_q4_0(const float *in, size_t blocks, uint8_t *out) {
  for (size_t b = 0; b < blocks; ++b) {
    const float *x = in + b * QK;
    uint8_t *block = out + b * 18;
    float amax;
    float d = finite_or_zero(block_extreme(x, &amax) / -8.0f);
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    set_block_scale(block, d);
    for (int j = 0; j < QK / 2; ++j) {
      float v0 = fmaxf(0.0f, fminf(15.0f, finite_or_zero(x[j] * id + 8.5f)));
      float v1 = fmaxf(0.0f, fminf(15.0f, finite_or_zero(x[j + QK / 2] * id + 8.5f)));
      block[2 + j] = (uint8_t)((uint8_t)v0 | ((uint8_t)v1 << 4));
    }
  }
}

bool vlmc_quantize_affine_row(const float *x, int64_t cols, int bits, int64_t group,
                              uint32_t *packed, uint16_t *scales, uint16_t *biases) {
  const uint32_t top = (1u << bits) - 1u;
  const int64_t per_word = 32 / bits;
  memset(packed, 0, (size_t)((cols + per_word - 1) / per_word) * sizeof *packed);
  for (int64_t g = 0; g * group < cols; ++g) {
    int64_t lo = g * group, hi = lo + group < cols ? lo + group : cols;
    float mn = x[lo], mx = x[lo];
    for (int64_t k = lo; k < hi; ++k) {
      mn = fminf(mn, x[k]);
      mx = fmaxf(mx, x[k]);
    }
    if (!isfinite(mn) || !isfinite(mx) || fabsf(mn) > 65504.0f || fabsf(mx) > 65504.0f)
      return false;
    biases[g] = vlmc_f32_to_f16(mn);
    float b = vlmc_f16_to_f32(biases[g]);
    scales[g] = vlmc_f32_to_f16((mx - b) / (float)top);
    float s = vlmc_f16_to_f32(scales[g]);
    for (int64_t k = lo; k < hi; ++k) {
      float q = s > 0.0f ? rintf((x[k] - b) / s) : 0.0f;
      uint32_t v = q <= 0.0f ? 0u : q >= (float)top ? top : (uint32_t)q;
      packed[k / per_word] |= v << ((k % per_word) * bits);
    }
  }
  return true;
}

double vlmc_tensor_max_abs_diff(const vlmc_tensor_t *a, const vlmc_tensor_t *b) {
  if (a->dtype != VLMC_DTYPE_F32 || b->dtype != VLMC_DTYPE_F32 || a->rank != b->rank) return -1;
  for (uint32_t i = 0; i < a->rank; ++i)
    if (a->shape[i] != b->shape[i]) return -1;
  const float *x = vlmc_tensor_f32(a), *y = vlmc_tensor_f32(b);
  double worst = 0;
  for (int64_t i = 0, n = vlmc_tensor_count(a); i < n; ++i) {
    if (x[i] == y[i] || (isnan(x[i]) && isnan(y[i]))) continue; /* inf == inf, NaN ~ NaN */
    double d = fabs((double)x[i] - (double)y[i]);
    if (isnan(d)) d = INFINITY;
    if (d > worst) worst = d;
  }
  return worst;
}
