/* The kernel-test reference cache (tools/ref_cache.h): results filed under a key read back
 * exactly; another program, input or executable is another key; an entry that is damaged in
 * any way reads as absent (the caller recomputes), never as wrong results or a crash. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/file.h"
#include "tests/unit/test.h"
#include "tools/ref_cache.h"

static char dir[64];

static vlmc_tensor_t tensor(float first, int64_t rows) {
  vlmc_tensor_t t;
  memset(&t, 0, sizeof t);
  vlmc_status_t st = vlmc_tensor_alloc(VLMC_DTYPE_F32, 2, (int64_t[]){rows, 3}, &t);
  EXPECT_OK(st);
  for (int64_t i = 0; !st && i < rows * 3; ++i) vlmc_tensor_f32(&t)[i] = first + (float)i;
  return t;
}

static void key_for(vlmc_ref_cache_key_t *key, const char *program, const vlmc_tensor_t *input) {
  vlmc_ref_cache_key_init(key, program);
  vlmc_ref_cache_key_add_tensor(key, input);
}

static void test_round_trip(void) {
  vlmc_tensor_t in = tensor(1, 2), res[2] = {tensor(5, 4), tensor(-2, 1)}, back[2];
  memset(back, 0, sizeof back);
  vlmc_ref_cache_key_t key;
  key_for(&key, "func @k", &in);
  EXPECT_TRUE(key.enabled);
  EXPECT_TRUE(!vlmc_ref_cache_load(&key, back, 2)); /* nothing filed yet */
  EXPECT_OK(vlmc_ref_cache_store(&key, res, 2));
  vlmc_ref_cache_key_t again;
  key_for(&again, "func @k", &in);
  EXPECT_TRUE(vlmc_ref_cache_load(&again, back, 2));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ_INT(back[i].rank, 2);
    EXPECT_EQ_INT(back[i].shape[0], res[i].shape[0]);
    EXPECT_TRUE(vlmc_tensor_max_abs_diff(&back[i], &res[i]) == 0);
    vlmc_tensor_release(&back[i]);
  }
  /* another program, another input, another result count: no entry */
  vlmc_ref_cache_key_t other;
  key_for(&other, "func @k2", &in);
  EXPECT_TRUE(!vlmc_ref_cache_load(&other, back, 2));
  vlmc_tensor_t in2 = tensor(1.5f, 2);
  key_for(&other, "func @k", &in2);
  EXPECT_TRUE(!vlmc_ref_cache_load(&other, back, 2));
  key_for(&other, "func @k", &in);
  EXPECT_TRUE(!vlmc_ref_cache_load(&other, back, 1));
  vlmc_tensor_release(&in);
  vlmc_tensor_release(&in2);
  for (int i = 0; i < 2; ++i) vlmc_tensor_release(&res[i]);
}

/* The entry's bytes cut short, lengthened or changed in a header field, the data or the
 * checksum: each reads as absent. */
static void test_damaged_entries_read_as_absent(void) {
  vlmc_tensor_t in = tensor(7, 1), res = tensor(3, 2), back;
  memset(&back, 0, sizeof back);
  vlmc_ref_cache_key_t key;
  key_for(&key, "func @damaged", &in);
  EXPECT_OK(vlmc_ref_cache_store(&key, &res, 1));
  char *good = NULL;
  size_t len = 0;
  EXPECT_OK(vlmc_file_read_all(key.path, &good, &len));
  /* magic | count u32 | dtype u32 | rank u32 | shape 2 x i64 | bytes u64 | data | xxh64 */
  const size_t fields[] = {0, 8, 12, 16, 20, 28, 36, 44, len - 9, len - 1};
  for (size_t f = 0; good && f < sizeof fields / sizeof fields[0]; ++f) {
    char *bad = malloc(len);
    memcpy(bad, good, len);
    bad[fields[f]] ^= 0x41;
    EXPECT_OK(vlmc_file_write_all(key.path, bad, len));
    vlmc_ref_cache_key_t k;
    key_for(&k, "func @damaged", &in);
    EXPECT_TRUE(!vlmc_ref_cache_load(&k, &back, 1));
    free(bad);
  }
  for (size_t cut = 0; good && cut < len; cut += 5) {
    EXPECT_OK(vlmc_file_write_all(key.path, good, cut));
    vlmc_ref_cache_key_t k;
    key_for(&k, "func @damaged", &in);
    EXPECT_TRUE(!vlmc_ref_cache_load(&k, &back, 1));
  }
  if (good) {
    char *longer = malloc(len + 1);
    memcpy(longer, good, len);
    longer[len] = 0;
    EXPECT_OK(vlmc_file_write_all(key.path, longer, len + 1));
    vlmc_ref_cache_key_t k;
    key_for(&k, "func @damaged", &in);
    EXPECT_TRUE(!vlmc_ref_cache_load(&k, &back, 1));
    free(longer);
    /* and the intact entry still reads */
    EXPECT_OK(vlmc_file_write_all(key.path, good, len));
    key_for(&k, "func @damaged", &in);
    EXPECT_TRUE(vlmc_ref_cache_load(&k, &back, 1));
    vlmc_tensor_release(&back);
  }
  free(good);
  vlmc_tensor_release(&in);
  vlmc_tensor_release(&res);
}

static void test_off_without_the_variable(void) {
  unsetenv("VLMC_KERNEL_TEST_REF_CACHE");
  vlmc_tensor_t in = tensor(1, 2), back;
  vlmc_ref_cache_key_t key;
  key_for(&key, "func @k", &in);
  EXPECT_TRUE(!key.enabled);
  EXPECT_TRUE(!vlmc_ref_cache_load(&key, &back, 1));
  EXPECT_OK(vlmc_ref_cache_store(&key, &in, 1)); /* a no-op */
  vlmc_tensor_release(&in);
}

int main(void) {
  /* a folder named ref-...: entry names are made beside it, not found in it */
  snprintf(dir, sizeof dir, "/tmp/vlmc-test-%ld/ref-cache", (long)getpid());
  setenv("VLMC_KERNEL_TEST_REF_CACHE", dir, 1);
  RUN_TEST(test_round_trip);
  RUN_TEST(test_damaged_entries_read_as_absent);
  RUN_TEST(test_off_without_the_variable);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '/tmp/vlmc-test-%ld'", (long)getpid());
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return TEST_SUMMARY();
}
