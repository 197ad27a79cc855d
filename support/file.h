/* Files: whole-file reads for small inputs (configs, IR text) and read-only mappings for
 * large ones (safetensors, artifacts). Errors name the path and the system's reason. */
#ifndef VLMC_SUPPORT_FILE_H
#define VLMC_SUPPORT_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "support/status.h"

/* Opens `path` for reading if it is a regular file, without blocking on a FIFO or a device:
 * anything else is refused by name ("x: not a regular file (a FIFO)"). *out_size: its size. */
vlmc_status_t vlmc_file_open_regular(const char *path, int *out_fd, uint64_t *out_size);

/* Reads all of `path` ("-" = stdin) into a malloc'd, NUL-terminated buffer. The caller
 * frees *out_data. Embedded NULs are kept; *out_len excludes the terminator. */
vlmc_status_t vlmc_file_read_all(const char *path, char **out_data, size_t *out_len);

/* Writes `len` bytes to `path` (replaces the file atomically: vlmc_output_t). */
vlmc_status_t vlmc_file_write_all(const char *path, const void *data, size_t len);

/* An output file that appears whole or not at all. It is written to a temporary file beside
 * the target (same folder: ".NAME.XXXXXX", so that rename stays within one file system) and
 * renamed over the target only when committed, after fsync. A reader never sees a half-written
 * file, and a process that has the old file mapped keeps a valid mapping (truncating the file
 * in place would make its next access fault with SIGBUS). An existing target that is not a
 * regular file (a FIFO, a device) is refused rather than replaced. A symbolic link as the
 * target is replaced by the new file, not followed. */
typedef struct {
  char *target;  /* the path the caller named */
  char *temp;    /* the temporary file beside it */
  FILE *stream;  /* open for writing on `temp` */
} vlmc_output_t;

vlmc_status_t vlmc_output_open(const char *path, vlmc_output_t *out);
/* Flushes, fsyncs and closes the temporary file and renames it over the target. On failure
 * the temporary file is removed and the old target is left as it was. Releases `output`
 * either way. */
vlmc_status_t vlmc_output_commit(vlmc_output_t *output);
/* Removes the temporary file; the target is left as it was. Releases `output`. Safe on a
 * zeroed or already released output. */
void vlmc_output_discard(vlmc_output_t *output);

typedef struct {
  const unsigned char *data; /* NULL for an empty file */
  size_t size;
} vlmc_mapped_file_t;

/* Maps `path` read-only. An empty file maps to {NULL, 0}. */
vlmc_status_t vlmc_file_map(const char *path, vlmc_mapped_file_t *out_file);
void vlmc_file_unmap(vlmc_mapped_file_t *file);

/* Creates `path` and any missing parents (like mkdir -p). */
vlmc_status_t vlmc_file_mkdirs(const char *path);

/* dir + "/" + name (no "/" doubled); malloc'd, NULL when out of memory. */
char *vlmc_path_join(const char *dir, const char *name);

#endif
