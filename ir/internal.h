/* Private to ir/: the string map, the shape-rule and verifier functions named by ops.def, and
 * small helpers shared by the parser, printer and verifier. Not part of the public API. */
#ifndef VLMC_IR_INTERNAL_H
#define VLMC_IR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/ir.h"
#include "support/arena.h"

/* An open-addressing map from byte strings to pointers, allocated in an arena (it never
 * frees; growing copies the table). Keys are not copied: they must outlive the map. A NULL
 * value reads as "absent", so setting NULL removes an entry. */
typedef struct vlmc_ir_strmap_s vlmc_ir_strmap_t;

vlmc_ir_strmap_t *vlmc_ir_strmap_create(vlmc_arena_t *arena);
/* False when out of memory. */
bool vlmc_ir_strmap_put(vlmc_ir_strmap_t *map, const char *key, size_t len, void *value);
void *vlmc_ir_strmap_get(const vlmc_ir_strmap_t *map, const char *key, size_t len);

/* Grows an arena array of `elem` bytes per entry to hold at least `need` entries. */
bool vlmc_ir_grow(vlmc_arena_t *arena, void **data, uint32_t *capacity, uint32_t need,
                  size_t elem, size_t align);

/* The attribute named `name` of a signature, or NULL when absent. */
const vlmc_attr_t *vlmc_sig_attr(const vlmc_op_signature_t *sig, const char *name);

/* Resolves an ENUM choice by name; false when it is not one of the schema's choices. */
bool vlmc_ir_enum_lookup(const vlmc_attr_schema_t *schema, const char *choice, size_t len,
                         vlmc_attr_t *out_attr);

/* Validates an attribute value against its schema slot without copying anything: the kind
 * (an integer is accepted where a float is expected), ENUM choices resolved by name. */
vlmc_status_t vlmc_ir_attr_check(const vlmc_attr_schema_t *schema, const vlmc_attr_t *in,
                                 vlmc_attr_t *out);
/* Error unless every required attribute is present. */
vlmc_status_t vlmc_ir_check_required_attrs(const vlmc_op_info_t *info, const vlmc_attr_t *attrs);

/* Writes the dim / the float / the symbol name in their text forms. */
void vlmc_ir_print_dim(const vlmc_module_t *module, vlmc_dim_t dim, vlmc_strbuf_t *out);
void vlmc_ir_print_float(double v, vlmc_strbuf_t *out);
void vlmc_ir_print_symbol_name(const char *name, vlmc_strbuf_t *out);
/* Whether `name` can be printed without quotes after '@'. */
bool vlmc_ir_is_bare_symbol(const char *name, size_t len);

/* Prefixes a message with the op's location: "file:line:col: error: " when parsed,
 * "@func: 'mnemonic' op #n: " when built. Consumes status. */
vlmc_status_t vlmc_ir_locate(const vlmc_op_t *op, vlmc_status_t status);

/* An error whose message is formatted with %s, %d, %u, %lld, %% and two extras:
 * %T prints a `const vlmc_type_t *`, %D a `const vlmc_dim_t *` (symbol names from module). */
vlmc_status_t vlmc_ir_error(const vlmc_module_t *module, vlmc_status_code_t code, const char *fmt,
                            ...);

/* Runs an op's shape rule with the checks every op shares (block-quantized operands only where
 * the op accepts them, valid result types). */
vlmc_status_t vlmc_ir_infer(const vlmc_op_signature_t *sig, vlmc_type_t *out_types);
/* Checks that a type is well formed (rank, normalised dims, known symbols, block sizes). */
vlmc_status_t vlmc_ir_check_type(const vlmc_module_t *module, const vlmc_type_t *type);

/* Shape rules (ir/shape_rules.c). */
#define VLMC_IR_SHAPE_RULE(fn) \
  vlmc_status_t fn(const vlmc_op_signature_t *sig, vlmc_type_t *out_types)
VLMC_IR_SHAPE_RULE(vlmc_shape_param);
VLMC_IR_SHAPE_RULE(vlmc_shape_constant);
VLMC_IR_SHAPE_RULE(vlmc_shape_linear);
VLMC_IR_SHAPE_RULE(vlmc_shape_dequantize);
VLMC_IR_SHAPE_RULE(vlmc_shape_matmul);
VLMC_IR_SHAPE_RULE(vlmc_shape_binary);
VLMC_IR_SHAPE_RULE(vlmc_shape_unary_float);
VLMC_IR_SHAPE_RULE(vlmc_shape_unary_signed);
VLMC_IR_SHAPE_RULE(vlmc_shape_norm);
VLMC_IR_SHAPE_RULE(vlmc_shape_softmax);
VLMC_IR_SHAPE_RULE(vlmc_shape_attention);
VLMC_IR_SHAPE_RULE(vlmc_shape_window_attention);
VLMC_IR_SHAPE_RULE(vlmc_shape_kv_cache_append);
VLMC_IR_SHAPE_RULE(vlmc_shape_rope);
VLMC_IR_SHAPE_RULE(vlmc_shape_grid_index);
VLMC_IR_SHAPE_RULE(vlmc_shape_vision_positions);
VLMC_IR_SHAPE_RULE(vlmc_shape_pos_interp);
VLMC_IR_SHAPE_RULE(vlmc_shape_token_positions);
VLMC_IR_SHAPE_RULE(vlmc_shape_inverse_permutation);
VLMC_IR_SHAPE_RULE(vlmc_shape_gather);
VLMC_IR_SHAPE_RULE(vlmc_shape_embedding);
VLMC_IR_SHAPE_RULE(vlmc_shape_scatter_rows);
VLMC_IR_SHAPE_RULE(vlmc_shape_reshape);
VLMC_IR_SHAPE_RULE(vlmc_shape_transpose);
VLMC_IR_SHAPE_RULE(vlmc_shape_concat);
VLMC_IR_SHAPE_RULE(vlmc_shape_slice);
VLMC_IR_SHAPE_RULE(vlmc_shape_cast);
VLMC_IR_SHAPE_RULE(vlmc_shape_argmax);
VLMC_IR_SHAPE_RULE(vlmc_shape_return);
VLMC_IR_SHAPE_RULE(vlmc_shape_tap);
#undef VLMC_IR_SHAPE_RULE

/* Op verifiers (ir/op_verifiers.c). */
#define VLMC_IR_OP_VERIFIER(fn) vlmc_status_t fn(const vlmc_module_t *module, const vlmc_op_t *op)
VLMC_IR_OP_VERIFIER(vlmc_verify_none);
VLMC_IR_OP_VERIFIER(vlmc_verify_constant);
VLMC_IR_OP_VERIFIER(vlmc_verify_clamp);
VLMC_IR_OP_VERIFIER(vlmc_verify_kv_cache_append);
VLMC_IR_OP_VERIFIER(vlmc_verify_inverse_permutation);
VLMC_IR_OP_VERIFIER(vlmc_verify_return);
#undef VLMC_IR_OP_VERIFIER

#endif
