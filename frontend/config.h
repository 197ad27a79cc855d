/* Checkpoint configuration files, parsed with cJSON into typed structs:
 *   config.json                       -> model_type, then the family's config
 *                                        (vlmc_model_config_t for Qwen2.5-VL)
 *   preprocessor_config.json or
 *   processor_config.json (5.x)       -> vlmc_preprocessor_config_t
 *   generation_config.json            -> vlmc_generation_config_t
 *   tokenizer_config.json             -> vlmc_tokenizer_config_t
 *   chat_template.jinja / .json / tokenizer_config.json -> vlmc_chat_template_source_t
 *
 * Each field's comment names the key it comes from ("a | b": a, else b). config.json has no
 * defaults: a key the model needs that is missing is an error naming the key, because the
 * transformers config classes default to values no checkpoint uses (vision hidden_size 3584,
 * tokens_per_second 4, rms_norm_eps 1e-5, ...). Values that contradict each other are refused
 * by name ("config.json: text_config.rope_parameters.mrope_section [16,24,16] sums to 56,
 * rotary half-width is 64"). The few defaults the other files have are the ones the official
 * Qwen2.5-VL files rely on (they omit the key) and are listed at the field.
 *
 * Every parse has a `_parse` form over a buffer (what the fuzzers call; `file` names the buffer
 * in messages) and a `_load` form over a path or a checkpoint folder. The structs hold no
 * pointers into the JSON, except where a `_deinit` says so. */
#ifndef VLMC_FRONTEND_CONFIG_H
#define VLMC_FRONTEND_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "support/status.h"

/* ---- config.json ------------------------------------------------------------------------- */

/* config.json is read in two steps. First its `model_type`, which picks the model family
 * (models/family.h: the registry of families lives above the frontend, which knows none);
 * then the family's own parser. The frontend provides the parsers; which model_type goes to
 * which parser is the family's decision, so the parsers below do not refuse a model_type. */

/* Upper bounds that keep the structs fixed-size; real models are far below them. */
enum { VLMC_CONFIG_MAX_DEPTH = 256, VLMC_CONFIG_MAX_EOS = 8, VLMC_MODEL_TYPE_MAX = 64 };

/* config.json's model_type (a required string, shorter than VLMC_MODEL_TYPE_MAX) into `out`.
 * Only the JSON and that key are checked. */
vlmc_status_t vlmc_model_type_parse(const char *text, size_t len, const char *file,
                                    char out[VLMC_MODEL_TYPE_MAX]);
/* `path` is a config.json file or a folder holding one. */
vlmc_status_t vlmc_model_type_load(const char *path, char out[VLMC_MODEL_TYPE_MAX]);

/* Text decoder. Layout: keys under `text_config` (nested, transformers >= 4.5x and 5.x) or at
 * the top level (legacy flat, the original hub uploads); text_config.X wins over X, as in
 * transformers, which ignores the top-level copies when text_config is present. Below,
 * "text.X" means that lookup. */
typedef struct {
  int64_t vocab_size;          /* text.vocab_size */
  int64_t hidden_size;         /* text.hidden_size */
  int64_t intermediate_size;   /* text.intermediate_size */
  int64_t num_hidden_layers;   /* text.num_hidden_layers */
  int64_t num_attention_heads; /* text.num_attention_heads */
  int64_t num_key_value_heads; /* text.num_key_value_heads */
  /* text.head_dim where the family's config has it (Qwen3: explicit, and then q_proj's width
   * is num_attention_heads * head_dim, not hidden_size); otherwise derived: hidden_size /
   * num_attention_heads */
  int64_t head_dim;
  bool head_dim_explicit;
  double rms_norm_eps;         /* text.rms_norm_eps */
  /* text.rope_parameters.rope_theta (5.x) | text.rope_theta */
  double rope_theta;
  /* text.rope_parameters.mrope_section (5.x) | text.rope_scaling.mrope_section; the sum must
   * be head_dim / 2 (temporal, height, width frequency counts) */
  int64_t mrope_section[3];
  int64_t max_position_embeddings; /* text.max_position_embeddings; 0 when absent (unused) */
  /* The family's attention: q/k/v biases (Qwen2: always; Qwen3: text.attention_bias, default
   * false), q_norm / k_norm (Qwen3: an RMSNorm over head_dim per head before the rotary), and
   * the M-RoPE layout (Qwen3-VL: interleaved, spec §4.5; Qwen2-VL / Qwen2.5-VL: sectioned). */
  bool qkv_bias;
  bool qk_norm;
  bool mrope_interleaved;
  bool has_bos_token_id, has_eos_token_id;
  int64_t bos_token_id; /* text.bos_token_id (informational; see generation) */
  int64_t eos_token_id; /* text.eos_token_id (first one when a list) */
} vlmc_text_config_t;

/* What a vision block's norms and MLP are made of: the family's parser decides. */
typedef enum {
  VLMC_VISION_RMS_NORM,   /* Qwen2.5-VL: RMSNorm, a weight */
  VLMC_VISION_LAYER_NORM, /* Qwen2-VL: LayerNorm, a weight and a bias */
} vlmc_vision_norm_t;
typedef enum {
  VLMC_VISION_SWIGLU,         /* Qwen2.5-VL: gate_proj, up_proj, down_proj (with biases) */
  VLMC_VISION_QUICK_GELU_MLP, /* Qwen2-VL: fc1, x * sigmoid(1.702 x), fc2 (with biases) */
  VLMC_VISION_GELU_TANH_MLP,  /* Qwen3-VL: linear_fc1, gelu (tanh form), linear_fc2 (biases) */
} vlmc_vision_mlp_t;
typedef enum {
  VLMC_MERGER_LN_Q, /* Qwen2-VL / Qwen2.5-VL: merger.ln_q, merger.mlp.0, merger.mlp.2 */
  VLMC_MERGER_FC,   /* Qwen3-VL: merger.norm, merger.linear_fc1, merger.linear_fc2 */
} vlmc_vision_merger_t;

/* Vision tower: keys under `vision_config`. */
typedef struct {
  int64_t depth;               /* vision_config.depth */
  int64_t hidden_size;         /* vision_config.hidden_size (vision width, not the LLM's) */
  int64_t intermediate_size;   /* vision_config.intermediate_size */
  int64_t num_heads;           /* vision_config.num_heads */
  int64_t head_dim;            /* derived: hidden_size / num_heads, a multiple of 4 */
  int64_t out_hidden_size;     /* vision_config.out_hidden_size (= text hidden_size) */
  int64_t in_channels;         /* vision_config.in_channels | in_chans (legacy); 3 */
  int64_t patch_size;          /* vision_config.patch_size | spatial_patch_size (legacy) */
  int64_t temporal_patch_size; /* vision_config.temporal_patch_size */
  int64_t spatial_merge_size;  /* vision_config.spatial_merge_size */
  int64_t window_size;         /* vision_config.window_size, in pixels */
  int64_t tokens_per_second;   /* vision_config.tokens_per_second (video positions) */
  int fullatt_count;           /* vision_config.fullatt_block_indexes, sorted, distinct */
  int64_t fullatt_block_indexes[VLMC_CONFIG_MAX_DEPTH];
  vlmc_vision_norm_t norm;     /* the family's */
  vlmc_vision_mlp_t mlp;       /* the family's */
  vlmc_vision_merger_t merger; /* the family's */
  bool patch_bias;             /* the patch embedding's Conv3d has a bias (Qwen3-VL) */
  /* vision_config.num_position_embeddings (Qwen3-VL): a learned n x n position table,
   * n = sqrt of it, bilinearly interpolated to each image's grid; 0: none */
  int64_t num_position_embeddings;
  /* vision_config.deepstack_visual_indexes (Qwen3-VL), strictly increasing: after block
   * deepstack_indexes[k] a merger of its own makes feature k, added to the hidden rows of the
   * image tokens after language-model layer k. 0 entries: none. */
  int deepstack_count;
  int64_t deepstack_indexes[VLMC_CONFIG_MAX_DEPTH];
  /* Window attention in the blocks not in fullatt_block_indexes (Qwen2.5-VL); false: every
   * block attends over its whole image (Qwen2-VL: window_size 0, every block listed full). */
  bool windows;
} vlmc_vision_config_t;

/* The parsed config.json of a Qwen2.5-VL checkpoint: the config struct of the qwen2_5_vl
 * family (models/qwen2_5_vl.c), the only family so far. It is Qwen2.5-VL-shaped (a vision
 * tower with windows and full-attention blocks, an M-RoPE text decoder); a family whose
 * config.json has other keys gets a parser of its own, and a struct of its own where these
 * fields do not describe it. */
typedef struct {
  char model_type[VLMC_MODEL_TYPE_MAX]; /* model_type, as written */
  bool nested;                          /* the text keys came from text_config */
  vlmc_text_config_t text;
  bool has_vision;              /* false: a text-only checkpoint (vision is all zero) */
  vlmc_vision_config_t vision;
  /* tie_word_embeddings | text_config.tie_word_embeddings (5.x decides by the top level and
   * forwards the legacy nested key to it) */
  bool tie_word_embeddings;
  /* Multimodal ids: top level | text_config (transformers keeps them top-level; some re-saves
   * copy them into text_config, sometimes as null). Each must be below text.vocab_size. */
  int64_t image_token_id;        /* image_token_id */
  int64_t video_token_id;        /* video_token_id */
  int64_t vision_start_token_id; /* vision_start_token_id */
  int64_t vision_end_token_id;   /* vision_end_token_id */
  /* dtype (5.x) | torch_dtype: "bfloat16", "float16" or "float32"; "" when absent */
  char weights_dtype[16];
  /* quantization | quantization_config (an mlx-community checkpoint, docs/quantization.md):
   * {"group_size": G, "bits": B}; both 0 when absent (the weights are not quantized) */
  int64_t quant_group;
  int64_t quant_bits;
} vlmc_model_config_t;

/* A family's config.json parser: what a model family names (models/family.h) and what a
 * checkpoint reads its config.json with (frontend/checkpoint.h). */
typedef vlmc_status_t (*vlmc_model_config_parser_t)(const char *text, size_t len,
                                                    const char *file,
                                                    vlmc_model_config_t *out_config);

/* The Qwen2.5-VL parser (the qwen2_5_vl family's): every key listed above. */
/* The same for a Qwen2-VL config.json (model_type qwen2_vl): the text keys as Qwen2.5-VL's
 * (flat or under text_config); vision_config's embed_dim is the tower's width, its hidden_size
 * the merger's output, intermediate_size = int(embed_dim * mlp_ratio), hidden_act quick_gelu
 * (the default when absent); no windows. */
vlmc_status_t vlmc_qwen2_vl_config_parse(const char *text, size_t len, const char *file,
                                         vlmc_model_config_t *out_config);
/* The same for a text-only Qwen2 config.json (model_type qwen2: Qwen2ForCausalLM): the text
 * keys at the top level, plain RoPE (M-RoPE whose sections all read t = h = w: (head_dim / 2 - 2, 1, 1)), no vision_config
 * (refused when present), the multimodal ids set to vocab_size (never a token). */
vlmc_status_t vlmc_qwen2_config_parse(const char *text, size_t len, const char *file,
                                      vlmc_model_config_t *out_config);
/* The same for a text-only Qwen3 config.json (model_type qwen3: Qwen3ForCausalLM): Qwen2's
 * keys and rope, with Qwen3's attention (head_dim explicit, attention_bias, q/k norms). */
vlmc_status_t vlmc_qwen3_config_parse(const char *text, size_t len, const char *file,
                                      vlmc_model_config_t *out_config);
vlmc_status_t vlmc_qwen2_5_vl_config_parse(const char *text, size_t len, const char *file,
                                           vlmc_model_config_t *out_config);
/* The same for a Qwen3-VL config.json (model_type qwen3_vl, transformers' Qwen3VLConfig): the
 * text keys under text_config with an explicit head_dim, attention_bias (default false), q/k
 * norms, interleaved M-RoPE (transformers interleaves whatever mrope_interleaved says; the
 * sections must still sum to head_dim / 2); vision_config: hidden_size, intermediate_size,
 * out_hidden_size, num_position_embeddings (a square), deepstack_visual_indexes (strictly
 * increasing, at most num_hidden_layers of them), hidden_act gelu_pytorch_tanh, 16-pixel
 * patches by the keys; no windows. */
vlmc_status_t vlmc_qwen3_vl_config_parse(const char *text, size_t len, const char *file,
                                         vlmc_model_config_t *out_config);
/* `path` is a config.json file or a folder holding one; `parse` is the family's parser. */
vlmc_status_t vlmc_model_config_load(const char *path, vlmc_model_config_parser_t parse,
                                     vlmc_model_config_t *out_config);

/* ---- preprocessor_config.json / processor_config.json -------------------------------------- */

typedef struct {
  /* Which file it came from (for messages): "preprocessor_config.json" or
   * "processor_config.json" (static strings). */
  const char *source;
  int64_t min_pixels;          /* min_pixels | size.shortest_edge (a pixel area) */
  int64_t max_pixels;          /* max_pixels | size.longest_edge (a pixel area) */
  int64_t patch_size;          /* patch_size */
  int64_t temporal_patch_size; /* temporal_patch_size */
  int64_t merge_size;          /* merge_size */
  double image_mean[3];        /* image_mean */
  double image_std[3];         /* image_std, each > 0 */
  double rescale_factor;       /* rescale_factor; absent: 1/255 */
  int64_t resample;            /* resample; absent: 3 (bicubic), the only one supported */
  bool do_resize;              /* do_resize; absent: true */
  bool do_rescale;             /* do_rescale; absent: true */
  bool do_normalize;           /* do_normalize; absent: true */
  bool do_convert_rgb;         /* do_convert_rgb; absent: true */
} vlmc_preprocessor_config_t;

/* preprocessor_config.json: the keys at the top level. */
vlmc_status_t vlmc_preprocessor_config_parse(const char *text, size_t len, const char *file,
                                             vlmc_preprocessor_config_t *out_config);
/* processor_config.json (transformers 5.x): the same keys under `image_processor`. */
vlmc_status_t vlmc_processor_config_parse(const char *text, size_t len, const char *file,
                                          vlmc_preprocessor_config_t *out_config);
/* From a checkpoint folder. processor_config.json wins when it has an `image_processor`
 * section: transformers 5.x writes it on save_pretrained, so when both files exist it is the
 * newer one. Otherwise preprocessor_config.json; VLMC_NOT_FOUND when neither is there. */
vlmc_status_t vlmc_preprocessor_config_load(const char *dir,
                                            vlmc_preprocessor_config_t *out_config);

/* ---- generation_config.json -------------------------------------------------------------- */

/* Every field is optional; has_X says whether the file set it. */
typedef struct {
  int eos_count; /* eos_token_id: an integer or a list; 0 when absent */
  int64_t eos_token_ids[VLMC_CONFIG_MAX_EOS];
  bool has_bos_token_id, has_pad_token_id;
  int64_t bos_token_id; /* bos_token_id */
  int64_t pad_token_id; /* pad_token_id */
  bool has_do_sample, has_temperature, has_top_k, has_top_p, has_repetition_penalty;
  bool do_sample;            /* do_sample */
  double temperature;        /* temperature, >= 0 */
  int64_t top_k;             /* top_k, >= 0 */
  double top_p;              /* top_p, in (0, 1] */
  double repetition_penalty; /* repetition_penalty, > 0 */
} vlmc_generation_config_t;

vlmc_status_t vlmc_generation_config_parse(const char *text, size_t len, const char *file,
                                           vlmc_generation_config_t *out_config);
/* `path` is the file or a folder holding generation_config.json; VLMC_NOT_FOUND when absent. */
vlmc_status_t vlmc_generation_config_load(const char *path, vlmc_generation_config_t *out_config);

/* ---- tokenizer_config.json --------------------------------------------------------------- */

typedef struct {
  char *tokenizer_class; /* tokenizer_class; NULL when absent (malloc'd) */
  /* chat_template: a string, or the entry named "default" of a list of {name, template};
   * NULL when absent (malloc'd) */
  char *chat_template;
  bool has_add_bos_token;
  bool add_bos_token; /* add_bos_token */
} vlmc_tokenizer_config_t;

vlmc_status_t vlmc_tokenizer_config_parse(const char *text, size_t len, const char *file,
                                          vlmc_tokenizer_config_t *out_config);
/* `path` is the file or a folder holding tokenizer_config.json; VLMC_NOT_FOUND when absent. */
vlmc_status_t vlmc_tokenizer_config_load(const char *path, vlmc_tokenizer_config_t *out_config);
void vlmc_tokenizer_config_deinit(vlmc_tokenizer_config_t *config);

/* ---- the chat template ------------------------------------------------------------------- */

typedef struct {
  char *text; /* the template source, NUL-terminated (malloc'd) */
  size_t len;
  char *source_path; /* the file it came from (malloc'd) */
} vlmc_chat_template_source_t;

/* Finds the chat template of a checkpoint folder, first of: chat_template.jinja (the whole
 * file), chat_template.json ({"chat_template": "..."}), tokenizer_config.json's
 * chat_template. VLMC_NOT_FOUND, naming the three, when none has one. The text is not
 * interpreted here (frontend/chat_template.h recognises and renders it). */
vlmc_status_t vlmc_chat_template_source_load(const char *dir,
                                             vlmc_chat_template_source_t *out_source);
void vlmc_chat_template_source_deinit(vlmc_chat_template_source_t *source);

#endif
