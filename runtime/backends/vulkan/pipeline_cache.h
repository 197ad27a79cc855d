/* The VkPipelineCache kept on disk between runs, so that a model's pipelines are compiled by
 * the driver once per (artifact, device): $XDG_CACHE_HOME/vlmc (else ~/.cache/vlmc)
 * /pipelines-<artifact kernels hash>-<device pipelineCacheUUID>.bin. The file's header
 * (VkPipelineCacheHeaderVersionOne: size, version, vendor, device, UUID) is checked here
 * before the driver sees its bytes; a corrupt or foreign file is ignored with one warning on
 * stderr and rewritten when the backend closes. */
#ifndef VLMC_RUNTIME_BACKENDS_VULKAN_PIPELINE_CACHE_H
#define VLMC_RUNTIME_BACKENDS_VULKAN_PIPELINE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/backends/vulkan/vk_loader.h"

typedef struct {
  char path[1024]; /* "" when there is no cache directory (no HOME) */
  VkPipelineCache cache;
  bool loaded; /* the file's contents were handed to the driver */
} vlmc_vk_pipeline_cache_t;

/* 64-bit FNV-1a of the bytes, chained from `seed` (the artifact's kernels, for the name). */
uint64_t vlmc_vk_hash(uint64_t seed, const void *bytes, size_t size);

/* Whether `data` is a cache this device wrote: a named reason in `why` when not. */
bool vlmc_vk_pipeline_cache_header_ok(const void *data, size_t size,
                                      const VkPhysicalDeviceProperties *props, char *why,
                                      size_t why_size);

/* Creates the cache (from the file when it is valid). Never fails the backend: without a
 * cache the pipelines are only compiled each time. */
void vlmc_vk_pipeline_cache_open(vlmc_vk_t *vk, VkDevice device,
                                 const VkPhysicalDeviceProperties *props, uint64_t artifact_hash,
                                 vlmc_vk_pipeline_cache_t *out);
/* Writes the cache back (atomically: a temporary file renamed) and destroys it. */
void vlmc_vk_pipeline_cache_close(vlmc_vk_t *vk, VkDevice device, vlmc_vk_pipeline_cache_t *c);

#endif
