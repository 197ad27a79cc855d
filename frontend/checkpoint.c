/* A checkpoint folder: configs + tensors, with name resolution across the two layouts. */
#define _POSIX_C_SOURCE 200809L
#include "frontend/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "support/file.h"
#include "support/json.h"
#include "support/strbuf.h"

struct vlmc_checkpoint_s {
  char *dir;
  vlmc_model_config_t config;
  bool has_preprocessor, has_generation;
  vlmc_preprocessor_config_t preprocessor;
  vlmc_generation_config_t generation;
  vlmc_st_archive_t *archive;
};

enum { NAME_MAX_BYTES = 512 };

static bool starts_with(const char *text, const char *prefix) {
  return strncmp(text, prefix, strlen(prefix)) == 0;
}

/* Replaces `prefix` at the start of `name` by `replacement`. */
static bool respell(const char *name, const char *prefix, const char *replacement, char *out,
                    size_t size) {
  int n = snprintf(out, size, "%s%s", replacement, name + strlen(prefix));
  return n >= 0 && (size_t)n < size;
}

/* The three spellings of each part of a Qwen2.5-VL checkpoint: transformers 4.x, 5.x, and
 * mlx_vlm's (docs/mlx_format.md §6). */
static const char *const kSpellings[][3] = {
    {"visual.", "model.visual.", "vision_tower."},
    {"model.", "model.language_model.", "language_model.model."},
    {"lm_head.", "", "language_model.lm_head."},
};

bool vlmc_checkpoint_alternate_name_at(const char *name, int k, char *out, size_t size) {
  /* the longest matching prefix names the part and the spelling in use ("model.visual." is
   * not "model." + "visual.") */
  int part = -1, used = -1;
  size_t best = 0;
  for (int p = 0; p < 3; ++p)
    for (int s = 0; s < 3; ++s) {
      size_t n = strlen(kSpellings[p][s]);
      if (n > best && starts_with(name, kSpellings[p][s])) {
        best = n;
        part = p;
        used = s;
      }
    }
  if (part < 0 || k < 0) return false;
  for (int s = 0; s < 3; ++s) {
    if (s == used || !kSpellings[part][s][0]) continue;
    if (k-- == 0) return respell(name, kSpellings[part][used], kSpellings[part][s], out, size);
  }
  return false;
}

bool vlmc_checkpoint_alternate_name(const char *name, char *out, size_t size) {
  return vlmc_checkpoint_alternate_name_at(name, 0, out, size);
}

/* The tensor under `name` or its other spelling, without lm_head tying. */
static const vlmc_st_tensor_t *find_spelling(const vlmc_st_archive_t *archive, const char *name) {
  const vlmc_st_tensor_t *tensor = vlmc_st_archive_find(archive, name);
  char other[NAME_MAX_BYTES];
  for (int k = 0; !tensor && vlmc_checkpoint_alternate_name_at(name, k, other, sizeof other); ++k)
    tensor = vlmc_st_archive_find(archive, other);
  return tensor;
}

const vlmc_st_tensor_t *vlmc_checkpoint_find(const vlmc_checkpoint_t *checkpoint,
                                             const char *name) {
  const vlmc_st_tensor_t *tensor = find_spelling(checkpoint->archive, name);
  if (!tensor && strcmp(name, "lm_head.weight") == 0 && checkpoint->config.tie_word_embeddings)
    tensor = find_spelling(checkpoint->archive, "model.embed_tokens.weight");
  return tensor;
}

static void append_shard_list(vlmc_strbuf_t *buf, const vlmc_st_archive_t *archive) {
  for (int i = 0; i < vlmc_st_archive_shard_count(archive); ++i)
    vlmc_strbuf_printf(buf, "%s%s", i ? ", " : "", vlmc_st_archive_shard_path(archive, i));
}

static vlmc_status_t not_found(const vlmc_checkpoint_t *checkpoint, const char *name) {
  vlmc_strbuf_t buf;
  vlmc_strbuf_init(&buf);
  vlmc_strbuf_printf(&buf, "tensor '%.200s' not found", name);
  char other[NAME_MAX_BYTES];
  for (int k = 0; vlmc_checkpoint_alternate_name_at(name, k, other, sizeof other); ++k)
    vlmc_strbuf_printf(&buf, "%s'%s'", k ? ", " : " (also tried ", other);
  if (vlmc_checkpoint_alternate_name(name, other, sizeof other)) vlmc_strbuf_puts(&buf, ")");
  if (strcmp(name, "lm_head.weight") == 0) {
    if (checkpoint->config.tie_word_embeddings)
      vlmc_strbuf_puts(&buf, ", nor model.embed_tokens.weight that config.json ties it to");
    else
      vlmc_strbuf_puts(&buf, " and config.json tie_word_embeddings is false");
  }
  vlmc_strbuf_puts(&buf, " in ");
  append_shard_list(&buf, checkpoint->archive);
  vlmc_status_t status = vlmc_status_make(VLMC_NOT_FOUND, "%s", vlmc_strbuf_cstr(&buf));
  vlmc_strbuf_deinit(&buf);
  return status;
}

vlmc_status_t vlmc_checkpoint_get(const vlmc_checkpoint_t *checkpoint, const char *name,
                                  const vlmc_st_tensor_t **out_tensor) {
  *out_tensor = vlmc_checkpoint_find(checkpoint, name);
  return *out_tensor ? NULL : not_found(checkpoint, name);
}

static void format_shape(const int64_t *shape, int rank, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i <= rank && used < size; ++i) {
    int n = i == rank
                ? snprintf(buf + used, size - used, "]")
                : snprintf(buf + used, size - used, "%s%lld", i ? "," : "[", (long long)shape[i]);
    if (n < 0) break;
    used += (size_t)n;
  }
}

vlmc_status_t vlmc_checkpoint_get_shaped(const vlmc_checkpoint_t *checkpoint, const char *name,
                                         int rank, const int64_t *shape,
                                         const vlmc_st_tensor_t **out_tensor) {
  VLMC_RETURN_IF_ERROR(vlmc_checkpoint_get(checkpoint, name, out_tensor));
  const vlmc_st_tensor_t *tensor = *out_tensor;
  bool same = tensor->rank == rank;
  for (int i = 0; same && i < rank; ++i) same = tensor->shape[i] == shape[i];
  if (same) return NULL;
  *out_tensor = NULL;
  char have[200], want[200];
  format_shape(tensor->shape, tensor->rank, have, sizeof have);
  format_shape(shape, rank, want, sizeof want);
  return vlmc_status_make(
      VLMC_INVALID_ARGUMENT, "%s: tensor '%s' has shape %s, config.json implies %s",
      vlmc_st_archive_shard_path(checkpoint->archive, tensor->shard), tensor->name, have, want);
}

/* ---- opening ----------------------------------------------------------------------------- */

/* One tensor stored under both spellings would make a lookup depend on which one is tried
 * first; refuse it. */
static vlmc_status_t check_single_spelling(const vlmc_st_archive_t *archive) {
  for (size_t i = 0; i < vlmc_st_archive_count(archive); ++i) {
    const vlmc_st_tensor_t *tensor = vlmc_st_archive_tensor(archive, i);
    char other[NAME_MAX_BYTES];
    for (int k = 0; vlmc_checkpoint_alternate_name_at(tensor->name, k, other, sizeof other); ++k)
      if (vlmc_st_archive_find(archive, other))
        return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                                "%s: tensor '%s' is also present as '%s'; a checkpoint must use "
                                "one naming layout",
                                vlmc_st_archive_shard_path(archive, tensor->shard), tensor->name,
                                other);
  }
  return NULL;
}

static bool file_exists(const char *dir, const char *name) {
  char *path = vlmc_path_join(dir, name);
  struct stat st;
  bool exists = path && stat(path, &st) == 0;
  free(path);
  return exists;
}

static vlmc_status_t check_processor_sizes(const vlmc_checkpoint_t *checkpoint) {
  const vlmc_preprocessor_config_t *pre = &checkpoint->preprocessor;
  const vlmc_vision_config_t *vision = &checkpoint->config.vision;
  const struct {
    const char *key;
    int64_t value;
    const char *vision_key;
    int64_t expected;
  } pairs[] = {
      {"patch_size", pre->patch_size, "patch_size", vision->patch_size},
      {"merge_size", pre->merge_size, "spatial_merge_size", vision->spatial_merge_size},
      {"temporal_patch_size", pre->temporal_patch_size, "temporal_patch_size",
       vision->temporal_patch_size},
  };
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; ++i)
    if (pairs[i].value != pairs[i].expected)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "%s/%s: %s %lld differs from config.json vision_config.%s %lld",
                              checkpoint->dir, pre->source, pairs[i].key, (long long)pairs[i].value,
                              pairs[i].vision_key, (long long)pairs[i].expected);
  return NULL;
}

static vlmc_status_t check_generation_ids(const vlmc_checkpoint_t *checkpoint) {
  const vlmc_generation_config_t *gen = &checkpoint->generation;
  int64_t vocab = checkpoint->config.text.vocab_size;
  for (int i = 0; i < gen->eos_count; ++i)
    if (gen->eos_token_ids[i] >= vocab)
      return vlmc_status_make(VLMC_OUT_OF_RANGE,
                              "%s/generation_config.json: eos_token_id %lld is not below "
                              "config.json vocab_size %lld",
                              checkpoint->dir, (long long)gen->eos_token_ids[i], (long long)vocab);
  if (gen->has_bos_token_id && gen->bos_token_id >= vocab)
    return vlmc_status_make(VLMC_OUT_OF_RANGE,
                            "%s/generation_config.json: bos_token_id %lld is not below config.json "
                            "vocab_size %lld",
                            checkpoint->dir, (long long)gen->bos_token_id, (long long)vocab);
  if (gen->has_pad_token_id && gen->pad_token_id >= vocab)
    return vlmc_status_make(VLMC_OUT_OF_RANGE,
                            "%s/generation_config.json: pad_token_id %lld is not below config.json "
                            "vocab_size %lld",
                            checkpoint->dir, (long long)gen->pad_token_id, (long long)vocab);
  return NULL;
}

static vlmc_status_t load_optional_configs(vlmc_checkpoint_t *checkpoint) {
  const char *dir = checkpoint->dir;
  if (file_exists(dir, "processor_config.json") || file_exists(dir, "preprocessor_config.json")) {
    VLMC_RETURN_IF_ERROR(vlmc_preprocessor_config_load(dir, &checkpoint->preprocessor));
    checkpoint->has_preprocessor = true;
    VLMC_RETURN_IF_ERROR(check_processor_sizes(checkpoint));
  }
  if (file_exists(dir, "generation_config.json")) {
    VLMC_RETURN_IF_ERROR(vlmc_generation_config_load(dir, &checkpoint->generation));
    checkpoint->has_generation = true;
    VLMC_RETURN_IF_ERROR(check_generation_ids(checkpoint));
  }
  return NULL;
}

static vlmc_status_t checkpoint_load(vlmc_checkpoint_t *checkpoint,
                                     vlmc_model_config_parser_t parse_config) {
  VLMC_RETURN_IF_ERROR(vlmc_model_config_load(checkpoint->dir, parse_config, &checkpoint->config));
  VLMC_RETURN_IF_ERROR(vlmc_st_archive_open(checkpoint->dir, &checkpoint->archive));
  VLMC_RETURN_IF_ERROR(check_single_spelling(checkpoint->archive));
  return load_optional_configs(checkpoint);
}

/* A file path would be read as config.json itself; a checkpoint is always a folder. */
static vlmc_status_t check_folder(const char *dir) {
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return vlmc_status_make(VLMC_IO_ERROR, "%s: not a checkpoint folder", dir);
  return NULL;
}

vlmc_status_t vlmc_checkpoint_model_type(const char *dir, char out[VLMC_MODEL_TYPE_MAX]) {
  out[0] = '\0';
  VLMC_RETURN_IF_ERROR(check_folder(dir));
  return vlmc_model_type_load(dir, out);
}

vlmc_status_t vlmc_checkpoint_open(const char *dir, vlmc_model_config_parser_t parse_config,
                                   vlmc_checkpoint_t **out_checkpoint) {
  *out_checkpoint = NULL;
  VLMC_RETURN_IF_ERROR(check_folder(dir));
  vlmc_checkpoint_t *checkpoint = calloc(1, sizeof *checkpoint);
  if (checkpoint) checkpoint->dir = strdup(dir);
  if (!checkpoint || !checkpoint->dir) {
    free(checkpoint);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", dir);
  }
  vlmc_status_t status = checkpoint_load(checkpoint, parse_config);
  if (status) {
    vlmc_checkpoint_destroy(checkpoint);
    return status;
  }
  *out_checkpoint = checkpoint;
  return NULL;
}

void vlmc_checkpoint_destroy(vlmc_checkpoint_t *checkpoint) {
  if (!checkpoint) return;
  vlmc_st_archive_destroy(checkpoint->archive);
  free(checkpoint->dir);
  free(checkpoint);
}

const char *vlmc_checkpoint_dir(const vlmc_checkpoint_t *checkpoint) {
  return checkpoint->dir;
}

const vlmc_model_config_t *vlmc_checkpoint_config(const vlmc_checkpoint_t *checkpoint) {
  return &checkpoint->config;
}

const vlmc_preprocessor_config_t *vlmc_checkpoint_preprocessor(
    const vlmc_checkpoint_t *checkpoint) {
  return checkpoint->has_preprocessor ? &checkpoint->preprocessor : NULL;
}

const vlmc_generation_config_t *vlmc_checkpoint_generation(const vlmc_checkpoint_t *checkpoint) {
  return checkpoint->has_generation ? &checkpoint->generation : NULL;
}

const vlmc_st_archive_t *vlmc_checkpoint_archive(const vlmc_checkpoint_t *checkpoint) {
  return checkpoint->archive;
}
