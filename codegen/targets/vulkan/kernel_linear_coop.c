/* linear_tiles on cooperative matrices: the variant of kernel_linear_tiles.c for GPUs with
 * VK_KHR_cooperative_matrix (tensor cores), for a linear whose x holds f16 values (the f16
 * policy's activations). Same template and work units as the main kernel, its own tiles:
 * output tiles of TILE_M x TILE_N (64 x 64), row tile major, workgroup g of the G the
 * dispatch has taking tiles g, g + G, ... (units per group a quarter of a tile's).
 *
 * Per tile, 128 invocations (4 subgroups of 32: the device feature "cooperativeMatrix" holds
 * only at subgroup size 32), the K axis in TILE_K steps, software-pipelined:
 *   1. the step's x and W values, loaded in the previous step (raw: 16-byte quads of f32 x,
 *      16-byte words of 8 bf16, ...), are masked, converted to f16 and stored to workgroup
 *      memory four halves a store (arrays of vector<4xf16>, rows of STRIDE slots: x along
 *      k, W's rows as they are); a barrier;
 *   2. the next step's loads are issued (so their latency hides behind the multiply-adds,
 *      their values carried by the loop to the next step);
 *   3. subgroup s owns the SUB_M x SUB_N part (s / SG_N, s % SG_N) of the tile: FR_M x FR_N
 *      accumulators of 16 x 16, each 16 k FR_M A and FR_N B operands (W's rows read as B's
 *      columns: a transposed load), FR_M x FR_N multiply-adds; a barrier.
 * (The first version staged element by element, synchronously, with the index arithmetic of
 * every element in the loop: ~450 instructions an invocation per 8 multiply-adds a subgroup,
 * 17-20 TFLOP/s on the H200; this one runs the 3B's prefill 1.35x faster on an H100.) Then,
 * per accumulator, every subgroup stores its own into a 16 x 16 scratch, a barrier, and the
 * whole workgroup runs the scratches' elements through the bias and the epilogue, guarded
 * at the edges; a barrier. No
 * invocation needs its lane number (gpu.lane_id has no SPIR-V lowering; subgroups need not be
 * invocation ranges).
 *
 * How an operand's quad (4 consecutive k of one row) is read, by what its input allows:
 * QUADS (an f32 or f16 input, K a multiple of 4: one 16- or 8-byte load), WIDE (bf16, K a
 * multiple of 8: one 16-byte load is two quads), WORDS (bf16, K even: two 32-bit words) or
 * ELEMENTS (anything else, a dequantized weight included: four loads through the prologue,
 * masked as they load). Out-of-range rows and k load element 0 and stage 0.
 *
 * Arithmetic: the products of f16 operands are exact in the f32 accumulators, so against the
 * f32 kernel only the order of the sums differs, as long as the operands are exactly f16:
 * x is (the policy rounded it), a bf16 weight is when 2^-14 <= |w| <= 65504 (below, f16's
 * subnormals keep fewer bits: an error under 2^-24 |x| a product; above, inf: no real
 * checkpoint has such weights). */
#include <string.h>

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
  QUADS_K = TILE_K / 4, /* quads of a staged row */
  WORDS_K = TILE_K / 8, /* 16-byte bf16 words of a staged row */
  STRIDE = QUADS_K + 2, /* slots (4 halves) between staged rows: 80 bytes, 16-byte aligned */
  SCRATCH_STRIDE = FRAG + 4,
  SCRATCH = FRAG * SCRATCH_STRIDE, /* floats of one accumulator's scratch */
  NUM_ACC = FR_M * FR_N,
  MAX_QUADS = (TILE_M > TILE_N ? TILE_M : TILE_N) * QUADS_K / THREADS, /* an invocation's per step */
  MAX_RAW = 2 * MAX_QUADS,
  UNITS_PER_GROUP = TILE_M * TILE_N / UNIT / 4, /* G about 4 x the tiles, as kernel_linear_tiles.c */
  SHARED_BYTES = (TILE_M + TILE_N) * STRIDE * 8 + SUBGROUPS * SCRATCH * 4,
};
_Static_assert(THREADS % QUADS_K == 0 && THREADS % WORDS_K == 0 && SUBGROUPS * FRAG * FRAG % THREADS == 0,
               "the staging and epilogue maps");
_Static_assert(SHARED_BYTES <= 49152, "a gpu variant declares at most 48 KB of workgroup memory");

typedef enum { QUADS, WIDE, WORDS, ELEMENTS } source_t;

/* One operand of the product: x (rows M) or W (rows N), both [rows, K]. */
typedef struct {
  const vlmc_value_t *v;
  int input;        /* its source input (QUADS, WIDE, WORDS) */
  source_t source;
  int64_t tile_rows;
  int rows;         /* index SSA: M or N */
  int staged;       /* workgroup array of vector<4xf16>: [tile_rows][STRIDE] */
  const char *raw_type; /* what the loop carries per raw value */
} operand_t;

typedef struct {
  vlmc_kernel_emit_t *e;
  operand_t x, w;
  const vlmc_value_t *b;
  int64_t k, n;
  int m, tid, sg, cs;
  int quad_row, quad_col; /* tid / QUADS_K, tid % QUADS_K */
  int word_row, word_col; /* tid / WORDS_K, tid % WORDS_K */
} coop_t;

static int idx(vlmc_kernel_emit_t *e, int64_t c) { return vlmc_kernel_emit_index(e, c); }
static int add(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.addi", a, b); }
static int mul(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.muli", a, b); }
static int divu(vlmc_kernel_emit_t *e, int a, int64_t b) { return vlmc_kernel_emit_index_op(e, "arith.divui", a, idx(e, b)); }
static int remu(vlmc_kernel_emit_t *e, int a, int64_t b) { return vlmc_kernel_emit_index_op(e, "arith.remui", a, idx(e, b)); }
static int lt(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_vk_emit_cmp(e, "slt", a, b); }
/* a + c and a * c for a constant c, its constant emitted after a (mul(e, a, idx(e, c)) with an
 * emitting a would leave the order of the two to the C compiler) */
static int addc(vlmc_kernel_emit_t *e, int a, int64_t c) { return add(e, a, idx(e, c)); }
static int mulc(vlmc_kernel_emit_t *e, int a, int64_t c) { return mul(e, a, idx(e, c)); }
static int clamp0(vlmc_kernel_emit_t *e, int ok, int at) { return vlmc_vk_emit_select(e, ok, at, idx(e, 0), "index"); }

/* %v = OP a, b : TYPE (an elementwise op on vectors). */
static int vector_op(vlmc_kernel_emit_t *e, const char *op, int a, int b, const char *type) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = %s " VLMC_SSA ", " VLMC_SSA " : %s", v, op, a, b, type);
  return v;
}

/* %v = OP a : FROM to TO (a conversion or a bitcast). */
static int convert(vlmc_kernel_emit_t *e, const char *op, int a, const char *from, const char *to) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = %s " VLMC_SSA " : %s to %s", v, op, a, from, to);
  return v;
}

static int constant(vlmc_kernel_emit_t *e, const char *type, const char *value) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant %s : %s", v, value, type);
  return v;
}

/* ok ? v : 0 for a vector SSA of `type`. */
static int vector_or_zero(vlmc_kernel_emit_t *e, int ok, int v, const char *type) {
  int zero = vlmc_kernel_emit_fresh(e), out = vlmc_kernel_emit_fresh(e);
  bool integer = strstr(type, "xi32") != NULL;
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant dense<%s> : %s", zero, integer ? "0" : "0.0", type);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : %s", out, ok, v,
                        zero, type);
  return out;
}

static int to_half4(vlmc_kernel_emit_t *e, int v) {
  return convert(e, "arith.truncf", v, "vector<4xf32>", "vector<4xf16>");
}

/* Four f32 scalars as a vector<4xf32> (MLIR 19 lowers no vector.from_elements to SPIR-V). */
static int vector4(vlmc_kernel_emit_t *e, const int s[4]) {
  int v = convert(e, "vector.broadcast", s[0], "f32", "vector<4xf32>");
  for (int i = 1; i < 4; ++i) {
    int next = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.insert " VLMC_SSA ", " VLMC_SSA " [%d] : f32 into vector<4xf32>",
                          next, s[i], v, i);
    v = next;
  }
  return v;
}

/* The 8 bf16 of a vector<4xi32> as two vector<4xf32> (elements 0..3, 4..7): a word's low half
 * is its even element (little-endian), each widened by putting its bits in an f32's top half. */
static void bf16x8_quads(vlmc_kernel_emit_t *e, int words, int out[2]) {
  const char *type = "vector<4xi32>";
  int sixteen = constant(e, type, "dense<16>"), mask = constant(e, type, "dense<-65536>");
  int lo = vector_op(e, "arith.shli", words, sixteen, type), hi = vector_op(e, "arith.andi", words, mask, type);
  int even = convert(e, "arith.bitcast", lo, type, "vector<4xf32>");
  int odd = convert(e, "arith.bitcast", hi, type, "vector<4xf32>");
  for (int h = 0; h < 2; ++h) {
    out[h] = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.shuffle " VLMC_SSA ", " VLMC_SSA " [%d, %d, %d, %d] : "
                          "vector<4xf32>, vector<4xf32>", out[h], even, odd, 2 * h, 2 * h + 4, 2 * h + 1, 2 * h + 5);
  }
}

/* ---- staging ---- */

/* Raw values an invocation carries per step for operand O, and quads (or wide words) it stages. */
static int loads_per_step(const operand_t *O) {
  return (int)(O->source == WIDE ? O->tile_rows * WORDS_K / THREADS : O->tile_rows * QUADS_K / THREADS);
}
static int raw_per_step(const operand_t *O) { return loads_per_step(O) * (O->source == WORDS ? 2 : 1); }

/* Load i of the step: its row in the tile and its first k in the step. */
static void load_place(const coop_t *C, const operand_t *O, int i, int *row, int *k_in_step) {
  vlmc_kernel_emit_t *e = C->e;
  if (O->source == WIDE) {
    *row = addc(e, C->word_row, (int64_t)i * (THREADS / WORDS_K));
    *k_in_step = mulc(e, C->word_col, 8);
  } else {
    *row = addc(e, C->quad_row, (int64_t)i * (THREADS / QUADS_K));
    *k_in_step = mulc(e, C->quad_col, 4);
  }
}

/* Whether row0 + row, k of O exist (a whole quad or word does when k does: K is a multiple of
 * its width). */
static int in_range(const coop_t *C, const operand_t *O, int row0, int row, int k) {
  vlmc_kernel_emit_t *e = C->e;
  int row_ok = lt(e, add(e, row0, row), O->rows), k_ok = lt(e, k, idx(e, C->k));
  return vlmc_vk_emit_and(e, row_ok, k_ok);
}

/* The step at k0's loads of O's tile from row0: raw[] (raw_per_step of them). */
static void load_step(const coop_t *C, const operand_t *O, int row0, int k0, int *raw) {
  vlmc_kernel_emit_t *e = C->e;
  int kk = idx(e, C->k), n = 0;
  for (int i = 0; i < loads_per_step(O); ++i) {
    int row, ks;
    load_place(C, O, i, &row, &ks);
    int k = add(e, k0, ks);
    if (O->source == ELEMENTS) { /* each element masked as it loads */
      int s[4];
      for (int c = 0; c < 4; ++c) {
        int kc = addc(e, k, c), ok_c = in_range(C, O, row0, row, kc);
        int at = clamp0(e, ok_c, add(e, mul(e, add(e, row0, row), kk), kc));
        int v = vlmc_kernel_emit_load(e, O->v, at), zero = vlmc_kernel_emit_f32(e, 0);
        s[c] = vlmc_vk_emit_select(e, ok_c, v, zero, "f32");
      }
      raw[n++] = vector4(e, s);
      continue;
    }
    int ok = in_range(C, O, row0, row, k);
    int flat = clamp0(e, ok, add(e, mul(e, add(e, row0, row), kk), k));
    switch (O->source) {
    case QUADS:
      raw[n++] = vlmc_vk_emit_load_quad_vector(e, O->input, divu(e, flat, 4));
      break;
    case WIDE:
      raw[n++] = vlmc_vk_emit_load_words4(e, O->input, divu(e, flat, 8));
      break;
    case WORDS:
      for (int h = 0; h < 2; ++h) {
        /* word h holds k + 2h, k + 2h + 1 (K even: never half past the row) */
        int ok_h = h ? in_range(C, O, row0, row, addc(e, k, 2)) : ok;
        int at = clamp0(e, ok_h, addc(e, divu(e, flat, 2), h));
        int v = vlmc_kernel_emit_fresh(e);
        vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load %%b%d[" VLMC_SSA "] : memref<?xi32>", v, O->input, at);
        raw[n++] = v;
      }
      break;
    case ELEMENTS: /* loaded above */
      break;
    }
  }
}

/* The step at k0's raw values of O (loaded by load_step) masked, as f16, into O's staged tile.
 * The masks are recomputed here rather than applied at the load: a select on a loaded value
 * would wait for the load there, before the step's multiply-adds. */
static void store_step(const coop_t *C, const operand_t *O, int row0, int k0, const int *raw) {
  vlmc_kernel_emit_t *e = C->e;
  int n = 0;
  for (int i = 0; i < loads_per_step(O); ++i) {
    int row, ks;
    load_place(C, O, i, &row, &ks);
    int row_slot = mulc(e, row, STRIDE), slot = add(e, row_slot, divu(e, ks, 4));
    int k = add(e, k0, ks);
    int halves[2], count = 1;
    switch (O->source) {
    case QUADS: {
      int ok = in_range(C, O, row0, row, k), v = vector_or_zero(e, ok, raw[n++], O->raw_type);
      halves[0] = strstr(O->raw_type, "f16") ? v : to_half4(e, v);
      break;
    }
    case WIDE: {
      int quads[2];
      int ok = in_range(C, O, row0, row, k);
      bf16x8_quads(e, vector_or_zero(e, ok, raw[n++], O->raw_type), quads);
      halves[0] = to_half4(e, quads[0]);
      halves[1] = to_half4(e, quads[1]);
      count = 2;
      break;
    }
    case WORDS: {
      int w[2], f[4];
      for (int h = 0; h < 2; ++h) {
        int k_h = addc(e, k, 2 * h), ok_h = in_range(C, O, row0, row, k_h), zero = constant(e, "i32", "0");
        w[h] = vlmc_vk_emit_select(e, ok_h, raw[n++], zero, "i32");
        vlmc_vk_emit_bf16_word(e, w[h], f + 2 * h);
      }
      halves[0] = to_half4(e, vector4(e, f));
      break;
    }
    case ELEMENTS:
      halves[0] = to_half4(e, raw[n++]);
      break;
    }
    for (int h = 0; h < count; ++h) vlmc_vk_emit_shared_store(e, O->staged, halves[h], addc(e, slot, h));
  }
}

/* ---- the K loop ---- */

/* The staged slot of row first + r, column k (halves) of a tile. */
static int staged_at(vlmc_kernel_emit_t *e, int first, int64_t r, int64_t k) {
  return addc(e, mulc(e, addc(e, first, r), STRIDE), k / 4);
}

/* The step's multiply-adds of subgroup sg on the staged tiles: acc[] updated. */
static void multiply_step(const coop_t *C, int *acc) {
  vlmc_kernel_emit_t *e = C->e;
  int row0 = mulc(e, divu(e, C->sg, SG_N), SUB_M), col0 = mulc(e, remu(e, C->sg, SG_N), SUB_N);
  for (int kk = 0; kk < TILE_K; kk += FRAG) {
    int a[FR_M], b[FR_N];
    for (int i = 0; i < FR_M; ++i)
      a[i] = vlmc_vk_emit_mma_load(e, C->x.staged, staged_at(e, row0, FRAG * i, kk), STRIDE, false);
    for (int j = 0; j < FR_N; ++j)
      b[j] = vlmc_vk_emit_mma_load(e, C->w.staged, staged_at(e, col0, FRAG * j, kk), STRIDE, true);
    for (int i = 0; i < FR_M; ++i)
      for (int j = 0; j < FR_N; ++j) acc[FR_N * i + j] = vlmc_vk_emit_mma(e, a[i], b[j], acc[FR_N * i + j]);
  }
}

/* The K loop of the tile at (m0, n0): returns the loop's results SSA (accumulator (i, j) is
 * %r#(FR_N i + j)). The loop carries the accumulators and the next step's raw loads. */
static int accumulate(const coop_t *C, int m0, int n0) {
  vlmc_kernel_emit_t *e = C->e;
  const char *acc_type = vlmc_vk_mma_acc_type();
  const int nx = raw_per_step(&C->x), nw = raw_per_step(&C->w), carried = NUM_ACC + nx + nw;
  int zero = vlmc_vk_emit_mma_zero(e), from = idx(e, 0), to = idx(e, C->k), step = idx(e, TILE_K);
  int first[NUM_ACC + 2 * MAX_RAW], inner[NUM_ACC + 2 * MAX_RAW];
  for (int a = 0; a < NUM_ACC; ++a) first[a] = zero;
  load_step(C, &C->x, m0, from, first + NUM_ACC);
  load_step(C, &C->w, n0, from, first + NUM_ACC + nx);
  int results = vlmc_kernel_emit_fresh(e), k0 = vlmc_kernel_emit_fresh(e);
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  /* K >= 1: the loop runs at least once (pitfall 4 cannot bite) */
  vlmc_strbuf_printf(&line, "%%v%d:%d = scf.for %%v%d = %%v%d to %%v%d step %%v%d iter_args(", results, carried, k0,
                     from, to, step);
  for (int a = 0; a < carried; ++a) {
    inner[a] = vlmc_kernel_emit_fresh(e);
    vlmc_strbuf_printf(&line, "%s%%v%d = %%v%d", a ? ", " : "", inner[a], first[a]);
  }
  vlmc_strbuf_puts(&line, ") -> (");
  for (int a = 0; a < carried; ++a)
    vlmc_strbuf_printf(&line, "%s%s", a ? ", " : "",
                       a < NUM_ACC ? acc_type : a < NUM_ACC + nx ? C->x.raw_type : C->w.raw_type);
  vlmc_strbuf_puts(&line, ") {");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  store_step(C, &C->x, m0, k0, inner + NUM_ACC);
  store_step(C, &C->w, n0, k0, inner + NUM_ACC + nx);
  vlmc_vk_emit_barrier(e);
  int next[NUM_ACC + 2 * MAX_RAW];
  int k_next = add(e, k0, step); /* past K on the last step: every load masked to element 0 */
  load_step(C, &C->x, m0, k_next, next + NUM_ACC);
  load_step(C, &C->w, n0, k_next, next + NUM_ACC + nx);
  memcpy(next, inner, sizeof(int) * NUM_ACC);
  multiply_step(C, next);
  vlmc_vk_emit_barrier(e);
  vlmc_strbuf_clear(&line);
  vlmc_strbuf_puts(&line, "scf.yield ");
  for (int a = 0; a < carried; ++a) vlmc_strbuf_printf(&line, "%s%%v%d", a ? ", " : "", next[a]);
  vlmc_strbuf_puts(&line, " : ");
  for (int a = 0; a < carried; ++a)
    vlmc_strbuf_printf(&line, "%s%s", a ? ", " : "",
                       a < NUM_ACC ? acc_type : a < NUM_ACC + nx ? C->x.raw_type : C->w.raw_type);
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
  vlmc_kernel_emit_line(e, "}");
  return results;
}

/* ---- the epilogue ---- */

/* Accumulator (i, j) of every subgroup into its scratch, a barrier, the workgroup runs the
 * scratches' elements through the bias and the epilogue (guarded at the edges), a barrier.
 * One accumulator at a time: scratch for all four (20 KB, 30 KB of workgroup memory in all)
 * cost more in resident workgroups than the barriers it saves (H100, 2026-12-07: prefill 512
 * 5,818 tok/s against 10,449). */
static void store_fragment(const coop_t *C, int results, int i, int j, int m0, int n0) {
  vlmc_kernel_emit_t *e = C->e;
  vlmc_kernel_emit_line(e, "gpu.subgroup_mma_store_matrix %%v%d#%d, " VLMC_SSA "[" VLMC_SSA "] {leadDimension = %d : "
                        "index} : %s, memref<%dxf32, #spirv.storage_class<Workgroup>>",
                        results, FR_N * i + j, C->cs, mulc(e, C->sg, SCRATCH), SCRATCH_STRIDE,
                        vlmc_vk_mma_acc_type(), SUBGROUPS * SCRATCH);
  vlmc_vk_emit_barrier(e);
  for (int q = 0; q < SUBGROUPS * FRAG * FRAG / THREADS; ++q) {
    int at = addc(e, C->tid, q * THREADS);
    int s = divu(e, at, FRAG * FRAG), rc = remu(e, at, FRAG * FRAG);
    int rr = divu(e, rc, FRAG), cc = remu(e, rc, FRAG);
    int sub_m0 = add(e, m0, mulc(e, divu(e, s, SG_N), SUB_M));
    int row = add(e, sub_m0, addc(e, rr, FRAG * i));
    int sub_n0 = add(e, n0, mulc(e, remu(e, s, SG_N), SUB_N));
    int col = add(e, sub_n0, addc(e, cc, FRAG * j));
    int row_ok = lt(e, row, C->m), col_ok = lt(e, col, idx(e, C->n));
    int ok = vlmc_vk_emit_and(e, row_ok, col_ok);
    vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", ok);
    int scratch = mulc(e, s, SCRATCH), in_scratch = add(e, mulc(e, rr, SCRATCH_STRIDE), cc);
    int v = vlmc_vk_emit_shared_load(e, C->cs, add(e, scratch, in_scratch));
    if (C->b) {
      int bias = vlmc_kernel_emit_load(e, C->b, col);
      v = vlmc_kernel_emit_float_op(e, "arith.addf", v, bias, 0);
    }
    int flat = add(e, mul(e, row, idx(e, C->n)), col);
    vlmc_kernel_emit_finish_element(e, v, flat);
    vlmc_kernel_emit_line(e, "}");
  }
  vlmc_vk_emit_barrier(e);
}

/* ---- choosing how each operand is read ---- */

static void choose_source(coop_t *C, operand_t *O, int other_input) {
  vlmc_kernel_emit_t *e = C->e;
  int in = vlmc_kernel_emit_source_input(e, O->v);
  vlmc_dtype_t storage = in >= 0 ? vlmc_kernel_emit_input_storage(e, (uint32_t)in) : VLMC_DTYPE_F32;
  O->input = in;
  O->source = ELEMENTS;
  O->raw_type = "vector<4xf32>";
  if (in < 0 || in >= 32 || in == other_input) return; /* x = W: one binding, one way of reading it */
  if (storage == VLMC_DTYPE_BF16 && C->k % 8 == 0) {
    O->source = WIDE;
    O->raw_type = "vector<4xi32>";
  } else if (storage == VLMC_DTYPE_BF16 && C->k % 2 == 0) {
    O->source = WORDS;
    O->raw_type = "i32";
  } else if (C->k % 4 == 0 && vlmc_vk_emit_can_declare_quads(e, in)) {
    O->source = QUADS;
    O->raw_type = storage == VLMC_DTYPE_F16 ? "vector<4xf16>" : "vector<4xf32>";
    vlmc_vk_emit_declare_quads(e, in);
  }
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
  coop_t C = {.e = e, .b = op->num_operands > 2 ? op->operands[2] : NULL};
  C.x = (operand_t){.v = op->operands[0], .tile_rows = TILE_M};
  C.w = (operand_t){.v = op->operands[1], .tile_rows = TILE_N};
  const vlmc_type_t *xt = &C.x.v->type;
  C.n = C.w.v->type.dims[0].off;
  C.k = C.w.v->type.dims[1].off;
  e->template_name = "linear_tiles";
  e->cost = 2 * C.k * TILE_M * TILE_N;
  vlmc_vk_emit_set_workgroup(e, THREADS, 1, 1, UNITS_PER_GROUP);
  choose_source(&C, &C.w, -1);
  choose_source(&C, &C.x, C.w.input);
  vlmc_vk_emit_allow_shared(e, SHARED_BYTES);
  C.x.staged = vlmc_vk_emit_shared(e, "vector<4xf16>", TILE_M * STRIDE);
  C.w.staged = vlmc_vk_emit_shared(e, "vector<4xf16>", TILE_N * STRIDE);
  C.cs = vlmc_vk_emit_shared(e, "f32", SUBGROUPS * SCRATCH);
  C.tid = vlmc_vk_emit_thread_id(e, 0);
  C.sg = vlmc_vk_emit_subgroup_id(e);
  C.m = vlmc_kernel_emit_dims_product(e, xt, 0, xt->rank - 1);
  C.x.rows = C.m;
  C.w.rows = idx(e, C.n);
  C.quad_row = divu(e, C.tid, QUADS_K);
  C.quad_col = remu(e, C.tid, QUADS_K);
  C.word_row = divu(e, C.tid, WORDS_K);
  C.word_col = remu(e, C.tid, WORDS_K);
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
