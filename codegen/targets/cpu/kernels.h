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
vlmc_status_t vlmc_cpu_kernel_matmul(vlmc_kernel_emit_t *e);
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
