/* Parity with transformers 5.17 on the oracle's fixtures (tests/oracle/README.md).
 *
 * Torchvision path (the default Qwen2VLImageProcessor): for every
 * tests/fixtures/images/<name>.png with a tests/fixtures/preprocess/<name>.safetensors,
 * image_grid_thw must match exactly and pixel_values within mean |d| <= 1e-4 and
 * max |d| <= 1e-2 (normalized units; one uint8 step is about 0.015). Large images are stored
 * as a row subset plus the sum and absolute sum of the full tensor; those sums are checked
 * against the same mean bound.
 *
 * PIL path (Qwen2VLImageProcessorPil): the oracle stored only its difference to the
 * torchvision path (index.json: max and mean |d| per image); vlmc's two paths must differ by
 * the same amounts, which they only do if the PIL path reproduces Pillow's rounding.
 * Prints the measured differences per image. */
#define _DEFAULT_SOURCE /* readdir */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/preprocess.h"
#include "frontend/safetensors.h"
#include "support/file.h"
#include "tests/unit/test.h"

#define IMAGES_DIR "tests/fixtures/images"
#define FIXTURES_DIR "tests/fixtures/preprocess"

static const double mean_tolerance = 1e-4, max_tolerance = 1e-2;

typedef struct {
  double sum_abs_diff, max_abs_diff;
  size_t count, exact;
} diff_stats_t;

static void accumulate(diff_stats_t *stats, const float *ours, const float *theirs, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    double d = fabs((double)ours[i] - (double)theirs[i]);
    stats->sum_abs_diff += d;
    if (d > stats->max_abs_diff) stats->max_abs_diff = d;
    stats->exact += d == 0.0;
  }
  stats->count += n;
}

static const vlmc_st_tensor_t *find(const vlmc_st_archive_t *archive, const char *file,
                                    const char *name, vlmc_st_dtype_t dtype) {
  const vlmc_st_tensor_t *t = vlmc_st_archive_find(archive, name);
  if (!t) TEST_FAIL_("%s: no tensor '%s'", file, name);
  else if (t->dtype != dtype) TEST_FAIL_("%s: '%s' has dtype %s", file, name,
                                         vlmc_st_dtype_name(t->dtype));
  return t && t->dtype == dtype ? t : NULL;
}

static double read_f64(const vlmc_st_tensor_t *t) {
  double v = 0;
  memcpy(&v, t->data, sizeof v);
  return v;
}

static int check_grid(const vlmc_st_archive_t *archive, const char *file,
                      const vlmc_preprocess_output_t *out) {
  const vlmc_st_tensor_t *grid = find(archive, file, "image_grid_thw", VLMC_ST_I64);
  if (!grid || grid->nbytes != 3 * sizeof(int64_t)) return 0;
  int64_t want[3];
  memcpy(want, grid->data, sizeof want);
  for (int i = 0; i < 3; ++i)
    if (out->image_grid_thw[i] != want[i]) {
      TEST_FAIL_("%s: image_grid_thw (%lld, %lld, %lld), transformers (%lld, %lld, %lld)", file,
                 (long long)out->image_grid_thw[0], (long long)out->image_grid_thw[1],
                 (long long)out->image_grid_thw[2], (long long)want[0], (long long)want[1],
                 (long long)want[2]);
      return 0;
    }
  return 1;
}

/* Full tensor, or the stored rows (row_index) of it. */
static void compare_values(const vlmc_st_archive_t *archive, const char *file,
                           const vlmc_preprocess_output_t *out, diff_stats_t *stats) {
  size_t width = (size_t)out->row_width;
  const vlmc_st_tensor_t *full = vlmc_st_archive_find(archive, "pixel_values");
  if (full) {
    size_t n = (size_t)out->num_rows * width;
    float *theirs = malloc(n * sizeof(float));
    EXPECT_OK(vlmc_st_tensor_to_f32(full, theirs, n));
    accumulate(stats, out->pixel_values, theirs, n);
    free(theirs);
    return;
  }
  const vlmc_st_tensor_t *rows = find(archive, file, "pixel_values_rows", VLMC_ST_F32);
  const vlmc_st_tensor_t *index = find(archive, file, "row_index", VLMC_ST_I64);
  if (!rows || !index) return;
  size_t k = index->nbytes / sizeof(int64_t);
  float *theirs = malloc(k * width * sizeof(float));
  EXPECT_OK(vlmc_st_tensor_to_f32(rows, theirs, k * width));
  for (size_t i = 0; i < k; ++i) {
    int64_t r;
    memcpy(&r, (const char *)index->data + i * sizeof r, sizeof r);
    if (r < 0 || r >= out->num_rows) {
      TEST_FAIL_("%s: row_index %lld outside [0, %lld)", file, (long long)r,
                 (long long)out->num_rows);
      break;
    }
    accumulate(stats, out->pixel_values + (size_t)r * width, theirs + i * width, width);
  }
  free(theirs);
}

/* The sums cover the whole tensor even when only rows are stored. */
static void compare_sums(const vlmc_st_archive_t *archive, const char *file,
                         const vlmc_preprocess_output_t *out) {
  const vlmc_st_tensor_t *sum = find(archive, file, "pixel_values_sum", VLMC_ST_F64);
  const vlmc_st_tensor_t *abs_sum = find(archive, file, "pixel_values_abs_sum", VLMC_ST_F64);
  if (!sum || !abs_sum) return;
  double s = 0, a = 0;
  size_t n = (size_t)out->num_rows * (size_t)out->row_width;
  for (size_t i = 0; i < n; ++i) {
    s += out->pixel_values[i];
    a += fabs(out->pixel_values[i]);
  }
  double bound = mean_tolerance * (double)n;
  double ds = fabs(s - read_f64(sum)), da = fabs(a - read_f64(abs_sum));
  printf("  full-tensor sums over %zu values: |d sum| %.3g, |d abs sum| %.3g\n", n, ds, da);
  if (ds > bound || da > bound)
    TEST_FAIL_("%s: sum %.6f / abs sum %.6f, transformers %.6f / %.6f (bound %.3g)", file, s,
               a, read_f64(sum), read_f64(abs_sum), bound);
}

/* The oracle's index.json, or NULL (then the PIL-path check is skipped with a failure). */
static cJSON *load_index(void) {
  char *text = NULL;
  size_t len = 0;
  vlmc_status_t status = vlmc_file_read_all(FIXTURES_DIR "/index.json", &text, &len);
  if (status) {
    TEST_FAIL_("%s", vlmc_status_message(status));
    vlmc_status_free(status);
    return NULL;
  }
  cJSON *index = cJSON_ParseWithLength(text, len);
  free(text);
  if (!index) TEST_FAIL_("%s/index.json: not JSON", FIXTURES_DIR);
  return index;
}

static double json_number(const cJSON *object, const char *key) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
  return cJSON_IsNumber(item) ? item->valuedouble : -1.0;
}

/* The PIL path's distance to the torchvision path, against transformers' own. */
static void compare_pil_path(const cJSON *index, const char *name, const vlmc_image_t *image,
                             const vlmc_preprocess_output_t *torchvision) {
  const cJSON *images = cJSON_GetObjectItemCaseSensitive(index, "images");
  const cJSON *info = cJSON_GetObjectItemCaseSensitive(images, name);
  double want_max = json_number(info, "pil_vs_torchvision_max_abs");
  double want_mean = json_number(info, "pil_vs_torchvision_mean_abs");
  if (want_max < 0 || want_mean < 0) {
    TEST_FAIL_("index.json: no PIL statistics for %s", name);
    return;
  }
  vlmc_preprocess_params_t params;
  vlmc_preprocess_params_init(&params);
  params.resample = VLMC_RESAMPLE_PIL;
  vlmc_preprocess_output_t pil;
  EXPECT_OK(vlmc_preprocess_images(image, NULL, 1, &params, &pil));
  if (!pil.pixel_values) return;
  diff_stats_t d = {0};
  accumulate(&d, pil.pixel_values, torchvision->pixel_values,
             (size_t)pil.num_rows * (size_t)pil.row_width);
  double mean = d.sum_abs_diff / (double)d.count;
  printf("  PIL path vs torchvision path: mean|d| %.4g max|d| %.4g; transformers: %.4g %.4g\n",
         mean, d.max_abs_diff, want_mean, want_max);
  /* The max is one value of either f32 path: equal to f32 precision. The mean is summed in a
   * different order (and in f32 or f64) by the oracle: equal to a relative 1e-3. */
  if (fabs(d.max_abs_diff - want_max) > 1e-6 || fabs(mean - want_mean) > 1e-3 * want_mean + 1e-9)
    TEST_FAIL_("%s: PIL path differs from torchvision by mean %.6g max %.6g, transformers' "
               "PIL processor by mean %.6g max %.6g", name, mean, d.max_abs_diff, want_mean,
               want_max);
  vlmc_preprocess_output_destroy(&pil);
}

static int check_one(const cJSON *index, const char *name) {
  char image_path[512], fixture_path[512];
  snprintf(image_path, sizeof image_path, "%s/%s.png", IMAGES_DIR, name);
  snprintf(fixture_path, sizeof fixture_path, "%s/%s.safetensors", FIXTURES_DIR, name);
  vlmc_st_archive_t *archive = NULL;
  vlmc_status_t status = vlmc_st_archive_open(fixture_path, &archive);
  if (status) { /* an image without a fixture: nothing to compare against */
    vlmc_status_free(status);
    return 0;
  }
  vlmc_preprocess_params_t params;
  vlmc_preprocess_params_init(&params); /* 3136 / 12845056, CLIP, torchvision: the oracle's */
  vlmc_image_t image;
  vlmc_preprocess_output_t out = {0};
  EXPECT_OK(vlmc_image_load(image_path, &image));
  const char *names[1] = {image_path};
  if (image.pixels) EXPECT_OK(vlmc_preprocess_images(&image, names, 1, &params, &out));
  if (out.pixel_values && check_grid(archive, fixture_path, &out)) {
    diff_stats_t stats = {0};
    compare_values(archive, fixture_path, &out, &stats);
    double mean = stats.count ? stats.sum_abs_diff / (double)stats.count : 0;
    printf("%-24s grid (%lld,%lld,%lld) compared %8zu values: mean|d| %.3g max|d| %.3g "
           "exact %.4f%%\n",
           name, (long long)out.image_grid_thw[0], (long long)out.image_grid_thw[1],
           (long long)out.image_grid_thw[2], stats.count, mean, stats.max_abs_diff,
           stats.count ? 100.0 * (double)stats.exact / (double)stats.count : 0.0);
    EXPECT_TRUE(stats.count > 0);
    compare_sums(archive, fixture_path, &out);
    if (mean > mean_tolerance || stats.max_abs_diff > max_tolerance)
      TEST_FAIL_("%s: mean|d| %.3g (limit %g), max|d| %.3g (limit %g)", name, mean,
                 mean_tolerance, stats.max_abs_diff, max_tolerance);
    if (index) compare_pil_path(index, name, &image, &out);
  }
  vlmc_preprocess_output_destroy(&out);
  vlmc_image_destroy(&image);
  vlmc_st_archive_destroy(archive);
  return 1;
}

static void test_fixtures(void) {
  DIR *dir = opendir(IMAGES_DIR);
  if (!dir) {
    TEST_FAIL_("cannot open %s (run from the repository root)", IMAGES_DIR);
    return;
  }
  cJSON *index = load_index();
  int compared = 0;
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL) {
    size_t len = strlen(entry->d_name);
    if (len <= 4 || len > 200 || strcmp(entry->d_name + len - 4, ".png") != 0) continue;
    char name[256];
    memcpy(name, entry->d_name, len - 4);
    name[len - 4] = '\0';
    compared += check_one(index, name);
  }
  closedir(dir);
  cJSON_Delete(index);
  /* The fixtures are committed (tests/oracle/README.md); none at all means they went missing. */
  if (compared == 0)
    TEST_FAIL_("no fixtures in %s: regenerate with tests/oracle/make_preprocess_fixtures.py",
               FIXTURES_DIR);
}

int main(void) {
  RUN_TEST(test_fixtures);
  return TEST_SUMMARY();
}
