/* linear_tiles on cooperative matrices: the variant of kernel_linear_tiles.c for GPUs with
 * VK_KHR_cooperative_matrix (tensor cores), for a linear whose x holds f16 values (the f16
 * policy's activations). Same template and work units as the main kernel, its own tiles:
 * output tiles of TILE_M x TILE_N (64 x 64), row tile major, workgroup g of the G the
 * dispatch has taking tiles g, g + G, ... (units per group a quarter of a tile's).
 *
 * Per tile, 128 invocations (4 subgroups of 32: the device feature "cooperativeMatrix" holds
 * only at subgroup size 32), the K axis in TILE_K (32) steps:
 *   1. the 64 x 32 x tile and the 64 x 32 W tile go to workgroup memory as f16, rows of
 *      STRIDE (40) halves (x along k, coalesced; a bf16 W eight elements per 16-byte load
 *      when K is a multiple of 8, else two per 32-bit load, or one each);
 *   2. barrier; subgroup s owns the 32 x 32 part (s / 2, s % 2) of the tile: 2 x 2
 *      accumulators of 16 x 16, each step 2 A and 2 B operands per 16 k (W's rows read as B's
 *      columns: a transposed load), 8 multiply-adds; barrier.
 * Then, per accumulator (i, j), every subgroup stores its own into a 16 x 16 scratch, a
 * barrier, and the whole workgroup runs the scratches' elements through the bias and the
 * epilogue (8 each, guarded at the edges); a barrier. No invocation needs its lane number
 * (gpu.lane_id has no SPIR-V lowering; subgroups need not be invocation ranges). The shape
 * is in the enum below (subgroups SG_M x SG_N, accumulators FR_M x FR_N each): on the H200
 * (2026-12-04) 128 x 128 tiles of 8 subgroups with 2 x 4 accumulators ran the 3B's 512-token
 * prefill linears about 10% slower than these 64 x 64 ones (fewer workgroups resident to
 * hide the synchronous staging: double-buffered staging is what they lack, issue 15).
 *
 * Arithmetic: the products of f16 operands are exact in the f32 accumulators, so against the
 * f32 kernel only the order of the sums differs, as long as the operands are exactly f16:
 * x is (the policy rounded it), a bf16 weight is when 2^-14 <= |w| <= 65504 (below, f16's
 * subnormals keep fewer bits: an error under 2^-24 |x| a product; above, inf: no real
 * checkpoint has such weights). Out-of-range rows, features and k read element 0 and use 0. */
#include "artifact/kernel_table.h"
#include "codegen/targets/vulkan/kernels.h"

enum {
  UNIT = VLMC_KERNEL_LINEAR_UNIT,
  SUBGROUP = 32,
  FRAG = 16,           /* a cooperative matrix is FRAG x FRAG */
  SG_M = 2, SG_N = 2,  /* subgroups over the tile's rows and features */
  FR_M = 2, FR_N = 2,  /* accumulators per subgroup */
  SUB_M = FR_M * FRAG, /* a subgroup's rows and features (32) */
  SUB_N = FR_N * FRAG,
  SUBGROUPS = SG_M * SG_N,
  THREADS = SUBGROUPS * SUBGROUP,
  TILE_M = SG_M * SUB_M,
  TILE_N = SG_N * SUB_N,
  TILE_K = 32,
  STRIDE = TILE_K + 8, /* halves between rows of a staged tile: 80 bytes, 16-byte aligned */
  SCRATCH_STRIDE = FRAG + 4,
  SCRATCH = FRAG * SCRATCH_STRIDE, /* floats of one subgroup's scratch */
  NUM_ACC = FR_M * FR_N,
  UNITS_PER_GROUP = TILE_M * TILE_N / UNIT / 4, /* G about 4 x the tiles, as kernel_linear_tiles.c */
  SHARED_BYTES = 2 * TILE_M * STRIDE * 2 + SUBGROUPS * SCRATCH * 4,
};

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *x, *w, *b;
  int64_t k, n;
  int m, tid, sg;
  int w_words;    /* the bf16 weight's input read as 32-bit words; -1: element loads */
  bool w_wide;    /* ... and as 16-byte words (K a multiple of 8) */
  int xs, ws, cs; /* workgroup memory: x [128][STRIDE], W [128][STRIDE] (f16), scratch (f32) */
} coop_t;

static int idx(vlmc_kernel_emit_t *e, int64_t c) { return vlmc_kernel_emit_index(e, c); }
static int add(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.addi", a, b); }
static int mul(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.muli", a, b); }
static int divu(vlmc_kernel_emit_t *e, int a, int64_t b) { return vlmc_kernel_emit_index_op(e, "arith.divui", a, idx(e, b)); }
static int remu(vlmc_kernel_emit_t *e, int a, int64_t b) { return vlmc_kernel_emit_index_op(e, "arith.remui", a, idx(e, b)); }
static int lt(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_vk_emit_cmp(e, "slt", a, b); }
/* a * c for a constant c, its constant emitted after a (mul(e, a, idx(e, c)) with an emitting a
 * would leave the order of the two to the C compiler) */
static int mulc(vlmc_kernel_emit_t *e, int a, int64_t c) { return mul(e, a, idx(e, c)); }

/* v (an f32 SSA) when ok, else 0, as f16. */
static int half_or_zero(vlmc_kernel_emit_t *e, int ok, int v) {
  int f = vlmc_vk_emit_select(e, ok, v, vlmc_kernel_emit_f32(e, 0), "f32"), h = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.truncf " VLMC_SSA " : f32 to f16", h, f);
  return h;
}

static int clamp0(vlmc_kernel_emit_t *e, int ok, int at) { return vlmc_vk_emit_select(e, ok, at, idx(e, 0), "index"); }

/* x[m0 .. m0 + TILE_M, k0 .. k0 + 32] into xs[row][k]; all loads first, then the stores. */
static void stage_x(const coop_t *C, int m0, int k0) {
  vlmc_kernel_emit_t *e = C->e;
  enum { ROUNDS = TILE_M * TILE_K / THREADS };
  int value[ROUNDS], slot[ROUNDS];
  for (int i = 0; i < ROUNDS; ++i) {
    int at = add(e, C->tid, idx(e, i * THREADS));
    int r = divu(e, at, TILE_K), c = remu(e, at, TILE_K);
    int row = add(e, m0, r), k = add(e, k0, c);
    int row_ok = lt(e, row, C->m), k_ok = lt(e, k, idx(e, C->k));
    int ok = vlmc_vk_emit_and(e, row_ok, k_ok);
    value[i] = half_or_zero(e, ok, vlmc_kernel_emit_load(e, C->x, clamp0(e, ok, add(e, mul(e, row, idx(e, C->k)), k))));
    slot[i] = add(e, mul(e, r, idx(e, STRIDE)), c);
  }
  for (int i = 0; i < ROUNDS; ++i) vlmc_vk_emit_shared_store(e, C->xs, value[i], slot[i]);
}

/* W[n0 .. n0 + TILE_N, k0 .. k0 + 32] into ws[feature][k]. */
static void stage_w(const coop_t *C, int n0, int k0) {
  vlmc_kernel_emit_t *e = C->e;
  int n = idx(e, C->n), kk = idx(e, C->k);
  /* elements per load: 8 (16 bytes of bf16, K a multiple of 8), 2 (a 32-bit word of bf16, K
   * even: both elements in one row) or 1 */
  const int per = C->w_wide ? 8 : C->w_words >= 0 ? 2 : 1;
  enum { MAX_ROUNDS = TILE_N * TILE_K / THREADS };
  const int rounds = TILE_N * TILE_K / per / THREADS;
  int value[MAX_ROUNDS][8], slot[MAX_ROUNDS];
  for (int i = 0; i < rounds; ++i) {
    int at = add(e, C->tid, idx(e, i * THREADS));
    int f = divu(e, at, TILE_K / per), c = mulc(e, remu(e, at, TILE_K / per), per);
    int feature = add(e, n0, f), k = add(e, k0, c);
    int feature_ok = lt(e, feature, n), k_ok = lt(e, k, kk);
    int ok = vlmc_vk_emit_and(e, feature_ok, k_ok), elements[8];
    int flat = clamp0(e, ok, add(e, mul(e, feature, kk), k));
    if (per == 8)
      vlmc_vk_emit_bf16x8(e, vlmc_vk_emit_load_words4(e, C->w_words, divu(e, flat, 8)), elements);
    else if (per == 2)
      vlmc_vk_emit_load_bf16x2(e, C->w_words, divu(e, flat, 2), elements);
    else
      elements[0] = vlmc_kernel_emit_load(e, C->w, flat);
    for (int h = 0; h < per; ++h) value[i][h] = half_or_zero(e, ok, elements[h]);
    slot[i] = add(e, mul(e, f, idx(e, STRIDE)), c);
  }
  for (int i = 0; i < rounds; ++i)
    for (int h = 0; h < per; ++h) vlmc_vk_emit_shared_store(e, C->ws, value[i][h], add(e, slot[i], idx(e, h)));
}

/* Where row first + r, column k of a staged tile is (its rows STRIDE halves apart). */
static int staged_at(vlmc_kernel_emit_t *e, int first, int64_t r, int64_t k) {
  int row = mulc(e, add(e, first, idx(e, r)), STRIDE);
  return add(e, row, idx(e, k));
}

/* The K loop: returns the loop's results SSA (accumulator (i, j) is %r#(FR_N i + j)). */
static int accumulate(const coop_t *C, int m0, int n0) {
  vlmc_kernel_emit_t *e = C->e;
  const char *acc_type = vlmc_vk_mma_acc_type();
  int zero = vlmc_vk_emit_mma_zero(e), results = vlmc_kernel_emit_fresh(e), k0 = vlmc_kernel_emit_fresh(e);
  int acc[NUM_ACC];
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  /* K >= 1: the loop runs at least once (pitfall 4 cannot bite) */
  int from = idx(e, 0), to = idx(e, C->k), step = idx(e, TILE_K);
  vlmc_strbuf_printf(&line, "%%v%d:%d = scf.for %%v%d = %%v%d to %%v%d step %%v%d iter_args(", results, NUM_ACC, k0,
                     from, to, step);
  for (int a = 0; a < NUM_ACC; ++a) {
    acc[a] = vlmc_kernel_emit_fresh(e);
    vlmc_strbuf_printf(&line, "%s%%v%d = %%v%d", a ? ", " : "", acc[a], zero);
  }
  vlmc_strbuf_puts(&line, ") -> (");
  for (int a = 0; a < NUM_ACC; ++a) vlmc_strbuf_printf(&line, "%s%s", a ? ", " : "", acc_type);
  vlmc_strbuf_puts(&line, ") {");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  stage_x(C, m0, k0);
  stage_w(C, n0, k0);
  vlmc_vk_emit_barrier(e);
  int row0 = mulc(e, divu(e, C->sg, SG_N), SUB_M), col0 = mulc(e, remu(e, C->sg, SG_N), SUB_N);
  for (int kk = 0; kk < TILE_K; kk += FRAG) {
    int a[FR_M], b[FR_N];
    for (int i = 0; i < FR_M; ++i)
      a[i] = vlmc_vk_emit_mma_load(e, C->xs, staged_at(e, row0, FRAG * i, kk), STRIDE, false);
    for (int j = 0; j < FR_N; ++j)
      b[j] = vlmc_vk_emit_mma_load(e, C->ws, staged_at(e, col0, FRAG * j, kk), STRIDE, true);
    for (int i = 0; i < FR_M; ++i)
      for (int j = 0; j < FR_N; ++j) acc[FR_N * i + j] = vlmc_vk_emit_mma(e, a[i], b[j], acc[FR_N * i + j]);
  }
  vlmc_vk_emit_barrier(e);
  vlmc_strbuf_clear(&line);
  vlmc_strbuf_puts(&line, "scf.yield ");
  for (int a = 0; a < NUM_ACC; ++a) vlmc_strbuf_printf(&line, "%s%%v%d", a ? ", " : "", acc[a]);
  vlmc_strbuf_puts(&line, " : ");
  for (int a = 0; a < NUM_ACC; ++a) vlmc_strbuf_printf(&line, "%s%s", a ? ", " : "", acc_type);
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
  vlmc_kernel_emit_line(e, "}");
  return results;
}

/* Accumulator (i, j) of every subgroup through the scratch to the output. */
static void store_fragment(const coop_t *C, int results, int i, int j, int m0, int n0) {
  vlmc_kernel_emit_t *e = C->e;
  vlmc_kernel_emit_line(e, "gpu.subgroup_mma_store_matrix %%v%d#%d, " VLMC_SSA "[" VLMC_SSA "] {leadDimension = %d : "
                        "index} : %s, memref<%dxf32, #spirv.storage_class<Workgroup>>",
                        results, FR_N * i + j, C->cs, mul(e, C->sg, idx(e, SCRATCH)), SCRATCH_STRIDE,
                        vlmc_vk_mma_acc_type(), SUBGROUPS * SCRATCH);
  vlmc_vk_emit_barrier(e);
  for (int q = 0; q < SUBGROUPS * FRAG * FRAG / THREADS; ++q) {
    int at = add(e, C->tid, idx(e, q * THREADS));
    int s = divu(e, at, FRAG * FRAG), rc = remu(e, at, FRAG * FRAG);
    int rr = divu(e, rc, FRAG), cc = remu(e, rc, FRAG);
    /* subgroup s's part of the tile starts at row sub_m0, feature sub_n0 */
    int sub_m0 = add(e, m0, mulc(e, divu(e, s, SG_N), SUB_M));
    int row = add(e, sub_m0, add(e, idx(e, FRAG * i), rr));
    int sub_n0 = add(e, n0, mulc(e, remu(e, s, SG_N), SUB_N));
    int col = add(e, sub_n0, add(e, idx(e, FRAG * j), cc));
    int row_ok = lt(e, row, C->m), col_ok = lt(e, col, idx(e, C->n));
    int ok = vlmc_vk_emit_and(e, row_ok, col_ok);
    vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", ok);
    int scratch = mulc(e, s, SCRATCH), in_scratch = add(e, mulc(e, rr, SCRATCH_STRIDE), cc);
    int v = vlmc_vk_emit_shared_load(e, C->cs, add(e, scratch, in_scratch));
    if (C->b) v = vlmc_kernel_emit_float_op(e, "arith.addf", v, vlmc_kernel_emit_load(e, C->b, col), 0);
    vlmc_kernel_emit_finish_element(e, v, add(e, mul(e, row, idx(e, C->n)), col));
    vlmc_kernel_emit_line(e, "}");
  }
  vlmc_vk_emit_barrier(e);
}


bool vlmc_vk_linear_coop_applies(const vlmc_op_t *op) {
  const vlmc_type_t *wt = &op->operands[1]->type;
  return op->kind == VLMC_OP_LINEAR && vlmc_vk_static_rows(&op->operands[0]->type) != 1 &&
         vlmc_vk_holds_f16(op->operands[0]) && wt->rank == 2 && vlmc_dim_is_static(wt->dims[0]) &&
         vlmc_dim_is_static(wt->dims[1]) && wt->dims[0].off >= 1 && wt->dims[1].off >= 1;
}

vlmc_status_t vlmc_vk_kernel_linear_coop(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  if (!vlmc_vk_linear_coop_applies(op)) {
    vlmc_kernel_emit_fail(e, "linear: the cooperative-matrix kernel takes an f16 x of any rows but one "
                          "static row and a static [N, K] weight");
    return NULL;
  }
  coop_t C = {.e = e, .x = op->operands[0], .w = op->operands[1], .b = op->num_operands > 2 ? op->operands[2] : NULL};
  const vlmc_type_t *xt = &C.x->type;
  C.n = C.w->type.dims[0].off;
  C.k = C.w->type.dims[1].off;
  e->template_name = "linear_tiles";
  e->cost = 2 * C.k * TILE_M * TILE_N;
  vlmc_vk_emit_set_workgroup(e, THREADS, 1, 1, UNITS_PER_GROUP);
  int w = vlmc_kernel_emit_source_input(e, C.w);
  C.w_words = C.k % 2 == 0 && w >= 0 && vlmc_kernel_emit_input_storage(e, (uint32_t)w) == VLMC_DTYPE_BF16 ? w : -1;
  C.w_wide = C.w_words >= 0 && C.k % 8 == 0 && C.w_words < 32;
  vlmc_vk_emit_allow_shared(e, SHARED_BYTES);
  C.xs = vlmc_vk_emit_shared(e, "f16", TILE_M * STRIDE);
  C.ws = vlmc_vk_emit_shared(e, "f16", TILE_N * STRIDE);
  C.cs = vlmc_vk_emit_shared(e, "f32", SUBGROUPS * SCRATCH);
  C.tid = vlmc_vk_emit_thread_id(e, 0);
  C.sg = vlmc_vk_emit_subgroup_id(e);
  C.m = vlmc_kernel_emit_dims_product(e, xt, 0, xt->rank - 1);
  int64_t col_tiles = (C.n + TILE_N - 1) / TILE_N;
  int tiles = mulc(e, divu(e, add(e, C.m, idx(e, TILE_M - 1)), TILE_M), col_tiles);
  int first, end;
  vlmc_vk_emit_group_units(e, &first, &end);
  int group = divu(e, first, UNITS_PER_GROUP);
  int work = vlmc_vk_emit_work(e);
  int groups = divu(e, add(e, work, idx(e, UNITS_PER_GROUP - 1)), UNITS_PER_GROUP);
  int t = vlmc_kernel_emit_for(e, group, tiles, groups);
  int m0 = mulc(e, divu(e, t, col_tiles), TILE_M);
  int n0 = mulc(e, remu(e, t, col_tiles), TILE_N);
  int results = accumulate(&C, m0, n0);
  for (int i = 0; i < FR_M; ++i)
    for (int j = 0; j < FR_N; ++j) store_fragment(&C, results, i, j, m0, n0);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
