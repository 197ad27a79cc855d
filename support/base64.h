/* Base64 decoding (RFC 4648, the standard alphabet), for the images that vlmc-serve receives
 * as data URIs. Strict: the input is untrusted, so anything that is not canonical base64
 * (a character outside the alphabet, a length that is not a multiple of 4, padding anywhere but
 * at the end, non-zero bits after the last byte) is refused rather than guessed at. */
#ifndef VLMC_SUPPORT_BASE64_H
#define VLMC_SUPPORT_BASE64_H

#include <stddef.h>
#include <stdint.h>

#include "support/status.h"

/* Decodes `len` characters of `text` into a malloc'd buffer (*out, *out_len bytes; the caller
 * frees it). Refused with VLMC_PARSE_ERROR and the offending offset; *out is NULL then. */
vlmc_status_t vlmc_base64_decode(const char *text, size_t len, uint8_t **out, size_t *out_len);

#endif
