/* Fuzzes the gzip decompression of the tokenizer (frontend/gunzip.h) under a small output
 * limit, as the artifact's `tokenizer` section and a checkpoint's tokenizer.json.gz are read.
 * Whatever the input: a refusal names it; a success is NUL-terminated, within the limit, and
 * gzip of the output decompresses back to the same bytes. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "frontend/gunzip.h"

/* Small enough that a gzip bomb is refused at once; larger than several 64 KiB chunks. */
enum { MAX_OUTPUT = 256 * 1024 };

/* `text` as one gzip member (level 1: the property checked is the format, not the ratio). */
static unsigned char *gzip(const char *text, size_t len, size_t *out_len) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return NULL;
  size_t cap = deflateBound(&z, (uLong)len) + 32;
  unsigned char *out = malloc(cap);
  z.next_in = (Bytef *)text;
  z.avail_in = (uInt)len;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  int rc = out ? deflate(&z, Z_FINISH) : Z_MEM_ERROR;
  *out_len = cap - z.avail_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) {
    free(out);
    return NULL;
  }
  return out;
}

static void check_round_trip(const char *text, size_t len) {
  size_t packed_len = 0;
  unsigned char *packed = gzip(text, len, &packed_len);
  assert(packed != NULL && vlmc_is_gzip(packed, packed_len));
  char *again = NULL;
  size_t again_len = 0;
  vlmc_status_t status = vlmc_gunzip("again.gz", packed, packed_len, MAX_OUTPUT, &again, &again_len);
  assert(status == NULL && again_len == len && memcmp(again, text, len) == 0);
  free(again);
  free(packed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = NULL;
  size_t len = 0;
  vlmc_status_t status = vlmc_gunzip("fuzz.gz", data, size, MAX_OUTPUT, &text, &len);
  if (status) {
    assert(text == NULL && len == 0 && strstr(vlmc_status_message(status), "fuzz.gz") != NULL);
    vlmc_status_free(status);
    return 0;
  }
  assert(text != NULL && len <= MAX_OUTPUT && text[len] == '\0');
  check_round_trip(text, len);
  free(text);
  return 0;
}
