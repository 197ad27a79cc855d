/* The reference results of kernel-test cases, shared through a folder (ref_cache.h).
 *
 * An entry: "VLMCREF1", the result count (u32), then per result its dtype (u32), rank (u32),
 * shape (rank x i64) and data bytes (u64) followed by the data; last, the XXH64 of all that
 * came before (u64), so that a damaged byte anywhere reads as no entry. Native byte order: an
 * entry is read back by the build that wrote it. */
#define _POSIX_C_SOURCE 200809L
#include "tools/ref_cache.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/file.h"
#include "support/strbuf.h"

static const char kMagic[8] = {'V', 'L', 'M', 'C', 'R', 'E', 'F', '1'};

static void add(vlmc_ref_cache_key_t *key, const void *data, size_t len) {
  vlmc_xxh64_update(&key->h[0], data, len);
  vlmc_xxh64_update(&key->h[1], data, len);
}

/* The executable's path, size and modification time (what tells one build from the next),
 * hashed; 0 when there is none to read (then nothing is shared). */
static uint64_t executable_identity(void) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  struct stat sb;
  if (n <= 0 || (exe[n] = '\0', stat(exe, &sb) != 0)) return 0;
  int64_t identity[4] = {(int64_t)sb.st_size, (int64_t)sb.st_mtim.tv_sec,
                         (int64_t)sb.st_mtim.tv_nsec, (int64_t)sb.st_ino};
  vlmc_xxh64_state_t h;
  vlmc_xxh64_init(&h, 0);
  vlmc_xxh64_update(&h, exe, (size_t)n);
  vlmc_xxh64_update(&h, identity, sizeof identity);
  uint64_t id = vlmc_xxh64_digest(&h);
  return id ? id : 1;
}

/* Removes the entries of other builds from the cache folder `dir` (each build's are in a
 * folder of their own, build-<identity>): a rebuilt executable never reads them, and they
 * would pile up in a developer's build folder. */
static void remove_other_builds(const char *dir, const char *mine) {
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, "build-", 6) != 0 || !strcmp(e->d_name, mine)) continue;
    char sub[4200];
    snprintf(sub, sizeof sub, "%.4000s/%.150s", dir, e->d_name);
    DIR *s = opendir(sub);
    for (struct dirent *f; s && (f = readdir(s)) != NULL;) {
      char file[4400];
      snprintf(file, sizeof file, "%s/%.150s", sub, f->d_name);
      if (f->d_name[0] != '.') unlink(file);
    }
    if (s) closedir(s);
    rmdir(sub);
  }
  closedir(d);
}

static const char *cache_root(void) {
  const char *dir = getenv("VLMC_KERNEL_TEST_REF_CACHE");
  return dir && *dir && strlen(dir) <= 4000 ? dir : NULL;
}

bool vlmc_ref_cache_wanted(void) { return cache_root() != NULL; }

void vlmc_ref_cache_key_init(vlmc_ref_cache_key_t *key, const char *program_text) {
  memset(key, 0, sizeof *key);
  const char *dir = cache_root();
  if (!dir) return;
  uint64_t build = executable_identity();
  if (!build) return;
  key->enabled = true;
  snprintf(key->root, sizeof key->root, "%s", dir);
  snprintf(key->build, sizeof key->build, "build-%016llx", (unsigned long long)build);
  vlmc_xxh64_init(&key->h[0], 0x5EED0001u);
  vlmc_xxh64_init(&key->h[1], 0x5EED0002u);
  add(key, kMagic, sizeof kMagic);
  add(key, program_text, strlen(program_text) + 1);
}

void vlmc_ref_cache_key_add_tensor(vlmc_ref_cache_key_t *key, const vlmc_tensor_t *t) {
  if (!key->enabled) return;
  size_t bytes = 0;
  if (!vlmc_tensor_byte_size(t->dtype, t->rank, t->shape, &bytes)) bytes = 0;
  uint64_t head[2] = {(uint64_t)t->dtype, t->rank};
  add(key, head, sizeof head);
  add(key, t->shape, t->rank * sizeof t->shape[0]);
  add(key, &bytes, sizeof bytes);
  if (bytes) add(key, t->data, bytes);
}

/* The entry's file, made once the key is complete. */
static const char *entry_path(vlmc_ref_cache_key_t *key) {
  if (!key->path[0])
    snprintf(key->path, sizeof key->path, "%s/%s/ref-%016llx%016llx.bin", key->root, key->build,
             (unsigned long long)vlmc_xxh64_digest(&key->h[0]),
             (unsigned long long)vlmc_xxh64_digest(&key->h[1]));
  return key->path;
}

/* Reads `len` bytes at *at of data[0 .. size) into out; false past the end. */
static bool take(const char *data, size_t size, size_t *at, void *out, size_t len) {
  if (len > size - *at) return false;
  memcpy(out, data + *at, len);
  *at += len;
  return true;
}

static bool parse_entry(const char *data, size_t size, vlmc_tensor_t *out, uint32_t count) {
  uint64_t sum = 0;
  if (size < sizeof sum) return false;
  size -= sizeof sum;
  memcpy(&sum, data + size, sizeof sum);
  if (sum != vlmc_xxh64(data, size, 0)) return false;
  size_t at = 0;
  char magic[sizeof kMagic];
  uint32_t n = 0;
  if (!take(data, size, &at, magic, sizeof magic) || memcmp(magic, kMagic, sizeof magic) ||
      !take(data, size, &at, &n, sizeof n) || n != count)
    return false;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t dtype = 0, rank = 0;
    int64_t shape[VLMC_IR_MAX_RANK];
    uint64_t bytes = 0;
    size_t want = 0;
    if (!take(data, size, &at, &dtype, sizeof dtype) || dtype >= VLMC_DTYPE_COUNT ||
        !take(data, size, &at, &rank, sizeof rank) || rank > VLMC_IR_MAX_RANK ||
        !take(data, size, &at, shape, rank * sizeof shape[0]) ||
        !take(data, size, &at, &bytes, sizeof bytes) ||
        !vlmc_tensor_byte_size((vlmc_dtype_t)dtype, rank, shape, &want) || want != bytes ||
        bytes > size - at)
      return false;
    vlmc_status_t st = vlmc_tensor_alloc((vlmc_dtype_t)dtype, rank, shape, &out[i]);
    if (st) {
      vlmc_status_free(st);
      return false;
    }
    take(data, size, &at, out[i].data, bytes);
  }
  return at == size;
}

bool vlmc_ref_cache_load(vlmc_ref_cache_key_t *key, vlmc_tensor_t *out, uint32_t count) {
  if (!key->enabled) return false;
  char *data = NULL;
  size_t size = 0;
  vlmc_status_t st = vlmc_file_read_all(entry_path(key), &data, &size);
  bool ok = !st && parse_entry(data, size, out, count);
  vlmc_status_free(st);
  free(data);
  if (!ok)
    for (uint32_t i = 0; i < count; ++i) vlmc_tensor_release(&out[i]);
  return ok;
}

/* Appends len bytes to buf; false when out of memory. */
static bool put(vlmc_strbuf_t *buf, const void *data, size_t len) {
  vlmc_strbuf_append(buf, (const char *)data, len);
  return !buf->failed;
}

vlmc_status_t vlmc_ref_cache_store(vlmc_ref_cache_key_t *key, const vlmc_tensor_t *results,
                                   uint32_t count) {
  if (!key->enabled) return NULL;
  const char *path = entry_path(key);
  vlmc_strbuf_t entry;
  vlmc_strbuf_init(&entry);
  bool ok = put(&entry, kMagic, sizeof kMagic) && put(&entry, &count, sizeof count);
  for (uint32_t i = 0; ok && i < count; ++i) {
    const vlmc_tensor_t *t = &results[i];
    uint32_t head[2] = {(uint32_t)t->dtype, t->rank};
    size_t bytes = 0;
    uint64_t len = 0;
    ok = vlmc_tensor_byte_size(t->dtype, t->rank, t->shape, &bytes);
    len = bytes;
    ok = ok && put(&entry, head, sizeof head) &&
         put(&entry, t->shape, t->rank * sizeof t->shape[0]) && put(&entry, &len, sizeof len) &&
         put(&entry, t->data, bytes);
  }
  uint64_t sum = ok ? vlmc_xxh64(entry.data, entry.len, 0) : 0;
  ok = ok && put(&entry, &sum, sizeof sum);
  char dir[sizeof key->path];
  snprintf(dir, sizeof dir, "%s/%s", key->root, key->build);
  struct stat sb;
  if (ok && stat(dir, &sb) != 0) remove_other_builds(key->root, key->build); /* its first entry */
  vlmc_status_t st = ok ? vlmc_file_mkdirs(dir)
                        : vlmc_status_make(VLMC_OUT_OF_MEMORY, "kernel-test: out of memory");
  vlmc_output_t out;
  if (!st) st = vlmc_output_open(path, &out);
  if (!st && fwrite(entry.data, entry.len, 1, out.stream) != 1) {
    vlmc_output_discard(&out);
    st = vlmc_status_make(VLMC_IO_ERROR, "kernel-test: could not write %s", path);
  } else if (!st) {
    st = vlmc_output_commit(&out);
  }
  vlmc_strbuf_deinit(&entry);
  return st;
}
