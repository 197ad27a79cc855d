/* linear_tiles: y[m, n] = sum_k x[m, k] W[n, k] (+ b[n]), then the epilogue, for every x that
 * is not a single static row (prefill, the vision tower): a register-blocked tiled matmul.
 *
 * Work (artifact/kernel_rules.c): one unit per (row, block of VLMC_KERNEL_LINEAR_UNIT
 * features), so the dispatch grows with the rows and both axes split into tiles. The output is
 * cut into TILE_M x TILE_N (64 x 64) tiles, numbered row tile major; workgroup g of the G that
 * the dispatch has (ceil(work / units_per_group)) takes tiles g, g + G, ... A workgroup's units
 * are a quarter of a tile's (UNITS_PER_GROUP), so G is about four times the tile count (the
 * spare workgroups find no tile and end at once) and ragged edges rarely give a workgroup
 * two tiles; a few rows (a one-token prompt) still work, G times fewer workgroups than tiles.
 *
 * Per tile, 256 invocations: the K axis in TILE_K (16) steps, each staging the 64 x 16 x tile
 * (f32) and the 64 x 16 W tile (bf16 weights as 32-bit words, two elements a load) in
 * workgroup memory, k-major with a padded stride of 65 (the staging stores, 16 k by 2 rows a
 * subgroup, fall in distinct banks), a barrier, then 16 steps of 4 x values and 4 W values
 * out of workgroup memory into 16 accumulators, a barrier. Invocation (ty, tx) = (tid / 16,
 * tid % 16) owns rows ty + 16 i and features tx + 16 j (i, j < 4): a subgroup reads 2 x
 * addresses (broadcast) and 16 consecutive W ones per step, and stores 16 consecutive
 * features per row. Accumulation is f32 FMAs in k order from 0, then the bias, then the
 * epilogue, as in every linear kernel.
 *
 * Out-of-range rows, features and k (the tile edges) read element 0 and use 0 instead (no
 * branch around a barrier); only the stores are guarded. */
#include "artifact/kernel_table.h"
#include "codegen/targets/vulkan/kernels.h"

enum {
  UNIT = VLMC_KERNEL_LINEAR_UNIT,
  THREADS = 256,
  TILE_M = 64,
  TILE_N = 64,
  TILE_K = 16,
  STRIDE = TILE_M + 1, /* of a k row of either tile in workgroup memory (TILE_M == TILE_N) */
  SIDE = 16,           /* invocations along each axis of a tile: THREADS = SIDE * SIDE */
  PER = TILE_M / SIDE, /* rows (and features) per invocation: 4 */
  ACCS = PER * PER,
  UNITS_PER_GROUP = TILE_M * TILE_N / UNIT / 4,
};

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *x, *w, *b;
  int64_t k, n;
  int m;       /* index SSA: rows of x */
  int tid, ty, tx;
  int w_words; /* the bf16 weight's input, read as 32-bit words; -1: element loads */
  int xs, ws;  /* the tiles in workgroup memory, [TILE_K][STRIDE] each */
} tiles_t;

static int idx(vlmc_kernel_emit_t *e, int64_t c) { return vlmc_kernel_emit_index(e, c); }
static int add(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.addi", a, b); }
static int mul(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.muli", a, b); }
static int divu(vlmc_kernel_emit_t *e, int a, int64_t b) { return vlmc_kernel_emit_index_op(e, "arith.divui", a, idx(e, b)); }
static int remu(vlmc_kernel_emit_t *e, int a, int64_t b) { return vlmc_kernel_emit_index_op(e, "arith.remui", a, idx(e, b)); }
static int lt(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_vk_emit_cmp(e, "slt", a, b); }
/* a * c for a constant c, its constant emitted after a (mul(e, a, idx(e, c)) with an emitting a
 * would leave the order of the two to the C compiler) */
static int mulc(vlmc_kernel_emit_t *e, int a, int64_t c) { return mul(e, a, idx(e, c)); }

/* v when ok, else 0. */
static int or_zero(vlmc_kernel_emit_t *e, int ok, int v) {
  return vlmc_vk_emit_select(e, ok, v, vlmc_kernel_emit_f32(e, 0), "f32");
}

/* Element `flat` of `v` when ok, else 0 (the index clamped to 0 so the load stays in bounds). */
static int load_or_zero(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int ok, int flat) {
  return or_zero(e, ok, vlmc_kernel_emit_load(e, v, vlmc_vk_emit_select(e, ok, flat, idx(e, 0), "index")));
}

/* x[m0 .. m0 + 64, k0 .. k0 + 16] into xs[k][row]: element tid + 256 i is (row / 16, k % 16). */
static void stage_x(const tiles_t *T, int m0, int k0) {
  vlmc_kernel_emit_t *e = T->e;
  for (int i = 0; i < TILE_M * TILE_K / THREADS; ++i) {
    int at = add(e, T->tid, idx(e, i * THREADS));
    int r = divu(e, at, TILE_K), c = remu(e, at, TILE_K);
    int row = add(e, m0, r), k = add(e, k0, c);
    int row_ok = lt(e, row, T->m), k_ok = lt(e, k, idx(e, T->k));
    int ok = vlmc_vk_emit_and(e, row_ok, k_ok);
    int v = load_or_zero(e, T->x, ok, add(e, mul(e, row, idx(e, T->k)), k));
    vlmc_vk_emit_shared_store(e, T->xs, v, add(e, mul(e, c, idx(e, STRIDE)), r));
  }
}

/* W[n0 .. n0 + 64, k0 .. k0 + 16] into ws[k][feature]: bf16 words (8 a feature row, K even,
 * so a word never straddles two rows and k < K covers its pair), else elements. */
static void stage_w(const tiles_t *T, int n0, int k0) {
  vlmc_kernel_emit_t *e = T->e;
  int n = idx(e, T->n), kk = idx(e, T->k);
  if (T->w_words >= 0) {
    for (int i = 0; i < TILE_N * TILE_K / 2 / THREADS; ++i) {
      int at = add(e, T->tid, idx(e, i * THREADS));
      int f = divu(e, at, TILE_K / 2), c = mulc(e, remu(e, at, TILE_K / 2), 2);
      int feature = add(e, n0, f), k = add(e, k0, c);
      int feature_ok = lt(e, feature, n), k_ok = lt(e, k, kk);
      int ok = vlmc_vk_emit_and(e, feature_ok, k_ok);
      int word = divu(e, add(e, mul(e, feature, kk), k), 2);
      int pair[2];
      vlmc_vk_emit_load_bf16x2(e, T->w_words, vlmc_vk_emit_select(e, ok, word, idx(e, 0), "index"), pair);
      for (int h = 0; h < 2; ++h) {
        int v = or_zero(e, ok, pair[h]);
        int slot = add(e, mulc(e, add(e, c, idx(e, h)), STRIDE), f);
        vlmc_vk_emit_shared_store(e, T->ws, v, slot);
      }
    }
    return;
  }
  for (int i = 0; i < TILE_N * TILE_K / THREADS; ++i) {
    int at = add(e, T->tid, idx(e, i * THREADS));
    int f = divu(e, at, TILE_K), c = remu(e, at, TILE_K);
    int feature = add(e, n0, f), k = add(e, k0, c);
    int feature_ok = lt(e, feature, n), k_ok = lt(e, k, kk);
    int ok = vlmc_vk_emit_and(e, feature_ok, k_ok);
    int v = load_or_zero(e, T->w, ok, add(e, mul(e, feature, kk), k));
    vlmc_vk_emit_shared_store(e, T->ws, v, add(e, mul(e, c, idx(e, STRIDE)), f));
  }
}

/* The 16 accumulators of this invocation over the whole K axis for the tile at (m0, n0). */
static void accumulate(const tiles_t *T, int m0, int n0, int *acc) {
  vlmc_kernel_emit_t *e = T->e;
  int zero = vlmc_kernel_emit_f32(e, 0), init[ACCS], inner[ACCS], k0;
  for (int a = 0; a < ACCS; ++a) init[a] = zero;
  /* K >= 1 (checked by the caller): the loop runs at least once (pitfall 4 cannot bite) */
  int from = idx(e, 0), to = idx(e, T->k), step = idx(e, TILE_K);
  int results = vlmc_vk_emit_open_f32_loop(e, from, to, step, ACCS, init, &k0, inner);
  stage_x(T, m0, k0);
  stage_w(T, n0, k0);
  vlmc_vk_emit_barrier(e);
  for (int kk = 0; kk < TILE_K; ++kk) {
    int base = idx(e, kk * STRIDE), xv[PER], wv[PER];
    for (int i = 0; i < PER; ++i)
      xv[i] = vlmc_vk_emit_shared_load(e, T->xs, add(e, base, add(e, T->ty, idx(e, SIDE * i))));
    for (int j = 0; j < PER; ++j)
      wv[j] = vlmc_vk_emit_shared_load(e, T->ws, add(e, base, add(e, T->tx, idx(e, SIDE * j))));
    for (int i = 0; i < PER; ++i)
      for (int j = 0; j < PER; ++j) inner[i * PER + j] = vlmc_vk_emit_fma(e, xv[i], wv[j], inner[i * PER + j]);
  }
  vlmc_vk_emit_barrier(e);
  vlmc_vk_emit_close_f32_loop(e, results, ACCS, inner, acc);
}

static void store_tile(const tiles_t *T, int m0, int n0, const int *acc) {
  vlmc_kernel_emit_t *e = T->e;
  for (int j = 0; j < PER; ++j) {
    int col = add(e, n0, add(e, T->tx, idx(e, SIDE * j)));
    int col_ok = lt(e, col, idx(e, T->n));
    int bias = -1;
    if (T->b) bias = vlmc_kernel_emit_load(e, T->b, vlmc_vk_emit_select(e, col_ok, col, idx(e, 0), "index"));
    for (int i = 0; i < PER; ++i) {
      int row = add(e, m0, add(e, T->ty, idx(e, SIDE * i)));
      vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", vlmc_vk_emit_and(e, lt(e, row, T->m), col_ok));
      int v = acc[i * PER + j];
      if (bias >= 0) v = vlmc_kernel_emit_float_op(e, "arith.addf", v, bias, 0);
      vlmc_kernel_emit_finish_element(e, v, add(e, mul(e, row, idx(e, T->n)), col));
      vlmc_kernel_emit_line(e, "}");
    }
  }
}

vlmc_status_t vlmc_vk_kernel_linear_tiles(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  tiles_t T = {.e = e, .x = op->operands[0], .w = op->operands[1], .b = op->num_operands > 2 ? op->operands[2] : NULL};
  const vlmc_type_t *wt = &T.w->type, *xt = &T.x->type;
  if (wt->rank != 2 || !vlmc_dim_is_static(wt->dims[0]) || !vlmc_dim_is_static(wt->dims[1]) ||
      wt->dims[0].off < 1 || wt->dims[1].off < 1) {
    vlmc_kernel_emit_fail(e, "linear: the vulkan kernel needs a static [N, K] weight with N, K >= 1");
    return NULL;
  }
  T.n = wt->dims[0].off;
  T.k = wt->dims[1].off;
  e->template_name = "linear_tiles";
  e->cost = 2 * T.k * TILE_M * TILE_N;
  vlmc_vk_emit_set_workgroup(e, THREADS, 1, 1, UNITS_PER_GROUP);
  int w = vlmc_kernel_emit_source_input(e, T.w);
  T.w_words = T.k % 2 == 0 && w >= 0 && vlmc_kernel_emit_input_storage(e, (uint32_t)w) == VLMC_DTYPE_BF16 ? w : -1;
  T.xs = vlmc_vk_emit_shared(e, "f32", TILE_K * STRIDE);
  T.ws = vlmc_vk_emit_shared(e, "f32", TILE_K * STRIDE);
  T.tid = vlmc_vk_emit_thread_id(e, 0);
  T.ty = divu(e, T.tid, SIDE);
  T.tx = remu(e, T.tid, SIDE);
  T.m = vlmc_kernel_emit_dims_product(e, xt, 0, xt->rank - 1);
  /* tiles: ceil(M / 64) row tiles x col_tiles; this group takes g, g + G, ... */
  int64_t col_tiles = (T.n + TILE_N - 1) / TILE_N;
  int tiles = mulc(e, divu(e, add(e, T.m, idx(e, TILE_M - 1)), TILE_M), col_tiles);
  int first, end;
  vlmc_vk_emit_group_units(e, &first, &end);
  int group = divu(e, first, UNITS_PER_GROUP);
  int work = vlmc_vk_emit_work(e);
  int groups = divu(e, add(e, work, idx(e, UNITS_PER_GROUP - 1)), UNITS_PER_GROUP);
  int t = vlmc_kernel_emit_for(e, group, tiles, groups);
  int m0 = mulc(e, divu(e, t, col_tiles), TILE_M);
  int n0 = mulc(e, remu(e, t, col_tiles), TILE_N);
  int acc[ACCS];
  accumulate(&T, m0, n0, acc);
  store_tile(&T, m0, n0, acc);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
