/* dce: erases pure ops whose results are never used, walking each body backwards so that a
 * whole dead chain goes in one sweep. With prune-params, also drops module parameters that
 * no `param` op reads any more (the artifact then does not carry those weights).
 *
 * Requires: verified IR. Invalidates: nothing beyond the erased ops (no analyses are cached). */
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"

enum { STAT_OPS_ERASED, STAT_PARAMS_REMOVED };

static const char *const dce_statistics[] = {"ops-erased", "params-removed"};

static const vlmc_pass_option_t dce_options[] = {
    {"prune-params", VLMC_PASS_OPTION_BOOL, "false",
     "also remove module parameters that no op reads"},
};

static bool op_is_dead(const vlmc_op_t *op, const uint32_t *uses) {
  if (!(vlmc_op_info(op->kind)->flags & VLMC_OP_FLAG_PURE)) return false;
  for (uint32_t i = 0; i < op->num_results; ++i)
    if (uses[op->results[i].id]) return false;
  return true;
}

static uint64_t dce_func(vlmc_func_t *func, uint32_t *uses) {
  for (vlmc_op_t *op = func->body.first; op; op = op->next)
    for (uint32_t i = 0; i < op->num_operands; ++i) uses[op->operands[i]->id]++;
  uint64_t erased = 0;
  for (vlmc_op_t *op = func->body.last, *prev; op; op = prev) {
    prev = op->prev;
    if (!op_is_dead(op, uses)) continue;
    for (uint32_t i = 0; i < op->num_operands; ++i) uses[op->operands[i]->id]--;
    vlmc_op_erase(op);
    ++erased;
  }
  return erased;
}

static bool param_is_read(const vlmc_module_t *module, const char *name) {
  for (uint32_t f = 0; f < module->num_funcs; ++f)
    for (const vlmc_op_t *op = module->funcs[f]->body.first; op; op = op->next)
      if (op->kind == VLMC_OP_PARAM && strcmp(vlmc_op_attr(op, "name")->v.symbol, name) == 0)
        return true;
  return false;
}

static uint64_t prune_params(vlmc_module_t *module) {
  uint64_t removed = 0;
  for (uint32_t i = module->num_params; i-- > 0;) {
    vlmc_param_t *param = module->params[i];
    if (param_is_read(module, param->name)) continue;
    vlmc_module_param_remove(module, param);
    ++removed;
  }
  return removed;
}

static vlmc_status_t dce_run(vlmc_pass_context_t *ctx, vlmc_module_t *module) {
  uint32_t *uses = calloc(module->next_value_id + 1, sizeof *uses);
  if (!uses) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  uint64_t erased = 0;
  for (uint32_t f = 0; f < module->num_funcs; ++f) erased += dce_func(module->funcs[f], uses);
  free(uses);
  vlmc_pass_stat_add(ctx, STAT_OPS_ERASED, erased);
  if (vlmc_pass_option_bool(ctx, "prune-params"))
    vlmc_pass_stat_add(ctx, STAT_PARAMS_REMOVED, prune_params(module));
  return NULL;
}

const vlmc_pass_t vlmc_pass_dce = {
    .name = "dce",
    .summary = "erase pure ops whose results are unused (and, optionally, unread parameters)",
    .options = dce_options,
    .num_options = sizeof dce_options / sizeof dce_options[0],
    .statistics = dce_statistics,
    .num_statistics = sizeof dce_statistics / sizeof dce_statistics[0],
    .run = dce_run,
};
