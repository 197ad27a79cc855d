/* A growable, always NUL-terminated character buffer for printers and messages. */
#ifndef VLMC_SUPPORT_STRBUF_H
#define VLMC_SUPPORT_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "support/status.h"

typedef struct {
  char *data; /* NUL-terminated; NULL until the first append */
  size_t len;
  size_t capacity;
  bool failed; /* set once an allocation failed; later appends are ignored */
} vlmc_strbuf_t;

void vlmc_strbuf_init(vlmc_strbuf_t *buf);
void vlmc_strbuf_deinit(vlmc_strbuf_t *buf);
void vlmc_strbuf_clear(vlmc_strbuf_t *buf);
void vlmc_strbuf_append(vlmc_strbuf_t *buf, const char *text, size_t len);
void vlmc_strbuf_puts(vlmc_strbuf_t *buf, const char *text);
void vlmc_strbuf_putc(vlmc_strbuf_t *buf, char c);
void vlmc_strbuf_printf(vlmc_strbuf_t *buf, const char *fmt, ...) VLMC_PRINTF(2, 3);
/* "" when empty; borrowed. */
const char *vlmc_strbuf_cstr(const vlmc_strbuf_t *buf);
/* Transfers ownership of the malloc'd text to the caller (never NULL unless failed). */
char *vlmc_strbuf_take(vlmc_strbuf_t *buf);

/* The 1-based line and column of byte `offset` of `text`, for error locations (size_t: a
 * multi-gigabyte text has more lines than an int holds). */
void vlmc_text_line_col(const char *text, size_t offset, size_t *out_line, size_t *out_col);

#endif
