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
#include "codegen/kernel_set.h"
#include "codegen/target.h"
#include "codegen/targets/cpu/emit.h"
#include "codegen/targets/cpu/lower.h"
#include "ir/dispatch.h"
#include "support/strbuf.h"

typedef struct {
  const vlmc_target_config_t *o;
  const vlmc_module_t *module;
  vlmc_cpu_lowerer_t *lowerer;
  vlmc_kernel_set_t set;   /* the kernels and the dispatch table */
  const vlmc_func_t *func; /* the function whose regions come in now (for progress) */
  unsigned char *so;       /* the sections, once finished */
  size_t so_len;
  char *table_json;
} codegen_t;

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

/* Writes the region's kernel text and fills *k (not yet deduplicated). */
static vlmc_status_t write_kernel(codegen_t *g, const vlmc_func_t *func,
                                  const vlmc_dispatch_region_t *r, vlmc_kernel_set_kernel_t *k,
                                  vlmc_dim_t *work, int64_t *work_scale) {
  vlmc_kernel_emit_t e;
  VLMC_RETURN_IF_ERROR(vlmc_kernel_emit_init(&e, g->module, func, r,
                                             vlmc_cpu_lowerer_vector_width(g->lowerer)));
  e.target = (void *)vlmc_cpu_lowerer_machine(g->lowerer);
  vlmc_cpu_template_fn fn = vlmc_cpu_template_for(e.anchor->kind);
  vlmc_status_t st = NULL;
  if (!fn)
    st = vlmc_status_make(VLMC_UNSUPPORTED, "the cpu target has no kernel template for '%s'",
                          vlmc_op_info(e.anchor->kind)->mnemonic);
  if (!st) st = fn(&e);
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  if (!st) st = vlmc_cpu_emit_finish(&e, VLMC_KERNEL_SET_PLACEHOLDER, &text);
  if (!st) st = vlmc_kernel_set_describe(&g->set, &e, r, &text, k, work, work_scale);
  vlmc_strbuf_deinit(&text);
  if (st) st = vlmc_kernel_set_region_error(func, r, e.anchor, st);
  vlmc_kernel_emit_deinit(&e);
  return st;
}

/* Lowers kernel `index` (new in the set) as vkN: its function becomes @vkN_body. */
static vlmc_status_t lower_kernel(codegen_t *g, size_t index) {
  char name[64];
  snprintf(name, sizeof name, "vk%zu", index);
  char *text = vlmc_kernel_set_named_text(&g->set, index, name, "_body");
  if (!text) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_status_t st = vlmc_cpu_lowerer_add(g->lowerer, name, text);
  free(text);
  return st;
}

/* The region's kernel (shared with an earlier identical one) and its table entry. */
static vlmc_status_t add_region(codegen_t *g, const vlmc_func_t *func,
                                const vlmc_dispatch_region_t *r) {
  vlmc_kernel_set_kernel_t k;
  vlmc_dim_t work = vlmc_dim_static(1);
  int64_t scale = 1;
  size_t index = 0;
  bool is_new = false;
  VLMC_RETURN_IF_ERROR(write_kernel(g, func, r, &k, &work, &scale));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_set_intern(&g->set, &k, &index, &is_new));
  if (is_new) VLMC_RETURN_IF_ERROR(lower_kernel(g, index));
  return vlmc_kernel_set_add_dispatch(&g->set, func, r->id, index, work, scale);
}

/* Completes the table (the machine, the kernels) and writes it as JSON. */
static vlmc_status_t table_json(codegen_t *g, char **out) {
  vlmc_kernel_table_t *t = &g->set.table;
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_set_abi(t, kAbi));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_add_string_field(t, "cpu",
                                                          vlmc_cpu_lowerer_cpu(g->lowerer)));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_add_int_field(t, "vector_width",
                                                       vlmc_cpu_lowerer_vector_width(g->lowerer)));
  for (size_t i = 0; i < g->set.num_kernels; ++i) {
    char symbol[64];
    vlmc_kernel_table_kernel_t k = vlmc_kernel_set_table_kernel(&g->set, i, symbol);
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
             g->set.num_dispatches, g->set.num_kernels);
}

static bool cpu_supports(const vlmc_dispatch_region_t *region, const vlmc_op_t *anchor) {
  (void)region;
  return vlmc_cpu_template_for(anchor->kind) != NULL;
}

static void cpu_destroy(void *state) {
  codegen_t *g = state;
  if (!g) return;
  vlmc_kernel_set_deinit(&g->set);
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
  vlmc_status_t st = vlmc_kernel_set_init(&g->set, module, "cpu");
  if (!st)
    st = vlmc_cpu_lowerer_create(vlmc_target_config_option(config, "cpu"), config->dump_dir,
                                 &g->lowerer);
  const char *lanes = vlmc_target_config_option(config, "vector-width");
  if (!st && lanes) st = vlmc_cpu_lowerer_set_vector_width(g->lowerer, lanes);
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
           g->set.num_dispatches, g->set.num_kernels, (double)g->so_len / 1e3,
           g->o->dump_dir ? "; kernels dumped to " : "", g->o->dump_dir ? g->o->dump_dir : "");
  /* The shared object is page-aligned: the runtime may map it straight from the artifact. */
  out->items[0] = (vlmc_target_section_t){"kernels.cpu", g->so, g->so_len, 4096};
  out->items[1] = (vlmc_target_section_t){"kernels.cpu.json", g->table_json,
                                          strlen(g->table_json), 8};
  out->count = 2;
  return NULL;
}

static const vlmc_target_option_t cpu_options[] = {
    {"cpu", "portable (default), x86-64-v2, x86-64-v3, x86-64-v4 or native; also --cpu CPU"},
    {"vector-width", "4, 8 or 16: f32 lanes the kernels are written for (default: the widest "
                     "the cpu has; wider, LLVM splits each vector: for testing the wide "
                     "kernels on a CPU without them)"},
};

const vlmc_target_t vlmc_target_cpu = {
    .name = "cpu",
    .summary = "native kernels (MLIR -> LLVM -> one shared object) for vlmc-run's cpu backend",
    .options = cpu_options,
    .num_options = sizeof cpu_options / sizeof cpu_options[0],
    .precisions = "f32,bf16-matmul",
    .precision_note = "cpu kernels compute in f32 (weights stay in their bf16 / f16 storage), "
                      "or with bf16-matmul in f32 with linears on bf16-rounded inputs (a bf16 "
                      "dot product where the CPU has AVX512_BF16)",
    .default_precision = "f32",
    .pipeline_tail = "fuse,memory-plan",
    .supports = cpu_supports,
    .create = cpu_create,
    .emit_region = cpu_emit_region,
    .finish = cpu_finish,
    .destroy = cpu_destroy,
};
