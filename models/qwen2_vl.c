/* Qwen2-VL: the family entry. The model is Qwen2.5-VL's text decoder (Qwen2 with sectioned
 * M-RoPE) and the vision tower without windows, with LayerNorms and a fc1 / quick_gelu / fc2
 * MLP (transformers' modeling_qwen2_vl.py), so it is built by the same builders
 * (models/qwen2_5_vl*.c), which read the differences from the config its parser fills
 * (frontend/config_model.c: vlmc_qwen2_vl_config_parse). */
#include "models/qwen2_5_vl.h"

static const char *const kModelTypes[] = {"qwen2_vl", NULL};

const vlmc_model_family_t vlmc_qwen2_vl_family = {
    .name = "qwen2_vl",
    .display_name = "Qwen2-VL",
    .model_types = kModelTypes,
    .parse_config = vlmc_qwen2_vl_config_parse,
    .build = vlmc_qwen2_5_vl_build,
    .build_from_checkpoint = vlmc_qwen2_5_vl_build_from_checkpoint,
    .plan_tensors = vlmc_qwen2_5_vl_plan_tensors,
    /* Qwen2.5-VL's functions and positions: get_rope_index is the same for images
     * (modeling_qwen2_vl.py; video positions differ: no tokens_per_second). */
    .convention = VLMC_QWEN_VL_CONVENTION,
};
