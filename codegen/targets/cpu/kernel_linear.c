/* linear: y[m, n] = sum_k x[m, k] W[n, k] (+ b[n]), then the epilogue. W is [N, K] row-major,
 * so both operands are contiguous along k: the kernel is a register-blocked tile of MR rows of
 * x by NR rows of W, with one vector<VL x f32> accumulator per (row, col) pair (per unrolled
 * k step), horizontally summed at the end (plus a scalar loop for K mod VL).
 *
 * Work units are blocks of 4 output features (threads split N; at decode, M = 1, that is the
 * whole parallelism). Loops, outermost first: blocks of MB rows of x, then chunks of k, then
 * the thread's feature blocks, then MR-row tiles, then the leftover rows one at a time. A
 * chunk of KC elements of k keeps a tile's x rows and a unit's W rows within two thirds of
 * the L1 cache, so that the unit's W chunk stays there while the block's tiles stream their
 * x past it (K = 11008 in whole rows would be 88 KiB of W alone, re-read from L2 for every
 * tile); MB keeps the block's x chunk within half the L2. With several chunks, the first
 * stores its partial sums in the output, the middle ones add to them, and the last adds the
 * bias and runs the epilogue. The tile shapes come from the machine (machine.h):
 *
 *   prefill tile  MR x NR = 4 x 2 with 16 vector registers (8 accumulators, 4 x and 2 w
 *                 registers), 4 x 4 with 32 (AVX-512: 16 accumulators + 4 + 4 = 24);
 *   decode tile   1 x 4, k unrolled twice (8 independent accumulators, so that the FMA
 *                 latency does not limit the stream at 16 lanes).
 *
 * The GEMV (a block with fewer rows than MR: decode) reads the weights as four long streams
 * per thread: the thread's units in four quarters, one weight row of each quarter per tile
 * (emit_gemv_quarters). Measured on 11008 x 2048 bf16, 2 threads, AVX2, in one run: four
 * interleaved sequential read streams per thread 13-15 GB/s, one stream 9-10, the four rows
 * of one unit side by side (the former order: each stream ends after 4 KiB) 11-13; the
 * GEMV in the former order 8.5-10, in quarters 12-13.7 (0.85-1.05 of the four-stream read).
 * No software prefetch: one `prefetcht0` per row and step, 1 KiB ahead, made it slower
 * (8.5 against 10.5 GB/s): the hardware prefetcher follows sequential streams by itself.
 *
 * bf16 / f16 weights are widened to f32 as they load and multiplied with f32 FMAs, the
 * reference executor's arithmetic. Where x is a bf16 value too (the bf16-matmul precision
 * rounds a linear's input to bf16: passes/precision.h) and the CPU has AVX512_BF16, each
 * product of two bf16 values is exact in f32, so the kernel takes k in blocks of 32 bf16
 * pairs through vdpbf16ps (x, stored in f32, converted exactly by vcvtne2ps2bf16) with the
 * same tiles and f32 accumulators: the reference's result up to the order of the sums, at
 * half the instructions per product and no widening of W. Each x chunk of a block is then
 * rounded to bf16 once into a scratch buffer (MB x KC bf16 on the stack, at most half the L2),
 * so that the tiles read 2 bytes of x per element instead of 4 and convert nothing.
 * K and N are static (W is a parameter); M may be symbolic.
 *
 * matmul: x [..., M, K] @ y [..., K, N] with equal batch dims, one work unit per output row,
 * scalar accumulation along k (no Qwen2.5-VL graph uses it; it is here for completeness). */
#include <stdio.h>

#include "artifact/kernel_table.h"
#include "codegen/targets/cpu/kernels.h"

enum {
  UNIT = VLMC_KERNEL_LINEAR_UNIT,
  MAX_MR = 4,
  MAX_UNROLL = 2,
  MAX_ACC = MAX_MR * UNIT * MAX_UNROLL,
  QUARTERS = 4, /* the GEMV's weight streams per thread */
};

/* One tile shape: rows of x, rows of W, VL-blocks of k per loop step. */
typedef struct {
  int mr, nr, unroll;
} tile_t;

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *x, *w, *b;
  int64_t k, n;
  int vl;
  bool dot;      /* bf16 dot products (vdpbf16ps): x and W both read bf16, AVX512_BF16 */
  bool dequantized; /* W is a dequantize prologue's, rows and groups multiples of vl */
  int kb;        /* k elements one block of FMAs takes: VL, or 2 VL bf16 pairs with dot */
  int64_t kc;    /* k elements per chunk: a multiple of kb, but for the last chunk */
  /* x's chunk of the block rounded to bf16 (dot with x in f32 storage): the scratch's SSA
   * value (-1: x is read as it is), its type, and the block's first row while in use. */
  int xs, xs_row0;
  int64_t xs_stride; /* elements per row in the scratch: KC and one cache line (below) */
  char xs_type[48];
  tile_t rows;   /* the MR-row tile (its nr: the column chunk) */
  tile_t single; /* the one-row tile (its nr: a whole unit) */
} linear_t;

/* The tiles for this machine (see the file comment). */
static void pick_tiles(linear_t *L, const vlmc_cpu_machine_t *m) {
  L->rows = (tile_t){MAX_MR, m->vector_registers >= 32 ? UNIT : 2, 1};
  L->single = (tile_t){1, UNIT, MAX_UNROLL};
}

/* "%vA, %vB, ..." (the SSA values) or "vector<VLxf32>, ..." (n times) into line. */
static void list_values(vlmc_strbuf_t *line, const int *v, int n) {
  for (int a = 0; a < n; ++a) vlmc_strbuf_printf(line, "%s%%v%d", a ? ", " : "", v[a]);
}
static void list_types(vlmc_strbuf_t *line, int n, int vl) {
  for (int a = 0; a < n; ++a) vlmc_strbuf_printf(line, "%svector<%dxf32>", a ? ", " : "", vl);
}

/* The bf16 form of emit_block_fmas: 32 bf16 pairs of x and W per vdpbf16ps; x from the
 * scratch when there is one (x_row then indexes it). */
static void emit_block_dots(const linear_t *L, const tile_t *t, const int *x_row,
                            const int *w_row, int k0, const int *acc, int *out) {
  vlmc_kernel_emit_t *e = L->e;
  int xv[MAX_MR], wv[UNIT];
  for (int r = 0; r < t->mr; ++r) {
    int at = vlmc_kernel_emit_index_op(e, "arith.addi", x_row[r], k0);
    if (L->xs < 0) {
      xv[r] = vlmc_cpu_emit_load_bf16x32(e, L->x, at);
      continue;
    }
    xv[r] = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.load " VLMC_SSA "[" VLMC_SSA "] : %s, vector<32xbf16>",
                          xv[r], L->xs, at, L->xs_type);
  }
  for (int c = 0; c < t->nr; ++c)
    wv[c] = vlmc_cpu_emit_load_bf16x32(e, L->w, vlmc_kernel_emit_index_op(e, "arith.addi", w_row[c], k0));
  for (int r = 0; r < t->mr; ++r)
    for (int c = 0; c < t->nr; ++c)
      out[r * t->nr + c] = vlmc_cpu_emit_dot_bf16(e, acc[r * t->nr + c], xv[r], wv[c]);
}

/* acc[r * nr + c] += x[row r, k0 ..] * W[col c, k0 ..] for one block of kb elements at k0
 * (index SSA); out receives the new accumulators. */
static void emit_block_fmas(const linear_t *L, const tile_t *t, const int *x_row, const int *w_row,
                            int k0, const int *acc, int *out) {
  vlmc_kernel_emit_t *e = L->e;
  if (L->dot) {
    emit_block_dots(L, t, x_row, w_row, k0, acc, out);
    return;
  }
  int xv[MAX_MR], wv[UNIT];
  for (int r = 0; r < t->mr; ++r)
    xv[r] = vlmc_cpu_emit_load_vector(e, L->x, vlmc_kernel_emit_index_op(e, "arith.addi", x_row[r], k0), L->vl);
  for (int c = 0; c < t->nr; ++c) {
    int at = vlmc_kernel_emit_index_op(e, "arith.addi", w_row[c], k0); /* k0: a multiple of vl */
    wv[c] = L->dequantized ? vlmc_cpu_emit_load_dequantized(e, L->w, at, L->vl)
                           : vlmc_cpu_emit_load_vector(e, L->w, at, L->vl);
  }
  for (int r = 0; r < t->mr; ++r)
    for (int c = 0; c < t->nr; ++c) {
      int a = r * t->nr + c;
      out[a] = vlmc_kernel_emit_fresh(e);
      vlmc_kernel_emit_line(e, VLMC_SSA " = vector.fma " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA
                            " : vector<%dxf32>", out[a], xv[r], wv[c], acc[a], L->vl);
    }
}

/* The vector loop over k in [k_lo, k_hi) in steps of kb * unroll: returns (in acc) one
 * accumulator per (row, col) pair, the unrolled ones summed, plus the whole blocks the loop's
 * step leaves (the elements after the last whole block are the caller's). */
/* A prefetch of W's element `at` (index SSA) into L1: the next unit's rows while this one's
 * tiles run (its first tile would otherwise wait on memory: each W row of K = 2048 is one
 * 4 KiB page, where the hardware prefetcher stops). */
static void emit_prefetch_w(const linear_t *L, int at) {
  vlmc_kernel_emit_t *e = L->e;
  int i = vlmc_kernel_emit_source_input(e, L->w);
  if (i < 0) return;
  vlmc_kernel_emit_line(e, "memref.prefetch %%b%d[" VLMC_SSA "], read, locality<3>, data : "
                        "memref<?x%s>", i, at,
                        vlmc_kernel_emit_storage_type(vlmc_kernel_emit_input_storage(e, (uint32_t)i)));
}

static void emit_k_loop(const linear_t *L, const tile_t *t, const int *x_row, const int *w_row,
                        int64_t k_lo, int64_t k_hi, int pf, int *acc) {
  vlmc_kernel_emit_t *e = L->e;
  int pairs = t->mr * t->nr, n_acc = pairs * t->unroll, step = L->kb * t->unroll;
  int64_t k_main = k_lo + (k_hi - k_lo) / step * step;
  int acc_in[MAX_ACC], acc_out[MAX_ACC];
  int zero = vlmc_cpu_emit_zero_vector(e, L->vl);
  int k = vlmc_kernel_emit_fresh(e);
  for (int a = 0; a < n_acc; ++a) acc_in[a] = vlmc_kernel_emit_fresh(e);
  int results = vlmc_kernel_emit_fresh(e);
  /* %results:n = scf.for %k = 0 to K_main step VL*U iter_args(%acc.. = %zero..) -> (vector..) */
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  int k_start = vlmc_kernel_emit_index(e, k_lo), k_end = vlmc_kernel_emit_index(e, k_main),
      k_step = vlmc_kernel_emit_index(e, step);
  vlmc_strbuf_printf(&line, "%%v%d:%d = scf.for %%v%d = %%v%d to %%v%d step %%v%d iter_args(",
                     results, n_acc, k, k_start, k_end, k_step);
  for (int a = 0; a < n_acc; ++a)
    vlmc_strbuf_printf(&line, "%s%%v%d = %%v%d", a ? ", " : "", acc_in[a], zero);
  vlmc_strbuf_puts(&line, ") -> (");
  list_types(&line, n_acc, L->vl);
  vlmc_strbuf_puts(&line, ") {");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  for (int u = 0; u < t->unroll; ++u) {
    int k0 = u ? vlmc_kernel_emit_index_op(e, "arith.addi", k, vlmc_kernel_emit_index(e, u * L->kb)) : k;
    emit_block_fmas(L, t, x_row, w_row, k0, acc_in + u * pairs, acc_out + u * pairs);
  }
  /* One cache line of W per prefetch: 64 bytes = kb bf16 elements with dot (k steps of 32). */
  if (pf >= 0) emit_prefetch_w(L, vlmc_kernel_emit_index_op(e, "arith.addi", pf, k));
  vlmc_strbuf_clear(&line);
  vlmc_strbuf_puts(&line, "scf.yield ");
  list_values(&line, acc_out, n_acc);
  vlmc_strbuf_puts(&line, " : ");
  list_types(&line, n_acc, L->vl);
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_kernel_emit_line(e, "}");
  vlmc_strbuf_deinit(&line);
  /* acc = results#a + results#(pairs + a) + ...: the unrolled partial sums of each pair (one
   * loop result plus zero when not unrolled: a plain SSA number for what follows). */
  for (int a = 0; a < pairs; ++a) {
    acc[a] = vlmc_kernel_emit_fresh(e);
    if (t->unroll == 1)
      vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addf %%v%d#%d, " VLMC_SSA " : vector<%dxf32>", acc[a],
                            results, a, zero, L->vl);
    else
      vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addf %%v%d#%d, %%v%d#%d : vector<%dxf32>", acc[a],
                            results, a, results, pairs + a, L->vl);
    for (int u = 2; u < t->unroll; ++u) {
      int sum = vlmc_kernel_emit_fresh(e);
      vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addf " VLMC_SSA ", %%v%d#%d : vector<%dxf32>", sum,
                            acc[a], results, u * pairs + a, L->vl);
      acc[a] = sum;
    }
  }
  /* The whole blocks after K_main (fewer than unroll of them), straight-line. */
  for (int64_t k0 = k_main; k0 + L->kb <= k_hi; k0 += L->kb) {
    int next[MAX_MR * UNIT];
    emit_block_fmas(L, t, x_row, w_row, vlmc_kernel_emit_index(e, k0), acc, next);
    for (int a = 0; a < pairs; ++a) acc[a] = next[a];
  }
}

/* A chunk of k and what its sums do: the only chunk (bias, epilogue, store), the first of
 * several (store the partial sums in the output), a middle one (add to them), the last (add
 * them, the bias, the epilogue). */
typedef enum { CHUNK_ONLY, CHUNK_FIRST, CHUNK_MIDDLE, CHUNK_LAST } chunk_role_t;

typedef struct {
  int64_t lo, hi;
  chunk_role_t role;
} chunk_t;

static const chunk_t kWholeK = {0, 0, CHUNK_ONLY}; /* hi 0: [0, K) */

/* Element `flat` of the output as stored so far (a partial sum of earlier chunks). */
static int emit_load_out(vlmc_kernel_emit_t *e, int flat) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load %%out[" VLMC_SSA "] : memref<?xf32>", v, flat);
  return v;
}

/* One tile at rows m0.., features cols[0 .. nr) (index SSA values), over chunk ch of k: dot
 * products, then what the chunk's role says (partial sums, or bias, epilogue and store). */
static void emit_tile(const linear_t *L, const tile_t *t, int m0, const int *cols,
                      const chunk_t *ch, int pf_row) {
  vlmc_kernel_emit_t *e = L->e;
  int64_t k_lo = ch->lo, k_hi = ch->hi ? ch->hi : L->k;
  int kk = vlmc_kernel_emit_index(e, L->k);
  int x_row[MAX_MR], x_ld[MAX_MR], w_row[UNIT], acc[MAX_MR * UNIT];
  for (int r = 0; r < t->mr; ++r) {
    int row = vlmc_kernel_emit_index_op(e, "arith.addi", m0, vlmc_kernel_emit_index(e, r));
    x_row[r] = vlmc_kernel_emit_index_op(e, "arith.muli", row, kk);
    if (L->xs < 0) {
      x_ld[r] = x_row[r];
      continue;
    }
    /* In the scratch: row - row0 of KC elements, element k at k - k_lo. */
    int rel = vlmc_kernel_emit_index_op(e, "arith.subi", row, L->xs_row0);
    int start = vlmc_kernel_emit_index_op(e, "arith.muli", rel, vlmc_kernel_emit_index(e, L->xs_stride));
    x_ld[r] = vlmc_kernel_emit_index_op(e, "arith.subi", start, vlmc_kernel_emit_index(e, k_lo));
  }
  for (int c = 0; c < t->nr; ++c)
    w_row[c] = vlmc_kernel_emit_index_op(e, "arith.muli", cols[c], kk);
  int pf = pf_row < 0 ? -1 : vlmc_kernel_emit_index_op(e, "arith.muli", pf_row, kk);
  emit_k_loop(L, t, x_ld, w_row, k_lo, k_hi, pf, acc);
  int64_t tail = (k_hi - k_lo) % L->kb;
  for (int r = 0; r < t->mr; ++r)
    for (int c = 0; c < t->nr; ++c) {
      int sum = vlmc_cpu_emit_reduce_add(e, acc[r * t->nr + c], L->vl);
      for (int64_t i = 0; i < tail; ++i) {
        int off = vlmc_kernel_emit_index(e, k_hi - tail + i);
        int xs = vlmc_kernel_emit_load(e, L->x, vlmc_kernel_emit_index_op(e, "arith.addi", x_row[r], off));
        int ws = vlmc_kernel_emit_load(e, L->w, vlmc_kernel_emit_index_op(e, "arith.addi", w_row[c], off));
        int prod = vlmc_kernel_emit_float_op(e, "arith.mulf", xs, ws, 0);
        sum = vlmc_kernel_emit_float_op(e, "arith.addf", sum, prod, 0);
      }
      int col = cols[c];
      int row = vlmc_kernel_emit_index_op(e, "arith.addi", m0, vlmc_kernel_emit_index(e, r));
      int flat = vlmc_kernel_emit_index_op(e, "arith.addi", vlmc_kernel_emit_index_op(e, "arith.muli", row, vlmc_kernel_emit_index(e, L->n)), col);
      if (ch->role == CHUNK_MIDDLE || ch->role == CHUNK_LAST)
        sum = vlmc_kernel_emit_float_op(e, "arith.addf", emit_load_out(e, flat), sum, 0);
      if (ch->role == CHUNK_FIRST || ch->role == CHUNK_MIDDLE) {
        vlmc_kernel_emit_store(e, sum, flat);
        continue;
      }
      if (L->b) sum = vlmc_kernel_emit_float_op(e, "arith.addf", sum, vlmc_kernel_emit_load(e, L->b, col), 0);
      vlmc_kernel_emit_finish_element(e, sum, flat);
    }
}

/* The W row the MR-row tile at m0 prefetches while it runs (with dot, where the k loop steps
 * one cache line of W at a time): row (tile number mod UNIT) of the next unit, so that the
 * block's first UNIT tiles bring in all of it (the later ones find it in cache). */
static int next_unit_row(const linear_t *L, int n0, int from, int m0) {
  vlmc_kernel_emit_t *e = L->e;
  if (!L->dot) return -1;
  int rows_in = vlmc_kernel_emit_index_op(e, "arith.subi", m0, from);
  int tile = vlmc_kernel_emit_index_op(e, "arith.divui", rows_in, vlmc_kernel_emit_index(e, L->rows.mr));
  int next_n0 = vlmc_kernel_emit_index_op(e, "arith.addi", n0, vlmc_kernel_emit_index(e, UNIT));
  int in_unit = vlmc_kernel_emit_index_op(e, "arith.remui", tile, vlmc_kernel_emit_index(e, UNIT));
  int row = vlmc_kernel_emit_index_op(e, "arith.addi", next_n0, in_unit);
  return vlmc_kernel_emit_index_op(e, "arith.minui", row, vlmc_kernel_emit_index(e, L->n - 1));
}

/* The rows [from, to) of one feature block of width nr over chunk ch of k: MR-row tiles up
 * to to_r, then single rows. */
static void emit_block_rows(const linear_t *L, int nr, int n0, int from, int to_r, int to,
                            const chunk_t *ch) {
  vlmc_kernel_emit_t *e = L->e;
  /* The block's features, before the loops: both the tiles and the single rows use them. */
  int cols[UNIT];
  for (int c = 0; c < nr; ++c)
    cols[c] = c ? vlmc_kernel_emit_index_op(e, "arith.addi", n0, vlmc_kernel_emit_index(e, c)) : n0;
  int m0 = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", m0,
                        from, to_r, vlmc_kernel_emit_index(e, L->rows.mr));
  for (int c0 = 0; c0 < nr; c0 += L->rows.nr) {
    tile_t t = L->rows;
    if (nr - c0 < t.nr) t.nr = nr - c0;
    emit_tile(L, &t, m0, cols + c0, ch, c0 ? -1 : next_unit_row(L, n0, from, m0));
  }
  vlmc_kernel_emit_line(e, "}");
  int m = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", m,
                        to_r, to, vlmc_kernel_emit_index(e, 1));
  tile_t one = L->single;
  one.nr = nr;
  emit_tile(L, &one, m, cols, ch, -1);
  vlmc_kernel_emit_line(e, "}");
}

/* Feature block u (an index SSA value) for rows [from, to) over chunk ch of k: the
 * full-width block, or the narrower last one where N is not a multiple of the unit. */
static void emit_unit(const linear_t *L, int u, int from, int to_r, int to, const chunk_t *ch) {
  vlmc_kernel_emit_t *e = L->e;
  int n0 = vlmc_kernel_emit_index_op(e, "arith.muli", u, vlmc_kernel_emit_index(e, UNIT));
  int64_t last = L->n % UNIT;
  if (last == 0) {
    emit_block_rows(L, UNIT, n0, from, to_r, to, ch);
    return;
  }
  int full = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi ult, " VLMC_SSA ", " VLMC_SSA " : index", full, u,
                        vlmc_kernel_emit_index(e, L->n / UNIT));
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", full);
  emit_block_rows(L, UNIT, n0, from, to_r, to, ch);
  vlmc_kernel_emit_line(e, "} else {");
  emit_block_rows(L, (int)last, n0, from, to_r, to, ch);
  vlmc_kernel_emit_line(e, "}");
}

/* `%name` as an index SSA value (for arithmetic through the emitter's helpers). */
static int emit_named_index(vlmc_kernel_emit_t *e, const char *name) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addi %%%s, " VLMC_SSA " : index", v, name,
                        vlmc_kernel_emit_index(e, 0));
  return v;
}

/* The GEMV (a block of fewer rows than a tile: decode): the thread's full units [lo, hi')
 * in four quarters of Q units, read side by side: step i takes row c of unit lo + q*Q + i
 * from each quarter q, c = 0..3, so that each quarter is one long sequential stream (four
 * per thread, as the bandwidth wants: see the file comment) rather than four 2K-element rows
 * that end every unit. The units after 4Q (and a narrower last one) go one at a time. */
static void emit_gemv_quarters(const linear_t *L, int from, int to) {
  vlmc_kernel_emit_t *e = L->e;
  int lo = emit_named_index(e, "lo"), hi = emit_named_index(e, "hi");
  int one = vlmc_kernel_emit_index(e, 1);
  int hi_full = vlmc_kernel_emit_index_op(e, "arith.minui", hi, vlmc_kernel_emit_index(e, L->n / UNIT));
  int full_units = vlmc_kernel_emit_index_op(e, "arith.subi", hi_full, lo);
  int q = vlmc_kernel_emit_index_op(e, "arith.divui", full_units, vlmc_kernel_emit_index(e, QUARTERS));
  int i = vlmc_kernel_emit_fresh(e), c = vlmc_kernel_emit_fresh(e), m = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", i,
                        vlmc_kernel_emit_index(e, 0), q, one);
  int c_lo = vlmc_kernel_emit_index(e, 0), c_hi = vlmc_kernel_emit_index(e, UNIT);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", c,
                        c_lo, c_hi, one);
  int cols[QUARTERS];
  for (int s = 0; s < QUARTERS; ++s) {
    int start = vlmc_kernel_emit_index_op(e, "arith.addi", lo, vlmc_kernel_emit_index_op(e, "arith.muli", q, vlmc_kernel_emit_index(e, s)));
    int unit = vlmc_kernel_emit_index_op(e, "arith.addi", start, i);
    cols[s] = vlmc_kernel_emit_index_op(e, "arith.addi", vlmc_kernel_emit_index_op(e, "arith.muli", unit, vlmc_kernel_emit_index(e, UNIT)), c);
  }
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", m,
                        from, to, one);
  tile_t t = L->single;
  t.nr = QUARTERS;
  emit_tile(L, &t, m, cols, &kWholeK, -1);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
  int u = vlmc_kernel_emit_fresh(e);
  int rest = vlmc_kernel_emit_index_op(e, "arith.addi", lo, vlmc_kernel_emit_index_op(e, "arith.muli", q, vlmc_kernel_emit_index(e, QUARTERS)));
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", u,
                        rest, hi, one);
  emit_unit(L, u, from, from, to, &kWholeK);
  vlmc_kernel_emit_line(e, "}");
}

/* Bytes per element the kernel reads x in: its storage, or bf16 from the scratch. */
static int64_t x_bytes(const linear_t *L, bool packs_x) {
  int i = vlmc_kernel_emit_source_input(L->e, L->x);
  if (packs_x || i < 0) return packs_x ? 2 : 4;
  return vlmc_dtype_info(vlmc_kernel_emit_input_storage(L->e, (uint32_t)i))->bits / 8;
}

static int64_t w_bytes(const linear_t *L) {
  int i = vlmc_kernel_emit_source_input(L->e, L->w);
  return i < 0 ? 4 : vlmc_dtype_info(vlmc_kernel_emit_input_storage(L->e, (uint32_t)i))->bits / 8;
}

/* The chunk of k (see the file comment): the largest multiple of kb whose MR rows of x and
 * UNIT rows of W fill at most two thirds of the L1, then K split into that many equal
 * chunks (multiples of kb but for the last one). K itself when it fits. */
static int64_t chunk_size(const linear_t *L, const vlmc_cpu_machine_t *m, int64_t xb) {
  int64_t per_k = L->rows.mr * xb + UNIT * w_bytes(L);
  int64_t most = (2 * m->l1d_bytes / 3) / per_k / L->kb * L->kb;
  if (most < 4 * L->kb) most = 4 * L->kb;
  if (L->k <= most) return L->k;
  int64_t n = (L->k + most - 1) / most, even = (L->k + n - 1) / n;
  return (even + L->kb - 1) / L->kb * L->kb;
}

/* Chunk i of k: [i kc, min((i + 1) kc, K)) and its role among the chunks. */
static chunk_t chunk_at(const linear_t *L, int64_t i) {
  int64_t count = (L->k + L->kc - 1) / L->kc;
  chunk_t c = {i * L->kc, (i + 1) * L->kc < L->k ? (i + 1) * L->kc : L->k, CHUNK_ONLY};
  if (count > 1) c.role = i == 0 ? CHUNK_FIRST : i + 1 == count ? CHUNK_LAST : CHUNK_MIDDLE;
  return c;
}

/* Rows [from, to) of x, elements [ch->lo, ch->lo + whole 32-blocks) of each, rounded to bf16
 * into the scratch (row r at (r - from) * stride); the chunk's last elements (fewer than 32)
 * stay out: the tiles take them from x one at a time. The stride is KC plus one cache line:
 * rows of 4 KiB (KC = 2048) would put element k of every row in the same L1 set, where the
 * tile's 4 x rows, the unit's 4 W rows (4 KiB apart themselves) and the next unit's 4 would
 * need more ways than the cache has. */
static void emit_pack_x(const linear_t *L, int from, int to, const chunk_t *ch) {
  vlmc_kernel_emit_t *e = L->e;
  int64_t whole = (ch->hi - ch->lo) / 32 * 32;
  if (whole == 0) return;
  int r = vlmc_kernel_emit_for(e, from, to, vlmc_kernel_emit_index(e, 1));
  int row_start = vlmc_kernel_emit_index_op(e, "arith.muli", r, vlmc_kernel_emit_index(e, L->k));
  int src = vlmc_kernel_emit_index_op(e, "arith.addi", row_start, vlmc_kernel_emit_index(e, ch->lo));
  int rel = vlmc_kernel_emit_index_op(e, "arith.subi", r, from);
  int dst = vlmc_kernel_emit_index_op(e, "arith.muli", rel, vlmc_kernel_emit_index(e, L->xs_stride));
  int k_lo = vlmc_kernel_emit_index(e, 0), k_hi = vlmc_kernel_emit_index(e, whole),
      k_step = vlmc_kernel_emit_index(e, 32);
  int k = vlmc_kernel_emit_for(e, k_lo, k_hi, k_step);
  int pairs = vlmc_cpu_emit_load_bf16x32(e, L->x, vlmc_kernel_emit_index_op(e, "arith.addi", src, k));
  vlmc_kernel_emit_line(e, "vector.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : %s, vector<32xbf16>",
                        pairs, L->xs, vlmc_kernel_emit_index_op(e, "arith.addi", dst, k), L->xs_type);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
}

vlmc_status_t vlmc_cpu_kernel_linear(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  if (vlmc_cpu_linear_dequant_applies(e, op->operands[1]))
    return vlmc_cpu_kernel_linear_dequant(e);
  linear_t L = {e, op->operands[0], op->operands[1], op->num_operands > 2 ? op->operands[2] : NULL,
                0, 0, e->vector_width, false, false, e->vector_width, 0, -1, -1, 0, "", {0}, {0}};
  const vlmc_cpu_machine_t *machine = vlmc_cpu_emit_machine(e);
  pick_tiles(&L, machine);
  const vlmc_type_t *wt = &L.w->type, *xt = &L.x->type;
  if (wt->rank != 2 || !vlmc_dim_is_static(wt->dims[0]) || !vlmc_dim_is_static(wt->dims[1])) {
    vlmc_kernel_emit_fail(e, "linear: the cpu kernel needs a static [N, K] weight");
    return NULL;
  }
  L.n = wt->dims[0].off;
  L.k = wt->dims[1].off;
  /* Weights dequantized element by element (groups or rows not multiples of a vector: no
   * model's shapes, kernel-test's linear_q4_short_group): every lane is its own word load,
   * shift and scale, so wide vectors buy nothing but code, which grew with the lanes past
   * 36000 lines of MLIR (10 s of LLVM) at 16 for a 23 x 200 linear. Four lanes there. */
  if (vlmc_kernel_emit_dequantizes(e, L.w) && !vlmc_cpu_emit_dequantizes_aligned(e, L.w, L.vl) &&
      L.vl > 4)
    L.vl = 4;
  L.dot = machine->bf16_dot && L.vl == 16 && vlmc_cpu_emit_reads_bf16(e, L.x) &&
          vlmc_cpu_emit_reads_bf16(e, L.w);
  L.kb = L.dot ? 2 * L.vl : L.vl;
  L.dequantized = vlmc_cpu_emit_dequantizes_aligned(e, L.w, L.vl);
  /* Many rows on bf16 pairs: the outer product over packed panels (kernel_linear_panels.c). */
  bool panels = vlmc_cpu_linear_panels_apply(e, L.x, L.w);
  /* x in f32 storage, read as bf16 pairs: round each chunk of a block once (file comment). */
  bool packs_x = !panels && L.dot && x_bytes(&L, false) == 4;
  int64_t xb = x_bytes(&L, packs_x);
  L.kc = chunk_size(&L, machine, xb);
  e->template_name = "linear";
  e->cost = 2 * L.k * UNIT * 64; /* per unit and (a guess of) 64 rows */
  int m_total = vlmc_kernel_emit_dims_product(e, xt, 0, xt->rank - 1);
  /* Rows of x per block: a block's chunk of x (MB x KC) within half the L2, where the thread
   * streams each unit's W chunk past it once per block: a 64-token prefill at K = 2048 is one
   * block, so the weights are read once. */
  int64_t mr = L.rows.mr, mb = machine->l2_bytes / 2 / (L.kc * xb);
  mb = mb < mr ? mr : mb / mr * mr;
  if (panels) mb = vlmc_cpu_linear_panels_block_rows(machine);
  vlmc_linear_panels_t pa = {L.x, L.w, L.b, L.k, L.n, mb, -1, -1, -1, -1, -1, NULL, -1, -1};
  if (panels) vlmc_cpu_linear_panels_scratch(e, &pa);
  int mb_c = vlmc_kernel_emit_index(e, mb);
  if (packs_x) { /* before the loops: an alloca inside them would grow the stack */
    L.xs_stride = L.kc + 32;
    snprintf(L.xs_type, sizeof L.xs_type, "memref<%lldxbf16>", (long long)(mb * L.xs_stride));
    L.xs = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = memref.alloca() : %s", L.xs, L.xs_type);
  }
  /* for mb0 in 0..M step MB: end = min(mb0 + MB, M); end_r = mb0 + (end - mb0) / MR * MR */
  int mb0 = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {",
                        mb0, vlmc_kernel_emit_index(e, 0), m_total, mb_c);
  int end = vlmc_kernel_emit_index_op(e, "arith.minui", vlmc_kernel_emit_index_op(e, "arith.addi", mb0, mb_c), m_total);
  int span = vlmc_kernel_emit_index_op(e, "arith.subi", end, mb0);
  int tiles = vlmc_kernel_emit_index_op(e, "arith.divui", span, vlmc_kernel_emit_index(e, mr));
  int span_r = vlmc_kernel_emit_index_op(e, "arith.muli", tiles, vlmc_kernel_emit_index(e, mr));
  int end_r = vlmc_kernel_emit_index_op(e, "arith.addi", mb0, span_r);
  /* A block without a whole MR-row tile (decode) streams the weights in quarters; else the
   * thread's units in order, each unit's weight rows staying in L1 across the block's tiles. */
  int gemv = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi eq, " VLMC_SSA ", " VLMC_SSA " : index", gemv, end_r, mb0);
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", gemv);
  linear_t whole = L; /* the GEMV reads x as it is, over the whole of k */
  whole.xs = -1;
  emit_gemv_quarters(&whole, mb0, end);
  vlmc_kernel_emit_line(e, "} else {");
  L.xs_row0 = mb0;
  pa.from = mb0;
  pa.to_r = end_r;
  pa.to = end;
  if (panels) vlmc_cpu_linear_panels(e, &pa);
  for (int64_t i = 0; !panels && i * L.kc < L.k; ++i) {
    chunk_t ch = chunk_at(&L, i);
    if (packs_x) emit_pack_x(&L, mb0, end, &ch);
    int u = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = %%lo to %%hi step " VLMC_SSA " {", u,
                          vlmc_kernel_emit_index(e, 1));
    emit_unit(&L, u, mb0, end_r, end, &ch);
    vlmc_kernel_emit_line(e, "}");
  }
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}

vlmc_status_t vlmc_cpu_kernel_matmul(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  const vlmc_value_t *x = op->operands[0], *y = op->operands[1];
  const vlmc_type_t *xt = &x->type, *yt = &y->type;
  e->template_name = "matmul";
  /* One work unit per output row (batch and M dims together: vlmc_kernel_work). */
  int kk = vlmc_kernel_emit_dim(e, xt->dims[xt->rank - 1]);
  int nn = vlmc_kernel_emit_dim(e, yt->dims[yt->rank - 1]);
  int mm = vlmc_kernel_emit_dim(e, xt->dims[xt->rank - 2]);
  e->cost = 2 * 64 * 64;
  int row = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = %%lo to %%hi step " VLMC_SSA " {", row,
                        vlmc_kernel_emit_index(e, 1));
  /* row = batch * M + m */
  int batch = vlmc_kernel_emit_index_op(e, "arith.divui", row, mm);
  int x_base = vlmc_kernel_emit_index_op(e, "arith.muli", row, kk);
  int y_base = vlmc_kernel_emit_index_op(e, "arith.muli", vlmc_kernel_emit_index_op(e, "arith.muli", batch, kk), nn);
  int n = vlmc_kernel_emit_fresh(e);
  int n_lo = vlmc_kernel_emit_index(e, 0), n_step = vlmc_kernel_emit_index(e, 1);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", n,
                        n_lo, nn, n_step);
  int k = vlmc_kernel_emit_fresh(e), acc = vlmc_kernel_emit_fresh(e), sum = vlmc_kernel_emit_fresh(e);
  int k_lo = vlmc_kernel_emit_index(e, 0), k_step = vlmc_kernel_emit_index(e, 1);
  int acc0 = vlmc_kernel_emit_f32(e, 0);
  vlmc_kernel_emit_line(e, VLMC_SSA " = scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA
                        " iter_args(" VLMC_SSA " = " VLMC_SSA ") -> (f32) {",
                     sum, k, k_lo, kk, k_step, acc, acc0);
  int xs = vlmc_kernel_emit_load(e, x, vlmc_kernel_emit_index_op(e, "arith.addi", x_base, k));
  int ys = vlmc_kernel_emit_load(e, y, vlmc_kernel_emit_index_op(e, "arith.addi", y_base,
                                           vlmc_kernel_emit_index_op(e, "arith.addi", vlmc_kernel_emit_index_op(e, "arith.muli", k, nn), n)));
  int next = vlmc_kernel_emit_float_op(e, "arith.addf", acc, vlmc_kernel_emit_float_op(e, "arith.mulf", xs, ys, 0), 0);
  vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA " : f32", next);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_finish_element(e, sum, vlmc_kernel_emit_index_op(e, "arith.addi", vlmc_kernel_emit_index_op(e, "arith.muli", row, nn), n));
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
