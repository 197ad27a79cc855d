/* The metal ABI in C (metal_abi.h). */
#include "runtime/metal_abi.h"

#include <stdlib.h>
#include <string.h>

#include "artifact/vulkan_abi.h" /* VLMC_VK_MAX_COMBINE_GROUPS: the kernels are vulkan's */

static int64_t field(const vlmc_kernel_table_kernel_t *k, const char *key, int64_t dflt) {
  const vlmc_kernel_table_field_t *f = vlmc_kernel_table_kernel_field(k, key);
  return f && !f->string ? f->integer : dflt;
}

static const char *string_field(const vlmc_kernel_table_kernel_t *k, const char *key) {
  const vlmc_kernel_table_field_t *f = vlmc_kernel_table_kernel_field(k, key);
  return f ? f->string : NULL;
}

/* The kernel table's keys of each unit: entry point, offset and size in kernels.metal. */
static const char *const kUnitKeys[2][3] = {{"entry", "msl_offset", "msl_size"},
                                            {"combine_entry", "combine_msl_offset",
                                             "combine_msl_size"}};

bool vlmc_metal_kernel_unit(const vlmc_metal_table_t *t, uint32_t kernel, int which,
                            vlmc_metal_unit_t *out) {
  if (kernel >= t->table.num_kernels || which < 0 || which > 1) return false;
  const vlmc_kernel_table_kernel_t *k = &t->table.kernels[kernel];
  if (which == 1 && field(k, "split", 0) <= 0) return false;
  const char *entry = string_field(k, kUnitKeys[which][0]);
  int64_t at = field(k, kUnitKeys[which][1], -1), size = field(k, kUnitKeys[which][2], -1);
  if (!entry || at < 0 || size < 1 || (uint64_t)at + (uint64_t)size > t->msl_len ||
      t->msl[at + size - 1] != '\0')
    return false;
  *out = (vlmc_metal_unit_t){entry, t->msl + at, (size_t)size - 1};
  return true;
}

/* Every kernel's units lie inside the section, each NUL-terminated. */
static vlmc_status_t check_units(const vlmc_metal_table_t *t) {
  for (uint32_t i = 0; i < t->table.num_kernels; ++i) {
    const vlmc_kernel_table_kernel_t *k = &t->table.kernels[i];
    for (int u = 0; u < 2; ++u) {
      vlmc_metal_unit_t unit;
      if (u == 1 && field(k, "split", 0) <= 0) continue;
      if (!vlmc_metal_kernel_unit(t, i, u, &unit))
        return vlmc_status_make(VLMC_PARSE_ERROR, "%s: kernels.metal.json: kernel %s: no "
                                "NUL-terminated MSL unit at [%lld, +%lld) of kernels.metal",
                                t->source, k->symbol, (long long)field(k, kUnitKeys[u][1], -1),
                                (long long)field(k, kUnitKeys[u][2], -1));
    }
  }
  return NULL;
}

static vlmc_status_t parse(const vlmc_backend_open_params_t *p, vlmc_metal_table_t *t) {
  memset(t, 0, sizeof *t);
  t->source = p->source;
  t->module = p->module;
  size_t json_len = 0;
  t->msl = p->section(p->section_ctx, "kernels.metal", &t->msl_len);
  const char *json = p->section(p->section_ctx, "kernels.metal.json", &json_len);
  if (!t->msl || !json)
    return vlmc_status_make(VLMC_NOT_FOUND, "%s: no metal kernels (compile with --target "
                            "metal)", p->source);
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_parse(p->source, "metal", json, json_len, &t->table));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_check(&t->table, p->module));
  return check_units(t);
}

vlmc_status_t vlmc_metal_table_check(const vlmc_backend_open_params_t *p) {
  vlmc_metal_table_t t;
  vlmc_status_t st = parse(p, &t);
  vlmc_metal_table_deinit(&t);
  return st;
}

/* One dispatch entry per (function, dispatch number). */
static vlmc_status_t index_dispatches(vlmc_metal_table_t *t) {
  uint32_t funcs = t->module->num_funcs;
  t->by_id = calloc(funcs ? funcs : 1, sizeof *t->by_id);
  t->max_id = calloc(funcs ? funcs : 1, sizeof *t->max_id);
  if (!t->by_id || !t->max_id) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < t->table.num_dispatches; ++i) {
    const vlmc_kernel_table_dispatch_t *d = &t->table.dispatches[i];
    if (d->dispatch + 1 > t->max_id[d->func_index]) t->max_id[d->func_index] = d->dispatch + 1;
  }
  for (uint32_t f = 0; f < funcs; ++f) {
    t->by_id[f] = calloc(t->max_id[f] ? t->max_id[f] : 1, sizeof *t->by_id[f]);
    if (!t->by_id[f]) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t i = 0; i < t->table.num_dispatches; ++i) {
    const vlmc_kernel_table_dispatch_t *d = &t->table.dispatches[i];
    t->by_id[d->func_index][d->dispatch] = d;
  }
  return NULL;
}

vlmc_status_t vlmc_metal_table_init(const vlmc_backend_open_params_t *p, vlmc_metal_table_t *out) {
  vlmc_status_t st = parse(p, out);
  if (!st) st = index_dispatches(out);
  if (st) vlmc_metal_table_deinit(out);
  return st;
}

void vlmc_metal_table_deinit(vlmc_metal_table_t *t) {
  for (uint32_t f = 0; t->by_id && t->module && f < t->module->num_funcs; ++f) free(t->by_id[f]);
  free(t->by_id);
  free(t->max_id);
  t->by_id = NULL;
  t->max_id = NULL;
  vlmc_kernel_table_deinit(&t->table);
}

/* `groups` threadgroups as the ABI's grid: 65535 wide, then rows. */
static void grid_of(int64_t groups, uint32_t out[3]) {
  int64_t x = groups < VLMC_METAL_MAX_GROUPS_X ? groups : VLMC_METAL_MAX_GROUPS_X;
  out[0] = (uint32_t)x;
  out[1] = (uint32_t)((groups + x - 1) / x);
  out[2] = 1;
}

static const vlmc_kernel_table_dispatch_t *find_dispatch(const vlmc_metal_table_t *t,
                                                         const vlmc_region_call_t *c) {
  for (uint32_t f = 0; f < t->module->num_funcs; ++f)
    if (t->module->funcs[f] == c->func)
      return c->region < t->max_id[f] ? t->by_id[f][c->region] : NULL;
  return NULL;
}

vlmc_status_t vlmc_metal_plan(const vlmc_metal_table_t *t, const vlmc_region_call_t *c,
                              vlmc_metal_dispatch_t *out) {
  memset(out, 0, sizeof *out);
  const vlmc_kernel_table_dispatch_t *d = find_dispatch(t, c);
  if (!d)
    return vlmc_status_make(VLMC_NOT_FOUND, "no metal kernel for @%s dispatch %u", c->func->name,
                            c->region);
  const vlmc_kernel_table_kernel_t *k = &t->table.kernels[d->kernel];
  out->kernel = d->kernel;
  vlmc_dim_t work_dim = vlmc_kernel_table_work_dim(&d->work);
  int64_t units = work_dim.off;
  if (!vlmc_dim_is_static(work_dim))
    VLMC_RETURN_IF_ERROR(vlmc_dim_eval(work_dim, c->symbols, t->module->num_symbols, &units));
  out->work = units * d->work.scale;
  if (out->work <= 0) {
    out->work = 0;
    return NULL;
  }
  if (out->work > INT32_MAX)
    return vlmc_status_make(VLMC_UNSUPPORTED, "metal kernel %s: %lld work units, more than a "
                            "32-bit push constant holds", k->symbol, (long long)out->work);
  out->words[0] = (int32_t)out->work;
  out->num_words = 1;
  for (uint32_t i = 0; i < k->num_syms && out->num_words < VLMC_METAL_MAX_WORDS; ++i)
    out->words[out->num_words++] = (int32_t)c->symbols[k->sym_ids[i] - 1];
  out->threads[0] = (uint32_t)field(k, "threadgroup_x", 1);
  out->threads[1] = (uint32_t)field(k, "threadgroup_y", 1);
  out->threads[2] = (uint32_t)field(k, "threadgroup_z", 1);
  out->threadgroup_bytes = (uint32_t)field(k, "threadgroup_bytes", 0);
  int64_t split = field(k, "split", 0), per_group = field(k, "units_per_group", 1);
  if (per_group < 1) per_group = 1;
  out->split = split > 0;
  grid_of((out->work * (out->split ? split : 1) + per_group - 1) / per_group, out->groups);
  out->words_index = c->num_inputs + 1;
  if (!out->split) return NULL;
  out->scratch_floats = (size_t)out->work * (size_t)split * (size_t)field(k, "scratch_floats", 0);
  out->words_index++;
  out->combine_threads[0] = (uint32_t)field(k, "combine_threadgroup_x", 1);
  out->combine_threads[1] = out->combine_threads[2] = 1;
  int64_t per_unit = field(k, "combine_groups", 1); /* absent: a threadgroup per unit */
  if (per_unit < 1 || per_unit > VLMC_VK_MAX_COMBINE_GROUPS)
    return vlmc_status_make(VLMC_PARSE_ERROR, "metal kernel %s: combine_groups = %lld: expected "
                            "1 to %d", k->symbol, (long long)per_unit, VLMC_VK_MAX_COMBINE_GROUPS);
  grid_of(out->work * per_unit, out->combine_groups);
  return NULL;
}
