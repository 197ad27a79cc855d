/* JSON string literals for the line-oriented tokenizer tools and fixtures. cJSON cannot be
 * used here: its strings end at the first NUL, and "\u0000" is a valid input string. */
#include <stdio.h>

#include "frontend/tokenizer_internal.h"

static size_t skip_json_space(const char *text, size_t len, size_t i) {
  while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) ++i;
  return i;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Reads the four hex digits after "\u" at text[i]; false when they are not there. */
static bool read_hex4(const char *text, size_t len, size_t i, uint32_t *out) {
  if (len < 4 || i > len - 4) return false;
  uint32_t value = 0;
  for (size_t k = 0; k < 4; ++k) {
    int digit = hex_value(text[i + k]);
    if (digit < 0) return false;
    value = value * 16 + (uint32_t)digit;
  }
  *out = value;
  return true;
}

static vlmc_status_t column_error(size_t index, const char *what) {
  return vlmc_status_make(VLMC_PARSE_ERROR, "column %zu: %s", index + 1, what);
}

/* Decodes the escape at text[*io] (just after the backslash) and advances *io past it. */
static vlmc_status_t decode_escape(const char *text, size_t len, size_t *io, vlmc_strbuf_t *out) {
  size_t i = *io;
  if (i >= len) return column_error(i, "unterminated string");
  static const char simple_from[] = "\"\\/bfnrt", simple_to[] = "\"\\/\b\f\n\r\t";
  for (size_t k = 0; simple_from[k]; ++k) {
    if (text[i] == simple_from[k]) {
      vlmc_strbuf_putc(out, simple_to[k]);
      *io = i + 1;
      return NULL;
    }
  }
  if (text[i] != 'u') return column_error(i - 1, "unknown escape sequence");
  uint32_t cp;
  if (!read_hex4(text, len, i + 1, &cp))
    return column_error(i - 1, "expected \\u and 4 hex digits");
  size_t next = i + 5;
  if (cp >= 0xDC00 && cp <= 0xDFFF) return column_error(i - 1, "lone low surrogate");
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    uint32_t low;
    if (next + 1 >= len || text[next] != '\\' || text[next + 1] != 'u' ||
        !read_hex4(text, len, next + 2, &low) || low < 0xDC00 || low > 0xDFFF)
      return column_error(i - 1, "lone high surrogate (not followed by \\uDC00..\\uDFFF)");
    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    next += 6;
  }
  uint8_t utf8[4];
  vlmc_strbuf_append(out, (const char *)utf8, vlmc_tok_utf8_put(cp, utf8));
  *io = next;
  return NULL;
}

vlmc_status_t vlmc_tokenizer_json_string_decode(const char *text, size_t len, vlmc_strbuf_t *out) {
  size_t i = skip_json_space(text, len, 0);
  if (i >= len || text[i] != '"') return column_error(i, "expected a JSON string");
  ++i;
  for (;;) {
    if (i >= len) return column_error(i, "unterminated string");
    uint8_t c = (uint8_t)text[i];
    if (c == '"') break;
    if (c == '\\') {
      ++i;
      VLMC_RETURN_IF_ERROR(decode_escape(text, len, &i, out));
    } else if (c < 0x20) {
      return column_error(i, "raw control character in a string (escape it)");
    } else {
      uint32_t cp;
      size_t n = vlmc_tok_utf8_next((const uint8_t *)text + i, len - i, &cp);
      if (n == 0) return column_error(i, "invalid UTF-8");
      vlmc_strbuf_append(out, text + i, n);
      i += n;
    }
  }
  i = skip_json_space(text, len, i + 1);
  if (i != len) return column_error(i, "unexpected text after the string");
  if (out->failed) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "JSON string");
  return NULL;
}

void vlmc_tokenizer_json_string_encode(const char *text, size_t len, vlmc_strbuf_t *out) {
  vlmc_strbuf_putc(out, '"');
  for (size_t i = 0; i < len; ++i) {
    uint8_t c = (uint8_t)text[i];
    switch (c) {
      case '"': vlmc_strbuf_puts(out, "\\\""); break;
      case '\\': vlmc_strbuf_puts(out, "\\\\"); break;
      case '\n': vlmc_strbuf_puts(out, "\\n"); break;
      case '\r': vlmc_strbuf_puts(out, "\\r"); break;
      case '\t': vlmc_strbuf_puts(out, "\\t"); break;
      default:
        if (c < 0x20 || c == 0x7F)
          vlmc_strbuf_printf(out, "\\u%04x", c);
        else
          vlmc_strbuf_putc(out, (char)c);
    }
  }
  vlmc_strbuf_putc(out, '"');
}
