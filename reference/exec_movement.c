/* Data movement: gather, embedding, scatter_rows, reshape, transpose, concat, slice, argmax and
 * kv_cache_append. Elements are copied as they are (F32 or I64 storage; embedding also reads a
 * raw bf16 / f16 table); reshape passes its operand on without copying where it can. Every
 * index read from data is checked, and a bad one is an error naming the op, the index and the
 * bound. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/exec_internal.h"
#include "support/checked_math.h"

static size_t elem_size(const vlmc_tensor_t *t) { return t->dtype == VLMC_DTYPE_F32 ? 4 : 8; }

static int64_t product(const int64_t *shape, uint32_t from, uint32_t to) {
  int64_t n = 1;
  for (uint32_t d = from; d < to; ++d) n *= shape[d];
  return n;
}

static char *bytes_at(const vlmc_tensor_t *t, int64_t element) {
  return (char *)t->data + (size_t)element * elem_size(t);
}

static vlmc_status_t index_error(vlmc_ref_ctx_t *ctx, const char *what, int64_t value,
                                 int64_t position, int64_t bound) {
  return vlmc_ref_fail(ctx, VLMC_OUT_OF_RANGE, "%s %lld at index %lld is outside [0, %lld)", what,
                       (long long)value, (long long)position, (long long)bound);
}

static vlmc_status_t check_indices(vlmc_ref_ctx_t *ctx, const vlmc_tensor_t *idx, int64_t bound,
                                   const char *what) {
  const int64_t *v = vlmc_tensor_i64(idx);
  for (int64_t i = 0, n = vlmc_tensor_count(idx); i < n; ++i)
    if (v[i] < 0 || v[i] >= bound) return index_error(ctx, what, v[i], i, bound);
  return NULL;
}

/* out[o, i, r] = x[o, idx[i], r] with o over the dims before `axis`, r over those after. */
static void gather_axis(const vlmc_tensor_t *x, const vlmc_tensor_t *idx, int64_t axis,
                        vlmc_tensor_t *out) {
  int64_t outer = product(x->shape, 0, (uint32_t)axis), len = x->shape[axis];
  int64_t inner = product(x->shape, (uint32_t)axis + 1, x->rank), n = vlmc_tensor_count(idx);
  const int64_t *v = vlmc_tensor_i64(idx);
  size_t row = (size_t)inner * elem_size(x);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < n; ++i)
      memcpy(bytes_at(out, (o * n + i) * inner), bytes_at(x, (o * len + v[i]) * inner), row);
}

vlmc_status_t vlmc_ref_eval_GATHER(vlmc_ref_ctx_t *ctx) {
  int64_t axis = vlmc_op_attr_int(ctx->op, "axis");
  VLMC_RETURN_IF_ERROR(check_indices(ctx, ctx->in[1], ctx->in[0]->shape[axis], "index"));
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  gather_axis(ctx->in[0], ctx->in[1], axis, &ctx->out[0]);
  return NULL;
}

/* Rows idx[i] of a raw (bf16 / f16) table, widened to f32. */
static void gather_rows_widened(const vlmc_tensor_t *table, const vlmc_tensor_t *idx,
                                vlmc_tensor_t *out) {
  int64_t row = product(table->shape, 1, table->rank), n = vlmc_tensor_count(idx);
  const int64_t *v = vlmc_tensor_i64(idx);
  float *y = vlmc_tensor_f32(out);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < row; ++c)
      y[i * row + c] = vlmc_ref_load_float(table->data, table->dtype, v[i] * row + c);
}

vlmc_status_t vlmc_ref_eval_EMBEDDING(vlmc_ref_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(check_indices(ctx, ctx->in[1], ctx->in[0]->shape[0], "token id"));
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  const vlmc_tensor_t *table = ctx->in[0];
  if (table->dtype == VLMC_DTYPE_BF16 || table->dtype == VLMC_DTYPE_F16)
    gather_rows_widened(table, ctx->in[1], &ctx->out[0]);
  else
    gather_axis(table, ctx->in[1], 0, &ctx->out[0]);
  return NULL;
}

/* The result is a copy of operand 0's data (its buffer, when this op is its last use). */
static vlmc_status_t result_from_operand(vlmc_ref_ctx_t *ctx, uint32_t operand) {
  vlmc_tensor_t taken;
  if (vlmc_ref_operand_take(ctx, operand, &taken)) {
    int64_t shape[VLMC_IR_MAX_RANK];
    memcpy(shape, ctx->out[0].shape, sizeof shape);
    ctx->out[0] = taken;
    ctx->out[0].rank = ctx->op->results[0].type.rank;
    memcpy(ctx->out[0].shape, shape, sizeof shape);
    return NULL;
  }
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  size_t bytes = (size_t)vlmc_tensor_count(&ctx->out[0]) * elem_size(&ctx->out[0]);
  if (bytes) memcpy(ctx->out[0].data, ctx->in[operand]->data, bytes);
  return NULL;
}

/* Later rows win when positions repeat. */
vlmc_status_t vlmc_ref_eval_SCATTER_ROWS(vlmc_ref_ctx_t *ctx) {
  const vlmc_tensor_t *rows = ctx->in[1], *pos = ctx->in[2];
  int64_t dst_rows = ctx->in[0]->shape[0];
  VLMC_RETURN_IF_ERROR(check_indices(ctx, pos, dst_rows, "position"));
  VLMC_RETURN_IF_ERROR(result_from_operand(ctx, 0));
  int64_t row = product(rows->shape, 1, rows->rank);
  const int64_t *p = vlmc_tensor_i64(pos);
  for (int64_t i = 0; i < rows->shape[0]; ++i)
    memcpy(bytes_at(&ctx->out[0], p[i] * row), bytes_at(rows, i * row),
           (size_t)row * elem_size(rows));
  return NULL;
}

vlmc_status_t vlmc_ref_eval_RESHAPE(vlmc_ref_ctx_t *ctx) {
  return vlmc_ref_result_forward(ctx, 0);
}

vlmc_status_t vlmc_ref_eval_TRANSPOSE(vlmc_ref_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  const vlmc_tensor_t *x = ctx->in[0];
  vlmc_tensor_t *out = &ctx->out[0];
  const int64_t *perm = vlmc_op_attr(ctx->op, "perm")->v.ints.data;
  int64_t in_strides[VLMC_IR_MAX_RANK], src_stride[VLMC_IR_MAX_RANK], index[VLMC_IR_MAX_RANK];
  vlmc_ref_strides(x->shape, x->rank, in_strides);
  for (uint32_t d = 0; d < out->rank; ++d) {
    src_stride[d] = in_strides[perm[d]]; /* output dim d walks input dim perm[d] */
    index[d] = 0;
  }
  size_t es = elem_size(x);
  int64_t n = vlmc_tensor_count(out), src = 0;
  for (int64_t o = 0; o < n; ++o) {
    memcpy(bytes_at(out, o), bytes_at(x, src), es);
    for (uint32_t d = out->rank; d-- > 0;) { /* odometer over the output index */
      src += src_stride[d];
      if (++index[d] < out->shape[d]) break;
      src -= src_stride[d] * out->shape[d];
      index[d] = 0;
    }
  }
  return NULL;
}

vlmc_status_t vlmc_ref_eval_CONCAT(vlmc_ref_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  vlmc_tensor_t *out = &ctx->out[0];
  uint32_t axis = (uint32_t)vlmc_op_attr_int(ctx->op, "axis");
  int64_t outer = product(out->shape, 0, axis), inner = product(out->shape, axis + 1, out->rank);
  int64_t offset = 0; /* elements into the current outer row of the output */
  for (uint32_t i = 0; i < ctx->op->num_operands; ++i) {
    const vlmc_tensor_t *x = ctx->in[i];
    int64_t chunk = x->shape[axis] * inner;
    for (int64_t o = 0; o < outer; ++o)
      memcpy(bytes_at(out, o * out->shape[axis] * inner + offset), bytes_at(x, o * chunk),
             (size_t)chunk * elem_size(x));
    offset += chunk;
  }
  return NULL;
}

/* Resolves a slice bound: negative counts from the end. */
static int64_t slice_bound(int64_t bound, int64_t size) { return bound < 0 ? size + bound : bound; }

vlmc_status_t vlmc_ref_eval_SLICE(vlmc_ref_ctx_t *ctx) {
  const vlmc_tensor_t *x = ctx->in[0];
  uint32_t axis = (uint32_t)vlmc_op_attr_int(ctx->op, "axis");
  int64_t size = x->shape[axis], start_attr = vlmc_op_attr_int(ctx->op, "start");
  const vlmc_attr_t *end_attr = vlmc_op_attr(ctx->op, "end");
  /* INT64_MIN bounds are refused by the shape rule, so the negation cannot overflow. */
  int64_t start = slice_bound(start_attr, size), end = end_attr ? slice_bound(end_attr->v.i, size)
                                                                : size;
  if (start < 0 || start > end || end > size)
    return vlmc_ref_fail(ctx, VLMC_OUT_OF_RANGE,
                         "slice [%lld, %lld) of axis %u does not fit its size %lld",
                         (long long)start, (long long)end, axis, (long long)size);
  assert(ctx->out[0].shape[axis] == end - start);
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  vlmc_tensor_t *out = &ctx->out[0];
  int64_t outer = product(x->shape, 0, axis), inner = product(x->shape, axis + 1, x->rank);
  size_t bytes = (size_t)((end - start) * inner) * elem_size(x);
  for (int64_t o = 0; o < outer; ++o)
    memcpy(bytes_at(out, o * (end - start) * inner), bytes_at(x, (o * size + start) * inner),
           bytes);
  return NULL;
}

/* The index of the first maximum; NaN counts as larger than everything (torch.argmax). */
vlmc_status_t vlmc_ref_eval_ARGMAX(vlmc_ref_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  const vlmc_tensor_t *x = ctx->in[0];
  uint32_t axis = (uint32_t)vlmc_op_attr_int(ctx->op, "axis");
  int64_t outer = product(x->shape, 0, axis), len = x->shape[axis];
  int64_t inner = product(x->shape, axis + 1, x->rank);
  if (len == 0 && outer * inner > 0)
    return vlmc_ref_fail(ctx, VLMC_INVALID_ARGUMENT, "argmax over axis %u, which is empty", axis);
  bool is_float = x->dtype == VLMC_DTYPE_F32;
  int64_t *y = vlmc_tensor_i64(&ctx->out[0]);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0, base = o * len * inner + i;
      for (int64_t k = 1; k < len; ++k) {
        int64_t a = base + k * inner, b = base + best * inner;
        bool better;
        if (is_float) {
          float va = vlmc_tensor_f32(x)[a], vb = vlmc_tensor_f32(x)[b];
          better = !isnan(vb) && (isnan(va) || va > vb);
        } else {
          better = vlmc_tensor_i64(x)[a] > vlmc_tensor_i64(x)[b];
        }
        if (better) best = k;
      }
      y[o * inner + i] = best;
    }
  return NULL;
}

/* ---- kv_cache_append ---- */

/* Capacity for `need` bytes when growing from `have`: at least double, so that appending one
 * row per decode step costs amortised O(row). */
static size_t grown_capacity(size_t have, size_t need, size_t limit) {
  size_t doubled = have > SIZE_MAX / 2 ? SIZE_MAX : 2 * have;
  size_t cap = need > doubled ? need : doubled;
  return limit && cap > limit && need <= limit ? limit : cap;
}

vlmc_status_t vlmc_ref_eval_KV_CACHE_APPEND(vlmc_ref_ctx_t *ctx) {
  const vlmc_tensor_t *rows = ctx->in[1];
  vlmc_tensor_t *out = &ctx->out[0];
  size_t cache_bytes, rows_bytes, need;
  bool ok = vlmc_tensor_byte_size(ctx->in[0]->dtype, ctx->in[0]->rank, ctx->in[0]->shape,
                                  &cache_bytes) &&
            vlmc_tensor_byte_size(rows->dtype, rows->rank, rows->shape, &rows_bytes) &&
            vlmc_add_size(cache_bytes, rows_bytes, &need);
  if (!ok) return vlmc_ref_fail(ctx, VLMC_OUT_OF_RANGE, "the appended cache is too large");
  VLMC_RETURN_IF_ERROR(vlmc_ref_check_bytes(ctx, need));
  size_t limit = ctx->ex->options.max_tensor_bytes;
  vlmc_tensor_t buf;
  if (vlmc_ref_operand_take(ctx, 0, &buf)) {
    if (buf.capacity < need) {
      size_t cap = grown_capacity(buf.capacity, need, limit);
      void *grown = realloc(buf.data, cap);
      if (!grown) {
        vlmc_tensor_release(&buf);
        return vlmc_ref_fail(ctx, VLMC_OUT_OF_MEMORY, "out of memory growing the cache");
      }
      buf.data = grown;
      buf.capacity = cap;
    }
  } else {
    size_t cap = grown_capacity(cache_bytes, need, limit);
    memset(&buf, 0, sizeof buf);
    buf.data = malloc(cap ? cap : 1);
    if (!buf.data) return vlmc_ref_fail(ctx, VLMC_OUT_OF_MEMORY, "out of memory for the cache");
    buf.capacity = cap ? cap : 1;
    buf.owned = true;
    if (cache_bytes) memcpy(buf.data, ctx->in[0]->data, cache_bytes);
  }
  if (rows_bytes) memcpy((char *)buf.data + cache_bytes, rows->data, rows_bytes);
  buf.dtype = out->dtype;
  buf.rank = out->rank;
  memcpy(buf.shape, out->shape, sizeof buf.shape);
  *out = buf;
  return NULL;
}
