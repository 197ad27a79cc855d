/* From a kernel's MLIR text to native code: the MLIR C API parses it and lowers it to the LLVM
 * dialect with one pass pipeline, translates it to LLVM IR, the LLVM C API adds the uniform
 * entry point the runtime calls, optimises (O3) and emits an object; at the end the objects
 * are linked into one shared object (the system's `cc -shared`, or $VLMC_CC).
 *
 * Entry point ABI (runtime/cpu_backend.c calls it):
 *   void NAME(void *const *buffers, const int64_t *counts, int64_t lo, int64_t hi);
 * buffers[0 .. n) are the kernel's memref arguments in order (inputs, output, symbols),
 * counts[i] their element counts; lo and hi the work range. */
#ifndef VLMC_CODEGEN_CPU_LOWER_H
#define VLMC_CODEGEN_CPU_LOWER_H

#include <stddef.h>

#include "codegen/targets/cpu/machine.h"
#include "support/status.h"

typedef struct vlmc_cpu_lowerer_s vlmc_cpu_lowerer_t;

/* cpu: "portable" (x86-64 baseline, also NULL), "x86-64-v2", "x86-64-v3", "x86-64-v4" or
 * "native".
 * dump_dir: NULL, or a folder that receives NAME.mlir, NAME.lowered.mlir, NAME.ll (after
 * O3) and NAME.s for every kernel. */
vlmc_status_t vlmc_cpu_lowerer_create(const char *cpu, const char *dump_dir,
                                      vlmc_cpu_lowerer_t **out);
void vlmc_cpu_lowerer_destroy(vlmc_cpu_lowerer_t *lowerer);
/* f32 lanes of the target's vector registers (4 for SSE, 8 with AVX2, 16 with AVX-512). */
int vlmc_cpu_lowerer_vector_width(const vlmc_cpu_lowerer_t *lowerer);
/* The machine the kernels are for (machine.h): what templates size their tiles from. */
const vlmc_cpu_machine_t *vlmc_cpu_lowerer_machine(const vlmc_cpu_lowerer_t *lowerer);
/* The cpu target's vector-width option ("4", "8" or "16"): the templates write vectors of
 * that many f32 lanes, with the tile table of such a machine, whatever the cpu level has;
 * wider than its registers, LLVM splits every vector op (slower, same results). What it is
 * for: running the 16-lane (AVX-512) kernel text on a CPU without AVX-512, in tests. */
vlmc_status_t vlmc_cpu_lowerer_set_vector_width(vlmc_cpu_lowerer_t *lowerer, const char *lanes);
/* The CPU name the code is generated for ("x86-64", "x86-64-v3", "znver4", ...). */
const char *vlmc_cpu_lowerer_cpu(const vlmc_cpu_lowerer_t *lowerer);

/* Lowers one kernel: `mlir` defines func.func @<name>_body; the entry point is <name>. */
vlmc_status_t vlmc_cpu_lowerer_add(vlmc_cpu_lowerer_t *lowerer, const char *name,
                                   const char *mlir);
/* Links every kernel added so far into one shared object; *out_so is malloc'd. */
vlmc_status_t vlmc_cpu_lowerer_link(vlmc_cpu_lowerer_t *lowerer, unsigned char **out_so,
                                    size_t *out_len);

#endif
