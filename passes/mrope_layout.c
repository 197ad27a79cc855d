/* mrope-layout: resolves the position layout of every `rope` op into its concrete
 * per-frequency plane table, the `planes` attribute: slot j (0 <= j < rotary_dim / 2, the
 * frequency shared by dims j and j + rotary_dim / 2) reads its position from plane planes[j]
 * of the positions operand. After this pass no consumer needs to know the layout names.
 *
 *   plain                  every slot reads plane 0.
 *   mrope_sectioned[t,h,w] Qwen2-VL / Qwen2.5-VL (spec §4.3): contiguous sections, slots
 *                          [0, t) read plane 0 (temporal), [t, t+h) plane 1 (height), the last w
 *                          plane 2 (width). [16,24,24] -> 0 for 0..15, 1 for 16..39, 2 for 40..63.
 *   mrope_interleaved[t,h,w] Qwen3-VL (spec §4.5): every slot starts on plane 0; slot j reads
 *                          plane 1 when j % 3 == 1 and j < 3h, plane 2 when j % 3 == 2 and
 *                          j < 3w. [24,20,20] -> h slots 1,4,..,58, w slots 2,5,..,59, the
 *                          other 24 (0,3,..,57 and 60..63) temporal.
 *   vision_2d              the vision tower's 2-D rotary (spec §3.2): the first half of the slots
 *                          read plane 0 (patch row), the second half plane 1 (patch column).
 *                          Its frequencies restart in each half (slot j uses frequency index
 *                          j mod (rotary_dim / 4) of a rotary_dim / 2 wide table); the planes
 *                          table says only where positions come from.
 *
 * Sections must sum to the rotary half-width; a layout that does not is refused by name:
 * "mrope_section [16,24,16] sums to 56, rotary half-width is 64". A `planes` attribute that is
 * already there must agree with the layout (the pass is idempotent).
 *
 * Requires: verified IR. Invalidates: nothing (it only sets attributes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"

enum { STAT_RESOLVED, STAT_ALREADY };

static const char *const mrope_statistics[] = {"ropes-resolved", "ropes-already-resolved"};

/* The rotary half-width of a rope op: rotary_dim / 2, rotary_dim defaulting to the head dim
 * (the shape rule guarantees one of them is static and even). */
static int64_t rope_half(const vlmc_op_t *op) {
  const vlmc_attr_t *rotary = vlmc_op_attr(op, "rotary_dim");
  int64_t dim = rotary ? rotary->v.i : op->operands[0]->type.dims[2].off;
  return dim / 2;
}

static void sections_text(const vlmc_attr_t *sections, char *out, size_t size) {
  size_t n = (size_t)snprintf(out, size, "[");
  for (size_t i = 0; i < sections->v.ints.count && n < size; ++i)
    n += (size_t)snprintf(out + n, size - n, i ? ",%lld" : "%lld",
                          (long long)sections->v.ints.data[i]);
  if (n < size) snprintf(out + n, size - n, "]");
}

static vlmc_status_t check_sections(const vlmc_attr_t *sections, int64_t half,
                                    bool interleaved) {
  const int64_t *s = sections->v.ints.data;
  int64_t sum = s[0] + s[1] + s[2];
  char text[96];
  sections_text(sections, text, sizeof text);
  if (sum != half)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "mrope_section %s sums to %lld, rotary half-width is %lld", text,
                            (long long)sum, (long long)half);
  /* The last height slot is 3h - 2 and the last width slot 3w - 1: both must exist. */
  if (interleaved && (3 * s[1] - 2 >= half || 3 * s[2] - 1 >= half))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "mrope_section %s: interleaved height/width slots run to %lld/%lld, "
                            "past the rotary half-width %lld",
                            text, (long long)(3 * s[1] - 2), (long long)(3 * s[2] - 1),
                            (long long)half);
  return NULL;
}

/* Fills planes[0..half) for the op's layout. */
static vlmc_status_t plane_table(const vlmc_op_t *op, int64_t half, int64_t *planes) {
  const char *layout = vlmc_op_attr_enum(op, "layout");
  const vlmc_attr_t *sections = vlmc_op_attr(op, "sections");
  if (strcmp(layout, "plain") == 0) {
    for (int64_t j = 0; j < half; ++j) planes[j] = 0;
    return NULL;
  }
  if (strcmp(layout, "vision_2d") == 0) {
    for (int64_t j = 0; j < half; ++j) planes[j] = j < half / 2 ? 0 : 1;
    return NULL;
  }
  bool interleaved = strcmp(layout, "mrope_interleaved") == 0;
  VLMC_RETURN_IF_ERROR(check_sections(sections, half, interleaved));
  const int64_t *s = sections->v.ints.data;
  for (int64_t j = 0; j < half; ++j) {
    if (!interleaved) planes[j] = j < s[0] ? 0 : j < s[0] + s[1] ? 1 : 2;
    else if (j % 3 == 1 && j < 3 * s[1]) planes[j] = 1;
    else if (j % 3 == 2 && j < 3 * s[2]) planes[j] = 2;
    else planes[j] = 0;
  }
  return NULL;
}

static bool table_equal(const vlmc_attr_t *attr, const int64_t *planes, int64_t half) {
  if ((int64_t)attr->v.ints.count != half) return false;
  return memcmp(attr->v.ints.data, planes, (size_t)half * sizeof *planes) == 0;
}

/* "layout[sections] over N slots: plane runs" for the remark log, e.g.
 * "mrope_sectioned[2,3,3], 8 slots: t 0-1, h 2-4, w 5-7". */
static void describe(const vlmc_op_t *op, const int64_t *planes, int64_t half, char *out,
                     size_t size) {
  static const char *const plane_names[3] = {"t", "h", "w"};
  const vlmc_attr_t *sections = vlmc_op_attr(op, "sections");
  char text[96] = "";
  if (sections) sections_text(sections, text, sizeof text);
  size_t n = (size_t)snprintf(out, size, "%s%s, %lld slots:", vlmc_op_attr_enum(op, "layout"),
                              text, (long long)half);
  bool vision = strcmp(vlmc_op_attr_enum(op, "layout"), "vision_2d") == 0;
  for (int64_t j = 0; j < half && n < size;) {
    int64_t end = j;
    while (end + 1 < half && planes[end + 1] == planes[j]) ++end;
    const char *name = vision ? (planes[j] ? "col" : "row") : plane_names[planes[j]];
    n += (size_t)snprintf(out + n, size - n, "%s %s %lld", j ? "," : "", name, (long long)j);
    if (end > j && n < size) n += (size_t)snprintf(out + n, size - n, "-%lld", (long long)end);
    j = end + 1;
  }
}

enum { REMARK_MAX = 512 };

static vlmc_status_t resolve_rope(vlmc_pass_context_t *ctx, vlmc_op_t *op, char *last_remark,
                                  bool *out_new) {
  int64_t half = rope_half(op);
  int64_t *planes = malloc((size_t)(half > 0 ? half : 1) * sizeof *planes);
  if (!planes) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_status_t st = plane_table(op, half, planes);
  const vlmc_attr_t *existing = vlmc_op_attr(op, "planes");
  *out_new = !st && !existing;
  if (!st && existing && !table_equal(existing, planes, half))
    st = vlmc_status_make(VLMC_INVALID_ARGUMENT,
                          "the 'planes' table disagrees with layout %s",
                          vlmc_op_attr_enum(op, "layout"));
  if (!st && !existing) {
    vlmc_attr_t table = vlmc_attr_ints(planes, (size_t)half);
    st = vlmc_op_set_attr(op, "planes", &table);
  }
  if (!st && *out_new) {
    char text[512];
    describe(op, planes, half, text, sizeof text);
    /* One remark per run of identical ropes (every layer has two). */
    if (strcmp(text, last_remark) != 0)
      vlmc_pass_remark(ctx, "@%s: rope %s", op->block->func->name, text);
    snprintf(last_remark, REMARK_MAX, "%s", text);
  }
  free(planes);
  return st ? vlmc_op_locate_error(op, st) : NULL;
}

static vlmc_status_t mrope_layout_run(vlmc_pass_context_t *ctx, vlmc_module_t *module) {
  for (uint32_t f = 0; f < module->num_funcs; ++f) {
    char last_remark[REMARK_MAX] = "";
    for (vlmc_op_t *op = module->funcs[f]->body.first; op; op = op->next) {
      if (op->kind != VLMC_OP_ROPE) continue;
      bool resolved_now = false;
      VLMC_RETURN_IF_ERROR(resolve_rope(ctx, op, last_remark, &resolved_now));
      vlmc_pass_stat_add(ctx, resolved_now ? STAT_RESOLVED : STAT_ALREADY, 1);
    }
  }
  return NULL;
}

const vlmc_pass_t vlmc_pass_mrope_layout = {
    .name = "mrope-layout",
    .summary = "resolve each rope's position layout into its per-frequency plane table",
    .options = NULL,
    .num_options = 0,
    .statistics = mrope_statistics,
    .num_statistics = sizeof mrope_statistics / sizeof mrope_statistics[0],
    .run = mrope_layout_run,
};
