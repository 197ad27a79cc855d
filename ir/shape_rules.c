/* Shape and type rules, one per row family of ops.def. Each computes the result types from
 * the operand types and attributes, or checks a declared result type, and says what it
 * expected when the op is malformed. Semantics of every op: docs/ir.md. */
#include <math.h>
#include <string.h>

#include "ir/internal.h"

#define OPERAND(i) (sig->operand_types[(i)])
#define ERR(...) vlmc_ir_error(sig->module, VLMC_INVALID_ARGUMENT, __VA_ARGS__)

static const vlmc_dtype_info_t *dinfo(const vlmc_type_t *t) { return vlmc_dtype_info(t->dtype); }
static bool is_float(const vlmc_type_t *t) { return dinfo(t)->is_float; }
static bool is_index(const vlmc_type_t *t) {
  return t->dtype == VLMC_DTYPE_I64 || t->dtype == VLMC_DTYPE_I32;
}
static vlmc_dim_t last_dim(const vlmc_type_t *t) { return t->dims[t->rank - 1]; }

static vlmc_status_t require_float(const vlmc_op_signature_t *sig, uint32_t i, const char *what) {
  if (is_float(OPERAND(i))) return NULL;
  return ERR("expected %s to have a float dtype, got %T", what, OPERAND(i));
}

static vlmc_status_t require_index(const vlmc_op_signature_t *sig, uint32_t i, const char *what) {
  if (is_index(OPERAND(i))) return NULL;
  return ERR("expected %s to be i64 or i32, got %T", what, OPERAND(i));
}

static vlmc_status_t require_rank(const vlmc_op_signature_t *sig, uint32_t i, uint32_t rank,
                                  const char *what) {
  if (OPERAND(i)->rank == rank) return NULL;
  return ERR("expected %s to have rank %u, got %T", what, rank, OPERAND(i));
}

static vlmc_status_t require_same_dtype(const vlmc_op_signature_t *sig, uint32_t i, uint32_t j) {
  if (OPERAND(i)->dtype == OPERAND(j)->dtype) return NULL;
  return ERR("expected operands %u and %u to have the same dtype, got %T and %T", i, j,
             OPERAND(i), OPERAND(j));
}

static vlmc_status_t require_dim_equal(const vlmc_op_signature_t *sig, vlmc_dim_t a,
                                       vlmc_dim_t b, const char *what) {
  if (vlmc_dim_equal(a, b)) return NULL;
  return ERR("expected %s to match: %D vs %D", what, &a, &b);
}

static vlmc_status_t require_axis(const vlmc_op_signature_t *sig, int64_t axis, uint32_t rank) {
  if (axis >= 0 && axis < (int64_t)rank) return NULL;
  return ERR("expected axis in [0, %u), got %lld", rank, (long long)axis);
}

static vlmc_status_t require_declared(const vlmc_op_signature_t *sig) {
  if (sig->declared) return NULL;
  return ERR("expected a declared result type (': type')");
}

static vlmc_status_t require_positive_attr(const vlmc_op_signature_t *sig, const char *name) {
  const vlmc_attr_t *a = vlmc_sig_attr(sig, name);
  if (a && a->v.i > 0) return NULL;
  return ERR("expected attribute '%s' to be positive, got %lld", name,
             (long long)(a ? a->v.i : 0));
}

/* ---- module access ---- */

vlmc_status_t vlmc_shape_param(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const char *name = vlmc_sig_attr(sig, "name")->v.symbol;
  const vlmc_param_t *param = vlmc_module_param_find(sig->module, name);
  if (!param) return vlmc_ir_error(sig->module, VLMC_NOT_FOUND, "no parameter named @%s", name);
  out_types[0] = param->type;
  return NULL;
}

vlmc_status_t vlmc_shape_constant(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  VLMC_RETURN_IF_ERROR(require_declared(sig));
  const vlmc_type_t *type = &sig->declared[0];
  const vlmc_attr_t *value = vlmc_sig_attr(sig, "value");
  int64_t count;
  if (!vlmc_type_static_count(type, &count))
    return ERR("expected a static shape for a constant, got %T", type);
  if (dinfo(type)->is_quantized) return ERR("a constant cannot be block-quantized (%T)", type);
  if ((uint64_t)count != value->v.dense.count)
    return ERR("expected %lld values for %T, got %lld", (long long)count, type,
               (long long)value->v.dense.count);
  if (value->v.dense.count && is_float(type) != (value->v.dense.floats != NULL))
    return ERR("expected %s data for %T", is_float(type) ? "float" : "integer", type);
  out_types[0] = *type;
  return NULL;
}

/* ---- contractions ---- */

vlmc_status_t vlmc_shape_linear(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const vlmc_type_t *x = OPERAND(0), *w = OPERAND(1);
  VLMC_RETURN_IF_ERROR(require_float(sig, 0, "the input"));
  if (x->rank < 1) return ERR("expected the input to have rank >= 1, got %T", x);
  VLMC_RETURN_IF_ERROR(require_rank(sig, 1, 2, "the weight [out, in]"));
  if (w->dtype != x->dtype && !dinfo(w)->is_quantized)
    return ERR("expected the weight dtype to match the input, got %T and %T", x, w);
  VLMC_RETURN_IF_ERROR(require_dim_equal(sig, last_dim(x), w->dims[1],
                                         "input features and weight columns"));
  if (sig->num_operands == 3) {
    VLMC_RETURN_IF_ERROR(require_rank(sig, 2, 1, "the bias [out]"));
    VLMC_RETURN_IF_ERROR(require_same_dtype(sig, 0, 2));
    VLMC_RETURN_IF_ERROR(require_dim_equal(sig, OPERAND(2)->dims[0], w->dims[0],
                                           "bias length and weight rows"));
  }
  out_types[0] = *x;
  out_types[0].dims[x->rank - 1] = w->dims[0];
  return NULL;
}

/* dequantize(packed u32[N, ceil(cols * bits / 32)], scales F[N, ceil(cols / group)],
 * biases F[N, ceil(cols / group)]) -> f32[N, cols]. A group spans whole words (group a
 * multiple of 32 / bits), so a word never mixes two groups; the last group of a row may be
 * short (cols not a multiple of group) and the last word's unused elements are padding. */
vlmc_status_t vlmc_shape_dequantize(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const vlmc_type_t *packed = OPERAND(0), *scales = OPERAND(1), *biases = OPERAND(2);
  int64_t bits = vlmc_sig_attr(sig, "bits")->v.i, group = vlmc_sig_attr(sig, "group")->v.i;
  int64_t cols = vlmc_sig_attr(sig, "cols")->v.i;
  if (bits != 4 && bits != 8) return ERR("expected bits 4 or 8, got %lld", (long long)bits);
  int64_t per_word = 32 / bits;
  if (group < per_word || group > 4096 || group % per_word)
    return ERR("expected group to be a multiple of %lld (the elements of a word) from %lld to "
               "4096, got %lld", (long long)per_word, (long long)per_word, (long long)group);
  if (cols <= 0 || cols > ((int64_t)1 << 40))
    return ERR("expected cols in [1, 2^40], got %lld", (long long)cols);
  if (packed->dtype != VLMC_DTYPE_U32) return ERR("expected packed u32 words, got %T", packed);
  VLMC_RETURN_IF_ERROR(require_rank(sig, 0, 2, "the packed weight [rows, words]"));
  VLMC_RETURN_IF_ERROR(require_rank(sig, 1, 2, "the scales [rows, groups]"));
  VLMC_RETURN_IF_ERROR(require_rank(sig, 2, 2, "the biases [rows, groups]"));
  VLMC_RETURN_IF_ERROR(require_float(sig, 1, "the scales"));
  VLMC_RETURN_IF_ERROR(require_same_dtype(sig, 1, 2));
  vlmc_quant_layout_t q = vlmc_quant_layout(bits, group, cols);
  vlmc_dim_t words = vlmc_dim_static(q.words), groups = vlmc_dim_static(q.groups);
  VLMC_RETURN_IF_ERROR(require_dim_equal(sig, packed->dims[1], words,
                                         "packed words per row and ceil(cols * bits / 32)"));
  VLMC_RETURN_IF_ERROR(require_dim_equal(sig, scales->dims[1], groups,
                                         "scales per row and ceil(cols / group)"));
  VLMC_RETURN_IF_ERROR(require_dim_equal(sig, biases->dims[1], groups,
                                         "biases per row and ceil(cols / group)"));
  VLMC_RETURN_IF_ERROR(require_dim_equal(sig, scales->dims[0], packed->dims[0],
                                         "scale rows and packed rows"));
  VLMC_RETURN_IF_ERROR(require_dim_equal(sig, biases->dims[0], packed->dims[0],
                                         "bias rows and packed rows"));
  out_types[0] = vlmc_type_make(VLMC_DTYPE_F32, 2, (int64_t[]){0, cols});
  out_types[0].dims[0] = packed->dims[0];
  return NULL;
}

/* Right-aligned numpy broadcasting of dims [a, a+na) and [b, b+nb) into out (rank max(na,nb)).
 * A static 1 stretches; anything else must be equal. */
static vlmc_status_t broadcast_dims(const vlmc_op_signature_t *sig, const vlmc_type_t *a,
                                    uint32_t na, const vlmc_type_t *b, uint32_t nb,
                                    vlmc_dim_t *out) {
  uint32_t rank = na > nb ? na : nb;
  for (uint32_t i = 0; i < rank; ++i) {
    vlmc_dim_t one = vlmc_dim_static(1);
    vlmc_dim_t da = i < na ? a->dims[na - 1 - i] : one;
    vlmc_dim_t db = i < nb ? b->dims[nb - 1 - i] : one;
    vlmc_dim_t *d = &out[rank - 1 - i];
    if (vlmc_dim_equal(da, db) || vlmc_dim_equal(db, one)) *d = da;
    else if (vlmc_dim_equal(da, one)) *d = db;
    else return ERR("expected broadcast-compatible shapes, got %T and %T", a, b);
  }
  return NULL;
}

vlmc_status_t vlmc_shape_matmul(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const vlmc_type_t *a = OPERAND(0), *b = OPERAND(1);
  VLMC_RETURN_IF_ERROR(require_float(sig, 0, "the left operand"));
  VLMC_RETURN_IF_ERROR(require_same_dtype(sig, 0, 1));
  if (a->rank < 2 || b->rank < 2)
    return ERR("expected operands of rank >= 2, got %T and %T", a, b);
  VLMC_RETURN_IF_ERROR(require_dim_equal(sig, a->dims[a->rank - 1], b->dims[b->rank - 2],
                                         "the contracted dimensions"));
  vlmc_type_t *out = &out_types[0];
  *out = *a;
  uint32_t batch = (a->rank > b->rank ? a->rank : b->rank) - 2;
  VLMC_RETURN_IF_ERROR(broadcast_dims(sig, a, a->rank - 2, b, b->rank - 2, out->dims));
  out->rank = batch + 2;
  out->dims[batch] = a->dims[a->rank - 2];
  out->dims[batch + 1] = b->dims[b->rank - 1];
  return NULL;
}

/* ---- elementwise ---- */

vlmc_status_t vlmc_shape_binary(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const vlmc_type_t *a = OPERAND(0), *b = OPERAND(1);
  VLMC_RETURN_IF_ERROR(require_same_dtype(sig, 0, 1));
  if (!is_float(a) && !dinfo(a)->is_int)
    return ERR("expected float or integer operands, got %T", a);
  out_types[0] = *a;
  out_types[0].rank = a->rank > b->rank ? a->rank : b->rank;
  return broadcast_dims(sig, a, a->rank, b, b->rank, out_types[0].dims);
}

vlmc_status_t vlmc_shape_unary_float(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  VLMC_RETURN_IF_ERROR(require_float(sig, 0, "the operand"));
  out_types[0] = *OPERAND(0);
  return NULL;
}

vlmc_status_t vlmc_shape_unary_signed(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const vlmc_type_t *x = OPERAND(0);
  if (!is_float(x) && !(dinfo(x)->is_int && dinfo(x)->is_signed))
    return ERR("expected a float or signed integer operand, got %T", x);
  out_types[0] = *x;
  return NULL;
}

/* ---- normalisation, attention, rope ---- */

static vlmc_status_t require_finite_attr(const vlmc_op_signature_t *sig, const char *name,
                                         bool positive) {
  const vlmc_attr_t *a = vlmc_sig_attr(sig, name);
  if (!a) return NULL;
  if (isfinite(a->v.f) && (positive ? a->v.f > 0 : a->v.f >= 0)) return NULL;
  return ERR("expected attribute '%s' to be a finite %s number", name,
             positive ? "positive" : "non-negative");
}

vlmc_status_t vlmc_shape_norm(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const vlmc_type_t *x = OPERAND(0);
  VLMC_RETURN_IF_ERROR(require_float(sig, 0, "the input"));
  if (x->rank < 1) return ERR("expected the input to have rank >= 1, got %T", x);
  VLMC_RETURN_IF_ERROR(require_finite_attr(sig, "eps", false));
  for (uint32_t i = 1; i < sig->num_operands; ++i) {
    const char *what = i == 1 ? "the weight" : "the bias";
    VLMC_RETURN_IF_ERROR(require_rank(sig, i, 1, what));
    VLMC_RETURN_IF_ERROR(require_same_dtype(sig, 0, i));
    VLMC_RETURN_IF_ERROR(require_dim_equal(sig, OPERAND(i)->dims[0], last_dim(x),
                                           "normalised features"));
  }
  out_types[0] = *x;
  return NULL;
}

vlmc_status_t vlmc_shape_softmax(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  VLMC_RETURN_IF_ERROR(require_float(sig, 0, "the operand"));
  VLMC_RETURN_IF_ERROR(require_axis(sig, vlmc_sig_attr(sig, "axis")->v.i, OPERAND(0)->rank));
  out_types[0] = *OPERAND(0);
  return NULL;
}

/* q [S, Hq, D], k [T, Hkv, D], v [T, Hkv, Dv] -> [S, Hq, Dv]; Hq a multiple of Hkv (GQA). */
static vlmc_status_t attention_common(const vlmc_op_signature_t *sig, vlmc_type_t *out) {
  const vlmc_type_t *q = OPERAND(0), *k = OPERAND(1), *v = OPERAND(2);
  static const char *const names[] = {"q [S, heads, dim]", "k [T, kv_heads, dim]",
                                      "v [T, kv_heads, dim]"};
  for (uint32_t i = 0; i < 3; ++i) VLMC_RETURN_IF_ERROR(require_rank(sig, i, 3, names[i]));
  VLMC_RETURN_IF_ERROR(require_float(sig, 0, "q"));
  VLMC_RETURN_IF_ERROR(require_same_dtype(sig, 0, 1));
  VLMC_RETURN_IF_ERROR(require_same_dtype(sig, 0, 2));
  VLMC_RETURN_IF_ERROR(require_dim_equal(sig, k->dims[0], v->dims[0], "k and v lengths"));
  VLMC_RETURN_IF_ERROR(require_dim_equal(sig, k->dims[1], v->dims[1], "k and v heads"));
  VLMC_RETURN_IF_ERROR(require_dim_equal(sig, q->dims[2], k->dims[2], "q and k head dims"));
  vlmc_dim_t hq = q->dims[1], hkv = k->dims[1];
  bool grouped = vlmc_dim_is_static(hq) && vlmc_dim_is_static(hkv) && hkv.off > 0 &&
                 hq.off % hkv.off == 0;
  if (!grouped && !vlmc_dim_equal(hq, hkv))
    return ERR("expected query heads to be a multiple of kv heads, got %D and %D", &hq, &hkv);
  VLMC_RETURN_IF_ERROR(require_finite_attr(sig, "scale", true));
  *out = *q;
  out->dims[2] = v->dims[2];
  return NULL;
}

vlmc_status_t vlmc_shape_attention(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  VLMC_RETURN_IF_ERROR(attention_common(sig, &out_types[0]));
  if (sig->num_operands == 4) {
    VLMC_RETURN_IF_ERROR(require_rank(sig, 3, 1, "cu_seqlens"));
    VLMC_RETURN_IF_ERROR(require_index(sig, 3, "cu_seqlens"));
    VLMC_RETURN_IF_ERROR(require_dim_equal(sig, OPERAND(0)->dims[0], OPERAND(1)->dims[0],
                                           "q and k lengths of segmented attention"));
  }
  return NULL;
}

static vlmc_status_t check_grid(const vlmc_op_signature_t *sig, uint32_t i) {
  const vlmc_type_t *grid = OPERAND(i);
  VLMC_RETURN_IF_ERROR(require_index(sig, i, "the grid"));
  if (grid->rank == 2 && vlmc_dim_equal(grid->dims[1], vlmc_dim_static(3))) return NULL;
  return ERR("expected the grid to be [images, 3] (t, h, w), got %T", grid);
}

static vlmc_status_t check_window_attrs(const vlmc_op_signature_t *sig) {
  VLMC_RETURN_IF_ERROR(require_positive_attr(sig, "window"));
  VLMC_RETURN_IF_ERROR(require_positive_attr(sig, "patch"));
  VLMC_RETURN_IF_ERROR(require_positive_attr(sig, "merge"));
  int64_t window = vlmc_sig_attr(sig, "window")->v.i, patch = vlmc_sig_attr(sig, "patch")->v.i;
  int64_t merge = vlmc_sig_attr(sig, "merge")->v.i;
  if (patch > INT32_MAX || merge > INT32_MAX || window % (patch * merge) != 0)
    return ERR("expected window (%lld) to be a multiple of patch * merge (%lld * %lld)",
               (long long)window, (long long)patch, (long long)merge);
  return NULL;
}

vlmc_status_t vlmc_shape_window_attention(const vlmc_op_signature_t *sig,
                                          vlmc_type_t *out_types) {
  VLMC_RETURN_IF_ERROR(attention_common(sig, &out_types[0]));
  VLMC_RETURN_IF_ERROR(require_dim_equal(sig, OPERAND(0)->dims[0], OPERAND(1)->dims[0],
                                         "q and k patch counts"));
  VLMC_RETURN_IF_ERROR(check_grid(sig, 3));
  return check_window_attrs(sig);
}

vlmc_status_t vlmc_shape_kv_cache_append(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const vlmc_type_t *cache = OPERAND(0), *rows = OPERAND(1);
  if (cache->rank < 1) return ERR("expected the cache to have rank >= 1, got %T", cache);
  VLMC_RETURN_IF_ERROR(require_same_dtype(sig, 0, 1));
  if (rows->rank != cache->rank)
    return ERR("expected new rows of the cache's rank, got %T and %T", cache, rows);
  for (uint32_t i = 1; i < cache->rank; ++i)
    VLMC_RETURN_IF_ERROR(require_dim_equal(sig, cache->dims[i], rows->dims[i], "row shapes"));
  out_types[0] = *cache;
  vlmc_status_t st = vlmc_dim_add(cache->dims[0], rows->dims[0], &out_types[0].dims[0]);
  if (st) {
    vlmc_status_free(st);
    return ERR("the appended length %D + %D has no closed form", &cache->dims[0], &rows->dims[0]);
  }
  return NULL;
}

/* Position planes each rope layout reads: plain 1 (t), mrope 3 (t, h, w),
 * vision_2d 2 (row, col). */
static uint32_t rope_planes(const char *layout) {
  if (strcmp(layout, "plain") == 0) return 1;
  if (strcmp(layout, "vision_2d") == 0) return 2;
  return 3;
}

static vlmc_status_t rope_check_positions(const vlmc_op_signature_t *sig, uint32_t planes) {
  const vlmc_type_t *x = OPERAND(0), *pos = OPERAND(1);
  VLMC_RETURN_IF_ERROR(require_index(sig, 1, "positions"));
  bool ok = pos->rank == 2 && vlmc_dim_equal(pos->dims[0], vlmc_dim_static(planes)) &&
            vlmc_dim_equal(pos->dims[1], x->dims[0]);
  if (planes == 1 && pos->rank == 1) ok = vlmc_dim_equal(pos->dims[0], x->dims[0]);
  if (ok) return NULL;
  return ERR("expected positions [%u, %D] for this layout, got %T", planes, &x->dims[0], pos);
}

static vlmc_status_t rope_check_tables(const vlmc_op_signature_t *sig, const char *layout,
                                       int64_t half, uint32_t planes) {
  const vlmc_attr_t *sections = vlmc_sig_attr(sig, "sections");
  bool mrope = strncmp(layout, "mrope", 5) == 0;
  if (mrope && (!sections || sections->v.ints.count != 3))
    return ERR("expected 'sections' with 3 entries (t, h, w) for layout %s", layout);
  if (!mrope && sections) return ERR("'sections' applies only to the mrope layouts");
  for (size_t i = 0; sections && i < sections->v.ints.count; ++i)
    if (sections->v.ints.data[i] <= 0) return ERR("expected positive 'sections' entries");
  if (strcmp(layout, "vision_2d") == 0 && half % 2 != 0)
    return ERR("vision_2d needs rotary_dim a multiple of 4, got %lld", (long long)(2 * half));
  const vlmc_attr_t *table = vlmc_sig_attr(sig, "planes");
  if (!table) return NULL;
  if ((int64_t)table->v.ints.count != half)
    return ERR("expected 'planes' to have rotary_dim / 2 = %lld entries, got %lld",
               (long long)half, (long long)table->v.ints.count);
  for (size_t i = 0; i < table->v.ints.count; ++i)
    if (table->v.ints.data[i] < 0 || table->v.ints.data[i] >= planes)
      return ERR("expected 'planes' entries in [0, %u), got %lld at %lld", planes,
                 (long long)table->v.ints.data[i], (long long)i);
  return NULL;
}

vlmc_status_t vlmc_shape_rope(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const vlmc_type_t *x = OPERAND(0);
  VLMC_RETURN_IF_ERROR(require_rank(sig, 0, 3, "the input [tokens, heads, head_dim]"));
  VLMC_RETURN_IF_ERROR(require_float(sig, 0, "the input"));
  VLMC_RETURN_IF_ERROR(require_finite_attr(sig, "theta", true));
  const char *layout = vlmc_sig_attr(sig, "layout")->v.e.name;
  uint32_t planes = rope_planes(layout);
  VLMC_RETURN_IF_ERROR(rope_check_positions(sig, planes));
  const vlmc_attr_t *rotary = vlmc_sig_attr(sig, "rotary_dim");
  vlmc_dim_t head = x->dims[2];
  if (!rotary && !vlmc_dim_is_static(head))
    return ERR("expected a static head dim or a 'rotary_dim', got %T", x);
  int64_t dim = rotary ? rotary->v.i : head.off;
  if (dim <= 0 || dim % 2 != 0 || (vlmc_dim_is_static(head) && dim > head.off))
    return ERR("expected an even rotary_dim in (0, %D], got %lld", &head, (long long)dim);
  VLMC_RETURN_IF_ERROR(rope_check_tables(sig, layout, dim / 2, planes));
  out_types[0] = *x;
  return NULL;
}

/* ---- host index computations ---- */

static vlmc_status_t require_declared_index(const vlmc_op_signature_t *sig, uint32_t rank) {
  VLMC_RETURN_IF_ERROR(require_declared(sig));
  const vlmc_type_t *t = &sig->declared[0];
  if (t->dtype != VLMC_DTYPE_I64 || t->rank != rank)
    return ERR("expected an i64 result of rank %u, got %T", rank, t);
  return NULL;
}

vlmc_status_t vlmc_shape_grid_index(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  VLMC_RETURN_IF_ERROR(check_grid(sig, 0));
  if (sig->kind != VLMC_OP_FULL_SEGMENTS) VLMC_RETURN_IF_ERROR(check_window_attrs(sig));
  VLMC_RETURN_IF_ERROR(require_declared_index(sig, 1));
  out_types[0] = sig->declared[0];
  return NULL;
}

vlmc_status_t vlmc_shape_vision_positions(const vlmc_op_signature_t *sig,
                                          vlmc_type_t *out_types) {
  VLMC_RETURN_IF_ERROR(check_grid(sig, 0));
  VLMC_RETURN_IF_ERROR(require_positive_attr(sig, "merge"));
  VLMC_RETURN_IF_ERROR(require_declared_index(sig, 2));
  if (!vlmc_dim_equal(sig->declared[0].dims[0], vlmc_dim_static(2)))
    return ERR("expected the result to be [2, patches] (rows, cols), got %T", &sig->declared[0]);
  out_types[0] = sig->declared[0];
  return NULL;
}

/* pos_interp_index -> i64[4, P], pos_interp_weight -> f32[4, P]: the four corners of each patch. */
vlmc_status_t vlmc_shape_pos_interp(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  VLMC_RETURN_IF_ERROR(check_grid(sig, 0));
  VLMC_RETURN_IF_ERROR(require_positive_attr(sig, "side"));
  VLMC_RETURN_IF_ERROR(require_positive_attr(sig, "merge"));
  VLMC_RETURN_IF_ERROR(require_declared(sig));
  const vlmc_type_t *t = &sig->declared[0];
  vlmc_dtype_t want = sig->kind == VLMC_OP_POS_INTERP_INDEX ? VLMC_DTYPE_I64 : VLMC_DTYPE_F32;
  if (t->dtype != want || t->rank != 2 || !vlmc_dim_equal(t->dims[0], vlmc_dim_static(4)))
    return ERR("expected the result to be %s[4, patches] (four corners per patch), got %T",
               want == VLMC_DTYPE_I64 ? "i64" : "f32", t);
  out_types[0] = *t;
  return NULL;
}

vlmc_status_t vlmc_shape_token_positions(const vlmc_op_signature_t *sig,
                                         vlmc_type_t *out_types) {
  VLMC_RETURN_IF_ERROR(require_index(sig, 0, "the token ids"));
  VLMC_RETURN_IF_ERROR(require_rank(sig, 0, 1, "the token ids"));
  VLMC_RETURN_IF_ERROR(require_declared_index(sig, 1));
  out_types[0] = sig->declared[0];
  return NULL;
}

vlmc_status_t vlmc_shape_inverse_permutation(const vlmc_op_signature_t *sig,
                                             vlmc_type_t *out_types) {
  VLMC_RETURN_IF_ERROR(require_index(sig, 0, "the permutation"));
  VLMC_RETURN_IF_ERROR(require_rank(sig, 0, 1, "the permutation"));
  out_types[0] = *OPERAND(0);
  return NULL;
}

/* ---- data movement ---- */

vlmc_status_t vlmc_shape_gather(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const vlmc_type_t *x = OPERAND(0), *idx = OPERAND(1);
  int64_t axis = vlmc_sig_attr(sig, "axis")->v.i;
  VLMC_RETURN_IF_ERROR(require_axis(sig, axis, x->rank));
  VLMC_RETURN_IF_ERROR(require_index(sig, 1, "the index"));
  uint32_t rank = x->rank - 1 + idx->rank;
  if (rank > VLMC_IR_MAX_RANK) return ERR("the result would have rank %u > 8", rank);
  vlmc_type_t *out = &out_types[0];
  *out = *x;
  out->rank = rank;
  for (uint32_t i = 0; i < idx->rank; ++i) out->dims[axis + i] = idx->dims[i];
  for (uint32_t i = (uint32_t)axis + 1; i < x->rank; ++i) out->dims[i - 1 + idx->rank] = x->dims[i];
  return NULL;
}

vlmc_status_t vlmc_shape_embedding(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const vlmc_type_t *table = OPERAND(0), *ids = OPERAND(1);
  VLMC_RETURN_IF_ERROR(require_rank(sig, 0, 2, "the table [vocab, hidden]"));
  if (!is_float(table) && !dinfo(table)->is_quantized)
    return ERR("expected a float or block-quantized table, got %T", table);
  VLMC_RETURN_IF_ERROR(require_index(sig, 1, "the token ids"));
  if (ids->rank + 1 > VLMC_IR_MAX_RANK) return ERR("too many id dimensions in %T", ids);
  vlmc_type_t *out = &out_types[0];
  *out = *ids;
  out->dtype = dinfo(table)->is_quantized ? VLMC_DTYPE_F32 : table->dtype;
  out->rank = ids->rank + 1;
  out->dims[ids->rank] = table->dims[1];
  return NULL;
}

vlmc_status_t vlmc_shape_scatter_rows(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const vlmc_type_t *dst = OPERAND(0), *rows = OPERAND(1);
  VLMC_RETURN_IF_ERROR(require_same_dtype(sig, 0, 1));
  if (dst->rank < 1 || rows->rank != dst->rank)
    return ERR("expected rows of the destination's rank, got %T and %T", dst, rows);
  for (uint32_t i = 1; i < dst->rank; ++i)
    VLMC_RETURN_IF_ERROR(require_dim_equal(sig, dst->dims[i], rows->dims[i], "row shapes"));
  VLMC_RETURN_IF_ERROR(require_index(sig, 2, "the positions"));
  VLMC_RETURN_IF_ERROR(require_rank(sig, 2, 1, "the positions"));
  VLMC_RETURN_IF_ERROR(require_dim_equal(sig, OPERAND(2)->dims[0], rows->dims[0],
                                         "position count and row count"));
  out_types[0] = *dst;
  return NULL;
}

vlmc_status_t vlmc_shape_reshape(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  VLMC_RETURN_IF_ERROR(require_declared(sig));
  const vlmc_type_t *x = OPERAND(0), *to = &sig->declared[0];
  if (to->dtype != x->dtype) return ERR("reshape cannot change the dtype (%T to %T)", x, to);
  bool same = false;
  VLMC_RETURN_IF_ERROR(vlmc_type_same_count(x, to, &same));
  if (!same) return ERR("expected the same number of elements in %T and %T", x, to);
  out_types[0] = *to;
  return NULL;
}

vlmc_status_t vlmc_shape_transpose(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const vlmc_type_t *x = OPERAND(0);
  const vlmc_attr_t *perm = vlmc_sig_attr(sig, "perm");
  bool seen[VLMC_IR_MAX_RANK] = {false};
  bool ok = perm->v.ints.count == x->rank;
  for (size_t i = 0; ok && i < perm->v.ints.count; ++i) {
    int64_t p = perm->v.ints.data[i];
    ok = p >= 0 && p < (int64_t)x->rank && !seen[p];
    if (ok) seen[p] = true;
  }
  if (!ok) return ERR("expected 'perm' to be a permutation of the %u axes of %T", x->rank, x);
  out_types[0] = *x;
  for (uint32_t i = 0; i < x->rank; ++i) out_types[0].dims[i] = x->dims[perm->v.ints.data[i]];
  return NULL;
}

vlmc_status_t vlmc_shape_concat(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const vlmc_type_t *first = OPERAND(0);
  int64_t axis = vlmc_sig_attr(sig, "axis")->v.i;
  VLMC_RETURN_IF_ERROR(require_axis(sig, axis, first->rank));
  vlmc_type_t *out = &out_types[0];
  *out = *first;
  for (uint32_t i = 1; i < sig->num_operands; ++i) {
    const vlmc_type_t *t = OPERAND(i);
    VLMC_RETURN_IF_ERROR(require_same_dtype(sig, 0, i));
    if (t->rank != first->rank)
      return ERR("expected operands of one rank, got %T and %T", first, t);
    for (uint32_t d = 0; d < t->rank; ++d)
      if (d != axis && !vlmc_dim_equal(t->dims[d], first->dims[d]))
        return ERR("expected operands to match off the concat axis, got %T and %T", first, t);
    vlmc_status_t st = vlmc_dim_add(out->dims[axis], t->dims[axis], &out->dims[axis]);
    if (st) {
      vlmc_status_free(st);
      return ERR("the concatenated length of %T and %T has no closed form", first, t);
    }
  }
  return NULL;
}

/* A slice bound as a dim: non-negative counts from the start, negative from the end. */
static vlmc_status_t slice_bound(vlmc_dim_t size, int64_t bound, vlmc_dim_t *out) {
  if (bound >= 0) {
    *out = vlmc_dim_static(bound);
    return NULL;
  }
  if (bound == INT64_MIN) return vlmc_status_make(VLMC_OUT_OF_RANGE, "bound out of range");
  return vlmc_dim_sub(size, vlmc_dim_static(-bound), out);
}

vlmc_status_t vlmc_shape_slice(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const vlmc_type_t *x = OPERAND(0);
  int64_t axis = vlmc_sig_attr(sig, "axis")->v.i;
  VLMC_RETURN_IF_ERROR(require_axis(sig, axis, x->rank));
  vlmc_dim_t size = x->dims[axis], start, end, len;
  const vlmc_attr_t *end_attr = vlmc_sig_attr(sig, "end");
  int64_t start_v = vlmc_sig_attr(sig, "start")->v.i;
  vlmc_status_t st = slice_bound(size, start_v, &start);
  if (!st) st = end_attr ? slice_bound(size, end_attr->v.i, &end) : NULL;
  if (!end_attr) end = size;
  if (!st) st = vlmc_dim_sub(end, start, &len);
  bool in_bounds = !vlmc_dim_is_static(size) || (vlmc_dim_is_static(end) && end.off <= size.off);
  if (st || !in_bounds) {
    vlmc_status_free(st);
    return ERR("expected 0 <= start <= end <= %D on axis %lld (negative bounds count from the "
               "end), got start %lld%s", &size, (long long)axis, (long long)start_v,
               end_attr ? " and an end past it" : "");
  }
  out_types[0] = *x;
  out_types[0].dims[axis] = len;
  return NULL;
}

vlmc_status_t vlmc_shape_cast(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  out_types[0] = *OPERAND(0);
  out_types[0].dtype = vlmc_sig_attr(sig, "dtype")->v.dtype;
  return NULL;
}

vlmc_status_t vlmc_shape_argmax(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  const vlmc_type_t *x = OPERAND(0);
  int64_t axis = vlmc_sig_attr(sig, "axis")->v.i;
  VLMC_RETURN_IF_ERROR(require_axis(sig, axis, x->rank));
  if (!is_float(x) && !dinfo(x)->is_int)
    return ERR("expected a float or integer operand, got %T", x);
  vlmc_type_t *out = &out_types[0];
  *out = *x;
  out->dtype = VLMC_DTYPE_I64;
  out->rank = x->rank - 1;
  for (uint32_t i = (uint32_t)axis; i + 1 < x->rank; ++i) out->dims[i] = x->dims[i + 1];
  return NULL;
}

vlmc_status_t vlmc_shape_return(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  return NULL; /* the verifier checks the operands against the function's result types */
}

vlmc_status_t vlmc_shape_tap(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  return NULL; /* any value can be tapped; there is no result */
}

/* ---- shared checks ---- */

/* Ops that may read block-quantized data: linear's weight, embedding's table, and cast
 * (dequantisation); return passes values through. */
static bool accepts_quantized(vlmc_op_kind_t kind, uint32_t operand) {
  return (kind == VLMC_OP_LINEAR && operand == 1) || (kind == VLMC_OP_EMBEDDING && operand == 0) ||
         kind == VLMC_OP_CAST || kind == VLMC_OP_RETURN;
}

vlmc_status_t vlmc_ir_check_type(const vlmc_module_t *module, const vlmc_type_t *type) {
  if (type->dtype < 0 || type->dtype >= VLMC_DTYPE_COUNT || type->rank > VLMC_IR_MAX_RANK)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "malformed type (dtype or rank out of range)");
  for (uint32_t i = 0; i < type->rank; ++i) {
    vlmc_dim_t d = type->dims[i], norm;
    bool ok = d.sym <= module->num_symbols;
    if (ok && d.sym == 0) ok = d.num == 0 && d.den == 1 && d.off >= 0;
    else if (ok) {
      vlmc_status_t st = vlmc_dim_symbolic(d.sym, d.num, d.den, d.off, &norm);
      ok = !st && d.num > 0 && vlmc_dim_equal(norm, d);
      vlmc_status_free(st);
    }
    if (!ok)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "malformed dimension %u of a type", i);
  }
  if (!vlmc_type_size_fits(type))
    return vlmc_ir_error(module, VLMC_OUT_OF_RANGE,
                         "%T: the element count or byte size overflows 64 bits", type);
  const vlmc_dtype_info_t *info = vlmc_dtype_info(type->dtype);
  if (!info->is_quantized) return NULL;
  vlmc_dim_t last = type->rank ? type->dims[type->rank - 1] : vlmc_dim_static(0);
  if (vlmc_dim_is_static(last) && last.off % info->block_size == 0) return NULL;
  return vlmc_ir_error(module, VLMC_INVALID_ARGUMENT,
                       "expected the last dimension of %T to be a static multiple of %u (its "
                       "block size)", type, info->block_size);
}

vlmc_status_t vlmc_ir_infer(const vlmc_op_signature_t *sig, vlmc_type_t *out_types) {
  for (uint32_t i = 0; i < sig->num_operands; ++i)
    if (dinfo(OPERAND(i))->is_quantized && !accepts_quantized(sig->kind, i))
      return ERR("operand %u is block-quantized (%T); only linear weights, embedding tables and "
                 "cast accept that", i, OPERAND(i));
  for (uint32_t i = 0; sig->declared && i < sig->num_results; ++i)
    VLMC_RETURN_IF_ERROR(vlmc_ir_check_type(sig->module, &sig->declared[i]));
  VLMC_RETURN_IF_ERROR(vlmc_op_info(sig->kind)->shape(sig, out_types));
  for (uint32_t i = 0; i < sig->num_results; ++i)
    VLMC_RETURN_IF_ERROR(vlmc_ir_check_type(sig->module, &out_types[i]));
  return NULL;
}
