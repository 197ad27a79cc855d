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

#include "artifact/kernel_table.h"
#include "runtime/backend.h"
#include "tests/metal/emu.h"

enum { MAX_GROUPS_X = 65535, MAX_PUSH_WORDS = 1 + VLMC_KERNEL_MAX_SYMS };

struct vlmc_buffer_s {
  void *data;
  size_t capacity;
  bool owns_data;
};

typedef struct {
  vlmc_metal_kernel_t *main, *combine; /* built on first use */
  bool tried;
} built_t;

typedef struct {
  vlmc_backend_t base;
  const char *source;
  const vlmc_module_t *module;
  const char *msl;
  size_t msl_len;
  vlmc_kernel_table_t table;
  built_t *built;
  const vlmc_kernel_table_dispatch_t ***by_id; /* [func][region id] */
  uint32_t *max_id;
  float *scratch;
  size_t scratch_floats;
  uint64_t calls;
} emu_backend_t;


static int64_t field(const vlmc_kernel_table_kernel_t *k, const char *key, int64_t dflt) {
  const vlmc_kernel_table_field_t *f = vlmc_kernel_table_kernel_field(k, key);
  return f && !f->string ? f->integer : dflt;
}

static const char *string_field(const vlmc_kernel_table_kernel_t *k, const char *key) {
  const vlmc_kernel_table_field_t *f = vlmc_kernel_table_kernel_field(k, key);
  return f ? f->string : NULL;
}

/* ---- opening ---- */

static void emu_destroy(vlmc_backend_t *base) {
  emu_backend_t *b = (emu_backend_t *)base;
  if (!b) return;
  for (size_t i = 0; b->built && i < b->table.num_kernels; ++i) {
    vlmc_metal_kernel_destroy(b->built[i].main);
    vlmc_metal_kernel_destroy(b->built[i].combine);
  }
  free(b->built);
  for (uint32_t f = 0; b->by_id && f < b->module->num_funcs; ++f) free(b->by_id[f]);
  free(b->by_id);
  free(b->max_id);
  free(b->scratch);
  vlmc_kernel_table_deinit(&b->table);
  free(b);
}

/* Every kernel's MSL range inside the section, and one dispatch entry per region id. */
static vlmc_status_t index_table(emu_backend_t *b) {
  for (size_t i = 0; i < b->table.num_kernels; ++i) {
    const vlmc_kernel_table_kernel_t *k = &b->table.kernels[i];
    static const char *const kUnits[][3] = {{"entry", "msl_offset", "msl_size"},
                                            {"combine_entry", "combine_msl_offset", "combine_msl_size"}};
    for (int u = 0; u < 2; ++u) {
      if (u == 1 && field(k, "split", 0) <= 0) continue;
      int64_t at = field(k, kUnits[u][1], -1), size = field(k, kUnits[u][2], -1);
      if (!string_field(k, kUnits[u][0]) || at < 0 || size < 1 ||
          (uint64_t)at + (uint64_t)size > b->msl_len || b->msl[at + size - 1] != '\0')
        return vlmc_status_make(VLMC_PARSE_ERROR, "%s: kernels.metal.json: kernel %s: no "
                                "NUL-terminated MSL unit at [%lld, +%lld)", b->source, k->symbol,
                                (long long)at, (long long)size);
    }
  }
  uint32_t funcs = b->module->num_funcs;
  b->by_id = calloc(funcs ? funcs : 1, sizeof *b->by_id);
  b->max_id = calloc(funcs ? funcs : 1, sizeof *b->max_id);
  if (!b->by_id || !b->max_id) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < b->table.num_dispatches; ++i) {
    const vlmc_kernel_table_dispatch_t *d = &b->table.dispatches[i];
    if (d->dispatch + 1 > b->max_id[d->func_index]) b->max_id[d->func_index] = d->dispatch + 1;
  }
  for (uint32_t f = 0; f < funcs; ++f) {
    b->by_id[f] = calloc(b->max_id[f] ? b->max_id[f] : 1, sizeof *b->by_id[f]);
    if (!b->by_id[f]) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t i = 0; i < b->table.num_dispatches; ++i) {
    const vlmc_kernel_table_dispatch_t *d = &b->table.dispatches[i];
    b->by_id[d->func_index][d->dispatch] = d;
  }
  b->built = calloc(b->table.num_kernels ? b->table.num_kernels : 1, sizeof *b->built);
  return b->built ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
}

static vlmc_status_t sections(const vlmc_backend_open_params_t *p, const char **msl,
                              size_t *msl_len, const char **json, size_t *json_len) {
  *msl = p->section(p->section_ctx, "kernels.metal", msl_len);
  *json = p->section(p->section_ctx, "kernels.metal.json", json_len);
  if (!*msl || !*json)
    return vlmc_status_make(VLMC_NOT_FOUND, "%s: no metal kernels (compile with --target "
                            "metal)", p->source);
  return NULL;
}

static vlmc_status_t emu_check(const vlmc_backend_open_params_t *p) {
  const char *msl, *json;
  size_t msl_len, json_len;
  VLMC_RETURN_IF_ERROR(sections(p, &msl, &msl_len, &json, &json_len));
  vlmc_kernel_table_t t;
  vlmc_status_t st = vlmc_kernel_table_parse(p->source, "metal", json, json_len, &t);
  if (!st) st = vlmc_kernel_table_check(&t, p->module);
  vlmc_kernel_table_deinit(&t);
  return st;
}

static vlmc_status_t emu_open(const vlmc_backend_open_params_t *p, vlmc_backend_t **out) {
  const char *json;
  size_t json_len;
  emu_backend_t *b = calloc(1, sizeof *b);
  if (!b) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  b->base.iface = &vlmc_backend_metal_emulated;
  b->source = p->source;
  b->module = p->module;
  vlmc_status_t st = sections(p, &b->msl, &b->msl_len, &json, &json_len);
  if (!st) st = vlmc_kernel_table_parse(p->source, "metal", json, json_len, &b->table);
  if (!st) st = vlmc_kernel_table_check(&b->table, p->module);
  if (!st) st = index_table(b);
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

static vlmc_status_t built_kernel(emu_backend_t *b, uint32_t index, built_t **out) {
  built_t *k = &b->built[index];
  const vlmc_kernel_table_kernel_t *t = &b->table.kernels[index];
  if (!k->main) {
    int64_t at = field(t, "msl_offset", 0), size = field(t, "msl_size", 1);
    VLMC_RETURN_IF_ERROR(vlmc_metal_kernel_build(b->msl + at, (size_t)size - 1,
                                                 string_field(t, "entry"), &k->main));
  }
  if (field(t, "split", 0) > 0 && !k->combine) {
    int64_t at = field(t, "combine_msl_offset", 0), size = field(t, "combine_msl_size", 1);
    VLMC_RETURN_IF_ERROR(vlmc_metal_kernel_build(b->msl + at, (size_t)size - 1,
                                                 string_field(t, "combine_entry"), &k->combine));
  }
  *out = k;
  return NULL;
}

/* `groups` threadgroups as the ABI's grid: 65535 wide, then rows. */
static void grid_of(int64_t groups, uint32_t out[3]) {
  int64_t x = groups < MAX_GROUPS_X ? groups : MAX_GROUPS_X;
  out[0] = (uint32_t)x;
  out[1] = (uint32_t)((groups + x - 1) / x);
  out[2] = 1;
}

static vlmc_status_t emu_run_region(vlmc_backend_t *base, const vlmc_region_call_t *c) {
  emu_backend_t *b = (emu_backend_t *)base;
  uint32_t f = b->module->num_funcs;
  for (uint32_t i = 0; i < b->module->num_funcs; ++i)
    if (b->module->funcs[i] == c->func) f = i;
  const vlmc_kernel_table_dispatch_t *d =
      f < b->module->num_funcs && c->region < b->max_id[f] ? b->by_id[f][c->region] : NULL;
  if (!d)
    return vlmc_status_make(VLMC_NOT_FOUND, "no metal kernel for @%s dispatch %u", c->func->name,
                            c->region);
  const vlmc_kernel_table_kernel_t *t = &b->table.kernels[d->kernel];
  vlmc_dim_t work_dim = vlmc_kernel_table_work_dim(&d->work);
  int64_t units = work_dim.off;
  if (!vlmc_dim_is_static(work_dim))
    VLMC_RETURN_IF_ERROR(vlmc_dim_eval(work_dim, c->symbols, b->module->num_symbols, &units));
  int64_t work = units * d->work.scale;
  if (!c->out->buffer) {
    size_t bytes = 0;
    if (!vlmc_rt_value_bytes(c->out, &bytes))
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "an output of an invalid shape");
    VLMC_RETURN_IF_ERROR(emu_buffer_alloc(base, bytes, &c->out->buffer));
    c->out->owned = true;
  }
  if (work <= 0) return NULL;
  if (work > INT32_MAX)
    return vlmc_status_make(VLMC_UNSUPPORTED, "kernel %s: %lld work units, more than a 32-bit "
                            "push constant holds", t->symbol, (long long)work);
  int32_t words[MAX_PUSH_WORDS] = {(int32_t)work};
  for (uint32_t i = 0; i < t->num_syms && i + 1 < MAX_PUSH_WORDS; ++i)
    words[1 + i] = (int32_t)c->symbols[t->sym_ids[i] - 1];
  built_t *k;
  VLMC_RETURN_IF_ERROR(built_kernel(b, d->kernel, &k));
  static uint64_t empty[2]; /* what a value without elements binds */
  void *buffers[VLMC_KERNEL_MAX_INPUTS + 3];
  for (uint32_t i = 0; i <= c->num_inputs; ++i) {
    const vlmc_rt_value_t *v = i < c->num_inputs ? c->inputs[i] : c->out;
    buffers[i] = v->buffer && v->buffer->data ? v->buffer->data : empty;
  }
  int64_t split = field(t, "split", 0);
  uint32_t next = c->num_inputs + 1;
  if (split > 0) {
    size_t need = (size_t)work * (size_t)split * (size_t)field(t, "scratch_floats", 0);
    if (need > b->scratch_floats) {
      free(b->scratch);
      b->scratch = calloc(need ? need : 1, sizeof *b->scratch);
      b->scratch_floats = b->scratch ? need : 0;
      if (!b->scratch) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory (scratch)");
    }
    buffers[next++] = b->scratch;
  }
  buffers[next] = words;
  uint32_t threads[3] = {(uint32_t)field(t, "threadgroup_x", 1),
                         (uint32_t)field(t, "threadgroup_y", 1),
                         (uint32_t)field(t, "threadgroup_z", 1)};
  uint32_t grid[3];
  int64_t per_group = field(t, "units_per_group", 1);
  grid_of((work * (split > 0 ? split : 1) + per_group - 1) / per_group, grid);
  VLMC_RETURN_IF_ERROR(vlmc_metal_kernel_run(k->main, buffers, threads, grid));
  b->calls++;
  if (split <= 0) return NULL;
  uint32_t combine[3] = {(uint32_t)field(t, "combine_threadgroup_x", 1), 1, 1};
  grid_of(work, grid);
  b->calls++;
  return vlmc_metal_kernel_run(k->combine, buffers, combine, grid);
}

static void emu_counters(const vlmc_backend_t *base, vlmc_backend_counters_t *out) {
  const emu_backend_t *b = (const emu_backend_t *)base;
  memset(out, 0, sizeof *out);
  out->kernel_calls = b->calls;
  out->num_kernels = b->table.num_kernels;
  out->num_dispatches = b->table.num_dispatches;
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
    .check = emu_check,
    .open = emu_open,
    .destroy = emu_destroy,
    .buffer_alloc = emu_buffer_alloc,
    .buffer_wrap = emu_buffer_wrap,
    .buffer_free = emu_buffer_free,
    .buffer_host = emu_buffer_host,
    .run_region = emu_run_region,
    .counters = emu_counters,
};
