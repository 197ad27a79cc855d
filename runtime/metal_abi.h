/* The metal ABI in C (docs/metal.md): the kernel table of an artifact's metal kernels
 * (sections kernels.metal and kernels.metal.json) and the geometry of one dispatch: which
 * kernel, its push-constant words, threadgroup and grid, a split kernel's scratch and
 * combine stage. Everything about running a metal kernel that is not an Apple API call lives
 * here, shared by the macOS backend (runtime/backends/metal, built only on macOS) and the
 * Metal emulation's backend (tests/metal/emu_backend.c), so that what Linux tests is what the
 * Mac runs (hence in runtime/, not in the backend's private folder). The rules are the vulkan ABI's (docs/vulkan.md): the metal kernels are the vulkan
 * target's, translated. */
#ifndef VLMC_RUNTIME_METAL_ABI_H
#define VLMC_RUNTIME_METAL_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "artifact/kernel_table.h"
#include "runtime/backend.h"

enum {
  VLMC_METAL_MAX_GROUPS_X = 65535,               /* the grid is 65535 wide, then rows */
  VLMC_METAL_MAX_WORDS = 1 + VLMC_KERNEL_MAX_SYMS, /* [0] the work units, then the symbols */
};

typedef struct {
  const char *source; /* names the artifact in messages */
  const vlmc_module_t *module;
  const char *msl; /* the kernels.metal section: NUL-terminated translation units */
  size_t msl_len;
  vlmc_kernel_table_t table;
  const vlmc_kernel_table_dispatch_t ***by_id; /* [func][dispatch number] */
  uint32_t *max_id;                            /* [func]: dispatch numbers below it */
} vlmc_metal_table_t;

/* The table as `vlmc inspect --verify` checks it: parses, agrees with the program, every MSL
 * unit inside the section. Runs nothing. */
vlmc_status_t vlmc_metal_table_check(const vlmc_backend_open_params_t *p);
/* The same, kept, with a dispatch index (free with vlmc_metal_table_deinit). */
vlmc_status_t vlmc_metal_table_init(const vlmc_backend_open_params_t *p, vlmc_metal_table_t *out);
void vlmc_metal_table_deinit(vlmc_metal_table_t *t);

/* One of a kernel's translation units: its entry point and MSL (len bytes, NUL after). */
typedef struct {
  const char *entry;
  const char *msl;
  size_t len;
} vlmc_metal_unit_t;

/* Unit 0 is the kernel, unit 1 a split kernel's combine; false when it has no such unit. */
bool vlmc_metal_kernel_unit(const vlmc_metal_table_t *t, uint32_t kernel, int which,
                            vlmc_metal_unit_t *out);

/* One dispatch, planned. The kernel binds [[buffer(i)]] = input i, then the output, then
 * (split) the scratch, then the words as constant memory; the combine binds the same. */
typedef struct {
  uint32_t kernel;   /* index in the table */
  int64_t work;      /* work units; 0: nothing to run */
  int32_t words[VLMC_METAL_MAX_WORDS];
  uint32_t num_words;
  uint32_t threads[3], groups[3];
  uint32_t threadgroup_bytes; /* the kernel's own (declared inside it) */
  bool split;
  size_t scratch_floats; /* split: the scratch the dispatch needs */
  uint32_t combine_threads[3], combine_groups[3];
  uint32_t words_index; /* the [[buffer(n)]] of the words */
} vlmc_metal_dispatch_t;

/* The dispatch of call c: its kernel, the symbols' values, the grid. Refuses a region without
 * a kernel and work past a 32-bit push constant, by name. */
vlmc_status_t vlmc_metal_plan(const vlmc_metal_table_t *t, const vlmc_region_call_t *c,
                              vlmc_metal_dispatch_t *out);

#endif
