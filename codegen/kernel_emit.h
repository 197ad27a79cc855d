/* Writing one dispatch region's kernel as MLIR text in upstream dialects (func, scf, arith,
 * math, memref; vector types where a target asks for vectors). This is the part every target
 * that writes MLIR shares: SSA numbering, memoized entry-block constants and dims (symbol
 * values from %syms), prologue reads (a bf16 weight read and widened as it loads, a reshape
 * that is only a flat relabelling), scalar elementwise semantics, the epilogue (bias,
 * residual, activation, cast) applied to each element before it is stored, and the function
 * around the body. A target adds what is its own: the cpu target (codegen/targets/cpu/emit.h)
 * vector loads, stores and reductions, and its work-range parameters %lo, %hi; a GPU target
 * (codegen/targets/vulkan/emit.h) also changes, through vlmc_kernel_emit_hooks_t, how symbol
 * values and inputs are read and the function around the body (a gpu.func).
 *
 * The kernel function, with fixed SSA names:
 *
 *   func.func @NAME(%b0: memref<?xT0>, ..., %b{n-1}: memref<?xT{n-1}>,   region inputs
 *                   %out: memref<?xTo>,                                  the output
 *                   %syms: memref<?xi64>,                                symbol values
 *                   TRAILING)                                            the target's own
 *
 * Every buffer is flat (row-major, contiguous); Ti is the input's storage: f32, bf16 or f16
 * for a float parameter, f32 for any other float value, i64 for integers and bool (the
 * executor's conventions, reference/executor.h). A template must write exactly the output
 * elements of the work units it is given, and nothing else.
 *
 * Arithmetic is f32 for every float dtype (as the reference executor does without emulation),
 * except that `cast` to f16 / bf16 rounds; integer values are i64.
 *
 * SSA values are ints: value n is written "%v<n>" (use VLMC_SSA in formats). Constants, dims
 * and counts live in the function's entry block (memoized), so they may be used anywhere.
 *
 * A template writes the loop over work units %lo..%hi; how many units a region has is not
 * the template's to say but the kernel table's rule (vlmc_kernel_work, artifact/kernel_table.h,
 * by template name), which the runtime recomputes when it checks a table.
 *
 * Example (a cpu template for a unary op over all elements, one element per work unit):
 *
 *   static vlmc_status_t emit_copy(vlmc_kernel_emit_t *e) {
 *     const vlmc_value_t *x = e->anchor->operands[0];
 *     int one = vlmc_kernel_emit_index(e, 1);
 *     int i = vlmc_kernel_emit_fresh(e);
 *     vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = %%lo to %%hi step " VLMC_SSA " {", i, one);
 *     vlmc_kernel_emit_finish_element(e, vlmc_kernel_emit_load(e, x, i), i);
 *     vlmc_kernel_emit_line(e, "}");
 *     return NULL;
 *   }
 */
#ifndef VLMC_CODEGEN_KERNEL_EMIT_H
#define VLMC_CODEGEN_KERNEL_EMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/dispatch.h"
#include "ir/ir.h"
#include "support/status.h"
#include "support/strbuf.h"

#define VLMC_SSA "%%v%d"

enum { VLMC_KERNEL_EMIT_MAX_SYMS = 16, VLMC_KERNEL_EMIT_MAX_MEMO = 256 };

/* Memo kinds from here on are a target's own (vlmc_kernel_emit_memo_find / _add). */
enum { VLMC_KERNEL_MEMO_TARGET = 64 };

typedef struct vlmc_kernel_emit_s vlmc_kernel_emit_t;

/* What a target changes in the shared emitter; NULL (or a NULL entry): the cpu's way, as the
 * function comment at the top of this file describes. */
typedef struct {
  /* Entry-block code reading symbol slot `slot` (%syms order) as an index; returns its SSA.
   * cpu: memref.load %syms[slot] : memref<?xi64>, index_cast. */
  int (*read_symbol)(vlmc_kernel_emit_t *e, uint32_t slot);
  /* Element `flat` (index SSA) of region input `input`, stored as `storage` (F32, BF16,
   * F16, I64), as f32 / i64. cpu: memref.load %bI[flat] (then arith.extf for 16-bit floats). */
  int (*load_input)(vlmc_kernel_emit_t *e, int input, vlmc_dtype_t storage, int flat);
  /* The module text around the code (vlmc_kernel_emit_append_code); `name` and
   * `trailing_params` as vlmc_kernel_emit_function was given them. */
  vlmc_status_t (*write_function)(vlmc_kernel_emit_t *e, const char *name,
                                  const char *trailing_params, vlmc_strbuf_t *out);
  /* Whether erf is written as arithmetic (a target whose lowering has no math.erf). */
  bool expand_erf;
  /* Whether a value is rounded to f16 in integer arithmetic rather than as arith.truncf then
   * arith.extf: NVIDIA's Vulkan compiler drops that round trip (the value keeps its f32 bits
   * and never overflows to inf), integer operations it cannot. */
  bool round_f16_by_bits;
} vlmc_kernel_emit_hooks_t;

struct vlmc_kernel_emit_s {
  const vlmc_module_t *module;
  const vlmc_func_t *func;
  const vlmc_dispatch_region_t *region;
  const vlmc_op_t *anchor;  /* the op whose template writes the loops */
  uint32_t anchor_index;    /* in region->ops; members after it are the epilogue */
  /* Vector width (f32 lanes) the target wants templates to use for their inner loops (the cpu
   * target: 4 for portable x86-64 / SSE2, 8 for x86-64-v3 / AVX2, 16 for x86-64-v4 / AVX-512;
   * codegen/targets/cpu/machine.h); 1: scalar code. */
  int vector_width;

  /* Filled by the template. */
  const char *template_name; /* "linear", "rms_norm", ... (vlmc inspect shows it) */
  int64_t cost;              /* rough f32 operations per work unit (cpu: decides threading) */

  /* Set by the target after vlmc_kernel_emit_init: its hooks (NULL: the cpu's ways) and its
   * own per-kernel state. */
  const vlmc_kernel_emit_hooks_t *hooks;
  void *target;

  /* Private to kernel_emit.c. */
  vlmc_strbuf_t entry, body;
  int next;
  int indent;
  uint32_t syms[VLMC_KERNEL_EMIT_MAX_SYMS]; /* module symbol ids, in %syms order */
  uint32_t num_syms;
  struct { int kind; int64_t key; int ssa; } memo[VLMC_KERNEL_EMIT_MAX_MEMO];
  uint32_t num_memo;
  vlmc_status_t error; /* the first error a helper met; vlmc_kernel_emit_function returns it */
  const vlmc_op_t *norm; /* the norm prologue whose statistic the template gave (NULL: none) */
  int norm_scale;        /* its SSA */
};

/* ---- writing ---- */

/* A fresh SSA number. */
int vlmc_kernel_emit_fresh(vlmc_kernel_emit_t *e);
/* One line of the body at the current nesting; a line ending in '{' opens a level and a line
 * starting with '}' closes one. */
void vlmc_kernel_emit_line(vlmc_kernel_emit_t *e, const char *fmt, ...) VLMC_PRINTF(2, 3);
/* Records an error (the first one wins); templates return e->error-style statuses directly. */
void vlmc_kernel_emit_fail(vlmc_kernel_emit_t *e, const char *fmt, ...) VLMC_PRINTF(2, 3);

/* ---- constants, dims and counts (entry block, memoized) ---- */

int vlmc_kernel_emit_index(vlmc_kernel_emit_t *e, int64_t value);   /* : index */
int vlmc_kernel_emit_i64(vlmc_kernel_emit_t *e, int64_t value);     /* : i64 */
int vlmc_kernel_emit_f32(vlmc_kernel_emit_t *e, double value);      /* : f32 */
/* An f32 SSA rounded to f16 and back (f32), as a cast to f16 stores it: in integer
 * arithmetic where the target asked (round_f16_by_bits: a driver may fold truncf + extf). */
int vlmc_kernel_emit_round_f16(vlmc_kernel_emit_t *e, int x);
/* A dim's value (: index), from %syms for a symbolic dim. */
int vlmc_kernel_emit_dim(vlmc_kernel_emit_t *e, vlmc_dim_t dim);
/* Product of dims [from, to) of a type (: index); 1 for an empty range. */
int vlmc_kernel_emit_dims_product(vlmc_kernel_emit_t *e, const vlmc_type_t *type, uint32_t from,
                                  uint32_t to);
/* The element count of a type as a dim expression when it has at most one symbolic dim
 * (that dim times the static rest); static -1 otherwise (vlmc_type_count_dim). */
vlmc_dim_t vlmc_kernel_emit_count_dims(const vlmc_type_t *type);

/* ---- reading inputs ---- */

/* Whether v can be read by the template: a region input, or a prologue op's result. */
bool vlmc_kernel_emit_readable(const vlmc_kernel_emit_t *e, const vlmc_value_t *v);
/* Element `flat` (an index SSA) of v as f32 (float values) or i64 (integer / bool values),
 * converted from the storage as it loads. v must be readable. */
int vlmc_kernel_emit_load(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int flat);
/* Norm prologues (ir/dispatch.h; fuse{norm-prologue=true}): the rms_norm that v (an operand of
 * the anchor) is read through, or NULL. A template that serves one computes the norm's row
 * statistic a = 1 / sqrt(mean(x^2) + eps) in f32 first, at the kernel's top level, and gives it
 * here; from then on vlmc_kernel_emit_load(v, flat) loads x[flat] and returns
 * w[col] * (x[flat] * a) through the chain's casts (an f16 program's rounding), as the norm's
 * own kernel would have stored it. Without it such a load fails the kernel by name. */
const vlmc_op_t *vlmc_kernel_emit_norm_prologue(const vlmc_kernel_emit_t *e, const vlmc_value_t *v);
void vlmc_kernel_emit_set_norm_scale(vlmc_kernel_emit_t *e, const vlmc_op_t *norm, int a);
/* The element of v (read through a norm prologue) from the norm's input element x, its weight
 * element w (-1: the norm has none) and the statistic a, through the chain's casts: for a
 * template that loads x and w itself (the GEMV's one pass). */
int vlmc_kernel_emit_norm_element(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int x, int w, int a);
/* Whether v is a dequantize prologue's result (vlmc_dispatch_dequantize_source): the kernel
 * reads its packed words, scales and biases; vlmc_kernel_emit_load dequantizes element by
 * element, and a hot template may read the words itself. */
bool vlmc_kernel_emit_dequantizes(const vlmc_kernel_emit_t *e, const vlmc_value_t *v);
/* row * per_row + col / per_item (index SSAs, static counts): the word (per_row words, per_item
 * values a word) or the group (per_row groups of per_item) that holds (row, col). */
int vlmc_kernel_emit_quant_index(vlmc_kernel_emit_t *e, int row, int64_t per_row, int col,
                                 int64_t per_item);
/* Element (row, col) (index SSAs) of dequantize `dq`'s result, as f32: its word loaded and
 * its value shifted out, times its group's scale plus its bias (two roundings, as the
 * reference). */
int vlmc_kernel_emit_dequantized(vlmc_kernel_emit_t *e, const vlmc_op_t *dq, int row, int col);
/* The MLIR type of a buffer's elements for a storage dtype ("bf16", "f16", "i64", "f32";
 * "i32" for packed u32 words): also the kernel table's spelling for the floats and i64. */
const char *vlmc_kernel_emit_storage_type(vlmc_dtype_t storage);
/* The MLIR scalar type a value is computed in: "f32" or "i64". */
const char *vlmc_kernel_emit_type(vlmc_dtype_t ir_dtype);

/* ---- computing ---- */

/* Applies an elementwise op (or reshape, an identity) to scalar operands already computed in
 * f32 / i64; returns the result. */
int vlmc_kernel_emit_elementwise(vlmc_kernel_emit_t *e, const vlmc_op_t *op, const int *operands);
/* `%v = OP %a, %b : index` (arith.addi, arith.muli, arith.divui, arith.minui, ...). */
int vlmc_kernel_emit_index_op(vlmc_kernel_emit_t *e, const char *op, int a, int b);
/* `%v = OP %a, %b` on f32 (width 0) or vector<width x f32>; and the unary form. */
int vlmc_kernel_emit_float_op(vlmc_kernel_emit_t *e, const char *op, int a, int b, int width);
int vlmc_kernel_emit_float_unary(vlmc_kernel_emit_t *e, const char *op, int a, int width);
/* Opens `scf.for %iv = from to to step step {` and returns %iv; close it with a "}" line. */
int vlmc_kernel_emit_for(vlmc_kernel_emit_t *e, int from, int to, int step);

/* ---- writing the output ---- */

/* The anchor's result element `value` at output flat index `flat`: applies the epilogue
 * (reading its other operands at `flat`, or flat modulo their count for a bias row) and
 * stores the final value into %out. */
void vlmc_kernel_emit_finish_element(vlmc_kernel_emit_t *e, int value, int flat);
/* The whole element `flat` of an elementwise region (anchor elementwise, cast or reshape):
 * operands read at flat or, when broadcast, through the output's multi-index; the anchor op,
 * the epilogue and the store. Targets wrap it in their own loop over elements. */
void vlmc_kernel_emit_elementwise_element(vlmc_kernel_emit_t *e, int flat);
/* Stores into %out without the epilogue (for templates that only move data and whose region
 * has no epilogue: check vlmc_kernel_emit_has_epilogue). */
void vlmc_kernel_emit_store(vlmc_kernel_emit_t *e, int value, int flat);
bool vlmc_kernel_emit_has_epilogue(const vlmc_kernel_emit_t *e);

/* ---- for targets ---- */

/* One line of the entry block (constants, dims; memoize them with the two functions below). */
void vlmc_kernel_emit_entry_line(vlmc_kernel_emit_t *e, const char *fmt, ...) VLMC_PRINTF(2, 3);
/* The SSA memoized under (kind, key), or -1; kinds from VLMC_KERNEL_MEMO_TARGET on are free. */
int vlmc_kernel_emit_memo_find(const vlmc_kernel_emit_t *e, int kind, int64_t key);
/* Remembers ssa under (kind, key) and returns it. */
int vlmc_kernel_emit_memo_add(vlmc_kernel_emit_t *e, int kind, int64_t key, int ssa);
/* The entry block then the body, as written so far, appended to out (for write_function). */
void vlmc_kernel_emit_append_code(const vlmc_kernel_emit_t *e, vlmc_strbuf_t *out);
/* The region input a readable value comes from (through prologue ops), or -1. */
int vlmc_kernel_emit_source_input(const vlmc_kernel_emit_t *e, const vlmc_value_t *v);

/* ---- the driver's side (a target's codegen) ---- */

/* The index in region->ops of the anchor: the first member that is not a prologue op
 * (reshape, widening cast) of an input; the root when every member is one. */
uint32_t vlmc_kernel_anchor_index(const vlmc_dispatch_region_t *region);

/* Prepares to write region's kernel: finds the anchor. */
vlmc_status_t vlmc_kernel_emit_init(vlmc_kernel_emit_t *e, const vlmc_module_t *module,
                                    const vlmc_func_t *func, const vlmc_dispatch_region_t *region,
                                    int vector_width);
/* The whole MLIR module text of the kernel: function `name` with the parameters above, then
 * `trailing_params` (e.g. "%lo: index, %hi: index"; "" for none); takes the body. Returns
 * the first error a helper recorded instead, if any. */
vlmc_status_t vlmc_kernel_emit_function(vlmc_kernel_emit_t *e, const char *name,
                                        const char *trailing_params, vlmc_strbuf_t *out);
void vlmc_kernel_emit_deinit(vlmc_kernel_emit_t *e);
/* The storage dtype the kernel expects for region input i (F32 / BF16 / F16 / I64). */
vlmc_dtype_t vlmc_kernel_emit_input_storage(const vlmc_kernel_emit_t *e, uint32_t i);

/* Whether dims from .. rank-1 of t are all static (a template's static head dims). */
bool vlmc_kernel_emit_static_dims(const vlmc_type_t *t, uint32_t from);

#endif
