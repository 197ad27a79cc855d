/* Per-op checks that types cannot express: constant data ranges, uses, function results. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "ir/internal.h"

vlmc_status_t vlmc_verify_none(const vlmc_module_t *module, const vlmc_op_t *op) { return NULL; }

static bool int_fits(vlmc_dtype_t dtype, int64_t v) {
  switch (dtype) {
    case VLMC_DTYPE_I32: return v >= INT32_MIN && v <= INT32_MAX;
    case VLMC_DTYPE_I8: return v >= INT8_MIN && v <= INT8_MAX;
    case VLMC_DTYPE_U8: return v >= 0 && v <= UINT8_MAX;
    case VLMC_DTYPE_U32: return v >= 0 && v <= UINT32_MAX;
    case VLMC_DTYPE_BOOL: return v == 0 || v == 1;
    default: return true;
  }
}

static double float_max(vlmc_dtype_t dtype) {
  switch (dtype) {
    case VLMC_DTYPE_F16: return 65504.0;
    case VLMC_DTYPE_F64: return DBL_MAX;
    default: return FLT_MAX; /* f32, bf16 (bf16's largest finite value is just below) */
  }
}

vlmc_status_t vlmc_verify_constant(const vlmc_module_t *module, const vlmc_op_t *op) {
  const vlmc_attr_t *value = vlmc_op_attr(op, "value");
  vlmc_dtype_t dtype = op->results[0].type.dtype;
  const char *name = vlmc_dtype_info(dtype)->name;
  for (size_t i = 0; value->v.dense.ints && i < value->v.dense.count; ++i)
    if (!int_fits(dtype, value->v.dense.ints[i]))
      return vlmc_status_make(VLMC_OUT_OF_RANGE, "value %lld at index %zu does not fit in %s",
                              (long long)value->v.dense.ints[i], i, name);
  double max = float_max(dtype);
  for (size_t i = 0; value->v.dense.floats && i < value->v.dense.count; ++i) {
    double v = value->v.dense.floats[i];
    if (isfinite(v) && fabs(v) > max)
      return vlmc_status_make(VLMC_OUT_OF_RANGE, "value %g at index %zu is outside the %s range",
                              v, i, name);
  }
  return NULL;
}

vlmc_status_t vlmc_verify_clamp(const vlmc_module_t *module, const vlmc_op_t *op) {
  const vlmc_attr_t *lo = vlmc_op_attr(op, "min"), *hi = vlmc_op_attr(op, "max");
  if (!lo && !hi) return vlmc_status_make(VLMC_INVALID_ARGUMENT, "expected 'min', 'max' or both");
  if ((lo && isnan(lo->v.f)) || (hi && isnan(hi->v.f)))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "clamp bounds must not be NaN");
  if (lo && hi && lo->v.f > hi->v.f)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "expected min <= max, got %g > %g", lo->v.f,
                            hi->v.f);
  return NULL;
}

/* The cache operand is consumed: with no other use, the runtime may append in place. */
vlmc_status_t vlmc_verify_kv_cache_append(const vlmc_module_t *module, const vlmc_op_t *op) {
  uint32_t uses = vlmc_value_use_count(op->operands[0]);
  if (uses == 1) return NULL;
  return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                          "the cache operand has %u uses; kv_cache_append must be its only use "
                          "so that the cache can be updated in place", uses);
}

vlmc_status_t vlmc_verify_inverse_permutation(const vlmc_module_t *module, const vlmc_op_t *op) {
  const vlmc_attr_t *data = vlmc_value_constant(op->operands[0]);
  if (!data || !data->v.dense.ints) return NULL;
  int64_t *scratch = malloc((data->v.dense.count + 1) * sizeof *scratch);
  if (!scratch) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_status_t st =
      vlmc_index_inverse_permutation(data->v.dense.ints, data->v.dense.count, scratch);
  free(scratch);
  return vlmc_status_annotate(st, "constant operand: ");
}

vlmc_status_t vlmc_verify_return(const vlmc_module_t *module, const vlmc_op_t *op) {
  const vlmc_func_t *func = op->block->func;
  if (op->num_operands != func->num_results)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "@%s returns %u values, but 'return' has %u",
                            func->name, func->num_results, op->num_operands);
  for (uint32_t i = 0; i < op->num_operands; ++i)
    if (!vlmc_type_equal(&op->operands[i]->type, &func->result_types[i]))
      return vlmc_ir_error(module, VLMC_INVALID_ARGUMENT,
                           "result %u has type %T, but @%s declares %T", i, &op->operands[i]->type,
                           func->name, &func->result_types[i]);
  return NULL;
}
