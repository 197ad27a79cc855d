/* Fuzzes the vulkan backend's SPIR-V walker (runtime/backends/vulkan/spirv_check.c) with
 * whole modules: the bytes are either refused with a status naming the module, or accepted,
 * and then they are a whole number of words with a valid header. The expectations are a
 * vlmc kernel's (entry vk0, LocalSize 64 x 1 x 1, every feature listed, so that the
 * capability allowlist is what is explored). Seeds (tests/fuzz/corpus/vulkan_spirv/): the
 * two kernels of tests/unit/test_vulkan_backend.c, lowered by mlir-opt-19 (exp_add.spv with
 * LocalSize 64, neg.spv with 32: refused for its LocalSize), and a hand-written minimal
 * module (minimal.spv). */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "runtime/backends/vulkan/kernels.h"
#include "runtime/backends/vulkan/spirv_check.h"

static const char kOrigin[] = "fuzz.vlmc: kernel vk0 (rms_norm)";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vlmc_spirv_expect_t expect = {"vk0", {64, 1, 1}, (1u << VLMC_VK_NUM_FEATURES) - 1, 4};
  vlmc_spirv_info_t info;
  vlmc_status_t st = vlmc_spirv_check(kOrigin, data, size, &expect, &info);
  if (st) {
    assert(strstr(vlmc_status_message(st), kOrigin) != NULL);
    vlmc_status_free(st);
  } else {
    assert(size % 4 == 0 && size >= 20);
    assert(info.version_major == 1 && info.version_minor <= 6);
  }
  return 0;
}
