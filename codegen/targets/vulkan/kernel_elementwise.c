/* Elementwise regions for the vulkan target: the anchor is an elementwise op (numpy
 * broadcasting between its operands), a cast, or a reshape (a copy); the epilogue follows.
 * One work unit per output element, one invocation per unit (as the cpu template,
 * codegen/targets/cpu/kernel_elementwise.c); an operand of the output's shape is read at the
 * flat index, a broadcast one through the output's multi-index. */
#include "codegen/targets/vulkan/kernels.h"

/* Invocations per workgroup, one element each. */
enum { GROUP = 64 };

vlmc_status_t vlmc_vk_kernel_elementwise(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  e->template_name = op->kind == VLMC_OP_RESHAPE ? "copy" : "elementwise";
  e->cost = 1 + (int64_t)(e->region->num_ops - e->anchor_index);
  vlmc_vk_emit_set_workgroup(e, GROUP, 1, 1, GROUP);
  int flat = vlmc_vk_emit_open_unit(e);
  vlmc_kernel_emit_elementwise_element(e, flat);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
