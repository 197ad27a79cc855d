/* The emulated metal backend (tests/metal/README.md): runs an artifact's metal kernels
 * (kernels.metal, kernels.metal.json) through the Metal emulation (emu.h) on host memory, with
 * the dispatch rules of the metal ABI (the vulkan one: push constants [work, syms...], a grid
 * of ceil(work / units_per_group) threadgroups as 65535 x rows, a split kernel's scratch and
 * combine stage). A test tool, registered by the programs that test with it
 * (vlmc_backend_register: `vlmc kernel-test --target metal`, vlmc-run-metal-emu); never linked
 * into the runtime. It is labelled as an emulation wherever it is named. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend.h"
#include "runtime/metal_abi.h"
#include "tests/metal/emu.h"

struct vlmc_buffer_s {
  void *data;
  size_t capacity;
  bool owns_data;
};

typedef struct {
  vlmc_metal_kernel_t *main, *combine; /* built on first use */
} built_t;

typedef struct {
  vlmc_backend_t base;
  vlmc_metal_table_t table; /* runtime/backends/metal: the ABI, shared with the macOS backend */
  built_t *built;
  float *scratch;
  size_t scratch_floats;
  uint64_t calls;
} emu_backend_t;

/* ---- opening ---- */

static void emu_destroy(vlmc_backend_t *base) {
  emu_backend_t *b = (emu_backend_t *)base;
  if (!b) return;
  for (size_t i = 0; b->built && i < b->table.table.num_kernels; ++i) {
    vlmc_metal_kernel_destroy(b->built[i].main);
    vlmc_metal_kernel_destroy(b->built[i].combine);
  }
  free(b->built);
  free(b->scratch);
  vlmc_metal_table_deinit(&b->table);
  free(b);
}

static vlmc_status_t emu_open(const vlmc_backend_open_params_t *p, vlmc_backend_t **out) {
  emu_backend_t *b = calloc(1, sizeof *b);
  if (!b) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  b->base.iface = &vlmc_backend_metal_emulated;
  vlmc_status_t st = vlmc_metal_table_init(p, &b->table);
  size_t kernels = st ? 0 : b->table.table.num_kernels;
  if (!st && !(b->built = calloc(kernels ? kernels : 1, sizeof *b->built)))
    st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (st) {
    emu_destroy(&b->base);
    return st;
  }
  *out = &b->base;
  return NULL;
}

/* ---- memory: the host's ---- */

static vlmc_status_t emu_buffer_alloc(vlmc_backend_t *b, size_t bytes, vlmc_buffer_t **out) {
  (void)b;
  vlmc_buffer_t *buf = malloc(sizeof *buf);
  void *data = buf ? calloc(1, bytes ? bytes : 1) : NULL;
  if (!data) {
    free(buf);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory for a %zu-byte value", bytes);
  }
  *buf = (vlmc_buffer_t){data, bytes, true};
  *out = buf;
  return NULL;
}

static vlmc_status_t emu_buffer_wrap(vlmc_backend_t *b, void *host, size_t bytes,
                                     vlmc_buffer_t **out) {
  (void)b;
  vlmc_buffer_t *buf = malloc(sizeof *buf);
  if (!buf) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  *buf = (vlmc_buffer_t){host, bytes, false};
  *out = buf;
  return NULL;
}

static void emu_buffer_free(vlmc_backend_t *b, vlmc_buffer_t *buf) {
  (void)b;
  if (!buf) return;
  if (buf->owns_data) free(buf->data);
  free(buf);
}

static void *emu_buffer_host(vlmc_backend_t *b, vlmc_buffer_t *buf) {
  (void)b;
  return buf->data;
}

/* ---- dispatch ---- */

static vlmc_status_t build_unit(const emu_backend_t *b, uint32_t kernel, int which,
                                vlmc_metal_kernel_t **out) {
  vlmc_metal_unit_t unit;
  if (!vlmc_metal_kernel_unit(&b->table, kernel, which, &unit))
    return vlmc_status_make(VLMC_INTERNAL, "metal kernel %u has no unit %d", kernel, which);
  return vlmc_metal_kernel_build(unit.msl, unit.len, unit.entry, out);
}

static vlmc_status_t built_kernel(emu_backend_t *b, const vlmc_metal_dispatch_t *d,
                                  built_t **out) {
  built_t *k = &b->built[d->kernel];
  if (!k->main) VLMC_RETURN_IF_ERROR(build_unit(b, d->kernel, 0, &k->main));
  if (d->split && !k->combine) VLMC_RETURN_IF_ERROR(build_unit(b, d->kernel, 1, &k->combine));
  *out = k;
  return NULL;
}

static vlmc_status_t emu_run_region(vlmc_backend_t *base, const vlmc_region_call_t *c) {
  emu_backend_t *b = (emu_backend_t *)base;
  vlmc_metal_dispatch_t d;
  VLMC_RETURN_IF_ERROR(vlmc_metal_plan(&b->table, c, &d));
  VLMC_RETURN_IF_ERROR(vlmc_rt_value_ensure_buffer(base, c->out));
  if (d.work == 0) return NULL;
  built_t *k;
  VLMC_RETURN_IF_ERROR(built_kernel(b, &d, &k));
  static uint64_t empty[2]; /* what a value without elements binds */
  void *buffers[VLMC_KERNEL_MAX_INPUTS + 3];
  for (uint32_t i = 0; i <= c->num_inputs; ++i) {
    const vlmc_rt_value_t *v = i < c->num_inputs ? c->inputs[i] : c->out;
    buffers[i] = v->buffer && v->buffer->data ? v->buffer->data : empty;
  }
  if (d.split) {
    if (d.scratch_floats > b->scratch_floats) {
      free(b->scratch);
      b->scratch = calloc(d.scratch_floats, sizeof *b->scratch);
      b->scratch_floats = b->scratch ? d.scratch_floats : 0;
      if (!b->scratch) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory (scratch)");
    }
    buffers[c->num_inputs + 1] = b->scratch;
  }
  buffers[d.words_index] = d.words;
  VLMC_RETURN_IF_ERROR(vlmc_metal_kernel_run(k->main, buffers, d.threads, d.groups));
  b->calls++;
  if (!d.split) return NULL;
  b->calls++;
  return vlmc_metal_kernel_run(k->combine, buffers, d.combine_threads, d.combine_groups);
}

static void emu_counters(const vlmc_backend_t *base, vlmc_backend_counters_t *out) {
  const emu_backend_t *b = (const emu_backend_t *)base;
  memset(out, 0, sizeof *out);
  out->kernel_calls = b->calls;
  out->num_kernels = b->table.table.num_kernels;
  out->num_dispatches = b->table.table.num_dispatches;
}

static const vlmc_dtype_t kComputeDtypes[] = {VLMC_DTYPE_F32, VLMC_DTYPE_I64, VLMC_DTYPE_COUNT};
static const char *const kSections[] = {"program", "kernels.metal", "kernels.metal.json", NULL};

const vlmc_backend_iface_t vlmc_backend_metal_emulated = {
    .name = "metal",
    .summary = "EMULATION: the artifact's metal kernels compiled as C++ against a stand-in "
               "metal_stdlib and run on this machine's threads (tests/metal); not Apple hardware",
    .caps = VLMC_BACKEND_HOST_MEMORY | VLMC_BACKEND_EXPLICIT_ONLY,
    .compute_dtypes = kComputeDtypes,
    .sections = kSections,
    .check = vlmc_metal_table_check,
    .open = emu_open,
    .destroy = emu_destroy,
    .buffer_alloc = emu_buffer_alloc,
    .buffer_wrap = emu_buffer_wrap,
    .buffer_free = emu_buffer_free,
    .buffer_host = emu_buffer_host,
    .run_region = emu_run_region,
    .counters = emu_counters,
};
