/* generation_config.json: stop ids and sampling settings (spec §5.3). Every key is optional;
 * a present key must have the right type and a sane value. */
#include <stdlib.h>
#include <string.h>

#include "frontend/config.h"
#include "support/json.h"

#define MAX_TOKEN_ID ((int64_t)INT32_MAX)

static vlmc_status_t parse_ids(const char *file, const cJSON *root,
                               vlmc_generation_config_t *config) {
  vlmc_json_ref_t eos = vlmc_json_ref(file, root, "", "eos_token_id");
  VLMC_RETURN_IF_ERROR(
      vlmc_json_id_list_opt(&eos, config->eos_token_ids, VLMC_CONFIG_MAX_EOS, &config->eos_count));
  vlmc_json_ref_t bos = vlmc_json_ref(file, root, "", "bos_token_id");
  VLMC_RETURN_IF_ERROR(
      vlmc_json_int_opt(&bos, 0, MAX_TOKEN_ID, &config->bos_token_id, &config->has_bos_token_id));
  vlmc_json_ref_t pad = vlmc_json_ref(file, root, "", "pad_token_id");
  return vlmc_json_int_opt(&pad, 0, MAX_TOKEN_ID, &config->pad_token_id, &config->has_pad_token_id);
}

/* Reads an optional number and checks lo < x (or lo <= x when `inclusive_lo`) and x <= hi. */
static vlmc_status_t parse_bounded(const char *file, const cJSON *root, const char *key, double lo,
                                   bool inclusive_lo, double hi, double *out, bool *out_present) {
  vlmc_json_ref_t ref = vlmc_json_ref(file, root, "", key);
  VLMC_RETURN_IF_ERROR(vlmc_json_double_opt(&ref, out, out_present));
  if (!*out_present) return NULL;
  bool ok = (inclusive_lo ? *out >= lo : *out > lo) && *out <= hi;
  if (!ok)
    return vlmc_json_error(&ref, VLMC_OUT_OF_RANGE, "expected a number in %s%g, %g], got %g",
                           inclusive_lo ? "[" : "(", lo, hi, *out);
  return NULL;
}

static vlmc_status_t parse_sampling(const char *file, const cJSON *root,
                                    vlmc_generation_config_t *config) {
  vlmc_json_ref_t do_sample = vlmc_json_ref(file, root, "", "do_sample");
  VLMC_RETURN_IF_ERROR(vlmc_json_bool_opt(&do_sample, &config->do_sample, &config->has_do_sample));
  VLMC_RETURN_IF_ERROR(parse_bounded(file, root, "temperature", 0, true, 1e6, &config->temperature,
                                     &config->has_temperature));
  vlmc_json_ref_t top_k = vlmc_json_ref(file, root, "", "top_k");
  VLMC_RETURN_IF_ERROR(
      vlmc_json_int_opt(&top_k, 0, MAX_TOKEN_ID, &config->top_k, &config->has_top_k));
  VLMC_RETURN_IF_ERROR(
      parse_bounded(file, root, "top_p", 0, false, 1, &config->top_p, &config->has_top_p));
  return parse_bounded(file, root, "repetition_penalty", 0, false, 1e6, &config->repetition_penalty,
                       &config->has_repetition_penalty);
}

vlmc_status_t vlmc_generation_config_parse(const char *text, size_t len, const char *file,
                                           vlmc_generation_config_t *out_config) {
  memset(out_config, 0, sizeof *out_config);
  cJSON *root = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_json_parse_object(file, text, len, &root));
  vlmc_status_t status = parse_ids(file, root, out_config);
  if (!status) status = parse_sampling(file, root, out_config);
  cJSON_Delete(root);
  return status;
}

vlmc_status_t vlmc_generation_config_load(const char *path, vlmc_generation_config_t *out_config) {
  char *text, *file;
  size_t len;
  VLMC_RETURN_IF_ERROR(
      vlmc_json_read_config_file(path, "generation_config.json", &text, &len, &file));
  vlmc_status_t status = vlmc_generation_config_parse(text, len, file, out_config);
  free(text);
  free(file);
  return status;
}
