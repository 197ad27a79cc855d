/* Runtime backends: one interface, one registry. A backend is what runs a compiled program's
 * dispatch regions (or, for the reference interpreter, whole functions) on some memory of its
 * own: `cpu` runs the artifact's generated kernels on the host, `ref` interprets the program,
 * and a GPU backend would run SPIR-V or MSL in device memory. The session and the program
 * walker (runtime/program.h) talk to a backend only through this table, so adding one is a
 * new folder under runtime/backends/ and one line in runtime/backend_registry.c
 * (runtime/backends/null/README.md: "to add a backend, copy this folder").
 *
 * Models: ggml's ggml_backend_i and IREE's HAL driver vtables (and its hal/drivers/null).
 *
 * Memory. A backend allocates buffers (vlmc_buffer_t, its own struct); the walker holds
 * values as buffers plus a storage dtype and shape (vlmc_rt_value_t) and moves bytes between
 * host and backend only where a host step, a tap or the caller needs them. A backend whose
 * memory is the host's (VLMC_BACKEND_HOST_MEMORY) hands out host pointers instead, so that
 * nothing is ever copied for it.
 *
 * Threading: one call at a time per backend instance. */
#ifndef VLMC_RUNTIME_BACKEND_H
#define VLMC_RUNTIME_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "reference/tensor.h"
#include "support/status.h"
#include "support/strbuf.h"

typedef struct vlmc_buffer_s vlmc_buffer_t;   /* defined by each backend */
typedef struct vlmc_backend_s vlmc_backend_t; /* an open backend: starts with its iface */
typedef struct vlmc_backend_iface_s vlmc_backend_iface_t;

struct vlmc_backend_s {
  const vlmc_backend_iface_t *iface;
};

/* A value held by the runtime: its storage dtype and shape, and where its bytes are. */
typedef struct {
  vlmc_dtype_t dtype;
  uint32_t rank;
  int64_t shape[VLMC_IR_MAX_RANK];
  vlmc_buffer_t *buffer; /* NULL: no value (or no elements) */
  bool owned;            /* freed with the value; false: a slot, a parameter, a kept value */
} vlmc_rt_value_t;

/* Capabilities. */
enum {
  /* Buffers are host memory: buffer_host gives their address and buffer_wrap borrows host
   * memory without copying. Without it the walker copies with upload and download. */
  VLMC_BACKEND_HOST_MEMORY = 1u << 0,
  /* Runs whole functions (run_function) instead of regions (run_region): the interpreter. */
  VLMC_BACKEND_RUNS_FUNCTIONS = 1u << 1,
  /* Reads the weights in place many times per call (kernels streaming weights): the session
   * makes them resident at open. Without it they stay mapped (the interpreter keeps its own
   * converted copies). */
  VLMC_BACKEND_STREAMS_WEIGHTS = 1u << 2,
  /* Never picked by default, only by name (skeletons). */
  VLMC_BACKEND_EXPLICIT_ONLY = 1u << 3,
  /* Memory of its own, to fill before the first call: the session uploads every parameter
   * at open (vlmc_program_preload_params, with progress), not on first use. */
  VLMC_BACKEND_PRELOADS_PARAMS = 1u << 4,
};

/* A parameter's bytes as stored (bf16, f16, f32, ... ; borrowed, valid while the session
 * lives), verified against the manifest. */
typedef vlmc_status_t (*vlmc_backend_param_fn)(void *ctx, const char *name,
                                               const vlmc_type_t *type, vlmc_tensor_t *out_view);
/* A section of the artifact by name; NULL when absent. */
typedef const void *(*vlmc_backend_section_fn)(void *ctx, const char *name, size_t *out_size);
/* A `tap` op's value, on the host (borrowed for the call). */
typedef vlmc_status_t (*vlmc_backend_tap_fn)(void *ctx, const char *name,
                                             const vlmc_tensor_t *value);

typedef struct {
  const char *source;             /* names the artifact in messages */
  const vlmc_module_t *module;    /* verified; outlives the backend */
  vlmc_backend_section_fn section;
  void *section_ctx;
  vlmc_backend_param_fn get_param;
  void *param_ctx;
  uint32_t threads;               /* 0 or 1: the calling thread only */
  uint32_t device;                /* a device backend's device index (--device N); 0: first */
  /* Which kernel variants run (artifact/kernel_table.h, "Variants"): NULL or "auto" for the
   * device's own class, "main" for the main kernels only, or a device class ("cpu", "gpu")
   * to run that class's variants wherever they fit (kernel-test runs each). */
  const char *kernel_variants;
} vlmc_backend_open_params_t;

/* One dispatch region to run (ir/dispatch.h): its inputs in the region's order, with
 * may_take[i] when this is the input's last use and the buffer is the walker's to give (the
 * backend may then move it into the output, setting the input's buffer to NULL: a KV cache
 * grown in place). `out` comes with dtype and shape set and either a buffer to write (a
 * memory-plan slot, big enough) or none: the backend then allocates it (owned). */
typedef struct {
  const vlmc_func_t *func;
  uint32_t region; /* the dispatch number */
  vlmc_rt_value_t *const *inputs;
  const bool *may_take;
  uint32_t num_inputs;
  const int64_t *symbols; /* by symbol index (sym - 1), all those the region uses bound */
  vlmc_rt_value_t *out;
} vlmc_region_call_t;

/* A whole-function call (VLMC_BACKEND_RUNS_FUNCTIONS): owned arguments are taken (their
 * buffers set to NULL), results come back owned. */
typedef struct {
  const char *func;
  vlmc_rt_value_t *args;
  uint32_t num_args;
  vlmc_rt_value_t *results;
  uint32_t num_results;
  vlmc_backend_tap_fn on_tap; /* NULL: taps are no-ops */
  void *tap_ctx;
} vlmc_function_call_t;

/* What a backend counted since it opened, for --stats. */
typedef struct {
  uint64_t kernel_calls;
  double kernel_seconds; /* host time in kernels (a device backend: waiting for them) */
  double device_seconds; /* device time of the submitted work (timestamps); 0: not measured */
  uint64_t submits;      /* batches of work submitted to a device; 0 for host backends */
  double record_seconds; /* host time recording dispatches (a device backend); 0: not measured */
  size_t num_kernels, num_dispatches; /* 0 for backends without kernels */
  size_t num_variants_used; /* kernels that run as a variant for the device's class */
} vlmc_backend_counters_t;

struct vlmc_backend_iface_s {
  const char *name;
  const char *summary; /* one line for `--backend help` */
  uint32_t caps;
  /* The IR dtypes it computes in (terminated by VLMC_DTYPE_COUNT). */
  const vlmc_dtype_t *compute_dtypes;
  /* Sections the artifact must carry for this backend (NULL-terminated). */
  const char *const *sections;

  /* Checks what it would load (tables, code) against the module without running anything
   * from the artifact: `vlmc inspect --verify` calls this. May be NULL (nothing to check). */
  vlmc_status_t (*check)(const vlmc_backend_open_params_t *params);
  vlmc_status_t (*open)(const vlmc_backend_open_params_t *params, vlmc_backend_t **out);
  void (*destroy)(vlmc_backend_t *backend);

  /* Memory. buffer_wrap and buffer_host: VLMC_BACKEND_HOST_MEMORY only (else NULL). */
  vlmc_status_t (*buffer_alloc)(vlmc_backend_t *b, size_t bytes, vlmc_buffer_t **out);
  vlmc_status_t (*buffer_wrap)(vlmc_backend_t *b, void *host, size_t bytes, vlmc_buffer_t **out);
  void (*buffer_free)(vlmc_backend_t *b, vlmc_buffer_t *buffer);
  /* The buffer's host address; the host is about to read or write it, so a backend that
   * queues work (metal) finishes what is queued first. */
  void *(*buffer_host)(vlmc_backend_t *b, vlmc_buffer_t *buffer);
  vlmc_status_t (*upload)(vlmc_backend_t *b, vlmc_buffer_t *dst, const void *src, size_t bytes);
  vlmc_status_t (*download)(vlmc_backend_t *b, vlmc_buffer_t *src, void *dst, size_t bytes);

  /* Compute: run_region for region backends, run_function for VLMC_BACKEND_RUNS_FUNCTIONS.
   * Work may be queued; synchronize waits for it (NULL: calls are synchronous). */
  vlmc_status_t (*run_region)(vlmc_backend_t *b, const vlmc_region_call_t *call);
  vlmc_status_t (*run_function)(vlmc_backend_t *b, const vlmc_function_call_t *call);
  vlmc_status_t (*synchronize)(vlmc_backend_t *b);

  void (*counters)(const vlmc_backend_t *b, vlmc_backend_counters_t *out); /* may be NULL */
  /* Describes the devices it could run on, for `vlmc-run --list-devices` (no artifact
   * needed). May be NULL (a host backend). */
  vlmc_status_t (*list_devices)(vlmc_strbuf_t *out);
};

/* ---- the registry (runtime/backend_registry.c) ---- */

/* The registered backends, in order of preference for the default pick. */
size_t vlmc_backend_count(void);
const vlmc_backend_iface_t *vlmc_backend_at(size_t index);
/* NULL when no backend has that name. */
const vlmc_backend_iface_t *vlmc_backend_find(const char *name);
/* Adds a backend the program itself provides, after the built-in ones (a test tool's: the
 * Metal emulation, tests/metal), before any session opens; false when the name is taken or
 * four are registered already. Not thread-safe: call it at start-up. */
bool vlmc_backend_register(const vlmc_backend_iface_t *iface);
/* The names, comma-separated ("cpu, ref, null"), for messages. */
void vlmc_backend_names(char *out, size_t size);
/* Why a known backend is not in this build ("vlmc was built without vulkan/vulkan.h"), or
 * NULL when `name` is built or unknown. */
const char *vlmc_backend_not_built(const char *name);
/* Whether every section the backend needs is present. */
bool vlmc_backend_has_sections(const vlmc_backend_iface_t *backend,
                               vlmc_backend_section_fn section, void *section_ctx);
/* The first backend, in preference order, that is not explicit-only and whose sections are
 * present; NULL when none. */
const vlmc_backend_iface_t *vlmc_backend_pick_default(vlmc_backend_section_fn section,
                                                      void *section_ctx);

/* ---- helpers for backends and the walker ---- */

/* Bytes of a value's data (its dtype and shape; false on overflow or a bad shape). */
bool vlmc_rt_value_bytes(const vlmc_rt_value_t *value, size_t *out_bytes);
/* Gives a region's output a buffer of its own (buffer_alloc, owned) unless it has one. */
vlmc_status_t vlmc_rt_value_ensure_buffer(vlmc_backend_t *b, vlmc_rt_value_t *value);
/* Frees an owned value's buffer and resets the value; a borrowed one is only reset. */
void vlmc_rt_value_release(vlmc_backend_t *b, vlmc_rt_value_t *value);
/* A host view of a host-memory backend's value (no copy). */
vlmc_tensor_t vlmc_rt_value_host_view(vlmc_backend_t *b, const vlmc_rt_value_t *value);

#endif
