/* The .vlmc artifact container: one mmap-able file of named, checksummed sections.
 *
 *   header (64 bytes) | section data, each aligned | section table (64 bytes per entry)
 *
 * Header, little-endian: magic "VLMCART\n", u32 format_version, u32 min_reader_version,
 * u64 file_size, u64 table_offset, u32 section_count, u32 flags, u64 table_checksum,
 * u64 reserved, u64 header_checksum (XXH64 of bytes 0..55).
 * Table entry: char name[32] (NUL-padded), u64 offset, u64 size, u64 checksum (XXH64 of the
 * section's bytes), u32 alignment, u32 flags.
 *
 * What the sections mean (manifest, program, tokenizer, params, kernels) is docs/artifact.md's
 * business; this layer only guarantees that a damaged file is refused by name, never crashes,
 * and that opening costs the same for a 10 MB and a 10 GB file: sections flagged LAZY (the
 * parameters) are verified on demand (vlmc_artifact_section_verify) rather than at open. */
#ifndef VLMC_ARTIFACT_ARTIFACT_H
#define VLMC_ARTIFACT_ARTIFACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "support/status.h"

enum {
  VLMC_ARTIFACT_FORMAT_VERSION = 1,
  VLMC_ARTIFACT_MIN_READER_VERSION = 1,
  VLMC_ARTIFACT_HEADER_SIZE = 64,
  VLMC_ARTIFACT_ENTRY_SIZE = 64,
  VLMC_ARTIFACT_NAME_MAX = 31,
  VLMC_ARTIFACT_MAX_SECTIONS = 4096,
};

/* Section flags. */
enum { VLMC_SECTION_LAZY_VERIFY = 1u << 0 };

typedef struct {
  char name[VLMC_ARTIFACT_NAME_MAX + 1];
  const unsigned char *data; /* into the mapping */
  uint64_t offset, size, checksum;
  uint32_t alignment, flags;
} vlmc_artifact_section_t;

typedef struct vlmc_artifact_s vlmc_artifact_t;

/* Maps `path`, checks header, table and every non-lazy section's checksum. */
vlmc_status_t vlmc_artifact_open(const char *path, vlmc_artifact_t **out_artifact);
/* Same over a caller-owned buffer (fuzzing, tests); the buffer must outlive the artifact. */
vlmc_status_t vlmc_artifact_open_memory(const void *data, size_t size, const char *name,
                                        vlmc_artifact_t **out_artifact);
void vlmc_artifact_destroy(vlmc_artifact_t *artifact);

const char *vlmc_artifact_path(const vlmc_artifact_t *artifact);
/* True when opened from a file (its path can be reopened), false for memory. */
bool vlmc_artifact_is_file(const vlmc_artifact_t *artifact);
uint32_t vlmc_artifact_format_version(const vlmc_artifact_t *artifact);
size_t vlmc_artifact_section_count(const vlmc_artifact_t *artifact);
const vlmc_artifact_section_t *vlmc_artifact_section(const vlmc_artifact_t *artifact, size_t i);
/* NULL when absent. */
const vlmc_artifact_section_t *vlmc_artifact_find(const vlmc_artifact_t *artifact,
                                                  const char *name);
/* Like find, but a missing section is an error naming it and what needed it. */
vlmc_status_t vlmc_artifact_require(const vlmc_artifact_t *artifact, const char *name,
                                    const char *needed_by, const vlmc_artifact_section_t **out);
/* Recomputes a section's checksum (lazy sections are checked here, once). */
vlmc_status_t vlmc_artifact_section_verify(const vlmc_artifact_t *artifact,
                                           const vlmc_artifact_section_t *section);

/* Writing: sections are streamed one after another, then the table and the header. The bytes
 * go to a temporary file beside `path` that finish renames over it (after fsync): until then
 * `path` keeps its old contents, and a reader that has the old file mapped keeps it. */
typedef struct vlmc_artifact_writer_s vlmc_artifact_writer_t;

vlmc_status_t vlmc_artifact_writer_create(const char *path, vlmc_artifact_writer_t **out_writer);
vlmc_status_t vlmc_artifact_writer_begin(vlmc_artifact_writer_t *writer, const char *name,
                                         uint32_t alignment, uint32_t flags);
vlmc_status_t vlmc_artifact_writer_append(vlmc_artifact_writer_t *writer, const void *data,
                                          size_t size);
/* Offset of the next byte within the open section (for manifests that point into it). */
uint64_t vlmc_artifact_writer_section_offset(const vlmc_artifact_writer_t *writer);
vlmc_status_t vlmc_artifact_writer_end(vlmc_artifact_writer_t *writer);
/* Convenience: begin + append + end. */
vlmc_status_t vlmc_artifact_writer_add(vlmc_artifact_writer_t *writer, const char *name,
                                       const void *data, size_t size, uint32_t alignment,
                                       uint32_t flags);
/* Writes table and header, closes the file and renames it over `path`; destroys the writer
 * either way (on an error, `path` is left as it was). */
vlmc_status_t vlmc_artifact_writer_finish(vlmc_artifact_writer_t *writer);
/* Abandons a partly written file (removes the temporary file; `path` is left as it was). */
void vlmc_artifact_writer_abort(vlmc_artifact_writer_t *writer);

#endif
