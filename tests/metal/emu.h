/* The Metal emulation's executor (tests/metal/README.md): an MSL kernel of the metal target
 * compiled as C++ against the stand-in <metal_stdlib> (clang++, cached by content), loaded,
 * and run over a grid one threadgroup at a time with every thread of the threadgroup a thread
 * of execution of its own (a fiber: its own stack and control flow, switched at barriers), so
 * that threadgroup_barrier and the SIMD-group functions mean what they mean on the GPU. A test
 * tool: never linked into the runtime. */
#ifndef VLMC_TESTS_METAL_EMU_H
#define VLMC_TESTS_METAL_EMU_H

#include <stddef.h>
#include <stdint.h>

#include "support/status.h"

typedef struct vlmc_metal_kernel_s vlmc_metal_kernel_t;

/* Compiles kernel `entry` of the MSL translation unit `msl` (`len` bytes) whose buffers are
 * [[buffer(0)]] .. [[buffer(buffers)]] (the last: the push constants). The object is cached
 * under $VLMC_METAL_EMU_CACHE (default /tmp/vlmc-metal-emu-UID) by a hash of what it is made
 * of. Errors name the kernel and show the compiler's first lines. */
vlmc_status_t vlmc_metal_kernel_build(const char *msl, size_t len, const char *entry,
                                      vlmc_metal_kernel_t **out);
/* Runs it over groups[0] x groups[1] x groups[2] threadgroups of threads[0] x [1] x [2]
 * threads (at most 1024), buffers by index. */
vlmc_status_t vlmc_metal_kernel_run(const vlmc_metal_kernel_t *k, void *const *buffers,
                                    const uint32_t threads[3], const uint32_t groups[3]);
void vlmc_metal_kernel_destroy(vlmc_metal_kernel_t *k);

/* The emulated metal backend (emu_backend.c), named "metal". A program that tests with it
 * registers it at start-up (vlmc_backend_register); linking this library defines
 * VLMC_METAL_EMULATION for it. */
#include "runtime/backend.h"
extern const vlmc_backend_iface_t vlmc_backend_metal_emulated;

#endif
