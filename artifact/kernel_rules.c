/* The rules a kernel table follows (artifact/kernel_table.h): which template takes a region,
 * the storage its kernel reads and writes, and how many work units a dispatch has. They sit
 * here, below both the code generator that writes a table and the runtime that checks one,
 * so that the two compute them the same way: a table whose work count or storage differs
 * from what the program implies is refused, never run. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "artifact/kernel_table.h"

vlmc_dtype_t vlmc_kernel_input_storage(const vlmc_value_t *v) {
  const vlmc_dtype_info_t *info = vlmc_dtype_info(v->type.dtype);
  bool is_param = v->def && v->def->kind == VLMC_OP_PARAM;
  if (is_param && v->type.dtype == VLMC_DTYPE_U32) return VLMC_DTYPE_U32; /* packed weights */
  if (!info->is_float) return VLMC_DTYPE_I64;
  if (v->def && v->def->kind == VLMC_OP_PARAM &&
      (v->type.dtype == VLMC_DTYPE_BF16 || v->type.dtype == VLMC_DTYPE_F16))
    return v->type.dtype;
  return VLMC_DTYPE_F32;
}

vlmc_dtype_t vlmc_kernel_output_storage(const vlmc_value_t *v) {
  return vlmc_dtype_info(v->type.dtype)->is_float ? VLMC_DTYPE_F32 : VLMC_DTYPE_I64;
}

/* The templates that take each anchor kind: the first is the one every target knows
 * (vlmc_kernel_template_for); a later one of the same kind splits the same region's work
 * another way, for a target that asks for it by name. */
static const struct {
  vlmc_op_kind_t kind;
  const char *name;
} kTemplates[] = {
    {VLMC_OP_RESHAPE, "copy"},
    {VLMC_OP_LINEAR, "linear"},
    {VLMC_OP_LINEAR, "linear_tiles"},
    {VLMC_OP_MATMUL, "matmul"},
    {VLMC_OP_RMS_NORM, "rms_norm"},
    {VLMC_OP_LAYER_NORM, "layer_norm"},
    {VLMC_OP_SOFTMAX, "softmax"},
    {VLMC_OP_ROPE, "rope"},
    {VLMC_OP_ROPE, "rope_heads"},
    {VLMC_OP_ATTENTION, "attention"},
    {VLMC_OP_GATHER, "gather"},
    {VLMC_OP_EMBEDDING, "embedding"},
    {VLMC_OP_SCATTER_ROWS, "scatter_rows"},
    {VLMC_OP_SLICE, "slice"},
    {VLMC_OP_CONCAT, "concat"},
    {VLMC_OP_TRANSPOSE, "transpose"},
    {VLMC_OP_KV_CACHE_APPEND, "kv_cache_append"},
    {VLMC_OP_ARGMAX, "argmax"},
};

static const vlmc_op_t *anchor_of(const vlmc_dispatch_region_t *region) {
  return region->ops[vlmc_dispatch_anchor_index(region)];
}

const char *vlmc_kernel_template_for(const vlmc_dispatch_region_t *region) {
  vlmc_op_kind_t kind = anchor_of(region)->kind;
  if (vlmc_op_info(kind)->flags & VLMC_OP_FLAG_ELEMENTWISE) return "elementwise";
  for (size_t i = 0; i < sizeof kTemplates / sizeof kTemplates[0]; ++i)
    if (kTemplates[i].kind == kind) return kTemplates[i].name;
  return NULL;
}

/* Whether template `name` may take the region: the default one, or another of the same
 * anchor kind (elementwise anchors have "elementwise" only). */
static bool template_takes(const vlmc_dispatch_region_t *region, const char *name) {
  const char *first = vlmc_kernel_template_for(region);
  if (!first) return false;
  if (!strcmp(first, name)) return true;
  vlmc_op_kind_t kind = anchor_of(region)->kind;
  if (vlmc_op_info(kind)->flags & VLMC_OP_FLAG_ELEMENTWISE) return false;
  for (size_t i = 0; i < sizeof kTemplates / sizeof kTemplates[0]; ++i)
    if (kTemplates[i].kind == kind && !strcmp(kTemplates[i].name, name)) return true;
  return false;
}

/* ---- work counts ---- */

/* The element count of dims [from, to) of `type` minus dim `skip` (-1: none). */
static vlmc_status_t count_rows(const vlmc_type_t *type, uint32_t to, int64_t skip,
                                vlmc_dim_t *out) {
  vlmc_type_t rows = *type;
  rows.rank = 0;
  for (uint32_t d = 0; d < to && d < type->rank; ++d)
    if ((int64_t)d != skip) rows.dims[rows.rank++] = type->dims[d];
  if (vlmc_type_count_dim(&rows, out)) return NULL;
  return vlmc_status_make(VLMC_UNSUPPORTED, "the work count is not one dim expression (two "
                          "symbolic dims)");
}

static vlmc_status_t linear_work(const vlmc_op_t *op, vlmc_dim_t *units) {
  const vlmc_type_t *w = &op->operands[1]->type;
  if (w->rank != 2 || !vlmc_dim_is_static(w->dims[0]))
    return vlmc_status_make(VLMC_UNSUPPORTED, "linear: the weight is not a static [N, K]");
  *units = vlmc_dim_static((w->dims[0].off + VLMC_KERNEL_LINEAR_UNIT - 1) /
                           VLMC_KERNEL_LINEAR_UNIT);
  return NULL;
}

/* linear_tiles: one unit per (row of x, block of VLMC_KERNEL_LINEAR_UNIT features), so that
 * the work grows with the rows and a kernel can split both axes into tiles. */
static vlmc_status_t linear_tiles_work(const vlmc_op_t *op, vlmc_dim_t *units, int64_t *scale) {
  VLMC_RETURN_IF_ERROR(linear_work(op, units));
  *scale = units->off;
  const vlmc_type_t *x = &op->operands[0]->type;
  return count_rows(x, x->rank ? x->rank - 1 : 0, -1, units);
}

/* One unit per (query row, kv head): a GQA group reads its cache rows once. */
static vlmc_status_t attention_work(const vlmc_op_t *op, vlmc_dim_t *units, int64_t *scale) {
  const vlmc_type_t *q = &op->operands[0]->type, *k = &op->operands[1]->type;
  if (q->rank < 1 || k->rank < 2 || !vlmc_dim_is_static(k->dims[1]) || k->dims[1].off <= 0)
    return vlmc_status_make(VLMC_UNSUPPORTED, "attention: needs a static kv head count");
  *units = q->dims[0];
  *scale = k->dims[1].off;
  return NULL;
}

static vlmc_status_t softmax_work(const vlmc_op_t *op, vlmc_dim_t *units) {
  const vlmc_type_t *x = &op->operands[0]->type;
  int64_t axis = vlmc_op_attr_int(op, "axis");
  if (axis < 0 || axis >= (int64_t)x->rank)
    return vlmc_status_make(VLMC_UNSUPPORTED, "softmax: axis %lld is out of range",
                            (long long)axis);
  return count_rows(x, x->rank, axis, units);
}

/* Per template, from its anchor: the unit each template's loop over %lo..%hi stands for. */
static vlmc_status_t work_of(const char *t, const vlmc_op_t *op, vlmc_dim_t *units,
                             int64_t *scale) {
  const vlmc_type_t *out = &op->results[0].type, *x = &op->operands[0]->type;
  *scale = 1;
  if (!strcmp(t, "elementwise") || !strcmp(t, "copy") || !strcmp(t, "argmax"))
    return count_rows(out, out->rank, -1, units); /* one unit per output element */
  if (!strcmp(t, "linear")) return linear_work(op, units);
  if (!strcmp(t, "linear_tiles")) return linear_tiles_work(op, units, scale);
  if (!strcmp(t, "attention")) return attention_work(op, units, scale);
  if (!strcmp(t, "softmax")) return softmax_work(op, units);
  if (!strcmp(t, "rms_norm") || !strcmp(t, "layer_norm")) /* one unit per row */
    return count_rows(x, x->rank - 1, -1, units);
  if (!strcmp(t, "rope")) {
    *units = x->dims[0]; /* one unit per token */
    return NULL;
  }
  if (!strcmp(t, "rope_heads")) { /* one unit per (token, head) */
    if (x->rank != 3 || !vlmc_dim_is_static(x->dims[1]) || x->dims[1].off <= 0)
      return vlmc_status_make(VLMC_UNSUPPORTED, "rope_heads: needs x [T, H, Dh] with a static H");
    *units = x->dims[0];
    *scale = x->dims[1].off;
    return NULL;
  }
  if (!strcmp(t, "gather")) /* one unit per (outer index, index) row */
    return count_rows(out, (uint32_t)vlmc_op_attr_int(op, "axis") + op->operands[1]->type.rank,
                      -1, units);
  if (!strcmp(t, "embedding")) return count_rows(out, op->operands[1]->type.rank, -1, units);
  if (!strcmp(t, "scatter_rows") || !strcmp(t, "kv_cache_append"))
    return count_rows(out, 1, -1, units); /* one unit per row of the result */
  if (!strcmp(t, "transpose") && out->rank == 0) {
    *units = vlmc_dim_static(1);
    return NULL;
  }
  /* matmul, slice, concat, transpose: one unit per output row (every dim but the last). */
  return count_rows(out, out->rank ? out->rank - 1 : 0, -1, units);
}

vlmc_status_t vlmc_kernel_work(const vlmc_dispatch_region_t *region, const char *template_name,
                               vlmc_dim_t *units, int64_t *scale) {
  const vlmc_op_t *anchor = anchor_of(region);
  const char *expected = vlmc_kernel_template_for(region);
  if (!expected || !template_takes(region, template_name))
    return vlmc_status_make(VLMC_PARSE_ERROR, "template '%s' does not take this region (its "
                            "anchor '%s' is written by %s%s%s)", template_name,
                            vlmc_op_info(anchor->kind)->mnemonic, expected ? "'" : "no template",
                            expected ? expected : "", expected ? "'" : "");
  return work_of(template_name, anchor, units, scale);
}
