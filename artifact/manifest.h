/* The artifact's manifest: a JSON section that says what the rest of the artifact is — the
 * model family and its token ids, the preprocessing and generation settings, where each
 * parameter's bytes are (inline, or in an external safetensors file checked by checksum), and
 * the options that compiled it. docs/artifact.md documents every field. The compiler writes it
 * from this struct; the runtime reads it back into the same struct, refusing by name any field
 * that is missing or of the wrong type. */
#ifndef VLMC_ARTIFACT_MANIFEST_H
#define VLMC_ARTIFACT_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frontend/preprocess.h"
#include "ir/ir.h"
#include "support/status.h"
#include "support/strbuf.h"

enum {
  VLMC_MANIFEST_MAX_EOS = 8,
  /* 1: no format_version field, no calling_convention (the family implies it);
   * 2: format_version and calling_convention. */
  VLMC_MANIFEST_FORMAT_VERSION = 2,
};

typedef struct {
  char *name;            /* the checkpoint's tensor name, as the program's params use it */
  vlmc_dtype_t dtype;
  uint32_t rank;
  int64_t shape[VLMC_IR_MAX_RANK];
  char *file;            /* external only: the safetensors file, relative to --params DIR */
  uint64_t offset;       /* inline: within the params section; external: within `file` */
  uint64_t nbytes;
  uint64_t checksum;     /* XXH64 of the tensor's bytes */
} vlmc_manifest_param_t;

typedef struct {
  int64_t format_version; /* as read (1 when the field is absent); the writer writes the current */
  char *model_family;    /* "qwen2_5_vl" */
  char *producer;        /* "vlmc <version>" */
  char *compile_options; /* the command line options that produced it, for `vlmc inspect` */
  char *targets;         /* comma-separated backends the artifact carries code for: "ref" */
  /* How the runtime drives the program: the names of its functions ("" for encode_image:
   * a text-only family) and the position ids prefill and decode take: "mrope" (i64[3,S]
   * M-RoPE ids, decode continuing from the prompt's rope delta) or "plain" (i64[1,S]). */
  struct {
    char *encode_image, *prefill, *decode, *positions;
  } convention;
  int64_t vocab_size;
  /* tokens.max_positions: the positions the model was trained for (config.json's
   * max_position_embeddings), the runtime's default context limit; 0 when unknown (absent in
   * artifacts compiled before it was recorded). */
  int64_t max_positions;
  int64_t image_token_id, video_token_id, vision_start_token_id, vision_end_token_id;
  int64_t merge_size;
  int eos_count;
  int64_t eos_token_ids[VLMC_MANIFEST_MAX_EOS];
  vlmc_preprocess_params_t preprocess;
  char *chat_template_source; /* the checkpoint file the template came from */
  /* What the precision pass did (optional: NULL `compute` when absent, as in artifacts
   * compiled before the field existed). Written "precision": {"compute": "f16",
   * "calibrated": true, "upcasts_rule": 52, "upcasts_calibrated": 2, "calibrated_modules":
   * ["visual.blocks.3.mlp"]}. */
  struct {
    char *compute;            /* "f32", "f16" or "bf16" */
    bool calibrated;          /* vlmc compile --calibrate measured ranges */
    int64_t upcasts_rule;     /* ops computing in f32 by rule */
    int64_t upcasts_calibrated; /* values kept in f32 by calibration */
    char *calibrated_modules; /* their checkpoint modules, comma-separated ("" for none) */
  } precision;
  /* Quantized weights (optional: NULL `source` when none, docs/quantization.md). Written
   * "quantization": {"source": "vlmc" (--quantize) or "checkpoint" (an mlx-community one),
   * "bits": 4, "group": 64, "tensors": 253}: the dequantize ops' packed tensors. */
  struct {
    char *source;
    int64_t bits, group, tensors;
  } quantization;
  /* The checkpoint's generation_config.json sampling fields (optional: `present` false when
   * it set none, or in artifacts compiled before they were recorded), vlmc-run's defaults as
   * they are transformers' generate()'s; a field the file lacked has transformers' default
   * (temperature 1, top_k 50, top_p 1, repetition_penalty 1). Written "generation":
   * {"do_sample": true, "temperature": 0.1, "top_k": 1, "top_p": 0.001,
   * "repetition_penalty": 1.05}. */
  struct {
    bool present, do_sample;
    double temperature, top_p, repetition_penalty;
    int64_t top_k;
  } generation;
  bool params_external;
  vlmc_manifest_param_t *params;
  size_t num_params;
} vlmc_manifest_t;

void vlmc_manifest_init(vlmc_manifest_t *manifest);
void vlmc_manifest_deinit(vlmc_manifest_t *manifest);

/* Sets the calling convention of `family` where it has a default ("qwen2_5_vl": encode_image,
 * prefill, decode, mrope): for manifests of format_version 1, which carry none, and for the
 * compiler; any other family is refused by name. Replaces any convention already set. */
vlmc_status_t vlmc_manifest_set_default_convention(vlmc_manifest_t *manifest, const char *family);

/* Appends a parameter (copies the strings). */
vlmc_status_t vlmc_manifest_add_param(vlmc_manifest_t *manifest, const vlmc_manifest_param_t *p);
/* NULL when absent. */
const vlmc_manifest_param_t *vlmc_manifest_find_param(const vlmc_manifest_t *manifest,
                                                      const char *name);

/* Writes format_version VLMC_MANIFEST_FORMAT_VERSION; the convention must be set. */
vlmc_status_t vlmc_manifest_to_json(const vlmc_manifest_t *manifest, vlmc_strbuf_t *out);
/* `source` names the artifact in messages ("model.vlmc: manifest: preprocess.min_pixels:
 * expected an integer"). Reads format_version 1 and 2; a newer one is refused by number. */
vlmc_status_t vlmc_manifest_from_json(const char *source, const char *text, size_t len,
                                      vlmc_manifest_t *out_manifest);

#endif
