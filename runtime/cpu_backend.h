/* The `cpu` backend: the generated kernels of an artifact (sections "kernels.cpu", a shared
 * object, and "kernels.cpu.json", its table; docs/artifact.md) loaded without LLVM or MLIR:
 * the shared object is written to an anonymous memory file (memfd) and dlopen'ed from there,
 * so nothing touches the disk. The reference executor walks the program and calls
 * vlmc_cpu_backend_dispatch for every dispatch region (reference/executor.h, on_dispatch);
 * host steps (window order, positions) stay on the host, and any other op is refused.
 *
 * Each dispatch: check the inputs' storage against the kernel's signature, place the output
 * (in its memory-plan slot, a buffer kept between calls, or a fresh allocation), evaluate the work count from the bound symbols, and split it over the thread pool
 * (small work runs on the calling thread). Kernels write every output element: with
 * VLMC_CPU_POISON=1 in the environment outputs are filled with 0xFF first (kernel tests). */
#ifndef VLMC_RUNTIME_CPU_BACKEND_H
#define VLMC_RUNTIME_CPU_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "reference/tensor.h"
#include "support/status.h"

typedef struct vlmc_cpu_backend_s vlmc_cpu_backend_t;

/* `source` names the artifact in messages. The table must cover every dispatch region of
 * `module` (which must outlive the backend) with a kernel whose inputs match
 * (vlmc_kernel_table_check, artifact/kernel_table.h); threads: 0 or 1 for none beyond the
 * caller's. */
vlmc_status_t vlmc_cpu_backend_create(const char *source, const void *shared_object,
                                      size_t so_len, const char *table_json, size_t table_len,
                                      const vlmc_module_t *module, uint32_t threads,
                                      vlmc_cpu_backend_t **out);
void vlmc_cpu_backend_destroy(vlmc_cpu_backend_t *backend);

/* A vlmc_dispatch_fn (reference/executor.h); ctx is the backend. */
vlmc_status_t vlmc_cpu_backend_dispatch(void *ctx, const vlmc_func_t *func, uint32_t region,
                                        vlmc_tensor_t *const *inputs, const bool *may_take,
                                        uint32_t num_inputs, const int64_t *symbols,
                                        vlmc_tensor_t *out);

size_t vlmc_cpu_backend_num_kernels(const vlmc_cpu_backend_t *backend);
size_t vlmc_cpu_backend_num_dispatches(const vlmc_cpu_backend_t *backend);
typedef struct {
  uint32_t slots;          /* activation buffers of the memory plan, all functions */
  size_t slot_bytes;       /* their sizes now */
  size_t largest_live_set; /* the most output bytes live at once in one call (the ideal) */
} vlmc_cpu_memory_t;
void vlmc_cpu_backend_memory(const vlmc_cpu_backend_t *backend, vlmc_cpu_memory_t *out);

/* Kernel calls and their total seconds since creation (for --stats). */
void vlmc_cpu_backend_counters(const vlmc_cpu_backend_t *backend, uint64_t *calls,
                               double *seconds);

#endif
