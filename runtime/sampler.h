/* Next-token selection: greedy (temperature 0, the default and what parity tests use) or
 * sampling with temperature, top-k and top-p from a seeded generator, so that a given seed
 * reproduces the same text on every machine. */
#ifndef VLMC_RUNTIME_SAMPLER_H
#define VLMC_RUNTIME_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "support/status.h"

typedef struct {
  float temperature; /* 0 = greedy */
  int top_k;         /* 0 = no limit */
  float top_p;       /* 1 = no limit; (0, 1] */
  uint64_t seed;
  /* transformers' RepetitionPenaltyLogitsProcessor, applied before everything else and in
   * greedy mode too: the logit of every id already in the conversation (prompt and answer)
   * is divided by it when positive, multiplied when negative. 0 or 1 = off; > 0. */
  float repetition_penalty;
  /* transformers' MinPLogitsWarper (sampling only, after top-k and top-p): drop the
   * candidates less probable than min_p times the most probable one. 0 = off; [0, 1]. */
  float min_p;
} vlmc_sampler_options_t;

typedef struct {
  vlmc_sampler_options_t options;
  uint64_t rng[4];     /* xoshiro256** state */
  size_t vocab;
  int64_t *order;      /* scratch: candidate ids */
  double *weights;     /* scratch: candidate weights */
  float *scores;       /* scratch: the penalized logits */
  unsigned char *seen; /* scratch: ids penalized so far */
} vlmc_sampler_t;

vlmc_status_t vlmc_sampler_init(vlmc_sampler_t *sampler, vlmc_sampler_options_t options,
                                size_t vocab);
void vlmc_sampler_deinit(vlmc_sampler_t *sampler);

/* Chooses the next id from `logits[vocab]` after the `num_history` ids of the conversation so
 * far (read only for the repetition penalty; ids outside the vocabulary are ignored). Greedy
 * picks the first maximum (as torch.argmax). */
int64_t vlmc_sampler_next(vlmc_sampler_t *sampler, const float *logits, const int64_t *history,
                          size_t num_history);

/* Index of the first maximum; NaNs never win. */
int64_t vlmc_argmax_f32(const float *values, size_t n);

#endif
