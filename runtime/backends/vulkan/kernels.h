/* The vulkan target's fields of a kernel table (docs/vulkan.md, "Table fields") read and
 * checked: presence, types, ranges, the features list, and each kernel's SPIR-V walked
 * (spirv_check.h). Shared by `check` (vlmc inspect --verify, no device) and `open`. */
#ifndef VLMC_RUNTIME_BACKENDS_VULKAN_KERNELS_H
#define VLMC_RUNTIME_BACKENDS_VULKAN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "artifact/kernel_table.h"
#include "artifact/vulkan_abi.h" /* the features (vlmc_vk_feature_t) and capabilities */
#include "support/status.h"


/* Every feature name, comma-separated, for messages ("shaderFloat16, shaderInt64, ..."). */
void vlmc_vk_feature_names(char *out, size_t size);
/* names[0 .. count) joined by ", " into out (truncated to size), for messages. */
void vlmc_vk_join_names(const char *const *names, size_t count, char *out, size_t size);

enum { VLMC_VK_MAX_PUSH_WORDS = 32, VLMC_VK_MAX_INVOCATIONS = 1024 };

typedef struct {
  const char *symbol, *template_name; /* borrowed from the table */
  uint32_t spirv_offset, spirv_size;
  uint32_t workgroup[3];
  uint32_t units_per_group;
  uint32_t push_words;
  uint32_t shared_bytes;
  uint32_t features; /* vlmc_vk_feature_t bits */
  uint32_t spirv_minor; /* the module's SPIR-V 1.x */
  /* A split kernel (docs/vulkan.md, "Split kernels"; split 0: one stage): stage 1 (the module
   * above) runs work x split units, each writing scratch_floats floats to the scratch buffer
   * at binding n + 1; then the combine module (entry "<symbol>_combine", LocalSize
   * [combine_workgroup_x, 1, 1], combine_groups workgroups per work unit) writes the output. */
  uint32_t split, scratch_floats;
  uint32_t combine_offset, combine_size, combine_workgroup_x, combine_shared_bytes;
  uint32_t combine_groups;
  uint32_t combine_minor;
} vlmc_vk_kernel_info_t;

enum { VLMC_VK_MAX_SPLIT = 1024, VLMC_VK_MAX_SCRATCH_FLOATS = 1 << 20 };

/* Checks the table's top-level fields (abi) and every kernel's target fields against the
 * section `spirv` (`spirv_size` bytes), walking each module. out (num_kernels entries,
 * malloc'd by the caller) gets the fields; strings are borrowed from the table. */
vlmc_status_t vlmc_vk_kernels_read(const char *source, const vlmc_kernel_table_t *table,
                                   const void *spirv, size_t spirv_size,
                                   vlmc_vk_kernel_info_t *out);

#endif
