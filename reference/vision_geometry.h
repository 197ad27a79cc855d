/* Host-side index math of the Qwen2.5-VL vision tower (spec §3.2-§3.5, §3.8): which merged
 * token goes where when the tower attends in windows, the segment boundaries, and the
 * inverse permutation that puts the merger output back in image order.
 *
 * These are exact integer functions of image_grid_thw. The window-reorder pass folds them to
 * constants when the image size is known at compile time; the reference executor evaluates
 * them when it is not. */
#ifndef VLMC_REFERENCE_VISION_GEOMETRY_H
#define VLMC_REFERENCE_VISION_GEOMETRY_H

#include <stddef.h>
#include <stdint.h>

#include "support/status.h"

typedef struct {
  int64_t t, h, w; /* in patches, as image_grid_thw */
} vlmc_grid_thw_t;

typedef struct {
  int64_t merge;       /* spatial_merge_size, 2 */
  int64_t window_side; /* k = window_size / merge / patch_size, in merged tokens: 112/2/14 = 4 */
} vlmc_window_geometry_t;

/* Checks grids (positive, h and w divisible by merge) and computes the number of patches N
 * and merged tokens M of the whole call. */
vlmc_status_t vlmc_grids_count(const vlmc_grid_thw_t *grids, size_t n_grids, int64_t merge,
                               int64_t *out_patches, int64_t *out_merged);

/* window_index of spec §3.3: out_order[j] = merged token (original order) placed at window
 * position j. out_order has M entries. */
vlmc_status_t vlmc_window_order(const vlmc_grid_thw_t *grids, size_t n_grids,
                                vlmc_window_geometry_t geometry, int64_t *out_order);

/* Upper bound on the entries of a cu_window list, for allocation. */
vlmc_status_t vlmc_window_segments_capacity(const vlmc_grid_thw_t *grids, size_t n_grids,
                                            vlmc_window_geometry_t geometry, size_t *out_capacity);

/* cu_window_seqlens of spec §3.3 in patches, consecutive duplicates removed (empty windows of
 * the "pad = k" quirk vanish). out_cu needs vlmc_window_segments_capacity entries. */
vlmc_status_t vlmc_window_segments(const vlmc_grid_thw_t *grids, size_t n_grids,
                                   vlmc_window_geometry_t geometry, int64_t *out_cu,
                                   size_t *out_len);

/* Full-attention segments of spec §3.5: [0, h*w, 2*h*w, ...] per image and temporal slice, in
 * patches. out_cu needs 1 + sum(t) entries. */
vlmc_status_t vlmc_full_segments(const vlmc_grid_thw_t *grids, size_t n_grids, int64_t *out_cu,
                                 size_t *out_len);

/* inv[order[j]] = j, by scatter (never "reverse[j] = rank", spec §3.9). Refuses an order that
 * is not a permutation of 0..n-1, naming the first bad entry. */
vlmc_status_t vlmc_permutation_inverse(const int64_t *order, size_t n, int64_t *out_inverse);

/* (row, col) of every patch in pixel_values order (spec §3.2), out_rc[2*N]. */
vlmc_status_t vlmc_vision_patch_positions(const vlmc_grid_thw_t *grids, size_t n_grids,
                                          int64_t merge, int64_t *out_rc);

#endif
