/* safetensors reader and writer; the contract and the list of what is refused are in
 * safetensors.h. Every number that comes from a file is range-checked before any arithmetic,
 * and every size is computed with overflow checks. */
#define _POSIX_C_SOURCE 200809L
#include "frontend/safetensors.h"

#include "support/float16.h"

#include <assert.h>
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "support/arena.h"
#include "support/checked_math.h"
#include "support/file.h"
#include "support/json.h"
#include "support/strbuf.h"

/* ---- dtypes ------------------------------------------------------------------------------ */

/* A dtype stores `block_elems` elements in `block_bytes` bytes: 1 element per block for the
 * plain types; quantized layouts will use larger blocks. */
typedef struct {
  const char *name;
  uint32_t block_elems;
  uint32_t block_bytes;
} dtype_info_t;

static const dtype_info_t dtype_table[] = {
    [VLMC_ST_F32] = {"F32", 1, 4},   [VLMC_ST_F16] = {"F16", 1, 2}, [VLMC_ST_BF16] = {"BF16", 1, 2},
    [VLMC_ST_F64] = {"F64", 1, 8},   [VLMC_ST_I64] = {"I64", 1, 8}, [VLMC_ST_I32] = {"I32", 1, 4},
    [VLMC_ST_I16] = {"I16", 1, 2},   [VLMC_ST_I8] = {"I8", 1, 1},   [VLMC_ST_U8] = {"U8", 1, 1},
    [VLMC_ST_BOOL] = {"BOOL", 1, 1}, [VLMC_ST_U32] = {"U32", 1, 4},
};
enum { DTYPE_COUNT = sizeof dtype_table / sizeof dtype_table[0] };

/* dtypes the format defines that vlmc does not read yet: refused as unsupported, not unknown. */
static const char *const unsupported_dtypes[] = {
    "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "U16", "U64", "C64",
};

static bool dtype_valid(vlmc_st_dtype_t dtype) {
  return (unsigned)dtype < DTYPE_COUNT;
}

const char *vlmc_st_dtype_name(vlmc_st_dtype_t dtype) {
  return dtype_valid(dtype) ? dtype_table[dtype].name : "?";
}

size_t vlmc_st_dtype_size(vlmc_st_dtype_t dtype) {
  assert(dtype_valid(dtype) && dtype_table[dtype].block_elems == 1);
  return dtype_table[dtype].block_bytes;
}

bool vlmc_st_dtype_from_name(const char *name, vlmc_st_dtype_t *out_dtype) {
  for (int i = 0; i < DTYPE_COUNT; ++i) {
    if (strcmp(name, dtype_table[i].name) == 0) {
      *out_dtype = (vlmc_st_dtype_t)i;
      return true;
    }
  }
  return false;
}

/* Safetensors and IR dtypes that are the same element type. */
static const struct {
  vlmc_st_dtype_t st;
  vlmc_dtype_t ir;
} kIrDtypes[] = {
    {VLMC_ST_F32, VLMC_DTYPE_F32}, {VLMC_ST_F16, VLMC_DTYPE_F16}, {VLMC_ST_BF16, VLMC_DTYPE_BF16},
    {VLMC_ST_F64, VLMC_DTYPE_F64}, {VLMC_ST_I64, VLMC_DTYPE_I64}, {VLMC_ST_I32, VLMC_DTYPE_I32},
    {VLMC_ST_I8, VLMC_DTYPE_I8},   {VLMC_ST_U8, VLMC_DTYPE_U8},   {VLMC_ST_BOOL, VLMC_DTYPE_BOOL},
    {VLMC_ST_U32, VLMC_DTYPE_U32},
};

bool vlmc_st_dtype_to_ir(vlmc_st_dtype_t st, vlmc_dtype_t *out_dtype) {
  for (size_t i = 0; i < sizeof kIrDtypes / sizeof kIrDtypes[0]; ++i)
    if (kIrDtypes[i].st == st) {
      *out_dtype = kIrDtypes[i].ir;
      return true;
    }
  return false;
}

bool vlmc_st_dtype_from_ir(vlmc_dtype_t dtype, vlmc_st_dtype_t *out_st) {
  for (size_t i = 0; i < sizeof kIrDtypes / sizeof kIrDtypes[0]; ++i)
    if (kIrDtypes[i].ir == dtype) {
      *out_st = kIrDtypes[i].st;
      return true;
    }
  return false;
}

bool vlmc_st_dtype_nbytes(vlmc_st_dtype_t dtype, uint64_t count, uint64_t *out_nbytes) {
  if (!dtype_valid(dtype)) return false;
  const dtype_info_t *info = &dtype_table[dtype];
  uint64_t blocks = count / info->block_elems + (count % info->block_elems != 0);
  return vlmc_mul_u64(blocks, info->block_bytes, out_nbytes);
}

size_t vlmc_st_tensor_numel(const vlmc_st_tensor_t *tensor) {
  size_t count = 1;
  for (int i = 0; i < tensor->rank; ++i) count *= (size_t)tensor->shape[i];
  return count;
}

/* ---- the archive ------------------------------------------------------------------------- */

typedef struct {
  const char *path;           /* for messages; arena */
  vlmc_mapped_file_t mapping; /* empty for borrowed memory */
} shard_t;

struct vlmc_st_archive_s {
  vlmc_arena_t arena;
  shard_t *shards;
  int shard_count;
  vlmc_st_tensor_t *tensors; /* sorted by name once open */
  size_t tensor_count, tensor_capacity;
  vlmc_st_metadata_t *metadata;
  size_t metadata_count, metadata_capacity;
};

static vlmc_status_t out_of_memory(const char *label) {
  return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", label);
}

static vlmc_st_archive_t *archive_create(void) {
  vlmc_st_archive_t *archive = calloc(1, sizeof *archive);
  if (archive) vlmc_arena_init(&archive->arena);
  return archive;
}

void vlmc_st_archive_destroy(vlmc_st_archive_t *archive) {
  if (!archive) return;
  for (int i = 0; i < archive->shard_count; ++i) vlmc_file_unmap(&archive->shards[i].mapping);
  free(archive->shards);
  free(archive->tensors);
  free(archive->metadata);
  vlmc_arena_deinit(&archive->arena);
  free(archive);
}

static int archive_add_shard(vlmc_st_archive_t *archive, const char *path) {
  shard_t *grown = realloc(archive->shards, (size_t)(archive->shard_count + 1) * sizeof *grown);
  if (!grown) return -1;
  archive->shards = grown;
  shard_t *shard = &archive->shards[archive->shard_count];
  memset(shard, 0, sizeof *shard);
  shard->path = vlmc_arena_strdup(&archive->arena, path);
  if (!shard->path) return -1;
  return archive->shard_count++;
}

static vlmc_st_tensor_t *archive_push_tensor(vlmc_st_archive_t *archive) {
  if (archive->tensor_count == archive->tensor_capacity) {
    size_t capacity = archive->tensor_capacity ? archive->tensor_capacity * 2 : 64;
    vlmc_st_tensor_t *grown = realloc(archive->tensors, capacity * sizeof *grown);
    if (!grown) return NULL;
    archive->tensors = grown;
    archive->tensor_capacity = capacity;
  }
  vlmc_st_tensor_t *tensor = &archive->tensors[archive->tensor_count++];
  memset(tensor, 0, sizeof *tensor);
  return tensor;
}

static vlmc_st_metadata_t *archive_push_metadata(vlmc_st_archive_t *archive) {
  if (archive->metadata_count == archive->metadata_capacity) {
    size_t capacity = archive->metadata_capacity ? archive->metadata_capacity * 2 : 8;
    vlmc_st_metadata_t *grown = realloc(archive->metadata, capacity * sizeof *grown);
    if (!grown) return NULL;
    archive->metadata = grown;
    archive->metadata_capacity = capacity;
  }
  return &archive->metadata[archive->metadata_count++];
}

/* ---- header parsing ---------------------------------------------------------------------- */

/* JSON numbers are doubles; integers above 2^53 are not exact and never occur in real files. */
#define MAX_EXACT_INTEGER 9007199254740992.0

static bool json_to_u64(const cJSON *item, uint64_t *out) {
  if (!cJSON_IsNumber(item)) return false;
  double value = item->valuedouble;
  if (!isfinite(value) || value < 0 || value != floor(value) || value > MAX_EXACT_INTEGER)
    return false;
  *out = (uint64_t)value;
  return true;
}

static void format_shape(const int64_t *shape, int rank, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < rank && used < size; ++i)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "," : "", (long long)shape[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
}

typedef struct {
  const char *label; /* the file, for messages */
  const char *name;  /* the tensor, for messages */
} entry_ctx_t;

#define ENTRY_ERROR(ctx, code, fmt, ...) \
  vlmc_status_make((code), "%s: tensor '%.200s': " fmt, (ctx)->label, (ctx)->name, __VA_ARGS__)

static vlmc_status_t parse_dtype(const entry_ctx_t *ctx, const cJSON *item, vlmc_st_dtype_t *out) {
  if (!item) return ENTRY_ERROR(ctx, VLMC_PARSE_ERROR, "%s", "missing \"dtype\"");
  if (!cJSON_IsString(item))
    return ENTRY_ERROR(ctx, VLMC_PARSE_ERROR, "dtype: expected a string, got %s",
                       vlmc_json_kind(item));
  if (vlmc_st_dtype_from_name(item->valuestring, out)) return NULL;
  for (size_t i = 0; i < sizeof unsupported_dtypes / sizeof unsupported_dtypes[0]; ++i)
    if (strcmp(item->valuestring, unsupported_dtypes[i]) == 0)
      return ENTRY_ERROR(ctx, VLMC_UNSUPPORTED, "dtype %s is not supported yet", item->valuestring);
  return ENTRY_ERROR(ctx, VLMC_PARSE_ERROR, "unknown dtype '%.40s'", item->valuestring);
}

static vlmc_status_t parse_shape(const entry_ctx_t *ctx, const cJSON *item,
                                 vlmc_st_tensor_t *tensor, uint64_t *out_count) {
  if (!item) return ENTRY_ERROR(ctx, VLMC_PARSE_ERROR, "%s", "missing \"shape\"");
  if (!cJSON_IsArray(item))
    return ENTRY_ERROR(ctx, VLMC_PARSE_ERROR, "shape: expected an array, got %s",
                       vlmc_json_kind(item));
  int rank = cJSON_GetArraySize(item);
  if (rank > VLMC_ST_MAX_RANK)
    return ENTRY_ERROR(ctx, VLMC_UNSUPPORTED, "shape has rank %d, at most %d is supported", rank,
                       VLMC_ST_MAX_RANK);
  uint64_t count = 1;
  int i = 0;
  for (const cJSON *dim = item->child; dim; dim = dim->next, ++i) {
    uint64_t value;
    if (!json_to_u64(dim, &value)) {
      if (cJSON_IsNumber(dim))
        return ENTRY_ERROR(ctx, VLMC_PARSE_ERROR, "shape[%d] = %g is not a non-negative integer", i,
                           dim->valuedouble);
      return ENTRY_ERROR(ctx, VLMC_PARSE_ERROR, "shape[%d]: expected an integer, got %s", i,
                         vlmc_json_kind(dim));
    }
    if (!vlmc_mul_u64(count, value, &count))
      return ENTRY_ERROR(ctx, VLMC_OUT_OF_RANGE, "%s", "shape: element count overflows");
    tensor->shape[i] = (int64_t)value;
  }
  tensor->rank = rank;
  *out_count = count;
  return NULL;
}

static vlmc_status_t parse_offsets(const entry_ctx_t *ctx, const cJSON *item, uint64_t data_size,
                                   uint64_t *out_begin, uint64_t *out_end) {
  if (!item) return ENTRY_ERROR(ctx, VLMC_PARSE_ERROR, "%s", "missing \"data_offsets\"");
  if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != 2)
    return ENTRY_ERROR(ctx, VLMC_PARSE_ERROR, "data_offsets: expected [begin, end], got %s",
                       cJSON_IsArray(item) ? "another number of elements" : vlmc_json_kind(item));
  uint64_t begin = 0, end = 0;
  if (!json_to_u64(item->child, &begin) || !json_to_u64(item->child->next, &end))
    return ENTRY_ERROR(ctx, VLMC_PARSE_ERROR, "%s",
                       "data_offsets: expected two non-negative integers");
  if (begin > end)
    return ENTRY_ERROR(ctx, VLMC_OUT_OF_RANGE, "data_offsets [%llu, %llu]: begin is after end",
                       (unsigned long long)begin, (unsigned long long)end);
  if (end > data_size)
    return ENTRY_ERROR(
        ctx, VLMC_OUT_OF_RANGE, "data_offsets [%llu, %llu] run past the data area (%llu bytes)",
        (unsigned long long)begin, (unsigned long long)end, (unsigned long long)data_size);
  *out_begin = begin;
  *out_end = end;
  return NULL;
}

/* Parses one header entry into a new tensor of `archive`. */
static vlmc_status_t parse_tensor_entry(vlmc_st_archive_t *archive, int shard, const char *label,
                                        const cJSON *entry, const unsigned char *data,
                                        uint64_t data_size) {
  entry_ctx_t ctx = {label, entry->string};
  if (!cJSON_IsObject(entry))
    return ENTRY_ERROR(&ctx, VLMC_PARSE_ERROR, "expected an object, got %s", vlmc_json_kind(entry));
  vlmc_st_tensor_t *tensor = archive_push_tensor(archive);
  if (!tensor) return out_of_memory(label);
  tensor->shard = shard;
  tensor->name = vlmc_arena_strdup(&archive->arena, entry->string);
  if (!tensor->name) return out_of_memory(label);
  uint64_t count = 0, begin = 0, end = 0, needed = 0;
  VLMC_RETURN_IF_ERROR(
      parse_dtype(&ctx, cJSON_GetObjectItemCaseSensitive(entry, "dtype"), &tensor->dtype));
  VLMC_RETURN_IF_ERROR(
      parse_shape(&ctx, cJSON_GetObjectItemCaseSensitive(entry, "shape"), tensor, &count));
  VLMC_RETURN_IF_ERROR(parse_offsets(&ctx, cJSON_GetObjectItemCaseSensitive(entry, "data_offsets"),
                                     data_size, &begin, &end));
  if (!vlmc_st_dtype_nbytes(tensor->dtype, count, &needed))
    return ENTRY_ERROR(&ctx, VLMC_OUT_OF_RANGE, "%s", "byte size overflows");
  if (end - begin != needed) {
    char shape[200];
    format_shape(tensor->shape, tensor->rank, shape, sizeof shape);
    return ENTRY_ERROR(&ctx, VLMC_PARSE_ERROR,
                       "data_offsets [%llu, %llu] hold %llu bytes, dtype %s shape %s needs %llu",
                       (unsigned long long)begin, (unsigned long long)end,
                       (unsigned long long)(end - begin), vlmc_st_dtype_name(tensor->dtype), shape,
                       (unsigned long long)needed);
  }
  tensor->data = data + begin;
  tensor->nbytes = (size_t)needed;
  return NULL;
}

static vlmc_status_t parse_metadata(vlmc_st_archive_t *archive, int shard, const char *label,
                                    const cJSON *object) {
  if (!cJSON_IsObject(object))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: __metadata__: expected an object, got %s", label,
                            vlmc_json_kind(object));
  for (const cJSON *item = object->child; item; item = item->next) {
    if (!cJSON_IsString(item))
      return vlmc_status_make(VLMC_PARSE_ERROR,
                              "%s: __metadata__.%.100s: expected a string, got %s", label,
                              item->string, vlmc_json_kind(item));
    vlmc_st_metadata_t *entry = archive_push_metadata(archive);
    if (!entry) return out_of_memory(label);
    entry->shard = shard;
    entry->key = vlmc_arena_strdup(&archive->arena, item->string);
    entry->value = vlmc_arena_strdup(&archive->arena, item->valuestring);
    if (!entry->key || !entry->value) return out_of_memory(label);
  }
  return NULL;
}

typedef struct {
  uint64_t begin, end;
  const char *name;
} extent_t;

static int compare_extents(const void *a, const void *b) {
  const extent_t *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

/* Tensors [first, archive->tensor_count) all belong to one shard whose data starts at `data`. */
static vlmc_status_t check_no_overlap(const vlmc_st_archive_t *archive, size_t first,
                                      const unsigned char *data, const char *label) {
  size_t n = archive->tensor_count - first, used = 0;
  if (n < 2) return NULL;
  extent_t *extents = malloc(n * sizeof *extents);
  if (!extents) return out_of_memory(label);
  for (size_t i = first; i < archive->tensor_count; ++i) {
    const vlmc_st_tensor_t *t = &archive->tensors[i];
    if (t->nbytes == 0) continue; /* empty tensors own no bytes */
    uint64_t begin = (uint64_t)((const unsigned char *)t->data - data);
    extents[used++] = (extent_t){begin, begin + t->nbytes, t->name};
  }
  qsort(extents, used, sizeof *extents, compare_extents);
  vlmc_status_t status = NULL;
  for (size_t i = 1; i < used && !status; ++i) {
    if (extents[i].begin < extents[i - 1].end)
      status = vlmc_status_make(
          VLMC_PARSE_ERROR, "%s: tensors '%.200s' [%llu, %llu] and '%.200s' [%llu, %llu] overlap",
          label, extents[i - 1].name, (unsigned long long)extents[i - 1].begin,
          (unsigned long long)extents[i - 1].end, extents[i].name,
          (unsigned long long)extents[i].begin, (unsigned long long)extents[i].end);
  }
  free(extents);
  return status;
}

/* Parses `text` (not NUL-terminated) as one JSON value followed only by whitespace. cJSON is
 * given a NUL-terminated copy so that no parse can read past the end of the header. */
static vlmc_status_t parse_json_header(const char *label, const unsigned char *text, size_t len,
                                       cJSON **out_root) {
  char *copy = malloc(len + 1);
  if (!copy) return out_of_memory(label);
  memcpy(copy, text, len);
  copy[len] = '\0';
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(copy, len, &end, false);
  size_t stop = end ? (size_t)(end - copy) : 0;
  /* cJSON stops right after the value; only JSON whitespace may follow it. */
  while (root && stop < len && strchr(" \t\r\n", copy[stop]) && copy[stop] != '\0') ++stop;
  free(copy);
  if (!root)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: header is not valid JSON (error at byte %zu)",
                            label, 8 + stop);
  if (stop < len) {
    cJSON_Delete(root);
    return vlmc_status_make(
        VLMC_PARSE_ERROR, "%s: unexpected text after the JSON header at byte %zu", label, 8 + stop);
  }
  *out_root = root;
  return NULL;
}

static vlmc_status_t read_header_length(const char *label, const unsigned char *data, size_t size,
                                        uint64_t *out_length) {
  if (size < 8)
    return vlmc_status_make(VLMC_PARSE_ERROR,
                            "%s: file is %zu bytes, too short for the 8-byte header length", label,
                            size);
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | data[i];
  if (length > VLMC_ST_MAX_HEADER_BYTES)
    return vlmc_status_make(
        VLMC_OUT_OF_RANGE, "%s: header length %llu exceeds the limit of %llu bytes", label,
        (unsigned long long)length, (unsigned long long)VLMC_ST_MAX_HEADER_BYTES);
  if (length > size - 8)
    return vlmc_status_make(VLMC_OUT_OF_RANGE,
                            "%s: header length %llu runs past the end of the file (%zu bytes)",
                            label, (unsigned long long)length, size);
  *out_length = length;
  return NULL;
}

/* Parses the safetensors image of shard `shard` (data/size) into the archive. */
static vlmc_status_t parse_shard(vlmc_st_archive_t *archive, int shard, const unsigned char *data,
                                 size_t size) {
  const char *label = archive->shards[shard].path;
  uint64_t header_length = 0;
  VLMC_RETURN_IF_ERROR(read_header_length(label, data, size, &header_length));
  cJSON *root = NULL;
  VLMC_RETURN_IF_ERROR(parse_json_header(label, data + 8, (size_t)header_length, &root));
  vlmc_status_t status = NULL;
  if (!cJSON_IsObject(root))
    status = vlmc_status_make(VLMC_PARSE_ERROR, "%s: header is %s, expected a JSON object", label,
                              vlmc_json_kind(root));
  const unsigned char *tensor_data = data + 8 + header_length;
  uint64_t data_size = size - 8 - header_length;
  size_t first = archive->tensor_count;
  bool seen_metadata = false;
  for (const cJSON *item = root->child; item && !status; item = item->next) {
    if (strcmp(item->string, "__metadata__") != 0) {
      status = parse_tensor_entry(archive, shard, label, item, tensor_data, data_size);
    } else if (seen_metadata) {
      status = vlmc_status_make(VLMC_PARSE_ERROR, "%s: __metadata__ is given twice", label);
    } else {
      seen_metadata = true;
      status = parse_metadata(archive, shard, label, item);
    }
  }
  cJSON_Delete(root);
  if (!status) status = check_no_overlap(archive, first, tensor_data, label);
  return status;
}

static int compare_tensor_names(const void *a, const void *b) {
  return strcmp(((const vlmc_st_tensor_t *)a)->name, ((const vlmc_st_tensor_t *)b)->name);
}

/* Sorts the tensors by name and refuses names given twice. */
static vlmc_status_t archive_finish(vlmc_st_archive_t *archive) {
  if (archive->tensor_count > 1)
    qsort(archive->tensors, archive->tensor_count, sizeof *archive->tensors, compare_tensor_names);
  for (size_t i = 1; i < archive->tensor_count; ++i) {
    const vlmc_st_tensor_t *a = &archive->tensors[i - 1], *b = &archive->tensors[i];
    if (strcmp(a->name, b->name) != 0) continue;
    if (a->shard == b->shard)
      return vlmc_status_make(VLMC_PARSE_ERROR, "%s: tensor '%.200s' is given twice",
                              archive->shards[a->shard].path, a->name);
    return vlmc_status_make(VLMC_PARSE_ERROR, "tensor '%.200s' is in both %s and %s", a->name,
                            archive->shards[a->shard].path, archive->shards[b->shard].path);
  }
  return NULL;
}

/* ---- opening ----------------------------------------------------------------------------- */

static vlmc_status_t open_shard_file(vlmc_st_archive_t *archive, const char *path, int *out_shard) {
  int shard = archive_add_shard(archive, path);
  if (shard < 0) return out_of_memory(path);
  VLMC_RETURN_IF_ERROR(vlmc_file_map(path, &archive->shards[shard].mapping));
  const vlmc_mapped_file_t *mapping = &archive->shards[shard].mapping;
  if (out_shard) *out_shard = shard;
  return parse_shard(archive, shard, mapping->data, mapping->size);
}

/* The folder part of `path` ("." for a bare name); malloc'd. */
static char *dirname_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return vlmc_path_join(".", "");
  size_t len = slash == path ? 1 : (size_t)(slash - path);
  char *dir = malloc(len + 1);
  if (!dir) return NULL;
  memcpy(dir, path, len);
  dir[len] = '\0';
  return dir;
}

/* Index entries must name files beside the index: no folders, no way out of it. */
static bool is_plain_file_name(const char *name) {
  return name[0] && strchr(name, '/') == NULL && strchr(name, '\\') == NULL &&
         strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

typedef struct {
  const char *index_path;
  cJSON *root;
  const cJSON *weight_map;
  const char **files; /* distinct shard file names, sorted; borrowed from root */
  size_t file_count;
} index_t;

static vlmc_status_t index_read(index_t *index) {
  const char *label = index->index_path;
  char *text;
  size_t len;
  VLMC_RETURN_IF_ERROR(vlmc_file_read_all(label, &text, &len));
  vlmc_status_t status = vlmc_json_parse_document(label, text, len, &index->root);
  free(text);
  if (status) return status;
  if (!cJSON_IsObject(index->root))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: expected a JSON object, got %s", label,
                            vlmc_json_kind(index->root));
  index->weight_map = cJSON_GetObjectItemCaseSensitive(index->root, "weight_map");
  if (!index->weight_map)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: missing \"weight_map\"", label);
  if (!cJSON_IsObject(index->weight_map) || !index->weight_map->child)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: weight_map: expected a non-empty object, got %s",
                            label, vlmc_json_kind(index->weight_map));
  return NULL;
}

/* Collects the distinct file names of the weight_map, checking each entry. */
static vlmc_status_t index_collect_files(index_t *index) {
  const char *label = index->index_path;
  size_t n = (size_t)cJSON_GetArraySize(index->weight_map);
  index->files = malloc(n * sizeof *index->files);
  if (!index->files) return out_of_memory(label);
  for (const cJSON *item = index->weight_map->child; item; item = item->next) {
    if (!cJSON_IsString(item))
      return vlmc_status_make(VLMC_PARSE_ERROR,
                              "%s: weight_map.%.200s: expected a file name, got %s", label,
                              item->string, vlmc_json_kind(item));
    if (!is_plain_file_name(item->valuestring))
      return vlmc_status_make(VLMC_PARSE_ERROR,
                              "%s: weight_map.%.200s: '%.200s' is not a file name in the index's "
                              "folder",
                              label, item->string, item->valuestring);
    index->files[index->file_count++] = item->valuestring;
  }
  qsort(index->files, index->file_count, sizeof *index->files, compare_strings);
  size_t unique = 0;
  for (size_t i = 0; i < index->file_count; ++i)
    if (unique == 0 || strcmp(index->files[unique - 1], index->files[i]) != 0)
      index->files[unique++] = index->files[i];
  index->file_count = unique;
  return NULL;
}

/* Every weight_map entry must be found in the file it names. */
static vlmc_status_t index_verify(const index_t *index, const vlmc_st_archive_t *archive) {
  for (const cJSON *item = index->weight_map->child; item; item = item->next) {
    const vlmc_st_tensor_t *tensor = vlmc_st_archive_find(archive, item->string);
    const char *holder = tensor ? archive->shards[tensor->shard].path : NULL;
    const char *base = holder ? strrchr(holder, '/') : NULL;
    base = base ? base + 1 : holder;
    if (!tensor || strcmp(base, item->valuestring) != 0)
      return vlmc_status_make(VLMC_NOT_FOUND,
                              "%s: weight_map puts '%.200s' in %s, which does not "
                              "hold it%s%s",
                              index->index_path, item->string, item->valuestring,
                              tensor ? "; it is in " : "", tensor ? holder : "");
  }
  return NULL;
}

static vlmc_status_t open_index(vlmc_st_archive_t *archive, const char *index_path) {
  index_t index = {.index_path = index_path};
  vlmc_status_t status = index_read(&index);
  if (!status) status = index_collect_files(&index);
  char *dir = status ? NULL : dirname_of(index_path);
  if (!status && !dir) status = out_of_memory(index_path);
  for (size_t i = 0; i < index.file_count && !status; ++i) {
    char *shard_path = vlmc_path_join(dir, index.files[i]);
    if (!shard_path) {
      status = out_of_memory(index_path);
      break;
    }
    status = open_shard_file(archive, shard_path, NULL);
    if (status && vlmc_status_code(status) == VLMC_IO_ERROR)
      status = vlmc_status_annotate(status, "%s names a shard that cannot be read: ", index_path);
    free(shard_path);
  }
  if (!status) status = archive_finish(archive);
  if (!status) status = index_verify(&index, archive);
  free(dir);
  free(index.files);
  cJSON_Delete(index.root);
  return status;
}

static bool ends_with(const char *text, const char *suffix) {
  size_t a = strlen(text), b = strlen(suffix);
  return a >= b && strcmp(text + a - b, suffix) == 0;
}

/* Any kind of file counts: a FIFO named model.safetensors is then refused by name when it is
 * mapped ("not a regular file (a FIFO)") instead of being reported as missing. */
static bool path_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static vlmc_status_t open_directory(vlmc_st_archive_t *archive, const char *dir) {
  char *single = vlmc_path_join(dir, "model.safetensors");
  char *index = vlmc_path_join(dir, "model.safetensors.index.json");
  vlmc_status_t status = NULL;
  if (!single || !index) {
    status = out_of_memory(dir);
  } else if (path_exists(single)) {
    status = open_shard_file(archive, single, NULL);
    if (!status) status = archive_finish(archive);
  } else if (path_exists(index)) {
    status = open_index(archive, index);
  } else {
    status = vlmc_status_make(
        VLMC_NOT_FOUND, "%s: holds neither model.safetensors nor model.safetensors.index.json",
        dir);
  }
  free(single);
  free(index);
  return status;
}

static vlmc_status_t open_path(vlmc_st_archive_t *archive, const char *path) {
  struct stat st;
  if (stat(path, &st) != 0)
    return vlmc_status_make(VLMC_IO_ERROR, "%s: cannot open: %s", path, strerror(errno));
  if (S_ISDIR(st.st_mode)) return open_directory(archive, path);
  if (ends_with(path, ".json")) return open_index(archive, path);
  VLMC_RETURN_IF_ERROR(open_shard_file(archive, path, NULL));
  return archive_finish(archive);
}

vlmc_status_t vlmc_st_archive_open(const char *path, vlmc_st_archive_t **out_archive) {
  *out_archive = NULL;
  vlmc_st_archive_t *archive = archive_create();
  if (!archive) return out_of_memory(path);
  vlmc_status_t status = open_path(archive, path);
  if (status) {
    vlmc_st_archive_destroy(archive);
    return status;
  }
  *out_archive = archive;
  return NULL;
}

vlmc_status_t vlmc_st_archive_open_memory(const void *data, size_t size, const char *label,
                                          vlmc_st_archive_t **out_archive) {
  *out_archive = NULL;
  vlmc_st_archive_t *archive = archive_create();
  if (!archive) return out_of_memory(label);
  int shard = archive_add_shard(archive, label);
  vlmc_status_t status = shard < 0 ? out_of_memory(label) : parse_shard(archive, shard, data, size);
  if (!status) status = archive_finish(archive);
  if (status) {
    vlmc_st_archive_destroy(archive);
    return status;
  }
  *out_archive = archive;
  return NULL;
}

/* ---- queries ----------------------------------------------------------------------------- */

size_t vlmc_st_archive_count(const vlmc_st_archive_t *archive) {
  return archive->tensor_count;
}

const vlmc_st_tensor_t *vlmc_st_archive_tensor(const vlmc_st_archive_t *archive, size_t index) {
  assert(index < archive->tensor_count);
  return &archive->tensors[index];
}

const vlmc_st_tensor_t *vlmc_st_archive_find(const vlmc_st_archive_t *archive, const char *name) {
  size_t lo = 0, hi = archive->tensor_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int cmp = strcmp(archive->tensors[mid].name, name);
    if (cmp == 0) return &archive->tensors[mid];
    if (cmp < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

const char *vlmc_st_archive_shard_path(const vlmc_st_archive_t *archive, int shard) {
  assert(shard >= 0 && shard < archive->shard_count);
  return archive->shards[shard].path;
}

bool vlmc_st_archive_file_offset(const vlmc_st_archive_t *archive, const vlmc_st_tensor_t *t,
                                 uint64_t *out_offset) {
  if (t->shard < 0 || t->shard >= archive->shard_count) return false;
  const vlmc_mapped_file_t *m = &archive->shards[t->shard].mapping;
  const unsigned char *base = m->data, *at = t->data;
  if (!base || at < base || at > base + m->size) return false;
  *out_offset = (uint64_t)(at - base);
  return true;
}

int vlmc_st_archive_shard_count(const vlmc_st_archive_t *archive) {
  return archive->shard_count;
}

size_t vlmc_st_archive_metadata_count(const vlmc_st_archive_t *archive) {
  return archive->metadata_count;
}

const vlmc_st_metadata_t *vlmc_st_archive_metadata(const vlmc_st_archive_t *archive, size_t index) {
  assert(index < archive->metadata_count);
  return &archive->metadata[index];
}

const char *vlmc_st_archive_metadata_find(const vlmc_st_archive_t *archive, const char *key) {
  for (size_t i = 0; i < archive->metadata_count; ++i)
    if (strcmp(archive->metadata[i].key, key) == 0) return archive->metadata[i].value;
  return NULL;
}

/* ---- conversion to f32 ------------------------------------------------------------------- */

/* Elements are read with memcpy: tensor data inside a mapping is not aligned. */
static float element_to_f32(vlmc_st_dtype_t dtype, const unsigned char *p) {
  switch (dtype) {
    case VLMC_ST_F32: {
      float v;
      memcpy(&v, p, 4);
      return v;
    }
    case VLMC_ST_F16: {
      uint16_t v;
      memcpy(&v, p, 2);
      return vlmc_f16_to_f32(v);
    }
    case VLMC_ST_BF16: {
      uint16_t v;
      memcpy(&v, p, 2);
      return vlmc_bf16_to_f32(v);
    }
    case VLMC_ST_F64: {
      double v;
      memcpy(&v, p, 8);
      return (float)v;
    }
    case VLMC_ST_I64: {
      int64_t v;
      memcpy(&v, p, 8);
      return (float)v;
    }
    case VLMC_ST_I32: {
      int32_t v;
      memcpy(&v, p, 4);
      return (float)v;
    }
    case VLMC_ST_I16: {
      int16_t v;
      memcpy(&v, p, 2);
      return (float)v;
    }
    case VLMC_ST_I8: return (float)(int8_t)p[0];
    case VLMC_ST_U8: return (float)p[0];
    case VLMC_ST_BOOL: return p[0] ? 1.0f : 0.0f;
    case VLMC_ST_U32: {
      uint32_t v;
      memcpy(&v, p, 4);
      return (float)v;
    }
  }
  assert(!"unreachable dtype");
  return 0.0f;
}

vlmc_status_t vlmc_st_tensor_to_f32(const vlmc_st_tensor_t *tensor, float *out, size_t count) {
  size_t numel = vlmc_st_tensor_numel(tensor);
  if (count != numel)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "tensor '%.200s': asked for %zu f32 values, it holds %zu", tensor->name,
                            count, numel);
  if (!dtype_valid(tensor->dtype) || dtype_table[tensor->dtype].block_elems != 1)
    return vlmc_status_make(VLMC_UNSUPPORTED, "tensor '%.200s': no f32 conversion for dtype %s",
                            tensor->name, vlmc_st_dtype_name(tensor->dtype));
  size_t size = dtype_table[tensor->dtype].block_bytes;
  const unsigned char *data = tensor->data;
  for (size_t i = 0; i < count; ++i) out[i] = element_to_f32(tensor->dtype, data + i * size);
  return NULL;
}

/* The exponent field of each float dtype, and its mantissa: all exponent bits set is an
 * infinity (mantissa 0) or a NaN. Bit tests, so that the scan of a 3B checkpoint costs about
 * what its checksum does. */
typedef struct {
  uint64_t exponent, mantissa;
  size_t size;
} float_bits_t;

static bool float_bits(vlmc_st_dtype_t dtype, float_bits_t *out) {
  switch (dtype) {
    case VLMC_ST_F32: *out = (float_bits_t){0x7f800000u, 0x007fffffu, 4}; return true;
    case VLMC_ST_F16: *out = (float_bits_t){0x7c00u, 0x03ffu, 2}; return true;
    case VLMC_ST_BF16: *out = (float_bits_t){0x7f80u, 0x007fu, 2}; return true;
    case VLMC_ST_F64:
      *out = (float_bits_t){0x7ff0000000000000ull, 0x000fffffffffffffull, 8};
      return true;
    default: return false;
  }
}

static uint64_t load_bits(const unsigned char *p, size_t size) {
  if (size == 2) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
  }
  if (size == 4) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

bool vlmc_st_tensor_find_nonfinite(const vlmc_st_tensor_t *tensor, uint64_t *out_index,
                                   bool *out_is_nan) {
  float_bits_t f;
  if (!float_bits(tensor->dtype, &f)) return false;
  const unsigned char *data = tensor->data;
  size_t count = tensor->nbytes / f.size;
  for (size_t i = 0; i < count; ++i) {
    uint64_t bits = load_bits(data + i * f.size, f.size);
    if ((bits & f.exponent) != f.exponent) continue;
    *out_index = i;
    *out_is_nan = (bits & f.mantissa) != 0;
    return true;
  }
  return false;
}

/* ---- writing ----------------------------------------------------------------------------- */


static vlmc_status_t check_write_tensor(const char *path, const vlmc_st_write_tensor_t *t,
                                        uint64_t *out_nbytes) {
  if (!t->name || !t->name[0] || strcmp(t->name, "__metadata__") == 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: a tensor needs a name other than '%s'",
                            path, t->name ? t->name : "");
  if (!dtype_valid(t->dtype))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: tensor '%s': invalid dtype %d", path,
                            t->name, (int)t->dtype);
  if (t->rank < 0 || t->rank > VLMC_ST_MAX_RANK || (t->rank > 0 && !t->shape))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: tensor '%s': rank %d is not in 0..%d", path,
                            t->name, t->rank, VLMC_ST_MAX_RANK);
  uint64_t count = 1;
  for (int i = 0; i < t->rank; ++i) {
    if (t->shape[i] < 0 || !vlmc_mul_u64(count, (uint64_t)t->shape[i], &count))
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: tensor '%s': shape[%d] = %lld is invalid",
                              path, t->name, i, (long long)t->shape[i]);
  }
  if (!vlmc_st_dtype_nbytes(t->dtype, count, out_nbytes) || *out_nbytes > SIZE_MAX)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: tensor '%s': byte size overflows", path,
                            t->name);
  if (*out_nbytes > 0 && !t->data)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: tensor '%s': data is NULL", path, t->name);
  return NULL;
}

static vlmc_status_t check_unique_names(const char *path, const vlmc_st_write_tensor_t *tensors,
                                        size_t count) {
  if (count < 2) return NULL;
  const char **names = malloc(count * sizeof *names);
  if (!names) return out_of_memory(path);
  for (size_t i = 0; i < count; ++i) names[i] = tensors[i].name;
  qsort(names, count, sizeof *names, compare_strings);
  vlmc_status_t status = NULL;
  for (size_t i = 1; i < count && !status; ++i)
    if (strcmp(names[i - 1], names[i]) == 0)
      status =
          vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: tensor '%s' is given twice", path, names[i]);
  free(names);
  return status;
}

/* Builds the padded JSON header; sizes[i] receives tensor i's byte size. */
static vlmc_status_t build_header(const char *path, const vlmc_st_write_tensor_t *tensors,
                                  size_t count, uint64_t *sizes, vlmc_strbuf_t *header) {
  vlmc_strbuf_puts(header, "{\"__metadata__\":{\"format\":\"pt\"}");
  uint64_t offset = 0;
  for (size_t i = 0; i < count; ++i) {
    const vlmc_st_write_tensor_t *t = &tensors[i];
    VLMC_RETURN_IF_ERROR(check_write_tensor(path, t, &sizes[i]));
    vlmc_strbuf_putc(header, ',');
    vlmc_json_write_string(header, t->name);
    vlmc_strbuf_printf(header, ":{\"dtype\":\"%s\",\"shape\":[", vlmc_st_dtype_name(t->dtype));
    for (int d = 0; d < t->rank; ++d)
      vlmc_strbuf_printf(header, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    uint64_t end;
    if (!vlmc_add_u64(offset, sizes[i], &end))
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: total size overflows", path);
    vlmc_strbuf_printf(header, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                       (unsigned long long)end);
    offset = end;
  }
  vlmc_strbuf_putc(header, '}');
  while (header->len % 8 != 0) vlmc_strbuf_putc(header, ' ');
  if (header->failed) return out_of_memory(path);
  return NULL;
}

static vlmc_status_t write_stream(FILE *stream, const char *path, const vlmc_strbuf_t *header,
                                  const vlmc_st_write_tensor_t *tensors, size_t count,
                                  const uint64_t *sizes) {
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = (unsigned char)((uint64_t)header->len >> (8 * i));
  bool ok = fwrite(length, 1, 8, stream) == 8 &&
            fwrite(header->data, 1, header->len, stream) == header->len;
  for (size_t i = 0; i < count && ok; ++i)
    ok = sizes[i] == 0 || fwrite(tensors[i].data, 1, (size_t)sizes[i], stream) == sizes[i];
  if (!ok) return vlmc_status_make(VLMC_IO_ERROR, "%s: write failed: %s", path, strerror(errno));
  return NULL;
}

/* Through a temporary file renamed over `path` (support/file.h): a reader never sees a half
 * written file, nor a "path.partial" left behind by a crash under the target's own name. */
static vlmc_status_t write_file_atomically(const char *path, const vlmc_strbuf_t *header,
                                           const vlmc_st_write_tensor_t *tensors, size_t count,
                                           const uint64_t *sizes) {
  vlmc_output_t output;
  VLMC_RETURN_IF_ERROR(vlmc_output_open(path, &output));
  vlmc_status_t status = write_stream(output.stream, path, header, tensors, count, sizes);
  if (status) {
    vlmc_output_discard(&output);
    return status;
  }
  return vlmc_output_commit(&output);
}

vlmc_status_t vlmc_st_write_file(const char *path, const vlmc_st_write_tensor_t *tensors,
                                 size_t count) {
  uint64_t *sizes = calloc(count ? count : 1, sizeof *sizes);
  if (!sizes) return out_of_memory(path);
  vlmc_strbuf_t header;
  vlmc_strbuf_init(&header);
  vlmc_status_t status = build_header(path, tensors, count, sizes, &header);
  if (!status) status = check_unique_names(path, tensors, count);
  if (!status) status = write_file_atomically(path, &header, tensors, count, sizes);
  vlmc_strbuf_deinit(&header);
  free(sizes);
  return status;
}
