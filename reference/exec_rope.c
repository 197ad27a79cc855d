/* rope(x [T, H, Dh], positions [planes, T] (or [T] for plain)) -> [T, H, Dh].
 *
 * NeoX "rotate half": with R = rotary_dim (default Dh) and half = R / 2, dims j and j + half
 * (j < half) rotate by angle[j]; dims from R on pass through unchanged:
 *   y[j] = x[j] cos - x[j + half] sin,   y[j + half] = x[j + half] cos + x[j] sin.
 * angle[j] = pos[plane[j]][t] * inv_freq[j], all in f32 as transformers computes it
 * (inv_freq = 1 / theta^(e) with the exponent e an f32 quotient, the product in f32, cos and
 * sin of the f32 angle), and the rotation too is f32 arithmetic.
 *   plain, mrope_*:  inv_freq[j] = theta^-(2j / R)                       (spec §4.3)
 *   vision_2d:       inv_freq[j] = theta^-(2 (j mod half/2) / half)      (spec §3.2: each of
 *                    the row and col planes gets the frequencies of a rotary of width half)
 * plane[j] is the `planes` attribute when present (the mrope-layout pass fills it in), else
 * the layout's own rule: plain 0; mrope_sectioned [16,24,24]: 16 slots of 0, 24 of 1, 24 of 2;
 * mrope_interleaved [24,20,20] (Qwen3-VL): 1 where j mod 3 = 1 and j < 3*20, 2 where
 * j mod 3 = 2 and j < 3*20, else 0; vision_2d: 0 for j < half/2, 1 after. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/exec_internal.h"
#include "reference/rope_tables.h"

typedef struct {
  const float *x;
  float *y;
  const int64_t *pos; /* [planes, tokens] */
  const int64_t *plane;
  const float *inv_freq;
  int64_t tokens, heads, head_dim, half;
  float *cos_sin; /* 2 * half scratch */
} rope_job_t;

static void rope_token(const rope_job_t *j, int64_t t) {
  float *c = j->cos_sin, *s = j->cos_sin + j->half;
  for (int64_t i = 0; i < j->half; ++i) {
    float angle = (float)j->pos[j->plane[i] * j->tokens + t] * j->inv_freq[i];
    c[i] = (float)cos(angle);
    s[i] = (float)sin(angle);
  }
  for (int64_t h = 0; h < j->heads; ++h) {
    const float *x = j->x + (t * j->heads + h) * j->head_dim;
    float *y = j->y + (t * j->heads + h) * j->head_dim;
    for (int64_t i = 0; i < j->half; ++i) {
      /* Separate statements: each product rounds to f32 before the sum, as in torch. */
      float x1c = x[i] * c[i], x2s = x[i + j->half] * s[i];
      float x2c = x[i + j->half] * c[i], x1s = x[i] * s[i];
      y[i] = x1c - x2s;
      y[i + j->half] = x2c + x1s;
    }
    for (int64_t i = 2 * j->half; i < j->head_dim; ++i) y[i] = x[i];
  }
}

vlmc_status_t vlmc_ref_eval_ROPE(vlmc_ref_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  const vlmc_tensor_t *x = ctx->in[0];
  const char *layout = vlmc_op_attr_enum(ctx->op, "layout");
  const vlmc_attr_t *rotary_attr = vlmc_op_attr(ctx->op, "rotary_dim");
  int64_t rotary = rotary_attr ? rotary_attr->v.i : x->shape[2];
  if (rotary > x->shape[2] || rotary <= 0 || rotary % 2 != 0)
    return vlmc_ref_fail(ctx, VLMC_INVALID_ARGUMENT, "rotary_dim %lld does not fit head dim %lld",
                         (long long)rotary, (long long)x->shape[2]);
  rope_job_t j = {vlmc_tensor_f32(x), vlmc_tensor_f32(&ctx->out[0]), vlmc_tensor_i64(ctx->in[1]),
                  NULL, NULL, x->shape[0], x->shape[1], x->shape[2], rotary / 2, NULL};
  int64_t *plane = malloc((size_t)j.half * sizeof *plane);
  float *inv_freq = malloc((size_t)j.half * sizeof *inv_freq);
  float *cos_sin = malloc((size_t)j.half * 2 * sizeof *cos_sin);
  vlmc_status_t st = NULL;
  if (!plane || !inv_freq || !cos_sin) st = vlmc_ref_fail(ctx, VLMC_OUT_OF_MEMORY, "out of memory");
  if (!st) st = vlmc_ref_locate(ctx, vlmc_rope_plane_table(ctx->op, layout, j.half, plane));
  if (!st) {
    vlmc_rope_frequency_table(layout, vlmc_op_attr_float(ctx->op, "theta"), rotary, inv_freq);
    j.plane = plane;
    j.inv_freq = inv_freq;
    j.cos_sin = cos_sin;
    for (int64_t t = 0; t < j.tokens; ++t) rope_token(&j, t);
  }
  free(plane);
  free(inv_freq);
  free(cos_sin);
  return st;
}
