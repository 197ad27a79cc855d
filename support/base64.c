#include "support/base64.h"

#include <stdbool.h>
#include <stdlib.h>

/* 0..63 for the alphabet, -1 otherwise ('=' is handled by the caller). */
static int base64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

vlmc_status_t vlmc_base64_decode(const char *text, size_t len, uint8_t **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  if (len % 4)
    return vlmc_status_make(VLMC_PARSE_ERROR, "base64: the length (%zu) is not a multiple of 4",
                            len);
  size_t pad = 0;
  if (len >= 1 && text[len - 1] == '=') pad = 1;
  if (len >= 2 && text[len - 2] == '=') pad = 2;
  uint8_t *bytes = malloc(len / 4 * 3 + 1);
  if (!bytes) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "base64: out of memory");
  size_t n = 0;
  for (size_t i = 0; i < len; i += 4) {
    bool last = i + 4 == len;
    int v[4];
    for (size_t k = 0; k < 4; ++k) {
      unsigned char c = (unsigned char)text[i + k];
      bool padding = last && k >= 4 - pad;
      v[k] = padding ? 0 : base64_value(c);
      if (v[k] < 0) {
        free(bytes);
        return vlmc_status_make(VLMC_PARSE_ERROR, "base64: a character outside the alphabet at "
                                "offset %zu", i + k);
      }
    }
    uint32_t word = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                    (uint32_t)v[3];
    size_t keep = last ? 3 - pad : 3;
    /* the bits past the last byte must be zero (canonical encoding) */
    if (last && pad && (word & ((1u << (8 * pad)) - 1))) {
      free(bytes);
      return vlmc_status_make(VLMC_PARSE_ERROR, "base64: non-zero padding bits at offset %zu", i);
    }
    bytes[n++] = (uint8_t)(word >> 16);
    if (keep > 1) bytes[n++] = (uint8_t)(word >> 8);
    if (keep > 2) bytes[n++] = (uint8_t)word;
  }
  *out = bytes;
  *out_len = n;
  return NULL;
}
