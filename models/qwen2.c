/* Qwen2 (Qwen2ForCausalLM): the family entry of a text-only checkpoint. Its decoder is the
 * Qwen2.5-VL one (the same tensor names, q/k/v biases, SwiGLU, RMSNorm), built by the same
 * builders without encode_image (the config has no vision tower). Plain RoPE is M-RoPE with
 * any sections, because the positions of text are t = h = w (transformers' get_rope_index
 * without images; the runtime's M-RoPE positions for a prompt without images):
 * mrope_section (head_dim / 2 - 2, 1, 1), from vlmc_qwen2_config_parse. */
#include "models/qwen2_5_vl.h"

static const char *const kModelTypes[] = {"qwen2", NULL};

const vlmc_model_family_t vlmc_qwen2_family = {
    .name = "qwen2",
    .display_name = "Qwen2 (text only)",
    .model_types = kModelTypes,
    .parse_config = vlmc_qwen2_config_parse,
    .build = vlmc_qwen2_5_vl_build,
    .build_from_checkpoint = vlmc_qwen2_5_vl_build_from_checkpoint,
    .plan_tensors = vlmc_qwen2_5_vl_plan_tensors,
    /* prefill(ids, image_embeds [0, H], positions): the runtime passes no image rows */
    .convention = {.encode_image = "",
                   .prefill = "prefill",
                   .decode = "decode",
                   .positions = VLMC_POSITIONS_MROPE},
};
