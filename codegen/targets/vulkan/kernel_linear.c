/* linear with a single static row (a decode step's [1, K]): y[n] = sum_k x[k] W[n, k] (+ b[n]),
 * then the epilogue; W is a static [N, K]. Any other x goes to kernel_linear_tiles.c (the
 * "linear_tiles" template). Work units are blocks of VLMC_KERNEL_LINEAR_UNIT (4) output
 * features, as on the cpu; a workgroup of GEMV_THREADS (128) per unit, N / 4 workgroups (16
 * features per workgroup left a 2048-wide projection 128 workgroups, about one per SM of an
 * H200, too few loads in flight: 0.6 TB/s against the lm_head's 1.9).
 *
 * The GEMV is bound by the weight reads: every invocation takes k = tid, tid + 128, ... of
 * the 4 weight rows (coalesced), or, with a bf16 weight and K a multiple of 8, 16-byte words
 * of 8 elements (gemv_partials_wide), then 4 subgroup reductions, one partial per subgroup in
 * workgroup memory, a barrier, and invocations 0..3 add up their feature's partials. The
 * partials are double-buffered by unit parity, so one barrier per unit is enough (the next
 * unit's writes go to the other buffer; the one after waits on the next barrier, which every
 * reader of this one passes only after reading). A feature past N reads row N - 1 and is not
 * stored; no barrier or subgroup operation ever sits under divergent control flow.
 *
 * A quantized weight (a dequantize prologue of 4- or 8-bit words, docs/quantization.md) whose
 * rows and groups are whole 16-byte words (K and G multiples of 128 / bits) is read 16 bytes
 * (4 words, 32 4-bit values) per load (gemv_partials_packed) with the group's scale and bias
 * factored out of the load's sum: s * sum q x + b * sum x, the x sums shared by the unit's 4
 * features (the reference's sum in another order); any other goes element by element.
 *
 * matmul: x [..., M, K] @ y [..., K, N] with equal batch dims, one work unit per output row;
 * a workgroup of MM_THREADS (64) per row: the x row is staged in chunks of 64 in workgroup
 * memory, invocation t computes the columns t, t + 64, ... (no Qwen2.5-VL graph uses it). */
#include "artifact/kernel_table.h"
#include "codegen/targets/vulkan/kernels.h"

enum {
  UNIT = VLMC_KERNEL_LINEAR_UNIT,
  MM_THREADS = 64,
  GEMV_THREADS = 128, /* one unit (4 features) per workgroup */
  MAX_NORMED_STEPS = 4, /* words of a row per invocation, one-pass normed GEMV (K <= 4096) */
};

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *x, *w, *b;
  int64_t k, n;
  int tid;     /* invocation index in the workgroup */
  int n0;      /* first feature of the group */
  int n_end;   /* one past the group's last feature: min(units end * 4, N) */
  int64_t threads; /* invocations per workgroup */
  int w_input;     /* the GEMV's bf16 weight input, read 16 bytes at a time; -1: elementwise */
  const vlmc_op_t *dq; /* the weight's dequantize when its words are read 16 bytes at a time */
  int q_input;     /* its packed words' input (-1: none) */
  const vlmc_op_t *norm; /* x's norm prologue, summed in the dot's own pass (gemv_partials_normed) */
} linear_t;

/* ---- small emitters ---- */

static int idx(vlmc_kernel_emit_t *e, int64_t c) { return vlmc_kernel_emit_index(e, c); }
static int add(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.addi", a, b); }
static int mul(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.muli", a, b); }

/* Element `flat` of v when `ok`, else 0 (the index clamped to 0 so the load stays in bounds). */
static int load_or_zero(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int ok, int flat) {
  int at = vlmc_vk_emit_select(e, ok, flat, idx(e, 0), "index");
  int value = vlmc_kernel_emit_load(e, v, at), zero = vlmc_kernel_emit_f32(e, 0);
  return vlmc_vk_emit_select(e, ok, value, zero, "f32");
}

/* ---- the GEMV ---- */

/* Where the weight rows of the 4 features from n0 start, in elements of `row_len` (a feature
 * past N reads row N - 1; its result is not stored). */
static void weight_rows(const linear_t *L, int n0, int row_len, int *w_row) {
  vlmc_kernel_emit_t *e = L->e;
  int last = idx(e, L->n - 1);
  for (int j = 0; j < UNIT; ++j)
    w_row[j] = mul(e, vlmc_kernel_emit_index_op(e, "arith.minsi", add(e, n0, idx(e, j)), last), row_len);
}

/* This invocation's partial dot products of the 4 features from n0: k = tid, tid + threads,
 * ... one element at a time. */
static void gemv_partials(const linear_t *L, int n0, int *partial) {
  vlmc_kernel_emit_t *e = L->e;
  int zero = vlmc_kernel_emit_f32(e, 0);
  int w_row[UNIT], init[UNIT], inner[UNIT], next[UNIT], k;
  for (int j = 0; j < UNIT; ++j) init[j] = zero;
  weight_rows(L, n0, idx(e, L->k), w_row);
  int len = idx(e, L->k), step = idx(e, L->threads);
  int results = vlmc_vk_emit_open_f32_loop(e, L->tid, len, step, UNIT, init, &k, inner);
  int xv = vlmc_kernel_emit_load(e, L->x, k);
  for (int j = 0; j < UNIT; ++j)
    next[j] = vlmc_vk_emit_fma(e, xv, vlmc_kernel_emit_load(e, L->w, add(e, w_row[j], k)), inner[j]);
  vlmc_vk_emit_close_f32_loop(e, results, UNIT, next, partial);
  for (int j = 0; j < UNIT; ++j)
    partial[j] = vlmc_vk_emit_guard_empty(e, L->tid, idx(e, L->k), partial[j], zero, "f32");
}

/* The same with a bf16 weight read 16 bytes (8 elements) per load, for K a multiple of 8:
 * word4 i of row n holds k = 8 i .. 8 i + 7 (every row starts on a 16-byte boundary). Two
 * words a row per step (the second dropped past the row), their loads issued together: a
 * GEMV is bound by the loads in flight. */
static void gemv_partials_wide(const linear_t *L, int n0, int *partial) {
  vlmc_kernel_emit_t *e = L->e;
  int zero = vlmc_kernel_emit_f32(e, 0), words = idx(e, L->k / 8);
  int w_row[UNIT], init[UNIT], inner[UNIT], next[UNIT], k8;
  for (int j = 0; j < UNIT; ++j) init[j] = zero;
  weight_rows(L, n0, words, w_row);
  int results = vlmc_vk_emit_open_f32_loop(e, L->tid, words, idx(e, 2 * L->threads), UNIT, init, &k8, inner);
  int at[2], ok[2], xv[2][8], wv[2][UNIT][8];
  at[0] = k8;
  ok[1] = vlmc_vk_emit_cmp(e, "slt", add(e, k8, idx(e, L->threads)), words);
  at[1] = vlmc_vk_emit_select(e, ok[1], add(e, k8, idx(e, L->threads)), k8, "index");
  for (int h = 0; h < 2; ++h) {
    int base = mul(e, at[h], idx(e, 8));
    for (int c = 0; c < 8; ++c) xv[h][c] = vlmc_kernel_emit_load(e, L->x, add(e, base, idx(e, c)));
    for (int j = 0; j < UNIT; ++j)
      vlmc_vk_emit_bf16x8(e, vlmc_vk_emit_load_words4(e, L->w_input, add(e, w_row[j], at[h])), wv[h][j]);
  }
  for (int j = 0; j < UNIT; ++j) {
    int first = inner[j], both;
    for (int c = 0; c < 8; ++c) first = vlmc_vk_emit_fma(e, xv[0][c], wv[0][j][c], first);
    both = first;
    for (int c = 0; c < 8; ++c) both = vlmc_vk_emit_fma(e, xv[1][c], wv[1][j][c], both);
    next[j] = vlmc_vk_emit_select(e, ok[1], both, first, "f32"); /* the second word past the row: dropped */
  }
  vlmc_vk_emit_close_f32_loop(e, results, UNIT, next, partial);
  for (int j = 0; j < UNIT; ++j)
    partial[j] = vlmc_vk_emit_guard_empty(e, L->tid, words, partial[j], zero, "f32");
}

/* The bf16-word GEMV of x read through a norm prologue, in one pass: each invocation holds
 * all its S = ceil(K / 8 / threads) words of the 4 rows and the 8 S elements of x and of the
 * norm's weight, their loads issued together (the weight words first); the row statistic is
 * the workgroup's sum of those x^2; then x is normalized in registers and the dot product
 * taken. (The norm's statistic in a pass of its own, every x element loaded again after it,
 * made the 3B's gate GEMV 50 us a call on an H100 against 27 us unfused: each phase's latency
 * in series.) */
static void gemv_partials_normed(const linear_t *L, int n0, int *partial) {
  vlmc_kernel_emit_t *e = L->e;
  int64_t words_per_row = L->k / 8, steps = (words_per_row + L->threads - 1) / L->threads;
  int zero = vlmc_kernel_emit_f32(e, 0), words = idx(e, words_per_row);
  int w_row[UNIT], at[MAX_NORMED_STEPS], ok[MAX_NORMED_STEPS];
  int wv[MAX_NORMED_STEPS][UNIT][8], xv[MAX_NORMED_STEPS][8], gv[MAX_NORMED_STEPS][8];
  weight_rows(L, n0, words, w_row);
  for (int64_t s = 0; s < steps; ++s) {
    int word = add(e, L->tid, idx(e, s * L->threads));
    ok[s] = (s + 1) * L->threads > words_per_row ? vlmc_vk_emit_cmp(e, "slt", word, words) : -1;
    at[s] = ok[s] >= 0 ? vlmc_vk_emit_select(e, ok[s], word, idx(e, 0), "index") : word;
    for (int j = 0; j < UNIT; ++j)
      vlmc_vk_emit_bf16x8(e, vlmc_vk_emit_load_words4(e, L->w_input, add(e, w_row[j], at[s])), wv[s][j]);
  }
  int sum = zero;
  for (int64_t s = 0; s < steps; ++s) {
    int base = mul(e, at[s], idx(e, 8)), part = zero;
    for (int c = 0; c < 8; ++c) {
      int col = add(e, base, idx(e, c));
      xv[s][c] = vlmc_kernel_emit_load(e, L->norm->operands[0], col);
      gv[s][c] = L->norm->num_operands > 1 ? vlmc_kernel_emit_load(e, L->norm->operands[1], col) : -1;
      part = vlmc_kernel_emit_float_op(e, "arith.addf", part,
                                       vlmc_kernel_emit_float_op(e, "arith.mulf", xv[s][c], xv[s][c], 0), 0);
    }
    if (ok[s] >= 0) part = vlmc_vk_emit_select(e, ok[s], part, zero, "f32"); /* a word past the row */
    sum = vlmc_kernel_emit_float_op(e, "arith.addf", sum, part, 0);
  }
  int a = vlmc_vk_emit_norm_scale(e, L->norm, sum, L->threads);
  for (int j = 0; j < UNIT; ++j) partial[j] = zero;
  for (int64_t s = 0; s < steps; ++s) {
    int acc[UNIT];
    for (int j = 0; j < UNIT; ++j) acc[j] = zero;
    for (int c = 0; c < 8; ++c) {
      int x = vlmc_kernel_emit_norm_element(e, L->x, xv[s][c], gv[s][c], a);
      for (int j = 0; j < UNIT; ++j) acc[j] = vlmc_vk_emit_fma(e, x, wv[s][j][c], acc[j]);
    }
    for (int j = 0; j < UNIT; ++j) {
      if (ok[s] >= 0) acc[j] = vlmc_vk_emit_select(e, ok[s], acc[j], zero, "f32");
      partial[j] = vlmc_kernel_emit_float_op(e, "arith.addf", partial[j], acc[j], 0);
    }
  }
}

/* Whether the one-pass normed GEMV takes this linear: a norm prologue on x, the bf16 weight
 * read in words, at most MAX_NORMED_STEPS words of a row per invocation. */
static bool normed_fits(const linear_t *L, const vlmc_op_t *norm) {
  return norm && L->w_input >= 0 && (L->k / 8 + L->threads - 1) / L->threads <= MAX_NORMED_STEPS;
}

/* The same for a quantized weight: 16-byte words of V = 4 * 32 / bits values, one group per
 * load (G a multiple of V), s * sum q x + b * sum x per load and feature. */
static void gemv_partials_packed(const linear_t *L, int n0, int *partial) {
  vlmc_kernel_emit_t *e = L->e;
  vlmc_quant_layout_t layout = vlmc_dequantize_layout(L->dq);
  int64_t bits = layout.bits, group = layout.group, per_word = layout.per_word, v = 4 * per_word;
  int64_t groups = layout.groups;
  int zero = vlmc_kernel_emit_f32(e, 0), loads = idx(e, L->k / v);
  int w_row[UNIT], g_row[UNIT], init[UNIT], inner[UNIT], next[UNIT], t;
  for (int j = 0; j < UNIT; ++j) init[j] = zero;
  weight_rows(L, n0, loads, w_row);
  weight_rows(L, n0, idx(e, groups), g_row);
  int results = vlmc_vk_emit_open_f32_loop(e, L->tid, loads, idx(e, L->threads), UNIT, init, &t, inner);
  int base = mul(e, t, idx(e, v));
  int xv[32], sx = zero;
  for (int64_t c = 0; c < v; ++c) {
    xv[c] = vlmc_kernel_emit_load(e, L->x, add(e, base, idx(e, c)));
    sx = vlmc_kernel_emit_float_op(e, "arith.addf", sx, xv[c], 0);
  }
  int g = vlmc_kernel_emit_index_op(e, "arith.divui", base, idx(e, group));
  int words[UNIT];
  for (int j = 0; j < UNIT; ++j) words[j] = vlmc_vk_emit_load_words4(e, L->q_input, add(e, w_row[j], t));
  for (int j = 0; j < UNIT; ++j) {
    int p = zero;
    for (int w = 0; w < 4; ++w) {
      int word = vlmc_kernel_emit_fresh(e);
      vlmc_kernel_emit_line(e, VLMC_SSA " = vector.extract " VLMC_SSA "[%d] : i32 from vector<4xi32>", word,
                            words[j], w);
      for (int64_t s = 0; s < per_word; ++s) {
        int sh = vlmc_kernel_emit_fresh(e), sv = vlmc_kernel_emit_fresh(e), mk = vlmc_kernel_emit_fresh(e);
        int q = vlmc_kernel_emit_fresh(e), qf = vlmc_kernel_emit_fresh(e);
        vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant %lld : i32", sh, (long long)(s * bits));
        vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant %d : i32", mk, (1 << bits) - 1);
        vlmc_kernel_emit_line(e, VLMC_SSA " = arith.shrui " VLMC_SSA ", " VLMC_SSA " : i32", sv, word, sh);
        vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i32", q, sv, mk);
        vlmc_kernel_emit_line(e, VLMC_SSA " = arith.sitofp " VLMC_SSA " : i32 to f32", qf, q);
        p = vlmc_vk_emit_fma(e, qf, xv[w * per_word + s], p);
      }
    }
    int at = add(e, g_row[j], g);
    int scale = vlmc_kernel_emit_load(e, L->dq->operands[1], at);
    int bias = vlmc_kernel_emit_load(e, L->dq->operands[2], at);
    next[j] = vlmc_vk_emit_fma(e, scale, p, vlmc_vk_emit_fma(e, bias, sx, inner[j]));
  }
  vlmc_vk_emit_close_f32_loop(e, results, UNIT, next, partial);
  for (int j = 0; j < UNIT; ++j)
    partial[j] = vlmc_vk_emit_guard_empty(e, L->tid, loads, partial[j], zero, "f32");
}

/* Whether the GEMV reads this quantized weight 16 bytes at a time (see the file comment). */
static bool packed_fits(const linear_t *L, const vlmc_op_t *dq, int packed) {
  if (!dq || packed < 0 || packed >= 32) return false;
  vlmc_quant_layout_t q = vlmc_dequantize_layout(dq);
  int64_t v = 4 * q.per_word;
  return L->k % v == 0 && q.group % v == 0 && v <= 32;
}

/* Per unit (4 features) of [first, end): the partials, 4 subgroup reductions, one partial per
 * subgroup in workgroup memory, a barrier, and invocations 0..3 add up their feature's. */
static void emit_gemv(const linear_t *L, int first, int end) {
  vlmc_kernel_emit_t *e = L->e;
  /* [parity][feature][subgroup]: a slot per invocation covers subgroups of any size */
  int parts = vlmc_vk_emit_shared(e, "f32", 2 * UNIT * L->threads);
  int sg = vlmc_vk_emit_subgroup_id(e), nsg = vlmc_vk_emit_num_subgroups(e);
  int zero = vlmc_kernel_emit_f32(e, 0);
  int u = vlmc_kernel_emit_for(e, first, end, idx(e, 1));
  int n0 = mul(e, u, idx(e, UNIT));
  int partial[UNIT];
  if (L->norm) gemv_partials_normed(L, n0, partial);
  else if (L->q_input >= 0) gemv_partials_packed(L, n0, partial);
  else if (L->w_input >= 0) gemv_partials_wide(L, n0, partial);
  else gemv_partials(L, n0, partial);
  int parity = vlmc_kernel_emit_index_op(e, "arith.remui", u, idx(e, 2));
  int buffer = mul(e, parity, idx(e, UNIT * L->threads));
  int elect = vlmc_kernel_emit_fresh(e);
  int sums[UNIT];
  for (int j = 0; j < UNIT; ++j) sums[j] = vlmc_vk_emit_subgroup_reduce(e, "add", partial[j], "f32");
  /* one invocation per subgroup writes its partials (gpu.lane_id has no SPIR-V lowering) */
  vlmc_kernel_emit_line(e, VLMC_SSA " = spirv.GroupNonUniformElect <Subgroup> : i1", elect);
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", elect);
  for (int j = 0; j < UNIT; ++j)
    vlmc_vk_emit_shared_store(e, parts, sums[j], add(e, buffer, add(e, idx(e, j * L->threads), sg)));
  vlmc_kernel_emit_line(e, "}");
  vlmc_vk_emit_barrier(e);
  /* invocation j < 4 finishes feature n0 + j */
  int feature = add(e, n0, L->tid);
  int finisher = vlmc_vk_emit_cmp(e, "slt", L->tid, idx(e, UNIT));
  int in_range = vlmc_vk_emit_cmp(e, "slt", feature, L->n_end);
  int mine = vlmc_vk_emit_and(e, finisher, in_range);
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", mine);
  int from = add(e, buffer, mul(e, L->tid, idx(e, L->threads)));
  int s = vlmc_kernel_emit_fresh(e), t = vlmc_kernel_emit_fresh(e), a = vlmc_kernel_emit_fresh(e);
  int start = idx(e, 0), one = idx(e, 1);
  vlmc_kernel_emit_line(e, VLMC_SSA " = scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA
                        " iter_args(" VLMC_SSA " = " VLMC_SSA ") -> (f32) {",
                        s, t, start, nsg, one, a, zero); /* nsg >= 1 */
  int p = vlmc_vk_emit_shared_load(e, parts, add(e, from, t));
  vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA " : f32", vlmc_kernel_emit_float_op(e, "arith.addf", a, p, 0));
  vlmc_kernel_emit_line(e, "}");
  int acc = s;
  if (L->b) acc = vlmc_kernel_emit_float_op(e, "arith.addf", acc, vlmc_kernel_emit_load(e, L->b, feature), 0);
  vlmc_kernel_emit_finish_element(e, acc, feature);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
}


vlmc_status_t vlmc_vk_kernel_linear(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  linear_t L = {e, op->operands[0], op->operands[1], op->num_operands > 2 ? op->operands[2] : NULL,
                0, 0, -1, -1, -1, GEMV_THREADS, -1, NULL, -1, NULL};
  const vlmc_type_t *wt = &L.w->type, *xt = &L.x->type;
  if (vlmc_vk_static_rows(xt) != 1) return vlmc_vk_kernel_linear_tiles(e); /* prefill, vision */
  if (wt->rank != 2 || !vlmc_dim_is_static(wt->dims[0]) || !vlmc_dim_is_static(wt->dims[1]) ||
      wt->dims[0].off < 1) {
    vlmc_kernel_emit_fail(e, "linear: the vulkan kernel needs a static [N, K] weight with N >= 1");
    return NULL;
  }
  L.n = wt->dims[0].off;
  L.k = wt->dims[1].off;
  e->template_name = "linear";
  e->cost = 2 * L.k * UNIT * 64;
  int w = vlmc_kernel_emit_source_input(e, L.w);
  if (L.k % 8 == 0 && w >= 0 && w < 32 && vlmc_kernel_emit_input_storage(e, (uint32_t)w) == VLMC_DTYPE_BF16)
    L.w_input = w;
  const vlmc_op_t *dq = vlmc_dispatch_dequantize_source(e->region, e->anchor_index, L.w);
  int packed = dq ? vlmc_kernel_emit_source_input(e, dq->operands[0]) : -1;
  if (packed_fits(&L, dq, packed)) {
    L.dq = dq;
    L.q_input = packed;
  }
  vlmc_vk_emit_set_workgroup(e, (int)L.threads, 1, 1, 1);
  L.tid = vlmc_vk_emit_thread_id(e, 0);
  int first, end;
  vlmc_vk_emit_group_units(e, &first, &end);
  L.n0 = mul(e, first, idx(e, UNIT));
  int units_end = mul(e, end, idx(e, UNIT));
  L.n_end = vlmc_kernel_emit_index_op(e, "arith.minsi", units_end, idx(e, L.n));
  /* fused: x normalized as read, in the dot's own pass where it fits, else after a pass of
   * the statistic's own */
  const vlmc_op_t *norm = vlmc_kernel_emit_norm_prologue(e, L.x);
  if (normed_fits(&L, norm)) L.norm = norm;
  else if (norm) vlmc_vk_emit_norm_prologue_scale(e, norm, L.tid, L.threads);
  emit_gemv(&L, first, end);
  return NULL;
}

/* ---- matmul ---- */

vlmc_status_t vlmc_vk_kernel_matmul(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  const vlmc_value_t *x = op->operands[0], *y = op->operands[1];
  const vlmc_type_t *xt = &x->type, *yt = &y->type;
  e->template_name = "matmul";
  e->cost = 2 * 64 * 64;
  vlmc_vk_emit_set_workgroup(e, MM_THREADS, 1, 1, 1);
  int kk = vlmc_kernel_emit_dim(e, xt->dims[xt->rank - 1]);
  int nn = vlmc_kernel_emit_dim(e, yt->dims[yt->rank - 1]);
  int mm = vlmc_kernel_emit_dim(e, xt->dims[xt->rank - 2]);
  int tid = vlmc_vk_emit_thread_id(e, 0);
  int xs = vlmc_vk_emit_shared(e, "f32", MM_THREADS);
  int zero = vlmc_kernel_emit_f32(e, 0), step = idx(e, MM_THREADS);
  int first, end;
  vlmc_vk_emit_group_units(e, &first, &end);
  int row = vlmc_kernel_emit_for(e, first, end, idx(e, 1));
  /* row = batch * M + m */
  int batch = vlmc_kernel_emit_index_op(e, "arith.divui", row, mm);
  int x_base = mul(e, row, kk);
  int y_base = mul(e, mul(e, batch, kk), nn);
  int n0 = vlmc_kernel_emit_for(e, idx(e, 0), nn, step);
  int n = add(e, n0, tid);
  int n_ok = vlmc_vk_emit_cmp(e, "slt", n, nn);
  int n_at = vlmc_vk_emit_select(e, n_ok, n, idx(e, 0), "index");
  int k0, inner;
  int sum = vlmc_vk_emit_open_f32_loop(e, idx(e, 0), kk, step, 1, &zero, &k0, &inner);
  int k = add(e, k0, tid);
  int k_ok = vlmc_vk_emit_cmp(e, "slt", k, kk), x_at = add(e, x_base, k);
  vlmc_vk_emit_shared_store(e, xs, load_or_zero(e, x, k_ok, x_at), tid);
  vlmc_vk_emit_barrier(e);
  int j, acc;
  int start = idx(e, 0), one = idx(e, 1);
  int part = vlmc_vk_emit_open_f32_loop(e, start, step, one, 1, &inner, &j, &acc);
  int kj = add(e, k0, j);
  int kj_ok = vlmc_vk_emit_and(e, vlmc_vk_emit_cmp(e, "slt", kj, kk), n_ok);
  int y_at = add(e, y_base, add(e, mul(e, kj, nn), n_at));
  int yv = load_or_zero(e, y, kj_ok, y_at);
  int next = vlmc_vk_emit_fma(e, vlmc_vk_emit_shared_load(e, xs, j), yv, acc);
  int carried, total;
  vlmc_vk_emit_close_f32_loop(e, part, 1, &next, &carried);
  vlmc_vk_emit_barrier(e);
  vlmc_vk_emit_close_f32_loop(e, sum, 1, &carried, &total);
  total = vlmc_vk_emit_guard_empty(e, idx(e, 0), kk, total, zero, "f32");
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", n_ok);
  vlmc_kernel_emit_finish_element(e, total, add(e, mul(e, row, nn), n));
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
