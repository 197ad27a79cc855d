/* Batch requests (runtime/batch.h). */
#include "runtime/batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/input_ids.h"
#include "support/json.h"

static const char *const kKeys[] = {"id", "prompt", "input_ids", "images", "system",
                                     "max_new_tokens"};

static vlmc_status_t check_keys(const char *name, const cJSON *root) {
  const cJSON *item;
  cJSON_ArrayForEach(item, root) {
    bool known = false;
    for (size_t i = 0; i < sizeof kKeys / sizeof *kKeys; ++i)
      known = known || strcmp(item->string, kKeys[i]) == 0;
    if (!known)
      return vlmc_status_make(VLMC_PARSE_ERROR, "%s: unknown key \"%.64s\" (a request has id, "
                              "prompt or input_ids, images, system, max_new_tokens)", name,
                              item->string);
  }
  return NULL;
}

/* The id as JSON text: a string or an integer, echoed as given. */
static vlmc_status_t read_id(const char *name, const cJSON *root, vlmc_batch_request_t *out) {
  vlmc_json_ref_t ref = vlmc_json_ref(name, root, "", "id");
  if (!ref.node) return NULL;
  if (cJSON_IsNumber(ref.node)) {
    int64_t v = 0;
    VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&ref, INT64_MIN / 2, INT64_MAX / 2, &v));
    snprintf(out->id, sizeof out->id, "%lld", (long long)v);
    return NULL;
  }
  const char *text = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&ref, &text));
  vlmc_strbuf_t quoted;
  vlmc_strbuf_init(&quoted);
  vlmc_json_write_string(&quoted, text);
  vlmc_status_t status = NULL;
  if (quoted.failed)
    status = vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", name);
  else if (quoted.len > VLMC_BATCH_MAX_ID)
    status = vlmc_json_error(&ref, VLMC_PARSE_ERROR, "longer than %d bytes as JSON",
                             VLMC_BATCH_MAX_ID);
  else
    memcpy(out->id, quoted.data, quoted.len + 1);
  vlmc_strbuf_deinit(&quoted);
  return status;
}

static vlmc_status_t read_images(const char *name, const cJSON *root, vlmc_batch_request_t *out) {
  vlmc_json_ref_t list = vlmc_json_ref(name, root, "", "images");
  if (!list.node) return NULL;
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_array(&list, -1));
  int index = 0;
  const cJSON *element;
  cJSON_ArrayForEach(element, list.node) {
    vlmc_json_ref_t item = vlmc_json_ref_item(&list, element, index++);
    if (out->num_images == VLMC_BATCH_MAX_IMAGES)
      return vlmc_json_error(&list, VLMC_PARSE_ERROR, "more than %d images",
                             VLMC_BATCH_MAX_IMAGES);
    const char *path = NULL;
    VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&item, &path));
    if (!*path) return vlmc_json_error(&item, VLMC_PARSE_ERROR, "an empty path");
    out->images[out->num_images++] = path;
  }
  return NULL;
}

/* "input_ids", through the one parser of token-id lists (runtime/input_ids.h), so that a batch
 * line accepts and refuses what --input-ids does, with the same messages. */
static vlmc_status_t read_input_ids(const char *name, const cJSON *node,
                                    vlmc_batch_request_t *out) {
  char *text = cJSON_PrintUnformatted(node);
  if (!text) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", name);
  char where[160];
  snprintf(where, sizeof where, "%s: input_ids", name);
  vlmc_status_t status =
      vlmc_parse_token_ids(where, text, strlen(text), &out->input_ids, &out->num_input_ids);
  cJSON_free(text);
  return status;
}

/* The prompt: text ("prompt", rendered with the chat template) or token ids ("input_ids",
 * the whole prompt as the model sees it: no template, so read_request refuses "system"). */
static vlmc_status_t read_prompt(const char *name, const cJSON *root, vlmc_batch_request_t *out) {
  vlmc_json_ref_t prompt = vlmc_json_ref(name, root, "", "prompt");
  vlmc_json_ref_t ids = vlmc_json_ref(name, root, "", "input_ids");
  if (prompt.node && ids.node)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: a request has a prompt or input_ids, not "
                            "both", name);
  if (!ids.node) return vlmc_json_string_req(&prompt, &out->prompt);
  return read_input_ids(name, ids.node, out);
}

static vlmc_status_t read_request(const char *name, const cJSON *root, vlmc_batch_request_t *out) {
  VLMC_RETURN_IF_ERROR(check_keys(name, root));
  VLMC_RETURN_IF_ERROR(read_id(name, root, out));
  VLMC_RETURN_IF_ERROR(read_prompt(name, root, out));
  vlmc_json_ref_t system = vlmc_json_ref(name, root, "", "system");
  if (system.node && out->input_ids)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: system goes with a text prompt; input_ids "
                            "are the whole prompt already", name);
  VLMC_RETURN_IF_ERROR(vlmc_json_string_opt(&system, &out->system, NULL));
  VLMC_RETURN_IF_ERROR(read_images(name, root, out));
  vlmc_json_ref_t max_new = vlmc_json_ref(name, root, "", "max_new_tokens");
  int64_t n = 0;
  VLMC_RETURN_IF_ERROR(vlmc_json_int_opt(&max_new, 1, VLMC_BATCH_MAX_NEW_TOKENS, &n, NULL));
  out->max_new_tokens = (int)n;
  return NULL;
}

vlmc_status_t vlmc_batch_request_parse(const char *name, const char *text, size_t len,
                                       vlmc_batch_request_t *out) {
  memset(out, 0, sizeof *out);
  cJSON *root = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_json_parse_document(name, text, len, &root));
  vlmc_status_t status =
      cJSON_IsObject(root)
          ? read_request(name, root, out)
          : vlmc_status_make(VLMC_PARSE_ERROR, "%s: expected a JSON object (a request), got %s",
                             name, vlmc_json_kind(root));
  if (status) {
    cJSON_Delete(root);
    free(out->input_ids);
    memset(out, 0, sizeof *out);
    return status;
  }
  out->doc = root;
  return NULL;
}

void vlmc_batch_request_deinit(vlmc_batch_request_t *request) {
  cJSON_Delete(request->doc);
  free(request->input_ids);
  memset(request, 0, sizeof *request);
}
