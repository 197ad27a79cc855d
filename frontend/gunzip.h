/* gzip decompression for the tokenizer (a checkpoint's tokenizer.json.gz, and the artifact's
 * `tokenizer` section, which keeps the checkpoint's compression). One implementation, so that
 * both places accept the same inputs (every member of a multi-member file, as gunzip does)
 * and refuse the same ones with the same messages. */
#ifndef VLMC_FRONTEND_GUNZIP_H
#define VLMC_FRONTEND_GUNZIP_H

#include <stdbool.h>
#include <stddef.h>

#include "support/status.h"

/* True when `data` starts with the gzip magic (1f 8b). */
bool vlmc_is_gzip(const void *data, size_t len);

/* Inflates `len` bytes of gzip data into a NUL-terminated malloc'd buffer (*out_len excludes
 * the NUL). `name` names the input in messages ("tokenizer.json.gz: truncated gzip data");
 * more than `max_bytes` of output is refused rather than exhausting memory on a gzip bomb. */
vlmc_status_t vlmc_gunzip(const char *name, const void *data, size_t len, size_t max_bytes,
                          char **out_text, size_t *out_len);

#endif
