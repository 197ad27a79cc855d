/* vlmc inspect model.vlmc: what an artifact holds — sections with sizes and checksums, the
 * model and the options that compiled it, the functions of its program, the cpu kernels (each
 * with its template, input storage and the dispatches it serves; the artifact is refused by
 * the runtime, and reported here, when a dispatch region has no kernel), the vulkan kernels
 * (workgroup size, units per group, push-constant layout, bindings, device features), each
 * backend's check of its sections, and its parameters
 * (count, dtype mix, bytes). --verify runs the runtime's validation at open
 * (runtime/validate.h: manifest, program, parameters and kernel tables cross-checked, no
 * artifact code loaded) and checks every checksum, lazily verified sections and each inline
 * weight's included; it exits non-zero when any of it fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/dispatch.h"
#include "ir/ir.h"
#include "artifact/artifact.h"
#include "artifact/kernel_table.h"
#include "artifact/manifest.h"
#include "runtime/backend.h"
#include "runtime/params.h"
#include "runtime/validate.h"
#include "tools/cmd_inspect.h"
#include "tools/commands.h"

static void print_sections(const vlmc_artifact_t *a) {
  printf("sections (format version %u):\n", vlmc_artifact_format_version(a));
  printf("  %-16s %12s %14s  %-16s %s\n", "name", "offset", "bytes", "xxh64", "check");
  for (size_t i = 0; i < vlmc_artifact_section_count(a); ++i) {
    const vlmc_artifact_section_t *s = vlmc_artifact_section(a, i);
    printf("  %-16s %12llu %14llu  %016llx %s\n", s->name, (unsigned long long)s->offset,
           (unsigned long long)s->size, (unsigned long long)s->checksum,
           s->flags & VLMC_SECTION_LAZY_VERIFY ? "on use" : "at open");
  }
}

void inspect_param_totals(const vlmc_manifest_t *m, inspect_param_totals_t *out) {
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < m->num_params; ++i) {
    const vlmc_manifest_param_t *p = &m->params[i];
    uint64_t n = 1;
    for (uint32_t d = 0; d < p->rank; ++d) n *= (uint64_t)p->shape[d];
    out->elements += n;
    out->bytes[p->dtype] += p->nbytes;
    out->tensors[p->dtype] += 1;
  }
}

static void print_params(const vlmc_manifest_t *m) {
  inspect_param_totals_t t;
  inspect_param_totals(m, &t);
  printf("parameters: %zu tensors, %llu elements, %s\n", m->num_params,
         (unsigned long long)t.elements,
         m->params_external ? "external (run with --params CKPT_DIR)" : "inline");
  for (int d = 0; d < VLMC_DTYPE_COUNT; ++d)
    if (t.tensors[d])
      printf("  %-5s %6llu tensors %14llu bytes\n", vlmc_dtype_info((vlmc_dtype_t)d)->name,
             (unsigned long long)t.tensors[d], (unsigned long long)t.bytes[d]);
}

/* ---- weights by storage: bits per weight of each quantized group and of the rest ---- */

static const vlmc_manifest_param_t *param_of(const vlmc_manifest_t *m, const vlmc_value_t *v) {
  if (!v->def || v->def->kind != VLMC_OP_PARAM) return NULL;
  return vlmc_manifest_find_param(m, vlmc_op_attr(v->def, "name")->v.symbol);
}

/* Adds dequantize `op`'s tensor to its group (once per packed parameter: `seen`). */
static void count_quantized(const vlmc_manifest_t *m, const vlmc_op_t *op, bool *seen,
                            inspect_weight_storage_t *ws) {
  const vlmc_manifest_param_t *parts[3];
  for (int i = 0; i < 3; ++i)
    if (!(parts[i] = param_of(m, op->operands[i]))) return;
  size_t index = (size_t)(parts[0] - m->params);
  if (seen[index]) return;
  seen[index] = seen[parts[1] - m->params] = seen[parts[2] - m->params] = true;
  inspect_weight_group_t key = {vlmc_op_attr_int(op, "bits"), vlmc_op_attr_int(op, "group"),
                                parts[1]->dtype, 0, 0, 0};
  size_t g = 0;
  while (g < ws->num_groups && !(ws->groups[g].bits == key.bits &&
                                 ws->groups[g].group == key.group &&
                                 ws->groups[g].scale_dtype == key.scale_dtype))
    ++g;
  if (g == ws->num_groups) {
    if (g == INSPECT_MAX_WEIGHT_GROUPS) return;
    ws->groups[ws->num_groups++] = key;
  }
  ws->groups[g].tensors += 1;
  ws->groups[g].weights += (uint64_t)parts[0]->shape[0] * (uint64_t)vlmc_op_attr_int(op, "cols");
  ws->groups[g].bytes += parts[0]->nbytes + parts[1]->nbytes + parts[2]->nbytes;
}

bool inspect_weight_storage(const vlmc_module_t *module, const vlmc_manifest_t *m,
                            inspect_weight_storage_t *ws) {
  memset(ws, 0, sizeof *ws);
  bool *seen = calloc(m->num_params + 1, sizeof *seen);
  if (!seen) return false;
  for (uint32_t f = 0; f < module->num_funcs; ++f)
    for (const vlmc_op_t *op = module->funcs[f]->body.first; op; op = op->next)
      if (op->kind == VLMC_OP_DEQUANTIZE) count_quantized(m, op, seen, ws);
  for (size_t i = 0; i < m->num_params; ++i) {
    const vlmc_manifest_param_t *p = &m->params[i];
    if (seen[i] || !vlmc_dtype_info(p->dtype)->is_float) continue;
    uint64_t n = 1;
    for (uint32_t d = 0; d < p->rank; ++d) n *= (uint64_t)p->shape[d];
    ws->plain_weights[p->dtype] += n;
    ws->plain_bytes[p->dtype] += p->nbytes;
  }
  free(seen);
  return true;
}

static void print_weight_storage(const vlmc_module_t *module, const vlmc_manifest_t *m) {
  inspect_weight_storage_t ws;
  if (!inspect_weight_storage(module, m, &ws)) return;
  printf("weights by storage:\n");
  for (size_t g = 0; g < ws.num_groups; ++g) {
    const inspect_weight_group_t *wg = &ws.groups[g];
    printf("  q%lld g%lld (%s scale + bias) %5llu tensors %14llu weights %6.2f bits/weight "
           "%14llu bytes\n", (long long)wg->bits, (long long)wg->group,
           vlmc_dtype_info(wg->scale_dtype)->name, (unsigned long long)wg->tensors,
           (unsigned long long)wg->weights,
           wg->weights ? 8.0 * (double)wg->bytes / (double)wg->weights : 0.0,
           (unsigned long long)wg->bytes);
  }
  for (int d = 0; d < VLMC_DTYPE_COUNT; ++d)
    if (ws.plain_weights[d])
      printf("  %-26s %14llu weights %6.2f bits/weight %14llu bytes\n",
             vlmc_dtype_info((vlmc_dtype_t)d)->name, (unsigned long long)ws.plain_weights[d],
             8.0 * (double)ws.plain_bytes[d] / (double)ws.plain_weights[d],
             (unsigned long long)ws.plain_bytes[d]);
}

vlmc_status_t inspect_parse_program(const vlmc_artifact_t *a, bool verify,
                                    vlmc_module_t **out) {
  *out = NULL;
  const vlmc_artifact_section_t *s = vlmc_artifact_find(a, "program");
  if (!s) return vlmc_status_make(VLMC_NOT_FOUND, "no program section");
  vlmc_parse_options_t po = {.filename = "program", .first_line = 1};
  vlmc_status_t st = vlmc_module_parse((const char *)s->data, (size_t)s->size, &po, out);
  if (!st && verify) st = vlmc_module_verify(*out);
  if (st) {
    vlmc_module_destroy(*out);
    *out = NULL;
  }
  return st;
}

static void print_program(const vlmc_artifact_t *a, const vlmc_manifest_t *m) {
  vlmc_module_t *module = NULL;
  vlmc_status_t status = inspect_parse_program(a, false, &module);
  if (status) {
    printf("program: %s\n", vlmc_artifact_find(a, "program") ? vlmc_status_message(status)
                                                              : "missing");
    vlmc_status_free(status);
    return;
  }
  printf("program: %u functions\n", module->num_funcs);
  for (uint32_t f = 0; f < module->num_funcs; ++f) {
    const vlmc_func_t *func = module->funcs[f];
    uint32_t ops = 0, by_kind[VLMC_OP_COUNT] = {0};
    for (const vlmc_op_t *op = func->body.first; op; op = op->next) {
      ++ops;
      ++by_kind[op->kind];
    }
    printf("  @%-14s %u args, %u results, %u ops (", func->name, func->num_args,
           func->num_results, ops);
    const char *sep = "";
    for (int k = 0; k < VLMC_OP_COUNT; ++k) {
      if (!by_kind[k]) continue;
      printf("%s%s %u", sep, vlmc_op_info((vlmc_op_kind_t)k)->mnemonic, by_kind[k]);
      sep = ", ";
    }
    printf(")\n");
  }
  print_weight_storage(module, m);
  vlmc_module_destroy(module);
}

/* Per function: ops, dispatch regions and host steps (ops a backend runs on the host). */
static void print_dispatch_summary(const vlmc_module_t *module) {
  for (uint32_t f = 0; f < module->num_funcs; ++f) {
    const vlmc_func_t *func = module->funcs[f];
    vlmc_dispatch_set_t set;
    vlmc_status_t st = vlmc_dispatch_regions(func, &set);
    if (st) {
      printf("  @%s: %s\n", func->name, vlmc_status_message(st));
      vlmc_status_free(st);
      continue;
    }
    uint32_t members = 0, outside = 0;
    for (const vlmc_op_t *op = func->body.first; op; op = op->next) {
      if (op->dispatch) ++members;
      else if (vlmc_dispatch_may_contain(op->kind)) ++outside;
    }
    printf("  @%-14s %u dispatches (%u ops fused into them)", func->name, set.num_regions,
           members);
    if (outside) printf(", %u compute ops in no dispatch (no cpu kernel)", outside);
    printf("\n");
    vlmc_dispatch_set_free(&set);
  }
}

static void print_kernel(const vlmc_kernel_table_t *t, size_t index, uint32_t uses) {
  const vlmc_kernel_table_kernel_t *k = &t->kernels[index];
  printf("    %-6s %-16s %3u dispatch%s  inputs", k->symbol, k->template_name, uses,
         uses == 1 ? "  " : "es");
  for (uint32_t i = 0; i < k->num_inputs; ++i) printf(" %s", vlmc_dtype_info(k->inputs[i])->name);
  printf("\n");
}

/* Each kernel with the number of dispatches it serves. */
static void print_kernel_table(const char *path, const vlmc_artifact_section_t *section) {
  vlmc_kernel_table_t t;
  vlmc_status_t st = vlmc_kernel_table_parse(path, "cpu", (const char *)section->data,
                                             (size_t)section->size, &t);
  uint32_t *uses = st ? NULL : calloc(t.num_kernels + 1, sizeof *uses);
  if (st || !uses) {
    printf("  (the kernel table does not parse%s%s)\n", st ? ": " : "",
           st ? vlmc_status_message(st) : "");
    vlmc_status_free(st);
    vlmc_kernel_table_deinit(&t);
    return;
  }
  for (size_t i = 0; i < t.num_dispatches; ++i) uses[t.dispatches[i].kernel]++;
  const vlmc_kernel_table_field_t *cpu = vlmc_kernel_table_field(&t, "cpu");
  printf("  built for %s; %zu kernels serve %zu dispatches:\n",
         cpu && cpu->string ? cpu->string : "?", t.num_kernels, t.num_dispatches);
  for (size_t i = 0; i < t.num_kernels; ++i) print_kernel(&t, i, uses[i]);
  free(uses);
  vlmc_kernel_table_deinit(&t);
}

const void *inspect_find_section(void *ctx, const char *name, size_t *out_size) {
  const vlmc_artifact_section_t *sec = vlmc_artifact_find(ctx, name);
  *out_size = sec ? (size_t)sec->size : 0;
  return sec ? sec->data : NULL;
}

void inspect_backend_checks(const vlmc_artifact_t *a, const char *path, const vlmc_module_t *module,
                            inspect_check_report_fn report, void *ctx) {
  vlmc_backend_open_params_t bp = {.source = path, .module = module,
                                   .section = inspect_find_section, .section_ctx = (void *)a,
                                   .threads = 1};
  for (size_t i = 0; i < vlmc_backend_count(); ++i) {
    const vlmc_backend_iface_t *b = vlmc_backend_at(i);
    if (!b->check || !vlmc_backend_has_sections(b, inspect_find_section, (void *)a)) continue;
    vlmc_status_t st = module ? b->check(&bp) : vlmc_status_make(VLMC_NOT_FOUND, "no program");
    report(ctx, b->name, st);
    vlmc_status_free(st);
  }
}

static void print_backend_check(void *ctx, const char *backend, vlmc_status_t st) {
  (void)ctx;
  if (st) printf("  backend %s: NOT LOADABLE: %s\n", backend, vlmc_status_message(st));
  else printf("  backend %s: table checked against the program; every dispatch has a kernel\n",
              backend);
}

/* The kernels section as the runtime would load it: every dispatch must have a kernel. */
static void print_kernels(const vlmc_artifact_t *a, const char *path) {
  const vlmc_artifact_section_t *so = vlmc_artifact_find(a, "kernels.cpu");
  const vlmc_artifact_section_t *table = vlmc_artifact_find(a, "kernels.cpu.json");
  if (!so || !table) {
    printf("cpu kernels: none (compiled without --target cpu)\n");
    return;
  }
  vlmc_module_t *module = NULL;
  vlmc_status_t st = inspect_parse_program(a, true, &module);
  printf("cpu kernels: %.1f KB shared object\n", (double)so->size / 1e3);
  if (!st) print_dispatch_summary(module);
  print_kernel_table(path, table);
  if (st) printf("  NOT LOADABLE: %s\n", vlmc_status_message(st));
  vlmc_status_free(st);
  vlmc_module_destroy(module);
}

/* A kernel target field's integer (-1 when absent) or string ("" when absent). */
static int64_t int_field(const vlmc_kernel_table_kernel_t *k, const char *key) {
  const vlmc_kernel_table_field_t *f = vlmc_kernel_table_kernel_field(k, key);
  return f && !f->string ? f->integer : -1;
}

static const char *string_field(const vlmc_kernel_table_kernel_t *k, const char *key) {
  const vlmc_kernel_table_field_t *f = vlmc_kernel_table_kernel_field(k, key);
  return f && f->string ? f->string : "";
}

/* One vulkan kernel: its grid shape, push constants (docs/vulkan.md: word 0 the work units,
 * then the symbols), bindings (the inputs' storage, the output last) and device features. */
/* A split kernel's combine workgroups per unit (absent in artifacts before it existed: 1). */
static int64_t combine_groups_of(const vlmc_kernel_table_kernel_t *k) {
  return vlmc_kernel_table_kernel_field(k, "combine_groups") ? int_field(k, "combine_groups") : 1;
}

static void print_vulkan_kernel(const vlmc_kernel_table_t *t, const vlmc_kernel_table_kernel_t *k,
                                uint32_t uses) {
  char serves[160];
  if (k->is_variant && k->variant_of < t->num_kernels)
    snprintf(serves, sizeof serves, "variant of %s for %s devices;",
             t->kernels[k->variant_of].symbol, k->for_devices);
  else
    snprintf(serves, sizeof serves, "%3u dispatch%s ", uses, uses == 1 ? "  " : "es");
  printf("    %-6s %-16s %s workgroup %lldx%lldx%lld, %lld unit%s/group, "
         "%lld B shared, %lld B SPIR-V\n",
         k->symbol, k->template_name, serves,
         (long long)int_field(k, "workgroup_x"), (long long)int_field(k, "workgroup_y"),
         (long long)int_field(k, "workgroup_z"), (long long)int_field(k, "units_per_group"),
         int_field(k, "units_per_group") == 1 ? "" : "s", (long long)int_field(k, "shared_bytes"),
         (long long)int_field(k, "spirv_size"));
  printf("           push constants (%lld words): [0] work", (long long)int_field(k, "push_words"));
  for (uint32_t i = 0; i < k->num_syms; ++i) printf(", [%u] %s", i + 1, k->syms[i]);
  printf("\n           bindings:");
  for (uint32_t i = 0; i < k->num_inputs; ++i)
    printf(" %u: %s,", i, vlmc_dtype_info(k->inputs[i])->name);
  printf(" %u: %s (output)\n", k->num_inputs, vlmc_dtype_info(k->output)->name);
  const char *features = string_field(k, "features");
  printf("           features: %s\n", features[0] ? features : "none");
  if (!vlmc_kernel_table_kernel_field(k, "split")) return;
  int64_t combine_groups = combine_groups_of(k);
  printf("           split: %lld parts per unit, %lld floats of scratch each (binding %u); "
         "then %s: %lld workgroup%s of %lldx1x1 per unit, %lld B shared, %lld B SPIR-V\n",
         (long long)int_field(k, "split"), (long long)int_field(k, "scratch_floats"),
         k->num_inputs + 1, string_field(k, "combine_entry"), (long long)combine_groups,
         combine_groups == 1 ? "" : "s", (long long)int_field(k, "combine_workgroup_x"),
         (long long)int_field(k, "combine_shared_bytes"),
         (long long)int_field(k, "combine_spirv_size"));
}

vlmc_status_t inspect_kernel_table(const vlmc_artifact_t *a, const char *path, const char *target,
                                   const vlmc_artifact_section_t **out_code,
                                   vlmc_kernel_table_t *t, uint32_t **out_uses) {
  char code_name[64], table_name[64];
  snprintf(code_name, sizeof code_name, "kernels.%s", target);
  snprintf(table_name, sizeof table_name, "kernels.%s.json", target);
  *out_uses = NULL;
  *out_code = vlmc_artifact_find(a, code_name);
  const vlmc_artifact_section_t *table = vlmc_artifact_find(a, table_name);
  if (!*out_code || !table)
    return vlmc_status_make(VLMC_NOT_FOUND, "none (compiled without --target %s)", target);
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_parse(path, target, (const char *)table->data,
                                               (size_t)table->size, t));
  *out_uses = calloc(t->num_kernels + 1, sizeof **out_uses);
  if (!*out_uses) {
    vlmc_kernel_table_deinit(t);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t i = 0; i < t->num_dispatches; ++i)
    if (t->dispatches[i].kernel < t->num_kernels) (*out_uses)[t->dispatches[i].kernel]++;
  return NULL;
}

/* inspect_kernel_table, printing the line that says why there is none. */
static bool load_kernel_table(const vlmc_artifact_t *a, const char *path, const char *target,
                              const vlmc_artifact_section_t **out_code, vlmc_kernel_table_t *t,
                              uint32_t **out_uses) {
  vlmc_status_t st = inspect_kernel_table(a, path, target, out_code, t, out_uses);
  if (!st) return true;
  if (vlmc_status_code(st) == VLMC_NOT_FOUND)
    printf("%s kernels: %s\n", target, vlmc_status_message(st));
  else
    printf("%s kernels: the kernel table does not parse: %s\n", target, vlmc_status_message(st));
  vlmc_status_free(st);
  return false;
}

/* The vulkan kernels (sections kernels.vulkan and kernels.vulkan.json). */
static void print_vulkan_kernels(const vlmc_artifact_t *a, const char *path) {
  const vlmc_artifact_section_t *spirv = NULL;
  vlmc_kernel_table_t t;
  uint32_t *uses = NULL;
  if (!load_kernel_table(a, path, "vulkan", &spirv, &t, &uses)) return;
  const vlmc_kernel_table_field_t *version = vlmc_kernel_table_field(&t, "spirv_version");
  size_t variants = 0;
  for (size_t i = 0; i < t.num_kernels; ++i) variants += t.kernels[i].is_variant;
  printf("vulkan kernels: %.1f KB of SPIR-V %s (abi %s); %zu kernels serve %zu dispatches, "
         "%zu variants for other devices:\n",
         (double)spirv->size / 1e3, version && version->string ? version->string : "?",
         t.abi ? t.abi : "?", t.num_kernels - variants, t.num_dispatches, variants);
  for (size_t i = 0; i < t.num_kernels; ++i) print_vulkan_kernel(&t, &t.kernels[i], uses[i]);
  free(uses);
  vlmc_kernel_table_deinit(&t);
}

/* One metal kernel: its threadgroup, threadgroup memory and buffers ([[buffer(i)]]: the
 * inputs, the output, then the push-constant words in constant memory). */
static void print_metal_kernel(const vlmc_kernel_table_kernel_t *k, uint32_t uses) {
  printf("    %-6s %-16s %3u dispatch%s threadgroup %lldx%lldx%lld, %lld unit%s/group, "
         "%lld B threadgroup memory, %lld B MSL\n",
         k->symbol, k->template_name, uses, uses == 1 ? "  " : "es",
         (long long)int_field(k, "threadgroup_x"), (long long)int_field(k, "threadgroup_y"),
         (long long)int_field(k, "threadgroup_z"), (long long)int_field(k, "units_per_group"),
         int_field(k, "units_per_group") == 1 ? "" : "s",
         (long long)int_field(k, "threadgroup_bytes"), (long long)int_field(k, "msl_size"));
  printf("           buffers:");
  for (uint32_t i = 0; i < k->num_inputs; ++i)
    printf(" [[buffer(%u)]] %s,", i, vlmc_dtype_info(k->inputs[i])->name);
  printf(" [[buffer(%u)]] %s (output)", k->num_inputs, vlmc_dtype_info(k->output)->name);
  uint32_t next = k->num_inputs + 1;
  if (vlmc_kernel_table_kernel_field(k, "split")) printf(", [[buffer(%u)]] f32 scratch", next++);
  printf(", [[buffer(%u)]] constant (%lld words): work", next,
         (long long)int_field(k, "push_words"));
  for (uint32_t i = 0; i < k->num_syms; ++i) printf(", %s", k->syms[i]);
  printf("\n");
  if (!vlmc_kernel_table_kernel_field(k, "split")) return;
  int64_t combine_groups = combine_groups_of(k);
  printf("           split: %lld parts per unit, %lld floats of scratch each; then %s: "
         "%lld threadgroup%s of %lldx1x1 per unit, %lld B threadgroup memory\n",
         (long long)int_field(k, "split"), (long long)int_field(k, "scratch_floats"),
         string_field(k, "combine_entry"), (long long)combine_groups, combine_groups == 1 ? "" : "s",
         (long long)int_field(k, "combine_threadgroup_x"),
         (long long)int_field(k, "combine_threadgroup_bytes"));
}

/* The metal kernels (sections kernels.metal and kernels.metal.json), labelled for what they
 * are: generated, executed on Linux only in emulation. */
static void print_metal_kernels(const vlmc_artifact_t *a, const char *path) {
  const vlmc_artifact_section_t *msl = NULL;
  vlmc_kernel_table_t t;
  uint32_t *uses = NULL;
  if (!load_kernel_table(a, path, "metal", &msl, &t, &uses)) return;
  const vlmc_kernel_table_field_t *version = vlmc_kernel_table_field(&t, "msl_version");
  printf("metal kernels: %.1f KB of MSL %s; %zu kernels serve %zu dispatches. Metal kernels are "
         "generated, and executed on Linux in emulation; not yet run on Apple hardware:\n",
         (double)msl->size / 1e3, version && version->string ? version->string : "?",
         t.num_kernels, t.num_dispatches);
  for (size_t i = 0; i < t.num_kernels; ++i) print_metal_kernel(&t.kernels[i], uses[i]);
  free(uses);
  vlmc_kernel_table_deinit(&t);
}

/* Every backend with sections here checks them against the (verified) program. */
static void print_all_backend_checks(const vlmc_artifact_t *a, const char *path) {
  vlmc_module_t *module = NULL;
  vlmc_status_t st = inspect_parse_program(a, true, &module);
  if (!st) inspect_backend_checks(a, path, module, print_backend_check, NULL);
  vlmc_status_free(st);
  vlmc_module_destroy(module);
}

/* Each inline weight's own checksum, as the runtime checks it before first use. */
static vlmc_status_t verify_inline_params(const vlmc_artifact_t *a, const vlmc_manifest_t *m) {
  vlmc_params_t *params = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_params_open(a, m, NULL, &params));
  vlmc_status_t st = vlmc_params_verify_all(params);
  vlmc_params_destroy(params);
  return st;
}

vlmc_status_t inspect_verify(const vlmc_artifact_t *a, FILE *report) {
  vlmc_manifest_t m;
  vlmc_module_t *module = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_artifact_validate(a, &m, &module));
  if (report) fprintf(report, "verify: manifest, program, parameters and kernel tables agree\n");
  vlmc_status_t st = NULL;
  for (size_t i = 0; !st && i < vlmc_artifact_section_count(a); ++i)
    st = vlmc_artifact_section_verify(a, vlmc_artifact_section(a, i));
  if (!st && !m.params_external && m.num_params) st = verify_inline_params(a, &m);
  if (!st && report)
    fprintf(report, "verify: every section matches its checksum%s\n",
            m.params_external ? "" : ", and every inline parameter its own");
  vlmc_module_destroy(module);
  vlmc_manifest_deinit(&m);
  return st;
}

static int inspect(const char *path, bool verify, bool json) {
  vlmc_artifact_t *a = NULL;
  vlmc_status_t status = vlmc_artifact_open(path, &a);
  if (status) return vlmc_status_report(status);
  const vlmc_artifact_section_t *ms = NULL;
  vlmc_manifest_t m;
  vlmc_manifest_init(&m);
  status = vlmc_artifact_require(a, "manifest", "vlmc inspect", &ms);
  if (!status) status = vlmc_manifest_from_json(path, (const char *)ms->data, (size_t)ms->size, &m);
  if (!status && json) {
    status = inspect_json(a, path, &m, verify);
  } else if (!status) {
    printf("artifact: %s\n", path);
    printf("model: %s, vocabulary %lld, produced by %s\n", m.model_family,
           (long long)m.vocab_size, m.producer);
    if (m.max_positions > 0)
      printf("context: %lld positions (max_position_embeddings; vlmc-run's default "
             "--max-context)\n", (long long)m.max_positions);
    if (m.generation.present)
      printf("generation: %s, temperature %g, top_k %lld, top_p %g, repetition_penalty %g "
             "(generation_config.json; vlmc-run's defaults, each flag overrides its field)\n",
             m.generation.do_sample ? "do_sample" : "greedy (do_sample false)",
             m.generation.temperature, (long long)m.generation.top_k, m.generation.top_p,
             m.generation.repetition_penalty);
    else
      printf("generation: greedy (the checkpoint set no sampling field)\n");
    printf("compiled with: %s\n", m.compile_options[0] ? m.compile_options : "(defaults)");
    printf("targets: %s\n", m.targets);
    if (m.precision.compute) /* absent in artifacts compiled before it was recorded */
      printf("precision: %s; %lld ops upcast to f32 by rule, %lld by calibration%s%s%s\n",
             m.precision.compute, (long long)m.precision.upcasts_rule,
             (long long)m.precision.upcasts_calibrated, m.precision.calibrated ? " (" : "",
             m.precision.calibrated ? m.precision.calibrated_modules : " (not calibrated)",
             m.precision.calibrated ? ")" : "");
    if (m.quantization.source)
      printf("quantization: %lld tensors at %lld bits in groups of %lld (%s)\n",
             (long long)m.quantization.tensors, (long long)m.quantization.bits,
             (long long)m.quantization.group,
             strcmp(m.quantization.source, "vlmc") ? "the checkpoint's own" : "vlmc --quantize");
    printf("tokenizer: %s; chat template: %s\n",
           vlmc_artifact_find(a, "tokenizer") ? "yes" : "none (token ids only)",
           vlmc_artifact_find(a, "chat_template") ? m.chat_template_source : "none");
    printf("images: min_pixels %lld, max_pixels %lld, %s resize\n",
           (long long)m.preprocess.min_pixels, (long long)m.preprocess.max_pixels,
           m.preprocess.resample == VLMC_RESAMPLE_PIL ? "pil" : "torchvision");
    print_sections(a);
    print_program(a, &m);
    print_kernels(a, path);
    print_vulkan_kernels(a, path);
    print_metal_kernels(a, path);
    print_all_backend_checks(a, path);
    print_params(&m);
  }
  if (!status && verify && !json) status = inspect_verify(a, stdout);
  vlmc_manifest_deinit(&m);
  vlmc_artifact_destroy(a);
  return vlmc_status_report(status);
}

int vlmc_cmd_inspect(int argc, char **argv) {
  const char *path = NULL;
  bool verify = false, json = false;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: vlmc inspect model.vlmc [--verify] [--json]\n"
             "  Prints the sections, model, compile options, program functions, kernels of\n"
             "  each target, each backend's check and the parameter summary.\n"
             "  --verify   also run the validation vlmc-run does at open (manifest, program,\n"
             "             parameters and kernel tables cross-checked) and check every\n"
             "             checksum, parameters included; exit 1 if any check fails\n"
             "  --json     the same as one JSON document on stdout (docs/cli.md lists its\n"
             "             keys)\n");
      return 0;
    }
    if (!strcmp(argv[i], "--verify")) verify = true;
    else if (!strcmp(argv[i], "--json")) json = true;
    else if (!path && argv[i][0] != '-') path = argv[i];
    else {
      fprintf(stderr, "error: vlmc inspect: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (!path) {
    fprintf(stderr, "usage: vlmc inspect model.vlmc [--verify] [--json]\n");
    return 2;
  }
  return inspect(path, verify, json);
}
