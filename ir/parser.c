/* The text form's parser: a hand-written lexer and a recursive-descent parser over the grammar
 * of docs/ir.md. Every malformed input gets one located diagnostic,
 *   file:line:col: error: expected ...
 *     <the source line>
 *     <a caret under the column>
 * and never a crash. The grammar has no nesting beyond a function body, so hostile input cannot
 * drive recursion; sizes (source, identifiers, lists, ops) have hard limits (ir.h).
 * The parser checks syntax, names and attribute schemas; types are the verifier's business. */
#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/internal.h"
#include "support/checked_math.h"

enum {
  MAX_ATTRS = 16,  /* attribute slots of one op (ops.def has at most 5) */
  MAX_ARGS = 4096, /* arguments of one function */
};

/* ---- tokens ---- */

typedef enum {
  TOK_EOF,
  TOK_IDENT,  /* f32, add, eps, P, true */
  TOK_VALUE,  /* %name (text excludes '%') */
  TOK_SYMBOL, /* @name or @"quoted" (text excludes '@') */
  TOK_INT,    /* 123 (unsigned; '-' is its own token) */
  TOK_FLOAT,  /* 1.5, 1e-06 */
  TOK_LPAREN,
  TOK_RPAREN,
  TOK_LBRACKET,
  TOK_RBRACKET,
  TOK_LBRACE,
  TOK_RBRACE,
  TOK_COMMA,
  TOK_COLON,
  TOK_EQUAL,
  TOK_ARROW,
  TOK_STAR,
  TOK_SLASH,
  TOK_PLUS,
  TOK_MINUS,
} tok_kind_t;

typedef struct {
  tok_kind_t kind;
  const char *start; /* the whole token, sigils included */
  size_t len;
  uint32_t line;     /* 0-based from the start of the text */
  const char *line_start;
} token_t;

typedef struct {
  const char *text;
  size_t len;
  const char *cur;
  uint32_t line;
  const char *line_start;
  const char *filename;
  uint32_t first_line;
  token_t tok;
  vlmc_module_t *module;
  vlmc_func_t *func;
  vlmc_arena_t scratch;     /* per-parse temporaries */
  vlmc_ir_strmap_t *values; /* value name -> vlmc_value_t*, per function */
  size_t num_ops;
} parser_t;

/* ---- diagnostics ---- */

static void append_source_line(const parser_t *p, const token_t *at, vlmc_strbuf_t *out) {
  const char *end = at->line_start;
  while (end < p->text + p->len && *end != '\n' && *end != '\r') ++end;
  size_t col = (size_t)(at->start - at->line_start);
  /* Very long lines (a folded constant) show a window around the column. */
  size_t from = col > 80 ? col - 80 : 0;
  size_t to = (size_t)(end - at->line_start);
  if (to > col + 80) to = col + 80;
  vlmc_strbuf_puts(out, "\n  ");
  if (from) vlmc_strbuf_puts(out, "...");
  for (size_t i = from; i < to; ++i) {
    unsigned char c = (unsigned char)at->line_start[i];
    vlmc_strbuf_putc(out, (c >= 0x20 && c < 0x7f) || c == '\t' ? (char)c : '?');
  }
  vlmc_strbuf_puts(out, "\n  ");
  if (from) vlmc_strbuf_puts(out, "   ");
  for (size_t i = from; i < col; ++i) vlmc_strbuf_putc(out, at->line_start[i] == '\t' ? '\t' : ' ');
  vlmc_strbuf_putc(out, '^');
}

static vlmc_status_t error_at(const parser_t *p, const token_t *at, const char *fmt, ...)
    VLMC_PRINTF(3, 4);

static vlmc_status_t error_at(const parser_t *p, const token_t *at, const char *fmt, ...) {
  vlmc_strbuf_t buf;
  vlmc_strbuf_init(&buf);
  vlmc_strbuf_printf(&buf, "%s:%u:%u: error: ", p->filename, p->first_line + at->line,
                     (unsigned)(at->start - at->line_start) + 1);
  va_list ap;
  va_start(ap, fmt);
  char message[512];
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  vlmc_strbuf_puts(&buf, message);
  append_source_line(p, at, &buf);
  vlmc_status_t status = vlmc_status_make(VLMC_PARSE_ERROR, "%s", vlmc_strbuf_cstr(&buf));
  vlmc_strbuf_deinit(&buf);
  return status;
}

/* A short description of a token for "expected X, got Y". */
static const char *describe(const token_t *t, char *buf, size_t size) {
  if (t->kind == TOK_EOF) return "end of input";
  size_t n = t->len > 40 ? 40 : t->len;
  snprintf(buf, size, "'%.*s%s'", (int)n, t->start, t->len > 40 ? "..." : "");
  for (char *c = buf; *c; ++c)
    if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) *c = '?';
  return buf;
}

static vlmc_status_t expected(const parser_t *p, const char *what) {
  char buf[64];
  return error_at(p, &p->tok, "expected %s, got %s", what, describe(&p->tok, buf, sizeof buf));
}

/* ---- lexer ---- */

static bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_value_char(char c) { return is_alpha(c) || is_digit(c) || c == '.' || c == '$'; }
static bool is_symbol_char(char c) { return is_value_char(c) || c == '-'; }

static bool at_end(const parser_t *p) { return p->cur >= p->text + p->len; }

static void skip_space_and_comments(parser_t *p) {
  while (!at_end(p)) {
    char c = *p->cur;
    if (c == '\n') {
      ++p->line;
      p->line_start = ++p->cur;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++p->cur;
    } else if (c == '/' && p->cur + 1 < p->text + p->len && p->cur[1] == '/') {
      while (!at_end(p) && *p->cur != '\n') ++p->cur;
    } else {
      return;
    }
  }
}

static size_t span(const parser_t *p, const char *from, bool (*accept)(char)) {
  const char *c = from;
  while (c < p->text + p->len && accept(*c)) ++c;
  return (size_t)(c - from);
}

static vlmc_status_t lex_number(parser_t *p, token_t *t) {
  const char *c = p->cur, *end = p->text + p->len;
  t->kind = TOK_INT;
  while (c < end && is_digit(*c)) ++c;
  if (c + 1 < end && *c == '.' && is_digit(c[1])) {
    t->kind = TOK_FLOAT;
    for (++c; c < end && is_digit(*c); ++c) {}
  }
  if (c < end && (*c == 'e' || *c == 'E')) {
    const char *e = c + 1;
    if (e < end && (*e == '+' || *e == '-')) ++e;
    if (e < end && is_digit(*e)) {
      t->kind = TOK_FLOAT;
      for (c = e; c < end && is_digit(*c); ++c) {}
    }
  }
  t->len = (size_t)(c - p->cur);
  return NULL;
}

/* @"..." with escapes \\, \" and \XX (two hex digits). */
static vlmc_status_t lex_quoted_symbol(parser_t *p, token_t *t) {
  const char *c = p->cur + 2, *end = p->text + p->len;
  while (c < end && *c != '"' && *c != '\n')
    c += (*c == '\\' && c + 1 < end && c[1] != '\n') ? 2 : 1;
  if (c >= end || *c != '"') {
    t->len = 1;
    return error_at(p, t, "unterminated quoted symbol name");
  }
  t->len = (size_t)(c + 1 - p->cur);
  return NULL;
}

static tok_kind_t punct_kind(char c) {
  switch (c) {
    case '(': return TOK_LPAREN;
    case ')': return TOK_RPAREN;
    case '[': return TOK_LBRACKET;
    case ']': return TOK_RBRACKET;
    case '{': return TOK_LBRACE;
    case '}': return TOK_RBRACE;
    case ',': return TOK_COMMA;
    case ':': return TOK_COLON;
    case '=': return TOK_EQUAL;
    case '*': return TOK_STAR;
    case '/': return TOK_SLASH;
    case '+': return TOK_PLUS;
    case '-': return TOK_MINUS;
    default: return TOK_EOF;
  }
}

static vlmc_status_t lex_sigil(parser_t *p, token_t *t, tok_kind_t kind, bool (*accept)(char),
                               const char *what) {
  t->kind = kind;
  t->len = 1 + span(p, p->cur + 1, accept);
  if (t->len == 1) return error_at(p, t, "expected %s after '%c'", what, *p->cur);
  return NULL;
}

static vlmc_status_t lex_token(parser_t *p, token_t *t) {
  skip_space_and_comments(p);
  t->start = p->cur;
  t->line = p->line;
  t->line_start = p->line_start;
  t->len = 0;
  if (at_end(p)) {
    t->kind = TOK_EOF;
    return NULL;
  }
  char c = *p->cur;
  vlmc_status_t st = NULL;
  if (is_alpha(c)) {
    t->kind = TOK_IDENT;
    t->len = span(p, p->cur, is_value_char);
  } else if (is_digit(c)) {
    st = lex_number(p, t);
  } else if (c == '%') {
    st = lex_sigil(p, t, TOK_VALUE, is_value_char, "a value name");
  } else if (c == '@' && p->cur + 1 < p->text + p->len && p->cur[1] == '"') {
    t->kind = TOK_SYMBOL;
    st = lex_quoted_symbol(p, t);
  } else if (c == '@') {
    st = lex_sigil(p, t, TOK_SYMBOL, is_symbol_char, "a symbol name");
  } else if (c == '-' && p->cur + 1 < p->text + p->len && p->cur[1] == '>') {
    t->kind = TOK_ARROW;
    t->len = 2;
  } else if (punct_kind(c) != TOK_EOF) {
    t->kind = punct_kind(c);
    t->len = 1;
  } else {
    t->len = 1;
    return error_at(p, t, "unexpected character '%s'",
                    (unsigned char)c >= 0x20 && (unsigned char)c < 0x7f ? (char[]){c, 0} : "?");
  }
  /* A quoted symbol name may spell each of its (at most VLMC_IR_MAX_IDENT_BYTES) bytes as a
   * 3-character escape, as the printer does: its decoded length is checked in symbol_text. */
  size_t limit = t->kind == TOK_SYMBOL && t->len > 1 && t->start[1] == '"'
                     ? 3 * (size_t)VLMC_IR_MAX_IDENT_BYTES + 3
                     : VLMC_IR_MAX_IDENT_BYTES;
  if (!st && t->len > limit) st = error_at(p, t, "token longer than %zu bytes", limit);
  p->cur += t->len;
  return st;
}

static vlmc_status_t advance(parser_t *p) { return lex_token(p, &p->tok); }

static bool is_ident(const parser_t *p, const char *word) {
  return p->tok.kind == TOK_IDENT && p->tok.len == strlen(word) &&
         memcmp(p->tok.start, word, p->tok.len) == 0;
}

static vlmc_status_t expect(parser_t *p, tok_kind_t kind, const char *what) {
  if (p->tok.kind != kind) return expected(p, what);
  return advance(p);
}

/* ---- literals ---- */

static vlmc_status_t parse_uint(parser_t *p, uint64_t *out) {
  if (p->tok.kind != TOK_INT) return expected(p, "an integer");
  uint64_t v = 0;
  for (size_t i = 0; i < p->tok.len; ++i) {
    if (!vlmc_mul_u64(v, 10, &v) || !vlmc_add_u64(v, (uint64_t)(p->tok.start[i] - '0'), &v))
      return error_at(p, &p->tok, "integer literal out of range");
  }
  *out = v;
  return advance(p);
}

/* An optionally negative integer that fits in int64. */
static vlmc_status_t parse_int(parser_t *p, int64_t *out) {
  bool negative = p->tok.kind == TOK_MINUS;
  if (negative) VLMC_RETURN_IF_ERROR(advance(p));
  token_t at = p->tok;
  uint64_t v;
  VLMC_RETURN_IF_ERROR(parse_uint(p, &v));
  if (v > (uint64_t)INT64_MAX + (negative ? 1 : 0))
    return error_at(p, &at, "integer literal out of range");
  *out = negative ? (int64_t)(0 - v) : (int64_t)v;
  return NULL;
}

/* A number for FLOAT or DENSE attributes: integers stay exact in *out_int. */
static vlmc_status_t parse_number(parser_t *p, bool *out_is_float, int64_t *out_int,
                                  double *out_float) {
  bool negative = p->tok.kind == TOK_MINUS;
  if (negative) VLMC_RETURN_IF_ERROR(advance(p));
  if (p->tok.kind == TOK_INT) {
    token_t at = p->tok;
    uint64_t v;
    VLMC_RETURN_IF_ERROR(parse_uint(p, &v));
    if (v > (uint64_t)INT64_MAX + (negative ? 1 : 0))
      return error_at(p, &at, "integer literal out of range");
    *out_is_float = false;
    *out_int = negative ? (int64_t)(0 - v) : (int64_t)v;
    *out_float = (double)*out_int;
    return NULL;
  }
  double v;
  if (p->tok.kind == TOK_FLOAT) {
    char buf[VLMC_IR_MAX_IDENT_BYTES + 1];
    memcpy(buf, p->tok.start, p->tok.len);
    buf[p->tok.len] = '\0';
    v = strtod(buf, NULL);
  } else if (is_ident(p, "inf")) {
    v = INFINITY;
  } else if (is_ident(p, "nan")) {
    v = NAN;
  } else {
    return expected(p, "a number");
  }
  *out_is_float = true;
  *out_float = negative ? -v : v;
  *out_int = 0;
  return advance(p);
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Decodes the token's symbol name (quoted or bare) into the module arena. */
static vlmc_status_t symbol_text(parser_t *p, const token_t *t, char **out) {
  const char *s = t->start + 1;
  size_t n = t->len - 1;
  if (n == 0 || *s != '"') {
    *out = vlmc_arena_strndup(&p->scratch, s, n);
    return *out ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  char *buf = vlmc_arena_alloc(&p->scratch, n, 1);
  if (!buf) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  size_t len = 0;
  for (size_t i = 1; i + 1 < n; ++i) {
    char c = s[i];
    if (c == '\\') {
      char e = s[i + 1];
      if (e == '\\' || e == '"') {
        buf[len++] = e;
        ++i;
        continue;
      }
      int hi = hex_value(e), lo = i + 2 + 1 < n ? hex_value(s[i + 2]) : -1;
      if (hi < 0 || lo < 0)
        return error_at(p, t, "expected \\\\, \\\" or two hex digits after '\\' in a symbol name");
      buf[len++] = (char)(hi * 16 + lo);
      i += 2;
      continue;
    }
    buf[len++] = c;
  }
  if (len == 0 || memchr(buf, '\0', len))
    return error_at(p, t, "expected a non-empty symbol name without NUL bytes");
  if (len > VLMC_IR_MAX_IDENT_BYTES)
    return error_at(p, t, "symbol name longer than %d bytes", VLMC_IR_MAX_IDENT_BYTES);
  buf[len] = '\0';
  *out = buf;
  return NULL;
}

/* ---- types ---- */

static vlmc_status_t parse_dim_symbolic(parser_t *p, int64_t num, vlmc_dim_t *out) {
  token_t at = p->tok;
  if (p->tok.kind != TOK_IDENT) return expected(p, "a symbol name (such as P or S)");
  char *name = vlmc_arena_strndup(&p->scratch, p->tok.start, p->tok.len);
  if (!name) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  uint32_t sym;
  vlmc_status_t st = vlmc_module_symbol(p->module, name, &sym);
  if (st) {
    vlmc_status_t e = error_at(p, &at, "%s", vlmc_status_message(st));
    vlmc_status_free(st);
    return e;
  }
  VLMC_RETURN_IF_ERROR(advance(p));
  int64_t den = 1, off = 0;
  if (p->tok.kind == TOK_SLASH) {
    VLMC_RETURN_IF_ERROR(advance(p));
    uint64_t v;
    token_t dt = p->tok;
    VLMC_RETURN_IF_ERROR(parse_uint(p, &v));
    if (v == 0 || v > INT64_MAX) return error_at(p, &dt, "expected a positive divisor");
    den = (int64_t)v;
  }
  if (p->tok.kind == TOK_PLUS || p->tok.kind == TOK_MINUS) {
    bool minus = p->tok.kind == TOK_MINUS;
    VLMC_RETURN_IF_ERROR(advance(p));
    uint64_t v;
    token_t ot = p->tok;
    VLMC_RETURN_IF_ERROR(parse_uint(p, &v));
    if (v > (uint64_t)INT64_MAX + (minus ? 1 : 0))
      return error_at(p, &ot, "integer literal out of range");
    off = minus ? (int64_t)(0 - v) : (int64_t)v;
  }
  st = vlmc_dim_symbolic(sym, num, den, off, out);
  if (!st) return NULL;
  vlmc_status_t e = error_at(p, &at, "bad dimension: %s", vlmc_status_message(st));
  vlmc_status_free(st);
  return e;
}

/* dim := INT | [INT '*'] SYM ['/' INT] [('+' | '-') INT] */
static vlmc_status_t parse_dim(parser_t *p, vlmc_dim_t *out) {
  if (p->tok.kind != TOK_INT) return parse_dim_symbolic(p, 1, out);
  token_t at = p->tok;
  uint64_t v;
  VLMC_RETURN_IF_ERROR(parse_uint(p, &v));
  if (v > INT64_MAX) return error_at(p, &at, "dimension out of range");
  if (p->tok.kind != TOK_STAR) {
    *out = vlmc_dim_static((int64_t)v);
    return NULL;
  }
  if (v == 0) return error_at(p, &at, "expected a positive coefficient");
  VLMC_RETURN_IF_ERROR(advance(p));
  return parse_dim_symbolic(p, (int64_t)v, out);
}

static vlmc_status_t parse_type(parser_t *p, vlmc_type_t *out) {
  memset(out, 0, sizeof *out);
  token_t start = p->tok;
  if (p->tok.kind != TOK_IDENT || !vlmc_dtype_from_name(p->tok.start, p->tok.len, &out->dtype))
    return expected(p, "a type such as f32[P,1280] (dtypes: f32 f16 bf16 f64 i64 i32 i8 u8 "
                       "u32 bool q4_0 q8_0)");
  VLMC_RETURN_IF_ERROR(advance(p));
  VLMC_RETURN_IF_ERROR(expect(p, TOK_LBRACKET, "'[' after the dtype"));
  while (p->tok.kind != TOK_RBRACKET) {
    if (out->rank == VLMC_IR_MAX_RANK)
      return error_at(p, &p->tok, "a type has at most %d dimensions", VLMC_IR_MAX_RANK);
    if (out->rank) VLMC_RETURN_IF_ERROR(expect(p, TOK_COMMA, "',' or ']' in a shape"));
    VLMC_RETURN_IF_ERROR(parse_dim(p, &out->dims[out->rank++]));
  }
  /* Refused here, where the text can be pointed at, so that no later size computation (the
   * verifier's, an executor's allocation) multiplies the dims into an overflow. */
  if (!vlmc_type_size_fits(out))
    return error_at(p, &start, "the type's element count or byte size overflows 64 bits");
  return advance(p);
}

/* ---- attributes ---- */

typedef struct {
  int64_t *ints;
  double *floats;
  size_t count, capacity;
  bool any_float;
} number_list_t;

static void number_list_free(number_list_t *list) {
  free(list->ints);
  free(list->floats);
}

static bool number_list_push(number_list_t *list, int64_t i, double f) {
  if (list->count == list->capacity) {
    size_t cap = list->capacity ? list->capacity * 2 : 16;
    int64_t *ints = realloc(list->ints, cap * sizeof *ints);
    if (ints) list->ints = ints;
    double *floats = realloc(list->floats, cap * sizeof *floats);
    if (floats) list->floats = floats;
    if (!ints || !floats) return false;
    list->capacity = cap;
  }
  list->ints[list->count] = i;
  list->floats[list->count] = f;
  list->count++;
  return true;
}

/* '[' [number {',' number}] ']'; integers only unless allow_float. */
static vlmc_status_t parse_number_list(parser_t *p, bool allow_float, number_list_t *list) {
  VLMC_RETURN_IF_ERROR(expect(p, TOK_LBRACKET, "'[' to start a list"));
  while (p->tok.kind != TOK_RBRACKET) {
    if (list->count) VLMC_RETURN_IF_ERROR(expect(p, TOK_COMMA, "',' or ']' in a list"));
    if (list->count == VLMC_IR_MAX_ARRAY_ELEMENTS)
      return error_at(p, &p->tok, "a list has at most %d elements", VLMC_IR_MAX_ARRAY_ELEMENTS);
    bool is_float = false;
    int64_t i = 0;
    double f = 0;
    if (allow_float) VLMC_RETURN_IF_ERROR(parse_number(p, &is_float, &i, &f));
    else VLMC_RETURN_IF_ERROR(parse_int(p, &i));
    list->any_float = list->any_float || is_float;
    if (!number_list_push(list, i, is_float ? f : (double)i))
      return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  return advance(p);
}

static vlmc_status_t parse_attr_value(parser_t *p, const vlmc_attr_schema_t *schema,
                                      vlmc_attr_t *out, number_list_t *list) {
  token_t at = p->tok;
  bool is_float;
  int64_t i;
  double f;
  switch (schema->kind) {
    case VLMC_ATTR_INT:
      VLMC_RETURN_IF_ERROR(parse_int(p, &i));
      *out = vlmc_attr_int(i);
      return NULL;
    case VLMC_ATTR_FLOAT:
      VLMC_RETURN_IF_ERROR(parse_number(p, &is_float, &i, &f));
      *out = vlmc_attr_float(f);
      return NULL;
    case VLMC_ATTR_BOOL:
      if (!is_ident(p, "true") && !is_ident(p, "false")) return expected(p, "true or false");
      *out = vlmc_attr_bool(is_ident(p, "true"));
      return advance(p);
    case VLMC_ATTR_ENUM:
      if (p->tok.kind != TOK_IDENT || !vlmc_ir_enum_lookup(schema, p->tok.start, p->tok.len, out))
        return error_at(p, &at, "expected one of %s for '%s'", schema->choices, schema->name);
      return advance(p);
    case VLMC_ATTR_DTYPE: {
      vlmc_dtype_t dtype;
      if (p->tok.kind != TOK_IDENT || !vlmc_dtype_from_name(p->tok.start, p->tok.len, &dtype))
        return expected(p, "a dtype");
      *out = vlmc_attr_dtype(dtype);
      return advance(p);
    }
    case VLMC_ATTR_SYMBOL: {
      char *name;
      if (p->tok.kind != TOK_SYMBOL) return expected(p, "an @symbol");
      VLMC_RETURN_IF_ERROR(symbol_text(p, &p->tok, &name));
      *out = vlmc_attr_symbol(name);
      return advance(p);
    }
    case VLMC_ATTR_INTS:
      VLMC_RETURN_IF_ERROR(parse_number_list(p, false, list));
      *out = vlmc_attr_ints(list->ints, list->count);
      return NULL;
    case VLMC_ATTR_DENSE:
      VLMC_RETURN_IF_ERROR(parse_number_list(p, true, list));
      *out = list->any_float ? vlmc_attr_dense_floats(list->floats, list->count)
                             : vlmc_attr_dense_ints(list->ints, list->count);
      return NULL;
    case VLMC_ATTR_NONE: break;
  }
  return error_at(p, &at, "internal: attribute kind has no syntax");
}

static void attr_names(const vlmc_op_info_t *info, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < info->num_attrs && used < size; ++i)
    used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", info->attrs[i].name);
  if (info->num_attrs == 0) snprintf(buf, size, "none");
}

/* '{' name '=' value {',' name '=' value} '}' into attrs (one slot per schema entry). The
 * lists hold the array data until the op copies it. */
static vlmc_status_t parse_attr_dict(parser_t *p, const vlmc_op_info_t *info, vlmc_attr_t *attrs,
                                     number_list_t *lists) {
  VLMC_RETURN_IF_ERROR(advance(p)); /* '{' */
  bool first = true;
  while (p->tok.kind != TOK_RBRACE) {
    if (!first) VLMC_RETURN_IF_ERROR(expect(p, TOK_COMMA, "',' or '}' in attributes"));
    first = false;
    token_t at = p->tok;
    if (p->tok.kind != TOK_IDENT) return expected(p, "an attribute name");
    int slot = -1;
    for (uint32_t i = 0; i < info->num_attrs; ++i)
      if (strlen(info->attrs[i].name) == at.len &&
          memcmp(info->attrs[i].name, at.start, at.len) == 0)
        slot = (int)i;
    if (slot < 0 ||
        ((info->flags & VLMC_OP_FLAG_SYMREF) && info->attrs[slot].kind == VLMC_ATTR_SYMBOL)) {
      char names[256];
      attr_names(info, names, sizeof names);
      return error_at(p, &at, "'%s' has no attribute '%.*s' (it has: %s)", info->mnemonic,
                      (int)(at.len > 64 ? 64 : at.len), at.start, names);
    }
    if (attrs[slot].kind != VLMC_ATTR_NONE)
      return error_at(p, &at, "attribute '%s' is given twice", info->attrs[slot].name);
    VLMC_RETURN_IF_ERROR(advance(p));
    VLMC_RETURN_IF_ERROR(expect(p, TOK_EQUAL, "'=' after the attribute name"));
    VLMC_RETURN_IF_ERROR(parse_attr_value(p, &info->attrs[slot], &attrs[slot], &lists[slot]));
  }
  return advance(p);
}

/* A constant of a float dtype holds floats even when written as integers ("[1, 2]"). */
static void dense_to_dtype(const vlmc_op_info_t *info, vlmc_attr_t *attrs,
                           const number_list_t *lists, const vlmc_type_t *result) {
  if (!result || !vlmc_dtype_info(result->dtype)->is_float) return;
  for (uint32_t i = 0; i < info->num_attrs; ++i)
    if (attrs[i].kind == VLMC_ATTR_DENSE && attrs[i].v.dense.ints)
      attrs[i] = vlmc_attr_dense_floats(lists[i].floats, lists[i].count);
}

static vlmc_loc_t loc_of(const parser_t *p, const token_t *t) {
  vlmc_loc_t loc = {p->first_line + t->line, (uint32_t)(t->start - t->line_start) + 1};
  return loc;
}

/* ---- values ---- */

static bool all_digits(const char *s, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!is_digit(s[i])) return false;
  return true;
}

static vlmc_status_t define_value(parser_t *p, const token_t *name, vlmc_value_t *value) {
  const char *key = name->start + 1;
  size_t len = name->len - 1;
  if (vlmc_ir_strmap_get(p->values, key, len))
    return error_at(p, name, "redefinition of value %%%.*s", (int)(len > 64 ? 64 : len), key);
  if (!vlmc_ir_strmap_put(p->values, key, len, value))
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (all_digits(key, len)) return NULL; /* numbered values have no name hint */
  char *hint = vlmc_arena_strndup(&p->scratch, key, len);
  if (!hint) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  return vlmc_value_set_name(value, hint);
}

static vlmc_status_t parse_use(parser_t *p, vlmc_value_t **out) {
  if (p->tok.kind != TOK_VALUE) return expected(p, "a %value");
  *out = vlmc_ir_strmap_get(p->values, p->tok.start + 1, p->tok.len - 1);
  if (!*out)
    return error_at(p, &p->tok, "use of undefined value %.*s",
                    (int)(p->tok.len > 64 ? 64 : p->tok.len), p->tok.start);
  return advance(p);
}

/* ---- ops ---- */

typedef struct {
  token_t names[VLMC_IR_MAX_RESULTS];
  uint32_t num_names;
  vlmc_value_t **operands;
  uint32_t num_operands, operands_capacity;
  vlmc_type_t types[VLMC_IR_MAX_RESULTS];
  uint32_t num_types;
  uint32_t dispatch; /* `dispatch N` after the types; 0 when absent */
  uint32_t slot;     /* `slot N` after that; 0 when absent */
} op_parts_t;

static vlmc_status_t parse_result_names(parser_t *p, op_parts_t *parts) {
  while (p->tok.kind == TOK_VALUE) {
    if (parts->num_names == VLMC_IR_MAX_RESULTS)
      return error_at(p, &p->tok, "an op has at most %d results", VLMC_IR_MAX_RESULTS);
    parts->names[parts->num_names++] = p->tok;
    VLMC_RETURN_IF_ERROR(advance(p));
    if (p->tok.kind != TOK_COMMA) break;
    VLMC_RETURN_IF_ERROR(advance(p));
  }
  return expect(p, TOK_EQUAL, "'=' after the result names");
}

static vlmc_status_t parse_operands(parser_t *p, op_parts_t *parts) {
  while (p->tok.kind == TOK_VALUE) {
    if (parts->num_operands == VLMC_IR_MAX_OPERANDS)
      return error_at(p, &p->tok, "an op has at most %d operands", VLMC_IR_MAX_OPERANDS);
    if (!vlmc_ir_grow(&p->scratch, (void **)&parts->operands, &parts->operands_capacity,
                      parts->num_operands + 1, sizeof(vlmc_value_t *), _Alignof(vlmc_value_t *)))
      return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    VLMC_RETURN_IF_ERROR(parse_use(p, &parts->operands[parts->num_operands++]));
    if (p->tok.kind != TOK_COMMA) break;
    VLMC_RETURN_IF_ERROR(advance(p));
    if (p->tok.kind != TOK_VALUE) return expected(p, "a %value after ','");
  }
  return NULL;
}

static vlmc_status_t parse_result_types(parser_t *p, const vlmc_op_info_t *info,
                                        op_parts_t *parts) {
  if (p->tok.kind != TOK_COLON && info->num_results) return expected(p, "':' and the result type");
  if (p->tok.kind != TOK_COLON) return NULL;
  VLMC_RETURN_IF_ERROR(advance(p));
  for (;;) {
    if (parts->num_types == VLMC_IR_MAX_RESULTS)
      return error_at(p, &p->tok, "an op has at most %d results", VLMC_IR_MAX_RESULTS);
    VLMC_RETURN_IF_ERROR(parse_type(p, &parts->types[parts->num_types++]));
    if (p->tok.kind != TOK_COMMA) return NULL;
    VLMC_RETURN_IF_ERROR(advance(p));
  }
}

/* `WORD N` with N in 1 .. 2^31, or nothing (*out stays 0). */
static vlmc_status_t parse_numbered(parser_t *p, const char *word, const char *what,
                                    uint32_t *out) {
  size_t len = strlen(word);
  if (!(p->tok.kind == TOK_IDENT && p->tok.len == len && !memcmp(p->tok.start, word, len)))
    return NULL;
  VLMC_RETURN_IF_ERROR(advance(p));
  token_t at = p->tok;
  uint64_t n;
  VLMC_RETURN_IF_ERROR(parse_uint(p, &n));
  if (n == 0 || n > INT32_MAX) return error_at(p, &at, "a %s number is in 1..%d", what, INT32_MAX);
  *out = (uint32_t)n;
  return NULL;
}

/* `dispatch N` (the fuse pass's region) then `slot N` (the memory plan's buffer). */
static vlmc_status_t parse_dispatch(parser_t *p, op_parts_t *parts) {
  VLMC_RETURN_IF_ERROR(parse_numbered(p, "dispatch", "dispatch region", &parts->dispatch));
  return parse_numbered(p, "slot", "buffer slot", &parts->slot);
}

static vlmc_status_t check_result_counts(parser_t *p, const token_t *at, const vlmc_op_info_t *info,
                                         const op_parts_t *parts) {
  if (parts->num_names != info->num_results)
    return error_at(p, at, "'%s' has %u result%s, but %u name%s given", info->mnemonic,
                    info->num_results, info->num_results == 1 ? "" : "s", parts->num_names,
                    parts->num_names == 1 ? " is" : "s are");
  if (parts->num_types != info->num_results)
    return error_at(p, at, "expected %u result type%s after ':' for '%s', got %u",
                    info->num_results, info->num_results == 1 ? "" : "s", info->mnemonic,
                    parts->num_types);
  return NULL;
}

static vlmc_status_t create_op(parser_t *p, const token_t *at, const token_t *mnemonic,
                               vlmc_op_kind_t kind, op_parts_t *parts, vlmc_attr_t *attrs) {
  vlmc_op_t *op;
  vlmc_status_t st =
      vlmc_op_create_raw(&p->func->body, NULL, kind, parts->num_operands, parts->operands, attrs,
                         parts->num_types, parts->types, &op);
  if (st) {
    vlmc_status_t e = error_at(p, mnemonic, "%s", vlmc_status_message(st));
    vlmc_status_free(st);
    return e;
  }
  op->loc = loc_of(p, at);
  op->dispatch = parts->dispatch;
  op->slot = parts->slot;
  for (uint32_t i = 0; i < parts->num_names; ++i)
    VLMC_RETURN_IF_ERROR(define_value(p, &parts->names[i], &op->results[i]));
  return NULL;
}

static vlmc_status_t parse_op_body(parser_t *p, const token_t *at, op_parts_t *parts,
                                   vlmc_attr_t *attrs, number_list_t *lists) {
  token_t mnemonic = p->tok;
  vlmc_op_kind_t kind;
  if (p->tok.kind != TOK_IDENT) return expected(p, "an op name");
  if (!vlmc_op_kind_from_mnemonic(p->tok.start, p->tok.len, &kind))
    return error_at(p, &p->tok, "unknown op '%.*s'", (int)(p->tok.len > 64 ? 64 : p->tok.len),
                    p->tok.start);
  const vlmc_op_info_t *info = vlmc_op_info(kind);
  assert(info->num_attrs <= MAX_ATTRS);
  VLMC_RETURN_IF_ERROR(advance(p));
  if (info->flags & VLMC_OP_FLAG_SYMREF) {
    char *name;
    if (p->tok.kind != TOK_SYMBOL) return expected(p, "an @name after the op name");
    VLMC_RETURN_IF_ERROR(symbol_text(p, &p->tok, &name));
    attrs[vlmc_op_attr_slot(kind, "name")] = vlmc_attr_symbol(name);
    VLMC_RETURN_IF_ERROR(advance(p));
  }
  VLMC_RETURN_IF_ERROR(parse_operands(p, parts));
  if (p->tok.kind == TOK_LBRACE) VLMC_RETURN_IF_ERROR(parse_attr_dict(p, info, attrs, lists));
  VLMC_RETURN_IF_ERROR(parse_result_types(p, info, parts));
  VLMC_RETURN_IF_ERROR(parse_dispatch(p, parts));
  VLMC_RETURN_IF_ERROR(check_result_counts(p, at, info, parts));
  dense_to_dtype(info, attrs, lists, parts->num_types ? &parts->types[0] : NULL);
  if (p->num_ops++ == VLMC_IR_MAX_OPS)
    return error_at(p, at, "a module has at most %d ops", VLMC_IR_MAX_OPS);
  return create_op(p, at, &mnemonic, kind, parts, attrs);
}

static vlmc_status_t parse_op(parser_t *p) {
  token_t at = p->tok;
  op_parts_t *parts = calloc(1, sizeof *parts);
  vlmc_attr_t attrs[MAX_ATTRS];
  number_list_t lists[MAX_ATTRS];
  memset(attrs, 0, sizeof attrs);
  memset(lists, 0, sizeof lists);
  if (!parts) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_status_t st = NULL;
  if (p->tok.kind == TOK_VALUE) st = parse_result_names(p, parts);
  if (!st) st = parse_op_body(p, &at, parts, attrs, lists);
  for (int i = 0; i < MAX_ATTRS; ++i) number_list_free(&lists[i]);
  free(parts);
  return st;
}

/* ---- functions and the module ---- */

typedef struct {
  token_t names[MAX_ARGS];
  vlmc_type_t types[MAX_ARGS];
  uint32_t num_args;
  vlmc_type_t results[MAX_ARGS]; /* prefill/decode return 1 + 2 * layers (73 for the 3B) */
  uint32_t num_results;
} signature_t;

static vlmc_status_t parse_args(parser_t *p, signature_t *sig) {
  VLMC_RETURN_IF_ERROR(expect(p, TOK_LPAREN, "'(' to start the arguments"));
  while (p->tok.kind != TOK_RPAREN) {
    if (sig->num_args) VLMC_RETURN_IF_ERROR(expect(p, TOK_COMMA, "',' or ')' in the arguments"));
    if (sig->num_args == MAX_ARGS)
      return error_at(p, &p->tok, "a function has at most %d arguments", MAX_ARGS);
    if (p->tok.kind != TOK_VALUE) return expected(p, "an argument such as %x: f32[4]");
    sig->names[sig->num_args] = p->tok;
    VLMC_RETURN_IF_ERROR(advance(p));
    VLMC_RETURN_IF_ERROR(expect(p, TOK_COLON, "':' after the argument name"));
    VLMC_RETURN_IF_ERROR(parse_type(p, &sig->types[sig->num_args++]));
  }
  return advance(p);
}

static vlmc_status_t parse_func_results(parser_t *p, signature_t *sig) {
  VLMC_RETURN_IF_ERROR(expect(p, TOK_ARROW, "'->' and the result types"));
  if (p->tok.kind != TOK_LPAREN) {
    sig->num_results = 1;
    return parse_type(p, &sig->results[0]);
  }
  VLMC_RETURN_IF_ERROR(advance(p));
  while (p->tok.kind != TOK_RPAREN) {
    if (sig->num_results) VLMC_RETURN_IF_ERROR(expect(p, TOK_COMMA, "',' or ')' in the results"));
    if (sig->num_results == MAX_ARGS)
      return error_at(p, &p->tok, "a function has at most %d results", MAX_ARGS);
    VLMC_RETURN_IF_ERROR(parse_type(p, &sig->results[sig->num_results++]));
  }
  return advance(p);
}

static vlmc_status_t create_func(parser_t *p, const token_t *name_tok, const char *name,
                                 signature_t *sig) {
  vlmc_status_t st = vlmc_module_func_add(p->module, name, sig->num_args, sig->types, NULL,
                                          sig->num_results, sig->results, &p->func);
  if (st) {
    vlmc_status_t e = error_at(p, name_tok, "%s", vlmc_status_message(st));
    vlmc_status_free(st);
    return e;
  }
  p->values = vlmc_ir_strmap_create(&p->scratch);
  if (!p->values) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t i = 0; i < sig->num_args; ++i)
    VLMC_RETURN_IF_ERROR(define_value(p, &sig->names[i], &p->func->args[i]));
  return NULL;
}

static vlmc_status_t parse_func(parser_t *p) {
  vlmc_loc_t loc = loc_of(p, &p->tok);
  VLMC_RETURN_IF_ERROR(advance(p)); /* 'func' */
  token_t name_tok = p->tok;
  char *name;
  if (p->tok.kind != TOK_SYMBOL) return expected(p, "a function name such as @encode_image");
  VLMC_RETURN_IF_ERROR(symbol_text(p, &p->tok, &name));
  VLMC_RETURN_IF_ERROR(advance(p));
  signature_t *sig = calloc(1, sizeof *sig);
  if (!sig) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_status_t st = parse_args(p, sig);
  if (!st) st = parse_func_results(p, sig);
  if (!st && p->tok.kind != TOK_LBRACE) st = expected(p, "'{' to start the function body");
  if (!st) st = create_func(p, &name_tok, name, sig);
  free(sig);
  VLMC_RETURN_IF_ERROR(st);
  p->func->loc = loc;
  VLMC_RETURN_IF_ERROR(advance(p));
  while (p->tok.kind != TOK_RBRACE) {
    if (p->tok.kind == TOK_EOF || is_ident(p, "func") || is_ident(p, "param"))
      return expected(p, "'}' to close the function body");
    VLMC_RETURN_IF_ERROR(parse_op(p));
  }
  return advance(p);
}

static vlmc_status_t parse_param(parser_t *p) {
  vlmc_loc_t loc = loc_of(p, &p->tok);
  VLMC_RETURN_IF_ERROR(advance(p)); /* 'param' */
  token_t name_tok = p->tok;
  char *name;
  if (p->tok.kind != TOK_SYMBOL) return expected(p, "a parameter name such as @model.norm.weight");
  VLMC_RETURN_IF_ERROR(symbol_text(p, &p->tok, &name));
  VLMC_RETURN_IF_ERROR(advance(p));
  VLMC_RETURN_IF_ERROR(expect(p, TOK_COLON, "':' and the parameter's type"));
  vlmc_type_t type;
  VLMC_RETURN_IF_ERROR(parse_type(p, &type));
  vlmc_param_t *param;
  vlmc_status_t st = vlmc_module_param_add(p->module, name, &type, &param);
  if (!st) {
    param->loc = loc;
    return NULL;
  }
  vlmc_status_t e = error_at(p, &name_tok, "%s", vlmc_status_message(st));
  vlmc_status_free(st);
  return e;
}

static vlmc_status_t parse_module(parser_t *p) {
  VLMC_RETURN_IF_ERROR(advance(p));
  while (p->tok.kind != TOK_EOF) {
    if (is_ident(p, "param")) VLMC_RETURN_IF_ERROR(parse_param(p));
    else if (is_ident(p, "func")) VLMC_RETURN_IF_ERROR(parse_func(p));
    else return expected(p, "'param' or 'func'");
  }
  return NULL;
}

vlmc_status_t vlmc_module_parse(const char *text, size_t len, const vlmc_parse_options_t *options,
                                vlmc_module_t **out_module) {
  const char *filename = options && options->filename ? options->filename : "<input>";
  if (len > VLMC_IR_MAX_SOURCE_BYTES)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: input is larger than %d bytes", filename,
                            VLMC_IR_MAX_SOURCE_BYTES);
  parser_t p;
  memset(&p, 0, sizeof p);
  p.text = p.cur = p.line_start = text ? text : "";
  p.len = text ? len : 0;
  p.filename = filename;
  p.first_line = options && options->first_line ? options->first_line : 1;
  vlmc_arena_init(&p.scratch);
  vlmc_status_t st = vlmc_module_create(&p.module);
  if (!st) {
    p.module->source_name = vlmc_arena_strdup(&p.module->arena, filename);
    if (!p.module->source_name) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  if (!st) st = parse_module(&p);
  vlmc_arena_deinit(&p.scratch);
  if (st) {
    vlmc_module_destroy(p.module);
    return st;
  }
  *out_module = p.module;
  return NULL;
}
