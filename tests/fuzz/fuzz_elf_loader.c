/* Fuzzes the cpu kernels' ELF loader (runtime/backends/cpu/elf_loader.c) with whole images:
 * the bytes are either refused with a status naming the section, or validated, mapped,
 * searched for an entry point and unmapped. Nothing of the image is ever called, and check
 * and load must agree. Seeds (tests/fuzz/corpus/elf_loader/), small on purpose: a vk0 calling
 * expf and memset and reading a pointer (a RELATIVE), linked the way the cpu target links its
 * kernels plus `-fno-stack-protector -Wl,-z,noseparate-code -Wl,--build-id=none -s`
 * (kernels.so; with -Wl,--hash-style=sysv: kernels_sysv_hash.so), and one with a constructor
 * (constructor.so). */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "runtime/backends/cpu/elf_loader.h"

static const char kOrigin[] = "fuzz.vlmc: section 'kernels.cpu'";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vlmc_status_t checked = vlmc_elf_check(kOrigin, data, size);
  vlmc_elf_image_t *image = NULL;
  vlmc_status_t loaded = vlmc_elf_load(kOrigin, data, size, &image);
  assert(!checked == !loaded);
  if (checked) {
    assert(strstr(vlmc_status_message(checked), kOrigin) != NULL);
  } else {
    vlmc_elf_fn_t fn;
    (void)vlmc_elf_symbol(image, "vk0", &fn);
  }
  vlmc_status_free(checked);
  vlmc_status_free(loaded);
  vlmc_elf_unload(image);
  return 0;
}
