/* vlmc inspect --json: the report of cmd_inspect.c as one JSON document, for scripts. The
 * keys are listed in docs/cli.md; integers are JSON numbers (exact below 2^53, which every
 * size and count here is), checksums 16 hex digits as strings; a kernel's target fields
 * (workgroup size, push words, ...) are copied as the kernel table holds them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "ir/dispatch.h"
#include "runtime/backend.h"
#include "tools/cmd_inspect.h"

static void add_hex64(cJSON *obj, const char *key, uint64_t v) {
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)v);
  cJSON_AddStringToObject(obj, key, hex);
}

static void add_error(cJSON *obj, vlmc_status_t st) {
  cJSON_AddStringToObject(obj, "error", vlmc_status_message(st));
}

/* "a,b" -> ["a", "b"] */
static cJSON *csv_array(const char *csv) {
  cJSON *arr = cJSON_CreateArray();
  for (const char *p = csv ? csv : ""; *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char item[128];
    snprintf(item, sizeof item, "%.*s", (int)(len < sizeof item ? len : sizeof item - 1), p);
    if (item[0]) cJSON_AddItemToArray(arr, cJSON_CreateString(item));
    p += len + (end ? 1 : 0);
  }
  return arr;
}

static void add_model(cJSON *root, const vlmc_artifact_t *a, const vlmc_manifest_t *m) {
  cJSON *model = cJSON_AddObjectToObject(root, "model");
  cJSON_AddStringToObject(model, "family", m->model_family);
  cJSON_AddNumberToObject(model, "vocab_size", (double)m->vocab_size);
  cJSON_AddStringToObject(model, "producer", m->producer);
  if (m->max_positions > 0)
    cJSON_AddNumberToObject(model, "max_positions", (double)m->max_positions);
  else
    cJSON_AddNullToObject(model, "max_positions");
  cJSON *eos = cJSON_AddArrayToObject(model, "eos_token_ids");
  for (int i = 0; i < m->eos_count; ++i)
    cJSON_AddItemToArray(eos, cJSON_CreateNumber((double)m->eos_token_ids[i]));
  cJSON_AddBoolToObject(model, "tokenizer", vlmc_artifact_find(a, "tokenizer") != NULL);
  if (vlmc_artifact_find(a, "chat_template"))
    cJSON_AddStringToObject(model, "chat_template", m->chat_template_source);
  else cJSON_AddNullToObject(model, "chat_template");

  cJSON *gen = cJSON_AddObjectToObject(root, "generation");
  cJSON_AddBoolToObject(gen, "from_checkpoint", m->generation.present);
  cJSON_AddBoolToObject(gen, "do_sample", m->generation.present && m->generation.do_sample);
  if (m->generation.present) {
    cJSON_AddNumberToObject(gen, "temperature", m->generation.temperature);
    cJSON_AddNumberToObject(gen, "top_k", (double)m->generation.top_k);
    cJSON_AddNumberToObject(gen, "top_p", m->generation.top_p);
    cJSON_AddNumberToObject(gen, "repetition_penalty", m->generation.repetition_penalty);
  }

  cJSON_AddStringToObject(root, "compile_options", m->compile_options ? m->compile_options : "");
  cJSON_AddItemToObject(root, "targets", csv_array(m->targets));
  if (m->precision.compute) {
    cJSON *p = cJSON_AddObjectToObject(root, "precision");
    cJSON_AddStringToObject(p, "compute", m->precision.compute);
    cJSON_AddNumberToObject(p, "upcasts_rule", (double)m->precision.upcasts_rule);
    cJSON_AddNumberToObject(p, "upcasts_calibrated", (double)m->precision.upcasts_calibrated);
    cJSON_AddBoolToObject(p, "calibrated", m->precision.calibrated);
    cJSON_AddItemToObject(p, "calibrated_modules", csv_array(m->precision.calibrated_modules));
  } else {
    cJSON_AddNullToObject(root, "precision");
  }
  if (m->quantization.source) {
    cJSON *q = cJSON_AddObjectToObject(root, "quantization");
    cJSON_AddStringToObject(q, "source", m->quantization.source);
    cJSON_AddNumberToObject(q, "bits", (double)m->quantization.bits);
    cJSON_AddNumberToObject(q, "group", (double)m->quantization.group);
    cJSON_AddNumberToObject(q, "tensors", (double)m->quantization.tensors);
  } else {
    cJSON_AddNullToObject(root, "quantization");
  }
  cJSON *img = cJSON_AddObjectToObject(root, "images");
  cJSON_AddNumberToObject(img, "min_pixels", (double)m->preprocess.min_pixels);
  cJSON_AddNumberToObject(img, "max_pixels", (double)m->preprocess.max_pixels);
  cJSON_AddStringToObject(img, "resize",
                          m->preprocess.resample == VLMC_RESAMPLE_PIL ? "pil" : "torchvision");
}

static void add_sections(cJSON *root, const vlmc_artifact_t *a) {
  cJSON_AddNumberToObject(root, "format_version", vlmc_artifact_format_version(a));
  cJSON *arr = cJSON_AddArrayToObject(root, "sections");
  for (size_t i = 0; i < vlmc_artifact_section_count(a); ++i) {
    const vlmc_artifact_section_t *s = vlmc_artifact_section(a, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", s->name);
    cJSON_AddNumberToObject(o, "offset", (double)s->offset);
    cJSON_AddNumberToObject(o, "bytes", (double)s->size);
    add_hex64(o, "xxh64", s->checksum);
    cJSON_AddStringToObject(o, "checked",
                            s->flags & VLMC_SECTION_LAZY_VERIFY ? "on use" : "at open");
    cJSON_AddItemToArray(arr, o);
  }
}

/* Each function: its signature size, ops by kind, and its dispatch regions. */
static cJSON *function_json(const vlmc_func_t *func) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", func->name);
  cJSON_AddNumberToObject(o, "args", func->num_args);
  cJSON_AddNumberToObject(o, "results", func->num_results);
  uint32_t ops = 0, members = 0, outside = 0, by_kind[VLMC_OP_COUNT] = {0};
  for (const vlmc_op_t *op = func->body.first; op; op = op->next) {
    ++ops;
    ++by_kind[op->kind];
  }
  cJSON_AddNumberToObject(o, "ops", ops);
  cJSON *kinds = cJSON_AddObjectToObject(o, "ops_by_kind");
  for (int k = 0; k < VLMC_OP_COUNT; ++k)
    if (by_kind[k])
      cJSON_AddNumberToObject(kinds, vlmc_op_info((vlmc_op_kind_t)k)->mnemonic, by_kind[k]);
  vlmc_dispatch_set_t set;
  vlmc_status_t st = vlmc_dispatch_regions(func, &set);
  if (st) {
    add_error(o, st);
    vlmc_status_free(st);
    return o;
  }
  for (const vlmc_op_t *op = func->body.first; op; op = op->next) {
    if (op->dispatch) ++members;
    else if (vlmc_dispatch_may_contain(op->kind)) ++outside;
  }
  cJSON_AddNumberToObject(o, "dispatches", set.num_regions);
  cJSON_AddNumberToObject(o, "ops_in_dispatches", members);
  cJSON_AddNumberToObject(o, "compute_ops_outside_dispatches", outside);
  vlmc_dispatch_set_free(&set);
  return o;
}

static cJSON *weight_storage_json(const vlmc_module_t *module, const vlmc_manifest_t *m) {
  inspect_weight_storage_t ws;
  if (!inspect_weight_storage(module, m, &ws)) return cJSON_CreateNull();
  cJSON *arr = cJSON_CreateArray();
  for (size_t g = 0; g < ws.num_groups; ++g) {
    const inspect_weight_group_t *wg = &ws.groups[g];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "bits", (double)wg->bits);
    cJSON_AddNumberToObject(o, "group", (double)wg->group);
    cJSON_AddStringToObject(o, "scale_dtype", vlmc_dtype_info(wg->scale_dtype)->name);
    cJSON_AddNumberToObject(o, "tensors", (double)wg->tensors);
    cJSON_AddNumberToObject(o, "weights", (double)wg->weights);
    cJSON_AddNumberToObject(o, "bytes", (double)wg->bytes);
    cJSON_AddNumberToObject(o, "bits_per_weight",
                            wg->weights ? 8.0 * (double)wg->bytes / (double)wg->weights : 0.0);
    cJSON_AddItemToArray(arr, o);
  }
  for (int d = 0; d < VLMC_DTYPE_COUNT; ++d) {
    if (!ws.plain_weights[d]) continue;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "dtype", vlmc_dtype_info((vlmc_dtype_t)d)->name);
    cJSON_AddNumberToObject(o, "weights", (double)ws.plain_weights[d]);
    cJSON_AddNumberToObject(o, "bytes", (double)ws.plain_bytes[d]);
    cJSON_AddNumberToObject(o, "bits_per_weight",
                            8.0 * (double)ws.plain_bytes[d] / (double)ws.plain_weights[d]);
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

static void add_program(cJSON *root, const vlmc_manifest_t *m, const vlmc_module_t *module,
                        vlmc_status_t parse_status) {
  cJSON *prog = cJSON_AddObjectToObject(root, "program");
  if (parse_status) {
    add_error(prog, parse_status);
    return;
  }
  cJSON *funcs = cJSON_AddArrayToObject(prog, "functions");
  for (uint32_t f = 0; f < module->num_funcs; ++f)
    cJSON_AddItemToArray(funcs, function_json(module->funcs[f]));
  cJSON_AddItemToObject(root, "weights_by_storage", weight_storage_json(module, m));
}

static cJSON *dtype_array(const vlmc_dtype_t *dtypes, uint32_t n) {
  cJSON *arr = cJSON_CreateArray();
  for (uint32_t i = 0; i < n; ++i)
    cJSON_AddItemToArray(arr, cJSON_CreateString(vlmc_dtype_info(dtypes[i])->name));
  return arr;
}

static cJSON *fields_json(const vlmc_kernel_table_field_t *fields, size_t n) {
  cJSON *o = cJSON_CreateObject();
  for (size_t i = 0; i < n; ++i) {
    if (fields[i].string) cJSON_AddStringToObject(o, fields[i].key, fields[i].string);
    else cJSON_AddNumberToObject(o, fields[i].key, (double)fields[i].integer);
  }
  return o;
}

static cJSON *kernel_json(const vlmc_kernel_table_t *t, size_t index, uint32_t uses) {
  const vlmc_kernel_table_kernel_t *k = &t->kernels[index];
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "symbol", k->symbol);
  cJSON_AddStringToObject(o, "template", k->template_name);
  cJSON_AddNumberToObject(o, "dispatches", uses);
  if (k->is_variant && k->variant_of < t->num_kernels) {
    cJSON_AddStringToObject(o, "variant_of", t->kernels[k->variant_of].symbol);
    cJSON_AddStringToObject(o, "for_devices", k->for_devices ? k->for_devices : "");
  }
  cJSON_AddItemToObject(o, "inputs", dtype_array(k->inputs, k->num_inputs));
  cJSON_AddStringToObject(o, "output", vlmc_dtype_info(k->output)->name);
  cJSON *syms = cJSON_AddArrayToObject(o, "symbols");
  for (uint32_t i = 0; i < k->num_syms; ++i)
    cJSON_AddItemToArray(syms, cJSON_CreateString(k->syms[i]));
  cJSON_AddItemToObject(o, "target", fields_json(k->fields, k->num_fields));
  return o;
}

/* kernels.TARGET: null when the artifact has no code for it, else its size, table fields and
 * kernels (an "error" key when the table does not parse). */
static cJSON *target_kernels_json(const vlmc_artifact_t *a, const char *path,
                                  const char *target) {
  const vlmc_artifact_section_t *code = NULL;
  vlmc_kernel_table_t t;
  uint32_t *uses = NULL;
  vlmc_status_t st = inspect_kernel_table(a, path, target, &code, &t, &uses);
  if (st && vlmc_status_code(st) == VLMC_NOT_FOUND) {
    vlmc_status_free(st);
    return cJSON_CreateNull();
  }
  cJSON *o = cJSON_CreateObject();
  if (st) {
    add_error(o, st);
    vlmc_status_free(st);
    return o;
  }
  cJSON_AddNumberToObject(o, "code_bytes", (double)code->size);
  if (t.abi) cJSON_AddStringToObject(o, "abi", t.abi);
  cJSON_AddItemToObject(o, "table", fields_json(t.fields, t.num_fields));
  cJSON_AddNumberToObject(o, "dispatches", (double)t.num_dispatches);
  if (!strcmp(target, "metal")) /* labelled as everywhere: no Apple hardware ran it */
    cJSON_AddStringToObject(o, "executed", "on Linux in emulation; not yet on Apple hardware");
  cJSON *arr = cJSON_AddArrayToObject(o, "kernels");
  for (size_t i = 0; i < t.num_kernels; ++i)
    cJSON_AddItemToArray(arr, kernel_json(&t, i, uses[i]));
  free(uses);
  vlmc_kernel_table_deinit(&t);
  return o;
}

static void add_backend_check(void *ctx, const char *backend, vlmc_status_t st) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "backend", backend);
  cJSON_AddBoolToObject(o, "loadable", st == NULL);
  if (st) add_error(o, st);
  cJSON_AddItemToArray(ctx, o);
}

static void add_kernels(cJSON *root, const vlmc_artifact_t *a, const char *path,
                        const vlmc_module_t *verified) {
  cJSON *kernels = cJSON_AddObjectToObject(root, "kernels");
  static const char *const targets[] = {"cpu", "vulkan", "metal"};
  for (size_t i = 0; i < sizeof targets / sizeof targets[0]; ++i)
    cJSON_AddItemToObject(kernels, targets[i], target_kernels_json(a, path, targets[i]));
  cJSON *checks = cJSON_AddArrayToObject(root, "backend_checks");
  if (verified) inspect_backend_checks(a, path, verified, add_backend_check, checks);
}

static void add_params(cJSON *root, const vlmc_manifest_t *m) {
  inspect_param_totals_t t;
  inspect_param_totals(m, &t);
  cJSON *o = cJSON_AddObjectToObject(root, "parameters");
  cJSON_AddNumberToObject(o, "tensors", (double)m->num_params);
  cJSON_AddNumberToObject(o, "elements", (double)t.elements);
  cJSON_AddStringToObject(o, "storage", m->params_external ? "external" : "inline");
  cJSON *by = cJSON_AddObjectToObject(o, "by_dtype");
  for (int d = 0; d < VLMC_DTYPE_COUNT; ++d) {
    if (!t.tensors[d]) continue;
    cJSON *e = cJSON_AddObjectToObject(by, vlmc_dtype_info((vlmc_dtype_t)d)->name);
    cJSON_AddNumberToObject(e, "tensors", (double)t.tensors[d]);
    cJSON_AddNumberToObject(e, "bytes", (double)t.bytes[d]);
  }
}

vlmc_status_t inspect_json(const vlmc_artifact_t *a, const char *path, const vlmc_manifest_t *m,
                           bool verify) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  cJSON_AddStringToObject(root, "artifact", path);
  add_model(root, a, m);
  add_sections(root, a);
  vlmc_module_t *module = NULL;
  vlmc_status_t parsed = inspect_parse_program(a, false, &module);
  add_program(root, m, module, parsed);
  vlmc_status_free(parsed);
  vlmc_status_t verified = module ? vlmc_module_verify(module) : NULL;
  add_kernels(root, a, path, module && !verified ? module : NULL);
  vlmc_status_free(verified);
  vlmc_module_destroy(module);
  add_params(root, m);
  vlmc_status_t status = NULL;
  if (verify) {
    status = inspect_verify(a, NULL);
    cJSON *v = cJSON_AddObjectToObject(root, "verify");
    cJSON_AddBoolToObject(v, "ok", status == NULL);
    if (status) add_error(v, status);
  }
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) {
    vlmc_status_free(status);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory writing the JSON report");
  }
  puts(text);
  cJSON_free(text);
  return status;
}
