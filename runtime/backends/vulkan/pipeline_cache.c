/* The on-disk pipeline cache (pipeline_cache.h). */
#define _GNU_SOURCE
#include "runtime/backends/vulkan/pipeline_cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { HEADER_BYTES = 32, MAX_CACHE_BYTES = 256 << 20 };

uint64_t vlmc_vk_hash(uint64_t h, const void *bytes, size_t size) {
  const unsigned char *p = bytes;
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

bool vlmc_vk_pipeline_cache_header_ok(const void *data, size_t size,
                                      const VkPhysicalDeviceProperties *props, char *why,
                                      size_t why_size) {
  const unsigned char *p = data;
  if (size < HEADER_BYTES) {
    snprintf(why, why_size, "%zu bytes, shorter than the 32-byte header", size);
    return false;
  }
  uint32_t header_size = le32(p), version = le32(p + 4), vendor = le32(p + 8),
           device = le32(p + 12);
  if (header_size < HEADER_BYTES || header_size > size ||
      version != VK_PIPELINE_CACHE_HEADER_VERSION_ONE) {
    snprintf(why, why_size, "bad header (size %u, version %u)", header_size, version);
    return false;
  }
  if (vendor != props->vendorID || device != props->deviceID ||
      memcmp(p + 16, props->pipelineCacheUUID, VK_UUID_SIZE) != 0) {
    snprintf(why, why_size, "written for another device or driver (vendor 0x%x device 0x%x)",
             vendor, device);
    return false;
  }
  return true;
}

static bool cache_dir(char *out, size_t size) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  int n;
  if (xdg && *xdg) n = snprintf(out, size, "%s/vlmc", xdg);
  else if (home && *home) n = snprintf(out, size, "%s/.cache/vlmc", home);
  else return false;
  return n > 0 && (size_t)n < size;
}

/* mkdir -p for the cache directory (at most two levels are new: .cache and vlmc). */
static bool make_dir(const char *dir) {
  char parent[1024];
  snprintf(parent, sizeof parent, "%s", dir);
  char *slash = strrchr(parent, '/');
  if (slash && slash != parent) {
    *slash = '\0';
    if (mkdir(parent, 0700) != 0 && errno != EEXIST) return false;
  }
  return mkdir(dir, 0700) == 0 || errno == EEXIST;
}

/* The file's bytes (malloc'd), or NULL when absent or unreadable. */
static void *read_file(const char *path, size_t *out_size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  void *data = NULL;
  long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (size >= 0 && size <= MAX_CACHE_BYTES && fseek(f, 0, SEEK_SET) == 0) {
    data = malloc((size_t)size + 1);
    if (data && fread(data, 1, (size_t)size, f) != (size_t)size) {
      free(data);
      data = NULL;
    }
  }
  fclose(f);
  *out_size = data ? (size_t)size : 0;
  return data;
}

void vlmc_vk_pipeline_cache_open(vlmc_vk_t *vk, VkDevice device,
                                 const VkPhysicalDeviceProperties *props, uint64_t artifact_hash,
                                 vlmc_vk_pipeline_cache_t *out) {
  memset(out, 0, sizeof *out);
  char dir[900];
  if (cache_dir(dir, sizeof dir)) {
    char uuid[2 * VK_UUID_SIZE + 1];
    for (unsigned i = 0; i < VK_UUID_SIZE; ++i)
      snprintf(uuid + 2 * i, 3, "%02x", props->pipelineCacheUUID[i]);
    snprintf(out->path, sizeof out->path, "%s/pipelines-%016llx-%s.bin", dir,
             (unsigned long long)artifact_hash, uuid);
  }
  size_t size = 0;
  void *data = out->path[0] ? read_file(out->path, &size) : NULL;
  char why[160];
  if (data && !vlmc_vk_pipeline_cache_header_ok(data, size, props, why, sizeof why)) {
    fprintf(stderr, "warning: vulkan: ignoring pipeline cache %s: %s; it will be rewritten\n",
            out->path, why);
    free(data);
    data = NULL;
    size = 0;
  }
  VkPipelineCacheCreateInfo info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                    .initialDataSize = size,
                                    .pInitialData = data};
  if (vk->vkCreatePipelineCache(device, &info, NULL, &out->cache) == VK_SUCCESS) {
    out->loaded = data != NULL;
  } else {
    /* The driver refused the data: start empty. */
    info.initialDataSize = 0;
    info.pInitialData = NULL;
    if (vk->vkCreatePipelineCache(device, &info, NULL, &out->cache) != VK_SUCCESS)
      out->cache = VK_NULL_HANDLE;
  }
  free(data);
}

static void write_cache(const char *path, const void *data, size_t size) {
  char dir[1024], tmp[1100];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash) return;
  *slash = '\0';
  if (!make_dir(dir)) return;
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return;
  bool ok = fwrite(data, 1, size, f) == size;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

void vlmc_vk_pipeline_cache_close(vlmc_vk_t *vk, VkDevice device, vlmc_vk_pipeline_cache_t *c) {
  if (c->cache == VK_NULL_HANDLE) return;
  size_t size = 0;
  if (c->path[0] && vk->vkGetPipelineCacheData(device, c->cache, &size, NULL) == VK_SUCCESS &&
      size && size <= MAX_CACHE_BYTES) {
    void *data = malloc(size);
    if (data && vk->vkGetPipelineCacheData(device, c->cache, &size, data) == VK_SUCCESS)
      write_cache(c->path, data, size);
    free(data);
  }
  vk->vkDestroyPipelineCache(device, c->cache, NULL);
  c->cache = VK_NULL_HANDLE;
}
