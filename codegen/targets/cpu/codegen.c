/* The cpu target (vlmc_target_cpu, codegen/target.h): every dispatch region of a fused module
 * becomes a native kernel. Regions -> kernel text (codegen/kernel_emit.h, emit.h and the
 * templates) -> deduplicated kernels (the same layer shape, 36 times over, is one kernel) ->
 * native code (lower.h) -> table.
 *
 * Sections: one shared object ("kernels.cpu") and its table ("kernels.cpu.json",
 * docs/artifact.md): the kernels, with their input storage dtypes and the symbols they read,
 * and for every (function, dispatch) the kernel and its work count. */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/kernel_table.h"
#include "codegen/target.h"
#include "codegen/targets/cpu/emit.h"
#include "codegen/targets/cpu/lower.h"
#include "ir/dispatch.h"
#include "support/hash.h"
#include "support/strbuf.h"

typedef struct {
  char *text;             /* MLIR with the placeholder name */
  uint64_t hash;
  uint64_t signature;     /* vlmc_dispatch_signature: kernels are shared only at equal ones */
  char *template_name;
  vlmc_dtype_t inputs[VLMC_IR_MAX_OPERANDS * 4];
  uint32_t num_inputs;
  vlmc_dtype_t output;
  char *syms[VLMC_KERNEL_EMIT_MAX_SYMS];
  uint32_t num_syms;
  int64_t cost;
} kernel_t;

typedef struct {
  const vlmc_target_config_t *o;
  const vlmc_module_t *module;
  vlmc_cpu_lowerer_t *lowerer;
  kernel_t *kernels;
  size_t num_kernels, cap_kernels;
  vlmc_kernel_table_t table; /* the dispatches as they are made; the kernels at the end */
  size_t num_dispatches;
  const vlmc_func_t *func; /* the function whose regions come in now (for progress) */
  unsigned char *so;       /* the sections, once finished */
  size_t so_len;
  char *table_json;
} codegen_t;

static const char kPlaceholder[] = "vlmc_kernel";
/* The entry point cpu_lower gives every kernel, as the table states it. */
static const char kAbi[] =
    "void k(void *const *buffers, const int64_t *counts, int64_t lo, int64_t hi)";

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

static vlmc_status_t region_error(const vlmc_func_t *func, const vlmc_dispatch_region_t *r,
                                  const vlmc_op_t *anchor, vlmc_status_t st) {
  return vlmc_status_annotate(st, "@%s: dispatch %u (anchor '%s'): ", func->name, r->id,
                              vlmc_op_info(anchor->kind)->mnemonic);
}

static void kernel_free(kernel_t *k) {
  free(k->text);
  free(k->template_name);
  for (uint32_t i = 0; i < k->num_syms; ++i) free(k->syms[i]);
  memset(k, 0, sizeof *k);
}

/* Writes the region's kernel text and fills *k (not yet deduplicated). */
static vlmc_status_t write_kernel(codegen_t *g, const vlmc_func_t *func,
                                  const vlmc_dispatch_region_t *r, kernel_t *k,
                                  vlmc_dim_t *work, int64_t *work_scale) {
  vlmc_kernel_emit_t e;
  VLMC_RETURN_IF_ERROR(vlmc_kernel_emit_init(&e, g->module, func, r,
                                             vlmc_cpu_lowerer_vector_width(g->lowerer)));
  vlmc_cpu_template_fn fn = vlmc_cpu_template_for(e.anchor->kind);
  vlmc_status_t st = NULL;
  if (!fn)
    st = vlmc_status_make(VLMC_UNSUPPORTED, "the cpu target has no kernel template for '%s'",
                          vlmc_op_info(e.anchor->kind)->mnemonic);
  if (!st) st = fn(&e);
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  if (!st) st = vlmc_cpu_emit_finish(&e, kPlaceholder, &text);
  if (!st && r->num_inputs > sizeof k->inputs / sizeof k->inputs[0])
    st = vlmc_status_make(VLMC_UNSUPPORTED, "%u inputs is too many", r->num_inputs);
  if (!st) {
    memset(k, 0, sizeof *k);
    k->text = vlmc_strbuf_take(&text);
    k->hash = vlmc_xxh64(k->text, strlen(k->text), 0);
    k->template_name = strdup(e.template_name ? e.template_name : "?");
    k->num_inputs = r->num_inputs;
    for (uint32_t i = 0; i < r->num_inputs; ++i) k->inputs[i] = vlmc_kernel_emit_input_storage(&e, i);
    k->output = vlmc_kernel_output_storage(vlmc_dispatch_output(r));
    k->signature = vlmc_dispatch_signature(g->module, r);
    k->num_syms = e.num_syms;
    for (uint32_t i = 0; i < e.num_syms; ++i)
      k->syms[i] = strdup(vlmc_module_symbol_name(g->module, e.syms[i]));
    k->cost = e.cost > 0 ? e.cost : 1;
    if (!k->text || !k->template_name) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    /* The table's rule, which the runtime recomputes: not the template's to choose. */
    if (!st) st = vlmc_kernel_work(r, k->template_name, work, work_scale);
    if (st) kernel_free(k);
  }
  vlmc_strbuf_deinit(&text);
  if (st) st = region_error(func, r, e.anchor, st);
  vlmc_kernel_emit_deinit(&e);
  return st;
}


/* The index of an identical kernel already lowered for a region of the same signature (the
 * table records one signature per kernel), or of k after lowering it. */
static vlmc_status_t intern_kernel(codegen_t *g, kernel_t *k, size_t *out_index) {
  for (size_t i = 0; i < g->num_kernels; ++i) {
    if (g->kernels[i].signature != k->signature || g->kernels[i].hash != k->hash ||
        strcmp(g->kernels[i].text, k->text) != 0)
      continue;
    kernel_free(k);
    *out_index = i;
    return NULL;
  }
  if (g->num_kernels == g->cap_kernels) {
    size_t cap = g->cap_kernels ? 2 * g->cap_kernels : 32;
    kernel_t *grown = realloc(g->kernels, cap * sizeof *grown);
    if (!grown) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    g->kernels = grown;
    g->cap_kernels = cap;
  }
  size_t index = g->num_kernels;
  char name[64];
  snprintf(name, sizeof name, "vk%zu", index);
  /* Rename @vlmc_kernel_body to @vkN_body: the placeholder occurs once, in the signature. */
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  const char *at = strstr(k->text, kPlaceholder);
  vlmc_strbuf_append(&text, k->text, (size_t)(at - k->text));
  vlmc_strbuf_printf(&text, "%s_body", name);
  vlmc_strbuf_puts(&text, at + strlen(kPlaceholder));
  vlmc_status_t st = text.failed ? vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory")
                                 : vlmc_cpu_lowerer_add(g->lowerer, name, vlmc_strbuf_cstr(&text));
  vlmc_strbuf_deinit(&text);
  if (st) {
    kernel_free(k);
    return st;
  }
  g->kernels[g->num_kernels++] = *k;
  *out_index = index;
  return NULL;
}

/* The table entry of region `id` of `func`: kernel `kernel`, `work` units times `scale`. */
static vlmc_status_t add_dispatch(codegen_t *g, const vlmc_func_t *func, uint32_t id,
                                  size_t kernel, vlmc_dim_t work, int64_t scale) {
  vlmc_kernel_table_dispatch_t d = {.func = (char *)func->name, .dispatch = id,
                                    .kernel = (uint32_t)kernel};
  d.work = (vlmc_kernel_table_work_t){.num = 0, .den = 1, .off = work.off, .scale = scale};
  if (!vlmc_dim_is_static(work)) {
    d.work.sym = (char *)vlmc_module_symbol_name(g->module, work.sym);
    d.work.num = work.num;
    d.work.den = work.den;
  }
  return vlmc_kernel_table_add_dispatch(&g->table, &d);
}

/* The region's kernel (shared with an earlier identical one) and its table entry. */
static vlmc_status_t add_region(codegen_t *g, const vlmc_func_t *func,
                                const vlmc_dispatch_region_t *r) {
  kernel_t k;
  vlmc_dim_t work = vlmc_dim_static(1);
  int64_t scale = 1;
  size_t index = 0;
  VLMC_RETURN_IF_ERROR(write_kernel(g, func, r, &k, &work, &scale));
  VLMC_RETURN_IF_ERROR(intern_kernel(g, &k, &index));
  VLMC_RETURN_IF_ERROR(add_dispatch(g, func, r->id, index, work, scale));
  g->num_dispatches++;
  return NULL;
}

/* The table's entry for kernel k, named `symbol` (borrowing k's strings). */
static vlmc_kernel_table_kernel_t table_kernel(kernel_t *k, const char *symbol) {
  return (vlmc_kernel_table_kernel_t){.symbol = (char *)symbol, .template_name = k->template_name,
                                      .inputs = k->inputs, .num_inputs = k->num_inputs,
                                      .output = k->output, .syms = k->syms,
                                      .num_syms = k->num_syms, .cost = k->cost,
                                      .signature = k->signature};
}

/* Completes the table (the machine, the kernels) and writes it as JSON. */
static vlmc_status_t table_json(codegen_t *g, char **out) {
  vlmc_kernel_table_t *t = &g->table;
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_set_abi(t, kAbi));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_add_string_field(t, "cpu",
                                                          vlmc_cpu_lowerer_cpu(g->lowerer)));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_add_int_field(t, "vector_width",
                                                       vlmc_cpu_lowerer_vector_width(g->lowerer)));
  for (size_t i = 0; i < g->num_kernels; ++i) {
    char symbol[64];
    snprintf(symbol, sizeof symbol, "vk%zu", i);
    vlmc_kernel_table_kernel_t k = table_kernel(&g->kernels[i], symbol);
    VLMC_RETURN_IF_ERROR(vlmc_kernel_table_add_kernel(t, &k));
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
    progress(g, "compile: @%s: %zu dispatches so far, %zu distinct kernels", g->func->name,
             g->num_dispatches, g->num_kernels);
}

static bool cpu_supports(const vlmc_dispatch_region_t *region, const vlmc_op_t *anchor) {
  (void)region;
  return vlmc_cpu_template_for(anchor->kind) != NULL;
}

static void cpu_destroy(void *state) {
  codegen_t *g = state;
  if (!g) return;
  for (size_t i = 0; i < g->num_kernels; ++i) kernel_free(&g->kernels[i]);
  free(g->kernels);
  vlmc_kernel_table_deinit(&g->table);
  vlmc_cpu_lowerer_destroy(g->lowerer);
  free(g->so);
  free(g->table_json);
  free(g);
}

static vlmc_status_t cpu_create(const vlmc_target_config_t *config, const vlmc_module_t *module,
                                void **out_state) {
  codegen_t *g = calloc(1, sizeof *g);
  if (!g) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  g->o = config;
  g->module = module;
  vlmc_status_t st = vlmc_kernel_table_init(&g->table, "cpu");
  if (!st)
    st = vlmc_cpu_lowerer_create(vlmc_target_config_option(config, "cpu"), config->dump_dir,
                                 &g->lowerer);
  if (st) {
    cpu_destroy(g);
    return st;
  }
  progress(g, "compile: cpu kernels for %s (%d-wide f32 vectors)",
           vlmc_cpu_lowerer_cpu(g->lowerer), vlmc_cpu_lowerer_vector_width(g->lowerer));
  *out_state = g;
  return NULL;
}

static vlmc_status_t cpu_emit_region(void *state, const vlmc_func_t *func,
                                     const vlmc_dispatch_region_t *region) {
  codegen_t *g = state;
  if (func != g->func) {
    function_done(g);
    g->func = func;
  }
  return add_region(g, func, region);
}

static vlmc_status_t cpu_finish(void *state, vlmc_target_sections_t *out) {
  codegen_t *g = state;
  function_done(g);
  VLMC_RETURN_IF_ERROR(vlmc_cpu_lowerer_link(g->lowerer, &g->so, &g->so_len));
  VLMC_RETURN_IF_ERROR(table_json(g, &g->table_json));
  progress(g, "compile: cpu: %zu dispatches, %zu distinct kernels, %.1f KB of code%s%s",
           g->num_dispatches, g->num_kernels, (double)g->so_len / 1e3,
           g->o->dump_dir ? "; kernels dumped to " : "", g->o->dump_dir ? g->o->dump_dir : "");
  /* The shared object is page-aligned: the runtime may map it straight from the artifact. */
  out->items[0] = (vlmc_target_section_t){"kernels.cpu", g->so, g->so_len, 4096};
  out->items[1] = (vlmc_target_section_t){"kernels.cpu.json", g->table_json,
                                          strlen(g->table_json), 8};
  out->count = 2;
  return NULL;
}

static const vlmc_target_option_t cpu_options[] = {
    {"cpu", "portable (default), x86-64-v2, x86-64-v3 or native; also --cpu CPU"},
};

const vlmc_target_t vlmc_target_cpu = {
    .name = "cpu",
    .summary = "native kernels (MLIR -> LLVM -> one shared object) for vlmc-run's cpu backend",
    .options = cpu_options,
    .num_options = sizeof cpu_options / sizeof cpu_options[0],
    .precisions = "f32",
    .precision_note = "cpu kernels compute in f32 (weights stay in their bf16 / f16 storage)",
    .default_precision = "f32",
    .pipeline_tail = "fuse,memory-plan",
    .supports = cpu_supports,
    .create = cpu_create,
    .emit_region = cpu_emit_region,
    .finish = cpu_finish,
    .destroy = cpu_destroy,
};
