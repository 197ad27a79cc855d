/* safetensors: reading (single file or sharded through model.safetensors.index.json,
 * memory-mapped, every header field bounds-checked) and writing (small files: fixtures,
 * `vlmc preprocess` output, stage taps).
 *
 * File format: 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
 * then the data; offsets are relative to the end of the header.
 *
 * What the reader refuses, each by file and field: a file shorter than 8 bytes; N > 100 MB
 * (the limit of the reference implementation) or past the end of the file; a header that is
 * not a JSON object; an entry that is not an object or lacks dtype/shape/data_offsets; an
 * unknown dtype (by name) or one vlmc does not read yet (F8_*, U16, ...); rank > 8; a negative
 * or non-integer dim; an element count or byte size that overflows; data_offsets that are not
 * two integers with begin <= end inside the data area, or whose size is not count * dtype size;
 * two tensors whose bytes overlap; a name given twice (in one file or across shards);
 * `__metadata__` values that are not strings. Holes between tensors and trailing bytes are
 * accepted (the format does not need them and readers ignore them). */
#ifndef VLMC_FRONTEND_SAFETENSORS_H
#define VLMC_FRONTEND_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "support/status.h"

/* Quantized block layouts (a block of K elements stored in B bytes) go after BOOL: the size
 * rule is vlmc_st_dtype_nbytes, never `count * vlmc_st_dtype_size` directly. */
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
  VLMC_ST_U32, /* mlx-community packed quantized weights */
} vlmc_st_dtype_t;

enum { VLMC_ST_MAX_RANK = 8 };

/* The largest header the reader accepts, as in the reference implementation. */
#define VLMC_ST_MAX_HEADER_BYTES ((uint64_t)100000000)

typedef struct {
  const char *name; /* NUL-terminated, owned by the archive */
  vlmc_st_dtype_t dtype;
  int rank;
  int64_t shape[VLMC_ST_MAX_RANK];
  const void *data; /* points into the mapping; not necessarily aligned */
  size_t nbytes;    /* = element count * dtype size, checked on open */
  int shard;        /* index of the file it lives in */
} vlmc_st_tensor_t;

/* One `__metadata__` entry (the format allows only string values). */
typedef struct {
  const char *key;
  const char *value;
  int shard; /* the file it came from */
} vlmc_st_metadata_t;

typedef struct vlmc_st_archive_s vlmc_st_archive_t;

/* Opens one .safetensors file, a model.safetensors.index.json, or a checkpoint directory
 * (which must hold model.safetensors or model.safetensors.index.json; model.safetensors wins
 * when both exist, as in transformers). Errors name the file and the field:
 * "model.safetensors: tensor 'visual.x': data_offsets [0, 12] hold 12 bytes,
 * dtype F32 shape [4,4] needs 64".
 *
 * Sharded: every file the index's `weight_map` names is opened (names must be plain file
 * names in the index's folder); each weight_map entry must be in the file it names. Tensors a
 * shard holds beyond the weight_map are kept. */
vlmc_status_t vlmc_st_archive_open(const char *path, vlmc_st_archive_t **out_archive);

/* Parses a safetensors image already in memory (fuzzing, embedded files). The archive borrows
 * `data`: it must stay valid and unchanged until the archive is destroyed. `label` names the
 * buffer in messages. */
vlmc_status_t vlmc_st_archive_open_memory(const void *data, size_t size, const char *label,
                                          vlmc_st_archive_t **out_archive);
void vlmc_st_archive_destroy(vlmc_st_archive_t *archive);

size_t vlmc_st_archive_count(const vlmc_st_archive_t *archive);
/* Tensors in a stable order (sorted by name, bytewise). */
const vlmc_st_tensor_t *vlmc_st_archive_tensor(const vlmc_st_archive_t *archive, size_t index);
/* NULL when absent. Binary search. */
const vlmc_st_tensor_t *vlmc_st_archive_find(const vlmc_st_archive_t *archive, const char *name);
/* The file a shard index refers to (for messages). */
const char *vlmc_st_archive_shard_path(const vlmc_st_archive_t *archive, int shard);
int vlmc_st_archive_shard_count(const vlmc_st_archive_t *archive);
/* Where a tensor's bytes start in its shard's file (so that they can be read with pread);
 * false for an archive over borrowed memory. */
bool vlmc_st_archive_file_offset(const vlmc_st_archive_t *archive, const vlmc_st_tensor_t *tensor,
                                 uint64_t *out_offset);

/* `__metadata__` of every shard, shard by shard, in file order. */
size_t vlmc_st_archive_metadata_count(const vlmc_st_archive_t *archive);
const vlmc_st_metadata_t *vlmc_st_archive_metadata(const vlmc_st_archive_t *archive, size_t index);
/* The first value for `key` (lowest shard); NULL when absent. */
const char *vlmc_st_archive_metadata_find(const vlmc_st_archive_t *archive, const char *key);

const char *vlmc_st_dtype_name(vlmc_st_dtype_t dtype); /* "F32", "BF16", ... */
/* Bytes per element of the plain dtypes. */
size_t vlmc_st_dtype_size(vlmc_st_dtype_t dtype);
/* false for an unknown name. Names are the format's, case-sensitive ("BF16"). */
bool vlmc_st_dtype_from_name(const char *name, vlmc_st_dtype_t *out_dtype);
/* Bytes that `count` elements occupy; false on overflow. */
bool vlmc_st_dtype_nbytes(vlmc_st_dtype_t dtype, uint64_t count, uint64_t *out_nbytes);

/* The one mapping between safetensors and IR dtypes (compiler, runtime, models, tools all use
 * it). false where the other side has no such dtype: I16 has no IR dtype, the IR's block
 * quantized Q4_0/Q8_0 have no safetensors name. */
bool vlmc_st_dtype_to_ir(vlmc_st_dtype_t st, vlmc_dtype_t *out_dtype);
bool vlmc_st_dtype_from_ir(vlmc_dtype_t dtype, vlmc_st_dtype_t *out_st);

/* Product of the dims (1 for rank 0). Checked on open, so it cannot overflow here. */
size_t vlmc_st_tensor_numel(const vlmc_st_tensor_t *tensor);

/* Converts a tensor's elements to f32 (F32, F16, BF16, F64 and the integer types). `count`
 * must be the tensor's element count. */
vlmc_status_t vlmc_st_tensor_to_f32(const vlmc_st_tensor_t *tensor, float *out, size_t count);

/* The first element of a float tensor (F32, F16, BF16, F64) that is a NaN or an infinity:
 * true with its flat index and whether it is a NaN. false when every element is finite, and
 * for the integer dtypes. One pass over the data. */
bool vlmc_st_tensor_find_nonfinite(const vlmc_st_tensor_t *tensor, uint64_t *out_index,
                                   bool *out_is_nan);

/* f16 / bf16 scalar conversions: support/float16.h. */

/* Writing. Tensors are written in the order given; data is copied from `data`. The header is
 * padded with spaces so that the data starts 8-byte aligned, and carries
 * `"__metadata__": {"format": "pt"}` as torch's writer does. The file is written beside `path`
 * and renamed into place, so a failed write never leaves a truncated file under that name. */
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
