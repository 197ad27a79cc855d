/* vlmc's own loader for the cpu kernels' shared object (section "kernels.cpu",
 * docs/artifact.md), in the spirit of IREE's embedded-ELF loader. It replaces dlopen: the
 * bytes come from an artifact that anyone can edit and reseal (the checksums are XXH64, not
 * signatures), and dlopen would run the image's constructors, resolve any libc function it
 * names and trust every header.
 *
 * The bytes are untrusted. Refused, each by name, with the origin in the message:
 * - anything but a little-endian ELF64 x86-64 shared object (ET_DYN) whose headers, program
 *   headers and section headers lie inside the bytes;
 * - PT_LOAD segments outside the file, out of order, sharing a page, asking to be writable and
 *   executable at once, with an odd alignment, or spanning more than VLMC_ELF_MAX_SPAN;
 * - PT_INTERP, PT_TLS, constructors and destructors (DT_INIT, DT_INIT_ARRAY, DT_PREINIT_ARRAY,
 *   DT_FINI, DT_FINI_ARRAY), text relocations, ifunc resolvers, REL and RELR relocations;
 * - relocation types other than R_X86_64_NONE, _64, _GLOB_DAT, _JUMP_SLOT and _RELATIVE, a
 *   relocation that writes outside a writable segment;
 * - an imported symbol that is not on the allowlist of math and memory functions (expf,
 *   memset, ...: vlmc_elf_allowed_import). DT_NEEDED is ignored: nothing else is loaded, and
 *   imports resolve to this process's own functions.
 *
 * Loading maps one anonymous read-write region for the whole span, copies the segments
 * (bss stays zero), applies the relocations, then gives each segment its own protection
 * (never writable and executable at once; PT_GNU_RELRO read-only). Nothing of the image runs
 * here: the only code that ever runs is what the caller calls through vlmc_elf_symbol. */
#ifndef VLMC_RUNTIME_BACKENDS_CPU_ELF_LOADER_H
#define VLMC_RUNTIME_BACKENDS_CPU_ELF_LOADER_H

#include <stdbool.h>
#include <stddef.h>

#include "support/status.h"

enum { VLMC_ELF_MAX_SPAN = 256 << 20 }; /* bytes of address space one image may take */

typedef struct vlmc_elf_image_s vlmc_elf_image_t;
/* An entry point; the caller casts it to the function's real type before calling it. */
typedef void (*vlmc_elf_fn_t)(void);

/* Validates `len` bytes without mapping or running anything (`vlmc inspect --verify`).
 * `origin` names the bytes in messages ("m.vlmc: section 'kernels.cpu'"). */
vlmc_status_t vlmc_elf_check(const char *origin, const void *data, size_t len);

/* Validates and maps the bytes (which need not outlive the image). */
vlmc_status_t vlmc_elf_load(const char *origin, const void *data, size_t len,
                            vlmc_elf_image_t **out);

/* A defined function symbol of .dynsym inside an executable segment; false when there is no
 * such symbol (data, undefined and ifunc symbols are never returned). */
bool vlmc_elf_symbol(const vlmc_elf_image_t *image, const char *name, vlmc_elf_fn_t *out);

void vlmc_elf_unload(vlmc_elf_image_t *image);

/* The allowlist of imports, for messages and tests: index 0.. until NULL. */
const char *vlmc_elf_allowed_import(size_t index);

#endif
