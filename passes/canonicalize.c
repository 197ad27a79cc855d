/* canonicalize: local simplifications, repeated until nothing changes (or max-iterations):
 *   - cast to the operand's own dtype, and cast(cast(x)) back to x's dtype through a lossless
 *     intermediate, become x;
 *   - reshape to the operand's type becomes the operand; reshape(reshape(x)) reads x;
 *   - transpose with the identity perm becomes the operand; transpose(transpose(x)) is one
 *     transpose with the composed perm;
 *   - inverse_permutation(inverse_permutation(p)) is p; gather by p then by
 *     inverse_permutation(p) on the same axis (or the other way round) is the identity, and so
 *     is a gather by the constant 0..n-1;
 *   - constant folding of small integer work (at most fold-limit elements): add, sub, mul, neg,
 *     cast, reshape, transpose, slice, concat, gather of constants, inverse_permutation of a
 *     constant, and the host index ops (window_order, window_segments, full_segments,
 *     vision_positions, token_positions, and pos_interp_index / pos_interp_weight, whose f32
 *     weights become a float constant) of a constant grid or constant ids whose result type
 *     is static. A static result type that disagrees with the folded length is an error.
 * A rewritten op's old producers are left in place for dce; only replaced ops are erased.
 *
 * Requires: verified IR. Invalidates: nothing cached (there are no analyses yet). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"
#include "support/checked_math.h"

enum { STAT_FOLDED, STAT_CONSTANTS, STAT_ITERATIONS };

static const char *const canonicalize_statistics[] = {"ops-folded", "constants-created",
                                                      "iterations"};

static const vlmc_pass_option_t canonicalize_options[] = {
    {"max-iterations", VLMC_PASS_OPTION_INT, "8", "sweeps over the module at most"},
    {"fold-limit", VLMC_PASS_OPTION_INT, "65536", "largest constant (elements) folding creates"},
};

typedef struct {
  vlmc_pass_context_t *ctx;
  int64_t fold_limit;
  bool changed;
} canon_t;

/* ---- rewriting helpers ---- */

static void replace_op(canon_t *c, vlmc_op_t *op, vlmc_value_t *value) {
  vlmc_value_replace_all_uses(&op->results[0], value);
  vlmc_op_erase(op);
  vlmc_pass_stat_add(c->ctx, STAT_FOLDED, 1);
  c->changed = true;
}

/* Replaces op by a constant of `type` holding ints (or floats when ints is NULL). */
static vlmc_status_t replace_with_constant(canon_t *c, vlmc_op_t *op, const vlmc_type_t *type,
                                           const int64_t *ints, const double *floats,
                                           size_t count) {
  vlmc_builder_t b;
  vlmc_builder_init(&b, op->block->func);
  vlmc_builder_set_insert_before(&b, op);
  b.loc = op->loc;
  vlmc_value_t *value;
  const char *name = op->results[0].name;
  if (ints) VLMC_RETURN_IF_ERROR(vlmc_builder_constant_ints(&b, type, ints, count, name, &value));
  else VLMC_RETURN_IF_ERROR(vlmc_builder_constant_floats(&b, type, floats, count, name, &value));
  vlmc_pass_stat_add(c->ctx, STAT_CONSTANTS, 1);
  replace_op(c, op, value);
  return NULL;
}

static vlmc_op_t *def_of(const vlmc_value_t *v, vlmc_op_kind_t kind) {
  return v->def && v->def->kind == kind ? v->def : NULL;
}

/* ---- constant data ---- */

typedef struct {
  const int64_t *ints;   /* exactly one of ints / floats is set (ints for empty data) */
  const double *floats;
  size_t count;
  int64_t sizes[VLMC_IR_MAX_RANK];
  uint32_t rank;
} const_data_t;

static bool const_data(const vlmc_value_t *v, const_data_t *out) {
  const vlmc_attr_t *a = vlmc_value_constant(v);
  if (!a) return false;
  out->ints = a->v.dense.ints;
  out->floats = a->v.dense.floats;
  out->count = a->v.dense.count;
  out->rank = v->type.rank;
  for (uint32_t i = 0; i < v->type.rank; ++i) out->sizes[i] = v->type.dims[i].off;
  static const int64_t empty[1] = {0};
  if (!out->ints && !out->floats) out->ints = empty;
  return true;
}

static bool const_ints(const vlmc_value_t *v, const_data_t *out) {
  return const_data(v, out) && out->ints;
}

/* The static element count of `type`, when it is at most the fold limit. */
static bool foldable_count(const canon_t *c, const vlmc_type_t *type, size_t *out) {
  int64_t n;
  if (!vlmc_type_static_count(type, &n) || n > c->fold_limit) return false;
  *out = (size_t)n;
  return true;
}

static void unravel(int64_t linear, const int64_t *sizes, uint32_t rank, int64_t *coords) {
  for (uint32_t i = rank; i-- > 0;) {
    coords[i] = sizes[i] ? linear % sizes[i] : 0;
    linear = sizes[i] ? linear / sizes[i] : 0;
  }
}

static int64_t ravel(const int64_t *coords, const int64_t *sizes, uint32_t rank) {
  int64_t linear = 0;
  for (uint32_t i = 0; i < rank; ++i) linear = linear * sizes[i] + coords[i];
  return linear;
}

/* A constant of `type` made of in[src[i]] for every output element i. */
static vlmc_status_t replace_by_moving(canon_t *c, vlmc_op_t *op, const const_data_t *in,
                                       const int64_t *src, size_t count) {
  const vlmc_type_t *type = &op->results[0].type;
  void *out = malloc((count ? count : 1) * 8);
  if (!out) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < count; ++i) {
    if (in->floats) ((double *)out)[i] = in->floats[src[i]];
    else ((int64_t *)out)[i] = in->ints[src[i]];
  }
  vlmc_status_t st = in->floats ? replace_with_constant(c, op, type, NULL, out, count)
                                : replace_with_constant(c, op, type, out, NULL, count);
  free(out);
  return st;
}

/* ---- cast ---- */

/* Whether every value of `from` survives a trip through `to`. */
static bool lossless(vlmc_dtype_t from, vlmc_dtype_t to) {
  switch (from) {
    case VLMC_DTYPE_F16:
    case VLMC_DTYPE_BF16: return to == VLMC_DTYPE_F32 || to == VLMC_DTYPE_F64;
    case VLMC_DTYPE_F32: return to == VLMC_DTYPE_F64;
    case VLMC_DTYPE_I32: return to == VLMC_DTYPE_I64 || to == VLMC_DTYPE_F64;
    case VLMC_DTYPE_I8:
    case VLMC_DTYPE_U8:
      return to == VLMC_DTYPE_I32 || to == VLMC_DTYPE_I64 || to == VLMC_DTYPE_F32 ||
             to == VLMC_DTYPE_F64 || to == VLMC_DTYPE_F16 || to == VLMC_DTYPE_BF16;
    case VLMC_DTYPE_BOOL: return !vlmc_dtype_info(to)->is_quantized;
    default: return false;
  }
}

static bool int_fits(vlmc_dtype_t dtype, int64_t v) {
  switch (dtype) {
    case VLMC_DTYPE_I64: return true;
    case VLMC_DTYPE_I32: return v >= INT32_MIN && v <= INT32_MAX;
    case VLMC_DTYPE_I8: return v >= INT8_MIN && v <= INT8_MAX;
    case VLMC_DTYPE_U8: return v >= 0 && v <= UINT8_MAX;
    case VLMC_DTYPE_U32: return v >= 0 && v <= UINT32_MAX;
    case VLMC_DTYPE_BOOL: return v == 0 || v == 1;
    default: return false;
  }
}

/* Integer constants cast to an integer dtype they fit, or to f32/f64 where exact. */
static vlmc_status_t fold_cast_constant(canon_t *c, vlmc_op_t *op, const const_data_t *in) {
  vlmc_dtype_t to = op->results[0].type.dtype;
  double limit = to == VLMC_DTYPE_F64 ? 9007199254740992.0 : to == VLMC_DTYPE_F32 ? 16777216.0 : 0;
  bool to_int = int_fits(to, 0);
  if (!to_int && limit == 0) return NULL;
  for (size_t i = 0; i < in->count; ++i)
    if (to_int ? !int_fits(to, in->ints[i]) : fabs((double)in->ints[i]) > limit) return NULL;
  if (to_int) return replace_with_constant(c, op, &op->results[0].type, in->ints, NULL, in->count);
  double *out = malloc((in->count ? in->count : 1) * sizeof *out);
  if (!out) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < in->count; ++i) out[i] = (double)in->ints[i];
  vlmc_status_t st = replace_with_constant(c, op, &op->results[0].type, NULL, out, in->count);
  free(out);
  return st;
}

static vlmc_status_t fold_cast(canon_t *c, vlmc_op_t *op) {
  vlmc_value_t *x = op->operands[0];
  vlmc_dtype_t to = op->results[0].type.dtype;
  if (x->type.dtype == to) {
    replace_op(c, op, x);
    return NULL;
  }
  vlmc_op_t *inner = def_of(x, VLMC_OP_CAST);
  if (inner && inner->operands[0]->type.dtype == to && lossless(to, x->type.dtype)) {
    replace_op(c, op, inner->operands[0]);
    return NULL;
  }
  const_data_t in;
  size_t count;
  if (const_ints(x, &in) && foldable_count(c, &x->type, &count))
    return fold_cast_constant(c, op, &in);
  return NULL;
}

/* ---- reshape, transpose ---- */

static vlmc_status_t fold_reshape(canon_t *c, vlmc_op_t *op) {
  vlmc_value_t *x = op->operands[0];
  if (vlmc_type_equal(&x->type, &op->results[0].type)) {
    replace_op(c, op, x);
    return NULL;
  }
  vlmc_op_t *inner = def_of(x, VLMC_OP_RESHAPE);
  if (inner) {
    vlmc_op_set_operand(op, 0, inner->operands[0]);
    vlmc_pass_stat_add(c->ctx, STAT_FOLDED, 1);
    c->changed = true;
    return NULL;
  }
  const_data_t in;
  size_t count;
  if (!const_data(x, &in) || !foldable_count(c, &x->type, &count)) return NULL;
  return replace_with_constant(c, op, &op->results[0].type, in.floats ? NULL : in.ints, in.floats,
                               in.count);
}

static bool perm_is_identity(const vlmc_attr_t *perm) {
  for (size_t i = 0; i < perm->v.ints.count; ++i)
    if (perm->v.ints.data[i] != (int64_t)i) return false;
  return true;
}

static vlmc_status_t fold_transpose_constant(canon_t *c, vlmc_op_t *op, const const_data_t *in,
                                             const int64_t *perm, size_t count) {
  int64_t *src = malloc((count ? count : 1) * sizeof *src);
  if (!src) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  int64_t out_sizes[VLMC_IR_MAX_RANK], coords[VLMC_IR_MAX_RANK], in_coords[VLMC_IR_MAX_RANK];
  for (uint32_t d = 0; d < in->rank; ++d) out_sizes[d] = in->sizes[perm[d]];
  for (size_t i = 0; i < count; ++i) {
    unravel((int64_t)i, out_sizes, in->rank, coords);
    for (uint32_t d = 0; d < in->rank; ++d) in_coords[perm[d]] = coords[d];
    src[i] = ravel(in_coords, in->sizes, in->rank);
  }
  vlmc_status_t st = replace_by_moving(c, op, in, src, count);
  free(src);
  return st;
}

static vlmc_status_t fold_transpose(canon_t *c, vlmc_op_t *op) {
  vlmc_value_t *x = op->operands[0];
  const vlmc_attr_t *perm = vlmc_op_attr(op, "perm");
  if (perm_is_identity(perm)) {
    replace_op(c, op, x);
    return NULL;
  }
  vlmc_op_t *inner = def_of(x, VLMC_OP_TRANSPOSE);
  if (inner) {
    /* out[i] = x[outer[i]] = src[inner[outer[i]]] */
    const vlmc_attr_t *inner_perm = vlmc_op_attr(inner, "perm");
    int64_t composed[VLMC_IR_MAX_RANK];
    for (size_t i = 0; i < perm->v.ints.count; ++i)
      composed[i] = inner_perm->v.ints.data[perm->v.ints.data[i]];
    vlmc_attr_t attr = vlmc_attr_ints(composed, perm->v.ints.count);
    VLMC_RETURN_IF_ERROR(vlmc_op_set_attr(op, "perm", &attr));
    vlmc_op_set_operand(op, 0, inner->operands[0]);
    vlmc_pass_stat_add(c->ctx, STAT_FOLDED, 1);
    c->changed = true;
    return NULL;
  }
  const_data_t in;
  size_t count;
  if (!const_data(x, &in) || !foldable_count(c, &x->type, &count)) return NULL;
  return fold_transpose_constant(c, op, &in, perm->v.ints.data, count);
}

/* ---- permutations and gathers ---- */

static vlmc_status_t fold_inverse_permutation(canon_t *c, vlmc_op_t *op) {
  vlmc_value_t *x = op->operands[0];
  vlmc_op_t *inner = def_of(x, VLMC_OP_INVERSE_PERMUTATION);
  if (inner) {
    replace_op(c, op, inner->operands[0]);
    return NULL;
  }
  const_data_t in;
  size_t count;
  if (!const_ints(x, &in) || !foldable_count(c, &x->type, &count)) return NULL;
  int64_t *inv = malloc((count ? count : 1) * sizeof *inv);
  if (!inv) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_status_t st = vlmc_index_inverse_permutation(in.ints, count, inv);
  if (st) vlmc_status_free(st); /* not a permutation: the verifier reports it, not us */
  else st = replace_with_constant(c, op, &op->results[0].type, inv, NULL, count);
  free(inv);
  return st;
}

/* Whether a and b are p and inverse_permutation(p) in either order. */
static bool mutually_inverse(const vlmc_value_t *a, const vlmc_value_t *b) {
  vlmc_op_t *ia = def_of(a, VLMC_OP_INVERSE_PERMUTATION);
  vlmc_op_t *ib = def_of(b, VLMC_OP_INVERSE_PERMUTATION);
  return (ia && ia->operands[0] == b) || (ib && ib->operands[0] == a);
}

static bool is_iota(const const_data_t *idx) {
  if (idx->rank != 1) return false;
  for (size_t i = 0; i < idx->count; ++i)
    if (idx->ints[i] != (int64_t)i) return false;
  return true;
}

static vlmc_status_t fold_gather_constant(canon_t *c, vlmc_op_t *op, const const_data_t *x,
                                          const const_data_t *idx, int64_t axis, size_t count) {
  for (size_t i = 0; i < idx->count; ++i)
    if (idx->ints[i] < 0 || idx->ints[i] >= x->sizes[axis]) return NULL; /* the executor reports */
  int64_t *src = malloc((count ? count : 1) * sizeof *src);
  if (!src) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  const vlmc_type_t *type = &op->results[0].type;
  int64_t sizes[VLMC_IR_MAX_RANK], coords[VLMC_IR_MAX_RANK], in_coords[VLMC_IR_MAX_RANK];
  for (uint32_t d = 0; d < type->rank; ++d) sizes[d] = type->dims[d].off;
  for (size_t i = 0; i < count; ++i) {
    unravel((int64_t)i, sizes, type->rank, coords);
    int64_t at = ravel(coords + axis, idx->sizes, idx->rank);
    for (uint32_t d = 0; d < x->rank; ++d)
      in_coords[d] = d < axis ? coords[d] : d == axis ? idx->ints[at] : coords[d - 1 + idx->rank];
    src[i] = ravel(in_coords, x->sizes, x->rank);
  }
  vlmc_status_t st = replace_by_moving(c, op, x, src, count);
  free(src);
  return st;
}

static vlmc_status_t fold_gather(canon_t *c, vlmc_op_t *op) {
  vlmc_value_t *x = op->operands[0], *index = op->operands[1];
  int64_t axis = vlmc_op_attr_int(op, "axis");
  vlmc_op_t *inner = def_of(x, VLMC_OP_GATHER);
  if (inner && vlmc_op_attr_int(inner, "axis") == axis && index->type.rank == 1 &&
      mutually_inverse(index, inner->operands[1]) &&
      vlmc_type_equal(&inner->operands[0]->type, &op->results[0].type)) {
    replace_op(c, op, inner->operands[0]);
    return NULL;
  }
  const_data_t idx, in;
  size_t count;
  if (!const_ints(index, &idx) || !foldable_count(c, &index->type, &count)) return NULL;
  if (is_iota(&idx) && vlmc_type_equal(&x->type, &op->results[0].type)) {
    replace_op(c, op, x);
    return NULL;
  }
  if (!const_data(x, &in) || !foldable_count(c, &op->results[0].type, &count)) return NULL;
  return fold_gather_constant(c, op, &in, &idx, axis, count);
}

/* ---- integer arithmetic ---- */

static bool int_binary(vlmc_op_kind_t kind, int64_t a, int64_t b, int64_t *out) {
  if (kind == VLMC_OP_ADD) return vlmc_add_i64(a, b, out);
  if (kind == VLMC_OP_MUL) return vlmc_mul_i64(a, b, out);
  return !__builtin_sub_overflow(a, b, out);
}

/* Index of the operand element that broadcasts to output coords (right-aligned). */
static int64_t broadcast_source(const int64_t *coords, uint32_t rank, const const_data_t *in) {
  int64_t linear = 0;
  for (uint32_t d = 0; d < in->rank; ++d) {
    int64_t coord = coords[rank - in->rank + d];
    linear = linear * in->sizes[d] + (in->sizes[d] == 1 ? 0 : coord);
  }
  return linear;
}

static vlmc_status_t fold_int_binary(canon_t *c, vlmc_op_t *op) {
  const_data_t a, b;
  size_t count;
  const vlmc_type_t *type = &op->results[0].type;
  if (!const_ints(op->operands[0], &a) || !const_ints(op->operands[1], &b) ||
      !foldable_count(c, type, &count) || !vlmc_dtype_info(type->dtype)->is_int)
    return NULL;
  int64_t *out = malloc((count ? count : 1) * sizeof *out);
  if (!out) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  int64_t sizes[VLMC_IR_MAX_RANK], coords[VLMC_IR_MAX_RANK];
  for (uint32_t d = 0; d < type->rank; ++d) sizes[d] = type->dims[d].off;
  bool ok = true;
  for (size_t i = 0; ok && i < count; ++i) {
    unravel((int64_t)i, sizes, type->rank, coords);
    int64_t x = a.ints[broadcast_source(coords, type->rank, &a)];
    int64_t y = b.ints[broadcast_source(coords, type->rank, &b)];
    ok = int_binary(op->kind, x, y, &out[i]) && int_fits(type->dtype, out[i]);
  }
  vlmc_status_t st = ok ? replace_with_constant(c, op, type, out, NULL, count) : NULL;
  free(out);
  return st;
}

static vlmc_status_t fold_int_neg(canon_t *c, vlmc_op_t *op) {
  const_data_t in;
  size_t count;
  const vlmc_type_t *type = &op->results[0].type;
  if (!const_ints(op->operands[0], &in) || !foldable_count(c, type, &count)) return NULL;
  int64_t *out = malloc((count ? count : 1) * sizeof *out);
  if (!out) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  bool ok = true;
  for (size_t i = 0; ok && i < count; ++i) {
    ok = in.ints[i] != INT64_MIN && int_fits(type->dtype, -in.ints[i]);
    if (ok) out[i] = -in.ints[i];
  }
  vlmc_status_t st = ok ? replace_with_constant(c, op, type, out, NULL, count) : NULL;
  free(out);
  return st;
}

/* ---- slice, concat ---- */

static vlmc_status_t fold_slice(canon_t *c, vlmc_op_t *op) {
  const_data_t in;
  size_t count;
  if (!const_data(op->operands[0], &in) || !foldable_count(c, &op->results[0].type, &count))
    return NULL;
  int64_t axis = vlmc_op_attr_int(op, "axis"), start = vlmc_op_attr_int(op, "start");
  if (start < 0) start += in.sizes[axis];
  const vlmc_type_t *type = &op->results[0].type;
  int64_t sizes[VLMC_IR_MAX_RANK], coords[VLMC_IR_MAX_RANK];
  for (uint32_t d = 0; d < type->rank; ++d) sizes[d] = type->dims[d].off;
  int64_t *src = malloc((count ? count : 1) * sizeof *src);
  if (!src) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < count; ++i) {
    unravel((int64_t)i, sizes, type->rank, coords);
    coords[axis] += start;
    src[i] = ravel(coords, in.sizes, in.rank);
  }
  vlmc_status_t st = replace_by_moving(c, op, &in, src, count);
  free(src);
  return st;
}

static vlmc_status_t fold_concat(canon_t *c, vlmc_op_t *op) {
  const vlmc_type_t *type = &op->results[0].type;
  size_t count;
  if (!foldable_count(c, type, &count)) return NULL;
  const_data_t in;
  bool floats = false;
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    if (!const_data(op->operands[i], &in)) return NULL;
    if (i == 0) floats = in.floats != NULL;
    else if (floats != (in.floats != NULL)) return NULL;
  }
  int64_t axis = vlmc_op_attr_int(op, "axis");
  int64_t sizes[VLMC_IR_MAX_RANK], coords[VLMC_IR_MAX_RANK];
  for (uint32_t d = 0; d < type->rank; ++d) sizes[d] = type->dims[d].off;
  int64_t *ints = malloc((count ? count : 1) * sizeof *ints);
  double *reals = malloc((count ? count : 1) * sizeof *reals);
  vlmc_status_t st = NULL;
  if (!ints || !reals) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; !st && i < count; ++i) {
    unravel((int64_t)i, sizes, type->rank, coords);
    /* Walk past the operands that end before this coordinate along the axis. */
    uint32_t k = 0;
    const_data(op->operands[0], &in);
    while (coords[axis] >= in.sizes[axis]) {
      coords[axis] -= in.sizes[axis];
      const_data(op->operands[++k], &in);
    }
    int64_t at = ravel(coords, in.sizes, in.rank);
    if (floats) reals[i] = in.floats[at];
    else ints[i] = in.ints[at];
  }
  if (!st) st = replace_with_constant(c, op, type, floats ? NULL : ints, reals, count);
  free(ints);
  free(reals);
  return st;
}

/* ---- host index ops ---- */

static vlmc_status_t compute_index_op(const vlmc_op_t *op, const const_data_t *in,
                                      int64_t **out_data, size_t *out_count) {
  size_t images = in->rank == 2 ? (size_t)in->sizes[0] : 0;
  switch (op->kind) {
    case VLMC_OP_WINDOW_ORDER:
      return vlmc_index_window_order(in->ints, images, vlmc_op_attr_int(op, "window"),
                                     vlmc_op_attr_int(op, "patch"), vlmc_op_attr_int(op, "merge"),
                                     out_data, out_count);
    case VLMC_OP_WINDOW_SEGMENTS:
      return vlmc_index_window_segments(in->ints, images, vlmc_op_attr_int(op, "window"),
                                        vlmc_op_attr_int(op, "patch"),
                                        vlmc_op_attr_int(op, "merge"), out_data, out_count);
    case VLMC_OP_FULL_SEGMENTS:
      return vlmc_index_full_segments(in->ints, images, out_data, out_count);
    case VLMC_OP_VISION_POSITIONS:
      return vlmc_index_vision_positions(in->ints, images, vlmc_op_attr_int(op, "merge"), out_data,
                                         out_count);
    default: break;
  }
  /* token_positions: where the ids equal the token, in order. */
  int64_t token = vlmc_op_attr_int(op, "token");
  *out_data = malloc((in->count ? in->count : 1) * sizeof(int64_t));
  if (!*out_data) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  *out_count = 0;
  for (size_t i = 0; i < in->count; ++i)
    if (in->ints[i] == token) (*out_data)[(*out_count)++] = (int64_t)i;
  return NULL;
}

static vlmc_status_t fold_index_op(canon_t *c, vlmc_op_t *op) {
  const_data_t in;
  const vlmc_type_t *type = &op->results[0].type;
  size_t expected;
  /* A symbolic result length cannot take a constant without retyping its users. */
  if (!const_ints(op->operands[0], &in) || !foldable_count(c, type, &expected)) return NULL;
  int64_t *data = NULL;
  size_t count = 0;
  vlmc_status_t st = compute_index_op(op, &in, &data, &count);
  if (vlmc_status_code(st) == VLMC_OUT_OF_RANGE) {
    vlmc_status_free(st); /* too large to fold: the runtime computes it */
    free(data);
    return NULL;
  }
  if (!st && count != expected) {
    vlmc_strbuf_t text;
    vlmc_strbuf_init(&text);
    vlmc_type_print(op->block->func->module, type, &text);
    st = vlmc_op_locate_error(op, vlmc_status_make(VLMC_INVALID_ARGUMENT,
                                                   "the constant operand gives %zu entries, but "
                                                   "the result type is %s",
                                                   count, vlmc_strbuf_cstr(&text)));
    vlmc_strbuf_deinit(&text);
  } else if (!st) {
    st = replace_with_constant(c, op, type, data, NULL, count);
  } else {
    st = vlmc_op_locate_error(op, st);
  }
  free(data);
  return st;
}

/* pos_interp_index / pos_interp_weight of a constant grid: i64 corners or f32 weights. */
static vlmc_status_t fold_pos_interp(canon_t *c, vlmc_op_t *op) {
  const_data_t in;
  const vlmc_type_t *type = &op->results[0].type;
  size_t expected;
  if (!const_ints(op->operands[0], &in) || !foldable_count(c, type, &expected)) return NULL;
  bool weights = op->kind == VLMC_OP_POS_INTERP_WEIGHT;
  size_t images = in.rank == 2 ? (size_t)in.sizes[0] : 0;
  int64_t *index = NULL;
  float *weight = NULL;
  double *reals = NULL;
  size_t count = 0;
  vlmc_status_t st = vlmc_index_pos_interp(in.ints, images, vlmc_op_attr_int(op, "side"),
                                           vlmc_op_attr_int(op, "merge"),
                                           weights ? NULL : &index, weights ? &weight : NULL,
                                           &count);
  if (vlmc_status_code(st) == VLMC_OUT_OF_RANGE) {
    vlmc_status_free(st); /* too large to fold: the runtime computes it */
    return NULL;
  }
  if (!st && count != expected)
    st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "the constant grid gives %zu entries, but the "
                          "result has %zu", count, expected);
  if (!st && weights) {
    reals = malloc((count ? count : 1) * sizeof *reals);
    if (!reals) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; !st && i < count; ++i) reals[i] = weight[i];
  }
  if (!st) st = replace_with_constant(c, op, type, index, reals, count);
  else st = vlmc_op_locate_error(op, st);
  free(index);
  free(weight);
  free(reals);
  return st;
}

/* ---- driver ---- */

static vlmc_status_t canonicalize_op(canon_t *c, vlmc_op_t *op) {
  switch (op->kind) {
    case VLMC_OP_CAST: return fold_cast(c, op);
    case VLMC_OP_RESHAPE: return fold_reshape(c, op);
    case VLMC_OP_TRANSPOSE: return fold_transpose(c, op);
    case VLMC_OP_INVERSE_PERMUTATION: return fold_inverse_permutation(c, op);
    case VLMC_OP_GATHER: return fold_gather(c, op);
    case VLMC_OP_ADD:
    case VLMC_OP_SUB:
    case VLMC_OP_MUL: return fold_int_binary(c, op);
    case VLMC_OP_NEG: return fold_int_neg(c, op);
    case VLMC_OP_SLICE: return fold_slice(c, op);
    case VLMC_OP_CONCAT: return fold_concat(c, op);
    case VLMC_OP_WINDOW_ORDER:
    case VLMC_OP_WINDOW_SEGMENTS:
    case VLMC_OP_FULL_SEGMENTS:
    case VLMC_OP_VISION_POSITIONS:
    case VLMC_OP_TOKEN_POSITIONS: return fold_index_op(c, op);
    case VLMC_OP_POS_INTERP_INDEX:
    case VLMC_OP_POS_INTERP_WEIGHT: return fold_pos_interp(c, op);
    default: return NULL;
  }
}

static vlmc_status_t canonicalize_run(vlmc_pass_context_t *ctx, vlmc_module_t *module) {
  canon_t c = {ctx, vlmc_pass_option_int(ctx, "fold-limit"), true};
  int64_t max_iterations = vlmc_pass_option_int(ctx, "max-iterations");
  for (int64_t it = 0; c.changed && it < max_iterations; ++it) {
    c.changed = false;
    vlmc_pass_stat_add(ctx, STAT_ITERATIONS, 1);
    for (uint32_t f = 0; f < module->num_funcs; ++f) {
      for (vlmc_op_t *op = module->funcs[f]->body.first, *next; op; op = next) {
        next = op->next;
        VLMC_RETURN_IF_ERROR(canonicalize_op(&c, op));
      }
    }
  }
  return NULL;
}

const vlmc_pass_t vlmc_pass_canonicalize = {
    .name = "canonicalize",
    .summary = "fold identities, cancel inverse pairs, and fold small integer constants",
    .options = canonicalize_options,
    .num_options = sizeof canonicalize_options / sizeof canonicalize_options[0],
    .statistics = canonicalize_statistics,
    .num_statistics = sizeof canonicalize_statistics / sizeof canonicalize_statistics[0],
    .run = canonicalize_run,
};
