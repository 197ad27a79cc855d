/* The run half of a kernel conformance case, shared by `vlmc kernel-test` (which compiles the
 * case first) and `vlmc-kernel-check` (the runtime-only tool that runs cases saved by
 * `vlmc kernel-test --save DIR` on a machine without LLVM/MLIR, such as the GPU machine).
 *
 * A case is a module whose regions a target compiled (the pipeline tail already ran), the
 * sections the target generated for it, its directives (the comment lines of the test file,
 * `$N` substituted: tools/cmd_kernel_test.c lists them) and its size N. Running it: random
 * parameters and arguments, the function on the reference executor, then on the backend of
 * the target's name with the generated kernels, once per kernel-variant class the table has
 * ("main", then "cpu", "gpu", ...), every result compared. Links the runtime only. */
#ifndef VLMC_TOOLS_KERNEL_CHECK_H
#define VLMC_TOOLS_KERNEL_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "support/status.h"

enum { VLMC_KCHECK_MAX_SIZES = 16, VLMC_KCHECK_MAX_ARGS = 64, VLMC_KCHECK_MAX_SYMS = 16 };

typedef struct {
  char name[64];
  char kind[64]; /* uniform, ints, segments, permutation */
  double lo, hi;
} vlmc_kcheck_arg_t;

typedef struct {
  char target[32]; /* the target under test: `tolerance T:` and `variants T:` pick it */
  /* The target whose kernels the target under test translates ("vulkan" for metal; "" for
   * none): its `tolerance T:`, `template T:` and `variants T:` apply too, the target's own
   * winning. A saved case records it as `kernels-from: T`. */
  char kernels_from[32];
  int64_t sizes[VLMC_KCHECK_MAX_SIZES];
  int num_sizes;
  vlmc_kcheck_arg_t args[VLMC_KCHECK_MAX_ARGS];
  int num_args;
  char sym_names[VLMC_KCHECK_MAX_SYMS][64];
  char sym_values[VLMC_KCHECK_MAX_SYMS][64];
  int num_syms;
  double tolerance;
  double target_tolerance; /* `tolerance T:` for the target under test; < 0: none */
  char required_template[64];
  char variants[64]; /* `variants T:` for the target under test; "": every variant */
  /* How closely each came from the target under test: 0 not at all (`template:`), 1 its
   * kernels_from, 2 itself; a closer directive wins. */
  int tolerance_rank, template_rank, variants_rank;
  int64_t case_size; /* `case-size: N` (a saved case's N); 0: none */
  uint64_t case_seed; /* `case-seed: HEX` (the random state it was saved with); 0: none */
} vlmc_kcheck_spec_t;

/* The random state the next case's inputs start from (a saved case records it, so that
 * vlmc-kernel-check runs it on the same inputs kernel-test did). */
uint64_t vlmc_kcheck_seed(void);
/* The spec before a file's directives: no args or syms, tolerance 1e-5. */
void vlmc_kcheck_spec_init(vlmc_kcheck_spec_t *s, const char *target, const char *kernels_from);
/* Reads the directives (comment lines) of text into s. */
void vlmc_kcheck_parse_spec(const char *text, vlmc_kcheck_spec_t *s);
/* text with every `$N` replaced by n (malloc'd; NULL when out of memory). */
char *vlmc_kcheck_substitute_n(const char *text, int64_t n);

/* A section of the case, as the backend finds it in an artifact (NULL when absent). */
typedef const void *(*vlmc_kcheck_section_fn)(void *ctx, const char *name, size_t *out_size);

typedef struct {
  double worst;   /* relative error */
  double max_ref;
  char templates[256]; /* the templates the kernel table names: "linear_tiles,rms_norm" */
  char runs[160];      /* the kernel variants run: "main,cpu"; "" when the table has none */
  char worst_run[32];  /* the run with the worst error */
  char used[160];      /* per variant class, the kernels that ran as its variant: "cpu 1, gpu 0"
                          (0: none fit the device, the main kernels ran) */
  /* Where that run's worst element is (the flat index into result `worst_result`), the two
   * values there, and how many elements of the results differed at all in it: what a failing
   * line says, so a kernel that writes nothing (NaN poison) or one wrong tile reads apart. */
  int64_t worst_index, num_differing, num_elements;
  uint32_t worst_result;
  double worst_ref, worst_got;
} vlmc_kcheck_outcome_t;

/* Runs the case (module m after its target's pipeline tail, sections through `section`) at
 * size n. Errors name the backend run that failed; a `template:` directive the table does not
 * satisfy is an error. */
vlmc_status_t vlmc_kcheck_run(const char *path, const vlmc_module_t *m, const vlmc_kcheck_spec_t *s,
                              int64_t n, vlmc_kcheck_section_fn section, void *section_ctx,
                              vlmc_kcheck_outcome_t *out);

/* Prints the case's line ("ok   PATH N=...: ..." or "FAIL PATH N=...: ...") on stdout and
 * returns 1 for a failure (st, which it frees, or an error over the tolerance), else 0. */
int vlmc_kcheck_report(const char *path, int64_t n, vlmc_status_t st, const vlmc_kcheck_spec_t *s,
                       const vlmc_kcheck_outcome_t *o);

#endif
