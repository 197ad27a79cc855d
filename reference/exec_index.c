/* Host index ops: integer functions of the image grid or the token ids, evaluated with the IR's
 * vlmc_index_* functions (the same ones canonicalization folds constants with). Their result
 * lengths depend on the data: each binds its result's symbol, or checks it when bound. */
#include <stdlib.h>
#include <string.h>

#include "reference/exec_internal.h"

/* Moves a malloc'd index array of `count` entries into result 0, of rank 1. */
static vlmc_status_t result_from_indices(vlmc_ref_ctx_t *ctx, int64_t *data, size_t count) {
  vlmc_status_t st = vlmc_ref_result_set_length(ctx, 0, 0, (int64_t)count);
  if (!st) st = vlmc_ref_result_alloc(ctx, 0);
  if (!st && count) memcpy(ctx->out[0].data, data, count * sizeof *data);
  free(data);
  return st;
}

typedef vlmc_status_t (*grid_index_fn)(const int64_t *grid, size_t num_images, int64_t window,
                                       int64_t patch, int64_t merge, int64_t **out_data,
                                       size_t *out_count);

static vlmc_status_t eval_window_index(vlmc_ref_ctx_t *ctx, grid_index_fn fn) {
  const vlmc_tensor_t *grid = ctx->in[0];
  int64_t *data = NULL;
  size_t count = 0;
  VLMC_RETURN_IF_ERROR(vlmc_ref_locate(
      ctx, fn(vlmc_tensor_i64(grid), (size_t)grid->shape[0], vlmc_op_attr_int(ctx->op, "window"),
              vlmc_op_attr_int(ctx->op, "patch"), vlmc_op_attr_int(ctx->op, "merge"), &data,
              &count)));
  return result_from_indices(ctx, data, count);
}

vlmc_status_t vlmc_ref_eval_WINDOW_ORDER(vlmc_ref_ctx_t *ctx) {
  return eval_window_index(ctx, vlmc_index_window_order);
}

vlmc_status_t vlmc_ref_eval_WINDOW_SEGMENTS(vlmc_ref_ctx_t *ctx) {
  return eval_window_index(ctx, vlmc_index_window_segments);
}

vlmc_status_t vlmc_ref_eval_FULL_SEGMENTS(vlmc_ref_ctx_t *ctx) {
  const vlmc_tensor_t *grid = ctx->in[0];
  int64_t *data = NULL;
  size_t count = 0;
  VLMC_RETURN_IF_ERROR(vlmc_ref_locate(
      ctx, vlmc_index_full_segments(vlmc_tensor_i64(grid), (size_t)grid->shape[0], &data, &count)));
  return result_from_indices(ctx, data, count);
}

/* [2, patches]: the rows of every patch, then the columns (spec §3.2). */
vlmc_status_t vlmc_ref_eval_VISION_POSITIONS(vlmc_ref_ctx_t *ctx) {
  const vlmc_tensor_t *grid = ctx->in[0];
  int64_t *data = NULL;
  size_t count = 0;
  VLMC_RETURN_IF_ERROR(vlmc_ref_locate(
      ctx, vlmc_index_vision_positions(vlmc_tensor_i64(grid), (size_t)grid->shape[0],
                                       vlmc_op_attr_int(ctx->op, "merge"), &data, &count)));
  vlmc_status_t st = vlmc_ref_result_set_length(ctx, 0, 1, (int64_t)(count / 2));
  if (!st) st = vlmc_ref_result_alloc(ctx, 0);
  if (!st && count) memcpy(ctx->out[0].data, data, count * sizeof *data);
  free(data);
  return st;
}

/* [4, patches]: the corner rows of the position table, or their weights (Qwen3-VL). */
static vlmc_status_t eval_pos_interp(vlmc_ref_ctx_t *ctx, bool weights) {
  const vlmc_tensor_t *grid = ctx->in[0];
  int64_t *index = NULL;
  float *weight = NULL;
  size_t count = 0;
  VLMC_RETURN_IF_ERROR(vlmc_ref_locate(
      ctx, vlmc_index_pos_interp(vlmc_tensor_i64(grid), (size_t)grid->shape[0],
                                 vlmc_op_attr_int(ctx->op, "side"),
                                 vlmc_op_attr_int(ctx->op, "merge"), weights ? NULL : &index,
                                 weights ? &weight : NULL, &count)));
  vlmc_status_t st = vlmc_ref_result_set_length(ctx, 0, 1, (int64_t)(count / 4));
  if (!st) st = vlmc_ref_result_alloc(ctx, 0);
  if (!st && count) {
    if (weights) memcpy(ctx->out[0].data, weight, count * sizeof *weight);
    else memcpy(ctx->out[0].data, index, count * sizeof *index);
  }
  free(index);
  free(weight);
  return st;
}

vlmc_status_t vlmc_ref_eval_POS_INTERP_INDEX(vlmc_ref_ctx_t *ctx) {
  return eval_pos_interp(ctx, false);
}

vlmc_status_t vlmc_ref_eval_POS_INTERP_WEIGHT(vlmc_ref_ctx_t *ctx) {
  return eval_pos_interp(ctx, true);
}

/* The positions i (ascending) where ids[i] == token: where scatter_rows puts image rows. */
vlmc_status_t vlmc_ref_eval_TOKEN_POSITIONS(vlmc_ref_ctx_t *ctx) {
  const vlmc_tensor_t *ids = ctx->in[0];
  int64_t token = vlmc_op_attr_int(ctx->op, "token"), n = ids->shape[0];
  int64_t *data = malloc((size_t)(n ? n : 1) * sizeof *data);
  if (!data) return vlmc_ref_fail(ctx, VLMC_OUT_OF_MEMORY, "out of memory");
  size_t count = 0;
  for (int64_t i = 0; i < n; ++i)
    if (vlmc_tensor_i64(ids)[i] == token) data[count++] = i;
  return result_from_indices(ctx, data, count);
}

vlmc_status_t vlmc_ref_eval_INVERSE_PERMUTATION(vlmc_ref_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  const vlmc_tensor_t *perm = ctx->in[0];
  return vlmc_ref_locate(ctx, vlmc_index_inverse_permutation(
      vlmc_tensor_i64(perm), (size_t)perm->shape[0], vlmc_tensor_i64(&ctx->out[0])));
}
