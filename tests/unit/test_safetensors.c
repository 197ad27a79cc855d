/* safetensors: writer round trips, reading single and sharded files, conversions. The
 * malformed-input cases live in test_safetensors_malformed.c. */
#define _POSIX_C_SOURCE 200809L
#include "tests/unit/test_safetensors_util.h"

#include <dirent.h>
#include <math.h>

#include "frontend/safetensors.h"
#include "support/float16.h"
#include "tests/unit/test.h"

static char scratch[256];

static void test_write_then_read(void) {
  const float weights[6] = {1.5f, -2.0f, 0.25f, 3.0f, -0.0f, 1e-3f};
  const int64_t grid[3] = {1, 16, 16};
  const uint16_t bf16[2] = {0x3f80, 0xc000}; /* 1.0, -2.0 */
  const double scalar = 0.5;
  const int64_t shape_w[2] = {2, 3}, shape_g[2] = {1, 3}, shape_b[1] = {2}, shape_e[2] = {0, 4};
  vlmc_st_write_tensor_t tensors[] = {
      {"pixel_values", VLMC_ST_F32, 2, shape_w, weights},
      {"image_grid_thw", VLMC_ST_I64, 2, shape_g, grid},
      {"b.bf16", VLMC_ST_BF16, 1, shape_b, bf16},
      {"a.scalar", VLMC_ST_F64, 0, NULL, &scalar},
      {"empty", VLMC_ST_F32, 2, shape_e, NULL},
  };
  char path[512];
  path_join_buf(path, sizeof path, scratch, "out.safetensors");
  EXPECT_OK(vlmc_st_write_file(path, tensors, 5));

  vlmc_st_archive_t *archive = NULL;
  EXPECT_OK(vlmc_st_archive_open(path, &archive));
  if (!archive) return;
  EXPECT_EQ_INT(vlmc_st_archive_count(archive), 5);
  /* Sorted by name. */
  EXPECT_STREQ(vlmc_st_archive_tensor(archive, 0)->name, "a.scalar");
  EXPECT_STREQ(vlmc_st_archive_tensor(archive, 1)->name, "b.bf16");
  EXPECT_STREQ(vlmc_st_archive_tensor(archive, 2)->name, "empty");
  EXPECT_STREQ(vlmc_st_archive_tensor(archive, 3)->name, "image_grid_thw");
  EXPECT_STREQ(vlmc_st_archive_tensor(archive, 4)->name, "pixel_values");

  const vlmc_st_tensor_t *pv = vlmc_st_archive_find(archive, "pixel_values");
  EXPECT_TRUE(pv != NULL);
  if (pv) {
    EXPECT_EQ_INT(pv->dtype, VLMC_ST_F32);
    EXPECT_EQ_INT(pv->rank, 2);
    EXPECT_EQ_INT(pv->shape[0], 2);
    EXPECT_EQ_INT(pv->shape[1], 3);
    EXPECT_EQ_INT(pv->nbytes, 24);
    EXPECT_TRUE(memcmp(pv->data, weights, sizeof weights) == 0);
    EXPECT_EQ_INT(pv->shard, 0);
  }
  const vlmc_st_tensor_t *g = vlmc_st_archive_find(archive, "image_grid_thw");
  EXPECT_TRUE(g && g->dtype == VLMC_ST_I64 && memcmp(g->data, grid, sizeof grid) == 0);
  const vlmc_st_tensor_t *s = vlmc_st_archive_find(archive, "a.scalar");
  EXPECT_TRUE(s && s->rank == 0 && s->nbytes == 8 && vlmc_st_tensor_numel(s) == 1);
  const vlmc_st_tensor_t *e = vlmc_st_archive_find(archive, "empty");
  EXPECT_TRUE(e && e->nbytes == 0 && vlmc_st_tensor_numel(e) == 0);
  float converted[2];
  const vlmc_st_tensor_t *b = vlmc_st_archive_find(archive, "b.bf16");
  EXPECT_OK(vlmc_st_tensor_to_f32(b, converted, 2));
  EXPECT_NEAR(converted[0], 1.0, 0);
  EXPECT_NEAR(converted[1], -2.0, 0);
  EXPECT_TRUE(vlmc_st_archive_find(archive, "absent") == NULL);
  EXPECT_STREQ(vlmc_st_archive_metadata_find(archive, "format"), "pt");
  EXPECT_EQ_INT(vlmc_st_archive_metadata_count(archive), 1);
  EXPECT_STREQ(vlmc_st_archive_shard_path(archive, 0), path);
  vlmc_st_archive_destroy(archive);
}

/* The layout that Python's safetensors expects: length, space-padded JSON, data 8-aligned, in
 * the order given. */
static void test_writer_layout(void) {
  const float a[2] = {1, 2};
  const uint8_t b[3] = {7, 8, 9};
  const int64_t shape_a[1] = {2}, shape_b[1] = {3};
  vlmc_st_write_tensor_t tensors[] = {
      {"z_first", VLMC_ST_F32, 1, shape_a, a},
      {"a_second", VLMC_ST_U8, 1, shape_b, b},
  };
  char path[512];
  path_join_buf(path, sizeof path, scratch, "layout.safetensors");
  EXPECT_OK(vlmc_st_write_file(path, tensors, 2));
  size_t len;
  char *bytes = read_fixture(path, &len);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | (unsigned char)bytes[i];
  EXPECT_EQ_INT(header_len % 8, 0);
  EXPECT_EQ_INT(len, 8 + header_len + 8 + 3);
  char *header = bytes + 8;
  const char *expected =
      "{\"__metadata__\":{\"format\":\"pt\"},\"z_first\":{\"dtype\":\"F32\",\"shape\":[2],"
      "\"data_offsets\":[0,8]},\"a_second\":{\"dtype\":\"U8\",\"shape\":[3],"
      "\"data_offsets\":[8,11]}}";
  EXPECT_TRUE(strncmp(header, expected, strlen(expected)) == 0);
  for (size_t i = strlen(expected); i < header_len; ++i) EXPECT_TRUE(header[i] == ' ');
  EXPECT_TRUE(memcmp(bytes + 8 + header_len, a, 8) == 0);
  EXPECT_TRUE(memcmp(bytes + 8 + header_len + 8, b, 3) == 0);
  free(bytes);
}

static void test_writer_escapes_names(void) {
  const uint8_t v = 1;
  const int64_t shape[1] = {1};
  vlmc_st_write_tensor_t tensor = {"odd \"name\"\\\n", VLMC_ST_U8, 1, shape, &v};
  char path[512];
  path_join_buf(path, sizeof path, scratch, "escape.safetensors");
  EXPECT_OK(vlmc_st_write_file(path, &tensor, 1));
  vlmc_st_archive_t *archive = NULL;
  EXPECT_OK(vlmc_st_archive_open(path, &archive));
  if (archive) EXPECT_TRUE(vlmc_st_archive_find(archive, "odd \"name\"\\\n") != NULL);
  vlmc_st_archive_destroy(archive);
}

/* Whether `dir` has an entry whose name starts with `prefix` (a writer's temporary file). */
static bool has_entry_starting(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  bool found = false;
  for (struct dirent *e; d && !found && (e = readdir(d));)
    found = strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  if (d) closedir(d);
  return found;
}

static void test_writer_refuses_bad_requests(void) {
  const float v[4] = {0};
  const int64_t good[1] = {4}, negative[1] = {-1}, big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  char path[512];
  path_join_buf(path, sizeof path, scratch, "refused.safetensors");
  vlmc_st_write_tensor_t twice[] = {{"x", VLMC_ST_F32, 1, good, v}, {"x", VLMC_ST_F32, 1, good, v}};
  EXPECT_ERROR(vlmc_st_write_file(path, twice, 2), "tensor 'x' is given twice");
  vlmc_st_write_tensor_t neg = {"n", VLMC_ST_F32, 1, negative, v};
  EXPECT_ERROR(vlmc_st_write_file(path, &neg, 1), "tensor 'n': shape[0] = -1 is invalid");
  vlmc_st_write_tensor_t rank9 = {"r", VLMC_ST_F32, 9, big, v};
  EXPECT_ERROR(vlmc_st_write_file(path, &rank9, 1), "rank 9 is not in 0..8");
  vlmc_st_write_tensor_t no_data = {"d", VLMC_ST_F32, 1, good, NULL};
  EXPECT_ERROR(vlmc_st_write_file(path, &no_data, 1), "tensor 'd': data is NULL");
  vlmc_st_write_tensor_t meta = {"__metadata__", VLMC_ST_F32, 1, good, v};
  EXPECT_ERROR(vlmc_st_write_file(path, &meta, 1), "needs a name other than '__metadata__'");
  /* Nothing half-written is left under the name, nor a temporary file beside it. */
  struct stat st;
  EXPECT_TRUE(stat(path, &st) != 0);
  EXPECT_TRUE(!has_entry_starting(scratch, ".refused.safetensors."));
  char unwritable[600];
  snprintf(unwritable, sizeof unwritable, "%s/no-such-dir/x.safetensors", scratch);
  vlmc_st_write_tensor_t ok = {"x", VLMC_ST_F32, 1, good, v};
  EXPECT_ERROR(vlmc_st_write_file(unwritable, &ok, 1),
               "no-such-dir/x.safetensors: cannot create a temporary file beside it");
}

/* A file written by hand as Python would: metadata values, holes and trailing bytes are fine. */
static void test_read_hand_written(void) {
  write_st_raw(scratch, "hand.safetensors",
               "{\"w\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[4,8]},"
               "\"__metadata__\":{\"format\":\"pt\",\"note\":\"x\"},"
               "\"v\":{\"dtype\":\"BOOL\",\"shape\":[2,1],\"data_offsets\":[0,2]}}   ",
               12);
  char path[512];
  path_join_buf(path, sizeof path, scratch, "hand.safetensors");
  vlmc_st_archive_t *archive = NULL;
  EXPECT_OK(vlmc_st_archive_open(path, &archive));
  if (!archive) return;
  const vlmc_st_tensor_t *w = vlmc_st_archive_find(archive, "w");
  float out[2];
  EXPECT_OK(vlmc_st_tensor_to_f32(w, out, 2));
  /* Bytes 4..7 are 4,5,6,7: little-endian int16 0x0504 and 0x0706. */
  EXPECT_NEAR(out[0], 0x0504, 0);
  EXPECT_NEAR(out[1], 0x0706, 0);
  const vlmc_st_tensor_t *v = vlmc_st_archive_find(archive, "v");
  EXPECT_OK(vlmc_st_tensor_to_f32(v, out, 2));
  EXPECT_NEAR(out[0], 0, 0); /* byte 0 */
  EXPECT_NEAR(out[1], 1, 0); /* byte 1 */
  EXPECT_ERROR(vlmc_st_tensor_to_f32(v, out, 3), "asked for 3 f32 values, it holds 2");
  EXPECT_STREQ(vlmc_st_archive_metadata_find(archive, "note"), "x");
  vlmc_st_archive_destroy(archive);
}

static void test_open_memory(void) {
  const char *header = "{\"t\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]}}";
  const uint16_t half = 0x3c00; /* 1.0 */
  size_t size;
  unsigned char *image = make_st_image(header, strlen(header), &half, 2, &size);
  vlmc_st_archive_t *archive = NULL;
  EXPECT_OK(vlmc_st_archive_open_memory(image, size, "mem", &archive));
  if (archive) {
    const vlmc_st_tensor_t *t = vlmc_st_archive_find(archive, "t");
    float value = 0;
    EXPECT_OK(vlmc_st_tensor_to_f32(t, &value, 1));
    EXPECT_NEAR(value, 1.0, 0);
    EXPECT_TRUE((const unsigned char *)t->data == image + size - 2); /* borrowed, not copied */
  }
  vlmc_st_archive_destroy(archive);
  free(image);
}

static void write_two_shards(const char *dir) {
  write_st_raw(dir, "model-00001-of-00002.safetensors",
               "{\"visual.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"model.b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}",
               12);
  write_st_raw(dir, "model-00002-of-00002.safetensors",
               "{\"lm_head.weight\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}",
               8);
}

static void write_index(const char *dir, const char *weight_map) {
  char text[2048];
  snprintf(text, sizeof text, "{\"metadata\":{\"total_size\":28},\"weight_map\":%s}", weight_map);
  write_bytes(dir, "model.safetensors.index.json", text, strlen(text));
}

static const char *good_weight_map =
    "{\"lm_head.weight\":\"model-00002-of-00002.safetensors\","
    "\"model.b\":\"model-00001-of-00002.safetensors\","
    "\"visual.a\":\"model-00001-of-00002.safetensors\"}";

static void test_sharded(void) {
  char dir[256];
  scratch_dir_create(dir, sizeof dir);
  write_two_shards(dir);
  write_index(dir, good_weight_map);
  vlmc_st_archive_t *archive = NULL;
  EXPECT_OK(vlmc_st_archive_open(dir, &archive)); /* the folder finds the index */
  if (archive) {
    EXPECT_EQ_INT(vlmc_st_archive_count(archive), 3);
    EXPECT_EQ_INT(vlmc_st_archive_shard_count(archive), 2);
    const vlmc_st_tensor_t *head = vlmc_st_archive_find(archive, "lm_head.weight");
    const vlmc_st_tensor_t *b = vlmc_st_archive_find(archive, "model.b");
    EXPECT_TRUE(head && strstr(vlmc_st_archive_shard_path(archive, head->shard), "00002-of"));
    EXPECT_TRUE(b && strstr(vlmc_st_archive_shard_path(archive, b->shard), "00001-of"));
    EXPECT_TRUE(b && ((const unsigned char *)b->data)[0] == 8);
  }
  vlmc_st_archive_destroy(archive);
  /* The index path itself works too. */
  char index[512];
  path_join_buf(index, sizeof index, dir, "model.safetensors.index.json");
  EXPECT_OK(vlmc_st_archive_open(index, &archive));
  vlmc_st_archive_destroy(archive);
  scratch_dir_remove(dir);
}

static void test_directory_single_file_wins(void) {
  char dir[256];
  scratch_dir_create(dir, sizeof dir);
  write_st_raw(dir, "model.safetensors",
               "{\"only\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
  write_index(dir, "{\"x\":\"missing.safetensors\"}"); /* ignored: model.safetensors wins */
  vlmc_st_archive_t *archive = NULL;
  EXPECT_OK(vlmc_st_archive_open(dir, &archive));
  EXPECT_TRUE(archive && vlmc_st_archive_find(archive, "only"));
  vlmc_st_archive_destroy(archive);
  scratch_dir_remove(dir);
}

/* ---- scalar conversions ------------------------------------------------------------------ */

static void test_f16_round_trip_all_patterns(void) {
  int failures = 0;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float value = vlmc_f16_to_f32((uint16_t)bits);
    uint16_t back = vlmc_f32_to_f16(value);
    bool is_nan = (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff);
    if (is_nan ? !isnan(value) || (back & 0x7e00) != 0x7e00 : back != bits) ++failures;
  }
  EXPECT_EQ_INT(failures, 0);
}

static void test_f16_values(void) {
  EXPECT_NEAR(vlmc_f16_to_f32(0x3c00), 1.0, 0);
  EXPECT_NEAR(vlmc_f16_to_f32(0x7bff), 65504.0, 0);
  EXPECT_NEAR(vlmc_f16_to_f32(0x0001), ldexp(1, -24), 0);
  EXPECT_NEAR(vlmc_f16_to_f32(0xc000), -2.0, 0);
  EXPECT_TRUE(isinf(vlmc_f16_to_f32(0x7c00)));
  EXPECT_EQ_INT(vlmc_f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ_INT(vlmc_f32_to_f16(65520.0f), 0x7c00); /* tie rounds to even: infinity */
  EXPECT_EQ_INT(vlmc_f32_to_f16(1e9f), 0x7c00);
  EXPECT_EQ_INT(vlmc_f32_to_f16(-1e9f), 0xfc00);
  EXPECT_EQ_INT(vlmc_f32_to_f16((float)ldexp(1, -25)), 0x0000);        /* tie to even: 0 */
  EXPECT_EQ_INT(vlmc_f32_to_f16((float)ldexp(3, -26)), 0x0001);        /* 0.75 ulp: up */
  EXPECT_EQ_INT(vlmc_f32_to_f16((float)ldexp(3, -25)), 0x0002);        /* 1.5 ulp: even 2 */
  EXPECT_EQ_INT(vlmc_f32_to_f16((float)ldexp(1023.5, -24)), 0x0400);   /* to smallest normal */
  EXPECT_EQ_INT(vlmc_f32_to_f16(1.0f + (float)ldexp(1, -11)), 0x3c00); /* tie: even */
  EXPECT_EQ_INT(vlmc_f32_to_f16(1.0f + (float)ldexp(3, -11)), 0x3c02); /* tie: even */
  EXPECT_EQ_INT(vlmc_f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ_INT(vlmc_f32_to_f16(NAN) & 0x7e00, 0x7e00);
}

static void test_bf16_values(void) {
  EXPECT_NEAR(vlmc_bf16_to_f32(0x3f80), 1.0, 0);
  EXPECT_NEAR(vlmc_bf16_to_f32(0xc040), -3.0, 0);
  float tie_even, tie_odd, above;
  uint32_t bits = 0x3f808000u; /* halfway between 0x3f80 and 0x3f81 */
  memcpy(&tie_even, &bits, 4);
  bits = 0x3f818000u;
  memcpy(&tie_odd, &bits, 4);
  bits = 0x3f808001u;
  memcpy(&above, &bits, 4);
  EXPECT_EQ_INT(vlmc_f32_to_bf16(tie_even), 0x3f80);
  EXPECT_EQ_INT(vlmc_f32_to_bf16(tie_odd), 0x3f82);
  EXPECT_EQ_INT(vlmc_f32_to_bf16(above), 0x3f81);
  EXPECT_EQ_INT(vlmc_f32_to_bf16(3.4e38f), 0x7f80); /* rounds up to infinity */
  EXPECT_TRUE(isnan(vlmc_bf16_to_f32(vlmc_f32_to_bf16(NAN))));
  int failures = 0;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    bool is_nan = (b & 0x7f80) == 0x7f80 && (b & 0x7f);
    if (!is_nan && vlmc_f32_to_bf16(vlmc_bf16_to_f32((uint16_t)b)) != b) ++failures;
  }
  EXPECT_EQ_INT(failures, 0);
}

static void test_every_dtype_to_f32(void) {
  const struct {
    vlmc_st_dtype_t dtype;
    const char *name;
    size_t size;
  } table[] = {
      {VLMC_ST_F32, "F32", 4},   {VLMC_ST_F16, "F16", 2}, {VLMC_ST_BF16, "BF16", 2},
      {VLMC_ST_F64, "F64", 8},   {VLMC_ST_I64, "I64", 8}, {VLMC_ST_I32, "I32", 4},
      {VLMC_ST_I16, "I16", 2},   {VLMC_ST_I8, "I8", 1},   {VLMC_ST_U8, "U8", 1},
      {VLMC_ST_BOOL, "BOOL", 1}, {VLMC_ST_U32, "U32", 4},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
    EXPECT_STREQ(vlmc_st_dtype_name(table[i].dtype), table[i].name);
    EXPECT_EQ_INT(vlmc_st_dtype_size(table[i].dtype), table[i].size);
    vlmc_st_dtype_t parsed;
    EXPECT_TRUE(vlmc_st_dtype_from_name(table[i].name, &parsed) && parsed == table[i].dtype);
  }
  vlmc_st_dtype_t parsed;
  EXPECT_TRUE(!vlmc_st_dtype_from_name("bf16", &parsed)); /* names are case-sensitive */
  uint64_t nbytes;
  EXPECT_TRUE(vlmc_st_dtype_nbytes(VLMC_ST_BF16, 10, &nbytes) && nbytes == 20);
  EXPECT_TRUE(!vlmc_st_dtype_nbytes(VLMC_ST_F64, UINT64_MAX / 4, &nbytes));

  const double f64[2] = {-1.5, 2.0};
  const int64_t i64[2] = {-3, 4};
  const int32_t i32[2] = {-5, 6};
  const int8_t i8[2] = {-7, 8};
  const int64_t shape[1] = {2};
  vlmc_st_write_tensor_t tensors[] = {
      {"f64", VLMC_ST_F64, 1, shape, f64},
      {"i64", VLMC_ST_I64, 1, shape, i64},
      {"i32", VLMC_ST_I32, 1, shape, i32},
      {"i8", VLMC_ST_I8, 1, shape, i8},
  };
  char path[512];
  path_join_buf(path, sizeof path, scratch, "dtypes.safetensors");
  EXPECT_OK(vlmc_st_write_file(path, tensors, 4));
  vlmc_st_archive_t *archive = NULL;
  EXPECT_OK(vlmc_st_archive_open(path, &archive));
  if (!archive) return;
  const char *names[4] = {"f64", "i64", "i32", "i8"};
  const float expected[4][2] = {{-1.5f, 2}, {-3, 4}, {-5, 6}, {-7, 8}};
  for (int i = 0; i < 4; ++i) {
    float out[2] = {0, 0};
    EXPECT_OK(vlmc_st_tensor_to_f32(vlmc_st_archive_find(archive, names[i]), out, 2));
    EXPECT_NEAR(out[0], expected[i][0], 0);
    EXPECT_NEAR(out[1], expected[i][1], 0);
  }
  vlmc_st_archive_destroy(archive);
}

/* The one safetensors <-> IR dtype mapping: every dtype both sides have maps both ways and
 * back to itself; I16 (no IR dtype) and the IR's block-quantized dtypes (no safetensors
 * name) are refused instead of mapped to something else. */
static void test_ir_dtype_mapping(void) {
  const struct {
    vlmc_st_dtype_t st;
    vlmc_dtype_t ir;
  } same[] = {
      {VLMC_ST_F32, VLMC_DTYPE_F32}, {VLMC_ST_F16, VLMC_DTYPE_F16}, {VLMC_ST_BF16, VLMC_DTYPE_BF16},
      {VLMC_ST_F64, VLMC_DTYPE_F64}, {VLMC_ST_I64, VLMC_DTYPE_I64}, {VLMC_ST_I32, VLMC_DTYPE_I32},
      {VLMC_ST_I8, VLMC_DTYPE_I8},   {VLMC_ST_U8, VLMC_DTYPE_U8},   {VLMC_ST_BOOL, VLMC_DTYPE_BOOL},
      {VLMC_ST_U32, VLMC_DTYPE_U32},
  };
  for (size_t i = 0; i < sizeof same / sizeof same[0]; ++i) {
    vlmc_dtype_t ir = VLMC_DTYPE_COUNT;
    vlmc_st_dtype_t st = VLMC_ST_BOOL;
    EXPECT_TRUE(vlmc_st_dtype_to_ir(same[i].st, &ir) && ir == same[i].ir);
    EXPECT_TRUE(vlmc_st_dtype_from_ir(same[i].ir, &st) && st == same[i].st);
  }
  vlmc_dtype_t ir;
  vlmc_st_dtype_t st;
  EXPECT_TRUE(!vlmc_st_dtype_to_ir(VLMC_ST_I16, &ir));
  EXPECT_TRUE(!vlmc_st_dtype_from_ir(VLMC_DTYPE_Q4_0, &st));
  EXPECT_TRUE(!vlmc_st_dtype_from_ir(VLMC_DTYPE_Q8_0, &st));
}

int main(void) {
  scratch_dir_create(scratch, sizeof scratch);
  RUN_TEST(test_write_then_read);
  RUN_TEST(test_writer_layout);
  RUN_TEST(test_writer_escapes_names);
  RUN_TEST(test_writer_refuses_bad_requests);
  RUN_TEST(test_read_hand_written);
  RUN_TEST(test_open_memory);
  RUN_TEST(test_sharded);
  RUN_TEST(test_directory_single_file_wins);
  RUN_TEST(test_f16_round_trip_all_patterns);
  RUN_TEST(test_f16_values);
  RUN_TEST(test_bf16_values);
  RUN_TEST(test_every_dtype_to_f32);
  RUN_TEST(test_ir_dtype_mapping);
  scratch_dir_remove(scratch);
  return TEST_SUMMARY();
}
