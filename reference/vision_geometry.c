#include "reference/vision_geometry.h"

#include <stdbool.h>
#include <stdlib.h>

#include "support/checked_math.h"

static vlmc_status_t check_grid(const vlmc_grid_thw_t *g, size_t index, int64_t merge) {
  if (g->t <= 0 || g->h <= 0 || g->w <= 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "image_grid_thw[%zu] = (%lld, %lld, %lld): every entry must be positive",
                            index, (long long)g->t, (long long)g->h, (long long)g->w);
  if (merge <= 0 || g->h % merge || g->w % merge)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "image_grid_thw[%zu] = (%lld, %lld, %lld): h and w must be multiples of "
                            "the merge size %lld",
                            index, (long long)g->t, (long long)g->h, (long long)g->w,
                            (long long)merge);
  return NULL;
}

vlmc_status_t vlmc_grids_count(const vlmc_grid_thw_t *grids, size_t n_grids, int64_t merge,
                               int64_t *out_patches, int64_t *out_merged) {
  int64_t patches = 0;
  for (size_t i = 0; i < n_grids; ++i) {
    VLMC_RETURN_IF_ERROR(check_grid(&grids[i], i, merge));
    int64_t n;
    if (!vlmc_mul_i64(grids[i].t, grids[i].h, &n) || !vlmc_mul_i64(n, grids[i].w, &n) ||
        !vlmc_add_i64(patches, n, &patches) || patches > ((int64_t)1 << 40))
      return vlmc_status_make(VLMC_OUT_OF_RANGE, "image_grid_thw: total patch count overflows");
  }
  *out_patches = patches;
  *out_merged = patches / (merge * merge);
  return NULL;
}

static vlmc_status_t check_geometry(vlmc_window_geometry_t geometry) {
  if (geometry.merge <= 0 || geometry.window_side <= 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "window geometry: merge %lld and window side %lld must be positive",
                            (long long)geometry.merge, (long long)geometry.window_side);
  return NULL;
}

/* The padded window grid of one image: pad = k - (n mod k), which is k (not 0) when n is a
 * multiple of k (the reference's quirk, spec §3.3 step 1). */
static int64_t padded_windows(int64_t merged_side, int64_t k) {
  return (merged_side + (k - merged_side % k)) / k;
}

/* Visits the windows of every image in spec order and calls visit(ctx, first token id,
 * window position, ...) once per window with the list of token ids inside it. */
typedef struct {
  int64_t *order; /* optional */
  size_t order_len;
  int64_t *cu; /* optional */
  size_t cu_len;
  int64_t patches_per_token;
} window_walk_t;

static void walk_windows(const vlmc_grid_thw_t *grids, size_t n_grids,
                         vlmc_window_geometry_t geometry, window_walk_t *walk) {
  const int64_t m = geometry.merge, k = geometry.window_side;
  int64_t base = 0, cu_total = 0;
  if (walk->cu) walk->cu[walk->cu_len++] = 0;
  for (size_t i = 0; i < n_grids; ++i) {
    const int64_t hm = grids[i].h / m, wm = grids[i].w / m;
    const int64_t nh = padded_windows(hm, k), nw = padded_windows(wm, k);
    for (int64_t f = 0; f < grids[i].t; ++f) {
      for (int64_t a = 0; a < nh; ++a) {
        for (int64_t b = 0; b < nw; ++b) {
          int64_t count = 0;
          for (int64_t r = 0; r < k; ++r) {
            for (int64_t c = 0; c < k; ++c) {
              int64_t y = a * k + r, x = b * k + c;
              if (y >= hm || x >= wm) continue;
              if (walk->order) walk->order[walk->order_len++] = base + f * hm * wm + y * wm + x;
              ++count;
            }
          }
          cu_total += count * walk->patches_per_token;
          /* Consecutive duplicates come only from empty windows; skipping them here equals the
           * reference's de-duplication of the non-decreasing list. */
          if (walk->cu && count > 0) walk->cu[walk->cu_len++] = cu_total;
        }
      }
    }
    base += grids[i].t * hm * wm;
  }
}

vlmc_status_t vlmc_window_order(const vlmc_grid_thw_t *grids, size_t n_grids,
                                vlmc_window_geometry_t geometry, int64_t *out_order) {
  VLMC_RETURN_IF_ERROR(check_geometry(geometry));
  int64_t patches, merged;
  VLMC_RETURN_IF_ERROR(vlmc_grids_count(grids, n_grids, geometry.merge, &patches, &merged));
  window_walk_t walk = {.order = out_order, .patches_per_token = geometry.merge * geometry.merge};
  walk_windows(grids, n_grids, geometry, &walk);
  return NULL;
}

vlmc_status_t vlmc_window_segments_capacity(const vlmc_grid_thw_t *grids, size_t n_grids,
                                            vlmc_window_geometry_t geometry,
                                            size_t *out_capacity) {
  VLMC_RETURN_IF_ERROR(check_geometry(geometry));
  int64_t patches, merged;
  VLMC_RETURN_IF_ERROR(vlmc_grids_count(grids, n_grids, geometry.merge, &patches, &merged));
  /* At most one boundary per non-empty window, and a window holds at least one token. */
  *out_capacity = (size_t)merged + 1;
  return NULL;
}

vlmc_status_t vlmc_window_segments(const vlmc_grid_thw_t *grids, size_t n_grids,
                                   vlmc_window_geometry_t geometry, int64_t *out_cu,
                                   size_t *out_len) {
  VLMC_RETURN_IF_ERROR(check_geometry(geometry));
  int64_t patches, merged;
  VLMC_RETURN_IF_ERROR(vlmc_grids_count(grids, n_grids, geometry.merge, &patches, &merged));
  window_walk_t walk = {.cu = out_cu, .patches_per_token = geometry.merge * geometry.merge};
  walk_windows(grids, n_grids, geometry, &walk);
  *out_len = walk.cu_len;
  return NULL;
}

vlmc_status_t vlmc_full_segments(const vlmc_grid_thw_t *grids, size_t n_grids, int64_t *out_cu,
                                 size_t *out_len) {
  size_t len = 0;
  int64_t total = 0;
  out_cu[len++] = 0;
  for (size_t i = 0; i < n_grids; ++i) {
    VLMC_RETURN_IF_ERROR(check_grid(&grids[i], i, 1));
    for (int64_t f = 0; f < grids[i].t; ++f) {
      total += grids[i].h * grids[i].w;
      out_cu[len++] = total;
    }
  }
  *out_len = len;
  return NULL;
}

vlmc_status_t vlmc_permutation_inverse(const int64_t *order, size_t n, int64_t *out_inverse) {
  for (size_t i = 0; i < n; ++i) out_inverse[i] = -1;
  for (size_t j = 0; j < n; ++j) {
    int64_t v = order[j];
    if (v < 0 || (uint64_t)v >= n)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "permutation entry [%zu] = %lld is outside 0..%zu", j, (long long)v,
                              n ? n - 1 : 0);
    if (out_inverse[v] != -1)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "permutation entry [%zu] = %lld repeats entry [%lld]", j,
                              (long long)v, (long long)out_inverse[v]);
    out_inverse[v] = (int64_t)j;
  }
  return NULL;
}

vlmc_status_t vlmc_vision_patch_positions(const vlmc_grid_thw_t *grids, size_t n_grids,
                                          int64_t merge, int64_t *out_rc) {
  int64_t patches, merged;
  VLMC_RETURN_IF_ERROR(vlmc_grids_count(grids, n_grids, merge, &patches, &merged));
  size_t n = 0;
  for (size_t i = 0; i < n_grids; ++i) {
    const int64_t hm = grids[i].h / merge, wm = grids[i].w / merge;
    for (int64_t f = 0; f < grids[i].t; ++f)
      for (int64_t bh = 0; bh < hm; ++bh)
        for (int64_t bw = 0; bw < wm; ++bw)
          for (int64_t mh = 0; mh < merge; ++mh)
            for (int64_t mw = 0; mw < merge; ++mw) {
              out_rc[2 * n] = bh * merge + mh;
              out_rc[2 * n + 1] = bw * merge + mw;
              ++n;
            }
  }
  return NULL;
}
