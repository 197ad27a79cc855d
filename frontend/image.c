/* PNG and JPEG decoding to RGB8; the conversion rules are listed in frontend/image.h. */
#include "frontend/image.h"

#include <limits.h>
#include <spng.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "support/checked_math.h"
#include "support/file.h"

/* Ancillary chunks (text, ICC profiles) that libspng keeps in memory while decoding; a
 * hostile file could otherwise make it hold gigabytes of zTXt. */
enum { PNG_CHUNK_CACHE_LIMIT = 64 << 20 };

static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

vlmc_image_format_t vlmc_image_format_detect(const void *data, size_t size) {
  const uint8_t *bytes = data;
  if (size >= sizeof png_signature && memcmp(bytes, png_signature, sizeof png_signature) == 0)
    return VLMC_IMAGE_FORMAT_PNG;
  if (size >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff)
    return VLMC_IMAGE_FORMAT_JPEG;
  return VLMC_IMAGE_FORMAT_UNKNOWN;
}

vlmc_status_t vlmc_image_create(int32_t width, int32_t height, vlmc_image_t *out_image) {
  memset(out_image, 0, sizeof *out_image);
  size_t bytes;
  if (width < 1 || height < 1 || !vlmc_mul_size((size_t)width, (size_t)height, &bytes) ||
      !vlmc_mul_size(bytes, 3, &bytes))
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "cannot allocate a %d x %d image", (int)width,
                            (int)height);
  uint8_t *pixels = malloc(bytes);
  if (!pixels)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory allocating a %d x %d image",
                            (int)width, (int)height);
  out_image->width = width;
  out_image->height = height;
  out_image->pixels = pixels;
  return NULL;
}

void vlmc_image_destroy(vlmc_image_t *image) {
  if (!image) return;
  free(image->pixels);
  memset(image, 0, sizeof *image);
}

/* Names the formats people are most likely to try, so that the refusal says what it saw. */
static const char *describe_other_format(const uint8_t *bytes, size_t size) {
  if (size >= 6 && (memcmp(bytes, "GIF87a", 6) == 0 || memcmp(bytes, "GIF89a", 6) == 0))
    return "GIF";
  if (size >= 12 && memcmp(bytes, "RIFF", 4) == 0 && memcmp(bytes + 8, "WEBP", 4) == 0)
    return "WebP";
  if (size >= 4 && (memcmp(bytes, "II*\0", 4) == 0 || memcmp(bytes, "MM\0*", 4) == 0))
    return "TIFF";
  if (size >= 12 && memcmp(bytes + 4, "ftyp", 4) == 0) return "HEIF/AVIF";
  if (size >= 2 && bytes[0] == 'B' && bytes[1] == 'M') return "BMP";
  return NULL;
}

static vlmc_status_t refuse_unknown_format(const char *name, const uint8_t *bytes, size_t size) {
  if (size == 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: empty file, expected a PNG or JPEG image",
                            name);
  const char *other = describe_other_format(bytes, size);
  if (other)
    return vlmc_status_make(VLMC_UNSUPPORTED,
                            "%s: %s images are not supported (vlmc reads PNG and JPEG)", name,
                            other);
  char hex[3 * 8 + 1] = "";
  size_t shown = size < 8 ? size : 8, used = 0;
  for (size_t i = 0; i < shown; ++i)
    used += (size_t)snprintf(hex + used, sizeof hex - used, "%s%02x", i ? " " : "", bytes[i]);
  return vlmc_status_make(VLMC_PARSE_ERROR,
                          "%s: not a PNG or JPEG image (expected the bytes 89 50 4e 47 or ff d8 "
                          "ff at the start, found %s)",
                          name, hex);
}

/* Checks the size from a header before any pixel memory is allocated. */
static vlmc_status_t check_dimensions(const char *name, const char *format, uint64_t width,
                                      uint64_t height, uint64_t max_pixels) {
  if (width == 0 || height == 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: %s header: zero-sized image (%llu x %llu)",
                            name, format, (unsigned long long)width,
                            (unsigned long long)height);
  uint64_t pixels;
  if (width > INT32_MAX || height > INT32_MAX || !vlmc_mul_u64(width, height, &pixels) ||
      pixels > max_pixels)
    return vlmc_status_make(VLMC_OUT_OF_RANGE,
                            "%s: %s header: image is %llu x %llu pixels, more than the limit "
                            "of %llu pixels",
                            name, format, (unsigned long long)width, (unsigned long long)height,
                            (unsigned long long)max_pixels);
  return NULL;
}

/* ---- PNG ---------------------------------------------------------------------------- */

static vlmc_status_t png_error(const char *name, const char *stage, int err) {
  if (err == SPNG_IO_EOF || err == SPNG_EOF)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: truncated PNG: the data ends while %s",
                            name, stage);
  return vlmc_status_make(VLMC_PARSE_ERROR, "%s: corrupt PNG while %s: %s", name, stage,
                          spng_strerror(err));
}

static vlmc_status_t png_configure(spng_ctx *ctx, const char *name, const void *data,
                                   size_t size) {
  /* A CRC mismatch in any chunk is an error (PIL checks only the chunks it parses itself). */
  int err = spng_set_crc_action(ctx, SPNG_CRC_ERROR, SPNG_CRC_ERROR);
  if (!err) err = spng_set_chunk_limits(ctx, PNG_CHUNK_CACHE_LIMIT, PNG_CHUNK_CACHE_LIMIT);
  if (!err) err = spng_set_png_buffer(ctx, data, size);
  return err ? png_error(name, "starting to read", err) : NULL;
}

static vlmc_status_t png_decode_into(spng_ctx *ctx, const char *name, vlmc_image_t *image) {
  size_t expected = (size_t)image->width * (size_t)image->height * 3, len = 0;
  int err = spng_decoded_image_size(ctx, SPNG_FMT_RGB8, &len);
  if (err) return png_error(name, "reading the header", err);
  if (len != expected)
    return vlmc_status_make(VLMC_INTERNAL, "%s: libspng wants %zu bytes for RGB8, expected %zu",
                            name, len, expected);
  /* Flags 0: no tRNS or gamma applied, so alpha is dropped exactly as PIL's convert("RGB"). */
  err = spng_decode_image(ctx, image->pixels, len, SPNG_FMT_RGB8, 0);
  if (err) return png_error(name, "decoding the image data", err);
  /* libspng stops once the pixels are complete; reading on to IEND also checks the last IDAT's
   * CRC and refuses a file cut after its image data (PIL would accept both). */
  err = spng_decode_chunks(ctx);
  return err ? png_error(name, "reading the chunks after the image data", err) : NULL;
}

static vlmc_status_t decode_png(const char *name, const void *data, size_t size,
                                uint64_t max_pixels, vlmc_image_t *out_image) {
  spng_ctx *ctx = spng_ctx_new(0);
  if (!ctx) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory (libspng)", name);
  vlmc_status_t status = png_configure(ctx, name, data, size);
  struct spng_ihdr ihdr;
  if (!status) {
    int err = spng_get_ihdr(ctx, &ihdr);
    if (err) status = png_error(name, "reading the header", err);
  }
  if (!status) status = check_dimensions(name, "PNG", ihdr.width, ihdr.height, max_pixels);
  if (!status)
    status = vlmc_status_annotate(
        vlmc_image_create((int32_t)ihdr.width, (int32_t)ihdr.height, out_image), "%s: ", name);
  if (!status) {
    status = png_decode_into(ctx, name, out_image);
    if (status) vlmc_image_destroy(out_image);
  }
  spng_ctx_free(ctx);
  return status;
}

/* ---- JPEG --------------------------------------------------------------------------- */

/* PIL's MULDIV255: a * b / 255 rounded, in integers. */
static int muldiv255(int a, int b) {
  int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

/* PIL opens 4-channel JPEGs as Adobe-inverted CMYK ("CMYK;I": ink = 255 - stored value) and
 * converts with R = (255 - K) - (255 - K) * C / 255, likewise for G and B. */
static void cmyk_to_rgb(const uint8_t *cmyk, size_t count, uint8_t *rgb) {
  for (size_t i = 0; i < count; ++i) {
    const uint8_t *p = cmyk + 4 * i;
    int not_black = p[3]; /* 255 - K, with K = 255 - stored */
    for (int c = 0; c < 3; ++c) {
      int v = not_black - muldiv255(255 - p[c], not_black);
      rgb[3 * i + (size_t)c] = (uint8_t)(v < 0 ? 0 : v);
    }
  }
}

/* libjpeg reports running out of data as a warning ("Premature end of JPEG file", then
 * "premature end of data segment"); PIL refuses such files, so vlmc does too. Other
 * warnings (e.g. extraneous bytes before a marker) leave a complete image that PIL accepts. */
static int jpeg_message_is_truncation(const char *message) {
  return strstr(message, "remature end") != NULL;
}

static vlmc_status_t jpeg_decode_pixels(tjhandle tj, const char *name, const void *data,
                                        size_t size, int pixel_format, uint8_t *out,
                                        int width, int height) {
  /* LIMITSCANS refuses progressive files with absurd scan counts (a known CPU exhaustion). */
  int rc = tjDecompress2(tj, data, (unsigned long)size, out, width, 0, height, pixel_format,
                         TJFLAG_LIMITSCANS);
  if (rc == 0) return NULL;
  const char *message = tjGetErrorStr2(tj);
  if (jpeg_message_is_truncation(message))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: truncated JPEG: %s", name, message);
  if (tjGetErrorCode(tj) == TJERR_WARNING) return NULL;
  return vlmc_status_make(VLMC_PARSE_ERROR, "%s: corrupt JPEG: %s", name, message);
}

static vlmc_status_t jpeg_decode_cmyk(tjhandle tj, const char *name, const void *data,
                                      size_t size, vlmc_image_t *image) {
  size_t count = (size_t)image->width * (size_t)image->height;
  uint8_t *cmyk = malloc(count * 4);
  if (!cmyk) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory (CMYK)", name);
  vlmc_status_t status = jpeg_decode_pixels(tj, name, data, size, TJPF_CMYK, cmyk,
                                            image->width, image->height);
  if (!status) cmyk_to_rgb(cmyk, count, image->pixels);
  free(cmyk);
  return status;
}

static vlmc_status_t decode_jpeg_with(tjhandle tj, const char *name, const void *data,
                                      size_t size, uint64_t max_pixels,
                                      vlmc_image_t *out_image) {
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, data, (unsigned long)size, &width, &height, &subsampling,
                          &colorspace) != 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: corrupt JPEG header: %s", name,
                            tjGetErrorStr2(tj));
  /* libjpeg rejects a frame header with a zero size itself; a zero here means that the data
   * ended (or held only tables) before any frame header. */
  if (width <= 0 || height <= 0)
    return vlmc_status_make(VLMC_PARSE_ERROR,
                            "%s: truncated JPEG: the data ends before the frame header (SOF)",
                            name);
  VLMC_RETURN_IF_ERROR(
      check_dimensions(name, "JPEG", (uint64_t)width, (uint64_t)height, max_pixels));
  VLMC_RETURN_IF_ERROR(
      vlmc_status_annotate(vlmc_image_create(width, height, out_image), "%s: ", name));
  vlmc_status_t status;
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK)
    status = jpeg_decode_cmyk(tj, name, data, size, out_image);
  else /* YCbCr, RGB and grey: libjpeg converts (grey is replicated) exactly as PIL does. */
    status = jpeg_decode_pixels(tj, name, data, size, TJPF_RGB, out_image->pixels, width,
                                height);
  if (status) vlmc_image_destroy(out_image);
  return status;
}

static vlmc_status_t decode_jpeg(const char *name, const void *data, size_t size,
                                 uint64_t max_pixels, vlmc_image_t *out_image) {
#if SIZE_MAX > ULONG_MAX
  if (size > ULONG_MAX)
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "%s: JPEG file too large", name);
#endif
  tjhandle tj = tjInitDecompress();
  if (!tj) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: cannot start libturbojpeg", name);
  vlmc_status_t status = decode_jpeg_with(tj, name, data, size, max_pixels, out_image);
  tjDestroy(tj);
  return status;
}

/* ---- entry points ------------------------------------------------------------------- */

vlmc_status_t vlmc_image_decode(const char *name, const void *data, size_t size,
                                uint64_t max_pixels, vlmc_image_t *out_image) {
  memset(out_image, 0, sizeof *out_image);
  if (max_pixels == 0) max_pixels = VLMC_IMAGE_MAX_PIXELS_DEFAULT;
  switch (vlmc_image_format_detect(data, size)) {
    case VLMC_IMAGE_FORMAT_PNG: return decode_png(name, data, size, max_pixels, out_image);
    case VLMC_IMAGE_FORMAT_JPEG: return decode_jpeg(name, data, size, max_pixels, out_image);
    case VLMC_IMAGE_FORMAT_UNKNOWN: break;
  }
  return refuse_unknown_format(name, data, size);
}

vlmc_status_t vlmc_image_load(const char *path, vlmc_image_t *out_image) {
  memset(out_image, 0, sizeof *out_image);
  vlmc_mapped_file_t file;
  VLMC_RETURN_IF_ERROR(vlmc_file_map(path, &file));
  vlmc_status_t status = vlmc_image_decode(path, file.data, file.size, 0, out_image);
  vlmc_file_unmap(&file);
  return status;
}
