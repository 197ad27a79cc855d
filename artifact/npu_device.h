/* The NPU device description: the machine the npu target's tile programs are checked against
 * (artifact/npu_program.h) and, later, simulated on. Two devices, as a table in code:
 *
 *   npu1  XDNA1 / AIE2 (Phoenix, Hawk Point): 4 usable columns x (shim + memory + 4 compute rows)
 *   npu2  XDNA2 / AIE2P (Strix, Strix Halo, Krackan): 8 columns x (shim + memory + 4 compute rows)
 *
 * Row map (mlir-aie docs/Devices.md): row 0 shim tiles, row 1 memory tiles, rows 2..5 compute.
 *
 * Every number is a fact with a short source string ("NPU.md A.2: ..."), kept in the table so
 * that `vlmc inspect` can print where it came from. The uncertain numbers (bf16 MAC rate, clock,
 * achievable L3 bandwidth, per-command overhead) are *parameters*: they have a default from
 * ../shared/NPU.md and a range, and a user may override them by name=value
 * (vlmc_npu_device_set_param). Nothing here is measured on NPU hardware: the project has none. */
#ifndef VLMC_ARTIFACT_NPU_DEVICE_H
#define VLMC_ARTIFACT_NPU_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "support/status.h"
#include "support/strbuf.h"

typedef enum {
  VLMC_NPU_TILE_COMPUTE = 0,
  VLMC_NPU_TILE_MEMORY,
  VLMC_NPU_TILE_SHIM,
  VLMC_NPU_TILE_KIND_COUNT,
} vlmc_npu_tile_kind_t;

/* The facts every tile kind has, in this order (vlmc_npu_tile_fact). */
typedef enum {
  VLMC_NPU_TILE_MEMORY_BYTES = 0,
  VLMC_NPU_TILE_LOCKS,
  VLMC_NPU_TILE_BDS,
  VLMC_NPU_TILE_DMA_IN,  /* S2MM channels: stream into the tile's memory */
  VLMC_NPU_TILE_DMA_OUT, /* MM2S channels: the tile's memory out to a stream */
  VLMC_NPU_TILE_FACT_COUNT,
} vlmc_npu_tile_fact_t;

/* X(ID, "name", "unit"). The per-kind blocks must stay in vlmc_npu_tile_kind_t order and list
 * vlmc_npu_tile_fact_t's facts in order: vlmc_npu_tile_fact indexes them by arithmetic. */
#define VLMC_NPU_TILE_FACTS_OF(X, KIND, kind)                          \
  X(KIND##_MEMORY_BYTES, kind ".memory_bytes", "bytes")                \
  X(KIND##_LOCKS, kind ".locks", "locks")                              \
  X(KIND##_BDS, kind ".bds", "buffer descriptors")                     \
  X(KIND##_DMA_IN, kind ".dma_in", "S2MM channels")                    \
  X(KIND##_DMA_OUT, kind ".dma_out", "MM2S channels")

#define VLMC_NPU_FACTS(X)                                               \
  X(COLUMNS, "columns", "columns")                                      \
  X(SHIM_ROWS, "shim_rows", "rows")                                     \
  X(MEMORY_ROWS, "memory_rows", "rows")                                 \
  X(COMPUTE_ROWS, "compute_rows", "rows")                               \
  VLMC_NPU_TILE_FACTS_OF(X, COMPUTE, "compute")                         \
  VLMC_NPU_TILE_FACTS_OF(X, MEMTILE, "memory")                          \
  VLMC_NPU_TILE_FACTS_OF(X, SHIMTILE, "shim")                           \
  X(STACK_BYTES, "compute.stack_bytes", "bytes")                        \
  X(PROGRAM_BYTES, "compute.program_bytes", "bytes")                    \
  X(BD_MAX_DIMS, "bd.max_dims", "dimensions")                           \
  X(BD_MAX_SIZE, "bd.max_size", "words (d0, d1)")                       \
  X(BD_MAX_REPEAT, "bd.max_repeat", "repeats")                          \
  X(BD_MIN_STRIDE, "bd.min_stride", "words")                            \
  X(BD_MAX_STRIDE, "bd.max_stride", "words")                            \
  X(BD_GRANULARITY, "bd.granularity", "bytes")                          \
  X(LOCK_MAX_VALUE, "lock.max_value", "count")                          \
  X(STREAM_BYTES_PER_CYCLE, "stream_bytes_per_cycle", "bytes/cycle")    \
  X(MACS_INT8, "macs.int8", "MAC/cycle/tile")                           \
  X(MACS_INT16, "macs.int16", "MAC/cycle/tile")                         \
  X(MACS_BF16, "macs.bf16", "MAC/cycle/tile")                           \
  X(CLOCK_GHZ, "clock_ghz", "GHz")                                      \
  X(L3_GBPS, "l3_gbps", "GB/s")                                         \
  X(COMMAND_OVERHEAD_US, "command_overhead_us", "us")

typedef enum {
#define VLMC_NPU_FACT_ENUM_(id, name, unit) VLMC_NPU_##id,
  VLMC_NPU_FACTS(VLMC_NPU_FACT_ENUM_)
#undef VLMC_NPU_FACT_ENUM_
  VLMC_NPU_FACT_COUNT,
} vlmc_npu_fact_id_t;

typedef struct {
  double value;
  const char *source; /* never NULL or empty in a built-in device (test_npu_device checks) */
  bool parameter;     /* overridable by name=value within [min, max] */
  double min, max;
} vlmc_npu_fact_t;

typedef struct {
  const char *name;    /* "npu1", "npu2" (mlir-aie's device names) */
  const char *arch;    /* "AIE2", "AIE2P" */
  const char *summary; /* the products */
  vlmc_npu_fact_t facts[VLMC_NPU_FACT_COUNT];
} vlmc_npu_device_t;

/* The built-in device of that name, or NULL. Borrowed, static. */
const vlmc_npu_device_t *vlmc_npu_device_find(const char *name);
/* The built-in devices, for listing: index 0..count-1, NULL past the end. */
const vlmc_npu_device_t *vlmc_npu_device_at(int index);

/* "columns", "macs.bf16", ...; NULL for an id out of range. */
const char *vlmc_npu_fact_name(vlmc_npu_fact_id_t id);
const char *vlmc_npu_fact_unit(vlmc_npu_fact_id_t id);
/* The fact of that name, or -1. */
int vlmc_npu_fact_lookup(const char *name, size_t len);

double vlmc_npu_device_value(const vlmc_npu_device_t *device, vlmc_npu_fact_id_t id);
/* The value of an integer fact (counts, bytes, limits). */
int64_t vlmc_npu_device_int(const vlmc_npu_device_t *device, vlmc_npu_fact_id_t id);
vlmc_npu_fact_id_t vlmc_npu_tile_fact(vlmc_npu_tile_kind_t kind, vlmc_npu_tile_fact_t fact);
int64_t vlmc_npu_device_tile_int(const vlmc_npu_device_t *device, vlmc_npu_tile_kind_t kind,
                                 vlmc_npu_tile_fact_t fact);

/* Rows: the array is columns x (shim_rows + memory_rows + compute_rows), shim rows first. The
 * kind of the tiles of `row`; false for a row outside the array. */
bool vlmc_npu_device_row_kind(const vlmc_npu_device_t *device, int64_t row,
                              vlmc_npu_tile_kind_t *out_kind);
int64_t vlmc_npu_device_rows(const vlmc_npu_device_t *device);

/* "compute", "memory", "shim". */
const char *vlmc_npu_tile_kind_name(vlmc_npu_tile_kind_t kind);
/* The kind of that name; false if none. */
bool vlmc_npu_tile_kind_lookup(const char *name, size_t len, vlmc_npu_tile_kind_t *out_kind);

/* Overrides one parameter of a (copied) device by "name=value", e.g. "l3_gbps=60". Refused,
 * naming the fact: an unknown name, a fact that is not a parameter, a value that is not a
 * number, or one outside the parameter's range. */
vlmc_status_t vlmc_npu_device_set_param(vlmc_npu_device_t *device, const char *assignment)
    VLMC_MUST_USE;

/* The table as text, one fact a line: name, value, unit, "(parameter, min..max)", source. */
void vlmc_npu_device_print(const vlmc_npu_device_t *device, vlmc_strbuf_t *out);

#endif
