/* The cpu kernel templates, one function per anchor op family (kernel_*.c in this folder), and
 * the table that picks one for a region's anchor (templates.c). Each writes its loops with the
 * helpers of codegen/kernel_emit.h and emit.h and sets the work count: see kernel_emit.h. */
#ifndef VLMC_CODEGEN_CPU_KERNELS_H
#define VLMC_CODEGEN_CPU_KERNELS_H

#include "codegen/targets/cpu/emit.h"

/* kernel_elementwise.c: a chain of elementwise ops with numpy broadcasting, cast, reshape
 * (a copy); one work unit per output element. */
vlmc_status_t vlmc_cpu_kernel_elementwise(vlmc_kernel_emit_t *e);
/* kernel_linear.c: linear (x W^T + b) with register-blocked vector tiles; matmul. */
vlmc_status_t vlmc_cpu_kernel_linear(vlmc_kernel_emit_t *e);
/* A linear whose weight is quantized (kernel_linear_dequant.c): the group scale and bias
 * factored out of the sums. vlmc_cpu_kernel_linear hands it the linears it takes. */
bool vlmc_cpu_linear_dequant_applies(const vlmc_kernel_emit_t *e, const vlmc_value_t *w);
vlmc_status_t vlmc_cpu_kernel_linear_dequant(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_matmul(vlmc_kernel_emit_t *e);

/* kernel_linear_panels.c: the linear's rows in blocks of MR as an outer product over panels of
 * packed bf16 weights (vdpbf16ps), for a bf16 input in f32 storage and bf16 weights on a CPU
 * with AVX512_BF16 (vlmc_cpu_linear_panels_apply). The linear template keeps the row blocks
 * (block_rows of them, from its L2) and the one-row GEMV; this writes one block's rows
 * [from, to) (whole tiles up to to_r) for the thread's units [%lo, %hi). */
typedef struct {
  const vlmc_value_t *x, *w, *b; /* b: NULL without a bias */
  int64_t k, n;
  int64_t block_rows;             /* the most rows a block has (block_rows) */
  int pk, xt;                     /* the scratch (vlmc_cpu_linear_panels_scratch) */
  int from, to_r, to;             /* the block's rows (index SSA) */
  /* A 4-bit weight instead of a bf16 one: its dequantize (w is then its result), and two more
   * scratches: the panel's scales and biases of a group, the block's rows' sums of x over it. */
  const vlmc_op_t *dq;
  int sc, xsum;
} vlmc_linear_panels_t;
bool vlmc_cpu_linear_panels_apply(vlmc_kernel_emit_t *e, const vlmc_value_t *x,
                                  const vlmc_value_t *w);
/* The same for a 4-bit weight read through its dequantize (groups of 32 to 256 values, whole
 * groups a row): a bf16 x (the bf16-matmul precision) against the exact bf16 values q, the
 * group's scale and bias applied to each chunk's sums. */
bool vlmc_cpu_linear_panels_apply_quantized(vlmc_kernel_emit_t *e, const vlmc_value_t *x,
                                            const vlmc_op_t *dq);
int64_t vlmc_cpu_linear_panels_block_rows(const vlmc_cpu_machine_t *m);
/* Before any loop: the panel's and the block's scratch (allocas: 32 KiB and block_rows x 512
 * bytes of stack). */
void vlmc_cpu_linear_panels_scratch(vlmc_kernel_emit_t *e, vlmc_linear_panels_t *a);
void vlmc_cpu_linear_panels(vlmc_kernel_emit_t *e, const vlmc_linear_panels_t *a);
/* kernel_norm.c: rms_norm, layer_norm and softmax over the last axis (or `axis`). */
vlmc_status_t vlmc_cpu_kernel_rms_norm(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_layer_norm(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_softmax(vlmc_kernel_emit_t *e);
/* kernel_rope.c: rope in every layout (plain, mrope_sectioned, mrope_interleaved,
 * vision_2d). */
vlmc_status_t vlmc_cpu_kernel_rope(vlmc_kernel_emit_t *e);
/* kernel_attention.c: attention with segments, causal masks and a kv cache (online
 * softmax, one query row and head per work unit). */
vlmc_status_t vlmc_cpu_kernel_attention(vlmc_kernel_emit_t *e);
/* kernel_movement.c: data movement and selection. */
vlmc_status_t vlmc_cpu_kernel_gather(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_embedding(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_scatter_rows(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_slice(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_concat(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_transpose(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_kv_cache_append(vlmc_kernel_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_argmax(vlmc_kernel_emit_t *e);

#endif
