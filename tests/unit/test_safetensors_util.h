/* Helpers shared by the safetensors, config and checkpoint tests: a scratch folder under
 * $TMPDIR, raw safetensors images with a hand-written header, and fixture reading. Each test
 * executable includes this once. */
#ifndef VLMC_TESTS_UNIT_TEST_SAFETENSORS_UTIL_H
#define VLMC_TESTS_UNIT_TEST_SAFETENSORS_UTIL_H

/* Needs _POSIX_C_SOURCE 200809L defined before the first include of the test file. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/file.h"
#include "support/status.h"

/* Creates an empty scratch folder; the path lives in a static buffer per call site's copy. */
static inline const char *scratch_dir_create(char *buf, size_t size) {
  const char *tmp = getenv("TMPDIR");
  snprintf(buf, size, "%s/vlmc-test-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(buf)) {
    perror("mkdtemp");
    exit(2);
  }
  return buf;
}

/* Removes the files in a scratch folder (no subfolders) and the folder itself. */
static inline void scratch_dir_remove(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *entry;
  char path[4096];
  while ((entry = readdir(d)) != NULL) {
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

static inline void path_join_buf(char *out, size_t size, const char *dir, const char *name) {
  snprintf(out, size, "%s/%s", dir, name);
}

/* Writes `len` bytes to dir/name. */
static inline void write_bytes(const char *dir, const char *name, const void *data, size_t len) {
  char path[4096];
  path_join_buf(path, sizeof path, dir, name);
  vlmc_status_t status = vlmc_file_write_all(path, data, len);
  if (status) {
    fprintf(stderr, "test setup: %s\n", vlmc_status_message(status));
    exit(2);
  }
}

/* A safetensors image: 8-byte little-endian `header_len` (normally strlen(header)), then the
 * header text, then `data_len` bytes of data. The caller frees the result. */
static inline unsigned char *make_st_image(const char *header, uint64_t header_len,
                                           const void *data, size_t data_len, size_t *out_size) {
  size_t text_len = strlen(header);
  size_t size = 8 + text_len + data_len;
  unsigned char *image = malloc(size ? size : 1);
  for (int i = 0; i < 8; ++i) image[i] = (unsigned char)(header_len >> (8 * i));
  memcpy(image + 8, header, text_len);
  if (data_len) memcpy(image + 8 + text_len, data, data_len);
  *out_size = size;
  return image;
}

/* Writes dir/name as a safetensors file with the given header and `data_len` bytes of data
 * (0, 1, 2, ... so that contents can be checked). */
static inline void write_st_raw(const char *dir, const char *name, const char *header,
                                size_t data_len) {
  unsigned char *data = malloc(data_len ? data_len : 1);
  for (size_t i = 0; i < data_len; ++i) data[i] = (unsigned char)i;
  size_t size;
  unsigned char *image = make_st_image(header, strlen(header), data, data_len, &size);
  write_bytes(dir, name, image, size);
  free(image);
  free(data);
}

/* Reads a fixture (path relative to the source root, where ctest runs). */
static inline char *read_fixture(const char *path, size_t *out_len) {
  char *text;
  vlmc_status_t status = vlmc_file_read_all(path, &text, out_len);
  if (status) {
    fprintf(stderr, "test setup: %s\n", vlmc_status_message(status));
    exit(2);
  }
  return text;
}

/* Copies a fixture to dir/name. */
static inline void copy_fixture(const char *fixture, const char *dir, const char *name) {
  size_t len;
  char *text = read_fixture(fixture, &len);
  write_bytes(dir, name, text, len);
  free(text);
}

#endif
