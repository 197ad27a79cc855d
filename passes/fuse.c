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
 * With norm-prologue (a target's choice, codegen/target.h "fusions"): an rms_norm over one
 * static row (a decode step's) whose result reaches the x of linears only, through reshapes
 * and float casts (an f16 program's rounding), becomes a *norm prologue* of each such linear
 * (ir/dispatch.h): the norm and its chain are cloned for every linear but the first (q, k and
 * v each recompute the 2048-wide norm: a few us of arithmetic against a dispatch of its own,
 * 8.7 us a norm on an H100, 73 of them a 3B decode step), so that each linear's kernel
 * computes the row's statistic and normalizes x as it loads it.
 *
 * Not fused yet (docs/design.md): a norm into a linear of many rows (its kernel is well
 * parallel and its dispatch amortized), rope into the q/k projections, multi-output regions.
 *
 * Requires: verified IR; runs last (later passes may not keep regions well-formed).
 * Invalidates: nothing; it only sets op->dispatch (and, with norm-prologue, adds the norms'
 * copies). Statistics: regions, ops in regions,
 * prologue and epilogue ops (the fused ones). */
#include <stdlib.h>
#include <string.h>

#include "ir/dispatch.h"
#include "passes/pass.h"

enum { STAT_REGIONS, STAT_OPS, STAT_PROLOGUE, STAT_EPILOGUE, STAT_NORM_PROLOGUES, STAT_NORM_CLONES };

static const char *const fuse_statistics[] = {"regions", "ops-in-regions", "prologue-ops",
                                              "epilogue-ops", "norm-prologues", "norms-cloned"};

static const vlmc_pass_option_t fuse_options[] = {
    {"norm-prologue", VLMC_PASS_OPTION_BOOL, "false",
     "fold an rms_norm over one static row into the linears that read it (each recomputes it)"},
};

typedef struct {
  uint32_t *uses;        /* by value id: operand slots that read it (taps and return too) */
  bool *pending;         /* by value id: result of a prologue op waiting for its consumer */
  bool *norm_chain;      /* by value id: a pending norm prologue's result or its chain's */
  bool norm_prologue;    /* the option */
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

/* ---- norm prologues ---- */

/* Every dim but the last a static 1 (a decode step's [1, K]). */
static bool one_static_row(const vlmc_type_t *t) {
  if (t->rank < 1) return false;
  for (uint32_t d = 0; d + 1 < t->rank; ++d)
    if (!vlmc_dim_is_static(t->dims[d]) || t->dims[d].off != 1) return false;
  return vlmc_dim_is_static(t->dims[t->rank - 1]);
}

static bool reads_as_x_only(const vlmc_op_t *user, const vlmc_value_t *v) {
  if (user->kind != VLMC_OP_LINEAR || user->operands[0] != v) return false;
  for (uint32_t i = 1; i < user->num_operands; ++i)
    if (user->operands[i] == v) return false;
  return true;
}

/* The users of v after `from` in body order, up to max (the count of them all). */
static uint32_t users_of(const vlmc_value_t *v, vlmc_op_t *from, vlmc_op_t **out, uint32_t max) {
  uint32_t n = 0;
  for (vlmc_op_t *op = from; op; op = op->next)
    for (uint32_t i = 0; i < op->num_operands; ++i)
      if (op->operands[i] == v) {
        if (n < max) out[n] = op;
        ++n;
        break;
      }
  return n;
}

/* For an rms_norm over one static row: the chain of single-use norm-chain ops from its result
 * (into chain, *len of them) and the value it ends at; NULL when op is no such norm. */
static vlmc_value_t *norm_chain_end(vlmc_op_t *op, const uint32_t *uses, vlmc_op_t **chain,
                                    uint32_t *len) {
  *len = 0;
  if (op->kind != VLMC_OP_RMS_NORM || !one_static_row(&op->results[0].type)) return NULL;
  vlmc_value_t *v = &op->results[0];
  while (uses[v->id] == 1 && *len < VLMC_DISPATCH_MAX_NORM_CHAIN) {
    vlmc_op_t *user = NULL;
    if (users_of(v, op->next, &user, 1) != 1 || !vlmc_dispatch_is_norm_chain_op(user)) break;
    chain[(*len)++] = user;
    v = &user->results[0];
  }
  return v;
}

typedef struct {
  const uint32_t *uses; /* by value id (ids from before the copies) */
  size_t num_ids;
  vlmc_op_t *before;    /* where the copies go: before the linear that will read them */
} cloner_t;

static vlmc_status_t copy_op(const cloner_t *c, const vlmc_op_t *def, vlmc_value_t *const *operands,
                             vlmc_value_t **out) {
  vlmc_op_t *copy;
  VLMC_RETURN_IF_ERROR(vlmc_op_create_raw(c->before->block, c->before, def->kind, def->num_operands,
                                          operands, def->attrs, 1, &def->results[0].type, &copy));
  copy->loc = def->loc;
  *out = &copy->results[0];
  return NULL;
}

/* v, or a copy of its chain of single-use prologue ops (reshapes, widening casts: what a
 * kernel reads an input through) when it has one: each copy of the norm reads its own. */
static vlmc_status_t copy_prologue(const cloner_t *c, vlmc_value_t *v, vlmc_value_t **out) {
  const vlmc_op_t *def = v->def;
  *out = v;
  if (!def || v->id >= c->num_ids || c->uses[v->id] != 1 || !vlmc_dispatch_is_prologue_op(def))
    return NULL;
  vlmc_value_t *operand;
  VLMC_RETURN_IF_ERROR(copy_prologue(c, def->operands[0], &operand));
  return copy_op(c, def, &operand, out);
}

/* A copy of the norm and its chain up to v (v's def is the norm or a chain op). */
static vlmc_status_t copy_norm_chain(const cloner_t *c, vlmc_value_t *v, vlmc_value_t **out) {
  const vlmc_op_t *def = v->def;
  vlmc_value_t *operands[3];
  if (def->kind != VLMC_OP_RMS_NORM) {
    VLMC_RETURN_IF_ERROR(copy_norm_chain(c, def->operands[0], &operands[0]));
    return copy_op(c, def, operands, out);
  }
  if (def->num_operands > 3) return vlmc_status_make(VLMC_INTERNAL, "fuse: rms_norm operands");
  for (uint32_t i = 0; i < def->num_operands; ++i)
    VLMC_RETURN_IF_ERROR(copy_prologue(c, def->operands[i], &operands[i]));
  return copy_op(c, def, operands, out);
}

enum { MAX_NORM_USERS = 16 };

/* Gives every linear but the first that reads a one-row norm's result (through its chain) a
 * copy of the norm and its chain, so that each can take it as its prologue. */
static vlmc_status_t fan_out_norms(vlmc_pass_context_t *ctx, vlmc_func_t *func) {
  size_t num_ids = func->module->next_value_id + 1;
  uint32_t *uses = calloc(num_ids, sizeof *uses);
  if (!uses) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (vlmc_op_t *op = func->body.first; op; op = op->next)
    for (uint32_t i = 0; i < op->num_operands; ++i) uses[op->operands[i]->id]++;
  vlmc_status_t st = NULL;
  for (vlmc_op_t *op = func->body.first; op && !st; op = op->next) {
    if (op->num_results != 1 || op->results[0].id >= num_ids) continue; /* a copy made here */
    vlmc_op_t *chain[VLMC_DISPATCH_MAX_NORM_CHAIN], *users[MAX_NORM_USERS];
    uint32_t len;
    vlmc_value_t *end = norm_chain_end(op, uses, chain, &len);
    if (!end) continue;
    vlmc_op_t *after = len ? chain[len - 1] : op;
    uint32_t n = users_of(end, after->next, users, MAX_NORM_USERS);
    if (n < 2 || n > MAX_NORM_USERS || n != uses[end->id]) continue;
    bool all_linear = true;
    for (uint32_t i = 0; i < n; ++i) all_linear = all_linear && reads_as_x_only(users[i], end);
    if (!all_linear) continue;
    for (uint32_t i = 1; i < n && !st; ++i) {
      vlmc_value_t *copy;
      cloner_t c = {uses, num_ids, users[i]};
      st = copy_norm_chain(&c, end, &copy);
      if (!st) vlmc_op_set_operand(users[i], 0, copy);
      if (!st) vlmc_pass_stat_add(ctx, STAT_NORM_CLONES, 1);
    }
  }
  free(uses);
  return st;
}

/* With norm-prologue: an rms_norm over one static row whose chain ends at a value read once,
 * as a linear's x; or the next op of a pending norm's chain. Either joins that linear's region
 * (marked pending and norm_chain). */
static bool is_norm_prologue_candidate(vlmc_op_t *op, const fuse_t *f) {
  if (!f->norm_prologue) return false;
  if (op->kind != VLMC_OP_RMS_NORM)
    return vlmc_dispatch_is_norm_chain_op(op) && f->norm_chain[op->operands[0]->id] &&
           f->pending[op->operands[0]->id] && f->uses[op->results[0].id] == 1;
  vlmc_op_t *chain[VLMC_DISPATCH_MAX_NORM_CHAIN], *user = NULL;
  uint32_t len;
  vlmc_value_t *end = norm_chain_end(op, f->uses, chain, &len);
  if (!end || f->uses[end->id] != 1) return false;
  return users_of(end, len ? chain[len - 1]->next : op->next, &user, 1) == 1 &&
         reads_as_x_only(user, end);
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
  if (is_norm_prologue_candidate(op, f)) {
    f->pending[op->results[0].id] = f->norm_chain[op->results[0].id] = true;
    if (op->kind == VLMC_OP_RMS_NORM) vlmc_pass_stat_add(f->ctx, STAT_NORM_PROLOGUES, 1);
    return;
  }
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
  if (vlmc_pass_option_bool(ctx, "norm-prologue")) VLMC_RETURN_IF_ERROR(fan_out_norms(ctx, func));
  size_t n = func->module->next_value_id + 1, num_ops = 1;
  for (vlmc_op_t *op = func->body.first; op; op = op->next) ++num_ops;
  fuse_t f = {calloc(n, sizeof(uint32_t)), calloc(n, sizeof(bool)), calloc(n, sizeof(bool)),
              vlmc_pass_option_bool(ctx, "norm-prologue"),
              calloc(num_ops + 1, sizeof(vlmc_op_t *)), 0, ctx};
  if (!f.uses || !f.pending || !f.norm_chain || !f.root) {
    free(f.uses);
    free(f.pending);
    free(f.norm_chain);
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
  free(f.norm_chain);
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
    .options = fuse_options,
    .num_options = sizeof fuse_options / sizeof fuse_options[0],
    .statistics = fuse_statistics,
    .num_statistics = sizeof fuse_statistics / sizeof fuse_statistics[0],
    .run = fuse_run,
};
