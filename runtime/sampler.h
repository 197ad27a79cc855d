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
} vlmc_sampler_options_t;

typedef struct {
  vlmc_sampler_options_t options;
  uint64_t rng[4];     /* xoshiro256** state */
  size_t vocab;
  int64_t *order;      /* scratch: candidate ids */
  double *weights;     /* scratch: candidate weights */
} vlmc_sampler_t;

vlmc_status_t vlmc_sampler_init(vlmc_sampler_t *sampler, vlmc_sampler_options_t options,
                                size_t vocab);
void vlmc_sampler_deinit(vlmc_sampler_t *sampler);

/* Chooses the next id from `logits[vocab]`. Greedy picks the first maximum (as torch.argmax). */
int64_t vlmc_sampler_next(vlmc_sampler_t *sampler, const float *logits);

/* Index of the first maximum; NaNs never win. */
int64_t vlmc_argmax_f32(const float *values, size_t n);

#endif
