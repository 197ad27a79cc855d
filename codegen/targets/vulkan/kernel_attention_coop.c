/* attention on cooperative matrices: the "gpu" variant of kernel_attention.c for GPUs with
 * VK_KHR_cooperative_matrix, when q, k and v hold f16 values (the f16 policy's activations)
 * and the head dims are multiples of 16 up to 128: the vision tower's full and window
 * attention (D = 80) and the LLM's prefill (D = 128, G = 8). Same template, work units
 * ((query row, kv head) pairs) and block order as the main kernel; flash attention in the
 * FlashAttention-2 layout.
 *
 * A block is BM = 64 "virtual rows" on one kv head: rows i0 .. i0 + 64 / G - 1, each with its
 * G query heads (virtual row r = (row - i0) * G + head), which share every key. 128
 * invocations, 4 subgroups of 32 (the feature "cooperativeMatrix" holds at subgroup size 32),
 * subgroup s owning virtual rows 16 s .. 16 s + 15:
 *   0. Q [64, D] goes to workgroup memory as f16, each subgroup loads its D / 16 A operands
 *      into registers once; barrier (the K and V tiles reuse the memory);
 *   then two passes over the tiles of BN = 32 keys covering the union of the block rows' key
 *   ranges, because MLIR 19 lowers no elementwise product of two cooperative matrices (the
 *   one-pass kernel's per-row rescaling of the output accumulators), only matrix x scalar:
 *   pass 1, the rows' exact maxima m:
 *   1. K [32, D] to workgroup memory as f16; barrier;
 *   2. each subgroup: S = Q K^T, its 16 x 32 scores as 2 accumulators (K's rows read as B's
 *      columns), stored to workgroup memory (f32); barrier;
 *   3. invocations t and t + 64 own virtual row t, 16 keys each: m = max(m, their scores
 *      scaled, -inf outside the row's own key range: its segment, the causal cut); the two
 *      halves' maxima combined after the pass;
 *   pass 2, with m fixed (no rescaling):
 *   1. K [32, D] and V [32, Dv] to workgroup memory; barrier; 2. S as above; barrier;
 *   3. the same two: p = exp(s - m) for their 16 keys each, written as two f16 parts, hi = p
 *      cut to f16's 11 bits (0 for p < 2^-14, f16's subnormals) and lo = f16((p - hi) 2^11):
 *      the pair holds p to about 2^-21 relative (absolutely to 2^-25 below 2^-14), so P V
 *      loses nothing an f32 kernel keeps. hi is cut in integer arithmetic (NVIDIA's compiler
 *      folds f32(f16(p)) to p, so p - hi was 0: 1.5e-4 of the output's range lost on the
 *      H200), and lo is scaled because p - hi is nearly always an f16 subnormal, which a
 *      device may flush; l += hi + lo 2^-11 (the halves' l combined at the end); barrier;
 *   4. each subgroup: its Dv / 16 pairs of output accumulators, O_hi += P_hi V and
 *      O_lo += P_lo V; barrier.
 * At the end every subgroup stores its accumulators, 16 columns at a time, through workgroup
 * memory, and the workgroup writes (O_hi + O_lo 2^-11) / l through the epilogue.
 *
 * Arithmetic: q . k products of f16 values are exact in f32, as in the cooperative-matrix
 * linear; the differences from the f32 kernel are the order of the sums and p's hi + lo split
 * (relative error about 2^-22). A row that sees no key gets 0 / 0 = NaN, as on the cpu. */
#include <math.h>

#include "codegen/targets/vulkan/kernels.h"

enum {
  THREADS = 128,
  FRAG = 16,
  BM = 64,          /* virtual rows per block */
  BN = 32,          /* keys per tile */
  MAX_DIM = 128,
  PAD = 8,          /* halves after each staged f16 row (16 bytes: keeps rows aligned) */
  S_STRIDE = BN + 4,
  P_STRIDE = BN + PAD,
  MAX_SHARED = 49152,
  LO_SHIFT = 11,    /* lo = f16((p - hi) * 2^LO_SHIFT) */
  HALF = BN / 2,    /* keys of a tile one invocation weighs: two invocations a row */
};

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *q, *k, *v, *cu;
  int64_t heads, kv_heads, group, d, dv, rows;
  double scale;
  bool causal;
  int tid, sg;
  int kvs;         /* f16: Q [64][D + PAD], then K [32][D + PAD] and V [32][Dv + PAD] */
  int ss;          /* f32 [64][S_STRIDE]: scores; at the end, output columns */
  int ph, pl;      /* f16 [64][P_STRIDE]: p's halves */
  int ls;          /* f32 [128]: the two invocations' parts of a row's m, then of its l */
  int s_rows, last; /* S and S - 1 */
} fa_t;

static int idx(vlmc_kernel_emit_t *e, int64_t c) { return vlmc_kernel_emit_index(e, c); }
static int add(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.addi", a, b); }
static int mul(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.muli", a, b); }
static int divu(vlmc_kernel_emit_t *e, int a, int64_t c) { return vlmc_kernel_emit_index_op(e, "arith.divui", a, idx(e, c)); }
static int remu(vlmc_kernel_emit_t *e, int a, int64_t c) { return vlmc_kernel_emit_index_op(e, "arith.remui", a, idx(e, c)); }
static int lt(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_vk_emit_cmp(e, "slt", a, b); }
static int fop(vlmc_kernel_emit_t *e, const char *op, int a, int b) { return vlmc_kernel_emit_float_op(e, op, a, b, 0); }

/* Index row * stride + col of a tile (stride and col constants), emitted in that order:
 * the product first. */
static int tile_at(vlmc_kernel_emit_t *e, int row, int64_t stride, int64_t col) {
  int row_at = mul(e, row, idx(e, stride));
  return add(e, row_at, idx(e, col));
}

static int to_f16(vlmc_kernel_emit_t *e, int f) {
  int h = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.truncf " VLMC_SSA " : f32 to f16", h, f);
  return h;
}

static int to_f32(vlmc_kernel_emit_t *e, int h) {
  int f = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.extf " VLMC_SSA " : f16 to f32", f, h);
  return f;
}

/* The query row of virtual row vr (an index SSA) of the block at i0, clamped into S. */
static int virtual_row(const fa_t *F, int i0, int vr) {
  vlmc_kernel_emit_t *e = F->e;
  return vlmc_kernel_emit_index_op(e, "arith.minsi", add(e, i0, divu(e, vr, F->group)), F->last);
}

/* Flat index of q's (or the output's, dim = Dv) head row for virtual row vr on kv head kvh. */
static int head_row(const fa_t *F, int row, int vr, int kvh) {
  vlmc_kernel_emit_t *e = F->e;
  int row_heads = mul(e, row, idx(e, F->heads)), group_heads = mul(e, kvh, idx(e, F->group));
  int first_head = add(e, row_heads, group_heads);
  return add(e, first_head, remu(e, vr, F->group));
}

/* `count` f16 values into kvs at `base` + r * stride + c, from value(r, c) (loaded first,
 * all of them, then stored). */
typedef int (*stage_value_fn)(const fa_t *F, int r, int c, const int *ctx);

static void stage(const fa_t *F, int64_t rows, int64_t cols, int64_t base, int64_t stride,
                  stage_value_fn value, const int *ctx) {
  vlmc_kernel_emit_t *e = F->e;
  enum { MAX_ROUNDS = BM * MAX_DIM / THREADS };
  int64_t rounds = rows * cols / THREADS; /* rows * cols is a multiple of 128 */
  int values[MAX_ROUNDS], slots[MAX_ROUNDS];
  for (int64_t i = 0; i < rounds; ++i) {
    int at = add(e, F->tid, idx(e, i * THREADS));
    int r = divu(e, at, cols), c = remu(e, at, cols);
    values[i] = to_f16(e, value(F, r, c, ctx));
    int in_tile = add(e, mul(e, r, idx(e, stride)), c);
    slots[i] = add(e, in_tile, idx(e, base));
  }
  for (int64_t i = 0; i < rounds; ++i) vlmc_vk_emit_shared_store(e, F->kvs, values[i], slots[i]);
}

/* ctx: i0, kvh. */
static int q_value(const fa_t *F, int vr, int c, const int *ctx) {
  vlmc_kernel_emit_t *e = F->e;
  int row = virtual_row(F, ctx[0], vr);
  int q_row = head_row(F, row, vr, ctx[1]);
  return vlmc_kernel_emit_load(e, F->q, add(e, mul(e, q_row, idx(e, F->d)), c));
}

/* ctx: k0, end, kvh; keys at or past end read 0. */
static int kv_value(const fa_t *F, const vlmc_value_t *src, int64_t dim, int r, int c, const int *ctx) {
  vlmc_kernel_emit_t *e = F->e;
  int key = add(e, ctx[0], r), ok = lt(e, key, ctx[1]);
  int kv_row = add(e, mul(e, key, idx(e, F->kv_heads)), ctx[2]);
  int at = add(e, mul(e, kv_row, idx(e, dim)), c);
  int x = vlmc_kernel_emit_load(e, src, vlmc_vk_emit_select(e, ok, at, idx(e, 0), "index"));
  return vlmc_vk_emit_select(e, ok, x, vlmc_kernel_emit_f32(e, 0), "f32");
}

static int k_value(const fa_t *F, int r, int c, const int *ctx) { return kv_value(F, F->k, F->d, r, c, ctx); }
static int v_value(const fa_t *F, int r, int c, const int *ctx) { return kv_value(F, F->v, F->dv, r, c, ctx); }

static int64_t k_stride(const fa_t *F) { return F->d + PAD; }
static int64_t v_stride(const fa_t *F) { return F->dv + PAD; }
static int64_t v_base(const fa_t *F) { return BN * k_stride(F); }

/* Step 2: this subgroup's 16 x 32 scores into ss. */
static void emit_scores(const fa_t *F, const int *qf) {
  vlmc_kernel_emit_t *e = F->e;
  int row0 = mul(e, F->sg, idx(e, FRAG));
  for (int64_t j = 0; j < BN / FRAG; ++j) {
    int acc = vlmc_vk_emit_mma_zero(e);
    for (int64_t kk = 0; kk < F->d / FRAG; ++kk) {
      int b = vlmc_vk_emit_mma_load_as(e, F->kvs, idx(e, j * FRAG * k_stride(F) + kk * FRAG), k_stride(F),
                                       "BOp", true);
      acc = vlmc_vk_emit_mma(e, qf[kk], b, acc);
    }
    vlmc_vk_emit_mma_store(e, acc, F->ss, tile_at(e, row0, S_STRIDE, j * FRAG), S_STRIDE);
  }
}

/* The first of this invocation's HALF keys of a tile: HALF (tid / 64). */
static int half_start(const fa_t *F) {
  vlmc_kernel_emit_t *e = F->e;
  int half = divu(e, F->tid, BM);
  return mul(e, half, idx(e, HALF));
}

/* This invocation's half of its virtual row's (tid mod 64) scores of the tile at k0 (keys
 * HALF (tid / 64) .. + HALF: two invocations a row), scaled, -inf outside the row's key
 * range [rs, re). */
static void row_scores(const fa_t *F, int k0, int rs, int re, int *s) {
  vlmc_kernel_emit_t *e = F->e;
  int vr = remu(e, F->tid, BM), c0 = half_start(F);
  for (int64_t c = 0; c < HALF; ++c) {
    int col = add(e, c0, idx(e, c)), key = add(e, k0, col);
    int from_start = vlmc_vk_emit_cmp(e, "sge", key, rs), before_end = lt(e, key, re);
    int ok = vlmc_vk_emit_and(e, from_start, before_end);
    int raw = vlmc_vk_emit_shared_load(e, F->ss, add(e, mul(e, vr, idx(e, S_STRIDE)), col));
    int scaled = fop(e, "arith.mulf", raw, vlmc_kernel_emit_f32(e, F->scale));
    s[c] = vlmc_vk_emit_select(e, ok, scaled, vlmc_kernel_emit_f32(e, -INFINITY), "f32");
  }
}

/* Pass 1, step 3: the running max m over this invocation's half of the tile's scores. */
static int emit_row_max(const fa_t *F, int k0, int rs, int re, int m) {
  int s[HALF];
  row_scores(F, k0, rs, re, s);
  for (int64_t c = 0; c < HALF; ++c) m = fop(F->e, "arith.maximumf", m, s[c]);
  return m;
}

/* The row's value from the two invocations' parts (op "arith.maximumf" or "arith.addf")
 * through ls; every invocation gets it. Barriers around. */
static int combine_halves(const fa_t *F, const char *op, int part) {
  vlmc_kernel_emit_t *e = F->e;
  int vr = remu(e, F->tid, BM);
  vlmc_vk_emit_barrier(e);
  vlmc_vk_emit_shared_store(e, F->ls, part, F->tid);
  vlmc_vk_emit_barrier(e);
  int first = vlmc_vk_emit_shared_load(e, F->ls, vr);
  int second = vlmc_vk_emit_shared_load(e, F->ls, add(e, vr, idx(e, BM)));
  return fop(e, op, first, second);
}

/* p's high part: p with its low 13 mantissa bits cleared (f16's 11 bits, exactly an f16
 * for p >= 2^-14), 0 below 2^-14 (f16 subnormals, which a device may flush). In integer
 * arithmetic: NVIDIA's compiler folds f32(f16(p)) to p, which made lo 0. */
static int high_part(vlmc_kernel_emit_t *e, int p) {
  int bits = vlmc_kernel_emit_fresh(e), mask = vlmc_kernel_emit_fresh(e), cut = vlmc_kernel_emit_fresh(e);
  int high = vlmc_kernel_emit_fresh(e), is_normal = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.bitcast " VLMC_SSA " : f32 to i32", bits, p);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant -8192 : i32", mask); /* 0xFFFFE000 */
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i32", cut, bits, mask);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.bitcast " VLMC_SSA " : i32 to f32", high, cut);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpf oge, " VLMC_SSA ", " VLMC_SSA " : f32", is_normal, p,
                        vlmc_kernel_emit_f32(e, ldexp(1.0, -14)));
  return vlmc_vk_emit_select(e, is_normal, high, vlmc_kernel_emit_f32(e, 0), "f32");
}

/* Pass 2, step 3: p = exp(s - m) of this invocation's half row as f16 parts hi and lo;
 * returns l plus what they hold. */
static int emit_weights(const fa_t *F, int k0, int rs, int re, int m, int l) {
  vlmc_kernel_emit_t *e = F->e;
  int vr = remu(e, F->tid, BM), c0 = half_start(F), s[HALF], hi[HALF], lo[HALF];
  int up = vlmc_kernel_emit_f32(e, ldexp(1.0, LO_SHIFT)), down = vlmc_kernel_emit_f32(e, ldexp(1.0, -LO_SHIFT));
  row_scores(F, k0, rs, re, s);
  for (int64_t c = 0; c < HALF; ++c) {
    int p = vlmc_vk_emit_softmax_weight(e, s[c], m), high = high_part(e, p);
    hi[c] = to_f16(e, high);
    lo[c] = to_f16(e, fop(e, "arith.mulf", fop(e, "arith.subf", p, high), up));
    l = fop(e, "arith.addf", l, vlmc_vk_emit_fma(e, to_f32(e, lo[c]), down, high));
  }
  for (int64_t c = 0; c < HALF; ++c) {
    int row_at = add(e, mul(e, vr, idx(e, P_STRIDE)), c0);
    int at = add(e, row_at, idx(e, c));
    vlmc_vk_emit_shared_store(e, F->ph, hi[c], at);
    vlmc_vk_emit_shared_store(e, F->pl, lo[c], at);
  }
  return l;
}

/* Pass 2, step 4: this subgroup's accumulators advanced by P V (in place): o[j] += P_hi V,
 * o[n + j] += P_lo V (n = Dv / 16). */
static void emit_values(const fa_t *F, int *o) {
  vlmc_kernel_emit_t *e = F->e;
  int row0 = mul(e, F->sg, idx(e, FRAG));
  int64_t n = F->dv / FRAG;
  for (int64_t kk = 0; kk < BN / FRAG; ++kk) {
    int at = tile_at(e, row0, P_STRIDE, kk * FRAG);
    int a_hi = vlmc_vk_emit_mma_load_as(e, F->ph, at, P_STRIDE, "AOp", false);
    int a_lo = vlmc_vk_emit_mma_load_as(e, F->pl, at, P_STRIDE, "AOp", false);
    for (int64_t j = 0; j < n; ++j) {
      int b = vlmc_vk_emit_mma_load_as(e, F->kvs, idx(e, v_base(F) + kk * FRAG * v_stride(F) + j * FRAG),
                                       v_stride(F), "BOp", false);
      o[j] = vlmc_vk_emit_mma(e, a_hi, b, o[j]);
      o[n + j] = vlmc_vk_emit_mma(e, a_lo, b, o[n + j]);
    }
  }
}

/* Accumulators a subgroup carries: O_hi and O_lo, 16 columns each. */
static int64_t num_acc(const fa_t *F) { return 2 * (F->dv / FRAG); }

/* Pass 2's loop: "%r:n = scf.for %k0 = from to to step BN iter_args(l, o...) -> (f32,
 * acc...) {". */
static int open_tiles(const fa_t *F, int from, int to, const int *init, int *k0, int *inner) {
  vlmc_kernel_emit_t *e = F->e;
  int64_t n = 1 + num_acc(F);
  int results = vlmc_kernel_emit_fresh(e);
  *k0 = vlmc_kernel_emit_fresh(e);
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_printf(&line, "%%v%d:%lld = scf.for %%v%d = %%v%d to %%v%d step %%v%d iter_args(", results,
                     (long long)n, *k0, from, to, idx(e, BN));
  for (int64_t i = 0; i < n; ++i) {
    inner[i] = vlmc_kernel_emit_fresh(e);
    vlmc_strbuf_printf(&line, "%s%%v%d = %%v%d", i ? ", " : "", inner[i], init[i]);
  }
  vlmc_strbuf_puts(&line, ") -> (f32");
  for (int64_t i = 1; i < n; ++i) vlmc_strbuf_printf(&line, ", %s", vlmc_vk_mma_acc_type());
  vlmc_strbuf_puts(&line, ") {");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
  return results;
}

/* Yields next[], closes the loop and returns its l result as a plain SSA; the accumulators
 * stay %vR#1 .. (results R). */
static int close_tiles(const fa_t *F, int results, const int *next) {
  vlmc_kernel_emit_t *e = F->e;
  int64_t n = 1 + num_acc(F);
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_puts(&line, "scf.yield ");
  for (int64_t i = 0; i < n; ++i) vlmc_strbuf_printf(&line, "%s%%v%d", i ? ", " : "", next[i]);
  vlmc_strbuf_puts(&line, " : f32");
  for (int64_t i = 1; i < n; ++i) vlmc_strbuf_printf(&line, ", %s", vlmc_vk_mma_acc_type());
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
  vlmc_kernel_emit_line(e, "}");
  int l = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addf %%v%d#0, " VLMC_SSA " : f32", l, results,
                        vlmc_kernel_emit_f32(e, 0));
  return l;
}

/* The block's outputs: (O_hi + O_lo 2^-11) / l through the epilogue, 16 columns at a time
 * (O_hi in columns 0 .. 15 of ss, O_lo in 16 .. 31). */
static void emit_output(const fa_t *F, int i0, int kvh, int results) {
  vlmc_kernel_emit_t *e = F->e;
  int row0 = mul(e, F->sg, idx(e, FRAG));
  int64_t n = F->dv / FRAG;
  int down = vlmc_kernel_emit_f32(e, ldexp(1.0, -LO_SHIFT));
  for (int64_t j = 0; j < n; ++j) {
    for (int part = 0; part < 2; ++part) {
      int at = tile_at(e, row0, S_STRIDE, part * FRAG);
      vlmc_kernel_emit_line(e, "gpu.subgroup_mma_store_matrix %%v%d#%lld, " VLMC_SSA "[" VLMC_SSA "] {leadDimension = %d : "
                            "index} : %s, memref<%dxf32, #spirv.storage_class<Workgroup>>", results,
                            (long long)(1 + part * n + j), F->ss, at, S_STRIDE,
                            vlmc_vk_mma_acc_type(), BM * S_STRIDE);
    }
    vlmc_vk_emit_barrier(e);
    for (int64_t q = 0; q < BM * FRAG / THREADS; ++q) {
      int at = add(e, F->tid, idx(e, q * THREADS));
      int vr = divu(e, at, FRAG), c = remu(e, at, FRAG);
      int row = add(e, i0, divu(e, vr, F->group));
      vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", lt(e, row, F->s_rows));
      int base = add(e, mul(e, vr, idx(e, S_STRIDE)), c);
      int hi = vlmc_vk_emit_shared_load(e, F->ss, base);
      int lo = vlmc_vk_emit_shared_load(e, F->ss, add(e, base, idx(e, FRAG)));
      int o = vlmc_vk_emit_fma(e, lo, down, hi), l = vlmc_vk_emit_shared_load(e, F->ls, vr);
      int y = fop(e, "arith.divf", o, l);
      int out_row = head_row(F, row, vr, kvh);
      int row_at = mul(e, out_row, idx(e, F->dv)), col = add(e, idx(e, j * FRAG), c);
      int flat = add(e, row_at, col);
      vlmc_kernel_emit_finish_element(e, y, flat);
      vlmc_kernel_emit_line(e, "}");
    }
    vlmc_vk_emit_barrier(e);
  }
}

/* One block: rows i0 .. on kv head kvh, keys [start, end) (the rows' union). */
static void emit_block(const fa_t *F, int i0, int kvh, int start, int end) {
  vlmc_kernel_emit_t *e = F->e;
  int ctx_q[2] = {i0, kvh};
  stage(F, BM, F->d, 0, k_stride(F), q_value, ctx_q);
  vlmc_vk_emit_barrier(e);
  int qf[MAX_DIM / FRAG];
  int row0 = mul(e, F->sg, idx(e, FRAG));
  for (int64_t kk = 0; kk < F->d / FRAG; ++kk)
    qf[kk] = vlmc_vk_emit_mma_load_as(e, F->kvs, tile_at(e, row0, k_stride(F), kk * FRAG), k_stride(F),
                                      "AOp", false);
  vlmc_vk_emit_barrier(e); /* the tiles overwrite Q */
  /* this invocation's softmax row and its key range */
  int vr = remu(e, F->tid, BM), rs, re;
  vlmc_vk_emit_key_range(e, F->q, F->k, F->cu, F->causal, virtual_row(F, i0, vr), &rs, &re);
  /* at least one tile, so the loops' results are defined (a zero-trip scf.for is garbage):
   * with no keys at all every score is -inf and the rows get 0 / 0, as on the cpu */
  int stop = vlmc_kernel_emit_index_op(e, "arith.maxsi", end, add(e, start, idx(e, 1)));
  /* pass 1: the maxima */
  int m_init = vlmc_kernel_emit_f32(e, -INFINITY), m_inner, m, k0;
  int m_loop = vlmc_vk_emit_open_f32_loop(e, start, stop, idx(e, BN), 1, &m_init, &k0, &m_inner);
  int ctx_k[3] = {k0, end, kvh};
  stage(F, BN, F->d, 0, k_stride(F), k_value, ctx_k);
  vlmc_vk_emit_barrier(e);
  emit_scores(F, qf);
  vlmc_vk_emit_barrier(e);
  int m_next = emit_row_max(F, k0, rs, re, m_inner);
  vlmc_vk_emit_close_f32_loop(e, m_loop, 1, &m_next, &m);
  m = combine_halves(F, "arith.maximumf", m);
  /* pass 2: the weights and P V */
  int64_t n = 1 + num_acc(F);
  int init[1 + 2 * MAX_DIM / FRAG], inner[1 + 2 * MAX_DIM / FRAG], next[1 + 2 * MAX_DIM / FRAG];
  init[0] = vlmc_kernel_emit_f32(e, 0);
  int zero = vlmc_vk_emit_mma_zero(e);
  for (int64_t i = 1; i < n; ++i) init[i] = zero;
  int results = open_tiles(F, start, stop, init, &k0, inner);
  int ctx_kv[3] = {k0, end, kvh};
  stage(F, BN, F->d, 0, k_stride(F), k_value, ctx_kv);
  stage(F, BN, F->dv, v_base(F), v_stride(F), v_value, ctx_kv);
  vlmc_vk_emit_barrier(e);
  emit_scores(F, qf);
  vlmc_vk_emit_barrier(e);
  next[0] = emit_weights(F, k0, rs, re, m, inner[0]);
  vlmc_vk_emit_barrier(e);
  for (int64_t i = 1; i < n; ++i) next[i] = inner[i];
  emit_values(F, next + 1);
  vlmc_vk_emit_barrier(e);
  int l = combine_halves(F, "arith.addf", close_tiles(F, results, next));
  vlmc_vk_emit_barrier(e); /* both halves have read their row's parts */
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", lt(e, F->tid, idx(e, BM)));
  vlmc_vk_emit_shared_store(e, F->ls, l, vr); /* ls[vr]: the row's l */
  vlmc_kernel_emit_line(e, "}");
  vlmc_vk_emit_barrier(e);
  emit_output(F, i0, kvh, results);
}


bool vlmc_vk_attention_coop_applies(const vlmc_op_t *op) {
  if (op->kind != VLMC_OP_ATTENTION || op->num_operands < 3 || vlmc_vk_attention_decode_shape(op)) return false;
  const vlmc_type_t *qt = &op->operands[0]->type, *kt = &op->operands[1]->type, *vt = &op->operands[2]->type;
  if (qt->rank != 3 || kt->rank != 3 || vt->rank != 3 || !vlmc_kernel_emit_static_dims(qt, 1) ||
      !vlmc_kernel_emit_static_dims(kt, 1) || !vlmc_kernel_emit_static_dims(vt, 1))
    return false;
  int64_t hq = qt->dims[1].off, hkv = kt->dims[1].off, d = qt->dims[2].off, dv = vt->dims[2].off;
  if (hkv <= 0 || hq % hkv || BM % (hq / hkv) || d % FRAG || dv % FRAG || d < FRAG || dv < FRAG ||
      d > MAX_DIM || dv > MAX_DIM || kt->dims[2].off != d)
    return false;
  if (op->num_operands > 3 && op->operands[3]->type.rank != 1) return false;
  return vlmc_vk_holds_f16(op->operands[0]) && vlmc_vk_holds_f16(op->operands[1]) && vlmc_vk_holds_f16(op->operands[2]);
}

vlmc_status_t vlmc_vk_kernel_attention_coop(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  if (!vlmc_vk_attention_coop_applies(op)) {
    vlmc_kernel_emit_fail(e, "attention: the cooperative-matrix kernel takes f16 q, k and v with head "
                          "dims multiples of 16 up to %d and 64 / G rows a block", MAX_DIM);
    return NULL;
  }
  fa_t F = {.e = e, .q = op->operands[0], .k = op->operands[1], .v = op->operands[2],
            .cu = op->num_operands > 3 ? op->operands[3] : NULL};
  F.heads = F.q->type.dims[1].off;
  F.kv_heads = F.k->type.dims[1].off;
  F.d = F.q->type.dims[2].off;
  F.dv = F.v->type.dims[2].off;
  F.group = F.heads / F.kv_heads;
  F.rows = BM / F.group;
  const vlmc_attr_t *scale = vlmc_op_attr(op, "scale"), *causal = vlmc_op_attr(op, "causal");
  F.scale = scale ? scale->v.f : 1.0 / sqrt((double)F.d);
  F.causal = causal && causal->v.b;
  e->template_name = "attention";
  e->cost = 256 * F.group * (2 * F.d + 2 * F.dv + 16);
  vlmc_vk_emit_allow_shared(e, MAX_SHARED);
  vlmc_vk_emit_set_workgroup(e, THREADS, 1, 1, (int)F.rows);
  F.tid = vlmc_vk_emit_thread_id(e, 0);
  F.sg = vlmc_vk_emit_subgroup_id(e);
  int64_t q_halves = BM * k_stride(&F), kv_halves = v_base(&F) + BN * v_stride(&F);
  F.kvs = vlmc_vk_emit_shared(e, "f16", q_halves > kv_halves ? q_halves : kv_halves);
  F.ss = vlmc_vk_emit_shared(e, "f32", BM * S_STRIDE);
  F.ph = vlmc_vk_emit_shared(e, "f16", BM * P_STRIDE);
  F.pl = vlmc_vk_emit_shared(e, "f16", BM * P_STRIDE);
  F.ls = vlmc_vk_emit_shared(e, "f32", THREADS);
  /* blocks of `rows` query rows on one kv head, taken by number as in kernel_attention.c */
  int first, end;
  vlmc_vk_emit_group_units(e, &first, &end);
  F.s_rows = vlmc_kernel_emit_dim(e, F.q->type.dims[0]);
  F.last = vlmc_kernel_emit_index_op(e, "arith.subi", F.s_rows, idx(e, 1));
  int head_blocks = divu(e, add(e, F.s_rows, idx(e, F.rows - 1)), F.rows);
  int blocks = mul(e, head_blocks, idx(e, F.kv_heads));
  int work = vlmc_vk_emit_work(e);
  int groups = divu(e, add(e, work, idx(e, F.rows - 1)), F.rows);
  int b = vlmc_kernel_emit_for(e, divu(e, first, F.rows), blocks, groups); /* uniform */
  int row_block = divu(e, b, F.kv_heads);
  int i0 = mul(e, row_block, idx(e, F.rows)), kvh = remu(e, b, F.kv_heads);
  int start, stop;
  if (F.rows == 1)
    vlmc_vk_emit_key_range(e, F.q, F.k, F.cu, F.causal, i0, &start, &stop);
  else
    vlmc_vk_emit_rows_key_range(e, F.q, F.k, F.cu, F.causal, i0, F.last, F.rows, &start, &stop);
  emit_block(&F, i0, kvh, start, stop);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
