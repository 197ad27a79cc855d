/* Host-side index computations from the image grid (model spec, sections 3.2-3.5): the window
 * order of merged tokens, window and full-attention segment boundaries, patch positions for the
 * 2-D rotary, and the inverse of a permutation. Canonicalization folds them on constant grids;
 * the reference executor runs them on real ones. */
#include <stdlib.h>
#include <string.h>

#include "ir/internal.h"
#include "support/checked_math.h"

/* Folding hostile constants must not allocate without bound. */
enum { MAX_INDEX_COUNT = 1 << 28 };

typedef struct {
  int64_t t, h, w; /* h, w: merged units (patches / merge) */
} grid_image_t;

static vlmc_status_t grid_image(const int64_t *grid, size_t i, int64_t merge, grid_image_t *out) {
  int64_t t = grid[3 * i], h = grid[3 * i + 1], w = grid[3 * i + 2];
  if (merge <= 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "merge must be positive, got %lld",
                            (long long)merge);
  if (t <= 0 || h <= 0 || w <= 0 || h % merge || w % merge)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "grid row %zu is (%lld, %lld, %lld); expected positive t, h, w with "
                            "h and w multiples of merge %lld",
                            i, (long long)t, (long long)h, (long long)w, (long long)merge);
  out->t = t;
  out->h = h / merge;
  out->w = w / merge;
  return NULL;
}

/* Merged tokens per image and over all images, bounded by MAX_INDEX_COUNT. */
static vlmc_status_t grid_count(const int64_t *grid, size_t num_images, int64_t merge,
                                int64_t per_token, size_t *out_count) {
  int64_t total = 0;
  for (size_t i = 0; i < num_images; ++i) {
    grid_image_t g;
    VLMC_RETURN_IF_ERROR(grid_image(grid, i, merge, &g));
    int64_t n;
    if (!vlmc_mul_i64(g.t, g.h, &n) || !vlmc_mul_i64(n, g.w, &n) ||
        !vlmc_mul_i64(n, per_token, &n) || !vlmc_add_i64(total, n, &total) ||
        total > MAX_INDEX_COUNT)
      return vlmc_status_make(VLMC_OUT_OF_RANGE, "the grid has more than %d tokens",
                              MAX_INDEX_COUNT);
  }
  *out_count = (size_t)total;
  return NULL;
}

static vlmc_status_t window_side(int64_t window, int64_t patch, int64_t merge, int64_t *out_k) {
  if (window <= 0 || patch <= 0 || merge <= 0 || patch > INT32_MAX || merge > INT32_MAX ||
      window % (patch * merge) != 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "window %lld must be a positive multiple of patch %lld * merge %lld",
                            (long long)window, (long long)patch, (long long)merge);
  *out_k = window / (patch * merge);
  return NULL;
}

static vlmc_status_t alloc_indices(size_t count, int64_t **out) {
  *out = malloc((count ? count : 1) * sizeof(int64_t));
  return *out ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
}

/* Windows of k x k merged tokens. The padding is k - (side mod k), which is k (a whole row or
 * column of empty windows) when the side is already a multiple of k: the reference does this,
 * and the empty windows give repeated segment boundaries, removed afterwards. */
static int64_t windows_along(int64_t side, int64_t k) { return side / k + 1; }

static int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

vlmc_status_t vlmc_index_window_order(const int64_t *grid, size_t num_images, int64_t window,
                                      int64_t patch, int64_t merge, int64_t **out_data,
                                      size_t *out_count) {
  int64_t k;
  size_t count, n = 0;
  VLMC_RETURN_IF_ERROR(window_side(window, patch, merge, &k));
  VLMC_RETURN_IF_ERROR(grid_count(grid, num_images, merge, 1, &count));
  int64_t *order;
  VLMC_RETURN_IF_ERROR(alloc_indices(count, &order));
  int64_t base = 0;
  for (size_t i = 0; i < num_images; ++i) {
    grid_image_t g;
    grid_image(grid, i, merge, &g);
    int64_t nh = windows_along(g.h, k), nw = windows_along(g.w, k);
    for (int64_t f = 0; f < g.t; ++f)
      for (int64_t a = 0; a < nh; ++a)
        for (int64_t b = 0; b < nw; ++b)
          for (int64_t y = a * k; y < a * k + min_i64(k, g.h - a * k); ++y)
            for (int64_t x = b * k; x < b * k + min_i64(k, g.w - b * k); ++x)
              order[n++] = base + (f * g.h + y) * g.w + x;
    base += g.t * g.h * g.w;
  }
  *out_data = order;
  *out_count = n;
  return NULL;
}

vlmc_status_t vlmc_index_window_segments(const int64_t *grid, size_t num_images, int64_t window,
                                         int64_t patch, int64_t merge, int64_t **out_data,
                                         size_t *out_count) {
  int64_t k;
  size_t count;
  VLMC_RETURN_IF_ERROR(window_side(window, patch, merge, &k));
  VLMC_RETURN_IF_ERROR(grid_count(grid, num_images, merge, 1, &count));
  /* At most one boundary per merged token, plus the leading 0. */
  int64_t *cu;
  VLMC_RETURN_IF_ERROR(alloc_indices(count + 1, &cu));
  size_t n = 0;
  cu[n++] = 0;
  int64_t end = 0;
  for (size_t i = 0; i < num_images; ++i) {
    grid_image_t g;
    grid_image(grid, i, merge, &g);
    int64_t nh = windows_along(g.h, k), nw = windows_along(g.w, k);
    for (int64_t f = 0; f < g.t; ++f)
      for (int64_t a = 0; a < nh; ++a)
        for (int64_t b = 0; b < nw; ++b) {
          int64_t rows = min_i64(k, g.h - a * k), cols = min_i64(k, g.w - b * k);
          if (rows <= 0 || cols <= 0) continue; /* an empty window repeats the boundary */
          end += rows * cols * merge * merge;
          cu[n++] = end;
        }
  }
  *out_data = cu;
  *out_count = n;
  return NULL;
}

vlmc_status_t vlmc_index_full_segments(const int64_t *grid, size_t num_images,
                                       int64_t **out_data, size_t *out_count) {
  size_t frames = 0;
  for (size_t i = 0; i < num_images; ++i) {
    grid_image_t g;
    VLMC_RETURN_IF_ERROR(grid_image(grid, i, 1, &g));
    if (g.t > MAX_INDEX_COUNT || (frames += (size_t)g.t) > MAX_INDEX_COUNT)
      return vlmc_status_make(VLMC_OUT_OF_RANGE, "the grid has more than %d frames",
                              MAX_INDEX_COUNT);
  }
  size_t patches;
  VLMC_RETURN_IF_ERROR(grid_count(grid, num_images, 1, 1, &patches));
  int64_t *cu;
  VLMC_RETURN_IF_ERROR(alloc_indices(frames + 1, &cu));
  size_t n = 0;
  cu[n++] = 0;
  for (size_t i = 0; i < num_images; ++i)
    for (int64_t f = 0; f < grid[3 * i]; ++f, ++n)
      cu[n] = cu[n - 1] + grid[3 * i + 1] * grid[3 * i + 2];
  *out_data = cu;
  *out_count = n;
  return NULL;
}

vlmc_status_t vlmc_index_vision_positions(const int64_t *grid, size_t num_images, int64_t merge,
                                          int64_t **out_data, size_t *out_count) {
  size_t patches;
  if (merge <= 0 || merge > INT32_MAX)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "merge must be in [1, 2^31), got %lld",
                            (long long)merge);
  VLMC_RETURN_IF_ERROR(grid_count(grid, num_images, merge, merge * merge, &patches));
  if (patches > MAX_INDEX_COUNT / 2)
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "the grid has too many patches");
  int64_t *pos;
  VLMC_RETURN_IF_ERROR(alloc_indices(2 * patches, &pos));
  size_t n = 0;
  for (size_t i = 0; i < num_images; ++i) {
    grid_image_t g;
    grid_image(grid, i, merge, &g);
    /* Patch rows come in merge-group order: frame, block row, block col, then the
     * merge x merge patches of the block row-major. */
    for (int64_t f = 0; f < g.t; ++f)
      for (int64_t bh = 0; bh < g.h; ++bh)
        for (int64_t bw = 0; bw < g.w; ++bw)
          for (int64_t mh = 0; mh < merge; ++mh)
            for (int64_t mw = 0; mw < merge; ++mw, ++n) {
              pos[n] = bh * merge + mh;
              pos[patches + n] = bw * merge + mw;
            }
  }
  *out_data = pos;
  *out_count = 2 * patches;
  return NULL;
}

/* torch.linspace(0, end, steps)[i] for float32 (aten's linspace kernel, scalar form). */
static float linspace_at(float end, int64_t steps, int64_t i) {
  if (steps == 1) return 0.0f;
  float step = end / (float)(steps - 1);
  return i < steps / 2 ? step * (float)i : end - step * (float)(steps - i - 1);
}

typedef struct {
  int64_t lo, hi; /* table coordinates: floor, and floor + 1 clipped to the table */
  float frac;     /* the position minus floor */
} interp_axis_t;

static interp_axis_t interp_axis(int64_t side, int64_t steps, int64_t i) {
  float at = linspace_at((float)(side - 1), steps, i);
  interp_axis_t a;
  a.lo = (int64_t)at; /* at >= 0: truncation is floor, as torch's .int() */
  a.hi = a.lo + 1 < side ? a.lo + 1 : side - 1;
  a.frac = at - (float)a.lo;
  return a;
}

vlmc_status_t vlmc_index_pos_interp(const int64_t *grid, size_t num_images, int64_t side,
                                    int64_t merge, int64_t **out_index, float **out_weight,
                                    size_t *out_count) {
  size_t patches;
  if (merge <= 0 || merge > INT32_MAX || side <= 0 || side > INT32_MAX)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "side %lld and merge %lld must be in [1, 2^31)",
                            (long long)side, (long long)merge);
  VLMC_RETURN_IF_ERROR(grid_count(grid, num_images, merge, merge * merge, &patches));
  if (patches > MAX_INDEX_COUNT / 4)
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "the grid has too many patches");
  int64_t *index = NULL;
  float *weight = NULL;
  if (out_index) VLMC_RETURN_IF_ERROR(alloc_indices(4 * patches, &index));
  if (out_weight && !(weight = malloc((patches ? 4 * patches : 1) * sizeof *weight))) {
    free(index);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  size_t n = 0;
  for (size_t i = 0; i < num_images; ++i) {
    grid_image_t g;
    grid_image(grid, i, merge, &g);
    int64_t rows = g.h * merge, cols = g.w * merge;
    for (int64_t f = 0; f < g.t; ++f)
      for (int64_t bh = 0; bh < g.h; ++bh)
        for (int64_t bw = 0; bw < g.w; ++bw)
          for (int64_t mh = 0; mh < merge; ++mh)
            for (int64_t mw = 0; mw < merge; ++mw, ++n) {
              interp_axis_t y = interp_axis(side, rows, bh * merge + mh);
              interp_axis_t x = interp_axis(side, cols, bw * merge + mw);
              if (index) {
                index[n] = y.lo * side + x.lo;
                index[patches + n] = y.lo * side + x.hi;
                index[2 * patches + n] = y.hi * side + x.lo;
                index[3 * patches + n] = y.hi * side + x.hi;
              }
              if (weight) {
                weight[n] = (1.0f - y.frac) * (1.0f - x.frac);
                weight[patches + n] = (1.0f - y.frac) * x.frac;
                weight[2 * patches + n] = y.frac * (1.0f - x.frac);
                weight[3 * patches + n] = y.frac * x.frac;
              }
            }
  }
  if (out_index) *out_index = index;
  if (out_weight) *out_weight = weight;
  *out_count = 4 * patches;
  return NULL;
}

vlmc_status_t vlmc_index_inverse_permutation(const int64_t *perm, size_t count, int64_t *out) {
  for (size_t i = 0; i < count; ++i) out[i] = -1;
  for (size_t i = 0; i < count; ++i) {
    int64_t p = perm[i];
    if (p < 0 || (uint64_t)p >= count || out[p] != -1)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "not a permutation of 0..%zu: entry %zu is %lld%s",
                              count ? count - 1 : 0, i, (long long)p,
                              p >= 0 && (uint64_t)p < count ? " (repeated)" : " (out of range)");
    out[p] = (int64_t)i;
  }
  return NULL;
}
