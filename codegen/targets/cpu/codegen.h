/* The cpu target: every dispatch region of a fused module becomes a native kernel. Regions
 * whose kernels have the same MLIR text (the same layer shape, 36 times over) share one.
 *
 * Result: one shared object (section "kernels.cpu" of the artifact) and its table (section
 * "kernels.cpu.json", docs/artifact.md): the kernels, with their input storage dtypes and the
 * symbols they read, and for every (function, dispatch) the kernel and its work count. */
#ifndef VLMC_CODEGEN_CPU_CODEGEN_H
#define VLMC_CODEGEN_CPU_CODEGEN_H

#include <stddef.h>

#include "ir/ir.h"
#include "support/status.h"

typedef struct {
  const char *cpu;       /* "portable" (NULL), "x86-64-v2", "x86-64-v3", "native" */
  const char *dump_dir;  /* --dump-kernels: MLIR before / after lowering, .ll, .s; or NULL */
  void (*progress)(void *user, const char *line);
  void *progress_user;
} vlmc_cpu_codegen_options_t;

typedef struct {
  unsigned char *so;
  size_t so_len;
  char *table_json;
  size_t num_kernels, num_dispatches;
} vlmc_cpu_codegen_result_t;

/* Every compute op of the module must be in a dispatch region (run the fuse pass); an op with
 * no region, or a region no template handles, is an error naming the op. */
vlmc_status_t vlmc_cpu_codegen(const vlmc_module_t *module, const vlmc_cpu_codegen_options_t *o,
                               vlmc_cpu_codegen_result_t *out);
void vlmc_cpu_codegen_result_free(vlmc_cpu_codegen_result_t *result);

#endif
