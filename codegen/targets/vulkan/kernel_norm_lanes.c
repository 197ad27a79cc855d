/* rms_norm and layer_norm for CPU devices (lavapipe): the same template names, work units
 * (rows), inputs, epilogues and f32 arithmetic as kernel_norm.c, shaped for llvmpipe: no
 * workgroup memory, no barriers, no subgroup operations.
 *
 * Why: the GPU kernel gives a row a workgroup of 128 invocations and combines their partials
 * through a subgroup reduction, workgroup memory and a barrier; llvmpipe runs those 128 as 16
 * SIMD batches of 8 on one thread and a barrier is a coroutine switch of every batch, so a
 * vision tower's short rows (a few hundred elements) cost mostly switches (README.md, "Lanes
 * variants"). Here a workgroup of LANES invocations takes LANES rows, one each: the row's
 * statistic is a sequential f32 sum in the invocation (a pass per statistic), then one pass
 * writes every element through the epilogue. x straight from an f32 / f16 binding with a row
 * length that is a multiple of 4 is read four elements a load (quads, emit.h).
 *
 * Only static rows of 1 .. MAX_LEN elements, and not a static handful of rows (a decode step's
 * single row runs faster on the main kernel's 128 invocations) (vlmc_vk_norm_lanes_applies;
 * others keep the main kernel): llvmpipe ends every loop of a batch after 65535 iterations in all, and a row of
 * MAX_LEN elements takes at most 3 * MAX_LEN of them (layer_norm's three passes). */
#include "codegen/targets/vulkan/kernels.h"

enum {
  LANES = 32,      /* rows per workgroup: 4 llvmpipe SIMD batches of 8 */
  MAX_LEN = 16384, /* 3 * MAX_LEN < 65535 loop iterations per batch */
  MIN_ROWS = 8,    /* a static row count below this keeps the main kernel */
};

typedef struct {
  vlmc_kernel_emit_t *e;
  const vlmc_value_t *x;
  int64_t len;
  int quads;  /* x's input read as quads; -1: element loads */
  int base;   /* flat index of the row's first element */
} lanes_row_t;

static int idx(vlmc_kernel_emit_t *e, int64_t c) { return vlmc_kernel_emit_index(e, c); }
static int add(vlmc_kernel_emit_t *e, int a, int b) { return vlmc_kernel_emit_index_op(e, "arith.addi", a, b); }
static int fop(vlmc_kernel_emit_t *e, const char *op, int a, int b) { return vlmc_kernel_emit_float_op(e, op, a, b, 0); }

bool vlmc_vk_norm_lanes_applies(const vlmc_op_t *op) {
  const vlmc_type_t *xt = &op->operands[0]->type;
  if (xt->rank < 1) return false;
  vlmc_dim_t len = xt->dims[xt->rank - 1];
  if (!vlmc_dim_is_static(len) || len.off < 1 || len.off > MAX_LEN) return false;
  /* A static handful of rows (a decode step's one) would leave all but a few lanes idle and
   * each row sequential: the main kernel's 128 invocations per row are faster there. */
  int64_t rows = 1;
  for (uint32_t d = 0; d + 1 < xt->rank; ++d) {
    if (!vlmc_dim_is_static(xt->dims[d])) return true;
    rows *= xt->dims[d].off;
  }
  return rows >= MIN_ROWS;
}

/* Elements per step of a pass: a quad, or one element. */
static int step_of(const lanes_row_t *R) { return R->quads >= 0 ? 4 : 1; }

/* The step's elements at column k (an index SSA) into xs[]; returns how many. */
static int load_step(const lanes_row_t *R, int k, int *xs) {
  vlmc_kernel_emit_t *e = R->e;
  int at = add(e, R->base, k);
  if (R->quads < 0) {
    xs[0] = vlmc_kernel_emit_load(e, R->x, at);
    return 1;
  }
  vlmc_vk_emit_load_quad(e, R->quads, vlmc_kernel_emit_index_op(e, "arith.divui", at, idx(e, 4)), xs);
  return 4;
}

/* sum over the row of (x - center)^2, or of x * x (center < 0 and squares), or of x. */
static int row_sum(const lanes_row_t *R, bool squares, int center) {
  vlmc_kernel_emit_t *e = R->e;
  int init = vlmc_kernel_emit_f32(e, 0), k, acc;
  int from = idx(e, 0), to = idx(e, R->len), step = idx(e, step_of(R));
  int results = vlmc_vk_emit_open_f32_loop(e, from, to, step, 1, &init, &k, &acc);
  int xs[4], n = load_step(R, k, xs);
  for (int i = 0; i < n; ++i) {
    int term = xs[i];
    if (center >= 0) term = fop(e, "arith.subf", term, center);
    if (squares) term = fop(e, "arith.mulf", term, term);
    acc = fop(e, "arith.addf", acc, term);
  }
  int sum;
  vlmc_vk_emit_close_f32_loop(e, results, 1, &acc, &sum); /* len >= 1: never zero-trip */
  return sum;
}

/* 1 / sqrt(sum / len + eps), in f32, as kernel_norm.c computes it. */
static int inverse_std(vlmc_kernel_emit_t *e, int sum, int64_t len, int eps) {
  int mean = fop(e, "arith.divf", sum, vlmc_kernel_emit_f32(e, (double)len));
  int root = vlmc_kernel_emit_float_unary(e, "math.sqrt", fop(e, "arith.addf", mean, eps), 0);
  return fop(e, "arith.divf", vlmc_kernel_emit_f32(e, 1.0), root);
}

/* The output pass: each element's normalised value (rounded as the reference: n first, then
 * n * w, then + b) through the epilogue. center < 0: rms_norm (n = x * inv). */
static void write_row(const lanes_row_t *R, int center, int inv, const vlmc_value_t *w, const vlmc_value_t *b) {
  vlmc_kernel_emit_t *e = R->e;
  int from = idx(e, 0), to = idx(e, R->len), step = idx(e, step_of(R));
  int k = vlmc_kernel_emit_for(e, from, to, step);
  int xs[4], n = load_step(R, k, xs);
  for (int i = 0; i < n; ++i) {
    int col = i ? add(e, k, idx(e, i)) : k;
    int x = center >= 0 ? fop(e, "arith.subf", xs[i], center) : xs[i];
    int norm = fop(e, "arith.mulf", x, inv);
    int weight = vlmc_kernel_emit_load(e, w, col);
    int y = center >= 0 ? fop(e, "arith.mulf", norm, weight) : fop(e, "arith.mulf", weight, norm);
    if (b) y = fop(e, "arith.addf", y, vlmc_kernel_emit_load(e, b, col));
    vlmc_kernel_emit_finish_element(e, y, add(e, R->base, col));
  }
  vlmc_kernel_emit_line(e, "}");
}

/* The workgroup's shape and this invocation's row (under `scf.if row < end {`, which the
 * caller closes): R->base set. */
static void open_row(vlmc_kernel_emit_t *e, lanes_row_t *R, const vlmc_op_t *op) {
  const vlmc_type_t *xt = &op->operands[0]->type;
  R->e = e;
  R->x = op->operands[0];
  R->len = xt->dims[xt->rank - 1].off;
  R->quads = -1;
  int input = vlmc_kernel_emit_source_input(e, R->x);
  bool shared = false; /* the weight or bias from the same binding: keep element loads */
  for (uint32_t i = 1; i < op->num_operands; ++i)
    shared = shared || vlmc_kernel_emit_source_input(e, op->operands[i]) == input;
  if (R->len % 4 == 0 && !shared && vlmc_vk_emit_can_declare_quads(e, input)) {
    R->quads = input;
    vlmc_vk_emit_declare_quads(e, input);
  }
  vlmc_vk_emit_set_workgroup(e, LANES, 1, 1, LANES);
  int first, end;
  vlmc_vk_emit_group_units(e, &first, &end);
  int row = add(e, first, vlmc_vk_emit_thread_id(e, 0));
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", vlmc_vk_emit_cmp(e, "slt", row, end));
  R->base = vlmc_kernel_emit_index_op(e, "arith.muli", row, idx(e, R->len));
}

static bool check_applies(vlmc_kernel_emit_t *e) {
  if (vlmc_vk_norm_lanes_applies(e->anchor)) return true;
  vlmc_kernel_emit_fail(e, "%s: the lanes variant takes static rows of 1 to %d elements, at least %d of them "
                        "when their count is static",
                        e->anchor->kind == VLMC_OP_RMS_NORM ? "rms_norm" : "layer_norm", MAX_LEN, MIN_ROWS);
  return false;
}

/* rms_norm (layer false): w * (x * inv) with inv from the sum of squares; layer_norm: the mean
 * first, inv from the squared deviations from it, then (x - mean) * inv * w (+ b). */
static vlmc_status_t emit_norm(vlmc_kernel_emit_t *e, bool layer) {
  const vlmc_op_t *op = e->anchor;
  e->template_name = layer ? "layer_norm" : "rms_norm";
  if (!check_applies(e)) return NULL;
  lanes_row_t R;
  open_row(e, &R, op);
  e->cost = (layer ? 7 : 4) * R.len;
  int eps = vlmc_kernel_emit_f32(e, vlmc_op_attr_float(op, "eps"));
  int mean = -1; /* rms_norm: no centre */
  if (layer) {
    int sum = row_sum(&R, false, -1);
    mean = fop(e, "arith.divf", sum, vlmc_kernel_emit_f32(e, (double)R.len));
  }
  int inv = inverse_std(e, row_sum(&R, true, mean), R.len, eps);
  const vlmc_value_t *bias = layer && op->num_operands > 2 ? op->operands[2] : NULL;
  write_row(&R, mean, inv, op->operands[1], bias);
  vlmc_kernel_emit_line(e, "}");
  return NULL;
}

vlmc_status_t vlmc_vk_kernel_rms_norm_lanes(vlmc_kernel_emit_t *e) { return emit_norm(e, false); }

vlmc_status_t vlmc_vk_kernel_layer_norm_lanes(vlmc_kernel_emit_t *e) { return emit_norm(e, true); }
