/* Qwen2-VL preprocessing: smart_resize against transformers' function (spec §2.1 examples and
 * values computed with transformers 5.x's formula in Python), the resize against Pillow's
 * output and a floating-point model, the normalize table, the exact patch order of spec §2.4,
 * and the whole pipeline with its errors. Parity with transformers' torchvision path on real
 * images is test_preprocess_parity.c. */
#include <stdlib.h>
#include <string.h>

#include "frontend/preprocess.h"
#include "tests/unit/test.h"

/* ---- smart_resize ---- */

typedef struct {
  int64_t h, w, min_pixels, max_pixels, want_h, want_w;
} resize_case_t;

static void test_smart_resize_examples(void) {
  static const resize_case_t cases[] = {
      /* spec §2.1's checked examples */
      {224, 224, 3136, 12845056, 224, 224},
      {70, 70, 3136, 12845056, 56, 56}, /* 2.5 rounds half to even: 2 */
      {42, 42, 3136, 12845056, 56, 56}, /* 1.5 rounds to 2 */
      {484, 1024, 3136, 12845056, 476, 1036},
      {1800, 1350, 3136, 12845056, 1792, 1344},
      {480, 640, 3136, 12845056, 476, 644},
      {1080, 1920, 3136, 12845056, 1092, 1932},
      {4000, 3000, 3136, 12845056, 4004, 2996},
      {20, 20, 3136, 12845056, 56, 56},
      {10, 2000, 3136, 12845056, 28, 812},
      /* the fixture images and a few more, from transformers' formula in Python */
      {1500, 2000, 3136, 12845056, 1512, 1988},
      {333, 501, 3136, 12845056, 336, 504},
      {900, 30, 3136, 12845056, 896, 28},
      {240, 320, 3136, 12845056, 252, 308},
      {1, 1, 3136, 12845056, 56, 56},
      {1, 200, 3136, 12845056, 28, 812},
      {7000, 9000, 3136, 12845056, 3136, 4060}, /* max_pixels branch */
      {100000, 1000, 3136, 12845056, 35840, 336},
      {14, 14, 3136, 3136, 56, 56},
      /* the 5.x clamp: floor(...) gives 0 rows of patches, clamped to one factor */
      {50, 5000, 3136, 3136, 28, 560},
      {30, 5000, 784, 12544, 28, 1428},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const resize_case_t *c = &cases[i];
    int64_t h = -1, w = -1;
    EXPECT_OK(vlmc_preprocess_smart_resize(c->h, c->w, 28, c->min_pixels, c->max_pixels, &h,
                                           &w));
    if (h != c->want_h || w != c->want_w)
      TEST_FAIL_("smart_resize(%lld, %lld) = (%lld, %lld), expected (%lld, %lld)",
                 (long long)c->h, (long long)c->w, (long long)h, (long long)w,
                 (long long)c->want_h, (long long)c->want_w);
  }
}

static void test_smart_resize_refusals(void) {
  int64_t h = 0, w = 0;
  /* 2000 / 10 = 200 is allowed (above); 2001 / 10 is not. */
  EXPECT_ERROR(vlmc_preprocess_smart_resize(10, 2001, 28, 3136, 12845056, &h, &w),
               "aspect ratio 200.1");
  EXPECT_ERROR(vlmc_preprocess_smart_resize(3000, 1, 28, 3136, 12845056, &h, &w),
               "more than 200");
  EXPECT_ERROR(vlmc_preprocess_smart_resize(0, 10, 28, 3136, 12845056, &h, &w),
               "must be positive");
  EXPECT_ERROR(vlmc_preprocess_smart_resize(10, -3, 28, 3136, 12845056, &h, &w),
               "must be positive");
}

/* ---- parameters ---- */

static void test_params(void) {
  vlmc_preprocess_params_t p;
  vlmc_preprocess_params_init(&p);
  EXPECT_OK(vlmc_preprocess_params_check(&p));
  EXPECT_EQ_INT(vlmc_preprocess_row_width(&p), 1176);
  EXPECT_EQ_INT(p.min_pixels, 3136);
  EXPECT_EQ_INT(p.max_pixels, 12845056);

  vlmc_preprocess_params_t bad = p;
  bad.min_pixels = 5000;
  bad.max_pixels = 4000;
  EXPECT_ERROR(vlmc_preprocess_params_check(&bad), "min_pixels (5000) is larger than max_pixels");
  bad = p;
  bad.patch_size = 0;
  EXPECT_ERROR(vlmc_preprocess_params_check(&bad), "patch_size: 0 is outside");
  bad = p;
  bad.image_std[1] = 0.0;
  EXPECT_ERROR(vlmc_preprocess_params_check(&bad), "image_std[1] (G)");
  bad = p;
  bad.image_mean[2] = NAN;
  EXPECT_ERROR(vlmc_preprocess_params_check(&bad), "image_mean[2] (B)");
  bad = p;
  bad.rescale_factor = -1.0;
  EXPECT_ERROR(vlmc_preprocess_params_check(&bad), "rescale_factor");
  bad = p;
  bad.resample = (vlmc_resample_t)7;
  EXPECT_ERROR(vlmc_preprocess_params_check(&bad), "resample: unknown value 7");
}

static void test_normalize_table(void) {
  vlmc_preprocess_params_t p;
  vlmc_preprocess_params_init(&p);
  float tv[3][256], pil[3][256];
  vlmc_preprocess_normalize_table(&p, tv);
  p.resample = VLMC_RESAMPLE_PIL;
  vlmc_preprocess_normalize_table(&p, pil);
  /* (0 - mean) / std and (1 - mean) / std for the CLIP constants. */
  EXPECT_NEAR(tv[0][0], -1.79226253, 1e-6);
  EXPECT_NEAR(tv[0][255], 1.93033625, 1e-6);
  EXPECT_NEAR(tv[2][0], -1.48021972, 1e-6);
  EXPECT_NEAR(tv[2][255], 2.14589699, 1e-6);
  /* The two references round differently, by at most a few f32 ulps. */
  double worst = 0.0;
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) {
      double d = fabs((double)tv[c][v] - (double)pil[c][v]);
      if (d > worst) worst = d;
      EXPECT_NEAR(tv[c][v], ((v / 255.0) - p.image_mean[c]) / p.image_std[c], 1e-6);
    }
  EXPECT_TRUE(worst < 1e-6);
}

/* ---- resize ---- */

/* The same deterministic bytes as the Python generator of the Pillow expectations below. */
static void fill_lcg(vlmc_image_t *image, uint32_t seed) {
  uint32_t x = seed;
  size_t n = (size_t)image->width * (size_t)image->height * 3;
  for (size_t i = 0; i < n; ++i) {
    x = (uint32_t)(((uint64_t)x * 1103515245u + 12345u) % (UINT64_C(1) << 31));
    image->pixels[i] = (uint8_t)((x >> 16) & 255);
  }
}

/* Pillow 9.4 Image.fromarray(src).resize((w, h), Image.BICUBIC) of the 11 x 7 LCG image. */
static const uint8_t pil_5x9[] = {
    163, 129, 174, 213, 172, 191, 104, 63,  176, 96,  95,  86,  79,  125, 184, 161, 86,  150,
    172, 89,  105, 166, 69,  151, 81,  141, 149, 86,  142, 105, 181, 105, 115, 158, 118, 89,
    141, 136, 148, 105, 169, 115, 145, 123, 87,  183, 157, 98,  173, 186, 125, 62,  173, 157,
    144, 152, 37,  185, 80,  126, 121, 145, 117, 171, 100, 101, 56,  62,  136, 132, 107, 70,
    111, 67,  127, 200, 142, 106, 138, 85,  93,  79,  88,  59,  46,  131, 93,  67,  140, 71,
    156, 118, 168, 108, 98,  153, 148, 175, 114, 76,  123, 92,  110, 148, 51,  116, 104, 159,
    114, 111, 173, 169, 195, 141, 102, 142, 115, 170, 141, 90,  152, 112, 56,  147, 109, 122,
    123, 126, 74,  64,  199, 163, 193, 154, 151,
};
static const uint8_t pil_11x3[] = {
    131, 68,  102, 178, 122, 198, 227, 168, 95,  155, 136, 114, 142, 70,  176, 162, 42,
    150, 91,  226, 161, 91,  72,  84,  110, 170, 120, 143, 91,  122, 78,  146, 131, 164,
    88,  134, 178, 168, 89,  135, 185, 136, 170, 87,  49,  137, 66,  183, 61,  136, 103,
    47,  146, 88,  129, 98,  88,  117, 158, 28,  127, 99,  167, 111, 77,  54,  188, 118,
    155, 137, 94,  97,  63,  147, 156, 167, 65,  161, 131, 122, 116, 131, 177, 87,  173,
    187, 117, 16,  91,  149, 88,  211, 84,  162, 110, 116, 154, 164, 74,
};

static void expect_resize_equals(const vlmc_image_t *src, int32_t w, int32_t h,
                                 vlmc_resample_t resample, const uint8_t *want) {
  vlmc_image_t out;
  EXPECT_OK(vlmc_preprocess_resize(src, w, h, resample, &out));
  if (!out.pixels) return;
  EXPECT_EQ_INT(out.width, w);
  EXPECT_EQ_INT(out.height, h);
  size_t n = (size_t)w * (size_t)h * 3, mismatches = 0;
  for (size_t i = 0; i < n; ++i) mismatches += out.pixels[i] != want[i];
  EXPECT_EQ_INT(mismatches, 0);
  vlmc_image_destroy(&out);
}

static void test_resize_matches_pillow(void) {
  vlmc_image_t src;
  EXPECT_OK(vlmc_image_create(11, 7, &src));
  fill_lcg(&src, 1);
  expect_resize_equals(&src, 5, 9, VLMC_RESAMPLE_PIL, pil_5x9);   /* both axes */
  expect_resize_equals(&src, 11, 3, VLMC_RESAMPLE_PIL, pil_11x3); /* vertical only */
  vlmc_image_destroy(&src);
}

/* A double-precision separable model with the same kernel and the same clamping of the
 * first pass, but no fixed-point weights and no rounding: both paths must stay within two
 * uint8 steps of it (the first pass's rounding, amplified by the second pass's lobes, plus
 * the final rounding). */
static double cubic(double x) {
  x = fabs(x);
  if (x < 1.0) return (1.5 * x - 2.5) * x * x + 1.0;
  if (x < 2.0) return ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0;
  return 0.0;
}

static double clamp255(double v) { return v < 0 ? 0 : v > 255 ? 255 : v; }

static void reference_weights(int in, int out, int i, int *first, int *count, double *w) {
  double scale = (double)in / out, fs = scale > 1 ? scale : 1, support = 2.0 * fs;
  double center = scale * (i + 0.5), total = 0;
  int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
  if (lo < 0) lo = 0;
  if (hi > in) hi = in;
  for (int j = lo; j < hi; ++j) total += w[j - lo] = cubic((j - center + 0.5) / fs);
  for (int j = lo; j < hi; ++j) w[j - lo] /= total;
  *first = lo;
  *count = hi - lo;
}

static double reference_pixel(const vlmc_image_t *src, int w, int h, int x, int y, int c) {
  double wx[64], wy[64], acc = 0;
  int fx, nx, fy, ny;
  reference_weights(src->width, w, x, &fx, &nx, wx);
  reference_weights(src->height, h, y, &fy, &ny, wy);
  for (int j = 0; j < ny; ++j) {
    double row = 0;
    for (int i = 0; i < nx; ++i)
      row += wx[i] * src->pixels[((size_t)(fy + j) * src->width + fx + i) * 3 + c];
    acc += wy[j] * clamp255(row);
  }
  return clamp255(acc);
}

static void test_resize_close_to_float_model(void) {
  static const int32_t sizes[][2] = {{9, 13}, {31, 5}, {64, 40}, {4, 4}};
  vlmc_image_t src;
  EXPECT_OK(vlmc_image_create(19, 17, &src));
  fill_lcg(&src, 7);
  for (int r = 0; r < 2; ++r)
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
      int32_t w = sizes[s][0], h = sizes[s][1];
      vlmc_image_t out;
      EXPECT_OK(vlmc_preprocess_resize(&src, w, h, (vlmc_resample_t)r, &out));
      if (!out.pixels) continue;
      double worst = 0;
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          for (int c = 0; c < 3; ++c) {
            double d = fabs(out.pixels[((size_t)y * w + x) * 3 + c] -
                            reference_pixel(&src, w, h, x, y, c));
            if (d > worst) worst = d;
          }
      if (worst > 2.0) TEST_FAIL_("resample %d to %dx%d: off by %g", r, w, h, worst);
      vlmc_image_destroy(&out);
    }
  vlmc_image_destroy(&src);
}

static void test_resize_keeps_flat_images_flat(void) {
  static const uint8_t levels[] = {0, 77, 255};
  for (size_t l = 0; l < sizeof levels; ++l) {
    vlmc_image_t src;
    EXPECT_OK(vlmc_image_create(37, 23, &src));
    memset(src.pixels, levels[l], 37 * 23 * 3);
    for (int r = 0; r < 2; ++r) {
      vlmc_image_t out;
      EXPECT_OK(vlmc_preprocess_resize(&src, 300, 5, (vlmc_resample_t)r, &out));
      size_t off = 0;
      for (size_t i = 0; out.pixels && i < 300 * 5 * 3; ++i) off += out.pixels[i] != levels[l];
      EXPECT_EQ_INT(off, 0);
      vlmc_image_destroy(&out);
    }
    vlmc_image_destroy(&src);
  }
}

static void test_resize_same_size_and_errors(void) {
  vlmc_image_t src, out;
  EXPECT_OK(vlmc_image_create(6, 4, &src));
  fill_lcg(&src, 3);
  EXPECT_OK(vlmc_preprocess_resize(&src, 6, 4, VLMC_RESAMPLE_TORCHVISION, &out));
  EXPECT_TRUE(out.pixels && memcmp(out.pixels, src.pixels, 6 * 4 * 3) == 0);
  vlmc_image_destroy(&out);
  EXPECT_ERROR(vlmc_preprocess_resize(&src, 0, 4, VLMC_RESAMPLE_PIL, &out), "must be positive");
  vlmc_image_t empty = {0, 0, NULL};
  EXPECT_ERROR(vlmc_preprocess_resize(&empty, 4, 4, VLMC_RESAMPLE_PIL, &out), "empty image");
  vlmc_image_destroy(&src);
}

/* ---- patchify (spec §2.4) ---- */

/* Pixel (x, y) holds R = x, G = y, B = 7; the identity table keeps the levels. */
static void make_coordinate_image(int32_t w, int32_t h, vlmc_image_t *out) {
  EXPECT_OK(vlmc_image_create(w, h, out));
  for (int32_t y = 0; y < h; ++y)
    for (int32_t x = 0; x < w; ++x) {
      uint8_t *p = out->pixels + ((size_t)y * w + x) * 3;
      p[0] = (uint8_t)x;
      p[1] = (uint8_t)y;
      p[2] = 7;
    }
}

static void identity_table(float table[3][256]) {
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) table[c][v] = (float)(v + 1000 * c);
}

/* Checks every element against the spec's decomposition of r and f. */
static void check_patch_order(int32_t P, int32_t T, int32_t m, int32_t w, int32_t h) {
  vlmc_preprocess_params_t params;
  vlmc_preprocess_params_init(&params);
  params.patch_size = P;
  params.temporal_patch_size = T;
  params.merge_size = m;
  vlmc_image_t image;
  make_coordinate_image(w, h, &image);
  float table[3][256];
  identity_table(table);
  int32_t gh = h / P, gw = w / P;
  int64_t width = vlmc_preprocess_row_width(&params);
  float *rows = malloc((size_t)(gh * gw * width) * sizeof(float));
  EXPECT_OK(vlmc_preprocess_patchify(&image, &params, table, rows));
  long bad = 0;
  for (int32_t r = 0; r < gh * gw; ++r) {
    int32_t mw = r % m, mh = (r / m) % m, bw = (r / (m * m)) % (gw / m),
            bh = r / (m * m) / (gw / m);
    for (int64_t f = 0; f < width; ++f) {
      int32_t px = (int32_t)(f % P), py = (int32_t)(f / P % P), c = (int32_t)(f / P / P / T);
      int32_t y = (bh * m + mh) * P + py, x = (bw * m + mw) * P + px;
      float want = c == 0 ? (float)x : c == 1 ? (float)(1000 + y) : 2007.0f;
      bad += rows[(size_t)r * (size_t)width + (size_t)f] != want;
    }
  }
  if (bad) TEST_FAIL_("P=%d T=%d m=%d %dx%d: %ld elements out of place", P, T, m, w, h, bad);
  free(rows);
  vlmc_image_destroy(&image);
}

static void test_patchify_order(void) {
  check_patch_order(14, 2, 2, 56, 84);  /* Qwen2.5-VL, a 2 x 3 grid of merge blocks */
  check_patch_order(14, 2, 2, 112, 28); /* one block row */
  check_patch_order(2, 3, 2, 12, 8);    /* other sizes, temporal 3 */
  check_patch_order(3, 1, 1, 9, 6);     /* no merge, no temporal repeat */
}

static void test_patchify_refuses_bad_sizes(void) {
  vlmc_preprocess_params_t params;
  vlmc_preprocess_params_init(&params);
  vlmc_image_t image;
  make_coordinate_image(42, 28, &image);
  float table[3][256], rows[1];
  identity_table(table);
  EXPECT_ERROR(vlmc_preprocess_patchify(&image, &params, table, rows), "not a multiple of");
  vlmc_image_destroy(&image);
}

/* ---- the pipeline ---- */

static void test_pipeline_two_images(void) {
  vlmc_preprocess_params_t params;
  vlmc_preprocess_params_init(&params);
  vlmc_image_t images[2];
  make_coordinate_image(56, 56, &images[0]); /* already 56 x 56: no resize */
  make_coordinate_image(100, 60, &images[1]);
  vlmc_preprocess_output_t out;
  EXPECT_OK(vlmc_preprocess_images(images, NULL, 2, &params, &out));
  EXPECT_EQ_INT(out.num_images, 2);
  EXPECT_EQ_INT(out.row_width, 1176);
  /* 56x56 -> (1,4,4); 100x60 -> smart_resize(60,100) = (56,112) -> (1,4,8) */
  static const int64_t want[6] = {1, 4, 4, 1, 4, 8};
  for (int i = 0; out.image_grid_thw && i < 6; ++i) EXPECT_EQ_INT(out.image_grid_thw[i], want[i]);
  EXPECT_EQ_INT(out.num_rows, 16 + 32);
  float table[3][256];
  vlmc_preprocess_normalize_table(&params, table);
  /* Row 3 = bottom-right patch of the first block: pixel (14, 14) first; then feature
   * 1*2*196 = 392 is channel G at (14, 14); feature 196 is the temporal copy of R. */
  if (out.pixel_values) {
    const float *row3 = out.pixel_values + 3 * 1176;
    EXPECT_TRUE(row3[0] == table[0][14]);
    EXPECT_TRUE(row3[196] == table[0][14]);
    EXPECT_TRUE(row3[392] == table[1][14]);
    EXPECT_TRUE(row3[13] == table[0][27]);
    EXPECT_TRUE(row3[14] == table[0][14]); /* second patch row: x back to 14, y = 15 */
    EXPECT_TRUE(row3[392 + 14] == table[1][15]);
  }
  vlmc_preprocess_output_destroy(&out);
  vlmc_image_destroy(&images[0]);
  vlmc_image_destroy(&images[1]);
}

static void test_pipeline_errors_name_the_image(void) {
  vlmc_preprocess_params_t params;
  vlmc_preprocess_params_init(&params);
  vlmc_image_t images[2];
  make_coordinate_image(30, 30, &images[0]);
  make_coordinate_image(250, 1, &images[1]);
  const char *names[2] = {"ok.png", "strip.png"};
  vlmc_preprocess_output_t out;
  EXPECT_ERROR(vlmc_preprocess_images(images, names, 2, &params, &out),
               "strip.png: aspect ratio 250.0");
  EXPECT_TRUE(out.pixel_values == NULL && out.num_rows == 0);
  EXPECT_ERROR(vlmc_preprocess_images(images, NULL, 2, &params, &out), "image 1: aspect");
  EXPECT_ERROR(vlmc_preprocess_images(images, names, 0, &params, &out), "no images");
  params.max_pixels = 10;
  EXPECT_ERROR(vlmc_preprocess_images(images, names, 1, &params, &out), "min_pixels (3136)");
  vlmc_image_destroy(&images[0]);
  vlmc_image_destroy(&images[1]);
}

int main(void) {
  RUN_TEST(test_smart_resize_examples);
  RUN_TEST(test_smart_resize_refusals);
  RUN_TEST(test_params);
  RUN_TEST(test_normalize_table);
  RUN_TEST(test_resize_matches_pillow);
  RUN_TEST(test_resize_close_to_float_model);
  RUN_TEST(test_resize_keeps_flat_images_flat);
  RUN_TEST(test_resize_same_size_and_errors);
  RUN_TEST(test_patchify_order);
  RUN_TEST(test_patchify_refuses_bad_sizes);
  RUN_TEST(test_pipeline_two_images);
  RUN_TEST(test_pipeline_errors_name_the_image);
  return TEST_SUMMARY();
}
