/* The kernels of one target for a module, deduplicated, and the table that says which kernel
 * runs each dispatch (artifact/kernel_table.h). Shared by the targets that write kernels
 * through codegen/kernel_emit.h (cpu, vulkan): a region's kernel text is written with a
 * placeholder name, regions with the same text and the same signature share one kernel (the
 * same layer shape, 36 times over, is one kernel), and each new kernel is named "vkN" for
 * the target to lower. */
#ifndef VLMC_CODEGEN_KERNEL_SET_H
#define VLMC_CODEGEN_KERNEL_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "artifact/kernel_table.h"
#include "codegen/kernel_emit.h"
#include "ir/dispatch.h"
#include "ir/ir.h"
#include "support/status.h"

/* The name a kernel's text calls its function before it is interned. */
#define VLMC_KERNEL_SET_PLACEHOLDER "vlmc_kernel"

typedef struct {
  char *text;         /* MLIR with the placeholder name */
  uint64_t hash;
  uint64_t signature; /* vlmc_dispatch_signature: kernels are shared only at equal ones */
  char *template_name;
  vlmc_dtype_t inputs[VLMC_IR_MAX_OPERANDS * 4];
  uint32_t num_inputs;
  vlmc_dtype_t output;
  char *syms[VLMC_KERNEL_EMIT_MAX_SYMS];
  uint32_t num_syms;
  int64_t cost;
  /* A variant of kernel variant_of for the devices for_devices (artifact/kernel_table.h). */
  bool is_variant;
  uint32_t variant_of;
  char for_devices[32];
} vlmc_kernel_set_kernel_t;

typedef struct {
  const vlmc_module_t *module;
  vlmc_kernel_set_kernel_t *kernels;
  size_t num_kernels, cap_kernels;
  vlmc_kernel_table_t table; /* the dispatches as they are added; kernels by the target */
  size_t num_dispatches;
} vlmc_kernel_set_t;

vlmc_status_t vlmc_kernel_set_init(vlmc_kernel_set_t *set, const vlmc_module_t *module,
                                   const char *target);
void vlmc_kernel_set_deinit(vlmc_kernel_set_t *set);

/* Describes the kernel a template has written for region r (its text, `text`, taken; the
 * emitter e gives the template name, syms and cost) and the region's work count by the
 * table's rule (vlmc_kernel_work). On error k is left empty. */
vlmc_status_t vlmc_kernel_set_describe(const vlmc_kernel_set_t *set, const vlmc_kernel_emit_t *e,
                                       const vlmc_dispatch_region_t *r, vlmc_strbuf_t *text,
                                       vlmc_kernel_set_kernel_t *k, vlmc_dim_t *work,
                                       int64_t *work_scale);
/* The index of an identical kernel already in the set for a region of the same signature
 * (k is freed, *out_new false), or of k, added (taken, *out_new true). */
vlmc_status_t vlmc_kernel_set_intern(vlmc_kernel_set_t *set, vlmc_kernel_set_kernel_t *k,
                                     size_t *out_index, bool *out_new);
/* Adds k (taken) as a variant of main kernel `main_index` for the device classes
 * `for_devices` ("cpu"): never shared, never named by a dispatch. */
vlmc_status_t vlmc_kernel_set_add_variant(vlmc_kernel_set_t *set, vlmc_kernel_set_kernel_t *k,
                                          size_t main_index, const char *for_devices,
                                          size_t *out_index);
/* Kernel text `src` (written with the placeholder name) with its function named `name` plus
 * `suffix`; malloc'd, NULL when out of memory. */
char *vlmc_kernel_text_named(const char *src, const char *name, const char *suffix);
/* The text of kernel `index` with its function named `name` plus `suffix` ("vk3" + "_body");
 * malloc'd, NULL when out of memory. */
char *vlmc_kernel_set_named_text(const vlmc_kernel_set_t *set, size_t index, const char *name,
                                 const char *suffix);
/* The table entry of region `id` of `func`: kernel `kernel`, `work` units times `scale`. */
vlmc_status_t vlmc_kernel_set_add_dispatch(vlmc_kernel_set_t *set, const vlmc_func_t *func,
                                           uint32_t id, size_t kernel, vlmc_dim_t work,
                                           int64_t scale);
/* The table's entry for kernel `index`, named "vkN" into symbol (64 bytes), borrowing the
 * set's strings; a target adds its fields, then vlmc_kernel_table_add_kernel. */
vlmc_kernel_table_kernel_t vlmc_kernel_set_table_kernel(const vlmc_kernel_set_t *set, size_t index,
                                                        char symbol[64]);
/* "@func: dispatch 3 (anchor 'linear'): " before st. */
vlmc_status_t vlmc_kernel_set_region_error(const vlmc_func_t *func, const vlmc_dispatch_region_t *r,
                                           const vlmc_op_t *anchor, vlmc_status_t st);
void vlmc_kernel_set_kernel_free(vlmc_kernel_set_kernel_t *k);

#endif
