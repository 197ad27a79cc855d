/* attention: o[i, h] = sum_j softmax_j(scale * q[i, h] . k[j, g]) v[j, g] with g = h / (Hq /
 * Hkv), over the keys query i may see: its segment of `cu` (when given), cut at key
 * i + T - S (when causal). The reference (reference/exec_attention.c) takes scores, softmax and
 * sums in f64; this kernel works in f32 in one pass over the keys (flash-style online
 * softmax): a running max m, a running sum l of exp(score - m) and the unnormalised output,
 * both rescaled by exp(m_old - m_new) when the max grows, divided by l at the end.
 *
 * Work units are (query row, kv head) pairs, u = row * Hkv + kv head (artifact/kernel_rules.c;
 * the vulkan target uses the same rule). A kernel whose q has more than one row (prefill,
 * vision) does the units of a call as tiles of queries x keys (emit_tiled, below); a decode
 * step (one row, S static 1) as follows.
 *
 * One row: the kv head's group of Hq / Hkv query heads
 * takes the keys in tiles (as many keys as keep k and v within 64 KiB, in cache), each head in
 * turn, so a decode step reads its cache once rather than once per query head (measured: 2.7x
 * faster at 30k cached keys, 16 heads over 2); the states wait in a small stack buffer
 * between tiles. Without GQA a unit is one (row, head) and takes all its keys in one tile.
 * A decode step has Hkv units to split. Under a causal mask the rows are dealt zigzag (0, S-1,
 * 1, S-2, ...) so that each thread's contiguous range of units gets as many keys as another's.
 *
 * Per head and tile, the keys go in blocks of VL (the vector width): VL interleaved dot
 * products (D static: vectors and a scalar tail) summed into one vector of scores, one vector
 * exp for the block (an inline polynomial: a libm call per score would also spill every
 * vector register, all being caller-saved), the rescale only in the rare blocks that raise the
 * max; then the tile's last keys one at a time. q and the accumulator (Dv floats) are SSA
 * values: registers, or LLVM's spills to the stack when D / VL is large. l is a vector of VL
 * partial sums, added up at the end.
 *
 * A query that sees no key (an empty segment) gets 0 / 0 = NaN, as HF would; the reference
 * refuses such inputs. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codegen/targets/cpu/kernels.h"

enum {
  MAX_HEAD_DIM = 256, /* D and Dv: every q element and accumulator is an SSA value */
  MAX_BLOCK = 16,     /* keys per block: the vector width */
  /* State slots: the max (f32), the sums (a vector), then the accumulator. */
  M = 0,
  L = 1,
  ACC = 2,
  MAX_STATE = ACC + MAX_HEAD_DIM,
};

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *q, *k, *v, *cu; /* cu: NULL without segments */
  int64_t heads, group, d, dv;        /* group: query heads per kv head */
  int64_t k_row, v_row;               /* floats per key in k and in v: Hkv * D, Hkv * Dv */
  int vl;
  char vec[32];                       /* "vector<VLxf32>" */
  double scale;
  bool causal;
  int64_t tile;                       /* keys per tile */
} attention_t;

/* One head's online-softmax state: m, l, then Dv / VL vectors and Dv % VL scalars. */
typedef struct {
  int v[MAX_STATE];
} state_t;

/* One head's query: D / VL vectors then D % VL scalars, and its kv head's offset in a key. */
typedef struct {
  int q[MAX_HEAD_DIM];
  int k_base, v_base;
} query_t;

/* ---- small emitters ---- */

/* a + c as an index, for a constant c. */
static int idx_add(vlmc_kernel_emit_t *e, int a, int64_t c) {
  return c ? vlmc_kernel_emit_index_op(e, "arith.addi", a, vlmc_kernel_emit_index(e, c)) : a;
}

static int idx_select(vlmc_kernel_emit_t *e, int cond, int a, int b) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : index",
                        v, cond, a, b);
  return v;
}

/* `scf.for %iv = 0 to %to step <step> {` for an index SSA `to`, a constant step; returns %iv.
 * Its constants are made one statement each, 0 then the step, so that the kernel text does not
 * depend on the order the compiler that built vlmc evaluates arguments in. */
static int open_loop_to(vlmc_kernel_emit_t *e, int to, int64_t step) {
  int zero = vlmc_kernel_emit_index(e, 0), by = vlmc_kernel_emit_index(e, step);
  return vlmc_kernel_emit_for(e, zero, to, by);
}

/* The same over the constant count n: 0, n, then the step. */
static int open_loop_const(vlmc_kernel_emit_t *e, int64_t n, int64_t step) {
  int zero = vlmc_kernel_emit_index(e, 0), to = vlmc_kernel_emit_index(e, n);
  int by = vlmc_kernel_emit_index(e, step);
  return vlmc_kernel_emit_for(e, zero, to, by);
}

static int vec_op(const attention_t *A, const char *op, int a, int b) {
  int v = vlmc_kernel_emit_fresh(A->e);
  vlmc_kernel_emit_line(A->e, VLMC_SSA " = %s " VLMC_SSA ", " VLMC_SSA " : %s", v, op, a, b, A->vec);
  return v;
}

static int vec_fma(const attention_t *A, int a, int b, int c) {
  int v = vlmc_kernel_emit_fresh(A->e);
  vlmc_kernel_emit_line(A->e, VLMC_SSA " = vector.fma " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : %s",
                        v, a, b, c, A->vec);
  return v;
}

static int splat(const attention_t *A, int scalar) {
  int v = vlmc_kernel_emit_fresh(A->e);
  vlmc_kernel_emit_line(A->e, VLMC_SSA " = vector.broadcast " VLMC_SSA " : f32 to %s", v, scalar,
                        A->vec);
  return v;
}

static int splat_const(const attention_t *A, double value) {
  return splat(A, vlmc_kernel_emit_f32(A->e, value));
}

static int lane(const attention_t *A, int vector, int at) {
  int v = vlmc_kernel_emit_fresh(A->e);
  vlmc_kernel_emit_line(A->e, VLMC_SSA " = vector.extract " VLMC_SSA "[%d] : f32 from %s", v, vector,
                        at, A->vec);
  return v;
}

static int insert(const attention_t *A, int scalar, int vector, int at) {
  int v = vlmc_kernel_emit_fresh(A->e);
  vlmc_kernel_emit_line(A->e, VLMC_SSA " = vector.insert " VLMC_SSA ", " VLMC_SSA " [%d] : f32 into "
                           "%s", v, scalar, vector, at, A->vec);
  return v;
}

/* Lanes of (a, b) concatenated: lane i of the result is lane mask[i]. */
static int shuffle(const attention_t *A, int a, int b, const int *mask) {
  char text[256];
  size_t used = 0;
  for (int i = 0; i < A->vl; ++i)
    used += (size_t)snprintf(text + used, sizeof text - used, "%s%d", i ? ", " : "", mask[i]);
  int v = vlmc_kernel_emit_fresh(A->e);
  vlmc_kernel_emit_line(A->e, VLMC_SSA " = vector.shuffle " VLMC_SSA ", " VLMC_SSA " [%s] : %s, %s", v,
                        a, b, text, A->vec, A->vec);
  return v;
}

/* max(a, b) as a compare and a select, which x86 does in one maxps / maxss; arith.maximumf's
 * NaN and signed-zero rules would cost a blend or a branch (scores have no NaN). */
static int emit_max(const attention_t *A, int a, int b, bool vector) {
  vlmc_kernel_emit_t *e = A->e;
  int gt = vlmc_kernel_emit_fresh(e), v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpf ogt, " VLMC_SSA ", " VLMC_SSA " : %s", gt, a, b,
                        vector ? A->vec : "f32");
  if (vector)
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA
                          " : vector<%dxi1>, %s", v, gt, a, b, A->vl, A->vec);
  else
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : f32",
                          v, gt, a, b);
  return v;
}

/* The largest lane of v: log2(VL) swaps of halves, quarters, ... (VL a power of two). */
static int emit_max_lanes(const attention_t *A, int v) {
  int mask[MAX_BLOCK];
  for (int w = A->vl / 2; w >= 1; w /= 2) {
    for (int i = 0; i < A->vl; ++i) mask[i] = i ^ w;
    v = emit_max(A, v, shuffle(A, v, v, mask), true);
  }
  return lane(A, v, 0);
}

/* The lane sums of VL vectors as one vector (lane b: the sum of dot[b]), cheaper than VL
 * horizontal reductions: pairs are merged log2(VL) times, even lanes of (a, b) plus odd lanes,
 * which keeps the keys in order. Overwrites dot. */
static int emit_transpose_sum(const attention_t *A, int *dot) {
  int even[MAX_BLOCK], odd[MAX_BLOCK];
  for (int i = 0; i < A->vl; ++i) {
    even[i] = 2 * i;
    odd[i] = 2 * i + 1;
  }
  for (int n = A->vl; n > 1; n /= 2)
    for (int i = 0; i < n / 2; ++i) {
      int evens = shuffle(A, dot[2 * i], dot[2 * i + 1], even);
      int odds = shuffle(A, dot[2 * i], dot[2 * i + 1], odd);
      dot[i] = vec_op(A, "arith.addf", evens, odds);
    }
  return dot[0];
}

/* exp of each lane (vlmc_cpu_emit_exp): the scores' arguments are <= 0, a score minus a max at
 * least as large; -inf (the first block's old max) gives ~1.6e-38, not 0: the first rescale
 * multiplies zeros. */
static int emit_exp(const attention_t *A, int x) {
  return vlmc_cpu_emit_exp(A->e, x, A->vl);
}

/* ---- the keys a query sees ---- */

/* [start, end) of the keys query row i sees: its segment (the last boundary <= i up to the
 * first one > i; boundaries are few, a linear scan), cut by the causal limit, never reversed. */
static void emit_key_range(const attention_t *A, int i, int *out_start, int *out_end) {
  vlmc_kernel_emit_t *e = A->e;
  const vlmc_type_t *qt = &A->q->type, *kt = &A->k->type;
  int start = vlmc_kernel_emit_index(e, 0), end = vlmc_kernel_emit_dim(e, kt->dims[0]);
  if (A->cu) {
    int w = vlmc_kernel_emit_fresh(e), s_in = vlmc_kernel_emit_fresh(e), e_in = vlmc_kernel_emit_fresh(e);
    int s_out = vlmc_kernel_emit_fresh(e), e_out = vlmc_kernel_emit_fresh(e);
    int bounds = vlmc_kernel_emit_dim(e, A->cu->type.dims[0]), one = vlmc_kernel_emit_index(e, 1);
    vlmc_kernel_emit_line(e, VLMC_SSA ", " VLMC_SSA " = scf.for " VLMC_SSA " = " VLMC_SSA " to "
                          VLMC_SSA " step " VLMC_SSA " iter_args(" VLMC_SSA " = " VLMC_SSA ", "
                          VLMC_SSA " = " VLMC_SSA ") -> (index, index) {",
                       s_out, e_out, w, start, bounds, one, s_in, start, e_in, end);
    int bound = vlmc_kernel_emit_fresh(e), le = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : i64 to index", bound,
                          vlmc_kernel_emit_load(e, A->cu, w));
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi sle, " VLMC_SSA ", " VLMC_SSA " : index", le,
                          bound, i);
    int s_next = idx_select(e, le, bound, s_in);
    int e_next = idx_select(e, le, e_in, vlmc_kernel_emit_index_op(e, "arith.minsi", e_in, bound));
    vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA ", " VLMC_SSA " : index, index", s_next, e_next);
    vlmc_kernel_emit_line(e, "}");
    start = s_out;
    end = e_out;
  }
  if (A->causal) { /* keys j <= i + T - S */
    int t1 = idx_add(e, vlmc_kernel_emit_dim(e, kt->dims[0]), 1);
    int shifted = vlmc_kernel_emit_index_op(e, "arith.addi", i, t1);
    int limit = vlmc_kernel_emit_index_op(e, "arith.subi", shifted, vlmc_kernel_emit_dim(e, qt->dims[0]));
    end = vlmc_kernel_emit_index_op(e, "arith.minsi", end, limit);
  }
  *out_start = start;
  *out_end = vlmc_kernel_emit_index_op(e, "arith.maxsi", end, start);
}

/* ---- the online-softmax state ---- */

static int state_size(const attention_t *A) {
  return ACC + (int)(A->dv / A->vl + A->dv % A->vl);
}

static bool slot_is_vector(const attention_t *A, int s) {
  return s == L || (s >= ACC && s < ACC + A->dv / A->vl);
}

static void state_names(const attention_t *A, const state_t *st, vlmc_strbuf_t *line) {
  for (int s = 0; s < state_size(A); ++s)
    vlmc_strbuf_printf(line, "%s%%v%d", s ? ", " : "", st->v[s]);
}

static void state_types(const attention_t *A, vlmc_strbuf_t *line) {
  for (int s = 0; s < state_size(A); ++s)
    vlmc_strbuf_printf(line, "%s%s", s ? ", " : "", slot_is_vector(A, s) ? A->vec : "f32");
}

static void fresh_state(const attention_t *A, state_t *st) {
  for (int s = 0; s < state_size(A); ++s) st->v[s] = vlmc_kernel_emit_fresh(A->e);
}

static void emit_yield(const attention_t *A, const state_t *st) {
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_puts(&line, "scf.yield ");
  state_names(A, st, &line);
  vlmc_strbuf_puts(&line, " : ");
  state_types(A, &line);
  vlmc_kernel_emit_line(A->e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
}

/* ---- one block of keys ---- */

/* q . k over the scalar tail of D (D % VL elements) of the key at `row`. */
static int emit_tail_dot(const attention_t *A, const query_t *q, int row) {
  vlmc_kernel_emit_t *e = A->e;
  int64_t vecs = A->d / A->vl;
  int s = vlmc_kernel_emit_f32(e, 0);
  for (int64_t t = vecs * A->vl; t < A->d; ++t) {
    int ks = vlmc_kernel_emit_load(e, A->k, idx_add(e, row, t));
    s = vlmc_kernel_emit_float_op(e, "arith.addf", s, vlmc_kernel_emit_float_op(e, "arith.mulf", q->q[vecs + t - vecs * A->vl], ks, 0), 0);
  }
  return s;
}

/* Lane b < n of the result: scale * q . k[j + b] (the other lanes 0); *out_max: the largest.
 * The n dot products go chunk by chunk, interleaved, so that their chains overlap. */
static int emit_scores(const attention_t *A, const query_t *q, int j, int n, int *out_max) {
  vlmc_kernel_emit_t *e = A->e;
  int64_t vecs = A->d / A->vl;
  int base = vlmc_kernel_emit_index_op(e, "arith.addi", vlmc_kernel_emit_index_op(e, "arith.muli", j, vlmc_kernel_emit_index(e, A->k_row)),
                    q->k_base);
  int row[MAX_BLOCK], dot[MAX_BLOCK];
  for (int b = 0; b < n; ++b) row[b] = idx_add(e, base, b * A->k_row);
  for (int64_t c = 0; c < vecs; ++c)
    for (int b = 0; b < n; ++b) {
      int kv = vlmc_cpu_emit_load_vector(e, A->k, idx_add(e, row[b], c * A->vl), A->vl);
      dot[b] = c ? vec_fma(A, q->q[c], kv, dot[b]) : vec_op(A, "arith.mulf", q->q[c], kv);
    }
  int scores = vlmc_cpu_emit_zero_vector(e, A->vl);
  if (n == A->vl && vecs) {
    scores = emit_transpose_sum(A, dot);
  } else if (vecs) {
    for (int b = 0; b < n; ++b)
      scores = insert(A, vlmc_cpu_emit_reduce_add(e, dot[b], A->vl), scores, b);
  }
  if (A->d % A->vl) {
    int tail = vlmc_cpu_emit_zero_vector(e, A->vl);
    for (int b = 0; b < n; ++b) tail = insert(A, emit_tail_dot(A, q, row[b]), tail, b);
    scores = vec_op(A, "arith.addf", scores, tail);
  }
  scores = vec_op(A, "arith.mulf", scores, splat_const(A, A->scale));
  if (n == A->vl) {
    *out_max = emit_max_lanes(A, scores);
  } else {
    *out_max = lane(A, scores, 0);
    for (int b = 1; b < n; ++b) *out_max = emit_max(A, *out_max, lane(A, scores, b), false);
  }
  return scores;
}

/* The state with max(m, block_max) as its max: when the block raises the max, l and the
 * accumulator are scaled by exp(m - block_max); most blocks after the first few do not, and
 * skip that exp and the Dv / VL multiplies. */
static void emit_rescale(const attention_t *A, const state_t *in, int block_max, state_t *out) {
  vlmc_kernel_emit_t *e = A->e;
  int grow = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpf ogt, " VLMC_SSA ", " VLMC_SSA " : f32", grow,
                        block_max, in->v[M]);
  fresh_state(A, out);
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  state_names(A, out, &line);
  vlmc_strbuf_printf(&line, " = scf.if %%v%d -> (", grow);
  state_types(A, &line);
  vlmc_strbuf_puts(&line, ") {");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
  int factor = emit_exp(A, splat(A, vlmc_kernel_emit_float_op(e, "arith.subf", in->v[M], block_max, 0)));
  int c = lane(A, factor, 0);
  state_t scaled;
  scaled.v[M] = block_max;
  for (int s = L; s < state_size(A); ++s)
    scaled.v[s] = slot_is_vector(A, s) ? vec_op(A, "arith.mulf", in->v[s], factor)
                                       : vlmc_kernel_emit_float_op(e, "arith.mulf", in->v[s], c, 0);
  emit_yield(A, &scaled);
  vlmc_kernel_emit_line(e, "} else {");
  emit_yield(A, in);
  vlmc_kernel_emit_line(e, "}");
}

/* The state after keys j .. j+n-1 (n <= VL): the scores, the max raised (and the state
 * rescaled) if need be, the weights exp(score - max) by one vector exp, the weighted values
 * added. */
static void emit_block(const attention_t *A, const query_t *q, int j, int n, const state_t *in,
                       state_t *out) {
  vlmc_kernel_emit_t *e = A->e;
  int block_max;
  int scores = emit_scores(A, q, j, n, &block_max);
  state_t st;
  emit_rescale(A, in, block_max, &st);
  int p = emit_exp(A, vec_op(A, "arith.subf", scores, splat(A, st.v[M])));
  int weight[MAX_BLOCK], wv[MAX_BLOCK], row[MAX_BLOCK], mask[MAX_BLOCK];
  int base = vlmc_kernel_emit_index_op(e, "arith.addi", vlmc_kernel_emit_index_op(e, "arith.muli", j, vlmc_kernel_emit_index(e, A->v_row)),
                    q->v_base);
  int real = vlmc_cpu_emit_zero_vector(e, A->vl); /* p without the lanes >= n */
  for (int b = 0; b < n; ++b) {
    row[b] = idx_add(e, base, b * A->v_row);
    weight[b] = lane(A, p, b);
    for (int i = 0; i < A->vl; ++i) mask[i] = b;
    wv[b] = shuffle(A, p, p, mask);
    if (n < A->vl) real = insert(A, weight[b], real, b);
  }
  out->v[M] = st.v[M];
  out->v[L] = vec_op(A, "arith.addf", st.v[L], n < A->vl ? real : p);
  int64_t vecs = A->dv / A->vl;
  for (int64_t k = 0; k < vecs; ++k) {
    int acc = st.v[ACC + k];
    for (int b = 0; b < n; ++b) {
      int vv = vlmc_cpu_emit_load_vector(e, A->v, idx_add(e, row[b], k * A->vl), A->vl);
      acc = vec_fma(A, wv[b], vv, acc);
    }
    out->v[ACC + k] = acc;
  }
  for (int64_t t = vecs * A->vl; t < A->dv; ++t) {
    int slot = ACC + (int)(vecs + t - vecs * A->vl);
    int acc = st.v[slot];
    for (int b = 0; b < n; ++b) {
      int vs = vlmc_kernel_emit_load(e, A->v, idx_add(e, row[b], t));
      acc = vlmc_kernel_emit_float_op(e, "arith.addf", acc, vlmc_kernel_emit_float_op(e, "arith.mulf", weight[b], vs, 0), 0);
    }
    out->v[slot] = acc;
  }
}

/* ---- loops over the keys ---- */

/* `%outer.. = scf.for %j = from to to step keys iter_args(%inner.. = %init..) -> (..) {`, one
 * block of `keys` keys at %j, the yield, the closing brace. */
static void emit_key_loop(const attention_t *A, const query_t *q, int from, int to, int keys,
                          const state_t *init, state_t *outer) {
  vlmc_kernel_emit_t *e = A->e;
  state_t inner, next;
  int j = vlmc_kernel_emit_fresh(e);
  fresh_state(A, outer);
  fresh_state(A, &inner);
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  state_names(A, outer, &line);
  vlmc_strbuf_printf(&line, " = scf.for %%v%d = %%v%d to %%v%d step %%v%d iter_args(", j, from, to,
                     vlmc_kernel_emit_index(e, keys));
  for (int s = 0; s < state_size(A); ++s)
    vlmc_strbuf_printf(&line, "%s%%v%d = %%v%d", s ? ", " : "", inner.v[s], init->v[s]);
  vlmc_strbuf_puts(&line, ") -> (");
  state_types(A, &line);
  vlmc_strbuf_puts(&line, ") {");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
  emit_block(A, q, j, keys, &inner, &next);
  emit_yield(A, &next);
  vlmc_kernel_emit_line(e, "}");
}

/* ---- the state in memory, between key tiles ---- */

/* Floats per head in the state buffer: m, l (VL lanes, from offset VL), the accumulator (from
 * 2 VL), each vector at a multiple of VL. */
static int64_t state_stride(const attention_t *A) {
  return 2 * A->vl + (A->dv + A->vl - 1) / A->vl * A->vl;
}

/* Where slot s lies in a head's part of the buffer. */
static int64_t state_slot_offset(const attention_t *A, int s) {
  int64_t vecs = A->dv / A->vl, k = s - ACC;
  if (s == M) return 0;
  if (s == L) return A->vl;
  return 2 * A->vl + (k < vecs ? k * A->vl : vecs * A->vl + (k - vecs));
}

/* Stores head g's state into the buffer (st) or loads it (st NULL: into *out). */
static void emit_state_move(const attention_t *A, int buf, int g, const state_t *st,
                            state_t *out) {
  vlmc_kernel_emit_t *e = A->e;
  char type[48];
  snprintf(type, sizeof type, "memref<%lldxf32>", (long long)(A->group * state_stride(A)));
  int base = vlmc_kernel_emit_index_op(e, "arith.muli", g, vlmc_kernel_emit_index(e, state_stride(A)));
  for (int s = 0; s < state_size(A); ++s) {
    int at = idx_add(e, base, state_slot_offset(A, s));
    bool vector = slot_is_vector(A, s);
    if (st) {
      vlmc_kernel_emit_line(e, "%s " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : %s%s%s",
                            vector ? "vector.store" : "memref.store", st->v[s], buf, at, type,
                            vector ? ", " : "", vector ? A->vec : "");
      continue;
    }
    out->v[s] = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = %s " VLMC_SSA "[" VLMC_SSA "] : %s%s%s", out->v[s],
                          vector ? "vector.load" : "memref.load", buf, at, type, vector ? ", " : "",
                          vector ? A->vec : "");
  }
}

/* ---- one work unit ---- */

/* The query row of unit row `r`: r itself, or under a causal mask 0, S-1, 1, S-2, ... */
static int emit_query_row(const attention_t *A, int r) {
  vlmc_kernel_emit_t *e = A->e;
  if (!A->causal) return r;
  int two = vlmc_kernel_emit_index(e, 2), one = vlmc_kernel_emit_index(e, 1);
  int half = vlmc_kernel_emit_index_op(e, "arith.divui", r, two);
  int odd = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi eq, " VLMC_SSA ", " VLMC_SSA " : index", odd,
                        vlmc_kernel_emit_index_op(e, "arith.remui", r, two), one);
  int last = vlmc_kernel_emit_index_op(e, "arith.subi", vlmc_kernel_emit_dim(e, A->q->type.dims[0]), one);
  return idx_select(e, odd, vlmc_kernel_emit_index_op(e, "arith.subi", last, half), half);
}

static void emit_load_query(const attention_t *A, int flat, query_t *q) {
  vlmc_kernel_emit_t *e = A->e;
  int64_t vecs = A->d / A->vl;
  for (int64_t c = 0; c < vecs; ++c)
    q->q[c] = vlmc_cpu_emit_load_vector(e, A->q, idx_add(e, flat, c * A->vl), A->vl);
  for (int64_t t = vecs * A->vl; t < A->d; ++t)
    q->q[vecs + t - vecs * A->vl] = vlmc_kernel_emit_load(e, A->q, idx_add(e, flat, t));
}

/* o[flat .. flat + Dv) = accumulator / l, through the epilogue (vector stores without one). */
static void emit_output(const attention_t *A, const state_t *st, int flat) {
  vlmc_kernel_emit_t *e = A->e;
  bool direct = !vlmc_kernel_emit_has_epilogue(e);
  int64_t vecs = A->dv / A->vl;
  int sum = vlmc_cpu_emit_reduce_add(e, st->v[L], A->vl);
  int sums = splat(A, sum);
  for (int64_t k = 0; k < vecs; ++k) {
    int y = vec_op(A, "arith.divf", st->v[ACC + k], sums);
    int at = idx_add(e, flat, k * A->vl);
    if (direct) {
      vlmc_kernel_emit_line(e, "vector.store " VLMC_SSA ", %%out[" VLMC_SSA "] : memref<?xf32>, %s", y,
                            at, A->vec);
      continue;
    }
    for (int c = 0; c < A->vl; ++c) {
      int x = lane(A, y, c);
      vlmc_kernel_emit_finish_element(e, x, idx_add(e, at, c));
    }
  }
  for (int64_t t = vecs * A->vl; t < A->dv; ++t) {
    int y = vlmc_kernel_emit_float_op(e, "arith.divf", st->v[ACC + vecs + t - vecs * A->vl], sum, 0);
    vlmc_kernel_emit_finish_element(e, y, idx_add(e, flat, t));
  }
}

/* `scf.for %g = 0 to group step 1 {` over the heads of the unit's group; returns %g. */
static int open_head_loop(const attention_t *A) {
  vlmc_kernel_emit_t *e = A->e;
  return open_loop_const(e, A->group, 1);
}

/* Keys [t0, min(t0 + tile, end)) for each head of the group in turn: its q, its state from
 * the buffer, blocks of VL keys, the last keys one at a time, the state back. `pair0`: the
 * (row, head) pair of the group's first head. */
static void emit_tile(const attention_t *A, int buf, query_t *q, int pair0, int t0, int end) {
  vlmc_kernel_emit_t *e = A->e;
  int t1 = vlmc_kernel_emit_index_op(e, "arith.minsi", idx_add(e, t0, A->tile), end);
  int vl = vlmc_kernel_emit_index(e, A->vl);
  int span = vlmc_kernel_emit_index_op(e, "arith.muli", vlmc_kernel_emit_index_op(e, "arith.divui", vlmc_kernel_emit_index_op(e, "arith.subi", t1, t0), vl),
                    vl);
  int mid = vlmc_kernel_emit_index_op(e, "arith.addi", t0, span);
  int g = open_head_loop(A);
  int pair = vlmc_kernel_emit_index_op(e, "arith.addi", pair0, g);
  emit_load_query(A, vlmc_kernel_emit_index_op(e, "arith.muli", pair, vlmc_kernel_emit_index(e, A->d)), q);
  state_t in, blocks, last;
  emit_state_move(A, buf, g, NULL, &in);
  emit_key_loop(A, q, t0, mid, A->vl, &in, &blocks);
  emit_key_loop(A, q, mid, t1, 1, &blocks, &last);
  emit_state_move(A, buf, g, &last, NULL);
  vlmc_kernel_emit_line(e, "}");
}

/* Unit u: query row i and a kv head, whose group of query heads share each tile of keys (read
 * from memory once, not once per head); their states wait in `buf` between tiles. */
static void emit_unit(const attention_t *A, int buf, int u) {
  vlmc_kernel_emit_t *e = A->e;
  int kv_heads = vlmc_kernel_emit_index(e, A->heads / A->group);
  int i = emit_query_row(A, vlmc_kernel_emit_index_op(e, "arith.divui", u, kv_heads));
  int kvh = vlmc_kernel_emit_index_op(e, "arith.remui", u, kv_heads);
  int h0 = vlmc_kernel_emit_index_op(e, "arith.muli", kvh, vlmc_kernel_emit_index(e, A->group));
  int pair0 = vlmc_kernel_emit_index_op(e, "arith.addi", vlmc_kernel_emit_index_op(e, "arith.muli", i, vlmc_kernel_emit_index(e, A->heads)),
                     h0);
  query_t q;
  q.k_base = vlmc_kernel_emit_index_op(e, "arith.muli", kvh, vlmc_kernel_emit_index(e, A->d));
  q.v_base = vlmc_kernel_emit_index_op(e, "arith.muli", kvh, vlmc_kernel_emit_index(e, A->dv));
  int start, end;
  emit_key_range(A, i, &start, &end);
  state_t init, st;
  init.v[M] = vlmc_kernel_emit_f32(e, -INFINITY);
  for (int s = L; s < state_size(A); ++s)
    init.v[s] = slot_is_vector(A, s) ? vlmc_cpu_emit_zero_vector(e, A->vl)
                                     : vlmc_kernel_emit_f32(e, 0);
  emit_state_move(A, buf, open_head_loop(A), &init, NULL);
  vlmc_kernel_emit_line(e, "}");
  int t0 = vlmc_kernel_emit_for(e, start, end, vlmc_kernel_emit_index(e, A->tile));
  emit_tile(A, buf, &q, pair0, t0, end);
  vlmc_kernel_emit_line(e, "}");
  int g = open_head_loop(A);
  emit_state_move(A, buf, g, NULL, &st);
  int pair = vlmc_kernel_emit_index_op(e, "arith.addi", pair0, g);
  emit_output(A, &st, vlmc_kernel_emit_index_op(e, "arith.muli", pair, vlmc_kernel_emit_index(e, A->dv)));
  vlmc_kernel_emit_line(e, "}");
}

/* ---- long sequences: tiles of queries x keys ---- */

/* A run of query rows (prefill, vision) goes in blocks of QB (query row, head) pairs of one kv
 * head against tiles of TILE_KEYS keys: a tile of k (transposed: key-contiguous for each of the
 * D dims) and v is copied into scratch once per block and used by all its pairs, so k and v are
 * read from memory once per block rather than once per query. Inside a tile the pairs go
 * TILE_ROWS at a time through a register-blocked micro-kernel: TILE_ROWS x TILE_VECS vectors of
 * scores (TILE_VECS * VL keys, a "chunk") summed over D, each step one vector load of keys per
 * vector and one broadcast of q per row; the online softmax per row over the chunks the rows
 * see (scores masked to -inf outside a row's keys, weights then 0); then o += p v with two
 * accumulator vectors per row. A group of rows skips the tiles, and the chunks of a tile, that
 * none of its rows sees (windows, causal), so a block can span several segments. */
enum {
  TILE_ROWS = 4,  /* pairs per micro-kernel step */
  TILE_VECS = 2,  /* score vectors per row in a step: 4 x 2 accumulators and 2 key vectors */
  TILE_KEYS = 64, /* keys per tile */
  TILE_SCRATCH = 65536, /* bytes of scaled q and accumulators per block */
};

typedef struct {
  const attention_t *A;
  int64_t qb, dvp, ch; /* pairs per block, Dv rounded up to VL, keys per chunk */
  int kvh;             /* the kv head being done */
  int qs, os, ls, ms, rs, re, kt, vt, ss; /* scratch: see emit_tiled */
  char qs_t[48], os_t[48], ls_t[48], ms_t[48], ix_t[48], kt_t[48], vt_t[48], ss_t[48];
  int iota;            /* vector<VLxi32> 0, 1, ..., VL-1 */
} tiled_t;

static int scratch(vlmc_kernel_emit_t *e, char *type, size_t cap, int64_t n, const char *elem) {
  snprintf(type, cap, "memref<%lldx%s>", (long long)n, elem);
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.alloca() : %s", v, type);
  return v;
}

static int mem_load(vlmc_kernel_emit_t *e, int buf, const char *type, int at) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load " VLMC_SSA "[" VLMC_SSA "] : %s", v, buf, at, type);
  return v;
}

static void mem_store(vlmc_kernel_emit_t *e, int value, int buf, const char *type, int at) {
  vlmc_kernel_emit_line(e, "memref.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : %s", value, buf, at,
                        type);
}

static int vec_load(const attention_t *A, int buf, const char *type, int at) {
  int v = vlmc_kernel_emit_fresh(A->e);
  vlmc_kernel_emit_line(A->e, VLMC_SSA " = vector.load " VLMC_SSA "[" VLMC_SSA "] : %s, %s", v, buf, at,
                        type, A->vec);
  return v;
}

static void vec_store(const attention_t *A, int value, int buf, const char *type, int at) {
  vlmc_kernel_emit_line(A->e, "vector.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : %s, %s", value,
                        buf, at, type, A->vec);
}

static int idx_mul(vlmc_kernel_emit_t *e, int a, int64_t c) {
  return c == 1 ? a : vlmc_kernel_emit_index_op(e, "arith.muli", a, vlmc_kernel_emit_index(e, c));
}

/* Micro-kernel steps for n pairs: (n + TILE_ROWS - 1) / TILE_ROWS. */
static int emit_row_steps(vlmc_kernel_emit_t *e, int n) {
  int up = idx_add(e, n, TILE_ROWS - 1), rows = vlmc_kernel_emit_index(e, TILE_ROWS);
  return vlmc_kernel_emit_index_op(e, "arith.divui", up, rows);
}

/* `%outer.. = scf.for %iv = from to to step step iter_args(%inner.. = %init..) -> (vec..) {`
 * over n vectors; returns %iv. Close with a yield of n vectors and "}". */
static int open_vector_loop(const attention_t *A, int from, int to, int step, int n,
                            const int *init, int *inner, int *outer) {
  vlmc_kernel_emit_t *e = A->e;
  int iv = vlmc_kernel_emit_fresh(e);
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  for (int i = 0; i < n; ++i) {
    outer[i] = vlmc_kernel_emit_fresh(e);
    inner[i] = vlmc_kernel_emit_fresh(e);
    vlmc_strbuf_printf(&line, "%s%%v%d", i ? ", " : "", outer[i]);
  }
  vlmc_strbuf_printf(&line, " = scf.for %%v%d = %%v%d to %%v%d step %%v%d iter_args(", iv, from, to,
                     step);
  for (int i = 0; i < n; ++i)
    vlmc_strbuf_printf(&line, "%s%%v%d = %%v%d", i ? ", " : "", inner[i], init[i]);
  vlmc_strbuf_puts(&line, ") -> (");
  for (int i = 0; i < n; ++i) vlmc_strbuf_printf(&line, "%s%s", i ? ", " : "", A->vec);
  vlmc_strbuf_puts(&line, ") {");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
  return iv;
}

static void close_vector_loop(const attention_t *A, int n, const int *values) {
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_puts(&line, "scf.yield ");
  for (int i = 0; i < n; ++i) vlmc_strbuf_printf(&line, "%s%%v%d", i ? ", " : "", values[i]);
  vlmc_strbuf_puts(&line, " : ");
  for (int i = 0; i < n; ++i) vlmc_strbuf_printf(&line, "%s%s", i ? ", " : "", A->vec);
  vlmc_kernel_emit_line(A->e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
  vlmc_kernel_emit_line(A->e, "}");
}

/* The largest d <= 4 dividing n: how far a loop over n is unrolled. */
static int64_t unroll_for(int64_t n) {
  return n % 4 == 0 ? 4 : n % 2 == 0 ? 2 : 1;
}

/* c = the number of boundaries of cu <= row, advanced from c_in (rows come in order, so each
 * block scans its boundaries once): `while c < n && cu[c] <= row: c++`. */
static int emit_advance_segment(const attention_t *A, int c_in, int row) {
  vlmc_kernel_emit_t *e = A->e;
  int n = vlmc_kernel_emit_dim(e, A->cu->type.dims[0]);
  int top = idx_add(e, n, -1), zero = vlmc_kernel_emit_index(e, 0);
  int last = vlmc_kernel_emit_index_op(e, "arith.maxsi", top, zero);
  int out = vlmc_kernel_emit_fresh(e), w = vlmc_kernel_emit_fresh(e), w2 = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = scf.while (" VLMC_SSA " = " VLMC_SSA ") : (index) -> index {", out,
                        w, c_in);
  int lt = vlmc_kernel_emit_fresh(e), bound = vlmc_kernel_emit_fresh(e), le = vlmc_kernel_emit_fresh(e);
  int ok = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi slt, " VLMC_SSA ", " VLMC_SSA " : index", lt, w, n);
  int at = vlmc_kernel_emit_index_op(e, "arith.minsi", w, last); /* in bounds when c = n */
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : i64 to index", bound,
                        vlmc_kernel_emit_load(e, A->cu, at));
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi sle, " VLMC_SSA ", " VLMC_SSA " : index", le, bound,
                        row);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", ok, lt, le);
  vlmc_kernel_emit_line(e, "scf.condition(" VLMC_SSA ") " VLMC_SSA " : index", ok, w);
  vlmc_kernel_emit_line(e, "} do {");
  vlmc_kernel_emit_line(e, "^bb0(" VLMC_SSA ": index):", w2);
  vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA " : index", idx_add(e, w2, 1));
  vlmc_kernel_emit_line(e, "}");
  return out;
}

/* Boundary c of cu as an index, or `otherwise` when c is out of [0, n). */
static int emit_boundary_or(const attention_t *A, int c, int otherwise) {
  vlmc_kernel_emit_t *e = A->e;
  int n = vlmc_kernel_emit_dim(e, A->cu->type.dims[0]);
  int zero = vlmc_kernel_emit_index(e, 0);
  int in = vlmc_kernel_emit_fresh(e), ge = vlmc_kernel_emit_fresh(e), lt = vlmc_kernel_emit_fresh(e);
  int bound = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi sge, " VLMC_SSA ", " VLMC_SSA " : index", ge, c, zero);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi slt, " VLMC_SSA ", " VLMC_SSA " : index", lt, c, n);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", in, ge, lt);
  int low = vlmc_kernel_emit_index_op(e, "arith.maxsi", c, zero);
  int last = vlmc_kernel_emit_index_op(e, "arith.maxsi", idx_add(e, n, -1), zero);
  int at = vlmc_kernel_emit_index_op(e, "arith.minsi", low, last);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : i64 to index", bound,
                        vlmc_kernel_emit_load(e, A->cu, at));
  return idx_select(e, in, bound, otherwise);
}

/* The (row, query head) of pair `flat` of kv head kvh among rows from `row0`. */
static void pair_of(const tiled_t *T, int row0, int flat, int *row, int *head) {
  vlmc_kernel_emit_t *e = T->A->e;
  int group = vlmc_kernel_emit_index(e, T->A->group);
  *row = vlmc_kernel_emit_index_op(e, "arith.addi", row0,
                                   vlmc_kernel_emit_index_op(e, "arith.divui", flat, group));
  int head0 = idx_mul(e, T->kvh, T->A->group);
  *head = vlmc_kernel_emit_index_op(e, "arith.addi", head0,
                                    vlmc_kernel_emit_index_op(e, "arith.remui", flat, group));
}

/* Slots [0, round_up(n, TILE_ROWS)) of the block of pairs [p0, p0 + n) from row0: q scaled, the
 * state zeroed (m = -inf), each pair's keys [start, end). The slots past n copy the last pair,
 * so that every micro-kernel step takes TILE_ROWS real slots; their results are not written. */
static void emit_prepare(const tiled_t *T, int row0, int p0, int n) {
  const attention_t *A = T->A;
  vlmc_kernel_emit_t *e = A->e;
  int slots = idx_mul(e, emit_row_steps(e, n), TILE_ROWS);
  int c_init = vlmc_kernel_emit_index(e, 0), s = vlmc_kernel_emit_fresh(e), c_in = vlmc_kernel_emit_fresh(e);
  int c_out = vlmc_kernel_emit_fresh(e);
  int lo = vlmc_kernel_emit_index(e, 0), one = vlmc_kernel_emit_index(e, 1);
  vlmc_kernel_emit_line(e, VLMC_SSA " = scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA
                        " iter_args(" VLMC_SSA " = " VLMC_SSA ") -> (index) {", c_out, s, lo, slots, one,
                        c_in, c_init);
  int src = vlmc_kernel_emit_index_op(e, "arith.minsi", s, idx_add(e, n, -1));
  int row, head;
  pair_of(T, row0, vlmc_kernel_emit_index_op(e, "arith.addi", p0, src), &row, &head);
  int q_at = idx_mul(e, vlmc_kernel_emit_index_op(e, "arith.addi", idx_mul(e, row, A->heads), head), A->d);
  int qs_at = idx_mul(e, s, A->d);
  int64_t vecs = A->d / A->vl;
  int scale = splat_const(A, A->scale);
  for (int64_t c = 0; c < vecs; ++c) {
    int x = vlmc_cpu_emit_load_vector(e, A->q, idx_add(e, q_at, c * A->vl), A->vl);
    int scaled = vec_op(A, "arith.mulf", x, scale);
    vec_store(A, scaled, T->qs, T->qs_t, idx_add(e, qs_at, c * A->vl));
  }
  for (int64_t t = vecs * A->vl; t < A->d; ++t) {
    int x = vlmc_kernel_emit_load(e, A->q, idx_add(e, q_at, t)), factor = vlmc_kernel_emit_f32(e, A->scale);
    int scaled = vlmc_kernel_emit_float_op(e, "arith.mulf", x, factor, 0);
    mem_store(e, scaled, T->qs, T->qs_t, idx_add(e, qs_at, t));
  }
  int zero = vlmc_cpu_emit_zero_vector(e, A->vl);
  int os_at = idx_mul(e, s, T->dvp);
  for (int64_t c = 0; c < T->dvp / A->vl; ++c) vec_store(A, zero, T->os, T->os_t, idx_add(e, os_at, c * A->vl));
  vec_store(A, zero, T->ls, T->ls_t, idx_mul(e, s, A->vl));
  mem_store(e, vlmc_kernel_emit_f32(e, -INFINITY), T->ms, T->ms_t, s);
  /* keys: the row's segment (boundaries c-1 and c, c = boundaries <= row), the causal cut */
  const vlmc_type_t *qt = &A->q->type, *kt = &A->k->type;
  int keys = vlmc_kernel_emit_dim(e, kt->dims[0]);
  int start = vlmc_kernel_emit_index(e, 0), end = keys, c_next = c_in;
  if (A->cu) {
    c_next = emit_advance_segment(A, c_in, row);
    start = emit_boundary_or(A, idx_add(e, c_next, -1), start);
    end = emit_boundary_or(A, c_next, end);
  }
  if (A->causal) { /* keys j <= row + T - S */
    int shifted = vlmc_kernel_emit_index_op(e, "arith.addi", row, idx_add(e, keys, 1));
    int limit = vlmc_kernel_emit_index_op(e, "arith.subi", shifted, vlmc_kernel_emit_dim(e, qt->dims[0]));
    end = vlmc_kernel_emit_index_op(e, "arith.minsi", end, limit);
  }
  /* within [0, T] whatever cu holds: the tile copy reads the keys these bound */
  start = vlmc_kernel_emit_index_op(e, "arith.minsi", vlmc_kernel_emit_index_op(e, "arith.maxsi", start, vlmc_kernel_emit_index(e, 0)), keys);
  end = vlmc_kernel_emit_index_op(e, "arith.maxsi", vlmc_kernel_emit_index_op(e, "arith.minsi", end, keys), start);
  mem_store(e, start, T->rs, T->ix_t, s);
  mem_store(e, end, T->re, T->ix_t, s);
  vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA " : index", c_next);
  vlmc_kernel_emit_line(e, "}");
}

/* Keys j0 .. j0 + TILE_KEYS of kv head kvh into scratch: k transposed (kt[d][j]), v by rows
 * (vt[j][0..Dv), zero padding after). Rows past the last key repeat it (masked later). */
static void emit_copy_tile(const tiled_t *T, int j0) {
  const attention_t *A = T->A;
  vlmc_kernel_emit_t *e = A->e;
  int last = idx_add(e, vlmc_kernel_emit_dim(e, A->k->type.dims[0]), -1);
  int j = open_loop_const(e, TILE_KEYS, 1);
  int key = vlmc_kernel_emit_index_op(e, "arith.minsi", vlmc_kernel_emit_index_op(e, "arith.addi", j0, j), last);
  int k_key = idx_mul(e, key, A->k_row), k_head = idx_mul(e, T->kvh, A->d);
  int k_at = vlmc_kernel_emit_index_op(e, "arith.addi", k_key, k_head);
  for (int64_t d = 0; d < A->d; ++d) {
    int x = vlmc_kernel_emit_load(e, A->k, idx_add(e, k_at, d));
    mem_store(e, x, T->kt, T->kt_t, idx_add(e, j, d * TILE_KEYS));
  }
  int v_key = idx_mul(e, key, A->v_row), v_head = idx_mul(e, T->kvh, A->dv);
  int v_at = vlmc_kernel_emit_index_op(e, "arith.addi", v_key, v_head);
  int vt_at = idx_mul(e, j, T->dvp);
  int64_t vecs = A->dv / A->vl;
  for (int64_t c = 0; c < vecs; ++c) {
    int x = vlmc_cpu_emit_load_vector(e, A->v, idx_add(e, v_at, c * A->vl), A->vl);
    vec_store(A, x, T->vt, T->vt_t, idx_add(e, vt_at, c * A->vl));
  }
  for (int64_t t = vecs * A->vl; t < A->dv; ++t) {
    int x = vlmc_kernel_emit_load(e, A->v, idx_add(e, v_at, t));
    mem_store(e, x, T->vt, T->vt_t, idx_add(e, vt_at, t));
  }
  vlmc_kernel_emit_line(e, "}");
}

/* Scores of slots slot[0..TILE_ROWS) for the chunks [ca, cb) of the tile, into ss[r][key]. */
static void emit_tile_scores(const tiled_t *T, const int *slot, int ca, int cb) {
  const attention_t *A = T->A;
  vlmc_kernel_emit_t *e = A->e;
  enum { N = TILE_ROWS * TILE_VECS };
  int c = vlmc_kernel_emit_for(e, ca, cb, vlmc_kernel_emit_index(e, 1));
  int key0 = idx_mul(e, c, T->ch);
  int init[N], inner[N], outer[N], next[N];
  for (int i = 0; i < N; ++i) init[i] = vlmc_cpu_emit_zero_vector(e, A->vl);
  int qrow[TILE_ROWS];
  for (int r = 0; r < TILE_ROWS; ++r) qrow[r] = idx_mul(e, slot[r], A->d);
  int64_t unroll = unroll_for(A->d);
  int from = vlmc_kernel_emit_index(e, 0), to = vlmc_kernel_emit_index(e, A->d);
  int by = vlmc_kernel_emit_index(e, unroll);
  int d = open_vector_loop(A, from, to, by, N, init, inner, outer);
  for (int i = 0; i < N; ++i) next[i] = inner[i];
  for (int64_t u = 0; u < unroll; ++u) {
    int du = idx_add(e, d, u), kv[TILE_VECS];
    int k_at = vlmc_kernel_emit_index_op(e, "arith.addi", idx_mul(e, du, TILE_KEYS), key0);
    for (int v = 0; v < TILE_VECS; ++v) kv[v] = vec_load(A, T->kt, T->kt_t, idx_add(e, k_at, v * A->vl));
    for (int r = 0; r < TILE_ROWS; ++r) {
      int qb = splat(A, mem_load(e, T->qs, T->qs_t, vlmc_kernel_emit_index_op(e, "arith.addi", qrow[r], du)));
      for (int v = 0; v < TILE_VECS; ++v)
        next[r * TILE_VECS + v] = vec_fma(A, qb, kv[v], next[r * TILE_VECS + v]);
    }
  }
  close_vector_loop(A, N, next);
  for (int r = 0; r < TILE_ROWS; ++r)
    for (int v = 0; v < TILE_VECS; ++v)
      vec_store(A, outer[r * TILE_VECS + v], T->ss, T->ss_t, idx_add(e, key0, r * TILE_KEYS + v * A->vl));
  vlmc_kernel_emit_line(e, "}");
}

/* Vector `vi` of row r's scores with the keys outside [start, end) at `fill`. */
static int emit_masked(const tiled_t *T, int j0, int vi, int start, int end, int scores,
                       int fill) {
  const attention_t *A = T->A;
  vlmc_kernel_emit_t *e = A->e;
  int key = vlmc_kernel_emit_index_op(e, "arith.addi", j0, idx_mul(e, vi, A->vl));
  int k32 = vlmc_kernel_emit_fresh(e), ks = vlmc_kernel_emit_fresh(e), keys = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : index to i32", k32, key);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.broadcast " VLMC_SSA " : i32 to vector<%dxi32>", ks, k32,
                        A->vl);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addi " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", keys, ks,
                        T->iota, A->vl);
  int ge = vlmc_kernel_emit_fresh(e), lt = vlmc_kernel_emit_fresh(e), in = vlmc_kernel_emit_fresh(e);
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi sge, " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", ge,
                        keys, start, A->vl);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi slt, " VLMC_SSA ", " VLMC_SSA " : vector<%dxi32>", lt,
                        keys, end, A->vl);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : vector<%dxi1>", in, ge, lt,
                        A->vl);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA
                        " : vector<%dxi1>, %s", v, in, scores, fill, A->vl, A->vec);
  return v;
}

/* An index as a vector<VLxi32> splat. */
static int splat_i32(const attention_t *A, int index) {
  vlmc_kernel_emit_t *e = A->e;
  int s = vlmc_kernel_emit_fresh(e), v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : index to i32", s, index);
  vlmc_kernel_emit_line(e, VLMC_SSA " = vector.broadcast " VLMC_SSA " : i32 to vector<%dxi32>", v, s,
                        A->vl);
  return v;
}

/* The keys of one row of a micro-kernel step: its [start, end) as i32 splats, the tile's first
 * key, the score vectors [va, vb) the step computed, the row's offset in the scores. */
typedef struct {
  int start, end, j0, va, vb, row_at;
} row_keys_t;

/* The largest score of the row's vectors (masked: keys outside [start, end) left out). */
static int emit_max_scan(const tiled_t *T, const row_keys_t *k, bool masked) {
  const attention_t *A = T->A;
  vlmc_kernel_emit_t *e = A->e;
  int ninf = splat_const(A, -INFINITY), inner, outer;
  int vi = open_vector_loop(A, k->va, k->vb, vlmc_kernel_emit_index(e, 1), 1, &ninf, &inner, &outer);
  int at = vlmc_kernel_emit_index_op(e, "arith.addi", k->row_at, idx_mul(e, vi, A->vl));
  int s = vec_load(A, T->ss, T->ss_t, at);
  if (masked) s = emit_masked(T, k->j0, vi, k->start, k->end, s, splat_const(A, -INFINITY));
  int best = emit_max(A, inner, s, true);
  close_vector_loop(A, 1, &best);
  return outer;
}

/* The weights exp(score - max) written over the row's scores (masked: 0 outside its keys);
 * returns their sum as a vector of partial sums. */
static int emit_weight_scan(const tiled_t *T, const row_keys_t *k, int m_vec, bool masked) {
  const attention_t *A = T->A;
  vlmc_kernel_emit_t *e = A->e;
  int zero = vlmc_cpu_emit_zero_vector(e, A->vl), inner, outer;
  int vi = open_vector_loop(A, k->va, k->vb, vlmc_kernel_emit_index(e, 1), 1, &zero, &inner, &outer);
  int at = vlmc_kernel_emit_index_op(e, "arith.addi", k->row_at, idx_mul(e, vi, A->vl));
  int p = emit_exp(A, vec_op(A, "arith.subf", vec_load(A, T->ss, T->ss_t, at), m_vec));
  if (masked) p = emit_masked(T, k->j0, vi, k->start, k->end, p, zero);
  vec_store(A, p, T->ss, T->ss_t, at);
  int added = vec_op(A, "arith.addf", inner, p);
  close_vector_loop(A, 1, &added);
  return outer;
}

/* `%r = scf.if %inside -> (vec) { unmasked scan } else { masked scan }`: most steps lie wholly
 * within their rows' keys and skip the masks. m_vec < 0: the max scan, else the weights. */
static int emit_scan(const tiled_t *T, const row_keys_t *k, int inside, int m_vec) {
  const attention_t *A = T->A;
  vlmc_kernel_emit_t *e = A->e;
  int result = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = scf.if " VLMC_SSA " -> (%s) {", result, inside, A->vec);
  for (int masked = 0; masked < 2; ++masked) {
    if (masked) vlmc_kernel_emit_line(e, "} else {");
    int v = m_vec < 0 ? emit_max_scan(T, k, masked) : emit_weight_scan(T, k, m_vec, masked);
    vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA " : %s", v, A->vec);
  }
  vlmc_kernel_emit_line(e, "}");
  return result;
}

/* The online softmax of row r over score vectors [va, vb) of the tile: the max raised, the
 * weights exp(score - max) (0 outside the row's keys) written over the scores, l rescaled and
 * added to; returns the rescale factor exp(m_old - m_new) as a vector. */
static int emit_tile_softmax(const tiled_t *T, int r, int slot, int j0, int va, int vb) {
  const attention_t *A = T->A;
  vlmc_kernel_emit_t *e = A->e;
  int start = mem_load(e, T->rs, T->ix_t, slot), end = mem_load(e, T->re, T->ix_t, slot);
  int start32 = splat_i32(A, start), end32 = splat_i32(A, end);
  int row_at = vlmc_kernel_emit_index(e, (int64_t)r * TILE_KEYS);
  row_keys_t k = {start32, end32, j0, va, vb, row_at};
  int first = vlmc_kernel_emit_index_op(e, "arith.addi", j0, idx_mul(e, va, A->vl));
  int past = vlmc_kernel_emit_index_op(e, "arith.addi", j0, idx_mul(e, vb, A->vl));
  int from_ok = vlmc_kernel_emit_fresh(e), to_ok = vlmc_kernel_emit_fresh(e), inside = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi sle, " VLMC_SSA ", " VLMC_SSA " : index", from_ok, start,
                        first);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi sge, " VLMC_SSA ", " VLMC_SSA " : index", to_ok, end, past);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", inside, from_ok, to_ok);
  int best = emit_scan(T, &k, inside, -1);
  int m_old = mem_load(e, T->ms, T->ms_t, slot);
  int m_new = emit_max(A, m_old, emit_max_lanes(A, best), false);
  int sum = emit_scan(T, &k, inside, splat(A, m_new));
  int alpha = emit_exp(A, splat(A, vlmc_kernel_emit_float_op(e, "arith.subf", m_old, m_new, 0)));
  int l_at = idx_mul(e, slot, A->vl);
  vec_store(A, vec_fma(A, vec_load(A, T->ls, T->ls_t, l_at), alpha, sum), T->ls, T->ls_t, l_at);
  mem_store(e, m_new, T->ms, T->ms_t, slot);
  return alpha;
}

/* o[slot r] = o * alpha[r] + sum over keys [ka, kb) of the tile of p[r][key] v[key], two
 * accumulator vectors per row at a time (one where Dv / VL is odd). */
static void emit_tile_values(const tiled_t *T, const int *slot, const int *alpha, int ka, int kb) {
  const attention_t *A = T->A;
  vlmc_kernel_emit_t *e = A->e;
  int64_t vecs = T->dvp / A->vl, width = vecs % 2 == 0 ? 2 : 1;
  enum { MAX_N = TILE_ROWS * 2 };
  int n = (int)(TILE_ROWS * width);
  int c = open_loop_const(e, T->dvp, width * A->vl);
  int init[MAX_N], inner[MAX_N], outer[MAX_N], next[MAX_N], o_at[MAX_N];
  for (int r = 0; r < TILE_ROWS; ++r)
    for (int w = 0; w < width; ++w) {
      int i = r * (int)width + w;
      o_at[i] = idx_add(e, vlmc_kernel_emit_index_op(e, "arith.addi", idx_mul(e, slot[r], T->dvp), c), w * A->vl);
      init[i] = vec_op(A, "arith.mulf", vec_load(A, T->os, T->os_t, o_at[i]), alpha[r]);
    }
  int b = open_vector_loop(A, ka, kb, vlmc_kernel_emit_index(e, 4), n, init, inner, outer);
  for (int i = 0; i < n; ++i) next[i] = inner[i];
  for (int64_t u = 0; u < 4; ++u) { /* ka, kb are multiples of the chunk, itself of 4 */
    int bu = idx_add(e, b, u), vv[2];
    int v_at = vlmc_kernel_emit_index_op(e, "arith.addi", idx_mul(e, bu, T->dvp), c);
    for (int w = 0; w < width; ++w) vv[w] = vec_load(A, T->vt, T->vt_t, idx_add(e, v_at, w * A->vl));
    for (int r = 0; r < TILE_ROWS; ++r) {
      int p = splat(A, mem_load(e, T->ss, T->ss_t, idx_add(e, bu, (int64_t)r * TILE_KEYS)));
      for (int w = 0; w < width; ++w)
        next[r * width + w] = vec_fma(A, p, vv[w], next[r * width + w]);
    }
  }
  close_vector_loop(A, n, next);
  for (int i = 0; i < n; ++i) vec_store(A, outer[i], T->os, T->os_t, o_at[i]);
  vlmc_kernel_emit_line(e, "}");
}

/* Micro-kernel step: slots g0 .. g0 + TILE_ROWS against the tile at j0, only the chunks that
 * one of them sees (their key ranges grow with the slot, so the first's start and the last's
 * end bound them all). */
static void emit_tile_rows(const tiled_t *T, int g0, int j0) {
  const attention_t *A = T->A;
  vlmc_kernel_emit_t *e = A->e;
  int slot[TILE_ROWS], alpha[TILE_ROWS];
  for (int r = 0; r < TILE_ROWS; ++r) slot[r] = idx_add(e, g0, r);
  int from = vlmc_kernel_emit_index_op(e, "arith.maxsi", mem_load(e, T->rs, T->ix_t, slot[0]), j0);
  int last_end = mem_load(e, T->re, T->ix_t, slot[TILE_ROWS - 1]), tile_end = idx_add(e, j0, TILE_KEYS);
  int to = vlmc_kernel_emit_index_op(e, "arith.minsi", last_end, tile_end);
  int any = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi slt, " VLMC_SSA ", " VLMC_SSA " : index", any, from, to);
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", any);
  int chunk = vlmc_kernel_emit_index(e, T->ch);
  int ca = vlmc_kernel_emit_index_op(e, "arith.divui", vlmc_kernel_emit_index_op(e, "arith.subi", from, j0), chunk);
  int cb = vlmc_kernel_emit_index_op(e, "arith.divui",
                                     idx_add(e, vlmc_kernel_emit_index_op(e, "arith.subi", to, j0), T->ch - 1), chunk);
  emit_tile_scores(T, slot, ca, cb);
  int va = idx_mul(e, ca, TILE_VECS), vb = idx_mul(e, cb, TILE_VECS);
  for (int r = 0; r < TILE_ROWS; ++r) alpha[r] = emit_tile_softmax(T, r, slot[r], j0, va, vb);
  int ka = idx_mul(e, ca, T->ch), kb = idx_mul(e, cb, T->ch);
  emit_tile_values(T, slot, alpha, ka, kb);
  vlmc_kernel_emit_line(e, "}");
}

/* The block's outputs: o / l for pairs [p0, p0 + n) from row0, through the epilogue. */
static void emit_block_output(const tiled_t *T, int row0, int p0, int n) {
  const attention_t *A = T->A;
  vlmc_kernel_emit_t *e = A->e;
  int s = open_loop_to(e, n, 1);
  int row, head;
  pair_of(T, row0, vlmc_kernel_emit_index_op(e, "arith.addi", p0, s), &row, &head);
  int out = idx_mul(e, vlmc_kernel_emit_index_op(e, "arith.addi", idx_mul(e, row, A->heads), head), A->dv);
  int sum = vlmc_cpu_emit_reduce_add(e, vec_load(A, T->ls, T->ls_t, idx_mul(e, s, A->vl)), A->vl);
  int sums = splat(A, sum), os_at = idx_mul(e, s, T->dvp);
  int64_t vecs = A->dv / A->vl;
  for (int64_t c = 0; c < vecs; ++c) {
    int o = vec_load(A, T->os, T->os_t, idx_add(e, os_at, c * A->vl));
    int y = vec_op(A, "arith.divf", o, sums);
    vlmc_cpu_emit_finish_vector(e, y, idx_add(e, out, c * A->vl), A->vl);
  }
  for (int64_t t = vecs * A->vl; t < A->dv; ++t) {
    int o = mem_load(e, T->os, T->os_t, idx_add(e, os_at, t));
    int y = vlmc_kernel_emit_float_op(e, "arith.divf", o, sum, 0);
    vlmc_kernel_emit_finish_element(e, y, idx_add(e, out, t));
  }
  vlmc_kernel_emit_line(e, "}");
}

/* Query rows [a, b) of the kv head: blocks of pairs, each against the tiles of its keys. */
static void emit_run(const tiled_t *T, int a, int b) {
  const attention_t *A = T->A;
  vlmc_kernel_emit_t *e = A->e;
  int pairs = idx_mul(e, vlmc_kernel_emit_index_op(e, "arith.subi", b, a), A->group);
  int p0 = open_loop_to(e, pairs, T->qb);
  int qb = vlmc_kernel_emit_index(e, T->qb), left = vlmc_kernel_emit_index_op(e, "arith.subi", pairs, p0);
  int n = vlmc_kernel_emit_index_op(e, "arith.minsi", qb, left);
  emit_prepare(T, a, p0, n);
  int first = mem_load(e, T->rs, T->ix_t, vlmc_kernel_emit_index(e, 0));
  int last = mem_load(e, T->re, T->ix_t, idx_add(e, n, -1));
  int steps = emit_row_steps(e, n);
  int j0 = vlmc_kernel_emit_for(e, first, last, vlmc_kernel_emit_index(e, TILE_KEYS));
  emit_copy_tile(T, j0);
  int g = open_loop_to(e, steps, 1);
  emit_tile_rows(T, idx_mul(e, g, TILE_ROWS), j0);
  vlmc_kernel_emit_line(e, "}");
  vlmc_kernel_emit_line(e, "}");
  emit_block_output(T, a, p0, n);
  vlmc_kernel_emit_line(e, "}");
}

/* Pairs per block: as many as keep the block's scaled q and accumulators within TILE_SCRATCH
 * bytes, a multiple of TILE_ROWS, at most 128. */
static int64_t block_pairs(const attention_t *A, int64_t dvp) {
  int64_t n = TILE_SCRATCH / (4 * (A->d + dvp)) / TILE_ROWS * TILE_ROWS;
  return n < TILE_ROWS ? TILE_ROWS : n > 128 ? 128 : n;
}

/* The units [lo, hi) as runs of query rows per kv head. Unit u is (unit row u / Hkv, kv head
 * u % Hkv), so each kv head's unit rows in [lo, hi) are one range [rf, re); without a causal
 * mask those are the query rows; under one, unit row 2m is query row m and 2m + 1 is S-1-m
 * (the zigzag that balances the threads), so the range is two runs of query rows: the even
 * unit rows [(rf+1)/2, (re+1)/2) and the odd ones [S - re/2, S - rf/2). */
static void emit_tiled(attention_t *A) {
  vlmc_kernel_emit_t *e = A->e;
  tiled_t T;
  memset(&T, 0, sizeof T);
  T.A = A;
  T.dvp = (A->dv + A->vl - 1) / A->vl * A->vl;
  T.ch = (int64_t)TILE_VECS * A->vl;
  T.qb = block_pairs(A, T.dvp);
  T.qs = scratch(e, T.qs_t, sizeof T.qs_t, T.qb * A->d, "f32");
  T.os = scratch(e, T.os_t, sizeof T.os_t, T.qb * T.dvp, "f32");
  T.ls = scratch(e, T.ls_t, sizeof T.ls_t, T.qb * A->vl, "f32");
  T.ms = scratch(e, T.ms_t, sizeof T.ms_t, T.qb, "f32");
  T.rs = scratch(e, T.ix_t, sizeof T.ix_t, T.qb, "index");
  T.re = scratch(e, T.ix_t, sizeof T.ix_t, T.qb, "index");
  T.kt = scratch(e, T.kt_t, sizeof T.kt_t, A->d * TILE_KEYS, "f32");
  T.vt = scratch(e, T.vt_t, sizeof T.vt_t, TILE_KEYS * T.dvp, "f32");
  T.ss = scratch(e, T.ss_t, sizeof T.ss_t, (int64_t)TILE_ROWS * TILE_KEYS, "f32");
  if (T.dvp != A->dv) { /* v's padding lanes: 0 once, never written after */
    int j = open_loop_const(e, TILE_KEYS, 1);
    for (int64_t t = A->dv; t < T.dvp; ++t) {
      int zero = vlmc_kernel_emit_f32(e, 0);
      mem_store(e, zero, T.vt, T.vt_t, idx_add(e, idx_mul(e, j, T.dvp), t));
    }
    vlmc_kernel_emit_line(e, "}");
  }
  char lanes[256];
  size_t used = 0;
  for (int i = 0; i < A->vl; ++i) used += (size_t)snprintf(lanes + used, sizeof lanes - used, "%s%d", i ? ", " : "", i);
  T.iota = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant dense<[%s]> : vector<%dxi32>", T.iota, lanes, A->vl);
  int64_t kv_heads = A->heads / A->group;
  T.kvh = open_loop_const(e, kv_heads, 1);
  int bias = vlmc_kernel_emit_index_op(e, "arith.subi", vlmc_kernel_emit_index(e, kv_heads - 1), T.kvh);
  int rf = vlmc_kernel_emit_fresh(e), re = vlmc_kernel_emit_fresh(e);
  int lo = vlmc_kernel_emit_fresh(e), hi = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addi %%lo, " VLMC_SSA " : index", lo, bias);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addi %%hi, " VLMC_SSA " : index", hi, bias);
  int hkv = vlmc_kernel_emit_index(e, kv_heads);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.divui " VLMC_SSA ", " VLMC_SSA " : index", rf, lo, hkv);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.divui " VLMC_SSA ", " VLMC_SSA " : index", re, hi, hkv);
  if (!A->causal) {
    emit_run(&T, rf, re);
  } else {
    int two = vlmc_kernel_emit_index(e, 2), s = vlmc_kernel_emit_dim(e, A->q->type.dims[0]);
    int run = open_loop_to(e, two, 1);
    int odd = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi eq, " VLMC_SSA ", " VLMC_SSA " : index", odd, run,
                          vlmc_kernel_emit_index(e, 1));
    int even_a = vlmc_kernel_emit_index_op(e, "arith.divui", idx_add(e, rf, 1), two);
    int even_b = vlmc_kernel_emit_index_op(e, "arith.divui", idx_add(e, re, 1), two);
    int odd_a = vlmc_kernel_emit_index_op(e, "arith.subi", s, vlmc_kernel_emit_index_op(e, "arith.divui", re, two));
    int odd_b = vlmc_kernel_emit_index_op(e, "arith.subi", s, vlmc_kernel_emit_index_op(e, "arith.divui", rf, two));
    int a = idx_select(e, odd, odd_a, even_a), b = idx_select(e, odd, odd_b, even_b);
    emit_run(&T, a, b);
    vlmc_kernel_emit_line(e, "}");
  }
  vlmc_kernel_emit_line(e, "}");
}

/* ---- the template ---- */

/* Keys per tile: for a group, as many as keep a tile of k and v within 64 KiB (in cache while
 * the group's heads take turns); a head alone (no GQA) takes all its keys in one tile. */
static int64_t tile_keys(const attention_t *A) {
  if (A->group == 1) return INT64_C(1) << 40;
  int64_t keys = 65536 / (4 * (A->d + A->dv) + 1) / A->vl * A->vl;
  return keys > A->vl ? keys : A->vl;
}

vlmc_status_t vlmc_cpu_kernel_attention(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  attention_t A;
  memset(&A, 0, sizeof A);
  A.e = e;
  A.q = op->operands[0];
  A.k = op->operands[1];
  A.v = op->operands[2];
  A.cu = op->num_operands > 3 ? op->operands[3] : NULL;
  A.vl = e->vector_width;
  snprintf(A.vec, sizeof A.vec, "vector<%dxf32>", A.vl);
  const vlmc_type_t *qt = &A.q->type, *kt = &A.k->type, *vt = &A.v->type;
  if (!vlmc_kernel_emit_static_dims(qt, 1) || !vlmc_kernel_emit_static_dims(kt, 1) || !vlmc_kernel_emit_static_dims(vt, 1)) {
    vlmc_kernel_emit_fail(e, "attention: the cpu kernel needs static head counts and head dims "
                          "(q [S, Hq, D], k and v [T, Hkv, D]; only S and T may be symbolic)");
    return NULL;
  }
  int64_t kv_heads = kt->dims[1].off;
  A.heads = qt->dims[1].off;
  A.d = qt->dims[2].off;
  A.dv = vt->dims[2].off;
  if (A.d > MAX_HEAD_DIM || A.dv > MAX_HEAD_DIM || kv_heads <= 0) {
    vlmc_kernel_emit_fail(e, "attention: the cpu kernel takes head dims up to %d and at least one "
                          "kv head (got D = %lld, Dv = %lld, %lld kv heads)", MAX_HEAD_DIM,
                       (long long)A.d, (long long)A.dv, (long long)kv_heads);
    return NULL;
  }
  if (A.vl < 2 || A.vl > MAX_BLOCK || (A.vl & (A.vl - 1))) {
    vlmc_kernel_emit_fail(e, "attention: the cpu kernel needs a vector width that is a power of two "
                          "from 2 to %d, got %d", MAX_BLOCK, A.vl);
    return NULL;
  }
  A.group = A.heads / kv_heads;
  A.k_row = kv_heads * A.d;
  A.v_row = kv_heads * A.dv;
  A.tile = tile_keys(&A);
  const vlmc_attr_t *scale = vlmc_op_attr(op, "scale"), *causal = vlmc_op_attr(op, "causal");
  A.scale = scale ? scale->v.f : 1.0 / sqrt((double)(A.d ? A.d : 1));
  A.causal = causal && causal->v.b;
  e->template_name = "attention";
  e->cost = 256 * A.group * (2 * A.d + 2 * A.dv + 16); /* per (row, kv head), guessing 256 keys */
  if (!vlmc_dim_is_static(qt->dims[0]) || qt->dims[0].off > 1) {
    emit_tiled(&A); /* a run of query rows: tiles of queries x keys */
    return NULL;
  }
  /* Before the unit loop: an alloca inside it would grow the stack every unit. */
  int buf = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.alloca() : memref<%lldxf32>", buf,
                        (long long)(A.group * state_stride(&A)));
  int u = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = %%lo to %%hi step " VLMC_SSA " {", u,
                        vlmc_kernel_emit_index(e, 1));
  emit_unit(&A, buf, u);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}
