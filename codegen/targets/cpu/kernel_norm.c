/* rms_norm, layer_norm and softmax: one work unit per row (every dim but the normalised one).
 * A row is read two or three times: reductions first (vector accumulators along a contiguous
 * row, a scalar loop for the tail, summed horizontally), then one pass that computes every
 * output element and stores it through the epilogue.
 *
 * The reference (reference/exec_norm.c) accumulates in f64; the kernels accumulate in f32
 * (lanes of VL partial sums, which also keeps the rounding error small) and compute the
 * per-row statistic 1 / sqrt(mean + eps) in f64 from the f32 sum, as the reference does, so
 * that only the sum's rounding differs.
 *
 * softmax runs along any axis: over the last one the row is contiguous and vectorised; over
 * another, its elements are `inner` (the product of the later dims) apart and read one by one. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codegen/targets/cpu/kernels.h"

/* A guess of the row length for the cost when it is symbolic. */
enum { GUESSED_ROW = 1024 };

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
  int len_vec;     /* index SSA: len rounded down to vl (contiguous rows only) */
  int stride;      /* index SSA */
  bool contiguous; /* stride is 1: the row is read with vector loads */
  int vl;
} row_t;

/* The per-row values the output pass uses, scalar and broadcast (for the vector loop). */
typedef struct {
  const vlmc_value_t *w, *b; /* weight and bias (NULL when absent) */
  int a, a_vec;              /* rms/layer: 1 / sqrt(var + eps); softmax: the sum of exps */
  int c, c_vec;              /* layer: the mean; softmax: the max */
} row_stats_t;

typedef int (*row_value_fn)(const row_t *R, const row_stats_t *s, int x, int col, int width);

/* ---- small emitters ---- */

static int broadcast(vlmc_kernel_emit_t *e, int scalar, int width) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.broadcast " VLMC_SSA " : f32 to vector<%dxf32>", v,
                        scalar, width);
  return v;
}

/* An f64 constant at the current point (hex: exact). */
static int f64_const(vlmc_kernel_emit_t *e, double value) {
  uint64_t bits;
  memcpy(&bits, &value, sizeof bits);
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant 0x%016llX : f64", v, (unsigned long long)bits);
  return v;
}

/* An index value as f64 (a row length that may be symbolic). */
static int index_to_f64(vlmc_kernel_emit_t *e, int index) {
  int i = vlmc_kernel_emit_fresh(e), f = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : index to i64", i, index);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.sitofp " VLMC_SSA " : i64 to f64", f, i);
  return f;
}

/* The f64 constants of 1 / sqrt(sum / len + eps), made before the row loop. */
typedef struct {
  int len, eps, one;
} norm_f64_t;

/* (f32)(1 / sqrt(sum / len + eps)) with the division, sqrt and reciprocal in f64, as the
 * reference rounds it once at the end. */
static int inverse_std(vlmc_kernel_emit_t *e, int sum, const norm_f64_t *k) {
  int wide = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.extf " VLMC_SSA " : f32 to f64", wide, sum);
  int mean = vlmc_kernel_emit_fresh(e), var = vlmc_kernel_emit_fresh(e), root = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.divf " VLMC_SSA ", " VLMC_SSA " : f64", mean, wide,
                        k->len);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addf " VLMC_SSA ", " VLMC_SSA " : f64", var, mean,
                        k->eps);
  vlmc_kernel_emit_line(e, VLMC_SSA " = math.sqrt " VLMC_SSA " : f64", root, var);
  int inv = vlmc_kernel_emit_fresh(e), narrow = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.divf " VLMC_SSA ", " VLMC_SSA " : f64", inv, k->one,
                        root);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.truncf " VLMC_SSA " : f64 to f32", narrow, inv);
  return narrow;
}

/* ---- rows ---- */

/* Flat index of element k of the row at `base`. */
static int row_at(const row_t *R, int base, int k) {
  if (R->contiguous) return vlmc_kernel_emit_index_op(R->e, "arith.addi", base, k);
  return vlmc_kernel_emit_index_op(R->e, "arith.addi", base, vlmc_kernel_emit_index_op(R->e, "arith.muli", k, R->stride));
}

static int reduce_term(vlmc_kernel_emit_t *e, reduce_kind_t kind, int x, int center, int width) {
  switch (kind) {
    case SUM_SQUARES: return vlmc_kernel_emit_float_op(e, "arith.mulf", x, x, width);
    case SUM_DEVIATIONS: {
      int d = vlmc_kernel_emit_float_op(e, "arith.subf", x, center, width);
      return vlmc_kernel_emit_float_op(e, "arith.mulf", d, d, width);
    }
    case SUM_EXP:
      return vlmc_kernel_emit_float_unary(e, "math.exp", vlmc_kernel_emit_float_op(e, "arith.subf", x, center, width), width);
    default: return x;
  }
}

/* The vector part of a reduction over a contiguous row: VL partial results, combined. */
static int reduce_vector_part(const row_t *R, reduce_kind_t kind, int base, int center,
                              const char *combine, int init) {
  vlmc_kernel_emit_t *e = R->e;
  int center_vec = center >= 0 ? broadcast(e, center, R->vl) : -1;
  int init_vec = broadcast(e, init, R->vl);
  int result = vlmc_kernel_emit_fresh(e), k = vlmc_kernel_emit_fresh(e), acc = vlmc_kernel_emit_fresh(e);
  int zero = vlmc_kernel_emit_index(e, 0), step = vlmc_kernel_emit_index(e, R->vl);
  vlmc_kernel_emit_line(e,
                        VLMC_SSA " = scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA
                              " step " VLMC_SSA " iter_args(" VLMC_SSA " = " VLMC_SSA
                              ") -> (vector<%dxf32>) {",
                     result, k, zero, R->len_vec, step, acc, init_vec, R->vl);
  int x = vlmc_cpu_emit_load_vector(e, R->x, vlmc_kernel_emit_index_op(e, "arith.addi", base, k), R->vl);
  int next = vlmc_kernel_emit_float_op(e, combine, acc, reduce_term(e, kind, x, center_vec, R->vl), R->vl);
  vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA " : vector<%dxf32>", next, R->vl);
  vlmc_kernel_emit_line(e, "}");
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.reduction <%s>, " VLMC_SSA " : vector<%dxf32> into f32",
                        v, kind == MAX_X ? "maxnumf" : "add", result, R->vl);
  return v;
}

/* The sum (or max) over the row at `base` of the kind's term; center is an f32 SSA or -1. */
static int reduce_row(const row_t *R, reduce_kind_t kind, int base, int center) {
  vlmc_kernel_emit_t *e = R->e;
  const char *combine = kind == MAX_X ? "arith.maxnumf" : "arith.addf";
  int init = vlmc_kernel_emit_f32(e, kind == MAX_X ? -INFINITY : 0.0);
  int acc = init, from = vlmc_kernel_emit_index(e, 0);
  if (R->contiguous) {
    acc = reduce_vector_part(R, kind, base, center, combine, init);
    from = R->len_vec;
  }
  int result = vlmc_kernel_emit_fresh(e), k = vlmc_kernel_emit_fresh(e), a = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e,
                        VLMC_SSA " = scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA
                              " step " VLMC_SSA " iter_args(" VLMC_SSA " = " VLMC_SSA
                              ") -> (f32) {",
                     result, k, from, R->len, vlmc_kernel_emit_index(e, 1), a, acc);
  int x = vlmc_kernel_emit_load(e, R->x, row_at(R, base, k));
  int next = vlmc_kernel_emit_float_op(e, combine, a, reduce_term(e, kind, x, center, 0), 0);
  vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA " : f32", next);
  vlmc_kernel_emit_line(e, "}");
  return result;
}

/* The output pass over the row at `base`: value(x, column) for every element. */
static void output_row(const row_t *R, const row_stats_t *s, int base, row_value_fn value) {
  vlmc_kernel_emit_t *e = R->e;
  int from = vlmc_kernel_emit_index(e, 0);
  if (R->contiguous) {
    int k = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {",
                          k, from, R->len_vec, vlmc_kernel_emit_index(e, R->vl));
    int at = vlmc_kernel_emit_index_op(e, "arith.addi", base, k);
    int x = vlmc_cpu_emit_load_vector(e, R->x, at, R->vl);
    vlmc_cpu_emit_finish_vector(e, value(R, s, x, k, R->vl), at, R->vl);
    vlmc_kernel_emit_line(e, "}");
    from = R->len_vec;
  }
  int k = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {",
                        k, from, R->len, vlmc_kernel_emit_index(e, 1));
  int at = row_at(R, base, k);
  vlmc_kernel_emit_finish_element(e, value(R, s, vlmc_kernel_emit_load(e, R->x, at), k, 0), at);
  vlmc_kernel_emit_line(e, "}");
}

/* Sets up a row of `len` elements `stride` (an index SSA, or -1 for 1) apart. */
static row_t make_row(vlmc_kernel_emit_t *e, const vlmc_value_t *x, vlmc_dim_t len, int stride) {
  row_t R = {e, x, vlmc_kernel_emit_dim(e, len), -1, stride, stride < 0, e->vector_width};
  if (!R.contiguous) return R;
  if (vlmc_dim_is_static(len)) {
    R.len_vec = vlmc_kernel_emit_index(e, len.off / R.vl * R.vl);
  } else {
    int vl = vlmc_kernel_emit_index(e, R.vl);
    R.len_vec = vlmc_kernel_emit_index_op(e, "arith.muli", vlmc_kernel_emit_index_op(e, "arith.divui", R.len, vl), vl);
  }
  return R;
}

static int64_t row_cost(vlmc_dim_t len, int64_t per_element) {
  return per_element * (vlmc_dim_is_static(len) ? len.off : GUESSED_ROW);
}

/* Opens the loop over this thread's rows; returns the row index. */
static int open_row_loop(vlmc_kernel_emit_t *e) {
  int r = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = %%lo to %%hi step " VLMC_SSA " {", r,
                        vlmc_kernel_emit_index(e, 1));
  return r;
}

/* ---- rms_norm ---- */

/* w * (x * inv): the reference rounds x * inv to f32 before the weight multiplies it. */
static int rms_value(const row_t *R, const row_stats_t *s, int x, int col, int width) {
  int n = vlmc_kernel_emit_float_op(R->e, "arith.mulf", x, width ? s->a_vec : s->a, width);
  int w = vlmc_cpu_emit_load_at(R->e, s->w, col, width);
  return vlmc_kernel_emit_float_op(R->e, "arith.mulf", w, n, width);
}

/* Common start of rms_norm and layer_norm: the work, the row, the f64 constants. */
static row_t norm_setup(vlmc_kernel_emit_t *e, const char *name, int64_t per_element, norm_f64_t *k) {
  const vlmc_op_t *op = e->anchor;
  const vlmc_type_t *xt = &op->operands[0]->type;
  vlmc_dim_t len = xt->dims[xt->rank - 1];
  e->template_name = name;
  e->cost = row_cost(len, per_element);
  row_t R = make_row(e, op->operands[0], len, -1);
  k->len = vlmc_dim_is_static(len) ? f64_const(e, (double)len.off) : index_to_f64(e, R.len);
  k->eps = f64_const(e, vlmc_op_attr_float(op, "eps"));
  k->one = f64_const(e, 1.0);
  return R;
}

vlmc_status_t vlmc_cpu_kernel_rms_norm(vlmc_kernel_emit_t *e) {
  norm_f64_t k;
  row_t R = norm_setup(e, "rms_norm", 4, &k);
  row_stats_t s = {e->anchor->operands[1], NULL, -1, -1, -1, -1};
  int r = open_row_loop(e);
  int base = vlmc_kernel_emit_index_op(e, "arith.muli", r, R.len);
  s.a = inverse_std(e, reduce_row(&R, SUM_SQUARES, base, -1), &k);
  s.a_vec = broadcast(e, s.a, R.vl);
  output_row(&R, &s, base, rms_value);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}

/* ---- layer_norm ---- */

/* (x - mean) * inv * w (+ b), rounded as the reference: n first, then n * w, then + b. */
static int layer_value(const row_t *R, const row_stats_t *s, int x, int col, int width) {
  vlmc_kernel_emit_t *e = R->e;
  int d = vlmc_kernel_emit_float_op(e, "arith.subf", x, width ? s->c_vec : s->c, width);
  int n = vlmc_kernel_emit_float_op(e, "arith.mulf", d, width ? s->a_vec : s->a, width);
  int w = vlmc_cpu_emit_load_at(e, s->w, col, width);
  int y = vlmc_kernel_emit_float_op(e, "arith.mulf", n, w, width);
  if (!s->b) return y;
  int b = vlmc_cpu_emit_load_at(e, s->b, col, width);
  return vlmc_kernel_emit_float_op(e, "arith.addf", y, b, width);
}

vlmc_status_t vlmc_cpu_kernel_layer_norm(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  norm_f64_t k;
  row_t R = norm_setup(e, "layer_norm", 7, &k);
  row_stats_t s = {op->operands[1], op->num_operands > 2 ? op->operands[2] : NULL, -1, -1, -1, -1};
  int len_f32 = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.truncf " VLMC_SSA " : f64 to f32", len_f32, k.len);
  int r = open_row_loop(e);
  int base = vlmc_kernel_emit_index_op(e, "arith.muli", r, R.len);
  /* Two passes (the mean, then squared deviations from it): no cancellation in the variance. */
  s.c = vlmc_kernel_emit_float_op(e, "arith.divf", reduce_row(&R, SUM_X, base, -1), len_f32, 0);
  s.a = inverse_std(e, reduce_row(&R, SUM_DEVIATIONS, base, s.c), &k);
  s.a_vec = broadcast(e, s.a, R.vl);
  s.c_vec = broadcast(e, s.c, R.vl);
  output_row(&R, &s, base, layer_value);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}

/* ---- softmax ---- */

/* exp(x - max) / sum, divided (not multiplied by a reciprocal) as the reference does. */
static int softmax_value(const row_t *R, const row_stats_t *s, int x, int col, int width) {
  (void)col;
  vlmc_kernel_emit_t *e = R->e;
  int d = vlmc_kernel_emit_float_op(e, "arith.subf", x, width ? s->c_vec : s->c, width);
  return vlmc_kernel_emit_float_op(e, "arith.divf", vlmc_kernel_emit_float_unary(e, "math.exp", d, width), width ? s->a_vec : s->a,
                  width);
}

/* Whether every dim after `axis` is a static 1: the softmax row is contiguous. */
static bool last_real_axis(const vlmc_type_t *t, uint32_t axis) {
  for (uint32_t d = axis + 1; d < t->rank; ++d)
    if (!vlmc_dim_is_static(t->dims[d]) || t->dims[d].off != 1) return false;
  return true;
}

vlmc_status_t vlmc_cpu_kernel_softmax(vlmc_kernel_emit_t *e) {
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
  e->cost = row_cost(len, 40); /* two exps per element */
  bool contiguous = last_real_axis(xt, (uint32_t)axis);
  int inner = vlmc_kernel_emit_dims_product(e, xt, (uint32_t)axis + 1, xt->rank);
  row_t R = make_row(e, op->operands[0], len, contiguous ? -1 : inner);
  int span = contiguous ? R.len : vlmc_kernel_emit_index_op(e, "arith.muli", R.len, inner);
  int u = open_row_loop(e);
  /* Row u starts at (u / inner) * len * inner + u % inner. */
  int base;
  if (contiguous) {
    base = vlmc_kernel_emit_index_op(e, "arith.muli", u, R.len);
  } else {
    int start = vlmc_kernel_emit_index_op(e, "arith.muli", vlmc_kernel_emit_index_op(e, "arith.divui", u, inner), span);
    base = vlmc_kernel_emit_index_op(e, "arith.addi", start, vlmc_kernel_emit_index_op(e, "arith.remui", u, inner));
  }
  row_stats_t s = {NULL, NULL, -1, -1, -1, -1};
  s.c = reduce_row(&R, MAX_X, base, -1);
  s.a = reduce_row(&R, SUM_EXP, base, s.c);
  if (contiguous) {
    s.c_vec = broadcast(e, s.c, R.vl);
    s.a_vec = broadcast(e, s.a, R.vl);
  }
  output_row(&R, &s, base, softmax_value);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
