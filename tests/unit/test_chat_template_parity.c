/* Parity with transformers' Qwen2.5-VL processor on tests/fixtures/tokenizer/chat_cases.json
 * (made by tests/oracle/ on the GPU machine): a list of
 *   {"messages": [...], "image_grid_thw": [[t,h,w], ...], "add_generation_prompt": bool,
 *    "text": rendered template text, "input_ids": [...] after pad expansion}
 * rendered with the official Qwen2-VL template. vlmc must give the same text and ids. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/chat_template.h"
#include "support/file.h"
#include "tests/unit/test.h"

#define CHAT_CASES "tests/fixtures/tokenizer/chat_cases.json"
#define ORACLE_TEMPLATE "tests/oracle/qwen2_vl_chat_template.jinja"

static vlmc_tokenizer_t *tok;

/* Reads [[t,h,w], ...]; an absent key is no grids. */
static bool read_grids(const cJSON *list, vlmc_chat_grid_t **out_grids, size_t *out_count) {
  *out_grids = NULL;
  *out_count = 0;
  if (!list) return true;
  if (!cJSON_IsArray(list)) return false;
  size_t n = (size_t)cJSON_GetArraySize(list), i = 0;
  vlmc_chat_grid_t *grids = calloc(n ? n : 1, sizeof *grids);
  for (const cJSON *g = list->child; g; g = g->next, ++i) {
    if (!cJSON_IsArray(g) || cJSON_GetArraySize(g) != 3) {
      free(grids);
      return false;
    }
    grids[i].t = (int64_t)cJSON_GetArrayItem(g, 0)->valuedouble;
    grids[i].h = (int64_t)cJSON_GetArrayItem(g, 1)->valuedouble;
    grids[i].w = (int64_t)cJSON_GetArrayItem(g, 2)->valuedouble;
  }
  *out_grids = grids;
  *out_count = n;
  return true;
}

static bool ids_equal(const vlmc_chat_prompt_t *prompt, const cJSON *expected) {
  if (!cJSON_IsArray(expected) || (size_t)cJSON_GetArraySize(expected) != prompt->len) return false;
  size_t i = 0;
  for (const cJSON *id = expected->child; id; id = id->next, ++i)
    if (!cJSON_IsNumber(id) || id->valuedouble != prompt->ids[i]) return false;
  return true;
}

static void check_case(const cJSON *c, size_t index) {
  vlmc_arena_t arena;
  vlmc_arena_init(&arena);
  char path[64];
  snprintf(path, sizeof path, "[%zu].messages", index);
  vlmc_chat_message_t *messages = NULL;
  size_t count = 0;
  EXPECT_OK(vlmc_chat_messages_from_json(CHAT_CASES, path,
                                         cJSON_GetObjectItemCaseSensitive(c, "messages"), &arena,
                                         &messages, &count));
  vlmc_chat_render_options_t options = {
      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt")),
      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_vision_id")), false};
  vlmc_chat_template_t chat_template = {VLMC_CHAT_TEMPLATE_QWEN2_VL};
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  EXPECT_OK(vlmc_chat_template_render(&chat_template, messages, count, &options, &text));
  const cJSON *expected_text = cJSON_GetObjectItemCaseSensitive(c, "text");
  EXPECT_TRUE(cJSON_IsString(expected_text));
  if (cJSON_IsString(expected_text) && strcmp(expected_text->valuestring, vlmc_strbuf_cstr(&text)))
    TEST_FAIL_("case %zu: text differs:\n  transformers: %s\n  vlmc:         %s", index,
               expected_text->valuestring, vlmc_strbuf_cstr(&text));
  vlmc_chat_grid_t *images = NULL, *videos = NULL;
  size_t image_count = 0, video_count = 0;
  EXPECT_TRUE(read_grids(cJSON_GetObjectItemCaseSensitive(c, "image_grid_thw"), &images,
                         &image_count));
  EXPECT_TRUE(read_grids(cJSON_GetObjectItemCaseSensitive(c, "video_grid_thw"), &videos,
                         &video_count));
  vlmc_chat_prompt_t prompt = {NULL, NULL, 0};
  EXPECT_OK(vlmc_chat_prompt_tokenize(tok, vlmc_strbuf_cstr(&text), text.len, images, image_count,
                                      videos, video_count, 2, &prompt));
  if (!ids_equal(&prompt, cJSON_GetObjectItemCaseSensitive(c, "input_ids")))
    TEST_FAIL_("case %zu: input_ids differ (vlmc has %zu ids)", index, prompt.len);
  vlmc_chat_prompt_deinit(&prompt);
  free(images);
  free(videos);
  vlmc_strbuf_deinit(&text);
  vlmc_arena_deinit(&arena);
}

static void test_chat_cases_match_transformers(void) {
  char *data = NULL;
  size_t len = 0;
  vlmc_status_t status = vlmc_file_read_all(CHAT_CASES, &data, &len);
  if (status) {
    TEST_FAIL_("%s (the oracle fixtures come from tests/oracle/ on the GPU machine)",
               vlmc_status_message(status));
    vlmc_status_free(status);
    return;
  }
  cJSON *cases = cJSON_ParseWithLength(data, len);
  EXPECT_TRUE(cJSON_IsArray(cases));
  size_t index = 0;
  for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next, ++index) check_case(c, index);
  printf("chat template parity: %zu cases checked\n", index);
  EXPECT_TRUE(index >= 5);
  cJSON_Delete(cases);
  free(data);
}

/* The text templates (Qwen2-, Qwen2.5-, Qwen3-Instruct's) and Qwen3-VL's against jinja2's renders of them
 * (tests/oracle/make_text_template_fixtures.py: transformers' apply_chat_template settings). A
 * case the template itself cannot render (content given as a list of parts: the templates add
 * strings to it) is recorded with text null and is not compared; vlmc prints its text parts. */
#define TEXT_CASES "tests/fixtures/chat_templates/text_template_cases.json"

static const struct {
  const char *kind, *file;
  vlmc_chat_template_kind_t value;
} kTextKinds[] = {
    {"qwen2_text", "tests/fixtures/chat_templates/qwen2_text.jinja", VLMC_CHAT_TEMPLATE_QWEN2_TEXT},
    {"qwen2_5_text", "tests/fixtures/chat_templates/qwen2_5_text.jinja",
     VLMC_CHAT_TEMPLATE_QWEN2_5_TEXT},
    {"qwen3_text", "tests/fixtures/chat_templates/qwen3_text.jinja", VLMC_CHAT_TEMPLATE_QWEN3_TEXT},
    {"qwen3_vl", "tests/fixtures/chat_templates/qwen3_vl.jinja", VLMC_CHAT_TEMPLATE_QWEN3_VL},
};

static void check_text_case(const cJSON *c, size_t index, size_t *compared) {
  const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "kind"));
  const cJSON *expected = cJSON_GetObjectItemCaseSensitive(c, "text");
  if (cJSON_IsNull(expected)) return; /* the template cannot render it */
  size_t k = 0;
  while (k < sizeof kTextKinds / sizeof kTextKinds[0] && (!kind || strcmp(kind, kTextKinds[k].kind)))
    ++k;
  if (k == sizeof kTextKinds / sizeof kTextKinds[0]) {
    TEST_FAIL_("case %zu: unknown kind", index);
    return;
  }
  vlmc_chat_template_t recognised;
  char *text = NULL;
  size_t len = 0;
  EXPECT_OK(vlmc_file_read_all(kTextKinds[k].file, &text, &len));
  EXPECT_OK(vlmc_chat_template_recognize(kTextKinds[k].file, text, len, &recognised));
  EXPECT_EQ_INT(recognised.kind, kTextKinds[k].value);
  free(text);
  vlmc_arena_t arena;
  vlmc_arena_init(&arena);
  vlmc_chat_message_t *messages = NULL;
  size_t count = 0;
  EXPECT_OK(vlmc_chat_messages_from_json(TEXT_CASES, "messages",
                                         cJSON_GetObjectItemCaseSensitive(c, "messages"), &arena,
                                         &messages, &count));
  const cJSON *thinking = cJSON_GetObjectItemCaseSensitive(c, "enable_thinking");
  vlmc_chat_render_options_t options = {
      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt")),
      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_vision_id")), cJSON_IsFalse(thinking)};
  vlmc_chat_template_t t = {kTextKinds[k].value};
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  EXPECT_OK(vlmc_chat_template_render(&t, messages, count, &options, &out));
  if (cJSON_IsString(expected) && strcmp(expected->valuestring, vlmc_strbuf_cstr(&out)))
    TEST_FAIL_("case %zu (%s %s): text differs:\n  jinja2: %s\n  vlmc:   %s", index, kind,
               cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "name")),
               expected->valuestring, vlmc_strbuf_cstr(&out));
  ++*compared;
  vlmc_strbuf_deinit(&out);
  vlmc_arena_deinit(&arena);
}

static void test_text_templates_match_jinja(void) {
  char *data = NULL;
  size_t len = 0;
  EXPECT_OK(vlmc_file_read_all(TEXT_CASES, &data, &len));
  cJSON *root = data ? cJSON_ParseWithLength(data, len) : NULL;
  const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
  EXPECT_TRUE(cJSON_IsArray(cases));
  size_t index = 0, compared = 0;
  for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next, ++index)
    check_text_case(c, index, &compared);
  printf("text chat templates: %zu of %zu cases compared\n", compared, index);
  EXPECT_TRUE(compared >= 35);
  cJSON_Delete(root);
  free(data);
}

/* The template the oracle rendered with must be one vlmc recognises. */
static void test_oracle_template_is_recognised(void) {
  char *text = NULL;
  size_t len = 0;
  vlmc_status_t status = vlmc_file_read_all(ORACLE_TEMPLATE, &text, &len);
  if (status) {
    TEST_FAIL_("%s", vlmc_status_message(status));
    vlmc_status_free(status);
    return;
  }
  vlmc_chat_template_t chat_template;
  EXPECT_OK(vlmc_chat_template_recognize(ORACLE_TEMPLATE, text, len, &chat_template));
  free(text);
}

int main(void) {
  vlmc_status_t status =
      vlmc_tokenizer_create_from_file("assets/qwen-tokenizer/tokenizer.json.gz", &tok);
  if (status) {
    fprintf(stderr, "cannot load the tokenizer: %s\n", vlmc_status_message(status));
    vlmc_status_free(status);
    return 1;
  }
  RUN_TEST(test_chat_cases_match_transformers);
  RUN_TEST(test_oracle_template_is_recognised);
  RUN_TEST(test_text_templates_match_jinja);
  vlmc_tokenizer_destroy(tok);
  return TEST_SUMMARY();
}
