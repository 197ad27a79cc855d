/* safetensors: every malformed input is refused with a message naming the file and the field,
 * and nothing crashes. Files are written to a scratch folder; the image-in-memory cases go
 * through vlmc_st_archive_open_memory with the label "bad.safetensors". */
#define _POSIX_C_SOURCE 200809L
#include "tests/unit/test_safetensors_util.h"

#include "frontend/safetensors.h"
#include "tests/unit/test.h"

#define ST_FIXTURES "tests/fixtures/safetensors/"

static char scratch[256];

/* Opens a header + `data_len` bytes of data (0, 1, 2, ...) from memory. */
static vlmc_status_t open_header(const char *header, size_t data_len) {
  unsigned char data[256];
  for (size_t i = 0; i < sizeof data; ++i) data[i] = (unsigned char)i;
  size_t size;
  unsigned char *image = make_st_image(header, strlen(header), data, data_len, &size);
  vlmc_st_archive_t *archive = NULL;
  vlmc_status_t status = vlmc_st_archive_open_memory(image, size, "bad.safetensors", &archive);
  vlmc_st_archive_destroy(archive);
  free(image);
  return status;
}

static vlmc_status_t open_bytes(const void *bytes, size_t size) {
  vlmc_st_archive_t *archive = NULL;
  vlmc_status_t status = vlmc_st_archive_open_memory(bytes, size, "bad.safetensors", &archive);
  vlmc_st_archive_destroy(archive);
  return status;
}

#define ENTRY(name, dtype, shape, offsets) \
  "\"" name "\":{\"dtype\":" dtype ",\"shape\":" shape ",\"data_offsets\":" offsets "}"

static void test_truncated_and_lengths(void) {
  EXPECT_ERROR(open_bytes("", 0), "bad.safetensors: file is 0 bytes, too short for the 8-byte");
  EXPECT_ERROR(open_bytes("\x10\0\0", 3), "bad.safetensors: file is 3 bytes");
  const char *header = "{}";
  size_t size;
  unsigned char *image = make_st_image(header, 3, NULL, 0, &size); /* claims one byte too many */
  EXPECT_ERROR(open_bytes(image, size),
               "bad.safetensors: header length 3 runs past the end of the file (10 bytes)");
  free(image);
  image = make_st_image(header, 100000001, NULL, 0, &size);
  EXPECT_ERROR(open_bytes(image, size),
               "bad.safetensors: header length 100000001 exceeds the limit of 100000000 bytes");
  free(image);
  image = make_st_image(header, UINT64_MAX, NULL, 0, &size);
  EXPECT_ERROR(open_bytes(image, size), "header length 18446744073709551615 exceeds the limit");
  free(image);
  /* A file cut inside the data: the offsets now run past the end. */
  EXPECT_ERROR(
      open_header("{" ENTRY("w", "\"F32\"", "[4]", "[0,16]") "}", 12),
      "bad.safetensors: tensor 'w': data_offsets [0, 16] run past the data area (12 bytes)");
  /* A file cut inside the header. */
  const char *cut = "{\"w\":{\"dtype\":\"F3";
  image = make_st_image(cut, strlen(cut), NULL, 0, &size);
  EXPECT_ERROR(open_bytes(image, size), "bad.safetensors: header is not valid JSON (error at byte");
  free(image);
}

static void test_not_json_or_not_object(void) {
  EXPECT_ERROR(open_header("not json", 0), "bad.safetensors: header is not valid JSON");
  EXPECT_ERROR(open_header("[1,2]", 0),
               "bad.safetensors: header is an array, expected a JSON object");
  EXPECT_ERROR(open_header("\"text\"", 0), "header is a string, expected a JSON object");
  EXPECT_ERROR(open_header("{} trailing", 0),
               "bad.safetensors: unexpected text after the JSON header at byte 11");
  EXPECT_ERROR(open_header("{\"w\":[]}", 0),
               "bad.safetensors: tensor 'w': expected an object, got an array");
  EXPECT_OK(open_header("{}        ", 0)); /* space padding is the format's own */
}

static void test_missing_fields(void) {
  EXPECT_ERROR(open_header("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
               "bad.safetensors: tensor 'w': missing \"dtype\"");
  EXPECT_ERROR(open_header("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4),
               "bad.safetensors: tensor 'w': missing \"shape\"");
  EXPECT_ERROR(open_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4),
               "bad.safetensors: tensor 'w': missing \"data_offsets\"");
}

static void test_dtypes(void) {
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"Q4_K\"", "[1]", "[0,1]") "}", 1),
               "bad.safetensors: tensor 'w': unknown dtype 'Q4_K'");
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"f32\"", "[1]", "[0,4]") "}", 4),
               "tensor 'w': unknown dtype 'f32'");
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"F8_E4M3\"", "[1]", "[0,1]") "}", 1),
               "bad.safetensors: tensor 'w': dtype F8_E4M3 is not supported yet");
  EXPECT_ERROR(open_header("{" ENTRY("w", "32", "[1]", "[0,4]") "}", 4),
               "tensor 'w': dtype: expected a string, got a number");
}

static void test_shapes(void) {
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"F32\"", "[-1]", "[0,0]") "}", 0),
               "bad.safetensors: tensor 'w': shape[0] = -1 is not a non-negative integer");
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"F32\"", "[1.5]", "[0,4]") "}", 4),
               "tensor 'w': shape[0] = 1.5 is not a non-negative integer");
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"F32\"", "[2,\"3\"]", "[0,24]") "}", 24),
               "tensor 'w': shape[1]: expected an integer, got a string");
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"F32\"", "{}", "[0,4]") "}", 4),
               "tensor 'w': shape: expected an array, got an object");
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"F32\"", "[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4),
               "bad.safetensors: tensor 'w': shape has rank 9, at most 8 is supported");
  EXPECT_ERROR(
      open_header("{" ENTRY("w", "\"F32\"", "[9007199254740992,9007199254740992]", "[0,4]") "}", 4),
      "bad.safetensors: tensor 'w': shape: element count overflows");
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"F64\"", "[9007199254740992,256]", "[0,4]") "}", 4),
               "bad.safetensors: tensor 'w': byte size overflows");
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"F32\"", "[1e300]", "[0,4]") "}", 4),
               "tensor 'w': shape[0] = 1e+300 is not a non-negative integer");
  /* The contract's own example. */
  EXPECT_ERROR(open_header("{" ENTRY("visual.x", "\"F32\"", "[4,4]", "[0,12]") "}", 12),
               "bad.safetensors: tensor 'visual.x': data_offsets [0, 12] hold 12 bytes, dtype F32 "
               "shape [4,4] needs 64");
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"BF16\"", "[]", "[0,4]") "}", 4),
               "data_offsets [0, 4] hold 4 bytes, dtype BF16 shape [] needs 2");
}

static void test_offsets(void) {
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"U8\"", "[2]", "[4,2]") "}", 8),
               "bad.safetensors: tensor 'w': data_offsets [4, 2]: begin is after end");
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"U8\"", "[2]", "[0,2,4]") "}", 8),
               "tensor 'w': data_offsets: expected [begin, end], got another number of elements");
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"U8\"", "[2]", "\"0-2\"") "}", 8),
               "tensor 'w': data_offsets: expected [begin, end], got a string");
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"U8\"", "[2]", "[-2,0]") "}", 8),
               "tensor 'w': data_offsets: expected two non-negative integers");
  EXPECT_ERROR(open_header("{" ENTRY("w", "\"U8\"", "[2]", "[6,8]") "}", 7),
               "tensor 'w': data_offsets [6, 8] run past the data area (7 bytes)");
  EXPECT_ERROR(open_header("{" ENTRY("a", "\"F32\"", "[2]", "[0,8]") "," ENTRY("b", "\"F32\"",
                                                                               "[2]", "[4,12]") "}",
                           12),
               "bad.safetensors: tensors 'a' [0, 8] and 'b' [4, 12] overlap");
  EXPECT_ERROR(open_header("{" ENTRY("a", "\"F32\"", "[2]", "[0,8]") "," ENTRY("b", "\"F32\"",
                                                                               "[2]", "[0,8]") "}",
                           8),
               "tensors 'a' [0, 8] and 'b' [0, 8] overlap");
  /* Empty tensors own no bytes, so they overlap nothing. */
  EXPECT_OK(open_header(
      "{" ENTRY("a", "\"F32\"", "[2]", "[0,8]") "," ENTRY("e", "\"F32\"", "[0]", "[4,4]") "}", 8));
}

static void test_duplicates_and_metadata(void) {
  EXPECT_ERROR(
      open_header(
          "{" ENTRY("w", "\"U8\"", "[1]", "[0,1]") "," ENTRY("w", "\"U8\"", "[1]", "[1,2]") "}", 2),
      "bad.safetensors: tensor 'w' is given twice");
  EXPECT_ERROR(open_header("{\"__metadata__\":{\"format\":1}}", 0),
               "bad.safetensors: __metadata__.format: expected a string, got a number");
  EXPECT_ERROR(open_header("{\"__metadata__\":[]}", 0),
               "bad.safetensors: __metadata__: expected an object, got an array");
  EXPECT_ERROR(open_header("{\"__metadata__\":{},\"__metadata__\":{}}", 0),
               "bad.safetensors: __metadata__ is given twice");
}

/* The same checks reach files on disk, with the path in the message. */
static void test_file_messages_name_the_path(void) {
  char path[512];
  path_join_buf(path, sizeof path, scratch, "short.safetensors");
  FILE *f = fopen(path, "wb");
  fwrite("abc", 1, 3, f);
  fclose(f);
  vlmc_st_archive_t *archive = NULL;
  EXPECT_ERROR(vlmc_st_archive_open(path, &archive), "short.safetensors: file is 3 bytes");
  EXPECT_TRUE(archive == NULL);
  EXPECT_ERROR(vlmc_st_archive_open("/nonexistent/x.safetensors", &archive),
               "/nonexistent/x.safetensors: cannot open");
  EXPECT_ERROR(vlmc_st_archive_open(scratch, &archive),
               "holds neither model.safetensors nor model.safetensors.index.json");
}

/* ---- sharded ----------------------------------------------------------------------------- */

static const char *shard_header =
    "{\"visual.a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}";

static vlmc_status_t open_index_text(const char *dir, const char *text) {
  write_bytes(dir, "model.safetensors.index.json", text, strlen(text));
  vlmc_st_archive_t *archive = NULL;
  vlmc_status_t status = vlmc_st_archive_open(dir, &archive);
  vlmc_st_archive_destroy(archive);
  return status;
}

static void test_bad_indexes(void) {
  char dir[256];
  scratch_dir_create(dir, sizeof dir);
  write_st_raw(dir, "s1.safetensors", shard_header, 2);
  write_st_raw(dir, "s2.safetensors",
               "{\"visual.a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
               "\"model.b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
               2);
  EXPECT_ERROR(open_index_text(dir, "{\"weight_map\":{\"visual.a\":\"s9.safetensors\"}}"),
               "model.safetensors.index.json names a shard that cannot be read: ");
  EXPECT_ERROR(open_index_text(dir, "{\"weight_map\":{\"visual.a\":\"s9.safetensors\"}}"),
               "s9.safetensors: cannot open");
  EXPECT_ERROR(open_index_text(dir,
                               "{\"weight_map\":{\"visual.a\":\"s1.safetensors\","
                               "\"model.b\":\"s1.safetensors\"}}"),
               "model.safetensors.index.json: weight_map puts 'model.b' in s1.safetensors, which "
               "does not hold it");
  EXPECT_ERROR(open_index_text(dir,
                               "{\"weight_map\":{\"visual.a\":\"s1.safetensors\","
                               "\"model.b\":\"s2.safetensors\"}}"),
               "tensor 'visual.a' is in both");
  EXPECT_ERROR(open_index_text(dir, "{\"weight_map\":{\"visual.a\":\"../s1.safetensors\"}}"),
               "weight_map.visual.a: '../s1.safetensors' is not a file name in the index's folder");
  EXPECT_ERROR(
      open_index_text(dir, "{\"weight_map\":{\"visual.a\":3}}"),
      "model.safetensors.index.json: weight_map.visual.a: expected a file name, got a number");
  EXPECT_ERROR(open_index_text(dir, "{\"metadata\":{}}"),
               "model.safetensors.index.json: missing \"weight_map\"");
  EXPECT_ERROR(open_index_text(dir, "{\"weight_map\":{}}"),
               "weight_map: expected a non-empty object, got an object");
  EXPECT_ERROR(open_index_text(dir, "{\"weight_map\":[]}"),
               "weight_map: expected a non-empty object, got an array");
  EXPECT_ERROR(open_index_text(dir, "[]"), "model.safetensors.index.json: expected a JSON object");
  EXPECT_ERROR(open_index_text(dir, "{\"weight_map\":\n  {\"a\" \"b\"}}"),
               "model.safetensors.index.json:2:8: invalid JSON");
  EXPECT_ERROR(open_index_text(dir, "{\"weight_map\":{\"a\":\"s1\",\"a\":\"s1\"}}"),
               "model.safetensors.index.json: key \"a\" is given twice in one object");
  /* A shard that is itself malformed is named. */
  write_st_raw(dir, "s3.safetensors", "{\"x\":{}}", 0);
  EXPECT_ERROR(open_index_text(dir, "{\"weight_map\":{\"x\":\"s3.safetensors\"}}"),
               "s3.safetensors: tensor 'x': missing \"dtype\"");
  scratch_dir_remove(dir);
}

/* The committed fixtures (also the fuzz seeds). */
static void test_committed_fixtures(void) {
  vlmc_st_archive_t *archive = NULL;
  EXPECT_OK(vlmc_st_archive_open(ST_FIXTURES "tiny_valid.safetensors", &archive));
  if (archive) {
    EXPECT_EQ_INT(vlmc_st_archive_count(archive), 4);
    const vlmc_st_tensor_t *grid = vlmc_st_archive_find(archive, "image_grid_thw");
    float values[3];
    EXPECT_OK(vlmc_st_tensor_to_f32(grid, values, 3));
    EXPECT_NEAR(values[1], 16, 0);
    EXPECT_STREQ(vlmc_st_archive_metadata_find(archive, "format"), "pt");
  }
  vlmc_st_archive_destroy(archive);
  EXPECT_ERROR(vlmc_st_archive_open(ST_FIXTURES "overlap.safetensors", &archive),
               "overlap.safetensors: tensors 'a' [0, 8] and 'b' [4, 12] overlap");
  EXPECT_ERROR(vlmc_st_archive_open(ST_FIXTURES "header_past_eof.safetensors", &archive),
               "header_past_eof.safetensors: header length 4096 runs past the end of the file "
               "(68 bytes)");
  EXPECT_ERROR(vlmc_st_archive_open(ST_FIXTURES "size_mismatch.safetensors", &archive),
               "size_mismatch.safetensors: tensor 'visual.x': data_offsets [0, 12] hold 12 bytes, "
               "dtype F32 shape [4,4] needs 64");
}

int main(void) {
  scratch_dir_create(scratch, sizeof scratch);
  RUN_TEST(test_truncated_and_lengths);
  RUN_TEST(test_not_json_or_not_object);
  RUN_TEST(test_missing_fields);
  RUN_TEST(test_dtypes);
  RUN_TEST(test_shapes);
  RUN_TEST(test_offsets);
  RUN_TEST(test_duplicates_and_metadata);
  RUN_TEST(test_file_messages_name_the_path);
  RUN_TEST(test_bad_indexes);
  RUN_TEST(test_committed_fixtures);
  scratch_dir_remove(scratch);
  return TEST_SUMMARY();
}
