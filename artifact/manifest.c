#define _POSIX_C_SOURCE 200809L
#include "artifact/manifest.h"

#include <cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vlmc_manifest_init(vlmc_manifest_t *m) { memset(m, 0, sizeof *m); }

static void convention_deinit(vlmc_manifest_t *m) {
  free(m->convention.encode_image);
  free(m->convention.prefill);
  free(m->convention.decode);
  free(m->convention.positions);
  memset(&m->convention, 0, sizeof m->convention);
}

static void param_deinit(vlmc_manifest_param_t *p) {
  free(p->name);
  free(p->file);
}

void vlmc_manifest_deinit(vlmc_manifest_t *m) {
  free(m->model_family);
  free(m->producer);
  free(m->compile_options);
  free(m->targets);
  free(m->chat_template_source);
  free(m->quantization.source);
  free(m->precision.compute);
  free(m->precision.calibrated_modules);
  convention_deinit(m);
  for (size_t i = 0; i < m->num_params; ++i) param_deinit(&m->params[i]);
  free(m->params);
  memset(m, 0, sizeof *m);
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* The convention of the families that existed before manifests carried one. */
static const struct {
  const char *family, *encode_image, *prefill, *decode, *positions;
} kDefaultConventions[] = {
    {"qwen2_5_vl", "encode_image", "prefill", "decode", "mrope"},
};

static bool known_positions(const char *positions) {
  return !strcmp(positions, "mrope") || !strcmp(positions, "plain");
}

static vlmc_status_t set_convention(vlmc_manifest_t *m, const char *encode_image,
                                    const char *prefill, const char *decode,
                                    const char *positions) {
  convention_deinit(m);
  m->convention.encode_image = strdup(encode_image);
  m->convention.prefill = strdup(prefill);
  m->convention.decode = strdup(decode);
  m->convention.positions = strdup(positions);
  if (!m->convention.encode_image || !m->convention.prefill || !m->convention.decode ||
      !m->convention.positions)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "manifest: out of memory");
  return NULL;
}

vlmc_status_t vlmc_manifest_set_default_convention(vlmc_manifest_t *m, const char *family) {
  for (size_t i = 0; i < sizeof kDefaultConventions / sizeof kDefaultConventions[0]; ++i)
    if (!strcmp(family, kDefaultConventions[i].family))
      return set_convention(m, kDefaultConventions[i].encode_image, kDefaultConventions[i].prefill,
                            kDefaultConventions[i].decode, kDefaultConventions[i].positions);
  return vlmc_status_make(VLMC_UNSUPPORTED, "model family '%s' has no default calling "
                          "convention", family);
}

vlmc_status_t vlmc_manifest_add_param(vlmc_manifest_t *m, const vlmc_manifest_param_t *p) {
  vlmc_manifest_param_t *grown = realloc(m->params, (m->num_params + 1) * sizeof *grown);
  if (!grown) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "manifest: out of memory");
  m->params = grown;
  vlmc_manifest_param_t *copy = &m->params[m->num_params];
  *copy = *p;
  copy->name = dup_or_null(p->name);
  copy->file = dup_or_null(p->file);
  if (!copy->name || (p->file && !copy->file)) {
    param_deinit(copy);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "manifest: out of memory");
  }
  ++m->num_params;
  return NULL;
}

const vlmc_manifest_param_t *vlmc_manifest_find_param(const vlmc_manifest_t *m, const char *name) {
  for (size_t i = 0; i < m->num_params; ++i)
    if (strcmp(m->params[i].name, name) == 0) return &m->params[i];
  return NULL;
}

/* ---- writing ---- */

/* 64-bit integers travel as decimal strings where they may exceed 2^53 (checksums, offsets of
 * 10 GB files stay exact as numbers up to 2^53, but checksums do not). */
static cJSON *hex64(uint64_t v) {
  char text[24];
  snprintf(text, sizeof text, "%016" PRIx64, v);
  return cJSON_CreateString(text);
}

static cJSON *int_array(const int64_t *v, size_t n) {
  cJSON *a = cJSON_CreateArray();
  for (size_t i = 0; a && i < n; ++i) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
  return a;
}

static cJSON *double_array(const double *v, size_t n) {
  cJSON *a = cJSON_CreateArray();
  for (size_t i = 0; a && i < n; ++i) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
  return a;
}

static cJSON *param_to_json(const vlmc_manifest_param_t *p) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", p->name);
  cJSON_AddStringToObject(o, "dtype", vlmc_dtype_info(p->dtype)->name);
  cJSON_AddItemToObject(o, "shape", int_array(p->shape, p->rank));
  if (p->file) cJSON_AddStringToObject(o, "file", p->file);
  cJSON_AddNumberToObject(o, "offset", (double)p->offset);
  cJSON_AddNumberToObject(o, "nbytes", (double)p->nbytes);
  cJSON_AddItemToObject(o, "checksum", hex64(p->checksum));
  return o;
}

static cJSON *preprocess_to_json(const vlmc_preprocess_params_t *p) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "min_pixels", (double)p->min_pixels);
  cJSON_AddNumberToObject(o, "max_pixels", (double)p->max_pixels);
  cJSON_AddNumberToObject(o, "patch_size", p->patch_size);
  cJSON_AddNumberToObject(o, "temporal_patch_size", p->temporal_patch_size);
  cJSON_AddNumberToObject(o, "merge_size", p->merge_size);
  cJSON_AddItemToObject(o, "image_mean", double_array(p->image_mean, 3));
  cJSON_AddItemToObject(o, "image_std", double_array(p->image_std, 3));
  cJSON_AddNumberToObject(o, "rescale_factor", p->rescale_factor);
  cJSON_AddStringToObject(o, "resample",
                          p->resample == VLMC_RESAMPLE_PIL ? "pil" : "torchvision");
  return o;
}

/* "a,b" -> ["a", "b"]; "" -> []. */
static cJSON *split_list(const char *list) {
  cJSON *a = cJSON_CreateArray();
  for (const char *p = list ? list : ""; *p;) {
    size_t len = strcspn(p, ",");
    char item[256];
    snprintf(item, sizeof item, "%.*s", (int)len, p);
    cJSON_AddItemToArray(a, cJSON_CreateString(item));
    p += len;
    if (*p == ',') ++p;
  }
  return a;
}

static cJSON *precision_to_json(const vlmc_manifest_t *m) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "compute", m->precision.compute);
  cJSON_AddBoolToObject(o, "calibrated", m->precision.calibrated);
  cJSON_AddNumberToObject(o, "upcasts_rule", (double)m->precision.upcasts_rule);
  cJSON_AddNumberToObject(o, "upcasts_calibrated", (double)m->precision.upcasts_calibrated);
  cJSON_AddItemToObject(o, "calibrated_modules", split_list(m->precision.calibrated_modules));
  return o;
}

static cJSON *generation_to_json(const vlmc_manifest_t *m) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddBoolToObject(o, "do_sample", m->generation.do_sample);
  cJSON_AddNumberToObject(o, "temperature", m->generation.temperature);
  cJSON_AddNumberToObject(o, "top_k", (double)m->generation.top_k);
  cJSON_AddNumberToObject(o, "top_p", m->generation.top_p);
  cJSON_AddNumberToObject(o, "repetition_penalty", m->generation.repetition_penalty);
  return o;
}

static cJSON *quantization_to_json(const vlmc_manifest_t *m) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "source", m->quantization.source);
  cJSON_AddNumberToObject(o, "bits", (double)m->quantization.bits);
  cJSON_AddNumberToObject(o, "group", (double)m->quantization.group);
  cJSON_AddNumberToObject(o, "tensors", (double)m->quantization.tensors);
  return o;
}

static cJSON *convention_to_json(const vlmc_manifest_t *m) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "encode_image", m->convention.encode_image);
  cJSON_AddStringToObject(o, "prefill", m->convention.prefill);
  cJSON_AddStringToObject(o, "decode", m->convention.decode);
  cJSON_AddStringToObject(o, "positions", m->convention.positions);
  return o;
}

vlmc_status_t vlmc_manifest_to_json(const vlmc_manifest_t *m, vlmc_strbuf_t *out) {
  if (!m->convention.encode_image || !m->convention.prefill || !m->convention.decode ||
      !m->convention.positions)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "manifest: the calling convention is not set");
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", "vlmc");
  cJSON_AddNumberToObject(root, "format_version", VLMC_MANIFEST_FORMAT_VERSION);
  cJSON_AddStringToObject(root, "model_family", m->model_family ? m->model_family : "");
  cJSON_AddStringToObject(root, "producer", m->producer ? m->producer : "");
  cJSON_AddStringToObject(root, "compile_options", m->compile_options ? m->compile_options : "");
  cJSON_AddStringToObject(root, "targets", m->targets ? m->targets : "ref");
  cJSON_AddItemToObject(root, "calling_convention", convention_to_json(m));
  cJSON *tokens = cJSON_AddObjectToObject(root, "tokens");
  cJSON_AddNumberToObject(tokens, "vocab_size", (double)m->vocab_size);
  if (m->max_positions > 0)
    cJSON_AddNumberToObject(tokens, "max_positions", (double)m->max_positions);
  cJSON_AddNumberToObject(tokens, "image_token_id", (double)m->image_token_id);
  cJSON_AddNumberToObject(tokens, "video_token_id", (double)m->video_token_id);
  cJSON_AddNumberToObject(tokens, "vision_start_token_id", (double)m->vision_start_token_id);
  cJSON_AddNumberToObject(tokens, "vision_end_token_id", (double)m->vision_end_token_id);
  cJSON_AddItemToObject(tokens, "eos_token_ids", int_array(m->eos_token_ids, (size_t)m->eos_count));
  cJSON_AddNumberToObject(root, "merge_size", (double)m->merge_size);
  cJSON_AddItemToObject(root, "preprocess", preprocess_to_json(&m->preprocess));
  cJSON_AddStringToObject(root, "chat_template_source",
                          m->chat_template_source ? m->chat_template_source : "");
  if (m->precision.compute) cJSON_AddItemToObject(root, "precision", precision_to_json(m));
  if (m->quantization.source)
    cJSON_AddItemToObject(root, "quantization", quantization_to_json(m));
  if (m->generation.present) cJSON_AddItemToObject(root, "generation", generation_to_json(m));
  cJSON *params = cJSON_AddObjectToObject(root, "params");
  cJSON_AddStringToObject(params, "storage", m->params_external ? "external" : "inline");
  cJSON *list = cJSON_AddArrayToObject(params, "tensors");
  for (size_t i = 0; i < m->num_params; ++i)
    cJSON_AddItemToArray(list, param_to_json(&m->params[i]));
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!text) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "manifest: out of memory");
  vlmc_strbuf_puts(out, text);
  free(text);
  return NULL;
}

/* ---- reading ---- */

typedef struct {
  const char *source;
} reader_t;

static vlmc_status_t field_error(const reader_t *r, const char *path, const char *expected) {
  return vlmc_status_make(VLMC_PARSE_ERROR, "%s: manifest: %s: expected %s", r->source, path,
                          expected);
}

static vlmc_status_t get_item(const reader_t *r, const cJSON *obj, const char *key,
                              const char *path, const cJSON **out) {
  *out = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!*out) return vlmc_status_make(VLMC_PARSE_ERROR, "%s: manifest: %s: missing", r->source, path);
  return NULL;
}

static vlmc_status_t get_int(const reader_t *r, const cJSON *obj, const char *key,
                             const char *path, int64_t min, int64_t *out) {
  const cJSON *item;
  VLMC_RETURN_IF_ERROR(get_item(r, obj, key, path, &item));
  double v = cJSON_IsNumber(item) ? item->valuedouble : NAN;
  if (!(v >= (double)min && v <= 9007199254740992.0) || v != floor(v))
    return field_error(r, path, min >= 0 ? "a non-negative integer" : "an integer");
  *out = (int64_t)v;
  return NULL;
}

static vlmc_status_t get_double(const reader_t *r, const cJSON *obj, const char *key,
                                const char *path, double *out) {
  const cJSON *item;
  VLMC_RETURN_IF_ERROR(get_item(r, obj, key, path, &item));
  if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble)) return field_error(r, path, "a number");
  *out = item->valuedouble;
  return NULL;
}

static vlmc_status_t get_string(const reader_t *r, const cJSON *obj, const char *key,
                                const char *path, char **out) {
  const cJSON *item;
  VLMC_RETURN_IF_ERROR(get_item(r, obj, key, path, &item));
  if (!cJSON_IsString(item)) return field_error(r, path, "a string");
  *out = strdup(item->valuestring);
  if (!*out) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", r->source);
  return NULL;
}

static vlmc_status_t get_object(const reader_t *r, const cJSON *obj, const char *key,
                                const char *path, const cJSON **out) {
  VLMC_RETURN_IF_ERROR(get_item(r, obj, key, path, out));
  if (!cJSON_IsObject(*out)) return field_error(r, path, "an object");
  return NULL;
}

static vlmc_status_t get_array(const reader_t *r, const cJSON *obj, const char *key,
                               const char *path, size_t max, const cJSON **out, size_t *out_n) {
  VLMC_RETURN_IF_ERROR(get_item(r, obj, key, path, out));
  if (!cJSON_IsArray(*out)) return field_error(r, path, "an array");
  *out_n = (size_t)cJSON_GetArraySize(*out);
  if (*out_n > max)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: manifest: %s: %zu entries, at most %zu",
                            r->source, path, *out_n, max);
  return NULL;
}

static vlmc_status_t get_hex64(const reader_t *r, const cJSON *obj, const char *key,
                               const char *path, uint64_t *out) {
  const cJSON *item;
  VLMC_RETURN_IF_ERROR(get_item(r, obj, key, path, &item));
  const char *s = cJSON_IsString(item) ? item->valuestring : NULL;
  char *end = NULL;
  if (s && strlen(s) == 16) *out = strtoull(s, &end, 16);
  if (!s || strlen(s) != 16 || !end || *end) return field_error(r, path, "16 hex digits");
  return NULL;
}

static vlmc_status_t read_doubles(const reader_t *r, const cJSON *obj, const char *key,
                                  const char *path, double out[3]) {
  const cJSON *a;
  size_t n;
  VLMC_RETURN_IF_ERROR(get_array(r, obj, key, path, 3, &a, &n));
  if (n != 3) return field_error(r, path, "3 numbers");
  size_t i = 0;
  const cJSON *v;
  cJSON_ArrayForEach(v, a) {
    if (!cJSON_IsNumber(v)) return field_error(r, path, "3 numbers");
    out[i++] = v->valuedouble;
  }
  return NULL;
}

static vlmc_status_t read_preprocess(const reader_t *r, const cJSON *o,
                                     vlmc_preprocess_params_t *p) {
  int64_t v;
  vlmc_preprocess_params_init(p);
  VLMC_RETURN_IF_ERROR(get_int(r, o, "min_pixels", "preprocess.min_pixels", 1, &p->min_pixels));
  VLMC_RETURN_IF_ERROR(get_int(r, o, "max_pixels", "preprocess.max_pixels", 1, &p->max_pixels));
  VLMC_RETURN_IF_ERROR(get_int(r, o, "patch_size", "preprocess.patch_size", 1, &v));
  p->patch_size = (int32_t)v;
  VLMC_RETURN_IF_ERROR(get_int(r, o, "temporal_patch_size", "preprocess.temporal_patch_size", 1,
                               &v));
  p->temporal_patch_size = (int32_t)v;
  VLMC_RETURN_IF_ERROR(get_int(r, o, "merge_size", "preprocess.merge_size", 1, &v));
  p->merge_size = (int32_t)v;
  VLMC_RETURN_IF_ERROR(read_doubles(r, o, "image_mean", "preprocess.image_mean", p->image_mean));
  VLMC_RETURN_IF_ERROR(read_doubles(r, o, "image_std", "preprocess.image_std", p->image_std));
  VLMC_RETURN_IF_ERROR(get_double(r, o, "rescale_factor", "preprocess.rescale_factor",
                                  &p->rescale_factor));
  char *resample = NULL;
  VLMC_RETURN_IF_ERROR(get_string(r, o, "resample", "preprocess.resample", &resample));
  bool known = strcmp(resample, "pil") == 0 || strcmp(resample, "torchvision") == 0;
  p->resample = strcmp(resample, "pil") == 0 ? VLMC_RESAMPLE_PIL : VLMC_RESAMPLE_TORCHVISION;
  free(resample);
  if (!known) return field_error(r, "preprocess.resample", "\"torchvision\" or \"pil\"");
  vlmc_status_t status = vlmc_preprocess_params_check(p);
  return vlmc_status_annotate(status, "%s: manifest: preprocess: ", r->source);
}

static vlmc_status_t read_param(const reader_t *r, const cJSON *o, size_t index, bool external,
                                vlmc_manifest_param_t *p) {
  char path[64];
  snprintf(path, sizeof path, "params.tensors[%zu]", index);
  if (!cJSON_IsObject(o)) return field_error(r, path, "an object");
  VLMC_RETURN_IF_ERROR(get_string(r, o, "name", path, &p->name));
  char *dtype = NULL;
  VLMC_RETURN_IF_ERROR(get_string(r, o, "dtype", path, &dtype));
  bool ok = vlmc_dtype_from_name(dtype, strlen(dtype), &p->dtype);
  free(dtype);
  if (!ok) return field_error(r, path, "a known dtype (f32, bf16, f16, ...)");
  const cJSON *shape;
  size_t rank;
  VLMC_RETURN_IF_ERROR(get_array(r, o, "shape", path, VLMC_IR_MAX_RANK, &shape, &rank));
  p->rank = (uint32_t)rank;
  size_t i = 0;
  const cJSON *d;
  cJSON_ArrayForEach(d, shape) {
    if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble != floor(d->valuedouble) ||
        d->valuedouble > 9007199254740992.0)
      return field_error(r, path, "a shape of non-negative integers");
    p->shape[i++] = (int64_t)d->valuedouble;
  }
  int64_t v;
  VLMC_RETURN_IF_ERROR(get_int(r, o, "offset", path, 0, &v));
  p->offset = (uint64_t)v;
  VLMC_RETURN_IF_ERROR(get_int(r, o, "nbytes", path, 0, &v));
  p->nbytes = (uint64_t)v;
  VLMC_RETURN_IF_ERROR(get_hex64(r, o, "checksum", path, &p->checksum));
  if (external) VLMC_RETURN_IF_ERROR(get_string(r, o, "file", path, &p->file));
  return NULL;
}

static vlmc_status_t read_params(const reader_t *r, const cJSON *root, vlmc_manifest_t *m) {
  const cJSON *params, *list;
  VLMC_RETURN_IF_ERROR(get_object(r, root, "params", "params", &params));
  char *storage = NULL;
  VLMC_RETURN_IF_ERROR(get_string(r, params, "storage", "params.storage", &storage));
  bool inline_storage = strcmp(storage, "inline") == 0;
  m->params_external = strcmp(storage, "external") == 0;
  free(storage);
  if (!inline_storage && !m->params_external)
    return field_error(r, "params.storage", "\"inline\" or \"external\"");
  size_t n;
  VLMC_RETURN_IF_ERROR(get_array(r, params, "tensors", "params.tensors", 1u << 20, &list, &n));
  m->params = calloc(n ? n : 1, sizeof *m->params);
  if (!m->params) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", r->source);
  const cJSON *item;
  cJSON_ArrayForEach(item, list) {
    size_t i = m->num_params++; /* counted before reading so that deinit frees a partial entry */
    VLMC_RETURN_IF_ERROR(read_param(r, item, i, m->params_external, &m->params[i]));
  }
  return NULL;
}

static vlmc_status_t read_tokens(const reader_t *r, const cJSON *root, vlmc_manifest_t *m) {
  const cJSON *t, *eos;
  VLMC_RETURN_IF_ERROR(get_object(r, root, "tokens", "tokens", &t));
  VLMC_RETURN_IF_ERROR(get_int(r, t, "vocab_size", "tokens.vocab_size", 1, &m->vocab_size));
  m->max_positions = 0; /* absent: unknown (compiled before it was recorded) */
  if (cJSON_GetObjectItemCaseSensitive(t, "max_positions"))
    VLMC_RETURN_IF_ERROR(get_int(r, t, "max_positions", "tokens.max_positions", 1,
                                 &m->max_positions));
  VLMC_RETURN_IF_ERROR(get_int(r, t, "image_token_id", "tokens.image_token_id", 0,
                               &m->image_token_id));
  VLMC_RETURN_IF_ERROR(get_int(r, t, "video_token_id", "tokens.video_token_id", 0,
                               &m->video_token_id));
  VLMC_RETURN_IF_ERROR(get_int(r, t, "vision_start_token_id", "tokens.vision_start_token_id", 0,
                               &m->vision_start_token_id));
  VLMC_RETURN_IF_ERROR(get_int(r, t, "vision_end_token_id", "tokens.vision_end_token_id", 0,
                               &m->vision_end_token_id));
  size_t n;
  VLMC_RETURN_IF_ERROR(get_array(r, t, "eos_token_ids", "tokens.eos_token_ids",
                                 VLMC_MANIFEST_MAX_EOS, &eos, &n));
  size_t i = 0;
  const cJSON *v;
  cJSON_ArrayForEach(v, eos) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= (double)m->vocab_size)
      return field_error(r, "tokens.eos_token_ids", "ids below tokens.vocab_size");
    m->eos_token_ids[i++] = (int64_t)v->valuedouble;
  }
  m->eos_count = (int)n;
  return NULL;
}

/* Absent: version 1, the manifests written before the field existed. */
static vlmc_status_t read_format_version(const reader_t *r, const cJSON *root,
                                         vlmc_manifest_t *m) {
  m->format_version = 1;
  if (!cJSON_GetObjectItemCaseSensitive(root, "format_version")) return NULL;
  VLMC_RETURN_IF_ERROR(get_int(r, root, "format_version", "format_version", 1,
                               &m->format_version));
  if (m->format_version > VLMC_MANIFEST_FORMAT_VERSION)
    return vlmc_status_make(VLMC_UNSUPPORTED, "%s: manifest format_version %lld is newer than "
                            "this runtime reads (%d)", r->source, (long long)m->format_version,
                            VLMC_MANIFEST_FORMAT_VERSION);
  return NULL;
}

static vlmc_status_t read_convention_name(const reader_t *r, const cJSON *o, const char *key,
                                          bool may_be_empty, char **out) {
  char path[64];
  snprintf(path, sizeof path, "calling_convention.%s", key);
  VLMC_RETURN_IF_ERROR(get_string(r, o, key, path, out));
  if (!may_be_empty && !**out) return field_error(r, path, "a function name");
  return NULL;
}

/* Version 1 carries no convention: the model family implies it. */
static vlmc_status_t read_convention(const reader_t *r, const cJSON *root, vlmc_manifest_t *m) {
  if (m->format_version < 2) {
    vlmc_status_t st = vlmc_manifest_set_default_convention(m, m->model_family);
    return vlmc_status_annotate(st, "%s: manifest (format_version 1, no calling_convention): ",
                                r->source);
  }
  const cJSON *o;
  VLMC_RETURN_IF_ERROR(get_object(r, root, "calling_convention", "calling_convention", &o));
  VLMC_RETURN_IF_ERROR(read_convention_name(r, o, "encode_image", true,
                                            &m->convention.encode_image));
  VLMC_RETURN_IF_ERROR(read_convention_name(r, o, "prefill", false, &m->convention.prefill));
  VLMC_RETURN_IF_ERROR(read_convention_name(r, o, "decode", false, &m->convention.decode));
  VLMC_RETURN_IF_ERROR(get_string(r, o, "positions", "calling_convention.positions",
                                  &m->convention.positions));
  if (!known_positions(m->convention.positions))
    return field_error(r, "calling_convention.positions", "\"mrope\" or \"plain\"");
  return NULL;
}

static vlmc_status_t read_module_list(const reader_t *r, const cJSON *o, vlmc_manifest_t *m) {
  const cJSON *list;
  VLMC_RETURN_IF_ERROR(get_item(r, o, "calibrated_modules", "precision.calibrated_modules",
                                &list));
  if (!cJSON_IsArray(list)) return field_error(r, "precision.calibrated_modules", "a list");
  vlmc_strbuf_t joined;
  vlmc_strbuf_init(&joined);
  const cJSON *item;
  cJSON_ArrayForEach(item, list) {
    if (!cJSON_IsString(item) || strchr(item->valuestring, ',')) {
      vlmc_strbuf_deinit(&joined);
      return field_error(r, "precision.calibrated_modules", "module names (strings, no commas)");
    }
    vlmc_strbuf_printf(&joined, "%s%s", joined.len ? "," : "", item->valuestring);
  }
  m->precision.calibrated_modules = vlmc_strbuf_take(&joined);
  if (!m->precision.calibrated_modules)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", r->source);
  return NULL;
}

/* Optional: artifacts compiled before it existed have none. */
static vlmc_status_t read_precision(const reader_t *r, const cJSON *root, vlmc_manifest_t *m) {
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "precision");
  if (!o) return NULL;
  if (!cJSON_IsObject(o)) return field_error(r, "precision", "an object");
  VLMC_RETURN_IF_ERROR(get_string(r, o, "compute", "precision.compute", &m->precision.compute));
  const cJSON *calibrated;
  VLMC_RETURN_IF_ERROR(get_item(r, o, "calibrated", "precision.calibrated", &calibrated));
  if (!cJSON_IsBool(calibrated)) return field_error(r, "precision.calibrated", "true or false");
  m->precision.calibrated = cJSON_IsTrue(calibrated);
  VLMC_RETURN_IF_ERROR(get_int(r, o, "upcasts_rule", "precision.upcasts_rule", 0,
                               &m->precision.upcasts_rule));
  VLMC_RETURN_IF_ERROR(get_int(r, o, "upcasts_calibrated", "precision.upcasts_calibrated", 0,
                               &m->precision.upcasts_calibrated));
  return read_module_list(r, o, m);
}

/* Optional: absent when no weight is quantized (and in artifacts from before it existed). */
static vlmc_status_t read_quantization(const reader_t *r, const cJSON *root, vlmc_manifest_t *m) {
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "quantization");
  if (!o) return NULL;
  if (!cJSON_IsObject(o)) return field_error(r, "quantization", "an object");
  VLMC_RETURN_IF_ERROR(get_string(r, o, "source", "quantization.source", &m->quantization.source));
  if (strcmp(m->quantization.source, "vlmc") && strcmp(m->quantization.source, "checkpoint"))
    return field_error(r, "quantization.source", "\"vlmc\" or \"checkpoint\"");
  VLMC_RETURN_IF_ERROR(get_int(r, o, "bits", "quantization.bits", 1, &m->quantization.bits));
  if (m->quantization.bits != 4 && m->quantization.bits != 8)
    return field_error(r, "quantization.bits", "4 or 8");
  VLMC_RETURN_IF_ERROR(get_int(r, o, "group", "quantization.group", 1, &m->quantization.group));
  return get_int(r, o, "tensors", "quantization.tensors", 0, &m->quantization.tensors);
}

/* Optional: absent when the checkpoint set no sampling field (and in older artifacts). */
static vlmc_status_t read_generation(const reader_t *r, const cJSON *root, vlmc_manifest_t *m) {
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "generation");
  if (!o) return NULL;
  if (!cJSON_IsObject(o)) return field_error(r, "generation", "an object");
  const cJSON *sample;
  VLMC_RETURN_IF_ERROR(get_item(r, o, "do_sample", "generation.do_sample", &sample));
  if (!cJSON_IsBool(sample)) return field_error(r, "generation.do_sample", "true or false");
  m->generation.do_sample = cJSON_IsTrue(sample);
  VLMC_RETURN_IF_ERROR(get_double(r, o, "temperature", "generation.temperature",
                                  &m->generation.temperature));
  if (!(m->generation.temperature >= 0)) return field_error(r, "generation.temperature", ">= 0");
  VLMC_RETURN_IF_ERROR(get_int(r, o, "top_k", "generation.top_k", 0, &m->generation.top_k));
  if (m->generation.top_k > (1 << 30)) return field_error(r, "generation.top_k", "<= 2^30");
  VLMC_RETURN_IF_ERROR(get_double(r, o, "top_p", "generation.top_p", &m->generation.top_p));
  if (!(m->generation.top_p > 0 && m->generation.top_p <= 1))
    return field_error(r, "generation.top_p", "a number in (0, 1]");
  VLMC_RETURN_IF_ERROR(get_double(r, o, "repetition_penalty", "generation.repetition_penalty",
                                  &m->generation.repetition_penalty));
  if (!(m->generation.repetition_penalty > 0 && m->generation.repetition_penalty <= 1e6))
    return field_error(r, "generation.repetition_penalty", "a number in (0, 1e6]");
  m->generation.present = true;
  return NULL;
}

static vlmc_status_t read_root(const reader_t *r, const cJSON *root, vlmc_manifest_t *m) {
  if (!cJSON_IsObject(root)) return field_error(r, "(top level)", "a JSON object");
  char *format = NULL;
  VLMC_RETURN_IF_ERROR(get_string(r, root, "format", "format", &format));
  bool ok = strcmp(format, "vlmc") == 0;
  free(format);
  if (!ok) return field_error(r, "format", "\"vlmc\"");
  VLMC_RETURN_IF_ERROR(read_format_version(r, root, m));
  VLMC_RETURN_IF_ERROR(get_string(r, root, "model_family", "model_family", &m->model_family));
  VLMC_RETURN_IF_ERROR(get_string(r, root, "producer", "producer", &m->producer));
  VLMC_RETURN_IF_ERROR(get_string(r, root, "compile_options", "compile_options",
                                  &m->compile_options));
  VLMC_RETURN_IF_ERROR(get_string(r, root, "targets", "targets", &m->targets));
  VLMC_RETURN_IF_ERROR(read_convention(r, root, m));
  VLMC_RETURN_IF_ERROR(read_tokens(r, root, m));
  /* 0: a text-only model (no vision tower; the convention has no image encoder) */
  VLMC_RETURN_IF_ERROR(get_int(r, root, "merge_size", "merge_size", 0, &m->merge_size));
  const cJSON *pre;
  VLMC_RETURN_IF_ERROR(get_object(r, root, "preprocess", "preprocess", &pre));
  VLMC_RETURN_IF_ERROR(read_preprocess(r, pre, &m->preprocess));
  VLMC_RETURN_IF_ERROR(get_string(r, root, "chat_template_source", "chat_template_source",
                                  &m->chat_template_source));
  VLMC_RETURN_IF_ERROR(read_precision(r, root, m));
  VLMC_RETURN_IF_ERROR(read_quantization(r, root, m));
  VLMC_RETURN_IF_ERROR(read_generation(r, root, m));
  return read_params(r, root, m);
}

vlmc_status_t vlmc_manifest_from_json(const char *source, const char *text, size_t len,
                                      vlmc_manifest_t *out) {
  vlmc_manifest_init(out);
  cJSON *root = cJSON_ParseWithLength(text, len);
  if (!root)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: manifest: not valid JSON", source);
  reader_t r = {source};
  vlmc_status_t status = read_root(&r, root, out);
  cJSON_Delete(root);
  if (status) vlmc_manifest_deinit(out);
  return status;
}
