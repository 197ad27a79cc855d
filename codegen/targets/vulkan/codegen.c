/* The vulkan target (vlmc_target_vulkan, codegen/target.h): every dispatch region of a fused
 * module becomes a SPIR-V compute kernel. Regions -> kernel text (codegen/kernel_emit.h with
 * the vulkan hooks, emit.h, the templates) -> deduplicated kernels (codegen/kernel_set.h) ->
 * SPIR-V, validated (lower.h) -> table.
 *
 * Sections (docs/vulkan.md): "kernels.vulkan", the SPIR-V modules back to back, and
 * "kernels.vulkan.json", the kernel table (format 2) whose kernels carry their "target"
 * fields: entry, spirv_offset, spirv_size, workgroup_x/y/z, units_per_group, push_words,
 * shared_bytes, features, and a split kernel's split, scratch_floats and combine_* (its
 * second module). */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/kernel_table.h"
#include "codegen/kernel_set.h"
#include "codegen/target.h"
#include "codegen/targets/vulkan/emit.h"
#include "codegen/targets/vulkan/lower.h"
#include "support/strbuf.h"

/* What the table says of a kernel beyond the common fields. */
typedef struct {
  int workgroup[3];
  int units_per_group;
  int64_t shared_bytes;
  uint32_t push_words;
  size_t spirv_offset, spirv_size;
  char features[160];
  /* A split kernel's (emit.h, "split kernels"): its stage 2, written with the placeholder
   * name until it is lowered as vkN_combine right after stage 1. split 0: one stage. */
  int split;
  int64_t scratch_floats;
  char *combine_text;
  int combine_workgroup;
  int combine_groups; /* workgroups per work unit (>= 1) */
  int64_t combine_shared_bytes;
  size_t combine_offset, combine_size;
} vk_kernel_t;

typedef struct {
  const vlmc_target_config_t *o;
  const vlmc_module_t *module;
  vlmc_vk_lowerer_t *lowerer;
  vlmc_kernel_set_t set;
  vk_kernel_t *info; /* parallel to set.kernels */
  size_t cap_info;
  const vlmc_func_t *func; /* the function whose regions come in now (for progress) */
  vlmc_strbuf_t spirv;     /* section kernels.vulkan */
  char *table_json;
} codegen_t;

static const char kAbi[] = "vulkan-spirv-1";
/* Devices must take at least 128 bytes of push constants: 1 + 16 symbols is 68. */
/* Vulkan's guaranteed maxComputeSharedMemorySize: what a main kernel may use (a "gpu"
 * variant may ask for more, vlmc_vk_emit_allow_shared: devices with less run the main one). */
enum { GUARANTEED_SHARED_BYTES = 16384 };

static void progress(const codegen_t *g, const char *fmt, ...) VLMC_PRINTF(2, 3);
static void progress(const codegen_t *g, const char *fmt, ...) {
  if (!g->o->progress) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  g->o->progress(g->o->progress_user, line);
}

/* "@encode_image dispatch 12 (rms_norm): " before st. */
static vlmc_status_t region_error(const vlmc_func_t *func, const vlmc_dispatch_region_t *r,
                                  const char *what, vlmc_status_t st) {
  return vlmc_status_annotate(st, "@%s dispatch %u (%s): ", func->name, r->id, what);
}

/* Stage 2 of split kernel `first` (its emitter, finished): `first`'s combine template on a
 * fresh emitter over the same region, reading the same symbols in the same push-constant
 * slots; its text (placeholder name) and shape into info. */
static vlmc_status_t write_combine(codegen_t *g, const vlmc_func_t *func,
                                   const vlmc_dispatch_region_t *r, const vlmc_kernel_emit_t *first,
                                   vk_kernel_t *info) {
  const vlmc_vk_emit_t *first_vk = first->target;
  vlmc_kernel_emit_t e;
  vlmc_vk_emit_t vk;
  VLMC_RETURN_IF_ERROR(vlmc_vk_emit_init(&e, &vk, g->module, func, r));
  memcpy(e.syms, first->syms, first->num_syms * sizeof *e.syms);
  e.num_syms = first->num_syms;
  vk.scratch = true; /* the same bindings as stage 1 */
  vlmc_status_t st = first_vk->combine(&e);
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  if (!st) st = vlmc_vk_emit_finish(&e, VLMC_KERNEL_SET_PLACEHOLDER, &text);
  if (!st && (e.num_syms != first->num_syms || !e.template_name ||
              strcmp(e.template_name, first->template_name) != 0 || vk.split))
    st = vlmc_status_make(VLMC_INTERNAL, "the combine stage must keep the template, read only "
                          "the first stage's symbols and not split again");
  if (!st && (vk.workgroup[1] != 1 || vk.workgroup[2] != 1))
    st = vlmc_status_make(VLMC_INTERNAL, "the combine stage's workgroup must be [x, 1, 1]");
  if (!st && vk.shared_bytes > vk.max_shared_bytes)
    st = vlmc_status_make(VLMC_UNSUPPORTED, "combine: %lld bytes of workgroup memory (at most %lld)",
                          (long long)vk.shared_bytes, (long long)vk.max_shared_bytes);
  if (!st) {
    info->combine_workgroup = vk.workgroup[0];
    info->combine_groups = vk.combine_groups > 0 ? vk.combine_groups : 1;
    info->combine_shared_bytes = vk.shared_bytes;
    if (vk.units_per_group != 1)
      st = vlmc_status_make(VLMC_INTERNAL, "the combine stage takes whole workgroups per unit");
  }
  if (!st) {
    info->combine_text = vlmc_strbuf_take(&text);
    if (!info->combine_text) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  vlmc_strbuf_deinit(&text);
  vlmc_kernel_emit_deinit(&e);
  return st;
}

/* Writes the region's kernel text with template fn (NULL: the anchor's main template) and
 * fills *k and *info (not yet deduplicated). */
static vlmc_status_t write_kernel(codegen_t *g, const vlmc_func_t *func,
                                  const vlmc_dispatch_region_t *r, vlmc_vk_template_fn fn,
                                  const char *for_devices,
                                  vlmc_kernel_set_kernel_t *k, vk_kernel_t *info, vlmc_dim_t *work,
                                  int64_t *work_scale) {
  vlmc_kernel_emit_t e;
  vlmc_vk_emit_t vk;
  VLMC_RETURN_IF_ERROR(vlmc_vk_emit_init(&e, &vk, g->module, func, r));
  const char *anchor = vlmc_op_info(e.anchor->kind)->mnemonic;
  if (!fn) fn = vlmc_vk_template_for(e.anchor->kind);
  vlmc_status_t st = NULL;
  if (!fn)
    st = vlmc_status_make(VLMC_UNSUPPORTED, "the vulkan target has no kernel template for '%s'",
                          anchor);
  if (!st) st = fn(&e);
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  if (!st) st = vlmc_vk_emit_finish(&e, VLMC_KERNEL_SET_PLACEHOLDER, &text);
  if (!st && vk.max_shared_bytes > GUARANTEED_SHARED_BYTES &&
      !(for_devices && !strcmp(for_devices, "gpu")))
    st = vlmc_status_make(VLMC_INTERNAL, "only a variant for gpu devices may use more than %d "
                          "bytes of workgroup memory", GUARANTEED_SHARED_BYTES);
  if (!st && vk.shared_bytes > vk.max_shared_bytes)
    st = vlmc_status_make(VLMC_UNSUPPORTED, "%lld bytes of workgroup memory (at most %lld)",
                          (long long)vk.shared_bytes, (long long)vk.max_shared_bytes);
  if (!st && e.num_syms > VLMC_KERNEL_MAX_SYMS)
    st = vlmc_status_make(VLMC_UNSUPPORTED, "%u symbols (at most %d)", e.num_syms,
                          VLMC_KERNEL_MAX_SYMS);
  if (!st) {
    memset(info, 0, sizeof *info);
    memcpy(info->workgroup, vk.workgroup, sizeof info->workgroup);
    info->units_per_group = vk.units_per_group;
    info->shared_bytes = vk.shared_bytes;
    info->push_words = 1 + e.num_syms;
    info->split = vk.split;
    info->scratch_floats = vk.scratch_floats;
    if (vk.combine) st = write_combine(g, func, r, &e, info);
    if (!st) st = vlmc_kernel_set_describe(&g->set, &e, r, &text, k, work, work_scale);
    if (st) {
      free(info->combine_text);
      info->combine_text = NULL;
    }
  }
  vlmc_strbuf_deinit(&text);
  if (st) st = region_error(func, r, e.template_name ? e.template_name : anchor, st);
  vlmc_kernel_emit_deinit(&e);
  return st;
}

/* Lowers kernel text `text` as entry `name`, appends its module to the section and gives its
 * range and features. */
static vlmc_status_t lower_module(codegen_t *g, const char *name, const char *text,
                                  size_t *offset, size_t *size, uint32_t *features) {
  uint32_t *words = NULL;
  size_t count = 0;
  VLMC_RETURN_IF_ERROR(vlmc_vk_lowerer_lower(g->lowerer, name, text, &words, &count));
  *offset = g->spirv.len; /* every module is whole words: stays 4-aligned */
  *size = count * 4;
  *features |= vlmc_vk_feature_bits(words, count);
  vlmc_strbuf_append(&g->spirv, (const char *)words, count * 4);
  free(words);
  return g->spirv.failed ? vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory") : NULL;
}

/* Lowers new kernel `index` as vkN (and a split kernel's stage 2 as vkN_combine, whose
 * features join stage 1's: the table lists one set for both). */
static vlmc_status_t lower_kernel(codegen_t *g, size_t index, vk_kernel_t *info) {
  char name[64];
  snprintf(name, sizeof name, "vk%zu", index);
  char *text = vlmc_kernel_set_named_text(&g->set, index, name, "");
  if (!text) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  uint32_t features = 0;
  vlmc_status_t st = lower_module(g, name, text, &info->spirv_offset, &info->spirv_size, &features);
  free(text);
  if (!st && info->combine_text) {
    char combine[80];
    snprintf(combine, sizeof combine, "%s_combine", name);
    text = vlmc_kernel_text_named(info->combine_text, name, "_combine");
    free(info->combine_text);
    info->combine_text = NULL;
    if (!text) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    st = lower_module(g, combine, text, &info->combine_offset, &info->combine_size, &features);
    free(text);
  }
  vlmc_vk_feature_list(features, info->features, sizeof info->features);
  return st;
}

static vlmc_status_t grow_info(codegen_t *g) {
  if (g->set.num_kernels < g->cap_info) return NULL;
  size_t cap = g->cap_info ? 2 * g->cap_info : 32;
  vk_kernel_t *grown = realloc(g->info, cap * sizeof *grown);
  if (!grown) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  g->info = grown;
  g->cap_info = cap;
  return NULL;
}

/* The variants of new main kernel `main_index` for other device classes (kernel_table.h,
 * "Variants"): the same region through each variant template, lowered like any kernel. */
static vlmc_status_t add_variants(codegen_t *g, const vlmc_func_t *func,
                                  const vlmc_dispatch_region_t *r, size_t main_index,
                                  const vlmc_op_t *anchor) {
  size_t count = 0;
  const vlmc_vk_variant_t *variants = vlmc_vk_variants_for(anchor->kind, &count);
  for (size_t i = 0; i < count; ++i) {
    if (variants[i].applies && !variants[i].applies(anchor)) continue;
    vlmc_kernel_set_kernel_t k;
    vk_kernel_t info;
    vlmc_dim_t work = vlmc_dim_static(1);
    int64_t scale = 1;
    size_t index = 0;
    VLMC_RETURN_IF_ERROR(grow_info(g));
    VLMC_RETURN_IF_ERROR(write_kernel(g, func, r, variants[i].fn, variants[i].for_devices, &k,
                                      &info, &work, &scale));
    if (strcmp(k.template_name, g->set.kernels[main_index].template_name) != 0) {
      vlmc_status_t st = vlmc_status_make(VLMC_INTERNAL, "the %s variant names template '%s', "
                                          "the main kernel '%s'", variants[i].for_devices,
                                          k.template_name,
                                          g->set.kernels[main_index].template_name);
      vlmc_kernel_set_kernel_free(&k);
      free(info.combine_text);
      return region_error(func, r, "variant", st);
    }
    vlmc_status_t added = vlmc_kernel_set_add_variant(&g->set, &k, main_index,
                                                      variants[i].for_devices, &index);
    if (added) free(info.combine_text);
    VLMC_RETURN_IF_ERROR(added);
    g->info[index] = info;
    vlmc_status_t st = lower_kernel(g, index, &g->info[index]);
    if (st) return region_error(func, r, g->set.kernels[index].template_name, st);
  }
  return NULL;
}

/* The region's kernel (shared with an earlier identical one) and its table entry. */
static vlmc_status_t add_region(codegen_t *g, const vlmc_func_t *func,
                                const vlmc_dispatch_region_t *r) {
  vlmc_kernel_set_kernel_t k;
  vk_kernel_t info;
  vlmc_dim_t work = vlmc_dim_static(1);
  int64_t scale = 1;
  size_t index = 0;
  bool is_new = false;
  VLMC_RETURN_IF_ERROR(grow_info(g));
  VLMC_RETURN_IF_ERROR(write_kernel(g, func, r, NULL, NULL, &k, &info, &work, &scale));
  char template_name[64];
  snprintf(template_name, sizeof template_name, "%s", k.template_name);
  vlmc_status_t interned = vlmc_kernel_set_intern(&g->set, &k, &index, &is_new);
  if (interned || !is_new) free(info.combine_text); /* a kernel already lowered has its own */
  VLMC_RETURN_IF_ERROR(interned);
  if (is_new) {
    g->info[index] = info;
    vlmc_status_t st = lower_kernel(g, index, &g->info[index]);
    if (st) return region_error(func, r, template_name, st);
    VLMC_RETURN_IF_ERROR(add_variants(g, func, r, index, r->ops[vlmc_dispatch_anchor_index(r)]));
  }
  return vlmc_kernel_set_add_dispatch(&g->set, func, r->id, index, work, scale);
}

static vlmc_status_t add_target_fields(vlmc_kernel_table_kernel_t *k, const vk_kernel_t *info) {
  static const char *const kAxis[] = {"workgroup_x", "workgroup_y", "workgroup_z"};
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_string_field(k, "entry", k->symbol));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_int_field(k, "spirv_offset",
                                                              (int64_t)info->spirv_offset));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_int_field(k, "spirv_size",
                                                              (int64_t)info->spirv_size));
  for (int a = 0; a < 3; ++a)
    VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_int_field(k, kAxis[a], info->workgroup[a]));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_int_field(k, "units_per_group",
                                                              info->units_per_group));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_int_field(k, "push_words", info->push_words));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_int_field(k, "shared_bytes",
                                                              info->shared_bytes));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_string_field(k, "features", info->features));
  if (!info->split) return NULL;
  char entry[80];
  snprintf(entry, sizeof entry, "%s_combine", k->symbol);
  const struct { const char *key; int64_t value; } kSplit[] = {
      {"split", info->split},
      {"scratch_floats", info->scratch_floats},
      {"combine_spirv_offset", (int64_t)info->combine_offset},
      {"combine_spirv_size", (int64_t)info->combine_size},
      {"combine_workgroup_x", info->combine_workgroup},
      {"combine_groups", info->combine_groups},
      {"combine_shared_bytes", info->combine_shared_bytes},
  };
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_string_field(k, "combine_entry", entry));
  for (size_t i = 0; i < sizeof kSplit / sizeof kSplit[0]; ++i)
    VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_int_field(k, kSplit[i].key, kSplit[i].value));
  return NULL;
}

/* Completes the table (the ABI, the kernels with their target fields) and writes it. */
static vlmc_status_t table_json(codegen_t *g, char **out) {
  vlmc_kernel_table_t *t = &g->set.table;
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_set_abi(t, kAbi));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_add_string_field(t, "spirv_version", "1.3"));
  for (size_t i = 0; i < g->set.num_kernels; ++i) {
    char symbol[64];
    vlmc_kernel_table_kernel_t k = vlmc_kernel_set_table_kernel(&g->set, i, symbol);
    vlmc_status_t st = add_target_fields(&k, &g->info[i]);
    if (!st) st = vlmc_kernel_table_add_kernel(t, &k);
    vlmc_kernel_table_kernel_fields_free(&k);
    VLMC_RETURN_IF_ERROR(st);
  }
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  vlmc_status_t st = vlmc_kernel_table_to_json(t, &text);
  *out = st ? NULL : vlmc_strbuf_take(&text);
  vlmc_strbuf_deinit(&text);
  return st;
}

/* ---- the target's entries (codegen/target.h) ---- */

static void function_done(const codegen_t *g) {
  if (g->func)
    progress(g, "compile: @%s: %zu dispatches so far, %zu distinct vulkan kernels", g->func->name,
             g->set.num_dispatches, g->set.num_kernels);
}

static bool vk_supports(const vlmc_dispatch_region_t *region, const vlmc_op_t *anchor) {
  (void)region;
  return vlmc_vk_template_for(anchor->kind) != NULL;
}

static void vk_destroy(void *state) {
  codegen_t *g = state;
  if (!g) return;
  vlmc_kernel_set_deinit(&g->set);
  free(g->info);
  vlmc_vk_lowerer_destroy(g->lowerer);
  vlmc_strbuf_deinit(&g->spirv);
  free(g->table_json);
  free(g);
}

static vlmc_status_t vk_create(const vlmc_target_config_t *config, const vlmc_module_t *module,
                               void **out_state) {
  codegen_t *g = calloc(1, sizeof *g);
  if (!g) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  g->o = config;
  g->module = module;
  vlmc_strbuf_init(&g->spirv);
  vlmc_status_t st = vlmc_kernel_set_init(&g->set, module, "vulkan");
  if (!st) st = vlmc_vk_lowerer_create(config->dump_dir, &g->lowerer);
  if (st) {
    vk_destroy(g);
    return st;
  }
  progress(g, "compile: vulkan kernels (SPIR-V 1.3, Vulkan 1.1 rules)");
  *out_state = g;
  return NULL;
}

static vlmc_status_t vk_emit_region(void *state, const vlmc_func_t *func,
                                    const vlmc_dispatch_region_t *region) {
  codegen_t *g = state;
  if (func != g->func) {
    function_done(g);
    g->func = func;
  }
  return add_region(g, func, region);
}

static vlmc_status_t vk_finish(void *state, vlmc_target_sections_t *out) {
  codegen_t *g = state;
  function_done(g);
  VLMC_RETURN_IF_ERROR(table_json(g, &g->table_json));
  progress(g, "compile: vulkan: %zu dispatches, %zu distinct kernels, %.1f KB of SPIR-V%s%s",
           g->set.num_dispatches, g->set.num_kernels, (double)g->spirv.len / 1e3,
           g->o->dump_dir ? "; kernels dumped to " : "", g->o->dump_dir ? g->o->dump_dir : "");
  out->items[0] = (vlmc_target_section_t){"kernels.vulkan", g->spirv.data ? g->spirv.data : "",
                                          g->spirv.len, 16};
  out->items[1] = (vlmc_target_section_t){"kernels.vulkan.json", g->table_json,
                                          strlen(g->table_json), 8};
  out->count = 2;
  return NULL;
}

const vlmc_target_t vlmc_target_vulkan = {
    .name = "vulkan",
    .summary = "SPIR-V compute kernels (MLIR gpu -> SPIR-V, validated) for vlmc-run's vulkan "
               "backend",
    .options = NULL,
    .num_options = 0,
    .precisions = "f32,f16",
    .precision_note = "vulkan kernels compute in f32, or in f16 (every f16 op result rounded, "
                      "f32 accumulation; shaderFloat16), nothing else",
    .default_precision = "f32",
    .pipeline_tail = "fuse,memory-plan",
    /* a one-row rms_norm folded into the GEMVs after it (kernel_linear.c, the lanes variant) */
    .fusions = "norm-prologue",
    .supports = vk_supports,
    .create = vk_create,
    .emit_region = vk_emit_region,
    .finish = vk_finish,
    .destroy = vk_destroy,
};
