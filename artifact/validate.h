/* What the artifact layer can check of an artifact before anything uses it: the manifest's
 * parameter list against the params section and the program (docs/artifact.md, "What is
 * validated at open"). The runtime's vlmc_artifact_validate (runtime/validate.h) runs this
 * and the backends' kernel-table checks; `vlmc-run` and `vlmc inspect --verify` both go
 * through it. */
#ifndef VLMC_ARTIFACT_VALIDATE_H
#define VLMC_ARTIFACT_VALIDATE_H

#include <stddef.h>

#include "artifact/artifact.h"
#include "artifact/manifest.h"
#include "ir/ir.h"
#include "support/status.h"

/* Every manifest parameter: its nbytes is its shape times its dtype's size; inline, its bytes
 * [offset, offset + nbytes) lie inside the params section (which must then exist) and
 * overlap no other parameter's unless they are the same bytes (same offset and nbytes, and
 * so the same checksum): an alias, which the runtime holds once. No name is listed twice.
 * Every `param` of the (verified) program has an entry whose dtype and shape are its type's.
 * Errors name the artifact, the entry and the numbers ("m.vlmc: manifest:
 * params.tensors[3] 'w': nbytes 2, but bf16[512, 64] is 65536 bytes"). */
vlmc_status_t vlmc_artifact_check_params(const vlmc_artifact_t *artifact,
                                         const vlmc_manifest_t *manifest,
                                         const vlmc_module_t *module);

/* first[i] (manifest->num_params entries): the lowest index whose parameter is the same
 * inline bytes as parameter i (same offset and nbytes), i itself when none is; external
 * parameters are found by name and are their own. */
vlmc_status_t vlmc_manifest_param_aliases(const vlmc_manifest_t *manifest, size_t *first);

#endif
