/* Qwen2.5-VL as graph IR: a module with three functions built from the parsed config.json and
 * the checkpoint's tensor table (names, dtypes, shapes; the data is never read here).
 *
 *   encode_image(pixel_values f32[P,F], grid i64[G,3]) -> f32[P/m^2, out]
 *       F = in_channels * temporal_patch * patch^2 (1176). Patch embedding (the Conv3d weight
 *       viewed [D, F]), `vision_blocks` blocks, the merger; rows in the original (spec §2.4)
 *       token order, images concatenated. Windowed blocks use `window_attention` on
 *       original-order values; fullatt_block_indexes use `attention` over per-image segments
 *       (`full_segments`). The window-reorder pass moves the tower into window order.
 *   prefill(input_ids i64[S], image_embeds f32[M,H], positions i64[3,S])
 *       -> (logits_last f32[V], k.0 f32[S,kv,hd], v.0 f32[S,kv,hd], k.1, v.1, ...)
 *       Embedding, image rows scattered into the image-token positions (`token_positions`),
 *       decoder layers with rope{layout=mrope_sectioned, sections=mrope_section}, causal GQA
 *       attention, final norm, logits of the last position only. The k/v results are the KV
 *       cache (keys after rope).
 *   decode(token i64[1], position i64[3,1], k.0 f32[C,kv,hd], v.0 f32[C,kv,hd], ...)
 *       -> (logits f32[V], k.0 f32[C+1,kv,hd], v.0 f32[C+1,kv,hd], ...)
 *       One step against the cache (`kv_cache_append`, causal attention over it).
 *
 * Weights are module parameters named by their canonical hub names (`visual.*`, `model.*`,
 * `lm_head.weight`) in their checkpoint dtype (bf16 in the official uploads); the model casts
 * them to f32 and computes in f32. Precision, layout and fusion are decisions of the passes
 * (mrope-layout, window-reorder, precision, ...), not of this file. With tied embeddings the
 * head reads `model.embed_tokens.weight`.
 *
 * With a fixed grid (compile-time image size) P and G are static and the index computations
 * read a constant grid, so canonicalize and window-reorder fold them to constants; the
 * `grid` argument is then kept only so that every build has the same calling convention.
 *
 * Stage taps (option `taps`, one `tap` op each): patch_embed (original order), vision_block.{i}
 * and merger (window order, as transformers' hooks see them), image_embeds (original order),
 * inputs_embeds, logits_last. */
#ifndef VLMC_MODELS_QWEN2_5_VL_H
#define VLMC_MODELS_QWEN2_5_VL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frontend/checkpoint.h"
#include "frontend/config.h"
#include "ir/ir.h"
#include "models/builder.h"
#include "models/family.h"
#include "support/status.h"

/* The qwen2_5_vl family (models/family.h): model_type "qwen2_5_vl", the config parser
 * vlmc_qwen2_5_vl_config_parse, the builders below, and the convention {encode_image,
 * prefill, decode, positions "mrope"}. */
extern const vlmc_model_family_t vlmc_qwen2_5_vl_family;
/* Both families' calling convention: the functions of this header; M-RoPE ids (t, h, w) per
 * token with the rope delta for decode positions (reference/mrope_positions.c, spec §4.4; the
 * same for Qwen2-VL's images). */
#define VLMC_QWEN_VL_CONVENTION                                                          \
  {                                                                                      \
    .encode_image = "encode_image", .prefill = "prefill", .decode = "decode",            \
    .positions = VLMC_POSITIONS_MROPE                                                    \
  }
/* The qwen2_vl family (models/qwen2_vl.c): the same builders, its own config parser
 * (vlmc_qwen2_vl_config_parse: no windows, LayerNorms, a quick_gelu MLP in the vision tower). */
extern const vlmc_model_family_t vlmc_qwen2_vl_family;
/* The qwen2 family (models/qwen2.c): a text-only Qwen2ForCausalLM checkpoint, the same text
 * decoder without the vision tower (vlmc_qwen2_config_parse: plain RoPE as M-RoPE with every
 * frequency in the temporal section); its convention has no image encoder. */
extern const vlmc_model_family_t vlmc_qwen2_family;
/* The qwen3_vl and qwen3 families (models/qwen3_vl.c): the same builders over Qwen3-VL's config
 * (vlmc_qwen3_vl_config_parse: learned positions, deepstack, Qwen3's text model) and a
 * text-only Qwen3ForCausalLM's (vlmc_qwen3_config_parse). */
extern const vlmc_model_family_t vlmc_qwen3_vl_family;
extern const vlmc_model_family_t vlmc_qwen3_family;

/* Builds the module. Errors name the tensor ("tensor 'visual.merger.mlp.0.bias' not found
 * (also tried 'model.visual.merger.mlp.0.bias') in DIR"), the shape the config implies, or the
 * config keys that disagree. `options` may be NULL (symbolic grid, no taps). The module is
 * verified before it is returned. */
vlmc_status_t vlmc_qwen2_5_vl_build(const vlmc_model_config_t *config,
                                    const vlmc_model_tensors_t *tensors,
                                    const vlmc_model_build_options_t *options,
                                    vlmc_module_t **out_module);

/* Same, reading config and tensors from an open checkpoint. */
vlmc_status_t vlmc_qwen2_5_vl_build_from_checkpoint(const vlmc_checkpoint_t *checkpoint,
                                                    const vlmc_model_build_options_t *options,
                                                    vlmc_module_t **out_module);

/* The tensors of a checkpoint for `config` (the family's plan_tensors): every tensor the
 * builder asks for, with the shape it expects, and no other. A config the builder refuses is
 * refused here first, with the same message, before any shape is computed from it. */
vlmc_status_t vlmc_qwen2_5_vl_plan_tensors(const vlmc_model_config_t *config,
                                           vlmc_model_tensor_fn add, void *ctx);

#endif
