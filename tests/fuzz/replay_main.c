/* Runs a libFuzzer target over every file of a corpus directory (or the files named on
 * the command line) without libFuzzer, so that each build - and the ASan+UBSan build in
 * particular - replays every seed and every crash reproducer we ever kept. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return 1;
  }
  size_t cap = 4096, len = 0;
  uint8_t *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      cap *= 2;
      uint8_t *grown = realloc(buf, cap);
      if (!grown) free(buf);
      buf = grown;
    }
  }
  fclose(f);
  if (!buf) return 1;
  /* An exact-size copy so that ASan catches reads one past the end. */
  uint8_t *exact = malloc(len ? len : 1);
  if (!exact) {
    free(buf);
    return 1;
  }
  memcpy(exact, buf, len);
  free(buf);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  return 0;
}

static int replay_path(const char *path, int *count) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "replay: %s does not exist\n", path);
    return 1;
  }
  if (!S_ISDIR(st.st_mode)) {
    ++*count;
    return replay_file(path);
  }
  DIR *dir = opendir(path);
  if (!dir) return 1;
  int failures = 0;
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL) {
    if (entry->d_name[0] == '.') continue;
    size_t need = strlen(path) + strlen(entry->d_name) + 2;
    char *child = malloc(need);
    if (!child) break;
    snprintf(child, need, "%s/%s", path, entry->d_name);
    failures += replay_path(child, count);
    free(child);
  }
  closedir(dir);
  return failures;
}

int main(int argc, char **argv) {
  int failures = 0, count = 0;
  for (int i = 1; i < argc; ++i) failures += replay_path(argv[i], &count);
  printf("replayed %d inputs without a crash\n", count);
  if (count == 0) {
    fprintf(stderr, "replay: no inputs found\n");
    return 1;
  }
  return failures ? 1 : 0;
}
