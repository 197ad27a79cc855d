/* linear with a quantized weight (a dequantize prologue: docs/quantization.md) on the cpu.
 * The same work units as kernel_linear.c (blocks of UNIT output features, every row of x),
 * but the group's scale and bias are taken out of the sum:
 *
 *   y[m, n] = sum_g ( s[n, g] * sum_{k in g} q[n, k] x[m, k]  +  b[n, g] * sum_{k in g} x[m, k] )
 *
 * so that a weight costs its unpacking (one vector load of words for a vector of values, a
 * lane shuffle, a shift, a mask, a conversion) and one FMA, and the scale and bias two vector
 * FMAs per group and feature; the x sum of a group is shared by the unit's UNIT features. It
 * is the reference's sum in another order (the reference dequantizes each weight first):
 * equal up to f32 rounding, not bit for bit.
 *
 * Per unit, per row of x, the groups in a loop (static count), each group's vectors unrolled
 * (G / VL steps); a short last group (K not a multiple of G) after the loop. Taken when N is
 * a multiple of UNIT, G and K multiples of the vector width and G / VL <= MAX_STEPS; any other
 * quantized linear goes through kernel_linear.c's tiles, which dequantize each vector.
 * A call with fewer than MR rows (decode) runs that row by row. With MR rows or more (prefill,
 * vision) the rows go in blocks whose x stays within half the L2, and per block each of the
 * thread's units has its UNIT weight rows dequantized, exactly as the reference does (two
 * roundings), into a scratch of UNIT x K floats on the stack (at most SCRATCH_FLOATS: 176 KiB
 * at K = 11008), and MR x UNIT tiles of f32 FMAs run over the block's rows against it: the
 * unpacking is paid once per unit and block, not once per row. */
#include <stdio.h>
#include <string.h>

#include "artifact/kernel_table.h"
#include "codegen/targets/cpu/kernels.h"

enum {
  UNIT = VLMC_KERNEL_LINEAR_UNIT,
  MAX_STEPS = 16,
  MR = 4,
  SCRATCH_FLOATS = UNIT * 12288,
  QUARTERS = UNIT, /* the decode tile's weight streams: one feature of each quarter */
};

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *x, *w, *b;
  const vlmc_op_t *dq;
  int64_t n, k, bits, group, per_word, words, groups;
  int vl;
  int packed; /* the packed words' input */
  int scratch; /* the unit's dequantized rows (memref<UNIT*K x f32>), -1: none */
  /* The UNIT features a tile computes (any rows of W: a unit's, or one of each quarter's) and
   * where their rows start in the packed words and in the scales: index SSAs. */
  int feature[UNIT], word_row[UNIT], group_row[UNIT];
  /* The bf16-dot decode path (dot_fits): x's rows split into bf16 parts and permuted
   * (memref<(MR - 1) * parts * K x bf16>), the sum of x over each group (memref<(MR - 1) *
   * K / G x f32>); -1 when the kernel does not take it. */
  int xdot, xsum, parts;
} qlinear_t;

static int idx(vlmc_kernel_emit_t *e, int64_t c) { return vlmc_kernel_emit_index(e, c); }
static int add(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.addi", a, b); }
static int mul(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.muli", a, b); }
/* a + c and a * c for a static c: its constant made after a, so that an `a` that emits can
 * stay nested (the kernel text must not depend on the compiler's order of arguments). */
static int add_const(vlmc_kernel_emit_t *e, int a, int64_t c) { return add(e, a, idx(e, c)); }
static int mul_const(vlmc_kernel_emit_t *e, int a, int64_t c) { return mul(e, a, idx(e, c)); }

/* Opens "scf.for %iv = 0 to hi step `step` {" (hi an index SSA, or a static count for
 * open_static_loop): returns %iv; close it with a "}" line. */
static int open_loop(vlmc_kernel_emit_t *e, int hi, int64_t step) {
  int zero = idx(e, 0), by = idx(e, step);
  return vlmc_kernel_emit_for(e, zero, hi, by);
}

static int open_static_loop(vlmc_kernel_emit_t *e, int64_t count, int64_t step) {
  int zero = idx(e, 0), hi = idx(e, count), by = idx(e, step);
  return vlmc_kernel_emit_for(e, zero, hi, by);
}

bool vlmc_cpu_linear_dequant_applies(const vlmc_kernel_emit_t *e, const vlmc_value_t *w) {
  int vl = e->vector_width;
  if (!vlmc_cpu_emit_dequantizes_aligned(e, w, vl)) return false;
  const vlmc_op_t *dq = vlmc_dispatch_dequantize_source(e->region, e->anchor_index, w);
  vlmc_quant_layout_t L = vlmc_dequantize_layout(dq);
  return w->type.rank == 2 && vlmc_dim_is_static(w->type.dims[0]) &&
         w->type.dims[0].off % UNIT == 0 && L.group / vl <= MAX_STEPS &&
         L.cols * UNIT <= SCRATCH_FLOATS;
}

static int vector_type_zero(vlmc_kernel_emit_t *e, int vl) { return vlmc_cpu_emit_zero_vector(e, vl); }

static int splat_f32(vlmc_kernel_emit_t *e, int scalar, int vl) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.broadcast " VLMC_SSA " : f32 to vector<%dxf32>", v, scalar, vl);
  return v;
}

static int vec_fma(vlmc_kernel_emit_t *e, int a, int b, int c, int vl) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.fma " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : vector<%dxf32>",
                        v, a, b, c, vl);
  return v;
}

static int i32_lanes(vlmc_kernel_emit_t *e, const int64_t *lanes, int vl) {
  char list[16 * 12] = "";
  size_t n = 0;
  for (int j = 0; j < vl; ++j) n += (size_t)snprintf(list + n, sizeof list - n, "%s%lld", j ? ", " : "", (long long)lanes[j]);
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant dense<[%s]> : vector<%dxi32>", v, list, vl);
  return v;
}

/* The VL values of feature c's row from column `col0 + offset` on (col0: an index SSA that is
 * a multiple of the group; offset static, a multiple of VL), as f32 q. */
static int unpack(const qlinear_t *Q, int c, int col0, int64_t offset) {
  vlmc_kernel_emit_t *e = Q->e;
  int64_t first = offset % Q->per_word; /* the vector's first value within its word */
  int col0_word = vlmc_kernel_emit_index_op(e, "arith.divui", col0, idx(e, Q->per_word));
  int word_at = add_const(e, add(e, Q->word_row[c], col0_word), offset / Q->per_word);
  int64_t shifts[16], masks[16];
  for (int j = 0; j < Q->vl; ++j) {
    shifts[j] = ((first + j) % Q->per_word) * Q->bits;
    masks[j] = (1 << Q->bits) - 1;
  }
  int lanes = vlmc_kernel_emit_fresh(e);
  if (Q->vl >= Q->per_word) {
    int nw = (int)(Q->vl / Q->per_word), raw = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.load %%b%d[" VLMC_SSA "] : memref<?xi32>, vector<%dxi32>", raw,
                          Q->packed, word_at, nw);
    char list[16 * 4] = "";
    size_t n = 0;
    for (int j = 0; j < Q->vl; ++j) n += (size_t)snprintf(list + n, sizeof list - n, "%s%lld", j ? ", " : "", (long long)(j / Q->per_word));
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.shuffle " VLMC_SSA ", " VLMC_SSA " [%s] : vector<%dxi32>, vector<%dxi32>",
                          lanes, raw, raw, list, nw, nw);
  } else {
    int word = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load %%b%d[" VLMC_SSA "] : memref<?xi32>", word, Q->packed, word_at);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.broadcast " VLMC_SSA " : i32 to vector<%dxi32>", lanes, word, Q->vl);
  }
  int shifted = vlmc_kernel_emit_fresh(e), q = vlmc_kernel_emit_fresh(e), qf = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.shrui " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", shifted, lanes,
                        i32_lanes(e, shifts, Q->vl), Q->vl);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", q, shifted,
                        i32_lanes(e, masks, Q->vl), Q->vl);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.sitofp " VLMC_SSA " : vector<%dxi32> to vector<%dxf32>", qf, q,
                        Q->vl, Q->vl);
  return qf;
}

/* One group (g: its index SSA, col0 = g * G, len static) of row x_row: acc[c] += s * sum q x,
 * bacc[c] += b * sum x (vectors; the new values in out_acc / out_bacc). */
static void emit_group(const qlinear_t *Q, int x_row, int g, int col0, int64_t len, const int *acc,
                       const int *bacc, int *out_acc, int *out_bacc) {
  vlmc_kernel_emit_t *e = Q->e;
  int zero = vector_type_zero(e, Q->vl);
  int p[UNIT], px = zero;
  for (int c = 0; c < UNIT; ++c) p[c] = zero;
  for (int64_t off = 0; off < len; off += Q->vl) {
    int xv = vlmc_cpu_emit_load_vector(e, Q->x, add_const(e, add(e, x_row, col0), off), Q->vl);
    px = vlmc_kernel_emit_float_op(e, "arith.addf", px, xv, Q->vl);
    for (int c = 0; c < UNIT; ++c) p[c] = vec_fma(e, unpack(Q, c, col0, off), xv, p[c], Q->vl);
  }
  for (int c = 0; c < UNIT; ++c) {
    int s = vlmc_kernel_emit_load(e, Q->dq->operands[1], add(e, Q->group_row[c], g));
    int b = vlmc_kernel_emit_load(e, Q->dq->operands[2], add(e, Q->group_row[c], g));
    out_acc[c] = vec_fma(e, splat_f32(e, s, Q->vl), p[c], acc[c], Q->vl);
    out_bacc[c] = vec_fma(e, splat_f32(e, b, Q->vl), px, bacc[c], Q->vl);
  }
}

static void list_vectors(vlmc_strbuf_t *out, const int *values, int count, int vl, bool types) {
  for (int i = 0; i < count; ++i) {
    if (types) vlmc_strbuf_printf(out, "%svector<%dxf32>", i ? ", " : "", vl);
    else vlmc_strbuf_printf(out, "%s" VLMC_SSA, i ? ", " : "", values[i]);
  }
}

/* Opens "%r:n = scf.for %iv = 0 to count step by iter_args(%in.. = zero..) -> (vectors)"
 * (count, by static): *iv and in[0 .. n) get the loop's SSAs; returns the results' SSA (%r#i). */
static int open_vector_loop(const qlinear_t *Q, int64_t count, int64_t by, int n, int *iv, int *in) {
  vlmc_kernel_emit_t *e = Q->e;
  int lo = idx(e, 0), hi = idx(e, count), step = idx(e, by);
  int zero = vector_type_zero(e, Q->vl), results = vlmc_kernel_emit_fresh(e);
  *iv = vlmc_kernel_emit_fresh(e);
  for (int i = 0; i < n; ++i) in[i] = vlmc_kernel_emit_fresh(e);
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_printf(&line, "%%v%d:%d = scf.for %%v%d = %%v%d to %%v%d step %%v%d iter_args(", results, n, *iv,
                     lo, hi, step);
  for (int i = 0; i < n; ++i) vlmc_strbuf_printf(&line, "%s%%v%d = %%v%d", i ? ", " : "", in[i], zero);
  vlmc_strbuf_puts(&line, ") -> (");
  list_vectors(&line, NULL, n, Q->vl, true);
  vlmc_strbuf_puts(&line, ") {");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
  return results;
}

/* Yields out[0 .. n) and closes the loop; result i then reads as "%r#i". */
static void close_vector_loop(const qlinear_t *Q, const int *out, int n) {
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_puts(&line, "scf.yield ");
  list_vectors(&line, out, n, Q->vl, false);
  vlmc_strbuf_puts(&line, " : ");
  list_vectors(&line, NULL, n, Q->vl, true);
  vlmc_kernel_emit_line(Q->e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_kernel_emit_line(Q->e, "}");
  vlmc_strbuf_deinit(&line);
}

/* Loop result i as an SSA of its own. */
static int loop_result(const qlinear_t *Q, int results, int i) {
  int v = vlmc_kernel_emit_fresh(Q->e);
  vlmc_kernel_emit_line(Q->e, VLMC_SSA " = arith.addf %%v%d#%d, " VLMC_SSA " : vector<%dxf32>", v, results, i,
                        vector_type_zero(Q->e, Q->vl), Q->vl);
  return v;
}

/* Output (row m, the tile's feature c) from its vector of partial sums: the lanes added, the
 * bias, the epilogue, the store. */
static void finish_feature_plus(const qlinear_t *Q, int vec, int scalar, int m, int c);

static void finish_feature(const qlinear_t *Q, int vec, int m, int c) { finish_feature_plus(Q, vec, -1, m, c); }

/* The same with a scalar (f32 SSA, -1: none) added to the lanes' sum. */
static void finish_feature_plus(const qlinear_t *Q, int vec, int scalar, int m, int c) {
  vlmc_kernel_emit_t *e = Q->e;
  int sum = vlmc_cpu_emit_reduce_add(e, vec, Q->vl);
  if (scalar >= 0) sum = vlmc_kernel_emit_float_op(e, "arith.addf", sum, scalar, 0);
  int col = Q->feature[c];
  if (Q->b) sum = vlmc_kernel_emit_float_op(e, "arith.addf", sum, vlmc_kernel_emit_load(e, Q->b, col), 0);
  vlmc_kernel_emit_finish_element(e, sum, add(e, mul(e, m, idx(e, Q->n)), col));
}

/* ---- few rows: blocks of VL whole words ----
 * A block is VL consecutive words of a weight row, VL * P values (P = 32 / bits): lane j of
 * one vector load holds word j, and shifting every lane by s * bits gives the vector of
 * values j * P + s. x is permuted to match once per row and call (x'[b * BS + s * VL + j] =
 * x[b * BS + j * P + s], in the scratch), so a weight costs a shift by a constant, a mask, a
 * conversion and an FMA, and no lane shuffle. A lane's P values lie in one group (G is a
 * multiple of P), so the group scales multiply the per-lane sums lane by lane. */

static int64_t block_size(const qlinear_t *Q) { return Q->vl * Q->per_word; }

/* Whether the block path takes this weight: whole blocks, and a block within one group or
 * made of whole groups. */
static bool blocks_fit(const qlinear_t *Q) {
  int64_t bs = block_size(Q);
  return Q->k % bs == 0 && (Q->group % bs == 0 || bs % Q->group == 0) && Q->vl <= 16;
}

/* Row m of x permuted into the scratch at `dst` (index SSA). */
static void emit_permute_row(const qlinear_t *Q, int m, int dst) {
  vlmc_kernel_emit_t *e = Q->e;
  int64_t bs = block_size(Q);
  int k = vlmc_kernel_emit_fresh(e);
  int zero = idx(e, 0), end = idx(e, Q->k), one = idx(e, 1);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", k, zero,
                        end, one);
  /* k = b * BS + j * P + s goes to b * BS + s * VL + j */
  int r = vlmc_kernel_emit_index_op(e, "arith.remui", k, idx(e, bs));
  int block = vlmc_kernel_emit_index_op(e, "arith.subi", k, r);
  int s_vl = mul_const(e, vlmc_kernel_emit_index_op(e, "arith.remui", r, idx(e, Q->per_word)), Q->vl);
  int block_s = add(e, block, s_vl);
  int j = vlmc_kernel_emit_index_op(e, "arith.divui", r, idx(e, Q->per_word));
  int at = add(e, block_s, j);
  int v = vlmc_kernel_emit_load(e, Q->x, add(e, mul(e, m, idx(e, Q->k)), k));
  vlmc_kernel_emit_line(e, "memref.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxf32>", v, Q->scratch,
                        add(e, dst, at), (long long)(UNIT * Q->k));
  vlmc_kernel_emit_line(e, "}");
}

/* Feature c's scales (part 1) or biases (part 2) for block col0 (index SSA), one per lane. */
static int lane_params(const qlinear_t *Q, int c, int part, int col0) {
  vlmc_kernel_emit_t *e = Q->e;
  const vlmc_value_t *v = Q->dq->operands[part];
  int g0 = add(e, Q->group_row[c], vlmc_kernel_emit_index_op(e, "arith.divui", col0, idx(e, Q->group)));
  int64_t bs = block_size(Q), ng = bs > Q->group ? bs / Q->group : 1;
  if (ng == 1) return splat_f32(e, vlmc_kernel_emit_load(e, v, g0), Q->vl);
  int loaded = vlmc_cpu_emit_load_vector(e, v, g0, (int)ng);
  char list[16 * 4] = "";
  size_t n = 0;
  for (int j = 0; j < Q->vl; ++j)
    n += (size_t)snprintf(list + n, sizeof list - n, "%s%lld", j ? ", " : "", (long long)(j * Q->per_word / Q->group));
  int lanes = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.shuffle " VLMC_SSA ", " VLMC_SSA " [%s] : vector<%lldxf32>, vector<%lldxf32>",
                        lanes, loaded, loaded, list, (long long)ng, (long long)ng);
  return lanes;
}

/* One block at col0 of the permuted row at x_at: acc[c] += scales * (sum q x'), bacc[c] +=
 * biases * (sum x'), lane by lane. */
static void emit_block(const qlinear_t *Q, int x_at, int col0, const int *acc, const int *bacc, int *out_acc,
                       int *out_bacc) {
  vlmc_kernel_emit_t *e = Q->e;
  int xs[8], px = -1;
  for (int64_t s = 0; s < Q->per_word; ++s) {
    xs[s] = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.load " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxf32>, vector<%dxf32>",
                          xs[s], Q->scratch, add_const(e, add(e, x_at, col0), s * Q->vl),
                          (long long)(UNIT * Q->k), Q->vl);
    px = s ? vlmc_kernel_emit_float_op(e, "arith.addf", px, xs[s], Q->vl) : xs[s];
  }
  int64_t mask[16], shift[16];
  for (int j = 0; j < Q->vl; ++j) mask[j] = (1 << Q->bits) - 1;
  int mask_v = i32_lanes(e, mask, Q->vl);
  for (int c = 0; c < UNIT; ++c) {
    int words = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.load %%b%d[" VLMC_SSA "] : memref<?xi32>, vector<%dxi32>", words,
                          Q->packed, add(e, Q->word_row[c], vlmc_kernel_emit_index_op(e, "arith.divui", col0, idx(e, Q->per_word))),
                          Q->vl);
    int p[2] = {-1, -1}; /* two chains (even and odd s): half the FMA latency in a row */
    for (int64_t s = 0; s < Q->per_word; ++s) {
      for (int j = 0; j < Q->vl; ++j) shift[j] = s * Q->bits;
      int shifted = vlmc_kernel_emit_fresh(e), q = vlmc_kernel_emit_fresh(e), qf = vlmc_kernel_emit_fresh(e);
      vlmc_kernel_emit_line(e, VLMC_SSA " = arith.shrui " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", shifted, words,
                            i32_lanes(e, shift, Q->vl), Q->vl);
      vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", q, shifted, mask_v,
                            Q->vl);
      vlmc_kernel_emit_line(e, VLMC_SSA " = arith.sitofp " VLMC_SSA " : vector<%dxi32> to vector<%dxf32>", qf, q, Q->vl,
                            Q->vl);
      int *chain = &p[s % 2];
      *chain = *chain >= 0 ? vec_fma(e, qf, xs[s], *chain, Q->vl)
                           : vlmc_kernel_emit_float_op(e, "arith.mulf", qf, xs[s], Q->vl);
    }
    int sum = vlmc_kernel_emit_float_op(e, "arith.addf", p[0], p[1], Q->vl);
    out_acc[c] = vec_fma(e, lane_params(Q, c, 1, col0), sum, acc[c], Q->vl);
    out_bacc[c] = vec_fma(e, lane_params(Q, c, 2, col0), px, bacc[c], Q->vl);
  }
}

/* Row m's permuted copy (at x_at in the scratch) against the tile's features: every block,
 * then the sums, bias, epilogue. */
static void emit_row_blocks(const qlinear_t *Q, int m, int x_at) {
  vlmc_kernel_emit_t *e = Q->e;
  int in[2 * UNIT], out[2 * UNIT], b;
  int results = open_vector_loop(Q, Q->k, block_size(Q), 2 * UNIT, &b, in);
  emit_block(Q, x_at, b, in, in + UNIT, out, out + UNIT);
  close_vector_loop(Q, out, 2 * UNIT);
  for (int c = 0; c < UNIT; ++c) {
    int acc = loop_result(Q, results, c), bacc = loop_result(Q, results, UNIT + c);
    finish_feature(Q, vlmc_kernel_emit_float_op(e, "arith.addf", acc, bacc, Q->vl), m, c);
  }
}

/* Row m of x against the tile's features: every group, then the sums, bias, epilogue. */
static void emit_row(const qlinear_t *Q, int m) {
  vlmc_kernel_emit_t *e = Q->e;
  int x_row = mul(e, m, idx(e, Q->k));
  int64_t whole = Q->k / Q->group, rest = Q->k % Q->group;
  int acc[2 * UNIT], in[2 * UNIT], out[2 * UNIT], g;
  int results = open_vector_loop(Q, whole, 1, 2 * UNIT, &g, in);
  emit_group(Q, x_row, g, mul(e, g, idx(e, Q->group)), Q->group, in, in + UNIT, out, out + UNIT);
  close_vector_loop(Q, out, 2 * UNIT);
  for (int i = 0; i < 2 * UNIT; ++i) acc[i] = loop_result(Q, results, i);
  if (rest) { /* the short last group */
    int last[2 * UNIT], last_g = idx(e, whole), last_col0 = idx(e, whole * Q->group);
    emit_group(Q, x_row, last_g, last_col0, rest, acc, acc + UNIT, last, last + UNIT);
    for (int i = 0; i < 2 * UNIT; ++i) acc[i] = last[i];
  }
  for (int c = 0; c < UNIT; ++c)
    finish_feature(Q, vlmc_kernel_emit_float_op(e, "arith.addf", acc[c], acc[UNIT + c], Q->vl), m, c);
}

/* The unit's rows dequantized into the scratch (row c at c * K), a vector at a time. */
static void emit_dequantize_unit(const qlinear_t *Q) {
  vlmc_kernel_emit_t *e = Q->e;
  for (int c = 0; c < UNIT; ++c) {
    int g = vlmc_kernel_emit_fresh(e);
    int64_t whole = Q->k / Q->group, rest = Q->k % Q->group;
    for (int part = 0; part < 2; ++part) {
      int64_t len = part ? rest : Q->group;
      if (!len) continue;
      int gi;
      if (!part) {
        int zero = idx(e, 0), end = idx(e, whole), one = idx(e, 1);
        vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", g,
                              zero, end, one);
        gi = g;
      } else {
        gi = idx(e, whole);
      }
      int col0 = mul(e, gi, idx(e, Q->group));
      int s = splat_f32(e, vlmc_kernel_emit_load(e, Q->dq->operands[1], add(e, Q->group_row[c], gi)), Q->vl);
      int b = splat_f32(e, vlmc_kernel_emit_load(e, Q->dq->operands[2], add(e, Q->group_row[c], gi)), Q->vl);
      for (int64_t off = 0; off < len; off += Q->vl) {
        int w = vlmc_kernel_emit_float_op(
            e, "arith.addf", vlmc_kernel_emit_float_op(e, "arith.mulf", s, unpack(Q, c, col0, off), Q->vl), b, Q->vl);
        vlmc_kernel_emit_line(e, "vector.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxf32>, vector<%dxf32>",
                              w, Q->scratch, add_const(e, add(e, idx(e, c * Q->k), col0), off),
                              (long long)(UNIT * Q->k), Q->vl);
      }
      if (!part) vlmc_kernel_emit_line(e, "}");
    }
  }
}

/* Rows [m0, m0 + rows) (rows static, <= MR) against the scratch: a tile of rows x UNIT
 * vector accumulators over k, the sums, bias, epilogue. */
static void emit_scratch_tile(const qlinear_t *Q, int m0, int rows) {
  vlmc_kernel_emit_t *e = Q->e;
  int pairs = rows * UNIT, in[MR * UNIT], out[MR * UNIT], x_row[MR], k;
  for (int r = 0; r < rows; ++r) x_row[r] = mul_const(e, add_const(e, m0, r), Q->k);
  int results = open_vector_loop(Q, Q->k, Q->vl, pairs, &k, in);
  int xv[MR], wv[UNIT];
  for (int r = 0; r < rows; ++r) xv[r] = vlmc_cpu_emit_load_vector(e, Q->x, add(e, x_row[r], k), Q->vl);
  for (int c = 0; c < UNIT; ++c) {
    wv[c] = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.load " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxf32>, vector<%dxf32>",
                          wv[c], Q->scratch, add(e, idx(e, c * Q->k), k), (long long)(UNIT * Q->k), Q->vl);
  }
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < UNIT; ++c) out[r * UNIT + c] = vec_fma(e, xv[r], wv[c], in[r * UNIT + c], Q->vl);
  close_vector_loop(Q, out, pairs);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < UNIT; ++c) {
      int acc = loop_result(Q, results, r * UNIT + c);
      finish_feature(Q, acc, add_const(e, m0, r), c);
    }
}

/* from + span (index SSAs) rounded down to whole MR-row tiles: where the tiles end. */
static int whole_tiles_end(vlmc_kernel_emit_t *e, int from, int span) {
  int tiles = vlmc_kernel_emit_index_op(e, "arith.divui", span, idx(e, MR));
  return add(e, from, mul_const(e, tiles, MR));
}

/* Rows [from, to) of x against the dequantized unit: MR-row tiles, then the rest one by one. */
static void emit_scratch_rows(const qlinear_t *Q, int from, int to) {
  vlmc_kernel_emit_t *e = Q->e;
  emit_dequantize_unit(Q);
  int tiles_end = whole_tiles_end(e, from, vlmc_kernel_emit_index_op(e, "arith.subi", to, from));
  int m0 = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", m0, from,
                        tiles_end, idx(e, MR));
  emit_scratch_tile(Q, m0, MR);
  vlmc_kernel_emit_line(e, "}");
  int m = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", m, tiles_end,
                        to, idx(e, 1));
  emit_scratch_tile(Q, m, 1);
  vlmc_kernel_emit_line(e, "}");
}

/* The tile's features (index SSAs) and their rows in the packed words and in the scales. */
static void tile_features(qlinear_t *Q, const int *feature) {
  vlmc_kernel_emit_t *e = Q->e;
  for (int c = 0; c < UNIT; ++c) {
    Q->feature[c] = feature[c];
    Q->word_row[c] = mul(e, feature[c], idx(e, Q->words));
    Q->group_row[c] = mul(e, feature[c], idx(e, Q->groups));
  }
}

/* Unit u's features as the tile's. */
static void unit_features(qlinear_t *Q, int u) {
  int feature[UNIT], n0 = mul(Q->e, u, idx(Q->e, UNIT));
  for (int c = 0; c < UNIT; ++c) feature[c] = add(Q->e, n0, idx(Q->e, c));
  tile_features(Q, feature);
}

/* Opens the loop over the units [from, to) (index SSAs) with each unit's features as the
 * tile's; close it with a "}" line. */
static void open_unit_loop(qlinear_t *Q, int from, int to) {
  unit_features(Q, vlmc_kernel_emit_for(Q->e, from, to, idx(Q->e, 1)));
}

static int named_index(vlmc_kernel_emit_t *e, const char *name) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addi %%%s, " VLMC_SSA " : index", v, name, idx(e, 0));
  return v;
}

/* Many rows: blocks of MB rows whose x (MB x K floats) stays within half the L2 while the
 * thread's units pass it (each unit dequantized once per block). */
static void emit_many_rows(qlinear_t *Q, int m_total) {
  vlmc_kernel_emit_t *e = Q->e;
  int64_t mb = vlmc_cpu_emit_machine(e)->l2_bytes / 2 / (Q->k * 4);
  mb = mb < 2 * MR ? 2 * MR : mb / MR * MR;
  int mb0 = open_loop(e, m_total, mb);
  int end = vlmc_kernel_emit_index_op(e, "arith.minui", add(e, mb0, idx(e, mb)), m_total);
  int lo = named_index(e, "lo"), hi = named_index(e, "hi");
  open_unit_loop(Q, lo, hi);
  emit_scratch_rows(Q, mb0, end);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
}

/* ---- few rows through bf16 dot products (AVX512_BF16; 4 bits, G and K multiples of 64) ----
 * A weight as a bf16 value is exact (q in 0..15), and so is the product of two bf16 values in
 * f32: vdpbf16ps adds 32 such products into 16 f32 lanes in one instruction. x is split
 * once per row and call into parts that are each exactly bf16, x = hi + mid + lo (hi =
 * bf16(x), mid = bf16(x - hi), lo = x - hi - mid: each difference is exact in f32, and lo has
 * at most 8 significant bits), so that sum q x = sum q hi + sum q mid + sum q lo with every
 * product exact: the reference's f32 result up to the order of the sums, as on the block
 * path. A bf16 x (the bf16-matmul precision rounded it) is one part. Per block of 64 values
 * (32 bytes of words, 8 nibbles a word, byte i holding values 2i and 2i + 1 in its low and
 * high nibble): the bytes zero-extended to 16 bits, the high nibbles shifted down, both
 * mapped to their bf16 bit patterns by one vpermw each (a 32-entry table indexed by the low
 * 5 bits: entry i = bf16(i mod 16), so the low nibble needs no mask), then 2 x parts dot
 * products against x's values 2i and 2i + 1, stored deinterleaved in the scratch. A group's
 * sum is scaled by its scale with one FMA; the biases' term sum_g b_g sum_{k in g} x_k comes
 * from the group sums of x computed with the split, 16 groups per FMA. That is 12 vector
 * instructions per 64 weights against 17 on the block path, where decode at 2 threads was
 * bound by the instructions, not the bandwidth. */

enum { DOT_BLOCK = 64, DOT_ROWS = MR - 1, DOT_PREFETCH_WORDS = 256 };

static bool dot_fits(const qlinear_t *Q) {
  const vlmc_cpu_machine_t *m = vlmc_cpu_emit_machine(Q->e);
  return m->bf16_dot && Q->vl == 16 && Q->bits == 4 && Q->group % DOT_BLOCK == 0 &&
         Q->k % Q->group == 0 && Q->group / DOT_BLOCK <= 4;
}

/* The scratches of the dot path, at the kernel's top (an alloca in a loop grows the stack). */
static void alloc_dot_scratch(qlinear_t *Q) {
  vlmc_kernel_emit_t *e = Q->e;
  Q->parts = vlmc_cpu_emit_reads_bf16(e, Q->x) ? 1 : 3;
  Q->xdot = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.alloca() : memref<%lldxbf16>", Q->xdot,
                        (long long)(DOT_ROWS * Q->parts * Q->k));
  Q->xsum = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.alloca() : memref<%lldxf32>", Q->xsum,
                        (long long)(DOT_ROWS * Q->groups));
}

static int shuffle16(vlmc_kernel_emit_t *e, int a, int b, int odd) {
  char list[16 * 4] = "";
  size_t n = 0;
  for (int j = 0; j < 16; ++j) n += (size_t)snprintf(list + n, sizeof list - n, "%s%d", j ? ", " : "", 2 * j + odd);
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.shuffle " VLMC_SSA ", " VLMC_SSA " [%s] : vector<16xf32>, vector<16xf32>",
                        v, a, b, list);
  return v;
}

/* The parts of 16 f32 values into the scratch at `at` (index SSA), part p at at + p * 64. */
static void store_parts(const qlinear_t *Q, int v, int at) {
  vlmc_kernel_emit_t *e = Q->e;
  for (int p = 0; p < Q->parts; ++p) {
    int b = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.truncf " VLMC_SSA " : vector<16xf32> to vector<16xbf16>", b, v);
    vlmc_kernel_emit_line(e, "vector.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxbf16>, vector<16xbf16>", b,
                          Q->xdot, add(e, at, idx(e, p * DOT_BLOCK)), (long long)(DOT_ROWS * Q->parts * Q->k));
    if (p + 1 == Q->parts) break;
    int back = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.extf " VLMC_SSA " : vector<16xbf16> to vector<16xf32>", back, b);
    v = vlmc_kernel_emit_float_op(e, "arith.subf", v, back, 16);
  }
}

/* Where block blk (index SSA) of the row in slot r starts in the split scratch. */
static int split_block_at(const qlinear_t *Q, int r, int blk) {
  vlmc_kernel_emit_t *e = Q->e;
  int row = mul_const(e, r, Q->k * Q->parts);
  return add(e, row, mul_const(e, blk, DOT_BLOCK * Q->parts));
}

/* Row m of x (its slot r in the scratches): per block of 64 values, the even values then the
 * odd ones, each split into parts (block b's part p at (r * K * parts) + b * 64 * parts + p *
 * 64, the even values in its first 32 slots); per group the sum of its values. */
static void emit_split_row(const qlinear_t *Q, int m, int r) {
  vlmc_kernel_emit_t *e = Q->e;
  int64_t per_group = Q->group / DOT_BLOCK;
  int g = open_static_loop(e, Q->groups, 1);
  int vsum = -1;
  for (int64_t b = 0; b < per_group; ++b) {
    int blk = add_const(e, mul_const(e, g, per_group), b);
    int x_row = mul_const(e, m, Q->k);
    int x0 = add(e, x_row, mul_const(e, blk, DOT_BLOCK));
    int a[4];
    for (int j = 0; j < 4; ++j) {
      a[j] = vlmc_cpu_emit_load_vector(e, Q->x, add(e, x0, idx(e, 16 * j)), 16);
      vsum = vsum < 0 ? a[j] : vlmc_kernel_emit_float_op(e, "arith.addf", vsum, a[j], 16);
    }
    int at = split_block_at(Q, r, blk);
    for (int odd = 0; odd < 2; ++odd) {
      int first_half = shuffle16(e, a[0], a[1], odd);
      store_parts(Q, first_half, add_const(e, at, 32 * odd));
      int second_half = shuffle16(e, a[2], a[3], odd);
      store_parts(Q, second_half, add_const(e, at, 32 * odd + 16));
    }
  }
  int group_sum = vlmc_cpu_emit_reduce_add(e, vsum, 16);
  vlmc_kernel_emit_line(e, "memref.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxf32>",
                        group_sum, Q->xsum, add(e, mul(e, r, idx(e, Q->groups)), g),
                        (long long)(DOT_ROWS * Q->groups));
  vlmc_kernel_emit_line(e, "}");
}

/* The 32 values of block blk (index SSA) of feature c as bf16: the low nibbles (values 2i) in
 * out[0], the high ones (2i + 1) in out[1]. */
static void unpack_bf16(const qlinear_t *Q, int c, int blk, int table, int *out) {
  vlmc_kernel_emit_t *e = Q->e;
  int words = vlmc_kernel_emit_fresh(e), bytes = vlmc_kernel_emit_fresh(e), w16 = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.load %%b%d[" VLMC_SSA "] : memref<?xi32>, vector<8xi32>", words,
                        Q->packed, add(e, Q->word_row[c], mul(e, blk, idx(e, DOT_BLOCK / 8))));
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.bitcast " VLMC_SSA " : vector<8xi32> to vector<32xi8>", bytes, words);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.extui " VLMC_SSA " : vector<32xi8> to vector<32xi16>", w16, bytes);
  int four = vlmc_kernel_emit_fresh(e), high = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant dense<4> : vector<32xi16>", four);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.shrui " VLMC_SSA ", " VLMC_SSA " : vector<32xi16>", high, w16, four);
  int index[2] = {w16, high};
  for (int h = 0; h < 2; ++h) {
    int bits = vlmc_kernel_emit_fresh(e);
    out[h] = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = llvm.call_intrinsic \"llvm.x86.avx512.permvar.hi.512\"(" VLMC_SSA ", " VLMC_SSA
                          ") : (vector<32xi16>, vector<32xi16>) -> vector<32xi16>", bits, table, index[h]);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.bitcast " VLMC_SSA " : vector<32xi16> to vector<32xbf16>", out[h], bits);
  }
}

/* The table of bf16(i mod 16) bit patterns, i in 0..31. */
static int bf16_nibble_table(vlmc_kernel_emit_t *e) {
  char list[32 * 8] = "";
  size_t n = 0;
  for (int i = 0; i < 32; ++i) {
    float f = (float)(i % 16);
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    n += (size_t)snprintf(list + n, sizeof list - n, "%s%u", i ? ", " : "", bits >> 16);
  }
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant dense<[%s]> : vector<32xi16>", v, list);
  return v;
}

/* Row m of x (slot r) against the tile's features: per group the dot products of its blocks,
 * scaled; then the biases' term, the sums, bias, epilogue. */
static void emit_row_dot(const qlinear_t *Q, int m, int r) {
  vlmc_kernel_emit_t *e = Q->e;
  int64_t per_group = Q->group / DOT_BLOCK, span = DOT_ROWS * Q->parts * Q->k;
  int table = bf16_nibble_table(e), zero = vector_type_zero(e, 16);
  int in[UNIT], out[UNIT], g;
  int results = open_vector_loop(Q, Q->groups, 1, UNIT, &g, in);
  int t[UNIT][2];
  for (int c = 0; c < UNIT; ++c) t[c][0] = t[c][1] = zero;
  for (int64_t b = 0; b < per_group; ++b) {
    int blk = add_const(e, mul_const(e, g, per_group), b);
    int at = split_block_at(Q, r, blk);
    int xs[3][2];
    for (int p = 0; p < Q->parts; ++p)
      for (int h = 0; h < 2; ++h) {
        xs[p][h] = vlmc_kernel_emit_fresh(e);
        vlmc_kernel_emit_line(e, VLMC_SSA " = vector.load " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxbf16>, vector<32xbf16>",
                              xs[p][h], Q->xdot, add(e, at, idx(e, p * DOT_BLOCK + 32 * h)), (long long)span);
      }
    for (int c = 0; c < UNIT; ++c) {
      int q[2];
      /* the stream 1 KiB ahead: a quarter's rows follow each other, and the hardware
       * prefetcher stops at each 4 KiB page (17.2 against 16.0 tok/s on the 3B at 2 threads) */
      int block_words = add(e, Q->word_row[c], mul_const(e, blk, DOT_BLOCK / 8));
      vlmc_kernel_emit_line(e, "memref.prefetch %%b%d[" VLMC_SSA "], read, locality<3>, data : memref<?xi32>", Q->packed,
                            add_const(e, block_words, DOT_PREFETCH_WORDS));
      unpack_bf16(Q, c, blk, table, q);
      for (int h = 0; h < 2; ++h) /* two chains: the low and the high nibbles */
        for (int p = 0; p < Q->parts; ++p) t[c][h] = vlmc_cpu_emit_dot_bf16(e, t[c][h], q[h], xs[p][h]);
    }
  }
  for (int c = 0; c < UNIT; ++c) {
    int s = vlmc_kernel_emit_load(e, Q->dq->operands[1], add(e, Q->group_row[c], g));
    int sum = vlmc_kernel_emit_float_op(e, "arith.addf", t[c][0], t[c][1], 16);
    out[c] = vec_fma(e, splat_f32(e, s, 16), sum, in[c], 16);
  }
  close_vector_loop(Q, out, UNIT);
  /* sum_g b_g * (sum of x over g): 16 groups per FMA, then the last groups one by one */
  int64_t whole = Q->groups / 16 * 16;
  for (int c = 0; c < UNIT; ++c) {
    int acc = loop_result(Q, results, c);
    if (whole) {
      int bin[1], bout, g16;
      int bres = open_vector_loop(Q, whole, 16, 1, &g16, bin);
      int bv = vlmc_cpu_emit_load_vector(e, Q->dq->operands[2], add(e, Q->group_row[c], g16), 16);
      int sxv = vlmc_kernel_emit_fresh(e);
      vlmc_kernel_emit_line(e, VLMC_SSA " = vector.load " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxf32>, vector<16xf32>", sxv,
                            Q->xsum, add(e, mul(e, r, idx(e, Q->groups)), g16), (long long)(DOT_ROWS * Q->groups));
      bout = vec_fma(e, bv, sxv, bin[0], 16);
      close_vector_loop(Q, &bout, 1);
      acc = vlmc_kernel_emit_float_op(e, "arith.addf", acc, loop_result(Q, bres, 0), 16);
    }
    int tail = -1;
    for (int64_t gi = whole; gi < Q->groups; ++gi) {
      int bias = vlmc_kernel_emit_load(e, Q->dq->operands[2], add(e, Q->group_row[c], idx(e, gi)));
      int sx = vlmc_kernel_emit_fresh(e);
      vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxf32>", sx, Q->xsum,
                            add_const(e, mul_const(e, r, Q->groups), gi), (long long)(DOT_ROWS * Q->groups));
      int term = vlmc_kernel_emit_float_op(e, "arith.mulf", bias, sx, 0);
      tail = tail < 0 ? term : vlmc_kernel_emit_float_op(e, "arith.addf", tail, term, 0);
    }
    finish_feature_plus(Q, acc, tail, m, c);
  }
}

/* Many rows through the panels of kernel_linear_panels.c (a bf16 x, AVX512_BF16): blocks of
 * its rows, each block's tiles of 4 rows over the thread's columns. */
static void emit_many_rows_panels(const qlinear_t *Q, vlmc_linear_panels_t pa, int m_total) {
  vlmc_kernel_emit_t *e = Q->e;
  int mb0 = open_loop(e, m_total, pa.block_rows);
  int end = vlmc_kernel_emit_index_op(e, "arith.minui", add(e, mb0, idx(e, pa.block_rows)), m_total);
  int span = vlmc_kernel_emit_index_op(e, "arith.subi", end, mb0);
  pa.from = mb0;
  pa.to = end;
  pa.to_r = whole_tiles_end(e, mb0, span);
  vlmc_cpu_linear_panels(e, &pa);
  vlmc_kernel_emit_line(e, "}");
}

/* Rows [0, m_total) of x against the current tile's features (few rows). */
static void emit_tile_rows(const qlinear_t *Q, int m_total, bool blocks) {
  vlmc_kernel_emit_t *e = Q->e;
  int m = open_loop(e, m_total, 1);
  if (Q->xdot >= 0) emit_row_dot(Q, m, m);
  else if (blocks) emit_row_blocks(Q, m, mul(e, m, idx(e, Q->k)));
  else emit_row(Q, m);
  vlmc_kernel_emit_line(e, "}");
}

/* Fewer than MR rows (decode): blocks of whole words against x permuted once per row and
 * call, or else (shapes the blocks do not fit) group by group. */
static void emit_few_rows(qlinear_t *Q, int m_total) {
  vlmc_kernel_emit_t *e = Q->e;
  bool blocks = blocks_fit(Q);
  if (Q->xdot >= 0 || blocks) {
    int m = open_loop(e, m_total, 1);
    if (Q->xdot >= 0) emit_split_row(Q, m, m);
    else emit_permute_row(Q, m, mul(e, m, idx(e, Q->k)));
    vlmc_kernel_emit_line(e, "}");
  }
  /* The thread's units [lo, hi) in QUARTERS quarters of q units read side by side: step
   * (i, c) computes feature c of unit lo + s q + i for every quarter s, so that the tile reads
   * QUARTERS long sequential streams of W (a unit's own rows are short streams: 1 KiB at K =
   * 2048 and 4 bits, which the hardware prefetcher barely follows); the units past 4 q after. */
  int lo = named_index(e, "lo"), hi = named_index(e, "hi");
  int units = vlmc_kernel_emit_index_op(e, "arith.subi", hi, lo);
  int q = vlmc_kernel_emit_index_op(e, "arith.divui", units, idx(e, QUARTERS));
  int i = open_loop(e, q, 1);
  int c = open_static_loop(e, UNIT, 1);
  int feature[UNIT];
  for (int s = 0; s < QUARTERS; ++s) {
    int unit = add(e, add(e, lo, mul_const(e, q, s)), i); /* lo + s q + i */
    feature[s] = add(e, mul_const(e, unit, UNIT), c);
  }
  tile_features(Q, feature);
  emit_tile_rows(Q, m_total, blocks);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
  open_unit_loop(Q, add(e, lo, mul(e, q, idx(e, QUARTERS))), hi);
  emit_tile_rows(Q, m_total, blocks);
  vlmc_kernel_emit_line(e, "}");
}

vlmc_status_t vlmc_cpu_kernel_linear_dequant(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  qlinear_t Q;
  memset(&Q, 0, sizeof Q);
  Q.e = e;
  Q.x = op->operands[0];
  Q.w = op->operands[1];
  Q.b = op->num_operands > 2 ? op->operands[2] : NULL;
  Q.dq = vlmc_dispatch_dequantize_source(e->region, e->anchor_index, Q.w);
  Q.n = Q.w->type.dims[0].off;
  Q.k = Q.w->type.dims[1].off;
  vlmc_quant_layout_t layout = vlmc_dequantize_layout(Q.dq);
  Q.bits = layout.bits;
  Q.group = layout.group;
  Q.per_word = layout.per_word;
  Q.words = layout.words;
  Q.groups = layout.groups;
  Q.vl = e->vector_width;
  Q.packed = vlmc_kernel_emit_source_input(e, Q.dq->operands[0]);
  e->template_name = "linear";
  e->cost = 2 * Q.k * UNIT * 64;
  const vlmc_type_t *xt = &Q.x->type;
  int m_total = vlmc_kernel_emit_dims_product(e, xt, 0, xt->rank - 1);
  Q.scratch = vlmc_kernel_emit_fresh(e); /* before the loops: an alloca inside would grow the stack */
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.alloca() : memref<%lldxf32>", Q.scratch, (long long)(UNIT * Q.k));
  Q.xdot = Q.xsum = -1;
  if (dot_fits(&Q)) alloc_dot_scratch(&Q);
  vlmc_linear_panels_t pa = {Q.x, Q.w, Q.b, Q.k, Q.n, 0, -1, -1, -1, -1, -1, Q.dq, -1, -1};
  bool panels = vlmc_cpu_linear_panels_apply_quantized(e, Q.x, Q.dq);
  if (panels) {
    pa.block_rows = vlmc_cpu_linear_panels_block_rows(vlmc_cpu_emit_machine(e));
    vlmc_cpu_linear_panels_scratch(e, &pa);
  }
  int many = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi uge, " VLMC_SSA ", " VLMC_SSA " : index", many, m_total, idx(e, MR));
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", many);
  if (panels) emit_many_rows_panels(&Q, pa, m_total);
  else emit_many_rows(&Q, m_total);
  vlmc_kernel_emit_line(e, "} else {");
  emit_few_rows(&Q, m_total);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
