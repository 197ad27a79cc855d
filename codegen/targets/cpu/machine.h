/* The machine a cpu kernel is generated for, as the templates size their tiles from it: the
 * vector width and register count of the instruction set the --cpu level allows, the caches
 * of one core, and whether it has a bf16 dot product. One row per level (portable, x86-64-v2,
 * v3, v4); `native` reads the host's CPU features (LLVM) and cache sizes (sysconf). Every cpu
 * template reads it the same way (vlmc_cpu_emit_machine), so a new tile decision is a field
 * here, not a constant in one template. */
#ifndef VLMC_CODEGEN_TARGETS_CPU_MACHINE_H
#define VLMC_CODEGEN_TARGETS_CPU_MACHINE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
  int vector_width;     /* f32 lanes of one vector register: 4 (SSE2), 8 (AVX2), 16 (AVX-512) */
  int vector_registers; /* architectural vector registers: 16, or 32 with AVX-512 */
  int64_t l1d_bytes;    /* level-1 data cache of one core */
  int64_t l2_bytes;     /* level-2 cache of one core (or the share of one core) */
  bool bf16_dot;        /* AVX512_BF16: vdpbf16ps (bf16 pairs into f32) */
} vlmc_cpu_machine_t;

/* Cache sizes assumed when the level names no machine (portable, x86-64-v2..v4): what any
 * x86-64 of the last decade has at least. */
enum { VLMC_CPU_DEFAULT_L1D = 32 * 1024, VLMC_CPU_DEFAULT_L2 = 512 * 1024 };

/* The machine for an LLVM cpu name ("x86-64", "x86-64-v3", "x86-64-v4", "znver5", ...) and
 * feature string ("+avx2,-avx512f,+avx512bf16,...", exact names, as LLVM writes them; "" for a
 * named level); l1d / l2 in bytes, 0 for the defaults. The widest vectors the features allow:
 * AVX-512F (with the x86-64-v4 level or "+avx512f") 16 lanes and 32 registers, AVX2 8, else 4. */
vlmc_cpu_machine_t vlmc_cpu_machine_for(const char *cpu, const char *features, int64_t l1d,
                                        int64_t l2);
/* Whether the comma-separated LLVM feature string enables `name` ("avx512f" matches
 * "+avx512f" only, not "+avx512fp16" or "-avx512f"). */
bool vlmc_cpu_has_feature(const char *features, const char *name);

#endif
