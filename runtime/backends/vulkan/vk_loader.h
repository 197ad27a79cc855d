/* The Vulkan loader, opened at run time (dlopen of libvulkan.so.1, or $VLMC_VULKAN_LOADER):
 * vlmc-run never links libvulkan, so a machine without Vulkan still runs the other backends.
 * Every vk* function the backend calls is a pointer here, fetched through
 * vkGetInstanceProcAddr / vkGetDeviceProcAddr. */
#ifndef VLMC_RUNTIME_BACKENDS_VULKAN_VK_LOADER_H
#define VLMC_RUNTIME_BACKENDS_VULKAN_VK_LOADER_H

#include <stdbool.h>

#include <vulkan/vulkan.h>

#include "support/status.h"

/* Before an instance exists. vkEnumerateInstanceVersion is NULL on a Vulkan 1.0 loader. */
#define VLMC_VK_GLOBAL_FNS(X) \
  X(vkCreateInstance)         \
  X(vkEnumerateInstanceVersion)

#define VLMC_VK_INSTANCE_FNS(X)                 \
  X(vkDestroyInstance)                          \
  X(vkEnumeratePhysicalDevices)                 \
  X(vkGetPhysicalDeviceProperties)              \
  X(vkGetPhysicalDeviceProperties2)             \
  X(vkGetPhysicalDeviceFeatures2)               \
  X(vkGetPhysicalDeviceQueueFamilyProperties)   \
  X(vkGetPhysicalDeviceMemoryProperties)        \
  X(vkEnumerateDeviceExtensionProperties)       \
  X(vkCreateDevice)                             \
  X(vkGetDeviceProcAddr)

#define VLMC_VK_DEVICE_FNS(X)       \
  X(vkDestroyDevice)                \
  X(vkGetDeviceQueue)               \
  X(vkDeviceWaitIdle)               \
  X(vkCreateBuffer)                 \
  X(vkDestroyBuffer)                \
  X(vkGetBufferMemoryRequirements)  \
  X(vkAllocateMemory)               \
  X(vkFreeMemory)                   \
  X(vkBindBufferMemory)             \
  X(vkMapMemory)                    \
  X(vkUnmapMemory)                  \
  X(vkCreateShaderModule)           \
  X(vkDestroyShaderModule)          \
  X(vkCreateDescriptorSetLayout)    \
  X(vkDestroyDescriptorSetLayout)   \
  X(vkCreatePipelineLayout)         \
  X(vkDestroyPipelineLayout)        \
  X(vkCreateComputePipelines)       \
  X(vkDestroyPipeline)              \
  X(vkCreatePipelineCache)          \
  X(vkDestroyPipelineCache)         \
  X(vkGetPipelineCacheData)         \
  X(vkCreateCommandPool)            \
  X(vkDestroyCommandPool)           \
  X(vkAllocateCommandBuffers)       \
  X(vkBeginCommandBuffer)           \
  X(vkEndCommandBuffer)             \
  X(vkCmdBindPipeline)              \
  X(vkCmdBindDescriptorSets)        \
  X(vkCmdPushConstants)             \
  X(vkCmdDispatch)                  \
  X(vkCmdPipelineBarrier)           \
  X(vkCmdCopyBuffer)                \
  X(vkCmdResetQueryPool)            \
  X(vkCmdWriteTimestamp)            \
  X(vkCreateQueryPool)              \
  X(vkDestroyQueryPool)             \
  X(vkGetQueryPoolResults)          \
  X(vkCreateFence)                  \
  X(vkDestroyFence)                 \
  X(vkResetFences)                  \
  X(vkWaitForFences)                \
  X(vkQueueSubmit)                  \
  X(vkCreateDescriptorPool)         \
  X(vkDestroyDescriptorPool)        \
  X(vkResetDescriptorPool)          \
  X(vkAllocateDescriptorSets)       \
  X(vkUpdateDescriptorSets)

#define VLMC_VK_DECLARE_FN(name) PFN_##name name;

typedef struct {
  void *library; /* the dlopen handle */
  char path[512];
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
  VLMC_VK_GLOBAL_FNS(VLMC_VK_DECLARE_FN)
  VLMC_VK_INSTANCE_FNS(VLMC_VK_DECLARE_FN)
  VLMC_VK_DEVICE_FNS(VLMC_VK_DECLARE_FN)
  PFN_vkCmdPushDescriptorSetKHR vkCmdPushDescriptorSetKHR; /* NULL without the extension */
} vlmc_vk_t;

/* Opens the loader ("vulkan: libvulkan.so.1 not found (install ...)" when absent). */
vlmc_status_t vlmc_vk_open(vlmc_vk_t *vk);
vlmc_status_t vlmc_vk_load_instance(vlmc_vk_t *vk, VkInstance instance);
/* push_descriptor: the device was created with VK_KHR_push_descriptor. */
vlmc_status_t vlmc_vk_load_device(vlmc_vk_t *vk, VkDevice device, bool push_descriptor);
void vlmc_vk_close(vlmc_vk_t *vk);

/* "VK_ERROR_OUT_OF_DEVICE_MEMORY" and so on, for messages. */
const char *vlmc_vk_result_name(VkResult result);

#endif
