/* The linear template's path for bf16 dot products on many rows (prefill, vision): an outer
 * product over panels of packed weights, where the dot-product tiles of kernel_linear.c are
 * bound by reading x from the L2 (measured on the Zen 5 VM, one thread, 64 rows x 2048 x 5504
 * bf16: dot-product 4x4 tiles 230 GFLOP/s, these panels 376, the vdpbf16ps peak 406).
 *
 * Loops, outermost first (as BLIS blocks a GEMM): the caller's blocks of rows; groups of the
 * thread's output columns whose partial sums for the block fit half the L2; chunks of k of
 * KC = 256 (128 bf16 pairs); panels of 64 columns (four vectors of 16 f32 lanes); tiles of 4
 * rows. Per block, group and chunk, x's rows of the chunk are rounded to bf16 pairs once, into
 * a scratch (block rows x 128 words). Per panel, the weights are packed into a 32 KiB scratch
 * as pairs: word [p][j] holds W[col j][2p], W[col j][2p + 1] (a 16 x 16 transpose of 32-bit
 * words per block, from W's rows), so that one 64-byte load gives one pair of 16 columns. A
 * tile keeps 4 x 4 accumulators (rows x vectors of 16 columns) in registers; per pair: 4 loads
 * of the panel, and per row one broadcast of x's pair into 4 vdpbf16ps. Each accumulator lane
 * is one output: no horizontal sums. A tile's sums of one chunk start at 0 and are added to the
 * earlier chunks' in the output (masked loads and stores: a panel at the thread's end may be
 * narrower); the last chunk adds the bias and runs the epilogue. While a panel's tiles run,
 * they prefetch the next panel's weights (one prefetch per 4 pairs: 16 tiles cover 64 rows x
 * 512 bytes), which keeps the packing from waiting on memory (309 -> 376 GFLOP/s measured).
 * Leftover rows (fewer than 4) take a one-row tile. K need not be even: pairs past K are 0. */
#include <stdio.h>
#include <string.h>

#include "artifact/kernel_table.h"
#include "codegen/targets/cpu/kernels.h"

enum {
  PANEL = 64,        /* output columns per panel */
  VECS = PANEL / 16, /* vectors of 16 lanes per panel row */
  KC = 256,          /* k elements per chunk */
  KP = KC / 2,       /* bf16 pairs per chunk */
  MR = 4,            /* rows per tile */
  PF_EVERY = 4,      /* pairs per prefetch */
};

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_linear_panels_t *a;
  int wi;           /* W's region input: %b<wi>, bf16 */
  int c_hi;         /* the thread's end column (index SSA) */
  int g0, g1;       /* the group's columns (index SSA) */
  int p0, wc;       /* the panel's first column and width (index SSA) */
  int mask[VECS];   /* per vector of the panel: lanes inside the panel (vector<16xi1>) */
  int iota;         /* vector<16xi32> 0..15 */
  int64_t kc;       /* k elements per chunk: KC, or a quantized weight's group */
  /* A quantized weight (a->dq): its packed words' input and layout. */
  int qi;
  vlmc_quant_layout_t q;
} panels_t;

/* ---- small emitters ---- */

static int idx(const panels_t *P, int64_t v) { return vlmc_kernel_emit_index(P->e, v); }
static int iop(const panels_t *P, const char *op, int a, int b) {
  return vlmc_kernel_emit_index_op(P->e, op, a, b);
}
static int fresh(const panels_t *P) { return vlmc_kernel_emit_fresh(P->e); }

/* `scf.for` over constant bounds (from, to, step: their constants in that order). */
static int for_const(const panels_t *P, int64_t from, int64_t to, int64_t step) {
  int lo = idx(P, from), hi = idx(P, to), by = idx(P, step);
  return vlmc_kernel_emit_for(P->e, lo, hi, by);
}

/* vector<16xi32> -> vector<32xbf16> (the same bits: 16 pairs). */
static int as_pairs(const panels_t *P, int words) {
  int v = fresh(P);
  vlmc_kernel_emit_line(P->e, VLMC_SSA " = vector.bitcast " VLMC_SSA " : vector<16xi32> to "
                        "vector<32xbf16>", v, words);
  return v;
}

static int as_words(const panels_t *P, int pairs) {
  int v = fresh(P);
  vlmc_kernel_emit_line(P->e, VLMC_SSA " = vector.bitcast " VLMC_SSA " : vector<32xbf16> to "
                        "vector<16xi32>", v, pairs);
  return v;
}

/* Lanes of (a, b) concatenated (vector<16xi32> each): lane i of the result is lane m[i]. */
static int shuffle_words(const panels_t *P, int a, int b, const int *m) {
  char text[160];
  size_t used = 0;
  for (int i = 0; i < 16; ++i) used += (size_t)snprintf(text + used, sizeof text - used, "%s%d", i ? ", " : "", m[i]);
  int v = fresh(P);
  vlmc_kernel_emit_line(P->e, VLMC_SSA " = vector.shuffle " VLMC_SSA ", " VLMC_SSA " [%s] : "
                        "vector<16xi32>, vector<16xi32>", v, a, b, text);
  return v;
}

/* ---- packing the weights ---- */

/* r[0..16): rows of 16 words (r[i] = W row i's 16 pairs) transposed in place, so that r[p]
 * holds pair p of the 16 rows: four rounds, each swapping one bit of the row number with the
 * same bit of the lane (rows i and i + s exchange the lanes whose bit s differs); each new
 * vector is one two-source shuffle (vpermt2d). */
static void transpose16(const panels_t *P, int *r) {
  for (int s = 1; s < 16; s *= 2) {
    int m_low[16], m_high[16]; /* new row i (bit s clear) and new row i + s */
    for (int lane = 0; lane < 16; ++lane) {
      m_low[lane] = lane & s ? 16 + lane - s : lane;
      m_high[lane] = lane & s ? 16 + lane : lane + s;
    }
    for (int i = 0; i < 16; ++i) {
      if (i & s) continue;
      int low = shuffle_words(P, r[i], r[i + s], m_low);
      int high = shuffle_words(P, r[i], r[i + s], m_high);
      r[i] = low;
      r[i + s] = high;
    }
  }
}

/* The output column (W's row) of panel column j (index SSA), clamped into [0, N): a column
 * past N is read from the last row (its outputs are never stored). */
static int clamped_column(const panels_t *P, int j) {
  int col = iop(P, "arith.addi", P->p0, j);
  return iop(P, "arith.minui", col, idx(P, P->a->n - 1));
}

/* W's row for panel column j (index SSA), clamped as above: its first element. */
static int w_row_start(const panels_t *P, int j) {
  int col = clamped_column(P, j);
  return iop(P, "arith.muli", col, idx(P, P->a->k));
}

/* 16 rows of 16 pair words (row i: panel column g + i, pairs 16 b ..) transposed and stored
 * as the panel's pairs 16 b .. 16 b + 15 of columns g .. g + 15. */
static void store_transposed(const panels_t *P, int *r, int b, int g) {
  transpose16(P, r);
  int pair0 = iop(P, "arith.muli", b, idx(P, 16));
  for (int i = 0; i < 16; ++i) {
    int pair = iop(P, "arith.addi", pair0, idx(P, i));
    int at = iop(P, "arith.addi", iop(P, "arith.muli", pair, idx(P, PANEL)), g);
    vlmc_kernel_emit_line(P->e, "vector.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : "
                          "memref<%dxi32>, vector<16xi32>", r[i], P->a->pk, at, KP * PANEL);
  }
}

/* Pairs [0, pairs16 * 16) of the chunk at kc0 into the panel scratch, 16 x 16 words at a time. */
static void emit_pack_blocks(const panels_t *P, int kc0, int64_t blocks) {
  vlmc_kernel_emit_t *e = P->e;
  if (blocks == 0) return;
  int g = for_const(P, 0, PANEL, 16);
  int b = for_const(P, 0, blocks, 1);
  int k0 = iop(P, "arith.addi", kc0, iop(P, "arith.muli", b, idx(P, 32)));
  int r[16];
  for (int i = 0; i < 16; ++i) {
    int at = iop(P, "arith.addi", w_row_start(P, iop(P, "arith.addi", g, idx(P, i))), k0);
    int raw = fresh(P);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.load %%b%d[" VLMC_SSA "] : memref<?xbf16>, "
                          "vector<32xbf16>", raw, P->wi, at);
    r[i] = as_words(P, raw);
  }
  store_transposed(P, r, b, g);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
}

/* bf16 element k of W's row (index SSA) as its 16 bits in an i32, or 0 past K. */
static int w_bits(const panels_t *P, int row_start, int k) {
  vlmc_kernel_emit_t *e = P->e;
  int inside = fresh(P), kk = iop(P, "arith.minui", k, idx(P, P->a->k - 1));
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi ult, " VLMC_SSA ", " VLMC_SSA " : index", inside,
                        k, idx(P, P->a->k));
  int v = fresh(P), bits = fresh(P), wide = fresh(P), chosen = fresh(P), zero = fresh(P);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load %%b%d[" VLMC_SSA "] : memref<?xbf16>", v, P->wi,
                        iop(P, "arith.addi", row_start, kk));
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.bitcast " VLMC_SSA " : bf16 to i16", bits, v);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.extui " VLMC_SSA " : i16 to i32", wide, bits);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant 0 : i32", zero);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : i32",
                        chosen, inside, wide, zero);
  return chosen;
}

/* lo | hi << 16: a pair as one word. */
static int pair_word(const panels_t *P, int lo, int hi) {
  vlmc_kernel_emit_t *e = P->e;
  int sixteen = fresh(P), shifted = fresh(P), v = fresh(P);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant 16 : i32", sixteen);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.shli " VLMC_SSA ", " VLMC_SSA " : i32", shifted, hi, sixteen);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.ori " VLMC_SSA ", " VLMC_SSA " : i32", v, lo, shifted);
  return v;
}

/* Pairs [from, pairs) of the chunk at kc0, one word at a time (a chunk's last < 16 pairs). */
static void emit_pack_tail(const panels_t *P, int kc0, int64_t from, int64_t pairs) {
  vlmc_kernel_emit_t *e = P->e;
  if (from >= pairs) return;
  int j = for_const(P, 0, PANEL, 1);
  int p = for_const(P, from, pairs, 1);
  int row = w_row_start(P, j);
  int k = iop(P, "arith.addi", kc0, iop(P, "arith.muli", p, idx(P, 2)));
  int lo = w_bits(P, row, k);
  int hi = w_bits(P, row, iop(P, "arith.addi", k, idx(P, 1)));
  int word = pair_word(P, lo, hi);
  vlmc_kernel_emit_line(e, "memref.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : memref<%dxi32>",
                        word, P->a->pk, iop(P, "arith.addi", iop(P, "arith.muli", p, idx(P, PANEL)), j),
                        KP * PANEL);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
}

static void emit_pack(const panels_t *P, int kc0, int64_t len) {
  int64_t pairs = (len + 1) / 2, whole = len / 32; /* 16-pair blocks wholly inside K */
  emit_pack_blocks(P, kc0, whole);
  emit_pack_tail(P, kc0, whole * 16, pairs);
}

/* ---- packing a quantized weight (4 bits; the chunk is one group) ----
 * Byte p of a row's chunk holds the values 2p and 2p + 1 in its low and high nibble: one pair.
 * 16 bytes of a row, zero-extended to words, become 16 pair words by two vpermd of a table of
 * bf16(i) (indexed by the low 4 bits: the low nibble needs no mask) and a shift; 16 rows of
 * them are transposed as the bf16 weights are. Each value q is exact in bf16, so the products
 * with x's bf16 values are exact; the group's scale and bias multiply the chunk's sums (the
 * panel's column scales and biases go to a scratch beside the pairs). One group per chunk means
 * the tile's partial sums pass through the output once per group; chunks of 256 with each
 * group's sums scaled in registers need twice the accumulators, so a 4 x 2 tile: measured
 * slower, 85 against 99 tok/s for the 3B's 64-token prefill. */

/* The table: word i = bf16(i) bits, i in 0..15. */
static int nibble_table(const panels_t *P) {
  char list[16 * 8] = "";
  size_t n = 0;
  for (int i = 0; i < 16; ++i) {
    float f = (float)i;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    n += (size_t)snprintf(list + n, sizeof list - n, "%s%u", i ? ", " : "", bits >> 16);
  }
  int v = fresh(P);
  vlmc_kernel_emit_line(P->e, VLMC_SSA " = arith.constant dense<[%s]> : vector<16xi32>", v, list);
  return v;
}

static int permd(const panels_t *P, int table, int index) {
  int v = fresh(P);
  vlmc_kernel_emit_line(P->e, VLMC_SSA " = llvm.call_intrinsic \"llvm.x86.avx512.permvar.si.512\"(" VLMC_SSA ", "
                        VLMC_SSA ") : (vector<16xi32>, vector<16xi32>) -> vector<16xi32>", v, table, index);
  return v;
}

static int i32_splat(const panels_t *P, int value) {
  int v = fresh(P);
  vlmc_kernel_emit_line(P->e, VLMC_SSA " = arith.constant dense<%d> : vector<16xi32>", v, value);
  return v;
}

static void emit_pack_quantized(const panels_t *P, int kc0, int64_t len) {
  vlmc_kernel_emit_t *e = P->e;
  int table = nibble_table(P), four = i32_splat(P, 4), sixteen = i32_splat(P, 16);
  int g = for_const(P, 0, PANEL, 16);
  int b = for_const(P, 0, len / 32, 1);
  int r[16];
  for (int i = 0; i < 16; ++i) {
    int col = clamped_column(P, iop(P, "arith.addi", g, idx(P, i)));
    /* words of the row's values kc0 + 32 b .. + 31: 4 words, 16 bytes */
    int row_at = iop(P, "arith.muli", col, idx(P, P->q.words));
    int chunk_at = iop(P, "arith.divui", kc0, idx(P, 8));
    int block_at = iop(P, "arith.muli", b, idx(P, 4));
    int at = iop(P, "arith.addi", row_at, iop(P, "arith.addi", chunk_at, block_at));
    int words = fresh(P), bytes = fresh(P), wide = fresh(P), high = fresh(P), hi16 = fresh(P);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.load %%b%d[" VLMC_SSA "] : memref<?xi32>, vector<4xi32>", words,
                          P->qi, at);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.bitcast " VLMC_SSA " : vector<4xi32> to vector<16xi8>", bytes, words);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.extui " VLMC_SSA " : vector<16xi8> to vector<16xi32>", wide, bytes);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.shrui " VLMC_SSA ", " VLMC_SSA " : vector<16xi32>", high, wide, four);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.shli " VLMC_SSA ", " VLMC_SSA " : vector<16xi32>", hi16,
                          permd(P, table, high), sixteen);
    r[i] = fresh(P);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.ori " VLMC_SSA ", " VLMC_SSA " : vector<16xi32>", r[i],
                          permd(P, table, wide), hi16);
  }
  store_transposed(P, r, b, g);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
  /* the panel's scales (sc[0 .. PANEL)) and biases (sc[PANEL ..)) of the chunk's group */
  int j = for_const(P, 0, PANEL, 1);
  int col = clamped_column(P, j);
  int row_at = iop(P, "arith.muli", col, idx(P, P->q.groups));
  int at = iop(P, "arith.addi", row_at, iop(P, "arith.divui", kc0, idx(P, P->q.group)));
  for (int part = 1; part <= 2; ++part) {
    int value = vlmc_kernel_emit_load(e, P->a->dq->operands[part], at);
    int to = iop(P, "arith.addi", j, idx(P, (part - 1) * PANEL));
    vlmc_kernel_emit_line(e, "memref.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : memref<%dxf32>",
                          value, P->a->sc, to, 2 * PANEL);
  }
  vlmc_kernel_emit_line(e, "}");
}

/* ---- x's rows as pairs ---- */

/* x's bits at (row start, k) as an i32 of its upper 16 bits (x holds bf16 values in f32), or
 * 0 past K. */
static int x_bits(const panels_t *P, int row_start, int k) {
  vlmc_kernel_emit_t *e = P->e;
  int inside = fresh(P), kk = iop(P, "arith.minui", k, idx(P, P->a->k - 1));
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi ult, " VLMC_SSA ", " VLMC_SSA " : index", inside,
                        k, idx(P, P->a->k));
  int v = vlmc_kernel_emit_load(e, P->a->x, iop(P, "arith.addi", row_start, kk));
  int bits = fresh(P), sixteen = fresh(P), hi = fresh(P), zero = fresh(P), chosen = fresh(P);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.bitcast " VLMC_SSA " : f32 to i32", bits, v);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant 16 : i32", sixteen);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.shrui " VLMC_SSA ", " VLMC_SSA " : i32", hi, bits, sixteen);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant 0 : i32", zero);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : i32",
                        chosen, inside, hi, zero);
  return chosen;
}

/* Word (row m, pair p) of the x scratch: row m - from of KP words. */
static int xs_at(const panels_t *P, int m, int p) {
  int rel = iop(P, "arith.subi", m, P->a->from);
  return iop(P, "arith.addi", iop(P, "arith.muli", rel, idx(P, KP)), p);
}

/* The block's rows of x, the chunk's elements, as pairs into the x scratch: 32 elements per
 * vcvtne2ps2bf16, the last ones (len % 32) a pair at a time. */
static void emit_x_pairs(const panels_t *P, int kc0, int64_t len) {
  vlmc_kernel_emit_t *e = P->e;
  int64_t whole = len / 32, pairs = (len + 1) / 2;
  int m = vlmc_kernel_emit_for(e, P->a->from, P->a->to, idx(P, 1));
  int row = iop(P, "arith.muli", m, idx(P, P->a->k));
  int src = iop(P, "arith.addi", row, kc0);
  if (whole) {
    int b = for_const(P, 0, whole, 1);
    int words = as_words(P, vlmc_cpu_emit_load_bf16x32(e, P->a->x,
                                     iop(P, "arith.addi", src, iop(P, "arith.muli", b, idx(P, 32)))));
    vlmc_kernel_emit_line(e, "vector.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : "
                          "memref<%lldxi32>, vector<16xi32>", words, P->a->xt,
                          xs_at(P, m, iop(P, "arith.muli", b, idx(P, 16))),
                          (long long)(P->a->block_rows * KP));
    vlmc_kernel_emit_line(e, "}");
  }
  for (int64_t p = whole * 16; p < pairs; ++p) {
    int k = iop(P, "arith.addi", kc0, idx(P, 2 * p));
    int lo = x_bits(P, row, k);
    int hi = x_bits(P, row, iop(P, "arith.addi", k, idx(P, 1)));
    int word = pair_word(P, lo, hi);
    vlmc_kernel_emit_line(e, "memref.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxi32>",
                          word, P->a->xt, xs_at(P, m, idx(P, p)), (long long)(P->a->block_rows * KP));
  }
  if (P->a->dq) { /* the row's sum over the chunk (one group), for the biases' term */
    int sum = -1;
    for (int64_t v = 0; v < len / 16; ++v) {
      int x = vlmc_cpu_emit_load_vector(e, P->a->x, iop(P, "arith.addi", src, idx(P, 16 * v)), 16);
      sum = sum < 0 ? x : vlmc_kernel_emit_float_op(e, "arith.addf", sum, x, 16);
    }
    int total = vlmc_cpu_emit_reduce_add(e, sum, 16);
    int at = iop(P, "arith.subi", m, P->a->from);
    vlmc_kernel_emit_line(e, "memref.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxf32>",
                          total, P->a->xsum, at, (long long)P->a->block_rows);
  }
  vlmc_kernel_emit_line(e, "}");
}

/* ---- one tile ---- */

typedef struct {
  int kc0;          /* the chunk's first k (index SSA) */
  int64_t len;      /* its elements (static) */
  int first;        /* i1 SSA: the first chunk (partial sums start at 0), or -1: never */
  bool first_always;
  bool last;        /* the last chunk: bias, epilogue */
} chunk_spec_t;

static int zero_acc(const panels_t *P) { return vlmc_cpu_emit_zero_vector(P->e, 16); }

/* Flat index of (row, panel column 16 v). */
static int out_at(const panels_t *P, int row, int v) {
  int col = iop(P, "arith.addi", P->p0, idx(P, 16 * v));
  return iop(P, "arith.addi", iop(P, "arith.muli", row, idx(P, P->a->n)), col);
}

static int load_partial(const panels_t *P, int row, int v) {
  int v_out = fresh(P);
  int at = out_at(P, row, v), zero = zero_acc(P);
  vlmc_kernel_emit_line(P->e, VLMC_SSA " = vector.maskedload %%out[" VLMC_SSA "], " VLMC_SSA ", " VLMC_SSA
                        " : memref<?xf32>, vector<16xi1>, vector<16xf32> into vector<16xf32>",
                        v_out, at, P->mask[v], zero);
  return v_out;
}

static void store_partial(const panels_t *P, int row, int v, int value) {
  vlmc_kernel_emit_line(P->e, "vector.maskedstore %%out[" VLMC_SSA "], " VLMC_SSA ", " VLMC_SSA
                        " : memref<?xf32>, vector<16xi1>, vector<16xf32>", out_at(P, row, v),
                        P->mask[v], value);
}

/* The last chunk's sums: bias, epilogue, store: as a vector when all 16 columns are the
 * thread's (vlmc_cpu_emit_finish_vector: the epilogue on vectors where it can), else lane by
 * lane for the columns inside the panel. */
static void emit_finish(const panels_t *P, int row, int v, int value) {
  vlmc_kernel_emit_t *e = P->e;
  int whole = fresh(P);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi uge, " VLMC_SSA ", " VLMC_SSA " : index", whole, P->wc,
                        idx(P, 16 * v + 16));
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", whole);
  int col0 = iop(P, "arith.addi", P->p0, idx(P, 16 * v));
  int sum = value;
  if (P->a->b) sum = vlmc_kernel_emit_float_op(e, "arith.addf", sum, vlmc_cpu_emit_load_vector(e, P->a->b, col0, 16), 16);
  vlmc_cpu_emit_finish_vector(e, sum, out_at(P, row, v), 16);
  vlmc_kernel_emit_line(e, "} else {");
  for (int lane = 0; lane < 16; ++lane) {
    int col = iop(P, "arith.addi", P->p0, idx(P, 16 * v + lane));
    int inside = fresh(P);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi ult, " VLMC_SSA ", " VLMC_SSA " : index", inside,
                          col, P->c_hi);
    vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", inside);
    int s = fresh(P);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.extract " VLMC_SSA "[%d] : f32 from vector<16xf32>",
                          s, value, lane);
    if (P->a->b) s = vlmc_kernel_emit_float_op(e, "arith.addf", s, vlmc_kernel_emit_load(e, P->a->b, col), 0);
    vlmc_kernel_emit_finish_element(e, s, iop(P, "arith.addi", iop(P, "arith.muli", row, idx(P, P->a->n)), col));
    vlmc_kernel_emit_line(e, "}");
  }
  vlmc_kernel_emit_line(e, "}");
}

/* The prefetch of the weights the next panel packs, from a tile: line `line` (index SSA) of
 * its 64 rows x KC * 2 bytes (8 lines a row). The next panel of the group, or after the last
 * the group's first one in the next chunk (past K: the next group's first). */
static void emit_prefetch_next(const panels_t *P, const chunk_spec_t *c, int line) {
  vlmc_kernel_emit_t *e = P->e;
  int next_p = iop(P, "arith.addi", P->p0, idx(P, PANEL));
  int same_chunk = fresh(P), past_k = fresh(P);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi ult, " VLMC_SSA ", " VLMC_SSA " : index", same_chunk,
                        next_p, P->g1);
  int next_k = iop(P, "arith.addi", c->kc0, idx(P, c->len));
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi uge, " VLMC_SSA ", " VLMC_SSA " : index", past_k,
                        next_k, idx(P, P->a->k));
  int k_other = fresh(P), p_other = fresh(P), k0 = fresh(P), p0 = fresh(P);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : index",
                        k_other, past_k, idx(P, 0), next_k);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : index",
                        p_other, past_k, P->g1, P->g0);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : index", k0,
                        same_chunk, c->kc0, k_other);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : index", p0,
                        same_chunk, next_p, p_other);
  int per_row = KC * 2 / 64;
  int unclamped = iop(P, "arith.addi", p0, iop(P, "arith.divui", line, idx(P, per_row)));
  int row = iop(P, "arith.minui", unclamped, idx(P, P->a->n - 1));
  int start = iop(P, "arith.addi", iop(P, "arith.muli", row, idx(P, P->a->k)), k0);
  int in_row = iop(P, "arith.remui", line, idx(P, per_row));
  int at = iop(P, "arith.addi", start, iop(P, "arith.muli", in_row, idx(P, 32)));
  at = iop(P, "arith.minui", at, idx(P, P->a->n * P->a->k - 1));
  /* Into the L2 only: with K = 2048 the 64 rows are 4 KiB apart, so their lines would all
   * land in the same few L1 sets and evict each other (and the panel being packed). */
  vlmc_kernel_emit_line(e, "memref.prefetch %%b%d[" VLMC_SSA "], read, locality<2>, data : "
                        "memref<?xbf16>", P->wi, at);
}

/* Pair p's step for every row (from m0) and vector of the tile. */
static void emit_pair_step(const panels_t *P, int mr, int m0, int p, const int *in, int *out) {
  vlmc_kernel_emit_t *e = P->e;
  int w[VECS];
  for (int v = 0; v < VECS; ++v) {
    int words = fresh(P);
    int pair_at = iop(P, "arith.muli", p, idx(P, PANEL));
    int at = iop(P, "arith.addi", pair_at, idx(P, 16 * v));
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.load " VLMC_SSA "[" VLMC_SSA "] : memref<%dxi32>, "
                          "vector<16xi32>", words, P->a->pk, at, KP * PANEL);
    w[v] = as_pairs(P, words);
  }
  for (int r = 0; r < mr; ++r) {
    int word = fresh(P), splat = fresh(P);
    vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxi32>",
                          word, P->a->xt, xs_at(P, iop(P, "arith.addi", m0, idx(P, r)), p),
                          (long long)(P->a->block_rows * KP));
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.broadcast " VLMC_SSA " : i32 to vector<16xi32>", splat, word);
    int x = as_pairs(P, splat);
    for (int v = 0; v < VECS; ++v) out[r * VECS + v] = vlmc_cpu_emit_dot_bf16(e, in[r * VECS + v], x, w[v]);
  }
}

/* `%outs.. = scf.for %iv = from to to step s iter_args(%ins.. = init..) -> (vector..) {` */
static int open_acc_loop(const panels_t *P, int n, int from, int to, int step, const int *init,
                         int *inner, int *outer) {
  vlmc_kernel_emit_t *e = P->e;
  int iv = fresh(P);
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  for (int i = 0; i < n; ++i) {
    outer[i] = fresh(P);
    inner[i] = fresh(P);
    vlmc_strbuf_printf(&line, "%s%%v%d", i ? ", " : "", outer[i]);
  }
  vlmc_strbuf_printf(&line, " = scf.for %%v%d = %%v%d to %%v%d step %%v%d iter_args(", iv, from, to, step);
  for (int i = 0; i < n; ++i) vlmc_strbuf_printf(&line, "%s%%v%d = %%v%d", i ? ", " : "", inner[i], init[i]);
  vlmc_strbuf_puts(&line, ") -> (");
  for (int i = 0; i < n; ++i) vlmc_strbuf_printf(&line, "%svector<16xf32>", i ? ", " : "");
  vlmc_strbuf_puts(&line, ") {");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
  return iv;
}

static void close_acc_loop(const panels_t *P, int n, const int *values) {
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_puts(&line, "scf.yield ");
  for (int i = 0; i < n; ++i) vlmc_strbuf_printf(&line, "%s%%v%d", i ? ", " : "", values[i]);
  vlmc_strbuf_puts(&line, " : ");
  for (int i = 0; i < n; ++i) vlmc_strbuf_printf(&line, "%svector<16xf32>", i ? ", " : "");
  vlmc_kernel_emit_line(P->e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
  vlmc_kernel_emit_line(P->e, "}");
}

/* A quantized chunk's contribution to (row, vector v of the panel) from its sums of q x:
 * scales * sums + biases * (the row's sum of x over the chunk). */
static int quantized_contribution(const panels_t *P, int row, int v, int sums) {
  vlmc_kernel_emit_t *e = P->e;
  int part[2];
  for (int i = 0; i < 2; ++i) {
    part[i] = fresh(P);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.load " VLMC_SSA "[" VLMC_SSA "] : memref<%dxf32>, vector<16xf32>",
                          part[i], P->a->sc, idx(P, i * PANEL + 16 * v), 2 * PANEL);
  }
  int xs = fresh(P), splat = fresh(P), scaled = fresh(P), total = fresh(P);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxf32>", xs, P->a->xsum,
                        iop(P, "arith.subi", row, P->a->from), (long long)P->a->block_rows);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.broadcast " VLMC_SSA " : f32 to vector<16xf32>", splat, xs);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.mulf " VLMC_SSA ", " VLMC_SSA " : vector<16xf32>", scaled, part[1], splat);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.fma " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : vector<16xf32>", total,
                        part[0], sums, scaled);
  return total;
}

/* A tile of mr rows from m0 (tile number `tile` of the block, for the prefetch; -1: none) over
 * one chunk. */
static void emit_tile(const panels_t *P, int mr, int m0, int tile, const chunk_spec_t *c) {
  vlmc_kernel_emit_t *e = P->e;
  enum { MAX_ACC = MR * VECS };
  /* The chunk's sums start at 0 and are added to the earlier chunks' afterwards: each output
   * is a chain of at most KP products plus one add per chunk, not K / 2 products in a row
   * (2.1e-6 against the reference at K = 4133 that way; 1.5e-7 this way). */
  int acc[MAX_ACC], inner[MAX_ACC], outer[MAX_ACC], next[MAX_ACC];
  for (int i = 0; i < mr * VECS; ++i) acc[i] = zero_acc(P);
  int n = mr * VECS;
  int64_t pairs = (c->len + 1) / 2, main = pairs / PF_EVERY * PF_EVERY;
  if (main) {
    int p_lo = idx(P, 0), p_hi = idx(P, main), p_step = idx(P, PF_EVERY);
    int p = open_acc_loop(P, n, p_lo, p_hi, p_step, acc, inner, outer);
    for (int i = 0; i < n; ++i) next[i] = inner[i];
    for (int u = 0; u < PF_EVERY; ++u) {
      int in[MAX_ACC];
      for (int i = 0; i < n; ++i) in[i] = next[i];
      emit_pair_step(P, mr, m0, u ? iop(P, "arith.addi", p, idx(P, u)) : p, in, next);
    }
    if (tile >= 0) {
      /* line tile * (KP / PF_EVERY) + p / PF_EVERY of the next panel's 64 x 8 lines */
      int tile_line = iop(P, "arith.muli", tile, idx(P, KP / PF_EVERY));
      int line = iop(P, "arith.addi", tile_line, iop(P, "arith.divui", p, idx(P, PF_EVERY)));
      emit_prefetch_next(P, c, iop(P, "arith.minui", line, idx(P, PANEL * KC * 2 / 64 - 1)));
    }
    close_acc_loop(P, n, next);
    for (int i = 0; i < n; ++i) acc[i] = outer[i];
  }
  for (int64_t p = main; p < pairs; ++p) {
    int in[MAX_ACC];
    for (int i = 0; i < n; ++i) in[i] = acc[i];
    emit_pair_step(P, mr, m0, idx(P, p), in, acc);
  }
  for (int r = 0; r < mr; ++r)
    for (int v = 0; v < VECS; ++v) {
      int row = iop(P, "arith.addi", m0, idx(P, r)), sum = acc[r * VECS + v];
      if (P->a->dq) sum = quantized_contribution(P, row, v, sum);
      if (!c->first_always) {
        int total = vlmc_kernel_emit_float_op(e, "arith.addf", load_partial(P, row, v), sum, 16);
        if (c->first >= 0) {
          int chosen = fresh(P);
          vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA
                                " : vector<16xf32>", chosen, c->first, sum, total);
          total = chosen;
        }
        sum = total;
      }
      if (c->last) emit_finish(P, row, v, sum);
      else store_partial(P, row, v, sum);
    }
}

/* The panel's masks: lanes l of vector v with p0 + 16 v + l < the thread's end. */
static void emit_masks(panels_t *P) {
  vlmc_kernel_emit_t *e = P->e;
  P->wc = iop(P, "arith.subi", P->c_hi, P->p0);
  for (int v = 0; v < VECS; ++v) {
    int left = fresh(P), left32 = fresh(P), splat = fresh(P);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.subi " VLMC_SSA ", " VLMC_SSA " : index", left, P->wc,
                          idx(P, 16 * v));
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : index to i32", left32, left);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.broadcast " VLMC_SSA " : i32 to vector<16xi32>", splat,
                          left32);
    P->mask[v] = fresh(P);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi slt, " VLMC_SSA ", " VLMC_SSA " : vector<16xi32>",
                          P->mask[v], P->iota, splat);
  }
}

/* One chunk of the group: x's pairs, then per panel: pack, the block's tiles and its leftover
 * rows. */
static void emit_chunk(panels_t *P, const chunk_spec_t *c) {
  vlmc_kernel_emit_t *e = P->e;
  const vlmc_linear_panels_t *a = P->a;
  emit_x_pairs(P, c->kc0, c->len);
  P->p0 = vlmc_kernel_emit_for(e, P->g0, P->g1, idx(P, PANEL));
  emit_masks(P);
  if (a->dq) emit_pack_quantized(P, c->kc0, c->len);
  else emit_pack(P, c->kc0, c->len);
  int m0 = vlmc_kernel_emit_for(e, a->from, a->to_r, idx(P, MR));
  /* (no prefetch of the next quantized panel yet: it reads packed words, not bf16 rows) */
  int tile = -1;
  if (!a->dq) {
    int rows_in = iop(P, "arith.subi", m0, a->from);
    tile = iop(P, "arith.divui", rows_in, idx(P, MR));
  }
  emit_tile(P, MR, m0, tile, c);
  vlmc_kernel_emit_line(e, "}");
  int m = vlmc_kernel_emit_for(e, a->to_r, a->to, idx(P, 1));
  emit_tile(P, 1, m, -1, c);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
}

bool vlmc_cpu_linear_panels_apply(vlmc_kernel_emit_t *e, const vlmc_value_t *x,
                                  const vlmc_value_t *w) {
  const vlmc_cpu_machine_t *m = vlmc_cpu_emit_machine(e);
  int xi = vlmc_kernel_emit_source_input(e, x), wi = vlmc_kernel_emit_source_input(e, w);
  return m->bf16_dot && e->vector_width == 16 && xi >= 0 && wi >= 0 &&
         vlmc_cpu_emit_reads_bf16(e, x) && vlmc_cpu_emit_reads_bf16(e, w) &&
         vlmc_kernel_emit_input_storage(e, (uint32_t)xi) == VLMC_DTYPE_F32 &&
         vlmc_kernel_emit_input_storage(e, (uint32_t)wi) == VLMC_DTYPE_BF16;
}

bool vlmc_cpu_linear_panels_apply_quantized(vlmc_kernel_emit_t *e, const vlmc_value_t *x,
                                            const vlmc_op_t *dq) {
  const vlmc_cpu_machine_t *m = vlmc_cpu_emit_machine(e);
  int xi = vlmc_kernel_emit_source_input(e, x), qi = dq ? vlmc_kernel_emit_source_input(e, dq->operands[0]) : -1;
  if (!m->bf16_dot || e->vector_width != 16 || xi < 0 || qi < 0 || !vlmc_cpu_emit_reads_bf16(e, x) ||
      vlmc_kernel_emit_input_storage(e, (uint32_t)xi) != VLMC_DTYPE_F32)
    return false;
  vlmc_quant_layout_t q = vlmc_dequantize_layout(dq);
  return q.bits == 4 && q.group % 32 == 0 && q.group <= KC && q.cols % q.group == 0;
}

/* Rows per block: the block's x chunk as pairs (rows x 512 bytes) within a quarter of the L2,
 * at most 512 (256 KiB of stack). */
int64_t vlmc_cpu_linear_panels_block_rows(const vlmc_cpu_machine_t *m) {
  int64_t rows = m->l2_bytes / 4 / (KP * 4) / MR * MR;
  return rows < MR ? MR : rows > 512 ? 512 : rows;
}

void vlmc_cpu_linear_panels_scratch(vlmc_kernel_emit_t *e, vlmc_linear_panels_t *a) {
  a->pk = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.alloca() {alignment = 64 : i64} : memref<%dxi32>",
                        a->pk, KP * PANEL);
  a->xt = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.alloca() {alignment = 64 : i64} : memref<%lldxi32>",
                        a->xt, (long long)(a->block_rows * KP));
  if (!a->dq) return;
  a->sc = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.alloca() {alignment = 64 : i64} : memref<%dxf32>", a->sc, 2 * PANEL);
  a->xsum = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.alloca() : memref<%lldxf32>", a->xsum, (long long)a->block_rows);
}

void vlmc_cpu_linear_panels(vlmc_kernel_emit_t *e, const vlmc_linear_panels_t *a) {
  panels_t P = {e, a, a->dq ? -1 : vlmc_kernel_emit_source_input(e, a->w), 0, 0, 0, 0, 0, {0}, 0, KC, -1, {0}};
  if (a->dq) {
    P.qi = vlmc_kernel_emit_source_input(e, a->dq->operands[0]);
    P.q = vlmc_dequantize_layout(a->dq);
    P.kc = P.q.group;
  }
  /* The thread's columns: units [lo, hi) of 4. */
  int lo = fresh(&P), hi = fresh(&P);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.muli %%lo, " VLMC_SSA " : index", lo,
                        idx(&P, VLMC_KERNEL_LINEAR_UNIT));
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.muli %%hi, " VLMC_SSA " : index", hi,
                        idx(&P, VLMC_KERNEL_LINEAR_UNIT));
  P.c_hi = iop(&P, "arith.minui", hi, idx(&P, a->n));
  char lanes[128];
  size_t used = 0;
  for (int i = 0; i < 16; ++i) used += (size_t)snprintf(lanes + used, sizeof lanes - used, "%s%d", i ? ", " : "", i);
  P.iota = fresh(&P);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant dense<[%s]> : vector<16xi32>", P.iota, lanes);
  /* Groups of columns: the block's partial sums (rows x columns x 4 bytes) within half the
   * L2, whole panels, at least one. */
  const vlmc_cpu_machine_t *m = vlmc_cpu_emit_machine(e);
  int rows = iop(&P, "arith.subi", a->to, a->from);
  int half_l2 = idx(&P, m->l2_bytes / 2 / 4); /* f32 sums in half the L2 */
  int cols = iop(&P, "arith.divui", half_l2, iop(&P, "arith.maxui", rows, idx(&P, 1)));
  int panels = iop(&P, "arith.divui", cols, idx(&P, PANEL));
  int at_least_one = iop(&P, "arith.maxui", panels, idx(&P, 1));
  int group = iop(&P, "arith.muli", at_least_one, idx(&P, PANEL));
  P.g0 = vlmc_kernel_emit_for(e, lo, P.c_hi, group);
  P.g1 = iop(&P, "arith.minui", iop(&P, "arith.addi", P.g0, group), P.c_hi);
  /* Chunks: the whole ones but the last in a loop, then the last (static length). */
  int64_t last0 = (a->k - 1) / P.kc * P.kc;
  if (last0 > 0) {
    int kc0 = for_const(&P, 0, last0, P.kc);
    int first = fresh(&P);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi eq, " VLMC_SSA ", " VLMC_SSA " : index", first, kc0,
                          idx(&P, 0));
    chunk_spec_t c = {kc0, P.kc, first, false, false};
    emit_chunk(&P, &c);
    vlmc_kernel_emit_line(e, "}");
  }
  chunk_spec_t c = {idx(&P, last0), a->k - last0, -1, last0 == 0, true};
  emit_chunk(&P, &c);
  vlmc_kernel_emit_line(e, "}");
}
