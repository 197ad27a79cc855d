#define _POSIX_C_SOURCE 200809L
#include "codegen/calibrate.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frontend/safetensors.h"

static const char kDefaultPrompt[] = "Describe this image.";

static void progress(const vlmc_calibration_run_t *run, const char *fmt, ...) VLMC_PRINTF(2, 3);
static void progress(const vlmc_calibration_run_t *run, const char *fmt, ...) {
  if (!run->options->progress) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  run->options->progress(run->options->progress_user, line);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The executor reads weights straight from the checkpoint (borrowed views of its mapping). */
static vlmc_status_t checkpoint_param(void *ctx, const char *name, const vlmc_type_t *type,
                                      vlmc_tensor_t *out_view) {
  (void)type;
  const vlmc_st_tensor_t *t;
  VLMC_RETURN_IF_ERROR(vlmc_checkpoint_get(ctx, name, &t));
  vlmc_dtype_t dtype;
  if (!vlmc_st_dtype_to_ir(t->dtype, &dtype))
    return vlmc_status_make(VLMC_UNSUPPORTED, "tensor '%s': dtype %s is not supported", name,
                            vlmc_st_dtype_name(t->dtype));
  *out_view = vlmc_tensor_view(dtype, (uint32_t)t->rank, t->shape, t->data);
  return NULL;
}

typedef struct {
  const vlmc_calibration_run_t *run;
  vlmc_precision_calibrator_t *calibrator;
  uint32_t state_count;   /* prefill's and decode's results: logits, then the caches */
  vlmc_tensor_t *state;   /* the last call's results */
} driver_t;

static void release_state(driver_t *d) {
  for (uint32_t i = 0; d->state && i < d->state_count; ++i) vlmc_tensor_release(&d->state[i]);
}

static vlmc_status_t encode(driver_t *d, const vlmc_compile_sample_t *s, vlmc_tensor_t *out) {
  int64_t pv_shape[2] = {s->num_rows, s->row_width}, grid_shape[2] = {(int64_t)s->num_images, 3};
  vlmc_tensor_t args[2] = {vlmc_tensor_view(VLMC_DTYPE_F32, 2, pv_shape, s->pixel_values),
                           vlmc_tensor_view(VLMC_DTYPE_I64, 2, grid_shape, s->image_grid_thw)};
  return vlmc_precision_calibrator_run(d->calibrator, d->run->convention->encode_image, args, 2,
                                       out, 1);
}

static vlmc_status_t prefill(driver_t *d, const vlmc_compile_sample_t *s, vlmc_tensor_t *embeds) {
  int64_t s_shape[1] = {(int64_t)s->seq_len}, p_shape[2] = {3, (int64_t)s->seq_len};
  vlmc_tensor_t args[3] = {vlmc_tensor_view(VLMC_DTYPE_I64, 1, s_shape, s->input_ids), *embeds,
                           vlmc_tensor_view(VLMC_DTYPE_I64, 2, p_shape, s->positions)};
  memset(embeds, 0, sizeof *embeds); /* taken by the call */
  return vlmc_precision_calibrator_run(d->calibrator, d->run->convention->prefill, args, 3,
                                       d->state, d->state_count);
}

/* The greedy next token: argmax over the last row of the logits. */
static int64_t greedy(const driver_t *d) {
  const vlmc_tensor_t *logits = &d->state[0];
  int64_t count = vlmc_tensor_count(logits), vocab = d->run->vocab_size;
  if (vocab <= 0 || vocab > count) vocab = count;
  const float *row = vlmc_tensor_f32(logits) + (count - vocab);
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

static vlmc_status_t decode_step(driver_t *d, int64_t token, int64_t position) {
  uint32_t n = d->state_count;
  vlmc_tensor_t *args = calloc(n + 1, sizeof *args);
  if (!args) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  int64_t one = 1, p_shape[2] = {3, 1}, pos[3] = {position, position, position};
  args[0] = vlmc_tensor_view(VLMC_DTYPE_I64, 1, &one, &token);
  args[1] = vlmc_tensor_view(VLMC_DTYPE_I64, 2, p_shape, pos);
  vlmc_tensor_release(&d->state[0]); /* the old logits */
  for (uint32_t i = 1; i < n; ++i) {
    args[i + 1] = d->state[i]; /* the caches are taken and grown in place */
    memset(&d->state[i], 0, sizeof d->state[i]);
  }
  vlmc_status_t st = vlmc_precision_calibrator_run(d->calibrator, d->run->convention->decode,
                                                   args, n + 1, d->state, n);
  for (uint32_t i = 0; i < n + 1; ++i) vlmc_tensor_release(&args[i]);
  free(args);
  return st;
}

static vlmc_status_t run_sample(driver_t *d, const vlmc_compile_sample_t *s, const char *image,
                                size_t index) {
  const vlmc_calibration_run_t *run = d->run;
  /* A line before the work too: on a large model one image takes minutes in the reference
   * executor. */
  progress(run, "calibrate: image %zu/%zu %s: %s", index + 1, run->options->num_calibrate_images,
           image, s->description ? s->description : "");
  double t0 = now_s();
  vlmc_tensor_t embeds = {0};
  vlmc_status_t st = encode(d, s, &embeds);
  double t1 = now_s();
  if (!st) st = prefill(d, s, &embeds);
  vlmc_tensor_release(&embeds);
  double t2 = now_s();
  uint32_t steps = 0;
  for (; !st && steps < run->options->calibrate_decode_steps; ++steps)
    st = decode_step(d, greedy(d), (int64_t)(s->seq_len + steps) + s->rope_delta);
  release_state(d);
  if (st) return vlmc_status_annotate(st, "--calibrate %s: ", image);
  progress(run, "calibrate: image %zu/%zu measured: encode_image %.1f s, prefill %.1f s, %u "
           "decode steps %.1f s", index + 1, run->options->num_calibrate_images, t1 - t0,
           t2 - t1, steps, now_s() - t2);
  return NULL;
}

static vlmc_status_t check_convention(const vlmc_calibration_run_t *run, uint32_t *out_state) {
  const vlmc_model_convention_t *cc = run->convention;
  if (!cc->encode_image || !cc->encode_image[0])
    return vlmc_status_make(VLMC_UNSUPPORTED, "--calibrate: this model takes no images (its "
                            "calling convention has no image encoder)");
  if (strcmp(cc->positions, VLMC_POSITIONS_MROPE) != 0)
    return vlmc_status_make(VLMC_UNSUPPORTED, "--calibrate: positions '%s' are not supported "
                            "(M-RoPE only)", cc->positions);
  const vlmc_func_t *encode = vlmc_module_func_find(run->module, cc->encode_image);
  const vlmc_func_t *pre = vlmc_module_func_find(run->module, cc->prefill);
  const vlmc_func_t *dec = vlmc_module_func_find(run->module, cc->decode);
  if (!encode || !pre || !dec || encode->num_args != 2 || encode->num_results != 1 ||
      pre->num_args != 3 || pre->num_results < 1 || dec->num_results != pre->num_results ||
      dec->num_args != pre->num_results + 1)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "--calibrate: the program does not have the calling convention "
                            "@%s(pixels, grid), @%s(ids, image_embeds, positions) -> (logits, "
                            "caches...), @%s(token, position, caches...)",
                            cc->encode_image, cc->prefill, cc->decode);
  *out_state = pre->num_results;
  return NULL;
}

vlmc_status_t vlmc_compile_calibrate(const vlmc_calibration_run_t *run,
                                     vlmc_precision_calibration_t *calibration) {
  const vlmc_compile_options_t *o = run->options;
  if (!o->sampler.build)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "--calibrate: no request builder (vlmc_compile_options_t.sampler)");
  driver_t d = {run, NULL, 0, NULL};
  VLMC_RETURN_IF_ERROR(check_convention(run, &d.state_count));
  d.state = calloc(d.state_count, sizeof *d.state);
  if (!d.state) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_executor_options_t ex = vlmc_executor_options_default();
  ex.get_param = checkpoint_param;
  ex.param_ctx = (void *)run->checkpoint;
  ex.threads = 2;
  vlmc_status_t st = vlmc_precision_calibrator_create(run->module, &ex, calibration,
                                                      &d.calibrator);
  const char *prompt = o->calibrate_prompt ? o->calibrate_prompt : kDefaultPrompt;
  for (size_t i = 0; !st && i < o->num_calibrate_images; ++i) {
    const char *image = o->calibrate_images[i];
    vlmc_compile_sample_t sample;
    memset(&sample, 0, sizeof sample);
    st = o->sampler.build(o->sampler.user, run->source, image, prompt, &sample);
    if (st) st = vlmc_status_annotate(st, "--calibrate %s: ", image);
    else st = run_sample(&d, &sample, image, i);
    if (o->sampler.release) o->sampler.release(o->sampler.user, &sample); /* on error too */
  }
  vlmc_precision_calibrator_destroy(d.calibrator);
  free(d.state);
  return st;
}
