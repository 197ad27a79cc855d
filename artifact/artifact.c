#define _POSIX_C_SOURCE 200809L
#include "artifact/artifact.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/checked_math.h"
#include "support/file.h"
#include "support/hash.h"

static const char kMagic[8] = {'V', 'L', 'M', 'C', 'A', 'R', 'T', '\n'};

struct vlmc_artifact_s {
  char *path;
  vlmc_mapped_file_t mapping; /* empty when opened from memory */
  const unsigned char *data;
  size_t size;
  uint32_t format_version;
  size_t section_count;
  vlmc_artifact_section_t *sections;
  bool *verified;
};

/* ---- little-endian encoding ---- */

static uint32_t get_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const unsigned char *p) {
  return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}
static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = (unsigned char)(v >> (8 * i));
}

/* ---- reading ---- */

/* Fields no version has given a meaning are refused, not ignored: a file that sets them was
 * written by something this reader does not understand (or damaged and resealed). */
static vlmc_status_t check_reserved_header_fields(const vlmc_artifact_t *a,
                                                  const unsigned char *h) {
  uint32_t version = get_u32(h + 8), min_reader = get_u32(h + 12), flags = get_u32(h + 36);
  uint64_t reserved = get_u64(h + 48);
  if (version == 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: header: format_version 0 is not a format "
                            "version (they start at 1)", a->path);
  if (min_reader == 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: header: min_reader_version 0 is not a format "
                            "version (they start at 1)", a->path);
  if (flags != 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: header: flags 0x%08x set; no header flag is "
                            "defined (must be 0)", a->path, flags);
  if (reserved != 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: header: reserved (bytes 48..55) is "
                            "0x%016llx; it must be 0", a->path, (unsigned long long)reserved);
  return NULL;
}

static vlmc_status_t check_header(vlmc_artifact_t *a, uint64_t *out_table_offset,
                                  uint32_t *out_count, uint64_t *out_table_checksum) {
  const unsigned char *h = a->data;
  if (a->size < VLMC_ARTIFACT_HEADER_SIZE)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: header: file is %zu bytes, a header needs %d",
                            a->path, a->size, VLMC_ARTIFACT_HEADER_SIZE);
  if (memcmp(h, kMagic, sizeof kMagic) != 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: header: not a vlmc artifact (bad magic)",
                            a->path);
  uint64_t stored = get_u64(h + 56), actual = vlmc_xxh64(h, 56, 0);
  if (stored != actual)
    return vlmc_status_make(VLMC_PARSE_ERROR,
                            "%s: header: checksum %016llx does not match contents (%016llx)",
                            a->path, (unsigned long long)stored, (unsigned long long)actual);
  VLMC_RETURN_IF_ERROR(check_reserved_header_fields(a, h));
  a->format_version = get_u32(h + 8);
  uint32_t min_reader = get_u32(h + 12);
  if (min_reader > VLMC_ARTIFACT_FORMAT_VERSION)
    return vlmc_status_make(VLMC_UNSUPPORTED,
                            "%s: header: needs a reader of format version %u or newer; this "
                            "runtime reads version %d",
                            a->path, min_reader, VLMC_ARTIFACT_FORMAT_VERSION);
  uint64_t file_size = get_u64(h + 16);
  if (file_size != a->size)
    return vlmc_status_make(VLMC_PARSE_ERROR,
                            "%s: header: file_size says %llu bytes but the file has %zu "
                            "(truncated or appended to)",
                            a->path, (unsigned long long)file_size, a->size);
  *out_table_offset = get_u64(h + 24);
  *out_count = get_u32(h + 32);
  *out_table_checksum = get_u64(h + 40);
  return NULL;
}

static vlmc_status_t read_entry(vlmc_artifact_t *a, const unsigned char *e, size_t index,
                                vlmc_artifact_section_t *out) {
  memcpy(out->name, e, 32);
  if (out->name[31] != '\0' || out->name[0] == '\0')
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: section table entry %zu: name is not a "
                            "non-empty NUL-terminated string", a->path, index);
  out->offset = get_u64(e + 32);
  out->size = get_u64(e + 40);
  out->checksum = get_u64(e + 48);
  out->alignment = get_u32(e + 56);
  out->flags = get_u32(e + 60);
  uint64_t end;
  if (!vlmc_add_u64(out->offset, out->size, &end) || end > a->size)
    return vlmc_status_make(VLMC_PARSE_ERROR,
                            "%s: section '%s': bytes [%llu, +%llu) lie outside the file (%zu bytes)",
                            a->path, out->name, (unsigned long long)out->offset,
                            (unsigned long long)out->size, a->size);
  if (out->alignment == 0 || (out->alignment & (out->alignment - 1)) ||
      out->offset % out->alignment)
    return vlmc_status_make(VLMC_PARSE_ERROR,
                            "%s: section '%s': offset %llu is not aligned to its alignment %u",
                            a->path, out->name, (unsigned long long)out->offset, out->alignment);
  if (out->flags & ~(uint32_t)VLMC_SECTION_LAZY_VERIFY)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: section '%s': flags 0x%08x: only bit 0 "
                            "(LAZY_VERIFY) is defined", a->path, out->name, out->flags);
  out->data = a->data + out->offset;
  return NULL;
}

static vlmc_status_t check_no_overlap_or_duplicates(vlmc_artifact_t *a) {
  for (size_t i = 0; i < a->section_count; ++i) {
    for (size_t j = i + 1; j < a->section_count; ++j) {
      const vlmc_artifact_section_t *x = &a->sections[i], *y = &a->sections[j];
      if (strcmp(x->name, y->name) == 0)
        return vlmc_status_make(VLMC_PARSE_ERROR, "%s: section '%s' appears twice", a->path,
                                x->name);
      if (x->offset < y->offset + y->size && y->offset < x->offset + x->size)
        return vlmc_status_make(VLMC_PARSE_ERROR, "%s: sections '%s' and '%s' overlap", a->path,
                                x->name, y->name);
    }
  }
  return NULL;
}

static vlmc_status_t read_table(vlmc_artifact_t *a) {
  uint64_t table_offset = 0, table_checksum = 0;
  uint32_t count = 0;
  VLMC_RETURN_IF_ERROR(check_header(a, &table_offset, &count, &table_checksum));
  if (count > VLMC_ARTIFACT_MAX_SECTIONS)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: header: %u sections, at most %d allowed",
                            a->path, count, VLMC_ARTIFACT_MAX_SECTIONS);
  uint64_t table_size = (uint64_t)count * VLMC_ARTIFACT_ENTRY_SIZE, table_end;
  if (table_offset < VLMC_ARTIFACT_HEADER_SIZE ||
      !vlmc_add_u64(table_offset, table_size, &table_end) || table_end > a->size)
    return vlmc_status_make(VLMC_PARSE_ERROR,
                            "%s: header: section table [%llu, +%llu) lies outside the file",
                            a->path, (unsigned long long)table_offset,
                            (unsigned long long)table_size);
  const unsigned char *table = a->data + table_offset;
  if (vlmc_xxh64(table, (size_t)table_size, 0) != table_checksum)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: section table: checksum mismatch", a->path);
  a->sections = calloc(count ? count : 1, sizeof *a->sections);
  a->verified = calloc(count ? count : 1, sizeof *a->verified);
  if (!a->sections || !a->verified)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", a->path);
  a->section_count = count;
  for (size_t i = 0; i < count; ++i)
    VLMC_RETURN_IF_ERROR(read_entry(a, table + i * VLMC_ARTIFACT_ENTRY_SIZE, i, &a->sections[i]));
  return check_no_overlap_or_duplicates(a);
}

static vlmc_status_t open_common(vlmc_artifact_t *a) {
  VLMC_RETURN_IF_ERROR(read_table(a));
  for (size_t i = 0; i < a->section_count; ++i)
    if (!(a->sections[i].flags & VLMC_SECTION_LAZY_VERIFY))
      VLMC_RETURN_IF_ERROR(vlmc_artifact_section_verify(a, &a->sections[i]));
  return NULL;
}

static vlmc_artifact_t *artifact_alloc(const char *name) {
  vlmc_artifact_t *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->path = strdup(name);
  if (!a->path) {
    free(a);
    return NULL;
  }
  return a;
}

vlmc_status_t vlmc_artifact_open_memory(const void *data, size_t size, const char *name,
                                        vlmc_artifact_t **out_artifact) {
  *out_artifact = NULL;
  vlmc_artifact_t *a = artifact_alloc(name);
  if (!a) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", name);
  a->data = data;
  a->size = size;
  vlmc_status_t status = open_common(a);
  if (status) {
    vlmc_artifact_destroy(a);
    return status;
  }
  *out_artifact = a;
  return NULL;
}

vlmc_status_t vlmc_artifact_open(const char *path, vlmc_artifact_t **out_artifact) {
  *out_artifact = NULL;
  vlmc_artifact_t *a = artifact_alloc(path);
  if (!a) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", path);
  vlmc_status_t status = vlmc_file_map(path, &a->mapping);
  if (!status) {
    a->data = a->mapping.data;
    a->size = a->mapping.size;
    status = open_common(a);
  }
  if (status) {
    vlmc_artifact_destroy(a);
    return status;
  }
  *out_artifact = a;
  return NULL;
}

void vlmc_artifact_destroy(vlmc_artifact_t *artifact) {
  if (!artifact) return;
  vlmc_file_unmap(&artifact->mapping);
  free(artifact->sections);
  free(artifact->verified);
  free(artifact->path);
  free(artifact);
}

const char *vlmc_artifact_path(const vlmc_artifact_t *a) { return a->path; }
bool vlmc_artifact_is_file(const vlmc_artifact_t *a) { return a->mapping.data != NULL; }
uint32_t vlmc_artifact_format_version(const vlmc_artifact_t *a) { return a->format_version; }
size_t vlmc_artifact_section_count(const vlmc_artifact_t *a) { return a->section_count; }

const vlmc_artifact_section_t *vlmc_artifact_section(const vlmc_artifact_t *a, size_t i) {
  return i < a->section_count ? &a->sections[i] : NULL;
}

const vlmc_artifact_section_t *vlmc_artifact_find(const vlmc_artifact_t *a, const char *name) {
  for (size_t i = 0; i < a->section_count; ++i)
    if (strcmp(a->sections[i].name, name) == 0) return &a->sections[i];
  return NULL;
}

vlmc_status_t vlmc_artifact_require(const vlmc_artifact_t *a, const char *name,
                                    const char *needed_by, const vlmc_artifact_section_t **out) {
  *out = vlmc_artifact_find(a, name);
  if (*out) return NULL;
  return vlmc_status_make(VLMC_NOT_FOUND, "%s: section '%s' is missing (needed by %s)", a->path,
                          name, needed_by);
}

vlmc_status_t vlmc_artifact_section_verify(const vlmc_artifact_t *a,
                                           const vlmc_artifact_section_t *section) {
  size_t index = (size_t)(section - a->sections);
  assert(index < a->section_count);
  if (a->verified[index]) return NULL;
  uint64_t actual = vlmc_xxh64(section->data, (size_t)section->size, 0);
  if (actual != section->checksum)
    return vlmc_status_make(VLMC_PARSE_ERROR,
                            "%s: section '%s': checksum %016llx does not match its contents "
                            "(%016llx): the file is damaged",
                            a->path, section->name, (unsigned long long)section->checksum,
                            (unsigned long long)actual);
  a->verified[index] = true;
  return NULL;
}

/* ---- writing ---- */

typedef struct {
  char name[VLMC_ARTIFACT_NAME_MAX + 1];
  uint64_t offset, size, checksum;
  uint32_t alignment, flags;
} pending_section_t;

struct vlmc_artifact_writer_s {
  char *path;
  /* A temporary file beside `path`, renamed over it by finish (support/file.h): a running
   * vlmc-run that has the old artifact mapped keeps reading the old bytes. */
  vlmc_output_t output;
  uint64_t position;
  pending_section_t *sections;
  size_t count, capacity;
  bool open_section;
  vlmc_xxh64_state_t hash;
};

static vlmc_status_t writer_io_error(vlmc_artifact_writer_t *w, const char *what) {
  return vlmc_status_make(VLMC_IO_ERROR, "%s: %s: %s", w->path, what, strerror(errno));
}

static vlmc_status_t writer_raw(vlmc_artifact_writer_t *w, const void *data, size_t size) {
  if (size && fwrite(data, 1, size, w->output.stream) != size) return writer_io_error(w, "write failed");
  w->position += size;
  return NULL;
}

static vlmc_status_t writer_pad_to(vlmc_artifact_writer_t *w, uint64_t alignment) {
  static const unsigned char zeros[4096];
  while (w->position % alignment) {
    uint64_t need = alignment - w->position % alignment;
    VLMC_RETURN_IF_ERROR(writer_raw(w, zeros, need < sizeof zeros ? (size_t)need : sizeof zeros));
  }
  return NULL;
}

vlmc_status_t vlmc_artifact_writer_create(const char *path, vlmc_artifact_writer_t **out_writer) {
  *out_writer = NULL;
  vlmc_artifact_writer_t *w = calloc(1, sizeof *w);
  if (!w || !(w->path = strdup(path))) {
    free(w);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  vlmc_status_t status = vlmc_output_open(path, &w->output);
  if (status) {
    free(w->path);
    free(w);
    return status;
  }
  unsigned char header[VLMC_ARTIFACT_HEADER_SIZE] = {0}; /* rewritten by finish */
  status = writer_raw(w, header, sizeof header);
  if (status) {
    vlmc_artifact_writer_abort(w);
    return status;
  }
  *out_writer = w;
  return NULL;
}

vlmc_status_t vlmc_artifact_writer_begin(vlmc_artifact_writer_t *w, const char *name,
                                         uint32_t alignment, uint32_t flags) {
  assert(!w->open_section);
  size_t len = strlen(name);
  if (len == 0 || len > VLMC_ARTIFACT_NAME_MAX)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: section name '%s' must have 1 to %d bytes",
                            w->path, name, VLMC_ARTIFACT_NAME_MAX);
  if (alignment == 0 || (alignment & (alignment - 1)))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: section '%s': alignment %u is not a "
                            "power of two", w->path, name, alignment);
  for (size_t i = 0; i < w->count; ++i)
    if (strcmp(w->sections[i].name, name) == 0)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: section '%s' written twice", w->path,
                              name);
  if (w->count == w->capacity) {
    size_t capacity = w->capacity ? 2 * w->capacity : 16;
    pending_section_t *grown = realloc(w->sections, capacity * sizeof *grown);
    if (!grown) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", w->path);
    w->sections = grown;
    w->capacity = capacity;
  }
  VLMC_RETURN_IF_ERROR(writer_pad_to(w, alignment));
  pending_section_t *s = &w->sections[w->count];
  memset(s, 0, sizeof *s);
  memcpy(s->name, name, len);
  s->offset = w->position;
  s->alignment = alignment;
  s->flags = flags;
  vlmc_xxh64_init(&w->hash, 0);
  w->open_section = true;
  return NULL;
}

vlmc_status_t vlmc_artifact_writer_append(vlmc_artifact_writer_t *w, const void *data,
                                          size_t size) {
  assert(w->open_section);
  vlmc_xxh64_update(&w->hash, data, size);
  return writer_raw(w, data, size);
}

uint64_t vlmc_artifact_writer_section_offset(const vlmc_artifact_writer_t *w) {
  assert(w->open_section);
  return w->position - w->sections[w->count].offset;
}

vlmc_status_t vlmc_artifact_writer_end(vlmc_artifact_writer_t *w) {
  assert(w->open_section);
  pending_section_t *s = &w->sections[w->count];
  s->size = w->position - s->offset;
  s->checksum = vlmc_xxh64_digest(&w->hash);
  w->open_section = false;
  ++w->count;
  return NULL;
}

vlmc_status_t vlmc_artifact_writer_add(vlmc_artifact_writer_t *w, const char *name,
                                       const void *data, size_t size, uint32_t alignment,
                                       uint32_t flags) {
  VLMC_RETURN_IF_ERROR(vlmc_artifact_writer_begin(w, name, alignment, flags));
  VLMC_RETURN_IF_ERROR(vlmc_artifact_writer_append(w, data, size));
  return vlmc_artifact_writer_end(w);
}

static vlmc_status_t writer_finish_file(vlmc_artifact_writer_t *w) {
  if (w->open_section)
    return vlmc_status_make(VLMC_INTERNAL, "%s: section '%s' was not ended", w->path,
                            w->sections[w->count].name);
  VLMC_RETURN_IF_ERROR(writer_pad_to(w, 64));
  uint64_t table_offset = w->position;
  size_t table_size = w->count * VLMC_ARTIFACT_ENTRY_SIZE;
  unsigned char *table = calloc(table_size ? table_size : 1, 1);
  if (!table) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", w->path);
  for (size_t i = 0; i < w->count; ++i) {
    unsigned char *e = table + i * VLMC_ARTIFACT_ENTRY_SIZE;
    const pending_section_t *s = &w->sections[i];
    memcpy(e, s->name, 32);
    put_u64(e + 32, s->offset);
    put_u64(e + 40, s->size);
    put_u64(e + 48, s->checksum);
    put_u32(e + 56, s->alignment);
    put_u32(e + 60, s->flags);
  }
  vlmc_status_t status = writer_raw(w, table, table_size);
  uint64_t table_checksum = vlmc_xxh64(table, table_size, 0);
  free(table);
  VLMC_RETURN_IF_ERROR(status);

  unsigned char header[VLMC_ARTIFACT_HEADER_SIZE] = {0};
  memcpy(header, kMagic, sizeof kMagic);
  put_u32(header + 8, VLMC_ARTIFACT_FORMAT_VERSION);
  put_u32(header + 12, VLMC_ARTIFACT_MIN_READER_VERSION);
  put_u64(header + 16, w->position);
  put_u64(header + 24, table_offset);
  put_u32(header + 32, (uint32_t)w->count);
  put_u64(header + 40, table_checksum);
  put_u64(header + 56, vlmc_xxh64(header, 56, 0));
  if (fseek(w->output.stream, 0, SEEK_SET) != 0 ||
      fwrite(header, 1, sizeof header, w->output.stream) != sizeof header)
    return writer_io_error(w, "cannot write header");
  return NULL;
}

static void writer_free(vlmc_artifact_writer_t *w) {
  free(w->sections);
  free(w->path);
  free(w);
}

vlmc_status_t vlmc_artifact_writer_finish(vlmc_artifact_writer_t *w) {
  vlmc_status_t status = writer_finish_file(w);
  if (status) vlmc_output_discard(&w->output);
  else status = vlmc_output_commit(&w->output);
  writer_free(w);
  return status;
}

void vlmc_artifact_writer_abort(vlmc_artifact_writer_t *w) {
  if (!w) return;
  vlmc_output_discard(&w->output);
  writer_free(w);
}
