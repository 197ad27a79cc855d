/* The `cpu` backend: the generated kernels of an artifact (sections "kernels.cpu", a shared
 * object, and "kernels.cpu.json", its table; docs/artifact.md) loaded without LLVM or MLIR:
 * the shared object is validated and mapped by vlmc's own ELF loader (elf_loader.h), never
 * dlopen'ed, so nothing of it runs but the table's kernels and it imports only allowlisted
 * math and memory functions. Registered as `vlmc_backend_cpu` (runtime/backend.h); the
 * program walker (runtime/program.h) calls it for every dispatch region.
 *
 * Each region call: check the inputs' storage against the kernel's signature, place the
 * output (the walker's memory-plan slot, a grown KV cache, or a fresh buffer), evaluate the
 * work count from the bound symbols, and split it over the thread pool (small work runs on
 * the calling thread). Kernels write every output element: with VLMC_CPU_POISON=1 in the
 * environment outputs are filled with 0xFF first (kernel tests). VLMC_CPU_PROFILE=1 prints
 * the time per kernel when the backend is destroyed. */
#ifndef VLMC_RUNTIME_BACKENDS_CPU_BACKEND_H
#define VLMC_RUNTIME_BACKENDS_CPU_BACKEND_H

typedef struct vlmc_cpu_backend_s vlmc_cpu_backend_t;

#endif
