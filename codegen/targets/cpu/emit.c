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

/* `width` dequantized elements from `flat` on, one at a time (the generic path: a template
 * with a fused path reads the packed words itself). */
static int load_dequantized_vector(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int flat, int width) {
  int lanes[64];
  for (int j = 0; j < width && j < 64; ++j)
    lanes[j] = vlmc_kernel_emit_load(e, v, vlmc_kernel_emit_index_op(e, "arith.addi", flat, vlmc_kernel_emit_index(e, j)));
  vlmc_strbuf_t list;
  vlmc_strbuf_init(&list);
  for (int j = 0; j < width && j < 64; ++j) vlmc_strbuf_printf(&list, "%s" VLMC_SSA, j ? ", " : "", lanes[j]);
  int vec = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.from_elements %s : vector<%dxf32>", vec,
                        list.data ? list.data : "", width);
  vlmc_strbuf_deinit(&list);
  return vec;
}

bool vlmc_cpu_emit_dequantizes_aligned(const vlmc_kernel_emit_t *e, const vlmc_value_t *v,
                                       int width) {
  const vlmc_op_t *dq = vlmc_dispatch_dequantize_source(e->region, e->anchor_index, v);
  if (!dq || width < 1 || width > 16) return false;
  vlmc_quant_layout_t L = vlmc_dequantize_layout(dq);
  return L.cols % width == 0 && L.group % width == 0;
}

static int i32_vector_constant(vlmc_kernel_emit_t *e, const int64_t *lanes, int width) {
  vlmc_strbuf_t list;
  vlmc_strbuf_init(&list);
  for (int j = 0; j < width; ++j) vlmc_strbuf_printf(&list, "%s%lld", j ? ", " : "", (long long)lanes[j]);
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant dense<[%s]> : vector<%dxi32>", v,
                        list.data ? list.data : "", width);
  vlmc_strbuf_deinit(&list);
  return v;
}

static int splat(vlmc_kernel_emit_t *e, int scalar, const char *type, int width) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.broadcast " VLMC_SSA " : %s to vector<%dx%s>", v, scalar,
                        type, width, type);
  return v;
}

int vlmc_cpu_emit_load_dequantized(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int flat, int width) {
  const vlmc_op_t *dq = vlmc_dispatch_dequantize_source(e->region, e->anchor_index, v);
  vlmc_quant_layout_t L = vlmc_dequantize_layout(dq);
  int64_t bits = L.bits, per_word = L.per_word;
  int packed = vlmc_kernel_emit_source_input(e, dq->operands[0]);
  int row = vlmc_kernel_emit_index_op(e, "arith.divui", flat, vlmc_kernel_emit_index(e, L.cols));
  int col = vlmc_kernel_emit_index_op(e, "arith.remui", flat, vlmc_kernel_emit_index(e, L.cols));
  int word_at = vlmc_kernel_emit_quant_index(e, row, L.words, col, per_word);
  int64_t shifts[16] = {0};
  for (int j = 0; j < width; ++j) shifts[j] = (j % per_word) * bits;
  int lanes, shift = i32_vector_constant(e, shifts, width);
  if (width >= per_word) {
    /* whole words: lane j takes word j / per_word (col is a multiple of width) */
    int nw = (int)(width / per_word), raw = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.load %%b%d[" VLMC_SSA "] : memref<?xi32>, vector<%dxi32>",
                          raw, packed, word_at, nw);
    vlmc_strbuf_t mask;
    vlmc_strbuf_init(&mask);
    for (int j = 0; j < width; ++j) vlmc_strbuf_printf(&mask, "%s%lld", j ? ", " : "", (long long)(j / per_word));
    lanes = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.shuffle " VLMC_SSA ", " VLMC_SSA " [%s] : vector<%dxi32>, "
                          "vector<%dxi32>", lanes, raw, raw, mask.data ? mask.data : "", nw, nw);
    vlmc_strbuf_deinit(&mask);
  } else {
    /* part of one word: its values from col mod per_word on */
    int word = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load %%b%d[" VLMC_SSA "] : memref<?xi32>", word, packed, word_at);
    lanes = splat(e, word, "i32", width);
    int first = vlmc_kernel_emit_index_op(e, "arith.remui", col, vlmc_kernel_emit_index(e, per_word));
    int first32 = vlmc_kernel_emit_fresh(e), bits32 = vlmc_kernel_emit_fresh(e);
    int base = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : index to i32", first32, first);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant %lld : i32", bits32, (long long)bits);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.muli " VLMC_SSA ", " VLMC_SSA " : i32", base, first32, bits32);
    int moved = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addi " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", moved, shift,
                          splat(e, base, "i32", width), width);
    shift = moved;
  }
  int64_t mask_lanes[16] = {0};
  for (int j = 0; j < width; ++j) mask_lanes[j] = (1 << bits) - 1;
  int shifted = vlmc_kernel_emit_fresh(e), q = vlmc_kernel_emit_fresh(e), qf = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.shrui " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", shifted, lanes,
                        shift, width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", q, shifted,
                        i32_vector_constant(e, mask_lanes, width), width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.uitofp " VLMC_SSA " : vector<%dxi32> to vector<%dxf32>", qf, q,
                        width, width);
  /* one group for all lanes (group is a multiple of width): its scale and bias, splat */
  int g = vlmc_kernel_emit_quant_index(e, row, L.groups, col, L.group);
  int scale = splat(e, vlmc_kernel_emit_load(e, dq->operands[1], g), "f32", width);
  int bias = splat(e, vlmc_kernel_emit_load(e, dq->operands[2], g), "f32", width);
  /* two roundings, as the reference */
  return vlmc_kernel_emit_float_op(e, "arith.addf", vlmc_kernel_emit_float_op(e, "arith.mulf", scale, qf, width),
                                   bias, width);
}

int vlmc_cpu_emit_load_vector(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int flat, int width) {
  if (vlmc_kernel_emit_dequantizes(e, v)) return load_dequantized_vector(e, v, flat, width);
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

/* ---- vector arithmetic ---- */

static int vec_binary(vlmc_kernel_emit_t *e, const char *op, int a, int b, int width) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = %s " VLMC_SSA ", " VLMC_SSA " : vector<%dxf32>", v, op, a, b,
                        width);
  return v;
}

static int vec_fma(vlmc_kernel_emit_t *e, int a, int b, int c, int width) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.fma " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA
                        " : vector<%dxf32>", v, a, b, c, width);
  return v;
}

int vlmc_cpu_emit_splat(vlmc_kernel_emit_t *e, int scalar, int width) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.broadcast " VLMC_SSA " : f32 to vector<%dxf32>", v,
                        scalar, width);
  return v;
}

static int splat_const(vlmc_kernel_emit_t *e, double value, int width) {
  return vlmc_cpu_emit_splat(e, vlmc_kernel_emit_f32(e, value), width);
}

/* max / min as a compare and a select (one maxps / minps); arith.maximumf's NaN and
 * signed-zero rules would cost a blend. */
static int vec_select_cmp(vlmc_kernel_emit_t *e, const char *pred, int a, int b, int width) {
  int c = vlmc_kernel_emit_fresh(e), v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpf %s, " VLMC_SSA ", " VLMC_SSA " : vector<%dxf32>", c,
                        pred, a, b, width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA
                        " : vector<%dxi1>, vector<%dxf32>", v, c, a, b, width, width);
  return v;
}

int vlmc_cpu_emit_exp(vlmc_kernel_emit_t *e, int x, int width) {
  x = vec_select_cmp(e, "ogt", x, splat_const(e, -87.0, width), width);
  x = vec_select_cmp(e, "olt", x, splat_const(e, 88.0, width), width);
  /* round to nearest by adding 1.5 * 2^23 (SSE2 has no vector floor) */
  int magic = splat_const(e, 12582912.0, width);
  int n = vec_binary(e, "arith.subf", vec_fma(e, x, splat_const(e, 1.44269504088896341, width), magic, width),
                     magic, width);
  int r = vec_fma(e, n, splat_const(e, -0.693359375, width), x, width);
  r = vec_fma(e, n, splat_const(e, 2.12194440e-4, width), r, width);
  static const double coef[] = {1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                                4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1};
  int p = splat_const(e, coef[0], width);
  for (size_t c = 1; c < sizeof coef / sizeof coef[0]; ++c)
    p = vec_fma(e, p, r, splat_const(e, coef[c], width), width);
  int rr = vec_binary(e, "arith.mulf", r, r, width);
  int poly = vec_fma(e, p, rr, r, width);
  int one = splat_const(e, 1.0, width);
  int y = vec_binary(e, "arith.addf", poly, one, width);
  /* 2^n: (n + 127) << 23 as float bits; -126 <= n <= 127 after the clamps: a normal number */
  int ni = vlmc_kernel_emit_fresh(e), biased = vlmc_kernel_emit_fresh(e), bits = vlmc_kernel_emit_fresh(e);
  int pow2 = vlmc_kernel_emit_fresh(e), bias = vlmc_kernel_emit_fresh(e), shift = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant dense<127> : vector<%dxi32>", bias, width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant dense<23> : vector<%dxi32>", shift, width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.fptosi " VLMC_SSA " : vector<%dxf32> to vector<%dxi32>",
                        ni, n, width, width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addi " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>",
                        biased, ni, bias, width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.shli " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", bits,
                        biased, shift, width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.bitcast " VLMC_SSA " : vector<%dxi32> to vector<%dxf32>",
                        pow2, bits, width, width);
  return vec_binary(e, "arith.mulf", y, pow2, width);
}

/* Each lane rounded to bf16 and back, to nearest even, NaN kept quiet: the integer form of
 * the shared emitter's scalar rounding (LLVM would call __truncsfbf2 per lane without
 * AVX512_BF16). */
static int vec_round_bf16(vlmc_kernel_emit_t *e, int x, int width) {
  int bits = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.bitcast " VLMC_SSA " : vector<%dxf32> to vector<%dxi32>",
                        bits, x, width, width);
  int c[5];
  static const long long values[5] = {16, 1, 32767, -65536, 4194304};
  for (int i = 0; i < 5; ++i) {
    c[i] = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant dense<%lld> : vector<%dxi32>", c[i], values[i],
                          width);
  }
  int hi = vlmc_kernel_emit_fresh(e), lsb = vlmc_kernel_emit_fresh(e), bias = vlmc_kernel_emit_fresh(e);
  int sum = vlmc_kernel_emit_fresh(e), rounded = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.shrui " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", hi, bits, c[0], width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", lsb, hi, c[1], width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addi " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", bias, lsb, c[2], width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addi " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", sum, bits, bias, width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", rounded, sum, c[3], width);
  int nan_bits = vlmc_kernel_emit_fresh(e), nan_kept = vlmc_kernel_emit_fresh(e), is_nan = vlmc_kernel_emit_fresh(e);
  int chosen = vlmc_kernel_emit_fresh(e), v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.ori " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", nan_bits, bits, c[4], width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", nan_kept, nan_bits, c[3], width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpf uno, " VLMC_SSA ", " VLMC_SSA " : vector<%dxf32>", is_nan, x, x, width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA
                        " : vector<%dxi1>, vector<%dxi32>", chosen, is_nan, nan_kept, rounded, width, width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.bitcast " VLMC_SSA " : vector<%dxi32> to vector<%dxf32>", v,
                        chosen, width, width);
  return v;
}

static int vec_round_f16(vlmc_kernel_emit_t *e, int x, int width) {
  int narrow = vlmc_kernel_emit_fresh(e), wide = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.truncf " VLMC_SSA " : vector<%dxf32> to vector<%dxf16>",
                        narrow, x, width, width);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.extf " VLMC_SSA " : vector<%dxf16> to vector<%dxf32>",
                        wide, narrow, width, width);
  return wide;
}

static int vec_round_to(vlmc_kernel_emit_t *e, int x, vlmc_dtype_t to, int width) {
  return to == VLMC_DTYPE_BF16 ? vec_round_bf16(e, x, width)
         : to == VLMC_DTYPE_F16 ? vec_round_f16(e, x, width)
                                : x;
}

/* ---- epilogues on vectors ---- */

static bool is_low_float(vlmc_dtype_t d) { return d == VLMC_DTYPE_BF16 || d == VLMC_DTYPE_F16; }

/* Whether op can run on vectors here: float arithmetic the helpers above cover. */
static bool vector_op_ok(const vlmc_op_t *op) {
  vlmc_dtype_t d = op->results[0].type.dtype;
  if (d != VLMC_DTYPE_F32 && !is_low_float(d)) return false;
  switch (op->kind) {
    case VLMC_OP_ADD: case VLMC_OP_SUB: case VLMC_OP_MUL: case VLMC_OP_DIV: case VLMC_OP_NEG:
    case VLMC_OP_EXP: case VLMC_OP_SILU: case VLMC_OP_SIGMOID: case VLMC_OP_RESHAPE:
      return true;
    case VLMC_OP_CAST: return vlmc_dtype_info(op->operands[0]->type.dtype)->is_float;
    default: return false;
  }
}

static int member_of(const vlmc_kernel_emit_t *e, const vlmc_op_t *op) {
  for (uint32_t i = 0; op && i < e->region->num_ops; ++i)
    if (e->region->ops[i] == op) return (int)i;
  return -1;
}

static bool same_dims(const vlmc_type_t *a, const vlmc_type_t *b) {
  if (a->rank != b->rank) return false;
  for (uint32_t d = 0; d < a->rank; ++d)
    if (!vlmc_dim_equal(a->dims[d], b->dims[d])) return false;
  return true;
}

/* Whether every epilogue op runs on vectors, its f32 anchor unrounded, and every operand that
 * is not an earlier member is a float value of the op's shape or a suffix of it (read at the
 * flat index modulo its count: contiguous while a vector stays in one row of the last dim). */
static bool vector_epilogue_ok(const vlmc_kernel_emit_t *e) {
  const vlmc_dispatch_region_t *r = e->region;
  if (r->ops[e->anchor_index]->results[0].type.dtype != VLMC_DTYPE_F32) return false;
  if (vlmc_dispatch_output(r)->type.dtype == VLMC_DTYPE_I64) return false;
  for (uint32_t k = e->anchor_index + 1; k < r->num_ops; ++k) {
    const vlmc_op_t *op = r->ops[k];
    if (!vector_op_ok(op)) return false;
    for (uint32_t j = 0; j < op->num_operands; ++j) {
      const vlmc_value_t *v = op->operands[j];
      if (member_of(e, v->def) >= (int)e->anchor_index) continue;
      if (!vlmc_dtype_info(v->type.dtype)->is_float || vlmc_kernel_emit_source_input(e, v) < 0)
        return false;
      const vlmc_type_t *t = &v->type, *o = &op->results[0].type;
      if (t->rank == 0 || !vlmc_dim_equal(t->dims[t->rank - 1], o->dims[o->rank - 1])) {
        bool scalar = true; /* all dims 1 */
        for (uint32_t d = 0; d < t->rank; ++d)
          scalar = scalar && vlmc_dim_is_static(t->dims[d]) && t->dims[d].off == 1;
        if (!scalar) return false;
      }
    }
  }
  return true;
}

/* Operand v of an epilogue op as a vector at the output's flat index. */
static int vector_operand(vlmc_kernel_emit_t *e, const vlmc_op_t *op, const vlmc_value_t *v,
                          const int *member, int flat, int width) {
  int m = member_of(e, v->def);
  if (m >= (int)e->anchor_index) return member[m];
  if (same_dims(&v->type, &op->results[0].type)) return vlmc_cpu_emit_load_vector(e, v, flat, width);
  const vlmc_type_t *t = &v->type, *o = &op->results[0].type;
  if (t->rank && vlmc_dim_equal(t->dims[t->rank - 1], o->dims[o->rank - 1])) {
    int count = vlmc_kernel_emit_dims_product(e, t, 0, t->rank);
    return vlmc_cpu_emit_load_vector(e, v, vlmc_kernel_emit_index_op(e, "arith.remui", flat, count), width);
  }
  return vlmc_cpu_emit_splat(e, vlmc_kernel_emit_load(e, v, vlmc_kernel_emit_index(e, 0)), width);
}

static int logistic_denominator(vlmc_kernel_emit_t *e, int x, int width) {
  int neg = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.negf " VLMC_SSA " : vector<%dxf32>", neg, x, width);
  int one = splat_const(e, 1.0, width);
  int exp_neg = vlmc_cpu_emit_exp(e, neg, width);
  return vec_binary(e, "arith.addf", one, exp_neg, width);
}

static int vector_op(vlmc_kernel_emit_t *e, const vlmc_op_t *op, const int *in, int width) {
  int v = in[0];
  switch (op->kind) {
    case VLMC_OP_ADD: v = vec_binary(e, "arith.addf", in[0], in[1], width); break;
    case VLMC_OP_SUB: v = vec_binary(e, "arith.subf", in[0], in[1], width); break;
    case VLMC_OP_MUL: v = vec_binary(e, "arith.mulf", in[0], in[1], width); break;
    case VLMC_OP_DIV: v = vec_binary(e, "arith.divf", in[0], in[1], width); break;
    case VLMC_OP_NEG:
      v = vlmc_kernel_emit_fresh(e);
      vlmc_kernel_emit_line(e, VLMC_SSA " = arith.negf " VLMC_SSA " : vector<%dxf32>", v, in[0], width);
      break;
    case VLMC_OP_EXP: v = vlmc_cpu_emit_exp(e, in[0], width); break;
    case VLMC_OP_SILU: v = vec_binary(e, "arith.divf", in[0], logistic_denominator(e, in[0], width), width); break;
    case VLMC_OP_SIGMOID: {
      int one = splat_const(e, 1.0, width);
      int denominator = logistic_denominator(e, in[0], width);
      v = vec_binary(e, "arith.divf", one, denominator, width);
      break;
    }
    case VLMC_OP_CAST: return vec_round_to(e, in[0], op->results[0].type.dtype, width);
    case VLMC_OP_RESHAPE: return in[0];
    default: break; /* vector_op_ok let none other through */
  }
  /* An op computing in f16 / bf16 rounds its result, as the scalar path does. */
  return vec_round_to(e, v, op->results[0].type.dtype, width);
}

static void emit_vector_epilogue(vlmc_kernel_emit_t *e, int value, int flat, int width) {
  const vlmc_dispatch_region_t *r = e->region;
  int member[r->num_ops];
  member[e->anchor_index] = value;
  for (uint32_t k = e->anchor_index + 1; k < r->num_ops; ++k) {
    const vlmc_op_t *op = r->ops[k];
    int in[VLMC_IR_MAX_OPERANDS];
    for (uint32_t j = 0; j < op->num_operands && j < VLMC_IR_MAX_OPERANDS; ++j)
      in[j] = vector_operand(e, op, op->operands[j], member, flat, width);
    member[k] = vector_op(e, op, in, width);
  }
  vlmc_kernel_emit_line(e, "vector.store " VLMC_SSA ", %%out[" VLMC_SSA "] : memref<?xf32>, vector<%dxf32>",
                        member[r->num_ops - 1], flat, width);
}

void vlmc_cpu_emit_finish_vector(vlmc_kernel_emit_t *e, int value, int flat, int width) {
  if (!vlmc_kernel_emit_has_epilogue(e)) {
    vlmc_kernel_emit_line(e, "vector.store " VLMC_SSA ", %%out[" VLMC_SSA "] : memref<?xf32>, vector<%dxf32>",
                          value, flat, width);
    return;
  }
  if (vector_epilogue_ok(e)) {
    emit_vector_epilogue(e, value, flat, width);
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
