/* Private to reference/: the executor's state, the context an op's evaluation gets, and the
 * helpers shared by the exec_*.c files (one per op family). Not part of the public API.
 *
 * Every row of ir/ops.def has an evaluation function vlmc_ref_eval_<ENUM> (the table in
 * executor.c is generated from ops.def, so a new row does not build until it is evaluated).
 * An evaluation reads ctx->in[i] (F32 or I64 tensors), and fills ctx->out[i], whose dtype and
 * shape the executor has already set from the op's result type: most call
 * vlmc_ref_result_alloc and write the data; host index ops whose length depends on data call
 * vlmc_ref_result_set_length first. */
#ifndef VLMC_REFERENCE_EXEC_INTERNAL_H
#define VLMC_REFERENCE_EXEC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "reference/executor.h"

/* One function prepared for running: its ops in order, and for each value the index of the op
 * that uses it last (so that its buffer can be freed, or taken, there). */
typedef struct {
  const vlmc_func_t *func;
  uint32_t num_ops;
  const vlmc_op_t **ops;
  uint32_t *last_use;    /* by value id; UINT32_MAX when never used */
  int32_t *param_index;  /* by op index: index in module->params of a `param` op, else -1 */
  /* By value id: the value depends on parameters and constants only (and has a static shape),
   * so it is the same on every call: computed once per executor and cached (executor.c). */
  bool *is_static;
  uint32_t max_operands; /* largest operand count of an op, for scratch arrays */
  uint32_t max_results;
} vlmc_ref_plan_t;

/* A linear weight [out, in] rearranged for the contraction kernel (exec_contraction.c): panels
 * of VLMC_REF_PANEL output rows, each k-major (in x VLMC_REF_PANEL, zero-padded), so that the
 * kernel's inner loop runs over contiguous outputs. Made once per executor for a weight that
 * does not change between calls (a static value), keyed by its data. */
typedef struct {
  const void *source;        /* the weight's data (stable: a parameter or a cached value) */
  vlmc_dtype_t source_dtype; /* F32, BF16 or F16 */
  int64_t out, in;
  vlmc_dtype_t dtype;        /* of the panels: BF16 when every weight is a bf16, else F32 */
  void *panels;
} vlmc_ref_packed_t;

enum { VLMC_REF_PANEL = 64, VLMC_REF_ROWS = 4 };

/* The contraction kernel (exec_contraction.c): acc[r][o] = sum_j x[r * xs + j] * p[j * PANEL
 * + o] for r < nr <= VLMC_REF_ROWS and all VLMC_REF_PANEL columns of a zero-padded k-major
 * f32 panel: exact f64 products, summed in j order. */
typedef double vlmc_ref_acc_t[VLMC_REF_ROWS][VLMC_REF_PANEL];
void vlmc_ref_panel_kernel(const float *x, int64_t xs, int64_t nr, const float *panel, int64_t k,
                           vlmc_ref_acc_t acc);

struct vlmc_executor_s {
  const vlmc_module_t *module;
  vlmc_executor_options_t options;
  vlmc_ref_plan_t **plans;     /* by function index, built on first run */
  vlmc_tensor_t *params;       /* by parameter index: the converted (F32 / I64) data, or, when
                                  param_raw, the caller's storage as it came */
  bool *param_loaded;
  /* By parameter index: every use of the parameter (through f32 casts and reshapes) is a
   * linear weight or an embedding table, which read f32 / bf16 / f16 storage directly; such a
   * parameter is kept in its own storage rather than converted to f32 (no f32 copy). */
  bool *param_raw;
  vlmc_tensor_t *statics;      /* by value id: the cached static values (see plan is_static) */
  bool *static_ready;
  vlmc_ref_packed_t *packed;   /* packed linear weights, made on first use */
  size_t num_packed, packed_capacity;
  /* Per run. */
  int64_t *symbols;            /* by symbol index (sym - 1) */
  bool *bound;
};

typedef struct {
  vlmc_executor_t *ex;
  const vlmc_ref_plan_t *plan;
  const vlmc_op_t *op;
  uint32_t op_index;
  vlmc_tensor_t **in;  /* op->num_operands operand values */
  bool *may_take;      /* operand i dies here and appears once: its buffer may be taken */
  vlmc_tensor_t *out;  /* op->num_results; dims not known yet are -1 */
} vlmc_ref_ctx_t;

typedef vlmc_status_t (*vlmc_ref_eval_fn)(vlmc_ref_ctx_t *ctx);

#define OP(name, mnemonic, min_ops, max_ops, nres, shape, verify, flags, attrs) \
  vlmc_status_t vlmc_ref_eval_##name(vlmc_ref_ctx_t *ctx);
#include "ir/ops.def"
#undef OP

/* ---- helpers (executor.c) ---- */

/* An error located at the op: "file:line:col: error: 'gather' op: <message>" for parsed
 * modules, "@func: op #n 'gather': <message>" for built ones. */
vlmc_status_t vlmc_ref_fail(const vlmc_ref_ctx_t *ctx, vlmc_status_code_t code, const char *fmt,
                            ...) VLMC_PRINTF(3, 4);
/* Locates a status made elsewhere (a vlmc_index_* error); passes NULL through. */
vlmc_status_t vlmc_ref_locate(const vlmc_ref_ctx_t *ctx, vlmc_status_t status);

/* Allocates result i (zero-filled) with the shape already set; every dim must be known. */
vlmc_status_t vlmc_ref_result_alloc(vlmc_ref_ctx_t *ctx, uint32_t i);
/* For a result whose length along `axis` comes from data (a DECLARED host op): binds the
 * symbol of that dim to make it `length`, or checks it when bound or static. */
vlmc_status_t vlmc_ref_result_set_length(vlmc_ref_ctx_t *ctx, uint32_t i, uint32_t axis,
                                         int64_t length);
/* Moves operand i's buffer into *out when this op is its last use and it is owned (then the
 * operand becomes empty); false otherwise. */
bool vlmc_ref_operand_take(vlmc_ref_ctx_t *ctx, uint32_t i, vlmc_tensor_t *out);
/* Result 0 holds operand i's elements unchanged in another shape (reshape, a cast that widens
 * to f32): the operand's buffer when this op is its last use, a view when it is borrowed
 * (parameters, cached static values and borrowed arguments outlive the run), else a copy.
 * The result keeps the operand's storage dtype (a raw bf16 parameter stays bf16). */
vlmc_status_t vlmc_ref_result_forward(vlmc_ref_ctx_t *ctx, uint32_t i);
/* Checks `bytes` against the executor's max_tensor_bytes. */
vlmc_status_t vlmc_ref_check_bytes(const vlmc_ref_ctx_t *ctx, size_t bytes);

/* Runs fn(arg, worker, begin, end) over [0, rows) split into contiguous chunks, one per
 * worker (at most vlmc_ref_threads(ex) of them, numbered from 0), each at least min_chunk
 * rows. Workers share nothing but `arg`: give each its own scratch, by worker index. */
typedef void (*vlmc_ref_rows_fn)(void *arg, uint32_t worker, int64_t begin, int64_t end);
void vlmc_ref_parallel_rows(const vlmc_executor_t *ex, int64_t rows, int64_t min_chunk,
                            vlmc_ref_rows_fn fn, void *arg);
/* The min_chunk for work items of `work` multiply-adds each: enough items that a thread's
 * share pays for starting it (~0.1 ms of work). */
int64_t vlmc_ref_min_chunk(int64_t work);
/* The most workers vlmc_ref_parallel_rows uses (options.threads, clamped to [1, 16]). */
uint32_t vlmc_ref_threads(const vlmc_executor_t *ex);

/* ---- value conventions (executor.c) ---- */

/* The storage the executor uses for an IR dtype: F32 for floats and block-quantized types,
 * I64 for integers and bool. */
vlmc_dtype_t vlmc_ref_storage(vlmc_dtype_t ir_dtype);
/* A float rounded to how `ir_dtype` stores it (f16 / bf16 round; others unchanged). */
float vlmc_ref_round(vlmc_dtype_t ir_dtype, float value);
/* An integer wrapped to `ir_dtype` (two's complement truncation; bool: nonzero -> 1). */
int64_t vlmc_ref_wrap_int(vlmc_dtype_t ir_dtype, int64_t value);
/* Converts `src` (any accepted storage for ir_dtype, see vlmc_param_fn) into F32 / I64 in
 * *out: a borrowed view of src when no conversion is needed, else an owned copy (taking src's
 * buffer when src is owned and already in the right storage). With keep_storage, bf16 and
 * f16 storage is kept as it is too (unless emulation must round it): a raw parameter.
 * `what` names the input in errors ("argument 1 (%grid)"). */
vlmc_status_t vlmc_ref_convert_input(const vlmc_executor_t *ex, vlmc_tensor_t *src,
                                     vlmc_dtype_t ir_dtype, const char *what, bool keep_storage,
                                     vlmc_tensor_t *out);

/* Element i of float storage (F32, BF16, F16) as f32. */
float vlmc_ref_load_float(const void *data, vlmc_dtype_t dtype, int64_t i);

/* Row-major strides (in elements) of a shape. */
void vlmc_ref_strides(const int64_t *shape, uint32_t rank, int64_t *out_strides);

#endif
