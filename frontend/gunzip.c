/* gzip decompression (frontend/gunzip.h) with zlib, streamed in fixed-size chunks. */
#include "frontend/gunzip.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "support/strbuf.h"

enum { CHUNK_BYTES = 1 << 16 };

bool vlmc_is_gzip(const void *data, size_t len) {
  const unsigned char *p = data;
  return len >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

/* Hands zlib as much of the remaining input as one call takes (avail_in is 32-bit). */
static void feed_input(z_stream *z, const unsigned char *data, size_t len) {
  size_t left = len - (size_t)(z->next_in - data);
  z->avail_in = left > UINT32_MAX ? UINT32_MAX : (uInt)left;
}

/* One inflate step into `chunk`, appended to `out`. NULL to go on, *done when the input
 * ended exactly at the end of a gzip member. */
static vlmc_status_t inflate_step(const char *name, z_stream *z, const unsigned char *data,
                                  size_t len, unsigned char *chunk, vlmc_strbuf_t *out,
                                  bool *done) {
  feed_input(z, data, len);
  z->next_out = chunk;
  z->avail_out = CHUNK_BYTES;
  int rc = inflate(z, Z_NO_FLUSH);
  vlmc_strbuf_append(out, (const char *)chunk, CHUNK_BYTES - z->avail_out);
  if (out->failed) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: gunzip: out of memory", name);
  bool input_done = z->next_in == data + len;
  if (rc == Z_STREAM_END) {
    if (input_done) *done = true;
    else inflateReset(z); /* another gzip member follows */
    return NULL;
  }
  if (rc == Z_BUF_ERROR && input_done)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: truncated gzip data", name);
  if (rc != Z_OK && rc != Z_BUF_ERROR)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: corrupt gzip data (%s)", name,
                            z->msg ? z->msg : "inflate failed");
  return NULL;
}

vlmc_status_t vlmc_gunzip(const char *name, const void *data, size_t len, size_t max_bytes,
                          char **out_text, size_t *out_len) {
  *out_text = NULL;
  *out_len = 0;
  unsigned char *chunk = malloc(CHUNK_BYTES);
  if (!chunk) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: gunzip: out of memory", name);
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
    free(chunk);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: cannot start gzip decompression", name);
  }
  const unsigned char *in = data;
  z.next_in = (Bytef *)in;
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  vlmc_status_t status = NULL;
  bool done = false;
  while (!status && !done) {
    status = inflate_step(name, &z, in, len, chunk, &out, &done);
    if (!status && out.len > max_bytes)
      status = vlmc_status_make(VLMC_OUT_OF_RANGE, "%s: decompressed data exceeds %zu bytes", name,
                                max_bytes);
  }
  inflateEnd(&z);
  free(chunk);
  if (status) {
    vlmc_strbuf_deinit(&out);
    return status;
  }
  *out_len = out.len;
  *out_text = vlmc_strbuf_take(&out);
  if (!*out_text) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: gunzip: out of memory", name);
  return NULL;
}
