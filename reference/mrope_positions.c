#include "reference/mrope_positions.h"

static vlmc_status_t check_grids(const vlmc_grid_thw_t *grids, size_t n, int64_t merge) {
  for (size_t i = 0; i < n; ++i) {
    const vlmc_grid_thw_t *g = &grids[i];
    if (g->t <= 0 || g->h <= 0 || g->w <= 0 || g->h % merge || g->w % merge ||
        g->h > (1 << 20) || g->w > (1 << 20))
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "image_grid_thw[%zu] = (%lld, %lld, %lld): expected positive sizes "
                              "with h and w multiples of the merge size %lld",
                              i, (long long)g->t, (long long)g->h, (long long)g->w,
                              (long long)merge);
  }
  return NULL;
}

static int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Assigns the positions of one image block starting at token `start`; returns the block length
 * or an error if the tokens there are not all image pads. */
static vlmc_status_t place_image(const int64_t *ids, size_t seq_len, size_t start,
                                 const vlmc_grid_thw_t *grid, size_t image, int64_t s,
                                 vlmc_mrope_config_t config, int64_t *pos, size_t *out_len) {
  if (grid->t != 1)
    return vlmc_status_make(VLMC_UNSUPPORTED,
                            "image %zu has grid_t %lld; only single-frame images are supported",
                            image, (long long)grid->t);
  const int64_t hm = grid->h / config.merge, wm = grid->w / config.merge;
  const size_t len = (size_t)(hm * wm);
  for (size_t j = 0; j < len; ++j) {
    size_t at = start + j;
    if (at >= seq_len || ids[at] != config.image_token_id)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "image %zu needs %zu consecutive image tokens (grid %lldx%lld merged) "
                              "but only %zu follow at position %zu",
                              image, len, (long long)hm, (long long)wm, j, start);
    pos[at] = s;
    pos[seq_len + at] = s + (int64_t)j / wm;
    pos[2 * seq_len + at] = s + (int64_t)j % wm;
  }
  *out_len = len;
  return NULL;
}

vlmc_status_t vlmc_mrope_position_ids(const int64_t *input_ids, size_t seq_len,
                                      const vlmc_grid_thw_t *grids, size_t n_grids,
                                      vlmc_mrope_config_t config, int64_t *out_positions,
                                      int64_t *out_rope_delta) {
  if (n_grids > 0 && config.merge <= 0) /* 0: a model without a vision tower (no images) */
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "merge size must be positive");
  VLMC_RETURN_IF_ERROR(check_grids(grids, n_grids, config.merge));
  int64_t next = 0, max_pos = -1;
  size_t image = 0;
  for (size_t i = 0; i < seq_len;) {
    if (input_ids[i] == config.video_token_id)
      return vlmc_status_make(VLMC_UNSUPPORTED, "video tokens (id %lld at position %zu) are not "
                              "supported yet", (long long)config.video_token_id, i);
    if (input_ids[i] != config.image_token_id) {
      for (int plane = 0; plane < 3; ++plane) out_positions[plane * seq_len + i] = next;
      max_pos = max_i64(max_pos, next);
      ++next;
      ++i;
      continue;
    }
    if (image >= n_grids)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "the prompt holds more image blocks than the %zu images given "
                              "(image tokens at position %zu)", n_grids, i);
    size_t len = 0;
    VLMC_RETURN_IF_ERROR(place_image(input_ids, seq_len, i, &grids[image], image, next, config,
                                     out_positions, &len));
    const vlmc_grid_thw_t *g = &grids[image];
    int64_t extent = max_i64(g->h / config.merge, g->w / config.merge);
    max_pos = max_i64(max_pos, next + extent - 1);
    next += extent;
    i += len;
    ++image;
  }
  if (image != n_grids)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "%zu images given but the prompt holds %zu image blocks", n_grids, image);
  *out_rope_delta = max_pos + 1 - (int64_t)seq_len;
  return NULL;
}
