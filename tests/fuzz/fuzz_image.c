/* Fuzz target: PNG/JPEG decoding from memory and, when an image decodes, the whole Qwen2-VL
 * preprocessing pipeline on it with a small max_pixels (so that every input stays fast). The
 * last byte picks the resize path. Must never crash, leak or read out of bounds; refusals are
 * fine. */
#include <stddef.h>
#include <stdint.h>

#include "frontend/image.h"
#include "frontend/preprocess.h"

/* 2 megapixels: big enough for every seed, small enough for libFuzzer's memory limit. */
#define FUZZ_MAX_DECODED_PIXELS UINT64_C(2000000)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vlmc_image_t image;
  vlmc_status_t status = vlmc_image_decode("fuzz", data, size, FUZZ_MAX_DECODED_PIXELS, &image);
  if (status) {
    vlmc_status_free(status);
    return 0;
  }
  vlmc_preprocess_params_t params;
  vlmc_preprocess_params_init(&params);
  params.min_pixels = 28 * 28;
  params.max_pixels = 28 * 28 * 16;
  params.resample = size && (data[size - 1] & 1) ? VLMC_RESAMPLE_PIL : VLMC_RESAMPLE_TORCHVISION;
  vlmc_preprocess_output_t out;
  vlmc_status_free(vlmc_preprocess_images(&image, NULL, 1, &params, &out));
  vlmc_preprocess_output_destroy(&out);
  vlmc_image_destroy(&image);
  return 0;
}
