/* vlmc's graph IR: the one public header of the ir/ layer.
 *
 * A module owns parameters (weights by checkpoint name), symbols (the names of symbolic
 * dimensions such as P, S, C) and functions. A function has typed arguments, result types
 * and one block of ops in SSA form; an op's kind comes from the op table (ir/ops.def), which
 * also gives its operand counts, attribute schema, shape rule and verifier. Everything lives
 * in the module's arena: ops are unlinked, never freed.
 *
 * The structs are readable by any layer (passes walk `func->body.first ... op->next`);
 * change them only through the functions below, which keep the invariants:
 *   - a value belongs to one function; value ids are unique in the module;
 *   - an op's attrs array has one slot per schema attribute, kind NONE when absent;
 *   - dims are normalised (see vlmc_dim_t).
 *
 * Text form: docs/ir.md. Printing then parsing then printing is the identity.
 * The runtime interprets this IR too, so nothing here depends on passes/ or on LLVM. */
#ifndef VLMC_IR_IR_H
#define VLMC_IR_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "support/arena.h"
#include "support/status.h"
#include "support/strbuf.h"

/* ---------------------------------------------------------------------------------------- */
/* Element types                                                                            */

typedef enum {
  VLMC_DTYPE_F32,
  VLMC_DTYPE_F16,
  VLMC_DTYPE_BF16,
  VLMC_DTYPE_F64,
  VLMC_DTYPE_I64,
  VLMC_DTYPE_I32,
  VLMC_DTYPE_I8,
  VLMC_DTYPE_U8,
  VLMC_DTYPE_U32, /* packed quantized weights (dequantize's first operand) */
  VLMC_DTYPE_BOOL,
  /* Block-quantized storage types (weights only): blocks of `block_size` elements along the
   * last dimension, each `block_bytes` bytes (scale + packed values, ggml's layouts). */
  VLMC_DTYPE_Q4_0,
  VLMC_DTYPE_Q8_0,
  VLMC_DTYPE_COUNT
} vlmc_dtype_t;

typedef struct {
  const char *name;     /* "f32", "bf16", "q4_0", ... as written in the text form */
  uint32_t bits;        /* per element; 0 for block-quantized types */
  uint32_t block_size;  /* elements per block; 1 for plain types */
  uint32_t block_bytes; /* bytes per block; bits / 8 for plain types (bool: 1) */
  bool is_float;
  bool is_int;          /* signed or unsigned integers (not bool) */
  bool is_signed;
  bool is_quantized;
} vlmc_dtype_info_t;

const vlmc_dtype_info_t *vlmc_dtype_info(vlmc_dtype_t dtype);
/* Looks a dtype up by its text name (len bytes of `name`); false if none has that name. */
bool vlmc_dtype_from_name(const char *name, size_t len, vlmc_dtype_t *out_dtype);

/* ---------------------------------------------------------------------------------------- */
/* Dimensions and tensor types                                                              */

/* A dimension: static, or one symbol in the closed form  sym * num / den + off.
 * Examples: 1280 = {0,0,1,1280}; P = {P,1,1,0}; P/4 = {P,1,4,0}; 4*M = {M,4,1,0};
 * C+1 = {C,1,1,1}. Normalised: for a static dim num = 0, den = 1 and off >= 0 is the size;
 * for a symbolic one num > 0, den > 0, gcd(num, den) = 1. At run time sym * num must be a
 * multiple of den and the value non-negative (the runtime checks when it binds symbols). */
typedef struct {
  uint32_t sym; /* 0: static; otherwise 1 + index into the module's symbol table */
  int64_t num;
  int64_t den;
  int64_t off;
} vlmc_dim_t;

enum { VLMC_IR_MAX_RANK = 8 };

typedef struct {
  vlmc_dtype_t dtype;
  uint32_t rank;
  vlmc_dim_t dims[VLMC_IR_MAX_RANK];
} vlmc_type_t;

static inline vlmc_dim_t vlmc_dim_static(int64_t size) {
  vlmc_dim_t d = {0, 0, 1, size};
  return d;
}
static inline bool vlmc_dim_is_static(vlmc_dim_t dim) { return dim.sym == 0; }

/* Builds sym * num / den + off, normalised; error if den <= 0, num < 0 or on overflow. */
vlmc_status_t vlmc_dim_symbolic(uint32_t sym, int64_t num, int64_t den, int64_t off,
                                vlmc_dim_t *out_dim);
bool vlmc_dim_equal(vlmc_dim_t a, vlmc_dim_t b);
/* a + b, a - b, a * k and a / k when the result has the closed form (one symbol at most,
 * exact division of the offset); otherwise an error saying why. */
vlmc_status_t vlmc_dim_add(vlmc_dim_t a, vlmc_dim_t b, vlmc_dim_t *out_dim);
vlmc_status_t vlmc_dim_sub(vlmc_dim_t a, vlmc_dim_t b, vlmc_dim_t *out_dim);
vlmc_status_t vlmc_dim_mul(vlmc_dim_t a, int64_t k, vlmc_dim_t *out_dim);
vlmc_status_t vlmc_dim_div(vlmc_dim_t a, int64_t k, vlmc_dim_t *out_dim);
/* Evaluates a dim given one value per symbol (values[sym - 1]); error when the division is
 * not exact, the value is negative or overflows. */
vlmc_status_t vlmc_dim_eval(vlmc_dim_t dim, const int64_t *symbol_values, size_t num_symbols,
                            int64_t *out_value);

/* A type from a dtype and static sizes (the common case in builders and tests). */
vlmc_type_t vlmc_type_make(vlmc_dtype_t dtype, uint32_t rank, const int64_t *sizes);
bool vlmc_type_equal(const vlmc_type_t *a, const vlmc_type_t *b);
bool vlmc_type_is_static(const vlmc_type_t *type);
/* Solves sym * num / den + off = value for the dim's symbol; false when no non-negative
 * integer does (or the dim is static). Binding a symbol from an argument's extent. */
bool vlmc_dim_solve(vlmc_dim_t dim, int64_t value, int64_t *out_sym);
/* Makes the dim `value`: binds its symbol (symbols[sym - 1], bound[sym - 1]) when unbound,
 * then checks the dim evaluates to `value`; false when it cannot. */
bool vlmc_dim_bind(vlmc_dim_t dim, int64_t value, int64_t *symbols, bool *bound,
                   size_t num_symbols);
/* Product of the dims when all are static; false when symbolic or on overflow. */
bool vlmc_type_static_count(const vlmc_type_t *type, int64_t *out_count);
/* Whether the type's element count fits in int64 and its byte size in size_t, counting each
 * symbolic dim as 1 (its value is bound and checked at run time). The parser and the verifier
 * refuse a type for which this is false (f32[4611686018427387904,4]): every later size
 * computation may then multiply its static dims without overflow. */
bool vlmc_type_size_fits(const vlmc_type_t *type);
/* Whether a and b have the same number of elements for every value of the symbols. */
vlmc_status_t vlmc_type_same_count(const vlmc_type_t *a, const vlmc_type_t *b, bool *out_same);

/* ---------------------------------------------------------------------------------------- */
/* The op table                                                                             */

typedef enum {
#define OP(name, mnemonic, min_ops, max_ops, nres, shape, verify, flags, attrs) VLMC_OP_##name,
#include "ir/ops.def"
#undef OP
  VLMC_OP_COUNT
} vlmc_op_kind_t;

typedef enum {
  VLMC_OP_FLAG_PURE = 1u << 0,
  VLMC_OP_FLAG_ELEMENTWISE = 1u << 1,
  VLMC_OP_FLAG_COMMUTATIVE = 1u << 2,
  VLMC_OP_FLAG_TERMINATOR = 1u << 3,
  VLMC_OP_FLAG_SYMREF = 1u << 4,
  VLMC_OP_FLAG_DECLARED = 1u << 5,
  VLMC_OP_FLAG_HOST = 1u << 6,
} vlmc_op_flag_t;

enum { VLMC_OP_VARIADIC = -1 };

typedef enum {
  VLMC_ATTR_NONE, /* absent */
  VLMC_ATTR_INT,
  VLMC_ATTR_FLOAT,
  VLMC_ATTR_BOOL,
  VLMC_ATTR_ENUM,
  VLMC_ATTR_DTYPE,
  VLMC_ATTR_INTS,
  VLMC_ATTR_DENSE,
  VLMC_ATTR_SYMBOL,
} vlmc_attr_kind_t;

/* An attribute value. Arrays and strings are owned by the module's arena once attached to
 * an op (the builder copies them). DENSE data is either integers or floats: a constant of a
 * float dtype holds floats, any other holds integers. */
typedef struct {
  vlmc_attr_kind_t kind;
  union {
    int64_t i;
    double f;
    bool b;
    vlmc_dtype_t dtype;
    struct {
      const char *name;  /* the choice as written; canonical pointer into the schema */
      uint32_t index;    /* its index in the schema's choices */
    } e;
    const char *symbol;  /* SYMBOL: the name without '@' */
    struct {
      const int64_t *data;
      size_t count;
    } ints;
    struct {
      const int64_t *ints;   /* non-NULL when the data is integers */
      const double *floats;  /* non-NULL when the data is floats */
      size_t count;
    } dense;
  } v;
} vlmc_attr_t;

typedef struct {
  const char *name;
  vlmc_attr_kind_t kind;
  bool required;
  const char *choices; /* ENUM only: "a|b|c" */
} vlmc_attr_schema_t;

typedef struct vlmc_module_s vlmc_module_t;
typedef struct vlmc_op_s vlmc_op_t;

/* What a shape rule sees: the op's kind, operand types, attributes (one per schema slot),
 * and the declared result types (NULL when the caller gives none). */
typedef struct {
  const vlmc_module_t *module;
  vlmc_op_kind_t kind;
  uint32_t num_operands;
  const vlmc_type_t *const *operand_types;
  const vlmc_attr_t *attrs;
  uint32_t num_results;
  const vlmc_type_t *declared; /* num_results entries, or NULL */
} vlmc_op_signature_t;

/* Computes the op's result types into out_types (num_results entries). The message says
 * what was expected, without location: the caller adds it. */
typedef vlmc_status_t (*vlmc_shape_rule_fn)(const vlmc_op_signature_t *sig,
                                            vlmc_type_t *out_types);
/* Checks what types cannot see (constant data, uses, parameters). */
typedef vlmc_status_t (*vlmc_op_verify_fn)(const vlmc_module_t *module, const vlmc_op_t *op);

typedef struct {
  vlmc_op_kind_t kind;
  const char *mnemonic;
  int32_t min_operands;
  int32_t max_operands; /* VLMC_OP_VARIADIC for no limit */
  uint32_t num_results;
  vlmc_shape_rule_fn shape;
  vlmc_op_verify_fn verify;
  uint32_t flags;       /* vlmc_op_flag_t bits */
  const vlmc_attr_schema_t *attrs;
  uint32_t num_attrs;
} vlmc_op_info_t;

/* Whether op gives the same results on every call of its function: a param or constant, or
 * an op with operands that all do (is_static by value id), no effects (tap, return) and
 * static result types. Executors compute such values once and keep them. */
bool vlmc_op_is_static(const vlmc_op_t *op, const bool *is_static);
const vlmc_op_info_t *vlmc_op_info(vlmc_op_kind_t kind);
/* Whether an op only moves or selects elements (gather, embedding, scatter_rows, reshape,
 * transpose, concat, slice, kv_cache_append): its results are values it read, so a low
 * precision result needs no rounding. */
bool vlmc_op_moves_data_only(vlmc_op_kind_t kind);
bool vlmc_op_kind_from_mnemonic(const char *name, size_t len, vlmc_op_kind_t *out_kind);
/* The schema slot of attribute `name` for ops of `kind`, or -1. */
int vlmc_op_attr_slot(vlmc_op_kind_t kind, const char *name);

/* ---------------------------------------------------------------------------------------- */
/* Module, functions, blocks, ops, values                                                   */

typedef struct vlmc_func_s vlmc_func_t;
typedef struct vlmc_block_s vlmc_block_t;

/* Where an op came from in the text (line and column are 1-based; 0 when built). */
typedef struct {
  uint32_t line;
  uint32_t col;
} vlmc_loc_t;

typedef struct {
  vlmc_type_t type;
  const char *name;  /* optional hint ("x", "attn_out"); the printer keeps names unique */
  vlmc_op_t *def;    /* defining op; NULL for a function argument */
  vlmc_func_t *func; /* the function the value lives in */
  uint32_t index;    /* result index in def, or argument index */
  uint32_t id;       /* unique in the module: index into side tables of size next_value_id */
} vlmc_value_t;

struct vlmc_block_s {
  vlmc_op_t *first;
  vlmc_op_t *last;
  vlmc_func_t *func;     /* the function the block belongs to */
  vlmc_op_t *parent_op;  /* NULL for a function body; the op owning a nested region later */
};

/* An op. Nested regions (fusion's `dispatch` bodies) will hang off an op as blocks whose
 * parent_op points back; values already record their function, so a region's ops can use the
 * values of the enclosing body. */
struct vlmc_op_s {
  vlmc_op_kind_t kind;
  vlmc_op_t *prev;
  vlmc_op_t *next;
  vlmc_block_t *block;
  uint32_t num_operands;
  vlmc_value_t **operands;
  uint32_t num_results;
  vlmc_value_t *results;
  vlmc_attr_t *attrs; /* vlmc_op_info(kind)->num_attrs slots */
  vlmc_loc_t loc;
  /* 0, or the dispatch region (a fused kernel) the op belongs to, numbered from 1 within its
   * function; set by the fuse pass and written `... : f32[S,64] dispatch 12` in the text form.
   * ir/dispatch.h gives a region's members, inputs and root; the verifier checks them. */
  uint32_t dispatch;
  /* 0, or the activation buffer (numbered from 1 within the function) that a region root's
   * result lives in; set by the memory-plan pass and written `... dispatch 12 slot 3`. Two
   * results with the same slot are never live at once (ir/dispatch.h checks it). */
  uint32_t slot;
};

struct vlmc_func_s {
  const char *name;
  vlmc_loc_t loc; /* of the `func` keyword when parsed */
  vlmc_module_t *module;
  uint32_t num_args;
  vlmc_value_t *args;
  uint32_t num_results;
  vlmc_type_t *result_types;
  vlmc_block_t body;
};

typedef struct {
  const char *name; /* the checkpoint's tensor name, e.g. "visual.blocks.0.norm1.weight" */
  vlmc_type_t type;
  vlmc_loc_t loc;   /* of the `param` keyword when parsed */
} vlmc_param_t;

struct vlmc_module_s {
  vlmc_arena_t arena;
  const char *source_name; /* file name for diagnostics ("<built>" when not parsed) */
  const char **symbols;    /* symbol names; a dim's sym is 1 + index here */
  uint32_t num_symbols;
  uint32_t symbols_capacity;
  vlmc_param_t **params;
  uint32_t num_params;
  uint32_t params_capacity;
  vlmc_func_t **funcs;
  uint32_t num_funcs;
  uint32_t funcs_capacity;
  uint32_t next_value_id;
  struct vlmc_ir_strmap_s *symbol_index; /* name -> symbol id */
  struct vlmc_ir_strmap_s *param_index;  /* name -> vlmc_param_t */
};

vlmc_status_t vlmc_module_create(vlmc_module_t **out_module);
void vlmc_module_destroy(vlmc_module_t *module);

/* Returns the id of symbol `name` (creating it); names are identifiers such as "P". */
vlmc_status_t vlmc_module_symbol(vlmc_module_t *module, const char *name, uint32_t *out_sym);
/* Borrowed; sym must be valid (1..num_symbols). */
const char *vlmc_module_symbol_name(const vlmc_module_t *module, uint32_t sym);

vlmc_status_t vlmc_module_param_add(vlmc_module_t *module, const char *name,
                                    const vlmc_type_t *type, vlmc_param_t **out_param);
vlmc_param_t *vlmc_module_param_find(const vlmc_module_t *module, const char *name);
/* Removes the parameter (used by dce); ops that refer to it become invalid. */
void vlmc_module_param_remove(vlmc_module_t *module, vlmc_param_t *param);

/* Adds a function. arg_names may be NULL, or hold NULL entries for unnamed arguments. */
vlmc_status_t vlmc_module_func_add(vlmc_module_t *module, const char *name, uint32_t num_args,
                                   const vlmc_type_t *arg_types, const char *const *arg_names,
                                   uint32_t num_results, const vlmc_type_t *result_types,
                                   vlmc_func_t **out_func);
vlmc_func_t *vlmc_module_func_find(const vlmc_module_t *module, const char *name);
/* The function `name` (found, or NULL) called with num_args arguments for num_results
 * results: an error naming the mismatch, for executors. */
vlmc_status_t vlmc_func_check_call(const vlmc_func_t *func, const char *name, uint32_t num_args,
                                   uint32_t num_results);

/* Creates an op with these exact result types (no inference: the parser's path; the verifier
 * checks them later) and inserts it before `before` (NULL: at the end of `block`). `attrs` has
 * one entry per schema slot (kind NONE when absent) or is NULL for none; each is checked
 * against its schema and copied into the arena. Operand and result counts are checked. */
vlmc_status_t vlmc_op_create_raw(vlmc_block_t *block, vlmc_op_t *before, vlmc_op_kind_t kind,
                                 uint32_t num_operands, vlmc_value_t *const *operands,
                                 const vlmc_attr_t *attrs, uint32_t num_results,
                                 const vlmc_type_t *result_types, vlmc_op_t **out_op);
/* Unlinks the op from its block. Its results must have no remaining uses. */
void vlmc_op_erase(vlmc_op_t *op);
void vlmc_op_set_operand(vlmc_op_t *op, uint32_t index, vlmc_value_t *value);
/* Sets (or, with kind NONE, removes) an attribute; arrays are copied into the arena. */
vlmc_status_t vlmc_op_set_attr(vlmc_op_t *op, const char *name, const vlmc_attr_t *value);
/* The attribute named `name`, or NULL when the op has no such attribute or it is absent. */
const vlmc_attr_t *vlmc_op_attr(const vlmc_op_t *op, const char *name);
/* Typed reads of present attributes; they assert that the kind matches. */
int64_t vlmc_op_attr_int(const vlmc_op_t *op, const char *name);
double vlmc_op_attr_float(const vlmc_op_t *op, const char *name);
const char *vlmc_op_attr_enum(const vlmc_op_t *op, const char *name);
/* The row layout of affine group quantization (dequantize, docs/ir.md): a row of `cols`
 * values at `bits` is `words` u32 words of `per_word` values and `groups` groups of `group`
 * (the last word and group may be short). */
typedef struct {
  int64_t bits, group, cols, per_word, words, groups;
} vlmc_quant_layout_t;
/* bits 4 or 8 (others give per_word 32 / bits all the same), group and cols >= 1. */
vlmc_quant_layout_t vlmc_quant_layout(int64_t bits, int64_t group, int64_t cols);
/* The layout a dequantize op's attributes give. */
vlmc_quant_layout_t vlmc_dequantize_layout(const vlmc_op_t *dequantize);
/* Replaces every use of `from` in from->func by `to` (same type required by the verifier);
 * returns how many operands changed. */
uint32_t vlmc_value_replace_all_uses(vlmc_value_t *from, vlmc_value_t *to);
/* Number of operand slots that use `value` in its function (a scan; no use lists). */
uint32_t vlmc_value_use_count(const vlmc_value_t *value);
/* Sets the value's name hint (copied; NULL clears it). */
vlmc_status_t vlmc_value_set_name(vlmc_value_t *value, const char *name);
/* The constant op's data for `value` when it is defined by `constant`; NULL otherwise. */
const vlmc_attr_t *vlmc_value_constant(const vlmc_value_t *value);

/* Attribute constructors for builders (arrays are borrowed until the op copies them). */
vlmc_attr_t vlmc_attr_int(int64_t v);
vlmc_attr_t vlmc_attr_float(double v);
vlmc_attr_t vlmc_attr_bool(bool v);
vlmc_attr_t vlmc_attr_enum(const char *choice);
vlmc_attr_t vlmc_attr_dtype(vlmc_dtype_t dtype);
vlmc_attr_t vlmc_attr_ints(const int64_t *data, size_t count);
vlmc_attr_t vlmc_attr_dense_ints(const int64_t *data, size_t count);
vlmc_attr_t vlmc_attr_dense_floats(const double *data, size_t count);
vlmc_attr_t vlmc_attr_symbol(const char *name);
bool vlmc_attr_equal(const vlmc_attr_t *a, const vlmc_attr_t *b);

/* ---------------------------------------------------------------------------------------- */
/* Builder: creates ops with shape inference through the op table                          */

typedef struct {
  const char *name;
  vlmc_attr_t value;
} vlmc_named_attr_t;

typedef struct {
  vlmc_func_t *func;
  vlmc_block_t *block;
  vlmc_op_t *before; /* insert before this op; NULL: at the end of block */
  vlmc_loc_t loc;    /* given to every op created (passes copy the loc of what they replace) */
} vlmc_builder_t;

/* Inserts at the end of func's body. */
void vlmc_builder_init(vlmc_builder_t *b, vlmc_func_t *func);
void vlmc_builder_set_insert_before(vlmc_builder_t *b, vlmc_op_t *op);

/* The general entry: resolves attribute names against the schema, runs the shape rule
 * (declared may be NULL unless the op is DECLARED) and inserts the op. Errors name the op
 * and what was expected. `name` is the hint for the first result (may be NULL). */
vlmc_status_t vlmc_builder_op(vlmc_builder_t *b, vlmc_op_kind_t kind, uint32_t num_operands,
                              vlmc_value_t *const *operands, uint32_t num_attrs,
                              const vlmc_named_attr_t *attrs, const vlmc_type_t *declared,
                              const char *name, vlmc_op_t **out_op);

/* Convenience wrappers for single-result ops; *out_value is the result. */
vlmc_status_t vlmc_builder_param(vlmc_builder_t *b, const char *param_name, const char *name,
                                 vlmc_value_t **out_value);
vlmc_status_t vlmc_builder_constant_ints(vlmc_builder_t *b, const vlmc_type_t *type,
                                         const int64_t *data, size_t count, const char *name,
                                         vlmc_value_t **out_value);
vlmc_status_t vlmc_builder_constant_floats(vlmc_builder_t *b, const vlmc_type_t *type,
                                           const double *data, size_t count, const char *name,
                                           vlmc_value_t **out_value);
/* Any op with one result and no attributes (add, exp, silu, matmul, ...). */
vlmc_status_t vlmc_builder_simple(vlmc_builder_t *b, vlmc_op_kind_t kind, uint32_t num_operands,
                                  vlmc_value_t *const *operands, const char *name,
                                  vlmc_value_t **out_value);
/* bias may be NULL. */
vlmc_status_t vlmc_builder_linear(vlmc_builder_t *b, vlmc_value_t *x, vlmc_value_t *w,
                                  vlmc_value_t *bias, const char *name, vlmc_value_t **out_value);
vlmc_status_t vlmc_builder_rms_norm(vlmc_builder_t *b, vlmc_value_t *x, vlmc_value_t *weight,
                                    double eps, const char *name, vlmc_value_t **out_value);
vlmc_status_t vlmc_builder_reshape(vlmc_builder_t *b, vlmc_value_t *x, const vlmc_type_t *type,
                                   const char *name, vlmc_value_t **out_value);
vlmc_status_t vlmc_builder_transpose(vlmc_builder_t *b, vlmc_value_t *x, const int64_t *perm,
                                     const char *name, vlmc_value_t **out_value);
vlmc_status_t vlmc_builder_cast(vlmc_builder_t *b, vlmc_value_t *x, vlmc_dtype_t dtype,
                                const char *name, vlmc_value_t **out_value);
vlmc_status_t vlmc_builder_gather(vlmc_builder_t *b, vlmc_value_t *x, vlmc_value_t *index,
                                  int64_t axis, const char *name, vlmc_value_t **out_value);
vlmc_status_t vlmc_builder_return(vlmc_builder_t *b, uint32_t num_values,
                                  vlmc_value_t *const *values);

/* ---------------------------------------------------------------------------------------- */
/* Verifier, printer, parser                                                                */

/* Checks the whole module: types against the shape rules, attribute schemas, definitions
 * before uses, terminators and result types, parameters. The first error is returned with
 * its location ("file:line:col: error: ..." for parsed ops, "@func: op #n 'kind': ..."
 * for built ones). */
vlmc_status_t vlmc_module_verify(const vlmc_module_t *module);
vlmc_status_t vlmc_func_verify(const vlmc_func_t *func);

/* Prefixes an error with the op's location ("file:line:col: error: 'op' op: " for parsed ops,
 * "@func: op #n 'op': " for built ones) and appends the op's text. Consumes status; passes
 * use it so that their errors point at the op. */
vlmc_status_t vlmc_op_locate_error(const vlmc_op_t *op, vlmc_status_t status);

/* Deterministic text; appends to out. Works on unverified IR (dangling operands print as
 * %<dangling>, which does not parse). */
void vlmc_module_print(const vlmc_module_t *module, vlmc_strbuf_t *out);
/* A malloc'd copy of the module's text, or NULL when out of memory. */
char *vlmc_module_to_string(const vlmc_module_t *module);
void vlmc_type_print(const vlmc_module_t *module, const vlmc_type_t *type, vlmc_strbuf_t *out);
/* An attribute's value as the op printer writes it (kernel signatures hash this text). */
void vlmc_attr_print(const vlmc_attr_t *attr, vlmc_strbuf_t *out);
/* One op as it appears in its function (names as the function printer gives them). */
void vlmc_op_print(const vlmc_op_t *op, vlmc_strbuf_t *out);

typedef struct {
  const char *filename;  /* for diagnostics; "<input>" when NULL */
  uint32_t first_line;   /* line number of the text's first line (1 when 0): --split-input-file */
} vlmc_parse_options_t;

/* Limits against hostile input; exceeding one is a located parse error. */
enum {
  VLMC_IR_MAX_SOURCE_BYTES = 256 * 1024 * 1024,
  VLMC_IR_MAX_IDENT_BYTES = 4096,
  VLMC_IR_MAX_OPERANDS = 65536,
  VLMC_IR_MAX_RESULTS = 64, /* per op; a function may return up to 4096 values */
  VLMC_IR_MAX_ARRAY_ELEMENTS = 64 * 1024 * 1024,
  VLMC_IR_MAX_OPS = 16 * 1024 * 1024,
};

/* Parses a module from `len` bytes of text. Errors are
 * "file:line:col: error: expected ...\n<source line>\n<caret>". Does not verify. */
vlmc_status_t vlmc_module_parse(const char *text, size_t len, const vlmc_parse_options_t *options,
                                vlmc_module_t **out_module);

/* ---------------------------------------------------------------------------------------- */
/* Host index computations (shared by canonicalization and the reference executor)          */

/* The grid is `num_images` rows of (t, h, w) in patches. Each computes into a malloc'd array
 * (*out_data, *out_count); errors name the image and what was expected (h, w multiples of
 * merge, positive sizes, no overflow). Semantics: docs/ir.md and the model spec, section 3. */
vlmc_status_t vlmc_index_window_order(const int64_t *grid, size_t num_images, int64_t window,
                                      int64_t patch, int64_t merge, int64_t **out_data,
                                      size_t *out_count);
vlmc_status_t vlmc_index_window_segments(const int64_t *grid, size_t num_images, int64_t window,
                                         int64_t patch, int64_t merge, int64_t **out_data,
                                         size_t *out_count);
vlmc_status_t vlmc_index_full_segments(const int64_t *grid, size_t num_images,
                                       int64_t **out_data, size_t *out_count);
/* Rows then columns: out has 2 * patches entries, [0, patches) rows, [patches, 2*patches) cols. */
vlmc_status_t vlmc_index_vision_positions(const int64_t *grid, size_t num_images, int64_t merge,
                                          int64_t **out_data, size_t *out_count);
/* Qwen3-VL's interpolation of a side x side position table to each image (transformers'
 * fast_pos_embed_interpolate): per image, y = linspace(0, side - 1, h) and x = linspace(0,
 * side - 1, w) in f32 (torch's formula: from the start below steps / 2, from the end above),
 * corners (floor y, floor x), (floor y, ceil x), (ceil y, floor x), (ceil y, ceil x) with ceil
 * = min(floor + 1, side - 1) and weights (1-dy)(1-dx), (1-dy)dx, dy(1-dx), dy dx in f32, in the
 * patch rows' merge-block order, repeated over frames. out_index / out_weight get 4 * patches
 * entries each (corner k of patch n at k * patches + n); either may be NULL. */
vlmc_status_t vlmc_index_pos_interp(const int64_t *grid, size_t num_images, int64_t side,
                                    int64_t merge, int64_t **out_index, float **out_weight,
                                    size_t *out_count);
/* out[perm[i]] = i; error unless perm is a permutation of 0..count-1. */
vlmc_status_t vlmc_index_inverse_permutation(const int64_t *perm, size_t count, int64_t *out);

#endif
