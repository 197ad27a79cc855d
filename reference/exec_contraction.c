/* linear and matmul: f32 operands, products and sums in f64 (a product of two floats is exact
 * in f64), summed in k order, one rounding to f32 at the end; so the result does not depend on
 * the blocking below or on the thread count.
 *
 * Both run one kernel: up to 4 rows of the left operand against a panel of 64 columns of the
 * right operand copied k-major into scratch (zero-padded), accumulating into 4 x 64 doubles;
 * the inner loop runs along the panel, contiguous, and vectorizes. linear transposes its weight
 * [out, in] a panel at a time. Work is split over the workers by output panels (so that a
 * one-row decode step is split too). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "reference/exec_internal.h"

enum { ROWS = 4, PANEL = 64, MAX_WORKERS = 16 };

typedef double acc_t[ROWS][PANEL];

/* acc[r][o] = sum_k x[r * xs + k] * p[k * PANEL + o], for r < nr and all PANEL columns (the
 * panel is zero-padded). The constant trip count lets the compiler vectorize at -O2. */
static void panel_kernel(const float *x, int64_t xs, int64_t nr, const float *p, int64_t k,
                         acc_t acc) {
  for (int64_t r = 0; r < nr; ++r)
    for (int o = 0; o < PANEL; ++o) acc[r][o] = 0;
  if (nr == ROWS) {
    for (int64_t j = 0; j < k; ++j) {
      double x0 = x[j], x1 = x[xs + j], x2 = x[2 * xs + j], x3 = x[3 * xs + j];
      const float *row = p + j * PANEL;
      for (int o = 0; o < PANEL; ++o) {
        double w = row[o];
        acc[0][o] += x0 * w;
        acc[1][o] += x1 * w;
        acc[2][o] += x2 * w;
        acc[3][o] += x3 * w;
      }
    }
    return;
  }
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t j = 0; j < k; ++j) {
      double xr = x[r * xs + j];
      const float *row = p + j * PANEL;
      for (int o = 0; o < PANEL; ++o) acc[r][o] += xr * row[o];
    }
}

/* Copies columns [c0, c0 + PANEL) of a k-major [k, n] matrix into a zero-padded panel. */
static void panel_from_k_major(const float *b, int64_t k, int64_t n, int64_t c0, float *panel) {
  int64_t nc = n - c0 < PANEL ? n - c0 : PANEL;
  for (int64_t j = 0; j < k; ++j) {
    memcpy(panel + j * PANEL, b + j * n + c0, (size_t)nc * sizeof(float));
    memset(panel + j * PANEL + nc, 0, (size_t)(PANEL - nc) * sizeof(float));
  }
}

/* Rows [o0, o0 + PANEL) of an [out, in] weight, transposed into a zero-padded panel. */
static void panel_from_rows(const float *w, int64_t in, int64_t out, int64_t o0, float *panel) {
  int64_t no = out - o0 < PANEL ? out - o0 : PANEL;
  memset(panel, 0, (size_t)in * PANEL * sizeof(float));
  for (int64_t o = 0; o < no; ++o)
    for (int64_t k = 0; k < in; ++k) panel[k * PANEL + o] = w[(o0 + o) * in + k];
}

/* ---- linear: y[r, o] = sum_k x[r, k] * w[o, k] + b[o] ---- */

typedef struct {
  const float *x, *w, *bias;
  float *y;
  int64_t rows, in, out;
  float *panel[MAX_WORKERS]; /* in x PANEL, per worker */
} linear_job_t;

static void linear_panels(void *arg, uint32_t worker, int64_t begin, int64_t end) {
  const linear_job_t *j = arg;
  float *panel = j->panel[worker];
  acc_t acc;
  for (int64_t p = begin; p < end; ++p) {
    int64_t o0 = p * PANEL, no = j->out - o0 < PANEL ? j->out - o0 : PANEL;
    panel_from_rows(j->w, j->in, j->out, o0, panel);
    for (int64_t r = 0; r < j->rows; r += ROWS) {
      int64_t nr = j->rows - r < ROWS ? j->rows - r : ROWS;
      panel_kernel(j->x + r * j->in, j->in, nr, panel, j->in, acc);
      for (int64_t q = 0; q < nr; ++q)
        for (int64_t o = 0; o < no; ++o)
          j->y[(r + q) * j->out + o0 + o] =
              (float)(acc[q][o] + (j->bias ? (double)j->bias[o0 + o] : 0.0));
    }
  }
}

vlmc_status_t vlmc_ref_eval_LINEAR(vlmc_ref_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  const vlmc_tensor_t *x = ctx->in[0], *w = ctx->in[1];
  linear_job_t job;
  memset(&job, 0, sizeof job);
  job.x = vlmc_tensor_f32(x);
  job.w = vlmc_tensor_f32(w);
  job.bias = ctx->op->num_operands == 3 ? vlmc_tensor_f32(ctx->in[2]) : NULL;
  job.y = vlmc_tensor_f32(&ctx->out[0]);
  job.in = w->shape[1];
  job.out = w->shape[0];
  assert(x->shape[x->rank - 1] == job.in);
  job.rows = job.out ? vlmc_tensor_count(&ctx->out[0]) / job.out : 0;
  if (job.rows == 0 || job.out == 0) return NULL;
  uint32_t workers = vlmc_ref_threads(ctx->ex);
  vlmc_status_t st = NULL;
  for (uint32_t i = 0; i < workers && !st; ++i) {
    job.panel[i] = malloc((size_t)(job.in ? job.in : 1) * PANEL * sizeof(float));
    if (!job.panel[i]) st = vlmc_ref_fail(ctx, VLMC_OUT_OF_MEMORY, "out of memory");
  }
  if (!st) vlmc_ref_parallel_rows(ctx->ex, (job.out + PANEL - 1) / PANEL, 1, linear_panels, &job);
  for (uint32_t i = 0; i < workers; ++i) free(job.panel[i]);
  return st;
}

/* ---- matmul: [..., M, K] x [..., K, N] -> [..., M, N], batch dims broadcast ---- */

typedef struct {
  const float *a, *b;
  float *y;
  int64_t m, k, n, panels; /* panels per output matrix */
  uint32_t batch_rank;
  int64_t batch_shape[VLMC_IR_MAX_RANK];
  int64_t a_stride[VLMC_IR_MAX_RANK], b_stride[VLMC_IR_MAX_RANK]; /* per batch dim, in matrices */
  float *panel[MAX_WORKERS]; /* k x PANEL, per worker */
} matmul_job_t;

/* Offsets (in matrices) of the two operands for output matrix number `batch`. */
static void matmul_batch_offsets(const matmul_job_t *j, int64_t batch, int64_t *oa, int64_t *ob) {
  *oa = *ob = 0;
  for (uint32_t d = j->batch_rank; d-- > 0;) {
    int64_t i = batch % j->batch_shape[d];
    batch /= j->batch_shape[d];
    *oa += i * j->a_stride[d];
    *ob += i * j->b_stride[d];
  }
}

/* Work items are column panels of one output matrix, all its rows. */
static void matmul_panels(void *arg, uint32_t worker, int64_t begin, int64_t end) {
  const matmul_job_t *j = arg;
  float *panel = j->panel[worker];
  acc_t acc;
  for (int64_t item = begin; item < end; ++item) {
    int64_t batch = item / j->panels, c0 = (item % j->panels) * PANEL, oa, ob;
    int64_t nc = j->n - c0 < PANEL ? j->n - c0 : PANEL;
    matmul_batch_offsets(j, batch, &oa, &ob);
    panel_from_k_major(j->b + ob * j->k * j->n, j->k, j->n, c0, panel);
    for (int64_t r = 0; r < j->m; r += ROWS) {
      int64_t nr = j->m - r < ROWS ? j->m - r : ROWS;
      panel_kernel(j->a + (oa * j->m + r) * j->k, j->k, nr, panel, j->k, acc);
      float *y = j->y + (batch * j->m + r) * j->n + c0;
      for (int64_t q = 0; q < nr; ++q)
        for (int64_t c = 0; c < nc; ++c) y[q * j->n + c] = (float)acc[q][c];
    }
  }
}

/* Batch strides of an operand whose batch dims are right-aligned against the output's. */
static void matmul_batch_strides(const vlmc_tensor_t *t, const vlmc_tensor_t *out,
                                 int64_t *strides) {
  uint32_t out_batch = out->rank - 2, own_batch = t->rank - 2, lead = out_batch - own_batch;
  int64_t s = 1;
  for (uint32_t d = out_batch; d-- > 0;) {
    if (d < lead) {
      strides[d] = 0;
      continue;
    }
    int64_t size = t->shape[d - lead];
    strides[d] = size == 1 ? 0 : s;
    s *= size;
  }
}

vlmc_status_t vlmc_ref_eval_MATMUL(vlmc_ref_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  const vlmc_tensor_t *a = ctx->in[0], *b = ctx->in[1];
  vlmc_tensor_t *out = &ctx->out[0];
  matmul_job_t j;
  memset(&j, 0, sizeof j);
  j.a = vlmc_tensor_f32(a);
  j.b = vlmc_tensor_f32(b);
  j.y = vlmc_tensor_f32(out);
  j.m = a->shape[a->rank - 2];
  j.k = a->shape[a->rank - 1];
  j.n = b->shape[b->rank - 1];
  j.batch_rank = out->rank - 2;
  for (uint32_t d = 0; d < j.batch_rank; ++d) j.batch_shape[d] = out->shape[d];
  matmul_batch_strides(a, out, j.a_stride);
  matmul_batch_strides(b, out, j.b_stride);
  if (j.n == 0 || j.m == 0) return NULL;
  int64_t matrices = vlmc_tensor_count(out) / (j.m * j.n);
  j.panels = (j.n + PANEL - 1) / PANEL;
  uint32_t workers = vlmc_ref_threads(ctx->ex);
  vlmc_status_t st = NULL;
  for (uint32_t i = 0; i < workers && !st; ++i) {
    j.panel[i] = malloc((size_t)(j.k ? j.k : 1) * PANEL * sizeof(float));
    if (!j.panel[i]) st = vlmc_ref_fail(ctx, VLMC_OUT_OF_MEMORY, "out of memory");
  }
  if (!st) vlmc_ref_parallel_rows(ctx->ex, matrices * j.panels, 1, matmul_panels, &j);
  for (uint32_t i = 0; i < workers; ++i) free(j.panel[i]);
  return st;
}
