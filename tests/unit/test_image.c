/* Image decoding: every PNG colour type and bit depth against the PIL convert("RGB") rules of
 * frontend/image.h (the rules were checked against Pillow 9.4 on files built the same way),
 * JPEG (RGB, grey, CMYK), and malformed files: each refused with a message naming the file.
 * The PNGs are built here, byte by byte, so that every field can be broken on purpose. */
#define _DEFAULT_SOURCE /* mkstemps */
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <unistd.h>
#include <zlib.h>

#include "frontend/image.h"
#include "support/file.h"
#include "tests/unit/test.h"

/* ---- a minimal PNG writer ---- */

typedef struct {
  uint8_t *data;
  size_t len, cap;
} bytes_t;

static void put(bytes_t *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    b->cap = (b->len + n) * 2 + 64;
    b->data = realloc(b->data, b->cap);
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

static void put_u32(bytes_t *b, uint32_t v) {
  uint8_t be[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
  put(b, be, 4);
}

static void put_chunk(bytes_t *b, const char *type, const uint8_t *data, size_t n) {
  put_u32(b, (uint32_t)n);
  size_t start = b->len;
  put(b, type, 4);
  if (n) put(b, data, n);
  put_u32(b, (uint32_t)crc32(0, b->data + start, (uInt)(n + 4)));
}

typedef struct {
  uint32_t width, height;
  int depth, color_type;
  const uint8_t *plte; /* 3 * plte_entries bytes, or NULL */
  int plte_entries;
  const uint8_t *trns;
  size_t trns_len;
} png_spec_t;

static int png_channels(int color_type) {
  switch (color_type) {
    case 2: return 3;
    case 4: return 2;
    case 6: return 4;
    default: return 1;
  }
}

/* Packs samples (one int per sample, row-major) into PNG scanlines with filter 0. */
static void pack_rows(const png_spec_t *s, const int *samples, bytes_t *raw) {
  int n = png_channels(s->color_type);
  for (uint32_t y = 0; y < s->height; ++y) {
    uint8_t zero = 0, acc = 0;
    put(raw, &zero, 1);
    int bits = 0;
    for (uint32_t i = 0; i < s->width * (uint32_t)n; ++i) {
      int v = samples[y * s->width * (uint32_t)n + i];
      if (s->depth == 16) {
        uint8_t be[2] = {(uint8_t)(v >> 8), (uint8_t)v};
        put(raw, be, 2);
      } else if (s->depth == 8) {
        uint8_t b8 = (uint8_t)v;
        put(raw, &b8, 1);
      } else {
        acc = (uint8_t)(acc | (v << (8 - s->depth - bits)));
        bits += s->depth;
        if (bits == 8) {
          put(raw, &acc, 1);
          acc = 0;
          bits = 0;
        }
      }
    }
    if (bits) put(raw, &acc, 1);
  }
}

static bytes_t make_png(const png_spec_t *s, const int *samples) {
  bytes_t b = {0}, raw = {0};
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  put(&b, sig, 8);
  uint8_t ihdr[13] = {(uint8_t)(s->width >> 24), (uint8_t)(s->width >> 16),
                      (uint8_t)(s->width >> 8),  (uint8_t)s->width,
                      (uint8_t)(s->height >> 24), (uint8_t)(s->height >> 16),
                      (uint8_t)(s->height >> 8), (uint8_t)s->height,
                      (uint8_t)s->depth,         (uint8_t)s->color_type, 0, 0, 0};
  put_chunk(&b, "IHDR", ihdr, 13);
  if (s->plte) put_chunk(&b, "PLTE", s->plte, (size_t)s->plte_entries * 3);
  if (s->trns) put_chunk(&b, "tRNS", s->trns, s->trns_len);
  if (samples) {
    pack_rows(s, samples, &raw);
    uLongf zlen = compressBound((uLong)raw.len);
    uint8_t *z = malloc(zlen);
    compress(z, &zlen, raw.data, (uLong)raw.len);
    put_chunk(&b, "IDAT", z, zlen);
    free(z);
    free(raw.data);
  }
  put_chunk(&b, "IEND", NULL, 0);
  return b;
}

/* Deterministic samples in [0, 2^depth). */
static int *make_samples(const png_spec_t *s, int max_value, uint32_t seed) {
  size_t n = (size_t)s->width * s->height * (size_t)png_channels(s->color_type);
  int *v = malloc(n * sizeof(int));
  uint32_t x = seed;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = (int)((x >> 8) % (uint32_t)(max_value + 1));
  }
  return v;
}

/* What PIL's convert("RGB") gives for one sample of a grey or colour channel. */
static uint8_t expected_level(int v, int depth) {
  if (depth == 16) return (uint8_t)(v >> 8);
  return (uint8_t)(v * 255 / ((1 << depth) - 1));
}

static void expected_pixel(const png_spec_t *s, const int *px, uint8_t rgb[3]) {
  switch (s->color_type) {
    case 0: /* grey */
    case 4: /* grey + alpha: alpha dropped */
      rgb[0] = rgb[1] = rgb[2] = expected_level(px[0], s->depth);
      return;
    case 3: /* palette: tRNS ignored */
      memcpy(rgb, s->plte + 3 * px[0], 3);
      return;
    default: /* RGB, RGBA: alpha dropped */
      for (int c = 0; c < 3; ++c) rgb[c] = expected_level(px[c], s->depth);
  }
}

static void check_png_case(int color_type, int depth) {
  uint8_t plte[3 * 256], trns[256];
  for (int i = 0; i < 256; ++i) {
    plte[3 * i] = (uint8_t)(i * 7 + 3);
    plte[3 * i + 1] = (uint8_t)(255 - i);
    plte[3 * i + 2] = (uint8_t)(i * 13);
    trns[i] = (uint8_t)(i * 5);
  }
  png_spec_t s = {7, 5, depth, color_type, NULL, 0, NULL, 0};
  int max_value = (1 << depth) - 1;
  if (color_type == 3) {
    s.plte = plte;
    s.plte_entries = 1 << depth;
    s.trns = trns;
    s.trns_len = (size_t)s.plte_entries;
  }
  static const uint8_t grey_key[2] = {0, 5};
  if (color_type == 0 && depth == 8) { /* a colour key tRNS is ignored too */
    s.trns = grey_key;
    s.trns_len = 2;
  }
  int *samples = make_samples(&s, max_value, (uint32_t)(color_type * 100 + depth));
  bytes_t png = make_png(&s, samples);
  vlmc_image_t image;
  EXPECT_OK(vlmc_image_decode("case.png", png.data, png.len, 0, &image));
  if (image.pixels) {
    EXPECT_EQ_INT(image.width, 7);
    EXPECT_EQ_INT(image.height, 5);
    int n = png_channels(color_type), bad = 0;
    for (int i = 0; i < 7 * 5; ++i) {
      uint8_t want[3];
      expected_pixel(&s, samples + i * n, want);
      bad += memcmp(want, image.pixels + 3 * i, 3) != 0;
    }
    if (bad) TEST_FAIL_("color type %d depth %d: %d pixels differ", color_type, depth, bad);
  }
  vlmc_image_destroy(&image);
  free(samples);
  free(png.data);
}

static void test_png_all_color_types_and_depths(void) {
  static const int cases[][2] = {{0, 1}, {0, 2}, {0, 4}, {0, 8}, {0, 16}, {2, 8}, {2, 16},
                                 {3, 1}, {3, 2}, {3, 4}, {3, 8}, {4, 8}, {4, 16}, {6, 8},
                                 {6, 16}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    check_png_case(cases[i][0], cases[i][1]);
}

/* ---- malformed PNGs ---- */

static bytes_t small_rgb_png(void) {
  png_spec_t s = {4, 3, 8, 2, NULL, 0, NULL, 0};
  int *samples = make_samples(&s, 255, 9);
  bytes_t png = make_png(&s, samples);
  free(samples);
  return png;
}

static void test_png_truncated(void) {
  bytes_t png = small_rgb_png();
  vlmc_image_t image;
  /* Cut inside IHDR, just after IHDR, inside IDAT, and inside IDAT's CRC. */
  size_t cuts[] = {20, 33, 45, png.len - 14};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; ++i) {
    vlmc_status_t s = vlmc_image_decode("cut.png", png.data, cuts[i], 0, &image);
    EXPECT_TRUE(s != NULL);
    EXPECT_TRUE(s && strstr(vlmc_status_message(s), "cut.png: ") == vlmc_status_message(s));
    EXPECT_TRUE(image.pixels == NULL);
    vlmc_status_free(s);
  }
  EXPECT_ERROR(vlmc_image_decode("cut.png", png.data, 45, 0, &image), "truncated PNG");
  /* Stricter than PIL, which accepts a file that ends right after its image data. */
  EXPECT_ERROR(vlmc_image_decode("cut.png", png.data, png.len - 12, 0, &image),
               "cut.png: truncated PNG: the data ends while reading the chunks after the image");
  free(png.data);
}

static void test_png_bad_crc(void) {
  bytes_t png = small_rgb_png();
  vlmc_image_t image;
  png.data[8 + 8 + 13] ^= 0x55; /* IHDR's CRC */
  EXPECT_ERROR(vlmc_image_decode("crc.png", png.data, png.len, 0, &image), "crc.png: corrupt PNG");
  png.data[8 + 8 + 13] ^= 0x55;
  png.data[png.len - 12 - 1] ^= 0x01; /* IDAT's CRC, the 4 bytes before IEND */
  EXPECT_ERROR(vlmc_image_decode("crc.png", png.data, png.len, 0, &image), "crc.png: corrupt PNG");
  free(png.data);
}

static void test_png_bad_sizes(void) {
  vlmc_image_t image;
  png_spec_t zero = {0, 5, 8, 2, NULL, 0, NULL, 0};
  bytes_t png = make_png(&zero, NULL);
  EXPECT_ERROR(vlmc_image_decode("zero.png", png.data, png.len, 0, &image),
               "zero.png: corrupt PNG while reading the header: invalid image width");
  free(png.data);
  /* 100000 x 100000 in a valid header: refused before anything is allocated. */
  png_spec_t huge = {100000, 100000, 8, 2, NULL, 0, NULL, 0};
  png = make_png(&huge, NULL);
  EXPECT_ERROR(vlmc_image_decode("huge.png", png.data, png.len, 0, &image),
               "huge.png: PNG header: image is 100000 x 100000 pixels, more than the limit");
  free(png.data);
  /* The caller's own limit. */
  png = small_rgb_png();
  EXPECT_ERROR(vlmc_image_decode("small.png", png.data, png.len, 11, &image),
               "more than the limit of 11 pixels");
  EXPECT_OK(vlmc_image_decode("small.png", png.data, png.len, 12, &image));
  vlmc_image_destroy(&image);
  free(png.data);
}

static void test_png_palette_index_out_of_range(void) {
  uint8_t plte[6] = {1, 2, 3, 4, 5, 6};
  png_spec_t s = {4, 2, 8, 3, plte, 2, NULL, 0};
  int samples[8] = {0, 1, 0, 1, 1, 0, 200, 0}; /* 200: no such palette entry */
  bytes_t png = make_png(&s, samples);
  vlmc_image_t image;
  vlmc_status_t status = vlmc_image_decode("pal.png", png.data, png.len, 0, &image);
  /* libspng refuses it; what matters is no crash and, if refused, a named file. */
  if (status) EXPECT_TRUE(strncmp(vlmc_status_message(status), "pal.png: ", 9) == 0);
  vlmc_status_free(status);
  vlmc_image_destroy(&image);
  free(png.data);
}

/* ---- JPEG ---- */

static bytes_t make_jpeg(const uint8_t *pixels, int w, int h, int pixel_format, int subsamp) {
  tjhandle tj = tjInitCompress();
  unsigned char *jpeg = NULL;
  unsigned long len = 0;
  int rc = tjCompress2(tj, pixels, w, 0, h, pixel_format, &jpeg, &len, subsamp, 100, 0);
  if (rc != 0) TEST_FAIL_("tjCompress2: %s", tjGetErrorStr2(tj));
  bytes_t b = {0};
  if (rc == 0) put(&b, jpeg, len);
  tjFree(jpeg);
  tjDestroy(tj);
  return b;
}

static int max_abs_diff(const uint8_t *a, const uint8_t *b, size_t n) {
  int worst = 0;
  for (size_t i = 0; i < n; ++i) {
    int d = abs((int)a[i] - (int)b[i]);
    if (d > worst) worst = d;
  }
  return worst;
}

static void test_jpeg_rgb_and_grey(void) {
  enum { W = 24, H = 16 };
  uint8_t rgb[W * H * 3], grey[W * H];
  for (int i = 0; i < W * H; ++i) { /* smooth content: quality 100 keeps it within a few levels */
    int x = i % W, y = i / W;
    rgb[3 * i] = (uint8_t)(x * 8);
    rgb[3 * i + 1] = (uint8_t)(y * 12);
    rgb[3 * i + 2] = (uint8_t)(100 + x + y);
    grey[i] = (uint8_t)(x * 5 + y * 3);
  }
  vlmc_image_t image;
  bytes_t jpeg = make_jpeg(rgb, W, H, TJPF_RGB, TJSAMP_444);
  EXPECT_OK(vlmc_image_decode("rgb.jpg", jpeg.data, jpeg.len, 0, &image));
  if (image.pixels) EXPECT_TRUE(max_abs_diff(image.pixels, rgb, sizeof rgb) <= 3);
  vlmc_image_destroy(&image);
  free(jpeg.data);

  jpeg = make_jpeg(grey, W, H, TJPF_GRAY, TJSAMP_GRAY);
  EXPECT_OK(vlmc_image_decode("grey.jpg", jpeg.data, jpeg.len, 0, &image));
  for (int i = 0; image.pixels && i < W * H; ++i) {
    const uint8_t *p = image.pixels + 3 * i;
    if (p[0] != p[1] || p[1] != p[2] || abs(p[0] - grey[i]) > 2) {
      TEST_FAIL_("grey pixel %d: (%d, %d, %d), source %d", i, p[0], p[1], p[2], grey[i]);
      break;
    }
  }
  vlmc_image_destroy(&image);
  free(jpeg.data);
}

/* Stored CMYK values are Adobe-inverted (255 = no ink): white, black, cyan, a mix. */
static void test_jpeg_cmyk(void) {
  enum { W = 32, H = 8 };
  static const uint8_t stored[4][4] = {
      {255, 255, 255, 255}, {255, 255, 255, 0}, {0, 255, 255, 255}, {128, 200, 255, 180}};
  static const uint8_t want[4][3] = {{255, 255, 255}, {0, 0, 0}, {0, 255, 255}, {90, 141, 180}};
  uint8_t cmyk[W * H * 4];
  for (int i = 0; i < W * H; ++i) memcpy(cmyk + 4 * i, stored[(i % W) / 8], 4);
  bytes_t jpeg = make_jpeg(cmyk, W, H, TJPF_CMYK, TJSAMP_444);
  vlmc_image_t image;
  EXPECT_OK(vlmc_image_decode("cmyk.jpg", jpeg.data, jpeg.len, 0, &image));
  for (int block = 0; image.pixels && block < 4; ++block) {
    const uint8_t *p = image.pixels + 3 * (4 * W + block * 8 + 4); /* a block's centre */
    if (max_abs_diff(p, want[block], 3) > 2)
      TEST_FAIL_("CMYK block %d: (%d, %d, %d), expected about (%d, %d, %d)", block, p[0], p[1],
                 p[2], want[block][0], want[block][1], want[block][2]);
  }
  vlmc_image_destroy(&image);
  free(jpeg.data);
}

static void test_jpeg_malformed(void) {
  enum { W = 64, H = 64 }; /* noisy, so that half the file is entropy-coded data */
  uint8_t rgb[W * H * 3];
  uint32_t x = 5;
  for (int i = 0; i < W * H * 3; ++i) {
    x = x * 1664525u + 1013904223u;
    rgb[i] = (uint8_t)(x >> 24);
  }
  bytes_t jpeg = make_jpeg(rgb, W, H, TJPF_RGB, TJSAMP_420);
  vlmc_image_t image;
  EXPECT_ERROR(vlmc_image_decode("cut.jpg", jpeg.data, jpeg.len / 2, 0, &image),
               "cut.jpg: truncated JPEG");
  EXPECT_TRUE(image.pixels == NULL);
  EXPECT_ERROR(vlmc_image_decode("cut.jpg", jpeg.data, 40, 0, &image),
               "cut.jpg: truncated JPEG: the data ends before the frame header");

  /* The SOF0 frame size fields: zero width, then 65000 x 65000. */
  size_t sof = 0;
  for (size_t i = 2; i + 1 < jpeg.len; ++i)
    if (jpeg.data[i] == 0xff && jpeg.data[i + 1] == 0xc0) {
      sof = i;
      break;
    }
  EXPECT_TRUE(sof != 0);
  if (sof) {
    uint8_t *frame = jpeg.data + sof + 5; /* height (2 bytes) then width (2 bytes) */
    frame[2] = frame[3] = 0;
    EXPECT_ERROR(vlmc_image_decode("zero.jpg", jpeg.data, jpeg.len, 0, &image),
                 "zero.jpg: corrupt JPEG header: Empty JPEG image");
    frame[0] = frame[2] = 0xfd;
    frame[1] = frame[3] = 0xe8;
    EXPECT_ERROR(vlmc_image_decode("huge.jpg", jpeg.data, jpeg.len, 0, &image),
                 "huge.jpg: JPEG header: image is 65000 x 65000 pixels, more than the limit");
  }
  static const uint8_t garbage[] = {0xff, 0xd8, 0xff, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06};
  EXPECT_ERROR(vlmc_image_decode("junk.jpg", garbage, sizeof garbage, 0, &image),
               "junk.jpg: truncated JPEG");
  free(jpeg.data);
}

/* ---- not an image ---- */

static void test_not_an_image(void) {
  vlmc_image_t image;
  EXPECT_ERROR(vlmc_image_decode("notes.txt", "hello, world", 12, 0, &image),
               "notes.txt: not a PNG or JPEG image (expected the bytes 89 50 4e 47 or ff d8 ff "
               "at the start, found 68 65 6c 6c 6f 2c 20 77)");
  EXPECT_ERROR(vlmc_image_decode("empty.png", "", 0, 0, &image), "empty.png: empty file");
  EXPECT_ERROR(vlmc_image_decode("a.gif", "GIF89a\x01\x00", 8, 0, &image),
               "a.gif: GIF images are not supported");
  EXPECT_ERROR(vlmc_image_decode("a.webp", "RIFF\x10\0\0\0WEBPVP8 ", 16, 0, &image),
               "a.webp: WebP images are not supported");
  EXPECT_ERROR(vlmc_image_decode("x", "\x89PN", 3, 0, &image), "x: not a PNG or JPEG image");
  EXPECT_TRUE(vlmc_image_format_detect("\xff\xd8\xff\xe0", 4) == VLMC_IMAGE_FORMAT_JPEG);
  EXPECT_TRUE(vlmc_image_format_detect("\x89PNG\r\n\x1a\n", 8) == VLMC_IMAGE_FORMAT_PNG);
  EXPECT_TRUE(vlmc_image_format_detect("\x89PNG\r\n\x1a", 7) == VLMC_IMAGE_FORMAT_UNKNOWN);
}

static void test_load_from_file(void) {
  char path[] = "/tmp/vlmc_test_image_XXXXXX.png";
  int fd = mkstemps(path, 4);
  EXPECT_TRUE(fd >= 0);
  if (fd < 0) return;
  close(fd);
  bytes_t png = small_rgb_png();
  EXPECT_OK(vlmc_file_write_all(path, png.data, png.len));
  vlmc_image_t image;
  EXPECT_OK(vlmc_image_load(path, &image));
  EXPECT_EQ_INT(image.width, 4);
  EXPECT_EQ_INT(image.height, 3);
  vlmc_image_destroy(&image);
  EXPECT_OK(vlmc_file_write_all(path, png.data, 30));
  vlmc_status_t s = vlmc_image_load(path, &image);
  EXPECT_TRUE(s && strstr(vlmc_status_message(s), path) != NULL);
  vlmc_status_free(s);
  remove(path);
  EXPECT_ERROR(vlmc_image_load("/nonexistent/cat.png", &image), "/nonexistent/cat.png");
  free(png.data);
}

int main(void) {
  RUN_TEST(test_png_all_color_types_and_depths);
  RUN_TEST(test_png_truncated);
  RUN_TEST(test_png_bad_crc);
  RUN_TEST(test_png_bad_sizes);
  RUN_TEST(test_png_palette_index_out_of_range);
  RUN_TEST(test_jpeg_rgb_and_grey);
  RUN_TEST(test_jpeg_cmyk);
  RUN_TEST(test_jpeg_malformed);
  RUN_TEST(test_not_an_image);
  RUN_TEST(test_load_from_file);
  return TEST_SUMMARY();
}
