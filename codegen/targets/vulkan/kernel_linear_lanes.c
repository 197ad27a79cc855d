/* linear for CPU devices (lavapipe): y[m, n] = sum_k x[m, k] W[n, k] (+ b[n]), then the
 * epilogue, with the same template names ("linear" for a static single row, else
 * "linear_tiles"), work units, inputs and rounding as vlmc_vk_kernel_linear, but shaped
 * for llvmpipe rather than a GPU: no workgroup memory, no barriers, no subgroup operations.
 *
 * Why: llvmpipe (Mesa 22.3) runs a workgroup on one CPU thread, its invocations in SIMD
 * batches of 8; a barrier is a coroutine switch of every batch, and every storage-buffer load
 * inside a loop is a per-lane scalar loop, whatever its address (the broadcast path needs an
 * address made of constants and push constants only, outside all control flow). So what
 * counts is loads per FMA, and each invocation register-blocks (README.md, "Lanes variants"):
 *
 *  - linear_tiles (any x but a single static row): tiles of TILE_ROWS (128) rows x FEATURES
 *    (8) features, taken as in kernel_linear_tiles.c (workgroup g of G takes tiles g, g + G,
 *    ...); a workgroup of LANES (32) invocations, invocation t keeps ROWS (4) x FEATURES
 *    accumulators, rows m0 + t + LANES * r. Per k it loads ROWS x values and FEATURES
 *    weights (the same addresses in every invocation, which a GPU broadcasts): 32 FMAs for 12
 *    loads. The k loop is unrolled by K_UNROLL (8; the loop's mask bookkeeping is paid once
 *    per step), the K % K_UNROLL remainder written out (K is static). Where x or W comes
 *    straight from an f32 / f16 binding and K % 4 == 0, it is read as quads (emit.h: four
 *    elements per load), bf16 weights as 16-byte words (eight): 3 or 2 loads per 32 FMAs
 *    instead of 12.
 *  - linear with a static M of 1 (the decode GEMV): invocation t takes GEMV_FEATURES (4)
 *    features n0 + t + LANES j (128 features, GEMV_UNITS units, a workgroup); x[k] is loaded
 *    once for the 4 (each W element feeds one FMA: a GEMV has nothing else to reuse), k
 *    unrolled alike.
 *
 * Rows past M and features past N are clamped to the last one (their loads stay in bounds and
 * the lanes in lockstep), and only the stores are guarded. Accumulation is f32 FMAs in k
 * order from 0, then the bias, then the epilogue (the shared emitter, which also rounds an f16
 * result), as in the GPU kernel. */
#include "artifact/kernel_table.h"
#include "codegen/targets/vulkan/kernels.h"

enum {
  UNIT = VLMC_KERNEL_LINEAR_UNIT,
  /* Invocations per workgroup: 4 llvmpipe SIMD batches of 8 (AVX2). llvmpipe ends every loop
   * of a batch after 65535 iterations in all (LP_MAX_TGSI_LOOP_ITERATIONS, one counter for
   * every loop of the shader), silently: a batch runs ceil(M / 128) * (K / 8 + 1) of them,
   * under the limit up to M * K of about 6.7e7 (a 16384-patch image through a K = 3420 MLP
   * is 5.6e7); kernel-test's linear_tall (M = 120000) checks that no row is lost. */
  LANES = 32,
  FEATURES = 2 * UNIT,       /* 8 output features per tile (linear_tiles) */
  ROWS = 4,                  /* rows per invocation of a tile */
  TILE_ROWS = LANES * ROWS,  /* 128 */
  TILES_UNITS_PER_GROUP = TILE_ROWS * FEATURES / UNIT / 2, /* half a tile's units */
  GEMV_FEATURES = 4,         /* features per invocation, M == 1 */
  GEMV_UNITS = LANES * GEMV_FEATURES / UNIT, /* a static M == 1 */
  K_UNROLL = 8,
  ACCS = ROWS * FEATURES,    /* accumulators per invocation, M > 1 */
};

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *x, *w, *b;
  int64_t k, n;
  int m;      /* index SSA: rows of x (the product of its leading dims) */
  int tid;    /* invocation in the workgroup */
  int n0;     /* first feature of the workgroup */
  int n_end;  /* one past its last feature: min(end unit * 4, N) */
  int x_quads, w_quads; /* the input x / w is read as quads (K % 4 == 0); -1: element loads */
  int w_words;          /* the bf16 input w read as 16-byte words (K % 8 == 0); -1: not */
} lanes_linear_t;

/* ---- small emitters ---- */

static int idx(vlmc_kernel_emit_t *e, int64_t c) { return vlmc_kernel_emit_index(e, c); }
static int add(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.addi", a, b); }
static int mul(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.muli", a, b); }
static int min_si(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.minsi", a, b); }
/* a * c for a constant c, its constant emitted after a (mul(e, a, idx(e, c)) with an emitting a
 * would leave the order of the two to the C compiler) */
static int mulc(vlmc_kernel_emit_t *e, int a, int64_t c) { return mul(e, a, idx(e, c)); }




/* The f32 loop (emit.h) carrying acc[], which becomes the loop's inner values; returns %r. */
static int open_acc_loop(vlmc_kernel_emit_t *e, int from, int to, int step, int n, int *acc, int *iv) {
  int inner[VLMC_VK_MAX_LOOP_VALUES];
  int results = vlmc_vk_emit_open_f32_loop(e, from, to, step, n, acc, iv, inner);
  for (int a = 0; a < n; ++a) acc[a] = inner[a];
  return results;
}

/* Yields acc[], closes the loop, and makes acc[] its results (as plain SSA values). */
static void close_acc_loop(vlmc_kernel_emit_t *e, int results, int n, int *acc) {
  vlmc_vk_emit_close_f32_loop(e, results, n, acc, acc);
}

/* y[row, col] = acc (+ bias) through the epilogue, when `ok`. */
static void store_output(const lanes_linear_t *L, int ok, int row, int col, int acc, int bias) {
  vlmc_kernel_emit_t *e = L->e;
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", ok);
  if (bias >= 0) acc = vlmc_kernel_emit_float_op(e, "arith.addf", acc, bias, 0);
  vlmc_kernel_emit_finish_element(e, acc, add(e, mul(e, row, idx(e, L->n)), col));
  vlmc_kernel_emit_line(e, "}");
}

/* b[col] (col clamped into the workgroup's features), or -1 without a bias. */
static int load_bias(const lanes_linear_t *L, int col) {
  if (!L->b) return -1;
  return vlmc_kernel_emit_load(L->e, L->b, col);
}

/* ---- the k loop, shared by both paths ----
 * a[i] and b[j] are the flat bases (index SSAs) of the na left and nb right operands' rows;
 * acc[i * nb + j] += A[a[i] + k] * B[b[j] + k] for k in [0, K): a loop of K_UNROLL steps, then
 * the remainder written out. An operand read wide (wide_kind) takes one load per 4 k (quads
 * of f32 / f16: K % 4 == 0, so every row and every group of 4 k starts a quad) or per 8 k
 * (16-byte words of bf16: K % 8 == 0); the FMAs are the same, in the same order, either way. */

/* How operand v is read: 4 or 8 elements per load, or 1. */
static int wide_kind(const lanes_linear_t *L, const vlmc_value_t *v, int *input) {
  if (v == L->x && L->x_quads >= 0) { *input = L->x_quads; return 4; }
  if (v == L->w && L->w_quads >= 0) { *input = L->w_quads; return 4; }
  if (v == L->w && L->w_words >= 0) { *input = L->w_words; return 8; }
  *input = -1;
  return 1;
}

/* Elements base + k .. base + k + n - 1 of operand v into out[] (n a multiple of its width). */
static void load_run(const lanes_linear_t *L, const vlmc_value_t *v, int base, int k, int n, int *out) {
  vlmc_kernel_emit_t *e = L->e;
  int input, width = wide_kind(L, v, &input);
  if (width > 1 && n % width == 0) {
    int at = add(e, base, k);
    int first = vlmc_kernel_emit_index_op(e, "arith.divui", at, idx(e, width));
    for (int u = 0; u < n; u += width) {
      int which = u ? add(e, first, idx(e, u / width)) : first;
      if (width == 4) vlmc_vk_emit_load_quad(e, input, which, out + u);
      else vlmc_vk_emit_bf16x8(e, vlmc_vk_emit_load_words4(e, input, which), out + u);
    }
    return;
  }
  for (int u = 0; u < n; ++u) out[u] = vlmc_kernel_emit_load(e, v, add(e, base, add(e, k, idx(e, u))));
}

/* The FMAs of k .. k + n - 1 (n <= K_UNROLL): the loads, then each k's na x nb products. */
static void emit_k_run(const lanes_linear_t *L, const vlmc_value_t *va, const int *a, int na,
                       const vlmc_value_t *vb, const int *b, int nb, int k, int n, int *acc) {
  vlmc_kernel_emit_t *e = L->e;
  int av[ROWS][K_UNROLL], bv[FEATURES][K_UNROLL];
  for (int i = 0; i < na; ++i) load_run(L, va, a[i], k, n, av[i]);
  for (int j = 0; j < nb; ++j) load_run(L, vb, b[j], k, n, bv[j]);
  for (int u = 0; u < n; ++u)
    for (int i = 0; i < na; ++i)
      for (int j = 0; j < nb; ++j) acc[i * nb + j] = vlmc_vk_emit_fma(e, av[i][u], bv[j][u], acc[i * nb + j]);
}

static void emit_dot_block(const lanes_linear_t *L, const vlmc_value_t *va, const int *a, int na,
                           const vlmc_value_t *vb, const int *b, int nb, int *acc) {
  vlmc_kernel_emit_t *e = L->e;
  int64_t main_k = L->k / K_UNROLL * K_UNROLL;
  int n = na * nb;
  if (main_k > 0) { /* static trip count >= 1: no zero-trip guard needed */
    int k0;
    int from = idx(e, 0), to = idx(e, main_k), step = idx(e, K_UNROLL);
    int results = open_acc_loop(e, from, to, step, n, acc, &k0);
    emit_k_run(L, va, a, na, vb, b, nb, k0, K_UNROLL, acc);
    close_acc_loop(e, results, n, acc);
  }
  /* the remainder: runs of 4 (quads; bf16 words need K % 8 == 0, so none is left for them) */
  for (int64_t kk = main_k; kk < L->k; kk += 4) {
    int run = L->k - kk < 4 ? (int)(L->k - kk) : 4;
    emit_k_run(L, va, a, na, vb, b, nb, idx(e, kk), run, acc);
  }
}

/* ---- linear_tiles: lanes over rows, the weights uniform ---- */

/* The tile of rows m0 .. m0 + 128 and features n0 .. n_end (at most FEATURES). */
static void emit_rows(const lanes_linear_t *L, int m0) {
  vlmc_kernel_emit_t *e = L->e;
  int last_col = vlmc_kernel_emit_index_op(e, "arith.subi", L->n_end, idx(e, 1));
  int w_base[FEATURES], col[FEATURES], bias[FEATURES];
  for (int f = 0; f < FEATURES; ++f) { /* uniform: the tile's features */
    col[f] = min_si(e, add(e, L->n0, idx(e, f)), last_col);
    w_base[f] = mul(e, col[f], idx(e, L->k));
    bias[f] = load_bias(L, col[f]);
  }
  int last_row = vlmc_kernel_emit_index_op(e, "arith.subi", L->m, idx(e, 1));
  int row[ROWS], x_base[ROWS], acc[ACCS];
  for (int r = 0; r < ROWS; ++r) {
    int lane_row = add(e, m0, L->tid);
    row[r] = add(e, lane_row, idx(e, LANES * r));
    x_base[r] = mulc(e, min_si(e, row[r], last_row), L->k);
  }
  for (int a = 0; a < ACCS; ++a) acc[a] = vlmc_kernel_emit_f32(e, 0);
  emit_dot_block(L, L->x, x_base, ROWS, L->w, w_base, FEATURES, acc);
  for (int r = 0; r < ROWS; ++r) {
    int row_ok = vlmc_vk_emit_cmp(e, "slt", row[r], L->m);
    for (int f = 0; f < FEATURES; ++f) {
      int feature = add(e, L->n0, idx(e, f));
      store_output(L, vlmc_vk_emit_and(e, row_ok, vlmc_vk_emit_cmp(e, "slt", feature, L->n_end)), row[r], feature,
                   acc[r * FEATURES + f], bias[f]);
    }
  }
}

/* Tiles of TILE_ROWS rows x FEATURES features, row tile major; the group g of the G the
 * dispatch has takes tiles g, g + G, ... (kernel_linear_tiles.c: the same rule; its units
 * per group are half a tile's, so G is about twice the tile count). */
static void emit_tiles(lanes_linear_t *L) {
  vlmc_kernel_emit_t *e = L->e;
  int64_t col_tiles = (L->n + FEATURES - 1) / FEATURES;
  int padded = add(e, L->m, idx(e, TILE_ROWS - 1)); /* ceil(M / TILE_ROWS) row tiles */
  int row_tiles = vlmc_kernel_emit_index_op(e, "arith.divui", padded, idx(e, TILE_ROWS));
  int first, end;
  vlmc_vk_emit_group_units(e, &first, &end);
  int per = idx(e, TILES_UNITS_PER_GROUP);
  int group = vlmc_kernel_emit_index_op(e, "arith.divui", first, per);
  int work = vlmc_vk_emit_work(e), spare = idx(e, TILES_UNITS_PER_GROUP - 1);
  int groups = vlmc_kernel_emit_index_op(e, "arith.divui", add(e, work, spare), per);
  int t = vlmc_kernel_emit_for(e, group, mul(e, row_tiles, idx(e, col_tiles)), groups);
  int m0 = mulc(e, vlmc_kernel_emit_index_op(e, "arith.divui", t, idx(e, col_tiles)), TILE_ROWS);
  L->n0 = mulc(e, vlmc_kernel_emit_index_op(e, "arith.remui", t, idx(e, col_tiles)), FEATURES);
  int tile_end = add(e, L->n0, idx(e, FEATURES));
  L->n_end = min_si(e, tile_end, idx(e, L->n));
  emit_rows(L, m0);
  vlmc_kernel_emit_line(e, "}");
}

/* ---- linear, a static M of 1: lanes over features, x uniform ---- */

static void emit_gemv(const lanes_linear_t *L) {
  vlmc_kernel_emit_t *e = L->e;
  /* features n0 + t + LANES * j of invocation t (past n_end: copies of the last) */
  int last_col = vlmc_kernel_emit_index_op(e, "arith.subi", L->n_end, idx(e, 1));
  int feature[GEMV_FEATURES], col[GEMV_FEATURES], w_base[GEMV_FEATURES], acc[GEMV_FEATURES];
  for (int j = 0; j < GEMV_FEATURES; ++j) {
    int lane_feature = add(e, L->n0, L->tid);
    feature[j] = add(e, lane_feature, idx(e, LANES * j));
    col[j] = min_si(e, feature[j], last_col);
    w_base[j] = mul(e, col[j], idx(e, L->k));
    acc[j] = vlmc_kernel_emit_f32(e, 0);
  }
  int x_base = idx(e, 0);
  emit_dot_block(L, L->x, &x_base, 1, L->w, w_base, GEMV_FEATURES, acc);
  for (int j = 0; j < GEMV_FEATURES; ++j) {
    int ok = vlmc_vk_emit_cmp(e, "slt", feature[j], L->n_end), row = idx(e, 0), bias = load_bias(L, col[j]);
    store_output(L, ok, row, feature[j], acc[j], bias);
  }
}


/* x and w straight from f32 / f16 bindings are read as quads when K % 4 == 0, a bf16 w as
 * 16-byte words when K % 8 == 0 (a fused producer or another storage keeps element loads). */
static void choose_wide_loads(lanes_linear_t *L) {
  if (L->k % 4) return;
  int x = vlmc_kernel_emit_source_input(L->e, L->x), w = vlmc_kernel_emit_source_input(L->e, L->w);
  if (x == w) return;
  if (vlmc_vk_emit_can_declare_quads(L->e, x)) L->x_quads = x;
  if (vlmc_vk_emit_can_declare_quads(L->e, w)) L->w_quads = w;
  if (L->k % 8 == 0 && w >= 0 && w < 32 && vlmc_kernel_emit_input_storage(L->e, (uint32_t)w) == VLMC_DTYPE_BF16)
    L->w_words = w;
  if (L->x_quads >= 0) vlmc_vk_emit_declare_quads(L->e, L->x_quads);
  if (L->w_quads >= 0) vlmc_vk_emit_declare_quads(L->e, L->w_quads);
}

vlmc_status_t vlmc_vk_kernel_linear_lanes(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  lanes_linear_t L = {e, op->operands[0], op->operands[1], op->num_operands > 2 ? op->operands[2] : NULL,
                      0, 0, -1, -1, -1, -1, -1, -1, -1};
  const vlmc_type_t *wt = &L.w->type, *xt = &L.x->type;
  if (wt->rank != 2 || !vlmc_dim_is_static(wt->dims[0]) || !vlmc_dim_is_static(wt->dims[1]) ||
      wt->dims[0].off < 1 || wt->dims[1].off < 1) {
    vlmc_kernel_emit_fail(e, "linear: the vulkan kernel needs a static [N, K] weight with N, K >= 1");
    return NULL;
  }
  L.n = wt->dims[0].off;
  L.k = wt->dims[1].off;
  e->cost = 2 * L.k * UNIT * 64;
  bool gemv = vlmc_vk_static_rows(xt) == 1; /* as vlmc_vk_kernel_linear chooses */
  e->template_name = gemv ? "linear" : "linear_tiles";
  vlmc_vk_emit_set_workgroup(e, LANES, 1, 1, gemv ? GEMV_UNITS : TILES_UNITS_PER_GROUP);
  choose_wide_loads(&L);
  L.tid = vlmc_vk_emit_thread_id(e, 0);
  L.m = vlmc_kernel_emit_dims_product(e, xt, 0, xt->rank - 1);
  if (!gemv) {
    emit_tiles(&L);
    return NULL;
  }
  int first, end;
  vlmc_vk_emit_group_units(e, &first, &end);
  L.n0 = mul(e, first, idx(e, UNIT));
  int units_end = mul(e, end, idx(e, UNIT));
  L.n_end = min_si(e, units_end, idx(e, L.n));
  /* fused: each invocation sums the whole row itself (no barrier on llvmpipe) */
  const vlmc_op_t *norm = vlmc_kernel_emit_norm_prologue(e, L.x);
  if (norm) vlmc_vk_emit_norm_prologue_scale(e, norm, idx(e, 0), 1);
  /* A group of the 2-D grid's last row may lie past the work: nothing to do (uniform). */
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", vlmc_vk_emit_cmp(e, "slt", L.n0, L.n_end));
  emit_gemv(&L);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
