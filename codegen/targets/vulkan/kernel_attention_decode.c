/* attention for a few query rows over many keys (a decode step: S = 1 over a KV cache of T
 * rows), the vulkan target's main kernel when S is static and small. Same semantics, work
 * units ((query row, kv head) pairs) and epilogue as vlmc_vk_kernel_attention
 * (kernel_attention.c), which serves every other shape; f32 throughout, online softmax.
 *
 * Why a kernel of its own: the general kernel gives a (row, kv head) unit ceil(G / P)
 * invocations (G = Hq / Hkv query heads per kv head), each walking every key with D + Dv
 * floats of registers: at decode (the 3B: G = 8, D = 128, 2 kv heads) that is 2 workgroups of
 * 8 invocations for the whole GPU, 17.7 ms of a 37 ms step on the H200. Here a unit is one
 * workgroup of T = G * R invocations (R = 256 / G rounded down to a power of two, at most 64),
 * R per query head, and the keys go in chunks of C = R:
 *   1. scores: the chunk's K rows go through workgroup memory in column parts (C rows of at
 *      most 2048 / C floats, row stride odd: no bank conflicts), loaded by the whole
 *      workgroup along the rows (coalesced, once for all G heads, every load of a part issued
 *      before the first store); invocation (h, r) computes
 *      the score of key c0 + r for head h (q from workgroup memory) and stores it; barrier;
 *   2. the head's chunk max from its R scores, the new running max, the weight exp(s - m)
 *      into workgroup memory; barrier; the chunk's sum from the head's R weights;
 *   3. values: invocation (h, r) owns dims r, r + R, ... of head h's output (A = ceil(Dv / R)
 *      accumulators) and adds the chunk's weighted value rows (consecutive invocations read
 *      consecutive floats of a row; 8 rows a step, loads issued together: a rolled loop waited
 *      for each row); barrier (the next chunk overwrites the workgroup memory).
 * (Reading K rows straight from the cache, a row per lane, made every load 32 cache lines:
 * 70 us a call at 64 keys on the H200.) The running max and sum of a head are the same in
 * all its R invocations (each combines the same partials). At the end each invocation divides
 * its accumulators by the sum and stores them through the epilogue.
 *
 * Split over the keys (flash decoding). With a static S, a step has only S x Hkv units (the
 * 3B's decode: 2), each walking all T keys: 2 workgroups for the whole GPU, 194 us a call at
 * T = 1024 on the H200. So for a static S the kernel is a split kernel (emit.h, "split
 * kernels"): stage 1 gives each unit P workgroups (P a power of two, S x Hkv x P <= 64,
 * P <= 32), part p taking the p-th of P equal slices of the row's keys and writing its running
 * max, sum and unnormalized accumulators (per head: [m, l, acc[Dv]]) to scratch; stage 2
 * (a workgroup per (unit, head): G per unit, an invocation per output dim; one workgroup per
 * unit, the G x R shape, had read 32 x 1,026 floats per head on 2 SMs, about half of the
 * step's 30 us a call on an H100) combines the P partials of each head:
 * M = max m_p, L = sum exp(m_p - M) l_p, out = sum exp(m_p - M) acc_p / L. A slice without
 * keys has m = -inf, l = 0 and weighs 0. The order of the sums differs from one pass's, so the
 * results agree with it to rounding, not bit for bit. */
#include <math.h>
#include <string.h>

#include "codegen/targets/vulkan/kernels.h"

enum {
  MAX_THREADS = 256,
  MAX_DIM = 256,     /* D and Dv */
  MAX_ROWS = 16,     /* the largest static S this kernel is always chosen for */
  MIN_SHARED_GROUP = 4, /* G from which it takes any S without segments (below: few K reads
                           shared, the general kernel's tiles share more) */
  MAX_ACC = 64,      /* A, accumulators per invocation */
  MAX_LANES = 64,    /* R, and so C, the keys of a chunk */
  STAGE_FLOATS = 2048, /* a K part in workgroup memory: C rows of part floats (8 KiB) */
  MAX_STAGE_ROUNDS = STAGE_FLOATS, /* loads per invocation per part (T >= 1) */
  KEYS_UNROLLED = 8,   /* value rows per step of the value loop */
  SPLIT_GROUPS = 64,   /* a split kernel's workgroups at most (S x Hkv x P) */
  MAX_SPLIT = 32,      /* P at most */
  MAX_QUERY_FLOATS = 4096, /* G * D: the unit's query rows in workgroup memory (16 KiB) */
};

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *q, *k, *v, *cu;
  int64_t heads, kv_heads, group, d, dv;
  int64_t lanes;   /* R: invocations per query head */
  int64_t threads; /* T = G * R */
  int64_t chunk;   /* C = R: a key per invocation of a head per chunk */
  int64_t acc;     /* A = ceil(Dv / R) */
  int64_t part;    /* K columns staged at a time (D in ceil(D / part) parts) */
  int64_t stride;  /* their row stride in workgroup memory (part, made odd) */
  double scale;
  bool causal;
  int tid, h, r;   /* invocation, its query head in the group and its lane in the head */
  int i, g;        /* the unit's query row and kv head */
  int start, end;  /* the row's keys (a split kernel's stage 1: this part's slice of them) */
  int64_t split;   /* P (1: one stage) */
  int unit;        /* the (row, kv head) unit */
  int red, ps;       /* workgroup memory: max partials [T], weights [G, C] */
  int qs;            /* workgroup memory: the unit's G query rows [G, D] */
  int ks;            /* workgroup memory: a part of the chunk's K rows [C, stride] */
} decode_t;

static int idx(vlmc_kernel_emit_t *e, int64_t c) { return vlmc_kernel_emit_index(e, c); }
static int add(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.addi", a, b); }
static int mul(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.muli", a, b); }
static int fop(vlmc_kernel_emit_t *e, const char *op, int a, int b) {
  return vlmc_kernel_emit_float_op(e, op, a, b, 0);
}

/* R: a power of two, G * R <= MAX_THREADS, R <= MAX_LANES. */
static int64_t lanes_for(int64_t group) {
  int64_t lanes = 1;
  while (lanes * 2 * group <= MAX_THREADS && lanes * 2 <= MAX_LANES) lanes *= 2;
  return lanes;
}

bool vlmc_vk_attention_decode_fits(const vlmc_op_t *op) {
  const vlmc_type_t *qt = &op->operands[0]->type, *kt = &op->operands[1]->type,
                    *vt = &op->operands[2]->type;
  bool few_rows = vlmc_dim_is_static(qt->dims[0]) && qt->dims[0].off <= MAX_ROWS;
  if (qt->rank != 3 || kt->rank != 3 || vt->rank != 3 || !vlmc_kernel_emit_static_dims(qt, 1) ||
      !vlmc_kernel_emit_static_dims(kt, 1) || !vlmc_kernel_emit_static_dims(vt, 1))
    return false;
  int64_t hq = qt->dims[1].off, hkv = kt->dims[1].off, d = qt->dims[2].off, dv = vt->dims[2].off;
  if (hkv <= 0 || hq % hkv || hq / hkv > MAX_THREADS || d < 1 || d > MAX_DIM || dv < 1 || dv > MAX_DIM ||
      hq / hkv * d > MAX_QUERY_FLOATS)
    return false;
  /* Any rows without segments when G query heads share each kv head: a text prefill, whose
   * (row, kv head) units, each walking its own keys, are enough to fill a GPU */
  if (!few_rows && (op->num_operands > 3 || hq / hkv < MIN_SHARED_GROUP)) return false;
  int64_t lanes = lanes_for(hq / hkv);
  return (dv + lanes - 1) / lanes <= MAX_ACC;
}

/* P for a static S (1 for a dynamic one: a prefill has units enough). */
static int64_t split_for(const vlmc_op_t *op) {
  const vlmc_type_t *qt = &op->operands[0]->type;
  if (!vlmc_dim_is_static(qt->dims[0]) || qt->dims[0].off > MAX_ROWS) return 1;
  int64_t units = qt->dims[0].off * op->operands[1]->type.dims[1].off, split = 1;
  while (split * 2 <= MAX_SPLIT && units * split * 2 <= SPLIT_GROUPS) split *= 2;
  return split;
}

bool vlmc_vk_attention_decode_shape(const vlmc_op_t *op) {
  const vlmc_type_t *qt = &op->operands[0]->type;
  return vlmc_dim_is_static(qt->dims[0]) && qt->dims[0].off <= MAX_ROWS &&
         vlmc_vk_attention_decode_fits(op);
}

static void choose_shape(decode_t *D) {
  D->lanes = lanes_for(D->group);
  D->threads = D->group * D->lanes;
  D->chunk = D->lanes;
  D->acc = (D->dv + D->lanes - 1) / D->lanes;
  /* K goes through workgroup memory in column parts of at most STAGE_FLOATS / C floats a row */
  int64_t parts = (D->d * D->chunk + STAGE_FLOATS - 1) / STAGE_FLOATS;
  D->part = (D->d + parts - 1) / parts;
  D->stride = D->part | 1; /* odd: the C lanes reading C rows hit C different banks */
}

/* Flat index of head h's row for (query row i, kv head g): (i * Hq + g * G + h). */
static int head_row(const decode_t *D) {
  vlmc_kernel_emit_t *e = D->e;
  int row_heads = mul(e, D->i, idx(e, D->heads)), group_heads = mul(e, D->g, idx(e, D->group));
  return add(e, add(e, row_heads, group_heads), D->h);
}

/* Head h's first float in q or the output [S, Hq, dim]. */
static int head_base(const decode_t *D, int64_t dim) {
  int row = head_row(D);
  return mul(D->e, row, idx(D->e, dim));
}

/* Key `key`'s first float in k or v [T, Hkv, dim]. */
static int cache_row(const decode_t *D, int key, int64_t dim) {
  vlmc_kernel_emit_t *e = D->e;
  int kv_row = add(e, mul(e, key, idx(e, D->kv_heads)), D->g);
  return mul(e, kv_row, idx(e, dim));
}

/* The reduction of this head's R partials in `shared` (op "arith.maximumf" or "arith.addf"). */
static int head_reduce(const decode_t *D, int shared, const char *op, int init) {
  vlmc_kernel_emit_t *e = D->e;
  int base = mul(e, D->h, idx(e, D->lanes)), j, inner;
  int zero = idx(e, 0), lanes = idx(e, D->lanes), one = idx(e, 1);
  int res = vlmc_vk_emit_open_f32_loop(e, zero, lanes, one, 1, &init, &j, &inner);
  int next = fop(e, op, inner, vlmc_vk_emit_shared_load(e, shared, add(e, base, j))), v;
  vlmc_vk_emit_close_f32_loop(e, res, 1, &next, &v);
  return v; /* R >= 1: the loop runs */
}

/* Columns [p0, p0 + part) of the chunk's C key rows into workgroup memory, coalesced along
 * the row (zeros past the row's keys and past D); then a barrier. */
static void stage_keys(const decode_t *D, int c0, int64_t p0) {
  vlmc_kernel_emit_t *e = D->e;
  /* unrolled: every load issued before the first store (a rolled loop waits for each) */
  int64_t count = D->chunk * D->part, rounds = (count + D->threads - 1) / D->threads;
  int values[MAX_STAGE_ROUNDS], slots[MAX_STAGE_ROUNDS];
  for (int64_t i = 0; i < rounds; ++i) {
    int f = add(e, D->tid, idx(e, i * D->threads));
    int row = vlmc_kernel_emit_index_op(e, "arith.divui", f, idx(e, D->part));
    int col = vlmc_kernel_emit_index_op(e, "arith.remui", f, idx(e, D->part));
    int key = add(e, c0, row), dim = add(e, col, idx(e, p0));
    int key_ok = vlmc_vk_emit_cmp(e, "slt", key, D->end);
    int dim_ok = vlmc_vk_emit_cmp(e, "slt", dim, idx(e, D->d));
    int ok = vlmc_vk_emit_and(e, key_ok, dim_ok);
    if ((i + 1) * D->threads > count) ok = vlmc_vk_emit_and(e, ok, vlmc_vk_emit_cmp(e, "slt", f, idx(e, count)));
    int src = add(e, cache_row(D, key, D->d), dim);
    int at = vlmc_vk_emit_select(e, ok, src, idx(e, 0), "index");
    int x = vlmc_kernel_emit_load(e, D->k, at);
    values[i] = vlmc_vk_emit_select(e, ok, x, vlmc_kernel_emit_f32(e, 0), "f32");
    /* the last round's spare invocations write a spare float past the tile */
    int in_tile = vlmc_vk_emit_cmp(e, "slt", f, idx(e, count));
    int slot = add(e, mul(e, row, idx(e, D->stride)), col);
    slots[i] = vlmc_vk_emit_select(e, in_tile, slot, idx(e, D->chunk * D->stride), "index");
  }
  for (int64_t i = 0; i < rounds; ++i) vlmc_vk_emit_shared_store(e, D->ks, values[i], slots[i]);
  vlmc_vk_emit_barrier(e);
}

/* Step 1: this invocation's score, of key c0 + r for head h (-inf past the row's keys): the
 * dot product part by part out of workgroup memory (lane r reads row r: no bank conflicts;
 * the head's lanes read the same q element: a broadcast). */
static int emit_score(const decode_t *D, int c0) {
  vlmc_kernel_emit_t *e = D->e;
  int key = add(e, c0, D->r), base = mul(e, D->r, idx(e, D->stride)), dot = -1;
  int q_row = mul(e, D->h, idx(e, D->d));
  for (int64_t p0 = 0; p0 < D->d; p0 += D->part) {
    if (p0) vlmc_vk_emit_barrier(e); /* every lane is done with the previous part */
    stage_keys(D, c0, p0);
    for (int64_t c = 0; c < D->part && p0 + c < D->d; ++c) {
      int kv = vlmc_vk_emit_shared_load(e, D->ks, add(e, base, idx(e, c)));
      int qv = vlmc_vk_emit_shared_load(e, D->qs, add(e, q_row, idx(e, p0 + c)));
      dot = dot < 0 ? fop(e, "arith.mulf", qv, kv) : vlmc_vk_emit_fma(e, qv, kv, dot);
    }
  }
  int score = fop(e, "arith.mulf", dot, vlmc_kernel_emit_f32(e, D->scale));
  int in_row = vlmc_vk_emit_cmp(e, "slt", key, D->end);
  return vlmc_vk_emit_select(e, in_row, score, vlmc_kernel_emit_f32(e, -INFINITY), "f32");
}

/* Step 3: the chunk's weighted value rows into the accumulators (keys c0 .. c0 + n - 1 are
 * the row's; n >= 1). */
static void emit_values(const decode_t *D, int c0, int n, int *acc) {
  vlmc_kernel_emit_t *e = D->e;
  /* KEYS_UNROLLED keys a step, their loads issued together; a key past the row's has weight
   * 0 (its score was -inf) and reads the last key's value row */
  int64_t step = D->chunk < KEYS_UNROLLED ? D->chunk : KEYS_UNROLLED;
  int j0, inner[MAX_ACC];
  int zero = idx(e, 0), by = idx(e, step);
  int res = vlmc_vk_emit_open_f32_loop(e, zero, n, by, (int)D->acc, acc, &j0, inner);
  int last = vlmc_kernel_emit_index_op(e, "arith.subi", D->end, idx(e, 1));
  int w[KEYS_UNROLLED], v[KEYS_UNROLLED][MAX_ACC];
  for (int64_t u = 0; u < step; ++u) {
    int j = add(e, j0, idx(e, u));
    w[u] = vlmc_vk_emit_shared_load(e, D->ps, add(e, mul(e, D->h, idx(e, D->chunk)), j));
    int key = vlmc_kernel_emit_index_op(e, "arith.minsi", add(e, c0, j), last);
    int base = cache_row(D, key, D->dv);
    for (int64_t a = 0; a < D->acc; ++a) {
      int dim = add(e, D->r, idx(e, a * D->lanes));
      if ((a + 1) * D->lanes > D->dv) /* a partial last column block: clamp, never stored */
        dim = vlmc_kernel_emit_index_op(e, "arith.minsi", dim, idx(e, D->dv - 1));
      v[u][a] = vlmc_kernel_emit_load(e, D->v, add(e, base, dim));
    }
  }
  int next[MAX_ACC];
  for (int64_t a = 0; a < D->acc; ++a) {
    next[a] = inner[a];
    for (int64_t u = 0; u < step; ++u) next[a] = vlmc_vk_emit_fma(e, w[u], v[u][a], next[a]);
  }
  vlmc_vk_emit_close_f32_loop(e, res, (int)D->acc, next, acc);
}

/* One chunk of keys at c0, carrying state = [m, l, acc...] (in place). */
static void emit_chunk(const decode_t *D, int c0, int *state) {
  vlmc_kernel_emit_t *e = D->e;
  int s = emit_score(D, c0);
  vlmc_vk_emit_shared_store(e, D->red, s, D->tid);
  vlmc_vk_emit_barrier(e);
  int m_new = fop(e, "arith.maximumf", state[0],
                  head_reduce(D, D->red, "arith.maximumf", vlmc_kernel_emit_f32(e, -INFINITY)));
  int alpha = vlmc_vk_emit_softmax_weight(e, state[0], m_new);
  int p = vlmc_vk_emit_softmax_weight(e, s, m_new);
  vlmc_vk_emit_shared_store(e, D->ps, p, add(e, mul(e, D->h, idx(e, D->chunk)), D->r));
  vlmc_vk_emit_barrier(e);
  /* C = R: head h's weights are its lanes' partials */
  int chunk_sum = head_reduce(D, D->ps, "arith.addf", vlmc_kernel_emit_f32(e, 0));
  state[0] = m_new;
  state[1] = fop(e, "arith.addf", fop(e, "arith.mulf", state[1], alpha), chunk_sum);
  for (int64_t a = 0; a < D->acc; ++a) state[2 + a] = fop(e, "arith.mulf", state[2 + a], alpha);
  int chunk = idx(e, D->chunk), left = vlmc_kernel_emit_index_op(e, "arith.subi", D->end, c0);
  int n = vlmc_kernel_emit_index_op(e, "arith.minsi", chunk, left); /* keys of this chunk */
  emit_values(D, c0, n, state + 2);
  vlmc_vk_emit_barrier(e); /* the next chunk overwrites ks, red and ps */
}

/* The output: acc / l for this invocation's dims of head h. */
static void emit_store(const decode_t *D, const int *state) {
  vlmc_kernel_emit_t *e = D->e;
  int base = head_base(D, D->dv);
  for (int64_t a = 0; a < D->acc; ++a) {
    int dim = add(e, D->r, idx(e, a * D->lanes));
    bool partial = (a + 1) * D->lanes > D->dv;
    if (partial) vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", vlmc_vk_emit_cmp(e, "slt", dim, idx(e, D->dv)));
    int y = fop(e, "arith.divf", state[2 + a], state[1]);
    vlmc_kernel_emit_finish_element(e, y, add(e, base, dim));
    if (partial) vlmc_kernel_emit_line(e, "}");
  }
}

/* The unit's G query rows (consecutive in q) into workgroup memory, loaded by the whole
 * workgroup (every load issued before the first store); then a barrier. (Each invocation
 * keeping its head's D floats of q in registers, reused by every chunk, made the kernel 42
 * us a call at 64 keys on an H100.) */
static void stage_queries(const decode_t *D) {
  vlmc_kernel_emit_t *e = D->e;
  int64_t count = D->group * D->d, rounds = (count + D->threads - 1) / D->threads;
  int row_heads = mul(e, D->i, idx(e, D->heads));
  int group_heads = mul(e, D->g, idx(e, D->group));
  int head = add(e, row_heads, group_heads);
  int first = mul(e, head, idx(e, D->d));
  int values[MAX_DIM], slots[MAX_DIM];
  for (int64_t i = 0; i < rounds; ++i) {
    int f = add(e, D->tid, idx(e, i * D->threads));
    int ok = (i + 1) * D->threads > count ? vlmc_vk_emit_cmp(e, "slt", f, idx(e, count)) : -1;
    slots[i] = ok >= 0 ? vlmc_vk_emit_select(e, ok, f, idx(e, 0), "index") : f;
    values[i] = vlmc_kernel_emit_load(e, D->q, add(e, first, slots[i]));
    if (ok >= 0) slots[i] = vlmc_vk_emit_select(e, ok, f, idx(e, count), "index"); /* a spare slot */
  }
  for (int64_t i = 0; i < rounds; ++i) vlmc_vk_emit_shared_store(e, D->qs, values[i], slots[i]);
  vlmc_vk_emit_barrier(e);
}

/* The loop over [D->start, D->end) in chunks: the final state [m, l, acc...] (init where
 * the range is empty). */
static void emit_keys(decode_t *D, const int *init, int *state) {
  vlmc_kernel_emit_t *e = D->e;
  stage_queries(D);
  int n = (int)(2 + D->acc), inner[2 + MAX_ACC], c0;
  int res = vlmc_vk_emit_open_f32_loop(e, D->start, D->end, idx(e, D->chunk), n, init, &c0, inner);
  emit_chunk(D, c0, inner);
  vlmc_vk_emit_close_f32_loop(e, res, n, inner, state);
  for (int a = 0; a < n; ++a) state[a] = vlmc_vk_emit_guard_empty(e, D->start, D->end, state[a], init[a], "f32");
}

static void initial_state(decode_t *D, int *init) {
  init[0] = vlmc_kernel_emit_f32(D->e, -INFINITY);
  for (int64_t a = 1; a < 2 + D->acc; ++a) init[a] = vlmc_kernel_emit_f32(D->e, 0);
}

static void emit_unit(decode_t *D) {
  vlmc_vk_emit_key_range(D->e, D->q, D->k, D->cu, D->causal, D->i, &D->start, &D->end);
  int init[2 + MAX_ACC], state[2 + MAX_ACC];
  initial_state(D, init);
  emit_keys(D, init, state);
  emit_store(D, state);
}

/* Scratch float `field` (0: m, 1: l, 2 + d: acc dim d) of head h's partial in part p of the
 * unit: ((unit * P + p) * G + h) * (2 + Dv) + field. */
static int partial_at(const decode_t *D, int part, int field) {
  vlmc_kernel_emit_t *e = D->e;
  int unit_part = add(e, mul(e, D->unit, idx(e, D->split)), part);
  int slot = add(e, mul(e, unit_part, idx(e, D->group)), D->h);
  return add(e, mul(e, slot, idx(e, 2 + D->dv)), field);
}

/* Stage 1, part `part` of the unit: its slice of the keys into scratch. */
static void emit_part(decode_t *D, int part) {
  vlmc_kernel_emit_t *e = D->e;
  int start, end;
  vlmc_vk_emit_key_range(e, D->q, D->k, D->cu, D->causal, D->i, &start, &end);
  /* slice p of P: [start + p * per, + per) within the row's keys, per = ceil(n / P) */
  int n = vlmc_kernel_emit_index_op(e, "arith.subi", end, start);
  int rounded = add(e, n, idx(e, D->split - 1));
  int per = vlmc_kernel_emit_index_op(e, "arith.divui", rounded, idx(e, D->split));
  D->start = vlmc_kernel_emit_index_op(e, "arith.minsi", add(e, start, mul(e, part, per)), end);
  D->end = vlmc_kernel_emit_index_op(e, "arith.minsi", add(e, D->start, per), end);
  int init[2 + MAX_ACC], state[2 + MAX_ACC];
  initial_state(D, init);
  emit_keys(D, init, state);
  for (int64_t a = 0; a < D->acc; ++a) {
    int dim = add(e, D->r, idx(e, a * D->lanes));
    bool partial = (a + 1) * D->lanes > D->dv;
    if (partial) vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", vlmc_vk_emit_cmp(e, "slt", dim, idx(e, D->dv)));
    vlmc_vk_emit_scratch_store(e, state[2 + a], partial_at(D, part, add(e, dim, idx(e, 2))));
    if (partial) vlmc_kernel_emit_line(e, "}");
  }
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", vlmc_vk_emit_cmp(e, "eq", D->r, idx(e, 0)));
  vlmc_vk_emit_scratch_store(e, state[0], partial_at(D, part, idx(e, 0)));
  vlmc_vk_emit_scratch_store(e, state[1], partial_at(D, part, idx(e, 1)));
  vlmc_kernel_emit_line(e, "}");
}

/* Stage 2: the unit's P partials per head combined and stored through the epilogue; P is
 * static and small, so both walks are unrolled, every load issued before its use (a rolled
 * loop waited on each: 35 us a call on the H200). */
static void emit_combine(decode_t *D) {
  vlmc_kernel_emit_t *e = D->e;
  int m[MAX_SPLIT], max = vlmc_kernel_emit_f32(e, -INFINITY);
  for (int64_t p = 0; p < D->split; ++p) {
    int part = idx(e, p), field = idx(e, 0);
    m[p] = vlmc_vk_emit_scratch_load(e, partial_at(D, part, field));
  }
  for (int64_t p = 0; p < D->split; ++p) max = fop(e, "arith.maximumf", max, m[p]);
  int state[2 + MAX_ACC], w[MAX_SPLIT], l[MAX_SPLIT];
  state[0] = max;
  for (int64_t p = 0; p < D->split; ++p) {
    w[p] = vlmc_vk_emit_softmax_weight(e, m[p], max);
    int part = idx(e, p), field = idx(e, 1);
    l[p] = vlmc_vk_emit_scratch_load(e, partial_at(D, part, field));
  }
  state[1] = vlmc_kernel_emit_f32(e, 0);
  for (int64_t p = 0; p < D->split; ++p) state[1] = vlmc_vk_emit_fma(e, w[p], l[p], state[1]);
  for (int64_t a = 0; a < D->acc; ++a) {
    int dim = add(e, D->r, idx(e, a * D->lanes));
    if ((a + 1) * D->lanes > D->dv) /* a partial last column block: clamp, never stored */
      dim = vlmc_kernel_emit_index_op(e, "arith.minsi", dim, idx(e, D->dv - 1));
    int v[MAX_SPLIT];
    for (int64_t p = 0; p < D->split; ++p) {
      int part = idx(e, p), field = add(e, dim, idx(e, 2));
      v[p] = vlmc_vk_emit_scratch_load(e, partial_at(D, part, field));
    }
    state[2 + a] = vlmc_kernel_emit_f32(e, 0);
    for (int64_t p = 0; p < D->split; ++p) state[2 + a] = vlmc_vk_emit_fma(e, w[p], v[p], state[2 + a]);
  }
  emit_store(D, state);
}

/* The combine's invocations per head: Dv rounded up to whole subgroups of 32, at most 256
 * (an invocation per dim up to Dv = 256). */
static int64_t combine_lanes(int64_t dv) {
  int64_t lanes = (dv + 31) / 32 * 32;
  return lanes < MAX_THREADS ? lanes : MAX_THREADS;
}

/* The kernel's shape from the region's anchor (false: failed through e). */
static bool setup(decode_t *D, vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  if (!vlmc_vk_attention_decode_fits(op)) {
    vlmc_kernel_emit_fail(e, "attention: not a decode shape (static S <= %d, head dims <= %d)",
                          MAX_ROWS, MAX_DIM);
    return false;
  }
  memset(D, 0, sizeof *D);
  D->e = e;
  D->q = op->operands[0];
  D->k = op->operands[1];
  D->v = op->operands[2];
  D->cu = op->num_operands > 3 ? op->operands[3] : NULL;
  D->heads = D->q->type.dims[1].off;
  D->kv_heads = D->k->type.dims[1].off;
  D->d = D->q->type.dims[2].off;
  D->dv = D->v->type.dims[2].off;
  D->group = D->heads / D->kv_heads;
  const vlmc_attr_t *scale = vlmc_op_attr(op, "scale"), *causal = vlmc_op_attr(op, "causal");
  D->scale = scale ? scale->v.f : 1.0 / sqrt((double)D->d);
  D->causal = causal && causal->v.b;
  D->split = split_for(op);
  choose_shape(D);
  e->template_name = "attention";
  e->cost = 256 * D->group * (2 * D->d + 2 * D->dv + 16);
  return true;
}

/* Stage 1 (or the one stage): G x R invocations, (h, r) = (tid / R, tid % R). */
static void head_lanes(decode_t *D) {
  vlmc_kernel_emit_t *e = D->e;
  vlmc_vk_emit_set_workgroup(e, (int)D->threads, 1, 1, 1);
  D->tid = vlmc_vk_emit_thread_id(e, 0);
  D->h = vlmc_kernel_emit_index_op(e, "arith.divui", D->tid, idx(e, D->lanes));
  D->r = vlmc_kernel_emit_index_op(e, "arith.remui", D->tid, idx(e, D->lanes));
}

static void unit_coordinates(decode_t *D, int unit) {
  D->unit = unit;
  D->i = vlmc_kernel_emit_index_op(D->e, "arith.divui", unit, idx(D->e, D->kv_heads));
  D->g = vlmc_kernel_emit_index_op(D->e, "arith.remui", unit, idx(D->e, D->kv_heads));
}

static void declare_shared(decode_t *D) {
  D->red = vlmc_vk_emit_shared(D->e, "f32", D->threads);
  D->ps = vlmc_vk_emit_shared(D->e, "f32", D->group * D->chunk);
  D->ks = vlmc_vk_emit_shared(D->e, "f32", D->chunk * D->stride + 1);
  D->qs = vlmc_vk_emit_shared(D->e, "f32", D->group * D->d + 1); /* + a spare slot */
}

/* Stage 2: workgroup g combines head g % G of unit g / G, invocation r taking dims r, r + R',
 * ... (R' = combine_lanes(Dv)). */
static vlmc_status_t attention_decode_combine(vlmc_kernel_emit_t *e) {
  decode_t D;
  if (!setup(&D, e)) return NULL;
  D.lanes = D.threads = combine_lanes(D.dv);
  D.acc = (D.dv + D.lanes - 1) / D.lanes;
  vlmc_vk_emit_set_workgroup(e, (int)D.threads, 1, 1, 1);
  vlmc_vk_emit_set_combine_groups(e, (int)D.group);
  D.tid = D.r = vlmc_vk_emit_thread_id(e, 0);
  unit_coordinates(&D, vlmc_vk_emit_open_combine_unit(e, &D.h));
  emit_combine(&D);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}

vlmc_status_t vlmc_vk_kernel_attention_decode(vlmc_kernel_emit_t *e) {
  decode_t D;
  if (!setup(&D, e)) return NULL;
  head_lanes(&D);
  declare_shared(&D);
  if (D.split == 1) {
    unit_coordinates(&D, vlmc_vk_emit_open_group_unit(e));
    emit_unit(&D);
    vlmc_kernel_emit_line(e, "}");
    return NULL;
  }
  /* stage 1: workgroup g is part g % P of unit g / P (uniform over the workgroup) */
  vlmc_vk_emit_set_split(e, (int)D.split, D.group * (2 + D.dv), attention_decode_combine);
  int group = vlmc_vk_emit_group(e);
  int part = vlmc_kernel_emit_index_op(e, "arith.remui", group, idx(e, D.split));
  unit_coordinates(&D, vlmc_kernel_emit_index_op(e, "arith.divui", group, idx(e, D.split)));
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", vlmc_vk_emit_cmp(e, "slt", D.unit, vlmc_vk_emit_work(e)));
  emit_part(&D, part);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
