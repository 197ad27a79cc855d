/* Fuzzes the safetensors header and offsets validation on an image in memory. Whatever the
 * input, opening either fails with a status or yields an archive whose every tensor lies inside
 * the input, is found by its name, and converts to f32. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/safetensors.h"

/* Bounds the conversion work per input; the checks above it cover every tensor. */
enum { MAX_CONVERTED = 1 << 16 };

static void check_tensor(const vlmc_st_archive_t *archive, const vlmc_st_tensor_t *tensor,
                         const uint8_t *data, size_t size) {
  assert(vlmc_st_archive_find(archive, tensor->name) == tensor);
  const uint8_t *begin = tensor->data;
  assert(begin >= data && begin + tensor->nbytes <= data + size);
  size_t numel = vlmc_st_tensor_numel(tensor);
  assert(numel * vlmc_st_dtype_size(tensor->dtype) == tensor->nbytes);
  if (numel == 0 || numel > MAX_CONVERTED) return;
  float *out = malloc(numel * sizeof *out);
  if (!out) return;
  vlmc_status_t status = vlmc_st_tensor_to_f32(tensor, out, numel);
  assert(status == NULL);
  free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vlmc_st_archive_t *archive = NULL;
  vlmc_status_t status = vlmc_st_archive_open_memory(data, size, "fuzz.safetensors", &archive);
  if (status) {
    assert(archive == NULL && strstr(vlmc_status_message(status), "fuzz.safetensors") != NULL);
    vlmc_status_free(status);
    return 0;
  }
  for (size_t i = 0; i < vlmc_st_archive_count(archive); ++i) {
    const vlmc_st_tensor_t *tensor = vlmc_st_archive_tensor(archive, i);
    if (i > 0) assert(strcmp(vlmc_st_archive_tensor(archive, i - 1)->name, tensor->name) < 0);
    check_tensor(archive, tensor, data, size);
  }
  for (size_t i = 0; i < vlmc_st_archive_metadata_count(archive); ++i) {
    const vlmc_st_metadata_t *entry = vlmc_st_archive_metadata(archive, i);
    assert(vlmc_st_archive_metadata_find(archive, entry->key) != NULL);
  }
  vlmc_st_archive_destroy(archive);
  return 0;
}
