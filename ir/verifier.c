/* The module verifier: well-formed types, attribute schemas, definitions before uses (one
 * block per function, so dominance is program order), result types equal to what the shape
 * rules infer, and each op's own verifier. Reports the first error with its location. */
#include <stdlib.h>
#include <string.h>

#include "ir/dispatch.h"
#include "ir/internal.h"

static uint32_t op_index(const vlmc_op_t *op) {
  uint32_t n = 0;
  for (const vlmc_op_t *o = op->block ? op->block->first : NULL; o && o != op; o = o->next) ++n;
  return n;
}

vlmc_status_t vlmc_ir_locate(const vlmc_op_t *op, vlmc_status_t status) {
  if (!status) return NULL;
  const char *mnemonic = vlmc_op_info(op->kind)->mnemonic;
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  vlmc_op_print(op, &text);
  if (text.len && text.data[text.len - 1] == '\n') text.data[--text.len] = '\0';
  const char *message = vlmc_status_message(status);
  vlmc_status_t located;
  const vlmc_func_t *func = op->block ? op->block->func : NULL;
  if (op->loc.line && func)
    located = vlmc_status_make(vlmc_status_code(status), "%s:%u:%u: error: '%s' op: %s\n%s",
                               func->module->source_name, op->loc.line, op->loc.col, mnemonic,
                               message, vlmc_strbuf_cstr(&text));
  else
    located = vlmc_status_make(vlmc_status_code(status), "@%s: op #%u '%s': %s\n%s",
                               func ? func->name : "?", op_index(op), mnemonic, message,
                               vlmc_strbuf_cstr(&text));
  vlmc_strbuf_deinit(&text);
  vlmc_status_free(status);
  return located;
}

vlmc_status_t vlmc_op_locate_error(const vlmc_op_t *op, vlmc_status_t status) {
  return vlmc_ir_locate(op, status);
}

/* "file:line:col: error: <what>: " when the thing was parsed, "<what>: " when built. */
static vlmc_status_t locate_at(const vlmc_module_t *module, vlmc_loc_t loc, const char *what,
                               const char *name, vlmc_status_t status) {
  if (!loc.line) return vlmc_status_annotate(status, "%s @%s: ", what, name);
  return vlmc_status_annotate(status, "%s:%u:%u: error: %s @%s: ", module->source_name, loc.line,
                              loc.col, what, name);
}

static vlmc_status_t func_error(const vlmc_func_t *func, vlmc_status_t status) {
  return locate_at(func->module, func->loc, "func", func->name, status);
}

static vlmc_status_t verify_signature(const vlmc_func_t *func) {
  for (uint32_t i = 0; i < func->num_args; ++i) {
    vlmc_status_t st = vlmc_ir_check_type(func->module, &func->args[i].type);
    if (st) return func_error(func, vlmc_status_annotate(st, "argument %u: ", i));
  }
  for (uint32_t i = 0; i < func->num_results; ++i) {
    vlmc_status_t st = vlmc_ir_check_type(func->module, &func->result_types[i]);
    if (st) return func_error(func, vlmc_status_annotate(st, "result %u: ", i));
  }
  return NULL;
}

static vlmc_status_t verify_operands(const vlmc_func_t *func, const vlmc_op_t *op,
                                     const unsigned char *defined) {
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    const vlmc_value_t *v = op->operands[i];
    if (!v || v->func != func || v->id >= func->module->next_value_id)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "operand %u is not a value of this function (erased or foreign)", i);
    if (!defined[v->id])
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "operand %u is used before it is defined (or its op was erased)", i);
  }
  return NULL;
}

/* Recomputes the result types with the op's shape rule and compares them. */
static vlmc_status_t verify_types(const vlmc_module_t *module, const vlmc_op_t *op) {
  const vlmc_op_info_t *info = vlmc_op_info(op->kind);
  VLMC_RETURN_IF_ERROR(vlmc_ir_check_required_attrs(info, op->attrs));
  const vlmc_type_t **operand_types = malloc((op->num_operands + 1) * sizeof *operand_types);
  vlmc_type_t *declared = malloc((op->num_results + 1) * sizeof *declared);
  vlmc_type_t *inferred = malloc((op->num_results + 1) * sizeof *inferred);
  vlmc_status_t st = NULL;
  if (!operand_types || !declared || !inferred)
    st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t i = 0; !st && i < op->num_operands; ++i) operand_types[i] = &op->operands[i]->type;
  for (uint32_t i = 0; !st && i < op->num_results; ++i) declared[i] = op->results[i].type;
  if (!st) {
    vlmc_op_signature_t sig = {module,   op->kind,         op->num_operands, operand_types,
                               op->attrs, op->num_results, declared};
    st = vlmc_ir_infer(&sig, inferred);
  }
  for (uint32_t i = 0; !st && i < op->num_results; ++i)
    if (!vlmc_type_equal(&declared[i], &inferred[i]))
      st = vlmc_ir_error(module, VLMC_INVALID_ARGUMENT,
                         "result type %T does not match %T inferred from the operands",
                         &declared[i], &inferred[i]);
  free(operand_types);
  free(declared);
  free(inferred);
  return st;
}

static vlmc_status_t verify_op(const vlmc_func_t *func, const vlmc_op_t *op,
                               const unsigned char *defined) {
  const vlmc_op_info_t *info = vlmc_op_info(op->kind);
  if (op->block != &func->body)
    return vlmc_status_make(VLMC_INTERNAL, "op is linked into another block");
  VLMC_RETURN_IF_ERROR(verify_operands(func, op, defined));
  if ((info->flags & VLMC_OP_FLAG_TERMINATOR) && op->next)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "'%s' must be the last op of the body",
                            info->mnemonic);
  VLMC_RETURN_IF_ERROR(verify_types(func->module, op));
  return info->verify(func->module, op);
}

vlmc_status_t vlmc_func_verify(const vlmc_func_t *func) {
  VLMC_RETURN_IF_ERROR(verify_signature(func));
  const vlmc_module_t *module = func->module;
  unsigned char *defined = calloc(module->next_value_id + 1, 1);
  if (!defined) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t i = 0; i < func->num_args; ++i) defined[func->args[i].id] = 1;
  vlmc_status_t st = NULL;
  for (const vlmc_op_t *op = func->body.first; op && !st; op = op->next) {
    st = vlmc_ir_locate(op, verify_op(func, op, defined));
    for (uint32_t i = 0; i < op->num_results; ++i) defined[op->results[i].id] = 1;
  }
  free(defined);
  VLMC_RETURN_IF_ERROR(st);
  const vlmc_op_t *last = func->body.last;
  if (!last || !(vlmc_op_info(last->kind)->flags & VLMC_OP_FLAG_TERMINATOR))
    return func_error(func, vlmc_status_make(VLMC_INVALID_ARGUMENT,
                                             "the body must end with 'return'"));
  vlmc_dispatch_set_t regions;
  VLMC_RETURN_IF_ERROR(vlmc_dispatch_regions(func, &regions));
  vlmc_status_t slots = vlmc_dispatch_check_slots(func, &regions);
  vlmc_dispatch_set_free(&regions);
  VLMC_RETURN_IF_ERROR(slots);
  return NULL;
}

vlmc_status_t vlmc_module_verify(const vlmc_module_t *module) {
  for (uint32_t i = 0; i < module->num_params; ++i) {
    const vlmc_param_t *param = module->params[i];
    vlmc_status_t st = vlmc_ir_check_type(module, &param->type);
    if (!st && !vlmc_type_is_static(&param->type))
      st = vlmc_ir_error(module, VLMC_INVALID_ARGUMENT, "expected a static shape, got %T",
                         &param->type);
    if (st) return locate_at(module, param->loc, "param", param->name, st);
  }
  for (uint32_t i = 0; i < module->num_funcs; ++i)
    VLMC_RETURN_IF_ERROR(vlmc_func_verify(module->funcs[i]));
  return NULL;
}
