/* Fuzzes the artifact container reader: header, section table, checksums. */
#include <stddef.h>
#include <stdint.h>

#include "artifact/artifact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vlmc_artifact_t *artifact = NULL;
  vlmc_status_t status = vlmc_artifact_open_memory(data, size, "fuzz.vlmc", &artifact);
  for (size_t i = 0; !status && i < vlmc_artifact_section_count(artifact); ++i)
    status = vlmc_artifact_section_verify(artifact, vlmc_artifact_section(artifact, i));
  vlmc_status_free(status);
  vlmc_artifact_destroy(artifact);
  return 0;
}
