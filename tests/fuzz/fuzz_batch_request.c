/* Fuzzes the request lines of vlmc-run --batch (runtime/batch.h): each line of the input, cut
 * as vlmc-run cuts them. A line is either refused with a message naming it, or gives a request
 * within the documented limits (a prompt or token ids, not both) whose id is JSON text that
 * parses back. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "runtime/batch.h"

static void parse_one(const char *name, const char *text, size_t len) {
  vlmc_batch_request_t q;
  vlmc_status_t status = vlmc_batch_request_parse(name, text, len, &q);
  if (status) {
    assert(q.doc == NULL && strstr(vlmc_status_message(status), name) != NULL);
    vlmc_status_free(status);
    return;
  }
  assert(q.doc != NULL && q.num_images <= VLMC_BATCH_MAX_IMAGES);
  /* a text prompt or a non-empty list of ids, never both */
  assert((q.prompt != NULL) != (q.input_ids != NULL));
  assert(q.input_ids ? q.num_input_ids > 0 && q.system == NULL : q.num_input_ids == 0);
  for (size_t i = 0; i < q.num_input_ids; ++i)
    assert(q.input_ids[i] >= 0 && q.input_ids[i] <= INT32_MAX);
  assert(q.max_new_tokens >= 0 && q.max_new_tokens <= VLMC_BATCH_MAX_NEW_TOKENS);
  for (size_t i = 0; i < q.num_images; ++i) assert(q.images[i] && *q.images[i]);
  assert(strlen(q.id) <= VLMC_BATCH_MAX_ID);
  if (*q.id) {
    cJSON *id = cJSON_Parse(q.id);
    assert(id != NULL && (cJSON_IsString(id) || cJSON_IsNumber(id)));
    cJSON_Delete(id);
  }
  vlmc_batch_request_deinit(&q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  int number = 0;
  for (size_t start = 0; start < size;) {
    const char *nl = memchr(text + start, '\n', size - start);
    size_t end = nl ? (size_t)(nl - text) : size, len = end - start;
    while (len > 0 && text[start + len - 1] == '\r') --len;
    char name[32];
    snprintf(name, sizeof name, "batch:%d", ++number);
    if (len > 0) parse_one(name, text + start, len);
    start = end + 1;
  }
  return 0;
}
