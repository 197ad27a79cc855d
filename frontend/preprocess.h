/* Qwen2-VL / Qwen2.5-VL image preprocessing (spec qwen2_5_vl.md §2): smart_resize, bicubic
 * resize, rescale + normalize, temporal duplication and patchify into `pixel_values`
 * [N, C*T*P*P] f32 rows in merge-group order, plus `image_grid_thw` [n_images, 3] i64.
 *
 * Two resize paths reproduce transformers 5.17 bit for bit (docs/preprocessing.md):
 *   - VLMC_RESAMPLE_TORCHVISION, the default `Qwen2VLImageProcessor`: torchvision resizes the
 *     uint8 tensor with antialiased bicubic, which on CPU runs torch's integer kernel (Keys
 *     cubic a = -0.5, support scaled by the downscale factor, weights normalised then
 *     quantised to int16 with a per-pass precision, horizontal pass then vertical pass, each
 *     rounded to uint8); rescale and normalize are fused: (x - 255*mean) / (255*std) in f32.
 *   - VLMC_RESAMPLE_PIL, `Qwen2VLImageProcessorPil`: Pillow's BICUBIC (same filter shape,
 *     22-bit fixed-point weights), then x/255 in f64 rounded to f32, then (x - mean) / std.
 * Both produce identical grids; pixel values differ by at most one uint8 step after resize.
 *
 * The parameter struct is deliberately plain: whoever reads preprocessor_config.json fills
 * it. Libraries take it as input; flags live in tools/cmd_preprocess.c. */
#ifndef VLMC_FRONTEND_PREPROCESS_H
#define VLMC_FRONTEND_PREPROCESS_H

#include <stddef.h>
#include <stdint.h>

#include "frontend/image.h"
#include "support/status.h"

typedef enum {
  VLMC_RESAMPLE_TORCHVISION, /* transformers 5.x default (Qwen2VLImageProcessor) */
  VLMC_RESAMPLE_PIL,         /* Qwen2VLImageProcessorPil */
} vlmc_resample_t;

typedef struct {
  int64_t min_pixels;          /* smallest resized area; checkpoints: 3136 = 56*56 */
  int64_t max_pixels;          /* largest resized area; checkpoints: 12845056 = 16384*28*28 */
  int32_t patch_size;          /* P, 14 */
  int32_t temporal_patch_size; /* T, 2: a single image is repeated T times */
  int32_t merge_size;          /* m, 2: grid_h and grid_w are multiples of it */
  double image_mean[3];        /* per RGB channel, in 0..1 units (OpenAI CLIP constants) */
  double image_std[3];
  double rescale_factor; /* 1/255 */
  vlmc_resample_t resample;
} vlmc_preprocess_params_t;

/* The Qwen2.5-VL checkpoints' values (spec §1.4) and the torchvision path. */
void vlmc_preprocess_params_init(vlmc_preprocess_params_t *out_params);

/* Refuses sizes below 1, min_pixels > max_pixels, a zero or non-finite std, ... by name. */
vlmc_status_t vlmc_preprocess_params_check(const vlmc_preprocess_params_t *params);

/* Columns of pixel_values: 3 * T * P * P (1176 for Qwen2.5-VL). */
int64_t vlmc_preprocess_row_width(const vlmc_preprocess_params_t *params);

/* spec §2.1 exactly (transformers 5.x): both results are multiples of `factor`. Refuses an
 * aspect ratio above 200 and non-positive sizes. */
vlmc_status_t vlmc_preprocess_smart_resize(int64_t height, int64_t width, int64_t factor,
                                           int64_t min_pixels, int64_t max_pixels,
                                           int64_t *out_height, int64_t *out_width);

/* Antialiased bicubic resize of an RGB8 image to width x height, as the chosen reference
 * implementation does it (same size: a copy). The caller owns *out_image. */
vlmc_status_t vlmc_preprocess_resize(const vlmc_image_t *image, int32_t width, int32_t height,
                                     vlmc_resample_t resample, vlmc_image_t *out_image);

/* The normalized f32 value of every uint8 level per channel: rescale and normalize depend on
 * nothing else, so a table gives the reference's exact rounding at no cost per pixel. */
void vlmc_preprocess_normalize_table(const vlmc_preprocess_params_t *params,
                                     float out_table[3][256]);

/* Writes the (H/P)*(W/P) rows of one resized image (H and W multiples of P*m) into out_rows,
 * in merge-group order (spec §2.4), the image repeated T times along the temporal axis. */
vlmc_status_t vlmc_preprocess_patchify(const vlmc_image_t *resized,
                                       const vlmc_preprocess_params_t *params,
                                       const float table[3][256], float *out_rows);

typedef struct {
  float *pixel_values;     /* [num_rows, row_width], row-major; owned */
  int64_t num_rows;
  int64_t row_width;
  int64_t *image_grid_thw; /* [num_images, 3]: (grid_t, grid_h, grid_w) in patches; owned */
  size_t num_images;
} vlmc_preprocess_output_t;

/* The whole pipeline for several images, concatenated in order. `names` (may be NULL, or hold
 * NULLs) label the images in messages ("photo.png: aspect ratio ..."). */
vlmc_status_t vlmc_preprocess_images(const vlmc_image_t *images, const char *const *names,
                                     size_t num_images, const vlmc_preprocess_params_t *params,
                                     vlmc_preprocess_output_t *out_output);

void vlmc_preprocess_output_destroy(vlmc_preprocess_output_t *output);

#endif
