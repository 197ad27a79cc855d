/* Qwen2-VL image preprocessing; what each step reproduces is in frontend/preprocess.h and
 * docs/preprocessing.md. Floating-point expressions below are written in the reference's
 * order on purpose (and rely on C11's default of no FMA contraction across operations):
 * a different association would change the last bit of a weight or a pixel. */
#include "frontend/preprocess.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support/checked_math.h"

/* OpenAI CLIP normalization constants, as in the Qwen2.5-VL preprocessor_config.json. */
static const double clip_mean[3] = {0.48145466, 0.4578275, 0.40821073};
static const double clip_std[3] = {0.26862954, 0.26130258, 0.27577711};

void vlmc_preprocess_params_init(vlmc_preprocess_params_t *out_params) {
  memset(out_params, 0, sizeof *out_params);
  out_params->min_pixels = 3136;
  out_params->max_pixels = 12845056;
  out_params->patch_size = 14;
  out_params->temporal_patch_size = 2;
  out_params->merge_size = 2;
  memcpy(out_params->image_mean, clip_mean, sizeof clip_mean);
  memcpy(out_params->image_std, clip_std, sizeof clip_std);
  out_params->rescale_factor = 1.0 / 255.0;
  out_params->resample = VLMC_RESAMPLE_TORCHVISION;
}

static vlmc_status_t check_range(const char *field, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "preprocessing parameter %s: %lld is outside [%lld, %lld]", field,
                            (long long)value, (long long)lo, (long long)hi);
  return NULL;
}

static vlmc_status_t check_channel_constants(const vlmc_preprocess_params_t *params) {
  static const char *channel[3] = {"R", "G", "B"};
  for (int c = 0; c < 3; ++c) {
    if (!isfinite(params->image_mean[c]))
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "preprocessing parameter image_mean[%d] (%s): expected a finite "
                              "number", c, channel[c]);
    if (!isfinite(params->image_std[c]) || params->image_std[c] == 0.0)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "preprocessing parameter image_std[%d] (%s): expected a finite "
                              "non-zero number, got %g", c, channel[c], params->image_std[c]);
  }
  if (!isfinite(params->rescale_factor) || !(params->rescale_factor > 0.0))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "preprocessing parameter rescale_factor: expected a positive "
                            "number, got %g", params->rescale_factor);
  return NULL;
}

vlmc_status_t vlmc_preprocess_params_check(const vlmc_preprocess_params_t *params) {
  /* Bounds keep every derived size (factor, row width, pixel counts) far from overflow. */
  const int64_t max_area = INT64_C(1) << 40;
  VLMC_RETURN_IF_ERROR(check_range("patch_size", params->patch_size, 1, 1024));
  VLMC_RETURN_IF_ERROR(check_range("temporal_patch_size", params->temporal_patch_size, 1, 64));
  VLMC_RETURN_IF_ERROR(check_range("merge_size", params->merge_size, 1, 64));
  VLMC_RETURN_IF_ERROR(check_range("min_pixels", params->min_pixels, 1, max_area));
  VLMC_RETURN_IF_ERROR(check_range("max_pixels", params->max_pixels, 1, max_area));
  if (params->min_pixels > params->max_pixels)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "preprocessing parameters: min_pixels (%lld) is larger than "
                            "max_pixels (%lld)",
                            (long long)params->min_pixels, (long long)params->max_pixels);
  if (params->resample != VLMC_RESAMPLE_TORCHVISION && params->resample != VLMC_RESAMPLE_PIL)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "preprocessing parameter resample: unknown value %d",
                            (int)params->resample);
  return check_channel_constants(params);
}

int64_t vlmc_preprocess_row_width(const vlmc_preprocess_params_t *params) {
  int64_t p = params->patch_size;
  return 3 * (int64_t)params->temporal_patch_size * p * p;
}

/* ---- smart_resize ------------------------------------------------------------------- */

vlmc_status_t vlmc_preprocess_smart_resize(int64_t height, int64_t width, int64_t factor,
                                           int64_t min_pixels, int64_t max_pixels,
                                           int64_t *out_height, int64_t *out_width) {
  const int64_t limit = INT64_C(1) << 31;
  if (height < 1 || width < 1 || height > limit || width > limit || factor < 1)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "smart_resize: image size %lld x %lld (height x width) and factor "
                            "%lld must be positive and at most 2^31",
                            (long long)height, (long long)width, (long long)factor);
  double h = (double)height, w = (double)width, f = (double)factor;
  double ratio = (h > w ? h : w) / (h < w ? h : w);
  if (ratio > 200.0)
    return vlmc_status_make(VLMC_OUT_OF_RANGE,
                            "aspect ratio %.1f of a %lld x %lld image (width x height) is more "
                            "than 200, which Qwen2-VL preprocessing refuses",
                            ratio, (long long)width, (long long)height);
  /* Python's round() is round-half-to-even: nearbyint in the default rounding mode. */
  int64_t h_bar = factor * (int64_t)nearbyint(h / f);
  int64_t w_bar = factor * (int64_t)nearbyint(w / f);
  if (h_bar * w_bar > max_pixels) {
    double beta = sqrt((double)(height * width) / (double)max_pixels);
    h_bar = factor * (int64_t)floor(h / beta / f);
    w_bar = factor * (int64_t)floor(w / beta / f);
    if (h_bar < factor) h_bar = factor; /* the transformers 5.x clamp */
    if (w_bar < factor) w_bar = factor;
  } else if (h_bar * w_bar < min_pixels) {
    double beta = sqrt((double)min_pixels / (double)(height * width));
    h_bar = factor * (int64_t)ceil(h * beta / f);
    w_bar = factor * (int64_t)ceil(w * beta / f);
  }
  if (h_bar < factor || w_bar < factor || h_bar > INT32_MAX || w_bar > INT32_MAX)
    return vlmc_status_make(VLMC_OUT_OF_RANGE,
                            "smart_resize: a %lld x %lld image (width x height) would be "
                            "resized to %lld x %lld",
                            (long long)width, (long long)height, (long long)w_bar,
                            (long long)h_bar);
  *out_height = h_bar;
  *out_width = w_bar;
  return NULL;
}

/* ---- antialiased bicubic resize ------------------------------------------------------- */

/* torch's HelperInterpCubic::aa_filter with a = -0.5 (UpSampleKernel.cpp, cubic_convolution1
 * and cubic_convolution2 of UpSample.h). */
static double cubic_filter_torch(double x) {
  const double a = -0.5;
  x = fabs(x);
  if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

/* Pillow's bicubic_filter (libImaging/Resample.c): the same polynomial, another association. */
static double cubic_filter_pil(double x) {
  const double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

/* One axis of a separable resize: output i reads inputs first[i] .. first[i]+count[i]-1 with
 * fixed-point weights (`precision` fraction bits). */
typedef struct {
  int32_t out_size;
  int32_t taps; /* weights per output (the row stride of `weights`) */
  int precision;
  int32_t *first;
  int32_t *count;
  int32_t *weights;
  double *real_weights; /* scratch: normalised weights before quantisation */
} axis_kernel_t;

static void axis_kernel_free(axis_kernel_t *kernel) {
  free(kernel->first);
  free(kernel->count);
  free(kernel->weights);
  free(kernel->real_weights);
  memset(kernel, 0, sizeof *kernel);
}

/* Computes one output's taps exactly as both references do (torch's
 * _compute_indices_min_size_weights_aa and Pillow's precompute_coeffs agree step by step)
 * and returns the largest normalised weight. */
static double axis_kernel_row(axis_kernel_t *kernel, int32_t i, int32_t in_size, double scale,
                              double support, double invscale, double (*filter)(double)) {
  double center = scale * (i + 0.5);
  int64_t xmin = (int64_t)(center - support + 0.5);
  if (xmin < 0) xmin = 0;
  int64_t xmax = (int64_t)(center + support + 0.5);
  if (xmax > in_size) xmax = in_size;
  int64_t count = xmax - xmin;
  if (count < 0) count = 0;
  if (count > kernel->taps) count = kernel->taps;
  double *w = kernel->real_weights + (size_t)i * (size_t)kernel->taps;
  double total = 0.0, largest = 0.0;
  for (int64_t j = 0; j < count; ++j) {
    w[j] = filter(((double)(j + xmin) - center + 0.5) * invscale);
    total += w[j];
  }
  for (int64_t j = 0; total != 0.0 && j < count; ++j) {
    w[j] /= total;
    if (w[j] > largest) largest = w[j];
  }
  for (int64_t j = count; j < kernel->taps; ++j) w[j] = 0.0;
  kernel->first[i] = (int32_t)xmin;
  kernel->count[i] = (int32_t)count;
  return largest;
}

/* torch picks the largest precision whose rounded maximum weight still fits int16 (then the
 * products fit int32); Pillow always uses 22 bits in int32. */
static int torch_weight_precision(double largest_weight) {
  int precision;
  for (precision = 0; precision < 22; ++precision) {
    int next = (int)(0.5 + largest_weight * (1 << (precision + 1)));
    if (next >= (1 << 15)) break;
  }
  return precision;
}

static void axis_kernel_quantise(axis_kernel_t *kernel) {
  size_t n = (size_t)kernel->out_size * (size_t)kernel->taps;
  double one = (double)(1 << kernel->precision);
  for (size_t k = 0; k < n; ++k) {
    double v = kernel->real_weights[k] * one;
    kernel->weights[k] = v < 0 ? (int32_t)(-0.5 + v) : (int32_t)(0.5 + v);
  }
}

static vlmc_status_t axis_kernel_build(int32_t in_size, int32_t out_size,
                                       vlmc_resample_t resample, axis_kernel_t *out_kernel) {
  memset(out_kernel, 0, sizeof *out_kernel);
  double scale = (double)in_size / (double)out_size;
  double filterscale = scale >= 1.0 ? scale : 1.0;
  double support = 2.0 * filterscale; /* bicubic support 2, widened when downscaling */
  double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  double (*filter)(double) =
      resample == VLMC_RESAMPLE_PIL ? cubic_filter_pil : cubic_filter_torch;
  out_kernel->out_size = out_size;
  out_kernel->taps = (int32_t)ceil(support) * 2 + 1;
  size_t n = (size_t)out_size * (size_t)out_kernel->taps;
  out_kernel->first = malloc((size_t)out_size * sizeof(int32_t));
  out_kernel->count = malloc((size_t)out_size * sizeof(int32_t));
  out_kernel->weights = malloc(n * sizeof(int32_t));
  out_kernel->real_weights = malloc(n * sizeof(double));
  if (!out_kernel->first || !out_kernel->count || !out_kernel->weights ||
      !out_kernel->real_weights) {
    axis_kernel_free(out_kernel);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory for resize weights");
  }
  double largest = 0.0;
  for (int32_t i = 0; i < out_size; ++i) {
    double row_largest =
        axis_kernel_row(out_kernel, i, in_size, scale, support, invscale, filter);
    if (row_largest > largest) largest = row_largest;
  }
  out_kernel->precision =
      resample == VLMC_RESAMPLE_PIL ? 22 : torch_weight_precision(largest);
  assert(out_kernel->precision >= 1);
  axis_kernel_quantise(out_kernel);
  return NULL;
}

/* Both references round each pass to uint8: add half, shift, clamp to 0..255. */
static uint8_t fixed_to_u8(int64_t acc, int precision) {
  if (acc < 0) return 0;
  acc >>= precision;
  return (uint8_t)(acc > 255 ? 255 : acc);
}

static void resample_horizontal(const vlmc_image_t *in, const axis_kernel_t *kernel,
                                vlmc_image_t *out) {
  const int64_t half = INT64_C(1) << (kernel->precision - 1);
  for (int32_t y = 0; y < in->height; ++y) {
    const uint8_t *src = in->pixels + (size_t)y * (size_t)in->width * 3;
    uint8_t *dst = out->pixels + (size_t)y * (size_t)out->width * 3;
    for (int32_t x = 0; x < out->width; ++x) {
      const int32_t *w = kernel->weights + (size_t)x * (size_t)kernel->taps;
      const uint8_t *s = src + (size_t)kernel->first[x] * 3;
      int64_t r = half, g = half, b = half;
      for (int32_t j = 0; j < kernel->count[x]; ++j) {
        r += (int64_t)s[3 * j + 0] * w[j];
        g += (int64_t)s[3 * j + 1] * w[j];
        b += (int64_t)s[3 * j + 2] * w[j];
      }
      dst[3 * x + 0] = fixed_to_u8(r, kernel->precision);
      dst[3 * x + 1] = fixed_to_u8(g, kernel->precision);
      dst[3 * x + 2] = fixed_to_u8(b, kernel->precision);
    }
  }
}

static vlmc_status_t resample_vertical(const vlmc_image_t *in, const axis_kernel_t *kernel,
                                       vlmc_image_t *out) {
  size_t row = (size_t)in->width * 3;
  int64_t *acc = malloc(row * sizeof(int64_t));
  if (!acc) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory resizing an image");
  const int64_t half = INT64_C(1) << (kernel->precision - 1);
  for (int32_t y = 0; y < out->height; ++y) {
    const int32_t *w = kernel->weights + (size_t)y * (size_t)kernel->taps;
    for (size_t k = 0; k < row; ++k) acc[k] = half;
    for (int32_t j = 0; j < kernel->count[y]; ++j) {
      const uint8_t *src = in->pixels + (size_t)(kernel->first[y] + j) * row;
      for (size_t k = 0; k < row; ++k) acc[k] += (int64_t)src[k] * w[j];
    }
    uint8_t *dst = out->pixels + (size_t)y * row;
    for (size_t k = 0; k < row; ++k) dst[k] = fixed_to_u8(acc[k], kernel->precision);
  }
  free(acc);
  return NULL;
}

static vlmc_status_t resize_horizontal(const vlmc_image_t *in, int32_t width,
                                       vlmc_resample_t resample, vlmc_image_t *out) {
  axis_kernel_t kernel;
  VLMC_RETURN_IF_ERROR(axis_kernel_build(in->width, width, resample, &kernel));
  vlmc_status_t status = vlmc_image_create(width, in->height, out);
  if (!status) resample_horizontal(in, &kernel, out);
  axis_kernel_free(&kernel);
  return status;
}

static vlmc_status_t resize_vertical(const vlmc_image_t *in, int32_t height,
                                     vlmc_resample_t resample, vlmc_image_t *out) {
  axis_kernel_t kernel;
  VLMC_RETURN_IF_ERROR(axis_kernel_build(in->height, height, resample, &kernel));
  vlmc_status_t status = vlmc_image_create(in->width, height, out);
  if (!status) status = resample_vertical(in, &kernel, out);
  if (status) vlmc_image_destroy(out);
  axis_kernel_free(&kernel);
  return status;
}

static vlmc_status_t copy_image(const vlmc_image_t *in, vlmc_image_t *out) {
  VLMC_RETURN_IF_ERROR(vlmc_image_create(in->width, in->height, out));
  memcpy(out->pixels, in->pixels, (size_t)in->width * (size_t)in->height * 3);
  return NULL;
}

static vlmc_status_t check_image(const vlmc_image_t *image) {
  if (!image->pixels || image->width < 1 || image->height < 1)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "empty image (%d x %d)",
                            (int)image->width, (int)image->height);
  return NULL;
}

vlmc_status_t vlmc_preprocess_resize(const vlmc_image_t *image, int32_t width, int32_t height,
                                     vlmc_resample_t resample, vlmc_image_t *out_image) {
  memset(out_image, 0, sizeof *out_image);
  VLMC_RETURN_IF_ERROR(check_image(image));
  if (width < 1 || height < 1)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "resize to %d x %d: sizes must be positive",
                            (int)width, (int)height);
  /* Like both references, skip an axis whose size does not change (no rounding there). */
  if (width == image->width && height == image->height) return copy_image(image, out_image);
  if (width == image->width) return resize_vertical(image, height, resample, out_image);
  if (height == image->height) return resize_horizontal(image, width, resample, out_image);
  vlmc_image_t temp;
  VLMC_RETURN_IF_ERROR(resize_horizontal(image, width, resample, &temp));
  vlmc_status_t status = resize_vertical(&temp, height, resample, out_image);
  vlmc_image_destroy(&temp);
  return status;
}

/* ---- rescale, normalize, patchify ----------------------------------------------------- */

void vlmc_preprocess_normalize_table(const vlmc_preprocess_params_t *params,
                                     float out_table[3][256]) {
  if (params->resample == VLMC_RESAMPLE_PIL) {
    /* numpy: x.astype(f64) * scale -> f32, then (x - f32(mean)) / f32(std) in f32. */
    for (int c = 0; c < 3; ++c) {
      float mean = (float)params->image_mean[c], std = (float)params->image_std[c];
      for (int v = 0; v < 256; ++v) {
        float x = (float)((double)v * params->rescale_factor);
        out_table[c][v] = (x - mean) / std;
      }
    }
    return;
  }
  /* torchvision backend: mean and std become f32 tensors times f32(1 / rescale_factor), and
   * tvF.normalize computes (x - mean) / std on the f32 image. */
  float inverse = (float)(1.0 / params->rescale_factor);
  for (int c = 0; c < 3; ++c) {
    float mean = (float)params->image_mean[c] * inverse;
    float std = (float)params->image_std[c] * inverse;
    for (int v = 0; v < 256; ++v) out_table[c][v] = ((float)v - mean) / std;
  }
}

/* One row: the P x P patch at pixel (y0, x0), channel-major, repeated T times (spec §2.4:
 * f = ((c*T + t)*P + py)*P + px). */
static void patchify_row(const vlmc_image_t *image, int32_t y0, int32_t x0, int32_t patch,
                         int32_t temporal, const float table[3][256], float *out) {
  for (int c = 0; c < 3; ++c) {
    for (int32_t t = 0; t < temporal; ++t) {
      for (int32_t py = 0; py < patch; ++py) {
        const uint8_t *src =
            image->pixels + ((size_t)(y0 + py) * (size_t)image->width + (size_t)x0) * 3;
        for (int32_t px = 0; px < patch; ++px) *out++ = table[c][src[3 * px + c]];
      }
    }
  }
}

vlmc_status_t vlmc_preprocess_patchify(const vlmc_image_t *resized,
                                       const vlmc_preprocess_params_t *params,
                                       const float table[3][256], float *out_rows) {
  VLMC_RETURN_IF_ERROR(check_image(resized));
  int32_t p = params->patch_size, m = params->merge_size;
  if (resized->width % (p * m) != 0 || resized->height % (p * m) != 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "patchify: image size %d x %d is not a multiple of patch_size * "
                            "merge_size = %d",
                            (int)resized->width, (int)resized->height, (int)(p * m));
  int32_t blocks_h = resized->height / (p * m), blocks_w = resized->width / (p * m);
  size_t row_width = (size_t)vlmc_preprocess_row_width(params);
  /* Rows in merge-group order: blocks row-major, the m x m patches of a block consecutive. */
  for (int32_t bh = 0; bh < blocks_h; ++bh)
    for (int32_t bw = 0; bw < blocks_w; ++bw)
      for (int32_t mh = 0; mh < m; ++mh)
        for (int32_t mw = 0; mw < m; ++mw) {
          patchify_row(resized, (bh * m + mh) * p, (bw * m + mw) * p, p,
                       params->temporal_patch_size, table, out_rows);
          out_rows += row_width;
        }
  return NULL;
}

/* ---- the pipeline --------------------------------------------------------------------- */

void vlmc_preprocess_output_destroy(vlmc_preprocess_output_t *output) {
  if (!output) return;
  free(output->pixel_values);
  free(output->image_grid_thw);
  memset(output, 0, sizeof *output);
}

static vlmc_status_t annotate_image(vlmc_status_t status, const char *const *names,
                                    size_t index) {
  if (names && names[index]) return vlmc_status_annotate(status, "%s: ", names[index]);
  return vlmc_status_annotate(status, "image %zu: ", index);
}

/* smart_resize for every image, so that the output is allocated once. */
static vlmc_status_t plan_grids(const vlmc_image_t *images, const char *const *names,
                                size_t count, const vlmc_preprocess_params_t *params,
                                int64_t *grid_thw, int64_t *out_rows) {
  int64_t p = params->patch_size, factor = p * params->merge_size, rows = 0;
  for (size_t i = 0; i < count; ++i) {
    int64_t h = 0, w = 0;
    vlmc_status_t status = check_image(&images[i]);
    if (!status)
      status = vlmc_preprocess_smart_resize(images[i].height, images[i].width, factor,
                                            params->min_pixels, params->max_pixels, &h, &w);
    if (status) return annotate_image(status, names, i);
    grid_thw[3 * i + 0] = 1; /* one image, padded to T frames, is one temporal patch */
    grid_thw[3 * i + 1] = h / p;
    grid_thw[3 * i + 2] = w / p;
    if (!vlmc_add_i64(rows, (h / p) * (w / p), &rows))
      return vlmc_status_make(VLMC_OUT_OF_RANGE, "too many patches in %zu images", count);
  }
  *out_rows = rows;
  return NULL;
}

static vlmc_status_t allocate_output(size_t count, int64_t rows, int64_t row_width,
                                     vlmc_preprocess_output_t *out) {
  size_t values;
  if (!vlmc_mul_size((size_t)rows, (size_t)row_width, &values) ||
      !vlmc_mul_size(values, sizeof(float), &values))
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "pixel_values [%lld, %lld] is too large",
                            (long long)rows, (long long)row_width);
  out->pixel_values = malloc(values ? values : 1);
  out->image_grid_thw = malloc(count * 3 * sizeof(int64_t));
  if (!out->pixel_values || !out->image_grid_thw)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY,
                            "out of memory for pixel_values [%lld, %lld] (%zu bytes)",
                            (long long)rows, (long long)row_width, values);
  out->num_rows = rows;
  out->row_width = row_width;
  out->num_images = count;
  return NULL;
}

static vlmc_status_t process_one(const vlmc_image_t *image, const int64_t grid_thw[3],
                                 const vlmc_preprocess_params_t *params,
                                 const float table[3][256], float *out_rows) {
  int32_t p = params->patch_size;
  vlmc_image_t resized;
  VLMC_RETURN_IF_ERROR(vlmc_preprocess_resize(image, (int32_t)grid_thw[2] * p,
                                              (int32_t)grid_thw[1] * p, params->resample,
                                              &resized));
  vlmc_status_t status = vlmc_preprocess_patchify(&resized, params, table, out_rows);
  vlmc_image_destroy(&resized);
  return status;
}

static vlmc_status_t run_pipeline(const vlmc_image_t *images, const char *const *names,
                                  size_t count, const vlmc_preprocess_params_t *params,
                                  vlmc_preprocess_output_t *out) {
  int64_t *grids = calloc(count * 3, sizeof(int64_t));
  if (!grids) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  int64_t rows = 0;
  vlmc_status_t status = plan_grids(images, names, count, params, grids, &rows);
  if (!status) status = allocate_output(count, rows, vlmc_preprocess_row_width(params), out);
  if (status) {
    free(grids);
    return status;
  }
  memcpy(out->image_grid_thw, grids, count * 3 * sizeof(int64_t));
  free(grids);
  float table[3][256];
  vlmc_preprocess_normalize_table(params, table);
  float *dst = out->pixel_values;
  for (size_t i = 0; i < count && !status; ++i) {
    status = process_one(&images[i], &out->image_grid_thw[3 * i], params, table, dst);
    if (status) status = annotate_image(status, names, i);
    dst += (size_t)(out->image_grid_thw[3 * i + 1] * out->image_grid_thw[3 * i + 2]) *
           (size_t)out->row_width;
  }
  return status;
}

vlmc_status_t vlmc_preprocess_images(const vlmc_image_t *images, const char *const *names,
                                     size_t num_images, const vlmc_preprocess_params_t *params,
                                     vlmc_preprocess_output_t *out_output) {
  memset(out_output, 0, sizeof *out_output);
  VLMC_RETURN_IF_ERROR(vlmc_preprocess_params_check(params));
  if (num_images == 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "preprocess: no images given");
  vlmc_status_t status = run_pipeline(images, names, num_images, params, out_output);
  if (status) vlmc_preprocess_output_destroy(out_output);
  return status;
}
