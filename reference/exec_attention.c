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
 * Blocking, which changes no bit (every sum keeps its order): the keys of each kv head are
 * packed once per call into panels of 64 for the contraction kernel (exec_contraction.c), and
 * blocks of 4 query rows of a head get their scores from it, 4 x 64 at a time, each an f64
 * dot product in c order. The softmax is per row; the weighted sum of v goes four rows at once
 * (sharing each load of v) when the block's rows see the same keys, else row by row. Threads
 * split the query blocks.
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

enum { MAX_WORKERS = 16, ROWS = VLMC_REF_ROWS, PANEL = VLMC_REF_PANEL };

typedef struct {
  const float *q, *k, *v;
  float *y;
  int64_t s, t, hq, hkv, d, dv;
  double scale;
  bool causal;
  const int64_t *seg_begin, *seg_end; /* per query row, or NULL: all keys */
  /* The keys of each kv head in panels for the contraction kernel: head h, keys
   * [p * PANEL, (p + 1) * PANEL) at (h * key_panels + p) * d * PANEL, k-major, zero-padded. */
  float *key_panels;
  int64_t num_key_panels;             /* per head */
  double *scores[MAX_WORKERS];        /* ROWS x t scores per worker */
  double *acc[MAX_WORKERS];           /* dv sums per worker */
} attention_job_t;

/* The keys query row i may see: [*lo, *hi). */
static void visible_keys(const attention_job_t *j, int64_t i, int64_t *lo, int64_t *hi) {
  *lo = j->seg_begin ? j->seg_begin[i] : 0;
  *hi = j->seg_end ? j->seg_end[i] : j->t;
  if (j->causal && j->t - j->s + i + 1 < *hi) *hi = j->t - j->s + i + 1;
}

static void pack_keys(attention_job_t *j) {
  for (int64_t h = 0; h < j->hkv; ++h)
    for (int64_t p = 0; p < j->num_key_panels; ++p) {
      float *panel = j->key_panels + (h * j->num_key_panels + p) * j->d * PANEL;
      for (int64_t o = 0, t = p * PANEL; o < PANEL; ++o, ++t) {
        const float *key = t < j->t ? j->k + (t * j->hkv + h) * j->d : NULL;
        for (int64_t c = 0; c < j->d; ++c) panel[c * PANEL + o] = key ? key[c] : 0.0f;
      }
    }
}

/* The softmax weights of a row's keys [lo, hi) in place of their scores: exp(score - max) in
 * f64; returns their sum (in t order). */
static double softmax_weights(double *score, int64_t lo, int64_t hi) {
  double max = -INFINITY, sum = 0;
  for (int64_t t = lo; t < hi; ++t) max = fmax(max, score[t]);
  for (int64_t t = lo; t < hi; ++t) {
    score[t] = exp(score[t] - max);
    sum += score[t];
  }
  return sum;
}

/* y[c] = sum_t p[t] * v[t][c] / sum over keys [lo, hi): f64 products and sums in t order. */
static void weighted_values(const attention_job_t *j, int64_t kvh, const double *p, double sum,
                            int64_t lo, int64_t hi, double *acc, float *y) {
  for (int64_t c = 0; c < j->dv; ++c) acc[c] = 0;
  for (int64_t t = lo; t < hi; ++t) {
    const float *v = j->v + (t * j->hkv + kvh) * j->dv;
    for (int64_t c = 0; c < j->dv; ++c) acc[c] += p[t] * v[c];
  }
  for (int64_t c = 0; c < j->dv; ++c) y[c] = (float)(acc[c] / sum);
}

/* The same for ROWS rows that see the same keys, when dv is a multiple of 4: four columns at a
 * time, so that the 4 x 4 sums stay in registers and each load of v serves four rows. The
 * operations are weighted_values' own, so the bits are too. */
static void weighted_values_rows(const attention_job_t *j, int64_t kvh, const double *p,
                                 const double *sum, int64_t lo, int64_t hi, float *y) {
  int64_t vs = j->hkv * j->dv, ys = j->hq * j->dv;
  const float *v = j->v + kvh * j->dv;
  assert(j->dv % 4 == 0);
  for (int64_t c0 = 0; c0 < j->dv; c0 += 4) {
    double a[ROWS][4] = {{0}};
    for (int64_t t = lo; t < hi; ++t) {
      const float *vt = v + t * vs + c0;
      for (int r = 0; r < ROWS; ++r) {
        double pt = p[r * j->t + t];
        for (int c = 0; c < 4; ++c) a[r][c] += pt * vt[c];
      }
    }
    for (int r = 0; r < ROWS; ++r)
      for (int c = 0; c < 4; ++c) y[r * ys + c0 + c] = (float)(a[r][c] / sum[r]);
  }
}

/* Query rows [i0, i0 + nr) of head h: their scores q.k * scale (f64 dot products in c order,
 * by the contraction kernel over the key panels that any of them sees), then each row's
 * softmax and weighted values. */
static void attend_rows(const attention_job_t *j, uint32_t worker, int64_t i0, int64_t nr,
                        int64_t h) {
  int64_t kvh = h / (j->hq / j->hkv), lo[ROWS], hi[ROWS], first = INT64_MAX, last = 0;
  bool same_keys = true;
  for (int64_t r = 0; r < nr; ++r) {
    visible_keys(j, i0 + r, &lo[r], &hi[r]);
    first = lo[r] < first ? lo[r] : first;
    last = hi[r] > last ? hi[r] : last;
    same_keys = same_keys && lo[r] == lo[0] && hi[r] == hi[0];
  }
  double *score = j->scores[worker], sum[ROWS];
  const float *q = j->q + (i0 * j->hq + h) * j->d;
  vlmc_ref_acc_t acc;
  for (int64_t p = first / PANEL; p * PANEL < last; ++p) {
    vlmc_ref_panel_kernel(q, j->hq * j->d, nr,
                          j->key_panels + (kvh * j->num_key_panels + p) * j->d * PANEL, j->d,
                          acc);
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t o = 0, t = p * PANEL; o < PANEL; ++o, ++t)
        if (t >= lo[r] && t < hi[r]) score[r * j->t + t] = acc[r][o] * j->scale;
  }
  for (int64_t r = 0; r < nr; ++r) sum[r] = softmax_weights(score + r * j->t, lo[r], hi[r]);
  float *y = j->y + (i0 * j->hq + h) * j->dv;
  if (same_keys && nr == ROWS && j->dv % 4 == 0) {
    weighted_values_rows(j, kvh, score, sum, first, last, y);
    return;
  }
  for (int64_t r = 0; r < nr; ++r)
    weighted_values(j, kvh, score + r * j->t, sum[r], lo[r], hi[r], j->acc[worker],
                    y + r * j->hq * j->dv);
}

/* Work items are blocks of ROWS query rows, all heads. */
static void attention_rows(void *arg, uint32_t worker, int64_t begin, int64_t end) {
  const attention_job_t *j = arg;
  for (int64_t b = begin; b < end; ++b) {
    int64_t i0 = b * ROWS, nr = j->s - i0 < ROWS ? j->s - i0 : ROWS;
    for (int64_t h = 0; h < j->hq; ++h) attend_rows(j, worker, i0, nr, h);
  }
}

static void free_scratch(attention_job_t *j) {
  free(j->key_panels);
  for (int w = 0; w < MAX_WORKERS; ++w) {
    free(j->scores[w]);
    free(j->acc[w]);
  }
}

static vlmc_status_t alloc_scratch(vlmc_ref_ctx_t *ctx, attention_job_t *j) {
  j->num_key_panels = (j->t + PANEL - 1) / PANEL;
  size_t panel_floats;
  if (!vlmc_mul_size((size_t)(j->hkv * j->num_key_panels * PANEL), (size_t)j->d, &panel_floats))
    return vlmc_ref_fail(ctx, VLMC_OUT_OF_RANGE, "the keys are too many to pack");
  j->key_panels = malloc((panel_floats ? panel_floats : 1) * sizeof(float));
  if (!j->key_panels) return vlmc_ref_fail(ctx, VLMC_OUT_OF_MEMORY, "out of memory");
  uint32_t workers = vlmc_ref_threads(ctx->ex);
  for (uint32_t w = 0; w < workers; ++w) {
    j->scores[w] = malloc((size_t)(j->t ? j->t : 1) * ROWS * sizeof(double));
    j->acc[w] = malloc((size_t)(j->dv ? j->dv : 1) * sizeof(double));
    if (!j->scores[w] || !j->acc[w]) return vlmc_ref_fail(ctx, VLMC_OUT_OF_MEMORY, "out of memory");
  }
  return NULL;
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
  VLMC_RETURN_IF_ERROR(alloc_scratch(ctx, j));
  pack_keys(j);
  int64_t block_work; /* at most, in multiply-adds; saturates for hostile shapes */
  if (!vlmc_mul_i64(ROWS * j->hq, j->t, &block_work) ||
      !vlmc_mul_i64(block_work, j->d + j->dv, &block_work))
    block_work = INT64_MAX;
  vlmc_ref_parallel_rows(ctx->ex, (j->s + ROWS - 1) / ROWS, vlmc_ref_min_chunk(block_work),
                         attention_rows, j);
  return NULL;
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
