/* Outputs appear whole or not at all (issue 12, support/file.h vlmc_output_t): recompiling
 * over an artifact that a running vlmc-run has mapped leaves that mapping reading the old
 * bytes (writing in place truncated the file under it: SIGBUS); an aborted or failed write
 * leaves the old target as it was and no temporary file behind; an output that is a FIFO is
 * refused, not replaced. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, mkfifo, dirent */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "artifact/artifact.h"
#include "support/file.h"
#include "test.h"

typedef struct {
  char dir[64];
  char path[128];
} scratch_t;

static scratch_t scratch_make(void) {
  scratch_t s;
  snprintf(s.dir, sizeof s.dir, "/tmp/vlmc-atomic-XXXXXX");
  EXPECT_TRUE(mkdtemp(s.dir) != NULL);
  snprintf(s.path, sizeof s.path, "%s/model.vlmc", s.dir);
  return s;
}

/* Entries of the folder other than . and .. (the target and any temporary left behind). */
static int entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

static void scratch_remove(scratch_t *s) {
  DIR *d = opendir(s->dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char path[400];
    snprintf(path, sizeof path, "%s/%s", s->dir, e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(s->dir);
}

/* An artifact with one section "program" of `size` bytes of `fill`. */
static void write_artifact(const char *path, size_t size, char fill) {
  char *data = malloc(size);
  memset(data, fill, size);
  vlmc_artifact_writer_t *w = NULL;
  EXPECT_OK(vlmc_artifact_writer_create(path, &w));
  if (w) {
    EXPECT_OK(vlmc_artifact_writer_add(w, "program", data, size, 8, 0));
    EXPECT_OK(vlmc_artifact_writer_finish(w));
  }
  free(data);
}

static bool all_bytes(const unsigned char *data, size_t size, char fill) {
  for (size_t i = 0; i < size; ++i)
    if (data[i] != (unsigned char)fill) return false;
  return true;
}

static void test_recompile_keeps_old_mapping(void) {
  scratch_t s = scratch_make();
  enum { OLD_SIZE = 1 << 20, NEW_SIZE = 100 };
  write_artifact(s.path, OLD_SIZE, 'a');
  vlmc_artifact_t *old = NULL;
  EXPECT_OK(vlmc_artifact_open(s.path, &old));
  const vlmc_artifact_section_t *section = old ? vlmc_artifact_find(old, "program") : NULL;
  EXPECT_TRUE(section != NULL);
  /* A smaller artifact over it: written in place, the old mapping's pages past the new end
   * would fault. */
  write_artifact(s.path, NEW_SIZE, 'b');
  if (section) EXPECT_TRUE(all_bytes(section->data, OLD_SIZE, 'a'));
  vlmc_artifact_t *fresh = NULL;
  EXPECT_OK(vlmc_artifact_open(s.path, &fresh));
  const vlmc_artifact_section_t *now = fresh ? vlmc_artifact_find(fresh, "program") : NULL;
  EXPECT_TRUE(now && now->size == NEW_SIZE && all_bytes(now->data, NEW_SIZE, 'b'));
  EXPECT_EQ_INT(entries(s.dir), 1); /* no temporary file left */
  vlmc_artifact_destroy(fresh);
  vlmc_artifact_destroy(old);
  scratch_remove(&s);
}

static void expect_file_bytes(const char *path, const vlmc_mapped_file_t *want) {
  vlmc_mapped_file_t got;
  EXPECT_OK(vlmc_file_map(path, &got));
  EXPECT_TRUE(got.size == want->size && memcmp(got.data, want->data, got.size) == 0);
  vlmc_file_unmap(&got);
}

static void test_abort_leaves_target_untouched(void) {
  scratch_t s = scratch_make();
  write_artifact(s.path, 4096, 'a');
  vlmc_mapped_file_t before;
  EXPECT_OK(vlmc_file_map(s.path, &before));
  vlmc_artifact_writer_t *w = NULL;
  EXPECT_OK(vlmc_artifact_writer_create(s.path, &w));
  if (w) {
    EXPECT_OK(vlmc_artifact_writer_add(w, "program", "new", 3, 8, 0));
    EXPECT_EQ_INT(entries(s.dir), 2); /* the target and the temporary beside it */
    vlmc_artifact_writer_abort(w);
  }
  EXPECT_EQ_INT(entries(s.dir), 1);
  expect_file_bytes(s.path, &before);
  /* A failed finish (a section left open) is the same. */
  EXPECT_OK(vlmc_artifact_writer_create(s.path, &w));
  if (w) {
    EXPECT_OK(vlmc_artifact_writer_begin(w, "program", 8, 0));
    EXPECT_ERROR(vlmc_artifact_writer_finish(w), "section 'program' was not ended");
  }
  EXPECT_EQ_INT(entries(s.dir), 1);
  expect_file_bytes(s.path, &before);
  vlmc_file_unmap(&before);
  scratch_remove(&s);
}

static void test_fifo_output_refused(void) {
  scratch_t s = scratch_make();
  EXPECT_TRUE(mkfifo(s.path, 0600) == 0);
  vlmc_artifact_writer_t *w = NULL;
  EXPECT_ERROR(vlmc_artifact_writer_create(s.path, &w), "model.vlmc: not a regular file (a FIFO)");
  EXPECT_TRUE(w == NULL);
  EXPECT_ERROR(vlmc_file_write_all(s.path, "x", 1), "not a regular file (a FIFO)");
  struct stat st;
  EXPECT_TRUE(stat(s.path, &st) == 0 && S_ISFIFO(st.st_mode));
  EXPECT_EQ_INT(entries(s.dir), 1);
  scratch_remove(&s);
}

/* vlmc_file_write_all goes the same way: the old mapping stays readable. */
static void test_write_all_replaces_atomically(void) {
  scratch_t s = scratch_make();
  char big[65536];
  memset(big, 'a', sizeof big);
  EXPECT_OK(vlmc_file_write_all(s.path, big, sizeof big));
  vlmc_mapped_file_t old;
  EXPECT_OK(vlmc_file_map(s.path, &old));
  EXPECT_OK(vlmc_file_write_all(s.path, "bb", 2));
  EXPECT_TRUE(old.size == sizeof big && all_bytes(old.data, old.size, 'a'));
  char *text = NULL;
  size_t len = 0;
  EXPECT_OK(vlmc_file_read_all(s.path, &text, &len));
  EXPECT_TRUE(len == 2 && text && memcmp(text, "bb", 2) == 0);
  free(text);
  vlmc_file_unmap(&old);
  EXPECT_EQ_INT(entries(s.dir), 1);
  /* A bare file name is written beside itself, in the current folder. */
  char cwd[4096];
  EXPECT_TRUE(getcwd(cwd, sizeof cwd) != NULL);
  EXPECT_TRUE(chdir(s.dir) == 0);
  EXPECT_OK(vlmc_file_write_all("model.vlmc", "c", 1));
  EXPECT_TRUE(chdir(cwd) == 0);
  EXPECT_EQ_INT(entries(s.dir), 1);
  scratch_remove(&s);
}

int main(void) {
  RUN_TEST(test_recompile_keeps_old_mapping);
  RUN_TEST(test_abort_leaves_target_untouched);
  RUN_TEST(test_fifo_output_refused);
  RUN_TEST(test_write_all_replaces_atomically);
  return TEST_SUMMARY();
}
