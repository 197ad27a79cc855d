/* attention and window_attention.
 *
 * attention(q [S, Hq, D], k [T, Hkv, D], v [T, Hkv, Dv] [, cu_seqlens [K]]) -> [S, Hq, Dv]:
 * query head h reads kv head h / (Hq / Hkv) (GQA); scores q.k * scale (default 1/sqrt(D)),
 * dot products and the softmax (max subtracted) in f64, the weighted sum of v in f64.
 *   - cu_seqlens (S == T): block-diagonal, query i attends only the keys of its segment
 *     [cu[s], cu[s+1]); cu must start at 0, not decrease and end at S.
 *   - causal: query i sits at absolute position T - S + i and attends keys j <= T - S + i.
 * Both may apply together. A query that can see no key is an error (HF would give NaN).
 *
 * window_attention(q, k, v [P, H, D], grid [N, 3]) evaluates what the window-reorder pass
 * lowers it to: gather the patches into window order (merged tokens by window_order, their
 * merge^2 patches kept together), segmented attention over window_segments, and the result
 * scattered back to patch order. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/exec_internal.h"
#include "support/checked_math.h"

enum { MAX_WORKERS = 16 };

typedef struct {
  const float *q, *k, *v;
  float *y;
  int64_t s, t, hq, hkv, d, dv;
  double scale;
  bool causal;
  const int64_t *seg_begin, *seg_end; /* per query row, or NULL: all keys */
  double *scores[MAX_WORKERS];        /* t scores per worker */
  double *acc[MAX_WORKERS];           /* dv sums per worker */
} attention_job_t;

/* The keys query row i may see: [*lo, *hi). */
static void visible_keys(const attention_job_t *j, int64_t i, int64_t *lo, int64_t *hi) {
  *lo = j->seg_begin ? j->seg_begin[i] : 0;
  *hi = j->seg_end ? j->seg_end[i] : j->t;
  if (j->causal && j->t - j->s + i + 1 < *hi) *hi = j->t - j->s + i + 1;
}

static void attend_one(const attention_job_t *j, uint32_t worker, int64_t i, int64_t h) {
  int64_t kvh = h / (j->hq / j->hkv), lo, hi;
  visible_keys(j, i, &lo, &hi);
  const float *q = j->q + (i * j->hq + h) * j->d;
  double *score = j->scores[worker], *acc = j->acc[worker], max = -INFINITY, sum = 0;
  int64_t t = lo, stride = j->hkv * j->d;
  for (; t + 4 <= hi; t += 4) { /* four keys at once: independent sums, each in c order */
    const float *k0 = j->k + (t * j->hkv + kvh) * j->d, *k1 = k0 + stride, *k2 = k1 + stride;
    const float *k3 = k2 + stride;
    double d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    for (int64_t c = 0; c < j->d; ++c) {
      double qc = q[c];
      d0 += qc * k0[c];
      d1 += qc * k1[c];
      d2 += qc * k2[c];
      d3 += qc * k3[c];
    }
    score[t] = d0 * j->scale;
    score[t + 1] = d1 * j->scale;
    score[t + 2] = d2 * j->scale;
    score[t + 3] = d3 * j->scale;
  }
  for (; t < hi; ++t) {
    const float *k = j->k + (t * j->hkv + kvh) * j->d;
    double dot = 0;
    for (int64_t c = 0; c < j->d; ++c) dot += (double)q[c] * k[c];
    score[t] = dot * j->scale;
  }
  for (t = lo; t < hi; ++t) max = fmax(max, score[t]);
  for (int64_t c = 0; c < j->dv; ++c) acc[c] = 0;
  for (t = lo; t < hi; ++t) {
    double p = exp(score[t] - max);
    const float *v = j->v + (t * j->hkv + kvh) * j->dv;
    sum += p;
    for (int64_t c = 0; c < j->dv; ++c) acc[c] += p * v[c];
  }
  float *y = j->y + (i * j->hq + h) * j->dv;
  for (int64_t c = 0; c < j->dv; ++c) y[c] = (float)(acc[c] / sum);
}

static void attention_rows(void *arg, uint32_t worker, int64_t begin, int64_t end) {
  const attention_job_t *j = arg;
  for (int64_t i = begin; i < end; ++i)
    for (int64_t h = 0; h < j->hq; ++h) attend_one(j, worker, i, h);
}

static void free_scratch(attention_job_t *j) {
  for (int w = 0; w < MAX_WORKERS; ++w) {
    free(j->scores[w]);
    free(j->acc[w]);
  }
}

/* Checks that every query sees at least one key, then runs the rows. */
static vlmc_status_t attention_run(vlmc_ref_ctx_t *ctx, attention_job_t *j) {
  for (int64_t i = 0; i < j->s; ++i) {
    int64_t lo, hi;
    visible_keys(j, i, &lo, &hi);
    if (lo >= hi)
      return vlmc_ref_fail(ctx, VLMC_INVALID_ARGUMENT,
                           "query %lld of %lld sees no key (%lld keys%s)", (long long)i,
                           (long long)j->s, (long long)j->t,
                           j->causal ? ", causal: query i sits at position T - S + i" : "");
  }
  if (j->s == 0 || j->hq == 0) return NULL;
  uint32_t workers = vlmc_ref_threads(ctx->ex);
  vlmc_status_t st = NULL;
  for (uint32_t w = 0; w < workers && !st; ++w) {
    j->scores[w] = malloc((size_t)(j->t ? j->t : 1) * sizeof(double));
    j->acc[w] = malloc((size_t)(j->dv ? j->dv : 1) * sizeof(double));
    if (!j->scores[w] || !j->acc[w]) st = vlmc_ref_fail(ctx, VLMC_OUT_OF_MEMORY, "out of memory");
  }
  if (!st) vlmc_ref_parallel_rows(ctx->ex, j->s, 1, attention_rows, j);
  return st;
}

static void job_init(vlmc_ref_ctx_t *ctx, attention_job_t *j) {
  memset(j, 0, sizeof *j);
  const vlmc_tensor_t *q = ctx->in[0], *k = ctx->in[1], *v = ctx->in[2];
  j->s = q->shape[0];
  j->hq = q->shape[1];
  j->d = q->shape[2];
  j->t = k->shape[0];
  j->hkv = k->shape[1];
  j->dv = v->shape[2];
  assert(j->hkv > 0 ? j->hq % j->hkv == 0 : j->hq == 0);
  if (j->hkv == 0) j->hkv = 1; /* no heads: nothing is computed */
  const vlmc_attr_t *scale = vlmc_op_attr(ctx->op, "scale");
  j->scale = scale ? scale->v.f : 1.0 / sqrt((double)(j->d ? j->d : 1));
}

/* Per-row segment bounds from cu_seqlens, after checking it. */
static vlmc_status_t segments_from_cu(vlmc_ref_ctx_t *ctx, const int64_t *cu, int64_t count,
                                      int64_t rows, int64_t **out_begin, int64_t **out_end) {
  bool ok = count >= 1 && cu[0] == 0 && cu[count - 1] == rows;
  for (int64_t i = 1; ok && i < count; ++i) ok = cu[i] >= cu[i - 1];
  if (!ok)
    return vlmc_ref_fail(ctx, VLMC_INVALID_ARGUMENT,
                         "cu_seqlens must start at 0, never decrease and end at %lld (the "
                         "sequence length); got %lld entries from %lld to %lld", (long long)rows,
                         (long long)count, (long long)(count ? cu[0] : 0),
                         (long long)(count ? cu[count - 1] : 0));
  int64_t *begin = malloc((size_t)(rows ? rows : 1) * sizeof *begin);
  int64_t *end = malloc((size_t)(rows ? rows : 1) * sizeof *end);
  if (!begin || !end) {
    free(begin);
    free(end);
    return vlmc_ref_fail(ctx, VLMC_OUT_OF_MEMORY, "out of memory");
  }
  for (int64_t s = 0; s + 1 < count; ++s)
    for (int64_t i = cu[s]; i < cu[s + 1]; ++i) {
      begin[i] = cu[s];
      end[i] = cu[s + 1];
    }
  *out_begin = begin;
  *out_end = end;
  return NULL;
}

vlmc_status_t vlmc_ref_eval_ATTENTION(vlmc_ref_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  attention_job_t j;
  job_init(ctx, &j);
  j.q = vlmc_tensor_f32(ctx->in[0]);
  j.k = vlmc_tensor_f32(ctx->in[1]);
  j.v = vlmc_tensor_f32(ctx->in[2]);
  j.y = vlmc_tensor_f32(&ctx->out[0]);
  const vlmc_attr_t *causal = vlmc_op_attr(ctx->op, "causal");
  j.causal = causal && causal->v.b;
  int64_t *begin = NULL, *end = NULL;
  if (ctx->op->num_operands == 4) {
    const vlmc_tensor_t *cu = ctx->in[3];
    VLMC_RETURN_IF_ERROR(segments_from_cu(ctx, vlmc_tensor_i64(cu), cu->shape[0], j.s, &begin,
                                          &end));
  }
  j.seg_begin = begin;
  j.seg_end = end;
  vlmc_status_t st = attention_run(ctx, &j);
  free_scratch(&j);
  free(begin);
  free(end);
  return st;
}

/* ---- window_attention ---- */

typedef struct {
  int64_t *order, *cu; /* merged-token window order; segments in patches */
  size_t order_count, cu_count;
  int64_t *perm;       /* patch at window position i */
  float *q, *k, *v, *y;
} window_state_t;

static void window_state_free(window_state_t *w) {
  free(w->order);
  free(w->cu);
  free(w->perm);
  free(w->q);
  free(w->k);
  free(w->v);
  free(w->y);
}

/* Rows perm[i] of src ([P, row] floats) into dst. */
static void gather_rows(const float *src, const int64_t *perm, int64_t rows, int64_t row,
                        float *dst) {
  for (int64_t i = 0; i < rows; ++i) memcpy(dst + i * row, src + perm[i] * row, (size_t)row * 4);
}

static vlmc_status_t window_plan(vlmc_ref_ctx_t *ctx, int64_t patches, window_state_t *w) {
  const vlmc_tensor_t *grid = ctx->in[3];
  int64_t window = vlmc_op_attr_int(ctx->op, "window"), patch = vlmc_op_attr_int(ctx->op, "patch");
  int64_t merge = vlmc_op_attr_int(ctx->op, "merge");
  size_t images = (size_t)grid->shape[0];
  VLMC_RETURN_IF_ERROR(vlmc_ref_locate(ctx, vlmc_index_window_order(
      vlmc_tensor_i64(grid), images, window, patch, merge, &w->order, &w->order_count)));
  VLMC_RETURN_IF_ERROR(vlmc_ref_locate(ctx, vlmc_index_window_segments(
      vlmc_tensor_i64(grid), images, window, patch, merge, &w->cu, &w->cu_count)));
  int64_t unit = merge * merge, total; /* merge < 2^31 (shape rule): no overflow */
  if (!vlmc_mul_i64((int64_t)w->order_count, unit, &total) || total != patches)
    return vlmc_ref_fail(ctx, VLMC_INVALID_ARGUMENT,
                         "the grid has %lld merged tokens of %lld patches, but q has %lld rows",
                         (long long)w->order_count, (long long)unit, (long long)patches);
  w->perm = malloc((size_t)(patches ? patches : 1) * sizeof *w->perm);
  if (!w->perm) return vlmc_ref_fail(ctx, VLMC_OUT_OF_MEMORY, "out of memory");
  for (size_t j = 0; j < w->order_count; ++j)
    for (int64_t r = 0; r < unit; ++r) w->perm[(int64_t)j * unit + r] = w->order[j] * unit + r;
  return NULL;
}

vlmc_status_t vlmc_ref_eval_WINDOW_ATTENTION(vlmc_ref_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  attention_job_t j;
  job_init(ctx, &j);
  window_state_t w;
  memset(&w, 0, sizeof w);
  int64_t *begin = NULL, *end = NULL;
  vlmc_status_t st = window_plan(ctx, j.s, &w);
  size_t n = (size_t)(j.s ? j.s : 1);
  if (!st) {
    w.q = malloc(n * (size_t)(j.hq * j.d + 1) * sizeof(float));
    w.k = malloc(n * (size_t)(j.hkv * j.d + 1) * sizeof(float));
    w.v = malloc(n * (size_t)(j.hkv * j.dv + 1) * sizeof(float));
    w.y = malloc(n * (size_t)(j.hq * j.dv + 1) * sizeof(float));
    if (!w.q || !w.k || !w.v || !w.y) st = vlmc_ref_fail(ctx, VLMC_OUT_OF_MEMORY, "out of memory");
  }
  if (!st) st = segments_from_cu(ctx, w.cu, (int64_t)w.cu_count, j.s, &begin, &end);
  if (!st) {
    gather_rows(vlmc_tensor_f32(ctx->in[0]), w.perm, j.s, j.hq * j.d, w.q);
    gather_rows(vlmc_tensor_f32(ctx->in[1]), w.perm, j.s, j.hkv * j.d, w.k);
    gather_rows(vlmc_tensor_f32(ctx->in[2]), w.perm, j.s, j.hkv * j.dv, w.v);
    j.q = w.q;
    j.k = w.k;
    j.v = w.v;
    j.y = w.y;
    j.seg_begin = begin;
    j.seg_end = end;
    st = attention_run(ctx, &j);
  }
  if (!st) {
    float *y = vlmc_tensor_f32(&ctx->out[0]);
    int64_t row = j.hq * j.dv;
    for (int64_t i = 0; i < j.s; ++i)
      memcpy(y + w.perm[i] * row, w.y + i * row, (size_t)row * sizeof(float));
  }
  free_scratch(&j);
  free(begin);
  free(end);
  window_state_free(&w);
  return st;
}
