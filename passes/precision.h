/* The precision pass's C interface (the pass itself is `vlmc_pass_precision`, options
 * `target=ref|f16|bf16|bf16-matmul`, `calibration=FILE` and `headroom=N`): the per-target
 * dtype policy, and the calibration that feeds it.
 *
 * Policy. The model computes in f32. For target `ref` nothing changes. For `f16` / `bf16` (call
 * it L) every float activation is *stored* in L, and each op *computes* in L unless a rule or
 * the calibration says f32:
 *   - rules (compute in f32, result stored in L): linear and matmul (f32 accumulation),
 *     rms_norm / layer_norm (norm statistics), softmax, attention and window_attention
 *     (scores and softmax), rope (the rotary angles);
 *   - calibration (the value stays f32, and so does the op computing it): every op result whose
 *     range in an f32 reference run leaves L's finite range with headroom (|x| > 65504 / 4 for
 *     f16, see "Headroom" below) or is inf / NaN. An op reading such a value computes in f32
 *     too (casting it down would overflow again); nothing else is upcast.
 * Storage and compute are expressed with dtypes and casts only: an op computing in f32 whose
 * result is stored in L is followed by a cast to L that every use reads; an op computing in a
 * dtype its operands are not stored in reads them through casts. Weights (the model's casts of
 * its parameters) are stored in L; function arguments and results keep their types (the
 * calling convention does not change), and so do KV caches (rows are cast to the cache's
 * dtype before kv_cache_append). Every decision is logged: one line per function for the rule
 * upcasts (with counts per rule), one line per calibration upcast naming the op, its value, the
 * checkpoint module it computes (vlmc_precision_op_module) and the range that triggered it:
 *
 *   upcast: @encode_image: op #312 'mul' %x (visual.blocks.3.mlp) kept in f32: max |x|
 *   1.9e+06 > 16376 (f16 max / headroom 4) in calibration
 *
 * bf16-matmul (oneDNN's "fpmath mode bf16"; what llama.cpp does with bf16 weights): every
 * activation stays f32, and a linear whose weight is stored in bf16, or quantized (a dequantize:
 * its kernels multiply the small integers q, exact in bf16, and scale the group's sum), reads
 * its input rounded to bf16 (x -> cast bf16 -> cast f32). Each product is then one of two bf16 values, exact in f32,
 * so a kernel may compute the linear as a bf16 dot product with f32 accumulation (vdpbf16ps)
 * and still give the reference executor's result up to the order of the sums. The rounding
 * to bf16 is shared by the linears that read the same input (q, k and v); the cast back to
 * f32 is one per linear, so that fuse makes it that linear's prologue and its kernel sees a
 * bf16 input. Nothing can overflow (bf16 has f32's exponent): there is nothing to calibrate.
 *
 * Calibration: the reference executor runs sample inputs through the module in f32 and the
 * largest finite |x| and the inf/NaN count of each op result are recorded, keyed by function,
 * op position and result index (so the module must not change between calibration and the
 * pass). The text form, one op result per line, is what the pass's `calibration=FILE` reads:
 *
 *   # vlmc precision calibration v1
 *   @encode_image 312 linear 0 max_abs=196608 nonfinite=0
 */
#ifndef VLMC_PASSES_PRECISION_H
#define VLMC_PASSES_PRECISION_H

#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "passes/pass.h"
#include "reference/executor.h"
#include "support/status.h"
#include "support/strbuf.h"

extern const vlmc_pass_t vlmc_pass_precision;

/* ---- calibration ------------------------------------------------------------------------- */

typedef struct {
  char *func;            /* function name (owned) */
  uint32_t op_index;     /* position of the op in the function body, from 0 */
  uint32_t result_index;
  char mnemonic[32];     /* checked against the op when the ranges are used */
  double max_abs;        /* largest finite |x| over all samples */
  int64_t nonfinite;     /* inf and NaN elements over all samples */
} vlmc_precision_range_t;

typedef struct {
  vlmc_precision_range_t *ranges;
  size_t count;
  size_t capacity;
} vlmc_precision_calibration_t;

/* One call of a function: its arguments as borrowed views (vlmc_tensor_view), only read. */
typedef struct {
  const char *func;
  const vlmc_tensor_t *args;
  uint32_t num_args;
} vlmc_precision_sample_t;

void vlmc_precision_calibration_init(vlmc_precision_calibration_t *calibration);
void vlmc_precision_calibration_deinit(vlmc_precision_calibration_t *calibration);

/* Runs every sample through the reference executor in f32 and merges the ranges of every
 * float op result into `calibration`. executor_options supplies the parameters (get_param);
 * its range callback and low-precision emulation are replaced. */
vlmc_status_t vlmc_precision_calibrate(const vlmc_module_t *module,
                                       const vlmc_executor_options_t *executor_options,
                                       const vlmc_precision_sample_t *samples,
                                       size_t num_samples,
                                       vlmc_precision_calibration_t *calibration);

/* The same as a sequence of calls the caller drives (encode_image, then prefill on its result,
 * then decode on prefill's caches): one executor, every run's ranges merged into
 * `calibration`. Arguments and results follow vlmc_executor_run (owned arguments are taken). */
typedef struct vlmc_precision_calibrator_s vlmc_precision_calibrator_t;
vlmc_status_t vlmc_precision_calibrator_create(const vlmc_module_t *module,
                                               const vlmc_executor_options_t *executor_options,
                                               vlmc_precision_calibration_t *calibration,
                                               vlmc_precision_calibrator_t **out_calibrator);
vlmc_status_t vlmc_precision_calibrator_run(vlmc_precision_calibrator_t *calibrator,
                                            const char *func, vlmc_tensor_t *args,
                                            uint32_t num_args, vlmc_tensor_t *out_results,
                                            uint32_t num_results);
void vlmc_precision_calibrator_destroy(vlmc_precision_calibrator_t *calibrator);

void vlmc_precision_calibration_print(const vlmc_precision_calibration_t *calibration,
                                      vlmc_strbuf_t *out);
/* Parses the text form (into an initialised, empty calibration). Errors are located:
 * "ranges.txt:3: expected 'max_abs=<number>'". */
vlmc_status_t vlmc_precision_calibration_parse(const char *text, size_t len, const char *file,
                                               vlmc_precision_calibration_t *calibration);

/* ---- the policy -------------------------------------------------------------------------- */

typedef enum {
  VLMC_PRECISION_REF,  /* f32 everywhere */
  VLMC_PRECISION_F16,
  VLMC_PRECISION_BF16,
  VLMC_PRECISION_BF16_MATMUL, /* f32 activations; linears with bf16 or quantized weights read bf16 inputs */
} vlmc_precision_target_t;

/* Headroom. A value is kept in f32 when its calibrated |x| exceeds L's largest finite value
 * divided by the headroom, not L's largest value itself: calibration sees a few samples, and
 * an input a few times larger than any of them must still fit. The compiler and the pass use
 * VLMC_PRECISION_DEFAULT_HEADROOM (4: f16 values above 65504 / 4 = 16376 stay f32, two bits
 * of exponent to spare); 1 keeps exactly the values that overflowed in calibration. */
#define VLMC_PRECISION_DEFAULT_HEADROOM 4

typedef struct {
  vlmc_precision_target_t target;
  const vlmc_precision_calibration_t *calibration; /* NULL: rules only */
  void (*log)(void *user, const char *message);   /* one call per decision line; may be NULL */
  void *user;
  double headroom; /* see above; values below 1 (0 included) mean 1 */
} vlmc_precision_options_t;

/* The |x| above which a calibrated value stays f32: L's max / headroom (headroom below 1
 * counts as 1); infinity for VLMC_PRECISION_REF and VLMC_PRECISION_BF16_MATMUL. */
double vlmc_precision_calibration_limit(vlmc_precision_target_t target, double headroom);

/* The checkpoint module an op belongs to, for the log: the weight nearest to it among the
 * values its computation reads (breadth-first over operands, ties in operand order), named
 * without its last two components ("visual.blocks.3.mlp.up_proj.weight" ->
 * "visual.blocks.3.mlp"; a name of two components loses one: "lm_head.weight" -> "lm_head").
 * False (and "") when no weight is reached. */
bool vlmc_precision_op_module(const vlmc_op_t *op, char *out, size_t size);
void vlmc_precision_param_module(const char *param_name, char *out, size_t size);

typedef struct {
  uint64_t rule_upcasts;   /* ops computing in f32 by rule */
  uint64_t range_upcasts;  /* op results kept in f32 by calibration */
  uint64_t f32_readers;    /* ops computing in f32 because they read such a value */
  uint64_t casts_inserted;
  uint64_t bf16_matmul_inputs; /* bf16-matmul: linears reading their input rounded to bf16 */
} vlmc_precision_summary_t;

/* Applies the policy to every function (see the top of this file). out_summary may be NULL.
 * Errors when the calibration does not match the module (a range names an op that is not
 * there or has another mnemonic). */
vlmc_status_t vlmc_precision_apply(vlmc_module_t *module, const vlmc_precision_options_t *options,
                                   vlmc_precision_summary_t *out_summary);

#endif
