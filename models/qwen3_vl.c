/* Qwen3-VL and text-only Qwen3: the family entries. Qwen3-VL (transformers'
 * modeling_qwen3_vl.py) is built by the Qwen2.5-VL builders (models/qwen2_5_vl*.c), which read
 * its differences from the config vlmc_qwen3_vl_config_parse fills: a Conv3d patch embedding
 * with a bias over 16-pixel patches, a learned position table interpolated to the grid
 * (pos_interp_index / pos_interp_weight), LayerNorm blocks with a gelu_pytorch_tanh MLP and no
 * windows, the merger's norm / linear_fc1 / linear_fc2, and deepstack: a merger of its own
 * after each of deepstack_visual_indexes' blocks whose feature is added to the image tokens'
 * rows after the language model's first layers; Qwen3's text model (an explicit head_dim, q/k
 * norms, no q/k/v bias) with interleaved M-RoPE. Video (timestamps between frames) and
 * Qwen3-VL-MoE are not built: the processor refuses video, the registry names qwen3_vl_moe. */
#include "models/qwen2_5_vl.h"

static const char *const kQwen3VlTypes[] = {"qwen3_vl", NULL};
static const char *const kQwen3Types[] = {"qwen3", NULL};

const vlmc_model_family_t vlmc_qwen3_vl_family = {
    .name = "qwen3_vl",
    .display_name = "Qwen3-VL",
    .model_types = kQwen3VlTypes,
    .parse_config = vlmc_qwen3_vl_config_parse,
    .build = vlmc_qwen2_5_vl_build,
    .build_from_checkpoint = vlmc_qwen2_5_vl_build_from_checkpoint,
    .plan_tensors = vlmc_qwen2_5_vl_plan_tensors,
    /* encode_image returns the merged rows and the deepstack features, prefill takes them all;
     * get_rope_index of images is Qwen2.5-VL's (modeling_qwen3_vl.py: t is 0 for an image). */
    .convention = VLMC_QWEN_VL_CONVENTION,
};

const vlmc_model_family_t vlmc_qwen3_family = {
    .name = "qwen3",
    .display_name = "Qwen3 (text only)",
    .model_types = kQwen3Types,
    .parse_config = vlmc_qwen3_config_parse,
    .build = vlmc_qwen2_5_vl_build,
    .build_from_checkpoint = vlmc_qwen2_5_vl_build_from_checkpoint,
    .plan_tensors = vlmc_qwen2_5_vl_plan_tensors,
    .convention = {.encode_image = "",
                   .prefill = "prefill",
                   .decode = "decode",
                   .positions = VLMC_POSITIONS_MROPE},
};
