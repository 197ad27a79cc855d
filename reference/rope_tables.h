/* The two tables of a rope op, defined once for the reference executor (reference/
 * exec_rope.c) and the cpu kernels (codegen/targets/cpu/kernel_rope.c), so that a kernel's angles are
 * the reference's to the bit. Semantics: the header comment of reference/exec_rope.c. */
#ifndef VLMC_REFERENCE_ROPE_TABLES_H
#define VLMC_REFERENCE_ROPE_TABLES_H

#include <stdint.h>

#include "ir/ir.h"
#include "support/status.h"

/* inv_freq[j] for j < rotary / 2, in f32 as transformers computes it. */
void vlmc_rope_frequency_table(const char *layout, double theta, int64_t rotary, float *inv_freq);

/* plane[j] for j < half: the op's `planes` attribute when present, else the layout's rule
 * (`sections` for the mrope layouts). Errors name the attribute and the expected value. */
vlmc_status_t vlmc_rope_plane_table(const vlmc_op_t *op, const char *layout, int64_t half,
                                    int64_t *plane);

#endif
