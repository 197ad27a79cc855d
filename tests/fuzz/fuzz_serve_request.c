/* Fuzzes vlmc-serve's chat-completions bodies (tools/serve_json.h), base64 data-URI images
 * included: a body is either refused with a message or gives a request within the
 * documented limits. File images are off (the fuzzer must not read the machine's files). */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "tools/serve_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  serve_request_t q;
  vlmc_status_t status = serve_request_parse((const char *)data, size, false, &q);
  if (status) {
    assert(vlmc_status_message(status)[0] != '\0');
    vlmc_status_free(status);
    return 0;
  }
  assert(q.num_images <= SERVE_MAX_IMAGES && q.num_stop <= SERVE_MAX_STOPS);
  assert(q.max_tokens >= 0 && q.max_tokens <= SERVE_MAX_TOKENS);
  for (size_t i = 0; i < q.num_stop; ++i) assert(q.stop[i] && q.stop[i][0]);
  assert(!q.has_top_p || (q.top_p > 0 && q.top_p <= 1));
  serve_request_deinit(&q);
  return 0;
}
