/* rms_norm, layer_norm and softmax on the GPU: one work unit (a row: every dim but the
 * normalised one) per workgroup of NORM_THREADS invocations. Each invocation takes the row's
 * elements tid, tid + NORM_THREADS, ... (coalesced across the workgroup), reduces them in f32
 * into one partial, then the workgroup combines the partials in two levels: a subgroup
 * reduction (gpu.subgroup_reduce), one partial per subgroup into workgroup memory, a barrier,
 * and every invocation sums the NumSubgroups partials (so each has the row statistic). That
 * holds for any subgroup size (lavapipe 8, NVIDIA 32): nothing assumes which invocations form
 * a subgroup, and the partial array has a slot per invocation, enough for subgroups of one.
 * Then one pass computes each output element and stores it through the epilogue.
 *
 * The statistic 1 / sqrt(mean + eps) is computed in f32 (the cpu kernel does it in f64;
 * shaderFloat64 is not a feature the target asks for): a few ulp, far below the tolerance.
 * layer_norm takes two passes (the mean, then squared deviations from it): no cancellation.
 * softmax runs along any axis (elements `inner` apart when the axis is not the last real one),
 * max first, then the sum of exp(x - max), then exp(x - max) / sum as the reference divides.
 * Subgroup operations and barriers only ever sit under workgroup-uniform control flow: the
 * loop over the group's rows and the loops over a row's elements per invocation (whose trip
 * counts differ, but contain no subgroup operation). */
#include <math.h>

#include "codegen/targets/vulkan/kernels.h"

enum {
  NORM_THREADS = 128,
  MAX_CACHED = 16, /* a static row of at most 16 * 128 elements stays in registers */
};

/* What a reduction adds up (or takes the maximum of) per element. */
typedef enum {
  SUM_X,          /* x */
  SUM_SQUARES,    /* x * x */
  SUM_DEVIATIONS, /* (x - center)^2 */
  MAX_X,          /* max x */
  SUM_EXP,        /* exp(x - center) */
} reduce_kind_t;

/* One row of x: `len` elements `stride` apart from a base flat index. */
typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *x;
  int len;         /* index SSA */
  int stride;      /* index SSA, or -1: contiguous */
  int tid;         /* this invocation's index in the workgroup */
  /* A static row of at most MAX_CACHED * NORM_THREADS elements is read once, its loads issued
   * together (a rolled loop waits on each: 11 us a decode step's 2048-wide rms_norm on the
   * H200), and kept in registers for the output pass: cached elements per invocation (0:
   * none), their values, columns and whether they lie in the row (-1: always). */
  int64_t cached;
  int xs[MAX_CACHED], cols[MAX_CACHED], in_row[MAX_CACHED];
} row_t;

/* The per-row values the output pass uses. */
typedef struct {
  const vlmc_value_t *w, *b; /* weight and bias (NULL when absent) */
  int a;                     /* rms/layer: 1 / sqrt(var + eps); softmax: the sum of exps */
  int c;                     /* layer: the mean; softmax: the max */
} row_stats_t;

typedef int (*row_value_fn)(const row_t *R, const row_stats_t *s, int x, int col);

/* Flat index of element k of the row at `base`. */
static int row_at(const row_t *R, int base, int k) {
  if (R->stride < 0) return vlmc_kernel_emit_index_op(R->e, "arith.addi", base, k);
  return vlmc_kernel_emit_index_op(R->e, "arith.addi", base,
                                   vlmc_kernel_emit_index_op(R->e, "arith.muli", k, R->stride));
}

static int reduce_term(vlmc_kernel_emit_t *e, reduce_kind_t kind, int x, int center) {
  switch (kind) {
    case SUM_SQUARES: return vlmc_kernel_emit_float_op(e, "arith.mulf", x, x, 0);
    case SUM_DEVIATIONS: {
      int d = vlmc_kernel_emit_float_op(e, "arith.subf", x, center, 0);
      return vlmc_kernel_emit_float_op(e, "arith.mulf", d, d, 0);
    }
    case SUM_EXP:
      return vlmc_kernel_emit_float_unary(e, "math.exp",
                                          vlmc_kernel_emit_float_op(e, "arith.subf", x, center, 0), 0);
    default: return x;
  }
}

/* Reads this invocation's elements of the row at `base` into R's registers (R->cached > 0). */
static void cache_row(row_t *R, int base, int64_t len) {
  vlmc_kernel_emit_t *e = R->e;
  for (int64_t i = 0; i < R->cached; ++i) {
    int col = vlmc_kernel_emit_index_op(e, "arith.addi", R->tid, vlmc_kernel_emit_index(e, i * NORM_THREADS));
    R->in_row[i] = -1;
    R->cols[i] = col;
    if ((i + 1) * NORM_THREADS > len) { /* the last block: clamp into the row */
      R->in_row[i] = vlmc_vk_emit_cmp(e, "slt", col, vlmc_kernel_emit_index(e, len));
      R->cols[i] = vlmc_vk_emit_select(e, R->in_row[i], col, vlmc_kernel_emit_index(e, 0), "index");
    }
    R->xs[i] = vlmc_kernel_emit_load(e, R->x, row_at(R, base, R->cols[i]));
  }
}

/* The row's sum (or max) of the kind's term, the same value in every invocation. */
static int reduce_row(const row_t *R, reduce_kind_t kind, int base, int center) {
  vlmc_kernel_emit_t *e = R->e;
  bool max = kind == MAX_X;
  int init = vlmc_kernel_emit_f32(e, max ? -INFINITY : 0.0);
  if (R->cached) {
    int partial = init;
    for (int64_t i = 0; i < R->cached; ++i) {
      int term = reduce_term(e, kind, R->xs[i], center);
      if (R->in_row[i] >= 0) term = vlmc_vk_emit_select(e, R->in_row[i], term, init, "f32");
      partial = vlmc_kernel_emit_float_op(e, max ? "arith.maximumf" : "arith.addf", partial, term, 0);
    }
    return vlmc_vk_emit_workgroup_reduce(e, max ? "arith.maximumf" : "arith.addf",
                                         max ? "maximumf" : "add", "f32", partial, init);
  }
  int result = vlmc_kernel_emit_fresh(e), k = vlmc_kernel_emit_fresh(e), a = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA
                        " iter_args(" VLMC_SSA " = " VLMC_SSA ") -> (f32) {",
                        result, k, R->tid, R->len, vlmc_kernel_emit_index(e, NORM_THREADS), a, init);
  int x = vlmc_kernel_emit_load(e, R->x, row_at(R, base, k));
  int next = vlmc_kernel_emit_float_op(e, max ? "arith.maximumf" : "arith.addf", a,
                                       reduce_term(e, kind, x, center), 0);
  vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA " : f32", next);
  vlmc_kernel_emit_line(e, "}");
  /* An invocation past the row's end ran no iteration: MLIR 19's SPIR-V lowering would then
   * hand back an undefined value instead of `init` (MLIR_GPU.md, pitfall 4). */
  int partial = vlmc_vk_emit_guard_empty(e, R->tid, R->len, result, init, "f32");
  return vlmc_vk_emit_workgroup_reduce(e, max ? "arith.maximumf" : "arith.addf",
                                       max ? "maximumf" : "add", "f32", partial, init);
}

/* The output pass over the row at `base`: value(x, column) for this invocation's elements. */
static void output_row(const row_t *R, const row_stats_t *s, int base, row_value_fn value) {
  vlmc_kernel_emit_t *e = R->e;
  if (R->cached) {
    int y[MAX_CACHED];
    for (int64_t i = 0; i < R->cached; ++i) y[i] = value(R, s, R->xs[i], R->cols[i]);
    for (int64_t i = 0; i < R->cached; ++i) {
      if (R->in_row[i] >= 0) vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", R->in_row[i]);
      vlmc_kernel_emit_finish_element(e, y[i], row_at(R, base, R->cols[i]));
      if (R->in_row[i] >= 0) vlmc_kernel_emit_line(e, "}");
    }
    return;
  }
  int k = vlmc_kernel_emit_for(e, R->tid, R->len, vlmc_kernel_emit_index(e, NORM_THREADS));
  int at = row_at(R, base, k);
  vlmc_kernel_emit_finish_element(e, value(R, s, vlmc_kernel_emit_load(e, R->x, at), k), at);
  vlmc_kernel_emit_line(e, "}");
}

/* An index value as f32 (a row length that may be symbolic; index is i32 on the device). */
static int index_to_f32(vlmc_kernel_emit_t *e, int index) {
  int i = vlmc_kernel_emit_fresh(e), f = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : index to i32", i, index);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.sitofp " VLMC_SSA " : i32 to f32", f, i);
  return f;
}

/* 1 / sqrt(sum / len + eps), in f32. */
static int inverse_std(vlmc_kernel_emit_t *e, int sum, int len_f32, int eps) {
  int mean = vlmc_kernel_emit_float_op(e, "arith.divf", sum, len_f32, 0);
  int root = vlmc_kernel_emit_float_unary(e, "math.sqrt",
                                          vlmc_kernel_emit_float_op(e, "arith.addf", mean, eps, 0), 0);
  return vlmc_kernel_emit_float_op(e, "arith.divf", vlmc_kernel_emit_f32(e, 1.0), root, 0);
}

/* ---- a norm prologue's statistic (kernel_emit.h, "Norm prologues") ---- */

enum { PROLOGUE_UNROLL = 8 }; /* loads issued together per step of the sum */

void vlmc_vk_emit_norm_prologue_scale(vlmc_kernel_emit_t *e, const vlmc_op_t *norm, int tid,
                                      int64_t threads) {
  const vlmc_type_t *t = &norm->results[0].type;
  int64_t len = t->dims[t->rank - 1].off; /* one static row (ir/dispatch.h) */
  int zero = vlmc_kernel_emit_f32(e, 0), k0, inner, next, sum;
  int end = vlmc_kernel_emit_index(e, len);
  int step = vlmc_kernel_emit_index(e, threads * PROLOGUE_UNROLL);
  int loop = vlmc_vk_emit_open_f32_loop(e, vlmc_kernel_emit_index(e, 0), end, step, 1, &zero, &k0, &inner);
  int first = vlmc_kernel_emit_index_op(e, "arith.addi", k0, tid), x[PROLOGUE_UNROLL], ok[PROLOGUE_UNROLL];
  for (int u = 0; u < PROLOGUE_UNROLL; ++u) {
    int col = vlmc_kernel_emit_index_op(e, "arith.addi", first, vlmc_kernel_emit_index(e, u * threads));
    ok[u] = vlmc_vk_emit_cmp(e, "slt", col, end);
    x[u] = vlmc_kernel_emit_load(e, norm->operands[0], vlmc_vk_emit_select(e, ok[u], col, vlmc_kernel_emit_index(e, 0), "index"));
  }
  next = inner;
  for (int u = 0; u < PROLOGUE_UNROLL; ++u) {
    int square = vlmc_kernel_emit_float_op(e, "arith.mulf", x[u], x[u], 0);
    next = vlmc_kernel_emit_float_op(e, "arith.addf", next, vlmc_vk_emit_select(e, ok[u], square, zero, "f32"), 0);
  }
  vlmc_vk_emit_close_f32_loop(e, loop, 1, &next, &sum); /* len >= 1: never zero trips */
  vlmc_kernel_emit_set_norm_scale(e, norm, vlmc_vk_emit_norm_scale(e, norm, sum, threads));
}

int vlmc_vk_emit_norm_scale(vlmc_kernel_emit_t *e, const vlmc_op_t *norm, int partial, int64_t threads) {
  const vlmc_type_t *t = &norm->results[0].type;
  int64_t len = t->dims[t->rank - 1].off;
  int sum = partial;
  if (threads > 1)
    sum = vlmc_vk_emit_workgroup_reduce(e, "arith.addf", "add", "f32", partial, vlmc_kernel_emit_f32(e, 0));
  int eps = vlmc_kernel_emit_f32(e, vlmc_op_attr_float(norm, "eps"));
  return inverse_std(e, sum, vlmc_kernel_emit_f32(e, (double)len), eps);
}

/* The workgroup shape, the row (length `len`, elements `stride` apart or -1) and the loop over
 * the group's rows; returns the row index (close the loop with a "}" line). */
static int open_rows(vlmc_kernel_emit_t *e, row_t *R, const vlmc_value_t *x, vlmc_dim_t len,
                     int stride) {
  vlmc_vk_emit_set_workgroup(e, NORM_THREADS, 1, 1, 1);
  R->e = e;
  R->x = x;
  R->len = vlmc_kernel_emit_dim(e, len);
  R->stride = stride;
  R->tid = vlmc_vk_emit_thread_id(e, 0);
  R->cached = 0;
  int first, end;
  vlmc_vk_emit_group_units(e, &first, &end);
  return vlmc_kernel_emit_for(e, first, end, vlmc_kernel_emit_index(e, 1));
}

/* A static contiguous row short enough: this invocation's elements into registers. */
static void use_registers(row_t *R, vlmc_dim_t len, int base) {
  if (!vlmc_dim_is_static(len) || len.off < 1 || len.off > MAX_CACHED * NORM_THREADS) return;
  R->cached = (len.off + NORM_THREADS - 1) / NORM_THREADS;
  cache_row(R, base, len.off);
}

static int64_t row_cost(vlmc_dim_t len, int64_t per_element) {
  return per_element * (vlmc_dim_is_static(len) ? len.off : 1024);
}

/* ---- rms_norm ---- */

/* w * (x * inv): the reference rounds x * inv to f32 before the weight multiplies it. */
static int rms_value(const row_t *R, const row_stats_t *s, int x, int col) {
  int n = vlmc_kernel_emit_float_op(R->e, "arith.mulf", x, s->a, 0);
  return vlmc_kernel_emit_float_op(R->e, "arith.mulf", vlmc_kernel_emit_load(R->e, s->w, col), n, 0);
}

vlmc_status_t vlmc_vk_kernel_rms_norm(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  const vlmc_type_t *xt = &op->operands[0]->type;
  vlmc_dim_t len = xt->dims[xt->rank - 1];
  e->template_name = "rms_norm";
  e->cost = row_cost(len, 4);
  row_t R;
  int r = open_rows(e, &R, op->operands[0], len, -1);
  int len_f32 = index_to_f32(e, R.len);
  int eps = vlmc_kernel_emit_f32(e, vlmc_op_attr_float(op, "eps"));
  int base = vlmc_kernel_emit_index_op(e, "arith.muli", r, R.len);
  use_registers(&R, len, base);
  row_stats_t s = {op->operands[1], NULL, -1, -1};
  s.a = inverse_std(e, reduce_row(&R, SUM_SQUARES, base, -1), len_f32, eps);
  output_row(&R, &s, base, rms_value);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}

/* ---- layer_norm ---- */

/* (x - mean) * inv * w (+ b), rounded as the reference: n first, then n * w, then + b. */
static int layer_value(const row_t *R, const row_stats_t *s, int x, int col) {
  vlmc_kernel_emit_t *e = R->e;
  int n = vlmc_kernel_emit_float_op(e, "arith.mulf", vlmc_kernel_emit_float_op(e, "arith.subf", x, s->c, 0),
                                    s->a, 0);
  int y = vlmc_kernel_emit_float_op(e, "arith.mulf", n, vlmc_kernel_emit_load(e, s->w, col), 0);
  if (!s->b) return y;
  return vlmc_kernel_emit_float_op(e, "arith.addf", y, vlmc_kernel_emit_load(e, s->b, col), 0);
}

vlmc_status_t vlmc_vk_kernel_layer_norm(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  const vlmc_type_t *xt = &op->operands[0]->type;
  vlmc_dim_t len = xt->dims[xt->rank - 1];
  e->template_name = "layer_norm";
  e->cost = row_cost(len, 7);
  row_t R;
  int r = open_rows(e, &R, op->operands[0], len, -1);
  int len_f32 = index_to_f32(e, R.len);
  int eps = vlmc_kernel_emit_f32(e, vlmc_op_attr_float(op, "eps"));
  int base = vlmc_kernel_emit_index_op(e, "arith.muli", r, R.len);
  use_registers(&R, len, base);
  row_stats_t s = {op->operands[1], op->num_operands > 2 ? op->operands[2] : NULL, -1, -1};
  s.c = vlmc_kernel_emit_float_op(e, "arith.divf", reduce_row(&R, SUM_X, base, -1), len_f32, 0);
  s.a = inverse_std(e, reduce_row(&R, SUM_DEVIATIONS, base, s.c), len_f32, eps);
  output_row(&R, &s, base, layer_value);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}

/* ---- softmax ---- */

/* exp(x - max) / sum, divided (not multiplied by a reciprocal) as the reference does. */
static int softmax_value(const row_t *R, const row_stats_t *s, int x, int col) {
  (void)col;
  vlmc_kernel_emit_t *e = R->e;
  int p = vlmc_kernel_emit_float_unary(e, "math.exp", vlmc_kernel_emit_float_op(e, "arith.subf", x, s->c, 0), 0);
  return vlmc_kernel_emit_float_op(e, "arith.divf", p, s->a, 0);
}

/* Whether every dim after `axis` is a static 1: the softmax row is contiguous. */
static bool last_real_axis(const vlmc_type_t *t, uint32_t axis) {
  for (uint32_t d = axis + 1; d < t->rank; ++d)
    if (!vlmc_dim_is_static(t->dims[d]) || t->dims[d].off != 1) return false;
  return true;
}

vlmc_status_t vlmc_vk_kernel_softmax(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  const vlmc_type_t *xt = &op->operands[0]->type;
  int64_t axis = vlmc_op_attr_int(op, "axis");
  if (axis < 0 || axis >= (int64_t)xt->rank) {
    vlmc_kernel_emit_fail(e, "softmax: axis %lld is out of range for rank %u", (long long)axis,
                          xt->rank);
    return NULL;
  }
  vlmc_dim_t len = xt->dims[axis];
  e->template_name = "softmax";
  e->cost = row_cost(len, 40);
  bool contiguous = last_real_axis(xt, (uint32_t)axis);
  int inner = vlmc_kernel_emit_dims_product(e, xt, (uint32_t)axis + 1, xt->rank);
  row_t R;
  int u = open_rows(e, &R, op->operands[0], len, contiguous ? -1 : inner);
  /* Row u starts at (u / inner) * len * inner + u % inner. */
  int base;
  if (contiguous) {
    base = vlmc_kernel_emit_index_op(e, "arith.muli", u, R.len);
  } else {
    int span = vlmc_kernel_emit_index_op(e, "arith.muli", R.len, inner);
    int start = vlmc_kernel_emit_index_op(e, "arith.muli", vlmc_kernel_emit_index_op(e, "arith.divui", u, inner), span);
    base = vlmc_kernel_emit_index_op(e, "arith.addi", start, vlmc_kernel_emit_index_op(e, "arith.remui", u, inner));
  }
  row_stats_t s = {NULL, NULL, -1, -1};
  s.c = reduce_row(&R, MAX_X, base, -1);
  s.a = reduce_row(&R, SUM_EXP, base, s.c);
  output_row(&R, &s, base, softmax_value);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
