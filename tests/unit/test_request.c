/* A request end to end through the frontends: spec §5.2's prompt with the 448×448 test image
 * gives exactly the reference's 281 ids, grid (1, 32, 32) and rope delta -240 (spec §4.4). */
#include <stdlib.h>
#include <string.h>

#include "runtime/request.h"
#include "tests/unit/test.h"

static void test_spec_5_2_prompt(void) {
  vlmc_tokenizer_t *tokenizer = NULL;
  EXPECT_OK(vlmc_tokenizer_create_from_file("assets/qwen-tokenizer/tokenizer.json.gz", &tokenizer));
  if (!tokenizer) return;
  const char *template_text = vlmc_chat_template_qwen2_vl_text();
  vlmc_chat_template_t chat_template;
  EXPECT_OK(vlmc_chat_template_recognize("qwen2_vl.jinja", template_text, strlen(template_text),
                                         &chat_template));
  vlmc_preprocess_params_t params;
  vlmc_preprocess_params_init(&params);
  const char *images[] = {"tests/fixtures/test_image_shapes.png"};
  vlmc_request_spec_t spec = {.image_paths = images, .num_images = 1,
                              .prompt = "Describe this image."};
  vlmc_request_model_t model = {.image_token_id = 151655, .video_token_id = 151656,
                                .merge_size = 2};
  vlmc_request_t request;
  EXPECT_OK(vlmc_request_build(tokenizer, &chat_template, &params, model, &spec, &request));
  EXPECT_EQ_INT(request.seq_len, 281);
  static const int64_t head[] = {151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645,
                                 198, 151644, 872, 198, 151652, 151655};
  static const int64_t tail[] = {151655, 151653, 74785, 419, 2168, 13, 151645, 198, 151644,
                                 77091, 198};
  for (size_t i = 0; request.seq_len == 281 && i < 16; ++i)
    EXPECT_EQ_INT(request.input_ids[i], head[i]);
  for (size_t i = 0; request.seq_len == 281 && i < 11; ++i)
    EXPECT_EQ_INT(request.input_ids[270 + i], tail[i]);
  EXPECT_EQ_INT(request.rope_delta, -240);
  EXPECT_EQ_INT(request.pixels.num_images, 1);
  EXPECT_EQ_INT(request.pixels.num_rows, 1024);
  if (request.pixels.image_grid_thw) {
    EXPECT_EQ_INT(request.pixels.image_grid_thw[1], 32);
    EXPECT_EQ_INT(request.pixels.image_grid_thw[2], 32);
  }
  vlmc_request_deinit(&request);

  const char *missing[] = {"tests/fixtures/no_such_image.png"};
  spec.image_paths = missing;
  EXPECT_ERROR(vlmc_request_build(tokenizer, &chat_template, &params, model, &spec, &request),
               "no_such_image.png");
  vlmc_tokenizer_destroy(tokenizer);
}

int main(void) {
  RUN_TEST(test_spec_5_2_prompt);
  return TEST_SUMMARY();
}
