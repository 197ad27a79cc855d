/* Modules, symbols, parameters, functions, ops and values: creation and mutation. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ir/internal.h"
#include "support/checked_math.h"

static vlmc_status_t out_of_memory(void) {
  return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory while building IR");
}

vlmc_status_t vlmc_module_create(vlmc_module_t **out_module) {
  vlmc_module_t *module = calloc(1, sizeof *module);
  if (!module) return out_of_memory();
  vlmc_arena_init(&module->arena);
  module->source_name = "<built>";
  module->symbol_index = vlmc_ir_strmap_create(&module->arena);
  module->param_index = vlmc_ir_strmap_create(&module->arena);
  if (!module->symbol_index || !module->param_index) {
    vlmc_module_destroy(module);
    return out_of_memory();
  }
  *out_module = module;
  return NULL;
}

void vlmc_module_destroy(vlmc_module_t *module) {
  if (!module) return;
  vlmc_arena_deinit(&module->arena);
  free(module);
}

/* ---- symbols ---- */

static bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

vlmc_status_t vlmc_module_symbol(vlmc_module_t *module, const char *name, uint32_t *out_sym) {
  size_t len = strlen(name);
  bool valid = len > 0 && len <= VLMC_IR_MAX_IDENT_BYTES && is_ident_start(name[0]);
  for (size_t i = 1; valid && i < len; ++i) valid = is_ident_char(name[i]);
  if (!valid)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "symbol name '%s' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)", name);
  uintptr_t found = (uintptr_t)vlmc_ir_strmap_get(module->symbol_index, name, len);
  if (found) {
    *out_sym = (uint32_t)found;
    return NULL;
  }
  char *copy = vlmc_arena_strndup(&module->arena, name, len);
  if (!copy || !vlmc_ir_grow(&module->arena, (void **)&module->symbols, &module->symbols_capacity,
                             module->num_symbols + 1, sizeof(char *), _Alignof(char *)))
    return out_of_memory();
  module->symbols[module->num_symbols++] = copy;
  uint32_t sym = module->num_symbols;
  if (!vlmc_ir_strmap_put(module->symbol_index, copy, len, (void *)(uintptr_t)sym))
    return out_of_memory();
  *out_sym = sym;
  return NULL;
}

const char *vlmc_module_symbol_name(const vlmc_module_t *module, uint32_t sym) {
  assert(sym >= 1 && sym <= module->num_symbols);
  return module->symbols[sym - 1];
}

/* ---- parameters ---- */

vlmc_status_t vlmc_module_param_add(vlmc_module_t *module, const char *name,
                                    const vlmc_type_t *type, vlmc_param_t **out_param) {
  size_t len = strlen(name);
  if (len == 0) return vlmc_status_make(VLMC_INVALID_ARGUMENT, "parameter name is empty");
  if (vlmc_ir_strmap_get(module->param_index, name, len))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "parameter @%s is declared twice", name);
  vlmc_param_t *param = VLMC_ARENA_NEW(&module->arena, vlmc_param_t);
  char *copy = vlmc_arena_strndup(&module->arena, name, len);
  if (!param || !copy ||
      !vlmc_ir_grow(&module->arena, (void **)&module->params, &module->params_capacity,
                    module->num_params + 1, sizeof(vlmc_param_t *), _Alignof(vlmc_param_t *)))
    return out_of_memory();
  param->name = copy;
  param->type = *type;
  if (!vlmc_ir_strmap_put(module->param_index, copy, len, param)) return out_of_memory();
  module->params[module->num_params++] = param;
  if (out_param) *out_param = param;
  return NULL;
}

vlmc_param_t *vlmc_module_param_find(const vlmc_module_t *module, const char *name) {
  return vlmc_ir_strmap_get(module->param_index, name, strlen(name));
}

void vlmc_module_param_remove(vlmc_module_t *module, vlmc_param_t *param) {
  for (uint32_t i = 0; i < module->num_params; ++i) {
    if (module->params[i] != param) continue;
    memmove(&module->params[i], &module->params[i + 1],
            (module->num_params - i - 1) * sizeof(vlmc_param_t *));
    module->num_params--;
    vlmc_ir_strmap_put(module->param_index, param->name, strlen(param->name), NULL);
    return;
  }
  assert(!"parameter is not in this module");
}

/* ---- functions ---- */

static vlmc_status_t value_init(vlmc_module_t *module, vlmc_value_t *value,
                                const vlmc_type_t *type, vlmc_func_t *func, vlmc_op_t *def,
                                uint32_t index) {
  if (module->next_value_id == UINT32_MAX)
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "too many values in one module");
  value->type = *type;
  value->name = NULL;
  value->def = def;
  value->func = func;
  value->index = index;
  value->id = module->next_value_id++;
  return NULL;
}

vlmc_status_t vlmc_module_func_add(vlmc_module_t *module, const char *name, uint32_t num_args,
                                   const vlmc_type_t *arg_types, const char *const *arg_names,
                                   uint32_t num_results, const vlmc_type_t *result_types,
                                   vlmc_func_t **out_func) {
  if (!name[0]) return vlmc_status_make(VLMC_INVALID_ARGUMENT, "function name is empty");
  if (vlmc_module_func_find(module, name))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "function @%s is defined twice", name);
  vlmc_arena_t *arena = &module->arena;
  vlmc_func_t *func = VLMC_ARENA_NEW(arena, vlmc_func_t);
  if (!func || !(func->name = vlmc_arena_strdup(arena, name))) return out_of_memory();
  func->module = module;
  func->num_args = num_args;
  func->num_results = num_results;
  func->args = VLMC_ARENA_NEW_ARRAY(arena, vlmc_value_t, num_args ? num_args : 1);
  func->result_types = VLMC_ARENA_NEW_ARRAY(arena, vlmc_type_t, num_results ? num_results : 1);
  if (!func->args || !func->result_types) return out_of_memory();
  for (uint32_t i = 0; i < num_args; ++i) {
    VLMC_RETURN_IF_ERROR(value_init(module, &func->args[i], &arg_types[i], func, NULL, i));
    if (arg_names && arg_names[i])
      VLMC_RETURN_IF_ERROR(vlmc_value_set_name(&func->args[i], arg_names[i]));
  }
  if (num_results) memcpy(func->result_types, result_types, num_results * sizeof(vlmc_type_t));
  func->body.func = func;
  if (!vlmc_ir_grow(arena, (void **)&module->funcs, &module->funcs_capacity,
                    module->num_funcs + 1, sizeof(vlmc_func_t *), _Alignof(vlmc_func_t *)))
    return out_of_memory();
  module->funcs[module->num_funcs++] = func;
  if (out_func) *out_func = func;
  return NULL;
}

vlmc_func_t *vlmc_module_func_find(const vlmc_module_t *module, const char *name) {
  for (uint32_t i = 0; i < module->num_funcs; ++i)
    if (strcmp(module->funcs[i]->name, name) == 0) return module->funcs[i];
  return NULL;
}

/* ---- attributes ---- */

static uint32_t enum_choice_count(const char *choices) {
  uint32_t n = 1;
  for (const char *p = choices; *p; ++p) n += *p == '|';
  return n;
}

/* Copies the name of choice `index` of an ENUM schema into the arena. */
static const char *enum_choice_intern(vlmc_arena_t *arena, const char *choices, uint32_t index) {
  const char *p = choices;
  for (uint32_t i = 0; i < index; ++i) p = strchr(p, '|') + 1;
  const char *end = strchr(p, '|');
  return vlmc_arena_strndup(arena, p, end ? (size_t)(end - p) : strlen(p));
}

static const char *attr_kind_name(vlmc_attr_kind_t kind) {
  switch (kind) {
    case VLMC_ATTR_NONE: return "nothing";
    case VLMC_ATTR_INT: return "an integer";
    case VLMC_ATTR_FLOAT: return "a float";
    case VLMC_ATTR_BOOL: return "true or false";
    case VLMC_ATTR_ENUM: return "one of its choices";
    case VLMC_ATTR_DTYPE: return "a dtype";
    case VLMC_ATTR_INTS: return "a list of integers";
    case VLMC_ATTR_DENSE: return "a list of numbers";
    case VLMC_ATTR_SYMBOL: return "an @symbol";
  }
  return "?";
}

static vlmc_status_t attr_copy_arrays(vlmc_arena_t *arena, vlmc_attr_t *out) {
  if (out->kind == VLMC_ATTR_INTS && out->v.ints.count) {
    int64_t *copy = VLMC_ARENA_NEW_ARRAY(arena, int64_t, out->v.ints.count);
    if (!copy) return out_of_memory();
    memcpy(copy, out->v.ints.data, out->v.ints.count * sizeof(int64_t));
    out->v.ints.data = copy;
  } else if (out->kind == VLMC_ATTR_DENSE && out->v.dense.count) {
    size_t n = out->v.dense.count;
    if (out->v.dense.ints) {
      int64_t *copy = VLMC_ARENA_NEW_ARRAY(arena, int64_t, n);
      if (!copy) return out_of_memory();
      memcpy(copy, out->v.dense.ints, n * sizeof(int64_t));
      out->v.dense.ints = copy;
    } else {
      double *copy = VLMC_ARENA_NEW_ARRAY(arena, double, n);
      if (!copy) return out_of_memory();
      memcpy(copy, out->v.dense.floats, n * sizeof(double));
      out->v.dense.floats = copy;
    }
  } else if (out->kind == VLMC_ATTR_SYMBOL) {
    if (!(out->v.symbol = vlmc_arena_strdup(arena, out->v.symbol))) return out_of_memory();
  }
  return NULL;
}

vlmc_status_t vlmc_ir_attr_check(const vlmc_attr_schema_t *schema, const vlmc_attr_t *in,
                                 vlmc_attr_t *out) {
  *out = *in;
  if (in->kind == VLMC_ATTR_NONE) return NULL;
  if (schema->kind == VLMC_ATTR_FLOAT && in->kind == VLMC_ATTR_INT) {
    out->kind = VLMC_ATTR_FLOAT;
    out->v.f = (double)in->v.i;
  }
  if (out->kind != schema->kind)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "attribute '%s' expects %s, not %s",
                            schema->name, attr_kind_name(schema->kind), attr_kind_name(in->kind));
  if (out->kind == VLMC_ATTR_ENUM && in->v.e.index == UINT32_MAX) {
    const char *name = in->v.e.name ? in->v.e.name : "";
    if (!vlmc_ir_enum_lookup(schema, name, strlen(name), out))
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "attribute '%s' expects one of %s, not '%s'",
                              schema->name, schema->choices, name);
    out->v.e.name = name;
  } else if (out->kind == VLMC_ATTR_ENUM && in->v.e.index >= enum_choice_count(schema->choices)) {
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "attribute '%s': choice %u out of range",
                            schema->name, in->v.e.index);
  }
  if (out->kind == VLMC_ATTR_DENSE && out->v.dense.count &&
      (out->v.dense.ints == NULL) == (out->v.dense.floats == NULL))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "attribute '%s' must hold either integers or floats", schema->name);
  if (out->kind == VLMC_ATTR_SYMBOL && (!out->v.symbol || !out->v.symbol[0]))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "attribute '%s' needs a non-empty name",
                            schema->name);
  return NULL;
}

/* Checks `in` against the schema and writes an arena-owned copy to `out`. */
static vlmc_status_t attr_attach(vlmc_arena_t *arena, const vlmc_attr_schema_t *schema,
                                 const vlmc_attr_t *in, vlmc_attr_t *out) {
  VLMC_RETURN_IF_ERROR(vlmc_ir_attr_check(schema, in, out));
  if (out->kind == VLMC_ATTR_ENUM) {
    out->v.e.name = enum_choice_intern(arena, schema->choices, out->v.e.index);
    return out->v.e.name ? NULL : out_of_memory();
  }
  return attr_copy_arrays(arena, out);
}

vlmc_status_t vlmc_op_set_attr(vlmc_op_t *op, const char *name, const vlmc_attr_t *value) {
  int slot = vlmc_op_attr_slot(op->kind, name);
  const vlmc_op_info_t *info = vlmc_op_info(op->kind);
  if (slot < 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "'%s' has no attribute '%s'", info->mnemonic,
                            name);
  vlmc_arena_t *arena = &op->block->func->module->arena;
  vlmc_attr_t attached;
  VLMC_RETURN_IF_ERROR(attr_attach(arena, &info->attrs[slot], value, &attached));
  op->attrs[slot] = attached;
  return NULL;
}

const vlmc_attr_t *vlmc_op_attr(const vlmc_op_t *op, const char *name) {
  int slot = vlmc_op_attr_slot(op->kind, name);
  if (slot < 0 || op->attrs[slot].kind == VLMC_ATTR_NONE) return NULL;
  return &op->attrs[slot];
}

int64_t vlmc_op_attr_int(const vlmc_op_t *op, const char *name) {
  const vlmc_attr_t *a = vlmc_op_attr(op, name);
  assert(a && a->kind == VLMC_ATTR_INT);
  return a->v.i;
}

vlmc_quant_layout_t vlmc_quant_layout(int64_t bits, int64_t group, int64_t cols) {
  int64_t per_word = bits > 0 && bits <= 32 ? 32 / bits : 1;
  if (group < 1) group = 1;
  return (vlmc_quant_layout_t){bits, group, cols, per_word, (cols + per_word - 1) / per_word,
                               (cols + group - 1) / group};
}

vlmc_quant_layout_t vlmc_dequantize_layout(const vlmc_op_t *op) {
  return vlmc_quant_layout(vlmc_op_attr_int(op, "bits"), vlmc_op_attr_int(op, "group"),
                           vlmc_op_attr_int(op, "cols"));
}

double vlmc_op_attr_float(const vlmc_op_t *op, const char *name) {
  const vlmc_attr_t *a = vlmc_op_attr(op, name);
  assert(a && a->kind == VLMC_ATTR_FLOAT);
  return a->v.f;
}

const char *vlmc_op_attr_enum(const vlmc_op_t *op, const char *name) {
  const vlmc_attr_t *a = vlmc_op_attr(op, name);
  assert(a && a->kind == VLMC_ATTR_ENUM);
  return a->v.e.name;
}

/* ---- ops ---- */

static void op_link(vlmc_block_t *block, vlmc_op_t *before, vlmc_op_t *op) {
  op->block = block;
  op->next = before;
  op->prev = before ? before->prev : block->last;
  if (op->prev) op->prev->next = op;
  else block->first = op;
  if (before) before->prev = op;
  else block->last = op;
}

static vlmc_status_t op_check_counts(const vlmc_op_info_t *info, uint32_t num_operands,
                                     uint32_t num_results) {
  if ((int64_t)num_operands < info->min_operands ||
      (info->max_operands != VLMC_OP_VARIADIC && (int64_t)num_operands > info->max_operands)) {
    if (info->max_operands == VLMC_OP_VARIADIC)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "'%s' expects at least %d operands, got %u",
                              info->mnemonic, info->min_operands, num_operands);
    if (info->min_operands == info->max_operands)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "'%s' expects %d operand%s, got %u",
                              info->mnemonic, info->min_operands,
                              info->min_operands == 1 ? "" : "s", num_operands);
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "'%s' expects %d to %d operands, got %u",
                            info->mnemonic, info->min_operands, info->max_operands, num_operands);
  }
  if (num_results != info->num_results)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "'%s' has %u results, not %u", info->mnemonic,
                            info->num_results, num_results);
  return NULL;
}

vlmc_status_t vlmc_op_create_raw(vlmc_block_t *block, vlmc_op_t *before, vlmc_op_kind_t kind,
                                 uint32_t num_operands, vlmc_value_t *const *operands,
                                 const vlmc_attr_t *attrs, uint32_t num_results,
                                 const vlmc_type_t *result_types, vlmc_op_t **out_op) {
  const vlmc_op_info_t *info = vlmc_op_info(kind);
  VLMC_RETURN_IF_ERROR(op_check_counts(info, num_operands, num_results));
  vlmc_module_t *module = block->func->module;
  vlmc_arena_t *arena = &module->arena;
  vlmc_op_t *op = VLMC_ARENA_NEW(arena, vlmc_op_t);
  if (!op) return out_of_memory();
  op->kind = kind;
  op->num_operands = num_operands;
  op->num_results = num_results;
  op->operands = VLMC_ARENA_NEW_ARRAY(arena, vlmc_value_t *, num_operands ? num_operands : 1);
  op->results = VLMC_ARENA_NEW_ARRAY(arena, vlmc_value_t, num_results ? num_results : 1);
  op->attrs = VLMC_ARENA_NEW_ARRAY(arena, vlmc_attr_t, info->num_attrs ? info->num_attrs : 1);
  if (!op->operands || !op->results || !op->attrs) return out_of_memory();
  if (num_operands) memcpy(op->operands, operands, num_operands * sizeof(vlmc_value_t *));
  for (uint32_t i = 0; attrs && i < info->num_attrs; ++i)
    VLMC_RETURN_IF_ERROR(vlmc_status_annotate(
        attr_attach(arena, &info->attrs[i], &attrs[i], &op->attrs[i]), "'%s': ", info->mnemonic));
  for (uint32_t i = 0; i < num_results; ++i)
    VLMC_RETURN_IF_ERROR(value_init(module, &op->results[i], &result_types[i], block->func, op, i));
  op_link(block, before, op);
  if (out_op) *out_op = op;
  return NULL;
}

void vlmc_op_erase(vlmc_op_t *op) {
  vlmc_block_t *block = op->block;
  assert(block && "op is not in a block");
  if (op->prev) op->prev->next = op->next;
  else block->first = op->next;
  if (op->next) op->next->prev = op->prev;
  else block->last = op->prev;
  op->prev = op->next = NULL;
  op->block = NULL;
}

void vlmc_op_set_operand(vlmc_op_t *op, uint32_t index, vlmc_value_t *value) {
  assert(index < op->num_operands);
  op->operands[index] = value;
}

/* ---- values ---- */

uint32_t vlmc_value_replace_all_uses(vlmc_value_t *from, vlmc_value_t *to) {
  uint32_t changed = 0;
  for (vlmc_op_t *op = from->func->body.first; op; op = op->next) {
    for (uint32_t i = 0; i < op->num_operands; ++i) {
      if (op->operands[i] != from) continue;
      op->operands[i] = to;
      ++changed;
    }
  }
  return changed;
}

uint32_t vlmc_value_use_count(const vlmc_value_t *value) {
  uint32_t uses = 0;
  for (const vlmc_op_t *op = value->func->body.first; op; op = op->next)
    for (uint32_t i = 0; i < op->num_operands; ++i) uses += op->operands[i] == value;
  return uses;
}

vlmc_status_t vlmc_value_set_name(vlmc_value_t *value, const char *name) {
  if (!name) {
    value->name = NULL;
    return NULL;
  }
  char *copy = vlmc_arena_strdup(&value->func->module->arena, name);
  if (!copy) return out_of_memory();
  value->name = copy;
  return NULL;
}

const vlmc_attr_t *vlmc_value_constant(const vlmc_value_t *value) {
  if (!value->def || value->def->kind != VLMC_OP_CONSTANT) return NULL;
  return vlmc_op_attr(value->def, "value");
}

vlmc_status_t vlmc_func_check_call(const vlmc_func_t *func, const char *name, uint32_t num_args,
                                   uint32_t num_results) {
  if (!func) return vlmc_status_make(VLMC_NOT_FOUND, "no function @%s", name);
  if (num_args != func->num_args)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "@%s takes %u arguments, got %u", func->name,
                            func->num_args, num_args);
  if (num_results != func->num_results)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "@%s returns %u results, %u asked for",
                            func->name, func->num_results, num_results);
  return NULL;
}
