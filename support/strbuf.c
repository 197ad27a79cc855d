#include "support/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/checked_math.h"

void vlmc_strbuf_init(vlmc_strbuf_t *buf) {
  buf->data = NULL;
  buf->len = 0;
  buf->capacity = 0;
  buf->failed = false;
}

void vlmc_strbuf_deinit(vlmc_strbuf_t *buf) {
  free(buf->data);
  vlmc_strbuf_init(buf);
}

void vlmc_strbuf_clear(vlmc_strbuf_t *buf) {
  buf->len = 0;
  if (buf->data) buf->data[0] = '\0';
}

static bool strbuf_reserve(vlmc_strbuf_t *buf, size_t extra) {
  size_t need;
  if (buf->failed || !vlmc_add_size(buf->len, extra, &need) || !vlmc_add_size(need, 1, &need)) {
    buf->failed = true;
    return false;
  }
  if (need <= buf->capacity) return true;
  size_t capacity = buf->capacity ? buf->capacity : 64;
  while (capacity < need) {
    if (!vlmc_mul_size(capacity, 2, &capacity)) {
      buf->failed = true;
      return false;
    }
  }
  char *grown = realloc(buf->data, capacity);
  if (!grown) {
    buf->failed = true;
    return false;
  }
  buf->data = grown;
  buf->capacity = capacity;
  return true;
}

void vlmc_strbuf_append(vlmc_strbuf_t *buf, const char *text, size_t len) {
  if (!strbuf_reserve(buf, len)) return;
  if (len) memcpy(buf->data + buf->len, text, len);
  buf->len += len;
  buf->data[buf->len] = '\0';
}

void vlmc_strbuf_puts(vlmc_strbuf_t *buf, const char *text) {
  vlmc_strbuf_append(buf, text, strlen(text));
}

void vlmc_strbuf_putc(vlmc_strbuf_t *buf, char c) { vlmc_strbuf_append(buf, &c, 1); }

void vlmc_strbuf_printf(vlmc_strbuf_t *buf, const char *fmt, ...) {
  va_list ap, copy;
  va_start(ap, fmt);
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n > 0 && strbuf_reserve(buf, (size_t)n)) {
    vsnprintf(buf->data + buf->len, (size_t)n + 1, fmt, ap);
    buf->len += (size_t)n;
  }
  va_end(ap);
}

const char *vlmc_strbuf_cstr(const vlmc_strbuf_t *buf) { return buf->data ? buf->data : ""; }

char *vlmc_strbuf_take(vlmc_strbuf_t *buf) {
  if (buf->failed) {
    vlmc_strbuf_deinit(buf);
    return NULL;
  }
  if (!buf->data) strbuf_reserve(buf, 0);
  if (buf->data) buf->data[buf->len] = '\0';
  char *out = buf->data;
  vlmc_strbuf_init(buf);
  return out;
}

void vlmc_text_line_col(const char *text, size_t offset, size_t *out_line, size_t *out_col) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset; ++i) {
    col = text[i] == '\n' ? 1 : col + 1;
    if (text[i] == '\n') ++line;
  }
  *out_line = line;
  *out_col = col;
}
