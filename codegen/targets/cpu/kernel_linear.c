/* linear: y[m, n] = sum_k x[m, k] W[n, k] (+ b[n]), then the epilogue. W is [N, K] row-major,
 * so both operands are contiguous along k: the kernel is a register-blocked tile of MR rows of
 * x by NR rows of W, with one vector<VL x f32> accumulator per (row, col) pair, horizontally
 * summed at the end (plus a scalar loop for K mod VL).
 *
 * Work units are blocks of 4 output features (threads split N; at decode, M = 1, that is the
 * whole parallelism). Loops, outermost first: blocks of MB rows of x (MB * K * 4 bytes stays
 * in the L2 cache), then the thread's feature blocks, then 4-row tiles (4 x 2 tiles twice: 8
 * accumulators, 4 x and 2 w registers fit the 16 vector registers), then the leftover rows
 * one at a time (1 x 4 tiles: the decode GEMV, which streams 4 weight rows at once). K and N
 * are static (W is a parameter); M may be symbolic.
 *
 * matmul: x [..., M, K] @ y [..., K, N] with equal batch dims, one work unit per output row,
 * scalar accumulation along k (no Qwen2.5-VL graph uses it; it is here for completeness). */
#include "artifact/kernel_table.h"
#include "codegen/targets/cpu/kernels.h"

enum { UNIT = VLMC_KERNEL_LINEAR_UNIT, TILE_ROWS = 4 };

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *x, *w, *b;
  int64_t k, n;
  int vl;
  int k_vec; /* index constant: K rounded down to VL */
} linear_t;

/* One MR x NR tile at rows m0.., features n0..: dot products, bias, epilogue, stores. */
static void emit_tile(const linear_t *L, int mr, int nr, int m0, int n0) {
  vlmc_kernel_emit_t *e = L->e;
  int kk = vlmc_kernel_emit_index(e, L->k);
  int x_row[TILE_ROWS], w_row[UNIT];
  for (int r = 0; r < mr; ++r)
    x_row[r] = vlmc_kernel_emit_index_op(e, "arith.muli", vlmc_kernel_emit_index_op(e, "arith.addi", m0, vlmc_kernel_emit_index(e, r)), kk);
  for (int c = 0; c < nr; ++c)
    w_row[c] = vlmc_kernel_emit_index_op(e, "arith.muli", vlmc_kernel_emit_index_op(e, "arith.addi", n0, vlmc_kernel_emit_index(e, c)), kk);
  int n_acc = mr * nr;
  int acc_in[TILE_ROWS * UNIT], acc_out[TILE_ROWS * UNIT];
  int zero = vlmc_cpu_emit_zero_vector(e, L->vl);
  int k = vlmc_kernel_emit_fresh(e);
  for (int a = 0; a < n_acc; ++a) acc_in[a] = vlmc_kernel_emit_fresh(e);
  int results = vlmc_kernel_emit_fresh(e);
  /* %results:n = scf.for %k = 0 to K_vec step VL iter_args(%acc.. = %zero..) -> (vector..) */
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_printf(&line, "%%v%d:%d = scf.for %%v%d = %%v%d to %%v%d step %%v%d iter_args(",
                     results, n_acc, k, vlmc_kernel_emit_index(e, 0), L->k_vec,
                     vlmc_kernel_emit_index(e, L->vl));
  for (int a = 0; a < n_acc; ++a)
    vlmc_strbuf_printf(&line, "%s%%v%d = %%v%d", a ? ", " : "", acc_in[a], zero);
  vlmc_strbuf_puts(&line, ") -> (");
  for (int a = 0; a < n_acc; ++a)
    vlmc_strbuf_printf(&line, "%svector<%dxf32>", a ? ", " : "", L->vl);
  vlmc_strbuf_puts(&line, ") {");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  int xv[TILE_ROWS], wv[UNIT];
  for (int r = 0; r < mr; ++r) xv[r] = vlmc_cpu_emit_load_vector(e, L->x, vlmc_kernel_emit_index_op(e, "arith.addi", x_row[r], k), L->vl);
  for (int c = 0; c < nr; ++c) wv[c] = vlmc_cpu_emit_load_vector(e, L->w, vlmc_kernel_emit_index_op(e, "arith.addi", w_row[c], k), L->vl);
  for (int r = 0; r < mr; ++r)
    for (int c = 0; c < nr; ++c) {
      int a = r * nr + c;
      acc_out[a] = vlmc_kernel_emit_fresh(e);
      vlmc_kernel_emit_line(e, VLMC_SSA " = vector.fma " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA
                            " : vector<%dxf32>", acc_out[a], xv[r], wv[c], acc_in[a], L->vl);
    }
  vlmc_strbuf_clear(&line);
  vlmc_strbuf_puts(&line, "scf.yield ");
  for (int a = 0; a < n_acc; ++a) vlmc_strbuf_printf(&line, "%s%%v%d", a ? ", " : "", acc_out[a]);
  vlmc_strbuf_puts(&line, " : ");
  for (int a = 0; a < n_acc; ++a)
    vlmc_strbuf_printf(&line, "%svector<%dxf32>", a ? ", " : "", L->vl);
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_kernel_emit_line(e, "}");
  vlmc_strbuf_deinit(&line);
  int64_t tail = L->k % L->vl;
  for (int r = 0; r < mr; ++r)
    for (int c = 0; c < nr; ++c) {
      int acc = vlmc_kernel_emit_fresh(e);
      vlmc_kernel_emit_line(e, VLMC_SSA " = vector.reduction <add>, %%v%d#%d : vector<%dxf32> into f32",
                            acc, results, r * nr + c, L->vl);
      for (int64_t t = 0; t < tail; ++t) {
        int off = vlmc_kernel_emit_index(e, L->k - tail + t);
        int xs = vlmc_kernel_emit_load(e, L->x, vlmc_kernel_emit_index_op(e, "arith.addi", x_row[r], off));
        int ws = vlmc_kernel_emit_load(e, L->w, vlmc_kernel_emit_index_op(e, "arith.addi", w_row[c], off));
        int prod = vlmc_kernel_emit_float_op(e, "arith.mulf", xs, ws, 0);
        acc = vlmc_kernel_emit_float_op(e, "arith.addf", acc, prod, 0);
      }
      int col = vlmc_kernel_emit_index_op(e, "arith.addi", n0, vlmc_kernel_emit_index(e, c));
      if (L->b) acc = vlmc_kernel_emit_float_op(e, "arith.addf", acc, vlmc_kernel_emit_load(e, L->b, col), 0);
      int row = vlmc_kernel_emit_index_op(e, "arith.addi", m0, vlmc_kernel_emit_index(e, r));
      int flat = vlmc_kernel_emit_index_op(e, "arith.addi", vlmc_kernel_emit_index_op(e, "arith.muli", row, vlmc_kernel_emit_index(e, L->n)), col);
      vlmc_kernel_emit_finish_element(e, acc, flat);
    }
}

/* The rows [from, to) of one feature block of width nr: 4-row tiles, then single rows. */
static void emit_block_rows(const linear_t *L, int nr, int n0, int from, int to4, int to) {
  vlmc_kernel_emit_t *e = L->e;
  int m0 = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", m0,
                        from, to4, vlmc_kernel_emit_index(e, TILE_ROWS));
  for (int c0 = 0; c0 < nr; c0 += 2) {
    int cols = nr - c0 < 2 ? nr - c0 : 2;
    int n = c0 ? vlmc_kernel_emit_index_op(e, "arith.addi", n0, vlmc_kernel_emit_index(e, c0)) : n0;
    emit_tile(L, TILE_ROWS, cols, m0, n);
  }
  vlmc_kernel_emit_line(e, "}");
  int m = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", m,
                        to4, to, vlmc_kernel_emit_index(e, 1));
  emit_tile(L, 1, nr, m, n0);
  vlmc_kernel_emit_line(e, "}");
}

vlmc_status_t vlmc_cpu_kernel_linear(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  linear_t L = {e, op->operands[0], op->operands[1], op->num_operands > 2 ? op->operands[2] : NULL,
                0, 0, e->vector_width, 0};
  const vlmc_type_t *wt = &L.w->type, *xt = &L.x->type;
  if (wt->rank != 2 || !vlmc_dim_is_static(wt->dims[0]) || !vlmc_dim_is_static(wt->dims[1])) {
    vlmc_kernel_emit_fail(e, "linear: the cpu kernel needs a static [N, K] weight");
    return NULL;
  }
  L.n = wt->dims[0].off;
  L.k = wt->dims[1].off;
  e->template_name = "linear";
  e->cost = 2 * L.k * UNIT * 64; /* per unit and (a guess of) 64 rows */
  L.k_vec = vlmc_kernel_emit_index(e, L.k / L.vl * L.vl);
  int m_total = vlmc_kernel_emit_dims_product(e, xt, 0, xt->rank - 1);
  /* Rows of x per block: 512 KiB of x stays in L2 while the thread streams its weight rows
   * past it once per block (a 64-token prefill at K = 2048 is one block: weights read once). */
  int64_t mb = 131072 / (L.k ? L.k : 1);
  mb = mb < TILE_ROWS ? TILE_ROWS : mb / TILE_ROWS * TILE_ROWS;
  int mb_c = vlmc_kernel_emit_index(e, mb);
  /* for mb0 in 0..M step MB: end = min(mb0 + MB, M); end4 = mb0 + (end - mb0) / 4 * 4 */
  int mb0 = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {",
                        mb0, vlmc_kernel_emit_index(e, 0), m_total, mb_c);
  int end = vlmc_kernel_emit_index_op(e, "arith.minui", vlmc_kernel_emit_index_op(e, "arith.addi", mb0, mb_c), m_total);
  int span4 = vlmc_kernel_emit_index_op(e, "arith.muli",
                     vlmc_kernel_emit_index_op(e, "arith.divui", vlmc_kernel_emit_index_op(e, "arith.subi", end, mb0),
                            vlmc_kernel_emit_index(e, TILE_ROWS)),
                     vlmc_kernel_emit_index(e, TILE_ROWS));
  int end4 = vlmc_kernel_emit_index_op(e, "arith.addi", mb0, span4);
  int u = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = %%lo to %%hi step " VLMC_SSA " {", u,
                        vlmc_kernel_emit_index(e, 1));
  int n0 = vlmc_kernel_emit_index_op(e, "arith.muli", u, vlmc_kernel_emit_index(e, UNIT));
  int64_t last = L.n % UNIT;
  if (last == 0) {
    emit_block_rows(&L, UNIT, n0, mb0, end4, end);
  } else {
    int full = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi ult, " VLMC_SSA ", " VLMC_SSA " : index", full, u,
                          vlmc_kernel_emit_index(e, L.n / UNIT));
    vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", full);
    emit_block_rows(&L, UNIT, n0, mb0, end4, end);
    vlmc_kernel_emit_line(e, "} else {");
    emit_block_rows(&L, (int)last, n0, mb0, end4, end);
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
