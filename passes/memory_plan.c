/* memory-plan: liveness-based buffer reuse for the outputs of dispatch regions. Each output
 * that lives only inside one call (not returned, not a value computed once from parameters)
 * gets a slot (op->slot), and outputs whose live ranges do not overlap share one; the
 * runtime keeps one buffer per slot for the executor's lifetime, sized by the largest value it
 * has held. Activation memory is then the sum of the slots rather than whatever the allocator
 * keeps, and a decode step allocates nothing.
 *
 * Assignment: greedy over outputs in definition order (interval colouring: optimal in the
 * number of slots); a freed slot whose last value had the same type is preferred, so that a
 * layer's buffers line up with the previous layer's and no slot grows to hold a bigger
 * unrelated value. The statistics give the slot count and the values placed.
 *
 * Requires: fuse (regions) just before it. Invalidates: nothing; it only sets op->slot. */
#include <stdlib.h>
#include <string.h>

#include "ir/dispatch.h"
#include "passes/pass.h"

enum { STAT_SLOTS, STAT_VALUES, STAT_SKIPPED };

static const char *const plan_statistics[] = {"slots", "values-in-slots",
                                              "values-outside-slots"};

static bool same_type(const vlmc_type_t *a, const vlmc_type_t *b) {
  if (a->rank != b->rank || a->dtype != b->dtype) return false;
  for (uint32_t d = 0; d < a->rank; ++d)
    if (!vlmc_dim_equal(a->dims[d], b->dims[d])) return false;
  return true;
}

/* Values computed from parameters and constants only (with static shapes): the executor
 * computes them once and keeps them for its lifetime, so they cannot share a buffer. */
static void mark_static(const vlmc_func_t *func, bool *is_static) {
  for (const vlmc_op_t *op = func->body.first; op; op = op->next) {
    bool s = op->num_results > 0 && op->kind != VLMC_OP_TAP;
    for (uint32_t i = 0; s && i < op->num_results; ++i) {
      const vlmc_type_t *t = &op->results[i].type;
      for (uint32_t d = 0; d < t->rank; ++d) s = s && vlmc_dim_is_static(t->dims[d]);
    }
    if (s && op->kind != VLMC_OP_PARAM && op->kind != VLMC_OP_CONSTANT) {
      s = op->num_operands > 0;
      for (uint32_t i = 0; s && i < op->num_operands; ++i) s = is_static[op->operands[i]->id];
    }
    for (uint32_t i = 0; i < op->num_results; ++i) is_static[op->results[i].id] = s;
  }
}

typedef struct {
  uint32_t free_after; /* the slot's current value is last read at this position */
  const vlmc_type_t *type;
} slot_t;

static vlmc_status_t plan_func(vlmc_pass_context_t *ctx, vlmc_func_t *func) {
  vlmc_dispatch_set_t set;
  VLMC_RETURN_IF_ERROR(vlmc_dispatch_regions(func, &set));
  uint32_t n = set.num_regions;
  uint32_t *first = calloc(n + 1, sizeof *first), *last = calloc(n + 1, sizeof *last);
  bool *escapes = calloc(n + 1, sizeof *escapes);
  bool *is_static = calloc(func->module->next_value_id + 1, sizeof *is_static);
  slot_t *slots = calloc(n + 1, sizeof *slots);
  vlmc_status_t st = NULL;
  if (!first || !last || !escapes || !is_static || !slots)
    st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (!st) st = vlmc_dispatch_intervals(func, &set, first, last, escapes);
  uint32_t num_slots = 0;
  if (!st) mark_static(func, is_static);
  for (uint32_t r = 0; !st && r < n; ++r) {
    vlmc_op_t *root = (vlmc_op_t *)set.regions[r].ops[set.regions[r].num_ops - 1];
    root->slot = 0;
    if (escapes[r] || is_static[root->results[0].id]) {
      vlmc_pass_stat_add(ctx, STAT_SKIPPED, 1);
      continue;
    }
    const vlmc_type_t *type = &root->results[0].type;
    uint32_t pick = 0; /* 1-based; 0: none free */
    for (uint32_t s = 0; s < num_slots; ++s) {
      if (slots[s].free_after >= first[r]) continue;
      if (!pick || (same_type(slots[s].type, type) && !same_type(slots[pick - 1].type, type)))
        pick = s + 1;
    }
    if (!pick) {
      pick = ++num_slots;
      vlmc_pass_stat_add(ctx, STAT_SLOTS, 1);
    }
    slots[pick - 1].free_after = last[r];
    slots[pick - 1].type = type;
    root->slot = pick;
    vlmc_pass_stat_add(ctx, STAT_VALUES, 1);
  }
  free(first);
  free(last);
  free(escapes);
  free(is_static);
  free(slots);
  vlmc_dispatch_set_free(&set);
  return st;
}

static vlmc_status_t plan_run(vlmc_pass_context_t *ctx, vlmc_module_t *module) {
  for (uint32_t i = 0; i < module->num_funcs; ++i)
    VLMC_RETURN_IF_ERROR(plan_func(ctx, module->funcs[i]));
  return NULL;
}

const vlmc_pass_t vlmc_pass_memory_plan = {
    .name = "memory-plan",
    .summary = "give dispatch outputs reusable activation buffers by liveness (slots)",
    .options = NULL,
    .num_options = 0,
    .statistics = plan_statistics,
    .num_statistics = sizeof plan_statistics / sizeof plan_statistics[0],
    .run = plan_run,
};
