/* The artifact container: round trip, and damage (every flipped byte, every truncation) is
 * always refused with a named error, never a crash and never silently accepted. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "artifact/artifact.h"
#include "support/file.h"
#include "support/hash.h"
#include "tests/unit/test.h"

static char path[64];

static void write_sample(void) {
  vlmc_artifact_writer_t *w = NULL;
  EXPECT_OK(vlmc_artifact_writer_create(path, &w));
  if (!w) return;
  const char *manifest = "{\"format\":\"vlmc\"}";
  EXPECT_OK(vlmc_artifact_writer_add(w, "manifest", manifest, strlen(manifest), 8, 0));
  float params[100];
  for (int i = 0; i < 100; ++i) params[i] = (float)i * 0.5f;
  EXPECT_OK(vlmc_artifact_writer_begin(w, "params", 64, VLMC_SECTION_LAZY_VERIFY));
  EXPECT_OK(vlmc_artifact_writer_append(w, params, 40 * sizeof(float)));
  EXPECT_EQ_INT(vlmc_artifact_writer_section_offset(w), 160);
  EXPECT_OK(vlmc_artifact_writer_append(w, params + 40, 60 * sizeof(float)));
  EXPECT_OK(vlmc_artifact_writer_end(w));
  EXPECT_OK(vlmc_artifact_writer_add(w, "program", "func", 4, 1, 0));
  EXPECT_OK(vlmc_artifact_writer_finish(w));
}

static void test_round_trip(void) {
  write_sample();
  vlmc_artifact_t *a = NULL;
  EXPECT_OK(vlmc_artifact_open(path, &a));
  if (!a) return;
  EXPECT_EQ_INT(vlmc_artifact_section_count(a), 3);
  const vlmc_artifact_section_t *params = vlmc_artifact_find(a, "params");
  EXPECT_TRUE(params != NULL);
  if (params) {
    EXPECT_EQ_INT(params->size, 400);
    EXPECT_EQ_INT(params->offset % 64, 0);
    const float *p = (const float *)params->data;
    EXPECT_NEAR(p[99], 49.5, 0);
    EXPECT_OK(vlmc_artifact_section_verify(a, params));
  }
  const vlmc_artifact_section_t *missing;
  EXPECT_ERROR(vlmc_artifact_require(a, "kernels.cpu", "the cpu backend", &missing),
               "section 'kernels.cpu' is missing (needed by the cpu backend)");
  vlmc_artifact_destroy(a);
}

/* Opens damaged bytes the way the runtime does: open (eager sections), then verify lazy ones.
 * Returns 1 when the damage was reported with a message naming the file. */
static int damage_detected(const unsigned char *data, size_t size) {
  vlmc_artifact_t *a = NULL;
  vlmc_status_t s = vlmc_artifact_open_memory(data, size, "damaged.vlmc", &a);
  for (size_t i = 0; !s && i < vlmc_artifact_section_count(a); ++i)
    s = vlmc_artifact_section_verify(a, vlmc_artifact_section(a, i));
  vlmc_artifact_destroy(a);
  int named = s && strstr(vlmc_status_message(s), "damaged.vlmc") != NULL;
  vlmc_status_free(s);
  return named;
}

static void test_every_flipped_byte_is_detected(void) {
  write_sample();
  char *data = NULL;
  size_t size = 0;
  EXPECT_OK(vlmc_file_read_all(path, &data, &size));
  if (!data) return;
  size_t undetected = 0, checked = 0;
  for (size_t i = 0; i < size; ++i) {
    unsigned char *copy = malloc(size);
    memcpy(copy, data, size);
    copy[i] ^= 0x5a;
    /* Alignment padding between sections carries no information; every other byte must count. */
    int ok = damage_detected(copy, size);
    free(copy);
    if (!ok) ++undetected;
    ++checked;
  }
  /* The only undetectable flips are in padding bytes; count them exactly from the layout. */
  vlmc_artifact_t *a = NULL;
  EXPECT_OK(vlmc_artifact_open_memory(data, size, "ok.vlmc", &a));
  size_t covered = 64; /* header */
  for (size_t i = 0; a && i < vlmc_artifact_section_count(a); ++i)
    covered += vlmc_artifact_section(a, i)->size;
  covered += 64 * (a ? vlmc_artifact_section_count(a) : 0); /* table */
  vlmc_artifact_destroy(a);
  EXPECT_EQ_INT(undetected, size - covered);
  EXPECT_TRUE(checked == size);
  free(data);
}

static void test_every_truncation_is_detected(void) {
  write_sample();
  char *data = NULL;
  size_t size = 0;
  EXPECT_OK(vlmc_file_read_all(path, &data, &size));
  if (!data) return;
  size_t undetected = 0;
  for (size_t cut = 0; cut < size; ++cut) {
    unsigned char *copy = malloc(cut ? cut : 1);
    memcpy(copy, data, cut);
    if (!damage_detected(copy, cut)) ++undetected;
    free(copy);
  }
  EXPECT_EQ_INT(undetected, 0);
  free(data);
}

static void test_newer_format_is_refused_by_version(void) {
  write_sample();
  char *data = NULL;
  size_t size = 0;
  EXPECT_OK(vlmc_file_read_all(path, &data, &size));
  if (!data) return;
  vlmc_artifact_t *a = NULL;
  /* A file from a future writer that old readers cannot read: min_reader_version 2, with a
   * correct header checksum so that only the version check can refuse it. */
  unsigned char *h = (unsigned char *)data;
  h[12] = 2;
  uint64_t sum = vlmc_xxh64(h, 56, 0);
  for (int i = 0; i < 8; ++i) h[56 + i] = (unsigned char)(sum >> (8 * i));
  EXPECT_ERROR(vlmc_artifact_open_memory(data, size, "x.vlmc", &a),
               "needs a reader of format version 2 or newer");
  data[0] = 'X';
  EXPECT_ERROR(vlmc_artifact_open_memory(data, size, "x.vlmc", &a), "bad magic");
  free(data);
}

/* Header fields without a meaning (format_version 0, flags, reserved) and section flags other
 * than LAZY_VERIFY are refused by name, even with every checksum right. */
static void set_field(unsigned char *h, size_t offset, int bytes, uint64_t value) {
  for (int i = 0; i < bytes; ++i) h[offset + (size_t)i] = (unsigned char)(value >> (8 * i));
}

static void reseal_header(unsigned char *h) { set_field(h, 56, 8, vlmc_xxh64(h, 56, 0)); }

static void test_reserved_fields_are_refused(void) {
  write_sample();
  char *data = NULL;
  size_t size = 0;
  EXPECT_OK(vlmc_file_read_all(path, &data, &size));
  if (!data) return;
  static const struct { size_t offset; int bytes; uint64_t value; const char *needle; } cases[] = {
      {8, 4, 0, "x.vlmc: header: format_version 0 is not a format version"},
      {12, 4, 0, "x.vlmc: header: min_reader_version 0"},
      {36, 4, 1, "x.vlmc: header: flags 0x00000001 set"},
      {48, 8, 1ull << 40, "x.vlmc: header: reserved (bytes 48..55) is 0x0000010000000000"},
  };
  unsigned char *copy = malloc(size);
  for (size_t i = 0; copy && i < sizeof cases / sizeof cases[0]; ++i) {
    memcpy(copy, data, size);
    set_field(copy, cases[i].offset, cases[i].bytes, cases[i].value);
    reseal_header(copy);
    vlmc_artifact_t *a = NULL;
    EXPECT_ERROR(vlmc_artifact_open_memory(copy, size, "x.vlmc", &a), cases[i].needle);
  }
  /* A section flag bit beyond LAZY_VERIFY, with the table's checksum recomputed. */
  if (copy) {
    memcpy(copy, data, size);
    uint64_t table = 0;
    for (int i = 7; i >= 0; --i) table = table << 8 | copy[24 + i];
    uint32_t count = copy[32] | (uint32_t)copy[33] << 8;
    set_field(copy, (size_t)table + 60, 4, 2);
    set_field(copy, 40, 8, vlmc_xxh64(copy + table, (size_t)count * 64, 0));
    reseal_header(copy);
    vlmc_artifact_t *a = NULL;
    EXPECT_ERROR(vlmc_artifact_open_memory(copy, size, "x.vlmc", &a),
                 "flags 0x00000002: only bit 0 (LAZY_VERIFY) is defined");
  }
  free(copy);
  free(data);
}

int main(void) {
  snprintf(path, sizeof path, "/tmp/vlmc-test-artifact-%d.vlmc", (int)getpid());
  RUN_TEST(test_round_trip);
  RUN_TEST(test_every_flipped_byte_is_detected);
  RUN_TEST(test_every_truncation_is_detected);
  RUN_TEST(test_newer_format_is_refused_by_version);
  RUN_TEST(test_reserved_fields_are_refused);
  unlink(path);
  return TEST_SUMMARY();
}
