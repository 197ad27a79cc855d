/* The rope tables (reference/rope_tables.h). */
#include "reference/rope_tables.h"

#include <math.h>
#include <string.h>

static vlmc_status_t sections_plane_table(const vlmc_op_t *op, bool interleaved, int64_t half,
                                          int64_t *plane) {
  const vlmc_attr_t *sections = vlmc_op_attr(op, "sections");
  if (!sections || sections->v.ints.count != 3)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "the mrope layouts need 'sections' with 3 "
                            "entries");
  const int64_t *s = sections->v.ints.data;
  if (s[0] <= 0 || s[1] <= 0 || s[2] <= 0 || s[0] + s[1] + s[2] != half)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "sections [%lld, %lld, %lld] must sum to the rotary half-width %lld",
                            (long long)s[0], (long long)s[1], (long long)s[2], (long long)half);
  for (int64_t j = 0; j < half; ++j) {
    if (interleaved)
      plane[j] = (j % 3 == 1 && j < 3 * s[1]) ? 1 : (j % 3 == 2 && j < 3 * s[2]) ? 2 : 0;
    else
      plane[j] = j < s[0] ? 0 : j < s[0] + s[1] ? 1 : 2;
  }
  return NULL;
}

vlmc_status_t vlmc_rope_plane_table(const vlmc_op_t *op, const char *layout, int64_t half,
                                    int64_t *plane) {
  const vlmc_attr_t *planes = vlmc_op_attr(op, "planes");
  if (planes) {
    if ((int64_t)planes->v.ints.count != half)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "'planes' has %zu entries, expected rotary_dim / 2 = %lld",
                              planes->v.ints.count, (long long)half);
    memcpy(plane, planes->v.ints.data, (size_t)half * sizeof *plane);
    return NULL;
  }
  if (strcmp(layout, "mrope_sectioned") == 0) return sections_plane_table(op, false, half, plane);
  if (strcmp(layout, "mrope_interleaved") == 0) return sections_plane_table(op, true, half, plane);
  bool two_d = strcmp(layout, "vision_2d") == 0;
  for (int64_t j = 0; j < half; ++j) plane[j] = two_d && j >= half / 2 ? 1 : 0;
  return NULL;
}

void vlmc_rope_frequency_table(const char *layout, double theta, int64_t rotary, float *inv_freq) {
  int64_t half = rotary / 2;
  bool two_d = strcmp(layout, "vision_2d") == 0;
  float base = (float)theta;
  for (int64_t j = 0; j < half; ++j) {
    float exponent = two_d ? (float)(2 * (j % (half / 2))) / (float)half
                           : (float)(2 * j) / (float)rotary;
    inv_freq[j] = 1.0f / (float)pow(base, exponent);
  }
}
