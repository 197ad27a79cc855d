#include <stdint.h>
#include <stdlib.h>

#include "support/arena.h"
#include "support/checked_math.h"
#include "support/file.h"
#include "support/hash.h"
#include "support/strbuf.h"
#include "tests/unit/test.h"

static void test_status_annotate_prefixes_message(void) {
  vlmc_status_t s = vlmc_status_make(VLMC_PARSE_ERROR, "field %s: expected %d", "depth", 4);
  s = vlmc_status_annotate(s, "%s: ", "config.json");
  EXPECT_STREQ(vlmc_status_message(s), "config.json: field depth: expected 4");
  EXPECT_EQ_INT(vlmc_status_code(s), VLMC_PARSE_ERROR);
  vlmc_status_free(s);
  EXPECT_TRUE(vlmc_status_annotate(NULL, "x") == NULL);
}

static void test_arena_alignment_and_overflow(void) {
  vlmc_arena_t arena;
  vlmc_arena_init(&arena);
  char *a = vlmc_arena_alloc(&arena, 3, 1);
  double *d = VLMC_ARENA_NEW(&arena, double);
  EXPECT_TRUE(a && d);
  EXPECT_EQ_INT((uintptr_t)d % _Alignof(double), 0);
  EXPECT_TRUE(vlmc_arena_alloc_array(&arena, SIZE_MAX / 2, 4, 4) == NULL);
  char *big = vlmc_arena_alloc(&arena, 1 << 20, 16); /* larger than one block */
  EXPECT_TRUE(big != NULL && big[0] == 0 && big[(1 << 20) - 1] == 0);
  EXPECT_STREQ(vlmc_arena_strdup(&arena, "window"), "window");
  vlmc_arena_deinit(&arena);
}

static void test_checked_math(void) {
  size_t out;
  EXPECT_TRUE(vlmc_mul_size(1 << 20, 1 << 10, &out) && out == (size_t)1 << 30);
  EXPECT_TRUE(!vlmc_mul_size(SIZE_MAX, 2, &out));
  EXPECT_TRUE(!vlmc_add_size(SIZE_MAX, 1, &out));
}

static void test_strbuf_printf(void) {
  vlmc_strbuf_t buf;
  vlmc_strbuf_init(&buf);
  EXPECT_STREQ(vlmc_strbuf_cstr(&buf), "");
  for (int i = 0; i < 1000; ++i) vlmc_strbuf_printf(&buf, "%d,", i);
  EXPECT_TRUE(strncmp(vlmc_strbuf_cstr(&buf), "0,1,2,", 6) == 0);
  EXPECT_EQ_INT(buf.len, 3890);
  char *taken = vlmc_strbuf_take(&buf);
  EXPECT_TRUE(taken != NULL && buf.data == NULL);
  free(taken);
}

static void test_file_errors_name_the_path(void) {
  char *data;
  size_t len;
  EXPECT_ERROR(vlmc_file_read_all("/nonexistent/vlmc.vir", &data, &len), "/nonexistent/vlmc.vir");
  vlmc_mapped_file_t mapped;
  EXPECT_ERROR(vlmc_file_map("/nonexistent/x.safetensors", &mapped), "x.safetensors: cannot open");
  EXPECT_ERROR(vlmc_file_map("/tmp", &mapped), "not a regular file");
}

/* Published XXH64 test vectors (seed 0). */
static void test_xxh64_known_values(void) {
  EXPECT_TRUE(vlmc_xxh64("", 0, 0) == 0xEF46DB3751D8E999ULL);
  EXPECT_TRUE(vlmc_xxh64("abc", 3, 0) == 0x44BC2CF5AD770999ULL);
}

static void test_xxh64_streaming_equals_one_shot(void) {
  unsigned char data[1000];
  for (int i = 0; i < 1000; ++i) data[i] = (unsigned char)(i * 7 + 3);
  for (size_t split = 0; split <= 1000; split += 37) {
    vlmc_xxh64_state_t st;
    vlmc_xxh64_init(&st, 42);
    vlmc_xxh64_update(&st, data, split);
    vlmc_xxh64_update(&st, data + split, 1000 - split);
    EXPECT_TRUE(vlmc_xxh64_digest(&st) == vlmc_xxh64(data, 1000, 42));
  }
  unsigned char flipped[1000];
  memcpy(flipped, data, 1000);
  flipped[500] ^= 1;
  EXPECT_TRUE(vlmc_xxh64(flipped, 1000, 0) != vlmc_xxh64(data, 1000, 0));
}

int main(void) {
  RUN_TEST(test_xxh64_known_values);
  RUN_TEST(test_xxh64_streaming_equals_one_shot);
  RUN_TEST(test_status_annotate_prefixes_message);
  RUN_TEST(test_arena_alignment_and_overflow);
  RUN_TEST(test_checked_math);
  RUN_TEST(test_strbuf_printf);
  RUN_TEST(test_file_errors_name_the_path);
  return TEST_SUMMARY();
}
