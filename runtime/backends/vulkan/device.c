/* Vulkan instance and devices (device.h). */
#include "runtime/backends/vulkan/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backends/vulkan/kernels.h"

/* VK_KHR_cooperative_matrix, spelled here: Debian 12's Vulkan headers (1.3.239) predate it.
 * The values and layouts are the Vulkan registry's. */
enum {
  STYPE_COOP_MATRIX_FEATURES = 1000506000,
  STYPE_COOP_MATRIX_PROPERTIES = 1000506001,
  COMPONENT_FLOAT16 = 0,
  COMPONENT_FLOAT32 = 1,
  SCOPE_SUBGROUP = 3,
  COOP_SUBGROUP_SIZE = 32, /* kernel_linear_coop.c lays 4 subgroups of 32 over a tile */
};
typedef struct {
  VkStructureType sType;
  void *pNext;
  VkBool32 cooperativeMatrix, cooperativeMatrixRobustBufferAccess;
} coop_matrix_features_t;
typedef struct {
  VkStructureType sType;
  void *pNext;
  uint32_t MSize, NSize, KSize;
  int32_t AType, BType, CType, ResultType; /* VkComponentTypeKHR */
  VkBool32 saturatingAccumulation;
  int32_t scope; /* VkScopeKHR */
} coop_matrix_properties_t;
typedef VkResult(VKAPI_PTR *coop_matrix_properties_fn)(VkPhysicalDevice, uint32_t *,
                                                       coop_matrix_properties_t *);

vlmc_status_t vlmc_vk_instance_create(vlmc_vk_t *vk, VkInstance *out) {
  uint32_t version = VK_API_VERSION_1_0;
  if (vk->vkEnumerateInstanceVersion) vk->vkEnumerateInstanceVersion(&version);
  if (version < VK_API_VERSION_1_1)
    return vlmc_status_make(VLMC_UNSUPPORTED, "vulkan: the loader %s is Vulkan %u.%u; vlmc "
                            "needs 1.1 or newer", vk->path, VK_API_VERSION_MAJOR(version),
                            VK_API_VERSION_MINOR(version));
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "vlmc-run",
                           .pEngineName = "vlmc",
                           .apiVersion = version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3
                                                                       : version};
  VkInstanceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &app};
  VkResult r = vk->vkCreateInstance(&info, NULL, out);
  if (r != VK_SUCCESS)
    return vlmc_status_make(VLMC_UNSUPPORTED, "vulkan: vkCreateInstance failed (%s): no "
                            "usable Vulkan driver (install e.g. mesa-vulkan-drivers)",
                            vlmc_vk_result_name(r));
  return vlmc_vk_load_instance(vk, *out);
}

const char *vlmc_vk_device_type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

static void read_extensions(vlmc_vk_t *vk, vlmc_vk_device_info_t *d) {
  uint32_t n = 0;
  if (vk->vkEnumerateDeviceExtensionProperties(d->handle, NULL, &n, NULL) != VK_SUCCESS) return;
  VkExtensionProperties *ext = calloc(n + 1, sizeof *ext);
  if (!ext) return;
  if (vk->vkEnumerateDeviceExtensionProperties(d->handle, NULL, &n, ext) == VK_SUCCESS) {
    for (uint32_t i = 0; i < n; ++i) {
      const char *name = ext[i].extensionName;
      if (!strcmp(name, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME)) d->push_descriptor = true;
      if (!strcmp(name, "VK_KHR_cooperative_matrix")) d->coop_matrix = true;
      if (!strcmp(name, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME)) d->ext_float16_int8 = true;
      if (!strcmp(name, VK_KHR_16BIT_STORAGE_EXTENSION_NAME)) d->ext_16bit_storage = true;
    }
  }
  free(ext);
}

static void read_properties(vlmc_vk_t *vk, vlmc_vk_device_info_t *d) {
  vk->vkGetPhysicalDeviceProperties(d->handle, &d->props);
  VkPhysicalDeviceSubgroupProperties subgroup = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, .pNext = &subgroup};
  /* Driver properties are core in 1.2; on a 1.1 device the struct is left out. */
  bool has_driver = d->props.apiVersion >= VK_API_VERSION_1_2;
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                    .pNext = has_driver ? (void *)&driver : (void *)&subgroup};
  vk->vkGetPhysicalDeviceProperties2(d->handle, &p2);
  snprintf(d->driver_name, sizeof d->driver_name, "%s", has_driver ? driver.driverName : "?");
  snprintf(d->driver_info, sizeof d->driver_info, "%s", has_driver ? driver.driverInfo : "");
  d->subgroup_size = subgroup.subgroupSize;
  d->subgroup_ops = subgroup.supportedOperations;
  d->subgroup_stages = subgroup.supportedStages;
}

static void read_features(vlmc_vk_t *vk, vlmc_vk_device_info_t *d) {
  VkPhysicalDevice16BitStorageFeatures storage16 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features f16 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
      .pNext = &storage16};
  bool has_f16 = d->props.apiVersion >= VK_API_VERSION_1_2 || d->ext_float16_int8;
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                  .pNext = has_f16 ? (void *)&f16 : (void *)&storage16};
  vk->vkGetPhysicalDeviceFeatures2(d->handle, &f2);
  d->features = 0;
  if (has_f16 && f16.shaderFloat16) d->features |= VLMC_VK_FEATURE_FLOAT16;
  if (f2.features.shaderInt64) d->features |= VLMC_VK_FEATURE_INT64;
  if (f2.features.shaderInt16) d->features |= VLMC_VK_FEATURE_INT16;
  if (storage16.storageBuffer16BitAccess) d->features |= VLMC_VK_FEATURE_STORAGE16;
  if ((d->subgroup_ops & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
      (d->subgroup_stages & VK_SHADER_STAGE_COMPUTE_BIT))
    d->features |= VLMC_VK_FEATURE_SUBGROUP_ARITH;
  d->int8 = has_f16 && f16.shaderInt8;
  d->robust_buffer_access = f2.features.robustBufferAccess;
}

/* Whether the device lists the one configuration vlmc's cooperative-matrix kernels use:
 * 16 x 16 x 16, f16 A and B, f32 C and result, not saturating, at subgroup scope. */
static bool lists_f16_16x16x16(vlmc_vk_t *vk, VkInstance instance, VkPhysicalDevice device) {
  coop_matrix_properties_fn list = (coop_matrix_properties_fn)vk->vkGetInstanceProcAddr(
      instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
  uint32_t n = 0;
  if (!list || list(device, &n, NULL) != VK_SUCCESS || n == 0 || n > 4096) return false;
  coop_matrix_properties_t *p = calloc(n, sizeof *p);
  if (!p) return false;
  for (uint32_t i = 0; i < n; ++i) p[i].sType = (VkStructureType)STYPE_COOP_MATRIX_PROPERTIES;
  bool found = false;
  VkResult r = list(device, &n, p);
  for (uint32_t i = 0; (r == VK_SUCCESS || r == VK_INCOMPLETE) && i < n && !found; ++i)
    found = p[i].MSize == 16 && p[i].NSize == 16 && p[i].KSize == 16 &&
            p[i].AType == COMPONENT_FLOAT16 && p[i].BType == COMPONENT_FLOAT16 &&
            p[i].CType == COMPONENT_FLOAT32 && p[i].ResultType == COMPONENT_FLOAT32 &&
            !p[i].saturatingAccumulation && p[i].scope == SCOPE_SUBGROUP;
  free(p);
  return found;
}

/* The feature cooperativeMatrix (kernels.h): the extension, its feature, the configuration
 * and subgroups of 32. */
static void read_coop_matrix(vlmc_vk_t *vk, VkInstance instance, vlmc_vk_device_info_t *d) {
  if (!d->coop_matrix || d->subgroup_size != COOP_SUBGROUP_SIZE) return;
  coop_matrix_features_t coop = {.sType = (VkStructureType)STYPE_COOP_MATRIX_FEATURES};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                  .pNext = &coop};
  vk->vkGetPhysicalDeviceFeatures2(d->handle, &f2);
  d->coop_matrix_robust = coop.cooperativeMatrixRobustBufferAccess;
  if (coop.cooperativeMatrix && lists_f16_16x16x16(vk, instance, d->handle))
    d->features |= VLMC_VK_FEATURE_COOP_MATRIX;
}

static void read_queues(vlmc_vk_t *vk, vlmc_vk_device_info_t *d) {
  uint32_t n = 0;
  vk->vkGetPhysicalDeviceQueueFamilyProperties(d->handle, &n, NULL);
  VkQueueFamilyProperties *q = calloc(n + 1, sizeof *q);
  if (!q) return;
  vk->vkGetPhysicalDeviceQueueFamilyProperties(d->handle, &n, q);
  for (uint32_t i = 0; i < n; ++i)
    if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      d->has_compute_queue = true;
      d->queue_family = i;
      d->timestamp_bits = q[i].timestampValidBits;
      break;
    }
  free(q);
}

vlmc_status_t vlmc_vk_devices(vlmc_vk_t *vk, VkInstance instance, vlmc_vk_device_info_t **out,
                              uint32_t *out_count) {
  *out = NULL;
  *out_count = 0;
  uint32_t n = 0;
  VkResult r = vk->vkEnumeratePhysicalDevices(instance, &n, NULL);
  if (r != VK_SUCCESS || n == 0)
    return vlmc_status_make(VLMC_UNSUPPORTED, "vulkan: no Vulkan device (the loader %s found "
                            "no driver with a device; install e.g. mesa-vulkan-drivers for "
                            "lavapipe)", vk->path);
  VkPhysicalDevice *handles = calloc(n, sizeof *handles);
  vlmc_vk_device_info_t *devices = calloc(n, sizeof *devices);
  if (!handles || !devices) {
    free(handles);
    free(devices);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  r = vk->vkEnumeratePhysicalDevices(instance, &n, handles);
  for (uint32_t i = 0; r >= 0 && i < n; ++i) {
    vlmc_vk_device_info_t *d = &devices[i];
    d->handle = handles[i];
    read_properties(vk, d);
    read_extensions(vk, d);
    read_features(vk, d);
    read_coop_matrix(vk, instance, d);
    read_queues(vk, d);
  }
  free(handles);
  *out = devices;
  *out_count = n;
  return NULL;
}

static const char *yes_no(bool b) { return b ? "yes" : "no"; }

static const char *coop_matrix_state(const vlmc_vk_device_info_t *d) {
  if (d->features & VLMC_VK_FEATURE_COOP_MATRIX) return "yes (16x16x16 f16, subgroup 32)";
  return d->coop_matrix ? "extension only (no 16x16x16 f16 at subgroup 32: not used)" : "no";
}

void vlmc_vk_device_describe(const vlmc_vk_device_info_t *d, uint32_t i, vlmc_strbuf_t *o) {
  const VkPhysicalDeviceLimits *l = &d->props.limits;
  uint32_t v = d->props.apiVersion;
  vlmc_strbuf_printf(o, "  %u: %s (%s)\n", i, d->props.deviceName,
                     vlmc_vk_device_type_name(d->props.deviceType));
  vlmc_strbuf_printf(o, "     driver %s%s%s, Vulkan %u.%u.%u\n", d->driver_name,
                     d->driver_info[0] ? " " : "", d->driver_info, VK_API_VERSION_MAJOR(v),
                     VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v));
  vlmc_strbuf_printf(o, "     subgroup size %u, shared memory %u B, storage buffer range %u B, "
                     "push constants %u B\n", d->subgroup_size, l->maxComputeSharedMemorySize,
                     l->maxStorageBufferRange, l->maxPushConstantsSize);
  vlmc_strbuf_printf(o, "     f16 %s, int8 %s, int16 %s, int64 %s, 16-bit storage %s, subgroup "
                     "arithmetic %s, cooperative matrix (VK_KHR_cooperative_matrix) %s, push "
                     "descriptors %s%s\n",
                     yes_no(d->features & VLMC_VK_FEATURE_FLOAT16), yes_no(d->int8),
                     yes_no(d->features & VLMC_VK_FEATURE_INT16),
                     yes_no(d->features & VLMC_VK_FEATURE_INT64),
                     yes_no(d->features & VLMC_VK_FEATURE_STORAGE16),
                     yes_no(d->features & VLMC_VK_FEATURE_SUBGROUP_ARITH), coop_matrix_state(d),
                     yes_no(d->push_descriptor), d->has_compute_queue ? "" : ", NO compute queue");
}

vlmc_status_t vlmc_vk_device_create(vlmc_vk_t *vk, const vlmc_vk_device_info_t *d,
                                    uint32_t features, VkDevice *out) {
  float priority = 1.0f;
  VkDeviceQueueCreateInfo queue = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = d->queue_family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &priority};
  VkPhysicalDevice16BitStorageFeatures storage16 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
      .storageBuffer16BitAccess = (features & VLMC_VK_FEATURE_STORAGE16) != 0};
  VkPhysicalDeviceShaderFloat16Int8Features f16 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
      .pNext = &storage16,
      .shaderFloat16 = (features & VLMC_VK_FEATURE_FLOAT16) != 0};
  bool chain_f16 = (features & VLMC_VK_FEATURE_FLOAT16) != 0;
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                  .pNext = chain_f16 ? (void *)&f16 : (void *)&storage16};
  f2.features.robustBufferAccess = d->robust_buffer_access;
  f2.features.shaderInt64 = (features & VLMC_VK_FEATURE_INT64) != 0;
  f2.features.shaderInt16 = (features & VLMC_VK_FEATURE_INT16) != 0;
  coop_matrix_features_t coop = {.sType = (VkStructureType)STYPE_COOP_MATRIX_FEATURES,
                                 .pNext = f2.pNext,
                                 .cooperativeMatrix = VK_TRUE,
                                 .cooperativeMatrixRobustBufferAccess =
                                     d->robust_buffer_access && d->coop_matrix_robust};
  bool chain_coop = (features & VLMC_VK_FEATURE_COOP_MATRIX) != 0;
  if (chain_coop) f2.pNext = &coop;
  const char *extensions[4];
  uint32_t num_extensions = 0;
  if (chain_coop) extensions[num_extensions++] = "VK_KHR_cooperative_matrix";
  if (d->push_descriptor) extensions[num_extensions++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
  if (chain_f16 && d->props.apiVersion < VK_API_VERSION_1_2)
    extensions[num_extensions++] = VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME;
  VkDeviceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .pNext = &f2,
                             .queueCreateInfoCount = 1,
                             .pQueueCreateInfos = &queue,
                             .enabledExtensionCount = num_extensions,
                             .ppEnabledExtensionNames = extensions};
  VkResult r = vk->vkCreateDevice(d->handle, &info, NULL, out);
  if (r != VK_SUCCESS)
    return vlmc_status_make(VLMC_UNSUPPORTED, "vulkan: vkCreateDevice on %s failed (%s)",
                            d->props.deviceName, vlmc_vk_result_name(r));
  return vlmc_vk_load_device(vk, *out, d->push_descriptor);
}
