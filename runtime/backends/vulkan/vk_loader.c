/* The Vulkan loader at run time (vk_loader.h). */
#define _GNU_SOURCE
#include "runtime/backends/vulkan/vk_loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char kDefaultLoader[] = "libvulkan.so.1";

vlmc_status_t vlmc_vk_open(vlmc_vk_t *vk) {
  memset(vk, 0, sizeof *vk);
  const char *path = getenv("VLMC_VULKAN_LOADER");
  bool overridden = path && *path;
  if (!overridden) path = kDefaultLoader;
  snprintf(vk->path, sizeof vk->path, "%s", path);
  vk->library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!vk->library) {
    if (overridden)
      return vlmc_status_make(VLMC_UNSUPPORTED, "vulkan: %s (VLMC_VULKAN_LOADER) not found or "
                              "not loadable: %s", path, dlerror());
    return vlmc_status_make(VLMC_UNSUPPORTED, "vulkan: libvulkan.so.1 not found (install the "
                            "Vulkan loader, e.g. Debian's libvulkan1, and a driver such as "
                            "mesa-vulkan-drivers)");
  }
  /* dlsym returns void *; POSIX guarantees it converts to a function pointer. */
  void *sym = dlsym(vk->library, "vkGetInstanceProcAddr");
  memcpy(&vk->vkGetInstanceProcAddr, &sym, sizeof sym);
  if (!vk->vkGetInstanceProcAddr) {
    dlclose(vk->library); /* not a Vulkan loader: nothing of it ran */
    vlmc_vk_close(vk);
    return vlmc_status_make(VLMC_UNSUPPORTED, "vulkan: %s has no vkGetInstanceProcAddr: not a "
                            "Vulkan loader", path);
  }
#define LOAD_GLOBAL(name) vk->name = (PFN_##name)vk->vkGetInstanceProcAddr(NULL, #name);
  VLMC_VK_GLOBAL_FNS(LOAD_GLOBAL)
#undef LOAD_GLOBAL
  if (!vk->vkCreateInstance) {
    vlmc_vk_close(vk);
    return vlmc_status_make(VLMC_UNSUPPORTED, "vulkan: %s gives no vkCreateInstance", path);
  }
  return NULL;
}

vlmc_status_t vlmc_vk_load_instance(vlmc_vk_t *vk, VkInstance instance) {
#define LOAD_INSTANCE(name)                                                               \
  vk->name = (PFN_##name)vk->vkGetInstanceProcAddr(instance, #name);                      \
  if (!vk->name)                                                                          \
    return vlmc_status_make(VLMC_UNSUPPORTED, "vulkan: the loader %s gives no %s (a Vulkan " \
                            "1.1 instance is needed)", vk->path, #name);
  VLMC_VK_INSTANCE_FNS(LOAD_INSTANCE)
#undef LOAD_INSTANCE
  return NULL;
}

vlmc_status_t vlmc_vk_load_device(vlmc_vk_t *vk, VkDevice device, bool push_descriptor) {
#define LOAD_DEVICE(name)                                                          \
  vk->name = (PFN_##name)vk->vkGetDeviceProcAddr(device, #name);                   \
  if (!vk->name)                                                                   \
    return vlmc_status_make(VLMC_UNSUPPORTED, "vulkan: the device gives no %s", #name);
  VLMC_VK_DEVICE_FNS(LOAD_DEVICE)
#undef LOAD_DEVICE
  vk->vkCmdPushDescriptorSetKHR =
      push_descriptor
          ? (PFN_vkCmdPushDescriptorSetKHR)vk->vkGetDeviceProcAddr(device,
                                                                   "vkCmdPushDescriptorSetKHR")
          : NULL;
  return NULL;
}

/* The loader stays loaded for the life of the process (dlopen of a loaded library only
 * counts a reference): unloading it would unload the drivers it opened, and Mesa's leave
 * thread-local destructors, atexit handlers and JIT caches pointing into their code. */
void vlmc_vk_close(vlmc_vk_t *vk) { vk->library = NULL; }

const char *vlmc_vk_result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_SHADER_NV: return "VK_ERROR_INVALID_SHADER_NV";
    case VK_ERROR_UNKNOWN: return "VK_ERROR_UNKNOWN";
    default: return "VkResult (unnamed)";
  }
}
