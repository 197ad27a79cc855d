/* A small dense tensor for the reference executor and its callers: an element type, a shape
 * and row-major data that is either owned (malloc'd, freed by vlmc_tensor_release) or borrowed
 * (a view of memory that the caller keeps alive: an mmapped artifact, a test's array).
 *
 * The executor computes every float value in f32 and every integer or bool value in i64, so
 * the tensors it returns hold F32 or I64 data; the tensors it reads (arguments, parameters)
 * may hold narrower storage, converted on the way in (see reference/executor.h).
 *
 * Also here: the exact f16 / bf16 conversions (round to nearest even) with which the executor
 * emulates low-precision storage, and ggml's Q4_0 / Q8_0 block layouts. */
#ifndef VLMC_REFERENCE_TENSOR_H
#define VLMC_REFERENCE_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "support/float16.h"
#include "support/status.h"

typedef struct {
  vlmc_dtype_t dtype; /* element type of `data` (its storage, not necessarily the IR type) */
  uint32_t rank;
  int64_t shape[VLMC_IR_MAX_RANK];
  void *data;      /* row-major; for Q4_0 / Q8_0, blocks of the last dimension */
  size_t capacity; /* owned: bytes allocated (>= vlmc_tensor_bytes); borrowed: 0 */
  bool owned;
} vlmc_tensor_t;

/* A borrowed view of `data` (not copied; the caller keeps it alive while the view is used). */
vlmc_tensor_t vlmc_tensor_view(vlmc_dtype_t dtype, uint32_t rank, const int64_t *shape,
                               const void *data);
/* An owned, zero-filled tensor. Errors on a negative dim, rank > 8, size overflow or when out
 * of memory. */
vlmc_status_t vlmc_tensor_alloc(vlmc_dtype_t dtype, uint32_t rank, const int64_t *shape,
                                vlmc_tensor_t *out_tensor);
/* Frees owned data and resets the tensor to an empty borrowed one; safe on either kind. */
void vlmc_tensor_release(vlmc_tensor_t *tensor);

/* Number of elements (product of the shape; 1 for rank 0). The shape must be valid. */
int64_t vlmc_tensor_count(const vlmc_tensor_t *tensor);
/* Bytes of data the shape needs in its dtype, with overflow checks: false on overflow, a
 * negative dim, or a block-quantized last dimension that is not a multiple of the block. */
bool vlmc_tensor_byte_size(vlmc_dtype_t dtype, uint32_t rank, const int64_t *shape,
                           size_t *out_bytes);

/* The largest |a - b| over two F32 tensors of one shape, for tests and backend checks: inf
 * where a NaN or an infinity is not matched by the same in the other, -1 when the shapes or
 * dtypes differ. */
double vlmc_tensor_max_abs_diff(const vlmc_tensor_t *a, const vlmc_tensor_t *b);

/* Typed access; they assert the storage dtype. */
static inline float *vlmc_tensor_f32(const vlmc_tensor_t *t) { return (float *)t->data; }
static inline int64_t *vlmc_tensor_i64(const vlmc_tensor_t *t) { return (int64_t *)t->data; }

/* f16 / bf16 conversions: support/float16.h (included above). */

/* ggml's block-quantized layouts (32 elements a block, an f16 scale first):
 *   Q8_0: d, then 32 int8 q;   x = d * q.
 *   Q4_0: d, then 16 bytes;    x[j] = d * ((b[j] & 15) - 8), x[j + 16] = d * ((b[j] >> 4) - 8).
 * Dequantize `blocks` blocks into 32 * blocks floats. */
void vlmc_dequantize_q8_0(const uint8_t *data, size_t blocks, float *out);
void vlmc_dequantize_q4_0(const uint8_t *data, size_t blocks, float *out);
/* ggml's reference quantizers (quantize_row_q8_0_ref / quantize_row_q4_0_ref): 32 * blocks
 * floats into `blocks` blocks. Non-finite inputs give unspecified (but memory-safe) blocks. */
void vlmc_quantize_q8_0(const float *in, size_t blocks, uint8_t *out);
void vlmc_quantize_q4_0(const float *in, size_t blocks, uint8_t *out);

/* vlmc's own affine group quantization (`vlmc compile --quantize q4`, docs/quantization.md),
 * in dequantize's layout (MLX's): a row of `cols` floats in groups of `group` (the last may be
 * short), each group's scale s and bias b stored as f16 bits (its minimum is b, and
 * s = (max - min) / (2^bits - 1), both rounded to f16 first, so that q is chosen for the
 * values dequantize will use), q = clamp(round((x - b) / s), 0, 2^bits - 1) packed 32 / bits
 * to a u32 word, element 0 in the low bits, the last word zero-padded. `packed` holds
 * ceil(cols * bits / 32) words, scales and biases ceil(cols / group) each. Returns false
 * (writing nothing meaningful) when a group's minimum or maximum is not finite or outside
 * f16's range: the caller keeps that tensor unquantized. */
bool vlmc_quantize_affine_row(const float *x, int64_t cols, int bits, int64_t group,
                              uint32_t *packed, uint16_t *scales, uint16_t *biases);

#endif
