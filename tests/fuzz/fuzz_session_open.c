/* Fuzzes opening a session (runtime/session.h) on a whole artifact: manifest, program,
 * parameters, tokenizer and chat template together. A raw mutation of a .vlmc file is refused
 * by its checksums, so the input is the artifact's sections in a small text encoding and the
 * harness seals them into a valid container (artifact/artifact.h's writer) each time:
 *
 *   --section manifest
 *   {"format": "vlmc", ...}
 *   --section program
 *   func @prefill(...) ...
 *   --section params
 *   <bytes>
 *
 * A section runs from the line after its header to the newline before the next header (or the
 * end). `params` is written 64-byte aligned and lazily verified, as the compiler writes it.
 * A parameter whose manifest checksum is "auto" gets the XXH64 of its bytes, so that inputs
 * reach past the per-tensor checks to the program and the backend. A section named `@session`
 * is not written: its words set the open options ("external": --params from the tiny
 * checkpoint tests/fixtures/parity/tiny-vocab512; "verify": check every parameter at open;
 * "resident" / "mapped": --weights; "null": the null backend instead of ref).
 *
 * The cpu backend is never asked for: it loads the artifact's kernels as code. Nothing is
 * run: opening either fails with a status or gives a session on the backend asked for. */
#define _GNU_SOURCE
#include <assert.h>
#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "artifact/artifact.h"
#include "runtime/session.h"
#include "support/hash.h"

enum { MAX_SECTIONS = 16, NAME_CAP = 64 };

static const char kHeader[] = "--section ";
#define HEADER_LEN (sizeof kHeader - 1)

typedef struct {
  char name[NAME_CAP]; /* longer names are cut here; the writer refuses them past 31 anyway */
  const uint8_t *data;
  size_t size;
} section_t;

typedef struct {
  section_t items[MAX_SECTIONS];
  size_t count;
} sections_t;

/* Where the header after `from` starts (just past a newline), or `size` when there is none. */
static size_t next_header(const uint8_t *data, size_t size, size_t from) {
  static const char kLineHeader[] = "\n--section ";
  if (from >= size) return size;
  const uint8_t *hit = memmem(data + from, size - from, kLineHeader, sizeof kLineHeader - 1);
  return hit ? (size_t)(hit - data) + 1 : size;
}

static void parse_sections(const uint8_t *data, size_t size, sections_t *out) {
  out->count = 0;
  size_t at = size >= HEADER_LEN && memcmp(data, kHeader, HEADER_LEN) == 0
                  ? 0 : next_header(data, size, 0);
  while (at < size && out->count < MAX_SECTIONS) {
    section_t *s = &out->items[out->count++];
    const uint8_t *line = data + at + HEADER_LEN, *end = data + size;
    const uint8_t *nl = memchr(line, '\n', (size_t)(end - line));
    size_t name_len = (size_t)((nl ? nl : end) - line);
    snprintf(s->name, sizeof s->name, "%.*s", (int)name_len, (const char *)line);
    size_t body = nl ? (size_t)(nl - data) + 1 : size;
    /* Search from the header line's own newline, so that an empty body is seen. */
    size_t next = next_header(data, size, body - 1);
    s->data = data + body;
    s->size = next > body ? next - body - (next < size) : 0;
    at = next;
  }
}

static const section_t *find_section(const sections_t *sections, const char *name) {
  for (size_t i = 0; i < sections->count; ++i)
    if (strcmp(sections->items[i].name, name) == 0) return &sections->items[i];
  return NULL;
}

/* ---- "auto" checksums ---- */

static bool reseal_param(cJSON *tensor, const section_t *params) {
  cJSON *checksum = cJSON_GetObjectItemCaseSensitive(tensor, "checksum");
  const cJSON *offset = cJSON_GetObjectItemCaseSensitive(tensor, "offset");
  const cJSON *nbytes = cJSON_GetObjectItemCaseSensitive(tensor, "nbytes");
  if (!cJSON_IsString(checksum) || strcmp(checksum->valuestring, "auto") != 0) return false;
  if (!cJSON_IsNumber(offset) || !cJSON_IsNumber(nbytes) || offset->valuedouble < 0 ||
      nbytes->valuedouble < 0 || offset->valuedouble + nbytes->valuedouble > (double)params->size)
    return false;
  size_t begin = (size_t)offset->valuedouble, len = (size_t)nbytes->valuedouble;
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx",
           (unsigned long long)vlmc_xxh64(params->data + begin, len, 0));
  return cJSON_ReplaceItemInObjectCaseSensitive(tensor, "checksum", cJSON_CreateString(hex));
}

/* The manifest with its "auto" checksums filled in (malloc'd), or NULL to keep it as it is. */
static char *reseal_manifest(const section_t *manifest, const section_t *params) {
  if (!manifest || !params || !memmem(manifest->data, manifest->size, "\"auto\"", 6)) return NULL;
  cJSON *root = cJSON_ParseWithLength((const char *)manifest->data, manifest->size);
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(root, "params"), "tensors");
  bool changed = false;
  cJSON *tensor;
  if (cJSON_IsArray(list)) cJSON_ArrayForEach(tensor, list) changed |= reseal_param(tensor, params);
  char *text = changed ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  return text;
}

/* ---- the container ---- */

static vlmc_status_t write_artifact(const char *path, const sections_t *sections) {
  const section_t *manifest = find_section(sections, "manifest");
  char *resealed = reseal_manifest(manifest, find_section(sections, "params"));
  vlmc_artifact_writer_t *w = NULL;
  vlmc_status_t status = vlmc_artifact_writer_create(path, &w);
  for (size_t i = 0; !status && i < sections->count; ++i) {
    const section_t *s = &sections->items[i];
    if (s->name[0] == '@') continue;
    bool params = strcmp(s->name, "params") == 0;
    const void *data = s == manifest && resealed ? (const void *)resealed : s->data;
    size_t size = s == manifest && resealed ? strlen(resealed) : s->size;
    status = vlmc_artifact_writer_add(w, s->name, data, size, params ? 64 : 8,
                                      params ? VLMC_SECTION_LAZY_VERIFY : 0);
  }
  free(resealed);
  if (status) {
    if (w) vlmc_artifact_writer_abort(w);
    return status;
  }
  return vlmc_artifact_writer_finish(w);
}

/* ---- the session ---- */

/* The tiny checkpoint whose safetensors an "external" artifact reads: found from the working
 * directory (ctest runs in the source tree) or from this file's place in the source tree. */
static const char *tiny_checkpoint(void) {
  static const char kRelative[] = "tests/fixtures/parity/tiny-vocab512";
  static char path[4096];
  if (path[0]) return path;
  const char *self = __FILE__, *tests = strstr(self, "tests/fuzz/");
  if (access(kRelative, R_OK) == 0 || !tests) snprintf(path, sizeof path, "%s", kRelative);
  else snprintf(path, sizeof path, "%.*s%s", (int)(tests - self), self, kRelative);
  return path;
}

static bool has_word(const section_t *s, const char *word) {
  return s && memmem(s->data, s->size, word, strlen(word)) != NULL;
}

static void open_session(const char *path, const sections_t *sections) {
  const section_t *o = find_section(sections, "@session");
  vlmc_session_options_t options = {
      .artifact_path = path,
      .params_dir = has_word(o, "external") ? tiny_checkpoint() : NULL,
      .backend = has_word(o, "null") ? "null" : "ref",
      .threads = 1,
      .verify_params = has_word(o, "verify"),
      .weights = has_word(o, "resident") ? "resident" : has_word(o, "mapped") ? "mapped" : NULL};
  vlmc_session_t *session = NULL;
  vlmc_status_t status = vlmc_session_open(&options, &session);
  /* VLMC_FUZZ_VERBOSE=1: what each input came to, for keeping the seeds meaningful. */
  if (getenv("VLMC_FUZZ_VERBOSE"))
    fprintf(stderr, "fuzz_session_open: %s\n", status ? vlmc_status_message(status) : "opened");
  if (status) {
    assert(session == NULL && vlmc_status_message(status)[0] != '\0');
    vlmc_status_free(status);
    return;
  }
  assert(strcmp(vlmc_session_backend(session), options.backend) == 0);
  assert(vlmc_session_manifest(session) != NULL);
  assert(vlmc_session_has_tokenizer(session) == (find_section(sections, "tokenizer") != NULL));
  vlmc_session_destroy(session);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char path[512];
  if (!path[0]) {
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/vlmc-fuzz-session-%ld.vlmc", tmp && *tmp ? tmp : "/tmp",
             (long)getpid());
  }
  sections_t sections;
  parse_sections(data, size, &sections);
  vlmc_status_t status = write_artifact(path, &sections);
  if (!status) open_session(path, &sections);
  vlmc_status_free(status);
  unlink(path);
  return 0;
}
