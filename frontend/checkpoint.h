/* A HuggingFace checkpoint folder as one object: the tensors (safetensors, single or sharded),
 * config.json, and, when present, the image processor and generation settings.
 *
 * Tensor names. Callers ask by the canonical hub name, the one the official Qwen2.5-VL uploads
 * and transformers 5.x save_pretrained use: `visual.*`, `model.*` (text), `lm_head.weight`.
 * Files saved by transformers 4.52-4.5x use the in-memory names instead: `model.visual.*` and
 * `model.language_model.*`. A lookup tries the name as given, then its other spelling
 * (`visual.X` <-> `model.visual.X`, `model.X` <-> `model.language_model.X`), so either layout
 * answers either spelling. A file that holds one tensor under both spellings is refused on open.
 * When `lm_head.weight` is absent and config.json ties the embeddings, it resolves to
 * `model.embed_tokens.weight` (the 3B checkpoint has no lm_head tensor).
 *
 * Open also checks the files against each other: the image processor's patch, merge and
 * temporal sizes must be the vision tower's, and the generation stop ids must be in the
 * vocabulary. */
#ifndef VLMC_FRONTEND_CHECKPOINT_H
#define VLMC_FRONTEND_CHECKPOINT_H

#include "frontend/config.h"
#include "frontend/safetensors.h"
#include "support/status.h"

typedef struct vlmc_checkpoint_s vlmc_checkpoint_t;

/* config.json's model_type of the checkpoint folder `dir`: what picks the model family, and
 * with it the parser vlmc_checkpoint_open needs (models/family.h does both steps:
 * vlmc_model_family_open_checkpoint). */
vlmc_status_t vlmc_checkpoint_model_type(const char *dir, char out[VLMC_MODEL_TYPE_MAX]);

/* Opens `dir`: config.json is required, read with `parse_config` (the model family's parser),
 * and so are model.safetensors or model.safetensors.index.json;
 * processor_config.json / preprocessor_config.json and generation_config.json are read when
 * present. */
vlmc_status_t vlmc_checkpoint_open(const char *dir, vlmc_model_config_parser_t parse_config,
                                   vlmc_checkpoint_t **out_checkpoint);
void vlmc_checkpoint_destroy(vlmc_checkpoint_t *checkpoint);

const char *vlmc_checkpoint_dir(const vlmc_checkpoint_t *checkpoint);
const vlmc_model_config_t *vlmc_checkpoint_config(const vlmc_checkpoint_t *checkpoint);
/* NULL when the checkpoint has no image processor settings. */
const vlmc_preprocessor_config_t *vlmc_checkpoint_preprocessor(const vlmc_checkpoint_t *checkpoint);
/* NULL when the checkpoint has no generation_config.json. */
const vlmc_generation_config_t *vlmc_checkpoint_generation(const vlmc_checkpoint_t *checkpoint);
const vlmc_st_archive_t *vlmc_checkpoint_archive(const vlmc_checkpoint_t *checkpoint);

/* The tensor for a hub name (either spelling, lm_head tying applied); NULL when absent. */
const vlmc_st_tensor_t *vlmc_checkpoint_find(const vlmc_checkpoint_t *checkpoint, const char *name);
/* Same, as an error when absent: "tensor 'visual.x' not found (also tried 'model.visual.x')
 * in a/model-00001-of-00002.safetensors, a/model-00002-of-00002.safetensors". */
vlmc_status_t vlmc_checkpoint_get(const vlmc_checkpoint_t *checkpoint, const char *name,
                                  const vlmc_st_tensor_t **out_tensor);
/* Same, and the tensor must have exactly this shape: "model.safetensors: tensor 'x' has shape
 * [4,8], config.json implies [4,16]". */
vlmc_status_t vlmc_checkpoint_get_shaped(const vlmc_checkpoint_t *checkpoint, const char *name,
                                         int rank, const int64_t *shape,
                                         const vlmc_st_tensor_t **out_tensor);

/* The other spelling of a tensor name (see above) into `out` (size bytes); false when the
 * name has none or it does not fit. */
bool vlmc_checkpoint_alternate_name(const char *name, char *out, size_t size);
/* The k-th other spelling (k = 0, 1: transformers 4.x / 5.x / mlx_vlm's `language_model.model.`,
 * `language_model.lm_head.`, `vision_tower.`, docs/mlx_format.md); false past the last. */
bool vlmc_checkpoint_alternate_name_at(const char *name, int k, char *out, size_t size);

#endif
