/* The reference executor's results of kernel-test cases, cached on disk so that the targets of
 * one configuration share them: every tests/kernels/ case file runs on up to seven targets
 * (cpu at four vector widths, vulkan, metal), and the reference's f64-accumulated attention and
 * contractions are most of each run (60% of kernel.attention_long_full). A result is computed
 * once per configuration: the first test of a case computes and files it, the others read it.
 *
 * Opt-in: VLMC_KERNEL_TEST_REF_CACHE=DIR (ctest sets it to the build folder's
 * kernel-test-ref-cache/, so the sanitizer build computes its own, under the sanitizers). The key
 * hashes everything the results depend on: the program as the reference runs it (its text,
 * after the target's pipeline tail) and every input and parameter (dtype, shape and bytes);
 * entries live in a folder per executable (its path, size and modification time: a rebuilt
 * reference executor never reads an older one's results, and the first entry of a new build
 * removes the older builds' folders). Entries are written to a temporary file and renamed
 * (concurrent tests see a whole entry or none) and end in a checksum; an entry that does not
 * read back as exactly what it declares is ignored and recomputed. */
#ifndef VLMC_TOOLS_REF_CACHE_H
#define VLMC_TOOLS_REF_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "reference/tensor.h"
#include "support/hash.h"
#include "support/status.h"

typedef struct {
  vlmc_xxh64_state_t h[2]; /* two seeds: a 128-bit key */
  bool enabled;
  char root[4001];         /* VLMC_KERNEL_TEST_REF_CACHE */
  char build[32];          /* "build-<identity>": this executable's folder in root */
  char path[4200];         /* root/build/ref-<key>.bin, once the key is complete ("" before) */
} vlmc_ref_cache_key_t;

/* Whether VLMC_KERNEL_TEST_REF_CACHE names a folder (else no key need be made). */
bool vlmc_ref_cache_wanted(void);
/* Starts a key (enabled when the cache is wanted and the executable can be identified) with
 * the program's text (and whatever else decides the results: the function run, the mode). */
void vlmc_ref_cache_key_init(vlmc_ref_cache_key_t *key, const char *program_text);
void vlmc_ref_cache_key_add_tensor(vlmc_ref_cache_key_t *key, const vlmc_tensor_t *t);

/* true: `count` results read into out[] (owned tensors). false: no usable entry (out[] is
 * left empty), compute and vlmc_ref_cache_store. */
bool vlmc_ref_cache_load(vlmc_ref_cache_key_t *key, vlmc_tensor_t *out, uint32_t count);
/* Files the results under the key; a failure to write only costs the sharing (reported as a
 * status the caller may print and ignore). */
vlmc_status_t vlmc_ref_cache_store(vlmc_ref_cache_key_t *key, const vlmc_tensor_t *results,
                                   uint32_t count);

#endif
