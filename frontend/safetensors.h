/* safetensors: reading (single file or sharded through model.safetensors.index.json,
 * memory-mapped, every header field bounds-checked) and writing (small files: fixtures,
 * `vlmc preprocess` output, stage taps).
 *
 * File format: 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
 * then the data; offsets are relative to the end of the header. */
#ifndef VLMC_FRONTEND_SAFETENSORS_H
#define VLMC_FRONTEND_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "support/status.h"

typedef enum {
  VLMC_ST_F32,
  VLMC_ST_F16,
  VLMC_ST_BF16,
  VLMC_ST_F64,
  VLMC_ST_I64,
  VLMC_ST_I32,
  VLMC_ST_I16,
  VLMC_ST_I8,
  VLMC_ST_U8,
  VLMC_ST_BOOL,
} vlmc_st_dtype_t;

enum { VLMC_ST_MAX_RANK = 8 };

typedef struct {
  const char *name;          /* NUL-terminated, owned by the archive */
  vlmc_st_dtype_t dtype;
  int rank;
  int64_t shape[VLMC_ST_MAX_RANK];
  const void *data;          /* points into the mapping; not necessarily aligned */
  size_t nbytes;             /* = element count * dtype size, checked on open */
  int shard;                 /* index of the file it lives in */
} vlmc_st_tensor_t;

typedef struct vlmc_st_archive_s vlmc_st_archive_t;

/* Opens one .safetensors file, a model.safetensors.index.json, or a checkpoint directory
 * (which must hold model.safetensors or model.safetensors.index.json). Errors name the file
 * and the field: "model.safetensors: tensor 'visual.x': data_offsets [0, 12] hold 12 bytes,
 * dtype F32 shape [4,4] needs 64". */
vlmc_status_t vlmc_st_archive_open(const char *path, vlmc_st_archive_t **out_archive);
void vlmc_st_archive_destroy(vlmc_st_archive_t *archive);

size_t vlmc_st_archive_count(const vlmc_st_archive_t *archive);
/* Tensors in a stable order (sorted by name). */
const vlmc_st_tensor_t *vlmc_st_archive_tensor(const vlmc_st_archive_t *archive, size_t index);
/* NULL when absent. */
const vlmc_st_tensor_t *vlmc_st_archive_find(const vlmc_st_archive_t *archive, const char *name);
/* The file a shard index refers to (for messages). */
const char *vlmc_st_archive_shard_path(const vlmc_st_archive_t *archive, int shard);

const char *vlmc_st_dtype_name(vlmc_st_dtype_t dtype);  /* "F32", "BF16", ... */
size_t vlmc_st_dtype_size(vlmc_st_dtype_t dtype);

/* Converts a tensor's elements to f32 (F32, F16, BF16, F64 and the integer types). */
vlmc_status_t vlmc_st_tensor_to_f32(const vlmc_st_tensor_t *tensor, float *out, size_t count);

/* Writing. Tensors are written in the order given; data is copied from `data`. */
typedef struct {
  const char *name;
  vlmc_st_dtype_t dtype;
  int rank;
  const int64_t *shape;
  const void *data;
} vlmc_st_write_tensor_t;

vlmc_status_t vlmc_st_write_file(const char *path, const vlmc_st_write_tensor_t *tensors,
                                 size_t count);

#endif
