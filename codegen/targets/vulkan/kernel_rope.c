/* rope(x [T, H, Dh], positions [planes, T] (or [T] for plain)) -> [T, H, Dh] for the vulkan
 * target, every layout (semantics: docs/ir.md and reference/exec_rope.c), as the template
 * "rope_heads" (artifact/kernel_rules.c): one work unit per (token, head), H static, a
 * workgroup per unit whose invocations take the head's rotary slots (each computing its
 * slot's angle, cos and sin) and then its pass-through dims. (One workgroup per token walking
 * every head, the cpu's unit, was 21 us of a 3B decode step's q rope on an H100 against 4.4 us
 * for an empty dispatch: a decode step's T = 1 token gave the GPU one workgroup.)
 *
 * The frequency and plane tables depend only on attributes: computed here in C exactly as the
 * reference computes them (reference/rope_tables.h) and written into the kernel as constants
 * that invocation 0 stores into workgroup memory (a SPIR-V kernel has no indexable constant
 * arrays). The angle is (f32)pos * inv_freq in f32 as in the reference; cos and sin
 * are computed here rather than by GLSL.std.450 Cos / Sin, whose Vulkan precision is only
 * 2^-11 absolute: a Cody-Waite reduction by pi/2 in three f32 parts (the first two short
 * enough that k * part is exact for the quadrant counts of positions below ~10^4) and the
 * cephes minimax polynomials on [-pi/4, pi/4], within about 1e-7 of the reference's f64
 * cos / sin rounded to f32 for angles up to ~10^4. */
#include <stdlib.h>
#include <string.h>

#include "codegen/targets/vulkan/kernels.h"
#include "reference/rope_tables.h"

/* Invocations per workgroup: a (token, head) unit's rotary slots (64 for head dim 128). */
enum {
  GROUP = 64,
  LANES_UNITS = 64, /* units a workgroup of the variant for CPU devices walks */
};

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *x, *pos;
  int64_t head_dim, rotary, half;
  int64_t heads; /* H (static) */
  int tokens; /* index SSA: T, the stride between position planes */
} rope_t;

static int fop(vlmc_kernel_emit_t *e, const char *op, int a, int b) {
  return vlmc_kernel_emit_float_op(e, op, a, b, 0);
}

static int f32c(vlmc_kernel_emit_t *e, double v) { return vlmc_kernel_emit_f32(e, v); }

/* a + b * c without fusing (Vulkan's Fma may be unfused anyway). */
static int mul_add(vlmc_kernel_emit_t *e, int a, int b, int c) {
  return fop(e, "arith.addf", a, fop(e, "arith.mulf", b, c));
}

/* ((q + add) & mask) != 0 for an i32 q (an i1). */
static int quadrant_bit(vlmc_kernel_emit_t *e, int q, int add, int mask) {
  int a = vlmc_kernel_emit_fresh(e), m = vlmc_kernel_emit_fresh(e), z = vlmc_kernel_emit_fresh(e);
  int sum = vlmc_kernel_emit_fresh(e), bits = vlmc_kernel_emit_fresh(e), v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant %d : i32", a, add);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant %d : i32", m, mask);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant 0 : i32", z);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addi " VLMC_SSA ", " VLMC_SSA " : i32", sum, q, a);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i32", bits, sum, m);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi ne, " VLMC_SSA ", " VLMC_SSA " : i32", v, bits, z);
  return v;
}

static int select_f32(vlmc_kernel_emit_t *e, int cond, int a, int b) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : f32", v,
                        cond, a, b);
  return v;
}

/* cos(x) and sin(x) of an f32 x (see the file comment). */
static void emit_cos_sin(vlmc_kernel_emit_t *e, int x, int *out_cos, int *out_sin) {
  int k = vlmc_kernel_emit_float_unary(e, "math.roundeven",
                                       fop(e, "arith.mulf", x, f32c(e, 0.63661977236758134)), 0);
  /* pi/2 = P1 + P2 + P3; P1 has 8 significant bits, P2 11: k * P1 and k * P2 are exact. */
  int r = fop(e, "arith.subf", x, fop(e, "arith.mulf", k, f32c(e, 1.5703125)));
  r = fop(e, "arith.subf", r, fop(e, "arith.mulf", k, f32c(e, 4.837512969970703125e-4)));
  r = fop(e, "arith.subf", r, fop(e, "arith.mulf", k, f32c(e, 7.54978995489188216e-8)));
  int z = fop(e, "arith.mulf", r, r);
  int s2 = f32c(e, 8.3321608736e-3), s3 = f32c(e, -1.9515295891e-4);
  int sp = mul_add(e, s2, z, s3);
  sp = mul_add(e, f32c(e, -1.6666654611e-1), z, sp);
  int s = mul_add(e, r, fop(e, "arith.mulf", r, z), sp);
  int c2 = f32c(e, -1.388731625493765e-3), c3 = f32c(e, 2.443315711809948e-5);
  int cp = mul_add(e, c2, z, c3);
  cp = mul_add(e, f32c(e, 4.166664568298827e-2), z, cp);
  int one = f32c(e, 1.0);
  int half_z = fop(e, "arith.mulf", f32c(e, 0.5), z);
  int c0 = fop(e, "arith.subf", one, half_z);
  int z2 = fop(e, "arith.mulf", z, z);
  int c = mul_add(e, c0, z2, cp);
  /* The quadrant k mod 4 (two's complement: also for negative k) picks the polynomial and
   * the sign: cos = c, -s, -c, s and sin = s, c, -s, -c. */
  int ki = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.fptosi " VLMC_SSA " : f32 to i32", ki, k);
  int odd = quadrant_bit(e, ki, 0, 1), neg_sin = quadrant_bit(e, ki, 0, 2);
  int neg_cos = quadrant_bit(e, ki, 1, 2);
  int cos_mag = select_f32(e, odd, s, c), sin_mag = select_f32(e, odd, c, s);
  *out_cos = select_f32(e, neg_cos, vlmc_kernel_emit_float_unary(e, "arith.negf", cos_mag, 0), cos_mag);
  *out_sin = select_f32(e, neg_sin, vlmc_kernel_emit_float_unary(e, "arith.negf", sin_mag, 0), sin_mag);
}

/* Token t's position in `plane` (an index SSA) as f32. */
static int position(const rope_t *R, int plane, int t) {
  vlmc_kernel_emit_t *e = R->e;
  int row = vlmc_kernel_emit_index_op(e, "arith.muli", plane, R->tokens);
  int p = vlmc_kernel_emit_load(e, R->pos, vlmc_kernel_emit_index_op(e, "arith.addi", row, t));
  int f = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.sitofp " VLMC_SSA " : i64 to f32", f, p);
  return f;
}

/* Flat index of dim j (an index SSA) of the head row that starts at `base`. */
static int head_at(const rope_t *R, int base, int j) {
  return vlmc_kernel_emit_index_op(R->e, "arith.addi", base, j);
}

/* The pair (x1, x2) at (at1, at2) rotated by cos c and sin s, stored through the epilogue.
 * Each product rounds to f32 before the sum, as in the reference (and torch). */
static void rotate_pair(const rope_t *R, int x1, int x2, int at1, int at2, int c, int s) {
  vlmc_kernel_emit_t *e = R->e;
  int x1c = fop(e, "arith.mulf", x1, c);
  int x2s = fop(e, "arith.mulf", x2, s);
  int y1 = fop(e, "arith.subf", x1c, x2s);
  int x2c = fop(e, "arith.mulf", x2, c);
  int x1s = fop(e, "arith.mulf", x1, s);
  int y2 = fop(e, "arith.addf", x2c, x1s);
  vlmc_kernel_emit_finish_element(e, y1, at1);
  vlmc_kernel_emit_finish_element(e, y2, at2);
}

/* Rotary slot j (an index SSA) of the head row at `base`: the pair (j, j + half) by the
 * angle's cos c and sin s. */
static void rotate_slot(const rope_t *R, int base, int j, int c, int s) {
  vlmc_kernel_emit_t *e = R->e;
  int j2 = vlmc_kernel_emit_index_op(e, "arith.addi", j, vlmc_kernel_emit_index(e, R->half));
  int at1 = head_at(R, base, j), at2 = head_at(R, base, j2);
  int x1 = vlmc_kernel_emit_load(e, R->x, at1), x2 = vlmc_kernel_emit_load(e, R->x, at2);
  rotate_pair(R, x1, x2, at1, at2, c, s);
}

/* The dims from rotary_dim on of the head row at `base`, unchanged, spread over the
 * workgroup. */
static void pass_through(const rope_t *R, int base) {
  if (R->rotary >= R->head_dim) return;
  vlmc_kernel_emit_t *e = R->e;
  int tid = vlmc_vk_emit_thread_id(e, 0), group = vlmc_kernel_emit_index(e, GROUP);
  int rest = vlmc_kernel_emit_index(e, R->head_dim - R->rotary);
  int f = vlmc_kernel_emit_for(e, tid, rest, group);
  int at = head_at(R, base, vlmc_kernel_emit_index_op(e, "arith.addi", f, vlmc_kernel_emit_index(e, R->rotary)));
  vlmc_kernel_emit_finish_element(e, vlmc_kernel_emit_load(e, R->x, at), at);
  vlmc_kernel_emit_line(e, "}");
}

/* Head dim and rotary width from the op; false (after failing) when unsupported. */
static bool rope_dims(vlmc_kernel_emit_t *e, const vlmc_op_t *op, rope_t *R) {
  const vlmc_type_t *xt = &op->operands[0]->type;
  if (xt->rank != 3 || !vlmc_dim_is_static(xt->dims[2])) {
    vlmc_kernel_emit_fail(e, "rope: the vulkan kernel needs x [T, H, Dh] with a static head dim");
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

/* The tables in workgroup memory, written by invocation 0 from constants (straight-line
 * stores: unrolling the slots instead makes shaders that take lavapipe minutes to compile),
 * then a barrier, reached by every invocation. *freq: f32[half]; *planes: i32[half], or -1
 * when every slot reads plane[0]. */
static void emit_tables(const rope_t *R, const float *inv_freq, const int64_t *plane, int *freq,
                        int *planes) {
  vlmc_kernel_emit_t *e = R->e;
  bool uniform = true;
  for (int64_t j = 1; j < R->half; ++j) uniform &= plane[j] == plane[0];
  *freq = vlmc_vk_emit_shared(e, "f32", R->half);
  *planes = uniform ? -1 : vlmc_vk_emit_shared(e, "i32", R->half);
  int first = vlmc_kernel_emit_fresh(e);
  int tid = vlmc_vk_emit_thread_id(e, 0), zero = vlmc_kernel_emit_index(e, 0);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi eq, " VLMC_SSA ", " VLMC_SSA " : index", first, tid,
                        zero);
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", first);
  for (int64_t j = 0; j < R->half; ++j) {
    int at = vlmc_kernel_emit_index(e, j);
    vlmc_vk_emit_shared_store(e, *freq, f32c(e, inv_freq[j]), at);
    if (uniform) continue;
    int p = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant %lld : i32", p, (long long)plane[j]);
    vlmc_vk_emit_shared_store(e, *planes, p, at);
  }
  vlmc_kernel_emit_line(e, "}");
  vlmc_vk_emit_barrier(e);
}

/* The kernel body for unit u = t * H + h: head h of token t, its rotary slots spread over
 * the workgroup, then its pass-through dims. */
static void emit_unit(const rope_t *R, int u, int freq, int planes, int64_t plane0) {
  vlmc_kernel_emit_t *e = R->e;
  int heads = vlmc_kernel_emit_index(e, R->heads);
  int t = vlmc_kernel_emit_index_op(e, "arith.divui", u, heads);
  int base = vlmc_kernel_emit_index_op(e, "arith.muli", u, vlmc_kernel_emit_index(e, R->head_dim));
  int tid = vlmc_vk_emit_thread_id(e, 0), slots = vlmc_kernel_emit_index(e, R->half);
  int group = vlmc_kernel_emit_index(e, GROUP);
  int j = vlmc_kernel_emit_for(e, tid, slots, group);
  int plane = vlmc_kernel_emit_index(e, plane0);
  if (planes >= 0) {
    plane = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : i32 to index", plane,
                          vlmc_vk_emit_shared_load(e, planes, j));
  }
  int pos = position(R, plane, t);
  int inv_freq = vlmc_vk_emit_shared_load(e, freq, j);
  int angle = fop(e, "arith.mulf", pos, inv_freq);
  int c, s;
  emit_cos_sin(e, angle, &c, &s);
  rotate_slot(R, base, j, c, s);
  vlmc_kernel_emit_line(e, "}");
  pass_through(R, base);
}

/* The kernel: one (token, head) unit per workgroup (lanes false: the GPU's shape), or
 * LANES_UNITS units per workgroup walked in turn after the one barrier (lanes true). */
static vlmc_status_t emit_rope(vlmc_kernel_emit_t *e, bool lanes) {
  const vlmc_op_t *op = e->anchor;
  rope_t R = {e, op->operands[0], op->operands[1], 0, 0, 0, 0, -1};
  if (!rope_dims(e, op, &R)) return NULL;
  if (!vlmc_dim_is_static(op->operands[0]->type.dims[1])) {
    vlmc_kernel_emit_fail(e, "rope: the vulkan kernel needs x [T, H, Dh] with a static head count");
    return NULL;
  }
  const char *layout = vlmc_op_attr_enum(op, "layout");
  if (strcmp(layout, "vision_2d") == 0 && R.half % 2 != 0) {
    vlmc_kernel_emit_fail(e, "rope: vision_2d needs rotary_dim a multiple of 4, got %lld",
                          (long long)R.rotary);
    return NULL;
  }
  int64_t *plane = malloc((size_t)R.half * sizeof *plane);
  float *inv_freq = malloc((size_t)R.half * sizeof *inv_freq);
  bool ok = false;
  if (!plane || !inv_freq) {
    vlmc_kernel_emit_fail(e, "rope: out of memory");
  } else {
    vlmc_status_t st = vlmc_rope_plane_table(op, layout, R.half, plane);
    ok = !st;
    if (st) vlmc_kernel_emit_fail(e, "rope: %s", vlmc_status_message(st));
    vlmc_status_free(st);
  }
  if (ok) {
    vlmc_rope_frequency_table(layout, vlmc_op_attr_float(op, "theta"), R.rotary, inv_freq);
    const vlmc_type_t *xt = &R.x->type;
    e->template_name = "rope_heads";
    R.heads = xt->dims[1].off;
    e->cost = R.half * 40 + R.head_dim * 4; /* a unit: one head of one token */
    R.tokens = vlmc_kernel_emit_dim(e, xt->dims[0]);
    vlmc_vk_emit_set_workgroup(e, GROUP, 1, 1, lanes ? LANES_UNITS : 1);
    int freq, planes;
    emit_tables(&R, inv_freq, plane, &freq, &planes);
    if (lanes) {
      int first, end;
      vlmc_vk_emit_group_units(e, &first, &end);
      int u = vlmc_kernel_emit_for(e, first, end, vlmc_kernel_emit_index(e, 1));
      emit_unit(&R, u, freq, planes, plane[0]);
    } else {
      emit_unit(&R, vlmc_vk_emit_open_group_unit(e), freq, planes, plane[0]);
    }
    vlmc_kernel_emit_line(e, "}");
  }
  free(plane);
  free(inv_freq);
  return NULL;
}

vlmc_status_t vlmc_vk_kernel_rope(vlmc_kernel_emit_t *e) { return emit_rope(e, false); }

/* For CPU devices (lavapipe): llvmpipe runs a workgroup's 64 invocations as 8 SIMD batches on
 * one thread and a barrier is a coroutine switch of every batch, so the tables' barrier is
 * paid once per LANES_UNITS units rather than once per unit. */
vlmc_status_t vlmc_vk_kernel_rope_lanes(vlmc_kernel_emit_t *e) { return emit_rope(e, true); }
