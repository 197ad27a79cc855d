/* M-RoPE position ids of a prompt (spec §4.4, transformers 5.x get_rope_index for images):
 * text tokens advance one position on all three planes; an image block of t*(h/m)*(w/m) pad
 * tokens starts at s = next and gives cell (r, c) the positions (s, s + r, s + c); after it,
 * next = s + max(h/m, w/m). rope_delta = max position + 1 - prompt length, so that decode step
 * at cache index c uses position c + rope_delta on every plane. */
#ifndef VLMC_REFERENCE_MROPE_POSITIONS_H
#define VLMC_REFERENCE_MROPE_POSITIONS_H

#include <stddef.h>
#include <stdint.h>

#include "support/status.h"

typedef struct {
  int64_t t, h, w; /* in patches, as image_grid_thw */
} vlmc_grid_thw_t;

typedef struct {
  int64_t image_token_id; /* 151655 in Qwen2.5-VL */
  int64_t video_token_id; /* 151656; video prompts are refused for now */
  int64_t merge;          /* spatial_merge_size */
} vlmc_mrope_config_t;

/* out_positions is plane-major [3][seq_len] (T, H, W). Errors when the image pad tokens do not
 * match the grids (count, or a block cut short), naming both numbers. */
vlmc_status_t vlmc_mrope_position_ids(const int64_t *input_ids, size_t seq_len,
                                      const vlmc_grid_thw_t *grids, size_t n_grids,
                                      vlmc_mrope_config_t config, int64_t *out_positions,
                                      int64_t *out_rope_delta);

#endif
