/* The NPU device table (artifact/npu_device.h). Numbers and sources come from ../shared/NPU.md,
 * which cites the vendor documents and code they were read from; the source strings below
 * name the NPU.md section and its primary source. */
#include "artifact/npu_device.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A fixed fact and a parameter (default, range), each with its source. */
#define FACT(v, src) {.value = (v), .source = (src)}
#define PARAM(v, lo, hi, src) \
  {.value = (v), .source = (src), .parameter = true, .min = (lo), .max = (hi)}

static const char *const kFactNames[VLMC_NPU_FACT_COUNT] = {
#define VLMC_NPU_FACT_NAME_(id, name, unit) name,
    VLMC_NPU_FACTS(VLMC_NPU_FACT_NAME_)
#undef VLMC_NPU_FACT_NAME_
};

static const char *const kFactUnits[VLMC_NPU_FACT_COUNT] = {
#define VLMC_NPU_FACT_UNIT_(id, name, unit) unit,
    VLMC_NPU_FACTS(VLMC_NPU_FACT_UNIT_)
#undef VLMC_NPU_FACT_UNIT_
};

/* Sources shared by both devices. */
#define SRC_ROWS "NPU.md A.1: mlir-aie docs/Devices.md row map (0 shim, 1 memtile, 2-5 compute)"
#define SRC_COMPUTE "NPU.md A.2: AM020/UG1603, mlir-aie AIETargetModel.h compute tile"
#define SRC_MEMTILE "NPU.md A.2: UG1603 memory tile, mlir-aie AIETargetModel.h"
#define SRC_SHIM "NPU.md A.2: shim tile, mlir-aie AIETargetModel.h"
#define SRC_SHIM_MEM "NPU.md A.2: a shim tile has no memory (it reaches host DDR)"
#define SRC_STACK "NPU.md A.2/A.7: 1 KB default stack carved from compute data memory"
#define SRC_PROGRAM "NPU.md A.2: program memory 16 KB (1024 x 128-bit bundles)"
#define SRC_BD "NPU.md A.2: mlir-aie dma_memcpy_nd verifier (aie-decompose-large-dma-bd)"
#define SRC_LOCK "NPU.md A.2: locks are semaphores with values 0..63 (UG1603)"
#define SRC_CLOCK "NPU.md A.3: amdxdna npu4_regs.c DPM hclk 1800 MHz (max)"
#define SRC_L3 "NPU.md A.4: ~45 GB/s achieved by FLM decode (3rd-party, derived); 60 optimistic"
#define SRC_OVERHEAD "NPU.md A.4: ~37 us per NPU command (3rd-party measured)"
#define SRC_NPU1_COLUMNS "NPU.md A.1: 5 columns, col 0 irregular; mlir-aie npu1 exposes 4"
#define SRC_NPU1_STREAM "NPU.md A.2: one 32-bit stream, 4 B/cycle on AIE2"
#define SRC_NPU1_BF16 "NPU.md A.3: aie::mmul 4x8x4 bf16 on AIE2, 1/cycle assumed"
#define SRC_NPU2_STREAM "NPU.md A.2: ~8 B/cycle DMA into a core on npu2 (AMD tutorial, measured)"
#define SRC_NPU2_BF16 "NPU.md A.3: 4x8x8 bf16 shape if 1/cycle; FLM's 12 TFLOPS implies ~128"

/* Tile facts in vlmc_npu_tile_fact_t order, for one kind. */
#define COMPUTE_TILE                                                    \
  [VLMC_NPU_COMPUTE_MEMORY_BYTES] = FACT(65536, SRC_COMPUTE),           \
  [VLMC_NPU_COMPUTE_LOCKS] = FACT(16, SRC_COMPUTE),                     \
  [VLMC_NPU_COMPUTE_BDS] = FACT(16, SRC_COMPUTE),                       \
  [VLMC_NPU_COMPUTE_DMA_IN] = FACT(2, SRC_COMPUTE),                     \
  [VLMC_NPU_COMPUTE_DMA_OUT] = FACT(2, SRC_COMPUTE)
#define MEMORY_TILE                                                     \
  [VLMC_NPU_MEMTILE_MEMORY_BYTES] = FACT(524288, SRC_MEMTILE),          \
  [VLMC_NPU_MEMTILE_LOCKS] = FACT(64, SRC_MEMTILE),                     \
  [VLMC_NPU_MEMTILE_BDS] = FACT(48, SRC_MEMTILE),                       \
  [VLMC_NPU_MEMTILE_DMA_IN] = FACT(6, SRC_MEMTILE),                     \
  [VLMC_NPU_MEMTILE_DMA_OUT] = FACT(6, SRC_MEMTILE)
#define SHIM_TILE                                                       \
  [VLMC_NPU_SHIMTILE_MEMORY_BYTES] = FACT(0, SRC_SHIM_MEM),             \
  [VLMC_NPU_SHIMTILE_LOCKS] = FACT(16, SRC_SHIM),                       \
  [VLMC_NPU_SHIMTILE_BDS] = FACT(16, SRC_SHIM),                         \
  [VLMC_NPU_SHIMTILE_DMA_IN] = FACT(2, SRC_SHIM),                       \
  [VLMC_NPU_SHIMTILE_DMA_OUT] = FACT(2, SRC_SHIM)
#define COMMON_LIMITS                                                   \
  [VLMC_NPU_STACK_BYTES] = FACT(1024, SRC_STACK),                       \
  [VLMC_NPU_PROGRAM_BYTES] = FACT(16384, SRC_PROGRAM),                  \
  [VLMC_NPU_BD_MAX_DIMS] = FACT(4, SRC_BD " (4 dims)"),                 \
  [VLMC_NPU_BD_MAX_SIZE] = FACT(1023, SRC_BD " (d0, d1 <= 1023)"),      \
  [VLMC_NPU_BD_MAX_REPEAT] = FACT(64, SRC_BD " (repeat <= 64)"),        \
  [VLMC_NPU_BD_MIN_STRIDE] = FACT(1, SRC_BD " (stride [1:1M])"),        \
  [VLMC_NPU_BD_MAX_STRIDE] = FACT(1048576, SRC_BD " (stride [1:1M])"),  \
  [VLMC_NPU_BD_GRANULARITY] = FACT(4, SRC_BD " (32-bit words)"),        \
  [VLMC_NPU_LOCK_MAX_VALUE] = FACT(63, SRC_LOCK),                       \
  [VLMC_NPU_CLOCK_GHZ] = PARAM(1.8, 0.1, 3.0, SRC_CLOCK),               \
  [VLMC_NPU_L3_GBPS] = PARAM(45, 1, 500, SRC_L3),                       \
  [VLMC_NPU_COMMAND_OVERHEAD_US] = PARAM(37, 0, 100000, SRC_OVERHEAD)

static const vlmc_npu_device_t kDevices[] = {
    {
        .name = "npu1",
        .arch = "AIE2",
        .summary = "XDNA1: Phoenix (7940HS), Hawk Point (8040HS)",
        .facts =
            {
                [VLMC_NPU_COLUMNS] = FACT(4, SRC_NPU1_COLUMNS),
                [VLMC_NPU_SHIM_ROWS] = FACT(1, SRC_ROWS),
                [VLMC_NPU_MEMORY_ROWS] = FACT(1, SRC_ROWS),
                [VLMC_NPU_COMPUTE_ROWS] = FACT(4, SRC_ROWS),
                COMPUTE_TILE,
                MEMORY_TILE,
                SHIM_TILE,
                COMMON_LIMITS,
                [VLMC_NPU_STREAM_BYTES_PER_CYCLE] = FACT(4, SRC_NPU1_STREAM),
                [VLMC_NPU_MACS_INT8] = FACT(256, "NPU.md A.3: aie::mmul 4x8x8 int8 on AIE2"),
                [VLMC_NPU_MACS_INT16] = FACT(64, "NPU.md A.3: aie::mmul 4x4x4 int16 on AIE2"),
                [VLMC_NPU_MACS_BF16] = PARAM(128, 32, 512, SRC_NPU1_BF16),
            },
    },
    {
        .name = "npu2",
        .arch = "AIE2P",
        .summary = "XDNA2: Strix Point (Ryzen AI 300), Strix Halo, Krackan Point",
        .facts =
            {
                [VLMC_NPU_COLUMNS] = FACT(8, "NPU.md A.1: amdnpu.rst, mlir-aie npu2: 8 columns"),
                [VLMC_NPU_SHIM_ROWS] = FACT(1, SRC_ROWS),
                [VLMC_NPU_MEMORY_ROWS] = FACT(1, SRC_ROWS),
                [VLMC_NPU_COMPUTE_ROWS] = FACT(4, SRC_ROWS),
                COMPUTE_TILE,
                MEMORY_TILE,
                SHIM_TILE,
                COMMON_LIMITS,
                [VLMC_NPU_STREAM_BYTES_PER_CYCLE] = FACT(8, SRC_NPU2_STREAM),
                [VLMC_NPU_MACS_INT8] = FACT(512, "NPU.md A.3: aie2p/mm.cc 8x8x8 int8"),
                [VLMC_NPU_MACS_INT16] = FACT(128, "NPU.md A.3: aie2p/mm.cc 4x4x8 int16"),
                [VLMC_NPU_MACS_BF16] = PARAM(256, 32, 1024, SRC_NPU2_BF16),
            },
    },
};

enum { DEVICE_COUNT = (int)(sizeof kDevices / sizeof kDevices[0]) };

static const char *const kTileKindNames[VLMC_NPU_TILE_KIND_COUNT] = {"compute", "memory", "shim"};

const vlmc_npu_device_t *vlmc_npu_device_find(const char *name) {
  for (int i = 0; name && i < DEVICE_COUNT; ++i) {
    if (strcmp(kDevices[i].name, name) == 0) return &kDevices[i];
  }
  return NULL;
}

const vlmc_npu_device_t *vlmc_npu_device_at(int index) {
  return index >= 0 && index < DEVICE_COUNT ? &kDevices[index] : NULL;
}

const char *vlmc_npu_fact_name(vlmc_npu_fact_id_t id) {
  return (unsigned)id < VLMC_NPU_FACT_COUNT ? kFactNames[id] : NULL;
}

const char *vlmc_npu_fact_unit(vlmc_npu_fact_id_t id) {
  return (unsigned)id < VLMC_NPU_FACT_COUNT ? kFactUnits[id] : NULL;
}

int vlmc_npu_fact_lookup(const char *name, size_t len) {
  for (int i = 0; i < VLMC_NPU_FACT_COUNT; ++i) {
    if (strlen(kFactNames[i]) == len && memcmp(kFactNames[i], name, len) == 0) return i;
  }
  return -1;
}

double vlmc_npu_device_value(const vlmc_npu_device_t *device, vlmc_npu_fact_id_t id) {
  return device->facts[id].value;
}

int64_t vlmc_npu_device_int(const vlmc_npu_device_t *device, vlmc_npu_fact_id_t id) {
  return (int64_t)device->facts[id].value;
}

vlmc_npu_fact_id_t vlmc_npu_tile_fact(vlmc_npu_tile_kind_t kind, vlmc_npu_tile_fact_t fact) {
  return (vlmc_npu_fact_id_t)(VLMC_NPU_COMPUTE_MEMORY_BYTES + (int)kind * VLMC_NPU_TILE_FACT_COUNT +
                              (int)fact);
}

int64_t vlmc_npu_device_tile_int(const vlmc_npu_device_t *device, vlmc_npu_tile_kind_t kind,
                                 vlmc_npu_tile_fact_t fact) {
  return vlmc_npu_device_int(device, vlmc_npu_tile_fact(kind, fact));
}

int64_t vlmc_npu_device_rows(const vlmc_npu_device_t *device) {
  return vlmc_npu_device_int(device, VLMC_NPU_SHIM_ROWS) +
         vlmc_npu_device_int(device, VLMC_NPU_MEMORY_ROWS) +
         vlmc_npu_device_int(device, VLMC_NPU_COMPUTE_ROWS);
}

bool vlmc_npu_device_row_kind(const vlmc_npu_device_t *device, int64_t row,
                              vlmc_npu_tile_kind_t *out_kind) {
  int64_t shim = vlmc_npu_device_int(device, VLMC_NPU_SHIM_ROWS);
  int64_t memory = vlmc_npu_device_int(device, VLMC_NPU_MEMORY_ROWS);
  if (row < 0 || row >= vlmc_npu_device_rows(device)) return false;
  *out_kind = row < shim                ? VLMC_NPU_TILE_SHIM
              : row < shim + memory     ? VLMC_NPU_TILE_MEMORY
                                        : VLMC_NPU_TILE_COMPUTE;
  return true;
}

const char *vlmc_npu_tile_kind_name(vlmc_npu_tile_kind_t kind) {
  return (unsigned)kind < VLMC_NPU_TILE_KIND_COUNT ? kTileKindNames[kind] : "?";
}

bool vlmc_npu_tile_kind_lookup(const char *name, size_t len, vlmc_npu_tile_kind_t *out_kind) {
  for (int i = 0; i < VLMC_NPU_TILE_KIND_COUNT; ++i) {
    if (strlen(kTileKindNames[i]) == len && memcmp(kTileKindNames[i], name, len) == 0) {
      *out_kind = (vlmc_npu_tile_kind_t)i;
      return true;
    }
  }
  return false;
}

/* The value of "name=value": a finite decimal number and nothing after it. */
static bool parse_param_value(const char *text, double *out_value) {
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v)) return false;
  *out_value = v;
  return true;
}

vlmc_status_t vlmc_npu_device_set_param(vlmc_npu_device_t *device, const char *assignment) {
  const char *eq = assignment ? strchr(assignment, '=') : NULL;
  if (!eq) {
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "npu device %s: parameter '%s': expected name=value", device->name,
                            assignment ? assignment : "");
  }
  int id = vlmc_npu_fact_lookup(assignment, (size_t)(eq - assignment));
  if (id < 0) {
    return vlmc_status_make(VLMC_NOT_FOUND, "npu device %s: no parameter named '%.*s'",
                            device->name, (int)(eq - assignment), assignment);
  }
  vlmc_npu_fact_t *fact = &device->facts[id];
  if (!fact->parameter) {
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "npu device %s: '%s' is a fixed fact of the device, not a parameter",
                            device->name, kFactNames[id]);
  }
  double value;
  if (!parse_param_value(eq + 1, &value)) {
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "npu device %s: parameter '%s': '%s' is not a number", device->name,
                            kFactNames[id], eq + 1);
  }
  if (value < fact->min || value > fact->max) {
    return vlmc_status_make(VLMC_OUT_OF_RANGE,
                            "npu device %s: parameter '%s' = %g is outside %g..%g", device->name,
                            kFactNames[id], value, fact->min, fact->max);
  }
  fact->value = value;
  return NULL;
}

void vlmc_npu_device_print(const vlmc_npu_device_t *device, vlmc_strbuf_t *out) {
  vlmc_strbuf_printf(out, "device %s (%s, %s) -- simulated, no NPU hardware\n", device->name,
                     device->arch, device->summary);
  for (int i = 0; i < VLMC_NPU_FACT_COUNT; ++i) {
    const vlmc_npu_fact_t *f = &device->facts[i];
    vlmc_strbuf_printf(out, "  %-24s %10g %-20s", kFactNames[i], f->value, kFactUnits[i]);
    if (f->parameter) vlmc_strbuf_printf(out, " (parameter, %g..%g)", f->min, f->max);
    vlmc_strbuf_printf(out, "  [%s]\n", f->source ? f->source : "");
  }
}
