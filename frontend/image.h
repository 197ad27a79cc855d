/* Image decoding: PNG (libspng) and JPEG (libturbojpeg) into 8-bit RGB, the input of
 * Qwen2-VL image preprocessing (frontend/preprocess.h).
 *
 * The conversions reproduce what transformers 5.x sees: its processors call PIL's
 * Image.convert("RGB") on every non-RGB image (transformers.image_transforms.convert_to_rgb),
 * so, as in PIL:
 *   - alpha (RGBA, grey+alpha, a palette's or a colour key's tRNS) is dropped, not composited;
 *   - grey is replicated into R, G and B; 1, 2 and 4-bit samples are scaled to 0..255;
 *   - 16-bit samples keep their high byte (PIL does this for RGB, RGBA and grey+alpha);
 *   - gamma (gAMA), sBIT and colour profiles are ignored;
 *   - CMYK/YCCK JPEGs are read as Adobe-inverted CMYK and converted with PIL's formula;
 *   - EXIF orientation is not applied (Image.open does not apply it either).
 * One deliberate difference: PIL clips 16-bit greyscale PNGs (mode I;16) to 255 instead of
 * scaling them, which turns most such images white; vlmc keeps the high byte there too.
 * See docs/preprocessing.md.
 *
 * Inputs are untrusted: the format is detected from the magic bytes, the size in the header
 * is checked against a pixel limit before anything is allocated, CRC errors, truncation and
 * decoder warnings are errors, and every message names the file. */
#ifndef VLMC_FRONTEND_IMAGE_H
#define VLMC_FRONTEND_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "support/status.h"

/* Images larger than this are refused before decoding (100 megapixels = 300 MB of RGB). */
#define VLMC_IMAGE_MAX_PIXELS_DEFAULT UINT64_C(100000000)

typedef struct {
  int32_t width;
  int32_t height;
  uint8_t *pixels; /* height rows of width RGB triples, top row first; owned (malloc) */
} vlmc_image_t;

typedef enum {
  VLMC_IMAGE_FORMAT_UNKNOWN,
  VLMC_IMAGE_FORMAT_PNG,
  VLMC_IMAGE_FORMAT_JPEG,
} vlmc_image_format_t;

/* The format from the first bytes (PNG signature, JPEG SOI marker). */
vlmc_image_format_t vlmc_image_format_detect(const void *data, size_t size);

/* Decodes a PNG or JPEG held in memory. `name` is used in messages only ("photo.png: ...").
 * Images with more than `max_pixels` pixels (0 = VLMC_IMAGE_MAX_PIXELS_DEFAULT) are refused
 * before any pixel memory is allocated. On success the caller owns *out_image. */
vlmc_status_t vlmc_image_decode(const char *name, const void *data, size_t size,
                                uint64_t max_pixels, vlmc_image_t *out_image);

/* Maps and decodes the file at `path` with the default pixel limit. */
vlmc_status_t vlmc_image_load(const char *path, vlmc_image_t *out_image);

/* Allocates an uninitialised width x height RGB image (both at least 1). */
vlmc_status_t vlmc_image_create(int32_t width, int32_t height, vlmc_image_t *out_image);

/* Frees the pixels and zeroes the struct; NULL and zeroed images are fine. */
void vlmc_image_destroy(vlmc_image_t *image);

#endif
