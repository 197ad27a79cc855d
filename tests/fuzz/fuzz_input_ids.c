/* Fuzzes the token id lists of vlmc-run (runtime/input_ids.h): the whole input as an
 * --input-ids file, then each of its lines as a chat turn's ids, cut the way vlmc-run cuts
 * stdin lines. A list is either refused with a message naming the text, or gives ids in
 * [0, VLMC_TOKEN_ID_MAX] that print back to a list parsing to the same ids. */
#include <assert.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/input_ids.h"
#include "support/strbuf.h"

/* The ids written back as a list and read again: the same ids. */
static void check_round_trip(const int64_t *ids, size_t n) {
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  vlmc_strbuf_append(&text, "[", 1);
  for (size_t i = 0; i < n; ++i) vlmc_strbuf_printf(&text, "%s%" PRId64, i ? "," : "", ids[i]);
  vlmc_strbuf_append(&text, "]", 1);
  int64_t *again = NULL;
  size_t m = 0;
  vlmc_status_t status = vlmc_parse_token_ids("again", text.data, text.len, &again, &m);
  assert(status == NULL && m == n && memcmp(again, ids, n * sizeof *ids) == 0);
  free(again);
  vlmc_strbuf_deinit(&text);
}

static void parse_one(const char *name, const char *text, size_t len) {
  int64_t *ids = NULL;
  size_t n = 0;
  vlmc_status_t status = vlmc_parse_token_ids(name, text, len, &ids, &n);
  if (status) {
    assert(ids == NULL && n == 0 && strstr(vlmc_status_message(status), name) != NULL);
    vlmc_status_free(status);
    return;
  }
  assert(ids != NULL && n > 0);
  for (size_t i = 0; i < n; ++i) assert(ids[i] >= 0 && ids[i] <= VLMC_TOKEN_ID_MAX);
  check_round_trip(ids, n);
  free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  parse_one("ids.json", text, size);
  /* As vlmc-run -i reads stdin: one turn per line, line ends stripped, empty lines skipped. */
  int number = 0;
  for (size_t start = 0; start < size;) {
    const char *nl = memchr(text + start, '\n', size - start);
    size_t end = nl ? (size_t)(nl - text) : size, len = end - start;
    while (len > 0 && text[start + len - 1] == '\r') --len;
    char name[32];
    snprintf(name, sizeof name, "stdin:%d", ++number);
    if (len > 0) parse_one(name, text + start, len);
    start = end + 1;
  }
  return 0;
}
