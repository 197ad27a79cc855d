/* attention for CPU devices (lavapipe): o[i, h] = sum_j softmax_j(scale * q[i, h] . k[j, g])
 * v[j, g] with g = h / (Hq / Hkv), over the keys query i may see (its segment of `cu` when
 * given, cut at key i + T - S when causal), with the same template name, work units ((query
 * row, kv head) pairs), semantics and f32 arithmetic as vlmc_vk_kernel_attention, but shaped
 * for llvmpipe: no workgroup memory, no barriers, no subgroup operations.
 *
 * Why: llvmpipe (Mesa 22.3) runs a workgroup on one CPU thread with its invocations in SIMD
 * batches of 8; a barrier is a coroutine switch of every batch, and every storage-buffer or
 * workgroup-memory load inside a loop is a per-lane scalar loop (README.md, "Lanes
 * variants"), so what counts is loads per FMA. Each invocation owns P (up to 4) slots (query
 * row, query head) and keeps their q (D floats), running max m, sum l and Dv accumulators in
 * registers; the workgroup's slots all sit on one kv head, so each k and v element is loaded
 * once (at an address the same in every invocation) for P FMAs of every lane, with no staging
 * and no barrier. q, k and v rows come four elements a load where their bindings allow
 * (quads, emit.h): a 16-byte load costs a lane what a 4-byte one does.
 *
 * A workgroup takes `rows` consecutive query rows (rows * G slots, G = Hq / Hkv: about LANES
 * * P slots in about LANES invocations; one row when G >= LANES * P or S is static 1) on
 * every kv head in turn (rows * Hkv units; a block of one row takes one unit, so a decode
 * step's kv heads spread over workgroups). The keys walked are the union of the block rows'
 * ranges, the same in every invocation, in chunks of CK keys (P * CK * (D + Dv) FMAs at most
 * UNROLLED: the chunk is unrolled, and lavapipe's LLVM compile time grows faster than the
 * code): per chunk P * CK scores (keys outside the slot's own range, or past the union, are
 * -inf), per slot one max update and rescale by exp(m_old - m_new), then the CK weighted v
 * rows added. At the end each real slot (slot < rows * G, row inside S) divides by l and
 * stores through the epilogue. A query that sees no key gets 0 / 0 = NaN, as on the cpu. */
#include <math.h>
#include <string.h>

#include "codegen/targets/vulkan/kernels.h"

enum {
  LANES = 8,          /* invocations a workgroup aims at: one llvmpipe SIMD batch (AVX2) */
  MAX_HEAD_DIM = 256,
  MAX_GROUP = 256,    /* query heads per kv head: invocations of a one-row block */
  MAX_CHUNK = 8,      /* keys per chunk (scores held in registers) */
  UNROLLED = 512,     /* P * CK * (D + Dv) FMAs per chunk, unrolled */
  MAX_INVOCATIONS = 128, /* per workgroup: Vulkan's guaranteed maxComputeWorkGroupInvocations */
  MAX_PER = 4,        /* slots per invocation: each k and v load feeds P FMAs */
  REG_FLOATS = 512,   /* P * (D + Dv) at most (beyond it, fewer slots) */
  MAX_STATE = MAX_PER * (2 + MAX_HEAD_DIM),
};

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *q, *k, *v, *cu; /* cu: NULL without segments */
  int64_t heads, kv_heads, group, d, dv;
  int64_t rows;    /* query rows per workgroup */
  int64_t slots;   /* rows * group: (row, query head) pairs of the block */
  int64_t per;     /* slots one invocation owns (P) */
  int64_t threads; /* ceil(slots / P) invocations */
  int64_t chunk;   /* keys per chunk */
  double scale;
  bool causal;
  int tid;
  int slot[MAX_PER];                        /* this invocation's slots, clamped to the last */
  int row[MAX_PER];                         /* their query rows, clamped into S */
  int key_start[MAX_PER], key_end[MAX_PER]; /* their rows' key ranges */
  int q_quads, k_quads, v_quads;            /* the input read as quads (emit.h); -1: not */
} lanes_attention_t;

/* An invocation's online-softmax states: per slot p, at p * (2 + Dv): m, l, then the Dv
 * accumulators. */
typedef struct {
  int v[MAX_STATE];
} state_t;

/* ---- small emitters ---- */

static int idx(vlmc_kernel_emit_t *e, int64_t c) { return vlmc_kernel_emit_index(e, c); }
static int add(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.addi", a, b); }
static int mul(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.muli", a, b); }
static int divu(vlmc_kernel_emit_t *e, int a, int64_t c) { return vlmc_kernel_emit_index_op(e, "arith.divui", a, idx(e, c)); }
static int remu(vlmc_kernel_emit_t *e, int a, int64_t c) { return vlmc_kernel_emit_index_op(e, "arith.remui", a, idx(e, c)); }





/* ---- the keys a query sees (as kernel_attention.c and the cpu kernel compute them) ---- */



/* The union [*start, *end) of the key ranges of rows i0 .. i0 + rows - 1 (clamped to S - 1),
 * from uniform values only, so the key loop over it and its loads stay uniform. */
static void emit_block_range(const lanes_attention_t *A, int i0, int last, int *start, int *end) {
  vlmc_kernel_emit_t *e = A->e;
  if (A->rows == 1) {
    vlmc_vk_emit_key_range(A->e, A->q, A->k, A->cu, A->causal, vlmc_kernel_emit_index_op(e, "arith.minsi", i0, last), start, end);
    return;
  }
  vlmc_vk_emit_rows_key_range(e, A->q, A->k, A->cu, A->causal, i0, last, A->rows, start, end);
}

/* ---- the state carried through the key loop ---- */

static int state_count(const lanes_attention_t *A) { return (int)(A->per * (2 + A->dv)); }
static int *slot_state(const lanes_attention_t *A, state_t *s, int64_t p) { return &s->v[p * (2 + A->dv)]; }

static void state_types(const lanes_attention_t *A, vlmc_strbuf_t *line) {
  for (int r = 0; r < state_count(A); ++r) vlmc_strbuf_puts(line, r ? ", f32" : "f32");
}

/* Opens the key loop carrying *s (*s becomes its inner values); returns its results' SSA. */
static int open_state_loop(const lanes_attention_t *A, int from, int to, int step, state_t *s, int *iv) {
  vlmc_kernel_emit_t *e = A->e;
  int results = vlmc_kernel_emit_fresh(e);
  *iv = vlmc_kernel_emit_fresh(e);
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_printf(&line, "%%v%d:%d = scf.for %%v%d = %%v%d to %%v%d step %%v%d iter_args(", results,
                     state_count(A), *iv, from, to, step);
  for (int r = 0; r < state_count(A); ++r) {
    int inner = vlmc_kernel_emit_fresh(e);
    vlmc_strbuf_printf(&line, "%s%%v%d = %%v%d", r ? ", " : "", inner, s->v[r]);
    s->v[r] = inner;
  }
  vlmc_strbuf_puts(&line, ") -> (");
  state_types(A, &line);
  vlmc_strbuf_puts(&line, ") {");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
  return results;
}

/* Yields *next, closes the loop; *out gets its results. */
static void close_state_loop(const lanes_attention_t *A, const state_t *next, int results, state_t *out) {
  vlmc_vk_emit_close_f32_loop(A->e, results, state_count(A), next->v, out->v);
}

/* ---- one chunk of keys ---- */

/* Flat index of element 0 of key (or value) row `key` on kv head kvh: uniform. */
static int kv_base(const lanes_attention_t *A, int key, int kvh, int64_t dim) {
  vlmc_kernel_emit_t *e = A->e;
  int key_head = add(e, mul(e, key, idx(e, A->kv_heads)), kvh);
  return mul(e, key_head, idx(e, dim));
}

/* Elements base .. base + n - 1 of `value` into out[]: a quad per 4 where the input is read
 * as quads (base and n multiples of 4: every row starts a quad), else one load each. */
static void load_row(const lanes_attention_t *A, const vlmc_value_t *value, int quads, int base, int64_t n,
                     int *out) {
  vlmc_kernel_emit_t *e = A->e;
  if (quads >= 0) {
    int first = divu(e, base, 4);
    for (int64_t x = 0; x < n; x += 4) vlmc_vk_emit_load_quad(e, quads, x ? add(e, first, idx(e, x / 4)) : first, out + x);
    return;
  }
  for (int64_t x = 0; x < n; ++x) out[x] = vlmc_kernel_emit_load(e, value, add(e, base, idx(e, x)));
}

/* CK keys from j0: each k row loaded once for the P slots' scores (uniform addresses), per
 * slot one max update and rescale, then each v row loaded once for the P slots' accumulators.
 * Keys past T are read at T - 1 and masked by the slots' ranges. */
static void emit_chunk(const lanes_attention_t *A, const int (*q)[MAX_HEAD_DIM], int j0, int kvh,
                       int last_key, state_t *s) {
  vlmc_kernel_emit_t *e = A->e;
  int scores[MAX_PER][MAX_CHUNK], bases[MAX_CHUNK], kx[MAX_HEAD_DIM], m[MAX_PER];
  for (int64_t p = 0; p < A->per; ++p) m[p] = slot_state(A, s, p)[0];
  for (int64_t c = 0; c < A->chunk; ++c) {
    int key = add(e, j0, idx(e, c));
    bases[c] = vlmc_kernel_emit_index_op(e, "arith.minsi", key, last_key);
    int base = kv_base(A, bases[c], kvh, A->d);
    load_row(A, A->k, A->k_quads, base, A->d, kx);
    for (int64_t p = 0; p < A->per; ++p) {
      int dot = vlmc_kernel_emit_float_op(e, "arith.mulf", q[p][0], kx[0], 0);
      for (int64_t x = 1; x < A->d; ++x) dot = vlmc_vk_emit_fma(e, q[p][x], kx[x], dot);
      int score = vlmc_kernel_emit_float_op(e, "arith.mulf", dot, vlmc_kernel_emit_f32(e, A->scale), 0);
      int ok = vlmc_kernel_emit_fresh(e);
      int from_start = vlmc_vk_emit_cmp(e, "sge", key, A->key_start[p]);
      int before_end = vlmc_vk_emit_cmp(e, "slt", key, A->key_end[p]);
      vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", ok, from_start,
                            before_end);
      scores[p][c] = vlmc_vk_emit_select(e, ok, score, vlmc_kernel_emit_f32(e, -INFINITY), "f32");
      m[p] = vlmc_kernel_emit_float_op(e, "arith.maximumf", m[p], scores[p][c], 0);
    }
  }
  for (int64_t p = 0; p < A->per; ++p) {
    int *st = slot_state(A, s, p);
    int alpha = vlmc_vk_emit_softmax_weight(e, st[0], m[p]);
    st[0] = m[p];
    st[1] = vlmc_kernel_emit_float_op(e, "arith.mulf", st[1], alpha, 0);
    for (int64_t x = 0; x < A->dv; ++x) st[2 + x] = vlmc_kernel_emit_float_op(e, "arith.mulf", st[2 + x], alpha, 0);
  }
  for (int64_t c = 0; c < A->chunk; ++c) {
    int w[MAX_PER];
    for (int64_t p = 0; p < A->per; ++p) {
      int *st = slot_state(A, s, p);
      w[p] = vlmc_vk_emit_softmax_weight(e, scores[p][c], m[p]);
      st[1] = vlmc_kernel_emit_float_op(e, "arith.addf", st[1], w[p], 0);
    }
    int base = kv_base(A, bases[c], kvh, A->dv), vx[MAX_HEAD_DIM];
    load_row(A, A->v, A->v_quads, base, A->dv, vx);
    for (int64_t x = 0; x < A->dv; ++x) {
      for (int64_t p = 0; p < A->per; ++p) {
        int *st = slot_state(A, s, p);
        st[2 + x] = vlmc_vk_emit_fma(e, w[p], vx[x], st[2 + x]);
      }
    }
  }
}

/* ---- one block on one kv head ---- */

/* Query head of slot p on kv head kvh. */
static int slot_head(const lanes_attention_t *A, int64_t p, int kvh) {
  vlmc_kernel_emit_t *e = A->e;
  int group_base = mul(e, kvh, idx(e, A->group));
  return add(e, group_base, remu(e, A->slot[p], A->group));
}

/* Flat query head (over [S, Hq]) of slot p on kv head kvh in query row `row`. */
static int row_head(const lanes_attention_t *A, int64_t p, int row, int kvh) {
  vlmc_kernel_emit_t *e = A->e;
  int row_base = mul(e, row, idx(e, A->heads)), head = slot_head(A, p, kvh);
  return add(e, row_base, head);
}

/* This invocation's slots on kv head kvh: their queries into registers, the keys of the
 * block's union [start, end) in chunks, then the outputs of the real slots (slot < slots,
 * row inside S). */
static void emit_block(const lanes_attention_t *A, int i0, int kvh, int start, int end) {
  vlmc_kernel_emit_t *e = A->e;
  int q[MAX_PER][MAX_HEAD_DIM];
  state_t init, s;
  for (int64_t p = 0; p < A->per; ++p) {
    int q_head = row_head(A, p, A->row[p], kvh);
    int q_base = mul(e, q_head, idx(e, A->d));
    load_row(A, A->q, A->q_quads, q_base, A->d, q[p]);
    int *st = slot_state(A, &init, p);
    st[0] = vlmc_kernel_emit_f32(e, -INFINITY);
    st[1] = vlmc_kernel_emit_f32(e, 0);
    for (int64_t x = 0; x < A->dv; ++x) st[2 + x] = vlmc_kernel_emit_f32(e, 0);
  }
  s = init;
  int t_rows = vlmc_kernel_emit_dim(e, A->k->type.dims[0]);
  int last_key = vlmc_kernel_emit_index_op(e, "arith.subi", t_rows, idx(e, 1));
  int j0;
  state_t out;
  int keys = open_state_loop(A, start, end, idx(e, A->chunk), &s, &j0);
  emit_chunk(A, (const int (*)[MAX_HEAD_DIM])q, j0, kvh, last_key, &s);
  close_state_loop(A, &s, keys, &out);
  for (int r = 0; r < state_count(A); ++r) /* no key at all: keep the initial state */
    out.v[r] = vlmc_vk_emit_guard_empty(e, start, end, out.v[r], init.v[r], "f32");
  int s_rows = vlmc_kernel_emit_dim(e, A->q->type.dims[0]);
  for (int64_t p = 0; p < A->per; ++p) {
    int slot = add(e, A->tid, idx(e, p * A->threads)); /* unclamped: stored only when real */
    int row = add(e, i0, divu(e, slot, A->group));
    int store = vlmc_kernel_emit_fresh(e);
    int real_slot = vlmc_vk_emit_cmp(e, "slt", slot, idx(e, A->slots));
    int real_row = vlmc_vk_emit_cmp(e, "slt", row, s_rows);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", store, real_slot,
                          real_row);
    vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", store);
    int o_head = row_head(A, p, row, kvh);
    int o_base = mul(e, o_head, idx(e, A->dv));
    const int *st = slot_state(A, &out, p);
    for (int64_t x = 0; x < A->dv; ++x) {
      int y = vlmc_kernel_emit_float_op(e, "arith.divf", st[2 + x], st[1], 0);
      vlmc_kernel_emit_finish_element(e, y, add(e, o_base, idx(e, x)));
    }
    vlmc_kernel_emit_line(e, "}");
  }
}

/* ---- the template ---- */

/* Rows per block (about LANES * P slots, at most a static S), slots per invocation (P, while
 * P * (D + Dv) stays in REG_FLOATS) and keys per chunk (the chunk's code is unrolled). */
static void choose_block(lanes_attention_t *A) {
  const vlmc_type_t *qt = &A->q->type;
  int64_t target = LANES * MAX_PER;
  A->rows = A->group >= target ? 1 : target / A->group;
  if (vlmc_dim_is_static(qt->dims[0]) && qt->dims[0].off >= 1 && A->rows > qt->dims[0].off)
    A->rows = qt->dims[0].off;
  A->slots = A->rows * A->group;
  A->per = 1;
  while (A->per < MAX_PER && A->per * 2 <= A->slots && A->per * 2 * (A->d + A->dv) <= REG_FLOATS)
    A->per *= 2;
  A->threads = (A->slots + A->per - 1) / A->per;
  A->chunk = UNROLLED / (A->per * (A->d + A->dv));
  if (A->chunk > MAX_CHUNK) A->chunk = MAX_CHUNK;
  if (A->chunk < 1) A->chunk = 1;
}

/* q, k and v straight from distinct f32 / f16 bindings are read as quads when their head dim
 * is a multiple of 4 (each k and v element still feeds P FMAs; a quad load costs llvmpipe what
 * an element load does). */
static int quads_for(lanes_attention_t *A, const vlmc_value_t *value, int64_t dim) {
  int input = vlmc_kernel_emit_source_input(A->e, value);
  const vlmc_value_t *all[3] = {A->q, A->k, A->v};
  for (int i = 0; i < 3; ++i)
    if (all[i] != value && vlmc_kernel_emit_source_input(A->e, all[i]) == input) return -1;
  if (dim % 4 || !vlmc_vk_emit_can_declare_quads(A->e, input)) return -1;
  vlmc_vk_emit_declare_quads(A->e, input);
  return input;
}

/* Refuses, by name, what the kernel cannot take; fills the shape fields. */
static bool check_shapes(lanes_attention_t *A) {
  vlmc_kernel_emit_t *e = A->e;
  const vlmc_type_t *qt = &A->q->type, *kt = &A->k->type, *vt = &A->v->type;
  if (qt->rank != 3 || kt->rank != 3 || vt->rank != 3 || !vlmc_kernel_emit_static_dims(qt, 1) ||
      !vlmc_kernel_emit_static_dims(kt, 1) || !vlmc_kernel_emit_static_dims(vt, 1)) {
    vlmc_kernel_emit_fail(e, "attention: the vulkan kernel needs static head counts and head dims "
                          "(q [S, Hq, D], k and v [T, Hkv, D]; only S and T may be symbolic)");
    return false;
  }
  A->heads = qt->dims[1].off;
  A->kv_heads = kt->dims[1].off;
  A->d = qt->dims[2].off;
  A->dv = vt->dims[2].off;
  if (A->kv_heads <= 0 || A->heads % A->kv_heads || A->d < 1 || A->dv < 1 || A->d > MAX_HEAD_DIM ||
      A->dv > MAX_HEAD_DIM) {
    vlmc_kernel_emit_fail(e, "attention: the vulkan kernel takes head dims from 1 to %d and query "
                          "heads a multiple of the kv heads (got D = %lld, Dv = %lld, %lld heads "
                          "over %lld)", MAX_HEAD_DIM, (long long)A->d, (long long)A->dv,
                          (long long)A->heads, (long long)A->kv_heads);
    return false;
  }
  if (A->cu && A->cu->type.rank != 1) {
    vlmc_kernel_emit_fail(e, "attention: the segment boundaries must be a vector (rank 1)");
    return false;
  }
  A->group = A->heads / A->kv_heads;
  if (A->group > MAX_GROUP) {
    vlmc_kernel_emit_fail(e, "attention: %lld query heads per kv head do not fit the vulkan kernel "
                          "(at most %d: one invocation per query head)", (long long)A->group, MAX_GROUP);
    return false;
  }
  return true;
}

vlmc_status_t vlmc_vk_kernel_attention_lanes(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  lanes_attention_t A;
  memset(&A, 0, sizeof A);
  A.e = e;
  A.q = op->operands[0];
  A.k = op->operands[1];
  A.v = op->operands[2];
  A.cu = op->num_operands > 3 ? op->operands[3] : NULL;
  if (!check_shapes(&A)) return NULL;
  choose_block(&A);
  A.q_quads = quads_for(&A, A.q, A.d);
  A.k_quads = quads_for(&A, A.k, A.d);
  A.v_quads = quads_for(&A, A.v, A.dv);
  const vlmc_attr_t *scale = vlmc_op_attr(op, "scale"), *causal = vlmc_op_attr(op, "causal");
  A.scale = scale ? scale->v.f : 1.0 / sqrt((double)A.d);
  A.causal = causal && causal->v.b;
  e->template_name = "attention";
  e->cost = 256 * A.group * (2 * A.d + 2 * A.dv + 16);
  /* A block of one row takes one (row, kv head) unit; a block of several rows takes those
   * rows on every kv head (the units of a row are its kv heads, consecutive), one set of
   * `threads` invocations per kv head side by side (so every loop of a SIMD batch runs once
   * per workgroup: llvmpipe stops a batch's loops after 65535 iterations in all), or in turn
   * when they would pass 128 invocations. */
  int64_t units = A.rows == 1 ? 1 : A.rows * A.kv_heads;
  bool heads_side_by_side = A.rows > 1 && A.threads * A.kv_heads <= MAX_INVOCATIONS;
  vlmc_vk_emit_set_workgroup(e, (int)(heads_side_by_side ? A.threads * A.kv_heads : A.threads), 1, 1,
                             (int)units);
  int invocation = vlmc_vk_emit_thread_id(e, 0);
  A.tid = heads_side_by_side ? remu(e, invocation, A.threads) : invocation;
  int first, end;
  vlmc_vk_emit_group_units(e, &first, &end);
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", vlmc_vk_emit_cmp(e, "slt", first, end)); /* uniform */
  int i0 = divu(e, first, A.kv_heads);
  int s_rows = vlmc_kernel_emit_dim(e, A.q->type.dims[0]);
  int last = vlmc_kernel_emit_index_op(e, "arith.subi", s_rows, idx(e, 1));
  for (int64_t p = 0; p < A.per; ++p) {
    int slot = add(e, A.tid, idx(e, p * A.threads));
    A.slot[p] = vlmc_kernel_emit_index_op(e, "arith.minsi", slot, idx(e, A.slots - 1));
    A.row[p] = vlmc_kernel_emit_index_op(e, "arith.minsi", add(e, i0, divu(e, A.slot[p], A.group)), last);
    vlmc_vk_emit_key_range(A.e, A.q, A.k, A.cu, A.causal, A.row[p], &A.key_start[p], &A.key_end[p]);
  }
  int start, stop;
  emit_block_range(&A, i0, last, &start, &stop);
  if (A.rows == 1) {
    emit_block(&A, i0, remu(e, first, A.kv_heads), start, stop);
  } else if (heads_side_by_side) {
    emit_block(&A, i0, divu(e, invocation, A.threads), start, stop);
  } else {
    int zero = idx(e, 0), kv_heads = idx(e, A.kv_heads), one = idx(e, 1);
    int kvh = vlmc_kernel_emit_for(e, zero, kv_heads, one);
    emit_block(&A, i0, kvh, start, stop);
    vlmc_kernel_emit_line(e, "}");
  }
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
