/* The npu target's tile program: placed tiles, buffers at explicit addresses, locks, buffer
 * descriptors (BDs), DMA channels, per-core loops of acquire / call microkernel / release, and
 * a host runtime sequence of shim DMA transfers and waits. It mirrors the concepts of mlir-aie
 * (../shared/NPU.md A.5, A.7) in a syntax of our own, with none of its code. A compiler emits
 * it, `vlmc inspect` prints it, a simulator (later) executes it. Everything is simulated: the
 * project has no NPU hardware.
 *
 * Text form (canonical: what vlmc_npu_program_print writes, and parse(print(p)) prints the same
 * bytes). One statement a line (or separated by ';'); '#' starts a comment; names are
 * [A-Za-z_][A-Za-z0-9_]* (at most 63 characters), one namespace for all of them; numbers are
 * decimal, 0..2^40. Sizes and strides of patterns are in 32-bit words, offsets, addresses and
 * byte counts in bytes.
 *
 *   program   := statement*
 *   statement := "device" NAME                                        (exactly one, first)
 *              | "arg" INT "bytes" INT                                 host buffer INT's size
 *              | "tile" NAME KIND "col" INT "row" INT                  KIND: compute|memory|shim
 *              | "buffer" NAME "tile" NAME "addr" INT "bytes" INT
 *              | "lock" NAME "tile" NAME "init" INT
 *              | "bd" NAME "tile" NAME "buffer" NAME "offset" INT "dims" DIMS bd_opt*
 *              | "channel" NAME "tile" NAME DIR INT "bd" NAME          DIR: in (S2MM) | out (MM2S)
 *              | "core" NAME "{" core_stmt* "}"                        NAME: a compute tile
 *              | "runtime" "{" rt_stmt* "}"                            (at most one)
 *   DIMS      := SIZE "x" STRIDE ("," SIZE "x" STRIDE)*               d0 (innermost) first
 *   bd_opt    := "repeat" INT | "acquire" NAME INT | "release" NAME INT | "next" NAME
 *   core_stmt := "loop" INT "{" core_stmt* "}"
 *              | "acquire" NAME INT                                   until lock >= INT; subtract
 *              | "release" NAME INT                                   add INT to the lock
 *              | "call" KERNEL ARG*                                   ARG: a buffer NAME or an INT
 *   rt_stmt   := "dma" NAME "tile" NAME DIR INT "arg" INT "offset" INT "dims" DIMS ["repeat" INT]
 *              | "wait" NAME                                          until dma NAME is done
 *              | "write" NAME "offset" INT "value" INT                a runtime parameter
 *
 * A runtime `dma` on a shim tile's `out` channel reads host argument `arg` (MM2S: host to
 * array), on an `in` channel writes it (S2MM). Canonical order: device, args, tiles, buffers,
 * locks, bds, channels, cores, runtime; each list in the order written; optional BD fields as
 * in bd_opt above; blocks indented by two spaces.
 *
 * Example:
 *   device npu2
 *   tile s0 shim col 0 row 0
 *   tile c0 compute col 0 row 2
 *   buffer x0 tile c0 addr 0 bytes 1024
 *   lock full tile c0 init 0
 *   lock empty tile c0 init 1
 *   bd in0 tile c0 buffer x0 offset 0 dims 256x1 acquire empty 1 release full 1 next in0
 *   channel c0_in tile c0 in 0 bd in0
 *   core c0 {
 *     loop 4 {
 *       acquire full 1
 *       call rmsnorm x0 256
 *       release empty 1
 *     }
 *   }
 *   runtime {
 *     dma load tile s0 out 0 arg 0 offset 0 dims 256x1 repeat 4
 *     wait load
 *   }
 *
 * The parser refuses malformed text with "FILE:LINE: error: ..." (unknown keyword, missing or
 * extra field, bad number, duplicate name, unbalanced or too deep braces) and bounds every
 * list. The static checker (vlmc_npu_program_check) then refuses, by a named rule, a program
 * that breaks a limit of the device; rules that need execution (deadlock, lock misuse at run
 * time, host bounds of computed addresses) are the simulator's, later. */
#ifndef VLMC_ARTIFACT_NPU_PROGRAM_H
#define VLMC_ARTIFACT_NPU_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "artifact/npu_device.h"
#include "support/arena.h"
#include "support/status.h"
#include "support/strbuf.h"

enum {
  VLMC_NPU_MAX_DIMS = 4,           /* dims the text can hold; the device may allow fewer */
  VLMC_NPU_MAX_NAME = 63,          /* characters of a name */
  VLMC_NPU_MAX_ITEMS = 4096,       /* entries of each list (tiles, buffers, ...; core ops) */
  VLMC_NPU_MAX_CALL_ARGS = 16,     /* arguments of one microkernel call */
  VLMC_NPU_MAX_DEPTH = 8,          /* nesting of braces */
};

typedef enum { VLMC_NPU_DIR_IN = 0, VLMC_NPU_DIR_OUT } vlmc_npu_dir_t; /* S2MM, MM2S */

typedef struct {
  int64_t size, stride; /* words */
} vlmc_npu_dim_t;

/* An n-D address pattern: d0 innermost, then repeated `repeat` times. */
typedef struct {
  int ndims;
  vlmc_npu_dim_t dims[VLMC_NPU_MAX_DIMS];
  int64_t repeat; /* 1 unless given */
} vlmc_npu_pattern_t;

typedef struct {
  const char *lock; /* NULL: none */
  int64_t value;
} vlmc_npu_lock_use_t;

typedef struct {
  const char *name;
  vlmc_npu_tile_kind_t kind;
  int64_t col, row;
  uint32_t line;
} vlmc_npu_tile_t;

typedef struct {
  const char *name, *tile;
  int64_t addr, bytes;
  uint32_t line;
} vlmc_npu_buffer_t;

typedef struct {
  const char *name, *tile;
  int64_t init;
  uint32_t line;
} vlmc_npu_lock_t;

typedef struct {
  const char *name, *tile, *buffer;
  int64_t offset; /* bytes into the buffer */
  vlmc_npu_pattern_t pattern;
  vlmc_npu_lock_use_t acquire, release;
  const char *next; /* NULL: the chain ends */
  uint32_t line;
} vlmc_npu_bd_t;

typedef struct {
  const char *name, *tile;
  vlmc_npu_dir_t dir;
  int64_t index;
  const char *bd; /* the first BD of the channel's chain */
  uint32_t line;
} vlmc_npu_channel_t;

typedef struct {
  int64_t index, bytes;
  uint32_t line;
} vlmc_npu_arg_t;

typedef enum {
  VLMC_NPU_OP_LOOP = 0, /* count; the body runs to the matching END */
  VLMC_NPU_OP_END,
  VLMC_NPU_OP_ACQUIRE, /* name: lock, value */
  VLMC_NPU_OP_RELEASE,
  VLMC_NPU_OP_CALL, /* name: microkernel, args */
} vlmc_npu_op_kind_t;

typedef struct {
  vlmc_npu_op_kind_t kind;
  const char *name;
  int64_t value; /* loop count, lock amount */
  const char **args; /* CALL: buffer names or decimal constants, as written */
  int nargs;
  uint32_t line;
} vlmc_npu_core_op_t;

typedef struct {
  const char *tile;
  vlmc_npu_core_op_t *ops; /* flat: LOOP ... END brackets */
  size_t op_count, op_capacity;
  uint32_t line;
} vlmc_npu_core_t;

typedef enum {
  VLMC_NPU_RT_DMA = 0,
  VLMC_NPU_RT_WAIT,
  VLMC_NPU_RT_WRITE,
} vlmc_npu_rt_kind_t;

typedef struct {
  vlmc_npu_rt_kind_t kind;
  const char *name; /* DMA: the task's name; WAIT: the task waited for; WRITE: the buffer */
  const char *tile; /* DMA */
  vlmc_npu_dir_t dir;
  int64_t channel, arg, offset; /* offset: bytes (DMA: into the arg; WRITE: into the buffer) */
  vlmc_npu_pattern_t pattern;
  int64_t value; /* WRITE */
  uint32_t line;
} vlmc_npu_rt_op_t;

/* A growable list; count <= VLMC_NPU_MAX_ITEMS. */
#define VLMC_NPU_LIST(type) \
  struct {                  \
    type *items;            \
    size_t count, capacity; \
  }

typedef struct {
  vlmc_arena_t arena; /* names and call arguments */
  const char *filename; /* in messages; "npu.program" unless parsed from a named text */
  const char *device;
  uint32_t device_line;
  VLMC_NPU_LIST(vlmc_npu_arg_t) args;
  VLMC_NPU_LIST(vlmc_npu_tile_t) tiles;
  VLMC_NPU_LIST(vlmc_npu_buffer_t) buffers;
  VLMC_NPU_LIST(vlmc_npu_lock_t) locks;
  VLMC_NPU_LIST(vlmc_npu_bd_t) bds;
  VLMC_NPU_LIST(vlmc_npu_channel_t) channels;
  VLMC_NPU_LIST(vlmc_npu_core_t) cores;
  VLMC_NPU_LIST(vlmc_npu_rt_op_t) runtime;
  int has_runtime;
  uint32_t runtime_line;
} vlmc_npu_program_t;

void vlmc_npu_program_init(vlmc_npu_program_t *program);
void vlmc_npu_program_deinit(vlmc_npu_program_t *program);

/* Parses `text` (not NUL-terminated; `len` bytes) into an initialised program. `filename` names
 * the text in messages ("FILE:LINE: error: ..."). On error the program is left empty (still
 * initialised). Names are not resolved here: vlmc_npu_program_check does that. */
vlmc_status_t vlmc_npu_program_parse(const char *filename, const char *text, size_t len,
                                     vlmc_npu_program_t *program) VLMC_MUST_USE;

/* The canonical text (appended to `out`). */
void vlmc_npu_program_print(const vlmc_npu_program_t *program, vlmc_strbuf_t *out);

/* The static rules, X(ID, "name"). Their names appear in messages as "rule NAME". */
#define VLMC_NPU_RULES(X)                                                                  \
  X(DEVICE_MISMATCH, "device_mismatch")         /* program's device is not the one given */ \
  X(UNDEFINED_NAME, "undefined_name")           /* a reference to no such tile/buffer/... */ \
  X(TILE_OUTSIDE_ARRAY, "tile_outside_array")   /* col/row outside the device's array */    \
  X(TILE_KIND, "tile_kind")                     /* kind not that of its row; core off compute */ \
  X(TILE_POSITION_TAKEN, "tile_position_taken") /* two tiles at one col/row */              \
  X(NOT_REACHABLE, "not_reachable")             /* a reference to another tile's resource */ \
  X(CAPACITY_EXCEEDED, "capacity_exceeded")     /* buffers (+ stack) over the tile's memory */ \
  X(BUFFER_OVERLAP, "buffer_overlap")           /* two buffers share bytes of a tile */     \
  X(BD_COUNT_EXCEEDED, "bd_count_exceeded")                                                 \
  X(LOCK_COUNT_EXCEEDED, "lock_count_exceeded")                                             \
  X(CHANNEL_COUNT_EXCEEDED, "channel_count_exceeded") /* index past the channels, or twice */ \
  X(BD_LIMIT, "bd_limit")                       /* dims, size, repeat, stride, granularity */ \
  X(BD_OUT_OF_BOUNDS, "bd_out_of_bounds")       /* the pattern leaves its buffer */          \
  X(HOST_OUT_OF_BOUNDS, "host_out_of_bounds")   /* a runtime dma leaves its host arg */      \
  X(LOCK_VALUE, "lock_value_out_of_range")      /* init or acquire/release amount */        \
  X(UNKNOWN_MICROKERNEL, "unknown_microkernel") /* not in the fixed library */

typedef enum {
  VLMC_NPU_RULE_NONE = 0,
#define VLMC_NPU_RULE_ENUM_(id, name) VLMC_NPU_RULE_##id,
  VLMC_NPU_RULES(VLMC_NPU_RULE_ENUM_)
#undef VLMC_NPU_RULE_ENUM_
  VLMC_NPU_RULE_COUNT,
} vlmc_npu_rule_t;

/* "capacity_exceeded", ...; "none" for VLMC_NPU_RULE_NONE. */
const char *vlmc_npu_rule_name(vlmc_npu_rule_t rule);

/* The fixed microkernel library (gemv_q4nx, gemm_bf16, rmsnorm, rope, silu_mul, softmax_online,
 * attention_online, add, copy): index `i`, NULL past the end. */
const char *vlmc_npu_microkernel_at(int i);

/* Checks the program against the device's static limits. The first broken rule is returned as
 * a status "FILE:LINE: rule NAME: <item> ...: <what and the limit>" and in *out_rule (may
 * be NULL; VLMC_NPU_RULE_NONE when the program passes).
 * Not checked here (the simulator's dynamic rules, later): deadlock, lock misuse at run time
 * (release above the max, an acquire never satisfied), BD chains that starve a channel,
 * program-memory size of the cores, stream routing. */
vlmc_status_t vlmc_npu_program_check(const vlmc_npu_program_t *program,
                                     const vlmc_npu_device_t *device,
                                     vlmc_npu_rule_t *out_rule) VLMC_MUST_USE;

#endif
