/* The null target: the skeleton to copy for a new target (README.md in this folder). It
 * supports no dispatch region, so compiling any program with kernels through it stops at the
 * first region, by name ("target null: @decode dispatch 3 (linear) is not supported"), and it
 * never writes a section. Every entry is here, filled in the simplest honest way, so that a
 * copy compiles and runs from the start; tests/unit/test_compiler_target_null.c runs it. */
#include <stdlib.h>

#include "codegen/target.h"

/* What the target keeps between create and destroy. A real target holds its compiler state
 * here (a lowering context, the kernels so far, the per-dispatch table being written, the
 * bytes of its sections once finished). */
typedef struct {
  const vlmc_target_config_t *config;
  const vlmc_module_t *module;
  size_t num_regions; /* regions emitted so far */
} null_state_t;

/* A real target answers from the region's anchor kind and shapes (and refuses what its
 * templates cannot write); the driver turns false into the error naming the region. */
static bool null_supports(const vlmc_dispatch_region_t *region, const vlmc_op_t *anchor) {
  (void)region;
  (void)anchor;
  return false;
}

/* Reads its options (vlmc_target_config_option), sets up its compiler, says what it builds
 * for through config->progress. */
static vlmc_status_t null_create(const vlmc_target_config_t *config, const vlmc_module_t *module,
                                 void **out_state) {
  null_state_t *s = calloc(1, sizeof *s);
  if (!s) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  s->config = config;
  s->module = module;
  *out_state = s;
  return NULL;
}

/* Called only for regions null_supports accepted, that is never. A real target writes the
 * region's kernel (codegen/kernel_emit.h for MLIR text), shares it with an earlier region
 * whose text is identical, and records the dispatch (function, region id, kernel, work). */
static vlmc_status_t null_emit_region(void *state, const vlmc_func_t *func,
                                      const vlmc_dispatch_region_t *region) {
  null_state_t *s = state;
  s->num_regions++;
  return vlmc_status_make(VLMC_UNSUPPORTED, "target null: @%s dispatch %u: writes no kernels",
                          func->name, region->id);
}

/* A real target lowers and links its kernels and hands back its sections, e.g.
 * "kernels.<name>" (the code) and "kernels.<name>.json" (the table), bytes owned by the
 * state. The null target owns none. */
static vlmc_status_t null_finish(void *state, vlmc_target_sections_t *out) {
  (void)state;
  out->count = 0;
  return NULL;
}

static void null_destroy(void *state) { free(state); }

const vlmc_target_t vlmc_target_null = {
    .name = "null",
    .summary = "a skeleton that supports no region (copy codegen/targets/null to add a target)",
    .options = NULL,
    .num_options = 0,
    .precisions = "f32",
    .precision_note = "the null target is a skeleton and computes nothing",
    .default_precision = "f32",
    .pipeline_tail = "fuse,memory-plan",
    .supports = null_supports,
    .create = null_create,
    .emit_region = null_emit_region,
    .finish = null_finish,
    .destroy = null_destroy,
};
