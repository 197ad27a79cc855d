/* linear and matmul: f32 operands, products and sums in f64 (a product of two floats is exact
 * in f64), summed in k order, one rounding to f32 at the end; so the result does not depend on
 * the blocking below or on the thread count.
 *
 * Both run one kernel (attention's scores too): up to 4 rows of the left operand against a
 * panel of 64 columns of the right operand laid out k-major (zero-padded), accumulating into
 * 4 x 64 doubles; the inner loop runs along the panel, contiguous, and vectorizes.
 *
 * linear packs its weight [out, in] into such panels (vlmc_ref_packed_t) once per executor
 * when the weight is the same on every call (a static value: a parameter, or computed from
 * parameters), and reads the packed copy from then on; a weight computed at run time is
 * packed for the call. A packed weight keeps bf16 elements when every weight is a bf16 (the
 * usual checkpoint), widened to f32 as the kernel reads them, so the packed copy costs what
 * the checkpoint does and a decode step reads 2 bytes per weight. matmul copies panels of its
 * right operand per call. Work is split over the workers by output panels (so that a one-row
 * decode step is split too), but only when each worker gets enough of it to pay for a thread.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "reference/exec_internal.h"
#include "support/checked_math.h"

enum { ROWS = VLMC_REF_ROWS, PANEL = VLMC_REF_PANEL, MAX_WORKERS = 16 };

typedef vlmc_ref_acc_t acc_t;

/* Where the loader can choose a function version at start-up (ifunc: GCC and clang on x86-64
 * Linux), the kernels are built twice, for AVX2 (four doubles a vector instead of SSE2's two)
 * and for the baseline. Only kernels whose products are exact in f64 get this: there even a
 * fused multiply-add would round the same, so every version gives the same bits. (On the
 * definitions only: GCC cannot resolve a clone from another file.) */
#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define WIDE_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define WIDE_KERNEL
#endif

/* The constant trip counts let the compiler vectorize at -O2; the four rows share each load of
 * a weight. */
WIDE_KERNEL
void vlmc_ref_panel_kernel(const float *x, int64_t xs, int64_t nr, const float *p, int64_t k,
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

static inline float bf16_widen(uint16_t bits) {
  uint32_t wide = (uint32_t)bits << 16;
  float f;
  memcpy(&f, &wide, sizeof f);
  return f;
}

/* The same over a bf16 panel, whose rows are widened to f32 as they are read (exactly). */
WIDE_KERNEL
static void panel_kernel_bf16(const float *x, int64_t xs, int64_t nr, const uint16_t *p,
                              int64_t k, acc_t acc) {
  float w[PANEL];
  for (int64_t r = 0; r < nr; ++r)
    for (int o = 0; o < PANEL; ++o) acc[r][o] = 0;
  for (int64_t j = 0; j < k; ++j) {
    const uint16_t *row = p + j * PANEL;
    for (int o = 0; o < PANEL; ++o) w[o] = bf16_widen(row[o]);
    if (nr == ROWS) {
      double x0 = x[j], x1 = x[xs + j], x2 = x[2 * xs + j], x3 = x[3 * xs + j];
      for (int o = 0; o < PANEL; ++o) {
        double wo = w[o];
        acc[0][o] += x0 * wo;
        acc[1][o] += x1 * wo;
        acc[2][o] += x2 * wo;
        acc[3][o] += x3 * wo;
      }
      continue;
    }
    for (int64_t r = 0; r < nr; ++r) {
      double xr = x[r * xs + j];
      for (int o = 0; o < PANEL; ++o) acc[r][o] += xr * w[o];
    }
  }
}

/* ---- packed weights ---- */

/* Whether the F32 weights are all bf16 numbers (their low 16 bits are zero): bit-exact, so
 * NaN payloads and signed zeros survive too. */
static bool all_bf16(const float *w, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    memcpy(&bits, &w[i], sizeof bits);
    if (bits & 0xffff) return false;
  }
  return true;
}

/* Rows [o0, o0 + width) of w [out, in] into a k-major panel, PANEL wide (zero-padded). */
static void pack_panel(const vlmc_tensor_t *w, int64_t o0, int64_t width, bool bf16, void *dst) {
  int64_t in = w->shape[1];
  for (int64_t o = 0; o < width; ++o) {
    int64_t row = (o0 + o) * in;
    if (bf16 && w->dtype == VLMC_DTYPE_BF16) {
      const uint16_t *src = (const uint16_t *)w->data + row;
      for (int64_t k = 0; k < in; ++k) ((uint16_t *)dst)[k * PANEL + o] = src[k];
    } else if (bf16) { /* all_bf16: the high half is the whole value */
      const float *src = vlmc_tensor_f32(w) + row;
      for (int64_t k = 0; k < in; ++k) {
        uint32_t bits;
        memcpy(&bits, &src[k], sizeof bits);
        ((uint16_t *)dst)[k * PANEL + o] = (uint16_t)(bits >> 16);
      }
    } else {
      for (int64_t k = 0; k < in; ++k)
        ((float *)dst)[k * PANEL + o] = vlmc_ref_load_float(w->data, w->dtype, row + k);
    }
  }
}

/* Packs w [out, in] (F32, BF16 or F16 storage) into ceil(out / PANEL) panels; with try_bf16,
 * into bf16 ones when that is exact. Only the last panel is padded, so the copy is the
 * weight's size plus at most one panel. */
static vlmc_status_t pack_weight(vlmc_ref_ctx_t *ctx, const vlmc_tensor_t *w, bool try_bf16,
                                 vlmc_ref_packed_t *out) {
  int64_t rows = w->shape[0], in = w->shape[1], panels = (rows + PANEL - 1) / PANEL;
  bool bf16 = try_bf16 && (w->dtype == VLMC_DTYPE_BF16 ||
                           (w->dtype == VLMC_DTYPE_F32 &&
                            all_bf16(vlmc_tensor_f32(w), rows * in))); /* the weight exists */
  size_t elem = bf16 ? sizeof(uint16_t) : sizeof(float), bytes;
  memset(out, 0, sizeof *out);
  if (!vlmc_mul_size((size_t)panels * PANEL, (size_t)in, &bytes) ||
      !vlmc_mul_size(bytes, elem, &bytes))
    return vlmc_ref_fail(ctx, VLMC_OUT_OF_RANGE, "the weight is too large to pack");
  out->panels = calloc(bytes ? bytes : 1, 1);
  if (!out->panels) return vlmc_ref_fail(ctx, VLMC_OUT_OF_MEMORY, "out of memory packing a weight");
  out->source = w->data;
  out->source_dtype = w->dtype;
  out->out = rows;
  out->in = in;
  out->dtype = bf16 ? VLMC_DTYPE_BF16 : VLMC_DTYPE_F32;
  for (int64_t p = 0; p < panels; ++p) {
    int64_t o0 = p * PANEL, width = rows - o0 < PANEL ? rows - o0 : PANEL;
    pack_panel(w, o0, width, bf16, (char *)out->panels + (size_t)(p * PANEL * in) * elem);
  }
  return NULL;
}

/* The executor's packed copy of a static weight, made on first use. Static values live as
 * long as the executor (parameters, cached values), so their data pointer names them. */
static vlmc_status_t packed_get(vlmc_ref_ctx_t *ctx, const vlmc_tensor_t *w,
                                const vlmc_ref_packed_t **out) {
  vlmc_executor_t *ex = ctx->ex;
  for (size_t i = 0; i < ex->num_packed; ++i) {
    const vlmc_ref_packed_t *p = &ex->packed[i];
    if (p->source == w->data && p->source_dtype == w->dtype && p->out == w->shape[0] &&
        p->in == w->shape[1]) {
      *out = p;
      return NULL;
    }
  }
  if (ex->num_packed == ex->packed_capacity) {
    size_t cap = ex->packed_capacity ? 2 * ex->packed_capacity : 16;
    vlmc_ref_packed_t *grown = realloc(ex->packed, cap * sizeof *grown);
    if (!grown) return vlmc_ref_fail(ctx, VLMC_OUT_OF_MEMORY, "out of memory");
    ex->packed = grown;
    ex->packed_capacity = cap;
  }
  VLMC_RETURN_IF_ERROR(pack_weight(ctx, w, true, &ex->packed[ex->num_packed]));
  *out = &ex->packed[ex->num_packed++];
  return NULL;
}

/* ---- linear: y[r, o] = sum_k x[r, k] * w[o, k] + b[o] ---- */

typedef struct {
  const float *x, *bias;
  const vlmc_ref_packed_t *w;
  float *y;
  int64_t rows;
} linear_job_t;

static void linear_panels(void *arg, uint32_t worker, int64_t begin, int64_t end) {
  const linear_job_t *j = arg;
  int64_t in = j->w->in, out = j->w->out;
  bool bf16 = j->w->dtype == VLMC_DTYPE_BF16;
  size_t elem = bf16 ? sizeof(uint16_t) : sizeof(float);
  acc_t acc;
  for (int64_t p = begin; p < end; ++p) {
    int64_t o0 = p * PANEL, width = out - o0 < PANEL ? out - o0 : PANEL;
    const void *panel = (const char *)j->w->panels + (size_t)(p * PANEL * in) * elem;
    for (int64_t r = 0; r < j->rows; r += ROWS) {
      int64_t nr = j->rows - r < ROWS ? j->rows - r : ROWS;
      if (bf16) panel_kernel_bf16(j->x + r * in, in, nr, panel, in, acc);
      else vlmc_ref_panel_kernel(j->x + r * in, in, nr, panel, in, acc);
      for (int64_t q = 0; q < nr; ++q)
        for (int64_t o = 0; o < width; ++o)
          j->y[(r + q) * out + o0 + o] =
              (float)(acc[q][o] + (j->bias ? (double)j->bias[o0 + o] : 0.0));
    }
  }
}

vlmc_status_t vlmc_ref_eval_LINEAR(vlmc_ref_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  const vlmc_tensor_t *x = ctx->in[0], *w = ctx->in[1];
  int64_t in = w->shape[1], out = w->shape[0];
  assert(x->shape[x->rank - 1] == in);
  int64_t rows = out ? vlmc_tensor_count(&ctx->out[0]) / out : 0;
  if (rows == 0 || out == 0) return NULL;
  bool is_static = ctx->plan->is_static[ctx->op->operands[1]->id];
  vlmc_ref_packed_t temporary;
  const vlmc_ref_packed_t *packed = &temporary;
  if (is_static) VLMC_RETURN_IF_ERROR(packed_get(ctx, w, &packed));
  else VLMC_RETURN_IF_ERROR(pack_weight(ctx, w, false, &temporary));
  linear_job_t job = {vlmc_tensor_f32(x), NULL, packed, vlmc_tensor_f32(&ctx->out[0]), rows};
  if (ctx->op->num_operands == 3) job.bias = vlmc_tensor_f32(ctx->in[2]);
  int64_t panel_work = rows * in * PANEL; /* x exists: rows * in is far from overflowing */
  vlmc_ref_parallel_rows(ctx->ex, (out + PANEL - 1) / PANEL, vlmc_ref_min_chunk(panel_work),
                         linear_panels, &job);
  if (!is_static) free(temporary.panels);
  return NULL;
}

/* Copies columns [c0, c0 + PANEL) of a k-major [k, n] matrix into a zero-padded panel. */
static void panel_from_k_major(const float *b, int64_t k, int64_t n, int64_t c0, float *panel) {
  int64_t nc = n - c0 < PANEL ? n - c0 : PANEL;
  for (int64_t j = 0; j < k; ++j) {
    memcpy(panel + j * PANEL, b + j * n + c0, (size_t)nc * sizeof(float));
    memset(panel + j * PANEL + nc, 0, (size_t)(PANEL - nc) * sizeof(float));
  }
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
      vlmc_ref_panel_kernel(j->a + (oa * j->m + r) * j->k, j->k, nr, panel, j->k, acc);
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
  if (!st)
    vlmc_ref_parallel_rows(ctx->ex, matrices * j.panels,
                           vlmc_ref_min_chunk(j.m * j.k * PANEL), matmul_panels, &j);
  for (uint32_t i = 0; i < workers; ++i) free(j.panel[i]);
  return st;
}
