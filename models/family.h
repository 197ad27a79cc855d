/* Model families behind one interface. A family is a const table: its name (the manifest's
 * model_family), the HuggingFace `model_type` values it reads, its config.json parser (one of
 * frontend/config.h's), its graph builder, and its calling convention (which function does
 * what, and which positions the runtime feeds). The compiler and the tools find a
 * checkpoint's family by model_type here and never name a family themselves; adding one is a
 * new entry (docs/design.md, "How to add a model family"), not an `if` at each caller.
 *
 * The registry is the one place that refuses a model_type: "config.json: model_type 'llama':
 * not a supported model family; supported: qwen2_5_vl". */
#ifndef VLMC_MODELS_FAMILY_H
#define VLMC_MODELS_FAMILY_H

#include <stddef.h>

#include "frontend/checkpoint.h"
#include "frontend/config.h"
#include "ir/ir.h"
#include "models/builder.h"
#include "support/status.h"

/* Positions kinds (vlmc_model_convention_t.positions). */
#define VLMC_POSITIONS_MROPE "mrope" /* i64[3,S] M-RoPE ids (t, h, w), with a rope delta */
#define VLMC_POSITIONS_PLAIN "plain" /* i64[1,S] token positions */

/* How the runtime drives the program: the names of its functions and the positions it
 * computes per request. Plain strings, so that the manifest can carry them as they are. */
typedef struct {
  const char *encode_image; /* pixel_values, grid -> image embeddings */
  const char *prefill;      /* prompt ids, image embeddings, positions -> logits, KV caches */
  const char *decode;       /* one token, its position, caches -> logits, grown caches */
  const char *positions;    /* VLMC_POSITIONS_MROPE or VLMC_POSITIONS_PLAIN */
} vlmc_model_convention_t;

typedef struct {
  const char *name;         /* "qwen2_5_vl": the manifest's model_family */
  const char *display_name; /* "Qwen2.5-VL", for messages */
  /* The config.json model_type values this family reads, NULL-terminated. */
  const char *const *model_types;
  /* config.json -> the family's config. */
  vlmc_model_config_parser_t parse_config;
  /* Config and tensor table -> the verified module (`options` may be NULL: a symbolic grid,
   * no taps). The tensor table is a checkpoint's or any other (random-checkpoint's plan). */
  vlmc_status_t (*build)(const vlmc_model_config_t *config, const vlmc_model_tensors_t *tensors,
                         const vlmc_model_build_options_t *options, vlmc_module_t **out_module);
  /* The same from an open checkpoint (its config and its tensors). A per-family entry for
   * now: the checkpoint's tensor table needs the safetensors -> IR dtype mapping, which is
   * moving into frontend/safetensors.h; then one generic function here can replace it. */
  vlmc_status_t (*build_from_checkpoint)(const vlmc_checkpoint_t *checkpoint,
                                         const vlmc_model_build_options_t *options,
                                         vlmc_module_t **out_module);
  /* The checkpoint tensors `config` implies, one call of `add` each in checkpoint order
   * (hub names, the shapes `build` checks them against): what `vlmc random-checkpoint` writes
   * without a checkpoint to read. A config `build` would refuse is refused first. NULL for a
   * family without a list. */
  vlmc_status_t (*plan_tensors)(const vlmc_model_config_t *config, vlmc_model_tensor_fn add,
                                void *ctx);
  vlmc_model_convention_t convention;
} vlmc_model_family_t;

/* The registered families, in registration order; NULL past the end. */
const vlmc_model_family_t *vlmc_model_family_at(size_t index);

/* Whether `family` reads config.json's with this model_type. */
bool vlmc_model_family_accepts(const vlmc_model_family_t *family, const char *model_type);

/* The family that reads `model_type`. Otherwise an error listing the supported model types:
 * "model_type 'llama': not a supported model family; supported: qwen2_5_vl" (callers prefix
 * the file), or, for a family that is planned but not built yet, "model_type: 'qwen2_vl'
 * (Qwen2-VL) is not supported yet; vlmc reads qwen2_5_vl (Qwen2.5-VL)". */
vlmc_status_t vlmc_model_family_find(const char *model_type,
                                     const vlmc_model_family_t **out_family);

/* config.json text -> its family (by model_type, first, so that a Qwen3-VL config is named as
 * such rather than as a missing key) and the config that family's parser reads. `file` names
 * the text in messages; out_family may be NULL. */
vlmc_status_t vlmc_model_family_parse_config(const char *text, size_t len, const char *file,
                                             const vlmc_model_family_t **out_family,
                                             vlmc_model_config_t *out_config);

/* Opens the checkpoint folder `dir` with its family's parser, found by config.json's
 * model_type. out_family may be NULL. */
vlmc_status_t vlmc_model_family_open_checkpoint(const char *dir,
                                                const vlmc_model_family_t **out_family,
                                                vlmc_checkpoint_t **out_checkpoint);

#endif
