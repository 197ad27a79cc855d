/* attention: o[i, h] = sum_j softmax_j(scale * q[i, h] . k[j, g]) v[j, g] with g = h / (Hq /
 * Hkv), over the keys query i may see: its segment of `cu` (when given: the vision tower's
 * window attention runs over its segments, no dense mask), cut at key i + T - S (when causal:
 * a prefill, or new queries after a kv cache of T - S rows). Same semantics as the cpu kernel
 * (codegen/targets/cpu/kernel_attention.c); f32 throughout, one pass over the keys with an
 * online (flash-style) softmax: a running max m and sum l per head, the accumulator rescaled
 * by exp(m_old - m_new) when the max grows, divided by l at the end.
 *
 * Work units are (query row, kv head) pairs, as on the cpu. A workgroup of ATT_THREADS (128)
 * invocations takes a block of `rows` query rows on one kv head at a time: the block's
 * slots (row, query head of the kv head's group of G = Hq / Hkv) share every key tile, read
 * once. rows is about TARGET_SLOTS / G (a decode step's 8 heads: 1 row, one unit per
 * workgroup; the vision tower, no GQA: 8 rows, which then go over the kv heads in turn, a
 * workgroup taking 8 * Hkv units). The block's queries are staged in workgroup memory, and
 * the keys go in tiles of TK (a power of two, 8 .. 64: as many as keep all the workgroup
 * memory within the 16 KiB every Vulkan device has). The tiles cover the union of the block
 * rows' key ranges; per tile:
 *   1. stage the tile's K [TK, D] and V [TK, Dv] rows of this kv head in workgroup memory
 *      (coalesced; keys past the union read as 0), barrier;
 *   2. the slots x TK scores, one (slot, key) pair per invocation at a time, from the staged
 *      queries and keys; a key outside the slot's row's own range scores -inf; barrier;
 *   3. invocation s < slots updates slot s's max and sum and turns its scores into weights
 *      exp(score - max) (0 for -inf), keeping exp(m_old - m_new) for step 4; barrier;
 *   4. each invocation owns a fixed set of (slot, value column) pairs (ceil(slots Dv / 128)
 *      of them, registers carried through the tile loop) and adds the tile's weighted values
 *      to them; barrier (the next tile overwrites the workgroup memory).
 * The loops over kv heads and tiles and the barriers are uniform: every invocation computes
 * the same block ranges. At the end, each owned pair of a row inside S is divided by its
 * slot's sum and stored through the epilogue.
 *
 * A query that sees no key gets 0 / 0 = NaN, as on the cpu (the reference refuses such
 * inputs). Known cost: a decode step has only Hkv units (workgroups); splitting the keys over
 * several workgroups (flash decoding) would need a second combining kernel. */
#include <math.h>
#include <string.h>

#include "codegen/targets/vulkan/kernels.h"

enum {
  ATT_THREADS = 128,
  MAX_HEAD_DIM = 256,
  MAX_OWNED = 64,                 /* (slot, column) pairs one invocation owns */
  TARGET_SLOTS = 8,               /* (row, head) pairs a block aims at: a vision block of 8 rows */
  SHARED_BYTES = 16384,           /* the least maxComputeSharedMemorySize Vulkan allows */
  MIN_TILE = 8,
  MAX_TILE = 64,
};

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *q, *k, *v, *cu; /* cu: NULL without segments */
  int64_t heads, kv_heads, group, d, dv, tile;
  int64_t rows;                    /* query rows per workgroup (a block) */
  int64_t slots;                   /* rows * group: (row, query head) pairs of the block */
  double scale;
  bool causal;
  int tid;
  int qs, ks, vs, ps, ms, ls, as; /* workgroup memory (per slot: q, scores, m, l, alpha) */
  int starts, ends;                /* workgroup memory: the key range of each block row (i32) */
  int owned;                       /* (slot, value column) pairs per invocation */
} attention_t;

/* ---- small emitters ---- */

static int idx(vlmc_kernel_emit_t *e, int64_t c) { return vlmc_kernel_emit_index(e, c); }
static int add(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.addi", a, b); }
static int mul(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.muli", a, b); }
static int divu(vlmc_kernel_emit_t *e, int a, int64_t c) { return vlmc_kernel_emit_index_op(e, "arith.divui", a, idx(e, c)); }
static int remu(vlmc_kernel_emit_t *e, int a, int64_t c) { return vlmc_kernel_emit_index_op(e, "arith.remui", a, idx(e, c)); }

static int cmp(vlmc_kernel_emit_t *e, const char *pred, int a, int b) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi %s, " VLMC_SSA ", " VLMC_SSA " : index", v, pred, a, b);
  return v;
}

static int select_as(vlmc_kernel_emit_t *e, int cond, int a, int b, const char *type) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : %s", v,
                        cond, a, b, type);
  return v;
}

static int fma_f32(vlmc_kernel_emit_t *e, int a, int b, int c) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = math.fma " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : f32", v, a, b, c);
  return v;
}

static int is_minus_inf(vlmc_kernel_emit_t *e, int x) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpf oeq, " VLMC_SSA ", " VLMC_SSA " : f32", v, x,
                        vlmc_kernel_emit_f32(e, -INFINITY));
  return v;
}

/* exp(x - m), or 0 where x is -inf (a masked key, or the max before any key). */
static int weight(vlmc_kernel_emit_t *e, int x, int m) {
  int p = vlmc_kernel_emit_float_unary(e, "math.exp", vlmc_kernel_emit_float_op(e, "arith.subf", x, m, 0), 0);
  return select_as(e, is_minus_inf(e, x), vlmc_kernel_emit_f32(e, 0), p, "f32");
}

/* `%r = scf.for %iv = from to to step step iter_args(%a = init) -> (f32) {`: returns %r and
 * fills iv and the carried value. */
static int open_sum(vlmc_kernel_emit_t *e, int from, int to, int step, int init, int *iv, int *carried) {
  int r = vlmc_kernel_emit_fresh(e);
  *iv = vlmc_kernel_emit_fresh(e);
  *carried = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA
                        " iter_args(" VLMC_SSA " = " VLMC_SSA ") -> (f32) {",
                        r, *iv, from, to, step, *carried, init);
  return r;
}

static void close_sum(vlmc_kernel_emit_t *e, int next) {
  vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA " : f32", next);
  vlmc_kernel_emit_line(e, "}");
}

/* ---- the keys a query sees ---- */

/* [start, end) of the keys query row i sees: its segment (the last boundary <= i up to the
 * first one > i; boundaries are few, a linear scan), cut by the causal limit, never reversed.
 * As the cpu kernel computes it. */
static void emit_key_range(const attention_t *A, int i, int *out_start, int *out_end) {
  vlmc_kernel_emit_t *e = A->e;
  const vlmc_type_t *qt = &A->q->type, *kt = &A->k->type;
  int start = idx(e, 0), end = vlmc_kernel_emit_dim(e, kt->dims[0]);
  if (A->cu) {
    int w = vlmc_kernel_emit_fresh(e), s_in = vlmc_kernel_emit_fresh(e), e_in = vlmc_kernel_emit_fresh(e);
    int out = vlmc_kernel_emit_fresh(e);
    int count = vlmc_kernel_emit_dim(e, A->cu->type.dims[0]);
    vlmc_kernel_emit_line(e, VLMC_SSA ":2 = scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step "
                          VLMC_SSA " iter_args(" VLMC_SSA " = " VLMC_SSA ", " VLMC_SSA " = " VLMC_SSA
                          ") -> (index, index) {",
                          out, w, start, count, idx(e, 1), s_in, start, e_in, end);
    int bound = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : i64 to index", bound,
                          vlmc_kernel_emit_load(e, A->cu, w));
    int le = cmp(e, "sle", bound, i);
    int s_next = select_as(e, le, bound, s_in, "index");
    int e_next = select_as(e, le, e_in, vlmc_kernel_emit_index_op(e, "arith.minsi", e_in, bound), "index");
    vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA ", " VLMC_SSA " : index, index", s_next, e_next);
    vlmc_kernel_emit_line(e, "}");
    /* a count of 0 (a symbolic one may be) runs no iteration: pitfall 4, keep the inits */
    int s_out = vlmc_kernel_emit_fresh(e), e_out = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addi %%v%d#0, " VLMC_SSA " : index", s_out, out, idx(e, 0));
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addi %%v%d#1, " VLMC_SSA " : index", e_out, out, idx(e, 0));
    start = vlmc_vk_emit_guard_empty(e, idx(e, 0), count, s_out, start, "index");
    end = vlmc_vk_emit_guard_empty(e, idx(e, 0), count, e_out, end, "index");
  }
  if (A->causal) { /* keys j <= i + T - S */
    int t1 = add(e, vlmc_kernel_emit_dim(e, kt->dims[0]), idx(e, 1));
    int limit = vlmc_kernel_emit_index_op(e, "arith.subi", add(e, i, t1), vlmc_kernel_emit_dim(e, qt->dims[0]));
    end = vlmc_kernel_emit_index_op(e, "arith.minsi", end, limit);
  }
  *out_start = start;
  *out_end = vlmc_kernel_emit_index_op(e, "arith.maxsi", end, start);
}

/* ---- one tile of keys ---- */

/* Step 1: rows t0 .. t0+TK of this kv head's keys and values into workgroup memory. */
static void stage_rows(const attention_t *A, const vlmc_value_t *src, int dst, int64_t dim, int t0,
                       int end, int kvh) {
  vlmc_kernel_emit_t *e = A->e;
  int at = vlmc_kernel_emit_for(e, A->tid, idx(e, A->tile * dim), idx(e, ATT_THREADS));
  int key = add(e, t0, divu(e, at, dim));
  int ok = cmp(e, "slt", key, end);
  int flat = add(e, mul(e, add(e, mul(e, key, idx(e, A->kv_heads)), kvh), idx(e, dim)), remu(e, at, dim));
  int safe = select_as(e, ok, flat, idx(e, 0), "index");
  int value = select_as(e, ok, vlmc_kernel_emit_load(e, src, safe), vlmc_kernel_emit_f32(e, 0), "f32");
  vlmc_vk_emit_shared_store(e, dst, value, at);
  vlmc_kernel_emit_line(e, "}");
}

/* Block row r's key range [start, end), from workgroup memory. */
static int range_bound(const attention_t *A, int array, int r) {
  vlmc_kernel_emit_t *e = A->e;
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : i32 to index", v,
                        vlmc_vk_emit_shared_load(e, array, r));
  return v;
}

/* Step 2: ps[slot * TK + j] = scale * q_slot . k_j, or -inf for a key outside the slot's row's
 * range. */
static void emit_scores(const attention_t *A, int t0) {
  vlmc_kernel_emit_t *e = A->e;
  int p = vlmc_kernel_emit_for(e, A->tid, idx(e, A->slots * A->tile), idx(e, ATT_THREADS));
  int slot = divu(e, p, A->tile), j = remu(e, p, A->tile);
  int q_row = mul(e, slot, idx(e, A->d)), k_row = mul(e, j, idx(e, A->d));
  int c, acc;
  int dot = open_sum(e, idx(e, 0), idx(e, A->d), idx(e, 1), vlmc_kernel_emit_f32(e, 0), &c, &acc);
  int qv = vlmc_vk_emit_shared_load(e, A->qs, add(e, q_row, c));
  int kv = vlmc_vk_emit_shared_load(e, A->ks, add(e, k_row, c));
  close_sum(e, fma_f32(e, qv, kv, acc)); /* D >= 1 (static): the loop runs */
  int score = vlmc_kernel_emit_float_op(e, "arith.mulf", dot, vlmc_kernel_emit_f32(e, A->scale), 0);
  int r = divu(e, slot, A->group), key = add(e, t0, j);
  int ok = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", ok,
                        cmp(e, "sge", key, range_bound(A, A->starts, r)),
                        cmp(e, "slt", key, range_bound(A, A->ends, r)));
  vlmc_vk_emit_shared_store(e, A->ps, select_as(e, ok, score, vlmc_kernel_emit_f32(e, -INFINITY), "f32"), p);
  vlmc_kernel_emit_line(e, "}");
}

/* Step 3: invocation s < slots raises slot s's max, rescales its sum, turns its scores into
 * weights. A slot whose row has no key in this tile keeps its max (which stays -inf before
 * its first key: weight() gives 0 for -inf, never exp(-inf - -inf)). */
static void emit_softmax_step(const attention_t *A) {
  vlmc_kernel_emit_t *e = A->e;
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", cmp(e, "slt", A->tid, idx(e, A->slots)));
  int s = A->tid, row = mul(e, s, idx(e, A->tile));
  int m_old = vlmc_vk_emit_shared_load(e, A->ms, s);
  int j, m;
  int m_new = open_sum(e, idx(e, 0), idx(e, A->tile), idx(e, 1), m_old, &j, &m);
  close_sum(e, vlmc_kernel_emit_float_op(e, "arith.maximumf", m,
                                         vlmc_vk_emit_shared_load(e, A->ps, add(e, row, j)), 0));
  int alpha = weight(e, m_old, m_new);
  int l0 = vlmc_kernel_emit_float_op(e, "arith.mulf", vlmc_vk_emit_shared_load(e, A->ls, s), alpha, 0);
  int j2, l;
  int sum = open_sum(e, idx(e, 0), idx(e, A->tile), idx(e, 1), l0, &j2, &l);
  int at = add(e, row, j2);
  int p = weight(e, vlmc_vk_emit_shared_load(e, A->ps, at), m_new);
  vlmc_vk_emit_shared_store(e, A->ps, p, at);
  close_sum(e, vlmc_kernel_emit_float_op(e, "arith.addf", l, p, 0));
  vlmc_vk_emit_shared_store(e, A->ms, m_new, s);
  vlmc_vk_emit_shared_store(e, A->ls, sum, s);
  vlmc_vk_emit_shared_store(e, A->as, alpha, s);
  vlmc_kernel_emit_line(e, "}");
}

/* The (slot, column) pair r of this invocation (clamped to pair 0 past the last one). */
static void owned_pair(const attention_t *A, int r, int *ok, int *slot, int *col) {
  vlmc_kernel_emit_t *e = A->e;
  int pair = add(e, A->tid, idx(e, (int64_t)r * ATT_THREADS));
  *ok = cmp(e, "slt", pair, idx(e, A->slots * A->dv));
  int safe = select_as(e, *ok, pair, idx(e, 0), "index");
  *slot = divu(e, safe, A->dv);
  *col = remu(e, safe, A->dv);
}

/* Step 4: acc_r = acc_r * alpha_slot + sum_j w[slot, j] v[j, col]. */
static void emit_accumulate(const attention_t *A, const int *in, int *out) {
  vlmc_kernel_emit_t *e = A->e;
  for (int r = 0; r < A->owned; ++r) {
    int ok, slot, col;
    owned_pair(A, r, &ok, &slot, &col);
    int scaled = vlmc_kernel_emit_float_op(e, "arith.mulf", in[r], vlmc_vk_emit_shared_load(e, A->as, slot), 0);
    int j, acc;
    int row = mul(e, slot, idx(e, A->tile));
    out[r] = open_sum(e, idx(e, 0), idx(e, A->tile), idx(e, 1), scaled, &j, &acc);
    int w = vlmc_vk_emit_shared_load(e, A->ps, add(e, row, j));
    int v = vlmc_vk_emit_shared_load(e, A->vs, add(e, mul(e, j, idx(e, A->dv)), col));
    close_sum(e, fma_f32(e, w, v, acc));
  }
}

/* ---- one block ---- */

static void state_line(const attention_t *A, vlmc_strbuf_t *line, const int *values) {
  for (int r = 0; r < A->owned; ++r) vlmc_strbuf_printf(line, "%s%%v%d", r ? ", " : "", values[r]);
}

static void state_types(const attention_t *A, vlmc_strbuf_t *line) {
  for (int r = 0; r < A->owned; ++r) vlmc_strbuf_puts(line, r ? ", f32" : "f32");
}

/* The loop over the key tiles of [start, end) (the union of the block rows' ranges),
 * carrying the owned accumulators; fills acc with the results (guarded: with no key at all
 * they are the initial zeros). */
static void emit_tiles(const attention_t *A, int start, int end, int kvh, int *acc) {
  vlmc_kernel_emit_t *e = A->e;
  int results = vlmc_kernel_emit_fresh(e), t0 = vlmc_kernel_emit_fresh(e);
  int inner[MAX_OWNED], next[MAX_OWNED], zero = vlmc_kernel_emit_f32(e, 0);
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_printf(&line, "%%v%d:%d = scf.for %%v%d = %%v%d to %%v%d step %%v%d iter_args(", results,
                     A->owned, t0, start, end, idx(e, A->tile));
  for (int r = 0; r < A->owned; ++r) {
    inner[r] = vlmc_kernel_emit_fresh(e);
    vlmc_strbuf_printf(&line, "%s%%v%d = %%v%d", r ? ", " : "", inner[r], zero);
  }
  vlmc_strbuf_puts(&line, ") -> (");
  state_types(A, &line);
  vlmc_strbuf_puts(&line, ") {");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  stage_rows(A, A->k, A->ks, A->d, t0, end, kvh);
  stage_rows(A, A->v, A->vs, A->dv, t0, end, kvh);
  vlmc_vk_emit_barrier(e);
  emit_scores(A, t0);
  vlmc_vk_emit_barrier(e);
  emit_softmax_step(A);
  vlmc_vk_emit_barrier(e);
  emit_accumulate(A, inner, next);
  vlmc_vk_emit_barrier(e);
  vlmc_strbuf_clear(&line);
  vlmc_strbuf_puts(&line, "scf.yield ");
  state_line(A, &line, next);
  vlmc_strbuf_puts(&line, " : ");
  state_types(A, &line);
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_kernel_emit_line(e, "}");
  vlmc_strbuf_deinit(&line);
  for (int r = 0; r < A->owned; ++r) {
    int value = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addf %%v%d#%d, " VLMC_SSA " : f32", value, results, r, zero);
    acc[r] = vlmc_vk_emit_guard_empty(e, start, end, value, zero, "f32");
  }
}

/* The key ranges of the block's rows i0 .. i0 + rows - 1 into workgroup memory (a row past S:
 * empty) and their union in *start, *end (the same in every invocation: each computes all). */
static void emit_block_ranges(const attention_t *A, int i0, int *start, int *end) {
  vlmc_kernel_emit_t *e = A->e;
  int s_rows = vlmc_kernel_emit_dim(e, A->q->type.dims[0]);
  int keys = vlmc_kernel_emit_dim(e, A->k->type.dims[0]);
  int lo = keys, hi = idx(e, 0);
  int writer = cmp(e, "eq", A->tid, idx(e, 0));
  for (int64_t r = 0; r < A->rows; ++r) {
    int i = add(e, i0, idx(e, r));
    int valid = cmp(e, "slt", i, s_rows);
    int rs, re;
    emit_key_range(A, i, &rs, &re);
    rs = select_as(e, valid, rs, idx(e, 0), "index");
    re = select_as(e, valid, re, idx(e, 0), "index");
    lo = select_as(e, valid, vlmc_kernel_emit_index_op(e, "arith.minsi", lo, rs), lo, "index");
    hi = vlmc_kernel_emit_index_op(e, "arith.maxsi", hi, re);
    vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", writer);
    int rs32 = vlmc_kernel_emit_fresh(e), re32 = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : index to i32", rs32, rs);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : index to i32", re32, re);
    vlmc_vk_emit_shared_store(e, A->starts, rs32, idx(e, r));
    vlmc_vk_emit_shared_store(e, A->ends, re32, idx(e, r));
    vlmc_kernel_emit_line(e, "}");
  }
  *start = lo;
  *end = vlmc_kernel_emit_index_op(e, "arith.maxsi", hi, lo);
}

/* The block's queries for kv head kvh into workgroup memory (slot s = r * G + h at s * D; a row
 * past S reads row S - 1, and is never stored), and every slot's max and sum reset. */
static void emit_stage_queries(const attention_t *A, int i0, int kvh) {
  vlmc_kernel_emit_t *e = A->e;
  int last = vlmc_kernel_emit_index_op(e, "arith.subi", vlmc_kernel_emit_dim(e, A->q->type.dims[0]), idx(e, 1));
  int at = vlmc_kernel_emit_for(e, A->tid, idx(e, A->slots * A->d), idx(e, ATT_THREADS));
  int r = divu(e, at, A->group * A->d), within = remu(e, at, A->group * A->d);
  int i = vlmc_kernel_emit_index_op(e, "arith.minsi", add(e, i0, r), last);
  int head0 = add(e, mul(e, i, idx(e, A->heads)), mul(e, kvh, idx(e, A->group)));
  vlmc_vk_emit_shared_store(e, A->qs, vlmc_kernel_emit_load(e, A->q, add(e, mul(e, head0, idx(e, A->d)), within)), at);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", cmp(e, "slt", A->tid, idx(e, A->slots)));
  vlmc_vk_emit_shared_store(e, A->ms, vlmc_kernel_emit_f32(e, -INFINITY), A->tid);
  vlmc_vk_emit_shared_store(e, A->ls, vlmc_kernel_emit_f32(e, 0), A->tid);
  vlmc_kernel_emit_line(e, "}");
}

/* The block of rows i0.. on kv head kvh: queries, the key tiles, the outputs of valid rows. */
static void emit_block(const attention_t *A, int i0, int kvh, int start, int end) {
  vlmc_kernel_emit_t *e = A->e;
  emit_stage_queries(A, i0, kvh);
  vlmc_vk_emit_barrier(e);
  int acc[MAX_OWNED];
  emit_tiles(A, start, end, kvh, acc);
  int s_rows = vlmc_kernel_emit_dim(e, A->q->type.dims[0]);
  for (int r = 0; r < A->owned; ++r) {
    int ok, slot, col;
    owned_pair(A, r, &ok, &slot, &col);
    int i = add(e, i0, divu(e, slot, A->group));
    int store = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", store, ok,
                          cmp(e, "slt", i, s_rows));
    vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", store);
    int head = add(e, add(e, mul(e, i, idx(e, A->heads)), mul(e, kvh, idx(e, A->group))), remu(e, slot, A->group));
    int y = vlmc_kernel_emit_float_op(e, "arith.divf", acc[r], vlmc_vk_emit_shared_load(e, A->ls, slot), 0);
    vlmc_kernel_emit_finish_element(e, y, add(e, mul(e, head, idx(e, A->dv)), col));
    vlmc_kernel_emit_line(e, "}");
  }
  vlmc_vk_emit_barrier(e); /* the next kv head overwrites the workgroup memory */
}

/* ---- the template ---- */

static bool static_dims(const vlmc_type_t *t, uint32_t from) {
  for (uint32_t d = from; d < t->rank; ++d)
    if (!vlmc_dim_is_static(t->dims[d])) return false;
  return true;
}

/* Workgroup memory (bytes) with `keys` keys per tile: the queries, the K and V tiles, the
 * scores, three floats per slot, two i32 per block row. */
static int64_t shared_bytes(const attention_t *A, int64_t keys) {
  return 4 * (A->slots * A->d + keys * (A->d + A->dv) + A->slots * keys + 3 * A->slots + 2 * A->rows);
}

/* Keys per tile: the largest power of two from MIN_TILE to MAX_TILE that keeps the kernel's
 * workgroup memory within SHARED_BYTES (0 when even MIN_TILE does not fit). */
static int64_t tile_keys(const attention_t *A) {
  int64_t keys = MAX_TILE;
  while (keys > MIN_TILE && shared_bytes(A, keys) > SHARED_BYTES) keys /= 2;
  return shared_bytes(A, keys) <= SHARED_BYTES ? keys : 0;
}

/* Rows per block and keys per tile: about TARGET_SLOTS (row, head) slots (a GQA group of 8 is a
 * block of one row; the vision tower, no GQA, takes 8 rows), at most S rows when S is static
 * (a decode step: one row), fewer rows while the workgroup memory does not fit. */
static void choose_block(attention_t *A) {
  const vlmc_type_t *qt = &A->q->type;
  A->rows = A->group >= TARGET_SLOTS ? 1 : TARGET_SLOTS / A->group;
  if (vlmc_dim_is_static(qt->dims[0]) && qt->dims[0].off >= 1 && A->rows > qt->dims[0].off)
    A->rows = qt->dims[0].off;
  for (;;) {
    A->slots = A->rows * A->group;
    A->tile = tile_keys(A);
    if (A->tile || A->rows == 1) return;
    A->rows /= 2;
  }
}

vlmc_status_t vlmc_vk_kernel_attention(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  attention_t A;
  memset(&A, 0, sizeof A);
  A.e = e;
  A.q = op->operands[0];
  A.k = op->operands[1];
  A.v = op->operands[2];
  A.cu = op->num_operands > 3 ? op->operands[3] : NULL;
  const vlmc_type_t *qt = &A.q->type, *kt = &A.k->type, *vt = &A.v->type;
  if (qt->rank != 3 || kt->rank != 3 || vt->rank != 3 || !static_dims(qt, 1) ||
      !static_dims(kt, 1) || !static_dims(vt, 1)) {
    vlmc_kernel_emit_fail(e, "attention: the vulkan kernel needs static head counts and head dims "
                          "(q [S, Hq, D], k and v [T, Hkv, D]; only S and T may be symbolic)");
    return NULL;
  }
  A.heads = qt->dims[1].off;
  A.kv_heads = kt->dims[1].off;
  A.d = qt->dims[2].off;
  A.dv = vt->dims[2].off;
  if (A.kv_heads <= 0 || A.heads % A.kv_heads || A.d < 1 || A.dv < 1 || A.d > MAX_HEAD_DIM ||
      A.dv > MAX_HEAD_DIM) {
    vlmc_kernel_emit_fail(e, "attention: the vulkan kernel takes head dims from 1 to %d and query "
                          "heads a multiple of the kv heads (got D = %lld, Dv = %lld, %lld heads "
                          "over %lld)", MAX_HEAD_DIM, (long long)A.d, (long long)A.dv,
                          (long long)A.heads, (long long)A.kv_heads);
    return NULL;
  }
  if (A.cu && A.cu->type.rank != 1) {
    vlmc_kernel_emit_fail(e, "attention: the segment boundaries must be a vector (rank 1)");
    return NULL;
  }
  A.group = A.heads / A.kv_heads;
  choose_block(&A);
  A.owned = (int)((A.slots * A.dv + ATT_THREADS - 1) / ATT_THREADS);
  if (!A.tile || A.owned > MAX_OWNED || A.slots > ATT_THREADS) {
    vlmc_kernel_emit_fail(e, "attention: %lld query heads of %lld per kv head with value dim %lld "
                          "do not fit the vulkan kernel (%d bytes of workgroup memory, %d "
                          "accumulators per invocation)", (long long)A.group, (long long)A.d,
                          (long long)A.dv, SHARED_BYTES, MAX_OWNED);
    return NULL;
  }
  const vlmc_attr_t *scale = vlmc_op_attr(op, "scale"), *causal = vlmc_op_attr(op, "causal");
  A.scale = scale ? scale->v.f : 1.0 / sqrt((double)A.d);
  A.causal = causal && causal->v.b;
  e->template_name = "attention";
  e->cost = 256 * A.group * (2 * A.d + 2 * A.dv + 16);
  /* A block of one row takes one (row, kv head) unit; a block of several rows takes those
   * rows on every kv head, in turn (the units of a row are its kv heads, consecutive). */
  int64_t units = A.rows == 1 ? 1 : A.rows * A.kv_heads;
  vlmc_vk_emit_set_workgroup(e, ATT_THREADS, 1, 1, (int)units);
  A.tid = vlmc_vk_emit_thread_id(e, 0);
  A.qs = vlmc_vk_emit_shared(e, "f32", A.slots * A.d);
  A.ks = vlmc_vk_emit_shared(e, "f32", A.tile * A.d);
  A.vs = vlmc_vk_emit_shared(e, "f32", A.tile * A.dv);
  A.ps = vlmc_vk_emit_shared(e, "f32", A.slots * A.tile);
  A.ms = vlmc_vk_emit_shared(e, "f32", A.slots);
  A.ls = vlmc_vk_emit_shared(e, "f32", A.slots);
  A.as = vlmc_vk_emit_shared(e, "f32", A.slots);
  A.starts = vlmc_vk_emit_shared(e, "i32", A.rows);
  A.ends = vlmc_vk_emit_shared(e, "i32", A.rows);
  int first, end;
  vlmc_vk_emit_group_units(e, &first, &end);
  /* Nothing to do past the work (a group of the 2-D grid's last row): uniform over the group. */
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", cmp(e, "slt", first, end));
  int i0 = divu(e, first, A.kv_heads);
  int start, stop;
  emit_block_ranges(&A, i0, &start, &stop);
  if (A.rows == 1) {
    emit_block(&A, i0, remu(e, first, A.kv_heads), start, stop);
  } else {
    int kvh = vlmc_kernel_emit_for(e, idx(e, 0), idx(e, A.kv_heads), idx(e, 1));
    emit_block(&A, i0, kvh, start, stop);
    vlmc_kernel_emit_line(e, "}");
  }
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
