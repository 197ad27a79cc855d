/* The vulkan kernel ABI's device features and SPIR-V capabilities (docs/vulkan.md), defined
 * once for both sides of it: the vulkan target reads a module's capabilities to list the
 * features a kernel needs in the table (codegen/targets/vulkan/lower.c), and the vulkan
 * backend refuses any capability not listed here, or one whose feature the kernel does not
 * list, before a driver sees the module (runtime/backends/vulkan/spirv_check.c). */
#ifndef VLMC_ARTIFACT_VULKAN_ABI_H
#define VLMC_ARTIFACT_VULKAN_ABI_H

#include <stddef.h>
#include <stdint.h>

/* The Vulkan features a kernel may list, as bits; their table names by bit index. */
typedef enum {
  VLMC_VK_FEATURE_FLOAT16 = 1u << 0,   /* shaderFloat16 */
  VLMC_VK_FEATURE_INT64 = 1u << 1,     /* shaderInt64 */
  VLMC_VK_FEATURE_INT16 = 1u << 2,     /* shaderInt16 */
  VLMC_VK_FEATURE_STORAGE16 = 1u << 3, /* storageBuffer16BitAccess */
  VLMC_VK_FEATURE_SUBGROUP_ARITH = 1u << 4, /* subgroupArithmetic (a property of compute) */
  /* cooperativeMatrix (VK_KHR_cooperative_matrix): the device offers the extension and its
   * feature, lists 16x16x16 f16 x f16 + f32 at subgroup scope, and has subgroups of 32 (what
   * the cooperative-matrix kernels assume: runtime/backends/vulkan/device.c) */
  VLMC_VK_FEATURE_COOP_MATRIX = 1u << 5,
  VLMC_VK_NUM_FEATURES = 6,
} vlmc_vk_feature_t;

/* A split kernel's combine stage runs at most this many workgroups per work unit
 * (`combine_groups`, docs/vulkan.md "Split kernels"). */
enum { VLMC_VK_MAX_COMBINE_GROUPS = 1024 };

/* The feature's name as the table spells it ("shaderFloat16"), by bit index; "?" past them. */
const char *vlmc_vk_feature_name(unsigned bit);

/* A capability a vlmc kernel may declare, with the features it needs (0: none beyond Vulkan
 * 1.1 compute). */
typedef struct {
  uint32_t id;      /* the SPIR-V Capability enumerant */
  const char *name; /* as SPIR-V spells it */
  uint32_t feature; /* vlmc_vk_feature_t bits */
} vlmc_vk_capability_t;

/* The allowed capabilities, *count of them, in enumerant order. */
const vlmc_vk_capability_t *vlmc_vk_capabilities(size_t *count);
/* The allowed capability `id`, or NULL (never asked of the target: refused). */
const vlmc_vk_capability_t *vlmc_vk_capability(uint32_t id);

#endif
