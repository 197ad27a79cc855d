#include <math.h>
#include <stdlib.h>

#include "runtime/sampler.h"
#include "tests/unit/test.h"

static void test_greedy_takes_first_maximum(void) {
  float logits[] = {0.5f, 2.0f, -1.0f, 2.0f};
  vlmc_sampler_t s;
  EXPECT_OK(vlmc_sampler_init(&s, (vlmc_sampler_options_t){.temperature = 0, .top_p = 1}, 4));
  EXPECT_EQ_INT(vlmc_sampler_next(&s, logits, NULL, 0), 1);
  vlmc_sampler_deinit(&s);
  float with_nan[] = {NAN, -3.0f, -2.0f};
  EXPECT_EQ_INT(vlmc_argmax_f32(with_nan, 3), 2);
}

static void test_same_seed_same_draws(void) {
  float logits[50];
  for (int i = 0; i < 50; ++i) logits[i] = (float)(i % 7) * 0.3f;
  vlmc_sampler_options_t o = {.temperature = 1.0f, .top_k = 0, .top_p = 1, .seed = 1234};
  vlmc_sampler_t a, b;
  EXPECT_OK(vlmc_sampler_init(&a, o, 50));
  EXPECT_OK(vlmc_sampler_init(&b, o, 50));
  int differ = 0;
  for (int i = 0; i < 100; ++i) differ += vlmc_sampler_next(&a, logits, NULL, 0) != vlmc_sampler_next(&b, logits, NULL, 0);
  EXPECT_EQ_INT(differ, 0);
  vlmc_sampler_deinit(&a);
  vlmc_sampler_deinit(&b);
}

static void test_top_k_and_top_p_restrict_candidates(void) {
  float logits[] = {3.0f, 2.9f, 0.0f, -1.0f, -2.0f};
  vlmc_sampler_t s;
  EXPECT_OK(vlmc_sampler_init(&s, (vlmc_sampler_options_t){.temperature = 1, .top_k = 2,
                                                           .top_p = 1, .seed = 7}, 5));
  int seen[5] = {0};
  for (int i = 0; i < 2000; ++i) seen[vlmc_sampler_next(&s, logits, NULL, 0)]++;
  EXPECT_TRUE(seen[0] > 800 && seen[1] > 800);
  EXPECT_EQ_INT(seen[2] + seen[3] + seen[4], 0);
  vlmc_sampler_deinit(&s);
  /* p0 = 0.505, p1 = 0.457: p = 0.6 keeps exactly the first two. */
  EXPECT_OK(vlmc_sampler_init(&s, (vlmc_sampler_options_t){.temperature = 1, .top_k = 0,
                                                           .top_p = 0.6f, .seed = 7}, 5));
  int seen_p[5] = {0};
  for (int i = 0; i < 2000; ++i) seen_p[vlmc_sampler_next(&s, logits, NULL, 0)]++;
  EXPECT_TRUE(seen_p[0] > 0 && seen_p[1] > 0);
  EXPECT_EQ_INT(seen_p[2] + seen_p[3] + seen_p[4], 0);
  vlmc_sampler_deinit(&s);
}

static void test_frequencies_follow_softmax(void) {
  float logits[] = {0.0f, 1.0f}; /* p(1) = e/(1+e) = 0.731 */
  vlmc_sampler_t s;
  EXPECT_OK(vlmc_sampler_init(&s, (vlmc_sampler_options_t){.temperature = 1, .top_p = 1,
                                                           .seed = 99}, 2));
  int ones = 0;
  for (int i = 0; i < 20000; ++i) ones += vlmc_sampler_next(&s, logits, NULL, 0) == 1;
  EXPECT_NEAR(ones / 20000.0, 0.7311, 0.015);
  vlmc_sampler_deinit(&s);
}

static void test_bad_options_are_refused(void) {
  vlmc_sampler_t s;
  EXPECT_ERROR(vlmc_sampler_init(&s, (vlmc_sampler_options_t){.temperature = -1, .top_p = 1}, 4),
               "temperature -1 must be >= 0");
  EXPECT_ERROR(vlmc_sampler_init(&s, (vlmc_sampler_options_t){.temperature = 1, .top_p = 0}, 4),
               "top-p 0 in (0, 1]");
}

/* transformers' RepetitionPenaltyLogitsProcessor: every id already in the conversation has its
 * logit divided by the penalty when positive, multiplied when negative, once however often it
 * occurs, in greedy mode too. */
static void test_repetition_penalty_as_transformers(void) {
  vlmc_sampler_t s;
  vlmc_sampler_options_t o = {.temperature = 0, .top_p = 1, .repetition_penalty = 1.05f};
  EXPECT_OK(vlmc_sampler_init(&s, o, 4));
  const float logits[4] = {2.0f, 1.95f, -1.0f, 0.5f};
  EXPECT_EQ_INT(vlmc_sampler_next(&s, logits, NULL, 0), 0);        /* no history: unchanged */
  EXPECT_EQ_INT(vlmc_sampler_next(&s, logits, (int64_t[]){0}, 1), 1); /* 2 / 1.05 < 1.95 */
  vlmc_sampler_deinit(&s);
  EXPECT_OK(vlmc_sampler_init(&s, o, 2));
  const float negative[2] = {-1.0f, -1.02f};
  EXPECT_EQ_INT(vlmc_sampler_next(&s, negative, (int64_t[]){0}, 1), 1); /* -1.05 < -1.02 */
  const float close[2] = {2.0f, 1.8f}; /* once: 1.905 > 1.8; three times would be 1.73 */
  EXPECT_EQ_INT(vlmc_sampler_next(&s, close, (int64_t[]){0, 0, 0}, 3), 0);
  EXPECT_EQ_INT(vlmc_sampler_next(&s, close, (int64_t[]){7, -1, 0}, 3), 0); /* others ignored */
  vlmc_sampler_deinit(&s);
  /* the penalty is f32 arithmetic, as torch's on float32 logits: 1.905 rounds as (float)x / p */
  o.repetition_penalty = 3.0f;
  EXPECT_OK(vlmc_sampler_init(&s, o, 2));
  float x = 0.3f / 3.0f;
  const float tie[2] = {0.3f, x}; /* id 0 penalized equals id 1 exactly: the first wins */
  EXPECT_EQ_INT(vlmc_sampler_next(&s, tie, (int64_t[]){0}, 1), 0);
  const float above[2] = {0.3f, nextafterf(x, 1.0f)}; /* one ulp more: id 1 */
  EXPECT_EQ_INT(vlmc_sampler_next(&s, above, (int64_t[]){0}, 1), 1);
  vlmc_sampler_deinit(&s);
}

/* transformers' MinPLogitsWarper: candidates less probable than min_p times the most probable
 * are never drawn; the rest keep their relative frequencies. */
static void test_min_p(void) {
  vlmc_sampler_t s;
  EXPECT_OK(vlmc_sampler_init(&s, (vlmc_sampler_options_t){.temperature = 1, .top_p = 1,
                                                           .seed = 9, .min_p = 0.1f}, 3));
  const float logits[3] = {0.0f, -1.0f, -5.0f}; /* relative probabilities 1, 0.368, 0.0067 */
  int seen[3] = {0, 0, 0};
  for (int i = 0; i < 20000; ++i) seen[vlmc_sampler_next(&s, logits, NULL, 0)]++;
  EXPECT_EQ_INT(seen[2], 0);
  EXPECT_NEAR(seen[1] / 20000.0, 0.3679 / 1.3679, 0.015);
  vlmc_sampler_deinit(&s);
  EXPECT_ERROR(vlmc_sampler_init(&s, (vlmc_sampler_options_t){.temperature = 1, .top_p = 1,
                                                              .min_p = 1.5f}, 3),
               "min-p 1.5 in [0, 1]");
  EXPECT_ERROR(vlmc_sampler_init(&s, (vlmc_sampler_options_t){.temperature = 1, .top_p = 1,
                                                              .repetition_penalty = -2}, 3),
               "repetition penalty -2 must be > 0");
}

int main(void) {
  RUN_TEST(test_repetition_penalty_as_transformers);
  RUN_TEST(test_min_p);
  RUN_TEST(test_greedy_takes_first_maximum);
  RUN_TEST(test_same_seed_same_draws);
  RUN_TEST(test_top_k_and_top_p_restrict_candidates);
  RUN_TEST(test_frequencies_follow_softmax);
  RUN_TEST(test_bad_options_are_refused);
  return TEST_SUMMARY();
}
