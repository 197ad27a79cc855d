/* fuse: dispatch-region formation. Groups every compute op of each function into a region
 * (op->dispatch, see ir/dispatch.h) that one generated kernel runs:
 *
 *   prologue  `reshape` and widening `cast ... {dtype=f32}` chains that start at a param,
 *             constant or argument and have one use: the kernel reads the source in its own
 *             storage and converts as it loads (no f32 copy of a bf16 weight is ever made);
 *             and a widening cast of any other value (a bf16 or f16 activation, stored in f32
 *             holding exactly representable values) with one use, so that the consumer's
 *             kernel sees the narrow type (a linear on a bf16 input may use a bf16 dot
 *             product, passes/precision.h) and the cast costs no kernel of its own;
 *             and a `dequantize` of parameters with one use (its consumer's kernel reads
 *             the packed words, scales and biases and dequantizes as it loads);
 *   anchor    the op that gives the kernel its shape: linear, rms_norm, attention, rope,
 *             gather, ..., or the first op of an elementwise chain;
 *   epilogue  elementwise ops and reshapes that consume the region's output when that output
 *             has no other use and keeps its shape (bias, residual add, silu * up, casts):
 *             applied to each output element before it is stored, so the intermediate is
 *             never written to memory. The other operands of an epilogue op must have the
 *             running value's shape, or be a trailing-dims suffix of it (a bias row, a
 *             scalar), so that the kernel reads them at the output's flat index.
 *
 * Not fused yet (docs/design.md): a norm into the linear that follows (its output feeds q, k
 * and v, three uses), rope into the q/k projections, multi-output regions. Norms and ropes
 * together are under 0.3% of a 3B decode's kernel time (VLMC_CPU_PROFILE=1).
 *
 * Requires: verified IR; runs last (later passes may not keep regions well-formed).
 * Invalidates: nothing; it only sets op->dispatch. Statistics: regions, ops in regions,
 * prologue and epilogue ops (the fused ones). */
#include <stdlib.h>
#include <string.h>

#include "ir/dispatch.h"
#include "passes/pass.h"

enum { STAT_REGIONS, STAT_OPS, STAT_PROLOGUE, STAT_EPILOGUE };

static const char *const fuse_statistics[] = {"regions", "ops-in-regions", "prologue-ops",
                                              "epilogue-ops"};

typedef struct {
  uint32_t *uses;        /* by value id: operand slots that read it (taps and return too) */
  bool *pending;         /* by value id: result of a prologue op waiting for its consumer */
  const vlmc_op_t **root; /* by region: its last member so far */
  uint32_t next_region;
  vlmc_pass_context_t *ctx;
} fuse_t;

static bool is_widening_cast(const vlmc_op_t *op) {
  if (op->kind != VLMC_OP_CAST) return false;
  const vlmc_dtype_info_t *from = vlmc_dtype_info(op->operands[0]->type.dtype);
  return from->is_float && !from->is_quantized && op->results[0].type.dtype == VLMC_DTYPE_F32;
}

/* A value a kernel can read directly: defined outside any kernel, by the host. */
static bool is_source(const vlmc_value_t *v, const fuse_t *f) {
  if (!v->def) return true; /* a function argument */
  if (f->pending[v->id]) return true;
  return v->def->kind == VLMC_OP_PARAM || v->def->kind == VLMC_OP_CONSTANT;
}

/* A dequantize of parameters with one use: its consumer's kernel reads the packed words,
 * scales and biases and dequantizes as it loads (no f32 copy of the weight). */
static bool is_dequantize_candidate(const vlmc_op_t *op, const fuse_t *f) {
  if (op->kind != VLMC_OP_DEQUANTIZE || f->uses[op->results[0].id] != 1) return false;
  for (uint32_t i = 0; i < op->num_operands; ++i)
    if (!is_source(op->operands[i], f)) return false;
  return true;
}

static bool is_prologue_candidate(const vlmc_op_t *op, const fuse_t *f) {
  if (is_dequantize_candidate(op, f)) return true;
  if (op->kind != VLMC_OP_RESHAPE && !is_widening_cast(op)) return false;
  return f->uses[op->results[0].id] == 1 &&
         (is_widening_cast(op) || is_source(op->operands[0], f));
}

static bool same_shape(const vlmc_type_t *a, const vlmc_type_t *b) {
  if (a->rank != b->rank) return false;
  for (uint32_t d = 0; d < a->rank; ++d)
    if (!vlmc_dim_equal(a->dims[d], b->dims[d])) return false;
  return true;
}

/* Whether `other` can be read at the running value's flat index (modulo its element count):
 * the same shape, or, after its leading 1s, a suffix of the running shape. */
static bool reads_flat(const vlmc_type_t *other, const vlmc_type_t *running) {
  if (same_shape(other, running)) return true;
  uint32_t lead = 0;
  while (lead < other->rank && vlmc_dim_is_static(other->dims[lead]) &&
         other->dims[lead].off == 1)
    ++lead;
  uint32_t n = other->rank - lead;
  if (n > running->rank) return false;
  for (uint32_t d = 0; d < n; ++d)
    if (!vlmc_dim_equal(other->dims[lead + d], running->dims[running->rank - n + d]))
      return false;
  return true;
}

/* The operand index through which `op` can join its producer's region as an epilogue, or -1. */
static int epilogue_operand(const vlmc_op_t *op, const fuse_t *f) {
  bool elementwise = vlmc_op_info(op->kind)->flags & VLMC_OP_FLAG_ELEMENTWISE;
  if (!elementwise && op->kind != VLMC_OP_RESHAPE) return -1;
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    const vlmc_value_t *v = op->operands[i];
    if (!v->def || !v->def->dispatch || f->uses[v->id] != 1) continue;
    if (f->root[v->def->dispatch] != v->def) continue; /* not the region's output */
    if (op->kind == VLMC_OP_RESHAPE) return (int)i;
    if (!same_shape(&op->results[0].type, &v->type)) continue;
    bool others_ok = true;
    for (uint32_t j = 0; j < op->num_operands && others_ok; ++j)
      if (j != i && op->operands[j] != v) others_ok = reads_flat(&op->operands[j]->type, &v->type);
    if (others_ok) return (int)i;
  }
  return -1;
}

/* Puts the pending prologue chains that op reads into op's region. */
static void absorb_prologue(fuse_t *f, vlmc_op_t *op, uint32_t region) {
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    vlmc_value_t *v = op->operands[i];
    if (!v->def || !f->pending[v->id]) continue;
    vlmc_op_t *def = v->def;
    f->pending[v->id] = false;
    def->dispatch = region;
    vlmc_pass_stat_add(f->ctx, STAT_PROLOGUE, 1);
    vlmc_pass_stat_add(f->ctx, STAT_OPS, 1);
    absorb_prologue(f, def, region);
  }
}

static void fuse_op(fuse_t *f, vlmc_op_t *op) {
  if (!vlmc_dispatch_may_contain(op->kind)) return;
  if (is_prologue_candidate(op, f)) {
    f->pending[op->results[0].id] = true;
    return;
  }
  int via = epilogue_operand(op, f);
  uint32_t region = via >= 0 ? op->operands[via]->def->dispatch : ++f->next_region;
  op->dispatch = region;
  f->root[region] = op;
  vlmc_pass_stat_add(f->ctx, STAT_OPS, 1);
  if (via >= 0) vlmc_pass_stat_add(f->ctx, STAT_EPILOGUE, 1);
  else vlmc_pass_stat_add(f->ctx, STAT_REGIONS, 1);
  absorb_prologue(f, op, region);
}

/* Prologue chains whose consumer is not a kernel (a tap, return, or a host op) become kernels
 * of their own, one per chain. */
static void close_pending(fuse_t *f, vlmc_func_t *func) {
  for (vlmc_op_t *op = func->body.first; op; op = op->next) {
    if (!op->num_results || !f->pending[op->results[0].id]) continue;
    f->pending[op->results[0].id] = false;
    const vlmc_value_t *operand = op->operands[0];
    const vlmc_op_t *from = operand->def;
    /* It may end its operand's region (an epilogue) only where nothing else reads that. */
    bool continues_chain = from && from->dispatch && f->root[from->dispatch] == from &&
                           f->uses[operand->id] == 1;
    op->dispatch = continues_chain ? from->dispatch : ++f->next_region;
    f->root[op->dispatch] = op;
    if (!continues_chain) vlmc_pass_stat_add(f->ctx, STAT_REGIONS, 1);
    vlmc_pass_stat_add(f->ctx, STAT_OPS, 1);
  }
}

static vlmc_status_t fuse_func(vlmc_pass_context_t *ctx, vlmc_func_t *func) {
  size_t n = func->module->next_value_id + 1, num_ops = 1;
  for (vlmc_op_t *op = func->body.first; op; op = op->next) ++num_ops;
  fuse_t f = {calloc(n, sizeof(uint32_t)), calloc(n, sizeof(bool)),
              calloc(num_ops + 1, sizeof(vlmc_op_t *)), 0, ctx};
  if (!f.uses || !f.pending || !f.root) {
    free(f.uses);
    free(f.pending);
    free(f.root);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  for (vlmc_op_t *op = func->body.first; op; op = op->next) {
    op->dispatch = 0;
    for (uint32_t i = 0; i < op->num_operands; ++i) f.uses[op->operands[i]->id]++;
  }
  for (vlmc_op_t *op = func->body.first; op; op = op->next) fuse_op(&f, op);
  close_pending(&f, func);
  free(f.uses);
  free(f.pending);
  free(f.root);
  return NULL;
}

static vlmc_status_t fuse_run(vlmc_pass_context_t *ctx, vlmc_module_t *module) {
  for (uint32_t i = 0; i < module->num_funcs; ++i)
    VLMC_RETURN_IF_ERROR(fuse_func(ctx, module->funcs[i]));
  return NULL;
}

const vlmc_pass_t vlmc_pass_fuse = {
    .name = "fuse",
    .summary = "group compute ops into dispatch regions (one kernel each)",
    .options = NULL,
    .num_options = 0,
    .statistics = fuse_statistics,
    .num_statistics = sizeof fuse_statistics / sizeof fuse_statistics[0],
    .run = fuse_run,
};
