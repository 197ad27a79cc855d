/* preprocessor_config.json, processor_config.json, generation_config.json,
 * tokenizer_config.json and locating the chat template: accepted forms, which file wins, and
 * malformed inputs refused with the file and key named. */
#define _POSIX_C_SOURCE 200809L
#include "tests/unit/test_safetensors_util.h"

#include "frontend/config.h"
#include "tests/unit/test.h"

#define FIXTURES "tests/fixtures/configs/"

static vlmc_status_t pre_text(const char *text, vlmc_preprocessor_config_t *out) {
  vlmc_preprocessor_config_t scratch;
  return vlmc_preprocessor_config_parse(text, strlen(text), "preprocessor_config.json",
                                        out ? out : &scratch);
}

static vlmc_status_t gen_text(const char *text, vlmc_generation_config_t *out) {
  vlmc_generation_config_t scratch;
  return vlmc_generation_config_parse(text, strlen(text), "generation_config.json",
                                      out ? out : &scratch);
}

/* A minimal valid preprocessor config with `extra` spliced in after the brace. */
static vlmc_status_t pre_with(const char *extra, const char *sizes,
                              vlmc_preprocessor_config_t *out) {
  char text[1024];
  snprintf(text, sizeof text,
           "{%s%s\"patch_size\":14,\"temporal_patch_size\":2,\"merge_size\":2,"
           "\"image_mean\":[0.5,0.5,0.5],\"image_std\":[0.5,0.5,0.5]}",
           extra, sizes);
  return pre_text(text, out);
}

#define SIZES "\"min_pixels\":3136,\"max_pixels\":12845056,"

/* ---- preprocessor ------------------------------------------------------------------------ */

static void test_official_preprocessor(void) {
  vlmc_preprocessor_config_t c;
  char dir[256];
  scratch_dir_create(dir, sizeof dir);
  copy_fixture(FIXTURES "preprocessor_config.json", dir, "preprocessor_config.json");
  EXPECT_OK(vlmc_preprocessor_config_load(dir, &c));
  EXPECT_STREQ(c.source, "preprocessor_config.json");
  EXPECT_EQ_INT(c.min_pixels, 3136);
  EXPECT_EQ_INT(c.max_pixels, 12845056);
  EXPECT_EQ_INT(c.patch_size, 14);
  EXPECT_EQ_INT(c.temporal_patch_size, 2);
  EXPECT_EQ_INT(c.merge_size, 2);
  EXPECT_NEAR(c.image_mean[0], 0.48145466, 0);
  EXPECT_NEAR(c.image_std[2], 0.27577711, 0);
  /* The official file omits these; Qwen2VLImageProcessor's values apply. */
  EXPECT_NEAR(c.rescale_factor, 1.0 / 255.0, 0);
  EXPECT_EQ_INT(c.resample, 3);
  EXPECT_TRUE(c.do_resize && c.do_rescale && c.do_normalize && c.do_convert_rgb);

  /* processor_config.json (5.x) wins when both exist. */
  copy_fixture(FIXTURES "processor_config.json", dir, "processor_config.json");
  size_t len;
  char *text = read_fixture(FIXTURES "processor_config.json", &len);
  char *edited = malloc(len + 1);
  memcpy(edited, text, len + 1);
  char *at = strstr(edited, "\"longest_edge\": 12845056");
  memcpy(at, "\"longest_edge\": 99999999", 24);
  write_bytes(dir, "processor_config.json", edited, len);
  free(edited);
  free(text);
  EXPECT_OK(vlmc_preprocessor_config_load(dir, &c));
  EXPECT_STREQ(c.source, "processor_config.json");
  EXPECT_EQ_INT(c.max_pixels, 99999999);

  /* A processor_config.json without image_processor does not hide preprocessor_config.json. */
  write_bytes(dir, "processor_config.json", "{\"processor_class\":\"x\"}", 23);
  EXPECT_OK(vlmc_preprocessor_config_load(dir, &c));
  EXPECT_STREQ(c.source, "preprocessor_config.json");
  scratch_dir_remove(dir);

  scratch_dir_create(dir, sizeof dir);
  EXPECT_ERROR(vlmc_preprocessor_config_load(dir, &c), "no image processor settings");
  scratch_dir_remove(dir);
}

static void test_processor_config(void) {
  vlmc_preprocessor_config_t c;
  size_t len;
  char *text = read_fixture(FIXTURES "processor_config.json", &len);
  EXPECT_OK(vlmc_processor_config_parse(text, len, "processor_config.json", &c));
  free(text);
  EXPECT_STREQ(c.source, "processor_config.json");
  EXPECT_EQ_INT(c.min_pixels, 3136);
  EXPECT_EQ_INT(c.max_pixels, 12845056);
  EXPECT_NEAR(c.rescale_factor, 0.00392156862745098, 0);
  const char *no_section = "{\"processor_class\":\"Qwen2_5_VLProcessor\"}";
  EXPECT_ERROR(
      vlmc_processor_config_parse(no_section, strlen(no_section), "processor_config.json", &c),
      "processor_config.json: required key image_processor is missing");
  const char *bad = "{\"image_processor\":{\"patch_size\":\"14\"}}";
  EXPECT_ERROR(vlmc_processor_config_parse(bad, strlen(bad), "processor_config.json", &c),
               "processor_config.json: required key image_processor.min_pixels is missing (also "
               "looked for image_processor.size.shortest_edge)");
  const char *bad_type =
      "{\"image_processor\":{\"min_pixels\":1,\"max_pixels\":2,\"patch_size\":\"14\"}}";
  EXPECT_ERROR(
      vlmc_processor_config_parse(bad_type, strlen(bad_type), "processor_config.json", &c),
      "processor_config.json: image_processor.patch_size: expected an integer, got a string");
}

static void test_size_form(void) {
  vlmc_preprocessor_config_t c;
  size_t len;
  char *text = read_fixture(FIXTURES "preprocessor_size_config.json", &len);
  EXPECT_OK(vlmc_preprocessor_config_parse(text, len, "preprocessor_config.json", &c));
  free(text);
  EXPECT_EQ_INT(c.min_pixels, 3136);
  EXPECT_EQ_INT(c.max_pixels, 1003520);
  /* Explicit min_pixels / max_pixels override size. */
  EXPECT_OK(pre_with("\"size\":{\"shortest_edge\":1,\"longest_edge\":2},",
                     "\"min_pixels\":100,\"max_pixels\":200,", &c));
  EXPECT_EQ_INT(c.min_pixels, 100);
  EXPECT_EQ_INT(c.max_pixels, 200);
  EXPECT_OK(
      pre_with("\"size\":{\"shortest_edge\":1,\"longest_edge\":2},", "\"max_pixels\":300,", &c));
  EXPECT_EQ_INT(c.min_pixels, 1);
  EXPECT_EQ_INT(c.max_pixels, 300);
}

static void test_preprocessor_refusals(void) {
  EXPECT_ERROR(pre_with("", "", NULL),
               "preprocessor_config.json: required key min_pixels is missing (also looked for "
               "size.shortest_edge)");
  EXPECT_ERROR(pre_with("\"size\":{\"height\":448,\"width\":448},", "", NULL),
               "required key min_pixels is missing (also looked for size.shortest_edge)");
  EXPECT_ERROR(pre_with("\"size\":[1,2],", "", NULL),
               "preprocessor_config.json: size: expected an object, got an array");
  EXPECT_ERROR(pre_with("\"min_pixels\":3136,", "", NULL),
               "required key max_pixels is missing (also looked for size.longest_edge)");
  EXPECT_ERROR(pre_with("\"min_pixels\":500,\"max_pixels\":400,", "", NULL),
               "preprocessor_config.json: min_pixels 500 is larger than max_pixels 400");
  EXPECT_ERROR(pre_with("\"min_pixels\":0,\"max_pixels\":400,", "", NULL),
               "preprocessor_config.json: min_pixels: expected an integer >= 1, got 0");
  EXPECT_ERROR(pre_with("\"resample\":2,", SIZES, NULL),
               "preprocessor_config.json: resample: 2 is not supported; vlmc resizes with bicubic");
  EXPECT_ERROR(pre_with("\"resample\":\"bicubic\",", SIZES, NULL),
               "resample: expected an integer, got a string");
  EXPECT_ERROR(pre_with("\"rescale_factor\":0,", SIZES, NULL),
               "preprocessor_config.json: rescale_factor: expected a positive number, got 0");
  EXPECT_ERROR(pre_with("\"do_resize\":1,", SIZES, NULL),
               "preprocessor_config.json: do_resize: expected true or false, got a number");
  EXPECT_ERROR(pre_text("{" SIZES "\"patch_size\":14,\"temporal_patch_size\":2,\"merge_size\":2,"
                        "\"image_mean\":[0.5,0.5],\"image_std\":[0.5,0.5,0.5]}",
                        NULL),
               "preprocessor_config.json: image_mean: expected 3 elements, got 2");
  EXPECT_ERROR(pre_text("{" SIZES "\"patch_size\":14,\"temporal_patch_size\":2,\"merge_size\":2,"
                        "\"image_mean\":[0.5,0.5,0.5],\"image_std\":[0.5,0,0.5]}",
                        NULL),
               "preprocessor_config.json: image_std[1]: expected a positive number, got 0");
  EXPECT_ERROR(pre_text("{" SIZES "\"patch_size\":14,\"temporal_patch_size\":2,\"merge_size\":2,"
                        "\"image_mean\":[0.5,\"x\",0.5],\"image_std\":[0.5,0.5,0.5]}",
                        NULL),
               "image_mean[1]: expected a number, got a string");
  EXPECT_ERROR(pre_text("{" SIZES "\"temporal_patch_size\":2,\"merge_size\":2}", NULL),
               "preprocessor_config.json: required key patch_size is missing");
  EXPECT_ERROR(pre_text("{" SIZES "\"patch_size\":14,\"merge_size\":2}", NULL),
               "required key temporal_patch_size is missing");
  EXPECT_ERROR(pre_text("{" SIZES "\"patch_size\":14,\"temporal_patch_size\":2}", NULL),
               "required key merge_size is missing");
  EXPECT_ERROR(
      pre_text("{" SIZES "\"patch_size\":14,\"temporal_patch_size\":2,\"merge_size\":2}", NULL),
      "required key image_mean is missing");
  EXPECT_ERROR(pre_text("{\"min_pixels\": }", NULL), "preprocessor_config.json:1:16: invalid JSON");
  EXPECT_ERROR(pre_text("7", NULL),
               "preprocessor_config.json: expected a JSON object, got a number");
}

/* ---- generation -------------------------------------------------------------------------- */

static void test_generation(void) {
  vlmc_generation_config_t g;
  char dir[256];
  scratch_dir_create(dir, sizeof dir);
  EXPECT_ERROR(vlmc_generation_config_load(dir, &g), "generation_config.json: no such file");
  copy_fixture(FIXTURES "generation_config.json", dir, "generation_config.json");
  EXPECT_OK(vlmc_generation_config_load(dir, &g));
  scratch_dir_remove(dir);
  EXPECT_EQ_INT(g.eos_count, 2);
  EXPECT_EQ_INT(g.eos_token_ids[0], 151645);
  EXPECT_EQ_INT(g.eos_token_ids[1], 151643);
  EXPECT_TRUE(g.has_bos_token_id && g.bos_token_id == 151643);
  EXPECT_TRUE(g.has_pad_token_id && g.pad_token_id == 151643);
  EXPECT_TRUE(g.has_do_sample && g.do_sample);
  EXPECT_TRUE(g.has_temperature && g.temperature == 0.1);
  EXPECT_TRUE(g.has_top_k && g.top_k == 1);
  EXPECT_TRUE(g.has_top_p && g.top_p == 0.001);
  EXPECT_TRUE(g.has_repetition_penalty && g.repetition_penalty == 1.05);

  EXPECT_OK(vlmc_generation_config_load(FIXTURES "generation_config_single_eos.json", &g));
  EXPECT_EQ_INT(g.eos_count, 1);
  EXPECT_EQ_INT(g.eos_token_ids[0], 1);
  EXPECT_TRUE(!g.has_do_sample && !g.has_temperature && !g.has_top_k && !g.has_top_p);
  EXPECT_TRUE(!g.has_repetition_penalty && !g.has_pad_token_id);
  EXPECT_OK(gen_text("{}", &g));
  EXPECT_EQ_INT(g.eos_count, 0);
  EXPECT_OK(gen_text("{\"eos_token_id\":null,\"temperature\":0}", &g));
  EXPECT_TRUE(g.eos_count == 0 && g.has_temperature && g.temperature == 0);
}

static void test_generation_refusals(void) {
  EXPECT_ERROR(gen_text("{\"eos_token_id\":\"<|im_end|>\"}", NULL),
               "generation_config.json: eos_token_id: expected an integer or a list of integers, "
               "got a string");
  EXPECT_ERROR(gen_text("{\"eos_token_id\":[]}", NULL),
               "generation_config.json: eos_token_id: expected 1 to 8 ids, got 0");
  EXPECT_ERROR(gen_text("{\"eos_token_id\":[1,2,3,4,5,6,7,8,9]}", NULL),
               "eos_token_id: expected 1 to 8 ids, got 9");
  EXPECT_ERROR(gen_text("{\"eos_token_id\":[151645,-1]}", NULL),
               "generation_config.json: eos_token_id[1]: expected an integer >= 0, got -1");
  EXPECT_ERROR(gen_text("{\"eos_token_id\":[151645,null]}", NULL),
               "eos_token_id[1]: expected an integer, got nothing");
  EXPECT_ERROR(gen_text("{\"eos_token_id\":1.5}", NULL),
               "eos_token_id: expected an integer, got 1.5");
  EXPECT_ERROR(gen_text("{\"bos_token_id\":\"1\"}", NULL),
               "generation_config.json: bos_token_id: expected an integer, got a string");
  EXPECT_ERROR(gen_text("{\"pad_token_id\":-3}", NULL), "pad_token_id: expected an integer >= 0");
  EXPECT_ERROR(gen_text("{\"do_sample\":\"yes\"}", NULL),
               "generation_config.json: do_sample: expected true or false, got a string");
  EXPECT_ERROR(gen_text("{\"temperature\":-1}", NULL),
               "generation_config.json: temperature: expected a number in [0, 1e+06], got -1");
  EXPECT_ERROR(gen_text("{\"top_p\":1.5}", NULL),
               "generation_config.json: top_p: expected a number in (0, 1], got 1.5");
  EXPECT_ERROR(gen_text("{\"top_p\":0}", NULL), "top_p: expected a number in (0, 1], got 0");
  EXPECT_ERROR(gen_text("{\"top_k\":-1}", NULL), "top_k: expected an integer >= 0, got -1");
  EXPECT_ERROR(gen_text("{\"repetition_penalty\":0}", NULL),
               "repetition_penalty: expected a number in (0, 1e+06], got 0");
  EXPECT_ERROR(gen_text("{\"temperature\":[]}", NULL),
               "temperature: expected a number, got an array");
  EXPECT_ERROR(gen_text("{\"eos_token_id\":1,}", NULL),
               "generation_config.json:1:19: invalid JSON");
  EXPECT_ERROR(gen_text("null", NULL), "generation_config.json: expected a JSON object, got null");
}

/* ---- tokenizer_config and the chat template ---------------------------------------------- */

static void test_tokenizer_config(void) {
  vlmc_tokenizer_config_t t;
  EXPECT_OK(vlmc_tokenizer_config_load(FIXTURES "tokenizer_config.json", &t));
  EXPECT_STREQ(t.tokenizer_class, "Qwen2Tokenizer");
  EXPECT_TRUE(t.has_add_bos_token && !t.add_bos_token);
  EXPECT_TRUE(t.chat_template &&
              strncmp(t.chat_template, "{% for message in messages %}", 29) == 0);
  vlmc_tokenizer_config_deinit(&t);

  const char *list =
      "{\"chat_template\":[{\"name\":\"tool_use\",\"template\":\"T\"},"
      "{\"name\":\"default\",\"template\":\"D\"}]}";
  EXPECT_OK(vlmc_tokenizer_config_parse(list, strlen(list), "tokenizer_config.json", &t));
  EXPECT_STREQ(t.chat_template, "D");
  EXPECT_TRUE(t.tokenizer_class == NULL && !t.has_add_bos_token);
  vlmc_tokenizer_config_deinit(&t);

  const struct {
    const char *text, *expected;
  } bad[] = {
      {"{\"chat_template\":[{\"name\":\"tool_use\",\"template\":\"T\"}]}",
       "tokenizer_config.json: chat_template: the list of templates has no \"default\" entry"},
      {"{\"chat_template\":[{\"name\":\"default\"}]}",
       "tokenizer_config.json: required key chat_template[0].template is missing"},
      {"{\"chat_template\":[3]}", "chat_template[0]: expected an object, got a number"},
      {"{\"chat_template\":5}",
       "tokenizer_config.json: chat_template: expected a string or a list of templates, got a "
       "number"},
      {"{\"tokenizer_class\":[]}", "tokenizer_config.json: tokenizer_class: expected a string"},
      {"{\"add_bos_token\":\"false\"}", "add_bos_token: expected true or false, got a string"},
      {"{\"chat_template\":\"x\",}", "tokenizer_config.json:1:22: invalid JSON"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    EXPECT_ERROR(
        vlmc_tokenizer_config_parse(bad[i].text, strlen(bad[i].text), "tokenizer_config.json", &t),
        bad[i].expected);
    EXPECT_TRUE(t.chat_template == NULL && t.tokenizer_class == NULL); /* nothing leaks */
  }
}

static void test_chat_template_order(void) {
  char dir[256];
  scratch_dir_create(dir, sizeof dir);
  vlmc_chat_template_source_t tpl;
  EXPECT_ERROR(vlmc_chat_template_source_load(dir, &tpl),
               "no chat template (looked for chat_template.jinja, chat_template.json and "
               "tokenizer_config.json's chat_template)");
  write_bytes(dir, "tokenizer_config.json", "{\"tokenizer_class\":\"Qwen2Tokenizer\"}", 36);
  EXPECT_ERROR(vlmc_chat_template_source_load(dir, &tpl), "no chat template");
  copy_fixture(FIXTURES "tokenizer_config.json", dir, "tokenizer_config.json");
  EXPECT_OK(vlmc_chat_template_source_load(dir, &tpl));
  EXPECT_TRUE(tpl.source_path && strstr(tpl.source_path, "/tokenizer_config.json"));
  EXPECT_TRUE(tpl.text && strstr(tpl.text, "<|im_start|>assistant\n") != NULL);
  EXPECT_EQ_INT(tpl.len, strlen(tpl.text));
  vlmc_chat_template_source_deinit(&tpl);

  const char *json = "{\"chat_template\": \"from json\\n\"}";
  write_bytes(dir, "chat_template.json", json, strlen(json));
  EXPECT_OK(vlmc_chat_template_source_load(dir, &tpl));
  EXPECT_STREQ(tpl.text, "from json\n");
  EXPECT_TRUE(strstr(tpl.source_path, "/chat_template.json") != NULL);
  vlmc_chat_template_source_deinit(&tpl);

  const char *jinja = "{{ 'from jinja' }}\n";
  write_bytes(dir, "chat_template.jinja", jinja, strlen(jinja));
  EXPECT_OK(vlmc_chat_template_source_load(dir, &tpl));
  EXPECT_STREQ(tpl.text, jinja);
  EXPECT_EQ_INT(tpl.len, strlen(jinja));
  EXPECT_TRUE(strstr(tpl.source_path, "/chat_template.jinja") != NULL);
  vlmc_chat_template_source_deinit(&tpl);

  write_bytes(dir, "chat_template.jinja", "", 0);
  EXPECT_ERROR(vlmc_chat_template_source_load(dir, &tpl),
               "chat_template.jinja: the chat template is empty");
  EXPECT_TRUE(tpl.text == NULL && tpl.source_path == NULL);
  char path[512];
  path_join_buf(path, sizeof path, dir, "chat_template.jinja");
  unlink(path);
  write_bytes(dir, "chat_template.json", "{\"template\": \"x\"}", 17);
  EXPECT_ERROR(vlmc_chat_template_source_load(dir, &tpl),
               "chat_template.json: required key chat_template is missing");
  write_bytes(dir, "chat_template.json", "{\"chat_template\": 1}", 20);
  EXPECT_ERROR(vlmc_chat_template_source_load(dir, &tpl),
               "chat_template.json: chat_template: expected a string, got a number");
  write_bytes(dir, "chat_template.json", "{\"chat_template\": ", 18);
  EXPECT_ERROR(vlmc_chat_template_source_load(dir, &tpl), "chat_template.json:1:18: invalid JSON");
  scratch_dir_remove(dir);
}

int main(void) {
  RUN_TEST(test_official_preprocessor);
  RUN_TEST(test_processor_config);
  RUN_TEST(test_size_form);
  RUN_TEST(test_preprocessor_refusals);
  RUN_TEST(test_generation);
  RUN_TEST(test_generation_refusals);
  RUN_TEST(test_tokenizer_config);
  RUN_TEST(test_chat_template_order);
  return TEST_SUMMARY();
}
