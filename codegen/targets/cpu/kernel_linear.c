/* linear: y[m, n] = sum_k x[m, k] W[n, k] (+ b[n]), then the epilogue. W is [N, K] row-major,
 * so both operands are contiguous along k: the kernel is a register-blocked tile of MR rows of
 * x by NR rows of W, with one vector<VL x f32> accumulator per (row, col) pair (per unrolled
 * k step), horizontally summed at the end (plus a scalar loop for K mod VL).
 *
 * Work units are blocks of 4 output features (threads split N; at decode, M = 1, that is the
 * whole parallelism). Loops, outermost first: blocks of MB rows of x (MB * K * 4 bytes, the
 * size of the L2 cache), then the thread's feature blocks, then MR-row tiles, then the
 * leftover rows one at a time. The tile shapes come from the machine (machine.h):
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
 * reference executor's arithmetic: a bf16 dot product (vdpbf16ps) would round x to bf16
 * too, which the kernel-test tolerance (2e-6) and parity do not allow.
 * K and N are static (W is a parameter); M may be symbolic.
 *
 * matmul: x [..., M, K] @ y [..., K, N] with equal batch dims, one work unit per output row,
 * scalar accumulation along k (no Qwen2.5-VL graph uses it; it is here for completeness). */
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

/* acc[r * nr + c] += x[row r, k0 ..] * W[col c, k0 ..] for one VL block at k0 (index SSA);
 * out receives the new accumulators. */
static void emit_block_fmas(const linear_t *L, const tile_t *t, const int *x_row, const int *w_row,
                            int k0, const int *acc, int *out) {
  vlmc_kernel_emit_t *e = L->e;
  int xv[MAX_MR], wv[UNIT];
  for (int r = 0; r < t->mr; ++r)
    xv[r] = vlmc_cpu_emit_load_vector(e, L->x, vlmc_kernel_emit_index_op(e, "arith.addi", x_row[r], k0), L->vl);
  for (int c = 0; c < t->nr; ++c)
    wv[c] = vlmc_cpu_emit_load_vector(e, L->w, vlmc_kernel_emit_index_op(e, "arith.addi", w_row[c], k0), L->vl);
  for (int r = 0; r < t->mr; ++r)
    for (int c = 0; c < t->nr; ++c) {
      int a = r * t->nr + c;
      out[a] = vlmc_kernel_emit_fresh(e);
      vlmc_kernel_emit_line(e, VLMC_SSA " = vector.fma " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA
                            " : vector<%dxf32>", out[a], xv[r], wv[c], acc[a], L->vl);
    }
}

/* The vector loop over k in steps of VL * unroll: returns (in acc) one accumulator per
 * (row, col) pair, the unrolled ones summed, plus the VL blocks the loop's step leaves. */
static void emit_k_loop(const linear_t *L, const tile_t *t, const int *x_row, const int *w_row,
                        int *acc) {
  vlmc_kernel_emit_t *e = L->e;
  int pairs = t->mr * t->nr, n_acc = pairs * t->unroll, step = L->vl * t->unroll;
  int64_t k_main = L->k / step * step;
  int acc_in[MAX_ACC], acc_out[MAX_ACC];
  int zero = vlmc_cpu_emit_zero_vector(e, L->vl);
  int k = vlmc_kernel_emit_fresh(e);
  for (int a = 0; a < n_acc; ++a) acc_in[a] = vlmc_kernel_emit_fresh(e);
  int results = vlmc_kernel_emit_fresh(e);
  /* %results:n = scf.for %k = 0 to K_main step VL*U iter_args(%acc.. = %zero..) -> (vector..) */
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_printf(&line, "%%v%d:%d = scf.for %%v%d = %%v%d to %%v%d step %%v%d iter_args(",
                     results, n_acc, k, vlmc_kernel_emit_index(e, 0), vlmc_kernel_emit_index(e, k_main),
                     vlmc_kernel_emit_index(e, step));
  for (int a = 0; a < n_acc; ++a)
    vlmc_strbuf_printf(&line, "%s%%v%d = %%v%d", a ? ", " : "", acc_in[a], zero);
  vlmc_strbuf_puts(&line, ") -> (");
  list_types(&line, n_acc, L->vl);
  vlmc_strbuf_puts(&line, ") {");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  for (int u = 0; u < t->unroll; ++u) {
    int k0 = u ? vlmc_kernel_emit_index_op(e, "arith.addi", k, vlmc_kernel_emit_index(e, u * L->vl)) : k;
    emit_block_fmas(L, t, x_row, w_row, k0, acc_in + u * pairs, acc_out + u * pairs);
  }
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
  /* The whole VL blocks after K_main (fewer than unroll of them), straight-line. */
  for (int64_t k0 = k_main; k0 + L->vl <= L->k; k0 += L->vl) {
    int next[MAX_MR * UNIT];
    emit_block_fmas(L, t, x_row, w_row, vlmc_kernel_emit_index(e, k0), acc, next);
    for (int a = 0; a < pairs; ++a) acc[a] = next[a];
  }
}

/* One tile at rows m0.., features cols[0 .. nr) (index SSA values): dot products, bias,
 * epilogue, stores. */
static void emit_tile(const linear_t *L, const tile_t *t, int m0, const int *cols) {
  vlmc_kernel_emit_t *e = L->e;
  int kk = vlmc_kernel_emit_index(e, L->k);
  int x_row[MAX_MR], w_row[UNIT], acc[MAX_MR * UNIT];
  for (int r = 0; r < t->mr; ++r)
    x_row[r] = vlmc_kernel_emit_index_op(e, "arith.muli", vlmc_kernel_emit_index_op(e, "arith.addi", m0, vlmc_kernel_emit_index(e, r)), kk);
  for (int c = 0; c < t->nr; ++c)
    w_row[c] = vlmc_kernel_emit_index_op(e, "arith.muli", cols[c], kk);
  emit_k_loop(L, t, x_row, w_row, acc);
  int64_t tail = L->k % L->vl;
  for (int r = 0; r < t->mr; ++r)
    for (int c = 0; c < t->nr; ++c) {
      int sum = vlmc_cpu_emit_reduce_add(e, acc[r * t->nr + c], L->vl);
      for (int64_t i = 0; i < tail; ++i) {
        int off = vlmc_kernel_emit_index(e, L->k - tail + i);
        int xs = vlmc_kernel_emit_load(e, L->x, vlmc_kernel_emit_index_op(e, "arith.addi", x_row[r], off));
        int ws = vlmc_kernel_emit_load(e, L->w, vlmc_kernel_emit_index_op(e, "arith.addi", w_row[c], off));
        int prod = vlmc_kernel_emit_float_op(e, "arith.mulf", xs, ws, 0);
        sum = vlmc_kernel_emit_float_op(e, "arith.addf", sum, prod, 0);
      }
      int col = cols[c];
      if (L->b) sum = vlmc_kernel_emit_float_op(e, "arith.addf", sum, vlmc_kernel_emit_load(e, L->b, col), 0);
      int row = vlmc_kernel_emit_index_op(e, "arith.addi", m0, vlmc_kernel_emit_index(e, r));
      int flat = vlmc_kernel_emit_index_op(e, "arith.addi", vlmc_kernel_emit_index_op(e, "arith.muli", row, vlmc_kernel_emit_index(e, L->n)), col);
      vlmc_kernel_emit_finish_element(e, sum, flat);
    }
}

/* The rows [from, to) of one feature block of width nr: MR-row tiles up to toR, then single
 * rows. */
static void emit_block_rows(const linear_t *L, int nr, int n0, int from, int to_r, int to) {
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
    emit_tile(L, &t, m0, cols + c0);
  }
  vlmc_kernel_emit_line(e, "}");
  int m = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", m,
                        to_r, to, vlmc_kernel_emit_index(e, 1));
  tile_t one = L->single;
  one.nr = nr;
  emit_tile(L, &one, m, cols);
  vlmc_kernel_emit_line(e, "}");
}

/* Feature block u (an index SSA value) for rows [from, to): the full-width block, or the
 * narrower last one where N is not a multiple of the unit. */
static void emit_unit(const linear_t *L, int u, int from, int to_r, int to) {
  vlmc_kernel_emit_t *e = L->e;
  int n0 = vlmc_kernel_emit_index_op(e, "arith.muli", u, vlmc_kernel_emit_index(e, UNIT));
  int64_t last = L->n % UNIT;
  if (last == 0) {
    emit_block_rows(L, UNIT, n0, from, to_r, to);
    return;
  }
  int full = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi ult, " VLMC_SSA ", " VLMC_SSA " : index", full, u,
                        vlmc_kernel_emit_index(e, L->n / UNIT));
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", full);
  emit_block_rows(L, UNIT, n0, from, to_r, to);
  vlmc_kernel_emit_line(e, "} else {");
  emit_block_rows(L, (int)last, n0, from, to_r, to);
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
  int q = vlmc_kernel_emit_index_op(e, "arith.divui", vlmc_kernel_emit_index_op(e, "arith.subi", hi_full, lo),
                                    vlmc_kernel_emit_index(e, QUARTERS));
  int i = vlmc_kernel_emit_fresh(e), c = vlmc_kernel_emit_fresh(e), m = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", i,
                        vlmc_kernel_emit_index(e, 0), q, one);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", c,
                        vlmc_kernel_emit_index(e, 0), vlmc_kernel_emit_index(e, UNIT), one);
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
  emit_tile(L, &t, m, cols);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
  int u = vlmc_kernel_emit_fresh(e);
  int rest = vlmc_kernel_emit_index_op(e, "arith.addi", lo, vlmc_kernel_emit_index_op(e, "arith.muli", q, vlmc_kernel_emit_index(e, QUARTERS)));
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", u,
                        rest, hi, one);
  emit_unit(L, u, from, from, to);
  vlmc_kernel_emit_line(e, "}");
}

vlmc_status_t vlmc_cpu_kernel_linear(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  linear_t L = {e, op->operands[0], op->operands[1], op->num_operands > 2 ? op->operands[2] : NULL,
                0, 0, e->vector_width, {0}, {0}};
  const vlmc_cpu_machine_t *machine = vlmc_cpu_emit_machine(e);
  pick_tiles(&L, machine);
  const vlmc_type_t *wt = &L.w->type, *xt = &L.x->type;
  if (wt->rank != 2 || !vlmc_dim_is_static(wt->dims[0]) || !vlmc_dim_is_static(wt->dims[1])) {
    vlmc_kernel_emit_fail(e, "linear: the cpu kernel needs a static [N, K] weight");
    return NULL;
  }
  L.n = wt->dims[0].off;
  L.k = wt->dims[1].off;
  e->template_name = "linear";
  e->cost = 2 * L.k * UNIT * 64; /* per unit and (a guess of) 64 rows */
  int m_total = vlmc_kernel_emit_dims_product(e, xt, 0, xt->rank - 1);
  /* Rows of x per block: MB * K f32 the size of the L2 cache (the former fixed 512 KiB where
   * the machine names no other), which keeps most of x while the thread streams its weight
   * rows past it once per block: a 64-token prefill at K = 2048 is one block, so the weights
   * are read once (half the L2 would read them twice). */
  int64_t mr = L.rows.mr, mb = machine->l2_bytes / 4 / (L.k ? L.k : 1);
  mb = mb < mr ? mr : mb / mr * mr;
  int mb_c = vlmc_kernel_emit_index(e, mb);
  /* for mb0 in 0..M step MB: end = min(mb0 + MB, M); end_r = mb0 + (end - mb0) / MR * MR */
  int mb0 = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {",
                        mb0, vlmc_kernel_emit_index(e, 0), m_total, mb_c);
  int end = vlmc_kernel_emit_index_op(e, "arith.minui", vlmc_kernel_emit_index_op(e, "arith.addi", mb0, mb_c), m_total);
  int span_r = vlmc_kernel_emit_index_op(e, "arith.muli",
                     vlmc_kernel_emit_index_op(e, "arith.divui", vlmc_kernel_emit_index_op(e, "arith.subi", end, mb0),
                            vlmc_kernel_emit_index(e, mr)),
                     vlmc_kernel_emit_index(e, mr));
  int end_r = vlmc_kernel_emit_index_op(e, "arith.addi", mb0, span_r);
  /* A block without a whole MR-row tile (decode) streams the weights in quarters; else the
   * thread's units in order, each unit's weight rows staying in L1 across the block's tiles. */
  int gemv = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi eq, " VLMC_SSA ", " VLMC_SSA " : index", gemv, end_r, mb0);
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", gemv);
  emit_gemv_quarters(&L, mb0, end);
  vlmc_kernel_emit_line(e, "} else {");
  int u = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = %%lo to %%hi step " VLMC_SSA " {", u,
                        vlmc_kernel_emit_index(e, 1));
  emit_unit(&L, u, mb0, end_r, end);
  vlmc_kernel_emit_line(e, "}");
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
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", n,
                        vlmc_kernel_emit_index(e, 0), nn, vlmc_kernel_emit_index(e, 1));
  int k = vlmc_kernel_emit_fresh(e), acc = vlmc_kernel_emit_fresh(e), sum = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA
                        " iter_args(" VLMC_SSA " = " VLMC_SSA ") -> (f32) {",
                     sum, k, vlmc_kernel_emit_index(e, 0), kk, vlmc_kernel_emit_index(e, 1), acc,
                     vlmc_kernel_emit_f32(e, 0));
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
