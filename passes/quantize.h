/* The quantize pass's naming contract (passes/quantize.c): the parameters it adds hold no
 * checkpoint tensor; their names say how to make them from one, so that the compiler can write
 * their data into the artifact (codegen/compile.c) and a dumped program reads back with the
 * same meaning. Part `packed` (u32 words), `scales` or `biases` (f16) of checkpoint tensor
 * SOURCE quantized at B bits in groups of G is named "SOURCE.vlmc-qBgG.PART", e.g.
 * "model.layers.0.mlp.up_proj.weight.vlmc-q4g64.packed". */
#ifndef VLMC_PASSES_QUANTIZE_H
#define VLMC_PASSES_QUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
  VLMC_QUANT_PACKED,
  VLMC_QUANT_SCALES,
  VLMC_QUANT_BIASES,
} vlmc_quant_part_t;

/* The name of `part` of `source` at `bits` and `group`; false when it does not fit `cap`. */
bool vlmc_quantized_param_name(const char *source, int64_t bits, int64_t group,
                               vlmc_quant_part_t part, char *out, size_t cap);
/* The inverse: false when `name` is not such a name (or its source does not fit `cap`). */
bool vlmc_quantized_param_parse(const char *name, char *source, size_t cap, int64_t *bits,
                                int64_t *group, vlmc_quant_part_t *part);

#endif
