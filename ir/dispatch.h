/* Dispatch regions: the fuse pass groups ops into regions (op->dispatch = N), each of which a
 * backend runs as one generated kernel. This is the one place that says what a region is, so
 * that the compiler that generates a kernel and the runtime that calls it agree on its inputs.
 *
 * A region of a function is the ops with the same nonzero `dispatch` number. Rules (checked by
 * vlmc_dispatch_regions, and so by the verifier):
 *   - members are compute ops: not param, constant, tap, return, nor HOST index ops (those
 *     stay host steps; a param or constant is an input);
 *   - the root, the last member in body order, has exactly one result: the region's output;
 *   - every other member's results are used by members of the same region only.
 * Inputs are the values members read that no member defines, in order of first use (member
 * order, then operand order), each listed once. */
#ifndef VLMC_IR_DISPATCH_H
#define VLMC_IR_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "support/status.h"

typedef struct {
  uint32_t id;                 /* the `dispatch` number */
  const vlmc_op_t **ops;       /* members in body order; ops[num_ops - 1] is the root */
  uint32_t num_ops;
  const vlmc_value_t **inputs; /* values from outside the region, in first-use order */
  uint32_t num_inputs;
} vlmc_dispatch_region_t;

typedef struct {
  vlmc_dispatch_region_t *regions; /* in order of their roots in the body */
  uint32_t num_regions;
  void *storage_;
} vlmc_dispatch_set_t;

/* Finds and checks func's regions; errors are located at the offending op. */
vlmc_status_t vlmc_dispatch_regions(const vlmc_func_t *func, vlmc_dispatch_set_t *out);
void vlmc_dispatch_set_free(vlmc_dispatch_set_t *set);

/* The region numbered `id`, or NULL. */
const vlmc_dispatch_region_t *vlmc_dispatch_find(const vlmc_dispatch_set_t *set, uint32_t id);

/* The region's output: its root's result. */
static inline const vlmc_value_t *vlmc_dispatch_output(const vlmc_dispatch_region_t *r) {
  return &r->ops[r->num_ops - 1]->results[0];
}

/* Live interval of each region's output, in op positions of the body (0-based): from its
 * root's position to the last position that reads it, where a region member reads its
 * operands at its root's position (a kernel runs at its root). escapes[r]: the output is
 * returned by the function (it outlives the call). Arrays have set->num_regions entries. */
vlmc_status_t vlmc_dispatch_intervals(const vlmc_func_t *func, const vlmc_dispatch_set_t *set,
                                      uint32_t *first, uint32_t *last, bool *escapes);

/* Checks the memory plan's slots (op->slot): only region roots have one, no escaping output
 * has one, and two outputs in the same slot are never live at the same position. */
vlmc_status_t vlmc_dispatch_check_slots(const vlmc_func_t *func, const vlmc_dispatch_set_t *set);

/* Whether an op kind may be a region member (see the rules above). */
bool vlmc_dispatch_may_contain(vlmc_op_kind_t kind);

/* ---- what a kernel of a region is, for the code generators and the kernel-table check ---- */

/* A prologue op: a reshape or a widening float cast to f32, which a kernel folds into its
 * loads (a bf16 weight is read in bf16 and widened as it loads). */
bool vlmc_dispatch_is_prologue_op(const vlmc_op_t *op);
/* The region input that v is read from through prologue members before `anchor_index`, or
 * -1 when v is neither an input nor such a prologue result. */
int vlmc_dispatch_source_input(const vlmc_dispatch_region_t *region, uint32_t anchor_index,
                               const vlmc_value_t *v);
/* The dequantize member (before `anchor_index`) that v is the result of, when it reads its
 * packed words, scales and biases as region inputs (through prologue members): a kernel
 * dequantizes v's elements as it loads them. NULL otherwise. */
const vlmc_op_t *vlmc_dispatch_dequantize_source(const vlmc_dispatch_region_t *region,
                                                 uint32_t anchor_index, const vlmc_value_t *v);
/* A norm prologue (made by fuse{norm-prologue=true}): an rms_norm member whose operands are
 * read from inputs through prologue members, whose result reaches operand 0 of a later linear
 * member through norm-chain members (reshapes and float casts, narrowing ones included: the
 * rounding of an f16 program), each used once. The kernel computes the norm's row statistic
 * first and the normed (and rounded) elements as it loads them. */
enum { VLMC_DISPATCH_MAX_NORM_CHAIN = 8 };
/* A reshape or a cast between (unquantized) float types. */
bool vlmc_dispatch_is_norm_chain_op(const vlmc_op_t *op);
/* The norm prologue (before `anchor_index`) that v is read from, with the chain ops from its
 * result to v in the order they apply (chain[0] reads the norm's result; at most
 * VLMC_DISPATCH_MAX_NORM_CHAIN), or NULL. */
const vlmc_op_t *vlmc_dispatch_norm_source(const vlmc_dispatch_region_t *region,
                                           uint32_t anchor_index, const vlmc_value_t *v,
                                           const vlmc_op_t **chain, uint32_t *chain_len);
/* The index in region->ops of the anchor: the first member that is not a prologue op of an
 * input (nor a dequantize of inputs, nor part of a norm prologue); the root when every member
 * is one. Its kind picks the kernel template. */
uint32_t vlmc_dispatch_anchor_index(const vlmc_dispatch_region_t *region);
/* For a region that is a kv_cache_append without epilogue (the anchor is the root): the
 * region input it reads its cache from directly (not through a prologue), which a backend
 * may grow in place; -1 for any other region. */
int vlmc_dispatch_append_cache_input(const vlmc_dispatch_region_t *region);
/* The element count of a type as one dim expression (the symbolic dim times the static
 * rest); false when it has two symbolic dims. */
bool vlmc_type_count_dim(const vlmc_type_t *type, vlmc_dim_t *out);
/* XXH64 of a normalized print of the region: each member's op kind, attributes and result
 * types, its operands as member or input positions, and each input's type and whether it is
 * a parameter. Value and parameter names are left out, so the same layer shape 36 times
 * over has one signature; any difference a kernel could depend on changes it. A kernel is
 * shared only between regions of equal signatures, and a kernel table records its kernels'
 * signatures so that a dispatch pointing at another region's kernel is refused. */
uint64_t vlmc_dispatch_signature(const vlmc_module_t *module,
                                 const vlmc_dispatch_region_t *region);

#endif
