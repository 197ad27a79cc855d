/* config.json: its model_type (every family's first step), and the Qwen2.5-VL parser, legacy
 * flat and nested layouts (spec §1.2); see config.h for where each field comes from. Reading
 * and checking are separate steps: first every value is read with its type and range, then
 * the values are checked against each other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/config.h"
#include "support/json.h"

/* Sizes beyond this are not a model we could hold; the bound keeps later products in range. */
#define MAX_SIZE ((int64_t)1 << 24)
#define MAX_TOKEN_ID ((int64_t)INT32_MAX)

typedef struct {
  const char *file;
  const cJSON *root;
  const cJSON *text;                  /* text_config, or NULL for the legacy flat layout */
  const cJSON *vision;                /* vision_config */
  char rope_path[VLMC_JSON_PATH_MAX]; /* the rope object parse_rope read, for messages */
} model_doc_t;

/* text_config.X, else top-level X; when neither exists, the ref names the preferred one. */
static vlmc_json_ref_t text_ref(const model_doc_t *doc, const char *key) {
  vlmc_json_ref_t top = vlmc_json_ref(doc->file, doc->root, "", key);
  if (!doc->text) return top;
  vlmc_json_ref_t nested = vlmc_json_ref(doc->file, doc->text, "text_config", key);
  if (nested.node) return nested;
  if (top.node) return top;
  snprintf(nested.also, sizeof nested.also, "%s", key);
  return nested;
}

/* Top-level X, else text_config.X: where transformers keeps the multimodal ids and tying. */
static vlmc_json_ref_t top_ref(const model_doc_t *doc, const char *key) {
  vlmc_json_ref_t top = vlmc_json_ref(doc->file, doc->root, "", key);
  if (top.node || !doc->text) return top;
  vlmc_json_ref_t nested = vlmc_json_ref(doc->file, doc->text, "text_config", key);
  if (nested.node) return nested;
  snprintf(top.also, sizeof top.also, "text_config.%s", key);
  return top;
}

static vlmc_json_ref_t vision_ref(const model_doc_t *doc, const char *key) {
  return vlmc_json_ref(doc->file, doc->vision, "vision_config", key);
}

static vlmc_status_t text_size(const model_doc_t *doc, const char *key, int64_t *out) {
  vlmc_json_ref_t ref = text_ref(doc, key);
  return vlmc_json_int_req(&ref, 1, MAX_SIZE, out);
}

static vlmc_status_t vision_size(const model_doc_t *doc, const char *key, int64_t *out) {
  vlmc_json_ref_t ref = vision_ref(doc, key);
  return vlmc_json_int_req(&ref, 1, MAX_SIZE, out);
}

/* A key with a legacy second spelling (in_channels / in_chans): either will do; both must agree. */
static vlmc_status_t vision_size_alias(const model_doc_t *doc, const char *key, const char *legacy,
                                       int64_t *out) {
  vlmc_json_ref_t ref = vision_ref(doc, key), old = vision_ref(doc, legacy);
  int64_t value = 0, old_value = 0;
  bool present = false, old_present = false;
  VLMC_RETURN_IF_ERROR(vlmc_json_int_opt(&ref, 1, MAX_SIZE, &value, &present));
  VLMC_RETURN_IF_ERROR(vlmc_json_int_opt(&old, 1, MAX_SIZE, &old_value, &old_present));
  if (!present && !old_present) {
    snprintf(ref.also, sizeof ref.also, "%s", old.path);
    return vlmc_json_missing(&ref);
  }
  if (present && old_present && value != old_value)
    return vlmc_json_error(&ref, VLMC_INVALID_ARGUMENT, "%lld disagrees with %s %lld",
                           (long long)value, old.path, (long long)old_value);
  *out = present ? value : old_value;
  return NULL;
}

static vlmc_status_t require_silu(const vlmc_json_ref_t *ref) {
  const char *act;
  VLMC_RETURN_IF_ERROR(vlmc_json_string_req(ref, &act));
  if (strcmp(act, "silu") != 0)
    return vlmc_json_error(ref, VLMC_UNSUPPORTED,
                           "activation '%.40s' is not supported (Qwen2.5-VL "
                           "uses 'silu')",
                           act);
  return NULL;
}

/* ---- model_type -------------------------------------------------------------------------- */

/* Reads model_type only: which family it names, and whether that family exists, is decided by
 * the family registry (models/family.c), not here. */
static vlmc_status_t read_model_type(const char *file, const cJSON *root,
                                     char out[VLMC_MODEL_TYPE_MAX]) {
  vlmc_json_ref_t ref = vlmc_json_ref(file, root, "", "model_type");
  const char *type;
  VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&ref, &type));
  size_t len = strlen(type);
  if (len == 0 || len >= VLMC_MODEL_TYPE_MAX)
    return vlmc_json_error(&ref, VLMC_INVALID_ARGUMENT,
                           "'%.60s' is not a model type name (1 to %d characters)", type,
                           VLMC_MODEL_TYPE_MAX - 1);
  memcpy(out, type, len + 1);
  return NULL;
}

vlmc_status_t vlmc_model_type_parse(const char *text, size_t len, const char *file,
                                    char out[VLMC_MODEL_TYPE_MAX]) {
  out[0] = '\0';
  cJSON *root = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_json_parse_object(file, text, len, &root));
  vlmc_status_t status = read_model_type(file, root, out);
  cJSON_Delete(root);
  if (status) out[0] = '\0';
  return status;
}

vlmc_status_t vlmc_model_type_load(const char *path, char out[VLMC_MODEL_TYPE_MAX]) {
  char *text, *file;
  size_t len;
  out[0] = '\0';
  VLMC_RETURN_IF_ERROR(vlmc_json_read_config_file(path, "config.json", &text, &len, &file));
  vlmc_status_t status = vlmc_model_type_parse(text, len, file, out);
  free(text);
  free(file);
  return status;
}

/* ---- text -------------------------------------------------------------------------------- */

static vlmc_status_t parse_rope(model_doc_t *doc, vlmc_text_config_t *text) {
  /* 5.x writes rope_parameters, older files rope_scaling; text_config before the top level. */
  vlmc_json_ref_t candidates[4];
  int n = 0;
  if (doc->text) {
    candidates[n++] = vlmc_json_ref(doc->file, doc->text, "text_config", "rope_parameters");
    candidates[n++] = vlmc_json_ref(doc->file, doc->text, "text_config", "rope_scaling");
  }
  candidates[n++] = vlmc_json_ref(doc->file, doc->root, "", "rope_parameters");
  candidates[n++] = vlmc_json_ref(doc->file, doc->root, "", "rope_scaling");
  const vlmc_json_ref_t *rope = NULL;
  for (int i = 0; i < n && !rope; ++i)
    if (candidates[i].node) rope = &candidates[i];
  if (!rope) {
    vlmc_json_ref_t missing = candidates[0];
    snprintf(missing.also, sizeof missing.also, "%s", candidates[1].path);
    for (int i = 2; i < n; ++i)
      snprintf(missing.also + strlen(missing.also), sizeof missing.also - strlen(missing.also),
               ", %s", candidates[i].path);
    return vlmc_json_missing(&missing);
  }
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_object(rope));
  snprintf(doc->rope_path, sizeof doc->rope_path, "%s", rope->path);

  vlmc_json_ref_t type = vlmc_json_ref(doc->file, rope->node, rope->path, "rope_type");
  if (!type.node) type = vlmc_json_ref(doc->file, rope->node, rope->path, "type");
  const char *type_name = "default";
  VLMC_RETURN_IF_ERROR(vlmc_json_string_opt(&type, &type_name, NULL));
  if (strcmp(type_name, "default") != 0 && strcmp(type_name, "mrope") != 0)
    return vlmc_json_error(
        &type, VLMC_UNSUPPORTED,
        "'%.40s' is not supported (Qwen2.5-VL uses M-RoPE: 'mrope' or 'default')", type_name);

  vlmc_json_ref_t section = vlmc_json_ref(doc->file, rope->node, rope->path, "mrope_section");
  if (!section.node) return vlmc_json_missing(&section);
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_array(&section, 3));
  int i = 0;
  const cJSON *node;
  cJSON_ArrayForEach(node, section.node) { /* linear, like every walk of a JSON list */
    vlmc_json_ref_t element = vlmc_json_ref_item(&section, node, i);
    VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&element, 0, MAX_SIZE, &text->mrope_section[i]));
    ++i;
  }

  vlmc_json_ref_t theta = vlmc_json_ref(doc->file, rope->node, rope->path, "rope_theta");
  if (!theta.node) {
    vlmc_json_ref_t flat = text_ref(doc, "rope_theta");
    if (flat.node)
      theta = flat;
    else
      snprintf(theta.also, sizeof theta.also, "%s", flat.path);
  }
  VLMC_RETURN_IF_ERROR(vlmc_json_double_req(&theta, &text->rope_theta));
  if (!(text->rope_theta > 0))
    return vlmc_json_error(&theta, VLMC_OUT_OF_RANGE, "expected a positive number, got %g",
                           text->rope_theta);
  return NULL;
}

static vlmc_status_t parse_text_ids(const model_doc_t *doc, vlmc_text_config_t *text) {
  vlmc_json_ref_t bos = text_ref(doc, "bos_token_id");
  VLMC_RETURN_IF_ERROR(
      vlmc_json_int_opt(&bos, 0, MAX_TOKEN_ID, &text->bos_token_id, &text->has_bos_token_id));
  vlmc_json_ref_t eos = text_ref(doc, "eos_token_id");
  int64_t eos_ids[VLMC_CONFIG_MAX_EOS];
  int eos_count;
  VLMC_RETURN_IF_ERROR(vlmc_json_id_list_opt(&eos, eos_ids, VLMC_CONFIG_MAX_EOS, &eos_count));
  text->has_eos_token_id = eos_count > 0;
  if (eos_count > 0) text->eos_token_id = eos_ids[0];
  return NULL;
}

typedef vlmc_status_t (*rope_parser_t)(model_doc_t *doc, vlmc_text_config_t *text);

/* Which text model: Qwen2's attention (q/k/v biases, head_dim = hidden / heads) or Qwen3's
 * (text.head_dim explicit, text.attention_bias default false, q_norm and k_norm). */
typedef enum { TEXT_QWEN2, TEXT_QWEN3 } text_kind_t;

static vlmc_status_t parse_attention_kind(model_doc_t *doc, vlmc_text_config_t *text,
                                          text_kind_t kind) {
  text->qkv_bias = kind == TEXT_QWEN2;
  text->qk_norm = kind == TEXT_QWEN3;
  if (kind == TEXT_QWEN2) return NULL;
  VLMC_RETURN_IF_ERROR(text_size(doc, "head_dim", &text->head_dim));
  text->head_dim_explicit = true;
  vlmc_json_ref_t bias = text_ref(doc, "attention_bias");
  return vlmc_json_bool_opt(&bias, &text->qkv_bias, NULL);
}

static vlmc_status_t parse_text_with(model_doc_t *doc, vlmc_text_config_t *text,
                                     text_kind_t kind, rope_parser_t parse_rope_config) {
  VLMC_RETURN_IF_ERROR(text_size(doc, "vocab_size", &text->vocab_size));
  VLMC_RETURN_IF_ERROR(text_size(doc, "hidden_size", &text->hidden_size));
  VLMC_RETURN_IF_ERROR(text_size(doc, "intermediate_size", &text->intermediate_size));
  VLMC_RETURN_IF_ERROR(text_size(doc, "num_hidden_layers", &text->num_hidden_layers));
  VLMC_RETURN_IF_ERROR(text_size(doc, "num_attention_heads", &text->num_attention_heads));
  VLMC_RETURN_IF_ERROR(text_size(doc, "num_key_value_heads", &text->num_key_value_heads));
  VLMC_RETURN_IF_ERROR(parse_attention_kind(doc, text, kind));
  vlmc_json_ref_t eps = text_ref(doc, "rms_norm_eps");
  VLMC_RETURN_IF_ERROR(vlmc_json_double_req(&eps, &text->rms_norm_eps));
  if (!(text->rms_norm_eps > 0 && text->rms_norm_eps < 1))
    return vlmc_json_error(&eps, VLMC_OUT_OF_RANGE, "expected a number in (0, 1), got %g",
                           text->rms_norm_eps);
  vlmc_json_ref_t act = text_ref(doc, "hidden_act");
  VLMC_RETURN_IF_ERROR(require_silu(&act));
  vlmc_json_ref_t sliding = text_ref(doc, "use_sliding_window");
  bool use_sliding = false;
  VLMC_RETURN_IF_ERROR(vlmc_json_bool_opt(&sliding, &use_sliding, NULL));
  if (use_sliding)
    return vlmc_json_error(&sliding, VLMC_UNSUPPORTED,
                           "sliding-window attention is not supported (no Qwen2.5-VL uses it)");
  vlmc_json_ref_t max_pos = text_ref(doc, "max_position_embeddings");
  VLMC_RETURN_IF_ERROR(
      vlmc_json_int_opt(&max_pos, 1, MAX_TOKEN_ID, &text->max_position_embeddings, NULL));
  VLMC_RETURN_IF_ERROR(parse_rope_config(doc, text));
  return parse_text_ids(doc, text);
}

static vlmc_status_t parse_text(model_doc_t *doc, vlmc_text_config_t *text) {
  return parse_text_with(doc, text, TEXT_QWEN2, parse_rope);
}

/* Qwen3-VL's text model: transformers' Qwen3VLTextRotaryEmbedding interleaves the sections
 * whatever rope_parameters.mrope_interleaved says (spec §4.5), so the layout is the family's. */
static vlmc_status_t parse_text_qwen3_vl(model_doc_t *doc, vlmc_text_config_t *text) {
  VLMC_RETURN_IF_ERROR(parse_text_with(doc, text, TEXT_QWEN3, parse_rope));
  text->mrope_interleaved = true;
  return NULL;
}

/* A text-only Qwen2 checkpoint's rope (Qwen2ForCausalLM): rope_theta, and rope_scaling absent,
 * null or of type "default": plain RoPE. That is M-RoPE with any sections, since the positions
 * of text are t = h = w (transformers' get_rope_index for a prompt without images, and the
 * runtime's): mrope_section (head_dim / 2 - 2, 1, 1). */
static vlmc_status_t parse_rope_plain(model_doc_t *doc, vlmc_text_config_t *text) {
  static const char *const keys[] = {"rope_parameters", "rope_scaling"};
  vlmc_json_ref_t theta = text_ref(doc, "rope_theta");
  for (int i = 0; i < 2; ++i) {
    vlmc_json_ref_t rope = vlmc_json_ref(doc->file, doc->root, "", keys[i]);
    if (!rope.node || cJSON_IsNull(rope.node)) continue;
    VLMC_RETURN_IF_ERROR(vlmc_json_expect_object(&rope));
    vlmc_json_ref_t type = vlmc_json_ref(doc->file, rope.node, rope.path, "rope_type");
    if (!type.node) type = vlmc_json_ref(doc->file, rope.node, rope.path, "type");
    const char *type_name = "default";
    VLMC_RETURN_IF_ERROR(vlmc_json_string_opt(&type, &type_name, NULL));
    if (strcmp(type_name, "default") != 0)
      return vlmc_json_error(&type, VLMC_UNSUPPORTED,
                             "'%.40s' is not supported (a text-only Qwen2 uses plain RoPE: "
                             "'default')", type_name);
    vlmc_json_ref_t inner = vlmc_json_ref(doc->file, rope.node, rope.path, "rope_theta");
    if (inner.node) theta = inner;
  }
  snprintf(doc->rope_path, sizeof doc->rope_path, "%s", theta.path);
  VLMC_RETURN_IF_ERROR(vlmc_json_double_req(&theta, &text->rope_theta));
  if (!(text->rope_theta > 0))
    return vlmc_json_error(&theta, VLMC_OUT_OF_RANGE, "expected a positive number, got %g",
                           text->rope_theta);
  /* Any split gives plain RoPE when t = h = w; the rope op wants three positive sections. */
  int64_t head_dim = text->head_dim_explicit ? text->head_dim
                     : text->num_attention_heads > 0 ? text->hidden_size / text->num_attention_heads
                                                     : 0;
  int64_t half = head_dim / 2;
  if (half < 3)
    return vlmc_status_make(VLMC_UNSUPPORTED, "%s: head_dim %lld: too small for the rotary sections",
                            doc->file, (long long)(2 * half));
  text->mrope_section[0] = half - 2;
  text->mrope_section[1] = text->mrope_section[2] = 1;
  return NULL;
}

/* ---- vision ------------------------------------------------------------------------------ */

static int compare_int64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static vlmc_status_t parse_fullatt(const model_doc_t *doc, vlmc_vision_config_t *vision) {
  vlmc_json_ref_t ref = vision_ref(doc, "fullatt_block_indexes");
  if (!ref.node) return vlmc_json_missing(&ref);
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_array(&ref, -1));
  int count = cJSON_GetArraySize(ref.node);
  if (count > vision->depth)
    return vlmc_json_error(&ref, VLMC_OUT_OF_RANGE, "has %d entries for vision_config.depth %lld",
                           count, (long long)vision->depth);
  int at = 0;
  const cJSON *node;
  cJSON_ArrayForEach(node, ref.node) {
    vlmc_json_ref_t element = vlmc_json_ref_item(&ref, node, at);
    int64_t index;
    VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&element, INT32_MIN, INT32_MAX, &index));
    if (index < 0 || index >= vision->depth)
      return vlmc_status_make(VLMC_OUT_OF_RANGE,
                              "%s: %s = %lld is out of range for vision_config.depth %lld",
                              doc->file, element.path, (long long)index, (long long)vision->depth);
    vision->fullatt_block_indexes[at++] = index;
  }
  qsort(vision->fullatt_block_indexes, (size_t)count, sizeof(int64_t), compare_int64);
  for (int i = 1; i < count; ++i)
    if (vision->fullatt_block_indexes[i] == vision->fullatt_block_indexes[i - 1])
      return vlmc_json_error(&ref, VLMC_INVALID_ARGUMENT, "block %lld is listed twice",
                             (long long)vision->fullatt_block_indexes[i]);
  vision->fullatt_count = count;
  return NULL;
}

/* The patch geometry both vision configs spell alike (with their legacy aliases). */
static vlmc_status_t parse_patch_keys(const model_doc_t *doc, vlmc_vision_config_t *vision) {
  VLMC_RETURN_IF_ERROR(vision_size_alias(doc, "in_channels", "in_chans", &vision->in_channels));
  VLMC_RETURN_IF_ERROR(
      vision_size_alias(doc, "patch_size", "spatial_patch_size", &vision->patch_size));
  VLMC_RETURN_IF_ERROR(vision_size(doc, "temporal_patch_size", &vision->temporal_patch_size));
  return vision_size(doc, "spatial_merge_size", &vision->spatial_merge_size);
}

static vlmc_status_t parse_vision(const model_doc_t *doc, vlmc_vision_config_t *vision) {
  vlmc_json_ref_t depth = vision_ref(doc, "depth");
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&depth, 1, VLMC_CONFIG_MAX_DEPTH, &vision->depth));
  VLMC_RETURN_IF_ERROR(vision_size(doc, "hidden_size", &vision->hidden_size));
  VLMC_RETURN_IF_ERROR(vision_size(doc, "intermediate_size", &vision->intermediate_size));
  VLMC_RETURN_IF_ERROR(vision_size(doc, "num_heads", &vision->num_heads));
  VLMC_RETURN_IF_ERROR(vision_size(doc, "out_hidden_size", &vision->out_hidden_size));
  VLMC_RETURN_IF_ERROR(parse_patch_keys(doc, vision));
  VLMC_RETURN_IF_ERROR(vision_size(doc, "window_size", &vision->window_size));
  VLMC_RETURN_IF_ERROR(vision_size(doc, "tokens_per_second", &vision->tokens_per_second));
  vlmc_json_ref_t act = vision_ref(doc, "hidden_act");
  VLMC_RETURN_IF_ERROR(require_silu(&act));
  vision->norm = VLMC_VISION_RMS_NORM;
  vision->mlp = VLMC_VISION_SWIGLU;
  vision->windows = true;
  return parse_fullatt(doc, vision);
}

/* Qwen2-VL's vision_config (transformers' Qwen2VLVisionConfig): embed_dim (the width),
 * hidden_size (the merger's output), mlp_ratio, quick_gelu; every block full attention. */
static vlmc_status_t parse_vision_qwen2(const model_doc_t *doc, vlmc_vision_config_t *vision) {
  vlmc_json_ref_t depth = vision_ref(doc, "depth");
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&depth, 1, VLMC_CONFIG_MAX_DEPTH, &vision->depth));
  VLMC_RETURN_IF_ERROR(vision_size(doc, "embed_dim", &vision->hidden_size));
  VLMC_RETURN_IF_ERROR(vision_size(doc, "hidden_size", &vision->out_hidden_size));
  vlmc_json_ref_t ratio = vision_ref(doc, "mlp_ratio");
  double mlp_ratio;
  VLMC_RETURN_IF_ERROR(vlmc_json_double_req(&ratio, &mlp_ratio));
  double inner = (double)vision->hidden_size * mlp_ratio;
  if (!(inner >= 1 && inner <= (double)MAX_SIZE))
    return vlmc_json_error(&ratio, VLMC_OUT_OF_RANGE, "%g makes an MLP of %g features (embed_dim %lld)",
                           mlp_ratio, inner, (long long)vision->hidden_size);
  vision->intermediate_size = (int64_t)inner; /* transformers: int(embed_dim * mlp_ratio) */
  VLMC_RETURN_IF_ERROR(vision_size(doc, "num_heads", &vision->num_heads));
  VLMC_RETURN_IF_ERROR(parse_patch_keys(doc, vision));
  vlmc_json_ref_t act = vision_ref(doc, "hidden_act");
  const char *name = NULL;
  bool present = false;
  VLMC_RETURN_IF_ERROR(vlmc_json_string_opt(&act, &name, &present));
  if (present && strcmp(name, "quick_gelu") != 0)
    return vlmc_json_error(&act, VLMC_UNSUPPORTED,
                           "activation '%.40s' is not supported (Qwen2-VL's vision tower uses "
                           "'quick_gelu')", name);
  vision->window_size = 0;
  vision->tokens_per_second = 0;
  vision->fullatt_count = (int)vision->depth;
  for (int64_t i = 0; i < vision->depth; ++i) vision->fullatt_block_indexes[i] = i;
  vision->norm = VLMC_VISION_LAYER_NORM;
  vision->mlp = VLMC_VISION_QUICK_GELU_MLP;
  vision->windows = false;
  return NULL;
}

/* deepstack_visual_indexes: blocks of the tower, strictly increasing (transformers appends the
 * features in block order but picks each merger by the list's order; in increasing order the
 * two agree). Absent: no deepstack. */
static vlmc_status_t parse_deepstack(const model_doc_t *doc, vlmc_vision_config_t *vision) {
  vlmc_json_ref_t ref = vision_ref(doc, "deepstack_visual_indexes");
  if (!ref.node) return NULL;
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_array(&ref, -1));
  int count = cJSON_GetArraySize(ref.node);
  if (count > vision->depth)
    return vlmc_json_error(&ref, VLMC_OUT_OF_RANGE, "has %d entries for vision_config.depth %lld",
                           count, (long long)vision->depth);
  int at = 0;
  const cJSON *node;
  cJSON_ArrayForEach(node, ref.node) {
    vlmc_json_ref_t element = vlmc_json_ref_item(&ref, node, at);
    int64_t index;
    VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&element, 0, vision->depth - 1, &index));
    if (at > 0 && index <= vision->deepstack_indexes[at - 1])
      return vlmc_json_error(&element, VLMC_UNSUPPORTED,
                             "%lld after %lld: the blocks must be listed in increasing order",
                             (long long)index, (long long)vision->deepstack_indexes[at - 1]);
    vision->deepstack_indexes[at++] = index;
  }
  vision->deepstack_count = count;
  return NULL;
}

/* Qwen3-VL's vision_config (transformers' Qwen3VLVisionConfig): the Qwen2.5-VL size keys, a
 * learned position table of num_position_embeddings = n^2 entries, deepstack blocks,
 * gelu_pytorch_tanh (the default when absent); every block full attention, LayerNorms, a Conv3d
 * with a bias. */
static vlmc_status_t parse_vision_qwen3(const model_doc_t *doc, vlmc_vision_config_t *vision) {
  vlmc_json_ref_t depth = vision_ref(doc, "depth");
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&depth, 1, VLMC_CONFIG_MAX_DEPTH, &vision->depth));
  VLMC_RETURN_IF_ERROR(vision_size(doc, "hidden_size", &vision->hidden_size));
  VLMC_RETURN_IF_ERROR(vision_size(doc, "intermediate_size", &vision->intermediate_size));
  VLMC_RETURN_IF_ERROR(vision_size(doc, "num_heads", &vision->num_heads));
  VLMC_RETURN_IF_ERROR(vision_size(doc, "out_hidden_size", &vision->out_hidden_size));
  VLMC_RETURN_IF_ERROR(parse_patch_keys(doc, vision));
  vlmc_json_ref_t table = vision_ref(doc, "num_position_embeddings");
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&table, 1, MAX_SIZE, &vision->num_position_embeddings));
  int64_t side = 1;
  while ((side + 1) * (side + 1) <= vision->num_position_embeddings) ++side;
  if (side * side != vision->num_position_embeddings)
    return vlmc_json_error(&table, VLMC_INVALID_ARGUMENT,
                           "%lld is not a square (the table is an n x n grid of positions)",
                           (long long)vision->num_position_embeddings);
  VLMC_RETURN_IF_ERROR(parse_deepstack(doc, vision));
  vlmc_json_ref_t act = vision_ref(doc, "hidden_act");
  const char *name = NULL;
  bool present = false;
  VLMC_RETURN_IF_ERROR(vlmc_json_string_opt(&act, &name, &present));
  if (present && strcmp(name, "gelu_pytorch_tanh") != 0)
    return vlmc_json_error(&act, VLMC_UNSUPPORTED,
                           "activation '%.40s' is not supported (Qwen3-VL's vision tower uses "
                           "'gelu_pytorch_tanh')", name);
  vision->window_size = 0;
  vision->tokens_per_second = 0;
  vision->fullatt_count = (int)vision->depth;
  for (int64_t i = 0; i < vision->depth; ++i) vision->fullatt_block_indexes[i] = i;
  vision->norm = VLMC_VISION_LAYER_NORM;
  vision->mlp = VLMC_VISION_GELU_TANH_MLP;
  vision->merger = VLMC_MERGER_FC;
  vision->patch_bias = true;
  vision->windows = false;
  return NULL;
}

/* ---- the rest ---------------------------------------------------------------------------- */

static vlmc_status_t parse_token_id(const model_doc_t *doc, const char *key, int64_t *out) {
  vlmc_json_ref_t ref = top_ref(doc, key);
  return vlmc_json_int_req(&ref, 0, MAX_TOKEN_ID, out);
}

static vlmc_status_t parse_weights_dtype(const model_doc_t *doc, vlmc_model_config_t *config) {
  vlmc_json_ref_t ref = vlmc_json_ref(doc->file, doc->root, "", "dtype");
  if (!ref.node) ref = vlmc_json_ref(doc->file, doc->root, "", "torch_dtype");
  const char *name = "";
  VLMC_RETURN_IF_ERROR(vlmc_json_string_opt(&ref, &name, NULL));
  if (name[0] && strcmp(name, "bfloat16") != 0 && strcmp(name, "float16") != 0 &&
      strcmp(name, "float32") != 0)
    return vlmc_json_error(&ref, VLMC_UNSUPPORTED,
                           "'%.40s' is not a weight dtype vlmc reads (bfloat16, float16, float32)",
                           name);
  snprintf(config->weights_dtype, sizeof config->weights_dtype, "%s", name);
  return NULL;
}

/* MLX's quantization entry: "quantization" (mlx_lm, mlx_vlm) or "quantization_config"
 * holding MLX's keys. Per-module entries (mixed recipes: objects keyed by module path, or
 * false for a module left unquantized) are refused by name: every quantized tensor is read at
 * the one group size and bit width. */
static vlmc_status_t parse_quantization(const model_doc_t *doc, vlmc_model_config_t *config) {
  vlmc_json_ref_t q = vlmc_json_ref(doc->file, doc->root, "", "quantization");
  if (!q.node) {
    q = vlmc_json_ref(doc->file, doc->root, "", "quantization_config");
    if (q.node && cJSON_IsObject(q.node) && !cJSON_GetObjectItemCaseSensitive(q.node, "group_size"))
      return NULL; /* another tool's quantization_config (e.g. bitsandbytes): not MLX's */
  }
  if (!q.node) return NULL;
  if (!cJSON_IsObject(q.node))
    return vlmc_json_error(&q, VLMC_INVALID_ARGUMENT, "expected an object, got %s",
                           vlmc_json_kind(q.node));
  const cJSON *entry;
  cJSON_ArrayForEach(entry, q.node) {
    if (!cJSON_IsObject(entry) && !cJSON_IsBool(entry)) continue;
    vlmc_json_ref_t module = vlmc_json_ref(doc->file, q.node, q.path, entry->string);
    return vlmc_json_error(&module, VLMC_UNSUPPORTED,
                           "per-module quantization (a mixed recipe) is not supported; vlmc reads "
                           "one group_size and bits for every quantized tensor");
  }
  vlmc_json_ref_t mode = vlmc_json_ref(doc->file, q.node, q.path, "mode");
  const char *mode_name = "affine";
  VLMC_RETURN_IF_ERROR(vlmc_json_string_opt(&mode, &mode_name, NULL));
  if (strcmp(mode_name, "affine") != 0)
    return vlmc_json_error(&mode, VLMC_UNSUPPORTED, "'%.40s' quantization is not supported (affine "
                           "only: scale * q + bias)", mode_name);
  vlmc_json_ref_t group = vlmc_json_ref(doc->file, q.node, q.path, "group_size");
  vlmc_json_ref_t bits = vlmc_json_ref(doc->file, q.node, q.path, "bits");
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&group, 1, 4096, &config->quant_group));
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&bits, 1, 32, &config->quant_bits));
  if (config->quant_bits != 4 && config->quant_bits != 8)
    return vlmc_json_error(&bits, VLMC_UNSUPPORTED, "%lld-bit weights are not supported (4 or 8)",
                           (long long)config->quant_bits);
  if (config->quant_group % (32 / config->quant_bits))
    return vlmc_json_error(&group, VLMC_INVALID_ARGUMENT,
                           "group_size %lld is not a multiple of %lld (the values in a word)",
                           (long long)config->quant_group, (long long)(32 / config->quant_bits));
  return NULL;
}

static vlmc_status_t parse_multimodal(const model_doc_t *doc, vlmc_model_config_t *config) {
  VLMC_RETURN_IF_ERROR(parse_token_id(doc, "image_token_id", &config->image_token_id));
  VLMC_RETURN_IF_ERROR(parse_token_id(doc, "video_token_id", &config->video_token_id));
  VLMC_RETURN_IF_ERROR(
      parse_token_id(doc, "vision_start_token_id", &config->vision_start_token_id));
  VLMC_RETURN_IF_ERROR(parse_token_id(doc, "vision_end_token_id", &config->vision_end_token_id));
  vlmc_json_ref_t tie = top_ref(doc, "tie_word_embeddings");
  VLMC_RETURN_IF_ERROR(vlmc_json_bool_req(&tie, &config->tie_word_embeddings));
  VLMC_RETURN_IF_ERROR(parse_quantization(doc, config));
  return parse_weights_dtype(doc, config);
}

/* ---- consistency ------------------------------------------------------------------------- */

static vlmc_status_t check_text(const model_doc_t *doc, vlmc_text_config_t *text) {
  vlmc_json_ref_t hidden = text_ref(doc, "hidden_size"),
                  heads = text_ref(doc, "num_attention_heads");
  vlmc_json_ref_t kv = text_ref(doc, "num_key_value_heads");
  if (!text->head_dim_explicit && text->hidden_size % text->num_attention_heads != 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: %s %lld is not divisible by %s %lld",
                            doc->file, hidden.path, (long long)text->hidden_size, heads.path,
                            (long long)text->num_attention_heads);
  if (text->num_attention_heads % text->num_key_value_heads != 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: %s %lld is not divisible by %s %lld",
                            doc->file, heads.path, (long long)text->num_attention_heads, kv.path,
                            (long long)text->num_key_value_heads);
  if (!text->head_dim_explicit) text->head_dim = text->hidden_size / text->num_attention_heads;
  int64_t sum = text->mrope_section[0] + text->mrope_section[1] + text->mrope_section[2];
  if (text->head_dim % 2 != 0 || sum != text->head_dim / 2) {
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "%s: %s.mrope_section [%lld,%lld,%lld] sums to %lld, rotary half-width "
                            "is %lld%s",
                            doc->file, doc->rope_path, (long long)text->mrope_section[0],
                            (long long)text->mrope_section[1], (long long)text->mrope_section[2],
                            (long long)sum, (long long)(text->head_dim / 2),
                            text->head_dim % 2 ? " (head_dim is odd)" : "");
  }
  return NULL;
}

static vlmc_status_t check_vision(const model_doc_t *doc, vlmc_vision_config_t *vision,
                                  const vlmc_text_config_t *text) {
  const char *file = doc->file;
  if (vision->hidden_size % vision->num_heads != 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "%s: vision_config.hidden_size %lld is not divisible by "
                            "vision_config.num_heads %lld",
                            file, (long long)vision->hidden_size, (long long)vision->num_heads);
  vision->head_dim = vision->hidden_size / vision->num_heads;
  if (vision->head_dim % 4 != 0)
    return vlmc_status_make(
        VLMC_INVALID_ARGUMENT,
        "%s: vision head_dim %lld (vision_config.hidden_size / num_heads) is not "
        "a multiple of 4, which the 2-D rotary embedding needs",
        file, (long long)vision->head_dim);
  if (vision->out_hidden_size != text->hidden_size)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "%s: vision_config.out_hidden_size %lld differs from %s %lld (the "
                            "merger feeds the text model)",
                            file, (long long)vision->out_hidden_size,
                            text_ref(doc, "hidden_size").path, (long long)text->hidden_size);
  if (vision->in_channels != 3)
    return vlmc_status_make(VLMC_UNSUPPORTED,
                            "%s: vision_config.in_channels %lld: only RGB (3) "
                            "images are supported",
                            file, (long long)vision->in_channels);
  int64_t merged_patch = vision->patch_size * vision->spatial_merge_size;
  if (vision->window_size % merged_patch != 0)
    return vlmc_status_make(VLMC_UNSUPPORTED,
                            "%s: vision_config.window_size %lld is not a multiple of patch_size * "
                            "spatial_merge_size = %lld",
                            file, (long long)vision->window_size, (long long)merged_patch);
  return NULL;
}

static vlmc_status_t check_id_below_vocab(const model_doc_t *doc, const char *key, int64_t id,
                                          const vlmc_text_config_t *text) {
  if (id < text->vocab_size) return NULL;
  return vlmc_status_make(VLMC_OUT_OF_RANGE, "%s: %s %lld is not below %s %lld", doc->file,
                          top_ref(doc, key).path, (long long)id, text_ref(doc, "vocab_size").path,
                          (long long)text->vocab_size);
}

static vlmc_status_t check_ids(const model_doc_t *doc, const vlmc_model_config_t *config) {
  const vlmc_text_config_t *text = &config->text;
  VLMC_RETURN_IF_ERROR(check_id_below_vocab(doc, "image_token_id", config->image_token_id, text));
  VLMC_RETURN_IF_ERROR(check_id_below_vocab(doc, "video_token_id", config->video_token_id, text));
  VLMC_RETURN_IF_ERROR(
      check_id_below_vocab(doc, "vision_start_token_id", config->vision_start_token_id, text));
  VLMC_RETURN_IF_ERROR(
      check_id_below_vocab(doc, "vision_end_token_id", config->vision_end_token_id, text));
  if (text->has_bos_token_id && text->bos_token_id >= text->vocab_size)
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "%s: %s %lld is not below the vocabulary (%lld)",
                            doc->file, text_ref(doc, "bos_token_id").path,
                            (long long)text->bos_token_id, (long long)text->vocab_size);
  if (text->has_eos_token_id && text->eos_token_id >= text->vocab_size)
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "%s: %s %lld is not below the vocabulary (%lld)",
                            doc->file, text_ref(doc, "eos_token_id").path,
                            (long long)text->eos_token_id, (long long)text->vocab_size);
  return NULL;
}

/* ---- entry points ------------------------------------------------------------------------ */

typedef vlmc_status_t (*vision_parser_t)(const model_doc_t *doc, vlmc_vision_config_t *vision);

typedef vlmc_status_t (*text_parser_t)(model_doc_t *doc, vlmc_text_config_t *text);

/* A Qwen-VL family's parts: its text model's parser and its vision tower's. */
typedef struct {
  text_parser_t text;
  vision_parser_t vision;
} vl_parsers_t;

static vlmc_status_t parse_doc(model_doc_t *doc, vlmc_model_config_t *config,
                               const vl_parsers_t *parsers) {
  VLMC_RETURN_IF_ERROR(parsers->text(doc, &config->text));
  vision_parser_t parse_vision_config = parsers->vision;
  VLMC_RETURN_IF_ERROR(parse_vision_config(doc, &config->vision));
  VLMC_RETURN_IF_ERROR(parse_multimodal(doc, config));
  VLMC_RETURN_IF_ERROR(check_text(doc, &config->text));
  VLMC_RETURN_IF_ERROR(check_vision(doc, &config->vision, &config->text));
  if (config->vision.deepstack_count > config->text.num_hidden_layers)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "%s: vision_config.deepstack_visual_indexes has %d entries, but %s is "
                            "%lld (feature k is added after language-model layer k)",
                            doc->file, config->vision.deepstack_count,
                            text_ref(doc, "num_hidden_layers").path,
                            (long long)config->text.num_hidden_layers);
  return check_ids(doc, config);
}

static vlmc_status_t open_sections(model_doc_t *doc) {
  vlmc_json_ref_t text = vlmc_json_ref(doc->file, doc->root, "", "text_config");
  vlmc_json_ref_t vision = vlmc_json_ref(doc->file, doc->root, "", "vision_config");
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_object(&text));
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_object(&vision));
  doc->text = text.node;
  doc->vision = vision.node;
  return NULL;
}

/* A Qwen-VL config.json's body: text_config and vision_config (objects where present),
 * model_type, then the sections with this family's vision parser. */
static vlmc_status_t parse_vl_body(model_doc_t *doc, vlmc_model_config_t *config,
                                   const vl_parsers_t *parsers) {
  VLMC_RETURN_IF_ERROR(open_sections(doc));
  VLMC_RETURN_IF_ERROR(read_model_type(doc->file, doc->root, config->model_type));
  if (!doc->vision) {
    vlmc_json_ref_t vision = vlmc_json_ref(doc->file, doc->root, "", "vision_config");
    return vlmc_json_missing(&vision);
  }
  VLMC_RETURN_IF_ERROR(parse_doc(doc, config, parsers));
  config->has_vision = true;
  config->nested = doc->text != NULL;
  return NULL;
}

static vlmc_status_t parse_qwen2_5_vl_body(model_doc_t *doc, vlmc_model_config_t *config) {
  static const vl_parsers_t parsers = {parse_text, parse_vision};
  return parse_vl_body(doc, config, &parsers);
}

static vlmc_status_t parse_qwen2_vl_body(model_doc_t *doc, vlmc_model_config_t *config) {
  static const vl_parsers_t parsers = {parse_text, parse_vision_qwen2};
  return parse_vl_body(doc, config, &parsers);
}

static vlmc_status_t parse_qwen3_vl_body(model_doc_t *doc, vlmc_model_config_t *config) {
  static const vl_parsers_t parsers = {parse_text_qwen3_vl, parse_vision_qwen3};
  return parse_vl_body(doc, config, &parsers);
}

/* A text-only checkpoint: the text keys at the top level, no vision_config (refused), no
 * multimodal ids (they are set to vocab_size: no token id is ever an image pad). */
static vlmc_status_t parse_text_only_body(model_doc_t *doc, vlmc_model_config_t *config,
                                          text_kind_t kind) {
  VLMC_RETURN_IF_ERROR(read_model_type(doc->file, doc->root, config->model_type));
  vlmc_json_ref_t vision = vlmc_json_ref(doc->file, doc->root, "", "vision_config");
  if (vision.node)
    return vlmc_json_error(&vision, VLMC_INVALID_ARGUMENT,
                           "a text-only model_type '%s' with a vision tower", config->model_type);
  VLMC_RETURN_IF_ERROR(parse_text_with(doc, &config->text, kind, parse_rope_plain));
  VLMC_RETURN_IF_ERROR(check_text(doc, &config->text));
  config->has_vision = false;
  config->image_token_id = config->video_token_id = config->text.vocab_size;
  config->vision_start_token_id = config->vision_end_token_id = config->text.vocab_size;
  vlmc_json_ref_t tie = top_ref(doc, "tie_word_embeddings");
  bool present = false;
  VLMC_RETURN_IF_ERROR(vlmc_json_bool_opt(&tie, &config->tie_word_embeddings, &present));
  if (!present) config->tie_word_embeddings = false; /* Qwen2Config's default */
  VLMC_RETURN_IF_ERROR(parse_quantization(doc, config));
  return parse_weights_dtype(doc, config);
}

static vlmc_status_t parse_qwen2_body(model_doc_t *doc, vlmc_model_config_t *config) {
  return parse_text_only_body(doc, config, TEXT_QWEN2);
}

static vlmc_status_t parse_qwen3_body(model_doc_t *doc, vlmc_model_config_t *config) {
  return parse_text_only_body(doc, config, TEXT_QWEN3);
}

typedef vlmc_status_t (*body_parser_t)(model_doc_t *doc, vlmc_model_config_t *config);

/* The JSON object, then the family's body; the config is all zero unless it parsed. */
static vlmc_status_t parse_config(const char *text, size_t len, const char *file,
                                  body_parser_t parse_body, vlmc_model_config_t *out_config) {
  memset(out_config, 0, sizeof *out_config);
  model_doc_t doc = {.file = file};
  cJSON *root = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_json_parse_object(file, text, len, &root));
  doc.root = root;
  vlmc_status_t status = parse_body(&doc, out_config);
  cJSON_Delete(root);
  if (status) memset(out_config, 0, sizeof *out_config);
  return status;
}

vlmc_status_t vlmc_qwen2_5_vl_config_parse(const char *text, size_t len, const char *file,
                                           vlmc_model_config_t *out_config) {
  return parse_config(text, len, file, parse_qwen2_5_vl_body, out_config);
}

vlmc_status_t vlmc_qwen2_vl_config_parse(const char *text, size_t len, const char *file,
                                         vlmc_model_config_t *out_config) {
  return parse_config(text, len, file, parse_qwen2_vl_body, out_config);
}

vlmc_status_t vlmc_qwen2_config_parse(const char *text, size_t len, const char *file,
                                      vlmc_model_config_t *out_config) {
  return parse_config(text, len, file, parse_qwen2_body, out_config);
}

vlmc_status_t vlmc_qwen3_config_parse(const char *text, size_t len, const char *file,
                                      vlmc_model_config_t *out_config) {
  return parse_config(text, len, file, parse_qwen3_body, out_config);
}

vlmc_status_t vlmc_qwen3_vl_config_parse(const char *text, size_t len, const char *file,
                                         vlmc_model_config_t *out_config) {
  return parse_config(text, len, file, parse_qwen3_vl_body, out_config);
}

vlmc_status_t vlmc_model_config_load(const char *path, vlmc_model_config_parser_t parse,
                                     vlmc_model_config_t *out_config) {
  char *text, *file;
  size_t len;
  VLMC_RETURN_IF_ERROR(vlmc_json_read_config_file(path, "config.json", &text, &len, &file));
  vlmc_status_t status = parse(text, len, file, out_config);
  free(text);
  free(file);
  return status;
}
