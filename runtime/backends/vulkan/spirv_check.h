/* A bounded walk over one untrusted SPIR-V module (the artifact's bytes) before any of it
 * reaches a driver: the header, every instruction's word count, the entry point, its
 * LocalSize, the capabilities, extensions and extended instruction sets it declares, its
 * descriptor bindings (set 0, below the layout's count). It does
 * not validate the module (spirv-val did that at compile time, on the compiler's machine);
 * it refuses what this backend never asked the target for. */
#ifndef VLMC_RUNTIME_BACKENDS_VULKAN_SPIRV_CHECK_H
#define VLMC_RUNTIME_BACKENDS_VULKAN_SPIRV_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "support/status.h"

/* Device features a capability needs (vlmc_vk_feature_t bits, kernels.h). */
typedef struct {
  const char *entry;        /* the one GLCompute entry point's expected name */
  uint32_t local_size[3];   /* its expected LocalSize */
  uint32_t features;        /* the features the kernel lists: capabilities must be covered */
  uint32_t num_bindings;    /* the layout's storage buffers: Binding decorations must be below
                               (set 0 only) */
} vlmc_spirv_expect_t;

typedef struct {
  uint32_t version_major, version_minor;
} vlmc_spirv_info_t;

/* `origin` names the module in messages ("m.vlmc: kernel vk3 (rms_norm)"). `bytes` need not
 * be aligned; `size` must be a multiple of 4. */
vlmc_status_t vlmc_spirv_check(const char *origin, const void *bytes, size_t size,
                               const vlmc_spirv_expect_t *expect, vlmc_spirv_info_t *out_info);

#endif
