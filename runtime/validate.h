/* The one validation an artifact goes through before anything uses it, shared by the
 * runtime's session open and `vlmc inspect --verify` (docs/artifact.md, "What is validated
 * at open"): every cross-reference between the manifest, the program, the parameters and the
 * kernel tables is checked here, so that nothing after it takes a number of the file on
 * trust. It reads no weights and loads or runs no code from the artifact: the kernel tables
 * are checked by each backend's `check` entry. */
#ifndef VLMC_RUNTIME_VALIDATE_H
#define VLMC_RUNTIME_VALIDATE_H

#include "artifact/artifact.h"
#include "artifact/manifest.h"
#include "ir/ir.h"
#include "support/status.h"

/* Reads the manifest and the program (both required; the program parsed and verified), then
 * checks the parameters against them (vlmc_artifact_check_params) and, for every backend
 * whose sections the artifact carries, its tables against the program (the backend's check:
 * storage, signatures, work counts, coverage). On success *out_manifest is filled (the caller
 * deinits it) and *out_module is the program (the caller destroys it); on failure neither
 * needs freeing. */
vlmc_status_t vlmc_artifact_validate(const vlmc_artifact_t *artifact,
                                     vlmc_manifest_t *out_manifest, vlmc_module_t **out_module);

#endif
