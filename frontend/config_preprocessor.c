/* preprocessor_config.json and transformers 5.x processor_config.json (spec §1.4); see
 * config.h for the keys and the few defaults, which are Qwen2VLImageProcessor's and on which
 * the official files rely (they omit do_* flags, rescale_factor and resample). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/config.h"
#include "support/file.h"
#include "support/json.h"

#define MAX_PIXELS_LIMIT ((int64_t)1 << 40)
#define MAX_SIZE ((int64_t)1 << 16)

typedef struct {
  const char *file;
  const cJSON *object; /* where the keys are: the root, or processor_config's image_processor */
  const char *prefix;  /* "" or "image_processor" */
} pre_doc_t;

static vlmc_json_ref_t pre_ref(const pre_doc_t *doc, const char *key) {
  return vlmc_json_ref(doc->file, doc->object, doc->prefix, key);
}

/* An explicit min_pixels/max_pixels overrides size.shortest_edge/longest_edge. */
static vlmc_status_t parse_pixels(const pre_doc_t *doc, const char *key, const char *size_key,
                                  int64_t *out) {
  vlmc_json_ref_t ref = pre_ref(doc, key);
  if (!ref.node) {
    vlmc_json_ref_t size = pre_ref(doc, "size");
    VLMC_RETURN_IF_ERROR(vlmc_json_expect_object(&size));
    vlmc_json_ref_t edge = vlmc_json_ref(doc->file, size.node, size.path, size_key);
    if (edge.node)
      ref = edge;
    else
      snprintf(ref.also, sizeof ref.also, "%s", edge.path);
  }
  return vlmc_json_int_req(&ref, 1, MAX_PIXELS_LIMIT, out);
}

static vlmc_status_t parse_channel_triple(const pre_doc_t *doc, const char *key, bool positive,
                                          double out[3]) {
  vlmc_json_ref_t ref = pre_ref(doc, key);
  if (!ref.node) return vlmc_json_missing(&ref);
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_array(&ref, 3));
  int c = 0;
  const cJSON *node;
  cJSON_ArrayForEach(node, ref.node) { /* linear, like every walk of a JSON list */
    vlmc_json_ref_t element = vlmc_json_ref_item(&ref, node, c);
    VLMC_RETURN_IF_ERROR(vlmc_json_double_req(&element, &out[c]));
    if (positive && !(out[c] > 0))
      return vlmc_json_error(&element, VLMC_OUT_OF_RANGE, "expected a positive number, got %g",
                             out[c]);
    ++c;
  }
  return NULL;
}

static vlmc_status_t parse_flag(const pre_doc_t *doc, const char *key, bool *out) {
  vlmc_json_ref_t ref = pre_ref(doc, key);
  *out = true;
  return vlmc_json_bool_opt(&ref, out, NULL);
}

static vlmc_status_t parse_sizes(const pre_doc_t *doc, vlmc_preprocessor_config_t *config) {
  VLMC_RETURN_IF_ERROR(parse_pixels(doc, "min_pixels", "shortest_edge", &config->min_pixels));
  VLMC_RETURN_IF_ERROR(parse_pixels(doc, "max_pixels", "longest_edge", &config->max_pixels));
  if (config->min_pixels > config->max_pixels)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "%s: min_pixels %lld is larger than max_pixels %lld", doc->file,
                            (long long)config->min_pixels, (long long)config->max_pixels);
  vlmc_json_ref_t patch = pre_ref(doc, "patch_size");
  vlmc_json_ref_t temporal = pre_ref(doc, "temporal_patch_size");
  vlmc_json_ref_t merge = pre_ref(doc, "merge_size");
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&patch, 1, MAX_SIZE, &config->patch_size));
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&temporal, 1, MAX_SIZE, &config->temporal_patch_size));
  return vlmc_json_int_req(&merge, 1, MAX_SIZE, &config->merge_size);
}

static vlmc_status_t parse_pixel_ops(const pre_doc_t *doc, vlmc_preprocessor_config_t *config) {
  VLMC_RETURN_IF_ERROR(parse_channel_triple(doc, "image_mean", false, config->image_mean));
  VLMC_RETURN_IF_ERROR(parse_channel_triple(doc, "image_std", true, config->image_std));
  vlmc_json_ref_t rescale = pre_ref(doc, "rescale_factor");
  config->rescale_factor = 1.0 / 255.0;
  VLMC_RETURN_IF_ERROR(vlmc_json_double_opt(&rescale, &config->rescale_factor, NULL));
  if (!(config->rescale_factor > 0))
    return vlmc_json_error(&rescale, VLMC_OUT_OF_RANGE, "expected a positive number, got %g",
                           config->rescale_factor);
  vlmc_json_ref_t resample = pre_ref(doc, "resample");
  config->resample = 3;
  VLMC_RETURN_IF_ERROR(vlmc_json_int_opt(&resample, 0, 5, &config->resample, NULL));
  if (config->resample != 3)
    return vlmc_json_error(&resample, VLMC_UNSUPPORTED,
                           "%lld is not supported; vlmc resizes with bicubic (3)",
                           (long long)config->resample);
  VLMC_RETURN_IF_ERROR(parse_flag(doc, "do_resize", &config->do_resize));
  VLMC_RETURN_IF_ERROR(parse_flag(doc, "do_rescale", &config->do_rescale));
  VLMC_RETURN_IF_ERROR(parse_flag(doc, "do_normalize", &config->do_normalize));
  return parse_flag(doc, "do_convert_rgb", &config->do_convert_rgb);
}

/* Parses the document; `section` is NULL for preprocessor_config.json, "image_processor" for
 * processor_config.json. */
static vlmc_status_t parse_preprocessor(const char *text, size_t len, const char *file,
                                        const char *section, const char *source,
                                        vlmc_preprocessor_config_t *out_config) {
  memset(out_config, 0, sizeof *out_config);
  cJSON *root = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_json_parse_object(file, text, len, &root));
  pre_doc_t doc = {.file = file, .object = root, .prefix = ""};
  vlmc_status_t status = NULL;
  if (section) {
    vlmc_json_ref_t ref = vlmc_json_ref(file, root, "", section);
    status = ref.node ? vlmc_json_expect_object(&ref) : vlmc_json_missing(&ref);
    doc.object = ref.node;
    doc.prefix = section;
  }
  if (!status) status = parse_sizes(&doc, out_config);
  if (!status) status = parse_pixel_ops(&doc, out_config);
  out_config->source = source;
  cJSON_Delete(root);
  return status;
}

vlmc_status_t vlmc_preprocessor_config_parse(const char *text, size_t len, const char *file,
                                             vlmc_preprocessor_config_t *out_config) {
  return parse_preprocessor(text, len, file, NULL, "preprocessor_config.json", out_config);
}

vlmc_status_t vlmc_processor_config_parse(const char *text, size_t len, const char *file,
                                          vlmc_preprocessor_config_t *out_config) {
  return parse_preprocessor(text, len, file, "image_processor", "processor_config.json",
                            out_config);
}

/* Whether processor_config.json at `path` (already read) has an image_processor section. A
 * file that is not valid JSON counts as having one, so that its error is reported. */
static bool has_image_processor(const char *text, size_t len) {
  cJSON *root = cJSON_ParseWithLength(text, len);
  bool has = !root || cJSON_GetObjectItemCaseSensitive(root, "image_processor") != NULL;
  cJSON_Delete(root);
  return has;
}

static vlmc_status_t load_named(const char *dir, const char *name, bool processor,
                                vlmc_preprocessor_config_t *out_config, bool *out_found) {
  char *path = vlmc_path_join(dir, name), *text = NULL;
  size_t len = 0;
  if (!path) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", dir);
  vlmc_status_t status = vlmc_json_read_optional_file(path, &text, &len);
  *out_found = !status && text && (!processor || has_image_processor(text, len));
  if (*out_found)
    status = processor ? vlmc_processor_config_parse(text, len, path, out_config)
                       : vlmc_preprocessor_config_parse(text, len, path, out_config);
  free(text);
  free(path);
  return status;
}

vlmc_status_t vlmc_preprocessor_config_load(const char *dir,
                                            vlmc_preprocessor_config_t *out_config) {
  bool found = false;
  VLMC_RETURN_IF_ERROR(load_named(dir, "processor_config.json", true, out_config, &found));
  if (found) return NULL;
  VLMC_RETURN_IF_ERROR(load_named(dir, "preprocessor_config.json", false, out_config, &found));
  if (found) return NULL;
  return vlmc_status_make(VLMC_NOT_FOUND,
                          "%s: no image processor settings (neither processor_config.json with "
                          "image_processor nor preprocessor_config.json)",
                          dir);
}
