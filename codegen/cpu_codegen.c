/* The cpu target's driver (codegen/cpu_codegen.h): regions -> kernel text (cpu_emit.h and the
 * templates) -> deduplicated kernels -> native code (cpu_lower.h) -> table. */
#define _POSIX_C_SOURCE 200809L
#include "codegen/cpu_codegen.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/kernel_table.h"
#include "codegen/cpu_emit.h"
#include "codegen/cpu_lower.h"
#include "ir/dispatch.h"
#include "support/hash.h"
#include "support/strbuf.h"

typedef struct {
  char *text;             /* MLIR with the placeholder name */
  uint64_t hash;
  char *template_name;
  vlmc_dtype_t inputs[VLMC_IR_MAX_OPERANDS * 4];
  uint32_t num_inputs;
  vlmc_dtype_t output;
  char *syms[VLMC_CPU_MAX_SYMS];
  uint32_t num_syms;
  int64_t cost;
} kernel_t;

typedef struct {
  const vlmc_cpu_codegen_options_t *o;
  const vlmc_module_t *module;
  vlmc_cpu_lowerer_t *lowerer;
  kernel_t *kernels;
  size_t num_kernels, cap_kernels;
  vlmc_kernel_table_t table; /* the dispatches as they are made; the kernels at the end */
  size_t num_dispatches;
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

/* Every op that would be a kernel is in a region (the executor refuses the others at run time;
 * better to say so at compile time). */
static vlmc_status_t check_coverage(const vlmc_func_t *func) {
  for (const vlmc_op_t *op = func->body.first; op; op = op->next)
    if (!op->dispatch && vlmc_dispatch_may_contain(op->kind))
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "@%s: '%s' (line %u) is in no dispatch region: the cpu target "
                              "needs the fuse pass at the end of the pipeline",
                              func->name, vlmc_op_info(op->kind)->mnemonic, op->loc.line);
  return NULL;
}

static vlmc_status_t region_error(const vlmc_func_t *func, const vlmc_dispatch_region_t *r,
                                  const vlmc_op_t *anchor, vlmc_status_t st) {
  return vlmc_status_annotate(st, "@%s: dispatch %u (anchor '%s'): ", func->name, r->id,
                              vlmc_op_info(anchor->kind)->mnemonic);
}

/* Writes the region's kernel text and fills *k (not yet deduplicated). */
static vlmc_status_t write_kernel(codegen_t *g, const vlmc_func_t *func,
                                  const vlmc_dispatch_region_t *r, kernel_t *k,
                                  vlmc_dim_t *work, int64_t *work_scale) {
  vlmc_cpu_emit_t e;
  VLMC_RETURN_IF_ERROR(vlmc_cpu_emit_init(&e, g->module, func, r,
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
    for (uint32_t i = 0; i < r->num_inputs; ++i) k->inputs[i] = vlmc_cpu_emit_input_storage(&e, i);
    k->output = vlmc_dtype_info(vlmc_dispatch_output(r)->type.dtype)->is_float ? VLMC_DTYPE_F32
                                                                              : VLMC_DTYPE_I64;
    k->num_syms = e.num_syms;
    for (uint32_t i = 0; i < e.num_syms; ++i)
      k->syms[i] = strdup(vlmc_module_symbol_name(g->module, e.syms[i]));
    k->cost = e.cost > 0 ? e.cost : 1;
    *work = e.work;
    *work_scale = e.work_scale;
    if (!k->text || !k->template_name) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  vlmc_strbuf_deinit(&text);
  if (st) st = region_error(func, r, e.anchor, st);
  vlmc_cpu_emit_deinit(&e);
  return st;
}

static void kernel_free(kernel_t *k) {
  free(k->text);
  free(k->template_name);
  for (uint32_t i = 0; i < k->num_syms; ++i) free(k->syms[i]);
}

/* The index of an identical kernel already lowered, or of k after lowering it. */
static vlmc_status_t intern_kernel(codegen_t *g, kernel_t *k, size_t *out_index) {
  for (size_t i = 0; i < g->num_kernels; ++i) {
    if (g->kernels[i].hash != k->hash || strcmp(g->kernels[i].text, k->text) != 0) continue;
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

static vlmc_status_t codegen_func(codegen_t *g, const vlmc_func_t *func) {
  VLMC_RETURN_IF_ERROR(check_coverage(func));
  vlmc_dispatch_set_t set;
  VLMC_RETURN_IF_ERROR(vlmc_dispatch_regions(func, &set));
  vlmc_status_t st = NULL;
  for (uint32_t i = 0; !st && i < set.num_regions; ++i) {
    const vlmc_dispatch_region_t *r = &set.regions[i];
    kernel_t k;
    vlmc_dim_t work = vlmc_dim_static(1);
    int64_t scale = 1;
    size_t index = 0;
    st = write_kernel(g, func, r, &k, &work, &scale);
    if (!st) st = intern_kernel(g, &k, &index);
    if (!st) st = add_dispatch(g, func, r->id, index, work, scale);
    if (st) break;
    g->num_dispatches++;
  }
  vlmc_dispatch_set_free(&set);
  return st;
}

/* The table's entry for kernel k, named `symbol` (borrowing k's strings). */
static vlmc_kernel_table_kernel_t table_kernel(kernel_t *k, const char *symbol) {
  return (vlmc_kernel_table_kernel_t){.symbol = (char *)symbol, .template_name = k->template_name,
                                      .inputs = k->inputs, .num_inputs = k->num_inputs,
                                      .output = k->output, .syms = k->syms,
                                      .num_syms = k->num_syms, .cost = k->cost};
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

vlmc_status_t vlmc_cpu_codegen(const vlmc_module_t *module, const vlmc_cpu_codegen_options_t *o,
                               vlmc_cpu_codegen_result_t *out) {
  memset(out, 0, sizeof *out);
  codegen_t g;
  memset(&g, 0, sizeof g);
  g.o = o;
  g.module = module;
  vlmc_status_t st = vlmc_kernel_table_init(&g.table, "cpu");
  if (!st) st = vlmc_cpu_lowerer_create(o->cpu, o->dump_dir, &g.lowerer);
  if (!st)
    progress(&g, "compile: cpu kernels for %s (%d-wide f32 vectors)",
             vlmc_cpu_lowerer_cpu(g.lowerer), vlmc_cpu_lowerer_vector_width(g.lowerer));
  for (uint32_t f = 0; !st && f < module->num_funcs; ++f) {
    st = codegen_func(&g, module->funcs[f]);
    if (!st)
      progress(&g, "compile: @%s: %zu dispatches so far, %zu distinct kernels",
               module->funcs[f]->name, g.num_dispatches, g.num_kernels);
  }
  if (!st) st = vlmc_cpu_lowerer_link(g.lowerer, &out->so, &out->so_len);
  if (!st) {
    st = table_json(&g, &out->table_json);
    out->num_kernels = g.num_kernels;
    out->num_dispatches = g.num_dispatches;
  }
  for (size_t i = 0; i < g.num_kernels; ++i) kernel_free(&g.kernels[i]);
  free(g.kernels);
  vlmc_kernel_table_deinit(&g.table);
  vlmc_cpu_lowerer_destroy(g.lowerer);
  if (st) vlmc_cpu_codegen_result_free(out);
  return st;
}

void vlmc_cpu_codegen_result_free(vlmc_cpu_codegen_result_t *r) {
  free(r->so);
  free(r->table_json);
  memset(r, 0, sizeof *r);
}
