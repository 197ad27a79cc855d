/* Fuzzes the checkpoint config parsers on a buffer. The first byte picks the parser
 * (config.json, preprocessor_config.json, processor_config.json, generation_config.json,
 * tokenizer_config.json); the rest is the file. A parse either fails with a status naming the
 * file, or yields values that satisfy the checks the parser promises. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "frontend/config.h"

static void check_model(const vlmc_model_config_t *c) {
  assert(c->model_type[0] && strlen(c->model_type) < VLMC_MODEL_TYPE_MAX);
  assert(c->text.head_dim_explicit ||
         c->text.head_dim * c->text.num_attention_heads == c->text.hidden_size);
  assert(c->text.num_attention_heads % c->text.num_key_value_heads == 0);
  assert(2 * (c->text.mrope_section[0] + c->text.mrope_section[1] + c->text.mrope_section[2]) ==
         c->text.head_dim);
  assert(c->vision.out_hidden_size == c->text.hidden_size);
  assert(c->vision.head_dim % 4 == 0);
  for (int i = 0; i < c->vision.fullatt_count; ++i)
    assert(c->vision.fullatt_block_indexes[i] >= 0 &&
           c->vision.fullatt_block_indexes[i] < c->vision.depth);
  assert(c->image_token_id < c->text.vocab_size && c->video_token_id < c->text.vocab_size);
}

static void check_preprocessor(const vlmc_preprocessor_config_t *c) {
  assert(c->min_pixels >= 1 && c->min_pixels <= c->max_pixels);
  assert(c->resample == 3 && c->rescale_factor > 0);
  for (int i = 0; i < 3; ++i) assert(c->image_std[i] > 0);
}

static void check_status(vlmc_status_t status, const char *file) {
  if (!status) return;
  assert(strstr(vlmc_status_message(status), file) != NULL);
  vlmc_status_free(status);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  vlmc_status_t status;
  switch (data[0] % 5) {
    case 0: { /* every family's parser on the same text */
      vlmc_model_config_t c;
      status = vlmc_qwen2_5_vl_config_parse(text, len, "config.json", &c);
      if (!status) check_model(&c);
      check_status(status, "config.json");
      status = vlmc_qwen2_vl_config_parse(text, len, "config.json", &c);
      if (!status) {
        check_model(&c);
        assert(!c.vision.windows && c.vision.fullatt_count == c.vision.depth);
        assert(c.vision.intermediate_size >= 1);
      }
      check_status(status, "config.json");
      status = vlmc_qwen3_vl_config_parse(text, len, "config.json", &c);
      if (!status) {
        check_model(&c);
        assert(c.text.head_dim_explicit && c.text.qk_norm && c.text.mrope_interleaved);
        assert(c.vision.num_position_embeddings >= 1 && !c.vision.windows);
        assert(c.vision.deepstack_count <= c.text.num_hidden_layers);
        for (int i = 0; i < c.vision.deepstack_count; ++i)
          assert(c.vision.deepstack_indexes[i] >= 0 && c.vision.deepstack_indexes[i] < c.vision.depth &&
                 (i == 0 || c.vision.deepstack_indexes[i] > c.vision.deepstack_indexes[i - 1]));
      }
      check_status(status, "config.json");
      status = vlmc_qwen3_config_parse(text, len, "config.json", &c); /* text-only */
      if (!status) assert(!c.has_vision && c.text.qk_norm && c.text.head_dim_explicit);
      check_status(status, "config.json");
      status = vlmc_qwen2_config_parse(text, len, "config.json", &c); /* text-only */
      if (!status) {
        assert(!c.has_vision && c.image_token_id == c.text.vocab_size);
        assert(c.text.head_dim * c.text.num_attention_heads == c.text.hidden_size);
        assert(2 * (c.text.mrope_section[0] + c.text.mrope_section[1] + c.text.mrope_section[2]) ==
               c.text.head_dim);
      }
      check_status(status, "config.json");
      break;
    }
    case 1:
    case 2: {
      vlmc_preprocessor_config_t c;
      const char *file = data[0] % 5 == 1 ? "preprocessor_config.json" : "processor_config.json";
      status = data[0] % 5 == 1 ? vlmc_preprocessor_config_parse(text, len, file, &c)
                                : vlmc_processor_config_parse(text, len, file, &c);
      if (!status) check_preprocessor(&c);
      check_status(status, file);
      break;
    }
    case 3: {
      vlmc_generation_config_t c;
      status = vlmc_generation_config_parse(text, len, "generation_config.json", &c);
      if (!status) assert(c.eos_count >= 0 && c.eos_count <= VLMC_CONFIG_MAX_EOS);
      check_status(status, "generation_config.json");
      break;
    }
    default: {
      vlmc_tokenizer_config_t c;
      status = vlmc_tokenizer_config_parse(text, len, "tokenizer_config.json", &c);
      if (!status) vlmc_tokenizer_config_deinit(&c);
      check_status(status, "tokenizer_config.json");
      break;
    }
  }
  return 0;
}
