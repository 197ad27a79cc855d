/* The cpu target's kernel-writing helpers (codegen/targets/cpu/emit.h): vectors and the
 * work-range signature. */
#include "codegen/targets/cpu/emit.h"

/* The cpu's memo kinds, after the shared emitter's. */
enum { MEMO_ZERO_VECTOR = VLMC_KERNEL_MEMO_TARGET };

const vlmc_cpu_machine_t *vlmc_cpu_emit_machine(vlmc_kernel_emit_t *e) {
  if (!e->target) {
    /* Not through the cpu target: the defaults, at the width the kernel was asked for. */
    static _Thread_local vlmc_cpu_machine_t fallback;
    fallback = vlmc_cpu_machine_for("x86-64", "", 0, 0);
    fallback.vector_width = e->vector_width;
    if (e->vector_width >= 16) fallback.vector_registers = 32;
    return &fallback;
  }
  return e->target;
}

int vlmc_cpu_emit_zero_vector(vlmc_kernel_emit_t *e, int width) {
  int v = vlmc_kernel_emit_memo_find(e, MEMO_ZERO_VECTOR, width);
  if (v >= 0) return v;
  v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = arith.constant dense<0.0> : vector<%dxf32>", v, width);
  return vlmc_kernel_emit_memo_add(e, MEMO_ZERO_VECTOR, width, v);
}

int vlmc_cpu_emit_load_vector(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int flat, int width) {
  int i = vlmc_kernel_emit_source_input(e, v);
  if (i < 0 || !vlmc_dtype_info(v->type.dtype)->is_float) {
    vlmc_kernel_emit_fail(e, "kernel vector-reads a value that is not a readable float value");
    return vlmc_cpu_emit_zero_vector(e, width);
  }
  vlmc_dtype_t storage = vlmc_kernel_emit_input_storage(e, (uint32_t)i);
  const char *st = vlmc_kernel_emit_storage_type(storage);
  int raw = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.load %%b%d[" VLMC_SSA "] : memref<?x%s>, vector<%dx%s>",
                        raw, i, flat, st, width, st);
  if (storage != VLMC_DTYPE_BF16 && storage != VLMC_DTYPE_F16) return raw;
  int wide = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.extf " VLMC_SSA " : vector<%dx%s> to vector<%dxf32>",
                        wide, raw, width, st, width);
  return wide;
}

bool vlmc_cpu_emit_reads_bf16(const vlmc_kernel_emit_t *e, const vlmc_value_t *v) {
  int i = vlmc_kernel_emit_source_input(e, v);
  return i >= 0 && e->region->inputs[i]->type.dtype == VLMC_DTYPE_BF16;
}

int vlmc_cpu_emit_load_bf16x32(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int flat) {
  int i = vlmc_kernel_emit_source_input(e, v);
  if (i < 0 || e->region->inputs[i]->type.dtype != VLMC_DTYPE_BF16) {
    vlmc_kernel_emit_fail(e, "kernel reads bf16 pairs from a value that is not bf16");
    return vlmc_cpu_emit_zero_vector(e, 16);
  }
  int raw = vlmc_kernel_emit_fresh(e);
  if (vlmc_kernel_emit_input_storage(e, (uint32_t)i) == VLMC_DTYPE_BF16) {
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.load %%b%d[" VLMC_SSA "] : memref<?xbf16>, "
                          "vector<32xbf16>", raw, i, flat);
    return raw;
  }
  int lo = vlmc_cpu_emit_load_vector(e, v, flat, 16);
  int hi = vlmc_cpu_emit_load_vector(e, v, vlmc_kernel_emit_index_op(e, "arith.addi", flat,
                                                                     vlmc_kernel_emit_index(e, 16)), 16);
  /* The intrinsic's first operand gives the upper 16 elements, its second the lower. */
  vlmc_kernel_emit_line(e, VLMC_SSA " = llvm.call_intrinsic \"llvm.x86.avx512bf16.cvtne2ps2bf16.512\"("
                        VLMC_SSA ", " VLMC_SSA ") : (vector<16xf32>, vector<16xf32>) -> "
                        "vector<32xbf16>", raw, hi, lo);
  return raw;
}

int vlmc_cpu_emit_dot_bf16(vlmc_kernel_emit_t *e, int acc, int a, int b) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = llvm.call_intrinsic \"llvm.x86.avx512bf16.dpbf16ps.512\"("
                        VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA ") : (vector<16xf32>, vector<32xbf16>, "
                        "vector<32xbf16>) -> vector<16xf32>", v, acc, a, b);
  return v;
}

int vlmc_cpu_emit_load_at(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int at, int width) {
  return width ? vlmc_cpu_emit_load_vector(e, v, at, width) : vlmc_kernel_emit_load(e, v, at);
}

int vlmc_cpu_emit_reduce_add(vlmc_kernel_emit_t *e, int vector, int width) {
  int v = vlmc_kernel_emit_fresh(e);
  /* reassoc: a tree of log2(width) shuffles and adds; without it LLVM keeps the strict
   * left-to-right order, width - 1 dependent scalar adds (a linear tile's 16 sums took as
   * long as a quarter of its dot products). */
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.reduction <add>, " VLMC_SSA " fastmath<reassoc> : "
                        "vector<%dxf32> into f32", v, vector, width);
  return v;
}

void vlmc_cpu_emit_finish_vector(vlmc_kernel_emit_t *e, int value, int flat, int width) {
  if (!vlmc_kernel_emit_has_epilogue(e)) {
    vlmc_kernel_emit_line(e, "vector.store " VLMC_SSA ", %%out[" VLMC_SSA "] : memref<?xf32>, vector<%dxf32>",
                          value, flat, width);
    return;
  }
  for (int lane = 0; lane < width; ++lane) {
    int s = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.extract " VLMC_SSA "[%d] : f32 from vector<%dxf32>",
                          s, value, lane, width);
    int at = lane ? vlmc_kernel_emit_index_op(e, "arith.addi", flat, vlmc_kernel_emit_index(e, lane)) : flat;
    vlmc_kernel_emit_finish_element(e, s, at);
  }
}

vlmc_status_t vlmc_cpu_emit_finish(vlmc_kernel_emit_t *e, const char *name, vlmc_strbuf_t *out) {
  return vlmc_kernel_emit_function(e, name, "%lo: index, %hi: index", out);
}
