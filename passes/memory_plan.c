/* memory-plan: liveness-based buffer reuse for the outputs of dispatch regions. Each output
 * that lives only inside one call (not returned, not a value computed once from parameters)
 * gets a slot (op->slot), and outputs whose live ranges do not overlap share one; the
 * runtime keeps one buffer per slot for the executor's lifetime, sized by the largest value it
 * has held. Activation memory is then the sum of the slots rather than whatever the allocator
 * keeps, and a decode step allocates nothing.
 *
 * Assignment: greedy over outputs in definition order (interval colouring: optimal in the
 * number of slots). Among the free slots it picks by size, estimated with every symbol at
 * 1024 (shapes are symbolic here): the smallest slot already big enough, else the biggest
 * (which then grows least), so that a big value does not land in a slot sized for a small one
 * and make two big slots. Slots are then numbered biggest first, so that slot 1 of
 * @encode_image and slot 1 of @prefill, which the runtime backs with the same buffer, are both
 * their function's biggest. The statistics give the slot count and the values placed.
 *
 * Requires: fuse (regions) just before it. Invalidates: nothing; it only sets op->slot. */
#include <stdlib.h>
#include <string.h>

#include "ir/dispatch.h"
#include "passes/pass.h"

enum { STAT_SLOTS, STAT_VALUES, STAT_SKIPPED };

static const char *const plan_statistics[] = {"slots", "values-in-slots",
                                              "values-outside-slots"};

/* Bytes of a value with every symbol at 1024: a size to compare slots by. */
static double estimated_bytes(const vlmc_type_t *t) {
  double n = 1;
  for (uint32_t d = 0; d < t->rank; ++d) {
    vlmc_dim_t dim = t->dims[d];
    n *= vlmc_dim_is_static(dim) ? (double)dim.off
                                 : 1024.0 * (double)dim.num / (double)dim.den + (double)dim.off;
  }
  const vlmc_dtype_info_t *info = vlmc_dtype_info(t->dtype);
  return n * (info->is_float ? 4 : 8); /* as the runtime stores it: f32 or i64 */
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
  double size;         /* estimated bytes of the biggest value it holds */
  uint32_t number;     /* final number, biggest slot first */
} slot_t;

/* Biggest first; equal sizes keep their order (qsort is not stable: compare positions). */
static int by_size(const void *a, const void *b) {
  const slot_t *x = *(const slot_t *const *)a, *y = *(const slot_t *const *)b;
  if (x->size != y->size) return x->size < y->size ? 1 : -1;
  return x < y ? -1 : x > y;
}

/* The free slot for a value of `size` bytes at position `first` (1-based), or 0. */
static uint32_t pick_slot(const slot_t *slots, uint32_t num_slots, uint32_t first, double size) {
  uint32_t fit = 0, biggest = 0;
  for (uint32_t s = 0; s < num_slots; ++s) {
    if (slots[s].free_after >= first) continue;
    if (slots[s].size >= size && (!fit || slots[s].size < slots[fit - 1].size)) fit = s + 1;
    if (!biggest || slots[s].size > slots[biggest - 1].size) biggest = s + 1;
  }
  return fit ? fit : biggest;
}

/* Slot numbers biggest first. */
static vlmc_status_t renumber_by_size(const vlmc_dispatch_set_t *set, slot_t *slots,
                                      uint32_t num_slots) {
  slot_t **order = calloc(num_slots + 1, sizeof *order);
  if (!order) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t s = 0; s < num_slots; ++s) order[s] = &slots[s];
  qsort(order, num_slots, sizeof *order, by_size);
  for (uint32_t k = 0; k < num_slots; ++k) order[k]->number = k + 1;
  free(order);
  for (uint32_t r = 0; r < set->num_regions; ++r) {
    vlmc_op_t *root = (vlmc_op_t *)set->regions[r].ops[set->regions[r].num_ops - 1];
    if (root->slot) root->slot = slots[root->slot - 1].number;
  }
  return NULL;
}

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
    double size = estimated_bytes(&root->results[0].type);
    uint32_t pick = pick_slot(slots, num_slots, first[r], size); /* 1-based; 0: none free */
    if (!pick) {
      pick = ++num_slots;
      vlmc_pass_stat_add(ctx, STAT_SLOTS, 1);
    }
    slots[pick - 1].free_after = last[r];
    if (size > slots[pick - 1].size) slots[pick - 1].size = size;
    root->slot = pick;
    vlmc_pass_stat_add(ctx, STAT_VALUES, 1);
  }
  if (!st) st = renumber_by_size(&set, slots, num_slots);
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
