/* The reference executor: a plain C interpreter of a verified vlmc module, in f32 with f64
 * accumulation for reductions (matmul / linear dot products, norms, softmax and attention
 * sums). It is the oracle for every generated kernel, the engine of precision calibration and
 * the `ref` backend of the runtime. Clarity over speed. Op semantics: reference/README.md and
 * docs/ir.md.
 *
 * Values: every float value is held as f32 and every integer / bool value as i64, whatever
 * its IR dtype (f64 values too are held in f32). Parameters and arguments may come in narrower
 * storage (f16, bf16, q4_0, q8_0, i32, ...) and are converted on the way in; parameters once,
 * then cached for the executor's lifetime. Results always come back owned, as F32 or I64.
 *
 * Symbols (P, S, C, ...) are bound from the argument shapes at each call; every result shape
 * is the op's result type evaluated with them. Host index ops (window_order, ...) whose length
 * depends on data bind their result's symbol, or check it when it is already bound.
 *
 * Example: run @decode, handing the previous step's caches back so that kv_cache_append can
 * grow them in place (amortised O(new rows) per step instead of O(cache)).
 *
 *   static vlmc_status_t weights(void *ctx, const char *name, const vlmc_type_t *type,
 *                                vlmc_tensor_t *out_view) {
 *     const my_file_t *f = ctx;  // e.g. an mmapped safetensors file
 *     const my_entry_t *e = my_find(f, name);
 *     if (!e) return vlmc_status_make(VLMC_NOT_FOUND, "no tensor %s", name);
 *     *out_view = vlmc_tensor_view(e->dtype, e->rank, e->shape, e->data);  // borrowed
 *     return NULL;
 *   }
 *
 *   vlmc_executor_options_t options = vlmc_executor_options_default();
 *   options.get_param = weights;
 *   options.param_ctx = &file;
 *   vlmc_executor_t *ex;
 *   VLMC_RETURN_IF_ERROR(vlmc_executor_create(module, &options, &ex));  // module verified
 *   vlmc_tensor_t args[3] = {vlmc_tensor_view(VLMC_DTYPE_I64, 1, (int64_t[]){1}, &token),
 *                            k_cache, v_cache};  // owned results of the previous call: taken
 *   vlmc_tensor_t results[3];                   // logits, the new k and v caches
 *   vlmc_status_t st = vlmc_executor_run(ex, "decode", args, 3, results, 3);
 *   ...                                         // use results, release them
 *   vlmc_executor_destroy(ex);
 *
 * Not thread-safe: one run at a time per executor (runs may use `threads` internally). */
#ifndef VLMC_REFERENCE_EXECUTOR_H
#define VLMC_REFERENCE_EXECUTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/ir.h"
#include "reference/tensor.h"
#include "support/status.h"

/* Parameter source: fills *out_view with the data of parameter `name`, whose IR type is `type`.
 * A borrowed view must stay valid until the executor is destroyed (an owned one is taken and
 * freed then). Its shape must be the type's; its storage dtype one of: f32 / f16 / bf16 / f64
 * for a float type, the type's own dtype for q4_0 / q8_0, i64 / i32 / i8 / u8 / bool for an
 * integer or bool type. Called at most once per parameter per executor, the first time an op
 * reads it. */
typedef vlmc_status_t (*vlmc_param_fn)(void *ctx, const char *name, const vlmc_type_t *type,
                                       vlmc_tensor_t *out_view);

/* What the range recorder sees for one op result (calibration). Statistics are over the stored
 * value, after any f16 / bf16 rounding; min, max and max_abs ignore inf and NaN, which are
 * counted in `nonfinite` instead (all three are 0 when no element is finite). */
typedef struct {
  const vlmc_op_t *op;
  uint32_t result_index;
  const vlmc_value_t *value;
  const vlmc_tensor_t *tensor; /* F32 or I64; borrowed for the callback's duration */
  int64_t count;               /* elements */
  double min, max, max_abs;
  int64_t nonfinite;           /* inf and NaN elements */
} vlmc_value_range_t;
typedef void (*vlmc_range_fn)(void *ctx, const vlmc_value_range_t *range);

/* The `tap` op: "write this value out as stage `name`". The tensor (F32 or I64) is borrowed
 * for the duration of the call; an error stops the run and is returned, located at the op. */
typedef vlmc_status_t (*vlmc_tap_fn)(void *ctx, const char *name, const vlmc_op_t *op,
                                     const vlmc_tensor_t *tensor);

/* Called after each op with its results (none for `return` and `tap`) and the wall time it
 * took. vlmc_executor_trace_print is a ready-made one writing a line per op to a FILE *. */
typedef void (*vlmc_trace_fn)(void *ctx, const vlmc_op_t *op, const vlmc_tensor_t *results,
                              uint32_t num_results, double seconds);
void vlmc_executor_trace_print(void *file, const vlmc_op_t *op, const vlmc_tensor_t *results,
                               uint32_t num_results, double seconds);

typedef struct {
  vlmc_param_fn get_param; /* may be NULL when the functions run read no parameter */
  void *param_ctx;
  /* f16 / bf16 emulation: round every value whose IR dtype is f16 or bf16 to that dtype after
   * the op that makes it (and arguments and parameters on the way in), so that an f16 program
   * overflows to inf where a real f16 run would. `cast` to f16 / bf16 rounds either way. */
  bool emulate_low_precision;
  vlmc_range_fn on_range; /* NULL: no range recording */
  void *range_ctx;
  vlmc_tap_fn on_tap;     /* NULL: taps are no-ops */
  void *tap_ctx;
  vlmc_trace_fn on_trace; /* NULL: no trace */
  void *trace_ctx;
  /* 1 or 2 (0 means 1): linear, matmul and attention split their rows over this many threads.
   * Results are identical for every count. At most 16. */
  uint32_t threads;
  /* Refuse (with an error naming the op) any single value larger than this; 0: no limit
   * beyond what size_t and malloc allow. For fuzzing and hostile inputs. */
  size_t max_tensor_bytes;
} vlmc_executor_options_t;

vlmc_executor_options_t vlmc_executor_options_default(void);

typedef struct vlmc_executor_s vlmc_executor_t;

/* Verifies the module and prepares to run its functions. The module is borrowed: it must stay
 * alive and unchanged until the executor is destroyed. options may be NULL (the defaults). */
vlmc_status_t vlmc_executor_create(const vlmc_module_t *module,
                                   const vlmc_executor_options_t *options,
                                   vlmc_executor_t **out_executor);
void vlmc_executor_destroy(vlmc_executor_t *executor);

/* Runs function `func_name` on num_args arguments. Each argument's shape must match the
 * function's argument type (binding its symbols), and its storage fit the type (as for
 * parameters). Owned arguments are taken: the executor frees them or reuses their buffers
 * (kv_cache_append grows a taken cache in place), and resets args[i] to an empty tensor,
 * on success and on error alike; borrowed arguments are only read.
 * On success out_results[0 .. num_results) are owned F32 / I64 tensors, in the function's
 * result order (num_results must be the function's count); release them with
 * vlmc_tensor_release. On error out_results hold empty tensors and the message names the
 * function and the argument, or the op ("file:line:col: error: 'gather' op: ..." for parsed
 * modules, "@func: op #n 'gather': ..." for built ones). */
vlmc_status_t vlmc_executor_run(vlmc_executor_t *executor, const char *func_name,
                                vlmc_tensor_t *args, uint32_t num_args,
                                vlmc_tensor_t *out_results, uint32_t num_results);

#endif
