#include "runtime/sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static uint64_t xoshiro_next(uint64_t s[4]) {
  uint64_t result = rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl64(s[3], 45);
  return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double uniform01(uint64_t s[4]) { return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53; }

vlmc_status_t vlmc_sampler_init(vlmc_sampler_t *sampler, vlmc_sampler_options_t options,
                                size_t vocab) {
  if (!(options.temperature >= 0) || options.top_k < 0 || !(options.top_p > 0) ||
      options.top_p > 1)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "sampling: temperature %g must be >= 0, top-k %d >= 0, top-p %g in "
                            "(0, 1]", options.temperature, options.top_k, options.top_p);
  if (!(options.repetition_penalty >= 0) || !isfinite(options.repetition_penalty) ||
      !(options.min_p >= 0 && options.min_p <= 1))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "sampling: repetition penalty %g must be > 0 "
                            "(1: off), min-p %g in [0, 1]", options.repetition_penalty,
                            options.min_p);
  if (options.repetition_penalty == 0) options.repetition_penalty = 1;
  sampler->options = options;
  sampler->vocab = vocab;
  uint64_t seed = options.seed;
  for (int i = 0; i < 4; ++i) sampler->rng[i] = splitmix64(&seed);
  sampler->order = malloc((vocab ? vocab : 1) * sizeof *sampler->order);
  sampler->weights = malloc((vocab ? vocab : 1) * sizeof *sampler->weights);
  bool penalty = options.repetition_penalty != 1;
  sampler->scores = penalty ? malloc((vocab ? vocab : 1) * sizeof *sampler->scores) : NULL;
  sampler->seen = penalty ? calloc(vocab ? vocab : 1, 1) : NULL;
  if (!sampler->order || !sampler->weights || (penalty && (!sampler->scores || !sampler->seen))) {
    vlmc_sampler_deinit(sampler);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "sampling: out of memory for %zu candidates",
                            vocab);
  }
  return NULL;
}

void vlmc_sampler_deinit(vlmc_sampler_t *sampler) {
  free(sampler->order);
  free(sampler->weights);
  free(sampler->scores);
  free(sampler->seen);
  sampler->order = NULL;
  sampler->weights = NULL;
  sampler->scores = NULL;
  sampler->seen = NULL;
}

int64_t vlmc_argmax_f32(const float *values, size_t n) {
  int64_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (values[i] > values[best] || (isnan(values[best]) && !isnan(values[i]))) best = (int64_t)i;
  return best;
}

static const float *sort_logits; /* qsort has no context argument in C11 */

static int by_logit_descending(const void *a, const void *b) {
  float x = sort_logits[*(const int64_t *)a], y = sort_logits[*(const int64_t *)b];
  if (x > y) return -1;
  if (x < y) return 1;
  int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
  return (i > j) - (i < j);
}

/* The logits with the repetition penalty applied (transformers: torch.gather of the ids'
 * scores, torch.where(score < 0, score * p, score / p), scattered back: each id once, in f32). */
static const float *penalized(vlmc_sampler_t *sampler, const float *logits,
                              const int64_t *history, size_t num_history) {
  float p = sampler->options.repetition_penalty;
  if (p == 1 || !num_history) return logits;
  memcpy(sampler->scores, logits, sampler->vocab * sizeof *logits);
  for (size_t i = 0; i < num_history; ++i) {
    int64_t id = history[i];
    if (id < 0 || (uint64_t)id >= sampler->vocab || sampler->seen[id]) continue;
    sampler->seen[id] = 1;
    float x = logits[id];
    sampler->scores[id] = x < 0 ? x * p : x / p;
  }
  for (size_t i = 0; i < num_history; ++i)
    if (history[i] >= 0 && (uint64_t)history[i] < sampler->vocab) sampler->seen[history[i]] = 0;
  return sampler->scores;
}

int64_t vlmc_sampler_next(vlmc_sampler_t *sampler, const float *raw_logits,
                          const int64_t *history, size_t num_history) {
  const vlmc_sampler_options_t *o = &sampler->options;
  const float *logits = penalized(sampler, raw_logits, history, num_history);
  if (o->temperature == 0 || o->top_k == 1) return vlmc_argmax_f32(logits, sampler->vocab);
  size_t n = sampler->vocab;
  for (size_t i = 0; i < n; ++i) sampler->order[i] = (int64_t)i;
  sort_logits = logits;
  qsort(sampler->order, n, sizeof *sampler->order, by_logit_descending);
  if (o->top_k > 0 && (size_t)o->top_k < n) n = (size_t)o->top_k;
  double max_logit = logits[sampler->order[0]], total = 0;
  for (size_t i = 0; i < n; ++i) {
    sampler->weights[i] = exp(((double)logits[sampler->order[i]] - max_logit) / o->temperature);
    total += sampler->weights[i];
  }
  /* Top-p keeps the smallest prefix whose probability reaches p (at least one token). */
  if (o->top_p < 1) {
    double kept = 0;
    size_t keep = 0;
    while (keep < n && (keep == 0 || kept / total < o->top_p)) kept += sampler->weights[keep++];
    n = keep;
    total = kept;
  }
  /* Min-p: weights[0] is the most probable candidate's (they are in descending order), and a
   * ratio of weights is the ratio of probabilities. */
  if (o->min_p > 0) {
    size_t keep = 1;
    while (keep < n && sampler->weights[keep] >= o->min_p * sampler->weights[0]) ++keep;
    for (size_t i = keep; i < n; ++i) total -= sampler->weights[i];
    n = keep;
  }
  double r = uniform01(sampler->rng) * total;
  for (size_t i = 0; i < n; ++i) {
    r -= sampler->weights[i];
    if (r < 0) return sampler->order[i];
  }
  return sampler->order[n - 1];
}
