/* The Qwen2-VL chat template: recognition (official text, a whitespace variant, refusals by
 * name), rendering (expected strings produced by jinja2 with transformers' settings from
 * tests/fixtures/chat_templates/qwen2_vl.jinja), and prompt tokenization with pad expansion
 * (spec §5.2's exact 281 ids for one 448x448 image). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/chat_template.h"
#include "support/file.h"
#include "tests/unit/test.h"

#define FIXTURES "tests/fixtures/chat_templates/"

static vlmc_tokenizer_t *tok;

static vlmc_status_t recognize_file(const char *path, vlmc_chat_template_t *out) {
  char *text;
  size_t len;
  VLMC_RETURN_IF_ERROR(vlmc_file_read_all(path, &text, &len));
  const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  char *template_text = NULL;
  vlmc_status_t status = vlmc_chat_template_text_from_file(name, text, len, &template_text);
  if (!status)
    status = vlmc_chat_template_recognize(name, template_text, strlen(template_text), out);
  free(template_text);
  free(text);
  return status;
}

static void test_official_template_fixture_is_the_embedded_text(void) {
  char *text;
  size_t len;
  EXPECT_OK(vlmc_file_read_all(FIXTURES "qwen2_vl.jinja", &text, &len));
  EXPECT_STREQ(text, vlmc_chat_template_qwen2_vl_text());
  free(text);
}

static void test_recognizes_official_and_whitespace_variant(void) {
  vlmc_chat_template_t t = {(vlmc_chat_template_kind_t)-1};
  EXPECT_OK(recognize_file(FIXTURES "qwen2_vl.jinja", &t));
  EXPECT_EQ_INT(t.kind, VLMC_CHAT_TEMPLATE_QWEN2_VL);
  t.kind = (vlmc_chat_template_kind_t)-1;
  EXPECT_OK(recognize_file(FIXTURES "qwen2_vl_reformatted.jinja", &t));
  EXPECT_EQ_INT(t.kind, VLMC_CHAT_TEMPLATE_QWEN2_VL);
  /* Qwen2-Instruct's text template (a text-only Qwen2's) */
  t.kind = (vlmc_chat_template_kind_t)-1;
  EXPECT_OK(recognize_file(FIXTURES "qwen2_text.jinja", &t));
  EXPECT_EQ_INT(t.kind, VLMC_CHAT_TEMPLATE_QWEN2_TEXT);
  /* Qwen2.5-Instruct's and Qwen3's text templates, tools branches and all; the project's
   * tokenizer_config.json carries Qwen3's */
  t.kind = (vlmc_chat_template_kind_t)-1;
  EXPECT_OK(recognize_file(FIXTURES "qwen2_5_text.jinja", &t));
  EXPECT_EQ_INT(t.kind, VLMC_CHAT_TEMPLATE_QWEN2_5_TEXT);
  t.kind = (vlmc_chat_template_kind_t)-1;
  EXPECT_OK(recognize_file(FIXTURES "qwen3_text.jinja", &t));
  EXPECT_EQ_INT(t.kind, VLMC_CHAT_TEMPLATE_QWEN3_TEXT);
  t.kind = (vlmc_chat_template_kind_t)-1;
  EXPECT_OK(recognize_file("assets/qwen-tokenizer/tokenizer_config.json", &t));
  EXPECT_EQ_INT(t.kind, VLMC_CHAT_TEMPLATE_QWEN3_TEXT);
  /* A trailing newline after the last block is eaten by trim_blocks. */
  char with_newline[2048];
  snprintf(with_newline, sizeof with_newline, "%s\n", vlmc_chat_template_qwen2_vl_text());
  EXPECT_OK(vlmc_chat_template_recognize("chat_template.jinja", with_newline, strlen(with_newline),
                                         &t));
}

/* An edit of a known template file: `from` replaced by `to` (same length). */
static vlmc_status_t recognize_edited(const char *file, const char *from, const char *to,
                                      vlmc_chat_template_t *t) {
  char *text;
  size_t len;
  vlmc_status_t status = vlmc_file_read_all(file, &text, &len);
  if (status) return status;
  char *at = strstr(text, from);
  EXPECT_TRUE(at != NULL && strlen(from) == strlen(to));
  if (at) memcpy(at, to, strlen(to));
  status = vlmc_chat_template_recognize(strrchr(file, '/') + 1, text, len, t);
  free(text);
  return status;
}

static void test_refuses_other_templates_by_name(void) {
  vlmc_chat_template_t t;
  /* A variant is refused by its difference from the known template it is closest to: a new
   * identifier by name, else the first element that differs. */
  EXPECT_ERROR(recognize_edited(FIXTURES "qwen3_text.jinja", "enable_thinking", "enable_thonking", &t),
               "qwen3_text.jinja:82:12: template not recognised as the Qwen3 text template, the "
               "closest known one (uses 'enable_thonking', which it does not)");
  EXPECT_ERROR(recognize_edited(FIXTURES "qwen2_5_text.jinja", "created by Alibaba", "created by Alibobo", &t),
               "template not recognised as the Qwen2.5 text template, the closest known one (it has");
  EXPECT_ERROR(recognize_edited(FIXTURES "qwen2_text.jinja", "a helpful assistant", "a pirate assistant ", &t),
               "qwen2_text.jinja:1:88: template not recognised as the Qwen2 text template, the "
               "closest known one (it has the text \"<|im_start|>system\\nYou are a pirate "
               "assistant .<|im_end|>\\n\" where the official template has the text "
               "\"<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n\")");
  EXPECT_ERROR(recognize_file(FIXTURES "qwen2_vl_other_system.jinja", &t),
               "(it has the text \"<|im_start|>system\\nYou are a pirate.<|im_end|>\\n\" where the "
               "official template has the text \"<|im_start|>system\\nYou are a helpful "
               "assistant.<|im_end|>\\n\")");
  EXPECT_ERROR(recognize_file(FIXTURES "unterminated.jinja", &t),
               "unterminated.jinja:1:42: unterminated {{ tag");
  const char *truncated = "{% set image_count = namespace(value=0) %}";
  EXPECT_ERROR(vlmc_chat_template_recognize("t.jinja", truncated, strlen(truncated), &t),
               "it has the end of the template where the official template has {% set video_count");
  const char *raw = "{% raw %}x{% endraw %}";
  EXPECT_ERROR(vlmc_chat_template_recognize("t.jinja", raw, strlen(raw), &t),
               "t.jinja:1:1: {% raw %} blocks are not supported");
}

static void test_template_text_from_json_files(void) {
  char *text = NULL;
  const char *json = "{\"chat_template\": \"{{ x }}\"}";
  EXPECT_OK(vlmc_chat_template_text_from_file("chat_template.json", json, strlen(json), &text));
  EXPECT_STREQ(text, "{{ x }}");
  free(text);
  const char *list = "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"a\"},"
                     "{\"name\": \"default\", \"template\": \"b\"}]}";
  EXPECT_OK(vlmc_chat_template_text_from_file("tokenizer_config.json", list, strlen(list), &text));
  EXPECT_STREQ(text, "b");
  free(text);
  EXPECT_ERROR(vlmc_chat_template_text_from_file("tokenizer_config.json", "{}", 2, &text),
               "tokenizer_config.json: chat_template: missing");
  EXPECT_ERROR(vlmc_chat_template_text_from_file("chat_template.json", "{\"chat_template\": 3}",
                                                 20, &text),
               "chat_template.json: chat_template: expected a string or a list");
  EXPECT_ERROR(vlmc_chat_template_text_from_file("chat_template.json", "{\n\"a\" 1}", 8, &text),
               "chat_template.json: invalid JSON at line 2");
  EXPECT_OK(vlmc_chat_template_text_from_file("chat_template.jinja", "{{ y }}", 7, &text));
  EXPECT_STREQ(text, "{{ y }}");
  free(text);
  /* The official template as a checkpoint's chat_template.json holds it (escaped JSON). */
  cJSON *wrapper = cJSON_CreateObject();
  cJSON_AddStringToObject(wrapper, "chat_template", vlmc_chat_template_qwen2_vl_text());
  char *wrapped = cJSON_PrintUnformatted(wrapper);
  EXPECT_TRUE(strstr(wrapped, "system\\nYou are") != NULL);
  EXPECT_OK(vlmc_chat_template_text_from_file("chat_template.json", wrapped, strlen(wrapped),
                                              &text));
  vlmc_chat_template_t t;
  EXPECT_OK(vlmc_chat_template_recognize("chat_template.json", text, strlen(text), &t));
  free(text);
  free(wrapped);
  cJSON_Delete(wrapper);
}

/* Renders messages given as JSON with a template kind and compares with the expected text, or
 * with the error (expected_error non-NULL). */
static void expect_render_with(vlmc_chat_template_kind_t kind, const char *messages_json,
                               bool generation, bool vision_id, const char *expected,
                               const char *expected_error) {
  cJSON *messages = cJSON_Parse(messages_json);
  EXPECT_TRUE(messages != NULL);
  vlmc_arena_t arena;
  vlmc_arena_init(&arena);
  vlmc_chat_message_t *list = NULL;
  size_t count = 0;
  EXPECT_OK(vlmc_chat_messages_from_json("case", "messages", messages, &arena, &list, &count));
  vlmc_chat_template_t t = {kind};
  vlmc_chat_render_options_t options = {generation, vision_id, false};
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  if (expected_error) {
    EXPECT_ERROR(vlmc_chat_template_render(&t, list, count, &options, &out), expected_error);
  } else {
    EXPECT_OK(vlmc_chat_template_render(&t, list, count, &options, &out));
    EXPECT_STREQ(vlmc_strbuf_cstr(&out), expected);
  }
  vlmc_strbuf_deinit(&out);
  vlmc_arena_deinit(&arena);
  cJSON_Delete(messages);
}

static void expect_render(const char *messages_json, bool generation, bool vision_id,
                          const char *expected) {
  expect_render_with(VLMC_CHAT_TEMPLATE_QWEN2_VL, messages_json, generation, vision_id, expected,
                     NULL);
}

#define SYS "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
#define IMG "<|vision_start|><|image_pad|><|vision_end|>"
#define VID "<|vision_start|><|video_pad|><|vision_end|>"

static void test_render_matches_jinja(void) {
  expect_render("[{\"role\":\"user\",\"content\":[{\"type\":\"image\"},"
                "{\"type\":\"text\",\"text\":\"Describe this image.\"}]}]",
                true, false,
                SYS "<|im_start|>user\n" IMG "Describe this image.<|im_end|>\n"
                    "<|im_start|>assistant\n");
  expect_render("[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":"
                "\"Hi\"},{\"role\":\"assistant\",\"content\":\"Hello!\"},{\"role\":\"user\","
                "\"content\":[{\"type\":\"image\"},{\"type\":\"image\"},{\"type\":\"text\","
                "\"text\":\"Compare them.\"}]}]",
                true, true,
                "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nPicture 1: " IMG
                "Picture 2: " IMG "Compare them.<|im_end|>\n<|im_start|>assistant\n");
  expect_render("[{\"role\":\"user\",\"content\":[{\"type\":\"video\"},{\"image_url\":{\"url\":"
                "\"x\"}},{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"other\"},{\"text\":\"b\"},"
                "{\"type\":\"image\"}]}]",
                false, true,
                SYS "<|im_start|>user\nVideo 1: " VID "Picture 1: " IMG "abPicture 2: " IMG
                    "<|im_end|>\n");
  expect_render("[]", true, false, "<|im_start|>assistant\n");
  expect_render("[{\"role\":\"assistant\",\"content\":\"hi\"},{\"role\":\"system\",\"content\":"
                "\"late\"}]",
                false, false,
                SYS "<|im_start|>assistant\nhi<|im_end|>\n<|im_start|>system\nlate<|im_end|>\n");
  expect_render("[{\"role\":\"user\",\"content\":[]}]", true, false,
                SYS "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n");
}

/* Qwen2-Instruct's text template renders text messages as the Qwen2-VL one does (jinja2 gives
 * both the same text for string contents) and refuses an image or video part. */
static void test_render_text_template(void) {
  const char *chat = "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\","
                     "\"content\":\"Hello!\"},{\"role\":\"user\",\"content\":\"Bye\"}]";
  const char *want = SYS "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
                         "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n";
  expect_render_with(VLMC_CHAT_TEMPLATE_QWEN2_TEXT, chat, true, false, want, NULL);
  expect_render_with(VLMC_CHAT_TEMPLATE_QWEN2_VL, chat, true, false, want, NULL);
  expect_render_with(VLMC_CHAT_TEMPLATE_QWEN2_TEXT,
                     "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\","
                     "\"content\":[{\"type\":\"text\",\"text\":\"Hi\"}]}]",
                     false, false,
                     "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
                     NULL);
  expect_render_with(VLMC_CHAT_TEMPLATE_QWEN2_TEXT,
                     "[{\"role\":\"user\",\"content\":[{\"type\":\"image\"},"
                     "{\"type\":\"text\",\"text\":\"Describe.\"}]}]",
                     true, false, NULL,
                     "message 0 has an image, which a text chat template has no slot for");
  /* a tool turn needs tools, which vlmc never passes; Qwen2.5's and Qwen3's refuse it by name */
  const char *tool = "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"tool\",\"content\":\"42\"}]";
  expect_render_with(VLMC_CHAT_TEMPLATE_QWEN3_TEXT, tool, true, false, NULL,
                     "message 1 is a tool turn; vlmc passes the chat template no tools");
  expect_render_with(VLMC_CHAT_TEMPLATE_QWEN2_5_TEXT, tool, true, false, NULL, "tool turn");
  expect_render_with(VLMC_CHAT_TEMPLATE_QWEN3_TEXT,
                     "[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]", true, false,
                     NULL, "message 0 has an image");
}

/* Qwen3-VL's template prints vision slots in user turns only: an image the template would drop
 * (an assistant's or a system message's) is refused by name rather than left without a slot,
 * and so is a tool turn. The renders themselves are checked against jinja2's in
 * test_chat_template_parity.c. */
static void test_render_qwen3_vl_refusals(void) {
  expect_render_with(VLMC_CHAT_TEMPLATE_QWEN3_VL,
                     "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\","
                     "\"content\":[{\"type\":\"image\"}]}]",
                     false, false, NULL,
                     "message 1 (assistant) has an image; the Qwen3-VL chat template prints "
                     "images and videos in user turns only");
  expect_render_with(VLMC_CHAT_TEMPLATE_QWEN3_VL,
                     "[{\"role\":\"system\",\"content\":[{\"type\":\"video\"}]}]", true,
                     false, NULL, "message 0 (system) has a video");
  expect_render_with(VLMC_CHAT_TEMPLATE_QWEN3_VL,
                     "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"tool\",\"content\":\"42\"}]",
                     true, false, NULL, "message 1 is a tool turn; vlmc passes the chat template no tools");
  /* no default system turn, unlike Qwen2-VL's */
  expect_render_with(VLMC_CHAT_TEMPLATE_QWEN3_VL, "[{\"role\":\"user\",\"content\":\"Hi\"}]",
                     true, false, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", NULL);
}

static void expect_messages_error(const char *messages_json, const char *error) {
  cJSON *messages = cJSON_Parse(messages_json);
  vlmc_arena_t arena;
  vlmc_arena_init(&arena);
  vlmc_chat_message_t *list = NULL;
  size_t count = 0;
  EXPECT_ERROR(vlmc_chat_messages_from_json("cases.json", "[3].messages", messages, &arena, &list,
                                            &count),
               error);
  vlmc_arena_deinit(&arena);
  cJSON_Delete(messages);
}

static void test_malformed_messages(void) {
  expect_messages_error("{}", "cases.json: [3].messages: expected a list of messages");
  expect_messages_error("[3]", "cases.json: [3].messages[0]: expected an object");
  expect_messages_error("[{\"content\":\"x\"}]",
                        "cases.json: [3].messages[0].role: expected a string");
  expect_messages_error("[{\"role\":\"user\",\"content\":null}]",
                        "[3].messages[0].content: expected a string or a list of items");
  expect_messages_error("[{\"role\":\"user\",\"content\":[\"image\"]}]",
                        "[3].messages[0].content[0]: expected an object");
  expect_messages_error("[{\"role\":\"user\",\"content\":[{\"type\":\"image\"},{\"text\":5}]}]",
                        "[3].messages[0].content[1].text: expected a string");
}

/* Spec §5.2: [user: image, "Describe this image."] + generation prompt, 448x448 -> 281 ids. */
static void test_spec_prompt_ids(void) {
  const char *text = SYS "<|im_start|>user\n" IMG "Describe this image.<|im_end|>\n"
                         "<|im_start|>assistant\n";
  vlmc_chat_grid_t grid = {1, 32, 32};
  vlmc_chat_prompt_t prompt;
  EXPECT_OK(vlmc_chat_prompt_tokenize(tok, text, strlen(text), &grid, 1, NULL, 0, 2, &prompt));
  EXPECT_EQ_INT(prompt.len, 281);
  static const int32_t head[] = {151644, 8948, 198,    2610,   525, 264, 10950, 17847, 13,
                                 151645, 198,  151644, 872,    198, 151652};
  static const int32_t tail[] = {151653, 74785, 419,    2168,  13, 151645,
                                 198,    151644, 77091, 198};
  for (size_t i = 0; i < 15 && i < prompt.len; ++i) EXPECT_EQ_INT(prompt.ids[i], head[i]);
  for (size_t i = 15; i < 15 + 256 && i < prompt.len; ++i) {
    EXPECT_EQ_INT(prompt.ids[i], 151655);
    EXPECT_EQ_INT(prompt.token_types[i], VLMC_CHAT_TOKEN_IMAGE);
  }
  for (size_t i = 0; i < 10 && 271 + i < prompt.len; ++i) {
    EXPECT_EQ_INT(prompt.ids[271 + i], tail[i]);
    EXPECT_EQ_INT(prompt.token_types[271 + i], VLMC_CHAT_TOKEN_TEXT);
  }
  EXPECT_EQ_INT(prompt.token_types[14], VLMC_CHAT_TOKEN_TEXT);
  vlmc_chat_prompt_deinit(&prompt);
}

static void test_several_images_and_a_video(void) {
  const char *text = IMG "a" IMG VID;
  vlmc_chat_grid_t images[2] = {{1, 4, 6}, {1, 2, 2}};
  vlmc_chat_grid_t video = {2, 2, 4};
  vlmc_chat_prompt_t prompt;
  EXPECT_OK(vlmc_chat_prompt_tokenize(tok, text, strlen(text), images, 2, &video, 1, 2, &prompt));
  /* 10 tokens before expansion; the three pads become 6, 1 and 4. */
  size_t image_pads = 0, video_pads = 0;
  for (size_t i = 0; i < prompt.len; ++i) {
    image_pads += prompt.token_types[i] == VLMC_CHAT_TOKEN_IMAGE;
    video_pads += prompt.token_types[i] == VLMC_CHAT_TOKEN_VIDEO;
  }
  EXPECT_EQ_INT(image_pads, 6 + 1);
  EXPECT_EQ_INT(video_pads, 4);
  EXPECT_EQ_INT(prompt.len, 10 - 3 + 6 + 1 + 4);
  vlmc_chat_prompt_deinit(&prompt);
}

static void test_pad_errors(void) {
  vlmc_chat_prompt_t prompt;
  vlmc_chat_grid_t grid = {1, 32, 32}, odd = {1, 3, 4}, empty = {0, 2, 2};
  EXPECT_ERROR(vlmc_chat_prompt_tokenize(tok, IMG IMG, strlen(IMG IMG), &grid, 1, NULL, 0, 2,
                                         &prompt),
               "the prompt has 2 <|image_pad|> tokens but 1 image grids were given");
  EXPECT_ERROR(vlmc_chat_prompt_tokenize(tok, "text", 4, &grid, 1, NULL, 0, 2, &prompt),
               "the prompt has 0 <|image_pad|> tokens but 1 image grids were given");
  EXPECT_ERROR(vlmc_chat_prompt_tokenize(tok, IMG, strlen(IMG), &odd, 1, NULL, 0, 2, &prompt),
               "image grids[0]: grid [1, 3, 4] is not a positive grid whose h and w are "
               "multiples of merge_size 2");
  EXPECT_ERROR(vlmc_chat_prompt_tokenize(tok, IMG, strlen(IMG), &empty, 1, NULL, 0, 2, &prompt),
               "image grids[0]: grid [0, 2, 2]");
  EXPECT_ERROR(vlmc_chat_prompt_tokenize(tok, VID, strlen(VID), NULL, 0, NULL, 0, 2, &prompt),
               "the prompt has 1 <|video_pad|> tokens but 0 video grids were given");
  EXPECT_ERROR(vlmc_chat_prompt_tokenize(tok, "x", 1, NULL, 0, NULL, 0, 0, &prompt),
               "merge_size 0 is not in [1, 64]");
  EXPECT_ERROR(vlmc_chat_prompt_tokenize(tok, "\xFF", 1, NULL, 0, NULL, 0, 2, &prompt),
               "not valid UTF-8");
  EXPECT_TRUE(prompt.ids == NULL && prompt.len == 0);
}

int main(void) {
  vlmc_status_t status =
      vlmc_tokenizer_create_from_file("assets/qwen-tokenizer/tokenizer.json.gz", &tok);
  if (status) {
    fprintf(stderr, "cannot load the tokenizer: %s\n", vlmc_status_message(status));
    vlmc_status_free(status);
    return 1;
  }
  RUN_TEST(test_official_template_fixture_is_the_embedded_text);
  RUN_TEST(test_recognizes_official_and_whitespace_variant);
  RUN_TEST(test_refuses_other_templates_by_name);
  RUN_TEST(test_template_text_from_json_files);
  RUN_TEST(test_render_matches_jinja);
  RUN_TEST(test_render_text_template);
  RUN_TEST(test_render_qwen3_vl_refusals);
  RUN_TEST(test_malformed_messages);
  RUN_TEST(test_spec_prompt_ids);
  RUN_TEST(test_several_images_and_a_video);
  RUN_TEST(test_pad_errors);
  vlmc_tokenizer_destroy(tok);
  return TEST_SUMMARY();
}
