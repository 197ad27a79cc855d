/* The vulkan kernel templates, one function per anchor op family (kernel_*.c in this folder),
 * and the table that picks one for a region's anchor (templates.c). Each covers exactly the
 * work units of the cpu template of the same name (vlmc_kernel_work, by template name): see
 * emit.h for how a template is written and README.md for an example. */
#ifndef VLMC_CODEGEN_TARGETS_VULKAN_KERNELS_H
#define VLMC_CODEGEN_TARGETS_VULKAN_KERNELS_H

#include "codegen/targets/vulkan/emit.h"

/* kernel_elementwise.c: a chain of elementwise ops, cast, reshape; one invocation per output
 * element. */
vlmc_status_t vlmc_vk_kernel_elementwise(vlmc_kernel_emit_t *e);
/* kernel_linear.c: linear (x W^T + b) of a single static row, the decode GEMV (any other x
 * goes to kernel_linear_tiles.c); matmul. */
vlmc_status_t vlmc_vk_kernel_linear(vlmc_kernel_emit_t *e);
/* kernel_linear_tiles.c: linear as 64 x 64 output tiles, the "linear_tiles" template. */
vlmc_status_t vlmc_vk_kernel_linear_tiles(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_vk_kernel_matmul(vlmc_kernel_emit_t *e);
/* kernel_norm.c: rms_norm, layer_norm and softmax. */
vlmc_status_t vlmc_vk_kernel_rms_norm(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_vk_kernel_layer_norm(vlmc_kernel_emit_t *e);
/* The statistic of a norm prologue (kernel_emit.h) that a one-row linear reads x through:
 * invocation tid of `threads` sums the squares of elements tid, tid + threads, ... (8 loads a
 * step), a workgroup reduction when threads > 1 (a barrier: call it in the kernel's top level),
 * 1 / sqrt(sum / K + eps) as the norm's own kernel computes it; given to the emitter. */
void vlmc_vk_emit_norm_prologue_scale(vlmc_kernel_emit_t *e, const vlmc_op_t *norm, int tid,
                                      int64_t threads);
/* The statistic from this invocation's partial sum of squares of the row (a workgroup
 * reduction over `threads` invocations when threads > 1; top level only), not given to the
 * emitter: for a template that sums the row in its own loads (the one-pass GEMV). */
int vlmc_vk_emit_norm_scale(vlmc_kernel_emit_t *e, const vlmc_op_t *norm, int partial, int64_t threads);
vlmc_status_t vlmc_vk_kernel_softmax(vlmc_kernel_emit_t *e);
/* kernel_rope.c: rope in every layout. */
vlmc_status_t vlmc_vk_kernel_rope(vlmc_kernel_emit_t *e);
/* kernel_attention.c: attention with segments, causal masks and a kv cache; for a decode
 * shape (decode_fits) it hands the region to kernel_attention_decode.c. */
vlmc_status_t vlmc_vk_kernel_attention(vlmc_kernel_emit_t *e);
bool vlmc_vk_attention_decode_fits(const vlmc_op_t *op);
/* decode_fits with a static S of at most 16: a decode step's shape (the split kernel). */
bool vlmc_vk_attention_decode_shape(const vlmc_op_t *op);
vlmc_status_t vlmc_vk_kernel_attention_decode(vlmc_kernel_emit_t *e);
/* kernel_movement.c: data movement and selection. */
vlmc_status_t vlmc_vk_kernel_gather(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_vk_kernel_embedding(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_vk_kernel_scatter_rows(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_vk_kernel_slice(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_vk_kernel_concat(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_vk_kernel_transpose(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_vk_kernel_kv_cache_append(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_vk_kernel_argmax(vlmc_kernel_emit_t *e);

/* Variants for CPU devices (lavapipe): the same template names, work units, inputs and
 * epilogues as the kernels above, shaped for a CPU running SPIR-V (no workgroup memory, no
 * barriers, no subgroup operations; each invocation register-blocks many outputs so that each
 * load feeds many FMAs: llvmpipe turns every load in a loop into a per-lane scalar loop). */
/* kernel_linear_lanes.c: linear; lanes over rows (M > 1) or over features (M == 1). */
vlmc_status_t vlmc_vk_kernel_linear_lanes(vlmc_kernel_emit_t *e);
/* kernel_attention_lanes.c: attention; up to 4 (query row, query head) slots per invocation,
 * all on one kv head, so each k and v load feeds them all. */
vlmc_status_t vlmc_vk_kernel_attention_lanes(vlmc_kernel_emit_t *e);
/* kernel_norm_lanes.c: rms_norm and layer_norm; a row per invocation, for static rows of up
 * to 16384 elements (applies). */
vlmc_status_t vlmc_vk_kernel_rms_norm_lanes(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_vk_kernel_layer_norm_lanes(vlmc_kernel_emit_t *e);
bool vlmc_vk_norm_lanes_applies(const vlmc_op_t *op);
/* kernel_rope.c: rope_heads; a workgroup walks 64 units after its tables' one barrier. */
vlmc_status_t vlmc_vk_kernel_rope_lanes(vlmc_kernel_emit_t *e);

/* Variants for GPUs with cooperative matrices (feature "cooperativeMatrix"). */
/* kernel_linear_coop.c: linear_tiles on 16 x 16 f16 -> f32 cooperative matrices, for an f16 x. */
vlmc_status_t vlmc_vk_kernel_linear_coop(vlmc_kernel_emit_t *e);
bool vlmc_vk_linear_coop_applies(const vlmc_op_t *op);
/* kernel_attention_coop.c: attention (flash, FlashAttention-2 layout) on cooperative
 * matrices for f16 q, k, v with head dims multiples of 16 up to 128; not a decode shape. */
vlmc_status_t vlmc_vk_kernel_attention_coop(vlmc_kernel_emit_t *e);
bool vlmc_vk_attention_coop_applies(const vlmc_op_t *op);

#endif
