/* The vulkan kernel ABI's features and capabilities (vulkan_abi.h). */
#include "artifact/vulkan_abi.h"

static const char *const kFeatureNames[VLMC_VK_NUM_FEATURES] = {
    "shaderFloat16", "shaderInt64", "shaderInt16", "storageBuffer16BitAccess",
    "subgroupArithmetic", "cooperativeMatrix"};

const char *vlmc_vk_feature_name(unsigned bit) {
  return bit < VLMC_VK_NUM_FEATURES ? kFeatureNames[bit] : "?";
}

/* Each with why it is here. Anything else (Kernel, Addresses, Int8, Float64,
 * VariablePointers, ...) was never asked of the target. */
static const vlmc_vk_capability_t kCapabilities[] = {
    {0, "Matrix", 0},   /* implied by Shader; some serializers list it */
    {1, "Shader", 0},   /* every Vulkan compute module */
    {9, "Float16", VLMC_VK_FEATURE_FLOAT16},  /* f16 values (--precision f16, f16 weights) */
    {11, "Int64", VLMC_VK_FEATURE_INT64},     /* i64 storage of integer tensors (token ids) */
    {22, "Int16", VLMC_VK_FEATURE_INT16},     /* bf16 words handled as 16-bit integers */
    {61, "GroupNonUniform", 0},               /* subgroup ids, elect: the reduction ABI */
    {62, "GroupNonUniformVote", 0},           /* subgroup all/any, same scope as elect */
    {63, "GroupNonUniformArithmetic", VLMC_VK_FEATURE_SUBGROUP_ARITH}, /* subgroup_reduce */
    {64, "GroupNonUniformBallot", 0},         /* broadcast of a subgroup's first lane */
    {4433, "StorageBuffer16BitAccess", VLMC_VK_FEATURE_STORAGE16}, /* bf16/f16 buffers */
    {6022, "CooperativeMatrixKHR", VLMC_VK_FEATURE_COOP_MATRIX}, /* the coop variants */
};

const vlmc_vk_capability_t *vlmc_vk_capabilities(size_t *count) {
  *count = sizeof kCapabilities / sizeof kCapabilities[0];
  return kCapabilities;
}

const vlmc_vk_capability_t *vlmc_vk_capability(uint32_t id) {
  for (size_t i = 0; i < sizeof kCapabilities / sizeof kCapabilities[0]; ++i)
    if (kCapabilities[i].id == id) return &kCapabilities[i];
  return NULL;
}
