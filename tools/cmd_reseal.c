/* vlmc reseal IN -o OUT [--replace NAME=FILE]... [--drop NAME]... [--extract NAME=FILE]...:
 * rewrites an artifact section by section with fresh checksums, replacing or dropping
 * sections. It is what an attacker who edits a .vlmc does, kept here so that tests can plant
 * hostile content (a foreign shared object, a lying manifest) that the checksums no longer
 * catch: everything past the checksums must still refuse it. --extract writes a section's
 * bytes to a file (and needs no -o). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/artifact.h"
#include "support/file.h"
#include "tools/commands.h"

enum { MAX_EDITS = 64 };

typedef struct {
  const char *name; /* section */
  const char *file; /* replace / extract: the file; drop: NULL */
} edit_t;

typedef struct {
  const char *in, *out;
  edit_t replace[MAX_EDITS], drop[MAX_EDITS], extract[MAX_EDITS];
  int num_replace, num_drop, num_extract;
} reseal_options_t;

static void print_usage(FILE *out) {
  fprintf(out, "usage: vlmc reseal IN.vlmc -o OUT.vlmc [--replace SECTION=FILE]... "
               "[--drop SECTION]...\n"
               "       vlmc reseal IN.vlmc --extract SECTION=FILE...\n"
               "  Rewrites every section with fresh checksums (for tests that plant hostile\n"
               "  content past the checksums; the runtime must still refuse it).\n"
               "  -o OUT.vlmc              the artifact to write\n"
               "  --replace SECTION=FILE   SECTION's bytes from FILE (repeatable)\n"
               "  --drop SECTION           leave SECTION out (repeatable)\n"
               "  --extract SECTION=FILE   write SECTION's bytes to FILE instead (repeatable)\n");
}

/* NAME=FILE into e; false when there is no '='. */
static bool split_edit(char *arg, edit_t *e) {
  char *eq = strchr(arg, '=');
  if (!eq || eq == arg || !eq[1]) return false;
  *eq = '\0';
  e->name = arg;
  e->file = eq + 1;
  return true;
}

static int add_edit(edit_t *list, int *count, char *arg, bool with_file, const char *flag) {
  if (*count == MAX_EDITS) {
    fprintf(stderr, "error: at most %d %s\n", MAX_EDITS, flag);
    return 2;
  }
  edit_t *e = &list[(*count)++];
  if (!with_file) {
    e->name = arg;
    e->file = NULL;
    return 0;
  }
  if (split_edit(arg, e)) return 0;
  fprintf(stderr, "error: %s %s: expected SECTION=FILE\n", flag, arg);
  return 2;
}

static int parse_args(int argc, char **argv, reseal_options_t *o) {
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      print_usage(stdout);
      return 1;
    }
    if (a[0] != '-') {
      if (o->in) return fprintf(stderr, "error: one input artifact\n"), 2;
      o->in = a;
      continue;
    }
    if (i + 1 == argc) return fprintf(stderr, "error: %s needs a value\n", a), 2;
    char *v = argv[++i];
    int rc = !strcmp(a, "-o") ? (o->out = v, 0)
             : !strcmp(a, "--replace") ? add_edit(o->replace, &o->num_replace, v, true, a)
             : !strcmp(a, "--drop")    ? add_edit(o->drop, &o->num_drop, v, false, a)
             : !strcmp(a, "--extract") ? add_edit(o->extract, &o->num_extract, v, true, a)
                                       : (fprintf(stderr, "error: unknown option '%s'\n", a), 2);
    if (rc) return rc;
  }
  if (!o->in || (!o->out && !o->num_extract)) {
    print_usage(stderr);
    return 2;
  }
  return 0;
}

static const edit_t *find_edit(const edit_t *list, int count, const char *name) {
  for (int i = 0; i < count; ++i)
    if (!strcmp(list[i].name, name)) return &list[i];
  return NULL;
}

static vlmc_status_t extract(const vlmc_artifact_t *a, const reseal_options_t *o) {
  for (int i = 0; i < o->num_extract; ++i) {
    const vlmc_artifact_section_t *sec = vlmc_artifact_find(a, o->extract[i].name);
    if (!sec)
      return vlmc_status_make(VLMC_NOT_FOUND, "%s: no section '%s'", o->in, o->extract[i].name);
    VLMC_RETURN_IF_ERROR(vlmc_file_write_all(o->extract[i].file, sec->data, (size_t)sec->size));
  }
  return NULL;
}

/* One section into the writer: its own bytes, or the replacement file's. */
static vlmc_status_t copy_section(vlmc_artifact_writer_t *w, const vlmc_artifact_section_t *sec,
                                  const edit_t *replacement) {
  if (!replacement)
    return vlmc_artifact_writer_add(w, sec->name, sec->data, (size_t)sec->size, sec->alignment,
                                    sec->flags);
  char *data = NULL;
  size_t len = 0;
  VLMC_RETURN_IF_ERROR(vlmc_file_read_all(replacement->file, &data, &len));
  vlmc_status_t st = vlmc_artifact_writer_add(w, sec->name, data, len, sec->alignment, sec->flags);
  free(data);
  return st;
}

static vlmc_status_t reseal(const vlmc_artifact_t *a, const reseal_options_t *o) {
  for (int i = 0; i < o->num_replace; ++i)
    if (!vlmc_artifact_find(a, o->replace[i].name))
      return vlmc_status_make(VLMC_NOT_FOUND, "%s: no section '%s' to replace", o->in,
                              o->replace[i].name);
  vlmc_artifact_writer_t *w = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_artifact_writer_create(o->out, &w));
  vlmc_status_t st = NULL;
  for (size_t i = 0; !st && i < vlmc_artifact_section_count(a); ++i) {
    const vlmc_artifact_section_t *sec = vlmc_artifact_section(a, i);
    if (find_edit(o->drop, o->num_drop, sec->name)) continue;
    st = copy_section(w, sec, find_edit(o->replace, o->num_replace, sec->name));
  }
  if (st) {
    vlmc_artifact_writer_abort(w);
    return st;
  }
  return vlmc_artifact_writer_finish(w);
}

int vlmc_cmd_reseal(int argc, char **argv) {
  reseal_options_t o;
  memset(&o, 0, sizeof o);
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc == 1 ? 0 : 2;
  vlmc_artifact_t *a = NULL;
  vlmc_status_t st = vlmc_artifact_open(o.in, &a);
  if (!st) st = extract(a, &o);
  if (!st && o.out) st = reseal(a, &o);
  vlmc_artifact_destroy(a);
  return vlmc_status_report(st);
}
