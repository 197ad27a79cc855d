/* Fuzzes a sharded checkpoint's index (frontend/safetensors.c, vlmc_st_archive_open on a
 * folder holding model.safetensors.index.json): the input is the index; the folder, made once
 * per process, holds small fixed shards (two valid ones, one with no tensors, one that repeats
 * a tensor of the first, one damaged file and a subfolder) for the index to name. Opening
 * either fails with a status or yields an archive where every weight_map entry is found in
 * the shard it names and every tensor is found by its name. */
#define _POSIX_C_SOURCE 200809L
#include <assert.h>
#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/safetensors.h"
#include "support/file.h"

static char g_dir[256];

static const char *const kFiles[] = {
    "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "empty.safetensors",
    "dup.safetensors", "broken.safetensors", "model.safetensors.index.json"};

/* Whatever is left of the folder goes with the process (best effort: a crash leaves it). */
static void remove_dir(void) {
  char path[512];
  for (size_t i = 0; i < sizeof kFiles / sizeof *kFiles; ++i) {
    snprintf(path, sizeof path, "%s/%s", g_dir, kFiles[i]);
    unlink(path);
  }
  snprintf(path, sizeof path, "%s/sub", g_dir);
  rmdir(path);
  rmdir(g_dir);
}

static void write_shard(const char *name, const vlmc_st_write_tensor_t *tensors, size_t count) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  vlmc_status_t status = vlmc_st_write_file(path, tensors, count);
  assert(status == NULL);
  (void)status;
}

static void make_dir(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/vlmc-fuzz-index-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(g_dir)) abort();
  atexit(remove_dir);
  static const float f32[2] = {1, 2};
  static const uint16_t half[4] = {0x3f80, 0x4000, 0x4040, 0x4080};
  static const int64_t i64[1] = {7};
  static const int64_t s2[1] = {2}, s22[2] = {2, 2}, s1[1] = {1}, s3[1] = {3};
  vlmc_st_write_tensor_t first[] = {{"a", VLMC_ST_F32, 1, s2, f32},
                                    {"b", VLMC_ST_BF16, 2, s22, half}};
  vlmc_st_write_tensor_t second[] = {{"c", VLMC_ST_I64, 1, s1, i64},
                                     {"d", VLMC_ST_F16, 1, s3, half}};
  write_shard(kFiles[0], first, 2);
  write_shard(kFiles[1], second, 2);
  write_shard(kFiles[2], NULL, 0);
  write_shard(kFiles[3], first, 1);
  char path[512];
  snprintf(path, sizeof path, "%s/%s", g_dir, kFiles[4]);
  vlmc_status_t status = vlmc_file_write_all(path, "\x10\0\0\0\0\0\0\0{\"a\":", 13);
  assert(status == NULL);
  (void)status;
  snprintf(path, sizeof path, "%s/sub", g_dir);
  mkdir(path, 0700);
}

static void check_archive(const vlmc_st_archive_t *archive, const uint8_t *data, size_t size) {
  int shards = vlmc_st_archive_shard_count(archive);
  for (size_t i = 0; i < vlmc_st_archive_count(archive); ++i) {
    const vlmc_st_tensor_t *t = vlmc_st_archive_tensor(archive, i);
    assert(vlmc_st_archive_find(archive, t->name) == t);
    if (i > 0) assert(strcmp(vlmc_st_archive_tensor(archive, i - 1)->name, t->name) < 0);
    assert(t->shard >= 0 && t->shard < shards && vlmc_st_archive_shard_path(archive, t->shard));
    assert(vlmc_st_tensor_numel(t) * vlmc_st_dtype_size(t->dtype) == t->nbytes);
  }
  /* The index parsed again, independently: each entry is in the file it names. */
  cJSON *root = cJSON_ParseWithLength((const char *)data, size);
  const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map"), *entry;
  assert(cJSON_IsObject(map));
  cJSON_ArrayForEach(entry, map) {
    const vlmc_st_tensor_t *t = vlmc_st_archive_find(archive, entry->string);
    assert(t != NULL && cJSON_IsString(entry));
    const char *path = vlmc_st_archive_shard_path(archive, t->shard), *slash = strrchr(path, '/');
    assert(strcmp(slash ? slash + 1 : path, entry->valuestring) == 0);
  }
  cJSON_Delete(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_dir[0]) make_dir();
  char index[512];
  snprintf(index, sizeof index, "%s/model.safetensors.index.json", g_dir);
  vlmc_status_t status = vlmc_file_write_all(index, data, size);
  assert(status == NULL);
  vlmc_st_archive_t *archive = NULL;
  status = vlmc_st_archive_open(g_dir, &archive);
  if (status) {
    assert(archive == NULL && strstr(vlmc_status_message(status), g_dir) != NULL);
    vlmc_status_free(status);
    return 0;
  }
  check_archive(archive, data, size);
  vlmc_st_archive_destroy(archive);
  return 0;
}
