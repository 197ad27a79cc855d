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
  EXPECT_OK(vlmc_manifest_set_default_convention(m, "qwen2_5_vl"));
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
  m->quantization.source = strdup("vlmc");
  m->quantization.bits = 4;
  m->quantization.group = 64;
  m->quantization.tensors = 253;
  m->generation.present = true;
  m->generation.do_sample = true;
  m->generation.temperature = 0.1;
  m->generation.top_k = 1;
  m->generation.top_p = 0.001;
  m->generation.repetition_penalty = 1.05;
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
  EXPECT_EQ_INT(back.format_version, VLMC_MANIFEST_FORMAT_VERSION);
  EXPECT_STREQ(back.convention.encode_image, "encode_image");
  EXPECT_STREQ(back.convention.prefill, "prefill");
  EXPECT_STREQ(back.convention.decode, "decode");
  EXPECT_STREQ(back.convention.positions, "mrope");
  EXPECT_EQ_INT(back.eos_count, 2);
  EXPECT_EQ_INT(back.eos_token_ids[1], 151643);
  EXPECT_EQ_INT(back.preprocess.max_pixels, 12845056);
  EXPECT_EQ_INT(back.num_params, 1);
  EXPECT_STREQ(back.quantization.source, "vlmc");
  EXPECT_EQ_INT(back.quantization.bits, 4);
  EXPECT_EQ_INT(back.quantization.group, 64);
  EXPECT_EQ_INT(back.quantization.tensors, 253);
  EXPECT_TRUE(back.generation.present && back.generation.do_sample);
  EXPECT_TRUE(back.generation.temperature == 0.1 && back.generation.top_p == 0.001);
  EXPECT_EQ_INT(back.generation.top_k, 1);
  EXPECT_TRUE(back.generation.repetition_penalty == 1.05);
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
      {"\"format_version\":2", "\"format_version\":\"2\"", "format_version: expected"},
      {"\"format_version\":2", "\"format_version\":3",
       "bad.vlmc: manifest format_version 3 is newer than this runtime reads (2)"},
      {"\"calling_convention\"", "\"calling_konvention\"", "calling_convention: missing"},
      {"\"positions\":\"mrope\"", "\"positions\":\"rope\"",
       "calling_convention.positions: expected \"mrope\" or \"plain\""},
      {"\"prefill\":\"prefill\"", "\"prefill\":\"\"", "calling_convention.prefill: expected"},
      {"\"decode\":\"decode\"", "\"decode\":7", "calling_convention.decode: expected a string"},
      {"\"bits\":4", "\"bits\":3", "quantization.bits: expected 4 or 8"},
      {"\"source\":\"vlmc\"", "\"source\":\"gptq\"",
       "quantization.source: expected \"vlmc\" or \"checkpoint\""},
      {"\"group\":64", "\"grup\":64", "quantization.group: missing"},
      {"\"quantization\":{", "\"quantization\":7,\"x\":{", "quantization: expected an object"},
      {"\"do_sample\":true", "\"do_sample\":1", "generation.do_sample: expected true or false"},
      {"\"top_k\":1", "\"top_k\":-1", "generation.top_k: expected a non-negative integer"},
      {"\"top_p\":0.001", "\"top_p\":0", "generation.top_p: expected a number in (0, 1]"},
      {"\"repetition_penalty\":1.05", "\"repetition_penalty\":0",
       "generation.repetition_penalty: expected a number in (0, 1e6]"},
      {"\"temperature\":0.1", "\"temperature\":-1", "generation.temperature: expected >= 0"},
      {"\"generation\":{", "\"generation\":[],\"x\":{", "generation: expected an object"},
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

/* The manifest's JSON text with `from` (which must occur) replaced by `to`. */
static void edit(vlmc_strbuf_t *json, const char *from, const char *to) {
  const char *at = strstr(json->data, from);
  EXPECT_TRUE(at != NULL);
  if (!at) return;
  vlmc_strbuf_t edited;
  vlmc_strbuf_init(&edited);
  vlmc_strbuf_append(&edited, json->data, (size_t)(at - json->data));
  vlmc_strbuf_puts(&edited, to);
  vlmc_strbuf_puts(&edited, at + strlen(from));
  vlmc_strbuf_deinit(json);
  *json = edited;
}

/* A manifest as written before format 2: no format_version, no calling_convention. */
static void v1_manifest(const char *family, vlmc_strbuf_t *json) {
  vlmc_manifest_t m;
  fill(&m);
  vlmc_strbuf_init(json);
  EXPECT_OK(vlmc_manifest_to_json(&m, json));
  vlmc_manifest_deinit(&m);
  edit(json, "\"format_version\":2,", "");
  edit(json, "\"calling_convention\":{\"encode_image\":\"encode_image\",\"prefill\":\"prefill\","
             "\"decode\":\"decode\",\"positions\":\"mrope\"},", "");
  char family_field[64];
  snprintf(family_field, sizeof family_field, "\"model_family\":\"%s\"", family);
  edit(json, "\"model_family\":\"qwen2_5_vl\"", family_field);
}

/* Version 1 still reads: Qwen2.5-VL gets its convention; a family without a default is
 * refused by name rather than guessed. */
static void test_version_1_fallback(void) {
  vlmc_strbuf_t json;
  v1_manifest("qwen2_5_vl", &json);
  EXPECT_TRUE(!strstr(json.data, "format_version") && !strstr(json.data, "calling_convention"));
  vlmc_manifest_t back;
  EXPECT_OK(vlmc_manifest_from_json("old.vlmc", json.data, json.len, &back));
  EXPECT_EQ_INT(back.format_version, 1);
  EXPECT_STREQ(back.convention.encode_image, "encode_image");
  EXPECT_STREQ(back.convention.prefill, "prefill");
  EXPECT_STREQ(back.convention.decode, "decode");
  EXPECT_STREQ(back.convention.positions, "mrope");
  vlmc_manifest_deinit(&back);
  vlmc_strbuf_deinit(&json);

  v1_manifest("llava", &json);
  EXPECT_ERROR(vlmc_manifest_from_json("old.vlmc", json.data, json.len, &back),
               "model family 'llava' has no default calling convention");
  vlmc_strbuf_deinit(&json);
}

/* A text-only family's convention (no encode_image, plain positions) round-trips. */
static void test_text_only_convention(void) {
  vlmc_manifest_t m, back;
  fill(&m);
  free(m.convention.encode_image);
  free(m.convention.positions);
  m.convention.encode_image = strdup("");
  m.convention.positions = strdup("plain");
  vlmc_strbuf_t json;
  vlmc_strbuf_init(&json);
  EXPECT_OK(vlmc_manifest_to_json(&m, &json));
  EXPECT_OK(vlmc_manifest_from_json("x.vlmc", json.data, json.len, &back));
  EXPECT_STREQ(back.convention.encode_image, "");
  EXPECT_STREQ(back.convention.positions, "plain");
  vlmc_manifest_deinit(&back);
  vlmc_manifest_deinit(&m);
  vlmc_strbuf_deinit(&json);
}

/* The writer refuses a manifest whose convention was never set. */
static void test_writer_needs_a_convention(void) {
  vlmc_manifest_t m;
  vlmc_manifest_init(&m);
  vlmc_strbuf_t json;
  vlmc_strbuf_init(&json);
  EXPECT_ERROR(vlmc_manifest_to_json(&m, &json), "calling convention is not set");
  vlmc_strbuf_deinit(&json);
  vlmc_manifest_deinit(&m);
}

int main(void) {
  RUN_TEST(test_round_trip);
  RUN_TEST(test_malformed_fields_are_named);
  RUN_TEST(test_version_1_fallback);
  RUN_TEST(test_text_only_convention);
  RUN_TEST(test_writer_needs_a_convention);
  return TEST_SUMMARY();
}
