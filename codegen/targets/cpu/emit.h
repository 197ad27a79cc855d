/* The cpu target's part of writing a kernel; the shared part (constants, dims, loads, the
 * epilogue, the function) is codegen/kernel_emit.h. What is the cpu's own: vector loads,
 * stores and reductions of e->vector_width f32 lanes (the vector dialect, lowered for the
 * chosen x86-64 level), and the kernel's trailing parameters %lo, %hi: the range of work
 * units [lo, hi) the runtime's thread pool hands to one call (runtime/cpu_backend.c). */
#ifndef VLMC_CODEGEN_TARGETS_CPU_EMIT_H
#define VLMC_CODEGEN_TARGETS_CPU_EMIT_H

#include "codegen/kernel_emit.h"
#include "codegen/targets/cpu/machine.h"

/* The machine the kernel is for (machine.h; the cpu target sets e->target to it after
 * vlmc_kernel_emit_init): tile sizes come from here. Never NULL: a kernel written without one
 * (no cpu target around it) gets the portable row at e->vector_width. */
const vlmc_cpu_machine_t *vlmc_cpu_emit_machine(vlmc_kernel_emit_t *e);

/* A vector<width x f32> of zeros. */
int vlmc_cpu_emit_zero_vector(vlmc_kernel_emit_t *e, int width);
/* Elements flat .. flat+width-1 of a float v as a vector<width x f32>. */
int vlmc_cpu_emit_load_vector(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int flat, int width);
/* Whether v is a dequantize prologue's result (vlmc_kernel_emit_dequantizes) whose rows and
 * groups are multiples of `width` (<= 16) elements: then a width-aligned vector of it lies in
 * one row and one group, and vlmc_cpu_emit_load_dequantized may read it. */
bool vlmc_cpu_emit_dequantizes_aligned(const vlmc_kernel_emit_t *e, const vlmc_value_t *v,
                                       int width);
/* `width` elements of such a v from `flat` on (a multiple of width): the packed words loaded
 * as a vector (or one word), each lane's value shifted out, times the group's scale plus its
 * bias, the reference's two roundings. */
int vlmc_cpu_emit_load_dequantized(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int flat, int width);
/* Whether v's source in the region (through prologue ops) is a bf16 value: a bf16 parameter,
 * or a bf16 activation (stored in f32, holding values bf16 represents exactly). */
bool vlmc_cpu_emit_reads_bf16(const vlmc_kernel_emit_t *e, const vlmc_value_t *v);
/* Elements flat .. flat+31 of a value that reads bf16 (above) as a vector<32xbf16>: loaded as
 * stored, or as two vector<16xf32> converted by vcvtne2ps2bf16 (exact: the values are bf16
 * values). AVX512_BF16 only (machine.h's bf16_dot). */
int vlmc_cpu_emit_load_bf16x32(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int flat);
/* acc + (a[2i] b[2i] + a[2i+1] b[2i+1]) in lane i: a bf16 dot product of two vector<32xbf16>
 * into a vector<16xf32> (vdpbf16ps; each product of two bf16 values is exact in f32).
 * AVX512_BF16 only. */
int vlmc_cpu_emit_dot_bf16(vlmc_kernel_emit_t *e, int acc, int a, int b);
/* Element `at` of v (width 0), or elements at .. at+width-1 as a vector. */
int vlmc_cpu_emit_load_at(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int at, int width);
/* A scalar f32 in every lane. */
int vlmc_cpu_emit_splat(vlmc_kernel_emit_t *e, int scalar, int width);
/* exp of each lane of a vector<width x f32>, as Cephes' expf: n = round(x log2 e),
 * r = x - n ln 2 (ln 2 in two parts), exp(r) = 1 + r + r^2 p(r) with p of degree 5, times 2^n
 * built in the exponent bits (no libm call per lane, and no spill of every vector register
 * around one: all are caller-saved). Measured on every float of [-87, 0] against exp in f64:
 * within 1.01 ulp. Arguments are clamped to [-87, 88]: -inf gives ~1.6e-38, not 0, and past
 * 88 the result stays finite (1.65e38) where expf would overflow. */
int vlmc_cpu_emit_exp(vlmc_kernel_emit_t *e, int x, int width);
/* Horizontal sum of a vector<width x f32> (: f32), as a tree (the order of the adds is not
 * left to right). */
int vlmc_cpu_emit_reduce_add(vlmc_kernel_emit_t *e, int vector, int width);
/* A vector<width x f32> of anchor results at flat .. flat+width-1, which lie in one row of
 * the output's last dimension: stored whole when the region has no epilogue; with one, on
 * vectors where every epilogue op allows it (add, sub, mul, div, neg, exp, silu, sigmoid,
 * casts between floats, reshapes; operands of the output's shape, a suffix of it, or a scalar),
 * else lane by lane through vlmc_kernel_emit_finish_element. */
void vlmc_cpu_emit_finish_vector(vlmc_kernel_emit_t *e, int value, int flat, int width);
/* The whole MLIR module text of the cpu kernel, function name `name` (the shared parameters,
 * then %lo: index, %hi: index); takes the body. */
vlmc_status_t vlmc_cpu_emit_finish(vlmc_kernel_emit_t *e, const char *name, vlmc_strbuf_t *out);

/* One template per anchor op kind (codegen/targets/cpu/kernel_*.c). */
typedef vlmc_status_t (*vlmc_cpu_template_fn)(vlmc_kernel_emit_t *e);
/* The template for an anchor kind, or NULL when the cpu target has none. */
vlmc_cpu_template_fn vlmc_cpu_template_for(vlmc_op_kind_t kind);

#endif
