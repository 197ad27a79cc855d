/* attention: o[i, h] = sum_j softmax_j(scale * q[i, h] . k[j, g]) v[j, g] with g = h / (Hq /
 * Hkv), over the keys query i may see: its segment of `cu` (when given: the vision tower's
 * window attention runs over its segments, no dense mask), cut at key i + T - S (when causal:
 * a prefill, or new queries after a kv cache of T - S rows). Same semantics as the cpu kernel
 * (codegen/targets/cpu/kernel_attention.c); f32 throughout, one pass over the keys with an
 * online (flash-style) softmax: a running max m and sum l per head, the accumulator rescaled
 * by exp(m_old - m_new) when the max grows, divided by l at the end.
 *
 * Work units are (query row, kv head) pairs, one per workgroup of ATT_THREADS (128)
 * invocations: the group of G = Hq / Hkv query heads that share the kv head reads each key
 * tile once. The group's queries are staged once; the keys go in tiles of TK (a power of two,
 * 8 .. 64, as many as keep all the workgroup memory within the 16 KiB every Vulkan device
 * has: 8 keys for a decode step's 8 heads of 128, 16 for the vision tower). Per tile:
 *   1. stage the tile's K [TK, D] and V [TK, Dv] rows of this kv head in workgroup memory
 *      (coalesced; keys past the range read as 0), barrier;
 *   2. the G x TK scores, one (head, key) pair per invocation at a time, from the staged
 *      queries and keys; keys past the range score -inf; barrier;
 *   3. invocation h < G updates head h's max and sum and turns its scores into weights
 *      exp(s - m_new) (0 for -inf), keeping exp(m_old - m_new) for step 4; barrier;
 *   4. each invocation owns a fixed set of (head, value column) pairs (ceil(G Dv / 128) of
 *      them, registers carried through the tile loop) and adds the tile's weighted values to
 *      them; barrier (the next tile overwrites the workgroup memory).
 * The loops over tiles and the barriers are uniform: every invocation of the workgroup has
 * the same unit, so the same key range. At the end, each owned pair is divided by its head's
 * sum and stored through the epilogue.
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
  MAX_OWNED = 64,                 /* (head, column) pairs one invocation owns: G * Dv / 128 */
  SHARED_BYTES = 16384,           /* the least maxComputeSharedMemorySize Vulkan allows */
  MIN_TILE = 8,
  MAX_TILE = 64,
};

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *q, *k, *v, *cu; /* cu: NULL without segments */
  int64_t heads, kv_heads, group, d, dv, tile;
  double scale;
  bool causal;
  int tid;
  int qs, ks, vs, ps, ms, ls, as; /* workgroup memory */
  int owned;                       /* pairs per invocation */
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

/* Step 2: ps[h * TK + j] = scale * q_h . k_j, or -inf for a key past the range. */
static void emit_scores(const attention_t *A, int t0, int end) {
  vlmc_kernel_emit_t *e = A->e;
  int p = vlmc_kernel_emit_for(e, A->tid, idx(e, A->group * A->tile), idx(e, ATT_THREADS));
  int h = divu(e, p, A->tile), j = remu(e, p, A->tile);
  int q_row = mul(e, h, idx(e, A->d)), k_row = mul(e, j, idx(e, A->d));
  int c, acc;
  int dot = open_sum(e, idx(e, 0), idx(e, A->d), idx(e, 1), vlmc_kernel_emit_f32(e, 0), &c, &acc);
  int qv = vlmc_vk_emit_shared_load(e, A->qs, add(e, q_row, c));
  int kv = vlmc_vk_emit_shared_load(e, A->ks, add(e, k_row, c));
  close_sum(e, fma_f32(e, qv, kv, acc)); /* D >= 1 (static): the loop runs */
  int score = vlmc_kernel_emit_float_op(e, "arith.mulf", dot, vlmc_kernel_emit_f32(e, A->scale), 0);
  int ok = cmp(e, "slt", add(e, t0, j), end);
  vlmc_vk_emit_shared_store(e, A->ps, select_as(e, ok, score, vlmc_kernel_emit_f32(e, -INFINITY), "f32"), p);
  vlmc_kernel_emit_line(e, "}");
}

/* Step 3: invocation h < G raises head h's max, rescales its sum, turns scores into weights. */
static void emit_softmax_step(const attention_t *A) {
  vlmc_kernel_emit_t *e = A->e;
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", cmp(e, "slt", A->tid, idx(e, A->group)));
  int h = A->tid, row = mul(e, h, idx(e, A->tile));
  int m_old = vlmc_vk_emit_shared_load(e, A->ms, h);
  int j, m;
  int tile_max = open_sum(e, idx(e, 0), idx(e, A->tile), idx(e, 1), m_old, &j, &m);
  close_sum(e, vlmc_kernel_emit_float_op(e, "arith.maximumf", m,
                                         vlmc_vk_emit_shared_load(e, A->ps, add(e, row, j)), 0));
  /* the tile has a key in range (t0 < end), so tile_max is finite */
  int alpha = weight(e, m_old, tile_max);
  int l0 = vlmc_kernel_emit_float_op(e, "arith.mulf", vlmc_vk_emit_shared_load(e, A->ls, h), alpha, 0);
  int j2, l;
  int sum = open_sum(e, idx(e, 0), idx(e, A->tile), idx(e, 1), l0, &j2, &l);
  int at = add(e, row, j2);
  int p = weight(e, vlmc_vk_emit_shared_load(e, A->ps, at), tile_max);
  vlmc_vk_emit_shared_store(e, A->ps, p, at);
  close_sum(e, vlmc_kernel_emit_float_op(e, "arith.addf", l, p, 0));
  vlmc_vk_emit_shared_store(e, A->ms, tile_max, h);
  vlmc_vk_emit_shared_store(e, A->ls, sum, h);
  vlmc_vk_emit_shared_store(e, A->as, alpha, h);
  vlmc_kernel_emit_line(e, "}");
}

/* The (head, column) pair r of this invocation (clamped to pair 0 past the last one). */
static void owned_pair(const attention_t *A, int r, int *ok, int *h, int *col) {
  vlmc_kernel_emit_t *e = A->e;
  int pair = add(e, A->tid, idx(e, (int64_t)r * ATT_THREADS));
  *ok = cmp(e, "slt", pair, idx(e, A->group * A->dv));
  int safe = select_as(e, *ok, pair, idx(e, 0), "index");
  *h = divu(e, safe, A->dv);
  *col = remu(e, safe, A->dv);
}

/* Step 4: acc_r = acc_r * alpha_h + sum_j w[h, j] v[j, col]. */
static void emit_accumulate(const attention_t *A, const int *in, int *out) {
  vlmc_kernel_emit_t *e = A->e;
  for (int r = 0; r < A->owned; ++r) {
    int ok, h, col;
    owned_pair(A, r, &ok, &h, &col);
    int scaled = vlmc_kernel_emit_float_op(e, "arith.mulf", in[r], vlmc_vk_emit_shared_load(e, A->as, h), 0);
    int j, acc;
    int row = mul(e, h, idx(e, A->tile));
    out[r] = open_sum(e, idx(e, 0), idx(e, A->tile), idx(e, 1), scaled, &j, &acc);
    int w = vlmc_vk_emit_shared_load(e, A->ps, add(e, row, j));
    int v = vlmc_vk_emit_shared_load(e, A->vs, add(e, mul(e, j, idx(e, A->dv)), col));
    close_sum(e, fma_f32(e, w, v, acc));
  }
}

/* ---- one work unit ---- */

static void state_line(const attention_t *A, vlmc_strbuf_t *line, const int *values) {
  for (int r = 0; r < A->owned; ++r) vlmc_strbuf_printf(line, "%s%%v%d", r ? ", " : "", values[r]);
}

static void state_types(const attention_t *A, vlmc_strbuf_t *line) {
  for (int r = 0; r < A->owned; ++r) vlmc_strbuf_puts(line, r ? ", f32" : "f32");
}

/* The loop over the key tiles, carrying the owned accumulators; fills acc with the results
 * (guarded: a query that sees no key gets the initial zeros). */
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
  emit_scores(A, t0, end);
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

/* Unit u: query row i = u / Hkv and kv head u % Hkv, with the group of query heads on it. */
static void emit_unit(const attention_t *A, int u) {
  vlmc_kernel_emit_t *e = A->e;
  int i = divu(e, u, A->kv_heads), kvh = remu(e, u, A->kv_heads);
  int head0 = add(e, mul(e, i, idx(e, A->heads)), mul(e, kvh, idx(e, A->group))); /* (row, head) pair */
  /* the group's queries into workgroup memory; the heads' running max and sum reset */
  int at = vlmc_kernel_emit_for(e, A->tid, idx(e, A->group * A->d), idx(e, ATT_THREADS));
  vlmc_vk_emit_shared_store(e, A->qs, vlmc_kernel_emit_load(e, A->q, add(e, mul(e, head0, idx(e, A->d)), at)), at);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", cmp(e, "slt", A->tid, idx(e, A->group)));
  vlmc_vk_emit_shared_store(e, A->ms, vlmc_kernel_emit_f32(e, -INFINITY), A->tid);
  vlmc_vk_emit_shared_store(e, A->ls, vlmc_kernel_emit_f32(e, 0), A->tid);
  vlmc_kernel_emit_line(e, "}");
  vlmc_vk_emit_barrier(e);
  int start, end;
  emit_key_range(A, i, &start, &end);
  int acc[MAX_OWNED];
  emit_tiles(A, start, end, kvh, acc);
  for (int r = 0; r < A->owned; ++r) {
    int ok, h, col;
    owned_pair(A, r, &ok, &h, &col);
    vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", ok);
    int y = vlmc_kernel_emit_float_op(e, "arith.divf", acc[r], vlmc_vk_emit_shared_load(e, A->ls, h), 0);
    vlmc_kernel_emit_finish_element(e, y, add(e, mul(e, add(e, head0, h), idx(e, A->dv)), col));
    vlmc_kernel_emit_line(e, "}");
  }
  vlmc_vk_emit_barrier(e); /* the next unit of the group overwrites the workgroup memory */
}

/* ---- the template ---- */

static bool static_dims(const vlmc_type_t *t, uint32_t from) {
  for (uint32_t d = from; d < t->rank; ++d)
    if (!vlmc_dim_is_static(t->dims[d])) return false;
  return true;
}

/* Workgroup memory (bytes) with `keys` keys per tile: the queries, the K and V tiles, the
 * scores, and three floats per head. */
static int64_t shared_bytes(const attention_t *A, int64_t keys) {
  return 4 * (A->group * A->d + keys * (A->d + A->dv) + A->group * keys + 3 * A->group);
}

/* Keys per tile: the largest power of two from MIN_TILE to MAX_TILE that keeps the kernel's
 * workgroup memory within SHARED_BYTES (0 when even MIN_TILE does not fit). */
static int64_t tile_keys(const attention_t *A) {
  int64_t keys = MAX_TILE;
  while (keys > MIN_TILE && shared_bytes(A, keys) > SHARED_BYTES) keys /= 2;
  return shared_bytes(A, keys) <= SHARED_BYTES ? keys : 0;
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
  A.group = A.heads / A.kv_heads;
  A.owned = (int)((A.group * A.dv + ATT_THREADS - 1) / ATT_THREADS);
  if (A.owned > MAX_OWNED || A.group > ATT_THREADS) {
    vlmc_kernel_emit_fail(e, "attention: the vulkan kernel takes at most %d query heads per kv "
                          "head and %d x %d (head, value column) pairs (got %lld heads of %lld)",
                          ATT_THREADS, MAX_OWNED, ATT_THREADS, (long long)A.group, (long long)A.dv);
    return NULL;
  }
  if (A.cu && A.cu->type.rank != 1) {
    vlmc_kernel_emit_fail(e, "attention: the segment boundaries must be a vector (rank 1)");
    return NULL;
  }
  A.tile = tile_keys(&A);
  if (!A.tile) {
    vlmc_kernel_emit_fail(e, "attention: %lld query heads of %lld per kv head with value dim %lld "
                          "need more than %d bytes of workgroup memory", (long long)A.group,
                          (long long)A.d, (long long)A.dv, SHARED_BYTES);
    return NULL;
  }
  const vlmc_attr_t *scale = vlmc_op_attr(op, "scale"), *causal = vlmc_op_attr(op, "causal");
  A.scale = scale ? scale->v.f : 1.0 / sqrt((double)A.d);
  A.causal = causal && causal->v.b;
  e->template_name = "attention";
  e->cost = 256 * A.group * (2 * A.d + 2 * A.dv + 16);
  vlmc_vk_emit_set_workgroup(e, ATT_THREADS, 1, 1, 1);
  A.tid = vlmc_vk_emit_thread_id(e, 0);
  A.qs = vlmc_vk_emit_shared(e, "f32", A.group * A.d);
  A.ks = vlmc_vk_emit_shared(e, "f32", A.tile * A.d);
  A.vs = vlmc_vk_emit_shared(e, "f32", A.tile * A.dv);
  A.ps = vlmc_vk_emit_shared(e, "f32", A.group * A.tile);
  A.ms = vlmc_vk_emit_shared(e, "f32", A.group);
  A.ls = vlmc_vk_emit_shared(e, "f32", A.group);
  A.as = vlmc_vk_emit_shared(e, "f32", A.group);
  int first, end;
  vlmc_vk_emit_group_units(e, &first, &end);
  int u = vlmc_kernel_emit_for(e, first, end, idx(e, 1));
  emit_unit(&A, u);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
