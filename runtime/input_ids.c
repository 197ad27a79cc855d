/* Token id lists (runtime/input_ids.h). */
#include "runtime/input_ids.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>

#include "support/json.h"

/* Element `index` as a token id, or an error saying what is wrong with it. */
static vlmc_status_t read_id(const char *name, const cJSON *item, size_t index, int64_t *out) {
  if (cJSON_IsArray(item))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: [%zu]: expected a token id, got a nested list",
                            name, index);
  if (!cJSON_IsNumber(item))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: [%zu]: expected a token id, got %s", name,
                            index, vlmc_json_kind(item));
  double v = item->valuedouble;
  if (v < 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: [%zu]: %g is negative: a token id is 0 or more",
                            name, index, v);
  /* Checked before any conversion: casting a double beyond int64 (1e300) is undefined. */
  if (!(v <= (double)VLMC_TOKEN_ID_MAX))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: [%zu]: %g is larger than any token id (at "
                            "most %lld)", name, index, v, (long long)VLMC_TOKEN_ID_MAX);
  if (v != floor(v))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: [%zu]: %g is not an integer", name, index, v);
  *out = (int64_t)v;
  return NULL;
}

/* The list's elements, walked once (cJSON_GetArrayItem(i) from the head would be quadratic). */
static vlmc_status_t read_list(const char *name, const cJSON *list, int64_t **out, size_t *out_n) {
  size_t n = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, list) ++n;
  if (n == 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: the list of token ids is empty", name);
  int64_t *ids = malloc(n * sizeof *ids);
  if (!ids) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", name);
  size_t i = 0;
  cJSON_ArrayForEach(item, list) {
    vlmc_status_t status = read_id(name, item, i, &ids[i]);
    if (status) {
      free(ids);
      return status;
    }
    ++i;
  }
  *out = ids;
  *out_n = n;
  return NULL;
}

vlmc_status_t vlmc_parse_token_ids(const char *name, const char *text, size_t len, int64_t **out,
                                   size_t *out_n) {
  *out = NULL;
  *out_n = 0;
  cJSON *root = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_json_parse_document(name, text, len, &root));
  vlmc_status_t status =
      cJSON_IsArray(root)
          ? read_list(name, root, out, out_n)
          : vlmc_status_make(VLMC_PARSE_ERROR, "%s: expected a JSON list of token ids, got %s",
                             name, vlmc_json_kind(root));
  cJSON_Delete(root);
  return status;
}
