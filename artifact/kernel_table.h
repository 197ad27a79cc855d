/* A target's kernel table: the artifact section "kernels.<target>.json" (docs/artifact.md)
 * that says which kernel of the target's code section runs each dispatch region of the
 * program, what storage it reads, and how much work it is. The schema is defined here once:
 * the code generator fills this struct and writes it (vlmc_kernel_table_to_json), the runtime
 * backend parses it and checks it against the program it will run
 * (vlmc_kernel_table_parse + vlmc_kernel_table_check) before loading any code, and the tests
 * and the fuzzer go through the same two calls.
 *
 *   {"format": 2, "abi": "...", <target fields, e.g. "cpu": "x86-64", "vector_width": 8>,
 *    "kernels": [{"symbol", "template", "signature": "16 hex digits", "inputs": [dtype...],
 *                 "output", "syms": [name...], "cost", "target": {<target fields>} (optional),
 *                 "variant_of": <kernel index>, "for_devices": "cpu" (both optional)}...],
 *    "dispatches": [{"func", "dispatch", "kernel",
 *                    "work": {"sym" (or null), "num", "den", "off", "scale"}}...]}
 *
 * Nothing in a table is taken on trust: every field that the program determines is
 * recomputed from the program and compared (vlmc_kernel_table_check): a kernel's signature
 * (vlmc_dispatch_signature of the regions it serves), its input and output storage
 * (vlmc_kernel_input_storage / _output_storage) and each dispatch's work count
 * (vlmc_kernel_work, by template). Format 1 (no signatures; work counts the checker could not
 * recompute) is refused with a message to recompile.
 *
 * Variants. A kernel may be a variant of a main kernel: the same template, signature, inputs
 * and output (it serves the same regions, with the same work count), written for one class of
 * device ("for_devices": "cpu" is a Vulkan device that is a CPU, lavapipe: it wants uniform
 * loads and no barriers where a GPU wants workgroup-memory tiles). Dispatches name main kernels
 * only; the backend runs, for each main kernel, the first of its variants made for the device's
 * class that the device can run, else the main kernel. A runtime that knows nothing of variants
 * runs the main kernels, which are complete on their own. */
#ifndef VLMC_ARTIFACT_KERNEL_TABLE_H
#define VLMC_ARTIFACT_KERNEL_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/dispatch.h"
#include "ir/ir.h"
#include "support/status.h"
#include "support/strbuf.h"

enum {
  /* 2: kernels carry their region signature; the work counts follow vlmc_kernel_work. */
  VLMC_KERNEL_TABLE_FORMAT = 2,
  VLMC_KERNEL_MAX_INPUTS = 256, /* inputs of one kernel */
  VLMC_KERNEL_MAX_SYMS = 16,    /* symbols one kernel reads */
  /* Output features per work unit of the "linear" template (its loops and the work rule). */
  VLMC_KERNEL_LINEAR_UNIT = 4,
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
  char *template_name; /* the generator's template ("linear"): picks the work rule */
  uint64_t signature;  /* vlmc_dispatch_signature of every region the kernel serves */
  vlmc_dtype_t *inputs; /* the storage dtype of each region input: f32, bf16, f16, i64 */
  uint32_t num_inputs;
  vlmc_dtype_t output;
  char **syms; /* the module symbols whose values the kernel gets, in order */
  uint32_t num_syms;
  int64_t cost; /* per work unit, to decide whether to spread a dispatch over threads */
  /* The target's own fields ("target": {...} in the JSON: the vulkan target's SPIR-V range,
   * entry point, workgroup size, ...). Strings and integers only; the schema does not
   * interpret them, the target's backend checks them. */
  vlmc_kernel_table_field_t *fields;
  size_t num_fields;
  /* Filled by vlmc_kernel_table_check: the module symbol ids of `syms`. */
  uint32_t *sym_ids;
  /* A variant of kernel `variant_of` (a main kernel) for the device classes `for_devices`
   * (comma-separated names: "cpu", "gpu"); zero-initialized: a main kernel. */
  bool is_variant;
  uint32_t variant_of;
  char *for_devices;
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
/* A kernel's own target fields (before add_kernel copies the kernel; the kernel owns them:
 * free a local one's with vlmc_kernel_table_kernel_fields_free). */
vlmc_status_t vlmc_kernel_table_kernel_add_string_field(vlmc_kernel_table_kernel_t *kernel,
                                                        const char *key, const char *value);
vlmc_status_t vlmc_kernel_table_kernel_add_int_field(vlmc_kernel_table_kernel_t *kernel,
                                                     const char *key, int64_t value);
void vlmc_kernel_table_kernel_fields_free(vlmc_kernel_table_kernel_t *kernel);
/* NULL when the kernel has no such field. */
const vlmc_kernel_table_field_t *vlmc_kernel_table_kernel_field(
    const vlmc_kernel_table_kernel_t *kernel, const char *key);
/* `kernel`'s sym_ids are ignored (check fills them); its fields are copied. */
vlmc_status_t vlmc_kernel_table_add_kernel(vlmc_kernel_table_t *table,
                                           const vlmc_kernel_table_kernel_t *kernel);
vlmc_status_t vlmc_kernel_table_add_dispatch(vlmc_kernel_table_t *table,
                                             const vlmc_kernel_table_dispatch_t *dispatch);

/* The section's text, the current format: one kernel and one dispatch per line. */
vlmc_status_t vlmc_kernel_table_to_json(const vlmc_kernel_table_t *table, vlmc_strbuf_t *out);

/* Parses section "kernels.<target>.json" of artifact `source` (`len` bytes, need not be
 * NUL-terminated). Every field is checked for presence, type and range; an error names the
 * section and the field ("m.vlmc: section 'kernels.cpu.json': kernels[0].inputs[1]: expected
 * f32, bf16, f16 or i64, got 'q4'"). Names are not resolved: see vlmc_kernel_table_check.
 * *out is initialized either way; the caller deinits it. */
vlmc_status_t vlmc_kernel_table_parse(const char *source, const char *target, const char *json,
                                      size_t len, vlmc_kernel_table_t *out);

/* Checks the table against the (verified) module it was made for, and resolves its names:
 * every dispatch's function and region exist, its kernel index is in range, the kernel was
 * made for a region of the same signature, takes exactly the region's inputs (count and
 * storage dtypes) and writes its output's storage, the work count is the one the template's
 * rule gives for the region ("@decode dispatch 12: work 4096 x 1, the region implies 128 x
 * 1"), every symbol a kernel or a work count reads is in the program, and every dispatch
 * region of the program has exactly one entry ("no kernel for @decode dispatch 12"), every
 * variant matches its main kernel and no dispatch names a variant: an
 * artifact is refused when it is opened, never partly run. */
vlmc_status_t vlmc_kernel_table_check(vlmc_kernel_table_t *table, const vlmc_module_t *module);

/* Whether variant k's for_devices names `device_class` (false for a main kernel). */
bool vlmc_kernel_table_variant_is_for(const vlmc_kernel_table_kernel_t *k,
                                      const char *device_class);

/* A checked dispatch's work units (without its scale) as a dim expression over the module's
 * symbols (sym_id is filled by vlmc_kernel_table_check). */
vlmc_dim_t vlmc_kernel_table_work_dim(const vlmc_kernel_table_work_t *work);

/* ---- the rules a table must follow, shared by the code generators and the check ---- */

/* The storage a kernel reads region input v in: a bf16 / f16 parameter as it is stored, a
 * u32 parameter (dequantize's packed words) as stored, any other float value as f32, other
 * integers and bools as i64 (the executor's conventions). */
vlmc_dtype_t vlmc_kernel_input_storage(const vlmc_value_t *v);
/* The storage a kernel writes an output of v's type in: f32 or i64. */
vlmc_dtype_t vlmc_kernel_output_storage(const vlmc_value_t *v);
/* The template a region's anchor (vlmc_dispatch_anchor_index) is written with: "linear",
 * "elementwise", "copy" (a lone reshape), ...; NULL when no template takes it. */
const char *vlmc_kernel_template_for(const vlmc_dispatch_region_t *region);
/* A dispatch's work count: `units` times `scale` work units, as template `template_name`
 * splits the region's output (one unit per output element, per row, per block of
 * VLMC_KERNEL_LINEAR_UNIT features, per (query row, kv head) ...). Refused, by name, when
 * the template does not take this region or the count is not one dim expression. */
vlmc_status_t vlmc_kernel_work(const vlmc_dispatch_region_t *region, const char *template_name,
                               vlmc_dim_t *units, int64_t *scale);

#endif
