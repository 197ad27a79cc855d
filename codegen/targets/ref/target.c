/* The ref target: the program only. vlmc-run's ref backend interprets it with the reference
 * executor (reference/executor.h), so it needs no kernels, no regions and no particular
 * precision: it takes whatever the precision pass made of the program. */
#include "codegen/target.h"

const vlmc_target_t vlmc_target_ref = {
    .name = "ref",
    .summary = "the program only, for vlmc-run's reference backend (no kernels)",
    .precisions = "f32,f16,bf16,bf16-matmul",
    .precision_note = "",
    .default_precision = NULL,
    .pipeline_tail = NULL,
    /* No kernel entries: vlmc_target_generate gives it no sections. */
};
