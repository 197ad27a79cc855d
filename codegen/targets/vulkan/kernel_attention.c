/* attention: o[i, h] = sum_j softmax_j(scale * q[i, h] . k[j, g]) v[j, g] with g = h / (Hq /
 * Hkv), over the keys query i may see: its segment of `cu` (when given: the vision tower's
 * window attention runs over its segments, no dense mask), cut at key i + T - S (when causal:
 * a prefill, or new queries after a kv cache of T - S rows). Same semantics as the cpu kernel
 * (codegen/targets/cpu/kernel_attention.c); f32 throughout, one pass over the keys with an
 * online (flash-style) softmax: a running max m and sum l per slot, the accumulator rescaled
 * by exp(m_old - m_new) when the max grows, divided by l at the end.
 *
 * Flash-attention v1 layout: each invocation owns P slots (query row, query head; P up to 4
 * while P * (D + Dv) <= 256, slot tid + p * threads) and keeps their q (D floats), m, l and Dv
 * accumulators in registers, so each k or v float read from workgroup memory feeds P FMAs
 * (on lavapipe the reads, not the FMAs, are the cost). A workgroup holds the `slots` = rows *
 * G slots (G = Hq / Hkv query heads per kv head; rows about TARGET_SLOTS / G, at most S when
 * S is static) of `rows` consecutive query rows on one kv head, which share every key tile,
 * in ceil(slots / P) invocations. Work units are (query row, kv head) pairs, as on the cpu;
 * a workgroup has `rows` units' worth and takes whole blocks (rows, kv head) by number, so
 * the kv heads of a block of rows spread over workgroups (see the template below).
 *
 * The keys go in tiles of TK rows (TK * (D + Dv) floats fill at most the 16 KiB of workgroup
 * memory every Vulkan device has: 64 keys at D = Dv = 32, 16 at 128). The tiles cover the
 * union of the block rows' key ranges (every invocation computes it the same way, so the tile
 * loop and its barriers are uniform); per tile:
 *   1. the workgroup stages the tile's K [TK, D] and V [TK, Dv] rows of this kv head in
 *      workgroup memory (coalesced; keys past the union read as 0); barrier;
 *   2. every invocation walks the tile itself in chunks of CK keys (P * CK * (D + Dv) <= 1024
 *      FMAs: the chunk is unrolled, and lavapipe's LLVM compile time grows faster than the
 *      code): per slot CK dot products over D
 *      (q from registers, k from workgroup memory: the same address in every invocation),
 *      scores outside the slot's own key range set to -inf, one max update and one rescale
 *      per chunk, then the CK weighted V rows added to the accumulators; barrier (the next
 *      tile overwrites the workgroup memory).
 * Two barriers per tile and P * TK * (D + Dv) FMAs per invocation between them: on lavapipe
 * (Mesa's CPU Vulkan, where a barrier switches every 8-lane batch of the workgroup) the
 * barriers no longer dominate. At the end, the slots of rows inside S divide by l and store
 * through the epilogue.
 *
 * A query that sees no key gets 0 / 0 = NaN, as on the cpu (the reference refuses such
 * inputs). A decode shape (static S <= 16) is kernel_attention_decode.c's: a block of one
 * row here would be Hkv workgroups of ceil(G / P) invocations. Known cost: at D = 128 the q
 * and accumulator registers (256 floats) exceed what a real GPU keeps in
 * registers without spilling. */
#include <math.h>
#include <string.h>

#include "codegen/targets/vulkan/kernels.h"

enum {
  MAX_HEAD_DIM = 256,
  TARGET_SLOTS = 64,    /* invocations (slots) a workgroup aims at */
  MAX_GROUP = 256,      /* query heads per kv head: a block of one row has this many slots */
  SHARED_FLOATS = 4096, /* the 16 KiB of workgroup memory every Vulkan device has */
  MAX_TILE = 64,
  MAX_CHUNK = 8,        /* keys per chunk (scores held in registers) */
  UNROLLED = 1024,      /* FMAs per chunk, unrolled */
  MAX_PER = 4,          /* slots per invocation: registers reuse each staged k and v float */
  REG_FLOATS = 256,     /* P * (D + Dv) at most (beyond it, P = 1) */
  MAX_STATE = MAX_PER * (2 + REG_FLOATS / MAX_PER) + 2 * MAX_HEAD_DIM,
};

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *q, *k, *v, *cu; /* cu: NULL without segments */
  int64_t heads, kv_heads, group, d, dv;
  int64_t rows;                    /* query rows per workgroup (a block) */
  int64_t slots;                   /* rows * group: (row, query head) pairs of the block */
  int64_t per;                     /* slots one invocation owns (P) */
  int64_t threads;                 /* ceil(slots / P) invocations */
  int64_t tile, chunk;             /* keys per tile (TK) and per chunk (CK) */
  double scale;
  bool causal;
  int tid;
  int ks, vs;                      /* workgroup memory: the K and V tiles */
  int slot[MAX_PER];               /* this invocation's slots (clamped to the last one) */
  int row[MAX_PER];                /* their query rows, clamped into S */
  int key_start[MAX_PER], key_end[MAX_PER]; /* their rows' key ranges */
} attention_t;

/* The online-softmax states of an invocation's P slots (SSA values): per slot the max, the
 * sum and the Dv accumulators, at p * (2 + Dv). */
typedef struct {
  int v[MAX_STATE];
} state_t;

/* ---- small emitters ---- */

static int idx(vlmc_kernel_emit_t *e, int64_t c) { return vlmc_kernel_emit_index(e, c); }
static int add(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.addi", a, b); }
static int mul(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.muli", a, b); }
static int divu(vlmc_kernel_emit_t *e, int a, int64_t c) { return vlmc_kernel_emit_index_op(e, "arith.divui", a, idx(e, c)); }
static int remu(vlmc_kernel_emit_t *e, int a, int64_t c) { return vlmc_kernel_emit_index_op(e, "arith.remui", a, idx(e, c)); }






/* ---- the keys a query sees ---- */


/* ---- the state carried through loops ---- */

static int state_count(const attention_t *A) { return (int)(A->per * (2 + A->dv)); }
static int state_at(const state_t *s, int r) { return s->v[r]; }
static void state_set(state_t *s, int r, int v) { s->v[r] = v; }
static int *slot_m(const attention_t *A, state_t *s, int64_t p) { return &s->v[p * (2 + A->dv)]; }
static int *slot_l(const attention_t *A, state_t *s, int64_t p) { return &s->v[p * (2 + A->dv) + 1]; }
static int *slot_acc(const attention_t *A, state_t *s, int64_t p) { return &s->v[p * (2 + A->dv) + 2]; }

static void state_types(const attention_t *A, vlmc_strbuf_t *line) {
  for (int r = 0; r < state_count(A); ++r) vlmc_strbuf_puts(line, r ? ", f32" : "f32");
}

/* Opens `%res:N = scf.for %iv = from to to step step iter_args(...) -> (f32, ...) {` carrying
 * *s; *s becomes the loop's inner values, *iv its induction variable. Returns %res. */
static int open_state_loop(const attention_t *A, int from, int to, int step, state_t *s, int *iv) {
  vlmc_kernel_emit_t *e = A->e;
  int results = vlmc_kernel_emit_fresh(e);
  *iv = vlmc_kernel_emit_fresh(e);
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_printf(&line, "%%v%d:%d = scf.for %%v%d = %%v%d to %%v%d step %%v%d iter_args(", results,
                     state_count(A), *iv, from, to, step);
  for (int r = 0; r < state_count(A); ++r) {
    int inner = vlmc_kernel_emit_fresh(e);
    vlmc_strbuf_printf(&line, "%s%%v%d = %%v%d", r ? ", " : "", inner, state_at(s, r));
    state_set(s, r, inner);
  }
  vlmc_strbuf_puts(&line, ") -> (");
  state_types(A, &line);
  vlmc_strbuf_puts(&line, ") {");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
  return results;
}

/* Yields *next and closes the loop; *out gets the loop's results (%res#r). */
static void close_state_loop(const attention_t *A, const state_t *next, int results, state_t *out) {
  vlmc_vk_emit_close_f32_loop(A->e, results, state_count(A), next->v, out->v);
}

/* ---- one tile of keys ---- */

/* Step 1: rows t0 .. t0+TK of this kv head's keys (or values) into workgroup memory; keys at
 * or past `end` read as 0 (they are masked anyway). */
static void stage_rows(const attention_t *A, const vlmc_value_t *src, int dst, int64_t dim, int t0,
                       int end, int kvh) {
  vlmc_kernel_emit_t *e = A->e;
  int count = idx(e, A->tile * dim), threads = idx(e, A->threads);
  int at = vlmc_kernel_emit_for(e, A->tid, count, threads);
  int key = add(e, t0, divu(e, at, dim));
  int ok = vlmc_vk_emit_cmp(e, "slt", key, end);
  int key_head = add(e, mul(e, key, idx(e, A->kv_heads)), kvh);
  int row_base = mul(e, key_head, idx(e, dim));
  int flat = add(e, row_base, remu(e, at, dim));
  int safe = vlmc_vk_emit_select(e, ok, flat, idx(e, 0), "index");
  int loaded = vlmc_kernel_emit_load(e, src, safe), zero = vlmc_kernel_emit_f32(e, 0);
  int value = vlmc_vk_emit_select(e, ok, loaded, zero, "f32");
  vlmc_vk_emit_shared_store(e, dst, value, at);
  vlmc_kernel_emit_line(e, "}");
}

/* scale * q . k for the staged key values kv (D floats) of key `key`, or -inf for a key
 * outside slot p's row's range. */
static int emit_score(const attention_t *A, const int *q, const int *kv, int key, int64_t p) {
  vlmc_kernel_emit_t *e = A->e;
  int dot = vlmc_kernel_emit_float_op(e, "arith.mulf", q[0], kv[0], 0);
  for (int64_t c = 1; c < A->d; ++c) dot = vlmc_vk_emit_fma(e, q[c], kv[c], dot);
  int score = vlmc_kernel_emit_float_op(e, "arith.mulf", dot, vlmc_kernel_emit_f32(e, A->scale), 0);
  int ok = vlmc_kernel_emit_fresh(e);
  int from_start = vlmc_vk_emit_cmp(e, "sge", key, A->key_start[p]);
  int before_end = vlmc_vk_emit_cmp(e, "slt", key, A->key_end[p]);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", ok, from_start,
                        before_end);
  return vlmc_vk_emit_select(e, ok, score, vlmc_kernel_emit_f32(e, -INFINITY), "f32");
}

/* Step 2, one chunk of CK keys at tile row c0: each staged k float is read once for the P
 * slots' scores; per slot the max raised once (the state rescaled by exp(m_old - m_new), 0
 * while m_old is -inf); then each staged v float read once for the P slots' accumulators. */
static void emit_chunk(const attention_t *A, const int (*q)[MAX_HEAD_DIM], int t0, int c0, state_t *s) {
  vlmc_kernel_emit_t *e = A->e;
  int scores[MAX_PER][MAX_TILE], rows[MAX_TILE], kv[MAX_HEAD_DIM];
  int m[MAX_PER];
  for (int64_t p = 0; p < A->per; ++p) m[p] = *slot_m(A, s, p);
  for (int64_t k = 0; k < A->chunk; ++k) {
    rows[k] = add(e, c0, idx(e, k));
    int base = mul(e, rows[k], idx(e, A->d)), key = add(e, t0, rows[k]);
    for (int64_t c = 0; c < A->d; ++c) kv[c] = vlmc_vk_emit_shared_load(e, A->ks, add(e, base, idx(e, c)));
    for (int64_t p = 0; p < A->per; ++p) {
      scores[p][k] = emit_score(A, q[p], kv, key, p);
      m[p] = vlmc_kernel_emit_float_op(e, "arith.maximumf", m[p], scores[p][k], 0);
    }
  }
  for (int64_t p = 0; p < A->per; ++p) {
    int alpha = vlmc_vk_emit_softmax_weight(e, *slot_m(A, s, p), m[p]);
    *slot_m(A, s, p) = m[p];
    *slot_l(A, s, p) = vlmc_kernel_emit_float_op(e, "arith.mulf", *slot_l(A, s, p), alpha, 0);
    int *acc = slot_acc(A, s, p);
    for (int64_t c = 0; c < A->dv; ++c) acc[c] = vlmc_kernel_emit_float_op(e, "arith.mulf", acc[c], alpha, 0);
  }
  for (int64_t k = 0; k < A->chunk; ++k) {
    int w[MAX_PER];
    for (int64_t p = 0; p < A->per; ++p) {
      w[p] = vlmc_vk_emit_softmax_weight(e, scores[p][k], m[p]);
      *slot_l(A, s, p) = vlmc_kernel_emit_float_op(e, "arith.addf", *slot_l(A, s, p), w[p], 0);
    }
    int base = mul(e, rows[k], idx(e, A->dv));
    for (int64_t c = 0; c < A->dv; ++c) {
      int value = vlmc_vk_emit_shared_load(e, A->vs, add(e, base, idx(e, c)));
      for (int64_t p = 0; p < A->per; ++p) {
        int *acc = slot_acc(A, s, p);
        acc[c] = vlmc_vk_emit_fma(e, w[p], value, acc[c]);
      }
    }
  }
}

/* The loop over the key tiles of [start, end) (the union of the block rows' ranges) on kv
 * head kvh, carrying *s (guarded: with no key at all it keeps the initial state). */
static void emit_tiles(const attention_t *A, const int (*q)[MAX_HEAD_DIM], int start, int end, int kvh, state_t *s) {
  vlmc_kernel_emit_t *e = A->e;
  state_t init = *s, inner = *s, chunk_state, tile_out;
  int t0;
  int tiles = open_state_loop(A, start, end, idx(e, A->tile), &inner, &t0);
  stage_rows(A, A->k, A->ks, A->d, t0, end, kvh);
  stage_rows(A, A->v, A->vs, A->dv, t0, end, kvh);
  vlmc_vk_emit_barrier(e);
  int c0;
  chunk_state = inner;
  /* a static trip count >= 1 (TK is a multiple of CK): no zero-trip guard needed */
  int zero = idx(e, 0), tk = idx(e, A->tile), ck = idx(e, A->chunk);
  int chunks = open_state_loop(A, zero, tk, ck, &chunk_state, &c0);
  emit_chunk(A, q, t0, c0, &chunk_state);
  close_state_loop(A, &chunk_state, chunks, &inner);
  vlmc_vk_emit_barrier(e); /* the next tile overwrites the workgroup memory */
  close_state_loop(A, &inner, tiles, &tile_out);
  for (int r = 0; r < state_count(A); ++r)
    state_set(s, r, vlmc_vk_emit_guard_empty(e, start, end, state_at(&tile_out, r), state_at(&init, r), "f32"));
}

/* ---- one block ---- */

/* The union [*start, *end) of the key ranges of block rows i0 .. i0 + rows - 1 (rows past S
 * clamped to S - 1): every invocation computes the same, so loops over it are uniform. */
static void emit_block_range(const attention_t *A, int i0, int last, int *start, int *end) {
  vlmc_kernel_emit_t *e = A->e;
  if (A->rows == 1) { /* the block is this invocation's row */
    *start = A->key_start[0];
    *end = A->key_end[0];
    return;
  }
  vlmc_vk_emit_rows_key_range(e, A->q, A->k, A->cu, A->causal, i0, last, A->rows, start, end);
}

/* Slot p of this invocation: tid + p * threads (clamped to the last slot), its row (clamped
 * into S: a slot past S computes row S - 1, never stored) and that row's key range. */
static void emit_slot(attention_t *A, int64_t p, int i0, int last) {
  vlmc_kernel_emit_t *e = A->e;
  int slot = add(e, A->tid, idx(e, p * A->threads));
  A->slot[p] = vlmc_kernel_emit_index_op(e, "arith.minsi", slot, idx(e, A->slots - 1));
  A->row[p] = vlmc_kernel_emit_index_op(e, "arith.minsi", add(e, i0, divu(e, A->slot[p], A->group)), last);
  vlmc_vk_emit_key_range(A->e, A->q, A->k, A->cu, A->causal, A->row[p], &A->key_start[p], &A->key_end[p]);
}

/* Query head of slot p on kv head kvh (flat over [S, Hq]). */
static int slot_head(const attention_t *A, int64_t p, int kvh) {
  vlmc_kernel_emit_t *e = A->e;
  int row_base = mul(e, A->row[p], idx(e, A->heads)), group_base = mul(e, kvh, idx(e, A->group));
  int group_head = add(e, row_base, group_base);
  return add(e, group_head, remu(e, A->slot[p], A->group));
}

/* This invocation's slots on kv head kvh: their queries into registers, the key tiles, then
 * the outputs of the slots that are real (slot < slots, row inside S). */
static void emit_block(const attention_t *A, int i0, int kvh, int start, int end) {
  vlmc_kernel_emit_t *e = A->e;
  int q[MAX_PER][MAX_HEAD_DIM];
  state_t s;
  for (int64_t p = 0; p < A->per; ++p) {
    int head = slot_head(A, p, kvh);
    int q_base = mul(e, head, idx(e, A->d));
    for (int64_t c = 0; c < A->d; ++c) q[p][c] = vlmc_kernel_emit_load(e, A->q, add(e, q_base, idx(e, c)));
    *slot_m(A, &s, p) = vlmc_kernel_emit_f32(e, -INFINITY);
    *slot_l(A, &s, p) = vlmc_kernel_emit_f32(e, 0);
    for (int64_t c = 0; c < A->dv; ++c) slot_acc(A, &s, p)[c] = vlmc_kernel_emit_f32(e, 0);
  }
  emit_tiles(A, (const int (*)[MAX_HEAD_DIM])q, start, end, kvh, &s);
  int s_rows = vlmc_kernel_emit_dim(e, A->q->type.dims[0]);
  for (int64_t p = 0; p < A->per; ++p) {
    int slot = add(e, A->tid, idx(e, p * A->threads)), store = vlmc_kernel_emit_fresh(e);
    int row = add(e, i0, divu(e, slot, A->group));
    int real_slot = vlmc_vk_emit_cmp(e, "slt", slot, idx(e, A->slots));
    int real_row = vlmc_vk_emit_cmp(e, "slt", row, s_rows);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", store, real_slot,
                          real_row);
    vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", store);
    int head = slot_head(A, p, kvh);
    int o_base = mul(e, head, idx(e, A->dv));
    const int *acc = slot_acc(A, &s, p);
    for (int64_t c = 0; c < A->dv; ++c) {
      int y = vlmc_kernel_emit_float_op(e, "arith.divf", acc[c], *slot_l(A, &s, p), 0);
      vlmc_kernel_emit_finish_element(e, y, add(e, o_base, idx(e, c)));
    }
    vlmc_kernel_emit_line(e, "}");
  }
}

/* ---- the template ---- */

/* Rows per block (about TARGET_SLOTS slots, at most S when S is static: a decode step takes
 * one row), keys per chunk (fewer for wide heads: the chunk's code is unrolled) and per tile
 * (as many as fit the workgroup memory, a multiple of the chunk, at most MAX_TILE). */
static void choose_block(attention_t *A) {
  const vlmc_type_t *qt = &A->q->type;
  A->rows = A->group >= TARGET_SLOTS ? 1 : TARGET_SLOTS / A->group;
  if (vlmc_dim_is_static(qt->dims[0]) && qt->dims[0].off >= 1 && A->rows > qt->dims[0].off)
    A->rows = qt->dims[0].off;
  A->slots = A->rows * A->group;
  A->per = 1;
  while (A->per < MAX_PER && A->per * 2 <= A->slots && A->per * 2 * (A->d + A->dv) <= REG_FLOATS)
    A->per *= 2;
  A->threads = (A->slots + A->per - 1) / A->per;
  /* P * CK * (D + Dv) FMAs unrolled per chunk, at most UNROLLED: lavapipe compiles a pipeline
   * with LLVM, whose time grows faster than the code (measured: about 12 s for 2048) */
  A->chunk = UNROLLED / (A->per * (A->d + A->dv));
  if (A->chunk > MAX_CHUNK) A->chunk = MAX_CHUNK;
  if (A->chunk < 2) A->chunk = 2;
  int64_t keys = SHARED_FLOATS / (A->d + A->dv); /* >= 8: D, Dv <= 256 */
  if (keys > MAX_TILE) keys = MAX_TILE;
  A->tile = keys / A->chunk * A->chunk;
}

vlmc_status_t vlmc_vk_kernel_attention(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  if (vlmc_vk_attention_decode_fits(op)) return vlmc_vk_kernel_attention_decode(e);
  attention_t A;
  memset(&A, 0, sizeof A);
  A.e = e;
  A.q = op->operands[0];
  A.k = op->operands[1];
  A.v = op->operands[2];
  A.cu = op->num_operands > 3 ? op->operands[3] : NULL;
  const vlmc_type_t *qt = &A.q->type, *kt = &A.k->type, *vt = &A.v->type;
  if (qt->rank != 3 || kt->rank != 3 || vt->rank != 3 || !vlmc_kernel_emit_static_dims(qt, 1) ||
      !vlmc_kernel_emit_static_dims(kt, 1) || !vlmc_kernel_emit_static_dims(vt, 1)) {
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
  if (A.group > MAX_GROUP) {
    vlmc_kernel_emit_fail(e, "attention: %lld query heads per kv head do not fit the vulkan kernel "
                          "(at most %d: one invocation per query head)", (long long)A.group, MAX_GROUP);
    return NULL;
  }
  choose_block(&A);
  const vlmc_attr_t *scale = vlmc_op_attr(op, "scale"), *causal = vlmc_op_attr(op, "causal");
  A.scale = scale ? scale->v.f : 1.0 / sqrt((double)A.d);
  A.causal = causal && causal->v.b;
  e->template_name = "attention";
  e->cost = 256 * A.group * (2 * A.d + 2 * A.dv + 16);
  /* A workgroup takes blocks of `rows` query rows on one kv head: B = ceil(S / rows) * Hkv of
   * them, block b on rows (b / Hkv) * rows .. and kv head b % Hkv; groups of `rows` units
   * (their count G = ceil(S * Hkv / rows), about B) take blocks g, g + G, ..., so that every kv
   * head's blocks spread over workgroups (the vision's 16 heads made a workgroup's 16 passes
   * over the keys 16 times too few workgroups: 168 for 10,764 patches). */
  vlmc_vk_emit_set_workgroup(e, (int)A.threads, 1, 1, (int)A.rows);
  A.tid = vlmc_vk_emit_thread_id(e, 0);
  A.ks = vlmc_vk_emit_shared(e, "f32", A.tile * A.d);
  A.vs = vlmc_vk_emit_shared(e, "f32", A.tile * A.dv);
  int first, end;
  vlmc_vk_emit_group_units(e, &first, &end);
  int s_rows = vlmc_kernel_emit_dim(e, qt->dims[0]);
  int last = vlmc_kernel_emit_index_op(e, "arith.subi", s_rows, idx(e, 1));
  int row_blocks = divu(e, add(e, s_rows, idx(e, A.rows - 1)), A.rows);
  int blocks = mul(e, row_blocks, idx(e, A.kv_heads));
  int units = vlmc_vk_emit_work(e);
  int groups = divu(e, add(e, units, idx(e, A.rows - 1)), A.rows);
  int b = vlmc_kernel_emit_for(e, divu(e, first, A.rows), blocks, groups); /* uniform */
  int row_block = divu(e, b, A.kv_heads);
  int i0 = mul(e, row_block, idx(e, A.rows)), kvh = remu(e, b, A.kv_heads);
  for (int64_t p = 0; p < A.per; ++p) emit_slot(&A, p, i0, last);
  int start, stop;
  emit_block_range(&A, i0, last, &start, &stop);
  emit_block(&A, i0, kvh, start, stop);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
