/* Writing one dispatch region's cpu kernel as MLIR text (upstream dialects: func, scf, arith,
 * math, memref, vector). codegen/cpu_lower.c parses it through the MLIR C API and lowers it to
 * LLVM; codegen/cpu_codegen.c drives both. A kernel template (codegen/cpu_kernel_*.c) writes
 * the loops for one anchor op kind with the helpers below; the helpers take care of the rest
 * of the region: prologue reads (a bf16 weight read and widened as it loads, a reshape that is
 * only a flat relabelling) and the epilogue (bias, residual, activation, cast) applied to each
 * element before it is stored.
 *
 * The kernel function, with fixed SSA names:
 *
 *   func.func @NAME(%b0: memref<?xT0>, ..., %b{n-1}: memref<?xT{n-1}>,   region inputs
 *                   %out: memref<?xTo>,                                  the output
 *                   %syms: memref<?xi64>,                                symbol values
 *                   %lo: index, %hi: index)                              work range
 *
 * Every buffer is flat (row-major, contiguous); Ti is the input's storage: f32, bf16 or f16
 * for a float parameter, f32 for any other float value, i64 for integers and bool (the
 * executor's conventions, reference/executor.h). The runtime splits [0, work) over threads and
 * calls the kernel once per chunk: a template must write exactly the output elements that
 * belong to work units lo .. hi-1, and nothing else.
 *
 * Arithmetic is f32 for every float dtype (as the reference executor does without emulation),
 * except that `cast` to f16 / bf16 rounds; integer values are i64.
 *
 * SSA values are ints: value n is written "%v<n>" (use VLMC_SSA in formats). Constants, dims
 * and counts live in the function's entry block (memoized), so they may be used anywhere.
 *
 * Example (a template for a unary op over all elements, one element per work unit):
 *
 *   static vlmc_status_t emit_copy(vlmc_cpu_emit_t *e) {
 *     const vlmc_value_t *x = e->anchor->operands[0];
 *     vlmc_cpu_emit_set_work(e, vlmc_cpu_emit_count_dims(&e->anchor->results[0].type), 1);
 *     int one = vlmc_cpu_emit_index(e, 1);
 *     int i = vlmc_cpu_emit_fresh(e);
 *     vlmc_cpu_emit_line(e, "scf.for " VLMC_SSA " = %%lo to %%hi step " VLMC_SSA " {", i, one);
 *     vlmc_cpu_emit_finish_element(e, vlmc_cpu_emit_load(e, x, i), i);
 *     vlmc_cpu_emit_line(e, "}");
 *     return NULL;
 *   }
 */
#ifndef VLMC_CODEGEN_CPU_EMIT_H
#define VLMC_CODEGEN_CPU_EMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/dispatch.h"
#include "ir/ir.h"
#include "support/status.h"
#include "support/strbuf.h"

#define VLMC_SSA "%%v%d"

enum { VLMC_CPU_MAX_SYMS = 16, VLMC_CPU_MAX_MEMO = 256 };

typedef struct {
  const vlmc_module_t *module;
  const vlmc_func_t *func;
  const vlmc_dispatch_region_t *region;
  const vlmc_op_t *anchor;  /* the op whose template writes the loops */
  uint32_t anchor_index;    /* in region->ops; members after it are the epilogue */
  /* Vector width (f32 lanes) templates should use for their inner loops: 4 for the portable
   * x86-64 target (SSE2), 8 for x86-64-v3 / AVX2 machines. */
  int vector_width;

  /* Filled by the template. */
  const char *template_name; /* "linear", "rms_norm", ... (vlmc inspect shows it) */
  vlmc_dim_t work;           /* work units = work * work_scale */
  int64_t work_scale;
  int64_t cost;              /* rough f32 operations per work unit: decides threading */

  /* Private to cpu_emit.c. */
  vlmc_strbuf_t entry, body;
  int next;
  int indent;
  uint32_t syms[VLMC_CPU_MAX_SYMS]; /* module symbol ids, in %syms order */
  uint32_t num_syms;
  struct { int kind; int64_t key; int ssa; } memo[VLMC_CPU_MAX_MEMO];
  uint32_t num_memo;
  vlmc_status_t error; /* the first error a helper met; cpu_codegen.c returns it */
} vlmc_cpu_emit_t;

/* ---- writing ---- */

/* A fresh SSA number. */
int vlmc_cpu_emit_fresh(vlmc_cpu_emit_t *e);
/* One line of the body at the current nesting; a line ending in '{' opens a level and a line
 * starting with '}' closes one. */
void vlmc_cpu_emit_line(vlmc_cpu_emit_t *e, const char *fmt, ...) VLMC_PRINTF(2, 3);
/* Records an error (the first one wins); templates return e->error-style statuses directly. */
void vlmc_cpu_emit_fail(vlmc_cpu_emit_t *e, const char *fmt, ...) VLMC_PRINTF(2, 3);

/* ---- constants, dims and counts (entry block, memoized) ---- */

int vlmc_cpu_emit_index(vlmc_cpu_emit_t *e, int64_t value);   /* : index */
int vlmc_cpu_emit_i64(vlmc_cpu_emit_t *e, int64_t value);     /* : i64 */
int vlmc_cpu_emit_f32(vlmc_cpu_emit_t *e, double value);      /* : f32 */
/* A vector<width x f32> of zeros. */
int vlmc_cpu_emit_zero_vector(vlmc_cpu_emit_t *e, int width);
/* A dim's value (: index), from %syms for a symbolic dim. */
int vlmc_cpu_emit_dim(vlmc_cpu_emit_t *e, vlmc_dim_t dim);
/* Product of dims [from, to) of a type (: index); 1 for an empty range. */
int vlmc_cpu_emit_dims_product(vlmc_cpu_emit_t *e, const vlmc_type_t *type, uint32_t from,
                               uint32_t to);
/* The element count of a type as a dim expression when it has at most one symbolic dim
 * (work = that dim times the static rest); for set_work. */
vlmc_dim_t vlmc_cpu_emit_count_dims(const vlmc_type_t *type);
/* Sets e->work to `units` times `scale` (a template calls it once). */
void vlmc_cpu_emit_set_work(vlmc_cpu_emit_t *e, vlmc_dim_t units, int64_t scale);

/* ---- reading inputs ---- */

/* Whether v can be read by the template: a region input, or a prologue op's result. */
bool vlmc_cpu_emit_readable(const vlmc_cpu_emit_t *e, const vlmc_value_t *v);
/* Element `flat` (an index SSA) of v as f32 (float values) or i64 (integer / bool values),
 * converted from the storage as it loads. v must be readable. */
int vlmc_cpu_emit_load(vlmc_cpu_emit_t *e, const vlmc_value_t *v, int flat);
/* Elements flat .. flat+width-1 of a float v as a vector<width x f32>. */
int vlmc_cpu_emit_load_vector(vlmc_cpu_emit_t *e, const vlmc_value_t *v, int flat, int width);
/* The MLIR type of a buffer's elements for a storage dtype ("bf16", "f16", "i64", "f32"):
 * also the kernel table's spelling. */
const char *vlmc_cpu_emit_storage_type(vlmc_dtype_t storage);
/* The MLIR scalar type a value is computed in: "f32" or "i64". */
const char *vlmc_cpu_emit_type(vlmc_dtype_t ir_dtype);

/* ---- computing ---- */

/* Applies an elementwise op (or reshape, an identity) to scalar operands already computed in
 * f32 / i64; returns the result. */
int vlmc_cpu_emit_elementwise(vlmc_cpu_emit_t *e, const vlmc_op_t *op, const int *operands);
/* `%v = OP %a, %b : index` (arith.addi, arith.muli, arith.divui, arith.minui, ...). */
int vlmc_cpu_emit_index_op(vlmc_cpu_emit_t *e, const char *op, int a, int b);
/* `%v = OP %a, %b` on f32 (width 0) or vector<width x f32>; and the unary form. */
int vlmc_cpu_emit_float_op(vlmc_cpu_emit_t *e, const char *op, int a, int b, int width);
int vlmc_cpu_emit_float_unary(vlmc_cpu_emit_t *e, const char *op, int a, int width);
/* Element `at` of v (width 0), or elements at .. at+width-1 as a vector. */
int vlmc_cpu_emit_load_at(vlmc_cpu_emit_t *e, const vlmc_value_t *v, int at, int width);
/* Opens `scf.for %iv = from to to step step {` and returns %iv; close it with a "}" line. */
int vlmc_cpu_emit_for(vlmc_cpu_emit_t *e, int from, int to, int step);
/* Horizontal sum of a vector<width x f32> (: f32). */
int vlmc_cpu_emit_reduce_add(vlmc_cpu_emit_t *e, int vector, int width);

/* ---- writing the output ---- */

/* The anchor's result element `value` at output flat index `flat`: applies the epilogue
 * (reading its other operands at `flat`, or flat modulo their count for a bias row) and
 * stores the final value into %out. */
void vlmc_cpu_emit_finish_element(vlmc_cpu_emit_t *e, int value, int flat);
/* A vector<width x f32> of anchor results at flat .. flat+width-1: stored whole when the
 * region has no epilogue, else lane by lane through vlmc_cpu_emit_finish_element. */
void vlmc_cpu_emit_finish_vector(vlmc_cpu_emit_t *e, int value, int flat, int width);
/* Stores into %out without the epilogue (for templates that only move data and whose region
 * has no epilogue: check vlmc_cpu_emit_has_epilogue). */
void vlmc_cpu_emit_store(vlmc_cpu_emit_t *e, int value, int flat);
bool vlmc_cpu_emit_has_epilogue(const vlmc_cpu_emit_t *e);

/* ---- the driver's side (cpu_codegen.c) ---- */

/* Prepares to write region's kernel: finds the anchor. */
vlmc_status_t vlmc_cpu_emit_init(vlmc_cpu_emit_t *e, const vlmc_module_t *module,
                                 const vlmc_func_t *func, const vlmc_dispatch_region_t *region,
                                 int vector_width);
/* The whole MLIR module text of the kernel, function name `name`; takes the body. */
vlmc_status_t vlmc_cpu_emit_finish(vlmc_cpu_emit_t *e, const char *name, vlmc_strbuf_t *out);
void vlmc_cpu_emit_deinit(vlmc_cpu_emit_t *e);
/* The storage dtype the kernel expects for region input i (F32 / BF16 / F16 / I64). */
vlmc_dtype_t vlmc_cpu_emit_input_storage(const vlmc_cpu_emit_t *e, uint32_t i);

/* One template per anchor op kind (codegen/cpu_kernel_*.c). */
typedef vlmc_status_t (*vlmc_cpu_template_fn)(vlmc_cpu_emit_t *e);
/* The template for an anchor kind, or NULL when the cpu target has none. */
vlmc_cpu_template_fn vlmc_cpu_template_for(vlmc_op_kind_t kind);

#endif
