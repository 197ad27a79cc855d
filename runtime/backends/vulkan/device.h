/* Vulkan instance, physical devices (what `vlmc-run --list-devices` prints) and the logical
 * device the backend runs on: robustBufferAccess when offered (defence in depth for SPIR-V
 * from a file) and exactly the features the artifact's kernels list. */
#ifndef VLMC_RUNTIME_BACKENDS_VULKAN_DEVICE_H
#define VLMC_RUNTIME_BACKENDS_VULKAN_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/backends/vulkan/vk_loader.h"
#include "support/status.h"
#include "support/strbuf.h"

typedef struct {
  VkPhysicalDevice handle;
  VkPhysicalDeviceProperties props;
  char driver_name[VK_MAX_DRIVER_NAME_SIZE], driver_info[VK_MAX_DRIVER_INFO_SIZE];
  uint32_t subgroup_size, subgroup_ops, subgroup_stages;
  uint32_t features;                  /* vlmc_vk_feature_t bits the device offers */
  bool int8, robust_buffer_access;
  bool coop_matrix, push_descriptor;  /* extensions present */
  bool coop_matrix_robust;            /* cooperativeMatrixRobustBufferAccess */
  bool ext_float16_int8, ext_16bit_storage; /* promoted extensions to enable on 1.1 */
  bool has_compute_queue;
  uint32_t queue_family, timestamp_bits;
} vlmc_vk_device_info_t;

/* A Vulkan 1.1+ instance (no layers, no extensions). */
vlmc_status_t vlmc_vk_instance_create(vlmc_vk_t *vk, VkInstance *out);
/* Every physical device, described (malloc'd array). "vulkan: no Vulkan device (...)" when
 * there is none. */
vlmc_status_t vlmc_vk_devices(vlmc_vk_t *vk, VkInstance instance, vlmc_vk_device_info_t **out,
                              uint32_t *out_count);
/* One device as --list-devices prints it (several lines). */
void vlmc_vk_device_describe(const vlmc_vk_device_info_t *d, uint32_t index, vlmc_strbuf_t *out);
/* "integrated GPU", "CPU", ... */
const char *vlmc_vk_device_type_name(VkPhysicalDeviceType type);

/* The logical device with one compute queue, `features` (vlmc_vk_feature_t bits, all
 * offered: the caller checked) enabled (cooperativeMatrix with its extension), plus
 * robustBufferAccess and VK_KHR_push_descriptor when offered. */
vlmc_status_t vlmc_vk_device_create(vlmc_vk_t *vk, const vlmc_vk_device_info_t *d,
                                    uint32_t features, VkDevice *out);

#endif
