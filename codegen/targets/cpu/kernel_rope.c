/* rope(x [T, H, Dh], positions [planes, T] (or [T] for plain)) -> [T, H, Dh], every layout
 * (semantics: docs/ir.md and reference/exec_rope.c). One work unit per token.
 *
 * The frequency and plane tables depend only on attributes, so they are computed here in C
 * exactly as the reference computes them (f32 quotient exponent, theta^e in f64, 1 / that in
 * f32) and emitted as dense constants, stored once per call into small stack buffers. Per
 * token, the half cos / sin pairs are computed into a stack buffer: angle = (f32)pos * inv_freq
 * in f32, then cos and sin in f64 rounded to f32, as the reference does (libm's cos of the
 * same f32 angle: the tables match the reference's bit for bit, and it costs one cos and one
 * sin per slot per token, not per head). Then every head of the token rotates its pairs
 * (j, j + half) with vector loads along j, and dims from rotary_dim on pass through. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/targets/cpu/kernels.h"
#include "reference/rope_tables.h"

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *x, *pos;
  int64_t head_dim, rotary, half;
  int heads;      /* index SSA: H */
  int tokens;     /* index SSA: T, the stride between position planes */
  int freq;       /* memref<half x f32>: inv_freq */
  int planes;     /* memref<half x i64>: plane of each slot; -1 when all share one */
  int64_t plane0; /* that one plane */
  int cos_sin;    /* memref<2 half x f32>: cos of each slot, then sin */
  int vl;
} rope_t;

/* The tables are the reference's own (reference/rope_tables.h), computed here in C and
 * emitted as constants. */
static bool plane_table(vlmc_kernel_emit_t *e, const vlmc_op_t *op, const char *layout, int64_t half,
                        int64_t *plane) {
  vlmc_status_t st = vlmc_rope_plane_table(op, layout, half, plane);
  if (!st) return true;
  vlmc_kernel_emit_fail(e, "rope: %s", vlmc_status_message(st));
  vlmc_status_free(st);
  return false;
}

/* ---- small emitters ---- */

/* `scf.for %iv = <from> to <to> step <step> {` over constants; returns %iv. The loop's value is
 * numbered before its bounds, and the bounds in order, one statement each: that order is the
 * kernels' text whatever compiler built vlmc. */
static int open_loop(vlmc_kernel_emit_t *e, int64_t from, int64_t to, int64_t step) {
  int iv = vlmc_kernel_emit_fresh(e);
  int lo = vlmc_kernel_emit_index(e, from), hi = vlmc_kernel_emit_index(e, to);
  int by = vlmc_kernel_emit_index(e, step);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {", iv,
                        lo, hi, by);
  return iv;
}

/* A stack buffer of `count` elements of `type`, filled from a dense constant. */
static int constant_buffer(vlmc_kernel_emit_t *e, const char *type, int64_t count,
                           const vlmc_strbuf_t *elements) {
  int dense = vlmc_kernel_emit_fresh(e), buf = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant dense<[%s]> : vector<%lldx%s>", dense,
                        vlmc_strbuf_cstr(elements), (long long)count, type);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.alloca() : memref<%lldx%s>", buf, (long long)count,
                        type);
  vlmc_kernel_emit_line(e,
                        "vector.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA
                        "] : memref<%lldx%s>, "
                        "vector<%lldx%s>",
                        dense, buf, vlmc_kernel_emit_index(e, 0), (long long)count, type,
                        (long long)count, type);
  return buf;
}

/* Emits the inv_freq and plane buffers (the plane one only when slots use several planes). */
static void emit_tables(rope_t *R, const float *inv_freq, const int64_t *plane) {
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  for (int64_t j = 0; j < R->half; ++j)
    vlmc_strbuf_printf(&text, "%s%.9e", j ? ", " : "", (double)inv_freq[j]); /* round-trips */
  R->freq = constant_buffer(R->e, "f32", R->half, &text);
  R->plane0 = plane[0];
  bool uniform = true;
  for (int64_t j = 1; j < R->half; ++j) uniform &= plane[j] == plane[0];
  R->planes = -1;
  if (!uniform) {
    vlmc_strbuf_clear(&text);
    for (int64_t j = 0; j < R->half; ++j)
      vlmc_strbuf_printf(&text, "%s%lld", j ? ", " : "", (long long)plane[j]);
    R->planes = constant_buffer(R->e, "i64", R->half, &text);
  }
  vlmc_strbuf_deinit(&text);
  R->cos_sin = vlmc_kernel_emit_fresh(R->e);
  vlmc_kernel_emit_line(R->e, VLMC_SSA " = memref.alloca() : memref<%lldxf32>", R->cos_sin,
                        (long long)(2 * R->half));
}

/* ---- per token ---- */

/* Token t's position in `plane` (an index SSA) as f32. */
static int position(const rope_t *R, int plane, int t) {
  vlmc_kernel_emit_t *e = R->e;
  int at = vlmc_kernel_emit_index_op(e, "arith.addi", vlmc_kernel_emit_index_op(e, "arith.muli", plane, R->tokens), t);
  int p = vlmc_kernel_emit_load(e, R->pos, at);
  int f = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.sitofp " VLMC_SSA " : i64 to f32", f, p);
  return f;
}

/* f(angle) in f64, rounded to f32, stored at cos_sin[at]. */
static void store_trig(const rope_t *R, const char *f, int angle64, int at) {
  vlmc_kernel_emit_t *e = R->e;
  int wide = vlmc_kernel_emit_fresh(e), narrow = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = %s " VLMC_SSA " : f64", wide, f, angle64);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.truncf " VLMC_SSA " : f64 to f32", narrow, wide);
  vlmc_kernel_emit_line(e, "memref.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxf32>",
                        narrow, R->cos_sin, at, (long long)(2 * R->half));
}

/* cos_sin[j] = cos(angle j), cos_sin[half + j] = sin(angle j) for token t. */
static void emit_angles(const rope_t *R, int t) {
  vlmc_kernel_emit_t *e = R->e;
  int shared = R->planes < 0 ? position(R, vlmc_kernel_emit_index(e, R->plane0), t) : -1;
  int j = open_loop(e, 0, R->half, 1);
  int pos = shared;
  if (pos < 0) {
    int raw = vlmc_kernel_emit_fresh(e), plane = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxi64>",
                          raw, R->planes, j, (long long)R->half);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : i64 to index", plane, raw);
    pos = position(R, plane, t);
  }
  int freq = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxf32>",
                        freq, R->freq, j, (long long)R->half);
  int angle = vlmc_kernel_emit_float_op(e, "arith.mulf", pos, freq, 0);
  int angle64 = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.extf " VLMC_SSA " : f32 to f64", angle64, angle);
  store_trig(R, "math.cos", angle64, j);
  store_trig(R, "math.sin", angle64, vlmc_kernel_emit_index_op(e, "arith.addi", j, vlmc_kernel_emit_index(e, R->half)));
  vlmc_kernel_emit_line(e, "}");
}

/* cos_sin[at] as a scalar (width 0) or a vector. */
static int load_table(const rope_t *R, int at, int width) {
  int v = vlmc_kernel_emit_fresh(R->e);
  if (width == 0)
    vlmc_kernel_emit_line(R->e,
                          VLMC_SSA " = memref.load " VLMC_SSA "[" VLMC_SSA "] : memref<%lldxf32>", v,
                          R->cos_sin, at, (long long)(2 * R->half));
  else
    vlmc_kernel_emit_line(R->e,
                          VLMC_SSA " = vector.load " VLMC_SSA "[" VLMC_SSA
                                "] : memref<%lldxf32>, "
                                "vector<%dxf32>",
                       v, R->cos_sin, at, (long long)(2 * R->half), width);
  return v;
}

/* Rotates the pair (j, j + half) of the head row at `base`, `width` slots at once (0: one). */
static void rotate(const rope_t *R, int base, int j, int width) {
  vlmc_kernel_emit_t *e = R->e;
  int half = vlmc_kernel_emit_index(e, R->half);
  int j2 = vlmc_kernel_emit_index_op(e, "arith.addi", j, half);
  int at1 = vlmc_kernel_emit_index_op(e, "arith.addi", base, j), at2 = vlmc_kernel_emit_index_op(e, "arith.addi", base, j2);
  int x1 = vlmc_cpu_emit_load_at(e, R->x, at1, width), x2 = vlmc_cpu_emit_load_at(e, R->x, at2, width);
  int c = load_table(R, j, width), s = load_table(R, j2, width);
  /* Each product rounds to f32 before the sum, as in the reference (and torch). */
  int x1c = vlmc_kernel_emit_float_op(e, "arith.mulf", x1, c, width), x2s = vlmc_kernel_emit_float_op(e, "arith.mulf", x2, s, width);
  int x2c = vlmc_kernel_emit_float_op(e, "arith.mulf", x2, c, width), x1s = vlmc_kernel_emit_float_op(e, "arith.mulf", x1, s, width);
  int y1 = vlmc_kernel_emit_float_op(e, "arith.subf", x1c, x2s, width);
  int y2 = vlmc_kernel_emit_float_op(e, "arith.addf", x2c, x1s, width);
  if (width) {
    vlmc_cpu_emit_finish_vector(e, y1, at1, width);
    vlmc_cpu_emit_finish_vector(e, y2, at2, width);
  } else {
    vlmc_kernel_emit_finish_element(e, y1, at1);
    vlmc_kernel_emit_finish_element(e, y2, at2);
  }
}

static void slot_loop(const rope_t *R, int base, int64_t from, int64_t to, int step) {
  if (from >= to) return;
  vlmc_kernel_emit_t *e = R->e;
  int j = open_loop(e, from, to, step);
  rotate(R, base, j, step == 1 ? 0 : step);
  vlmc_kernel_emit_line(e, "}");
}

/* Every head of token t: the rotated pairs, then the dims past rotary_dim unchanged. */
static void emit_heads(const rope_t *R, int t) {
  vlmc_kernel_emit_t *e = R->e;
  int h = vlmc_kernel_emit_fresh(e); /* numbered before the bounds, as in open_loop */
  int zero = vlmc_kernel_emit_index(e, 0), one = vlmc_kernel_emit_index(e, 1);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {",
                        h, zero, R->heads, one);
  int row = vlmc_kernel_emit_index_op(e, "arith.addi", vlmc_kernel_emit_index_op(e, "arith.muli", t, R->heads), h);
  int base = vlmc_kernel_emit_index_op(e, "arith.muli", row, vlmc_kernel_emit_index(e, R->head_dim));
  int64_t vec_end = R->half / R->vl * R->vl;
  slot_loop(R, base, 0, vec_end, R->vl);
  slot_loop(R, base, vec_end, R->half, 1);
  if (R->rotary < R->head_dim) {
    int k = open_loop(e, R->rotary, R->head_dim, 1);
    int at = vlmc_kernel_emit_index_op(e, "arith.addi", base, k);
    vlmc_kernel_emit_finish_element(e, vlmc_kernel_emit_load(e, R->x, at), at);
    vlmc_kernel_emit_line(e, "}");
  }
  vlmc_kernel_emit_line(e, "}");
}

/* Head dim and rotary width from the op; false (after failing) when unsupported. */
static bool rope_dims(vlmc_kernel_emit_t *e, const vlmc_op_t *op, rope_t *R) {
  const vlmc_type_t *xt = &op->operands[0]->type;
  if (xt->rank != 3 || !vlmc_dim_is_static(xt->dims[2])) {
    vlmc_kernel_emit_fail(e, "rope: the cpu kernel needs x [T, H, Dh] with a static head dim");
    return false;
  }
  R->head_dim = xt->dims[2].off;
  const vlmc_attr_t *rotary = vlmc_op_attr(op, "rotary_dim");
  R->rotary = rotary ? rotary->v.i : R->head_dim;
  if (R->rotary <= 0 || R->rotary % 2 != 0 || R->rotary > R->head_dim) {
    vlmc_kernel_emit_fail(e, "rope: rotary_dim %lld does not fit head dim %lld", (long long)R->rotary,
                          (long long)R->head_dim);
    return false;
  }
  R->half = R->rotary / 2;
  return true;
}

vlmc_status_t vlmc_cpu_kernel_rope(vlmc_kernel_emit_t *e) {
  const vlmc_op_t *op = e->anchor;
  rope_t R = {e, op->operands[0], op->operands[1], 0, 0, 0, -1, -1, -1, -1, 0, -1, e->vector_width};
  if (!rope_dims(e, op, &R)) return NULL;
  const char *layout = vlmc_op_attr_enum(op, "layout");
  if (strcmp(layout, "vision_2d") == 0 && R.half % 2 != 0) {
    vlmc_kernel_emit_fail(e, "rope: vision_2d needs rotary_dim a multiple of 4, got %lld",
                          (long long)R.rotary);
    return NULL;
  }
  int64_t *plane = malloc((size_t)R.half * sizeof *plane);
  float *inv_freq = malloc((size_t)R.half * sizeof *inv_freq);
  bool ok = plane && inv_freq && plane_table(e, op, layout, R.half, plane);
  if (!plane || !inv_freq) vlmc_kernel_emit_fail(e, "rope: out of memory");
  if (ok) {
    vlmc_rope_frequency_table(layout, vlmc_op_attr_float(op, "theta"), R.rotary, inv_freq);
    const vlmc_type_t *xt = &R.x->type;
    e->template_name = "rope";
    int64_t heads = vlmc_dim_is_static(xt->dims[1]) ? xt->dims[1].off : 16;
    e->cost = R.half * 40 + heads * R.head_dim * 4; /* a cos and a sin per slot */
    R.heads = vlmc_kernel_emit_dim(e, xt->dims[1]);
    R.tokens = vlmc_kernel_emit_dim(e, xt->dims[0]);
    emit_tables(&R, inv_freq, plane);
    int t = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = %%lo to %%hi step " VLMC_SSA " {", t,
                          vlmc_kernel_emit_index(e, 1));
    emit_angles(&R, t);
    emit_heads(&R, t);
    vlmc_kernel_emit_line(e, "}");
  }
  free(plane);
  free(inv_freq);
  return NULL;
}
