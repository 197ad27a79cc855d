/* Chat over one KV cache (runtime/session.h): the tiny random checkpoint compiled in process,
 * a conversation of token-id turns with an image in the first, and after every turn the
 * answer compared with a fresh one-shot run over the whole conversation so far (the oracle:
 * what a prefill of everything gives). Turns end at the token limit here (the tiny model's eos
 * is rare), so the pending last answer token is fed at the start of the next turn; the eos
 * path and template-rendered turns run in tests/e2e/chat_shapes.sh with the trained model.
 * Also: a refused turn leaves the conversation usable, and sampling with a seed repeats. */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/compile.h"
#include "runtime/session.h"
#include "support/file.h"
#include "tests/unit/test.h"

static const char *kCheckpoint = "tests/fixtures/parity/tiny-vocab512";
static const char *kImage = "tests/fixtures/images/scene_336x336.png";
static char artifact[128];

typedef struct {
  int64_t ids[64];
  size_t n;
} ids_t;

static ids_t text_ids(int64_t first, size_t n) {
  ids_t out = {.n = n};
  for (size_t i = 0; i < n; ++i) out.ids[i] = (first + 37 * (int64_t)i) % 500 + 2;
  return out;
}

/* The img336 fixture's prompt ids (text around 144 image pads for the 336x336 image). */
static int64_t *fixture_ids(size_t *out_n) {
  char *text = NULL;
  size_t len = 0;
  *out_n = 0;
  vlmc_status_t s = vlmc_file_read_all("tests/fixtures/parity/img336/expected.json", &text, &len);
  if (s) {
    TEST_FAIL_("%s", vlmc_status_message(s));
    vlmc_status_free(s);
    return NULL;
  }
  cJSON *root = cJSON_ParseWithLength(text, len);
  free(text);
  const cJSON *ids = cJSON_GetObjectItem(root, "input_ids");
  size_t n = (size_t)cJSON_GetArraySize(ids);
  int64_t *out = calloc(n + 1, sizeof *out);
  for (size_t i = 0; out && i < n; ++i)
    out[i] = (int64_t)cJSON_GetArrayItem(ids, (int)i)->valuedouble;
  cJSON_Delete(root);
  *out_n = out ? n : 0;
  return out;
}

static vlmc_session_t *open_session(void) {
  vlmc_session_options_t so = {.artifact_path = artifact, .backend = "ref", .threads = 2};
  vlmc_session_t *session = NULL;
  EXPECT_OK(vlmc_session_open(&so, &session));
  return session;
}

/* The largest difference between two logit vectors, relative to the largest logit. */
static double logits_error(const float *a, const float *b, size_t n) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    double d = fabs((double)a[i] - (double)b[i]);
    worst = d > worst || isnan(d) ? (isnan(d) ? INFINITY : d) : worst;
    scale = fmax(scale, fabs((double)b[i]));
  }
  return worst / (scale > 0 ? scale : 1);
}

/* A fresh one-shot run of `ids` (with the chat's images) is the oracle: the answer's tokens
 * must be the same, and so must the logits the last one was sampled from. */
static void expect_fresh_answer(vlmc_session_t *session, const vlmc_chat_t *chat,
                                const char *const *images, size_t num_images, const int64_t *ids,
                                size_t n, int max_new, const vlmc_generate_result_t *chat_result,
                                int turn) {
  vlmc_chat_options_t co = {.image_paths = images, .num_images = num_images,
                            .sampling = {.top_p = 1}};
  vlmc_chat_turn_options_t t = {.input_ids = ids, .num_input_ids = n, .max_new_tokens = max_new};
  vlmc_chat_t *fresh_chat = NULL;
  vlmc_generate_result_t fresh;
  vlmc_status_t s = vlmc_chat_create(session, &co, &fresh_chat);
  if (!s) s = vlmc_chat_turn(fresh_chat, &t, &fresh);
  if (s) {
    TEST_FAIL_("turn %d: fresh run: %s", turn, vlmc_status_message(s));
    vlmc_status_free(s);
    vlmc_chat_destroy(fresh_chat);
    return;
  }
  EXPECT_EQ_INT(fresh.generated_tokens, chat_result->generated_tokens);
  EXPECT_EQ_INT(fresh.rope_delta, chat_result->rope_delta);
  for (int64_t i = 0; i < fresh.generated_tokens && i < chat_result->generated_tokens; ++i)
    if (fresh.tokens[i] != chat_result->tokens[i]) {
      TEST_FAIL_("turn %d: answer token %lld is %lld; a fresh run of the whole conversation "
                 "gives %lld", turn, (long long)i, (long long)chat_result->tokens[i],
                 (long long)fresh.tokens[i]);
      break;
    }
  size_t na = 0, nb = 0;
  const float *a = vlmc_chat_logits(chat, &na), *b = vlmc_chat_logits(fresh_chat, &nb);
  EXPECT_TRUE(a && b && na == nb && na == 512);
  double err = a && b && na == nb ? logits_error(a, b, na) : INFINITY;
  if (!(err <= 1e-4))
    TEST_FAIL_("turn %d: logits differ from a fresh run by %.3g (relative), tolerance 1e-4",
               turn, err);
  printf("  turn %d: %lld tokens in the context, logits within %.1e of a fresh run\n", turn,
         (long long)n, err);
  vlmc_generate_result_deinit(&fresh);
  vlmc_chat_destroy(fresh_chat);
}

static void expect_turn(vlmc_chat_t *chat, vlmc_session_t *session, const char *const *images,
                        size_t num_images, const int64_t *ids, size_t n, int max_new, int turn) {
  size_t before = 0;
  vlmc_chat_tokens(chat, &before);
  vlmc_chat_turn_options_t t = {.input_ids = ids, .num_input_ids = n, .max_new_tokens = max_new};
  vlmc_generate_result_t r;
  vlmc_status_t s = vlmc_chat_turn(chat, &t, &r);
  if (s) {
    TEST_FAIL_("turn %d: %s", turn, vlmc_status_message(s));
    vlmc_status_free(s);
    return;
  }
  size_t count = 0;
  const int64_t *conversation = vlmc_chat_tokens(chat, &count);
  /* The conversation grew by the turn's ids and the answer (its eos, if any, excluded). */
  int64_t answer = r.generated_tokens - (r.stopped_on_eos ? 1 : 0);
  EXPECT_EQ_INT(count, before + n + (size_t)answer);
  EXPECT_EQ_INT(r.context_tokens, before + n);
  EXPECT_TRUE(memcmp(conversation + before, ids, n * sizeof *ids) == 0);
  EXPECT_TRUE(memcmp(conversation + before + n, r.tokens, (size_t)answer * sizeof *ids) == 0);
  /* Every conversation token is in the cache except an answer's last one cut by the limit. */
  EXPECT_EQ_INT(vlmc_chat_cache_length(chat), count - (r.stopped_on_eos ? 0 : 1));
  if (turn > 1) EXPECT_EQ_INT(r.prompt_tokens, n + 1); /* the pending token, then the ids */
  expect_fresh_answer(session, chat, images, num_images, conversation, (size_t)r.context_tokens,
                      max_new, &r, turn);
  vlmc_generate_result_deinit(&r);
}

static void test_turns_continue_the_cache(void) {
  vlmc_session_t *session = open_session();
  size_t n = 0;
  int64_t *first = fixture_ids(&n);
  if (!session || !first) goto done;
  const char *images[1] = {kImage};
  vlmc_chat_options_t co = {.image_paths = images, .num_images = 1, .sampling = {.top_p = 1}};
  vlmc_chat_t *chat = NULL;
  EXPECT_OK(vlmc_chat_create(session, &co, &chat));
  if (!chat) goto done;
  expect_turn(chat, session, images, 1, first, n, 4, 1);
  ids_t second = text_ids(11, 7), third = text_ids(5, 1);
  expect_turn(chat, session, images, 1, second.ids, second.n, 5, 2);
  expect_turn(chat, session, images, 1, third.ids, third.n, 3, 3);
  vlmc_chat_destroy(chat);
done:
  free(first);
  vlmc_session_destroy(session);
}

/* The M-RoPE offset matters: positions after an image are not cache indices. */
static void test_image_prompt_has_a_rope_delta(void) {
  vlmc_session_t *session = open_session();
  size_t n = 0;
  int64_t *ids = fixture_ids(&n);
  if (session && ids) {
    const char *images[1] = {kImage};
    vlmc_generate_options_t g = {.input_ids = ids, .num_input_ids = n, .image_paths = images,
                                 .num_images = 1, .max_new_tokens = 1, .sampling = {.top_p = 1}};
    vlmc_generate_result_t r;
    EXPECT_OK(vlmc_session_generate(session, &g, &r));
    EXPECT_TRUE(r.rope_delta < 0); /* 144 pads take 12x12 positions: delta -132 */
    vlmc_generate_result_deinit(&r);
  }
  free(ids);
  vlmc_session_destroy(session);
}

static void test_refused_turns_keep_the_conversation(void) {
  vlmc_session_t *session = open_session();
  if (!session) return;
  vlmc_chat_options_t co = {.max_context = 40, .sampling = {.top_p = 1}};
  vlmc_chat_t *chat = NULL;
  EXPECT_OK(vlmc_chat_create(session, &co, &chat));
  ids_t too_long = text_ids(3, 38);
  vlmc_chat_turn_options_t t = {.input_ids = too_long.ids, .num_input_ids = too_long.n,
                                .max_new_tokens = 5};
  vlmc_generate_result_t r;
  EXPECT_ERROR(vlmc_chat_turn(chat, &t, &r), "the prompt has 38 tokens; with 5 new tokens it "
               "needs a context of 43, more than --max-context 40");
  ids_t first = text_ids(3, 10);
  expect_turn(chat, session, NULL, 0, first.ids, first.n, 5, 1);
  /* 15 tokens in the conversation; 21 more and 5 new make 41 > 40. */
  ids_t second = text_ids(9, 21);
  t = (vlmc_chat_turn_options_t){.input_ids = second.ids, .num_input_ids = second.n,
                                 .max_new_tokens = 5};
  EXPECT_ERROR(vlmc_chat_turn(chat, &t, &r), "the conversation holds 15 tokens and this message "
               "adds 21; with 5 new tokens it needs a context of 41, more than --max-context 40");
  int64_t bad[2] = {5, 512};
  t = (vlmc_chat_turn_options_t){.input_ids = bad, .num_input_ids = 2, .max_new_tokens = 2};
  EXPECT_ERROR(vlmc_chat_turn(chat, &t, &r), "input id [1] = 512 is outside the vocabulary");
  t = (vlmc_chat_turn_options_t){.prompt = "hello", .max_new_tokens = 2};
  EXPECT_ERROR(vlmc_chat_turn(chat, &t, &r), "has no tokenizer");
  ids_t third = text_ids(21, 4);
  expect_turn(chat, session, NULL, 0, third.ids, third.n, 5, 2);
  vlmc_chat_destroy(chat);
  vlmc_session_destroy(session);
}

/* Two turns sampled with temperature, top-k and top-p; returns the 10 tokens. */
static void sample_conversation(vlmc_session_t *session, uint64_t seed, int64_t *out) {
  vlmc_chat_options_t co = {.sampling = {.temperature = 1.5f, .top_k = 100, .top_p = 0.95f,
                                         .seed = seed}};
  vlmc_chat_t *chat = NULL;
  EXPECT_OK(vlmc_chat_create(session, &co, &chat));
  ids_t turns[2] = {text_ids(1, 6), text_ids(2, 3)};
  for (int k = 0; chat && k < 2; ++k) {
    vlmc_chat_turn_options_t t = {.input_ids = turns[k].ids, .num_input_ids = turns[k].n,
                                  .max_new_tokens = 5};
    vlmc_generate_result_t r;
    EXPECT_OK(vlmc_chat_turn(chat, &t, &r));
    for (int i = 0; i < 5; ++i) out[5 * k + i] = i < r.generated_tokens ? r.tokens[i] : -1;
    vlmc_generate_result_deinit(&r);
  }
  vlmc_chat_destroy(chat);
}

static void test_seeded_sampling_repeats(void) {
  vlmc_session_t *session = open_session();
  if (!session) return;
  int64_t a[10], b[10], c[10];
  sample_conversation(session, 7, a);
  sample_conversation(session, 7, b);
  sample_conversation(session, 8, c);
  EXPECT_TRUE(memcmp(a, b, sizeof a) == 0);
  EXPECT_TRUE(memcmp(a, c, sizeof a) != 0);
  vlmc_session_destroy(session);
}

int main(void) {
  snprintf(artifact, sizeof artifact, "/tmp/vlmc-chat-%d.vlmc", (int)getpid());
  vlmc_compile_options_t o = {.checkpoint_dir = kCheckpoint, .output_path = artifact,
                              .target = "ref", .precision = "auto", .command_line = "test"};
  vlmc_status_t s = vlmc_compile(&o);
  if (s) {
    fprintf(stderr, "compile: %s\n", vlmc_status_message(s));
    vlmc_status_free(s);
    return 1;
  }
  RUN_TEST(test_turns_continue_the_cache);
  RUN_TEST(test_image_prompt_has_a_rope_delta);
  RUN_TEST(test_refused_turns_keep_the_conversation);
  RUN_TEST(test_seeded_sampling_repeats);
  unlink(artifact);
  return TEST_SUMMARY();
}
