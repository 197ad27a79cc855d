/* vlmc compile --calibrate: the calibration requests run through the program in f32, every
 * value's range recorded (passes/precision.h), before the precision pass reads them. The
 * requests go the way the runtime drives the program (models/family.h's calling convention):
 * encode_image on the image, prefill on the prompt and its image embeddings, then a few
 * greedy decode steps on prefill's caches, so that the decoder's single-row path is measured
 * too. Internal to codegen/compile.c. */
#ifndef VLMC_CODEGEN_CALIBRATE_H
#define VLMC_CODEGEN_CALIBRATE_H

#include "codegen/compile.h"
#include "frontend/checkpoint.h"
#include "models/family.h"
#include "passes/precision.h"

typedef struct {
  const vlmc_module_t *module;            /* the IR the precision pass will run on */
  const vlmc_checkpoint_t *checkpoint;    /* the weights */
  const vlmc_model_convention_t *convention;
  const vlmc_compile_sample_source_t *source;
  const vlmc_compile_options_t *options;  /* images, prompt, decode steps, sampler, progress */
  int64_t vocab_size;
} vlmc_calibration_run_t;

/* Merges the ranges of every request into `calibration`; progress lines per image. */
vlmc_status_t vlmc_compile_calibrate(const vlmc_calibration_run_t *run,
                                     vlmc_precision_calibration_t *calibration);

#endif
