/* Fuzzes the artifact manifest reader (JSON into the typed manifest). */
#include <stddef.h>
#include <stdint.h>

#include "artifact/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vlmc_manifest_t manifest;
  vlmc_status_t status = vlmc_manifest_from_json("fuzz.vlmc", (const char *)data, size, &manifest);
  if (!status) vlmc_manifest_deinit(&manifest);
  vlmc_status_free(status);
  return 0;
}
