/* The program walker: runs a compiled module's functions on one backend (runtime/backend.h).
 *
 * For a region backend it walks the function body: every dispatch region runs on the backend
 * at its root (ir/dispatch.h), host steps (the window order and the other host index ops,
 * taps) run here, and values stay where they were computed: a region's output stays in the
 * backend's memory until a host step, a tap or the caller reads it, and only those bytes are
 * copied (none at all on a backend whose memory is the host's). Region outputs that the memory
 * plan gave a slot (`... slot 3`) live in buffers the walker keeps between calls and shares
 * between functions (one runs at a time); values computed from parameters alone are computed
 * once and kept. A compute op outside every region is refused ("no kernel"): a backend with
 * kernels never falls back to an interpreter.
 *
 * For the interpreter (VLMC_BACKEND_RUNS_FUNCTIONS) it hands the whole call to the backend.
 *
 * Not thread-safe: one call at a time. */
#ifndef VLMC_RUNTIME_PROGRAM_H
#define VLMC_RUNTIME_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "reference/tensor.h"
#include "runtime/backend.h"
#include "support/status.h"

typedef struct vlmc_program_s vlmc_program_t;

/* The module (verified) and the backend must outlive the program. get_param gives the
 * parameters' stored bytes (see runtime/backend.h). */
vlmc_status_t vlmc_program_create(const vlmc_module_t *module, vlmc_backend_t *backend,
                                  vlmc_backend_param_fn get_param, void *param_ctx,
                                  vlmc_program_t **out);
void vlmc_program_destroy(vlmc_program_t *program);

/* Taps from now on go to fn (NULL: none). */
void vlmc_program_set_tap(vlmc_program_t *program, vlmc_backend_tap_fn fn, void *ctx);

/* Called after each step of a walked call (a dispatch region or a host step): `done` of the
 * call's `total` steps, for a progress display (runtime/session.h). Steps differ in cost (one
 * attention region may take most of an encode), so this counts work handed out, not time. */
typedef void (*vlmc_program_step_fn)(void *ctx, uint32_t done, uint32_t total);
/* Steps of the calls from now on go to fn (NULL: none). The interpreter (RUNS_FUNCTIONS)
 * reports none: it gets whole calls. */
void vlmc_program_set_step_hook(vlmc_program_t *program, vlmc_program_step_fn fn, void *ctx);

/* Progress of vlmc_program_preload_params: `done` of `total` bytes after parameter `name`
 * (done counts what was uploaded: stored sizes, so it may end below total). */
typedef void (*vlmc_program_progress_fn)(void *ctx, const char *name, size_t done, size_t total);
/* Makes every parameter resident in the backend now (a device backend's weights uploaded
 * once at open: VLMC_BACKEND_PRELOADS_PARAMS) instead of on first use; the bytes count in
 * vlmc_program_memory_t.params_uploaded, not in any call's transfers. */
vlmc_status_t vlmc_program_preload_params(vlmc_program_t *program,
                                          vlmc_program_progress_fn progress, void *ctx);

/* Makes a value of host data for an argument: borrowed on a host-memory backend (the data
 * must stay valid while the value is used), else uploaded into an owned buffer. */
vlmc_status_t vlmc_program_import(vlmc_program_t *program, const vlmc_tensor_t *host,
                                  vlmc_rt_value_t *out);
/* The value's data on the host: a view on a host-memory backend, else downloaded into an
 * owned tensor (release it with vlmc_tensor_release either way). */
vlmc_status_t vlmc_program_read(vlmc_program_t *program, const vlmc_rt_value_t *value,
                                vlmc_tensor_t *out);
void vlmc_program_release(vlmc_program_t *program, vlmc_rt_value_t *value);

/* Runs @func. Owned arguments are taken (released, or moved into results: a KV cache grown in
 * place), borrowed ones only read; on success results[0 .. num_results) are owned values. */
vlmc_status_t vlmc_program_run(vlmc_program_t *program, const char *func, vlmc_rt_value_t *args,
                               uint32_t num_args, vlmc_rt_value_t *results,
                               uint32_t num_results);

/* Bytes moved between host and backend, per function: those of its calls (arguments
 * imported before a call and results read after it count for that call). */
typedef struct {
  const char *func;
  uint64_t calls;
  uint64_t bytes_to_device, bytes_to_host;
} vlmc_program_transfers_t;
/* The module's functions in order; count = the module's function count. */
const vlmc_program_transfers_t *vlmc_program_transfers(const vlmc_program_t *program,
                                                       size_t *out_count);

typedef struct {
  uint32_t slots;          /* activation buffers of the memory plan, all functions */
  size_t slot_bytes;       /* their sizes now */
  size_t largest_live_set; /* the most region-output bytes live at once in one call */
  uint64_t params_uploaded; /* parameter bytes uploaded at open (vlmc_program_preload_params) */
} vlmc_program_memory_t;
void vlmc_program_memory(const vlmc_program_t *program, vlmc_program_memory_t *out);

#endif
