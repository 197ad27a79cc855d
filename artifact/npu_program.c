/* The npu tile program: parser, canonical printer and static checker (artifact/npu_program.h,
 * docs/npu.md). The parser reads a line-oriented text statement by statement; the checker
 * resolves names and compares every field with the device's limits (artifact/npu_device.h). */
#include "artifact/npu_program.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Lists and the name index                                                                   */

/* Makes room for one more element; false when the list is full or memory ran out. */
static bool list_reserve(void **items, size_t *capacity, size_t count, size_t elem_size) {
  if (count >= VLMC_NPU_MAX_ITEMS) return false;
  if (count < *capacity) return true;
  size_t cap = *capacity ? *capacity * 2 : 16;
  if (cap > VLMC_NPU_MAX_ITEMS) cap = VLMC_NPU_MAX_ITEMS;
  void *grown = realloc(*items, cap * elem_size);
  if (!grown) return false;
  *items = grown;
  *capacity = cap;
  return true;
}

/* Appends a zeroed element to list `l` and sets `out` to it, or NULL when full. */
#define LIST_PUSH(l, out)                                                                  \
  do {                                                                                     \
    (out) = NULL;                                                                          \
    if (list_reserve((void **)&(l).items, &(l).capacity, (l).count, sizeof(*(l).items))) { \
      (out) = &(l).items[(l).count++];                                                     \
      memset((out), 0, sizeof(*(out)));                                                    \
    }                                                                                      \
  } while (0)

typedef enum {
  NAME_TILE = 0,
  NAME_BUFFER,
  NAME_LOCK,
  NAME_BD,
  NAME_CHANNEL,
  NAME_DMA,
} name_kind_t;

static const char *const kNameKindWords[] = {"tile", "buffer", "lock", "bd", "channel", "dma"};

typedef struct {
  const char *name; /* NULL: empty slot */
  name_kind_t kind;
  size_t index;
} name_slot_t;

/* An open-addressing hash of every defined name (one namespace), so that a program of
 * thousands of items parses and checks in linear time. */
typedef struct {
  name_slot_t *slots;
  size_t capacity; /* a power of two, or 0 */
  size_t count;
} name_index_t;

static uint64_t name_hash(const char *name) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const unsigned char *c = (const unsigned char *)name; *c; ++c)
    h = (h ^ *c) * 1099511628211ull;
  return h;
}

static name_slot_t *name_index_slot(const name_index_t *index, const char *name) {
  size_t mask = index->capacity - 1;
  for (size_t i = (size_t)name_hash(name) & mask;; i = (i + 1) & mask) {
    name_slot_t *slot = &index->slots[i];
    if (!slot->name || strcmp(slot->name, name) == 0) return slot;
  }
}

static bool name_index_grow(name_index_t *index) {
  name_index_t grown = {.capacity = index->capacity ? index->capacity * 2 : 64};
  grown.slots = calloc(grown.capacity, sizeof *grown.slots);
  if (!grown.slots) return false;
  for (size_t i = 0; i < index->capacity; ++i) {
    if (index->slots[i].name) *name_index_slot(&grown, index->slots[i].name) = index->slots[i];
  }
  grown.count = index->count;
  free(index->slots);
  *index = grown;
  return true;
}

/* The slot of `name`, or NULL. */
static const name_slot_t *name_index_find(const name_index_t *index, const char *name) {
  if (!index->capacity) return NULL;
  const name_slot_t *slot = name_index_slot(index, name);
  return slot->name ? slot : NULL;
}

/* Adds `name`; the existing slot when it is taken (*out_existing), false when out of memory. */
static bool name_index_add(name_index_t *index, const char *name, name_kind_t kind, size_t at,
                           const name_slot_t **out_existing) {
  *out_existing = name_index_find(index, name);
  if (*out_existing) return true;
  if ((index->count + 1) * 2 > index->capacity && !name_index_grow(index)) return false;
  name_slot_t *slot = name_index_slot(index, name);
  *slot = (name_slot_t){name, kind, at};
  ++index->count;
  return true;
}

static void name_index_free(name_index_t *index) {
  free(index->slots);
  *index = (name_index_t){0};
}

/* ------------------------------------------------------------------------------------------ */
/* The program                                                                                */

void vlmc_npu_program_init(vlmc_npu_program_t *program) {
  memset(program, 0, sizeof *program);
  vlmc_arena_init(&program->arena);
  program->filename = "npu.program";
}

void vlmc_npu_program_deinit(vlmc_npu_program_t *program) {
  for (size_t i = 0; i < program->cores.count; ++i) free(program->cores.items[i].ops);
  free(program->args.items);
  free(program->tiles.items);
  free(program->buffers.items);
  free(program->locks.items);
  free(program->bds.items);
  free(program->channels.items);
  free(program->cores.items);
  free(program->runtime.items);
  vlmc_arena_deinit(&program->arena);
  memset(program, 0, sizeof *program);
}

static const char *const kMicrokernels[] = {
    "gemv_q4nx",      "gemm_bf16",        "rmsnorm", "rope", "silu_mul",
    "softmax_online", "attention_online", "add",     "copy",
};

const char *vlmc_npu_microkernel_at(int i) {
  return i >= 0 && i < (int)(sizeof kMicrokernels / sizeof kMicrokernels[0]) ? kMicrokernels[i]
                                                                             : NULL;
}

static const char *const kRuleNames[VLMC_NPU_RULE_COUNT] = {
    "none",
#define VLMC_NPU_RULE_NAME_(id, name) name,
    VLMC_NPU_RULES(VLMC_NPU_RULE_NAME_)
#undef VLMC_NPU_RULE_NAME_
};

const char *vlmc_npu_rule_name(vlmc_npu_rule_t rule) {
  return (unsigned)rule < VLMC_NPU_RULE_COUNT ? kRuleNames[rule] : "?";
}

/* ------------------------------------------------------------------------------------------ */
/* Lexer: words, braces and statement ends                                                    */

typedef enum { TOK_WORD, TOK_END, TOK_LBRACE, TOK_RBRACE, TOK_EOF } tok_kind_t;

typedef struct {
  tok_kind_t kind;
  const char *start;
  size_t len;
  uint32_t line;
} token_t;

enum { MAX_STATEMENT_WORDS = 64, NUMBER_MAX_BITS = 40 };

typedef struct {
  const char *filename;
  const char *text;
  size_t len, pos;
  uint32_t line; /* 1-based */
  vlmc_npu_program_t *program;
  name_index_t names;
} parser_t;

static vlmc_status_t parse_error(const parser_t *p, uint32_t line, const char *fmt, ...)
    VLMC_PRINTF(3, 4);

static vlmc_status_t parse_error(const parser_t *p, uint32_t line, const char *fmt, ...) {
  vlmc_strbuf_t buf;
  vlmc_strbuf_init(&buf);
  vlmc_strbuf_printf(&buf, "%s:%u: error: ", p->filename, line);
  va_list ap;
  va_start(ap, fmt);
  vlmc_status_t detail = vlmc_status_makev(VLMC_PARSE_ERROR, fmt, ap);
  va_end(ap);
  vlmc_strbuf_puts(&buf, vlmc_status_message(detail));
  vlmc_status_free(detail);
  vlmc_status_t st = vlmc_status_make(VLMC_PARSE_ERROR, "%s", vlmc_strbuf_cstr(&buf));
  vlmc_strbuf_deinit(&buf);
  return st;
}

static bool is_word_byte(unsigned char c) {
  return c > ' ' && c < 0x7f && c != '#' && c != ';' && c != '{' && c != '}';
}

static void skip_comment(parser_t *p) {
  while (p->pos < p->len && p->text[p->pos] != '\n') ++p->pos;
}

static vlmc_status_t next_token(parser_t *p, token_t *out) {
  for (;;) {
    if (p->pos >= p->len) {
      *out = (token_t){TOK_EOF, p->text + p->pos, 0, p->line};
      return NULL;
    }
    unsigned char c = (unsigned char)p->text[p->pos];
    if (c == ' ' || c == '\t' || c == '\r') {
      ++p->pos;
    } else if (c == '#') {
      skip_comment(p);
    } else {
      break;
    }
  }
  unsigned char c = (unsigned char)p->text[p->pos];
  *out = (token_t){TOK_WORD, p->text + p->pos, 1, p->line};
  if (c == '\n' || c == ';' || c == '{' || c == '}') {
    out->kind = c == '{' ? TOK_LBRACE : c == '}' ? TOK_RBRACE : TOK_END;
    ++p->pos;
    if (c == '\n') ++p->line;
    return NULL;
  }
  if (!is_word_byte(c)) return parse_error(p, p->line, "unexpected byte 0x%02x", c);
  size_t start = p->pos;
  while (p->pos < p->len && is_word_byte((unsigned char)p->text[p->pos])) ++p->pos;
  out->len = p->pos - start;
  return NULL;
}

/* One statement: its words and what ended it (END, LBRACE, RBRACE or EOF). */
typedef struct {
  token_t words[MAX_STATEMENT_WORDS];
  int count;
  int at; /* the next word to take */
  tok_kind_t end;
  uint32_t line; /* of the first word, or of the end */
  parser_t *p;
} stmt_t;

static vlmc_status_t read_statement(parser_t *p, stmt_t *s) {
  s->count = s->at = 0;
  s->p = p;
  s->line = p->line;
  for (;;) {
    token_t t;
    VLMC_RETURN_IF_ERROR(next_token(p, &t));
    if (t.kind != TOK_WORD) {
      s->end = t.kind;
      if (!s->count) s->line = t.line;
      return NULL;
    }
    if (s->count == MAX_STATEMENT_WORDS) {
      return parse_error(p, t.line, "statement has more than %d words", MAX_STATEMENT_WORDS);
    }
    if (!s->count) s->line = t.line;
    s->words[s->count++] = t;
  }
}

static bool word_is(const token_t *w, const char *text) {
  return w->len == strlen(text) && memcmp(w->start, text, w->len) == 0;
}

/* The statement's keyword, for messages. */
static const token_t *stmt_head(const stmt_t *s) {
  return &s->words[0];
}

static vlmc_status_t stmt_missing(const stmt_t *s, const char *what) {
  return parse_error(s->p, s->line, "'%.*s': expected %s, got the end of the statement",
                     (int)stmt_head(s)->len, stmt_head(s)->start, what);
}

static vlmc_status_t expect_keyword(stmt_t *s, const char *keyword) {
  if (s->at >= s->count) {
    char what[40];
    snprintf(what, sizeof what, "'%s'", keyword);
    return stmt_missing(s, what);
  }
  const token_t *w = &s->words[s->at];
  if (!word_is(w, keyword)) {
    return parse_error(s->p, s->line, "'%.*s': expected '%s', got '%.*s'", (int)stmt_head(s)->len,
                       stmt_head(s)->start, keyword, (int)(w->len > 64 ? 64 : w->len), w->start);
  }
  ++s->at;
  return NULL;
}

static bool name_is_valid(const char *text, size_t len) {
  if (len == 0 || len > VLMC_NPU_MAX_NAME) return false;
  for (size_t i = 0; i < len; ++i) {
    unsigned char c = (unsigned char)text[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

static vlmc_status_t take_name(stmt_t *s, const char *what, const char **out) {
  if (s->at >= s->count) return stmt_missing(s, what);
  const token_t *w = &s->words[s->at++];
  if (!name_is_valid(w->start, w->len)) {
    return parse_error(s->p, s->line,
                       "%s: '%.*s' is not a name ([A-Za-z_][A-Za-z0-9_]*, at most %d)", what,
                       (int)(w->len > 64 ? 64 : w->len), w->start, VLMC_NPU_MAX_NAME);
  }
  *out = vlmc_arena_strndup(&s->p->program->arena, w->start, w->len);
  if (!*out) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", s->p->filename);
  return NULL;
}

/* A decimal number 0..2^40 in text[0..len). */
static bool parse_number(const char *text, size_t len, int64_t *out) {
  if (len == 0 || len > 13) return false;
  int64_t v = 0;
  for (size_t i = 0; i < len; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    v = v * 10 + (text[i] - '0');
  }
  if (v > ((int64_t)1 << NUMBER_MAX_BITS)) return false;
  *out = v;
  return true;
}

static vlmc_status_t number_error(const stmt_t *s, const char *what, const char *text, size_t len) {
  return parse_error(s->p, s->line, "%s: expected a decimal number 0..2^%d, got '%.*s'", what,
                     NUMBER_MAX_BITS, (int)(len > 64 ? 64 : len), text);
}

static vlmc_status_t take_int(stmt_t *s, const char *what, int64_t *out) {
  if (s->at >= s->count) return stmt_missing(s, what);
  const token_t *w = &s->words[s->at++];
  if (!parse_number(w->start, w->len, out)) return number_error(s, what, w->start, w->len);
  return NULL;
}

/* `keyword INT` */
static vlmc_status_t take_field(stmt_t *s, const char *keyword, int64_t *out) {
  VLMC_RETURN_IF_ERROR(expect_keyword(s, keyword));
  return take_int(s, keyword, out);
}

static vlmc_status_t expect_end(const stmt_t *s) {
  if (s->at >= s->count) return NULL;
  const token_t *w = &s->words[s->at];
  return parse_error(s->p, s->line, "'%.*s': unexpected '%.*s' after the last field",
                     (int)stmt_head(s)->len, stmt_head(s)->start, (int)(w->len > 64 ? 64 : w->len),
                     w->start);
}

static vlmc_status_t take_dir(stmt_t *s, vlmc_npu_dir_t *out) {
  if (s->at >= s->count) return stmt_missing(s, "a direction ('in' or 'out')");
  const token_t *w = &s->words[s->at++];
  if (word_is(w, "in")) {
    *out = VLMC_NPU_DIR_IN;
  } else if (word_is(w, "out")) {
    *out = VLMC_NPU_DIR_OUT;
  } else {
    return parse_error(s->p, s->line, "expected a direction 'in' or 'out', got '%.*s'",
                       (int)(w->len > 64 ? 64 : w->len), w->start);
  }
  return NULL;
}

/* DIMS := SIZE "x" STRIDE ("," SIZE "x" STRIDE)* */
static vlmc_status_t parse_dims(const stmt_t *s, const token_t *w, vlmc_npu_pattern_t *out) {
  const char *c = w->start, *end = w->start + w->len;
  out->ndims = 0;
  while (c < end) {
    if (out->ndims == VLMC_NPU_MAX_DIMS) {
      return parse_error(s->p, s->line, "dims: more than %d dimensions", VLMC_NPU_MAX_DIMS);
    }
    const char *comma = memchr(c, ',', (size_t)(end - c));
    const char *item_end = comma ? comma : end;
    const char *x = memchr(c, 'x', (size_t)(item_end - c));
    vlmc_npu_dim_t *d = &out->dims[out->ndims++];
    if (!x || !parse_number(c, (size_t)(x - c), &d->size) ||
        !parse_number(x + 1, (size_t)(item_end - x - 1), &d->stride)) {
      return parse_error(
          s->p, s->line,
          "dims: expected SIZExSTRIDE[,SIZExSTRIDE...] of decimal numbers, got '%.*s'",
          (int)(w->len > 64 ? 64 : w->len), w->start);
    }
    if (!comma) break;
    c = comma + 1;
    if (c == end) return parse_error(s->p, s->line, "dims: a ',' with no dimension after it");
  }
  return NULL;
}

static vlmc_status_t take_dims(stmt_t *s, vlmc_npu_pattern_t *out) {
  VLMC_RETURN_IF_ERROR(expect_keyword(s, "dims"));
  if (s->at >= s->count) return stmt_missing(s, "the dims (SIZExSTRIDE,...)");
  out->repeat = 1;
  return parse_dims(s, &s->words[s->at++], out);
}

static uint32_t line_of_slot(const parser_t *p, const name_slot_t *slot) {
  const vlmc_npu_program_t *g = p->program;
  switch (slot->kind) {
    case NAME_TILE:
      return g->tiles.items[slot->index].line;
    case NAME_BUFFER:
      return g->buffers.items[slot->index].line;
    case NAME_LOCK:
      return g->locks.items[slot->index].line;
    case NAME_BD:
      return g->bds.items[slot->index].line;
    case NAME_CHANNEL:
      return g->channels.items[slot->index].line;
    case NAME_DMA:
      return g->runtime.items[slot->index].line;
  }
  return 0;
}

/* Registers a definition; a second definition of a name is refused with both lines. */
static vlmc_status_t define_name(stmt_t *s, const char *name, name_kind_t kind, size_t at) {
  const name_slot_t *existing = NULL;
  if (!name_index_add(&s->p->names, name, kind, at, &existing)) {
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", s->p->filename);
  }
  if (existing) {
    return parse_error(s->p, s->line, "duplicate name '%s': already the %s of line %u", name,
                       kNameKindWords[existing->kind], line_of_slot(s->p, existing));
  }
  return NULL;
}

static vlmc_status_t list_full(const stmt_t *s, const char *what) {
  return parse_error(s->p, s->line, "more than %d %s (or out of memory)", VLMC_NPU_MAX_ITEMS, what);
}

/* ------------------------------------------------------------------------------------------ */
/* Top-level statements                                                                       */

static vlmc_status_t parse_device(stmt_t *s) {
  vlmc_npu_program_t *g = s->p->program;
  if (g->device) {
    return parse_error(s->p, s->line, "a second 'device' (the first is on line %u)",
                       g->device_line);
  }
  VLMC_RETURN_IF_ERROR(take_name(s, "the device name", &g->device));
  g->device_line = s->line;
  return expect_end(s);
}

static vlmc_status_t parse_arg(stmt_t *s) {
  vlmc_npu_program_t *g = s->p->program;
  vlmc_npu_arg_t a = {.line = s->line};
  VLMC_RETURN_IF_ERROR(take_int(s, "the argument index", &a.index));
  VLMC_RETURN_IF_ERROR(take_field(s, "bytes", &a.bytes));
  VLMC_RETURN_IF_ERROR(expect_end(s));
  for (size_t i = 0; i < g->args.count; ++i) {
    if (g->args.items[i].index == a.index) {
      return parse_error(s->p, s->line, "duplicate 'arg %lld' (first on line %u)",
                         (long long)a.index, g->args.items[i].line);
    }
  }
  vlmc_npu_arg_t *slot;
  LIST_PUSH(g->args, slot);
  if (!slot) return list_full(s, "args");
  *slot = a;
  return NULL;
}

static vlmc_status_t parse_tile(stmt_t *s) {
  vlmc_npu_program_t *g = s->p->program;
  vlmc_npu_tile_t t = {.line = s->line};
  VLMC_RETURN_IF_ERROR(take_name(s, "the tile's name", &t.name));
  if (s->at >= s->count) return stmt_missing(s, "the tile kind (compute, memory or shim)");
  const token_t *kind = &s->words[s->at++];
  if (!vlmc_npu_tile_kind_lookup(kind->start, kind->len, &t.kind)) {
    return parse_error(s->p, s->line, "tile '%s': unknown kind '%.*s' (compute, memory or shim)",
                       t.name, (int)(kind->len > 64 ? 64 : kind->len), kind->start);
  }
  VLMC_RETURN_IF_ERROR(take_field(s, "col", &t.col));
  VLMC_RETURN_IF_ERROR(take_field(s, "row", &t.row));
  VLMC_RETURN_IF_ERROR(expect_end(s));
  VLMC_RETURN_IF_ERROR(define_name(s, t.name, NAME_TILE, g->tiles.count));
  vlmc_npu_tile_t *slot;
  LIST_PUSH(g->tiles, slot);
  if (!slot) return list_full(s, "tiles");
  *slot = t;
  return NULL;
}

static vlmc_status_t parse_buffer(stmt_t *s) {
  vlmc_npu_program_t *g = s->p->program;
  vlmc_npu_buffer_t b = {.line = s->line};
  VLMC_RETURN_IF_ERROR(take_name(s, "the buffer's name", &b.name));
  VLMC_RETURN_IF_ERROR(expect_keyword(s, "tile"));
  VLMC_RETURN_IF_ERROR(take_name(s, "the buffer's tile", &b.tile));
  VLMC_RETURN_IF_ERROR(take_field(s, "addr", &b.addr));
  VLMC_RETURN_IF_ERROR(take_field(s, "bytes", &b.bytes));
  VLMC_RETURN_IF_ERROR(expect_end(s));
  if (b.bytes == 0)
    return parse_error(s->p, s->line, "buffer '%s': bytes must be positive", b.name);
  VLMC_RETURN_IF_ERROR(define_name(s, b.name, NAME_BUFFER, g->buffers.count));
  vlmc_npu_buffer_t *slot;
  LIST_PUSH(g->buffers, slot);
  if (!slot) return list_full(s, "buffers");
  *slot = b;
  return NULL;
}

static vlmc_status_t parse_lock(stmt_t *s) {
  vlmc_npu_program_t *g = s->p->program;
  vlmc_npu_lock_t l = {.line = s->line};
  VLMC_RETURN_IF_ERROR(take_name(s, "the lock's name", &l.name));
  VLMC_RETURN_IF_ERROR(expect_keyword(s, "tile"));
  VLMC_RETURN_IF_ERROR(take_name(s, "the lock's tile", &l.tile));
  VLMC_RETURN_IF_ERROR(take_field(s, "init", &l.init));
  VLMC_RETURN_IF_ERROR(expect_end(s));
  VLMC_RETURN_IF_ERROR(define_name(s, l.name, NAME_LOCK, g->locks.count));
  vlmc_npu_lock_t *slot;
  LIST_PUSH(g->locks, slot);
  if (!slot) return list_full(s, "locks");
  *slot = l;
  return NULL;
}

static vlmc_status_t take_lock_use(stmt_t *s, const char *what, vlmc_npu_lock_use_t *out) {
  if (out->lock) return parse_error(s->p, s->line, "'%s' given twice", what);
  VLMC_RETURN_IF_ERROR(take_name(s, what, &out->lock));
  return take_int(s, what, &out->value);
}

/* bd_opt* in any order, each at most once. */
static vlmc_status_t parse_bd_options(stmt_t *s, vlmc_npu_bd_t *b) {
  bool has_repeat = false;
  while (s->at < s->count) {
    const token_t *w = &s->words[s->at++];
    if (word_is(w, "repeat") && !has_repeat) {
      has_repeat = true;
      VLMC_RETURN_IF_ERROR(take_int(s, "repeat", &b->pattern.repeat));
    } else if (word_is(w, "acquire")) {
      VLMC_RETURN_IF_ERROR(take_lock_use(s, "acquire", &b->acquire));
    } else if (word_is(w, "release")) {
      VLMC_RETURN_IF_ERROR(take_lock_use(s, "release", &b->release));
    } else if (word_is(w, "next") && !b->next) {
      VLMC_RETURN_IF_ERROR(take_name(s, "next", &b->next));
    } else {
      return parse_error(s->p, s->line,
                         "bd '%s': unexpected '%.*s' (repeat, acquire, release or next, each once)",
                         b->name, (int)(w->len > 64 ? 64 : w->len), w->start);
    }
  }
  return NULL;
}

static vlmc_status_t parse_bd(stmt_t *s) {
  vlmc_npu_program_t *g = s->p->program;
  vlmc_npu_bd_t b = {.line = s->line};
  VLMC_RETURN_IF_ERROR(take_name(s, "the bd's name", &b.name));
  VLMC_RETURN_IF_ERROR(expect_keyword(s, "tile"));
  VLMC_RETURN_IF_ERROR(take_name(s, "the bd's tile", &b.tile));
  VLMC_RETURN_IF_ERROR(expect_keyword(s, "buffer"));
  VLMC_RETURN_IF_ERROR(take_name(s, "the bd's buffer", &b.buffer));
  VLMC_RETURN_IF_ERROR(take_field(s, "offset", &b.offset));
  VLMC_RETURN_IF_ERROR(take_dims(s, &b.pattern));
  VLMC_RETURN_IF_ERROR(parse_bd_options(s, &b));
  VLMC_RETURN_IF_ERROR(define_name(s, b.name, NAME_BD, g->bds.count));
  vlmc_npu_bd_t *slot;
  LIST_PUSH(g->bds, slot);
  if (!slot) return list_full(s, "bds");
  *slot = b;
  return NULL;
}

static vlmc_status_t parse_channel(stmt_t *s) {
  vlmc_npu_program_t *g = s->p->program;
  vlmc_npu_channel_t c = {.line = s->line};
  VLMC_RETURN_IF_ERROR(take_name(s, "the channel's name", &c.name));
  VLMC_RETURN_IF_ERROR(expect_keyword(s, "tile"));
  VLMC_RETURN_IF_ERROR(take_name(s, "the channel's tile", &c.tile));
  VLMC_RETURN_IF_ERROR(take_dir(s, &c.dir));
  VLMC_RETURN_IF_ERROR(take_int(s, "the channel index", &c.index));
  VLMC_RETURN_IF_ERROR(expect_keyword(s, "bd"));
  VLMC_RETURN_IF_ERROR(take_name(s, "the channel's first bd", &c.bd));
  VLMC_RETURN_IF_ERROR(expect_end(s));
  VLMC_RETURN_IF_ERROR(define_name(s, c.name, NAME_CHANNEL, g->channels.count));
  vlmc_npu_channel_t *slot;
  LIST_PUSH(g->channels, slot);
  if (!slot) return list_full(s, "channels");
  *slot = c;
  return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Blocks: core, loop, runtime                                                                */

typedef enum { CTX_TOP, CTX_CORE, CTX_RUNTIME } ctx_kind_t;

typedef struct {
  ctx_kind_t kind;
  uint32_t line; /* where the block opened */
  bool is_loop;  /* a loop inside a core */
} ctx_t;

static vlmc_npu_core_t *current_core(parser_t *p) {
  return &p->program->cores.items[p->program->cores.count - 1];
}

static vlmc_status_t push_core_op(stmt_t *s, vlmc_npu_core_op_t op) {
  vlmc_npu_core_t *core = current_core(s->p);
  if (!list_reserve((void **)&core->ops, &core->op_capacity, core->op_count, sizeof *core->ops)) {
    return list_full(s, "ops in one core");
  }
  core->ops[core->op_count++] = op;
  return NULL;
}

static vlmc_status_t parse_core_open(stmt_t *s) {
  vlmc_npu_program_t *g = s->p->program;
  const char *tile;
  VLMC_RETURN_IF_ERROR(take_name(s, "the core's tile", &tile));
  VLMC_RETURN_IF_ERROR(expect_end(s));
  for (size_t i = 0; i < g->cores.count; ++i) {
    if (strcmp(g->cores.items[i].tile, tile) == 0) {
      return parse_error(s->p, s->line, "a second core for tile '%s' (the first is on line %u)",
                         tile, g->cores.items[i].line);
    }
  }
  vlmc_npu_core_t *core;
  LIST_PUSH(g->cores, core);
  if (!core) return list_full(s, "cores");
  core->tile = tile;
  core->line = s->line;
  return NULL;
}

static vlmc_status_t parse_lock_op(stmt_t *s, vlmc_npu_op_kind_t kind, const char *what) {
  vlmc_npu_core_op_t op = {.kind = kind, .line = s->line};
  VLMC_RETURN_IF_ERROR(take_name(s, what, &op.name));
  VLMC_RETURN_IF_ERROR(take_int(s, what, &op.value));
  VLMC_RETURN_IF_ERROR(expect_end(s));
  return push_core_op(s, op);
}

/* An argument of a call: a buffer name or a decimal constant, kept as written. */
static vlmc_status_t take_call_arg(stmt_t *s, const char **out) {
  const token_t *w = &s->words[s->at];
  if (w->start[0] >= '0' && w->start[0] <= '9') {
    int64_t v;
    ++s->at;
    if (!parse_number(w->start, w->len, &v))
      return number_error(s, "call argument", w->start, w->len);
    *out = vlmc_arena_strndup(&s->p->program->arena, w->start, w->len);
    if (!*out) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", s->p->filename);
    return NULL;
  }
  return take_name(s, "call argument", out);
}

static vlmc_status_t parse_call(stmt_t *s) {
  vlmc_npu_core_op_t op = {.kind = VLMC_NPU_OP_CALL, .line = s->line};
  VLMC_RETURN_IF_ERROR(take_name(s, "the microkernel's name", &op.name));
  int n = s->count - s->at;
  if (n > VLMC_NPU_MAX_CALL_ARGS) {
    return parse_error(s->p, s->line, "call %s: more than %d arguments", op.name,
                       VLMC_NPU_MAX_CALL_ARGS);
  }
  if (n > 0) {
    op.args = VLMC_ARENA_NEW_ARRAY(&s->p->program->arena, const char *, (size_t)n);
    if (!op.args) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", s->p->filename);
  }
  for (op.nargs = 0; op.nargs < n; ++op.nargs) {
    VLMC_RETURN_IF_ERROR(take_call_arg(s, &op.args[op.nargs]));
  }
  return push_core_op(s, op);
}

/* `loop INT` (opens a block). */
static vlmc_status_t parse_loop_open(stmt_t *s) {
  vlmc_npu_core_op_t op = {.kind = VLMC_NPU_OP_LOOP, .line = s->line};
  VLMC_RETURN_IF_ERROR(take_int(s, "the loop count", &op.value));
  VLMC_RETURN_IF_ERROR(expect_end(s));
  if (op.value < 1 || op.value > UINT32_MAX) {
    return parse_error(s->p, s->line, "loop count %lld is outside 1..%u", (long long)op.value,
                       UINT32_MAX);
  }
  return push_core_op(s, op);
}

static vlmc_status_t push_rt_op(stmt_t *s, const vlmc_npu_rt_op_t *op) {
  vlmc_npu_rt_op_t *slot;
  LIST_PUSH(s->p->program->runtime, slot);
  if (!slot) return list_full(s, "runtime operations");
  *slot = *op;
  return NULL;
}

static vlmc_status_t parse_rt_dma(stmt_t *s) {
  vlmc_npu_rt_op_t op = {.kind = VLMC_NPU_RT_DMA, .line = s->line};
  VLMC_RETURN_IF_ERROR(take_name(s, "the dma task's name", &op.name));
  VLMC_RETURN_IF_ERROR(expect_keyword(s, "tile"));
  VLMC_RETURN_IF_ERROR(take_name(s, "the dma's shim tile", &op.tile));
  VLMC_RETURN_IF_ERROR(take_dir(s, &op.dir));
  VLMC_RETURN_IF_ERROR(take_int(s, "the channel index", &op.channel));
  VLMC_RETURN_IF_ERROR(take_field(s, "arg", &op.arg));
  VLMC_RETURN_IF_ERROR(take_field(s, "offset", &op.offset));
  VLMC_RETURN_IF_ERROR(take_dims(s, &op.pattern));
  if (s->at < s->count) VLMC_RETURN_IF_ERROR(take_field(s, "repeat", &op.pattern.repeat));
  VLMC_RETURN_IF_ERROR(expect_end(s));
  VLMC_RETURN_IF_ERROR(define_name(s, op.name, NAME_DMA, s->p->program->runtime.count));
  return push_rt_op(s, &op);
}

static vlmc_status_t parse_rt_wait(stmt_t *s) {
  vlmc_npu_rt_op_t op = {.kind = VLMC_NPU_RT_WAIT, .line = s->line};
  VLMC_RETURN_IF_ERROR(take_name(s, "the dma task waited for", &op.name));
  VLMC_RETURN_IF_ERROR(expect_end(s));
  return push_rt_op(s, &op);
}

static vlmc_status_t parse_rt_write(stmt_t *s) {
  vlmc_npu_rt_op_t op = {.kind = VLMC_NPU_RT_WRITE, .line = s->line};
  VLMC_RETURN_IF_ERROR(take_name(s, "the buffer written", &op.name));
  VLMC_RETURN_IF_ERROR(take_field(s, "offset", &op.offset));
  VLMC_RETURN_IF_ERROR(take_field(s, "value", &op.value));
  VLMC_RETURN_IF_ERROR(expect_end(s));
  if (op.value > UINT32_MAX) {
    return parse_error(s->p, s->line, "write %s: value %lld does not fit 32 bits", op.name,
                       (long long)op.value);
  }
  return push_rt_op(s, &op);
}

/* ------------------------------------------------------------------------------------------ */
/* The statement loop                                                                         */

typedef struct {
  ctx_t stack[VLMC_NPU_MAX_DEPTH + 1];
  int depth; /* stack[depth] is the current context; 0: top level */
} blocks_t;

static vlmc_status_t open_block(stmt_t *s, blocks_t *b, ctx_kind_t kind, bool is_loop) {
  if (b->depth == VLMC_NPU_MAX_DEPTH) {
    return parse_error(s->p, s->line, "blocks nested deeper than %d", VLMC_NPU_MAX_DEPTH);
  }
  b->stack[++b->depth] = (ctx_t){kind, s->line, is_loop};
  return NULL;
}

static vlmc_status_t top_statement(stmt_t *s, blocks_t *b, bool opens) {
  const token_t *w = stmt_head(s);
  s->at = 1;
  bool is_core = word_is(w, "core"), is_runtime = word_is(w, "runtime");
  if ((is_core || is_runtime) != opens) {
    return parse_error(s->p, s->line,
                       opens ? "'{' after '%.*s', which opens no block"
                             : "'%.*s' must be followed by '{' on the same line",
                       (int)(w->len > 64 ? 64 : w->len), w->start);
  }
  if (!s->p->program->device && !word_is(w, "device")) {
    return parse_error(s->p, s->line, "the program must start with 'device NAME'");
  }
  if (word_is(w, "device")) return parse_device(s);
  if (word_is(w, "arg")) return parse_arg(s);
  if (word_is(w, "tile")) return parse_tile(s);
  if (word_is(w, "buffer")) return parse_buffer(s);
  if (word_is(w, "lock")) return parse_lock(s);
  if (word_is(w, "bd")) return parse_bd(s);
  if (word_is(w, "channel")) return parse_channel(s);
  if (is_core) {
    VLMC_RETURN_IF_ERROR(parse_core_open(s));
    return open_block(s, b, CTX_CORE, false);
  }
  vlmc_npu_program_t *g = s->p->program;
  if (g->has_runtime) {
    return parse_error(s->p, s->line, "a second 'runtime' block (the first is on line %u)",
                       g->runtime_line);
  }
  VLMC_RETURN_IF_ERROR(expect_end(s));
  g->has_runtime = 1;
  g->runtime_line = s->line;
  return open_block(s, b, CTX_RUNTIME, false);
}

static vlmc_status_t core_statement(stmt_t *s, blocks_t *b, bool opens) {
  const token_t *w = stmt_head(s);
  s->at = 1;
  bool is_loop = word_is(w, "loop");
  if (is_loop != opens) {
    return parse_error(s->p, s->line,
                       opens ? "'{' after '%.*s', which opens no block"
                             : "'%.*s' must be followed by '{' on the same line",
                       (int)(w->len > 64 ? 64 : w->len), w->start);
  }
  if (is_loop) {
    VLMC_RETURN_IF_ERROR(parse_loop_open(s));
    return open_block(s, b, CTX_CORE, true);
  }
  if (word_is(w, "acquire")) return parse_lock_op(s, VLMC_NPU_OP_ACQUIRE, "acquire");
  if (word_is(w, "release")) return parse_lock_op(s, VLMC_NPU_OP_RELEASE, "release");
  if (word_is(w, "call")) return parse_call(s);
  return parse_error(s->p, s->line, "unknown core statement '%.*s' (loop, acquire, release, call)",
                     (int)(w->len > 64 ? 64 : w->len), w->start);
}

static vlmc_status_t runtime_statement(stmt_t *s, bool opens) {
  const token_t *w = stmt_head(s);
  s->at = 1;
  if (opens) return parse_error(s->p, s->line, "no block may open inside 'runtime'");
  if (word_is(w, "dma")) return parse_rt_dma(s);
  if (word_is(w, "wait")) return parse_rt_wait(s);
  if (word_is(w, "write")) return parse_rt_write(s);
  return parse_error(s->p, s->line, "unknown runtime statement '%.*s' (dma, wait, write)",
                     (int)(w->len > 64 ? 64 : w->len), w->start);
}

static vlmc_status_t close_block(stmt_t *s, blocks_t *b) {
  if (b->depth == 0) return parse_error(s->p, s->line, "'}' with no open block");
  if (b->stack[b->depth].is_loop) {
    VLMC_RETURN_IF_ERROR(
        push_core_op(s, (vlmc_npu_core_op_t){.kind = VLMC_NPU_OP_END, .line = s->line}));
  }
  --b->depth;
  return NULL;
}

/* Top-level keywords that are misplaced inside a block, or unknown ones, get one message. */
static vlmc_status_t check_top_keyword(stmt_t *s) {
  static const char *const kTop[] = {"device", "arg",     "tile", "buffer", "lock",
                                     "bd",     "channel", "core", "runtime"};
  for (size_t i = 0; i < sizeof kTop / sizeof kTop[0]; ++i) {
    if (word_is(stmt_head(s), kTop[i])) return NULL;
  }
  const token_t *w = stmt_head(s);
  return parse_error(s->p, s->line,
                     "unknown statement '%.*s' (device, arg, tile, buffer, lock, bd, channel, "
                     "core, runtime)",
                     (int)(w->len > 64 ? 64 : w->len), w->start);
}

static vlmc_status_t dispatch_statement(stmt_t *s, blocks_t *b) {
  bool opens = s->end == TOK_LBRACE;
  if (s->count == 0) {
    return opens ? parse_error(s->p, s->line, "'{' with no statement before it") : NULL;
  }
  ctx_t *ctx = &b->stack[b->depth];
  if (ctx->kind == CTX_CORE) return core_statement(s, b, opens);
  if (ctx->kind == CTX_RUNTIME) return runtime_statement(s, opens);
  VLMC_RETURN_IF_ERROR(check_top_keyword(s));
  return top_statement(s, b, opens);
}

static vlmc_status_t parse_statements(parser_t *p) {
  blocks_t b = {.stack = {{CTX_TOP, 0, false}}};
  stmt_t *s = malloc(sizeof *s); /* 64 tokens: too big for a fuzzer's small stack frames */
  if (!s) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", p->filename);
  vlmc_status_t st = NULL;
  for (;;) {
    st = read_statement(p, s);
    if (!st) st = dispatch_statement(s, &b);
    if (!st && s->end == TOK_RBRACE) st = close_block(s, &b);
    if (st || s->end == TOK_EOF) break;
  }
  if (!st && b.depth > 0) {
    st = parse_error(p, p->line, "'{' of line %u is never closed", b.stack[b.depth].line);
  }
  if (!st && !p->program->device) st = parse_error(p, p->line, "no 'device NAME' statement");
  free(s);
  return st;
}

vlmc_status_t vlmc_npu_program_parse(const char *filename, const char *text, size_t len,
                                     vlmc_npu_program_t *program) {
  vlmc_npu_program_deinit(program);
  vlmc_npu_program_init(program);
  parser_t p = {.filename = filename ? filename : "npu.program",
                .text = text ? text : "",
                .len = text ? len : 0,
                .line = 1,
                .program = program};
  program->filename = vlmc_arena_strdup(&program->arena, p.filename);
  if (!program->filename) program->filename = "npu.program";
  vlmc_status_t st = parse_statements(&p);
  name_index_free(&p.names);
  if (st) {
    vlmc_npu_program_deinit(program);
    vlmc_npu_program_init(program);
  }
  return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Printer                                                                                    */

static const char *dir_name(vlmc_npu_dir_t dir) {
  return dir == VLMC_NPU_DIR_IN ? "in" : "out";
}

static void print_pattern(const vlmc_npu_pattern_t *pat, vlmc_strbuf_t *out) {
  vlmc_strbuf_puts(out, " dims ");
  for (int i = 0; i < pat->ndims; ++i) {
    vlmc_strbuf_printf(out, "%s%lldx%lld", i ? "," : "", (long long)pat->dims[i].size,
                       (long long)pat->dims[i].stride);
  }
  if (pat->repeat != 1) vlmc_strbuf_printf(out, " repeat %lld", (long long)pat->repeat);
}

static void print_bd(const vlmc_npu_bd_t *b, vlmc_strbuf_t *out) {
  vlmc_strbuf_printf(out, "bd %s tile %s buffer %s offset %lld", b->name, b->tile, b->buffer,
                     (long long)b->offset);
  print_pattern(&b->pattern, out);
  if (b->acquire.lock)
    vlmc_strbuf_printf(out, " acquire %s %lld", b->acquire.lock, (long long)b->acquire.value);
  if (b->release.lock)
    vlmc_strbuf_printf(out, " release %s %lld", b->release.lock, (long long)b->release.value);
  if (b->next) vlmc_strbuf_printf(out, " next %s", b->next);
  vlmc_strbuf_putc(out, '\n');
}

static void indent(int depth, vlmc_strbuf_t *out) {
  for (int i = 0; i < depth; ++i) vlmc_strbuf_puts(out, "  ");
}

static void print_core(const vlmc_npu_core_t *core, vlmc_strbuf_t *out) {
  vlmc_strbuf_printf(out, "core %s {\n", core->tile);
  int depth = 1;
  for (size_t i = 0; i < core->op_count; ++i) {
    const vlmc_npu_core_op_t *op = &core->ops[i];
    if (op->kind == VLMC_NPU_OP_END) {
      indent(--depth, out);
      vlmc_strbuf_puts(out, "}\n");
      continue;
    }
    indent(depth, out);
    if (op->kind == VLMC_NPU_OP_LOOP) {
      vlmc_strbuf_printf(out, "loop %lld {\n", (long long)op->value);
      ++depth;
    } else if (op->kind == VLMC_NPU_OP_CALL) {
      vlmc_strbuf_printf(out, "call %s", op->name);
      for (int a = 0; a < op->nargs; ++a) vlmc_strbuf_printf(out, " %s", op->args[a]);
      vlmc_strbuf_putc(out, '\n');
    } else {
      vlmc_strbuf_printf(out, "%s %s %lld\n",
                         op->kind == VLMC_NPU_OP_ACQUIRE ? "acquire" : "release", op->name,
                         (long long)op->value);
    }
  }
  vlmc_strbuf_puts(out, "}\n");
}

static void print_rt_op(const vlmc_npu_rt_op_t *op, vlmc_strbuf_t *out) {
  if (op->kind == VLMC_NPU_RT_DMA) {
    vlmc_strbuf_printf(out, "  dma %s tile %s %s %lld arg %lld offset %lld", op->name, op->tile,
                       dir_name(op->dir), (long long)op->channel, (long long)op->arg,
                       (long long)op->offset);
    print_pattern(&op->pattern, out);
    vlmc_strbuf_putc(out, '\n');
  } else if (op->kind == VLMC_NPU_RT_WAIT) {
    vlmc_strbuf_printf(out, "  wait %s\n", op->name);
  } else {
    vlmc_strbuf_printf(out, "  write %s offset %lld value %lld\n", op->name, (long long)op->offset,
                       (long long)op->value);
  }
}

void vlmc_npu_program_print(const vlmc_npu_program_t *g, vlmc_strbuf_t *out) {
  vlmc_strbuf_printf(out, "device %s\n", g->device ? g->device : "?");
  for (size_t i = 0; i < g->args.count; ++i) {
    vlmc_strbuf_printf(out, "arg %lld bytes %lld\n", (long long)g->args.items[i].index,
                       (long long)g->args.items[i].bytes);
  }
  for (size_t i = 0; i < g->tiles.count; ++i) {
    const vlmc_npu_tile_t *t = &g->tiles.items[i];
    vlmc_strbuf_printf(out, "tile %s %s col %lld row %lld\n", t->name,
                       vlmc_npu_tile_kind_name(t->kind), (long long)t->col, (long long)t->row);
  }
  for (size_t i = 0; i < g->buffers.count; ++i) {
    const vlmc_npu_buffer_t *b = &g->buffers.items[i];
    vlmc_strbuf_printf(out, "buffer %s tile %s addr %lld bytes %lld\n", b->name, b->tile,
                       (long long)b->addr, (long long)b->bytes);
  }
  for (size_t i = 0; i < g->locks.count; ++i) {
    const vlmc_npu_lock_t *l = &g->locks.items[i];
    vlmc_strbuf_printf(out, "lock %s tile %s init %lld\n", l->name, l->tile, (long long)l->init);
  }
  for (size_t i = 0; i < g->bds.count; ++i) print_bd(&g->bds.items[i], out);
  for (size_t i = 0; i < g->channels.count; ++i) {
    const vlmc_npu_channel_t *c = &g->channels.items[i];
    vlmc_strbuf_printf(out, "channel %s tile %s %s %lld bd %s\n", c->name, c->tile,
                       dir_name(c->dir), (long long)c->index, c->bd);
  }
  for (size_t i = 0; i < g->cores.count; ++i) print_core(&g->cores.items[i], out);
  if (g->has_runtime) {
    vlmc_strbuf_puts(out, "runtime {\n");
    for (size_t i = 0; i < g->runtime.count; ++i) print_rt_op(&g->runtime.items[i], out);
    vlmc_strbuf_puts(out, "}\n");
  }
}

/* ------------------------------------------------------------------------------------------ */
/* Static checker                                                                             */
/* Only what the text alone decides. The dynamic rules (deadlock, lock misuse at run time such as
 * a release above the lock's maximum or an acquire never satisfied, BD chains that starve a
 * channel) need the discrete-event simulator of the npu-sim backend, which is not built yet. */

typedef struct {
  const vlmc_npu_program_t *g;
  const vlmc_npu_device_t *dev;
  name_index_t names;
  vlmc_npu_rule_t rule;
  /* per tile (the index of g->tiles): what is used of it */
  int64_t *bytes_used;
  int64_t *bd_count;
  int64_t *lock_count;
} checker_t;

static vlmc_status_t violation(checker_t *c, vlmc_npu_rule_t rule, uint32_t line, const char *fmt,
                               ...) VLMC_PRINTF(4, 5);

static vlmc_status_t violation(checker_t *c, vlmc_npu_rule_t rule, uint32_t line, const char *fmt,
                               ...) {
  va_list ap;
  va_start(ap, fmt);
  vlmc_status_t detail = vlmc_status_makev(VLMC_OUT_OF_RANGE, fmt, ap);
  va_end(ap);
  vlmc_status_t st = vlmc_status_make(VLMC_OUT_OF_RANGE, "%s:%u: rule %s: %s", c->g->filename, line,
                                      vlmc_npu_rule_name(rule), vlmc_status_message(detail));
  vlmc_status_free(detail);
  c->rule = rule;
  return st;
}

static vlmc_status_t index_names(checker_t *c) {
  const vlmc_npu_program_t *g = c->g;
  const name_slot_t *ignored;
  bool ok = true;
  /* A program built in memory may repeat a name; the first definition wins, as in a lookup. */
  for (size_t i = 0; ok && i < g->tiles.count; ++i)
    ok = name_index_add(&c->names, g->tiles.items[i].name, NAME_TILE, i, &ignored);
  for (size_t i = 0; ok && i < g->buffers.count; ++i)
    ok = name_index_add(&c->names, g->buffers.items[i].name, NAME_BUFFER, i, &ignored);
  for (size_t i = 0; ok && i < g->locks.count; ++i)
    ok = name_index_add(&c->names, g->locks.items[i].name, NAME_LOCK, i, &ignored);
  for (size_t i = 0; ok && i < g->bds.count; ++i)
    ok = name_index_add(&c->names, g->bds.items[i].name, NAME_BD, i, &ignored);
  for (size_t i = 0; ok && i < g->channels.count; ++i)
    ok = name_index_add(&c->names, g->channels.items[i].name, NAME_CHANNEL, i, &ignored);
  for (size_t i = 0; ok && i < g->runtime.count; ++i) {
    if (g->runtime.items[i].kind == VLMC_NPU_RT_DMA)
      ok = name_index_add(&c->names, g->runtime.items[i].name, NAME_DMA, i, &ignored);
  }
  return ok ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", g->filename);
}

/* The index of the `kind` named `name`, referenced by `user` (e.g. "bd 'd0'") on `line`. */
static vlmc_status_t resolve(checker_t *c, const char *name, name_kind_t kind, uint32_t line,
                             const char *user_kind, const char *user, size_t *out_index) {
  const name_slot_t *slot = name ? name_index_find(&c->names, name) : NULL;
  if (!slot) {
    return violation(c, VLMC_NPU_RULE_UNDEFINED_NAME, line, "%s '%s': no %s named '%s'", user_kind,
                     user, kNameKindWords[kind], name ? name : "");
  }
  if (slot->kind != kind) {
    return violation(c, VLMC_NPU_RULE_UNDEFINED_NAME, line, "%s '%s': '%s' is a %s, not a %s",
                     user_kind, user, name, kNameKindWords[slot->kind], kNameKindWords[kind]);
  }
  *out_index = slot->index;
  return NULL;
}

static int64_t tile_limit(const checker_t *c, size_t tile, vlmc_npu_tile_fact_t fact) {
  return vlmc_npu_device_tile_int(c->dev, c->g->tiles.items[tile].kind, fact);
}

/* ---- tiles ---- */

static vlmc_status_t check_tile_place(checker_t *c, const vlmc_npu_tile_t *t) {
  int64_t cols = vlmc_npu_device_int(c->dev, VLMC_NPU_COLUMNS);
  int64_t rows = vlmc_npu_device_rows(c->dev);
  vlmc_npu_tile_kind_t row_kind;
  if (t->col < 0 || t->col >= cols || !vlmc_npu_device_row_kind(c->dev, t->row, &row_kind)) {
    return violation(
        c, VLMC_NPU_RULE_TILE_OUTSIDE_ARRAY, t->line,
        "tile '%s' at col %lld row %lld is outside %s's array of %lld columns x %lld rows", t->name,
        (long long)t->col, (long long)t->row, c->dev->name, (long long)cols, (long long)rows);
  }
  if (row_kind != t->kind) {
    return violation(c, VLMC_NPU_RULE_TILE_KIND, t->line,
                     "tile '%s' is declared %s but row %lld of %s holds %s tiles", t->name,
                     vlmc_npu_tile_kind_name(t->kind), (long long)t->row, c->dev->name,
                     vlmc_npu_tile_kind_name(row_kind));
  }
  return NULL;
}

static vlmc_status_t check_tiles(checker_t *c) {
  const vlmc_npu_program_t *g = c->g;
  int64_t rows = vlmc_npu_device_rows(c->dev);
  size_t cells = (size_t)(vlmc_npu_device_int(c->dev, VLMC_NPU_COLUMNS) * rows);
  size_t *owner = calloc(cells ? cells : 1, sizeof *owner); /* tile index + 1, 0: free */
  if (!owner) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", g->filename);
  vlmc_status_t st = NULL;
  for (size_t i = 0; !st && i < g->tiles.count; ++i) {
    const vlmc_npu_tile_t *t = &g->tiles.items[i];
    st = check_tile_place(c, t);
    if (st) break;
    size_t cell = (size_t)(t->col * rows + t->row);
    if (owner[cell]) {
      st = violation(c, VLMC_NPU_RULE_TILE_POSITION_TAKEN, t->line,
                     "tile '%s' at col %lld row %lld: tile '%s' is already there", t->name,
                     (long long)t->col, (long long)t->row, g->tiles.items[owner[cell] - 1].name);
    }
    owner[cell] = i + 1;
  }
  free(owner);
  return st;
}

/* ---- buffers ---- */

static vlmc_status_t check_buffer_fits(checker_t *c, const vlmc_npu_buffer_t *b, size_t tile) {
  const vlmc_npu_tile_t *t = &c->g->tiles.items[tile];
  int64_t memory = tile_limit(c, tile, VLMC_NPU_TILE_MEMORY_BYTES);
  if (b->addr + b->bytes > memory) {
    return violation(c, VLMC_NPU_RULE_CAPACITY_EXCEEDED, b->line,
                     "buffer '%s' on %s tile '%s' ends at byte %lld, past the tile's %lld bytes",
                     b->name, vlmc_npu_tile_kind_name(t->kind), t->name,
                     (long long)(b->addr + b->bytes), (long long)memory);
  }
  /* The stack sits at the bottom of a compute tile's data memory (our layout convention). */
  int64_t stack =
      t->kind == VLMC_NPU_TILE_COMPUTE ? vlmc_npu_device_int(c->dev, VLMC_NPU_STACK_BYTES) : 0;
  if (b->addr < stack) {
    return violation(
        c, VLMC_NPU_RULE_BUFFER_OVERLAP, b->line,
        "buffer '%s' at addr %lld on tile '%s' overlaps the reserved stack (bytes 0..%lld)",
        b->name, (long long)b->addr, t->name, (long long)stack - 1);
  }
  c->bytes_used[tile] += b->bytes;
  if (c->bytes_used[tile] + stack > memory) {
    return violation(c, VLMC_NPU_RULE_CAPACITY_EXCEEDED, b->line,
                     "tile '%s' (%s): buffers of %lld bytes + stack %lld exceed its %lld bytes "
                     "(at buffer '%s')",
                     t->name, vlmc_npu_tile_kind_name(t->kind), (long long)c->bytes_used[tile],
                     (long long)stack, (long long)memory, b->name);
  }
  return NULL;
}

static vlmc_status_t check_buffer_overlaps(checker_t *c, size_t i) {
  const vlmc_npu_buffer_t *a = &c->g->buffers.items[i];
  for (size_t j = 0; j < i; ++j) {
    const vlmc_npu_buffer_t *b = &c->g->buffers.items[j];
    if (strcmp(a->tile, b->tile) != 0) continue;
    if (a->addr < b->addr + b->bytes && b->addr < a->addr + a->bytes) {
      return violation(
          c, VLMC_NPU_RULE_BUFFER_OVERLAP, a->line,
          "buffer '%s' (bytes %lld..%lld) overlaps buffer '%s' (bytes %lld..%lld) on tile '%s'",
          a->name, (long long)a->addr, (long long)(a->addr + a->bytes - 1), b->name,
          (long long)b->addr, (long long)(b->addr + b->bytes - 1), a->tile);
    }
  }
  return NULL;
}

static vlmc_status_t check_buffers(checker_t *c) {
  for (size_t i = 0; i < c->g->buffers.count; ++i) {
    const vlmc_npu_buffer_t *b = &c->g->buffers.items[i];
    size_t tile = 0;
    VLMC_RETURN_IF_ERROR(resolve(c, b->tile, NAME_TILE, b->line, "buffer", b->name, &tile));
    VLMC_RETURN_IF_ERROR(check_buffer_fits(c, b, tile));
  }
  /* Pairwise, after every buffer is known to fit: a quadratic pass over at most 4096 buffers. */
  for (size_t i = 0; i < c->g->buffers.count; ++i)
    VLMC_RETURN_IF_ERROR(check_buffer_overlaps(c, i));
  return NULL;
}

/* ---- locks ---- */

static vlmc_status_t check_lock_amount(checker_t *c, int64_t value, uint32_t line, const char *what,
                                       const char *lock, int64_t min) {
  int64_t max = vlmc_npu_device_int(c->dev, VLMC_NPU_LOCK_MAX_VALUE);
  if (value < min || value > max) {
    return violation(c, VLMC_NPU_RULE_LOCK_VALUE, line,
                     "%s of lock '%s': %lld is outside %lld..%lld", what, lock, (long long)value,
                     (long long)min, (long long)max);
  }
  return NULL;
}

static vlmc_status_t check_locks(checker_t *c) {
  for (size_t i = 0; i < c->g->locks.count; ++i) {
    const vlmc_npu_lock_t *l = &c->g->locks.items[i];
    size_t tile = 0;
    VLMC_RETURN_IF_ERROR(resolve(c, l->tile, NAME_TILE, l->line, "lock", l->name, &tile));
    VLMC_RETURN_IF_ERROR(check_lock_amount(c, l->init, l->line, "init value", l->name, 0));
    int64_t limit = tile_limit(c, tile, VLMC_NPU_TILE_LOCKS);
    if (++c->lock_count[tile] > limit) {
      return violation(c, VLMC_NPU_RULE_LOCK_COUNT_EXCEEDED, l->line,
                       "lock '%s': tile '%s' (%s) has only %lld locks", l->name, l->tile,
                       vlmc_npu_tile_kind_name(c->g->tiles.items[tile].kind), (long long)limit);
    }
  }
  return NULL;
}

/* ---- patterns (BDs and runtime DMAs) ---- */

static vlmc_status_t check_pattern_limits(checker_t *c, const vlmc_npu_pattern_t *pat,
                                          int64_t offset, uint32_t line, const char *what,
                                          const char *name) {
  int64_t max_dims = vlmc_npu_device_int(c->dev, VLMC_NPU_BD_MAX_DIMS);
  int64_t max_size = vlmc_npu_device_int(c->dev, VLMC_NPU_BD_MAX_SIZE);
  int64_t min_stride = vlmc_npu_device_int(c->dev, VLMC_NPU_BD_MIN_STRIDE);
  int64_t max_stride = vlmc_npu_device_int(c->dev, VLMC_NPU_BD_MAX_STRIDE);
  int64_t max_repeat = vlmc_npu_device_int(c->dev, VLMC_NPU_BD_MAX_REPEAT);
  int64_t granule = vlmc_npu_device_int(c->dev, VLMC_NPU_BD_GRANULARITY);
  if (pat->ndims < 1 || pat->ndims > max_dims) {
    return violation(c, VLMC_NPU_RULE_BD_LIMIT, line, "%s '%s': %d dims, the device allows 1..%lld",
                     what, name, pat->ndims, (long long)max_dims);
  }
  for (int d = 0; d < pat->ndims; ++d) {
    const vlmc_npu_dim_t *dim = &pat->dims[d];
    /* Only d0 and d1 sizes are range-checked by mlir-aie's verifier (NPU.md A.2). */
    int64_t size_max = d < 2 ? max_size : ((int64_t)1 << 40);
    if (dim->size < 1 || dim->size > size_max) {
      return violation(c, VLMC_NPU_RULE_BD_LIMIT, line,
                       "%s '%s': d%d size %lld is outside 1..%lld words", what, name, d,
                       (long long)dim->size, (long long)size_max);
    }
    if (dim->stride < min_stride || dim->stride > max_stride) {
      return violation(c, VLMC_NPU_RULE_BD_LIMIT, line,
                       "%s '%s': d%d stride %lld is outside %lld..%lld words", what, name, d,
                       (long long)dim->stride, (long long)min_stride, (long long)max_stride);
    }
  }
  if (pat->repeat < 1 || pat->repeat > max_repeat) {
    return violation(c, VLMC_NPU_RULE_BD_LIMIT, line, "%s '%s': repeat %lld is outside 1..%lld",
                     what, name, (long long)pat->repeat, (long long)max_repeat);
  }
  if (offset % granule != 0) {
    return violation(c, VLMC_NPU_RULE_BD_LIMIT, line,
                     "%s '%s': offset %lld bytes is not a multiple of the %lld-byte granularity",
                     what, name, (long long)offset, (long long)granule);
  }
  return NULL;
}

/* Words from the pattern's first word to its last, inclusive: sizes <= 2^40 and strides <= 2^20
 * after check_pattern_limits, so the sum of 4 products fits int64 (bytes might not). */
static int64_t pattern_span_words(const vlmc_npu_pattern_t *pat) {
  int64_t last = 0;
  for (int d = 0; d < pat->ndims; ++d) last += (pat->dims[d].size - 1) * pat->dims[d].stride;
  return last + 1;
}

/* Whether `span` words from byte `offset` stay inside `bytes`. */
static bool pattern_fits(int64_t offset, int64_t span, int64_t bytes, int64_t granule) {
  return offset <= bytes && span <= (bytes - offset) / granule;
}

/* ---- BDs ---- */

static vlmc_status_t check_bd_lock(checker_t *c, const vlmc_npu_bd_t *b,
                                   const vlmc_npu_lock_use_t *use, const char *what) {
  if (!use->lock) return NULL;
  size_t lock = 0;
  VLMC_RETURN_IF_ERROR(resolve(c, use->lock, NAME_LOCK, b->line, "bd", b->name, &lock));
  const vlmc_npu_lock_t *l = &c->g->locks.items[lock];
  if (strcmp(l->tile, b->tile) != 0) {
    return violation(
        c, VLMC_NPU_RULE_NOT_REACHABLE, b->line,
        "bd '%s' on tile '%s' %ss lock '%s' of tile '%s': a DMA uses its own tile's locks", b->name,
        b->tile, what, l->name, l->tile);
  }
  return check_lock_amount(c, use->value, b->line, what, l->name, 1);
}

/* A memory tile's DMA also reaches the memory of the memory tiles east and west of it
 * (NPU.md A.2: 1.5 MB addressable); every other DMA reaches its own tile's memory only. */
static bool dma_reaches_buffer(const checker_t *c, size_t tile, const vlmc_npu_buffer_t *buf) {
  const name_slot_t *slot = name_index_find(&c->names, buf->tile);
  if (!slot || slot->kind != NAME_TILE) return false;
  const vlmc_npu_tile_t *a = &c->g->tiles.items[tile], *b = &c->g->tiles.items[slot->index];
  if (slot->index == tile) return true;
  bool both_memory = a->kind == VLMC_NPU_TILE_MEMORY && b->kind == VLMC_NPU_TILE_MEMORY;
  return both_memory && a->row == b->row && (a->col - b->col == 1 || b->col - a->col == 1);
}

static vlmc_status_t check_bd_refs(checker_t *c, const vlmc_npu_bd_t *b, size_t *out_buffer) {
  size_t tile = 0, buffer = 0;
  VLMC_RETURN_IF_ERROR(resolve(c, b->tile, NAME_TILE, b->line, "bd", b->name, &tile));
  VLMC_RETURN_IF_ERROR(resolve(c, b->buffer, NAME_BUFFER, b->line, "bd", b->name, &buffer));
  const vlmc_npu_buffer_t *buf = &c->g->buffers.items[buffer];
  if (!dma_reaches_buffer(c, tile, buf)) {
    return violation(c, VLMC_NPU_RULE_NOT_REACHABLE, b->line,
                     "bd '%s' on tile '%s' names buffer '%s' of tile '%s'", b->name, b->tile,
                     buf->name, buf->tile);
  }
  if (b->next) {
    size_t next = 0;
    VLMC_RETURN_IF_ERROR(resolve(c, b->next, NAME_BD, b->line, "bd", b->name, &next));
    const vlmc_npu_bd_t *n = &c->g->bds.items[next];
    if (strcmp(n->tile, b->tile) != 0) {
      return violation(c, VLMC_NPU_RULE_NOT_REACHABLE, b->line,
                       "bd '%s' on tile '%s' chains to bd '%s' of tile '%s'", b->name, b->tile,
                       n->name, n->tile);
    }
  }
  int64_t limit = tile_limit(c, tile, VLMC_NPU_TILE_BDS);
  if (++c->bd_count[tile] > limit) {
    return violation(c, VLMC_NPU_RULE_BD_COUNT_EXCEEDED, b->line,
                     "bd '%s': tile '%s' (%s) has only %lld BDs", b->name, b->tile,
                     vlmc_npu_tile_kind_name(c->g->tiles.items[tile].kind), (long long)limit);
  }
  *out_buffer = buffer;
  return NULL;
}

static vlmc_status_t check_bd(checker_t *c, const vlmc_npu_bd_t *b) {
  size_t buffer = 0;
  VLMC_RETURN_IF_ERROR(check_bd_refs(c, b, &buffer));
  VLMC_RETURN_IF_ERROR(check_bd_lock(c, b, &b->acquire, "acquire"));
  VLMC_RETURN_IF_ERROR(check_bd_lock(c, b, &b->release, "release"));
  VLMC_RETURN_IF_ERROR(check_pattern_limits(c, &b->pattern, b->offset, b->line, "bd", b->name));
  const vlmc_npu_buffer_t *buf = &c->g->buffers.items[buffer];
  int64_t granule = vlmc_npu_device_int(c->dev, VLMC_NPU_BD_GRANULARITY);
  if (buf->addr % granule != 0) {
    return violation(c, VLMC_NPU_RULE_BD_LIMIT, b->line,
                     "bd '%s': buffer '%s' at addr %lld is not %lld-byte aligned", b->name,
                     buf->name, (long long)buf->addr, (long long)granule);
  }
  int64_t span = pattern_span_words(&b->pattern);
  if (!pattern_fits(b->offset, span, buf->bytes, granule)) {
    return violation(c, VLMC_NPU_RULE_BD_OUT_OF_BOUNDS, b->line,
                     "bd '%s': the pattern spans %lld words from offset %lld, outside buffer '%s' "
                     "of %lld bytes",
                     b->name, (long long)span, (long long)b->offset, buf->name,
                     (long long)buf->bytes);
  }
  return NULL;
}

static vlmc_status_t check_bds(checker_t *c) {
  for (size_t i = 0; i < c->g->bds.count; ++i)
    VLMC_RETURN_IF_ERROR(check_bd(c, &c->g->bds.items[i]));
  return NULL;
}

/* ---- channels ---- */

static vlmc_status_t check_channel_index(checker_t *c, size_t tile, vlmc_npu_dir_t dir,
                                         int64_t index, uint32_t line, const char *what,
                                         const char *name) {
  vlmc_npu_tile_fact_t fact = dir == VLMC_NPU_DIR_IN ? VLMC_NPU_TILE_DMA_IN : VLMC_NPU_TILE_DMA_OUT;
  int64_t limit = tile_limit(c, tile, fact);
  if (index >= limit) {
    const vlmc_npu_tile_t *t = &c->g->tiles.items[tile];
    return violation(c, VLMC_NPU_RULE_CHANNEL_COUNT_EXCEEDED, line,
                     "%s '%s': %s channel %lld, but tile '%s' (%s) has %lld %s channels", what,
                     name, dir_name(dir), (long long)index, t->name,
                     vlmc_npu_tile_kind_name(t->kind), (long long)limit,
                     dir == VLMC_NPU_DIR_IN ? "S2MM (in)" : "MM2S (out)");
  }
  return NULL;
}

static vlmc_status_t check_channel(checker_t *c, size_t i) {
  const vlmc_npu_channel_t *ch = &c->g->channels.items[i];
  size_t tile = 0, bd = 0;
  VLMC_RETURN_IF_ERROR(resolve(c, ch->tile, NAME_TILE, ch->line, "channel", ch->name, &tile));
  VLMC_RETURN_IF_ERROR(resolve(c, ch->bd, NAME_BD, ch->line, "channel", ch->name, &bd));
  if (strcmp(c->g->bds.items[bd].tile, ch->tile) != 0) {
    return violation(c, VLMC_NPU_RULE_NOT_REACHABLE, ch->line,
                     "channel '%s' on tile '%s' starts bd '%s' of tile '%s'", ch->name, ch->tile,
                     ch->bd, c->g->bds.items[bd].tile);
  }
  VLMC_RETURN_IF_ERROR(
      check_channel_index(c, tile, ch->dir, ch->index, ch->line, "channel", ch->name));
  for (size_t j = 0; j < i; ++j) {
    const vlmc_npu_channel_t *o = &c->g->channels.items[j];
    if (o->dir == ch->dir && o->index == ch->index && strcmp(o->tile, ch->tile) == 0) {
      return violation(c, VLMC_NPU_RULE_CHANNEL_COUNT_EXCEEDED, ch->line,
                       "channel '%s': %s channel %lld of tile '%s' is already channel '%s'",
                       ch->name, dir_name(ch->dir), (long long)ch->index, ch->tile, o->name);
    }
  }
  return NULL;
}

static vlmc_status_t check_channels(checker_t *c) {
  for (size_t i = 0; i < c->g->channels.count; ++i) VLMC_RETURN_IF_ERROR(check_channel(c, i));
  return NULL;
}

/* ---- cores ---- */

/* A core reaches its own tile's memory and locks and those of the compute tiles next to it
 * (NPU.md A.2: N/S/W neighbours; east too here, a simplification the simulator may tighten). */
static bool core_reaches(const checker_t *c, size_t core_tile, const char *other_tile) {
  size_t other = 0;
  const name_slot_t *slot = name_index_find(&c->names, other_tile);
  if (!slot || slot->kind != NAME_TILE) return false;
  other = slot->index;
  const vlmc_npu_tile_t *a = &c->g->tiles.items[core_tile], *b = &c->g->tiles.items[other];
  int64_t dc = a->col > b->col ? a->col - b->col : b->col - a->col;
  int64_t dr = a->row > b->row ? a->row - b->row : b->row - a->row;
  return other == core_tile || (b->kind == VLMC_NPU_TILE_COMPUTE && dc + dr == 1);
}

static vlmc_status_t check_core_lock_op(checker_t *c, const vlmc_npu_core_t *core, size_t tile,
                                        const vlmc_npu_core_op_t *op) {
  const char *what = op->kind == VLMC_NPU_OP_ACQUIRE ? "acquire" : "release";
  size_t lock = 0;
  VLMC_RETURN_IF_ERROR(resolve(c, op->name, NAME_LOCK, op->line, "core", core->tile, &lock));
  const vlmc_npu_lock_t *l = &c->g->locks.items[lock];
  if (!core_reaches(c, tile, l->tile)) {
    return violation(c, VLMC_NPU_RULE_NOT_REACHABLE, op->line,
                     "core '%s' %ss lock '%s' of tile '%s', which is not its own or a neighbour's",
                     core->tile, what, l->name, l->tile);
  }
  return check_lock_amount(c, op->value, op->line, what, l->name, 1);
}

static bool is_microkernel(const char *name) {
  for (int i = 0; vlmc_npu_microkernel_at(i); ++i) {
    if (strcmp(vlmc_npu_microkernel_at(i), name) == 0) return true;
  }
  return false;
}

static vlmc_status_t check_core_call(checker_t *c, const vlmc_npu_core_t *core, size_t tile,
                                     const vlmc_npu_core_op_t *op) {
  if (!is_microkernel(op->name)) {
    return violation(
        c, VLMC_NPU_RULE_UNKNOWN_MICROKERNEL, op->line,
        "core '%s' calls '%s', which is not in the microkernel library (gemv_q4nx, "
        "gemm_bf16, rmsnorm, rope, silu_mul, softmax_online, attention_online, add, copy)",
        core->tile, op->name);
  }
  for (int a = 0; a < op->nargs; ++a) {
    const char *arg = op->args[a];
    if (arg[0] >= '0' && arg[0] <= '9') continue; /* a constant */
    size_t buffer = 0;
    VLMC_RETURN_IF_ERROR(resolve(c, arg, NAME_BUFFER, op->line, "core", core->tile, &buffer));
    const vlmc_npu_buffer_t *b = &c->g->buffers.items[buffer];
    if (!core_reaches(c, tile, b->tile)) {
      return violation(
          c, VLMC_NPU_RULE_NOT_REACHABLE, op->line,
          "core '%s' passes buffer '%s' of tile '%s' to %s, not its own or a neighbour's",
          core->tile, b->name, b->tile, op->name);
    }
  }
  return NULL;
}

static vlmc_status_t check_core(checker_t *c, const vlmc_npu_core_t *core) {
  size_t tile = 0;
  VLMC_RETURN_IF_ERROR(resolve(c, core->tile, NAME_TILE, core->line, "core", core->tile, &tile));
  const vlmc_npu_tile_t *t = &c->g->tiles.items[tile];
  if (t->kind != VLMC_NPU_TILE_COMPUTE) {
    return violation(c, VLMC_NPU_RULE_TILE_KIND, core->line,
                     "core on tile '%s', a %s tile: only compute tiles have cores", t->name,
                     vlmc_npu_tile_kind_name(t->kind));
  }
  for (size_t i = 0; i < core->op_count; ++i) {
    const vlmc_npu_core_op_t *op = &core->ops[i];
    if (op->kind == VLMC_NPU_OP_ACQUIRE || op->kind == VLMC_NPU_OP_RELEASE) {
      VLMC_RETURN_IF_ERROR(check_core_lock_op(c, core, tile, op));
    } else if (op->kind == VLMC_NPU_OP_CALL) {
      VLMC_RETURN_IF_ERROR(check_core_call(c, core, tile, op));
    }
  }
  return NULL;
}

static vlmc_status_t check_cores(checker_t *c) {
  for (size_t i = 0; i < c->g->cores.count; ++i)
    VLMC_RETURN_IF_ERROR(check_core(c, &c->g->cores.items[i]));
  return NULL;
}

/* ---- runtime sequence ---- */

static const vlmc_npu_arg_t *find_arg(const vlmc_npu_program_t *g, int64_t index) {
  for (size_t i = 0; i < g->args.count; ++i) {
    if (g->args.items[i].index == index) return &g->args.items[i];
  }
  return NULL;
}

static vlmc_status_t check_rt_dma(checker_t *c, const vlmc_npu_rt_op_t *op) {
  size_t tile = 0;
  VLMC_RETURN_IF_ERROR(resolve(c, op->tile, NAME_TILE, op->line, "dma", op->name, &tile));
  const vlmc_npu_tile_t *t = &c->g->tiles.items[tile];
  if (t->kind != VLMC_NPU_TILE_SHIM) {
    return violation(c, VLMC_NPU_RULE_TILE_KIND, op->line,
                     "dma '%s' on tile '%s', a %s tile: host transfers go through shim tiles",
                     op->name, t->name, vlmc_npu_tile_kind_name(t->kind));
  }
  VLMC_RETURN_IF_ERROR(
      check_channel_index(c, tile, op->dir, op->channel, op->line, "dma", op->name));
  VLMC_RETURN_IF_ERROR(
      check_pattern_limits(c, &op->pattern, op->offset, op->line, "dma", op->name));
  const vlmc_npu_arg_t *arg = find_arg(c->g, op->arg);
  if (!arg) {
    return violation(c, VLMC_NPU_RULE_UNDEFINED_NAME, op->line,
                     "dma '%s': no 'arg %lld' is declared", op->name, (long long)op->arg);
  }
  int64_t granule = vlmc_npu_device_int(c->dev, VLMC_NPU_BD_GRANULARITY);
  int64_t span = pattern_span_words(&op->pattern);
  if (!pattern_fits(op->offset, span, arg->bytes, granule)) {
    return violation(
        c, VLMC_NPU_RULE_HOST_OUT_OF_BOUNDS, op->line,
        "dma '%s': the pattern spans %lld words from offset %lld, outside host arg %lld "
        "of %lld bytes",
        op->name, (long long)span, (long long)op->offset, (long long)op->arg,
        (long long)arg->bytes);
  }
  return NULL;
}

static vlmc_status_t check_rt_op(checker_t *c, size_t i) {
  const vlmc_npu_rt_op_t *op = &c->g->runtime.items[i];
  if (op->kind == VLMC_NPU_RT_DMA) return check_rt_dma(c, op);
  if (op->kind == VLMC_NPU_RT_WAIT) {
    size_t task = 0;
    VLMC_RETURN_IF_ERROR(resolve(c, op->name, NAME_DMA, op->line, "wait", op->name, &task));
    if (task > i) {
      return violation(c, VLMC_NPU_RULE_UNDEFINED_NAME, op->line,
                       "wait '%s': the dma is issued later, on line %u", op->name,
                       c->g->runtime.items[task].line);
    }
    return NULL;
  }
  size_t buffer = 0;
  VLMC_RETURN_IF_ERROR(resolve(c, op->name, NAME_BUFFER, op->line, "write", op->name, &buffer));
  const vlmc_npu_buffer_t *b = &c->g->buffers.items[buffer];
  if (op->offset % 4 != 0 || op->offset + 4 > b->bytes) {
    return violation(
        c, VLMC_NPU_RULE_BD_OUT_OF_BOUNDS, op->line,
        "write to buffer '%s' at offset %lld: a 4-byte aligned word inside its %lld bytes "
        "is required",
        b->name, (long long)op->offset, (long long)b->bytes);
  }
  return NULL;
}

static vlmc_status_t check_runtime(checker_t *c) {
  for (size_t i = 0; i < c->g->runtime.count; ++i) VLMC_RETURN_IF_ERROR(check_rt_op(c, i));
  return NULL;
}

static vlmc_status_t check_all(checker_t *c) {
  const char *dev = c->g->device ? c->g->device : "";
  if (strcmp(dev, c->dev->name) != 0) {
    return violation(c, VLMC_NPU_RULE_DEVICE_MISMATCH, c->g->device_line,
                     "the program is for device '%s', checked against '%s'", dev, c->dev->name);
  }
  VLMC_RETURN_IF_ERROR(index_names(c));
  VLMC_RETURN_IF_ERROR(check_tiles(c));
  VLMC_RETURN_IF_ERROR(check_buffers(c));
  VLMC_RETURN_IF_ERROR(check_locks(c));
  VLMC_RETURN_IF_ERROR(check_bds(c));
  VLMC_RETURN_IF_ERROR(check_channels(c));
  VLMC_RETURN_IF_ERROR(check_cores(c));
  return check_runtime(c);
}

vlmc_status_t vlmc_npu_program_check(const vlmc_npu_program_t *program,
                                     const vlmc_npu_device_t *device, vlmc_npu_rule_t *out_rule) {
  checker_t c = {.g = program, .dev = device};
  size_t n = program->tiles.count ? program->tiles.count : 1;
  c.bytes_used = calloc(n, sizeof *c.bytes_used);
  c.bd_count = calloc(n, sizeof *c.bd_count);
  c.lock_count = calloc(n, sizeof *c.lock_count);
  vlmc_status_t st =
      c.bytes_used && c.bd_count && c.lock_count
          ? check_all(&c)
          : vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", program->filename);
  free(c.bytes_used);
  free(c.bd_count);
  free(c.lock_count);
  name_index_free(&c.names);
  if (out_rule) *out_rule = st ? c.rule : VLMC_NPU_RULE_NONE;
  return st;
}
