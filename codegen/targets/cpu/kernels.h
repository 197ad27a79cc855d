/* The cpu kernel templates, one function per anchor op family (codegen/cpu_kernel_*.c), and
 * the table that picks one for a region's anchor (cpu_templates.c). Each writes its loops with
 * the helpers of codegen/cpu_emit.h and sets the work count: see that header's contract. */
#ifndef VLMC_CODEGEN_CPU_KERNELS_H
#define VLMC_CODEGEN_CPU_KERNELS_H

#include "codegen/kernel_emit.h"

/* cpu_kernel_elementwise.c: a chain of elementwise ops with numpy broadcasting, cast, reshape
 * (a copy); one work unit per output element. */
vlmc_status_t vlmc_cpu_kernel_elementwise(vlmc_cpu_emit_t *e);
/* cpu_kernel_linear.c: linear (x W^T + b) with register-blocked vector tiles; matmul. */
vlmc_status_t vlmc_cpu_kernel_linear(vlmc_cpu_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_matmul(vlmc_cpu_emit_t *e);
/* cpu_kernel_norm.c: rms_norm, layer_norm and softmax over the last axis (or `axis`). */
vlmc_status_t vlmc_cpu_kernel_rms_norm(vlmc_cpu_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_layer_norm(vlmc_cpu_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_softmax(vlmc_cpu_emit_t *e);
/* cpu_kernel_rope.c: rope in every layout (plain, mrope_sectioned, mrope_interleaved,
 * vision_2d). */
vlmc_status_t vlmc_cpu_kernel_rope(vlmc_cpu_emit_t *e);
/* cpu_kernel_attention.c: attention with segments, causal masks and a kv cache (online
 * softmax, one query row and head per work unit). */
vlmc_status_t vlmc_cpu_kernel_attention(vlmc_cpu_emit_t *e);
/* cpu_kernel_movement.c: data movement and selection. */
vlmc_status_t vlmc_cpu_kernel_gather(vlmc_cpu_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_embedding(vlmc_cpu_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_scatter_rows(vlmc_cpu_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_slice(vlmc_cpu_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_concat(vlmc_cpu_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_transpose(vlmc_cpu_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_kv_cache_append(vlmc_cpu_emit_t *e);
vlmc_status_t vlmc_cpu_kernel_argmax(vlmc_cpu_emit_t *e);

#endif
