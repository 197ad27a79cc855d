/* Where the runtime finds each parameter's bytes: in the artifact's `params` section (inline,
 * mmapped, zero-copy) or in the original safetensors files (`--params DIR`, for artifacts
 * compiled with `--params external`). Every tensor is checked against the manifest before its
 * first use: dtype, shape and XXH64 checksum, so a damaged or substituted weight is refused by
 * name instead of silently changing the output. */
#ifndef VLMC_RUNTIME_PARAMS_H
#define VLMC_RUNTIME_PARAMS_H

#include <stdbool.h>
#include <stddef.h>

#include "frontend/safetensors.h"
#include "ir/ir.h"
#include "artifact/artifact.h"
#include "artifact/manifest.h"
#include "support/status.h"

typedef struct {
  const void *data;
  vlmc_dtype_t dtype;
  uint32_t rank;
  const int64_t *shape;
  uint64_t nbytes;
} vlmc_param_view_t;

typedef struct vlmc_params_s vlmc_params_t;

/* external_dir is required (and only allowed) when the manifest says the parameters are
 * external. The artifact and manifest must outlive the params object. */
vlmc_status_t vlmc_params_open(const vlmc_artifact_t *artifact, const vlmc_manifest_t *manifest,
                               const char *external_dir, vlmc_params_t **out_params);
void vlmc_params_destroy(vlmc_params_t *params);

/* The bytes of parameter `name`, verified on first access. */
vlmc_status_t vlmc_params_get(vlmc_params_t *params, const char *name, vlmc_param_view_t *out);
/* Resident weights: from now on each parameter is copied, on its first access (the session
 * makes that its opening, by verifying them all), out of the
 * file mapping into anonymous memory (huge pages where the kernel grants them), and the
 * mapping's pages are dropped. Reading the weights then costs one copy at the first forward
 * pass; in exchange every later pass streams them from plain memory, which measured 2.6x
 * faster than page-cache mappings for a 3B decode on the development VM (docs/design.md). */
void vlmc_params_set_resident(vlmc_params_t *params, bool resident);
bool vlmc_params_resident(const vlmc_params_t *params);
/* Bytes copied so far (counted by vlmc_params_verify_all*). */
size_t vlmc_params_resident_bytes(const vlmc_params_t *params);

/* Verifies every parameter now (vlmc inspect --verify, vlmc-run --verify). */
vlmc_status_t vlmc_params_verify_all(vlmc_params_t *params);
/* The same, spread over `threads` threads (copies and checksums are per-core work). */
vlmc_status_t vlmc_params_verify_all_threads(vlmc_params_t *params, uint32_t threads);
/* Progress of the below: `done` of `total` bytes of distinct parameters verified (and copied). */
typedef void (*vlmc_params_progress_fn)(void *ctx, uint64_t done, uint64_t total);
/* vlmc_params_verify_all_threads reporting to fn (from the caller's thread, after each of its
 * parameters: the others' bytes are counted atomically). */
vlmc_status_t vlmc_params_verify_all_progress(vlmc_params_t *params, uint32_t threads,
                                              vlmc_params_progress_fn fn, void *ctx);

#endif
