/* A target's kernel table (artifact/kernel_table.h): building, writing, parsing, checking. */
#define _POSIX_C_SOURCE 200809L
#include "artifact/kernel_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/dispatch.h"
#include "support/json.h"

static vlmc_status_t out_of_memory(void) {
  return vlmc_status_make(VLMC_OUT_OF_MEMORY, "kernel table: out of memory");
}

/* ---- storage dtypes: the names a table uses ---- */

static const struct {
  const char *name;
  vlmc_dtype_t dtype;
} kStorage[] = {{"f32", VLMC_DTYPE_F32},
                {"bf16", VLMC_DTYPE_BF16},
                {"f16", VLMC_DTYPE_F16},
                {"i64", VLMC_DTYPE_I64},
                {"u32", VLMC_DTYPE_U32}};

static bool storage_from_name(const char *name, vlmc_dtype_t *out) {
  for (size_t i = 0; i < sizeof kStorage / sizeof kStorage[0]; ++i)
    if (!strcmp(name, kStorage[i].name)) {
      *out = kStorage[i].dtype;
      return true;
    }
  return false;
}

static const char *storage_name(vlmc_dtype_t dtype) {
  for (size_t i = 0; i < sizeof kStorage / sizeof kStorage[0]; ++i)
    if (kStorage[i].dtype == dtype) return kStorage[i].name;
  return NULL;
}

/* ---- building ---- */

static void fields_free(vlmc_kernel_table_field_t *fields, size_t count);
static vlmc_status_t keep_fields(vlmc_kernel_table_field_t **fields, size_t *num_fields,
                                 const cJSON *object, bool (*is_schema)(const char *));

vlmc_status_t vlmc_kernel_table_init(vlmc_kernel_table_t *t, const char *target) {
  memset(t, 0, sizeof *t);
  t->format = VLMC_KERNEL_TABLE_FORMAT;
  t->target = strdup(target);
  return t->target ? NULL : out_of_memory();
}

static void kernel_deinit(vlmc_kernel_table_kernel_t *k) {
  free(k->symbol);
  free(k->template_name);
  free(k->inputs);
  for (uint32_t i = 0; k->syms && i < k->num_syms; ++i) free(k->syms[i]);
  free(k->syms);
  free(k->sym_ids);
  free(k->for_devices);
  fields_free(k->fields, k->num_fields);
}

void vlmc_kernel_table_deinit(vlmc_kernel_table_t *t) {
  free(t->target);
  free(t->origin);
  free(t->abi);
  fields_free(t->fields, t->num_fields);
  for (size_t i = 0; i < t->num_kernels; ++i) kernel_deinit(&t->kernels[i]);
  free(t->kernels);
  for (size_t i = 0; i < t->num_dispatches; ++i) {
    free(t->dispatches[i].func);
    free(t->dispatches[i].work.sym);
  }
  free(t->dispatches);
  memset(t, 0, sizeof *t);
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

vlmc_status_t vlmc_kernel_table_set_abi(vlmc_kernel_table_t *t, const char *abi) {
  free(t->abi);
  t->abi = strdup(abi);
  return t->abi ? NULL : out_of_memory();
}

/* Appends a field to a list (the table's or a kernel's). */
static vlmc_status_t add_field(vlmc_kernel_table_field_t **fields, size_t *num_fields,
                               const char *key, const char *string, int64_t integer) {
  vlmc_kernel_table_field_t *grown = realloc(*fields, (*num_fields + 1) * sizeof *grown);
  if (!grown) return out_of_memory();
  *fields = grown;
  vlmc_kernel_table_field_t *f = &grown[*num_fields];
  f->key = strdup(key);
  f->string = dup_or_null(string);
  f->integer = integer;
  if (!f->key || (string && !f->string)) {
    free(f->key);
    free(f->string);
    return out_of_memory();
  }
  ++*num_fields;
  return NULL;
}

static void fields_free(vlmc_kernel_table_field_t *fields, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    free(fields[i].key);
    free(fields[i].string);
  }
  free(fields);
}

static const vlmc_kernel_table_field_t *find_field(const vlmc_kernel_table_field_t *fields,
                                                   size_t count, const char *key) {
  for (size_t i = 0; i < count; ++i)
    if (!strcmp(fields[i].key, key)) return &fields[i];
  return NULL;
}

vlmc_status_t vlmc_kernel_table_add_string_field(vlmc_kernel_table_t *t, const char *key,
                                                 const char *value) {
  return add_field(&t->fields, &t->num_fields, key, value, 0);
}

vlmc_status_t vlmc_kernel_table_add_int_field(vlmc_kernel_table_t *t, const char *key,
                                              int64_t value) {
  return add_field(&t->fields, &t->num_fields, key, NULL, value);
}

const vlmc_kernel_table_field_t *vlmc_kernel_table_field(const vlmc_kernel_table_t *t,
                                                         const char *key) {
  return find_field(t->fields, t->num_fields, key);
}

vlmc_status_t vlmc_kernel_table_kernel_add_string_field(vlmc_kernel_table_kernel_t *k,
                                                        const char *key, const char *value) {
  return add_field(&k->fields, &k->num_fields, key, value, 0);
}

vlmc_status_t vlmc_kernel_table_kernel_add_int_field(vlmc_kernel_table_kernel_t *k,
                                                     const char *key, int64_t value) {
  return add_field(&k->fields, &k->num_fields, key, NULL, value);
}

void vlmc_kernel_table_kernel_fields_free(vlmc_kernel_table_kernel_t *k) {
  fields_free(k->fields, k->num_fields);
  k->fields = NULL;
  k->num_fields = 0;
}

const vlmc_kernel_table_field_t *vlmc_kernel_table_kernel_field(
    const vlmc_kernel_table_kernel_t *k, const char *key) {
  return find_field(k->fields, k->num_fields, key);
}

/* `items` with room for one more element (doubling: appends stay linear); NULL when out of
 * memory, leaving `items` and *cap as they were. */
static void *reserve(void *items, size_t *cap, size_t count, size_t size) {
  if (count < *cap) return items;
  size_t grown_cap = *cap ? 2 * *cap : 16;
  void *grown = realloc(items, grown_cap * size);
  if (grown) *cap = grown_cap;
  return grown;
}

static vlmc_status_t copy_kernel(const vlmc_kernel_table_kernel_t *from,
                                 vlmc_kernel_table_kernel_t *to) {
  memset(to, 0, sizeof *to);
  to->symbol = strdup(from->symbol);
  to->template_name = strdup(from->template_name);
  to->inputs = calloc(from->num_inputs + 1, sizeof *to->inputs);
  to->syms = calloc(from->num_syms + 1, sizeof *to->syms);
  to->sym_ids = calloc(from->num_syms + 1, sizeof *to->sym_ids);
  if (!to->symbol || !to->template_name || !to->inputs || !to->syms || !to->sym_ids)
    return out_of_memory();
  if (from->num_inputs) memcpy(to->inputs, from->inputs, from->num_inputs * sizeof *to->inputs);
  to->num_inputs = from->num_inputs;
  to->output = from->output;
  for (uint32_t i = 0; i < from->num_syms; ++i, ++to->num_syms)
    if (!(to->syms[i] = strdup(from->syms[i]))) return out_of_memory();
  to->cost = from->cost;
  to->signature = from->signature;
  to->is_variant = from->is_variant;
  to->variant_of = from->variant_of;
  if (from->is_variant && !(to->for_devices = strdup(from->for_devices ? from->for_devices : "")))
    return out_of_memory();
  for (size_t i = 0; i < from->num_fields; ++i)
    VLMC_RETURN_IF_ERROR(add_field(&to->fields, &to->num_fields, from->fields[i].key,
                                   from->fields[i].string, from->fields[i].integer));
  return NULL;
}

vlmc_status_t vlmc_kernel_table_add_kernel(vlmc_kernel_table_t *t,
                                           const vlmc_kernel_table_kernel_t *kernel) {
  vlmc_kernel_table_kernel_t *kernels =
      reserve(t->kernels, &t->cap_kernels, t->num_kernels, sizeof *kernels);
  if (!kernels) return out_of_memory();
  t->kernels = kernels;
  vlmc_status_t st = copy_kernel(kernel, &t->kernels[t->num_kernels]);
  if (st) kernel_deinit(&t->kernels[t->num_kernels]);
  else ++t->num_kernels;
  return st;
}

vlmc_status_t vlmc_kernel_table_add_dispatch(vlmc_kernel_table_t *t,
                                             const vlmc_kernel_table_dispatch_t *dispatch) {
  vlmc_kernel_table_dispatch_t *dispatches =
      reserve(t->dispatches, &t->cap_dispatches, t->num_dispatches, sizeof *dispatches);
  if (!dispatches) return out_of_memory();
  t->dispatches = dispatches;
  vlmc_kernel_table_dispatch_t *d = &t->dispatches[t->num_dispatches];
  *d = *dispatch;
  d->func = strdup(dispatch->func);
  d->work.sym = dup_or_null(dispatch->work.sym);
  d->work.sym_id = 0;
  d->func_index = 0;
  if (!d->func || (dispatch->work.sym && !d->work.sym)) {
    free(d->func);
    free(d->work.sym);
    return out_of_memory();
  }
  ++t->num_dispatches;
  return NULL;
}

/* ---- writing ---- */

static vlmc_status_t write_storage(vlmc_strbuf_t *out, const vlmc_kernel_table_kernel_t *k,
                                   vlmc_dtype_t dtype) {
  const char *name = storage_name(dtype);
  if (!name)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "kernel %s: storage dtype %s has no name in "
                            "a kernel table", k->symbol, vlmc_dtype_info(dtype)->name);
  vlmc_strbuf_printf(out, "\"%s\"", name);
  return NULL;
}

/* "key": value */
static void write_field_value(vlmc_strbuf_t *out, const vlmc_kernel_table_field_t *f) {
  vlmc_json_write_string(out, f->key);
  vlmc_strbuf_puts(out, ": ");
  if (f->string) vlmc_json_write_string(out, f->string);
  else vlmc_strbuf_printf(out, "%lld", (long long)f->integer);
}

static vlmc_status_t write_kernel(vlmc_strbuf_t *out, const vlmc_kernel_table_kernel_t *k) {
  vlmc_strbuf_puts(out, "{\"symbol\": ");
  vlmc_json_write_string(out, k->symbol);
  vlmc_strbuf_puts(out, ", \"template\": ");
  vlmc_json_write_string(out, k->template_name);
  vlmc_strbuf_printf(out, ", \"signature\": \"%016llx\", \"inputs\": [",
                     (unsigned long long)k->signature);
  for (uint32_t j = 0; j < k->num_inputs; ++j) {
    if (j) vlmc_strbuf_puts(out, ", ");
    VLMC_RETURN_IF_ERROR(write_storage(out, k, k->inputs[j]));
  }
  vlmc_strbuf_puts(out, "], \"output\": ");
  VLMC_RETURN_IF_ERROR(write_storage(out, k, k->output));
  vlmc_strbuf_puts(out, ", \"syms\": [");
  for (uint32_t j = 0; j < k->num_syms; ++j) {
    if (j) vlmc_strbuf_puts(out, ", ");
    vlmc_json_write_string(out, k->syms[j]);
  }
  vlmc_strbuf_printf(out, "], \"cost\": %lld", (long long)k->cost);
  if (k->is_variant) {
    vlmc_strbuf_printf(out, ", \"variant_of\": %u, \"for_devices\": ", k->variant_of);
    vlmc_json_write_string(out, k->for_devices ? k->for_devices : "");
  }
  if (k->num_fields) {
    vlmc_strbuf_puts(out, ", \"target\": {");
    for (size_t i = 0; i < k->num_fields; ++i) {
      if (i) vlmc_strbuf_puts(out, ", ");
      write_field_value(out, &k->fields[i]);
    }
    vlmc_strbuf_puts(out, "}");
  }
  vlmc_strbuf_puts(out, "}");
  return NULL;
}

static void write_dispatch(vlmc_strbuf_t *out, const vlmc_kernel_table_dispatch_t *d) {
  vlmc_strbuf_puts(out, "{\"func\": ");
  vlmc_json_write_string(out, d->func);
  vlmc_strbuf_printf(out, ", \"dispatch\": %u, \"kernel\": %u, \"work\": {\"sym\": ", d->dispatch,
                     d->kernel);
  if (d->work.sym) vlmc_json_write_string(out, d->work.sym);
  else vlmc_strbuf_puts(out, "null");
  vlmc_strbuf_printf(out, ", \"num\": %lld, \"den\": %lld, \"off\": %lld, \"scale\": %lld}}",
                     (long long)d->work.num, (long long)d->work.den, (long long)d->work.off,
                     (long long)d->work.scale);
}

static void write_field(vlmc_strbuf_t *out, const vlmc_kernel_table_field_t *f) {
  vlmc_strbuf_puts(out, "  ");
  write_field_value(out, f);
  vlmc_strbuf_puts(out, ",\n");
}

vlmc_status_t vlmc_kernel_table_to_json(const vlmc_kernel_table_t *t, vlmc_strbuf_t *out) {
  vlmc_strbuf_printf(out, "{\n  \"format\": %lld,\n", (long long)t->format);
  if (t->abi) {
    vlmc_strbuf_puts(out, "  \"abi\": ");
    vlmc_json_write_string(out, t->abi);
    vlmc_strbuf_puts(out, ",\n");
  }
  for (size_t i = 0; i < t->num_fields; ++i) write_field(out, &t->fields[i]);
  vlmc_strbuf_puts(out, "  \"kernels\": [");
  for (size_t i = 0; i < t->num_kernels; ++i) {
    vlmc_strbuf_puts(out, i ? ",\n    " : "\n    ");
    VLMC_RETURN_IF_ERROR(write_kernel(out, &t->kernels[i]));
  }
  vlmc_strbuf_puts(out, "\n  ],\n  \"dispatches\": [");
  for (size_t i = 0; i < t->num_dispatches; ++i) {
    vlmc_strbuf_puts(out, i ? ",\n    " : "\n    ");
    write_dispatch(out, &t->dispatches[i]);
  }
  vlmc_strbuf_puts(out, "\n  ]\n}\n");
  return out->failed ? out_of_memory() : NULL;
}

/* ---- parsing ---- */

static vlmc_json_ref_t field_of(const vlmc_json_ref_t *object, const char *key) {
  return vlmc_json_ref(object->file, object->node, object->path, key);
}

static vlmc_status_t parse_storage(const vlmc_json_ref_t *ref, const char *expected,
                                   vlmc_dtype_t *out) {
  const char *name;
  VLMC_RETURN_IF_ERROR(vlmc_json_string_req(ref, &name));
  if (!storage_from_name(name, out))
    return vlmc_json_error(ref, VLMC_PARSE_ERROR, "expected %s, got '%s'", expected, name);
  return NULL;
}

/* An absent list is an empty one (as tables have always been read). */
static vlmc_status_t parse_inputs(const vlmc_json_ref_t *ref, vlmc_dtype_t *inputs,
                                  uint32_t *count) {
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_array(ref, -1));
  if (ref->node && cJSON_GetArraySize(ref->node) > VLMC_KERNEL_MAX_INPUTS)
    return vlmc_json_error(ref, VLMC_PARSE_ERROR, "too many inputs");
  uint32_t n = 0;
  const cJSON *node;
  cJSON_ArrayForEach(node, ref->node) {
    vlmc_json_ref_t item = vlmc_json_ref_item(ref, node, (int)n);
    VLMC_RETURN_IF_ERROR(parse_storage(&item, "f32, bf16, f16, i64 or u32", &inputs[n++]));
  }
  *count = n;
  return NULL;
}

/* The names are borrowed from the document. */
static vlmc_status_t parse_syms(const vlmc_json_ref_t *ref, char **syms, uint32_t *count) {
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_array(ref, -1));
  if (ref->node && cJSON_GetArraySize(ref->node) > VLMC_KERNEL_MAX_SYMS)
    return vlmc_json_error(ref, VLMC_PARSE_ERROR, "at most %d symbols", VLMC_KERNEL_MAX_SYMS);
  uint32_t n = 0;
  const cJSON *node;
  cJSON_ArrayForEach(node, ref->node) {
    vlmc_json_ref_t item = vlmc_json_ref_item(ref, node, (int)n);
    const char *name;
    VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&item, &name));
    syms[n++] = (char *)name; /* copied by vlmc_kernel_table_add_kernel */
  }
  *count = n;
  return NULL;
}

/* 16 hex digits: 64 bits, as the manifest writes checksums. */
static vlmc_status_t parse_signature(const vlmc_json_ref_t *ref, uint64_t *out) {
  const char *text;
  VLMC_RETURN_IF_ERROR(vlmc_json_string_req(ref, &text));
  char *end = NULL;
  if (strlen(text) == 16 && strspn(text, "0123456789abcdefABCDEF") == 16)
    *out = strtoull(text, &end, 16);
  if (!end || *end)
    return vlmc_json_error(ref, VLMC_PARSE_ERROR, "expected 16 hex digits, got '%s'", text);
  return NULL;
}

static vlmc_status_t parse_kernel(vlmc_kernel_table_t *t, const vlmc_json_ref_t *ref) {
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_object(ref));
  if (!ref->node) return vlmc_json_missing(ref);
  vlmc_dtype_t inputs[VLMC_KERNEL_MAX_INPUTS];
  char *syms[VLMC_KERNEL_MAX_SYMS];
  vlmc_kernel_table_kernel_t k = {.inputs = inputs, .syms = syms};
  const char *symbol, *template_name;
  vlmc_json_ref_t r = field_of(ref, "symbol");
  VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&r, &symbol));
  r = field_of(ref, "template");
  VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&r, &template_name));
  r = field_of(ref, "signature");
  VLMC_RETURN_IF_ERROR(parse_signature(&r, &k.signature));
  r = field_of(ref, "inputs");
  VLMC_RETURN_IF_ERROR(parse_inputs(&r, inputs, &k.num_inputs));
  r = field_of(ref, "output");
  VLMC_RETURN_IF_ERROR(parse_storage(&r, "f32 or i64", &k.output));
  r = field_of(ref, "syms");
  VLMC_RETURN_IF_ERROR(parse_syms(&r, syms, &k.num_syms));
  r = field_of(ref, "cost");
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&r, 1, INT64_MAX / 2, &k.cost));
  r = field_of(ref, "variant_of"); /* a variant (optional; vlmc_kernel_table_check ties it) */
  int64_t variant_of = -1;
  VLMC_RETURN_IF_ERROR(vlmc_json_int_opt(&r, 0, INT32_MAX, &variant_of, NULL));
  const char *for_devices = NULL;
  r = field_of(ref, "for_devices");
  if (variant_of >= 0) VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&r, &for_devices));
  else if (r.node) return vlmc_json_error(&r, VLMC_PARSE_ERROR, "for_devices without variant_of");
  k.is_variant = variant_of >= 0;
  k.variant_of = k.is_variant ? (uint32_t)variant_of : 0;
  k.for_devices = (char *)for_devices; /* borrowed until add_kernel copies it */
  r = field_of(ref, "target"); /* the target's own per-kernel fields (optional) */
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_object(&r));
  vlmc_status_t st = r.node ? keep_fields(&k.fields, &k.num_fields, r.node, NULL) : NULL;
  k.symbol = (char *)symbol; /* borrowed until add_kernel copies it */
  k.template_name = (char *)template_name;
  if (!st) st = vlmc_kernel_table_add_kernel(t, &k);
  fields_free(k.fields, k.num_fields);
  return st;
}

static vlmc_status_t parse_work(const vlmc_json_ref_t *ref, vlmc_kernel_table_work_t *w) {
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_object(ref));
  if (!ref->node) return vlmc_json_missing(ref);
  const char *sym = NULL;
  vlmc_json_ref_t r = field_of(ref, "sym");
  VLMC_RETURN_IF_ERROR(vlmc_json_string_opt(&r, &sym, NULL));
  vlmc_json_ref_t rn = field_of(ref, "num"), rd = field_of(ref, "den");
  vlmc_json_ref_t ro = field_of(ref, "off"), rs = field_of(ref, "scale");
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&rn, -(1LL << 40), 1LL << 40, &w->num));
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&rd, 1, 1LL << 40, &w->den));
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&ro, -(1LL << 40), 1LL << 40, &w->off));
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&rs, 1, 1LL << 40, &w->scale));
  w->sym = (char *)sym; /* borrowed until add_dispatch copies it */
  return NULL;
}

static vlmc_status_t parse_dispatch(vlmc_kernel_table_t *t, const vlmc_json_ref_t *ref) {
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_object(ref));
  if (!ref->node) return vlmc_json_missing(ref);
  vlmc_kernel_table_dispatch_t d = {0};
  const char *func;
  int64_t id, kernel;
  vlmc_json_ref_t r = field_of(ref, "func");
  VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&r, &func));
  r = field_of(ref, "dispatch");
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&r, 1, UINT32_MAX, &id));
  r = field_of(ref, "kernel");
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&r, 0, (int64_t)t->num_kernels - 1, &kernel));
  r = field_of(ref, "work");
  VLMC_RETURN_IF_ERROR(parse_work(&r, &d.work));
  d.func = (char *)func; /* borrowed until add_dispatch copies it */
  d.dispatch = (uint32_t)id;
  d.kernel = (uint32_t)kernel;
  return vlmc_kernel_table_add_dispatch(t, &d);
}

/* A required array of objects, each handed to `parse`. */
static vlmc_status_t parse_list(vlmc_kernel_table_t *t, const vlmc_json_ref_t *list,
                                vlmc_status_t (*parse)(vlmc_kernel_table_t *,
                                                       const vlmc_json_ref_t *)) {
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_array(list, -1));
  if (!list->node) return vlmc_json_missing(list);
  int i = 0;
  const cJSON *node;
  cJSON_ArrayForEach(node, list->node) {
    vlmc_json_ref_t item = vlmc_json_ref_item(list, node, i++);
    VLMC_RETURN_IF_ERROR(parse(t, &item));
  }
  return NULL;
}

static bool is_schema_key(const char *key) {
  static const char *const keys[] = {"format", "abi", "kernels", "dispatches"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; ++i)
    if (!strcmp(key, keys[i])) return true;
  return false;
}

/* Strings and integers of a JSON object into a field list, except the schema's own keys
 * (is_schema: NULL for none); any other value is ignored, as readers always did. */
static vlmc_status_t keep_fields(vlmc_kernel_table_field_t **fields, size_t *num_fields,
                                 const cJSON *object, bool (*is_schema)(const char *)) {
  const cJSON *node;
  cJSON_ArrayForEach(node, object) {
    if (is_schema && is_schema(node->string)) continue;
    if (cJSON_IsString(node)) {
      VLMC_RETURN_IF_ERROR(add_field(fields, num_fields, node->string, node->valuestring, 0));
    } else if (cJSON_IsNumber(node) && node->valuedouble >= -9e15 && node->valuedouble <= 9e15 &&
               node->valuedouble == (double)(int64_t)node->valuedouble) {
      VLMC_RETURN_IF_ERROR(add_field(fields, num_fields, node->string, NULL,
                                     (int64_t)node->valuedouble));
    }
  }
  return NULL;
}

/* Top-level strings and integers the schema does not name belong to the target ("cpu",
 * "vector_width"). */
static vlmc_status_t keep_target_fields(vlmc_kernel_table_t *t, const cJSON *root) {
  return keep_fields(&t->fields, &t->num_fields, root, is_schema_key);
}

/* Only the current format: an older table lacks what the check recomputes (format 1: the
 * kernels' signatures), so reading it would take its claims on trust. */
static vlmc_status_t parse_format(vlmc_kernel_table_t *t, const vlmc_json_ref_t *r) {
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(r, 1, INT32_MAX, &t->format));
  if (t->format != VLMC_KERNEL_TABLE_FORMAT)
    return vlmc_json_error(r, VLMC_PARSE_ERROR, "kernel table format %lld; this runtime reads "
                           "format %d only: recompile the artifact with this vlmc",
                           (long long)t->format, VLMC_KERNEL_TABLE_FORMAT);
  return NULL;
}

static vlmc_status_t parse_root(vlmc_kernel_table_t *t, const char *file, const cJSON *root) {
  vlmc_json_ref_t r = vlmc_json_ref(file, root, "", "format");
  VLMC_RETURN_IF_ERROR(parse_format(t, &r));
  const char *abi = NULL;
  r = vlmc_json_ref(file, root, "", "abi");
  VLMC_RETURN_IF_ERROR(vlmc_json_string_opt(&r, &abi, NULL));
  if (abi) VLMC_RETURN_IF_ERROR(vlmc_kernel_table_set_abi(t, abi));
  VLMC_RETURN_IF_ERROR(keep_target_fields(t, root));
  r = vlmc_json_ref(file, root, "", "kernels");
  VLMC_RETURN_IF_ERROR(parse_list(t, &r, parse_kernel));
  r = vlmc_json_ref(file, root, "", "dispatches");
  return parse_list(t, &r, parse_dispatch);
}

static void describe_section(char *buf, size_t size, const char *source, const char *target) {
  if (source) snprintf(buf, size, "%s: section 'kernels.%s.json'", source, target);
  else snprintf(buf, size, "section 'kernels.%s.json'", target);
}

vlmc_status_t vlmc_kernel_table_parse(const char *source, const char *target, const char *json,
                                      size_t len, vlmc_kernel_table_t *out) {
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_init(out, target));
  char file[512];
  describe_section(file, sizeof file, source, target);
  out->origin = strdup(file);
  if (!out->origin) return out_of_memory();
  cJSON *root = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_json_parse_object(file, json, len, &root));
  vlmc_status_t st = parse_root(out, file, root);
  cJSON_Delete(root);
  return st;
}

/* ---- checking against the program ---- */

typedef struct {
  const vlmc_module_t *module;
  const char *file;
  vlmc_dispatch_set_t *regions; /* per function */
  size_t **entry;               /* per function, per region index: dispatch entry + 1, 0: none */
} checker_t;

static bool find_symbol(const vlmc_module_t *m, const char *name, uint32_t *out) {
  for (uint32_t s = 1; s <= m->num_symbols; ++s)
    if (!strcmp(vlmc_module_symbol_name(m, s), name)) {
      *out = s;
      return true;
    }
  return false;
}

static bool find_func(const vlmc_module_t *m, const char *name, uint32_t *out) {
  for (uint32_t f = 0; f < m->num_funcs; ++f)
    if (!strcmp(m->funcs[f]->name, name)) {
      *out = f;
      return true;
    }
  return false;
}

/* The limits hold for built tables too (the parser refuses more before this). */
static vlmc_status_t resolve_kernel_syms(const checker_t *c, size_t index,
                                         vlmc_kernel_table_kernel_t *k) {
  if (k->num_inputs > VLMC_KERNEL_MAX_INPUTS || k->num_syms > VLMC_KERNEL_MAX_SYMS)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: kernels[%zu]: more than %d inputs or %d "
                            "symbols", c->file, index, VLMC_KERNEL_MAX_INPUTS,
                            VLMC_KERNEL_MAX_SYMS);
  for (uint32_t i = 0; i < k->num_syms; ++i)
    if (!find_symbol(c->module, k->syms[i], &k->sym_ids[i]))
      return vlmc_status_make(VLMC_PARSE_ERROR, "%s: kernels[%zu].syms[%u]: symbol '%s' is not "
                              "in the program", c->file, index, i, k->syms[i]);
  return NULL;
}

static vlmc_status_t checker_init(checker_t *c, const vlmc_module_t *module, const char *file) {
  memset(c, 0, sizeof *c);
  c->module = module;
  c->file = file;
  c->regions = calloc(module->num_funcs + 1, sizeof *c->regions);
  c->entry = calloc(module->num_funcs + 1, sizeof *c->entry);
  if (!c->regions || !c->entry) return out_of_memory();
  for (uint32_t f = 0; f < module->num_funcs; ++f) {
    VLMC_RETURN_IF_ERROR(vlmc_dispatch_regions(module->funcs[f], &c->regions[f]));
    c->entry[f] = calloc(c->regions[f].num_regions + 1, sizeof **c->entry);
    if (!c->entry[f]) return out_of_memory();
  }
  return NULL;
}

static void checker_deinit(checker_t *c) {
  for (uint32_t f = 0; c->regions && f < c->module->num_funcs; ++f)
    vlmc_dispatch_set_free(&c->regions[f]);
  for (uint32_t f = 0; c->entry && f < c->module->num_funcs; ++f) free(c->entry[f]);
  free(c->regions);
  free(c->entry);
}

static vlmc_status_t check_work(const checker_t *c, size_t index, vlmc_kernel_table_work_t *w) {
  w->sym_id = 0;
  if (w->sym && !find_symbol(c->module, w->sym, &w->sym_id))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: dispatches[%zu].work.sym: symbol '%s' is not "
                            "in the program", c->file, index, w->sym);
  return NULL;
}

/* The kernel was made for a region like this one: a dispatch pointing at another region's
 * kernel with as many inputs (a swapped index) reads and writes the wrong shapes. */
static vlmc_status_t check_signature(const checker_t *c, size_t index,
                                     const vlmc_kernel_table_dispatch_t *d,
                                     const vlmc_kernel_table_kernel_t *k,
                                     const vlmc_dispatch_region_t *region) {
  uint64_t actual = vlmc_dispatch_signature(c->module, region);
  if (actual == k->signature) return NULL;
  return vlmc_status_make(VLMC_PARSE_ERROR, "%s: dispatches[%zu].kernel: kernel %s (%s) was made "
                          "for a region of signature %016llx; @%s dispatch %u has signature "
                          "%016llx", c->file, index, k->symbol, k->template_name,
                          (unsigned long long)k->signature, d->func, d->dispatch,
                          (unsigned long long)actual);
}

static const char *dtype_name(vlmc_dtype_t d) { return vlmc_dtype_info(d)->name; }

/* The kernel reads each input and writes the output in the storage the program gives them
 * (a parameter's, which the artifact check ties to the manifest's dtype): never converted. */
static vlmc_status_t check_storage(const checker_t *c, size_t index,
                                   const vlmc_kernel_table_dispatch_t *d,
                                   const vlmc_kernel_table_kernel_t *k,
                                   const vlmc_dispatch_region_t *region) {
  for (uint32_t i = 0; i < region->num_inputs; ++i) {
    vlmc_dtype_t want = vlmc_kernel_input_storage(region->inputs[i]);
    if (k->inputs[i] != want)
      return vlmc_status_make(VLMC_PARSE_ERROR, "%s: dispatches[%zu]: kernel %s reads input %u "
                              "as %s; @%s dispatch %u stores it as %s", c->file, index,
                              k->symbol, i, dtype_name(k->inputs[i]), d->func, d->dispatch,
                              dtype_name(want));
  }
  vlmc_dtype_t out = vlmc_kernel_output_storage(vlmc_dispatch_output(region));
  if (k->output == out) return NULL;
  return vlmc_status_make(VLMC_PARSE_ERROR, "%s: dispatches[%zu]: kernel %s writes %s; @%s "
                          "dispatch %u's output is stored as %s", c->file, index, k->symbol,
                          dtype_name(k->output), d->func, d->dispatch, dtype_name(out));
}

/* "4096", "4*S", "S/2+1": a work count as messages show it (sym NULL: off alone). */
static void format_units(const char *sym, int64_t num, int64_t den, int64_t off, char *buf,
                         size_t size) {
  if (!sym) {
    snprintf(buf, size, "%lld", (long long)off);
    return;
  }
  char scaled[48] = "", divided[24] = "", offset[24] = "";
  if (num != 1) snprintf(scaled, sizeof scaled, "%lld*", (long long)num);
  if (den != 1) snprintf(divided, sizeof divided, "/%lld", (long long)den);
  if (off) snprintf(offset, sizeof offset, "%+lld", (long long)off);
  snprintf(buf, size, "%s%s%s%s", scaled, sym, divided, offset);
}

static bool same_work(const vlmc_module_t *m, const vlmc_kernel_table_work_t *w, vlmc_dim_t units,
                      int64_t scale) {
  if (w->scale != scale || w->off != units.off) return false;
  if (vlmc_dim_is_static(units)) return w->sym == NULL;
  return w->sym && !strcmp(w->sym, vlmc_module_symbol_name(m, units.sym)) &&
         w->num == units.num && w->den == units.den;
}

/* The work count is the template's rule applied to the region (vlmc_kernel_work): a larger
 * one would run the kernel past its output, a smaller one leave elements unwritten. */
static vlmc_status_t check_work_count(const checker_t *c, const vlmc_kernel_table_dispatch_t *d,
                                      const vlmc_kernel_table_kernel_t *k,
                                      const vlmc_dispatch_region_t *region) {
  vlmc_dim_t units;
  int64_t scale = 1;
  vlmc_status_t st = vlmc_kernel_work(region, k->template_name, &units, &scale);
  if (st)
    return vlmc_status_annotate(st, "%s: @%s dispatch %u: kernel %s: ", c->file, d->func,
                                d->dispatch, k->symbol);
  if (same_work(c->module, &d->work, units, scale)) return NULL;
  char have[96], want[96];
  const char *sym = vlmc_dim_is_static(units) ? NULL : vlmc_module_symbol_name(c->module,
                                                                               units.sym);
  format_units(d->work.sym, d->work.num, d->work.den, d->work.off, have, sizeof have);
  format_units(sym, units.num, units.den, units.off, want, sizeof want);
  return vlmc_status_make(VLMC_PARSE_ERROR, "%s: @%s dispatch %u: work %s x %lld, the region's "
                          "output implies %s x %lld (template %s)", c->file, d->func,
                          d->dispatch, have, (long long)d->work.scale, want, (long long)scale,
                          k->template_name);
}

static vlmc_status_t check_dispatch(checker_t *c, const vlmc_kernel_table_t *t, size_t index,
                                    vlmc_kernel_table_dispatch_t *d) {
  const char *file = c->file;
  if (!find_func(c->module, d->func, &d->func_index))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: dispatches[%zu].func: no function @%s in the "
                            "program", file, index, d->func);
  const vlmc_dispatch_set_t *set = &c->regions[d->func_index];
  const vlmc_dispatch_region_t *region = vlmc_dispatch_find(set, d->dispatch);
  if (!region)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: dispatches[%zu].dispatch: @%s has no dispatch "
                            "region %u", file, index, d->func, d->dispatch);
  size_t *entry = &c->entry[d->func_index][region - set->regions];
  if (*entry)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: dispatches[%zu]: @%s dispatch %u already has "
                            "an entry (dispatches[%zu])", file, index, d->func, d->dispatch,
                            *entry - 1);
  *entry = index + 1;
  if (d->kernel >= t->num_kernels)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: dispatches[%zu].kernel: %u is not a kernel of "
                            "the table (it has %zu)", file, index, d->kernel, t->num_kernels);
  const vlmc_kernel_table_kernel_t *k = &t->kernels[d->kernel];
  if (k->is_variant)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: dispatches[%zu].kernel: kernel %s is a variant "
                            "of kernels[%u]; a dispatch names a main kernel", file, index,
                            k->symbol, k->variant_of);
  if (k->num_inputs != region->num_inputs)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: dispatches[%zu].kernel: kernel %s takes %u "
                            "inputs, @%s dispatch %u has %u", file, index, k->symbol,
                            k->num_inputs, d->func, d->dispatch, region->num_inputs);
  VLMC_RETURN_IF_ERROR(check_signature(c, index, d, k, region));
  VLMC_RETURN_IF_ERROR(check_storage(c, index, d, k, region));
  VLMC_RETURN_IF_ERROR(check_work(c, index, &d->work));
  return check_work_count(c, d, k, region);
}

/* "cpu", "cpu,gpu": short lowercase names, comma-separated. */
static bool valid_device_list(const char *list) {
  size_t len = strlen(list), name = 0;
  if (len == 0 || len > 64) return false;
  for (const char *p = list; *p; ++p) {
    if (*p == ',') {
      if (!name) return false;
      name = 0;
    } else if ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_') {
      ++name;
    } else {
      return false;
    }
  }
  return name > 0;
}

/* A variant serves its main kernel's regions in its place: the same template (so the same
 * work rule), signature, inputs and output storage. Its own syms are resolved like any
 * kernel's (it may read other dims). */
static vlmc_status_t check_variant(const checker_t *c, const vlmc_kernel_table_t *t, size_t index) {
  const vlmc_kernel_table_kernel_t *v = &t->kernels[index];
  if (!v->is_variant) return NULL;
  if (!valid_device_list(v->for_devices ? v->for_devices : ""))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: kernels[%zu].for_devices: expected device "
                            "classes such as \"cpu\" or \"cpu,gpu\"", c->file, index);
  if (v->variant_of >= t->num_kernels || v->variant_of == index)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: kernels[%zu].variant_of: %u is not another "
                            "kernel of the table (it has %zu)", c->file, index, v->variant_of,
                            t->num_kernels);
  const vlmc_kernel_table_kernel_t *m = &t->kernels[v->variant_of];
  if (m->is_variant)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: kernels[%zu].variant_of: kernel %s is itself a "
                            "variant", c->file, index, m->symbol);
  bool same = !strcmp(v->template_name, m->template_name) && v->signature == m->signature &&
              v->num_inputs == m->num_inputs && v->output == m->output &&
              (!v->num_inputs || !memcmp(v->inputs, m->inputs, v->num_inputs * sizeof *v->inputs));
  if (!same)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: kernels[%zu] (%s, %s) is a variant of %s (%s) "
                            "but differs in its template, signature, inputs or output", c->file,
                            index, v->symbol, v->template_name, m->symbol, m->template_name);
  return NULL;
}

bool vlmc_kernel_table_variant_is_for(const vlmc_kernel_table_kernel_t *k,
                                      const char *device_class) {
  if (!k->is_variant || !k->for_devices) return false;
  size_t want = strlen(device_class);
  for (const char *p = k->for_devices; *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == want && !strncmp(p, device_class, len)) return true;
    if (!end) break;
    p = end + 1;
  }
  return false;
}

/* Every region of the program has a kernel: the artifact never falls back to the
 * interpreter, and an incomplete table is refused when it is opened, not mid-generation. */
static vlmc_status_t check_coverage(const checker_t *c) {
  for (uint32_t f = 0; f < c->module->num_funcs; ++f)
    for (uint32_t r = 0; r < c->regions[f].num_regions; ++r)
      if (!c->entry[f][r])
        return vlmc_status_make(VLMC_PARSE_ERROR, "%s: no kernel for @%s dispatch %u", c->file,
                                c->module->funcs[f]->name, c->regions[f].regions[r].id);
  return NULL;
}

vlmc_status_t vlmc_kernel_table_check(vlmc_kernel_table_t *t, const vlmc_module_t *module) {
  char fallback[128];
  describe_section(fallback, sizeof fallback, NULL, t->target);
  checker_t c;
  vlmc_status_t st = checker_init(&c, module, t->origin ? t->origin : fallback);
  for (size_t i = 0; !st && i < t->num_kernels; ++i)
    st = resolve_kernel_syms(&c, i, &t->kernels[i]);
  for (size_t i = 0; !st && i < t->num_kernels; ++i) st = check_variant(&c, t, i);
  for (size_t i = 0; !st && i < t->num_dispatches; ++i)
    st = check_dispatch(&c, t, i, &t->dispatches[i]);
  if (!st) st = check_coverage(&c);
  checker_deinit(&c);
  return st;
}

vlmc_dim_t vlmc_kernel_table_work_dim(const vlmc_kernel_table_work_t *w) {
  vlmc_dim_t dim = vlmc_dim_static(w->off);
  if (w->sym) {
    dim.sym = w->sym_id;
    dim.num = w->num;
    dim.den = w->den;
  }
  return dim;
}
