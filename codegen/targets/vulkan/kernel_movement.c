/* Data movement and selection for the vulkan target: gather, embedding, scatter_rows, slice,
 * concat, transpose, kv_cache_append and argmax (semantics: reference/exec_movement.c). The
 * same work units as the cpu templates (codegen/targets/cpu/kernel_movement.c, whose comment
 * explains the rules for out-of-range indices: rows of zeros, never an access outside a
 * buffer), with a workgroup per work unit (an output row) whose invocations copy its elements
 * through vlmc_kernel_emit_finish_element (one invocation per row for rows shorter than
 * SHARED_ROW); argmax takes a workgroup per output
 * element (a row of the vocabulary is long).
 * What differs from the cpu: no vector copies; scatter_rows always scans the positions (the
 * cpu's binary search over sorted positions is an scf.while, which the SPIR-V path is not
 * trusted with); loops with carried values are guarded against running zero times (MLIR 19
 * miscompiles those, /work/shared/MLIR_GPU.md pitfall 4). */
#include <math.h>
#include <stdint.h>

#include "codegen/targets/vulkan/kernels.h"

/* A guess of a row's length for the cost when it is symbolic; invocations per workgroup; the
 * shortest row a workgroup copies together. */
enum { GUESSED_ROW = 64, GROUP = 64, SHARED_ROW = 16 };

/* ---- small emitters ---- */

/* Index arithmetic that folds the identities a row computation meets at every static dim of
 * 1 and every offset of 0 (constants are memoized, so comparing SSA numbers finds them). */
static int add(vlmc_kernel_emit_t *e, int a, int b) {
  int zero = vlmc_kernel_emit_index(e, 0);
  if (a == zero) return b;
  return b == zero ? a : vlmc_kernel_emit_index_op(e, "arith.addi", a, b);
}

static int mul(vlmc_kernel_emit_t *e, int a, int b) {
  int zero = vlmc_kernel_emit_index(e, 0), one = vlmc_kernel_emit_index(e, 1);
  if (a == zero || b == zero) return zero;
  if (a == one) return b;
  return b == one ? a : vlmc_kernel_emit_index_op(e, "arith.muli", a, b);
}

static int divu(vlmc_kernel_emit_t *e, int a, int b) {
  return b == vlmc_kernel_emit_index(e, 1) ? a : vlmc_kernel_emit_index_op(e, "arith.divui", a, b);
}

static int remu(vlmc_kernel_emit_t *e, int a, int b) {
  return b == vlmc_kernel_emit_index(e, 1) ? vlmc_kernel_emit_index(e, 0)
                                        : vlmc_kernel_emit_index_op(e, "arith.remui", a, b);
}

/* An i1 comparison of two values of `type`. */
static int cmpi(vlmc_kernel_emit_t *e, const char *pred, int a, int b, const char *type) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi %s, " VLMC_SSA ", " VLMC_SSA " : %s", v, pred, a,
                        b, type);
  return v;
}

static int select_value(vlmc_kernel_emit_t *e, int cond, int a, int b, const char *type) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : %s",
                        v, cond, a, b, type);
  return v;
}

static int cast_index(vlmc_kernel_emit_t *e, int v, const char *from, const char *to) {
  int r = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : %s to %s", r, v, from, to);
  return r;
}

/* The product of dims [from, to) when all are static, else -1. */
static int64_t static_product(const vlmc_type_t *t, uint32_t from, uint32_t to) {
  int64_t n = 1;
  for (uint32_t d = from; d < to && d < t->rank; ++d) {
    if (!vlmc_dim_is_static(t->dims[d])) return -1;
    n *= t->dims[d].off;
  }
  return n;
}

/* The cost of one unit of row work (one output row of `row_len` elements, -1: unknown); the
 * work count itself is the table's rule (vlmc_kernel_work: rows of dims [0, n)). Rows of at
 * least SHARED_ROW elements (or of unknown length) are copied by a workgroup each; shorter
 * ones by an invocation each. */
static void set_row_cost(vlmc_kernel_emit_t *e, int64_t row_len) {
  e->cost = 4 + (row_len >= 0 ? row_len : GUESSED_ROW);
  vlmc_vk_emit_state(e)->row_threads = row_len < 0 || row_len >= SHARED_ROW ? GROUP : 1;
}

/* Opens `scf.if unit < work` for this workgroup's (a shared row) or invocation's work unit;
 * returns the unit. A decode step's rows (an embedding row, the last hidden row, a KV-cache
 * row) are single long rows: one invocation walking one took 50-160 us on the H200. */
static int open_unit_loop(vlmc_kernel_emit_t *e) {
  if (vlmc_vk_emit_state(e)->row_threads <= 1) {
    vlmc_vk_emit_set_workgroup(e, GROUP, 1, 1, GROUP);
    return vlmc_vk_emit_open_unit(e);
  }
  vlmc_vk_emit_set_workgroup(e, GROUP, 1, 1, 1);
  return vlmc_vk_emit_open_group_unit(e);
}

/* Where this invocation starts a row and its step along it. */
static void row_walk(vlmc_kernel_emit_t *e, int from, int *start, int *step) {
  if (vlmc_vk_emit_state(e)->row_threads <= 1) {
    *start = from;
    *step = vlmc_kernel_emit_index(e, 1);
    return;
  }
  *start = add(e, from, vlmc_vk_emit_thread_id(e, 0));
  *step = vlmc_kernel_emit_index(e, GROUP);
}

/* ---- rows ---- */

/* One row copy: `len` elements src[base + c * stride] to the output at out + c. */
typedef struct {
  const vlmc_value_t *src;
  int base, stride; /* index SSAs */
  int out;          /* index SSA: the output flat index of element 0 */
  int len;          /* index SSA */
  int64_t static_len; /* -1 when symbolic */
} row_copy_t;

static bool is_float(const vlmc_value_t *v) { return vlmc_dtype_info(v->type.dtype)->is_float; }

/* Elements [from, len) one at a time, through the epilogue. */
static void emit_scalar_copy(vlmc_kernel_emit_t *e, const row_copy_t *r, int from) {
  if (r->static_len == 1 && from == vlmc_kernel_emit_index(e, 0) &&
      vlmc_vk_emit_state(e)->row_threads <= 1) { /* no loop for one element */
    vlmc_kernel_emit_finish_element(e, vlmc_kernel_emit_load(e, r->src, r->base), r->out);
    return;
  }
  int start, step;
  row_walk(e, from, &start, &step);
  int c = vlmc_kernel_emit_for(e, start, r->len, step);
  int at = add(e, r->base, mul(e, c, r->stride));
  int value = vlmc_kernel_emit_load(e, r->src, at);
  vlmc_kernel_emit_finish_element(e, value, add(e, r->out, c));
  vlmc_kernel_emit_line(e, "}");
}

static void emit_copy_row(vlmc_kernel_emit_t *e, const row_copy_t *r) {
  emit_scalar_copy(e, r, vlmc_kernel_emit_index(e, 0));
}

/* Zeros for a row whose source does not exist (an index the reference refuses). */
static void emit_zero_row(vlmc_kernel_emit_t *e, int out, int len) {
  bool f = vlmc_dtype_info(e->anchor->results[0].type.dtype)->is_float;
  int zero = f ? vlmc_kernel_emit_f32(e, 0) : vlmc_kernel_emit_i64(e, 0);
  int start, step;
  row_walk(e, vlmc_kernel_emit_index(e, 0), &start, &step);
  int c = vlmc_kernel_emit_for(e, start, len, step);
  vlmc_kernel_emit_finish_element(e, zero, add(e, out, c));
  vlmc_kernel_emit_line(e, "}");
}

/* The row copy when `ok` (an i1) holds, zeros otherwise. */
static void emit_guarded_copy(vlmc_kernel_emit_t *e, int ok, const row_copy_t *r) {
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", ok);
  emit_copy_row(e, r);
  vlmc_kernel_emit_line(e, "} else {");
  emit_zero_row(e, r->out, r->len);
  vlmc_kernel_emit_line(e, "}");
}

static row_copy_t contiguous_row(vlmc_kernel_emit_t *e, const vlmc_value_t *src, int base, int out,
                                 int len, int64_t static_len) {
  row_copy_t r = {src, base, vlmc_kernel_emit_index(e, 1), out, len, static_len};
  return r;
}

/* ---- gather and embedding ---- */

/* out[o, i, r] = x[o, idx[i], r] (numpy take along `axis`): one work unit per (o, i), a row
 * of the `inner` elements after the axis. */
static vlmc_status_t emit_take(vlmc_kernel_emit_t *e, const vlmc_value_t *x, const vlmc_value_t *idx,
                               uint32_t axis) {
  const vlmc_type_t *xt = &x->type, *it = &idx->type;
  int64_t static_inner = static_product(xt, axis + 1, xt->rank);
  set_row_cost(e, static_inner);
  int n = vlmc_kernel_emit_dims_product(e, it, 0, it->rank);
  int len = vlmc_kernel_emit_dim(e, xt->dims[axis]);
  int inner = vlmc_kernel_emit_dims_product(e, xt, axis + 1, xt->rank);
  int len64 = cast_index(e, len, "index", "i64");
  int u = open_unit_loop(e);
  int o = axis == 0 ? vlmc_kernel_emit_index(e, 0) : divu(e, u, n);
  int i = axis == 0 ? u : remu(e, u, n);
  int at = vlmc_kernel_emit_load(e, idx, i);
  /* Unsigned: a negative index is out of range too. */
  int ok = cmpi(e, "ult", at, len64, "i64");
  int outer_rows = mul(e, o, len);
  int row = add(e, outer_rows, cast_index(e, at, "i64", "index"));
  int src = mul(e, row, inner), dst = mul(e, u, inner);
  row_copy_t r = contiguous_row(e, x, src, dst, inner, static_inner);
  emit_guarded_copy(e, ok, &r);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}

vlmc_status_t vlmc_vk_kernel_gather(vlmc_kernel_emit_t *e) {
  e->template_name = "gather";
  const vlmc_op_t *op = e->anchor;
  return emit_take(e, op->operands[0], op->operands[1], (uint32_t)vlmc_op_attr_int(op, "axis"));
}

/* Rows of a [V, H] table; a bf16 / f16 parameter table is widened as it loads. */
vlmc_status_t vlmc_vk_kernel_embedding(vlmc_kernel_emit_t *e) {
  e->template_name = "embedding";
  return emit_take(e, e->anchor->operands[0], e->anchor->operands[1], 0);
}

/* ---- scatter_rows ---- */

/* In any at: the last i with at[i] == s (later rows win, as in the reference), or m. */
static int emit_find_any(vlmc_kernel_emit_t *e, const vlmc_value_t *at, int m, int s) {
  int found = vlmc_kernel_emit_fresh(e), i = vlmc_kernel_emit_fresh(e), acc = vlmc_kernel_emit_fresh(e);
  int zero = vlmc_kernel_emit_index(e, 0), one = vlmc_kernel_emit_index(e, 1);
  vlmc_kernel_emit_line(e, VLMC_SSA " = scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA
                        " step " VLMC_SSA " iter_args(" VLMC_SSA " = " VLMC_SSA ") -> (index) {",
                     found, i, zero, m, one, acc, m);
  int eq = cmpi(e, "eq", vlmc_kernel_emit_load(e, at, i), s, "i64");
  vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA " : index", select_value(e, eq, i, acc, "index"));
  vlmc_kernel_emit_line(e, "}");
  return vlmc_vk_emit_guard_empty(e, vlmc_kernel_emit_index(e, 0), m, found, m, "index");
}

/* One work unit per destination row: the last row of `rows` whose position is it, else the
 * destination's own row. Positions out of range match no row. */
vlmc_status_t vlmc_vk_kernel_scatter_rows(vlmc_kernel_emit_t *e) {
  e->template_name = "scatter_rows";
  const vlmc_op_t *op = e->anchor;
  const vlmc_value_t *dst = op->operands[0], *rows = op->operands[1], *at = op->operands[2];
  const vlmc_type_t *ot = &op->results[0].type;
  int64_t static_inner = static_product(ot, 1, ot->rank);
  set_row_cost(e, static_inner);
  int inner = vlmc_kernel_emit_dims_product(e, ot, 1, ot->rank);
  int m = vlmc_kernel_emit_dim(e, at->type.dims[0]);
  int u = open_unit_loop(e);
  int s = cast_index(e, u, "index", "i64");
  int found = emit_find_any(e, at, m, s);
  int out = mul(e, u, inner);
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", cmpi(e, "ult", found, m, "index"));
  row_copy_t from_rows = contiguous_row(e, rows, mul(e, found, inner), out, inner, static_inner);
  emit_copy_row(e, &from_rows);
  vlmc_kernel_emit_line(e, "} else {");
  row_copy_t from_dst = contiguous_row(e, dst, out, out, inner, static_inner);
  emit_copy_row(e, &from_dst);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}

/* ---- slice, concat, transpose, kv_cache_append ---- */

/* Output row u of a result whose dims before the last are [outer..., L (axis), rest...]:
 * *o = the outer index, *k = the index along the axis, *q = the rest flattened. */
static void split_row(vlmc_kernel_emit_t *e, const vlmc_type_t *t, uint32_t axis, int u, int *o,
                      int *k, int *q) {
  int rest = vlmc_kernel_emit_dims_product(e, t, axis + 1, t->rank - 1);
  int len = vlmc_kernel_emit_dim(e, t->dims[axis]);
  int ok = divu(e, u, rest);
  *q = remu(e, u, rest);
  *o = divu(e, ok, len);
  *k = remu(e, ok, len);
}

/* The flat index of row (o, k, q) of a value whose dims before the last are
 * [outer..., len (axis), rest...], times the row width. */
static int row_base(vlmc_kernel_emit_t *e, const vlmc_type_t *t, uint32_t axis, int o, int k,
                    int q) {
  int rest = vlmc_kernel_emit_dims_product(e, t, axis + 1, t->rank - 1);
  int len = vlmc_kernel_emit_dim(e, t->dims[axis]);
  int width = vlmc_kernel_emit_dim(e, t->dims[t->rank - 1]);
  int row = add(e, mul(e, add(e, mul(e, o, len), k), rest), q);
  return mul(e, row, width);
}

/* Whether start and the result's length fit the axis at run time (an i1), for a symbolic
 * axis: the shape rule checks static ones. */
static int emit_slice_fits(vlmc_kernel_emit_t *e, int start, int len, int size) {
  int zero = vlmc_kernel_emit_index(e, 0);
  int lo_ok = cmpi(e, "sge", start, zero, "index");
  int hi_ok = cmpi(e, "sle", add(e, start, len), size, "index");
  int len_ok = cmpi(e, "sge", len, zero, "index");
  int both = vlmc_kernel_emit_fresh(e), all = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", both, lo_ok,
                        hi_ok);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", all, both,
                        len_ok);
  return all;
}

/* One work unit per output row (dims before the last). Slicing the last axis copies a part
 * of the input row; slicing another copies a whole row, from `start` rows further. */
vlmc_status_t vlmc_vk_kernel_slice(vlmc_kernel_emit_t *e) {
  e->template_name = "slice";
  const vlmc_op_t *op = e->anchor;
  const vlmc_value_t *x = op->operands[0];
  const vlmc_type_t *xt = &x->type, *ot = &op->results[0].type;
  uint32_t axis = (uint32_t)vlmc_op_attr_int(op, "axis"), last = ot->rank - 1;
  int64_t start_attr = vlmc_op_attr_int(op, "start");
  int64_t static_width = static_product(ot, last, ot->rank);
  set_row_cost(e, static_width);
  int size = vlmc_kernel_emit_dim(e, xt->dims[axis]);
  /* Negative counts from the end (the shape rule keeps INT64_MIN out). */
  int start = start_attr >= 0 ? vlmc_kernel_emit_index(e, start_attr)
                              : vlmc_kernel_emit_index_op(e, "arith.subi", size, vlmc_kernel_emit_index(e, -start_attr));
  int width = vlmc_kernel_emit_dim(e, ot->dims[last]);
  bool checked = vlmc_dim_is_static(xt->dims[axis]);
  int fits = checked ? -1 : emit_slice_fits(e, start, vlmc_kernel_emit_dim(e, ot->dims[axis]), size);
  int u = open_unit_loop(e);
  int base;
  if (axis == last) {
    base = add(e, mul(e, u, size), start);
  } else {
    int o, k, q;
    split_row(e, ot, axis, u, &o, &k, &q);
    base = row_base(e, xt, axis, o, add(e, k, start), q);
  }
  row_copy_t r = contiguous_row(e, x, base, mul(e, u, width), width, static_width);
  if (checked) emit_copy_row(e, &r);
  else emit_guarded_copy(e, fits, &r);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}

/* Concatenating along the last axis: each operand's row in turn, at its offset in the row. */
static void emit_concat_last(vlmc_kernel_emit_t *e, int u, int out) {
  const vlmc_op_t *op = e->anchor;
  int offset = vlmc_kernel_emit_index(e, 0);
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    const vlmc_type_t *t = &op->operands[i]->type;
    int len = vlmc_kernel_emit_dim(e, t->dims[t->rank - 1]);
    int64_t static_len = static_product(t, t->rank - 1, t->rank);
    int src = mul(e, u, len), dst = add(e, out, offset);
    row_copy_t r = contiguous_row(e, op->operands[i], src, dst, len, static_len);
    emit_copy_row(e, &r);
    offset = add(e, offset, len);
  }
}

/* Concatenating along another axis: the output row at axis index k comes whole from the
 * operand whose range [offset, offset + len) holds k. */
static void emit_concat_inner(vlmc_kernel_emit_t *e, uint32_t axis, int u, int out) {
  const vlmc_op_t *op = e->anchor;
  const vlmc_type_t *ot = &op->results[0].type;
  int64_t static_width = static_product(ot, ot->rank - 1, ot->rank);
  int width = vlmc_kernel_emit_dim(e, ot->dims[ot->rank - 1]);
  int o, k, q;
  split_row(e, ot, axis, u, &o, &k, &q);
  int offset = vlmc_kernel_emit_index(e, 0);
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    const vlmc_type_t *t = &op->operands[i]->type;
    int len = vlmc_kernel_emit_dim(e, t->dims[axis]);
    int rel = vlmc_kernel_emit_index_op(e, "arith.subi", k, offset); /* wraps below offset: unsigned compare */
    vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", cmpi(e, "ult", rel, len, "index"));
    row_copy_t r = contiguous_row(e, op->operands[i], row_base(e, t, axis, o, rel, q), out, width,
                                  static_width);
    emit_copy_row(e, &r);
    vlmc_kernel_emit_line(e, "}");
    offset = add(e, offset, len);
  }
}

/* One work unit per output row (dims before the last). */
vlmc_status_t vlmc_vk_kernel_concat(vlmc_kernel_emit_t *e) {
  e->template_name = "concat";
  const vlmc_op_t *op = e->anchor;
  const vlmc_type_t *ot = &op->results[0].type;
  uint32_t axis = (uint32_t)vlmc_op_attr_int(op, "axis"), last = ot->rank - 1;
  set_row_cost(e, static_product(ot, last, ot->rank));
  int width = vlmc_kernel_emit_dim(e, ot->dims[last]);
  int u = open_unit_loop(e);
  int out = mul(e, u, width);
  if (axis == last) emit_concat_last(e, u, out);
  else emit_concat_inner(e, axis, u, out);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}

/* A rank-0 value (perm=[]): its one element. */
static void emit_scalar_transpose(vlmc_kernel_emit_t *e, const vlmc_value_t *x) {
  e->cost = 1;
  int u = open_unit_loop(e);
  vlmc_kernel_emit_finish_element(e, vlmc_kernel_emit_load(e, x, u), u);
  vlmc_kernel_emit_line(e, "}");
}

/* One work unit per output row: its multi-index gives the input base, and the row walks
 * input dim perm[last] (contiguous, and vectorised, when the last axis stays last). */
vlmc_status_t vlmc_vk_kernel_transpose(vlmc_kernel_emit_t *e) {
  e->template_name = "transpose";
  const vlmc_op_t *op = e->anchor;
  const vlmc_value_t *x = op->operands[0];
  const vlmc_type_t *xt = &x->type, *ot = &op->results[0].type;
  const int64_t *perm = vlmc_op_attr(op, "perm")->v.ints.data;
  if (ot->rank == 0) {
    emit_scalar_transpose(e, x);
    return NULL;
  }
  uint32_t last = ot->rank - 1;
  int64_t static_width = static_product(ot, last, ot->rank);
  set_row_cost(e, static_width);
  int width = vlmc_kernel_emit_dim(e, ot->dims[last]);
  int u = open_unit_loop(e);
  int base = vlmc_kernel_emit_index(e, 0), rest = u;
  for (uint32_t d = last; d-- > 0;) {
    int dim = vlmc_kernel_emit_dim(e, ot->dims[d]);
    int i = d == 0 ? rest : remu(e, rest, dim); /* u < rows: no remainder at dim 0 */
    int stride = vlmc_kernel_emit_dims_product(e, xt, (uint32_t)perm[d] + 1, xt->rank);
    base = add(e, base, mul(e, i, stride));
    if (d > 0) rest = divu(e, rest, dim);
  }
  int stride = vlmc_kernel_emit_dims_product(e, xt, (uint32_t)perm[last] + 1, xt->rank);
  int out = mul(e, u, width);
  row_copy_t r = {x, base, stride, out, width, static_width};
  emit_copy_row(e, &r);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}

/* kv_cache_append: units are the result's rows, new rows first: unit u < S writes row C + u
 * from rows[u], unit S + j copies the cache's row j. So a dispatch of only the first S units
 * appends the new rows to a cache grown in place (the vulkan backend does that when the
 * walker gives it the cache's buffer: docs/vulkan.md, "KV caches grow in place"). */
vlmc_status_t vlmc_vk_kernel_kv_cache_append(vlmc_kernel_emit_t *e) {
  e->template_name = "kv_cache_append";
  const vlmc_op_t *op = e->anchor;
  const vlmc_value_t *cache = op->operands[0], *rows = op->operands[1];
  const vlmc_type_t *ot = &op->results[0].type;
  int64_t static_inner = static_product(ot, 1, ot->rank);
  set_row_cost(e, static_inner);
  int inner = vlmc_kernel_emit_dims_product(e, ot, 1, ot->rank);
  int c = vlmc_kernel_emit_dim(e, cache->type.dims[0]);
  int s = vlmc_kernel_emit_dim(e, rows->type.dims[0]);
  int u = open_unit_loop(e);
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", cmpi(e, "ult", u, s, "index"));
  int src = mul(e, u, inner), dst = mul(e, add(e, c, u), inner);
  row_copy_t new_row = contiguous_row(e, rows, src, dst, inner, static_inner);
  emit_copy_row(e, &new_row);
  vlmc_kernel_emit_line(e, "} else {");
  int old = mul(e, vlmc_kernel_emit_index_op(e, "arith.subi", u, s), inner);
  row_copy_t old_row = contiguous_row(e, cache, old, old, inner, static_inner);
  emit_copy_row(e, &old_row);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}

/* ---- argmax ---- */

/* Whether x[k] beats the best so far (an i1): greater, with NaN larger than everything and the
 * first NaN kept (torch.argmax, as the reference). For floats: best is not NaN and x is
 * unordered-or-greater. */
static int emit_beats(vlmc_kernel_emit_t *e, bool f, int x, int best) {
  if (!f) return cmpi(e, "sgt", x, best, "i64");
  int best_ok = vlmc_kernel_emit_fresh(e), ugt = vlmc_kernel_emit_fresh(e), v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpf ord, " VLMC_SSA ", " VLMC_SSA " : f32", best_ok,
                        best, best);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpf ugt, " VLMC_SSA ", " VLMC_SSA " : f32", ugt, x,
                        best);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", v, best_ok, ugt);
  return v;
}

/* Invocations that share one argmax row. */
enum { ARGMAX_GROUP = 128 };

/* Whether candidate b = (vb, ib) beats a = (va, ia) when merging partial results of
 * invocations that scanned interleaved elements: NaN above everything, then greater, and
 * among equal values (or two NaNs) the earlier index, so the merge gives the first maximum
 * whatever the order of the partials. */
static int emit_merge_beats(vlmc_kernel_emit_t *e, bool f, int va, int ia, int vb, int ib) {
  int earlier = cmpi(e, "slt", ib, ia, "index");
  int v = vlmc_kernel_emit_fresh(e);
  if (!f) {
    int gt = cmpi(e, "sgt", vb, va, "i64"), eq = cmpi(e, "eq", vb, va, "i64");
    int tie = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", tie, eq, earlier);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.ori " VLMC_SSA ", " VLMC_SSA " : i1", v, gt, tie);
    return v;
  }
  int a_nan = vlmc_kernel_emit_fresh(e), b_nan = vlmc_kernel_emit_fresh(e);
  int gt = vlmc_kernel_emit_fresh(e), eq = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpf uno, " VLMC_SSA ", " VLMC_SSA " : f32", a_nan, va, va);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpf uno, " VLMC_SSA ", " VLMC_SSA " : f32", b_nan, vb, vb);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpf ogt, " VLMC_SSA ", " VLMC_SSA " : f32", gt, vb, va);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpf oeq, " VLMC_SSA ", " VLMC_SSA " : f32", eq, vb, va);
  int a_num = vlmc_kernel_emit_fresh(e), only_b = vlmc_kernel_emit_fresh(e);
  int both = vlmc_kernel_emit_fresh(e), same = vlmc_kernel_emit_fresh(e), tie = vlmc_kernel_emit_fresh(e);
  int either = vlmc_kernel_emit_fresh(e), yes = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant true", yes);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.xori " VLMC_SSA ", " VLMC_SSA " : i1", a_num, a_nan, yes);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", only_b, b_nan, a_num);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", both, a_nan, b_nan);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.ori " VLMC_SSA ", " VLMC_SSA " : i1", same, eq, both);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", tie, same, earlier);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.ori " VLMC_SSA ", " VLMC_SSA " : i1", either, only_b, gt);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.ori " VLMC_SSA ", " VLMC_SSA " : i1", v, either, tie);
  return v;
}

/* Slot `at` of the index array (i32 in workgroup memory) as an index, and the store back. */
static int load_slot_index(vlmc_kernel_emit_t *e, int slots, int at) {
  return cast_index(e, vlmc_vk_emit_shared_load(e, slots, at), "i32", "index");
}

static void store_slot_index(vlmc_kernel_emit_t *e, int slots, int value, int at) {
  vlmc_vk_emit_shared_store(e, slots, cast_index(e, value, "index", "i32"), at);
}

/* One work unit per output element, one workgroup per unit: each invocation scans the
 * elements tid, tid + 128, ... of its row (`len` elements `inner` apart) from a best of -inf
 * (INT64_MIN) at index `len` (a start no element ties with: an element equal to it never
 * beats it, and then every element equals it and index 0 is the answer, as the cpu's scan
 * gives, also for an empty axis); the partials then merge in workgroup memory by halves. */
vlmc_status_t vlmc_vk_kernel_argmax(vlmc_kernel_emit_t *e) {
  e->template_name = "argmax";
  const vlmc_op_t *op = e->anchor;
  const vlmc_value_t *x = op->operands[0];
  const vlmc_type_t *xt = &x->type;
  uint32_t axis = (uint32_t)vlmc_op_attr_int(op, "axis");
  bool f = is_float(x);
  const char *t = f ? "f32" : "i64";
  int64_t static_len = static_product(xt, axis, axis + 1);
  e->cost = 4 + 2 * (static_len >= 0 ? static_len : GUESSED_ROW);
  vlmc_vk_emit_set_workgroup(e, ARGMAX_GROUP, 1, 1, 1);
  int values = vlmc_vk_emit_shared(e, t, ARGMAX_GROUP);
  int indices = vlmc_vk_emit_shared(e, "i32", ARGMAX_GROUP);
  int len = vlmc_kernel_emit_dim(e, xt->dims[axis]);
  int inner = vlmc_kernel_emit_dims_product(e, xt, axis + 1, xt->rank);
  int init = f ? vlmc_kernel_emit_f32(e, -INFINITY) : vlmc_kernel_emit_i64(e, INT64_MIN);
  int tid = vlmc_vk_emit_thread_id(e, 0);
  int u, end;
  vlmc_vk_emit_group_units(e, &u, &end);
  /* Uniform over the workgroup (all its invocations share u): barriers inside are legal. */
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", cmpi(e, "ult", u, end, "index"));
  int row_start = mul(e, mul(e, divu(e, u, inner), len), inner);
  int base = add(e, row_start, remu(e, u, inner));
  int top = vlmc_kernel_emit_fresh(e), top_k = vlmc_kernel_emit_fresh(e), k = vlmc_kernel_emit_fresh(e);
  int best = vlmc_kernel_emit_fresh(e), best_k = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA ", " VLMC_SSA " = scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA
                        " step " VLMC_SSA " iter_args(" VLMC_SSA " = " VLMC_SSA ", " VLMC_SSA
                        " = " VLMC_SSA ") -> (%s, index) {",
                     top, top_k, k, tid, len, vlmc_kernel_emit_index(e, ARGMAX_GROUP), best, init,
                     best_k, len, t);
  int xk = vlmc_kernel_emit_load(e, x, add(e, base, mul(e, k, inner)));
  int beats = emit_beats(e, f, xk, best);
  int nb = select_value(e, beats, xk, best, t), nk = select_value(e, beats, k, best_k, "index");
  vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA ", " VLMC_SSA " : %s, index", nb, nk, t);
  vlmc_kernel_emit_line(e, "}");
  /* MLIR 19 leaves a zero-trip loop's results undefined (pitfall 4): the start instead. */
  vlmc_vk_emit_shared_store(e, values, vlmc_vk_emit_guard_empty(e, tid, len, top, init, t), tid);
  store_slot_index(e, indices, vlmc_vk_emit_guard_empty(e, tid, len, top_k, len, "index"), tid);
  for (int half = ARGMAX_GROUP / 2; half >= 1; half /= 2) {
    vlmc_vk_emit_barrier(e);
    vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", cmpi(e, "ult", tid, vlmc_kernel_emit_index(e, half), "index"));
    int other = add(e, tid, vlmc_kernel_emit_index(e, half));
    int va = vlmc_vk_emit_shared_load(e, values, tid), ia = load_slot_index(e, indices, tid);
    int vb = vlmc_vk_emit_shared_load(e, values, other), ib = load_slot_index(e, indices, other);
    vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", emit_merge_beats(e, f, va, ia, vb, ib));
    vlmc_vk_emit_shared_store(e, values, vb, tid);
    store_slot_index(e, indices, ib, tid);
    vlmc_kernel_emit_line(e, "}");
    vlmc_kernel_emit_line(e, "}");
  }
  vlmc_vk_emit_barrier(e);
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", cmpi(e, "eq", tid, vlmc_kernel_emit_index(e, 0), "index"));
  int found = load_slot_index(e, indices, vlmc_kernel_emit_index(e, 0));
  int none = cmpi(e, "eq", found, len, "index");
  int picked = select_value(e, none, vlmc_kernel_emit_index(e, 0), found, "index");
  vlmc_kernel_emit_finish_element(e, cast_index(e, picked, "index", "i64"), u);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
