/* vlmc-test-scale-weights SRC DST FACTOR NAME...: a copy of checkpoint folder SRC in DST (one
 * model.safetensors, and SRC's other files: config.json, tokenizer, ...) with the named bf16 /
 * f16 / f32 tensors multiplied by FACTOR. Test-only (tests/e2e/precision_overflow.sh): it makes
 * the tiny checkpoint's vision MLP overflow f16 the way test_compiler_precision_overflow.c
 * does in process, so that the same hazard can be shown through vlmc compile and vlmc-run. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend/safetensors.h"
#include "support/file.h"
#include "support/float16.h"

static bool is_named(const char *name, char **names, int count) {
  for (int i = 0; i < count; ++i)
    if (!strcmp(name, names[i])) return true;
  return false;
}

/* A scaled copy of t's elements, or an error for a dtype this tool does not scale. */
static vlmc_status_t scaled_copy(const vlmc_st_tensor_t *t, double factor, void **out) {
  size_t n = vlmc_st_tensor_numel(t);
  const uint8_t *bytes = t->data;
  if (t->dtype == VLMC_ST_BF16 || t->dtype == VLMC_ST_F16) {
    uint16_t *copy = malloc((n ? n : 1) * sizeof *copy);
    if (!copy) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    bool bf16 = t->dtype == VLMC_ST_BF16;
    for (size_t k = 0; k < n; ++k) {
      uint16_t bits = (uint16_t)(bytes[2 * k] | bytes[2 * k + 1] << 8);
      float x = (float)((bf16 ? vlmc_bf16_to_f32(bits) : vlmc_f16_to_f32(bits)) * factor);
      copy[k] = bf16 ? vlmc_f32_to_bf16(x) : vlmc_f32_to_f16(x);
    }
    *out = copy;
    return NULL;
  }
  if (t->dtype == VLMC_ST_F32) {
    float *copy = malloc((n ? n : 1) * sizeof *copy);
    if (!copy) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    memcpy(copy, t->data, n * sizeof *copy);
    for (size_t k = 0; k < n; ++k) copy[k] = (float)(copy[k] * factor);
    *out = copy;
    return NULL;
  }
  return vlmc_status_make(VLMC_UNSUPPORTED, "tensor '%s': dtype %s is not scaled by this tool",
                          t->name, vlmc_st_dtype_name(t->dtype));
}

static vlmc_status_t write_scaled(const char *src, const char *dst, double factor, char **names,
                                  int count) {
  vlmc_st_archive_t *archive;
  VLMC_RETURN_IF_ERROR(vlmc_st_archive_open(src, &archive));
  size_t n = vlmc_st_archive_count(archive);
  vlmc_st_write_tensor_t *out = calloc(n + 1, sizeof *out);
  void **copies = calloc(n + 1, sizeof *copies);
  vlmc_status_t st = out && copies ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  int found = 0;
  for (size_t i = 0; !st && i < n; ++i) {
    const vlmc_st_tensor_t *t = vlmc_st_archive_tensor(archive, i);
    out[i] = (vlmc_st_write_tensor_t){t->name, t->dtype, t->rank, t->shape, t->data};
    if (!is_named(t->name, names, count)) continue;
    st = scaled_copy(t, factor, &copies[i]);
    out[i].data = copies[i];
    ++found;
  }
  if (!st && found != count)
    st = vlmc_status_make(VLMC_NOT_FOUND, "%s: %d of the %d named tensors are not in it", src,
                          count - found, count);
  char *path = vlmc_path_join(dst, "model.safetensors");
  if (!st) st = path ? vlmc_st_write_file(path, out, n)
                     : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  free(path);
  for (size_t i = 0; copies && i < n; ++i) free(copies[i]);
  free(copies);
  free(out);
  vlmc_st_archive_destroy(archive);
  return st;
}

static bool ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && !strcmp(s + a - b, tail);
}

/* Every regular file but the weights (and their shard index, which one file replaces). */
static vlmc_status_t copy_other_files(const char *src, const char *dst) {
  DIR *dir = opendir(src);
  if (!dir) return vlmc_status_make(VLMC_IO_ERROR, "%s: cannot open the folder", src);
  vlmc_status_t st = NULL;
  for (struct dirent *e; !st && (e = readdir(dir));) {
    if (ends_with(e->d_name, ".safetensors") || ends_with(e->d_name, ".safetensors.index.json"))
      continue;
    char *from = vlmc_path_join(src, e->d_name), *to = vlmc_path_join(dst, e->d_name);
    struct stat info;
    if (from && to && stat(from, &info) == 0 && S_ISREG(info.st_mode)) {
      char *bytes = NULL;
      size_t len = 0;
      st = vlmc_file_read_all(from, &bytes, &len);
      if (!st) st = vlmc_file_write_all(to, bytes, len);
      free(bytes);
    }
    free(from);
    free(to);
  }
  closedir(dir);
  return st;
}

int main(int argc, char **argv) {
  char *end = NULL;
  double factor = argc > 3 ? strtod(argv[3], &end) : 0;
  if (argc < 5 || !end || *end || !(factor > 0)) {
    fprintf(stderr, "usage: %s SRC_DIR DST_DIR FACTOR TENSOR_NAME...\n", argv[0]);
    return 2;
  }
  vlmc_status_t st = vlmc_file_mkdirs(argv[2]);
  if (!st) st = write_scaled(argv[1], argv[2], factor, argv + 4, argc - 4);
  if (!st) st = copy_other_files(argv[1], argv[2]);
  return vlmc_status_report(st);
}
