/* A target's kernel table: the artifact section "kernels.<target>.json" (docs/artifact.md)
 * that says which kernel of the target's code section runs each dispatch region of the
 * program, what storage it reads, and how much work it is. The schema is defined here once:
 * the code generator fills this struct and writes it (vlmc_kernel_table_to_json), the runtime
 * backend parses it and checks it against the program it will run
 * (vlmc_kernel_table_parse + vlmc_kernel_table_check) before loading any code, and the tests
 * and the fuzzer go through the same two calls.
 *
 *   {"format": 1, "abi": "...", <target fields, e.g. "cpu": "x86-64", "vector_width": 8>,
 *    "kernels": [{"symbol", "template", "inputs": [dtype...], "output", "syms": [name...],
 *                 "cost"}...],
 *    "dispatches": [{"func", "dispatch", "kernel",
 *                    "work": {"sym" (or null), "num", "den", "off", "scale"}}...]} */
#ifndef VLMC_ARTIFACT_KERNEL_TABLE_H
#define VLMC_ARTIFACT_KERNEL_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "support/status.h"
#include "support/strbuf.h"

enum {
  VLMC_KERNEL_TABLE_FORMAT = 1,
  VLMC_KERNEL_MAX_INPUTS = 256, /* inputs of one kernel */
  VLMC_KERNEL_MAX_SYMS = 16,    /* symbols one kernel reads */
};

/* A top-level field the schema does not interpret, kept for the target (cpu: "cpu", the
 * machine the code was built for, and "vector_width"). Strings and integers only. */
typedef struct {
  char *key;
  char *string; /* NULL: an integer */
  int64_t integer;
} vlmc_kernel_table_field_t;

typedef struct {
  char *symbol;        /* in the target's code section */
  char *template_name; /* the generator's template ("linear"), for profiles and inspect */
  vlmc_dtype_t *inputs; /* the storage dtype of each region input: f32, bf16, f16, i64 */
  uint32_t num_inputs;
  vlmc_dtype_t output;
  char **syms; /* the module symbols whose values the kernel gets, in order */
  uint32_t num_syms;
  int64_t cost; /* per work unit, to decide whether to spread a dispatch over threads */
  /* Filled by vlmc_kernel_table_check: the module symbol ids of `syms`. */
  uint32_t *sym_ids;
} vlmc_kernel_table_kernel_t;

/* work = scale * (sym * num / den + off); sym NULL: scale * off. */
typedef struct {
  char *sym;
  int64_t num, den, off, scale;
  uint32_t sym_id; /* filled by vlmc_kernel_table_check; 0 when sym is NULL */
} vlmc_kernel_table_work_t;

typedef struct {
  char *func;
  uint32_t dispatch; /* the region id in func */
  uint32_t kernel;   /* index into kernels */
  vlmc_kernel_table_work_t work;
  uint32_t func_index; /* filled by vlmc_kernel_table_check: module->funcs[func_index] */
} vlmc_kernel_table_dispatch_t;

typedef struct {
  char *target; /* "cpu": names the section, "kernels.cpu.json" */
  char *origin; /* what messages call the table ("m.vlmc: section 'kernels.cpu.json'") */
  int64_t format;
  char *abi; /* the kernels' calling convention, as text; NULL when the table has none */
  vlmc_kernel_table_field_t *fields;
  size_t num_fields;
  vlmc_kernel_table_kernel_t *kernels;
  size_t num_kernels, cap_kernels;
  vlmc_kernel_table_dispatch_t *dispatches;
  size_t num_dispatches, cap_dispatches;
} vlmc_kernel_table_t;

/* An empty table of the current format for `target`. */
vlmc_status_t vlmc_kernel_table_init(vlmc_kernel_table_t *table, const char *target);
void vlmc_kernel_table_deinit(vlmc_kernel_table_t *table);

/* Building (the generator; the parser uses the same calls). Each copies its strings. */
vlmc_status_t vlmc_kernel_table_set_abi(vlmc_kernel_table_t *table, const char *abi);
vlmc_status_t vlmc_kernel_table_add_string_field(vlmc_kernel_table_t *table, const char *key,
                                                 const char *value);
vlmc_status_t vlmc_kernel_table_add_int_field(vlmc_kernel_table_t *table, const char *key,
                                              int64_t value);
/* NULL when the table has no such field. */
const vlmc_kernel_table_field_t *vlmc_kernel_table_field(const vlmc_kernel_table_t *table,
                                                         const char *key);
/* `kernel`'s sym_ids are ignored (check fills them). */
vlmc_status_t vlmc_kernel_table_add_kernel(vlmc_kernel_table_t *table,
                                           const vlmc_kernel_table_kernel_t *kernel);
vlmc_status_t vlmc_kernel_table_add_dispatch(vlmc_kernel_table_t *table,
                                             const vlmc_kernel_table_dispatch_t *dispatch);

/* The section's text, format 1: one kernel and one dispatch per line. */
vlmc_status_t vlmc_kernel_table_to_json(const vlmc_kernel_table_t *table, vlmc_strbuf_t *out);

/* Parses section "kernels.<target>.json" of artifact `source` (`len` bytes, need not be
 * NUL-terminated). Every field is checked for presence, type and range; an error names the
 * section and the field ("m.vlmc: section 'kernels.cpu.json': kernels[0].inputs[1]: expected
 * f32, bf16, f16 or i64, got 'q4'"). Names are not resolved: see vlmc_kernel_table_check.
 * *out is initialized either way; the caller deinits it. */
vlmc_status_t vlmc_kernel_table_parse(const char *source, const char *target, const char *json,
                                      size_t len, vlmc_kernel_table_t *out);

/* Checks the table against the (verified) module it was made for, and resolves its names:
 * every dispatch's function and region exist, its kernel index is in range and the kernel
 * takes as many inputs as the region has, every symbol a kernel or a work count reads is in
 * the program, and every dispatch region of the program has exactly one entry ("no kernel
 * for @decode dispatch 12"): an artifact is refused when it is opened, never partly run. */
vlmc_status_t vlmc_kernel_table_check(vlmc_kernel_table_t *table, const vlmc_module_t *module);

#endif
