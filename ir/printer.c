/* The text form's printer. Deterministic: the same module always prints the same bytes, and
 * the output parses back to a module that prints identically. Value names come from the
 * hints, made unique per function by a "_N" suffix; values without a hint are numbered. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/internal.h"

/* ---- small pieces ---- */

void vlmc_ir_print_float(double v, vlmc_strbuf_t *out) {
  if (isnan(v)) {
    vlmc_strbuf_puts(out, "nan");
    return;
  }
  if (isinf(v)) {
    vlmc_strbuf_puts(out, v > 0 ? "inf" : "-inf");
    return;
  }
  char buf[40];
  /* Whole numbers read best without an exponent: theta=10000.0, not 1e+04. */
  if (v == floor(v) && fabs(v) < 1e16) {
    snprintf(buf, sizeof buf, "%.1f", v);
    vlmc_strbuf_puts(out, buf);
    return;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (strtod(buf, NULL) == v) break;
  }
  vlmc_strbuf_puts(out, buf);
  /* Keep floats recognisable as floats: "1" would read back as an integer. */
  if (!strpbrk(buf, ".e")) vlmc_strbuf_puts(out, ".0");
}

static bool is_bare_symbol_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '$' || c == '-';
}

bool vlmc_ir_is_bare_symbol(const char *name, size_t len) {
  if (len == 0) return false;
  for (size_t i = 0; i < len; ++i)
    if (!is_bare_symbol_char(name[i])) return false;
  return true;
}

void vlmc_ir_print_symbol_name(const char *name, vlmc_strbuf_t *out) {
  size_t len = strlen(name);
  vlmc_strbuf_putc(out, '@');
  if (vlmc_ir_is_bare_symbol(name, len)) {
    vlmc_strbuf_append(out, name, len);
    return;
  }
  vlmc_strbuf_putc(out, '"');
  for (size_t i = 0; i < len; ++i) {
    unsigned char c = (unsigned char)name[i];
    if (c == '"' || c == '\\') vlmc_strbuf_printf(out, "\\%c", c);
    else if (c < 0x20 || c >= 0x7f) vlmc_strbuf_printf(out, "\\%02X", c);
    else vlmc_strbuf_putc(out, (char)c);
  }
  vlmc_strbuf_putc(out, '"');
}

void vlmc_ir_print_dim(const vlmc_module_t *module, vlmc_dim_t dim, vlmc_strbuf_t *out) {
  if (dim.sym == 0) {
    vlmc_strbuf_printf(out, "%lld", (long long)dim.off);
    return;
  }
  if (dim.num != 1) vlmc_strbuf_printf(out, "%lld*", (long long)dim.num);
  if (dim.sym <= module->num_symbols) vlmc_strbuf_puts(out, module->symbols[dim.sym - 1]);
  else vlmc_strbuf_puts(out, "?");
  if (dim.den != 1) vlmc_strbuf_printf(out, "/%lld", (long long)dim.den);
  if (dim.off > 0) vlmc_strbuf_printf(out, "+%lld", (long long)dim.off);
  else if (dim.off < 0) vlmc_strbuf_printf(out, "%lld", (long long)dim.off);
}

void vlmc_type_print(const vlmc_module_t *module, const vlmc_type_t *type, vlmc_strbuf_t *out) {
  if (type->dtype >= 0 && type->dtype < VLMC_DTYPE_COUNT)
    vlmc_strbuf_puts(out, vlmc_dtype_info(type->dtype)->name);
  else
    vlmc_strbuf_puts(out, "?");
  vlmc_strbuf_putc(out, '[');
  for (uint32_t i = 0; i < type->rank && i < VLMC_IR_MAX_RANK; ++i) {
    if (i) vlmc_strbuf_putc(out, ',');
    vlmc_ir_print_dim(module, type->dims[i], out);
  }
  vlmc_strbuf_putc(out, ']');
}

/* ---- errors with types in them ---- */

vlmc_status_t vlmc_ir_error(const vlmc_module_t *module, vlmc_status_code_t code, const char *fmt,
                            ...) {
  vlmc_strbuf_t buf;
  vlmc_strbuf_init(&buf);
  va_list ap;
  va_start(ap, fmt);
  for (const char *p = fmt; *p; ++p) {
    if (*p != '%') {
      vlmc_strbuf_putc(&buf, *p);
      continue;
    }
    ++p;
    if (*p == 'T') vlmc_type_print(module, va_arg(ap, const vlmc_type_t *), &buf);
    else if (*p == 'D') vlmc_ir_print_dim(module, *va_arg(ap, const vlmc_dim_t *), &buf);
    else if (*p == 's') vlmc_strbuf_puts(&buf, va_arg(ap, const char *));
    else if (*p == 'd') vlmc_strbuf_printf(&buf, "%d", va_arg(ap, int));
    else if (*p == 'u') vlmc_strbuf_printf(&buf, "%u", va_arg(ap, unsigned));
    else if (strncmp(p, "lld", 3) == 0) {
      vlmc_strbuf_printf(&buf, "%lld", va_arg(ap, long long));
      p += 2;
    } else if (*p == '%') vlmc_strbuf_putc(&buf, '%');
    else break; /* an unknown directive ends the message rather than misreading va_args */
  }
  va_end(ap);
  vlmc_status_t status = vlmc_status_make(code, "%s", vlmc_strbuf_cstr(&buf));
  vlmc_strbuf_deinit(&buf);
  return status;
}

/* ---- value names ---- */

typedef struct {
  const vlmc_func_t *func;
  char **names;  /* indexed by value id; NULL for values not defined in func */
  uint32_t size;
  vlmc_arena_t scratch;
  vlmc_ir_strmap_t *used;
  uint32_t next_number;
} namer_t;

static bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '$';
}

/* A printable form of a hint: invalid characters become '_'; NULL when there is no usable
 * hint (none, empty, or all digits, which would read back as a numbered value). */
static char *hint_sanitize(vlmc_arena_t *arena, const char *hint) {
  if (!hint || !hint[0]) return NULL;
  size_t len = strlen(hint);
  if (len > VLMC_IR_MAX_IDENT_BYTES - 16) len = VLMC_IR_MAX_IDENT_BYTES - 16; /* room for _N */
  char *copy = vlmc_arena_strndup(arena, hint, len);
  if (!copy) return NULL;
  bool all_digits = true;
  for (size_t i = 0; i < len; ++i) {
    if (!is_name_char(copy[i])) copy[i] = '_';
    all_digits = all_digits && copy[i] >= '0' && copy[i] <= '9';
  }
  return all_digits ? NULL : copy;
}

static char *namer_unique(namer_t *namer, const char *hint) {
  char *base = hint_sanitize(&namer->scratch, hint);
  char buf[32];
  if (!base) {
    snprintf(buf, sizeof buf, "%u", namer->next_number++);
    return vlmc_arena_strdup(&namer->scratch, buf);
  }
  char *candidate = base;
  size_t base_len = strlen(base);
  for (uint32_t n = 1; vlmc_ir_strmap_get(namer->used, candidate, strlen(candidate)); ++n) {
    snprintf(buf, sizeof buf, "_%u", n);
    size_t extra = strlen(buf);
    candidate = vlmc_arena_alloc(&namer->scratch, base_len + extra + 1, 1);
    if (!candidate) return NULL;
    memcpy(candidate, base, base_len);
    memcpy(candidate + base_len, buf, extra + 1);
  }
  return candidate;
}

static void namer_add(namer_t *namer, const vlmc_value_t *value) {
  if (value->id >= namer->size) return;
  char *name = namer_unique(namer, value->name);
  if (!name) return;
  vlmc_ir_strmap_put(namer->used, name, strlen(name), name);
  namer->names[value->id] = name;
}

static bool namer_init(namer_t *namer, const vlmc_func_t *func) {
  memset(namer, 0, sizeof *namer);
  namer->func = func;
  vlmc_arena_init(&namer->scratch);
  namer->size = func->module->next_value_id;
  namer->names = calloc(namer->size ? namer->size : 1, sizeof(char *));
  namer->used = vlmc_ir_strmap_create(&namer->scratch);
  if (!namer->names || !namer->used) return false;
  for (uint32_t i = 0; i < func->num_args; ++i) namer_add(namer, &func->args[i]);
  for (const vlmc_op_t *op = func->body.first; op; op = op->next)
    for (uint32_t i = 0; i < op->num_results; ++i) namer_add(namer, &op->results[i]);
  return true;
}

static void namer_deinit(namer_t *namer) {
  free(namer->names);
  vlmc_arena_deinit(&namer->scratch);
}

static void print_value(const namer_t *namer, const vlmc_value_t *value, vlmc_strbuf_t *out) {
  const char *name = NULL;
  if (value && value->func == namer->func && value->id < namer->size)
    name = namer->names[value->id];
  vlmc_strbuf_putc(out, '%');
  vlmc_strbuf_puts(out, name ? name : "<dangling>");
}

/* ---- attributes and ops ---- */

static void print_int_list(const int64_t *data, size_t count, vlmc_strbuf_t *out) {
  vlmc_strbuf_putc(out, '[');
  for (size_t i = 0; i < count; ++i)
    vlmc_strbuf_printf(out, i ? ", %lld" : "%lld", (long long)data[i]);
  vlmc_strbuf_putc(out, ']');
}

static void print_attr_value(const vlmc_attr_t *a, vlmc_strbuf_t *out) {
  switch (a->kind) {
    case VLMC_ATTR_NONE: break;
    case VLMC_ATTR_INT: vlmc_strbuf_printf(out, "%lld", (long long)a->v.i); break;
    case VLMC_ATTR_FLOAT: vlmc_ir_print_float(a->v.f, out); break;
    case VLMC_ATTR_BOOL: vlmc_strbuf_puts(out, a->v.b ? "true" : "false"); break;
    case VLMC_ATTR_ENUM: vlmc_strbuf_puts(out, a->v.e.name); break;
    case VLMC_ATTR_DTYPE: vlmc_strbuf_puts(out, vlmc_dtype_info(a->v.dtype)->name); break;
    case VLMC_ATTR_SYMBOL: vlmc_ir_print_symbol_name(a->v.symbol, out); break;
    case VLMC_ATTR_INTS: print_int_list(a->v.ints.data, a->v.ints.count, out); break;
    case VLMC_ATTR_DENSE:
      if (a->v.dense.ints || a->v.dense.count == 0) {
        print_int_list(a->v.dense.ints, a->v.dense.count, out);
        break;
      }
      vlmc_strbuf_putc(out, '[');
      for (size_t i = 0; i < a->v.dense.count; ++i) {
        if (i) vlmc_strbuf_puts(out, ", ");
        vlmc_ir_print_float(a->v.dense.floats[i], out);
      }
      vlmc_strbuf_putc(out, ']');
      break;
  }
}

void vlmc_attr_print(const vlmc_attr_t *a, vlmc_strbuf_t *out) { print_attr_value(a, out); }

static void print_op_with(const namer_t *namer, const vlmc_op_t *op, vlmc_strbuf_t *out) {
  const vlmc_op_info_t *info = vlmc_op_info(op->kind);
  const vlmc_module_t *module = namer->func->module;
  vlmc_strbuf_puts(out, "  ");
  for (uint32_t i = 0; i < op->num_results; ++i) {
    if (i) vlmc_strbuf_puts(out, ", ");
    print_value(namer, &op->results[i], out);
  }
  if (op->num_results) vlmc_strbuf_puts(out, " = ");
  vlmc_strbuf_puts(out, info->mnemonic);
  int symref_slot = (info->flags & VLMC_OP_FLAG_SYMREF) ? vlmc_op_attr_slot(op->kind, "name") : -1;
  if (symref_slot >= 0 && op->attrs[symref_slot].kind == VLMC_ATTR_SYMBOL) {
    vlmc_strbuf_putc(out, ' ');
    vlmc_ir_print_symbol_name(op->attrs[symref_slot].v.symbol, out);
  }
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    vlmc_strbuf_puts(out, i ? ", " : " ");
    print_value(namer, op->operands[i], out);
  }
  bool open = false;
  for (uint32_t i = 0; i < info->num_attrs; ++i) {
    if ((int)i == symref_slot || op->attrs[i].kind == VLMC_ATTR_NONE) continue;
    vlmc_strbuf_puts(out, open ? ", " : " {");
    open = true;
    vlmc_strbuf_printf(out, "%s=", info->attrs[i].name);
    print_attr_value(&op->attrs[i], out);
  }
  if (open) vlmc_strbuf_putc(out, '}');
  for (uint32_t i = 0; i < op->num_results; ++i) {
    vlmc_strbuf_puts(out, i ? ", " : " : ");
    vlmc_type_print(module, &op->results[i].type, out);
  }
  if (op->dispatch) vlmc_strbuf_printf(out, " dispatch %u", op->dispatch);
  if (op->slot) vlmc_strbuf_printf(out, " slot %u", op->slot);
  vlmc_strbuf_putc(out, '\n');
}

static void print_func(const vlmc_func_t *func, vlmc_strbuf_t *out) {
  namer_t namer;
  if (!namer_init(&namer, func)) {
    namer_deinit(&namer);
    out->failed = true;
    return;
  }
  const vlmc_module_t *module = func->module;
  vlmc_strbuf_puts(out, "func ");
  vlmc_ir_print_symbol_name(func->name, out);
  vlmc_strbuf_putc(out, '(');
  for (uint32_t i = 0; i < func->num_args; ++i) {
    if (i) vlmc_strbuf_puts(out, ", ");
    print_value(&namer, &func->args[i], out);
    vlmc_strbuf_puts(out, ": ");
    vlmc_type_print(module, &func->args[i].type, out);
  }
  vlmc_strbuf_puts(out, ") -> ");
  if (func->num_results != 1) vlmc_strbuf_putc(out, '(');
  for (uint32_t i = 0; i < func->num_results; ++i) {
    if (i) vlmc_strbuf_puts(out, ", ");
    vlmc_type_print(module, &func->result_types[i], out);
  }
  if (func->num_results != 1) vlmc_strbuf_putc(out, ')');
  vlmc_strbuf_puts(out, " {\n");
  for (const vlmc_op_t *op = func->body.first; op; op = op->next) print_op_with(&namer, op, out);
  vlmc_strbuf_puts(out, "}\n");
  namer_deinit(&namer);
}

void vlmc_module_print(const vlmc_module_t *module, vlmc_strbuf_t *out) {
  for (uint32_t i = 0; i < module->num_params; ++i) {
    vlmc_strbuf_puts(out, "param ");
    vlmc_ir_print_symbol_name(module->params[i]->name, out);
    vlmc_strbuf_puts(out, " : ");
    vlmc_type_print(module, &module->params[i]->type, out);
    vlmc_strbuf_putc(out, '\n');
  }
  for (uint32_t i = 0; i < module->num_funcs; ++i) {
    if (i || module->num_params) vlmc_strbuf_putc(out, '\n');
    print_func(module->funcs[i], out);
  }
}

char *vlmc_module_to_string(const vlmc_module_t *module) {
  vlmc_strbuf_t buf;
  vlmc_strbuf_init(&buf);
  vlmc_module_print(module, &buf);
  return vlmc_strbuf_take(&buf);
}

void vlmc_op_print(const vlmc_op_t *op, vlmc_strbuf_t *out) {
  namer_t namer;
  if (op->block && namer_init(&namer, op->block->func)) {
    print_op_with(&namer, op, out);
  } else {
    vlmc_strbuf_puts(out, vlmc_op_info(op->kind)->mnemonic);
    vlmc_strbuf_putc(out, '\n');
  }
  if (op->block) namer_deinit(&namer);
}
