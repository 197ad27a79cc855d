/* The precision pass's C interface (the pass itself is `vlmc_pass_precision`, option
 * `target=ref|f16|bf16` and `calibration=FILE`): the per-target dtype policy, and the
 * calibration that feeds it.
 *
 * Policy. The model computes in f32. For target `ref` nothing changes. For `f16` / `bf16` (call
 * it L) every float activation is *stored* in L, and each op *computes* in L unless a rule or
 * the calibration says f32:
 *   - rules (compute in f32, result stored in L): linear and matmul (f32 accumulation),
 *     rms_norm / layer_norm (norm statistics), softmax, attention and window_attention
 *     (scores and softmax), rope (the rotary angles);
 *   - calibration (the value stays f32, and so does the op computing it): every op result whose
 *     range in an f32 reference run leaves L's finite range (|x| > 65504 for f16) or is inf /
 *     NaN. An op reading such a value computes in f32 too (casting it down would overflow
 *     again); nothing else is upcast.
 * Storage and compute are expressed with dtypes and casts only: an op computing in f32 whose
 * result is stored in L is followed by a cast to L that every use reads; an op computing in a
 * dtype its operands are not stored in reads them through casts. Weights (the model's casts of
 * its parameters) are stored in L; function arguments and results keep their types (the
 * calling convention does not change), and so do KV caches (rows are cast to the cache's
 * dtype before kv_cache_append). Every decision is logged: one line per function for the rule
 * upcasts (with counts per rule), one line per calibration upcast naming the op, its value and
 * the range that triggered it.
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
} vlmc_precision_target_t;

typedef struct {
  vlmc_precision_target_t target;
  const vlmc_precision_calibration_t *calibration; /* NULL: rules only */
  void (*log)(void *user, const char *message);   /* one call per decision line; may be NULL */
  void *user;
} vlmc_precision_options_t;

typedef struct {
  uint64_t rule_upcasts;   /* ops computing in f32 by rule */
  uint64_t range_upcasts;  /* op results kept in f32 by calibration */
  uint64_t f32_readers;    /* ops computing in f32 because they read such a value */
  uint64_t casts_inserted;
} vlmc_precision_summary_t;

/* Applies the policy to every function (see the top of this file). out_summary may be NULL.
 * Errors when the calibration does not match the module (a range names an op that is not
 * there or has another mnemonic). */
vlmc_status_t vlmc_precision_apply(vlmc_module_t *module, const vlmc_precision_options_t *options,
                                   vlmc_precision_summary_t *out_summary);

#endif
