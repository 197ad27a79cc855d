/* vlmc diff-taps A B: compares two sets of stage taps (vlmc-run --dump-taps, or
 * tests/oracle/dump_taps.py from transformers), prints max and mean |Δ| per tap in pipeline
 * order, and names the first stage that diverges - the question every porting bug starts with
 * (see the dropped-object report: the first divergence was the merger's un-permute). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "frontend/safetensors.h"
#include "support/strbuf.h"
#include "tools/commands.h"

typedef struct {
  double max_abs, mean_abs, scale;
  const char *problem; /* shape or presence mismatch, else NULL */
} tap_diff_t;

/* Pipeline order of the tap names; vision_block.{i} sorts by i. Unknown names go last. */
static double stage_rank(const char *name) {
  static const char *const order[] = {"input_ids",    "image_grid_thw", "pixel_values",
                                      "patch_embed",  "vision_block.", "merger",
                                      "image_embeds", "inputs_embeds", "position_ids",
                                      "rope_deltas",  "logits_last"};
  for (size_t i = 0; i < sizeof order / sizeof order[0]; ++i) {
    size_t len = strlen(order[i]);
    if (order[i][len - 1] == '.' && strncmp(name, order[i], len) == 0)
      return (double)i + atof(name + len) / 1e6;
    if (strcmp(name, order[i]) == 0) return (double)i;
  }
  return 1e9;
}

static int by_stage(const void *a, const void *b) {
  const char *x = *(const char *const *)a, *y = *(const char *const *)b;
  double rx = stage_rank(x), ry = stage_rank(y);
  if (rx != ry) return rx < ry ? -1 : 1;
  return strcmp(x, y);
}

static vlmc_status_t open_taps(const char *path, vlmc_st_archive_t **out) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    vlmc_strbuf_t file;
    vlmc_strbuf_init(&file);
    vlmc_strbuf_printf(&file, "%s/taps.safetensors", path);
    vlmc_status_t status = vlmc_st_archive_open(vlmc_strbuf_cstr(&file), out);
    vlmc_strbuf_deinit(&file);
    return status;
  }
  return vlmc_st_archive_open(path, out);
}

static bool same_shape(const vlmc_st_tensor_t *a, const vlmc_st_tensor_t *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; ++i)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

static vlmc_status_t diff_tensor(const vlmc_st_tensor_t *a, const vlmc_st_tensor_t *b,
                                 tap_diff_t *out) {
  memset(out, 0, sizeof *out);
  if (!same_shape(a, b)) {
    out->problem = "shapes differ";
    return NULL;
  }
  size_t n = vlmc_st_tensor_numel(a);
  float *x = malloc((n ? n : 1) * sizeof *x), *y = malloc((n ? n : 1) * sizeof *y);
  vlmc_status_t status = NULL;
  if (!x || !y) status = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory comparing '%s'",
                                          a->name);
  if (!status) status = vlmc_st_tensor_to_f32(a, x, n);
  if (!status) status = vlmc_st_tensor_to_f32(b, y, n);
  double sum = 0;
  for (size_t i = 0; !status && i < n; ++i) {
    double d = fabs((double)x[i] - (double)y[i]);
    if (isnan(d)) d = INFINITY; /* a NaN on either side is a divergence, not a zero */
    if (d > out->max_abs) out->max_abs = d;
    sum += d;
    double s = fmax(fabs((double)x[i]), fabs((double)y[i]));
    if (s > out->scale) out->scale = s;
  }
  out->mean_abs = n ? sum / (double)n : 0;
  free(x);
  free(y);
  return status;
}

static void print_usage(FILE *out) {
  fprintf(out,
          "usage: vlmc diff-taps A B [--tolerance T] [--json]\n"
          "  A, B: tap folders (holding taps.safetensors) or .safetensors files.\n"
          "  --tolerance T   a tap diverges when max|Δ| > T · max(|A|, |B|) over the tap\n"
          "                  (default 1e-4)\n"
          "  --json          one JSON document instead of the table (docs/cli.md)\n"
          "  Exit status: 0 when no tap diverges, 1 when one does, 2 on bad input.\n");
}

/* One tap's row of the report. */
typedef struct {
  const char *name;
  const char *only_in; /* "A" or "B" when the other side lacks it, else NULL */
  tap_diff_t diff;
  bool diverges;
} tap_row_t;

static void print_table(const tap_row_t *rows, size_t n, const char *first, double tolerance) {
  printf("%-20s %12s %12s %12s  %s\n", "tap", "max|Δ|", "mean|Δ|", "scale", "verdict");
  for (size_t i = 0; i < n; ++i) {
    const tap_row_t *r = &rows[i];
    if (r->only_in)
      printf("%-20s %12s %12s %12s  only in %s\n", r->name, "-", "-", "-", r->only_in);
    else if (r->diff.problem)
      printf("%-20s %12s %12s %12s  DIVERGES (%s)\n", r->name, "-", "-", "-", r->diff.problem);
    else
      printf("%-20s %12.4g %12.4g %12.4g  %s\n", r->name, r->diff.max_abs, r->diff.mean_abs,
             r->diff.scale, r->diverges ? "DIVERGES" : "ok");
  }
  if (first)
    printf("first divergence: %s\n", first);
  else
    printf("no divergence (tolerance %g relative to each tap's scale)\n", tolerance);
}

/* {"tolerance", "taps": [{"name", "verdict", "max_abs", "mean_abs", "scale"[, "problem"]}],
 * "first_divergence"}; a NaN or infinite |Δ| is written null (JSON has neither). */
static int print_json(const tap_row_t *rows, size_t n, const char *first, double tolerance) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddNumberToObject(root, "tolerance", tolerance);
  cJSON *taps = cJSON_AddArrayToObject(root, "taps");
  for (size_t i = 0; i < n; ++i) {
    const tap_row_t *r = &rows[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->name);
    cJSON_AddStringToObject(o, "verdict", r->only_in ? (*r->only_in == 'A' ? "only in A"
                                                                          : "only in B")
                                          : r->diverges ? "diverges" : "ok");
    if (!r->only_in && !r->diff.problem) {
      cJSON_AddNumberToObject(o, "max_abs", r->diff.max_abs);
      cJSON_AddNumberToObject(o, "mean_abs", r->diff.mean_abs);
      cJSON_AddNumberToObject(o, "scale", r->diff.scale);
    }
    if (r->diff.problem) cJSON_AddStringToObject(o, "problem", r->diff.problem);
    cJSON_AddItemToArray(taps, o);
  }
  if (first) cJSON_AddStringToObject(root, "first_divergence", first);
  else cJSON_AddNullToObject(root, "first_divergence");
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) {
    fprintf(stderr, "error: diff-taps: out of memory writing the JSON report\n");
    return 2;
  }
  puts(text);
  cJSON_free(text);
  return 0;
}

static int compare(vlmc_st_archive_t *a, vlmc_st_archive_t *b, double tolerance, bool json) {
  size_t na = vlmc_st_archive_count(a), nb = vlmc_st_archive_count(b), n = 0;
  const char **names = malloc((na + nb + 1) * sizeof *names);
  tap_row_t *rows = calloc(na + nb + 1, sizeof *rows);
  if (!names || !rows) {
    free(names);
    free(rows);
    fprintf(stderr, "error: diff-taps: out of memory\n");
    return 2;
  }
  for (size_t i = 0; i < na; ++i) names[n++] = vlmc_st_archive_tensor(a, i)->name;
  for (size_t i = 0; i < nb; ++i)
    if (!vlmc_st_archive_find(a, vlmc_st_archive_tensor(b, i)->name))
      names[n++] = vlmc_st_archive_tensor(b, i)->name;
  qsort(names, n, sizeof *names, by_stage);
  const char *first = NULL;
  int rc = 0;
  for (size_t i = 0; i < n; ++i) {
    tap_row_t *r = &rows[i];
    const vlmc_st_tensor_t *ta = vlmc_st_archive_find(a, names[i]);
    const vlmc_st_tensor_t *tb = vlmc_st_archive_find(b, names[i]);
    r->name = names[i];
    if (!ta || !tb) {
      r->only_in = ta ? "A" : "B";
      continue;
    }
    vlmc_status_t status = diff_tensor(ta, tb, &r->diff);
    if (status) {
      vlmc_status_report(status);
      rc = 2;
      break;
    }
    r->diverges = r->diff.problem ||
                  r->diff.max_abs > tolerance * (r->diff.scale > 0 ? r->diff.scale : 1);
    if (r->diverges && !first) first = names[i];
    if (r->diverges) rc = 1;
  }
  if (rc != 2 && json && print_json(rows, n, first, tolerance)) rc = 2;
  else if (rc != 2 && !json) print_table(rows, n, first, tolerance);
  free(rows);
  free(names);
  return rc;
}

int vlmc_cmd_diff_taps(int argc, char **argv) {
  const char *paths[2] = {NULL, NULL};
  int npaths = 0;
  double tolerance = 1e-4;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      print_usage(stdout);
      return 0;
    } else if (strcmp(argv[i], "--tolerance") == 0 && i + 1 < argc) {
      char *end;
      tolerance = strtod(argv[++i], &end);
      if (*end || !(tolerance >= 0)) {
        fprintf(stderr, "error: --tolerance: expected a non-negative number, got '%s'\n", argv[i]);
        return 2;
      }
    } else if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "error: diff-taps: unknown option '%s'\n", argv[i]);
      print_usage(stderr);
      return 2;
    } else if (npaths < 2) {
      paths[npaths++] = argv[i];
    } else {
      fprintf(stderr, "error: diff-taps: expected two tap sets, got a third ('%s')\n", argv[i]);
      return 2;
    }
  }
  if (npaths != 2) {
    print_usage(stderr);
    return 2;
  }
  vlmc_st_archive_t *a = NULL, *b = NULL;
  vlmc_status_t status = open_taps(paths[0], &a);
  if (!status) status = open_taps(paths[1], &b);
  int rc = status ? (vlmc_status_report(status), 2) : compare(a, b, tolerance, json);
  vlmc_st_archive_destroy(a);
  vlmc_st_archive_destroy(b);
  return rc;
}
