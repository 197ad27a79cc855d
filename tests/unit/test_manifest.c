#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "artifact/manifest.h"
#include "tests/unit/test.h"

static void fill(vlmc_manifest_t *m) {
  vlmc_manifest_init(m);
  m->model_family = strdup("qwen2_5_vl");
  m->producer = strdup("vlmc test");
  m->compile_options = strdup("--target ref");
  m->targets = strdup("ref");
  m->vocab_size = 151936;
  m->image_token_id = 151655;
  m->video_token_id = 151656;
  m->vision_start_token_id = 151652;
  m->vision_end_token_id = 151653;
  m->merge_size = 2;
  m->eos_count = 2;
  m->eos_token_ids[0] = 151645;
  m->eos_token_ids[1] = 151643;
  vlmc_preprocess_params_init(&m->preprocess);
  m->chat_template_source = strdup("chat_template.jinja");
  vlmc_manifest_param_t p = {.name = "visual.blocks.0.norm1.weight", .dtype = VLMC_DTYPE_BF16,
                             .rank = 1, .shape = {1280}, .offset = 128, .nbytes = 2560,
                             .checksum = 0xfedcba9876543210ULL};
  vlmc_manifest_add_param(m, &p);
}

static void test_round_trip(void) {
  vlmc_manifest_t m, back;
  fill(&m);
  vlmc_strbuf_t json;
  vlmc_strbuf_init(&json);
  EXPECT_OK(vlmc_manifest_to_json(&m, &json));
  EXPECT_OK(vlmc_manifest_from_json("x.vlmc", json.data, json.len, &back));
  EXPECT_STREQ(back.model_family, "qwen2_5_vl");
  EXPECT_EQ_INT(back.eos_count, 2);
  EXPECT_EQ_INT(back.eos_token_ids[1], 151643);
  EXPECT_EQ_INT(back.preprocess.max_pixels, 12845056);
  EXPECT_EQ_INT(back.num_params, 1);
  const vlmc_manifest_param_t *p = vlmc_manifest_find_param(&back, "visual.blocks.0.norm1.weight");
  EXPECT_TRUE(p != NULL);
  if (p) {
    EXPECT_TRUE(p->checksum == 0xfedcba9876543210ULL);
    EXPECT_EQ_INT(p->shape[0], 1280);
    EXPECT_EQ_INT(p->dtype, VLMC_DTYPE_BF16);
  }
  vlmc_manifest_deinit(&back);
  vlmc_manifest_deinit(&m);
  vlmc_strbuf_deinit(&json);
}

/* Every field removed in turn, or given the wrong type, is refused by its path. */
static void test_malformed_fields_are_named(void) {
  vlmc_manifest_t m;
  fill(&m);
  vlmc_strbuf_t json;
  vlmc_strbuf_init(&json);
  EXPECT_OK(vlmc_manifest_to_json(&m, &json));
  vlmc_manifest_deinit(&m);
  struct { const char *from, *to, *expect; } cases[] = {
      {"\"merge_size\":2", "\"merge_size\":\"2\"", "merge_size: expected a non-negative integer"},
      {"\"min_pixels\":3136", "\"min_pixelz\":3136", "preprocess.min_pixels: missing"},
      {"\"storage\":\"inline\"", "\"storage\":\"cloud\"", "params.storage: expected"},
      {"\"checksum\":\"fedcba9876543210\"", "\"checksum\":\"xyz\"", "params.tensors[0]"},
      {"\"dtype\":\"bf16\"", "\"dtype\":\"bf17\"", "a known dtype"},
      {"151643]", "999999999]", "tokens.eos_token_ids: expected ids below"},
      {"\"format\":\"vlmc\"", "\"format\":\"gguf\"", "format: expected \"vlmc\""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const char *at = strstr(json.data, cases[i].from);
    EXPECT_TRUE(at != NULL);
    if (!at) continue;
    vlmc_strbuf_t bad;
    vlmc_strbuf_init(&bad);
    vlmc_strbuf_append(&bad, json.data, (size_t)(at - json.data));
    vlmc_strbuf_puts(&bad, cases[i].to);
    vlmc_strbuf_puts(&bad, at + strlen(cases[i].from));
    vlmc_manifest_t out;
    EXPECT_ERROR(vlmc_manifest_from_json("bad.vlmc", bad.data, bad.len, &out), cases[i].expect);
    vlmc_strbuf_deinit(&bad);
  }
  vlmc_manifest_t out;
  EXPECT_ERROR(vlmc_manifest_from_json("bad.vlmc", "{", 1, &out), "bad.vlmc: manifest: not valid");
  EXPECT_ERROR(vlmc_manifest_from_json("bad.vlmc", "[]", 2, &out), "expected a JSON object");
  vlmc_strbuf_deinit(&json);
}

int main(void) {
  RUN_TEST(test_round_trip);
  RUN_TEST(test_malformed_fields_are_named);
  return TEST_SUMMARY();
}
