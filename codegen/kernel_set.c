/* Deduplicated kernels and their table (codegen/kernel_set.h). */
#define _POSIX_C_SOURCE 200809L

#include "codegen/kernel_set.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/hash.h"
#include "support/strbuf.h"

vlmc_status_t vlmc_kernel_set_init(vlmc_kernel_set_t *set, const vlmc_module_t *module,
                                   const char *target) {
  memset(set, 0, sizeof *set);
  set->module = module;
  return vlmc_kernel_table_init(&set->table, target);
}

void vlmc_kernel_set_kernel_free(vlmc_kernel_set_kernel_t *k) {
  free(k->text);
  free(k->template_name);
  for (uint32_t i = 0; i < k->num_syms; ++i) free(k->syms[i]);
  memset(k, 0, sizeof *k);
}

void vlmc_kernel_set_deinit(vlmc_kernel_set_t *set) {
  for (size_t i = 0; i < set->num_kernels; ++i) vlmc_kernel_set_kernel_free(&set->kernels[i]);
  free(set->kernels);
  vlmc_kernel_table_deinit(&set->table);
  memset(set, 0, sizeof *set);
}

vlmc_status_t vlmc_kernel_set_region_error(const vlmc_func_t *func, const vlmc_dispatch_region_t *r,
                                           const vlmc_op_t *anchor, vlmc_status_t st) {
  return vlmc_status_annotate(st, "@%s: dispatch %u (anchor '%s'): ", func->name, r->id,
                              vlmc_op_info(anchor->kind)->mnemonic);
}

vlmc_status_t vlmc_kernel_set_describe(const vlmc_kernel_set_t *set, const vlmc_kernel_emit_t *e,
                                       const vlmc_dispatch_region_t *r, vlmc_strbuf_t *text,
                                       vlmc_kernel_set_kernel_t *k, vlmc_dim_t *work,
                                       int64_t *work_scale) {
  memset(k, 0, sizeof *k);
  if (r->num_inputs > sizeof k->inputs / sizeof k->inputs[0])
    return vlmc_status_make(VLMC_UNSUPPORTED, "%u inputs is too many", r->num_inputs);
  k->text = vlmc_strbuf_take(text);
  k->hash = k->text ? vlmc_xxh64(k->text, strlen(k->text), 0) : 0;
  k->template_name = strdup(e->template_name ? e->template_name : "?");
  k->num_inputs = r->num_inputs;
  for (uint32_t i = 0; i < r->num_inputs; ++i) k->inputs[i] = vlmc_kernel_emit_input_storage(e, i);
  k->output = vlmc_kernel_output_storage(vlmc_dispatch_output(r));
  k->signature = vlmc_dispatch_signature(set->module, r);
  k->num_syms = e->num_syms;
  bool names_ok = true;
  for (uint32_t i = 0; i < e->num_syms; ++i) {
    k->syms[i] = strdup(vlmc_module_symbol_name(set->module, e->syms[i]));
    names_ok = names_ok && k->syms[i];
  }
  k->cost = e->cost > 0 ? e->cost : 1;
  vlmc_status_t st = NULL;
  if (!k->text || !k->template_name || !names_ok)
    st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  /* The table's rule, which the runtime recomputes: not the template's to choose. */
  if (!st) st = vlmc_kernel_work(r, k->template_name, work, work_scale);
  if (st) vlmc_kernel_set_kernel_free(k);
  return st;
}

/* Appends k (taken) as kernel set->num_kernels. */
static vlmc_status_t append(vlmc_kernel_set_t *set, vlmc_kernel_set_kernel_t *k) {
  if (set->num_kernels == set->cap_kernels) {
    size_t cap = set->cap_kernels ? 2 * set->cap_kernels : 32;
    vlmc_kernel_set_kernel_t *grown = realloc(set->kernels, cap * sizeof *grown);
    if (!grown) {
      vlmc_kernel_set_kernel_free(k);
      return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    }
    set->kernels = grown;
    set->cap_kernels = cap;
  }
  set->kernels[set->num_kernels++] = *k;
  memset(k, 0, sizeof *k);
  return NULL;
}

vlmc_status_t vlmc_kernel_set_intern(vlmc_kernel_set_t *set, vlmc_kernel_set_kernel_t *k,
                                     size_t *out_index, bool *out_new) {
  for (size_t i = 0; i < set->num_kernels; ++i) {
    const vlmc_kernel_set_kernel_t *o = &set->kernels[i];
    if (o->is_variant || o->signature != k->signature || o->hash != k->hash ||
        strcmp(o->text, k->text) != 0)
      continue; /* a dispatch never names a variant */
    vlmc_kernel_set_kernel_free(k);
    *out_index = i;
    *out_new = false;
    return NULL;
  }
  *out_index = set->num_kernels;
  *out_new = true;
  return append(set, k);
}

vlmc_status_t vlmc_kernel_set_add_variant(vlmc_kernel_set_t *set, vlmc_kernel_set_kernel_t *k,
                                          size_t main_index, const char *for_devices,
                                          size_t *out_index) {
  if (main_index >= set->num_kernels || set->kernels[main_index].is_variant ||
      strlen(for_devices) >= sizeof k->for_devices) {
    vlmc_kernel_set_kernel_free(k);
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "a variant of kernel %zu for '%s': not a main "
                            "kernel of the set, or too long a device list", main_index,
                            for_devices);
  }
  k->is_variant = true;
  k->variant_of = (uint32_t)main_index;
  snprintf(k->for_devices, sizeof k->for_devices, "%s", for_devices);
  *out_index = set->num_kernels;
  return append(set, k);
}

char *vlmc_kernel_text_named(const char *src, const char *name, const char *suffix) {
  /* The placeholder occurs once, in the function's signature. */
  const char *at = strstr(src, VLMC_KERNEL_SET_PLACEHOLDER);
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  if (!at) {
    vlmc_strbuf_puts(&text, src);
  } else {
    vlmc_strbuf_append(&text, src, (size_t)(at - src));
    vlmc_strbuf_printf(&text, "%s%s", name, suffix);
    vlmc_strbuf_puts(&text, at + strlen(VLMC_KERNEL_SET_PLACEHOLDER));
  }
  char *out = text.failed ? NULL : vlmc_strbuf_take(&text);
  vlmc_strbuf_deinit(&text);
  return out;
}

char *vlmc_kernel_set_named_text(const vlmc_kernel_set_t *set, size_t index, const char *name,
                                 const char *suffix) {
  return vlmc_kernel_text_named(set->kernels[index].text, name, suffix);
}

vlmc_status_t vlmc_kernel_set_add_dispatch(vlmc_kernel_set_t *set, const vlmc_func_t *func,
                                           uint32_t id, size_t kernel, vlmc_dim_t work,
                                           int64_t scale) {
  vlmc_kernel_table_dispatch_t d = {.func = (char *)func->name, .dispatch = id,
                                    .kernel = (uint32_t)kernel};
  d.work = (vlmc_kernel_table_work_t){.num = 0, .den = 1, .off = work.off, .scale = scale};
  if (!vlmc_dim_is_static(work)) {
    d.work.sym = (char *)vlmc_module_symbol_name(set->module, work.sym);
    d.work.num = work.num;
    d.work.den = work.den;
  }
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_add_dispatch(&set->table, &d));
  set->num_dispatches++;
  return NULL;
}

vlmc_kernel_table_kernel_t vlmc_kernel_set_table_kernel(const vlmc_kernel_set_t *set, size_t index,
                                                        char symbol[64]) {
  vlmc_kernel_set_kernel_t *k = &set->kernels[index];
  snprintf(symbol, 64, "vk%zu", index);
  return (vlmc_kernel_table_kernel_t){.symbol = symbol, .template_name = k->template_name,
                                      .inputs = k->inputs, .num_inputs = k->num_inputs,
                                      .output = k->output, .syms = k->syms,
                                      .num_syms = k->num_syms, .cost = k->cost,
                                      .signature = k->signature, .is_variant = k->is_variant,
                                      .variant_of = k->variant_of,
                                      .for_devices = k->is_variant ? k->for_devices : NULL};
}
