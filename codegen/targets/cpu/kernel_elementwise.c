/* Elementwise regions: the anchor is an elementwise op (numpy broadcasting between its
 * operands), a cast, or a reshape (a copy); the epilogue follows. One work unit per output
 * element; an operand of the output's shape is read at the flat index, a broadcast one
 * through the output's multi-index. */
#include "codegen/targets/cpu/kernels.h"

vlmc_status_t vlmc_cpu_kernel_elementwise(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  e->template_name = op->kind == VLMC_OP_RESHAPE ? "copy" : "elementwise";
  e->cost = 1 + (int64_t)(e->region->num_ops - e->anchor_index);
  int one = vlmc_kernel_emit_index(e, 1);
  int flat = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = %%lo to %%hi step " VLMC_SSA " {", flat, one);
  vlmc_kernel_emit_elementwise_element(e, flat);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
