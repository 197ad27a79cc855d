/* Damaged artifacts (issue 5, acceptance 2): the tiny checkpoint compiled in process, then the
 * file damaged in place and run through the runtime as vlmc-run does (session open, then one
 * generated token), one damage at a time:
 *   - a flipped bit in every byte of the header, the section table, and every section of at
 *     most 64 KiB (program, manifest); in the params section, every alignment-padding byte
 *     between tensors plus every 499th byte;
 *   - truncation at every offset of the header, around every section boundary, and at a
 *     stride over the whole file.
 * Every one must be refused with an error that names the file and the header, the section
 * table or the section (checksums: XXH64 per section, the params one before the first forward
 * pass), and none may crash (the ASan build runs this too).
 * Bytes outside every section (alignment padding between sections) carry no checksum; they
 * are flipped too, and must change nothing: the run succeeds with the same token.
 * Last, "resealed" damage: bytes of the manifest and program flipped and every checksum
 * recomputed, which only the parsers can catch: no crash, and an error names the file. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/compile.h"
#include "artifact/artifact.h"
#include "artifact/manifest.h"
#include "runtime/session.h"
#include "support/file.h"
#include "support/hash.h"
#include "tests/unit/test.h"

static const char *kCheckpoint = "tests/fixtures/parity/tiny-vocab512";
static char pristine_path[128], work_path[128];
static unsigned char *pristine;
static size_t file_size;
static int work_fd = -1;
static int64_t pristine_token = -1;

typedef struct {
  const char *name;
  uint64_t begin, end;
} region_t;

typedef struct {
  size_t probes, refused, named, unchanged;
} tally_t;

/* ---- one run, as vlmc-run does it ---- */

/* Opens the work file and generates one token; returns the status (NULL: it ran). */
static vlmc_status_t run_once(int64_t *out_token) {
  static const int64_t ids[6] = {3, 14, 15, 92, 65, 35};
  vlmc_session_options_t so = {.artifact_path = work_path, .threads = 1};
  vlmc_session_t *session = NULL;
  vlmc_status_t s = vlmc_session_open(&so, &session);
  vlmc_generate_options_t g = {.input_ids = ids, .num_input_ids = 6, .max_new_tokens = 1,
                               .sampling = {.top_p = 1}};
  vlmc_generate_result_t r;
  if (!s) s = vlmc_session_generate(session, &g, &r);
  if (!s) {
    *out_token = r.tokens[0];
    vlmc_generate_result_deinit(&r);
  }
  vlmc_session_destroy(session);
  return s;
}

/* The error names the file and where in it: the header, the section table or a section. */
static bool names_the_place(const char *message) {
  return strstr(message, work_path) &&
         (strstr(message, "header") || strstr(message, "section"));
}

static void probe(tally_t *t, bool expect_refusal, const char *what, uint64_t offset) {
  int64_t token = -1;
  vlmc_status_t s = run_once(&token);
  ++t->probes;
  if (s) {
    ++t->refused;
    if (names_the_place(vlmc_status_message(s))) ++t->named;
    else if (expect_refusal)
      TEST_FAIL_("%s at %llu: error does not name the file and the place: %s", what,
                 (unsigned long long)offset, vlmc_status_message(s));
  } else if (token == pristine_token) {
    ++t->unchanged;
  }
  if (expect_refusal && !s)
    TEST_FAIL_("%s at %llu: not detected (the run succeeded)", what, (unsigned long long)offset);
  vlmc_status_free(s);
}

/* ---- damaging the work file ---- */

static void put_byte(uint64_t offset, unsigned char value) {
  if (pwrite(work_fd, &value, 1, (off_t)offset) != 1) TEST_FAIL_("pwrite at %llu failed",
                                                                 (unsigned long long)offset);
}

static void flip_probe(tally_t *t, bool expect_refusal, const char *what, uint64_t offset) {
  put_byte(offset, pristine[offset] ^ (unsigned char)(1u << (offset % 8)));
  probe(t, expect_refusal, what, offset);
  put_byte(offset, pristine[offset]);
}

static void truncate_probe(tally_t *t, uint64_t at) {
  if (ftruncate(work_fd, (off_t)at) != 0) TEST_FAIL_("ftruncate failed");
  probe(t, true, "truncation", at);
  if (pwrite(work_fd, pristine + at, file_size - at, (off_t)at) != (ssize_t)(file_size - at))
    TEST_FAIL_("restoring the tail failed");
}

/* ---- the file's layout ---- */

static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}


static size_t layout(region_t *out, size_t max) {
  vlmc_artifact_t *a = NULL;
  EXPECT_OK(vlmc_artifact_open(pristine_path, &a));
  if (!a) return 0;
  size_t n = 0;
  out[n++] = (region_t){"header", 0, VLMC_ARTIFACT_HEADER_SIZE};
  for (size_t i = 0; i + 2 < max && i < vlmc_artifact_section_count(a); ++i) {
    const vlmc_artifact_section_t *sec = vlmc_artifact_section(a, i);
    out[n++] = (region_t){strdup(sec->name), sec->offset, sec->offset + sec->size};
  }
  uint64_t table = get_u64(pristine + 24), count = vlmc_artifact_section_count(a);
  out[n++] = (region_t){"section table", table, table + count * VLMC_ARTIFACT_ENTRY_SIZE};
  vlmc_artifact_destroy(a);
  return n;
}

static const region_t *region_of(const region_t *regions, size_t n, uint64_t offset) {
  for (size_t i = 0; i < n; ++i)
    if (offset >= regions[i].begin && offset < regions[i].end) return &regions[i];
  return NULL;
}

/* Padding inside the params section: bytes between one tensor's end and the next's start. */
static bool *params_padding(const region_t *params) {
  bool *pad = calloc(params->end - params->begin + 1, 1);
  vlmc_artifact_t *a = NULL;
  vlmc_manifest_t m;
  vlmc_manifest_init(&m);
  vlmc_status_t s = vlmc_artifact_open(pristine_path, &a);
  const vlmc_artifact_section_t *sec = NULL;
  if (!s) s = vlmc_artifact_require(a, "manifest", "the test", &sec);
  if (!s) s = vlmc_manifest_from_json(pristine_path, (const char *)sec->data, sec->size, &m);
  EXPECT_OK(s);
  for (uint64_t i = 0; pad && i < params->end - params->begin; ++i) pad[i] = true;
  for (size_t p = 0; pad && p < m.num_params; ++p)
    for (uint64_t i = m.params[p].offset; i < m.params[p].offset + m.params[p].nbytes; ++i)
      pad[i] = false;
  vlmc_manifest_deinit(&m);
  vlmc_artifact_destroy(a);
  return pad;
}

static void report(const char *what, const tally_t *t) {
  printf("  %-28s %6zu probes, %6zu refused, %6zu named the file and place\n", what, t->probes,
         t->refused, t->named);
}

static void test_flipped_bytes_are_refused_by_name(void) {
  region_t regions[16];
  size_t n = layout(regions, 16);
  tally_t total = {0};
  for (size_t r = 0; r < n; ++r) {
    const region_t *g = &regions[r];
    tally_t t = {0};
    uint64_t size = g->end - g->begin;
    bool is_params = strcmp(g->name, "params") == 0;
    bool *pad = is_params ? params_padding(g) : NULL;
    size_t padding = 0;
    for (uint64_t i = 0; i < size; ++i) {
      bool chosen = size <= 65536 || i % 499 == 0 || i + 1 == size || (pad && pad[i]);
      if (pad && pad[i]) ++padding;
      if (chosen) flip_probe(&t, true, g->name, g->begin + i);
    }
    free(pad);
    char what[64];
    snprintf(what, sizeof what, "flips in %s", g->name);
    report(what, &t);
    if (is_params) printf("  %-28s (%zu of them padding between tensors)\n", "", padding);
    EXPECT_EQ_INT(t.refused, t.probes);
    EXPECT_EQ_INT(t.named, t.probes);
    total.probes += t.probes;
    total.refused += t.refused;
  }
  printf("  %-28s %6zu probes, %6zu refused (%.1f%%)\n", "all sections", total.probes,
         total.refused, 100.0 * (double)total.refused / (double)(total.probes ? total.probes : 1));
  /* Between sections: no checksum, and nothing reads these bytes. */
  tally_t gaps = {0};
  for (uint64_t off = 0; off < file_size; ++off)
    if (!region_of(regions, n, off)) flip_probe(&gaps, false, "gap", off);
  report("flips between sections", &gaps);
  EXPECT_EQ_INT(gaps.unchanged, gaps.probes);
  for (size_t r = 1; r + 1 < n; ++r) free((char *)regions[r].name);
}

static void test_truncations_are_refused_by_name(void) {
  region_t regions[16];
  size_t n = layout(regions, 16);
  tally_t t = {0};
  for (uint64_t at = 0; at <= VLMC_ARTIFACT_HEADER_SIZE; ++at) truncate_probe(&t, at);
  for (size_t r = 1; r < n; ++r) {
    uint64_t marks[4] = {regions[r].begin - 1, regions[r].begin + 1, regions[r].end - 1,
                         regions[r].end + 1};
    for (int k = 0; k < 4; ++k)
      if (marks[k] > VLMC_ARTIFACT_HEADER_SIZE && marks[k] < file_size)
        truncate_probe(&t, marks[k]);
  }
  for (uint64_t at = VLMC_ARTIFACT_HEADER_SIZE + 1; at < file_size; at += 1021)
    truncate_probe(&t, at);
  truncate_probe(&t, file_size - 1);
  report("truncations", &t);
  EXPECT_EQ_INT(t.refused, t.probes);
  EXPECT_EQ_INT(t.named, t.probes);
  for (size_t r = 1; r + 1 < n; ++r) free((char *)regions[r].name);
}

/* ---- resealed damage: checksums recomputed, so only the parsers stand in the way ---- */

static void put_u64_at(uint64_t offset, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = (unsigned char)(v >> (8 * i));
  if (pwrite(work_fd, b, 8, (off_t)offset) != 8) TEST_FAIL_("pwrite failed");
}

/* Rewrites the checksums of section `index`, the table and the header after a change. */
static void reseal(size_t index, const region_t *sec) {
  uint64_t table = get_u64(pristine + 24), count = pristine[32] | (uint64_t)pristine[33] << 8;
  size_t bytes = (size_t)(sec->end - sec->begin);
  unsigned char *data = malloc(bytes ? bytes : 1);
  unsigned char *entries = malloc(count * VLMC_ARTIFACT_ENTRY_SIZE);
  unsigned char header[VLMC_ARTIFACT_HEADER_SIZE];
  if (!data || !entries ||
      pread(work_fd, data, bytes, (off_t)sec->begin) != (ssize_t)bytes)
    TEST_FAIL_("reading the damaged section failed");
  else {
    put_u64_at(table + index * VLMC_ARTIFACT_ENTRY_SIZE + 48, vlmc_xxh64(data, bytes, 0));
    if (pread(work_fd, entries, count * VLMC_ARTIFACT_ENTRY_SIZE, (off_t)table) < 0 ||
        pread(work_fd, header, sizeof header, 0) != (ssize_t)sizeof header)
      TEST_FAIL_("reading the table failed");
    put_u64_at(40, vlmc_xxh64(entries, count * VLMC_ARTIFACT_ENTRY_SIZE, 0));
    if (pread(work_fd, header, sizeof header, 0) == (ssize_t)sizeof header)
      put_u64_at(56, vlmc_xxh64(header, 56, 0));
  }
  free(data);
  free(entries);
}

static void restore_all(void) {
  if (pwrite(work_fd, pristine, file_size, 0) != (ssize_t)file_size) TEST_FAIL_("restore failed");
}

static void test_resealed_damage_never_crashes(void) {
  region_t regions[16];
  size_t n = layout(regions, 16);
  for (size_t r = 1; r + 1 < n; ++r) {
    const region_t *g = &regions[r];
    if (strcmp(g->name, "manifest") != 0 && strcmp(g->name, "program") != 0) continue;
    tally_t t = {0};
    size_t named_file = 0;
    for (uint64_t off = g->begin; off < g->end; off += strcmp(g->name, "manifest") ? 61 : 23) {
      put_byte(off, pristine[off] ^ (unsigned char)(1u << (off % 7)));
      reseal(r - 1, g);
      int64_t token = -1;
      vlmc_status_t s = run_once(&token);
      ++t.probes;
      if (s) {
        ++t.refused;
        if (strstr(vlmc_status_message(s), work_path)) ++named_file;
      }
      vlmc_status_free(s);
      restore_all();
    }
    char what[64];
    snprintf(what, sizeof what, "resealed flips in %s", g->name);
    printf("  %-28s %6zu probes, %6zu refused (%zu naming the file), %zu ran, no crash\n", what,
           t.probes, t.refused, named_file, t.probes - t.refused);
    EXPECT_TRUE(t.probes > 100);
    EXPECT_EQ_INT(named_file, t.refused);
  }
  for (size_t r = 1; r + 1 < n; ++r) free((char *)regions[r].name);
}

static bool setup(void) {
  vlmc_compile_options_t o = {.checkpoint_dir = kCheckpoint, .output_path = pristine_path,
                              .target = "ref", .precision = "auto", .command_line = "test"};
  vlmc_status_t s = vlmc_compile(&o);
  char *data = NULL;
  if (!s) s = vlmc_file_read_all(pristine_path, &data, &file_size);
  if (!s) s = vlmc_file_write_all(work_path, data, file_size);
  if (s) {
    fprintf(stderr, "setup: %s\n", vlmc_status_message(s));
    vlmc_status_free(s);
    free(data);
    return false;
  }
  pristine = (unsigned char *)data;
  work_fd = open(work_path, O_RDWR);
  s = run_once(&pristine_token);
  if (s) fprintf(stderr, "the undamaged artifact does not run: %s\n", vlmc_status_message(s));
  vlmc_status_free(s);
  return work_fd >= 0 && pristine_token >= 0;
}

int main(void) {
  snprintf(pristine_path, sizeof pristine_path, "/tmp/vlmc-corrupt-%d.vlmc", (int)getpid());
  snprintf(work_path, sizeof work_path, "/tmp/vlmc-corrupt-%d-work.vlmc", (int)getpid());
  bool ready = setup();
  if (ready) {
    RUN_TEST(test_flipped_bytes_are_refused_by_name);
    RUN_TEST(test_truncations_are_refused_by_name);
    RUN_TEST(test_resealed_damage_never_crashes);
  }
  if (work_fd >= 0) close(work_fd);
  free(pristine);
  unlink(pristine_path);
  unlink(work_path);
  return ready ? TEST_SUMMARY() : 1;
}
