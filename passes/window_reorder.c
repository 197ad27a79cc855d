/* window-reorder: lowers `window_attention` (spec §3.3-§3.9) and moves the vision tower into
 * window order once, as transformers does: rows are gathered into window order before the
 * first block, stay in that order through every block and the merger, and are gathered back
 * by the inverse permutation once, after the merger.
 *
 * The model writes every block on original-order rows, so a per-op lowering would permute and
 * un-permute around each windowed attention. Instead the pass treats window order as a row
 * layout of whole values:
 *   1. The window_attention ops of one (grid, window, patch, merge) form a family.
 *   2. From them, the region of values that can live in window order grows through every op
 *      that acts row by row (linear, norms, elementwise, slices and reshapes that keep rows
 *      together, rope with its positions, attention over per-image segments of the same
 *      grid, ...). A value's layout is (axis, group): its rows along `axis`, `group`
 *      consecutive rows per merged token (merge^2 for patch rows, 1 for merged rows).
 *   3. Values entering the region from outside (function arguments, host index ops) are
 *      gathered into window order; values leaving it (to `return`, `tap`, or any op that is not
 *      row-wise) are gathered back with the inverse. Each window_attention becomes `attention`
 *      with the window segments as cu_seqlens. A gather by the inverse followed by a gather by
 *      the order (the model's window-order taps) cancels.
 * The window order of merged tokens is expanded to rows of `group` (row r of token j moves
 * with j). The inverse is always `inverse_permutation` of the order (inv[order[j]] = j),
 * never the order itself (spec §3.9).
 *
 * With a constant grid (a fixed image size) the order, its inverse and the segments are
 * computed here and become constants; the pass then checks that order ∘ inverse is the
 * identity and reports, per image, the merged grid and its window count (including the empty
 * windows of the "pad = k" quirk). With a grid known only at run time it emits window_order /
 * inverse_permutation / window_segments ops. Either way the remarks say where rows enter and
 * leave window order.
 *
 * Requires: verified IR. Invalidates: nothing cached. Leaves dead index ops for dce. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"
#include "support/checked_math.h"
#include "support/strbuf.h"

enum {
  STAT_LOWERED,
  STAT_REGION_OPS,
  STAT_TO_WINDOW,
  STAT_TO_IMAGE,
  STAT_CANCELLED,
};

static const char *const window_statistics[] = {
    "window-attention-lowered", "ops-in-window-order", "gathers-into-window-order",
    "gathers-back-to-image-order", "gather-pairs-cancelled"};

enum { MAX_GROUPS = 8, MAX_LEAVING = 256 };

typedef struct {
  int32_t axis;  /* -1: the slot is not a row-aligned operand */
  int64_t group; /* consecutive rows per merged token */
} layout_t;

static const layout_t kNotAligned = {-1, 0};

static bool layout_equal(layout_t a, layout_t b) { return a.axis == b.axis && a.group == b.group; }

/* Index vectors of one row group: the order expanded to rows of `group`, and its inverse. */
typedef struct {
  int64_t group;
  vlmc_value_t *order;
  vlmc_value_t *inverse;
} group_index_t;

typedef struct {
  vlmc_pass_context_t *ctx;
  vlmc_func_t *func;
  /* The family's key. */
  vlmc_value_t *grid;
  int64_t window, patch, merge;
  vlmc_dim_t tokens; /* merged tokens (M): the seed's patch count / merge^2 */
  vlmc_op_t *seed;       /* the first window_attention: where errors about the family point */
  vlmc_type_t seed_rows; /* its q, for messages */
  /* Region state, indexed by value id (ids below `size` existed when the region was grown). */
  uint32_t size;
  layout_t *layout;
  uint8_t *in_region;
  uint8_t *absorbed; /* by result id: the op computes in window order */
  vlmc_value_t **values;
  size_t num_values;
  /* Grid data when the grid is a constant (rows of t, h, w). */
  const int64_t *grid_data;
  size_t num_images;
  /* Index values, created before any rewrite, at the top of the function or after the grid. */
  group_index_t groups[MAX_GROUPS];
  size_t num_groups;
  vlmc_value_t *segments;
  vlmc_op_t *index_last; /* the last op of the index block; NULL if none were needed */
  vlmc_strbuf_t entered, left; /* remark text: where rows enter / leave window order */
  /* The gathers back to image order (before cancellation) and the layout they undo. */
  vlmc_op_t *leaving[MAX_LEAVING];
  layout_t leaving_layout[MAX_LEAVING];
  size_t num_leaving;
  bool fold; /* the grid is a constant and the rows static: index values are constants */
} family_t;

/* ---- small helpers ------------------------------------------------------------------------ */

static int64_t attr_int(const vlmc_op_t *op, const char *name) {
  return vlmc_op_attr_int(op, name);
}

static bool is_family_op(const family_t *fam, const vlmc_op_t *op) {
  return op->kind == VLMC_OP_WINDOW_ATTENTION && op->operands[3] == fam->grid &&
         attr_int(op, "window") == fam->window && attr_int(op, "patch") == fam->patch &&
         attr_int(op, "merge") == fam->merge;
}

/* Whether a == r * b for a positive integer r (static, or one symbol with no offsets). */
static bool dim_ratio(vlmc_dim_t a, vlmc_dim_t b, int64_t *out_r) {
  int64_t r = 0;
  if (vlmc_dim_is_static(a) && vlmc_dim_is_static(b)) {
    if (b.off <= 0 || a.off % b.off != 0) return false;
    r = a.off / b.off;
  } else if (a.sym == b.sym && a.off == 0 && b.off == 0) {
    int64_t num, den;
    if (!vlmc_mul_i64(a.num, b.den, &num) || !vlmc_mul_i64(a.den, b.num, &den) || den <= 0 ||
        num % den != 0)
      return false;
    r = num / den;
  } else {
    return false;
  }
  vlmc_dim_t check;
  vlmc_status_t st = vlmc_dim_mul(b, r, &check);
  bool ok = !st && r > 0 && vlmc_dim_equal(check, a);
  vlmc_status_free(st);
  if (ok) *out_r = r;
  return ok;
}

/* Rows along layout's axis, divided into the family's merged tokens. */
static bool layout_fits(const family_t *fam, const vlmc_type_t *type, layout_t l) {
  int64_t g;
  return l.axis >= 0 && (uint32_t)l.axis < type->rank &&
         dim_ratio(type->dims[l.axis], fam->tokens, &g) && g == l.group;
}

/* A printable label: the value's name hint, or its defining op. */
static void value_label(const vlmc_value_t *v, char *out, size_t size) {
  if (v->name) snprintf(out, size, "%%%s", v->name);
  else if (v->def) snprintf(out, size, "the result of %s", vlmc_op_info(v->def->kind)->mnemonic);
  else snprintf(out, size, "argument %u", v->index);
}

/* ---- row rules: how each op moves rows ---------------------------------------------------- */

static bool is_unary_rowwise(vlmc_op_kind_t kind) {
  switch (kind) {
    case VLMC_OP_NEG: case VLMC_OP_EXP: case VLMC_OP_SQRT: case VLMC_OP_RSQRT:
    case VLMC_OP_TANH: case VLMC_OP_ERF: case VLMC_OP_COS: case VLMC_OP_SIN:
    case VLMC_OP_SIGMOID: case VLMC_OP_SILU: case VLMC_OP_GELU: case VLMC_OP_CLAMP:
    case VLMC_OP_CAST:
      return true;
    default:
      return false;
  }
}

static bool is_binary(vlmc_op_kind_t kind) {
  return kind == VLMC_OP_ADD || kind == VLMC_OP_SUB || kind == VLMC_OP_MUL ||
         kind == VLMC_OP_DIV;
}

static bool same_constant_grid(const vlmc_value_t *a, const vlmc_value_t *b) {
  const vlmc_attr_t *da = vlmc_value_constant(a), *db = vlmc_value_constant(b);
  return da && db && vlmc_attr_equal(da, db) && vlmc_type_equal(&a->type, &b->type);
}

/* Per-image (per-frame) segments of the family's grid: the window permutation keeps every
 * image's rows inside its own range, so attention over them commutes with it. */
static bool full_segments_of_family(const family_t *fam, const vlmc_value_t *cu) {
  const vlmc_op_t *def = cu->def;
  if (!def || def->kind != VLMC_OP_FULL_SEGMENTS) return false;
  return def->operands[0] == fam->grid || same_constant_grid(def->operands[0], fam->grid);
}

/* Operand slots of the op for result layout r (slots[num_operands] is the result); false
 * when the op does not act row by row along r's axis. */
static bool operand_layouts(const family_t *fam, const vlmc_op_t *op, layout_t r,
                            layout_t *slots) {
  const vlmc_type_t *out = &op->results[0].type;
  if (op->num_results != 1 || r.axis < 0 || (uint32_t)r.axis >= out->rank) return false;
  for (uint32_t i = 0; i < op->num_operands; ++i) slots[i] = kNotAligned;
  slots[op->num_operands] = r;
  bool last_axis = (uint32_t)r.axis + 1 == out->rank;
  if (is_unary_rowwise(op->kind)) {
    slots[0] = r;
    return true;
  }
  if (is_binary(op->kind)) {
    bool any = false;
    for (uint32_t i = 0; i < 2; ++i) {
      const vlmc_type_t *t = &op->operands[i]->type;
      int32_t axis = r.axis - (int32_t)(out->rank - t->rank);
      if (axis < 0 || !vlmc_dim_equal(t->dims[axis], out->dims[r.axis])) continue;
      slots[i] = (layout_t){axis, r.group};
      any = true;
    }
    return any;
  }
  switch (op->kind) {
    case VLMC_OP_LINEAR:
    case VLMC_OP_RMS_NORM:
    case VLMC_OP_LAYER_NORM:
      if (last_axis) return false; /* the contracted / normalised axis */
      slots[0] = r;
      return true;
    case VLMC_OP_SOFTMAX:
    case VLMC_OP_SLICE:
      if (attr_int(op, "axis") == r.axis) return false;
      slots[0] = r;
      return true;
    case VLMC_OP_CONCAT:
      if (attr_int(op, "axis") == r.axis) return false;
      for (uint32_t i = 0; i < op->num_operands; ++i) slots[i] = r;
      return true;
    case VLMC_OP_RESHAPE: {
      /* Rows stay together when both sides have the row axis first and the same tokens. */
      const vlmc_type_t *in = &op->operands[0]->type;
      int64_t group;
      if (r.axis != 0 || in->rank < 1 || !layout_fits(fam, out, r) ||
          !dim_ratio(in->dims[0], fam->tokens, &group))
        return false;
      slots[0] = (layout_t){0, group};
      return true;
    }
    case VLMC_OP_ROPE:
      if (r.axis != 0) return false;
      slots[0] = r;
      slots[1] = (layout_t){op->operands[1]->type.rank == 2 ? 1 : 0, r.group};
      return true;
    case VLMC_OP_ATTENTION: {
      const vlmc_attr_t *causal = vlmc_op_attr(op, "causal");
      if (r.axis != 0 || op->num_operands != 4 || (causal && causal->v.b) ||
          r.group != fam->merge * fam->merge || !full_segments_of_family(fam, op->operands[3]))
        return false;
      slots[0] = slots[1] = slots[2] = r;
      return true;
    }
    case VLMC_OP_WINDOW_ATTENTION:
      if (r.axis != 0 || r.group != fam->merge * fam->merge || !is_family_op(fam, op))
        return false;
      slots[0] = slots[1] = slots[2] = r;
      return true;
    default:
      return false;
  }
}

/* The result layout implied by slot `anchor` having layout `known`. */
static bool result_layout(const family_t *fam, const vlmc_op_t *op, uint32_t anchor,
                          layout_t known, layout_t *out) {
  if (op->num_results != 1) return false;
  if (anchor == op->num_operands) {
    *out = known;
    return true;
  }
  const vlmc_type_t *res = &op->results[0].type;
  if (is_binary(op->kind)) {
    *out = (layout_t){known.axis + (int32_t)(res->rank - op->operands[anchor]->type.rank),
                      known.group};
    return true;
  }
  if (op->kind == VLMC_OP_RESHAPE) {
    int64_t group;
    if (known.axis != 0 || res->rank < 1 || !dim_ratio(res->dims[0], fam->tokens, &group))
      return false;
    *out = (layout_t){0, group};
    return true;
  }
  if (op->kind == VLMC_OP_ROPE && anchor == 1) {
    *out = (layout_t){0, known.group};
    return true;
  }
  *out = known;
  return true;
}

/* All slot layouts of op given one; false for a boundary op. `slots` has num_operands + 1. */
static bool op_slots(const family_t *fam, const vlmc_op_t *op, uint32_t anchor, layout_t known,
                     layout_t *slots) {
  layout_t r;
  if (!result_layout(fam, op, anchor, known, &r) || !operand_layouts(fam, op, r, slots))
    return false;
  if (!layout_equal(slots[anchor], known)) return false;
  for (uint32_t i = 0; i <= op->num_operands; ++i) {
    const vlmc_value_t *v = i == op->num_operands ? &op->results[0] : op->operands[i];
    if (slots[i].axis >= 0 && !layout_fits(fam, &v->type, slots[i])) return false;
  }
  return true;
}

/* ---- growing the region ------------------------------------------------------------------- */

static layout_t *slots_alloc(const vlmc_op_t *op) {
  return malloc((op->num_operands + 1) * sizeof(layout_t));
}

static vlmc_status_t region_add(family_t *fam, vlmc_value_t *v, layout_t l) {
  assert(v->id < fam->size);
  if (fam->in_region[v->id]) return NULL;
  fam->in_region[v->id] = 1;
  fam->layout[v->id] = l;
  fam->values[fam->num_values++] = v;
  return NULL;
}

/* Absorbs op into the region when it is row-wise from slot `anchor` and none of its row slots
 * is already in the region with another layout. */
static vlmc_status_t try_absorb(family_t *fam, vlmc_op_t *op, uint32_t anchor, layout_t known) {
  if (op->num_results != 1 || fam->absorbed[op->results[0].id]) return NULL;
  layout_t *slots = slots_alloc(op);
  if (!slots) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  bool ok = op_slots(fam, op, anchor, known, slots);
  for (uint32_t i = 0; ok && i <= op->num_operands; ++i) {
    const vlmc_value_t *v = i == op->num_operands ? &op->results[0] : op->operands[i];
    if (slots[i].axis >= 0 && fam->in_region[v->id] &&
        !layout_equal(fam->layout[v->id], slots[i]))
      ok = false;
  }
  if (ok) {
    fam->absorbed[op->results[0].id] = 1;
    for (uint32_t i = 0; i <= op->num_operands; ++i) {
      vlmc_value_t *v = i == op->num_operands ? &op->results[0] : op->operands[i];
      if (slots[i].axis >= 0) region_add(fam, v, slots[i]);
    }
  }
  free(slots);
  return NULL;
}

static vlmc_status_t grow_from(family_t *fam, vlmc_value_t *v) {
  layout_t l = fam->layout[v->id];
  if (v->def) VLMC_RETURN_IF_ERROR(try_absorb(fam, v->def, v->def->num_operands, l));
  for (vlmc_op_t *op = fam->func->body.first; op; op = op->next)
    for (uint32_t i = 0; i < op->num_operands; ++i)
      if (op->operands[i] == v) VLMC_RETURN_IF_ERROR(try_absorb(fam, op, i, l));
  return NULL;
}

/* Why a window_attention of the family cannot join it: its rows are other tokens. */
static vlmc_status_t rows_mismatch(const family_t *fam, const vlmc_op_t *op) {
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  vlmc_type_print(fam->func->module, &op->operands[0]->type, &text);
  vlmc_strbuf_puts(&text, " vs ");
  vlmc_type_print(fam->func->module, &fam->seed_rows, &text);
  vlmc_status_t st = vlmc_status_make(VLMC_UNSUPPORTED,
                                      "window-reorder: the rows of this window_attention are not "
                                      "those of the first one on its grid (%s)",
                                      vlmc_strbuf_cstr(&text));
  vlmc_strbuf_deinit(&text);
  return st;
}

static vlmc_status_t grow_region(family_t *fam) {
  layout_t patch_rows = {0, fam->merge * fam->merge};
  for (vlmc_op_t *op = fam->func->body.first; op; op = op->next) {
    if (!is_family_op(fam, op)) continue;
    VLMC_RETURN_IF_ERROR(try_absorb(fam, op, op->num_operands, patch_rows));
    if (!fam->absorbed[op->results[0].id])
      return vlmc_op_locate_error(op, rows_mismatch(fam, op));
  }
  for (size_t i = 0; i < fam->num_values; ++i) VLMC_RETURN_IF_ERROR(grow_from(fam, fam->values[i]));
  return NULL;
}

/* ---- index values ------------------------------------------------------------------------- */

static void builder_at_index_block(family_t *fam, vlmc_builder_t *b) {
  vlmc_builder_init(b, fam->func);
  /* The block starts right after the grid's definition (or at the top for an argument, and
   * for constants, which read nothing). */
  vlmc_op_t *after = fam->index_last ? fam->index_last : fam->fold ? NULL : fam->grid->def;
  vlmc_op_t *before = after ? after->next : fam->func->body.first;
  if (before) vlmc_builder_set_insert_before(b, before);
}

static void index_created(family_t *fam, vlmc_value_t *v) { fam->index_last = v->def; }

static vlmc_named_attr_t *window_attrs(const family_t *fam, vlmc_named_attr_t *attrs) {
  attrs[0] = (vlmc_named_attr_t){"window", vlmc_attr_int(fam->window)};
  attrs[1] = (vlmc_named_attr_t){"patch", vlmc_attr_int(fam->patch)};
  attrs[2] = (vlmc_named_attr_t){"merge", vlmc_attr_int(fam->merge)};
  return attrs;
}

static vlmc_status_t index_op(family_t *fam, vlmc_op_kind_t kind, vlmc_value_t *operand,
                              uint32_t num_attrs, const vlmc_named_attr_t *attrs,
                              const vlmc_type_t *declared, const char *name, vlmc_value_t **out) {
  vlmc_builder_t b;
  builder_at_index_block(fam, &b);
  vlmc_op_t *op;
  VLMC_RETURN_IF_ERROR(
      vlmc_builder_op(&b, kind, 1, &operand, num_attrs, attrs, declared, name, &op));
  *out = &op->results[0];
  index_created(fam, *out);
  return NULL;
}

static vlmc_status_t index_constant(family_t *fam, const int64_t *data, size_t count,
                                    const char *name, vlmc_value_t **out) {
  vlmc_builder_t b;
  builder_at_index_block(fam, &b);
  int64_t n = (int64_t)count;
  vlmc_type_t type = vlmc_type_make(VLMC_DTYPE_I64, 1, &n);
  VLMC_RETURN_IF_ERROR(vlmc_builder_constant_ints(&b, &type, data, count, name, out));
  index_created(fam, *out);
  return NULL;
}

static vlmc_status_t index_binary(family_t *fam, vlmc_op_kind_t kind, vlmc_value_t *a,
                                  vlmc_value_t *c, vlmc_value_t **out) {
  vlmc_builder_t b;
  builder_at_index_block(fam, &b);
  vlmc_value_t *operands[2] = {a, c};
  VLMC_RETURN_IF_ERROR(vlmc_builder_simple(&b, kind, 2, operands, NULL, out));
  index_created(fam, *out);
  return NULL;
}

static vlmc_status_t index_reshape(family_t *fam, vlmc_value_t *x, uint32_t rank,
                                   const vlmc_dim_t *dims, const char *name, vlmc_value_t **out) {
  vlmc_builder_t b;
  builder_at_index_block(fam, &b);
  vlmc_type_t type = {VLMC_DTYPE_I64, rank, {{0}}};
  memcpy(type.dims, dims, rank * sizeof *dims);
  VLMC_RETURN_IF_ERROR(vlmc_builder_reshape(&b, x, &type, name, out));
  index_created(fam, *out);
  return NULL;
}

static vlmc_status_t small_constant(family_t *fam, const int64_t *data, int64_t cols,
                                    vlmc_value_t **out) {
  vlmc_builder_t b;
  builder_at_index_block(fam, &b);
  int64_t sizes[2] = {1, cols};
  vlmc_type_t type = vlmc_type_make(VLMC_DTYPE_I64, 2, sizes);
  VLMC_RETURN_IF_ERROR(vlmc_builder_constant_ints(&b, &type, data, (size_t)cols, NULL, out));
  index_created(fam, *out);
  return NULL;
}

/* order_g[j * g + r] = order[j] * g + r, built from ops: (order[T,1] * g) + [0..g-1]. */
static vlmc_status_t expand_ops(family_t *fam, vlmc_value_t *order, int64_t group,
                                vlmc_value_t **out) {
  vlmc_dim_t column[2] = {fam->tokens, vlmc_dim_static(1)}, rows;
  vlmc_value_t *o2, *scaled, *grouped, *g, *iota;
  int64_t iota_data[64];
  if (group > 64)
    return vlmc_status_make(VLMC_UNSUPPORTED, "window-reorder: %lld rows per merged token",
                            (long long)group);
  for (int64_t r = 0; r < group; ++r) iota_data[r] = r;
  VLMC_RETURN_IF_ERROR(index_reshape(fam, order, 2, column, NULL, &o2));
  VLMC_RETURN_IF_ERROR(small_constant(fam, &group, 1, &g));
  VLMC_RETURN_IF_ERROR(index_binary(fam, VLMC_OP_MUL, o2, g, &scaled));
  VLMC_RETURN_IF_ERROR(small_constant(fam, iota_data, group, &iota));
  VLMC_RETURN_IF_ERROR(index_binary(fam, VLMC_OP_ADD, scaled, iota, &grouped));
  VLMC_RETURN_IF_ERROR(vlmc_dim_mul(fam->tokens, group, &rows));
  char name[64];
  snprintf(name, sizeof name, "window_order_x%lld", (long long)group);
  return index_reshape(fam, grouped, 1, &rows, name, out);
}

static vlmc_status_t expand_data(const int64_t *order, size_t count, int64_t group,
                                 int64_t **out) {
  *out = malloc((count * (size_t)group + 1) * sizeof **out);
  if (!*out) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (size_t j = 0; j < count; ++j)
    for (int64_t r = 0; r < group; ++r)
      (*out)[j * (size_t)group + (size_t)r] = order[j] * group + r;
  return NULL;
}

/* The pass's proof obligation: the inverse really undoes the order, both ways. */
static vlmc_status_t check_inverse(const int64_t *order, const int64_t *inverse, size_t count) {
  for (size_t j = 0; j < count; ++j)
    if (inverse[order[j]] != (int64_t)j || order[inverse[j]] != (int64_t)j)
      return vlmc_status_make(VLMC_INTERNAL,
                              "window-reorder: order ∘ inverse is not the identity at %zu", j);
  return NULL;
}

static vlmc_status_t constant_group(family_t *fam, const int64_t *order, size_t count,
                                    group_index_t *g) {
  int64_t *expanded, *inverse = NULL;
  VLMC_RETURN_IF_ERROR(expand_data(order, count, g->group, &expanded));
  size_t rows = count * (size_t)g->group;
  vlmc_status_t st = NULL;
  if (!(inverse = malloc((rows + 1) * sizeof *inverse)))
    st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (!st) st = vlmc_index_inverse_permutation(expanded, rows, inverse);
  if (!st) st = check_inverse(expanded, inverse, rows);
  char name[64];
  snprintf(name, sizeof name, g->group == 1 ? "window_order" : "window_order_x%lld",
           (long long)g->group);
  if (!st) st = index_constant(fam, expanded, rows, name, &g->order);
  snprintf(name, sizeof name, g->group == 1 ? "window_inverse" : "window_inverse_x%lld",
           (long long)g->group);
  if (!st) st = index_constant(fam, inverse, rows, name, &g->inverse);
  free(expanded);
  free(inverse);
  return st;
}

static vlmc_status_t symbolic_group(family_t *fam, vlmc_value_t *order1, group_index_t *g) {
  g->order = order1;
  if (g->group > 1) VLMC_RETURN_IF_ERROR(expand_ops(fam, order1, g->group, &g->order));
  char name[64];
  snprintf(name, sizeof name, g->group == 1 ? "window_inverse" : "window_inverse_x%lld",
           (long long)g->group);
  return index_op(fam, VLMC_OP_INVERSE_PERMUTATION, g->order, 0, NULL, NULL, name,
                  &g->inverse);
}

/* The groups the region's values use, each once. */
static void collect_groups(family_t *fam) {
  fam->num_groups = 0;
  fam->groups[fam->num_groups++].group = 1;
  for (size_t i = 0; i < fam->num_values; ++i) {
    int64_t g = fam->layout[fam->values[i]->id].group;
    bool seen = false;
    for (size_t k = 0; k < fam->num_groups; ++k) seen = seen || fam->groups[k].group == g;
    if (!seen && fam->num_groups < MAX_GROUPS) fam->groups[fam->num_groups++].group = g;
  }
}

static bool symbol_exists(const vlmc_module_t *module, const char *name) {
  for (uint32_t i = 0; i < module->num_symbols; ++i)
    if (strcmp(module->symbols[i], name) == 0) return true;
  return false;
}

/* A fresh symbol for the data-dependent number of window boundaries. */
static vlmc_status_t segments_symbol(vlmc_module_t *module, uint32_t *out_sym) {
  char name[32] = "W";
  for (int n = 1; symbol_exists(module, name); ++n) snprintf(name, sizeof name, "W%d", n);
  return vlmc_module_symbol(module, name, out_sym);
}

static vlmc_status_t create_constant_indices(family_t *fam) {
  int64_t *order = NULL, *cu = NULL;
  size_t count = 0, cu_count = 0;
  vlmc_status_t st = vlmc_index_window_order(fam->grid_data, fam->num_images, fam->window,
                                             fam->patch, fam->merge, &order, &count);
  if (!st && (int64_t)count != fam->tokens.off)
    st = vlmc_status_make(VLMC_INVALID_ARGUMENT,
                          "window-reorder: the grid has %zu merged tokens, but the rows hold "
                          "%lld", count, (long long)fam->tokens.off);
  for (size_t k = 0; !st && k < fam->num_groups; ++k)
    st = constant_group(fam, order, count, &fam->groups[k]);
  if (!st)
    st = vlmc_index_window_segments(fam->grid_data, fam->num_images, fam->window, fam->patch,
                                    fam->merge, &cu, &cu_count);
  if (!st) st = index_constant(fam, cu, cu_count, "window_segments", &fam->segments);
  free(order);
  free(cu);
  return st;
}

static vlmc_status_t create_symbolic_indices(family_t *fam) {
  vlmc_named_attr_t attrs[3];
  window_attrs(fam, attrs);
  vlmc_type_t order_type = {VLMC_DTYPE_I64, 1, {fam->tokens}};
  vlmc_value_t *order1;
  VLMC_RETURN_IF_ERROR(index_op(fam, VLMC_OP_WINDOW_ORDER, fam->grid, 3, attrs, &order_type,
                                "window_order", &order1));
  for (size_t k = 0; k < fam->num_groups; ++k)
    VLMC_RETURN_IF_ERROR(symbolic_group(fam, order1, &fam->groups[k]));
  uint32_t sym;
  VLMC_RETURN_IF_ERROR(segments_symbol(fam->func->module, &sym));
  vlmc_type_t cu_type = {VLMC_DTYPE_I64, 1, {{0}}};
  VLMC_RETURN_IF_ERROR(vlmc_dim_symbolic(sym, 1, 1, 0, &cu_type.dims[0]));
  return index_op(fam, VLMC_OP_WINDOW_SEGMENTS, fam->grid, 3, attrs, &cu_type,
                  "window_segments", &fam->segments);
}

static group_index_t *group_of(family_t *fam, int64_t group) {
  for (size_t k = 0; k < fam->num_groups; ++k)
    if (fam->groups[k].group == group) return &fam->groups[k];
  return NULL;
}

/* Other window_order ops of this grid (the model's window-order taps) read the pass's order
 * instead, so that their gathers meet the pass's inverse gathers and cancel. */
static void adopt_existing_orders(family_t *fam) {
  vlmc_value_t *mine = group_of(fam, 1)->order;
  for (vlmc_op_t *op = fam->func->body.first; op; op = op->next) {
    if (op->kind != VLMC_OP_WINDOW_ORDER || &op->results[0] == mine) continue;
    bool same_grid = op->operands[0] == fam->grid || same_constant_grid(op->operands[0], fam->grid);
    if (same_grid && attr_int(op, "window") == fam->window && attr_int(op, "patch") == fam->patch &&
        attr_int(op, "merge") == fam->merge && vlmc_type_equal(&op->results[0].type, &mine->type))
      vlmc_value_replace_all_uses(&op->results[0], mine);
  }
}

/* ---- moving rows in and out --------------------------------------------------------------- */

static bool op_follows(const vlmc_op_t *first, const vlmc_op_t *later) {
  for (const vlmc_op_t *op = first ? first->next : NULL; op; op = op->next)
    if (op == later) return true;
  return false;
}

/* Conversions go right after v's definition, or after the index block when that is later. */
static vlmc_op_t *conversion_point(const family_t *fam, const vlmc_value_t *v) {
  if (!v->def) return fam->index_last;
  return op_follows(fam->index_last, v->def) ? v->def : fam->index_last;
}

typedef struct {
  vlmc_op_t *op;
  uint32_t index;
} use_t;

static vlmc_status_t convert(family_t *fam, vlmc_value_t *v, bool to_window,
                             vlmc_value_t **out) {
  layout_t l = fam->layout[v->id];
  group_index_t *g = group_of(fam, l.group);
  assert(g && "every layout's group has index values");
  vlmc_builder_t b;
  vlmc_builder_init(&b, fam->func);
  vlmc_op_t *after = conversion_point(fam, v);
  vlmc_op_t *before = after ? after->next : fam->func->body.first;
  if (before) vlmc_builder_set_insert_before(&b, before);
  char name[160];
  if (v->name) snprintf(name, sizeof name, "%s.%s", v->name, to_window ? "win" : "img");
  VLMC_RETURN_IF_ERROR(vlmc_builder_gather(&b, v, to_window ? g->order : g->inverse, l.axis,
                                           v->name ? name : NULL, out));
  if (to_window) {
    vlmc_pass_stat_add(fam->ctx, STAT_TO_WINDOW, 1);
    char label[160];
    value_label(v, label, sizeof label);
    vlmc_strbuf_printf(&fam->entered, "%s%s (axis %d, rows of %lld)",
                       fam->entered.len ? ", " : "", label, l.axis, (long long)l.group);
  } else if (fam->num_leaving < MAX_LEAVING) {
    fam->leaving_layout[fam->num_leaving] = l;
    fam->leaving[fam->num_leaving++] = (*out)->def;
  }
  return NULL;
}

/* Whether operand `index` of op is one of its rows in the region. */
static vlmc_status_t region_use(const family_t *fam, const vlmc_op_t *op, uint32_t index,
                                bool *out) {
  *out = false;
  if (op->num_results != 1 || op->results[0].id >= fam->size || !fam->absorbed[op->results[0].id])
    return NULL;
  layout_t *slots = slots_alloc(op);
  if (!slots) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  *out = operand_layouts(fam, op, fam->layout[op->results[0].id], slots) &&
         slots[index].axis >= 0;
  free(slots);
  return NULL;
}

static vlmc_status_t collect_uses(const family_t *fam, const vlmc_value_t *v, use_t **out,
                                  size_t *out_count) {
  size_t n = 0, cap = 8;
  use_t *uses = malloc(cap * sizeof *uses);
  for (vlmc_op_t *op = fam->func->body.first; uses && op; op = op->next)
    for (uint32_t i = 0; i < op->num_operands; ++i) {
      if (op->operands[i] != v) continue;
      if (n == cap) {
        use_t *grown = realloc(uses, 2 * cap * sizeof *uses);
        if (!grown) break;
        uses = grown;
        cap *= 2;
      }
      uses[n++] = (use_t){op, i};
    }
  if (!uses) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  *out = uses;
  *out_count = n;
  return NULL;
}

/* Rewires the uses of one region value: window-order rows to ops outside the region go
 * through the inverse; image-order rows entering the region go through the order. */
static vlmc_status_t rewire_value(family_t *fam, vlmc_value_t *v) {
  bool in_window = v->def && fam->absorbed[v->def->results[0].id];
  use_t *uses = NULL;
  size_t count = 0;
  VLMC_RETURN_IF_ERROR(collect_uses(fam, v, &uses, &count));
  vlmc_value_t *converted = NULL;
  vlmc_status_t st = NULL;
  for (size_t i = 0; !st && i < count; ++i) {
    bool inside;
    st = region_use(fam, uses[i].op, uses[i].index, &inside);
    if (st || inside == in_window) continue;
    vlmc_op_t *point = conversion_point(fam, v);
    if (point && !op_follows(point, uses[i].op))
      st = vlmc_op_locate_error(uses[i].op,
                                vlmc_status_make(VLMC_UNSUPPORTED,
                                                 "window-reorder: this op uses rows before the "
                                                 "grid's window order can be computed"));
    if (!st && !converted) st = convert(fam, v, !in_window, &converted);
    if (!st) vlmc_op_set_operand(uses[i].op, uses[i].index, converted);
  }
  free(uses);
  return st;
}

/* window_attention -> attention over the window segments (its rows are in window order). */
static vlmc_status_t lower_window_attention(family_t *fam, vlmc_op_t *op) {
  vlmc_builder_t b;
  vlmc_builder_init(&b, fam->func);
  vlmc_builder_set_insert_before(&b, op);
  b.loc = op->loc;
  vlmc_value_t *operands[4] = {op->operands[0], op->operands[1], op->operands[2], fam->segments};
  const vlmc_attr_t *scale = vlmc_op_attr(op, "scale");
  vlmc_named_attr_t attr = {"scale", scale ? *scale : vlmc_attr_float(0)};
  vlmc_op_t *attention;
  VLMC_RETURN_IF_ERROR(vlmc_builder_op(&b, VLMC_OP_ATTENTION, 4, operands, scale ? 1 : 0, &attr,
                                       NULL, op->results[0].name, &attention));
  vlmc_value_replace_all_uses(&op->results[0], &attention->results[0]);
  vlmc_op_erase(op);
  vlmc_pass_stat_add(fam->ctx, STAT_LOWERED, 1);
  return NULL;
}

/* gather(gather(x, inverse), order) and gather(gather(x, order), inverse) are x. */
static bool cancelling_pair(const family_t *fam, const vlmc_value_t *first,
                            const vlmc_value_t *second) {
  for (size_t k = 0; k < fam->num_groups; ++k) {
    const group_index_t *g = &fam->groups[k];
    if ((first == g->inverse && second == g->order) || (first == g->order && second == g->inverse))
      return true;
  }
  return false;
}

static void cancel_gather_pairs(family_t *fam) {
  for (vlmc_op_t *op = fam->func->body.first, *next; op; op = next) {
    next = op->next;
    const vlmc_op_t *inner = op->operands && op->num_operands ? op->operands[0]->def : NULL;
    if (op->kind != VLMC_OP_GATHER || !inner || inner->kind != VLMC_OP_GATHER ||
        attr_int(op, "axis") != attr_int(inner, "axis") ||
        !cancelling_pair(fam, inner->operands[1], op->operands[1]) ||
        !vlmc_type_equal(&op->results[0].type, &inner->operands[0]->type))
      continue;
    vlmc_value_replace_all_uses(&op->results[0], inner->operands[0]);
    vlmc_op_erase(op);
    vlmc_pass_stat_add(fam->ctx, STAT_CANCELLED, 1);
  }
}

/* ---- remarks ------------------------------------------------------------------------------ */

static void remark_windows(family_t *fam, size_t lowered) {
  int64_t k = fam->window / (fam->patch * fam->merge);
  char grid[160];
  value_label(fam->grid, grid, sizeof grid);
  vlmc_pass_remark(fam->ctx,
                   "@%s: %zu window_attention on %s lowered to attention over window segments "
                   "(window %lld px = %lldx%lld merged tokens)",
                   fam->func->name, lowered, grid, (long long)fam->window, (long long)k,
                   (long long)k);
  if (!fam->grid_data) {
    vlmc_pass_remark(fam->ctx, "@%s: window count per image: computed at run time from %s",
                     fam->func->name, grid);
    return;
  }
  size_t windows = 0;
  for (size_t i = 0; i < fam->num_images; ++i) {
    const int64_t *g = &fam->grid_data[3 * i];
    int64_t h = g[1] / fam->merge, w = g[2] / fam->merge;
    /* The padding is k - side % k, a whole empty row/column of windows when side % k == 0. */
    int64_t nh = h / k + 1, nw = w / k + 1, full = ((h + k - 1) / k) * ((w + k - 1) / k);
    windows += (size_t)(g[0] * full);
    int64_t empty = nh * nw - full;
    vlmc_pass_remark(fam->ctx,
                     "@%s: image %zu: grid %lldx%lldx%lld, merged %lldx%lld: %lldx%lld windows "
                     "per frame, %lld with tokens%s",
                     fam->func->name, i, (long long)g[0], (long long)g[1], (long long)g[2],
                     (long long)h, (long long)w, (long long)nh, (long long)nw, (long long)full,
                     empty ? " (the rest empty: pad = k when a side is a multiple of k)" : "");
  }
  vlmc_pass_remark(fam->ctx,
                   "@%s: windows with tokens: %zu in all; order ∘ inverse = identity checked on "
                   "%lld merged tokens",
                   fam->func->name, windows, (long long)fam->tokens.off);
}

static bool op_linked(const vlmc_func_t *func, const vlmc_op_t *target) {
  for (const vlmc_op_t *op = func->body.first; op; op = op->next)
    if (op == target) return true;
  return false;
}

/* The gathers back to image order that survived cancellation, with the ops they feed; counts
 * them in the statistics. */
static void describe_leaving(family_t *fam) {
  for (size_t i = 0; i < fam->num_leaving; ++i) {
    const vlmc_op_t *gather = fam->leaving[i];
    if (!op_linked(fam->func, gather) || !vlmc_value_use_count(&gather->results[0])) continue;
    /* The operand may be a lowered window_attention by now (a new value): use what was
     * recorded when the gather was made. */
    char label[160];
    value_label(gather->operands[0], label, sizeof label);
    layout_t l = fam->leaving_layout[i];
    vlmc_strbuf_printf(&fam->left, "%s%s (axis %d, rows of %lld) for", fam->left.len ? "; " : "",
                       label, l.axis, (long long)l.group);
    for (const vlmc_op_t *op = fam->func->body.first; op; op = op->next)
      for (uint32_t k = 0; k < op->num_operands; ++k) {
        if (op->operands[k] != &gather->results[0]) continue;
        const vlmc_attr_t *name = op->kind == VLMC_OP_TAP ? vlmc_op_attr(op, "name") : NULL;
        if (name) vlmc_strbuf_printf(&fam->left, " tap @%s", name->v.symbol);
        else vlmc_strbuf_printf(&fam->left, " %s", vlmc_op_info(op->kind)->mnemonic);
      }
    vlmc_pass_stat_add(fam->ctx, STAT_TO_IMAGE, 1);
  }
}

static void remark_region(family_t *fam, size_t ops) {
  vlmc_pass_remark(fam->ctx, "@%s: %zu ops run in window order; rows enter it at: %s",
                   fam->func->name, ops, fam->entered.len ? vlmc_strbuf_cstr(&fam->entered)
                                                          : "(nowhere)");
  vlmc_pass_remark(fam->ctx, "@%s: rows return to image order at: %s", fam->func->name,
                   fam->left.len ? vlmc_strbuf_cstr(&fam->left) : "(nowhere)");
}

/* ---- one family --------------------------------------------------------------------------- */

static vlmc_status_t family_init(family_t *fam, vlmc_pass_context_t *ctx, vlmc_op_t *seed) {
  memset(fam, 0, sizeof *fam);
  fam->ctx = ctx;
  fam->func = seed->block->func;
  fam->grid = seed->operands[3];
  fam->window = attr_int(seed, "window");
  fam->patch = attr_int(seed, "patch");
  fam->merge = attr_int(seed, "merge");
  fam->seed = seed;
  fam->seed_rows = seed->operands[0]->type;
  vlmc_strbuf_init(&fam->entered);
  vlmc_strbuf_init(&fam->left);
  vlmc_status_t st = vlmc_dim_div(seed->operands[0]->type.dims[0], fam->merge * fam->merge,
                                  &fam->tokens);
  if (st)
    return vlmc_op_locate_error(seed, vlmc_status_annotate(st, "window-reorder: patch rows are "
                                                              "not whole merged tokens: "));
  const vlmc_attr_t *grid = vlmc_value_constant(fam->grid);
  if (grid && grid->v.dense.ints) {
    fam->grid_data = grid->v.dense.ints;
    fam->num_images = grid->v.dense.count / 3;
  }
  fam->size = fam->func->module->next_value_id;
  fam->layout = calloc(fam->size + 1, sizeof *fam->layout);
  fam->in_region = calloc(fam->size + 1, 1);
  fam->absorbed = calloc(fam->size + 1, 1);
  fam->values = calloc(fam->size + 1, sizeof *fam->values);
  if (!fam->layout || !fam->in_region || !fam->absorbed || !fam->values)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  return NULL;
}

static void family_deinit(family_t *fam) {
  free(fam->layout);
  free(fam->in_region);
  free(fam->absorbed);
  free(fam->values);
  vlmc_strbuf_deinit(&fam->entered);
  vlmc_strbuf_deinit(&fam->left);
}

static vlmc_status_t rewrite_family(family_t *fam) {
  collect_groups(fam);
  fam->fold = fam->grid_data && vlmc_dim_is_static(fam->tokens);
  vlmc_status_t st = fam->fold ? create_constant_indices(fam) : create_symbolic_indices(fam);
  if (st) return vlmc_op_locate_error(fam->seed, st);
  adopt_existing_orders(fam);
  size_t region_ops = 0;
  for (size_t i = 0; i < fam->num_values; ++i) {
    VLMC_RETURN_IF_ERROR(rewire_value(fam, fam->values[i]));
    const vlmc_value_t *v = fam->values[i];
    region_ops += v->def && fam->absorbed[v->def->results[0].id];
  }
  size_t lowered = 0;
  for (vlmc_op_t *op = fam->func->body.first, *next; op; op = next) {
    next = op->next;
    if (!is_family_op(fam, op)) continue;
    VLMC_RETURN_IF_ERROR(lower_window_attention(fam, op));
    ++lowered;
  }
  cancel_gather_pairs(fam);
  describe_leaving(fam);
  vlmc_pass_stat_add(fam->ctx, STAT_REGION_OPS, region_ops);
  remark_windows(fam, lowered);
  remark_region(fam, region_ops);
  return NULL;
}

static vlmc_status_t process_family(vlmc_pass_context_t *ctx, vlmc_op_t *seed) {
  family_t fam;
  vlmc_status_t st = family_init(&fam, ctx, seed);
  if (!st) st = grow_region(&fam);
  if (!st) st = rewrite_family(&fam);
  family_deinit(&fam);
  return st;
}

static vlmc_op_t *first_window_attention(const vlmc_func_t *func) {
  for (vlmc_op_t *op = func->body.first; op; op = op->next)
    if (op->kind == VLMC_OP_WINDOW_ATTENTION) return op;
  return NULL;
}

static vlmc_status_t window_reorder_run(vlmc_pass_context_t *ctx, vlmc_module_t *module) {
  for (uint32_t f = 0; f < module->num_funcs; ++f)
    for (vlmc_op_t *seed; (seed = first_window_attention(module->funcs[f]));)
      VLMC_RETURN_IF_ERROR(process_family(ctx, seed));
  return NULL;
}

const vlmc_pass_t vlmc_pass_window_reorder = {
    .name = "window-reorder",
    .summary = "lower window_attention and run the vision tower in window order, permuting "
               "once in and once out",
    .options = NULL,
    .num_options = 0,
    .statistics = window_statistics,
    .num_statistics = sizeof window_statistics / sizeof window_statistics[0],
    .run = window_reorder_run,
};
