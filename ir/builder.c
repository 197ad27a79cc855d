/* The builder: creates ops whose result types come from the op table's shape rules, so that a
 * model file never writes a result shape by hand (except for reshape targets and the
 * data-dependent lengths of host index ops, which are declared). */
#include <stdlib.h>
#include <string.h>

#include "ir/internal.h"

void vlmc_builder_init(vlmc_builder_t *b, vlmc_func_t *func) {
  memset(b, 0, sizeof *b);
  b->func = func;
  b->block = &func->body;
}

void vlmc_builder_set_insert_before(vlmc_builder_t *b, vlmc_op_t *op) {
  b->block = op->block;
  b->before = op;
}

/* Named attributes into schema slots, each checked against its schema entry. */
static vlmc_status_t resolve_attrs(const vlmc_op_info_t *info, uint32_t num_attrs,
                                   const vlmc_named_attr_t *attrs, vlmc_attr_t *slots) {
  for (uint32_t i = 0; i < num_attrs; ++i) {
    int slot = vlmc_op_attr_slot(info->kind, attrs[i].name);
    if (slot < 0)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "has no attribute '%s'", attrs[i].name);
    if (slots[slot].kind != VLMC_ATTR_NONE)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "attribute '%s' is given twice",
                              attrs[i].name);
    VLMC_RETURN_IF_ERROR(vlmc_ir_attr_check(&info->attrs[slot], &attrs[i].value, &slots[slot]));
  }
  return vlmc_ir_check_required_attrs(info, slots);
}

static vlmc_status_t check_operands(const vlmc_builder_t *b, uint32_t num_operands,
                                    vlmc_value_t *const *operands) {
  for (uint32_t i = 0; i < num_operands; ++i)
    if (!operands[i] || operands[i]->func != b->func)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "operand %u is not a value of @%s", i,
                              b->func->name);
  return NULL;
}

static vlmc_status_t infer(const vlmc_builder_t *b, vlmc_op_kind_t kind, uint32_t num_operands,
                           vlmc_value_t *const *operands, const vlmc_attr_t *slots,
                           const vlmc_type_t *declared, vlmc_type_t *out_types) {
  const vlmc_op_info_t *info = vlmc_op_info(kind);
  const vlmc_type_t **types = malloc((num_operands + 1) * sizeof *types);
  if (!types) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t i = 0; i < num_operands; ++i) types[i] = &operands[i]->type;
  vlmc_op_signature_t sig = {b->func->module, kind, num_operands, types,
                             slots, info->num_results, declared};
  vlmc_status_t st = vlmc_ir_infer(&sig, out_types);
  for (uint32_t i = 0; !st && declared && i < info->num_results; ++i)
    if (!vlmc_type_equal(&declared[i], &out_types[i]))
      st = vlmc_ir_error(b->func->module, VLMC_INVALID_ARGUMENT,
                         "declared result type %T differs from the inferred %T", &declared[i],
                         &out_types[i]);
  free(types);
  return st;
}

static vlmc_status_t builder_op(vlmc_builder_t *b, vlmc_op_kind_t kind, uint32_t num_operands,
                                vlmc_value_t *const *operands, uint32_t num_attrs,
                                const vlmc_named_attr_t *attrs, const vlmc_type_t *declared,
                                const char *name, vlmc_op_t **out_op) {
  const vlmc_op_info_t *info = vlmc_op_info(kind);
  vlmc_attr_t *slots = calloc(info->num_attrs + 1, sizeof *slots);
  vlmc_type_t *types = calloc(info->num_results + 1, sizeof *types);
  vlmc_status_t st = NULL;
  if (!slots || !types) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (!st) st = check_operands(b, num_operands, operands);
  if (!st) st = resolve_attrs(info, num_attrs, attrs, slots);
  vlmc_op_t *op = NULL;
  if (!st) st = infer(b, kind, num_operands, operands, slots, declared, types);
  if (!st)
    st = vlmc_op_create_raw(b->block, b->before, kind, num_operands, operands, slots,
                            info->num_results, types, &op);
  if (!st && name && info->num_results) st = vlmc_value_set_name(&op->results[0], name);
  free(slots);
  free(types);
  if (st) return st;
  op->loc = b->loc;
  if (out_op) *out_op = op;
  return NULL;
}

vlmc_status_t vlmc_builder_op(vlmc_builder_t *b, vlmc_op_kind_t kind, uint32_t num_operands,
                              vlmc_value_t *const *operands, uint32_t num_attrs,
                              const vlmc_named_attr_t *attrs, const vlmc_type_t *declared,
                              const char *name, vlmc_op_t **out_op) {
  vlmc_status_t st =
      builder_op(b, kind, num_operands, operands, num_attrs, attrs, declared, name, out_op);
  return vlmc_status_annotate(st, "@%s: building '%s': ", b->func->name,
                              vlmc_op_info(kind)->mnemonic);
}

/* One-result ops: returns the result value. */
static vlmc_status_t build_value(vlmc_builder_t *b, vlmc_op_kind_t kind, uint32_t num_operands,
                                 vlmc_value_t *const *operands, uint32_t num_attrs,
                                 const vlmc_named_attr_t *attrs, const vlmc_type_t *declared,
                                 const char *name, vlmc_value_t **out_value) {
  vlmc_op_t *op;
  VLMC_RETURN_IF_ERROR(
      vlmc_builder_op(b, kind, num_operands, operands, num_attrs, attrs, declared, name, &op));
  *out_value = &op->results[0];
  return NULL;
}

vlmc_status_t vlmc_builder_param(vlmc_builder_t *b, const char *param_name, const char *name,
                                 vlmc_value_t **out_value) {
  vlmc_named_attr_t attr = {"name", vlmc_attr_symbol(param_name)};
  return build_value(b, VLMC_OP_PARAM, 0, NULL, 1, &attr, NULL, name, out_value);
}

vlmc_status_t vlmc_builder_constant_ints(vlmc_builder_t *b, const vlmc_type_t *type,
                                         const int64_t *data, size_t count, const char *name,
                                         vlmc_value_t **out_value) {
  vlmc_named_attr_t attr = {"value", vlmc_attr_dense_ints(data, count)};
  return build_value(b, VLMC_OP_CONSTANT, 0, NULL, 1, &attr, type, name, out_value);
}

vlmc_status_t vlmc_builder_constant_floats(vlmc_builder_t *b, const vlmc_type_t *type,
                                           const double *data, size_t count, const char *name,
                                           vlmc_value_t **out_value) {
  vlmc_named_attr_t attr = {"value", vlmc_attr_dense_floats(data, count)};
  return build_value(b, VLMC_OP_CONSTANT, 0, NULL, 1, &attr, type, name, out_value);
}

vlmc_status_t vlmc_builder_simple(vlmc_builder_t *b, vlmc_op_kind_t kind, uint32_t num_operands,
                                  vlmc_value_t *const *operands, const char *name,
                                  vlmc_value_t **out_value) {
  return build_value(b, kind, num_operands, operands, 0, NULL, NULL, name, out_value);
}

vlmc_status_t vlmc_builder_linear(vlmc_builder_t *b, vlmc_value_t *x, vlmc_value_t *w,
                                  vlmc_value_t *bias, const char *name, vlmc_value_t **out_value) {
  vlmc_value_t *operands[3] = {x, w, bias};
  return build_value(b, VLMC_OP_LINEAR, bias ? 3 : 2, operands, 0, NULL, NULL, name, out_value);
}

vlmc_status_t vlmc_builder_rms_norm(vlmc_builder_t *b, vlmc_value_t *x, vlmc_value_t *weight,
                                    double eps, const char *name, vlmc_value_t **out_value) {
  vlmc_value_t *operands[2] = {x, weight};
  vlmc_named_attr_t attr = {"eps", vlmc_attr_float(eps)};
  return build_value(b, VLMC_OP_RMS_NORM, 2, operands, 1, &attr, NULL, name, out_value);
}

vlmc_status_t vlmc_builder_reshape(vlmc_builder_t *b, vlmc_value_t *x, const vlmc_type_t *type,
                                   const char *name, vlmc_value_t **out_value) {
  return build_value(b, VLMC_OP_RESHAPE, 1, &x, 0, NULL, type, name, out_value);
}

vlmc_status_t vlmc_builder_transpose(vlmc_builder_t *b, vlmc_value_t *x, const int64_t *perm,
                                     const char *name, vlmc_value_t **out_value) {
  vlmc_named_attr_t attr = {"perm", vlmc_attr_ints(perm, x ? x->type.rank : 0)};
  return build_value(b, VLMC_OP_TRANSPOSE, 1, &x, 1, &attr, NULL, name, out_value);
}

vlmc_status_t vlmc_builder_cast(vlmc_builder_t *b, vlmc_value_t *x, vlmc_dtype_t dtype,
                                const char *name, vlmc_value_t **out_value) {
  vlmc_named_attr_t attr = {"dtype", vlmc_attr_dtype(dtype)};
  return build_value(b, VLMC_OP_CAST, 1, &x, 1, &attr, NULL, name, out_value);
}

vlmc_status_t vlmc_builder_gather(vlmc_builder_t *b, vlmc_value_t *x, vlmc_value_t *index,
                                  int64_t axis, const char *name, vlmc_value_t **out_value) {
  vlmc_value_t *operands[2] = {x, index};
  vlmc_named_attr_t attr = {"axis", vlmc_attr_int(axis)};
  return build_value(b, VLMC_OP_GATHER, 2, operands, 1, &attr, NULL, name, out_value);
}

vlmc_status_t vlmc_builder_return(vlmc_builder_t *b, uint32_t num_values,
                                  vlmc_value_t *const *values) {
  return vlmc_builder_op(b, VLMC_OP_RETURN, num_values, values, 0, NULL, NULL, NULL, NULL);
}
