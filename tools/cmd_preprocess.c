/* vlmc preprocess: images in, the Qwen2.5-VL processor's tensors out.
 *
 *   vlmc preprocess --image IMG [--image IMG2 ...] [--min-pixels N] [--max-pixels N]
 *                   [--resample torchvision|pil] -o out.safetensors
 *
 * Writes `pixel_values` (F32 [N, 1176]) and `image_grid_thw` (I64 [n_images, 3]), the tensors
 * transformers' Qwen2VLImageProcessor returns, so that the two can be diffed directly. One line
 * per image on stdout says what it became. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/image.h"
#include "frontend/preprocess.h"
#include "frontend/safetensors.h"
#include "tools/commands.h"

typedef struct {
  const char **images;
  size_t num_images;
  const char *output;
  vlmc_preprocess_params_t params;
} preprocess_args_t;

static void print_usage(FILE *stream) {
  fprintf(stream,
          "usage: vlmc preprocess --image IMG [--image IMG ...] [--min-pixels N]\n"
          "                       [--max-pixels N] [--resample torchvision|pil] -o OUT\n"
          "\n"
          "Decodes PNG/JPEG images and runs Qwen2.5-VL image preprocessing (smart resize,\n"
          "bicubic resize, normalize, patchify), writing pixel_values (F32 [N,1176]) and\n"
          "image_grid_thw (I64 [n,3]) to OUT (.safetensors).\n"
          "  --image IMG      a PNG or JPEG image (repeatable: one grid each)\n"
          "  -o OUT           the .safetensors file to write\n"
          "  --min-pixels N   smallest resized area (default 3136)\n"
          "  --max-pixels N   largest resized area (default 12845056)\n"
          "  --resample R     torchvision (transformers 5.x default) or pil\n");
}

static vlmc_status_t parse_positive(const char *flag, const char *text, int64_t *out_value) {
  char *end = NULL;
  errno = 0;
  long long value = strtoll(text, &end, 10);
  if (errno || end == text || *end != '\0' || value < 1)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: expected a positive integer, got '%s'",
                            flag, text);
  *out_value = value;
  return NULL;
}

static vlmc_status_t parse_resample(const char *text, vlmc_resample_t *out_resample) {
  if (strcmp(text, "torchvision") == 0) {
    *out_resample = VLMC_RESAMPLE_TORCHVISION;
  } else if (strcmp(text, "pil") == 0) {
    *out_resample = VLMC_RESAMPLE_PIL;
  } else {
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "--resample: expected 'torchvision' or 'pil', got '%s'", text);
  }
  return NULL;
}

/* Handles one flag that takes a value (argv[*i + 1]); advances *i past it. */
static vlmc_status_t parse_flag(int argc, char **argv, int *i, preprocess_args_t *args) {
  const char *flag = argv[*i];
  if (*i + 1 >= argc)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: expected a value after it", flag);
  const char *value = argv[++*i];
  if (strcmp(flag, "--image") == 0) {
    args->images[args->num_images++] = value;
    return NULL;
  }
  if (strcmp(flag, "-o") == 0 || strcmp(flag, "--output") == 0) {
    args->output = value;
    return NULL;
  }
  if (strcmp(flag, "--min-pixels") == 0)
    return parse_positive(flag, value, &args->params.min_pixels);
  if (strcmp(flag, "--max-pixels") == 0)
    return parse_positive(flag, value, &args->params.max_pixels);
  if (strcmp(flag, "--resample") == 0) return parse_resample(value, &args->params.resample);
  return vlmc_status_make(VLMC_INVALID_ARGUMENT, "unknown option '%s' (see --help)", flag);
}

static vlmc_status_t parse_args(int argc, char **argv, preprocess_args_t *args) {
  for (int i = 1; i < argc; ++i) VLMC_RETURN_IF_ERROR(parse_flag(argc, argv, &i, args));
  if (args->num_images == 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "no --image given (see --help)");
  if (!args->output)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "no output file given: -o OUT.safetensors");
  return vlmc_preprocess_params_check(&args->params);
}

static vlmc_status_t write_output(const char *path, const vlmc_preprocess_output_t *out) {
  int64_t pixel_shape[2] = {out->num_rows, out->row_width};
  int64_t grid_shape[2] = {(int64_t)out->num_images, 3};
  vlmc_st_write_tensor_t tensors[2] = {
      {"pixel_values", VLMC_ST_F32, 2, pixel_shape, out->pixel_values},
      {"image_grid_thw", VLMC_ST_I64, 2, grid_shape, out->image_grid_thw},
  };
  return vlmc_st_write_file(path, tensors, 2);
}

static void print_summary(const preprocess_args_t *args, const vlmc_image_t *images,
                          const vlmc_preprocess_output_t *out) {
  int64_t merge2 = (int64_t)args->params.merge_size * args->params.merge_size;
  for (size_t i = 0; i < out->num_images; ++i) {
    const int64_t *g = &out->image_grid_thw[3 * i];
    printf("%s: %dx%d -> %lldx%lld, grid_thw (%lld, %lld, %lld), %lld tokens\n",
           args->images[i], (int)images[i].width, (int)images[i].height,
           (long long)(g[2] * args->params.patch_size),
           (long long)(g[1] * args->params.patch_size), (long long)g[0], (long long)g[1],
           (long long)g[2], (long long)(g[0] * g[1] * g[2] / merge2));
  }
}

static vlmc_status_t run(const preprocess_args_t *args, vlmc_image_t *images) {
  for (size_t i = 0; i < args->num_images; ++i)
    VLMC_RETURN_IF_ERROR(vlmc_image_load(args->images[i], &images[i]));
  vlmc_preprocess_output_t out;
  VLMC_RETURN_IF_ERROR(vlmc_preprocess_images(images, args->images, args->num_images,
                                              &args->params, &out));
  vlmc_status_t status = write_output(args->output, &out);
  if (!status) print_summary(args, images, &out);
  vlmc_preprocess_output_destroy(&out);
  return status;
}

int vlmc_cmd_preprocess(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      print_usage(stdout);
      return 0;
    }
  }
  preprocess_args_t args;
  memset(&args, 0, sizeof args);
  vlmc_preprocess_params_init(&args.params);
  /* At most one image per two arguments: this array never overflows. */
  args.images = calloc((size_t)argc, sizeof *args.images);
  vlmc_image_t *images = calloc((size_t)argc, sizeof *images);
  vlmc_status_t status = NULL;
  if (!args.images || !images) status = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (!status) status = parse_args(argc, argv, &args);
  if (!status) status = run(&args, images);
  for (size_t i = 0; images && i < args.num_images; ++i) vlmc_image_destroy(&images[i]);
  free(images);
  free(args.images);
  return vlmc_status_report(status);
}
