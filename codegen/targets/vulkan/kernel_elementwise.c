/* Elementwise regions for the vulkan target: the anchor is an elementwise op (numpy
 * broadcasting between its operands), a cast, or a reshape (a copy); the epilogue follows.
 * One work unit per output element, one invocation per unit (as the cpu template,
 * codegen/targets/cpu/kernel_elementwise.c); an operand of the output's shape is read at the
 * flat index, a broadcast one through the output's multi-index. */
#include <string.h>

#include "codegen/targets/vulkan/kernels.h"

/* Invocations per workgroup, one element each. */
enum { GROUP = 64 };

static bool same_shape(const vlmc_type_t *a, const vlmc_type_t *b) {
  if (a->rank != b->rank) return false;
  for (uint32_t d = 0; d < a->rank; ++d)
    if (!vlmc_dim_equal(a->dims[d], b->dims[d])) return false;
  return true;
}

/* The flat index into `operand` (broadcast to `out`, right-aligned) of the output element
 * whose multi-index is idx[0 .. out->rank). */
static int broadcast_index(vlmc_kernel_emit_t *e, const vlmc_type_t *operand, const vlmc_type_t *out,
                           const int *idx) {
  int at = vlmc_kernel_emit_index(e, 0);
  uint32_t shift = out->rank - operand->rank;
  for (uint32_t d = 0; d < operand->rank; ++d) {
    vlmc_dim_t dim = operand->dims[d];
    if (vlmc_dim_is_static(dim) && dim.off == 1) continue; /* broadcast: index 0 */
    int stride = vlmc_kernel_emit_dims_product(e, operand, d + 1, operand->rank);
    int term = vlmc_kernel_emit_fresh(e), sum = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.muli " VLMC_SSA ", " VLMC_SSA " : index", term,
                          idx[d + shift], stride);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addi " VLMC_SSA ", " VLMC_SSA " : index", sum, at,
                          term);
    at = sum;
  }
  return at;
}

/* idx[d] of flat index `flat` in `type`, innermost dim first. */
static void multi_index(vlmc_kernel_emit_t *e, const vlmc_type_t *type, int flat, int *idx) {
  int rest = flat;
  for (uint32_t d = type->rank; d-- > 0;) {
    int dim = vlmc_kernel_emit_dim(e, type->dims[d]);
    idx[d] = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.remui " VLMC_SSA ", " VLMC_SSA " : index", idx[d],
                          rest, dim);
    if (d == 0) break;
    int next = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.divui " VLMC_SSA ", " VLMC_SSA " : index", next,
                          rest, dim);
    rest = next;
  }
}

vlmc_status_t vlmc_vk_kernel_elementwise(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  const vlmc_type_t *out = &op->results[0].type;
  e->template_name = op->kind == VLMC_OP_RESHAPE ? "copy" : "elementwise";
  e->cost = 1 + (int64_t)(e->region->num_ops - e->anchor_index);
  vlmc_vk_emit_set_workgroup(e, GROUP, 1, 1, GROUP);
  int flat = vlmc_vk_emit_open_unit(e);
  bool broadcasts = false;
  for (uint32_t i = 0; i < op->num_operands && op->kind != VLMC_OP_RESHAPE; ++i)
    broadcasts |= !same_shape(&op->operands[i]->type, out);
  int idx[VLMC_IR_MAX_RANK];
  if (broadcasts) multi_index(e, out, flat, idx);
  int in[VLMC_IR_MAX_OPERANDS];
  for (uint32_t i = 0; i < op->num_operands && i < VLMC_IR_MAX_OPERANDS; ++i) {
    const vlmc_value_t *v = op->operands[i];
    bool flat_read = op->kind == VLMC_OP_RESHAPE || same_shape(&v->type, out);
    int at = flat_read ? flat : broadcast_index(e, &v->type, out, idx);
    in[i] = vlmc_kernel_emit_load(e, v, at);
  }
  vlmc_kernel_emit_finish_element(e, vlmc_kernel_emit_elementwise(e, op, in), flat);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
