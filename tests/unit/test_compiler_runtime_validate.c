/* The validation at open (runtime/validate.h, issue 12 "an artifact is data, not a program"):
 * the tiny checkpoint compiled for ref and cpu, then one lie planted at a time in a copy,
 * every checksum recomputed ("resealed") so that only the validation stands in the way, and
 * the copy opened both as vlmc-run does (vlmc_session_open) and as `vlmc inspect --verify`
 * does (the vlmc binary, $VLMC_BIN, set by tests/validate.cmake). Each must refuse it with an
 * error that names the lie. Classes: a lying nbytes, a parameter outside the params section,
 * overlapping parameters, an edited work count, a swapped kernel, a format 1 kernel table,
 * header format_version 0 and reserved fields set, and a missing program or params section.
 * And one that must open: 1,000 manifest aliases of one tensor, held as one resident copy. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "artifact/artifact.h"
#include "artifact/kernel_table.h"
#include "artifact/manifest.h"
#include "codegen/compile.h"
#include "runtime/params.h"
#include "runtime/session.h"
#include "runtime/validate.h"
#include "support/file.h"
#include "support/hash.h"
#include "support/strbuf.h"
#include "tests/unit/test.h"

static const char *kCheckpoint = "tests/fixtures/parity/tiny-vocab512";
static char pristine_path[128], planted_path[128];

/* ---- resealing: a copy of the pristine artifact with sections replaced or left out ---- */

typedef struct {
  const char *name; /* the section to replace or drop */
  const void *data; /* NULL: drop it */
  size_t size;
} replacement_t;

/* Writes planted_path: every section of the pristine artifact, `r` applied. The writer
 * computes every checksum, so the copy is as sealed as a compiler's output. */
static void reseal(const replacement_t *r) {
  vlmc_artifact_t *a = NULL;
  vlmc_artifact_writer_t *w = NULL;
  vlmc_status_t st = vlmc_artifact_open(pristine_path, &a);
  if (!st) st = vlmc_artifact_writer_create(planted_path, &w);
  for (size_t i = 0; !st && i < vlmc_artifact_section_count(a); ++i) {
    const vlmc_artifact_section_t *s = vlmc_artifact_section(a, i);
    bool replaced = r && !strcmp(s->name, r->name);
    if (replaced && !r->data) continue;
    st = vlmc_artifact_writer_add(w, s->name, replaced ? r->data : s->data,
                                  replaced ? r->size : (size_t)s->size, s->alignment, s->flags);
  }
  if (w) {
    if (st) vlmc_artifact_writer_abort(w);
    else st = vlmc_artifact_writer_finish(w);
  }
  vlmc_artifact_destroy(a);
  if (st) TEST_FAIL_("reseal: %s", vlmc_status_message(st));
  vlmc_status_free(st);
}

/* The pristine manifest or kernel table, parsed. */
static void read_manifest(vlmc_manifest_t *m) {
  vlmc_artifact_t *a = NULL;
  EXPECT_OK(vlmc_artifact_open(pristine_path, &a));
  const vlmc_artifact_section_t *s = a ? vlmc_artifact_find(a, "manifest") : NULL;
  vlmc_manifest_init(m);
  if (s) EXPECT_OK(vlmc_manifest_from_json("m", (const char *)s->data, (size_t)s->size, m));
  vlmc_artifact_destroy(a);
}

static void read_table(vlmc_kernel_table_t *t) {
  vlmc_artifact_t *a = NULL;
  EXPECT_OK(vlmc_artifact_open(pristine_path, &a));
  const vlmc_artifact_section_t *s = a ? vlmc_artifact_find(a, "kernels.cpu.json") : NULL;
  memset(t, 0, sizeof *t);
  if (s) EXPECT_OK(vlmc_kernel_table_parse("m", "cpu", (const char *)s->data, (size_t)s->size, t));
  vlmc_artifact_destroy(a);
  EXPECT_TRUE(t->num_dispatches > 1);
}

static void reseal_manifest(const vlmc_manifest_t *m) {
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  EXPECT_OK(vlmc_manifest_to_json(m, &text));
  replacement_t r = {"manifest", text.data, text.len};
  reseal(&r);
  vlmc_strbuf_deinit(&text);
}

static void reseal_table(const vlmc_kernel_table_t *t) {
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  EXPECT_OK(vlmc_kernel_table_to_json(t, &text));
  replacement_t r = {"kernels.cpu.json", text.data, text.len};
  reseal(&r);
  vlmc_strbuf_deinit(&text);
}

/* A header field of the planted copy set to `value` (4 or 8 bytes at `offset`), the header
 * checksum recomputed. */
static void plant_header_field(uint64_t offset, int bytes, uint64_t value) {
  reseal(NULL);
  char *data = NULL;
  size_t size = 0;
  EXPECT_OK(vlmc_file_read_all(planted_path, &data, &size));
  if (!data) return;
  unsigned char *h = (unsigned char *)data;
  for (int i = 0; i < bytes; ++i) h[offset + (uint64_t)i] = (unsigned char)(value >> (8 * i));
  uint64_t sum = vlmc_xxh64(h, 56, 0);
  for (int i = 0; i < 8; ++i) h[56 + i] = (unsigned char)(sum >> (8 * i));
  EXPECT_OK(vlmc_file_write_all(planted_path, data, size));
  free(data);
}

/* ---- the two openers ---- */

static vlmc_status_t open_session(const char *path) {
  vlmc_session_options_t so = {.artifact_path = path, .threads = 1};
  vlmc_session_t *session = NULL;
  vlmc_status_t st = vlmc_session_open(&so, &session);
  vlmc_session_destroy(session);
  return st;
}

/* `vlmc inspect --verify PATH`: its exit status and what it wrote to stderr. */
static int run_inspect(const char *path, char *err, size_t err_size) {
  const char *vlmc = getenv("VLMC_BIN");
  err[0] = '\0';
  if (!vlmc) {
    TEST_FAIL_("VLMC_BIN is not set (tests/validate.cmake sets it to the vlmc binary)");
    return -1;
  }
  char errfile[160], command[1024];
  snprintf(errfile, sizeof errfile, "%s.stderr", planted_path);
  snprintf(command, sizeof command, "'%s' inspect --verify '%s' >/dev/null 2>'%s'", vlmc, path,
           errfile);
  int rc = system(command);
  FILE *f = fopen(errfile, "rb");
  if (f) {
    size_t n = fread(err, 1, err_size - 1, f);
    err[n] = '\0';
    fclose(f);
  }
  unlink(errfile);
  return rc;
}

/* Both refuse the planted copy, naming the artifact and `needle`. */
static void expect_refused(const char *what, const char *needle) {
  vlmc_status_t st = open_session(planted_path);
  const char *msg = st ? vlmc_status_message(st) : "(opened)";
  if (!st || !strstr(msg, needle) || !strstr(msg, planted_path))
    TEST_FAIL_("%s: vlmc_session_open: got \"%s\", expected a refusal naming '%s'", what, msg,
               needle);
  else
    printf("  %-32s refused: %s\n", what, msg);
  vlmc_status_free(st);
  char err[4096];
  int rc = run_inspect(planted_path, err, sizeof err);
  if (rc == 0 || !strstr(err, needle))
    TEST_FAIL_("%s: vlmc inspect --verify: exit %d, stderr \"%s\", expected a refusal naming "
               "'%s'", what, rc, err, needle);
}

/* ---- the classes ---- */

static size_t largest_param(const vlmc_manifest_t *m) {
  size_t best = 0;
  for (size_t i = 1; i < m->num_params; ++i)
    if (m->params[i].nbytes > m->params[best].nbytes) best = i;
  return best;
}

static size_t smallest_other_param(const vlmc_manifest_t *m, size_t not_this) {
  size_t best = not_this == 0 ? 1 : 0;
  for (size_t i = 0; i < m->num_params; ++i)
    if (i != not_this && m->params[i].nbytes && m->params[i].nbytes < m->params[best].nbytes)
      best = i;
  return best;
}

static void test_pristine_artifact_validates(void) {
  EXPECT_OK(open_session(pristine_path));
  char err[4096];
  EXPECT_EQ_INT(run_inspect(pristine_path, err, sizeof err), 0);
}

/* A 2-byte entry for a large tensor: the runtime would copy 2 bytes and a kernel read the
 * whole tensor past them. */
static void test_lying_nbytes(void) {
  vlmc_manifest_t m;
  read_manifest(&m);
  size_t i = largest_param(&m);
  m.params[i].nbytes = 2;
  reseal_manifest(&m);
  char needle[256];
  snprintf(needle, sizeof needle, "'%s': nbytes 2, but", m.params[i].name);
  expect_refused("lying nbytes", needle);
  vlmc_manifest_deinit(&m);
}

static void test_param_outside_the_section(void) {
  vlmc_manifest_t m;
  read_manifest(&m);
  m.params[0].offset = (uint64_t)1 << 40;
  reseal_manifest(&m);
  expect_refused("param offset outside the section", "lie outside the params section");
  vlmc_manifest_deinit(&m);
}

static void test_overlapping_params(void) {
  vlmc_manifest_t m;
  read_manifest(&m);
  size_t big = largest_param(&m), small = smallest_other_param(&m, big);
  EXPECT_TRUE(m.params[small].nbytes + 64 < m.params[big].nbytes);
  m.params[small].offset = m.params[big].offset + 64;
  reseal_manifest(&m);
  expect_refused("overlapping params", "overlap (only the same bytes may be shared)");
  vlmc_manifest_deinit(&m);
}

/* A name listed twice, an alias whose checksum differs, a dtype the program does not read. */
static void test_manifest_disagreements(void) {
  vlmc_manifest_t m;
  read_manifest(&m);
  vlmc_manifest_param_t copy = m.params[0];
  EXPECT_OK(vlmc_manifest_add_param(&m, &copy));
  reseal_manifest(&m);
  char needle[256];
  snprintf(needle, sizeof needle, "parameter '%s' is listed twice", m.params[0].name);
  expect_refused("duplicate name", needle);
  vlmc_manifest_deinit(&m);

  read_manifest(&m);
  copy = m.params[0];
  copy.name = "alias.with.another.checksum";
  copy.checksum ^= 1;
  EXPECT_OK(vlmc_manifest_add_param(&m, &copy));
  reseal_manifest(&m);
  expect_refused("alias with another checksum", "with different checksums");
  vlmc_manifest_deinit(&m);

  read_manifest(&m);
  size_t big = largest_param(&m);
  vlmc_dtype_t was = m.params[big].dtype;
  m.params[big].dtype = was == VLMC_DTYPE_F32 ? VLMC_DTYPE_I32 : VLMC_DTYPE_F16; /* same size */
  EXPECT_TRUE(was == VLMC_DTYPE_F32 || was == VLMC_DTYPE_BF16);
  reseal_manifest(&m);
  snprintf(needle, sizeof needle, "parameter '%s' is %s[", m.params[big].name,
           vlmc_dtype_info(m.params[big].dtype)->name);
  expect_refused("dtype the program does not read", needle);
  expect_refused("dtype the program does not read", "reads it as");
  vlmc_manifest_deinit(&m);
}

/* 1,000 more names for the largest tensor: it opens, and the weights stay one copy. */
static void test_alias_heavy_manifest_shares_one_copy(void) {
  vlmc_manifest_t m;
  read_manifest(&m);
  size_t big = largest_param(&m);
  vlmc_manifest_param_t alias = m.params[big];
  char name[64];
  for (int k = 0; k < 1000; ++k) {
    snprintf(name, sizeof name, "alias.%d", k);
    alias.name = name;
    EXPECT_OK(vlmc_manifest_add_param(&m, &alias));
  }
  reseal_manifest(&m);
  EXPECT_OK(open_session(planted_path));
  char err[4096];
  EXPECT_EQ_INT(run_inspect(planted_path, err, sizeof err), 0);
  /* Resident, as the cpu backend opens them: the aliases add no byte. */
  size_t resident[2] = {0, 0};
  const char *paths[2] = {pristine_path, planted_path};
  for (int f = 0; f < 2; ++f) {
    vlmc_artifact_t *a = NULL;
    vlmc_manifest_t vm;
    vlmc_module_t *module = NULL;
    vlmc_params_t *params = NULL;
    EXPECT_OK(vlmc_artifact_open(paths[f], &a));
    if (!a) continue;
    EXPECT_OK(vlmc_artifact_validate(a, &vm, &module));
    EXPECT_OK(vlmc_params_open(a, &vm, NULL, &params));
    if (params) {
      vlmc_params_set_resident(params, true);
      EXPECT_OK(vlmc_params_verify_all_threads(params, 2));
      resident[f] = vlmc_params_resident_bytes(params);
      vlmc_param_view_t view;
      EXPECT_OK(vlmc_params_get(params, f ? "alias.999" : m.params[big].name, &view));
      EXPECT_TRUE(view.nbytes == m.params[big].nbytes);
    }
    vlmc_params_destroy(params);
    vlmc_module_destroy(module);
    vlmc_manifest_deinit(&vm);
    vlmc_artifact_destroy(a);
  }
  EXPECT_TRUE(resident[0] > 0);
  EXPECT_EQ_INT(resident[1], resident[0]);
  vlmc_manifest_deinit(&m);
}

static void test_edited_work_count(void) {
  vlmc_kernel_table_t t;
  read_table(&t);
  if (t.num_dispatches < 2) {
    vlmc_kernel_table_deinit(&t);
    return;
  }
  vlmc_kernel_table_work_t *w = &t.dispatches[0].work;
  if (w->sym) w->num *= 32;
  else w->off *= 32;
  reseal_table(&t);
  char needle[128];
  snprintf(needle, sizeof needle, "@%s dispatch %u: work ", t.dispatches[0].func,
           t.dispatches[0].dispatch);
  expect_refused("edited work count", needle);
  expect_refused("edited work count", "the region's output implies");
  vlmc_kernel_table_deinit(&t);
}

/* A dispatch pointing at another region's kernel with as many inputs. */
static void test_swapped_kernel(void) {
  vlmc_kernel_table_t t;
  read_table(&t);
  if (t.num_dispatches < 2) {
    vlmc_kernel_table_deinit(&t);
    return;
  }
  size_t from = 0, to = 0;
  bool found = false;
  for (size_t i = 0; !found && i < t.num_dispatches; ++i)
    for (size_t j = 0; !found && j < t.num_dispatches; ++j) {
      const vlmc_kernel_table_kernel_t *a = &t.kernels[t.dispatches[i].kernel];
      const vlmc_kernel_table_kernel_t *b = &t.kernels[t.dispatches[j].kernel];
      if (a != b && a->num_inputs == b->num_inputs && a->signature != b->signature) {
        from = i;
        to = j;
        found = true;
      }
    }
  EXPECT_TRUE(found);
  t.dispatches[from].kernel = t.dispatches[to].kernel;
  reseal_table(&t);
  char needle[128];
  snprintf(needle, sizeof needle, "@%s dispatch %u has signature", t.dispatches[from].func,
           t.dispatches[from].dispatch);
  expect_refused("swapped kernel", needle);
  vlmc_kernel_table_deinit(&t);
}

static void test_format_1_kernel_table(void) {
  vlmc_kernel_table_t t;
  read_table(&t);
  if (t.num_dispatches < 2) {
    vlmc_kernel_table_deinit(&t);
    return;
  }
  t.format = 1;
  reseal_table(&t);
  expect_refused("format 1 kernel table", "kernel table format 1; this runtime reads format 2 "
                 "only: recompile");
  vlmc_kernel_table_deinit(&t);
}

static void test_header_fields(void) {
  plant_header_field(8, 4, 0);
  expect_refused("format_version 0", "header: format_version 0");
  plant_header_field(48, 8, 1);
  expect_refused("reserved field set", "header: reserved (bytes 48..55)");
  plant_header_field(36, 4, 4);
  expect_refused("header flags set", "header: flags 0x00000004");
}

static void test_missing_sections(void) {
  static const struct { const char *section, *needle; } cases[] = {
      {"program", "section 'program' is missing"},
      {"params", "section 'params' is missing"},
      {"manifest", "section 'manifest' is missing"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    replacement_t r = {cases[i].section, NULL, 0};
    reseal(&r);
    expect_refused(cases[i].section, cases[i].needle);
  }
}

static bool setup(void) {
  vlmc_compile_options_t o = {.checkpoint_dir = kCheckpoint, .output_path = pristine_path,
                              .target = "ref,cpu", .precision = "auto", .command_line = "test"};
  vlmc_status_t s = vlmc_compile(&o);
  bool ok = s == NULL;
  if (s) fprintf(stderr, "setup: %s\n", vlmc_status_message(s));
  vlmc_status_free(s);
  return ok;
}

int main(void) {
  snprintf(pristine_path, sizeof pristine_path, "/tmp/vlmc-validate-%d.vlmc", (int)getpid());
  snprintf(planted_path, sizeof planted_path, "/tmp/vlmc-validate-%d-planted.vlmc",
           (int)getpid());
  bool ready = setup();
  if (ready) {
    RUN_TEST(test_pristine_artifact_validates);
    RUN_TEST(test_lying_nbytes);
    RUN_TEST(test_param_outside_the_section);
    RUN_TEST(test_overlapping_params);
    RUN_TEST(test_manifest_disagreements);
    RUN_TEST(test_alias_heavy_manifest_shares_one_copy);
    RUN_TEST(test_edited_work_count);
    RUN_TEST(test_swapped_kernel);
    RUN_TEST(test_format_1_kernel_table);
    RUN_TEST(test_header_fields);
    RUN_TEST(test_missing_sections);
  }
  unlink(pristine_path);
  unlink(planted_path);
  return ready ? TEST_SUMMARY() : 1;
}
